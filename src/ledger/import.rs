//! `recon ledger import`: loads payments (and attempts) from CSV into the database.
//! All rows are validated first; any bad row rejects the whole import (nothing half-imported).
//! The payments file may carry a [`MERCHANT_COLUMN`] (the partition a sharded night splits
//! by); its header decides, and names no other column.
//!
//! Each file is read once, record by record into one reused `csv::ByteRecord`, and validated
//! in the same pass. The rows then go into the database in one transaction through each
//! backend's bulk path: a prepared statement stepped through the raw sqlite3 handle
//! (`import/sqlite.rs`), `COPY … FROM STDIN` on PostgreSQL (`import/postgres.rs`).

mod postgres;
mod sqlite;

use super::Status;
use crate::db::{IdColumn, IdTypes, Pool};
use crate::exit::{Failure, fail};
use crate::keyindex::KeyIndex;
use crate::timeparse::Micros;
use crate::{money, normalize, timeparse};
use anyhow::Result;
use compact_str::CompactString;
use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

/// Expected header of the payments CSV (any order; [`MERCHANT_COLUMN`] may follow).
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
/// The payments CSV's optional 10th column: the payment's partition (issue 34), imported into
/// `payments.merchant_id`; an empty value is NULL. A file without it imports as before.
pub const MERCHANT_COLUMN: &str = "merchant_id";
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
    /// None when empty, or when the file has no [`MERCHANT_COLUMN`].
    merchant_id: Option<CompactString>,
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
    /// Whether the file has the optional column(s) after the required ones (payments: the
    /// [`MERCHANT_COLUMN`]): only then does the insert name them, so a file without them
    /// imports exactly as before.
    optional: bool,
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

/// The columns [`each_record`] reads, in the order it hands their fields over.
struct Columns<'a, const N: usize> {
    /// What the file holds, for messages (`payments`, `attempts`).
    what: &'static str,
    /// Header names: the first `required` must be in the header, the others may be (a missing
    /// one reads as an empty field).
    names: &'a [&'a str; N],
    required: usize,
    /// Whether a header name that is none of `names` is refused (a misspelt optional column
    /// would otherwise be read as absent, silently).
    closed: bool,
}

/// Calls `row(line, fields in column order, errors)` for every non-blank record of the CSV at
/// `path`, whose header must hold the columns `columns` requires (and, when it is closed, no
/// others). Records that cannot be read, have the wrong number of fields, are not UTF-8 or
/// hold a control character other than tab and line breaks (NUL among them, which PostgreSQL
/// text cannot hold) are rejected here. Returns the file's name for messages and which of the
/// columns the header has.
fn each_record<const N: usize>(
    path: &Path,
    columns: &Columns<'_, N>,
    errors: &mut Errors,
    mut row: impl FnMut(u64, &[&str; N], &mut Errors),
) -> Result<(String, [bool; N])> {
    let Columns {
        what,
        names,
        required,
        closed,
    } = *columns;
    let file = path.display().to_string();
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(|e| fail(Failure::Input, format!("{file}: cannot read: {e}")))?;
    let header = crate::sources::csv::header_of(&mut rdr, &file)?;
    if closed
        && let Some((k, h)) = header
            .iter()
            .enumerate()
            .find(|(_, h)| !names.contains(&h.as_str()))
    {
        return Err(fail(
            Failure::Input,
            format!(
                "{file}:1: column {} {h:?} is not a {what} column (expected {:?}, optionally \
                 followed by {:?})",
                k + 1,
                &names[..required],
                &names[required..],
            ),
        ));
    }
    // usize::MAX: an optional column the header does not have.
    let mut idx = [usize::MAX; N];
    for (k, (slot, c)) in idx.iter_mut().zip(names).enumerate() {
        match header.iter().position(|h| h == c) {
            Some(i) => *slot = i,
            None if k >= required => {}
            None => {
                return Err(fail(
                    Failure::Input,
                    format!(
                        "{file}: header has no column {c:?} (expected {:?})",
                        &names[..required]
                    ),
                ));
            }
        }
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
            if i == usize::MAX {
                continue;
            }
            match std::str::from_utf8(&rec[i]) {
                Ok(s) => *f = s,
                Err(_) => utf8 = false, // a character split across fields
            }
        }
        if !utf8 {
            errors.push(line, format!("{file}:{line}: unreadable record: not UTF-8"));
            continue;
        }
        if let Some((c, why)) = fields
            .iter()
            .zip(names)
            .find_map(|(f, c)| crate::sources::text::control_character(f).map(|why| (c, why)))
        {
            errors.push(line, format!("{file}:{line}: column {c}: {why}"));
            continue;
        }
        row(line, &fields, errors);
    }
    Ok((file, idx.map(|i| i != usize::MAX)))
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

/// About how many records the CSV at `path` has (its size over the mean length of its first
/// lines), to size the rows and the id index once: growing them copies everything and touches
/// fresh memory, which is what parsing a million rows spent most of its time on.
fn estimate_records(path: &Path) -> usize {
    use std::io::Read as _;
    let Ok(mut f) = std::fs::File::open(path) else {
        return 0;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = vec![0u8; 64 << 10];
    let n = f.read(&mut head).unwrap_or(0);
    let lines = head[..n].iter().filter(|&&b| b == b'\n').count();
    if lines < 2 {
        return 16;
    }
    let estimate = len as usize / (n / lines).max(1);
    (estimate + estimate / 8).min(1 << 27)
}

/// `id`, a value of the ledger column `col` at `file:line`, as the database stores it: where
/// the column is a `uuid`, the canonical text of the UUID it spells (lower case with hyphens,
/// as PostgreSQL prints it), so that duplicates in the file, the attempts' payments, the ids
/// already in the database and the insert order are all judged as the database sees the ids.
/// An id that spells no UUID there is an error naming the line; an empty one is left to
/// [`take_id`].
fn stored_id(
    id: CompactString,
    (col, ids): (IdColumn, IdTypes),
    (file, line): (&str, u64),
    errors: &mut Errors,
) -> CompactString {
    if id.is_empty() || !ids.is_uuid(col) || crate::model::is_canonical_uuid(&id) {
        return id;
    }
    match crate::model::canonical_uuid(&id) {
        Some(c) => c.into(),
        None => {
            errors.push(
                line,
                format!(
                    "{file}:{line}: column {}: {id:?} is not a UUID (the database's {col} is a \
                     uuid column)",
                    col.column()
                ),
            );
            id
        }
    }
}

/// Records `id` (of column `col` at `file:line`) in `index` at position `next`, the row the
/// caller pushes next (`row(j)` reads the id and line of earlier row `j`), unless it is empty
/// or an earlier row has it: then says so in `errors` and returns false.
fn take_id<'r>(
    (index, next): (&mut KeyIndex, usize),
    id: &str,
    (file, line, col): (&str, u64, &str),
    errors: &mut Errors,
    row: impl Fn(u32) -> (&'r str, u64),
) -> bool {
    if id.is_empty() {
        errors.push(line, format!("{file}:{line}: column {col}: empty"));
        return false;
    }
    match index.insert_new(id, next as u32, |j| row(j).0) {
        Some(j) => {
            errors.push(
                line,
                format!("{file}:{line}: {col} {id:?} also at line {}", row(j).1),
            );
            false
        }
        None => true,
    }
}

/// Parses payments (ids as `ids` says the database stores them); also returns the index of
/// their ids (positions in the rows).
fn parse_payments(path: &Path, ids: IdTypes) -> Result<(Rows<PaymentRow>, KeyIndex)> {
    let capacity = estimate_records(path);
    let mut rows: Vec<PaymentRow> = Vec::with_capacity(capacity);
    let mut index = KeyIndex::with_capacity(capacity);
    let mut errors = Errors::default();
    let file = path.display().to_string();
    let names: [&str; 10] =
        std::array::from_fn(|i| PAYMENT_COLUMNS.get(i).copied().unwrap_or(MERCHANT_COLUMN));
    let columns = Columns {
        what: "payments",
        names: &names,
        required: PAYMENT_COLUMNS.len(),
        closed: true,
    };
    let (_, present) = each_record(path, &columns, &mut errors, |line, f, errors| {
        let before = errors.len();
        let payment_id = stored_id(
            normalize::text(f[0]),
            (IdColumn::PaymentId, ids),
            (&file, line),
            errors,
        );
        // A new id takes the next position, and then a row is pushed there below (a
        // placeholder when the line is rejected: the import fails anyway).
        let taken = take_id(
            (&mut index, rows.len()),
            &payment_id,
            (&file, line, "payment_id"),
            errors,
            |j| {
                let r = &rows[j as usize];
                (r.payment_id.as_str(), r.line)
            },
        );
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
        let attempt_id = opt(f[7])
            .map(|a| stored_id(a, (IdColumn::PaymentAttemptId, ids), (&file, line), errors));
        if attempt_id.is_none() && status.is_some_and(|s| s != Status::Pending) {
            errors.push(
                line,
                format!("{file}:{line}: column attempt_id: required unless status is PENDING"),
            );
        }
        let ((currency, amount_minor), status, created_at) = match (money, status, created_at) {
            (Err(e), ..) => {
                errors.push(line, format!("{file}:{line}: columns amount/currency: {e}"));
                (("", 0), Status::Pending, 0)
            }
            (Ok(m), s, c) => (m, s.unwrap_or(Status::Pending), c.unwrap_or(0)),
        };
        debug_assert!(taken || errors.len() > before);
        if taken {
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
                merchant_id: opt(f[9]),
            });
        }
    })?;
    errors.reject_if_any()?;
    let optional = present[PAYMENT_COLUMNS.len()];
    Ok((
        Rows {
            file,
            rows,
            optional,
        },
        index,
    ))
}

/// Attempts, and the lines whose payment is not in the payments file (to be looked up in the
/// database) with their payment ids.
type ParsedAttempts = (Rows<AttemptRow>, Errors, Vec<(u64, CompactString)>);

/// Parses attempts (ids as `ids` says the database stores them); a payment id is known if
/// `in_file` holds it, otherwise it is returned for a look-up in the database.
fn parse_attempts(
    path: &Path,
    in_file: impl Fn(&str) -> bool,
    ids: IdTypes,
) -> Result<ParsedAttempts> {
    let capacity = estimate_records(path);
    let mut rows: Vec<AttemptRow> = Vec::with_capacity(capacity);
    let mut index = KeyIndex::with_capacity(capacity);
    let mut errors = Errors::default();
    let mut elsewhere = Vec::new();
    let file = path.display().to_string();
    let columns = Columns {
        what: "attempts",
        names: &ATTEMPT_COLUMNS,
        required: ATTEMPT_COLUMNS.len(),
        closed: false,
    };
    each_record(path, &columns, &mut errors, |line, f, errors| {
        let attempt_id = stored_id(
            normalize::text(f[0]),
            (IdColumn::AttemptId, ids),
            (&file, line),
            errors,
        );
        // As for payments: a new id takes the next position, and then a row is pushed.
        let taken = take_id(
            (&mut index, rows.len()),
            &attempt_id,
            (&file, line, "attempt_id"),
            errors,
            |j| {
                let r = &rows[j as usize];
                (r.attempt_id.as_str(), r.line)
            },
        );
        let payment_id = stored_id(
            normalize::text(f[1]),
            (IdColumn::AttemptPaymentId, ids),
            (&file, line),
            errors,
        );
        let started_at = ts(&file, line, "started_at", f[2], errors).unwrap_or(0);
        let finished_at = match opt(f[3]) {
            Some(v) => ts(&file, line, "finished_at", &v, errors),
            None => None,
        };
        if !in_file(&payment_id) {
            elsewhere.push((line, payment_id.clone()));
        }
        if taken {
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
        }
    })?;
    let rows = Rows {
        file,
        rows,
        optional: false,
    };
    Ok((rows, errors, elsewhere))
}

/// The positions of `rows` in the byte order of their primary key `key`.
///
/// In this order each primary-key insert lands at the right edge of its B-tree instead of at a
/// random page (ids such as UUIDs arrive in no useful order). The sort compares an 8-byte
/// prefix first (keys hold no NUL: the parser rejects control characters), and reads the whole
/// keys only on a tie.
fn key_order<T>(rows: &[T], key: impl Fn(&T) -> &str) -> Vec<u32> {
    fn prefix(s: &str) -> u64 {
        let mut p = [0u8; 8];
        let n = s.len().min(8);
        p[..n].copy_from_slice(&s.as_bytes()[..n]);
        u64::from_be_bytes(p)
    }
    let mut keyed: Vec<(u64, u32)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (prefix(key(r)), i as u32))
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| key(&rows[a.1 as usize]).cmp(key(&rows[b.1 as usize])))
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The positions of `rows` in the order `L` inserts them.
fn insert_order<L: Ledger, T>(rows: &[T], key: impl Fn(&T) -> &str) -> Vec<u32> {
    if L::KEY_ORDER {
        key_order(rows, key)
    } else {
        (0..rows.len() as u32).collect()
    }
}

/// What the import needs of a database, inside the one transaction it runs in.
trait Ledger {
    /// Whether rows go in in primary-key order ([`key_order`]) rather than in file order.
    const KEY_ORDER: bool;

    /// Which of `ids` are payments in the database.
    async fn payments_in_db(&mut self, ids: &[&str]) -> Result<HashSet<String>>;

    /// Readies the tables for many rows (called once, before the inserts).
    async fn begin_bulk(&mut self) -> Result<()>;

    /// Inserts payments in the order of the positions `order`; `now` is their `updated_at`.
    async fn insert_payments(
        &mut self,
        rows: &Rows<PaymentRow>,
        order: &[u32],
        now: Micros,
    ) -> Result<()>;

    /// Inserts attempts in the order of the positions `order`.
    async fn insert_attempts(&mut self, rows: &Rows<AttemptRow>, order: &[u32]) -> Result<()>;

    /// Undoes what [`Ledger::begin_bulk`] changed (called once, after the inserts).
    async fn end_bulk(&mut self) -> Result<()>;
}

/// Attempts being parsed on a thread of their own while the payments go into the database.
type PendingAttempts = tokio::task::JoinHandle<Result<ParsedAttempts>>;

/// Validates both files completely, then inserts everything in one transaction.
pub async fn import(
    db: &crate::db::Db,
    payments: &Path,
    attempts: Option<&Path>,
) -> Result<ImportReport> {
    let ids = db.id_types().await?;
    let t = std::time::Instant::now();
    let (payments, index) = parse_payments(payments, ids)?;
    tracing::debug!(
        rows = payments.rows.len(),
        ms = t.elapsed().as_millis() as u64,
        "Parsed payments."
    );
    let payments = std::sync::Arc::new(payments);
    let attempts = attempts.map(|path| {
        let (path, payments) = (path.to_path_buf(), payments.clone());
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            let in_file = |id: &str| {
                index
                    .get(id, |j| payments.rows[j as usize].payment_id.as_str())
                    .is_some()
            };
            let parsed = parse_attempts(&path, in_file, ids);
            tracing::debug!(ms = t.elapsed().as_millis() as u64, "Parsed attempts.");
            parsed
        })
    });
    match &db.pool {
        Pool::Sqlite(pool) => sqlite::import(pool, &payments, attempts).await,
        Pool::Postgres(pool) => postgres::import(pool, &payments, attempts, ids).await,
    }
}

/// The checks only the database can make and the inserts, on `ledger` (in a transaction the
/// caller commits when this succeeds).
async fn check_and_insert<L: Ledger>(
    ledger: &mut L,
    payments: &Rows<PaymentRow>,
    attempts: Option<PendingAttempts>,
) -> Result<ImportReport> {
    // Ids already in the database are rejected: an import never overwrites the ledger.
    let ids: Vec<&str> = payments
        .rows
        .iter()
        .map(|r| r.payment_id.as_str())
        .collect();
    let mut existing: Vec<String> = if ids.is_empty() {
        Vec::new()
    } else {
        ledger.payments_in_db(&ids).await?.into_iter().collect()
    };
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
    let t = std::time::Instant::now();
    let order = insert_order::<L, _>(&payments.rows, |r| &r.payment_id);
    ledger.begin_bulk().await?;
    ledger
        .insert_payments(payments, &order, chrono::Utc::now().timestamp_micros())
        .await?;
    drop(order);
    tracing::debug!(
        rows = payments.rows.len(),
        ms = t.elapsed().as_millis() as u64,
        "Inserted the payments."
    );
    let mut attempt_rows = 0;
    if let Some(pending) = attempts {
        let (rows, mut errors, elsewhere) = pending
            .await
            .map_err(|e| fail(Failure::Input, format!("parsing the attempts: {e}")))??;
        // Attempts may also belong to payments imported earlier.
        let ids: HashSet<&str> = elsewhere.iter().map(|(_, id)| id.as_str()).collect();
        let in_db = if ids.is_empty() {
            HashSet::new()
        } else {
            ledger
                .payments_in_db(&ids.into_iter().collect::<Vec<_>>())
                .await?
        };
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
        let t = std::time::Instant::now();
        let order = insert_order::<L, _>(&rows.rows, |r| &r.attempt_id);
        ledger.insert_attempts(&rows, &order).await?;
        tracing::debug!(
            rows = rows.rows.len(),
            ms = t.elapsed().as_millis() as u64,
            "Inserted the attempts."
        );
        attempt_rows = rows.rows.len();
    }
    let t = std::time::Instant::now();
    ledger.end_bulk().await?;
    tracing::debug!(ms = t.elapsed().as_millis() as u64, "Ended the bulk load.");
    Ok(ImportReport {
        payments: payments.rows.len(),
        attempts: attempt_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::key_order;

    #[test]
    fn key_order_is_the_byte_order_of_the_keys() {
        // Short keys, keys sharing an 8-byte prefix, a key that is a prefix of another, and
        // non-ASCII text: the order must be exactly that of sorting the keys themselves.
        let keys = [
            "PAY-0000010",
            "PAY-0000002",
            "b",
            "PAY-00000",
            "",
            "ab",
            "abc",
            "PAY-0000001",
            "9f3c2a1e-0000-4000-8000-000000000001",
            "9f3c2a1e-0000-4000-8000-000000000000",
            "Ünïcode",
            "PAY-0000001x",
            "a",
        ];
        let order = key_order(&keys, |k| k);
        let ordered: Vec<&str> = order.iter().map(|&i| keys[i as usize]).collect();
        let mut expected = keys.to_vec();
        expected.sort();
        assert_eq!(ordered, expected);
        // Every position exactly once.
        let mut seen = order.clone();
        seen.sort();
        assert_eq!(seen, (0..keys.len() as u32).collect::<Vec<_>>());
    }
}
