//! One reconciliation run: lock, record, load, match, classify, write, apply.
//!
//! Order of effects, so that a crash at any point leaves nothing half-done:
//! 1. rules and config are validated before any data is read;
//! 2. the run record is inserted as RUNNING (not in a dry run);
//! 3. outputs are written into `<run>.tmp/`;
//! 4. transitions, tickets, follow-ups and the run record's completion are committed in ONE
//!    database transaction;
//! 5. the output folder is renamed into place;
//! 6. the email alert is delivered (after messages an earlier run left in the outbox). A
//!    failed alert never undoes the run: the message is queued and [`RunReport::alert`] says
//!    so (exit code [`crate::exit::ALERT_FAILED`]).
//!
//! A re-run of the same range reproduces the same `results.csv`: classification uses the
//! status before recon's own transitions, and follow-ups keep carried-over payments in the
//! scope of the range that closed them.

use crate::config::Config;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::ledger::load::{LoadRange, LoadedLedger};
use crate::ledger::{Payment, Status};
use crate::matching;
use crate::outcome::{self, Action, Context, ResultRow};
use crate::outputs::results;
use crate::outputs::summary::{self, Summary};
use crate::report::outbox::{self, Alert};
use crate::report::{self as reports, ReportView};
use crate::rules::RuleSet;
use crate::sources::{self, StatementLine};
use crate::timeparse::{self, DAY, HOUR, MINUTE, Micros};
use anyhow::{Context as _, Result};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What to reconcile.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// First day (in the job's time zone).
    pub from: NaiveDate,
    /// Last day, inclusive.
    pub to: NaiveDate,
    /// Cut-off; `None` = now.
    pub as_of: Option<DateTime<Utc>>,
    /// Write results, change nothing.
    pub dry_run: bool,
    /// Fixed run id (tests); generated when `None`.
    pub run_id: Option<String>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Run id.
    pub run_id: String,
    /// The run's output folder.
    pub out_dir: PathBuf,
    /// The summary written to summary.json.
    pub summary: Summary,
    /// What happened to the email alert.
    pub alert: Alert,
}

/// The rows of a run: read by the writer thread and the database step at the same time.
pub(crate) struct RunData {
    pub(crate) payments: Vec<Payment>,
    pub(crate) lines: Vec<StatementLine>,
    pub(crate) rows: Vec<ResultRow>,
}

/// Everything classification produced, before any effect.
struct Plan {
    data: RunData,
    summary: Summary,
    rejected: Vec<sources::Rejected>,
    /// Start of the first day of the range (UTC micros).
    t0: Micros,
}

/// Runs one reconciliation.
pub async fn run(cfg: &Config, opts: &RunOptions) -> Result<RunReport> {
    if opts.from > opts.to {
        return Err(fail(
            Failure::Config,
            format!("--from {} is after --to {}", opts.from, opts.to),
        ));
    }
    let rules = RuleSet::load(cfg.rules_dir.as_deref())?;
    // Missing SMTP credentials are a configuration error, found before any data is read.
    if let Some(email) = &cfg.email
        && let crate::config::EmailTransport::Smtp(smtp) = &email.transport
        && !opts.dry_run
    {
        smtp.credentials()?;
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
    let _lock = db.lock()?;
    tracing::debug!(
        elapsed_ms = opening.elapsed().as_millis() as u64,
        "Database open and migrated."
    );
    let now = || timeparse::to_db(Utc::now().timestamp_micros());
    if !opts.dry_run {
        sqlx::query(
            "INSERT INTO recon_runs (run_id, range_from, range_to, as_of, dry_run, rules_hash, status, started_at)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, 'RUNNING', ?6)",
        )
        .bind(&run_id)
        .bind(opts.from.to_string())
        .bind(opts.to.to_string())
        .bind(timeparse::format_utc(as_of))
        .bind(&rules.hash)
        .bind(now())
        .execute(&db.pool)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => fail(
                Failure::Config,
                format!("run id {run_id:?} was already used (hint: omit --run-id for a fresh one)"),
            ),
            _ => fail(Failure::Database, format!("recording run {run_id}: {e}")),
        })?;
    }
    tracing::info!(run_id, from = %opts.from, to = %opts.to, as_of = %timeparse::format_utc(as_of), dry_run = opts.dry_run, rules_hash = %rules.hash, "Run started.");
    // Alerts an earlier run could not send go first (under the lock: sent once).
    let mut alert = outbox::before_run(cfg.email.as_ref(), &cfg.output_dir, opts.dry_run).await;
    let result = match plan_and_apply(cfg, opts, &rules, &db, &run_id, as_of).await {
        Ok((mut report, view)) => {
            // After the commit and the rename: a failed alert never undoes the run.
            outbox::after_run(
                cfg.email.as_ref(),
                &mut alert,
                &view,
                &cfg.output_dir,
                &report.out_dir,
                opts.dry_run,
            )
            .await;
            report.alert = alert;
            Ok(report)
        }
        Err(e) => Err(e),
    };
    match &result {
        Ok(r) => {
            tracing::info!(run_id, payments = r.summary.payments_in_scope, lines = r.summary.statement_lines, transitions = r.summary.transitions.applied, tickets_new = r.summary.tickets.created, out_dir = %r.out_dir.display(), "Run completed.")
        }
        Err(e) => tracing::error!(run_id, error = %format!("{e:#}"), "Run failed."),
    }
    if let Err(e) = &result
        && !opts.dry_run
    {
        // Best effort: the run record says why it failed; nothing else was committed.
        let _ = sqlx::query(
                "UPDATE recon_runs SET status = 'FAILED', error = ?1, finished_at = ?2 WHERE run_id = ?3",
            )
            .bind(format!("{e:#}"))
            .bind(now())
            .bind(&run_id)
            .execute(&db.pool)
            .await;
    }
    let closing = Instant::now();
    db.pool.close().await;
    tracing::debug!(
        elapsed_ms = closing.elapsed().as_millis() as u64,
        "Database closed."
    );
    result
}

async fn plan_and_apply(
    cfg: &Config,
    opts: &RunOptions,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    as_of: Micros,
) -> Result<(RunReport, ReportView)> {
    let Plan {
        data,
        mut summary,
        rejected,
        t0,
    } = plan(cfg, opts, rules, db, run_id, as_of).await?;
    let out_dir = cfg.output_dir.join(run_id);
    let tmp_dir = cfg.output_dir.join(format!("{run_id}.tmp"));
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
                &data.rows,
                &data.payments,
                &data.lines,
                as_of,
            )?;
            Ok((view, started.elapsed().as_millis() as u64))
        })
    };
    let started = Instant::now();
    let mut tx = db.pool.begin().await.map_err(|e| {
        fail(
            Failure::Database,
            format!("starting the write transaction: {e}"),
        )
    })?;
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let conflicts = if !opts.dry_run {
        crate::effects::apply(&mut tx, &data, &mut summary, t0, run_id, opts, &now).await?
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
        for (ri, to) in conflicts {
            data.rows[ri].action = Action::Conflict(to);
        }
        write_results(&tmp_dir, &data).map_err(|e| out_err("results.csv", &format!("{e:#}")))?;
        view = reports::write_files(
            &tmp_dir,
            &summary,
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
        let counts: BTreeMap<&str, usize> = summary
            .outcomes
            .iter()
            .map(|(k, v)| (k.as_str(), v.count))
            .collect();
        sqlx::query(
            "UPDATE recon_runs SET status = 'COMPLETED', inputs = ?1, counts = ?2, finished_at = ?3 WHERE run_id = ?4",
        )
        .bind(serde_json::to_string(&summary.inputs)?)
        .bind(serde_json::to_string(&counts)?)
        .bind(&now)
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| fail(Failure::Database, format!("completing run {run_id}: {e}")))?;
        tx.commit()
            .await
            .map_err(|e| fail(Failure::Database, format!("committing run {run_id}: {e}")))?;
    } else {
        tx.rollback()
            .await
            .map_err(|e| fail(Failure::Database, format!("dry run rollback: {e}")))?;
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
    // Freeing a million rows takes a noticeable fraction of a second; nothing waits for it.
    std::thread::spawn(move || drop(data));
    Ok((
        RunReport {
            run_id: run_id.to_string(),
            out_dir,
            summary,
            alert: Alert::disabled(),
        },
        view,
    ))
}

/// Writes `results.csv` into `dir`.
fn write_results(dir: &std::path::Path, data: &RunData) -> Result<()> {
    let path = dir.join("results.csv");
    let f = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    results::write(
        std::io::BufWriter::new(f),
        &data.rows,
        &data.payments,
        &data.lines,
    )
    .with_context(|| format!("writing {}", path.display()))
}

async fn plan(
    cfg: &Config,
    opts: &RunOptions,
    rules: &RuleSet,
    db: &Db,
    run_id: &str,
    as_of: Micros,
) -> Result<Plan> {
    let mut timings = BTreeMap::new();
    let tz = cfg.timezone;
    let t0 = timeparse::day_start(opts.from, tz);
    let t1 = timeparse::day_start(opts.to.succ_opt().unwrap_or(opts.to), tz);
    let (before, after) = rules.widest_window();
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
                .map(|src| sources::load(src, (first_day, last_day)))
                .collect::<Result<Vec<_>>>()?;
            Ok((loads, started.elapsed().as_millis() as u64))
        })
    };
    let from_day = opts.from.to_string();
    let lo0 = t0 - carry - before - after - DAY;
    let hi0 = t1 + before + after + DAY;
    let ledger = crate::ledger::load::load(
        &db.pool,
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
    for load in loads {
        lines.extend(load.lines);
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
            &db.pool,
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

    // Scope and eligibility.
    let stale_after = cfg.stale_submitting_minutes * MINUTE;
    let in_scope: Vec<bool> = payments
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
                    .as_ref()
                    .is_some_and(|(_, closed)| closed.as_ref().is_none_or(|c| *c >= from_day)))
        })
        .collect();
    let ctx = Context {
        as_of,
        stale_after,
        settlement_lag: cfg.settlement_lag_hours * HOUR,
        coverage: &coverage,
        in_scope: &in_scope,
        report_range: (t0, t1),
    };
    let elig = ctx.eligibility(&payments);
    let started = Instant::now();
    // Polars is CPU-bound and blocks: run it off the async workers.
    let rules_owned = rules.clone();
    let (payments, lines, m) = tokio::task::spawn_blocking(move || {
        let m = matching::run(&payments, &provider_ids, &lines, &rules_owned, &elig);
        (payments, lines, m)
    })
    .await
    .context("matching task")?;
    let m = m?;
    timings.insert("match".to_string(), started.elapsed().as_millis() as u64);
    let started = Instant::now();
    let rows = outcome::classify(&payments, &lines, &m, rules, &ctx);
    timings.insert("classify".to_string(), started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let outcomes = summary::outcome_stats(&rows, &payments, &lines);
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
        timings_ms: timings,
    };
    Ok(Plan {
        data: RunData {
            payments,
            lines,
            rows,
        },
        summary,
        rejected,
        t0,
    })
}
