//! The email alert: an HTML body with a plain-text alternative, the XLSX report and the CSV
//! diff attached. Built from the same [`ReportView`] as the reports, so it shows nothing the
//! reports do not (account numbers are masked there already).

use super::{DIFF_CSV_FILE, Family, ReportView, XLSX_FILE, cases, html, text_safe};
use crate::config::{EmailConfig, RecipientKey};
use crate::outcome::Outcome;
use anyhow::{Context, Result};
use lettre::Message;
use lettre::message::header::{ContentDisposition, ContentTransferEncoding, ContentType};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use std::fmt::Write as _;
use std::path::Path;

fn family_count(view: &ReportView, f: Family) -> usize {
    view.totals
        .iter()
        .filter(|(o, _)| Family::of(**o) == f)
        .map(|(_, t)| t.count)
        .sum()
}

/// The subject: prefix, range, how many cases wait for a decision (and how many are
/// critical), what recon resolved, what is pending, the run id.
pub fn subject(view: &ReportView, prefix: &str) -> String {
    let s = &view.summary;
    let range = if s.range_from == s.range_to {
        s.range_from.clone()
    } else {
        format!("{}..{}", s.range_from, s.range_to)
    };
    let unreadable = s.unreadable_inputs.len();
    let what = if unreadable > 0 {
        format!(
            "CRITICAL {unreadable} unreadable file(s), {}",
            html::email_title(view)
        )
    } else if view.listed_cases().is_empty() {
        "nothing to review".to_string()
    } else {
        html::email_title(view)
    };
    let mut out = String::new();
    if !prefix.is_empty() {
        out.push_str(prefix);
        out.push(' ');
    }
    let _ = write!(
        out,
        "{}{range}: {what}, {} resolved, {} pending (run {})",
        if s.dry_run { "[dry run] " } else { "" },
        family_count(view, Family::Resolved),
        family_count(view, Family::Pending),
        s.run_id
    );
    text_safe(&out).into_owned()
}

/// The plain-text alternative: the same content as the HTML body, in the same order, in lines
/// short enough for a phone.
pub fn text(view: &ReportView, notes: &[String]) -> String {
    let s = &view.summary;
    let mut out = String::new();
    let _ = writeln!(out, "{}", text_safe(&html::email_kicker(view)));
    let _ = writeln!(out, "{}", html::email_title(view));
    out.push('\n');
    if !s.unreadable_inputs.is_empty() {
        let _ = writeln!(
            out,
            "CRITICAL: {} statement file(s) cannot be read. Nothing in them was used, and their \
             days are incomplete: no payment is resolved FAILED on them until the file is \
             delivered again.",
            s.unreadable_inputs.len()
        );
        for f in &s.unreadable_inputs {
            let _ = writeln!(
                out,
                "  - {} {} ({}): {}",
                text_safe(&f.source),
                text_safe(&f.path),
                text_safe(&f.period),
                text_safe(&f.error)
            );
        }
        out.push('\n');
    }
    if let Some(i) = s.inbox.as_ref().filter(|i| i.needs_attention()) {
        let _ = writeln!(
            out,
            "Decisions inbox: {} folder(s) or file(s) skipped. Nothing in them was applied ({} \
             file(s) applied; see summary.json inbox). Each says why:",
            i.skipped.len(),
            i.applied.len()
        );
        for k in &i.skipped {
            let _ = writeln!(out, "  - {}: {}", text_safe(&k.path), text_safe(&k.why));
        }
        out.push('\n');
    }
    let listed = view.listed_cases();
    if listed.is_empty() {
        if s.unreadable_inputs.is_empty() {
            out.push_str(
                "Nothing to review: no money at risk and no match to decide in this run.\n",
            );
        }
    } else {
        if let Some((total, rates)) = view.total_lines() {
            let _ = writeln!(out, "{total}");
            let _ = writeln!(out, "{}", text_safe(&rates));
        }
        out.push_str("Money at risk:\n");
        for t in cases::by_severity(listed.iter().copied()) {
            let amounts: Vec<String> = t
                .at_risk
                .iter()
                .map(|(c, v)| view.money_text(*v, c))
                .collect();
            let _ = writeln!(
                out,
                "  {:<8}  {:>3} case{}  {}{}",
                t.severity.as_str(),
                t.cases,
                if t.cases == 1 { " " } else { "s" },
                view.severity_value(t.severity)
                    .map(|v| format!("{v} · "))
                    .unwrap_or_default(),
                amounts.join(", ")
            );
        }
    }
    let _ = writeln!(out, "{}", html::email_status(view));
    if !s.warnings.is_empty() {
        let _ = writeln!(
            out,
            "{} completeness warning{}: see below.",
            s.warnings.len(),
            if s.warnings.len() == 1 { "" } else { "s" }
        );
    }
    if let Some(settled) = html::settled_text(view) {
        let _ = writeln!(out, "{settled}");
    }
    let n = listed.len();
    if n > 0 {
        out.push('\n');
        if n > html::EMAIL_CASES {
            let _ = writeln!(out, "The {} most severe of {n} cases:", html::EMAIL_CASES);
        } else {
            out.push_str("Most severe first:\n");
        }
        for (k, c) in listed.iter().take(html::EMAIL_CASES).enumerate() {
            out.push('\n');
            let _ = writeln!(
                out,
                "{}. {}  {}{}",
                k + 1,
                c.severity.as_str(),
                view.case_amounts(c).join(", "),
                view.case_value(c)
                    .map(|v| format!(" · {v}"))
                    .unwrap_or_default()
            );
            let whose = if c.recipient.is_empty() {
                c.whose()
            } else {
                format!("{}, to {}", c.whose(), c.recipient)
            };
            let _ = writeln!(out, "   {}: {}", c.what(), text_safe(&whose));
            let _ = writeln!(out, "   {}", text_safe(&c.why));
            let _ = writeln!(
                out,
                "   case {} · {} day{} old{}",
                c.key,
                c.age_days,
                if c.age_days == 1 { "" } else { "s" },
                match c.candidates.len() {
                    0 => String::new(),
                    1 => " · 1 candidate".into(),
                    n => format!(" · {n} candidates"),
                }
            );
        }
        if n > html::EMAIL_CASES {
            let _ = writeln!(
                out,
                "\n{} more case{} in the attached report.xlsx (sheet Cases).",
                n - html::EMAIL_CASES,
                if n - html::EMAIL_CASES == 1 { "" } else { "s" }
            );
        }
        let _ = writeln!(out, "\n{}", html::HOW_TO_DECIDE);
    }
    out.push('\n');
    if !s.warnings.is_empty() {
        out.push_str("Completeness warnings:\n");
        for w in &s.warnings {
            let _ = writeln!(out, "  - {}", text_safe(w));
        }
        out.push('\n');
    }
    out.push_str("Counts per outcome:\n");
    for (_, o, t) in view.outcomes_by_family() {
        let amounts: Vec<String> = t
            .amounts
            .iter()
            .map(|(c, v)| view.money_text(*v, c))
            .collect();
        let _ = writeln!(
            out,
            "  {:<22} {:>6}  {}",
            o.as_str(),
            t.count,
            amounts.join(", ")
        );
    }
    out.push('\n');
    let _ = writeln!(out, "Run {}:", text_safe(&s.run_id));
    let _ = writeln!(
        out,
        "  {} .. {}, as of {}",
        s.range_from, s.range_to, s.as_of
    );
    let _ = writeln!(
        out,
        "  {} payments in scope, {} statement lines, {} rejected",
        s.payments_in_scope, s.statement_lines, s.rejected_lines
    );
    for i in &s.inputs {
        let _ = writeln!(
            out,
            "  input {}: {} ({} lines, {} rejected, sha256 {})",
            text_safe(&i.source),
            text_safe(&i.path),
            i.lines,
            i.rejected,
            i.sha256
        );
    }
    let (transitions, tickets) = view.effects();
    let _ = writeln!(out, "  transitions: {transitions}");
    let _ = writeln!(out, "  tickets: {tickets}");
    for note in notes {
        let _ = writeln!(out, "\n{}", text_safe(note));
    }
    out
}

/// Recipients: `to` for every alert, plus the extra recipients of every outcome and family
/// the run has rows of (deduplicated, in config order).
pub fn recipients(cfg: &EmailConfig, view: &ReportView) -> Vec<Mailbox> {
    let mut out: Vec<Mailbox> = Vec::new();
    let mut add = |m: &Mailbox| {
        if !out.iter().any(|o| o.email == m.email) {
            out.push(m.clone());
        }
    };
    cfg.to.iter().for_each(&mut add);
    let present = |o: Outcome| view.totals.get(&o).is_some_and(|t| t.count > 0);
    for (key, list) in &cfg.extra_recipients {
        let hit = match key {
            RecipientKey::Outcome(o) => present(*o),
            RecipientKey::Family(f) => Outcome::ALL
                .into_iter()
                .any(|o| Family::of(o) == *f && present(o)),
        };
        if hit {
            list.iter().for_each(&mut add);
        }
    }
    out
}

/// Builds the alert for the run whose files are in `run_dir` (report.xlsx and diff.csv are
/// attached when present and not larger than the configured limit).
pub fn build(cfg: &EmailConfig, view: &ReportView, run_dir: &Path) -> Result<Message> {
    build_in(cfg, view, run_dir, run_dir)
}

/// [`build`] for a run whose files are still in `files` (its `.tmp` folder) and will be in
/// `run_dir`, which the message names: the gather keeps its alert in its folder before the
/// folder is renamed into place.
pub fn build_in(
    cfg: &EmailConfig,
    view: &ReportView,
    files: &Path,
    run_dir: &Path,
) -> Result<Message> {
    let mut notes = Vec::new();
    let mut attachments = Vec::new();
    for (name, mime) in [
        (
            XLSX_FILE,
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ),
        (DIFF_CSV_FILE, "text/csv; charset=utf-8"),
    ] {
        let path = files.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            notes.push(format!("{name} was not written for this run."));
            continue;
        };
        if meta.len() > cfg.max_attachment_bytes {
            notes.push(format!(
                "{name} ({} KiB) is larger than the attachment limit; it is in {}.",
                meta.len().div_ceil(1024),
                run_dir.display()
            ));
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let ct = ContentType::parse(mime).context("attachment content type")?;
        attachments.push(
            SinglePart::builder()
                .header(ct)
                .header(ContentDisposition::attachment(name))
                .header(ContentTransferEncoding::Base64)
                .body(bytes),
        );
    }
    if !attachments.is_empty() {
        let names: Vec<&str> = [XLSX_FILE, DIFF_CSV_FILE]
            .into_iter()
            .filter(|n| !notes.iter().any(|note| note.starts_with(n)))
            .collect();
        notes.push(format!(
            "Attached: {}. The full results are in {}.",
            names.join(", "),
            run_dir.join("results.csv").display()
        ));
    }
    // Base64 for both bodies: long HTML lines stay valid and every client decodes it.
    let text_part = SinglePart::builder()
        .header(ContentType::TEXT_PLAIN)
        .header(ContentTransferEncoding::Base64)
        .body(text(view, &notes));
    let html_part = SinglePart::builder()
        .header(ContentType::TEXT_HTML)
        .header(ContentTransferEncoding::Base64)
        .body(html::email(view, &notes));
    let mut mixed = MultiPart::mixed().multipart(
        MultiPart::alternative()
            .singlepart(text_part)
            .singlepart(html_part),
    );
    for a in attachments {
        mixed = mixed.singlepart(a);
    }
    let mut builder = Message::builder()
        .from(cfg.from.clone())
        .subject(subject(view, &cfg.subject_prefix))
        .date_now()
        .user_agent(format!("recon {}", env!("CARGO_PKG_VERSION")));
    for m in recipients(cfg, view) {
        builder = builder.to(m);
    }
    builder
        .multipart(mixed)
        .context("building the alert message")
}
