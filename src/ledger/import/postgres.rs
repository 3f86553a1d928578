//! The import's writes on PostgreSQL: `COPY … FROM STDIN` in the text format, in the caller's
//! transaction (<https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2>): one
//! row per line, fields separated by tabs, `\N` for NULL, and a backslash escape for each
//! backslash, tab, newline and carriage return inside a value. NUL cannot be sent at all;
//! the parser has rejected it with file:line already.

use super::{AttemptRow, ImportReport, Ledger, PaymentRow, PendingAttempts, Rows};
use crate::db::{IdColumn, IdTypes};
use crate::exit::{Failure, fail};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use sqlx::postgres::PgDatabaseError;
use sqlx::{PgConnection, PgPool};
use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write as _;

const COPY_PAYMENTS: &str = "COPY payments (payment_id, recipient_account, amount_minor, \
     currency, status, created_at, started_at, attempt_id, provider_payment_id, updated_at) \
     FROM STDIN";
/// [`COPY_PAYMENTS`] for a file with the `merchant_id` column.
const COPY_PAYMENTS_MERCHANT: &str = "COPY payments (payment_id, recipient_account, \
     amount_minor, currency, status, created_at, started_at, attempt_id, provider_payment_id, \
     updated_at, merchant_id) FROM STDIN";
const COPY_ATTEMPTS: &str = "COPY payment_attempts (attempt_id, payment_id, started_at, \
     finished_at, outcome, provider_payment_id, error_detail) FROM STDIN";

/// Bytes of COPY data per message sent.
const CHUNK: usize = 1 << 20;

/// COPY text-format data being built, one row at a time.
#[derive(Debug, Default)]
struct CopyText {
    buf: Vec<u8>,
    /// Whether the current row has a field yet (the next one needs a tab before it).
    in_row: bool,
}

impl CopyText {
    fn sep(&mut self) {
        if self.in_row {
            self.buf.push(b'\t');
        }
        self.in_row = true;
    }

    fn text(&mut self, s: &str) {
        self.sep();
        let b = s.as_bytes();
        if !b.iter().any(|c| matches!(c, b'\\' | b'\t' | b'\n' | b'\r')) {
            self.buf.extend_from_slice(b);
            return;
        }
        for &c in b {
            match c {
                b'\\' => self.buf.extend_from_slice(b"\\\\"),
                b'\t' => self.buf.extend_from_slice(b"\\t"),
                b'\n' => self.buf.extend_from_slice(b"\\n"),
                b'\r' => self.buf.extend_from_slice(b"\\r"),
                c => self.buf.push(c),
            }
        }
    }

    fn opt<T: AsRef<str>>(&mut self, v: &Option<T>) {
        match v {
            Some(s) => self.text(s.as_ref()),
            None => self.null(),
        }
    }

    fn null(&mut self) {
        self.sep();
        self.buf.extend_from_slice(b"\\N");
    }

    fn int(&mut self, n: i64) {
        self.sep();
        let _ = write!(self.buf, "{n}");
    }

    /// A `timestamptz` in UTC: `YYYY-MM-DD HH:MM:SS.ffffff+00`.
    fn ts(&mut self, t: Micros) {
        self.sep();
        let mut b = [0u8; timeparse::DB_LEN];
        // Ledger timestamps parse from four-digit years, which always fit.
        let _ = timeparse::write_db(t, &mut b);
        self.buf.extend_from_slice(&b);
        self.buf.extend_from_slice(b"+00");
    }

    fn opt_ts(&mut self, t: Option<Micros>) {
        match t {
            Some(t) => self.ts(t),
            None => self.null(),
        }
    }

    fn end_row(&mut self) {
        self.buf.push(b'\n');
        self.in_row = false;
    }
}

/// The line number PostgreSQL names in an error's context (`COPY payments, line 3, column …`).
fn copy_line(context: &str, table: &str) -> Option<usize> {
    let rest = context.split(&format!("COPY {table}, line ")).nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// An error of `COPY … FROM STDIN` into `table`. When PostgreSQL names the line of the COPY
/// stream it rejected, the message names the file's line that became it.
fn copy_error(
    e: sqlx::Error,
    table: &str,
    file: &str,
    line_of: impl Fn(usize) -> Option<u64>,
) -> anyhow::Error {
    let Some(pg) = e
        .as_database_error()
        .and_then(|d| d.try_downcast_ref::<PgDatabaseError>())
    else {
        return fail(
            Failure::Database,
            format!("{file}: COPY into {table} failed, nothing imported: {e}"),
        );
    };
    // Class 22 (data exception) and 23 (integrity constraint): the data's fault.
    let kind = if pg.code().starts_with("22") || pg.code().starts_with("23") {
        Failure::Input
    } else {
        Failure::Database
    };
    let detail = pg.detail().map(|d| format!(" ({d})")).unwrap_or_default();
    let context = pg.r#where().unwrap_or("");
    let msg = match copy_line(context, table) {
        Some(n) => match n.checked_sub(1).and_then(&line_of) {
            Some(line) => format!(
                "{file}:{line}: PostgreSQL rejected line {n} of the COPY stream into {table} \
                 (this file line), nothing imported: {}{detail}",
                pg.message()
            ),
            None => format!(
                "{file}: PostgreSQL rejected line {n} of the COPY stream into {table}, \
                 nothing imported: {}{detail}",
                pg.message()
            ),
        },
        None => format!(
            "{file}: PostgreSQL rejected the COPY stream into {table}, nothing imported: \
             {}{detail} [{context}]",
            pg.message()
        ),
    };
    fail(kind, msg)
}

/// Streams `rows` (at the positions `order`, in that order) into `COPY … FROM STDIN` (`sql`),
/// `write` encoding each row.
async fn copy_in<T>(
    conn: &mut PgConnection,
    (sql, table): (&str, &str),
    (rows, order): (&Rows<T>, &[u32]),
    line: impl Fn(&T) -> u64,
    mut write: impl FnMut(&T, &mut CopyText),
) -> Result<()> {
    let line_of = |i: usize| order.get(i).map(|&j| line(&rows.rows[j as usize]));
    let err = |e| copy_error(e, table, &rows.file, line_of);
    let mut copy = conn.copy_in_raw(sql).await.map_err(err)?;
    let mut out = CopyText {
        buf: Vec::with_capacity(CHUNK + 4096),
        in_row: false,
    };
    for r in order.iter().map(|&i| &rows.rows[i as usize]) {
        write(r, &mut out);
        out.end_row();
        if out.buf.len() >= CHUNK {
            copy.send(out.buf.as_slice()).await.map_err(err)?;
            out.buf.clear();
        }
    }
    if !out.buf.is_empty() {
        copy.send(out.buf.as_slice()).await.map_err(err)?;
    }
    copy.finish().await.map_err(err)?;
    Ok(())
}

/// Runs the import in one transaction (`ids`: which of the ledger's id columns are `uuid`; the
/// rows' ids are in the form the database stores).
pub async fn import(
    pool: &PgPool,
    payments: &Rows<PaymentRow>,
    attempts: Option<PendingAttempts>,
    ids: IdTypes,
) -> Result<ImportReport> {
    let err = |what: &'static str| {
        move |e: sqlx::Error| fail(Failure::Database, format!("ledger import: {what}: {e}"))
    };
    let mut tx = pool.begin().await.map_err(err("starting a transaction"))?;
    let mut ledger = PgLedger {
        conn: &mut tx,
        deferred: Vec::new(),
        uuid_payment_ids: ids.is_uuid(IdColumn::PaymentId),
    };
    let report = super::check_and_insert(&mut ledger, payments, attempts).await?;
    let t = std::time::Instant::now();
    tx.commit().await.map_err(err("commit"))?;
    tracing::debug!(ms = t.elapsed().as_millis() as u64, "Committed.");
    Ok(report)
}

/// The import's view of a PostgreSQL connection in a transaction.
struct PgLedger<'c> {
    conn: &'c mut PgConnection,
    /// Index and foreign-key definitions to restore at the end of the bulk load.
    deferred: Vec<String>,
    /// Whether `payments.payment_id` is a `uuid` column.
    uuid_payment_ids: bool,
}

impl Ledger for PgLedger<'_> {
    /// In primary-key order: a random B-tree insert dirties a random page of the index, and the
    /// first change of a page after a checkpoint writes the whole page to the WAL; in key order
    /// the inserts go to the index's right edge (docs/benchmark.md has the measurement).
    const KEY_ORDER: bool = true;

    async fn payments_in_db(&mut self, ids: &[&str]) -> Result<HashSet<String>> {
        payments_in_db(self.conn, ids, self.uuid_payment_ids).await
    }

    async fn begin_bulk(&mut self) -> Result<()> {
        self.deferred = defer_indexes(self.conn).await?;
        Ok(())
    }

    async fn insert_payments(
        &mut self,
        rows: &Rows<PaymentRow>,
        order: &[u32],
        now: Micros,
    ) -> Result<()> {
        let sql = if rows.optional {
            COPY_PAYMENTS_MERCHANT
        } else {
            COPY_PAYMENTS
        };
        copy_in(
            self.conn,
            (sql, "payments"),
            (rows, order),
            |r| r.line,
            |r, out| {
                out.text(&r.payment_id);
                out.text(&r.recipient);
                out.int(r.amount_minor);
                out.text(r.currency);
                out.text(r.status.as_str());
                out.ts(r.created_at);
                out.opt_ts(r.started_at);
                out.opt(&r.attempt_id);
                out.opt(&r.provider_payment_id);
                out.ts(now);
                if rows.optional {
                    out.opt(&r.merchant_id);
                }
            },
        )
        .await
    }

    async fn insert_attempts(&mut self, rows: &Rows<AttemptRow>, order: &[u32]) -> Result<()> {
        if rows.rows.is_empty() {
            return Ok(());
        }
        copy_in(
            self.conn,
            (COPY_ATTEMPTS, "payment_attempts"),
            (rows, order),
            |r| r.line,
            |r, out| {
                out.text(&r.attempt_id);
                out.text(&r.payment_id);
                out.ts(r.started_at);
                out.opt_ts(r.finished_at);
                out.opt(&r.outcome);
                out.opt(&r.provider_payment_id);
                out.opt(&r.error_detail);
            },
        )
        .await
    }

    async fn end_bulk(&mut self) -> Result<()> {
        for sql in std::mem::take(&mut self.deferred) {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut *self.conn)
                .await
                .map_err(|e| {
                    fail(
                        Failure::Input,
                        format!(
                            "ledger import: the rows were rejected, nothing imported ({sql}): {e}"
                        ),
                    )
                })?;
        }
        Ok(())
    }
}

fn db_err(e: sqlx::Error) -> anyhow::Error {
    fail(
        Failure::Database,
        format!("ledger import: {}", crate::db::message(e)),
    )
}

/// Whether `sql` (a static query) returns a row.
async fn has_rows(conn: &mut PgConnection, sql: &'static str) -> Result<bool> {
    let any: Option<i32> = sqlx::query_scalar(sql)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_err)?;
    Ok(any.is_some())
}

/// When both ledger tables are empty, drops their secondary indexes and foreign keys (inside
/// the transaction) and returns the statements that restore them: one sort per index and one
/// join per foreign key after the rows are in, instead of work per row.
async fn defer_indexes(conn: &mut PgConnection) -> Result<Vec<String>> {
    if has_rows(
        conn,
        "SELECT 1 FROM payments UNION ALL SELECT 1 FROM payment_attempts LIMIT 1",
    )
    .await?
    {
        return Ok(Vec::new());
    }
    let err = db_err;
    // Memory for the index builds at the end, for this transaction only.
    sqlx::query("SET LOCAL maintenance_work_mem = '256MB'")
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    let fks: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, conname::text, pg_get_constraintdef(oid) \
         FROM pg_constraint WHERE contype = 'f' \
         AND conrelid IN ('payments'::regclass, 'payment_attempts'::regclass) ORDER BY 1, 2",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(err)?;
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i \
         WHERE i.indrelid IN ('payments'::regclass, 'payment_attempts'::regclass) \
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) \
         ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(err)?;
    let mut restore = Vec::new();
    for (table, name, def) in fks {
        let name = format!("\"{}\"", name.replace('"', "\"\""));
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} DROP CONSTRAINT {name}"
        )))
        .execute(&mut *conn)
        .await
        .map_err(err)?;
        restore.push(format!("ALTER TABLE {table} ADD CONSTRAINT {name} {def}"));
    }
    for (name, def) in indexes {
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP INDEX {name}")))
            .execute(&mut *conn)
            .await
            .map_err(err)?;
        restore.insert(0, def);
    }
    Ok(restore)
}

/// Which of `ids` are payments in the database: the ids are copied into a temporary table that
/// one join compares with the ledger (nothing to compare when the ledger is empty). The table's
/// column has the type of `payments.payment_id` (`uuid` when `uuid`): then each id goes in as
/// the canonical text of the UUID it spells, and an id that spells none is no payment there.
async fn payments_in_db(
    conn: &mut PgConnection,
    ids: &[&str],
    uuid: bool,
) -> Result<HashSet<String>> {
    if !has_rows(conn, "SELECT 1 FROM payments LIMIT 1").await? {
        return Ok(HashSet::new());
    }
    let err = db_err;
    // (the id as the ledger column holds it, the id asked about)
    let keyed: Vec<(Cow<'_, str>, &str)> = if uuid {
        ids.iter()
            .filter_map(|&id| crate::model::canonical_uuid(id).map(|c| (Cow::Owned(c), id)))
            .collect()
    } else {
        ids.iter().map(|&id| (Cow::Borrowed(id), id)).collect()
    };
    sqlx::query(if uuid {
        "CREATE TEMP TABLE recon_import_ids (payment_id uuid NOT NULL) ON COMMIT DROP"
    } else {
        "CREATE TEMP TABLE recon_import_ids (payment_id text NOT NULL) ON COMMIT DROP"
    })
    .execute(&mut *conn)
    .await
    .map_err(err)?;
    let rows = Rows {
        file: "payment ids".to_string(),
        rows: keyed.iter().map(|(k, _)| k.as_ref()).collect::<Vec<&str>>(),
        optional: false,
    };
    let order: Vec<u32> = (0..rows.rows.len() as u32).collect();
    copy_in(
        conn,
        (
            "COPY recon_import_ids (payment_id) FROM STDIN",
            "recon_import_ids",
        ),
        (&rows, &order),
        |_| 0,
        |id, out| out.text(id),
    )
    .await?;
    let found: HashSet<String> = sqlx::query_scalar(
        "SELECT DISTINCT i.payment_id::text FROM recon_import_ids i \
         JOIN payments p ON p.payment_id = i.payment_id",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(err)?
    .into_iter()
    .collect();
    sqlx::query("DROP TABLE recon_import_ids")
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    Ok(keyed
        .into_iter()
        .filter(|(k, _)| found.contains(k.as_ref()))
        .map(|(_, id)| id.to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_escapes_what_it_must() {
        let mut out = CopyText::default();
        out.text("a\tb\\c\nd\re,\"f'");
        out.null();
        out.int(-1205);
        out.ts(1_500_000);
        out.end_row();
        assert_eq!(
            String::from_utf8(out.buf).unwrap(),
            "a\\tb\\\\c\\nd\\re,\"f'\t\\N\t-1205\t1970-01-01 00:00:01.500000+00\n"
        );
    }

    #[test]
    fn copy_context_names_the_stream_line() {
        assert_eq!(
            copy_line(
                "COPY payments, line 17, column amount_minor: \"x\"",
                "payments"
            ),
            Some(17)
        );
        assert_eq!(
            copy_line("COPY payment_attempts, line 3", "payment_attempts"),
            Some(3)
        );
        assert_eq!(copy_line("COPY payment_attempts, line 3", "payments"), None);
        assert_eq!(copy_line("", "payments"), None);
    }
}
