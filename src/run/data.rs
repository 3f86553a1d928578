//! What one run works on, shared by the night (which plans and writes it), `effects` (which
//! applies it) and `explain`: the options ([`RunOptions`]) and the classified rows (`RunData`).

use crate::ledger::Payment;
use crate::outcome::{Outcome, ResultRow};
use crate::outputs::summary::OutcomeTotal;
use crate::sources::StatementLine;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeMap;

/// What to reconcile.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// First day (in the job's time zone).
    pub from: NaiveDate,
    /// Last day, inclusive.
    pub to: NaiveDate,
    /// Cut-off; `None` = now.
    pub as_of: Option<DateTime<Utc>>,
    /// Write results, change nothing.
    pub dry_run: bool,
    /// Fixed run id (tests); generated when `None`.
    pub run_id: Option<String>,
    /// Wait for the run lock instead of failing when another run holds it.
    pub wait: bool,
}

/// The rows of a run: read by the writer thread and the database step at the same time.
pub(crate) struct RunData {
    pub(crate) payments: Vec<Payment>,
    pub(crate) lines: Vec<StatementLine>,
    pub(crate) rows: Vec<ResultRow>,
    /// The rows' counts and sums by outcome (summary.json and the reports show them).
    pub(crate) totals: BTreeMap<Outcome, OutcomeTotal>,
    /// settlement.csv (the three-way view).
    pub(crate) settlement: Vec<crate::outputs::settlement::Row>,
    /// Payment index → the provider id a status answer gave it (its transition records it).
    pub(crate) status_provider_ids: std::collections::HashMap<u32, String>,
    /// A shard's batches of the shared settlement rules, for the gather ([`crate::run::shared`]).
    pub(crate) handed: crate::run::shared::HandOver,
    /// Payment index → the reviewers' confirmations its transition rests on (its history
    /// reason names them).
    pub(crate) confirmations: std::collections::HashMap<u32, String>,
    /// A shard's rows that share a line with a row another shard reports (a line that names a
    /// payment of another shard's partition): the keys (`run::handover::row_key`) of
    /// the rows whose cases the gather stores, as one process groups them. Empty elsewhere.
    pub(crate) crossing: std::collections::HashSet<String>,
}

impl RunData {
    /// The rows as [`crate::flips`] compares two plans' (`recon backtest`, `[shadow]`).
    pub(crate) fn flip_rows(&self) -> crate::flips::Rows<'_> {
        crate::flips::Rows {
            payments: &self.payments,
            lines: &self.lines,
            rows: &self.rows,
        }
    }
}
