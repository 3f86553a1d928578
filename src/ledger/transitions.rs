//! Guarded status transitions (DESIGN.md rule 3): a conditional update plus an append-only
//! history row, inside the caller's transaction. Zero rows affected means someone else moved
//! the payment: recorded as a conflict, never forced.

use super::Status;
use crate::exit::{Failure, fail};
use anyhow::Result;
use sqlx::SqliteConnection;

/// One status change recon wants to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Payment id.
    pub payment_id: String,
    /// Status the payment must still have.
    pub from: Status,
    /// New status.
    pub to: Status,
    /// Attempt the payment must still be on.
    pub attempt_id: Option<String>,
    /// Provider id to record (RESOLVED_SUCCEEDED).
    pub provider_payment_id: Option<String>,
    /// Why (outcome, rule, evidence).
    pub reason: String,
}

/// What happened to a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The update went through and history was written.
    Applied,
    /// An earlier run of recon already made exactly this change.
    AlreadyApplied,
    /// Someone else changed the payment since it was loaded: left alone.
    Conflict,
}

fn db_err(e: sqlx::Error) -> anyhow::Error {
    fail(Failure::Database, format!("applying a transition: {e}"))
}

/// Applies `t` on `conn` (which should be inside a transaction).
pub async fn apply(
    conn: &mut SqliteConnection,
    t: &Transition,
    run_id: &str,
    now: &str,
) -> Result<Applied> {
    let r = apply_batch(conn, std::slice::from_ref(t), run_id, now).await?;
    Ok(r.first().copied().unwrap_or(Applied::Conflict))
}

/// A payment's status and its latest history row (actor, from_status, attempt_id).
type LatestState = (String, Option<String>, Option<String>, Option<String>);

/// Rows per statement in the batched forms (5–10 binds each, far below SQLite's limit).
const BATCH: usize = 500;

/// Applies many transitions with a handful of statements (one conditional `UPDATE … FROM
/// (VALUES …) RETURNING` per batch, one multi-row history insert, one check of the rest), with
/// exactly the semantics of [`apply`] for each. Returns one result per input, in order.
pub async fn apply_batch(
    conn: &mut SqliteConnection,
    ts: &[Transition],
    run_id: &str,
    now: &str,
) -> Result<Vec<Applied>> {
    use sqlx::{QueryBuilder, Sqlite};
    use std::collections::{HashMap, HashSet};
    let mut out = vec![Applied::Conflict; ts.len()];
    for (c, chunk) in ts.chunks(BATCH).enumerate() {
        let base = c * BATCH;
        let mut q: QueryBuilder<Sqlite> =
            QueryBuilder::new("WITH v(payment_id, from_status, to_status, attempt_id, ppid) AS (");
        q.push_values(chunk, |mut b, t| {
            b.push_bind(&t.payment_id)
                .push_bind(t.from.as_str())
                .push_bind(t.to.as_str())
                .push_bind(&t.attempt_id)
                .push_bind(&t.provider_payment_id);
        });
        q.push(
            ") UPDATE payments SET status = v.to_status, \
             provider_payment_id = coalesce(v.ppid, payments.provider_payment_id), updated_at = ",
        );
        q.push_bind(now);
        q.push(
            " FROM v WHERE payments.payment_id = v.payment_id AND payments.status = v.from_status \
             AND payments.attempt_id IS v.attempt_id RETURNING payments.payment_id",
        );
        let updated: Vec<(String,)> = q
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        let updated: HashSet<String> = updated.into_iter().map(|(id,)| id).collect();
        let applied: Vec<&Transition> = chunk
            .iter()
            .filter(|t| updated.contains(&t.payment_id))
            .collect();
        if !applied.is_empty() {
            let mut h: QueryBuilder<Sqlite> = QueryBuilder::new(
                "INSERT INTO payment_status_history (payment_id, from_status, to_status, attempt_id, \
                 provider_payment_id, actor, run_id, reason, changed_at) ",
            );
            h.push_values(&applied, |mut b, t| {
                b.push_bind(&t.payment_id)
                    .push_bind(t.from.as_str())
                    .push_bind(t.to.as_str())
                    .push_bind(&t.attempt_id)
                    .push_bind(&t.provider_payment_id)
                    .push_bind("recon")
                    .push_bind(run_id)
                    .push_bind(&t.reason)
                    .push_bind(now);
            });
            h.build().execute(&mut *conn).await.map_err(db_err)?;
        }
        let rest: Vec<&Transition> = chunk
            .iter()
            .filter(|t| !updated.contains(&t.payment_id))
            .collect();
        let mut state: HashMap<String, LatestState> = HashMap::new();
        if !rest.is_empty() {
            let mut s: QueryBuilder<Sqlite> = QueryBuilder::new(
                "SELECT p.payment_id, p.status, h.actor, h.from_status, h.attempt_id FROM payments p \
                 LEFT JOIN payment_status_history h ON h.id = \
                 (SELECT max(id) FROM payment_status_history x WHERE x.payment_id = p.payment_id) \
                 WHERE p.payment_id IN (",
            );
            let mut sep = s.separated(", ");
            for t in &rest {
                sep.push_bind(&t.payment_id);
            }
            s.push(")");
            #[allow(clippy::type_complexity)]
            let rows: Vec<(
                String,
                String,
                Option<String>,
                Option<String>,
                Option<String>,
            )> = s
                .build_query_as()
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err)?;
            state = rows
                .into_iter()
                .map(|(id, st, actor, from, attempt)| (id, (st, actor, from, attempt)))
                .collect();
        }
        for (i, t) in chunk.iter().enumerate() {
            out[base + i] = if updated.contains(&t.payment_id) {
                Applied::Applied
            } else {
                match state.get(&t.payment_id) {
                    Some((status, Some(actor), Some(from), attempt))
                        if status == t.to.as_str()
                            && actor == "recon"
                            && from == t.from.as_str()
                            && *attempt == t.attempt_id =>
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
