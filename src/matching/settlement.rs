//! Three-way matching (issue 4 point 6): provider settlement batches ↔ bank credits.
//!
//! A provider pays out a batch of its lines as one transfer: the batch's net (every line of
//! the batch except the provider's own payout line: settled − refunds − fees, signed as the
//! provider file books them) arrives as one credit on our bank account. For each
//! `[[settlement]]` rule, the provider's lines are grouped by their `batch` column and summed
//! (Polars `group_by`), then joined to the bank source's credits on currency, amount within
//! the tolerance and booking time within the window around the batch's last line
//! (`join_where`). As everywhere, a pair is accepted only when each side is the other's only
//! candidate (DESIGN.md rule 1); a side with several candidates is ambiguous. What is left is
//! paired once more without the amount (currency + window, unique on both sides): such a pair
//! is a batch whose sum differs from its bank credit, for a human to look at.

use crate::config::LineKind;
use crate::rules::Settlement;
use crate::sources::StatementLine;
use crate::timeparse::Micros;
use anyhow::{Context, Result};
use polars::prelude::*;
use std::collections::BTreeMap;

/// What three-way matching decided for a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStatus {
    /// Exactly one bank credit, within the tolerance (line index).
    Settled(u32),
    /// Exactly one bank credit in the window, but its amount differs beyond the tolerance.
    Mismatch(u32),
    /// Several bank credits could be this batch's payout (line indexes).
    Ambiguous(Vec<u32>),
    /// No bank credit (yet).
    Unpaid,
    /// No bank credit, and none can come any more: the window plus the settlement lag (the
    /// deadline held here) has passed on a bank statement that covers the whole window
    /// completely. Reported on the day that holds the deadline.
    MissingAtBank(Micros),
}

/// One provider settlement batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Index of the settlement rule.
    pub rule: usize,
    /// The batch key as the provider writes it.
    pub key: String,
    /// Currency of the batch's lines.
    pub currency: &'static str,
    /// Sum of the batch's lines except payout lines, in minor units.
    pub net_minor: i64,
    /// The provider's own payout line(s), negated (what the provider says it paid out), if
    /// the file has one.
    pub payout_minor: Option<i64>,
    /// Lines that make up the net.
    pub items: Vec<u32>,
    /// How many lines make up the net (`items.len()`, but for a batch a shard handed to the
    /// gather, which keeps only its first item: the `shared` module).
    pub item_count: usize,
    /// Payout lines.
    pub payout_lines: Vec<u32>,
    /// Booking time of the batch's last line.
    pub last_booked: Micros,
    /// What matching decided.
    pub status: BatchStatus,
}

/// What three-way matching decided for a bank credit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditStatus {
    /// The payout of exactly one batch (batch index).
    Settled(usize),
    /// The only candidate of one batch, amount differs (batch index).
    Mismatch(usize),
    /// Could be the payout of several batches (batch indexes).
    Ambiguous(Vec<usize>),
    /// No batch explains it.
    Unmatched,
}

/// Everything three-way matching found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettlementResult {
    /// Batches, sorted by rule, key and currency.
    pub batches: Vec<Batch>,
    /// Bank credit line index → status, for every bank credit (also those no rule names).
    pub credits: BTreeMap<u32, CreditStatus>,
}

/// Runs every settlement rule over `lines`, but those whose bank source is shared by all
/// partitions ([`Settlement::shared`]): their batches are [`shared_batches`], paired with the
/// shared source's credits by [`pair`] where that source is read (see the `shared` module).
pub fn run(lines: &[StatementLine], rules: &[Settlement]) -> Result<SettlementResult> {
    let batches = batches(lines, rules, false).context("settlement: grouping provider batches")?;
    pair(lines, rules, batches, &|l: &StatementLine| {
        l.origin.partition != crate::partition::SHARED
    })
}

/// The batches of the rules whose bank source is shared by all partitions, unpaired.
pub fn shared_batches(lines: &[StatementLine], rules: &[Settlement]) -> Result<Vec<Batch>> {
    batches(lines, rules, true).context("settlement: grouping provider batches")
}

/// Pairs `batches` (sorted by rule, key and currency) with the bank credits of `lines` that
/// `credit` accepts.
pub fn pair(
    lines: &[StatementLine],
    rules: &[Settlement],
    batches: Vec<Batch>,
    credit: &dyn Fn(&StatementLine) -> bool,
) -> Result<SettlementResult> {
    let mut result = SettlementResult::default();
    for (i, l) in lines.iter().enumerate() {
        if l.bank_credit() && credit(l) {
            result.credits.insert(i as u32, CreditStatus::Unmatched);
        }
    }
    result.batches = batches;
    if result.batches.is_empty() || result.credits.is_empty() {
        return Ok(result);
    }
    // Stage 1: amount within the tolerance.
    let all_batches: Vec<bool> = vec![true; result.batches.len()];
    let pairs = candidate_pairs(
        lines,
        rules,
        &result.batches,
        &all_batches,
        &result.credits,
        true,
    )
    .context("settlement: joining batches to bank credits")?;
    let (per_batch, per_credit) = counts(&pairs);
    let mut taken_credit = std::collections::BTreeSet::new();
    let mut decided = vec![false; result.batches.len()];
    for &(b, c) in &pairs {
        if per_batch[&b].len() == 1 && per_credit[&c].len() == 1 {
            result.batches[b].status = BatchStatus::Settled(c);
            result.credits.insert(c, CreditStatus::Settled(b));
        } else {
            result.batches[b].status = BatchStatus::Ambiguous(per_batch[&b].clone());
            result
                .credits
                .insert(c, CreditStatus::Ambiguous(per_credit[&c].clone()));
        }
        decided[b] = true;
        taken_credit.insert(c);
    }
    // Stage 2: what is left, paired by currency and window alone (a batch whose sum differs).
    let open_batches: Vec<bool> = result
        .batches
        .iter()
        .enumerate()
        .map(|(i, b)| !decided[i] && b.net_minor > 0)
        .collect();
    let open_credits: BTreeMap<u32, CreditStatus> = result
        .credits
        .iter()
        .filter(|(c, _)| !taken_credit.contains(*c))
        .map(|(c, s)| (*c, s.clone()))
        .collect();
    if open_batches.iter().any(|&b| b) && !open_credits.is_empty() {
        let pairs = candidate_pairs(
            lines,
            rules,
            &result.batches,
            &open_batches,
            &open_credits,
            false,
        )
        .context("settlement: pairing batches whose sum differs")?;
        let (per_batch, per_credit) = counts(&pairs);
        for &(b, c) in &pairs {
            if per_batch[&b].len() == 1 && per_credit[&c].len() == 1 {
                result.batches[b].status = BatchStatus::Mismatch(c);
                result.credits.insert(c, CreditStatus::Mismatch(b));
            }
        }
    }
    Ok(result)
}

/// Marks unpaid batches whose payout can no longer arrive as [`BatchStatus::MissingAtBank`]:
/// `as_of` is past the window's end plus `lag`, and the rule's bank source covers the whole
/// window completely (`bank_coverage` by source name). Absence of a credit on an incomplete or
/// still-open bank statement proves nothing (DESIGN.md rule 2): those stay unpaid.
pub fn close_unpaid<'c>(
    result: &mut SettlementResult,
    rules: &[Settlement],
    as_of: Micros,
    lag: Micros,
    bank_coverage: impl Fn(&str) -> Option<&'c [(Micros, Micros)]>,
) {
    for b in &mut result.batches {
        if b.status != BatchStatus::Unpaid || b.net_minor <= 0 {
            continue;
        }
        let (from, to) = window(&rules[b.rule], b);
        if as_of < to + lag {
            continue;
        }
        if bank_coverage(&rules[b.rule].bank).is_some_and(|c| crate::sources::covers(c, from, to)) {
            b.status = BatchStatus::MissingAtBank(to + lag);
        }
    }
}

/// The bank booking window of a batch's payout: around its last line.
pub fn window(rule: &Settlement, b: &Batch) -> (Micros, Micros) {
    (b.last_booked - rule.before, b.last_booked + rule.after)
}

type Counts = (BTreeMap<usize, Vec<u32>>, BTreeMap<u32, Vec<usize>>);

fn counts(pairs: &[(usize, u32)]) -> Counts {
    let mut per_batch: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    let mut per_credit: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &(b, c) in pairs {
        per_batch.entry(b).or_default().push(c);
        per_credit.entry(c).or_default().push(b);
    }
    (per_batch, per_credit)
}

/// (rule, batch key, currency) of a batch.
type GroupKey<'a> = (u32, &'a str, &'a str);

/// Groups the provider lines of each rule (of the shared ones, or of the others) by batch
/// and currency and sums them (Polars).
fn batches(lines: &[StatementLine], rules: &[Settlement], shared: bool) -> Result<Vec<Batch>> {
    let mut rule_col: Vec<u32> = Vec::new();
    let mut key_col: Vec<&str> = Vec::new();
    let mut cur_col: Vec<&str> = Vec::new();
    let mut amt_col: Vec<i64> = Vec::new();
    let mut payout_col: Vec<bool> = Vec::new();
    let mut at_col: Vec<i64> = Vec::new();
    // (rule, key, currency) → (items, payout lines), to name the lines of each group.
    let mut members: BTreeMap<GroupKey<'_>, (Vec<u32>, Vec<u32>)> = BTreeMap::new();
    for (r, rule) in rules.iter().enumerate() {
        if rule.shared != shared {
            continue;
        }
        for (i, l) in lines.iter().enumerate() {
            let Some(key) = l.batch.as_deref() else {
                continue;
            };
            if l.source() != &*rule.provider {
                continue;
            }
            let payout = l.kind == LineKind::Payout;
            rule_col.push(r as u32);
            key_col.push(key);
            cur_col.push(l.currency);
            amt_col.push(l.amount_minor);
            payout_col.push(payout);
            at_col.push(l.booked_at);
            let m = members.entry((r as u32, key, l.currency)).or_default();
            if payout {
                m.1.push(i as u32);
            } else {
                m.0.push(i as u32);
            }
        }
    }
    if rule_col.is_empty() {
        return Ok(Vec::new());
    }
    let df = DataFrame::new(
        rule_col.len(),
        vec![
            Column::new("b_rule".into(), rule_col),
            Column::new("b_key".into(), key_col),
            Column::new("b_cur".into(), cur_col),
            Column::new("amt".into(), amt_col),
            Column::new("payout".into(), payout_col),
            Column::new("at".into(), at_col),
        ],
    )?
    .lazy()
    .group_by([col("b_rule"), col("b_key"), col("b_cur")])
    .agg([
        col("amt").filter(col("payout").not()).sum().alias("net"),
        col("amt").filter(col("payout")).sum().alias("paid"),
        col("at").max().alias("last"),
    ])
    .sort(["b_rule", "b_key", "b_cur"], SortMultipleOptions::default())
    .collect()?;
    let rule = super::u32s(&df, "b_rule")?;
    let key = super::strs(&df, "b_key")?;
    let cur = super::strs(&df, "b_cur")?;
    let net = super::i64s(&df, "net")?;
    let paid = super::i64s(&df, "paid")?;
    let last = super::i64s(&df, "last")?;
    let mut out = Vec::with_capacity(rule.len());
    for i in 0..rule.len() {
        let (items, payout_lines) = members
            .remove(&(rule[i], key[i].as_str(), cur[i].as_str()))
            .unwrap_or_default();
        let currency = lines
            .get(items.first().or(payout_lines.first()).copied().unwrap_or(0) as usize)
            .map(|l| l.currency)
            .unwrap_or("");
        out.push(Batch {
            rule: rule[i] as usize,
            key: key[i].clone(),
            item_count: items.len(),
            currency,
            net_minor: net[i],
            payout_minor: (!payout_lines.is_empty()).then(|| paid[i].saturating_neg()),
            items,
            payout_lines,
            last_booked: last[i],
            status: BatchStatus::Unpaid,
        });
    }
    Ok(out)
}

/// Candidate (batch, bank credit) pairs: same bank source, same currency, booked within the
/// rule's window around the batch's last line, and (with `by_amount`) the credit within the
/// tolerance of the batch's net.
fn candidate_pairs(
    lines: &[StatementLine],
    rules: &[Settlement],
    batches: &[Batch],
    batch_open: &[bool],
    credits: &BTreeMap<u32, CreditStatus>,
    by_amount: bool,
) -> Result<Vec<(usize, u32)>> {
    // Bank sources are numbered by the rules that name them.
    let bank_id = |name: &str| rules.iter().position(|r| r.bank == name).map(|p| p as u32);
    let (mut s_idx, mut s_bank, mut s_cur, mut s_amt, mut s_at, mut s_to) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for &c in credits.keys() {
        let l = &lines[c as usize];
        if let Some(b) = bank_id(l.source()) {
            s_idx.push(c);
            s_bank.push(b);
            s_cur.push(l.currency);
            s_amt.push(l.amount_minor);
            s_at.push(l.booked_at);
            s_to.push(l.booked_to);
        }
    }
    let (mut b_idx, mut b_bank, mut b_cur, mut b_min, mut b_max, mut b_lo, mut b_hi) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for (i, b) in batches.iter().enumerate() {
        if !batch_open[i] {
            continue;
        }
        let rule = &rules[b.rule];
        let Some(bank) = bank_id(&rule.bank) else {
            continue;
        };
        b_idx.push(i as u32);
        b_bank.push(bank);
        b_cur.push(b.currency);
        b_min.push(b.net_minor.saturating_sub(rule.tolerance_minor));
        b_max.push(b.net_minor.saturating_add(rule.tolerance_minor));
        b_lo.push(b.last_booked.saturating_sub(rule.before));
        b_hi.push(b.last_booked.saturating_add(rule.after));
    }
    if s_idx.is_empty() || b_idx.is_empty() {
        return Ok(Vec::new());
    }
    let credits_lf = DataFrame::new(
        s_idx.len(),
        vec![
            Column::new("s_idx".into(), s_idx),
            Column::new("s_bank".into(), s_bank),
            Column::new("s_cur".into(), s_cur),
            Column::new("s_amt".into(), s_amt),
            Column::new("s_at".into(), s_at),
            Column::new("s_to".into(), s_to),
        ],
    )?
    .lazy();
    let batches_lf = DataFrame::new(
        b_idx.len(),
        vec![
            Column::new("b_idx".into(), b_idx),
            Column::new("b_bank".into(), b_bank),
            Column::new("b_cur".into(), b_cur),
            Column::new("b_min".into(), b_min),
            Column::new("b_max".into(), b_max),
            Column::new("b_lo".into(), b_lo),
            Column::new("b_hi".into(), b_hi),
        ],
    )?
    .lazy();
    let mut preds = vec![
        col("s_bank").eq(col("b_bank")),
        col("s_cur").eq(col("b_cur")),
        // A date-only bank booking overlaps the window (DESIGN.md rule 9).
        col("s_to").gt_eq(col("b_lo")),
        col("s_at").lt_eq(col("b_hi")),
    ];
    if by_amount {
        preds.push(col("s_amt").gt_eq(col("b_min")));
        preds.push(col("s_amt").lt_eq(col("b_max")));
    }
    let df = credits_lf
        .join_builder()
        .with(batches_lf)
        .join_where(preds)
        .select([col("b_idx"), col("s_idx")])
        .collect()?;
    let b = super::u32s(&df, "b_idx")?;
    let s = super::u32s(&df, "s_idx")?;
    let mut v: Vec<(usize, u32)> = b.into_iter().map(|b| b as usize).zip(s).collect();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Role;
    use crate::timeparse::HOUR;
    use std::sync::Arc;

    fn line(
        source: &str,
        role: Role,
        batch: Option<&str>,
        amount: i64,
        kind: LineKind,
    ) -> StatementLine {
        StatementLine {
            origin: crate::sources::Origin::new(Arc::from(source), Arc::from("f"), None),
            line_no: 1,
            provider_txn_id: None,
            reference: None,
            recipient: Default::default(),
            amount_minor: amount,
            currency: "EUR",
            booked_at: 10 * HOUR,
            booked_to: 10 * HOUR,
            booked_day: None,
            kind,
            entry: None,
            batch: batch.map(Into::into),
            role,
            content_id: 0,
            original: None,
        }
    }

    fn rule(tolerance_minor: i64) -> Settlement {
        Settlement {
            id: Arc::from("s"),
            provider: "psp".into(),
            bank: "bank".into(),
            tolerance_minor,
            before: 24 * HOUR,
            after: 72 * HOUR,
            file: "rules.toml".into(),
            shared: false,
        }
    }

    #[test]
    fn one_credit_for_one_batch_net_settles() {
        let lines = vec![
            line("psp", Role::Provider, Some("7"), 10_000, LineKind::Payment),
            line("psp", Role::Provider, Some("7"), -1_000, LineKind::Refund),
            line("psp", Role::Provider, Some("7"), -50, LineKind::Fee),
            line("psp", Role::Provider, Some("7"), -8_950, LineKind::Payout),
            line("bank", Role::Bank, None, 8_950, LineKind::Payment),
        ];
        let r = run(&lines, &[rule(0)]).expect("run");
        assert_eq!(r.batches.len(), 1);
        assert_eq!(r.batches[0].net_minor, 8_950);
        assert_eq!(r.batches[0].payout_minor, Some(8_950));
        assert_eq!(r.batches[0].status, BatchStatus::Settled(4));
        assert_eq!(r.credits[&4], CreditStatus::Settled(0));
    }

    /// A provider balance movement (Adyen `Balancetransfer`) is part of its batch's net, like
    /// a fee: never the payout, never a bank credit's match on its own.
    #[test]
    fn a_balance_line_counts_in_its_batch_net() {
        let lines = vec![
            line("psp", Role::Provider, Some("7"), 10_000, LineKind::Payment),
            line("psp", Role::Provider, Some("7"), -50, LineKind::Fee),
            line("psp", Role::Provider, Some("7"), 500, LineKind::Balance),
            line("psp", Role::Provider, Some("7"), -10_450, LineKind::Payout),
            line("bank", Role::Bank, None, 10_450, LineKind::Payment),
        ];
        let r = run(&lines, &[rule(0)]).expect("run");
        assert_eq!(r.batches[0].net_minor, 10_450);
        assert_eq!(r.batches[0].items, [0, 1, 2]);
        assert_eq!(r.batches[0].payout_lines, [3]);
        assert_eq!(r.credits[&4], CreditStatus::Settled(0));
    }

    #[test]
    fn two_batches_with_the_same_net_are_ambiguous_never_settled() {
        let lines = vec![
            line("psp", Role::Provider, Some("A"), 5_000, LineKind::Payment),
            line("psp", Role::Provider, Some("B"), 5_000, LineKind::Payment),
            line("bank", Role::Bank, None, 5_000, LineKind::Payment),
        ];
        let r = run(&lines, &[rule(0)]).expect("run");
        assert_eq!(r.credits[&2], CreditStatus::Ambiguous(vec![0, 1]));
        assert!(
            r.batches
                .iter()
                .all(|b| matches!(b.status, BatchStatus::Ambiguous(_)))
        );
    }

    #[test]
    fn tolerance_decides_between_settled_and_mismatch() {
        let lines = vec![
            line("psp", Role::Provider, Some("A"), 5_000, LineKind::Payment),
            line("bank", Role::Bank, None, 4_998, LineKind::Payment),
        ];
        let within = run(&lines, &[rule(2)]).expect("run");
        assert_eq!(within.credits[&1], CreditStatus::Settled(0));
        let beyond = run(&lines, &[rule(1)]).expect("run");
        assert_eq!(beyond.credits[&1], CreditStatus::Mismatch(0));
        assert_eq!(beyond.batches[0].status, BatchStatus::Mismatch(1));
    }

    #[test]
    fn a_bank_credit_without_a_rule_is_unmatched_and_debits_are_not_credits() {
        let lines = vec![
            line("bank", Role::Bank, None, 5_000, LineKind::Payment),
            line("bank", Role::Bank, None, -5_000, LineKind::Payment),
        ];
        let r = run(&lines, &[]).expect("run");
        assert_eq!(r.credits.len(), 1);
        assert_eq!(r.credits[&0], CreditStatus::Unmatched);
    }
}
