//! Every SQL statement recon writes, once, for both database backends.
//!
//! The statements are the same text for SQLite and PostgreSQL (`IS NOT DISTINCT FROM`,
//! `UPDATE … FROM`, `ON CONFLICT`, `RETURNING` exist in both). Each is written once, in a
//! method of the transaction type [`Tx`], as an `Sql` value: its text, and its values as
//! borrowed `Bind`s (text, integers, timestamps). What differs between the backends lives in
//! one small module, `sql.rs`, and nowhere else: the placeholder a value writes (`?` or `$N`),
//! how a value is encoded (a timestamp, recon's fixed-width UTC text, is bound as that TEXT on
//! SQLite and as a `timestamptz` on PostgreSQL), how a statement runs on the open transaction,
//! and how a column is read back (`Row`). So the two backends cannot drift apart, and every
//! statement is ordinary code.
//!
//! The ledger's id columns may be `uuid` on PostgreSQL (the payment service's own schema;
//! [`IdTypes`]): a statement names the column an id is compared with or stored in
//! (`push_id`), or read from (`push_id_text`), and the SQL says `CAST($n AS uuid)` and
//! `col::text` exactly where that column is a `uuid`, and nothing else anywhere else.
//!
//! One module per concern, each adding its methods to [`Tx`]:
//! - `transitions.rs`: the payments' guarded status transitions and history, their states now;
//! - `followups.rs`: the payments that stay in later runs' scope;
//! - `tickets.rs`: the review queue and its history;
//! - `cases.rs`: the cases runs stored, reviewers' decisions, confirmed lines;
//! - `runs.rs`: the run records ([`RunRecord`], [`RunStart`]);
//! - `inputs.rs`: which statement files the runs read;
//! - `status_queries.rs`: the status-query log ([`StatusQuery`]).
//!
//! Multi-row statements go in batches of a backend's own size (`SQLITE_BATCH`, `PG_BATCH`).

use crate::db::IdTypes;
use crate::exit::{Failure, fail};
use anyhow::Result;

pub mod cases;
mod followups;
pub mod groups;
mod inputs;
mod runs;
mod sql;
mod status_queries;
mod tickets;
mod transitions;

pub use runs::{RunRecord, RunStart};
pub use status_queries::StatusQuery;
pub use transitions::{PaymentNow, apply};

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

/// An open write transaction on either backend. Dropping it without [`Tx::commit`] rolls back.
/// Every statement on it waits at most the database's `statement_timeout`, its commit at most
/// `commit_timeout` ([`crate::db::DatabaseLimits`]).
pub struct Tx {
    conn: Conn,
    limits: crate::db::DatabaseLimits,
}

/// The transaction of one backend.
enum Conn {
    /// SQLite.
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    /// PostgreSQL, and which of the ledger's id columns are `uuid` there (its statements bind
    /// and read ids accordingly).
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>, IdTypes),
}

/// A wait that ran out of `limit` (the `[database]` key `key`), as the driver's I/O error, so
/// that every statement's own context ("updating run records: …") names what waited.
fn timed_out(limit: std::time::Duration, key: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        crate::db::timeout_text(limit, key),
    ))
}

/// `fut` bounded by `limit` (the `[database]` key `key`).
async fn bounded<T>(
    limit: std::time::Duration,
    key: &str,
    fut: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(timed_out(limit, key)),
    }
}

impl crate::db::Db {
    /// Starts a write transaction.
    pub async fn begin(&self) -> Result<Tx> {
        use crate::db::{Pool, db_error};
        let limits = self.limits();
        let err = |e: sqlx::Error| match e {
            // The pool waited connect_timeout for a connection that works (its idle ones are
            // checked first): say which bound ran out.
            sqlx::Error::PoolTimedOut => db_error(
                &self.url,
                "cannot start a transaction",
                crate::db::timeout_text(limits.connect_timeout, "connect_timeout"),
            ),
            e => db_error(&self.url, "cannot start a transaction", e),
        };
        // Taking a connection is bounded by the pool's acquire timeout (connect_timeout);
        // BEGIN itself by statement_timeout.
        let conn = match &self.pool {
            Pool::Sqlite(p) => Conn::Sqlite(
                bounded(limits.statement_timeout, "statement_timeout", p.begin())
                    .await
                    .map_err(err)?,
            ),
            Pool::Postgres(p) => {
                let ids = self.id_types().await?;
                Conn::Postgres(
                    bounded(limits.statement_timeout, "statement_timeout", p.begin())
                        .await
                        .map_err(err)?,
                    ids,
                )
            }
        };
        Ok(Tx { conn, limits })
    }
}

impl Tx {
    /// Rows per statement in the batched forms on this backend.
    fn batch(&self) -> usize {
        match self.conn {
            Conn::Sqlite(_) => SQLITE_BATCH,
            Conn::Postgres(..) => PG_BATCH,
        }
    }

    /// Commits, waiting at most `commit_timeout`. When that runs out, whether the commit
    /// happened is unknown: the error says so (a re-run finds either state: effects already
    /// applied are recognised, the rest applied once).
    pub async fn commit(self) -> Result<()> {
        let limit = self.limits.commit_timeout;
        let done = tokio::time::timeout(limit, async {
            match self.conn {
                Conn::Sqlite(t) => t.commit().await,
                Conn::Postgres(t, _) => t.commit().await,
            }
        })
        .await;
        match done {
            Ok(r) => r.map_err(db_err("commit")),
            Err(_) => Err(fail(
                Failure::Database,
                format!(
                    "commit: {} — whether the commit happened is unknown; a re-run of the \
                     range finds either state and applies what is missing once",
                    crate::db::timeout_text(limit, "commit_timeout")
                ),
            )),
        }
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<()> {
        let limit = self.limits.statement_timeout;
        bounded(limit, "statement_timeout", async {
            match self.conn {
                Conn::Sqlite(t) => t.rollback().await,
                Conn::Postgres(t, _) => t.rollback().await,
            }
        })
        .await
        .map_err(db_err("rollback"))
    }
}
