//! What a case is in plain words, and what a reviewer does next (issue 42): the email and the
//! reports show these instead of outcome names. One table, also in docs/outcomes.md ("What
//! to do"), which a test holds equal to [`TABLE`].
//!
//! The next steps only name decisions a case of that kind may be offered
//! ([`super::cases::choices`]): recon never moves a payment out of FAILED, SUCCEEDED or
//! PENDING, so "mark it paid" in a FAILED payment's step is done in the payment system, and the
//! case is then dismissed with a reason.

use super::cases::{Case, CaseKind};
use crate::model::Outcome;

/// A case's plain title and its next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// What it is, as a finance reader says it: `Paid although marked failed`.
    pub title: &'static str,
    /// What to do next, one or two short sentences.
    pub next: &'static str,
}

/// Which row of [`TABLE`] a case takes: an ambiguity or a near miss by its kind (whatever its
/// most severe row's outcome), every other case by its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// The case's kind decides.
    Kind(CaseKind),
    /// The case's outcome decides.
    Outcome(Outcome),
}

impl Row {
    /// The label docs/outcomes.md gives the row: the outcome name, or the kind's name
    /// (`ambiguity`, `near miss`) for the two kinds.
    pub fn label(self) -> String {
        match self {
            Row::Kind(k) => format!("{} (kind)", k.as_str()),
            Row::Outcome(o) => o.as_str().into(),
        }
    }
}

/// Every case a run can list, and what it says. The order is the docs table's.
pub const TABLE: &[(Row, Step)] = &[
    (
        Row::Outcome(Outcome::FailedButPaid),
        Step {
            title: "Paid although marked failed",
            next: "Stop any retry of this payment now. Then mark it paid in the payment system \
                   and dismiss the case as ledger corrected.",
        },
    ),
    (
        Row::Outcome(Outcome::PaidWhilePending),
        Step {
            title: "Paid before it was sent",
            next: "Stop the payment service from sending it. Then mark it paid in the payment \
                   system and dismiss the case as ledger corrected.",
        },
    ),
    (
        Row::Outcome(Outcome::DuplicateAtProvider),
        Step {
            title: "Paid twice",
            next: "Ask the provider or the recipient for the second payout back; dismiss the \
                   case as duplicate claimed back once it is requested.",
        },
    ),
    (
        Row::Outcome(Outcome::Contradicted),
        Step {
            title: "Two records disagree about who was paid",
            next: "Ask the provider which payment this payout belongs to, then decide the case \
                   again. Nothing is paid or failed on it until then.",
        },
    ),
    (
        Row::Outcome(Outcome::Returned),
        Step {
            title: "Money came back",
            next: "Find out why it came back (closed or wrong account). Pay again only with \
                   corrected details, then dismiss the case.",
        },
    ),
    (
        Row::Outcome(Outcome::MissingAtProvider),
        Step {
            title: "Marked paid, but the provider shows no payout",
            next: "Ask the provider whether it paid. If it did not, correct the payment to \
                   failed before anyone retries it.",
        },
    ),
    (
        Row::Outcome(Outcome::CurrencyMismatch),
        Step {
            title: "Paid in another currency",
            next: "Do not retry. Ask the provider why it paid in another currency, and \
                   escalate the case to treasury.",
        },
    ),
    (
        Row::Outcome(Outcome::AmountMismatch),
        Step {
            title: "Paid a different amount",
            next: "Check the provider's fee or exchange terms. Accept the difference if it is \
                   within policy; otherwise escalate.",
        },
    ),
    (
        Row::Outcome(Outcome::OrphanAtProvider),
        Step {
            title: "A payout we have no payment for",
            next: "Find whose payout it is from its reference and recipient. If it is not ours, \
                   ask the provider to claim it back.",
        },
    ),
    (
        Row::Kind(CaseKind::Ambiguity),
        Step {
            title: "Not sure which payout is which payment",
            next: "Compare the possible matches and confirm the right one. Escalate if you \
                   cannot tell.",
        },
    ),
    (
        Row::Kind(CaseKind::NearMiss),
        Step {
            title: "A similar payout, not exactly this payment",
            next: "If that payout is this payment's, confirm it (or accept the difference). If \
                   it is not, mark the payment failed.",
        },
    ),
    (
        Row::Outcome(Outcome::Ambiguous),
        Step {
            title: "Not sure which payment this is",
            next: "Compare the possible matches and confirm the right one. Escalate if you \
                   cannot tell.",
        },
    ),
    (
        Row::Outcome(Outcome::ProposedMatch),
        Step {
            title: "A likely match to approve",
            next: "Check the payout against the payment and confirm it, or dismiss the case.",
        },
    ),
    (
        Row::Outcome(Outcome::SettlementMismatch),
        Step {
            title: "The provider's payout differs from the bank credit",
            next: "Compare the batch's fees and payouts with the bank credit, and raise the \
                   difference with the provider.",
        },
    ),
    (
        Row::Outcome(Outcome::PayoutMissingAtBank),
        Step {
            title: "A provider payout never reached the bank",
            next: "Ask the provider for the payout's trace (date, amount, account) and chase it \
                   with the bank.",
        },
    ),
    (
        Row::Outcome(Outcome::UnmatchedBankCredit),
        Step {
            title: "Money in the bank nobody explains",
            next: "Find who sent it from the bank reference; book it or send it back.",
        },
    ),
];

/// A case recon has no row for (an outcome that raises no ticket): its outcome name and a
/// plain step.
const OTHER: Step = Step {
    title: "Needs a look",
    next: "Open the case in the report and decide it.",
};

/// The row of `case` ([`Row`]).
pub fn row_of(case: &Case) -> Row {
    match case.kind {
        CaseKind::Ambiguity | CaseKind::NearMiss => Row::Kind(case.kind),
        _ => Row::Outcome(case.outcome),
    }
}

/// The title and next step of `case`.
pub fn step(case: &Case) -> Step {
    let row = row_of(case);
    TABLE
        .iter()
        .find(|(r, _)| *r == row)
        .map(|(_, s)| *s)
        .unwrap_or(OTHER)
}

/// The table as docs/outcomes.md holds it: one `| case | title | next step |` line a row.
pub fn docs_table() -> String {
    let mut out = String::from("| case | title | next step |\n|---|---|---|\n");
    for (row, s) in TABLE {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            row.label(),
            s.title,
            s.next
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every outcome that raises a ticket has its own row (a new one cannot fall back to
    /// "Needs a look" unnoticed), and no row is there twice.
    #[test]
    fn every_ticket_outcome_has_a_row_and_none_twice() {
        for o in Outcome::ALL {
            if o.ticket_severity().is_some() {
                assert!(
                    TABLE.iter().any(|(r, _)| *r == Row::Outcome(o)),
                    "{} raises a ticket and has no plain title",
                    o.as_str()
                );
            }
        }
        for (i, (r, _)) in TABLE.iter().enumerate() {
            assert!(
                TABLE[i + 1..].iter().all(|(q, _)| q != r),
                "{} twice",
                r.label()
            );
        }
    }

    /// Titles are short enough for a phone's line, and no step names an outcome code.
    #[test]
    fn titles_fit_a_phone_and_steps_speak_plainly() {
        for (r, s) in TABLE {
            assert!(s.title.chars().count() <= 52, "{}: {}", r.label(), s.title);
            for o in Outcome::ALL {
                assert!(
                    !s.next.contains(o.as_str()) && !s.title.contains(o.as_str()),
                    "{} names {}",
                    r.label(),
                    o.as_str()
                );
            }
        }
    }
}
