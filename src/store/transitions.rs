//! The payments' guarded status transitions and their history (`payments`,
//! `payment_status_history`), and the payments' states as they are now.

use super::sql::Bind;
use super::{Tx, db_err};
use crate::db::IdColumn;
use crate::ledger::transitions::{Applied, Transition};
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// A payment's status and its latest history row (actor, from_status, attempt_id).
type LatestState = (String, Option<String>, Option<String>, Option<String>);

/// Applies `t` inside `tx` (a convenience over [`Tx::apply_transitions`]).
pub async fn apply(tx: &mut Tx, t: &Transition, run_id: &str, now: &str) -> Result<Applied> {
    let r = tx
        .apply_transitions(std::slice::from_ref(t), run_id, now)
        .await?;
    Ok(r.first().copied().unwrap_or(Applied::Conflict))
}

impl Tx {
    /// Guarded transitions with history (DESIGN.md rule 3): one conditional
    /// `UPDATE … FROM (VALUES …) RETURNING` per batch, one multi-row history insert, one look
    /// at the rest to tell "recon already did this" from a conflict. One result per
    /// transition, in order.
    pub async fn apply_transitions(
        &mut self,
        ts: &[Transition],
        run_id: &str,
        now: &str,
    ) -> Result<Vec<Applied>> {
        self.apply_transitions_by(ts, "recon", Some(run_id), now)
            .await
    }

    /// [`Tx::apply_transitions`] made by `actor` (a reviewer's decision: the same guard and
    /// history row, with the reviewer as actor and `run_id` None). `AlreadyApplied` means
    /// the latest history row is this actor's same change.
    pub async fn apply_transitions_by(
        &mut self,
        ts: &[Transition],
        actor: &str,
        run_id: Option<&str>,
        now: &str,
    ) -> Result<Vec<Applied>> {
        let err = db_err("applying transitions");
        let batch = self.batch();
        // The attempt id a history row of `t` holds: what recon wrote, which a `uuid` column
        // keeps as the canonical text of the UUID (the payment's own column may spell it
        // otherwise when it is text).
        let ids = self.id_types();
        let canonical =
            ids.is_uuid(IdColumn::HistoryAttemptId) && !ids.is_uuid(IdColumn::PaymentAttemptId);
        let history_attempt = |t: &Transition| -> Option<String> {
            let a = t.attempt_id.as_deref()?;
            Some(if canonical {
                crate::model::canonical_uuid(a).unwrap_or_else(|| a.to_string())
            } else {
                a.to_string()
            })
        };
        let mut out = vec![Applied::Conflict; ts.len()];
        for (c, chunk) in ts.chunks(batch).enumerate() {
            let base = c * batch;
            let mut q =
                self.sql("WITH v(payment_id, from_status, to_status, attempt_id, ppid) AS (");
            // The ids in the types of the columns they are compared with.
            q.push_values(chunk, |mut b, t| {
                b.push_id(IdColumn::PaymentId, &t.payment_id)
                    .push_bind(t.from.as_str())
                    .push_bind(t.to.as_str())
                    .push_id(IdColumn::PaymentAttemptId, &t.attempt_id)
                    .push_bind(&t.provider_payment_id);
            });
            q.push(
                ") UPDATE payments SET status = v.to_status, \
                 provider_payment_id = coalesce(v.ppid, payments.provider_payment_id), updated_at = ",
            );
            q.push_bind(Bind::Ts(now));
            q.push(
                " FROM v WHERE payments.payment_id = v.payment_id \
                 AND payments.status = v.from_status \
                 AND payments.attempt_id IS NOT DISTINCT FROM v.attempt_id \
                 RETURNING ",
            );
            q.push_id_text(IdColumn::PaymentId, "payments.payment_id");
            let updated: Vec<String> = self.fetch_all(q, |r| r.text(0)).await.map_err(&err)?;
            let updated: HashSet<String> = updated.into_iter().collect();
            let applied: Vec<&Transition> = chunk
                .iter()
                .filter(|t| updated.contains(&t.payment_id))
                .collect();
            if !applied.is_empty() {
                let mut h = self.sql(
                    "INSERT INTO payment_status_history (payment_id, from_status, to_status, \
                     attempt_id, provider_payment_id, prior_provider_payment_id, actor, \
                     run_id, reason, changed_at) ",
                );
                h.push_values(&applied, |mut b, t| {
                    b.push_id(IdColumn::HistoryPaymentId, &t.payment_id)
                        .push_bind(t.from.as_str())
                        .push_bind(t.to.as_str())
                        .push_id(IdColumn::HistoryAttemptId, &t.attempt_id)
                        .push_bind(&t.provider_payment_id)
                        .push_bind(t.prior_provider_payment_id.as_deref().unwrap_or(""))
                        .push_bind(actor)
                        .push_bind(run_id)
                        .push_bind(&t.reason)
                        .push_bind(Bind::Ts(now));
                });
                self.execute(h).await.map_err(&err)?;
            }
            let rest: Vec<&Transition> = chunk
                .iter()
                .filter(|t| !updated.contains(&t.payment_id))
                .collect();
            let mut state: HashMap<String, LatestState> = HashMap::new();
            if !rest.is_empty() {
                let mut s = self.sql("SELECT ");
                s.push_id_text(IdColumn::PaymentId, "p.payment_id")
                    .push(", p.status, h.actor, h.from_status, ")
                    .push_id_text(IdColumn::HistoryAttemptId, "h.attempt_id")
                    .push(
                        " FROM payments p LEFT JOIN payment_status_history h ON h.id = \
                         (SELECT max(id) FROM payment_status_history x WHERE x.payment_id = ",
                    )
                    // Converted to the history's type, whose index (payment_id, id) serves.
                    .push_id_as(
                        IdColumn::PaymentId,
                        "p.payment_id",
                        IdColumn::HistoryPaymentId,
                    )
                    .push(") WHERE p.payment_id IN (");
                let mut sep = s.separated(", ");
                for t in &rest {
                    sep.push_id(IdColumn::PaymentId, &t.payment_id);
                }
                s.push(")");
                let rows = self
                    .fetch_all(s, |r| {
                        let id = r.text(0)?;
                        Ok((
                            id,
                            (r.text(1)?, r.opt_text(2)?, r.opt_text(3)?, r.opt_text(4)?),
                        ))
                    })
                    .await
                    .map_err(&err)?;
                state = rows.into_iter().collect();
            }
            for (i, t) in chunk.iter().enumerate() {
                out[base + i] = if updated.contains(&t.payment_id) {
                    Applied::Applied
                } else {
                    match state.get(&t.payment_id) {
                        Some((status, Some(by), Some(from), attempt))
                            if status == t.to.as_str()
                                && by == actor
                                && from == t.from.as_str()
                                && *attempt == history_attempt(t) =>
                        {
                            Applied::AlreadyApplied
                        }
                        _ => Applied::Conflict,
                    }
                };
            }
        }
        Ok(out)
    }

    /// Every status change a person made (any actor but recon), oldest first: (payment id,
    /// to status, actor). What `recon backtest` compares a candidate rule's decisions with.
    pub async fn human_status_changes(&mut self) -> Result<Vec<(String, String, String)>> {
        let mut q = self.sql("SELECT ");
        q.push_id_text(IdColumn::HistoryPaymentId, "payment_id")
            .push(
                ", to_status, actor FROM payment_status_history WHERE actor <> 'recon' ORDER BY id",
            );
        self.fetch_all(q, |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))
            .await
            .map_err(db_err("payment status history"))
    }

    /// (status, attempt_id, provider_payment_id) of each of `ids` now.
    pub async fn payment_states(&mut self, ids: &[String]) -> Result<HashMap<String, PaymentNow>> {
        let mut out = HashMap::new();
        for chunk in ids.chunks(self.batch()) {
            let mut q = self.sql("SELECT ");
            q.push_id_text(IdColumn::PaymentId, "payment_id")
                .push(", status, ")
                .push_id_text(IdColumn::PaymentAttemptId, "attempt_id")
                .push(", provider_payment_id FROM payments WHERE payment_id IN (");
            let mut sep = q.separated(", ");
            for id in chunk {
                sep.push_id(IdColumn::PaymentId, id.as_str());
            }
            q.push(")");
            let rows = self
                .fetch_all(q, |r| {
                    Ok((
                        r.text(0)?,
                        PaymentNow {
                            status: r.text(1)?,
                            attempt_id: r.opt_text(2)?,
                            provider_payment_id: r.opt_text(3)?,
                        },
                    ))
                })
                .await
                .map_err(db_err("reading payments"))?;
            out.extend(rows);
        }
        Ok(out)
    }
}

/// A payment's row as the ledger has it now ([`Tx::payment_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentNow {
    /// Its status.
    pub status: String,
    /// Its current attempt.
    pub attempt_id: Option<String>,
    /// The provider's id recorded for it.
    pub provider_payment_id: Option<String>,
}
