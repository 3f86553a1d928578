//! A seeded world of payment nights: what truly happened to every payment, what the ledger
//! knows, which statement lines the provider (`psp`) and our bank (`bank`) book, and when each
//! daily statement file arrives (on time, late, never, re-delivered, corrected, truncated).
//!
//! The world is library code shared by `recon-tools generate --days N` (which writes it to a
//! folder) and the night-by-night harness in `tests/it/nights.rs` (which plays it against recon
//! and checks safety invariants against the truth). Nothing here calls recon: recon sees the world
//! only through the files rendered from it.
//!
//! Time model (the job's zone is `Europe/Berlin`, which has a 25-hour day at the end of
//! October):
//! - business day `i` is the Berlin date `start + i`; payments start on days `0..days`;
//! - night `n` (0-based) runs recon for day `n` with `as_of` = day `n + 1`, 02:00 Berlin;
//! - the `psp` writes one file per **UTC** day (`psp-YYYY-MM-DD.csv`, RFC 3339 timestamps), so
//!   a Berlin day spans two provider files; the `bank` writes one file per Berlin day
//!   (`bank-YYYY-MM-DD.csv`) with **date-only** bookings and debits as negative amounts;
//! - a complete delivery comes with a control file `<file>.ctl` (`lines=N`, `sha256=…`);
//! - file `j` of either source is due on night `j` (it is complete after its day ended).
//!
//! Everything random comes from one xoshiro256** stream ([`crate::generate`]'s), so the same
//! [`SimOptions`] give the same world and byte-identical files.

use crate::generate::Rng;
use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use recon::timeparse::{self, HOUR, MINUTE, Micros};
use rust_decimal::Decimal;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The job's time zone.
pub const JOB_TZ: Tz = chrono_tz::Europe::Berlin;
/// The provider files' day boundary.
pub const PSP_TZ: Tz = chrono_tz::UTC;
/// Evidence window after `started_at` (the config's `evidence_window_after`).
pub const WINDOW_AFTER: Micros = 72 * HOUR;
/// Evidence window before `started_at`.
pub const WINDOW_BEFORE: Micros = 10 * MINUTE;
/// `settlement_lag_hours`.
pub const LAG: Micros = 24 * HOUR;
/// `stale_submitting_minutes`.
pub const STALE: Micros = 30 * MINUTE;
/// Local time of the nightly run.
pub const NIGHT_HOUR: i64 = 2;

/// Probabilities, in units of 1/10 000.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probs {
    /// Payment goes over the bank rail (else the provider).
    pub bank_rail: u64,
    /// Ledger status shares (the rest is PENDING).
    pub succeeded: u64,
    /// FAILED.
    pub failed: u64,
    /// UNKNOWN (a timeout).
    pub unknown: u64,
    /// Stale SUBMITTING.
    pub submitting: u64,
    /// A ledger-SUCCEEDED payment that the provider never paid.
    pub succeeded_but_lost: u64,
    /// A ledger-FAILED payment that was paid anyway.
    pub failed_but_paid: u64,
    /// An UNKNOWN / SUBMITTING payment that was paid.
    pub unknown_paid: u64,
    /// A paid payment paid a second time.
    pub paid_twice: u64,
    /// A paid payment whose money came back 1–10 days later.
    pub returned: u64,
    /// The provider line names the payment in its reference.
    pub psp_reference: u64,
    /// The bank line names the payment in its reference.
    pub bank_reference: u64,
    /// The ledger recorded the provider's id (SUCCEEDED; other statuses a fraction of it).
    pub ledger_knows_provider_id: u64,
    /// An UNKNOWN / SUBMITTING payment the ledger has no provider id for, whose current attempt
    /// has it (the service stored the provider's answer on the attempt and died before it
    /// updated the payment row).
    pub attempt_only_provider_id: u64,
    /// A recipient from the shared pool (receives several payments).
    pub shared_recipient: u64,
    /// Same amount as the shared recipient's previous payment.
    pub same_amount: u64,
    /// A twin: same recipient and amount as a payment minutes earlier.
    pub twin: u64,
    /// An earlier failed attempt before the current one.
    pub retry: u64,
    /// A line nobody in the ledger sent (per source and day).
    pub foreign_line: u64,
    /// A daily file arrives late (1–3 nights).
    pub late: u64,
    /// A daily file never arrives.
    pub never: u64,
    /// A delivered file is delivered again, identical.
    pub redelivered: u64,
    /// A delivered file is replaced later by a corrected one (a line added or withdrawn).
    pub corrected: u64,
    /// The first delivery is cut at a line boundary, without a matching control file.
    pub truncated: u64,
    /// Shape (issue 30): a payment declined days ago (ledger FAILED, never paid) is retried:
    /// the row becomes SUBMITTING with a new current attempt started 10 minutes or 25 hours
    /// before a night's as-of, while `payments.started_at` keeps the first attempt's start.
    /// Per eligible payment; 0 switches the shape off.
    pub live_retry: u64,
    /// Shape (issue 30): a lost UNKNOWN payment gets a line with its recipient, amount and
    /// currency inside its window whose reference names another payment: a UUID no payment of
    /// ours has (another system's payout) or an old payment of ours outside the carry-over
    /// horizon (its late second payout). Half as often, a paid UNKNOWN payment's payout
    /// carries a free-text invoice reference instead of the payment id. 0 switches it off.
    pub other_reference: u64,
    /// Shape (issue 30): a stored webhook event says PAID about a lost UNKNOWN provider
    /// payment before a night's as-of, a later event says FAILED, and no line ever shows the
    /// money. Per eligible payment; 0 switches it off (and the `[[status_api]]` block).
    pub late_contradiction: u64,
    /// Shape (issue 30): a PENDING payment (never submitted, per the ledger) is paid: its
    /// payout line names it. Per PENDING payment; 0 switches it off.
    pub paid_while_pending: u64,
    /// Shape: a blind retry. An UNKNOWN payment was in fact paid by its first attempt (an
    /// unnamed line booked inside that attempt's window), and the payment service retried it
    /// days later: the row becomes SUBMITTING with a new current attempt whose window starts
    /// after that line. "No line" in the retry's window must not resolve it FAILED. Per
    /// eligible payment; 0 switches it off.
    pub blind_retry: u64,
    /// Reviewers (issue 40): a reviewer confirms the WRONG candidate of an ambiguity or near
    /// miss (one whose line the truth gives another payment, or nobody). Per confirmable
    /// decision that has a wrong candidate; 0 switches it off.
    pub wrong_confirm: u64,
    /// Reviewers (issue 40): a reviewer decides `succeeded` on a truly lost payment or
    /// `failed` on a paid one. Per status decision; 0 switches it off.
    pub wrong_status: u64,
    /// Provider (issue 40): after a confirmation (wrong or right) of a provider line that is
    /// truly a payment's, the provider re-delivers the line's file with its reference naming
    /// that payment (the line keeps its provider id: the same line). Also, after a wrong
    /// `failed` on a paid payment, its unnamed provider payout re-delivered naming it. Per
    /// decision; 0 switches it off.
    pub corrected_after_confirm: u64,
    /// Provider (issue 40): after a confirmation of a provider payout, the provider's webhook
    /// says the payout id is its true payment's, PAID. Per decision; 0 switches it off (and,
    /// with `failed_hook_after_human` also 0, the `[[status_api]]` block when no other shape
    /// stores webhook events).
    pub hook_after_confirm: u64,
    /// Provider (issue 40): a webhook FAILED about a payment after a reviewer decided it
    /// `succeeded`. Per such decision on a provider payment; 0 switches it off.
    pub failed_hook_after_human: u64,
    /// Provider (issue 40): the money of a payment a reviewer rightly decided `succeeded`
    /// comes back (a return line naming it, booked in a later file). Per decision.
    pub return_after_human: u64,
    /// Provider (issue 40): a payout naming a payment a reviewer decided `failed` is booked in
    /// a later file (the money left after all). Per decision.
    pub line_after_human_failed: u64,
    /// Reviewers (issue 40): a Decide sheet is kept 1–4 nights before it is applied. Per file.
    pub sheet_kept: u64,
    /// World (issue 40): an unresolved payment gets a look-alike line (its recipient and
    /// currency, another amount, inside its window), so that its case offers `failed` and
    /// `succeeded` to a reviewer. Per lone UNKNOWN / SUBMITTING payment; 0 switches it off.
    pub near_miss: u64,
    /// World (issue 40): a lone paid payment gets a look-alike twin (same recipient and money,
    /// started minutes later); both are paid by unnamed payouts, the twin's booked a day or two
    /// later: the night it arrives, the ambiguity is regrouped under another case key. Per
    /// lone paid payment; 0 switches it off.
    pub regroup: u64,
    /// World (issue 40): a lone paid UNKNOWN / SUBMITTING payment gets a look-alike twin
    /// (UNKNOWN, started minutes later) that was never paid; its payout names neither. Per such
    /// payment; 0 switches it off.
    pub lost_twin: u64,
    /// Reviewers (issue 40): the world's job asks for four eyes (`approvals = 2`, reviewers
    /// alice, bob and carol). Per world.
    pub four_eyes: u64,
    /// Reviewers (issue 40): under four eyes, the first reviewer tries to approve their own
    /// waiting decision with another file. Per waiting decision file.
    pub self_approval: u64,
    /// Reviewers (issue 40): the approver applies the approved decisions again from another
    /// file. Per approval file.
    pub approver_again: u64,
    /// Reviewers (issue 40): a decision file is put in the reviewer's folder of the decisions
    /// inbox (applied by the next run) instead of applied with `apply`. Per file.
    pub inbox: u64,
    /// Reviewers (issue 40): somebody puts a decision file in an inbox folder they do not own
    /// as its reviewer (a reviewer's name owned by another uid, or `bob ` with a trailing
    /// blank). Per night.
    pub inbox_intruder: u64,
    /// Reviewers (issue 40): a reviewer escalates a case instead of deciding it. Per decision.
    pub escalate: u64,
    /// World (issue 42): a provider payout that names its payment by reference but is booked
    /// in another currency (the same number of minor units, of major units, or about the
    /// converted amount; JPY among them). Per business day; 0 switches it off.
    pub currency_mismatch: u64,
    /// World (issue 42): one recipient paid in three or four of EUR, GBP, USD and JPY within
    /// hours, by unnamed payouts of the same number of minor units (a JPY payment of 25000
    /// beside a EUR payment of 250.00): a pairing that ignores the currency finds them.
    /// Per business day; 0 switches it off.
    pub multi_currency: u64,
    /// World (issue 42): a provider payout netted by a fee (the line's amount is the payment's
    /// less a fee, in its currency), named by reference or (an unresolved payment) unnamed, a
    /// near miss. Per business day; 0 switches it off.
    pub netted_fee: u64,
    /// World (issue 42): of the netted fees, the share above the job's `write_off_limit`.
    pub fee_above_limit: u64,
    /// Rates (issue 42): a day's ECB rates file leaves one of USD, GBP and JPY out (or says
    /// `N/A`): that currency has no rate that night unless the job's fixed table has one.
    /// Per published day.
    pub rate_missing: u64,
    /// Rates (issue 42): the job file's `[rates.fixed]` has GBP (what a day's file lacks of it
    /// comes from there). Per world.
    pub fixed_rate: u64,
    /// Reviewers (issue 42): a `dismiss` gives a reason that is not on the job's
    /// `dismiss_reasons` (or none): it must be refused. Per dismissal.
    pub dismiss_bad_reason: u64,
    /// Reviewers (issue 42): a reviewer decides `accept difference` where a case offers it.
    /// Per such case.
    pub accept_difference: u64,
    /// Bank files (issue 46): the bank rejects a payout that was truly never paid (a pain.002
    /// `RJCT` naming the payment's end-to-end id, written hours after its attempt started).
    /// Per sent, never-paid payment with one attempt and no other shape; 0 switches it off.
    pub bank_rejection: u64,
    /// Bank files (issue 46): a USD payment paid over ACH (its provider id is the payout's
    /// 15-digit trace number) whose money comes back: a NACHA return (addenda 99) naming the
    /// trace number, written a day or two after the payout. Per business day; 0 switches it
    /// off.
    pub ach_return: u64,
}

impl Default for Probs {
    fn default() -> Self {
        Probs {
            bank_rail: 3_500,
            succeeded: 5_200,
            failed: 1_200,
            unknown: 1_900,
            submitting: 800,
            succeeded_but_lost: 300,
            failed_but_paid: 2_000,
            unknown_paid: 5_500,
            paid_twice: 700,
            returned: 1_000,
            psp_reference: 8_500,
            bank_reference: 5_500,
            ledger_knows_provider_id: 9_000,
            attempt_only_provider_id: 2_500,
            shared_recipient: 3_500,
            same_amount: 4_000,
            twin: 400,
            retry: 1_000,
            foreign_line: 5_000,
            late: 1_200,
            never: 300,
            redelivered: 800,
            corrected: 700,
            truncated: 700,
            live_retry: 1_500,
            other_reference: 1_500,
            late_contradiction: 1_500,
            paid_while_pending: 1_000,
            blind_retry: 2_000,
            wrong_confirm: 4_000,
            wrong_status: 4_000,
            corrected_after_confirm: 8_000,
            hook_after_confirm: 8_000,
            failed_hook_after_human: 9_000,
            return_after_human: 9_000,
            line_after_human_failed: 8_000,
            sheet_kept: 2_500,
            near_miss: 4_000,
            regroup: 250,
            lost_twin: 1_200,
            four_eyes: 5_000,
            self_approval: 6_000,
            approver_again: 5_000,
            inbox: 4_500,
            inbox_intruder: 2_500,
            escalate: 1_500,
            currency_mismatch: 6_000,
            multi_currency: 5_000,
            netted_fee: 7_000,
            fee_above_limit: 4_000,
            rate_missing: 2_500,
            fixed_rate: 5_000,
            dismiss_bad_reason: 2_500,
            accept_difference: 7_000,
            bank_rejection: 1_500,
            ach_return: 5_000,
        }
    }
}

impl Probs {
    /// Sets one probability by its field name (`paid_twice`, `late`, …), in 1/10 000.
    pub fn set(&mut self, name: &str, per_10k: u64) -> Result<()> {
        let field = match name {
            "bank_rail" => &mut self.bank_rail,
            "succeeded" => &mut self.succeeded,
            "failed" => &mut self.failed,
            "unknown" => &mut self.unknown,
            "submitting" => &mut self.submitting,
            "succeeded_but_lost" => &mut self.succeeded_but_lost,
            "failed_but_paid" => &mut self.failed_but_paid,
            "unknown_paid" => &mut self.unknown_paid,
            "paid_twice" => &mut self.paid_twice,
            "returned" => &mut self.returned,
            "psp_reference" => &mut self.psp_reference,
            "bank_reference" => &mut self.bank_reference,
            "ledger_knows_provider_id" => &mut self.ledger_knows_provider_id,
            "attempt_only_provider_id" => &mut self.attempt_only_provider_id,
            "shared_recipient" => &mut self.shared_recipient,
            "same_amount" => &mut self.same_amount,
            "twin" => &mut self.twin,
            "retry" => &mut self.retry,
            "foreign_line" => &mut self.foreign_line,
            "late" => &mut self.late,
            "never" => &mut self.never,
            "redelivered" => &mut self.redelivered,
            "corrected" => &mut self.corrected,
            "truncated" => &mut self.truncated,
            "live_retry" => &mut self.live_retry,
            "other_reference" => &mut self.other_reference,
            "late_contradiction" => &mut self.late_contradiction,
            "paid_while_pending" => &mut self.paid_while_pending,
            "blind_retry" => &mut self.blind_retry,
            "wrong_confirm" => &mut self.wrong_confirm,
            "wrong_status" => &mut self.wrong_status,
            "corrected_after_confirm" => &mut self.corrected_after_confirm,
            "hook_after_confirm" => &mut self.hook_after_confirm,
            "failed_hook_after_human" => &mut self.failed_hook_after_human,
            "return_after_human" => &mut self.return_after_human,
            "line_after_human_failed" => &mut self.line_after_human_failed,
            "sheet_kept" => &mut self.sheet_kept,
            "near_miss" => &mut self.near_miss,
            "regroup" => &mut self.regroup,
            "lost_twin" => &mut self.lost_twin,
            "four_eyes" => &mut self.four_eyes,
            "self_approval" => &mut self.self_approval,
            "approver_again" => &mut self.approver_again,
            "inbox" => &mut self.inbox,
            "inbox_intruder" => &mut self.inbox_intruder,
            "escalate" => &mut self.escalate,
            "currency_mismatch" => &mut self.currency_mismatch,
            "multi_currency" => &mut self.multi_currency,
            "netted_fee" => &mut self.netted_fee,
            "fee_above_limit" => &mut self.fee_above_limit,
            "rate_missing" => &mut self.rate_missing,
            "fixed_rate" => &mut self.fixed_rate,
            "dismiss_bad_reason" => &mut self.dismiss_bad_reason,
            "accept_difference" => &mut self.accept_difference,
            "bank_rejection" => &mut self.bank_rejection,
            "ach_return" => &mut self.ach_return,
            other => anyhow::bail!("no probability named {other:?}"),
        };
        *field = per_10k.min(10_000);
        Ok(())
    }

    /// Applies `name=per_10k,name=per_10k…` (e.g. `paid_twice=0,late=3000`).
    pub fn apply(&mut self, spec: &str) -> Result<()> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .with_context(|| format!("{part:?}: expected name=per_10k"))?;
            let value: u64 = value
                .trim()
                .parse()
                .with_context(|| format!("{part:?}: not a number"))?;
            self.set(name.trim(), value)?;
        }
        Ok(())
    }
}

/// What to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// PRNG seed.
    pub seed: u64,
    /// Business days with new payments.
    pub days: u32,
    /// Nights after the last business day (late files arrive, windows close).
    pub tail: u32,
    /// Payments started per day.
    pub payments_per_day: u32,
    /// Day 0 (Berlin date).
    pub start: NaiveDate,
    /// Probabilities.
    pub probs: Probs,
}

impl SimOptions {
    /// Defaults: 8 days + 4 tail nights, 60 payments a day, starting 2026-10-21 (the 25-hour
    /// day 2026-10-25 falls inside).
    pub fn new(seed: u64) -> SimOptions {
        SimOptions {
            seed,
            days: 8,
            tail: 4,
            payments_per_day: 60,
            start: NaiveDate::from_ymd_opt(2026, 10, 21).unwrap_or_default(),
            probs: Probs::default(),
        }
    }

    /// Nights played (`days + tail`).
    pub fn nights(&self) -> u32 {
        self.days + self.tail
    }
}

/// The `[[status_api]]` block of a world with webhook events: the provider's callbacks as the
/// payment service stored them in `hooks/`.
const HOOKS_CONFIG: &str = r#"
[[status_api]]
name = "psp-hooks"
webhook_path = "hooks"

[status_api.pointers]
status = "/status"
reference = "/reference"
provider_payment_id = "/id"
amount = "/amount"
currency = "/currency"
event_time = "/at"

[status_api.statuses]
succeeded = ["PAID"]
failed = ["FAILED"]
pending = ["PROCESSING"]
not_found = ["UNKNOWN_PAYOUT"]
"#;

/// The reviewers' part of a job (issue 40): how many reviewers a money-moving decision
/// needs, the decisions inbox, and the `[[reviewer]]` table mapping OS users (uids) to the
/// names recon records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desk {
    /// `approvals` (1 or 2).
    pub approvals: u8,
    /// `decisions_inbox`, relative to the job file.
    pub inbox: Option<String>,
    /// `[[reviewer]]`: (name, uid); empty writes no table.
    pub reviewers: Vec<(String, u32)>,
}

impl Desk {
    /// (top-level keys, `[[reviewer]]` tables) as TOML.
    fn toml(&self) -> (String, String) {
        let mut top = String::new();
        if self.approvals != 1 {
            let _ = writeln!(top, "approvals = {}", self.approvals);
        }
        if let Some(inbox) = &self.inbox {
            let _ = writeln!(top, "decisions_inbox = \"{inbox}\"");
        }
        let mut tables = String::new();
        for (name, uid) in &self.reviewers {
            let _ = write!(tables, "\n[[reviewer]]\nname = \"{name}\"\nuid = {uid}\n");
        }
        (top, tables)
    }
}

/// The two statement sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// Payment provider: daily CSV per UTC day, RFC 3339 bookings, its own transaction ids.
    Psp,
    /// Our bank account: daily CSV per Berlin day, date-only bookings, debits negative.
    Bank,
}

impl Source {
    /// Source name in the config.
    pub fn name(self) -> &'static str {
        match self {
            Source::Psp => "psp",
            Source::Bank => "bank",
        }
    }

    /// Zone of the source's file days.
    pub fn tz(self) -> Tz {
        match self {
            Source::Psp => PSP_TZ,
            Source::Bank => JOB_TZ,
        }
    }

    /// Both sources.
    pub const ALL: [Source; 2] = [Source::Psp, Source::Bank];
}

/// The ledger status as the payment service recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LedgerStatus {
    /// Provider confirmed.
    Succeeded,
    /// Provider declined (or so the service believes).
    Failed,
    /// Timed out.
    Unknown,
    /// Sent, no answer recorded (stale after 30 minutes).
    Submitting,
    /// Never sent.
    Pending,
}

impl LedgerStatus {
    /// Name in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerStatus::Succeeded => "SUCCEEDED",
            LedgerStatus::Failed => "FAILED",
            LedgerStatus::Unknown => "UNKNOWN",
            LedgerStatus::Submitting => "SUBMITTING",
            LedgerStatus::Pending => "PENDING",
        }
    }
}

/// What truly happened to a payment's money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    /// Never paid.
    Lost,
    /// Paid once.
    PaidOnce,
    /// Paid twice (a second line hours or days later).
    PaidTwice,
    /// Paid, then the money came back (a return line 1–10 days later, or a NACHA return file
    /// of the bank: [`BankNotice`]).
    Returned,
}

impl Fate {
    /// Whether money left at least once.
    pub fn paid(self) -> bool {
        self != Fate::Lost
    }

    /// Name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Lost => "lost (never paid)",
            Fate::PaidOnce => "paid once",
            Fate::PaidTwice => "paid twice",
            Fate::Returned => "paid, then returned",
        }
    }
}

/// One attempt of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// UUID.
    pub id: String,
    /// Start.
    pub started_at: Micros,
    /// End, if recorded.
    pub finished_at: Option<Micros>,
    /// SUCCEEDED, FAILED, UNKNOWN or empty.
    pub outcome: &'static str,
    /// Provider id the service recorded.
    pub provider_id: Option<String>,
    /// Error text.
    pub error: &'static str,
}

/// One payment: the ledger's view and the truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// UUID v4.
    pub id: String,
    /// IBAN.
    pub recipient: String,
    /// Minor units (positive).
    pub amount_minor: i64,
    /// ISO code.
    pub currency: &'static str,
    /// Created.
    pub created_at: Micros,
    /// Started (None: PENDING).
    pub started_at: Option<Micros>,
    /// Business day index (negative: an old payment from before the job's first day).
    pub day: i64,
    /// Ledger status.
    pub status: LedgerStatus,
    /// Rail.
    pub rail: Source,
    /// The provider's id for this payment (provider rail, sent).
    pub provider_id: Option<String>,
    /// Provider id on the payment row of the ledger.
    pub ledger_provider_id: Option<String>,
    /// Attempts, oldest first; the last is the current one.
    pub attempts: Vec<Attempt>,
    /// The truth.
    pub fate: Fate,
    /// Indices of its true lines in [`World::lines`]: payment line(s) first, then a return.
    pub lines: Vec<usize>,
    /// A twin of this earlier payment (same recipient and amount, minutes apart).
    pub twin_of: Option<usize>,
    /// When the ledger row, as recorded here, appears in the ledger (its creation; for a live
    /// retry the retry's start: before it the row was a FAILED payment).
    pub ledger_from: Micros,
    /// The shape of issue 30 it was given, if any.
    pub shape: Option<Shape>,
}

/// The shapes of issue 30 (see [`Probs`]), recorded on the payment they are about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Retried: the current attempt started `before_as_of` before night `night`'s as-of.
    LiveRetry {
        /// Night whose as-of the retry precedes.
        night: u32,
        /// 10 minutes or 25 hours.
        before_as_of: Micros,
    },
    /// A lost UNKNOWN payment near a line whose reference is a UUID no payment of ours has.
    DecoyReference,
    /// A lost UNKNOWN payment near a line that names old payment `old`.
    OldReference {
        /// The old payment's index.
        old: usize,
    },
    /// An old payment of ours (outside the carry-over horizon) whose second payout is booked now.
    OldPayment,
    /// A paid payment whose payout's reference is an invoice number.
    InvoiceReference,
    /// PAID by webhook, then FAILED by a later webhook; never paid.
    LateContradiction,
    /// PENDING in the ledger, paid.
    PaidWhilePending,
    /// Paid by its first attempt (an unnamed line in that attempt's window), then retried:
    /// the current attempt started at night `night`'s as-of minus 25 hours.
    BlindRetry {
        /// Night whose as-of the retry precedes.
        night: u32,
    },
    /// Issue 40: an unresolved payment near a look-alike line (its recipient and currency,
    /// another amount, inside its window): a case that offers `failed` and `succeeded`. A paid
    /// one's payout names it by nothing (no reference, no provider id the ledger knows).
    NearMiss {
        /// The look-alike line.
        line: usize,
    },
    /// Issue 40: one of two unresolved look-alike twins of which only one was paid (an unnamed
    /// payout within two hours): one line for two payments, the setting of issue 40's point 2.
    LostTwin {
        /// The other twin.
        other: usize,
    },
    /// Issue 40: one of two look-alike twins, both paid by unnamed payouts; the later payout is
    /// booked a day or two after the earlier one, so the ambiguity the first night shows is
    /// regrouped (another case key) the night the second payout arrives.
    Regroup {
        /// The other twin.
        other: usize,
    },
    /// Issue 42: its payout names it by reference but is booked in another currency: recon
    /// reports CURRENCY_MISMATCH and never resolves or matches it on that line.
    CurrencyMismatch {
        /// The payout.
        line: usize,
    },
    /// Issue 42: one of a recipient's payments in three or four currencies within hours, paid
    /// (if at all) by unnamed payouts of the same number of minor units: no pairing may cross
    /// currencies.
    MultiCurrency {
        /// The group's first payment (the group is `first..first + n`).
        first: usize,
        /// The group's size.
        n: usize,
    },
    /// Issue 42: its payout is netted by a fee (the line's amount is the payment's less
    /// `fee_minor`, in its currency): AMOUNT_MISMATCH when named, a near miss when not, and
    /// resolved only on a difference a reviewer accepted.
    NettedFee {
        /// The payout.
        line: usize,
        /// Payment minus line, minor units (positive).
        fee_minor: i64,
        /// Whether the fee is within the job's `write_off_limit` for its currency.
        within_limit: bool,
    },
}

/// Issue 42: the job's reporting currency.
pub const REPORTING_CURRENCY: &str = "EUR";
/// Issue 42: the job's `dismiss_reasons` (the last one is not among recon's defaults: a
/// dismissal with it is accepted only because the job lists it).
pub const DISMISS_REASONS: [&str; 5] = [
    "refund requested",
    "ledger corrected",
    "written off",
    "duplicate claimed back",
    "paid by cheque",
];
/// Issue 42: the job's `write_off_limit`, in minor units per currency.
pub const WRITE_OFF_LIMIT: [(&str, i64); 4] =
    [("EUR", 500), ("GBP", 400), ("JPY", 700), ("USD", 500)];
/// Issue 42: the currencies of the multi-currency worlds.
pub const CURRENCIES: [&str; 4] = ["EUR", "GBP", "USD", "JPY"];

/// The job's `write_off_limit` for `currency`, minor units.
pub fn write_off_limit(currency: &str) -> Option<i64> {
    WRITE_OFF_LIMIT
        .iter()
        .find(|(c, _)| *c == currency)
        .map(|(_, l)| *l)
}

/// Decimals of `currency`'s minor unit (ISO 4217).
pub fn exponent(currency: &str) -> u32 {
    recon::money::currency(currency).map_or(2, |(_, e)| e)
}

/// Units of each currency per 1 EUR, in ten-thousandths: the middle of the world's daily rates
/// (for amounts "about converted", not for valuing).
fn base_rate(currency: &str) -> i128 {
    match currency {
        "USD" => 10_800,
        "GBP" => 8_600,
        "JPY" => 1_620_000,
        _ => 10_000,
    }
}

/// A provider callback as the payment service stored it (`hooks/*.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEvent {
    /// The payment it is about.
    pub payment: usize,
    /// `PROCESSING`, `PAID` or `FAILED`.
    pub status: &'static str,
    /// The provider's event time (the service stores it then).
    pub at: Micros,
}

impl Payment {
    /// The current attempt's id.
    pub fn attempt_id(&self) -> Option<&str> {
        self.attempts.last().map(|a| a.id.as_str())
    }

    /// The current attempt's start, else the payment's (the clock of DESIGN.md rule 11).
    pub fn current_start(&self) -> Option<Micros> {
        self.attempts
            .last()
            .map(|a| a.started_at)
            .or(self.started_at)
    }
}

/// Why a line exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRole {
    /// Money paid out for `payment`; `nth` 0 is the payout, 1 the duplicate.
    Payment {
        /// Payment index.
        payment: usize,
        /// 0 or 1.
        nth: u8,
    },
    /// Money of `payment` came back.
    Return {
        /// Payment index.
        payment: usize,
    },
    /// A booking nobody in our ledger sent (another system's payout).
    Foreign,
    /// Another system's payout to the recipient of payment `near`, with its amount and
    /// currency inside its window, whose reference is a UUID no payment of ours has.
    Decoy {
        /// The payment it looks like.
        near: usize,
    },
    /// Issue 40: another system's payout to the recipient of payment `near`, in its currency
    /// and inside its window, of another amount (a near miss).
    LookAlike {
        /// The payment it looks like.
        near: usize,
    },
    /// A line a file carried by mistake and a corrected file withdrew (a copy of `copy_of`).
    Spurious {
        /// The line it copies.
        copy_of: usize,
    },
}

/// One statement line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Source.
    pub source: Source,
    /// Provider transaction id (provider lines only).
    pub txn_id: Option<String>,
    /// Reference (payment id or free text), possibly empty.
    pub reference: String,
    /// Counterparty IBAN.
    pub recipient: String,
    /// Signed as booked: provider payouts positive, its returns negative; bank debits
    /// negative, bank returns positive.
    pub amount_minor: i64,
    /// ISO code.
    pub currency: &'static str,
    /// The true booking instant (the bank file shows its Berlin date only).
    pub booked_at: Micros,
    /// Kind column value (`PAYMENT`/`RETURN` or `DEBIT`/`RETURN`).
    pub kind: &'static str,
    /// Why it exists.
    pub role: LineRole,
    /// The file day it belongs to (index from `start`, in the source's zone).
    pub file_day: i64,
}

impl Line {
    /// The instant recon gives the booking: the timestamp, or for a date-only bank line the
    /// start of its Berlin day.
    pub fn recon_booked_at(&self, start: NaiveDate) -> Micros {
        match self.source {
            Source::Psp => self.booked_at,
            Source::Bank => timeparse::day_start(day_date(start, self.file_day), JOB_TZ),
        }
    }

    /// The payment it belongs to, if any (spurious copies name the copied line's payment).
    pub fn payment(&self, lines: &[Line]) -> Option<usize> {
        match self.role {
            LineRole::Payment { payment, .. } | LineRole::Return { payment } => Some(payment),
            LineRole::Foreign | LineRole::Decoy { .. } | LineRole::LookAlike { .. } => None,
            LineRole::Spurious { copy_of } => lines[copy_of].payment(lines),
        }
    }

    /// A short description for failure messages.
    pub fn describe(&self, idx: usize, start: NaiveDate) -> String {
        let role = match self.role {
            LineRole::Payment { nth: 0, .. } => "payout".to_string(),
            LineRole::Payment { .. } => "DUPLICATE payout".to_string(),
            LineRole::Return { .. } => "RETURN".to_string(),
            LineRole::Foreign => "foreign (no ledger payment)".to_string(),
            LineRole::LookAlike { near } => {
                format!("look-alike (no ledger payment; other amount than payment #{near})")
            }
            LineRole::Decoy { near } => {
                format!("decoy (no ledger payment; looks like payment #{near})")
            }
            LineRole::Spurious { copy_of } => format!("spurious copy of line #{copy_of}"),
        };
        format!(
            "line #{idx} [{role}] {} {} file {} ref {:?} {} {} {} booked {}",
            self.source.name(),
            self.txn_id.as_deref().unwrap_or("-"),
            day_date(start, self.file_day),
            self.reference,
            mask_tail(&self.recipient),
            recon::money::format_minor(self.amount_minor, self.currency),
            self.currency,
            timeparse::format_utc(self.booked_at),
        )
    }
}

/// The last 4 characters of an account, as recon masks it.
pub fn mask_tail(account: &str) -> String {
    let n = account.chars().count();
    let tail: String = account.chars().skip(n.saturating_sub(4)).collect();
    format!("****{tail}")
}

/// What a control file says about its statement file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// No control file.
    None,
    /// A matching control file with these fields.
    Full {
        /// `lines=N`.
        lines: bool,
        /// `sha256=…`.
        sha: bool,
    },
    /// The control file of the complete file, next to a truncated one (does not match).
    Stale,
}

/// How a version came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// First delivery, on time.
    OnTime,
    /// First delivery, late.
    Late,
    /// The same bytes again.
    Redelivered,
    /// A first delivery that a correction replaces later.
    Flawed,
    /// The corrected file.
    Corrected,
    /// Cut at a line boundary.
    Truncated,
    /// The complete file after a truncated one.
    Completed,
    /// Re-delivered with a line's reference changed to name its true payment (issue 40).
    Renamed,
}

impl Event {
    /// Name in schedule.csv.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::OnTime => "on_time",
            Event::Late => "late",
            Event::Redelivered => "redelivered",
            Event::Flawed => "flawed",
            Event::Corrected => "corrected",
            Event::Truncated => "truncated",
            Event::Completed => "completed",
            Event::Renamed => "renamed",
        }
    }
}

/// One delivered version of a daily file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Source.
    pub source: Source,
    /// File day index.
    pub day: i64,
    /// Night before whose run it is in the inbox.
    pub arrival: u32,
    /// Lines in file order.
    pub lines: Vec<usize>,
    /// Its control file.
    pub control: Control,
    /// For a truncated version: the complete version's lines (what a stale control file
    /// describes).
    pub full_lines: Option<Vec<usize>>,
    /// How it came to be.
    pub event: Event,
    /// Lines whose reference this version shows differently from the line's own (a
    /// re-delivery that corrected it): (line, reference).
    pub overrides: Vec<(usize, String)>,
}

impl Version {
    /// Whether the file proves its own completeness (a matching control file).
    pub fn complete(&self) -> bool {
        matches!(self.control, Control::Full { .. })
    }
}

/// The whole world.
#[derive(Debug, Clone)]
pub struct World {
    /// Options it was built from.
    pub opts: SimOptions,
    /// Payments in creation order.
    pub payments: Vec<Payment>,
    /// Statement lines (true ones, foreign ones and spurious copies).
    pub lines: Vec<Line>,
    /// Every delivered version, in arrival order (then source, day).
    pub versions: Vec<Version>,
    /// Stored webhook events, in time order.
    pub hooks: Vec<HookEvent>,
    /// Whether the job asks for four eyes (`approvals = 2`; [`Probs::four_eyes`]).
    pub four_eyes: bool,
    /// Issue 42: the ECB's daily rates files, by publication day (weekdays only): each
    /// currency with its rate in units per 1 EUR, or `None` written as `N/A`; a currency left
    /// out is not in the file at all.
    pub rates: BTreeMap<NaiveDate, Vec<(&'static str, Option<Decimal>)>>,
    /// Issue 42: the job file's `[rates.fixed]`.
    pub fixed_rates: BTreeMap<&'static str, Decimal>,
    /// Issue 46: the bank's payout status files (pain.002 rejections, NACHA returns), in
    /// creation order.
    pub notices: Vec<BankNotice>,
}

/// Issue 46: what the bank writes back about one payout, as a file of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BankNotice {
    /// The payment.
    pub payment: usize,
    /// A rejection (pain.002 RJCT) or a return (NACHA addenda 99).
    pub kind: NoticeKind,
    /// When the bank wrote the file.
    pub created: Micros,
    /// The night before whose run it is in the job's folder.
    pub arrival: u32,
}

/// What a [`BankNotice`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// pain.002 `RJCT` (reason AC01): the payout was not made.
    Rejection,
    /// NACHA return (R01): the payout was made and its money came back.
    Return,
}

/// The job's `[[payout_status]]` blocks of a world with bank notices: pain.002 files name the
/// payment id, NACHA files the payout's trace number (the provider id the ledger recorded).
pub const PAYOUT_STATUS_CONFIG: &str = r#"
[[payout_status]]
name = "bank-pain002"
format = "pain002"
path = "payouts/pain002"

[[payout_status]]
name = "bank-ach"
format = "nacha"
path = "payouts/nacha"
payment_id_field = "trace_number"
ledger_key = "provider_payment_id"
"#;

/// The names of [`PAYOUT_STATUS_CONFIG`]'s blocks (summary.json's inputs name their files so).
pub const PAYOUT_STATUS_BLOCKS: [&str; 2] = ["bank-pain002", "bank-ach"];

/// The simulator's dice for code outside this crate (the night harness decides its re-runs and
/// human actions with it): the same xoshiro256** stream as the world, seeded separately.
pub struct Dice(Rng);

impl std::fmt::Debug for Dice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dice")
    }
}

impl Dice {
    /// Dice for `seed` (a different stream than [`World::build`]'s for the same seed).
    pub fn new(seed: u64) -> Dice {
        Dice(Rng::new(seed ^ 0xd1ce_d1ce_0000_0002))
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        self.0.between(lo, hi)
    }

    /// True with probability `per_10k / 10 000`.
    pub fn chance(&mut self, per_10k: u64) -> bool {
        self.0.chance(per_10k)
    }

    /// A new provider transaction id (`pt_` and 24 hex digits), as the world's.
    pub fn provider_id(&mut self) -> String {
        format!("pt_{}", hex(&mut self.0, 24))
    }
}

/// The Berlin/UTC date of day index `i`.
pub fn day_date(start: NaiveDate, i: i64) -> NaiveDate {
    if i >= 0 {
        start + chrono::Days::new(i as u64)
    } else {
        start - chrono::Days::new(i.unsigned_abs())
    }
}

fn day_index(start: NaiveDate, date: NaiveDate) -> i64 {
    (date - start).num_days()
}

/// First instant of business day `i` (Berlin).
pub fn day_start(start: NaiveDate, i: i64) -> Micros {
    timeparse::day_start(day_date(start, i), JOB_TZ)
}

/// The as-of of night `n`: day `n + 1`, 02:00 Berlin.
pub fn night_as_of(start: NaiveDate, n: u32) -> Micros {
    let date = day_date(start, n as i64 + 1);
    let naive = date
        .and_hms_opt(NIGHT_HOUR as u32, 0, 0)
        .unwrap_or_default();
    // 02:00 happens twice on the last Sunday of October: the first one.
    use chrono::TimeZone as _;
    JOB_TZ
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.with_timezone(&Utc).timestamp_micros())
        .unwrap_or_else(|| day_start(start, n as i64 + 1) + NIGHT_HOUR * HOUR)
}

fn hex(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n);
    while s.len() < n {
        let v = rng.next_u64();
        for k in 0..16 {
            if s.len() == n {
                break;
            }
            let nib = ((v >> (4 * k)) & 0xf) as u32;
            s.push(char::from_digit(nib, 16).unwrap_or('0'));
        }
    }
    s
}

/// A UUID v4 in canonical text form, from the PRNG.
fn uuid(rng: &mut Rng) -> String {
    let (a, b) = (rng.next_u64(), rng.next_u64());
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000; // variant 10xx
    let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000; // version 4
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// A German IBAN with valid check digits.
fn iban(rng: &mut Rng) -> String {
    let bban = rng.below(1_000_000_000_000_000_000);
    let rem = ((bban % 97) * 1_000_000 + 131_400) % 97;
    format!("DE{:02}{:018}", 98 - rem, bban)
}

/// Delay of a booking after `started_at`: 1 min .. 48 h, most within hours.
fn booking_delay(rng: &mut Rng) -> Micros {
    let secs = match rng.below(100) {
        0..50 => rng.between(60, 3_600),
        50..80 => rng.between(3_600, 12 * 3_600),
        _ => rng.between(12 * 3_600, 48 * 3_600),
    };
    secs * 1_000_000
}

/// The day (an index from `start`) of the file of `source` that books time `t`.
pub fn file_day_of(source: Source, start: NaiveDate, t: Micros) -> i64 {
    day_index(start, timeparse::local_date(t, source.tz()))
}

impl World {
    /// Builds the world of `opts`.
    pub fn build(opts: &SimOptions) -> World {
        let mut rng = Rng::new(opts.seed ^ 0x5151_7e57_0000_0001);
        let pr = &opts.probs;
        let start = opts.start;
        let horizon = opts.nights() as i64;
        let mut used_recipients: BTreeSet<String> = BTreeSet::new();
        let mut fresh_recipient = |rng: &mut Rng| loop {
            let r = iban(rng);
            if used_recipients.insert(r.clone()) {
                return r;
            }
        };
        let shared_n = (opts.days as usize * opts.payments_per_day as usize / 12).max(3);
        let shared: Vec<String> = (0..shared_n).map(|_| fresh_recipient(&mut rng)).collect();
        // Last (amount, currency) each shared recipient received.
        let mut last_amount: BTreeMap<usize, (i64, &'static str)> = BTreeMap::new();
        let mut payments: Vec<Payment> = Vec::new();
        let mut lines: Vec<Line> = Vec::new();
        for d in 0..opts.days as i64 {
            let (t0, t1) = (day_start(start, d), day_start(start, d + 1));
            let first_of_day = payments.len();
            for _ in 0..opts.payments_per_day {
                let rail = if rng.chance(pr.bank_rail) {
                    Source::Bank
                } else {
                    Source::Psp
                };
                let currency = match (rail, rng.below(100)) {
                    (Source::Bank, _) | (_, 0..80) => "EUR",
                    (_, 80..92) => "USD",
                    _ => "GBP",
                };
                let mut started = t0 + rng.between(0, (t1 - t0) / 1_000_000 - 1) * 1_000_000;
                let mut amount = match rng.below(100) {
                    0..60 => rng.between(500, 20_000),
                    60..92 => rng.between(20_000, 250_000),
                    _ => rng.between(250_000, 2_000_000),
                };
                let mut twin_of = None;
                let recipient;
                let same_day = payments.len() - first_of_day;
                if same_day > 0 && rng.chance(pr.twin) {
                    let o = first_of_day + rng.below(same_day as u64) as usize;
                    let other: &Payment = &payments[o];
                    recipient = other.recipient.clone();
                    amount = other.amount_minor;
                    twin_of = Some(o);
                    let base = other.started_at.unwrap_or(other.created_at);
                    let gap = rng.between(1, 20) * MINUTE;
                    started = if base + gap < t1 {
                        base + gap
                    } else {
                        (base - gap).max(t0)
                    };
                } else if rng.chance(pr.shared_recipient) {
                    let k = rng.below(shared.len() as u64) as usize;
                    recipient = shared[k].clone();
                    if let Some(&(a, c)) = last_amount.get(&k)
                        && c == currency
                        && rng.chance(pr.same_amount)
                    {
                        amount = a;
                    }
                    last_amount.insert(k, (amount, currency));
                } else {
                    recipient = fresh_recipient(&mut rng);
                }
                let currency = match twin_of {
                    Some(o) => payments[o].currency,
                    None => currency,
                };
                let rail = match twin_of {
                    Some(o) if currency != "EUR" => payments[o].rail,
                    _ => rail,
                };
                let x = rng.below(10_000);
                let status = if x < pr.succeeded {
                    LedgerStatus::Succeeded
                } else if x < pr.succeeded + pr.failed {
                    LedgerStatus::Failed
                } else if x < pr.succeeded + pr.failed + pr.unknown {
                    LedgerStatus::Unknown
                } else if x < pr.succeeded + pr.failed + pr.unknown + pr.submitting {
                    LedgerStatus::Submitting
                } else {
                    LedgerStatus::Pending
                };
                let paid = match status {
                    LedgerStatus::Succeeded => !rng.chance(pr.succeeded_but_lost),
                    LedgerStatus::Failed => rng.chance(pr.failed_but_paid),
                    LedgerStatus::Unknown | LedgerStatus::Submitting => rng.chance(pr.unknown_paid),
                    LedgerStatus::Pending => false,
                };
                let fate = if !paid {
                    Fate::Lost
                } else if rng.chance(pr.paid_twice) {
                    Fate::PaidTwice
                } else if rng.chance(pr.returned) {
                    Fate::Returned
                } else {
                    Fate::PaidOnce
                };
                let id = uuid(&mut rng);
                let created_at = started - rng.between(0, 180) * 1_000_000;
                let sent = status != LedgerStatus::Pending;
                let provider_id =
                    (sent && rail == Source::Psp).then(|| format!("pt_{}", hex(&mut rng, 24)));
                let knows = match status {
                    LedgerStatus::Succeeded => rng.chance(pr.ledger_knows_provider_id),
                    LedgerStatus::Failed => rng.chance(pr.ledger_knows_provider_id / 2),
                    LedgerStatus::Unknown => rng.chance(pr.ledger_knows_provider_id / 6),
                    _ => false,
                };
                let ledger_provider_id = if knows { provider_id.clone() } else { None };
                let attempt_provider_id = if !knows
                    && provider_id.is_some()
                    && matches!(status, LedgerStatus::Unknown | LedgerStatus::Submitting)
                    && rng.chance(pr.attempt_only_provider_id)
                {
                    provider_id.clone()
                } else {
                    ledger_provider_id.clone()
                };
                let mut attempts = Vec::new();
                if sent && rng.chance(pr.retry) {
                    let s = started - rng.between(2, 30) * MINUTE;
                    attempts.push(Attempt {
                        id: uuid(&mut rng),
                        started_at: s,
                        finished_at: Some(s + rng.between(1, 20) * 1_000_000),
                        outcome: "FAILED",
                        provider_id: (rail == Source::Psp && rng.chance(7_000))
                            .then(|| format!("pt_{}", hex(&mut rng, 24))),
                        error: "declined",
                    });
                }
                if sent {
                    let (finished, outcome, error) = match status {
                        LedgerStatus::Succeeded => (
                            Some(started + rng.between(1, 30) * 1_000_000),
                            "SUCCEEDED",
                            "",
                        ),
                        LedgerStatus::Failed => (
                            Some(started + rng.between(1, 30) * 1_000_000),
                            "FAILED",
                            "rejected by provider",
                        ),
                        LedgerStatus::Unknown => {
                            (Some(started + 30 * 1_000_000), "UNKNOWN", "timeout")
                        }
                        _ => (None, "", ""),
                    };
                    attempts.push(Attempt {
                        id: uuid(&mut rng),
                        started_at: started,
                        finished_at: finished,
                        outcome,
                        provider_id: attempt_provider_id,
                        error,
                    });
                }
                let pi = payments.len();
                let mut own_lines = Vec::new();
                if paid {
                    let b1 = started + booking_delay(&mut rng);
                    own_lines.push(Self::payment_line(
                        &mut rng,
                        pr,
                        start,
                        (&id, &recipient, amount, currency, rail),
                        provider_id.clone(),
                        b1,
                        LineRole::Payment {
                            payment: pi,
                            nth: 0,
                        },
                    ));
                    match fate {
                        Fate::PaidTwice => {
                            let b2 = b1 + rng.between(2 * 3_600, 4 * 24 * 3_600) * 1_000_000;
                            let txn =
                                (rail == Source::Psp).then(|| format!("pt_{}", hex(&mut rng, 24)));
                            own_lines.push(Self::payment_line(
                                &mut rng,
                                pr,
                                start,
                                (&id, &recipient, amount, currency, rail),
                                txn,
                                b2,
                                LineRole::Payment {
                                    payment: pi,
                                    nth: 1,
                                },
                            ));
                        }
                        Fate::Returned => {
                            let b2 = b1 + rng.between(24 * 3_600, 10 * 24 * 3_600) * 1_000_000;
                            let txn =
                                (rail == Source::Psp).then(|| format!("pt_{}", hex(&mut rng, 24)));
                            let mut l = Self::payment_line(
                                &mut rng,
                                pr,
                                start,
                                (&id, &recipient, amount, currency, rail),
                                txn,
                                b2,
                                LineRole::Return { payment: pi },
                            );
                            l.amount_minor = -l.amount_minor;
                            l.kind = "RETURN";
                            own_lines.push(l);
                        }
                        _ => {}
                    }
                }
                let mut idxs = Vec::new();
                for l in own_lines {
                    idxs.push(lines.len());
                    lines.push(l);
                }
                payments.push(Payment {
                    id,
                    recipient,
                    amount_minor: amount,
                    currency,
                    created_at,
                    started_at: sent.then_some(started),
                    day: d,
                    status,
                    rail,
                    provider_id,
                    ledger_provider_id,
                    attempts,
                    fate,
                    lines: idxs,
                    twin_of,
                    ledger_from: created_at,
                    shape: None,
                });
            }
        }
        // Secondary lines (duplicates, returns) may omit the reference only when no other
        // payment has the same recipient, currency and amount: otherwise a duplicate payout of
        // one payment would be indistinguishable from the payout of its timed-out twin, a
        // coincidence no matcher can see through (the simulator must not stage it).
        let mut keys: BTreeMap<(&str, &str, i64), usize> = BTreeMap::new();
        for p in &payments {
            *keys
                .entry((p.recipient.as_str(), p.currency, p.amount_minor))
                .or_insert(0) += 1;
        }
        let crowded: Vec<bool> = payments
            .iter()
            .map(|p| keys[&(p.recipient.as_str(), p.currency, p.amount_minor)] > 1)
            .collect();
        for l in &mut lines {
            let secondary = !matches!(l.role, LineRole::Payment { nth: 0, .. });
            if let Some(p) = l.payment_lines_owner()
                && secondary
                && crowded[p]
            {
                l.reference = payments[p].id.clone();
            }
        }
        // Foreign lines: other systems' payouts, to recipients no ledger payment has.
        for d in -1..horizon {
            for source in Source::ALL {
                if source == Source::Bank && d < 0 {
                    continue;
                }
                if !rng.chance(pr.foreign_line) {
                    continue;
                }
                let (a, b) = match source {
                    Source::Psp => (
                        timeparse::day_start(day_date(start, d), PSP_TZ),
                        timeparse::day_start(day_date(start, d + 1), PSP_TZ),
                    ),
                    Source::Bank => (day_start(start, d), day_start(start, d + 1)),
                };
                let booked = a + rng.between(0, (b - a) / 1_000_000 - 1) * 1_000_000;
                let amount = rng.between(1_000, 90_000);
                let recipient = fresh_recipient(&mut rng);
                let (txn, reference, amount_minor, kind) = match source {
                    Source::Psp => (
                        Some(format!("pt_{}", hex(&mut rng, 24))),
                        if rng.chance(5_000) {
                            format!("INV-{}", rng.between(10_000, 99_999))
                        } else {
                            String::new()
                        },
                        amount,
                        "PAYMENT",
                    ),
                    Source::Bank => (None, "Rent October".to_string(), -amount, "DEBIT"),
                };
                lines.push(Line {
                    source,
                    txn_id: txn,
                    reference,
                    recipient,
                    amount_minor,
                    currency: "EUR",
                    booked_at: booked,
                    kind,
                    role: LineRole::Foreign,
                    file_day: file_day_of(source, start, booked),
                });
            }
        }
        let mut world = World {
            opts: opts.clone(),
            payments,
            lines,
            versions: Vec::new(),
            hooks: Vec::new(),
            four_eyes: false,
            rates: BTreeMap::new(),
            fixed_rates: BTreeMap::new(),
            notices: Vec::new(),
        };
        // The shapes draw from their own stream: with every shape off the world is the one
        // earlier versions of the simulator built for the same seed.
        world.add_shapes(&mut Rng::new(opts.seed ^ 0x5a4e_5e30_0000_0003));
        // Issue 40's world shapes, from a stream of their own again.
        world.add_reviewer_shapes(&mut Rng::new(opts.seed ^ 0x4e7e_5e40_0000_0004));
        world.plan_deliveries(&mut rng);
        // Issue 42's worlds, from streams of their own and after the deliveries are planned:
        // their payments and lines are appended and join the files planned, so every earlier
        // payment, line and delivery of a seed is the one it was without them.
        world.add_currency_shapes(&mut Rng::new(opts.seed ^ 0x4242_c0de_0000_0005));
        world.add_rates(&mut Rng::new(opts.seed ^ 0x4242_7a7e_0000_0006));
        // Issue 46's bank files, last and from their own streams: every earlier payment, line,
        // delivery and rate of a seed is the one it was without them.
        world.add_bank_rejections(&mut Rng::new(opts.seed ^ 0x4646_4a77_0000_0007));
        world.add_ach_returns(&mut Rng::new(opts.seed ^ 0x4646_ac40_0000_0008));
        world
    }

    /// Issue 46: a pain.002 rejection of some payouts truly never paid ([`Probs::bank_rejection`]).
    fn add_bank_rejections(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.bank_rejection;
        for p in 0..self.payments.len() {
            let pay = &self.payments[p];
            let Some(started) = pay.started_at else {
                continue;
            };
            if pay.fate.paid() || pay.attempts.len() != 1 || pay.shape.is_some() {
                continue;
            }
            if !rng.chance(pr) {
                continue;
            }
            let created = started + rng.between(60, 20 * 60) * MINUTE;
            let late = rng.below(2) as u32;
            self.add_notice(p, NoticeKind::Rejection, created, late);
        }
    }

    /// Issue 46: the bank writes a file of `kind` about payment `p` at `created`; it is in the
    /// job's folder `late` nights after the first night whose as-of is at or after that.
    fn add_notice(&mut self, p: usize, kind: NoticeKind, created: Micros, late: u32) {
        self.notices.push(BankNotice {
            payment: p,
            kind,
            created,
            arrival: self.first_night_at(created) + late,
        });
        self.notices.sort_by_key(|n| (n.created, n.payment));
    }

    /// Issue 46: USD payments paid over ACH whose money comes back by a NACHA return
    /// ([`Probs::ach_return`]): appended with their payouts (named by reference, booked within
    /// two hours) and ledger SUCCEEDED or UNKNOWN; the return file is written one or two days
    /// after the payout.
    fn add_ach_returns(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.clone();
        let start = self.opts.start;
        let nights = self.opts.nights();
        for d in 0..self.opts.days as i64 {
            if !rng.chance(pr.ach_return) {
                continue;
            }
            let (t0, t1) = (day_start(start, d), day_start(start, d + 1));
            let started = t0 + rng.between(0, (t1 - t0) / 1_000_000 - 1) * 1_000_000;
            let status = if rng.chance(5_000) {
                LedgerStatus::Succeeded
            } else {
                LedgerStatus::Unknown
            };
            let recipient = iban(rng);
            let amount = rng.between(1_000, 90_000);
            let p = self.push_payment(rng, &recipient, amount, "USD", started, status, true);
            let trace = format!("09100001{:07}", p);
            let pm = &mut self.payments[p];
            pm.provider_id = Some(trace.clone());
            pm.ledger_provider_id = Some(trace.clone());
            for a in &mut pm.attempts {
                a.provider_id = Some(trace.clone());
            }
            let id = pm.id.clone();
            let booked = started + rng.between(2, 120) * MINUTE;
            self.paid_once(p, (id, recipient), (amount, "USD"), (booked, start));
            self.payments[p].fate = Fate::Returned;
            let created = booked + rng.between(20, 48) * HOUR;
            if self.first_night_at(created) < nights {
                self.add_notice(p, NoticeKind::Return, created, 0);
            }
        }
    }

    /// Issue 42: lines in another currency than their payment's, a recipient paid in several
    /// currencies, payouts netted by a fee (see [`Probs::currency_mismatch`],
    /// [`Probs::multi_currency`], [`Probs::netted_fee`]). Provider rail only; fresh
    /// recipients, so no earlier payment gains a look-alike.
    fn add_currency_shapes(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.clone();
        let start = self.opts.start;
        let mut used: BTreeSet<String> = self
            .payments
            .iter()
            .map(|p| p.recipient.clone())
            .chain(self.lines.iter().map(|l| l.recipient.clone()))
            .collect();
        let mut fresh = |rng: &mut Rng| loop {
            let r = iban(rng);
            if used.insert(r.clone()) {
                return r;
            }
        };
        let pick =
            |rng: &mut Rng, from: &[&'static str]| from[rng.below(from.len() as u64) as usize];
        let amount_in = |rng: &mut Rng, currency: &str| match currency {
            "JPY" => rng.between(500, 400_000),
            _ => rng.between(500, 300_000),
        };
        for d in 0..self.opts.days as i64 {
            let (t0, t1) = (day_start(start, d), day_start(start, d + 1));
            // Starts early enough in the day for a group's payments to share it.
            let start_in_day =
                |rng: &mut Rng| t0 + rng.between(0, (t1 - t0) / 1_000_000 - 10 * 3_600) * 1_000_000;
            if rng.chance(pr.currency_mismatch) {
                let pc = pick(rng, &["EUR", "EUR", "GBP", "USD", "JPY"]);
                let others: Vec<&'static str> =
                    CURRENCIES.iter().copied().filter(|c| *c != pc).collect();
                let lc = pick(rng, &others);
                let amount = amount_in(rng, pc);
                let (ep, el) = (exponent(pc), exponent(lc));
                let line_amount = match rng.below(3) {
                    // The same number of minor units (25000 JPY for 250.00 EUR).
                    0 => amount,
                    // The same number of units (250 JPY for 250.00 EUR).
                    1 => (i128::from(amount) * 10i128.pow(el) / 10i128.pow(ep)).max(1) as i64,
                    // About the converted amount.
                    _ => (i128::from(amount) * base_rate(lc) * 10i128.pow(el)
                        / (base_rate(pc) * 10i128.pow(ep)))
                    .max(1) as i64,
                };
                let status = match rng.below(100) {
                    0..45 => LedgerStatus::Unknown,
                    45..60 => LedgerStatus::Submitting,
                    _ => LedgerStatus::Succeeded,
                };
                let knows = status == LedgerStatus::Succeeded && rng.chance(5_000);
                let started = start_in_day(rng);
                let recipient = fresh(rng);
                let p = self.push_payment(rng, &recipient, amount, pc, started, status, knows);
                let booked = started + rng.between(10, 20 * 60) * MINUTE;
                let reference = self.payments[p].id.clone();
                let l = self.paid_once(
                    p,
                    (reference, recipient.clone()),
                    (line_amount, lc),
                    (booked, start),
                );
                self.payments[p].shape = Some(Shape::CurrencyMismatch { line: l });
            }
            if rng.chance(pr.multi_currency) {
                let recipient = fresh(rng);
                let mut currencies = CURRENCIES;
                for i in (1..currencies.len()).rev() {
                    let j = rng.below(i as u64 + 1) as usize;
                    currencies.swap(i, j);
                }
                let n = if rng.chance(7_000) { 4 } else { 3 };
                let minor = rng.between(1_000, 200_000);
                let base = start_in_day(rng);
                let first = self.payments.len();
                for &c in &currencies[..n] {
                    // The same number of minor units; a JPY payment sometimes of the same
                    // number of units instead.
                    let amount = if c == "JPY" && rng.chance(3_000) {
                        (minor / 100).max(1)
                    } else {
                        minor
                    };
                    let started = base + rng.between(0, 3 * 3_600) * 1_000_000;
                    let status = match rng.below(100) {
                        0..45 => LedgerStatus::Succeeded,
                        45..85 => LedgerStatus::Unknown,
                        _ => LedgerStatus::Submitting,
                    };
                    let paid = rng.chance(8_000);
                    let p = self.push_payment(rng, &recipient, amount, c, started, status, false);
                    self.payments[p].shape = Some(Shape::MultiCurrency { first, n });
                    if paid {
                        let booked = started + rng.between(5, 6 * 60) * MINUTE;
                        let reference = String::new();
                        self.paid_once(
                            p,
                            (reference, recipient.clone()),
                            (amount, c),
                            (booked / 1_000_000 * 1_000_000, start),
                        );
                    }
                }
            }
            if rng.chance(pr.netted_fee) {
                let c = pick(rng, &["EUR", "EUR", "GBP", "USD", "JPY"]);
                let limit = write_off_limit(c).unwrap_or(1);
                let within = !rng.chance(pr.fee_above_limit);
                let fee = if within {
                    rng.between(1, limit)
                } else {
                    rng.between(limit + 1, 20 * limit)
                };
                let low = (10 * fee).max(2_000);
                let amount = rng.between(low, low + 300_000);
                let status = match rng.below(100) {
                    0..50 => LedgerStatus::Unknown,
                    50..65 => LedgerStatus::Submitting,
                    _ => LedgerStatus::Succeeded,
                };
                let unresolved = status != LedgerStatus::Succeeded;
                let named = !unresolved || rng.chance(5_000);
                let knows = status == LedgerStatus::Succeeded && rng.chance(5_000);
                let started = start_in_day(rng);
                let recipient = fresh(rng);
                let p = self.push_payment(rng, &recipient, amount, c, started, status, knows);
                let booked = started + rng.between(10, 20 * 60) * MINUTE;
                let reference = if named {
                    self.payments[p].id.clone()
                } else {
                    String::new()
                };
                let l = self.paid_once(
                    p,
                    (reference, recipient.clone()),
                    (amount - fee, c),
                    (booked, start),
                );
                self.payments[p].shape = Some(Shape::NettedFee {
                    line: l,
                    fee_minor: fee,
                    within_limit: within,
                });
            }
        }
    }

    /// Issue 42: a provider payment of the ledger (sent, one attempt), not paid yet (its
    /// lines and fate are the caller's). `knows`: the ledger recorded the provider's id.
    #[allow(clippy::too_many_arguments)]
    fn push_payment(
        &mut self,
        rng: &mut Rng,
        recipient: &str,
        amount_minor: i64,
        currency: &'static str,
        started: Micros,
        status: LedgerStatus,
        knows: bool,
    ) -> usize {
        let started = started / 1_000_000 * 1_000_000;
        let id = uuid(rng);
        let provider_id = format!("pt_{}", hex(rng, 24));
        let (finished, outcome, error) = match status {
            LedgerStatus::Succeeded => (Some(started + 2 * 1_000_000), "SUCCEEDED", ""),
            LedgerStatus::Unknown => (Some(started + 30 * 1_000_000), "UNKNOWN", "timeout"),
            _ => (None, "", ""),
        };
        let known = knows.then(|| provider_id.clone());
        let created_at = started - 5 * 1_000_000;
        self.payments.push(Payment {
            id,
            recipient: recipient.to_string(),
            amount_minor,
            currency,
            created_at,
            started_at: Some(started),
            day: day_index(self.opts.start, timeparse::local_date(started, JOB_TZ)),
            status,
            rail: Source::Psp,
            provider_id: Some(provider_id),
            ledger_provider_id: known.clone(),
            attempts: vec![Attempt {
                id: uuid(rng),
                started_at: started,
                finished_at: finished,
                outcome,
                provider_id: known,
                error,
            }],
            fate: Fate::Lost,
            lines: Vec::new(),
            twin_of: None,
            ledger_from: created_at,
            shape: None,
        });
        self.payments.len() - 1
    }

    /// Issue 42: the ECB's daily rates (USD, JPY, GBP, CHF) for every weekday of the world and
    /// the week before, sometimes with a currency left out or `N/A`, and the job's fixed table.
    fn add_rates(&mut self, rng: &mut Rng) {
        use chrono::Datelike as _;
        let pr = self.opts.probs.clone();
        if rng.chance(pr.fixed_rate) {
            self.fixed_rates.insert("GBP", Decimal::new(8_550, 4));
        }
        for d in -7..=(self.opts.nights() as i64 + 1) {
            let date = day_date(self.opts.start, d);
            if matches!(date.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun) {
                continue;
            }
            let mut day = vec![
                (
                    "USD",
                    Some(Decimal::new(10_800 + rng.between(-150, 150), 4)),
                ),
                (
                    "JPY",
                    Some(Decimal::new(16_200 + rng.between(-250, 250), 2)),
                ),
                ("GBP", Some(Decimal::new(8_600 + rng.between(-100, 100), 4))),
                ("CHF", Some(Decimal::new(9_400 + rng.between(-100, 100), 4))),
            ];
            if rng.chance(pr.rate_missing) {
                let k = rng.below(3) as usize;
                if rng.chance(5_000) {
                    day.remove(k);
                } else {
                    day[k].1 = None;
                }
            }
            self.rates.insert(date, day);
        }
    }

    /// Issue 42: the rates file of publication day `date`, relative to the job folder.
    pub fn rates_file_name(date: NaiveDate) -> String {
        format!("rates/eurofxref-{}.csv", date.format("%Y-%m-%d"))
    }

    /// Issue 42: every rates file (relative path, bytes), in the ECB's one-day CSV layout
    /// (`Date, USD, JPY, …` and `22 October 2026, 1.0812, 162.35, …`, each line ending in `, `).
    pub fn rates_files(&self) -> Vec<(String, Vec<u8>)> {
        self.rates
            .iter()
            .map(|(date, day)| {
                let mut head = String::from("Date");
                let mut row = date.format("%d %B %Y").to_string();
                for (c, r) in day {
                    let _ = write!(head, ", {c}");
                    match r {
                        Some(r) => {
                            let _ = write!(row, ", {r}");
                        }
                        None => row.push_str(", N/A"),
                    }
                }
                (
                    Self::rates_file_name(*date),
                    format!("{head}, \n{row}, \n").into_bytes(),
                )
            })
            .collect()
    }

    /// Issue 42: units of each currency per 1 EUR that a night of business day `date` values
    /// its cases with, as the job reads them: the newest rates file published on `date` or the
    /// 6 days before, over the fixed table; EUR is 1. A currency missing from both is absent.
    pub fn rates_on(&self, date: NaiveDate) -> BTreeMap<&'static str, Decimal> {
        let mut out = self.fixed_rates.clone();
        for back in 0..7 {
            let d = date - chrono::Days::new(back);
            if let Some(day) = self.rates.get(&d) {
                for (c, r) in day {
                    if let Some(r) = r {
                        out.insert(c, *r);
                    }
                }
                break;
            }
        }
        out.insert("EUR", Decimal::ONE);
        out
    }

    /// Issue 42: payment `p` paid once by the provider (a `psp` payout with its provider id,
    /// `reference` and `recipient`, of `amount_minor` `currency`, booked at `booked_at`): the
    /// line joins its file's versions and is the payment's one line. Returns the line.
    fn paid_once(
        &mut self,
        p: usize,
        (reference, recipient): (String, String),
        (amount_minor, currency): (i64, &'static str),
        (booked_at, start): (Micros, NaiveDate),
    ) -> usize {
        let line = Line {
            source: Source::Psp,
            txn_id: self.payments[p].provider_id.clone(),
            reference,
            recipient,
            amount_minor,
            currency,
            booked_at,
            kind: "PAYMENT",
            role: LineRole::Payment { payment: p, nth: 0 },
            file_day: file_day_of(Source::Psp, start, booked_at),
        };
        let l = self.insert_line(line);
        let pm = &mut self.payments[p];
        pm.fate = Fate::PaidOnce;
        pm.lines = vec![l];
        l
    }

    /// Issue 42: line `line` is appended to the world and joins every version planned for its
    /// file (the complete day of a cut one); never delivered when its file never is.
    fn insert_line(&mut self, line: Line) -> usize {
        let versions: Vec<usize> = (0..self.versions.len())
            .filter(|&k| {
                self.versions[k].source == line.source && self.versions[k].day == line.file_day
            })
            .collect();
        let idx = self.lines.len();
        self.lines.push(line);
        self.join_versions(idx, &versions, true);
        idx
    }

    /// Line `idx` joins versions `versions` in booking order (a cut one's complete day only).
    /// `keep_order`: before the first line booked after it, every other line where it was (a
    /// flawed file's spurious copy stays where the flaw put it); else the file is sorted.
    fn join_versions(&mut self, idx: usize, versions: &[usize], keep_order: bool) {
        for &k in versions {
            let mut v = self.versions[k].clone();
            let key = |w: &World, i: usize| (w.lines[i].booked_at, i);
            let list = match &mut v.full_lines {
                // A cut file holds the lines before the cut; its control file the whole day.
                Some(full) => full,
                None => &mut v.lines,
            };
            if keep_order {
                let at = list
                    .iter()
                    .position(|&i| key(self, i) > key(self, idx))
                    .unwrap_or(list.len());
                list.insert(at, idx);
            } else {
                list.push(idx);
                list.sort_by_key(|&i| key(self, i));
            }
            self.versions[k] = v;
        }
    }

    /// Issue 40: whether the job asks for four eyes, and the regrouped twins
    /// ([`Probs::regroup`]).
    fn add_reviewer_shapes(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.clone();
        self.four_eyes = rng.chance(pr.four_eyes);
        let start = self.opts.start;
        // Regrouped twins: a lone paid payment gets a twin started minutes later (same
        // recipient and money, its own unnamed payout a day or two after its start).
        let lonely = self.lonely();
        let n = self.payments.len();
        for (p, &alone) in lonely.iter().enumerate().take(n) {
            let pay = self.payments[p].clone();
            let simple = pay.fate == Fate::PaidOnce
                && pay.shape.is_none()
                && pay.lines.len() == 1
                && pay.attempts.len() == 1
                && matches!(
                    pay.status,
                    LedgerStatus::Unknown | LedgerStatus::Submitting | LedgerStatus::Succeeded
                );
            let Some(started) = pay.started_at else {
                continue;
            };
            if !(alone && simple && rng.chance(pr.regroup)) {
                continue;
            }
            let q = self.payments.len();
            let twin_start = started + rng.between(1, 20) * MINUTE;
            let provider_id = (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
            let status = if rng.chance(5_000) {
                LedgerStatus::Unknown
            } else {
                pay.status
            };
            let (finished, outcome, error) = match status {
                LedgerStatus::Succeeded => (Some(twin_start + 2 * 1_000_000), "SUCCEEDED", ""),
                LedgerStatus::Unknown => (Some(twin_start + 30 * 1_000_000), "UNKNOWN", "timeout"),
                _ => (None, "", ""),
            };
            let id = uuid(rng);
            let booked = twin_start + rng.between(26 * 60, 50 * 60) * MINUTE;
            let payout = Self::payment_line(
                rng,
                &pr,
                start,
                (
                    &id,
                    &pay.recipient,
                    pay.amount_minor,
                    pay.currency,
                    pay.rail,
                ),
                provider_id.clone(),
                booked,
                LineRole::Payment { payment: q, nth: 0 },
            );
            let l = self.lines.len();
            self.lines.push(Line {
                reference: String::new(),
                ..payout
            });
            self.payments.push(Payment {
                id,
                recipient: pay.recipient.clone(),
                amount_minor: pay.amount_minor,
                currency: pay.currency,
                created_at: twin_start - 5 * 1_000_000,
                started_at: Some(twin_start),
                day: day_index(start, timeparse::local_date(twin_start, JOB_TZ)),
                status,
                rail: pay.rail,
                provider_id,
                ledger_provider_id: None,
                attempts: vec![Attempt {
                    id: uuid(rng),
                    started_at: twin_start,
                    finished_at: finished,
                    outcome,
                    provider_id: None,
                    error,
                }],
                fate: Fate::PaidOnce,
                lines: vec![l],
                twin_of: Some(p),
                ledger_from: twin_start - 5 * 1_000_000,
                shape: Some(Shape::Regroup { other: p }),
            });
            // The first payout names nothing and is booked within two hours: the first night
            // holds one unnamed line for two payments, the night the twin's arrives two.
            let booked = started + rng.between(10, 120) * MINUTE;
            self.unname(p, Shape::Regroup { other: q }, booked, start);
        }
        // Lost twins: one unnamed payout for two unresolved look-alikes, only one of them paid.
        let lonely = self.lonely();
        let n = self.payments.len();
        for (p, &alone) in lonely.iter().enumerate().take(n) {
            let pay = self.payments[p].clone();
            let eligible = pay.fate == Fate::PaidOnce
                && pay.shape.is_none()
                && pay.lines.len() == 1
                && pay.attempts.len() == 1
                && matches!(pay.status, LedgerStatus::Unknown | LedgerStatus::Submitting);
            let Some(started) = pay.started_at else {
                continue;
            };
            if !(alone && eligible && rng.chance(pr.lost_twin)) {
                continue;
            }
            let q = self.payments.len();
            let twin_start = started + rng.between(1, 20) * MINUTE;
            let provider_id = (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
            let id = uuid(rng);
            self.payments.push(Payment {
                id,
                recipient: pay.recipient.clone(),
                amount_minor: pay.amount_minor,
                currency: pay.currency,
                created_at: twin_start - 5 * 1_000_000,
                started_at: Some(twin_start),
                day: day_index(start, timeparse::local_date(twin_start, JOB_TZ)),
                status: LedgerStatus::Unknown,
                rail: pay.rail,
                provider_id,
                ledger_provider_id: None,
                attempts: vec![Attempt {
                    id: uuid(rng),
                    started_at: twin_start,
                    finished_at: Some(twin_start + 30 * 1_000_000),
                    outcome: "UNKNOWN",
                    provider_id: None,
                    error: "timeout",
                }],
                fate: Fate::Lost,
                lines: Vec::new(),
                twin_of: Some(p),
                ledger_from: twin_start - 5 * 1_000_000,
                shape: Some(Shape::LostTwin { other: p }),
            });
            let booked = started + rng.between(30, 120) * MINUTE;
            self.unname(p, Shape::LostTwin { other: q }, booked, start);
        }
        let lonely = self.lonely();
        for (p, &alone) in lonely.iter().enumerate() {
            let pay = &self.payments[p];
            let unresolved = matches!(pay.status, LedgerStatus::Unknown | LedgerStatus::Submitting);
            let simple = pay.shape.is_none()
                && pay.attempts.len() == 1
                && matches!(pay.fate, Fate::Lost | Fate::PaidOnce);
            let Some(started) = pay.started_at else {
                continue;
            };
            if !(alone && unresolved && simple && rng.chance(pr.near_miss)) {
                continue;
            }
            let delta =
                pay.amount_minor * rng.between(10, 40) / 100 * [-1, 1][rng.below(2) as usize];
            let amount = (pay.amount_minor + delta).max(100);
            let booked = (started + rng.between(10, 6 * 60) * MINUTE) / 1_000_000 * 1_000_000;
            let (amount_minor, kind) = match pay.rail {
                Source::Psp => (amount, "PAYMENT"),
                Source::Bank => (-amount, "DEBIT"),
            };
            let late_payout =
                (started + rng.between(30 * 60, 60 * 60) * MINUTE) / 1_000_000 * 1_000_000;
            let line = Line {
                source: pay.rail,
                txn_id: (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24))),
                reference: String::new(),
                recipient: pay.recipient.clone(),
                amount_minor,
                currency: pay.currency,
                booked_at: booked,
                kind,
                role: LineRole::LookAlike { near: p },
                file_day: file_day_of(pay.rail, start, booked),
            };
            let l = self.lines.len();
            self.lines.push(line);
            // A paid one's payout names it by nothing, and is booked a day or two after the
            // look-alike (inside the window): until it arrives, only a reviewer can say it was
            // paid (the near-miss gate holds payments without any evidence).
            let pm = &mut self.payments[p];
            if pm.fate == Fate::PaidOnce {
                pm.ledger_provider_id = None;
                for a in &mut pm.attempts {
                    a.provider_id = None;
                }
                let own = pm.lines[0];
                let payout = &mut self.lines[own];
                payout.reference = String::new();
                payout.booked_at = late_payout;
                payout.file_day = file_day_of(payout.source, start, late_payout);
            }
            self.payments[p].shape = Some(Shape::NearMiss { line: l });
        }
    }

    fn payment_line(
        rng: &mut Rng,
        pr: &Probs,
        start: NaiveDate,
        (id, recipient, amount, currency, rail): (&str, &str, i64, &'static str, Source),
        txn: Option<String>,
        booked: Micros,
        role: LineRole,
    ) -> Line {
        let booked = booked / 1_000_000 * 1_000_000;
        match rail {
            Source::Psp => Line {
                source: rail,
                txn_id: txn,
                reference: if rng.chance(pr.psp_reference) {
                    id.to_string()
                } else {
                    String::new()
                },
                recipient: recipient.to_string(),
                amount_minor: amount,
                currency,
                booked_at: booked,
                kind: "PAYMENT",
                role,
                file_day: file_day_of(rail, start, booked),
            },
            Source::Bank => Line {
                source: rail,
                txn_id: None,
                reference: if rng.chance(pr.bank_reference) {
                    id.to_string()
                } else {
                    String::new()
                },
                recipient: recipient.to_string(),
                amount_minor: -amount,
                currency,
                booked_at: booked,
                kind: "DEBIT",
                role,
                file_day: file_day_of(rail, start, booked),
            },
        }
    }

    /// The first night whose as-of is at or after `t`.
    pub fn first_night_at(&self, t: Micros) -> u32 {
        let mut n = 0;
        while n < self.opts.nights() + 40 && night_as_of(self.opts.start, n) < t {
            n += 1;
        }
        n
    }

    /// The first night recon could resolve payment `p` FAILED (its window plus the lag has
    /// passed), or `u32::MAX` when it never could (not unresolved in the ledger).
    pub fn earliest_failed_night(&self, p: usize) -> u32 {
        let pay = &self.payments[p];
        match (pay.status, pay.current_start()) {
            (LedgerStatus::Unknown | LedgerStatus::Submitting, Some(s)) => {
                self.first_night_at(s + WINDOW_AFTER + LAG)
            }
            _ => u32::MAX,
        }
    }

    /// Payment `p` becomes one of a look-alike pair (`shape` names the other): the ledger and
    /// its attempts forget its provider id, and its payout names nothing and is booked at
    /// `booked` (whole seconds).
    fn unname(&mut self, p: usize, shape: Shape, booked: Micros, start: NaiveDate) {
        let pm = &mut self.payments[p];
        pm.ledger_provider_id = None;
        for at in &mut pm.attempts {
            at.provider_id = None;
        }
        pm.shape = Some(shape);
        let line = &mut self.lines[pm.lines[0]];
        line.reference = String::new();
        line.booked_at = booked / 1_000_000 * 1_000_000;
        line.file_day = file_day_of(line.source, start, line.booked_at);
    }

    /// The payments whose (recipient, currency, amount) no other payment shares, and that are
    /// not twins: a shape staged on them is about the shape alone.
    fn lonely(&self) -> Vec<bool> {
        let mut keys: BTreeMap<(&str, &str, i64), usize> = BTreeMap::new();
        for p in &self.payments {
            *keys
                .entry((p.recipient.as_str(), p.currency, p.amount_minor))
                .or_insert(0) += 1;
        }
        let twinned: BTreeSet<usize> = self.payments.iter().filter_map(|p| p.twin_of).collect();
        self.payments
            .iter()
            .enumerate()
            .map(|(i, p)| {
                keys[&(p.recipient.as_str(), p.currency, p.amount_minor)] == 1
                    && p.twin_of.is_none()
                    && !twinned.contains(&i)
            })
            .collect()
    }

    /// Stages the shapes of issue 30 (see [`Probs`]) on payments of the built world.
    fn add_shapes(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.clone();
        let start = self.opts.start;
        let nights = self.opts.nights();
        let lonely = self.lonely();
        for (p, &alone) in lonely.iter().enumerate() {
            let pay = self.payments[p].clone();
            let Some(started) = pay.started_at else {
                // PENDING: never submitted, per the ledger.
                if pay.status == LedgerStatus::Pending && rng.chance(pr.paid_while_pending) {
                    let booked = pay.created_at + booking_delay(rng);
                    let txn = (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
                    let mut l = Self::payment_line(
                        rng,
                        &pr,
                        start,
                        (
                            &pay.id,
                            &pay.recipient,
                            pay.amount_minor,
                            pay.currency,
                            pay.rail,
                        ),
                        txn.clone(),
                        booked,
                        LineRole::Payment { payment: p, nth: 0 },
                    );
                    l.reference = pay.id.clone();
                    let pm = &mut self.payments[p];
                    pm.provider_id = txn;
                    pm.fate = Fate::PaidOnce;
                    pm.lines = vec![self.lines.len()];
                    pm.shape = Some(Shape::PaidWhilePending);
                    self.lines.push(l);
                }
                continue;
            };
            match (pay.status, pay.fate) {
                (LedgerStatus::Failed, Fate::Lost) if rng.chance(pr.live_retry) => {
                    // The retry starts once the first attempt's window and lag have passed,
                    // 10 minutes or 25 hours before a night's as-of.
                    let before_as_of = if rng.chance(5_000) {
                        10 * MINUTE
                    } else {
                        25 * HOUR
                    };
                    let closed = started + WINDOW_AFTER + LAG + 2 * HOUR;
                    let mut night = self.first_night_at(closed + before_as_of);
                    night += rng.below(2) as u32;
                    if night + 1 >= nights {
                        continue;
                    }
                    let retry_at = night_as_of(start, night) - before_as_of;
                    let provider_id =
                        (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
                    let paid = rng.chance(pr.unknown_paid);
                    let mut idxs = Vec::new();
                    if paid {
                        let b = retry_at + booking_delay(rng);
                        idxs.push(self.lines.len());
                        let l = Self::payment_line(
                            rng,
                            &pr,
                            start,
                            (
                                &pay.id,
                                &pay.recipient,
                                pay.amount_minor,
                                pay.currency,
                                pay.rail,
                            ),
                            provider_id.clone(),
                            b,
                            LineRole::Payment { payment: p, nth: 0 },
                        );
                        self.lines.push(l);
                    }
                    let attempt = Attempt {
                        id: uuid(rng),
                        started_at: retry_at,
                        finished_at: None,
                        outcome: "",
                        provider_id: None,
                        error: "",
                    };
                    let pm = &mut self.payments[p];
                    pm.status = LedgerStatus::Submitting;
                    pm.provider_id = provider_id;
                    pm.ledger_provider_id = None;
                    pm.attempts.push(attempt);
                    pm.fate = if paid { Fate::PaidOnce } else { Fate::Lost };
                    pm.lines = idxs;
                    pm.ledger_from = retry_at;
                    pm.shape = Some(Shape::LiveRetry {
                        night,
                        before_as_of,
                    });
                }
                (LedgerStatus::Unknown, Fate::PaidOnce)
                    if alone && pay.lines.len() == 1 && rng.chance(pr.blind_retry) =>
                {
                    // The payout is unnamed (no reference; its provider id, if any, was never
                    // recorded), booked inside the first attempt's window; the retry
                    // starts a day after it, so the payout is outside the retry's window.
                    let l = pay.lines[0];
                    let booked = self.lines[l].booked_at;
                    let mut night = self.first_night_at(booked + 24 * HOUR + 25 * HOUR);
                    night += rng.below(2) as u32;
                    // Late enough for the retry's window and the lag to pass in the world.
                    if night + 5 >= nights {
                        continue;
                    }
                    let retry_at = night_as_of(start, night) - 25 * HOUR;
                    // Unnamed: no reference, and a provider id the ledger never recorded
                    // (the first attempt timed out).
                    self.lines[l].reference = String::new();
                    let attempt = Attempt {
                        id: uuid(rng),
                        started_at: retry_at,
                        finished_at: None,
                        outcome: "",
                        provider_id: None,
                        error: "",
                    };
                    let pm = &mut self.payments[p];
                    pm.status = LedgerStatus::Submitting;
                    pm.provider_id = None;
                    pm.ledger_provider_id = None;
                    for a in &mut pm.attempts {
                        a.provider_id = None;
                    }
                    pm.attempts.push(attempt);
                    pm.ledger_from = retry_at;
                    pm.shape = Some(Shape::BlindRetry { night });
                }
                (LedgerStatus::Unknown, Fate::Lost) if alone && rng.chance(pr.other_reference) => {
                    let booked =
                        (started + rng.between(10, 48 * 60) * MINUTE) / 1_000_000 * 1_000_000;
                    let (amount_minor, kind) = match pay.rail {
                        Source::Psp => (pay.amount_minor, "PAYMENT"),
                        Source::Bank => (-pay.amount_minor, "DEBIT"),
                    };
                    let txn = (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
                    let line = |reference: String, role: LineRole| Line {
                        source: pay.rail,
                        txn_id: txn.clone(),
                        reference,
                        recipient: pay.recipient.clone(),
                        amount_minor,
                        currency: pay.currency,
                        booked_at: booked,
                        kind,
                        role,
                        file_day: file_day_of(pay.rail, start, booked),
                    };
                    if rng.chance(5_000) {
                        let reference = uuid(rng);
                        self.lines
                            .push(line(reference, LineRole::Decoy { near: p }));
                        self.payments[p].shape = Some(Shape::DecoyReference);
                    } else {
                        // An old payment of ours to the same recipient, same money, long
                        // before the carry-over horizon; this is its second payout.
                        let old = self.payments.len();
                        let created = day_start(start, -rng.between(20, 40))
                            + rng.between(0, 20 * 3_600) * 1_000_000;
                        let s = created + 60 * 1_000_000;
                        let old_id = uuid(rng);
                        let old_provider =
                            (pay.rail == Source::Psp).then(|| format!("pt_{}", hex(rng, 24)));
                        self.lines.push(line(
                            old_id.clone(),
                            LineRole::Payment {
                                payment: old,
                                nth: 1,
                            },
                        ));
                        self.payments.push(Payment {
                            id: old_id,
                            recipient: pay.recipient.clone(),
                            amount_minor: pay.amount_minor,
                            currency: pay.currency,
                            created_at: created,
                            started_at: Some(s),
                            day: day_index(start, timeparse::local_date(s, JOB_TZ)),
                            status: LedgerStatus::Succeeded,
                            rail: pay.rail,
                            provider_id: old_provider.clone(),
                            ledger_provider_id: old_provider.clone(),
                            attempts: vec![Attempt {
                                id: uuid(rng),
                                started_at: s,
                                finished_at: Some(s + 2 * 1_000_000),
                                outcome: "SUCCEEDED",
                                provider_id: old_provider,
                                error: "",
                            }],
                            fate: Fate::PaidTwice,
                            lines: vec![self.lines.len() - 1],
                            twin_of: None,
                            ledger_from: created,
                            shape: Some(Shape::OldPayment),
                        });
                        self.payments[p].shape = Some(Shape::OldReference { old });
                    }
                }
                (LedgerStatus::Unknown, Fate::Lost)
                    if alone
                        && pay.rail == Source::Psp
                        && pay.provider_id.is_some()
                        && rng.chance(pr.late_contradiction) =>
                {
                    let paid_at = started + rng.between(20, 180) * MINUTE;
                    let night = self.first_night_at(paid_at);
                    if night + 1 >= nights {
                        continue;
                    }
                    let failed_at = night_as_of(start, night) + rng.between(60, 20 * 60) * MINUTE;
                    for (status, at) in [
                        ("PROCESSING", started + 30 * 1_000_000),
                        ("PAID", paid_at),
                        ("FAILED", failed_at),
                    ] {
                        self.hooks.push(HookEvent {
                            payment: p,
                            status,
                            at,
                        });
                    }
                    self.payments[p].shape = Some(Shape::LateContradiction);
                }
                (LedgerStatus::Unknown | LedgerStatus::Submitting, Fate::PaidOnce)
                    if alone && rng.chance(pr.other_reference / 2) =>
                {
                    let l = pay.lines[0];
                    self.lines[l].reference = format!("INV-2026-{:04}", rng.between(1, 9_999));
                    self.payments[p].shape = Some(Shape::InvoiceReference);
                }
                _ => {}
            }
        }
        self.hooks.sort_by_key(|e| (e.at, e.payment));
    }

    fn plan_deliveries(&mut self, rng: &mut Rng) {
        let pr = self.opts.probs.clone();
        let horizon = self.opts.nights() as i64;
        let mut versions = Vec::new();
        for source in Source::ALL {
            let first = if source == Source::Psp { -1 } else { 0 };
            for day in first..horizon {
                let mut content: Vec<usize> = (0..self.lines.len())
                    .filter(|&i| self.lines[i].source == source && self.lines[i].file_day == day)
                    .collect();
                content.sort_by_key(|&i| (self.lines[i].booked_at, i));
                // Control files name the record count, the sha256, or both.
                let control = match rng.below(100) {
                    0..70 => Control::Full {
                        lines: true,
                        sha: true,
                    },
                    70..85 => Control::Full {
                        lines: true,
                        sha: false,
                    },
                    _ => Control::Full {
                        lines: false,
                        sha: true,
                    },
                };
                let due = day.max(0) as u32;
                let x = rng.below(10_000);
                let base = if x < pr.never {
                    continue;
                } else if x < pr.never + pr.late {
                    Some(due + rng.between(1, 3) as u32)
                } else {
                    None
                };
                let (arrival, event) = match base {
                    Some(a) => (a, Event::Late),
                    None => (due, Event::OnTime),
                };
                let later = |rng: &mut Rng| arrival + rng.between(1, 3) as u32;
                let y = rng.below(10_000);
                let v = |lines: Vec<usize>, arrival, control, event| Version {
                    source,
                    day,
                    arrival,
                    lines,
                    control,
                    full_lines: None,
                    event,
                    overrides: Vec::new(),
                };
                if y < pr.truncated && !content.is_empty() {
                    let keep = rng.below(content.len() as u64) as usize;
                    let stale = rng.chance(4_000);
                    versions.push(Version {
                        full_lines: Some(content.clone()),
                        ..v(
                            content[..keep].to_vec(),
                            arrival,
                            if stale { Control::Stale } else { Control::None },
                            Event::Truncated,
                        )
                    });
                    if !rng.chance(1_500) {
                        let a = later(rng);
                        versions.push(v(content, a, control, Event::Completed));
                    }
                } else if y < pr.truncated + pr.corrected {
                    let fix = later(rng);
                    // Withhold a true line only where no decision could rest on its absence
                    // before the correction arrives (see the module doc of nights.rs): a
                    // payout of an unresolved payment whose FAILED-deadline is after the fix.
                    let withheld = content.iter().position(|&i| match self.lines[i].role {
                        LineRole::Payment { payment, .. } | LineRole::Return { payment } => {
                            self.earliest_failed_night(payment) > fix
                        }
                        LineRole::Foreign | LineRole::Decoy { .. } | LineRole::LookAlike { .. } => {
                            true
                        }
                        LineRole::Spurious { .. } => false,
                    });
                    let add = rng.chance(5_000) && withheld.is_some();
                    let mut flawed = content.clone();
                    if add {
                        if let Some(k) = withheld {
                            flawed.remove(k);
                        }
                    } else {
                        // A spurious copy of a payout in the file, with the payment named.
                        let payouts: Vec<usize> = content
                            .iter()
                            .copied()
                            .filter(|&i| matches!(self.lines[i].role, LineRole::Payment { .. }))
                            .collect();
                        let spurious = if payouts.is_empty() {
                            None
                        } else {
                            let c = payouts[rng.below(payouts.len() as u64) as usize];
                            let orig = self.lines[c].clone();
                            let p = orig.payment(&self.lines);
                            Some(Line {
                                txn_id: orig
                                    .txn_id
                                    .as_ref()
                                    .map(|_| format!("pt_{}", hex(rng, 24))),
                                reference: p
                                    .map(|p| self.payments[p].id.clone())
                                    .unwrap_or_default(),
                                booked_at: orig.booked_at + rng.between(0, 600) * 1_000_000,
                                role: LineRole::Spurious { copy_of: c },
                                ..orig
                            })
                        };
                        if let Some(mut l) = spurious {
                            // Keep it in the same file day.
                            if file_day_of(source, self.opts.start, l.booked_at) != day {
                                l.booked_at = self.lines[match l.role {
                                    LineRole::Spurious { copy_of } => copy_of,
                                    _ => 0,
                                }]
                                .booked_at;
                            }
                            let at = rng.below(flawed.len() as u64 + 1) as usize;
                            flawed.insert(at, self.lines.len());
                            self.lines.push(l);
                        }
                    }
                    if flawed == content {
                        versions.push(v(content, arrival, control, event));
                    } else {
                        versions.push(v(flawed, arrival, control, Event::Flawed));
                        versions.push(v(content, fix, control, Event::Corrected));
                    }
                } else {
                    versions.push(v(content.clone(), arrival, control, event));
                    if y < pr.truncated + pr.corrected + pr.redelivered {
                        let a = later(rng);
                        versions.push(v(content, a, control, Event::Redelivered));
                    }
                }
            }
        }
        versions.sort_by_key(|v| (v.arrival, v.source, v.day));
        self.versions = versions;
    }

    /// File name of a source's file for `day`, relative to the job folder.
    pub fn file_name(&self, source: Source, day: i64) -> String {
        format!(
            "inbox/{0}/{0}-{1}.csv",
            source.name(),
            day_date(self.opts.start, day).format("%Y-%m-%d")
        )
    }

    /// The statement file bytes of `lines` in `source`'s layout.
    pub fn render_lines(&self, source: Source, lines: &[usize]) -> String {
        self.render_lines_with(source, lines, &[])
    }

    /// [`World::render_lines`] with some lines' references shown as `overrides` has them.
    pub fn render_lines_with(
        &self,
        source: Source,
        lines: &[usize],
        overrides: &[(usize, String)],
    ) -> String {
        let mut s = String::new();
        match source {
            Source::Psp => {
                s.push_str("txn_id,reference,beneficiary,amount,currency,booked_at,type\n")
            }
            Source::Bank => {
                s.push_str("booking_date,counterparty_iban,amount,currency,reference,type\n")
            }
        }
        for &i in lines {
            let l = &self.lines[i];
            let reference = overrides
                .iter()
                .rev()
                .find(|(k, _)| *k == i)
                .map_or(l.reference.as_str(), |(_, r)| r.as_str());
            let amount = recon::money::format_minor(l.amount_minor, l.currency);
            match source {
                Source::Psp => {
                    // Alternate between UTC and Berlin offsets (both RFC 3339).
                    let dt =
                        DateTime::<Utc>::from_timestamp_micros(l.booked_at).unwrap_or_default();
                    let ts = if i % 2 == 0 {
                        dt.format("%Y-%m-%dT%H:%M:%SZ").to_string()
                    } else {
                        dt.with_timezone(&JOB_TZ)
                            .format("%Y-%m-%dT%H:%M:%S%:z")
                            .to_string()
                    };
                    let _ = writeln!(
                        s,
                        "{},{},{},{},{},{},{}",
                        l.txn_id.as_deref().unwrap_or(""),
                        reference,
                        l.recipient,
                        amount,
                        l.currency,
                        ts,
                        l.kind
                    );
                }
                Source::Bank => {
                    let _ = writeln!(
                        s,
                        "{},{},{},{},{},{}",
                        day_date(self.opts.start, l.file_day).format("%Y-%m-%d"),
                        l.recipient,
                        amount,
                        l.currency,
                        reference,
                        l.kind
                    );
                }
            }
        }
        s
    }

    /// The files of version `v`: (relative path, bytes) of the statement and, when it has one,
    /// of its control file.
    pub fn render_version(&self, v: &Version) -> Vec<(String, Vec<u8>)> {
        let name = self.file_name(v.source, v.day);
        let body = self.render_lines_with(v.source, &v.lines, &v.overrides);
        let mut out = vec![(name.clone(), body.clone().into_bytes())];
        let ctl = |lines: &[usize], body: &str, with_lines: bool, with_sha: bool| {
            recon::sources::control_text(
                with_lines.then_some(lines.len()),
                with_sha
                    .then(|| recon::sources::sha256_hex(body.as_bytes()))
                    .as_deref(),
            )
        };
        match v.control {
            Control::None => {}
            Control::Full { lines, sha } => out.push((
                format!("{name}.ctl"),
                ctl(&v.lines, &body, lines, sha).into_bytes(),
            )),
            Control::Stale => {
                let full = v.full_lines.clone().unwrap_or_default();
                let full_body = self.render_lines_with(v.source, &full, &v.overrides);
                out.push((
                    format!("{name}.ctl"),
                    ctl(&full, &full_body, true, true).into_bytes(),
                ));
            }
        }
        out
    }

    /// Issue 40: the provider re-delivers the file that holds line `line` on night `arrival`,
    /// with the line's reference now `reference` (the file as complete as its last planned
    /// version, with a matching control file); every version of that file arriving later shows
    /// the new reference too. None when the file was never delivered, or no night is left.
    /// Returns the new version's index (versions stay in arrival order).
    pub fn redeliver_with_reference(
        &mut self,
        line: usize,
        reference: &str,
        arrival: u32,
    ) -> Option<usize> {
        let (source, day) = (self.lines[line].source, self.lines[line].file_day);
        if arrival >= self.opts.nights() {
            return None;
        }
        let last = self
            .versions
            .iter()
            .rposition(|v| v.source == source && v.day == day)?;
        let base = self.versions[last].clone();
        let mut lines = base.full_lines.clone().unwrap_or(base.lines.clone());
        if !lines.contains(&line) {
            // A spurious copy withdrawn, or a line the file never held: nothing to rename.
            let full: Vec<usize> = self
                .versions
                .iter()
                .filter(|v| v.source == source && v.day == day)
                .flat_map(|v| v.lines.iter().copied())
                .collect();
            if !full.contains(&line) {
                return None;
            }
            lines.push(line);
            lines.sort_by_key(|&i| (self.lines[i].booked_at, i));
        }
        for v in &mut self.versions {
            if v.source == source && v.day == day && v.arrival > arrival {
                v.overrides.push((line, reference.to_string()));
            }
        }
        let mut overrides = base.overrides.clone();
        overrides.push((line, reference.to_string()));
        let version = Version {
            source,
            day,
            arrival,
            lines,
            control: Control::Full {
                lines: true,
                sha: true,
            },
            full_lines: None,
            event: Event::Renamed,
            overrides,
        };
        // After every version that arrives by then: the newest of its night.
        let at = self
            .versions
            .iter()
            .position(|v| v.arrival > arrival)
            .unwrap_or(self.versions.len());
        self.versions.insert(at, version);
        Some(at)
    }

    /// Issue 40: a line booked after night `after` (a late payout, a return) joins every
    /// version of its file that arrives after that night. None when no such version exists
    /// (the file is never delivered, or was delivered already): the line is not added.
    pub fn add_line(&mut self, line: Line, after: u32) -> Option<usize> {
        let (source, day) = (line.source, line.file_day);
        let versions: Vec<usize> = (0..self.versions.len())
            .filter(|&k| self.versions[k].source == source && self.versions[k].day == day)
            .collect();
        if versions.is_empty() || versions.iter().any(|&k| self.versions[k].arrival <= after) {
            return None;
        }
        let idx = self.lines.len();
        self.lines.push(line);
        self.join_versions(idx, &versions, false);
        Some(idx)
    }

    /// Issue 40: a line about payment `p` booked at `booked`, naming it in its reference: a
    /// payout (its first, or a duplicate when it has one), or with `ret` the return of its
    /// money. A provider line carries `txn`. Not part of the world until [`World::add_line`].
    pub fn line_for(&self, p: usize, booked: Micros, ret: bool, txn: Option<String>) -> Line {
        let pay = &self.payments[p];
        let booked = booked / 1_000_000 * 1_000_000;
        let paid_before = pay
            .lines
            .iter()
            .any(|&l| matches!(self.lines[l].role, LineRole::Payment { .. }));
        let (sign, kind, role) = match (pay.rail, ret) {
            (Source::Psp, false) => (1, "PAYMENT", None),
            (Source::Psp, true) => (-1, "RETURN", Some(LineRole::Return { payment: p })),
            (Source::Bank, false) => (-1, "DEBIT", None),
            (Source::Bank, true) => (1, "RETURN", Some(LineRole::Return { payment: p })),
        };
        Line {
            source: pay.rail,
            txn_id: (pay.rail == Source::Psp).then_some(txn).flatten(),
            reference: pay.id.clone(),
            recipient: pay.recipient.clone(),
            amount_minor: sign * pay.amount_minor,
            currency: pay.currency,
            booked_at: booked,
            kind,
            role: role.unwrap_or(LineRole::Payment {
                payment: p,
                nth: u8::from(paid_before),
            }),
            file_day: file_day_of(pay.rail, self.opts.start, booked),
        }
    }

    /// Issue 40: a webhook event stored later (events stay in time order).
    pub fn add_hook(&mut self, event: HookEvent) {
        self.hooks.push(event);
        self.hooks.sort_by_key(|e| (e.at, e.payment));
    }

    /// Whether the job has the webhook block: events are stored, or a shape of issue 40 may
    /// store some while the world is played.
    pub fn has_hooks(&self) -> bool {
        !self.hooks.is_empty()
            || self.opts.probs.hook_after_confirm > 0
            || self.opts.probs.failed_hook_after_human > 0
    }

    /// For each (source, day): the newest version that has arrived by night `n`.
    pub fn inbox_at(&self, n: u32) -> BTreeMap<(Source, i64), usize> {
        let mut out = BTreeMap::new();
        for (k, v) in self.versions.iter().enumerate() {
            if v.arrival <= n {
                out.insert((v.source, v.day), k);
            }
        }
        out
    }

    /// The webhook files the payment service has stored by night `n` (relative path, bytes):
    /// one JSON-lines file per night, named by its as-of's date, holding the events since the
    /// night before.
    pub fn hook_files(&self, n: u32) -> Vec<(String, Vec<u8>)> {
        let mut by_night: BTreeMap<u32, String> = BTreeMap::new();
        for e in &self.hooks {
            let k = self.first_night_at(e.at);
            if k > n {
                continue;
            }
            let p = &self.payments[e.payment];
            let _ = writeln!(
                by_night.entry(k).or_default(),
                r#"{{"id":"{}","status":"{}","reference":"{}","amount":"{}","currency":"{}","at":"{}"}}"#,
                p.provider_id.as_deref().unwrap_or(""),
                e.status,
                p.id,
                recon::money::format_minor(p.amount_minor, p.currency),
                p.currency,
                timeparse::format_utc(e.at),
            );
        }
        by_night
            .into_iter()
            .map(|(k, text)| {
                (
                    format!(
                        "hooks/{}.jsonl",
                        day_date(self.opts.start, k as i64 + 1).format("%Y-%m-%d")
                    ),
                    text.into_bytes(),
                )
            })
            .collect()
    }

    /// Writes the inbox as of night `n` into `dir` (the job folder): every file present has the
    /// bytes of its newest arrived version; a control file that version lacks is removed.
    /// The webhook events stored by then are written too. Returns the versions present.
    pub fn deliver(&self, dir: &Path, n: u32) -> Result<BTreeMap<(Source, i64), usize>> {
        for (rel, bytes) in self.notice_files(n) {
            let path = dir.join(&rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        if self.has_hooks() {
            let hooks = dir.join("hooks");
            std::fs::create_dir_all(&hooks)
                .with_context(|| format!("creating {}", hooks.display()))?;
            for (rel, bytes) in self.hook_files(n) {
                let path = dir.join(&rel);
                std::fs::write(&path, bytes)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        let inbox = self.inbox_at(n);
        for &k in inbox.values() {
            let v = &self.versions[k];
            let files = self.render_version(v);
            for (rel, bytes) in &files {
                let path = dir.join(rel);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
                let same = std::fs::read(&path).is_ok_and(|b| &b == bytes);
                if !same || v.arrival == n {
                    std::fs::write(&path, bytes)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
            }
            if v.control == Control::None {
                let ctl = dir.join(format!("{}.ctl", self.file_name(v.source, v.day)));
                if ctl.exists() {
                    std::fs::remove_file(&ctl)
                        .with_context(|| format!("removing {}", ctl.display()))?;
                }
            }
        }
        Ok(inbox)
    }

    /// Ledger rows of the payments created in `(after, until]` (`None`: from the beginning):
    /// payments.csv and attempts.csv text, each with its header.
    pub fn ledger_csv(&self, after: Option<Micros>, until: Micros) -> (String, String, usize) {
        let mut pays = recon::ledger::import::PAYMENT_COLUMNS.join(",") + "\n";
        let mut atts = recon::ledger::import::ATTEMPT_COLUMNS.join(",") + "\n";
        let ts = |t: Micros| {
            DateTime::<Utc>::from_timestamp_micros(t)
                .unwrap_or_default()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        };
        let mut n = 0;
        for p in &self.payments {
            if p.ledger_from > until || after.is_some_and(|a| p.ledger_from <= a) {
                continue;
            }
            n += 1;
            let _ = writeln!(
                pays,
                "{},{},{},{},{},{},{},{},{}",
                p.id,
                p.recipient,
                recon::money::format_minor(p.amount_minor, p.currency),
                p.currency,
                p.status.as_str(),
                ts(p.created_at),
                p.started_at.map(ts).unwrap_or_default(),
                p.attempt_id().unwrap_or(""),
                p.ledger_provider_id.as_deref().unwrap_or(""),
            );
            for a in &p.attempts {
                let _ = writeln!(
                    atts,
                    "{},{},{},{},{},{},{}",
                    a.id,
                    p.id,
                    ts(a.started_at),
                    a.finished_at.map(ts).unwrap_or_default(),
                    a.outcome,
                    a.provider_id.as_deref().unwrap_or(""),
                    a.error,
                );
            }
        }
        (pays, atts, n)
    }

    /// The job config. `database_url` as written into the file; paths are relative to it.
    pub fn config_toml(&self, database_url: &str) -> String {
        self.config_toml_for(database_url, None)
    }

    /// [`World::config_toml`] with the reviewers' part of the job (issue 40): `approvals`,
    /// `decisions_inbox` and the `[[reviewer]]` table, when `desk` is given.
    pub fn config_toml_for(&self, database_url: &str, desk: Option<&Desk>) -> String {
        let (top, reviewers) = desk.map(Desk::toml).unwrap_or_default();
        format!(
            r#"# Written by recon's simulator (seed {seed}, {days} days + {tail} nights, {ppd} payments a day).
timezone = "Europe/Berlin"
database_url = "{database_url}"
output_dir = "out"
stale_submitting_minutes = 30
settlement_lag_hours = 24
carry_over_days = 14
evidence_window_before = "10m"
evidence_window_after = "72h"
reporting_currency = "{reporting}"
dismiss_reasons = [{reasons}]
write_off_limit = {{ {limits} }}
{top}
[rates]
path = "rates/eurofxref-{{date}}.csv"
{fixed}
[[source]]
name = "psp"
format = "csv"
path = "inbox/psp/psp-{{date}}.csv"
timezone = "UTC"
timestamp_format = "rfc3339"
completeness = "control_file"

{psp_columns}
[source.kinds]
PAYMENT = "PAYMENT"
RETURN = "REFUND"

[[source]]
name = "bank"
role = "bank"
format = "csv"
path = "inbox/bank/bank-{{date}}.csv"
timezone = "Europe/Berlin"
timestamp_format = "%Y-%m-%d"
completeness = "control_file"

[source.columns]
reference = "reference"
recipient = "counterparty_iban"
amount = "amount"
currency = "currency"
booked_at = "booking_date"
kind = "type"

[source.kinds]
DEBIT = "PAYMENT"
RETURN = "REFUND"
{hooks}{reviewers}"#,
            seed = self.opts.seed,
            days = self.opts.days,
            tail = self.opts.tail,
            ppd = self.opts.payments_per_day,
            psp_columns = crate::generate::PSP_COLUMNS,
            reporting = REPORTING_CURRENCY,
            reasons = DISMISS_REASONS
                .iter()
                .map(|r| format!("\"{r}\""))
                .collect::<Vec<_>>()
                .join(", "),
            limits = WRITE_OFF_LIMIT
                .iter()
                .map(|(c, l)| format!("{c} = \"{}\"", recon::money::format_minor(*l, c)))
                .collect::<Vec<_>>()
                .join(", "),
            fixed = if self.fixed_rates.is_empty() {
                String::new()
            } else {
                let mut t = String::from("\n[rates.fixed]\n");
                for (c, r) in &self.fixed_rates {
                    let _ = writeln!(t, "{c} = \"{r}\"");
                }
                t
            },
            // A played world may store events later (issue 40); a written one has them all.
            hooks = if desk.map_or(!self.hooks.is_empty(), |_| self.has_hooks()) {
                HOOKS_CONFIG
            } else {
                ""
            },
        ) + if self.notices.is_empty() {
            ""
        } else {
            PAYOUT_STATUS_CONFIG
        }
    }

    /// One line per payment: its truth and its lines (for people reading a failure, and for
    /// scoring a benchmark run).
    pub fn truth_csv(&self) -> String {
        let mut s = String::from(
            "payment_id,day,rail,ledger_status,fate,provider_id,recipient,amount,currency,started_at,lines\n",
        );
        for p in &self.payments {
            let lines: Vec<String> = p
                .lines
                .iter()
                .map(|&i| {
                    let l = &self.lines[i];
                    format!(
                        "{}:{}@{}",
                        l.source.name(),
                        l.txn_id.as_deref().unwrap_or(l.kind),
                        timeparse::format_utc(l.booked_at)
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{}",
                p.id,
                day_date(self.opts.start, p.day),
                p.rail.name(),
                p.status.as_str(),
                match p.fate {
                    Fate::Lost => "lost",
                    Fate::PaidOnce => "paid_once",
                    Fate::PaidTwice => "paid_twice",
                    Fate::Returned => "returned",
                },
                p.provider_id.as_deref().unwrap_or(""),
                p.recipient,
                recon::money::format_minor(p.amount_minor, p.currency),
                p.currency,
                p.started_at.map(timeparse::format_utc).unwrap_or_default(),
                lines.join(";"),
            );
        }
        s
    }

    /// schedule.csv: one row per delivered version.
    pub fn schedule_csv(&self) -> String {
        let mut s = String::from("night,as_of,source,file,event,lines,control,sha256\n");
        for v in &self.versions {
            let files = self.render_version(v);
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{}",
                v.arrival,
                timeparse::format_utc(night_as_of(self.opts.start, v.arrival)),
                v.source.name(),
                self.file_name(v.source, v.day),
                v.event.as_str(),
                v.lines.len(),
                match v.control {
                    Control::None => "none",
                    Control::Full { .. } => "matching",
                    Control::Stale => "stale",
                },
                hex::encode(Sha256::digest(&files[0].1)),
            );
        }
        s
    }

    /// A one-paragraph description of payment `p` for failure messages.
    pub fn describe_payment(&self, p: usize) -> String {
        let pay = &self.payments[p];
        let mut s = format!(
            "payment {} (day {} {}, rail {}, ledger {}, truth: {}; {} {} to {}, started {}, provider id {} (ledger knows: {}){})",
            pay.id,
            pay.day,
            day_date(self.opts.start, pay.day),
            pay.rail.name(),
            pay.status.as_str(),
            pay.fate.as_str(),
            recon::money::format_minor(pay.amount_minor, pay.currency),
            pay.currency,
            mask_tail(&pay.recipient),
            pay.started_at
                .map(timeparse::format_utc)
                .unwrap_or_else(|| "-".into()),
            pay.provider_id.as_deref().unwrap_or("-"),
            pay.ledger_provider_id.is_some(),
            pay.twin_of
                .map(|t| format!(", twin of {}", self.payments[t].id))
                .unwrap_or_default(),
        );
        if pay.current_start() != pay.started_at {
            let _ = write!(
                s,
                "\n      current attempt {} started {}",
                pay.attempt_id().unwrap_or("-"),
                pay.current_start()
                    .map(timeparse::format_utc)
                    .unwrap_or_else(|| "-".into())
            );
        }
        if let Some(shape) = pay.shape {
            let _ = write!(s, "\n      shape: {shape:?}");
        }
        for e in self.hooks.iter().filter(|e| e.payment == p) {
            let _ = write!(
                s,
                "\n      webhook {} at {}",
                e.status,
                timeparse::format_utc(e.at)
            );
        }
        for x in self.notices.iter().filter(|x| x.payment == p) {
            let _ = write!(
                s,
                "\n      bank file: {:?} written {}, in the job's folder before night {}",
                x.kind,
                timeparse::format_utc(x.created),
                x.arrival
            );
        }
        for &i in &pay.lines {
            let _ = write!(s, "\n      {}", self.lines[i].describe(i, self.opts.start));
            let _ = write!(s, "; {}", self.delivery_of(i));
        }
        s
    }

    /// When line `i` was delivered: the versions that carry it.
    pub fn delivery_of(&self, i: usize) -> String {
        let vs: Vec<String> = self
            .versions
            .iter()
            .filter(|v| v.lines.contains(&i))
            .map(|v| format!("{} night {}", v.event.as_str(), v.arrival))
            .collect();
        if vs.is_empty() {
            "never delivered".into()
        } else {
            format!("delivered: {}", vs.join(", "))
        }
    }

    /// `recon-tools generate --days N`: the ledger, every file in its final delivered state, the
    /// schedule of arrivals, the truth and a config, in `dir`.
    pub fn write_folder(&self, dir: &Path) -> Result<GeneratedWorld> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let last = self.opts.nights().saturating_sub(1);
        let final_as_of = night_as_of(self.opts.start, last);
        let (pays, atts, n) = self.ledger_csv(None, i64::MAX);
        let write = |rel: &str, bytes: &[u8]| -> Result<PathBuf> {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        write("payments.csv", pays.as_bytes())?;
        write("attempts.csv", atts.as_bytes())?;
        // Every version in arrival order: the last one written per path is the final state.
        let mut files = 0;
        for (_, &k) in self.inbox_at(u32::MAX - 1).iter() {
            let v = &self.versions[k];
            let rendered = self.render_version(v);
            for (rel, bytes) in &rendered {
                write(rel, bytes)?;
            }
            if v.control == Control::None {
                let _ = std::fs::remove_file(
                    dir.join(format!("{}.ctl", self.file_name(v.source, v.day))),
                );
            }
            files += 1;
        }
        for (rel, bytes) in self.hook_files(u32::MAX - 1) {
            write(&rel, &bytes)?;
        }
        for (rel, bytes) in self.notice_files(u32::MAX - 1) {
            write(&rel, &bytes)?;
        }
        for (rel, bytes) in self.rates_files() {
            write(&rel, &bytes)?;
        }
        write("schedule.csv", self.schedule_csv().as_bytes())?;
        write("truth.csv", self.truth_csv().as_bytes())?;
        let config = write(
            "recon.toml",
            self.config_toml("sqlite://recon.db").as_bytes(),
        )?;
        Ok(GeneratedWorld {
            config,
            payments: n,
            lines: self.lines.len(),
            files,
            from: self.opts.start,
            to: day_date(self.opts.start, last as i64),
            as_of: final_as_of,
        })
    }
}

impl Line {
    fn payment_lines_owner(&self) -> Option<usize> {
        match self.role {
            LineRole::Payment { payment, .. } | LineRole::Return { payment } => Some(payment),
            _ => None,
        }
    }
}

/// What [`World::write_folder`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedWorld {
    /// recon.toml.
    pub config: PathBuf,
    /// Payments in the ledger.
    pub payments: usize,
    /// Statement lines in the world.
    pub lines: usize,
    /// Daily files written.
    pub files: usize,
    /// First day.
    pub from: NaiveDate,
    /// Last day.
    pub to: NaiveDate,
    /// The last night's as-of.
    pub as_of: Micros,
}

impl std::fmt::Display for GeneratedWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "generated {} payments, {} statement lines in {} daily files ({} .. {})",
            self.payments, self.lines, self.files, self.from, self.to
        )?;
        let dir = self
            .config
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        writeln!(
            f,
            "import: recon ledger import --config {0}/recon.toml --payments {0}/payments.csv --attempts {0}/attempts.csv",
            dir
        )?;
        write!(
            f,
            "run:    recon run --config {} --from {} --to {} --as-of {}",
            self.config.display(),
            self.from,
            self.to,
            timeparse::format_utc(self.as_of)
        )
    }
}
