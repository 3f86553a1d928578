//! Every SQL statement recon writes, once, for both database backends.
//!
//! The statements are the same text for SQLite and PostgreSQL (`IS NOT DISTINCT FROM`,
//! `UPDATE … FROM`, `ON CONFLICT`, `RETURNING` exist in both); what differs is the driver type
//! and how a timestamp is bound (SQLite keeps fixed-width UTC text, PostgreSQL `timestamptz`).
//! The `store_impl!` macro instantiates the one body per backend, and [`Tx`] / [`crate::db::Db`]
//! dispatch to it, so the two backends cannot drift apart.

use crate::exit::{Failure, fail};
use crate::ledger::transitions::{Applied, Transition};
use anyhow::Result;

mod inputs;
mod runs;
mod sql;
mod status_queries;
mod tickets;

pub use runs::{RunRecord, RunStart};
pub use status_queries::StatusQuery;

/// Rows per statement in the batched forms on SQLite (at most 14 binds a row).
const SQLITE_BATCH: usize = 500;
/// Rows per statement on PostgreSQL: 14 binds × 4500 stays under its 65535 parameters. Fewer,
/// larger statements matter there: sqlx does not set TCP_NODELAY, so every statement can wait
/// for a delayed ACK (tens of milliseconds on loopback), which made 500-row batches many
/// times slower at a million payments.
const PG_BATCH: usize = 4500;

/// Rows a caller hands over at a time when it streams rows into a batched form (the tickets):
/// a multiple of both backends' batch, so the statements are the same as for one whole slice.
pub(crate) const STREAM_CHUNK: usize = PG_BATCH;
const _: () = assert!(PG_BATCH.is_multiple_of(SQLITE_BATCH));
// The widest batched row (a ticket's 14 bound columns) within each backend's limit of bound
// parameters (SQLite 32,766, PostgreSQL 65,535).
const _: () = assert!(14 * SQLITE_BATCH <= 32_766 && 14 * PG_BATCH <= 65_535);

fn db_err(what: &'static str) -> impl Fn(sqlx::Error) -> anyhow::Error {
    move |e| {
        fail(
            Failure::Database,
            format!("{what}: {}", crate::db::message(e)),
        )
    }
}

/// Timestamp bound for SQLite: the fixed-width UTC text the schema stores.
fn sqlite_ts(db_text: &str) -> Option<String> {
    Some(db_text.to_string())
}

/// Timestamp bound for PostgreSQL: a `timestamptz` from recon's UTC text form.
fn pg_ts(db_text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    crate::timeparse::from_db(db_text)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
}

/// A payment's status and its latest history row (actor, from_status, attempt_id).
type LatestState = (String, Option<String>, Option<String>, Option<String>);

macro_rules! store_impl {
    ($name:ident, $DB:ty, $ts:path, $TsOut:ty, $ts_read:path, $batch:expr) => {
        /// The statements for one backend (see the module docs).
        pub(crate) mod $name {
            use super::*;
            use sqlx::QueryBuilder;
            use std::collections::{HashMap, HashSet};

            type Db = $DB;
            type Conn = <$DB as sqlx::Database>::Connection;
            const BATCH: usize = $batch;

            /// Guarded transitions with history (DESIGN.md rule 3): one conditional
            /// `UPDATE … FROM (VALUES …) RETURNING` per batch, one multi-row history insert,
            /// one look at the rest to tell "recon already did this" from a conflict.
            pub async fn apply_transitions(
                conn: &mut Conn,
                ts: &[Transition],
                run_id: &str,
                now: &str,
            ) -> Result<Vec<Applied>> {
                let err = db_err("applying transitions");
                let mut out = vec![Applied::Conflict; ts.len()];
                for (c, chunk) in ts.chunks(BATCH).enumerate() {
                    let base = c * BATCH;
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "WITH v(payment_id, from_status, to_status, attempt_id, ppid) AS (",
                    );
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
                    q.push_bind($ts(now));
                    q.push(
                        " FROM v WHERE payments.payment_id = v.payment_id \
                         AND payments.status = v.from_status \
                         AND payments.attempt_id IS NOT DISTINCT FROM v.attempt_id \
                         RETURNING payments.payment_id",
                    );
                    let updated: Vec<(String,)> =
                        q.build_query_as().fetch_all(&mut *conn).await.map_err(&err)?;
                    let updated: HashSet<String> = updated.into_iter().map(|(id,)| id).collect();
                    let applied: Vec<&Transition> = chunk
                        .iter()
                        .filter(|t| updated.contains(&t.payment_id))
                        .collect();
                    if !applied.is_empty() {
                        let mut h: QueryBuilder<Db> = QueryBuilder::new(
                            "INSERT INTO payment_status_history (payment_id, from_status, to_status, \
                             attempt_id, provider_payment_id, prior_provider_payment_id, actor, \
                             run_id, reason, changed_at) ",
                        );
                        h.push_values(&applied, |mut b, t| {
                            b.push_bind(&t.payment_id)
                                .push_bind(t.from.as_str())
                                .push_bind(t.to.as_str())
                                .push_bind(&t.attempt_id)
                                .push_bind(&t.provider_payment_id)
                                .push_bind(t.prior_provider_payment_id.as_deref().unwrap_or(""))
                                .push_bind("recon")
                                .push_bind(run_id)
                                .push_bind(&t.reason)
                                .push_bind($ts(now));
                        });
                        h.build().execute(&mut *conn).await.map_err(&err)?;
                    }
                    let rest: Vec<&Transition> = chunk
                        .iter()
                        .filter(|t| !updated.contains(&t.payment_id))
                        .collect();
                    let mut state: HashMap<String, LatestState> = HashMap::new();
                    if !rest.is_empty() {
                        let mut s: QueryBuilder<Db> = QueryBuilder::new(
                            "SELECT p.payment_id, p.status, h.actor, h.from_status, h.attempt_id \
                             FROM payments p LEFT JOIN payment_status_history h ON h.id = \
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
                        )> = s.build_query_as().fetch_all(&mut *conn).await.map_err(&err)?;
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

            /// Follow-ups: `open` stay in later runs' scope; `closed` are remembered as
            /// closed by `day` so re-runs of that range reproduce them.
            pub async fn followups(
                conn: &mut Conn,
                open: &[String],
                closed: &[String],
                day: &str,
            ) -> Result<()> {
                let err = db_err("follow-ups");
                for chunk in open.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO recon_followups (payment_id, opened_on, closed_on) ",
                    );
                    q.push_values(chunk, |mut b, id| {
                        b.push_bind(id.as_str()).push_bind(day).push_bind(None::<String>);
                    });
                    q.push(
                        " ON CONFLICT (payment_id) DO UPDATE SET closed_on = NULL \
                         WHERE recon_followups.closed_on IS NOT NULL AND recon_followups.closed_on <= ",
                    );
                    q.push_bind(day);
                    q.build().execute(&mut *conn).await.map_err(&err)?;
                }
                for chunk in closed.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO recon_followups (payment_id, opened_on, closed_on) ",
                    );
                    q.push_values(chunk, |mut b, id| {
                        b.push_bind(id.as_str()).push_bind(day).push_bind(day);
                    });
                    // The latest day that closed it: a payment carried (unresolved) past an
                    // earlier close stays in the scope of re-runs of the day that resolved it.
                    q.push(
                        " ON CONFLICT (payment_id) DO UPDATE SET closed_on = CASE \
                         WHEN recon_followups.closed_on IS NULL \
                           OR recon_followups.closed_on < excluded.closed_on \
                         THEN excluded.closed_on ELSE recon_followups.closed_on END \
                         WHERE recon_followups.opened_on <= excluded.closed_on",
                    );
                    q.build().execute(&mut *conn).await.map_err(&err)?;
                }
                Ok(())
            }

            /// (status, attempt_id) of each of `ids` now.
            pub async fn payment_states(
                conn: &mut Conn,
                ids: &[String],
            ) -> Result<HashMap<String, (String, Option<String>)>> {
                let mut out = HashMap::new();
                for chunk in ids.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "SELECT payment_id, status, attempt_id FROM payments WHERE payment_id IN (",
                    );
                    let mut sep = q.separated(", ");
                    for id in chunk {
                        sep.push_bind(id.as_str());
                    }
                    q.push(")");
                    let rows: Vec<(String, String, Option<String>)> = q
                        .build_query_as()
                        .fetch_all(&mut *conn)
                        .await
                        .map_err(db_err("reading payments"))?;
                    for (id, status, attempt) in rows {
                        out.insert(id, (status, attempt));
                    }
                }
                Ok(out)
            }
        }
    };
}

store_impl!(
    sqlite,
    sqlx::Sqlite,
    sqlite_ts,
    String,
    sqlite_ts_read,
    SQLITE_BATCH
);
store_impl!(
    pg,
    sqlx::Postgres,
    pg_ts,
    chrono::DateTime<chrono::Utc>,
    pg_ts_read,
    PG_BATCH
);

/// An open write transaction on either backend. Dropping it without [`Tx::commit`] rolls back.
pub enum Tx {
    /// SQLite.
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    /// PostgreSQL.
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl crate::db::Db {
    /// Starts a write transaction.
    pub async fn begin(&self) -> Result<Tx> {
        use crate::db::{Pool, db_error};
        let err = |e| db_error(&self.url, "cannot start a transaction", e);
        Ok(match &self.pool {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin().await.map_err(err)?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await.map_err(err)?),
        })
    }
}

/// Applies `t` inside `tx` (a convenience over [`Tx::apply_transitions`]).
pub async fn apply(tx: &mut Tx, t: &Transition, run_id: &str, now: &str) -> Result<Applied> {
    let r = tx
        .apply_transitions(std::slice::from_ref(t), run_id, now)
        .await?;
    Ok(r.first().copied().unwrap_or(Applied::Conflict))
}

/// Calls `$f` of the backend module that matches the transaction.
macro_rules! dispatch {
    ($self:ident, $f:ident ( $($arg:expr),* )) => {
        match $self {
            Tx::Sqlite(t) => sqlite::$f(&mut *t, $($arg),*).await,
            Tx::Postgres(t) => pg::$f(&mut *t, $($arg),*).await,
        }
    };
}

impl Tx {
    /// See [`sqlite::apply_transitions`].
    pub async fn apply_transitions(
        &mut self,
        ts: &[Transition],
        run_id: &str,
        now: &str,
    ) -> Result<Vec<Applied>> {
        dispatch!(self, apply_transitions(ts, run_id, now))
    }

    /// See [`sqlite::followups`].
    pub async fn followups(&mut self, open: &[String], closed: &[String], day: &str) -> Result<()> {
        dispatch!(self, followups(open, closed, day))
    }

    /// See [`sqlite::payment_states`].
    pub async fn payment_states(
        &mut self,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, (String, Option<String>)>> {
        dispatch!(self, payment_states(ids))
    }

    /// Rows per statement in the batched forms on this backend.
    fn batch(&self) -> usize {
        match self {
            Tx::Sqlite(_) => SQLITE_BATCH,
            Tx::Postgres(_) => PG_BATCH,
        }
    }

    /// Commits.
    pub async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
        }
        .map_err(db_err("commit"))
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.rollback().await,
            Tx::Postgres(t) => t.rollback().await,
        }
        .map_err(db_err("rollback"))
    }
}
