//! The job configuration: one TOML file, validated strictly before any data is read.
//!
//! Relative paths in the file are resolved against the file's own folder, so a config works
//! from any working directory. `RECON_DATABASE_URL` (or else `DATABASE_URL`) overrides
//! `database_url`.

pub mod database;
pub mod payout_status;
pub mod status_api;

use crate::exit::{Failure, fail};
pub use crate::model::{Format, LineKind, Role, TimestampFormat};
pub use crate::sources::config::{Completeness, FormatSettings, SourceConfig, SourcePath};
pub use crate::sources::keys::join_clean;
use crate::sources::keys::{config_error, parse_tz};
pub use crate::sources::remote;
pub use crate::sources::tabular::{
    Columns, NetAmount, Sign, SkipRow, TabularSettings, column_index, column_rest,
};
pub use crate::sources::text::TextEncoding;
use crate::timeparse::Micros;
use anyhow::Result;
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
    /// `[shadow]`: rules each night also plans with, applying nothing (see [`ShadowConfig`]).
    shadow: Option<RawShadow>,
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
    /// The shape of our payment ids in a statement line's reference (a regex): a reference of
    /// this shape that names no payment of ours is a ticket, never fuzzy evidence for another
    /// payment. Default: UUIDs when the ledger's ids are UUIDs, no shape otherwise.
    reference_pattern: Option<String>,
    /// Folder that receives the files `recon pull` fetches for remote sources, one sub-folder
    /// per source (relative to this file; default `inbox`).
    inbox: Option<PathBuf>,
    /// The largest statement (or decision) file read, in MiB (default 256, sized to the
    /// CronJob's 3 GiB, docs/operations.md "Memory"): checked from the file's size before
    /// reading; a larger file is unreadable.
    max_file_mb: Option<u64>,
    /// The most one part of an XLSX workbook (statement or decision file) may inflate to, in
    /// MiB (default 512); a workbook over it is unreadable.
    max_inflated_mb: Option<u64>,
    /// The most cells (rows × columns) the used range of a workbook's sheet may span (default
    /// 50,000,000); a sheet over it is unreadable.
    max_sheet_cells: Option<u64>,
    /// The memory a run may use, in MiB (default: the limit of its cgroup, the pod's
    /// `resources.limits.memory`): a statement file the memory model says would not fit is
    /// unreadable instead of an OOM-killed night.
    memory_limit_mb: Option<u64>,
    /// The longest line of a csv statement, in bytes (default 1 MiB); a longer one makes its
    /// file unreadable.
    max_line_bytes: Option<usize>,
    /// The most rejected lines one statement file may have (default 1000); one more makes the
    /// whole file unreadable.
    max_rejected_lines: Option<usize>,
    /// Statement sources (`[[source]]`): only checked to be a list here; each table is read
    /// with its spans by [`crate::sources::config`], which dispatches on its `format`.
    #[serde(default, rename = "source")]
    sources: Vec<serde::de::IgnoredAny>,
    /// The email alert (`[email]`); no email is built when absent.
    email: Option<RawEmail>,
    /// Provider status queries (`[[status_api]]`, at most one).
    #[serde(default)]
    status_api: Vec<status_api::RawStatusApi>,
    /// The files a bank sends back about payouts (`[[payout_status]]`): only checked to be a
    /// list here; each table is read with its spans by [`payout_status`].
    #[serde(default)]
    payout_status: Vec<serde::de::IgnoredAny>,
    /// Folder of reviewers' decision files (relative to this file): one sub-folder per
    /// reviewer, named as the actor; the next `recon run` applies what is there first.
    decisions_inbox: Option<PathBuf>,
    /// How many different reviewers a decision that moves money needs (1 or 2): `failed`,
    /// `succeeded`, `confirm N` on a case with an unresolved payment, `dismiss` of a critical
    /// case.
    #[serde(default = "default_approvals")]
    approvals: u8,
    /// How many different reviewers a `succeeded` decision needs (1 or 2; at least
    /// `approvals`).
    #[serde(default = "default_approvals")]
    approvals_succeeded: u8,
    /// The reasons a `dismiss` may give (`dismiss: <reason>`); default
    /// [`DEFAULT_DISMISS_REASONS`].
    dismiss_reasons: Option<Vec<String>>,
    /// Currency → the largest amount difference one `accept difference` settles, as decimal
    /// text in that currency (`EUR = "5.00"`); a currency not listed: refused.
    #[serde(default)]
    write_off_limit: BTreeMap<String, String>,
    /// The reviewers (`[[reviewer]]`): who a decision is recorded as, by the OS user that
    /// applies it or owns its inbox folder.
    #[serde(default, rename = "reviewer")]
    reviewers: Vec<RawReviewer>,
    /// How long a run waits for a `recon decisions apply` that holds the run lock (`30s`,
    /// `10m`, `1h`; default 30m) before it exits with the LOCKED code.
    apply_wait: Option<String>,
    /// Bounds on every database wait (`[database]`).
    #[serde(default)]
    database: database::RawDatabase,
    /// What splits a night into parts no match crosses (`[partition]`, see
    /// [`crate::partition`]).
    partition: Option<crate::partition::RawPartition>,
    /// The currency cases are ranked and totalled in (ISO 4217, e.g. `EUR`); absent: each
    /// case's money stays in its own currencies and cases rank by the rule without rates.
    reporting_currency: Option<String>,
    /// Exchange rates for `reporting_currency` (`[rates]`).
    rates: Option<RawRates>,
}

/// `[rates]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRates {
    /// A rates file in the ECB euro reference rates layout (CSV or XML), relative to this
    /// file; `{date}` is the night's date (`YYYY-MM-DD`).
    path: Option<String>,
    /// Currency → units per 1 EUR as decimal text (`USD = "1.08"`): used for what the file
    /// does not hold.
    #[serde(default)]
    fixed: BTreeMap<String, String>,
}

/// `[shadow]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShadow {
    /// The shadow rules folder (relative to the job file).
    rules_dir: PathBuf,
}

/// `[shadow]`: a candidate rules folder each night also plans with, on the same evidence,
/// applying nothing: the report and the email say what it would change (`recon backtest`
/// replays recorded nights with one instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowConfig {
    /// The shadow rules folder.
    pub rules_dir: PathBuf,
}

/// The reporting currency and where its rates come from (`reporting_currency`, `[rates]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportingConfig {
    /// ISO 4217 code.
    pub currency: &'static str,
    /// The rates file (resolved against the job file's folder; may hold `{date}`).
    pub rates_path: Option<String>,
    /// Currency → units per 1 EUR, from `[rates.fixed]`.
    pub fixed: BTreeMap<String, rust_decimal::Decimal>,
}

impl ReportingConfig {
    /// The valuation for the night of `date`, and what a person must know about its rates
    /// ([`crate::rates::valuation`]).
    pub fn valuation(&self, date: chrono::NaiveDate) -> (crate::rates::Valuation, Vec<String>) {
        crate::rates::valuation(self.currency, self.rates_path.as_deref(), &self.fixed, date)
    }
}

/// Validates `reporting_currency` and `[rates]`.
fn reporting(
    path: &Path,
    base: &Path,
    currency: Option<String>,
    rates: Option<RawRates>,
) -> Result<Option<ReportingConfig>> {
    let Some(currency) = currency else {
        if rates.is_some() {
            return Err(config_error(
                path,
                "key `rates`: rates are used only with `reporting_currency` (hint: add \
                 reporting_currency = \"EUR\")",
            ));
        }
        return Ok(None);
    };
    let code = |key: &str, c: &str| -> Result<&'static str> {
        crate::money::currency(c.trim())
            .map(|(c, _)| c)
            .map_err(|e| config_error(path, format!("key `{key}`: {c:?}: {e}")))
    };
    let currency = code("reporting_currency", &currency)?;
    let rates = rates.unwrap_or_default();
    let mut fixed = BTreeMap::new();
    for (c, r) in &rates.fixed {
        let key = format!("rates.fixed.{c}");
        let c = code(&key, c)?;
        let rate: rust_decimal::Decimal = r.trim().parse().map_err(|_| {
            config_error(
                path,
                format!(
                    "key `{key}`: {r:?} is not a decimal rate (units per 1 EUR, e.g. \"1.08\")"
                ),
            )
        })?;
        if rate <= rust_decimal::Decimal::ZERO {
            return Err(config_error(
                path,
                format!("key `{key}`: a rate must be positive"),
            ));
        }
        if c == "EUR" && rate != rust_decimal::Decimal::ONE {
            return Err(config_error(
                path,
                format!("key `{key}`: rates are per 1 EUR: the euro's is 1"),
            ));
        }
        fixed.insert(c.to_string(), rate);
    }
    let rates_path = match rates.path {
        Some(p) if p.trim().is_empty() => {
            return Err(config_error(path, "key `rates.path`: must not be empty"));
        }
        Some(p) => Some(join_clean(base, &p).to_string_lossy().into_owned()),
        None => None,
    };
    Ok(Some(ReportingConfig {
        currency,
        rates_path,
        fixed,
    }))
}

fn default_approvals() -> u8 {
    1
}

/// One `[[reviewer]]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReviewer {
    name: String,
    login: Option<String>,
    uid: Option<u32>,
}

/// A reviewer: the name recon records, and the OS user that is this person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewer {
    /// The name recorded as actor and approver (as configured).
    pub name: String,
    /// OS login name (`alice`), resolved to a uid when needed.
    pub login: Option<String>,
    /// Numeric uid (a pod's `runAsUser`, a file share's owner).
    pub uid: Option<u32>,
}

/// Reviewers' decisions (`recon decisions apply` and the decisions inbox).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionSettings {
    /// `decisions_inbox`: `<it>/<reviewer>/*.xlsx`, applied by the next run (None: no inbox).
    pub inbox: Option<PathBuf>,
    /// `approvals`: different reviewers a decision that moves money needs (`failed`,
    /// `succeeded`, `confirm N` on a case with an unresolved payment, `dismiss` of a critical
    /// case).
    pub approvals: u8,
    /// `approvals_succeeded`, at least `approvals`: reviewers a `succeeded` decision needs.
    pub approvals_succeeded: u8,
    /// `[[reviewer]]`: empty when none is configured (then the actor is the `--actor` or the
    /// login name, as typed, and `approvals = 2` is refused).
    pub reviewers: Vec<Reviewer>,
    /// Where recon keeps what it writes about the inbox's files: `<output_dir>/decisions/`,
    /// one sub-folder per reviewer with the result file of each file applied (recon never
    /// writes into a reviewer's folder).
    pub results_dir: PathBuf,
    /// `apply_wait`: how long a run waits for a `recon decisions apply` that holds the run
    /// lock before it gives up (exit 6).
    pub apply_wait: std::time::Duration,
    /// The largest decision file read (`max_file_mb`, as for statements).
    pub max_file_bytes: u64,
    /// What a decision workbook may inflate to (`max_inflated_mb`, `max_sheet_cells`).
    pub workbook: crate::workbook::WorkbookLimits,
    /// `dismiss_reasons`: the reasons a `dismiss` may give, as configured (never empty).
    pub dismiss_reasons: Vec<String>,
    /// `write_off_limit`: currency → the largest amount difference (absolute) one
    /// `accept difference` settles; empty: `accept difference` is refused.
    pub write_off_limit: BTreeMap<String, rust_decimal::Decimal>,
}

/// The reasons a `dismiss` may give when the job names none (`dismiss_reasons`).
pub const DEFAULT_DISMISS_REASONS: [&str; 4] = [
    "refund requested",
    "ledger corrected",
    "written off",
    "duplicate claimed back",
];

/// The default [`DecisionSettings::dismiss_reasons`].
pub fn default_dismiss_reasons() -> Vec<String> {
    DEFAULT_DISMISS_REASONS
        .iter()
        .map(|r| r.to_string())
        .collect()
}

/// Validates `dismiss_reasons`: a non-empty list of distinct reasons (case ignored), each
/// visible text of at most 60 characters without a comma (the sheet's drop-down separates its
/// entries by commas) or a control character.
fn dismiss_reasons(path: &Path, raw: Option<Vec<String>>) -> Result<Vec<String>> {
    let Some(raw) = raw else {
        return Ok(default_dismiss_reasons());
    };
    if raw.is_empty() {
        return Err(config_error(
            path,
            "key `dismiss_reasons`: must name at least one reason (leave it out for the default)",
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for r in raw {
        let t = r.split_whitespace().collect::<Vec<_>>().join(" ");
        let why = if t.is_empty() {
            Some("is empty")
        } else if t.chars().count() > 60 {
            Some("is longer than 60 characters")
        } else if t.contains(',') {
            Some("holds a comma (the sheet's drop-down separates entries by commas)")
        } else if t.chars().any(char::is_control) {
            Some("holds a control character")
        } else if out.iter().any(|o| o.eq_ignore_ascii_case(&t)) {
            Some("is listed twice")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(config_error(
                path,
                format!("key `dismiss_reasons`: reason {r:?} {why}"),
            ));
        }
        out.push(t);
    }
    Ok(out)
}

/// Validates `write_off_limit`: ISO 4217 codes, each a decimal amount ≥ 0 with no more
/// decimals than the currency has.
fn write_off_limit(
    path: &Path,
    raw: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, rust_decimal::Decimal>> {
    let mut out = BTreeMap::new();
    for (c, v) in raw {
        let key = format!("write_off_limit.{c}");
        let (code, exp) = crate::money::currency(c.trim())
            .map_err(|e| config_error(path, format!("key `{key}`: {c:?}: {e}")))?;
        let limit: rust_decimal::Decimal = v.trim().parse().map_err(|_| {
            config_error(
                path,
                format!("key `{key}`: {v:?} is not a decimal amount (e.g. \"5.00\")"),
            )
        })?;
        if limit.is_sign_negative() || limit.normalize().scale() > exp {
            return Err(config_error(
                path,
                format!(
                    "key `{key}`: {v:?} must be an amount of {code} (not negative, at most {exp} \
                     decimals)"
                ),
            ));
        }
        out.insert(code.to_string(), limit);
    }
    Ok(out)
}

/// The default `apply_wait`.
pub const DEFAULT_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

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
    /// `[shadow]` (None: no shadow rules).
    pub shadow: Option<ShadowConfig>,
    /// Stale SUBMITTING age in minutes.
    pub stale_submitting_minutes: i64,
    /// Settlement lag in hours.
    pub settlement_lag_hours: i64,
    /// Carry-over horizon in days.
    pub carry_over_days: i64,
    /// `evidence_window_before` / `evidence_window_after` as written (`None`: the default, see
    /// `rules::RuleSet::for_job`).
    pub evidence_window: (Option<Micros>, Option<Micros>),
    /// `reference_pattern`, compiled (`None`: derived from the ledger's ids at run time: UUIDs
    /// when every loaded payment id is one, else the shape learnt from those ids, else none;
    /// see `matching::shape::IdShape::for_run`).
    pub reference_pattern: Option<regex::Regex>,
    /// Statement sources.
    pub sources: Vec<SourceConfig>,
    /// Where `recon pull` puts the files of remote sources (`<inbox>/<source>/…`).
    pub inbox: PathBuf,
    /// The email alert; `None` when the file has no `[email]` section.
    pub email: Option<EmailConfig>,
    /// The provider status API (`[[status_api]]`); `None`: recon asks no one.
    pub status_api: Option<status_api::StatusApiConfig>,
    /// The bank's payout status files (`[[payout_status]]`), in the file's order.
    pub payout_status: Vec<payout_status::PayoutStatusConfig>,
    /// Reviewers' decisions.
    pub decisions: DecisionSettings,
    /// Bounds on every database wait (`[database]`).
    pub database: database::DatabaseLimits,
    /// `[partition]`: the night splits into partitions no match crosses (None: one part).
    pub partition: Option<crate::partition::PartitionConfig>,
    /// `reporting_currency` and its `[rates]` (None: no reporting currency).
    pub reporting: Option<ReportingConfig>,
}

/// Validates the `[[reviewer]]` tables: a valid name ([`crate::textsafe::bad_name`]), a login
/// or a uid, and no name, login or uid twice (names compared as [`crate::textsafe::name_key`]).
fn reviewers(path: &Path, raw: Vec<RawReviewer>) -> Result<Vec<Reviewer>> {
    let mut out: Vec<Reviewer> = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let at = format!("reviewer[{i}]");
        if let Some(why) = crate::textsafe::bad_name(&r.name) {
            return Err(config_error(
                path,
                format!(
                    "key `{at}.name`: {:?} {why}",
                    crate::textsafe::visible(&r.name)
                ),
            ));
        }
        if r.name.eq_ignore_ascii_case("recon") {
            return Err(config_error(
                path,
                format!("key `{at}.name`: `recon` is recon's own name in the history"),
            ));
        }
        if r.login.is_none() && r.uid.is_none() {
            return Err(config_error(
                path,
                format!(
                    "key `{at}`: give `login` (an OS user name) or `uid`: the OS user who is {}",
                    r.name
                ),
            ));
        }
        if let Some(l) = &r.login
            && (l.is_empty() || crate::textsafe::bad_name(l).is_some() || l.contains(' '))
        {
            return Err(config_error(
                path,
                format!("key `{at}.login`: not an OS user name"),
            ));
        }
        for o in &out {
            let clash = if crate::textsafe::same_name(&o.name, &r.name) {
                Some("name")
            } else if o.login.is_some() && o.login == r.login {
                Some("login")
            } else if o.uid.is_some() && o.uid == r.uid {
                Some("uid")
            } else {
                None
            };
            if let Some(what) = clash {
                return Err(config_error(
                    path,
                    format!(
                        "key `{at}.{what}`: already {}'s: one person, one reviewer",
                        o.name
                    ),
                ));
            }
        }
        out.push(Reviewer {
            name: r.name,
            login: r.login,
            uid: r.uid,
        });
    }
    Ok(out)
}

impl Config {
    /// The job's `[partition]` section, which `needer` (a command or option of a sharded
    /// night) requires: without one, a config error naming the file and the section.
    pub fn partition_for(&self, needer: &str) -> Result<&crate::partition::PartitionConfig> {
        self.partition.as_ref().ok_or_else(|| {
            fail(
                Failure::Config,
                format!(
                    "{}: {needer} needs a [partition] section (what splits the night)",
                    self.path.display()
                ),
            )
        })
    }

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
        let limits = input_limits(path, &raw)?;
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
        let reference_pattern = raw
            .reference_pattern
            .as_deref()
            .map(|p| {
                if p.trim().is_empty() {
                    return Err(config_error(
                        path,
                        "key `reference_pattern`: must not be empty (hint: leave it out for the default)",
                    ));
                }
                regex::Regex::new(p).map_err(|e| {
                    config_error(path, format!("key `reference_pattern`: invalid regex: {e}"))
                })
            })
            .transpose()?;
        let inbox = join_clean(&base, raw.inbox.unwrap_or_else(|| PathBuf::from("inbox")));
        for (key, v) in [
            ("approvals", raw.approvals),
            ("approvals_succeeded", raw.approvals_succeeded),
        ] {
            if !(1..=2).contains(&v) {
                return Err(config_error(
                    path,
                    format!("key `{key}`: must be 1 or 2 (different reviewers a decision needs)"),
                ));
            }
        }
        let reviewers = reviewers(path, raw.reviewers)?;
        if reviewers.is_empty() && raw.approvals.max(raw.approvals_succeeded) > 1 {
            return Err(config_error(
                path,
                "key `approvals`: two reviewers need a [[reviewer]] table (name, login or uid): \
                 four eyes hold only when recon knows who is who, not from a typed name",
            ));
        }
        let output_dir = join_clean(&base, raw.output_dir);
        let decisions = DecisionSettings {
            inbox: raw.decisions_inbox.map(|d| join_clean(&base, d)),
            approvals: raw.approvals,
            approvals_succeeded: raw.approvals_succeeded.max(raw.approvals),
            reviewers,
            results_dir: output_dir.join("decisions"),
            apply_wait: duration("apply_wait", &raw.apply_wait)?.map_or(DEFAULT_APPLY_WAIT, |us| {
                std::time::Duration::from_micros(us.unsigned_abs())
            }),
            max_file_bytes: limits.max_file_bytes,
            workbook: limits.workbook,
            dismiss_reasons: dismiss_reasons(path, raw.dismiss_reasons)?,
            write_off_limit: write_off_limit(path, &raw.write_off_limit)?,
        };
        let mut sources = Vec::with_capacity(raw.sources.len());
        let tables = crate::sources::keys::array_tables(path, text, "source")?;
        let job = crate::sources::config::Job {
            file: path,
            text,
            base: &base,
            inbox: &inbox,
            timezone,
        };
        for (i, table) in tables.into_iter().enumerate() {
            let mut src = crate::sources::config::job_source(&job, i, table, &sources)?;
            src.limits = limits;
            sources.push(src);
        }
        let mut payout_status = payout_status::read_all(&payout_status::Job {
            file: path,
            text,
            base: &base,
            timezone,
            source_names: sources.iter().map(|s| s.name.as_str()).collect(),
        })?;
        debug_assert_eq!(payout_status.len(), raw.payout_status.len());
        for block in &mut payout_status {
            block.limits = limits;
        }
        let database = raw.database.validate(path)?;
        if raw.partition.is_some() && raw.shadow.is_some() {
            return Err(config_error(
                path,
                "[shadow] in a job with [partition] (hint: shadow rules are planned by nights of \
                 one process; run `recon backtest` for a sharded job)",
            ));
        }
        if raw.partition.is_some() && !payout_status.is_empty() {
            return Err(config_error(
                path,
                "[[payout_status]] in a job with [partition] (hint: the payout status files are \
                 read by nights of one process; sharded nights do not read them yet)",
            ));
        }
        let partition = match raw.partition {
            Some(p) => Some(p.validate(path, &sources)?),
            None => {
                crate::partition::check_unpartitioned(path, &sources)?;
                None
            }
        };
        let reporting = reporting(path, &base, raw.reporting_currency, raw.rates)?;
        let email = raw
            .email
            .map(|e| e.validate(path, &base))
            .transpose()?
            .map(|mut e| {
                // The inbox's folder name, not its server path: reviewers reach it by
                // whatever share they have mapped.
                if e.decisions_folder.is_none() {
                    e.decisions_folder = decisions
                        .inbox
                        .as_ref()
                        .and_then(|d| d.file_name())
                        .map(|f| f.to_string_lossy().into_owned());
                }
                e
            });
        Ok(Config {
            database,
            partition,
            reporting,
            path: path.to_path_buf(),
            timezone,
            database_url,
            ledger: raw.ledger,
            output_dir,
            rules_dir: raw.rules_dir.map(|d| join_clean(&base, d)),
            shadow: raw.shadow.map(|s| ShadowConfig {
                rules_dir: join_clean(&base, s.rules_dir),
            }),
            stale_submitting_minutes: raw.stale_submitting_minutes,
            settlement_lag_hours: raw.settlement_lag_hours,
            carry_over_days: raw.carry_over_days,
            evidence_window,
            reference_pattern,
            sources,
            payout_status,
            inbox,
            decisions,
            email,
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
}

/// The source settings `recon parse` reads with: the source of a job config (`--config`,
/// `--source`), a mapping file (`--mapping`), or a bank format's defaults.
pub fn parse_settings(
    format: Option<&str>,
    mapping: Option<&Path>,
    config: Option<&Path>,
    source: Option<&str>,
) -> Result<SourceConfig> {
    use crate::exit::{Failure, fail};
    let format = format
        .map(|f| {
            Format::parse(f).ok_or_else(|| {
                fail(
                    Failure::Config,
                    format!("--format {f:?}: unsupported (hint: one of csv, xlsx, camt053, camt054, camt052, mt940, bai2, ofx, jsonl, parquet; or pain002, nacha)"),
                )
            })
        })
        .transpose()?;
    if let Some(path) = config {
        let cfg = Config::load(path)?;
        let src = match source {
            Some(name) => cfg.sources.iter().find(|s| s.name == name),
            None => cfg.sources.first(),
        }
        .ok_or_else(|| {
            fail(
                Failure::Config,
                format!(
                    "{}: no such source {:?}",
                    path.display(),
                    source.unwrap_or("(first)")
                ),
            )
        })?;
        if let Some(f) = format
            && f != src.format()
        {
            return Err(fail(
                Failure::Config,
                format!(
                    "--format {f}: source {:?} in {} has format {}",
                    src.name,
                    path.display(),
                    src.format()
                ),
            ));
        }
        return Ok(src.clone());
    }
    let Some(format) = format else {
        return Err(fail(
            Failure::Config,
            "--format is required without --config".to_string(),
        ));
    };
    match mapping {
        Some(m) => SourceConfig::load_mapping(m, format),
        None if format.needs_mapping() => Err(fail(
            Failure::Config,
            format!(
                "--format {format} needs a column mapping (hint: --mapping FILE with the keys of a [[source]] table, or --config)"
            ),
        )),
        None => Ok(SourceConfig::bank_default(format)),
    }
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Resolves `sqlite://relative.db` against `base`; `None` for unsupported schemes.
/// The job's bounds on one statement file (`max_file_mb`, `max_line_bytes`,
/// `max_rejected_lines`), each at least 1.
fn input_limits(path: &Path, raw: &RawConfig) -> Result<crate::sources::InputLimits> {
    let d = crate::sources::InputLimits::default();
    let positive = |key: &str, v: Option<u64>, default: u64| match v {
        Some(0) => Err(config_error(
            path,
            format!("key `{key}`: must be at least 1"),
        )),
        Some(n) => Ok(n),
        None => Ok(default),
    };
    let mb = positive("max_file_mb", raw.max_file_mb, d.max_file_bytes >> 20)?;
    Ok(crate::sources::InputLimits {
        max_file_bytes: mb
            .checked_mul(1 << 20)
            .ok_or_else(|| config_error(path, format!("key `max_file_mb`: {mb} is too large")))?,
        max_line_bytes: positive(
            "max_line_bytes",
            raw.max_line_bytes.map(|n| n as u64),
            d.max_line_bytes as u64,
        )? as usize,
        max_rejected_lines: positive(
            "max_rejected_lines",
            raw.max_rejected_lines.map(|n| n as u64),
            d.max_rejected_lines as u64,
        )? as usize,
        workbook: crate::workbook::WorkbookLimits {
            max_inflated_bytes: positive(
                "max_inflated_mb",
                raw.max_inflated_mb,
                d.workbook.max_inflated_bytes >> 20,
            )?
            .checked_mul(1 << 20)
            .ok_or_else(|| config_error(path, "key `max_inflated_mb`: too large".to_string()))?,
            max_sheet_cells: positive(
                "max_sheet_cells",
                raw.max_sheet_cells,
                d.workbook.max_sheet_cells,
            )?,
        },
        memory_limit: match raw.memory_limit_mb {
            Some(0) => {
                return Err(config_error(
                    path,
                    "key `memory_limit_mb`: must be at least 1".to_string(),
                ));
            }
            Some(mb) => Some(mb.saturating_mul(1 << 20)),
            None => crate::sources::limits::cgroup_memory_limit(),
        },
    })
}

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
    /// Largest attachment in MiB, a whole or decimal number (`2`, `0.05`); default 2. The
    /// decide-workbook is shrunk to fit it; a larger file stays in the run folder.
    max_attachment_mb: Option<SizeMb>,
    /// The same limit in KiB (the older key; give one of the two).
    max_attachment_kib: Option<u64>,
    /// Largest whole message in MiB (bodies and attachments, as encoded); default 10.
    /// Attachments that would take the message past it stay in the run folder.
    max_email_mb: Option<SizeMb>,
    /// Base URL under which the run folders are served (`https://recon.example/runs`): the
    /// email links `<report_url>/<run folder>/report.xlsx` instead of naming a server path.
    report_url: Option<String>,
    /// Where reviewers put their decision files, as they reach it (a share such as
    /// `\\files\finance\recon-decisions`): named in the email's "how to decide". Default:
    /// the folder name of `decisions_inbox` (never its server path).
    decisions_folder: Option<String>,
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
/// A size in MiB as written in the job file: a whole or a decimal number.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum SizeMb {
    /// `2`
    Whole(u64),
    /// `0.05`
    Decimal(f64),
}

impl SizeMb {
    /// Bytes, rounded down; `None` for a negative or non-finite number.
    fn bytes(self) -> Option<u64> {
        match self {
            SizeMb::Whole(n) => Some(n.saturating_mul(1 << 20)),
            // Through a decimal: the job file's `0.05` becomes the decimal the double stands
            // for, then is multiplied exactly.
            SizeMb::Decimal(f) => {
                use rust_decimal::prelude::ToPrimitive as _;
                let d = rust_decimal::Decimal::try_from(f).ok()?;
                if d.is_sign_negative() {
                    return None;
                }
                d.checked_mul(rust_decimal::Decimal::from(1u64 << 20))?
                    .floor()
                    .to_u64()
            }
        }
    }
}

/// Default `email.max_attachment_mb`: the decide-workbook most relays and phones take.
const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 2 << 20;
/// Default `email.max_email_mb`: under the 10 MiB many relays refuse above.
const DEFAULT_MAX_EMAIL_BYTES: u64 = 10 << 20;
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
    /// Largest attachment included, in bytes (`max_attachment_mb`).
    pub max_attachment_bytes: u64,
    /// Largest message, in bytes as encoded (`max_email_mb`).
    pub max_email_bytes: u64,
    /// Base URL of the served run folders, without a trailing `/` (`report_url`).
    pub report_url: Option<String>,
    /// Where reviewers put their decision files, as they reach it (`decisions_folder`, else
    /// the folder name of `decisions_inbox`; `None`: the job has no inbox).
    pub decisions_folder: Option<String>,
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
        let size = |key: &str, v: SizeMb| {
            v.bytes().ok_or_else(|| {
                config_error(
                    path,
                    format!("key `email.{key}`: {v:?} is not a size in MiB (hint: 2 or 0.5)"),
                )
            })
        };
        let max_attachment_bytes = match (self.max_attachment_mb, self.max_attachment_kib) {
            (Some(_), Some(_)) => {
                return Err(config_error(
                    path,
                    "keys `email.max_attachment_mb` and `email.max_attachment_kib`: give one of the two",
                ));
            }
            (Some(mb), None) => size("max_attachment_mb", mb)?,
            (None, Some(kib)) => kib.saturating_mul(1024),
            (None, None) => DEFAULT_MAX_ATTACHMENT_BYTES,
        };
        let max_email_bytes = match self.max_email_mb {
            Some(mb) => size("max_email_mb", mb)?,
            None => DEFAULT_MAX_EMAIL_BYTES,
        };
        let report_url = match self.report_url {
            None => None,
            Some(u) if u.starts_with("https://") || u.starts_with("http://") => {
                Some(u.trim_end_matches('/').to_string())
            }
            Some(u) => {
                return Err(config_error(
                    path,
                    format!("key `email.report_url`: {u:?} is not an http(s) URL"),
                ));
            }
        };
        Ok(EmailConfig {
            from,
            to,
            extra_recipients,
            subject_prefix: self.subject_prefix,
            transport,
            max_attachment_bytes,
            max_email_bytes,
            report_url,
            decisions_folder: self
                .decisions_folder
                .map(|f| f.trim().to_string())
                .filter(|f| !f.is_empty()),
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

    const TO: &str = "[email]\nfrom = \"recon@x.test\"\nto = [\"fin@x.test\"]\n";

    #[test]
    fn sizes_are_mib_whole_or_decimal_with_the_older_kib_key_and_defaults_2_and_10() {
        let e = parse(TO).unwrap().email.unwrap();
        assert_eq!(
            (e.max_attachment_bytes, e.max_email_bytes),
            (2 << 20, 10 << 20)
        );
        let e = parse(&format!("{TO}max_attachment_mb = 0.5\nmax_email_mb = 3\n"))
            .unwrap()
            .email
            .unwrap();
        assert_eq!(
            (e.max_attachment_bytes, e.max_email_bytes),
            (524_288, 3 * 1_048_576)
        );
        // 0.05 MiB = 52,428.8 bytes, rounded down.
        let e = parse(&format!("{TO}max_attachment_mb = 0.05\n"))
            .unwrap()
            .email
            .unwrap();
        assert_eq!(e.max_attachment_bytes, 52_428);
        let e = parse(&format!("{TO}max_attachment_kib = 100\n"))
            .unwrap()
            .email
            .unwrap();
        assert_eq!(e.max_attachment_bytes, 102_400);
        let both = parse(&format!(
            "{TO}max_attachment_kib = 100\nmax_attachment_mb = 1\n"
        ));
        assert!(format!("{:#}", both.unwrap_err()).contains("give one of the two"));
        let negative = parse(&format!("{TO}max_email_mb = -1.5\n"));
        assert!(format!("{:#}", negative.unwrap_err()).contains("email.max_email_mb"));
    }

    #[test]
    fn report_url_is_an_http_url_kept_without_its_trailing_slash() {
        let e = parse(&format!("{TO}report_url = \"https://r.example/runs/\"\n"))
            .unwrap()
            .email
            .unwrap();
        assert_eq!(e.report_url.as_deref(), Some("https://r.example/runs"));
        assert!(parse(TO).unwrap().email.unwrap().report_url.is_none());
        let bad = parse(&format!("{TO}report_url = \"/srv/runs\"\n"));
        assert!(format!("{:#}", bad.unwrap_err()).contains("email.report_url"));
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
    fn reference_pattern_is_a_regex_or_an_error_naming_the_key() {
        let with = |line: &str| {
            Config::parse(
                &MINIMAL.replace("output_dir", &format!("{line}\noutput_dir")),
                Path::new("job.toml"),
            )
        };
        assert!(with("").unwrap().reference_pattern.is_none());
        let c = with("reference_pattern = '^PAY-[0-9]+$'").unwrap();
        let r = c.reference_pattern.expect("a pattern");
        assert!(r.is_match("PAY-0999") && !r.is_match("INV-2026-0042"));
        for bad in ["reference_pattern = '^PAY-[0-9'", "reference_pattern = ' '"] {
            let msg = format!("{:#}", with(bad).unwrap_err());
            assert!(
                msg.contains("job.toml") && msg.contains("`reference_pattern`"),
                "{msg}"
            );
        }
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
