//! The plan of one day: statements and ledger loaded, the passes matched, every item
//! classified; no effect yet. A run applies it; `recon explain` only reads it.
//!
//! [`plan`] is a line of stages, each taking what the one before handed over: [`Evidence`]
//! (what was read: the ledger, the statement lines, the reviewers' confirmations, the late
//! files) → [`Matched`] (what the passes found, over the older payments the lines name too) →
//! [`Scoped`] (which payments the night reports or watches; the shared sources' batches) → the
//! provider's status answers → [`Classified`] (the rows) → [`Plan`] (with the summary).

use super::{Job, ReadInRange};
use crate::db::Db;
use crate::decisions::confirmed::Overlaid;
use crate::ledger::Status;
use crate::ledger::load::{LoadRange, LoadedLedger};
use crate::matching::{self, MatchResult};
use crate::outcome::{self, Context};
use crate::outputs::summary::{self, Summary};
use crate::run::data::{RunData, RunOptions};
use crate::sources::{self, StatementLine};
use crate::timeparse::{self, DAY, HOUR, MINUTE, Micros};
use anyhow::{Context as _, Result};
use std::collections::{BTreeMap, HashMap, HashSet};

use super::foreign::Foreign;
pub(crate) use super::load::{load_statements, statement_days};
use std::sync::Arc;
use std::time::Instant;

/// Everything classification produced, before any effect.
pub(crate) struct Plan {
    pub(crate) data: RunData,
    /// What the passes found (kept for `recon explain`).
    pub(crate) matched: matching::MatchResult,
    pub(super) summary: Summary,
    pub(super) rejected: Vec<sources::Rejected>,
    /// Start of the first day of the range (UTC micros).
    pub(super) t0: Micros,
}

impl Plan {
    /// The statement files the plan read.
    pub(crate) fn summary_inputs(&self) -> Vec<sources::InputFile> {
        self.summary.inputs.clone()
    }
}

/// Plans the days of `opts` (one, in a run): reads, matches, scopes and classifies; changes
/// nothing (status answers asked are recorded, unless a dry run).
pub(crate) async fn plan(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    read: &mut ReadInRange,
) -> Result<Plan> {
    let span = Span::of(job, opts);
    let evidence = Box::pin(read_evidence(job, &span, run_id, read)).await?;
    let matched = Box::pin(match_night(job, &span, evidence)).await?;
    let mut scoped = scope(job, &span, matched)?;
    let status = Box::pin(ask_status(job, opts, run_id, &span, &mut scoped)).await?;
    let classified = Box::pin(classify(job, &span, scoped, status)).await?;
    Ok(summarize(job, opts, run_id, &span, classified))
}

/// The night's days and how far its evidence reaches around them.
struct Span {
    /// The first day.
    from: chrono::NaiveDate,
    /// The first day as the database records it (`YYYY-MM-DD`).
    from_day: String,
    /// Start of the first day (UTC micros).
    t0: Micros,
    /// Start of the day after the last.
    t1: Micros,
    /// The rules' evidence window: how long before a payment's start its lines may be
    /// booked ...
    before: Micros,
    /// ... and how long after.
    after: Micros,
    /// How long an unresolved payment is carried into later nights (`carry_over_days`).
    carry: Micros,
    /// How old a SUBMITTING payment is stale (`stale_submitting_minutes`).
    stale_after: Micros,
    /// How long after its window a payout may still arrive (`settlement_lag_hours`).
    lag: Micros,
}

impl Span {
    fn of(job: Job<'_>, opts: &RunOptions) -> Span {
        let (cfg, tz) = (job.cfg, job.cfg.timezone);
        let (before, after) = job.rules.evidence_window();
        Span {
            from: opts.from,
            from_day: opts.from.to_string(),
            t0: timeparse::day_start(opts.from, tz),
            t1: timeparse::day_start(opts.to.succ_opt().unwrap_or(opts.to), tz),
            before,
            after,
            carry: cfg.carry_over_days * DAY,
            stale_after: cfg.stale_submitting_minutes * MINUTE,
            lag: cfg.settlement_lag_hours * HOUR,
        }
    }

    /// The starts a night loads its ledger for: its days widened by the carry-over, the
    /// evidence window and a day each side.
    fn ledger_range(&self) -> (Micros, Micros) {
        (
            self.t0 - self.carry - self.before - self.after - DAY,
            self.t1 + self.before + self.after + DAY,
        )
    }
}

/// The payments every shard of night `opts` loads together, with their partitions: the
/// night's ledger window, every partition (what `recon plan-shards` counts).
pub(crate) async fn night_ledger(job: Job<'_>, opts: &RunOptions) -> Result<LoadedLedger> {
    let span = Span::of(job, opts);
    let partition = job.cfg.partition.as_ref().map(|p| p.select(None));
    let range = span.ledger_range();
    load_ledger(job, &span, &partition, range, "loading the ledger").await
}

/// What the night read before matching: the ledger, the statement lines (its own, then in a
/// shard the other partitions' that name its payments), and which of them it reports.
struct Evidence {
    /// The ledger's payments that started in `ledger_range` (then also those lines name).
    ledger: LoadedLedger,
    /// The range of starts the ledger was loaded for.
    ledger_range: (Micros, Micros),
    /// The partitions the night loads (None: a job without `[partition]`).
    partition: Option<crate::partition::Select>,
    lines: Vec<StatementLine>,
    /// What the statement files said besides their lines.
    statements: Statements,
    /// Per line: whether the night reports it ([`report_lines`]).
    report_line: Vec<bool>,
    /// The files no run of an earlier day read (their earlier lines are reported tonight).
    late_files: LateFiles,
    /// The lines reviewers confirmed as a payment's.
    confirmed: Overlaid,
    /// A shard: the other partitions' lines, and which payments are not its own to report.
    foreign: Foreign,
    /// The bank's payout status records (`[[payout_status]]`).
    payouts: crate::payout_status::Night,
    /// How long each step took (ms), for summary.json.
    timings: BTreeMap<String, u64>,
}

/// What the statement files said besides their lines.
#[derive(Default)]
struct Statements {
    /// Per configured source: the intervals it covers completely.
    coverage: Vec<Vec<(Micros, Micros)>>,
    inputs: Vec<sources::InputFile>,
    rejected: Vec<sources::Rejected>,
    warnings: Vec<String>,
    gates: Vec<sources::Gate>,
    unreadable: Vec<sources::Unreadable>,
}

impl Statements {
    /// The lines of `loads` (one per configured source of `cfg`) known by `as_of`, and what
    /// else the files said.
    fn absorb(
        loads: Vec<sources::SourceLoad>,
        cfg: &crate::config::Config,
        as_of: Micros,
    ) -> (Vec<StatementLine>, Statements) {
        let mut lines: Vec<StatementLine> = Vec::new();
        let mut s = Statements::default();
        for load in loads {
            s.gates.extend(load.gates);
            s.unreadable.extend(load.unreadable);
            sources::absorb(&mut lines, load.lines);
            s.coverage.push(load.coverage);
            s.inputs.extend(load.files);
            s.warnings.extend(load.warnings);
            s.rejected.extend(load.rejected);
        }
        if cfg.sources.is_empty() {
            s.warnings
                .push("no statement source configured: no payment can be resolved".into());
        }
        // Lines booked after the cut-off are not yet known at that time.
        let known_lines = lines.len();
        lines.retain(|l| l.booked_at <= as_of);
        if lines.len() < known_lines {
            s.warnings.push(format!(
                "{} statement line(s) booked after the as-of time were ignored",
                known_lines - lines.len()
            ));
        }
        (lines, s)
    }

    /// Each source's complete coverage, by source name.
    fn coverage_by_name<'a>(
        &'a self,
        cfg: &'a crate::config::Config,
    ) -> HashMap<&'a str, &'a [(Micros, Micros)]> {
        cfg.sources
            .iter()
            .zip(&self.coverage)
            .map(|(s, c)| (s.name.as_str(), c.as_slice()))
            .collect()
    }
}

/// The statements and the ledger as first loaded, at the same time.
struct Loaded {
    ledger: LoadedLedger,
    /// The range of starts the ledger was loaded for.
    ledger_range: (Micros, Micros),
    /// One per configured source.
    loads: Vec<sources::SourceLoad>,
    /// How long reading them took (ms).
    statements_ms: u64,
    /// A shard: the other partitions' sources being read, and the days they are read over.
    foreign_load: Option<super::load::Loading>,
    foreign_days: (chrono::NaiveDate, chrono::NaiveDate),
}

/// Reads the night's evidence: statements and ledger (see [`load_statements_and_ledger`]),
/// the reviewers' confirmations, a shard's lines of other partitions, the ledger again over
/// the lines' wider range if they need it, and which files are late.
async fn read_evidence(
    job: Job<'_>,
    span: &Span,
    run_id: &str,
    read: &mut ReadInRange,
) -> Result<Evidence> {
    let Job {
        cfg,
        rules,
        db,
        as_of,
        part,
        ..
    } = job;
    let partition = cfg.partition.as_ref().map(|p| p.select(part.shard()));
    let mut timings = BTreeMap::new();
    let started = Instant::now();
    let Loaded {
        mut ledger,
        ledger_range: (lo0, hi0),
        loads,
        statements_ms,
        foreign_load,
        foreign_days,
    } = Box::pin(load_statements_and_ledger(job, span, &partition)).await?;
    let (mut lines, mut statements) = Statements::absorb(loads, cfg, as_of);
    let mut payouts = read_payouts(cfg, as_of, &mut statements).await?;
    // Lines reviewers confirmed as a payment's name that payment (`confirm N`), unless the
    // provider's reference now says otherwise (contested: a case naming both).
    let mut confirmed = Box::pin(crate::decisions::confirmed::overlay(
        db, &mut lines, job.rewind,
    ))
    .await?;
    let foreign_loads = match foreign_load {
        Some(h) => Some(
            h.await
                .context("statement loading task (other partitions)")??,
        ),
        None => None,
    };
    let mut foreign = Foreign::new(cfg, rules, part.shard(), foreign_loads, foreign_days, as_of);
    Box::pin(foreign.overlay(db, &mut confirmed)).await?;
    if let Some(ms) = foreign.load_ms {
        timings.insert("load_other_partitions".to_string(), ms);
    }
    for w in &statements.warnings {
        tracing::warn!(run_id, warning = %w, "Completeness warning.");
    }
    timings.insert("load_statements".to_string(), statements_ms);
    // Every payment any loaded line could belong to must be a candidate (in a shard: any line
    // of the night, as in one process).
    let (t0, t1) = (span.t0, span.t1);
    let (min_b, max_b) = foreign.booked_span(&lines).unwrap_or((t0, t1));
    let (need_lo, need_hi) = (
        (t0 - span.carry).min(min_b - span.after),
        t1.max(max_b + span.before + 1),
    );
    let mut ledger_range = (lo0, hi0);
    if need_lo < lo0 || need_hi > hi0 {
        ledger_range = (need_lo.min(lo0), need_hi.max(hi0));
        let what = "loading the ledger (the statement lines' wider range)";
        ledger = load_ledger(job, span, &partition, ledger_range, what).await?;
    }
    timings.insert(
        "load_ledger_and_statements".to_string(),
        started.elapsed().as_millis() as u64,
    );
    // A shard: the other partitions' lines that name one of its payments join the night,
    // after its own.
    foreign.set_own_lines(lines.len());
    foreign.take_named(&mut lines, rules, &ledger);

    // Lines this run reports: booked in its days, or booked before them in a file that no
    // run of an earlier day read (a late delivery surfaces in the first run that has it).
    let all_inputs: std::borrow::Cow<'_, [sources::InputFile]> = if foreign.is_empty() {
        std::borrow::Cow::Borrowed(&statements.inputs)
    } else {
        let all = statements.inputs.iter().chain(&foreign.inputs);
        std::borrow::Cow::Owned(all.cloned().collect())
    };
    let late_files = late_files(db, &all_inputs, &span.from_day, read).await?;
    drop(all_inputs);
    payouts.mark_reported((t0, t1), |source, path| late_files.contains(source, path));
    let report_line = report_lines(&lines, (t0, t1), &late_files);
    Ok(Evidence {
        ledger,
        ledger_range,
        partition,
        lines,
        statements,
        report_line,
        late_files,
        confirmed,
        foreign,
        payouts,
        timings,
    })
}

/// Reads the bank's payout status files (`[[payout_status]]`) on a blocking thread; their
/// files are inputs of the night like statement files (a late one is reported by the first
/// night that reads it), an unreadable one is named as a statement file is.
async fn read_payouts(
    cfg: &crate::config::Config,
    as_of: Micros,
    statements: &mut Statements,
) -> Result<crate::payout_status::Night> {
    if cfg.payout_status.is_empty() {
        return Ok(crate::payout_status::Night::default());
    }
    let blocks = cfg.payout_status.clone();
    let night =
        tokio::task::spawn_blocking(move || crate::payout_status::Night::read(&blocks, as_of))
            .await
            .context("payout status reading task")?;
    statements.inputs.extend(night.inputs.iter().cloned());
    statements
        .unreadable
        .extend(night.unreadable.iter().cloned());
    statements.warnings.extend(night.warnings.iter().cloned());
    Ok(night)
}

/// Loads the statements (on a blocking thread) and the ledger (here) at the same time. The
/// ledger range is the scope plus every window that reaches into it, with a day to spare;
/// lines outside it (a wide fixed file) widen it with a second load afterwards
/// ([`read_evidence`]).
async fn load_statements_and_ledger(
    job: Job<'_>,
    span: &Span,
    partition: &Option<crate::partition::Select>,
) -> Result<Loaded> {
    let Job {
        cfg, rules, as_of, ..
    } = job;
    let Span {
        t0,
        t1,
        before,
        carry,
        ..
    } = *span;
    let (first_day, last_day) = statement_days(cfg, rules, (t0, t1));
    let statements = load_statements(cfg, (first_day, last_day), as_of);
    // A shard also reads the other partitions' sources, for the lines naming its payments.
    let mut foreign_load = super::foreign::load(cfg, (first_day, last_day), as_of);
    let mut first_foreign_day = first_day;
    let (lo0, hi0) = span.ledger_range();
    let ledger = load_ledger(job, span, partition, (lo0, hi0), "loading the ledger").await;
    let (mut loads, mut statements_ms) = statements.await.context("statement loading task")??;
    let ledger = ledger?;
    // "No line → FAILED / MISSING" needs the absence of evidence over every attempt that could
    // have paid: a retried payment of the run's days whose first attempt started before the
    // statements' range has those days loaded too (its lines are near misses, and every
    // source must cover them before the absence decides anything).
    let earliest_day = ledger
        .payments
        .iter()
        .filter(|p| {
            let a = p.anchor();
            // A FAILED or PENDING payment is never resolved by the absence of a line.
            a >= t0 - carry
                && a < t1
                && p.has_earlier_attempt()
                && !matches!(p.status, Status::Failed | Status::Pending)
        })
        .filter_map(|p| p.absence_from())
        .min()
        .map(|first| timeparse::local_date(first - before, cfg.timezone));
    if let Some(day) = earliest_day.filter(|d| *d < first_day) {
        let (mut more, ms) = load_statements(cfg, (day, last_day), as_of)
            .await
            .context("statement loading task (earlier attempts' windows)")??;
        tracing::debug!(from = %day, "Statements loaded from a retried payment's first attempt.");
        // A shared source is no payment's evidence: it keeps the night's days, which the
        // gather of a sharded night (that has no ledger) reads too.
        for ((new, old), src) in more.iter_mut().zip(&mut loads).zip(&cfg.sources) {
            if crate::run::shared::is_shared(cfg, src) {
                std::mem::swap(new, old);
            }
        }
        loads = more;
        statements_ms += ms;
        if foreign_load.is_some() {
            foreign_load = super::foreign::load(cfg, (day, last_day), as_of);
            first_foreign_day = day;
        }
    }
    Ok(Loaded {
        ledger,
        ledger_range: (lo0, hi0),
        loads,
        statements_ms,
        foreign_load,
        foreign_days: (first_foreign_day, last_day),
    })
}

/// The ledger's payments that started in `[lo, hi)` (`what` says what a timeout interrupted).
async fn load_ledger(
    job: Job<'_>,
    span: &Span,
    partition: &Option<crate::partition::Select>,
    (lo, hi): (Micros, Micros),
    what: &str,
) -> Result<LoadedLedger> {
    let range = LoadRange {
        lo,
        hi,
        attempts_lo: lo - span.carry,
        from_day: span.from_day.clone(),
        partition: partition.clone(),
        rewind: job.rewind,
    };
    let load = crate::ledger::load::load(job.db, &job.cfg.ledger, &range);
    let mut ledger = job.db.bounded_any(what, load).await?;
    if let Some(t) = job.rewind {
        ledger.keep_created_by(t);
    }
    Ok(ledger)
}

/// The evidence matched: what the passes found, over the older payments its lines name too.
struct Matched {
    /// The evidence, its ledger with the payments the lookup found.
    ev: Evidence,
    m: MatchResult,
    /// Per payment: loaded only because a line names it (empty: none).
    named_only: Vec<bool>,
    /// Per payment: the row start of the ones the lookup found (empty: none).
    found_starts: Vec<Option<Micros>>,
    /// How many lines are the night's own (a shard's lines of other partitions follow them).
    own_lines: usize,
    /// Every (line, payment) pair of a contested confirmation.
    contested: Vec<(u32, u32)>,
    /// Line → (payment id, difference) a reviewer accepted with `accept difference`.
    accepted: HashMap<u32, (String, i64)>,
}

/// Per line, what the passes need to know besides the line: whether its reference has the
/// shape of our ids, and whether a reviewer confirmed it (each empty: none).
struct LineMarks {
    own_reference: Vec<bool>,
    confirmed: Vec<bool>,
}

impl LineMarks {
    fn of(
        shapes: &matching::shape::Shapes,
        rules: &crate::rules::RuleSet,
        lines: &[StatementLine],
        confirmed: &mut Overlaid,
    ) -> LineMarks {
        let own_reference = shapes.lines(rules, lines);
        confirmed.place(lines);
        let mut read: Vec<u32> = confirmed.applied.keys().copied().collect();
        read.sort_unstable();
        LineMarks {
            own_reference,
            confirmed: per_line(&read, lines.len()),
        }
    }

    /// Marks the lines from `n` on, which joined the night after the first match.
    fn extend(
        &mut self,
        shapes: &matching::shape::Shapes,
        rules: &crate::rules::RuleSet,
        (lines, n): (&[StatementLine], usize),
        confirmed: &mut Overlaid,
    ) {
        if !self.own_reference.is_empty() {
            self.own_reference.extend(shapes.lines(rules, &lines[n..]));
        }
        confirmed.place(lines);
        if !self.confirmed.is_empty() {
            self.confirmed.resize(lines.len(), false);
        }
        for &l in confirmed.applied.keys().filter(|&&l| l as usize >= n) {
            if self.confirmed.is_empty() {
                self.confirmed = vec![false; lines.len()];
            }
            self.confirmed[l as usize] = true;
        }
    }
}

/// Matches the evidence; then a line no loaded payment claims by identifier may name an older
/// one: looked up in the whole ledger, and matched again with what was found. (A shard looks
/// in every partition: a line of its own may name another partition's payment, and a foreign
/// line it took may name one besides its own.) Closes the settlement batches whose payout can
/// no longer arrive.
async fn match_night(job: Job<'_>, span: &Span, mut ev: Evidence) -> Result<Matched> {
    let Job {
        cfg, rules, as_of, ..
    } = job;
    let started = Instant::now();
    // The shape of our ids in a reference: lines of that shape are evidence only for the
    // payment they name (DESIGN.md rule 12).
    let pattern = cfg.reference_pattern.as_ref();
    let shape = matching::shape::IdShape::for_run(pattern, &ev.ledger.payments);
    let partitioned = cfg.partition.is_some();
    let shapes =
        matching::shape::Shapes::for_run(pattern, &ev.ledger.payments, partitioned, &shape);
    let mut marks = LineMarks::of(&shapes, rules, &ev.lines, &mut ev.confirmed);
    let m = match_blocking(job, span, &mut ev, &marks).await?;
    let found = Box::pin(look_up_named(job, &ev, &m, &shape)).await?;
    let (mut m, named_only, found_starts) = if found.is_empty() {
        ev.foreign.drop_waiting();
        (m, Vec::new(), Vec::new())
    } else {
        drop(m);
        Box::pin(match_found(
            job,
            span,
            &mut ev,
            found,
            (&shapes, &mut marks),
        ))
        .await?
    };
    drop(marks);
    let own_lines = ev.foreign.own_lines(ev.lines.len());
    if let Some(s) = super::foreign::own_settlement(&ev.lines, own_lines, rules)? {
        m.settlement = s;
    }
    let contested = super::claims::contested_pairs(&ev.confirmed, &ev.ledger.payments, &mut m);
    // Pairs a reviewer settled with `accept difference`: matched while the difference holds.
    let accepted: HashMap<u32, (String, i64)> = ev
        .confirmed
        .applied
        .iter()
        .filter_map(|(&l, c)| {
            c.accepted_difference_minor
                .map(|d| (l, (c.payment_id.clone(), d)))
        })
        .collect();
    let coverage = ev.statements.coverage_by_name(cfg);
    crate::matching::settlement::close_unpaid(
        &mut m.settlement,
        &rules.settlements,
        as_of,
        span.lag,
        |name| coverage.get(name).copied(),
    );
    drop(coverage);
    ev.timings
        .insert("match".to_string(), started.elapsed().as_millis() as u64);
    Ok(Matched {
        ev,
        m,
        named_only,
        found_starts,
        own_lines,
        contested,
        accepted,
    })
}

/// The payments older than the evidence's ledger range that its lines name (and a contested
/// line's confirmed payment), looked up in the whole ledger; in a shard, also those of the
/// partitions other shards reconcile.
async fn look_up_named(
    job: Job<'_>,
    ev: &Evidence,
    m: &MatchResult,
    shape: &matching::shape::IdShape,
) -> Result<crate::ledger::lookup::Found> {
    let Job { cfg, rules, db, .. } = job;
    let mut keys = matching::shape::lookup_keys(&ev.lines, m, rules, shape);
    // A payout status record the night reports names its payment however old (a return).
    ev.payouts.lookup_keys(&mut keys);
    // A contested line's confirmed payment is a candidate of it, wherever its day is.
    keys.payment_ids.extend(
        ev.confirmed
            .contested
            .iter()
            .map(|(_, c)| c.payment_id.clone()),
    );
    let every_partition = ev.partition.as_ref().map(|s| crate::partition::Select {
        filter: None,
        ..s.clone()
    });
    let found = db
        .bounded_any(
            "looking up the payments statement lines name",
            crate::ledger::lookup::named(
                db,
                &cfg.ledger,
                every_partition.as_ref(),
                &keys,
                |id| crate::ledger::lookup::position(&ev.ledger.payments, id).is_some(),
                job.rewind,
            ),
        )
        .await?;
    other_shards_named(
        db,
        cfg,
        ev.partition.as_ref(),
        ev.foreign
            .other_shard_keys(&ev.lines, m, &ev.ledger, rules, shape),
        &ev.ledger,
        ev.ledger_range,
        found,
    )
    .await
}

/// Merges the payments the lookup `found` into the evidence's ledger, takes the other
/// partitions' lines that name one of them, and matches again: what the passes found, and
/// per payment whether it was loaded only because a line names it, and its row start.
async fn match_found(
    job: Job<'_>,
    span: &Span,
    ev: &mut Evidence,
    found: crate::ledger::lookup::Found,
    (shapes, marks): (&matching::shape::Shapes, &mut LineMarks),
) -> Result<(MatchResult, Vec<bool>, Vec<Option<Micros>>)> {
    let Job { rules, db, .. } = job;
    let row_starts = found.row_starts.clone();
    let named_only = crate::ledger::lookup::merge(&mut ev.ledger, found);
    let found_starts = super::foreign::found_starts(&named_only, &row_starts);
    // The other partitions' lines that name a payment found here join the night too.
    let n = ev.lines.len();
    let taken = ev
        .foreign
        .take_named_again(
            &mut ev.lines,
            rules,
            &ev.ledger,
            |i| named_only[i],
            (db, &mut ev.confirmed),
        )
        .await?;
    if taken > 0 {
        let more = report_lines(&ev.lines[n..], (span.t0, span.t1), &ev.late_files);
        ev.report_line.extend(more);
        marks.extend(shapes, rules, (&ev.lines, n), &mut ev.confirmed);
    }
    ev.foreign.drop_waiting();
    let m = match_blocking(job, span, ev, marks).await?;
    Ok((m, named_only, found_starts))
}

/// Which payments the night reports and which it watches, with what the passes found, and
/// the shared sources' settlement batches.
struct Scoped {
    ev: Evidence,
    m: MatchResult,
    /// Per payment: loaded only because a line names it (empty: none).
    named_only: Vec<bool>,
    /// How many lines are the night's own.
    own_lines: usize,
    /// Line → (payment id, difference) a reviewer accepted with `accept difference`.
    accepted: HashMap<u32, (String, i64)>,
    /// Per payment: reported tonight.
    in_scope: Vec<bool>,
    /// Per payment: recon's earlier decision re-checked against tonight's evidence.
    watch: Vec<bool>,
    /// A shard: per payment, whether another shard reports it (empty: none).
    elsewhere: Vec<bool>,
    /// The partition of each configured source (empty: a job without `[partition]`).
    source_partitions: Vec<u32>,
    /// The shared rules' batches a shard hands over to the gather.
    handed: crate::run::shared::HandOver,
    /// One process: those batches paired with the shared sources' lines.
    shared: Option<crate::run::shared::Decided>,
}

/// Scopes the matched night: the payments of its days and those carried over, both sides of
/// a contested confirmation, every payment a reported line belongs to, and the watched ones;
/// then hands over or pairs the shared rules' batches.
fn scope(job: Job<'_>, span: &Span, matched: Matched) -> Result<Scoped> {
    let Job {
        cfg, rules, as_of, ..
    } = job;
    let Matched {
        mut ev,
        m,
        named_only,
        found_starts,
        own_lines,
        contested,
        accepted,
    } = matched;
    let payments = &ev.ledger.payments;
    // A shard reports only its own payments (and an old one no other shard reports).
    let elsewhere = ev.foreign.reported_elsewhere(
        payments,
        &found_starts,
        ev.ledger_range,
        &ev.lines,
        &m,
        rules,
    );
    let mut in_scope = in_days(span, payments);
    // An unresolved payment a payout status record of the night names is reported with it,
    // however old (its record is its evidence).
    ev.payouts.bind(&ev.ledger);
    for i in ev.payouts.reported_payments() {
        let p = &payments[i as usize];
        let open = matches!(
            p.current_status,
            Status::Unknown | Status::Submitting | Status::Review
        );
        if open && outcome::unresolved(p, as_of, span.stale_after) {
            in_scope[i as usize] = true;
        }
    }
    // Both sides of a contested confirmation are reported, whatever their day.
    for &(_, p) in &contested {
        in_scope[p as usize] = true;
    }
    // Evidence has no closing hour (DESIGN.md rule 8): a payment that a line this run reports
    // belongs to (or may belong to) is reported with it, whatever its day or status.
    for pair in m
        .links
        .iter()
        .chain(&m.ambiguous)
        .chain(&m.returns)
        .chain(&m.returns_ambiguous)
    {
        if ev.report_line[pair.line as usize] {
            in_scope[pair.payment as usize] = true;
        }
    }
    let mut watch = watched(job, span, payments, &in_scope);
    super::foreign::leave_out(&elsewhere, &mut in_scope, &mut watch);
    let source_partitions: Vec<u32> = match &cfg.partition {
        Some(_) => cfg
            .sources
            .iter()
            .map(|s| match &s.partition {
                Some(v) => crate::partition::id(v),
                None => crate::partition::SHARED,
            })
            .collect(),
        None => Vec::new(),
    };
    // The shared rules' batches: handed to the gather by a shard; paired here by one process,
    // exactly as the gather pairs them.
    let own_links = super::foreign::own_links(&m.links, own_lines);
    let (handed, shared) = crate::run::shared::in_night(
        &ev.lines[..own_lines],
        &own_links,
        rules,
        &mut ev.report_line[..own_lines],
        !job.part.hands_over(),
        &crate::run::shared::Night {
            as_of,
            lag: span.lag,
            range: (span.t0, span.t1),
            coverage: &ev.statements.coverage_by_name(cfg),
        },
    )?;
    drop(own_links);
    Ok(Scoped {
        ev,
        m,
        named_only,
        own_lines,
        accepted,
        in_scope,
        watch,
        elsewhere,
        source_partitions,
        handed,
        shared,
    })
}

/// Per payment: anchored in the night's days, or carried over from the days before while
/// unresolved or with a follow-up still open on the first day.
fn in_days(span: &Span, payments: &[crate::ledger::Payment]) -> Vec<bool> {
    let (t0, t1) = (span.t0, span.t1);
    payments
        .iter()
        .map(|p| {
            let a = p.anchor();
            if a >= t0 && a < t1 {
                return true;
            }
            a >= t0 - span.carry
                && a < t0
                && (matches!(
                    p.current_status,
                    Status::Unknown | Status::Submitting | Status::Review
                ) || p
                    .followup
                    .as_deref()
                    .is_some_and(|(_, closed)| closed.as_ref().is_none_or(|c| *c >= span.from_day)))
        })
        .collect()
}

/// recon's own decisions of earlier days are re-checked for an evidence horizon (window
/// after the start, plus the settlement lag, plus a day) after the payment's start or after
/// the decision, whichever is later (DESIGN.md rule 8): a later line, status answer or
/// webhook event that contradicts one is judged by the next nightly run, not only by a
/// re-run of that day. Such a payment is reported only when the evidence contradicts the
/// decision. Per payment: whether it is watched (never one `in_scope`).
fn watched(
    job: Job<'_>,
    span: &Span,
    payments: &[crate::ledger::Payment],
    in_scope: &[bool],
) -> Vec<bool> {
    let (as_of, tz, t0) = (job.as_of, job.cfg.timezone, span.t0);
    let reach = span.after + span.lag + DAY;
    payments
        .iter()
        .enumerate()
        .map(|(i, p)| {
            // A reviewer's SUCCEEDED or FAILED: watched as long after their decision (made
            // at the latest when this run started; a run as of an earlier moment counts it
            // from its as-of).
            let human = p
                .human
                .as_deref()
                .is_some_and(|h| h.at.min(as_of).max(p.anchor()) + reach >= t0);
            !in_scope[i]
                && (human
                    || p.recon.as_deref().is_some_and(|c| {
                        let Ok(day) = c.day.parse::<chrono::NaiveDate>() else {
                            return false;
                        };
                        day < span.from
                            && c.as_of.is_none_or(|t| t <= as_of)
                            && p.anchor().max(timeparse::day_start(day, tz)) + reach >= t0
                    }))
        })
        .collect()
}

/// Provider status answers (`[[status_api]]`) for the unresolved payments in scope, and for
/// the watched ones that no statement line links (their decision rested on an answer, or
/// on no line at all): the provider is asked again. None without a status API.
async fn ask_status(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    span: &Span,
    s: &mut Scoped,
) -> Result<Option<crate::status_api::StatusEvidence>> {
    let Job { cfg, db, as_of, .. } = job;
    let Some(api) = &cfg.status_api else {
        return Ok(None);
    };
    if !job.ask_providers {
        return Ok(None);
    }
    let started = Instant::now();
    let (payments, confirmed) = (&s.ev.ledger.payments, &s.ev.confirmed);
    let lookalikes = Box::pin(super::claims::confirmation_lookalikes(
        db, confirmed, payments,
    ))
    .await?;
    let ask: Vec<bool> = if s.watch.iter().any(|&w| w) || !lookalikes.is_empty() {
        let mut linked = vec![false; payments.len()];
        for pair in &s.m.links {
            linked[pair.payment as usize] = true;
        }
        let mut lookalike = vec![false; payments.len()];
        for &i in &lookalikes {
            lookalike[i as usize] = true;
        }
        // A reviewer's decision is asked about whatever links it: a line they
        // confirmed does not make the provider's later word less of a claim.
        (0..payments.len())
            .map(|i| {
                s.in_scope[i]
                    || lookalike[i]
                    || (s.watch[i] && (!linked[i] || payments[i].human.is_some()))
            })
            .collect()
    } else {
        s.in_scope.clone()
    };
    let mut targets = crate::status_api::targets(payments, &ask, as_of, span.stale_after);
    // The look-alikes of a confirmation are asked whatever their status: their
    // payout ids are claims about the confirmed line (one payout, one payment).
    if !lookalikes.is_empty() {
        targets.extend(&lookalikes);
        targets.sort_unstable();
        targets.dedup();
    }
    let ev = Box::pin(crate::status_api::ask_for_run(
        api,
        db,
        run_id,
        payments,
        &targets,
        opts.dry_run,
        (span.after, span.lag, as_of),
        &confirmed
            .applied
            .keys()
            .filter_map(|&l| s.ev.lines[l as usize].provider_txn_id.as_deref())
            .map(str::to_string)
            .collect(),
    ))
    .await?;
    s.ev.statements.warnings.extend(ev.warnings.iter().cloned());
    s.ev.timings.insert(
        "status_api".to_string(),
        started.elapsed().as_millis() as u64,
    );
    Ok(Some(ev))
}

/// The night classified: its rows, and what goes with them to the writers and the commit.
struct Classified {
    ev: Evidence,
    rows: Vec<outcome::ResultRow>,
    matched: MatchResult,
    /// settlement.csv.
    settlement: Vec<crate::outputs::settlement::Row>,
    /// A shard: the keys of the rows whose cases span shards (empty elsewhere).
    crossing: HashSet<String>,
    /// Payment index → the reviewers' confirmations its transition rests on.
    confirmations: HashMap<u32, String>,
    /// Payment index → the provider id a status answer gave it.
    status_provider_ids: HashMap<u32, String>,
    /// The shared rules' batches a shard hands over to the gather.
    handed: crate::run::shared::HandOver,
    /// Per payment: reported tonight (with those a row of tonight's evidence names).
    in_scope: Vec<bool>,
    /// How many lines are the night's own.
    own_lines: usize,
}

/// Classifies every payment and line in scope (with the status answers, if asked), marks
/// what confirmations and payout claims say about the rows, and puts them in the order one
/// process writes them.
async fn classify(
    job: Job<'_>,
    span: &Span,
    scoped: Scoped,
    status: Option<crate::status_api::StatusEvidence>,
) -> Result<Classified> {
    let Job {
        cfg,
        rules,
        db,
        as_of,
        ..
    } = job;
    let Scoped {
        mut ev,
        m,
        named_only,
        own_lines,
        accepted,
        mut in_scope,
        watch,
        elsewhere,
        source_partitions,
        handed,
        shared,
    } = scoped;
    let (payments, lines) = (&ev.ledger.payments, &ev.lines);
    let started = Instant::now();
    let ctx = Context {
        as_of,
        stale_after: span.stale_after,
        settlement_lag: span.lag,
        coverage: &ev.statements.coverage,
        source_partitions: &source_partitions,
        in_scope: &in_scope,
        watch: &watch,
        report_range: (span.t0, span.t1),
        report_line: &ev.report_line,
        run_day: &span.from_day,
        named_only: &named_only,
        accepted: &accepted,
    };
    let payouts = &ev.payouts;
    let mut rows =
        outcome::classify_with(payments, lines, &m, rules, &ctx, &|i, p, row, decided| {
            let row = match &status {
                Some(answers) => answers.overlay(i, p, row, decided),
                None => row,
            };
            payouts.overlay(i, p, row, decided)
        });
    // The payments a payout status record names that the night does not classify (a return
    // of a payment paid weeks ago), and the records that name no payment.
    if !payouts.is_empty() {
        let classified: Vec<bool> = (0..payments.len())
            .map(|i| in_scope[i] || watch.get(i).copied().unwrap_or(false))
            .collect();
        crate::payout_status::merge_rows(&mut rows, payouts.extra_rows(payments, &classified));
    }
    super::claims::mark_contested(&mut rows, &ev.confirmed, payments, lines);
    super::claims::mark_named_twice(&mut rows, &m, rules, payments, lines);
    Box::pin(hold_claimed_payouts(
        job,
        &mut rows,
        status.as_ref(),
        &ev,
        &m,
    ))
    .await?;
    // Another partition's line is reported by its own shard.
    super::foreign::drop_line_rows(&mut rows, own_lines);
    let shared_settlement = match shared {
        Some(d) => {
            rows.extend(d.rows);
            d.settlement
        }
        None => Vec::new(),
    };
    // A watched payment with a row is one whose evidence contradicts recon's decision: it is
    // reported tonight.
    for r in &rows {
        if let Some(i) = r.payment {
            in_scope[i as usize] = true;
        }
    }
    if let Some(p) = &cfg.partition {
        order_line_rows(p, &mut rows, lines);
        note_other_partitions(&mut rows, payments, lines);
    }
    // The rows whose cases span shards: the gather stores those cases.
    let crossing = super::foreign::crossing_rows(
        &rows,
        payments,
        lines,
        &matched_pairs(&m),
        own_lines,
        &elsewhere,
    );
    let status_provider_ids = status.map(|a| a.provider_ids()).unwrap_or_default();
    let confirmations = Box::pin(super::claims::confirmation_notes(
        db,
        &ev.confirmed,
        &rows,
        payments,
        lines,
    ))
    .await?;
    let mut settlement = crate::outputs::settlement::rows(&m, lines, rules, (span.t0, span.t1));
    settlement.extend(shared_settlement);
    if let Some(p) = &cfg.partition {
        crate::outputs::settlement::order_by_source(p, &mut settlement);
    }
    ev.timings
        .insert("classify".to_string(), started.elapsed().as_millis() as u64);
    Ok(Classified {
        ev,
        rows,
        matched: m,
        settlement,
        crossing,
        confirmations,
        status_provider_ids,
        handed,
        in_scope,
        own_lines,
    })
}

/// One payout, one payment (DESIGN.md rule 14): a payout id that an answer gives a payment,
/// or that a transition would record, while another payment holds it resolves neither.
async fn hold_claimed_payouts(
    job: Job<'_>,
    rows: &mut Vec<outcome::ResultRow>,
    status: Option<&crate::status_api::StatusEvidence>,
    ev: &Evidence,
    m: &MatchResult,
) -> Result<()> {
    let (payments, lines) = (&ev.ledger.payments, &ev.lines);
    let answered = status.map(|a| a.provider_ids()).unwrap_or_default();
    let claimed = super::claims::payout_claims(rows, lines, answered);
    if claimed.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = claimed.values().map(String::as_str).collect();
    let owners = job
        .db
        .bounded_any(
            "looking up who holds the payout ids this night would record",
            Box::pin(crate::ledger::lookup::payout_owners(
                job.db,
                &job.cfg.ledger,
                &ids,
            )),
        )
        .await?;
    let held = super::claims::payout_holders(&claimed, payments, lines, m, &owners);
    let held_rows = super::claims::mark_held(rows, &held, payments, lines);
    rows.extend(held_rows);
    Ok(())
}

/// The plan of the classified night: its totals and summary, and the rows for the writers.
fn summarize(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    span: &Span,
    classified: Classified,
) -> Plan {
    let Job {
        cfg, rules, as_of, ..
    } = job;
    let Classified {
        ev,
        rows,
        matched,
        settlement,
        crossing,
        confirmations,
        status_provider_ids,
        handed,
        in_scope,
        own_lines,
    } = classified;
    let Evidence {
        ledger,
        lines,
        statements,
        mut timings,
        ..
    } = ev;
    let payments = ledger.payments;
    let started = Instant::now();
    let totals = summary::outcome_totals(&rows, &payments, &lines);
    let outcomes = summary::outcome_stats(&totals);
    timings.insert("summary".to_string(), started.elapsed().as_millis() as u64);
    let Statements {
        inputs,
        rejected,
        mut warnings,
        gates,
        unreadable,
        ..
    } = statements;
    // The reporting currency's rates for the night (its last day): a dated input like a
    // statement, what goes wrong with it said in the warnings.
    let reporting = cfg.reporting.as_ref().map(|r| {
        let (valuation, said) = r.valuation(opts.to);
        for w in said {
            tracing::warn!(run_id, warning = %w, "Exchange rates.");
            summary::add_distinct_warnings(&mut warnings, &[w]);
        }
        summary::ReportingSummary {
            valuation,
            ..Default::default()
        }
    });
    let summary = Summary {
        reporting,
        shadow: None,
        run_id: run_id.to_string(),
        range_from: opts.from.to_string(),
        range_to: opts.to.to_string(),
        as_of: timeparse::format_utc(as_of),
        dry_run: opts.dry_run,
        rules_hash: rules.hash.clone(),
        inputs,
        payments_loaded: payments.len(),
        payments_in_scope: in_scope.iter().filter(|&&b| b).count(),
        statement_lines: own_lines,
        rejected_lines: rejected.len(),
        outcomes,
        transitions: Default::default(),
        tickets: Default::default(),
        cases: Default::default(),
        warnings,
        gates,
        unreadable_inputs: unreadable,
        timings_ms: timings,
        shards: Vec::new(),
        inbox: None,
    };
    Plan {
        data: RunData {
            payments,
            lines,
            rows,
            totals,
            settlement,
            status_provider_ids,
            handed,
            confirmations,
            crossing,
        },
        matched,
        summary,
        rejected,
        t0: span.t0,
    }
}

/// A shard: what the lookup `found`, and the payments of the night's range (`range`, which
/// one process loads) of the partitions other shards reconcile that `keys` name (see
/// `foreign::Foreign::other_shard_keys`).
async fn other_shards_named(
    db: &Db,
    cfg: &crate::config::Config,
    partition: Option<&crate::partition::Select>,
    keys: crate::ledger::lookup::Keys,
    ledger: &LoadedLedger,
    range: (Micros, Micros),
    found: crate::ledger::lookup::Found,
) -> Result<crate::ledger::lookup::Found> {
    let Some(select) = partition.filter(|s| s.filter.is_some() && !keys.is_empty()) else {
        return Ok(found);
    };
    let others = crate::partition::Select {
        filter: select.filter.as_ref().map(|f| format!("NOT ({f})")),
        ..select.clone()
    };
    let mut more = db
        .bounded_any(
            "looking up the payments of other partitions statement lines name",
            crate::ledger::lookup::named(
                db,
                &cfg.ledger,
                Some(&others),
                &keys,
                |id| crate::ledger::lookup::position(&ledger.payments, id).is_some(),
                None,
            ),
        )
        .await?;
    more.retain(|_, start| start >= range.0 && start < range.1);
    // Only payments of other partitions: the shard's own are loaded as one process loads them.
    more.loaded_attempt_ids.clear();
    Ok(found.join(more))
}

/// Every pair the passes found (links, undecided pairs, near misses, returns).
fn matched_pairs(m: &matching::MatchResult) -> impl Iterator<Item = &matching::Pair> + Clone {
    m.links
        .iter()
        .chain(&m.ambiguous)
        .chain(&m.near_misses)
        .chain(&m.returns)
        .chain(&m.returns_ambiguous)
}

/// Per line: whether the night reports it (booked in `[t0, t1)`, or booked before in a file
/// no earlier run read: a late delivery surfaces in the first run that has it). A source's
/// lines come file by file: a file is looked up once, not once per line (a night loads every
/// line of its horizon, days of them booked before its range).
fn report_lines(
    lines: &[StatementLine],
    (t0, t1): (Micros, Micros),
    late_files: &LateFiles,
) -> Vec<bool> {
    let mut last: Option<(&Arc<str>, bool)> = None;
    lines
        .iter()
        .map(|l| {
            if l.booked_at >= t0 {
                return l.booked_at < t1;
            }
            match last {
                Some((f, late)) if Arc::ptr_eq(f, &l.origin.file) => late,
                _ => {
                    let late = late_files.contains(l.source(), l.file());
                    last = Some((&l.origin.file, late));
                    late
                }
            }
        })
        .collect()
}

/// Orders a partitioned night's line rows (after the payment rows, which are in payment id
/// order) by the job-file position of their first line's source, keeping each source's own
/// order: every source is one partition's, so the rows of a night gathered from its shards
/// come out in the same order as one process writes them.
fn order_line_rows(
    p: &crate::partition::PartitionConfig,
    rows: &mut [crate::outcome::ResultRow],
    lines: &[StatementLine],
) {
    let first_line_row = rows
        .iter()
        .position(|r| r.payment.is_none())
        .unwrap_or(rows.len());
    rows[first_line_row..].sort_by_key(|r| {
        r.lines.first().map_or(usize::MAX, |&l| {
            p.source_index(&lines[l as usize].origin.source)
        })
    });
}

/// Says in a payment row's detail which of its lines were booked in another partition's
/// source (a line that names a payment is its evidence wherever it is booked: DESIGN.md rule
/// 12), so a reader of merchant B's row sees that its payout came in merchant A's file.
fn note_other_partitions(
    rows: &mut [crate::outcome::ResultRow],
    payments: &[crate::ledger::Payment],
    lines: &[StatementLine],
) {
    for r in rows {
        let Some(pi) = r.payment else { continue };
        let own = payments[pi as usize].partition;
        let mut note = String::new();
        for &li in &r.lines {
            let l = &lines[li as usize];
            let part = l.origin.partition;
            if part == own || part == crate::partition::SHARED {
                continue;
            }
            note.push_str("; line ");
            sources::write_source_line(&mut note, &l.origin, l.line_no);
            note.push_str(&format!(
                " was booked in partition {:?}'s source {}",
                crate::partition::value(part),
                l.origin.source
            ));
        }
        if !note.is_empty() {
            r.detail = format!("{}{note}", r.detail).into();
        }
    }
}

/// Matches the evidence's lines with its ledger's payments on a blocking thread (Polars is
/// CPU-bound and blocks): the eligibility at the as-of, with `marks` per line
/// ([`matching::Eligibility`]). A payment of a partition another shard reconciles (the
/// evidence's `foreign`) is only ever named: no look-alike, no near miss.
async fn match_blocking(
    job: Job<'_>,
    span: &Span,
    ev: &mut Evidence,
    marks: &LineMarks,
) -> Result<MatchResult> {
    let mut elig = outcome::eligibility(&ev.ledger.payments, job.as_of, span.stale_after);
    elig.own_reference = marks.own_reference.to_vec();
    elig.confirmed = marks.confirmed.to_vec();
    ev.foreign.only_named(&ev.ledger.payments, &mut elig);
    let rules = job.rules.clone();
    let (ledger, lines) = (
        std::mem::take(&mut ev.ledger),
        std::mem::take(&mut ev.lines),
    );
    let (ledger, lines, m) = tokio::task::spawn_blocking(move || {
        let m = matching::run(
            &ledger.payments,
            &ledger.provider_ids,
            &lines,
            &rules,
            &elig,
        );
        (ledger, lines, m)
    })
    .await
    .context("matching task")?;
    (ev.ledger, ev.lines) = (ledger, lines);
    m
}

/// Per line of `n`: whether it is one of `lines` (empty when none is).
fn per_line(lines: &[u32], n: usize) -> Vec<bool> {
    let mut v = Vec::new();
    if !lines.is_empty() {
        v = vec![false; n];
        for &l in lines {
            v[l as usize] = true;
        }
    }
    v
}

/// The statement files (source, path) that no run of a day before `day` read: a file first
/// read by this day's run (or by a later day's, or never) is new to this day, so its lines
/// booked before the day are reported here too. Re-runs of the day see the same. A source that
/// no run of an earlier day had configured has nothing late: this is its first day (a new job,
/// or a new source), and its history is not news. Every run records its configured sources
/// (an empty path), so a source whose first file arrives late still has earlier days.
async fn late_files(
    db: &Db,
    inputs: &[sources::InputFile],
    day: &str,
    read: &mut ReadInRange,
) -> Result<LateFiles> {
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
    let mut late = LateFiles::default();
    for (source, path, sha) in keys {
        if sources.get(source).is_some_and(|d| d.as_str() < day)
            && first
                .get(&(source.to_string(), path.to_string(), sha.to_string()))
                .is_none_or(|d| d.as_str() >= day)
        {
            late.0
                .entry(source.to_string())
                .or_default()
                .insert(path.to_string());
        }
    }
    Ok(late)
}

/// The statement files (source → paths) no run of an earlier day read ([`late_files`]).
#[derive(Default)]
struct LateFiles(HashMap<String, HashSet<String>>);

impl LateFiles {
    /// Whether `source`'s file `path` is late.
    fn contains(&self, source: &str, path: &str) -> bool {
        self.0.get(source).is_some_and(|paths| paths.contains(path))
    }
}
