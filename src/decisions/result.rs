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

    fn parse(s: &str) -> Option<Status> {
        [
            Status::Applied,
            Status::Waiting,
            Status::Unchanged,
            Status::Refused,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
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

    /// Rows of an earlier result (the CSV text [`FileResult::csv`] wrote), each now
    /// `unchanged` with what it was then.
    pub fn unchanged_from(csv_text: &str) -> Vec<RowResult> {
        let mut r = csv::Reader::from_reader(csv_text.as_bytes());
        r.records()
            .filter_map(|rec| rec.ok())
            .map(|rec| {
                let get = |i: usize| rec.get(i).unwrap_or("").to_string();
                let then = Status::parse(&get(3)).map_or("?", Status::as_str);
                RowResult {
                    row_no: get(0).parse().unwrap_or(0),
                    case: get(1),
                    decision: get(2),
                    status: Status::Unchanged,
                    detail: format!("this file was applied before ({then}: {})", get(4)),
                    reviewer: get(5),
                }
            })
            .collect()
    }

    /// Writes the result file next to the input (atomically: a temporary file renamed).
    pub fn write(&self) -> Result<PathBuf> {
        let path = Self::result_path(&self.path);
        let tmp = path.with_extension("csv.part");
        std::fs::write(&tmp, self.csv()?).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// The summary for the terminal: counts, then every row that did not apply.
    pub fn text(&self, result_file: Option<&Path>) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "recon decisions apply {} as {}: {} applied, {} waiting for approval, {} unchanged, {} refused{}",
            self.path.display(),
            self.actor,
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
                self.sha256, self.actor
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
            let _ = writeln!(s, "  result: {}", p.display());
        }
        s
    }
}
