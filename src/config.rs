//! The job configuration: one TOML file, validated strictly before any data is read.
//!
//! Relative paths in the file are resolved against the file's own folder, so a config works
//! from any working directory. `RECON_DATABASE_URL` (or else `DATABASE_URL`) overrides
//! `database_url`.

pub mod remote;
pub mod status_api;

use crate::exit::{Failure, fail};
pub use crate::model::{Format, LineKind, Role, TimestampFormat};
use crate::timeparse::Micros;
use anyhow::Result;
use chrono::NaiveDate;
use chrono_tz::Tz;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file as written (`#[serde(deny_unknown_fields)]`: a misspelt key is an error).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// IANA time zone in which run dates (`--date`) are interpreted, e.g. `Europe/Berlin`.
    timezone: String,
    /// `sqlite://path/to/file.db` (relative to this file) or `postgres://…`. Overridden by
    /// `RECON_DATABASE_URL`, then `DATABASE_URL`.
    database_url: Option<String>,
    /// How the ledger is read (custom schemas).
    #[serde(default)]
    ledger: LedgerQueries,
    /// Folder that receives one sub-folder per run (relative to this file).
    output_dir: PathBuf,
    /// Folder of `*.toml` rule files; the bundled default rules when absent.
    rules_dir: Option<PathBuf>,
    /// A SUBMITTING payment older than this (at the run's as-of) is treated like UNKNOWN.
    #[serde(default = "default_stale_minutes")]
    stale_submitting_minutes: i64,
    /// How long after a payment's match window closes before "no line" can mean "not paid".
    #[serde(default = "default_lag_hours")]
    settlement_lag_hours: i64,
    /// How many days back unresolved payments are carried into a run.
    #[serde(default = "default_carry_days")]
    carry_over_days: i64,
    /// Evidence horizon before a payment's start (a duration like `10m`): lines booked this
    /// long before `started_at` can still be the payment's.
    evidence_window_before: Option<String>,
    /// Evidence horizon after a payment's start (`72h`): RESOLVED_FAILED needs every source to
    /// cover `[started_at − before, started_at + after]` completely, and the near-miss gate
    /// looks at the same window.
    evidence_window_after: Option<String>,
    /// Folder that receives the files `recon pull` fetches for remote sources, one sub-folder
    /// per source (relative to this file; default `inbox`).
    inbox: Option<PathBuf>,
    /// Provider statements.
    #[serde(default, rename = "source")]
    sources: Vec<RawSource>,
    /// The email alert (`[email]`); no email is built when absent.
    email: Option<RawEmail>,
    /// Provider status queries (`[[status_api]]`, at most one).
    #[serde(default)]
    status_api: Vec<status_api::RawStatusApi>,
}

fn default_stale_minutes() -> i64 {
    30
}
fn default_lag_hours() -> i64 {
    24
}
fn default_carry_days() -> i64 {
    14
}

/// SQL that reads a ledger kept in the user's own schema. Each query returns recon's canonical
/// columns (see docs/formats.md, "Your own ledger schema"); recon wraps it with its range filter.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LedgerQueries {
    /// Returns `payment_id, recipient_account, amount_minor, currency, status, created_at,
    /// started_at, attempt_id, provider_payment_id`.
    pub payments_query: Option<String>,
    /// Returns `attempt_id, payment_id, started_at, finished_at, outcome, provider_payment_id`.
    pub attempts_query: Option<String>,
}

/// One statement source as written in the file (a `[[source]]` table, or a `--mapping` file
/// of `recon parse`, where `name` and `path` may be left out).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    /// Unique name, used in results and ticket keys.
    name: Option<String>,
    /// `provider` (default): lines are what the provider paid out for us; `bank`: our own
    /// bank account, where payments appear as debits and provider payouts as credits.
    role: Option<String>,
    /// File format: `csv` (default), `xlsx`, `camt053`, `camt054`, `mt940` or `bai2`.
    format: Option<String>,
    /// File path (relative to the config). `{date}` is replaced by each day (YYYY-MM-DD):
    /// one file per day, each complete for its day when present.
    path: Option<String>,
    /// Time zone of timestamps without an offset; defaults to the job's.
    timezone: Option<String>,
    /// Text encoding of the file (`utf-8` default; `windows-1252`, `latin1`, `iso-8859-2`,
    /// `gbk`, … any WHATWG label). Not for xlsx/camt (they declare their own).
    encoding: Option<String>,
    /// csv/xlsx: `rfc3339`, or a chrono strftime format such as `%d.%m.%Y %H:%M`.
    timestamp_format: Option<String>,
    /// csv/xlsx: `.` (default) or `,`.
    decimal_separator: Option<String>,
    /// csv/xlsx: optional thousands separator to strip (`,`, `.`, `'` or ` `).
    thousands_separator: Option<String>,
    /// csv/xlsx: characters removed from amount cells before parsing (currency signs: `"$€¤"`).
    amount_symbols: Option<String>,
    /// csv: field delimiter, `,` by default.
    delimiter: Option<String>,
    /// csv: the quote character, `"` by default (`'` for exports that quote with it).
    quote: Option<String>,
    /// csv/xlsx: whether the first row after `skip_lines` is a header (default true). Without
    /// one, columns are named by position: `#1`, `#2`, …
    has_header: Option<bool>,
    /// csv/xlsx: lines (xlsx: rows) to skip before the header (bank preambles).
    skip_lines: Option<usize>,
    /// csv/xlsx: non-empty records at the end of the file that are not statement lines (a
    /// footer with balances). They are dropped by count, never by guessing.
    skip_footer: Option<usize>,
    /// xlsx: the sheet to read (default: the first).
    sheet: Option<String>,
    /// csv/xlsx: negate amounts (statements that book payouts as negative numbers).
    negate_amounts: Option<bool>,
    /// csv/xlsx: ISO 4217 code of every line, for files without a currency column.
    currency: Option<String>,
    /// First day (in the source time zone) the file covers completely (fixed paths only).
    complete_from: Option<NaiveDate>,
    /// Last day (inclusive) the file covers completely (fixed paths only).
    complete_to: Option<NaiveDate>,
    /// csv/xlsx: which header names (or `#N` positions) hold the canonical fields.
    columns: Option<RawColumns>,
    /// csv/xlsx: value of the `kind` column → `PAYMENT` or `REFUND` (case-insensitive keys).
    kinds: Option<BTreeMap<String, String>>,
    /// csv/xlsx: value of the `sign` column → `credit` or `debit` (case-insensitive keys).
    signs: Option<BTreeMap<String, String>>,
    /// csv/xlsx: values of the `status` column that mean booked (case-insensitive). Rows with
    /// any other status (pending, authorised, cancelled) are not loaded, and are counted.
    booked_statuses: Option<Vec<String>>,
    /// How a file proves it is complete for its period: `control_file`, `last_line`,
    /// `statement` (bank formats' own balances and control totals) or `none`.
    completeness: Option<String>,
    /// `no_activity`: a file without lines is complete for its period (the source says so);
    /// `incomplete` (default): an empty file proves nothing.
    empty_file: Option<String>,
    /// Settings of a remote `path` (`sftp://`, `s3://`, `https://`): see the `pull` module.
    remote: Option<remote::RawRemote>,
    /// csv/xlsx: what joins the cells of a text field mapped to several columns (default " ").
    join_separator: Option<String>,
    /// csv/xlsx: `"amount - fee"` or `"amount + fee"`: the line's amount is computed from the
    /// amount and the `fee` column (providers that report the fee separately).
    net_amount: Option<String>,
    /// csv/xlsx: rows that are not statement lines (notices, balance rows), by value. They are
    /// counted and listed, and do not make the file incomplete.
    skip_rows: Option<Vec<RawSkipRow>>,
    /// csv/xlsx: skip rows whose amount is zero (notice rows), counted like `skip_rows`.
    skip_zero_amounts: Option<bool>,
}

/// One `[[skip_rows]]` rule as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkipRow {
    /// Header name or `#N` position of the column tested.
    column: String,
    /// Cell values (trimmed, case-insensitive) that mark a row to skip.
    #[serde(default)]
    values: Vec<String>,
    /// Texts (case-insensitive) whose presence anywhere in the cell marks a row to skip.
    #[serde(default)]
    contains: Vec<String>,
}

/// A text field's columns as written: one name, or a list joined with `join_separator`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawColumnList {
    One(String),
    Many(Vec<String>),
}

impl RawColumnList {
    fn into_vec(self) -> Vec<String> {
        match self {
            RawColumnList::One(s) => vec![s],
            RawColumnList::Many(v) => v,
        }
    }
}

/// Column mapping as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumns {
    provider_txn_id: Option<RawColumnList>,
    reference: Option<RawColumnList>,
    recipient: Option<RawColumnList>,
    amount: Option<String>,
    debit: Option<String>,
    credit: Option<String>,
    sign: Option<String>,
    currency: Option<String>,
    booked_at: String,
    booked_time: Option<String>,
    kind: Option<String>,
    batch: Option<RawColumnList>,
    status: Option<String>,
    original_amount: Option<String>,
    original_currency: Option<String>,
    fee: Option<String>,
    balance: Option<String>,
}

/// A validated job configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the file was read from.
    pub path: PathBuf,
    /// Run dates are days in this zone.
    pub timezone: Tz,
    /// Database URL with relative SQLite paths resolved.
    pub database_url: String,
    /// Custom ledger read queries (`None` = the bundled schema).
    pub ledger: LedgerQueries,
    /// Output root.
    pub output_dir: PathBuf,
    /// Rule folder, or `None` for the bundled rules.
    pub rules_dir: Option<PathBuf>,
    /// Stale SUBMITTING age in minutes.
    pub stale_submitting_minutes: i64,
    /// Settlement lag in hours.
    pub settlement_lag_hours: i64,
    /// Carry-over horizon in days.
    pub carry_over_days: i64,
    /// `evidence_window_before` / `evidence_window_after` as written (`None`: the default, see
    /// `rules::RuleSet::for_job`).
    pub evidence_window: (Option<Micros>, Option<Micros>),
    /// Statement sources.
    pub sources: Vec<SourceConfig>,
    /// Where `recon pull` puts the files of remote sources (`<inbox>/<source>/…`).
    pub inbox: PathBuf,
    /// The email alert; `None` when the file has no `[email]` section.
    pub email: Option<EmailConfig>,
    /// The provider status API (`[[status_api]]`); `None`: recon asks no one.
    pub status_api: Option<status_api::StatusApiConfig>,
}

/// Where a source's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourcePath {
    /// One file; complete for `complete` (inclusive days) if declared.
    Fixed {
        /// The file.
        path: PathBuf,
        /// Inclusive days covered completely.
        complete: Option<(NaiveDate, NaiveDate)>,
    },
    /// One file per day: the template with `{date}`.
    Daily(String),
}

/// A text encoding other than UTF-8: any the WHATWG Encoding Standard names (through
/// encoding_rs), plus IBM code page 852, which Central European MT940 files still use and
/// encoding_rs does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEncoding {
    /// An encoding_rs encoding (never UTF-8, UTF-16 or replacement).
    Whatwg(&'static encoding_rs::Encoding),
    /// IBM 852 (DOS Latin 2).
    Ibm852,
}

impl TextEncoding {
    /// The encoding's name.
    pub fn name(self) -> &'static str {
        match self {
            TextEncoding::Whatwg(e) => e.name(),
            TextEncoding::Ibm852 => "IBM852",
        }
    }
}

/// Which way a value of a sign / credit-debit indicator column books the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// Money in: the amount is positive.
    Credit,
    /// Money out: the amount is negative.
    Debit,
}

/// A validated statement source.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Unique name.
    pub name: String,
    /// Provider (default) or bank.
    pub role: Role,
    /// File format.
    pub format: Format,
    /// File location.
    pub path: SourcePath,
    /// Zone for timestamps (and dates) without an offset.
    pub timezone: Tz,
    /// Text encoding for csv/mt940/bai2; `None` means strict UTF-8.
    pub encoding: Option<TextEncoding>,
    /// Timestamp format (csv/xlsx).
    pub timestamp_format: TimestampFormat,
    /// Number format (csv/xlsx text cells).
    pub number_format: crate::money::NumberFormat,
    /// Characters removed from amount text before parsing (currency signs).
    pub amount_symbols: Vec<char>,
    /// Field delimiter byte.
    pub delimiter: u8,
    /// Quote byte.
    pub quote: u8,
    /// Whether a header row follows the preamble.
    pub has_header: bool,
    /// Preamble lines (xlsx: rows) to skip.
    pub skip_lines: usize,
    /// Non-empty footer records to drop.
    pub skip_footer: usize,
    /// xlsx sheet name (default: the first).
    pub sheet: Option<String>,
    /// Negate amounts when reading.
    pub negate_amounts: bool,
    /// Currency of every line when the file has no currency column.
    pub currency: Option<&'static str>,
    /// Header names (csv/xlsx).
    pub columns: Columns,
    /// Upper-cased kind value → kind.
    pub kinds: BTreeMap<String, LineKind>,
    /// Upper-cased sign-column value → sign.
    pub signs: BTreeMap<String, Sign>,
    /// Upper-cased values of the status column that mean booked (empty: no status column).
    pub booked_statuses: std::collections::BTreeSet<String>,
    /// How a file proves it is complete.
    pub completeness: Completeness,
    /// Whether an empty file is complete for its period (`empty_file = "no_activity"`).
    pub empty_means_no_activity: bool,
    /// Where the files are published when `path` is remote; `path` is then the local copy in
    /// the inbox, which runs read (see the `pull` module).
    pub remote: Option<remote::Remote>,
    /// What joins the cells of a text field mapped to several columns.
    pub join_separator: String,
    /// How the `fee` column makes the line's amount (`None`: no fee column).
    pub net_amount: Option<NetAmount>,
    /// Rows that are not statement lines, by value (csv/xlsx).
    pub skip_rows: Vec<SkipRow>,
    /// Skip rows whose amount is zero (csv/xlsx).
    pub skip_zero_amounts: bool,
}

/// How a separately reported fee makes a line's amount (`net_amount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetAmount {
    /// `amount - fee`.
    MinusFee,
    /// `amount + fee`.
    PlusFee,
}

/// A `[[skip_rows]]` rule: rows whose `column` cell equals one of `values` or contains one of
/// `contains` (trimmed, upper-cased here and when compared) are not statement lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRow {
    /// Header name or `#N`.
    pub column: String,
    /// Upper-cased whole values.
    pub values: Vec<String>,
    /// Upper-cased substrings.
    pub contains: Vec<String>,
}

/// How a source's files prove that they hold every line of their period (DESIGN.md rule 2:
/// coverage rests on something the file proves, never on its mere presence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    /// A control file `<file>.ctl` delivered beside each file gives its line count
    /// (`lines=N`) and/or its sha256 (`sha256=HEX`); the file is complete only when they agree.
    ControlFile,
    /// The file is written in booking order, so it covers its period up to its last line's
    /// booking (a file cut at a line boundary covers less; an empty one nothing).
    LastLine,
    /// The statement's own balances and control totals (camt, MT940, BAI2): a statement that
    /// declares neither proves nothing.
    Statement,
    /// Never complete: absence of a line in this source never proves anything.
    None,
}

impl Completeness {
    /// Every value, in documentation order.
    pub const ALL: [Completeness; 4] = [
        Completeness::ControlFile,
        Completeness::LastLine,
        Completeness::Statement,
        Completeness::None,
    ];

    /// Parses a config value.
    pub fn parse(value: &str) -> Option<Completeness> {
        Completeness::ALL.into_iter().find(|c| c.as_str() == value)
    }

    /// Name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Completeness::ControlFile => "control_file",
            Completeness::LastLine => "last_line",
            Completeness::Statement => "statement",
            Completeness::None => "none",
        }
    }
}

/// Header names (or `#N` positions) of the canonical fields.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// Provider transaction id column.
    pub provider_txn_id: Option<String>,
    /// Reference column.
    pub reference: Option<String>,
    /// Recipient account column (lines have no recipient when absent).
    pub recipient: Option<String>,
    /// Signed amount column.
    pub amount: Option<String>,
    /// Debit (money out) column, for files with separate debit/credit columns.
    pub debit: Option<String>,
    /// Credit (money in) column.
    pub credit: Option<String>,
    /// Sign / credit-debit indicator column; the amount's own sign is then ignored.
    pub sign: Option<String>,
    /// Currency column (or the source's fixed `currency`).
    pub currency: Option<String>,
    /// Booking timestamp column (or its date, with `booked_time`).
    pub booked_at: String,
    /// A separate time-of-day column; its text is appended to `booked_at`'s after a space
    /// before `timestamp_format` applies.
    pub booked_time: Option<String>,
    /// Kind column (all lines are payments when absent).
    pub kind: Option<String>,
    /// Settlement batch column (the grouping key of three-way matching), if any.
    pub batch: Option<String>,
    /// Booking status column (with `booked_statuses`): only booked rows are lines.
    pub status: Option<String>,
    /// More columns of a text field mapped to a list (`reference = ["A", "B", "#9.."]`), by
    /// field name: the first column is in the field itself, these follow it, joined with
    /// `join_separator`. `#N..` is column N and every field after it.
    pub more: BTreeMap<&'static str, Vec<String>>,
    /// The amount in the original (foreign) currency, beside the account-currency amount.
    pub original_amount: Option<String>,
    /// The original currency's ISO code.
    pub original_currency: Option<String>,
    /// A fee reported separately; with `net_amount` it makes the line's amount.
    pub fee: Option<String>,
    /// The account's running balance after each row; when mapped, each row's balance must
    /// be the previous one plus its amount (a completeness gate).
    pub balance: Option<String>,
}

fn config_error(path: &Path, msg: impl std::fmt::Display) -> anyhow::Error {
    fail(Failure::Config, format!("{}: {msg}", path.display()))
}

fn parse_tz(path: &Path, key: &str, value: &str) -> Result<Tz> {
    value.parse::<Tz>().map_err(|_| {
        config_error(
            path,
            format!("key `{key}`: unknown time zone {value:?} (hint: an IANA name such as Europe/Berlin or UTC)"),
        )
    })
}

fn single_char(path: &Path, key: &str, value: &str, allowed: &[char]) -> Result<char> {
    let mut chars = value.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if allowed.contains(&c) => Ok(c),
        _ => Err(config_error(
            path,
            format!("key `{key}`: {value:?} is not one of {allowed:?}"),
        )),
    }
}

impl Config {
    /// Reads and validates a job configuration file.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| config_error(path, format!("cannot read: {e}")))?;
        Self::parse(&text, path)
    }

    /// Validates configuration text; `path` names it in errors and anchors relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        // A TOML error quotes the offending line, which may hold the database password.
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| config_error(path, crate::mask::secrets(&e.to_string())))?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let timezone = parse_tz(path, "timezone", &raw.timezone)?;
        let url = std::env::var("RECON_DATABASE_URL")
            .ok()
            .or_else(|| std::env::var("DATABASE_URL").ok())
            .or(raw.database_url)
            .ok_or_else(|| {
                config_error(
                    path,
                    "key `database_url` is missing (or set RECON_DATABASE_URL / DATABASE_URL)",
                )
            })?;
        let database_url = resolve_database_url(&url, &base)
            .ok_or_else(|| config_error(path, format!("key `database_url`: unsupported URL {:?} (hint: sqlite://FILE or postgres://…)", crate::mask::url(&url))))?;
        for (key, q) in [
            ("ledger.payments_query", &raw.ledger.payments_query),
            ("ledger.attempts_query", &raw.ledger.attempts_query),
        ] {
            if q.as_deref()
                .is_some_and(|q| q.trim().is_empty() || q.contains(';'))
            {
                return Err(config_error(
                    path,
                    format!("key `{key}`: must be one SELECT without `;`"),
                ));
            }
        }
        for (key, v) in [
            ("stale_submitting_minutes", raw.stale_submitting_minutes),
            ("settlement_lag_hours", raw.settlement_lag_hours),
            ("carry_over_days", raw.carry_over_days),
        ] {
            if v < 0 {
                return Err(config_error(
                    path,
                    format!("key `{key}`: must not be negative"),
                ));
            }
        }
        let duration = |key: &str, v: &Option<String>| -> Result<Option<Micros>> {
            v.as_deref()
                .map(|t| match crate::timeparse::parse_duration(t) {
                    Ok(d) if d > 0 => Ok(d),
                    Ok(_) => Err(config_error(path, format!("key `{key}`: must be positive"))),
                    Err(e) => Err(config_error(path, format!("key `{key}`: {e}"))),
                })
                .transpose()
        };
        let evidence_window = (
            duration("evidence_window_before", &raw.evidence_window_before)?,
            duration("evidence_window_after", &raw.evidence_window_after)?,
        );
        let inbox = join_clean(&base, raw.inbox.unwrap_or_else(|| PathBuf::from("inbox")));
        let mut sources = Vec::with_capacity(raw.sources.len());
        for (i, s) in raw.sources.into_iter().enumerate() {
            let src = Self::source(path, &base, &inbox, i, s, timezone)?;
            if sources.iter().any(|o: &SourceConfig| o.name == src.name) {
                return Err(config_error(
                    path,
                    format!("source[{i}]: duplicate source name {:?}", src.name),
                ));
            }
            sources.push(src);
        }
        Ok(Config {
            path: path.to_path_buf(),
            timezone,
            database_url,
            ledger: raw.ledger,
            output_dir: join_clean(&base, raw.output_dir),
            rules_dir: raw.rules_dir.map(|d| join_clean(&base, d)),
            stale_submitting_minutes: raw.stale_submitting_minutes,
            settlement_lag_hours: raw.settlement_lag_hours,
            carry_over_days: raw.carry_over_days,
            evidence_window,
            sources,
            inbox,
            email: raw.email.map(|e| e.validate(path, &base)).transpose()?,
            status_api: match raw.status_api.len() {
                0 | 1 => raw
                    .status_api
                    .into_iter()
                    .next()
                    .map(|a| a.validate(path, 0))
                    .transpose()?,
                n => {
                    return Err(config_error(
                        path,
                        format!(
                            "{n} [[status_api]] blocks (hint: one provider status API per job)"
                        ),
                    ));
                }
            },
        })
    }

    fn source(
        path: &Path,
        base: &Path,
        inbox: &Path,
        i: usize,
        mut s: RawSource,
        job_tz: Tz,
    ) -> Result<SourceConfig> {
        let key = |k: &str| format!("source[{i}].{k}");
        let Some(name) = s.name.clone() else {
            return Err(config_error(
                path,
                format!("key `{}` is missing", key("name")),
            ));
        };
        let Some(file) = s.path.clone() else {
            return Err(config_error(
                path,
                format!("key `{}` is missing", key("path")),
            ));
        };
        if name.trim().is_empty() || name.contains(['|', ';', '#']) {
            return Err(config_error(
                path,
                format!("key `{}`: must be non-empty without | ; #", key("name")),
            ));
        }
        let complete = match (s.complete_from, s.complete_to) {
            (Some(a), Some(b)) if a <= b => Some((a, b)),
            (None, None) => None,
            _ => {
                return Err(config_error(
                    path,
                    format!(
                        "keys `{}`/`{}`: give both, with from <= to",
                        key("complete_from"),
                        key("complete_to")
                    ),
                ));
            }
        };
        // A remote source is read from its copy in the inbox (`recon pull` fetches it).
        let mut remote = if remote::is_remote(&file) {
            Some(remote::Remote::parse(
                path,
                &key(""),
                &file,
                s.remote.take(),
                base,
            )?)
        } else if s.remote.is_some() {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: [source.remote] needs a remote path (sftp://, s3:// or https://)",
                    key("remote")
                ),
            ));
        } else {
            None
        };
        // Its `path` is then the local copy under `<inbox>/<source>/`.
        let (base, file) = match &mut remote {
            Some(r) => {
                r.inbox_dir = inbox.join(&name);
                (r.inbox_dir.clone(), r.local.clone())
            }
            None => (base.to_path_buf(), file),
        };
        let base = base.as_path();
        let source_path = if file.contains("{date}") {
            if complete.is_some() {
                return Err(config_error(
                    path,
                    format!(
                        "key `{}`: a daily `{{date}}` path is complete per file; remove complete_from/complete_to",
                        key("path")
                    ),
                ));
            }
            SourcePath::Daily(join_clean(base, &file).to_string_lossy().into_owned())
        } else {
            SourcePath::Fixed {
                path: join_clean(base, &file),
                complete,
            }
        };
        let proof_given = s.completeness.is_some();
        let mut src = source_settings(path, &format!("source[{i}]."), s, None, job_tz)?;
        let claims = match &source_path {
            SourcePath::Daily(_) => Some("a daily `{date}` source"),
            SourcePath::Fixed {
                complete: Some(_), ..
            } => Some("a source with complete_from/complete_to"),
            SourcePath::Fixed { complete: None, .. } => None,
        };
        if let Some(what) = claims
            && !proof_given
            && src.format.needs_mapping()
        {
            return Err(config_error(
                path,
                format!(
                    "key `{}` is missing: {what} claims completeness, so say how its files prove \
                     it (DESIGN.md rule 2): `control_file` (a `<file>.ctl` with lines=N and/or \
                     sha256=HEX beside each file), `last_line` (the file is in booking order and \
                     covers its period up to its last line) or `none`",
                    key("completeness")
                ),
            ));
        }
        src.name = name;
        src.path = source_path;
        src.remote = remote;
        Ok(src)
    }
}

impl SourceConfig {
    /// Reads a `--mapping` file of `recon parse`: the keys of one `[[source]]` table, where
    /// `name` and `path` may be left out. `format` (from the command line) must agree with a
    /// `format` key in the file, if there is one.
    pub fn load_mapping(path: &Path, format: Format) -> Result<SourceConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| config_error(path, format!("cannot read: {e}")))?;
        let raw: RawSource = toml::from_str(&text)
            .map_err(|e| config_error(path, crate::mask::secrets(&e.to_string())))?;
        let name = raw
            .name
            .clone()
            .unwrap_or_else(|| format.as_str().to_string());
        let mut src = source_settings(path, "", raw, Some(format), Tz::UTC)?;
        src.name = name;
        Ok(src)
    }

    /// The settings of a bank format read without a mapping file (`recon parse --format
    /// camt053 FILE`): dates without an offset are UTC, text is UTF-8.
    pub fn bank_default(format: Format) -> SourceConfig {
        SourceConfig {
            name: format.as_str().to_string(),
            role: Role::Provider,
            format,
            path: SourcePath::Fixed {
                path: PathBuf::new(),
                complete: None,
            },
            timezone: Tz::UTC,
            encoding: None,
            timestamp_format: TimestampFormat::Rfc3339,
            number_format: crate::money::NumberFormat::DOT,
            amount_symbols: Vec::new(),
            delimiter: b',',
            quote: b'"',
            has_header: true,
            skip_lines: 0,
            skip_footer: 0,
            sheet: None,
            negate_amounts: false,
            currency: None,
            columns: Columns::default(),
            kinds: default_kinds(),
            signs: BTreeMap::new(),
            booked_statuses: Default::default(),
            completeness: if format.needs_mapping() {
                Completeness::None
            } else {
                Completeness::Statement
            },
            empty_means_no_activity: false,
            remote: None,
            join_separator: " ".to_string(),
            net_amount: None,
            skip_rows: Vec::new(),
            skip_zero_amounts: false,
        }
    }
}

fn default_kinds() -> BTreeMap<String, LineKind> {
    let mut kinds = BTreeMap::new();
    kinds.insert("PAYMENT".to_string(), LineKind::Payment);
    kinds.insert("REFUND".to_string(), LineKind::Refund);
    kinds
}

/// Validates the format-specific keys of a source (`prefix` names it in errors, e.g.
/// `source[0].`). `forced` is the format given on the command line, if any.
fn source_settings(
    path: &Path,
    prefix: &str,
    s: RawSource,
    forced: Option<Format>,
    job_tz: Tz,
) -> Result<SourceConfig> {
    let key = |k: &str| format!("{prefix}{k}");
    if s.remote.is_some() {
        return Err(config_error(
            path,
            format!(
                "key `{}`: only a job's [[source]] can be remote",
                key("remote")
            ),
        ));
    }
    let written = match &s.format {
        None => None,
        Some(f) => Some(Format::parse(f).ok_or_else(|| {
            config_error(
                path,
                format!(
                    "key `{}`: unsupported format {f:?} (hint: one of csv, xlsx, camt053, camt054, mt940, bai2)",
                    key("format")
                ),
            )
        })?),
    };
    let format = match (forced, written) {
        (Some(a), Some(b)) if a != b => {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: the file says {b} but --format is {a}",
                    key("format")
                ),
            ));
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => Format::Csv,
    };
    let role = match s.role.as_deref() {
        None | Some("provider") => Role::Provider,
        Some("bank") => Role::Bank,
        Some(other) => {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: unknown role {other:?} (hint: `provider` or `bank`)",
                    key("role")
                ),
            ));
        }
    };
    let timezone = match &s.timezone {
        Some(t) => parse_tz(path, &key("timezone"), t)?,
        None => job_tz,
    };
    let encoding = match &s.encoding {
        None => None,
        Some(label) => {
            if matches!(format, Format::Xlsx | Format::Camt053 | Format::Camt054) {
                return Err(config_error(
                    path,
                    format!(
                        "key `{}`: {format} files declare their own encoding; remove the key",
                        key("encoding")
                    ),
                ));
            }
            let l = label.trim().to_ascii_lowercase();
            if matches!(l.as_str(), "ibm852" | "cp852" | "852" | "ibm-852") {
                Some(TextEncoding::Ibm852)
            } else {
                let enc = encoding_rs::Encoding::for_label(l.as_bytes()).ok_or_else(|| {
                    config_error(
                        path,
                        format!(
                            "key `{}`: unknown encoding {label:?} (hint: utf-8, windows-1252, latin1, iso-8859-2, iso-8859-15, ibm852, gbk)",
                            key("encoding")
                        ),
                    )
                })?;
                if enc == encoding_rs::UTF_8 {
                    None
                } else if enc.output_encoding() != enc {
                    return Err(config_error(
                        path,
                        format!(
                            "key `{}`: {label:?} is not supported (UTF-16 and replacement encodings are not)",
                            key("encoding")
                        ),
                    ));
                } else {
                    Some(TextEncoding::Whatwg(enc))
                }
            }
        }
    };
    let completeness = match s
        .completeness
        .as_deref()
        .map(|v| (v, Completeness::parse(v)))
    {
        None => None,
        Some((_, Some(Completeness::Statement))) if format.needs_mapping() => {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: `statement` is for bank formats, whose files declare balances and \
                     control totals; a {format} file proves its completeness with `control_file` \
                     or `last_line`",
                    key("completeness")
                ),
            ));
        }
        Some((_, Some(c))) => Some(c),
        Some((other, None)) => {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: unknown value {other:?} (hint: control_file, last_line, statement or none)",
                    key("completeness")
                ),
            ));
        }
    };
    let empty_means_no_activity = match s.empty_file.as_deref() {
        None | Some("incomplete") => false,
        Some("no_activity") => true,
        Some(other) => {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: unknown value {other:?} (hint: `incomplete` or `no_activity`)",
                    key("empty_file")
                ),
            ));
        }
    };
    if !format.needs_mapping() {
        // Bank formats define their own layout: a mapping key would be silently ignored.
        let mapping_keys = [
            ("timestamp_format", s.timestamp_format.is_some()),
            ("decimal_separator", s.decimal_separator.is_some()),
            ("thousands_separator", s.thousands_separator.is_some()),
            ("amount_symbols", s.amount_symbols.is_some()),
            ("delimiter", s.delimiter.is_some()),
            ("quote", s.quote.is_some()),
            ("has_header", s.has_header.is_some()),
            ("skip_lines", s.skip_lines.is_some()),
            ("skip_footer", s.skip_footer.is_some()),
            ("sheet", s.sheet.is_some()),
            ("negate_amounts", s.negate_amounts.is_some()),
            ("currency", s.currency.is_some()),
            ("columns", s.columns.is_some()),
            ("kinds", s.kinds.is_some()),
            ("signs", s.signs.is_some()),
            ("booked_statuses", s.booked_statuses.is_some()),
            ("join_separator", s.join_separator.is_some()),
            ("net_amount", s.net_amount.is_some()),
            ("skip_rows", s.skip_rows.is_some()),
            ("skip_zero_amounts", s.skip_zero_amounts.is_some()),
        ];
        if let Some((k, _)) = mapping_keys.iter().find(|(_, set)| *set) {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: not used by format {format} (bank formats need no column mapping)",
                    key(k)
                ),
            ));
        }
        let mut src = SourceConfig::bank_default(format);
        src.role = role;
        src.timezone = timezone;
        src.encoding = encoding;
        src.completeness = completeness.unwrap_or(Completeness::Statement);
        src.empty_means_no_activity = empty_means_no_activity;
        return Ok(src);
    }
    for (name, set) in [
        ("delimiter", s.delimiter.is_some()),
        ("quote", s.quote.is_some()),
    ] {
        if format == Format::Xlsx && set {
            return Err(config_error(
                path,
                format!("key `{}`: not used by format xlsx", key(name)),
            ));
        }
    }
    if format == Format::Csv && s.sheet.is_some() {
        return Err(config_error(
            path,
            format!("key `{}`: not used by format csv", key("sheet")),
        ));
    }
    let Some(ts) = s.timestamp_format.as_deref() else {
        return Err(config_error(
            path,
            format!(
                "key `{}` is missing (format {format} needs it)",
                key("timestamp_format")
            ),
        ));
    };
    let timestamp_format = if ts.eq_ignore_ascii_case("rfc3339") {
        TimestampFormat::Rfc3339
    } else if ts.contains('%') {
        TimestampFormat::Pattern(ts.to_string())
    } else {
        return Err(config_error(
            path,
            format!(
                "key `{}`: {ts:?} is neither `rfc3339` nor a strftime pattern like `%Y-%m-%d %H:%M:%S`",
                key("timestamp_format"),
            ),
        ));
    };
    let decimal = single_char(
        path,
        &key("decimal_separator"),
        s.decimal_separator.as_deref().unwrap_or("."),
        &['.', ','],
    )?;
    let thousands = s
        .thousands_separator
        .as_deref()
        .map(|t| single_char(path, &key("thousands_separator"), t, &[',', '.', '\'', ' ']))
        .transpose()?;
    if thousands == Some(decimal) {
        return Err(config_error(
            path,
            format!(
                "key `{}`: same as the decimal separator",
                key("thousands_separator")
            ),
        ));
    }
    let delimiter = single_char(
        path,
        &key("delimiter"),
        s.delimiter.as_deref().unwrap_or(","),
        &[',', ';', '\t', '|'],
    )?;
    let quote = single_char(
        path,
        &key("quote"),
        s.quote.as_deref().unwrap_or("\""),
        &['"', '\''],
    )?;
    let amount_symbols: Vec<char> = s.amount_symbols.as_deref().unwrap_or("").chars().collect();
    if let Some(c) = amount_symbols.iter().find(|c| {
        c.is_ascii_digit() || **c == decimal || Some(**c) == thousands || **c == '-' || **c == '+'
    }) {
        return Err(config_error(
            path,
            format!(
                "key `{}`: {c:?} is part of a number and cannot be removed",
                key("amount_symbols")
            ),
        ));
    }
    let currency = s
        .currency
        .as_deref()
        .map(|c| {
            crate::money::currency(c)
                .map(|(code, _)| code)
                .map_err(|e| config_error(path, format!("key `{}`: {e}", key("currency"))))
        })
        .transpose()?;
    let mut kinds = BTreeMap::new();
    let raw_kinds = s.kinds.unwrap_or_default();
    if raw_kinds.is_empty() {
        kinds = default_kinds();
    }
    for (value, kind) in &raw_kinds {
        let k = match kind.to_ascii_uppercase().as_str() {
            "PAYMENT" => LineKind::Payment,
            "REFUND" => LineKind::Refund,
            "FEE" => LineKind::Fee,
            "PAYOUT" => LineKind::Payout,
            "BALANCE" => LineKind::Balance,
            other => {
                return Err(config_error(
                    path,
                    format!(
                        "key `{}.{value}`: {other:?} is not PAYMENT, REFUND, FEE, PAYOUT or BALANCE",
                        key("kinds")
                    ),
                ));
            }
        };
        kinds.insert(value.trim().to_uppercase(), k);
    }
    let mut signs = BTreeMap::new();
    for (value, sign) in s.signs.unwrap_or_default() {
        let v = match sign.to_ascii_lowercase().as_str() {
            "credit" => Sign::Credit,
            "debit" => Sign::Debit,
            other => {
                return Err(config_error(
                    path,
                    format!(
                        "key `{}.{value}`: {other:?} is not credit or debit",
                        key("signs")
                    ),
                ));
            }
        };
        signs.insert(value.trim().to_uppercase(), v);
    }
    let Some(c) = s.columns else {
        return Err(config_error(
            path,
            format!(
                "key `{}` is missing (format {format} needs a column mapping)",
                key("columns")
            ),
        ));
    };
    let has_header = s.has_header.unwrap_or(true);
    let mut more = BTreeMap::new();
    let mut text_field = |k: &'static str, v: Option<RawColumnList>| -> Result<Option<String>> {
        let Some(v) = v else { return Ok(None) };
        let mut v = v.into_vec();
        if v.is_empty() || v.iter().any(|c| c.trim().is_empty()) {
            return Err(config_error(
                path,
                format!(
                    "key `{}`: give a column name or a non-empty list of them",
                    key(&format!("columns.{k}"))
                ),
            ));
        }
        let first = v.remove(0);
        if !v.is_empty() {
            more.insert(k, v);
        }
        Ok(Some(first))
    };
    let provider_txn_id = text_field("provider_txn_id", c.provider_txn_id)?;
    let reference = text_field("reference", c.reference)?;
    let recipient = text_field("recipient", c.recipient)?;
    let batch = text_field("batch", c.batch)?;
    let columns = Columns {
        provider_txn_id,
        reference,
        recipient,
        amount: c.amount,
        debit: c.debit,
        credit: c.credit,
        sign: c.sign,
        currency: c.currency,
        booked_at: c.booked_at,
        booked_time: c.booked_time,
        kind: c.kind,
        batch,
        status: c.status,
        more,
        original_amount: c.original_amount,
        original_currency: c.original_currency,
        fee: c.fee,
        balance: c.balance,
    };
    let col_err = |k: &str, msg: &str| {
        config_error(
            path,
            format!("key `{}`: {msg}", key(&format!("columns.{k}"))),
        )
    };
    match (
        &columns.amount,
        columns.debit.is_some() || columns.credit.is_some(),
    ) {
        (Some(_), true) => {
            return Err(col_err(
                "amount",
                "give either amount or debit/credit columns, not both",
            ));
        }
        (None, false) => {
            return Err(col_err(
                "amount",
                "missing (or give debit and/or credit columns)",
            ));
        }
        _ => {}
    }
    if columns.sign.is_some() && columns.amount.is_none() {
        return Err(col_err("sign", "a sign column needs an amount column"));
    }
    if columns.sign.is_some() && signs.is_empty() {
        return Err(config_error(
            path,
            format!(
                "key `{}` is missing: map every value of the sign column to credit or debit",
                key("signs")
            ),
        ));
    }
    let booked_statuses: std::collections::BTreeSet<String> = s
        .booked_statuses
        .unwrap_or_default()
        .iter()
        .map(|v| v.trim().to_uppercase())
        .filter(|v| !v.is_empty())
        .collect();
    if columns.status.is_some() && booked_statuses.is_empty() {
        return Err(config_error(
            path,
            format!(
                "key `{}` is missing: name the status values that mean booked",
                key("booked_statuses")
            ),
        ));
    }
    if columns.status.is_none() && !booked_statuses.is_empty() {
        return Err(col_err(
            "status",
            "missing: `booked_statuses` is given but no status column",
        ));
    }
    if columns.sign.is_none() && !signs.is_empty() {
        return Err(col_err(
            "sign",
            "missing: `signs` is given but no sign column",
        ));
    }
    match (&columns.currency, currency) {
        (Some(_), Some(_)) => {
            return Err(config_error(
                path,
                format!(
                    "keys `{}`/`{}`: give one of them",
                    key("currency"),
                    key("columns.currency")
                ),
            ));
        }
        (None, None) => {
            return Err(col_err(
                "currency",
                "missing (or give the source's fixed `currency`)",
            ));
        }
        _ => {}
    }
    if !has_header {
        for (k, v) in [
            ("provider_txn_id", &columns.provider_txn_id),
            ("reference", &columns.reference),
            ("recipient", &columns.recipient),
            ("amount", &columns.amount),
            ("debit", &columns.debit),
            ("credit", &columns.credit),
            ("sign", &columns.sign),
            ("currency", &columns.currency),
            ("booked_at", &Some(columns.booked_at.clone())),
            ("booked_time", &columns.booked_time),
            ("kind", &columns.kind),
            ("batch", &columns.batch),
            ("original_amount", &columns.original_amount),
            ("original_currency", &columns.original_currency),
            ("fee", &columns.fee),
            ("balance", &columns.balance),
        ] {
            if let Some(v) = v
                && column_index(v).is_none()
                && column_rest(v).is_none()
            {
                return Err(col_err(
                    k,
                    &format!("{v:?}: without a header, name columns by position (`#1`, `#2`, …)"),
                ));
            }
        }
        for (k, list) in &columns.more {
            if let Some(v) = list
                .iter()
                .find(|v| column_index(v).is_none() && column_rest(v).is_none())
            {
                return Err(col_err(
                    k,
                    &format!("{v:?}: without a header, name columns by position (`#1`, `#2`, …)"),
                ));
            }
        }
    }
    for (k, v) in [
        ("amount", &columns.amount),
        ("debit", &columns.debit),
        ("credit", &columns.credit),
        ("original_amount", &columns.original_amount),
        ("fee", &columns.fee),
        ("balance", &columns.balance),
    ] {
        if let Some(v) = v
            && column_rest(v).is_some()
        {
            return Err(col_err(
                k,
                &format!("{v:?}: `#N..` (column N and all after it) is for text fields only"),
            ));
        }
    }
    match (&columns.original_amount, &columns.original_currency) {
        (Some(_), None) => {
            return Err(col_err(
                "original_currency",
                "missing: an original amount needs its currency column (it is never read as the account currency)",
            ));
        }
        (None, Some(_)) => {
            return Err(col_err(
                "original_amount",
                "missing: `original_currency` is given but no original amount column",
            ));
        }
        _ => {}
    }
    let net_amount = match (s.net_amount.as_deref(), &columns.fee) {
        (None, None) => None,
        (Some(v), Some(_)) => match v.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["amount", "-", "fee"] => Some(NetAmount::MinusFee),
            ["amount", "+", "fee"] => Some(NetAmount::PlusFee),
            _ => {
                return Err(config_error(
                    path,
                    format!(
                        "key `{}`: {v:?} (hint: \"amount - fee\" or \"amount + fee\")",
                        key("net_amount")
                    ),
                ));
            }
        },
        (Some(_), None) => {
            return Err(col_err(
                "fee",
                "missing: `net_amount` is given but no fee column",
            ));
        }
        (None, Some(_)) => {
            return Err(config_error(
                path,
                format!(
                    "key `{}` is missing: say how the fee column makes the amount (\"amount - fee\" or \"amount + fee\")",
                    key("net_amount")
                ),
            ));
        }
    };
    let mut skip_rows = Vec::new();
    for (i, r) in s.skip_rows.unwrap_or_default().into_iter().enumerate() {
        let up = |v: &[String]| -> Vec<String> {
            v.iter()
                .map(|x| x.trim().to_uppercase())
                .filter(|x| !x.is_empty())
                .collect()
        };
        let rule = SkipRow {
            column: r.column.clone(),
            values: up(&r.values),
            contains: up(&r.contains),
        };
        let k = key(&format!("skip_rows[{i}]"));
        if rule.values.is_empty() && rule.contains.is_empty() {
            return Err(config_error(
                path,
                format!(
                    "key `{k}`: give `values` or `contains` (the cells that mark a row to skip)"
                ),
            ));
        }
        if r.column.trim().is_empty()
            || column_rest(&r.column).is_some()
            || (!has_header && column_index(&r.column).is_none())
        {
            return Err(config_error(
                path,
                format!(
                    "key `{k}.column`: {:?} is not one column (a header name, or `#N`)",
                    r.column
                ),
            ));
        }
        skip_rows.push(rule);
    }
    Ok(SourceConfig {
        name: String::new(),
        role,
        format,
        path: SourcePath::Fixed {
            path: PathBuf::new(),
            complete: None,
        },
        timezone,
        encoding,
        timestamp_format,
        number_format: crate::money::NumberFormat { decimal, thousands },
        amount_symbols,
        delimiter: delimiter as u8,
        quote: quote as u8,
        has_header,
        skip_lines: s.skip_lines.unwrap_or(0),
        skip_footer: s.skip_footer.unwrap_or(0),
        sheet: s.sheet,
        negate_amounts: s.negate_amounts.unwrap_or(false),
        currency,
        columns,
        kinds,
        signs,
        booked_statuses,
        completeness: completeness.unwrap_or(Completeness::None),
        empty_means_no_activity,
        remote: None,
        join_separator: s.join_separator.unwrap_or_else(|| " ".to_string()),
        net_amount,
        skip_rows,
        skip_zero_amounts: s.skip_zero_amounts.unwrap_or(false),
    })
}

/// A `#N` column reference (1-based) as a 0-based index.
pub fn column_index(name: &str) -> Option<usize> {
    name.trim()
        .strip_prefix('#')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .map(|n| n - 1)
}

/// A `#N..` column reference (column N and every field after it, for rows wider than the
/// header) as the 0-based index of its first column.
pub fn column_rest(name: &str) -> Option<usize> {
    name.trim().strip_suffix("..").and_then(column_index)
}

/// Joins `rel` to `base` and removes `.` and `name/..` pairs lexically, so messages show
/// `var/demo/out` rather than `sample-data/../var/demo/out`.
pub fn join_clean(base: &Path, rel: impl AsRef<Path>) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Resolves `sqlite://relative.db` against `base`; `None` for unsupported schemes.
fn resolve_database_url(url: &str, base: &Path) -> Option<String> {
    if is_postgres(url) {
        return Some(url.to_string());
    }
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    if rest == ":memory:" || rest.starts_with('/') {
        return Some(format!("sqlite://{rest}"));
    }
    Some(format!("sqlite://{}", join_clean(base, rest).display()))
}

// ---------------------------------------------------------------------------------------------
// [email]: the alert sent after every run (issue 5). Kept in one block so edits to the rest of
// the configuration merge cleanly.
// ---------------------------------------------------------------------------------------------

/// `[email]` as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmail {
    /// Sender, e.g. `recon <recon@example.com>`.
    from: String,
    /// Recipients of every alert.
    to: Vec<String>,
    /// Outcome name (`FAILED_BUT_PAID`) or outcome family (`money_at_risk`) → more recipients,
    /// added when the run has at least one row of that outcome or family.
    #[serde(default)]
    extra_recipients: BTreeMap<String, Vec<String>>,
    /// Text put before every subject.
    #[serde(default = "default_subject_prefix")]
    subject_prefix: String,
    /// `file` (default: `email.eml` in the run folder) or `smtp` (needs `[email.smtp]`).
    #[serde(default = "default_transport")]
    transport: String,
    /// Attachments larger than this (KiB) are left out; the body says where the file is.
    #[serde(default = "default_max_attachment_kib")]
    max_attachment_kib: u64,
    /// SMTP settings (used when `transport = "smtp"`).
    smtp: Option<RawSmtp>,
}

/// `[email.smtp]` as written in the file. Credentials are never written here, only the names
/// of the environment variables that hold them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSmtp {
    /// Server name (also the name its TLS certificate must carry).
    host: String,
    /// Port; default 587 for `starttls`, 465 for `implicit`, 25 for `none`.
    port: Option<u16>,
    /// `starttls` (default), `implicit` (SMTPS) or `none` (loopback relays only).
    #[serde(default = "default_tls")]
    tls: String,
    /// Name of the environment variable holding the user name.
    username_env: Option<String>,
    /// Name of the environment variable holding the password.
    password_env: Option<String>,
    /// Connection and command timeout in seconds.
    #[serde(default = "default_smtp_timeout")]
    timeout_seconds: u64,
    /// PEM file of extra trusted root certificates (relative to this file), added to the
    /// system roots, e.g. for a company CA. Verification itself cannot be switched off.
    ca_file: Option<PathBuf>,
}

fn default_subject_prefix() -> String {
    "[recon]".into()
}
fn default_transport() -> String {
    "file".into()
}
fn default_max_attachment_kib() -> u64 {
    10 * 1024
}
fn default_tls() -> String {
    "starttls".into()
}
fn default_smtp_timeout() -> u64 {
    30
}

/// Who gets more recipients: one outcome or a whole outcome family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecipientKey {
    /// Rows of this outcome.
    Outcome(crate::model::Outcome),
    /// Rows of any outcome of this family.
    Family(crate::model::Family),
}

/// A validated `[email]` section.
#[derive(Debug, Clone)]
pub struct EmailConfig {
    /// Sender.
    pub from: lettre::message::Mailbox,
    /// Recipients of every alert.
    pub to: Vec<lettre::message::Mailbox>,
    /// More recipients when the run has rows of an outcome or family.
    pub extra_recipients: BTreeMap<RecipientKey, Vec<lettre::message::Mailbox>>,
    /// Subject prefix.
    pub subject_prefix: String,
    /// How the message leaves.
    pub transport: EmailTransport,
    /// Largest attachment included, in bytes.
    pub max_attachment_bytes: u64,
}

/// How the alert is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailTransport {
    /// `email.eml` in the run folder.
    File,
    /// An SMTP server.
    Smtp(SmtpConfig),
}

/// TLS mode of an SMTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS; refused if the server cannot.
    StartTls,
    /// TLS from the first byte (SMTPS).
    Implicit,
    /// No encryption (only for a relay on the loopback interface).
    None,
}

/// A validated `[email.smtp]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// Server.
    pub host: String,
    /// Port.
    pub port: u16,
    /// TLS mode.
    pub tls: SmtpTls,
    /// Environment variable with the user name.
    pub username_env: Option<String>,
    /// Environment variable with the password.
    pub password_env: Option<String>,
    /// Timeout.
    pub timeout: std::time::Duration,
    /// Extra trusted roots (`ca_file`), read and checked when the config is loaded.
    pub ca: Option<CaFile>,
}

/// The extra trusted roots of `email.smtp.ca_file`: the file's PEM text, kept from the time
/// it was validated, so sending uses exactly what was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFile {
    /// The file (resolved against the config file's folder).
    pub path: PathBuf,
    /// Its PEM text; at least one certificate, each one usable as a trust anchor.
    pub pem: Vec<u8>,
}

impl CaFile {
    /// Reads and checks `path`: readable, at least one PEM certificate, and every certificate
    /// accepted as a root by the TLS library. The error names the file, not the config key
    /// (the caller adds that).
    fn load(path: PathBuf) -> std::result::Result<CaFile, String> {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject;
        let pem =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let count = CertificateDer::pem_slice_iter(&pem)
            .try_fold(0usize, |n, c| c.map(|_| n + 1))
            .map_err(|e| format!("{} is not valid PEM: {e}", path.display()))?;
        if count == 0 {
            return Err(format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                path.display()
            ));
        }
        // Build TLS parameters from these roots alone (no system roots needed to check them):
        // a certificate that is not a usable trust anchor fails here, not at the first alert.
        let cert = lettre::transport::smtp::client::Certificate::from_pem(&pem)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        lettre::transport::smtp::client::TlsParameters::builder("localhost".into())
            .certificate_store(lettre::transport::smtp::client::CertificateStore::None)
            .add_root_certificate(cert)
            .build()
            .map_err(|e| format!("{} is not a usable root certificate: {e}", path.display()))?;
        Ok(CaFile { path, pem })
    }
}

impl SmtpConfig {
    /// Reads the credentials from the environment variables named in the config. The error
    /// names the variable, never its value.
    pub fn credentials(&self) -> Result<Option<(String, String)>> {
        let (Some(user_var), Some(pass_var)) = (&self.username_env, &self.password_env) else {
            return Ok(None);
        };
        let read = |var: &str| {
            std::env::var(var).map_err(|_| {
                fail(
                    Failure::Config,
                    format!("email: environment variable {var} (named in [email.smtp]) is not set"),
                )
            })
        };
        Ok(Some((read(user_var)?, read(pass_var)?)))
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl RawEmail {
    fn validate(self, path: &Path, base: &Path) -> Result<EmailConfig> {
        let mailbox = |key: &str, value: &str| -> Result<lettre::message::Mailbox> {
            value.parse().map_err(|e| {
                config_error(
                    path,
                    format!("key `{key}`: {value:?} is not an address: {e}"),
                )
            })
        };
        let from = mailbox("email.from", &self.from)?;
        if self.to.is_empty() {
            return Err(config_error(
                path,
                "key `email.to`: give at least one recipient",
            ));
        }
        let to = self
            .to
            .iter()
            .map(|a| mailbox("email.to", a))
            .collect::<Result<Vec<_>>>()?;
        let mut extra_recipients = BTreeMap::new();
        for (name, addrs) in &self.extra_recipients {
            let key = match (
                crate::model::Outcome::parse(name),
                crate::model::Family::parse(name),
            ) {
                (Some(o), _) => RecipientKey::Outcome(o),
                (None, Some(f)) => RecipientKey::Family(f),
                (None, None) => {
                    return Err(config_error(
                        path,
                        format!(
                            "key `email.extra_recipients.{name}`: not an outcome or family (hint: an outcome such as FAILED_BUT_PAID, or one of {})",
                            crate::model::Family::ALL.map(|f| f.as_str()).join(", ")
                        ),
                    ));
                }
            };
            let list = addrs
                .iter()
                .map(|a| mailbox(&format!("email.extra_recipients.{name}"), a))
                .collect::<Result<Vec<_>>>()?;
            extra_recipients.insert(key, list);
        }
        let transport = match self.transport.as_str() {
            "file" => EmailTransport::File,
            "smtp" => {
                let Some(s) = self.smtp else {
                    return Err(config_error(
                        path,
                        "key `email.transport`: \"smtp\" needs an [email.smtp] section with host",
                    ));
                };
                let tls = match s.tls.as_str() {
                    "starttls" => SmtpTls::StartTls,
                    "implicit" => SmtpTls::Implicit,
                    "none" => SmtpTls::None,
                    other => {
                        return Err(config_error(
                            path,
                            format!(
                                "key `email.smtp.tls`: {other:?} is not starttls, implicit or none"
                            ),
                        ));
                    }
                };
                if s.username_env.is_some() != s.password_env.is_some() {
                    return Err(config_error(
                        path,
                        "keys `email.smtp.username_env`/`password_env`: give both or neither",
                    ));
                }
                if tls == SmtpTls::None && s.password_env.is_some() && !is_loopback(&s.host) {
                    return Err(config_error(
                        path,
                        format!(
                            "key `email.smtp.tls`: \"none\" would send the password in clear text to {} (hint: use starttls or implicit)",
                            s.host
                        ),
                    ));
                }
                let ca = match s.ca_file {
                    None => None,
                    Some(_) if tls == SmtpTls::None => {
                        return Err(config_error(
                            path,
                            "key `email.smtp.ca_file`: tls = \"none\" verifies no certificate (hint: use starttls or implicit, or remove ca_file)",
                        ));
                    }
                    Some(f) => Some(CaFile::load(join_clean(base, f)).map_err(|e| {
                        config_error(path, format!("key `email.smtp.ca_file`: {e}"))
                    })?),
                };
                EmailTransport::Smtp(SmtpConfig {
                    port: s.port.unwrap_or(match tls {
                        SmtpTls::StartTls => 587,
                        SmtpTls::Implicit => 465,
                        SmtpTls::None => 25,
                    }),
                    host: s.host,
                    tls,
                    username_env: s.username_env,
                    password_env: s.password_env,
                    timeout: std::time::Duration::from_secs(s.timeout_seconds.max(1)),
                    ca,
                })
            }
            other => {
                return Err(config_error(
                    path,
                    format!("key `email.transport`: {other:?} is not file or smtp"),
                ));
            }
        };
        Ok(EmailConfig {
            from,
            to,
            extra_recipients,
            subject_prefix: self.subject_prefix,
            transport,
            max_attachment_bytes: self.max_attachment_kib.saturating_mul(1024),
        })
    }
}

#[cfg(test)]
mod email_tests {
    use super::*;

    const BASE: &str =
        "timezone = \"UTC\"\ndatabase_url = \"sqlite://x.db\"\noutput_dir = \"out\"\n";

    fn parse(email: &str) -> Result<Config> {
        Config::parse(&format!("{BASE}{email}"), Path::new("job.toml"))
    }

    #[test]
    fn email_section_is_optional_and_defaults_to_the_file_transport() {
        assert!(parse("").unwrap().email.is_none());
        let c = parse("[email]\nfrom = \"recon@x.test\"\nto = [\"fin@x.test\"]\n").unwrap();
        let e = c.email.unwrap();
        assert_eq!(e.transport, EmailTransport::File);
        assert_eq!(e.subject_prefix, "[recon]");
    }

    #[test]
    fn smtp_defaults_and_family_recipients() {
        let c = parse(
            "[email]\nfrom = \"recon@x.test\"\nto = [\"fin@x.test\"]\ntransport = \"smtp\"\n\
             [email.extra_recipients]\nFAILED_BUT_PAID = [\"treasury@x.test\"]\nreview = [\"ops@x.test\"]\n\
             [email.smtp]\nhost = \"mail.x.test\"\ntls = \"implicit\"\nusername_env = \"U\"\npassword_env = \"P\"\n",
        )
        .unwrap();
        let e = c.email.unwrap();
        let EmailTransport::Smtp(s) = &e.transport else {
            panic!("smtp expected")
        };
        assert_eq!((s.port, s.tls), (465, SmtpTls::Implicit));
        assert_eq!(e.extra_recipients.len(), 2);
        assert!(
            e.extra_recipients
                .contains_key(&RecipientKey::Outcome(crate::model::Outcome::FailedButPaid))
        );
    }

    #[test]
    fn bad_email_settings_name_the_key() {
        for (text, key) in [
            (
                "[email]\nfrom = \"not an address\"\nto = [\"a@x.test\"]\n",
                "email.from",
            ),
            ("[email]\nfrom = \"a@x.test\"\nto = []\n", "email.to"),
            (
                "[email]\nfrom = \"a@x.test\"\nto = [\"a@x.test\"]\ntransport = \"smtp\"\n",
                "email.transport",
            ),
            (
                "[email]\nfrom = \"a@x.test\"\nto = [\"a@x.test\"]\n[email.extra_recipients]\nTREASURY = [\"t@x.test\"]\n",
                "email.extra_recipients.TREASURY",
            ),
            (
                "[email]\nfrom = \"a@x.test\"\nto = [\"a@x.test\"]\ntransport = \"smtp\"\n[email.smtp]\nhost = \"mail.x.test\"\ntls = \"none\"\nusername_env = \"U\"\npassword_env = \"P\"\n",
                "email.smtp.tls",
            ),
            (
                "[email]\nfrom = \"a@x.test\"\nto = [\"a@x.test\"]\npassword = \"hunter2\"\n",
                "password",
            ),
        ] {
            let err = parse(text).unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains(key), "{key}: {msg}");
            assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
        }
    }

    #[test]
    fn ca_file_must_be_a_readable_pem_of_usable_roots() {
        let dir = tempfile::tempdir().unwrap();
        let smtp = |tls: &str, ca: &str| {
            format!(
                "[email]\nfrom = \"a@x.test\"\nto = [\"a@x.test\"]\ntransport = \"smtp\"\n\
                 [email.smtp]\nhost = \"mail.x.test\"\ntls = \"{tls}\"\nca_file = \"{ca}\"\n"
            )
        };
        let job = dir.path().join("job.toml");
        std::fs::write(dir.path().join("text.pem"), "not a certificate\n").unwrap();
        // Valid base64 in a CERTIFICATE block, but not a certificate.
        std::fs::write(
            dir.path().join("junk.pem"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("broken.pem"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
        )
        .unwrap();
        for (tls, ca, says) in [
            ("starttls", "missing.pem", "cannot read"),
            ("implicit", "text.pem", "no PEM certificate"),
            ("starttls", "junk.pem", "not a usable root certificate"),
            ("starttls", "broken.pem", "not valid PEM"),
            ("none", "text.pem", "verifies no certificate"),
        ] {
            let err = Config::parse(&format!("{BASE}{}", smtp(tls, ca)), &job).unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains("email.smtp.ca_file"), "{ca}: {msg}");
            assert!(msg.contains(says), "{ca}: {msg}");
            assert!(msg.contains(&job.display().to_string()), "{ca}: {msg}");
            if tls != "none" {
                // Resolved against the config file's folder.
                let file = dir.path().join(ca).display().to_string();
                assert!(msg.contains(&file), "{ca}: {msg}");
            }
            assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
        }
    }

    #[test]
    fn missing_credential_variable_is_named_without_a_value() {
        let s = SmtpConfig {
            host: "h".into(),
            port: 25,
            tls: SmtpTls::None,
            username_env: Some("RECON_TEST_SURELY_UNSET_USER".into()),
            password_env: Some("RECON_TEST_SURELY_UNSET_PASS".into()),
            timeout: std::time::Duration::from_secs(1),
            ca: None,
        };
        let msg = format!("{:#}", s.credentials().unwrap_err());
        assert!(msg.contains("RECON_TEST_SURELY_UNSET_USER"), "{msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
timezone = "Europe/Berlin"
database_url = "sqlite://var/recon.db"
output_dir = "out"

[[source]]
name = "psp"
format = "csv"
path = "st.csv"
timestamp_format = "rfc3339"
[source.columns]
recipient = "iban"
amount = "amount"
currency = "ccy"
booked_at = "at"
"#;

    #[test]
    fn relative_paths_are_anchored_at_the_config_file() {
        let c = Config::parse(MINIMAL, Path::new("/etc/recon/job.toml")).unwrap();
        assert_eq!(c.database_url, "sqlite:///etc/recon/var/recon.db");
        assert_eq!(c.output_dir, PathBuf::from("/etc/recon/out"));
        assert_eq!(c.sources[0].timezone, chrono_tz::Europe::Berlin);
        assert_eq!(c.stale_submitting_minutes, 30);
    }

    #[test]
    fn completeness_is_named_when_claimed_and_checked_when_given() {
        let with = |extra: &str| {
            Config::parse(
                &MINIMAL.replace("timestamp_format", &format!("{extra}\ntimestamp_format")),
                Path::new("job.toml"),
            )
        };
        // No claim, no key needed; a claim without a proof is an error naming the key.
        assert_eq!(
            with("").unwrap().sources[0].completeness,
            Completeness::None
        );
        let daily = MINIMAL.replace("st.csv", "st-{date}.csv");
        let err = Config::parse(&daily, Path::new("job.toml")).unwrap_err();
        assert!(
            format!("{err:#}").contains("source[0].completeness` is missing"),
            "{err:#}"
        );
        for c in Completeness::ALL
            .into_iter()
            .filter(|c| *c != Completeness::Statement)
        {
            let cfg = with(&format!("completeness = \"{}\"", c.as_str())).unwrap();
            assert_eq!(cfg.sources[0].completeness, c);
        }
        for bad in ["statement", "trust_me"] {
            let err = with(&format!("completeness = \"{bad}\"")).unwrap_err();
            assert!(
                format!("{err:#}").contains("source[0].completeness"),
                "{err:#}"
            );
        }
        assert!(with("empty_file = \"no_activity\"").unwrap().sources[0].empty_means_no_activity);
        assert!(with("empty_file = \"maybe\"").is_err());
    }

    #[test]
    fn parent_components_are_folded() {
        assert_eq!(
            join_clean(Path::new("sample-data"), "../var/out"),
            PathBuf::from("var/out")
        );
        assert_eq!(join_clean(Path::new("a"), "./b/../c"), PathBuf::from("a/c"));
        assert_eq!(join_clean(Path::new(""), "../x"), PathBuf::from("../x"));
    }

    #[test]
    fn unknown_keys_are_rejected_with_file_and_key() {
        let text = MINIMAL.replace("output_dir", "outptu_dir = \"x\"\noutput_dir");
        let err = Config::parse(&text, Path::new("job.toml")).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("job.toml"), "{msg}");
        assert!(msg.contains("outptu_dir"), "{msg}");
        assert_eq!(crate::exit::code_for(&err), crate::exit::CONFIG);
    }

    #[test]
    fn bad_time_zone_names_the_key() {
        let text = MINIMAL.replace("Europe/Berlin", "Europe/Berlim");
        let msg = format!(
            "{:#}",
            Config::parse(&text, Path::new("job.toml")).unwrap_err()
        );
        assert!(
            msg.contains("`timezone`") && msg.contains("Berlim"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_column_key_is_rejected() {
        let text = MINIMAL.replace("ccy\"", "ccy\"\nbeneficiary = \"x\"");
        let msg = format!(
            "{:#}",
            Config::parse(&text, Path::new("job.toml")).unwrap_err()
        );
        assert!(msg.contains("beneficiary"), "{msg}");
    }
}
