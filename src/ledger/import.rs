//! `recon ledger import`: loads payments (and attempts) from CSV into the database.
//! All rows are validated first; any bad row rejects the whole import (nothing half-imported).
//!
//! Each file is read once, record by record into one reused `csv::ByteRecord`, and validated
//! in the same pass. The rows then go into the database in one transaction through each
//! backend's bulk path: a prepared statement stepped through the raw sqlite3 handle
//! ([`sqlite`]), `COPY … FROM STDIN` on PostgreSQL ([`postgres`]).

mod postgres;
mod sqlite;

use super::Status;
use crate::exit::{Failure, fail};
use crate::keyindex::KeyIndex;
use crate::store::Tx;
use crate::timeparse::Micros;
use crate::{money, normalize, timeparse};
use anyhow::Result;
use compact_str::CompactString;
use std::borrow::Cow;
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

/// A validated payment row and the file line it came from.
#[derive(Debug, Clone)]
struct PaymentRow {
    line: u64,
    payment_id: CompactString,
    recipient: CompactString,
    amount_minor: i64,
    currency: &'static str,
    status: Status,
    created_at: Micros,
    started_at: Option<Micros>,
    attempt_id: Option<CompactString>,
    provider_payment_id: Option<CompactString>,
}

/// A validated attempt row and the file line it came from.
#[derive(Debug, Clone)]
struct AttemptRow {
    line: u64,
    attempt_id: CompactString,
    payment_id: CompactString,
    started_at: Micros,
    finished_at: Option<Micros>,
    outcome: Option<CompactString>,
    provider_payment_id: Option<CompactString>,
    error_detail: Option<CompactString>,
}

/// The validated rows of one file, and its name for messages.
#[derive(Debug)]
struct Rows<T> {
    file: String,
    rows: Vec<T>,
}

/// Rejected rows of one file: (line, message), reported in line order.
#[derive(Debug, Default)]
struct Errors(Vec<(u64, String)>);

impl Errors {
    fn push(&mut self, line: u64, msg: String) {
        self.0.push((line, msg));
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// Fails with every message (the first 20 shown) when there are any.
    fn reject_if_any(mut self) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        self.0.sort_by_key(|(line, _)| *line);
        let total = self.0.len();
        let shown: Vec<&str> = self.0.iter().take(20).map(|(_, m)| m.as_str()).collect();
        let more = if total > shown.len() {
            format!("\n… and {} more", total - shown.len())
        } else {
            String::new()
        };
        Err(fail(
            Failure::Input,
            format!(
                "{total} row(s) rejected, nothing imported:\n{}{more}",
                shown.join("\n")
            ),
        ))
    }
}

fn opt(s: &str) -> Option<CompactString> {
    let t = normalize::apply(&[normalize::Step::FoldWidth, normalize::Step::Trim], s);
    (!t.is_empty()).then(|| CompactString::from(t.as_ref()))
}

/// Calls `row(line, fields in column order, errors)` for every non-blank record of the CSV at
/// `path`, whose header must contain `columns`. Records that cannot be read, have the wrong
/// number of fields, are not UTF-8 or hold a control character other than tab and line breaks
/// (NUL among them, which PostgreSQL text cannot hold) are rejected here.
fn each_record<const N: usize>(
    path: &Path,
    columns: &[&str; N],
    errors: &mut Errors,
    mut row: impl FnMut(u64, &[&str; N], &mut Errors),
) -> Result<String> {
    let file = path.display().to_string();
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(|e| fail(Failure::Input, format!("{file}: cannot read: {e}")))?;
    let header = crate::sources::csv::header_of(&mut rdr, &file)?;
    let mut idx = [0usize; N];
    for (slot, c) in idx.iter_mut().zip(columns) {
        *slot = header.iter().position(|h| h == c).ok_or_else(|| {
            fail(
                Failure::Input,
                format!("{file}: header has no column {c:?} (expected {columns:?})"),
            )
        })?;
    }
    let mut rec = csv::ByteRecord::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                errors.push(line, format!("{file}:{line}: unreadable record: {e}"));
                if matches!(e.kind(), csv::ErrorKind::Io(_)) {
                    break;
                }
                continue;
            }
        }
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        let Ok(text) = std::str::from_utf8(rec.as_slice()) else {
            errors.push(line, format!("{file}:{line}: unreadable record: not UTF-8"));
            continue;
        };
        if text.trim().is_empty() {
            continue; // a blank line (or only separators and spaces)
        }
        if rec.len() != header.len() {
            errors.push(
                line,
                format!(
                    "{file}:{line}: {} fields, header has {}",
                    rec.len(),
                    header.len()
                ),
            );
            continue;
        }
        let mut fields = [""; N];
        let mut utf8 = true;
        for (f, &i) in fields.iter_mut().zip(&idx) {
            match std::str::from_utf8(&rec[i]) {
                Ok(s) => *f = s,
                Err(_) => utf8 = false, // a character split across fields
            }
        }
        if !utf8 {
            errors.push(line, format!("{file}:{line}: unreadable record: not UTF-8"));
            continue;
        }
        if let Some((c, why)) = fields.iter().zip(columns).find_map(|(f, c)| {
            crate::sources::text::control_character(f).map(|why| (c, why))
        }) {
            errors.push(line, format!("{file}:{line}: column {c}: {why}"));
            continue;
        }
        row(line, &fields, errors);
    }
    Ok(file)
}

fn ts(file: &str, line: u64, col: &str, v: &str, errors: &mut Errors) -> Option<Micros> {
    match timeparse::parse_ledger(v) {
        Ok(t) => Some(t),
        Err(e) => {
            errors.push(line, format!("{file}:{line}: column {col}: {e}"));
            None
        }
    }
}

/// First line of each id: valid rows are found through `index` (positions into their rows),
/// rejected ones through `rejected` (only filled when the import fails anyway).
struct FirstLines {
    index: KeyIndex,
    rejected: HashMap<CompactString, u64>,
}

impl FirstLines {
    fn new() -> Self {
        FirstLines {
            index: KeyIndex::with_capacity(1024),
            rejected: HashMap::new(),
        }
    }

    /// The line where `id` was seen first, if it was.
    fn seen<'r>(&self, id: &str, key_of: impl Fn(u32) -> (&'r str, u64)) -> Option<u64> {
        match self.index.get(id, |i| key_of(i).0) {
            Some(i) => Some(key_of(i).1),
            None => self.rejected.get(id).copied(),
        }
    }
}

fn parse_payments(path: &Path) -> Result<Rows<PaymentRow>> {
    let mut rows: Vec<PaymentRow> = Vec::new();
    let mut errors = Errors::default();
    let mut first = FirstLines::new();
    let file = path.display().to_string();
    each_record(path, &PAYMENT_COLUMNS, &mut errors, |line, f, errors| {
        let before = errors.len();
        let payment_id = normalize::text(f[0]);
        let key_of = |i: u32| {
            let r = &rows[i as usize];
            (r.payment_id.as_str(), r.line)
        };
        if payment_id.is_empty() {
            errors.push(line, format!("{file}:{line}: column payment_id: empty"));
        } else if let Some(at) = first.seen(&payment_id, key_of) {
            errors.push(
                line,
                format!("{file}:{line}: payment_id {payment_id:?} also at line {at}"),
            );
        }
        let recipient = normalize::account(f[1]);
        if recipient.is_empty() {
            errors.push(
                line,
                format!("{file}:{line}: column recipient_account: empty"),
            );
        }
        let money = money::currency(f[3]).and_then(|(code, exp)| {
            money::parse_decimal(f[2], money::NumberFormat::DOT)
                .and_then(|d| money::to_minor(d, code, exp))
                .map(|m| (code, m))
        });
        let status = Status::parse(f[4]);
        if status.is_none() {
            errors.push(
                line,
                format!(
                    "{file}:{line}: column status: {:?} is not one of PENDING, SUBMITTING, SUCCEEDED, FAILED, UNKNOWN, REVIEW",
                    f[4]
                ),
            );
        }
        let created_at = ts(&file, line, "created_at", f[5], errors);
        let started_at = match opt(f[6]) {
            None => {
                if status.is_some_and(|s| s != Status::Pending) {
                    errors.push(
                        line,
                        format!(
                            "{file}:{line}: column started_at: required unless status is PENDING"
                        ),
                    );
                }
                None
            }
            Some(v) => ts(&file, line, "started_at", &v, errors),
        };
        let attempt_id = opt(f[7]);
        if attempt_id.is_none() && status.is_some_and(|s| s != Status::Pending) {
            errors.push(
                line,
                format!("{file}:{line}: column attempt_id: required unless status is PENDING"),
            );
        }
        let valid = match (money, status, created_at) {
            (Err(e), ..) => {
                errors.push(line, format!("{file}:{line}: columns amount/currency: {e}"));
                None
            }
            (Ok(m), Some(s), Some(c)) if errors.len() == before => Some((m, s, c)),
            _ => None,
        };
        let Some(((currency, amount_minor), status, created_at)) = valid else {
            if !payment_id.is_empty() {
                first.rejected.entry(payment_id).or_insert(line);
            }
            return;
        };
        let i = rows.len() as u32;
        rows.push(PaymentRow {
            line,
            payment_id,
            recipient,
            amount_minor,
            currency,
            status,
            created_at,
            started_at,
            attempt_id,
            provider_payment_id: opt(f[8]),
        });
        let key = rows[i as usize].payment_id.as_str();
        first
            .index
            .insert_new(key, i, |j| rows[j as usize].payment_id.as_str());
    })?;
    errors.reject_if_any()?;
    Ok(Rows { file, rows })
}

/// Attempts, and the lines whose payment is not in the payments file (to be looked up in the
/// database) with their payment ids.
type ParsedAttempts = (Rows<AttemptRow>, Errors, Vec<(u64, CompactString)>);

/// Parses attempts; a payment id is known if `in_file` holds it, otherwise it is returned for
/// a look-up in the database.
fn parse_attempts(path: &Path, in_file: impl Fn(&str) -> bool) -> Result<ParsedAttempts> {
    let mut rows: Vec<AttemptRow> = Vec::new();
    let mut errors = Errors::default();
    let mut first = FirstLines::new();
    let mut elsewhere = Vec::new();
    let file = path.display().to_string();
    each_record(path, &ATTEMPT_COLUMNS, &mut errors, |line, f, errors| {
        let before = errors.len();
        let attempt_id = normalize::text(f[0]);
        let key_of = |i: u32| {
            let r = &rows[i as usize];
            (r.attempt_id.as_str(), r.line)
        };
        if attempt_id.is_empty() {
            errors.push(line, format!("{file}:{line}: column attempt_id: empty"));
        } else if let Some(at) = first.seen(&attempt_id, key_of) {
            errors.push(
                line,
                format!("{file}:{line}: attempt_id {attempt_id:?} also at line {at}"),
            );
        }
        let payment_id = normalize::text(f[1]);
        let started_at = ts(&file, line, "started_at", f[2], errors);
        let finished_at = match opt(f[3]) {
            Some(v) => ts(&file, line, "finished_at", &v, errors),
            None => None,
        };
        let started_at = match started_at {
            Some(s) if errors.len() == before => s,
            _ => {
                if !attempt_id.is_empty() {
                    first.rejected.entry(attempt_id).or_insert(line);
                }
                if !in_file(&payment_id) {
                    elsewhere.push((line, payment_id));
                }
                return;
            }
        };
        if !in_file(&payment_id) {
            elsewhere.push((line, payment_id.clone()));
        }
        let i = rows.len() as u32;
        rows.push(AttemptRow {
            line,
            attempt_id,
            payment_id,
            started_at,
            finished_at,
            outcome: opt(f[4]).map(|o| match normalize::apply(&[normalize::Step::Upper], &o) {
                Cow::Borrowed(_) => o,
                Cow::Owned(u) => u.into(),
            }),
            provider_payment_id: opt(f[5]),
            error_detail: opt(f[6]),
        });
        let key = rows[i as usize].attempt_id.as_str();
        first
            .index
            .insert_new(key, i, |j| rows[j as usize].attempt_id.as_str());
    })?;
    Ok((Rows { file, rows }, errors, elsewhere))
}

/// Which of `ids` are payments in the database (one query against a temporary table of them,
/// none when the ledger is empty).
async fn payments_in_db(tx: &mut Tx, ids: &[&str]) -> Result<HashSet<String>> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    match tx {
        Tx::Sqlite(t) => sqlite::payments_in_db(t, ids).await,
        Tx::Postgres(t) => postgres::payments_in_db(t, ids).await,
    }
}

/// Validates both files completely, then inserts everything in one transaction.
pub async fn import(
    db: &crate::db::Db,
    payments: &Path,
    attempts: Option<&Path>,
) -> Result<ImportReport> {
    let payments = parse_payments(payments)?;
    let mut index = KeyIndex::with_capacity(payments.rows.len());
    for (i, r) in payments.rows.iter().enumerate() {
        index.insert_new(&r.payment_id, i as u32, |j| {
            payments.rows[j as usize].payment_id.as_str()
        });
    }
    let in_file = |id: &str| {
        index
            .get(id, |j| payments.rows[j as usize].payment_id.as_str())
            .is_some()
    };
    let attempts = attempts.map(|p| parse_attempts(p, in_file)).transpose()?;
    let mut tx = db.begin().await?;
    // Ids already in the database are rejected: an import never overwrites the ledger.
    let ids: Vec<&str> = payments
        .rows
        .iter()
        .map(|r| r.payment_id.as_str())
        .collect();
    let mut existing: Vec<String> = payments_in_db(&mut tx, &ids).await?.into_iter().collect();
    drop(ids);
    if !existing.is_empty() {
        existing.sort();
        let mut errors = Errors::default();
        for id in existing {
            errors.push(
                0,
                format!(
                    "{}: payment_id {id:?} is already in the database",
                    payments.file
                ),
            );
        }
        errors.reject_if_any()?;
    }
    let attempts = match attempts {
        Some((rows, mut errors, elsewhere)) => {
            // Attempts may also belong to payments imported earlier.
            let ids: HashSet<&str> = elsewhere.iter().map(|(_, id)| id.as_str()).collect();
            let in_db = payments_in_db(&mut tx, &ids.into_iter().collect::<Vec<_>>()).await?;
            for (line, id) in &elsewhere {
                if !in_db.contains(id.as_str()) {
                    errors.push(
                        *line,
                        format!(
                            "{}:{line}: column payment_id: {id:?} is not a known payment",
                            rows.file
                        ),
                    );
                }
            }
            errors.reject_if_any()?;
            rows
        }
        None => Rows {
            file: String::new(),
            rows: Vec::new(),
        },
    };
    let now = chrono::Utc::now().timestamp_micros();
    match &mut tx {
        Tx::Sqlite(t) => sqlite::insert(t, &payments, &attempts, now).await?,
        Tx::Postgres(t) => postgres::insert(t, &payments, &attempts, now).await?,
    }
    tx.commit().await?;
    Ok(ImportReport {
        payments: payments.rows.len(),
        attempts: attempts.rows.len(),
    })
}
