//! `recon gather`: the night's one report, results and email from its shards.
//!
//! 1. Waits (up to `--wait`) until every shard of the run group has a COMPLETED run; past the
//!    deadline it names the missing shards and what became of them, and exits
//!    [`crate::exit::SHARDS_MISSING`] with nothing written.
//! 2. Under the gather lock, checks each landed shard's folder against the seal the shard
//!    committed (`recon_shard_handover`: sha256 and size of every file), then reads it:
//!    `shard.json` (summary, totals, report rows) and its CSV files, each hashed as it is read.
//!    Anything that differs is refused ([`crate::exit::HANDOVER_CHANGED`]): nothing written,
//!    nothing marked.
//! 3. Writes `<output_dir>/<group>/`: `results.csv` and `diff.csv` merged in one process's
//!    order (payment rows by id, then line rows by their source's place in the job file),
//!    `rejected.csv`, `settlement.csv`, `summary.json` (with each shard's counts),
//!    `report.xlsx`, `report.html`; through `<group>.tmp/` and a rename, as a run does.
//! 4. Keeps the night's email in `<group>.tmp/` ([`outbox::keep`]), marks the group gathered
//!    (the commit), renames the folder into place, then moves the email into the outbox and
//!    sends it ([`outbox::release`]). A gathered group is not gathered again, but a gather
//!    that finds the email still in the gathered folder (its predecessor was killed after the
//!    rename) queues and sends it: once.
//! 5. A gather that fails records why in the group (`gather_error`) and alerts where it can.

use crate::config::Config;
use crate::db::{Db, GATHER_LOCK_CLASS};
use crate::exit::{Failure, fail};
use crate::outputs::summary::{self, OutcomeTotal, ShardCount, Summary};
use crate::report::outbox::AlertStatus;
use crate::report::outbox::{self, Alert};
use crate::report::{self as reports, ReportView};
use crate::run::folder::Folder;
use crate::run::handover::ShardRecord;
use crate::run::session::{Secrets, Session};
use crate::store::groups::{Group, HandoverFile, ShardRunRecord};
use crate::timeparse;
use anyhow::{Context as _, Result};
use chrono::Utc;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod merge;

/// What to gather.
#[derive(Debug, Clone)]
pub struct GatherOptions {
    /// The run group (default: the night's date, as `recon run --shard` defaults it).
    pub group: String,
    /// How long to wait for missing shards (zero: look once).
    pub wait: Duration,
    /// How often to look again while waiting.
    pub poll: Duration,
    /// Gather only if every shard has landed and no other process gathers; else do nothing
    /// (`recon run --shard … --gather`: the last shard to land gathers the night).
    pub if_complete: bool,
}

/// What `recon gather` did.
#[derive(Debug)]
pub struct GatherReport {
    /// The group.
    pub group: String,
    /// The night's folder.
    pub out_dir: PathBuf,
    /// The night's summary (None: the group had been gathered already, or was not gathered:
    /// see `skipped`).
    pub summary: Option<Summary>,
    /// Why an `if_complete` gather did nothing: shards still to land, or another process
    /// gathers.
    pub skipped: Option<String>,
    /// The email.
    pub alert: Alert,
}

/// The state of each shard of a group: the run that landed it, or what became of its last run.
/// `killed`: the shards whose last run is RUNNING but whose lock nobody holds.
fn shard_states(
    group: &Group,
    runs: &[ShardRunRecord],
    killed: &BTreeSet<u32>,
) -> (Vec<String>, Vec<String>) {
    let mut landed = Vec::new();
    let mut missing = Vec::new();
    for i in 0..group.shards {
        let mine: Vec<&ShardRunRecord> = runs.iter().filter(|r| r.shard == i).collect();
        match mine.iter().find(|r| r.status == "COMPLETED") {
            Some(r) => landed.push(r.run_id.clone()),
            None => missing.push(match mine.last() {
                None => format!("shard {i}/{}: never started", group.shards),
                Some(r) if r.status == "RUNNING" && killed.contains(&i) => format!(
                    "shard {i}/{}: killed (its run is RUNNING but no process holds the shard's \
                     lock; a retry of the index recovers it) (run {})",
                    group.shards, r.run_id
                ),
                Some(r) if r.status == "RUNNING" => {
                    format!(
                        "shard {i}/{}: still running (run {})",
                        group.shards, r.run_id
                    )
                }
                Some(r) => format!(
                    "shard {i}/{}: {} (run {}: {})",
                    group.shards,
                    r.status,
                    r.run_id,
                    r.error
                        .as_deref()
                        .and_then(|e| e.lines().next())
                        .unwrap_or("no error recorded")
                ),
            }),
        }
    }
    (landed, missing)
}

/// The shards that have not landed and whose last run is RUNNING.
fn running_without_landing(group: &Group, runs: &[ShardRunRecord]) -> Vec<u32> {
    (0..group.shards)
        .filter(|&i| {
            let mine: Vec<&ShardRunRecord> = runs.iter().filter(|r| r.shard == i).collect();
            !mine.iter().any(|r| r.status == "COMPLETED")
                && mine.last().is_some_and(|r| r.status == "RUNNING")
        })
        .collect()
}

/// Gathers the night of run group `opts.group`. A gather that fails after it found the
/// group records why in the group (`gather_error`) and, where it can, alerts
/// (a "NOT gathered" email).
pub async fn gather(cfg: &Config, opts: &GatherOptions) -> Result<GatherReport> {
    let partition = cfg.partition_for("recon gather")?;
    crate::run::check_group_id(&opts.group)?;
    // Nothing is checked up front but the rules: the gather asks no status API, and a failed
    // email is said in its report, not refused before.
    let secrets = Secrets {
        status_api: false,
        smtp: false,
    };
    let checked = Session::check(cfg, secrets)?;
    // The night looks from its shards' as-of; the session's is the gather's start.
    let session = checked.open(Utc::now().timestamp_micros()).await?;
    session.require_postgres(NEEDS_POSTGRES)?;
    let gathered = gather_group(&session, opts, partition).await;
    if let Err(e) = &gathered {
        failed(cfg, &session.db, opts, e).await;
    }
    session.close().await;
    gathered
}

/// Why the gather refuses a SQLite job.
const NEEDS_POSTGRES: &str =
    "recon gather needs PostgreSQL (a SQLite job runs the night in one process)";

/// The failure kind of an error chain (its outermost classification).
fn failure_of(e: &anyhow::Error) -> Option<Failure> {
    e.chain()
        .find_map(|x| x.downcast_ref::<crate::exit::Classified>())
        .map(|c| c.failure)
}

/// Records why a gather failed in its group (best effort, bounded; a group gathered already
/// keeps its state) and alerts: every failure but another gather at work, a stop signal, and
/// missing shards when the gather did not wait for them (`--wait` 0: a look, not the night's
/// scheduled gather).
async fn failed(cfg: &Config, db: &Db, opts: &GatherOptions, e: &anyhow::Error) {
    let kind = failure_of(e);
    if matches!(kind, Some(Failure::Locked)) {
        return;
    }
    let error = crate::exit::bounded(&format!("{e:#}")).into_owned();
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let recorded = tokio::time::timeout(db.limits().statement_timeout, async {
        let mut tx = db.begin().await?;
        tx.record_gather_failure(&opts.group, &error, &now).await?;
        tx.commit().await
    })
    .await;
    if !matches!(recorded, Ok(Ok(()))) {
        tracing::warn!(group = %opts.group, "Cannot record the gather's failure in its run group.");
    }
    let quiet = matches!(kind, Some(Failure::Interrupted(_)))
        || (matches!(kind, Some(Failure::ShardsMissing)) && opts.wait.is_zero());
    if quiet {
        return;
    }
    if let Some(email) = &cfg.email {
        let what = match kind {
            Some(Failure::HandoverChanged) => "a shard's hand-over changed since it committed",
            Some(Failure::ShardsMissing) => "shards missing",
            _ => "the gather failed",
        };
        let code = kind.map_or(crate::exit::INTERNAL, Failure::code);
        let status = failure_alert(
            email,
            &cfg.output_dir,
            (&opts.group, &format!("{}-gather-failed", opts.group)),
            (what, code),
            &error,
        )
        .await;
        match &status {
            AlertStatus::Sent(_) | AlertStatus::Written(_) => {
                tracing::info!(group = %opts.group, "The gather's failure was alerted.")
            }
            other => {
                tracing::error!(group = %opts.group, alert = ?other, "The gather's failure could not be alerted.")
            }
        }
    }
}

/// The alert of a gather that gathered nothing: what finance would have received does not
/// come, and why.
async fn failure_alert(
    email: &crate::config::EmailConfig,
    output_dir: &Path,
    (group, id): (&str, &str),
    (what, code): (&str, i32),
    error: &str,
) -> AlertStatus {
    let subject = format!("CRITICAL night {group} NOT gathered: {what}");
    let body = format!(
        "The night of run group {group} was not gathered: no report and no results were \
         written, and the night is not marked gathered.\n\n{error}\n\n\
         Its shards' results stay committed. See docs/operations.md, \"A failed gather\" \
         (recon exit {code}).",
    );
    outbox::alert_failure(email, output_dir, id, &subject, &body).await
}

/// Shard `shard` of run group `group` failed for good (`error`; Kubernetes runs its index no
/// more): the night cannot be gathered until someone re-runs the index. Records why in the
/// group and sends the night's "NOT gathered" alert now, not at a gather's deadline. Best
/// effort, as a failing process does it: returns what became of the alert.
pub async fn shard_failed_for_good(
    cfg: &Config,
    group: &str,
    shard: crate::partition::Shard,
    error: &anyhow::Error,
) -> AlertStatus {
    let code = failure_of(error).map_or(crate::exit::INTERNAL, Failure::code);
    let error = crate::exit::bounded(&format!(
        "shard {shard} failed for good (recon exit {code}; its retries are used): {error:#}\n\
         Re-run the index once the cause is fixed (recon run --shard {shard} --group {group}); \
         the gather then completes the night."
    ))
    .into_owned();
    if let Ok(db) = Db::for_job(cfg).await {
        let now = timeparse::to_db(Utc::now().timestamp_micros());
        let recorded = tokio::time::timeout(db.limits().statement_timeout, async {
            let mut tx = db.begin().await?;
            tx.record_gather_failure(group, &error, &now).await?;
            tx.commit().await
        })
        .await;
        if !matches!(recorded, Ok(Ok(()))) {
            tracing::warn!(group, "Cannot record the failed shard in its run group.");
        }
        db.close().await;
    }
    match &cfg.email {
        Some(email) => {
            let what = format!("shard {shard} failed for good");
            let id = format!("{group}-shard-{}-failed", shard.index);
            failure_alert(email, &cfg.output_dir, (group, &id), (&what, code), &error).await
        }
        None => AlertStatus::Disabled,
    }
}

/// What an `if_complete` gather that did nothing reports.
fn skipped(cfg: &Config, group: &str, why: String) -> GatherReport {
    GatherReport {
        group: group.to_string(),
        out_dir: cfg.output_dir.join(group),
        summary: None,
        skipped: Some(why),
        alert: Alert::disabled(),
    }
}

/// Refuses to gather a group whose shards ran with another job file, other rules or another
/// recon build than this gather (`here`, [`crate::run::config_hash`]): its settlement, shared
/// sources and report would follow settings the shards' rows did not.
fn refuse_disagreement(group: &Group, here: &str) -> Result<()> {
    match crate::run::disagreement(&group.config_hash, here) {
        None => Ok(()),
        Some(what) => Err(fail(
            Failure::Config,
            format!(
                "run group {}: this gather differs from the night's shards in {what}. Nothing \
                 was gathered (hint: gather with the job file, rules and recon build the shards \
                 ran with; to change them, run the night again under another --group)",
                group.group_id
            ),
        )),
    }
}

/// Gathers the night of run group `opts.group` (see [`gather`]): waits for its shards, takes
/// the gather lock, then writes, records and publishes the night once.
async fn gather_group(
    session: &Session<'_>,
    opts: &GatherOptions,
    partition: &crate::partition::PartitionConfig,
) -> Result<GatherReport> {
    let (cfg, db) = (session.cfg, &session.db);
    let (group, landed) = match wait_for_shards(session, opts).await? {
        Waited::Landed(group, landed) => (group, landed),
        Waited::Skipped(why) => return Ok(skipped(cfg, &opts.group, why)),
    };
    let Some(lock) = gather_locks(db, opts).await? else {
        return Ok(skipped(
            cfg,
            &opts.group,
            "another process gathers the night".to_string(),
        ));
    };
    // Gathered while this process waited? And what each shard sealed when it committed.
    let mut tx = db.begin().await?;
    let group = tx.group(&group.group_id).await?.unwrap_or(group);
    let mut seals = Vec::with_capacity(landed.len());
    for run_id in &landed {
        seals.push(tx.handover(run_id).await?);
    }
    tx.rollback().await?;
    let out_dir = cfg.output_dir.join(&group.group_id);
    let gathered = group.gathered_at.is_some() && out_dir.join("summary.json").exists();
    let released_error = if gathered {
        release_left_alert(cfg, &out_dir, &group.group_id)
    } else {
        None
    };
    // Alerts an earlier gather could not send go first (also when this night is gathered
    // already: a retried gather delivers its queued email).
    let mut alert = session.queued_alerts(false).await;
    if gathered {
        tracing::info!(group = %group.group_id, "Already gathered.");
        if let Some(e) = released_error {
            alert.outbox_error.get_or_insert(e);
        }
        return Ok(GatherReport {
            group: group.group_id,
            out_dir,
            summary: None,
            skipped: None,
            alert,
        });
    }
    let night = Night {
        group: &group,
        landed: &landed,
        out_dir: &out_dir,
        now: timeparse::to_db(Utc::now().timestamp_micros()),
    };
    let (view, kept, tx, folder) =
        Box::pin(write_and_record(session, partition, &night, seals)).await?;
    publish_night(cfg, &night, (tx, &folder), (kept, &mut alert), lock).await?;
    Ok(GatherReport {
        group: group.group_id,
        out_dir,
        summary: Some(view.summary),
        skipped: None,
        alert,
    })
}

/// What waiting for a group's shards came to.
enum Waited {
    /// Every shard landed: the group and its shards' run ids.
    Landed(Group, Vec<String>),
    /// An `if_complete` gather found shards still to land: why it did nothing.
    Skipped(String),
}

/// Waits (up to `opts.wait`, polling) until every shard of the group has a COMPLETED run;
/// past the deadline names the missing shards ([`Failure::ShardsMissing`]). A group whose
/// shards ran with another job file, other rules or another build is refused.
async fn wait_for_shards(session: &Session<'_>, opts: &GatherOptions) -> Result<Waited> {
    let db = &session.db;
    let deadline = tokio::time::Instant::now() + opts.wait;
    let here = crate::run::config_hash(session.cfg, &session.rules)?;
    loop {
        let mut tx = db.begin().await?;
        let group = tx.group(&opts.group).await?;
        let runs = match &group {
            Some(g) => tx.shard_runs(&g.group_id).await?,
            None => Vec::new(),
        };
        tx.rollback().await?;
        let missing = match &group {
            None => vec![format!(
                "no shard of run group {} has started (hint: recon run --shard I/N --group {})",
                opts.group, opts.group
            )],
            Some(g) => {
                refuse_disagreement(g, &here)?;
                // A run RUNNING whose shard lock nobody holds was killed: said so, not
                // "still running".
                let mut killed = BTreeSet::new();
                for i in running_without_landing(g, &runs) {
                    if db.shard_lock_free(i).await? {
                        killed.insert(i);
                    }
                }
                let (landed, missing) = shard_states(g, &runs, &killed);
                if missing.is_empty() {
                    return Ok(Waited::Landed(g.clone(), landed));
                }
                missing
            }
        };
        if opts.if_complete {
            return Ok(Waited::Skipped(format!(
                "{} shard(s) still to land",
                missing.len()
            )));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(fail(
                Failure::ShardsMissing,
                format!(
                    "run group {}: {} shard(s) missing after waiting {}s; nothing was gathered:\n  {}\n\
                     (hint: re-run each missing index with recon run --shard I/N --group {}, then \
                     recon gather again)",
                    opts.group,
                    missing.len(),
                    opts.wait.as_secs(),
                    missing.join("\n  "),
                    opts.group
                ),
            ));
        }
        tracing::info!(group = %opts.group, missing = missing.len(), "Waiting for shards.");
        crate::run::stop::check("while waiting for shards: nothing was gathered")?;
        tokio::time::sleep(opts.poll.min(deadline - tokio::time::Instant::now())).await;
    }
}

/// The gather lock (one gather a night), and a shared hold on the run lock, as a shard's: a
/// whole-night `recon run` (which removes every `.tmp` folder as an interrupted run's output)
/// cannot start while this gather writes `<group>.tmp`, and this gather does not start while
/// one runs. `None`: an `if_complete` gather found another gather at work (the shard that
/// landed last at the same moment gathers).
async fn gather_locks(
    db: &Db,
    opts: &GatherOptions,
) -> Result<Option<(crate::db::RunLock, crate::db::RunLock)>> {
    let lock = match db
        .pg_locks(
            "another recon gather is at work",
            &[format!(
                "SELECT pg_try_advisory_lock({GATHER_LOCK_CLASS}, 0)"
            )],
            None,
        )
        .await
    {
        Ok(l) => l,
        Err(e) if opts.if_complete && failure_of(&e) == Some(Failure::Locked) => return Ok(None),
        Err(e) => return Err(e),
    };
    let run_hold = db
        .pg_locks(
            "a whole-night recon run holds the run lock (the gather writes beside it only once \
             it ended)",
            &[format!(
                "SELECT pg_try_advisory_lock_shared({})",
                crate::db::RUN_LOCK_KEY
            )],
            None,
        )
        .await?;
    Ok(Some((lock, run_hold)))
}

/// A gather killed after its folder was in place left the night's alert there: it goes to
/// the outbox now (and out with the queued ones). Returns why it could not, if it could not.
fn release_left_alert(cfg: &Config, out_dir: &Path, group: &str) -> Option<String> {
    match outbox::release(&cfg.output_dir, out_dir, group) {
        Ok(Some(r)) => {
            tracing::warn!(group, queued = %r.path().display(), "The night's alert had not left: queued now.");
            None
        }
        Ok(None) => None,
        Err(e) => Some(format!("{e:#}")),
    }
}

/// The night being gathered: its group, its shards' run ids and its folder.
struct Night<'a> {
    group: &'a Group,
    landed: &'a [String],
    out_dir: &'a Path,
    /// When the gather recorded its tickets and cases, and marked the night gathered.
    now: String,
}

impl Night<'_> {
    /// The gather's own run id (its tickets and cases are recorded under it).
    fn run_id(&self) -> String {
        format!("{}-gather", self.group.group_id)
    }
}

/// Removes the unfinished `<group>.tmp` of a gather that failed, then hands the error on.
fn abandoned<T>(folder: &Folder, e: anyhow::Error) -> Result<T> {
    folder.remove();
    Err(e)
}

/// Reads the landed shards' hand-overs (checked against their seals), writes the night into
/// `<group>.tmp/` and records in one open transaction what the shards left to the gather:
/// the shared sources' tickets and cases, the cases that span shards, and what changed about
/// each case since the last morning. Returns the night's view, its alert kept in the folder,
/// and the transaction (committed by [`publish_night`]).
async fn write_and_record(
    session: &Session<'_>,
    partition: &crate::partition::PartitionConfig,
    night: &Night<'_>,
    seals: Vec<Vec<HandoverFile>>,
) -> Result<(ReportView, outbox::Kept, crate::store::Tx, Folder)> {
    let (cfg, rules, db) = (session.cfg, &session.rules, &session.db);
    let Night {
        group,
        landed,
        out_dir,
        ref now,
    } = *night;
    let dirs: Vec<PathBuf> = landed.iter().map(|r| cfg.output_dir.join(r)).collect();
    let handover = Handover::check(group, landed, &dirs, seals)?;
    let marks = crate::decisions::marks(db, &cfg.decisions.dismiss_reasons).await?;
    let mut records = read_records(group, &dirs, &handover)?;
    let shared = shared_night(cfg, rules, group, &mut records).await?;
    // The shared rows' tickets and cases, the group marked gathered: one transaction, committed
    // once the night's files are written (a gather that fails leaves neither).
    let run_id = night.run_id();
    let mut tx = db.begin().await?;
    let mut tickets = crate::outputs::summary::TicketStats::default();
    if let Some(s) = &shared {
        tickets = crate::run::effects::line_tickets(
            &mut tx,
            &s.data,
            rules,
            (&group.range_to, s.as_of),
            (&run_id, now),
        )
        .await?;
        let seen = format!("{:020}", s.as_of);
        crate::decisions::record(&mut tx, &s.view, &[], None, (&run_id, &seen), now).await?;
    }
    // The cases that span shards (a line named across partitions): each shard left them to
    // the gather, with the payments as it loaded them.
    let crossing: std::collections::HashSet<String> = records
        .iter()
        .flat_map(|r| r.crossing.iter().cloned())
        .collect();
    let case_payments: Vec<crate::ledger::Payment> = records
        .iter()
        .flat_map(|r| &r.case_payments)
        .map(crate::run::handover::CasePaymentRecord::payment)
        .collect();
    let folder = Folder::create(&cfg.output_dir, &group.group_id)?;
    let mut view = write_night(
        partition,
        group,
        &dirs,
        &handover,
        records,
        shared.as_ref(),
        &tickets,
        marks,
        &folder,
    )?;
    crate::fault::point("gather_written");
    if !crossing.is_empty() {
        // Only those: the shards stored the others.
        let spanning: Vec<&crate::report::cases::Case> = view
            .cases
            .iter()
            .filter(|c| crate::run::handover::is_crossing(&view, c, &crossing))
            .collect();
        let as_of = timeparse::parse_ledger(&group.as_of).map_err(|e| {
            fail(
                Failure::Database,
                format!("run group {}: as_of: {e}", group.group_id),
            )
        })?;
        let seen = format!("{as_of:020}");
        let recorded = crate::decisions::record::store_cases(
            &mut tx,
            &view,
            &spanning,
            &case_payments,
            (&run_id, &seen),
            now,
        )
        .await;
        if let Err(e) = recorded {
            return abandoned(&folder, e);
        }
    }
    // What changed about each case since the last morning: the shards and this gather
    // stored the night's cases, so the store says it as it does for one process.
    let night_runs: Vec<String> = landed
        .iter()
        .cloned()
        .chain(std::iter::once(run_id))
        .collect();
    match crate::decisions::markers(&mut tx, &view, &night_runs, Utc::now().timestamp_micros())
        .await
    {
        Ok(m) => view.marks.markers = m,
        Err(e) => return abandoned(&folder, e),
    }
    // The night's alert is kept in its folder before the commit that marks the night
    // gathered: the folder and its alert appear together, and a gather killed before the
    // alert left the folder has the next gather release it (once).
    let kept = match outbox::keep(cfg.email.as_ref(), &view, &folder.tmp_dir, out_dir) {
        Ok(k) => k,
        Err(e) => {
            let e = folder.err("keeping the night's alert", &format!("{e:#}"));
            return abandoned(&folder, e);
        }
    };
    Ok((view, kept, tx, folder))
}

/// Marks the night gathered (the commit), renames `<group>.tmp/` into place, then releases
/// the night's alert from the folder into the outbox and sends it (under the gather lock).
async fn publish_night(
    cfg: &Config,
    night: &Night<'_>,
    (mut tx, folder): (crate::store::Tx, &Folder),
    (kept, alert): (outbox::Kept, &mut Alert),
    (lock, _run_hold): (crate::db::RunLock, crate::db::RunLock),
) -> Result<()> {
    let (group, out_dir) = (night.group, night.out_dir);
    tx.mark_gathered(&group.group_id, &out_dir.display().to_string(), &night.now)
        .await?;
    if let Err(e) = tx.commit().await {
        return abandoned(folder, e);
    }
    folder.rename_into_place()?;
    alert.status = match kept {
        outbox::Kept::Disabled => AlertStatus::Disabled,
        outbox::Kept::Written(path) => AlertStatus::Written(path),
        outbox::Kept::Pending => {
            match (
                cfg.email.as_ref(),
                outbox::release(&cfg.output_dir, out_dir, &group.group_id),
            ) {
                (Some(email), Ok(Some(released))) => released.send(email, lock).await,
                (_, Ok(_)) => AlertStatus::Failed(format!(
                    "the night's alert is no longer in {}",
                    out_dir.display()
                )),
                // It stays in the folder: the next gather of the night releases it.
                (_, Err(e)) => AlertStatus::Failed(format!(
                    "{e:#} (it stays in {}; the next recon gather queues it)",
                    out_dir.display()
                )),
            }
        }
    };
    if matches!(alert.status, AlertStatus::Queued { .. }) {
        alert.outbox_left += 1;
    }
    Ok(())
}

/// What each landed shard sealed when it committed ([`crate::run::handover::seal`]): the
/// gather checks every file it reads against it, and gathers nothing that differs.
struct Handover {
    group: String,
    count: u32,
    shards: Vec<ShardSeal>,
}

/// One shard's seal.
struct ShardSeal {
    run_id: String,
    dir: PathBuf,
    files: BTreeMap<String, HandoverFile>,
}

impl Handover {
    /// The seals of the landed runs (in shard order), checked against their folders as far as
    /// that is cheap: every file the gather reads is sealed, and every sealed file is there,
    /// of its sealed size. Its bytes are checked as they are read ([`Handover::verify`]).
    fn check(
        group: &Group,
        landed: &[String],
        dirs: &[PathBuf],
        seals: Vec<Vec<HandoverFile>>,
    ) -> Result<Handover> {
        let mut h = Handover {
            group: group.group_id.clone(),
            count: group.shards,
            shards: Vec::with_capacity(landed.len()),
        };
        for ((run_id, dir), seal) in landed.iter().zip(dirs).zip(seals) {
            h.shards.push(ShardSeal {
                run_id: run_id.clone(),
                dir: dir.clone(),
                files: seal.into_iter().map(|f| (f.file.clone(), f)).collect(),
            });
        }
        for (i, s) in h.shards.iter().enumerate() {
            if s.files.is_empty() {
                return Err(h.refused(
                    i,
                    "has no sealed hand-over: its run committed without recording what it \
                     handed over (a recon from before issue 41), so nothing it wrote can be \
                     trusted",
                ));
            }
            for name in crate::run::handover::HANDED {
                if !s.files.contains_key(name) {
                    return Err(h.refused(i, &format!("{name} is not in its sealed hand-over")));
                }
            }
            for f in s.files.values() {
                let path = s.dir.join(&f.file);
                match std::fs::metadata(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(h.refused(
                            i,
                            &format!(
                                "{} is missing: it was removed since the shard committed",
                                path.display()
                            ),
                        ));
                    }
                    Err(e) => {
                        return Err(h.refused(i, &format!("{}: {e}", path.display())));
                    }
                    Ok(m) if m.len() != f.bytes => {
                        return Err(h.refused(
                            i,
                            &format!(
                                "{} changed since the shard committed ({} bytes sealed, {} now)",
                                path.display(),
                                f.bytes,
                                m.len()
                            ),
                        ));
                    }
                    Ok(_) => {}
                }
            }
        }
        Ok(h)
    }

    /// The error that refuses the night because of shard `i`'s hand-over.
    fn refused(&self, i: usize, why: &str) -> anyhow::Error {
        let run = self.shards.get(i).map_or("?", |s| s.run_id.as_str());
        fail(
            Failure::HandoverChanged,
            format!(
                "run group {}: shard {i}/{} (run {run}): {why}; nothing was gathered and the \
                 night is not marked gathered (hint: restore the shard's folder as the shard \
                 wrote it, or run the night's shards again under a new --group)",
                self.group, self.count
            ),
        )
    }

    /// Checks the sha256 and size of the bytes read of shard `i`'s `file` against its seal.
    fn verify(&self, i: usize, file: &str, (sha256, bytes): &(String, u64)) -> Result<()> {
        let Some(s) = self.shards.get(i) else {
            return Ok(());
        };
        let Some(sealed) = s.files.get(file) else {
            return Err(self.refused(i, &format!("{file} is not in its sealed hand-over")));
        };
        if &sealed.sha256 != sha256 || sealed.bytes != *bytes {
            return Err(self.refused(
                i,
                &format!(
                    "{} changed since the shard committed (sealed: sha256 {}, {} bytes; read: \
                     sha256 {sha256}, {bytes} bytes)",
                    s.dir.join(file).display(),
                    sealed.sha256,
                    sealed.bytes
                ),
            ));
        }
        Ok(())
    }

    /// Reads shard `i`'s `file` whole and checks it against its seal.
    fn verify_whole(&self, i: usize, file: &str) -> Result<()> {
        let Some(s) = self.shards.get(i) else {
            return Ok(());
        };
        let path = s.dir.join(file);
        let mut reader = crate::run::handover::Hashing::new(
            std::fs::File::open(&path)
                .map_err(|e| self.refused(i, &format!("{}: {e}", path.display())))?,
        );
        std::io::copy(&mut reader, &mut std::io::sink())
            .map_err(|e| self.refused(i, &format!("{}: {e}", path.display())))?;
        self.verify(i, file, &reader.finish())
    }
}

/// Each landed shard's `shard.json`, in shard order, each checked against its seal (as are
/// the files of the shard's folder that the merge does not read, such as summary.json).
fn read_records(group: &Group, dirs: &[PathBuf], handover: &Handover) -> Result<Vec<ShardRecord>> {
    let merged = crate::run::handover::MERGED;
    let mut records = Vec::with_capacity(dirs.len());
    for (i, d) in dirs.iter().enumerate() {
        let r = match ShardRecord::read(d) {
            Ok((r, got)) => {
                handover.verify(i, crate::run::handover::FILE, &got)?;
                r
            }
            Err(e) => {
                // Unreadable: changed, or broken as the shard wrote it?
                handover.verify_whole(i, crate::run::handover::FILE)?;
                return Err(fail(Failure::Output, format!("{e:#}")));
            }
        };
        if let Some(s) = handover.shards.get(i) {
            for file in s.files.keys() {
                if file != crate::run::handover::FILE && !merged.contains(&file.as_str()) {
                    handover.verify_whole(i, file)?;
                }
            }
        }
        if r.group != group.group_id || r.shard.index as usize != i {
            return Err(fail(
                Failure::Output,
                format!(
                    "{}: shard.json is shard {} of group {}, expected shard {i} of {}",
                    d.display(),
                    r.shard,
                    r.group,
                    group.group_id
                ),
            ));
        }
        records.push(r);
    }
    Ok(records)
}

/// The night's shared settlement ([`crate::run::shared`]): the shared bank sources, read once,
/// paired with every shard's batches.
struct SharedNight {
    /// Its rows and lines (no payment).
    data: crate::run::data::RunData,
    /// How many of its lines are the shards' handed provider lines.
    handed: usize,
    /// The group's as-of.
    as_of: crate::timeparse::Micros,
    /// The rows' view (its cases are recorded).
    view: ReportView,
    /// What reading the shared sources found.
    rejected: Vec<crate::sources::Rejected>,
    inputs: Vec<crate::sources::InputFile>,
    gates: Vec<crate::sources::Gate>,
    unreadable: Vec<crate::sources::Unreadable>,
    warnings: Vec<String>,
}

/// Reads the shared sources over the night's days and decides their settlement.
async fn shared_night(
    cfg: &Config,
    rules: &crate::rules::RuleSet,
    group: &Group,
    records: &mut [ShardRecord],
) -> Result<Option<SharedNight>> {
    let mut shared_cfg = cfg.clone();
    shared_cfg
        .sources
        .retain(|s| crate::run::shared::is_shared(cfg, s));
    if shared_cfg.sources.is_empty() {
        return Ok(None);
    }
    let day = |d: &str| {
        d.parse::<chrono::NaiveDate>().map_err(|e| {
            fail(
                Failure::Database,
                format!("run group {}: day {d:?}: {e}", group.group_id),
            )
        })
    };
    let (from, to) = (day(&group.range_from)?, day(&group.range_to)?);
    let tz = cfg.timezone;
    let t0 = timeparse::day_start(from, tz);
    let t1 = timeparse::day_start(to.succ_opt().unwrap_or(to), tz);
    let as_of = timeparse::parse_ledger(&group.as_of).map_err(|e| {
        fail(
            Failure::Database,
            format!("run group {}: as_of: {e}", group.group_id),
        )
    })?;
    let days = crate::run::plan::statement_days(cfg, rules, (t0, t1));
    let (loads, _) = crate::run::plan::load_statements(&shared_cfg, days, as_of)
        .await
        .context("statement loading task")??;
    let (mut lines, mut coverage) = (Vec::new(), Vec::new());
    let (mut rejected, mut inputs, mut gates, mut unreadable, mut warnings) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for load in loads {
        gates.extend(load.gates);
        unreadable.extend(load.unreadable);
        crate::sources::absorb(&mut lines, load.lines);
        coverage.push(load.coverage);
        inputs.extend(load.files);
        warnings.extend(load.warnings);
        rejected.extend(load.rejected);
    }
    lines.retain(|l: &crate::sources::StatementLine| l.booked_at <= as_of);
    let coverage_by_name: std::collections::HashMap<
        &str,
        &[(timeparse::Micros, timeparse::Micros)],
    > = shared_cfg
        .sources
        .iter()
        .zip(&coverage)
        .map(|(s, c)| (s.name.as_str(), c.as_slice()))
        .collect();
    // Every shard's handed lines of one file share one origin.
    let mut origins = crate::run::handover::HandedOrigins::new();
    let handovers = records
        .iter_mut()
        .map(|r| std::mem::take(&mut r.handed).handover(&mut origins))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| fail(Failure::Output, format!("shared settlement: {e:#}")))?;
    let decided = crate::run::shared::decide(
        handovers,
        lines,
        rules,
        &crate::run::shared::Night {
            as_of,
            lag: cfg.settlement_lag_hours * timeparse::HOUR,
            range: (t0, t1),
            coverage: &coverage_by_name,
        },
    )
    .map_err(|e| fail(Failure::Output, format!("shared settlement: {e:#}")))?;
    let totals = summary::outcome_totals(&decided.rows, &[], &decided.lines);
    // Every row (no cut): the gather ranks them among the shards' in the night's order.
    let view = ReportView::build(
        &Summary::default(),
        &totals,
        &decided.rows,
        &[],
        &decided.lines,
        as_of,
        None,
    );
    Ok(Some(SharedNight {
        data: crate::run::data::RunData {
            payments: Vec::new(),
            lines: decided.lines,
            rows: decided.rows,
            totals,
            settlement: decided.settlement,
            status_provider_ids: Default::default(),
            handed: Default::default(),
            confirmations: Default::default(),
            crossing: Default::default(),
        },
        handed: decided.handed,
        as_of,
        view,
        rejected,
        inputs,
        gates,
        unreadable,
        warnings,
    }))
}

/// The columns (header names) the rows of results.csv and diff.csv are merged by: payment
/// rows by payment id, line rows by the source of their first line.
const RESULTS_KEY: [&str; 2] = ["payment_id", "source_lines"];
/// The column the rows of rejected.csv are merged by (their source).
const REJECTED_KEY: [&str; 1] = ["source"];
/// The column the rows of settlement.csv are merged by (their provider source).
const SETTLEMENT_KEY: [&str; 1] = ["provider"];

/// Writes the night's files into `tmp` from the shards' folders and the shared settlement.
#[allow(clippy::too_many_arguments)]
fn write_night(
    partition: &crate::partition::PartitionConfig,
    group: &Group,
    dirs: &[PathBuf],
    handover: &Handover,
    records: Vec<ShardRecord>,
    shared: Option<&SharedNight>,
    tickets: &crate::outputs::summary::TicketStats,
    marks: crate::report::cases::Marks,
    folder: &Folder,
) -> Result<ReportView> {
    let tmp = folder.tmp_dir.as_path();
    let written = (|| -> Result<ReportView> {
        // The shared settlement's files, merged after the shards' (their rows go after a
        // source's own, as one process orders them).
        let mut dirs = dirs.to_vec();
        if let Some(s) = shared {
            let dir = tmp.join(".shared");
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            crate::run::folder::write_results(&dir, &s.data.rows, &[], &s.data.lines)?;
            crate::outputs::results::write_rejected(&dir.join("rejected.csv"), &s.rejected)?;
            crate::outputs::settlement::write(&dir.join("settlement.csv"), &s.data.settlement)?;
            dirs.push(dir);
        }
        let dirs = &dirs[..];
        let source_of = |field: &[u8]| -> usize {
            // `source:file:line[;…]`: the longest configured source name before a `:`.
            partition
                .source_order
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    field.starts_with(n.as_bytes()) && field.get(n.len()) == Some(&b':')
                })
                .max_by_key(|(_, n)| n.len())
                .map_or(usize::MAX, |(i, _)| i)
        };
        // Each shard's file is checked against its seal once the merge has read it whole (the
        // shared settlement's, the last folder, is this gather's own); a file the merge
        // refuses is checked whole first (changed since it was sealed, or written so?).
        let merge = |name: &str, order: &merge::Order<'_>| -> Result<()> {
            let read =
                merge::merge_csv(dirs, name, tmp, order, &|i| handover.verify_whole(i, name))?;
            for (i, got) in read.iter().enumerate().take(handover.shards.len()) {
                handover.verify(i, name, got)?;
            }
            Ok(())
        };
        // Payment rows by payment id, then line rows by the job-file place of their first
        // line's source, as one process orders a partitioned night's rows.
        let by_row = |v: &[&[u8]]| -> merge::Key {
            let (pid, source_lines) = (v[0], v[1]);
            if pid.is_empty() {
                (1, Vec::new(), source_of(source_lines))
            } else {
                (0, pid.to_vec(), 0)
            }
        };
        for name in ["results.csv", reports::DIFF_CSV_FILE] {
            merge(
                name,
                &merge::Order {
                    columns: &RESULTS_KEY,
                    key: &by_row,
                },
            )?;
        }
        merge(
            "rejected.csv",
            &merge::Order {
                columns: &REJECTED_KEY,
                key: &|v| (0, Vec::new(), source_of(v[0])),
            },
        )?;
        // By provider source, as one process orders it
        // ([`crate::outputs::settlement::order_by_source`]).
        merge(
            "settlement.csv",
            &merge::Order {
                columns: &SETTLEMENT_KEY,
                key: &|v| {
                    let at = if v[0].is_empty() {
                        usize::MAX
                    } else {
                        partition.source_index(&String::from_utf8_lossy(v[0]))
                    };
                    (0, Vec::new(), at)
                },
            },
        )?;
        if shared.is_some() {
            let dir = tmp.join(".shared");
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let mut totals: BTreeMap<crate::model::Outcome, OutcomeTotal> = BTreeMap::new();
        let (mut planned, mut ticket_rows) = (0, 0);
        let mut add = |more: &BTreeMap<crate::model::Outcome, OutcomeTotal>| {
            for (o, t) in more {
                let sum = totals.entry(*o).or_default();
                sum.count += t.count;
                for (c, v) in &t.amounts {
                    *sum.amounts.entry(c).or_default() += v;
                }
            }
        };
        for r in &records {
            add(&r.totals()?);
            planned += r.transitions_planned;
            ticket_rows += r.ticket_rows;
        }
        if let Some(s) = shared {
            add(&s.data.totals);
            ticket_rows += s.view.ticket_rows;
        }
        let mut summary = merged_summary(partition, group, &records, shared, &totals);
        summary.tickets.add(tickets);
        // Every shard's rows that need a human, and the first of each other family: of those,
        // the night's first are kept as they come (one shard's at a time).
        let valuation = summary.reporting.as_ref().map(|r| r.valuation.clone());
        // Sized for every row that needs a human at once (growing it would hold two copies).
        let mut listed = crate::report::Listed::new(
            valuation.as_ref(),
            Some(crate::report::ROWS_PER_FAMILY),
            ticket_rows,
        );
        let mut interned = crate::run::handover::Interned::default();
        for (i, r) in records.iter().enumerate() {
            // One shard's rows at a time, read again from its sealed file, each listed as it
            // is read; a file that differs from its seal fails the gather before anything is
            // written from it.
            let file = crate::run::handover::FILE;
            listed.count(&r.family_rows()?);
            let mut list = |row: crate::run::handover::ItemRecord| -> Result<()> {
                listed.hold(row.item(&mut interned)?);
                Ok(())
            };
            let got = match ShardRecord::read_items_each(&dirs[i], &mut list) {
                Ok(got) => got,
                // Unreadable now: changed since it was sealed (and read first)?
                Err(e) => {
                    handover.verify_whole(i, file)?;
                    return Err(e);
                }
            };
            handover.verify(i, file, &got)?;
        }
        if let Some(s) = shared {
            listed.extend_counted(s.view.items.iter().cloned(), &s.view.family_rows);
        }
        let listed = listed.finish();
        let mut view = ReportView::gathered(summary, totals, listed, marks, (planned, ticket_rows));
        let mut night = view.summary.clone();
        view.complete_summary(&mut night);
        view.summary = night;
        // The report files say what the rows ask for, as one process's (written beside its
        // commit); the email says what the commits did.
        view.committed = false;
        reports::write_view(tmp, &view)?;
        let json = serde_json::to_string_pretty(&view.summary).context("summary.json")?;
        std::fs::write(tmp.join("summary.json"), json + "\n")
            .with_context(|| format!("writing {}", tmp.join("summary.json").display()))?;
        view.committed = true;
        Ok(view)
    })();
    match written {
        Ok(v) => Ok(v),
        Err(e) => {
            folder.remove();
            // A refused hand-over keeps its own exit code.
            if failure_of(&e).is_some() {
                Err(e)
            } else {
                Err(fail(Failure::Output, format!("{e:#}")))
            }
        }
    }
}

/// The night's summary from its shards' (in shard order): counts summed, inputs and gates in
/// job-file order, every distinct warning once.
fn merged_summary(
    partition: &crate::partition::PartitionConfig,
    group: &Group,
    records: &[ShardRecord],
    shared: Option<&SharedNight>,
    totals: &BTreeMap<crate::model::Outcome, OutcomeTotal>,
) -> Summary {
    let first = records.first().map(|r| &r.summary);
    let mut s = Summary {
        run_id: group.group_id.clone(),
        range_from: group.range_from.clone(),
        range_to: group.range_to.clone(),
        as_of: first.map(|f| f.as_of.clone()).unwrap_or_default(),
        dry_run: false,
        rules_hash: first.map(|f| f.rules_hash.clone()).unwrap_or_default(),
        outcomes: summary::outcome_stats(totals),
        // Every shard valued the same night with the same job file's rates; the totals are
        // the gathered view's.
        reporting: first
            .and_then(|f| f.reporting.clone())
            .map(|r| summary::ReportingSummary {
                valuation: r.valuation,
                ..Default::default()
            }),
        ..Summary::default()
    };
    for r in records {
        let x = &r.summary;
        s.inputs.extend(x.inputs.iter().cloned());
        s.payments_loaded += x.payments_loaded;
        s.payments_in_scope += x.payments_in_scope;
        s.statement_lines += x.statement_lines;
        s.rejected_lines += x.rejected_lines;
        s.transitions.add(&x.transitions);
        s.tickets.add(&x.tickets);
        summary::add_distinct_warnings(&mut s.warnings, &x.warnings);
        s.gates.extend(x.gates.iter().cloned());
        s.unreadable_inputs
            .extend(x.unreadable_inputs.iter().cloned());
        for (k, v) in &x.timings_ms {
            let t = s.timings_ms.entry(k.clone()).or_default();
            *t = (*t).max(*v);
        }
        s.shards.push(ShardCount {
            shard: r.shard.index,
            run_id: r.run_id.clone(),
            partitions: r.partitions.clone(),
            payments_loaded: x.payments_loaded,
            payments_in_scope: x.payments_in_scope,
            statement_lines: x.statement_lines,
        });
    }
    if let Some(x) = shared {
        s.inputs.extend(x.inputs.iter().cloned());
        s.statement_lines += x.data.lines.len() - x.handed;
        s.rejected_lines += x.rejected.len();
        summary::add_distinct_warnings(&mut s.warnings, &x.warnings);
        s.gates.extend(x.gates.iter().cloned());
        s.unreadable_inputs.extend(x.unreadable.iter().cloned());
    }
    s.inputs.sort_by_key(|f| partition.source_index(&f.source));
    s.gates.sort_by_key(|g| partition.source_index(&g.source));
    s.unreadable_inputs
        .sort_by_key(|u| partition.source_index(&u.source));
    s
}

#[cfg(test)]
mod tests {
    /// The gather merges by columns every shard writes (a renamed column is caught here, not
    /// by a night whose merge refuses the shards' files).
    #[test]
    fn the_merge_keys_are_columns_of_the_files() {
        for c in super::RESULTS_KEY {
            assert!(crate::outputs::results::HEADER.contains(&c), "{c}");
        }
        for c in super::SETTLEMENT_KEY {
            assert!(crate::outputs::settlement::HEADER.contains(&c), "{c}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rejected.csv");
        crate::outputs::results::write_rejected(&path, &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let header: Vec<&str> = text.trim_end().split(',').collect();
        for c in super::REJECTED_KEY {
            assert!(header.contains(&c), "{c}: {text}");
        }
    }
}
