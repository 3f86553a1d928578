//! Guarded status transitions (DESIGN.md rule 3): a conditional update plus an append-only
//! history row, inside the caller's transaction. Zero rows affected means someone else moved
//! the payment: recorded as a conflict, never forced. The SQL is in `store`.

use super::Status;

/// One status change recon wants to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Payment id.
    pub payment_id: String,
    /// Status the payment must still have.
    pub from: Status,
    /// New status.
    pub to: Status,
    /// Attempt the payment must still be on.
    pub attempt_id: Option<String>,
    /// Provider id to record (RESOLVED_SUCCEEDED).
    pub provider_payment_id: Option<String>,
    /// The provider id the payment had when it was loaded (kept in the history row, so a
    /// re-run can classify on the payment as it was before recon's change).
    pub prior_provider_payment_id: Option<String>,
    /// Why (outcome, rule, evidence).
    pub reason: String,
}

/// What happened to a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The update went through and history was written.
    Applied,
    /// An earlier run of recon already made exactly this change.
    AlreadyApplied,
    /// Someone else changed the payment since it was loaded: left alone.
    Conflict,
}
