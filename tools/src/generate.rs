//! Seeded synthetic data for end-to-end runs and accuracy measurement.
//!
//! [`generate`] writes a ledger (`payments.csv`, `attempts.csv`), a provider statement
//! (`statement.csv`), the outcome every row must get (`expected.csv`) and a `recon.toml` that
//! runs recon on them. Every case is built so that its outcome is unambiguous under the
//! matching contract (identifier pass, then the one-to-one fuzzy pass on recipient + currency +
//! amount inside `[started_at − 10 min, started_at + 72 h]`): recipients of fuzzy and "no line"
//! cases are unique in the whole data set unless the case needs a twin or a near miss.
//! Lines booked for payments fall in `[started_at + 1 min, started_at + 48 h]`; lines no
//! payment claims on its own (orphans, refunds) are booked on the business date itself, because
//! a run reports such lines only for the days it covers. Run recon for that one date with
//! [`GenerateReport::as_of`] (`date + 5 days`), when every window is covered and closed.
//!
//! The data is shaped like a payment service's (see [`GenerateOptions::new`]): UUID v4 payment
//! and attempt ids, provider ids `pt_` + 24 hex digits, payments in creation order, attempts in
//! start order, statement lines in booking order, 6 % of payments ending in a ticket, and
//! recipients paid several times a day (with lost twins of named payments). The old short
//! sequential ids, payment order, exception share and distinct recipients stay available
//! ([`IdStyle::Short`], [`RowOrder::Payment`], `exceptions_per_10k = 140`,
//! `busy_recipients = false`) to compare against: the same seed spells the same world in every
//! id style and row order.
//!
//! With [`GenerateOptions::partitions`] `K ≥ 1` the night is split by merchant (issue 34):
//! `payments.csv` gains a `merchant_id` column (`M01` … `MK`, the first holding about 40 % of
//! the payments), the statement is one `statement-<merchant>.csv` per partition, and
//! `recon.toml` declares `[partition] column = "merchant_id"` with one `[[source]]` per file.
//! Partitions are drawn per recipient, and every case that ties payments and lines together
//! (twins, near misses, shared recipients, retries, duplicates, mismatch neighbours) shares its
//! recipient, so each case stays inside one partition and `expected.csv` is that of the same
//! world without partitions. The world is the one `K = 0` writes (its own PRNG stream draws
//! the partitions), plus, with `K ≥ 2`, cross-partition look-alikes: pairs of payments in two
//! partitions with the same recipient, money and start, each paid by one unnamed line in its
//! own partition's file — unique matches with the partition wall, AMBIGUOUS without it — and
//! named lines booked in another partition's file (issue 40): a payment of one merchant whose
//! payout the provider booked in another merchant's statement, naming it. An UNKNOWN one
//! named by reference must be RESOLVED_SUCCEEDED (not FAILED once its own file is quiet), a
//! SUCCEEDED one named by its recorded provider id alone MATCHED (not MISSING with an orphan
//! beside it): a line that names a payment is its evidence wherever it is booked
//! ([`GenerateReport::cross_partition_lines`]).
//!
//! [`score`] compares recon's `results.csv` with `expected.csv`.
//!
//! The generator uses its own xoshiro256** PRNG, so the same [`GenerateOptions`] give
//! byte-identical files on every platform and with every crate version.
//!
//! The building blocks below the entry points ([`Rng`], [`plan`] and its [`PLAN`], [`Bban`],
//! [`Clock`], the `push_*` writers) are public for their unit tests, which live in recon's one
//! test binary (`tests/it/generate.rs`) with the rest of the generator's tests; they are not an
//! interface.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Days, NaiveDate, Utc};

use recon::money;

/// Every outcome name that can appear in `expected.csv`.
pub const OUTCOMES: [&str; 13] = [
    MATCHED,
    RESOLVED_SUCCEEDED,
    RESOLVED_FAILED,
    MISSING_AT_PROVIDER,
    ORPHAN_AT_PROVIDER,
    DUPLICATE_AT_PROVIDER,
    AMOUNT_MISMATCH,
    CURRENCY_MISMATCH,
    FAILED_BUT_PAID,
    FAILED_OK,
    AMBIGUOUS,
    NOT_SUBMITTED,
    REFUND,
];

/// Outcomes that recon applies without a human (closing or resolving a payment): a wrong one of
/// these is the dangerous kind of error.
pub const AUTOMATIC_OUTCOMES: [&str; 3] = [MATCHED, RESOLVED_SUCCEEDED, RESOLVED_FAILED];

const MATCHED: &str = "MATCHED";
const RESOLVED_SUCCEEDED: &str = "RESOLVED_SUCCEEDED";
const RESOLVED_FAILED: &str = "RESOLVED_FAILED";
const MISSING_AT_PROVIDER: &str = "MISSING_AT_PROVIDER";
const ORPHAN_AT_PROVIDER: &str = "ORPHAN_AT_PROVIDER";
const DUPLICATE_AT_PROVIDER: &str = "DUPLICATE_AT_PROVIDER";
const AMOUNT_MISMATCH: &str = "AMOUNT_MISMATCH";
const CURRENCY_MISMATCH: &str = "CURRENCY_MISMATCH";
const FAILED_BUT_PAID: &str = "FAILED_BUT_PAID";
const FAILED_OK: &str = "FAILED_OK";
const AMBIGUOUS: &str = "AMBIGUOUS";
const NOT_SUBMITTED: &str = "NOT_SUBMITTED";
const REFUND: &str = "REFUND";

/// Header of `payments.csv`.
pub const PAYMENTS_HEADER: [&str; 9] = recon::ledger::import::PAYMENT_COLUMNS;
/// Header of `attempts.csv`.
pub const ATTEMPTS_HEADER: [&str; 7] = recon::ledger::import::ATTEMPT_COLUMNS;
/// Header of `statement.csv`.
pub const STATEMENT_HEADER: [&str; 7] = [
    "txn_id",
    "reference",
    "beneficiary",
    "amount",
    "currency",
    "booked_at",
    "type",
];
/// Header of `expected.csv`.
pub const EXPECTED_HEADER: [&str; 3] = ["outcome", "payment_id", "provider_txn_id"];

/// Largest supported `payments` (indices are `u32`; memory is ~100 bytes per payment).
pub const MAX_PAYMENTS: usize = 100_000_000;

/// Largest supported [`GenerateOptions::partitions`].
pub const MAX_PARTITIONS: u32 = 9_999;
/// The share of the payments in the first partition, per 10 000 (the others share the rest
/// evenly), so a shard split by partition is visibly skewed.
pub const FIRST_PARTITION_PER_10K: u64 = 4_000;
/// The ledger column that names a payment's partition, as the generated config declares it.
pub const PARTITION_COLUMN: &str = recon::ledger::import::MERCHANT_COLUMN;
/// Cross-partition look-alike pairs per 10 000 payments (at least one when there are payments
/// and two partitions or more).
const LOOK_ALIKES_PER_10K: u64 = 5;
/// Mixed into the seed for the partitions' own PRNG stream.
const PARTITION_STREAM: u64 = 0x7061_7274_6974_696f;
/// Named lines booked in another partition's file, per 10 000 payments and per kind (an
/// UNKNOWN payment named by reference, a SUCCEEDED one named by provider id), at least one of
/// each when there are payments and two partitions or more.
const CROSS_NAMED_PER_10K: u64 = 5;

/// How ids are spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum IdStyle {
    /// As the payment service writes them: UUID v4 payment and attempt ids, provider ids
    /// `pt_` + 24 hex digits.
    #[default]
    Uuid,
    /// Short sequential ids (`PAY-0000001`, `ATT-0000001-1`, `PSP-00000001`), the old
    /// generator's spelling, kept to compare against.
    Short,
}

/// In which order the rows of each file come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RowOrder {
    /// As a database and a provider write them: payments by creation time, attempts by start
    /// time, statement lines by booking time.
    #[default]
    Time,
    /// Payments and their attempts in payment-id order, statement lines shuffled (the old
    /// generator's order).
    Payment,
}

/// With busy recipients, the share of the payments that may share a recipient which take one
/// from the pool of `payments / 5` recipients, per 10 000 (about 2.5 payments a pooled
/// recipient).
const BUSY_SHARE_PER_10K: u64 = 6_000;

/// Default share of payments that end in a ticket, per 10 000 (6 %).
pub const DEFAULT_EXCEPTIONS_PER_10K: u32 = 600;
/// Largest accepted `exceptions_per_10k` (the other kinds need the rest of the payments).
pub const MAX_EXCEPTIONS_PER_10K: u32 = 5_000;

/// Parses a percentage such as `6`, `1.4` or `0.25` into a share per 10 000 (exact, no floats).
pub fn parse_percent_per_10k(text: &str) -> Result<u32, String> {
    let pct: rust_decimal::Decimal = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|e| format!("{text:?} is not a percentage: {e}"))?;
    let per_10k = pct * rust_decimal::Decimal::ONE_HUNDRED;
    if per_10k.fract() != rust_decimal::Decimal::ZERO {
        return Err(format!("{text:?}: at most two decimals (0.01 % steps)"));
    }
    let per_10k = rust_decimal::prelude::ToPrimitive::to_u32(&per_10k)
        .ok_or_else(|| format!("{text:?} is not a percentage between 0 and 50"))?;
    if per_10k > MAX_EXCEPTIONS_PER_10K {
        return Err(format!(
            "{text:?}: at most {} % of payments can be exceptions",
            MAX_EXCEPTIONS_PER_10K / 100
        ));
    }
    Ok(per_10k)
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Folder that receives the files (created if missing; existing files are overwritten).
    pub out_dir: PathBuf,
    /// Number of ledger payments.
    pub payments: usize,
    /// PRNG seed: the same options always give byte-identical files.
    pub seed: u64,
    /// The business date: every payment is created (and, unless PENDING, started) on it (UTC).
    pub date: NaiveDate,
    /// How ids are spelled. The same seed gives the same world in either style.
    pub ids: IdStyle,
    /// Row order of the files.
    pub order: RowOrder,
    /// Payments that end in a ticket (twins, near misses, duplicates, money mismatches, paid
    /// although FAILED, missing at the provider), per 10 000 payments; orphan lines scale with
    /// them.
    pub exceptions_per_10k: u32,
    /// Recipients paid several times a day (a pool of `payments / 5` shared by most payments
    /// whose lines are named), and 1 % of payments lost twins of a payment named by its line.
    pub busy_recipients: bool,
    /// Merchants the night is split by (`0`: no partitions, the files as before). With `K ≥ 1`
    /// see the module docs; with `K ≥ 2` the cross-partition look-alikes add payments beyond
    /// `payments` (a few per 10 000).
    pub partitions: u32,
}

impl GenerateOptions {
    /// Realistic defaults: UUID ids, rows in time order, 6 % exceptions, busy recipients.
    pub fn new(out_dir: impl Into<PathBuf>, payments: usize, seed: u64, date: NaiveDate) -> Self {
        Self {
            out_dir: out_dir.into(),
            payments,
            seed,
            date,
            ids: IdStyle::default(),
            order: RowOrder::default(),
            exceptions_per_10k: DEFAULT_EXCEPTIONS_PER_10K,
            busy_recipients: true,
            partitions: 0,
        }
    }
}

/// Paths of the generated files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFiles {
    /// `payments.csv`: the ledger's payments.
    pub payments: PathBuf,
    /// `attempts.csv`: the ledger's submission attempts.
    pub attempts: PathBuf,
    /// The provider statement: `statement.csv`, or with partitions one
    /// `statement-<partition>.csv` per partition, in partition order (each with its `.ctl`).
    pub statements: Vec<PathBuf>,
    /// `expected.csv`: the outcome every payment and every unclaimed line must get.
    pub expected: PathBuf,
    /// `recon.toml`: a config that reconciles the statement.
    pub config: PathBuf,
}

impl GeneratedFiles {
    /// The file paths inside `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            payments: dir.join("payments.csv"),
            attempts: dir.join("attempts.csv"),
            statements: vec![dir.join("statement.csv")],
            expected: dir.join("expected.csv"),
            config: dir.join("recon.toml"),
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateReport {
    /// The seed used.
    pub seed: u64,
    /// The business date.
    pub date: NaiveDate,
    /// The as-of to run recon with (`date + 5 days`, midnight UTC): every window is closed.
    pub as_of: DateTime<Utc>,
    /// Rows in `payments.csv`.
    pub payments: usize,
    /// Rows in `attempts.csv`.
    pub attempts: usize,
    /// Rows in `statement.csv`.
    pub statement_lines: usize,
    /// Rows in `expected.csv`.
    pub expected_rows: usize,
    /// Rows of `expected.csv` per outcome (payment rows and line rows together).
    pub outcomes: BTreeMap<String, usize>,
    /// With partitions: each partition's name, statement file and size, in partition order
    /// (empty without).
    pub partitions: Vec<PartitionFile>,
    /// Cross-partition look-alike pairs planted (their payments are in `payments`).
    pub look_alike_pairs: usize,
    /// Named lines booked in another partition's file (their payments are in `payments`, in
    /// payment id order): the truth their expected.csv rows come from.
    pub cross_partition_lines: Vec<CrossPartitionLine>,
    /// Where the files are.
    pub files: GeneratedFiles,
}

/// A payment of one partition whose one line is booked in another partition's statement file
/// and names it (issue 40: it is that payment's evidence wherever it is booked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossPartitionLine {
    /// The payment.
    pub payment_id: String,
    /// Its status in the ledger (`UNKNOWN` or `SUCCEEDED`).
    pub status: &'static str,
    /// Its partition.
    pub payment_partition: String,
    /// The line's provider id (its `txn_id`).
    pub txn_id: String,
    /// The partition whose statement file holds the line.
    pub line_partition: String,
    /// Whether the line names the payment by reference (else by provider id alone).
    pub by_reference: bool,
    /// The outcome the payment must get (`RESOLVED_SUCCEEDED` or `MATCHED`), as in
    /// expected.csv; the line gets no row of its own.
    pub outcome: &'static str,
}

/// One partition of a partitioned data set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFile {
    /// Its `merchant_id` value, e.g. `M01`; its source in `recon.toml` is `provider-M01`.
    pub name: String,
    /// Its statement file, `statement-M01.csv`.
    pub statement: PathBuf,
    /// Payments with this `merchant_id`.
    pub payments: usize,
    /// Lines in its statement file.
    pub lines: usize,
}

impl GenerateReport {
    /// The as-of as recon's `--as-of` expects it, e.g. `2026-12-03T00:00:00Z`.
    pub fn as_of_rfc3339(&self) -> String {
        self.as_of.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// The command line that reconciles the generated data.
    pub fn run_command(&self) -> String {
        format!(
            "recon run --config {} --date {} --as-of {}",
            self.files.config.display(),
            self.date.format("%Y-%m-%d"),
            self.as_of_rfc3339()
        )
    }
}

impl fmt::Display for GenerateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "generated {} payments, {} attempts, {} statement lines (seed {}, date {})",
            self.payments,
            self.attempts,
            self.statement_lines,
            self.seed,
            self.date.format("%Y-%m-%d")
        )?;
        writeln!(f, "expected outcomes ({} rows):", self.expected_rows)?;
        for (outcome, count) in &self.outcomes {
            writeln!(f, "  {outcome:<22} {count:>9}")?;
        }
        if !self.partitions.is_empty() {
            writeln!(
                f,
                "partitions ({} by {PARTITION_COLUMN}; {} cross-partition look-alike pairs):",
                self.partitions.len(),
                self.look_alike_pairs
            )?;
            for p in &self.partitions {
                writeln!(
                    f,
                    "  {:<6} {:>9} payments {:>9} lines  {}",
                    p.name,
                    p.payments,
                    p.lines,
                    p.statement.display()
                )?;
            }
            writeln!(
                f,
                "  {} named lines booked in another partition's file",
                self.cross_partition_lines.len()
            )?;
        }
        writeln!(f, "files:")?;
        let files = &self.files;
        for path in [&files.payments, &files.attempts]
            .into_iter()
            .chain(&files.statements)
            .chain([&files.expected, &files.config])
        {
            writeln!(f, "  {}", path.display())?;
        }
        writeln!(f, "as-of: {}", self.as_of_rfc3339())?;
        write!(f, "run:   {}", self.run_command())
    }
}

/// The as-of at which every window of a run for `date` is covered and closed with the
/// generated config: `date + 5 days` at 00:00:00Z.
pub fn suggested_as_of(date: NaiveDate) -> anyhow::Result<DateTime<Utc>> {
    let day = date
        .checked_add_days(Days::new(5))
        .with_context(|| format!("date {date} is out of range"))?;
    Ok(day.and_time(chrono::NaiveTime::MIN).and_utc())
}

/// Writes the synthetic data set described in the module docs into `opts.out_dir`.
pub fn generate(opts: &GenerateOptions) -> anyhow::Result<GenerateReport> {
    if opts.payments > MAX_PAYMENTS {
        bail!(
            "at most {MAX_PAYMENTS} payments can be generated, {} requested",
            opts.payments
        );
    }
    if opts.partitions > MAX_PARTITIONS {
        bail!(
            "at most {MAX_PARTITIONS} partitions can be generated, {} requested",
            opts.partitions
        );
    }
    if opts.exceptions_per_10k > MAX_EXCEPTIONS_PER_10K {
        bail!(
            "at most {} % of payments can be exceptions, {}.{:02} % requested",
            MAX_EXCEPTIONS_PER_10K / 100,
            opts.exceptions_per_10k / 100,
            opts.exceptions_per_10k % 100
        );
    }
    let clock = Clock::new(opts.date)?;
    let as_of = suggested_as_of(opts.date)?;
    std::fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("cannot create {}", opts.out_dir.display()))?;
    let mut files = GeneratedFiles::in_dir(&opts.out_dir);

    let mut rng = Rng::new(opts.seed);
    let mut data = Data::build(opts, &mut rng);
    let look_alike_pairs = data.partition(opts);
    let names = data.partition_names();

    let attempts = data.write_payments(&files.payments, &clock)?;
    data.write_attempts(&files.attempts, &clock, &mut rng)?;
    let mut partitions = Vec::with_capacity(names.len());
    if names.is_empty() {
        let all: Vec<u32> = (0..data.lines.len() as u32).collect();
        data.write_statement(&files.statements[0], &clock, &all)?;
        write_control_file(&files.statements[0], data.lines.len())?;
    } else {
        files.statements.clear();
        for (k, name) in names.iter().enumerate() {
            let path = opts.out_dir.join(format!("statement-{name}.csv"));
            let lines = data.partition_lines(k as u16);
            data.write_statement(&path, &clock, &lines)?;
            write_control_file(&path, lines.len())?;
            partitions.push(PartitionFile {
                name: name.clone(),
                statement: path.clone(),
                payments: data.pay_part.iter().filter(|&&p| p == k as u16).count(),
                lines: lines.len(),
            });
            files.statements.push(path);
        }
    }
    let outcomes = data.write_expected(&files.expected)?;
    write_config(&files.config, opts, &names)?;
    let cross_partition_lines = data.cross_partition_lines(&names);

    Ok(GenerateReport {
        seed: opts.seed,
        date: opts.date,
        as_of,
        payments: data.pays.len(),
        attempts,
        statement_lines: data.lines.len(),
        expected_rows: outcomes.values().sum(),
        outcomes,
        partitions,
        look_alike_pairs,
        cross_partition_lines,
        files,
    })
}

// ---------------------------------------------------------------------------------------------
// PRNG

/// xoshiro256** seeded through SplitMix64 (both public domain, Blackman & Vigna). Shared with
/// [`crate::sim`], so both generators draw from the same pinned stream.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut splitmix = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self {
            s: [splitmix(), splitmix(), splitmix(), splitmix()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`; multiply-shift, bias below n / 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        scale_below(self.next_u64(), n)
    }

    /// Uniform in `lo..=hi` (`lo <= hi`).
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `per_10k / 10 000`.
    pub fn chance(&mut self, per_10k: u64) -> bool {
        self.below(10_000) < per_10k
    }
}

/// `h` (uniform in `u64`) scaled to `0..n`, as [`Rng::below`] does.
fn scale_below(h: u64, n: u64) -> u64 {
    ((u128::from(h) * u128::from(n)) >> 64) as u64
}

/// Fisher–Yates with [`Rng`].
fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

// ---------------------------------------------------------------------------------------------
// The cases

const NONE: u32 = u32::MAX;
const MINUTE: i64 = 60;
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

/// Currencies used, by index. JPY has no decimals.
const CURRENCIES: [&str; 4] = ["EUR", "GBP", "USD", "JPY"];
const JPY: u8 = 3;

const UNKNOWN_DETAILS: [&str; 3] = [
    "timeout after 30s",
    "connection reset by peer",
    "HTTP 502 from provider",
];
const FAILED_DETAILS: [&str; 3] = ["insufficient funds", "account closed", "invalid IBAN"];

/// What a payment is built to test; fixes its status, its lines and its expected outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUCCEEDED, one line found by reference and/or recorded provider id → MATCHED.
    MatchedRef,
    /// Like `MatchedRef`, with an earlier FAILED attempt → MATCHED.
    MatchedRetry,
    /// SUCCEEDED, no identifiers, one unique fuzzy line → MATCHED.
    MatchedFuzzy,
    /// UNKNOWN, line by reference → RESOLVED_SUCCEEDED.
    UnknownRef,
    /// UNKNOWN, unique fuzzy line → RESOLVED_SUCCEEDED.
    UnknownFuzzy,
    /// Stale SUBMITTING, line by reference → RESOLVED_SUCCEEDED.
    SubmittingRef,
    /// Stale SUBMITTING, no line → RESOLVED_FAILED.
    SubmittingNone,
    /// UNKNOWN, no line → RESOLVED_FAILED.
    UnknownNone,
    /// SUCCEEDED, no line → MISSING_AT_PROVIDER.
    Missing,
    /// SUCCEEDED, two equal lines by reference → DUPLICATE_AT_PROVIDER.
    Duplicate,
    /// SUCCEEDED, line by reference short by a fee → AMOUNT_MISMATCH.
    AmountMismatch,
    /// SUCCEEDED, line by reference in another currency → CURRENCY_MISMATCH.
    CurrencyMismatch,
    /// FAILED, line by reference → FAILED_BUT_PAID.
    FailedPaid,
    /// FAILED, no line → FAILED_OK.
    FailedOk,
    /// SUCCEEDED twins sharing one fuzzy line → AMBIGUOUS (both, and the line).
    Twin,
    /// UNKNOWN with a same-recipient line of another amount → AMBIGUOUS (and the line).
    NearMiss,
    /// PENDING → NOT_SUBMITTED.
    Pending,
    /// UNKNOWN, no line, the twin of a `MatchedRef` payment (same recipient, money, minutes
    /// apart) whose line names it inside this one's window → RESOLVED_FAILED: a line proven to
    /// be another payment's is no look-alike ([`GenerateOptions::busy_recipients`] only).
    LostTwin,
    /// SUCCEEDED, the twin of a `MatchedRef` payment (same recipient, money, minutes apart),
    /// with an unnamed line inside both windows → AMBIGUOUS (this one, its partner, which
    /// becomes a [`Kind::NamedTwin`], and the line): the partner's own line names it, but a
    /// named payout never settles an unnamed one by elimination — the partner may have been
    /// paid twice while this one's payout is missing, and nothing in the evidence tells the two
    /// worlds apart (DESIGN.md rule 1) ([`GenerateOptions::busy_recipients`] only).
    UnnamedTwin,
    /// SUCCEEDED, the partner of an [`Kind::UnnamedTwin`]: its line names it, and the twin's
    /// unnamed line is in its window too (its second payout, or the twin's) → AMBIGUOUS with
    /// both lines.
    NamedTwin,
}

impl Kind {
    fn status(self) -> &'static str {
        match self {
            Kind::MatchedRef
            | Kind::MatchedRetry
            | Kind::MatchedFuzzy
            | Kind::Missing
            | Kind::Duplicate
            | Kind::AmountMismatch
            | Kind::CurrencyMismatch
            | Kind::Twin
            | Kind::UnnamedTwin
            | Kind::NamedTwin => "SUCCEEDED",
            Kind::UnknownRef
            | Kind::UnknownFuzzy
            | Kind::UnknownNone
            | Kind::NearMiss
            | Kind::LostTwin => "UNKNOWN",
            Kind::SubmittingRef | Kind::SubmittingNone => "SUBMITTING",
            Kind::FailedPaid | Kind::FailedOk => "FAILED",
            Kind::Pending => "PENDING",
        }
    }

    fn outcome(self) -> &'static str {
        match self {
            Kind::MatchedRef | Kind::MatchedRetry | Kind::MatchedFuzzy => MATCHED,
            Kind::UnknownRef | Kind::UnknownFuzzy | Kind::SubmittingRef => RESOLVED_SUCCEEDED,
            Kind::SubmittingNone | Kind::UnknownNone | Kind::LostTwin => RESOLVED_FAILED,
            Kind::Missing => MISSING_AT_PROVIDER,
            Kind::Duplicate => DUPLICATE_AT_PROVIDER,
            Kind::AmountMismatch => AMOUNT_MISMATCH,
            Kind::CurrencyMismatch => CURRENCY_MISMATCH,
            Kind::FailedPaid => FAILED_BUT_PAID,
            Kind::FailedOk => FAILED_OK,
            Kind::Twin | Kind::NearMiss | Kind::UnnamedTwin | Kind::NamedTwin => AMBIGUOUS,
            Kind::Pending => NOT_SUBMITTED,
        }
    }
}

/// Share of every special kind per 10 000 payments at [`BASE_EXCEPTIONS_PER_10K`], and its
/// minimum count. Listed in priority order: when `payments` is too small for all minimums, the
/// first kinds win. Everything not planned here is `MatchedRef`. The kinds that end in a ticket
/// (the first seven) are scaled to the asked exception share.
pub const PLAN: [(Kind, u64, usize); 16] = [
    (Kind::Twin, 20, 2),
    (Kind::NearMiss, 10, 1),
    (Kind::Duplicate, 20, 1),
    (Kind::AmountMismatch, 30, 1),
    (Kind::CurrencyMismatch, 10, 1),
    (Kind::FailedPaid, 20, 1),
    (Kind::Missing, 30, 1),
    (Kind::UnknownRef, 200, 1),
    (Kind::UnknownFuzzy, 30, 1),
    (Kind::UnknownNone, 150, 1),
    (Kind::SubmittingRef, 50, 1),
    (Kind::SubmittingNone, 50, 1),
    (Kind::FailedOk, 400, 1),
    (Kind::Pending, 500, 1),
    (Kind::MatchedFuzzy, 300, 1),
    (Kind::MatchedRetry, 100, 1),
];
/// The ticket kinds' share in [`PLAN`] (the first seven entries), per 10 000 payments.
pub const BASE_EXCEPTIONS_PER_10K: u64 = 140;
/// How many of [`PLAN`]'s first entries end in a ticket.
pub const TICKET_KINDS: usize = 7;
/// Orphan lines per 10 000 payments at [`BASE_EXCEPTIONS_PER_10K`] (at least one when there are
/// payments).
const ORPHANS_PER_10K: u64 = 30;

/// `base` per 10 000 scaled from [`BASE_EXCEPTIONS_PER_10K`] to `exceptions` per 10 000.
pub fn scaled(base: u64, exceptions: u32) -> u64 {
    (base * u64::from(exceptions) + BASE_EXCEPTIONS_PER_10K / 2) / BASE_EXCEPTIONS_PER_10K
}
/// Refund lines per 10 000 payments (at least one when a MATCHED payment exists).
const REFUNDS_PER_10K: u64 = 20;

fn share(n: usize, per_10k: u64) -> usize {
    ((n as u64 * per_10k + 5_000) / 10_000) as usize
}

/// Lost twins per 10 000 payments with busy recipients (each pairs with a `MatchedRef`, so twice
/// as many payments are in a twin pair).
const LOST_TWINS_PER_10K: u64 = 100;

/// Unnamed twins per 10 000 payments with busy recipients (each pairs with a `MatchedRef`, which
/// becomes its `NamedTwin`).
const UNNAMED_TWINS_PER_10K: u64 = 100;

/// With busy recipients, the share of the `AMOUNT_MISMATCH` / `CURRENCY_MISMATCH` payments, per
/// 10 000, whose recipient also has an UNKNOWN payment without a line (`UnknownNone`) started
/// so that the mismatched line, which names the other payment, is inside its window: that line
/// is no look-alike of the lost payment, which is RESOLVED_FAILED.
const MISMATCH_NEIGHBOURS_PER_10K: u64 = 5_000;

/// The kinds of `n` payments, in planning order (shuffled by the caller).
pub fn plan(n: usize, exceptions_per_10k: u32, busy: bool) -> Vec<Kind> {
    let mut kinds = Vec::with_capacity(n);
    // Keep one slot for a plain MATCHED payment (refunds need one).
    let mut remaining = n.saturating_sub(1);
    for (k, (kind, per_10k, min)) in PLAN.into_iter().enumerate() {
        let per_10k = if k < TICKET_KINDS {
            scaled(per_10k, exceptions_per_10k)
        } else {
            per_10k
        };
        let mut want = share(n, per_10k).max(min);
        if kind == Kind::Twin {
            want += want % 2;
        }
        let mut take = want.min(remaining);
        if kind == Kind::Twin {
            take -= take % 2;
        }
        kinds.extend(std::iter::repeat_n(kind, take));
        remaining -= take;
    }
    let planned = kinds.len();
    kinds.resize(n, Kind::MatchedRef);
    if busy {
        // Each lost twin needs a MatchedRef partner, and one MatchedRef stays plain.
        let plain = n - planned;
        let lost = share(n, LOST_TWINS_PER_10K).min(plain.saturating_sub(1) / 2);
        kinds[planned..planned + lost].fill(Kind::LostTwin);
        let unnamed =
            share(n, UNNAMED_TWINS_PER_10K).min((plain.saturating_sub(1) / 2).saturating_sub(lost));
        kinds[planned + lost..planned + lost + unnamed].fill(Kind::UnnamedTwin);
    }
    kinds
}

/// One ledger payment.
#[derive(Debug, Clone)]
struct Pay {
    kind: Kind,
    /// Index into [`CURRENCIES`].
    cur: u8,
    amount: i64,
    /// Recipient index (see [`Bban`]).
    recipient: u64,
    /// Seconds from `date` 00:00:00Z: the current attempt's start (unused for PENDING).
    started: i64,
    created: i64,
    /// MatchedRetry: seconds between the failed first attempt's start and `started`.
    retry_gap: i64,
    /// The ledger recorded the provider's txn id (of `txn_a`, or `phantom`).
    records_id: bool,
    /// Error detail variant of a FAILED / UNKNOWN attempt.
    detail: u8,
    /// The twin's partner index.
    partner: u32,
    /// The txn numbers of the line(s) the expected row names (0 = none); `txn_a < txn_b`.
    txn_a: u32,
    txn_b: u32,
    /// A recorded provider id that the statement does not contain (MISSING cases), 0 = none.
    phantom: u32,
}

/// Why a statement line exists; fixes its line row in `expected.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Claimed by exactly one payment: no line row.
    Claimed,
    /// Unknown reference, unknown recipient → ORPHAN_AT_PROVIDER.
    Orphan,
    /// A REFUND line → REFUND.
    Refund,
    /// Fuzzy candidate of two twins → AMBIGUOUS.
    Twin,
    /// Same recipient + currency as an UNKNOWN payment, other amount → AMBIGUOUS.
    NearMiss,
    /// The unnamed line of an `UnnamedTwin`, in its `NamedTwin` partner's window too →
    /// AMBIGUOUS (its payment is the unnamed twin; the partner's second txn).
    Shared,
}

/// A statement line's reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reference {
    Empty,
    /// The payment's id; `noise` 0 = verbatim, 1 = the other case, 2 = a space at `pos`,
    /// 3 = the other case and a space, 4 = surrounded by spaces.
    Payment {
        pay: u32,
        noise: u8,
        pos: u8,
    },
    /// `EXT-…`, unknown to the ledger.
    External(u32),
    /// `RF-` + the payment's id.
    Refund(u32),
}

/// One provider statement line.
#[derive(Debug, Clone)]
struct Line {
    /// The payment whose expected row names this line (`NONE` for orphans and refunds).
    pay: u32,
    role: Role,
    reference: Reference,
    recipient: u64,
    /// 0 = verbatim, 1 = lower case, 2 = spaces every 4 characters, 3 = both.
    beneficiary_noise: u8,
    cur: u8,
    amount: i64,
    /// Seconds from `date` 00:00:00Z.
    booked: i64,
    /// Its txn number (set once the statement order is fixed): the position in that order
    /// plus one, or for a look-alike's line a number after every other line's and phantom's.
    txn: u32,
}

/// Maps recipient indices to distinct German IBANs: the 18-digit BBAN is
/// `(index · mult + offset) mod 10^18`, a bijection because `mult` is coprime to 10, so distinct
/// indices are distinct accounts. Check digits are computed (ISO 13616, mod 97).
#[derive(Debug, Clone, Copy)]
pub struct Bban {
    mult: u128,
    offset: u128,
}

const BBAN_MOD: u128 = 1_000_000_000_000_000_000;

impl Bban {
    pub fn new(rng: &mut Rng) -> Self {
        let mut mult = rng.below(BBAN_MOD as u64) | 1;
        while mult.is_multiple_of(5) || mult < 100_000_000_000_000_000 {
            mult = rng.below(BBAN_MOD as u64) | 1;
        }
        Self {
            mult: u128::from(mult),
            offset: u128::from(rng.below(BBAN_MOD as u64)),
        }
    }

    pub fn push_iban(self, out: &mut String, recipient: u64) {
        let bban = ((u128::from(recipient) * self.mult + self.offset) % BBAN_MOD) as u64;
        // Move "DE00" behind the BBAN as digits (D = 13, E = 14) and take it mod 97.
        let rem = ((bban % 97) * 1_000_000 + 131_400) % 97;
        let check = 98 - rem;
        out.push_str("DE");
        push_padded(out, check, 2);
        push_padded(out, bban, 18);
    }
}

struct Data {
    pays: Vec<Pay>,
    /// In statement order (`lines[i]` is txn `i + 1`), then the look-alikes' lines.
    lines: Vec<Line>,
    /// Partitions (0: none) and, with them, each payment's and each line's (0-based, by index).
    partitions: u16,
    pay_part: Vec<u16>,
    line_part: Vec<u16>,
    /// The payments whose one line is booked in another partition's file (in planting order).
    crossing: Vec<u32>,
    /// The txn number the next new line gets (after every line's and phantom's).
    next_txn: u32,
    bban: Bban,
    ids: IdStyle,
    order: RowOrder,
    /// Keys of the UUID and provider-id spellings.
    salts: [u64; 6],
    pay_width: usize,
    txn_width: usize,
}

fn pick_currency(rng: &mut Rng) -> u8 {
    match rng.below(100) {
        0..80 => 0,
        80..88 => 1,
        88..96 => 2,
        _ => JPY,
    }
}

fn pick_amount(rng: &mut Rng, cur: u8) -> i64 {
    if cur == JPY {
        let yen = rng.between(500, 500_000);
        return if rng.chance(2_000) {
            (yen / 1_000).max(1) * 1_000
        } else {
            yen
        };
    }
    let minor = match rng.below(100) {
        0..60 => rng.between(500, 20_000),
        60..90 => rng.between(20_000, 200_000),
        _ => rng.between(200_000, 2_000_000),
    };
    if rng.chance(2_000) {
        minor / 100 * 100
    } else {
        minor
    }
}

/// Booking time of a line for a payment started at `started`: 1 min .. 48 h later.
fn booked_after(rng: &mut Rng, started: i64) -> i64 {
    rng.between(started + MINUTE, started + 48 * HOUR)
}

/// Appends `n` in decimal, zero-padded to `width` digits (`write!` is slow in debug builds).
pub fn push_padded(out: &mut String, mut n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let start = i.min(buf.len().saturating_sub(width));
    // Only ASCII digits were written, so this never falls back.
    out.push_str(std::str::from_utf8(&buf[start..]).unwrap_or_default());
}

/// Length of a UUID in canonical text form.
const UUID_LEN: usize = 36;

/// SplitMix64's finaliser: a bijection of `u64`, so distinct inputs give distinct outputs.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Appends the low `digits` hex digits of `v`, lower case, zero-padded.
pub fn push_hex(out: &mut String, v: u64, digits: u32) {
    for k in (0..digits).rev() {
        let nib = ((v >> (4 * k)) & 0xf) as u8;
        out.push(char::from(if nib < 10 {
            b'0' + nib
        } else {
            b'a' + nib - 10
        }));
    }
}

/// Appends a UUID v4 (canonical, lower case) keyed by `key`. All 64 bits of `mix64(key + a)`
/// are kept (the version and variant bits sit elsewhere), so distinct keys never collide.
pub fn push_uuid(out: &mut String, key: u64, a: u64, b: u64) {
    let hi = mix64(key.wrapping_add(a));
    let lo = mix64(key ^ b);
    push_hex(out, hi >> 32, 8);
    out.push('-');
    push_hex(out, hi >> 16, 4);
    out.push_str("-4");
    push_hex(out, hi >> 4, 3);
    out.push('-');
    push_hex(out, 0x8000 | (hi & 0xf) << 10 | (lo & 0x3ff), 4);
    out.push('-');
    push_hex(out, lo >> 10, 12);
}

fn digits(n: usize) -> usize {
    n.max(1).ilog10() as usize + 1
}

impl Data {
    fn build(opts: &GenerateOptions, rng: &mut Rng) -> Self {
        let n = opts.payments;
        let mut kinds = plan(n, opts.exceptions_per_10k, opts.busy_recipients);
        shuffle(&mut kinds, rng);
        let bban = Bban::new(rng);
        // Drawn in either style, so that both spell the same world.
        let salts = [(); 6].map(|()| rng.next_u64());
        let pay_width = digits(n).max(7);
        // Shared recipients (only ever used by payments whose lines are named).
        let pool = (n as u64 / if opts.busy_recipients { 5 } else { 50 }).max(1);
        let mut next_recipient = pool;
        let mut fresh = move || {
            next_recipient += 1;
            next_recipient - 1
        };

        let mut pays = Vec::with_capacity(n);
        let mut lines = Vec::with_capacity(n + n / 100 + 4);
        for (i, &kind) in kinds.iter().enumerate() {
            let idx = i as u32;
            let cur = pick_currency(rng);
            let amount = pick_amount(rng, cur);
            let shared = if opts.busy_recipients {
                // Recipients paid several times a day: every kind whose line (if any) is named
                // by identifier with the payment's own money, so that no other payment's
                // outcome depends on it.
                matches!(
                    kind,
                    Kind::MatchedRef
                        | Kind::MatchedRetry
                        | Kind::Pending
                        | Kind::UnknownRef
                        | Kind::SubmittingRef
                        | Kind::UnknownNone
                        | Kind::SubmittingNone
                        | Kind::Missing
                        | Kind::FailedOk
                ) && rng.chance(BUSY_SHARE_PER_10K)
            } else {
                matches!(kind, Kind::MatchedRef | Kind::MatchedRetry | Kind::Pending)
                    && rng.chance(1_000)
            };
            let recipient = if shared { rng.below(pool) } else { fresh() };
            let (started, retry_gap) = match kind {
                Kind::Twin => (rng.between(0, DAY - 1 - MINUTE), 0),
                Kind::MatchedRetry => (rng.between(10 * MINUTE, DAY - 1), rng.between(120, 600)),
                _ => (rng.between(0, DAY - 1), 0),
            };
            let created = (started - retry_gap - rng.between(1, 5)).max(0);
            let records_id = match kind {
                Kind::MatchedRef | Kind::MatchedRetry => rng.chance(8_500),
                Kind::Duplicate | Kind::AmountMismatch | Kind::CurrencyMismatch => {
                    rng.chance(5_000)
                }
                _ => false,
            };
            let phantom = u32::from(kind == Kind::Missing && rng.chance(5_000));
            let pay = Pay {
                kind,
                cur,
                amount,
                recipient,
                started,
                created,
                retry_gap,
                records_id,
                detail: rng.below(3) as u8,
                partner: NONE,
                txn_a: 0,
                txn_b: 0,
                phantom,
            };

            let id_len = match opts.ids {
                IdStyle::Uuid => UUID_LEN,
                IdStyle::Short => pay_width + 4,
            };
            let by_ref = |rng: &mut Rng| {
                let (noise, pos) = if rng.chance(1_000) {
                    (
                        rng.between(1, 4) as u8,
                        rng.between(1, id_len as i64 - 1) as u8,
                    )
                } else {
                    (0, 0)
                };
                Reference::Payment {
                    pay: idx,
                    noise,
                    pos,
                }
            };
            let line = |rng: &mut Rng, reference: Reference, cur: u8, amount: i64| Line {
                pay: idx,
                role: Role::Claimed,
                reference,
                recipient,
                beneficiary_noise: if rng.chance(1_000) {
                    rng.between(1, 3) as u8
                } else {
                    0
                },
                cur,
                amount,
                booked: booked_after(rng, started),
                txn: 0,
            };
            match kind {
                Kind::MatchedRef | Kind::MatchedRetry => {
                    // Recorded id: reference echoed 80 % of the time; otherwise always.
                    let reference = if !records_id || rng.chance(8_000) {
                        by_ref(rng)
                    } else {
                        Reference::Empty
                    };
                    lines.push(line(rng, reference, cur, amount));
                }
                Kind::UnknownRef | Kind::SubmittingRef | Kind::FailedPaid => {
                    let reference = by_ref(rng);
                    lines.push(line(rng, reference, cur, amount));
                }
                Kind::MatchedFuzzy | Kind::UnknownFuzzy => {
                    lines.push(line(rng, Reference::Empty, cur, amount));
                }
                Kind::Duplicate => {
                    for _ in 0..2 {
                        let reference = by_ref(rng);
                        lines.push(line(rng, reference, cur, amount));
                    }
                }
                Kind::AmountMismatch => {
                    let fee = if cur == JPY {
                        rng.between(1, 100)
                    } else {
                        rng.between(1, 250)
                    };
                    let reference = by_ref(rng);
                    lines.push(line(rng, reference, cur, amount - fee));
                }
                Kind::CurrencyMismatch => {
                    // The same number in another (2-decimal) currency.
                    let others: Vec<u8> = (0..JPY).filter(|&c| c != cur).collect();
                    let other = others[rng.below(others.len() as u64) as usize];
                    let other_amount = if cur == JPY { amount * 100 } else { amount };
                    let reference = by_ref(rng);
                    lines.push(line(rng, reference, other, other_amount));
                }
                Kind::NearMiss => {
                    let diff = rng.between(1, amount / 2);
                    let other = if rng.chance(5_000) {
                        amount + diff
                    } else {
                        amount - diff
                    };
                    let mut near = line(rng, Reference::Empty, cur, other);
                    near.role = Role::NearMiss;
                    lines.push(near);
                }
                Kind::SubmittingNone
                | Kind::UnknownNone
                | Kind::Missing
                | Kind::FailedOk
                | Kind::Twin
                | Kind::LostTwin
                | Kind::UnnamedTwin
                | Kind::NamedTwin
                | Kind::Pending => {}
            }
            pays.push(pay);
        }

        // Twins: the second copies the first's money and recipient, started one minute later;
        // their single line is inside both windows.
        let twins: Vec<usize> = (0..n).filter(|&i| kinds[i] == Kind::Twin).collect();
        for pair in twins.chunks_exact(2) {
            let (a, b) = (pair[0], pair[1]);
            let (cur, amount, recipient) = (pays[a].cur, pays[a].amount, pays[a].recipient);
            let started = pays[a].started + MINUTE;
            let created = (started - rng.between(1, 5)).max(0);
            // Inside [start + 1 min, start + 48 h] of both twins.
            let booked = rng.between(started + MINUTE, pays[a].started + 48 * HOUR);
            let twin = &mut pays[b];
            twin.cur = cur;
            twin.amount = amount;
            twin.recipient = recipient;
            twin.started = started;
            twin.created = created;
            twin.partner = a as u32;
            pays[a].partner = b as u32;
            lines.push(Line {
                pay: a as u32,
                role: Role::Twin,
                reference: Reference::Empty,
                recipient,
                beneficiary_noise: 0,
                cur,
                amount,
                booked,
                txn: 0,
            });
        }

        // Lost twins: each copies a distinct plain MatchedRef's money and recipient and starts
        // minutes after it; the partner's line, which names the partner, is booked inside both
        // windows.
        // Unnamed twins: the same, with an unnamed line of their own inside both windows; their
        // partner becomes a `NamedTwin`. Only partners with a recipient of their own: the
        // unnamed line stays undecided, so it must not be in the window of a lost payment of a
        // shared recipient (that one's near miss would depend on it).
        let lost: Vec<usize> = (0..n).filter(|&i| kinds[i] == Kind::LostTwin).collect();
        let unnamed: Vec<usize> = (0..n).filter(|&i| kinds[i] == Kind::UnnamedTwin).collect();
        if !lost.is_empty() || !unnamed.is_empty() {
            let mut line_of: Vec<u32> = vec![NONE; n];
            for (k, l) in lines.iter().enumerate() {
                if l.pay != NONE && line_of[l.pay as usize] == NONE {
                    line_of[l.pay as usize] = k as u32;
                }
            }
            let partners = (0..n).filter(|&i| {
                kinds[i] == Kind::MatchedRef
                    && pays[i].started < DAY - HOUR
                    && line_of[i] != NONE
                    && pays[i].partner == NONE
            });
            let mut partners = partners.collect::<Vec<_>>().into_iter();
            for (b, a) in lost.into_iter().zip(partners.by_ref()) {
                let (cur, amount, recipient) = (pays[a].cur, pays[a].amount, pays[a].recipient);
                let started = pays[a].started + rng.between(MINUTE, 10 * MINUTE);
                let twin = &mut pays[b];
                twin.cur = cur;
                twin.amount = amount;
                twin.recipient = recipient;
                twin.started = started;
                twin.created = (started - rng.between(1, 5)).max(0);
                pays[a].partner = b as u32;
                let line = &mut lines[line_of[a] as usize];
                line.booked = rng.between(started + MINUTE, pays[a].started + 48 * HOUR);
            }
            let partners = partners.filter(|&i| pays[i].recipient >= pool);
            for (b, a) in unnamed.into_iter().zip(partners.collect::<Vec<_>>()) {
                let (cur, amount, recipient) = (pays[a].cur, pays[a].amount, pays[a].recipient);
                let started = pays[a].started + rng.between(MINUTE, 10 * MINUTE);
                let twin = &mut pays[b];
                twin.cur = cur;
                twin.amount = amount;
                twin.recipient = recipient;
                twin.started = started;
                twin.created = (started - rng.between(1, 5)).max(0);
                twin.partner = a as u32;
                pays[a].partner = b as u32;
                pays[a].kind = Kind::NamedTwin;
                kinds[a] = Kind::NamedTwin;
                // Both lines inside both windows.
                let line = &mut lines[line_of[a] as usize];
                line.booked = rng.between(started + MINUTE, pays[a].started + 48 * HOUR);
                lines.push(Line {
                    pay: b as u32,
                    role: Role::Shared,
                    reference: Reference::Empty,
                    recipient,
                    beneficiary_noise: 0,
                    cur,
                    amount,
                    booked: rng.between(started + MINUTE, pays[a].started + 48 * HOUR),
                    txn: 0,
                });
            }
        }

        // Mismatch neighbours: a lost payment (UnknownNone) of the recipient of an AMOUNT_ or
        // CURRENCY_MISMATCH payment, started so that the mismatched line (which names the other
        // payment) is inside its window, with other money than that line.
        if opts.busy_recipients {
            let mut line_of: Vec<u32> = vec![NONE; n];
            for (k, l) in lines.iter().enumerate() {
                if l.pay != NONE && line_of[l.pay as usize] == NONE {
                    line_of[l.pay as usize] = k as u32;
                }
            }
            let mut lost = (0..n).filter(|&i| kinds[i] == Kind::UnknownNone);
            for a in 0..n {
                if !matches!(kinds[a], Kind::AmountMismatch | Kind::CurrencyMismatch)
                    || line_of[a] == NONE
                    || !rng.chance(MISMATCH_NEIGHBOURS_PER_10K)
                {
                    continue;
                }
                let Some(b) = lost.next() else { break };
                let line = &lines[line_of[a] as usize];
                let started =
                    rng.between((line.booked - 60 * HOUR).max(0), line.booked.min(DAY - 1));
                let (line_cur, line_amount) = (line.cur, line.amount);
                let recipient = pays[a].recipient;
                let nb = &mut pays[b];
                nb.recipient = recipient;
                nb.started = started;
                nb.created = (started - rng.between(1, 5)).max(0);
                if nb.cur == line_cur && nb.amount == line_amount {
                    nb.amount += 1;
                }
            }
        }

        // Lines no payment claims are reported by the run whose day they are booked on, so
        // orphans and refunds are booked on `date` itself.

        // Orphans: unknown reference, recipient nobody in the ledger has.
        let orphans = if n == 0 {
            0
        } else {
            share(n, scaled(ORPHANS_PER_10K, opts.exceptions_per_10k)).max(1)
        };
        for k in 0..orphans {
            let cur = pick_currency(rng);
            let amount = pick_amount(rng, cur);
            lines.push(Line {
                pay: NONE,
                role: Role::Orphan,
                reference: Reference::External(k as u32 + 1),
                recipient: fresh(),
                beneficiary_noise: 0,
                cur,
                amount,
                booked: rng.between(0, DAY - 1),
                txn: 0,
            });
        }

        // Refunds of distinct MATCHED payments (started early enough to be refunded the same
        // day), to a recipient nobody else has.
        let mut bulk: Vec<u32> = (0..n)
            .filter(|&i| kinds[i] == Kind::MatchedRef && pays[i].started < DAY - HOUR)
            .map(|i| i as u32)
            .collect();
        let refunds = if bulk.is_empty() {
            0
        } else {
            share(n, REFUNDS_PER_10K).max(1).min(bulk.len())
        };
        for k in 0..refunds {
            let j = k + rng.below((bulk.len() - k) as u64) as usize;
            bulk.swap(k, j);
            let p = &pays[bulk[k] as usize];
            let started = p.started;
            lines.push(Line {
                pay: NONE,
                role: Role::Refund,
                reference: Reference::Refund(bulk[k]),
                recipient: fresh(),
                beneficiary_noise: 0,
                cur: p.cur,
                amount: rng.between(1, p.amount),
                booked: rng.between(started + MINUTE, DAY - 1),
                txn: 0,
            });
        }

        shuffle(&mut lines, rng);
        if opts.order == RowOrder::Time {
            // A provider writes its statement in booking order (stable: equal times keep the
            // shuffled order).
            lines.sort_by_key(|l| l.booked);
        }
        for (pos, line) in lines.iter_mut().enumerate() {
            let txn = pos as u32 + 1;
            line.txn = txn;
            if line.pay == NONE {
                continue;
            }
            let pay = &mut pays[line.pay as usize];
            if pay.txn_a == 0 {
                pay.txn_a = txn;
            } else {
                pay.txn_b = txn;
            }
            let partner = pay.partner as usize;
            match line.role {
                Role::Twin => pays[partner].txn_a = txn,
                // The named partner's own line is its txn_a, whenever it comes.
                Role::Shared => pays[partner].txn_b = txn,
                _ => {}
            }
        }
        let mut next_txn = lines.len() as u32 + 1;
        for pay in pays.iter_mut().filter(|p| p.phantom != 0) {
            pay.phantom = next_txn;
            next_txn += 1;
        }
        let txn_width = digits(next_txn as usize - 1).max(8);

        Self {
            pays,
            lines,
            partitions: 0,
            pay_part: Vec::new(),
            line_part: Vec::new(),
            crossing: Vec::new(),
            next_txn,
            bban,
            ids: opts.ids,
            order: opts.order,
            salts,
            pay_width,
            txn_width,
        }
    }

    /// Splits the world into `opts.partitions` partitions (nothing when 0) and, with two or
    /// more, plants the cross-partition look-alikes; returns how many pairs. Draws from a PRNG
    /// stream of its own, so the world without partitions is untouched.
    fn partition(&mut self, opts: &GenerateOptions) -> usize {
        let Ok(k) = u16::try_from(opts.partitions) else {
            return 0;
        };
        if k == 0 {
            return 0;
        }
        self.partitions = k;
        let mut rng = Rng::new(opts.seed ^ PARTITION_STREAM);
        let salt = rng.next_u64();
        // By recipient: every case that ties payments and lines together shares its recipient.
        let of_recipient = |recipient: u64| -> u16 {
            let h = mix64(recipient ^ salt);
            if k == 1 || scale_below(h, 10_000) < FIRST_PARTITION_PER_10K {
                0
            } else {
                1 + scale_below(mix64(h), u64::from(k - 1)) as u16
            }
        };
        self.pay_part = self
            .pays
            .iter()
            .map(|p| of_recipient(p.recipient))
            .collect();
        self.line_part = self
            .lines
            .iter()
            .map(|l| match (l.pay, l.reference) {
                (NONE, Reference::Refund(pay)) => self.pay_part[pay as usize],
                // An orphan: in the file of a partition drawn at random.
                (NONE, _) => rng.below(u64::from(k)) as u16,
                (pay, _) => self.pay_part[pay as usize],
            })
            .collect();
        if k < 2 || self.pays.is_empty() {
            return 0;
        }
        // Cross-partition look-alikes: two payments (in two partitions) to a recipient nobody
        // else has, with the same money and start, each paid by an unnamed line in its own
        // partition's file. With the wall each line has one candidate; without it, two.
        let pairs = share(self.pays.len(), LOOK_ALIKES_PER_10K).max(1);
        let first_fresh = self
            .pays
            .iter()
            .map(|p| p.recipient)
            .chain(self.lines.iter().map(|l| l.recipient))
            .max()
            .map_or(0, |r| r + 1);
        for recipient in (first_fresh..).take(pairs) {
            let cur = pick_currency(&mut rng);
            let amount = pick_amount(&mut rng, cur);
            let started = rng.between(0, DAY - 1);
            let first = rng.below(u64::from(k)) as u16;
            let second = (first + 1 + rng.below(u64::from(k - 1)) as u16) % k;
            let a = self.pays.len() as u32;
            for (part, partner) in [(first, a + 1), (second, a)] {
                let kind = if rng.chance(5_000) {
                    Kind::MatchedFuzzy
                } else {
                    Kind::UnknownFuzzy
                };
                let txn = self.next_txn;
                self.next_txn += 1;
                let pay = self.pays.len() as u32;
                self.pays.push(Pay {
                    kind,
                    cur,
                    amount,
                    recipient,
                    started,
                    created: (started - rng.between(1, 5)).max(0),
                    retry_gap: 0,
                    records_id: false,
                    detail: rng.below(3) as u8,
                    partner,
                    txn_a: txn,
                    txn_b: 0,
                    phantom: 0,
                });
                self.pay_part.push(part);
                self.lines.push(Line {
                    pay,
                    role: Role::Claimed,
                    reference: Reference::Empty,
                    recipient,
                    beneficiary_noise: 0,
                    cur,
                    amount,
                    booked: booked_after(&mut rng, started),
                    txn,
                });
                self.line_part.push(part);
            }
        }
        // Named lines booked in another partition's file: an UNKNOWN payment named by
        // reference, a SUCCEEDED one by its recorded provider id alone, each to a recipient
        // nobody else has (nothing in either partition looks like it).
        let crossing = share(self.pays.len(), CROSS_NAMED_PER_10K).max(1);
        for (n, recipient) in (first_fresh + pairs as u64..)
            .take(2 * crossing)
            .enumerate()
        {
            let kind = if n % 2 == 0 {
                Kind::UnknownRef
            } else {
                Kind::MatchedRef
            };
            let by_reference = kind == Kind::UnknownRef;
            let cur = pick_currency(&mut rng);
            let amount = pick_amount(&mut rng, cur);
            let started = rng.between(0, DAY - 1);
            let home = rng.below(u64::from(k)) as u16;
            let booked_in = (home + 1 + rng.below(u64::from(k - 1)) as u16) % k;
            let txn = self.next_txn;
            self.next_txn += 1;
            let pay = self.pays.len() as u32;
            self.pays.push(Pay {
                kind,
                cur,
                amount,
                recipient,
                started,
                created: (started - rng.between(1, 5)).max(0),
                retry_gap: 0,
                records_id: !by_reference,
                detail: rng.below(3) as u8,
                partner: NONE,
                txn_a: txn,
                txn_b: 0,
                phantom: 0,
            });
            self.pay_part.push(home);
            self.lines.push(Line {
                pay,
                role: Role::Claimed,
                reference: if by_reference {
                    Reference::Payment {
                        pay,
                        noise: 0,
                        pos: 0,
                    }
                } else {
                    Reference::Empty
                },
                recipient,
                beneficiary_noise: 0,
                cur,
                amount,
                booked: booked_after(&mut rng, started),
                txn,
            });
            self.line_part.push(booked_in);
            self.crossing.push(pay);
        }
        self.txn_width = digits(self.next_txn as usize - 1).max(8);
        pairs
    }

    /// The planted named lines booked in another partition's file, by payment id.
    fn cross_partition_lines(&self, names: &[String]) -> Vec<CrossPartitionLine> {
        let mut out: Vec<CrossPartitionLine> = self
            .crossing
            .iter()
            .map(|&pay| {
                let p = &self.pays[pay as usize];
                let (mut payment_id, mut txn_id) = (String::new(), String::new());
                self.push_payment_id(&mut payment_id, pay);
                self.push_txn_id(&mut txn_id, p.txn_a);
                let line = self
                    .lines
                    .iter()
                    .position(|l| l.txn == p.txn_a)
                    .unwrap_or_default();
                CrossPartitionLine {
                    payment_id,
                    status: p.kind.status(),
                    payment_partition: names[self.pay_part[pay as usize] as usize].clone(),
                    txn_id,
                    line_partition: names[self.line_part[line] as usize].clone(),
                    by_reference: !p.records_id,
                    outcome: p.kind.outcome(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
        out
    }

    /// The partitions' names, `M01` … (zero-padded to the width of the count, at least two
    /// digits); empty without partitions.
    fn partition_names(&self) -> Vec<String> {
        let width = digits(usize::from(self.partitions)).max(2);
        (1..=u64::from(self.partitions))
            .map(|k| {
                let mut name = String::from("M");
                push_padded(&mut name, k, width);
                name
            })
            .collect()
    }

    /// The positions of partition `k`'s lines, in its file's order: the statement order, with
    /// the look-alikes' lines by booking time among the others (or after them in payment
    /// order, where the statement is shuffled).
    fn partition_lines(&self, k: u16) -> Vec<u32> {
        let mut lines: Vec<u32> = (0..self.lines.len() as u32)
            .filter(|&pos| self.line_part[pos as usize] == k)
            .collect();
        if self.order == RowOrder::Time {
            lines.sort_by_key(|&pos| self.lines[pos as usize].booked);
        }
        lines
    }

    fn push_payment_id(&self, out: &mut String, idx: u32) {
        match self.ids {
            IdStyle::Uuid => push_uuid(out, u64::from(idx), self.salts[0], self.salts[1]),
            IdStyle::Short => {
                out.push_str("PAY-");
                push_padded(out, u64::from(idx) + 1, self.pay_width);
            }
        }
    }

    fn push_attempt_id(&self, out: &mut String, idx: u32, n: u8) {
        match self.ids {
            IdStyle::Uuid => push_uuid(
                out,
                u64::from(idx) << 2 | u64::from(n),
                self.salts[2],
                self.salts[3],
            ),
            IdStyle::Short => {
                out.push_str("ATT-");
                push_padded(out, u64::from(idx) + 1, self.pay_width);
                out.push('-');
                out.push(char::from(b'0' + n));
            }
        }
    }

    fn push_txn_id(&self, out: &mut String, txn: u32) {
        match self.ids {
            IdStyle::Uuid => {
                // `pt_` + 24 hex digits; the first 16 are a bijection of the txn number.
                out.push_str("pt_");
                push_hex(out, mix64(u64::from(txn).wrapping_add(self.salts[4])), 16);
                push_hex(out, mix64(u64::from(txn) ^ self.salts[5]) >> 32, 8);
            }
            IdStyle::Short => {
                out.push_str("PSP-");
                push_padded(out, u64::from(txn), self.txn_width);
            }
        }
    }

    /// Payment indices in `payments.csv` order: by creation time, or by index.
    fn payment_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.pays.len() as u32).collect();
        if self.order == RowOrder::Time {
            order.sort_by_key(|&i| (self.pays[i as usize].created, i));
        }
        order
    }

    /// `payments.csv`; returns the number of attempts the ledger holds.
    fn write_payments(&self, path: &Path, clock: &Clock) -> anyhow::Result<usize> {
        let mut w = csv_writer(path)?;
        let names = self.partition_names();
        if names.is_empty() {
            w.write_record(PAYMENTS_HEADER)?;
        } else {
            w.write_record(PAYMENTS_HEADER.iter().chain([&PARTITION_COLUMN]))?;
        }
        let mut id = String::new();
        let mut recipient = String::new();
        let mut created = String::new();
        let mut started = String::new();
        let mut attempt = String::new();
        let mut provider = String::new();
        let mut attempts = 0;
        for i in self.payment_order() {
            let p = &self.pays[i as usize];
            for s in [
                &mut id,
                &mut recipient,
                &mut created,
                &mut started,
                &mut attempt,
                &mut provider,
            ] {
                s.clear();
            }
            self.push_payment_id(&mut id, i);
            self.bban.push_iban(&mut recipient, p.recipient);
            clock.push(&mut created, p.created)?;
            if p.kind != Kind::Pending {
                clock.push(&mut started, p.started)?;
                let n = if p.kind == Kind::MatchedRetry { 2 } else { 1 };
                attempts += usize::from(n);
                self.push_attempt_id(&mut attempt, i, n);
            }
            if p.records_id {
                self.push_txn_id(&mut provider, p.txn_a);
            } else if p.phantom != 0 {
                self.push_txn_id(&mut provider, p.phantom);
            }
            let amount = money::format_minor(p.amount, CURRENCIES[p.cur as usize]);
            let fields = [
                id.as_str(),
                &recipient,
                &amount,
                CURRENCIES[p.cur as usize],
                p.kind.status(),
                &created,
                &started,
                &attempt,
                &provider,
            ];
            match self.pay_part.get(i as usize) {
                None => w.write_record(fields)?,
                Some(&k) => w.write_record(fields.iter().chain([&names[k as usize].as_str()]))?,
            }
        }
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(attempts)
    }

    /// `attempts.csv`: the current attempt of every submitted payment (and the failed first
    /// attempt of retried ones), by start time (or in payment order).
    fn write_attempts(&self, path: &Path, clock: &Clock, rng: &mut Rng) -> anyhow::Result<()> {
        /// One attempt: (started, payment, attempt number, finished).
        type Attempt = (i64, u32, u8, Option<i64>);
        // Drawn in payment order whatever the row order, so both orders hold the same world.
        let mut all: Vec<Attempt> = Vec::with_capacity(self.pays.len() + self.pays.len() / 50);
        for (i, p) in self.pays.iter().enumerate() {
            if p.kind == Kind::Pending {
                continue;
            }
            if p.kind == Kind::MatchedRetry {
                let first = p.started - p.retry_gap;
                all.push((first, i as u32, 1, Some(first + rng.between(1, 20))));
            }
            let n = if p.kind == Kind::MatchedRetry { 2 } else { 1 };
            let finished = matches!(p.kind.status(), "SUCCEEDED" | "FAILED")
                .then(|| p.started + rng.between(1, 20));
            all.push((p.started, i as u32, n, finished));
        }
        if self.order == RowOrder::Time {
            all.sort_unstable();
        }

        let mut w = csv_writer(path)?;
        w.write_record(ATTEMPTS_HEADER)?;
        let mut id = String::new();
        let mut attempt = String::new();
        let mut started = String::new();
        let mut finished = String::new();
        let mut provider = String::new();
        for (start, i, n, end) in all {
            let p = &self.pays[i as usize];
            for s in [
                &mut id,
                &mut attempt,
                &mut started,
                &mut finished,
                &mut provider,
            ] {
                s.clear();
            }
            self.push_payment_id(&mut id, i);
            self.push_attempt_id(&mut attempt, i, n);
            clock.push(&mut started, start)?;
            if let Some(end) = end {
                clock.push(&mut finished, end)?;
            }
            let first_of_retry = p.kind == Kind::MatchedRetry && n == 1;
            let (outcome, detail) = match p.kind.status() {
                _ if first_of_retry => ("FAILED", FAILED_DETAILS[p.detail as usize]),
                "SUCCEEDED" => ("SUCCEEDED", ""),
                "FAILED" => ("FAILED", FAILED_DETAILS[p.detail as usize]),
                "UNKNOWN" => ("UNKNOWN", UNKNOWN_DETAILS[p.detail as usize]),
                _ => ("", ""),
            };
            if first_of_retry {
            } else if p.records_id {
                self.push_txn_id(&mut provider, p.txn_a);
            } else if p.phantom != 0 {
                self.push_txn_id(&mut provider, p.phantom);
            }
            w.write_record([
                attempt.as_str(),
                &id,
                &started,
                &finished,
                outcome,
                &provider,
                detail,
            ])?;
        }
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    fn push_reference(&self, out: &mut String, reference: Reference) {
        match reference {
            Reference::Empty => {}
            Reference::Payment { pay, noise, pos } => {
                let start = out.len();
                if noise == 4 {
                    out.push(' ');
                }
                self.push_payment_id(out, pay);
                if noise == 4 {
                    out.push(' ');
                }
                if noise == 1 || noise == 3 {
                    // The other case than the ledger's spelling.
                    match self.ids {
                        IdStyle::Uuid => out[start..].make_ascii_uppercase(),
                        IdStyle::Short => out[start..].make_ascii_lowercase(),
                    }
                }
                if noise == 2 || noise == 3 {
                    out.insert(start + pos as usize, ' ');
                }
            }
            Reference::External(k) => {
                out.push_str("EXT-");
                push_padded(out, u64::from(k), 7);
            }
            Reference::Refund(pay) => {
                out.push_str("RF-");
                self.push_payment_id(out, pay);
            }
        }
    }

    fn push_beneficiary(&self, out: &mut String, recipient: u64, noise: u8) {
        let start = out.len();
        self.bban.push_iban(out, recipient);
        if noise == 1 || noise == 3 {
            out[start..].make_ascii_lowercase();
        }
        if noise == 2 || noise == 3 {
            let plain = out.split_off(start);
            for (k, ch) in plain.chars().enumerate() {
                if k > 0 && k % 4 == 0 {
                    out.push(' ');
                }
                out.push(ch);
            }
        }
    }

    /// A statement file of the lines at the positions `lines`, in that order.
    fn write_statement(&self, path: &Path, clock: &Clock, lines: &[u32]) -> anyhow::Result<()> {
        let mut w = csv_writer(path)?;
        w.write_record(STATEMENT_HEADER)?;
        let mut txn = String::new();
        let mut reference = String::new();
        let mut beneficiary = String::new();
        let mut booked = String::new();
        for line in lines.iter().map(|&pos| &self.lines[pos as usize]) {
            for s in [&mut txn, &mut reference, &mut beneficiary, &mut booked] {
                s.clear();
            }
            self.push_txn_id(&mut txn, line.txn);
            self.push_reference(&mut reference, line.reference);
            self.push_beneficiary(&mut beneficiary, line.recipient, line.beneficiary_noise);
            clock.push(&mut booked, line.booked)?;
            let currency = CURRENCIES[line.cur as usize];
            let amount = money::format_minor(line.amount, currency);
            let kind = if line.role == Role::Refund {
                "REFUND"
            } else {
                "PAYMENT"
            };
            w.write_record([
                txn.as_str(),
                &reference,
                &beneficiary,
                &amount,
                currency,
                &booked,
                kind,
            ])?;
        }
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    /// `expected.csv`: payment rows by payment id, then line rows by txn id. Returns the row
    /// count per outcome.
    fn write_expected(&self, path: &Path) -> anyhow::Result<BTreeMap<String, usize>> {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut w = csv_writer(path)?;
        w.write_record(EXPECTED_HEADER)?;
        // Payment rows sorted by payment id, then line rows sorted by txn id.
        let mut ids: Vec<(String, u32)> = (0..self.pays.len() as u32)
            .map(|i| {
                let mut id = String::with_capacity(UUID_LEN);
                self.push_payment_id(&mut id, i);
                (id, i)
            })
            .collect();
        ids.sort_unstable();
        let mut txn = String::new();
        for (id, i) in &ids {
            let p = &self.pays[*i as usize];
            txn.clear();
            if p.txn_a != 0 {
                self.push_txn_id(&mut txn, p.txn_a);
            }
            if p.txn_b != 0 {
                // The two txn ids in text order, as `score` compares them.
                let a = txn.clone();
                let mut b = String::new();
                self.push_txn_id(&mut b, p.txn_b);
                let (first, second) = if a <= b { (a, b) } else { (b, a) };
                txn = format!("{first};{second}");
            }
            let outcome = p.kind.outcome();
            *counts.entry(outcome).or_default() += 1;
            w.write_record([outcome, id, &txn])?;
        }
        let mut line_rows: Vec<(String, &'static str)> = Vec::new();
        for line in &self.lines {
            let outcome = match line.role {
                Role::Claimed => continue,
                Role::Orphan => ORPHAN_AT_PROVIDER,
                Role::Refund => REFUND,
                Role::Twin | Role::NearMiss | Role::Shared => AMBIGUOUS,
            };
            let mut txn = String::new();
            self.push_txn_id(&mut txn, line.txn);
            line_rows.push((txn, outcome));
        }
        line_rows.sort_unstable();
        for (txn, outcome) in line_rows {
            *counts.entry(outcome).or_default() += 1;
            w.write_record([outcome, "", &txn])?;
        }
        w.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(counts
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect())
    }
}

fn csv_writer(path: &Path) -> anyhow::Result<csv::Writer<BufWriter<File>>> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(BufWriter::with_capacity(1 << 16, file)))
}

/// Formats second offsets from `date` 00:00:00Z as RFC 3339 UTC, with the few dates involved
/// preformatted.
pub struct Clock {
    /// `YYYY-MM-DD` of `date - 2 days ..= date + 5 days`.
    days: Vec<String>,
}

impl Clock {
    const FIRST_DAY: i64 = -2;

    pub fn new(date: NaiveDate) -> anyhow::Result<Self> {
        let first = date
            .checked_sub_days(Days::new(2))
            .with_context(|| format!("date {date} is out of range"))?;
        let days = (0..8)
            .map(|k| {
                first
                    .checked_add_days(Days::new(k))
                    .map(|d| d.format("%Y-%m-%d").to_string())
                    .with_context(|| format!("date {date} is out of range"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self { days })
    }

    pub fn push(&self, out: &mut String, secs: i64) -> anyhow::Result<()> {
        let day = secs.div_euclid(DAY) - Self::FIRST_DAY;
        let Some(date) = usize::try_from(day).ok().and_then(|d| self.days.get(d)) else {
            bail!("timestamp offset {secs}s is outside the generated range");
        };
        let s = secs.rem_euclid(DAY);
        out.push_str(date);
        out.push('T');
        push_padded(out, (s / HOUR) as u64, 2);
        out.push(':');
        push_padded(out, (s % HOUR / MINUTE) as u64, 2);
        out.push(':');
        push_padded(out, (s % MINUTE) as u64, 2);
        out.push('Z');
        Ok(())
    }
}

/// Writes `<statement>.ctl`, the control file a provider delivers with a complete statement
/// (`lines=`, `sha256=`): the generated config proves completeness with it.
fn write_control_file(statement: &Path, lines: usize) -> anyhow::Result<()> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut f =
        File::open(statement).with_context(|| format!("cannot read {}", statement.display()))?;
    // Streamed: a statement of ten million lines is a gigabyte.
    std::io::copy(&mut f, &mut hasher)
        .with_context(|| format!("cannot read {}", statement.display()))?;
    let sha = hex::encode(hasher.finalize());
    let ctl = PathBuf::from(format!("{}.ctl", statement.display()));
    std::fs::write(&ctl, recon::sources::control_text(Some(lines), Some(&sha)))
        .with_context(|| format!("cannot write {}", ctl.display()))
}

/// The column mapping of the provider statement both generators write (`txn_id`, `reference`,
/// `beneficiary`, `amount`, `currency`, `booked_at`, `type`), as a `[source.columns]` table.
pub(crate) const PSP_COLUMNS: &str = r#"[source.columns]
provider_txn_id = "txn_id"
reference = "reference"
recipient = "beneficiary"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
kind = "type"
"#;

/// `recon.toml`: one source for `statement.csv`, or with partitions (`names`) the
/// `[partition]` table and one source per partition's file.
fn write_config(path: &Path, opts: &GenerateOptions, names: &[String]) -> anyhow::Result<()> {
    let day = |offset: i64| -> anyhow::Result<String> {
        let d = if offset < 0 {
            opts.date.checked_sub_days(Days::new(offset.unsigned_abs()))
        } else {
            opts.date.checked_add_days(Days::new(offset as u64))
        };
        d.map(|d| d.format("%Y-%m-%d").to_string())
            .with_context(|| format!("date {} is out of range", opts.date))
    };
    let (from, to) = (day(-1)?, day(4)?);
    let source = |name: &str, file: &str, partition: &str| {
        format!(
            r#"[[source]]
name = "{name}"
format = "csv"
path = "{file}"
{partition}timezone = "UTC"
timestamp_format = "rfc3339"
decimal_separator = "."
complete_from = "{from}"
complete_to = "{to}"
completeness = "control_file"

{PSP_COLUMNS}"#
        )
    };
    let mut text = format!(
        r#"# Generated by `recon-tools generate` (seed {seed}, {n} payments, date {date}{k}).
timezone = "UTC"
database_url = "sqlite://recon.db"
output_dir = "out"
stale_submitting_minutes = 30
settlement_lag_hours = 24
carry_over_days = 14

"#,
        seed = opts.seed,
        n = opts.payments,
        date = day(0)?,
        k = if names.is_empty() {
            String::new()
        } else {
            format!(", {} partitions", names.len())
        },
    );
    // A statement line is about 110 bytes: a night past about a million payments has a
    // statement over the default `max_file_mb` (112), so its job says what it needs (the
    // machine needs memory to match, docs/operations.md "Memory").
    let statement_mib = (opts.payments as u64).saturating_mul(128) >> 20;
    if statement_mib > recon::sources::limits::DEFAULT_MAX_FILE_MB {
        text.push_str(&format!(
            "# sized to this night's statement; memory to match (docs/operations.md \"Memory\")\nmax_file_mb = {}\n\n",
            statement_mib + 16
        ));
    }
    if names.is_empty() {
        text.push_str(&source("psp", "statement.csv", ""));
    } else {
        text.push_str(&format!("[partition]\ncolumn = \"{PARTITION_COLUMN}\"\n"));
        for name in names {
            text.push('\n');
            text.push_str(&source(
                &format!("provider-{name}"),
                &format!("statement-{name}.csv"),
                &format!("partition = \"{name}\"\n"),
            ));
        }
    }
    let mut file = BufWriter::new(
        File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .with_context(|| format!("cannot write {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Scoring

/// How often recon's outcome for one expected outcome was a given outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confusion {
    /// The expected outcome, or `(unexpected)` for result rows with no expected row.
    pub expected: String,
    /// Recon's outcome, or `(missing)` for expected rows recon did not report.
    pub got: String,
    /// Number of rows.
    pub count: usize,
}

/// Accuracy for one expected outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeScore {
    /// The expected outcome.
    pub outcome: String,
    /// Expected rows with this outcome.
    pub expected: usize,
    /// Of those, rows recon got fully right (outcome and linked txn ids).
    pub correct: usize,
}

/// The comparison of a `results.csv` with an `expected.csv` (see [`score`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Score {
    /// Rows in `expected.csv`.
    pub expected_rows: usize,
    /// Rows in `results.csv`.
    pub result_rows: usize,
    /// Rows with the expected outcome and the expected provider txn id(s).
    pub correct: usize,
    /// Rows present in both with a different outcome.
    pub wrong_outcome: usize,
    /// Rows present in both with the expected outcome but other provider txn id(s).
    pub wrong_link: usize,
    /// Expected rows recon did not report.
    pub missing: usize,
    /// Result rows with no expected row (including repeated keys).
    pub unexpected: usize,
    /// Result rows whose outcome is automatic (MATCHED, RESOLVED_SUCCEEDED, RESOLVED_FAILED)
    /// but not fully right: other expected outcome, other txn id(s), or no expected row.
    pub wrong_automatic: usize,
    /// Payments and statement lines of the data set: the payment rows of `expected.csv` plus
    /// the distinct provider txn ids it names (every line is named there, in its payment's row
    /// or its own).
    pub items: usize,
    /// Result rows `AMBIGUOUS` (sent to a human) although the evidence decides them: the
    /// expected outcome is another, or the row is not expected at all (a line claimed by
    /// exactly one payment).
    pub needless_review: usize,
    /// (expected → got) counts, including the diagonal, sorted by expected then got.
    pub confusion: Vec<Confusion>,
    /// Per expected outcome, sorted by outcome.
    pub per_outcome: Vec<OutcomeScore>,
}

impl Score {
    /// True when every expected row was reported correctly and nothing else was reported.
    pub fn is_perfect(&self) -> bool {
        self.correct == self.expected_rows && self.result_rows == self.expected_rows
    }
}

/// `n / d` as a percentage with two decimals, without floating point.
fn percent(n: usize, d: usize) -> String {
    if d == 0 {
        return "n/a".to_string();
    }
    let bp = (n as u128 * 10_000 + d as u128 / 2) / d as u128;
    format!("{}.{:02}%", bp / 100, bp % 100)
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "correct: {} of {} expected rows ({})",
            self.correct,
            self.expected_rows,
            percent(self.correct, self.expected_rows)
        )?;
        writeln!(
            f,
            "result rows: {}; wrong outcome: {}; wrong link: {}; missing: {}; unexpected: {}",
            self.result_rows, self.wrong_outcome, self.wrong_link, self.missing, self.unexpected
        )?;
        writeln!(
            f,
            "wrong automatic decisions (MATCHED / RESOLVED_*): {}",
            self.wrong_automatic
        )?;
        writeln!(
            f,
            "sent to review although the evidence decides them: {} of {} payments and lines ({})",
            self.needless_review,
            self.items,
            percent(self.needless_review, self.items)
        )?;
        writeln!(f, "per expected outcome (correct / expected):")?;
        for o in &self.per_outcome {
            writeln!(
                f,
                "  {:<22} {:>9} / {:<9} {}",
                o.outcome,
                o.correct,
                o.expected,
                percent(o.correct, o.expected)
            )?;
        }
        let off: Vec<&Confusion> = self
            .confusion
            .iter()
            .filter(|c| c.expected != c.got)
            .collect();
        if off.is_empty() {
            write!(f, "no confusions")
        } else {
            write!(f, "confusions (expected -> got: rows):")?;
            for c in off {
                write!(f, "\n  {} -> {}: {}", c.expected, c.got, c.count)?;
            }
            Ok(())
        }
    }
}

/// A row's identity: payment rows by payment id, line rows by provider txn id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Payment(String),
    Line(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    outcome: String,
    /// Txn ids, trimmed, sorted, joined with `;`.
    txns: String,
}

/// Streams `(key, verdict)` rows of an outcome file, finding the columns by header name.
struct OutcomeFile {
    reader: csv::Reader<File>,
    outcome: usize,
    payment: usize,
    txn: usize,
    path: PathBuf,
}

impl OutcomeFile {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_path(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let headers = reader
            .headers()
            .with_context(|| format!("cannot read the header of {}", path.display()))?
            .clone();
        let column = |name: &str| {
            headers
                .iter()
                .position(|h| h.trim_start_matches('\u{feff}').trim() == name)
                .with_context(|| format!("{} has no column {name:?}", path.display()))
        };
        Ok(Self {
            outcome: column("outcome")?,
            payment: column("payment_id")?,
            txn: column("provider_txn_id")?,
            reader,
            path: path.to_path_buf(),
        })
    }

    fn next(&mut self, record: &mut csv::StringRecord) -> anyhow::Result<Option<(Key, Verdict)>> {
        if !self
            .reader
            .read_record(record)
            .with_context(|| format!("cannot read {}", self.path.display()))?
        {
            return Ok(None);
        }
        let field = |i: usize| record.get(i).unwrap_or("").trim();
        let mut txns: Vec<&str> = field(self.txn)
            .split(';')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        txns.sort_unstable();
        let txns = txns.join(";");
        let payment = field(self.payment);
        let key = if payment.is_empty() {
            Key::Line(txns.clone())
        } else {
            Key::Payment(payment.to_string())
        };
        let verdict = Verdict {
            outcome: field(self.outcome).to_ascii_uppercase(),
            txns,
        };
        Ok(Some((key, verdict)))
    }
}

/// Scores recon's `results_csv` against `expected_csv`.
///
/// Both files need the columns `outcome`, `payment_id` and `provider_txn_id` (any order, other
/// columns ignored). Rows with a payment id are keyed by it; rows without by their provider txn
/// id. A row is correct when the outcome and the set of `;`-separated txn ids are equal.
pub fn score(expected_csv: &Path, results_csv: &Path) -> anyhow::Result<Score> {
    let mut record = csv::StringRecord::new();
    let mut expected: HashMap<Key, Verdict> = HashMap::new();
    let mut txns: HashSet<String> = HashSet::new();
    let mut payments = 0;
    let mut file = OutcomeFile::open(expected_csv)?;
    while let Some((key, verdict)) = file.next(&mut record)? {
        payments += usize::from(matches!(key, Key::Payment(_)));
        txns.extend(
            verdict
                .txns
                .split(';')
                .filter(|t| !t.is_empty())
                .map(str::to_string),
        );
        if let Some(old) = expected.insert(key.clone(), verdict) {
            bail!(
                "{} lists {key:?} twice (as {} and again)",
                expected_csv.display(),
                old.outcome
            );
        }
    }

    let mut s = Score {
        expected_rows: expected.len(),
        items: payments + txns.len(),
        ..Score::default()
    };
    drop(txns);
    let mut cells: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut per: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for v in expected.values() {
        per.entry(v.outcome.clone()).or_default().0 += 1;
    }
    let mut seen: HashSet<Key> = HashSet::with_capacity(expected.len());
    let mut file = OutcomeFile::open(results_csv)?;
    while let Some((key, got)) = file.next(&mut record)? {
        s.result_rows += 1;
        let automatic = AUTOMATIC_OUTCOMES.contains(&got.outcome.as_str());
        let want = if seen.insert(key.clone()) {
            expected.get(&key)
        } else {
            None
        };
        if got.outcome == AMBIGUOUS && want.is_none_or(|w| w.outcome != AMBIGUOUS) {
            s.needless_review += 1;
        }
        let Some(want) = want else {
            s.unexpected += 1;
            s.wrong_automatic += usize::from(automatic);
            *cells
                .entry(("(unexpected)".to_string(), got.outcome))
                .or_default() += 1;
            continue;
        };
        if *want == got {
            s.correct += 1;
            per.entry(want.outcome.clone()).or_default().1 += 1;
        } else {
            if want.outcome == got.outcome {
                s.wrong_link += 1;
            } else {
                s.wrong_outcome += 1;
            }
            s.wrong_automatic += usize::from(automatic);
        }
        *cells
            .entry((want.outcome.clone(), got.outcome))
            .or_default() += 1;
    }
    for (key, want) in &expected {
        if !seen.contains(key) {
            s.missing += 1;
            *cells
                .entry((want.outcome.clone(), "(missing)".to_string()))
                .or_default() += 1;
        }
    }
    s.confusion = cells
        .into_iter()
        .map(|((expected, got), count)| Confusion {
            expected,
            got,
            count,
        })
        .collect();
    s.per_outcome = per
        .into_iter()
        .map(|(outcome, (expected, correct))| OutcomeScore {
            outcome,
            expected,
            correct,
        })
        .collect();
    Ok(s)
}
