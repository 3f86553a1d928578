//! The current attempt's clock (DESIGN.md rule 11). A payment's `started_at` places it in a
//! day, and its staleness, its evidence horizon and the window of every pass are measured from
//! it: it is the start of the attempt its guarded transition names (`attempt_id`), as the
//! attempts hold it (the bundled `payment_attempts`, or the configured `attempts_query`). The
//! payment row's own `started_at` (which a payment service may leave at the first attempt's
//! start when it retries) counts only when that attempt has none: no attempt id, no attempt
//! row, or a NULL start.
//!
//! Each payment also gets its earliest attempt's start ([`Payment::first_started_at`]: the
//! earliest start among its attempts and its row): deciding that no line came needs the
//! absence of evidence from there on, since an earlier attempt may have paid. It is exact for
//! the payments whose status the absence of evidence can resolve (UNKNOWN, SUBMITTING, REVIEW:
//! all their attempts are read by id); for the others it is the earliest among their row and
//! the attempts started in the range. No per-payment list: one `Option` each.
//!
//! The cost at a million payments: one read of the attempts started in the load's range (an
//! index range scan, or a plain scan when the range covers most of the table, as for the
//! payments), then lookups by payment id (`IN (…)` of literals, which a `text` and a `uuid`
//! column compare alike, on the attempts' index by payment) for the few payments whose current
//! attempt started outside the range or has no row, for the unresolved ones (their earliest
//! attempt), and for the payments whose current attempt started in the range while their
//! row's start is older.

use super::Payment;
use super::rows::{self, index};
use crate::config::LedgerQueries;
use crate::db::{Db, Pool};
use crate::exit::{Failure, fail};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use std::collections::BTreeSet;

/// Ids per lookup statement.
const BATCH: usize = 2000;

/// A connection the ledger is read on.
pub(super) enum Conn<'c> {
    /// SQLite (read with [`super::sqlite_raw`]).
    Sqlite(&'c mut sqlx::SqliteConnection),
    /// PostgreSQL (read with `COPY`; the session's time zone is UTC).
    Pg(&'c mut sqlx::PgConnection),
}

/// Which attempts to read.
enum Attempts<'a> {
    /// Started in `[lo, hi)`; `scan`: SQLite reads the table instead of its index; `only`: a
    /// condition on the attempt's payment (a shard's partitions, `AND payment_id IN (…)`).
    Started {
        lo: Micros,
        hi: Micros,
        scan: bool,
        only: &'a str,
    },
    /// Every attempt of these payments.
    Of(&'a [String]),
}

/// `'a', 'b'`: the ids as SQL string literals (quotes doubled). PostgreSQL gives such a
/// literal the type of the column it is compared with, `text` or `uuid` alike.
fn literals(ids: &[String]) -> String {
    let mut out = String::with_capacity(ids.len() * 40);
    for (k, id) in ids.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        out.push('\'');
        out.push_str(&id.replace('\'', "''"));
        out.push('\'');
    }
    out
}

fn attempts_from(queries: &LedgerQueries) -> String {
    match queries.attempts_query.as_deref() {
        Some(q) => format!("({q}) AS a"),
        None => "payment_attempts".to_string(),
    }
}

/// One attempt row as the database returned it; its start is parsed only when asked for (most
/// rows of a range read are looked at for their ids only).
struct AttemptRow<'a> {
    payment_id: &'a str,
    attempt_id: Option<&'a str>,
    started_at: Option<&'a str>,
    /// PostgreSQL's timestamptz text (else recon's SQLite text).
    pg: bool,
}

impl AttemptRow<'_> {
    /// The attempt's start (None: NULL).
    fn start(&self) -> Result<Option<Micros>> {
        let parse = if self.pg {
            timeparse::from_pg_utc
        } else {
            timeparse::from_db
        };
        self.started_at.map(parse).transpose().map_err(|e| {
            fail(
                Failure::Database,
                format!(
                    "loading the ledger: attempt {:?} of payment {:?}: started_at: {e}",
                    self.attempt_id.unwrap_or(""),
                    self.payment_id
                ),
            )
        })
    }
}

impl Conn<'_> {
    /// Calls `each` for every attempt `which` selects.
    async fn attempts(
        &mut self,
        queries: &LedgerQueries,
        which: Attempts<'_>,
        mut each: impl FnMut(&AttemptRow<'_>) -> Result<()>,
    ) -> Result<()> {
        let from = attempts_from(queries);
        match self {
            Conn::Sqlite(conn) => {
                // Borrowed from the statement's row: nothing is copied for a row that is not
                // the current attempt of a payment.
                let mut row_of = |row: &super::sqlite_raw::Row| -> Result<()> {
                    let in_row = |payment_id: &str| -> Result<()> {
                        let mut with = |attempt_id: Option<&str>| -> Result<()> {
                            let mut go = |started_at: Option<&str>| {
                                each(&AttemptRow {
                                    payment_id,
                                    attempt_id,
                                    started_at,
                                    pg: false,
                                })
                            };
                            row.with_text(2, |t| go(Some(t)))
                                .unwrap_or_else(|| go(None))
                        };
                        row.with_text(1, |a| with(Some(a)))
                            .unwrap_or_else(|| with(None))
                    };
                    row.with_text(0, in_row).unwrap_or(Ok(()))
                };
                match which {
                    Attempts::Started { lo, hi, scan, only } => {
                        let s = if scan { "+started_at" } else { "started_at" };
                        let sql = format!(
                            "SELECT payment_id, attempt_id, started_at FROM {from}
                             WHERE {s} >= ?1 AND {s} < ?2{only}"
                        );
                        let (lo, hi) = (timeparse::to_db(lo), timeparse::to_db(hi));
                        super::sqlite_raw::query(conn, &sql, &[&lo, &hi], &mut row_of).await
                    }
                    Attempts::Of(ids) => {
                        for chunk in ids.chunks(BATCH) {
                            let sql = format!(
                                "SELECT payment_id, attempt_id, started_at FROM {from}
                                 WHERE payment_id IN ({})",
                                literals(chunk)
                            );
                            super::sqlite_raw::query(conn, &sql, &[], &mut row_of).await?;
                        }
                        Ok(())
                    }
                }
            }
            Conn::Pg(conn) => {
                let mut row_of = |f: &[Option<std::borrow::Cow<'_, str>>]| -> Result<()> {
                    let text = |i: usize| f.get(i).and_then(|v| v.as_deref());
                    let Some(payment_id) = text(0) else {
                        return Ok(());
                    };
                    each(&AttemptRow {
                        payment_id,
                        attempt_id: text(1),
                        started_at: text(2),
                        pg: true,
                    })
                };
                let cols = "payment_id::text, attempt_id::text, started_at::timestamptz";
                match which {
                    Attempts::Started { lo, hi, only, .. } => {
                        let sql = format!(
                            "SELECT {cols} FROM {from}
                             WHERE started_at >= {} AND started_at < {}{only}",
                            rows::pg_ts(lo),
                            rows::pg_ts(hi)
                        );
                        super::pg_copy::copy_rows(conn, &sql, &mut row_of).await?;
                    }
                    Attempts::Of(ids) => {
                        for chunk in ids.chunks(BATCH) {
                            let sql = format!(
                                "SELECT {cols} FROM {from} WHERE payment_id IN ({})",
                                literals(chunk)
                            );
                            super::pg_copy::copy_rows(conn, &sql, &mut row_of).await?;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// The payments with these ids (the payments query's rows, whatever their start); in a
    /// partitioned job with their partition, and only a shard's own.
    async fn payments(
        &mut self,
        queries: &LedgerQueries,
        partition: Option<&crate::partition::Select>,
        ids: &[String],
    ) -> Result<Vec<Payment>> {
        let (extra, shard) = match partition {
            Some(p) => (format!(", {}", p.column), p.and_filter()),
            None => (String::new(), String::new()),
        };
        let mut out = Vec::new();
        for chunk in ids.chunks(BATCH) {
            match self {
                Conn::Sqlite(conn) => {
                    let from = match queries.payments_query.as_deref() {
                        Some(q) => format!("({q}) AS p"),
                        None => "payments".to_string(),
                    };
                    let sql = format!(
                        "SELECT {}{extra} FROM {from} WHERE payment_id IN ({}){shard}",
                        rows::COLUMNS,
                        literals(chunk)
                    );
                    super::sqlite_raw::query(conn, &sql, &[], |row| {
                        out.push(rows::payment(row)?);
                        Ok(())
                    })
                    .await?;
                }
                Conn::Pg(conn) => {
                    let from = match queries.payments_query.as_deref() {
                        Some(q) => format!("({q}) AS p"),
                        None => "payments".to_string(),
                    };
                    let sql = format!(
                        "SELECT {}{extra} FROM {from} WHERE payment_id IN ({}){shard}",
                        rows::pg_payment_columns(),
                        literals(chunk)
                    );
                    super::pg_copy::copy_rows(conn, &sql, |f| {
                        out.push(rows::pg_payment(f)?);
                        Ok(())
                    })
                    .await?;
                }
            }
        }
        Ok(out)
    }
}

/// Counts an attempt's start in `p`'s earliest attempt start ([`Payment::first_started_at`]).
fn earliest(p: &mut Payment, start: Micros) {
    p.first_started_at = Some(p.first_started_at.map_or(start, |f| f.min(start)));
}

/// Whether a payment in this status may be resolved by the absence of evidence (or is in
/// REVIEW): its earliest attempt must be known exactly, whenever it started.
fn absence_may_decide(p: &Payment) -> bool {
    use super::Status::{Review, Submitting, Unknown};
    matches!(p.current_status, Unknown | Submitting | Review)
        || matches!(p.status, Unknown | Submitting | Review)
}

/// Whether `attempt` (an attempt row's id) is the attempt `p` names. Ids compare as the
/// database prints them; a UUID also in the other case (a `uuid` column prints lower case, a
/// `text` one keeps what was written).
fn names(p: &Payment, attempt: Option<&str>) -> bool {
    let (Some(current), Some(attempt)) = (p.attempt_id.as_ref(), attempt) else {
        return false;
    };
    let current = current.text();
    *current == *attempt
        || (current.eq_ignore_ascii_case(attempt)
            && crate::model::canonical_uuid(attempt).is_some())
}

/// Puts payments found outside the run's range on their current attempt's clock, as
/// [`settle`] does for the loaded ones; `payments` is sorted by id. None is dropped: a line
/// names them, whatever their start. The caller is the whole-ledger lookup of the payments
/// lines name (`ledger::lookup`).
pub(super) async fn current_starts(
    conn: &mut Conn<'_>,
    queries: &LedgerQueries,
    payments: &mut [Payment],
) -> Result<()> {
    let ids: Vec<String> = payments
        .iter()
        .filter(|p| p.attempt_id.is_some())
        .map(|p| p.payment_id.text().to_string())
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let by_id = index(payments).into_index();
    // (payment, start, whether it is the current attempt's)
    let mut starts: Vec<(u32, Micros, bool)> = Vec::new();
    conn.attempts(queries, Attempts::Of(&ids), |a| {
        if let Some(i) = by_id.get(a.payment_id, |i| payments[i as usize].payment_id.text())
            && let Some(start) = a.start()?
        {
            starts.push((i, start, names(&payments[i as usize], a.attempt_id)));
        }
        Ok(())
    })
    .await?;
    for (i, start, current) in starts {
        let p = &mut payments[i as usize];
        if current {
            p.started_at = Some(start);
        }
        earliest(p, start);
    }
    Ok(())
}

/// Puts every payment on its current attempt's clock: `started_at` becomes that attempt's
/// start where the attempts have one. Then the candidates are what they are on that clock:
/// the payments whose current attempt started in `[lo, hi)` although their row's start is
/// older (or newer) are added, and those whose current attempt started outside it are dropped.
/// `payments` (the rows anchored in `[lo, hi)` by their own columns) is sorted by id, and so
/// is the result. `scan`: SQLite reads the attempts table whole (the range covers most of it).
pub(super) async fn settle(
    conn: &mut Conn<'_>,
    queries: &LedgerQueries,
    (lo, hi): (Micros, Micros),
    scan: bool,
    partition: Option<&crate::partition::Select>,
    mut payments: Vec<Payment>,
) -> Result<Vec<Payment>> {
    let started = std::time::Instant::now();
    let positions = index(&payments).into_index();
    let position = |payments: &[Payment], pid: &str| {
        positions.get(pid, |i| payments[i as usize].payment_id.text())
    };
    let mut seen = vec![false; payments.len()];
    // Payments not loaded that have an attempt in the range: their current one may be it.
    let mut others: BTreeSet<String> = BTreeSet::new();
    // A shard reads only its own partitions' attempts: the others' payments are not its to
    // find (and their ids, millions at a large night, are not held).
    let only = partition
        .and_then(|p| p.filter.as_deref())
        .map(|f| {
            let from = match queries.payments_query.as_deref() {
                Some(q) => format!("({q}) AS p"),
                None => "payments".to_string(),
            };
            format!(" AND payment_id IN (SELECT payment_id FROM {from} WHERE {f})")
        })
        .unwrap_or_default();
    let in_range = Attempts::Started {
        lo,
        hi,
        scan,
        only: &only,
    };
    conn.attempts(queries, in_range, |a| {
        match position(&payments, a.payment_id) {
            Some(i) => {
                let p = &mut payments[i as usize];
                let current = names(p, a.attempt_id);
                if current {
                    seen[i as usize] = true;
                }
                if let Some(start) = a.start()? {
                    if current {
                        p.started_at = Some(start);
                    }
                    earliest(p, start);
                }
            }
            None => {
                if !others.contains(a.payment_id) {
                    others.insert(a.payment_id.to_string());
                }
            }
        }
        Ok(())
    })
    .await?;
    // Current attempts that did not start in the range (or have no row): looked up. So are
    // all attempts of the payments the absence of evidence may resolve: an earlier attempt
    // that started before the range could have paid (their earliest start must be exact).
    let unseen: Vec<String> = payments
        .iter()
        .zip(&seen)
        .filter(|(p, seen)| p.attempt_id.is_some() && (!**seen || absence_may_decide(p)))
        .map(|(p, _)| p.payment_id.text().to_string())
        .collect();
    if !unseen.is_empty() {
        conn.attempts(queries, Attempts::Of(&unseen), |a| {
            if let Some(i) = position(&payments, a.payment_id) {
                let p = &mut payments[i as usize];
                if let Some(start) = a.start()? {
                    if names(p, a.attempt_id) {
                        p.started_at = Some(start);
                    }
                    earliest(p, start);
                }
            }
            Ok(())
        })
        .await?;
    }
    let mut added = Vec::new();
    if !others.is_empty() {
        let ids: Vec<String> = others.into_iter().collect();
        added = conn.payments(queries, partition, &ids).await?;
        // A row that moved into the range since the first read is there already.
        added.retain(|q| position(&payments, &q.payment_id.text()).is_none());
        crate::keysort::sort_by_id_key(&mut added, |p| &p.payment_id);
        let ids: Vec<String> = added
            .iter()
            .map(|q| q.payment_id.text().to_string())
            .collect();
        let by_id = index(&added).into_index();
        conn.attempts(queries, Attempts::Of(&ids), |a| {
            if let Some(i) = by_id.get(a.payment_id, |i| added[i as usize].payment_id.text()) {
                let q = &mut added[i as usize];
                if let Some(start) = a.start()? {
                    if names(q, a.attempt_id) {
                        q.started_at = Some(start);
                    }
                    earliest(q, start);
                }
            }
            Ok(())
        })
        .await?;
    }
    drop(positions);
    let in_range = |p: &Payment| (lo..hi).contains(&p.anchor());
    let before = payments.len();
    payments.retain(in_range);
    added.retain(in_range);
    tracing::debug!(
        added = added.len(),
        dropped = before - payments.len(),
        looked_up = unseen.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Payments placed by their current attempt's start."
    );
    if !added.is_empty() {
        payments.append(&mut added);
        crate::keysort::sort_by_id_key(&mut payments, |p| &p.payment_id);
    }
    Ok(payments)
}

/// The start of the attempt `p` names, as the attempts hold it (`None`: it names none, or
/// the attempts have no start for it): what `recon explain` compares the clock it shows with.
pub async fn current_attempt_start(
    db: &Db,
    queries: &LedgerQueries,
    p: &Payment,
) -> Result<Option<Micros>> {
    if p.attempt_id.is_none() {
        return Ok(None);
    }
    let db_err = |e: sqlx::Error| fail(Failure::Database, format!("loading the ledger: {e}"));
    let ids = [p.payment_id.text().to_string()];
    let mut found = None;
    let mut each = |a: &AttemptRow<'_>| -> Result<()> {
        if names(p, a.attempt_id) && found.is_none() {
            found = a.start()?;
        }
        Ok(())
    };
    match &db.pool {
        Pool::Sqlite(pool) => {
            let mut conn = pool.acquire().await.map_err(db_err)?;
            Conn::Sqlite(&mut conn)
                .attempts(queries, Attempts::Of(&ids), &mut each)
                .await?;
        }
        Pool::Postgres(pool) => {
            let mut conn = pool.acquire().await.map_err(db_err)?;
            sqlx::query("SET TIME ZONE 'UTC'")
                .execute(&mut *conn)
                .await
                .map_err(db_err)?;
            Conn::Pg(&mut conn)
                .attempts(queries, Attempts::Of(&ids), &mut each)
                .await?;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_double_quotes() {
        assert_eq!(
            literals(&["P-1".into(), "O'Brien".into()]),
            "'P-1', 'O''Brien'"
        );
    }

    #[test]
    fn an_attempt_is_named_by_its_id_in_either_case_of_a_uuid_only() {
        let mut p = Payment {
            payment_id: "P-1".into(),
            recipient: "DE00".into(),
            amount_minor: 1,
            currency: "EUR",
            current_status: super::super::Status::Submitting,
            status: super::super::Status::Submitting,
            attempt_id: Some("A-2".into()),
            provider_payment_id: None,
            started_at: None,
            first_started_at: None,
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: crate::partition::NONE,
        };
        assert!(names(&p, Some("A-2")));
        assert!(!names(&p, Some("a-2")), "text ids compare exactly");
        assert!(!names(&p, Some("A-1")));
        assert!(!names(&p, None));
        p.attempt_id = Some("0395188C-629B-4FA5-95B9-0A04115C29F2".into());
        assert!(names(&p, Some("0395188c-629b-4fa5-95b9-0a04115c29f2")));
        p.attempt_id = None;
        assert!(!names(&p, Some("A-2")));
    }
}
