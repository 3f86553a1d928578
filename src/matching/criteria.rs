//! The matching criteria, defined once: for a pair of ONE payment and ONE line ([`Fuzzy::holds`],
//! [`Fuzzy::checks`], [`same_recipient`], [`same_money`]) and, from the same parameters, as the
//! Polars join predicates over whole frames ([`Fuzzy::predicates`]). The passes, the near-miss
//! gate, return matching, the acceptance checks of links, `recon explain` and ticket evidence
//! all take their answer from here (a property test checks that the join and the scalar checks
//! agree pair for pair).
//!
//! Values are compared in canonical form: ledger and statement values are canonicalised when
//! they are loaded ([`crate::normalize::account`]), and every recipient comparison applies the
//! pass's own normalisation steps on top.

use crate::config::LineKind;
use crate::ledger::Payment;
use crate::rules::{Pass, PassKind, RuleSet};
use crate::sources::StatementLine;
use crate::timeparse::{self, Micros};
use crate::{money, normalize};
use polars::prelude::{Expr, col, lit};
use std::borrow::Cow;

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

/// Recipients are the same once both are normalised with `steps`.
pub fn same_recipient(steps: &[normalize::Step], p: &Payment, l: &StatementLine) -> bool {
    // Both are canonical when loaded: equal text is the common case and needs no steps.
    p.recipient == l.recipient
        || normalize::apply(steps, &p.recipient) == normalize::apply(steps, &l.recipient)
}

/// The line pays exactly the payment's money: same currency, and the amount as paid to the
/// recipient ([`StatementLine::ledger_amount`]) equal to the payment's.
pub fn same_money(p: &Payment, l: &StatementLine) -> bool {
    l.currency == p.currency && l.ledger_amount() == p.amount_minor
}

/// A link that checks out: same money and same recipient under the pass's `steps`. Anything
/// else is disputed evidence (an identifier says one thing, the booking another).
pub fn clean_link(steps: &[normalize::Step], p: &Payment, l: &StatementLine) -> bool {
    same_money(p, l) && same_recipient(steps, p, l)
}

/// How a fuzzy criterion compares amounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmountRule {
    /// The amount as paid within this many minor units of the payment's.
    Within(i64),
    /// Any amount (the near-miss gate).
    Any,
    /// The money that came back: the line's absolute amount equals the payment's.
    Returned,
}

/// Which lines a fuzzy criterion looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRule {
    /// Lines that can be one of our payments ([`StatementLine::ledger_candidate`]).
    Payments,
    /// Returns and reversals (kind `REFUND`).
    Returns,
}

/// The fuzzy criteria of a pass, the near-miss gate or return matching: recipient (normalised
/// with `steps`), currency, amount, and the booking overlapping
/// `[started_at − window.0, started_at + window.1]`.
#[derive(Debug, Clone, Copy)]
pub struct Fuzzy<'a> {
    /// Recipient normalisation.
    pub steps: &'a [normalize::Step],
    /// Window before and after the payment's start.
    pub window: (Micros, Micros),
    /// Amount comparison.
    pub amount: AmountRule,
    /// Whether the currency must be the same.
    pub same_currency: bool,
    /// Which lines qualify.
    pub lines: LineRule,
}

/// The near-miss gate's recipient normalisation.
pub const NEAR_MISS_STEPS: [normalize::Step; 2] =
    [normalize::Step::NoSpaces, normalize::Step::Upper];

impl<'a> Fuzzy<'a> {
    /// The criteria of a fuzzy pass; `None` for an identifier pass.
    pub fn of_pass(pass: &'a Pass) -> Option<Fuzzy<'a>> {
        match pass.kind {
            PassKind::Fuzzy {
                before,
                after,
                tolerance_minor,
            } => Some(Fuzzy {
                steps: &pass.normalize,
                window: (before, after),
                amount: AmountRule::Within(tolerance_minor),
                same_currency: true,
                lines: LineRule::Payments,
            }),
            PassKind::Identifier(_) => None,
        }
    }

    /// The near-miss gate: the same recipient inside the evidence horizon, any amount, any
    /// currency (a provider that booked our payment in another currency is exactly the case
    /// where a retry pays twice).
    pub fn near_miss(rules: &RuleSet) -> Fuzzy<'static> {
        Fuzzy {
            steps: &NEAR_MISS_STEPS,
            window: rules.evidence_window(),
            amount: AmountRule::Any,
            same_currency: false,
            lines: LineRule::Payments,
        }
    }

    /// Return matching: a return or reversal with the payment's recipient, currency and
    /// (absolute) amount, booked from the start of the payment's window to `after` past its
    /// start.
    pub fn returns(rules: &'a RuleSet, after: Micros) -> Fuzzy<'a> {
        let steps = rules
            .passes
            .iter()
            .find_map(|p| Fuzzy::of_pass(p).map(|f| f.steps))
            .unwrap_or(&NEAR_MISS_STEPS);
        Fuzzy {
            steps,
            window: (rules.evidence_window().0, after),
            amount: AmountRule::Returned,
            same_currency: true,
            lines: LineRule::Returns,
        }
    }

    /// Whether the line is of the kind these criteria look at.
    pub fn line_qualifies(&self, l: &StatementLine) -> bool {
        match self.lines {
            LineRule::Payments => l.ledger_candidate(),
            LineRule::Returns => l.kind == LineKind::Refund,
        }
    }

    /// A recipient in the form it is compared in.
    pub fn recipient_key<'s>(&self, recipient: &'s str) -> Cow<'s, str> {
        normalize::apply(self.steps, recipient)
    }

    /// The line's amount in the form it is compared with the payment's.
    pub fn line_amount(&self, l: &StatementLine) -> i64 {
        match self.amount {
            AmountRule::Returned => l.ledger_amount().saturating_abs(),
            _ => l.ledger_amount(),
        }
    }

    fn amount_ok(&self, p: &Payment, l: &StatementLine) -> bool {
        match self.amount {
            AmountRule::Within(tol) => (self.line_amount(l) - p.amount_minor).abs() <= tol,
            AmountRule::Any => true,
            AmountRule::Returned => self.line_amount(l) == p.amount_minor,
        }
    }

    fn window_ok(&self, p: &Payment, l: &StatementLine) -> bool {
        p.started_at
            .is_some_and(|s| l.booked_within(s - self.window.0, s + self.window.1))
    }

    /// Whether the pair meets every criterion (what the join keeps).
    pub fn holds(&self, p: &Payment, l: &StatementLine) -> bool {
        let key = self.recipient_key(&l.recipient);
        self.line_qualifies(l)
            && !key.is_empty()
            && self.recipient_key(&p.recipient) == key
            && (!self.same_currency || p.currency == l.currency)
            && self.amount_ok(p, l)
            && self.window_ok(p, l)
    }

    /// Every criterion with its verdict, for explanations and ticket evidence.
    pub fn checks(&self, p: &Payment, l: &StatementLine) -> Vec<Check> {
        vec![
            self.kind_check(l),
            self.recipient_check(p, l),
            self.currency_check(p, l),
            self.amount_check(p, l),
            self.window_check(p, l),
        ]
    }

    fn currency_check(&self, p: &Payment, l: &StatementLine) -> Check {
        if self.same_currency {
            return check(
                p.currency == l.currency,
                || format!("same currency {}", p.currency),
                || format!("currency {} ≠ {}", l.currency, p.currency),
            );
        }
        // The words of a same-currency check when the currencies agree: fingerprints of
        // existing near-miss tickets stay the same.
        Check {
            ok: true,
            text: if p.currency == l.currency {
                format!("same currency {}", p.currency)
            } else {
                format!(
                    "currency {} vs {} (any currency counts)",
                    l.currency, p.currency
                )
            },
        }
    }

    fn kind_check(&self, l: &StatementLine) -> Check {
        match self.lines {
            LineRule::Payments => check(
                l.ledger_candidate(),
                || "a PAYMENT line".into(),
                || {
                    if l.kind != LineKind::Payment {
                        format!("it is a {} line", l.kind.as_str())
                    } else {
                        "it is a credit on a bank account (matched three-way, not to payments)"
                            .into()
                    }
                },
            ),
            LineRule::Returns => check(
                l.kind == LineKind::Refund,
                || "a return or reversal".into(),
                || format!("it is a {} line, not a return", l.kind.as_str()),
            ),
        }
    }

    fn recipient_check(&self, p: &Payment, l: &StatementLine) -> Check {
        check(
            self.recipient_key(&p.recipient) == self.recipient_key(&l.recipient),
            || "same recipient".into(),
            || "recipient differs".into(),
        )
    }

    fn amount_check(&self, p: &Payment, l: &StatementLine) -> Check {
        let paid = self.line_amount(l);
        let line = money::format_minor(paid, l.currency);
        let pay = money::format_minor(p.amount_minor, p.currency);
        match self.amount {
            AmountRule::Any => Check {
                ok: true,
                text: if paid == p.amount_minor && l.currency == p.currency {
                    format!("amount {line} (any amount counts)")
                } else {
                    format!("amount {line} vs {pay} (any amount counts)")
                },
            },
            AmountRule::Returned => check(
                self.amount_ok(p, l),
                || format!("{line} came back, the payment's amount"),
                || format!("{line} came back, the payment was {pay}"),
            ),
            AmountRule::Within(tol) => {
                let tol = money::format_minor(tol, p.currency);
                check(
                    self.amount_ok(p, l),
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

    fn window_check(&self, p: &Payment, l: &StatementLine) -> Check {
        let Some(s) = p.started_at else {
            return Check {
                ok: false,
                text: "the payment was never sent".into(),
            };
        };
        let (a, b) = (s - self.window.0, s + self.window.1);
        let range = format!(
            "{} .. {}",
            timeparse::format_utc(a),
            timeparse::format_utc(b)
        );
        let booked = match l.booked_day {
            Some(d) => format!("booked on {d} (date only: the whole day)"),
            None => format!("booked {}", timeparse::format_utc(l.booked_at)),
        };
        check(
            self.window_ok(p, l),
            || format!("{booked} inside the window {range}"),
            || format!("{booked} outside the window {range}"),
        )
    }

    /// The same criteria as Polars join predicates over the frames
    /// [`super::frames::fuzzy_pairs`] builds: line columns `s_rcpt` (recipient key), `s_cur`,
    /// `s_amt` ([`Fuzzy::line_amount`]), `s_at`, `s_to` (booking interval) and payment columns
    /// `p_rcpt`, `p_cur`, `p_amt`, `p_start`. Lines and payments are filtered by
    /// [`Fuzzy::line_qualifies`] and `started_at` before the join.
    pub fn predicates(&self) -> Vec<Expr> {
        let mut preds = vec![col("s_rcpt").eq(col("p_rcpt"))];
        if self.same_currency {
            preds.push(col("s_cur").eq(col("p_cur")));
        }
        match self.amount {
            AmountRule::Within(0) | AmountRule::Returned => {
                preds.push(col("s_amt").eq(col("p_amt")))
            }
            AmountRule::Within(t) => {
                preds.push(col("s_amt").gt_eq(col("p_amt") - lit(t)));
                preds.push(col("s_amt").lt_eq(col("p_amt") + lit(t)));
            }
            AmountRule::Any => {}
        }
        // Overlap of [s_at, s_to] with [p_start − before, p_start + after].
        preds.push(col("s_to").gt_eq(col("p_start") - lit(self.window.0)));
        preds.push(col("s_at").lt_eq(col("p_start") + lit(self.window.1)));
        preds
    }
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
    let exact = Fuzzy {
        steps: &pass.normalize,
        window: (0, 0), // not checked
        amount: if l.kind == LineKind::Refund {
            AmountRule::Returned
        } else {
            AmountRule::Within(0)
        },
        same_currency: true,
        lines: LineRule::Payments,
    };
    // No kind and no window: an identifier is proof of identity; the money still counts.
    Some(vec![
        named,
        exact.recipient_check(p, l),
        exact.currency_check(p, l),
        exact.amount_check(p, l),
    ])
}

/// The criteria of a fuzzy pass (kind, recipient, currency, amount and tolerance, window);
/// `None` for an identifier pass.
pub fn fuzzy(pass: &Pass, p: &Payment, l: &StatementLine) -> Option<Vec<Check>> {
    Fuzzy::of_pass(pass).map(|f| f.checks(p, l))
}

/// The near-miss gate's criteria (see [`Fuzzy::near_miss`]).
pub fn near_miss(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<Check> {
    let fz = Fuzzy::near_miss(rules);
    if !fz.recipient_key(&l.recipient).is_empty() {
        return fz.checks(p, l);
    }
    // A line without a recipient is a look-alike by currency and amount (see
    // `matching::blank_recipient_near_misses`).
    let blank = Fuzzy {
        amount: AmountRule::Within(0),
        same_currency: true,
        ..fz
    };
    let mut checks = blank.checks(p, l);
    checks[1] = Check {
        ok: true,
        text: "the line names no recipient (it may be this payment's)".into(),
    };
    checks
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
