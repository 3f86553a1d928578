//! `report.html` and the email's HTML body: self-contained (inline CSS, an inline SVG chart, no
//! external resource, no script), with every value from a statement or the ledger escaped by
//! [`escape`]. A Content-Security-Policy that forbids scripts and remote loads is a second
//! line of defence should a value ever slip through unescaped.

use super::{Family, Item, ReportView, total_text, utc};
use std::fmt::Write as _;

/// Escapes text for HTML element content and quoted attribute values; invisible characters
/// are shown as `<U+XXXX>` first ([`crate::outputs::visible`]).
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    let s = crate::outputs::visible(s);
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out.into()
}

/// Rows listed per family in the HTML report; the rest are in report.xlsx and results.csv.
pub const REPORT_ROWS_PER_FAMILY: usize = 2000;
/// Exceptions listed in the email body.
pub const EMAIL_ROWS: usize = 25;

const STYLE: &str = "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#1a1a1a;margin:24px;max-width:1200px}\
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
.ok{background:#e8f5e9;border:1px solid #a5d6a7;padding:8px 12px;font-weight:600}\
.warn{background:#fff8e1;border:1px solid #ffe082;padding:6px 12px;margin:4px 0}\
.sev-CRITICAL{color:#b71c1c;font-weight:700}.sev-HIGH{color:#e65100;font-weight:600}.muted{color:#666}";

fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
}

/// The headline every rendering starts with.
pub fn headline(view: &ReportView) -> String {
    let s = &view.summary;
    let range = if s.range_from == s.range_to {
        s.range_from.clone()
    } else {
        format!("{} .. {}", s.range_from, s.range_to)
    };
    format!(
        "recon run {} for {range}{}",
        s.run_id,
        if s.dry_run { " (dry run)" } else { "" }
    )
}

fn run_facts(out: &mut String, view: &ReportView) {
    let s = &view.summary;
    let (transitions, tickets) = view.effects();
    let _ = write!(
        out,
        "<table>\n<tr><th>range</th><td>{} .. {}</td></tr>\n<tr><th>as of</th><td>{}</td></tr>\n\
         <tr><th>payments in scope</th><td class=\"num\">{}</td></tr>\n<tr><th>statement lines</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>rejected lines</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>transitions</th><td>{}</td></tr>\n<tr><th>tickets</th><td>{}</td></tr>\n</table>\n",
        escape(&s.range_from),
        escape(&s.range_to),
        escape(&s.as_of),
        s.payments_in_scope,
        s.statement_lines,
        s.rejected_lines,
        escape(&transitions),
        escape(&tickets),
    );
    out.push_str("<table>\n<tr><th>input</th><th>file</th><th>lines</th><th>rejected</th><th>sha256</th></tr>\n");
    for i in &s.inputs {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"muted\">{}</td></tr>",
            escape(&i.source),
            escape(&i.path),
            i.lines,
            i.rejected,
            escape(&i.sha256)
        );
    }
    if s.inputs.is_empty() {
        out.push_str("<tr><td colspan=\"5\">no statement file was read</td></tr>\n");
    }
    out.push_str("</table>\n");
}

fn warnings(out: &mut String, view: &ReportView) {
    if view.summary.warnings.is_empty() {
        return;
    }
    out.push_str("<h2>Completeness warnings</h2>\n");
    for w in &view.summary.warnings {
        let _ = writeln!(out, "<div class=\"warn\">{}</div>", escape(w));
    }
}

/// The statement files that could not be read, as the first, critical block (nothing when
/// every file was read).
fn unreadable(out: &mut String, view: &ReportView) {
    let files = &view.summary.unreadable_inputs;
    if files.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2 class=\"sev-CRITICAL\">CRITICAL: {} statement file(s) cannot be read</h2>\n\
         <p>Nothing in them was used, and their days are incomplete: no payment is resolved FAILED \
         on them until the file is delivered again.</p>\n<table>\n<tr><th>source</th><th>file</th>\
         <th>days</th><th>error</th></tr>",
        files.len()
    );
    for f in files {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.source),
            escape(&f.path),
            escape(&f.period),
            escape(&f.error)
        );
    }
    out.push_str("</table>\n");
}

fn nothing_to_review(out: &mut String, view: &ReportView) {
    if view.exception_count() == 0 && view.summary.unreadable_inputs.is_empty() {
        out.push_str("<p class=\"ok\">Nothing to review: no money at risk and no match to decide in this run.</p>\n");
    }
}

fn totals(out: &mut String, view: &ReportView) {
    out.push_str("<h2>Counts and amounts per outcome</h2>\n<table>\n<tr><th>family</th><th>outcome</th><th>count</th><th>amount</th></tr>\n");
    for (f, o, t) in view.outcomes_by_family() {
        let amounts: Vec<String> = t
            .amounts
            .iter()
            .map(|(c, v)| escape(&format!("{} {c}", total_text(*v, c))).into_owned())
            .collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            f.title(),
            o.as_str(),
            t.count,
            amounts.join("<br>")
        );
    }
    out.push_str("</table>\n");
}

/// An inline SVG bar chart of the rows per outcome that are not settled (money at risk,
/// review, pending).
pub fn chart(view: &ReportView) -> String {
    let bars: Vec<(&str, usize)> = view
        .outcomes_by_family()
        .into_iter()
        .filter(|(f, _, _)| matches!(f, Family::MoneyAtRisk | Family::Review | Family::Pending))
        .map(|(_, o, t)| (o.as_str(), t.count))
        .collect();
    let mut out = String::new();
    if bars.is_empty() {
        out.push_str("<p class=\"muted\">No exceptions to chart.</p>\n");
        return out;
    }
    let max = bars.iter().map(|(_, n)| *n).max().unwrap_or(1).max(1);
    let (label_w, bar_w, row_h) = (190usize, 400usize, 22usize);
    let height = bars.len() * row_h + 10;
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\" aria-label=\"exceptions per outcome\" font-family=\"sans-serif\" font-size=\"12\">",
        label_w + bar_w + 60
    );
    for (k, (name, n)) in bars.iter().enumerate() {
        let y = 5 + k * row_h;
        let w = (bar_w * n).div_ceil(max).max(1);
        let color = if Family::of(
            crate::outcome::Outcome::parse(name).unwrap_or(crate::outcome::Outcome::Matched),
        ) == Family::MoneyAtRisk
        {
            "#c62828"
        } else {
            "#1565c0"
        };
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{}\">{name}</text><rect x=\"{label_w}\" y=\"{y}\" width=\"{w}\" height=\"{}\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{n}</text>",
            y + 14,
            row_h - 6,
            label_w + w + 6,
            y + 14
        );
    }
    out.push_str("</svg>\n");
    out
}

fn joined<S: AsRef<str>>(v: &[S]) -> String {
    let parts: Vec<&str> = v.iter().map(AsRef::as_ref).collect();
    escape(&parts.join("; ")).into_owned()
}

fn item_table<'a>(
    out: &mut String,
    items: impl Iterator<Item = &'a Item>,
    limit: usize,
    total: usize,
) {
    out.push_str("<table>\n<tr><th>severity</th><th>outcome</th><th>payment</th><th>lines</th><th>status</th><th>amount</th><th>line amount</th><th>recipient</th><th>reference</th><th>started / booked (UTC)</th><th>age (days)</th><th>action</th><th>detail</th></tr>\n");
    for i in items.take(limit) {
        let sev = i.severity.map(|s| s.as_str()).unwrap_or("");
        let amount = i
            .amount
            .map(|m| format!("{} {}", m.text(), m.currency))
            .unwrap_or_default();
        let line_amounts: Vec<String> = i
            .lines
            .iter()
            .map(|l| format!("{} {}", l.amount.text(), l.amount.currency))
            .collect();
        let mut when: Vec<String> = i.started_at.map(utc).into_iter().collect();
        when.extend(i.booked());
        let id = i.payment_id.as_ref().map(crate::model::Id::text);
        let _ = writeln!(
            out,
            "<tr><td class=\"sev-{sev}\">{sev}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            i.outcome.as_str(),
            escape(id.as_deref().unwrap_or("")),
            joined(&i.line_ids()),
            i.status.map(|s| s.as_str()).unwrap_or(""),
            escape(&amount),
            joined(&line_amounts),
            escape(&i.recipient),
            joined(&i.references()),
            joined(&when),
            i.age_days,
            escape(&i.action.label()),
            escape(&i.detail),
        );
    }
    out.push_str("</table>\n");
    if total > limit {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{} more row(s) not shown: see report.xlsx and results.csv.</p>",
            total - limit
        );
    }
}

/// The HTML report file: run facts, warnings, counts, the chart and every listed row per
/// family (up to [`REPORT_ROWS_PER_FAMILY`] each).
pub fn report(view: &ReportView) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let title = headline(view);
    head(&mut out, &title);
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    unreadable(&mut out, view);
    nothing_to_review(&mut out, view);
    run_facts(&mut out, view);
    warnings(&mut out, view);
    out.push_str("<h2>Exceptions per outcome</h2>\n");
    out.push_str(&chart(view));
    totals(&mut out, view);
    for f in Family::ALL {
        let n = view.family(f).count();
        if n == 0 {
            continue;
        }
        let _ = writeln!(out, "<h2>{} ({n})</h2>", f.title());
        item_table(&mut out, view.family(f), REPORT_ROWS_PER_FAMILY, n);
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// The email's HTML body: the same facts, the most severe exceptions first (up to
/// [`EMAIL_ROWS`]), and what is attached or left out.
pub fn email(view: &ReportView, notes: &[String]) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let title = headline(view);
    head(&mut out, &title);
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    unreadable(&mut out, view);
    nothing_to_review(&mut out, view);
    let n = view.exception_count();
    if n > 0 {
        let _ = writeln!(out, "<h2>Most severe first ({n} to review)</h2>");
        item_table(&mut out, view.exceptions(), EMAIL_ROWS, n);
    }
    warnings(&mut out, view);
    totals(&mut out, view);
    out.push_str(&chart(view));
    out.push_str("<h2>Run</h2>\n");
    run_facts(&mut out, view);
    for note in notes {
        let _ = writeln!(out, "<p class=\"muted\">{}</p>", escape(note));
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script>"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
        );
        assert_eq!(escape("a & \"b\""), "a &amp; &quot;b&quot;");
        assert_eq!(
            escape("&amp;"),
            "&amp;amp;",
            "escaping is not idempotent by design"
        );
        assert_eq!(escape("PAY-1 ünïcode"), "PAY-1 ünïcode");
    }
}
