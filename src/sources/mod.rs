//! Statement sources: each format turns files into canonical [`StatementLine`]s with file and
//! line position, plus the period the source covers completely (DESIGN.md rule 2) and the
//! facts a statement declares about itself ([`StatementFacts`]: period, balances, control
//! totals) for completeness gates.
//!
//! One module per format: [`csv`], [`xlsx`], [`jsonl`], [`parquet`], [`camt`] (camt.053, camt.054 and
//! camt.052), [`mt940`] (MT940 and MT942), [`bai2`] and [`ofx`] (OFX/QFX). Sources know
//! nothing of matching.
//!
//! The files a bank sends back about payouts are no statements: [`pain002`] (ISO 20022
//! payment status reports) and [`nacha`] (ACH returns and notifications of change) read them
//! into [`payout::PayoutStatus`] records, the model [`payout`] defines. Normalisation (trim,
//! width, IBAN spaces, time zone → UTC, currency case, exact minor units) happens here, once.
//!
//! Amounts are signed as booked on the statement's account for the bank formats: credits
//! positive, debits negative; a reversal carries the sign of its own booking (camt
//! `CdtDbtInd`, MT940 `RC` = debit, `RD` = credit) and the kind `REFUND`.
//!
//! Besides the format modules, the loading is split by job: this file holds the line model
//! (what every format produces) and the parser interface; `facts.rs` what a statement declares
//! about itself; `read.rs` one file into a [`SourceLoad`]; `dedupe.rs` re-deliveries across a
//! source's files and the ids of lines without a provider id; `daily.rs` one source over a
//! run's days ([`load`]); `gates.rs` the completeness gates; `coverage.rs` the interval maths,
//! what a file proves and control files; `print.rs` the output of `recon parse`.

pub mod bai2;
pub mod camt;
pub mod config;
pub mod csv;
pub mod jsonl;
pub mod keys;
pub mod limits;
pub mod manifest;
pub mod mt940;
pub mod nacha;
pub mod ofx;
pub mod pain002;
pub mod parquet;
pub mod payout;
pub mod remote;
pub mod tabular;
pub(crate) mod text;
pub mod xlsx;
pub(crate) mod xml;

mod coverage;
mod daily;
mod dedupe;
mod facts;
mod gates;
mod print;
mod read;

use crate::model::{Format, Id, IdText, LineKind, PayoutFormat, Role};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use chrono::NaiveDate;
use compact_str::CompactString;
use config::SourceConfig;
use sha2::{Digest, Sha256};
use std::sync::Arc;

pub use crate::timeparse::{day_booking, days_span};
pub use coverage::{check_control, control_text, covers, merge_intervals, subtract_intervals};
pub use daily::load;
pub use dedupe::{DedupeIndex, assign_line_ids};
pub use facts::{Balance, StatementFacts};
pub use gates::Gate;
pub use limits::InputLimits;
pub use print::{CANONICAL_HEADER, PAYOUT_HEADER, Recipients, print_canonical, print_payouts};
pub use read::{file_or_folder, read_file};
pub use text::TextEncoding;

type ContentKey<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a Id>,
    &'a str,
    i64,
    &'static str,
    Micros,
    LineKind,
);

/// Where a statement's lines come from, shared by all lines of one statement: the lines of a
/// file, or of one account's statement in a file that holds several (camt, MT940, BAI2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// Source name from the config.
    pub source: Arc<str>,
    /// File the lines came from.
    pub file: Arc<str>,
    /// The statement's own account (bank formats), if the file names it. Mask when printed.
    pub account: Option<Arc<str>>,
    /// The partition of the source's lines (an id of the partition module; 0 when the job
    /// has no `[partition]`): set by the run when the source is bound to one.
    pub partition: u32,
}

impl Origin {
    /// A shared origin.
    pub fn new(source: Arc<str>, file: Arc<str>, account: Option<Arc<str>>) -> Arc<Origin> {
        Arc::new(Origin {
            source,
            file,
            account,
            partition: 0,
        })
    }
}

/// Where a line is, as results and reports show it: `source:file name:line` (the file's name
/// without its folder: two daily files of a source differ by name).
pub fn write_source_line(buf: &mut String, origin: &Origin, line_no: u64) {
    buf.push_str(&origin.source);
    buf.push(':');
    let file: &str = &origin.file;
    buf.push_str(file.rsplit(['/', '\\']).next().unwrap_or(file));
    buf.push(':');
    buf.push_str(crate::money::itoa_u64(line_no).as_str());
}

/// A booking as results and reports show it: the UTC instant, or the day of a date-only
/// booking (`2026-11-10`), never a made-up midnight.
pub fn booked_text(booked_at: Micros, booked_day: Option<NaiveDate>) -> String {
    match booked_day {
        Some(d) => d.format("%Y-%m-%d").to_string(),
        None => timeparse::format_utc(booked_at),
    }
}

/// One canonical statement line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementLine {
    /// Source, file and statement account: one shared value per statement (three of them on
    /// every line cost 40 bytes a line).
    pub origin: Arc<Origin>,
    /// 1-based physical line number in that file.
    pub line_no: u64,
    /// The provider's transaction id, if the format has one.
    pub provider_txn_id: Option<CompactString>,
    /// Free-text reference (trimmed, width-folded), if any: often the payment id the provider
    /// echoes, so kept as an [`Id`] (a UUID in 16 bytes).
    pub reference: Option<Id>,
    /// Canonical recipient account (no spaces, upper case).
    pub recipient: CompactString,
    /// Amount in minor units of `currency`.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
    /// Booking instant, UTC microseconds: for a date-only booking, the start of its day.
    pub booked_at: Micros,
    /// The last instant the booking can stand for (inclusive): `booked_at` for a timestamp,
    /// the last microsecond of the day for a date-only booking (DESIGN.md rule 9: a booking
    /// is as precise as its source; windows test overlap with `[booked_at, booked_to]`).
    pub booked_to: Micros,
    /// The day of a date-only booking, in its source's zone (`None`: a timestamp).
    pub booked_day: Option<NaiveDate>,
    /// Payment or refund.
    pub kind: LineKind,
    /// Entry and detail index for XML formats, where a line number alone says little.
    pub entry: Option<EntryRef>,
    /// The provider's settlement batch (csv/xlsx `batch` column): the grouping key of
    /// three-way matching.
    pub batch: Option<CompactString>,
    /// The role of the line's source (set when the source is loaded).
    pub role: Role,
    /// Identity of a line without a provider id (set when its source is loaded, see
    /// [`assign_line_ids`]): 48 bits of its content digest and, above them, its occurrence
    /// among lines of the same content (1, 2, …). 0 for a line identified by its provider id.
    pub content_id: u64,
    /// The amount in the original (foreign) currency, when the statement gives one beside
    /// the account-currency amount (csv/xlsx `original_amount`). Informational: matching
    /// compares `amount_minor` and `currency`, the money that moved on this account.
    pub original: Option<Box<OriginalAmount>>,
}

/// An amount in the currency a line was originally made in (a foreign-currency card payment
/// or transfer booked in the account's currency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginalAmount {
    /// Minor units of `currency`, with the line's own direction (the sign of `amount_minor`).
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
}

/// Where an XML line sits: the n-th entry of the file (1-based) and, for a batch booking split
/// into its transaction details, the detail's index within the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef {
    /// 1-based entry index in the file.
    pub entry: u32,
    /// 1-based transaction detail index within the entry.
    pub detail: Option<u32>,
}

impl StatementLine {
    /// Source name from the config.
    pub fn source(&self) -> &str {
        &self.origin.source
    }

    /// The reference's text.
    pub fn reference(&self) -> Option<IdText<'_>> {
        self.reference.as_ref().map(Id::text)
    }

    /// File the line came from.
    pub fn file(&self) -> &str {
        &self.origin.file
    }

    /// The statement's own account (bank formats), if the file names it. Mask when printed.
    pub fn account(&self) -> Option<&str> {
        self.origin.account.as_deref()
    }

    /// Human position: `file:line` for text formats, `file:entry 3/detail 2` for XML.
    pub fn position(&self) -> String {
        match self.entry {
            None => format!("{}:{}", self.file(), self.line_no),
            Some(EntryRef {
                entry,
                detail: None,
            }) => format!("{}:entry {entry}", self.file()),
            Some(EntryRef {
                entry,
                detail: Some(d),
            }) => format!("{}:entry {entry}/detail {d}", self.file()),
        }
    }

    /// Where the line is, as results and reports show it: `source:file name:line` (the
    /// file's name without its folder: two daily files of a source differ by name).
    pub fn write_source_line(&self, buf: &mut String) {
        write_source_line(buf, &self.origin, self.line_no);
    }

    /// [`StatementLine::write_source_line`] as a new string.
    pub fn source_line(&self) -> String {
        let mut s = String::with_capacity(48);
        self.write_source_line(&mut s);
        s
    }

    /// The booking as results and reports show it: the UTC instant, or the day of a
    /// date-only booking (`2026-11-10`), never a made-up midnight.
    pub fn booked_text(&self) -> String {
        booked_text(self.booked_at, self.booked_day)
    }

    /// Whether the booking can lie in `[from, to]` (inclusive): overlap of the window with
    /// the booking's own interval.
    pub fn booked_within(&self, from: Micros, to: Micros) -> bool {
        self.booked_at <= to && self.booked_to >= from
    }

    /// The amount as the ledger sees it. A bank books a payment we sent as a debit, so for a
    /// bank line this is the negated booked amount; a provider line's is the booked amount.
    /// `amount_minor` keeps the booked sign for display.
    pub fn ledger_amount(&self) -> i64 {
        match self.role {
            Role::Provider => self.amount_minor,
            Role::Bank => self.amount_minor.saturating_neg(),
        }
    }

    /// Whether the line can be one of our payments in ledger matching: a `PAYMENT` line, and
    /// on a bank account only a debit (a bank credit is money coming in: a provider payout,
    /// matched three-way against settlement batches instead).
    pub fn ledger_candidate(&self) -> bool {
        self.kind == LineKind::Payment && (self.role == Role::Provider || self.amount_minor < 0)
    }

    /// Whether the line is a credit on our bank account that three-way matching explains
    /// (a provider payout).
    pub fn bank_credit(&self) -> bool {
        self.role == Role::Bank && self.kind == LineKind::Payment && self.amount_minor > 0
    }

    /// Stable fingerprint of the line's content, independent of file and position: what
    /// identifies a re-delivered line when the format has no transaction id.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        let reference = self.reference();
        for part in [
            self.account().unwrap_or(""),
            self.provider_txn_id.as_deref().unwrap_or(""),
            reference.as_deref().unwrap_or(""),
            &self.recipient,
            &self.amount_minor.to_string(),
            self.currency,
            &self.booked_at.to_string(),
            self.kind.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update([0x1f]);
        }
        hex::encode(&h.finalize()[..16])
    }

    fn content_key(&self) -> ContentKey<'_> {
        (
            self.account(),
            self.provider_txn_id.as_deref(),
            self.reference.as_ref(),
            &self.recipient,
            self.amount_minor,
            self.currency,
            self.booked_at,
            self.kind,
        )
    }

    /// Stable identity for results and ticket keys: the provider id, or `source#<content id>`
    /// ([`assign_line_ids`]): unique across the source's files and the same when a file is
    /// delivered again (a position alone is neither: line 2 of two daily files would share it).
    pub fn uid(&self) -> std::borrow::Cow<'_, str> {
        match &self.provider_txn_id {
            Some(id) => id.as_str().into(),
            None if self.content_id != 0 => {
                let (digest, n) = (self.content_id & 0xFFFF_FFFF_FFFF, self.content_id >> 48);
                if n <= 1 {
                    format!("{}#{digest:012x}", self.source()).into()
                } else {
                    format!("{}#{digest:012x}.{n}", self.source()).into()
                }
            }
            None => format!("{}#L{}", self.source(), self.line_no).into(),
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Rows whose booking status is not booked (pending, authorised…): not loaded.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub not_booked: usize,
    /// Rows that are not statement lines (`skip_rows`, `skip_zero_amounts`: notices, balance
    /// rows): not loaded, and no reason to doubt the file's completeness.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub skipped: usize,
}

/// A statement file that is there but could not be read or parsed (an empty or truncated
/// file, a header that does not fit the mapping, bytes that are no statement). Nothing it
/// holds is used, and the days it stands for are not complete (DESIGN.md rule 2): the run
/// reconciles everything else and names the file as critical (exit code
/// [`crate::exit::INPUT_UNREADABLE`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unreadable {
    /// Source name.
    pub source: String,
    /// Path.
    pub path: String,
    /// The days it stands for, `YYYY-MM-DD..YYYY-MM-DD` (inclusive), or `?` for a fixed file
    /// without `complete_from` / `complete_to`.
    pub period: String,
    /// Why it could not be read (file, line and column where known).
    pub error: String,
}

impl InputFile {
    /// File `path` of source `source`, with nothing read from it yet (no sha256, no lines).
    pub fn new(source: &str, path: String) -> InputFile {
        InputFile {
            source: source.to_string(),
            path,
            sha256: String::new(),
            lines: 0,
            rejected: 0,
            duplicates: 0,
            not_booked: 0,
            skipped: 0,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
    /// What each statement in the files declared about itself.
    pub facts: Vec<StatementFacts>,
    /// Re-delivery index over `lines` (see [`SourceLoad::add`]).
    pub dedupe: DedupeIndex,
    /// Completeness gates checked while loading (see [`Gate`]).
    pub gates: Vec<Gate>,
    /// What was read but is no statement line, for people (rows skipped by `skip_rows`);
    /// unlike `warnings` no doubt about completeness.
    pub notes: Vec<String>,
    /// Files that are there but could not be read: their periods are not covered.
    pub unreadable: Vec<Unreadable>,
}

/// What a bank-format parser produced from one file.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Canonical lines in file order.
    pub lines: Vec<StatementLine>,
    /// One entry per statement in the file.
    pub facts: Vec<StatementFacts>,
}

/// What a parser needs besides the bytes.
#[derive(Debug, Clone)]
pub struct ParseContext {
    /// Source name for the lines.
    pub source: Arc<str>,
    /// File path as shown in positions and errors.
    pub file: Arc<str>,
    /// Zone of dates and times without an offset.
    pub timezone: chrono_tz::Tz,
    /// Text encoding (`None`: strict UTF-8).
    pub encoding: Option<TextEncoding>,
}

impl ParseContext {
    /// The context for reading `file` as source `cfg`.
    pub fn new(cfg: &SourceConfig, file: &str) -> ParseContext {
        ParseContext {
            source: Arc::from(cfg.name.as_str()),
            file: Arc::from(file),
            timezone: cfg.timezone,
            encoding: cfg.settings.encoding(),
        }
    }

    /// An input error naming the file and a position.
    pub fn error(
        &self,
        position: impl std::fmt::Display,
        msg: impl std::fmt::Display,
    ) -> anyhow::Error {
        crate::exit::fail(
            crate::exit::Failure::Input,
            format!("{}:{position}: {msg}", self.file),
        )
    }
}

/// Parses the bytes of one file of a bank format. Any problem rejects the whole file with
/// its position: bank files are read whole or not at all.
pub fn parse_bank_bytes(format: Format, ctx: &ParseContext, bytes: &[u8]) -> Result<Parsed> {
    match format {
        Format::Camt053 | Format::Camt054 | Format::Camt052 => camt::parse(ctx, bytes, format),
        Format::Mt940 => mt940::parse(ctx, bytes),
        Format::Bai2 => bai2::parse(ctx, bytes),
        Format::Ofx => ofx::parse(ctx, bytes),
        Format::Csv | Format::Xlsx | Format::Jsonl | Format::Parquet => Err(ctx.error(
            "1",
            format!("{format} is not a bank format (it needs a column mapping)"),
        )),
    }
}

/// Reads one payout status file of `format` (pain.002, NACHA) whole, within `limits` (its
/// size and line length): its [`payout::PayoutStatus`] records, or an error naming the file,
/// the line and the element or field.
pub fn read_payout_file(
    format: PayoutFormat,
    path: &std::path::Path,
    limits: &InputLimits,
) -> Result<payout::PayoutFile> {
    let file: Arc<str> = Arc::from(path.display().to_string());
    let bytes = limits.read(path)?;
    parse_payout_bytes(format, &file, &bytes, limits)
}

/// Parses the bytes of one payout status file (see [`read_payout_file`]).
pub fn parse_payout_bytes(
    format: PayoutFormat,
    file: &Arc<str>,
    bytes: &[u8],
    limits: &InputLimits,
) -> Result<payout::PayoutFile> {
    limits.check_lines(file, bytes, 1)?;
    match format {
        PayoutFormat::Pain002 => pain002::parse(file, bytes),
        PayoutFormat::Nacha => nacha::parse(file, bytes),
    }
}

/// Appends `more` to `all`, moving it when `all` is empty instead of copying every element
/// (a million statement lines are ~200 MB).
pub fn absorb<T>(all: &mut Vec<T>, more: Vec<T>) {
    if all.is_empty() {
        *all = more;
    } else {
        all.extend(more);
    }
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// At most 80 bytes of `s` for a message, with its length when it was cut.
pub(crate) fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    crate::exit::cut_to(s, 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run holds every statement line of its horizon (millions at 10M payments): a field
    /// added to the line costs its size that many times, so growing it is a decision.
    #[test]
    fn a_statement_line_stays_within_192_bytes() {
        assert!(
            std::mem::size_of::<StatementLine>() <= 192,
            "StatementLine is {} bytes",
            std::mem::size_of::<StatementLine>()
        );
    }
}
