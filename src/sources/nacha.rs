//! NACHA ACH files (94-character records), read for what they say about payouts we made:
//! returns (entry detail `6` + addenda `7` of type `99`) and notifications of change (addenda
//! type `98`), one [`PayoutStatus`] record each.
//!
//! The records: file header `1`, batch header `5` (SEC code, effective entry date), entry
//! detail `6`, addenda `7`, batch control `8`, file control `9`, and lines of `9`s that pad
//! the last block. A record shorter than 94 characters is padded with spaces (trailing blanks
//! are often cut); a longer one fails the file. A file written without line breaks is read as
//! 94-character records. Batch and file controls are checked: their entry/addenda counts and
//! batch count must agree with the records.
//!
//! A return gives: the returning entry's trace number (positions 80–94), the original entry's
//! trace number (addenda 7–21), the individual id (entry 40–54), the DFI account (masked when
//! printed), the amount in cents (USD, exact), the return reason code (addenda 4–6: `R01`…, a
//! non-standard code such as `R97` kept as written), the date of death (addenda 22–27, if
//! any), the addenda information (36–79) and the batch's effective entry date. A
//! notification of change gives the change code (`C01`…) and the corrected data (36–64).
//!
//! An ordinary entry (no addenda, or addenda of another type such as `05`) is no return: it
//! gives no record, and the file's notes count them. Not read: IAT and dishonored/contested
//! return layouts beyond their reason code, the entry hash and the control sums.

use super::payout::{Created, Level, PayoutFile, PayoutStatus, State, error};
use anyhow::Result;
use chrono::{NaiveDate, NaiveTime};
use std::sync::Arc;

/// One 94-character record with the line it is on.
struct Record<'b> {
    line: u64,
    text: &'b str,
}

impl Record<'_> {
    /// Positions `from..=to` (1-based, as the NACHA specification numbers them), padded.
    fn at(&self, from: usize, to: usize) -> &str {
        self.text
            .get(from - 1..to.min(self.text.len()))
            .unwrap_or("")
    }
    /// The same, trimmed; `None` when blank.
    fn field(&self, from: usize, to: usize) -> Option<String> {
        let t = self.at(from, to).trim();
        (!t.is_empty()).then(|| t.to_string())
    }
}

/// An entry and its addenda, until the next entry or the batch control.
struct Entry<'b> {
    record: Record<'b>,
    number: u32,
    addenda: Vec<Record<'b>>,
}

/// A batch being read.
struct Batch {
    number: u32,
    line: u64,
    sec: String,
    effective: Option<NaiveDate>,
    records: u64,
}

/// `YYMMDD`, or `None` when blank or zeros.
fn date(file: &str, r: &Record<'_>, from: usize, what: &str) -> Result<Option<NaiveDate>> {
    let t = r.at(from, from + 5);
    if t.trim().is_empty() || t == "000000" {
        return Ok(None);
    }
    super::text::yymmdd(t).map(Some).map_err(|e| {
        error(
            file,
            r.line,
            format!("{what} (positions {from}-{}): {e}", from + 5),
        )
    })
}

/// A number of `to - from + 1` digits at `from..=to`.
fn digits(file: &str, r: &Record<'_>, from: usize, to: usize, what: &str) -> Result<u64> {
    let t = r.at(from, to);
    if t.len() != to - from + 1 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error(
            file,
            r.line,
            format!(
                "{what} (positions {from}-{to}) {:?} is not {} digits",
                t,
                to - from + 1
            ),
        ));
    }
    t.parse().map_err(|_| {
        error(
            file,
            r.line,
            format!("{what} (positions {from}-{to}) {t:?}"),
        )
    })
}

/// The records of the file: lines (or 94-character slices of a file without line breaks),
/// blank lines left out.
fn records<'b>(file: &str, text: &'b str) -> Result<Vec<Record<'b>>> {
    let t = text.trim_end_matches(['\r', '\n']);
    let unbroken = !t.contains('\n') && t.len() > 94 && t.len().is_multiple_of(94);
    let mut out = Vec::new();
    if unbroken {
        for (i, start) in (0..t.len()).step_by(94).enumerate() {
            out.push(Record {
                line: i as u64 + 1,
                text: &t[start..start + 94],
            });
        }
        return Ok(out);
    }
    for (i, l) in text.split('\n').enumerate() {
        let l = l.strip_suffix('\r').unwrap_or(l);
        let line = i as u64 + 1;
        if l.trim().is_empty() {
            continue;
        }
        if l.chars().count() > 94 {
            return Err(error(
                file,
                line,
                format!(
                    "record is {} characters, more than the 94 of a NACHA record",
                    l.chars().count()
                ),
            ));
        }
        out.push(Record { line, text: l });
    }
    Ok(out)
}

/// The file header's creation date (positions 24–29) and time (30–33, `HHMM`, optional).
fn created(file: &str, header: &Record<'_>) -> Result<Option<Created>> {
    let Some(date) = date(file, header, 24, "file header: file creation date")? else {
        return Ok(None);
    };
    let t = header.at(30, 33);
    let time = if t.trim().is_empty() {
        None
    } else {
        let hm = (t.len() == 4 && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| NaiveTime::from_hms_opt(t[..2].parse().ok()?, t[2..].parse().ok()?, 0))
            .flatten();
        Some(hm.ok_or_else(|| {
            error(
                file,
                header.line,
                format!("file header: file creation time (positions 30-33) {t:?} is not HHMM"),
            )
        })?)
    };
    Ok(Some(Created {
        date,
        time,
        offset: None,
    }))
}

/// Parses NACHA bytes into return and notification-of-change records; any problem fails the
/// whole file with its line and field (positions).
pub fn parse(file: &Arc<str>, bytes: &[u8]) -> Result<PayoutFile> {
    let f: &str = file;
    if let Some(p) = bytes
        .iter()
        .position(|b| !b.is_ascii() || (b.is_ascii_control() && !matches!(b, b'\n' | b'\r')))
    {
        let line = 1 + bytes[..p].iter().filter(|&&b| b == b'\n').count();
        return Err(error(
            f,
            line,
            format!(
                "byte 0x{:02x} is not printable ASCII, as NACHA records are",
                bytes[p]
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| error(f, 1, format!("not ASCII: {e}")))?;
    let recs = records(f, text)?;
    let mut out = PayoutFile::default();
    let Some(first) = recs.first() else {
        return Err(error(
            f,
            1,
            "empty file: no NACHA file header (record type 1)",
        ));
    };
    if !first.text.starts_with('1') {
        return Err(error(
            f,
            first.line,
            format!(
                "the first record is of type {:?}, not the file header 1 (hint: is this a NACHA ACH file?)",
                first.at(1, 1)
            ),
        ));
    }
    if first.at(35, 37) != "094" {
        return Err(error(
            f,
            first.line,
            format!(
                "file header: record size (positions 35-37) is {:?}, not 094",
                first.at(35, 37)
            ),
        ));
    }
    out.created = created(f, first)?;
    let mut batch: Option<Batch> = None;
    let mut entry: Option<Entry<'_>> = None;
    let mut batches = 0u64;
    let mut entry_records = 0u64;
    let mut ordinary = 0u64;
    let mut closed = false;
    for r in recs.into_iter().skip(1) {
        let kind = r.at(1, 1);
        if closed {
            if r.text.bytes().all(|b| b == b'9') {
                continue;
            }
            return Err(error(
                f,
                r.line,
                format!(
                    "record of type {kind:?} after the file control (only 9999… filler may follow)"
                ),
            ));
        }
        match kind {
            "5" => {
                if let Some(b) = &batch {
                    return Err(error(
                        f,
                        r.line,
                        format!(
                            "batch header while the batch of line {} has no batch control (8)",
                            b.line
                        ),
                    ));
                }
                batches += 1;
                batch = Some(Batch {
                    number: batches as u32,
                    line: r.line,
                    sec: r.at(51, 53).to_string(),
                    effective: date(f, &r, 70, "batch header: effective entry date")?,
                    records: 0,
                });
            }
            "6" | "7" => {
                let Some(b) = &mut batch else {
                    return Err(error(
                        f,
                        r.line,
                        format!(
                            "record of type {kind} outside a batch (no batch header 5 before it)"
                        ),
                    ));
                };
                b.records += 1;
                if kind == "6" {
                    if let Some(e) = entry.take() {
                        finish(file, b, e, &mut out, &mut ordinary)?;
                    }
                    let number = u32::try_from(b.records).unwrap_or(u32::MAX);
                    entry = Some(Entry {
                        record: r,
                        number,
                        addenda: Vec::new(),
                    });
                } else {
                    let Some(e) = &mut entry else {
                        return Err(error(
                            f,
                            r.line,
                            "addenda record (7) without an entry detail (6) before it",
                        ));
                    };
                    if e.record.at(79, 79) != "1" {
                        return Err(error(
                            f,
                            r.line,
                            format!(
                                "addenda record for the entry of line {}, whose addenda indicator (position 79) is {:?}, not 1",
                                e.record.line,
                                e.record.at(79, 79)
                            ),
                        ));
                    }
                    e.addenda.push(r);
                }
            }
            "8" => {
                let Some(b) = batch.take() else {
                    return Err(error(
                        f,
                        r.line,
                        "batch control (8) without a batch header (5)",
                    ));
                };
                if let Some(e) = entry.take() {
                    finish(file, &b, e, &mut out, &mut ordinary)?;
                }
                let declared = digits(f, &r, 5, 10, "batch control: entry/addenda count")?;
                if declared != b.records {
                    return Err(error(
                        f,
                        r.line,
                        format!(
                            "batch control: entry/addenda count (positions 5-10) says {declared}, but the batch of line {} has {} entry and addenda records",
                            b.line, b.records
                        ),
                    ));
                }
                entry_records += b.records;
            }
            "9" => {
                if let Some(b) = &batch {
                    return Err(error(
                        f,
                        r.line,
                        format!(
                            "file control while the batch of line {} has no batch control (8)",
                            b.line
                        ),
                    ));
                }
                if r.text.bytes().all(|c| c == b'9') {
                    return Err(error(f, r.line, "9999… filler before the file control"));
                }
                let declared_batches = digits(f, &r, 2, 7, "file control: batch count")?;
                let declared_entries = digits(f, &r, 14, 21, "file control: entry/addenda count")?;
                if declared_batches != batches || declared_entries != entry_records {
                    return Err(error(
                        f,
                        r.line,
                        format!(
                            "file control says {declared_batches} batch(es) and {declared_entries} entry/addenda record(s), the file has {batches} and {entry_records}"
                        ),
                    ));
                }
                closed = true;
            }
            other => {
                return Err(error(
                    f,
                    r.line,
                    format!("record type {other:?} (position 1) is none of 1, 5, 6, 7, 8, 9"),
                ));
            }
        }
    }
    if !closed {
        return Err(error(
            f,
            text.split('\n').count(),
            "the file ends without its file control record (9) (truncated?)",
        ));
    }
    if ordinary > 0 {
        out.notes.push(format!(
            "{f}: {ordinary} ordinary entr{} (no return or notification-of-change addenda) not listed: an ordinary entry is no return",
            if ordinary == 1 { "y" } else { "ies" }
        ));
    }
    Ok(out)
}

/// Turns a finished entry into its record (a return or a notification of change) or counts it
/// as ordinary.
fn finish(
    file: &Arc<str>,
    b: &Batch,
    e: Entry<'_>,
    out: &mut PayoutFile,
    ordinary: &mut u64,
) -> Result<()> {
    let f: &str = file;
    let r = &e.record;
    if r.at(79, 79) == "1" && e.addenda.is_empty() {
        return Err(error(
            f,
            r.line,
            "entry detail: addenda indicator (position 79) is 1, but no addenda record (7) follows",
        ));
    }
    if !matches!(r.at(79, 79), "0" | "1") {
        return Err(error(
            f,
            r.line,
            format!(
                "entry detail: addenda indicator (position 79) {:?} is not 0 or 1",
                r.at(79, 79)
            ),
        ));
    }
    digits(f, r, 2, 3, "entry detail: transaction code")?;
    let amount = digits(f, r, 30, 39, "entry detail: amount")?;
    digits(f, r, 80, 94, "entry detail: trace number")?;
    let status = e.addenda.iter().find(|a| matches!(a.at(2, 3), "99" | "98"));
    let Some(a) = status else {
        *ordinary += 1;
        return Ok(());
    };
    let (state, what, prefix) = match a.at(2, 3) {
        "99" => (State::Returned, "return reason code", 'R'),
        _ => (State::NotificationOfChange, "change code", 'C'),
    };
    let code = a.at(4, 6);
    if code.len() != 3
        || !code.starts_with(prefix)
        || !code[1..].bytes().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(error(
            f,
            a.line,
            format!(
                "addenda {}: {what} (positions 4-6) {code:?} is not {prefix} and two letters or digits",
                a.at(2, 3)
            ),
        ));
    }
    let mut s = PayoutStatus::new(
        file,
        r.line,
        format!("batch {} ({}), entry {}", b.number, b.sec.trim(), e.number),
        Level::Transaction,
        a.at(2, 3),
        state,
    );
    s.reason = Some(code.to_string());
    s.original_instruction_id = a.field(7, 21);
    if s.original_instruction_id.is_none() {
        return Err(error(
            f,
            a.line,
            format!(
                "addenda {}: original entry trace number (positions 7-21) is blank",
                a.at(2, 3)
            ),
        ));
    }
    s.trace_number = r.field(80, 94);
    s.individual_id = r.field(40, 54);
    s.account = r.field(13, 29);
    let cents =
        i64::try_from(amount).map_err(|_| error(f, r.line, "entry detail: amount too large"))?;
    s.amount = Some((cents, "USD"));
    s.date = b.effective;
    if state == State::Returned {
        s.date_of_death = date(f, a, 22, "addenda 99: date of death")?;
        s.additional_info = a.field(36, 79);
    } else {
        s.corrected_data = a.field(36, 64);
        if s.corrected_data.is_none() {
            return Err(error(
                f,
                a.line,
                "addenda 98: corrected data (positions 36-64) is blank",
            ));
        }
    }
    out.records.push(s);
    Ok(())
}
