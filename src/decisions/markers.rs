//! The email's markers (issue 42): what changed about each listed case since the last
//! morning, read from the store in the run's transaction once the run (or, for a sharded
//! night, every shard and the gather) has stored its cases. One definition for a night in one
//! process and for a gathered one, so both say the same.
//!
//! - **new**: the case was first stored by one of the night's runs;
//! - **reopened**: a reviewer settled it (dismissed or decided) or escalated it, and the night
//!   stored other evidence for it (the store opened it again);
//! - **escalated**: it is ESCALATED, with the reviewer's note;
//! - **waiting for your approval**: a decision on it waits for a second reviewer;
//! - **after a decision**: it is new or reopened, and one of its payments or lines belongs to
//!   a case (itself included) a reviewer's decision that changes evidence (a confirmation, an
//!   accepted difference, a status) was applied to in the last [`AFTER_DECISION_DAYS`] days:
//!   a confirmation that now shows another amount, say. It replaces "reopened".

use crate::report::ReportView;
use crate::report::markers::{CaseMarkers, Marker};
use crate::store::Tx;
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// How far back a decision counts as the cause of a new case: a week covers a weekend and a
/// late re-run.
pub const AFTER_DECISION_DAYS: i64 = 7;

/// How many cases' stored states are read at once.
const STATES_AT_ONCE: usize = 10_000;

/// The markers of `view`'s cases. `run_ids` are the night's runs (the run, a range's days, or
/// a gathered night's shards and gather); `now` is the store's clock text
/// ([`crate::timeparse::to_db`]).
pub async fn markers(
    tx: &mut Tx,
    view: &ReportView,
    run_ids: &[String],
    now_micros: i64,
) -> Result<CaseMarkers> {
    let mut out = CaseMarkers::default();
    let listed = view.listed_cases();
    if listed.is_empty() {
        return Ok(out);
    }
    let ours: HashSet<&str> = run_ids.iter().map(String::as_str).collect();
    let keys: Vec<&str> = listed.iter().map(|c| c.key.as_str()).collect();
    let wanted: HashSet<&str> = keys.iter().copied().collect();
    // New or reopened: what a recent decision may have caused. The stored states are read a
    // slice of the cases at a time (a night of 800,000 cases held 240 MB of them at once).
    let mut new: HashSet<&str> = HashSet::new();
    let mut escalated: Vec<(String, String)> = Vec::new();
    let mut states = Vec::new();
    for chunk in keys.chunks(STATES_AT_ONCE) {
        states.clear();
        states.extend(tx.case_states(chunk).await?);
        for s in &states {
            let by = s.status_by.clone().unwrap_or_default();
            if ours.contains(s.first_seen_run_id.as_str()) {
                out.new_case(&s.key);
                if let Some(k) = wanted.get(s.key.as_str()) {
                    new.insert(k);
                }
            } else if s.status == "OPEN"
                && !by.is_empty()
                && by != "recon"
                && s.evidence_run_id
                    .as_deref()
                    .is_some_and(|r| ours.contains(r))
            {
                out.list_mut(&s.key)
                    .push(Marker::Reopened { by: by.clone() });
                if let Some(k) = wanted.get(s.key.as_str()) {
                    new.insert(k);
                }
            }
            if s.status == "ESCALATED" {
                escalated.push((s.key.clone(), by));
            }
        }
    }
    // An escalation's note as the reviewer wrote it (the case's status note also says which
    // file and row it came from).
    for (key, by) in escalated {
        let note = tx
            .case_decisions(&key)
            .await?
            .into_iter()
            .rev()
            .find(|d| d.decision == "escalate" && d.state == "APPLIED")
            .map(|d| d.note)
            .unwrap_or_default();
        out.list_mut(&key).push(Marker::Escalated { by, note });
    }
    for d in tx.waiting_decisions().await? {
        if wanted.contains(d.case_key.as_str()) {
            out.list_mut(&d.case_key).push(Marker::Waiting {
                decision: d.decision,
                by: d.actor,
            });
        }
    }
    if !new.is_empty() {
        let since =
            crate::timeparse::to_db(now_micros - AFTER_DECISION_DAYS * crate::timeparse::DAY);
        // Only decisions that change the evidence (a confirmation, an accepted difference, a
        // status): a dismissal or an escalation leaves it as it was.
        let applied: Vec<_> = tx
            .decisions_applied_since(&since)
            .await?
            .into_iter()
            .filter(|d| !d.decision.starts_with("dismiss") && d.decision != "escalate")
            .collect();
        if !applied.is_empty() {
            let mut by_payment: HashMap<&str, usize> = HashMap::new();
            let mut by_line: HashMap<(&str, &str), usize> = HashMap::new();
            for (i, d) in applied.iter().enumerate() {
                for p in &d.payments {
                    by_payment.insert(p, i);
                }
                for (s, l) in &d.lines {
                    by_line.insert((s, l), i);
                }
            }
            for c in listed.iter().filter(|c| new.contains(c.key.as_str())) {
                let payments = c.payments.iter().map(|p| p.to_string());
                let hit = payments
                    .filter_map(|p| by_payment.get(p.as_str()).copied())
                    .chain(c.members.iter().flat_map(|&i| {
                        view.items[i].lines.iter().filter_map(|l| {
                            by_line
                                .get(&(l.origin.source.as_ref(), l.id.as_ref()))
                                .copied()
                        })
                    }))
                    .max();
                if let Some(i) = hit {
                    let d = &applied[i];
                    let mark = out.list_mut(&c.key);
                    // Reopened by what a reviewer decided on it: that is the news.
                    mark.retain(|m| !matches!(m, Marker::Reopened { .. }));
                    mark.push(Marker::AfterDecision {
                        decision: d.decision.clone(),
                        by: d.actor.clone(),
                        case: d.case_key.clone(),
                    });
                }
            }
        }
    }
    out.finish();
    Ok(out)
}
