//! Bounded reading of XLSX workbooks, for statements and for Decide sheets alike (issue 41
//! point 2). A workbook's file size says little about what it costs to read: a 1.2 MB file can
//! hold a 1 GiB shared string, and a 1.6 KB file a cell at `XFD1048576` that makes a dense cell
//! range of 17 billion cells. So, before a cell is read:
//!
//! - every part of the zip archive is inflated once, counting: a part that inflates past
//!   `max_inflated_mb`, or to more than [`MAX_RATIO`] times its compressed size, makes the
//!   workbook unreadable (a zip bomb); the shared-string table must not declare more strings
//!   than `max_sheet_cells` or than its own size can hold;
//! - the sheet's declared dimension, then the extent of its used cells, must stay within
//!   `max_sheet_cells` and within Excel's own grid (1,048,576 rows × 16,384 columns);
//!
//! and then the sheet is read row by row ([`SheetRows`]), never as one dense range: what a
//! reader holds is one row (at most 16,384 cells) and the shared strings, which the checks
//! above bound.

use calamine::{Data, Reader as _, Xlsx};
use std::io::{Cursor, Read};

/// A part that inflates to more than this many times its compressed size (once past 1 MiB) is
/// a zip bomb, not a workbook: spreadsheet XML compresses about 5–20 times, and even a sheet of
/// one repeated row stays far below.
pub const MAX_RATIO: u64 = 250;
/// The default of `max_inflated_mb`: the most one part of a workbook may inflate to.
pub const DEFAULT_MAX_INFLATED_MB: u64 = 512;
/// The default of `max_sheet_cells`: rows × columns of a sheet's used range (a statement of a
/// million rows and fifty columns fits).
pub const DEFAULT_MAX_SHEET_CELLS: u64 = 50_000_000;
/// The most parts an archive may have (a workbook has a few dozen).
const MAX_PARTS: usize = 10_000;
/// Excel's grid: rows and columns.
const EXCEL_ROWS: u32 = 1 << 20;
const EXCEL_COLUMNS: u32 = 1 << 14;

/// The bounds on one workbook (job keys `max_inflated_mb`, `max_sheet_cells`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkbookLimits {
    /// The most bytes one part of the archive may inflate to.
    pub max_inflated_bytes: u64,
    /// The most cells (rows × columns) a sheet's used range may span.
    pub max_sheet_cells: u64,
}

impl Default for WorkbookLimits {
    fn default() -> Self {
        WorkbookLimits {
            max_inflated_bytes: DEFAULT_MAX_INFLATED_MB << 20,
            max_sheet_cells: DEFAULT_MAX_SHEET_CELLS,
        }
    }
}

/// An opened workbook.
pub type Book<'a> = Xlsx<Cursor<&'a [u8]>>;

/// Whether `bytes` is a zip archive (XLSX, and also ODS or XLSB), not a legacy `.xls`.
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

/// Checks the archive `bytes` (see the module) and opens it as an XLSX workbook; why not, as
/// a sentence, otherwise.
pub fn open<'a>(bytes: &'a [u8], limits: &WorkbookLimits) -> Result<Book<'a>, String> {
    check_archive(bytes, limits)?;
    Xlsx::new(Cursor::new(bytes)).map_err(|e| format!("not a readable XLSX workbook: {e}"))
}

/// Inflates every part of the archive once, counting, against `limits` and [`MAX_RATIO`]; the
/// shared-string table's declared count is checked too.
fn check_archive(bytes: &[u8], limits: &WorkbookLimits) -> Result<(), String> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("not a readable XLSX workbook: {e}"))?;
    if zip.len() > MAX_PARTS {
        return Err(format!(
            "the archive has {} parts, more than a workbook's {MAX_PARTS}: not read",
            zip.len()
        ));
    }
    let max = limits.max_inflated_bytes;
    let mut buf = vec![0u8; 64 << 10];
    for i in 0..zip.len() {
        let mut part = zip
            .by_index(i)
            .map_err(|e| format!("not a readable XLSX workbook: part {i}: {e}"))?;
        let name = match part.name() {
            Ok(n) => crate::textsafe::visible(&n).into_owned(),
            Err(e) => return Err(format!("not a readable XLSX workbook: part {i}: {e}")),
        };
        if part.is_dir() {
            continue;
        }
        let compressed = part.compressed_size().max(1);
        let declared = part.size();
        let over = |n: u64| {
            format!(
                "its part {name} inflates to {n} bytes or more, more than max_inflated_mb = {} \
                 allows (a zip bomb, or a workbook too large to read)",
                max >> 20
            )
        };
        if declared > max {
            return Err(over(declared));
        }
        let shared_strings = name.ends_with("sharedStrings.xml");
        let mut head: Vec<u8> = Vec::new();
        let mut inflated = 0u64;
        loop {
            let n = part
                .read(&mut buf)
                .map_err(|e| format!("its part {name} cannot be inflated: {e}"))?;
            if n == 0 {
                break;
            }
            inflated += n as u64;
            if inflated > max {
                return Err(over(inflated));
            }
            if inflated > 1 << 20 && inflated / compressed > MAX_RATIO {
                return Err(format!(
                    "its part {name} inflates to more than {MAX_RATIO} times its compressed size \
                     ({compressed} bytes): a zip bomb, not a workbook"
                ));
            }
            if shared_strings && head.len() < 64 << 10 {
                head.extend_from_slice(&buf[..n.min((64 << 10) - head.len())]);
            }
        }
        if shared_strings {
            check_shared_strings(&name, &head, inflated, limits)?;
        }
    }
    Ok(())
}

/// The shared-string table's `uniqueCount` (the strings a reader makes room for before it
/// reads one) must be within `max_sheet_cells` and within what the table's own bytes can hold
/// (`<si/>` is five bytes).
fn check_shared_strings(
    name: &str,
    head: &[u8],
    inflated: u64,
    limits: &WorkbookLimits,
) -> Result<(), String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(head);
    let mut scratch = Vec::new();
    loop {
        match reader.read_event_into(&mut scratch) {
            Ok(Event::Start(e) | Event::Empty(e)) if e.local_name().as_ref() == "sst" => {
                let Some(count) = e
                    .attributes()
                    .flatten()
                    .find(|a| a.key.local_name().as_ref() == "uniqueCount")
                else {
                    return Ok(());
                };
                let text = count.value.to_string();
                let n: u64 = text.trim().parse().map_err(|_| {
                    format!("its part {name} declares uniqueCount {text:?}, not a count")
                })?;
                if n > limits.max_sheet_cells || n > inflated / 5 {
                    return Err(format!(
                        "its part {name} declares {n} shared strings in {inflated} bytes (at most \
                         {} fit, and max_sheet_cells = {}): not a workbook recon reads",
                        inflated / 5,
                        limits.max_sheet_cells
                    ));
                }
                return Ok(());
            }
            Ok(Event::Eof) => {
                return Err(format!("its part {name} has no <sst> element at its start"));
            }
            Err(e) => return Err(format!("its part {name} is not well-formed XML: {e}")),
            Ok(_) => scratch.clear(),
        }
    }
}

/// The cell at 0-based `(row, col)` as Excel names it (`XFD1048576`).
pub fn cell_name(row: u32, col: u32) -> String {
    let mut letters = Vec::new();
    let mut c = u64::from(col) + 1;
    while c > 0 {
        let rem = ((c - 1) % 26) as u8;
        letters.push(b'A' + rem);
        c = (c - 1) / 26;
    }
    letters.reverse();
    format!(
        "{}{}",
        String::from_utf8_lossy(&letters),
        u64::from(row) + 1
    )
}

/// The rows of one sheet, one at a time: each item is a row with at least one non-empty cell,
/// as its 0-based sheet row and its cells from the used range's first column to its last (as
/// calamine's `Range::rows` gives them, without the dense range). The used range is measured
/// first, in a pass that keeps nothing, so that a sheet over its bounds is refused before any
/// row is handed out.
pub struct SheetRows<'a, 'b> {
    reader: calamine::XlsxCellReader<'a, Cursor<&'b [u8]>>,
    /// The used range's first column.
    first_col: u32,
    /// Its width.
    width: usize,
    /// A cell read ahead: the first of the next row.
    ahead: Option<(u32, u32, Data)>,
    /// The reader has reached the sheet's end (it must not be asked again).
    at_end: bool,
    done: bool,
}

impl<'a, 'b> SheetRows<'a, 'b> {
    /// Measures sheet `name` of `book` against `limits`, then opens it for reading rows.
    pub fn open(
        book: &'a mut Book<'b>,
        name: &str,
        limits: &WorkbookLimits,
    ) -> Result<SheetRows<'a, 'b>, String> {
        let extent = measure(book, name, limits)?;
        let reader = book
            .worksheet_cells_reader(name)
            .map_err(|e| format!("sheet {name:?}: {e}"))?;
        let (first_col, width) = match extent {
            Some(((_, c0), (_, c1))) => (c0, (c1 - c0 + 1) as usize),
            None => (0, 0),
        };
        Ok(SheetRows {
            reader,
            first_col,
            width,
            ahead: None,
            at_end: false,
            done: extent.is_none(),
        })
    }

    fn next_value(&mut self) -> Result<Option<(u32, u32, Data)>, String> {
        if let Some(c) = self.ahead.take() {
            return Ok(Some(c));
        }
        if self.at_end {
            return Ok(None);
        }
        loop {
            match self.reader.next_cell() {
                Ok(Some(cell)) => {
                    let (r, c) = cell.get_position();
                    let value = Data::from(cell.get_value().clone());
                    if value != Data::Empty {
                        return Ok(Some((r, c, value)));
                    }
                }
                Ok(None) => {
                    self.at_end = true;
                    return Ok(None);
                }
                Err(e) => return Err(format!("cannot read the sheet: {e}")),
            }
        }
    }

    fn next_row(&mut self) -> Result<Option<(u32, Vec<Data>)>, String> {
        let Some((row, col, value)) = self.next_value()? else {
            return Ok(None);
        };
        let mut cells = vec![Data::Empty; self.width];
        let first_col = self.first_col;
        let mut place = |col: u32, value: Data| {
            if let Some(slot) = col
                .checked_sub(first_col)
                .and_then(|i| cells.get_mut(i as usize))
            {
                *slot = value;
            }
        };
        place(col, value);
        while let Some((r, c, v)) = self.next_value()? {
            if r != row {
                self.ahead = Some((r, c, v));
                break;
            }
            place(c, v);
        }
        Ok(Some((row, cells)))
    }
}

impl Iterator for SheetRows<'_, '_> {
    type Item = Result<(u32, Vec<Data>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_row() {
            Ok(Some(row)) => Some(Ok(row)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// The used range of sheet `name` (first and last non-empty cell's row and column), checked
/// against `limits`, Excel's grid and row order, keeping nothing; None for an empty sheet.
#[allow(clippy::type_complexity)]
fn measure(
    book: &mut Book<'_>,
    name: &str,
    limits: &WorkbookLimits,
) -> Result<Option<((u32, u32), (u32, u32))>, String> {
    let mut reader = book
        .worksheet_cells_reader(name)
        .map_err(|e| format!("sheet {name:?}: {e}"))?;
    let max = limits.max_sheet_cells;
    let dims = reader.dimensions();
    let span = |(r0, c0): (u32, u32), (r1, c1): (u32, u32)| {
        (u64::from(r1.saturating_sub(r0)) + 1) * (u64::from(c1.saturating_sub(c0)) + 1)
    };
    let too_large = |from: (u32, u32), to: (u32, u32), what: &str| {
        format!(
            "sheet {name:?}: its {what} {}:{} spans {} cells, more than max_sheet_cells = {max} \
             (hint: a stray cell far from the data? delete it, or the rows and columns around it)",
            cell_name(from.0, from.1),
            cell_name(to.0, to.1),
            span(from, to)
        )
    };
    if span(dims.start, dims.end) > max {
        return Err(too_large(dims.start, dims.end, "declared dimension"));
    }
    let mut extent: Option<((u32, u32), (u32, u32))> = None;
    let mut last_row = 0u32;
    loop {
        let cell = match reader.next_cell() {
            Ok(Some(cell)) => cell,
            Ok(None) => break,
            Err(e) => return Err(format!("sheet {name:?}: cannot read the sheet: {e}")),
        };
        let (r, c) = cell.get_position();
        if r >= EXCEL_ROWS || c >= EXCEL_COLUMNS {
            return Err(format!(
                "sheet {name:?}: a cell at row {}, column {} lies outside Excel's grid \
                 (1,048,576 rows, 16,384 columns): not a workbook recon reads",
                u64::from(r) + 1,
                u64::from(c) + 1
            ));
        }
        if r < last_row {
            return Err(format!(
                "sheet {name:?}: row {} comes after row {}: the rows are out of order (hint: \
                 open the file in a spreadsheet program and save it again)",
                u64::from(r) + 1,
                u64::from(last_row) + 1
            ));
        }
        last_row = r;
        if *cell.get_value() == calamine::DataRef::Empty {
            continue;
        }
        let ((r0, c0), (r1, c1)) = extent.unwrap_or(((r, c), (r, c)));
        let grown = ((r0.min(r), c0.min(c)), (r1.max(r), c1.max(c)));
        if span(grown.0, grown.1) > max {
            return Err(too_large(grown.0, grown.1, "used range"));
        }
        extent = Some(grown);
    }
    Ok(extent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_named_as_excel_names_them() {
        assert_eq!(cell_name(0, 0), "A1");
        assert_eq!(cell_name(9, 25), "Z10");
        assert_eq!(cell_name(0, 26), "AA1");
        assert_eq!(cell_name(1_048_575, 16_383), "XFD1048576");
    }

    #[test]
    fn a_legacy_xls_is_not_a_zip() {
        assert!(is_zip(b"PK\x03\x04rest"));
        assert!(!is_zip(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"));
    }
}
