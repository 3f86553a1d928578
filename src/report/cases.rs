//! Cases: what one human decision settles (DESIGN.md "Cases").
//!
//! A run's review rows (every row whose outcome raises a ticket) are grouped into cases: two
//! rows belong to one case when they share a payment or a statement line, transitively. So
//! one line that fits two payments (three AMBIGUOUS rows: the line, payment 1, payment 2) is
//! one case, a near miss (the payment and its look-alike line) is one case, a return (the
//! payment with its line and the money that came back) and a duplicate are one row and one
//! case each, and a single-sided exception (an orphan line, a payment missing at the
//! provider) is a case of its own.
//!
//! Each case has
//! - a **stable key** (`C-` and 16 hex digits of a sha256): from the identities of its
//!   payments (sorted payment ids), or, for a case of lines alone, of its lines (source and
//!   line id, which survive re-deliveries: a line's id is its provider id or its content id).
//!   Re-runs of the same evidence give the same key; a case whose payments change (a third
//!   payment joins an ambiguity) is another decision and gets another key;
//! - a **severity** (its most severe row's) and the **money at risk**: the sum of its
//!   payments' amounts per currency (what a wrong decision could pay twice or lose), or of its
//!   lines' for a case of lines alone, as absolute values; an ambiguity risks no more than its
//!   lines (one 500.00 line that fits two 500.00 payments: 500.00);
//! - one sentence of **why**;
//! - its **candidates**, numbered from 1: every (payment, line) pair its rows name, sorted
//!   by payment id then line id, so `confirm 2` means the same pair as long as the evidence
//!   is the same;
//! - the **fingerprint** of the evidence a decision would be made on: the sha256 of the
//!   decision-relevant fields of its rows (outcomes, payments' ids, amounts, masked
//!   recipients and starts; lines' ids, amounts, bookings, references and kinds), not of
//!   what changes without the evidence changing (file names, line numbers, the wording of
//!   `detail`, the payment's status, which a reviewer's own decision changes).
//!
//! Cases are listed most severe first: by [`Severity`], then the larger money at risk, then
//! the older case, then the key. With a reporting currency (`reporting_currency`), the money
//! at risk is compared by its **value in that currency** ([`crate::rates`]): the cases with a
//! value first, largest first, then those with a currency that has no rate (among them by
//! number of units, as without rates). Without one, amounts of different currencies are
//! compared by their number of units. No outcome is special-cased: a new critical outcome
//! sorts first by its severity alone. The email, the Decide and Cases sheets and the HTML
//! report list cases in this order; `recon cases list` orders the stored cases by the same
//! severity and value; the family sheets and sections list review rows by the same key
//! ([`order_key`], a row's money being the amount it puts at risk).

use super::{Item, ItemLine, Money};
use crate::model::{Id, LineKind, Outcome, Severity, Status};
use crate::rates::Valuation;
use rust_decimal::Decimal;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What kind of decision a case asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CaseKind {
    /// Payments and lines that could pair in more than one way: which line is which payment's.
    Ambiguity,
    /// An unresolved payment and a look-alike line (same recipient, other amount or currency).
    NearMiss,
    /// A payment whose money came back.
    Return,
    /// A payment with two or more provider lines.
    Duplicate,
    /// Any other review row: one payment or one line, and what is wrong with it.
    Exception,
}

impl CaseKind {
    /// Name in the reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseKind::Ambiguity => "ambiguity",
            CaseKind::NearMiss => "near miss",
            CaseKind::Return => "return",
            CaseKind::Duplicate => "duplicate",
            CaseKind::Exception => "exception",
        }
    }

    /// The kind named `s` ([`CaseKind::as_str`]).
    pub fn parse(s: &str) -> Option<CaseKind> {
        [
            CaseKind::Ambiguity,
            CaseKind::NearMiss,
            CaseKind::Return,
            CaseKind::Duplicate,
            CaseKind::Exception,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// A reviewer's decision about a case (the Decide sheet's `decision` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Decision {
    /// `confirm N`: candidate N is the match (the line is that payment's).
    Confirm(u32),
    /// `failed`: the payment never left; it may be retried.
    Failed,
    /// `succeeded`: the payment was paid.
    Succeeded,
    /// `dismiss: <reason>`: nothing to do, for one of the job's `dismiss_reasons`; stays
    /// dismissed while the evidence is unchanged. The reason travels beside the decision
    /// ([`Decision::parse_with_reason`]).
    Dismiss,
    /// `escalate`: someone else must decide; the case stays open.
    Escalate,
    /// `accept difference`: the case's one line is its payment's, the amount difference
    /// accepted, so later runs match the pair (within `write_off_limit` by the job's
    /// `approvals`; above it only with a second reviewer's approval).
    AcceptDifference,
}

impl Decision {
    /// The text in the sheet: `confirm 2`, `failed`, `succeeded`, `dismiss`, `escalate`.
    pub fn text(self) -> String {
        match self {
            Decision::Confirm(n) => format!("confirm {n}"),
            Decision::Failed => "failed".into(),
            Decision::Succeeded => "succeeded".into(),
            Decision::Dismiss => "dismiss".into(),
            Decision::Escalate => "escalate".into(),
            Decision::AcceptDifference => "accept difference".into(),
        }
    }

    /// The text with its reason, as the sheet offers it and the decision is stored:
    /// `dismiss: written off`; without a reason [`Decision::text`].
    pub fn text_with(self, reason: Option<&str>) -> String {
        match reason {
            Some(r) => format!("{}: {r}", self.text()),
            None => self.text(),
        }
    }

    /// The decision `s` spells with the reason after a colon, if any (`dismiss: written off`
    /// → (`Dismiss`, `written off`), blanks in the reason collapsed; `dismiss:` has none).
    /// Which reasons a decision takes is the caller's to check.
    pub fn parse_with_reason(s: &str) -> Option<(Decision, Option<String>)> {
        let (head, reason) = match s.split_once(':') {
            Some((h, r)) => (h, Some(r.split_whitespace().collect::<Vec<_>>().join(" "))),
            None => (s, None),
        };
        let d = Decision::parse(head)?;
        Some((d, reason.filter(|r| !r.is_empty())))
    }

    /// The decision `s` spells (case and surrounding blanks ignored, one or more blanks
    /// between `confirm` and its number), or `None`.
    pub fn parse(s: &str) -> Option<Decision> {
        let s = s.trim().to_ascii_lowercase();
        let mut words = s.split_whitespace();
        let d = match (words.next()?, words.next()) {
            ("confirm", Some(n)) => {
                let n: u32 = n.parse().ok().filter(|n| *n > 0)?;
                Decision::Confirm(n)
            }
            ("failed", None) => Decision::Failed,
            ("succeeded", None) => Decision::Succeeded,
            ("dismiss", None) => Decision::Dismiss,
            ("escalate", None) => Decision::Escalate,
            ("accept", Some("difference")) => Decision::AcceptDifference,
            _ => return None,
        };
        words.next().is_none().then_some(d)
    }
}

/// The decisions a case offers, in the drop-down's order: `confirm 1` … `confirm N` for an
/// ambiguity or a near miss with N candidates; `failed` and `succeeded` when the case is about
/// exactly one payment and its status is one a human may settle (UNKNOWN or REVIEW: recon
/// never moves a payment out of SUCCEEDED, FAILED or PENDING, nor one a worker may still be
/// sending); `accept difference` when the case's difference is one of amount alone
/// (`amount_difference`: one candidate, its line in the payment's currency, another amount);
/// `dismiss` and `escalate` always. One definition for the sheet that offers them and for
/// `recon decisions apply`, which refuses anything else.
pub fn choices(
    kind: CaseKind,
    candidates: usize,
    payment_statuses: &[Status],
    amount_difference: bool,
) -> Vec<Decision> {
    let mut out = Vec::new();
    if matches!(kind, CaseKind::Ambiguity | CaseKind::NearMiss) {
        out.extend((1..=candidates as u32).map(Decision::Confirm));
    }
    if amount_difference {
        out.push(Decision::AcceptDifference);
    }
    if !matches!(kind, CaseKind::Return | CaseKind::Duplicate)
        && let [s] = payment_statuses
        && matches!(s, Status::Unknown | Status::Review)
    {
        out.extend([Decision::Failed, Decision::Succeeded]);
    }
    out.extend([Decision::Dismiss, Decision::Escalate]);
    out
}

/// What earlier decisions left on the cases, as the reports show them: the cases settled on
/// the evidence they still have (dismissed or decided: not offered for a decision again), and
/// a short status per case (`escalated by …`, `waiting for a second reviewer: failed by …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks {
    /// (case key, fingerprint) of every settled case.
    pub settled: std::collections::HashSet<(String, String)>,
    /// Case key → status text.
    pub status: HashMap<String, String>,
    /// The job's `dismiss_reasons`: the sheet offers `dismiss: <reason>` for each (the
    /// default list when the view was made without the job's, as a dry run's).
    pub dismiss_reasons: Vec<String>,
    /// Case key → what changed about it since the last morning (new, reopened, escalated,
    /// waiting for an approval, after a decision), found in the store once the run stored its
    /// cases; empty before that (the files written beside the commit) and for a dry run.
    pub markers: super::markers::CaseMarkers,
}

impl Default for Marks {
    fn default() -> Self {
        Marks {
            settled: Default::default(),
            status: Default::default(),
            dismiss_reasons: crate::config::default_dismiss_reasons(),
            markers: Default::default(),
        }
    }
}

impl Marks {
    /// What changed about `case` since the last morning (empty: nothing).
    pub fn markers_of(&self, case: &Case) -> &[super::markers::Marker] {
        self.markers.of(&case.key)
    }

    /// Whether `case` was settled on the evidence it has now.
    pub fn is_settled(&self, case: &Case) -> bool {
        self.settled
            .contains(&(case.key.to_string(), case.fingerprint.clone()))
    }

    /// Both marks in one (a range's days).
    pub fn extend(&mut self, other: Marks) {
        self.settled.extend(other.settled);
        self.status.extend(other.status);
        self.markers.extend(other.markers);
        // One job's days: the same reasons; the day's are the job's.
        self.dismiss_reasons = other.dismiss_reasons;
    }

    /// The texts the sheet offers for `decisions`: `dismiss` as `dismiss: <reason>`, one per
    /// reason, the others as they are ([`Decision::text`]).
    pub fn offered_texts(&self, decisions: &[Decision]) -> Vec<String> {
        decisions
            .iter()
            .flat_map(|d| match d {
                Decision::Dismiss => self
                    .dismiss_reasons
                    .iter()
                    .map(|r| d.text_with(Some(r)))
                    .collect::<Vec<_>>(),
                _ => vec![d.text()],
            })
            .collect()
    }
}

/// A (payment, line) pair a case's rows name: one way the decision could go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// 1, 2, … in the case's order (payment id, then line id).
    pub number: u32,
    /// The payment.
    pub payment_id: Id,
    /// The line.
    pub line: ItemLine,
}

impl Candidate {
    /// `2: P-7 ↔ L-9 (99.00 EUR, 2026-11-10T10:05:00Z)`, a return marked as such. Raw
    /// statement text: escape it for the format it goes into.
    pub fn text(&self) -> String {
        format!(
            "{}: {} ↔ {}{} ({} {}, {})",
            self.number,
            self.payment_id,
            self.line.id,
            if self.line.kind == LineKind::Payment {
                ""
            } else {
                " [return]"
            },
            self.line.amount.text(),
            self.line.amount.currency,
            self.line.booked_text()
        )
    }
}

/// One decision for a human: the review rows it settles and what a reviewer needs to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Stable key (see the module docs): `C-` and 16 hex digits, inline.
    pub key: compact_str::CompactString,
    /// What kind of decision it is.
    pub kind: CaseKind,
    /// The most severe row's severity.
    pub severity: Severity,
    /// The most severe row's outcome.
    pub outcome: Outcome,
    /// Money at risk per currency (absolute, summed), sorted by currency.
    pub at_risk: Vec<Money>,
    /// The money at risk in the reporting currency, for ordering and totals only (at
    /// [`crate::rates::VALUE_DECIMALS`] decimals; round it for display): `None` without a
    /// reporting currency or when one of its currencies has no rate.
    pub value: Option<Decimal>,
    /// The rows: indices into the view's items, most severe first.
    pub members: Vec<usize>,
    /// The payments, sorted.
    pub payments: Vec<Id>,
    /// The lines' ids, sorted and distinct (inline: a provider id fits).
    pub lines: Vec<compact_str::CompactString>,
    /// The lines' statement references that name none of the case's payments, sorted and
    /// distinct (raw statement text): what identifies a line the ledger does not know.
    pub references: Vec<String>,
    /// Masked recipient of the most severe row.
    pub recipient: compact_str::CompactString,
    /// Numbered candidates.
    pub candidates: Vec<Candidate>,
    /// The oldest row's age in days.
    pub age_days: i64,
    /// sha256 (hex) of the decision-relevant evidence (see the module docs).
    pub fingerprint: String,
}

impl Case {
    /// One sentence (raw text: escape it for the format it goes into), made from its rows
    /// (`items`: the view's, whose indices `members` holds) when it is shown, not held: a
    /// night of 800,000 cases held 100 MB of them.
    pub fn why(&self, items: &[Item]) -> String {
        let rows: Vec<&Item> = self.members.iter().map(|&i| &items[i]).collect();
        let lines: BTreeSet<(&str, &str)> = rows
            .iter()
            .flat_map(|r| r.lines.iter().map(line_identity))
            .collect();
        why(self.kind, &rows, self.payments.len(), lines.len())
    }

    /// The money at risk as text: `250.00 EUR` (`, ` between currencies).
    pub fn amount_text(&self) -> String {
        self.at_risk
            .iter()
            .map(|m| format!("{} {}", m.text(), m.currency))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What it is: the most severe row's outcome, and the kind when the outcome does not say
    /// it (`AMBIGUOUS (near miss)`, `AMOUNT_MISMATCH (ambiguity)`).
    pub fn what(&self) -> String {
        match self.kind {
            CaseKind::NearMiss | CaseKind::Ambiguity if self.outcome != Outcome::Ambiguous => {
                format!("{} ({})", self.outcome.as_str(), self.kind.as_str())
            }
            CaseKind::NearMiss => format!("{} ({})", self.outcome.as_str(), self.kind.as_str()),
            _ => self.outcome.as_str().to_string(),
        }
    }

    /// Who and what: `payment P-1, line L-1` (the first few of each; raw text).
    pub fn whose(&self) -> String {
        const SHOWN: usize = 3;
        let mut parts = Vec::new();
        let list = |what: &str, ids: Vec<String>| {
            let n = ids.len();
            let mut s = format!("{what}{} ", if n > 1 { "s" } else { "" });
            s.push_str(&ids.into_iter().take(SHOWN).collect::<Vec<_>>().join(", "));
            if n > SHOWN {
                s.push_str(&format!(" and {} more", n - SHOWN));
            }
            s
        };
        if !self.payments.is_empty() {
            parts.push(list(
                "payment",
                self.payments.iter().map(|p| p.to_string()).collect(),
            ));
        }
        if !self.lines.is_empty() {
            let mut lines = list("line", self.lines.iter().map(|l| l.to_string()).collect());
            if !self.references.is_empty() {
                let refs: Vec<&str> = self.references.iter().map(String::as_str).collect();
                lines.push_str(&format!(
                    " (reference {}{})",
                    refs[..refs.len().min(SHOWN)].join(", "),
                    if refs.len() > SHOWN { ", …" } else { "" }
                ));
            }
            parts.push(lines);
        }
        parts.join(", ")
    }

    /// The statuses of the case's payments (one per payment, as its rows show it).
    pub fn payment_statuses(&self, items: &[Item]) -> Vec<Status> {
        let mut seen: BTreeMap<&Id, Status> = BTreeMap::new();
        for &i in &self.members {
            if let (Some(p), Some(s)) = (&items[i].payment_id, items[i].status) {
                seen.entry(p).or_insert(s);
            }
        }
        self.payments
            .iter()
            .map(|p| seen.get(p).copied().unwrap_or(Status::Pending))
            .collect()
    }

    /// The decisions this case offers ([`choices`]); `items` are the view's.
    pub fn choices(&self, items: &[Item]) -> Vec<Decision> {
        choices(
            self.kind,
            self.candidates.len(),
            &self.payment_statuses(items),
            self.amount_difference(items).is_some(),
        )
    }

    /// The payment's amount of the case's one candidate, when the case's difference is one of
    /// amount alone: an AMOUNT_MISMATCH or a near miss with exactly one candidate whose line is
    /// in the payment's currency with another amount. `items` are the view's.
    pub fn amount_difference(&self, items: &[Item]) -> Option<Money> {
        if self.kind != CaseKind::NearMiss && self.outcome != Outcome::AmountMismatch {
            return None;
        }
        let [c] = self.candidates.as_slice() else {
            return None;
        };
        let paid = self
            .members
            .iter()
            .map(|&i| &items[i])
            .filter(|i| i.payment_id.as_ref() == Some(&c.payment_id))
            .find_map(|i| i.amount)?;
        // Same sign: a bank line books a payment sent as a debit, and its difference is not
        // the booked amounts' (such a line is confirmed instead).
        (paid.currency == c.line.amount.currency
            && paid.minor != c.line.amount.minor
            && paid.minor.signum() == c.line.amount.minor.signum())
        .then_some(paid)
    }

    /// The value in the reporting currency as people read it: `3,069.17 EUR`, rounded to the
    /// currency's minor unit; `no rate for JPY` when it has none.
    pub fn value_text(&self, v: &Valuation) -> String {
        match self.value {
            Some(d) => format!("{} {}", display_value(d, &v.currency), v.currency),
            None => {
                let missing: Vec<&str> = self
                    .at_risk
                    .iter()
                    .map(|m| m.currency)
                    .filter(|c| !v.has_rate(c))
                    .collect();
                format!("no rate for {}", missing.join(", "))
            }
        }
    }

    /// The largest amount at risk, by number of units (the ordering's heuristic without
    /// exchange rates).
    pub fn weight(&self) -> rust_decimal::Decimal {
        self.at_risk
            .iter()
            .map(|m| m.decimal().abs())
            .max()
            .unwrap_or_default()
    }
}

/// Union-find over item positions.
struct Groups(Vec<usize>);

impl Groups {
    fn find(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            // The smaller position is the root: groups come out in item order.
            self.0[a.max(b)] = a.min(b);
        }
    }
}

/// A line's identity: its source and id (two sources may use the same provider id).
fn line_identity(l: &ItemLine) -> (&str, &str) {
    (&l.origin.source, l.id.as_str())
}

/// A value rounded to `currency`'s minor unit, with all its decimals (`3069.10`).
pub fn rounded_value(value: Decimal, currency: &str) -> Decimal {
    let exp = super::exponent(currency);
    let mut d = value.round_dp(exp);
    d.rescale(exp);
    d
}

/// A value rounded to `currency`'s minor unit and grouped for reading (`3,069.17`).
pub fn display_value(value: Decimal, currency: &str) -> String {
    crate::money::grouped(&rounded_value(value, currency))
}

/// The value of `at_risk` in the reporting currency (the sum of each currency's value), or
/// `None` when a currency has no rate.
fn value_of(at_risk: &[Money], v: &Valuation) -> Option<Decimal> {
    at_risk.iter().try_fold(Decimal::ZERO, |sum, m| {
        sum.checked_add(v.value(m.decimal(), m.currency)?)
    })
}

/// Groups the review rows of `items` (sorted most severe first) into cases, most severe first
/// (see the module docs); `valuation` values them in the reporting currency.
pub fn group(items: &[Item], valuation: Option<&Valuation>) -> Vec<Case> {
    let review: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].severity.is_some())
        .collect();
    let mut groups = Groups((0..review.len()).collect());
    {
        let mut by_payment: HashMap<&Id, usize> = HashMap::new();
        let mut by_line: HashMap<(&str, &str), usize> = HashMap::new();
        for (k, &i) in review.iter().enumerate() {
            let item = &items[i];
            if let Some(p) = &item.payment_id {
                let first = *by_payment.entry(p).or_insert(k);
                groups.union(first, k);
            }
            for l in &item.lines {
                let first = *by_line.entry(line_identity(l)).or_insert(k);
                groups.union(first, k);
            }
        }
    }
    // Each review row by its group's root (rows of one group in row order), so the groups
    // are cut from one sorted list instead of a map of small vectors.
    let mut by_root: Vec<(usize, usize)> = review
        .iter()
        .enumerate()
        .map(|(k, &i)| (groups.find(k), i))
        .collect();
    by_root.sort_unstable();
    let mut cases: Vec<Case> = by_root
        .chunk_by(|a, b| a.0 == b.0)
        .map(|g| case_of(items, g.iter().map(|&(_, i)| i).collect()))
        .collect();
    drop(by_root);
    if let Some(v) = valuation {
        for c in &mut cases {
            c.value = value_of(&c.at_risk, v);
        }
    }
    // Ties are broken by the key (two cases share no payment and no line; rows of neither
    // are keyed by their rule, and those of one rule keep the rows' order): sorted by it
    // first, in place, then by the ordering key with a stable sort. The ordering key is
    // computed once per case (the weight looks the currency up), not twice per comparison.
    let first = |c: &Case| c.members.iter().min().copied();
    cases.sort_unstable_by(|a, b| a.key.cmp(&b.key).then_with(|| first(a).cmp(&first(b))));
    cases.sort_by_cached_key(|c| {
        order_key(
            Some(c.severity),
            c.value,
            c.weight(),
            valuation.is_some(),
            c.age_days,
        )
    });
    cases
}

/// The leading part of the one ordering of cases and review rows (see [`order_key`]); the
/// caller adds its own last tie-break (a case's key, a row's ids).
pub type OrderKey = (
    bool,
    Option<Severity>,
    bool,
    std::cmp::Reverse<Decimal>,
    std::cmp::Reverse<i64>,
);

/// The one ordering of everything that lists cases or review rows (the email, the Decide,
/// Cases and family sheets, report.html, `recon cases list`): by `severity` (rows without one
/// last); with a reporting currency (`valuing`) the valued before the unvalued; then the money,
/// largest first: the `value` in the reporting currency, or `units` (the number of units of the
/// largest amount) without a value; then the older (`age_days`). Sort ascending by it, then by
/// a key of the caller's for a stable order.
pub fn order_key(
    severity: Option<Severity>,
    value: Option<Decimal>,
    units: Decimal,
    valuing: bool,
    age_days: i64,
) -> OrderKey {
    (
        severity.is_none(),
        severity,
        valuing && value.is_none(),
        std::cmp::Reverse(value.unwrap_or(units)),
        std::cmp::Reverse(age_days),
    )
}

/// Money at risk in the reporting currency, per severity and overall, of some cases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueTotals {
    /// Severity → the sum of its valued cases' values.
    pub by_severity: BTreeMap<Severity, Decimal>,
    /// The sum of every valued case's value.
    pub total: Decimal,
    /// Cases in the totals.
    pub valued: usize,
    /// Cases left out: a currency without a rate.
    pub unvalued: usize,
    /// Those currencies.
    pub missing: BTreeSet<&'static str>,
}

/// The totals of `cases` in the reporting currency of `v`.
pub fn value_totals<'a>(cases: impl IntoIterator<Item = &'a Case>, v: &Valuation) -> ValueTotals {
    let mut t = ValueTotals::default();
    for c in cases {
        match c.value {
            Some(x) => {
                t.valued += 1;
                t.total = t.total.saturating_add(x);
                let s = t.by_severity.entry(c.severity).or_default();
                *s = s.saturating_add(x);
            }
            None => {
                t.unvalued += 1;
                t.missing.extend(
                    c.at_risk
                        .iter()
                        .map(|m| m.currency)
                        .filter(|cur| !v.has_rate(cur)),
                );
            }
        }
    }
    t
}

/// What a reader must know of a currency without a rate (the warning, once a currency).
pub fn no_rate_warning(currency: &str) -> String {
    format!(
        "no rate for {currency}: its cases are ordered after valued ones and left out of the total"
    )
}

/// The case of `members` (item positions in item order, so the most severe first).
fn case_of(items: &[Item], mut members: Vec<usize>) -> Case {
    // The lead row: the most severe, FAILED_BUT_PAID and PAID_WHILE_PENDING before another
    // critical outcome ([`super::rank`]), then in the rows' order.
    members.sort_by_key(|&i| (items[i].severity, super::rank(items[i].outcome), i));
    let rows: Vec<&Item> = members.iter().map(|&i| &items[i]).collect();
    let lead = rows[0];
    let severity = rows
        .iter()
        .filter_map(|r| r.severity)
        .min()
        .unwrap_or(Severity::Medium);
    let payments: BTreeSet<&Id> = rows.iter().filter_map(|r| r.payment_id.as_ref()).collect();
    let line_ids: BTreeSet<(&str, &str)> = rows
        .iter()
        .flat_map(|r| r.lines.iter().map(line_identity))
        .collect();
    let key = {
        let mut h = Sha256::new();
        if payments.is_empty() && line_ids.is_empty() {
            // A row of neither (a payout status record that names no payment): its rule
            // names the record's block and id.
            h.update(format!("R\u{1f}{}\u{1e}", lead.rule).as_bytes());
        } else if payments.is_empty() {
            for (source, id) in &line_ids {
                h.update(format!("L\u{1f}{source}\u{1f}{id}\u{1e}").as_bytes());
            }
        } else {
            for p in &payments {
                h.update(format!("P\u{1f}{p}\u{1e}").as_bytes());
            }
        }
        compact_str::format_compact!("C-{}", &hex::encode(h.finalize())[..16])
    };
    let ambiguous = |r: &&Item| r.outcome == Outcome::Ambiguous;
    let near_miss = |r: &&Item| ambiguous(r) && &*r.rule == "near_miss";
    let kind = match lead.outcome {
        Outcome::Returned => CaseKind::Return,
        Outcome::DuplicateAtProvider => CaseKind::Duplicate,
        _ if rows.iter().any(|r| ambiguous(r) && !near_miss(r)) => CaseKind::Ambiguity,
        _ if rows.iter().any(near_miss) => CaseKind::NearMiss,
        _ => CaseKind::Exception,
    };
    // Money at risk: the payments' amounts, or the lines' when no payment is in the case;
    // each payment and line counted once. An ambiguity puts no more at risk than the lines
    // it is about: one line that fits two payments of its amount risks that amount once.
    let mut by_payments: BTreeMap<&'static str, i64> = BTreeMap::new();
    let mut by_lines: BTreeMap<&'static str, i64> = BTreeMap::new();
    let add = |sums: &mut BTreeMap<&'static str, i64>, m: Money| {
        let s = sums.entry(m.currency).or_default();
        *s = s.saturating_add(m.minor.saturating_abs());
    };
    let mut seen = BTreeSet::new();
    for l in rows.iter().flat_map(|r| r.lines.iter()) {
        if seen.insert(line_identity(l)) {
            add(&mut by_lines, l.amount);
        }
    }
    let mut seen = BTreeSet::new();
    for r in &rows {
        if let (Some(p), Some(m)) = (&r.payment_id, r.amount)
            && seen.insert(p)
        {
            add(&mut by_payments, m);
        }
    }
    let sums = if by_payments.is_empty() {
        by_lines
    } else if kind == CaseKind::Ambiguity {
        by_payments
            .into_iter()
            .map(|(c, p)| (c, by_lines.get(c).map_or(p, |l| p.min(*l))))
            .collect()
    } else {
        by_payments
    };
    let at_risk = sums
        .into_iter()
        .map(|(currency, minor)| Money { minor, currency })
        .collect();
    // Candidates: the (payment, line) pairs the payment rows name, each once.
    let mut pairs: BTreeMap<(Id, (String, String)), ItemLine> = BTreeMap::new();
    for r in &rows {
        if let Some(p) = &r.payment_id {
            for l in &r.lines {
                let (s, id) = line_identity(l);
                pairs
                    .entry((p.clone(), (id.to_string(), s.to_string())))
                    .or_insert_with(|| l.clone());
            }
        }
    }
    let candidates: Vec<Candidate> = pairs
        .into_iter()
        .enumerate()
        .map(|(n, ((payment_id, _), line))| Candidate {
            number: n as u32 + 1,
            payment_id,
            line,
        })
        .collect();
    let lines: Vec<compact_str::CompactString> = line_ids
        .iter()
        .map(|(_, id)| compact_str::CompactString::new(id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let references: Vec<String> = rows
        .iter()
        .flat_map(|r| r.lines.iter())
        .filter_map(|l| l.reference.as_ref())
        .filter(|r| !payments.contains(r))
        .map(Id::to_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Case {
        key,
        kind,
        severity,
        outcome: lead.outcome,
        at_risk,
        payments: payments.into_iter().cloned().collect(),
        lines,
        references,
        recipient: lead.recipient.clone(),
        candidates,
        value: None,
        age_days: rows.iter().map(|r| r.age_days).max().unwrap_or(0),
        fingerprint: fingerprint(&rows),
        members,
    }
}

/// `text` as a sentence: capital first letter, a full stop at the end.
fn sentence(text: &str) -> String {
    let text = text.trim();
    let mut chars = text.chars();
    let mut s: String = match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => return String::new(),
    };
    if !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

fn money_text(m: Money) -> String {
    format!("{} {}", m.text(), m.currency)
}

/// One sentence of why the case needs a human.
fn why(kind: CaseKind, rows: &[&Item], n_payments: usize, n_lines: usize) -> String {
    let lead = rows[0];
    match kind {
        CaseKind::Ambiguity if n_lines == 1 && n_payments > 1 => format!(
            "Line {} ({}) fits {n_payments} payments: pick the one it paid.",
            lead.lines.first().map_or("", |l| l.id.as_str()),
            lead.lines
                .first()
                .map(|l| money_text(l.amount))
                .unwrap_or_default(),
        ),
        CaseKind::Ambiguity if n_payments == 1 && n_lines > 1 => format!(
            "Payment {} ({}) has {n_lines} candidate lines: pick the one that paid it.",
            rows.iter()
                .find_map(|r| r.payment_id.as_ref())
                .map(|p| p.to_string())
                .unwrap_or_default(),
            rows.iter()
                .find_map(|r| r.amount)
                .map(money_text)
                .unwrap_or_default(),
        ),
        CaseKind::Ambiguity if n_payments > 1 => format!(
            "{n_payments} payments and {n_lines} lines could pair in more than one way: \
             decide which line is whose."
        ),
        CaseKind::NearMiss => {
            let payment = rows.iter().find(|r| r.payment_id.is_some());
            match payment {
                Some(p) => format!(
                    "Payment {} ({}) is unresolved and {} ({}) {} in its window: is {} this \
                     payment's money (fee netted, converted)?",
                    p.payment_id
                        .as_ref()
                        .map(|p| p.to_string())
                        .unwrap_or_default(),
                    p.amount.map(money_text).unwrap_or_default(),
                    match p.lines.as_slice() {
                        [l] => format!("line {}", l.id),
                        ls => format!("{} lines", ls.len()),
                    },
                    p.lines
                        .iter()
                        .map(|l| money_text(l.amount))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if p.lines.len() == 1 { "is" } else { "are" },
                    if p.lines.len() == 1 {
                        "it"
                    } else {
                        "one of them"
                    },
                ),
                None => sentence(&lead.detail),
            }
        }
        _ if lead.detail.is_empty() => {
            sentence(&lead.outcome.as_str().replace('_', " ").to_lowercase())
        }
        _ => sentence(&lead.detail),
    }
}

/// Appends `field` to `out` length-prefixed, so no text inside a field can be taken for the
/// boundary between two.
fn field(out: &mut String, field: &str) {
    use std::fmt::Write as _;
    let _ = write!(out, "{}:{field};", field.len());
}

/// The fingerprint of the rows' decision-relevant evidence (see the module docs): every row
/// as one length-prefixed record (its lines sorted), the records sorted, hashed once. Built
/// as text, not as JSON values: a night has tens of thousands of cases.
fn fingerprint(rows: &[&Item]) -> String {
    let mut records: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut rec = String::with_capacity(160);
            field(&mut rec, r.outcome.as_str());
            field(
                &mut rec,
                &r.payment_id.as_ref().map(Id::to_string).unwrap_or_default(),
            );
            field(&mut rec, &r.amount.map(|m| m.text()).unwrap_or_default());
            field(&mut rec, r.amount.map_or("", |m| m.currency));
            field(&mut rec, &r.recipient);
            field(
                &mut rec,
                &r.started_at.map(|t| t.to_string()).unwrap_or_default(),
            );
            let mut lines: Vec<String> = r
                .lines
                .iter()
                .map(|l| {
                    let mut t = String::with_capacity(96);
                    field(&mut t, &l.origin.source);
                    field(&mut t, &l.id);
                    field(&mut t, &l.amount.text());
                    field(&mut t, l.amount.currency);
                    field(&mut t, &l.booked_text());
                    field(
                        &mut t,
                        &l.reference.as_ref().map(Id::to_string).unwrap_or_default(),
                    );
                    field(&mut t, l.kind.as_str());
                    t
                })
                .collect();
            lines.sort_unstable();
            field(&mut rec, &lines.len().to_string());
            for l in &lines {
                field(&mut rec, l);
            }
            rec
        })
        .collect();
    records.sort_unstable();
    let mut h = Sha256::new();
    for r in &records {
        h.update(r.len().to_string().as_bytes());
        h.update(b":");
        h.update(r.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The cases of one severity: how many, and their money at risk per currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeverityTotal {
    /// The severity.
    pub severity: Severity,
    /// Cases.
    pub cases: usize,
    /// Currency → minor units (sums of many cases may exceed i64).
    pub at_risk: BTreeMap<&'static str, i128>,
}

/// Cases and money at risk per severity, most severe first (severities without a case left
/// out).
pub fn by_severity<'a>(cases: impl IntoIterator<Item = &'a Case>) -> Vec<SeverityTotal> {
    let mut out: BTreeMap<Severity, SeverityTotal> = BTreeMap::new();
    for c in cases {
        let t = out.entry(c.severity).or_insert_with(|| SeverityTotal {
            severity: c.severity,
            cases: 0,
            at_risk: BTreeMap::new(),
        });
        t.cases += 1;
        for m in &c.at_risk {
            *t.at_risk.entry(m.currency).or_default() += i128::from(m.minor);
        }
    }
    out.into_values().collect()
}

/// Cases and review rows by severity, as summary.json counts them.
pub fn counts(cases: &[Case]) -> crate::outputs::summary::CaseCounts {
    let mut c = crate::outputs::summary::CaseCounts {
        cases: cases.len(),
        ..Default::default()
    };
    for case in cases {
        c.tickets += case.members.len();
        *c.by_severity
            .entry(case.severity.as_str().to_string())
            .or_default() += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Action;
    use crate::sources::Origin;
    use std::borrow::Cow;
    use std::sync::Arc;

    fn line(id: &str, minor: i64) -> ItemLine {
        ItemLine {
            id: id.into(),
            amount: Money {
                minor,
                currency: "EUR",
            },
            reference: None,
            booked_at: 0,
            booked_day: None,
            origin: Origin::new(Arc::from("psp"), Arc::from("f.csv"), None),
            line_no: 2,
            kind: LineKind::Payment,
        }
    }

    fn item(outcome: Outcome, payment: Option<(&str, i64)>, lines: &[(&str, i64)]) -> Item {
        Item {
            outcome,
            severity: outcome.ticket_severity(),
            status: None,
            action: Action::Ticket,
            payment_id: payment.map(|(p, _)| Id::new(p)),
            lines: lines.iter().map(|&(id, m)| line(id, m)).collect(),
            amount: payment.map(|(_, minor)| Money {
                minor,
                currency: "EUR",
            }),
            recipient: "****1234".into(),
            started_at: None,
            age_days: 1,
            rule: Arc::from(if outcome == Outcome::Ambiguous {
                "p1"
            } else {
                ""
            }),
            detail: Cow::Borrowed("why not"),
        }
    }

    #[test]
    fn a_line_that_fits_two_payments_is_one_case_with_two_numbered_candidates() {
        let items = vec![
            item(Outcome::Ambiguous, Some(("P-2", 100)), &[("L-1", 100)]),
            item(Outcome::Ambiguous, Some(("P-1", 100)), &[("L-1", 100)]),
            item(Outcome::Ambiguous, None, &[("L-1", 100)]),
            item(Outcome::OrphanAtProvider, None, &[("L-9", -500)]),
        ];
        let cases = group(&items, None);
        assert_eq!(cases.len(), 2, "{cases:#?}");
        // Same severity: the larger money at risk first.
        let (orphan, amb) = (&cases[0], &cases[1]);
        assert_eq!(amb.kind, CaseKind::Ambiguity);
        assert_eq!(amb.members, vec![0, 1, 2]);
        assert_eq!(amb.what(), "AMBIGUOUS");
        assert_eq!(amb.payments, vec![Id::new("P-1"), Id::new("P-2")]);
        // One line's money is at stake, not both payments'.
        assert_eq!(amb.amount_text(), "1.00 EUR");
        let numbered: Vec<(u32, String)> = amb
            .candidates
            .iter()
            .map(|c| (c.number, c.payment_id.to_string()))
            .collect();
        assert_eq!(numbered, [(1, "P-1".into()), (2, "P-2".into())]);
        assert_eq!(
            amb.why(&items),
            "Line L-1 (1.00 EUR) fits 2 payments: pick the one it paid."
        );
        // The orphan: its line's money, as an absolute amount, and no candidate.
        assert_eq!(orphan.amount_text(), "5.00 EUR");
        assert!(orphan.candidates.is_empty());
        assert_eq!(orphan.why(&items), "Why not.");
        assert_eq!(orphan.members, vec![3]);
        assert_eq!(counts(&cases).tickets, 4);
    }

    #[test]
    fn the_key_survives_a_rerun_and_the_fingerprint_sees_the_money() {
        let night = |amount: i64| {
            vec![
                item(Outcome::Ambiguous, Some(("P-1", 100)), &[("L-1", amount)]),
                item(Outcome::Ambiguous, None, &[("L-1", amount)]),
            ]
        };
        let a = group(&night(100), None).remove(0);
        // The same evidence re-delivered in another file, explained in other words.
        let mut again = night(100);
        again[0].detail = Cow::Borrowed("other words");
        for l in again.iter_mut().flat_map(|i| i.lines.iter_mut()) {
            l.line_no += 7;
            l.origin = Origin::new(Arc::from("psp"), Arc::from("again.csv"), None);
        }
        let b = group(&again, None).remove(0);
        assert_eq!((&a.key, &a.fingerprint), (&b.key, &b.fingerprint));
        let c = group(&night(95), None).remove(0);
        assert_eq!(a.key, c.key, "same payment: same case");
        assert_ne!(a.fingerprint, c.fingerprint, "other money: other evidence");
        assert!(a.key.starts_with("C-") && a.key.len() == 18, "{}", a.key);
    }

    #[test]
    fn decisions_read_back_as_written_and_offered_by_kind_and_status() {
        for d in [
            Decision::Confirm(12),
            Decision::Failed,
            Decision::Succeeded,
            Decision::Dismiss,
            Decision::Escalate,
            Decision::AcceptDifference,
        ] {
            assert_eq!(Decision::parse(&d.text()), Some(d));
        }
        assert_eq!(
            Decision::parse("  Confirm   2 "),
            Some(Decision::Confirm(2))
        );
        for bad in [
            "confirm",
            "confirm 0",
            "confirm 2 3",
            "confirm -1",
            "fail",
            "",
        ] {
            assert_eq!(Decision::parse(bad), None, "{bad:?}");
        }
        let texts = |k, n, s: &[Status]| -> Vec<String> {
            choices(k, n, s, false).iter().map(|d| d.text()).collect()
        };
        assert_eq!(
            texts(CaseKind::NearMiss, 1, &[Status::Unknown]),
            ["confirm 1", "failed", "succeeded", "dismiss", "escalate"]
        );
        // Two payments: no status decision says which.
        assert_eq!(
            texts(CaseKind::Ambiguity, 2, &[Status::Unknown, Status::Unknown]),
            ["confirm 1", "confirm 2", "dismiss", "escalate"]
        );
        // recon never moves a payment out of SUCCEEDED, FAILED or PENDING, nor one in flight.
        for s in [
            Status::Succeeded,
            Status::Failed,
            Status::Pending,
            Status::Submitting,
        ] {
            assert_eq!(texts(CaseKind::Exception, 0, &[s]), ["dismiss", "escalate"]);
        }
        assert_eq!(
            texts(CaseKind::Return, 1, &[Status::Unknown]),
            ["dismiss", "escalate"]
        );
    }

    #[test]
    fn severity_orders_cases_before_money_with_no_outcome_special_cased() {
        let items = vec![
            item(Outcome::OrphanAtProvider, None, &[("L-big", 1_000_000)]),
            item(
                Outcome::DuplicateAtProvider,
                Some(("P-d", 90)),
                &[("L-2", 90), ("L-3", 90)],
            ),
            item(Outcome::AmountMismatch, Some(("P-a", 500)), &[("L-4", 400)]),
            item(Outcome::FailedButPaid, Some(("P-f", 20)), &[("L-5", 20)]),
        ];
        let order: Vec<(Severity, String)> = group(&items, None)
            .iter()
            .map(|c| (c.severity, c.amount_text()))
            .collect();
        assert_eq!(
            order,
            [
                // Two critical outcomes: the larger money first, whichever outcome it is.
                (Severity::Critical, "0.90 EUR".to_string()),
                (Severity::Critical, "0.20 EUR".to_string()),
                (Severity::High, "5.00 EUR".to_string()),
                (Severity::Medium, "10000.00 EUR".to_string()),
            ]
        );
    }
}
