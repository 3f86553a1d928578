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
    let done = sqlx::query(
        "UPDATE payments SET status = ?1, provider_payment_id = coalesce(?2, provider_payment_id), updated_at = ?3
         WHERE payment_id = ?4 AND status = ?5 AND attempt_id IS ?6",
    )
    .bind(t.to.as_str())
    .bind(&t.provider_payment_id)
    .bind(now)
    .bind(&t.payment_id)
    .bind(t.from.as_str())
    .bind(&t.attempt_id)
    .execute(&mut *conn)
    .await
    .map_err(db_err)?
    .rows_affected();
    if done == 1 {
        sqlx::query(
            "INSERT INTO payment_status_history
               (payment_id, from_status, to_status, attempt_id, provider_payment_id, actor, run_id, reason, changed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'recon', ?6, ?7, ?8)",
        )
        .bind(&t.payment_id)
        .bind(t.from.as_str())
        .bind(t.to.as_str())
        .bind(&t.attempt_id)
        .bind(&t.provider_payment_id)
        .bind(run_id)
        .bind(&t.reason)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
        return Ok(Applied::Applied);
    }
    let latest: Option<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT p.status, h.actor, h.from_status, h.attempt_id
         FROM payments p
         JOIN payment_status_history h
           ON h.id = (SELECT max(id) FROM payment_status_history x WHERE x.payment_id = p.payment_id)
         WHERE p.payment_id = ?1",
    )
    .bind(&t.payment_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_err)?;
    Ok(match latest {
        Some((status, actor, from, attempt))
            if status == t.to.as_str()
                && actor == "recon"
                && from == t.from.as_str()
                && attempt == t.attempt_id =>
        {
            Applied::AlreadyApplied
        }
        _ => Applied::Conflict,
    })
}
