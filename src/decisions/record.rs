//! The cases of a committed run, stored in the run's transaction: what `recon decisions
//! apply` checks a row against ("the case as it is now": as the latest committed run stored
//! it), and what earlier decisions left on the cases for the next report.

use crate::ledger::Payment;
use crate::model::Id;
use crate::report::ReportView;
use crate::report::cases::Marks;
use crate::store::Tx;
use crate::store::cases::{CaseCandidate, CasePayment, NewCase};
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// A ticket's dedupe key as the run's effects wrote it, from a review row of the view.
fn dedupe_key(item: &crate::report::Item) -> String {
    let lines: Vec<String> = item
        .lines
        .iter()
        .map(|l| format!("{}:{}", l.origin.source, l.id))
        .collect();
    crate::tickets::dedupe_key(
        item.outcome.as_str(),
        item.payment_id.as_ref().map(Id::to_string).as_deref(),
        &lines.join(";"),
    )
}

/// Stores every case of `view` (the run's review rows) with its payments as the run loaded
/// them (status and attempt now, which a status decision is guarded on), its numbered
/// candidates and its tickets. Inside the run's transaction, after its tickets.
pub async fn record(
    tx: &mut Tx,
    view: &ReportView,
    payments: &[Payment],
    run_id: &str,
    now: &str,
) -> Result<()> {
    if view.cases.is_empty() {
        return Ok(());
    }
    let wanted: HashSet<&Id> = view.cases.iter().flat_map(|c| c.payments.iter()).collect();
    let states: HashMap<&Id, (&str, Option<String>)> = payments
        .iter()
        .filter(|p| wanted.contains(&p.payment_id))
        .map(|p| {
            (
                &p.payment_id,
                (
                    p.current_status.as_str(),
                    p.attempt_id.as_ref().map(Id::to_string),
                ),
            )
        })
        .collect();
    let keys: Vec<String> = view
        .cases
        .iter()
        .flat_map(|c| c.members.iter().map(|&i| dedupe_key(&view.items[i])))
        .collect();
    let ids = tx.ticket_ids_by_key(&keys).await?;
    let mut out = Vec::with_capacity(view.cases.len());
    for c in &view.cases {
        let case_payments: Vec<CasePayment> = c
            .payments
            .iter()
            .map(|p| {
                let (status, attempt) = states
                    .get(p)
                    .map(|(s, a)| (s.to_string(), a.clone()))
                    .unwrap_or_else(|| ("PENDING".into(), None));
                CasePayment {
                    payment_id: p.to_string(),
                    status,
                    attempt_id: attempt,
                }
            })
            .collect();
        let candidates: Vec<CaseCandidate> = c
            .candidates
            .iter()
            .map(|k| CaseCandidate {
                number: k.number,
                payment_id: k.payment_id.to_string(),
                source: k.line.origin.source.to_string(),
                line_id: k.line.id.to_string(),
                text: k.text(),
            })
            .collect();
        let mut tickets: Vec<i64> = c
            .members
            .iter()
            .filter_map(|&i| ids.get(&dedupe_key(&view.items[i])).copied())
            .collect();
        tickets.sort_unstable();
        tickets.dedup();
        out.push(NewCase {
            key: c.key.clone(),
            kind: c.kind.as_str().to_string(),
            severity: c.severity.as_str().to_string(),
            outcome: c.outcome.as_str().to_string(),
            fingerprint: c.fingerprint.clone(),
            // What and whose, as the email says it: `AMBIGUOUS: payments P-1, P-2, line L-9`.
            what: format!("{}: {}", c.what(), c.whose()),
            why: c.why.clone(),
            at_risk: c.amount_text(),
            payments: serde_json::to_string(&case_payments)?,
            candidates: serde_json::to_string(&candidates)?,
            ticket_ids: serde_json::to_string(&tickets)?,
        });
    }
    tx.upsert_cases(&out, run_id, now).await
}

/// What earlier decisions left on the cases: the settled ones (dismissed or decided on the
/// evidence they had), and a status text for those escalated or waiting for a second reviewer.
pub async fn marks(db: &crate::db::Db) -> Result<Marks> {
    let mut tx = db.begin().await?;
    let marked = tx.marked_cases().await?;
    let waiting = tx.waiting_decisions().await?;
    tx.rollback().await?;
    let mut m = Marks::default();
    for (key, fp, status, by) in marked {
        match status.as_str() {
            "DISMISSED" | "DECIDED" => {
                m.settled.insert((key, fp));
            }
            other => {
                m.status
                    .insert(key, format!("{} by {by}", other.to_lowercase()));
            }
        }
    }
    for d in waiting {
        let s = m.status.entry(d.case_key).or_default();
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str(&format!(
            "waiting for a second reviewer: {} by {}",
            d.decision, d.actor
        ));
    }
    Ok(m)
}
