//! The whole-ledger lookup of the payments statement lines name (DESIGN.md rule 12): a line
//! whose reference or provider id names a payment of ours is that payment's evidence, however
//! old the payment. A run loads the payments of its range; the keys of the few lines that no
//! loaded payment claims by identifier are looked up here, batched, through the primary key
//! and the provider-id indexes (`payments`, `payment_attempts`), or through the job's own
//! ledger queries.

use super::load::{self, Change};
use super::{Payment, rows, sqlite_raw};
use crate::config::LedgerQueries;
use crate::db::{Db, IdColumn, IdTypes, Pool};
use crate::exit::{Failure, fail};
use anyhow::Result;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// The keys to look up, as lines spell them (already in the spellings to try).
#[derive(Debug, Clone, Default)]
pub struct Keys {
    /// Candidate payment ids (references).
    pub payment_ids: BTreeSet<String>,
    /// Candidate provider ids (lines' provider ids).
    pub provider_ids: BTreeSet<String>,
}

impl Keys {
    /// Whether there is nothing to look up.
    pub fn is_empty(&self) -> bool {
        self.payment_ids.is_empty() && self.provider_ids.is_empty()
    }
}

/// What the lookup found beyond the loaded payments.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Payments not loaded that a key names, sorted by id, with recon's own latest change
    /// taken back as the run's load does, and the provider ids of their attempts that a key
    /// named (indices into these payments).
    pub ledger: super::load::LoadedLedger,
    /// Provider ids recorded on attempts of loaded payments that the run's load did not read
    /// (attempts older than its range): (payment id, provider id).
    pub loaded_attempt_ids: Vec<(String, String)>,
    /// Per payment of `ledger`: `coalesce(started_at, created_at)` of its row, the instant the
    /// run's ledger load selects payments by (so a shard can tell whether the shard of another
    /// partition loaded a payment by its range, or only a lookup finds it).
    pub row_starts: Vec<crate::timeparse::Micros>,
}

impl Found {
    /// Whether the lookup found nothing beyond the loaded payments.
    pub fn is_empty(&self) -> bool {
        self.ledger.payments.is_empty() && self.loaded_attempt_ids.is_empty()
    }

    /// Keeps the payments that `keep` accepts (by index, with their row start), with their
    /// provider ids.
    pub fn retain(&mut self, keep: impl Fn(usize, crate::timeparse::Micros) -> bool) {
        let mut at = Vec::with_capacity(self.ledger.payments.len());
        let mut next = 0u32;
        for (i, &start) in self.row_starts.iter().enumerate() {
            if keep(i, start) {
                at.push(Some(next));
                next += 1;
            } else {
                at.push(None);
            }
        }
        let mut i = 0;
        self.ledger.payments.retain(|_| {
            i += 1;
            at[i - 1].is_some()
        });
        let mut i = 0;
        self.row_starts.retain(|_| {
            i += 1;
            at[i - 1].is_some()
        });
        self.ledger.provider_ids = std::mem::take(&mut self.ledger.provider_ids)
            .into_iter()
            .filter_map(|(p, id)| Some((at.get(p as usize).copied().flatten()?, id)))
            .collect();
    }

    /// What this lookup and `other` found together (a payment both found once, as this one
    /// found it).
    pub fn join(self, other: Found) -> Found {
        let Found {
            ledger: a,
            mut loaded_attempt_ids,
            row_starts: a_starts,
        } = self;
        let b = other.ledger;
        let (mut a_at, mut b_at) = (Vec::new(), Vec::new());
        let mut payments = Vec::with_capacity(a.payments.len() + b.payments.len());
        let mut row_starts = Vec::with_capacity(payments.capacity());
        let mut xs = a.payments.into_iter().zip(a_starts).peekable();
        let mut ys = b.payments.into_iter().zip(other.row_starts).peekable();
        loop {
            let order = match (xs.peek(), ys.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((x, _)), Some((y, _))) => (*x.payment_id.text()).cmp(&*y.payment_id.text()),
            };
            if order != std::cmp::Ordering::Greater
                && let Some((p, start)) = xs.next()
            {
                a_at.push(payments.len() as u32);
                payments.push(p);
                row_starts.push(start);
            }
            if order != std::cmp::Ordering::Less
                && let Some((p, start)) = ys.next()
            {
                if order == std::cmp::Ordering::Equal {
                    // The same payment: this lookup's copy stands.
                    b_at.push(payments.len() as u32 - 1);
                } else {
                    b_at.push(payments.len() as u32);
                    payments.push(p);
                    row_starts.push(start);
                }
            }
        }
        let mut provider_ids: Vec<(u32, String)> = a
            .provider_ids
            .into_iter()
            .map(|(i, id)| (a_at[i as usize], id))
            .chain(
                b.provider_ids
                    .into_iter()
                    .map(|(i, id)| (b_at[i as usize], id)),
            )
            .collect();
        provider_ids.sort_unstable();
        provider_ids.dedup();
        loaded_attempt_ids.extend(other.loaded_attempt_ids);
        loaded_attempt_ids.sort_unstable();
        loaded_attempt_ids.dedup();
        Found {
            ledger: super::load::LoadedLedger {
                payments,
                provider_ids,
            },
            loaded_attempt_ids,
            row_starts,
        }
    }
}

/// The position of payment `id` among `payments` (sorted by id, as a load leaves them).
pub fn position(payments: &[Payment], id: &str) -> Option<usize> {
    payments
        .binary_search_by(|p| (*p.payment_id.text()).cmp(id))
        .ok()
}

/// Merges what the lookup found into the run's ledger (payments stay sorted by id, provider
/// ids by payment). Returns, per payment of the merged ledger, whether the lookup added it.
pub fn merge(into: &mut super::load::LoadedLedger, found: Found) -> Vec<bool> {
    for (pid, ppid) in found.loaded_attempt_ids {
        if let Some(i) = position(&into.payments, &pid) {
            into.provider_ids.push((i as u32, ppid));
        }
    }
    let old = std::mem::take(&mut into.payments);
    let new = found.ledger.payments;
    let (mut old_at, mut new_at) = (Vec::with_capacity(old.len()), Vec::with_capacity(new.len()));
    let mut merged = Vec::with_capacity(old.len() + new.len());
    let mut added = Vec::with_capacity(old.len() + new.len());
    let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        let take_new = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some(x), Some(y)) => *y.payment_id.text() < *x.payment_id.text(),
        };
        let next = if take_new { b.next() } else { a.next() };
        let Some(p) = next else { break };
        if take_new {
            new_at.push(merged.len() as u32);
        } else {
            old_at.push(merged.len() as u32);
        }
        added.push(take_new);
        merged.push(p);
    }
    into.payments = merged;
    for (i, _) in &mut into.provider_ids {
        *i = old_at[*i as usize];
    }
    into.provider_ids.extend(
        found
            .ledger
            .provider_ids
            .into_iter()
            .map(|(i, id)| (new_at[i as usize], id)),
    );
    into.provider_ids.sort_unstable_by_key(|(i, _)| *i);
    added
}

/// Rows per SQLite statement (its `IN` list).
const BATCH: usize = 500;

/// Looks `keys` up in the whole ledger; `loaded` says whether a payment id is among the run's
/// payments already.
/// In a partitioned job `partition` adds each payment's partition, and a shard finds only
/// its own partitions' payments. `rewind`: the payments as they were then
/// ([`load::LoadRange::rewind`]).
pub async fn named(
    db: &Db,
    queries: &LedgerQueries,
    partition: Option<&crate::partition::Select>,
    keys: &Keys,
    loaded: impl Fn(&str) -> bool,
    rewind: Option<crate::timeparse::Micros>,
) -> Result<Found> {
    if keys.is_empty() {
        return Ok(Found::default());
    }
    let ids = db.id_types().await?;
    let mut reader = match &db.pool {
        Pool::Sqlite(p) => Reader::Sqlite(p.acquire().await.map_err(db_err)?),
        Pool::Postgres(p) => {
            let mut conn = p.acquire().await.map_err(db_err)?;
            // Timestamps are read as text: UTC text for this session.
            sqlx::query("SET TIME ZONE 'UTC'")
                .execute(&mut *conn)
                .await
                .map_err(db_err)?;
            Reader::Postgres(conn, ids)
        }
    };
    let provider_ids: Vec<&str> = keys.provider_ids.iter().map(String::as_str).collect();
    // Attempts first: the payments they name are then read with the others.
    let attempts = reader.attempt_ids(queries, &provider_ids).await?;
    let mut wanted: BTreeSet<&str> = keys.payment_ids.iter().map(String::as_str).collect();
    let mut loaded_attempt_ids = Vec::new();
    for (pid, ppid) in &attempts {
        if loaded(pid) {
            loaded_attempt_ids.push((pid.clone(), ppid.clone()));
        } else {
            wanted.insert(pid);
        }
    }
    // A provider id recon recorded with a resolution (the payment row's own column is not
    // indexed: recon's transitions rewrite it).
    let recorded = reader.history_owners(&provider_ids).await?;
    for (pid, _) in &recorded {
        if !loaded(pid) {
            wanted.insert(pid);
        }
    }
    let wanted: Vec<&str> = wanted.into_iter().collect();
    let mut payments = reader.payments(queries, partition, &wanted).await?;
    payments.retain(|p| !loaded(&p.payment_id.text()));
    crate::keysort::sort_by_id_key(&mut payments, |p| &p.payment_id);
    payments.dedup_by(|a, b| a.payment_id == b.payment_id);
    // As the rows hold them, before the current attempts' starts replace them.
    let row_starts = payments
        .iter()
        .map(|p| p.started_at.unwrap_or(p.created_at))
        .collect();
    // On the current attempt's clock, like the loaded payments (DESIGN.md rule 11).
    reader.current_starts(queries, &mut payments).await?;
    if payments.is_empty() {
        return Ok(Found {
            ledger: Default::default(),
            loaded_attempt_ids,
            row_starts: Vec::new(),
        });
    }
    let positions = rows::index(&payments);
    let found_ids: Vec<String> = payments
        .iter()
        .map(|p| p.payment_id.text().to_string())
        .collect();
    let found_refs: Vec<&str> = found_ids.iter().map(String::as_str).collect();
    let mut history = load::History::new(rewind);
    for (pid, c) in reader.history(&found_refs).await? {
        if let Some(i) = positions.get(&pid) {
            history.note(i, c);
        }
    }
    let positions = positions.into_index();
    let latest = history.rewind(&mut payments);
    let positions = rows::Positions::again(&payments, positions);
    let provider_ids: Vec<(u32, String)> = attempts
        .into_iter()
        .filter_map(|(pid, ppid)| positions.get(&pid).map(|i| (i, ppid)))
        .collect();
    drop(positions);
    tracing::debug!(
        payments = payments.len(),
        "Payments named by lines found beyond the run's range."
    );
    Ok(Found {
        ledger: load::finish(payments, latest, Vec::new(), provider_ids),
        loaded_attempt_ids,
        row_starts,
    })
}

/// (payment id, provider id) of every payment of the whole ledger that holds one of `ids`: on
/// an attempt, or recorded by a transition (recon's or a reviewer's). One payout, one
/// payment (DESIGN.md rule 14): a run checks a payout id a status answer gives before it
/// records it. (The payment row's own column is not indexed; the run's loaded payments are
/// checked by the caller.)
pub async fn payout_owners(
    db: &Db,
    queries: &LedgerQueries,
    ids: &[&str],
) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let types = db.id_types().await?;
    let mut reader = match &db.pool {
        Pool::Sqlite(p) => Reader::Sqlite(p.acquire().await.map_err(db_err)?),
        Pool::Postgres(p) => Reader::Postgres(p.acquire().await.map_err(db_err)?, types),
    };
    let mut out = reader.attempt_ids(queries, ids).await?;
    out.extend(reader.history_owners(ids).await?);
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn db_err(e: sqlx::Error) -> anyhow::Error {
    fail(
        Failure::Database,
        format!(
            "looking up the payments lines name: {}",
            crate::db::message(e)
        ),
    )
}

/// A connection of either backend.
enum Reader {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>, IdTypes),
}

/// `?1, ?2, …, ?n`.
fn placeholders(n: usize) -> String {
    (1..=n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Reader {
    /// Sets each payment's start to its current attempt's ([`super::clock::current_starts`]).
    async fn current_starts(
        &mut self,
        queries: &LedgerQueries,
        payments: &mut [Payment],
    ) -> Result<()> {
        let mut conn = match self {
            Reader::Sqlite(c) => super::clock::Conn::Sqlite(c),
            Reader::Postgres(c, _) => super::clock::Conn::Pg(c),
        };
        super::clock::current_starts(&mut conn, queries, payments).await
    }

    /// (payment id, provider id) of the attempts whose provider id is one of `keys`.
    async fn attempt_ids(
        &mut self,
        queries: &LedgerQueries,
        keys: &[&str],
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        if keys.is_empty() {
            return Ok(out);
        }
        let from = match queries.attempts_query.as_deref() {
            Some(q) => format!("({q}) AS a"),
            None => "payment_attempts".to_string(),
        };
        match self {
            Reader::Sqlite(conn) => {
                for chunk in keys.chunks(BATCH) {
                    let sql = format!(
                        "SELECT payment_id, provider_payment_id FROM {from}
                         WHERE provider_payment_id IS NOT NULL AND provider_payment_id IN ({})",
                        placeholders(chunk.len())
                    );
                    sqlite_raw::query(conn, &sql, chunk, |row| {
                        if let (Some(pid), Some(ppid)) = (row.text(0), row.text(1)) {
                            out.push((pid, ppid));
                        }
                        Ok(())
                    })
                    .await?;
                }
            }
            Reader::Postgres(conn, _) => {
                let sql = format!(
                    "SELECT payment_id::text, provider_payment_id::text FROM {from}
                     WHERE provider_payment_id = ANY($1)"
                );
                let rows: Vec<(Option<String>, Option<String>)> =
                    sqlx::query_as(sqlx::AssertSqlSafe(sql))
                        .bind(keys)
                        .fetch_all(&mut **conn)
                        .await
                        .map_err(db_err)?;
                out.extend(
                    rows.into_iter()
                        .filter_map(|(pid, ppid)| Some((pid?, ppid?))),
                );
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The payments whose id one of the history's rows recorded one of `keys` as provider id
    /// for.
    async fn history_owners(&mut self, keys: &[&str]) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        if keys.is_empty() {
            return Ok(out);
        }
        match self {
            Reader::Sqlite(conn) => {
                for chunk in keys.chunks(BATCH) {
                    let sql = format!(
                        "SELECT DISTINCT payment_id, provider_payment_id FROM payment_status_history
                         WHERE provider_payment_id IS NOT NULL AND provider_payment_id IN ({})",
                        placeholders(chunk.len())
                    );
                    sqlite_raw::query(conn, &sql, chunk, |row| {
                        if let (Some(pid), Some(ppid)) = (row.text(0), row.text(1)) {
                            out.push((pid, ppid));
                        }
                        Ok(())
                    })
                    .await?;
                }
            }
            Reader::Postgres(conn, _) => {
                let rows: Vec<(Option<String>, Option<String>)> = sqlx::query_as(
                    "SELECT DISTINCT payment_id::text, provider_payment_id::text
                     FROM payment_status_history WHERE provider_payment_id = ANY($1)",
                )
                .bind(keys)
                .fetch_all(&mut **conn)
                .await
                .map_err(db_err)?;
                out.extend(
                    rows.into_iter()
                        .filter_map(|(pid, ppid)| Some((pid?, ppid?))),
                );
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The payments whose id is one of `keys`.
    async fn payments(
        &mut self,
        queries: &LedgerQueries,
        partition: Option<&crate::partition::Select>,
        keys: &[&str],
    ) -> Result<Vec<Payment>> {
        let column = "payment_id";
        let (extra, shard) = match partition {
            Some(p) => (format!(", {}", p.column), p.and_filter()),
            None => (String::new(), String::new()),
        };
        let mut out = Vec::new();
        if keys.is_empty() {
            return Ok(out);
        }
        let custom = queries.payments_query.as_deref();
        let from = match custom {
            Some(q) => format!("({q}) AS p"),
            None => "payments".to_string(),
        };
        match self {
            Reader::Sqlite(conn) => {
                for chunk in keys.chunks(BATCH) {
                    let sql = format!(
                        "SELECT {}{extra} FROM {from} WHERE {column} IS NOT NULL AND {column} IN ({}){shard}",
                        rows::COLUMNS,
                        placeholders(chunk.len())
                    );
                    sqlite_raw::query(conn, &sql, chunk, |row| {
                        out.push(rows::payment(row)?);
                        Ok(())
                    })
                    .await?;
                }
            }
            Reader::Postgres(conn, ids) => {
                // Every column as text, as the run's COPY reads them.
                let mut cols: Vec<String> = rows::pg_payment_columns()
                    .split(", ")
                    .map(|c| format!("{c}::text"))
                    .collect();
                if let Some(p) = partition {
                    cols.push(p.column.clone());
                }
                // A `uuid` id column is compared as a uuid (through its index) with the keys
                // that spell one; a custom query's column as text, whatever its type.
                let (filter, keys): (String, Vec<String>) = if custom.is_some() {
                    (
                        format!("{column}::text = ANY($1)"),
                        keys.iter().map(|k| k.to_string()).collect(),
                    )
                } else if ids.is_uuid(IdColumn::PaymentId) {
                    (
                        format!("{column} = ANY(CAST($1 AS uuid[]))"),
                        keys.iter()
                            .filter_map(|k| crate::model::canonical_uuid(k))
                            .collect(),
                    )
                } else {
                    (
                        format!("{column} = ANY($1)"),
                        keys.iter().map(|k| k.to_string()).collect(),
                    )
                };
                if keys.is_empty() {
                    return Ok(out);
                }
                let sql = format!(
                    "SELECT {} FROM {from} WHERE {filter}{shard}",
                    cols.join(", ")
                );
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(keys)
                    .fetch_all(&mut **conn)
                    .await
                    .map_err(db_err)?;
                for row in rows {
                    use sqlx::Row as _;
                    let fields: Vec<Option<Cow<'_, str>>> = (0..cols.len())
                        .map(|i| {
                            row.try_get::<Option<String>, _>(i)
                                .map(|v| v.map(Cow::Owned))
                        })
                        .collect::<std::result::Result<_, _>>()
                        .map_err(db_err)?;
                    out.push(rows::pg_payment(&fields)?);
                }
            }
        }
        Ok(out)
    }

    /// recon's history rows of the payments `ids`: (payment id, change).
    async fn history(&mut self, ids: &[&str]) -> Result<Vec<(String, Change)>> {
        let mut out = Vec::new();
        match self {
            Reader::Sqlite(conn) => {
                for chunk in ids.chunks(BATCH) {
                    // `?1` is the lower bound of `changed_at`: every row.
                    let sql = format!(
                        "{} AND h.payment_id IN ({})",
                        load::history_sql("h.payment_id", "?1"),
                        (2..=chunk.len() + 1)
                            .map(|i| format!("?{i}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    let mut params: Vec<&str> = vec![""];
                    params.extend_from_slice(chunk);
                    sqlite_raw::query(conn, &sql, &params, |row| {
                        out.extend(Change::from_sqlite(row));
                        Ok(())
                    })
                    .await?;
                }
            }
            Reader::Postgres(conn, types) => {
                let (filter, keys): (&str, Vec<String>) =
                    if types.is_uuid(IdColumn::HistoryPaymentId) {
                        (
                            "h.payment_id = ANY(CAST($2 AS uuid[]))",
                            ids.iter()
                                .filter_map(|k| crate::model::canonical_uuid(k))
                                .collect(),
                        )
                    } else {
                        (
                            "h.payment_id = ANY($2)",
                            ids.iter().map(|k| k.to_string()).collect(),
                        )
                    };
                let sql = format!(
                    "{} AND {filter}",
                    load::history_sql("h.payment_id::text", "$1")
                );
                let rows: Vec<load::PgHistoryRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(chrono::DateTime::from_timestamp_micros(0).unwrap_or_default())
                    .bind(keys)
                    .fetch_all(&mut **conn)
                    .await
                    .map_err(db_err)?;
                out.extend(rows.into_iter().map(Change::from_pg));
            }
        }
        Ok(out)
    }
}
