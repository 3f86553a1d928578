//! The matching criteria, as the matcher evaluates them. A pass kind declares its predicate once,
//! as a list of [`Condition`]s ([`crate::rules::kinds`]); a [`Criterion`] compiles that list
//! both to the Polars join that finds candidate pairs over whole frames
//! ([`Criterion::predicates`], or a hash join on the keys of a [`Condition::Named`]) and to the
//! checks of ONE pair ([`Criterion::holds`], [`Criterion::checks`]). The passes, the near-miss
//! gate, return matching, the acceptance checks of links ([`same_recipient`], [`same_money`]),
//! `recon explain` and ticket evidence all take their answer from here (each kind's unit test
//! and a property test check that the join and the scalar checks agree pair for pair).
//!
//! Values are compared in canonical form: ledger and statement values are canonicalised when
//! they are loaded ([`crate::normalize::account`]), and every recipient comparison applies the
//! pass's own normalisation steps on top.

use crate::config::LineKind;
use crate::ledger::Payment;
use crate::rules::kinds::{Accept, Condition, CurrencyRule};
use crate::rules::{Pass, RuleSet};
use crate::sources::StatementLine;
use crate::timeparse::{self, Micros};
use crate::{money, normalize};
use polars::prelude::{Expr, col, lit};
use std::borrow::Cow;

pub use crate::rules::kinds::{AmountRule, Identifiers, LineRule};

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

/// The criteria of a pass, the near-miss gate or return matching: an ordered list of
/// conditions (see [`Condition`]) with the recipient normalisation they use, and the fields the
/// frames and the one-pair checks need, resolved once from the list.
#[derive(Debug, Clone)]
pub struct Criterion<'a> {
    /// Recipient and key normalisation.
    pub steps: &'a [normalize::Step],
    /// What a pair must meet to be a candidate, in the order the checks are printed.
    pub pairing: Cow<'a, [Condition]>,
    /// Printed after `pairing`, not part of it (an identifier link's money and recipient).
    pub reported: Cow<'a, [Condition]>,
    /// How candidates become links.
    pub accept: Accept,
    /// Window before and after the payment's start (`(0, 0)` without a [`Condition::Booked`]).
    pub window: (Micros, Micros),
    line: Option<LineRule>,
    named: Option<Identifiers>,
    recipient: bool,
    amount: Option<AmountRule>,
    currency: Option<CurrencyRule>,
    booked: bool,
    /// The window opens `before` the payment's EARLIEST attempt's start
    /// ([`Payment::first_started_at`]) instead of its current one's: the near-miss gate, which
    /// decides whether the absence of evidence may resolve a payment, looks at every attempt
    /// that could have paid. It still closes `after` the current attempt's start.
    from_first: bool,
}

/// The criteria of a fuzzy pass, the near-miss gate or return matching: those found by a
/// Polars `join_where` over recipient, currency, amount and booking.
pub type Fuzzy<'a> = Criterion<'a>;

/// The near-miss gate's recipient normalisation.
pub const NEAR_MISS_STEPS: [normalize::Step; 2] =
    [normalize::Step::NoSpaces, normalize::Step::Upper];

impl<'a> Criterion<'a> {
    /// The criterion of `pairing` and `reported`, normalised with `steps`.
    ///
    /// Panics when a kind of condition appears twice in `pairing` (a kind's definition is
    /// code: its unit test finds that).
    pub fn new(
        steps: &'a [normalize::Step],
        pairing: Cow<'a, [Condition]>,
        reported: Cow<'a, [Condition]>,
        accept: Accept,
    ) -> Criterion<'a> {
        let mut c = Criterion {
            steps,
            pairing: Cow::Borrowed(&[]),
            reported,
            accept,
            window: (0, 0),
            line: None,
            named: None,
            recipient: false,
            amount: None,
            currency: None,
            booked: false,
            from_first: false,
        };
        let mut seen = Vec::new();
        for cond in pairing.iter() {
            let tag = std::mem::discriminant(cond);
            assert!(!seen.contains(&tag), "condition {cond:?} appears twice");
            seen.push(tag);
            match *cond {
                Condition::Line(r) => c.line = Some(r),
                Condition::Named(ids) => c.named = Some(ids),
                Condition::Recipient => c.recipient = true,
                Condition::Currency(r) => c.currency = Some(r),
                Condition::Amount(r) => c.amount = Some(r),
                Condition::Booked { before, after } => {
                    c.booked = true;
                    c.window = (before, after);
                }
            }
        }
        c.pairing = pairing;
        c
    }

    /// The same criterion with its window opening `before` the payment's earliest attempt's
    /// start (see [`Criterion::spans_earlier_attempts`]).
    pub fn from_first_attempt(mut self) -> Criterion<'a> {
        self.from_first = true;
        self
    }

    /// Whether the window opens before the payment's earliest attempt's start
    /// ([`Payment::first_started_at`]) rather than its current attempt's.
    pub fn spans_earlier_attempts(&self) -> bool {
        self.from_first
    }

    /// The instant the window is measured back from: the current attempt's start, or the
    /// earliest attempt's for a criterion that spans earlier attempts. `None`: never sent.
    pub fn window_opens_from(&self, p: &Payment) -> Option<Micros> {
        if self.from_first {
            p.absence_from()
        } else {
            p.started_at
        }
    }

    /// The criterion of a pass (its kind's [`crate::rules::Criteria`]).
    pub fn of(pass: &'a Pass) -> Criterion<'a> {
        Criterion::new(
            &pass.normalize,
            Cow::Borrowed(&pass.criteria.pairing),
            Cow::Borrowed(&pass.criteria.reported),
            pass.criteria.accept,
        )
    }

    /// The criterion of a pass whose candidates the `join_where` finds (a fuzzy pass); `None`
    /// for a pass that joins on identifiers.
    pub fn of_pass(pass: &'a Pass) -> Option<Criterion<'a>> {
        let c = Criterion::of(pass);
        c.named.is_none().then_some(c)
    }

    /// The identifiers whose keys the candidates are joined on, for a pass that links by
    /// identifier.
    pub fn named(&self) -> Option<Identifiers> {
        self.named
    }

    /// Whether the pairing compares recipients (and so a recipient key can block the join).
    pub fn compares_recipient(&self) -> bool {
        self.recipient
    }

    /// Whether the pairing requires the same currency.
    pub fn same_currency(&self) -> bool {
        self.currency == Some(CurrencyRule::Same)
    }

    /// The near-miss gate: the same recipient inside the evidence horizon, any amount, any
    /// currency (a provider that booked our payment in another currency is exactly the case
    /// where a retry pays twice). The horizon opens before the payment's EARLIEST attempt's
    /// start: an earlier attempt may have paid, so its lines block "no line → FAILED" too.
    pub fn near_miss(rules: &RuleSet) -> Criterion<'static> {
        let (before, after) = rules.evidence_window();
        Criterion::new(
            &NEAR_MISS_STEPS,
            Cow::Owned(vec![
                Condition::Line(LineRule::Payments),
                Condition::Recipient,
                Condition::Currency(CurrencyRule::Any),
                Condition::Amount(AmountRule::Any),
                Condition::Booked { before, after },
            ]),
            Cow::Borrowed(&[]),
            Accept::UniqueBothSides,
        )
        .from_first_attempt()
    }

    /// Return matching: a return or reversal with the payment's recipient, currency and
    /// (absolute) amount, booked from the start of the payment's window to `after` past its
    /// start. Recipients are normalised as the first pass that compares them does.
    pub fn returns(rules: &'a RuleSet, after: Micros) -> Criterion<'a> {
        let steps = rules
            .passes
            .iter()
            .find_map(|p| {
                let c = Criterion::of(p);
                c.recipient.then_some(c.steps)
            })
            .unwrap_or(&NEAR_MISS_STEPS);
        Criterion::new(
            steps,
            Cow::Owned(vec![
                Condition::Line(LineRule::Returns),
                Condition::Recipient,
                Condition::Currency(CurrencyRule::Same),
                Condition::Amount(AmountRule::Returned),
                Condition::Booked {
                    before: rules.evidence_window().0,
                    after,
                },
            ]),
            Cow::Borrowed(&[]),
            Accept::UniqueBothSides,
        )
    }

    /// Whether the line is of the kind these criteria look at.
    pub fn line_qualifies(&self, l: &StatementLine) -> bool {
        self.line.is_none_or(|r| line_is(r, l))
    }

    /// A recipient in the form it is compared in.
    pub fn recipient_key<'s>(&self, recipient: &'s str) -> Cow<'s, str> {
        normalize::apply(self.steps, recipient)
    }

    /// The line's amount in the form the pairing compares it with the payment's.
    pub fn line_amount(&self, l: &StatementLine) -> i64 {
        line_amount(self.amount.unwrap_or(AmountRule::Any), l)
    }

    /// Whether the pair meets every pairing condition (what the join keeps). A provider id
    /// recorded only on an attempt is not seen here; see [`Criterion::holds_with`].
    pub fn holds(&self, p: &Payment, l: &StatementLine) -> bool {
        self.holds_with(p, &[], l)
    }

    /// [`Criterion::holds`], with the provider ids recorded on the payment's attempts.
    pub fn holds_with(&self, p: &Payment, attempt_ids: &[&str], l: &StatementLine) -> bool {
        self.pairing
            .iter()
            .all(|c| self.holds_one(c, p, attempt_ids, l))
    }

    /// [`Criterion::holds`] without the [`Condition::Named`] (which the key join decided).
    pub(super) fn holds_besides_named(&self, p: &Payment, l: &StatementLine) -> bool {
        self.pairing
            .iter()
            .filter(|c| !matches!(c, Condition::Named(_)))
            .all(|c| self.holds_one(c, p, &[], l))
    }

    fn holds_one(&self, c: &Condition, p: &Payment, attempts: &[&str], l: &StatementLine) -> bool {
        match *c {
            Condition::Line(r) => line_is(r, l),
            Condition::Named(ids) => self.naming(ids, p, attempts, l).is_some(),
            Condition::Recipient => {
                let key = self.recipient_key(&l.recipient);
                !key.is_empty() && self.recipient_key(&p.recipient) == key
            }
            Condition::Currency(r) => currency_ok(r, p, l),
            Condition::Amount(r) => amount_ok(r, p, l),
            Condition::Booked { before, after } => {
                window_ok((before, after), self.window_opens_from(p), p, l)
            }
        }
    }

    /// Every criterion with its verdict, for explanations and ticket evidence: the pairing
    /// conditions, then the reported ones.
    pub fn checks(&self, p: &Payment, l: &StatementLine) -> Vec<Check> {
        self.pairing
            .iter()
            .chain(self.reported.iter())
            .map(|c| self.check_one(c, p, l))
            .collect()
    }

    fn check_one(&self, c: &Condition, p: &Payment, l: &StatementLine) -> Check {
        match *c {
            Condition::Line(r) => kind_check(r, l),
            Condition::Named(ids) => self.named_check(ids, p, l),
            Condition::Recipient => check(
                self.holds_one(c, p, &[], l),
                || "same recipient".into(),
                || "recipient differs".into(),
            ),
            Condition::Currency(r) => currency_check(r, p, l),
            Condition::Amount(r) => amount_check(r, p, l),
            Condition::Booked { before, after } => {
                window_check((before, after), self.window_opens_from(p), p, l)
            }
        }
    }

    /// How an identifier names the payment: `Some(true)` by reference, `Some(false)` by a
    /// provider id (the payment's or one of `attempts`), `None` when none does.
    fn naming(
        &self,
        ids: Identifiers,
        p: &Payment,
        attempts: &[&str],
        l: &StatementLine,
    ) -> Option<bool> {
        let norm = |s: &str| normalize::apply(self.steps, s).into_owned();
        let by_ref = ids.reference
            && l.reference()
                .as_deref()
                .is_some_and(|r| !norm(r).is_empty() && norm(r) == norm(&p.payment_id.text()));
        if by_ref {
            return Some(true);
        }
        let by_id = ids.provider_txn_id
            && l.provider_txn_id.as_deref().is_some_and(|id| {
                let id = norm(id);
                !id.is_empty()
                    && p.provider_payment_id
                        .as_deref()
                        .into_iter()
                        .chain(attempts.iter().copied())
                        .any(|k| norm(k) == id)
            });
        by_id.then_some(false)
    }

    fn named_check(&self, ids: Identifiers, p: &Payment, l: &StatementLine) -> Check {
        let norm = |s: &str| normalize::apply(self.steps, s).into_owned();
        let by_ref = ids.reference
            && l.reference()
                .as_deref()
                .is_some_and(|r| norm(r) == norm(&p.payment_id.text()));
        let by_id = ids.provider_txn_id
            && l.provider_txn_id.is_some()
            && l.provider_txn_id.as_deref().map(norm) == p.provider_payment_id.as_deref().map(norm);
        if by_ref {
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
            // The checks describe a pair the join found: the id is recorded on one of the
            // payment's attempts (which one pair does not show).
            Check {
                ok: true,
                text: "provider id recorded on an attempt of the payment".into(),
            }
        } else {
            Check {
                ok: false,
                text: "no identifier names the payment".into(),
            }
        }
    }

    /// The pairing as Polars join predicates over the frames `fuzzy_pairs` (in `frames.rs`,
    /// which uses this module) builds: line columns `s_rcpt` (recipient key), `s_cur`,
    /// `s_amt` ([`Criterion::line_amount`]), `s_at`, `s_to` (booking interval) and payment
    /// columns `p_rcpt`, `p_cur`, `p_amt`, `p_start` (and `p_first`, the start the window
    /// opens from, when it [spans earlier attempts](Criterion::spans_earlier_attempts)).
    /// Lines and payments are filtered by
    /// [`Criterion::line_qualifies`], a non-empty recipient key and `started_at` before the
    /// join.
    pub fn predicates(&self) -> Vec<Expr> {
        let mut preds = Vec::new();
        for c in self.pairing.iter() {
            match *c {
                // Filters of the frames' rows, or the hash join's keys.
                Condition::Line(_) | Condition::Named(_) => {}
                Condition::Recipient => preds.push(col("s_rcpt").eq(col("p_rcpt"))),
                Condition::Currency(CurrencyRule::Same) => {
                    preds.push(col("s_cur").eq(col("p_cur")))
                }
                Condition::Currency(CurrencyRule::Any) => {}
                Condition::Amount(
                    AmountRule::Within(0) | AmountRule::Returned | AmountRule::Exact,
                ) => preds.push(col("s_amt").eq(col("p_amt"))),
                Condition::Amount(AmountRule::Within(t)) => {
                    preds.push(col("s_amt").gt_eq(col("p_amt") - lit(t)));
                    preds.push(col("s_amt").lt_eq(col("p_amt") + lit(t)));
                }
                Condition::Amount(AmountRule::Any) => {}
                // Overlap of [s_at, s_to] with [p_start − before, p_start + after] (from
                // p_first − before when the window spans earlier attempts).
                Condition::Booked { before, after } => {
                    let opens = if self.from_first {
                        "p_first"
                    } else {
                        "p_start"
                    };
                    preds.push(col("s_to").gt_eq(col(opens) - lit(before)));
                    preds.push(col("s_at").lt_eq(col("p_start") + lit(after)));
                }
            }
        }
        preds
    }

    /// Whether the frames keep only payments with a `started_at` (the pairing has a window).
    pub(super) fn needs_start(&self) -> bool {
        self.booked
    }
}

fn line_is(r: LineRule, l: &StatementLine) -> bool {
    match r {
        LineRule::Payments => l.ledger_candidate(),
        LineRule::Returns => l.kind == LineKind::Refund,
    }
}

fn line_amount(r: AmountRule, l: &StatementLine) -> i64 {
    match r {
        AmountRule::Returned => l.ledger_amount().saturating_abs(),
        AmountRule::Exact if l.kind == LineKind::Refund => l.ledger_amount().saturating_abs(),
        _ => l.ledger_amount(),
    }
}

/// [`AmountRule::Exact`] as the rule it is for this line.
fn exact_for(l: &StatementLine) -> AmountRule {
    if l.kind == LineKind::Refund {
        AmountRule::Returned
    } else {
        AmountRule::Within(0)
    }
}

fn amount_ok(r: AmountRule, p: &Payment, l: &StatementLine) -> bool {
    match r {
        AmountRule::Within(tol) => (line_amount(r, l) - p.amount_minor).abs() <= tol,
        AmountRule::Any => true,
        AmountRule::Returned => line_amount(r, l) == p.amount_minor,
        AmountRule::Exact => amount_ok(exact_for(l), p, l),
    }
}

fn currency_ok(r: CurrencyRule, p: &Payment, l: &StatementLine) -> bool {
    r == CurrencyRule::Any || p.currency == l.currency
}

/// Whether `l` is booked in `[from − before, current start + after]` (`from`: the start the
/// window opens from, [`Criterion::window_opens_from`]).
fn window_ok(
    window: (Micros, Micros),
    from: Option<Micros>,
    p: &Payment,
    l: &StatementLine,
) -> bool {
    match (from, p.started_at) {
        (Some(f), Some(s)) => l.booked_within(f - window.0, s + window.1),
        _ => false,
    }
}

fn currency_check(r: CurrencyRule, p: &Payment, l: &StatementLine) -> Check {
    if r == CurrencyRule::Same {
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

fn kind_check(r: LineRule, l: &StatementLine) -> Check {
    match r {
        LineRule::Payments => check(
            l.ledger_candidate(),
            || "a PAYMENT line".into(),
            || {
                if l.kind != LineKind::Payment {
                    format!("it is a {} line", l.kind.as_str())
                } else {
                    "it is a credit on a bank account (matched three-way, not to payments)".into()
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

fn amount_check(r: AmountRule, p: &Payment, l: &StatementLine) -> Check {
    let paid = line_amount(r, l);
    let line = money::format_minor(paid, l.currency);
    let pay = money::format_minor(p.amount_minor, p.currency);
    match r {
        AmountRule::Any => Check {
            ok: true,
            text: if paid == p.amount_minor && l.currency == p.currency {
                format!("amount {line} (any amount counts)")
            } else {
                format!("amount {line} vs {pay} (any amount counts)")
            },
        },
        AmountRule::Returned => check(
            amount_ok(r, p, l),
            || format!("{line} came back, the payment's amount"),
            || format!("{line} came back, the payment was {pay}"),
        ),
        AmountRule::Within(tol) => {
            let tol = money::format_minor(tol, p.currency);
            check(
                amount_ok(r, p, l),
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
        AmountRule::Exact => amount_check(exact_for(l), p, l),
    }
}

fn window_check(
    window: (Micros, Micros),
    from: Option<Micros>,
    p: &Payment,
    l: &StatementLine,
) -> Check {
    let (Some(f), Some(s)) = (from, p.started_at) else {
        return Check {
            ok: false,
            text: "the payment was never sent".into(),
        };
    };
    let (a, b) = (f - window.0, s + window.1);
    let range = format!(
        "{} .. {}",
        timeparse::format_utc(a),
        timeparse::format_utc(b)
    );
    let booked = match l.booked_day {
        Some(d) => format!("booked on {d} (date only: the whole day)"),
        None => format!("booked {}", timeparse::format_utc(l.booked_at)),
    };
    // The words of a window from the current attempt's start stay as they were (fingerprints
    // of existing tickets); one that opens at an earlier attempt says so.
    let range = if f < s {
        format!(
            "{range} (from its first attempt's start {})",
            timeparse::format_utc(f)
        )
    } else {
        range
    };
    check(
        window_ok(window, from, p, l),
        || format!("{booked} inside the window {range}"),
        || format!("{booked} outside the window {range}"),
    )
}

/// The checks of a pair found by pass `pass` (its kind's pairing, then what it reports).
pub fn pass_checks(pass: &Pass, p: &Payment, l: &StatementLine) -> Vec<Check> {
    Criterion::of(pass).checks(p, l)
}

/// The near-miss gate's criteria (see [`Criterion::near_miss`]).
pub fn near_miss(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<Check> {
    let fz = Criterion::near_miss(rules);
    if !fz.recipient_key(&l.recipient).is_empty() {
        return fz.checks(p, l);
    }
    // A line without a recipient is a look-alike by currency and amount (see
    // `matching::blank_recipient_near_misses`).
    let (before, after) = fz.window;
    let blank = Criterion::new(
        fz.steps,
        Cow::Owned(vec![
            Condition::Line(LineRule::Payments),
            Condition::Recipient,
            Condition::Currency(CurrencyRule::Same),
            Condition::Amount(AmountRule::Within(0)),
            Condition::Booked { before, after },
        ]),
        Cow::Borrowed(&[]),
        Accept::UniqueBothSides,
    )
    .from_first_attempt();
    let mut checks = blank.checks(p, l);
    checks[1] = Check {
        ok: true,
        text: "the line names no recipient (it may be this payment's)".into(),
    };
    checks
}

/// Every fuzzy pass's checks of a pair (the passes that find look-alikes by recipient, money
/// and booking), by pass index.
pub fn fuzzy_passes(rules: &RuleSet, p: &Payment, l: &StatementLine) -> Vec<(usize, Vec<Check>)> {
    rules
        .passes
        .iter()
        .enumerate()
        .filter_map(|(i, pass)| Criterion::of_pass(pass).map(|c| (i, c.checks(p, l))))
        .collect()
}

/// Whether an identifier pass of `rules` names `p` on `l` (by reference or by the provider id
/// recorded on the payment; attempts are not seen).
pub fn named_by_a_pass(rules: &RuleSet, p: &Payment, l: &StatementLine) -> bool {
    rules.passes.iter().any(|pass| {
        let c = Criterion::of(pass);
        c.named
            .is_some_and(|ids| c.naming(ids, p, &[], l).is_some())
    })
}
