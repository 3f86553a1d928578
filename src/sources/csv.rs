//! Provider statements as CSV, read through the declarative column mapping of the config.

use super::{InputFile, Rejected, SourceLoad, StatementLine, sha256_hex};
use crate::config::{LineKind, SourceConfig};
use crate::exit::{Failure, fail};
use crate::{money, normalize, timeparse};
use anyhow::Result;
use foldhash::HashMap;
use foldhash::HashMapExt;
use std::path::Path;
use std::sync::Arc;

/// Column positions resolved from the header.
struct Positions {
    txn: Option<usize>,
    reference: Option<usize>,
    recipient: usize,
    amount: usize,
    currency: usize,
    booked_at: usize,
    kind: Option<usize>,
}

/// The trimmed header names of a CSV reader (a leading byte-order mark removed).
pub fn header_of<R: std::io::Read>(
    reader: &mut ::csv::Reader<R>,
    file: &str,
) -> Result<Vec<String>> {
    Ok(reader
        .headers()
        .map_err(|e| {
            fail(
                Failure::Input,
                format!("{file}: cannot read the header: {e}"),
            )
        })?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').trim().to_string())
        .collect())
}

fn find(header: &[String], name: &str, key: &str, file: &str) -> Result<usize> {
    header
        .iter()
        .position(|h| h == name.trim())
        .ok_or_else(|| {
            fail(
                Failure::Input,
                format!(
                    "{file}: column {name:?} (config key columns.{key}) is not in the header; found {header:?}"
                ),
            )
        })
}

/// Reads one CSV file into `load`. Returns whether every data line was accepted.
/// An unreadable file or a header without a mapped column is an error for the whole file.
pub fn read_file(cfg: &SourceConfig, path: &Path, load: &mut SourceLoad) -> Result<bool> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| fail(Failure::Input, format!("{file}: cannot read: {e}")))?;
    let sha256 = sha256_hex(&bytes);
    let (lines, rejected, duplicates) = parse_bytes(cfg, &file, &bytes)?;
    let clean = rejected.is_empty();
    load.files.push(InputFile {
        source: cfg.name.clone(),
        path: file,
        sha256,
        lines: lines.len(),
        rejected: rejected.len(),
        duplicates,
    });
    load.lines.extend(lines);
    load.rejected.extend(rejected);
    Ok(clean)
}

/// Parses CSV bytes: accepted lines, rejected lines, and the number of dropped re-deliveries.
pub fn parse_bytes(
    cfg: &SourceConfig,
    file: &str,
    bytes: &[u8],
) -> Result<(Vec<StatementLine>, Vec<Rejected>, usize)> {
    // Skip the preamble by physical lines, then let the csv crate handle quoting.
    let mut offset = 0usize;
    for _ in 0..cfg.skip_lines {
        match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(p) => offset += p + 1,
            None => offset = bytes.len(),
        }
    }
    let body = &bytes[offset..];
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let mut reader = ::csv::ReaderBuilder::new()
        .delimiter(cfg.delimiter)
        .has_headers(true)
        .flexible(true)
        .from_reader(body);
    let header = header_of(&mut reader, file)?;
    let c = &cfg.columns;
    let pos = Positions {
        txn: c
            .provider_txn_id
            .as_deref()
            .map(|n| find(&header, n, "provider_txn_id", file))
            .transpose()?,
        reference: c
            .reference
            .as_deref()
            .map(|n| find(&header, n, "reference", file))
            .transpose()?,
        recipient: find(&header, &c.recipient, "recipient", file)?,
        amount: find(&header, &c.amount, "amount", file)?,
        currency: find(&header, &c.currency, "currency", file)?,
        booked_at: find(&header, &c.booked_at, "booked_at", file)?,
        kind: c
            .kind
            .as_deref()
            .map(|n| find(&header, n, "kind", file))
            .transpose()?,
    };
    let line_base = cfg.skip_lines as u64;
    let mut lines = Vec::new();
    let mut rejected = Vec::new();
    let mut duplicates = 0usize;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut record = ::csv::StringRecord::new();
    let names = (Arc::<str>::from(cfg.name.as_str()), Arc::<str>::from(file));
    loop {
        let line_no = line_base + reader.position().line();
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e
                    .position()
                    .map(|p| line_base + p.line())
                    .unwrap_or(line_no);
                rejected.push(Rejected {
                    source: cfg.name.clone(),
                    file: file.to_string(),
                    line,
                    reason: format!("unreadable record: {e}"),
                });
                continue;
            }
        }
        let line_no = record
            .position()
            .map(|p| line_base + p.line())
            .unwrap_or(line_no);
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        match parse_record(cfg, &pos, &record, &names, line_no) {
            Ok(line) => {
                if let Some(id) = &line.provider_txn_id {
                    if let Some(&i) = seen.get(id) {
                        let first: &StatementLine = &lines[i];
                        if first.amount_minor == line.amount_minor
                            && first.currency == line.currency
                            && first.booked_at == line.booked_at
                            && first.recipient == line.recipient
                            && first.reference == line.reference
                            && first.kind == line.kind
                        {
                            duplicates += 1;
                        } else {
                            rejected.push(Rejected {
                                source: cfg.name.clone(),
                                file: file.to_string(),
                                line: line_no,
                                reason: format!(
                                    "provider_txn_id {id:?} already seen at line {} with different content",
                                    first.line_no
                                ),
                            });
                        }
                        continue;
                    }
                    seen.insert(id.clone(), lines.len());
                }
                lines.push(line);
            }
            Err(reason) => rejected.push(Rejected {
                source: cfg.name.clone(),
                file: file.to_string(),
                line: line_no,
                reason,
            }),
        }
    }
    Ok((lines, rejected, duplicates))
}

fn field<'r>(record: &'r ::csv::StringRecord, i: usize, name: &str) -> Result<&'r str, String> {
    record
        .get(i)
        .ok_or_else(|| format!("column {name:?} is missing (short row)"))
}

fn optional(record: &::csv::StringRecord, i: Option<usize>) -> Option<String> {
    i.and_then(|i| record.get(i))
        .map(normalize::text)
        .filter(|s| !s.is_empty())
}

fn parse_record(
    cfg: &SourceConfig,
    pos: &Positions,
    record: &::csv::StringRecord,
    (source, file): &(Arc<str>, Arc<str>),
    line_no: u64,
) -> Result<StatementLine, String> {
    let c = &cfg.columns;
    let currency_text = field(record, pos.currency, &c.currency)?;
    let (currency, exponent) =
        money::currency(currency_text).map_err(|e| format!("column {:?}: {e}", c.currency))?;
    let amount_text = field(record, pos.amount, &c.amount)?;
    let amount = money::parse_decimal(amount_text, cfg.number_format)
        .and_then(|d| money::to_minor(d, currency, exponent))
        .map_err(|e| format!("column {:?}: {e}", c.amount))?;
    let amount_minor = if cfg.negate_amounts { -amount } else { amount };
    let booked_text = field(record, pos.booked_at, &c.booked_at)?;
    let booked_at = timeparse::parse(booked_text, &cfg.timestamp_format, cfg.timezone)
        .map_err(|e| format!("column {:?}: {e}", c.booked_at))?;
    let recipient = normalize::account(field(record, pos.recipient, &c.recipient)?);
    if recipient.is_empty() {
        return Err(format!("column {:?}: empty recipient", c.recipient));
    }
    let kind = match pos.kind {
        None => LineKind::Payment,
        Some(i) => {
            let name = c.kind.as_deref().unwrap_or("kind");
            let v = field(record, i, name)?;
            let key = normalize::text(v).to_uppercase();
            *cfg.kinds.get(&key).ok_or_else(|| {
                format!(
                    "column {name:?}: value {v:?} is not mapped to PAYMENT or REFUND (config key kinds)"
                )
            })?
        }
    };
    Ok(StatementLine {
        source: source.clone(),
        file: file.clone(),
        line_no,
        provider_txn_id: optional(record, pos.txn),
        reference: optional(record, pos.reference),
        recipient,
        amount_minor,
        currency,
        booked_at,
        kind,
    })
}
