//! Bank sources shared by all partitions (issue 34): the account that receives every
//! partition's payouts.
//!
//! In a partitioned job a `role = "bank"` source may leave out `partition`, as the bank side
//! of `[[settlement]]` rules (`RuleSet::for_job` refuses it otherwise, exit 3). Its lines carry the
//! partition id [`crate::partition::SHARED`], which no payment has: the wall keeps them out of
//! every pairing with payments, and they are evidence of no payment. They take part in
//! three-way matching only:
//!
//! 1. Wherever the provider lines are read (one process, or each shard for its partitions),
//!    the batches of the shared rules are summed (`hand_over`) but not paired: a shard hands
//!    them to the gather in `shard.json`, with the few provider lines their rows may show (the
//!    payout lines, or a batch's first line). This module computes them ([`HandOver`]); their
//!    format in `shard.json` is the hand-over module's (`run::handover`).
//! 2. Where the shared source is read (one process, or the gather, once for the night), the
//!    batches of every partition are paired with its credits ([`decide`]): SETTLED, mismatch,
//!    ambiguous, PAYOUT_MISSING_AT_BANK, UNMATCHED_BANK_CREDIT, and a ticket for every other
//!    line booked there in the night (a debit on a payout account is for a human).
//!
//! One process and the gather run the same [`decide`] on the same values, so a sharded
//! night's rows are the one process's.

use crate::config::{Config, LineKind};
use crate::matching::Pair;
use crate::matching::settlement::{self, Batch, BatchStatus};
use crate::outcome::{self, Action, Outcome, ResultRow};
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use crate::timeparse::Micros;
use anyhow::{Result, anyhow};
use std::collections::HashMap;
use std::sync::Arc;

/// Whether `source` is shared by all partitions of the job.
pub fn is_shared(cfg: &Config, source: &crate::config::SourceConfig) -> bool {
    cfg.partition.is_some() && source.partition.is_none()
}

/// The batches of the shared rules, summed where their provider lines were read, for
/// [`decide`]. A shard hands them to the gather in `shard.json` (its format is
/// `run::handover`'s, the hand-over module).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandOver {
    /// The batches, sorted by rule, key and currency.
    pub batches: Vec<HandedBatch>,
    /// The provider lines their rows may show.
    pub lines: Vec<HandedLine>,
}

/// One batch of a shared rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedBatch {
    /// The settlement rule's id.
    pub rule: String,
    /// The batch's key.
    pub key: String,
    /// Its currency.
    pub currency: &'static str,
    /// The sum of its items.
    pub net_minor: i64,
    /// The sum of its payout lines, if it has any.
    pub payout_minor: Option<i64>,
    /// How many items it has.
    pub items: usize,
    /// Items the ledger matched.
    pub matched: usize,
    /// One of its own lines is booked in the night.
    pub touched: bool,
    /// When its last line was booked.
    pub last_booked: Micros,
    /// Into [`HandOver::lines`].
    pub payout_lines: Vec<u32>,
    /// Into [`HandOver::lines`]: the first item, for a batch without payout lines.
    pub first_item: Option<u32>,
}

/// A provider line a handed batch's rows may show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedLine {
    /// The line.
    pub line: StatementLine,
    /// The night reports it (a fee, payout or balance line no three-way row shows gets a row).
    pub reported: bool,
}

/// The shared rules' batches of `lines` (unpaired), and the indexes in `lines` of the handed
/// lines. `links` are the ledger's matches, `reported` marks the lines the night reports.
fn hand_over(
    lines: &[StatementLine],
    rules: &RuleSet,
    links: &[Pair],
    reported: &[bool],
    range: (Micros, Micros),
) -> Result<(HandOver, Vec<u32>)> {
    let mut out = HandOver::default();
    let mut linked = vec![false; lines.len()];
    for p in links {
        linked[p.line as usize] = true;
    }
    let mut taken: Vec<u32> = Vec::new();
    let mut at: HashMap<u32, u32> = HashMap::new();
    let mut take = |li: u32| -> u32 {
        *at.entry(li).or_insert_with(|| {
            taken.push(li);
            (taken.len() - 1) as u32
        })
    };
    for b in settlement::shared_batches(lines, &rules.settlements)? {
        let in_range = |i: &u32| {
            let t = lines[*i as usize].booked_at;
            t >= range.0 && t < range.1
        };
        let payout_lines: Vec<u32> = b.payout_lines.iter().map(|&l| take(l)).collect();
        let first_item = if payout_lines.is_empty() {
            b.items.first().map(|&l| take(l))
        } else {
            None
        };
        out.batches.push(HandedBatch {
            rule: rules.settlements[b.rule].id.to_string(),
            key: b.key.clone(),
            currency: b.currency,
            net_minor: b.net_minor,
            payout_minor: b.payout_minor,
            items: b.item_count,
            matched: b.items.iter().filter(|&&i| linked[i as usize]).count(),
            touched: b.items.iter().chain(&b.payout_lines).any(in_range),
            last_booked: b.last_booked,
            payout_lines,
            first_item,
        });
    }
    out.lines = taken
        .iter()
        .map(|&li| HandedLine {
            line: lines[li as usize].clone(),
            reported: reported[li as usize],
        })
        .collect();
    Ok((out, taken))
}

/// The night the shared settlement is decided for.
pub struct Night<'a> {
    /// The cut-off.
    pub as_of: Micros,
    /// The settlement lag after a batch's window (a payout is missing only past it).
    pub lag: Micros,
    /// The night's days, `[from, to)`: rows booked (or due) in it are reported.
    pub range: (Micros, Micros),
    /// A source's complete coverage, by source name.
    pub coverage: &'a HashMap<&'a str, &'a [(Micros, Micros)]>,
}

/// The shared settlement where a night's provider lines are read (its plan): the shared
/// rules' batches, handed over for the gather by a shard (`pair_here` false), or paired here
/// with the night's shared lines by one process, the rows then pointing into `lines`. The
/// lines those rows show (and every shared line) are cleared from `report_line`, so classify
/// leaves them to these rows. Nothing when no rule's bank is shared.
pub fn in_night(
    lines: &[StatementLine],
    links: &[Pair],
    rules: &RuleSet,
    report_line: &mut [bool],
    pair_here: bool,
    night: &Night<'_>,
) -> Result<(HandOver, Option<Decided>)> {
    if !rules.settlements.iter().any(|r| r.shared) {
        return Ok((HandOver::default(), None));
    }
    let (handed, taken) = hand_over(lines, rules, links, report_line, night.range)?;
    let shared_lines: Vec<u32> = (0..lines.len() as u32)
        .filter(|&i| lines[i as usize].origin.partition == crate::partition::SHARED)
        .collect();
    for &i in taken.iter().chain(&shared_lines) {
        report_line[i as usize] = false;
    }
    if !pair_here {
        return Ok((handed, None));
    }
    let bank = shared_lines
        .iter()
        .map(|&i| lines[i as usize].clone())
        .collect();
    let mut decided = decide(vec![handed], bank, rules, night)?;
    // The rows point into the decided lines: point them into the night's.
    let n = decided.handed;
    for r in &mut decided.rows {
        for l in &mut r.lines {
            let i = *l as usize;
            *l = if i < n { taken[i] } else { shared_lines[i - n] };
        }
    }
    Ok((HandOver::default(), Some(decided)))
}

/// What the shared sources decided for a night.
#[derive(Debug)]
pub struct Decided {
    /// The handed provider lines (in hand-over order), then the shared sources' lines: what
    /// the rows' line indexes point into.
    pub lines: Vec<StatementLine>,
    /// How many of `lines` are handed provider lines.
    pub handed: usize,
    /// Line rows, in a night's line order.
    pub rows: Vec<ResultRow>,
    /// settlement.csv rows (the shared rules' batches, then the shared credits no batch
    /// explains).
    pub settlement: Vec<crate::outputs::settlement::Row>,
}

/// The night's shared settlement: every partition's hand-over (in shard order) paired with
/// `bank`, the lines of the shared sources. A batch is missing at the bank only past the
/// as-of plus the lag, on a statement that covers its window completely.
pub fn decide(
    handovers: Vec<HandOver>,
    bank: Vec<StatementLine>,
    rules: &RuleSet,
    night: &Night<'_>,
) -> Result<Decided> {
    let range = night.range;
    let mut lines = Vec::new();
    let mut reported = Vec::new();
    let mut batches: Vec<(Batch, bool, usize)> = Vec::new();
    for h in handovers {
        let base = lines.len() as u32;
        for l in h.lines {
            reported.push(l.reported);
            lines.push(l.line);
        }
        for b in h.batches {
            let rule = rules
                .settlements
                .iter()
                .position(|r| *r.id == *b.rule)
                .ok_or_else(|| {
                    anyhow!(
                        "a shard handed a batch of unknown settlement rule {:?}",
                        b.rule
                    )
                })?;
            batches.push((
                Batch {
                    rule,
                    key: b.key,
                    currency: b.currency,
                    net_minor: b.net_minor,
                    payout_minor: b.payout_minor,
                    items: b.first_item.map(|f| vec![base + f]).unwrap_or_default(),
                    item_count: b.items,
                    payout_lines: b.payout_lines.iter().map(|&l| base + l).collect(),
                    last_booked: b.last_booked,
                    status: BatchStatus::Unpaid,
                },
                b.touched,
                b.matched,
            ));
        }
    }
    let handed = lines.len();
    lines.extend(bank);
    batches.sort_by(|a, b| {
        (a.0.rule, &a.0.key, a.0.currency).cmp(&(b.0.rule, &b.0.key, b.0.currency))
    });
    let side: Vec<(bool, usize)> = batches.iter().map(|(_, t, m)| (*t, *m)).collect();
    let mut st = settlement::pair(
        &lines,
        &rules.settlements,
        batches.into_iter().map(|(b, _, _)| b).collect(),
        &|_| true,
    )?;
    settlement::close_unpaid(
        &mut st,
        &rules.settlements,
        night.as_of,
        night.lag,
        |name| night.coverage.get(name).copied(),
    );
    let mut in_row = vec![false; lines.len()];
    let mut rows = outcome::three_way_rows(&st, &lines, rules, range, &mut in_row);
    let none: Arc<str> = Arc::from("");
    for (li, l) in lines.iter().enumerate().take(handed) {
        if reported[li]
            && matches!(l.kind, LineKind::Fee | LineKind::Payout | LineKind::Balance)
            && !in_row[li]
        {
            rows.push(outcome::settlement_item_row(li as u32, l, &none));
        }
    }
    for (li, l) in lines.iter().enumerate().skip(handed) {
        if !l.bank_credit() && l.booked_at >= range.0 && l.booked_at < range.1 {
            rows.push(ResultRow {
                outcome: Outcome::OrphanAtProvider,
                payment: None,
                lines: vec![li as u32],
                rule: none.clone(),
                action: Action::Ticket,
                detail: format!(
                    "{} line on bank source {}, which every partition shares: recon reads it \
                     only to pair provider payouts with its credits, never as a payment's \
                     evidence; check it by hand",
                    l.kind.as_str().to_lowercase(),
                    l.source()
                )
                .into(),
            });
        }
    }
    outcome::sort_line_rows(&mut rows, &lines);
    let settlement =
        crate::outputs::settlement::of_result(&st, &lines, rules, range, &|i, _| side[i]);
    Ok(Decided {
        lines,
        handed,
        rows,
        settlement,
    })
}
