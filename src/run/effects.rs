//! A run's database effects, all inside the caller's transaction: guarded transitions with
//! history, follow-up bookkeeping for carried-over payments, and REVIEW tickets with their
//! evidence (see [`crate::evidence`]; account numbers masked).

use crate::evidence;
use crate::ledger::Status;
use crate::ledger::transitions::{Applied, Transition};
use crate::matching::MatchResult;
use crate::outcome::{Action, Outcome, ResultRow};
use crate::outputs::summary::{Summary, TicketStats};
use crate::rules::RuleSet;
use crate::run::data::{RunData, RunOptions};
use crate::store::STREAM_CHUNK;
use crate::tickets::{self, NewTicket, Upserted};
use crate::timeparse::Micros;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Instant;

/// A row whose transition was refused because someone else moved the payment between load
/// and write.
pub(crate) struct Conflict {
    /// Index of the row.
    pub(crate) row: usize,
    /// The status recon wanted.
    pub(crate) wanted: Status,
    /// What the row says now: the ticket raised for it (DESIGN.md rule 3: record, don't
    /// force; and never silently), or `None` when the ledger now agrees with recon.
    pub(crate) ticket: Option<(Outcome, String)>,
    /// The provider's id recon would have recorded with the transition.
    pub(crate) provider_id: Option<String>,
}

/// What a refused transition means, given the payment's status and attempt now: a ticket
/// (its outcome and detail), or `None` when the ledger moved to exactly what recon wanted.
fn conflict_ticket(
    (wanted, provider_id): (Status, Option<&str>),
    loaded_attempt: Option<&str>,
    now: Option<&crate::store::PaymentNow>,
) -> Option<(Outcome, String)> {
    let Some(crate::store::PaymentNow {
        status,
        attempt_id: attempt,
        provider_payment_id: recorded,
    }) = now
    else {
        return Some((
            Outcome::Ambiguous,
            format!(
                "transition to {} refused: the payment is no longer in the ledger",
                wanted.as_str()
            ),
        ));
    };
    let status = Status::parse(status);
    let same_attempt = attempt.as_deref() == loaded_attempt;
    let moved = format!(
        "the ledger moved it to {} (attempt {}) since this run loaded it",
        status.map(Status::as_str).unwrap_or("?"),
        attempt.as_deref().unwrap_or("-")
    );
    match (wanted, status) {
        // Someone else set it SUCCEEDED, but without the provider's id that recon's line
        // shows (or with another): the id recon would have recorded is not dropped silently
        // (issue 33).
        (Status::Succeeded, Some(Status::Succeeded))
            if same_attempt
                && provider_id.is_some_and(|want| recorded.as_deref() != Some(want)) =>
        {
            Some((
                Outcome::Ambiguous,
                format!(
                    "the ledger was set SUCCEEDED by someone else since this run loaded it, with \
                     provider id {} where the provider's line shows {}: record the line's id, or \
                     check that the line is this payment's",
                    recorded.as_deref().unwrap_or("none"),
                    provider_id.unwrap_or("-"),
                ),
            ))
        }
        (w, Some(s)) if w == s && same_attempt => None,
        (Status::Succeeded, Some(Status::Failed)) => Some((
            Outcome::FailedButPaid,
            format!("a provider line shows this payment paid, but {moved}"),
        )),
        (Status::Failed, Some(Status::Succeeded)) => Some((
            Outcome::MissingAtProvider,
            format!("no provider line in a complete window, but {moved}"),
        )),
        (Status::Succeeded, _) if !same_attempt => Some((
            Outcome::Ambiguous,
            format!(
                "a provider line shows this payment paid, but {moved}: a retry may pay it twice"
            ),
        )),
        _ => Some((
            Outcome::Ambiguous,
            format!("transition to {} refused: {moved}", wanted.as_str()),
        )),
    }
}

/// Transitions, follow-ups and tickets inside `tx`. Returns the rows whose transition was
/// refused (someone else moved the payment), with the status recon wanted and the ticket
/// raised for each.
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
    sources: &[&str],
) -> Result<Vec<Conflict>> {
    let mut conflicts: Vec<Conflict> = Vec::new();
    let to_day = opts.to.to_string();
    let evidence_as_of = format!("{to_day}|{as_of:020}");
    // The tickets' evidence is built on another thread while the transitions are written, and
    // handed over in chunks through a short queue: the tickets of a night (each with its
    // evidence) are then never all in memory at once. The builder waits while the queue is full.
    let (ticket_tx, mut ticket_rx) = tokio::sync::mpsc::channel::<Vec<NewTicket>>(TICKET_QUEUE);
    let builder = {
        let (data, rules, matched) = (Arc::clone(data), rules.clone(), Arc::clone(&matched));
        let evidence_as_of = evidence_as_of.clone();
        tokio::task::spawn_blocking(move || {
            stream_tickets(&data, &matched, &rules, &evidence_as_of, |chunk| {
                ticket_tx.blocking_send(chunk).is_ok()
            })
        })
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
                    .map(str::to_string)
                    .or_else(|| data.status_provider_ids.get(&pi).cloned()),
                prior_provider_payment_id: p.provider_payment_id.as_ref().map(|s| s.to_string()),
                reason: match data.confirmations.get(&pi) {
                    Some(note) => {
                        format!("{} by rule {:?}; {note}", row.outcome.as_str(), row.rule)
                    }
                    None => format!("{} by rule {:?}", row.outcome.as_str(), row.rule),
                },
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
                conflicts.push(Conflict {
                    row: *ri,
                    wanted: t.to,
                    ticket: None,
                    provider_id: t.provider_payment_id.clone(),
                });
            }
        }
    }
    let mut conflict_tickets = Vec::new();
    if !conflicts.is_empty() {
        let ids: Vec<String> = conflicts
            .iter()
            .filter_map(|c| data.rows[c.row].payment)
            .map(|pi| data.payments[pi as usize].payment_id.to_string())
            .collect();
        let states = tx.payment_states(&ids).await?;
        let mut rows = Vec::new();
        for c in &mut conflicts {
            let Some(pi) = data.rows[c.row].payment else {
                continue;
            };
            let p = &data.payments[pi as usize];
            let loaded_attempt = p.attempt_id.as_ref().map(|a| a.to_string());
            c.ticket = conflict_ticket(
                (c.wanted, c.provider_id.as_deref()),
                loaded_attempt.as_deref(),
                states.get(&*p.payment_id.text()),
            );
            if let Some((outcome, detail)) = &c.ticket {
                let mut row = data.rows[c.row].clone();
                row.outcome = *outcome;
                row.action = Action::Conflict(c.wanted);
                row.detail = detail.clone().into();
                rows.push(row);
            }
        }
        let pairs =
            evidence::PairIndex::new(&matched, &rows, data.payments.len(), data.lines.len());
        conflict_tickets = rows
            .iter()
            .filter_map(|row| ticket_of(row, data, rules, &pairs, &evidence_as_of))
            .collect();
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
            open.push(p.payment_id.to_string());
        } else if carried && (p.anchor() < t0 || p.followup.is_some()) {
            closed.push(p.payment_id.to_string());
        }
    }
    tx.followups(&open, &closed, &to_day).await?;
    // Every file read, plus one row per configured source (empty path): a source counts as
    // expected from its first night on, even when its first file arrives late.
    let inputs: Vec<(&str, &str, &str)> = summary
        .inputs
        .iter()
        .map(|f| (f.source.as_str(), f.path.as_str(), f.sha256.as_str()))
        .chain(sources.iter().map(|s| (*s, "", "")))
        .collect();
    tx.record_inputs(&inputs, &to_day).await?;
    // Every chunk but the last is full; the conflicts' tickets go after the last, so the
    // statements are the same as for the whole list at once.
    let started = Instant::now();
    let mut upserted = Vec::new();
    let mut last: Vec<NewTicket> = Vec::new();
    while let Some(chunk) = ticket_rx.recv().await {
        if !last.is_empty() {
            upserted.extend(tx.upsert_tickets(&last, run_id, now).await?);
        }
        last = chunk;
    }
    builder.await.context("ticket evidence task")?;
    last.extend(conflict_tickets);
    upserted.extend(tx.upsert_tickets(&last, run_id, now).await?);
    tracing::debug!(
        run_id,
        tickets = upserted.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Tickets upserted."
    );
    for u in upserted {
        count(&mut summary.tickets, u);
    }
    Ok(conflicts)
}

/// The tickets of rows that name no payment (a gather's shared settlement rows:
/// [`crate::run::shared`]), upserted inside `tx`, and how many were new or known. No matcher pair
/// touches their lines, so their evidence is the rows' own lines.
pub(crate) async fn line_tickets(
    tx: &mut crate::store::Tx,
    data: &RunData,
    rules: &RuleSet,
    (to_day, as_of): (&str, Micros),
    (run_id, now): (&str, &str),
) -> Result<TicketStats> {
    let evidence_as_of = format!("{to_day}|{as_of:020}");
    let pairs = evidence::PairIndex::default();
    let tickets: Vec<NewTicket> = data
        .rows
        .iter()
        .filter_map(|row| ticket_of(row, data, rules, &pairs, &evidence_as_of))
        .collect();
    let mut stats = TicketStats::default();
    for u in tx.upsert_tickets(&tickets, run_id, now).await? {
        count(&mut stats, u);
    }
    Ok(stats)
}

fn count(stats: &mut TicketStats, u: Upserted) {
    match u {
        Upserted::Created => stats.created += 1,
        Upserted::Existing | Upserted::Updated => stats.existing += 1,
        Upserted::Reopened => {
            stats.existing += 1;
            stats.reopened += 1;
        }
    }
}

/// Chunks of tickets queued between the evidence builder and the database at most.
const TICKET_QUEUE: usize = 2;

/// The tickets the rows ask for, keyed by a stable dedupe key, with their evidence and its
/// fingerprint, in row order, handed to `send` in chunks of [`STREAM_CHUNK`] (the last one
/// shorter, possibly empty). Stops when `send` returns false (the receiver is gone).
fn stream_tickets(
    data: &RunData,
    matched: &MatchResult,
    rules: &RuleSet,
    evidence_as_of: &str,
    send: impl FnMut(Vec<NewTicket>) -> bool,
) {
    let pairs =
        evidence::PairIndex::new(matched, &data.rows, data.payments.len(), data.lines.len());
    in_chunks(
        data.rows
            .iter()
            .filter_map(|row| ticket_of(row, data, rules, &pairs, evidence_as_of)),
        STREAM_CHUNK,
        send,
    );
}

/// Hands `items` to `send` in order, in chunks of `size`: every chunk but the last is full, and
/// the last (shorter, possibly empty) is always sent, unless `send` returned false before.
fn in_chunks<T>(items: impl Iterator<Item = T>, size: usize, mut send: impl FnMut(Vec<T>) -> bool) {
    let mut chunk = Vec::with_capacity(size);
    for item in items {
        chunk.push(item);
        if chunk.len() == size && !send(std::mem::replace(&mut chunk, Vec::with_capacity(size))) {
            return;
        }
    }
    send(chunk);
}

/// The ticket a row asks for, if its outcome raises one.
fn ticket_of(
    row: &ResultRow,
    data: &RunData,
    rules: &RuleSet,
    pairs: &evidence::PairIndex,
    evidence_as_of: &str,
) -> Option<NewTicket> {
    let sev = row.outcome.ticket_severity()?;
    let p = row.payment.map(|i| &data.payments[i as usize]);
    let line_ids: Vec<String> = row
        .lines
        .iter()
        .map(|&l| {
            let l = &data.lines[l as usize];
            format!("{}:{}", l.source(), l.uid())
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
    let (evidence, evidence_sha256) = evidence::seal(evidence::for_row(
        row,
        &data.payments,
        &data.lines,
        rules,
        pairs,
    ));
    Some(NewTicket {
        dedupe_key: tickets::dedupe_key(
            row.outcome.as_str(),
            p.map(|p| p.payment_id.text()).as_deref(),
            &line_ids,
            &row.rule,
        ),
        kind: row.outcome.as_str().to_string(),
        severity: sev.as_str().to_string(),
        payment_id: p.map(|p| p.payment_id.to_string()),
        line_ids,
        amount_minor: amount,
        currency,
        evidence_sha256,
        evidence,
        evidence_as_of: evidence_as_of.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(status: &str, attempt: &str) -> crate::store::PaymentNow {
        crate::store::PaymentNow {
            status: status.to_string(),
            attempt_id: Some(attempt.to_string()),
            provider_payment_id: None,
        }
    }

    #[test]
    fn chunks_are_full_but_the_last_which_is_always_sent() {
        let run = |n: u32, size: usize, stop_after: usize| {
            let mut got: Vec<Vec<u32>> = Vec::new();
            in_chunks(0..n, size, |c| {
                got.push(c);
                got.len() < stop_after
            });
            got
        };
        assert_eq!(run(7, 3, 9), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        // A multiple of the size ends with an empty chunk: the receiver knows it is the end.
        assert_eq!(run(6, 3, 9), vec![vec![0, 1, 2], vec![3, 4, 5], vec![]]);
        assert_eq!(run(0, 3, 9), vec![Vec::<u32>::new()]);
        // A receiver gone after the first chunk gets no more.
        assert_eq!(run(7, 3, 1), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_refused_transition_is_a_ticket_unless_the_ledger_agrees() {
        let kind = |wanted, now: Option<&crate::store::PaymentNow>| {
            conflict_ticket((wanted, None), Some("A-1"), now).map(|(o, _)| o)
        };
        // Paid, yet failed since: the retry-pays-twice case.
        assert_eq!(
            kind(Status::Succeeded, Some(&now("FAILED", "A-1"))),
            Some(Outcome::FailedButPaid)
        );
        // Proven unpaid, yet succeeded since.
        assert_eq!(
            kind(Status::Failed, Some(&now("SUCCEEDED", "A-1"))),
            Some(Outcome::MissingAtProvider)
        );
        // A retry started (new attempt) for a payment a line shows paid.
        assert_eq!(
            kind(Status::Succeeded, Some(&now("SUBMITTING", "A-2"))),
            Some(Outcome::Ambiguous)
        );
        // A human took it over.
        assert_eq!(
            kind(Status::Failed, Some(&now("REVIEW", "A-1"))),
            Some(Outcome::Ambiguous)
        );
        // Gone from the ledger.
        assert_eq!(kind(Status::Failed, None), Some(Outcome::Ambiguous));
        // The ledger moved to exactly what recon wanted, on the same attempt: no ticket.
        assert_eq!(
            kind(Status::Succeeded, Some(&now("SUCCEEDED", "A-1"))),
            None
        );
        // The same status on another attempt is not agreement.
        assert_eq!(
            kind(Status::Succeeded, Some(&now("SUCCEEDED", "A-2"))),
            Some(Outcome::Ambiguous)
        );
    }

    /// Issue 33: someone else set the payment SUCCEEDED, but the provider's id recon would have
    /// recorded is not in the ledger: a ticket names both, instead of dropping the id.
    #[test]
    fn succeeded_by_someone_else_without_the_lines_provider_id_is_a_ticket() {
        let with_id = |id: Option<&str>| crate::store::PaymentNow {
            provider_payment_id: id.map(str::to_string),
            ..now("SUCCEEDED", "A-1")
        };
        let ticket = |recorded: Option<&str>| {
            conflict_ticket(
                (Status::Succeeded, Some("PSP-9")),
                Some("A-1"),
                Some(&with_id(recorded)),
            )
        };
        let (outcome, detail) = ticket(None).expect("a ticket");
        assert_eq!(outcome, Outcome::Ambiguous);
        assert!(
            detail.contains("provider id none where the provider's line shows PSP-9"),
            "{detail}"
        );
        let (_, detail) = ticket(Some("PSP-1")).expect("another id is a ticket too");
        assert!(detail.contains("provider id PSP-1"), "{detail}");
        // The same id: the ledger agrees in full.
        assert_eq!(ticket(Some("PSP-9")), None);
        // Nothing to record (no line id): agreement as before.
        assert_eq!(
            conflict_ticket((Status::Succeeded, None), Some("A-1"), Some(&with_id(None))),
            None
        );
    }
}
