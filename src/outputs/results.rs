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

/// One CSV record being built. Quoting is the csv crate's default, byte for byte: a field is
/// quoted when it holds `,`, `"`, CR or LF, with inner quotes doubled; records end in `\n`.
/// Hand-rolled because this runs fifteen times per payment, a million times in the benchmark.
struct Record {
    buf: Vec<u8>,
    fields: usize,
}

impl Record {
    fn field(&mut self, value: &str) {
        if self.fields > 0 {
            self.buf.push(b',');
        }
        self.fields += 1;
        let bytes = value.as_bytes();
        if bytes
            .iter()
            .any(|&b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
        {
            self.buf.push(b'"');
            for &b in bytes {
                if b == b'"' {
                    self.buf.push(b'"');
                }
                self.buf.push(b);
            }
            self.buf.push(b'"');
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn end(&mut self) {
        self.buf.push(b'\n');
        self.fields = 0;
    }
}

/// Writes results.csv to `all` and diff.csv to `listed`: the same rows, only those the
/// reports list one by one ([`crate::outputs::is_listed`]). Each row is formatted
/// once for both.
pub fn write<W: Write, D: Write>(
    mut all: W,
    mut listed: D,
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> Result<()> {
    let mut rec = Record {
        buf: Vec::with_capacity(256),
        fields: 0,
    };
    for h in HEADER {
        rec.field(h);
    }
    rec.end();
    all.write_all(&rec.buf)?;
    listed.write_all(&rec.buf)?;
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
        rec.buf.clear();
        let p = r.payment.map(|i| &payments[i as usize]);
        ls.clear();
        ls.extend(r.lines.iter().map(|&i| &lines[i as usize]));
        rec.field(r.outcome.as_str());
        let id = p.map(|p| p.payment_id.text());
        rec.field(&csv_safe(id.as_deref().unwrap_or("")));
        joined(&mut buf, &ls, &|b, l| b.push_str(&l.uid()));
        rec.field(&csv_safe(&buf));
        rec.field(&r.rule);
        match r.action {
            Action::None => rec.field("none"),
            Action::Ticket => rec.field("ticket"),
            other => rec.field(&other.label()),
        }
        rec.field(p.map(|p| p.status.as_str()).unwrap_or(""));
        buf.clear();
        if let Some(p) = p {
            money::write_minor(&mut buf, p.amount_minor, p.currency);
        }
        rec.field(&buf);
        rec.field(p.map(|p| p.currency).unwrap_or(""));
        joined(&mut buf, &ls, &|b, l| {
            money::write_minor(b, l.amount_minor, l.currency)
        });
        rec.field(&buf);
        joined(&mut buf, &ls, &|b, l| b.push_str(l.currency));
        rec.field(&buf);
        let recipient = p
            .map(|p| p.recipient.as_str())
            .or_else(|| ls.first().map(|l| l.recipient.as_str()));
        buf.clear();
        if let Some(r) = recipient {
            mask::write_account(&mut buf, r);
        }
        rec.field(&buf);
        buf.clear();
        if let Some(t) = p.and_then(|p| p.started_at) {
            timeparse::write_utc(&mut buf, t);
        }
        rec.field(&buf);
        joined(&mut buf, &ls, &|b, l| match l.booked_day {
            Some(d) => {
                use std::fmt::Write as _;
                let _ = write!(b, "{}", d.format("%Y-%m-%d"));
            }
            None => timeparse::write_utc(b, l.booked_at),
        });
        rec.field(&buf);
        joined(&mut buf, &ls, &|b, l| l.write_source_line(b));
        rec.field(&csv_safe(&buf));
        rec.field(&csv_safe(&r.detail));
        rec.end();
        all.write_all(&rec.buf)?;
        if crate::outputs::is_listed(r.outcome) {
            listed.write_all(&rec.buf)?;
        }
    }
    all.flush()?;
    listed.flush()?;
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
