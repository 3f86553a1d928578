//! Bulk reads from SQLite through the raw `sqlite3` handle that sqlx exposes.
//!
//! sqlx's SQLite driver decodes about 120 k rows/s (TOOLCHAIN.md §6): 8 s for a 1M-payment
//! ledger. Stepping the same prepared statement through libsqlite3-sys (the library sqlx
//! already links, so there is still only one sqlite3) is an order of magnitude faster; the
//! same holds for bulk writes (`recon ledger import`), which bind and step one prepared
//! statement per row. The unsafe code is confined to this module: statements are finalized
//! on every path, parameters are bound only for the one step that uses them, and a row view
//! copies what it returns.

use crate::exit::{Failure, fail};
use anyhow::Result;
use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;
use std::ffi::{CStr, c_int};
use std::ptr::{self, NonNull};

/// One row during iteration. Values are copied out; nothing borrowed outlives the step.
pub struct Row {
    stmt: *mut ffi::sqlite3_stmt,
}

impl Row {
    /// How many columns the row has.
    pub fn columns(&self) -> c_int {
        // SAFETY: `stmt` is a live statement (as in `with_text`).
        unsafe { ffi::sqlite3_column_count(self.stmt) }
    }

    /// Text of column `i` (None for NULL). Non-UTF-8 bytes are replaced.
    pub fn text(&self, i: c_int) -> Option<String> {
        self.with_text(i, |s| s.to_string())
    }

    /// Text of column `i` inline when short (ids, accounts): no heap allocation.
    pub fn compact(&self, i: c_int) -> Option<compact_str::CompactString> {
        self.with_text(i, |s| compact_str::CompactString::from(s))
    }

    /// Runs `f` on column `i`'s text without allocating (None for NULL).
    pub fn with_text<T>(&self, i: c_int, f: impl FnOnce(&str) -> T) -> Option<T> {
        // SAFETY: `stmt` is a live statement positioned on a row (guaranteed by `query`,
        // which only hands out a Row between a SQLITE_ROW step and the next step). The
        // pointer returned by sqlite3_column_text stays valid until the next step/finalize,
        // and we finish using it before returning.
        unsafe {
            if ffi::sqlite3_column_type(self.stmt, i) == ffi::SQLITE_NULL {
                return None;
            }
            let p = ffi::sqlite3_column_text(self.stmt, i);
            let n = ffi::sqlite3_column_bytes(self.stmt, i);
            if p.is_null() || n <= 0 {
                return Some(f(""));
            }
            let bytes = std::slice::from_raw_parts(p, n as usize);
            Some(match std::str::from_utf8(bytes) {
                Ok(s) => f(s),
                Err(_) => f(&String::from_utf8_lossy(bytes)),
            })
        }
    }

    /// Integer value of column `i` (0 for NULL).
    pub fn int(&self, i: c_int) -> i64 {
        // SAFETY: as in `with_text`.
        unsafe { ffi::sqlite3_column_int64(self.stmt, i) }
    }
}

/// Finalizes the statement on every exit path.
struct Stmt(*mut ffi::sqlite3_stmt);

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: the pointer came from sqlite3_prepare_v2 and is finalized exactly once.
        unsafe {
            ffi::sqlite3_finalize(self.0);
        }
    }
}

fn error(db: NonNull<ffi::sqlite3>, what: &str, sql: &str) -> anyhow::Error {
    fail(Failure::Database, message(db, what, sql))
}

/// `what: <SQLite's message> (query: <its first 120 characters>)`.
fn message(db: NonNull<ffi::sqlite3>, what: &str, sql: &str) -> String {
    // SAFETY: sqlite3_errmsg returns a NUL-terminated string owned by the connection.
    let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db.as_ptr())) }
        .to_string_lossy()
        .into_owned();
    let head: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "{what}: {msg} (query: {})",
        head.chars().take(120).collect::<String>()
    )
}

/// The raw handle of a connection, locked for as long as this value lives (see [`with_raw`]).
pub struct Raw {
    db: NonNull<ffi::sqlite3>,
}

/// Runs `f` on the raw handle of `conn` (inside whatever transaction `conn` has open).
pub async fn with_raw<T>(
    conn: &mut SqliteConnection,
    f: impl FnOnce(&Raw) -> Result<T>,
) -> Result<T> {
    let mut handle = conn
        .lock_handle()
        .await
        .map_err(|e| fail(Failure::Database, format!("locking the SQLite handle: {e}")))?;
    let raw = Raw {
        db: handle.as_raw_handle(),
    };
    // `handle` keeps the connection locked (no other statement runs on it) until `f` returns.
    f(&raw)
}

/// Runs `sql` with text parameters `?1..?n` and calls `each` for every row.
pub async fn query(
    conn: &mut SqliteConnection,
    sql: &str,
    params: &[&str],
    each: impl FnMut(&Row) -> Result<()>,
) -> Result<()> {
    with_raw(conn, |raw| raw.query(sql, params, each)).await
}

/// A value bound to one parameter of an [`Insert`].
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// NULL.
    Null,
    /// An integer.
    Int(i64),
    /// UTF-8 text.
    Text(&'a [u8]),
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(v: Option<&'a str>) -> Self {
        v.map_or(Value::Null, |s| Value::Text(s.as_bytes()))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Text(s.as_bytes())
    }
}

/// Why [`Insert::row`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    /// A constraint rejected the row (the data's fault, not the database's).
    pub constraint: bool,
    /// SQLite's message and the statement.
    pub message: String,
}

/// A prepared write statement, stepped once per [`Insert::row`].
pub struct Insert<'r> {
    raw: &'r Raw,
    stmt: Stmt,
    sql: &'r str,
}

impl Insert<'_> {
    /// Binds `values` to `?1..?n`, steps once and resets. An error carries SQLite's message
    /// (a constraint that failed, for example).
    pub fn row(&mut self, values: &[Value<'_>]) -> Result<(), StepError> {
        let db = self.raw.db;
        let mut rc = ffi::SQLITE_OK;
        for (i, v) in values.iter().enumerate() {
            let i = i as c_int + 1;
            // SAFETY: `stmt` is a live statement of this locked connection. SQLITE_STATIC
            // text stays borrowed only until the reset and clear below, both before this
            // function returns, while `values` is still borrowed.
            rc = unsafe {
                match *v {
                    Value::Null => ffi::sqlite3_bind_null(self.stmt.0, i),
                    Value::Int(n) => ffi::sqlite3_bind_int64(self.stmt.0, i, n),
                    Value::Text(t) => match c_int::try_from(t.len()) {
                        Ok(n) => ffi::sqlite3_bind_text(
                            self.stmt.0,
                            i,
                            t.as_ptr().cast(),
                            n,
                            ffi::SQLITE_STATIC(),
                        ),
                        Err(_) => ffi::SQLITE_TOOBIG,
                    },
                }
            };
            if rc != ffi::SQLITE_OK {
                break;
            }
        }
        let result = if rc != ffi::SQLITE_OK {
            Err(StepError {
                constraint: false,
                message: message(db, "binding a parameter", self.sql),
            })
        } else {
            // SAFETY: stepping a live, fully bound statement on the locked connection.
            match unsafe { ffi::sqlite3_step(self.stmt.0) } {
                ffi::SQLITE_DONE | ffi::SQLITE_ROW => Ok(()),
                rc => Err(StepError {
                    constraint: rc & 0xff == ffi::SQLITE_CONSTRAINT,
                    message: message(db, "inserting", self.sql),
                }),
            }
        };
        // SAFETY: resetting and unbinding a live statement; nothing stays borrowed after.
        unsafe {
            ffi::sqlite3_reset(self.stmt.0);
            ffi::sqlite3_clear_bindings(self.stmt.0);
        }
        result
    }
}

impl Raw {
    fn prepare(&self, sql: &str) -> Result<Stmt> {
        let mut raw: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let len = c_int::try_from(sql.len())
            .map_err(|_| fail(Failure::Database, "query text too long"))?;
        // SAFETY: `db` is the live connection handle, locked while `self` exists; `sql`
        // outlives the call; `raw` receives the statement, owned from here by `Stmt`.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db.as_ptr(),
                sql.as_ptr().cast(),
                len,
                &mut raw,
                ptr::null_mut(),
            )
        };
        let stmt = Stmt(raw);
        if rc != ffi::SQLITE_OK {
            return Err(error(self.db, "preparing a statement", sql));
        }
        Ok(stmt)
    }

    /// Prepares one write statement with parameters `?1..?n` for [`Insert::row`].
    pub fn insert<'r>(&'r self, sql: &'r str) -> Result<Insert<'r>> {
        Ok(Insert {
            raw: self,
            stmt: self.prepare(sql)?,
            sql,
        })
    }

    /// Runs one statement without parameters (DDL, PRAGMA), ignoring any rows it returns.
    pub fn exec(&self, sql: &str) -> Result<()> {
        self.query(sql, &[], |_| Ok(()))
    }

    /// Runs `sql` with text parameters `?1..?n` and calls `each` for every row.
    pub fn query(
        &self,
        sql: &str,
        params: &[&str],
        mut each: impl FnMut(&Row) -> Result<()>,
    ) -> Result<()> {
        let db = self.db;
        let stmt = self.prepare(sql)?;
        for (i, p) in params.iter().enumerate() {
            let n = c_int::try_from(p.len())
                .map_err(|_| fail(Failure::Database, "parameter too long"))?;
            // SAFETY: SQLITE_TRANSIENT makes SQLite copy the bytes before returning.
            let rc = unsafe {
                ffi::sqlite3_bind_text(
                    stmt.0,
                    i as c_int + 1,
                    p.as_ptr().cast(),
                    n,
                    ffi::SQLITE_TRANSIENT(),
                )
            };
            if rc != ffi::SQLITE_OK {
                return Err(error(db, "binding a query parameter", sql));
            }
        }
        let row = Row { stmt: stmt.0 };
        loop {
            // SAFETY: stepping a live, fully bound statement on the locked connection.
            match unsafe { ffi::sqlite3_step(stmt.0) } {
                ffi::SQLITE_ROW => each(&row)?,
                ffi::SQLITE_DONE => break,
                _ => return Err(error(db, "running a query", sql)),
            }
        }
        Ok(())
    }
}
