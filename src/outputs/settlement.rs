//! `settlement.csv`: the three-way view ledger ↔ provider ↔ bank. One row per provider
//! settlement batch with a line (or its bank credit) booked in the run's range, then one row per
//! bank credit in the range that no batch explains. Deterministic: batches by rule, batch and
//! currency; credits by line id.

use super::csv_safe;
use crate::matching::MatchResult;
use crate::matching::settlement::{Batch, BatchStatus, CreditStatus, SettlementResult};
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use crate::timeparse::Micros;
use anyhow::{Context, Result};
use std::path::Path;

/// Header of settlement.csv.
pub const HEADER: [&str; 13] = [
    "rule",
    "provider",
    "batch",
    "currency",
    "items",
    "ledger_matched",
    "provider_net",
    "provider_payout",
    "bank_line",
    "bank_booked_at",
    "bank_amount",
    "difference",
    "status",
];

/// One row of settlement.csv, as text.
pub type Row = [String; 13];

/// The rows of settlement.csv for lines booked in `range` (half-open, UTC).
pub fn rows(
    m: &MatchResult,
    lines: &[StatementLine],
    rules: &RuleSet,
    range: (Micros, Micros),
) -> Vec<Row> {
    let mut linked = vec![false; lines.len()];
    for p in &m.links {
        linked[p.line as usize] = true;
    }
    of_result(&m.settlement, lines, rules, range, &|_, b| {
        let touched = b.items.iter().chain(&b.payout_lines).any(|&i| {
            let t = lines[i as usize].booked_at;
            t >= range.0 && t < range.1
        });
        let matched = b.items.iter().filter(|&&i| linked[i as usize]).count();
        (touched, matched)
    })
}

/// The rows of settlement.csv for `st`: `items_of` tells of a batch (its index and itself) whether one of its own
/// lines is booked in `range` and how many of its items the ledger matched.
pub fn of_result(
    st: &SettlementResult,
    lines: &[StatementLine],
    rules: &RuleSet,
    range: (Micros, Micros),
    items_of: &dyn Fn(usize, &Batch) -> (bool, usize),
) -> Vec<Row> {
    let in_range = |i: u32| {
        let t = lines[i as usize].booked_at;
        t >= range.0 && t < range.1
    };
    let mut out = Vec::new();
    for (i, b) in st.batches.iter().enumerate() {
        let bank: Vec<u32> = match &b.status {
            BatchStatus::Settled(c) | BatchStatus::Mismatch(c) => vec![*c],
            BatchStatus::Ambiguous(cs) => cs.clone(),
            BatchStatus::Unpaid | BatchStatus::MissingAtBank(_) => Vec::new(),
        };
        let due = matches!(b.status, BatchStatus::MissingAtBank(d) if d >= range.0 && d < range.1);
        let (touched, matched) = items_of(i, b);
        if !(due || touched || bank.iter().any(|&i| in_range(i))) {
            continue;
        }
        let rule = &rules.settlements[b.rule];
        let money = |v: i64| crate::money::format_minor(v, b.currency);
        let one = (bank.len() == 1).then(|| &lines[bank[0] as usize]);
        let status = match &b.status {
            BatchStatus::Settled(_) => "SETTLED",
            BatchStatus::Mismatch(_) => "SETTLEMENT_MISMATCH",
            BatchStatus::Ambiguous(_) => "AMBIGUOUS",
            BatchStatus::Unpaid => "AWAITING_BANK",
            BatchStatus::MissingAtBank(_) => "PAYOUT_MISSING_AT_BANK",
        };
        let ids: Vec<String> = bank
            .iter()
            .map(|&c| lines[c as usize].uid().into_owned())
            .collect();
        out.push([
            rule.id.to_string(),
            csv_safe(&rule.provider).into_owned(),
            csv_safe(&b.key).into_owned(),
            b.currency.to_string(),
            b.item_count.to_string(),
            matched.to_string(),
            money(b.net_minor),
            b.payout_minor.map(money).unwrap_or_default(),
            csv_safe(&ids.join(";")).into_owned(),
            one.map(|l| l.booked_text()).unwrap_or_default(),
            one.map(|l| money(l.amount_minor)).unwrap_or_default(),
            one.map(|l| money(l.amount_minor - b.net_minor))
                .unwrap_or_default(),
            status.to_string(),
        ]);
    }
    let mut unmatched: Vec<&StatementLine> = st
        .credits
        .iter()
        .filter(|(c, s)| **s == CreditStatus::Unmatched && in_range(**c))
        .map(|(c, _)| &lines[*c as usize])
        .collect();
    unmatched
        .sort_by(|a, b| (a.uid(), a.source(), a.line_no).cmp(&(b.uid(), b.source(), b.line_no)));
    for l in unmatched {
        out.push([
            String::new(),
            String::new(),
            String::new(),
            l.currency.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            csv_safe(&l.uid()).into_owned(),
            l.booked_text(),
            crate::money::format_minor(l.amount_minor, l.currency),
            String::new(),
            "UNMATCHED_BANK_CREDIT".to_string(),
        ]);
    }
    out
}

/// Orders a partitioned night's rows by the job-file position of their provider source
/// (credits no batch explains last), keeping each source's own order: the order a gather
/// merges its shards' files in.
pub fn order_by_source(p: &crate::partition::PartitionConfig, rows: &mut [Row]) {
    rows.sort_by_key(|r| {
        if r[1].is_empty() {
            usize::MAX
        } else {
            p.source_index(&r[1])
        }
    });
}

/// Writes settlement.csv.
pub fn write(path: &Path, rows: &[Row]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = csv::Writer::from_writer(std::io::BufWriter::new(f));
    out.write_record(HEADER)?;
    for r in rows {
        out.write_record(r)?;
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
