//! The Decide sheet survives spreadsheet habits (issue 42 point 4): a reviewer sorts it by
//! amount (or, with a reporting currency, by its numeric `value (EUR)` column), filters it,
//! decides and re-saves it, in LibreOffice Calc (headless, driven through its UNO API as a
//! reviewer drives its menus) and in openpyxl, and `recon decisions apply` lands every decision
//! on the case named in its row. A case decided two different ways in one
//! file is refused (the same decision twice applies once); a row whose check cell names
//! another case is refused.

use crate::support::{Backend, Settings, TestEnv, openpyxl_python};
use recon::decisions::result::{FileResult, RowResult, Status};
use rust_decimal::Decimal;
use std::path::{Path, PathBuf};
use std::process::Command;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "NL91ABNA0417164300";
const IBAN_D: &str = "FR7630006000011234567890189";
const IBAN_E: &str = "BE68539007547034";
const IBAN_F: &str = "AT611904300234573201";
const IBAN_C: &str = "IT60X0542811101000000123456";
const IBAN_G: &str = "GB33BUKB20201555555555";
const DAY: &str = "2026-11-10";

/// Seven cases, one reviewer (no second approval): P-4 paid although the ledger says FAILED
/// (12.00 EUR, critical: listed first, smallest), a near miss P-1 (40.00 EUR, line L-1 at
/// 39.50), twins P-2 / P-3 for one line L-2 (25.00 EUR), and lines no payment of ours can be:
/// L-7 310.00 EUR, L-8 1000.00 EUR, L-9 999.00 EUR and L-10 5000 JPY. Sorted as text the
/// amounts would run `999.00`, `5000`, `40.00`, `310.00`, `25.00`, `12.00`, `1000.00`
/// (descending); as numbers 5000, 1000, 999, 310, 40, 25, 12.
async fn job() -> TestEnv {
    job_with(&crate::report::file_email(), "").await
}

/// The night of [`job`] with `extra` job lines and `more` statement lines.
async fn job_with(extra: &str, more: &str) -> TestEnv {
    let env = TestEnv::on(
        Backend::Sqlite,
        Settings {
            extra: extra.to_string(),
            ..Settings::default()
        },
    )
    .await;
    env.import(
        &format!(
            "P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-2,\n\
             P-3,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:30:00Z,2026-11-10T11:30:00Z,A-3,\n\
             P-4,{IBAN_C},12.00,EUR,FAILED,2026-11-10T08:00:00Z,2026-11-10T08:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:30:00Z,,UNKNOWN,,timeout\n\
         A-4,P-4,2026-11-10T08:00:00Z,2026-11-10T08:00:05Z,FAILED,,declined\n",
    )
    .await;
    env.statement(&format!(
        "L-1,,{IBAN_A},39.50,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-2,,{IBAN_B},25.00,EUR,2026-11-10T12:00:00Z,PAYMENT\n\
         L-4,P-4,{IBAN_C},12.00,EUR,2026-11-10T08:30:00Z,PAYMENT\n\
         L-7,,{IBAN_D},310.00,EUR,2026-11-10T16:00:00Z,PAYMENT\n\
         L-8,,{IBAN_E},1000.00,EUR,2026-11-10T16:10:00Z,PAYMENT\n\
         L-9,,{IBAN_F},999.00,EUR,2026-11-10T16:20:00Z,PAYMENT\n\
         L-10,,{IBAN_G},5000,JPY,2026-11-10T16:30:00Z,PAYMENT\n{more}"
    ));
    env
}

/// The case that holds payment or line `id`, as stored now, with its decisions.
async fn case_of(
    env: &TestEnv,
    id: &str,
) -> (
    recon::store::cases::StoredCase,
    Vec<recon::store::cases::DecisionRecord>,
) {
    let db = env.db().await;
    let all = recon::decisions::queue::list(&db, false)
        .await
        .expect("cases");
    let found: Vec<_> = all
        .iter()
        .filter(|c| {
            c.payments.iter().any(|p| p.payment_id == id) || c.lines.iter().any(|(_, l)| l == id)
        })
        .collect();
    assert_eq!(found.len(), 1, "{id}: {found:#?}");
    let shown = recon::decisions::queue::show(&db, &found[0].key)
        .await
        .expect("case");
    db.close().await;
    shown
}

/// Applies `file` as alice through the binary (`recon decisions apply`); returns the exit code
/// and the result file's (case, decision, result, detail) rows.
fn apply_with_recon(env: &TestEnv, file: &Path) -> (Option<i32>, Vec<Vec<String>>) {
    let out = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["decisions", "apply", "--config"])
        .arg(&env.config_path)
        .args(["--actor", "alice"])
        .arg(file)
        .output()
        .expect("recon runs");
    let rows = crate::support::read_columns(
        &FileResult::result_path(file),
        &["case", "decision", "result", "detail"],
    );
    (out.status.code(), rows)
}

/// The Decide sheet of `file` as (case, amount, currency, check) per row, in row order.
fn decide_rows(file: &Path) -> Vec<(String, calamine::Data, String, String)> {
    let (header, rows) = crate::support::sheet_rows(file, "Decide");
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name} column in {header:?}"))
    };
    let (case, amount, currency, check) =
        (col("case"), col("amount"), col("currency"), col("check"));
    rows.iter()
        .map(|r| {
            (
                r[case].to_string(),
                r[amount].clone(),
                r[currency].to_string(),
                r[check].to_string(),
            )
        })
        .collect()
}

/// What every round trip decides: each row found by what it shows (an id in its `whose`
/// cell), each note naming the row's own case, so a decision that lands elsewhere shows. The
/// JPY line L-10 is left undecided (filtered out in Calc).
fn edits() -> serde_json::Value {
    serde_json::json!([
        {"id": "P-4", "decision": "escalate", "note": "P-4 ask the bank"},
        {"id": "P-1", "decision": "failed", "note": "P-1 never left"},
        {"id": "P-2", "confirm": "P-3", "note": "P-2 P-3 invoice says P-3"},
        {"id": "L-7", "decision": "dismiss: written off", "note": "L-7 test transfer"},
        {"id": "L-8", "decision": "escalate", "note": "L-8 ask treasury"},
        {"id": "L-9", "decision": "dismiss: written off", "note": "L-9 refunded"},
    ])
}

/// After a sort by amount (descending) and a re-save: the amounts are numbers in numeric order,
/// every row's check cell still names its own case, and `recon decisions apply` applies every
/// decided row to the case the row shows.
async fn applies_every_row_to_its_case(env: &TestEnv, saved: &Path) {
    let rows = decide_rows(saved);
    let amounts: Vec<(String, String)> = rows
        .iter()
        .map(|(_, a, c, _)| (a.to_string(), c.clone()))
        .collect();
    let expected = [
        ("5000", "JPY"),
        ("1000", "EUR"),
        ("999", "EUR"),
        ("310", "EUR"),
        ("40", "EUR"),
        ("25", "EUR"),
        ("12", "EUR"),
    ]
    .map(|(a, c)| (a.to_string(), c.to_string()));
    assert_eq!(amounts, expected, "sorted by amount, numerically: {rows:?}");
    assert!(
        rows.iter()
            .all(|(_, a, _, _)| matches!(a, calamine::Data::Float(_))),
        "amounts are number cells: {rows:?}"
    );
    for (case, _, _, check) in &rows {
        assert!(
            check.starts_with(&format!("{case} ")),
            "the check travelled with its row: {rows:?}"
        );
    }
    let (code, results) = apply_with_recon(env, saved);
    assert_eq!(results.len(), 6, "{results:?}");
    assert!(
        results.iter().all(|r| r[2] == "applied"),
        "every decided row applies: {results:?}"
    );
    assert_eq!(code, Some(0), "{results:?}");
    // Each decision is on the case its row showed, with that row's note.
    let (p1, d1) = case_of(env, "P-1").await;
    assert_eq!((p1.status.as_str(), d1.len()), ("DECIDED", 1));
    assert_eq!(
        (d1[0].decision.as_str(), d1[0].note.as_str()),
        ("failed", "P-1 never left")
    );
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id IN ('P-1', 'P-2', 'P-3') ORDER BY payment_id")
            .await,
        ["FAILED", "UNKNOWN", "UNKNOWN"]
    );
    let (twins, d23) = case_of(env, "P-2").await;
    assert_eq!(twins.status, "DECIDED");
    let p3 = twins
        .candidates
        .iter()
        .find(|c| c.payment_id == "P-3")
        .expect("P-3 is a candidate");
    assert_eq!(d23.len(), 1);
    assert_eq!(d23[0].decision, format!("confirm {}", p3.number));
    assert_eq!(d23[0].note, "P-2 P-3 invoice says P-3");
    for (id, status, decision) in [
        ("L-7", "DISMISSED", "dismiss: written off"),
        ("P-4", "ESCALATED", "escalate"),
        ("L-8", "ESCALATED", "escalate"),
        ("L-9", "DISMISSED", "dismiss: written off"),
    ] {
        let (c, d) = case_of(env, id).await;
        assert_eq!(c.status, status, "{id}");
        assert_eq!(d.len(), 1, "{id}: {d:?}");
        assert_eq!(d[0].decision, decision, "{id}");
        assert!(d[0].note.starts_with(id), "{id}: {:?}", d[0].note);
    }
    let (jpy, dj) = case_of(env, "L-10").await;
    assert_eq!((jpy.status.as_str(), dj.len()), ("OPEN", 0));
}

/// LibreOffice Calc driven through its UNO API (Python, a headless soffice on a pipe), as a
/// reviewer drives it: a column's filter drop-down "Sort Descending" (a sort of the filter's
/// range, which is what left the hidden check column behind when it ended before it), a
/// standard filter (one currency, or a value of at least some amount), decisions typed into
/// the visible rows, saved as xlsx by Calc's own export filter.
const CALC: &str = r#"
import json, os, re, subprocess, sys, time, uuid
import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.sheet import TableFilterField
from com.sun.star.sheet.FilterOperator import EQUAL, GREATER_EQUAL

src, dst, edits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sort_by, keep = sys.argv[4], json.loads(sys.argv[5])

def prop(name, value):
    p = PropertyValue()
    p.Name, p.Value = name, value
    return p

pipe = "recon_test_" + uuid.uuid4().hex
profile = uno.systemPathToFileUrl(os.path.join(os.path.dirname(os.path.abspath(dst)), "lo-profile"))
office = subprocess.Popen(
    ["soffice", "--headless", "--invisible", "--nologo", "--norestore", "--nodefault",
     "-env:UserInstallation=" + profile,
     "--accept=pipe,name=%s;urp;StarOffice.ComponentContext" % pipe],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
desktop = None
try:
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    ctx = None
    for _ in range(1200):
        try:
            ctx = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
            break
        except Exception:
            if office.poll() is not None:
                sys.exit("soffice exited with %s before it listened" % office.returncode)
            time.sleep(0.1)
    assert ctx, "soffice did not listen within 2 minutes"
    smgr = ctx.ServiceManager
    desktop = smgr.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(os.path.abspath(src)), "_blank", 0,
                                       (prop("Hidden", True),))
    sheet = doc.Sheets.getByName("Decide")
    cur = sheet.createCursor()
    cur.gotoEndOfUsedArea(False)
    last_col, last_row = cur.RangeAddress.EndColumn, cur.RangeAddress.EndRow
    col = {sheet.getCellByPosition(c, 0).String: c for c in range(last_col + 1)}
    cell = lambda name, r: sheet.getCellByPosition(col[name], r)
    order = lambda: [cell("case", r).String for r in range(1, last_row + 1)]
    before = order()
    # The filter drop-down's "Sort Descending": a sort of the filter's range (the sheet's
    # unnamed database range) by the `sort_by` column.
    tab = sheet.RangeAddress.Sheet
    unnamed = doc.getPropertyValue("UnnamedDatabaseRanges")
    assert unnamed.hasByTable(tab), "the Decide sheet has no filter range"
    area = unnamed.getByTable(tab).DataArea
    sf = uno.createUnoStruct("com.sun.star.table.TableSortField")
    sf.Field, sf.IsAscending = col[sort_by] - area.StartColumn, False
    uno.invoke(
        sheet.getCellRangeByPosition(area.StartColumn, area.StartRow, area.EndColumn, area.EndRow),
        "sort",
        ((prop("ContainsHeader", True),
          prop("SortFields", uno.Any("[]com.sun.star.table.TableSortField", (sf,)))),))
    assert order() != before, "the sort moved no row"
    table = sheet.getCellRangeByPosition(0, 0, last_col, last_row)
    fd = table.createFilterDescriptor(True)
    f = TableFilterField()
    if "equal" in keep:
        f.Field, f.Operator, f.IsNumeric, f.StringValue = col[keep["column"]], EQUAL, False, keep["equal"]
    else:
        f.Field, f.Operator, f.IsNumeric, f.NumericValue = col[keep["column"]], GREATER_EQUAL, True, keep["at_least"]
    fd.FilterFields = (f,)
    fd.ContainsHeader = True
    table.filter(fd)
    visible = [r for r in range(1, last_row + 1) if sheet.Rows.getByIndex(r).IsVisible]
    assert len(visible) < last_row, "the filter hid no row"
    for e in edits:
        rows = [r for r in visible if re.search(r"\b%s\b" % re.escape(e["id"]), cell("whose", r).String)]
        assert len(rows) == 1, "%s: visible rows %s" % (e["id"], rows)
        r = rows[0]
        decision = e.get("decision")
        if "confirm" in e:
            m = re.search(r"^(\d+): %s " % re.escape(e["confirm"]), cell("candidates", r).String, re.M)
            assert m, cell("candidates", r).String
            decision = "confirm " + m.group(1)
        cell("decision", r).String = decision
        cell("note", r).String = e.get("note", "")
    doc.storeToURL(uno.systemPathToFileUrl(os.path.abspath(dst)),
                   (prop("FilterName", "Calc MS Excel 2007 XML"),))
finally:
    if desktop is not None:
        try:
            desktop.terminate()
        except Exception:
            pass
    try:
        office.wait(60)
    except subprocess.TimeoutExpired:
        office.kill()
"#;

/// A Python that can drive LibreOffice (`import uno`, Debian's python3-uno, which only the
/// system Python has), or None (with a loud message) when soffice itself is absent. Panics
/// when soffice is there but python3-uno is not.
fn calc_python() -> Option<PathBuf> {
    let runs = |cmd: &mut Command| {
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !runs(Command::new("soffice").arg("--version")) {
        eprintln!(
            "\n!!!!!!!! SKIPPED: no soffice on PATH: the LibreOffice Calc round trip of the \
             Decide sheet did not run (hint: apt-get install -y libreoffice-calc-nogui \
             python3-uno; .ci/run installs them) !!!!!!!!\n"
        );
        return None;
    }
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| runs(Command::new(p).args(["-c", "import uno"])))
        .or_else(|| panic!("soffice is installed but no Python imports uno (hint: apt-get install -y python3-uno)"))
}

/// Runs a round-trip `script` (Calc's or openpyxl's) with `python` on `report`, saved as
/// `saved`: sorted by the `sort_by` column (descending), the rows `keep` keeps visible
/// (`{"column": "currency", "equal": "EUR"}` or `{"column": "value (EUR)", "at_least": 20}`),
/// `edits` decided in them.
fn round_trip(
    python: &Path,
    script: &str,
    (report, saved): (&Path, &Path),
    edits: &serde_json::Value,
    sort_by: &str,
    keep: serde_json::Value,
) {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(report)
        .arg(saved)
        .arg(edits.to_string())
        .arg(sort_by)
        .arg(keep.to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "round trip failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sorted by amount, the rows of one currency kept.
fn by_amount_in_eur() -> serde_json::Value {
    serde_json::json!({"column": "currency", "equal": "EUR"})
}

#[tokio::test]
async fn calc_sorts_by_amount_filters_and_saves_and_every_row_applies_to_its_case() {
    let Some(python) = calc_python() else {
        return;
    };
    let env = job().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let saved = env.path("decided-in-calc.xlsx");
    round_trip(
        &python,
        CALC,
        (&r1.out_dir.join("report.xlsx"), &saved),
        &edits(),
        "amount",
        by_amount_in_eur(),
    );
    applies_every_row_to_its_case(&env, &saved).await;
}

/// openpyxl sorts as a spreadsheet's filter drop-down does: the rows of the filter range,
/// every row's cells (values and styles) kept together, in the order of the sort column
/// (descending; numbers before text as Calc and Excel order them, text by its characters,
/// empty cells last); then hides the rows the filter does not keep, fills the decisions and
/// saves.
const OPENPYXL: &str = r#"
import json, re, sys, copy
import openpyxl
from openpyxl.utils.cell import range_boundaries
src, dst, edits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sort_by, keep = sys.argv[4], json.loads(sys.argv[5])
wb = openpyxl.load_workbook(src)
ws = wb["Decide"]
col = {c.value: i for i, c in enumerate(ws[1])}
min_col, min_row, max_col, max_row = range_boundaries(ws.auto_filter.ref)
rows = [[(ws.cell(row=r, column=c).value, copy.copy(ws.cell(row=r, column=c)._style))
         for c in range(min_col, max_col + 1)]
        for r in range(min_row + 1, max_row + 1)]
a = col[sort_by] - (min_col - 1)
def key(row):
    v = row[a][0]
    return (1, v) if isinstance(v, (int, float)) else (0, str(v or ""))
def kept(r):
    v = ws.cell(row=r, column=col[keep["column"]] + 1).value
    if "equal" in keep:
        return v == keep["equal"]
    return isinstance(v, (int, float)) and v >= keep["at_least"]
before = [row[0][0] for row in rows]
rows.sort(key=key, reverse=True)
assert [row[0][0] for row in rows] != before, "the sort moved no row"
for i, row in enumerate(rows):
    for j, (value, style) in enumerate(row):
        c = ws.cell(row=min_row + 1 + i, column=min_col + j)
        c.value, c._style = value, style
visible = []
for r in range(min_row + 1, max_row + 1):
    hide = not kept(r)
    ws.row_dimensions[r].hidden = hide
    if not hide:
        visible.append(r)
assert len(visible) < max_row - min_row, "the filter hid no row"
cell = lambda name, r: ws.cell(row=r, column=col[name] + 1)
for e in edits:
    found = [r for r in visible if re.search(r"\b%s\b" % re.escape(e["id"]), cell("whose", r).value or "")]
    assert len(found) == 1, "%s: visible rows %s" % (e["id"], found)
    r = found[0]
    decision = e.get("decision")
    if "confirm" in e:
        m = re.search(r"^(\d+): %s " % re.escape(e["confirm"]), cell("candidates", r).value, re.M)
        assert m, cell("candidates", r).value
        decision = "confirm " + m.group(1)
    cell("decision", r).value = decision
    cell("note", r).value = e.get("note", "")
wb.save(dst)
"#;

#[tokio::test]
async fn openpyxl_sorts_by_amount_filters_and_saves_and_every_row_applies_to_its_case() {
    let env = job().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let report = r1.out_dir.join("report.xlsx");
    // Without a reporting currency the sheet has no value column.
    assert!(
        !decide_header(&report)
            .iter()
            .any(|h| h.starts_with("value")),
        "{:?}",
        decide_header(&report)
    );
    let saved = env.path("decided-in-openpyxl.xlsx");
    round_trip(
        &openpyxl_python(),
        OPENPYXL,
        (&report, &saved),
        &edits(),
        "amount",
        by_amount_in_eur(),
    );
    applies_every_row_to_its_case(&env, &saved).await;
}

/// The header cells of the Decide sheet of `file`.
fn decide_header(file: &Path) -> Vec<String> {
    use calamine::Reader as _;
    let mut book: calamine::Xlsx<_> = calamine::open_workbook(file).expect("xlsx");
    let range = book.worksheet_range("Decide").expect("Decide sheet");
    range
        .rows()
        .next()
        .expect("header")
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// The rates file the valued job reads, as the ECB publishes eurofxref.csv: units per 1 EUR.
const RATES_CSV: &str = "Date, USD, JPY, GBP, \n10 November 2026, 1.1252, 162.91, 0.8477, \n";

/// The rate of `currency` per 1 EUR as [`RATES_CSV`] says (the euro is 1), read back from the
/// text this test wrote; None for a currency it does not list.
fn rate_written(currency: &str) -> Option<Decimal> {
    if currency == "EUR" {
        return Some(Decimal::ONE);
    }
    let mut lines = RATES_CSV.lines();
    let header: Vec<&str> = lines.next()?.split(',').map(str::trim).collect();
    let rates: Vec<&str> = lines.next()?.split(',').map(str::trim).collect();
    let i = header.iter().position(|h| *h == currency)?;
    rates.get(i)?.parse().ok()
}

const IBAN_H: &str = "ES9121000418450200051332";
const IBAN_I: &str = "CH9300762011623852957";
const IBAN_J: &str = "SE4550000000058398257466";

/// The night of [`job`] in a job with `reporting_currency = "EUR"` and the ECB rates file
/// [`RATES_CSV`], with three more lines no payment of ours can be: L-11 900.00 GBP, L-12
/// 1200.00 USD and L-13 50.00 CHF (no rate).
async fn valued_job() -> TestEnv {
    let env = job_with(
        &format!(
            "reporting_currency = \"EUR\"\n{}[rates]\npath = \"rates/eurofxref-{{date}}.csv\"\n",
            crate::report::file_email()
        ),
        &format!(
            "L-11,,{IBAN_H},900.00,GBP,2026-11-10T16:40:00Z,PAYMENT\n\
             L-12,,{IBAN_I},1200.00,USD,2026-11-10T16:50:00Z,PAYMENT\n\
             L-13,,{IBAN_J},50.00,CHF,2026-11-10T17:00:00Z,PAYMENT\n"
        ),
    )
    .await;
    std::fs::create_dir_all(env.path("rates")).expect("rates dir");
    env.write("rates/eurofxref-2026-11-10.csv", RATES_CSV);
    env
}

/// Each case of [`valued_job`] by an id it holds, with its money at risk (the twins P-2 and
/// P-3 risk their one line's 25.00).
const VALUED_CASES: [(&str, &str, &str); 10] = [
    ("P-4", "12.00", "EUR"),
    ("P-1", "40.00", "EUR"),
    ("P-2", "25.00", "EUR"),
    ("L-7", "310.00", "EUR"),
    ("L-8", "1000.00", "EUR"),
    ("L-9", "999.00", "EUR"),
    ("L-10", "5000", "JPY"),
    ("L-11", "900.00", "GBP"),
    ("L-12", "1200.00", "USD"),
    ("L-13", "50.00", "CHF"),
];

/// The value in EUR of case `id` at the rates this test wrote, to the cent; None without a
/// rate.
fn value_in_eur(id: &str) -> Option<Decimal> {
    let (_, amount, cur) = VALUED_CASES
        .iter()
        .find(|(i, _, _)| *i == id)
        .expect("a case of the night");
    let amount: Decimal = amount.parse().expect("amount");
    Some((amount / rate_written(cur)?).round_dp(2))
}

/// The ids of [`VALUED_CASES`] by value, largest first, the one without a rate last: the order
/// of a sort of the value column, descending (an empty cell sorts after every number).
fn by_value() -> Vec<&'static str> {
    let mut ids: Vec<&str> = VALUED_CASES.iter().map(|(id, _, _)| *id).collect();
    ids.sort_by_key(|id| {
        let v = value_in_eur(id);
        (v.is_none(), std::cmp::Reverse(v))
    });
    ids
}

/// What the valued round trips decide: the rows kept by a filter of the value column at
/// 20 EUR or more (P-4's 12.00 and L-13 without a value are filtered out, left undecided).
fn valued_edits() -> serde_json::Value {
    serde_json::json!([
        {"id": "P-1", "decision": "failed", "note": "P-1 never left"},
        {"id": "P-2", "confirm": "P-3", "note": "P-2 P-3 invoice says P-3"},
        {"id": "L-7", "decision": "dismiss: written off", "note": "L-7 test transfer"},
        {"id": "L-8", "decision": "escalate", "note": "L-8 ask treasury"},
        {"id": "L-9", "decision": "dismiss: written off", "note": "L-9 refunded"},
        {"id": "L-10", "decision": "escalate", "note": "L-10 ask the bank"},
        {"id": "L-11", "decision": "dismiss: refund requested", "note": "L-11 refund"},
        {"id": "L-12", "decision": "escalate", "note": "L-12 ask treasury"},
    ])
}

/// The Decide sheet's value column as openpyxl reads it: (case key, the Python type name of
/// the cell's value, the value as JSON).
const OPENPYXL_VALUES: &str = r#"
import json, sys
import openpyxl
ws = openpyxl.load_workbook(sys.argv[1])["Decide"]
col = {c.value: i for i, c in enumerate(ws[1])}
out = []
for row in ws.iter_rows(min_row=2, values_only=True):
    v = row[col[sys.argv[2]]]
    out.append([row[col["case"]], type(v).__name__, v])
print(json.dumps(out))
"#;

fn openpyxl_values(file: &Path) -> Vec<(String, String, serde_json::Value)> {
    let out = Command::new(openpyxl_python())
        .arg("-c")
        .arg(OPENPYXL_VALUES)
        .arg(file)
        .arg("value (EUR)")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// After a sort by `value (EUR)` (descending), a filter of it and a re-save: the column is
/// right after `currency`; its cells are numbers (openpyxl reads a float or an int, calamine a
/// Float)
/// equal to the value this test computes from the rates file it wrote, in numeric order, the
/// case without a rate empty and last; every decided row applies to the case it shows, and
/// the filtered-out cases stay open.
async fn values_sort_and_every_row_applies(env: &TestEnv, saved: &Path) {
    let header = decide_header(saved);
    let at = |name: &str| header.iter().position(|h| h == name);
    assert_eq!(
        at("value (EUR)"),
        at("currency").map(|c| c + 1),
        "{header:?}"
    );
    let mut key_of = std::collections::BTreeMap::new();
    for (id, _, _) in VALUED_CASES {
        key_of.insert(id, key_and_fingerprint(env, id).await.0);
    }
    let want: Vec<String> = by_value().iter().map(|id| key_of[id].clone()).collect();
    let values = openpyxl_values(saved);
    let order: Vec<String> = values.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(order, want, "sorted by value, numerically: {values:?}");
    for (id, key) in &key_of {
        let (_, ty, v) = values.iter().find(|(k, _, _)| k == key).expect("row");
        match value_in_eur(id) {
            Some(expected) => {
                // A whole number reads back as a Python int (1000.00 is stored as 1000).
                assert!(
                    ty == "float" || ty == "int",
                    "{id}: a number cell: {values:?}"
                );
                let got: Decimal = v.to_string().parse().expect("decimal");
                assert_eq!(got, expected, "{id}");
            }
            None => assert_eq!(ty, "NoneType", "{id}: no rate, no number: {values:?}"),
        }
    }
    // calamine (what `recon decisions apply` reads with) sees the same number cells.
    {
        use calamine::Reader as _;
        let mut book: calamine::Xlsx<_> = calamine::open_workbook(saved).expect("xlsx");
        let range = book.worksheet_range("Decide").expect("Decide sheet");
        let c = at("value (EUR)").expect("value column");
        let floats = range
            .rows()
            .skip(1)
            .filter(|r| matches!(r[c], calamine::Data::Float(_)))
            .count();
        assert_eq!(floats, VALUED_CASES.len() - 1);
    }
    let (code, results) = apply_with_recon(env, saved);
    assert_eq!(results.len(), 8, "{results:?}");
    assert!(
        results.iter().all(|r| r[2] == "applied"),
        "every decided row applies: {results:?}"
    );
    assert_eq!(code, Some(0), "{results:?}");
    for (id, status) in [
        ("P-1", "DECIDED"),
        ("P-2", "DECIDED"),
        ("L-7", "DISMISSED"),
        ("L-8", "ESCALATED"),
        ("L-9", "DISMISSED"),
        ("L-10", "ESCALATED"),
        ("L-11", "DISMISSED"),
        ("L-12", "ESCALATED"),
        ("P-4", "OPEN"),
        ("L-13", "OPEN"),
    ] {
        let (c, d) = case_of(env, id).await;
        assert_eq!(c.status, status, "{id}");
        if status == "OPEN" {
            assert!(d.is_empty(), "{id}: {d:?}");
        } else {
            assert_eq!(d.len(), 1, "{id}: {d:?}");
            assert!(d[0].note.starts_with(id), "{id}: {:?}", d[0].note);
        }
    }
}

/// Sorted by value, the rows worth 20 EUR or more kept.
fn by_value_at_least_20() -> serde_json::Value {
    serde_json::json!({"column": "value (EUR)", "at_least": 20})
}

#[tokio::test]
async fn calc_sorts_by_value_filters_and_saves_and_every_row_applies_to_its_case() {
    let Some(python) = calc_python() else {
        return;
    };
    let env = valued_job().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let saved = env.path("valued-in-calc.xlsx");
    round_trip(
        &python,
        CALC,
        (&r1.out_dir.join("report.xlsx"), &saved),
        &valued_edits(),
        "value (EUR)",
        by_value_at_least_20(),
    );
    values_sort_and_every_row_applies(&env, &saved).await;
}

#[tokio::test]
async fn openpyxl_sorts_by_value_filters_and_saves_and_every_row_applies_to_its_case() {
    let env = valued_job().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let saved = env.path("valued-in-openpyxl.xlsx");
    round_trip(
        &openpyxl_python(),
        OPENPYXL,
        (&r1.out_dir.join("report.xlsx"), &saved),
        &valued_edits(),
        "value (EUR)",
        by_value_at_least_20(),
    );
    values_sort_and_every_row_applies(&env, &saved).await;
}

/// (key, fingerprint) of the case holding `id`, as a run's Decide sheet writes them.
async fn key_and_fingerprint(env: &TestEnv, id: &str) -> (String, String) {
    let (c, _) = case_of(env, id).await;
    (c.key, c.fingerprint)
}

fn row_of(r: &FileResult, row_no: u32) -> &RowResult {
    r.rows
        .iter()
        .find(|x| x.row_no == row_no)
        .unwrap_or_else(|| panic!("no row {row_no}: {r:#?}"))
}

async fn apply(env: &TestEnv, file: &Path) -> FileResult {
    let db = env.db().await;
    let r = recon::decisions::apply_file(&db, &env.config().decisions, file, "alice")
        .await
        .expect("apply");
    db.close().await;
    r
}

/// One file deciding L-7 two ways (dismiss, then escalate further down) refuses both rows and
/// leaves the case open; L-8 decided twice the same way applies once; L-9 applies.
#[tokio::test]
async fn a_case_decided_two_ways_in_one_file_is_refused_and_the_others_apply() {
    let env = job().await;
    env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let (k7, f7) = key_and_fingerprint(&env, "L-7").await;
    let (k8, f8) = key_and_fingerprint(&env, "L-8").await;
    let (k9, f9) = key_and_fingerprint(&env, "L-9").await;
    let row = |k: &str, f: &str, d: &str, note: &str| {
        [
            k.to_string(),
            format!("{k} {f}"),
            d.to_string(),
            note.to_string(),
            String::new(),
        ]
    };
    let file = env.path("twice.xlsx");
    crate::support::write_decide_rows(
        &file,
        &[
            row(&k7, &f7, "dismiss: written off", "a test transfer"), // row 2
            row(&k8, &f8, "escalate", "ask treasury"),                // row 3
            row(&k9, &f9, "dismiss: written off", "refunded"),        // row 4
            row(&k8, &f8, "Escalate", "ask treasury"),                // row 5: the same as row 3
            row(&k7, &f7, "escalate", "not sure"), // row 6: another decision for L-7
        ],
    );
    let r = apply(&env, &file).await;
    assert_eq!(r.rows.len(), 5, "{r:#?}");
    for n in [2, 6] {
        let x = row_of(&r, n);
        assert_eq!(x.status, Status::Refused, "{r:#?}");
        assert!(
            x.detail
                .contains(&format!("case {k7} is decided 2 ways in this file"))
                && x.detail.contains("row 2: dismiss")
                && x.detail.contains("row 6: escalate"),
            "{}",
            x.detail
        );
    }
    assert_eq!(row_of(&r, 3).status, Status::Applied, "{r:#?}");
    assert_eq!(row_of(&r, 4).status, Status::Applied, "{r:#?}");
    let copy = row_of(&r, 5);
    assert_eq!(copy.status, Status::Unchanged, "{r:#?}");
    assert!(
        copy.detail.contains("same decision as row 3"),
        "{}",
        copy.detail
    );
    // L-7 is as it was: open, no decision, its ticket open.
    let (c7, d7) = case_of(&env, "L-7").await;
    assert_eq!((c7.status.as_str(), d7.len()), ("OPEN", 0), "{d7:?}");
    assert_eq!(
        env.texts("SELECT status FROM review_tickets WHERE line_ids = 'psp:L-7'")
            .await,
        ["OPEN"]
    );
    // L-8 escalated once; L-9 dismissed.
    let (c8, d8) = case_of(&env, "L-8").await;
    assert_eq!((c8.status.as_str(), d8.len()), ("ESCALATED", 1), "{d8:?}");
    let (c9, _) = case_of(&env, "L-9").await;
    assert_eq!(c9.status, "DISMISSED");
}

/// A row whose check cell was copied from another row (it names L-8's case, its case cell
/// L-7's) is refused with why, and decides neither case; L-8's own row applies.
#[tokio::test]
async fn a_check_copied_from_another_row_is_refused() {
    let env = job().await;
    env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let (k7, _) = key_and_fingerprint(&env, "L-7").await;
    let (k8, f8) = key_and_fingerprint(&env, "L-8").await;
    let file = env.path("copied.xlsx");
    let check8 = format!("{k8} {f8}");
    crate::support::write_decide_rows(
        &file,
        &[
            [
                k7.clone(),
                check8.clone(),
                "dismiss: written off".into(),
                "L-7 test".into(),
                String::new(),
            ],
            [
                k8.clone(),
                check8,
                "escalate".into(),
                "L-8 ask".into(),
                String::new(),
            ],
        ],
    );
    let r = apply(&env, &file).await;
    let copied = row_of(&r, 2);
    assert_eq!(copied.status, Status::Refused, "{r:#?}");
    assert!(
        copied
            .detail
            .contains(&format!("check cell names case {k8}"))
            && copied.detail.contains(&k7),
        "{}",
        copied.detail
    );
    assert_eq!(row_of(&r, 3).status, Status::Applied, "{r:#?}");
    let (c7, d7) = case_of(&env, "L-7").await;
    assert_eq!((c7.status.as_str(), d7.len()), ("OPEN", 0));
    let (c8, d8) = case_of(&env, "L-8").await;
    assert_eq!((c8.status.as_str(), d8.len()), ("ESCALATED", 1));
    assert_eq!(d8[0].note, "L-8 ask");
}

/// docs/operations.md "Deciding in the spreadsheet" names every column the Decide sheet has.
#[test]
fn the_operations_guide_lists_every_decide_column() {
    let ops = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("operations.md");
    let start = ops
        .find("### Deciding in the spreadsheet")
        .expect("the section");
    let section = &ops[start..];
    let section = &section[..section[4..].find("\n### ").map_or(section.len(), |e| e + 4)];
    for c in recon::report::xlsx::DECIDE_COLUMNS {
        assert!(
            section.contains(&format!("`{c}`")),
            "docs/operations.md does not describe the Decide column {c:?}"
        );
    }
}
