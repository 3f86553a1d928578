//! Reading the Decide sheet of a report.xlsx (calamine), whoever saved it last (Excel,
//! LibreOffice, openpyxl), however its rows were sorted or filtered: the columns are found by
//! their header names, each row keeps its spreadsheet row number and is known by its visible
//! `case` cell (its `check` cell must name the same case, which `check.rs` verifies). Nothing is
//! interpreted here but text, and which rows of one file decide the same case: the same
//! decision twice applies once, two different ones refuse the case ([`one_decision_per_case`]).

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
    /// Excel `_xHHHH_` escape decodes to; its case decided differently by another row of the
    /// file), or None.
    pub refused: Option<String>,
    /// The earlier row of the file that decides the same case exactly so (decision, note and
    /// check cell): this row is that row's copy, applied once through it.
    pub same_as: Option<u32>,
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

/// The cells that make a decision: two rows of one case are the same decision when these are.
fn decided_as(row: &SheetRow) -> (String, &str, &str) {
    let decision = crate::report::cases::Decision::parse_with_reason(&row.decision).map_or_else(
        || row.decision.clone(),
        |(d, r)| d.text_with(r.map(|r| r.to_lowercase()).as_deref()),
    );
    (decision, &row.note, &row.check)
}

/// One decision per case per file. Rows are grouped by their visible `case` cell (a sort or a
/// filter never changes it): when every row of a case says the same (decision, note, check
/// cell), the first applies and the others are its copies ([`SheetRow::same_as`]); when they
/// differ, every one of them is refused with why, and the case is left as it is (which of two
/// decisions the reviewer meant is not guessed, nor is the first row's taken).
pub fn one_decision_per_case(rows: &mut [SheetRow]) {
    let mut by_case: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, r) in rows.iter().enumerate() {
        if !r.case.is_empty() {
            by_case.entry(r.case.clone()).or_default().push(i);
        }
    }
    for (case, idx) in by_case.into_iter().filter(|(_, idx)| idx.len() > 1) {
        let first = decided_as(&rows[idx[0]]);
        let same = idx.iter().all(|&i| decided_as(&rows[i]) == first);
        if same {
            let first_row = rows[idx[0]].row_no;
            for &i in &idx[1..] {
                rows[i].same_as = Some(first_row);
            }
            continue;
        }
        let what: Vec<String> = idx
            .iter()
            .map(|&i| {
                let r = &rows[i];
                format!(
                    "row {}: {}{}",
                    r.row_no,
                    crate::textsafe::terminal(&r.decision),
                    if r.note.is_empty() {
                        String::new()
                    } else {
                        format!(" ({:?})", crate::textsafe::terminal(&r.note))
                    }
                )
            })
            .collect();
        let decided: Vec<_> = idx.iter().map(|&i| decided_as(&rows[i])).collect();
        let differ: Vec<&str> = [
            ("decisions", decided.iter().any(|d| d.0 != first.0)),
            ("notes", decided.iter().any(|d| d.1 != first.1)),
            ("check cells", decided.iter().any(|d| d.2 != first.2)),
        ]
        .into_iter()
        .filter_map(|(name, differs)| differs.then_some(name))
        .collect();
        let why = format!(
            "case {} is decided {} ways in this file ({}; the {} differ): none of its rows is \
             applied and the case is unchanged (hint: keep one decision per case and apply \
             the file again)",
            crate::textsafe::terminal(&case),
            idx.len(),
            what.join("; "),
            differ.join(" and ")
        );
        for &i in &idx {
            rows[i].refused.get_or_insert_with(|| why.clone());
        }
    }
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
                "the {DECIDE_SHEET:?} sheet has no {name:?} column, which applying it needs \
                 (a report's Decide sheet has: {}; hint: decide in the report.xlsx a run \
                 wrote, and keep its header row)",
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
            same_as: None,
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
    one_decision_per_case(&mut sheet.rows);
    Ok(sheet)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An xlsx whose Decide sheet has `header` and `rows` (text cells).
    fn sheet(header: &[&str], rows: &[&[&str]]) -> Vec<u8> {
        let mut wb = rust_xlsxwriter::Workbook::new();
        let ws = wb.add_worksheet().set_name(DECIDE_SHEET).unwrap();
        for (c, h) in header.iter().enumerate() {
            ws.write_string(0, c as u16, *h).unwrap();
        }
        for (r, cells) in rows.iter().enumerate() {
            for (c, v) in cells.iter().enumerate() {
                if !v.is_empty() {
                    ws.write_string(r as u32 + 1, c as u16, *v).unwrap();
                }
            }
        }
        wb.save_to_buffer().unwrap()
    }

    const FP: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn a_sheet_of_the_layout_before_the_currency_column_still_reads() {
        // The 13 columns report.xlsx had before `amount` became a number beside `currency`.
        let old = [
            "case",
            "severity",
            "what",
            "whose",
            "amount",
            "why",
            "candidates",
            "offered",
            "decision",
            "note",
            "reviewer",
            "status",
            "check",
        ];
        let check = format!("C-1 {FP}");
        let row: [&str; 13] = [
            "C-1",
            "HIGH",
            "x",
            "line L-1",
            "999.00 EUR",
            "",
            "",
            "dismiss, escalate",
            "dismiss",
            "n",
            "",
            "",
            &check,
        ];
        let s = read(&sheet(&old, &[&row]), &WorkbookLimits::default()).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(
            (s.rows[0].case.as_str(), s.rows[0].check.as_str()),
            ("C-1", check.as_str())
        );
        assert_eq!(s.rows[0].row_no, 2);
    }

    #[test]
    fn a_sheet_without_a_column_the_apply_needs_is_unreadable_whole() {
        let why = read(
            &sheet(
                &["case", "decision", "note", "reviewer"],
                &[&["C-1", "dismiss", "", ""]],
            ),
            &WorkbookLimits::default(),
        )
        .unwrap_err();
        assert!(why.contains("no \"check\" column"), "{why}");
    }

    fn row(row_no: u32, case: &str, decision: &str, note: &str) -> SheetRow {
        SheetRow {
            row_no,
            case: case.into(),
            check: format!("{case} {FP}"),
            decision: decision.into(),
            note: note.into(),
            reviewer: String::new(),
            refused: None,
            same_as: None,
        }
    }

    #[test]
    fn a_case_decided_two_ways_refuses_every_row_of_it_and_a_copy_points_at_the_first() {
        let mut rows = vec![
            row(2, "C-1", "dismiss", "a"),
            row(3, "C-2", "Confirm  1", "b"),
            row(4, "C-1", "dismiss", "other note"),
            row(5, "C-2", "confirm 1", "b"),
            row(6, "C-3", "escalate", ""),
        ];
        // A copy whose check differs (a row pasted from another report) is another decision.
        let mut pasted = row(7, "C-3", "escalate", "");
        pasted.check = format!("C-3 {}", "b".repeat(64));
        rows.push(pasted);
        one_decision_per_case(&mut rows);
        let why = rows[0].refused.clone().expect("C-1 refused");
        assert!(why.contains("case C-1 is decided 2 ways"), "{why}");
        assert!(
            why.contains("row 2: dismiss (\"a\"); row 4: dismiss (\"other note\")"),
            "{why}"
        );
        assert!(why.contains("the notes differ"), "{why}");
        assert_eq!(rows[2].refused.as_ref(), Some(&why));
        // The same decision, however it is spelt: applied once, through row 3.
        assert_eq!((rows[1].refused.clone(), rows[1].same_as), (None, None));
        assert_eq!((rows[3].refused.clone(), rows[3].same_as), (None, Some(3)));
        let c3 = rows[4].refused.clone().expect("C-3 refused");
        assert!(c3.contains("the check cells differ"), "{c3}");
        assert!(rows[5].refused.is_some());
    }
}
