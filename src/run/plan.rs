//! The plan of one day: statements and ledger loaded, the passes matched, every item
//! classified; no effect yet. A run applies it; `recon explain` only reads it.

use super::{Job, ReadInRange};
use crate::db::Db;
use crate::ledger::Status;
use crate::ledger::load::{LoadRange, LoadedLedger};
use crate::matching;
use crate::outcome::{self, Context};
use crate::outputs::summary::{self, Summary};
use crate::run_data::{RunData, RunOptions};
use crate::sources::{self, StatementLine};
use crate::timeparse::{self, DAY, HOUR, MINUTE, Micros};
use anyhow::{Context as _, Result};
use std::collections::BTreeMap;

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

pub(crate) async fn plan(
    job: Job<'_>,
    opts: &RunOptions,
    run_id: &str,
    read: &mut ReadInRange,
) -> Result<Plan> {
    let Job {
        cfg,
        rules,
        db,
        as_of,
        part,
    } = job;
    let partition = cfg.partition.as_ref().map(|p| p.select(part.shard()));
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
    let (first_day, last_day) = statement_days(cfg, rules, (t0, t1));
    let statements = load_statements(cfg, (first_day, last_day), as_of);
    // A shard also reads the other partitions' sources, for the lines naming its payments.
    let mut foreign_load = super::foreign::load(cfg, (first_day, last_day), as_of);
    let mut first_foreign_day = first_day;
    let from_day = opts.from.to_string();
    let lo0 = t0 - carry - before - after - DAY;
    let hi0 = t1 + before + after + DAY;
    let ledger = db
        .bounded_any(
            "loading the ledger",
            crate::ledger::load::load(
                db,
                &cfg.ledger,
                &LoadRange {
                    lo: lo0,
                    hi: hi0,
                    attempts_lo: lo0 - carry,
                    from_day: from_day.clone(),
                    partition: partition.clone(),
                },
            ),
        )
        .await;
    let (mut loads, mut statements_ms) = statements.await.context("statement loading task")??;
    let mut ledger = ledger?;
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
        .map(|first| timeparse::local_date(first - before, tz));
    if let Some(day) = earliest_day.filter(|d| *d < first_day) {
        let (mut more, ms) = load_statements(cfg, (day, last_day), as_of)
            .await
            .context("statement loading task (earlier attempts' windows)")??;
        tracing::debug!(from = %day, "Statements loaded from a retried payment's first attempt.");
        // A shared source is no payment's evidence: it keeps the night's days, which the
        // gather of a sharded night (that has no ledger) reads too.
        for ((new, old), src) in more.iter_mut().zip(&mut loads).zip(&cfg.sources) {
            if crate::shared::is_shared(cfg, src) {
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
    let mut lines: Vec<StatementLine> = Vec::new();
    let mut coverage = Vec::new();
    let mut inputs = Vec::new();
    let mut rejected = Vec::new();
    let mut warnings = Vec::new();
    let mut gates = Vec::new();
    let mut unreadable = Vec::new();
    for load in loads {
        gates.extend(load.gates);
        unreadable.extend(load.unreadable);
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
    // Lines reviewers confirmed as a payment's name that payment (`confirm N`), unless the
    // provider's reference now says otherwise (contested: a case naming both).
    let mut confirmed = Box::pin(crate::decisions::confirmed::overlay(db, &mut lines)).await?;
    let mut foreign = super::foreign::Foreign::new(
        cfg,
        rules,
        part.shard(),
        match foreign_load {
            Some(h) => Some(
                h.await
                    .context("statement loading task (other partitions)")??,
            ),
            None => None,
        },
        (first_foreign_day, last_day),
        as_of,
    );
    Box::pin(foreign.overlay(db, &mut confirmed)).await?;
    if let Some(ms) = foreign.load_ms {
        timings.insert("load_other_partitions".to_string(), ms);
    }
    for w in &warnings {
        tracing::warn!(run_id, warning = %w, "Completeness warning.");
    }
    timings.insert("load_statements".to_string(), statements_ms);
    // Every payment any loaded line could belong to must be a candidate (in a shard: any line
    // of the night, as in one process).
    let (min_b, max_b) = foreign.booked_span(&lines).unwrap_or((t0, t1));
    let (need_lo, need_hi) = ((t0 - carry).min(min_b - after), t1.max(max_b + before + 1));
    let mut ledger_range = (lo0, hi0);
    if need_lo < lo0 || need_hi > hi0 {
        let lo = need_lo.min(lo0);
        ledger_range = (lo, need_hi.max(hi0));
        ledger = db
            .bounded_any(
                "loading the ledger (the statement lines' wider range)",
                crate::ledger::load::load(
                    db,
                    &cfg.ledger,
                    &LoadRange {
                        lo,
                        hi: need_hi.max(hi0),
                        attempts_lo: lo - carry,
                        from_day: from_day.clone(),
                        partition: partition.clone(),
                    },
                ),
            )
            .await?;
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
        std::borrow::Cow::Borrowed(&inputs)
    } else {
        std::borrow::Cow::Owned(inputs.iter().chain(&foreign.inputs).cloned().collect())
    };
    let late_files = late_files(db, &all_inputs, &from_day, read).await?;
    let mut report_line = report_lines(&lines, (t0, t1), &late_files);
    let stale_after = cfg.stale_submitting_minutes * MINUTE;
    let started = Instant::now();
    // The shape of our ids in a reference: lines of that shape are evidence only for the
    // payment they name (DESIGN.md rule 12).
    let shape = matching::shape::IdShape::for_run(cfg.reference_pattern.as_ref(), &ledger.payments);
    let shapes = matching::shape::Shapes::for_run(
        cfg.reference_pattern.as_ref(),
        &ledger.payments,
        cfg.partition.is_some(),
        &shape,
    );
    let mut own_reference = shapes.lines(rules, &lines);
    confirmed.place(&lines);
    let mut confirmed_lines = {
        let mut read: Vec<u32> = confirmed.applied.keys().copied().collect();
        read.sort_unstable();
        per_line(&read, lines.len())
    };
    let (ledger, mut lines, m) = match_blocking(
        ledger,
        lines,
        rules,
        as_of,
        stale_after,
        (&own_reference, &confirmed_lines),
        &foreign,
    )
    .await?;
    // A line no loaded payment claims by identifier may name an older one: looked up in the
    // whole ledger, and matched again with what was found. (A shard looks in every partition:
    // a line of its own may name another partition's payment, and a foreign line it took may
    // name one besides its own.)
    let mut keys = matching::shape::lookup_keys(&lines, &m, rules, &shape);
    // A contested line's confirmed payment is a candidate of it, wherever its day is.
    keys.payment_ids.extend(
        confirmed
            .contested
            .iter()
            .map(|(_, c)| c.payment_id.clone()),
    );
    let every_partition = partition.as_ref().map(|s| crate::partition::Select {
        filter: None,
        ..s.clone()
    });
    let found = db
        .bounded_any(
            "looking up the payments statement lines name",
            crate::ledger::lookup::named(db, &cfg.ledger, every_partition.as_ref(), &keys, |id| {
                crate::ledger::lookup::position(&ledger.payments, id).is_some()
            }),
        )
        .await?;
    let found = other_shards_named(
        db,
        cfg,
        partition.as_ref(),
        foreign.other_shard_keys(&lines, &m, &ledger, rules, &shape),
        &ledger,
        ledger_range,
        found,
    )
    .await?;
    let (ledger, lines, mut m, named_only, found_starts) = if found.is_empty() {
        foreign.drop_waiting();
        (ledger, lines, m, Vec::new(), Vec::new())
    } else {
        let mut ledger = ledger;
        let row_starts = found.row_starts.clone();
        let named_only = crate::ledger::lookup::merge(&mut ledger, found);
        let found_starts = super::foreign::found_starts(&named_only, &row_starts);
        // The other partitions' lines that name a payment found here join the night too.
        let n = lines.len();
        if foreign
            .take_named_again(
                &mut lines,
                rules,
                &ledger,
                |i| named_only[i],
                (db, &mut confirmed),
            )
            .await?
            > 0
        {
            if !own_reference.is_empty() {
                own_reference.extend(shapes.lines(rules, &lines[n..]));
            }
            report_line.extend(report_lines(&lines[n..], (t0, t1), &late_files));
            confirmed.place(&lines);
            if !confirmed_lines.is_empty() {
                confirmed_lines.resize(lines.len(), false);
            }
            for &l in confirmed.applied.keys().filter(|&&l| l as usize >= n) {
                if confirmed_lines.is_empty() {
                    confirmed_lines = vec![false; lines.len()];
                }
                confirmed_lines[l as usize] = true;
            }
        }
        foreign.drop_waiting();
        let (ledger, lines, m) = match_blocking(
            ledger,
            lines,
            rules,
            as_of,
            stale_after,
            (&own_reference, &confirmed_lines),
            &foreign,
        )
        .await?;
        (ledger, lines, m, named_only, found_starts)
    };
    drop(own_reference);
    drop(confirmed_lines);
    let own_lines = foreign.own_lines(lines.len());
    if let Some(s) = super::foreign::own_settlement(&lines, own_lines, rules)? {
        m.settlement = s;
    }
    let contested = super::claims::contested_pairs(&confirmed, &ledger.payments, &mut m);
    // Pairs a reviewer settled with `accept difference`: matched while the difference holds.
    let accepted: std::collections::HashMap<u32, (String, i64)> = confirmed
        .applied
        .iter()
        .filter_map(|(&l, c)| {
            c.accepted_difference_minor
                .map(|d| (l, (c.payment_id.clone(), d)))
        })
        .collect();
    let LoadedLedger {
        payments,
        provider_ids: _,
    } = ledger;
    // A shard reports only its own payments (and an old one no other shard reports).
    let elsewhere =
        foreign.reported_elsewhere(&payments, &found_starts, ledger_range, &lines, &m, rules);
    // Scope.
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
    // Both sides of a contested confirmation are reported, whatever their day.
    for &(_, p) in &contested {
        in_scope[p as usize] = true;
    }
    let coverage_by_name: std::collections::HashMap<&str, &[(Micros, Micros)]> = cfg
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
        |name| coverage_by_name.get(name).copied(),
    );
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
    // recon's own decisions of earlier days are re-checked for an evidence horizon (window
    // after the start, plus the settlement lag, plus a day) after the payment's start or after
    // the decision, whichever is later (DESIGN.md rule 8): a later line, status answer or
    // webhook event that contradicts one is judged by the next nightly run, not only by a
    // re-run of that day. Such a payment is reported only when the evidence contradicts the
    // decision.
    let lag = cfg.settlement_lag_hours * HOUR;
    let reach = after + lag + DAY;
    let mut watch: Vec<bool> = payments
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
                        day < opts.from
                            && c.as_of.is_none_or(|t| t <= as_of)
                            && p.anchor().max(timeparse::day_start(day, tz)) + reach >= t0
                    }))
        })
        .collect();
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
    let (handed, shared) = crate::shared::in_night(
        &lines[..own_lines],
        &own_links,
        rules,
        &mut report_line[..own_lines],
        !part.hands_over(),
        &crate::shared::Night {
            as_of,
            lag,
            range: (t0, t1),
            coverage: &coverage_by_name,
        },
    )?;
    let ctx = Context {
        as_of,
        stale_after,
        settlement_lag: lag,
        coverage: &coverage,
        source_partitions: &source_partitions,
        in_scope: &in_scope,
        watch: &watch,
        report_range: (t0, t1),
        report_line: &report_line,
        run_day: &from_day,
        named_only: &named_only,
        accepted: &accepted,
    };
    // Provider status answers (`[[status_api]]`) for the unresolved payments in scope, and for
    // the watched ones that no statement line links (their decision rested on an answer, or
    // on no line at all): the provider is asked again.
    let status = match &cfg.status_api {
        Some(api) => {
            let started = Instant::now();
            let lookalikes = Box::pin(super::claims::confirmation_lookalikes(
                db, &confirmed, &payments,
            ))
            .await?;
            let ask: Vec<bool> = if watch.iter().any(|&w| w) || !lookalikes.is_empty() {
                let mut linked = vec![false; payments.len()];
                for pair in &m.links {
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
                        in_scope[i]
                            || lookalike[i]
                            || (watch[i] && (!linked[i] || payments[i].human.is_some()))
                    })
                    .collect()
            } else {
                in_scope.clone()
            };
            let mut targets = crate::status_api::targets(&payments, &ask, as_of, stale_after);
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
                &payments,
                &targets,
                opts.dry_run,
                (rules.evidence_window().1, ctx.settlement_lag, as_of),
                &confirmed
                    .applied
                    .keys()
                    .filter_map(|&l| lines[l as usize].provider_txn_id.as_deref())
                    .map(str::to_string)
                    .collect(),
            ))
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
    let mut rows = match &status {
        Some(ev) => {
            outcome::classify_with(&payments, &lines, &m, rules, &ctx, &|i, p, row, decided| {
                ev.overlay(i, p, row, decided)
            })
        }
        None => outcome::classify(&payments, &lines, &m, rules, &ctx),
    };
    super::claims::mark_contested(&mut rows, &confirmed, &payments, &lines);
    super::claims::mark_named_twice(&mut rows, &m, rules, &payments, &lines);
    // One payout, one payment (DESIGN.md rule 14): a payout id that an answer gives a payment,
    // or that a transition would record, while another payment holds it resolves neither.
    let claimed = super::claims::payout_claims(
        &rows,
        &lines,
        status
            .as_ref()
            .map(|ev| ev.provider_ids())
            .unwrap_or_default(),
    );
    if !claimed.is_empty() {
        let ids: Vec<&str> = claimed.values().map(String::as_str).collect();
        let owners = db
            .bounded_any(
                "looking up who holds the payout ids this night would record",
                Box::pin(crate::ledger::lookup::payout_owners(db, &cfg.ledger, &ids)),
            )
            .await?;
        let held = super::claims::payout_holders(&claimed, &payments, &lines, &m, &owners);
        let held_rows = super::claims::mark_held(&mut rows, &held, &payments, &lines);
        rows.extend(held_rows);
    }
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
        order_line_rows(p, &mut rows, &lines);
        note_other_partitions(&mut rows, &payments, &lines);
    }
    // The rows whose cases span shards: the gather stores those cases.
    let crossing = super::foreign::crossing_rows(
        &rows,
        &payments,
        &lines,
        &matched_pairs(&m),
        own_lines,
        &elsewhere,
    );
    let status_provider_ids = status.map(|ev| ev.provider_ids()).unwrap_or_default();
    let confirmations = Box::pin(super::claims::confirmation_notes(
        db, &confirmed, &rows, &payments, &lines,
    ))
    .await?;
    let mut settlement = crate::outputs::settlement::rows(&m, &lines, rules, (t0, t1));
    settlement.extend(shared_settlement);
    if let Some(p) = &cfg.partition {
        crate::outputs::settlement::order_by_source(p, &mut settlement);
    }
    let matched = m;
    timings.insert("classify".to_string(), started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let totals = summary::outcome_totals(&rows, &payments, &lines);
    let outcomes = summary::outcome_stats(&totals);
    timings.insert("summary".to_string(), started.elapsed().as_millis() as u64);
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
    Ok(Plan {
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
        t0,
    })
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
            crate::ledger::lookup::named(db, &cfg.ledger, Some(&others), &keys, |id| {
                crate::ledger::lookup::position(&ledger.payments, id).is_some()
            }),
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
    late_files: &std::collections::HashSet<(&str, &str)>,
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
                    let late = late_files.contains(&(l.source(), l.file()));
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

/// Matches `lines` with the ledger's payments on a blocking thread (Polars is CPU-bound and
/// blocks): the eligibility at `as_of`, with `own_reference` and `confirmed` per line
/// ([`matching::Eligibility`]). A payment of a partition another shard reconciles (`foreign`)
/// is only ever named: no look-alike, no near miss.
async fn match_blocking(
    ledger: LoadedLedger,
    lines: Vec<StatementLine>,
    rules: &crate::rules::RuleSet,
    as_of: Micros,
    stale_after: Micros,
    (own_reference, confirmed): (&[bool], &[bool]),
    foreign: &super::foreign::Foreign,
) -> Result<(LoadedLedger, Vec<StatementLine>, matching::MatchResult)> {
    let mut elig = outcome::eligibility(&ledger.payments, as_of, stale_after);
    elig.own_reference = own_reference.to_vec();
    elig.confirmed = confirmed.to_vec();
    foreign.only_named(&ledger.payments, &mut elig);
    let rules = rules.clone();
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
    Ok((ledger, lines, m?))
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
