//! Statement sources: each format turns files into canonical [`StatementLine`]s with file and
//! line position, plus the period the source covers completely (DESIGN.md rule 2) and the
//! facts a statement declares about itself ([`StatementFacts`]: period, balances, control
//! totals) for completeness gates.
//!
//! One module per format: [`csv`], [`xlsx`], [`camt`] (camt.053 and camt.054), [`mt940`]
//! (MT940 and MT942) and [`bai2`]. Sources know nothing of matching. Normalisation (trim,
//! width, IBAN spaces, time zone → UTC, currency case, exact minor units) happens here, once.
//!
//! Amounts are signed as booked on the statement's account for the bank formats: credits
//! positive, debits negative; a reversal carries the sign of its own booking (camt
//! `CdtDbtInd`, MT940 `RC` = debit, `RD` = credit) and the kind `REFUND`.

pub mod bai2;
pub mod camt;
pub mod config;
pub mod csv;
pub mod manifest;
pub mod mt940;
pub mod remote;
pub mod tabular;
pub(crate) mod text;
pub mod xlsx;

use crate::model::{Format, LineKind, Role};
use crate::timeparse::{self, Micros};
use anyhow::Result;
use chrono::NaiveDate;
use compact_str::CompactString;
use config::{Completeness, FormatSettings, SourceConfig, SourcePath};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
pub use text::TextEncoding;

type ContentKey<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    i64,
    &'static str,
    Micros,
    LineKind,
);

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
    pub provider_txn_id: Option<CompactString>,
    /// Free-text reference (trimmed, width-folded), if any.
    pub reference: Option<CompactString>,
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
    /// The statement's own account (bank formats), if the file names it. Mask when printed.
    pub account: Option<Arc<str>>,
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
    /// Human position: `file:line` for text formats, `file:entry 3/detail 2` for XML.
    pub fn position(&self) -> String {
        match self.entry {
            None => format!("{}:{}", self.file, self.line_no),
            Some(EntryRef {
                entry,
                detail: None,
            }) => format!("{}:entry {entry}", self.file),
            Some(EntryRef {
                entry,
                detail: Some(d),
            }) => format!("{}:entry {entry}/detail {d}", self.file),
        }
    }

    /// Where the line is, as results and reports show it: `source:file name:line` (the
    /// file's name without its folder: two daily files of a source differ by name).
    pub fn write_source_line(&self, buf: &mut String) {
        buf.push_str(&self.source);
        buf.push(':');
        let file: &str = &self.file;
        buf.push_str(file.rsplit(['/', '\\']).next().unwrap_or(file));
        buf.push(':');
        buf.push_str(crate::money::itoa_u64(self.line_no).as_str());
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
        match self.booked_day {
            Some(d) => d.format("%Y-%m-%d").to_string(),
            None => timeparse::format_utc(self.booked_at),
        }
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
        for part in [
            self.account.as_deref().unwrap_or(""),
            self.provider_txn_id.as_deref().unwrap_or(""),
            self.reference.as_deref().unwrap_or(""),
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
            self.account.as_deref(),
            self.provider_txn_id.as_deref(),
            self.reference.as_deref(),
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
                    format!("{}#{digest:012x}", self.source).into()
                } else {
                    format!("{}#{digest:012x}.{n}", self.source).into()
                }
            }
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
    /// Rows whose booking status is not booked (pending, authorised…): not loaded.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_booked: usize,
    /// Rows that are not statement lines (`skip_rows`, `skip_zero_amounts`: notices, balance
    /// rows): not loaded, and no reason to doubt the file's completeness.
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: usize,
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
}

/// One completeness gate (DESIGN.md rule 2, issue 4 point 4): a check of what a statement
/// declares about itself, or of an expected daily file. A failed gate removes the period it
/// names from the source's coverage, so no payment whose window it touches is resolved FAILED.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Gate {
    /// Source name.
    pub source: String,
    /// File (or the expected path of a missing daily file).
    pub file: String,
    /// Days checked, `YYYY-MM-DD..YYYY-MM-DD` (inclusive), or `?` when the statement names none.
    pub period: String,
    /// `balance_chain`, `control_totals`, `continuity` or `daily_file`.
    pub check: &'static str,
    /// Whether the check passed.
    pub ok: bool,
    /// What was compared (amounts, counts, position).
    pub detail: String,
}

impl Gate {
    /// The completeness warning a failed gate adds to the summary.
    pub fn warning(&self) -> String {
        format!(
            "source {}: {} gate failed for {} ({}): {}; this period is not treated as complete",
            self.source, self.check, self.file, self.period, self.detail
        )
    }
}

/// Checks the statements of one file (`facts`) and records a gate per check. Returns the UTC
/// intervals a failed gate removes from coverage: the failed statement's period, or `file_span`
/// (what the file alone would cover) when the statement names no period.
fn statement_gates(
    cfg: &SourceConfig,
    facts: &[StatementFacts],
    file_span: Option<(Micros, Micros)>,
    gates: &mut Vec<Gate>,
) -> Vec<(Micros, Micros)> {
    let mut holes = Vec::new();
    for f in facts {
        let period = match (f.from, f.to) {
            (Some(a), Some(b)) => format!("{a}..{b}"),
            _ => "?".to_string(),
        };
        let span = match (f.from, f.to) {
            (Some(a), Some(b)) => Some(days_span(a, b, cfg.timezone)),
            _ => file_span,
        };
        let cur = f
            .currency
            .or(f.opening.map(|b| b.currency))
            .unwrap_or("EUR");
        let money = |m: i64| crate::money::format_minor(m, cur);
        let mut checks: Vec<(&'static str, bool, String)> = Vec::new();
        if let Some(ok) = f.balance_chains()
            && let (Some(o), Some(c)) = (f.opening, f.closing)
        {
            let got = o.amount_minor.saturating_add(f.entries_sum);
            checks.push((
                "balance_chain",
                ok,
                format!(
                    "{}: opening {} + {} entries {} = {}, closing {} {cur} (difference {})",
                    f.position,
                    money(o.amount_minor),
                    f.entries,
                    money(f.entries_sum),
                    money(got),
                    money(c.amount_minor),
                    money(c.amount_minor.saturating_sub(got)),
                ),
            ));
        }
        if let Some(ok) = f.declared_totals_agree() {
            let mut parts = vec![format!("{}: {} entries", f.position, f.entries)];
            if let Some(n) = f.declared_entries {
                parts.push(format!("declared {n}"));
            }
            if let Some(n) = f.declared_net {
                parts.push(format!(
                    "net {} declared {}",
                    money(f.entries_sum),
                    money(n)
                ));
            }
            if let Some(n) = f.declared_gross {
                parts.push(format!(
                    "gross {} declared {}",
                    money(f.entries_gross),
                    money(n)
                ));
            }
            parts.extend(f.control_problems.iter().cloned());
            checks.push(("control_totals", ok, parts.join("; ")));
        }
        for (check, ok, detail) in checks {
            if !ok && let Some(h) = span {
                holes.push(h);
            }
            gates.push(Gate {
                source: cfg.name.clone(),
                file: f.file.clone(),
                period: period.clone(),
                check,
                ok,
                detail,
            });
        }
    }
    holes
}

/// Continuity across a source's statements (DESIGN.md rule 2): for each account and currency,
/// consecutive statements (by period, re-deliveries counted once, overlapping periods skipped)
/// must hand over the balance — one's closing is the next one's opening. If not, entries are
/// missing somewhere in the two statements or between them, so both periods and the gap lose
/// their coverage.
fn continuity_gates(
    cfg: &SourceConfig,
    facts: &[StatementFacts],
    gates: &mut Vec<Gate>,
) -> Vec<(Micros, Micros)> {
    type Key<'f> = (Option<&'f str>, &'static str);
    let mut by_account: std::collections::BTreeMap<Key<'_>, Vec<&StatementFacts>> =
        Default::default();
    for f in facts {
        let (Some(_), Some(_), Some(o), Some(c)) = (f.from, f.to, f.opening, f.closing) else {
            continue;
        };
        if o.currency != c.currency {
            continue;
        }
        by_account
            .entry((f.account.as_deref(), o.currency))
            .or_default()
            .push(f);
    }
    let mut holes = Vec::new();
    for ((_, cur), mut list) in by_account {
        let key = |f: &StatementFacts| {
            (
                f.from,
                f.to,
                f.opening.map(|b| b.amount_minor),
                f.closing.map(|b| b.amount_minor),
            )
        };
        list.sort_by_key(|f| key(f));
        list.dedup_by(|a, b| key(a) == key(b));
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let (Some(pf), Some(pt), Some(nf), Some(nt)) = (prev.from, prev.to, next.from, next.to)
            else {
                continue;
            };
            if nf <= pt {
                continue; // overlapping periods: not a hand-over
            }
            let (Some(closing), Some(opening)) = (prev.closing, next.opening) else {
                continue;
            };
            let ok = closing.amount_minor == opening.amount_minor;
            let money = |m: i64| crate::money::format_minor(m, cur);
            if !ok {
                holes.push(days_span(pf, nt, cfg.timezone));
            }
            gates.push(Gate {
                source: cfg.name.clone(),
                file: next.file.clone(),
                period: format!("{pf}..{nt}"),
                check: "continuity",
                ok,
                detail: format!(
                    "{} closes {} {cur}, {} opens {} {cur} (difference {})",
                    prev.position,
                    money(closing.amount_minor),
                    next.position,
                    money(opening.amount_minor),
                    money(opening.amount_minor.saturating_sub(closing.amount_minor)),
                ),
            });
        }
    }
    holes
}

/// Removes `holes` from merged `coverage` (both half-open); the result is merged and sorted.
pub fn subtract_intervals(
    coverage: Vec<(Micros, Micros)>,
    holes: &[(Micros, Micros)],
) -> Vec<(Micros, Micros)> {
    let holes = merge_intervals(holes.to_vec());
    let mut out = Vec::new();
    for (mut a, b) in coverage {
        for &(h0, h1) in &holes {
            if h1 <= a || h0 >= b {
                continue;
            }
            if h0 > a {
                out.push((a, h0));
            }
            a = a.max(h1);
            if a >= b {
                break;
            }
        }
        if a < b {
            out.push((a, b));
        }
    }
    merge_intervals(out)
}

/// A balance a statement declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Balance {
    /// Signed minor units (credit positive).
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
    /// The day the balance is for, if given.
    pub date: Option<NaiveDate>,
}

/// What one statement (camt `Stmt`/`Ntfctn`, MT940 `:20:` block, BAI2 account) declares about
/// itself and what its entries add up to. The run's completeness gates use these facts; the
/// parsers only report them. A balance that does not chain is a fact, not a parse error
/// (excerpts and notifications legitimately do not chain).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatementFacts {
    /// File path.
    pub file: String,
    /// Where the statement starts (`line 12`, `statement 2`).
    pub position: String,
    /// The statement's own id (camt `Id`, MT940 `:20:`, BAI2 group originator), if any.
    pub statement_id: Option<String>,
    /// The statement's account as written (mask when printing).
    pub account: Option<String>,
    /// Account currency, when the statement names one.
    pub currency: Option<&'static str>,
    /// First day covered (statement period, or the booking day).
    pub from: Option<NaiveDate>,
    /// Last day covered (inclusive).
    pub to: Option<NaiveDate>,
    /// Opening booked balance (camt OPBD/PRCD, MT940 :60F:/:60M:, BAI2 010).
    pub opening: Option<Balance>,
    /// Closing booked balance (camt CLBD, MT940 :62F:/:62M:, BAI2 015).
    pub closing: Option<Balance>,
    /// Booked entries seen (a batch entry counts once, whatever its details).
    pub entries: u64,
    /// Signed sum of the booked entries, in minor units of `currency`.
    pub entries_sum: i64,
    /// Number of entries the statement declares (camt TxsSummry, MT942 :90D:+:90C:).
    pub declared_entries: Option<u64>,
    /// Net sum the statement declares (camt TtlNetNtry, MT942 :90C: − :90D:).
    pub declared_net: Option<i64>,
    /// Sum of the entries' absolute amounts, as the statement declares it (camt
    /// TtlNtries/Sum, MT942 :90C: + :90D:).
    pub declared_gross: Option<i64>,
    /// Sum of the booked entries' absolute amounts.
    pub entries_gross: i64,
    /// Whether the format carries control totals that were checked (BAI2 49/98/99).
    pub control_totals_checked: bool,
    /// Control totals or counts that did not agree (a failed completeness fact, not a parse
    /// error: the lines themselves were read whole).
    pub control_problems: Vec<String>,
    /// Entries present but not loaded, with why (e.g. camt entries with status PDNG).
    pub not_loaded: Vec<String>,
}

impl StatementFacts {
    /// A statement with only its file and position known.
    pub fn new(file: &str, position: String) -> StatementFacts {
        StatementFacts {
            file: file.to_string(),
            position,
            statement_id: None,
            account: None,
            currency: None,
            from: None,
            to: None,
            opening: None,
            closing: None,
            entries: 0,
            entries_sum: 0,
            declared_entries: None,
            declared_net: None,
            declared_gross: None,
            entries_gross: 0,
            control_totals_checked: false,
            control_problems: Vec::new(),
            not_loaded: Vec::new(),
        }
    }

    /// Whether opening + entries = closing; `None` when a balance is missing or currencies
    /// differ.
    pub fn balance_chains(&self) -> Option<bool> {
        let (o, c) = (self.opening?, self.closing?);
        if o.currency != c.currency || self.currency.is_some_and(|cur| cur != o.currency) {
            return None;
        }
        Some(o.amount_minor.checked_add(self.entries_sum) == Some(c.amount_minor))
    }

    /// Whether the declared entry count and net sum agree with the entries; `None` when the
    /// statement declares neither.
    pub fn declared_totals_agree(&self) -> Option<bool> {
        if self.declared_entries.is_none()
            && self.declared_net.is_none()
            && self.declared_gross.is_none()
            && !self.control_totals_checked
        {
            return None;
        }
        Some(
            self.control_problems.is_empty()
                && self.declared_entries.is_none_or(|n| n == self.entries)
                && self.declared_net.is_none_or(|n| n == self.entries_sum)
                && self.declared_gross.is_none_or(|n| n == self.entries_gross),
        )
    }

    /// One line for humans (`recon parse` prints it to stderr). The account is masked.
    pub fn describe(&self) -> String {
        let money = |b: &Option<Balance>| match b {
            Some(b) => format!(
                "{} {}{}",
                crate::money::format_minor(b.amount_minor, b.currency),
                b.currency,
                b.date.map(|d| format!(" on {d}")).unwrap_or_default()
            ),
            None => "-".to_string(),
        };
        let yn = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        };
        let cur = self.currency.unwrap_or("");
        let mut s = format!(
            "{}:{}: statement {} account {} period {}..{}: opening {}, closing {}, {} entries summing {} {cur}; balances chain: {}; declared totals agree: {}{}",
            self.file,
            self.position,
            self.statement_id.as_deref().unwrap_or("-"),
            self.account
                .as_deref()
                .map(crate::mask::account)
                .unwrap_or_else(|| "-".into()),
            self.from
                .map(|d| d.to_string())
                .unwrap_or_else(|| "?".into()),
            self.to.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
            money(&self.opening),
            money(&self.closing),
            self.entries,
            crate::money::format_minor(self.entries_sum, if cur.is_empty() { "EUR" } else { cur }),
            yn(self.balance_chains()),
            yn(self.declared_totals_agree()),
            if self.control_totals_checked {
                "; control totals checked"
            } else {
                ""
            },
        );
        for p in &self.control_problems {
            s.push_str("; control total problem: ");
            s.push_str(p);
        }
        for n in &self.not_loaded {
            s.push_str("; not loaded: ");
            s.push_str(n);
        }
        s
    }
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
        Format::Camt053 | Format::Camt054 => camt::parse(ctx, bytes, format),
        Format::Mt940 => mt940::parse(ctx, bytes),
        Format::Bai2 => bai2::parse(ctx, bytes),
        Format::Csv | Format::Xlsx => Err(ctx.error(
            "1",
            format!("{format} is not a bank format (it needs a column mapping)"),
        )),
    }
}

/// Reads one file of source `cfg` into `load`: lines (re-deliveries dropped, see
/// [`SourceLoad::add`]), rejected lines, statement facts and the file record. Returns whether
/// every line was accepted.
pub fn read_file(cfg: &SourceConfig, path: &Path, load: &mut SourceLoad) -> Result<bool> {
    match &cfg.settings {
        FormatSettings::Csv(_) | FormatSettings::Xlsx(_) => {
            let mut one = SourceLoad::default();
            let clean = if cfg.format() == Format::Csv {
                csv::read_file(cfg, path, &mut one)?
            } else {
                xlsx::read_file(cfg, path, &mut one)?
            };
            let mut file = one.files.pop().unwrap_or_else(|| InputFile {
                source: cfg.name.clone(),
                path: path.display().to_string(),
                sha256: String::new(),
                lines: 0,
                rejected: 0,
                duplicates: 0,
                not_booked: 0,
                skipped: 0,
            });
            let dropped_before = file.duplicates;
            for l in &mut one.lines {
                l.role = cfg.role;
            }
            let (lines, bad) = without_control_characters(std::mem::take(&mut one.lines));
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
        settings => {
            let format = settings.format();
            let file = path.display().to_string();
            let bytes = std::fs::read(path).map_err(|e| {
                crate::exit::fail(
                    crate::exit::Failure::Input,
                    format!("{file}: cannot read: {e}"),
                )
            })?;
            let ctx = ParseContext::new(cfg, &file);
            let mut parsed = parse_bank_bytes(format, &ctx, &bytes)?;
            for l in &mut parsed.lines {
                l.role = cfg.role;
            }
            let (lines, bad) = without_control_characters(parsed.lines);
            let total = lines.len();
            let (kept, rejected) = load.add(lines, false);
            debug_assert!(rejected.is_empty());
            load.files.push(InputFile {
                source: cfg.name.clone(),
                path: file,
                sha256: sha256_hex(&bytes),
                lines: kept,
                rejected: bad.len(),
                duplicates: total - kept,
                not_booked: 0,
                skipped: 0,
            });
            load.facts.extend(parsed.facts);
            let clean = bad.is_empty();
            load.rejected.extend(bad);
            Ok(clean)
        }
    }
}

/// Splits off the lines whose text holds a control character ([`text::control_character`]),
/// as rejected lines at their own file and line: the same on every database (PostgreSQL
/// refuses NUL in text) and in every report.
fn without_control_characters(lines: Vec<StatementLine>) -> (Vec<StatementLine>, Vec<Rejected>) {
    let reason = |l: &StatementLine| {
        [
            ("provider_txn_id", l.provider_txn_id.as_deref()),
            ("reference", l.reference.as_deref()),
            ("recipient", Some(l.recipient.as_str())),
            ("batch", l.batch.as_deref()),
            ("account", l.account.as_deref()),
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
                    source: l.source.to_string(),
                    file: l.file.to_string(),
                    line: l.line_no,
                    reason,
                });
                false
            }
        })
        .collect();
    (kept, bad)
}

impl SourceLoad {
    /// Adds the lines of one file, dropping re-deliveries of lines already loaded from
    /// earlier files of this source (DESIGN.md rule 4, issue 4 point 5):
    /// - with `ids_unique` (csv/xlsx with a provider id column), a line whose account and
    ///   provider id were loaded before is dropped when its content is the same, and rejected
    ///   when it differs (two different lines cannot share one provider id);
    /// - otherwise (and for lines without an id) lines are compared by content
    ///   ([`StatementLine::fingerprint`]), as multisets: a file that repeats k lines an
    ///   earlier file had adds only what goes beyond them. Identical lines within one file are
    ///   all kept: two equal fees on one day are two fees.
    ///
    /// Returns the number of lines kept and the rejected ones.
    pub fn add(&mut self, lines: Vec<StatementLine>, ids_unique: bool) -> (usize, Vec<Rejected>) {
        use foldhash::{HashMap, HashMapExt};
        // Bring the index up to date with lines loaded without it (the first file).
        let idx = &mut self.dedupe;
        for (i, l) in self.lines.iter().enumerate().skip(idx.indexed) {
            match (&l.provider_txn_id, ids_unique) {
                (Some(id), true) => {
                    idx.by_id.insert((l.account.clone(), id.clone()), i);
                }
                _ => *idx.by_content.entry(l.fingerprint()).or_insert(0) += 1,
            }
        }
        idx.indexed = self.lines.len();
        if self.lines.is_empty() {
            // Nothing loaded yet: nothing to compare with (the index is built on demand).
            let n = lines.len();
            self.lines = lines;
            return (n, Vec::new());
        }
        // Per file: how many loaded copies of a content this file has matched, and how many
        // it added itself (those are not available to its own later lines).
        let mut matched: HashMap<String, usize> = HashMap::new();
        let mut added: HashMap<String, usize> = HashMap::new();
        let mut rejected = Vec::new();
        let mut kept = 0usize;
        for l in lines {
            match (&l.provider_txn_id, ids_unique) {
                (Some(id), true) => {
                    let key = (l.account.clone(), id.clone());
                    if let Some(&i) = idx.by_id.get(&key) {
                        let first = &self.lines[i];
                        if first.content_key() != l.content_key() {
                            rejected.push(Rejected {
                                source: l.source.to_string(),
                                file: l.file.to_string(),
                                line: l.line_no,
                                reason: format!(
                                    "provider_txn_id {id:?} already loaded from {} with different content",
                                    first.position()
                                ),
                            });
                        }
                        continue;
                    }
                    idx.by_id.insert(key, self.lines.len());
                }
                _ => {
                    let fp = l.fingerprint();
                    let loaded = idx.by_content.get(&fp).copied().unwrap_or(0);
                    let own = added.get(&fp).copied().unwrap_or(0);
                    let m = matched.entry(fp.clone()).or_insert(0);
                    if *m < loaded - own {
                        *m += 1;
                        continue;
                    }
                    *idx.by_content.entry(fp.clone()).or_insert(0) += 1;
                    *added.entry(fp).or_insert(0) += 1;
                }
            }
            kept += 1;
            self.lines.push(l);
        }
        idx.indexed = self.lines.len();
        (kept, rejected)
    }
}

/// What [`SourceLoad::add`] has seen, kept between files so each file costs its own size.
#[derive(Debug, Clone, Default)]
pub struct DedupeIndex {
    by_id: foldhash::HashMap<(Option<Arc<str>>, CompactString), usize>,
    by_content: foldhash::HashMap<String, usize>,
    indexed: usize,
}

/// Gives every line without a provider id its content id ([`StatementLine::content_id`]): the
/// first 12 hex digits of its content fingerprint, and `.N` for the N-th line of the same
/// content in the source (two equal fees on one day are two lines). Position plays no part,
/// so a re-delivered or re-ordered file names its lines the same.
pub fn assign_line_ids(lines: &mut [StatementLine]) {
    let mut seen: foldhash::HashMap<u64, u64> = Default::default();
    for l in lines.iter_mut().filter(|l| l.provider_txn_id.is_none()) {
        let fp = l.fingerprint();
        let digest = u64::from_str_radix(&fp[..12], 16).unwrap_or(0);
        let n = seen.entry(digest).or_insert(0);
        *n = (*n + 1).min(0xFFFF);
        l.content_id = (*n << 48) | digest;
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

/// The days `from..=to` in `tz` as a half-open UTC interval `[first start, after last)`.
pub fn days_span(from: NaiveDate, to: NaiveDate, tz: chrono_tz::Tz) -> (Micros, Micros) {
    (
        timeparse::day_start(from, tz),
        timeparse::day_start(to.succ_opt().unwrap_or(to), tz),
    )
}

/// The booking interval `[start, end]` (inclusive, UTC) of a date-only booking on `day` in
/// `tz`: the whole local day.
pub fn day_booking(day: NaiveDate, tz: chrono_tz::Tz) -> (Micros, Micros) {
    let (start, next) = days_span(day, day, tz);
    (start, next - 1)
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Loads one configured source. Daily (`{date}`) sources read one file per day in `days`;
/// a day that has not ended by `as_of` is read when its file is there, and not asked for when
/// it is not (its file cannot be complete yet). A failure to read a file that exists is an
/// error (exit code for inputs); a missing daily file only narrows coverage.
///
/// Coverage rests on what each file proves ([`Completeness`], DESIGN.md rule 2): a file that
/// proves nothing — no control file, out of booking order, empty without `empty_file =
/// "no_activity"`, a statement without balances or control totals — covers nothing.
pub fn load(cfg: &SourceConfig, days: (NaiveDate, NaiveDate), as_of: Micros) -> Result<SourceLoad> {
    let mut load = SourceLoad::default();
    let mut coverage = Vec::new();
    let mut holes = Vec::new();
    let span_of = |from: NaiveDate, to: NaiveDate| days_span(from, to, cfg.timezone);
    match &cfg.path {
        SourcePath::Fixed { path, complete } => {
            let span = complete.map(|(from, to)| span_of(from, to));
            holes.extend(pull_holes(cfg, None, span, &mut load));
            // A remote file that was never pulled (missing at the server) proves nothing; a
            // local fixed file that is missing is an input error, as before.
            let unpulled = cfg.remote.is_some() && !path.exists();
            if unpulled {
                load.warnings.push(format!(
                    "source {}: no pulled copy of its file ({}), so absence of a line never proves a failure",
                    cfg.name,
                    path.display()
                ));
            }
            for path in pulled_versions(cfg, path).iter().filter(|_| !unpulled) {
                let path = path.as_path();
                let (lines0, facts0) = (load.lines.len(), load.facts.len());
                let clean = read_file(cfg, path, &mut load)?;
                holes.extend(statement_gates(
                    cfg,
                    &load.facts[facts0..],
                    span,
                    &mut load.gates,
                ));
                match span {
                Some(span) if clean => {
                    coverage.extend(prove(cfg, path, span, &mut load, lines0, facts0));
                }
                Some(_) => load.warnings.push(format!(
                    "source {}: {} has rejected or not-booked lines, so it is not treated as complete",
                    cfg.name,
                    path.display()
                )),
                None => load.warnings.push(format!(
                    "source {}: no complete_from/complete_to declared, so absence of a line never proves a failure",
                    cfg.name
                )),
            }
            }
        }
        SourcePath::Daily(template) => {
            let mut day = days.0;
            while day <= days.1 {
                let path_text = template.replace("{date}", &day.format("%Y-%m-%d").to_string());
                let path = Path::new(&path_text);
                let span = span_of(day, day);
                let ended = span.1 <= as_of;
                let present = path.exists();
                holes.extend(pull_holes(cfg, Some(day), Some(span), &mut load));
                if ended || present {
                    load.gates.push(Gate {
                        source: cfg.name.clone(),
                        file: path_text.clone(),
                        period: format!("{day}..{day}"),
                        check: "daily_file",
                        ok: present,
                        detail: if present {
                            "present".to_string()
                        } else {
                            "expected daily file is missing".to_string()
                        },
                    });
                }
                for path in pulled_versions(cfg, path).iter().filter(|_| present) {
                    let path = path.as_path();
                    let path_text = path.display().to_string();
                    let (lines0, facts0) = (load.lines.len(), load.facts.len());
                    let clean = read_file(cfg, path, &mut load)?;
                    holes.extend(statement_gates(
                        cfg,
                        &load.facts[facts0..],
                        Some(span),
                        &mut load.gates,
                    ));
                    if clean {
                        coverage.extend(prove(cfg, path, span, &mut load, lines0, facts0));
                    } else {
                        load.warnings.push(format!(
                            "source {}: {} has rejected or not-booked lines, so {day} is not treated as complete",
                            cfg.name, path_text
                        ));
                    }
                }
                if !present && ended {
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
    let mut continuity = Vec::new();
    holes.extend(continuity_gates(cfg, &load.facts, &mut continuity));
    load.gates.extend(continuity);
    for g in &load.gates {
        // A missing daily file already has its own warning.
        if !g.ok && g.check != "daily_file" {
            load.warnings.push(g.warning());
        }
    }
    load.coverage = subtract_intervals(merge_intervals(coverage), &holes);
    assign_line_ids(&mut load.lines);
    Ok(load)
}

/// The local files of `path`: for a pulled source every version `recon pull` kept (see
/// [`manifest::local_versions`]), else `path` alone.
fn pulled_versions(cfg: &SourceConfig, path: &Path) -> Vec<std::path::PathBuf> {
    match &cfg.remote {
        Some(_) => manifest::local_versions(path),
        None => vec![path.to_path_buf()],
    }
}

/// For a pulled source: the period the last pull could not fetch (day `day`, or a fixed file's
/// period `span`) is not complete, whatever an older copy proves (issue 14: a failed pull
/// leaves its days incomplete and the run says so).
fn pull_holes(
    cfg: &SourceConfig,
    day: Option<NaiveDate>,
    span: Option<(Micros, Micros)>,
    load: &mut SourceLoad,
) -> Option<(Micros, Micros)> {
    let dir = &cfg.remote.as_ref()?.inbox_dir;
    let day_text = day.map(|d| d.format("%Y-%m-%d").to_string());
    let failed = manifest::failures(dir, day_text.as_deref());
    let f = failed.first()?;
    load.warnings.push(format!(
        "source {}: the last pull could not fetch {} ({}){}; {} is not treated as complete",
        cfg.name,
        f.remote,
        f.error,
        if f.at.is_empty() {
            String::new()
        } else {
            format!(" at {}", f.at)
        },
        day_text
            .map(|d| format!("day {d}"))
            .unwrap_or_else(|| "its period".into())
    ));
    span
}

/// What the file just read (its lines from `lines0`, its statements from `facts0`, its file
/// record last) proves about `span`, the period it claims: the part of `span` it covers
/// completely under the source's [`Completeness`]. Says why in a warning when that is less.
fn prove(
    cfg: &SourceConfig,
    path: &Path,
    span: (Micros, Micros),
    load: &mut SourceLoad,
    lines0: usize,
    facts0: usize,
) -> Option<(Micros, Micros)> {
    let file = path.display().to_string();
    let lines = &load.lines[lines0..];
    let warn = |load: &mut SourceLoad, why: String| {
        load.warnings.push(format!(
            "source {}: {file} proves nothing about its period ({why}), so it is not treated as complete",
            cfg.name
        ));
        None
    };
    let record = load.files.last().cloned();
    let held = record
        .as_ref()
        .map(|f| f.lines + f.rejected + f.duplicates + f.not_booked + f.skipped)
        .unwrap_or(0);
    if held == 0 && cfg.empty_means_no_activity && cfg.completeness != Completeness::None {
        // The source declares that an empty file means a period without activity.
        return Some(span);
    }
    match cfg.completeness {
        Completeness::None => None,
        Completeness::ControlFile => {
            let ctl = format!("{file}.ctl");
            let text = match std::fs::read_to_string(&ctl) {
                Ok(t) => t,
                Err(e) => return warn(load, format!("no control file {ctl}: {e}")),
            };
            match check_control(&text, held, record.as_ref().map(|f| f.sha256.as_str())) {
                Ok(()) => Some(span),
                Err(why) => warn(load, format!("control file {ctl}: {why}")),
            }
        }
        Completeness::LastLine => {
            let Some(last) = lines.last() else {
                return warn(
                    load,
                    "no lines, and the source does not say that an empty file means no activity \
                     (empty_file = \"no_activity\")"
                        .into(),
                );
            };
            if let Some(w) = lines.windows(2).find(|w| w[1].booked_at < w[0].booked_at) {
                return warn(
                    load,
                    format!(
                        "completeness = \"last_line\" needs lines in booking order; {} is booked before {}",
                        w[1].position(),
                        w[0].position()
                    ),
                );
            }
            // Covered up to the last booking: a timestamp covers its instant, a date-only
            // booking only the days before its own.
            let end = if last.booked_day.is_some() {
                last.booked_at
            } else {
                last.booked_at.saturating_add(1)
            };
            let end = end.min(span.1);
            if end < span.1 {
                load.warnings.push(format!(
                    "source {}: {file} covers its period only up to its last line ({}, {})",
                    cfg.name,
                    last.position(),
                    last.booked_text()
                ));
            }
            (end > span.0).then_some((span.0, end))
        }
        Completeness::Statement => {
            let facts = &load.facts[facts0..];
            if facts.is_empty() {
                return warn(load, "no statement in it".into());
            }
            if let Some(f) = facts.iter().find(|f| {
                f.balance_chains() != Some(true) && f.declared_totals_agree() != Some(true)
            }) {
                return warn(
                    load,
                    format!(
                        "statement at {} declares no balances that chain and no control totals",
                        f.position
                    ),
                );
            }
            Some(span)
        }
    }
}

/// The text of a control file for a statement of `lines` data records whose bytes have the
/// sha256 `sha256` (hex; either may be left out): what [`check_control`] reads.
pub fn control_text(lines: Option<usize>, sha256: Option<&str>) -> String {
    let mut c = String::new();
    if let Some(n) = lines {
        c.push_str(&format!("lines={n}\n"));
    }
    if let Some(h) = sha256 {
        c.push_str(&format!("sha256={h}\n"));
    }
    c
}

/// Checks a control file (`lines=N`, `sha256=HEX`, one per line, `#` comments) against the
/// statement file it describes: `held` lines, bytes with digest `sha256`.
pub fn check_control(text: &str, held: usize, sha256: Option<&str>) -> Result<(), String> {
    let mut checked = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "line {}: expected key=value, found {:?}",
                i + 1,
                cut(line)
            ));
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        match key.as_str() {
            "lines" => {
                let n: usize = value.parse().map_err(|_| {
                    format!("line {}: lines={:?} is not a count", i + 1, cut(value))
                })?;
                if n != held {
                    return Err(format!("declares {n} lines, the file holds {held}"));
                }
            }
            "sha256" => {
                if sha256.is_none_or(|s| !s.eq_ignore_ascii_case(value)) {
                    return Err(format!(
                        "declares sha256 {}, the file's is {}",
                        cut(value),
                        sha256.unwrap_or("?")
                    ));
                }
            }
            other => return Err(format!("line {}: unknown key {:?}", i + 1, cut(other))),
        }
        checked += 1;
    }
    if checked == 0 {
        return Err("declares neither lines= nor sha256=".into());
    }
    Ok(())
}

/// At most 80 bytes of `s` for a message, with its length when it was cut.
pub(crate) fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    crate::exit::cut_to(s, 80)
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
            crate::textsafe::csv_safe(&l.source).into_owned(),
            crate::textsafe::csv_safe(&l.position()).into_owned(),
            crate::textsafe::csv_safe(l.provider_txn_id.as_deref().unwrap_or("")).into_owned(),
            crate::textsafe::csv_safe(l.reference.as_deref().unwrap_or("")).into_owned(),
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

    #[test]
    fn holes_are_cut_out_of_coverage() {
        let cov = vec![(0, 100), (200, 300)];
        assert_eq!(
            subtract_intervals(cov.clone(), &[(10, 20), (90, 210)]),
            vec![(0, 10), (20, 90), (210, 300)]
        );
        assert_eq!(subtract_intervals(cov.clone(), &[]), cov);
        assert_eq!(subtract_intervals(cov, &[(-5, 400)]), vec![]);
    }
}
