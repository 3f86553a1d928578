//! Loads the payments a run needs: those anchored in the candidate time range, plus the
//! unresolved and followed-up payments of the carry-over horizon.

use super::{Payment, Status};
use crate::exit::{Failure, fail};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use futures_util::TryStreamExt;
use sqlx::SqlitePool;

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadRange {
    /// Candidates: anchored in `[lo, hi)`.
    pub lo: Micros,
    /// End of the candidate range.
    pub hi: Micros,
    /// Carry-over horizon start: unresolved payments anchored in `[carry_lo, hi)`.
    pub carry_lo: Micros,
    /// First day of the run (YYYY-MM-DD): followups closed on or after it are loaded.
    pub from_day: String,
}

/// Provider ids recorded on a payment or on any of its attempts.
#[derive(Debug, Clone, Default)]
pub struct LoadedLedger {
    /// Payments, sorted by payment_id.
    pub payments: Vec<Payment>,
    /// (index into `payments`, provider id), from the payment row and all attempts.
    pub provider_ids: Vec<(u32, String)>,
}

type Row = (
    String,
    String,
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

const PAYMENTS_SQL: &str = "
SELECT p.payment_id, p.recipient_account, p.amount_minor, p.currency, p.status, p.created_at,
       p.started_at, p.attempt_id, p.provider_payment_id,
       h.actor, h.from_status, h.to_status,
       f.opened_on, f.closed_on
FROM payments p
LEFT JOIN payment_status_history h
       ON h.id = (SELECT max(id) FROM payment_status_history x WHERE x.payment_id = p.payment_id)
LEFT JOIN recon_followups f ON f.payment_id = p.payment_id
WHERE (coalesce(p.started_at, p.created_at) >= ?1 AND coalesce(p.started_at, p.created_at) < ?2)
   OR (coalesce(p.started_at, p.created_at) >= ?3 AND coalesce(p.started_at, p.created_at) < ?2
       AND (p.status IN ('UNKNOWN', 'SUBMITTING', 'REVIEW')
            OR (f.payment_id IS NOT NULL AND (f.closed_on IS NULL OR f.closed_on >= ?4))))
ORDER BY p.payment_id";

const PROVIDER_IDS_SQL: &str = "
SELECT a.payment_id, a.provider_payment_id
FROM payment_attempts a
JOIN payments p ON p.payment_id = a.payment_id
WHERE a.provider_payment_id IS NOT NULL
  AND coalesce(p.started_at, p.created_at) >= ?1 AND coalesce(p.started_at, p.created_at) < ?2";

fn db_err(e: sqlx::Error) -> anyhow::Error {
    fail(Failure::Database, format!("loading the ledger: {e}"))
}

fn bad_row(id: &str, what: String) -> anyhow::Error {
    fail(
        Failure::Database,
        format!("loading the ledger: payment {id:?}: {what}"),
    )
}

/// Loads payments and provider ids for a run.
pub async fn load(pool: &SqlitePool, range: &LoadRange) -> Result<LoadedLedger> {
    let lo = timeparse::to_db(range.lo);
    let hi = timeparse::to_db(range.hi);
    let carry_lo = timeparse::to_db(range.carry_lo.min(range.lo));
    let mut payments = Vec::new();
    let mut rows = sqlx::query_as::<_, Row>(PAYMENTS_SQL)
        .bind(&lo)
        .bind(&hi)
        .bind(&carry_lo)
        .bind(&range.from_day)
        .fetch(pool);
    while let Some(r) = rows.try_next().await.map_err(db_err)? {
        let (id, recipient, amount_minor, currency, status, created, started, attempt, ppid) =
            (r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8);
        let current_status = Status::parse(&status)
            .ok_or_else(|| bad_row(&id, format!("unknown status {status:?}")))?;
        // Classify on the status before recon's own latest transition, so that re-running a
        // range reproduces RESOLVED_* instead of reporting recon's own result back as MATCHED.
        let status = match (r.9.as_deref(), r.10.as_deref(), r.11.as_deref()) {
            (Some("recon"), Some(from), Some(to)) if to == current_status.as_str() => {
                Status::parse(from).unwrap_or(current_status)
            }
            _ => current_status,
        };
        let created_at = timeparse::from_db(&created).map_err(|e| bad_row(&id, e))?;
        let started_at = started
            .as_deref()
            .map(timeparse::from_db)
            .transpose()
            .map_err(|e| bad_row(&id, e))?;
        payments.push(Payment {
            payment_id: id,
            recipient,
            amount_minor,
            currency,
            current_status,
            status,
            attempt_id: attempt,
            provider_payment_id: ppid,
            started_at,
            created_at,
            followup: r.12.map(|o| (o, r.13)),
        });
    }
    drop(rows);
    let mut provider_ids: Vec<(u32, String)> = Vec::new();
    let index = |id: &str| {
        payments
            .binary_search_by(|p: &Payment| p.payment_id.as_str().cmp(id))
            .ok()
            .map(|i| i as u32)
    };
    for (i, p) in payments.iter().enumerate() {
        if let Some(ppid) = &p.provider_payment_id {
            provider_ids.push((i as u32, ppid.clone()));
        }
    }
    let mut rows = sqlx::query_as::<_, (String, String)>(PROVIDER_IDS_SQL)
        .bind(&carry_lo)
        .bind(&hi)
        .fetch(pool);
    while let Some((pid, ppid)) = rows.try_next().await.map_err(db_err)? {
        if let Some(i) = index(&pid) {
            provider_ids.push((i, ppid));
        }
    }
    drop(rows);
    provider_ids.sort_unstable();
    provider_ids.dedup();
    Ok(LoadedLedger {
        payments,
        provider_ids,
    })
}
