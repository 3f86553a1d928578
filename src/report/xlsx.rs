//! `report.xlsx`: a Summary sheet, a Cases sheet (one row per decision, see
//! [`super::cases`]), a Decide sheet (one row per open case, where a reviewer picks a decision
//! that `recon decisions apply` reads back) and one sheet per outcome [`Family`], with a frozen
//! header, an autofilter, money as numbers in a currency format and account numbers masked.
//!
//! Text from statements is written as string cells *and* passed through
//! [`csv_safe`]: a string cell is never evaluated, but a reviewer
//! who saves the sheet as CSV must not get a live formula either. Numbers stay numbers, so a
//! negative amount is a negative number, not text.

use super::{Family, Item, Money, ReportView, exponent, total_text, utc};
use crate::outputs::csv_safe;
use anyhow::{Context, Result};
use rust_decimal::prelude::ToPrimitive;
use rust_xlsxwriter::{
    DataValidation, DataValidationErrorStyle, Format, Workbook, Worksheet, XlsxError,
};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

/// Rows an XLSX sheet holds besides its header.
const MAX_ROWS: usize = 1_048_575;

/// Columns of every family sheet.
pub const COLUMNS: [&str; 17] = [
    "severity",
    "outcome",
    "payment_id",
    "line_ids",
    "status",
    "amount",
    "currency",
    "line_amount",
    "line_currency",
    "recipient",
    "reference",
    "started_at",
    "booked_at",
    "age_days",
    "action",
    "detail",
    "source_lines",
];

/// Cell formats, one money format per currency.
pub(crate) struct Formats {
    header: Format,
    money: BTreeMap<&'static str, Format>,
    /// Plain amounts by the number of decimals (the currency is in a column of its own).
    decimals: BTreeMap<u32, Format>,
}

impl Formats {
    /// A bold header and no money format yet.
    pub(crate) fn new() -> Formats {
        Formats {
            header: Format::new().set_bold(),
            money: BTreeMap::new(),
            decimals: BTreeMap::new(),
        }
    }

    /// `#,##0.00` with the currency's number of decimals and no currency code: for a sheet
    /// whose currency stands in its own column.
    fn decimals(&mut self, currency: &str) -> &Format {
        let e = exponent(currency);
        self.decimals.entry(e).or_insert_with(|| {
            let digits = if e == 0 {
                "#,##0".to_string()
            } else {
                format!("#,##0.{}", "0".repeat(e as usize))
            };
            Format::new().set_num_format(digits)
        })
    }

    fn money(&mut self, currency: &'static str) -> &Format {
        self.money.entry(currency).or_insert_with(|| {
            let e = exponent(currency) as usize;
            let digits = if e == 0 {
                "#,##0".to_string()
            } else {
                format!("#,##0.{}", "0".repeat(e))
            };
            // The code is a literal in the format; negative amounts keep their minus sign.
            Format::new().set_num_format(format!("{digits} \"{currency}\""))
        })
    }
}

/// The cell value of an exact amount, when a number cell can hold it exactly. XLSX stores
/// numbers as IEEE doubles; an amount the double would change (more than ~15 significant
/// digits) is `None` and written as its exact text instead, so the sheet never shows an amount
/// other than the one reconciled (results.csv always keeps the exact decimal text).
fn number(d: rust_decimal::Decimal) -> Option<f64> {
    let v = d.to_f64().filter(|v| v.is_finite())?;
    // Rust prints the shortest text that reads back as `v`: equal to `d` only if exact.
    let back: rust_decimal::Decimal = format!("{v}").parse().ok()?;
    (back == d).then_some(v)
}

/// An amount as a number cell in its currency format, or as exact text (see [`number`]).
pub(crate) fn write_amount(
    ws: &mut Worksheet,
    fmts: &mut Formats,
    (row, col): (u32, u16),
    d: rust_decimal::Decimal,
    currency: &'static str,
) -> Result<(), XlsxError> {
    match number(d) {
        Some(v) => ws.write_number_with_format(row, col, v, fmts.money(currency))?,
        None => ws.write_string(row, col, format!("{d} {currency}"))?,
    };
    Ok(())
}

fn write_money(
    ws: &mut Worksheet,
    fmts: &mut Formats,
    row: u32,
    col: u16,
    m: Money,
) -> Result<(), XlsxError> {
    write_amount(ws, fmts, (row, col), m.decimal(), m.currency)
}

/// Excel's limit for the text of one cell, in UTF-16 code units.
const MAX_CELL_UNITS: usize = 32_767;

/// `s` cut to fit one cell, ending with a marker that says so and how long the value was. The
/// report is a view: results.csv and diff.csv keep the whole value.
fn fit_cell(s: &str) -> std::borrow::Cow<'_, str> {
    // A UTF-8 byte never stands for more than one UTF-16 unit.
    if s.len() <= MAX_CELL_UNITS || s.encode_utf16().count() <= MAX_CELL_UNITS {
        return s.into();
    }
    let marker = format!("… [truncated, {} chars]", s.chars().count());
    let budget = MAX_CELL_UNITS - marker.encode_utf16().count();
    let mut units = 0;
    let end = s
        .char_indices()
        .find(|(_, c)| {
            units += c.len_utf16();
            units > budget
        })
        .map_or(s.len(), |(i, _)| i);
    format!("{}{marker}", &s[..end]).into()
}

/// A text cell from any source, neutralised and cut to Excel's cell limit.
pub(crate) fn write_text(ws: &mut Worksheet, row: u32, col: u16, s: &str) -> Result<(), XlsxError> {
    if !s.is_empty() {
        ws.write_string(row, col, fit_cell(&csv_safe(s)).as_ref())?;
    }
    Ok(())
}

/// A count or a number of days as a number cell: a double holds every integer up to 2^53
/// exactly, and these never come near it (saturates there rather than round).
pub(crate) fn exact_number(n: impl TryInto<i64>) -> f64 {
    const MAX_EXACT: i64 = 1 << 53;
    let n = n
        .try_into()
        .unwrap_or(MAX_EXACT)
        .clamp(-MAX_EXACT, MAX_EXACT);
    // Exact: |n| ≤ 2^53 fits a double's 53-bit significand.
    #[allow(clippy::cast_precision_loss)]
    let x = n as f64;
    x
}

pub(crate) fn header(ws: &mut Worksheet, fmts: &Formats, cols: &[&str]) -> Result<(), XlsxError> {
    for (c, name) in cols.iter().enumerate() {
        ws.write_string_with_format(0, c as u16, *name, &fmts.header)?;
    }
    ws.set_freeze_panes(1, 0)?;
    Ok(())
}

/// Writes the workbook to `path`, as it is compressed: the whole file is never held (the
/// bytes are [`to_buffer`]'s).
/// The streamed sheets' temporary files go beside `path` (a run's own `.tmp` folder), not to
/// the system's temp folder: a pod with a read-only root needs no writable /tmp for its report.
pub fn write(path: &Path, view: &ReportView) -> Result<()> {
    let mut wb = build(view, path.parent()).context("building report.xlsx")?;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    wb.save_to_writer(&mut out)
        .context("building report.xlsx")
        .and_then(|()| out.flush().map_err(Into::into))
        .with_context(|| format!("writing {}", path.display()))
}

/// The workbook as bytes.
pub fn to_buffer(view: &ReportView) -> Result<Vec<u8>> {
    build(view, None)
        .and_then(|mut wb| wb.save_to_buffer())
        .context("building report.xlsx")
}

/// The decide-workbook the email carries when report.xlsx is too large: the Summary sheet and
/// the Decide sheet of the first `cases` listed cases (severity, then value), written by the
/// same functions as report.xlsx, so `recon decisions apply` and the inbox read it alike.
pub fn decide_workbook(view: &ReportView, cases: usize) -> Result<Vec<u8>> {
    let (mut wb, mut fmts) = workbook(view);
    // Small, built a few times to fit a limit: the default compression holds more cases.
    wb.set_zip_compression_level(6);
    (|| {
        summary_sheet(wb.add_worksheet(), &mut fmts, view)?;
        decide_sheet(wb.add_worksheet(), &mut fmts, view, cases)?;
        wb.save_to_buffer()
    })()
    .context("building decide.xlsx")
}

/// An empty workbook with the report's properties and formats.
fn workbook(view: &ReportView) -> (Workbook, Formats) {
    let mut wb = Workbook::new();
    // Level 2 instead of the default 6: several times faster to compress for a file about a
    // fifth larger (level 1 is larger again), so a large report still fits the attachment
    // limit more often than not.
    wb.set_zip_compression_level(2);
    // A fixed creation time keeps the file's metadata a function of the run.
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&view.summary.as_of) {
        let t = t.with_timezone(&chrono::Utc);
        wb.set_properties(
            &rust_xlsxwriter::DocProperties::new()
                .set_title(format!("recon run {}", view.summary.run_id))
                .set_creation_datetime(&t),
        );
    }
    (wb, Formats::new())
}

/// The workbook, every sheet written (the family and Cases sheets to temporary files, in
/// `tempdir` when given, else the system's temp folder).
fn build(view: &ReportView, tempdir: Option<&Path>) -> Result<Workbook, XlsxError> {
    let (mut wb, mut fmts) = workbook(view);
    if let Some(dir) = tempdir.filter(|d| !d.as_os_str().is_empty()) {
        wb.set_tempdir(dir)?;
    }
    summary_sheet(wb.add_worksheet(), &mut fmts, view)?;
    cases_sheet(wb.add_worksheet_with_constant_memory()?, &mut fmts, view)?;
    // Every open case: as large as the Cases sheet, streamed the same way (its strings inline,
    // not in the shared table a small decide.xlsx uses).
    decide_sheet(
        wb.add_worksheet_with_constant_memory()?,
        &mut fmts,
        view,
        MAX_ROWS,
    )?;
    for f in Family::ALL {
        // Family sheets can hold 100k+ rows at scale: streamed to a temporary file row by
        // row, so their cells are not all held in memory until the workbook is saved.
        family_sheet(wb.add_worksheet_with_constant_memory()?, &mut fmts, view, f)?;
    }
    Ok(wb)
}

fn summary_sheet(
    ws: &mut Worksheet,
    fmts: &mut Formats,
    view: &ReportView,
) -> Result<(), XlsxError> {
    let s = &view.summary;
    let (transitions, tickets) = view.effects();
    ws.set_name("Summary")?;
    let cols = ["outcome", "family", "count", "amount", "currency"];
    header(ws, fmts, &cols)?;
    let mut r = 1u32;
    // One row per outcome and currency (one row with no amount when the count is zero), in
    // family order.
    for (family, o, t) in view.all_outcomes() {
        let write_row = |ws: &mut Worksheet, r: u32| -> Result<(), XlsxError> {
            ws.write_string(r, 0, o.as_str())?;
            ws.write_string(r, 1, family.as_str())?;
            ws.write_number(r, 2, exact_number(t.count))?;
            Ok(())
        };
        if t.amounts.is_empty() {
            write_row(ws, r)?;
            r += 1;
        }
        for (cur, sum) in &t.amounts {
            write_row(ws, r)?;
            let d = rust_decimal::Decimal::try_from_i128_with_scale(*sum, exponent(cur));
            match d {
                Ok(d) => write_amount(ws, fmts, (r, 3), d, cur)?,
                Err(_) => {
                    ws.write_string(r, 3, total_text(*sum, cur))?;
                }
            }
            ws.write_string(r, 4, *cur)?;
            r += 1;
        }
    }
    ws.autofilter(0, 0, r - 1, (cols.len() - 1) as u16)?;
    // Run facts to the right of the table, so the filter range stays a clean table.
    let c = cols.len() as u16 + 1;
    // Files that could not be read come first: critical, whatever the rows say.
    let mut facts: Vec<(String, String)> = s
        .unreadable_inputs
        .iter()
        .map(|f| {
            (
                "CRITICAL: unreadable file".into(),
                format!(
                    "{} {} ({}): nothing in it was used, its days are incomplete: {}",
                    f.source, f.path, f.period, f.error
                ),
            )
        })
        .collect();
    facts.extend::<[(String, String); 10]>([
        ("run id".into(), s.run_id.clone()),
        (
            "range".into(),
            format!("{} .. {}", s.range_from, s.range_to),
        ),
        ("as of".into(), s.as_of.clone()),
        (
            "dry run".into(),
            if s.dry_run { "yes" } else { "no" }.into(),
        ),
        ("payments in scope".into(), s.payments_in_scope.to_string()),
        ("statement lines".into(), s.statement_lines.to_string()),
        ("rejected lines".into(), s.rejected_lines.to_string()),
        ("transitions".into(), transitions),
        ("tickets".into(), tickets),
        ("rules sha256".into(), s.rules_hash.clone()),
    ]);
    for i in &s.inputs {
        facts.push((
            format!("input {}", i.source),
            format!(
                "{} ({} lines, {} rejected, sha256 {})",
                i.path, i.lines, i.rejected, i.sha256
            ),
        ));
    }
    // The money at risk in the reporting currency (values for ordering and totals only).
    if let Some((v, t)) = view.value_totals() {
        let label = |what: &str| format!("{what} ({}, for ordering)", v.currency);
        let value = |d| crate::report::cases::rounded_value(d, &v.currency).to_string();
        facts.push((label("total at risk"), value(t.total)));
        for (sev, d) in &t.by_severity {
            facts.push((label(&format!("at risk {}", sev.as_str())), value(*d)));
        }
        if t.unvalued > 0 {
            facts.push((
                label("cases without a rate"),
                format!(
                    "{} ({})",
                    t.unvalued,
                    t.missing.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        facts.push((label("rates"), v.sources_text()));
    }
    for w in &s.warnings {
        facts.push(("completeness warning".into(), w.clone()));
    }
    for f in Family::ALL {
        let (shown, n) = (family_sheet_rows(view, f), view.family_rows(f));
        if shown < n {
            facts.push((
                "not listed".into(),
                format!(
                    "sheet {} lists the first {} of {} rows; every row is in diff.csv",
                    f.title(),
                    crate::money::count(shown),
                    crate::money::count(n),
                ),
            ));
        }
    }
    ws.write_string_with_format(0, c, "run", &fmts.header)?;
    ws.write_string_with_format(0, c + 1, "value", &fmts.header)?;
    for (k, (name, value)) in facts.iter().enumerate() {
        write_text(ws, k as u32 + 1, c, name)?;
        write_text(ws, k as u32 + 1, c + 1, value)?;
    }
    ws.set_column_width(0, 24)?;
    ws.set_column_width(1, 16)?;
    ws.set_column_width(3, 16)?;
    ws.set_column_width(c, 22)?;
    ws.set_column_width(c + 1, 60)?;
    Ok(())
}

/// Columns of the Cases sheet.
pub const CASE_COLUMNS: [&str; 13] = [
    "case",
    "severity",
    "what",
    "payments",
    "lines",
    "recipient",
    "amount",
    "currency",
    "why",
    "candidates",
    "tickets",
    "age_days",
    "fingerprint",
];

/// One row per case, most severe first: the decision's key, what and whose, the money at
/// risk (a number when the case has one currency), why, the numbered candidates and the
/// fingerprint of the evidence.
fn cases_sheet(ws: &mut Worksheet, fmts: &mut Formats, view: &ReportView) -> Result<(), XlsxError> {
    ws.set_name("Cases")?;
    for (c, w) in [
        (0u16, 20.0),
        (2, 24.0),
        (3, 18.0),
        (4, 18.0),
        (6, 14.0),
        (8, 60.0),
        (9, 60.0),
    ] {
        ws.set_column_width(c, w)?;
    }
    header(ws, fmts, &CASE_COLUMNS)?;
    let mut r = 0u32;
    for c in view.cases.iter().take(MAX_ROWS) {
        r += 1;
        write_text(ws, r, 0, &c.key)?;
        write_text(ws, r, 1, c.severity.as_str())?;
        write_text(ws, r, 2, &c.what())?;
        let payments: Vec<String> = c.payments.iter().map(|p| p.to_string()).collect();
        write_text(ws, r, 3, &payments.join(";"))?;
        write_text(ws, r, 4, &c.lines.join(";"))?;
        write_text(ws, r, 5, &c.recipient)?;
        match c.at_risk.as_slice() {
            [] => {}
            [m] => {
                write_money(ws, fmts, r, 6, *m)?;
                write_text(ws, r, 7, m.currency)?;
            }
            many => {
                let text: Vec<String> = many.iter().map(|m| m.text()).collect();
                write_text(ws, r, 6, &text.join(";"))?;
                let curs: Vec<&str> = many.iter().map(|m| m.currency).collect();
                write_text(ws, r, 7, &curs.join(";"))?;
            }
        }
        write_text(ws, r, 8, &c.why(&view.items))?;
        let candidates: Vec<String> = c.candidates.iter().map(|k| k.text()).collect();
        write_text(ws, r, 9, &candidates.join("\n"))?;
        ws.write_number(r, 10, exact_number(c.members.len()))?;
        ws.write_number(r, 11, exact_number(c.age_days))?;
        write_text(ws, r, 12, &c.fingerprint)?;
    }
    ws.autofilter(0, 0, r.max(1), (CASE_COLUMNS.len() - 1) as u16)?;
    Ok(())
}

/// Name of the sheet where reviewers decide.
pub const DECIDE_SHEET: &str = "Decide";

/// Columns of the Decide sheet. `decision`, `note` and `reviewer` are the reviewer's (yellow);
/// `amount` is a number in its currency's decimals, `currency` beside it, so a sort by amount
/// is numeric; `check` (hidden, but inside the filter range so a sort moves it with its row)
/// holds the case key and the fingerprint of the evidence the row shows, which
/// `recon decisions apply` compares with the row's `case` cell and with the case as it is then.
/// With a reporting currency a numeric `value (EUR)` column follows `currency`
/// ([`decide_value_header`]); the reader finds every column by its header name, so it is not
/// listed here.
pub const DECIDE_COLUMNS: [&str; 14] = [
    "case",
    "severity",
    "what",
    "whose",
    "amount",
    "currency",
    "why",
    "candidates",
    "offered",
    "decision",
    "note",
    "reviewer",
    "status",
    "check",
];

/// The header of the Decide sheet's value column, after `currency`, when the job has a
/// reporting currency: `value (EUR)`. Its cells are the case's value in that currency
/// ([`super::cases::Case::value`], rounded to the currency's minor units), numbers in its
/// decimals, so a sort by value is numeric; empty when a currency of the case has no rate.
pub fn decide_value_header(reporting_currency: &str) -> String {
    format!("value ({reporting_currency})")
}

/// The Decide sheet's columns: [`DECIDE_COLUMNS`], and with a reporting currency its value
/// column after `currency`.
struct DecideLayout {
    /// Header cells, in order.
    header: Vec<String>,
    /// The value column's position, with a reporting currency.
    value: Option<u16>,
}

impl DecideLayout {
    fn new(reporting_currency: Option<&str>) -> DecideLayout {
        let mut header: Vec<String> = DECIDE_COLUMNS.iter().map(|c| c.to_string()).collect();
        let value = reporting_currency.map(|cur| {
            let at = DECIDE_COLUMNS
                .iter()
                .position(|c| *c == "currency")
                .map_or(header.len(), |p| p + 1);
            header.insert(at, decide_value_header(cur));
            at as u16
        });
        DecideLayout { header, value }
    }

    /// Position of a column of [`DECIDE_COLUMNS`] by name.
    fn col(&self, name: &str) -> u16 {
        self.header.iter().position(|c| c == name).unwrap_or(0) as u16
    }
}

/// The hidden `check` cell of a case: its key and fingerprint, one space apart.
pub fn check_text(key: &str, fingerprint: &str) -> String {
    format!("{key} {fingerprint}")
}

/// The drop-down of a row: every offered decision when the list fits Excel's 255 characters;
/// otherwise the ones that fit, with a warning (not a stop) for anything typed, and the full
/// range in the input message (`recon decisions apply` checks every value anyway).
fn decide_validation(choices: &[String]) -> Result<DataValidation, XlsxError> {
    let all = choices.join(",");
    let mut v = if all.encode_utf16().count() <= 255 {
        DataValidation::new().allow_list_strings(choices)?
    } else {
        let mut shown: Vec<&String> = Vec::new();
        // The non-confirm choices first (they are short), then as many confirms as fit; a
        // long list of dismiss reasons is cut where the list is full too (typing any offered
        // decision is still accepted: the error style is a warning).
        let (confirms, rest): (Vec<&String>, Vec<&String>) =
            choices.iter().partition(|c| c.starts_with("confirm"));
        let mut len = 0;
        for c in rest.into_iter().chain(confirms) {
            if len + c.len() + 1 > 255 {
                break;
            }
            len += c.len() + 1;
            shown.push(c);
        }
        DataValidation::new()
            .allow_list_strings(&shown)?
            .set_error_style(DataValidationErrorStyle::Warning)
            .set_input_message(format!(
                "{} (type any of them)",
                choices.first().map(String::as_str).unwrap_or_default()
            ))?
    };
    v = v
        .ignore_blank(true)
        .set_error_message("Not a decision offered for this case: see the offered column.")?;
    Ok(v)
}

/// One row per case that waits for a decision (not settled on the evidence it has now), most
/// severe first: what and whose, the money (a number, its currency beside it; with a
/// reporting currency its value in it, a number too, empty without a rate), why, the
/// numbered candidates (one per line), the decisions offered, the reviewer's three cells
/// (yellow, with a drop-down of exactly the offered decisions), what earlier decisions left
/// (`escalated by …`, waiting for a second reviewer) and the hidden check cell.
///
/// The filter range spans every column, the hidden check included, so a sort (from a filter
/// drop-down or Data > Sort) moves each row's check with its case. The sheet is not protected:
/// neither Excel (locked cells) nor Calc sorts a protected sheet, and a protection without a
/// password proves nothing; what `recon decisions apply` trusts is the check cell, which must
/// name the row's own case and evidence recon wrote.
///
/// `limit` is how many cases it holds at most: the first ones of that order.
fn decide_sheet(
    ws: &mut Worksheet,
    fmts: &mut Formats,
    view: &ReportView,
    limit: usize,
) -> Result<(), XlsxError> {
    ws.set_name(DECIDE_SHEET)?;
    let valuation = view.summary.reporting.as_ref().map(|r| &r.valuation);
    let layout = DecideLayout::new(valuation.map(|v| v.currency.as_str()));
    let decide_col = |name: &str| layout.col(name);
    let wrap = Format::new().set_text_wrap();
    let input = Format::new().set_background_color("FFF2CC");
    for (c, w) in [
        ("case", 20.0),
        ("severity", 10.0),
        ("what", 24.0),
        ("whose", 30.0),
        ("amount", 14.0),
        ("currency", 9.0),
        ("why", 50.0),
        ("candidates", 56.0),
        ("offered", 22.0),
        ("decision", 14.0),
        ("note", 36.0),
        ("reviewer", 14.0),
        ("status", 30.0),
        ("check", 20.0),
    ] {
        ws.set_column_width(decide_col(c), w)?;
    }
    if let Some(c) = layout.value {
        ws.set_column_width(c, 14.0)?;
    }
    // Before the rows: a streamed sheet writes its columns' settings with its first row.
    ws.set_column_hidden(decide_col("check"))?;
    let names: Vec<&str> = layout.header.iter().map(String::as_str).collect();
    header(ws, fmts, &names)?;
    let mut r = 0u32;
    // The rows of each drop-down: one validation per list of offered decisions, over all its
    // rows (a few lists for tens of thousands of rows, not one validation a row).
    let mut dropdowns: BTreeMap<Vec<String>, Vec<u32>> = BTreeMap::new();
    for c in view.listed_cases().into_iter().take(limit.min(MAX_ROWS)) {
        r += 1;
        let choices = view.marks.offered_texts(&c.choices(&view.items));
        write_text(ws, r, decide_col("case"), &c.key)?;
        write_text(ws, r, decide_col("severity"), c.severity.as_str())?;
        write_text(ws, r, decide_col("what"), &c.what())?;
        write_text(ws, r, decide_col("whose"), &c.whose())?;
        match c.at_risk.as_slice() {
            [] => {}
            // One currency: a number in its decimals (exact text when a double cannot hold it).
            [m] => {
                let (at, d) = ((r, decide_col("amount")), m.decimal());
                match number(d) {
                    Some(v) => {
                        ws.write_number_with_format(at.0, at.1, v, fmts.decimals(m.currency))?
                    }
                    None => ws.write_string(at.0, at.1, d.to_string())?,
                };
                write_text(ws, r, decide_col("currency"), m.currency)?;
            }
            // Several: no one number holds them; the amounts as text (a sort puts text after
            // the numbers), the currencies in the same order.
            many => {
                write_text(ws, r, decide_col("amount"), &c.amount_text())?;
                let curs: Vec<&str> = many.iter().map(|m| m.currency).collect();
                write_text(ws, r, decide_col("currency"), &curs.join(", "))?;
            }
        }
        // The value in the reporting currency, rounded to its minor units: a number (exact
        // text when a double cannot hold it); nothing when a currency of the case has no rate.
        if let (Some(col), Some(v), Some(d)) = (layout.value, valuation, c.value) {
            let d = super::cases::rounded_value(d, &v.currency);
            match number(d) {
                Some(x) => ws.write_number_with_format(r, col, x, fmts.decimals(&v.currency))?,
                None => ws.write_string(r, col, d.to_string())?,
            };
        }
        write_text(ws, r, decide_col("why"), &c.why(&view.items))?;
        let candidates: Vec<String> = c.candidates.iter().map(|k| k.text()).collect();
        if !candidates.is_empty() {
            ws.write_string_with_format(
                r,
                decide_col("candidates"),
                fit_cell(&csv_safe(&candidates.join("\n"))).as_ref(),
                &wrap,
            )?;
        }
        write_text(ws, r, decide_col("offered"), &choices.join(", "))?;
        for col in ["decision", "note", "reviewer"] {
            ws.write_blank(r, decide_col(col), &input)?;
        }
        dropdowns.entry(choices).or_default().push(r);
        if let Some(s) = view.marks.status.get(c.key.as_str()) {
            write_text(ws, r, decide_col("status"), s)?;
        }
        write_text(
            ws,
            r,
            decide_col("check"),
            &check_text(&c.key, &c.fingerprint),
        )?;
    }
    let col = decide_col("decision");
    for (choices, rows) in &dropdowns {
        let first = rows[0];
        let cells = row_ranges(rows, col);
        let validation = decide_validation(choices)?.set_multi_range(cells);
        ws.add_data_validation(first, col, first, col, &validation)?;
    }
    ws.autofilter(0, 0, r.max(1), (layout.header.len() - 1) as u16)?;
    Ok(())
}

/// The cells of column `col` in `rows` (ascending) as Excel's space-separated ranges
/// (`J2:J4 J7`).
fn row_ranges(rows: &[u32], col: u16) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < rows.len() {
        let mut j = i;
        while j + 1 < rows.len() && rows[j + 1] == rows[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&crate::workbook::cell_name(rows[i], col.into()));
        if j > i {
            out.push(':');
            out.push_str(&crate::workbook::cell_name(rows[j], col.into()));
        }
        i = j + 1;
    }
    out
}

fn family_sheet(
    ws: &mut Worksheet,
    fmts: &mut Formats,
    view: &ReportView,
    family: Family,
) -> Result<(), XlsxError> {
    ws.set_name(family.title())?;
    // Widths first: a streamed sheet writes rows as they come.
    for (c, w) in [
        (2u16, 16.0),
        (3, 18.0),
        (5, 14.0),
        (7, 14.0),
        (10, 24.0),
        (15, 48.0),
    ] {
        ws.set_column_width(c, w)?;
    }
    header(ws, fmts, &COLUMNS)?;
    let mut r = 0u32;
    for item in view.family(family).take(MAX_ROWS) {
        r += 1;
        item_row(ws, fmts, r, item)?;
    }
    ws.autofilter(0, 0, r.max(1), (COLUMNS.len() - 1) as u16)?;
    let (shown, n) = (r as usize, view.family_rows(family));
    if shown < n {
        // Below the filtered rows, so sorting them leaves it last.
        write_text(
            ws,
            r + 2,
            0,
            &format!(
                "The first {} of {} rows (largest and oldest first); every row is in diff.csv.",
                crate::money::count(shown),
                crate::money::count(n)
            ),
        )?;
    }
    Ok(())
}

/// How many rows a family's sheet lists.
fn family_sheet_rows(view: &ReportView, f: Family) -> usize {
    view.family(f).take(MAX_ROWS).count()
}

fn item_row(ws: &mut Worksheet, fmts: &mut Formats, r: u32, i: &Item) -> Result<(), XlsxError> {
    write_text(ws, r, 0, i.severity.map(|s| s.as_str()).unwrap_or(""))?;
    write_text(ws, r, 1, i.outcome.as_str())?;
    let id = i.payment_id.as_ref().map(crate::model::Id::text);
    write_text(ws, r, 2, id.as_deref().unwrap_or(""))?;
    write_text(ws, r, 3, &i.line_ids().join(";"))?;
    write_text(ws, r, 4, i.status.map(|s| s.as_str()).unwrap_or(""))?;
    if let Some(m) = i.amount {
        write_money(ws, fmts, r, 5, m)?;
        write_text(ws, r, 6, m.currency)?;
    }
    // One line: its amount as a number. Several (duplicates, candidates): a number cell cannot
    // hold them, so the exact amounts as text, joined like results.csv.
    match i.line_amounts().as_slice() {
        [] => {}
        [m] => {
            write_money(ws, fmts, r, 7, *m)?;
            write_text(ws, r, 8, m.currency)?;
        }
        many => {
            let text: Vec<String> = many.iter().map(|m| m.text()).collect();
            write_text(ws, r, 7, &text.join(";"))?;
            let curs: Vec<&str> = many.iter().map(|m| m.currency).collect();
            write_text(ws, r, 8, &curs.join(";"))?;
        }
    }
    write_text(ws, r, 9, &i.recipient)?;
    write_text(ws, r, 10, &i.references().join(";"))?;
    if let Some(t) = i.started_at {
        write_text(ws, r, 11, &utc(t))?;
    }
    write_text(ws, r, 12, &i.booked().join(";"))?;
    ws.write_number(r, 13, exact_number(i.age_days))?;
    write_text(ws, r, 14, &i.action.label())?;
    write_text(ws, r, 15, &i.detail)?;
    write_text(ws, r, 16, &i.source_lines().join(";"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drop-down covers exactly its rows: runs of consecutive rows as one range, others
    /// alone (0-based rows, Excel's 1-based names).
    #[test]
    fn a_dropdown_names_its_rows_as_ranges() {
        assert_eq!(row_ranges(&[1], 9), "J2");
        assert_eq!(row_ranges(&[1, 2, 3, 6, 8, 9], 9), "J2:J4 J7 J9:J10");
        assert_eq!(row_ranges(&[27], 26), "AA28");
    }

    /// report.xlsx is written to its file as it is compressed, never held whole: the same
    /// bytes as the workbook built in memory, for a view with rows in several sheets and cases
    /// in the Decide sheet.
    #[test]
    fn the_workbook_written_to_its_file_is_the_one_built_in_memory() {
        use crate::model::{Action, Outcome};
        let item = |outcome: Outcome, id: &str, minor: i64| Item {
            outcome,
            severity: outcome.ticket_severity(),
            status: None,
            action: Action::Ticket,
            payment_id: Some(id.into()),
            lines: vec![],
            amount: Some(Money {
                minor,
                currency: "EUR",
            }),
            recipient: "NL** **** 4300".into(),
            started_at: Some(0),
            age_days: 3,
            rule: std::sync::Arc::from("r"),
            detail: "why".into(),
        };
        let items = vec![
            item(Outcome::FailedButPaid, "P-1", 12_345),
            item(Outcome::MissingAtProvider, "P-2", 500),
            item(Outcome::Ambiguous, "P-3", -70),
        ];
        let summary = crate::outputs::summary::Summary {
            as_of: "2026-11-28T00:00:00Z".into(),
            ..Default::default()
        };
        let view = ReportView::gathered(
            summary,
            BTreeMap::new(),
            (items, BTreeMap::new()),
            crate::report::cases::Marks::default(),
            (0, 3),
        );
        assert!(!view.cases.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.xlsx");
        write(&path, &view).unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written, to_buffer(&view).unwrap());
        assert!(written.starts_with(b"PK\x03\x04"), "a zip file");
    }

    #[test]
    fn an_amount_a_double_would_change_is_not_a_number_cell() {
        let d = |t: &str| t.parse::<rust_decimal::Decimal>().unwrap();
        assert_eq!(number(d("1234.56")), Some(1234.56));
        assert_eq!(number(d("-0.10")), Some(-0.1));
        assert_eq!(number(d("0")), Some(0.0));
        // 17 significant digits: the nearest double is another amount.
        assert_eq!(number(d("123456789012345.67")), None);
    }
}
