//! `report.html` and the email's HTML body: self-contained (inline CSS, an inline SVG chart, no
//! external resource, no script), with every value from a statement or the ledger escaped by
//! [`escape`]. A Content-Security-Policy that forbids scripts and remote loads is a second
//! line of defence should a value ever slip through unescaped.

use super::cases::{self, Case};
use super::{Family, Item, ReportView, utc};
use crate::model::Severity;
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
/// Cases listed in the email body (the most severe); the email says where the rest are.
pub const EMAIL_CASES: usize = 20;

const STYLE: &str = "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#1a1a1a;margin:24px;max-width:1200px}\
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px;display:block;overflow-x:auto;max-width:100%}\
svg{max-width:100%;height:auto}@media (max-width:600px){body{margin:10px}}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
.ok{background:#e8f5e9;border:1px solid #a5d6a7;padding:8px 12px;font-weight:600}\
.warn{background:#fff8e1;border:1px solid #ffe082;padding:6px 12px;margin:4px 0}\
.sev-CRITICAL{color:#b71c1c;font-weight:700}.sev-HIGH{color:#c43e00;font-weight:600}.muted{color:#666}";

fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
}

/// The run's day, or its range as `FROM .. TO`.
fn range_text(view: &ReportView) -> String {
    let s = &view.summary;
    if s.range_from == s.range_to {
        s.range_from.clone()
    } else {
        format!("{} .. {}", s.range_from, s.range_to)
    }
}

/// The headline every rendering starts with.
pub fn headline(view: &ReportView) -> String {
    let s = &view.summary;
    let range = range_text(view);
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
            .map(|(c, v)| escape(&view.money_text(*v, c)).into_owned())
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
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"exceptions per outcome\" font-family=\"sans-serif\" font-size=\"12\">",
        w = label_w + bar_w + 60
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
    view: &ReportView,
    items: impl Iterator<Item = &'a Item>,
    limit: usize,
    total: usize,
) {
    out.push_str("<table>\n<tr><th>severity</th><th>outcome</th><th>payment</th><th>lines</th><th>status</th><th>amount</th><th>line amount</th><th>recipient</th><th>reference</th><th>started / booked (UTC)</th><th>age (days)</th><th>action</th><th>detail</th></tr>\n");
    for i in items.take(limit) {
        let sev = i.severity.map(|s| s.as_str()).unwrap_or("");
        let amount = i
            .amount
            .map(|m| view.money_text(m.minor.into(), m.currency))
            .unwrap_or_default();
        let line_amounts: Vec<String> = i
            .lines
            .iter()
            .map(|l| view.money_text(l.amount.minor.into(), l.amount.currency))
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
            "<p class=\"muted\">{} more row(s) not shown: every row is in diff.csv.</p>",
            crate::money::count(total - limit)
        );
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
        "<h2 class=\"sev-CRITICAL\" style=\"color:#b71c1c\">CRITICAL: {} statement file(s) cannot be read</h2>\n\
         <p>Nothing in them was used, and their days are incomplete: no payment is resolved FAILED \
         on them until the file is delivered again.</p>\n<ul>",
        files.len()
    );
    for f in files {
        let _ = writeln!(
            out,
            "<li>{} {} ({}): {}</li>",
            escape(&f.source),
            escape(&f.path),
            escape(&f.period),
            escape(&f.error)
        );
    }
    out.push_str("</ul>\n");
}

/// The decisions inbox, when the run's pass skipped something: each folder or file with why
/// (nothing of it was applied), and how many files were applied (their results are in
/// summary.json `inbox`).
fn inbox(out: &mut String, view: &ReportView) {
    let Some(i) = view.summary.inbox.as_ref().filter(|i| i.needs_attention()) else {
        return;
    };
    let _ = writeln!(
        out,
        "<h2 style=\"color:#8a5a00\">Decisions inbox: {} folder(s) or file(s) skipped</h2>\n\
         <p>Nothing in them was applied ({} file(s) applied; see summary.json <code>inbox</code>). \
         Each says why:</p>\n<ul>",
        i.skipped.len(),
        i.applied.len()
    );
    for k in &i.skipped {
        let _ = writeln!(out, "<li>{}: {}</li>", escape(&k.path), escape(&k.why));
    }
    out.push_str("</ul>\n");
}

/// The HTML report file: run facts, warnings, counts, the chart and every listed row per
/// family (up to [`REPORT_ROWS_PER_FAMILY`] each).
pub fn report(view: &ReportView) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let title = headline(view);
    head(&mut out, &title);
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    unreadable(&mut out, view);
    inbox(&mut out, view);
    nothing_to_review(&mut out, view);
    run_facts(&mut out, view);
    warnings(&mut out, view);
    out.push_str("<h2>Exceptions per outcome</h2>\n");
    out.push_str(&chart(view));
    totals(&mut out, view);
    case_table(&mut out, view);
    shadow(&mut out, view);
    for f in Family::ALL {
        let n = view.family_rows(f);
        if n == 0 {
            continue;
        }
        let _ = writeln!(out, "<h2>{} ({n})</h2>", f.title());
        item_table(&mut out, view, view.family(f), REPORT_ROWS_PER_FAMILY, n);
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// The cases, most severe first (up to [`REPORT_ROWS_PER_FAMILY`]), with their candidates.
fn case_table(out: &mut String, view: &ReportView) {
    let n = view.cases.len();
    if n == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>Cases ({n}, from {} review rows)</h2>",
        view.case_counts().tickets
    );
    if let Some((total, rates)) = view.total_lines() {
        let _ = writeln!(
            out,
            "<p><b>{}</b><br><span class=\"muted\">{}</span></p>",
            escape(&total),
            escape(&rates)
        );
    }
    // With a reporting currency, the value the cases are ordered by, beside each amount.
    let reporting = view
        .summary
        .reporting
        .as_ref()
        .map(|r| r.valuation.currency.as_str());
    let _ = writeln!(
        out,
        "<table>\n<tr><th>case</th><th>severity</th><th>what and whose</th><th>amount</th>{}<th>why</th><th>candidates</th><th>age (days)</th></tr>",
        reporting
            .map(|c| format!("<th>value ({}, for ordering)</th>", escape(c)))
            .unwrap_or_default()
    );
    for c in view.cases.iter().take(REPORT_ROWS_PER_FAMILY) {
        let value = view
            .summary
            .reporting
            .as_ref()
            .map(|r| {
                format!(
                    "<td class=\"num\">{}</td>",
                    escape(&c.value_text(&r.valuation))
                )
            })
            .unwrap_or_default();
        let sev = c.severity.as_str();
        let candidates: Vec<String> = c.candidates.iter().map(|k| k.text()).collect();
        let _ = writeln!(
            out,
            "<tr><td class=\"muted\">{}</td><td class=\"sev-{sev}\">{sev}</td><td>{}<br>{}{}</td><td class=\"num\">{}</td>{value}<td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            escape(&c.key),
            escape(&c.what()),
            escape(&c.whose()),
            if c.recipient.is_empty() {
                String::new()
            } else {
                format!(" · {}", escape(&c.recipient))
            },
            view.case_amounts(c)
                .iter()
                .map(|a| escape(a).into_owned())
                .collect::<Vec<_>>()
                .join("<br>"),
            escape(&c.why(&view.items)),
            candidates
                .iter()
                .map(|t| escape(t).into_owned())
                .collect::<Vec<_>>()
                .join("<br>"),
            c.age_days,
        );
    }
    out.push_str("</table>\n");
    if n > REPORT_ROWS_PER_FAMILY {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{} more case(s) not shown: see the Cases sheet of report.xlsx.</p>",
            n - REPORT_ROWS_PER_FAMILY
        );
    }
}

/// How many of the shadow rules' flips the email lists (the report lists the summary's).
pub const EMAIL_SHADOW_FLIPS: usize = 5;

/// `[shadow]`: what the shadow rules would change, as one sentence and a line per listed flip
/// (`P-1 · 40.00 EUR · AMBIGUOUS (review) → RESOLVED_SUCCEEDED → SUCCEEDED · rule wide ·
/// reviewers: alice confirmed line psp:L-1, the same`). None without `[shadow]`.
pub fn shadow_lines(view: &ReportView, most: usize) -> Option<(String, Vec<String>)> {
    let s = view.summary.shadow.as_ref()?;
    let lines = s
        .first
        .iter()
        .take(most)
        .map(|f| {
            let mut line = format!("{} · {} · {} → {}", f.id, f.amount, f.before, f.after);
            if !f.rule.is_empty() {
                let _ = write!(line, " · rule {}", f.rule);
            }
            if !f.reviewers.is_empty() {
                let _ = write!(line, " · reviewers: {}", f.reviewers);
            }
            line
        })
        .collect();
    Some((s.sentence(), lines))
}

/// The report's "Shadow rules would change" section.
fn shadow(out: &mut String, view: &ReportView) {
    let Some(s) = view.summary.shadow.as_ref() else {
        return;
    };
    let _ = writeln!(
        out,
        "<h2>Shadow rules would change</h2>\n<p>{}</p>",
        escape(&s.sentence())
    );
    if s.first.is_empty() {
        return;
    }
    out.push_str(
        "<div style=\"overflow-x:auto\"><table>\n<tr><th>payment or line</th><th>amount</th>\
         <th>live rules</th><th>shadow rules</th><th>rule</th><th>reviewers</th></tr>\n",
    );
    for f in &s.first {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.id),
            escape(&f.amount),
            escape(&f.before),
            escape(&f.after),
            escape(&f.rule),
            escape(&f.reviewers)
        );
    }
    out.push_str("</table></div>\n");
    if s.flips() > s.first.len() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{} more: run <code>recon backtest</code> with the shadow rules \
             for every row.</p>",
            s.flips() - s.first.len()
        );
    }
}

/// Text colour of a severity.
fn severity_color(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "#b71c1c",
        Severity::High => "#c43e00",
        Severity::Medium => "#1d4f91",
        Severity::Low => "#555555",
    }
}

/// The font of every email block (mail clients drop `<style>`: every style is inline).
const EMAIL_FONT: &str = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif";

/// How a reader of the email acts on its cases.
/// What the email says about where things are, derived from what it actually carries
/// (`email::Delivery`): the HTML and the text part say the same.
#[derive(Debug, Clone, Default)]
pub struct MailProse {
    /// Where the cases beyond the listed ones are: `in the attached report.xlsx (sheet Cases)`.
    pub more_cases: String,
    /// How to decide: which file, which sheet, where to return it.
    pub how_to_decide: String,
    /// Notes at the end: what is attached, what stays in the run folder and why.
    pub notes: Vec<String>,
}

/// The email's title line: how many cases wait for a decision.
pub fn email_title(view: &ReportView) -> String {
    let listed = view.listed_cases();
    let n = listed.len();
    if n == 0 {
        return "Nothing to decide".into();
    }
    let critical = listed
        .iter()
        .filter(|c| c.severity == Severity::Critical)
        .count();
    let mut t = format!(
        "{} case{} to decide",
        crate::money::count(n),
        if n == 1 { "" } else { "s" }
    );
    if critical > 0 {
        let _ = write!(t, ", {} critical", crate::money::count(critical));
    }
    t
}

/// `2 cases dismissed or decided by reviewers on the same evidence are not listed (report.xlsx,
/// sheet Cases).`, when there are such cases.
pub fn settled_text(view: &ReportView) -> Option<String> {
    match view.settled_cases() {
        0 => None,
        n => Some(format!(
            "{n} case{} dismissed or decided by reviewers on the same evidence {} not listed \
             (report.xlsx, sheet Cases).",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        )),
    }
}

/// The line above the title: `recon · 2026-11-27` (the run id is in the Run section at the
/// end: nothing above the cases names a run, a path or a hash).
pub fn email_kicker(view: &ReportView) -> String {
    let range = range_text(view);
    format!(
        "recon · {range}{}",
        if view.summary.dry_run {
            " (dry run)"
        } else {
            ""
        }
    )
}

/// `Resolved by recon: 3 · pending: 2 · 7 tickets in 4 cases` (pending: waiting for evidence,
/// in flight or not sent yet).
pub fn email_status(view: &ReportView) -> String {
    let count = |f: Family| -> usize {
        view.totals
            .iter()
            .filter(|(o, _)| Family::of(**o) == f)
            .map(|(_, t)| t.count)
            .sum()
    };
    let c = view.case_counts();
    format!(
        "Resolved by recon: {} · pending: {} · {} ticket{} in {} case{}",
        crate::money::count(count(Family::Resolved)),
        crate::money::count(count(Family::Pending)),
        crate::money::count(c.tickets),
        if c.tickets == 1 { "" } else { "s" },
        crate::money::count(c.cases),
        if c.cases == 1 { "" } else { "s" },
    )
}

/// The file name of `path` (the full path is at the end of the email, never above the fold).
pub fn file_name(path: &str) -> &str {
    std::path::Path::new(path)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(path)
}

/// A skipped inbox entry as the top of the email names it: its path inside the inbox folder
/// (`ana/decide.xlsx`), never the server's path to the inbox.
pub fn inbox_entry<'a>(folder: &str, path: &'a str) -> &'a str {
    path.strip_prefix(folder)
        .map(|p| p.trim_start_matches(['/', '\\']))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| file_name(path))
}

/// `2 possible matches` (none: empty), for a case's footer.
pub fn candidates_text(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " · 1 possible match".into(),
        n => format!(" · {n} possible matches"),
    }
}

/// One case as a short block: its markers, severity, plain title and amount, the next step,
/// whose, why, what changed, and a footer with the key, the outcome and the age.
fn case_block(out: &mut String, view: &ReportView, number: usize, c: &Case) {
    let color = severity_color(c.severity);
    let step = super::actions::step(c);
    let amounts: Vec<String> = view
        .case_amounts(c)
        .iter()
        .map(|a| escape(a).into_owned())
        .collect();
    let whose = if c.recipient.is_empty() {
        c.whose()
    } else {
        format!("{}, to {}", c.whose(), c.recipient)
    };
    let markers = view.marks.markers_of(c);
    let _ = writeln!(
        out,
        "<div id=\"case-{number}\" style=\"border-left:4px solid {color};background:#f6f6f6;padding:8px 10px;margin:0 0 10px\">"
    );
    if !markers.is_empty() {
        out.push_str("<div style=\"font-size:11px;margin:0 0 4px\">");
        for m in markers {
            let _ = write!(
                out,
                "<b style=\"color:#1d4f91;border:1px solid #1d4f91;padding:0 4px;margin-right:4px;white-space:nowrap\">{}</b>",
                m.badge()
            );
        }
        out.push_str("</div>\n");
    }
    let _ = write!(
        out,
        "<table role=\"presentation\" width=\"100%\" style=\"width:100%;border-collapse:collapse\"><tr>\
         <td style=\"padding:0;font-size:15px;vertical-align:top\"><b style=\"color:{color};font-size:12px\">{}</b> <b>{}</b></td>\
         <td style=\"padding:0 0 0 8px;font-size:15px;font-weight:700;text-align:right;vertical-align:top;white-space:nowrap\">{}</td>\
         </tr></table>\n\
         <div class=\"next\" style=\"font-size:14px;margin-top:4px\"><b>Next:</b> {}</div>\n\
         <div style=\"font-size:14px;color:#333;margin-top:3px\">{}</div>\n\
         <div style=\"font-size:13px;color:#333;margin-top:3px\">{}</div>\n",
        c.severity.as_str(),
        escape(step.title),
        amounts.join("<br>"),
        escape(step.next),
        escape(&whose),
        escape(&c.why(&view.items)),
    );
    for t in markers.iter().filter_map(|m| m.text()) {
        let _ = writeln!(
            out,
            "<div style=\"font-size:13px;color:#1d4f91;margin-top:3px\">{}</div>",
            escape(&t)
        );
    }
    let _ = write!(
        out,
        "<div style=\"font-size:12px;color:#595959;margin-top:3px\">case {} · {} · {} day{} old{}{}</div>\n</div>\n",
        escape(&c.key),
        escape(&c.what()),
        c.age_days,
        if c.age_days == 1 { "" } else { "s" },
        candidates_text(c.candidates.len()),
        view.case_value(c)
            .map(|v| format!(" · {}", escape(&v)))
            .unwrap_or_default(),
    );
}

/// The heading over the listed cases: `The 20 most urgent of 345 cases` / `Most urgent first`.
pub fn cases_heading(n: usize) -> String {
    if n > EMAIL_CASES {
        format!(
            "The {EMAIL_CASES} most urgent of {} cases (severity, then value)",
            crate::money::count(n)
        )
    } else {
        "Most urgent first (severity, then value)".to_string()
    }
}

/// The email's HTML body, the morning's to-do list, read in 30 seconds on a phone. Its first
/// screen: how many cases, the total at risk, what changed since yesterday (new, reopened,
/// escalated, waiting for your approval, after a decision), how to decide, then the cases by
/// severity and value, each with a plain title and its next step (up to [`EMAIL_CASES`]).
/// Below them: money at risk by severity, warnings, counts, and the run's facts (its id,
/// files, paths and hashes, which never come above the cases). One column at most 600 px
/// wide, inline styles only (mail clients drop `<style>`), no script, no external resource;
/// long ids wrap instead of widening the page.
pub fn email(view: &ReportView, prose: &MailProse) -> String {
    let notes = &prose.notes;
    let mut out = String::with_capacity(8 * 1024);
    let title = format!("{}: {}", email_kicker(view), email_title(view));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <title>{}</title>\n</head>\n<body style=\"margin:0;padding:0;background:#ffffff\">\n\
         <div style=\"max-width:600px;margin:0 auto;padding:12px 14px;{EMAIL_FONT};font-size:15px;line-height:1.4;color:#1a1a1a;overflow-wrap:anywhere;word-break:break-word\">\n",
        escape(&title)
    );
    let _ = writeln!(
        out,
        "<p style=\"margin:0;font-size:13px;color:#595959\">{}</p>\n<h1 style=\"margin:2px 0 8px;font-size:21px;line-height:1.25\">{}</h1>",
        escape(&email_kicker(view)),
        escape(&email_title(view))
    );
    let h2 = "margin:18px 0 8px;font-size:16px;border-bottom:1px solid #ddd;padding-bottom:3px";
    let cell = "padding:2px 0;vertical-align:top";
    email_unreadable(&mut out, view);
    email_inbox(&mut out, view);
    let listed = view.listed_cases();
    if listed.is_empty() {
        if view.summary.unreadable_inputs.is_empty() {
            out.push_str("<p style=\"background:#e8f5e9;border:1px solid #a5d6a7;padding:8px 12px;margin:0 0 8px;font-weight:600\">Nothing to review: no money at risk and no match to decide in this run.</p>\n");
        }
    } else {
        if let Some((total, _)) = view.at_risk_line() {
            let _ = writeln!(
                out,
                "<p id=\"total\" style=\"margin:0 0 4px;font-size:17px;font-weight:700\">{}</p>",
                escape(&total)
            );
        }
        if let Some(m) = markers_line(view) {
            let _ = writeln!(
                out,
                "<p style=\"margin:0 0 4px;font-size:14px;color:#1d4f91;font-weight:600\">{}</p>",
                escape(&m)
            );
        }
        let _ = writeln!(
            out,
            "<p id=\"how-to-decide\" style=\"margin:0 0 4px;font-size:14px\">{}</p>",
            escape(&prose.how_to_decide)
        );
        let n = listed.len();
        let _ = writeln!(out, "<h2 style=\"{h2}\">{}</h2>", cases_heading(n));
        for (k, c) in listed.iter().take(EMAIL_CASES).enumerate() {
            case_block(&mut out, view, k + 1, c);
        }
        if n > EMAIL_CASES {
            let _ = writeln!(
                out,
                "<p style=\"margin:0 0 8px;font-size:14px\">{} more case{} {}.</p>",
                crate::money::count(n - EMAIL_CASES),
                if n - EMAIL_CASES == 1 { "" } else { "s" },
                escape(&prose.more_cases)
            );
        }
        if let Some((_, Some(rates))) = view.at_risk_line() {
            let _ = writeln!(
                out,
                "<p style=\"margin:0 0 6px;font-size:13px;color:#555\">{}</p>",
                escape(&rates)
            );
        }
        let _ = writeln!(out, "<h2 style=\"{h2}\">Money at risk by severity</h2>");
        out.push_str("<table role=\"presentation\" style=\"border-collapse:collapse;font-size:14px;margin:0 0 6px\">\n");
        for t in cases::by_severity(listed.iter().copied()) {
            let _ = writeln!(
                out,
                "<tr><td style=\"{cell};font-weight:700;color:{}\">{}</td><td style=\"{cell};padding-left:16px;text-align:right;white-space:nowrap\">{} case{}</td><td style=\"{cell};padding-left:16px;text-align:right;font-weight:700\">{}</td></tr>",
                severity_color(t.severity),
                t.severity.as_str(),
                t.cases,
                if t.cases == 1 { "" } else { "s" },
                view.severity_value(t.severity)
                    .into_iter()
                    .chain(t.at_risk.iter().map(|(c, v)| view.money_text(*v, c)))
                    .map(|a| escape(&a).into_owned())
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
        out.push_str("</table>\n");
    }
    let _ = writeln!(
        out,
        "<p style=\"margin:0 0 4px;font-size:14px;color:#333\">{}</p>",
        escape(&email_status(view))
    );
    if !view.summary.warnings.is_empty() {
        let _ = writeln!(
            out,
            "<p style=\"margin:0;font-size:14px;color:#8a5a00\">{} completeness warning{}: see below.</p>",
            view.summary.warnings.len(),
            if view.summary.warnings.len() == 1 {
                ""
            } else {
                "s"
            }
        );
    }
    if let Some(settled) = settled_text(view) {
        let _ = writeln!(
            out,
            "<p style=\"margin:0 0 4px;font-size:14px;color:#555\">{}</p>",
            escape(&settled)
        );
    }
    if !view.summary.warnings.is_empty() {
        let _ = writeln!(out, "<h2 style=\"{h2}\">Completeness warnings</h2>");
        for w in &view.summary.warnings {
            let _ = writeln!(
                out,
                "<div style=\"background:#fff8e1;border:1px solid #ffe082;padding:6px 10px;margin:0 0 6px;font-size:14px\">{}</div>",
                escape(w)
            );
        }
    }
    if let Some((sentence, flips)) = shadow_lines(view, EMAIL_SHADOW_FLIPS) {
        let _ = writeln!(
            out,
            "<h2 style=\"{h2}\">Shadow rules would change</h2>\n<p style=\"margin:0 0 4px;font-size:14px;color:#333\">{}</p>",
            escape(&sentence)
        );
        for f in flips {
            let _ = writeln!(
                out,
                "<p style=\"margin:0 0 4px;font-size:13px;color:#333\">{}</p>",
                escape(&f)
            );
        }
    }
    let _ = writeln!(
        out,
        "<h2 style=\"{h2}\">Counts per outcome</h2>\n<table role=\"presentation\" width=\"100%\" style=\"width:100%;border-collapse:collapse;font-size:13px\">"
    );
    for (_, o, t) in view.outcomes_by_family() {
        let amounts: Vec<String> = t
            .amounts
            .iter()
            .map(|(c, v)| escape(&view.money_text(*v, c)).into_owned())
            .collect();
        let _ = writeln!(
            out,
            "<tr><td style=\"{cell};border-bottom:1px solid #eee\">{}</td><td style=\"{cell};border-bottom:1px solid #eee;padding-left:8px;text-align:right\">{}</td><td style=\"{cell};border-bottom:1px solid #eee;padding-left:8px;text-align:right\">{}</td></tr>",
            o.as_str(),
            t.count,
            amounts.join("<br>")
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(out, "<h2 style=\"{h2}\">Run</h2>");
    for f in run_lines(view) {
        let _ = writeln!(
            out,
            "<p style=\"margin:0 0 3px;font-size:13px;color:#444\">{}</p>",
            escape(&f)
        );
    }
    for note in notes {
        let _ = writeln!(
            out,
            "<p style=\"margin:10px 0 0;font-size:13px;color:#595959\">{}</p>",
            escape(note)
        );
    }
    out.push_str("</div>\n</body>\n</html>\n");
    out
}

/// What changed since yesterday, counted over the listed cases: `2 new · 1 reopened · 1
/// waiting for your approval` (`None`: nothing).
pub fn markers_line(view: &ReportView) -> Option<String> {
    let listed = view.listed_cases();
    super::markers::summary(listed.iter().map(|c| view.marks.markers_of(c)))
        .map(|s| format!("Since yesterday: {s}"))
}

/// The run's facts at the end of the email: its id, range and as-of, counts, every input with
/// its path and sha256, unreadable files with their paths, transitions and tickets.
pub fn run_lines(view: &ReportView) -> Vec<String> {
    let s = &view.summary;
    let (transitions, tickets) = view.effects();
    let mut facts = vec![
        format!(
            "run {}: {} .. {}, as of {}",
            s.run_id, s.range_from, s.range_to, s.as_of
        ),
        format!(
            "{} payments in scope, {} statement lines, {} rejected",
            s.payments_in_scope, s.statement_lines, s.rejected_lines
        ),
    ];
    for i in &s.inputs {
        facts.push(format!(
            "input {}: {} ({} lines, {} rejected, sha256 {})",
            i.source, i.path, i.lines, i.rejected, i.sha256
        ));
    }
    if s.inputs.is_empty() {
        facts.push("no statement file was read".into());
    }
    for f in &s.unreadable_inputs {
        facts.push(format!("unreadable {}: {}", f.source, f.path));
    }
    if let Some(i) = &s.inbox {
        facts.push(format!("decisions inbox: {}", i.folder));
    }
    facts.push(format!("transitions: {transitions}"));
    facts.push(format!("tickets: {tickets}"));
    facts
}

/// Unreadable statement files at the top of the email: source, file name and period, and
/// why (the full paths are in the Run section at the end).
fn email_unreadable(out: &mut String, view: &ReportView) {
    let files = &view.summary.unreadable_inputs;
    if files.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<p style=\"margin:0 0 4px;font-size:15px;font-weight:700;color:#b71c1c\">CRITICAL: {} statement file{} cannot be read</p>\n\
         <p style=\"margin:0 0 4px;font-size:14px\">Nothing in them was used, and their days are incomplete: no payment is resolved \
         FAILED on them until the file is delivered again.</p>",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    for f in files {
        let _ = writeln!(
            out,
            "<p style=\"margin:0 0 4px;font-size:13px\">{} {} ({}): {}</p>",
            escape(&f.source),
            escape(file_name(&f.path)),
            escape(&f.period),
            escape(&f.error)
        );
    }
}

/// The decisions inbox at the top of the email, when the run's pass skipped something: each
/// entry by its path inside the inbox, with why.
fn email_inbox(out: &mut String, view: &ReportView) {
    let Some(i) = view.summary.inbox.as_ref().filter(|i| i.needs_attention()) else {
        return;
    };
    let _ = writeln!(
        out,
        "<p style=\"margin:0 0 4px;font-size:15px;font-weight:700;color:#8a5a00\">Decisions inbox: {} folder(s) or file(s) skipped</p>\n\
         <p style=\"margin:0 0 4px;font-size:14px\">Nothing in them was applied ({} file(s) applied). Each says why:</p>",
        i.skipped.len(),
        i.applied.len()
    );
    for k in &i.skipped {
        let _ = writeln!(
            out,
            "<p style=\"margin:0 0 4px;font-size:13px\">{}: {}</p>",
            escape(inbox_entry(&i.folder, &k.path)),
            escape(&k.why)
        );
    }
}

#[cfg(test)]
mod tests {

    /// WCAG relative luminance of `#rrggbb` or `#rgb` (a colour, not money: floats are right).
    #[allow(clippy::float_arithmetic)]
    fn luminance(hex: &str) -> f64 {
        let h = hex.trim_start_matches('#');
        let h: String = if h.len() == 3 {
            h.chars().flat_map(|c| [c, c]).collect()
        } else {
            h.to_string()
        };
        let channel = |k: usize| {
            let c = f64::from(u8::from_str_radix(&h[k..k + 2], 16).expect("hex")) / 255.0;
            if c <= 0.039_28 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4)
    }

    /// Every text colour of the reports and the email, the severities' included, against every
    /// background they use: at least WCAG AA's 4.5:1 (the case footer was 4.2:1 on its grey).
    #[test]
    #[allow(clippy::float_arithmetic)]
    fn every_text_colour_meets_wcag_aa_on_every_background() {
        let src = include_str!("html.rs");
        let code = &src[..src.find("#[cfg(test)]").expect("tests")];
        let hexes = |prefix: &str| -> Vec<String> {
            code.match_indices(prefix)
                .filter(|(i, _)| {
                    // `color:` but not `background-color:` / `border-color:`.
                    prefix != "color:#" || !code[..*i].ends_with('-')
                })
                .map(|(i, _)| {
                    code[i + prefix.len() - 1..]
                        .chars()
                        .take_while(|c| *c == '#' || c.is_ascii_hexdigit())
                        .collect::<String>()
                })
                .filter(|h| h.len() == 4 || h.len() == 7)
                .collect()
        };
        let mut texts = hexes("color:#");
        texts.extend(
            [
                Severity::Critical,
                Severity::High,
                Severity::Medium,
                Severity::Low,
            ]
            .map(|s| severity_color(s).to_string()),
        );
        let mut backgrounds = hexes("background:#");
        backgrounds.push("#ffffff".into());
        assert!(
            texts.len() > 5 && backgrounds.len() > 2,
            "{texts:?} {backgrounds:?}"
        );
        for t in &texts {
            for b in &backgrounds {
                let (a, c) = (luminance(t), luminance(b));
                let ratio = (a.max(c) + 0.05) / (a.min(c) + 0.05);
                assert!(
                    ratio >= 4.5,
                    "{t} on {b}: {ratio:.2}:1, under WCAG AA's 4.5:1"
                );
            }
        }
    }
    use super::{Severity, escape, item_table, severity_color};

    /// A table cut to its first rows says how many it leaves out as people read counts
    /// (`56,000`, not `56000`).
    #[test]
    fn the_rows_a_table_leaves_out_are_counted_in_thousands() {
        let view = crate::report::ReportView::build(
            &crate::outputs::summary::Summary::default(),
            &std::collections::BTreeMap::new(),
            &[],
            &[],
            &[],
            0,
            None,
        );
        let mut out = String::new();
        item_table(&mut out, &view, std::iter::empty(), 10_000, 66_000);
        assert!(
            out.contains("56,000 more row(s) not shown: every row is in diff.csv."),
            "{out}"
        );
        let mut whole = String::new();
        item_table(&mut whole, &view, std::iter::empty(), 10_000, 10_000);
        assert!(!whole.contains("not shown"), "{whole}");
    }

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
