//! Every SQL statement recon writes, once, for both database backends.
//!
//! The statements are the same text for SQLite and PostgreSQL (`IS NOT DISTINCT FROM`,
//! `UPDATE … FROM`, `ON CONFLICT`, `RETURNING` exist in both); what differs is the driver type
//! and how a timestamp is bound (SQLite keeps fixed-width UTC text, PostgreSQL `timestamptz`).
//! The `store_impl!` macro instantiates the one body per backend, and [`Tx`] / [`crate::db::Db`]
//! dispatch to it, so the two backends cannot drift apart.

use crate::exit::{Failure, fail};
use crate::ledger::transitions::{Applied, Transition};
use crate::tickets::{NewTicket, Ticket, Upserted};
use anyhow::Result;

/// Rows per statement in the batched forms (at most 12 binds each: far below both limits).
pub(crate) const BATCH: usize = 500;

fn db_err(what: &'static str) -> impl Fn(sqlx::Error) -> anyhow::Error {
    move |e| fail(Failure::Database, format!("{what}: {e}"))
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

/// A payment row to insert (`recon ledger import`); timestamps in recon's UTC text form.
#[derive(Debug, Clone)]
pub struct PaymentInsert {
    /// Id.
    pub payment_id: String,
    /// Canonical recipient.
    pub recipient: String,
    /// Minor units.
    pub amount_minor: i64,
    /// ISO 4217.
    pub currency: &'static str,
    /// Status name.
    pub status: &'static str,
    /// Created.
    pub created_at: String,
    /// Started.
    pub started_at: Option<String>,
    /// Current attempt.
    pub attempt_id: Option<String>,
    /// Provider id.
    pub provider_payment_id: Option<String>,
}

/// An attempt row to insert.
#[derive(Debug, Clone)]
pub struct AttemptInsert {
    /// Id.
    pub attempt_id: String,
    /// Payment.
    pub payment_id: String,
    /// Started.
    pub started_at: String,
    /// Finished.
    pub finished_at: Option<String>,
    /// Outcome text.
    pub outcome: Option<String>,
    /// Provider id.
    pub provider_payment_id: Option<String>,
    /// Error text.
    pub error_detail: Option<String>,
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

/// A payment's status and its latest history row (actor, from_status, attempt_id).
type LatestState = (String, Option<String>, Option<String>, Option<String>);

macro_rules! store_impl {
    ($name:ident, $DB:ty, $ts:path) => {
        /// The statements for one backend (see the module docs).
        pub(crate) mod $name {
            use super::*;
            use sqlx::QueryBuilder;
            use std::collections::{HashMap, HashSet};

            type Db = $DB;
            type Conn = <$DB as sqlx::Database>::Connection;

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
                             attempt_id, provider_payment_id, actor, run_id, reason, changed_at) ",
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
                open: &[&str],
                closed: &[&str],
                day: &str,
            ) -> Result<()> {
                let err = db_err("follow-ups");
                for chunk in open.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO recon_followups (payment_id, opened_on, closed_on) ",
                    );
                    q.push_values(chunk, |mut b, id| {
                        b.push_bind(*id).push_bind(day).push_bind(None::<String>);
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
                        b.push_bind(*id).push_bind(day).push_bind(day);
                    });
                    q.push(
                        " ON CONFLICT (payment_id) DO UPDATE SET \
                         closed_on = coalesce(recon_followups.closed_on, excluded.closed_on)",
                    );
                    q.build().execute(&mut *conn).await.map_err(&err)?;
                }
                Ok(())
            }

            /// Creates each ticket or marks the existing one as seen by `run_id`.
            pub async fn upsert_tickets(
                conn: &mut Conn,
                tickets: &[NewTicket],
                run_id: &str,
                now: &str,
            ) -> Result<Vec<Upserted>> {
                let err = db_err("review tickets");
                let mut out = Vec::with_capacity(tickets.len());
                for chunk in tickets.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO review_tickets (dedupe_key, kind, severity, payment_id, line_ids, \
                         amount_minor, currency, evidence, status, created_run_id, last_seen_run_id, created_at) ",
                    );
                    q.push_values(chunk, |mut b, t| {
                        b.push_bind(&t.dedupe_key)
                            .push_bind(&t.kind)
                            .push_bind(&t.severity)
                            .push_bind(&t.payment_id)
                            .push_bind(&t.line_ids)
                            .push_bind(t.amount_minor)
                            .push_bind(&t.currency)
                            .push_bind(&t.evidence)
                            .push_bind("OPEN")
                            .push_bind(run_id)
                            .push_bind(run_id)
                            .push_bind($ts(now));
                    });
                    q.push(" ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key");
                    let created: Vec<(String,)> =
                        q.build_query_as().fetch_all(&mut *conn).await.map_err(&err)?;
                    let created: HashSet<String> = created.into_iter().map(|(k,)| k).collect();
                    let existing: Vec<&NewTicket> = chunk
                        .iter()
                        .filter(|t| !created.contains(&t.dedupe_key))
                        .collect();
                    if !existing.is_empty() {
                        let mut u: QueryBuilder<Db> =
                            QueryBuilder::new("UPDATE review_tickets SET last_seen_run_id = ");
                        u.push_bind(run_id);
                        u.push(" WHERE dedupe_key IN (");
                        let mut sep = u.separated(", ");
                        for t in &existing {
                            sep.push_bind(&t.dedupe_key);
                        }
                        u.push(")");
                        u.build().execute(&mut *conn).await.map_err(&err)?;
                    }
                    out.extend(chunk.iter().map(|t| {
                        if created.contains(&t.dedupe_key) {
                            Upserted::Created
                        } else {
                            Upserted::Existing
                        }
                    }));
                }
                Ok(out)
            }

            /// Tickets, most severe first, then oldest first.
            pub async fn list_tickets(conn: &mut Conn, open_only: bool) -> Result<Vec<Ticket>> {
                sqlx::query_as::<_, Ticket>(
                    "SELECT ticket_id, kind, severity, status, payment_id, line_ids, amount_minor, currency,
                            evidence, created_run_id, last_seen_run_id, resolved_by, resolution_note
                     FROM review_tickets
                     WHERE ($1 = 0 OR status = 'OPEN')
                     ORDER BY CASE severity WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END,
                              ticket_id",
                )
                .bind(i64::from(open_only))
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err("review tickets"))
            }

            /// Resolves an open ticket; false if there is no such open ticket.
            pub async fn resolve_ticket(
                conn: &mut Conn,
                ticket_id: i64,
                actor: &str,
                note: &str,
                now: &str,
            ) -> Result<bool> {
                let n = sqlx::query(
                    "UPDATE review_tickets SET status = 'RESOLVED', resolved_at = $1, resolved_by = $2,
                            resolution_note = $3
                     WHERE ticket_id = $4 AND status = 'OPEN'",
                )
                .bind($ts(now))
                .bind(actor)
                .bind(note)
                .bind(ticket_id)
                .execute(&mut *conn)
                .await
                .map_err(db_err("review tickets"))?
                .rows_affected();
                Ok(n > 0)
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

            /// Which of `ids` are payments in the database.
            pub async fn payments_in_db(conn: &mut Conn, ids: &[&str]) -> Result<HashSet<String>> {
                let mut found = HashSet::new();
                for chunk in ids.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> =
                        QueryBuilder::new("SELECT payment_id FROM payments WHERE payment_id IN (");
                    let mut sep = q.separated(", ");
                    for id in chunk {
                        sep.push_bind(*id);
                    }
                    q.push(")");
                    let rows: Vec<(String,)> = q
                        .build_query_as()
                        .fetch_all(&mut *conn)
                        .await
                        .map_err(db_err("ledger import"))?;
                    found.extend(rows.into_iter().map(|(id,)| id));
                }
                Ok(found)
            }

            /// Inserts payments and attempts (the caller's transaction makes it all-or-nothing).
            pub async fn insert_ledger(
                conn: &mut Conn,
                payments: &[PaymentInsert],
                attempts: &[AttemptInsert],
                now: &str,
            ) -> Result<()> {
                for chunk in payments.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO payments (payment_id, recipient_account, amount_minor, currency, status, \
                         created_at, started_at, attempt_id, provider_payment_id, updated_at) ",
                    );
                    q.push_values(chunk, |mut b, r| {
                        b.push_bind(&r.payment_id)
                            .push_bind(&r.recipient)
                            .push_bind(r.amount_minor)
                            .push_bind(r.currency)
                            .push_bind(r.status)
                            .push_bind($ts(&r.created_at))
                            .push_bind(r.started_at.as_deref().and_then($ts))
                            .push_bind(&r.attempt_id)
                            .push_bind(&r.provider_payment_id)
                            .push_bind($ts(now));
                    });
                    q.build()
                        .execute(&mut *conn)
                        .await
                        .map_err(db_err("ledger import"))?;
                }
                for chunk in attempts.chunks(BATCH) {
                    let mut q: QueryBuilder<Db> = QueryBuilder::new(
                        "INSERT INTO payment_attempts (attempt_id, payment_id, started_at, finished_at, \
                         outcome, provider_payment_id, error_detail) ",
                    );
                    q.push_values(chunk, |mut b, r| {
                        b.push_bind(&r.attempt_id)
                            .push_bind(&r.payment_id)
                            .push_bind($ts(&r.started_at))
                            .push_bind(r.finished_at.as_deref().and_then($ts))
                            .push_bind(&r.outcome)
                            .push_bind(&r.provider_payment_id)
                            .push_bind(&r.error_detail);
                    });
                    q.build().execute(&mut *conn).await.map_err(|e| {
                        fail(
                            Failure::Input,
                            format!(
                                "ledger import: attempts rejected by the database, nothing imported: {e}"
                            ),
                        )
                    })?;
                }
                Ok(())
            }
        }
    };
}

store_impl!(sqlite, sqlx::Sqlite, sqlite_ts);
store_impl!(pg, sqlx::Postgres, pg_ts);

/// An open write transaction on either backend. Dropping it without [`Tx::commit`] rolls back.
pub enum Tx {
    /// SQLite.
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    /// PostgreSQL.
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
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
    pub async fn followups(&mut self, open: &[&str], closed: &[&str], day: &str) -> Result<()> {
        dispatch!(self, followups(open, closed, day))
    }

    /// See [`sqlite::upsert_tickets`].
    pub async fn upsert_tickets(
        &mut self,
        tickets: &[NewTicket],
        run_id: &str,
        now: &str,
    ) -> Result<Vec<Upserted>> {
        dispatch!(self, upsert_tickets(tickets, run_id, now))
    }

    /// See [`sqlite::list_tickets`].
    pub async fn list_tickets(&mut self, open_only: bool) -> Result<Vec<Ticket>> {
        dispatch!(self, list_tickets(open_only))
    }

    /// See [`sqlite::resolve_ticket`].
    pub async fn resolve_ticket(
        &mut self,
        ticket_id: i64,
        actor: &str,
        note: &str,
        now: &str,
    ) -> Result<bool> {
        dispatch!(self, resolve_ticket(ticket_id, actor, note, now))
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

    /// See [`sqlite::find_run`].
    pub async fn find_run(
        &mut self,
        run_id: Option<&str>,
    ) -> Result<Option<(String, String, String, String)>> {
        dispatch!(self, find_run(run_id))
    }

    /// See [`sqlite::payments_in_db`].
    pub async fn payments_in_db(
        &mut self,
        ids: &[&str],
    ) -> Result<std::collections::HashSet<String>> {
        dispatch!(self, payments_in_db(ids))
    }

    /// See [`sqlite::insert_ledger`].
    pub async fn insert_ledger(
        &mut self,
        payments: &[PaymentInsert],
        attempts: &[AttemptInsert],
        now: &str,
    ) -> Result<()> {
        dispatch!(self, insert_ledger(payments, attempts, now))
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
