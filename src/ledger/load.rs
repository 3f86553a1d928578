//! Loads the payments a run needs: every payment anchored (started, or created if never sent)
//! in the candidate range, with recon's own latest transition, follow-up bookkeeping and every
//! provider id recorded on the payment or its attempts.
//!
//! Bulk rows are read through [`super::sqlite_raw`]; each query is a range scan on an index.

use super::sqlite_raw::{self, Row};
use super::{Payment, Status};
use crate::exit::{Failure, fail};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use foldhash::{HashMap, HashMapExt};
use sqlx::SqlitePool;

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadRange {
    /// Candidates: anchored in `[lo, hi)`.
    pub lo: Micros,
    /// End of the candidate range.
    pub hi: Micros,
    /// Attempts started from here on are searched for provider ids (retries can be older
    /// than the payment's current attempt).
    pub attempts_lo: Micros,
    /// First day of the run (YYYY-MM-DD): follow-ups still open or closed on or after it.
    pub from_day: String,
}

/// The loaded ledger.
#[derive(Debug, Clone, Default)]
pub struct LoadedLedger {
    /// Payments, sorted by payment_id.
    pub payments: Vec<Payment>,
    /// (index into `payments`, provider id) recorded on the payments' attempts, by index
    /// (the id on the payment row itself is in [`Payment::provider_payment_id`]).
    pub provider_ids: Vec<(u32, String)>,
}

const COLUMNS: &str = "payment_id, recipient_account, amount_minor, currency, status, created_at, \
                       started_at, attempt_id, provider_payment_id";

/// `+col` stops SQLite from using the index on `col`: a plain scan is about 5× faster than
/// index lookups when the range holds most of the table (a benchmark or a back-fill), while the
/// index wins for a night's slice of a long ledger. See [`wide_range`].
fn column(name: &str, scan: bool) -> String {
    if scan {
        format!("+{name}")
    } else {
        name.to_string()
    }
}

fn payments_sql(scan: bool) -> String {
    if scan {
        // One pass over the table.
        return format!(
            "SELECT {COLUMNS} FROM payments
             WHERE coalesce(+started_at, +created_at) >= ?1 AND coalesce(+started_at, +created_at) < ?2"
        );
    }
    format!(
        "SELECT {COLUMNS} FROM payments WHERE started_at >= ?1 AND started_at < ?2
         UNION ALL
         SELECT {COLUMNS} FROM payments WHERE started_at IS NULL AND created_at >= ?1 AND created_at < ?2"
    )
}

fn attempt_ids_sql(scan: bool) -> String {
    let s = column("started_at", scan);
    format!(
        "SELECT payment_id, provider_payment_id FROM payment_attempts
         WHERE provider_payment_id IS NOT NULL AND {s} >= ?1 AND {s} < ?2"
    )
}

/// Whether `[lo, hi)` covers more than a quarter of the time span of `table.column` (read from
/// the index's two ends, so this costs two lookups).
async fn wide_range(
    conn: &mut sqlx::SqliteConnection,
    table: &str,
    col: &str,
    lo: &str,
    hi: &str,
) -> Result<bool> {
    let sql = format!("SELECT (SELECT min({col}) FROM {table}), (SELECT max({col}) FROM {table})");
    let mut span = (None, None);
    sqlite_raw::query(conn, &sql, &[], |row| {
        span = (row.text(0), row.text(1));
        Ok(())
    })
    .await?;
    let (Some(min), Some(max)) = span else {
        return Ok(false);
    };
    let t = |s: &str| timeparse::from_db(s).unwrap_or(0);
    let (min, max, lo, hi) = (t(&min), t(&max), t(lo), t(hi));
    let covered = hi.min(max + 1) - lo.max(min);
    Ok(covered > 0 && covered.saturating_mul(4) > (max + 1 - min))
}

const HISTORY_SQL: &str = "SELECT id, payment_id, actor, from_status, to_status
                           FROM payment_status_history WHERE changed_at >= ?1";
const FOLLOWUPS_SQL: &str = "SELECT payment_id, opened_on, closed_on FROM recon_followups
                             WHERE closed_on IS NULL OR closed_on >= ?1";

fn bad_row(id: &str, what: String) -> anyhow::Error {
    fail(
        Failure::Database,
        format!("loading the ledger: payment {id:?}: {what}"),
    )
}

fn required(row: &Row, i: i32, id: &str, col: &str) -> Result<String> {
    row.text(i)
        .ok_or_else(|| bad_row(id, format!("{col} is NULL")))
}

fn payment(row: &Row) -> Result<Payment> {
    let id = row
        .text(0)
        .ok_or_else(|| bad_row("", "payment_id is NULL".into()))?;
    let status = row
        .with_text(4, |t| {
            Status::parse(t).ok_or_else(|| format!("unknown status {t:?}"))
        })
        .ok_or_else(|| bad_row(&id, "status is NULL".into()))?
        .map_err(|e| bad_row(&id, e))?;
    let created_at = row
        .with_text(5, timeparse::from_db)
        .ok_or_else(|| bad_row(&id, "created_at is NULL".into()))?
        .map_err(|e| bad_row(&id, e))?;
    let started_at = row
        .with_text(6, timeparse::from_db)
        .transpose()
        .map_err(|e| bad_row(&id, e))?;
    Ok(Payment {
        recipient: required(row, 1, &id, "recipient_account")?,
        amount_minor: row.int(2),
        currency: row
            .with_text(3, |c| crate::money::currency(c).map(|(code, _)| code))
            .ok_or_else(|| bad_row(&id, "currency is NULL".into()))?
            .map_err(|e| bad_row(&id, e.to_string()))?,
        current_status: status,
        status,
        attempt_id: row.text(7),
        provider_payment_id: row.text(8),
        started_at,
        created_at,
        followup: None,
        payment_id: id,
    })
}

/// Loads payments and provider ids for a run.
pub async fn load(pool: &SqlitePool, range: &LoadRange) -> Result<LoadedLedger> {
    let lo = timeparse::to_db(range.lo);
    let hi = timeparse::to_db(range.hi);
    let attempts_lo = timeparse::to_db(range.attempts_lo.min(range.lo));
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| fail(Failure::Database, format!("loading the ledger: {e}")))?;

    let mut payments = Vec::new();
    let scan = wide_range(&mut conn, "payments", "started_at", &lo, &hi).await?;
    sqlite_raw::query(&mut conn, &payments_sql(scan), &[&lo, &hi], |row| {
        payments.push(payment(row)?);
        Ok(())
    })
    .await?;
    payments.sort_unstable_by(|a, b| a.payment_id.cmp(&b.payment_id));
    // payment_id → position, for attaching history, follow-ups and attempts' provider ids.
    // The map borrows the ids; changes are collected and applied after it is dropped.
    let positions: HashMap<&str, u32> = {
        let mut m = HashMap::with_capacity(payments.len());
        for (i, p) in payments.iter().enumerate() {
            m.insert(p.payment_id.as_str(), i as u32);
        }
        m
    };

    // recon's own latest transition: classify on the status before it, so that re-running a
    // range reproduces RESOLVED_* instead of reporting recon's own result back as MATCHED.
    let mut latest: HashMap<u32, (i64, String, String, String)> = HashMap::new();
    sqlite_raw::query(&mut conn, HISTORY_SQL, &[&lo], |row| {
        let (Some(pid), Some(actor), Some(from), Some(to)) =
            (row.text(1), row.text(2), row.text(3), row.text(4))
        else {
            return Ok(());
        };
        let Some(&i) = positions.get(pid.as_str()) else {
            return Ok(());
        };
        let id = row.int(0);
        match latest.get(&i) {
            Some((seen, ..)) if *seen > id => {}
            _ => {
                latest.insert(i, (id, actor, from, to));
            }
        }
        Ok(())
    })
    .await?;
    let mut followups: Vec<(u32, (String, Option<String>))> = Vec::new();
    sqlite_raw::query(&mut conn, FOLLOWUPS_SQL, &[&range.from_day], |row| {
        if let (Some(pid), Some(opened)) = (row.text(0), row.text(1))
            && let Some(&i) = positions.get(pid.as_str())
        {
            followups.push((i, (opened, row.text(2))));
        }
        Ok(())
    })
    .await?;
    let mut provider_ids: Vec<(u32, String)> = Vec::new();
    let scan = wide_range(
        &mut conn,
        "payment_attempts",
        "started_at",
        &attempts_lo,
        &hi,
    )
    .await?;
    sqlite_raw::query(
        &mut conn,
        &attempt_ids_sql(scan),
        &[&attempts_lo, &hi],
        |row| {
            // The current attempt's id is usually already on the payment row: skip it.
            if let Some(Some(i)) = row.with_text(0, |s| positions.get(s).copied())
                && let Some(Some(ppid)) = row.with_text(1, |id| {
                    (payments[i as usize].provider_payment_id.as_deref() != Some(id))
                        .then(|| id.to_string())
                })
            {
                provider_ids.push((i, ppid));
            }
            Ok(())
        },
    )
    .await?;
    drop(positions);
    for (i, (_, actor, from, to)) in latest {
        let p = &mut payments[i as usize];
        if actor == "recon" && to == p.current_status.as_str() {
            p.status = Status::parse(&from).unwrap_or(p.current_status);
        }
    }
    for (i, f) in followups {
        payments[i as usize].followup = Some(f);
    }
    provider_ids.sort_unstable_by_key(|(i, _)| *i);
    Ok(LoadedLedger {
        payments,
        provider_ids,
    })
}
