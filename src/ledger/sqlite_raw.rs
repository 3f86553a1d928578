//! Bulk reads from SQLite through the raw `sqlite3` handle that sqlx exposes.
//!
//! sqlx's SQLite driver decodes about 120 k rows/s (TOOLCHAIN.md §6): 8 s for a 1M-payment
//! ledger. Stepping the same prepared statement through libsqlite3-sys (the library sqlx
//! already links, so there is still only one sqlite3) is an order of magnitude faster. The
//! unsafe code is confined to this module: one statement, text parameters, and a row view
//! that copies what it returns.

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
    // SAFETY: sqlite3_errmsg returns a NUL-terminated string owned by the connection.
    let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db.as_ptr())) }
        .to_string_lossy()
        .into_owned();
    let head: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    fail(
        Failure::Database,
        format!(
            "{what}: {msg} (query: {})",
            head.chars().take(120).collect::<String>()
        ),
    )
}

/// Runs `sql` with text parameters `?1..?n` and calls `each` for every row.
pub async fn query(
    conn: &mut SqliteConnection,
    sql: &str,
    params: &[&str],
    mut each: impl FnMut(&Row) -> Result<()>,
) -> Result<()> {
    let mut handle = conn
        .lock_handle()
        .await
        .map_err(|e| fail(Failure::Database, format!("locking the SQLite handle: {e}")))?;
    let db = handle.as_raw_handle();
    let mut raw: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let len =
        c_int::try_from(sql.len()).map_err(|_| fail(Failure::Database, "query text too long"))?;
    // SAFETY: `db` is the live connection handle held locked for this whole function; `sql`
    // outlives the call; `raw` receives the statement, owned from here by `Stmt`.
    let rc = unsafe {
        ffi::sqlite3_prepare_v2(
            db.as_ptr(),
            sql.as_ptr().cast(),
            len,
            &mut raw,
            ptr::null_mut(),
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(error(db, "preparing a ledger query", sql));
    }
    let stmt = Stmt(raw);
    for (i, p) in params.iter().enumerate() {
        let n =
            c_int::try_from(p.len()).map_err(|_| fail(Failure::Database, "parameter too long"))?;
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
            return Err(error(db, "binding a ledger query parameter", sql));
        }
    }
    let row = Row { stmt: stmt.0 };
    loop {
        // SAFETY: stepping a live, fully bound statement on the locked connection.
        match unsafe { ffi::sqlite3_step(stmt.0) } {
            ffi::SQLITE_ROW => each(&row)?,
            ffi::SQLITE_DONE => break,
            _ => return Err(error(db, "reading the ledger", sql)),
        }
    }
    drop(stmt);
    Ok(())
}
