//! Reading the Decide sheet of a report.xlsx (calamine), whoever saved it last (Excel,
//! LibreOffice, openpyxl): the columns are found by their header names, each row keeps its
//! spreadsheet row number, and nothing is interpreted here but text.

use crate::report::xlsx::{DECIDE_COLUMNS, DECIDE_SHEET};
use crate::workbook::{SheetRows, WorkbookLimits};
use calamine::Data;

/// One row of the Decide sheet with a decision in it, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SheetRow {
    /// Spreadsheet row number (the header is row 1).
    pub row_no: u32,
    /// The visible `case` cell.
    pub case: String,
    /// The hidden `check` cell (`<case key> <fingerprint>`).
    pub check: String,
    /// The `decision` cell.
    pub decision: String,
    /// The `note` cell.
    pub note: String,
    /// The `reviewer` cell (informational: the actor never comes from the file).
    pub reviewer: String,
    /// Why the row cannot be applied as read (a control character in one of its cells, as an
    /// Excel `_xHHHH_` escape decodes to), or None.
    pub refused: Option<String>,
}

/// What the file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sheet {
    /// Rows with a decision, in row order.
    pub rows: Vec<SheetRow>,
    /// Rows without one (left for later).
    pub undecided: usize,
}

/// Why a file cannot be read at all (no row of it is applied).
pub type Unreadable = String;

fn cell_text(d: &Data) -> String {
    match d {
        Data::Empty => String::new(),
        Data::String(s) => s.clone(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        other => other.to_string(),
    }
}

/// Why `row` is refused as read: one of its cells holds a control character other than tab
/// and line breaks. Spreadsheet files carry them as `_xHHHH_` escapes (`_x001B_` is ESC),
/// which the reader decodes; such a character would reach the history, the case and every
/// output raw, so the row is refused (never stored, never stripped).
fn control_characters(row: &SheetRow) -> Option<String> {
    [
        ("case", &row.case),
        ("check", &row.check),
        ("decision", &row.decision),
        ("note", &row.note),
        ("reviewer", &row.reviewer),
    ]
    .into_iter()
    .find_map(|(name, text)| {
        crate::textsafe::control_character(text).map(|why| {
            format!("its {name} cell holds {why}; in the file it is an `_xHHHH_` escape such as `_x001B_`")
        })
    })
}

/// Reads the Decide sheet of the workbook `bytes`, within `limits` (a workbook that would
/// inflate past them is unreadable, [`crate::workbook`]). A file that is no workbook, has no
/// Decide sheet or lacks one of its columns is unreadable as a whole (never a partial guess).
pub fn read(bytes: &[u8], limits: &WorkbookLimits) -> Result<Sheet, Unreadable> {
    let mut book = crate::workbook::open(bytes, limits)?;
    let mut rows = SheetRows::open(&mut book, DECIDE_SHEET, limits).map_err(|e| {
        format!(
            "no readable {DECIDE_SHEET:?} sheet (hint: decide in the report.xlsx a run wrote): {e}"
        )
    })?;
    let Some((first_row, header)) = rows.next().transpose()? else {
        return Err(format!("the {DECIDE_SHEET:?} sheet is empty"));
    };
    let header: Vec<String> = header
        .iter()
        .map(|c| cell_text(c).trim().to_string())
        .collect();
    // Row 1 must be the header: a sheet that starts lower was rearranged.
    if first_row != 0 {
        return Err(format!(
            "the {DECIDE_SHEET:?} sheet's header is not on row 1 (it starts on row {})",
            first_row + 1
        ));
    }
    let col = |name: &str| -> Result<usize, Unreadable> {
        let found: Vec<usize> = header
            .iter()
            .enumerate()
            .filter(|(_, h)| h.as_str() == name)
            .map(|(i, _)| i)
            .collect();
        match found.as_slice() {
            [i] => Ok(*i),
            [] => Err(format!(
                "the {DECIDE_SHEET:?} sheet has no {name:?} column (its columns: {})",
                DECIDE_COLUMNS.join(", ")
            )),
            _ => Err(format!(
                "the {DECIDE_SHEET:?} sheet has {} {name:?} columns",
                found.len()
            )),
        }
    };
    let (case, check, decision, note, reviewer) = (
        col("case")?,
        col("check")?,
        col("decision")?,
        col("note")?,
        col("reviewer")?,
    );
    let mut sheet = Sheet::default();
    for r in rows {
        let (row_index, r) = r?;
        let get = |c: usize| r.get(c).map(cell_text).unwrap_or_default();
        let mut row = SheetRow {
            row_no: row_index + 1,
            case: get(case).trim().to_string(),
            check: get(check).trim().to_string(),
            decision: get(decision).trim().to_string(),
            note: get(note).trim().to_string(),
            reviewer: get(reviewer).trim().to_string(),
            refused: None,
        };
        row.refused = control_characters(&row);
        if row.decision.is_empty() {
            if !row.case.is_empty() || !row.check.is_empty() {
                sheet.undecided += 1;
            }
            continue;
        }
        sheet.rows.push(row);
    }
    Ok(sheet)
}
