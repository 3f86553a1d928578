//! What finance reads: the XLSX diff report, the HTML report and the email alert (issue 5).
//!
//! A run's rows are turned once into a [`ReportView`]: the exception rows with every value a
//! reviewer needs, account numbers already masked, sorted most severe first. Each format
//! renders that view and applies its own escaping to the raw statement text it holds
//! (HTML-escaped in [`html`], formula-neutralised in [`xlsx`]); no renderer ever sees a full
//! account number.
//!
//! Outcomes are grouped into [`Family`]s, one XLSX sheet and one HTML section each:
//!
//! | family | outcomes | why |
//! |---|---|---|
//! | `money_at_risk` | FAILED_BUT_PAID, PAID_WHILE_PENDING, CONTRADICTED, DUPLICATE_AT_PROVIDER, AMOUNT_MISMATCH, CURRENCY_MISMATCH, MISSING_AT_PROVIDER, ORPHAN_AT_PROVIDER | money left (or did not) against what the ledger says: treasury acts |
//! | `review` | AMBIGUOUS, PROPOSED_MATCH | a human decides a match |
//! | `pending` | AWAITING_EVIDENCE, IN_FLIGHT, NOT_SUBMITTED | nothing to do yet; long-waiting rows show by their age |
//! | `resolved` | RESOLVED_SUCCEEDED, RESOLVED_FAILED | what recon changed in the ledger, for audit |
//! | `informational` | REFUND, MATCHED, FAILED_OK | no action; MATCHED and FAILED_OK are counted on the summary only (they are in results.csv) |
//!
//! The rows that raise a ticket are also grouped into [`cases`]: one per human decision, which
//! the email lists first and the XLSX report shows on its Cases sheet.

pub mod actions;
pub mod cases;
pub mod email;
pub mod html;
pub mod markers;
pub mod outbox;
pub mod xlsx;

use crate::ledger::{Payment, Status};
pub use crate::model::Family;
use crate::model::Id;
use crate::outcome::{Action, Outcome, ResultRow, Severity};
pub use crate::outputs::is_listed;
pub use crate::outputs::summary::OutcomeTotal;
use crate::outputs::summary::Summary;
use crate::sources::{self, Origin, StatementLine};
use crate::timeparse::{DAY, Micros};
use crate::{mask, money};
use anyhow::{Context, Result};
use chrono::NaiveDate;
use compact_str::CompactString;
use rust_decimal::Decimal;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// An exact amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Money {
    /// Minor units.
    pub minor: i64,
    /// ISO 4217 code.
    pub currency: &'static str,
}

impl Money {
    /// The amount in the currency's units, exactly.
    pub fn decimal(self) -> Decimal {
        Decimal::new(self.minor, exponent(self.currency))
    }

    /// Plain decimal text (`12.30`).
    pub fn text(self) -> String {
        money::format_minor(self.minor, self.currency)
    }
}

/// The minor-unit exponent of a currency (2 for codes recon does not know, as in `money`).
pub fn exponent(currency: &str) -> u32 {
    money::currency(currency).map(|(_, e)| e).unwrap_or(2)
}

/// A sum of minor units as exact decimal text (sums may exceed i64).
pub fn total_text(minor: i128, currency: &str) -> String {
    Decimal::try_from_i128_with_scale(minor, exponent(currency))
        .map(|d| d.to_string())
        .unwrap_or_else(|_| format!("{minor} (minor units)"))
}

/// One listed result row, ready to render. Statement text (line ids, references, source
/// lines, `detail`) is raw: each renderer escapes it for its format. An item owns what it
/// shows (a range run's view outlives each day's lines); text that is derived from values
/// (booking times, positions, the action) is formatted when rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The outcome.
    pub outcome: Outcome,
    /// Ticket severity, if the outcome raises a ticket.
    pub severity: Option<Severity>,
    /// Ledger status recon classified on.
    pub status: Option<Status>,
    /// What recon does (`ticket`, `transition:SUCCEEDED`, …: [`Action::label`]).
    pub action: Action,
    /// Ledger payment id.
    pub payment_id: Option<Id>,
    /// The linked or candidate lines, sorted by id.
    pub lines: Vec<ItemLine>,
    /// The payment's amount.
    pub amount: Option<Money>,
    /// Recipient account, masked to the last 4 characters (inline: a masked IBAN fits).
    pub recipient: CompactString,
    /// When the payment's current attempt started (UTC micros).
    pub started_at: Option<Micros>,
    /// Whole days between the payment's start (or the first booking) and the run's as-of.
    pub age_days: i64,
    /// Rule or gate that decided.
    pub rule: Arc<str>,
    /// Explanation.
    pub detail: Cow<'static, str>,
}

/// A statement line of a listed row: what the reports show of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemLine {
    /// Line id (provider id or `source#…`, [`StatementLine::uid`]).
    pub id: CompactString,
    /// The line's amount.
    pub amount: Money,
    /// Statement reference (raw statement text).
    pub reference: Option<Id>,
    /// Booking instant (UTC micros): for a date-only booking the start of `booked_day`.
    pub booked_at: Micros,
    /// The day of a date-only booking.
    pub booked_day: Option<NaiveDate>,
    /// Source and file.
    pub origin: Arc<Origin>,
    /// Line number in the file.
    pub line_no: u64,
    /// What the line is (a payment, or money that came back).
    pub kind: crate::model::LineKind,
}

impl ItemLine {
    fn of(l: &StatementLine) -> ItemLine {
        ItemLine {
            id: l.uid().as_ref().into(),
            amount: Money {
                minor: l.amount_minor,
                currency: l.currency,
            },
            reference: l.reference.clone(),
            booked_at: l.booked_at,
            booked_day: l.booked_day,
            origin: l.origin.clone(),
            line_no: l.line_no,
            kind: l.kind,
        }
    }

    /// When the line was booked, as shown: the UTC instant, or the day of a date-only booking.
    pub fn booked_text(&self) -> String {
        sources::booked_text(self.booked_at, self.booked_day)
    }

    /// `source:file name:line`, as results.csv shows it.
    pub fn source_line(&self) -> String {
        let mut s = String::with_capacity(48);
        sources::write_source_line(&mut s, &self.origin, self.line_no);
        s
    }
}

impl Item {
    /// The line ids.
    pub fn line_ids(&self) -> Vec<&str> {
        self.lines.iter().map(|l| l.id.as_str()).collect()
    }

    /// The lines' amounts.
    pub fn line_amounts(&self) -> Vec<Money> {
        self.lines.iter().map(|l| l.amount).collect()
    }

    /// The references of the lines that have one.
    pub fn references(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter_map(|l| l.reference.as_ref().map(Id::to_string))
            .collect()
    }

    /// When each line was booked ([`ItemLine::booked_text`]).
    pub fn booked(&self) -> Vec<String> {
        self.lines.iter().map(ItemLine::booked_text).collect()
    }

    /// `source:file:line` of every line.
    pub fn source_lines(&self) -> Vec<String> {
        self.lines.iter().map(ItemLine::source_line).collect()
    }

    /// The amount this row puts at risk: the payment's amount, or the line's for line rows
    /// (the same rule as summary.json).
    pub fn at_risk(&self) -> Option<Money> {
        self.amount.or_else(|| self.lines.first().map(|l| l.amount))
    }

    /// The family of the outcome.
    pub fn family(&self) -> Family {
        Family::of(self.outcome)
    }

    /// The ordering key of the row (see [`sort_items`]), computed once per item: the one
    /// ordering of cases ([`cases::order_key`]) on the row's severity, the value of the amount
    /// it puts at risk ([`Item::at_risk`], absolute) in the reporting currency of `valuation`
    /// (or its number of units), and its age; then its outcome.
    fn head_key(&self, valuation: Option<&crate::rates::Valuation>) -> (cases::OrderKey, Outcome) {
        let at_risk = self.at_risk();
        let units = at_risk.map(|m| m.decimal().abs()).unwrap_or_default();
        let value = valuation.and_then(|v| match at_risk {
            Some(m) => v.value(units, m.currency),
            None => Some(Decimal::ZERO),
        });
        (
            cases::order_key(
                self.severity,
                value,
                units,
                valuation.is_some(),
                self.age_days,
            ),
            self.outcome,
        )
    }
}

/// How many rows of each family that needs no human (pending, resolved, informational) the
/// reports list one by one: the first in report order (the one ordering of the rows: the
/// largest and oldest first), every row counted. Reviewers work the cases (money at risk and
/// review rows, all of them listed); nobody reads a sheet of a hundred thousand resolved rows,
/// and holding every such row made a gather grow with the night. Every listed row is in
/// diff.csv (and results.csv), and the reports say how many they leave out.
pub const ROWS_PER_FAMILY: usize = 10_000;

/// The listed rows of a view as they are collected: every row that needs a human (the cases
/// are made of them) and, with `keep`, only the first `keep` of each other family in report
/// order, pruned as rows come, so the rest are never held together; with the number of rows of
/// each family it was given.
pub(crate) struct Listed<'v> {
    valuation: Option<&'v crate::rates::Valuation>,
    keep: Option<usize>,
    kept: Vec<Item>,
    others: BTreeMap<Family, Vec<Item>>,
    rows: BTreeMap<Family, usize>,
}

impl<'v> Listed<'v> {
    /// An empty collection; `capacity` rows are kept whatever comes (those that need a human,
    /// or every row without `keep`).
    pub(crate) fn new(
        valuation: Option<&'v crate::rates::Valuation>,
        keep: Option<usize>,
        capacity: usize,
    ) -> Self {
        Listed {
            valuation,
            keep,
            kept: Vec::with_capacity(capacity),
            others: BTreeMap::new(),
            rows: BTreeMap::new(),
        }
    }

    /// Adds a listed row and counts it.
    pub(crate) fn push(&mut self, item: Item) {
        *self.rows.entry(item.family()).or_default() += 1;
        self.hold(item);
    }

    /// Adds rows another view kept and the number of rows of each family it listed (a shard's,
    /// for the gather).
    pub(crate) fn extend_counted(
        &mut self,
        items: impl IntoIterator<Item = Item>,
        rows: &BTreeMap<Family, usize>,
    ) {
        self.count(rows);
        for item in items {
            self.hold(item);
        }
    }

    /// Counts the rows of each family another view listed (a shard's, for the gather), whose
    /// kept rows come by [`Listed::hold`].
    pub(crate) fn count(&mut self, rows: &BTreeMap<Family, usize>) {
        for (f, n) in rows {
            *self.rows.entry(*f).or_default() += n;
        }
    }

    /// Adds a row another view kept, counted by [`Listed::count`].
    pub(crate) fn hold(&mut self, item: Item) {
        let f = item.family();
        match self.keep {
            Some(keep) if !f.needs_review() => {
                let v = self.others.entry(f).or_default();
                v.push(item);
                // Pruned at twice the rows kept: a sort of 2k rows every k rows.
                if v.len() >= keep.saturating_mul(2).max(1) {
                    sort_items(v, self.valuation);
                    v.truncate(keep);
                }
            }
            _ => self.kept.push(item),
        }
    }

    /// The rows held (in no particular order; [`ReportView`] sorts them) and the number of
    /// rows of each family given.
    pub(crate) fn finish(mut self) -> (Vec<Item>, BTreeMap<Family, usize>) {
        for (_, mut v) in std::mem::take(&mut self.others) {
            if let Some(keep) = self.keep.filter(|k| v.len() > *k) {
                sort_items(&mut v, self.valuation);
                v.truncate(keep);
            }
            self.kept.append(&mut v);
        }
        (self.kept, self.rows)
    }
}

/// Keeps, of sorted `items`, every row that needs a human and the first `keep` rows of each
/// other family.
fn keep_first(items: &mut Vec<Item>, keep: usize) {
    let mut seen: BTreeMap<Family, usize> = BTreeMap::new();
    items.retain(|i| {
        let f = i.family();
        if f.needs_review() {
            return true;
        }
        let n = seen.entry(f).or_default();
        *n += 1;
        *n <= keep
    });
}

/// Sorts `items` by the one ordering of cases and review rows ([`cases::order_key`]): by
/// ticket severity (rows without a ticket last); with a reporting currency (`valuation`) the
/// rows valued in it before those whose currency has no rate, by value, largest first;
/// without one (or among the unvalued) by the number of units of the amount; then the older
/// row, then the outcome and the ids for a stable order. The key is computed once per item, not
/// twice per comparison (a hundred thousand rows take millions of comparisons).
fn sort_items(items: &mut [Item], valuation: Option<&crate::rates::Valuation>) {
    // The keys and positions are sorted, not the items (a few hundred bytes each), which are
    // then moved into place once, without a second vector.
    let mut order: Vec<_> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (item.head_key(valuation), i as u32))
        .collect();
    order.sort_by(|(ka, a), (kb, b)| {
        let (a, b) = (&items[*a as usize], &items[*b as usize]);
        ka.cmp(kb).then_with(|| {
            a.payment_id.cmp(&b.payment_id).then_with(|| {
                a.lines
                    .iter()
                    .map(|l| l.id.as_str())
                    .cmp(b.lines.iter().map(|l| l.id.as_str()))
            })
        })
    });
    let mut from: Vec<u32> = order.into_iter().map(|(_, i)| i).collect();
    crate::keysort::permute(items, &mut from);
}

/// How urgent an outcome is, 0 = most: FAILED_BUT_PAID and PAID_WHILE_PENDING first
/// (DESIGN.md: highest severity; the ledger says FAILED or PENDING for money that left, so the
/// payment service may send it a second time), then the other critical outcome, then by ticket
/// severity; outcomes without a ticket last.
pub fn rank(o: Outcome) -> u8 {
    match (o, o.ticket_severity()) {
        (Outcome::FailedButPaid | Outcome::PaidWhilePending, _) => 0,
        (_, Some(s)) => 1 + s as u8,
        (_, None) => 5,
    }
}

/// Everything the reports and the email show about one run.
#[derive(Debug, Clone)]
pub struct ReportView {
    /// The run's summary (as in summary.json).
    pub summary: Summary,
    /// Every outcome with its count and sums (zeros included), in vocabulary order.
    pub totals: BTreeMap<Outcome, OutcomeTotal>,
    /// The listed rows, most severe first: every row that needs a human, and the first
    /// [`ROWS_PER_FAMILY`] of each other family (all of them for a range's day).
    pub items: Vec<Item>,
    /// How many rows each family lists (before the cut to [`ROWS_PER_FAMILY`]).
    pub family_rows: BTreeMap<Family, usize>,
    /// The review rows grouped into cases, most severe first ([`cases`]).
    pub cases: Vec<cases::Case>,
    /// What reviewers' earlier decisions left on the cases (the Decide sheet leaves out the
    /// settled ones and shows the rest's status).
    pub marks: cases::Marks,
    /// Transitions the rows ask for (refused ones included).
    pub transitions_planned: usize,
    /// Rows that raise a ticket.
    pub ticket_rows: usize,
    /// Whether `summary` holds what the commit did (transitions applied, tickets new): true
    /// for the email of a real run, false while the reports are written beside the commit.
    pub committed: bool,
}

impl ReportView {
    /// The cases the email lists: every case but those reviewers settled (dismissed or
    /// decided) on the evidence they still have, most severe first. A settled case whose
    /// evidence changes is listed again (it has another fingerprint).
    pub fn listed_cases(&self) -> Vec<&cases::Case> {
        self.cases
            .iter()
            .filter(|c| !self.marks.is_settled(c))
            .collect()
    }

    /// How many cases reviewers settled on the evidence they still have (not in the email).
    pub fn settled_cases(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| self.marks.is_settled(c))
            .count()
    }

    /// Builds the view of a run's rows; `totals` are their counts and sums by outcome
    /// ([`crate::outputs::summary::outcome_totals`]). `as_of` is the run's cut-off (ages are
    /// measured to it).
    pub fn build(
        summary: &Summary,
        totals: &BTreeMap<Outcome, OutcomeTotal>,
        rows: &[ResultRow],
        payments: &[Payment],
        lines: &[StatementLine],
        as_of: Micros,
        keep: Option<usize>,
    ) -> ReportView {
        let valuation = summary.reporting.as_ref().map(|r| &r.valuation);
        // Sized once (the totals count the rows of each outcome): pushing a hundred thousand
        // items would copy them each time it grows.
        let review: usize = totals
            .iter()
            .filter(|(o, _)| is_listed(**o) && (keep.is_none() || Family::of(**o).needs_review()))
            .map(|(_, t)| t.count)
            .sum();
        let mut listed = Listed::new(valuation, keep, review);
        let (mut transitions_planned, mut ticket_rows) = (0, 0);
        for r in rows {
            match r.action {
                Action::Transition(_) | Action::Conflict(_) => transitions_planned += 1,
                Action::Ticket => ticket_rows += 1,
                Action::None => {}
            }
            // MATCHED and FAILED_OK, the bulk of a run, are only counted.
            if !is_listed(r.outcome) {
                continue;
            }
            let p = r.payment.map(|i| &payments[i as usize]);
            let amount = p.map(|p| Money {
                minor: p.amount_minor,
                currency: p.currency,
            });
            let ls: Vec<&StatementLine> = r.lines.iter().map(|&i| &lines[i as usize]).collect();
            let recipient = p
                .map(|p| p.recipient.as_str())
                .or_else(|| ls.first().map(|l| l.recipient.as_str()))
                .map(|r| CompactString::new(mask::account(r)))
                .unwrap_or_default();
            let started_at = p.and_then(|p| p.started_at);
            let since = started_at
                .or_else(|| ls.iter().map(|l| l.booked_at).min())
                .or(p.map(|p| p.created_at));
            listed.push(Item {
                outcome: r.outcome,
                severity: r.outcome.ticket_severity(),
                status: p.map(|p| p.status),
                action: r.action,
                payment_id: p.map(|p| p.payment_id.clone()),
                lines: ls.iter().map(|l| ItemLine::of(l)).collect(),
                amount,
                recipient,
                started_at,
                age_days: since.map_or(0, |s| (as_of - s).max(0) / DAY),
                rule: r.rule.clone(),
                detail: r.detail.clone(),
            });
        }
        let (items, family_rows) = listed.finish();
        Self::of_items(
            summary.clone(),
            totals.clone(),
            (items, family_rows, keep),
            cases::Marks::default(),
            (transitions_planned, ticket_rows),
            false,
        )
    }

    /// One view of a range run's days (`days` in order) for its single report and email: each
    /// item once, as the last day that listed it saw it (a carried-over payment is not repeated),
    /// `totals` the range's final outcomes (every outcome), `summary` the range's.
    pub fn merge(
        days: Vec<ReportView>,
        summary: Summary,
        totals: BTreeMap<Outcome, OutcomeTotal>,
    ) -> ReportView {
        let mut by_key: BTreeMap<(Option<Id>, Vec<CompactString>), Item> = BTreeMap::new();
        let (mut transitions_planned, mut ticket_rows) = (0, 0);
        let mut committed = true;
        let mut marks = cases::Marks::default();
        for d in days {
            marks.extend(d.marks);
            transitions_planned += d.transitions_planned;
            ticket_rows += d.ticket_rows;
            committed &= d.committed;
            for i in d.items {
                let ids = i.lines.iter().map(|l| l.id.clone()).collect();
                by_key.insert((i.payment_id.clone(), ids), i);
            }
        }
        let items: Vec<Item> = by_key.into_values().collect();
        let mut family_rows = BTreeMap::new();
        for i in &items {
            *family_rows.entry(i.family()).or_default() += 1;
        }
        Self::of_items(
            summary,
            totals,
            (items, family_rows, Some(ROWS_PER_FAMILY)),
            marks,
            (transitions_planned, ticket_rows),
            committed,
        )
    }

    /// The view of a night gathered from its shards (`recon gather`): the rows each shard
    /// kept (every row that needs a human, the first [`ROWS_PER_FAMILY`] of each other family)
    /// with the number of rows of each family the shards listed, sorted, cut and grouped into
    /// cases exactly as one process does its own.
    pub fn gathered(
        summary: Summary,
        totals: BTreeMap<Outcome, OutcomeTotal>,
        (items, family_rows): (Vec<Item>, BTreeMap<Family, usize>),
        marks: cases::Marks,
        counts: (usize, usize),
    ) -> ReportView {
        Self::of_items(
            summary,
            totals,
            (items, family_rows, Some(ROWS_PER_FAMILY)),
            marks,
            counts,
            true,
        )
    }

    /// Items sorted, cut to the first `keep` of each family that needs no human, and grouped
    /// into cases: every view is built this one way. `family_rows` counts the rows of each
    /// family before the cut.
    fn of_items(
        summary: Summary,
        totals: BTreeMap<Outcome, OutcomeTotal>,
        (mut items, family_rows, keep): (Vec<Item>, BTreeMap<Family, usize>, Option<usize>),
        marks: cases::Marks,
        (transitions_planned, ticket_rows): (usize, usize),
        committed: bool,
    ) -> ReportView {
        sort_items(&mut items, summary.reporting.as_ref().map(|r| &r.valuation));
        if let Some(keep) = keep {
            keep_first(&mut items, keep);
        }
        let mut summary = summary;
        let cases = cases::group(&items, summary.reporting.as_ref().map(|r| &r.valuation));
        if let Some(r) = &summary.reporting {
            let missing = cases::value_totals(&cases, &r.valuation).missing;
            let said: Vec<String> = missing.into_iter().map(cases::no_rate_warning).collect();
            crate::outputs::summary::add_distinct_warnings(&mut summary.warnings, &said);
        }
        ReportView {
            summary,
            totals,
            cases,
            marks,
            items,
            family_rows,
            transitions_planned,
            ticket_rows,
            committed,
        }
    }

    /// The run's effects as two lines of text (transitions, tickets). Exact counts of what the
    /// commit did once `committed`; before that (the report files) what the rows ask for.
    pub fn effects(&self) -> (String, String) {
        let s = &self.summary;
        if self.committed {
            let t = &s.transitions;
            return (
                format!(
                    "{} planned, {} applied, {} already applied, {} conflicts",
                    t.planned, t.applied, t.already_applied, t.conflicts
                ),
                s.tickets.text(),
            );
        }
        let (applied, created) = if s.dry_run {
            ("dry run: none applied", "dry run: none created")
        } else {
            (
                "how many were applied: summary.json and the email",
                "how many are new: summary.json and the email",
            )
        };
        (
            format!("{} planned ({applied})", self.transitions_planned),
            format!("{} row(s) raise a ticket ({created})", self.ticket_rows),
        )
    }

    /// Cases and review rows, as summary.json counts them.
    pub fn case_counts(&self) -> crate::outputs::summary::CaseCounts {
        cases::counts(&self.cases)
    }

    /// The money at risk in the reporting currency of the cases waiting for a decision (the
    /// email's), when there is a reporting currency.
    pub fn value_totals(&self) -> Option<(&crate::rates::Valuation, cases::ValueTotals)> {
        let v = &self.summary.reporting.as_ref()?.valuation;
        Some((v, cases::value_totals(self.listed_cases(), v)))
    }

    /// An amount as people read it in the email and the HTML report: `10,275,687.39 EUR`
    /// (digits grouped, [`money::grouped`]); CSV and XLSX keep plain numbers.
    pub fn money_text(&self, minor: i128, currency: &str) -> String {
        format!("{} {currency}", money::grouped_minor(minor, currency))
    }

    /// The email's first line about money: the total at risk in the reporting currency with
    /// the rates it used ([`ReportView::total_lines`]), or without one the sum per currency of
    /// the cases waiting for a decision (`At risk: 1,250.00 EUR · 300.00 GBP in 12 cases`).
    /// `None` when no case waits.
    pub fn at_risk_line(&self) -> Option<(String, Option<String>)> {
        if let Some((total, rates)) = self.total_lines() {
            return Some((total, Some(rates)));
        }
        let listed = self.listed_cases();
        if listed.is_empty() {
            return None;
        }
        let mut sums: BTreeMap<&str, i128> = BTreeMap::new();
        for c in &listed {
            for m in &c.at_risk {
                *sums.entry(m.currency).or_default() += i128::from(m.minor);
            }
        }
        let amounts: Vec<String> = sums.iter().map(|(c, v)| self.money_text(*v, c)).collect();
        Some((
            format!(
                "At risk: {} in {} case{}",
                amounts.join(" · "),
                money::count(listed.len()),
                if listed.len() == 1 { "" } else { "s" }
            ),
            None,
        ))
    }

    /// A case's money at risk, one entry per currency ([`ReportView::money_text`]).
    pub fn case_amounts(&self, case: &cases::Case) -> Vec<String> {
        case.at_risk
            .iter()
            .map(|m| self.money_text(m.minor.into(), m.currency))
            .collect()
    }

    /// A case's value for ordering, labelled: `value for ordering: 3,069.17 EUR` (or `no rate
    /// for JPY`); `None` without a reporting currency, or when the case's money is all in it.
    pub fn case_value(&self, case: &cases::Case) -> Option<String> {
        let v = &self.summary.reporting.as_ref()?.valuation;
        // An amount in the reporting currency is its own value: saying it twice helps no one.
        if case.value.is_some() && case.at_risk.iter().all(|m| m.currency == v.currency) {
            return None;
        }
        Some(match case.value {
            Some(_) => format!("value for ordering: {}", case.value_text(v)),
            None => case.value_text(v),
        })
    }

    /// The money at risk in the reporting currency as the first lines of the email and the
    /// reports: the total of the cases waiting for a decision, and which rates (`None`
    /// without a reporting currency).
    pub fn total_lines(&self) -> Option<(String, String)> {
        let (v, t) = self.value_totals()?;
        let mut total = format!(
            "Total at risk: {} {} in {} case{}",
            cases::display_value(t.total, &v.currency),
            v.currency,
            money::count(t.valued),
            if t.valued == 1 { "" } else { "s" }
        );
        if t.unvalued > 0 {
            let missing: Vec<&str> = t.missing.iter().copied().collect();
            let _ = std::fmt::Write::write_fmt(
                &mut total,
                format_args!(
                    ", {} more without a rate ({}) left out",
                    t.unvalued,
                    missing.join(", ")
                ),
            );
        }
        let rates = format!(
            "Values in {} are for ordering and totals only, at {}; each amount stays in its own \
             currency beside them.",
            v.currency,
            v.sources_text()
        );
        Some((total, rates))
    }

    /// The value in the reporting currency of the listed cases of `severity`, labelled
    /// (`value 61,383.40 EUR`), when there is a reporting currency.
    pub fn severity_value(&self, severity: Severity) -> Option<String> {
        let (v, t) = self.value_totals()?;
        let d = t.by_severity.get(&severity).copied().unwrap_or_default();
        Some(format!(
            "value {} {}",
            cases::display_value(d, &v.currency),
            v.currency
        ))
    }

    /// What the view adds to its run's summary.json: the case counts, the money at risk in
    /// the reporting currency, and a warning per currency without a rate.
    pub fn complete_summary(&self, s: &mut Summary) {
        s.cases = self.case_counts();
        if let Some((v, t)) = self.value_totals() {
            let text = |d: Decimal| cases::rounded_value(d, &v.currency).to_string();
            s.reporting = Some(crate::outputs::summary::ReportingSummary {
                valuation: v.clone(),
                total_at_risk: text(t.total),
                at_risk_by_severity: t
                    .by_severity
                    .iter()
                    .map(|(sev, d)| (sev.as_str().to_string(), text(*d)))
                    .collect(),
                cases_valued: t.valued,
                cases_without_rate: t.unvalued,
                currencies_without_rate: t.missing.iter().map(|c| c.to_string()).collect(),
            });
            let all = cases::value_totals(&self.cases, v).missing;
            let said: Vec<String> = all.into_iter().map(cases::no_rate_warning).collect();
            crate::outputs::summary::add_distinct_warnings(&mut s.warnings, &said);
        }
    }

    /// The rows of a case, most severe first.
    pub fn case_items<'a>(&'a self, case: &'a cases::Case) -> impl Iterator<Item = &'a Item> {
        case.members.iter().map(|&i| &self.items[i])
    }

    /// Rows of one family, most severe first (the first [`ROWS_PER_FAMILY`] of a family that
    /// needs no human).
    pub fn family(&self, f: Family) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(move |i| i.family() == f)
    }

    /// How many rows a family lists in all (diff.csv holds every one).
    pub fn family_rows(&self, f: Family) -> usize {
        self.family_rows.get(&f).copied().unwrap_or(0)
    }

    /// Rows that need a human (money at risk and review), most severe first.
    pub fn exceptions(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.family().needs_review())
    }

    /// Number of rows that need a human.
    pub fn exception_count(&self) -> usize {
        self.totals
            .iter()
            .filter(|(o, _)| Family::of(**o).needs_review())
            .map(|(_, t)| t.count)
            .sum()
    }

    /// Outcomes with rows, in report order (see [`ReportView::all_outcomes`]).
    pub fn outcomes_by_family(&self) -> Vec<(Family, Outcome, &OutcomeTotal)> {
        self.all_outcomes()
            .into_iter()
            .filter(|(_, _, t)| t.count > 0)
            .collect()
    }

    /// Every outcome in report order: by family, then [`rank`], then vocabulary order.
    pub fn all_outcomes(&self) -> Vec<(Family, Outcome, &OutcomeTotal)> {
        let mut v: Vec<(Family, Outcome, &OutcomeTotal)> = self
            .totals
            .iter()
            .map(|(o, t)| (Family::of(*o), *o, t))
            .collect();
        v.sort_by_key(|(f, o, _)| (*f, rank(*o), *o));
        v
    }
}

/// File names of the reports in the run folder.
pub const XLSX_FILE: &str = "report.xlsx";
/// HTML report.
pub const HTML_FILE: &str = "report.html";
/// results.csv restricted to the listed rows (the email's CSV attachment).
pub const DIFF_CSV_FILE: &str = "diff.csv";
/// The decide-workbook (Summary and Decide for the first cases, by severity then value), written beside the
/// reports when the email carries it instead of a report.xlsx too large to attach.
pub const DECIDE_XLSX_FILE: &str = "decide.xlsx";
/// The alert message when the file transport is used, or in a dry run.
pub const EML_FILE: &str = "email.eml";

/// Writes `view` as report.xlsx and report.html into `dir`.
pub fn write_view(dir: &Path, view: &ReportView) -> Result<()> {
    let started = std::time::Instant::now();
    xlsx::write(&dir.join(XLSX_FILE), view)?;
    let xlsx_ms = started.elapsed().as_millis() as u64;
    let path = dir.join(HTML_FILE);
    std::fs::write(&path, html::report(view))
        .with_context(|| format!("writing {}", path.display()))?;
    tracing::debug!(
        rows = view.items.len(),
        xlsx_ms,
        html_ms = started.elapsed().as_millis() as u64 - xlsx_ms,
        "Reports written."
    );
    Ok(())
}

/// Formats UTC micros as RFC 3339 for reports.
pub(crate) fn utc(t: Micros) -> String {
    crate::timeparse::format_utc(t)
}

/// Text shown as plain text (the email, the terminal): every control character (terminal
/// escapes, stray CRs and line breaks) and invisible character written as `<U+XXXX>`
/// ([`crate::outputs::terminal`]).
pub fn text_safe(s: &str) -> std::borrow::Cow<'_, str> {
    crate::outputs::terminal(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_one_family_and_review_families_are_the_ticket_ones() {
        for o in Outcome::ALL {
            let f = Family::of(o);
            assert_eq!(Family::parse(f.as_str()), Some(f));
            // Every outcome that raises a ticket is either money at risk or review.
            assert_eq!(o.ticket_severity().is_some(), f.needs_review(), "{o:?}");
        }
    }

    fn item(outcome: Outcome, minor: i64, currency: &'static str, age_days: i64) -> Item {
        Item {
            outcome,
            severity: outcome.ticket_severity(),
            status: None,
            action: Action::Ticket,
            payment_id: Some(format!("P-{minor}-{age_days}").into()),
            lines: vec![],
            amount: Some(Money { minor, currency }),
            recipient: CompactString::default(),
            started_at: None,
            age_days,
            rule: Arc::from(""),
            detail: Cow::Borrowed(""),
        }
    }

    /// The view keeps every row that needs a human and the first `keep` of each other family,
    /// counting all of them: the same rows, in the same order, as sorting everything and cutting
    /// afterwards, whatever order they come in (pruned as they come).
    #[test]
    fn a_view_keeps_the_first_rows_of_families_without_cases_and_counts_every_row() {
        let outcomes = [
            Outcome::AwaitingEvidence,
            Outcome::ResolvedSucceeded,
            Outcome::Refund,
            Outcome::Ambiguous,
            Outcome::MissingAtProvider,
        ];
        let mut all = Vec::new();
        let mut x: u64 = 7;
        for n in 0..1000i64 {
            // A fixed pseudo-random sequence: amounts and ages in no order, some equal.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let o = outcomes[(x >> 33) as usize % outcomes.len()];
            let mut i = item(
                o,
                ((x >> 40) % 50) as i64 * 100,
                "EUR",
                (x >> 20) as i64 % 9,
            );
            i.payment_id = Some(format!("P-{n:04}").into());
            all.push(i);
        }
        let keep = 7;
        let mut listed = Listed::new(None, Some(keep), 0);
        for i in all.iter().cloned() {
            listed.push(i);
        }
        let (items, rows) = listed.finish();
        let view = ReportView::of_items(
            Summary::default(),
            BTreeMap::new(),
            (items, rows, Some(keep)),
            cases::Marks::default(),
            (0, 0),
            false,
        );
        let mut expected = all.clone();
        sort_items(&mut expected, None);
        keep_first(&mut expected, keep);
        assert_eq!(view.items, expected);
        for f in [Family::Pending, Family::Resolved, Family::Informational] {
            assert_eq!(view.family(f).count(), keep, "{f:?}");
            let given = all.iter().filter(|i| i.family() == f).count();
            assert!(given > 3 * keep, "{f:?}: {given} rows, enough to be pruned");
            assert_eq!(view.family_rows(f), given, "{f:?}");
        }
        for f in [Family::Review, Family::MoneyAtRisk] {
            let given = all.iter().filter(|i| i.family() == f).count();
            assert_eq!(view.family(f).count(), given, "{f:?}: every row kept");
            assert_eq!(view.family_rows(f), given, "{f:?}");
        }
        // The first of a family are its largest amounts.
        let first: Vec<i64> = view
            .family(Family::Pending)
            .map(|i| i.amount.unwrap().minor)
            .collect();
        let mut amounts: Vec<i64> = all
            .iter()
            .filter(|i| i.family() == Family::Pending)
            .map(|i| i.amount.unwrap().minor)
            .collect();
        amounts.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(first, amounts[..keep]);
    }

    #[test]
    fn rows_order_by_severity_then_amount_then_age_with_no_outcome_apart() {
        let ranked: Vec<u8> = [
            Outcome::FailedButPaid,
            Outcome::DuplicateAtProvider,
            Outcome::AmountMismatch,
            Outcome::Ambiguous,
            Outcome::ProposedMatch,
            Outcome::Matched,
        ]
        .map(rank)
        .to_vec();
        assert!(ranked.windows(2).all(|w| w[0] < w[1]), "{ranked:?}");

        let mut items = vec![
            item(Outcome::OrphanAtProvider, 1_000_000, "EUR", 1),
            item(Outcome::DuplicateAtProvider, 50_000, "EUR", 1),
            item(Outcome::FailedButPaid, 100, "EUR", 0),
            item(Outcome::DuplicateAtProvider, 50_000, "EUR", 7),
            item(Outcome::DuplicateAtProvider, -90_000, "EUR", 0),
            item(Outcome::ResolvedSucceeded, 5_000_000, "EUR", 9),
        ];
        sort_items(&mut items, None);
        let order: Vec<(Outcome, i64, i64)> = items
            .iter()
            .map(|i| (i.outcome, i.amount.map_or(0, |m| m.minor), i.age_days))
            .collect();
        assert_eq!(
            order,
            [
                // Critical: the larger amount (by absolute value), then the older; a
                // FAILED_BUT_PAID row is one critical row among the others, as in the cases.
                (Outcome::DuplicateAtProvider, -90_000, 0),
                (Outcome::DuplicateAtProvider, 50_000, 7),
                (Outcome::DuplicateAtProvider, 50_000, 1),
                (Outcome::FailedButPaid, 100, 0),
                (Outcome::OrphanAtProvider, 1_000_000, 1),
                // No ticket: last, whatever its amount.
                (Outcome::ResolvedSucceeded, 5_000_000, 9),
            ]
        );
    }

    #[test]
    fn with_a_reporting_currency_rows_order_by_value_and_unvalued_ones_come_after() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        let rate = |per_eur: &str| crate::rates::Rate {
            per_eur: d(per_eur),
            date: None,
            from: "fixed".into(),
        };
        let v = crate::rates::Valuation {
            currency: "EUR".into(),
            rates: [
                ("JPY".to_string(), rate("160")),
                ("GBP".to_string(), rate("0.8")),
            ]
            .into_iter()
            .collect(),
        };
        let mut items = vec![
            // 500,000 JPY: 3,125.00 EUR at 160 per EUR.
            item(Outcome::FailedButPaid, 500_000, "JPY", 0),
            // 4,000.00 EUR.
            item(Outcome::FailedButPaid, 400_000, "EUR", 0),
            // 3,000.00 GBP: 3,750.00 EUR at 0.8 per EUR.
            item(Outcome::FailedButPaid, 300_000, "GBP", 0),
            // 9,000.00 CHF: no rate, after every valued row of its severity.
            item(Outcome::FailedButPaid, 900_000, "CHF", 0),
            // 10.00 EUR, but high: after every critical row.
            item(Outcome::AmountMismatch, 1_000, "EUR", 0),
        ];
        sort_items(&mut items, Some(&v));
        let order: Vec<(i64, &str)> = items
            .iter()
            .map(|i| i.amount.map(|m| (m.minor, m.currency)).unwrap())
            .collect();
        assert_eq!(
            order,
            [
                (400_000, "EUR"),
                (300_000, "GBP"),
                (500_000, "JPY"),
                (900_000, "CHF"),
                (1_000, "EUR"),
            ]
        );
        // Without rates: by the number of units.
        sort_items(&mut items, None);
        let units: Vec<&str> = items.iter().map(|i| i.amount.unwrap().currency).collect();
        assert_eq!(units, ["JPY", "CHF", "EUR", "GBP", "EUR"]);
    }

    #[test]
    fn sums_beyond_i64_stay_exact() {
        let big = i128::from(i64::MAX) * 3;
        assert_eq!(total_text(big, "EUR"), "276701161105643274.21");
        assert_eq!(total_text(-5, "JPY"), "-5");
        assert_eq!(total_text(1, "KWD"), "0.001");
    }

    #[test]
    fn control_characters_are_replaced_in_text() {
        assert_eq!(text_safe("a\u{1b}[31mb\r"), "a<U+001B>[31mb<U+000D>");
        assert_eq!(text_safe("x\u{202e}y"), "x<U+202E>y");
        assert_eq!(text_safe("plain"), "plain");
    }
}
