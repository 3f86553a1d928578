//! The import's writes on SQLite: one prepared statement per table, bound and stepped through
//! the raw sqlite3 handle (sqlx's driver binds ~8 µs a row), in one transaction.
//!
//! Bulk-load settings for the import's connection, restored on every path:
//! - `synchronous = FULL`, so the import's one commit is durable when it returns (the app's
//!   `NORMAL` syncs the WAL only at checkpoints);
//! - foreign keys are not enforced row by row: the import has checked every attempt's payment
//!   against the file and, in this same transaction, the database (a write after another
//!   writer's commit fails with SQLITE_BUSY_SNAPSHOT), so the per-row look-up (~2 µs) repeats
//!   a check already made;
//! - into empty tables, secondary indexes are dropped and built again after the rows, inside
//!   the transaction (one sort per index instead of a B-tree insert per row).

use super::{AttemptRow, ImportReport, Ledger, PaymentRow, PendingAttempts, Rows};
use crate::exit::{Failure, fail};
use crate::ledger::sqlite_raw::{self, Raw, StepError, Value};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use sqlx::{Connection as _, SqliteConnection, SqlitePool};
use std::collections::HashSet;

fn db_err(what: &'static str) -> impl Fn(sqlx::Error) -> anyhow::Error {
    move |e| fail(Failure::Database, format!("ledger import: {what}: {e}"))
}

/// One integer a PRAGMA reports.
fn pragma_int(raw: &Raw, name: &str) -> Result<i64> {
    let mut v = 0;
    raw.query(&format!("PRAGMA {name}"), &[], |row| {
        v = row.int(0);
        Ok(())
    })?;
    Ok(v)
}

/// The connection settings the import changes, as they were.
struct Settings {
    synchronous: i64,
    foreign_keys: i64,
    cache_size: i64,
}

/// Page cache of the import's connection: 64 MiB (the app's 16 MiB spilled dirty pages twice
/// as often; 256 MiB was no faster in alternating runs and 200 MB bigger).
const CACHE_KIB: i64 = 65_536;

/// Sets the bulk-load settings (outside any transaction: SQLite refuses them inside one) and
/// returns what to restore.
fn bulk_settings(raw: &Raw) -> Result<Settings> {
    let old = Settings {
        synchronous: pragma_int(raw, "synchronous")?,
        foreign_keys: pragma_int(raw, "foreign_keys")?,
        cache_size: pragma_int(raw, "cache_size")?,
    };
    raw.exec("PRAGMA synchronous = FULL")?;
    raw.exec("PRAGMA foreign_keys = OFF")?;
    raw.exec(&format!("PRAGMA cache_size = -{CACHE_KIB}"))?;
    Ok(old)
}

fn restore(raw: &Raw, old: &Settings) -> Result<()> {
    raw.exec(&format!("PRAGMA synchronous = {}", old.synchronous))?;
    raw.exec(&format!("PRAGMA foreign_keys = {}", old.foreign_keys))?;
    raw.exec(&format!("PRAGMA cache_size = {}", old.cache_size))
}

/// Runs the import in one transaction on a connection of its own.
pub async fn import(
    pool: &SqlitePool,
    payments: &Rows<PaymentRow>,
    attempts: Option<PendingAttempts>,
) -> Result<ImportReport> {
    let mut conn = pool.acquire().await.map_err(db_err("connecting"))?;
    let old = sqlite_raw::with_raw(&mut conn, bulk_settings).await?;
    let result = async {
        let mut tx = conn
            .begin()
            .await
            .map_err(db_err("starting a transaction"))?;
        let mut ledger = SqliteLedger {
            conn: &mut tx,
            deferred: Vec::new(),
        };
        match super::check_and_insert(&mut ledger, payments, attempts).await {
            Ok(report) => {
                let t = std::time::Instant::now();
                tx.commit().await.map_err(db_err("commit"))?;
                tracing::debug!(ms = t.elapsed().as_millis() as u64, "Committed.");
                Ok(report)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
    .await;
    sqlite_raw::with_raw(&mut conn, |raw| restore(raw, &old)).await?;
    result
}

/// The import's view of an SQLite connection in a transaction.
struct SqliteLedger<'c> {
    conn: &'c mut SqliteConnection,
    /// Index definitions to run again at the end of the bulk load.
    deferred: Vec<String>,
}

const INSERT_PAYMENT: &str = "INSERT INTO payments (payment_id, recipient_account, amount_minor, \
     currency, status, created_at, started_at, attempt_id, provider_payment_id, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
/// [`INSERT_PAYMENT`] for a file with the `merchant_id` column.
const INSERT_PAYMENT_MERCHANT: &str = "INSERT INTO payments (payment_id, recipient_account, \
     amount_minor, currency, status, created_at, started_at, attempt_id, provider_payment_id, \
     updated_at, merchant_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
const INSERT_ATTEMPT: &str = "INSERT INTO payment_attempts (attempt_id, payment_id, started_at, \
     finished_at, outcome, provider_payment_id, error_detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// A timestamp in the database form, on the stack.
struct DbTime([u8; timeparse::DB_LEN]);

impl DbTime {
    fn new(t: Micros) -> Self {
        let mut b = [0u8; timeparse::DB_LEN];
        // Ledger timestamps parse from four-digit years, which always fit.
        let _ = timeparse::write_db(t, &mut b);
        DbTime(b)
    }
}

fn text<T: AsRef<str>>(v: &Option<T>) -> Value<'_> {
    v.as_ref().map(|s| s.as_ref()).into()
}

/// `file:line: the database rejected the row: …` (nothing is imported: the caller rolls back).
fn rejected(file: &str, line: u64, e: StepError) -> anyhow::Error {
    let kind = if e.constraint {
        Failure::Input
    } else {
        Failure::Database
    };
    fail(
        kind,
        format!(
            "{file}:{line}: the database rejected the row, nothing imported: {}",
            e.message
        ),
    )
}

impl Ledger for SqliteLedger<'_> {
    /// In file order: the table's rowids follow the rows, and a ledger exported in time order
    /// then builds its time indexes from sorted input; in primary-key order the inserts were
    /// faster and the index builds slower by more (docs/benchmark.md).
    const KEY_ORDER: bool = false;

    async fn payments_in_db(&mut self, ids: &[&str]) -> Result<HashSet<String>> {
        payments_in_db(self.conn, ids).await
    }

    async fn begin_bulk(&mut self) -> Result<()> {
        self.deferred = sqlite_raw::with_raw(self.conn, defer_indexes).await?;
        Ok(())
    }

    async fn insert_payments(
        &mut self,
        rows: &Rows<PaymentRow>,
        order: &[u32],
        now: Micros,
    ) -> Result<()> {
        let now = DbTime::new(now);
        sqlite_raw::with_raw(self.conn, |raw| {
            let (sql, width) = if rows.optional {
                (INSERT_PAYMENT_MERCHANT, 11)
            } else {
                (INSERT_PAYMENT, 10)
            };
            let mut ins = raw.insert(sql)?;
            for r in order.iter().map(|&i| &rows.rows[i as usize]) {
                let created = DbTime::new(r.created_at);
                let started = r.started_at.map(DbTime::new);
                let values = [
                    r.payment_id.as_str().into(),
                    r.recipient.as_str().into(),
                    Value::Int(r.amount_minor),
                    r.currency.into(),
                    r.status.as_str().into(),
                    Value::Text(&created.0),
                    started.as_ref().map_or(Value::Null, |t| Value::Text(&t.0)),
                    text(&r.attempt_id),
                    text(&r.provider_payment_id),
                    Value::Text(&now.0),
                    text(&r.merchant_id),
                ];
                ins.row(&values[..width])
                    .map_err(|e| rejected(&rows.file, r.line, e))?;
            }
            Ok(())
        })
        .await
    }

    async fn insert_attempts(&mut self, rows: &Rows<AttemptRow>, order: &[u32]) -> Result<()> {
        sqlite_raw::with_raw(self.conn, |raw| {
            let mut ins = raw.insert(INSERT_ATTEMPT)?;
            for r in order.iter().map(|&i| &rows.rows[i as usize]) {
                let started = DbTime::new(r.started_at);
                let finished = r.finished_at.map(DbTime::new);
                ins.row(&[
                    r.attempt_id.as_str().into(),
                    r.payment_id.as_str().into(),
                    Value::Text(&started.0),
                    finished.as_ref().map_or(Value::Null, |t| Value::Text(&t.0)),
                    text(&r.outcome),
                    text(&r.provider_payment_id),
                    text(&r.error_detail),
                ])
                .map_err(|e| rejected(&rows.file, r.line, e))?;
            }
            Ok(())
        })
        .await
    }

    async fn end_bulk(&mut self) -> Result<()> {
        let deferred = std::mem::take(&mut self.deferred);
        sqlite_raw::with_raw(self.conn, |raw| {
            for sql in &deferred {
                raw.exec(sql)?;
            }
            Ok(())
        })
        .await
    }
}

/// Whether `sql` returns a row.
fn has_rows(raw: &Raw, sql: &str) -> Result<bool> {
    let mut any = false;
    raw.query(sql, &[], |_| {
        any = true;
        Ok(())
    })?;
    Ok(any)
}

/// When both ledger tables are empty, drops their secondary indexes (inside the transaction)
/// and returns the statements that build them again: one sort per index after the rows are
/// in instead of a B-tree insert per row.
fn defer_indexes(raw: &Raw) -> Result<Vec<String>> {
    if has_rows(
        raw,
        "SELECT 1 FROM payments UNION ALL SELECT 1 FROM payment_attempts LIMIT 1",
    )? {
        return Ok(Vec::new());
    }
    let mut indexes = Vec::new();
    raw.query(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' \
         AND tbl_name IN ('payments', 'payment_attempts') AND sql IS NOT NULL ORDER BY name",
        &[],
        |row| {
            if let (Some(name), Some(sql)) = (row.text(0), row.text(1)) {
                indexes.push((name, sql));
            }
            Ok(())
        },
    )?;
    for (name, _) in &indexes {
        raw.exec(&format!("DROP INDEX \"{}\"", name.replace('"', "\"\"")))?;
    }
    Ok(indexes.into_iter().map(|(_, sql)| sql).collect())
}

/// Which of `ids` are payments in the database: the ids go into a temporary table that one
/// join compares with the ledger (nothing to compare when the ledger is empty).
async fn payments_in_db(conn: &mut SqliteConnection, ids: &[&str]) -> Result<HashSet<String>> {
    sqlite_raw::with_raw(conn, |raw| {
        let mut found = HashSet::new();
        if !has_rows(raw, "SELECT 1 FROM payments LIMIT 1")? {
            return Ok(found);
        }
        raw.exec("CREATE TEMP TABLE recon_import_ids (payment_id TEXT NOT NULL)")?;
        let looked_up = (|| {
            let mut ins =
                raw.insert("INSERT INTO temp.recon_import_ids (payment_id) VALUES (?1)")?;
            for id in ids {
                ins.row(&[(*id).into()])
                    .map_err(|e| fail(Failure::Database, e.message))?;
            }
            drop(ins);
            raw.query(
                "SELECT DISTINCT i.payment_id FROM temp.recon_import_ids i \
                 JOIN payments p ON p.payment_id = i.payment_id",
                &[],
                |row| {
                    if let Some(id) = row.text(0) {
                        found.insert(id);
                    }
                    Ok(())
                },
            )
        })();
        raw.exec("DROP TABLE temp.recon_import_ids")?;
        looked_up.map(|()| found)
    })
    .await
}
