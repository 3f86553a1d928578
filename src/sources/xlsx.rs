//! Statements as Excel workbooks (`.xlsx` and legacy `.xls`, read with calamine), through the
//! same column mapping as CSV ([`super::csv::Mapping`]).
//!
//! `sheet` picks the worksheet (default: the first), `skip_lines` the rows above the header,
//! `skip_footer` the non-empty rows below the data. Cells may hold text or native values:
//! a native number is turned into the shortest decimal text that round-trips to the same
//! `f64` and then parsed exactly (so `0.1` stays `0.1`, and a cell holding `12.345` for EUR is
//! rejected as too precise, never rounded); a native date-time is taken in the source's time
//! zone. Error cells are rejected with their row.

use super::SourceLoad;
use super::csv::{Collector, Mapping, Row, TableSource};
use super::keys::{KeyAt, keys_of, split_off};
use super::tabular::{self, RawTabular, TabularSettings};
use crate::exit::{Failure, fail};
use crate::model::Format;
use anyhow::Result;
use calamine::{Data, Reader};
use chrono::NaiveDateTime;
use serde::Deserialize;
use std::collections::VecDeque;
use std::path::Path;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the keys an xlsx source takes (its own here, the shared ones in `tabular`).
// ---------------------------------------------------------------------------------------------

/// The keys only an xlsx source takes, as written; the rest of its keys are the tabular ones
/// ([`RawTabular`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawXlsx {
    /// The sheet to read (default: the first).
    sheet: Option<String>,
}

/// The validated settings of an xlsx source.
#[derive(Debug, Clone, Default)]
pub struct XlsxSettings {
    /// Sheet name (default: the first).
    pub sheet: Option<String>,
    /// The column mapping and number, date and row settings.
    pub table: TabularSettings,
}

/// Every key of an xlsx source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    [keys_of::<RawXlsx>(), keys_of::<RawTabular>()].concat()
}

/// Reads and validates the xlsx keys of a source (`table`: its keys besides the common ones).
pub fn settings(mut table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<XlsxSettings> {
    let own: RawXlsx = at.read(split_off(&mut table, keys_of::<RawXlsx>()))?;
    let shared: RawTabular = at.read(table)?;
    Ok(XlsxSettings {
        sheet: own.sheet,
        table: tabular::settings(at, shared, Format::Xlsx)?,
    })
}

/// One cell as the mapping sees it.
#[derive(Debug, Clone, Default)]
struct Cell {
    text: String,
    number: bool,
    date: Option<NaiveDateTime>,
}

/// One worksheet row.
#[derive(Debug, Clone, Default)]
struct XRow(Vec<Cell>);

impl Row for XRow {
    fn text(&self, i: usize) -> Option<&str> {
        self.0.get(i).map(|c| c.text.as_str())
    }
    fn is_number(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|c| c.number)
    }
    fn date(&self, i: usize) -> Option<NaiveDateTime> {
        self.0.get(i).and_then(|c| c.date)
    }
    fn is_blank(&self) -> bool {
        self.0
            .iter()
            .all(|c| c.text.trim().is_empty() && c.date.is_none())
    }
}

/// The shortest decimal text that reads back as `v` (Rust's `Display` for `f64` and `f32` is
/// exactly that, without exponent notation). Shared with the parquet reader.
pub(super) fn float_text<F: std::fmt::Display + Into<f64> + Copy>(v: F) -> Result<String, String> {
    if !v.into().is_finite() {
        return Err(format!("numeric cell {v} is not a finite number"));
    }
    Ok(format!("{v}"))
}

fn cell(d: &Data) -> Result<Cell, String> {
    Ok(match d {
        Data::Empty => Cell::default(),
        Data::String(s) => Cell {
            text: s.clone(),
            ..Cell::default()
        },
        Data::Int(i) => Cell {
            text: i.to_string(),
            number: true,
            date: None,
        },
        Data::Float(f) => Cell {
            text: float_text(*f)?,
            number: true,
            date: None,
        },
        Data::Bool(b) => Cell {
            text: b.to_string(),
            ..Cell::default()
        },
        Data::DateTime(dt) => {
            let naive = dt
                .as_datetime()
                .ok_or_else(|| format!("date cell {dt} is out of range"))?;
            Cell {
                text: naive.format("%Y-%m-%d %H:%M:%S").to_string(),
                number: false,
                date: Some(naive),
            }
        }
        Data::DateTimeIso(s) => Cell {
            date: NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .or_else(|| {
                    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                }),
            text: s.clone(),
            number: false,
        },
        Data::DurationIso(s) => Cell {
            text: s.clone(),
            ..Cell::default()
        },
        Data::Error(e) => return Err(format!("error cell ({e})")),
    })
}

/// Reads one workbook into `load`. Returns whether every data row was accepted.
pub fn read_file(
    src: TableSource<'_>,
    x: &XlsxSettings,
    path: &Path,
    load: &mut SourceLoad,
) -> Result<bool> {
    super::csv::read_table_file(src, &x.table, path, load, |file, bytes| {
        let mut out = Collector::new(src.name, file, 0);
        parse_bytes(src, x, file, bytes, &mut out)?;
        src.limits.check_rejected(file, &out.rejected)?;
        Ok(out)
    })
}

/// Parses workbook bytes into `out`. A workbook that cannot be opened, a missing sheet or a
/// header without a mapped column is an error for the whole file.
pub fn parse_bytes(
    src: TableSource<'_>,
    x: &XlsxSettings,
    file: &str,
    bytes: &[u8],
    out: &mut Collector,
) -> Result<()> {
    let input = |m: String| fail(Failure::Input, format!("{file}: {m}"));
    if crate::workbook::is_zip(bytes) {
        // XLSX: the archive checked part by part, the sheet measured, then read row by row.
        let limits = &src.limits.workbook;
        let mut book = crate::workbook::open(bytes, limits).map_err(input)?;
        let sheet = pick_sheet(&book.sheet_names(), x.sheet.as_deref()).map_err(input)?;
        let rows = crate::workbook::SheetRows::open(&mut book, &sheet, limits).map_err(input)?;
        read_rows(src, &x.table, file, &sheet, rows, out)
    } else {
        // A legacy .xls: its grid is at most 65,536 rows × 256 columns, so its dense range is
        // bounded by the format (and the file by `max_file_mb`).
        let mut book = calamine::open_workbook_auto_from_rs(std::io::Cursor::new(bytes))
            .map_err(|e| input(format!("not a readable .xlsx/.xls workbook: {e}")))?;
        let sheet = pick_sheet(&book.sheet_names(), x.sheet.as_deref()).map_err(input)?;
        let range = book
            .worksheet_range(&sheet)
            .map_err(|e| input(format!("sheet {sheet:?}: {e}")))?;
        let first_row = range.start().map(|(r, _)| r).unwrap_or(0);
        let rows = range
            .rows()
            .enumerate()
            .map(|(i, r)| Ok((first_row + i as u32, r.to_vec())));
        read_rows(src, &x.table, file, &sheet, rows, out)
    }
}

/// The sheet to read: `wanted` (config key `sheet`), else the first.
fn pick_sheet(names: &[String], wanted: Option<&str>) -> Result<String, String> {
    match wanted {
        Some(s) if names.iter().any(|n| n == s) => Ok(s.to_string()),
        Some(s) => Err(format!(
            "no sheet {s:?} (config key sheet); found {names:?}"
        )),
        None => names
            .first()
            .cloned()
            .ok_or_else(|| "the workbook has no sheet".into()),
    }
}

/// Maps the rows of `sheet` (0-based sheet row, cells from the used range's first column)
/// into `out`.
fn read_rows(
    src: TableSource<'_>,
    t: &TabularSettings,
    file: &str,
    sheet: &str,
    rows: impl Iterator<Item = Result<(u32, Vec<Data>), String>>,
    out: &mut Collector,
) -> Result<()> {
    let input = |m: String| fail(Failure::Input, format!("{file}: {m}"));
    // `skip_lines` counts sheet rows (row 1 is the sheet's first), whatever the used range.
    let skip = t.skip_lines as u64;
    let mut rows = rows
        .map(|r| r.map(|(n, cells)| (u64::from(n) + 1, cells)))
        .filter(|r| !matches!(r, Ok((n, _)) if *n <= skip));
    let header: Option<Vec<String>> = if t.has_header {
        let (n, r) = rows.next().transpose().map_err(input)?.ok_or_else(|| {
            input(format!(
                "sheet {sheet:?} has no header row after {} skipped row(s)",
                t.skip_lines
            ))
        })?;
        let mut h = Vec::with_capacity(r.len());
        for c in &r {
            h.push(
                cell(c)
                    .map_err(|e| input(format!("row {n}: header {e}")))?
                    .text
                    .trim()
                    .to_string(),
            );
        }
        Some(h)
    } else {
        None
    };
    let mapping = Mapping::new(src, t, header.as_deref(), file)?;
    let mut held: VecDeque<(XRow, u64, Option<String>)> = VecDeque::new();
    for r in rows {
        let (n, r) = r.map_err(input)?;
        let mut row = XRow(Vec::with_capacity(r.len()));
        let mut bad = None;
        for (col, c) in r.iter().enumerate() {
            match cell(c) {
                Ok(c) => row.0.push(c),
                Err(e) => {
                    bad = Some(format!("column {}: {e}", col + 1));
                    row.0.push(Cell::default());
                }
            }
        }
        if row.is_blank() && bad.is_none() {
            continue;
        }
        held.push_back((row, n, bad));
        if held.len() > t.skip_footer
            && let Some((r, m, bad)) = held.pop_front()
        {
            match bad {
                Some(e) => out.reject(m, e),
                None => out.push(mapping.row(&r, m), m),
            }
        }
    }
    if held.len() < t.skip_footer {
        return Err(input(format!(
            "has {} row(s) after the header, fewer than skip_footer = {}",
            held.len(),
            t.skip_footer
        )));
    }
    Ok(())
}
