//! `summary.json`: counts and amounts per outcome and currency, inputs with sha256, the rules
//! hash, transitions, tickets, completeness warnings and timings.

use crate::ledger::Payment;
use crate::money;
use crate::outcome::{Outcome, ResultRow};
use crate::sources::{InputFile, StatementLine};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counts and money for one outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OutcomeStats {
    /// Rows with this outcome.
    pub count: usize,
    /// Currency → total amount (decimal text): the payment's amount for payment rows, the
    /// line's amount for line rows.
    pub amounts: BTreeMap<String, String>,
}

/// What happened to the planned transitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TransitionStats {
    /// Transitions the classification asked for.
    pub planned: usize,
    /// Applied by this run.
    pub applied: usize,
    /// Already applied by an earlier run (re-run).
    pub already_applied: usize,
    /// Refused: the payment was moved by someone else.
    pub conflicts: usize,
}

impl TransitionStats {
    /// Adds another run's counts (a range's days, a night's shards).
    pub fn add(&mut self, o: &TransitionStats) {
        self.planned += o.planned;
        self.applied += o.applied;
        self.already_applied += o.already_applied;
        self.conflicts += o.conflicts;
    }
}

/// Appends each warning of `more` that `warnings` does not hold yet, in order.
pub fn add_distinct_warnings(warnings: &mut Vec<String>, more: &[String]) {
    for w in more {
        if !warnings.contains(w) {
            warnings.push(w.clone());
        }
    }
}

/// Ticket counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TicketStats {
    /// New tickets.
    pub created: usize,
    /// Tickets that already existed (open or resolved), including the reopened ones.
    pub existing: usize,
    /// Of those, resolved tickets whose evidence changed: opened again by this run.
    pub reopened: usize,
}

impl TicketStats {
    /// Adds another run's counts (a range's days, a night's shards).
    pub fn add(&mut self, o: &TicketStats) {
        self.created += o.created;
        self.existing += o.existing;
        self.reopened += o.reopened;
    }

    /// `2 new, 5 already known` (`, 1 reopened` when a run opened resolved tickets again).
    pub fn text(&self) -> String {
        let mut s = format!("{} new, {} already known", self.created, self.existing);
        if self.reopened > 0 {
            s.push_str(&format!(", {} reopened", self.reopened));
        }
        s
    }
}

/// The run's review rows grouped into cases (what one human decision settles; see
/// `report::cases`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CaseCounts {
    /// Cases.
    pub cases: usize,
    /// Review rows (one ticket each) in those cases.
    pub tickets: usize,
    /// Severity name → cases.
    pub by_severity: BTreeMap<String, usize>,
}

/// One shard of a gathered night, as summary.json lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ShardCount {
    /// Shard index.
    pub shard: u32,
    /// Its run.
    pub run_id: String,
    /// The partitions it reconciled.
    pub partitions: Vec<String>,
    /// Payments it loaded.
    pub payments_loaded: usize,
    /// Payments it reported.
    pub payments_in_scope: usize,
    /// Statement lines it read.
    pub statement_lines: usize,
}

/// The whole summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Summary {
    /// Run id.
    pub run_id: String,
    /// First day.
    pub range_from: String,
    /// Last day (inclusive).
    pub range_to: String,
    /// Cut-off.
    pub as_of: String,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// sha256 of the rule files.
    pub rules_hash: String,
    /// Statement files read.
    pub inputs: Vec<InputFile>,
    /// Payments loaded (candidates).
    pub payments_loaded: usize,
    /// Payments reported.
    pub payments_in_scope: usize,
    /// Statement lines accepted.
    pub statement_lines: usize,
    /// Statement lines rejected (see rejected.csv).
    pub rejected_lines: usize,
    /// Outcome → stats (every outcome listed, zeros included).
    pub outcomes: BTreeMap<String, OutcomeStats>,
    /// Transitions.
    pub transitions: TransitionStats,
    /// Tickets.
    pub tickets: TicketStats,
    /// Cases: the review rows grouped by the decision that settles them.
    pub cases: CaseCounts,
    /// Completeness warnings: why some windows cannot be closed.
    pub warnings: Vec<String>,
    /// Completeness gates per source and period (balance chains, control totals, daily files,
    /// readable files); a failed one is also a warning.
    pub gates: Vec<crate::sources::Gate>,
    /// Statement files that are there but could not be read: nothing in them was used and
    /// their days are incomplete. Critical: the report and the alert name them first, and
    /// the process exits with [`crate::exit::INPUT_UNREADABLE`].
    pub unreadable_inputs: Vec<crate::sources::Unreadable>,
    /// Stage → milliseconds.
    pub timings_ms: BTreeMap<String, u64>,
    /// A gathered night (`recon gather`): each shard's run and how many payments it
    /// reconciled, so a skewed split shows. Absent for one process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardCount>,
    /// What the run did with the decisions inbox before it reconciled: the files applied, the
    /// folders and files skipped (with why). Absent when the run had no inbox pass (no
    /// `decisions_inbox`, a dry run, a shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox: Option<InboxSummary>,
    /// The reporting currency, the rates the run used and the money at risk in it. Absent
    /// without `reporting_currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reporting: Option<ReportingSummary>,
    /// `[shadow]`: what the shadow rules would change on the same evidence (nothing of it
    /// applied). Absent without `[shadow]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowSummary>,
}

/// What a night's `[shadow]` rules would change (`summary.json` `shadow`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ShadowSummary {
    /// The shadow rules folder.
    pub rules_dir: String,
    /// Why the shadow rules were not planned (they do not validate, or their plan failed);
    /// the night itself is unaffected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Rows that would become automatic transitions (or change their transition).
    pub to_transition: usize,
    /// Their value in the reporting currency (`90.00 EUR`), when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_transition_value: Option<String>,
    /// Automatic transitions that would become review cases.
    pub from_transition: usize,
    /// Outcomes that would change without a transition either side.
    pub outcome_only: usize,
    /// Rows a provider's status answer decided tonight: the shadow plan asks no provider, so
    /// they are not compared.
    pub not_compared: usize,
    /// The first flips, most dangerous first.
    pub first: Vec<ShadowFlip>,
    /// The shadow's new automatic decisions against reviewers' decisions so far: decided the
    /// same, differently, dismissed, escalated, not yet.
    pub reviewers_same: usize,
    /// See `reviewers_same`.
    pub reviewers_different: usize,
    /// See `reviewers_same`.
    pub reviewers_dismissed: usize,
    /// See `reviewers_same`.
    pub reviewers_escalated: usize,
    /// See `reviewers_same`.
    pub reviewers_undecided: usize,
}

/// One flip the shadow rules would make (see [`ShadowSummary::first`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ShadowFlip {
    /// The payment id, or `source:line id`.
    pub id: String,
    /// `40.00 EUR`.
    pub amount: String,
    /// With the live rules (`AMBIGUOUS (review)`).
    pub before: String,
    /// With the shadow rules (`RESOLVED_SUCCEEDED → SUCCEEDED`).
    pub after: String,
    /// The shadow rule that decided.
    pub rule: String,
    /// What reviewers decided on it, in words (empty: not a new transition).
    pub reviewers: String,
}

impl ShadowSummary {
    /// The rows the shadow rules would change.
    pub fn flips(&self) -> usize {
        self.to_transition + self.from_transition + self.outcome_only
    }

    /// One sentence for the report and the email.
    pub fn sentence(&self) -> String {
        if let Some(e) = &self.error {
            return format!(
                "The shadow rules ({}) were not planned: {e}",
                self.rules_dir
            );
        }
        if self.flips() == 0 {
            return format!(
                "The shadow rules ({}) would change nothing tonight.",
                self.rules_dir
            );
        }
        let mut parts = Vec::new();
        if self.to_transition > 0 {
            let value = self
                .to_transition_value
                .as_deref()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default();
            parts.push(format!(
                "{} would become automatic transitions{value}",
                self.to_transition
            ));
        }
        if self.from_transition > 0 {
            parts.push(format!(
                "{} automatic transition(s) would go to review instead",
                self.from_transition
            ));
        }
        if self.outcome_only > 0 {
            parts.push(format!(
                "{} would get another outcome, with no transition either way",
                self.outcome_only
            ));
        }
        let decided = self.reviewers_same
            + self.reviewers_different
            + self.reviewers_dismissed
            + self.reviewers_escalated
            + self.reviewers_undecided;
        let mut s = format!(
            "The shadow rules ({}) would change {} row(s) tonight: {}.",
            self.rules_dir,
            self.flips(),
            parts.join("; ")
        );
        if decided > 0 {
            s.push_str(&format!(
                " Against reviewers so far: {} decided the same, {} differently, {} dismissed, \
                 {} escalated, {} not yet.",
                self.reviewers_same,
                self.reviewers_different,
                self.reviewers_dismissed,
                self.reviewers_escalated,
                self.reviewers_undecided
            ));
        }
        s
    }
}

/// The money at risk in the reporting currency (`summary.json` `reporting`): values for
/// ordering and totals only, at the rates listed; each case's exact amounts stay in their own
/// currencies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ReportingSummary {
    /// The currency and the rates (each with its day and file, or `fixed`).
    #[serde(flatten)]
    pub valuation: crate::rates::Valuation,
    /// Money at risk of the cases waiting for a decision, in `currency` (decimal text rounded
    /// to its minor unit), the cases without a rate left out.
    pub total_at_risk: String,
    /// Severity name → money at risk of its cases waiting for a decision, as `total_at_risk`.
    pub at_risk_by_severity: BTreeMap<String, String>,
    /// Cases in the total.
    pub cases_valued: usize,
    /// Cases left out of it: one of their currencies has no rate.
    pub cases_without_rate: usize,
    /// The currencies without a rate.
    pub currencies_without_rate: Vec<String>,
}

/// The decisions inbox as one run found and left it (`summary.json` `inbox`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InboxSummary {
    /// The inbox folder.
    pub folder: String,
    /// Files applied by this run, in the order applied.
    pub applied: Vec<InboxApplied>,
    /// Folders and files left alone, each with why: nothing in them was applied.
    pub skipped: Vec<InboxSkipped>,
    /// Files an earlier run applied (the same bytes, the same reviewer): left where they are,
    /// not applied again.
    pub applied_before: Vec<String>,
}

impl InboxSummary {
    /// Whether a person should look: something was skipped.
    pub fn needs_attention(&self) -> bool {
        !self.skipped.is_empty()
    }
}

/// One decision file the inbox pass applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InboxApplied {
    /// Where it was read.
    pub path: String,
    /// The reviewer it was applied as (its folder's).
    pub reviewer: String,
    /// sha256 of the bytes applied.
    pub sha256: String,
    /// Where recon wrote its result file (None: it could not be written; see `note`).
    pub result_file: Option<String>,
    /// Rows per result (`applied`, `waiting for approval`, `unchanged`, `refused`).
    pub rows: BTreeMap<String, usize>,
    /// Anything else to know (the result file that could not be written).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A folder or file of the inbox left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InboxSkipped {
    /// The folder or file.
    pub path: String,
    /// Why nothing in it was applied.
    pub why: String,
}

/// Count and sums per currency of one outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutcomeTotal {
    /// Rows.
    pub count: usize,
    /// Currency → sum of minor units.
    pub amounts: BTreeMap<&'static str, i128>,
}

/// Counts and sums per outcome and currency, added to once per result row (a million times a
/// run): an array indexed by outcome and a short list of currencies, made into maps once.
#[derive(Debug, Clone)]
pub struct OutcomeSums(Vec<(usize, Vec<(&'static str, i128)>)>);

impl Default for OutcomeSums {
    fn default() -> Self {
        OutcomeSums(vec![Default::default(); Outcome::ALL.len()])
    }
}

impl OutcomeSums {
    /// Counts one item of `outcome` and adds its amount (minor units, currency), if any.
    pub fn add(&mut self, outcome: Outcome, money: Option<(i64, &'static str)>) {
        let (count, amounts) = &mut self.0[outcome as usize];
        *count += 1;
        if let Some((minor, currency)) = money {
            match amounts.iter_mut().find(|(c, _)| *c == currency) {
                Some((_, sum)) => *sum += i128::from(minor),
                None => amounts.push((currency, i128::from(minor))),
            }
        }
    }

    /// Every outcome (zeros included) with its count and sums.
    pub fn totals(self) -> BTreeMap<Outcome, OutcomeTotal> {
        Outcome::ALL
            .into_iter()
            .zip(self.0)
            .map(|(o, (count, amounts))| {
                let amounts = amounts.into_iter().collect();
                (o, OutcomeTotal { count, amounts })
            })
            .collect()
    }
}

/// Counts and sums rows per outcome and currency: a payment row counts the payment's amount,
/// a line row its (first) line's.
pub fn outcome_totals(
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> BTreeMap<Outcome, OutcomeTotal> {
    let mut sums = OutcomeSums::default();
    for r in rows {
        let money = match r.payment {
            Some(p) => Some((
                payments[p as usize].amount_minor,
                payments[p as usize].currency,
            )),
            None => r.lines.first().map(|&l| {
                let l = &lines[l as usize];
                (l.amount_minor, l.currency)
            }),
        };
        sums.add(r.outcome, money);
    }
    sums.totals()
}

/// summary.json's form of `totals`: outcome names, amounts as decimal text.
pub fn outcome_stats(totals: &BTreeMap<Outcome, OutcomeTotal>) -> BTreeMap<String, OutcomeStats> {
    totals
        .iter()
        .map(|(o, t)| {
            let amounts = t
                .amounts
                .iter()
                .map(|(&c, &v)| {
                    let text = i64::try_from(v)
                        .map(|v| money::format_minor(v, c))
                        .unwrap_or_else(|_| format!("{v} (minor units)"));
                    (c.to_string(), text)
                })
                .collect();
            let stats = OutcomeStats {
                count: t.count,
                amounts,
            };
            (o.as_str().to_string(), stats)
        })
        .collect()
}

/// The lines a run's terminal summary and a range's share: outcomes with money, transitions,
/// tickets, warnings.
pub fn write_totals(
    s: &mut String,
    outcomes: &BTreeMap<String, OutcomeStats>,
    transitions: &TransitionStats,
    tickets: &TicketStats,
    warnings: &[String],
) {
    for (name, st) in outcomes {
        if st.count > 0 {
            let money: Vec<String> = st.amounts.iter().map(|(c, a)| format!("{a} {c}")).collect();
            let _ = writeln!(s, "  {name:<22} {:>8}   {}", st.count, money.join(", "));
        }
    }
    let t = transitions;
    let _ = writeln!(
        s,
        "  transitions: {} planned, {} applied, {} already applied, {} conflicts",
        t.planned, t.applied, t.already_applied, t.conflicts
    );
    let _ = writeln!(s, "  tickets: {}", tickets.text());
    for w in warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
}

/// The critical lines about files that could not be read (nothing when there are none).
pub fn write_unreadable(s: &mut String, files: &[crate::sources::Unreadable]) {
    for f in files {
        let _ = writeln!(
            s,
            "  CRITICAL: {} file {} ({}) cannot be read; nothing in it was used and its days are incomplete: {}",
            f.source, f.path, f.period, f.error
        );
    }
}

/// The decisions inbox's line, and one line per folder or file skipped (nothing without an
/// inbox pass).
pub fn write_inbox(s: &mut String, inbox: Option<&InboxSummary>) {
    let Some(i) = inbox else {
        return;
    };
    let safe = |t: &str| crate::textsafe::terminal(t).into_owned();
    let _ = writeln!(
        s,
        "  decisions inbox {}: {} file(s) applied, {} skipped, {} applied before",
        safe(&i.folder),
        i.applied.len(),
        i.skipped.len(),
        i.applied_before.len()
    );
    for k in &i.skipped {
        let _ = writeln!(s, "  skipped: {}: {}", safe(&k.path), safe(&k.why));
    }
}

impl Summary {
    /// A short human summary for the terminal (and the log).
    pub fn text(&self, out_dir: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "recon run {}: {} .. {} (as of {}){}",
            self.run_id,
            self.range_from,
            self.range_to,
            self.as_of,
            if self.dry_run {
                " [dry run: nothing changed]"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "  {} payments in scope ({} loaded), {} statement lines, {} rejected",
            self.payments_in_scope, self.payments_loaded, self.statement_lines, self.rejected_lines
        );
        write_unreadable(&mut s, &self.unreadable_inputs);
        write_inbox(&mut s, self.inbox.as_ref());
        write_totals(
            &mut s,
            &self.outcomes,
            &self.transitions,
            &self.tickets,
            &self.warnings,
        );
        let _ = writeln!(s, "  results: {out_dir}");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_index_their_own_position_in_all() {
        // OutcomeSums counts into an array indexed by `outcome as usize`.
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i, "{o:?}");
        }
    }
}
