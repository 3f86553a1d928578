//! BAI2 cash management balance reports (file `01`, group `02`, account `03`, detail `16`,
//! continuation `88`, trailers `49`/`98`/`99`).
//!
//! Hand-written: there is no maintained Rust crate for BAI2, and the format is a few
//! comma-separated record types. Rules this reader follows:
//! - a record ends with `/` or at the end of the physical line; several records may share a
//!   line (`…/   02,…`): a `/` followed by blanks and a record code (`01,` … `99,`) starts the
//!   next one. The free text of `16`/`88` records runs to the end of its record, so `/` and
//!   `,` inside it are text;
//! - `88` continues the previous record: the text of a `16`, the fields of any other record;
//! - detail amounts are unsigned minor units; type codes 100–399 are credits (positive),
//!   400–699 debits (negative); other codes (loan, bank-defined 9xx) are refused because
//!   their direction is not defined by the format;
//! - the currency is the account's (`03`), else the group's (`02`), else USD (the BAI2 default);
//! - every trailer is checked: `49` control total = the account's summary and detail
//!   amounts, `98` = sum of its `49`s, `99` = sum of its `98`s, and each record count. A
//!   mismatch is reported in the accounts' [`StatementFacts::control_problems`] (a failed
//!   completeness fact for the run's gates), not a parse error: real bank samples carry
//!   wrong totals while every record is readable. A blank `49` total is not checked;
//! - a physical line that starts without a record code continues the previous `16`/`88`
//!   text (banks wrap long records at a fixed width);
//! - group status 2 (deletion) and 4 (test only) are refused: such a group books nothing.

use super::keys::{KeyAt, keys_of};
use super::text::TextEncoding;
use super::text::{self, day_start};
use super::{Balance, ParseContext, Parsed, StatementFacts, StatementLine};
use crate::model::LineKind;
use anyhow::Result;
use chrono::NaiveDate;
use compact_str::CompactString;
use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the keys a bai2 source takes besides the common ones.
// ---------------------------------------------------------------------------------------------

/// The keys only a bai2 source takes, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBai2 {
    /// Text encoding of the file (`utf-8` default; `windows-1252`, `latin1`, `iso-8859-2`,
    /// `ibm852`, … any WHATWG label).
    encoding: Option<String>,
}

/// The validated settings of a bai2 source.
#[derive(Debug, Clone, Default)]
pub struct Bai2Settings {
    /// Text encoding; `None` means strict UTF-8.
    pub encoding: Option<TextEncoding>,
}

/// Every key of a bai2 source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawBai2>().to_vec()
}

/// Reads and validates the bai2 keys of a source (`table`: its keys besides the common
/// ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<Bai2Settings> {
    let raw: RawBai2 = at.read(table)?;
    Ok(Bai2Settings {
        encoding: match &raw.encoding {
            Some(label) => text::parse_encoding(at, label)?,
            None => None,
        },
    })
}

const CODES: [&str; 8] = ["01", "02", "03", "16", "49", "88", "98", "99"];

/// One logical record: code, 1-based physical line, body after `NN,` (trailing `/` removed).
#[derive(Debug, Clone)]
struct Record {
    code: &'static str,
    line: u64,
    body: String,
    /// Where each `88` continuation starts: the index of its first field in `body`'s
    /// comma-separated fields (the 16's text continuations are marked in `body` instead).
    breaks: Vec<usize>,
}

fn split_records(ctx: &ParseContext, text: &str) -> Result<Vec<Record>> {
    let mut out: Vec<Record> = Vec::new();
    let mut prev_open = false;
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let b = line.as_bytes();
        let mut starts = vec![0usize];
        for (p, &c) in b.iter().enumerate() {
            if c != b'/' {
                continue;
            }
            let mut j = p + 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            if j + 2 < b.len() && b[j + 2] == b',' && CODES.contains(&&line[j..j + 2]) {
                starts.push(j);
            }
        }
        for (k, &s) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(line.len());
            let rec = line[s..end].trim_end();
            let rec = rec.strip_suffix('/').unwrap_or(rec);
            let code = rec.get(..2).unwrap_or("");
            let known = CODES
                .iter()
                .find(|c| **c == code)
                .filter(|_| rec.get(2..3) == Some(","));
            let Some(code) = known else {
                // A wrapped line: continues the text of an unterminated 16/88 record.
                if k == 0
                    && let Some(prev) = out.last_mut()
                    && matches!(prev.code, "16" | "88")
                    && prev_open
                {
                    prev.body.push_str(rec);
                    prev_open = !line.trim_end().ends_with('/');
                    continue;
                }
                return Err(ctx.error(
                    line_no,
                    format!(
                        "unknown BAI2 record {:?}",
                        rec.chars().take(20).collect::<String>()
                    ),
                ));
            };
            let body = match rec.get(2..3) {
                Some(",") => &rec[3..],
                None => "",
                Some(_) => {
                    return Err(ctx.error(line_no, format!("record {code} is not followed by ','")));
                }
            };
            out.push(Record {
                code,
                line: line_no,
                body: body.to_string(),
                breaks: Vec::new(),
            });
            prev_open = end == line.len() && !line.trim_end().ends_with('/');
        }
    }
    Ok(out)
}

/// A signed or unsigned integer amount in minor units (`+000123`, `-55`, blank → None).
fn amount(s: &str) -> Result<Option<i64>, String> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let (neg, digits) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("amount {t:?} is not a whole number of minor units"));
    }
    let v: i64 = digits
        .parse()
        .map_err(|_| format!("amount {t:?} is out of range"))?;
    Ok(Some(if neg { -v } else { v }))
}

/// Skips the extra availability fields of a funds type.
fn skip_funds(fields: &mut std::collections::VecDeque<&str>, funds: &str) -> Result<(), String> {
    let n = match funds.trim() {
        "" | "Z" | "0" | "1" | "2" => 0,
        "V" => 2,
        "S" => 3,
        "D" => {
            let k: usize = fields
                .pop_front()
                .unwrap_or("")
                .trim()
                .parse()
                .map_err(|_| "funds type D without a number of distributions".to_string())?;
            2 * k
        }
        other => return Err(format!("unknown funds type {other:?}")),
    };
    for _ in 0..n {
        fields.pop_front();
    }
    Ok(())
}

/// The group (`02`) being read.
struct Group {
    currency: Option<&'static str>,
    date: NaiveDate,
    /// Sum of its accounts' control totals.
    total: i64,
    /// Records so far, the `02` included.
    records: u64,
    accounts: u64,
    /// The group's originator (the bank), shown as the statement id.
    originator: String,
}

struct Account {
    line: u64,
    id: String,
    currency: &'static str,
    total: i64,
    records: u64,
    opening: Option<i64>,
    closing: Option<i64>,
    entries: u64,
    entries_sum: i64,
    entries_gross: i64,
    /// The 16 record whose text a following 88 continues.
    details: Vec<Detail>,
}

struct Detail {
    line: u64,
    amount: i64,
    bank_ref: String,
    customer_ref: String,
    text: String,
}

/// Parses BAI2 bytes into canonical lines and one [`StatementFacts`] per account.
pub fn parse(ctx: &ParseContext, bytes: &[u8]) -> Result<Parsed> {
    let text = text::decode(ctx, bytes)?;
    let raw = split_records(ctx, &text)?;
    // Fold 88 continuations into their record; remember how many physical records each is.
    let mut records: Vec<(Record, u64)> = Vec::new();
    for r in raw {
        if r.code == "88" {
            let Some((prev, n)) = records.last_mut() else {
                return Err(ctx.error(r.line, "88 continuation before any record"));
            };
            *n += 1;
            if prev.code == "16" {
                let t = r.body.trim();
                // The 16's text is everything after its fixed fields; mark the join for later.
                prev.body.push('\u{1f}');
                prev.body.push_str(t);
            } else {
                prev.breaks.push(prev.body.split(',').count());
                prev.body.push(',');
                prev.body.push_str(&r.body);
            }
            continue;
        }
        records.push((r, 1));
    }
    let mut parsed = Parsed::default();
    let mut it = records.into_iter().peekable();
    let Some((first, _)) = it.next() else {
        return Err(ctx.error(1, "empty file (want a 01 file header)"));
    };
    if first.code != "01" {
        return Err(ctx.error(
            first.line,
            format!(
                "file starts with record {}, not the 01 file header",
                first.code
            ),
        ));
    }
    let h: Vec<&str> = first.body.split(',').collect();
    if h.len() < 8 || h[7].trim() != "2" {
        return Err(ctx.error(
            first.line,
            format!(
                "01 header: version {:?} is not BAI2 (2)",
                h.get(7).copied().unwrap_or("")
            ),
        ));
    }
    let mut file_records = 1u64;
    let mut file_total = 0i64;
    let mut groups = 0u64;
    let mut group: Option<Group> = None;
    let mut account: Option<Account> = None;
    let mut done = false;
    let mut group_first_fact = 0usize;
    for (rec, n) in it {
        if done {
            return Err(ctx.error(
                rec.line,
                format!("record {} after the 99 file trailer", rec.code),
            ));
        }
        file_records += n;
        let fields: Vec<&str> = rec.body.split(',').collect();
        let err = |m: String| ctx.error(rec.line, format!("record {}: {m}", rec.code));
        match rec.code {
            "02" => {
                if group.is_some() {
                    return Err(err(
                        "group header inside a group (missing 98 trailer)".into()
                    ));
                }
                let status = fields.get(2).map(|s| s.trim()).unwrap_or("");
                match status {
                    "1" | "3" => {}
                    "2" | "4" => {
                        return Err(err(format!(
                            "group status {status} ({}) cannot be booked",
                            if status == "2" {
                                "deletion"
                            } else {
                                "test only"
                            }
                        )));
                    }
                    other => return Err(err(format!("unknown group status {other:?}"))),
                }
                let date =
                    text::yymmdd(fields.get(3).map(|s| s.trim()).unwrap_or("")).map_err(&err)?;
                let cur = match fields.get(5).map(|s| s.trim()).unwrap_or("") {
                    "" => None,
                    c => Some(text::currency(c).map_err(&err)?.0),
                };
                let originator = fields
                    .get(1)
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default();
                group = Some(Group {
                    currency: cur,
                    date,
                    total: 0,
                    records: n,
                    accounts: 0,
                    originator,
                });
                group_first_fact = parsed.facts.len();
                groups += 1;
            }
            "03" => {
                let Some(g) = group.as_mut() else {
                    return Err(err("account outside a group".into()));
                };
                if account.is_some() {
                    return Err(err("account inside an account (missing 49 trailer)".into()));
                }
                let mut q: std::collections::VecDeque<&str> = fields.iter().copied().collect();
                let id = q.pop_front().unwrap_or("").trim().to_string();
                if id.is_empty() {
                    return Err(err("no account number".into()));
                }
                let currency = match q.pop_front().map(str::trim).unwrap_or("") {
                    "" => g.currency.unwrap_or("USD"),
                    c => text::currency(c).map_err(&err)?.0,
                };
                let mut acc = Account {
                    line: rec.line,
                    id,
                    currency,
                    total: 0,
                    records: n,
                    opening: None,
                    closing: None,
                    entries: 0,
                    entries_sum: 0,
                    entries_gross: 0,
                    details: Vec::new(),
                };
                // A physical record continued by an 88 ends `…,/`: where that last, empty
                // field stands for a type code, an amount or a count, it only closes the
                // physical record (some banks write `…,015,450000,,,/` then `88,040,…`, or
                // split a group as `…,040,/` then `88,300000,,/`), and the summary
                // continues in the 88's first field (BAI2: a field is never split across
                // records). An empty funds type there is the field itself.
                let total = fields.len();
                let artifacts: Vec<usize> = rec
                    .breaks
                    .iter()
                    .filter_map(|&b| b.checked_sub(1))
                    .filter(|&i| fields.get(i).is_some_and(|f| f.trim().is_empty()))
                    .collect();
                let skip_artifact = |q: &mut std::collections::VecDeque<&str>| {
                    if artifacts.contains(&(total - q.len())) {
                        q.pop_front();
                    }
                };
                loop {
                    skip_artifact(&mut q);
                    let Some(code) = q.pop_front() else { break };
                    skip_artifact(&mut q);
                    let amt = q.pop_front().unwrap_or("");
                    skip_artifact(&mut q);
                    let _count = q.pop_front();
                    let funds = q.pop_front().unwrap_or("");
                    skip_funds(&mut q, funds).map_err(&err)?;
                    let code = code.trim();
                    let v = amount(amt).map_err(&err)?;
                    if code.is_empty() {
                        if v.is_some() {
                            return Err(err(format!("summary amount {amt:?} without a type code")));
                        }
                        continue;
                    }
                    let v = v.unwrap_or(0);
                    acc.total += v;
                    match code {
                        "010" => acc.opening = Some(v),
                        "015" => acc.closing = Some(v),
                        _ => {}
                    }
                }
                account = Some(acc);
            }
            "16" => {
                let Some(acc) = account.as_mut() else {
                    return Err(err("detail outside an account".into()));
                };
                acc.records += n;
                let (fixed, continued) = match rec.body.split_once('\u{1f}') {
                    Some((a, b)) => (a.to_string(), Some(b.replace('\u{1f}', " "))),
                    None => (rec.body.clone(), None),
                };
                let mut q: std::collections::VecDeque<&str> = fixed.splitn(64, ',').collect();
                let code = q.pop_front().unwrap_or("").trim().to_string();
                let amt = amount(q.pop_front().unwrap_or("")).map_err(&err)?;
                let Some(amt) = amt else {
                    return Err(err(format!("detail (type {code}) without an amount")));
                };
                if amt < 0
                    || fixed
                        .split(',')
                        .nth(1)
                        .is_some_and(|a| a.trim().starts_with(['+', '-']))
                {
                    return Err(err(
                        "detail amounts are unsigned; the type code gives the direction".into(),
                    ));
                }
                let funds = q.pop_front().unwrap_or("");
                skip_funds(&mut q, funds).map_err(&err)?;
                let bank_ref = q.pop_front().unwrap_or("").trim().to_string();
                let customer_ref = q.pop_front().unwrap_or("").trim().to_string();
                // The text is the rest of the record, commas included.
                let mut text_part = q.into_iter().collect::<Vec<_>>().join(",");
                if let Some(c) = continued {
                    if !text_part.trim().is_empty() {
                        text_part.push(' ');
                    }
                    text_part.push_str(&c);
                }
                let type_code: u32 = code
                    .parse()
                    .map_err(|_| err(format!("type code {code:?} is not a number")))?;
                let signed = match type_code {
                    100..=399 => amt,
                    400..=699 => -amt,
                    _ => {
                        return Err(err(format!(
                            "type code {code} is not a credit (100-399) or debit (400-699) detail; its direction is not defined"
                        )));
                    }
                };
                acc.total += amt;
                acc.entries += 1;
                acc.entries_sum += signed;
                acc.entries_gross += amt;
                acc.details.push(Detail {
                    line: rec.line,
                    amount: signed,
                    bank_ref,
                    customer_ref,
                    text: text_part,
                });
            }
            "49" => {
                let Some(mut acc) = account.take() else {
                    return Err(err("account trailer without an account".into()));
                };
                acc.records += n;
                let declared = amount(fields.first().copied().unwrap_or("")).map_err(&err)?;
                let mut problems = Vec::new();
                if let Some(d) = declared
                    && d != acc.total
                {
                    problems.push(format!(
                        "line {}: 49 control total {d} != {} (the sum of the account's summary and detail amounts)",
                        rec.line, acc.total
                    ));
                }
                let count: u64 = fields
                    .get(1)
                    .map(|s| s.trim())
                    .unwrap_or("")
                    .parse()
                    .map_err(|_| err("no record count".into()))?;
                if count != acc.records {
                    problems.push(format!(
                        "line {}: 49 declares {count} records, found {}",
                        rec.line, acc.records
                    ));
                }
                let Some(g) = group.as_mut() else {
                    return Err(err("account trailer outside a group".into()));
                };
                g.total += declared.unwrap_or(acc.total);
                g.records += acc.records;
                g.accounts += 1;
                let date = g.date;
                let origin = super::Origin::new(
                    ctx.source.clone(),
                    ctx.file.clone(),
                    Some(Arc::from(acc.id.as_str())),
                );
                for d in &acc.details {
                    let reference = if d.customer_ref.is_empty() {
                        text::reference(&d.text)
                    } else {
                        text::reference(&d.customer_ref)
                    };
                    parsed.lines.push(StatementLine {
                        origin: origin.clone(),
                        line_no: d.line,
                        provider_txn_id: (!d.bank_ref.is_empty())
                            .then(|| d.bank_ref.as_str().into()),
                        reference,
                        recipient: CompactString::default(),
                        amount_minor: d.amount,
                        currency: acc.currency,
                        booked_at: day_start(ctx, date),
                        booked_to: super::text::day_end(ctx, date),
                        booked_day: Some(date),
                        kind: LineKind::Payment,
                        entry: None,
                        batch: None,
                        role: crate::model::Role::Provider,
                        content_id: 0,
                        original: None,
                    });
                }
                let mut facts = StatementFacts::new(&ctx.file, format!("line {}", acc.line));
                facts.statement_id = Some(g.originator.clone());
                facts.account = Some(acc.id.clone());
                facts.currency = Some(acc.currency);
                facts.from = Some(date);
                facts.to = Some(date);
                let bal = |v: Option<i64>| {
                    v.map(|amount_minor| Balance {
                        amount_minor,
                        currency: acc.currency,
                        date: Some(date),
                    })
                };
                facts.opening = bal(acc.opening);
                facts.closing = bal(acc.closing);
                facts.entries = acc.entries;
                facts.entries_sum = acc.entries_sum;
                facts.entries_gross = acc.entries_gross;
                facts.control_totals_checked = true;
                facts.control_problems = problems;
                parsed.facts.push(facts);
            }
            "98" => {
                if account.is_some() {
                    return Err(err(
                        "group trailer inside an account (missing 49 trailer)".into()
                    ));
                }
                let Some(g) = group.take() else {
                    return Err(err("group trailer without a group".into()));
                };
                let records = g.records + n;
                let declared = amount(fields.first().copied().unwrap_or(""))
                    .map_err(&err)?
                    .unwrap_or(0);
                let mut problems = Vec::new();
                if declared != g.total {
                    problems.push(format!("line {}: 98 group control total {declared} != {} (the sum of its account totals)", rec.line, g.total));
                }
                // Some banks leave out the number of accounts (2 fields instead of 3).
                let (accounts, count) = match fields.len() {
                    2 => (None, fields[1]),
                    _ => (fields.get(1).copied(), fields.get(2).copied().unwrap_or("")),
                };
                if let Some(a) = accounts {
                    let a: u64 = a
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("number of accounts {a:?}")))?;
                    if a != g.accounts {
                        problems.push(format!(
                            "line {}: 98 declares {a} accounts, found {}",
                            rec.line, g.accounts
                        ));
                    }
                }
                let count: u64 = count
                    .trim()
                    .parse()
                    .map_err(|_| err("no record count".into()))?;
                if count != records {
                    problems.push(format!(
                        "line {}: 98 declares {count} records, found {records}",
                        rec.line
                    ));
                }
                file_total += declared;
                for f in &mut parsed.facts[group_first_fact..] {
                    f.control_problems.extend(problems.iter().cloned());
                }
            }
            "99" => {
                if group.is_some() {
                    return Err(err(
                        "file trailer inside a group (missing 98 trailer)".into()
                    ));
                }
                let declared = amount(fields.first().copied().unwrap_or(""))
                    .map_err(&err)?
                    .unwrap_or(0);
                let mut problems = Vec::new();
                if declared != file_total {
                    problems.push(format!("line {}: 99 file control total {declared} != {file_total} (the sum of its group totals)", rec.line));
                }
                let g: u64 = fields
                    .get(1)
                    .map(|s| s.trim())
                    .unwrap_or("")
                    .parse()
                    .map_err(|_| err("no number of groups".into()))?;
                if g != groups {
                    problems.push(format!(
                        "line {}: 99 declares {g} groups, found {groups}",
                        rec.line
                    ));
                }
                let count: u64 = fields
                    .get(2)
                    .map(|s| s.trim())
                    .unwrap_or("")
                    .parse()
                    .map_err(|_| err("no record count".into()))?;
                if count != file_records {
                    problems.push(format!(
                        "line {}: 99 declares {count} records, found {file_records}",
                        rec.line
                    ));
                }
                for f in &mut parsed.facts {
                    f.control_problems.extend(problems.iter().cloned());
                }
                done = true;
            }
            "01" => return Err(err("second file header".into())),
            _ => return Err(err("unexpected record".into())),
        }
    }
    if !done {
        return Err(ctx.error(
            text::line_of(&text, text.len()),
            "file ends without the 99 file trailer (truncated?)",
        ));
    }
    Ok(parsed)
}
