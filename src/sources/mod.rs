//! Statement sources: each format turns files into canonical [`StatementLine`]s with file and
//! line position, plus the period the source covers completely (DESIGN.md rule 2).
//!
//! Sources know nothing of matching. Normalisation (trim, width, IBAN spaces, time zone → UTC,
//! currency case, exact minor units) happens here, once.

pub mod csv;

use crate::config::{LineKind, SourceConfig, SourcePath};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use chrono::NaiveDate;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

/// One canonical statement line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementLine {
    /// Source name from the config (shared by all lines of a source).
    pub source: Arc<str>,
    /// File the line came from (shared by all lines of a file).
    pub file: Arc<str>,
    /// 1-based physical line number in that file.
    pub line_no: u64,
    /// The provider's transaction id, if the format has one.
    pub provider_txn_id: Option<String>,
    /// Free-text reference (trimmed, width-folded), if any.
    pub reference: Option<String>,
    /// Canonical recipient account (no spaces, upper case).
    pub recipient: String,
    /// Amount in minor units of `currency`.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
    /// Booking instant, UTC microseconds.
    pub booked_at: Micros,
    /// Payment or refund.
    pub kind: LineKind,
}

impl StatementLine {
    /// Stable identity for results and ticket keys: the provider id, or `source#Lnn`.
    pub fn uid(&self) -> std::borrow::Cow<'_, str> {
        match &self.provider_txn_id {
            Some(id) => id.as_str().into(),
            None => format!("{}#L{}", self.source, self.line_no).into(),
        }
    }
}

/// A line that could not be read, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rejected {
    /// Source name.
    pub source: String,
    /// File path.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// What was wrong (names the column).
    pub reason: String,
}

/// A file that was read, for the run record and summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InputFile {
    /// Source name.
    pub source: String,
    /// Path.
    pub path: String,
    /// sha256 of the bytes read.
    pub sha256: String,
    /// Lines accepted.
    pub lines: usize,
    /// Lines rejected.
    pub rejected: usize,
    /// Re-delivered duplicates dropped (same provider id, same content).
    pub duplicates: usize,
}

/// Everything one source produced for a run.
#[derive(Debug, Clone, Default)]
pub struct SourceLoad {
    /// Accepted lines.
    pub lines: Vec<StatementLine>,
    /// Rejected lines.
    pub rejected: Vec<Rejected>,
    /// Files read.
    pub files: Vec<InputFile>,
    /// Half-open UTC intervals this source covers completely, merged and sorted.
    pub coverage: Vec<(Micros, Micros)>,
    /// Why coverage is smaller than it could be (missing daily file, rejected lines, …).
    pub warnings: Vec<String>,
}

/// Merges overlapping or touching half-open intervals.
pub fn merge_intervals(mut v: Vec<(Micros, Micros)>) -> Vec<(Micros, Micros)> {
    v.sort_unstable();
    let mut out: Vec<(Micros, Micros)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Whether merged `coverage` contains all of `[from, to]`.
pub fn covers(coverage: &[(Micros, Micros)], from: Micros, to: Micros) -> bool {
    coverage.iter().any(|&(a, b)| a <= from && to < b)
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Loads one configured source. Daily (`{date}`) sources read one file per day in `days`.
/// A failure to read a file that exists is an error (exit code for inputs); a missing daily
/// file only narrows coverage.
pub fn load(cfg: &SourceConfig, days: (NaiveDate, NaiveDate)) -> Result<SourceLoad> {
    let mut load = SourceLoad::default();
    let mut coverage = Vec::new();
    match &cfg.path {
        SourcePath::Fixed { path, complete } => {
            let clean = csv::read_file(cfg, path, &mut load)?;
            match complete {
                Some((from, to)) if clean => coverage.push((
                    timeparse::day_start(*from, cfg.timezone),
                    timeparse::day_start(to.succ_opt().unwrap_or(*to), cfg.timezone),
                )),
                Some(_) => load.warnings.push(format!(
                    "source {}: {} has rejected lines, so it is not treated as complete",
                    cfg.name,
                    path.display()
                )),
                None => load.warnings.push(format!(
                    "source {}: no complete_from/complete_to declared, so absence of a line never proves a failure",
                    cfg.name
                )),
            }
        }
        SourcePath::Daily(template) => {
            let mut day = days.0;
            while day <= days.1 {
                let path_text = template.replace("{date}", &day.format("%Y-%m-%d").to_string());
                let path = Path::new(&path_text);
                if path.exists() {
                    if csv::read_file(cfg, path, &mut load)? {
                        coverage.push((
                            timeparse::day_start(day, cfg.timezone),
                            timeparse::day_start(day.succ_opt().unwrap_or(day), cfg.timezone),
                        ));
                    } else {
                        load.warnings.push(format!(
                            "source {}: {} has rejected lines, so {day} is not treated as complete",
                            cfg.name, path_text
                        ));
                    }
                } else {
                    load.warnings.push(format!(
                        "source {}: no file for {day} ({path_text})",
                        cfg.name
                    ));
                }
                match day.succ_opt() {
                    Some(d) => day = d,
                    None => break,
                }
            }
        }
    }
    load.coverage = merge_intervals(coverage);
    Ok(load)
}

/// Header of `recon parse` output.
pub const CANONICAL_HEADER: [&str; 9] = [
    "source",
    "position",
    "provider_txn_id",
    "reference",
    "recipient",
    "amount",
    "currency",
    "booked_at",
    "kind",
];

/// `recon parse`: reads `files` with the mapping of source `source` (default: the first) and
/// writes canonical lines as CSV, then the rejected lines to stderr. Recipients are masked.
/// Fails (input exit code) if any line was rejected.
pub fn print_canonical<W: std::io::Write>(
    cfg: &crate::config::Config,
    format: &str,
    source: Option<&str>,
    files: &[std::path::PathBuf],
    out: W,
) -> Result<()> {
    use crate::exit::{Failure, fail};
    if format != "csv" {
        return Err(fail(
            Failure::Config,
            format!("--format {format:?}: this version reads csv"),
        ));
    }
    let src = match source {
        Some(name) => cfg.sources.iter().find(|s| s.name == name),
        None => cfg.sources.first(),
    }
    .ok_or_else(|| {
        fail(
            Failure::Config,
            format!(
                "{}: no such source {:?}",
                cfg.path.display(),
                source.unwrap_or("(first)")
            ),
        )
    })?;
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(CANONICAL_HEADER)?;
    let mut rejected = Vec::new();
    for f in files {
        let mut load = SourceLoad::default();
        csv::read_file(src, f, &mut load)?;
        for l in &load.lines {
            w.write_record([
                crate::outputs::csv_safe(&l.source).as_ref(),
                &format!("{}:{}", l.file, l.line_no),
                crate::outputs::csv_safe(l.provider_txn_id.as_deref().unwrap_or("")).as_ref(),
                crate::outputs::csv_safe(l.reference.as_deref().unwrap_or("")).as_ref(),
                &crate::mask::account(&l.recipient),
                &crate::money::format_minor(l.amount_minor, l.currency),
                l.currency,
                &timeparse::format_utc(l.booked_at),
                l.kind.as_str(),
            ])?;
        }
        rejected.extend(load.rejected);
    }
    w.flush()?;
    if !rejected.is_empty() {
        let lines: Vec<String> = rejected
            .iter()
            .map(|r| format!("{}:{}: {}", r.file, r.line, r.reason))
            .collect();
        return Err(fail(
            Failure::Input,
            format!("{} line(s) rejected:\n{}", rejected.len(), lines.join("\n")),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_merge_and_cover() {
        let m = merge_intervals(vec![(10, 20), (0, 10), (30, 40)]);
        assert_eq!(m, vec![(0, 20), (30, 40)]);
        assert!(covers(&m, 0, 19));
        assert!(!covers(&m, 0, 20));
        assert!(!covers(&m, 15, 35));
    }
}
