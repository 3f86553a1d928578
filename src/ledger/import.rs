//! `recon ledger import`: loads payments (and attempts) from CSV into the database.
//! All rows are validated first; any bad row rejects the whole import (nothing half-imported).

use super::Status;
use crate::exit::{Failure, fail};
use crate::{money, normalize, timeparse};
use anyhow::Result;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Expected header of the payments CSV.
pub const PAYMENT_COLUMNS: [&str; 9] = [
    "payment_id",
    "recipient_account",
    "amount",
    "currency",
    "status",
    "created_at",
    "started_at",
    "attempt_id",
    "provider_payment_id",
];
/// Expected header of the attempts CSV.
pub const ATTEMPT_COLUMNS: [&str; 7] = [
    "attempt_id",
    "payment_id",
    "started_at",
    "finished_at",
    "outcome",
    "provider_payment_id",
    "error_detail",
];

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Payments inserted.
    pub payments: usize,
    /// Attempts inserted.
    pub attempts: usize,
}

type PaymentRow = crate::store::PaymentInsert;
type AttemptRow = crate::store::AttemptInsert;

fn opt(s: &str) -> Option<String> {
    let t = normalize::text(s);
    (!t.is_empty()).then(|| t.to_string())
}

/// Reads a CSV whose header must contain `columns`; yields (line, fields in column order).
fn read_csv(path: &Path, columns: &[&str]) -> Result<Vec<(u64, Vec<String>)>> {
    let file = path.display();
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(|e| fail(Failure::Input, format!("{file}: cannot read: {e}")))?;
    let header = crate::sources::csv::header_of(&mut rdr, &file.to_string())?;
    let idx: Vec<usize> = columns
        .iter()
        .map(|c| {
            header.iter().position(|h| h == c).ok_or_else(|| {
                fail(
                    Failure::Input,
                    format!("{file}: header has no column {c:?} (expected {columns:?})"),
                )
            })
        })
        .collect::<Result<_>>()?;
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for rec in rdr.records() {
        match rec {
            Ok(r) => {
                let line = r.position().map(|p| p.line()).unwrap_or(0);
                if r.iter().all(|f| f.trim().is_empty()) {
                    continue;
                }
                if r.len() != header.len() {
                    errors.push(format!(
                        "{file}:{line}: {} fields, header has {}",
                        r.len(),
                        header.len()
                    ));
                    continue;
                }
                if let Some((c, why)) = idx.iter().zip(columns).find_map(|(&i, c)| {
                    crate::sources::text::control_character(&r[i]).map(|why| (c, why))
                }) {
                    errors.push(format!("{file}:{line}: column {c}: {why}"));
                    continue;
                }
                rows.push((line, idx.iter().map(|&i| r[i].to_string()).collect()));
            }
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                errors.push(format!("{file}:{line}: unreadable record: {e}"));
            }
        }
    }
    reject_if_any(&errors)?;
    Ok(rows)
}

fn reject_if_any(errors: &[String]) -> Result<()> {
    if errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = errors.iter().take(20).map(String::as_str).collect();
    let more = if errors.len() > shown.len() {
        format!("\n… and {} more", errors.len() - shown.len())
    } else {
        String::new()
    };
    Err(fail(
        Failure::Input,
        format!(
            "{} row(s) rejected, nothing imported:\n{}{more}",
            errors.len(),
            shown.join("\n")
        ),
    ))
}

fn ts(file: &str, line: u64, col: &str, v: &str, errors: &mut Vec<String>) -> Option<String> {
    match timeparse::parse_ledger(v) {
        Ok(t) => Some(timeparse::to_db(t)),
        Err(e) => {
            errors.push(format!("{file}:{line}: column {col}: {e}"));
            None
        }
    }
}

fn parse_payments(path: &Path) -> Result<Vec<PaymentRow>> {
    let file = path.display().to_string();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    for (line, f) in read_csv(path, &PAYMENT_COLUMNS)? {
        let before = errors.len();
        let payment_id = normalize::text(&f[0]).to_string();
        if payment_id.is_empty() {
            errors.push(format!("{file}:{line}: column payment_id: empty"));
        } else if let Some(first) = seen.insert(payment_id.clone(), line) {
            errors.push(format!(
                "{file}:{line}: payment_id {payment_id:?} also at line {first}"
            ));
        }
        let recipient = normalize::account(&f[1]).to_string();
        if recipient.is_empty() {
            errors.push(format!("{file}:{line}: column recipient_account: empty"));
        }
        let money = money::currency(&f[3]).and_then(|(code, exp)| {
            money::parse_decimal(&f[2], money::NumberFormat::DOT)
                .and_then(|d| money::to_minor(d, code, exp))
                .map(|m| (code, m))
        });
        let status = Status::parse(&f[4]);
        if status.is_none() {
            errors.push(format!(
                "{file}:{line}: column status: {:?} is not one of PENDING, SUBMITTING, SUCCEEDED, FAILED, UNKNOWN, REVIEW",
                f[4]
            ));
        }
        let created_at = ts(&file, line, "created_at", &f[5], &mut errors);
        let started_at = match opt(&f[6]) {
            None => {
                if status.is_some_and(|s| s != Status::Pending) {
                    errors.push(format!(
                        "{file}:{line}: column started_at: required unless status is PENDING"
                    ));
                }
                None
            }
            Some(v) => ts(&file, line, "started_at", &v, &mut errors),
        };
        let attempt_id = opt(&f[7]);
        if attempt_id.is_none() && status.is_some_and(|s| s != Status::Pending) {
            errors.push(format!(
                "{file}:{line}: column attempt_id: required unless status is PENDING"
            ));
        }
        let (currency, amount_minor) = match money {
            Ok(m) => m,
            Err(e) => {
                errors.push(format!("{file}:{line}: columns amount/currency: {e}"));
                continue;
            }
        };
        if errors.len() > before {
            continue;
        }
        if let (Some(status), Some(created_at)) = (status, created_at) {
            out.push(PaymentRow {
                payment_id,
                recipient,
                amount_minor,
                currency,
                status: status.as_str(),
                created_at,
                started_at,
                attempt_id,
                provider_payment_id: opt(&f[8]),
            });
        }
    }
    reject_if_any(&errors)?;
    Ok(out)
}

/// Parses attempts; `known(payment_id)` says whether the payment exists (in the file being
/// imported or in the database).
fn parse_attempts(
    path: &Path,
    records: Vec<(u64, Vec<String>)>,
    known: impl Fn(&str) -> bool,
) -> Result<Vec<AttemptRow>> {
    let file = path.display().to_string();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    for (line, f) in records {
        let before = errors.len();
        let attempt_id = normalize::text(&f[0]).to_string();
        if attempt_id.is_empty() {
            errors.push(format!("{file}:{line}: column attempt_id: empty"));
        } else if let Some(first) = seen.insert(attempt_id.clone(), line) {
            errors.push(format!(
                "{file}:{line}: attempt_id {attempt_id:?} also at line {first}"
            ));
        }
        let payment_id = normalize::text(&f[1]).to_string();
        if !known(&payment_id) {
            errors.push(format!(
                "{file}:{line}: column payment_id: {payment_id:?} is not a known payment"
            ));
        }
        let started_at = ts(&file, line, "started_at", &f[2], &mut errors);
        let finished_at = match opt(&f[3]) {
            Some(v) => ts(&file, line, "finished_at", &v, &mut errors),
            None => None,
        };
        if errors.len() > before {
            continue;
        }
        if let Some(started_at) = started_at {
            out.push(AttemptRow {
                attempt_id,
                payment_id,
                started_at,
                finished_at,
                outcome: opt(&f[4]).map(|o| o.to_uppercase()),
                provider_payment_id: opt(&f[5]),
                error_detail: opt(&f[6]),
            });
        }
    }
    reject_if_any(&errors)?;
    Ok(out)
}

/// Validates both files completely, then inserts everything in one transaction.
pub async fn import(
    db: &crate::db::Db,
    payments: &Path,
    attempts: Option<&Path>,
) -> Result<ImportReport> {
    let rows = parse_payments(payments)?;
    let mut tx = db.begin().await?;
    // Ids already in the database are rejected: an import never overwrites the ledger.
    let mut existing: Vec<String> = tx
        .payments_in_db(
            &rows
                .iter()
                .map(|r| r.payment_id.as_str())
                .collect::<Vec<_>>(),
        )
        .await?
        .into_iter()
        .collect();
    if !existing.is_empty() {
        existing.sort();
        let errors: Vec<String> = existing
            .iter()
            .map(|id| {
                format!(
                    "{}: payment_id {id:?} is already in the database",
                    payments.display()
                )
            })
            .collect();
        reject_if_any(&errors)?;
    }
    let in_file: HashSet<&str> = rows.iter().map(|r| r.payment_id.as_str()).collect();
    let attempt_rows = match attempts {
        Some(p) => {
            // Attempts may also belong to payments imported earlier: look up only the ids
            // the payments file does not have.
            let records = read_csv(p, &ATTEMPT_COLUMNS)?;
            let missing: HashSet<String> = records
                .iter()
                .map(|(_, f)| normalize::text(&f[1]).to_string())
                .filter(|id| !in_file.contains(id.as_str()))
                .collect();
            let in_db = tx
                .payments_in_db(&missing.iter().map(String::as_str).collect::<Vec<_>>())
                .await?;
            parse_attempts(p, records, |id| in_file.contains(id) || in_db.contains(id))?
        }
        None => Vec::new(),
    };
    let now = timeparse::to_db(chrono::Utc::now().timestamp_micros());
    tx.insert_ledger(&rows, &attempt_rows, &now).await?;
    tx.commit().await?;
    Ok(ImportReport {
        payments: rows.len(),
        attempts: attempt_rows.len(),
    })
}
