//! Loads the payments a run needs: every payment anchored (its current attempt started, or
//! created if never sent; see [`super::clock`]) in the candidate range, with recon's own latest transition, follow-up bookkeeping and every
//! provider id recorded on the payment or its attempts.
//!
//! Bulk rows are read through [`super::sqlite_raw`]; each query is a range scan on an index.

use super::rows::{COLUMNS, index, payment, pg_payment, pg_payment_columns, pg_ts};
use super::sqlite_raw;
use super::{Payment, Status};
use crate::config::LedgerQueries;
use crate::db::{Db, Pool};
use crate::exit::{Failure, fail};
use crate::partition::Select;
use crate::timeparse::{self, Micros};
use anyhow::Result;
use foldhash::{HashMap, HashMapExt};
use sqlx::{PgPool, SqlitePool};

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadRange {
    /// Candidates: anchored in `[lo, hi)` (by their current attempt's start, [`super::clock`]).
    pub lo: Micros,
    /// End of the candidate range.
    pub hi: Micros,
    /// Attempts started from here on are searched for provider ids (retries can be older
    /// than the payment's current attempt).
    pub attempts_lo: Micros,
    /// First day of the run (YYYY-MM-DD): follow-ups still open or closed on or after it.
    pub from_day: String,
    /// A partitioned job: each payment's partition column, and a shard's filter.
    pub partition: Option<crate::partition::Select>,
    /// Rebuild the payments as they were at this moment (`recon backtest`): the status changes
    /// recorded after it are taken back (`History`). None: as they are now.
    pub rewind: Option<Micros>,
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

impl LoadedLedger {
    /// Drops the payments created after `t` (a night rebuilt as of `t` had not seen them);
    /// returns how many.
    pub fn keep_created_by(&mut self, t: Micros) -> usize {
        let before = self.payments.len();
        if self.payments.iter().all(|p| p.created_at <= t) {
            return 0;
        }
        let mut new_index = Vec::with_capacity(before);
        let mut kept = 0u32;
        for p in &self.payments {
            if p.created_at <= t {
                new_index.push(Some(kept));
                kept += 1;
            } else {
                new_index.push(None);
            }
        }
        self.payments.retain(|p| p.created_at <= t);
        self.provider_ids = std::mem::take(&mut self.provider_ids)
            .into_iter()
            .filter_map(|(i, id)| new_index[i as usize].map(|j| (j, id)))
            .collect();
        before - self.payments.len()
    }
}

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

/// The payments query; a partitioned job adds each payment's partition as a tenth column and
/// a shard's filter to every branch.
fn payments_sql(scan: bool, custom: Option<&str>, partition: Option<&Select>) -> String {
    let (extra, filter) = match partition {
        Some(p) => (format!(", {}", p.column), p.and_filter()),
        None => (String::new(), String::new()),
    };
    if let Some(q) = custom {
        return format!(
            "SELECT {COLUMNS}{extra} FROM ({q}) AS p
             WHERE coalesce(started_at, created_at) >= ?1 AND coalesce(started_at, created_at) < ?2{filter}"
        );
    }
    if scan {
        // One pass over the table.
        return format!(
            "SELECT {COLUMNS}{extra} FROM payments
             WHERE coalesce(+started_at, +created_at) >= ?1 AND coalesce(+started_at, +created_at) < ?2{filter}"
        );
    }
    format!(
        "SELECT {COLUMNS}{extra} FROM payments WHERE started_at >= ?1 AND started_at < ?2{filter}
         UNION ALL
         SELECT {COLUMNS}{extra} FROM payments WHERE started_at IS NULL AND created_at >= ?1 AND created_at < ?2{filter}"
    )
}

fn attempt_ids_sql(scan: bool, custom: Option<&str>) -> String {
    let s = column("started_at", scan);
    let from = match custom {
        Some(q) => format!("({q}) AS a"),
        None => "payment_attempts".to_string(),
    };
    format!(
        "SELECT payment_id, provider_payment_id FROM {from}
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

/// The smallest and largest rowid of the payments ((0, -1) when empty): rowids are unique, so
/// a scan returns at most max − min + 1 rows, which sizes its vector once. Two index-end
/// lookups, where counting the range in the index (`at_most`) reads it whole. A scan is only
/// chosen for a range that covers a good part of the table, so the bound stays close.
async fn rowid_bounds(conn: &mut sqlx::SqliteConnection) -> Result<(i64, i64)> {
    let mut bounds = (0i64, -1i64);
    sqlite_raw::query(
        conn,
        "SELECT (SELECT min(rowid) FROM payments), (SELECT max(rowid) FROM payments)",
        &[],
        |row| {
            bounds = (row.int(0), row.int(1));
            Ok(())
        },
    )
    .await?;
    Ok(bounds)
}

/// A scan of at least this many rowids is read in two halves on two connections at once: the
/// payments' decoding is CPU work, and the statements are parsed beside it on one other core.
const SPLIT_SCAN_ROWS: i64 = 200_000;

/// Reads the payments of a full scan (`sql` without a rowid condition), in two rowid halves on
/// two connections at once when the table spans at least `split_from` rowids. Each half is its own read (as every query
/// of the load is): a row is read once, whole, and the guarded write catches any change since.
async fn scan_payments(
    pool: &SqlitePool,
    conn: &mut sqlx::SqliteConnection,
    sql: &str,
    (lo, hi): (&str, &str),
    split_from: i64,
) -> Result<Vec<Payment>> {
    let (min, max) = rowid_bounds(conn).await?;
    let rows = |from: i64, to: i64| usize::try_from(to - from + 1).unwrap_or(0);
    if max - min + 1 < split_from {
        return read_payments(conn, sql, (lo, hi), rows(min, max)).await;
    }
    let mid = min + (max - min + 1) / 2;
    let upper = {
        let pool = pool.clone();
        let (sql, lo, hi) = (
            format!("{sql} AND rowid >= {mid}"),
            lo.to_string(),
            hi.to_string(),
        );
        let capacity = rows(mid, max);
        tokio::spawn(async move {
            // Out of the pool and closed after: its page cache is not kept for the rest of
            // the run.
            let mut conn = pool
                .acquire()
                .await
                .map_err(|e| fail(Failure::Database, format!("loading the ledger: {e}")))?
                .detach();
            let read = read_payments(&mut conn, &sql, (&lo, &hi), capacity).await;
            let _ = sqlx::Connection::close(conn).await;
            read
        })
    };
    let lower = read_payments(
        conn,
        &format!("{sql} AND rowid < {mid}"),
        (lo, hi),
        // Room for both halves: the upper one moves in without a second copy of the lower.
        rows(min, max),
    )
    .await;
    // Joined before the lower half's error is returned: the task holds a pool connection.
    let upper = upper
        .await
        .map_err(|e| fail(Failure::Database, format!("loading the ledger: {e}")));
    let mut lower = lower?;
    lower.extend(upper??);
    Ok(lower)
}

/// The payments `sql` (parameters `?1`, `?2` = `lo`, `hi`) returns.
async fn read_payments(
    conn: &mut sqlx::SqliteConnection,
    sql: &str,
    (lo, hi): (&str, &str),
    capacity: usize,
) -> Result<Vec<Payment>> {
    let mut out = Vec::with_capacity(capacity);
    sqlite_raw::query(conn, sql, &[lo, hi], |row| {
        out.push(payment(row)?);
        Ok(())
    })
    .await?;
    Ok(out)
}

/// An upper bound of the payments the bundled query returns for `[lo, hi)`, from the index on
/// `started_at` alone (payments started in the range, plus every one never started): the
/// vector is sized once instead of growing (and copying a million payments) about twenty
/// times. Capacity beyond what is filled is never touched, so it costs no memory.
async fn at_most(conn: &mut sqlx::SqliteConnection, lo: &str, hi: &str) -> Result<usize> {
    let mut n = 0i64;
    sqlite_raw::query(
        conn,
        "SELECT (SELECT count(*) FROM payments WHERE started_at >= ?1 AND started_at < ?2)
              + (SELECT count(*) FROM payments WHERE started_at IS NULL)",
        &[lo, hi],
        |row| {
            n = row.int(0);
            Ok(())
        },
    )
    .await?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The payments' status changes since the range's start (`since`, a parameter), with the
/// as-of of the run that made each (recon's own changes are taken back for classification;
/// see [`finish`]). `payment_id` is the history's payment id as text: the column itself, or on
/// PostgreSQL `h.payment_id::text` whatever its type (a `uuid` decodes into no `String`; its
/// text is the canonical one the payments are loaded with).
pub(super) fn history_sql(payment_id: &str, since: &str) -> String {
    // PostgreSQL's `changed_at` is a timestamptz: written in UTC in the database form
    // ([`timeparse::from_db`]), whatever the session's time zone.
    let changed_at = if payment_id.ends_with("::text") {
        "to_char(h.changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
    } else {
        "h.changed_at"
    };
    format!(
        "SELECT h.id, {payment_id}, h.actor, h.from_status, h.to_status, h.run_id, r.as_of,
                h.provider_payment_id, h.prior_provider_payment_id, r.range_to, {changed_at}
         FROM payment_status_history h
         LEFT JOIN recon_runs r ON r.run_id = h.run_id
         WHERE h.changed_at >= {since}"
    )
}
const FOLLOWUPS_SQL: &str = "SELECT payment_id, opened_on, closed_on FROM recon_followups
                             WHERE closed_on IS NULL OR closed_on >= ?1";

/// Loads payments and provider ids for a run from either backend. `queries` replace the
/// bundled tables when the ledger lives in the user's own schema.
pub async fn load(db: &Db, queries: &LedgerQueries, range: &LoadRange) -> Result<LoadedLedger> {
    match &db.pool {
        // An in-memory database is one per connection: its scan is never split.
        Pool::Sqlite(p) => {
            let split_from = if db.file.is_some() {
                SPLIT_SCAN_ROWS
            } else {
                i64::MAX
            };
            load_sqlite(p, queries, range, split_from).await
        }
        Pool::Postgres(p) => load_pg(p, queries, range).await,
    }
}

async fn load_sqlite(
    pool: &SqlitePool,
    queries: &LedgerQueries,
    range: &LoadRange,
    split_from: i64,
) -> Result<LoadedLedger> {
    let lo = timeparse::to_db(range.lo);
    let hi = timeparse::to_db(range.hi);
    let attempts_lo = timeparse::to_db(range.attempts_lo.min(range.lo));
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| fail(Failure::Database, format!("loading the ledger: {e}")))?;

    let started = std::time::Instant::now();
    let custom = queries.payments_query.as_deref();
    let scan =
        custom.is_none() && wide_range(&mut conn, "payments", "started_at", &lo, &hi).await?;
    let sql = payments_sql(scan, custom, range.partition.as_ref());
    let mut payments = match custom {
        None if scan => scan_payments(pool, &mut conn, &sql, (&lo, &hi), split_from).await?,
        None => {
            let capacity = at_most(&mut conn, &lo, &hi).await?;
            read_payments(&mut conn, &sql, (&lo, &hi), capacity).await?
        }
        Some(_) => read_payments(&mut conn, &sql, (&lo, &hi), 0).await?,
    };
    tracing::debug!(
        payments = payments.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Payments read."
    );
    crate::keysort::sort_by_id_key(&mut payments, |p| &p.payment_id);
    // On the current attempt's clock (DESIGN.md rule 11).
    let attempts_scan = queries.attempts_query.is_none()
        && wide_range(&mut conn, "payment_attempts", "started_at", &lo, &hi).await?;
    let mut payments = super::clock::settle(
        &mut super::clock::Conn::Sqlite(&mut conn),
        queries,
        (range.lo, range.hi),
        attempts_scan,
        range.partition.as_ref(),
        payments,
    )
    .await?;
    let positions = index(&payments);

    // recon's own latest transition: classify on the status before it, so that re-running a
    // range reproduces RESOLVED_* instead of reporting recon's own result back as MATCHED.
    let mut history = History::new(range.rewind);
    let history_query = history_sql("h.payment_id", "?1");
    sqlite_raw::query(&mut conn, &history_query, &[&lo], |row| {
        if let Some((pid, change)) = Change::from_sqlite(row)
            && let Some(i) = positions.get(pid.as_str())
        {
            history.note(i, change);
        }
        Ok(())
    })
    .await?;
    let positions = positions.into_index();
    let latest = history.rewind(&mut payments);
    let positions = super::rows::Positions::again(&payments, positions);
    let mut followups: Vec<(u32, (String, Option<String>))> = Vec::new();
    sqlite_raw::query(&mut conn, FOLLOWUPS_SQL, &[&range.from_day], |row| {
        if let (Some(pid), Some(opened)) = (row.text(0), row.text(1))
            && let Some(i) = positions.get(pid.as_str())
        {
            followups.push((i, (opened, row.text(2))));
        }
        Ok(())
    })
    .await?;
    let mut provider_ids: Vec<(u32, String)> = Vec::new();
    let custom = queries.attempts_query.as_deref();
    let scan = custom.is_none()
        && wide_range(
            &mut conn,
            "payment_attempts",
            "started_at",
            &attempts_lo,
            &hi,
        )
        .await?;
    sqlite_raw::query(
        &mut conn,
        &attempt_ids_sql(scan, custom),
        &[&attempts_lo, &hi],
        |row| {
            // The current attempt's id is usually already on the payment row: skip it.
            if let Some(Some(i)) = row.with_text(0, |s| positions.get(s))
                && let Some(Some(ppid)) = row.with_text(1, |id| {
                    (row_provider_id(&payments, &latest, i) != Some(id)).then(|| id.to_string())
                })
            {
                provider_ids.push((i, ppid));
            }
            Ok(())
        },
    )
    .await?;
    drop(positions);
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Ledger read."
    );
    Ok(finish(payments, latest, followups, provider_ids))
}

/// One history row of a payment.
pub(super) struct Change {
    pub(super) id: i64,
    pub(super) actor: String,
    pub(super) from: String,
    pub(super) to: String,
    pub(super) run_id: Option<String>,
    /// The as-of of the run that made it (its text as stored).
    pub(super) as_of: Option<String>,
    /// The provider id the change recorded.
    pub(super) recorded: Option<String>,
    /// The provider id before the change: '' none, NULL not recorded (older rows).
    pub(super) prior: Option<String>,
    /// The day of the run that made it (YYYY-MM-DD).
    pub(super) day: Option<String>,
    /// When it was made (as stored).
    pub(super) changed_at: Option<String>,
}

/// A row of [`history_sql`] as PostgreSQL returns it: id, payment id, actor, from, to, run id,
/// as-of, recorded and prior provider id, day, time of the change.
pub(super) type PgHistoryRow = (
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Change {
    /// (payment id, change) of a row of [`history_sql`] read by SQLite; None for a row
    /// without its payment, actor or statuses.
    pub(super) fn from_sqlite(row: &sqlite_raw::Row) -> Option<(String, Change)> {
        let (Some(pid), Some(actor), Some(from), Some(to)) =
            (row.text(1), row.text(2), row.text(3), row.text(4))
        else {
            return None;
        };
        Some((
            pid,
            Change {
                id: row.int(0),
                actor,
                from,
                to,
                run_id: row.text(5),
                as_of: row.text(6),
                recorded: row.text(7),
                prior: row.text(8),
                day: row.text(9),
                changed_at: row.text(10),
            },
        ))
    }

    /// (payment id, change) of a row of [`history_sql`] read by PostgreSQL.
    pub(super) fn from_pg(
        (id, pid, actor, from, to, run_id, as_of, recorded, prior, day, changed_at): PgHistoryRow,
    ) -> (String, Change) {
        (
            pid,
            Change {
                id,
                actor,
                from,
                to,
                run_id,
                as_of,
                recorded,
                prior,
                day,
                changed_at,
            },
        )
    }
}

/// The latest history row per payment index.
pub(super) type Latest = HashMap<u32, Change>;

/// The history rows read for the loaded payments: the latest per payment, and when the
/// ledger is rebuilt as of a moment (`recon backtest`), the earliest row recorded after it.
pub(super) struct History {
    latest: Latest,
    /// Per payment, the earliest change made after `rewind`: it is taken back.
    undone: Latest,
    rewind: Option<Micros>,
}

impl History {
    pub(super) fn new(rewind: Option<Micros>) -> History {
        History {
            latest: HashMap::new(),
            undone: HashMap::new(),
            rewind,
        }
    }

    /// Notes history row `c` of payment `i`.
    pub(super) fn note(&mut self, i: u32, c: Change) {
        let after = self.rewind.is_some_and(|t| {
            c.changed_at
                .as_deref()
                .and_then(|at| timeparse::from_db(at).ok())
                .is_some_and(|at| at > t)
        });
        if after {
            match self.undone.get(&i) {
                Some(seen) if seen.id < c.id => {}
                _ => {
                    self.undone.insert(i, c);
                }
            }
            return;
        }
        match self.latest.get(&i) {
            Some(seen) if seen.id > c.id => {}
            _ => {
                self.latest.insert(i, c);
            }
        }
    }

    /// Takes back, on `payments`, every change made after the rewind moment: a payment's
    /// status becomes the one its earliest later change moved it from, and its provider id
    /// the one that change found (when recorded). Returns the latest change up to then.
    pub(super) fn rewind(self, payments: &mut [Payment]) -> Latest {
        for (i, c) in self.undone {
            let p = &mut payments[i as usize];
            if let Some(from) = Status::parse(&c.from) {
                p.current_status = from;
                p.status = from;
            }
            if let Some(prior) = c.prior.as_deref() {
                p.provider_payment_id = (!prior.is_empty()).then(|| prior.into());
            }
        }
        self.latest
    }
}

/// Whether `c`, a payment's latest history row, is recon's own change and still the payment's
/// status: the run then classifies the payment as it was before that change (re-runs reproduce
/// the run that made it).
fn taken_back(p: &Payment, c: &Change) -> bool {
    c.actor == "recon" && c.to == p.current_status.as_str()
}

/// The provider id `p` had before recon's change `c` recorded one on it (`Some(None)`: none),
/// while nobody changed it since; `None` when the change is not taken back that far.
fn prior_provider_id<'c>(p: &Payment, c: &'c Change) -> Option<Option<&'c str>> {
    let prior = c.prior.as_deref()?;
    let prior = (!prior.is_empty()).then_some(prior);
    // What the change left: the recorded id, or the one the payment had.
    let left = c.recorded.as_deref().or(prior);
    (p.provider_payment_id.as_deref() == left).then_some(prior)
}

/// The provider id on payment `i`'s row as the run sees it: before recon's own change, if that
/// is taken back ([`finish`] does so after the attempts are read). An attempt's id equal to it
/// adds nothing; one equal only to the id recon recorded must be kept, or a re-run would lose
/// the link the first run made through that attempt.
fn row_provider_id<'p>(payments: &'p [Payment], latest: &'p Latest, i: u32) -> Option<&'p str> {
    let p = &payments[i as usize];
    match latest.get(&i) {
        Some(c) if taken_back(p, c) => {
            prior_provider_id(p, c).unwrap_or(p.provider_payment_id.as_deref())
        }
        _ => p.provider_payment_id.as_deref(),
    }
}

/// Attaches history, follow-ups and attempts' provider ids to the loaded payments.
pub(super) fn finish(
    mut payments: Vec<Payment>,
    latest: Latest,
    followups: Vec<(u32, (String, Option<String>))>,
    mut provider_ids: Vec<(u32, String)>,
) -> LoadedLedger {
    for (i, c) in latest {
        let p = &mut payments[i as usize];
        if !taken_back(p, &c) {
            // A person's change that still stands: kept as they left it, and watched.
            if c.to == p.current_status.as_str()
                && let Some(at) = c
                    .changed_at
                    .as_deref()
                    .and_then(|t| timeparse::from_db(t).ok())
            {
                p.human = Some(Box::new(super::HumanChange {
                    to: p.current_status,
                    actor: c.actor,
                    at,
                }));
            }
            continue;
        }
        p.status = Status::parse(&c.from).unwrap_or(p.current_status);
        if let Some(prior) = prior_provider_id(p, &c) {
            p.provider_payment_id = prior.map(Into::into);
        }
        p.recon = Some(Box::new(super::ReconChange {
            to: p.current_status,
            run_id: c.run_id.unwrap_or_default(),
            day: c.day.unwrap_or_default(),
            as_of: c.as_of.as_deref().and_then(|t| {
                chrono::DateTime::parse_from_rfc3339(t)
                    .ok()
                    .map(|d| d.timestamp_micros())
            }),
        }));
    }
    for (i, f) in followups {
        payments[i as usize].followup = Some(Box::new(f));
    }
    provider_ids.sort_unstable_by_key(|(i, _)| *i);
    LoadedLedger {
        payments,
        provider_ids,
    }
}

/// PostgreSQL: payments and attempts' provider ids stream through `COPY … TO STDOUT`
/// (see [`super::pg_copy`]); history and follow-ups are small and use ordinary queries.
async fn load_pg(
    pool: &PgPool,
    queries: &LedgerQueries,
    range: &LoadRange,
) -> Result<LoadedLedger> {
    use super::pg_copy::copy_rows;
    let db_err = |e: sqlx::Error| fail(Failure::Database, format!("loading the ledger: {e}"));
    let mut conn = pool.acquire().await.map_err(db_err)?;
    // Timestamps are read as text: make it UTC text for this session.
    sqlx::query("SET TIME ZONE 'UTC'")
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    let (lo, hi) = (pg_ts(range.lo), pg_ts(range.hi));
    let mut cols = pg_payment_columns();
    let filter = match &range.partition {
        Some(p) => {
            cols.push_str(&format!(", {}", p.column));
            p.and_filter()
        }
        None => String::new(),
    };
    let select = match queries.payments_query.as_deref() {
        Some(q) => format!(
            "SELECT {cols} FROM ({q}) AS p
             WHERE coalesce(started_at, created_at) >= {lo} AND coalesce(started_at, created_at) < {hi}{filter}"
        ),
        // Two index range scans, as on SQLite.
        None => format!(
            "SELECT {cols} FROM payments WHERE started_at >= {lo} AND started_at < {hi}{filter}
             UNION ALL
             SELECT {cols} FROM payments WHERE started_at IS NULL AND created_at >= {lo} AND created_at < {hi}{filter}"
        ),
    };
    let mut payments = Vec::new();
    copy_rows(&mut conn, &select, |f| {
        payments.push(pg_payment(f)?);
        Ok(())
    })
    .await?;
    crate::keysort::sort_by_id_key(&mut payments, |p| &p.payment_id);
    // On the current attempt's clock (DESIGN.md rule 11).
    let mut payments = super::clock::settle(
        &mut super::clock::Conn::Pg(&mut conn),
        queries,
        (range.lo, range.hi),
        false,
        range.partition.as_ref(),
        payments,
    )
    .await?;
    let positions = index(&payments);
    let since = chrono::DateTime::from_timestamp_micros(range.lo).unwrap_or_default();
    let history: Vec<PgHistoryRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(history_sql("h.payment_id::text", "$1")))
            .bind(since)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
    let mut changes = History::new(range.rewind);
    for row in history {
        let (pid, change) = Change::from_pg(row);
        if let Some(i) = positions.get(pid.as_str()) {
            changes.note(i, change);
        }
    }
    let positions = positions.into_index();
    let latest = changes.rewind(&mut payments);
    let positions = super::rows::Positions::again(&payments, positions);
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT payment_id, opened_on, closed_on FROM recon_followups
         WHERE closed_on IS NULL OR closed_on >= $1",
    )
    .bind(&range.from_day)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err)?;
    let followups: Vec<(u32, (String, Option<String>))> = rows
        .into_iter()
        .filter_map(|(pid, opened, closed)| {
            positions.get(pid.as_str()).map(|i| (i, (opened, closed)))
        })
        .collect();
    let from = match queries.attempts_query.as_deref() {
        Some(q) => format!("({q}) AS a"),
        None => "payment_attempts".to_string(),
    };
    let attempts_lo = pg_ts(range.attempts_lo.min(range.lo));
    let mut provider_ids: Vec<(u32, String)> = Vec::new();
    copy_rows(
        &mut conn,
        &format!(
            "SELECT payment_id::text, provider_payment_id::text FROM {from}
             WHERE provider_payment_id IS NOT NULL AND started_at >= {attempts_lo} AND started_at < {hi}"
        ),
        |f| {
            if let (Some(Some(pid)), Some(Some(ppid))) = (f.first(), f.get(1))
                && let Some(i) = positions.get(pid.as_ref())
                && row_provider_id(&payments, &latest, i) != Some(ppid.as_ref())
            {
                provider_ids.push((i, ppid.to_string()));
            }
            Ok(())
        },
    )
    .await?;
    drop(positions);
    Ok(finish(payments, latest, followups, provider_ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pay(id: &str) -> Payment {
        Payment {
            payment_id: id.into(),
            recipient: "DE00".into(),
            amount_minor: 1,
            currency: "EUR",
            current_status: Status::Succeeded,
            status: Status::Succeeded,
            attempt_id: None,
            provider_payment_id: None,
            started_at: None,
            first_started_at: None,
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: 0,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_split_scan_reads_every_payment_once_across_rowid_gaps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("l.db").display());
        // A new SQLite file is migrated on open.
        let db = Db::open(&url).await.expect("open");
        let Pool::Sqlite(pool) = &db.pool else {
            unreachable!("a SQLite URL")
        };
        let mut conn = pool.acquire().await.expect("connection");
        for i in 0..1000 {
            sqlx::query(
                "INSERT INTO payments (payment_id, recipient_account, amount_minor, currency, \
                 status, created_at, started_at, updated_at) VALUES (?1, 'DE00', ?2, 'EUR', \
                 'SUCCEEDED', '2026-11-27 00:00:00.000000', '2026-11-27 10:00:00.000000', \
                 '2026-11-27 10:00:00.000000')",
            )
            .bind(format!("P-{i:04}"))
            .bind(i64::from(i))
            .execute(&mut *conn)
            .await
            .expect("insert");
        }
        // Gaps in the rowids (deleted payments) at both ends and inside the lower half; the
        // split falls on rowid 3 + 997 / 2 = 501, which is kept, so a half that misses its
        // boundary row fails below.
        sqlx::query("DELETE FROM payments WHERE rowid IN (1, 2, 400, 401, 1000)")
            .execute(&mut *conn)
            .await
            .expect("delete");
        let (lo, hi) = ("2026-11-27 00:00:00.000000", "2026-11-28 00:00:00.000000");
        let sql = payments_sql(true, None, None);
        let ids = |ps: Vec<Payment>| {
            let mut ids: Vec<String> = ps.into_iter().map(|p| p.payment_id.to_string()).collect();
            ids.sort();
            ids
        };
        let whole = ids(scan_payments(pool, &mut conn, &sql, (lo, hi), i64::MAX)
            .await
            .expect("one read"));
        let split = ids(scan_payments(pool, &mut conn, &sql, (lo, hi), 10)
            .await
            .expect("two halves"));
        assert_eq!(whole.len(), 995);
        let missing: Vec<&String> = whole.iter().filter(|id| !split.contains(id)).collect();
        assert!(missing.is_empty(), "the halves miss {missing:?}");
        // Nothing read twice: the halves meet exactly.
        let mut unique = split.clone();
        unique.dedup();
        assert_eq!(unique.len(), split.len(), "a payment read by both halves");
        assert_eq!(split.len(), whole.len());
    }

    #[test]
    fn positions_find_ids_in_any_order_and_nothing_else() {
        let payments: Vec<Payment> = ["A", "B", "C", "D"].into_iter().map(pay).collect();
        let positions = index(&payments);
        // In order, repeated, with a gap, backwards, unknown.
        let found: Vec<Option<u32>> = ["A", "A", "C", "D", "A", "D", "D", "B", "X", "C", ""]
            .into_iter()
            .map(|id| positions.get(id))
            .collect();
        let want =
            [0, 0, 2, 3, 0, 3, 3, 1, u32::MAX, 2, u32::MAX].map(|i| (i != u32::MAX).then_some(i));
        assert_eq!(found, want);
        assert_eq!(positions.get("C"), Some(2));
        assert_eq!(positions.get("E"), None);
    }
}
