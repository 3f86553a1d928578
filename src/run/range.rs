//! A range run (`--from … --to …`): day by day, each day committed on its own, then one
//! `summary.json`, one report and one alert for the whole range.

use super::day::{FinalOutcomes, RangeCases, run_day};
use super::{Job, Part, ReadInRange, RunReport};
use crate::exit::{Failure, fail};
use crate::outcome::Outcome;
use crate::outputs::summary;
use crate::report::outbox::{self, Alert};
use crate::report::{self as reports, ReportView};
use crate::run::data::RunOptions;
use crate::timeparse;
use anyhow::{Context as _, Result};
use std::collections::BTreeMap;

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
    /// The range's review rows (each item once) grouped into cases.
    pub cases: summary::CaseCounts,
    /// Every distinct warning of the days.
    pub warnings: Vec<String>,
    /// Every distinct statement file of the days that could not be read (see
    /// [`crate::outputs::summary::Summary::unreadable_inputs`]).
    pub unreadable_inputs: Vec<crate::sources::Unreadable>,
    /// What the range's pass over the decisions inbox did (see
    /// [`crate::outputs::summary::Summary::inbox`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbox: Option<summary::InboxSummary>,
    /// The money at risk in the reporting currency, at the last day's rates (see
    /// [`crate::outputs::summary::Summary::reporting`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporting: Option<summary::ReportingSummary>,
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
        summary::write_unreadable(&mut s, &self.unreadable_inputs);
        summary::write_inbox(&mut s, self.inbox.as_ref());
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

/// A range runs day by day, exactly as the nightly runs would have (each day sees the
/// follow-ups the previous day left), each day committed on its own, into
/// `<output_dir>/<run id>/<YYYY-MM-DD>/`, with one `summary.json` for the range written last.
pub(super) async fn run_range(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    mut alert: Alert,
    lock: crate::db::RunLock,
) -> Result<RunReport> {
    let Job { cfg, as_of, .. } = job;
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
    let mut cases = RangeCases {
        days_left: (opts.to - opts.from).num_days().max(0) as usize + 1,
        ..Default::default()
    };
    while day <= opts.to {
        let day_id = format!("{run_id}-{}", day.format("%Y%m%d"));
        let (report, outcomes, view) = run_day(
            Job {
                part: Part::RangeDay(&dir),
                ..job
            },
            opts,
            day,
            &day_id,
            &mut read,
            Some(&mut cases),
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
        range.transitions.add(&s.transitions);
        range.tickets.add(&s.tickets);
        summary::add_distinct_warnings(&mut range.warnings, &s.warnings);
        for f in &s.unreadable_inputs {
            if !range.unreadable_inputs.contains(f) {
                range.unreadable_inputs.push(f.clone());
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
    let mut view = range_view(views, &range, totals, &finals, &reports);
    let mut whole = view.summary.clone();
    view.complete_summary(&mut whole);
    range.cases = whole.cases.clone();
    range.reporting = whole.reporting.clone();
    summary::add_distinct_warnings(&mut range.warnings, &whole.warnings);
    view.summary = whole;
    // The decisions inbox was applied once, before the first day, under the range's run id.
    range.inbox = crate::decisions::inbox::recorded(job.db, run_id).await;
    view.summary.inbox = range.inbox.clone();
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
    summary.unreadable_inputs = range.unreadable_inputs.clone();
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
