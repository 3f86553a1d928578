//! A run's database effects, all inside the caller's transaction: guarded transitions with
//! history, follow-up bookkeeping for carried-over payments, and REVIEW tickets with their
//! evidence (see [`crate::evidence`]; account numbers masked).

use crate::evidence;
use crate::ledger::Status;
use crate::ledger::transitions::{Applied, Transition};
use crate::matching::MatchResult;
use crate::outcome::{Action, Outcome};
use crate::outputs::summary::Summary;
use crate::rules::RuleSet;
use crate::run::{RunData, RunOptions};
use crate::tickets::{self, NewTicket, Upserted};
use crate::timeparse::Micros;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Instant;

/// Transitions, follow-ups and tickets inside `tx`. Returns the rows whose transition was
/// refused (someone else moved the payment), with the status recon wanted.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply(
    tx: &mut crate::store::Tx,
    data: &Arc<RunData>,
    matched: Arc<MatchResult>,
    rules: &RuleSet,
    summary: &mut Summary,
    (t0, as_of): (Micros, Micros),
    run_id: &str,
    opts: &RunOptions,
    now: &str,
) -> Result<Vec<(usize, Status)>> {
    let mut conflicts = Vec::new();
    let to_day = opts.to.to_string();
    let evidence_as_of = format!("{to_day}|{as_of:020}");
    // The tickets' evidence is built on another thread while the transitions are written.
    let tickets = {
        let (data, rules) = (Arc::clone(data), rules.clone());
        tokio::task::spawn_blocking(move || new_tickets(&data, &matched, &rules, &evidence_as_of))
    };
    // Transitions, batched; each keeps DESIGN.md rule 3's guard and history row.
    let mut row_of: Vec<usize> = Vec::new();
    let mut list: Vec<Transition> = Vec::new();
    for (ri, row) in data.rows.iter().enumerate() {
        if let (Some(pi), Action::Transition(to)) = (row.payment, row.action) {
            let p = &data.payments[pi as usize];
            row_of.push(ri);
            list.push(Transition {
                payment_id: p.payment_id.to_string(),
                from: p.status,
                to,
                attempt_id: p.attempt_id.as_ref().map(|a| a.to_string()),
                provider_payment_id: row
                    .lines
                    .first()
                    .and_then(|&l| data.lines[l as usize].provider_txn_id.as_deref())
                    .map(str::to_string),
                prior_provider_payment_id: p.provider_payment_id.as_ref().map(|s| s.to_string()),
                reason: format!("{} by rule {:?}", row.outcome.as_str(), row.rule),
            });
        }
    }
    let started = Instant::now();
    let results = tx.apply_transitions(&list, run_id, now).await?;
    tracing::debug!(
        run_id,
        transitions = list.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Transitions applied."
    );
    let stats = &mut summary.transitions;
    stats.planned = list.len();
    for ((ri, t), applied) in row_of.iter().zip(&list).zip(results) {
        match applied {
            Applied::Applied => stats.applied += 1,
            Applied::AlreadyApplied => stats.already_applied += 1,
            Applied::Conflict => {
                stats.conflicts += 1;
                tracing::warn!(run_id, payment_id = %t.payment_id, "Transition refused: the payment was moved by someone else.");
                conflicts.push((*ri, t.to));
            }
        }
    }
    // Follow-ups: awaiting payments stay in later runs' scope; carried-over ones are
    // remembered as closed by this range so its re-runs reproduce them.
    let mut open = Vec::new();
    let mut closed = Vec::new();
    for row in &data.rows {
        let Some(pi) = row.payment else { continue };
        let p = &data.payments[pi as usize];
        // Carried over (unresolved, or followed up) — not a finished payment that only a
        // late line brought into this run: closing that would put it into re-runs of earlier
        // days, which never had it.
        let carried = p.followup.is_some()
            || matches!(
                p.current_status,
                Status::Unknown | Status::Submitting | Status::Review
            );
        if row.outcome == Outcome::AwaitingEvidence {
            open.push(p.payment_id.as_str());
        } else if carried && (p.anchor() < t0 || p.followup.is_some()) {
            closed.push(p.payment_id.as_str());
        }
    }
    tx.followups(&open, &closed, &to_day).await?;
    let inputs: Vec<(&str, &str, &str)> = summary
        .inputs
        .iter()
        .map(|f| (f.source.as_str(), f.path.as_str(), f.sha256.as_str()))
        .collect();
    tx.record_inputs(&inputs, &to_day).await?;
    let new_tickets = tickets.await.context("ticket evidence task")?;
    tracing::debug!(run_id, tickets = new_tickets.len(), "Tickets prepared.");
    let started = Instant::now();
    let upserted = tx.upsert_tickets(&new_tickets, run_id, now).await?;
    tracing::debug!(
        run_id,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Tickets upserted."
    );
    for u in upserted {
        match u {
            Upserted::Created => summary.tickets.created += 1,
            Upserted::Existing | Upserted::Updated => summary.tickets.existing += 1,
            Upserted::Reopened => {
                summary.tickets.existing += 1;
                summary.tickets.reopened += 1;
            }
        }
    }
    Ok(conflicts)
}

/// The tickets the rows ask for, keyed by a stable dedupe key, with their evidence and its
/// fingerprint.
fn new_tickets(
    data: &RunData,
    matched: &MatchResult,
    rules: &RuleSet,
    evidence_as_of: &str,
) -> Vec<NewTicket> {
    let pairs =
        evidence::PairIndex::new(matched, &data.rows, data.payments.len(), data.lines.len());
    let mut new_tickets = Vec::new();
    for row in &data.rows {
        let Some(sev) = row.outcome.ticket_severity() else {
            continue;
        };
        let p = row.payment.map(|i| &data.payments[i as usize]);
        let line_ids: Vec<String> = row
            .lines
            .iter()
            .map(|&l| {
                let l = &data.lines[l as usize];
                format!("{}:{}", l.source, l.uid())
            })
            .collect();
        let line_ids = line_ids.join(";");
        let (amount, currency) = match p {
            Some(p) => (Some(p.amount_minor), Some(p.currency.to_string())),
            None => row
                .lines
                .first()
                .map(|&l| {
                    let l = &data.lines[l as usize];
                    (Some(l.amount_minor), Some(l.currency.to_string()))
                })
                .unwrap_or((None, None)),
        };
        let ev = evidence::for_row(row, &data.payments, &data.lines, rules, &pairs);
        new_tickets.push(NewTicket {
            dedupe_key: tickets::dedupe_key(
                row.outcome.as_str(),
                p.map(|p| p.payment_id.as_str()),
                &line_ids,
            ),
            kind: row.outcome.as_str().to_string(),
            severity: sev.as_str().to_string(),
            payment_id: p.map(|p| p.payment_id.to_string()),
            line_ids,
            amount_minor: amount,
            currency,
            evidence_sha256: evidence::fingerprint(&ev),
            evidence: ev.to_string(),
            evidence_as_of: evidence_as_of.to_string(),
        });
    }
    new_tickets
}
