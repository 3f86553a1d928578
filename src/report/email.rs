//! The email alert: an HTML body with a plain-text alternative and the files to decide in.
//! Built from the same [`ReportView`] as the reports, so it shows nothing the reports do not
//! (account numbers are masked there already).
//!
//! What it carries is decided once, by [`plan`]: report.xlsx when it fits the attachment
//! limit, else `decide.xlsx` (Summary and Decide for as many of the first cases, by severity then value, as
//! fit), then diff.csv if the message stays under `max_email_mb`. The MIME parts and every
//! sentence about attachments come from that one [`Delivery`], so the text never calls a file
//! attached that the message lacks.

use super::{
    DECIDE_XLSX_FILE, DIFF_CSV_FILE, Family, ReportView, XLSX_FILE, cases, html, text_safe, xlsx,
};
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
/// critical), what recon resolved, what is pending (no run id: it is at the end of the body).
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
        "{}{range}: {what}, {} resolved, {} pending",
        if s.dry_run { "[dry run] " } else { "" },
        crate::money::count(family_count(view, Family::Resolved)),
        crate::money::count(family_count(view, Family::Pending)),
    );
    text_safe(&out).into_owned()
}

/// The plain-text alternative: the same content as the HTML body, in the same order, in lines
/// short enough for a phone.
pub fn text(view: &ReportView, prose: &html::MailProse) -> String {
    let notes = &prose.notes;
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
                text_safe(html::file_name(&f.path)),
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
             file(s) applied). Each says why:",
            i.skipped.len(),
            i.applied.len()
        );
        for k in &i.skipped {
            let _ = writeln!(
                out,
                "  - {}: {}",
                text_safe(html::inbox_entry(&i.folder, &k.path)),
                text_safe(&k.why)
            );
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
        if let Some((total, _)) = view.at_risk_line() {
            let _ = writeln!(out, "{total}");
        }
        if let Some(m) = html::markers_line(view) {
            let _ = writeln!(out, "{m}");
        }
        let _ = writeln!(out, "{}", prose.how_to_decide);
        let n = listed.len();
        let _ = writeln!(out, "\n{}:", html::cases_heading(n));
        for (k, c) in listed.iter().take(html::EMAIL_CASES).enumerate() {
            let step = super::actions::step(c);
            out.push('\n');
            let markers = view.marks.markers_of(c);
            if !markers.is_empty() {
                let badges: Vec<String> =
                    markers.iter().map(|m| format!("[{}]", m.badge())).collect();
                let _ = writeln!(out, "{}", badges.join(" "));
            }
            let _ = writeln!(
                out,
                "{}. {} {}: {}",
                k + 1,
                c.severity.as_str(),
                step.title,
                view.case_amounts(c).join(", "),
            );
            let _ = writeln!(out, "   Next: {}", step.next);
            let whose = if c.recipient.is_empty() {
                c.whose()
            } else {
                format!("{}, to {}", c.whose(), c.recipient)
            };
            let _ = writeln!(out, "   {}", text_safe(&whose));
            let _ = writeln!(out, "   {}", text_safe(&c.why(&view.items)));
            for t in markers.iter().filter_map(|m| m.text()) {
                let _ = writeln!(out, "   {}", text_safe(&t));
            }
            let _ = writeln!(
                out,
                "   case {} · {} · {} day{} old{}{}",
                c.key,
                c.what(),
                c.age_days,
                if c.age_days == 1 { "" } else { "s" },
                html::candidates_text(c.candidates.len()),
                view.case_value(c)
                    .map(|v| format!(" · {v}"))
                    .unwrap_or_default()
            );
        }
        if n > html::EMAIL_CASES {
            let _ = writeln!(
                out,
                "\n{} more case{} {}.",
                crate::money::count(n - html::EMAIL_CASES),
                if n - html::EMAIL_CASES == 1 { "" } else { "s" },
                prose.more_cases
            );
        }
        out.push('\n');
        if let Some((_, Some(rates))) = view.at_risk_line() {
            let _ = writeln!(out, "{}", text_safe(&rates));
        }
        out.push_str("Money at risk by severity:\n");
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
    out.push('\n');
    if !s.warnings.is_empty() {
        out.push_str("Completeness warnings:\n");
        for w in &s.warnings {
            let _ = writeln!(out, "  - {}", text_safe(w));
        }
        out.push('\n');
    }
    if let Some((sentence, flips)) = html::shadow_lines(view, html::EMAIL_SHADOW_FLIPS) {
        let _ = writeln!(out, "Shadow rules: {}", text_safe(&sentence));
        for f in flips {
            let _ = writeln!(out, "  - {}", text_safe(&f));
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
    out.push_str("\nRun:\n");
    for f in html::run_lines(view) {
        let _ = writeln!(out, "  {}", text_safe(&f));
    }
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

/// XLSX content type.
const XLSX_MIME: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
/// Room for the headers of the message and of each part, beyond the encoded bodies.
const HEADERS_ROOM: u64 = 4 * 1024;

/// One file the message carries.
#[derive(Debug, Clone)]
pub struct Attached {
    /// File name (as in the run folder).
    pub name: &'static str,
    /// Content type.
    pub mime: &'static str,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// What the alert carries and what it leaves in the run folder: the one decision both the
/// MIME parts and the text are made from.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Attachments, in priority order.
    pub attached: Vec<Attached>,
    /// When decide.xlsx is attached: how many cases it holds, of how many open ones.
    pub decide: Option<(usize, usize)>,
    /// Files left in the run folder, each with why (`diff.csv (9,100 KiB): over ...`).
    pub left_out: Vec<String>,
    /// The full report's address, when `report_url` is set.
    pub report_link: Option<String>,
    /// The run folder (named at the end of the message, never above the fold).
    pub run_dir: String,
    /// Where reviewers put decided files, as they reach it (`email.decisions_folder`, else
    /// the inbox's folder name; `None`: no inbox).
    pub decisions_folder: Option<String>,
}

/// Bytes of `n` bytes in base64 as lettre writes it: 76-character lines ending in CRLF.
fn base64_len(n: u64) -> u64 {
    let chars = n.div_ceil(3) * 4;
    chars + chars.div_ceil(76) * 2
}

fn kib(n: u64) -> String {
    format!("{} KiB", n.div_ceil(1024))
}

fn is_attached(d: &Delivery, name: &str) -> bool {
    d.attached.iter().any(|a| a.name == name)
}

impl Delivery {
    /// Whether `name` is among the attachments.
    pub fn has(&self, name: &str) -> bool {
        is_attached(self, name)
    }

    /// Where report.xlsx is for a reader of the message.
    fn report_where(&self) -> String {
        if self.has(XLSX_FILE) {
            "the attached report.xlsx".into()
        } else if let Some(url) = &self.report_link {
            format!("report.xlsx ({url})")
        } else {
            "report.xlsx in the run folder".into()
        }
    }

    /// The sentences about files, from the attachment list alone.
    pub fn prose(&self) -> html::MailProse {
        let open = match self.decide {
            Some((n, of)) if self.has(DECIDE_XLSX_FILE) => {
                let count = |k: usize| crate::money::grouped(&k.into());
                if n == of {
                    "the attached decide.xlsx".to_string()
                } else {
                    format!(
                        "the attached decide.xlsx (the first {} of {} cases; all are in {})",
                        count(n),
                        count(of),
                        self.report_where()
                    )
                }
            }
            _ => self.report_where(),
        };
        let back = match &self.decisions_folder {
            Some(folder) => format!(
                "save, and put the file in your own folder of the decisions inbox, {folder} \
                 (your folder is named after you). The next run applies it"
            ),
            None => "save, and hand the file to whoever runs recon decisions apply".to_string(),
        };
        let mut notes = self.left_out.clone();
        if self.attached.is_empty() {
            notes.push("Nothing is attached.".into());
        } else {
            let names: Vec<&str> = self.attached.iter().map(|a| a.name).collect();
            notes.push(format!("Attached: {}.", names.join(", ")));
        }
        if let Some(url) = &self.report_link {
            notes.push(format!("The full report: {url}"));
        }
        notes.push(format!(
            "The run folder, with report.xlsx and results.csv: {}",
            self.run_dir
        ));
        html::MailProse {
            more_cases: format!("in {} (sheet Cases)", self.report_where()),
            how_to_decide: format!(
                "How to decide: open {open}, sheet Decide; pick a decision in each row's \
                 drop-down, {back}."
            ),
            notes,
        }
    }
}

/// Decides what the alert carries, given `budget` bytes (as encoded) for attachments:
/// report.xlsx when it fits the attachment limit (it holds every case); otherwise decide.xlsx
/// with as many of the first cases (severity, then value) as fit, written into `files`; then
/// diff.csv when it fits what is left. Nothing else decides an attachment.
pub fn plan(
    cfg: &EmailConfig,
    view: &ReportView,
    files: &Path,
    run_dir: &Path,
    budget: u64,
) -> Result<Delivery> {
    let mut d = Delivery {
        attached: Vec::new(),
        decide: None,
        left_out: Vec::new(),
        report_link: cfg.report_url.as_ref().and_then(|u| {
            run_dir
                .file_name()
                .map(|f| format!("{u}/{}/{XLSX_FILE}", f.to_string_lossy()))
        }),
        run_dir: run_dir.display().to_string(),
        decisions_folder: cfg.decisions_folder.clone(),
    };
    let mut left = budget;
    let read = |name: &str| -> Result<Option<Vec<u8>>> {
        let path = files.join(name);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    };
    let fits = |len: u64, left: u64| len <= cfg.max_attachment_bytes && base64_len(len) <= left;
    let why = |len: u64, left: u64| {
        if len > cfg.max_attachment_bytes {
            format!(
                "over the attachment limit of {}",
                kib(cfg.max_attachment_bytes)
            )
        } else {
            format!(
                "it would take the message over its cap of {}",
                kib(cfg.max_email_bytes)
            ) + if left < budget {
                " with the files above"
            } else {
                ""
            }
        }
    };
    match read(XLSX_FILE)? {
        Some(b) if fits(b.len() as u64, left) => {
            left -= base64_len(b.len() as u64);
            d.attached.push(Attached {
                name: XLSX_FILE,
                mime: XLSX_MIME,
                bytes: b,
            });
        }
        report => {
            match report {
                Some(b) => d.left_out.push(format!(
                    "report.xlsx ({}) is not attached: {}.",
                    kib(b.len() as u64),
                    why(b.len() as u64, left)
                )),
                None => d
                    .left_out
                    .push("report.xlsx was not written for this run.".into()),
            }
            let of = view.listed_cases().len();
            if of > 0 {
                let limit = cfg.max_attachment_bytes.min(decoded_room(left));
                let (mut n, mut tries) = (of, 0);
                let decide = loop {
                    let b = xlsx::decide_workbook(view, n)?;
                    let len = b.len() as u64;
                    tries += 1;
                    tracing::debug!(
                        cases = n,
                        of,
                        bytes = len,
                        limit,
                        tries,
                        "Decide-workbook built."
                    );
                    if len <= limit {
                        break Some((n, b));
                    }
                    if n == 1 {
                        break None;
                    }
                    // In proportion to the overshoot, 5% under it (a workbook has a fixed
                    // part, and its rows are not all alike), and at least one fewer.
                    let scaled = (n as u128 * limit as u128 * 95 / (len as u128 * 100)) as usize;
                    n = scaled.min(n - 1).max(1);
                };
                match decide {
                    Some((n, b)) => {
                        let path = files.join(DECIDE_XLSX_FILE);
                        std::fs::write(&path, &b)
                            .with_context(|| format!("writing {}", path.display()))?;
                        left -= base64_len(b.len() as u64);
                        d.decide = Some((n, of));
                        d.attached.push(Attached {
                            name: DECIDE_XLSX_FILE,
                            mime: XLSX_MIME,
                            bytes: b,
                        });
                    }
                    None => d.left_out.push(format!(
                        "decide.xlsx is not attached: even one case is {}.",
                        why(limit + 1, left)
                    )),
                }
            }
        }
    }
    match read(DIFF_CSV_FILE)? {
        Some(b) if fits(b.len() as u64, left) => d.attached.push(Attached {
            name: DIFF_CSV_FILE,
            mime: "text/csv; charset=utf-8",
            bytes: b,
        }),
        Some(b) => d.left_out.push(format!(
            "diff.csv ({}) stays in the run folder: {}.",
            kib(b.len() as u64),
            why(b.len() as u64, left)
        )),
        None => d
            .left_out
            .push("diff.csv was not written for this run.".into()),
    }
    Ok(d)
}

/// The most bytes a file can have and still take at most `encoded` bytes in base64.
fn decoded_room(encoded: u64) -> u64 {
    // 76 characters and CRLF per 57 bytes.
    encoded / 78 * 57 + (encoded % 78).saturating_sub(2) / 4 * 3
}

/// Builds the alert for the run whose files are in `run_dir` (see [`plan`] for what it
/// carries).
pub fn build(cfg: &EmailConfig, view: &ReportView, run_dir: &Path) -> Result<Message> {
    build_in(cfg, view, run_dir, run_dir)
}

/// [`build`] for a run whose files are still in `files` (its `.tmp` folder) and will be in
/// `run_dir`, which the message names: the gather keeps its alert in its folder before the
/// folder is renamed into place.
///
/// The attachments get what the cap leaves after the bodies; should the message still come
/// out over `max_email_mb` (headers longer than allowed for), it is planned again with that
/// much less, down to no attachments at all.
pub fn build_in(
    cfg: &EmailConfig,
    view: &ReportView,
    files: &Path,
    run_dir: &Path,
) -> Result<Message> {
    // The bodies with the longest notes (nothing attached) bound what they take.
    let bare = Delivery {
        attached: Vec::new(),
        decide: None,
        left_out: vec![String::new(); 3],
        report_link: None,
        run_dir: run_dir.display().to_string(),
        decisions_folder: cfg.decisions_folder.clone(),
    };
    let bodies = {
        let mut p = bare.prose();
        p.notes
            .iter_mut()
            .for_each(|n| n.push_str(&" ".repeat(200)));
        base64_len(text(view, &p).len() as u64) + base64_len(html::email(view, &p).len() as u64)
    };
    let mut budget = cfg.max_email_bytes.saturating_sub(bodies + HEADERS_ROOM);
    loop {
        let d = plan(cfg, view, files, run_dir, budget)?;
        let message = assemble(cfg, view, &d)?;
        let len = message.formatted().len() as u64;
        if len <= cfg.max_email_bytes || d.attached.is_empty() {
            return Ok(message);
        }
        budget = budget.saturating_sub(len - cfg.max_email_bytes);
    }
}

/// The message for `d`: its text and HTML from [`Delivery::prose`], its parts from the same
/// attachment list.
fn assemble(cfg: &EmailConfig, view: &ReportView, d: &Delivery) -> Result<Message> {
    let prose = d.prose();
    // Base64 for both bodies: long HTML lines stay valid and every client decodes it.
    let text_part = SinglePart::builder()
        .header(ContentType::TEXT_PLAIN)
        .header(ContentTransferEncoding::Base64)
        .body(text(view, &prose));
    let html_part = SinglePart::builder()
        .header(ContentType::TEXT_HTML)
        .header(ContentTransferEncoding::Base64)
        .body(html::email(view, &prose));
    let mut mixed = MultiPart::mixed().multipart(
        MultiPart::alternative()
            .singlepart(text_part)
            .singlepart(html_part),
    );
    for a in &d.attached {
        let ct = ContentType::parse(a.mime).context("attachment content type")?;
        mixed = mixed.singlepart(
            SinglePart::builder()
                .header(ct)
                .header(ContentDisposition::attachment(a.name))
                .header(ContentTransferEncoding::Base64)
                .body(a.bytes.clone()),
        );
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
