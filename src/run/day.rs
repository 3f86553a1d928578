//! One day of a run: its run record, the plan, the effects in one transaction, the outputs
//! written into `<folder>.tmp/` and renamed into place, the record marked COMPLETED.

use super::folder::Folder;
use super::plan::{Plan, plan};
use super::stop;
use super::{Job, Part, ReadInRange, RunReport, free_in_background};
use crate::exit::{Failure, fail};
use crate::outcome::{Action, Outcome};
use crate::outputs::results;
use crate::outputs::summary;
use crate::report::outbox::Alert;
use crate::report::{self as reports, ReportView};
use crate::run::data::{RunData, RunOptions};
use crate::timeparse::{self};
use anyhow::{Context as _, Result};
use chrono::{NaiveDate, Utc};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What the days of a range judged so far (see [`crate::decisions::record::Judged`]), and how
/// many days are still to run: the last one closes the cases none of them holds any more.
#[derive(Debug, Default)]
pub(super) struct RangeCases {
    pub(super) judged: crate::decisions::record::Judged,
    pub(super) days_left: usize,
}

/// One day: the run record, the plan, the effects, the outputs in `<parent>/<folder>/` (the
/// folder as `job.part` says: `<output_dir>/<run id>/`, or a range's `<range>/<YYYY-MM-DD>/`).
pub(super) async fn run_day(
    job: Job<'_>,
    opts: &RunOptions,
    day: NaiveDate,
    run_id: &str,
    read: &mut ReadInRange,
    range_cases: Option<&mut RangeCases>,
) -> Result<(RunReport, FinalOutcomes, ReportView)> {
    let Job {
        cfg,
        rules,
        db,
        as_of,
        part,
        ..
    } = job;
    let now = || timeparse::to_db(Utc::now().timestamp_micros());
    let day_opts = RunOptions {
        from: day,
        to: day,
        ..opts.clone()
    };
    // A single day is `<output_dir>/<run id>/`; a range's day `<range folder>/<YYYY-MM-DD>/`.
    let (parent, folder) = match part {
        Part::RangeDay(dir) => (dir, day.to_string()),
        Part::Whole | Part::Shard(..) => (cfg.output_dir.as_path(), run_id.to_string()),
    };
    stop::check(&format!(
        "before {day} began: nothing of it was done{}",
        if let Part::RangeDay(_) = part {
            " (the range's earlier days are committed and complete)"
        } else {
            ""
        }
    ))?;
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
        if let Part::Shard(shard, group) = part {
            tx.add_shard_run(group, shard.index, run_id).await?;
        }
        tx.commit().await?;
        crate::fault::point("after_run_record");
    }
    tracing::info!(run_id, date = %day, as_of = %timeparse::format_utc(as_of), dry_run = opts.dry_run, rules_hash = %rules.hash, "Run started.");
    let result = plan_and_apply(job, &day_opts, run_id, (parent, &folder), read, range_cases).await;
    match &result {
        Ok((r, _, _)) => {
            tracing::info!(run_id, payments = r.summary.payments_in_scope, lines = r.summary.statement_lines, transitions = r.summary.transitions.applied, tickets_new = r.summary.tickets.created, out_dir = %r.out_dir.display(), "Run completed.")
        }
        // A stop signal: the one line is the error `recon run` prints.
        Err(e) if crate::exit::interrupted_by(e).is_some() => {}
        Err(e) => {
            tracing::error!(run_id, error = %crate::exit::bounded(&format!("{e:#}")), "Run failed.")
        }
    }
    if let Err(e) = &result
        && !opts.dry_run
    {
        // Best effort, bounded: the run record says why it failed; nothing else was
        // committed.
        let error = crate::exit::bounded(&format!("{e:#}")).into_owned();
        super::recovery::record_failure(db, cfg, run_id, &error).await;
    }
    result
}

/// A day after its run record: the plan, the outputs written into `<folder>.tmp/` while the
/// effects are applied, one transaction committed, the folder renamed into place and the run
/// record marked COMPLETED. Each stage takes what the one before handed over: [`Plan`] →
/// [`Planned`] → [`Writing`] (with the commit) → [`Committed`] → [`Published`].
async fn plan_and_apply(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    (parent, folder): (&std::path::Path, &str),
    read: &mut ReadInRange,
    range_cases: Option<&mut RangeCases>,
) -> Result<(RunReport, FinalOutcomes, ReportView)> {
    // `[shadow]`: the same evidence planned with the shadow rules first, kept as its rows'
    // projection, and compared with the night's own plan before anything is applied.
    let shadow = if job.part.hands_over() {
        None
    } else {
        let planned = Box::pin(async { Ok(super::shadow::plan_first(job, opts).await) });
        stop::unless_stopped(stop::BEFORE_COMMIT, planned).await?
    };
    let day = Box::pin(plan(job, opts, run_id, read));
    let mut day = stop::unless_stopped(stop::BEFORE_COMMIT, day).await?;
    if let Some((projected, planned_ms)) = shadow {
        let started = std::time::Instant::now();
        let compared = super::shadow::compare(job, opts, projected, &day).await;
        day.summary.shadow = compared;
        day.summary.timings_ms.insert(
            "shadow".into(),
            planned_ms + started.elapsed().as_millis() as u64,
        );
    }
    let (planned, rejected) = Box::pin(prepare(job, opts, run_id, day)).await?;
    let folder = Folder::create(parent, folder)?;
    let mut writing = Writing::start(job, folder, &planned, rejected);
    // Everything up to the commit: a failure or a stop signal on the way rolls back (the open
    // transaction is dropped) and leaves no `.tmp` folder behind.
    let committed = Box::pin(commit(
        job,
        opts,
        run_id,
        planned,
        &mut writing,
        range_cases,
    ))
    .await;
    let committed = match committed {
        Ok(done) => done,
        Err(e) => {
            writing.abandon().await;
            return Err(e);
        }
    };
    let published = Box::pin(publish(job, opts, run_id, committed, writing.folder)).await?;
    Ok(published.report(job.part, run_id))
}

/// A day's plan ready for its outputs and its commit.
struct Planned {
    /// The rows, shared with the writers.
    data: Arc<RunData>,
    /// What the passes found (the effects record it).
    matched: crate::matching::MatchResult,
    summary: summary::Summary,
    /// Start of the day (UTC micros).
    t0: crate::timeparse::Micros,
    /// What reviewers' decisions left on the cases.
    marks: Arc<crate::report::cases::Marks>,
}

/// Readies `plan` for its outputs: what the run's pass over the decisions inbox did (recorded
/// under its id before it began), for summary.json, the reports and the email; and what
/// reviewers' decisions left on the cases (the Decide sheet leaves settled ones out), read
/// before the output folder exists: a database that fails here leaves nothing behind. Also
/// the rejected lines, for the writer.
async fn prepare(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    plan: Plan,
) -> Result<(Planned, Vec<crate::sources::Rejected>)> {
    let Plan {
        data,
        matched,
        mut summary,
        rejected,
        t0,
    } = plan;
    if !opts.dry_run {
        summary.inbox = crate::decisions::inbox::recorded(job.db, run_id).await;
    }
    crate::fault::point("after_plan");
    stop::check(stop::BEFORE_COMMIT)?;
    let marks = crate::decisions::marks(job.db, &job.cfg.decisions.dismiss_reasons);
    let marks = Arc::new(stop::unless_stopped(stop::BEFORE_COMMIT, marks).await?);
    let planned = Planned {
        data: Arc::new(data),
        matched,
        summary,
        t0,
        marks,
    };
    Ok((planned, rejected))
}

/// The report view and the time its files took (ms).
type ViewWritten = (Arc<ReportView>, u64);

/// The output files being written on blocking threads while the database work runs; both
/// must succeed before the commit and the rename.
struct Writing {
    folder: Folder,
    /// results.csv, diff.csv, rejected.csv and settlement.csv: the time they took (ms).
    results: Option<tokio::task::JoinHandle<Result<u64>>>,
    /// The reports: their view (handed over as soon as it is built, before the files are
    /// written) and the time they took (ms).
    reports: Option<tokio::task::JoinHandle<Result<ViewWritten>>>,
    /// The view, as soon as the report writer has built it: the cases are recorded from it
    /// while report.xlsx and report.html are still being written.
    view: Option<tokio::sync::oneshot::Receiver<Arc<ReportView>>>,
}

impl Writing {
    /// Starts writing `planned`'s results and, at the same time, its reports (into the same
    /// folder, so they appear or not with the results). They show what the rows say; what the
    /// commit did (transitions applied, tickets new) is in summary.json and the email.
    fn start(
        job: Job<'_>,
        folder: Folder,
        planned: &Planned,
        rejected: Vec<crate::sources::Rejected>,
    ) -> Writing {
        let results = {
            let (data, tmp) = (Arc::clone(&planned.data), folder.tmp_dir.clone());
            tokio::task::spawn_blocking(move || -> Result<u64> {
                let started = Instant::now();
                write_results(&tmp, &data)?;
                results::write_rejected(&tmp.join("rejected.csv"), &rejected)?;
                crate::outputs::settlement::write(&tmp.join("settlement.csv"), &data.settlement)?;
                Ok(started.elapsed().as_millis() as u64)
            })
        };
        let (view_tx, view_rx) = tokio::sync::oneshot::channel();
        let reports = {
            let (data, tmp) = (Arc::clone(&planned.data), folder.tmp_dir.clone());
            let (summary, marks) = (planned.summary.clone(), Arc::clone(&planned.marks));
            let (hands_over, as_of) = (job.part.hands_over(), job.as_of);
            let keep = job.part.rows_per_family();
            tokio::task::spawn_blocking(move || -> Result<ViewWritten> {
                let started = Instant::now();
                let view = Arc::new(view_only((&summary, keep), &data, as_of, &marks));
                // The commit may record the cases now; nobody waiting is not an error.
                let _ = view_tx.send(Arc::clone(&view));
                if !hands_over {
                    reports::write_view(&tmp, &view)?;
                }
                Ok((view, started.elapsed().as_millis() as u64))
            })
        };
        Writing {
            folder,
            results: Some(results),
            reports: Some(reports),
            view: Some(view_rx),
        }
    }

    /// The report view as soon as it is built (the report files may still be being written);
    /// `None` when the writer failed before it had one (`finish` says why).
    async fn view(&mut self) -> Option<Arc<ReportView>> {
        self.view.take()?.await.ok()
    }

    /// Waits for both writers: the time the results took (ms), the report view, and the time
    /// the reports took.
    async fn finish(&mut self) -> Result<(u64, ReportView, u64)> {
        // A view nobody took early is dropped with its channel.
        drop(self.view.take());
        let write_ms = take(&mut self.results)?
            .await
            .context("results writer task")?
            .map_err(|e| self.folder.err("writing results", &format!("{e:#}")))?;
        let (view, reports_ms) = take(&mut self.reports)?
            .await
            .context("report writer task")?
            .map_err(|e| self.folder.err("writing reports", &format!("{e:#}")))?;
        // Whoever borrowed the view early has let it go by now.
        let view = Arc::try_unwrap(view)
            .map_err(|_| fail(Failure::Output, "the report view is still borrowed"))?;
        Ok((write_ms, view, reports_ms))
    }

    /// After a failure before the commit: the writers may still be at work in the folder: let
    /// them finish, then remove it.
    async fn abandon(mut self) {
        if let Some(w) = self.results.take() {
            let _ = w.await;
        }
        if let Some(r) = self.reports.take() {
            let _ = r.await;
        }
        self.folder.remove();
    }
}

/// The report view of `data`, with the report files written into `dir`; a shard's rows go to
/// the gather (shard.json), which writes the night's reports.
fn report_files(
    part: Part<'_>,
    dir: &std::path::Path,
    summary: &summary::Summary,
    data: &RunData,
    as_of: crate::timeparse::Micros,
    marks: &crate::report::cases::Marks,
) -> Result<ReportView> {
    let view = view_only((summary, part.rows_per_family()), data, as_of, marks);
    if !part.hands_over() {
        reports::write_view(dir, &view)?;
    }
    Ok(view)
}

/// A day's rows, summary and report view, as the commit leaves them.
struct Results {
    data: RunData,
    summary: summary::Summary,
    view: ReportView,
}

/// The day committed (or, in a dry run, rolled back): its results, and the moment the commit
/// recorded.
struct Committed {
    day: Results,
    now: String,
}

/// Applies the day in one transaction: the effects (transitions, tickets, follow-ups), the
/// written results and reports (again, with any conflict the effects met), the cases,
/// summary.json (and a shard's shard.json, sealed in the transaction); then commits. A dry run
/// rolls back.
async fn commit(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    planned: Planned,
    writing: &mut Writing,
    range_cases: Option<&mut RangeCases>,
) -> Result<Committed> {
    let Job {
        cfg,
        rules,
        db,
        as_of,
        part,
        ..
    } = job;
    let Planned {
        data,
        matched,
        mut summary,
        t0,
        marks,
    } = planned;
    let started = Instant::now();
    let mut tx = db.begin().await?;
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let conflicts = if !opts.dry_run {
        // The payout status blocks are inputs like sources (a late file is news).
        let sources: Vec<&str> = (cfg.sources.iter().map(|s| s.name.as_str()))
            .chain(cfg.payout_status.iter().map(|b| b.name.as_str()))
            .collect();
        stop::unless_stopped(
            stop::BEFORE_COMMIT,
            crate::run::effects::apply(
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
            ),
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
    // The cases are recorded from the report view as soon as it is built, while report.xlsx
    // and report.html are still being written, unless something changes the view first: a
    // conflict (the reports are written again) or a shard's cases that span shards.
    let mut range_cases = range_cases;
    let early = if conflicts.is_empty() && data.crossing.is_empty() && !opts.dry_run {
        writing.view().await
    } else {
        None
    };
    let mut recorded = None;
    if let Some(view) = early {
        let cases = record_cases(
            &mut tx,
            job,
            (run_id, &now),
            (&data, &view),
            &[],
            range_cases.as_deref_mut(),
        );
        recorded = Some(Box::pin(cases).await?);
    }
    let (write_ms, view, reports_ms) = writing.finish().await?;
    let data = Arc::try_unwrap(data)
        .map_err(|_| fail(Failure::Output, "results writer still holds the rows"))?;
    let mut day = Results {
        data,
        summary,
        view,
    };
    let mut held = Vec::new();
    if recorded.is_none() {
        if !conflicts.is_empty() {
            day.show_conflicts(conflicts, job, &writing.folder, &marks)?;
        }
        // A shard leaves the cases that span shards (a line named across partitions) to the
        // gather, which sees every shard's rows and groups them as one process does.
        let all_cases = (!day.data.crossing.is_empty()).then(|| day.view.cases.clone());
        held = crate::run::handover::take_crossing_cases(&mut day.view, &day.data.crossing);
        if !opts.dry_run {
            let cases = record_cases(
                &mut tx,
                job,
                (run_id, &now),
                (&day.data, &day.view),
                &held,
                range_cases,
            );
            recorded = Some(Box::pin(cases).await?);
        }
        if let Some(all) = all_cases {
            day.view.cases = all;
        }
    }
    if let Some((markers, cases_ms)) = recorded {
        if let Some(markers) = markers {
            day.view.marks.markers = markers;
        }
        day.summary.timings_ms.insert("cases".into(), cases_ms);
    }
    day.summary.timings_ms.insert("write".into(), write_ms);
    day.summary.timings_ms.insert("reports".into(), reports_ms);
    day.view.complete_summary(&mut day.summary);
    day.view.summary = day.summary.clone();
    day.view.committed = !opts.dry_run;
    day.write_summary(job, &writing.folder, &held)?;
    if part.hands_over() {
        // What the gather will read, sealed in the commit of what it stands for.
        crate::run::handover::seal_in(&mut tx, run_id, &writing.folder.tmp_dir).await?;
    }
    if !opts.dry_run {
        crate::fault::point("before_commit");
        // The last safe point: from here on the commit is not interrupted.
        stop::check(stop::BEFORE_COMMIT)?;
        let started = Instant::now();
        tx.commit().await?;
        tracing::debug!(
            run_id,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Committed."
        );
        crate::fault::point("after_commit");
    } else {
        tx.rollback().await?;
    }
    Ok(Committed { day, now })
}

impl Results {
    /// Rare: someone moved payments between load and write. Says so in the results and the
    /// reports (written again).
    fn show_conflicts(
        &mut self,
        conflicts: Vec<crate::run::effects::Conflict>,
        job: Job<'_>,
        folder: &Folder,
        marks: &crate::report::cases::Marks,
    ) -> Result<()> {
        let data = &mut self.data;
        for c in conflicts {
            let row = &mut data.rows[c.row];
            row.action = Action::Conflict(c.wanted);
            if let Some((outcome, detail)) = c.ticket {
                row.outcome = outcome;
                row.detail = detail.into();
            }
        }
        data.totals = summary::outcome_totals(&data.rows, &data.payments, &data.lines);
        self.summary.outcomes = summary::outcome_stats(&data.totals);
        write_results(&folder.tmp_dir, data)
            .map_err(|e| folder.err("results.csv", &format!("{e:#}")))?;
        self.view = report_files(
            job.part,
            &folder.tmp_dir,
            &self.summary,
            data,
            job.as_of,
            marks,
        )
        .map_err(|e| folder.err("writing reports", &format!("{e:#}")))?;
        Ok(())
    }

    /// Writes summary.json into the folder, and a shard's shard.json (what the gather reads).
    fn write_summary(
        &self,
        job: Job<'_>,
        folder: &Folder,
        held: &[crate::report::cases::Case],
    ) -> Result<()> {
        let data = &self.data;
        if let Part::Shard(shard, group) = job.part {
            let partitions = job
                .cfg
                .partition
                .as_ref()
                .map(|p| p.values_of(shard).into_iter().map(str::to_string).collect())
                .unwrap_or_default();
            crate::run::handover::ShardRecord::of(
                group,
                shard,
                partitions,
                &self.view,
                &data.handed,
            )
            .with_crossing(&data.crossing, held, &data.payments)
            .write(&folder.tmp_dir)
            .map_err(|e| folder.err("shard.json", &format!("{e:#}")))?;
        }
        let json = serde_json::to_string_pretty(&self.summary).context("summary.json")?;
        std::fs::write(folder.tmp_dir.join("summary.json"), json + "\n")
            .map_err(|e| folder.err("summary.json", &e))?;
        Ok(())
    }
}

/// The day published: its folder in place, its run record COMPLETED.
struct Published {
    day: Results,
    out_dir: PathBuf,
}

/// Publishes the committed day: `folder` renamed into place, then the run record marked
/// COMPLETED.
async fn publish(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    committed: Committed,
    folder: Folder,
) -> Result<Published> {
    let Committed { day, now } = committed;
    folder.rename_into_place()?;
    if !opts.dry_run {
        // Completed only once the results are in place: a run killed before this line is
        // shown as interrupted by the next run (its effects, if committed, are re-found as
        // already applied).
        let counts: BTreeMap<&str, usize> = day
            .summary
            .outcomes
            .iter()
            .map(|(k, v)| (k.as_str(), v.count))
            .collect();
        let mut tx = job.db.begin().await?;
        tx.complete_run(
            run_id,
            &serde_json::to_string(&day.summary.inputs)?,
            &serde_json::to_string(&counts)?,
            &now,
        )
        .await?;
        tx.commit().await?;
    }
    Ok(Published {
        day,
        out_dir: folder.out_dir,
    })
}

impl Published {
    /// What the day's run reports to its driver: the run, each item's outcome (a range's day
    /// only) and the report view.
    fn report(self, part: Part<'_>, run_id: &str) -> (RunReport, FinalOutcomes, ReportView) {
        let Results {
            data,
            summary,
            view,
        } = self.day;
        // Only a range needs each item's outcome (its summary); a million cloned ids cost
        // ~100 MB.
        let finals = if let Part::RangeDay(_) = part {
            final_outcomes(&data)
        } else {
            FinalOutcomes::new()
        };
        free_in_background(data);
        let report = RunReport {
            run_id: run_id.to_string(),
            out_dir: self.out_dir,
            summary,
            range: None,
            alert: Alert::disabled(),
        };
        (report, finals, view)
    }
}

/// What recording a day's cases found: the markers of what changed about each case since the
/// last morning (None for a shard: its gather finds them for the whole night), and the time it
/// took (ms).
type Recorded = (Option<crate::report::markers::CaseMarkers>, u64);

/// The run's cases, in its transaction: what decisions are checked against. `held`: the cases
/// a shard leaves to the gather.
async fn record_cases(
    tx: &mut crate::store::Tx,
    job: Job<'_>,
    (run_id, now): (&str, &str),
    (data, view): (&RunData, &ReportView),
    held: &[crate::report::cases::Case],
    range_cases: Option<&mut RangeCases>,
) -> Result<Recorded> {
    let as_of = job.as_of;
    let started = Instant::now();
    // The view a case's evidence is of: the run's as-of (a run as of an earlier moment saw
    // less; of the same moment, the later run's word stands).
    let seen = format!("{as_of:020}");
    let mut judged = crate::decisions::record::Judged::of_rows(
        tx,
        (run_id, &seen),
        &data.rows,
        &data.payments,
        &data.lines,
    )
    .await?;
    judged.held_elsewhere = held.iter().map(|c| c.key.to_string()).collect();
    // A range's days are one run: the cases none of its days holds any more are closed by its
    // last day, on what all of them judged and stored.
    let judged = match range_cases {
        Some(rc) => {
            judged
                .held_elsewhere
                .extend(view.cases.iter().map(|c| c.key.to_string()));
            rc.judged.extend(judged);
            rc.days_left = rc.days_left.saturating_sub(1);
            (rc.days_left == 0).then(|| std::mem::take(&mut rc.judged))
        }
        None => Some(judged),
    };
    let seen = (run_id, seen.as_str());
    crate::decisions::record(tx, view, &data.payments, judged.as_ref(), seen, now).await?;
    // What changed about each case since the last morning, for the email (a shard's gather
    // finds them for the whole night).
    let markers = if job.part.hands_over() {
        None
    } else {
        let now = Utc::now().timestamp_micros();
        Some(crate::decisions::markers(tx, view, &[run_id.to_string()], now).await?)
    };
    Ok((markers, started.elapsed().as_millis() as u64))
}

/// The view of a run's rows without writing the report files (a shard's: the gather writes
/// the night's).
fn view_only(
    (summary, keep): (&summary::Summary, Option<usize>),
    data: &RunData,
    as_of: crate::timeparse::Micros,
    marks: &crate::report::cases::Marks,
) -> ReportView {
    let mut view = ReportView::build(
        summary,
        &data.totals,
        &data.rows,
        &data.payments,
        &data.lines,
        as_of,
        keep,
    );
    view.marks = marks.clone();
    view
}

/// Writes `results.csv` and the reports' `diff.csv` (its listed rows) into `dir`.
fn write_results(dir: &std::path::Path, data: &RunData) -> Result<()> {
    super::folder::write_results(dir, &data.rows, &data.payments, &data.lines)
}

/// The task in `slot`, which is there until it is awaited once.
fn take<T>(slot: &mut Option<tokio::task::JoinHandle<T>>) -> Result<tokio::task::JoinHandle<T>> {
    slot.take()
        .ok_or_else(|| anyhow::anyhow!("a writer task was awaited twice (a bug)"))
}

/// An item's outcome on one day: key (payment id or `line:<source>:<uid>`) → (outcome, amount,
/// currency).
pub(super) type FinalOutcomes = BTreeMap<String, (Outcome, i64, &'static str)>;

/// Each reported item's outcome, for a range's final counts.
pub(super) fn final_outcomes(data: &RunData) -> FinalOutcomes {
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
                        format!("line:{}:{}", l.source(), l.uid()),
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
