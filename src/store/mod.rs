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

mod sql;
mod tickets;

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

/// A stored SQLite timestamp in the report form (`2026-11-28T10:15:00Z`).
fn sqlite_ts_read(db_text: String) -> String {
    crate::timeparse::from_db(&db_text)
        .map(crate::timeparse::format_utc)
        .unwrap_or(db_text)
}

/// A stored PostgreSQL timestamp in the report form (`2026-11-28T10:15:00Z`).
fn pg_ts_read(t: chrono::DateTime<chrono::Utc>) -> String {
    crate::timeparse::format_utc(t.timestamp_micros())
}

/// A run record as listed by `recon runs list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Id.
    pub run_id: String,
    /// First day.
    pub range_from: String,
    /// Last day.
    pub range_to: String,
    /// Cut-off.
    pub as_of: String,
    /// RUNNING, COMPLETED or FAILED.
    pub status: String,
    /// Why it failed (or was interrupted).
    pub error: Option<String>,
    /// Started (report form).
    pub started_at: String,
    /// Finished (report form).
    pub finished_at: Option<String>,
}

impl RunRecord {
    /// Renders records as a table for the terminal. A RUNNING record is either the run that
    /// holds the lock now or one that was killed; the next run marks the latter FAILED.
    pub fn render(runs: &[RunRecord]) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if runs.is_empty() {
            s.push_str("no runs\n");
            return s;
        }
        let _ = writeln!(
            s,
            "{:<36}  {:<23}  {:<9}  {:<27}  {:<27}  error",
            "run", "range", "status", "started", "finished"
        );
        for r in runs {
            let range = if r.range_from == r.range_to {
                r.range_from.clone()
            } else {
                format!("{}..{}", r.range_from, r.range_to)
            };
            let error = r
                .error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or("");
            let _ = writeln!(
                s,
                "{:<36}  {:<23}  {:<9}  {:<27}  {:<27}  {}",
                r.run_id,
                range,
                r.status,
                r.started_at,
                r.finished_at.as_deref().unwrap_or("-"),
                error
            );
        }
        s
    }
}

/// The run record's start.
#[derive(Debug, Clone)]
pub struct RunStart<'a> {
    /// Id.
    pub run_id: &'a str,
    /// First day.
    pub from: &'a str,
    /// Last day.
    pub to: &'a str,
    /// As-of (RFC 3339).
    pub as_of: &'a str,
    /// Rules hash.
    pub rules_hash: &'a str,
    /// Now (UTC text).
    pub now: &'a str,
}

/// One request recon sent to a provider's status API, as the query log
/// (`recon_status_queries`) keeps it.
#[derive(Debug, Clone)]
pub struct StatusQuery {
    /// Sent as `X-Request-Id`.
    pub request_id: String,
    /// The payment.
    pub payment_id: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The URL (no secrets: those are only in headers).
    pub url: String,
    /// HTTP status, when one came back.
    pub status_code: Option<u16>,
    /// Time to the whole body (or the failure).
    pub latency_ms: u64,
    /// sha256 of the body, when one was read.
    pub body_sha256: Option<String>,
    /// `succeeded`, `failed`, `pending`, `not_found`, `not_evidence`, `retry`, `unanswered`.
    pub verdict: String,
    /// The provider's status as written (evidence only).
    pub provider_status: Option<String>,
    /// Why (for all but evidence).
    pub detail: String,
    /// When it was sent (UTC micros).
    pub sent_at: i64,
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

            /// Inserts the run record as RUNNING. A reused run id is a config error.
            pub async fn insert_run(conn: &mut Conn, r: &RunStart<'_>) -> Result<()> {
                sqlx::query(
                    "INSERT INTO recon_runs (run_id, range_from, range_to, as_of, dry_run, rules_hash,
                                             status, started_at)
                     VALUES ($1, $2, $3, $4, 0, $5, 'RUNNING', $6)",
                )
                .bind(r.run_id)
                .bind(r.from)
                .bind(r.to)
                .bind(r.as_of)
                .bind(r.rules_hash)
                .bind($ts(r.now))
                .execute(&mut *conn)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(d) if d.is_unique_violation() => fail(
                        Failure::Config,
                        format!(
                            "run id {:?} was already used (hint: omit --run-id for a fresh one)",
                            r.run_id
                        ),
                    ),
                    _ => fail(Failure::Database, format!("recording run {}: {e}", r.run_id)),
                })?;
                Ok(())
            }

            /// Marks the run COMPLETED with its inputs and counts (JSON).
            pub async fn complete_run(
                conn: &mut Conn,
                run_id: &str,
                inputs: &str,
                counts: &str,
                now: &str,
            ) -> Result<()> {
                sqlx::query(
                    "UPDATE recon_runs SET status = 'COMPLETED', inputs = $1, counts = $2, finished_at = $3
                     WHERE run_id = $4",
                )
                .bind(inputs)
                .bind(counts)
                .bind($ts(now))
                .bind(run_id)
                .execute(&mut *conn)
                .await
                .map_err(db_err("completing the run record"))?;
                Ok(())
            }

            /// Marks RUNNING records FAILED with `error`: `run_id = None` means every run
            /// still RUNNING (called under the run lock, so those were killed). Returns how many.
            pub async fn fail_runs(
                conn: &mut Conn,
                run_id: Option<&str>,
                error: &str,
                now: &str,
            ) -> Result<u64> {
                let n = sqlx::query(
                    "UPDATE recon_runs SET status = 'FAILED', error = $1, finished_at = $2
                     WHERE status = 'RUNNING' AND ($3 IS NULL OR run_id = $3)",
                )
                .bind(error)
                .bind($ts(now))
                .bind(run_id)
                .execute(&mut *conn)
                .await
                .map_err(db_err("updating run records"))?
                .rows_affected();
                Ok(n)
            }

            /// The latest `limit` run records, newest first.
            pub async fn list_runs(conn: &mut Conn, limit: i64) -> Result<Vec<RunRecord>> {
                use sqlx::Row;
                let rows = sqlx::query(
                    "SELECT run_id, range_from, range_to, as_of, status, error, started_at,
                            finished_at
                     FROM recon_runs ORDER BY started_at DESC, run_id DESC LIMIT $1",
                )
                .bind(limit)
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err("reading run records"))?;
                rows.iter()
                    .map(|r| -> Result<RunRecord, sqlx::Error> {
                        Ok(RunRecord {
                            run_id: r.try_get("run_id")?,
                            range_from: r.try_get("range_from")?,
                            range_to: r.try_get("range_to")?,
                            as_of: r.try_get("as_of")?,
                            status: r.try_get("status")?,
                            error: r.try_get("error")?,
                            started_at: $ts_read(r.try_get::<$TsOut, _>("started_at")?),
                            finished_at: r
                                .try_get::<Option<$TsOut>, _>("finished_at")?
                                .map($ts_read),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(db_err("reading run records"))
            }

            /// (run_id, range_from, as_of, inputs JSON) of run `run_id`, or of the latest
            /// completed run when `None`.
            pub async fn find_run(
                conn: &mut Conn,
                run_id: Option<&str>,
            ) -> Result<Option<(String, String, String, String)>> {
                sqlx::query_as(
                    "SELECT run_id, range_from, as_of, inputs FROM recon_runs
                     WHERE ($1 IS NULL AND status = 'COMPLETED') OR run_id = $1
                     ORDER BY started_at DESC, run_id DESC LIMIT 1",
                )
                .bind(run_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_err("reading run records"))
            }

            /// Records that the run of `day` read these statement files; a file read before
            /// keeps the day that read it first.
            pub async fn record_inputs(
                conn: &mut Conn,
                files: &[(&str, &str, &str)],
                day: &str,
            ) -> Result<()> {
                for chunk in files.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO recon_inputs (source, path, sha256, first_day) ",
                    );
                    q.push_values(chunk, |mut b, (source, path, sha)| {
                        b.push_bind(*source).push_bind(*path).push_bind(*sha).push_bind(day);
                    });
                    q.push(" ON CONFLICT (source, path, sha256) DO NOTHING");
                    q.build()
                        .execute(&mut *conn)
                        .await
                        .map_err(db_err("recording inputs"))?;
                }
                Ok(())
            }

            /// Appends `queries` of the status API `api` in `run_id` to the query log.
            pub async fn append_status_queries(
                conn: &mut Conn,
                run_id: &str,
                api: &str,
                queries: &[StatusQuery],
            ) -> Result<()> {
                // 13 binds a row: a batch stays under either backend's parameter limit.
                for chunk in queries.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO recon_status_queries (request_id, run_id, api, payment_id, \
                         attempt, url, status_code, latency_ms, body_sha256, verdict, \
                         provider_status, detail, sent_at) ",
                    );
                    q.push_values(chunk, |mut b, r| {
                        b.push_bind(&r.request_id)
                            .push_bind(run_id)
                            .push_bind(api)
                            .push_bind(&r.payment_id)
                            .push_bind(i64::from(r.attempt))
                            .push_bind(&r.url)
                            .push_bind(r.status_code.map(i64::from))
                            .push_bind(r.latency_ms as i64)
                            .push_bind(&r.body_sha256)
                            .push_bind(&r.verdict)
                            .push_bind(&r.provider_status)
                            .push_bind(&r.detail)
                            .push_bind($ts(&crate::timeparse::to_db(r.sent_at)));
                    });
                    q.build()
                        .execute(&mut *conn)
                        .await
                        .map_err(db_err("recording status queries"))?;
                }
                Ok(())
            }

            /// The day that first read each of these files (source, path, sha256), for those
            /// read before.
            pub async fn inputs_first_read(
                conn: &mut Conn,
                files: &[(&str, &str, &str)],
            ) -> Result<HashMap<(String, String, String), String>> {
                let mut out = HashMap::new();
                for chunk in files.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "SELECT source, path, sha256, first_day FROM recon_inputs WHERE path IN (",
                    );
                    let mut sep = q.separated(", ");
                    for (_, path, _) in chunk {
                        sep.push_bind(*path);
                    }
                    q.push(")");
                    let rows: Vec<(String, String, String, String)> = q
                        .build_query_as()
                        .fetch_all(&mut *conn)
                        .await
                        .map_err(db_err("reading inputs"))?;
                    for (source, path, sha, day) in rows {
                        out.insert((source, path, sha), day);
                    }
                }
                Ok(out)
            }

            /// The first day any file of each source was read, for sources read before.
            pub async fn sources_first_read(conn: &mut Conn) -> Result<HashMap<String, String>> {
                let rows: Vec<(String, String)> = sqlx::query_as(
                    "SELECT source, min(first_day) FROM recon_inputs GROUP BY source",
                )
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err("reading inputs"))?;
                Ok(rows.into_iter().collect())
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

    /// See [`sqlite::insert_run`].
    pub async fn insert_run(&mut self, r: &RunStart<'_>) -> Result<()> {
        dispatch!(self, insert_run(r))
    }

    /// See [`sqlite::complete_run`].
    pub async fn complete_run(
        &mut self,
        run_id: &str,
        inputs: &str,
        counts: &str,
        now: &str,
    ) -> Result<()> {
        dispatch!(self, complete_run(run_id, inputs, counts, now))
    }

    /// See [`sqlite::fail_runs`].
    pub async fn fail_runs(&mut self, run_id: Option<&str>, error: &str, now: &str) -> Result<u64> {
        dispatch!(self, fail_runs(run_id, error, now))
    }

    /// See [`sqlite::list_runs`].
    pub async fn list_runs(&mut self, limit: i64) -> Result<Vec<RunRecord>> {
        dispatch!(self, list_runs(limit))
    }

    /// See [`sqlite::find_run`].
    pub async fn find_run(
        &mut self,
        run_id: Option<&str>,
    ) -> Result<Option<(String, String, String, String)>> {
        dispatch!(self, find_run(run_id))
    }

    /// See [`sqlite::record_inputs`].
    pub async fn record_inputs(&mut self, files: &[(&str, &str, &str)], day: &str) -> Result<()> {
        dispatch!(self, record_inputs(files, day))
    }

    /// See [`sqlite::append_status_queries`].
    pub async fn append_status_queries(
        &mut self,
        run_id: &str,
        api: &str,
        queries: &[StatusQuery],
    ) -> Result<()> {
        dispatch!(self, append_status_queries(run_id, api, queries))
    }

    /// See [`sqlite::inputs_first_read`].
    pub async fn inputs_first_read(
        &mut self,
        files: &[(&str, &str, &str)],
    ) -> Result<std::collections::HashMap<(String, String, String), String>> {
        dispatch!(self, inputs_first_read(files))
    }

    /// See [`sqlite::sources_first_read`].
    pub async fn sources_first_read(
        &mut self,
    ) -> Result<std::collections::HashMap<String, String>> {
        dispatch!(self, sources_first_read())
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
