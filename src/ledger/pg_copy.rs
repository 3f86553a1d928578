//! Bulk reads from PostgreSQL with `COPY (query) TO STDOUT` (text format), streamed row by row
//! without sqlx's per-row decoding: PostgreSQL sends one CopyData message per row, and the text
//! format is tab-separated fields with `\N` for NULL and backslash escapes
//! (<https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2>). Small enough to
//! write here; no crate offers it over sqlx's stream.

use crate::exit::{Failure, fail};
use anyhow::Result;
use futures_util::TryStreamExt;
use std::borrow::Cow;

/// Streams the rows of `COPY (select) TO STDOUT` into `each` (fields split, NULL = None).
pub async fn copy_rows(
    conn: &mut sqlx::PgConnection,
    select: &str,
    mut each: impl FnMut(&[Option<Cow<'_, str>>]) -> Result<()>,
) -> Result<u64> {
    let err = |e: sqlx::Error| {
        fail(
            Failure::Database,
            format!("loading the ledger: {}", crate::db::message(e)),
        )
    };
    let mut stream = conn
        .copy_out_raw(&format!("COPY ({select}) TO STDOUT"))
        .await
        .map_err(err)?;
    let mut rows = 0u64;
    while let Some(chunk) = stream.try_next().await.map_err(err)? {
        // A message may in principle carry several rows: split on the row terminator.
        for row in chunk.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
            let row = std::str::from_utf8(row).map_err(|e| {
                fail(
                    Failure::Database,
                    format!(
                        "loading the ledger: row {} of the database's COPY stream (not a line of any file) is not UTF-8: {e}",
                        rows + 1
                    ),
                )
            })?;
            let fields: Vec<Option<Cow<'_, str>>> = row.split('\t').map(field).collect();
            each(&fields)?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// One text-format field: `\N` is NULL; backslash escapes are decoded.
fn field(raw: &str) -> Option<Cow<'_, str>> {
    if raw == "\\N" {
        return None;
    }
    if !raw.contains('\\') {
        return Some(Cow::Borrowed(raw));
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Some(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_fields() {
        assert_eq!(field("\\N"), None);
        assert_eq!(field("abc").as_deref(), Some("abc"));
        assert_eq!(field("a\\tb\\\\c\\n").as_deref(), Some("a\tb\\c\n"));
        assert_eq!(field("").as_deref(), Some(""));
    }
}
