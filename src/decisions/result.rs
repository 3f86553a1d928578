//! What became of every row of a decision file: the result file written next to it
//! (`<name>.result.csv`) and the summary on stdout.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Applied now.
    Applied,
    /// The first of two reviewers: waits for a second, different one.
    Waiting,
    /// Already done exactly so (the same file, or the same decision by the same person).
    Unchanged,
    /// Not applied, with the reason.
    Refused,
}

impl Status {
    /// Name in the result file.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Applied => "applied",
            Status::Waiting => "waiting for approval",
            Status::Unchanged => "unchanged",
            Status::Refused => "refused",
        }
    }
}

/// One row's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowResult {
    /// Spreadsheet row number (0: the file as a whole).
    pub row_no: u32,
    /// The case key the row names (as written).
    pub case: String,
    /// The decision as written.
    pub decision: String,
    /// How it ended.
    pub status: Status,
    /// Why (refused), or what was done.
    pub detail: String,
    /// The reviewer cell, and whether it names someone other than the actor.
    pub reviewer: String,
}

/// The results of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileResult {
    /// The file applied.
    pub path: PathBuf,
    /// Its sha256.
    pub sha256: String,
    /// Who applied it.
    pub actor: String,
    /// One per row with a decision, in row order (one row 0 when the file is unreadable).
    pub rows: Vec<RowResult>,
    /// Rows left without a decision.
    pub undecided: usize,
    /// When the same actor applied the same file before: when (nothing changed now).
    pub earlier: Option<String>,
}

/// The longest case or reason text `decision_files` keeps of a refused row, in bytes.
pub const KEPT_TEXT_BYTES: usize = 300;

const HEADER: [&str; 7] = [
    "row", "case", "decision", "result", "detail", "reviewer", "actor",
];

impl FileResult {
    /// How many rows ended so.
    pub fn count(&self, status: Status) -> usize {
        self.rows.iter().filter(|r| r.status == status).count()
    }

    /// The process exit code: [`crate::exit::INPUT`] when the file could not be read at all,
    /// [`crate::exit::DECISIONS_REFUSED`] when a row was refused, else 0 (rows waiting for a
    /// second reviewer are no failure).
    pub fn exit_code(&self) -> i32 {
        if self
            .rows
            .iter()
            .any(|r| r.row_no == 0 && r.status == Status::Refused)
        {
            crate::exit::INPUT
        } else if self.any_refused() {
            crate::exit::DECISIONS_REFUSED
        } else {
            crate::exit::OK
        }
    }

    /// Whether any row (or the file) was refused.
    pub fn any_refused(&self) -> bool {
        self.count(Status::Refused) > 0
    }

    /// The result file's path: `<dir>/<stem>.result.csv`.
    pub fn result_path(input: &Path) -> PathBuf {
        let stem = input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "decisions".into());
        input.with_file_name(format!("{stem}.result.csv"))
    }

    /// The result as CSV text (cells neutralised for spreadsheets).
    pub fn csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        for r in &self.rows {
            let row = r.row_no.to_string();
            let cells = [
                row.as_str(),
                &r.case,
                &r.decision,
                r.status.as_str(),
                &r.detail,
                &r.reviewer,
                &self.actor,
            ];
            w.write_record(cells.map(|c| crate::outputs::csv_safe(c).into_owned()))?;
        }
        let bytes = w.into_inner().context("result csv")?;
        String::from_utf8(bytes).context("result csv")
    }

    /// The rows of a file `actor` applied before (`earlier`, as `decision_files` keeps it),
    /// each `unchanged` with what it was then: refused (with why, for the first refused rows
    /// kept), recorded as a decision (`decided`: row number → decision and state), or, else,
    /// the file's counts then. `sheet` is the file as read now (None: unreadable now, one row 0).
    pub fn applied_before(
        sheet: Option<&super::read::Sheet>,
        earlier: &crate::store::cases::DecisionFileRecord,
        decided: &std::collections::HashMap<i64, (String, String)>,
    ) -> Vec<RowResult> {
        let at = &earlier.applied_at;
        let counts = if earlier.counts.is_empty() {
            "its counts were not recorded".to_string()
        } else {
            earlier
                .counts
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(sheet) = sheet else {
            return vec![RowResult {
                row_no: 0,
                case: String::new(),
                decision: String::new(),
                status: Status::Unchanged,
                detail: format!(
                    "this file was applied before, on {at} ({counts}): nothing changed"
                ),
                reviewer: String::new(),
            }];
        };
        sheet
            .rows
            .iter()
            .map(|row| {
                let refused = earlier.refused.iter().find(|(n, _, _)| *n == row.row_no);
                let detail = match (refused, decided.get(&i64::from(row.row_no))) {
                    (Some((_, _, why)), _) => format!(
                        "this file was applied before, on {at}: this row was refused then ({why})"
                    ),
                    (None, Some((decision, state))) => format!(
                        "this file was applied before, on {at}: this row's {decision} was \
                         recorded then ({}): nothing changed",
                        state.to_lowercase()
                    ),
                    (None, None) => {
                        format!("this file was applied before, on {at} ({counts}): nothing changed")
                    }
                };
                RowResult {
                    row_no: row.row_no,
                    case: row.case.clone(),
                    decision: row.decision.clone(),
                    status: Status::Unchanged,
                    detail,
                    reviewer: row.reviewer.clone(),
                }
            })
            .collect()
    }

    /// Rows per result, by name (`applied`, `waiting for approval`, `unchanged`, `refused`),
    /// every result listed: what `decision_files` keeps of the file.
    pub fn counts(&self) -> std::collections::BTreeMap<String, usize> {
        [
            Status::Applied,
            Status::Waiting,
            Status::Unchanged,
            Status::Refused,
        ]
        .into_iter()
        .map(|s| (s.as_str().to_string(), self.count(s)))
        .collect()
    }

    /// The first `limit` refused rows as `decision_files` keeps them: (row, case, why), each
    /// text cut to [`KEPT_TEXT_BYTES`].
    pub fn refused_rows(&self, limit: usize) -> Vec<crate::store::cases::RefusedRow> {
        self.rows
            .iter()
            .filter(|r| r.status == Status::Refused)
            .take(limit)
            .map(|r| {
                (
                    r.row_no,
                    crate::exit::cut_to(&r.case, KEPT_TEXT_BYTES).into_owned(),
                    crate::exit::cut_to(&r.detail, KEPT_TEXT_BYTES).into_owned(),
                )
            })
            .collect()
    }

    /// Writes the result file next to the input (atomically: a temporary file renamed).
    pub fn write(&self) -> Result<PathBuf> {
        let path = Self::result_path(&self.path);
        self.write_to(&path)?;
        Ok(path)
    }

    /// Writes the result file at `path` (atomically: a temporary file renamed).
    pub fn write_to(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("csv.part");
        std::fs::write(&tmp, self.csv()?).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// The summary for the terminal: counts, then every row that did not apply.
    pub fn text(&self, result_file: Option<&Path>) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let safe = |t: &str| crate::textsafe::terminal(t).into_owned();
        let _ = writeln!(
            s,
            "recon decisions apply {} as {}: {} applied, {} waiting for approval, {} unchanged, {} refused{}",
            safe(&self.path.to_string_lossy()),
            safe(&self.actor),
            self.count(Status::Applied),
            self.count(Status::Waiting),
            self.count(Status::Unchanged),
            self.count(Status::Refused),
            if self.undecided > 0 {
                format!(" ({} row(s) without a decision)", self.undecided)
            } else {
                String::new()
            }
        );
        if let Some(t) = &self.earlier {
            let _ = writeln!(
                s,
                "  this file (sha256 {}) was applied by {} on {t}: nothing changed",
                self.sha256,
                safe(&self.actor)
            );
        }
        for r in &self.rows {
            // Applied rows are in the result file; a file applied before is said above.
            if r.status == Status::Applied || self.earlier.is_some() {
                continue;
            }
            let _ = writeln!(
                s,
                "  row {}: {} {} → {}: {}",
                r.row_no,
                crate::report::text_safe(&r.case),
                crate::report::text_safe(&r.decision),
                r.status.as_str(),
                crate::report::text_safe(&r.detail)
            );
        }
        if let Some(p) = result_file {
            let _ = writeln!(s, "  result: {}", safe(&p.to_string_lossy()));
        }
        s
    }
}
