//! `recon parse`: a source's files printed as canonical lines (CSV on stdout), with the
//! statement facts, dropped re-deliveries and rejected lines on stderr.

use super::config::SourceConfig;
use super::{SourceLoad, read_file};
use anyhow::Result;

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

/// How `recon parse` shows recipients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// Masked as in every report and email (`****3000`).
    Masked,
    /// In full, for checking a recipient mapping locally (`recon parse --unmasked`).
    Unmasked,
}

/// `recon parse`: reads `files` as source `src` (one load, so a line delivered twice counts
/// once) and writes canonical lines as CSV to `out`; statement facts, dropped re-deliveries
/// and rejected lines go to `notes` (stderr). Recipients are masked. Fails (input exit code)
/// if any line was rejected or a file could not be read.
pub fn print_canonical<W: std::io::Write, N: std::io::Write>(
    src: &SourceConfig,
    files: &[std::path::PathBuf],
    recipients: Recipients,
    out: W,
    mut notes: N,
) -> Result<()> {
    use crate::exit::{Failure, fail};
    let mut load = SourceLoad::default();
    for f in files {
        read_file(src, f, &mut load)?;
    }
    for f in &load.facts {
        writeln!(notes, "{}", f.describe())?;
    }
    for f in &load.files {
        if f.duplicates > 0 {
            writeln!(
                notes,
                "{}: {} line(s) already delivered by an earlier file (or repeated with the same provider id) counted once",
                f.path, f.duplicates
            )?;
        }
    }
    for w in load.warnings.iter().chain(&load.notes) {
        writeln!(notes, "{w}")?;
    }
    if !load.rejected.is_empty() {
        let lines: Vec<String> = load
            .rejected
            .iter()
            .map(|r| format!("{}:{}: {}", r.file, r.line, r.reason))
            .collect();
        return Err(fail(
            Failure::Input,
            format!(
                "{} line(s) rejected:\n{}",
                load.rejected.len(),
                lines.join("\n")
            ),
        ));
    }
    // Only a file that reads whole prints lines: a rejected line above returned first.
    let mut w = ::csv::Writer::from_writer(out);
    // The original-currency columns only for a mapping that has them, so the output of every
    // other source keeps its shape.
    let original = src
        .tabular()
        .is_some_and(|t| t.columns.original_amount.is_some());
    let mut header = CANONICAL_HEADER.to_vec();
    if original {
        header.extend(["original_amount", "original_currency"]);
    }
    w.write_record(&header)?;
    for l in &load.lines {
        let (oa, oc) = match &l.original {
            Some(o) => (
                crate::money::format_minor(o.amount_minor, o.currency),
                o.currency,
            ),
            None => (String::new(), ""),
        };
        let mut row: Vec<String> = vec![
            crate::textsafe::csv_safe(l.source()).into_owned(),
            crate::textsafe::csv_safe(&l.position()).into_owned(),
            crate::textsafe::csv_safe(l.provider_txn_id.as_deref().unwrap_or("")).into_owned(),
            crate::textsafe::csv_safe(l.reference().as_deref().unwrap_or("")).into_owned(),
            match recipients {
                _ if l.recipient.is_empty() => String::new(),
                Recipients::Masked => crate::mask::account(&l.recipient),
                Recipients::Unmasked => crate::textsafe::csv_safe(&l.recipient).into_owned(),
            },
            crate::money::format_minor(l.amount_minor, l.currency),
            l.currency.to_string(),
            l.booked_text(),
            l.kind.as_str().to_string(),
        ];
        if original {
            row.extend([oa, oc.to_string()]);
        }
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}
