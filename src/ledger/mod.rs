//! The internal ledger: payments and their attempts, as the payment service keeps them.
//! recon imports them (demos, tests, benchmarks), loads them for a run and applies guarded
//! status transitions.

pub mod clock;
pub mod import;
pub mod load;
pub mod lookup;
pub mod pg_copy;
pub mod rows;
pub mod sqlite_raw;
pub mod transitions;

pub use crate::model::Status;
use crate::timeparse::Micros;
use compact_str::CompactString;

/// One payment as a run sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// Ledger id (also the reference the provider should echo).
    pub payment_id: crate::model::Id,
    /// Canonical recipient account.
    pub recipient: CompactString,
    /// Minor units.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
    /// Status in the ledger now.
    pub current_status: Status,
    /// Status recon classifies on: the status before recon's own transition when the latest
    /// change was recon's, so re-runs reproduce their results.
    pub status: Status,
    /// Current attempt.
    pub attempt_id: Option<crate::model::Id>,
    /// Provider id recorded on the payment.
    pub provider_payment_id: Option<CompactString>,
    /// When the current attempt (`attempt_id`) started, as the attempts hold it; the payment
    /// row's own start only when that attempt has none (DESIGN.md rule 11, see [`clock`]).
    /// None for a payment never sent.
    pub started_at: Option<Micros>,
    /// The earliest start of any of the payment's attempts (its row's own start included when
    /// it is earlier): the start of the first attempt that could have paid. Equal to
    /// `started_at` for a payment with one attempt. Matching a line TO the payment keeps the
    /// current attempt's window; deciding that no line came (RESOLVED_FAILED,
    /// MISSING_AT_PROVIDER) needs the absence of evidence from here on (see [`clock`]).
    pub first_started_at: Option<Micros>,
    /// When the payment was created.
    pub created_at: Micros,
    /// Follow-up bookkeeping: (opened_on, closed_on) as YYYY-MM-DD. Boxed: rare, and a
    /// million payments each carrying 48 bytes for it cost 48 MB.
    pub followup: Option<Box<(String, Option<String>)>>,
    /// recon's own change, when the ledger's latest change to the payment was recon's: the
    /// fields above then show the payment as it was before it (`status`, and the provider id
    /// recon recorded is taken back), so a re-run reproduces its decision, and the
    /// classification re-checks that decision against today's evidence (DESIGN.md rule 8).
    pub recon: Option<Box<ReconChange>>,
    /// A reviewer's change, when the ledger's latest change to the payment was a person's
    /// (`recon decisions apply`, or anyone but recon): its status is kept as the reviewer left
    /// it, and later evidence that contradicts it is reported (DESIGN.md rule 14).
    pub human: Option<Box<HumanChange>>,
    /// The payment's partition ([`crate::partition::id`] of its partition column's value;
    /// [`crate::partition::NONE`] in a job without `[partition]`): lines of other partitions
    /// are never its evidence.
    pub partition: u32,
}

/// recon's latest change to a payment (see [`Payment::recon`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconChange {
    /// The status recon moved the payment to (its status in the ledger now).
    pub to: Status,
    /// The run that made the change.
    pub run_id: String,
    /// That run's day (YYYY-MM-DD; empty when the run record is gone).
    pub day: String,
    /// That run's as-of (`None` when the run record is gone): a run whose as-of is earlier saw
    /// less than that decision did and does not judge it.
    pub as_of: Option<Micros>,
}

/// A person's latest change to a payment (see [`Payment::human`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanChange {
    /// The status they moved it to (its status in the ledger now).
    pub to: Status,
    /// Who (the history's actor).
    pub actor: String,
    /// When (UTC micros).
    pub at: crate::timeparse::Micros,
}

impl Payment {
    /// The instant that places the payment in a day: its current attempt's start
    /// ([`Payment::started_at`]), or created_at if never sent.
    pub fn anchor(&self) -> Micros {
        self.started_at.unwrap_or(self.created_at)
    }

    /// The start the absence of evidence is measured from: the earliest attempt's start
    /// ([`Payment::first_started_at`]), never later than the current one.
    pub fn absence_from(&self) -> Option<Micros> {
        match (self.first_started_at, self.started_at) {
            (Some(f), Some(s)) => Some(f.min(s)),
            (f, s) => s.or(f),
        }
    }

    /// Whether an earlier attempt started before the current one: the absence of evidence is
    /// then measured over a wider span than the current attempt's window.
    pub fn has_earlier_attempt(&self) -> bool {
        matches!((self.first_started_at, self.started_at), (Some(f), Some(s)) if f < s)
    }
}
