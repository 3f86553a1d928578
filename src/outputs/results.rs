//! `results.csv`: one row per payment in scope and per statement line not claimed by exactly
//! one payment. Deterministic: the same inputs give byte-identical files.

use super::csv_safe;
use crate::ledger::Payment;
use crate::outcome::{Action, ResultRow};
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

/// Writes results.csv to `w`. Fields are streamed with one reusable buffer: this runs once
/// per payment, a million times in the benchmark.
pub fn write<W: Write>(
    w: W,
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> Result<()> {
    use std::fmt::Write as _;
    let mut out = csv::Writer::from_writer(w);
    out.write_record(HEADER)?;
    let mut buf = String::with_capacity(128);
    // Joins one value per linked line with `;`.
    let joined =
        |buf: &mut String, ls: &[&StatementLine], f: &dyn Fn(&mut String, &StatementLine)| {
            buf.clear();
            for (k, l) in ls.iter().enumerate() {
                if k > 0 {
                    buf.push(';');
                }
                f(buf, l);
            }
        };
    let mut ls: Vec<&StatementLine> = Vec::new();
    for r in rows {
        let p = r.payment.map(|i| &payments[i as usize]);
        ls.clear();
        ls.extend(r.lines.iter().map(|&i| &lines[i as usize]));
        out.write_field(r.outcome.as_str())?;
        out.write_field(csv_safe(p.map(|p| p.payment_id.as_str()).unwrap_or("")).as_ref())?;
        joined(&mut buf, &ls, &|b, l| b.push_str(&l.uid()));
        out.write_field(csv_safe(&buf).as_ref())?;
        out.write_field(r.rule.as_bytes())?;
        match r.action {
            Action::None => out.write_field("none")?,
            Action::Ticket => out.write_field("ticket")?,
            other => out.write_field(other.label())?,
        }
        out.write_field(p.map(|p| p.status.as_str()).unwrap_or(""))?;
        buf.clear();
        if let Some(p) = p {
            money::write_minor(&mut buf, p.amount_minor, p.currency);
        }
        out.write_field(&buf)?;
        out.write_field(p.map(|p| p.currency).unwrap_or(""))?;
        joined(&mut buf, &ls, &|b, l| {
            money::write_minor(b, l.amount_minor, l.currency)
        });
        out.write_field(&buf)?;
        joined(&mut buf, &ls, &|b, l| b.push_str(l.currency));
        out.write_field(&buf)?;
        let recipient = p
            .map(|p| p.recipient.as_str())
            .or_else(|| ls.first().map(|l| l.recipient.as_str()));
        buf.clear();
        if let Some(r) = recipient {
            mask::write_account(&mut buf, r);
        }
        out.write_field(&buf)?;
        buf.clear();
        if let Some(t) = p.and_then(|p| p.started_at) {
            timeparse::write_utc(&mut buf, t);
        }
        out.write_field(&buf)?;
        joined(&mut buf, &ls, &|b, l| timeparse::write_utc(b, l.booked_at));
        out.write_field(&buf)?;
        joined(&mut buf, &ls, &|b, l| {
            let _ = write!(b, "{}:{}", l.source, l.line_no);
        });
        out.write_field(csv_safe(&buf).as_ref())?;
        out.write_field(csv_safe(&r.detail).as_ref())?;
        out.write_record(None::<&[u8]>)?;
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
