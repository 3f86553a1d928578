//! Reading one file of a source into a [`SourceLoad`]: the format's parser, the source's role
//! on every line, lines with control characters rejected, re-deliveries dropped, the file
//! record; a file over its source's [`super::InputLimits`] is an error (unreadable).

use super::config::{FormatSettings, SourceConfig};
use super::{
    InputFile, ParseContext, Rejected, SourceLoad, StatementLine, csv, jsonl, parquet,
    parse_bank_bytes, sha256_hex, text, xlsx,
};
use crate::model::Format;
use anyhow::Result;
use std::path::Path;

/// Reads one file of source `cfg` into `load`: lines (re-deliveries dropped, see
/// [`SourceLoad::add`]), rejected lines, statement facts and the file record. Returns whether
/// every line was accepted.
pub fn read_file(cfg: &SourceConfig, path: &Path, load: &mut SourceLoad) -> Result<bool> {
    let mut one = SourceLoad::default();
    let clean = match &cfg.settings {
        FormatSettings::Csv(c) => csv::read_file(cfg.table_source(), c, path, &mut one)?,
        FormatSettings::Xlsx(x) => xlsx::read_file(cfg.table_source(), x, path, &mut one)?,
        FormatSettings::Jsonl(j) => jsonl::read_file(cfg.table_source(), j, path, &mut one)?,
        FormatSettings::Parquet(p) => parquet::read_file(cfg.table_source(), p, path, &mut one)?,
        settings => return read_bank_file(cfg, settings.format(), path, load),
    };
    let mut file =
        (one.files.pop()).unwrap_or_else(|| InputFile::new(&cfg.name, path.display().to_string()));
    let dropped_before = file.duplicates;
    for l in &mut one.lines {
        l.role = cfg.role;
    }
    let (lines, bad) = without_control_characters(std::mem::take(&mut one.lines));
    // Lines rejected by the parser and for control characters count together; over
    // `max_rejected_lines` the file is unreadable (nothing added to `load` yet).
    if one.rejected.len() + bad.len() > cfg.limits.max_rejected_lines {
        let all: Vec<Rejected> = one.rejected.iter().chain(&bad).cloned().collect();
        cfg.limits.check_rejected(&file.path, &all)?;
    }
    file.lines -= bad.len();
    file.rejected += bad.len();
    let (kept, rejected) = load.add(lines, true);
    file.duplicates = dropped_before + (file.lines - kept - rejected.len());
    file.lines = kept;
    file.rejected += rejected.len();
    let clean = clean && rejected.is_empty() && bad.is_empty();
    load.rejected.extend(one.rejected);
    load.rejected.extend(bad);
    load.rejected.extend(rejected);
    load.warnings.extend(one.warnings);
    load.notes.extend(one.notes);
    load.facts.extend(one.facts);
    load.files.push(file);
    Ok(clean)
}

/// [`read_file`] for a file of a bank format (camt, MT940, BAI2, OFX).
fn read_bank_file(
    cfg: &SourceConfig,
    format: Format,
    path: &Path,
    load: &mut SourceLoad,
) -> Result<bool> {
    let file = path.display().to_string();
    let bytes = cfg.limits.read(path)?;
    let ctx = ParseContext::new(cfg, &file);
    let mut parsed = parse_bank_bytes(format, &ctx, &bytes)?;
    for l in &mut parsed.lines {
        l.role = cfg.role;
    }
    let (lines, bad) = without_control_characters(parsed.lines);
    cfg.limits.check_rejected(&file, &bad)?;
    let total = lines.len();
    let (kept, rejected) = load.add(lines, false);
    debug_assert!(rejected.is_empty());
    load.files.push(InputFile {
        sha256: sha256_hex(&bytes),
        lines: kept,
        rejected: bad.len(),
        duplicates: total - kept,
        ..InputFile::new(&cfg.name, file)
    });
    load.facts.extend(parsed.facts);
    let clean = bad.is_empty();
    load.rejected.extend(bad);
    Ok(clean)
}

/// Splits off the lines whose text holds a control character ([`text::control_character`]),
/// as rejected lines at their own file and line: the same on every database (PostgreSQL
/// refuses NUL in text) and in every report.
fn without_control_characters(lines: Vec<StatementLine>) -> (Vec<StatementLine>, Vec<Rejected>) {
    let reason = |l: &StatementLine| {
        let reference = l.reference();
        [
            ("provider_txn_id", l.provider_txn_id.as_deref()),
            ("reference", reference.as_deref()),
            ("recipient", Some(l.recipient.as_str())),
            ("batch", l.batch.as_deref()),
            ("account", l.account()),
        ]
        .into_iter()
        .find_map(|(name, v)| {
            v.and_then(text::control_character)
                .map(|why| format!("{name} holds {why}"))
        })
    };
    if !lines.iter().any(|l| reason(l).is_some()) {
        return (lines, Vec::new());
    }
    let mut bad = Vec::new();
    let kept = lines
        .into_iter()
        .filter(|l| match reason(l) {
            None => true,
            Some(reason) => {
                bad.push(Rejected {
                    source: l.source().to_string(),
                    file: l.file().to_string(),
                    line: l.line_no,
                    reason,
                });
                false
            }
        })
        .collect();
    (kept, bad)
}

/// The files of `path`: itself, or the entries of a folder that `keep` accepts, in name order
/// (the webhook files of `[[status_api]]`, the files of `[[payout_status]]`).
pub fn file_or_folder(
    path: &Path,
    keep: impl Fn(&Path) -> bool,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    if !path.is_dir() {
        return std::fs::metadata(path).map(|_| vec![path.to_path_buf()]);
    }
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| keep(p))
        .collect();
    v.sort();
    Ok(v)
}
