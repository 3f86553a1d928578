//! `settlement.csv`: the three-way view ledger ↔ provider ↔ bank. One row per provider
//! settlement batch with a line (or its bank credit) booked in the run's range, then one row per
//! bank credit in the range that no batch explains. Deterministic: batches by rule, batch and
//! currency; credits by line id.

use super::csv_safe;
use crate::matching::MatchResult;
use crate::matching::settlement::{BatchStatus, CreditStatus};
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
    let st = &m.settlement;
    let in_range = |i: u32| {
        let t = lines[i as usize].booked_at;
        t >= range.0 && t < range.1
    };
    let mut linked = vec![false; lines.len()];
    for p in &m.links {
        linked[p.line as usize] = true;
    }
    let mut out = Vec::new();
    for b in &st.batches {
        let bank: Vec<u32> = match &b.status {
            BatchStatus::Settled(c) | BatchStatus::Mismatch(c) => vec![*c],
            BatchStatus::Ambiguous(cs) => cs.clone(),
            BatchStatus::Unpaid | BatchStatus::MissingAtBank(_) => Vec::new(),
        };
        let due = matches!(b.status, BatchStatus::MissingAtBank(d) if d >= range.0 && d < range.1);
        let touches = due
            || b.items
                .iter()
                .chain(&b.payout_lines)
                .chain(&bank)
                .any(|&i| in_range(i));
        if !touches {
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
            b.items.len().to_string(),
            b.items
                .iter()
                .filter(|&&i| linked[i as usize])
                .count()
                .to_string(),
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
