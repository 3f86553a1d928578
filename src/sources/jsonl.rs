//! Provider exports as JSON lines (one JSON object a line, as report exports to object storage
//! write them), read through the same column mapping as CSV ([`super::csv::Mapping`]), where
//! every column is a JSON pointer (RFC 6901, as `[status_api.pointers]` uses them):
//! `amount = "/amount/value"`, `currency = "/amount/currency"`.
//!
//! A number is read from the text as written (never through `f64`: `12.10` stays `12.10`); a
//! string as its decoded text; `true`/`false` as that word; `null` and a missing key as an
//! empty cell (no value: an optional field stays empty, a required one rejects the line with
//! its pointer). A pointer to an object or an array rejects the line, as does a line that is not a
//! JSON object. Blank lines are skipped. Rejected lines name their line and the pointer.
//!
//! The mapping keys are the tabular ones of csv and xlsx, but a JSON object has no header,
//! preamble or footer: `has_header`, `skip_lines` and `skip_footer` are refused, and so is a
//! column by position (`#N`).

use super::csv::{Collector, Mapping, Row, TableSource};
use super::keys::{KeyAt, keys_of};
use super::tabular::{self, RawTabular, TabularSettings};
use super::{ParseContext, SourceLoad, text};
use crate::model::Format;
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the tabular keys, each column a JSON pointer.
// ---------------------------------------------------------------------------------------------

/// The validated settings of a jsonl source.
#[derive(Debug, Clone, Default)]
pub struct JsonlSettings {
    /// The mapping: every column a JSON pointer.
    pub table: TabularSettings,
}

/// Every key of a jsonl source besides the common ones: the tabular keys.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawTabular>().to_vec()
}

/// Reads and validates the jsonl keys of a source (`table`: its keys besides the common ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<JsonlSettings> {
    tabular::refuse(
        &table,
        at,
        &["has_header", "skip_lines", "skip_footer"],
        "not used by format jsonl (each line is one JSON object: no header, preamble or footer)",
    )?;
    let shared: RawTabular = at.read(table)?;
    let table = tabular::settings(at, shared, Format::Jsonl)?;
    for (key, pointer) in tabular::mapped_columns(&table) {
        if !pointer.starts_with('/') {
            return Err(at.bad(
                &key,
                format!(
                    "{pointer:?} is not a JSON pointer (format jsonl maps each field to a JSON pointer such as \"/amount/value\")"
                ),
            ));
        }
    }
    Ok(JsonlSettings { table })
}

// ---------------------------------------------------------------------------------------------
// Reading.
// ---------------------------------------------------------------------------------------------

/// One value of a line, at one pointer.
#[derive(Debug, Clone, Default)]
struct Cell {
    text: Option<String>,
    number: bool,
}

/// One line: the value at each pointer of the mapping (in [`tabular::mapped_columns`] order,
/// deduplicated).
#[derive(Debug, Clone, Default)]
struct JRow(Vec<Cell>);

impl Row for JRow {
    /// A missing key and `null` read as an empty cell, as a blank CSV cell does: no value for
    /// an optional field, and for a required one the mapping's error naming the pointer.
    fn text(&self, i: usize) -> Option<&str> {
        self.0.get(i).map(|c| c.text.as_deref().unwrap_or(""))
    }
    fn is_number(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|c| c.number)
    }
    fn is_blank(&self) -> bool {
        self.0
            .iter()
            .all(|c| c.text.as_deref().is_none_or(|t| t.trim().is_empty()))
    }
}

/// Reads one JSON lines file into `load`. Returns whether every line was accepted.
pub fn read_file(
    src: TableSource<'_>,
    j: &JsonlSettings,
    path: &Path,
    load: &mut SourceLoad,
) -> Result<bool> {
    super::csv::read_table_file(src, &j.table, path, load, |file, bytes| {
        parse_bytes(src, j, file, bytes)
    })
}

/// Parses JSON lines bytes: accepted lines, rejected and not-booked lines, dropped
/// re-deliveries. Text that is not UTF-8 or a line over `max_line_bytes` fails the file;
/// a line that is no JSON object, or whose mapped values do not read, is rejected with its
/// line and pointer.
pub fn parse_bytes(
    src: TableSource<'_>,
    j: &JsonlSettings,
    file: &str,
    bytes: &[u8],
) -> Result<Collector> {
    let ctx = ParseContext {
        source: Arc::from(src.name),
        file: Arc::from(file),
        timezone: src.timezone,
        encoding: None,
    };
    let body = text::decode(&ctx, bytes)?;
    src.limits.check_lines(file, body.as_bytes(), 1)?;
    let mut header: Vec<String> = Vec::new();
    for (_, p) in tabular::mapped_columns(&j.table) {
        if !header.contains(&p) {
            header.push(p);
        }
    }
    let mapping = Mapping::new(src, &j.table, Some(&header), file)?;
    let rows = body.lines().count();
    let mut out = Collector::new(src.name, file, rows);
    for (i, line) in body.lines().enumerate() {
        src.limits.check_rejected(file, &out.rejected)?;
        let n = i as u64 + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match row(line, &header) {
            Ok(r) => out.push(mapping.row(&r, n), n),
            Err(why) => out.reject(n, why),
        }
    }
    Ok(out)
}

/// The values of `line` at `pointers`, or why the line is no JSON object with readable values.
fn row(line: &str, pointers: &[String]) -> Result<JRow, String> {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err("not a JSON object".into()),
        Err(e) => return Err(format!("not JSON: {e}")),
    }
    let mut cells = Vec::with_capacity(pointers.len());
    for p in pointers {
        let cell = match raw_at(line, p) {
            None | Some("null") => Cell::default(),
            Some(raw) if raw.starts_with('"') => Cell {
                text: Some(
                    serde_json::from_str::<String>(raw).map_err(|e| format!("key {p:?}: {e}"))?,
                ),
                number: false,
            },
            Some(raw @ ("true" | "false")) => Cell {
                text: Some(raw.to_string()),
                number: false,
            },
            Some(raw) if raw.starts_with(['{', '[']) => {
                return Err(format!(
                    "key {p:?} holds an {}, not a value",
                    if raw.starts_with('{') {
                        "object"
                    } else {
                        "array"
                    }
                ));
            }
            Some(raw) => Cell {
                text: Some(raw.to_string()),
                number: true,
            },
        };
        cells.push(cell);
    }
    Ok(JRow(cells))
}

/// The raw JSON text of the value at `pointer` (RFC 6901) in valid JSON `text`: a number's
/// digits exactly as written, so amounts never pass through `f64`.
pub fn raw_at<'a>(text: &'a str, pointer: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    let mut pos = ws(b, 0);
    if pointer.is_empty() {
        let end = skip_value(b, pos)?;
        return Some(&text[pos..end]);
    }
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        match *b.get(pos)? {
            b'{' => {
                pos = ws(b, pos + 1);
                let mut found = None;
                while *b.get(pos)? != b'}' {
                    let (key, end) = string(text, pos)?;
                    pos = ws(b, end);
                    if *b.get(pos)? != b':' {
                        return None;
                    }
                    pos = ws(b, pos + 1);
                    if key == token && found.is_none() {
                        found = Some(pos);
                    }
                    pos = ws(b, skip_value(b, pos)?);
                    if *b.get(pos)? == b',' {
                        pos = ws(b, pos + 1);
                    }
                }
                pos = found?;
            }
            b'[' => {
                let want: usize = token.parse().ok()?;
                pos = ws(b, pos + 1);
                let mut i = 0;
                loop {
                    if *b.get(pos)? == b']' {
                        return None;
                    }
                    if i == want {
                        break;
                    }
                    pos = ws(b, skip_value(b, pos)?);
                    if *b.get(pos)? == b',' {
                        pos = ws(b, pos + 1);
                    }
                    i += 1;
                }
            }
            _ => return None,
        }
    }
    let end = skip_value(b, pos)?;
    Some(&text[pos..end])
}

fn ws(b: &[u8], mut pos: usize) -> usize {
    while pos < b.len() && matches!(b[pos], b' ' | b'\t' | b'\n' | b'\r') {
        pos += 1;
    }
    pos
}

/// A JSON string at `pos`: its decoded text and the position after it.
fn string(text: &str, pos: usize) -> Option<(String, usize)> {
    let b = text.as_bytes();
    if *b.get(pos)? != b'"' {
        return None;
    }
    let end = skip_value(b, pos)?;
    let decoded: String = serde_json::from_str(&text[pos..end]).ok()?;
    Some((decoded, end))
}

/// The position after the JSON value at `pos`.
fn skip_value(b: &[u8], pos: usize) -> Option<usize> {
    match *b.get(pos)? {
        b'"' => {
            let mut i = pos + 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            None
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = pos;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = skip_value(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = pos;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                i += 1;
            }
            (i > pos).then_some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_read_as_written_and_containers_are_refused() {
        let ptrs = ["/a/b".to_string(), "/n".to_string(), "/o".to_string()];
        let r = row(r#"{"a":{"b":"x\"y"},"n":12.10}"#, &ptrs[..2]).unwrap();
        assert_eq!(r.text(0), Some("x\"y"));
        assert!(!r.is_number(0));
        assert_eq!(r.text(1), Some("12.10"));
        assert!(r.is_number(1));
        let e = row(r#"{"a":{"b":1},"n":1,"o":[1]}"#, &ptrs).unwrap_err();
        assert_eq!(e, "key \"/o\" holds an array, not a value");
        assert_eq!(row("[1]", &ptrs).unwrap_err(), "not a JSON object");
        assert!(row("{\"a\":", &ptrs).unwrap_err().starts_with("not JSON"));
        // A missing key and null are both an empty cell.
        let r = row(r#"{"n":null}"#, &ptrs).unwrap();
        assert_eq!((r.text(0), r.text(1)), (Some(""), Some("")));
        assert!(r.is_blank());
    }
}
