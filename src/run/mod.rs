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
//!
//! The run is split by job: [`run`] (here) checks the config, takes the lock and dispatches;
//! `session.rs` is what every driver (the whole night, a range, a shard, the gather) opens and
//! closes: rules, secrets, database, lock, recovery, inbox, queued alerts;
//! `recovery.rs` cleans up after a run that was killed; `range.rs` runs `--from … --to …` day
//! by day and writes the range's summary and reports; `day.rs` runs one day (its run record,
//! effects and outputs); `plan.rs` loads, matches and classifies without any effect (also
//! what `recon explain` re-plans). Both are lines of typed stages, each function taking the
//! value the one before handed over. What a day's run is part of (the whole night, a range's
//! day, a shard of a run group) is one `Part`, asked where the drivers differ.
//!
//! Beside them: `data.rs` (what one run works on), `effects.rs` (transitions, follow-ups and
//! tickets inside the run's transaction), `shared.rs` (bank sources every partition shares),
//! `handover.rs` (the one format of what a shard hands the gather: `shard.json` and the sealed
//! files) and `gather.rs` (`recon gather`: a sharded night from its shards' folders).

mod claims;
pub mod data;
mod day;
pub(crate) mod effects;
mod folder;
mod foreign;
pub mod gather;
pub mod handover;
mod load;
pub(crate) mod plan;
mod range;
mod recovery;
mod session;
mod shadow;
mod shard;
pub mod shard_plan;
pub mod shared;
pub mod stop;

pub use shard::{
    ShardOutcome, check_group_id, config_hash, default_group, disagreement, recon_build, run_shard,
};

use crate::config::Config;
use crate::db::{Db, RunLock};
use crate::exit::{Failure, fail};
use crate::outputs::summary::Summary;
use crate::report::outbox::{self, Alert};
use crate::rules::RuleSet;
pub(crate) use crate::run::data::RunData;
pub use crate::run::data::RunOptions;
use crate::timeparse::Micros;
use anyhow::Result;
use chrono::Utc;
use std::collections::BTreeMap;
use std::path::PathBuf;

use day::run_day;

/// What every day of one `recon run` shares: the job file, the rules, the database and the
/// moment the run looks from.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a> {
    /// The job file.
    pub cfg: &'a Config,
    /// The compiled rules.
    pub rules: &'a RuleSet,
    /// The ledger and recon's tables.
    pub db: &'a Db,
    /// The run's as-of moment.
    pub as_of: Micros,
    /// What this run is: the whole night, a day of a range, or a shard of a run group.
    pub part: Part<'a>,
    /// A replay of a recorded night (`recon backtest`): the ledger rebuilt as it was at this
    /// moment, the reviewers' confirmations made up to it. None: as it is now.
    pub rewind: Option<Micros>,
    /// Whether the plan asks the providers' status APIs (`[[status_api]]`): a run does; a
    /// replay and the shadow rules' plan do not (today's answer is not the night's, and one
    /// night asks once).
    pub ask_providers: bool,
}

/// What a day's run is part of: where the whole night, a range's day and a shard differ in it
/// (which partitions it plans, where its folder goes, who writes its reports).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Part<'a> {
    /// Every partition in one process, into `<output_dir>/<run id>/` (also what `recon
    /// explain` re-plans).
    Whole,
    /// One day of a `--from … --to …` range, into `<range folder>/<YYYY-MM-DD>/`: the range
    /// writes the reports and the summary of all its days.
    RangeDay(&'a std::path::Path),
    /// One shard of a partitioned night (only its partitions' payments and sources) in its run
    /// group: its rows, cases and settlement batches are handed over to the gather, which
    /// writes the night's reports and pairs the shared sources.
    Shard(crate::partition::Shard, &'a str),
}

impl Part<'_> {
    /// The shard this run reconciles (None: every partition).
    pub(crate) fn shard(self) -> Option<crate::partition::Shard> {
        match self {
            Part::Shard(shard, _) => Some(shard),
            Part::Whole | Part::RangeDay(_) => None,
        }
    }

    /// Whether the night's results are handed over to a gather (a shard) rather than
    /// reported and paired here.
    pub(crate) fn hands_over(self) -> bool {
        matches!(self, Part::Shard(..))
    }

    /// How many rows of each family that needs no human its report view keeps: every one for
    /// a range's day (the range's view merges its days' rows, then cuts).
    pub(crate) fn rows_per_family(self) -> Option<usize> {
        match self {
            Part::RangeDay(_) => None,
            Part::Whole | Part::Shard(..) => Some(crate::report::ROWS_PER_FAMILY),
        }
    }
}

use range::run_range;
use session::{Secrets, Session};

pub(crate) use plan::plan;
pub use range::{DaySummary, RangeSummary};

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

impl RunReport {
    /// The statement files that could not be read (every day's, for a range): nothing in
    /// them was used and their days are incomplete ([`crate::exit::INPUT_UNREADABLE`]).
    pub fn unreadable_inputs(&self) -> &[crate::sources::Unreadable] {
        match &self.range {
            Some((_, range)) => &range.unreadable_inputs,
            None => &self.summary.unreadable_inputs,
        }
    }
}

/// Statement files (source, path, sha256) read by earlier days of the same range, with the day
/// that read them first: a dry-run range records nothing in the database, yet its days must
/// see each other's files as a real range would.
pub(crate) type ReadInRange = BTreeMap<(String, String, String), String>;

/// Where a run stopped by a signal before its first day began stopped.
const NOTHING_DONE: &str = "before the run began: nothing was done";

/// Runs one reconciliation.
pub async fn run(cfg: &Config, opts: &RunOptions) -> Result<RunReport> {
    if opts.from > opts.to {
        return Err(fail(
            Failure::Config,
            format!("--from {} is after --to {}", opts.from, opts.to),
        ));
    }
    // Missing SMTP credentials or status API headers are configuration errors, found before
    // any data is read.
    let secrets = Secrets {
        status_api: true,
        smtp: !opts.dry_run,
    };
    let checked = Session::check(cfg, secrets)?;
    if let Some(warning) = future_warning(cfg, opts, Utc::now()) {
        tracing::warn!(warning = %warning, "Run in the future.");
    }
    let as_of = opts.as_of.unwrap_or_else(Utc::now).timestamp_micros();
    let run_id = opts.run_id.clone().unwrap_or_else(|| {
        format!(
            "{}-{}",
            Utc::now().format("%Y%m%dT%H%M%SZ"),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        )
    });
    let session = checked.open_unless_stopped(as_of).await?;
    let lock = session.lock_for_run(opts.wait).await?;
    if !opts.dry_run {
        session.recover().await?;
        // Reviewers' decision files first, so the night reconciles on them.
        session.apply_inbox_for_run(&run_id).await;
    }
    stop::check(NOTHING_DONE)?;
    // Alerts an earlier run could not send go first (under the lock: sent once).
    let alert = session.queued_alerts(opts.dry_run).await;
    let job = session.job(Part::Whole);
    let result = if opts.from == opts.to {
        let mut read = ReadInRange::new();
        match run_day(job, opts, opts.from, &run_id, &mut read, None).await {
            Ok((r, _, view)) => Ok(alert_night(job, opts, r, view, alert, lock).await),
            // A failed day's lock is released at the end, after the database closed.
            Err(e) => Err(e),
        }
    } else {
        run_range(job, opts, &run_id, alert, lock).await
    };
    session.close().await;
    result
}

/// The whole night's alert, after its commit and rename (a failed alert never undoes the run):
/// the lock is released before the alert is sent.
async fn alert_night(
    job: Job<'_>,
    opts: &RunOptions,
    mut r: RunReport,
    view: crate::report::ReportView,
    mut alert: Alert,
    lock: RunLock,
) -> RunReport {
    let cfg = job.cfg;
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
    r
}

/// The one warning for a run asked about the future (issue 33: accepted silently before): an
/// `--as-of` after `now` takes lines booked up to then as known, and a day after today in the
/// job's zone has no evidence yet; both give results that a later re-run may change.
fn future_warning(cfg: &Config, opts: &RunOptions, now: chrono::DateTime<Utc>) -> Option<String> {
    let today = now.with_timezone(&cfg.timezone).date_naive();
    let mut parts = Vec::new();
    if let Some(as_of) = opts.as_of.filter(|a| *a > now) {
        parts.push(format!("--as-of {} is in the future", as_of.to_rfc3339()));
    }
    if opts.to > today {
        parts.push(format!(
            "{} is after today ({today} in {})",
            opts.to, cfg.timezone
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "{}: the run sees only what is known now; a re-run later may give other results",
            parts.join(", and ")
        )
    })
}

/// Frees `value` on a thread of its own: a million rows (or a hundred thousand report items)
/// take a noticeable fraction of a second to free, and nothing waits for it.
fn free_in_background<T: Send + 'static>(value: T) {
    std::thread::spawn(move || drop(value));
}
