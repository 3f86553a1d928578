//! The rules' criteria, checked for ONE payment and ONE line: why a pair qualifies for a pass
//! or the near-miss gate, or why it does not. The matcher itself works on whole frames; these
//! checks only explain its pairs (`recon explain`, ticket evidence), so both say the same thing.

use crate::config::LineKind;
use crate::ledger::Payment;
use crate::rules::{Pass, PassKind, RuleSet};
use crate::sources::StatementLine;
use crate::timeparse::{self, Micros};
use crate::{money, normalize};

/// One criterion with its verdict and a short text that names the values compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Whether the pair meets it.
    pub ok: bool,
    /// E.g. `same recipient`, `currency USD ≠ EUR`, `booked … inside the window … .. …`.
    pub text: String,
}

fn check(ok: bool, yes: impl FnOnce() -> String, no: impl FnOnce() -> String) -> Check {
    Check {
        ok,
        text: if ok { yes() } else { no() },
    }
}

fn kind(l: &StatementLine) -> Check {
    check(
        l.kind == LineKind::Payment && l.ledger_candidate(),
        || "a PAYMENT line".into(),
        || {
            if l.kind != LineKind::Payment {
                format!("it is a {} line", l.kind.as_str())
            } else {
                "it is a credit on a bank account (matched three-way, not to payments)".into()
            }
        },
    )
}

fn recipient(steps: &[normalize::Step], p: &Payment, l: &StatementLine) -> Check {
    check(
        normalize::apply(steps, &p.recipient) == normalize::apply(steps, &l.recipient),
        || "same recipient".into(),
        || "recipient differs".into(),
    )
}

fn currency(p: &Payment, l: &StatementLine) -> Check {
    check(
        p.currency == l.currency,
        || format!("same currency {}", p.currency),
        || format!("currency {} ≠ {}", l.currency, p.currency),
    )
}

/// Amount within `tolerance` minor units; `None` = any amount (the near-miss gate).
fn amount(p: &Payment, l: &StatementLine, tolerance: Option<i64>) -> Check {
    // As paid to the recipient: a bank debit's booked amount negated (see ledger_amount).
    let paid = l.ledger_amount();
    let line = money::format_minor(paid, l.currency);
    let pay = money::format_minor(p.amount_minor, p.currency);
    match tolerance {
        None => Check {
            ok: true,
            text: if paid == p.amount_minor && l.currency == p.currency {
                format!("amount {line} (any amount counts)")
            } else {
                format!("amount {line} vs {pay} (any amount counts)")
            },
        },
        Some(tol) => {
            let ok = (paid - p.amount_minor).abs() <= tol;
            let tol = money::format_minor(tol, p.currency);
            check(
                ok,
                || {
                    if paid == p.amount_minor {
                        format!("amount {line} equal")
                    } else {
                        format!("amount {line} within tolerance {tol} of {pay}")
                    }
                },
                || format!("amount {line} ≠ {pay} (tolerance {tol})"),
            )
        }
    }
}

fn window(p: &Payment, l: &StatementLine, (before, after): (Micros, Micros)) -> Check {
    match p.started_at {
        None => Check {
            ok: false,
            text: "the payment was never sent".into(),
        },
        Some(s) => {
            let (a, b) = (s - before, s + after);
            let range = format!(
                "{} .. {}",
                timeparse::format_utc(a),
                timeparse::format_utc(b)
            );
            let booked = timeparse::format_utc(l.booked_at);
            check(
                l.booked_at >= a && l.booked_at <= b,
                || format!("booked {booked} inside the window {range}"),
                || format!("booked {booked} outside the window {range}"),
            )
        }
    }
}

/// The criteria of a fuzzy pass (kind, recipient, currency, amount and tolerance, window);
/// `None` for an identifier pass.
pub fn fuzzy(pass: &Pass, p: &Payment, l: &StatementLine) -> Option<Vec<Check>> {
    let PassKind::Fuzzy {
        before,
        after,
        tolerance_minor,
    } = pass.kind
    else {
        return None;
    };
    Some(vec![
        kind(l),
        recipient(&pass.normalize, p, l),
        currency(p, l),
        amount(p, l, Some(tolerance_minor)),
        window(p, l, (before, after)),
    ])
}

/// The criteria of an identifier pass: which identifier names the payment, then how the money
/// and recipient compare (a link is accepted on the identifier; the rest decides its outcome).
/// `None` for a fuzzy pass.
pub fn identifier(pass: &Pass, p: &Payment, l: &StatementLine) -> Option<Vec<Check>> {
    let PassKind::Identifier(ids) = pass.kind else {
        return None;
    };
    let norm = |s: &str| normalize::apply(&pass.normalize, s).into_owned();
    let by_ref = ids.reference
        && l.reference
            .as_deref()
            .is_some_and(|r| norm(r) == norm(&p.payment_id));
    let by_id = ids.provider_txn_id
        && l.provider_txn_id.is_some()
        && l.provider_txn_id.as_deref().map(norm) == p.provider_payment_id.as_deref().map(norm);
    let named = if by_ref {
        Check {
            ok: true,
            text: "named by reference".into(),
        }
    } else if by_id {
        Check {
            ok: true,
            text: "provider id recorded on the payment".into(),
        }
    } else if ids.provider_txn_id && l.provider_txn_id.is_some() {
        // The pass paired them, so the id is recorded on one of the payment's attempts.
        Check {
            ok: true,
            text: "provider id recorded on an attempt of the payment".into(),
        }
    } else {
        Check {
            ok: false,
            text: "no identifier names the payment".into(),
        }
    };
    Some(vec![
        named,
        recipient(&pass.normalize, p, l),
        currency(p, l),
        amount(p, l, Some(0)),
    ])
}

/// The near-miss gate's criteria: same recipient and currency, booked inside the widest
/// window, any amount.
pub fn near_miss(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<Check> {
    let steps = [normalize::Step::NoSpaces, normalize::Step::Upper];
    vec![
        kind(l),
        recipient(&steps, p, l),
        currency(p, l),
        amount(p, l, None),
        window(p, l, rules.evidence_window()),
    ]
}

/// Every fuzzy pass's checks of a pair, by pass index.
pub fn fuzzy_passes(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<(usize, Vec<Check>)> {
    rules
        .passes
        .iter()
        .enumerate()
        .filter_map(|(i, pass)| fuzzy(pass, p, l).map(|c| (i, c)))
        .collect()
}
