//! One reconciliation run: lock, record, load, match, classify, write, apply.
//!
//! Order of effects, so that a crash at any point leaves nothing half-done:
//! 1. rules and config are validated before any data is read;
//! 2. the run record is inserted as RUNNING (not in a dry run);
//! 3. outputs are written into `<run>.tmp/`;
//! 4. transitions, tickets and follow-ups are committed in ONE database transaction;
//! 5. the output folder is renamed into place, then the run record is marked COMPLETED;
//! 6. the email alert is queued in the outbox, the run lock is released, and the alert is
//!    delivered (messages an earlier run left in the outbox went first, under the lock). A
//!    failed alert never undoes the run: the message stays queued and [`RunReport::alert`]
//!    says so (exit code [`crate::exit::ALERT_FAILED`]).
//!
//! A re-run of the same range reproduces the same `results.csv`: classification uses the
//! status before recon's own transitions, and follow-ups keep carried-over payments in the
//! scope of the range that closed them.

use crate::config::Config;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::ledger::Status;
use crate::ledger::load::{LoadRange, LoadedLedger};
use crate::matching;
use crate::outcome::{self, Action, Context, Outcome};
use crate::outputs::results;
use crate::outputs::summary::{self, Summary};
use crate::report::outbox::{self, Alert};
use crate::report::{self as reports, ReportView};
use crate::rules::RuleSet;
pub(crate) use crate::run_data::RunData;
pub use crate::run_data::RunOptions;
use crate::sources::{self, StatementLine};
use crate::timeparse::{self, DAY, HOUR, MINUTE, Micros};
use anyhow::{Context as _, Result};
use chrono::{NaiveDate, Utc};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Run id.
    pub run_id: String,
    /// The run's output folder.
    pub out_dir: PathBuf,
    /// The summary written to summary.json (for a range: the last day's; see `range`).
    pub summary: Summary,
    /// For a range run: each day's report, in order, and the range summary.
    pub range: Option<(Vec<RunReport>, RangeSummary)>,
    /// What happened to the email alert (for a range: its one message, sent after the last
    /// day).
    pub alert: Alert,
}

/// `summary.json` of a range run (`--from … --to …`): one line per day plus each item's final
/// outcome over the range (a payment carried over from one day to the next counts once, with
/// the outcome of the last day that reported it).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RangeSummary {
    /// Run id of the range (each day's run id is `<it>-<YYYYMMDD>`).
    pub run_id: String,
    /// First day.
    pub range_from: String,
    /// Last day (inclusive).
    pub range_to: String,
    /// Cut-off.
    pub as_of: String,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// One entry per day.
    pub days: Vec<DaySummary>,
    /// Outcome → final count and amounts per currency over the range.
    pub outcomes: BTreeMap<String, summary::OutcomeStats>,
    /// Sum of the days' transitions.
    pub transitions: summary::TransitionStats,
    /// Sum of the days' tickets.
    pub tickets: summary::TicketStats,
    /// Every distinct warning of the days.
    pub warnings: Vec<String>,
}

impl RangeSummary {
    /// A short human summary for the terminal.
    pub fn text(&self, out_dir: &str) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "recon run {}: {} .. {} day by day (as of {}){}",
            self.run_id,
            self.range_from,
            self.range_to,
            self.as_of,
            if self.dry_run {
                " [dry run: nothing changed; each day ran without the previous days' effects]"
            } else {
                ""
            }
        );
        for d in &self.days {
            let _ = writeln!(s, "  {}: {} payments in scope", d.date, d.payments_in_scope);
        }
        let _ = writeln!(s, "  final outcome per item over the range:");
        summary::write_totals(
            &mut s,
            &self.outcomes,
            &self.transitions,
            &self.tickets,
            &self.warnings,
        );
        let _ = writeln!(s, "  results: {out_dir}/<day>/");
        s
    }
}

/// One day of a range run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DaySummary {
    /// The day.
    pub date: String,
    /// Its run id.
    pub run_id: String,
    /// Its folder, relative to the range's.
    pub folder: String,
    /// Payments reported that day.
    pub payments_in_scope: usize,
    /// Outcome → count that day (non-zero only).
    pub outcomes: BTreeMap<String, usize>,
}

/// Statement files (source, path, sha256) read by earlier days of the same range, with the day
/// that read them first: a dry-run range records nothing in the database, yet its days must
/// see each other's files as a real range would.
pub(crate) type ReadInRange = BTreeMap<(String, String, String), String>;

/// An item's outcome on one day: key (payment id or `line:<source>:<uid>`) → (outcome, amount,
/// currency).
type FinalOutcomes = BTreeMap<String, (Outcome, i64, &'static str)>;

/// Everything classification produced, before any effect.
pub(crate) struct Plan {
    pub(crate) data: RunData,
    /// What the passes found (kept for `recon explain`).
    pub(crate) matched: matching::MatchResult,
    summary: Summary,
    rejected: Vec<sources::Rejected>,
    /// Start of the first day of the range (UTC micros).
    t0: Micros,
}

impl Plan {
    /// The statement files the plan read.
    pub(crate) fn summary_inputs(&self) -> Vec<sources::InputFile> {
        self.summary.inputs.clone()
    }
}

/// Runs one reconciliation.
pub async fn run(cfg: &Config, opts: &RunOptions) -> Result<RunReport> {
    if opts.from > opts.to {
        return Err(fail(
            Failure::Config,
            format!("--from {} is after --to {}", opts.from, opts.to),
        ));
    }
    let rules = RuleSet::for_job(cfg)?;
    // Missing SMTP credentials are a configuration error, found before any data is read.
    if let Some(email) = &cfg.email
        && let crate::config::EmailTransport::Smtp(smtp) = &email.transport
        && !opts.dry_run
    {
        smtp.credentials()?;
    }
    // So are the status API's secret headers.
    if let Some(api) = &cfg.status_api {
        api.header_values()?;
    }
    let as_of = opts.as_of.unwrap_or_else(Utc::now).timestamp_micros();
    let run_id = opts.run_id.clone().unwrap_or_else(|| {
        format!(
            "{}-{}",
            Utc::now().format("%Y%m%dT%H%M%SZ"),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        )
    });
    let opening = Instant::now();
    let db = Db::open(&cfg.database_url).await?;
    let lock = db.lock(opts.wait).await?;
    tracing::debug!(
        elapsed_ms = opening.elapsed().as_millis() as u64,
        "Database open, schema checked, run lock held."
    );
    if !opts.dry_run {
        recover_interrupted(&db, cfg).await?;
    }
    // Alerts an earlier run could not send go first (under the lock: sent once).
    let mut alert = outbox::before_run(cfg.email.as_ref(), &cfg.output_dir, opts.dry_run).await;
    let result = if opts.from == opts.to {
        let mut read = ReadInRange::new();
        match run_day(
            cfg, opts, opts.from, &rules, &db, &run_id, None, as_of, &mut read,
        )
        .await
        {
            Ok((mut r, _, view)) => {
                // After the commit and the rename: a failed alert never undoes the run, and
                // the lock is released before the alert is sent.
                outbox::after_run(
                    cfg.email.as_ref(),
                    &mut alert,
                    &view,
                    &cfg.output_dir,
                    &r.out_dir,
                    opts.dry_run,
                    lock,
                )
                .await;
                r.alert = alert;
                free_in_background(view);
                Ok(r)
            }
            Err(e) => Err(e),
        }
    } else {
        run_range(cfg, opts, &rules, &db, &run_id, as_of, alert, lock).await
    };
    let closing = Instant::now();
    db.close().await;
    tracing::debug!(
        elapsed_ms = closing.elapsed().as_millis() as u64,
        "Database closed."
    );
    result
}

/// Under the run lock no other run is alive, so a run record still RUNNING belongs to a run
/// that was killed: mark it FAILED, and remove the output folders it never renamed into place
/// (its database effects are either all committed or none are; a re-run reproduces its results).
async fn recover_interrupted(db: &Db, cfg: &Config) -> Result<()> {
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    let n = tx
        .fail_runs(
            None,
            "interrupted: the process ended before the run completed (killed or crashed)",
            &now,
        )
        .await?;
    tx.commit().await?;
    if n > 0 {
        tracing::warn!(runs = n, "Marked interrupted runs as FAILED.");
    }
    let Ok(entries) = std::fs::read_dir(&cfg.output_dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "tmp") {
            tracing::warn!(folder = %path.display(), "Removing the output of an interrupted run.");
            let _ = std::fs::remove_dir_all(&path);
        } else if path.is_dir()
            // A finished run or range has its summary.json; only an unfinished range can hold
            // a day's `.tmp` folder.
            && !path.join("summary.json").exists()
            && let Ok(days) = std::fs::read_dir(&path)
        {
            for d in days.flatten() {
                if d.path().extension().is_some_and(|x| x == "tmp") {
                    let _ = std::fs::remove_dir_all(d.path());
                }
            }
        }
    }
    Ok(())
}

/// A range runs day by day, exactly as the nightly runs would have (each day sees the
/// follow-ups the previous day left), each day committed on its own, into
/// `<output_dir>/<run id>/<YYYY-MM-DD>/`, with one `summary.json` for the range written last.
#[allow(clippy::too_many_arguments)]
async fn run_range(
    cfg: &Config,
    opts: &RunOptions,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    as_of: Micros,
    mut alert: Alert,
    lock: crate::db::RunLock,
) -> Result<RunReport> {
    let dir = cfg.output_dir.join(run_id);
    if dir.exists() {
        return Err(fail(
            Failure::Config,
            format!(
                "{} already exists (hint: omit --run-id for a fresh one)",
                dir.display()
            ),
        ));
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        fail(
            Failure::Output,
            format!("{}: cannot create: {e}", dir.display()),
        )
    })?;
    let mut reports = Vec::new();
    let mut views = Vec::new();
    let mut finals = FinalOutcomes::new();
    let mut range = RangeSummary {
        run_id: run_id.to_string(),
        range_from: opts.from.to_string(),
        range_to: opts.to.to_string(),
        as_of: timeparse::format_utc(as_of),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    let mut day = opts.from;
    let mut read = ReadInRange::new();
    while day <= opts.to {
        let day_id = format!("{run_id}-{}", day.format("%Y%m%d"));
        let (report, outcomes, view) = run_day(
            cfg,
            opts,
            day,
            rules,
            db,
            &day_id,
            Some(&dir),
            as_of,
            &mut read,
        )
        .await?;
        views.push(view);
        let s = &report.summary;
        range.days.push(DaySummary {
            date: day.to_string(),
            run_id: day_id,
            folder: day.to_string(),
            payments_in_scope: s.payments_in_scope,
            outcomes: s
                .outcomes
                .iter()
                .filter(|(_, v)| v.count > 0)
                .map(|(k, v)| (k.clone(), v.count))
                .collect(),
        });
        range.transitions.planned += s.transitions.planned;
        range.transitions.applied += s.transitions.applied;
        range.transitions.already_applied += s.transitions.already_applied;
        range.transitions.conflicts += s.transitions.conflicts;
        range.tickets.created += s.tickets.created;
        range.tickets.existing += s.tickets.existing;
        range.tickets.reopened += s.tickets.reopened;
        for w in &s.warnings {
            if !range.warnings.contains(w) {
                range.warnings.push(w.clone());
            }
        }
        finals.extend(outcomes);
        reports.push(report);
        match day.succ_opt() {
            Some(d) => day = d,
            None => break,
        }
    }
    let mut sums = summary::OutcomeSums::default();
    for &(o, amount, currency) in finals.values() {
        sums.add(o, Some((amount, currency)));
    }
    let totals = sums.totals();
    range.outcomes = summary::outcome_stats(&totals);
    let json = serde_json::to_string_pretty(&range).context("summary.json")? + "\n";
    let tmp = dir.join("summary.json.tmp");
    std::fs::write(&tmp, json)
        .and_then(|()| std::fs::rename(&tmp, dir.join("summary.json")))
        .map_err(|e| fail(Failure::Output, format!("{}: {e}", dir.display())))?;
    let last = reports
        .last()
        .map(|r| r.summary.clone())
        .unwrap_or_default();
    // One report and one message for the whole range, after every day is committed.
    let view = range_view(views, &range, totals, &finals, &reports);
    range_reports(&dir, &view, &range)?;
    outbox::after_run(
        cfg.email.as_ref(),
        &mut alert,
        &view,
        &cfg.output_dir,
        &dir,
        opts.dry_run,
        lock,
    )
    .await;
    Ok(RunReport {
        run_id: run_id.to_string(),
        out_dir: dir,
        summary: last,
        range: Some((reports, range)),
        alert,
    })
}

/// The range's report view: its days' items once each, the final outcomes as totals, and a
/// summary for the whole range (inputs and gates of every day, sums of the effects).
fn range_view(
    views: Vec<ReportView>,
    range: &RangeSummary,
    totals: BTreeMap<Outcome, reports::OutcomeTotal>,
    finals: &FinalOutcomes,
    days: &[RunReport],
) -> ReportView {
    let mut summary = days.last().map(|r| r.summary.clone()).unwrap_or_default();
    summary.run_id = range.run_id.clone();
    summary.range_from = range.range_from.clone();
    summary.range_to = range.range_to.clone();
    summary.outcomes = range.outcomes.clone();
    summary.transitions = range.transitions.clone();
    summary.tickets = range.tickets.clone();
    summary.warnings = range.warnings.clone();
    summary.timings_ms.clear();
    summary.inputs.clear();
    summary.gates.clear();
    summary.payments_in_scope = finals.keys().filter(|k| !k.starts_with("line:")).count();
    summary.rejected_lines = 0;
    for d in days {
        for i in &d.summary.inputs {
            if !summary.inputs.contains(i) {
                summary.inputs.push(i.clone());
            }
        }
        for g in &d.summary.gates {
            if !summary.gates.contains(g) {
                summary.gates.push(g.clone());
            }
        }
        summary.rejected_lines = summary.rejected_lines.max(d.summary.rejected_lines);
    }
    ReportView::merge(views, summary, totals)
}

/// The range folder's report.xlsx, report.html and diff.csv (the days' diffs, one header).
fn range_reports(dir: &std::path::Path, view: &ReportView, range: &RangeSummary) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| fail(Failure::Output, format!("{}: {e}", dir.display()));
    reports::xlsx::write(&dir.join(reports::XLSX_FILE), view)
        .map_err(|e| err(&format!("{e:#}")))?;
    std::fs::write(dir.join(reports::HTML_FILE), reports::html::report(view))
        .map_err(|e| err(&e))?;
    // Streamed: a month of large days must not be held in memory at once.
    use std::io::{BufRead, Write};
    let path = dir.join(reports::DIFF_CSV_FILE);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| err(&e))?);
    for (i, d) in range.days.iter().enumerate() {
        let day = std::fs::File::open(dir.join(&d.folder).join(reports::DIFF_CSV_FILE))
            .map_err(|e| err(&e))?;
        let mut day = std::io::BufReader::new(day);
        let mut header = Vec::new();
        day.read_until(b'\n', &mut header).map_err(|e| err(&e))?;
        if i == 0 {
            out.write_all(&header).map_err(|e| err(&e))?;
        }
        std::io::copy(&mut day, &mut out).map_err(|e| err(&e))?;
    }
    out.flush().map_err(|e| err(&e))?;
    Ok(())
}

/// One day: the run record, the plan, the effects, the outputs in `<parent>/<folder>/`.
#[allow(clippy::too_many_arguments)]
async fn run_day(
    cfg: &Config,
    opts: &RunOptions,
    day: NaiveDate,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    range_dir: Option<&std::path::Path>,
    as_of: Micros,
    read: &mut ReadInRange,
) -> Result<(RunReport, FinalOutcomes, ReportView)> {
    let now = || timeparse::to_db(Utc::now().timestamp_micros());
    let day_opts = RunOptions {
        from: day,
        to: day,
        ..opts.clone()
    };
    // A single day is `<output_dir>/<run id>/`; a range's day `<range folder>/<YYYY-MM-DD>/`.
    let (parent, folder) = match range_dir {
        Some(dir) => (dir, day.to_string()),
        None => (cfg.output_dir.as_path(), run_id.to_string()),
    };
    if !opts.dry_run {
        let (from, to) = (day.to_string(), day.to_string());
        let as_of_text = timeparse::format_utc(as_of);
        let started = now();
        let mut tx = db.begin().await?;
        tx.insert_run(&crate::store::RunStart {
            run_id,
            from: &from,
            to: &to,
            as_of: &as_of_text,
            rules_hash: &rules.hash,
            now: &started,
        })
        .await?;
        tx.commit().await?;
        crate::fault::point("after_run_record");
    }
    tracing::info!(run_id, date = %day, as_of = %timeparse::format_utc(as_of), dry_run = opts.dry_run, rules_hash = %rules.hash, "Run started.");
    let result = plan_and_apply(
        cfg,
        &day_opts,
        rules,
        db,
        run_id,
        as_of,
        (parent, &folder),
        range_dir.is_some(),
        read,
    )
    .await;
    match &result {
        Ok((r, _, _)) => {
            tracing::info!(run_id, payments = r.summary.payments_in_scope, lines = r.summary.statement_lines, transitions = r.summary.transitions.applied, tickets_new = r.summary.tickets.created, out_dir = %r.out_dir.display(), "Run completed.")
        }
        Err(e) => {
            tracing::error!(run_id, error = %crate::exit::bounded(&format!("{e:#}")), "Run failed.")
        }
    }
    if let Err(e) = &result
        && !opts.dry_run
    {
        // Best effort: the run record says why it failed; nothing else was committed.
        if let Ok(mut tx) = db.begin().await
            && tx
                .fail_runs(
                    Some(run_id),
                    &crate::exit::bounded(&format!("{e:#}")),
                    &now(),
                )
                .await
                .is_ok()
        {
            let _ = tx.commit().await;
        }
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn plan_and_apply(
    cfg: &Config,
    opts: &RunOptions,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    as_of: Micros,
    (parent, folder): (&std::path::Path, &str),
    in_range: bool,
    read: &mut ReadInRange,
) -> Result<(RunReport, FinalOutcomes, ReportView)> {
    let Plan {
        data,
        matched,
        mut summary,
        rejected,
        t0,
    } = plan(cfg, opts, rules, db, run_id, as_of, read).await?;
    crate::fault::point("after_plan");
    let out_dir = parent.join(folder);
    let tmp_dir = parent.join(format!("{folder}.tmp"));
    let out_err = |what: &str, e: &dyn std::fmt::Display| {
        fail(
            Failure::Output,
            format!("{}: {what}: {e}", tmp_dir.display()),
        )
    };
    if tmp_dir.exists() {
        std::fs::remove_dir_all(&tmp_dir).map_err(|e| out_err("cannot clear", &e))?;
    }
    std::fs::create_dir_all(&tmp_dir).map_err(|e| out_err("cannot create", &e))?;
    // The output files are written on a blocking thread while the database work runs; both
    // must succeed before the commit and the rename.
    let data = Arc::new(data);
    let writer = {
        let (data, tmp) = (Arc::clone(&data), tmp_dir.clone());
        tokio::task::spawn_blocking(move || -> Result<u64> {
            let started = Instant::now();
            write_results(&tmp, &data)?;
            results::write_rejected(&tmp.join("rejected.csv"), &rejected)?;
            crate::outputs::settlement::write(&tmp.join("settlement.csv"), &data.settlement)?;
            Ok(started.elapsed().as_millis() as u64)
        })
    };
    // The reports (into the same folder, so they appear or not with the results) are written
    // at the same time. They show what the rows say; what the commit did (transitions
    // applied, tickets new) is in summary.json and the email.
    let reporter = {
        let (data, tmp, summary) = (Arc::clone(&data), tmp_dir.clone(), summary.clone());
        tokio::task::spawn_blocking(move || -> Result<(ReportView, u64)> {
            let started = Instant::now();
            let view = reports::write_files(
                &tmp,
                &summary,
                &data.totals,
                &data.rows,
                &data.payments,
                &data.lines,
                as_of,
            )?;
            Ok((view, started.elapsed().as_millis() as u64))
        })
    };
    let started = Instant::now();
    let mut tx = db.begin().await?;
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let conflicts = if !opts.dry_run {
        let sources: Vec<&str> = cfg.sources.iter().map(|s| s.name.as_str()).collect();
        crate::effects::apply(
            &mut tx,
            &data,
            Arc::new(matched),
            rules,
            &mut summary,
            (t0, as_of),
            run_id,
            opts,
            &now,
            &sources,
        )
        .await?
    } else {
        summary.transitions.planned = data
            .rows
            .iter()
            .filter(|r| matches!(r.action, Action::Transition(_)))
            .count();
        Vec::new()
    };
    summary
        .timings_ms
        .insert("apply".into(), started.elapsed().as_millis() as u64);
    let write_ms = writer
        .await
        .context("results writer task")?
        .map_err(|e| out_err("writing results", &format!("{e:#}")))?;
    let (mut view, reports_ms) = reporter
        .await
        .context("report writer task")?
        .map_err(|e| out_err("writing reports", &format!("{e:#}")))?;
    let mut data = Arc::try_unwrap(data)
        .map_err(|_| fail(Failure::Output, "results writer still holds the rows"))?;
    if !conflicts.is_empty() {
        // Rare: someone moved payments between load and write. Say so in the results and
        // the reports.
        for c in conflicts {
            let row = &mut data.rows[c.row];
            row.action = Action::Conflict(c.wanted);
            if let Some((outcome, detail)) = c.ticket {
                row.outcome = outcome;
                row.detail = detail.into();
            }
        }
        data.totals = summary::outcome_totals(&data.rows, &data.payments, &data.lines);
        summary.outcomes = summary::outcome_stats(&data.totals);
        write_results(&tmp_dir, &data).map_err(|e| out_err("results.csv", &format!("{e:#}")))?;
        view = reports::write_files(
            &tmp_dir,
            &summary,
            &data.totals,
            &data.rows,
            &data.payments,
            &data.lines,
            as_of,
        )
        .map_err(|e| out_err("writing reports", &format!("{e:#}")))?;
    }
    summary.timings_ms.insert("write".into(), write_ms);
    summary.timings_ms.insert("reports".into(), reports_ms);
    view.summary = summary.clone();
    view.committed = !opts.dry_run;
    let json = serde_json::to_string_pretty(&summary).context("summary.json")?;
    std::fs::write(tmp_dir.join("summary.json"), json + "\n")
        .map_err(|e| out_err("summary.json", &e))?;
    let started = Instant::now();
    if !opts.dry_run {
        crate::fault::point("before_commit");
        tx.commit().await?;
        crate::fault::point("after_commit");
    } else {
        tx.rollback().await?;
    }
    tracing::debug!(
        run_id,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Committed."
    );
    if out_dir.exists() {
        std::fs::remove_dir_all(&out_dir).map_err(|e| out_err("cannot replace", &e))?;
    }
    std::fs::rename(&tmp_dir, &out_dir).map_err(|e| out_err("cannot rename into place", &e))?;
    crate::fault::point("after_rename");
    if !opts.dry_run {
        // Completed only once the results are in place: a run killed before this line is
        // shown as interrupted by the next run (its effects, if committed, are re-found as
        // already applied).
        let counts: BTreeMap<&str, usize> = summary
            .outcomes
            .iter()
            .map(|(k, v)| (k.as_str(), v.count))
            .collect();
        let mut tx = db.begin().await?;
        tx.complete_run(
            run_id,
            &serde_json::to_string(&summary.inputs)?,
            &serde_json::to_string(&counts)?,
            &now,
        )
        .await?;
        tx.commit().await?;
    }
    // Only a range needs each item's outcome (its summary); a million cloned ids cost ~100 MB.
    let finals = if in_range {
        final_outcomes(&data)
    } else {
        FinalOutcomes::new()
    };
    free_in_background(data);
    Ok((
        RunReport {
            run_id: run_id.to_string(),
            out_dir,
            summary,
            range: None,
            alert: Alert::disabled(),
        },
        finals,
        view,
    ))
}

/// Frees `value` on a thread of its own: a million rows (or a hundred thousand report items)
/// take a noticeable fraction of a second to free, and nothing waits for it.
fn free_in_background<T: Send + 'static>(value: T) {
    std::thread::spawn(move || drop(value));
}

/// The statement files (source, path) that no run of a day before `day` read: a file first
/// read by this day's run (or by a later day's, or never) is new to this day, so its lines
/// booked before the day are reported here too. Re-runs of the day see the same. A source that
/// no run of an earlier day had configured has nothing late: this is its first day (a new job,
/// or a new source), and its history is not news. Every run records its configured sources
/// (an empty path), so a source whose first file arrives late still has earlier days.
async fn late_files<'a>(
    db: &Db,
    inputs: &'a [sources::InputFile],
    day: &str,
    read: &mut ReadInRange,
) -> Result<std::collections::HashSet<(&'a str, &'a str)>> {
    let keys: Vec<(&str, &str, &str)> = inputs
        .iter()
        .map(|f| (f.source.as_str(), f.path.as_str(), f.sha256.as_str()))
        .collect();
    let mut tx = db.begin().await?;
    let mut first = tx.inputs_first_read(&keys).await?;
    let mut sources = tx.sources_first_read().await?;
    tx.rollback().await?;
    // Earlier days of this range count as if they had recorded what they read.
    for ((source, path, sha), d) in read.iter() {
        let f = first
            .entry((source.clone(), path.clone(), sha.clone()))
            .or_insert_with(|| d.clone());
        if d < f {
            f.clone_from(d);
        }
        let s = sources.entry(source.clone()).or_insert_with(|| d.clone());
        if d < s {
            s.clone_from(d);
        }
    }
    for &(source, path, sha) in &keys {
        read.entry((source.to_string(), path.to_string(), sha.to_string()))
            .or_insert_with(|| day.to_string());
    }
    Ok(keys
        .into_iter()
        .filter(|(source, path, sha)| {
            sources.get(*source).is_some_and(|d| d.as_str() < day)
                && first
                    .get(&(source.to_string(), path.to_string(), sha.to_string()))
                    .is_none_or(|d| d.as_str() >= day)
        })
        .map(|(source, path, _)| (source, path))
        .collect())
}

/// Each reported item's outcome, for a range's final counts.
fn final_outcomes(data: &RunData) -> FinalOutcomes {
    let mut out = FinalOutcomes::new();
    for row in &data.rows {
        let (key, amount, currency) = match row.payment {
            Some(pi) => {
                let p = &data.payments[pi as usize];
                (p.payment_id.to_string(), p.amount_minor, p.currency)
            }
            None => match row.lines.first() {
                Some(&li) => {
                    let l = &data.lines[li as usize];
                    (
                        format!("line:{}:{}", l.source, l.uid()),
                        l.amount_minor,
                        l.currency,
                    )
                }
                None => continue,
            },
        };
        out.insert(key, (row.outcome, amount, currency));
    }
    out
}

/// Writes `results.csv` and the reports' `diff.csv` (its listed rows) into `dir`.
fn write_results(dir: &std::path::Path, data: &RunData) -> Result<()> {
    let path = dir.join("results.csv");
    let diff = dir.join(reports::DIFF_CSV_FILE);
    let create = |path: &std::path::Path| {
        std::fs::File::create(path)
            .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
            .with_context(|| format!("creating {}", path.display()))
    };
    results::write(
        create(&path)?,
        create(&diff)?,
        &data.rows,
        &data.payments,
        &data.lines,
    )
    .with_context(|| format!("writing {} and {}", path.display(), diff.display()))
}

pub(crate) async fn plan(
    cfg: &Config,
    opts: &RunOptions,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    as_of: Micros,
    read: &mut ReadInRange,
) -> Result<Plan> {
    let mut timings = BTreeMap::new();
    let tz = cfg.timezone;
    let t0 = timeparse::day_start(opts.from, tz);
    let t1 = timeparse::day_start(opts.to.succ_opt().unwrap_or(opts.to), tz);
    let (before, after) = rules.evidence_window();
    let carry = cfg.carry_over_days * DAY;

    // Statements (on a blocking thread) and the ledger (here) load at the same time. The
    // ledger range is the scope plus every window that reaches into it, with a day to spare;
    // lines outside it (a wide fixed file) widen it with a second load afterwards.
    let started = Instant::now();
    let first_day = timeparse::local_date(t0 - carry - before - after, tz);
    let last_day = timeparse::local_date(t1 + after + before, tz);
    let statements = {
        let sources_cfg = cfg.sources.clone();
        tokio::task::spawn_blocking(move || -> Result<(Vec<sources::SourceLoad>, u64)> {
            let started = Instant::now();
            let loads = sources_cfg
                .iter()
                .map(|src| sources::load(src, (first_day, last_day), as_of))
                .collect::<Result<Vec<_>>>()?;
            Ok((loads, started.elapsed().as_millis() as u64))
        })
    };
    let from_day = opts.from.to_string();
    let lo0 = t0 - carry - before - after - DAY;
    let hi0 = t1 + before + after + DAY;
    let ledger = crate::ledger::load::load(
        db,
        &cfg.ledger,
        &LoadRange {
            lo: lo0,
            hi: hi0,
            attempts_lo: lo0 - carry,
            from_day: from_day.clone(),
        },
    )
    .await;
    let (loads, statements_ms) = statements.await.context("statement loading task")??;
    let mut ledger = ledger?;
    let mut lines: Vec<StatementLine> = Vec::new();
    let mut coverage = Vec::new();
    let mut inputs = Vec::new();
    let mut rejected = Vec::new();
    let mut warnings = Vec::new();
    let mut gates = Vec::new();
    for load in loads {
        gates.extend(load.gates);
        sources::absorb(&mut lines, load.lines);
        coverage.push(load.coverage);
        inputs.extend(load.files);
        warnings.extend(load.warnings);
        rejected.extend(load.rejected);
    }
    if cfg.sources.is_empty() {
        warnings.push("no statement source configured: no payment can be resolved".into());
    }
    // Lines booked after the cut-off are not yet known at that time.
    let known_lines = lines.len();
    lines.retain(|l| l.booked_at <= as_of);
    if lines.len() < known_lines {
        warnings.push(format!(
            "{} statement line(s) booked after the as-of time were ignored",
            known_lines - lines.len()
        ));
    }
    for w in &warnings {
        tracing::warn!(run_id, warning = %w, "Completeness warning.");
    }
    timings.insert("load_statements".to_string(), statements_ms);
    // Every payment any loaded line could belong to must be a candidate.
    let min_b = lines.iter().map(|l| l.booked_at).min().unwrap_or(t0);
    let max_b = lines.iter().map(|l| l.booked_at).max().unwrap_or(t1);
    let (need_lo, need_hi) = ((t0 - carry).min(min_b - after), t1.max(max_b + before + 1));
    if need_lo < lo0 || need_hi > hi0 {
        let lo = need_lo.min(lo0);
        ledger = crate::ledger::load::load(
            db,
            &cfg.ledger,
            &LoadRange {
                lo,
                hi: need_hi.max(hi0),
                attempts_lo: lo - carry,
                from_day: from_day.clone(),
            },
        )
        .await?;
    }
    let LoadedLedger {
        payments,
        provider_ids,
    } = ledger;
    timings.insert(
        "load_ledger_and_statements".to_string(),
        started.elapsed().as_millis() as u64,
    );

    // Lines this run reports: booked in its days, or booked before them in a file that no
    // run of an earlier day read (a late delivery surfaces in the first run that has it).
    let late_files = late_files(db, &inputs, &from_day, read).await?;
    // A source's lines come file by file: look a file up once, not once per line (a night
    // loads every line of its horizon, days of them booked before its range).
    let mut last: Option<(&Arc<str>, bool)> = None;
    let report_line: Vec<bool> = lines
        .iter()
        .map(|l| {
            if l.booked_at >= t0 {
                return l.booked_at < t1;
            }
            match last {
                Some((f, late)) if Arc::ptr_eq(f, &l.file) => late,
                _ => {
                    let late = late_files.contains(&(&*l.source, &*l.file));
                    last = Some((&l.file, late));
                    late
                }
            }
        })
        .collect();
    // Scope and eligibility.
    let stale_after = cfg.stale_submitting_minutes * MINUTE;
    let mut in_scope: Vec<bool> = payments
        .iter()
        .map(|p| {
            let a = p.anchor();
            if a >= t0 && a < t1 {
                return true;
            }
            a >= t0 - carry
                && a < t0
                && (matches!(
                    p.current_status,
                    Status::Unknown | Status::Submitting | Status::Review
                ) || p
                    .followup
                    .as_deref()
                    .is_some_and(|(_, closed)| closed.as_ref().is_none_or(|c| *c >= from_day)))
        })
        .collect();
    let elig = outcome::eligibility(&payments, as_of, stale_after);
    let started = Instant::now();
    // Polars is CPU-bound and blocks: run it off the async workers.
    let rules_owned = rules.clone();
    let (payments, lines, m) = tokio::task::spawn_blocking(move || {
        let m = matching::run(&payments, &provider_ids, &lines, &rules_owned, &elig);
        (payments, lines, m)
    })
    .await
    .context("matching task")?;
    let mut m = m?;
    {
        let by_name: std::collections::HashMap<&str, &[(Micros, Micros)]> = cfg
            .sources
            .iter()
            .zip(&coverage)
            .map(|(s, c)| (s.name.as_str(), c.as_slice()))
            .collect();
        crate::matching::settlement::close_unpaid(
            &mut m.settlement,
            &rules.settlements,
            as_of,
            cfg.settlement_lag_hours * HOUR,
            |name| by_name.get(name).copied(),
        );
    }
    timings.insert("match".to_string(), started.elapsed().as_millis() as u64);
    // Evidence has no closing hour (DESIGN.md rule 8): a payment that a line this run reports
    // belongs to (or may belong to) is reported with it, whatever its day or status.
    for pair in m
        .links
        .iter()
        .chain(&m.ambiguous)
        .chain(&m.returns)
        .chain(&m.returns_ambiguous)
    {
        if report_line[pair.line as usize] {
            in_scope[pair.payment as usize] = true;
        }
    }
    let ctx = Context {
        as_of,
        stale_after,
        settlement_lag: cfg.settlement_lag_hours * HOUR,
        coverage: &coverage,
        in_scope: &in_scope,
        report_range: (t0, t1),
        report_line: &report_line,
        run_day: &from_day,
    };
    // Provider status answers (`[[status_api]]`) for the unresolved payments in scope.
    let status = match &cfg.status_api {
        Some(api) => {
            let started = Instant::now();
            let targets = crate::status_api::targets(&payments, &in_scope, as_of, stale_after);
            let ev = crate::status_api::ask_for_run(
                api,
                db,
                run_id,
                &payments,
                &targets,
                opts.dry_run,
                (rules.evidence_window().1, ctx.settlement_lag, as_of),
            )
            .await?;
            warnings.extend(ev.warnings.iter().cloned());
            timings.insert(
                "status_api".to_string(),
                started.elapsed().as_millis() as u64,
            );
            Some(ev)
        }
        None => None,
    };
    let started = Instant::now();
    let rows = match &status {
        Some(ev) => outcome::classify_with(&payments, &lines, &m, rules, &ctx, &|i, p, row| {
            ev.overlay(i, p, row)
        }),
        None => outcome::classify(&payments, &lines, &m, rules, &ctx),
    };
    let status_provider_ids = status.map(|ev| ev.provider_ids()).unwrap_or_default();
    let settlement = crate::outputs::settlement::rows(&m, &lines, rules, (t0, t1));
    let matched = m;
    timings.insert("classify".to_string(), started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let totals = summary::outcome_totals(&rows, &payments, &lines);
    let outcomes = summary::outcome_stats(&totals);
    timings.insert("summary".to_string(), started.elapsed().as_millis() as u64);
    let summary = Summary {
        run_id: run_id.to_string(),
        range_from: opts.from.to_string(),
        range_to: opts.to.to_string(),
        as_of: timeparse::format_utc(as_of),
        dry_run: opts.dry_run,
        rules_hash: rules.hash.clone(),
        inputs,
        payments_loaded: payments.len(),
        payments_in_scope: in_scope.iter().filter(|&&b| b).count(),
        statement_lines: lines.len(),
        rejected_lines: rejected.len(),
        outcomes,
        transitions: Default::default(),
        tickets: Default::default(),
        warnings,
        gates,
        timings_ms: timings,
    };
    Ok(Plan {
        data: RunData {
            payments,
            lines,
            rows,
            totals,
            settlement,
            status_provider_ids,
        },
        matched,
        summary,
        rejected,
        t0,
    })
}
