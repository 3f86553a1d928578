//! SWIFT MT940 customer statements and MT942 interim transaction reports.
//!
//! Hand-written: no Rust crate for MT940 is well kept and lenient enough for what banks send
//! (the `mt940` crate rejects most real-world variants), and the grammar is small. What this
//! reader accepts, and what it refuses:
//! - SWIFT envelopes (`{1:…}{2:…}{4:`, `-}`, `{5:…}`), SOH/ETX control characters, header or
//!   prose lines before a statement's `:20:` (ABN AMRO `ABNANL2A`/`940`, Danske Bank's
//!   preamble) are skipped; a tag before any `:20:` is an error.
//! - Tags: `:20: :21: :25: :25P: :28: :28C: :13: :13D: :34F: :60F: :60M: :61: :86: :62F: :62M: :64:
//!   :65: :90D: :90C: :NS:`. Any other tag is an error naming the line.
//! - `:61:` value date, optional entry date (the booking day; its year inferred from the value
//!   date), mark `C`/`D`/`RC`/`RD` (reversal of a credit books a debit, and vice versa), an
//!   optional funds code letter, an amount with `,` (or `.`) decimals, the transaction type,
//!   the owner's reference, `//` the bank's reference, and supplementary details on the next
//!   line. Continuation lines belong to `:61:`, `:86:` and `:NS:` only.
//! - `:86:` after a `:61:` describes that entry; before the first `:61:` or after the closing
//!   balance it describes the statement and is not a line.
//!
//! Balances (`:60F:/:62F:`) and MT942 totals (`:90D:/:90C:`) are reported as
//! [`StatementFacts`]; whether they chain is for the completeness gate to judge.

use super::keys::{KeyAt, keys_of};
use super::text::TextEncoding;
use super::text::{self, day_start};
use super::{Balance, ParseContext, Parsed, StatementFacts, StatementLine};
use crate::model::LineKind;
use anyhow::Result;
use chrono::{Datelike, NaiveDate};
use rust_decimal::Decimal;
use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the keys a mt940 source takes besides the common ones.
// ---------------------------------------------------------------------------------------------

/// The keys only a mt940 source takes, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMt940 {
    /// Text encoding of the file (`utf-8` default; `windows-1252`, `latin1`, `iso-8859-2`,
    /// `ibm852`, … any WHATWG label).
    encoding: Option<String>,
}

/// The validated settings of a mt940 source.
#[derive(Debug, Clone, Default)]
pub struct Mt940Settings {
    /// Text encoding; `None` means strict UTF-8.
    pub encoding: Option<TextEncoding>,
}

/// Every key of a mt940 source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawMt940>().to_vec()
}

/// Reads and validates the mt940 keys of a source (`table`: its keys besides the common
/// ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<Mt940Settings> {
    let raw: RawMt940 = at.read(table)?;
    Ok(Mt940Settings {
        encoding: match &raw.encoding {
            Some(label) => text::parse_encoding(at, label)?,
            None => None,
        },
    })
}

/// One tag with its value (continuation lines joined with `\n`).
#[derive(Debug)]
struct Tag {
    name: String,
    line: u64,
    value: String,
}

fn tag_name(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix(':')?;
    let end = rest.find(':')?;
    let name = &rest[..end];
    let b = name.as_bytes();
    let ok = name == "NS"
        || (b.len() >= 2
            && b.len() <= 3
            && b[0].is_ascii_digit()
            && b[1].is_ascii_digit()
            && (b.len() == 2 || b[2].is_ascii_uppercase()));
    ok.then(|| (name, &rest[end + 1..]))
}

/// Splits the text into statements (each a list of tags starting with `:20:`).
fn statements(ctx: &ParseContext, text: &str) -> Result<Vec<Vec<Tag>>> {
    let mut out: Vec<Vec<Tag>> = Vec::new();
    let mut inside = false;
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i as u64 + 1;
        let mut line = raw
            .trim_end_matches('\r')
            .trim_matches(['\u{1}', '\u{3}', '\u{1a}']);
        // SWIFT block headers: `{1:…}{2:…}{3:}{4:` (the text block may start on this line).
        while line.starts_with('{') {
            if let Some(rest) = line.strip_prefix("{4:") {
                line = rest;
                break;
            }
            match line.find('}') {
                Some(p) => line = &line[p + 1..],
                None => {
                    return Err(ctx.error(line_no, format!("unterminated SWIFT block {line:?}")));
                }
            }
        }
        let trimmed = line.trim();
        if trimmed == "-" || trimmed.starts_with("-}") {
            inside = false;
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some((name, value)) = tag_name(line) {
            if name == "20" {
                inside = true;
                out.push(Vec::new());
            } else if !inside {
                return Err(ctx.error(
                    line_no,
                    format!(
                        "tag :{name}: outside a statement (hint: every statement starts with :20:)"
                    ),
                ));
            }
            if let Some(st) = out.last_mut() {
                st.push(Tag {
                    name: name.to_string(),
                    line: line_no,
                    value: value.to_string(),
                });
            }
        } else if inside {
            if let Some(tag) = out.last_mut().and_then(|s| s.last_mut()) {
                tag.value.push('\n');
                tag.value.push_str(line);
            }
        } else if trimmed.starts_with(':')
            && trimmed.len() > 1
            && !trimmed[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(ctx.error(
                line_no,
                format!("line {trimmed:?} outside a statement is not a tag"),
            ));
        }
        // Otherwise: header / prose before a statement; skipped.
    }
    Ok(out)
}

/// Parses `D`/`C` + YYMMDD + currency + amount (`:60F:`, `:62F:`, `:64:`, `:65:`).
fn balance(ctx: &ParseContext, tag: &Tag) -> Result<Balance> {
    if tag.value.contains('\n') {
        return Err(ctx.error(
            tag.line,
            format!(":{}: continues on the next line", tag.name),
        ));
    }
    let v = tag.value.trim();
    let err = |m: &str| ctx.error(tag.line, format!(":{}: {v:?}: {m}", tag.name));
    let sign = match v.as_bytes().first() {
        Some(b'C') => 1,
        Some(b'D') => -1,
        _ => return Err(err("mark is not C or D")),
    };
    if v.len() < 11 {
        return Err(err("too short (want C/D, YYMMDD, currency, amount)"));
    }
    let date = text::yymmdd(v.get(1..7).ok_or_else(|| err("bad date"))?).map_err(|e| err(&e))?;
    let cur = v.get(7..10).ok_or_else(|| err("bad currency"))?;
    let (currency, _) = text::currency(cur).map_err(|e| err(&e))?;
    let amount = amount(v.get(10..).unwrap_or("")).map_err(|e| err(&e))?;
    let minor = text::minor(amount, currency).map_err(|e| err(&e))?;
    Ok(Balance {
        amount_minor: sign * minor,
        currency,
        date: Some(date),
    })
}

/// SWIFT amount: digits with one `,` (or `.`) decimal mark; `9,` and `0,` are whole amounts.
fn amount(s: &str) -> Result<Decimal, String> {
    let s = s.trim();
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b',' || b == b'.')
    {
        return Err(format!("amount {s:?} is not a SWIFT amount"));
    }
    let fmt = crate::money::NumberFormat {
        decimal: if s.contains(',') { ',' } else { '.' },
        thousands: None,
    };
    let t = s.trim_end_matches([',', '.']);
    crate::money::parse_decimal(if t.is_empty() { "0" } else { t }, fmt).map_err(|e| e.to_string())
}

/// A `:61:` line before currency and `:86:` are known.
#[derive(Debug)]
struct Entry {
    line: u64,
    booked: NaiveDate,
    sign: i64,
    reversal: bool,
    amount: Decimal,
    owner_ref: Option<String>,
    bank_ref: Option<String>,
    info: String,
}

fn entry(ctx: &ParseContext, tag: &Tag) -> Result<Entry> {
    let first = tag.value.split('\n').next().unwrap_or("");
    let v = first.trim_end();
    let err = |m: &str| ctx.error(tag.line, format!(":61: {v:?}: {m}"));
    let value_date =
        text::yymmdd(v.get(0..6).ok_or_else(|| err("too short"))?).map_err(|e| err(&e))?;
    let mut rest = &v[6..];
    let mut booked = value_date;
    if rest.len() >= 4 && rest.as_bytes()[..4].iter().all(u8::is_ascii_digit) {
        let mm: u32 = rest[0..2].parse().map_err(|_| err("bad entry date"))?;
        let dd: u32 = rest[2..4].parse().map_err(|_| err("bad entry date"))?;
        // The entry (booking) date has no year: take the one closest to the value date.
        booked = [
            value_date.year() - 1,
            value_date.year(),
            value_date.year() + 1,
        ]
        .iter()
        .filter_map(|&y| NaiveDate::from_ymd_opt(y, mm, dd))
        .min_by_key(|d| (*d - value_date).num_days().abs())
        .ok_or_else(|| err("entry date does not exist"))?;
        rest = &rest[4..];
    }
    let (sign, reversal, after) = if let Some(r) = rest.strip_prefix("RC") {
        (-1, true, r)
    } else if let Some(r) = rest.strip_prefix("RD") {
        (1, true, r)
    } else if let Some(r) = rest.strip_prefix('C') {
        (1, false, r)
    } else if let Some(r) = rest.strip_prefix('D') {
        (-1, false, r)
    } else {
        return Err(err("debit/credit mark is not C, D, RC or RD"));
    };
    // Optional funds code (third letter of the ISO currency code).
    let after = match after.as_bytes().first() {
        Some(b) if b.is_ascii_alphabetic() => &after[1..],
        _ => after,
    };
    let end = after
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .ok_or_else(|| err("no transaction type after the amount"))?;
    let amount = amount(&after[..end]).map_err(|e| err(&e))?;
    let rest = &after[end..];
    // Transaction type: one letter (S/N/F) and a 3-character code.
    // SWIFT says S, N or F; banks use other capitals too (`MCI0`), never anything else.
    match rest.chars().next() {
        Some(c) if c.is_ascii_uppercase() => {}
        _ => {
            return Err(err(
                "after the amount, no transaction type (S, N or F + code)",
            ));
        }
    }
    let refs = match rest.char_indices().nth(4) {
        Some((p, _)) => &rest[p..],
        None if rest.chars().count() == 4 => "",
        None => return Err(err("transaction type code is shorter than 3 characters")),
    };
    let (owner, bank) = match refs.find("//") {
        Some(p) => (&refs[..p], Some(&refs[p + 2..])),
        None => (refs, None),
    };
    let clean = |s: &str| {
        let t = s.trim();
        (!t.is_empty() && !t.eq_ignore_ascii_case("NONREF")).then(|| t.to_string())
    };
    Ok(Entry {
        line: tag.line,
        booked,
        sign,
        reversal,
        amount,
        owner_ref: clean(owner),
        bank_ref: bank.and_then(clean),
        info: String::new(),
    })
}

/// `:90D:`/`:90C:`: number of entries, currency, sum.
fn totals(ctx: &ParseContext, tag: &Tag) -> Result<(u64, &'static str, Decimal)> {
    let v = tag.value.trim();
    let err = |m: &str| ctx.error(tag.line, format!(":{}: {v:?}: {m}", tag.name));
    let p = v
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| err("no currency"))?;
    let n: u64 = v[..p].parse().map_err(|_| err("no entry count"))?;
    let (cur, _) =
        text::currency(v.get(p..p + 3).ok_or_else(|| err("no currency"))?).map_err(|e| err(&e))?;
    let sum = amount(&v[p + 3..]).map_err(|e| err(&e))?;
    Ok((n, cur, sum))
}

/// Reference, recipient from a `:86:` text: structured fields when present (`?20…?29`
/// purpose and `?31` account in German statements; `/EREF/`, `/REMI/`, `/IBAN/`, `/CNTP/` in
/// Dutch ones; `>20…` in Triodos'), otherwise the whole text.
fn describe_86(info: &str) -> (Option<String>, Option<String>, String) {
    let joined: String = info.split('\n').collect::<Vec<_>>().join("");
    if joined.contains("?20") || joined.contains("?00") {
        let mut purpose = String::new();
        let mut account = None;
        let mut eref = None;
        for part in joined.split('?').skip(1) {
            let (code, val) = part.split_at(part.len().min(2));
            match code {
                "20" | "21" | "22" | "23" | "24" | "25" | "26" | "27" | "28" | "29" | "60"
                | "61" | "62" | "63" => purpose.push_str(val),
                "31" => account = Some(val.trim().to_string()),
                _ => {}
            }
        }
        if let Some(p) = purpose.find("EREF+") {
            let v = sepa_field(&purpose[p + 5..]).trim();
            if !v.is_empty() && !v.eq_ignore_ascii_case("NOTPROVIDED") {
                eref = Some(v.to_string());
            }
        }
        // The remittance text proper follows `SVWZ+` when the purpose is SEPA-structured.
        let remittance = match purpose.find("SVWZ+") {
            Some(p) => sepa_field(&purpose[p + 5..]),
            None => purpose.as_str(),
        };
        return (eref, account, text::collapse(remittance));
    }
    if joined.starts_with('/') && joined.len() > 1 {
        let mut eref = None;
        let mut remi = None;
        let mut account = None;
        let fields: Vec<&str> = joined.split('/').collect();
        let mut i = 1;
        while i < fields.len() {
            let key = fields[i];
            let val = fields.get(i + 1).copied().unwrap_or("");
            match key {
                "EREF"
                    if !val.trim().is_empty()
                        && !val.trim().eq_ignore_ascii_case("NOTPROVIDED") =>
                {
                    eref = Some(val.trim().to_string())
                }
                "IBAN" | "CNTP" if account.is_none() && !val.trim().is_empty() => {
                    account = Some(val.trim().to_string())
                }
                "REMI" => {
                    // `/REMI/USTD//text/` or `/REMI/text/`.
                    let mut j = i + 1;
                    let mut parts = Vec::new();
                    while j < fields.len()
                        && !matches!(
                            fields[j],
                            "EREF"
                                | "IBAN"
                                | "CNTP"
                                | "NAME"
                                | "BIC"
                                | "TRTP"
                                | "MARF"
                                | "CSID"
                                | "ORDP"
                                | "BENM"
                                | "ISDT"
                                | "OCMT"
                                | "CDTRREF"
                                | "CDTRREFTP"
                                | "SVCL"
                        )
                    {
                        if !matches!(fields[j], "USTD" | "STRD" | "CUR" | "") {
                            parts.push(fields[j]);
                        }
                        j += 1;
                    }
                    remi = Some(parts.join("/"));
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 2;
        }
        return (
            eref,
            account,
            text::collapse(remi.as_deref().unwrap_or(&joined)),
        );
    }
    (None, None, text::collapse(&info.replace('\n', " ")))
}

/// The value of a SEPA purpose qualifier (`EREF+…`), up to the next qualifier.
fn sepa_field(v: &str) -> &str {
    let end = [
        "EREF+", "KREF+", "MREF+", "CRED+", "DEBT+", "SVWZ+", "ABWA+", "ABWE+", "COAM+", "OAMT+",
    ]
    .iter()
    .filter_map(|q| v.find(q))
    .min()
    .unwrap_or(v.len());
    &v[..end]
}

/// Parses MT940/MT942 bytes into canonical lines and one [`StatementFacts`] per statement.
pub fn parse(ctx: &ParseContext, bytes: &[u8]) -> Result<Parsed> {
    let text = text::decode(ctx, bytes)?;
    let statements = statements(ctx, &text)?;
    if statements.is_empty() {
        return Err(ctx.error(1, "no MT940/MT942 statement (no :20: tag) in the file"));
    }
    let mut parsed = Parsed::default();
    for st in statements {
        statement(ctx, &st, &mut parsed)?;
    }
    Ok(parsed)
}

fn statement(ctx: &ParseContext, tags: &[Tag], parsed: &mut Parsed) -> Result<()> {
    let start = tags.first().map(|t| t.line).unwrap_or(1);
    let mut facts = StatementFacts::new(&ctx.file, format!("line {start}"));
    let mut entries: Vec<Entry> = Vec::new();
    let mut floor_currency = None;
    // :90D: and :90C: (MT942): number of entries and sum.
    let mut debits_90: Option<(u64, Decimal)> = None;
    let mut credits_90: Option<(u64, Decimal)> = None;
    let mut totals_currency = None;
    let mut attach = false;
    let attach_next = |tag: &Tag, attach: bool| tag.name == "61" || attach;
    for tag in tags {
        let multi_ok = matches!(tag.name.as_str(), "61" | "86" | "NS");
        if !multi_ok && tag.value.contains('\n') {
            return Err(ctx.error(
                tag.line,
                format!(
                    ":{}: continues on the next line (only :61:, :86: and :NS: may)",
                    tag.name
                ),
            ));
        }
        match tag.name.as_str() {
            "20" => facts.statement_id = Some(tag.value.trim().to_string()),
            "21" | "28" | "28C" | "13" | "13D" | "NS" => {}
            "25" | "25P" => facts.account = Some(tag.value.trim().to_string()),
            "34F" => {
                let v = tag.value.trim();
                let cur = v.get(..3).unwrap_or("");
                floor_currency = Some(
                    text::currency(cur)
                        .map_err(|e| ctx.error(tag.line, format!(":34F: {v:?}: {e}")))?
                        .0,
                );
            }
            "60F" | "60M" => facts.opening = Some(balance(ctx, tag)?),
            "62F" | "62M" => facts.closing = Some(balance(ctx, tag)?),
            "64" | "65" => {
                balance(ctx, tag)?;
            }
            "61" => {
                if facts.closing.is_some() {
                    return Err(ctx.error(tag.line, ":61: after the closing balance :62:"));
                }
                entries.push(entry(ctx, tag)?);
            }
            "86" => {
                // After a :61: (or its first :86:) the text describes that entry; elsewhere
                // (Danske Bank, HSBC) it describes the statement and is not a line.
                if attach && let Some(e) = entries.last_mut() {
                    if !e.info.is_empty() {
                        e.info.push('\n');
                    }
                    e.info.push_str(&tag.value);
                }
            }
            "90D" | "90C" => {
                let (n, cur, sum) = totals(ctx, tag)?;
                totals_currency = Some(cur);
                if tag.name == "90D" {
                    debits_90 = Some((n, sum));
                } else {
                    credits_90 = Some((n, sum));
                }
            }
            other => {
                return Err(ctx.error(tag.line, format!("unsupported tag :{other}:")));
            }
        }
        attach = matches!(tag.name.as_str(), "61" | "86" | "NS") && attach_next(tag, attach);
    }
    if facts.account.is_none() {
        return Err(ctx.error(start, "statement without an account (:25:)"));
    }
    let currency = facts
        .opening
        .map(|b| b.currency)
        .or(floor_currency)
        .or(totals_currency)
        .or(facts.closing.map(|b| b.currency));
    facts.currency = currency;
    let origin = super::Origin::new(
        ctx.source.clone(),
        ctx.file.clone(),
        Some(Arc::from(facts.account.as_deref().unwrap_or(""))),
    );
    if !entries.is_empty() && currency.is_none() {
        return Err(ctx.error(
            start,
            "statement has entries but no currency (no :60F:, :34F: or :62F:)",
        ));
    }
    for e in entries {
        let cur = currency.unwrap_or("EUR");
        let minor =
            text::minor(e.amount, cur).map_err(|m| ctx.error(e.line, format!(":61: {m}")))?;
        let amount_minor = e.sign * minor;
        facts.entries += 1;
        facts.entries_sum += amount_minor;
        facts.entries_gross += minor;
        let (eref, counterparty, remittance) = describe_86(&e.info);
        let reference = eref
            .or(e.owner_ref.clone())
            .and_then(|r| text::reference(&r))
            .or_else(|| text::reference(&remittance));
        parsed.lines.push(StatementLine {
            origin: origin.clone(),
            line_no: e.line,
            provider_txn_id: e.bank_ref.map(Into::into),
            reference,
            recipient: counterparty
                .map(|a| crate::normalize::account(&a))
                .unwrap_or_default(),
            amount_minor,
            currency: cur,
            booked_at: day_start(ctx, e.booked),
            booked_to: super::text::day_end(ctx, e.booked),
            booked_day: Some(e.booked),
            kind: if e.reversal {
                LineKind::Refund
            } else {
                LineKind::Payment
            },
            entry: None,
            batch: None,
            role: crate::model::Role::Provider,
            content_id: 0,
            original: None,
        });
        facts.from = Some(facts.from.map_or(e.booked, |d| d.min(e.booked)));
        facts.to = Some(facts.to.map_or(e.booked, |d| d.max(e.booked)));
    }
    // The statement period: from the opening balance's day to the closing balance's day.
    if let Some(d) = facts.opening.and_then(|b| b.date) {
        facts.from = Some(facts.from.map_or(d, |f| f.min(d)));
    }
    if let Some(d) = facts.closing.and_then(|b| b.date) {
        facts.to = Some(facts.to.map_or(d, |t| t.max(d)));
    }
    if debits_90.is_some() || credits_90.is_some() {
        let cur = totals_currency.unwrap_or("EUR");
        let mut n = 0;
        let mut net = 0i64;
        let mut gross = 0i64;
        for (t, sign) in [(debits_90, -1), (credits_90, 1)] {
            if let Some((count, sum)) = t {
                n += count;
                let m = text::minor(sum, cur).map_err(|m| ctx.error(start, format!(":90: {m}")))?;
                net += sign * m;
                gross += m;
            }
        }
        facts.declared_entries = Some(n);
        facts.declared_net = Some(net);
        facts.declared_gross = Some(gross);
    }
    parsed.facts.push(facts);
    Ok(())
}
