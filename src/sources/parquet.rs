//! Provider exports as Parquet files (report exports to object storage), read by Polars and
//! mapped through the same column mapping as CSV ([`super::csv::Mapping`]): each column by its
//! name in the file's schema, or by its position (`#N`).
//!
//! A cell is read by its column's type, never through `f64` unless the file stored a float:
//! - strings (and dictionary-encoded strings) as their text, parsed like a CSV cell
//!   (`decimal_separator`, `thousands_separator`, `amount_symbols`, `timestamp_format` apply);
//! - integers as the number written (`1250` is 1250.00 EUR, not cents);
//! - decimals exactly, from their unscaled integer and scale (`DECIMAL(10,2)` 12.30 is
//!   `12.30`);
//! - floats by the shortest decimal text that reads back as the same float (as the xlsx
//!   reader reads a number cell), then exactly: `0.1` is 0.10, a float holding `12.345` for
//!   EUR is a rejected row, never rounded;
//! - booleans as `true`/`false`;
//! - a date as a booked day (the whole day in the source's `timezone`);
//! - a timestamp with a time zone (UTC-adjusted in Parquet) as that instant, exactly; a
//!   timestamp without one as a wall-clock time in the source's `timezone` (a time in a
//!   daylight-saving gap or fold rejects its row). Either is exact to the microsecond (a
//!   nanosecond timestamp is cut to its microsecond), and its text, where the mapping reads it
//!   as text, is RFC 3339 in UTC (`2026-11-26T09:30:00Z`) or the wall-clock time
//!   (`2026-11-26T10:30:00`);
//! - null as an empty cell, as a blank CSV cell: no value for an optional field, the mapping's
//!   error naming the column for a required one.
//!
//! Rows are numbered from 1, the first data row (`f.parquet:3` is the third row). A mapped
//! column of any other type (lists, structs, binary, times of day, durations) fails the file
//! naming it, as does a file that is not Parquet, is cut short, or lacks a mapped column.
//! Only the mapped columns are decoded, and only after the file's metadata says they fit the
//! workbook bounds (`max_sheet_cells` cells, `max_inflated_mb` uncompressed) and the file holds
//! no more rows than bytes: a small file that inflates to gigabytes is refused unread.
//!
//! The mapping keys are the tabular ones of csv and xlsx, but a Parquet file has no header
//! row, preamble or footer: `has_header`, `skip_lines` and `skip_footer` are refused, and so is
//! a `#N..` column (rows wider than their header are a CSV matter).

use super::SourceLoad;
use super::csv::{Collector, Mapping, Row, TableSource};
use super::keys::{KeyAt, keys_of};
use super::limits::{InputLimits, MAX_FIELD_BYTES};
use super::tabular::{self, RawTabular, TabularSettings, column_rest};
use crate::exit::{Failure, fail};
use crate::model::Format;
use crate::timeparse::{self, Micros};
use anyhow::Result;
use chrono::{NaiveDate, NaiveDateTime};
use polars::prelude::{
    AnyValue, ArrowDataType, ArrowSchema, ParquetReader, PolarsResult, SerReader, TimeUnit,
};
use std::fmt::Write as _;
use std::path::Path;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the tabular keys, each column a name of the file's schema or `#N`.
// ---------------------------------------------------------------------------------------------

/// The validated settings of a parquet source.
#[derive(Debug, Clone, Default)]
pub struct ParquetSettings {
    /// The mapping: every column a name of the file's schema, or `#N`.
    pub table: TabularSettings,
}

/// Every key of a parquet source besides the common ones: the tabular keys.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawTabular>().to_vec()
}

/// Reads and validates the parquet keys of a source (`table`: its keys besides the common
/// ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<ParquetSettings> {
    tabular::refuse(
        &table,
        at,
        &["has_header", "skip_lines", "skip_footer"],
        "not used by format parquet (a Parquet file's columns have names and types: no header row, preamble or footer)",
    )?;
    let shared: RawTabular = at.read(table)?;
    let table = tabular::settings(at, shared, Format::Parquet)?;
    for (key, column) in tabular::mapped_columns(&table) {
        if column_rest(&column).is_some() {
            return Err(at.bad(
                &key,
                format!(
                    "{column:?}: `#N..` (column N and every field after it) is for CSV rows wider than their header; a Parquet file's columns are fixed, so name each one"
                ),
            ));
        }
    }
    Ok(ParquetSettings { table })
}

// ---------------------------------------------------------------------------------------------
// Reading.
// ---------------------------------------------------------------------------------------------

/// A typed date or time of a cell.
#[derive(Debug, Clone, Copy, Default)]
enum Stamp {
    /// Not a date or time.
    #[default]
    None,
    /// A date: the whole day in the source's time zone.
    Day(NaiveDate),
    /// A timestamp without a time zone: a wall-clock time in the source's time zone.
    Local(NaiveDateTime),
    /// A timestamp with a time zone: an instant.
    Instant(Micros),
}

/// One cell as the mapping sees it.
#[derive(Debug, Clone, Default)]
struct Cell {
    text: String,
    number: bool,
    stamp: Stamp,
}

/// One row: a cell for every column of the schema (the unmapped ones stay empty).
#[derive(Debug, Clone)]
struct PRow {
    cells: Vec<Cell>,
    timezone: chrono_tz::Tz,
}

impl Row for PRow {
    fn text(&self, i: usize) -> Option<&str> {
        self.cells.get(i).map(|c| c.text.as_str())
    }
    fn is_number(&self, i: usize) -> bool {
        self.cells.get(i).is_some_and(|c| c.number)
    }
    fn date(&self, i: usize) -> Option<NaiveDateTime> {
        match self.cells.get(i)?.stamp {
            Stamp::Day(d) => Some(d.and_time(chrono::NaiveTime::MIN)),
            _ => None,
        }
    }
    fn instant(&self, i: usize) -> Option<Result<Micros, String>> {
        match self.cells.get(i)?.stamp {
            Stamp::Local(naive) => Some(timeparse::local_to_utc(naive, self.timezone)),
            Stamp::Instant(t) => Some(Ok(t)),
            Stamp::None | Stamp::Day(_) => None,
        }
    }
    fn is_blank(&self) -> bool {
        self.cells
            .iter()
            .all(|c| c.text.trim().is_empty() && matches!(c.stamp, Stamp::None))
    }
}

/// Reads one Parquet file into `load`. Returns whether every row was accepted.
pub fn read_file(
    src: TableSource<'_>,
    p: &ParquetSettings,
    path: &Path,
    load: &mut SourceLoad,
) -> Result<bool> {
    super::csv::read_table_file(src, &p.table, path, load, |file, bytes| {
        parse_bytes(src, p, file, bytes)
    })
}

/// Parses Parquet bytes: accepted rows, rejected and not-booked rows, dropped re-deliveries.
/// A file that is not Parquet or is cut short, a mapped column missing or of a type recon does
/// not read, or a file over the bounds fails the whole file; a cell that does not read rejects
/// its row with the column.
pub fn parse_bytes(
    src: TableSource<'_>,
    p: &ParquetSettings,
    file: &str,
    bytes: &[u8],
) -> Result<Collector> {
    let input = |m: String| fail(Failure::Input, format!("{file}: {m}"));
    let unreadable = |e: String| input(format!("not a readable Parquet file ({e})"));
    let t = &p.table;
    let mut reader = ParquetReader::new(std::io::Cursor::new(bytes));
    let schema = guarded(|| reader.schema()).map_err(unreadable)?;
    let header: Vec<String> = schema.iter().map(|(n, _)| n.to_string()).collect();
    let mapping = Mapping::new(src, t, Some(&header), file)?;
    let used = mapping.columns();
    for &i in &used {
        let dtype = dtype_at(&schema, i);
        readable(dtype).map_err(|why| input(format!("column {:?} {why}", header[i])))?;
    }
    let booked_at = mapping.booked_at_column();
    if let Some(time) = &t.columns.booked_time
        && matches!(
            dtype_at(&schema, booked_at),
            ArrowDataType::Date32 | ArrowDataType::Date64 | ArrowDataType::Timestamp(..)
        )
    {
        return Err(input(format!(
            "column {:?} (config key columns.booked_at) holds typed dates or timestamps, so column {time:?} (columns.booked_time) has nothing to add to; remove columns.booked_time",
            header[booked_at]
        )));
    }
    let metadata = guarded(|| reader.get_metadata().cloned()).map_err(unreadable)?;
    check_bounds(&metadata, &header, &used, bytes.len(), src.limits).map_err(input)?;
    let projection = used.clone();
    let df = guarded(move || {
        reader
            .with_projection(Some(projection))
            .set_rechunk(true)
            .finish()
    })
    .map_err(unreadable)?;
    let columns = df.columns();
    if columns.len() != used.len() {
        return Err(unreadable(format!(
            "{} columns decoded for the {} mapped",
            columns.len(),
            used.len()
        )));
    }
    let height = df.height();
    // Room for the rows up front, but never more than the file has bytes (its metadata says
    // how many rows there are, and was bounded by that above).
    let mut out = Collector::new(src.name, file, height.min(bytes.len()));
    let mut row = PRow {
        cells: vec![Cell::default(); header.len()],
        timezone: src.timezone,
    };
    for r in 0..height {
        src.limits.check_rejected(file, &out.rejected)?;
        let n = r as u64 + 1;
        let mut bad = None;
        for (&i, column) in used.iter().zip(columns) {
            let value = guarded(|| column.get(r)).map_err(unreadable)?;
            let cell = &mut row.cells[i];
            let why = match fill(cell, value) {
                Err(e) => Some(e),
                Ok(()) if cell.text.len() > MAX_FIELD_BYTES => Some(format!(
                    "the field is {} bytes, more than the {MAX_FIELD_BYTES} a field may have",
                    cell.text.len()
                )),
                Ok(()) => None,
            };
            if let Some(why) = why
                && bad.is_none()
            {
                bad = Some(format!("column {:?}: {why}", super::cut(&header[i])));
            }
        }
        match bad {
            Some(why) => out.reject(n, why),
            None => out.push(mapping.row(&row, n), n),
        }
    }
    Ok(out)
}

/// Runs a step of the Polars reader, turning its error, or a panic on a malformed file (the
/// decoder trusts more of the file than it should), into the reason a file is unreadable.
fn guarded<T>(step: impl FnOnce() -> PolarsResult<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no reason given".into());
            Err(format!("the Parquet decoder failed: {}", super::cut(&why)))
        }
    }
}

/// The Arrow type of column `i` of `schema` (a column the mapping found there).
fn dtype_at(schema: &ArrowSchema, i: usize) -> &ArrowDataType {
    match schema.get_at_index(i) {
        Some((_, field)) => &field.dtype,
        None => &ArrowDataType::Unknown,
    }
}

/// Whether recon reads cells of type `dtype`, or why not.
fn readable(dtype: &ArrowDataType) -> Result<(), String> {
    use ArrowDataType as A;
    match dtype {
        A::Null
        | A::Boolean
        | A::Int8
        | A::Int16
        | A::Int32
        | A::Int64
        | A::UInt8
        | A::UInt16
        | A::UInt32
        | A::UInt64
        | A::Float32
        | A::Float64
        | A::Utf8
        | A::LargeUtf8
        | A::Utf8View
        | A::Date32
        | A::Date64
        | A::Timestamp(..) => Ok(()),
        A::Decimal(p, s) | A::Decimal32(p, s) | A::Decimal64(p, s) | A::Decimal256(p, s)
            if (1..=38).contains(p) && s <= p =>
        {
            Ok(())
        }
        A::Dictionary(_, values, _)
            if matches!(values.as_ref(), A::Utf8 | A::LargeUtf8 | A::Utf8View) =>
        {
            Ok(())
        }
        other => Err(format!(
            "has type {other:?}, which recon does not read as a cell (hint: export it as a string, an integer, a decimal, a float, a date or a timestamp)"
        )),
    }
}

/// Fails when decoding the mapped columns `used` of a file of `file_bytes` bytes would cost
/// more than the bounds allow, by its metadata: more rows than bytes (no statement is that
/// dense), more cells than `max_sheet_cells`, or more than `max_inflated_mb` uncompressed.
fn check_bounds(
    metadata: &polars::io::parquet::read::FileMetadata,
    header: &[String],
    used: &[usize],
    file_bytes: usize,
    limits: &InputLimits,
) -> Result<(), String> {
    let rows = metadata.num_rows;
    if rows > file_bytes {
        return Err(format!(
            "the file says it holds {rows} rows in {file_bytes} bytes, more rows than bytes: no statement is that dense (hint: is this a statement file?)"
        ));
    }
    let cells = (rows as u64).saturating_mul(used.len() as u64);
    let max_cells = limits.workbook.max_sheet_cells;
    if cells > max_cells {
        return Err(format!(
            "{rows} rows × {} mapped columns = {cells} cells, more than max_sheet_cells = {max_cells}",
            used.len()
        ));
    }
    let mut inflated = 0u64;
    for group in &metadata.row_groups {
        for &i in used {
            for chunk in group
                .columns_under_root_iter(&header[i])
                .into_iter()
                .flatten()
            {
                let size = u64::try_from(chunk.uncompressed_size()).unwrap_or(u64::MAX);
                inflated = inflated.saturating_add(size);
            }
        }
    }
    let max_inflated = limits.workbook.max_inflated_bytes;
    if inflated > max_inflated {
        return Err(format!(
            "its mapped columns inflate to {} MiB, more than max_inflated_mb = {} allows",
            inflated >> 20,
            max_inflated >> 20
        ));
    }
    Ok(())
}

/// Puts `value` into `cell`, or says why it is no cell recon reads.
fn fill(cell: &mut Cell, value: AnyValue<'_>) -> Result<(), String> {
    cell.text.clear();
    cell.number = false;
    cell.stamp = Stamp::None;
    if let Some(s) = value.get_str() {
        cell.text.push_str(s);
        return Ok(());
    }
    let text = &mut cell.text;
    let number = match value {
        AnyValue::Null => false,
        AnyValue::Boolean(b) => {
            text.push_str(if b { "true" } else { "false" });
            false
        }
        AnyValue::Int8(v) => put(text, v),
        AnyValue::Int16(v) => put(text, v),
        AnyValue::Int32(v) => put(text, v),
        AnyValue::Int64(v) => put(text, v),
        AnyValue::UInt8(v) => put(text, v),
        AnyValue::UInt16(v) => put(text, v),
        AnyValue::UInt32(v) => put(text, v),
        AnyValue::UInt64(v) => put(text, v),
        AnyValue::Float32(v) => {
            text.push_str(&super::xlsx::float_text(v)?);
            true
        }
        AnyValue::Float64(v) => {
            text.push_str(&super::xlsx::float_text(v)?);
            true
        }
        AnyValue::Decimal(v, _, scale) => {
            decimal_text(text, v, scale);
            true
        }
        AnyValue::Date(days) => {
            let day = NaiveDate::from_num_days_from_ce_opt(days.saturating_add(719_163))
                .ok_or_else(|| format!("date {days} (days since 1970-01-01) is out of range"))?;
            let _ = write!(text, "{}", day.format("%Y-%m-%d"));
            cell.stamp = Stamp::Day(day);
            false
        }
        AnyValue::Datetime(v, unit, zone) => {
            cell.stamp = timestamp(text, v, unit, zone.is_some())?;
            false
        }
        AnyValue::DatetimeOwned(v, unit, zone) => {
            cell.stamp = timestamp(text, v, unit, zone.is_some())?;
            false
        }
        other => {
            return Err(format!(
                "a {} value, which recon does not read",
                other.dtype()
            ));
        }
    };
    cell.number = number;
    Ok(())
}

/// Writes an integer cell's digits to `text`; an integer is a number.
fn put(text: &mut String, v: impl std::fmt::Display) -> bool {
    let _ = write!(text, "{v}");
    true
}

/// Writes the decimal whose unscaled value is `v` with `scale` digits after the point:
/// `decimal_text(1230, 2)` is `12.30`. Exact (no float).
fn decimal_text(text: &mut String, v: i128, scale: usize) {
    let digits = v.unsigned_abs().to_string();
    if v < 0 {
        text.push('-');
    }
    if scale == 0 {
        text.push_str(&digits);
        return;
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    text.push_str(whole);
    text.push('.');
    text.push_str(fraction);
}

/// Reads a timestamp of `v` in `unit` (`zoned`: it has a time zone, so it is an instant)
/// into its stamp, writing its text to `text`.
fn timestamp(text: &mut String, v: i64, unit: TimeUnit, zoned: bool) -> Result<Stamp, String> {
    let micros = match unit {
        TimeUnit::Nanoseconds => Some(v.div_euclid(1000)),
        TimeUnit::Microseconds => Some(v),
        TimeUnit::Milliseconds => v.checked_mul(1000),
    };
    let at = micros
        .and_then(chrono::DateTime::from_timestamp_micros)
        .ok_or_else(|| format!("timestamp {v} ({unit}) is out of range"))?;
    if zoned {
        text.push_str(&timeparse::format_utc(at.timestamp_micros()));
        Ok(Stamp::Instant(at.timestamp_micros()))
    } else {
        let naive = at.naive_utc();
        let _ = write!(text, "{}", naive.format("%Y-%m-%dT%H:%M:%S%.f"));
        Ok(Stamp::Local(naive))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_exactly() {
        let text = |v: i128, scale: usize| {
            let mut s = String::new();
            decimal_text(&mut s, v, scale);
            s
        };
        assert_eq!(text(1230, 2), "12.30");
        assert_eq!(text(-5, 2), "-0.05");
        assert_eq!(text(0, 2), "0.00");
        assert_eq!(text(-1500, 0), "-1500");
        assert_eq!(
            text(i128::MIN, 4),
            "-17014118346046923173168730371588410.5728"
        );
    }

    #[test]
    fn cells_by_type() {
        let mut c = Cell::default();
        fill(&mut c, AnyValue::Float64(0.1 + 0.2)).unwrap();
        assert_eq!((c.text.as_str(), c.number), ("0.30000000000000004", true));
        fill(&mut c, AnyValue::Float32(0.1)).unwrap();
        assert_eq!(c.text, "0.1");
        fill(&mut c, AnyValue::Decimal(1230, 10, 2)).unwrap();
        assert_eq!((c.text.as_str(), c.number), ("12.30", true));
        fill(&mut c, AnyValue::Null).unwrap();
        assert_eq!((c.text.as_str(), c.number), ("", false));
        assert!(fill(&mut c, AnyValue::Float64(f64::NAN)).is_err());
        fill(
            &mut c,
            AnyValue::Datetime(1_764_149_400_000_000, TimeUnit::Microseconds, None),
        )
        .unwrap();
        assert_eq!(c.text, "2025-11-26T09:30:00");
        assert!(matches!(c.stamp, Stamp::Local(_)));
    }
}
