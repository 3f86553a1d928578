//! A backtest's outputs, written into `<out>.tmp/` and renamed into place whole:
//! `backtest.csv` (one row per flip), `backtest.xlsx` (the same rows, a Nights sheet and an
//! Against reviewers sheet, for people who sort and filter) and `backtest.html` (the page a
//! reviewer reads: what would change, grouped by risk, and how it compares with what they
//! decided).

use super::{BacktestReport, NightResult};
use crate::exit::{Failure, fail};
use crate::flips::{Flip, Risk, lines_text};
use crate::outputs::csv_safe;
use crate::report::html::escape;
use anyhow::{Context as _, Result};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// backtest.csv's columns.
pub const CSV_COLUMNS: [&str; 14] = [
    "night",
    "day",
    "id",
    "risk",
    "before",
    "after",
    "rule_before",
    "rule_after",
    "why",
    "amount",
    "value",
    "lines_after",
    "reviewers",
    "reviewers_said",
];

/// How many flips of each group the HTML page lists (the CSV and the workbook list all).
const LISTED_PER_GROUP: usize = 200;

/// Writes the outputs into `report.out_dir`, replacing an earlier backtest of the same days.
pub fn write(report: &BacktestReport) -> Result<()> {
    let out = &report.out_dir;
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backtest".into());
    let tmp = out.with_file_name(format!("{name}.tmp"));
    let io = |what: &str, path: &Path, e: std::io::Error| {
        fail(Failure::Output, format!("{}: {what}: {e}", path.display()))
    };
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io("cannot remove", &tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io("cannot create", &tmp, e))?;
    let csv_path = tmp.join("backtest.csv");
    write_csv(report, &csv_path).map_err(|e| fail(Failure::Output, format!("{e:#}")))?;
    let html_path = tmp.join("backtest.html");
    std::fs::write(&html_path, html(report)).map_err(|e| io("cannot write", &html_path, e))?;
    let xlsx_path = tmp.join("backtest.xlsx");
    write_xlsx(report, &xlsx_path).map_err(|e| {
        fail(
            Failure::Output,
            format!("{}: cannot write: {e}", xlsx_path.display()),
        )
    })?;
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| io("cannot replace", out, e))?;
    }
    std::fs::rename(&tmp, out).map_err(|e| io("cannot rename into place", out, e))?;
    Ok(())
}

/// One flip as backtest.csv's cells.
fn cells(f: &Flip) -> [String; 14] {
    [
        f.run.clone(),
        f.day.to_string(),
        f.id.clone(),
        f.risk.as_str().to_string(),
        f.before.label(),
        f.after.label(),
        f.before.rule.clone(),
        f.after.rule.clone(),
        f.after.why.clone(),
        f.amount.clone(),
        f.value.map(|v| v.to_string()).unwrap_or_default(),
        lines_text(&f.after.lines),
        f.reviewers
            .as_ref()
            .map(|v| v.as_str().to_string())
            .unwrap_or_default(),
        f.reviewers
            .as_ref()
            .map(|v| v.text().to_string())
            .unwrap_or_default(),
    ]
}

fn write_csv(report: &BacktestReport, path: &Path) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
    let mut head: Vec<String> = CSV_COLUMNS.iter().map(|c| c.to_string()).collect();
    if let Some(cur) = report.reporting_currency {
        head[10] = format!("value_{cur}");
    }
    w.write_record(&head)?;
    for f in &report.flips {
        let row = cells(f);
        w.write_record(row.iter().map(|c| csv_safe(c).into_owned()))?;
    }
    w.flush()
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

fn write_xlsx(report: &BacktestReport, path: &Path) -> Result<(), rust_xlsxwriter::XlsxError> {
    use crate::report::xlsx::{Formats, exact_number, header, write_amount, write_text};
    let mut wb = rust_xlsxwriter::Workbook::new();
    let mut fmts = Formats::new();
    let flips = wb.add_worksheet();
    flips.set_name("Flips")?;
    let mut head: Vec<String> = CSV_COLUMNS.iter().map(|c| c.to_string()).collect();
    if let Some(cur) = report.reporting_currency {
        head[10] = format!("value_{cur}");
    }
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    header(flips, &fmts, &head)?;
    for (r, f) in report.flips.iter().enumerate() {
        let row = (r + 1) as u32;
        for (c, text) in cells(f).iter().enumerate() {
            match (c, f.value, report.reporting_currency) {
                (10, Some(v), Some(cur)) => write_amount(flips, &mut fmts, (row, 10), v, cur)?,
                _ => write_text(flips, row, c as u16, text)?,
            }
        }
    }
    if !report.flips.is_empty() {
        flips.autofilter(0, 0, report.flips.len() as u32, (head.len() - 1) as u16)?;
    }
    for (c, w) in [(0u16, 22.0), (2, 38.0), (4, 30.0), (5, 30.0), (8, 60.0)] {
        flips.set_column_width(c, w)?;
    }
    // The flip table, for all nights and for each: before → after, rows and value.
    let table = wb.add_worksheet();
    table.set_name("Flip table")?;
    let value_head = report
        .reporting_currency
        .map_or_else(|| "value".to_string(), |c| format!("value_{c}"));
    header(
        table,
        &fmts,
        &["night", "before", "after", "rows", value_head.as_str()],
    )?;
    let mut r = 1u32;
    let mut write_rows =
        |night: &str, rows: Vec<TableRow>, r: &mut u32| -> Result<(), rust_xlsxwriter::XlsxError> {
            for row in rows {
                write_text(table, *r, 0, night)?;
                write_text(table, *r, 1, &row.before)?;
                write_text(table, *r, 2, &row.after)?;
                table.write_number(*r, 3, exact_number(row.total.0))?;
                if let Some(cur) = report.reporting_currency {
                    write_amount(table, &mut fmts, (*r, 4), row.total.1, cur)?;
                }
                *r += 1;
            }
            Ok(())
        };
    write_rows("all", flip_table(&report.flips), &mut r)?;
    for n in &report.nights {
        write_rows(
            &n.run,
            flip_table(report.flips.iter().filter(|f| f.run == n.run)),
            &mut r,
        )?;
    }
    for (c, w) in [(0u16, 22.0), (1, 30.0), (2, 34.0)] {
        table.set_column_width(c, w)?;
    }
    let nights = wb.add_worksheet();
    nights.set_name("Nights")?;
    header(
        nights,
        &fmts,
        &[
            "night",
            "day",
            "rows",
            "to_transition",
            "from_transition",
            "outcome_only",
            "replayed",
        ],
    )?;
    let mut r = 1u32;
    for n in &report.nights {
        nights.write_string(r, 0, csv_safe(&n.run).as_ref())?;
        nights.write_string(r, 1, n.day.to_string())?;
        nights.write_number(r, 2, exact_number(n.rows))?;
        for (c, risk) in [Risk::ToTransition, Risk::FromTransition, Risk::OutcomeOnly]
            .iter()
            .enumerate()
        {
            nights.write_number(
                r,
                3 + c as u16,
                exact_number(n.flips.get(risk).copied().unwrap_or(0)),
            )?;
        }
        write_text(nights, r, 6, &notes_text(n))?;
        r += 1;
    }
    for s in &report.skipped {
        nights.write_string(r, 0, csv_safe(&s.run).as_ref())?;
        nights.write_string(r, 1, s.day.to_string())?;
        write_text(nights, r, 6, &format!("skipped: {}", s.why))?;
        r += 1;
    }
    nights.set_column_width(0, 22)?;
    nights.set_column_width(6, 60)?;
    let a = &report.agreement;
    let rev = wb.add_worksheet();
    rev.set_name("Against reviewers")?;
    header(rev, &fmts, &["reviewers", "payments"])?;
    let counts = [
        ("decided the same", a.same),
        ("decided differently", a.different.len()),
        ("dismissed", a.dismissed),
        ("escalated", a.escalated),
        ("not decided yet", a.undecided),
        ("in all", a.decided),
    ];
    for (i, (what, n)) in counts.iter().enumerate() {
        rev.write_string(i as u32 + 1, 0, *what)?;
        rev.write_number(i as u32 + 1, 1, exact_number(*n))?;
    }
    let base = counts.len() as u32 + 2;
    rev.write_string_with_format(base, 0, "night", &bold())?;
    rev.write_string_with_format(base, 1, "payment", &bold())?;
    rev.write_string_with_format(base, 2, "reviewers and the candidate", &bold())?;
    for (i, (night, id, why)) in a.different.iter().enumerate() {
        let row = base + 1 + i as u32;
        write_text(rev, row, 0, night)?;
        write_text(rev, row, 1, id)?;
        write_text(rev, row, 2, why)?;
    }
    rev.set_column_width(0, 24)?;
    rev.set_column_width(1, 38)?;
    rev.set_column_width(2, 70)?;
    wb.save(path)
}

fn bold() -> rust_xlsxwriter::Format {
    rust_xlsxwriter::Format::new().set_bold()
}

fn notes_text(n: &NightResult) -> String {
    if n.notes.is_empty() {
        "yes".into()
    } else {
        format!("yes; {}", n.notes.join("; "))
    }
}

/// Count and value (when a reporting currency is set) of each risk group.
fn totals(report: &BacktestReport) -> BTreeMap<Risk, (usize, Decimal, usize)> {
    let mut out: BTreeMap<Risk, (usize, Decimal, usize)> = BTreeMap::new();
    for f in &report.flips {
        let t = out.entry(f.risk).or_insert((0, Decimal::ZERO, 0));
        t.0 += 1;
        match f.value {
            Some(v) => t.1 += v,
            None => t.2 += 1,
        }
    }
    out
}

fn value_text(report: &BacktestReport, (_, sum, unvalued): (usize, Decimal, usize)) -> String {
    match report.reporting_currency {
        None => String::new(),
        Some(cur) => {
            let mut s = format!("{} {cur}", crate::report::cases::display_value(sum, cur));
            if unvalued > 0 {
                let _ = write!(s, " (+{unvalued} without a rate)");
            }
            s
        }
    }
}

/// `outcome before → after` counts of one risk group: the flip table.
/// One row of a flip table: before, after, and the count and value of its flips.
struct TableRow {
    before: String,
    after: String,
    /// (rows, value of those with one, rows without a value).
    total: (usize, Decimal, usize),
}

fn flip_table<'f>(flips: impl IntoIterator<Item = &'f Flip>) -> Vec<TableRow> {
    let mut by: BTreeMap<(String, String), (usize, Decimal, usize)> = BTreeMap::new();
    for f in flips {
        let t = by
            .entry((f.before.label(), f.after.label()))
            .or_insert((0, Decimal::ZERO, 0));
        t.0 += 1;
        match f.value {
            Some(v) => t.1 += v,
            None => t.2 += 1,
        }
    }
    let mut rows: Vec<TableRow> = by
        .into_iter()
        .map(|((before, after), total)| TableRow {
            before,
            after,
            total,
        })
        .collect();
    rows.sort_by(|x, y| {
        y.total
            .0
            .cmp(&x.total.0)
            .then_with(|| (&x.before, &x.after).cmp(&(&y.before, &y.after)))
    });
    rows
}

const STYLE: &str = "body{font-family:-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;\
max-width:980px;padding:12px;color:#1b1b1b;line-height:1.4}h1{font-size:1.35em}\
h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ddd}\
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}table{border-collapse:collapse;\
font-size:.9em}td,th{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;\
vertical-align:top}th{background:#f6f6f6}.num{text-align:right;white-space:nowrap}\
.danger{color:#a40000}.ok{color:#1a7f37}.lead{font-size:1.05em;background:#fff8e5;\
padding:8px 10px;border-left:4px solid #e0a800}.id{font-family:monospace;overflow-wrap:anywhere}\
.flip{border-bottom:1px solid #eee;padding:6px 0;font-size:.92em}.muted{color:#666}";

/// The page a reviewer reads.
pub fn html(report: &BacktestReport) -> String {
    let mut h = String::new();
    let title = format!(
        "Backtest of {} on {} – {}",
        report.rules_dir.display(),
        report.from,
        report.to
    );
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = escape(&title)
    );
    let danger = report.new_transitions();
    let _ = write!(
        h,
        "<p class=\"lead\">{}</p>",
        escape(&headline(report, danger))
    );
    let _ = write!(
        h,
        "<p>{} night(s) replayed, {} skipped. Each night is planned twice on the evidence \
         its run read (the same files, the ledger as the run saw it, the same as-of): with \
         the live rules and with the candidate. Nothing was written to the ledger or the \
         review queue.</p>",
        report.nights.len(),
        report.skipped.len()
    );
    // What would change, by risk.
    let totals = totals(report);
    h.push_str("<h2>What would change</h2><div class=\"scroll\"><table><tr><th>change</th><th class=\"num\">rows</th>");
    if let Some(cur) = report.reporting_currency {
        let _ = write!(h, "<th class=\"num\">value ({cur})</th>");
    }
    h.push_str("</tr>");
    for risk in [Risk::ToTransition, Risk::FromTransition, Risk::OutcomeOnly] {
        let t = totals.get(&risk).copied().unwrap_or((0, Decimal::ZERO, 0));
        let class = if risk == Risk::ToTransition && t.0 > 0 {
            " class=\"danger\""
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr{class}><td>{}</td><td class=\"num\">{}</td>",
            escape(risk.heading()),
            t.0
        );
        if report.reporting_currency.is_some() {
            let _ = write!(
                h,
                "<td class=\"num\">{}</td>",
                escape(&value_text(report, t))
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
    // Against reviewers.
    let a = &report.agreement;
    let _ = write!(
        h,
        "<h2>Against reviewers</h2><p>{}</p><div class=\"scroll\"><table>\
         <tr><th>reviewers</th><th class=\"num\">payments</th></tr>\
         <tr><td>decided the same</td><td class=\"num\">{}</td></tr>\
         <tr{}><td>decided differently</td><td class=\"num\">{}</td></tr>\
         <tr><td>dismissed the case</td><td class=\"num\">{}</td></tr>\
         <tr><td>escalated it</td><td class=\"num\">{}</td></tr>\
         <tr><td>not decided yet</td><td class=\"num\">{}</td></tr></table></div>",
        escape(&a.sentence()),
        a.same,
        if a.different.is_empty() {
            ""
        } else {
            " class=\"danger\""
        },
        a.different.len(),
        a.dismissed,
        a.escalated,
        a.undecided
    );
    if !a.different.is_empty() {
        h.push_str("<p><b>Where the candidate contradicts a reviewer:</b></p><ul>");
        for (night, id, why) in &a.different {
            let _ = write!(
                h,
                "<li><span class=\"id\">{}</span> (night {}): {}</li>",
                escape(id),
                escape(night),
                escape(why)
            );
        }
        h.push_str("</ul>");
    }
    // The flips, group by group.
    for risk in [Risk::ToTransition, Risk::FromTransition, Risk::OutcomeOnly] {
        let group: Vec<&Flip> = report.flips.iter().filter(|f| f.risk == risk).collect();
        if group.is_empty() {
            continue;
        }
        let _ = write!(
            h,
            "<h2>{} ({})</h2><div class=\"scroll\"><table><tr><th>before</th><th>after</th>\
             <th class=\"num\">rows</th>{}</tr>",
            escape(risk.heading()),
            group.len(),
            report
                .reporting_currency
                .map(|c| format!("<th class=\"num\">value ({c})</th>"))
                .unwrap_or_default()
        );
        for row in flip_table(group.iter().copied()) {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td>{}</tr>",
                escape(&row.before),
                escape(&row.after),
                row.total.0,
                if report.reporting_currency.is_some() {
                    format!(
                        "<td class=\"num\">{}</td>",
                        escape(&value_text(report, row.total))
                    )
                } else {
                    String::new()
                }
            );
        }
        h.push_str("</table></div>");
        // One block per flip: it reads on a phone as on a desktop, however long the id.
        for f in group.iter().take(LISTED_PER_GROUP) {
            let rule = |r: &str| {
                if r.is_empty() {
                    "—".to_string()
                } else {
                    r.to_string()
                }
            };
            let _ = write!(
                h,
                "<div class=\"flip\"><div><b class=\"id\">{}</b> · {} · night of {}</div>\
                 <div>{} → <b>{}</b></div><div class=\"muted\">rule {} → {}{}</div>",
                escape(&f.id),
                escape(&f.amount),
                f.day,
                escape(&f.before.label()),
                escape(&f.after.label()),
                escape(&rule(&f.before.rule)),
                escape(&rule(&f.after.rule)),
                if f.after.why.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", escape(&f.after.why))
                }
            );
            if let Some(v) = &f.reviewers {
                let class = if matches!(v, crate::flips::Verdict::Different(_)) {
                    " class=\"danger\""
                } else {
                    ""
                };
                let _ = write!(h, "<div{class}>Reviewers: {}</div>", escape(v.text()));
            }
            h.push_str("</div>");
        }
        if group.len() > LISTED_PER_GROUP {
            let _ = write!(
                h,
                "<p>… and {} more in backtest.csv and backtest.xlsx.</p>",
                group.len() - LISTED_PER_GROUP
            );
        }
    }
    // The nights.
    h.push_str(
        "<h2>Nights</h2><div class=\"scroll\"><table><tr><th>day</th><th>run</th>\
                <th class=\"num\">rows</th><th class=\"num\">flips</th><th>notes</th></tr>",
    );
    for n in &report.nights {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"id\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td></tr>",
            n.day,
            escape(&n.run),
            n.rows,
            n.flips.values().sum::<usize>(),
            escape(&n.notes.join("; "))
        );
    }
    for s in &report.skipped {
        let _ = write!(
            h,
            "<tr class=\"danger\"><td>{}</td><td class=\"id\">{}</td><td></td><td></td>\
             <td>skipped: {}</td></tr>",
            s.day,
            escape(&s.run),
            escape(&s.why)
        );
    }
    h.push_str(
        "</table></div><p><small>Not replayed: answers of a provider's status API (no \
         provider is asked again), and what the payment service changed on a payment since \
         its night (amount, recipient, a new attempt; nights with payments sent again since \
         say so).</small></p></body></html>",
    );
    h
}

/// The page's first sentence, and the command's summary line.
pub fn headline(report: &BacktestReport, new_transitions: usize) -> String {
    let flips = report.flips.len();
    if report.nights.is_empty() && report.skipped.is_empty() {
        return format!(
            "No night between {} and {} was recorded: nothing to replay (a night is recorded by \
             `recon run`, not by a dry run).",
            report.from, report.to
        );
    }
    if flips == 0 {
        return format!(
            "The candidate rules change nothing on {} night(s).",
            report.nights.len()
        );
    }
    let mut s = format!(
        "The candidate rules change {flips} row(s) on {} night(s): {new_transitions} would \
         become automatic transitions",
        report.nights.len()
    );
    if report.agreement.disagreements() > 0 {
        let _ = write!(
            s,
            ", {} of them against a reviewer's decision",
            report.agreement.disagreements()
        );
    }
    s.push('.');
    s
}

/// The command's output on the terminal.
pub fn text(report: &BacktestReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(report, report.new_transitions()));
    let totals = totals(report);
    for risk in [Risk::ToTransition, Risk::FromTransition, Risk::OutcomeOnly] {
        let t = totals.get(&risk).copied().unwrap_or((0, Decimal::ZERO, 0));
        let value = value_text(report, t);
        let _ = writeln!(
            out,
            "  {:<32} {:>6}{}",
            risk.heading(),
            t.0,
            if value.is_empty() {
                String::new()
            } else {
                format!("  {value}")
            }
        );
    }
    let _ = writeln!(out, "{}", report.agreement.sentence());
    for (night, id, why) in &report.agreement.different {
        let _ = writeln!(out, "  against a reviewer: {id} (night {night}): {why}");
    }
    for s in &report.skipped {
        let _ = writeln!(out, "skipped {} ({}): {}", s.day, s.run, s.why);
    }
    let _ = writeln!(out, "written: {}", report.out_dir.display());
    out.lines()
        .map(|l| crate::textsafe::terminal(l).into_owned() + "\n")
        .collect()
}
