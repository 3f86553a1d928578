//! The import's writes on SQLite: one prepared statement per table, bound and stepped through
//! the raw sqlite3 handle (sqlx's driver binds ~8 µs a row), in the caller's transaction.

use super::{AttemptRow, PaymentRow, Rows};
use crate::exit::{Failure, fail};
use crate::ledger::sqlite_raw::{self, StepError, Value};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use sqlx::SqliteConnection;
use std::collections::HashSet;

const INSERT_PAYMENT: &str = "INSERT INTO payments (payment_id, recipient_account, amount_minor, \
     currency, status, created_at, started_at, attempt_id, provider_payment_id, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
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

/// Inserts the rows (the caller's transaction makes it all-or-nothing).
pub async fn insert(
    conn: &mut SqliteConnection,
    payments: &Rows<PaymentRow>,
    attempts: &Rows<AttemptRow>,
    now: Micros,
) -> Result<()> {
    let now = DbTime::new(now);
    sqlite_raw::with_raw(conn, |raw| {
        let mut ins = raw.insert(INSERT_PAYMENT)?;
        for r in &payments.rows {
            let created = DbTime::new(r.created_at);
            let started = r.started_at.map(DbTime::new);
            ins.row(&[
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
            ])
            .map_err(|e| rejected(&payments.file, r.line, e))?;
        }
        let mut ins = raw.insert(INSERT_ATTEMPT)?;
        for r in &attempts.rows {
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
            .map_err(|e| rejected(&attempts.file, r.line, e))?;
        }
        Ok(())
    })
    .await
}

/// Which of `ids` are payments in the database: the ids go into a temporary table that one
/// join compares with the ledger (nothing to compare when the ledger is empty).
pub async fn payments_in_db(conn: &mut SqliteConnection, ids: &[&str]) -> Result<HashSet<String>> {
    sqlite_raw::with_raw(conn, |raw| {
        let mut any = false;
        raw.query("SELECT 1 FROM payments LIMIT 1", &[], |_| {
            any = true;
            Ok(())
        })?;
        let mut found = HashSet::new();
        if !any {
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
