//! `results.csv`: one row per payment in scope and per statement line not claimed by exactly
//! one payment. Deterministic: the same inputs give byte-identical files.

use super::csv_safe;
use crate::ledger::Payment;
use crate::outcome::ResultRow;
use crate::sources::{Rejected, StatementLine};
use crate::{mask, money, timeparse};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Header of results.csv (contract: the first four columns).
pub const HEADER: [&str; 15] = [
    "outcome",
    "payment_id",
    "provider_txn_id",
    "rule",
    "action",
    "status",
    "amount",
    "currency",
    "line_amount",
    "line_currency",
    "recipient",
    "started_at",
    "booked_at",
    "source_lines",
    "detail",
];

fn join<'a>(items: impl Iterator<Item = String> + 'a) -> String {
    items.collect::<Vec<_>>().join(";")
}

/// Writes results.csv to `w`.
pub fn write<W: Write>(
    w: W,
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> Result<()> {
    let mut out = csv::Writer::from_writer(w);
    out.write_record(HEADER)?;
    for r in rows {
        let p = r.payment.map(|i| &payments[i as usize]);
        let ls: Vec<&StatementLine> = r.lines.iter().map(|&i| &lines[i as usize]).collect();
        let recipient = p
            .map(|p| p.recipient.as_str())
            .or_else(|| ls.first().map(|l| l.recipient.as_str()))
            .map(mask::account)
            .unwrap_or_default();
        let record = [
            r.outcome.as_str().to_string(),
            csv_safe(p.map(|p| p.payment_id.as_str()).unwrap_or("")).into_owned(),
            csv_safe(&join(ls.iter().map(|l| l.uid()))).into_owned(),
            r.rule.to_string(),
            r.action.label(),
            p.map(|p| p.status.as_str()).unwrap_or("").to_string(),
            p.map(|p| money::format_minor(p.amount_minor, p.currency))
                .unwrap_or_default(),
            p.map(|p| p.currency.to_string()).unwrap_or_default(),
            join(
                ls.iter()
                    .map(|l| money::format_minor(l.amount_minor, l.currency)),
            ),
            join(ls.iter().map(|l| l.currency.to_string())),
            recipient,
            p.and_then(|p| p.started_at)
                .map(timeparse::format_utc)
                .unwrap_or_default(),
            join(ls.iter().map(|l| timeparse::format_utc(l.booked_at))),
            csv_safe(&join(
                ls.iter().map(|l| format!("{}:{}", l.source, l.line_no)),
            ))
            .into_owned(),
            csv_safe(&r.detail).into_owned(),
        ];
        out.write_record(&record)?;
    }
    out.flush()?;
    Ok(())
}

/// Writes rejected.csv (every input line that was not accepted, with file, line and reason).
pub fn write_rejected(path: &Path, rejected: &[Rejected]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = csv::Writer::from_writer(std::io::BufWriter::new(f));
    out.write_record(["source", "file", "line", "reason"])?;
    for r in rejected {
        out.write_record([
            csv_safe(&r.source).as_ref(),
            csv_safe(&r.file).as_ref(),
            &r.line.to_string(),
            csv_safe(&r.reason).as_ref(),
        ])?;
    }
    out.flush()?;
    Ok(())
}
