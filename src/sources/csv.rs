//! Statements as delimited text (provider settlement CSVs and bank CSV exports), read through
//! the declarative column mapping of the config.
//!
//! Dialects: any delimiter, quoting (the csv crate), a byte-order mark, an encoding other than
//! UTF-8 (`encoding`, decoded strictly with encoding_rs), preamble lines (`skip_lines`), footer
//! records (`skip_footer`), files without a header (`has_header = false`, columns `#N`),
//! decimal commas, thousands separators, currency signs (`amount_symbols`), one signed amount
//! column, separate debit/credit columns, or an amount with a sign / credit-debit indicator
//! column (`columns.sign` + `signs`, which wins over the amount's own sign).
//!
//! The row → line mapping ([`Mapping`]) is shared with the xlsx reader (`xlsx.rs`).

use super::keys::{KeyAt, keys_of, split_off};
use super::limits::{InputLimits, MAX_FIELD_BYTES};
use super::tabular::{
    self, NetAmount, RawTabular, Sign, SkipRow, TabularSettings, column_index, column_rest,
    single_char,
};
use super::text::TextEncoding;
use super::{
    Balance, InputFile, OriginalAmount, ParseContext, Rejected, SourceLoad, StatementFacts,
    StatementLine, sha256_hex, text,
};
use crate::exit::{Failure, fail};
use crate::keyindex::KeyIndex;
use crate::model::{Format, LineKind};
use crate::{money, normalize, timeparse};
use anyhow::Result;
use chrono::NaiveDateTime;
use compact_str::CompactString;
use serde::Deserialize;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: the keys a csv source takes (its own here, the shared ones in `tabular`).
// ---------------------------------------------------------------------------------------------

/// The keys only a csv source takes, as written; the rest of its keys are the tabular ones
/// ([`RawTabular`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCsv {
    /// Text encoding of the file (`utf-8` default; `windows-1252`, `latin1`, `iso-8859-2`,
    /// `gbk`, … any WHATWG label).
    encoding: Option<String>,
    /// Field delimiter, `,` by default.
    delimiter: Option<String>,
    /// The quote character, `"` by default (`'` for exports that quote with it).
    quote: Option<String>,
}

/// The validated settings of a csv source.
#[derive(Debug, Clone)]
pub struct CsvSettings {
    /// Text encoding; `None` means strict UTF-8.
    pub encoding: Option<TextEncoding>,
    /// Field delimiter byte.
    pub delimiter: u8,
    /// Quote byte.
    pub quote: u8,
    /// The column mapping and number, date and row settings.
    pub table: TabularSettings,
}

impl Default for CsvSettings {
    fn default() -> Self {
        CsvSettings {
            encoding: None,
            delimiter: b',',
            quote: b'"',
            table: TabularSettings::default(),
        }
    }
}

/// Every key of a csv source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    [keys_of::<RawCsv>(), keys_of::<RawTabular>()].concat()
}

/// Reads and validates the csv keys of a source (`table`: its keys besides the common ones).
pub fn settings(mut table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<CsvSettings> {
    let own: RawCsv = at.read(split_off(&mut table, keys_of::<RawCsv>()))?;
    let shared: RawTabular = at.read(table)?;
    let encoding = match &own.encoding {
        Some(label) => text::parse_encoding(at, label)?,
        None => None,
    };
    let delimiter = single_char(
        at,
        "delimiter",
        own.delimiter.as_deref().unwrap_or(","),
        &[',', ';', '\t', '|'],
    )?;
    let quote = single_char(
        at,
        "quote",
        own.quote.as_deref().unwrap_or("\""),
        &['"', '\''],
    )?;
    let table = tabular::settings(at, shared, Format::Csv)?;
    Ok(CsvSettings {
        encoding,
        delimiter: delimiter as u8,
        quote: quote as u8,
        table,
    })
}

/// The trimmed header names of a CSV reader (a leading byte-order mark removed).
pub fn header_of<R: std::io::Read>(
    reader: &mut ::csv::Reader<R>,
    file: &str,
) -> Result<Vec<String>> {
    Ok(reader
        .headers()
        .map_err(|e| {
            fail(
                Failure::Input,
                format!("{file}: cannot read the header: {e}"),
            )
        })?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').trim().to_string())
        .collect())
}

/// The longest header line recon reads, in bytes: a file whose first line is longer is not a
/// statement (a 200 MB file of NUL bytes is one "header").
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The header's names for a message: each cut, at most 40 of them.
fn header_text(header: &[String]) -> String {
    let names: Vec<String> = header
        .iter()
        .take(40)
        .map(|h| format!("{:?}", super::cut(h)))
        .collect();
    let more = match header.len() {
        n if n > 40 => format!(", … ({n} columns in all)"),
        _ => String::new(),
    };
    format!("[{}{more}]", names.join(", "))
}

fn find(header: Option<&[String]>, name: &str, key: &str, file: &str) -> Result<usize> {
    let key = if key.starts_with("skip_rows") {
        key.to_string()
    } else {
        format!("columns.{key}")
    };
    if let Some(i) = column_index(name) {
        return Ok(i);
    }
    let mut at = header
        .unwrap_or(&[])
        .iter()
        .enumerate()
        .filter(|(_, h)| *h == name.trim())
        .map(|(i, _)| i);
    let first = at.next();
    // Reading the first of two same-named columns would be a silent guess.
    if let (Some(a), Some(b)) = (first, at.next()) {
        return Err(fail(
            Failure::Input,
            format!(
                "{file}: column {name:?} (config key {key}) appears twice in the header, as column {} and column {} (hint: rename one, or map the column by position, \"#{}\")",
                a + 1,
                b + 1,
                a + 1
            ),
        ));
    }
    first.ok_or_else(|| {
        fail(
            Failure::Input,
            format!(
                "{file}: column {name:?} (config key {key}) is not in the header; found {}",
                header_text(header.unwrap_or(&[]))
            ),
        )
    })
}

/// One row of a table, whatever the file format: text cells (CSV) or typed cells (xlsx).
pub trait Row {
    /// The cell's text (for numbers: the shortest exact decimal, `.` as separator).
    fn text(&self, i: usize) -> Option<&str>;
    /// Whether the cell holds a native number (its text is `.`-decimal, no grouping).
    fn is_number(&self, _i: usize) -> bool {
        false
    }
    /// A native date-time cell: a wall-clock time in the source's time zone (a time of
    /// exactly midnight without `booked_time` is read as the whole day).
    fn date(&self, _i: usize) -> Option<NaiveDateTime> {
        None
    }
    /// A native instant (a Parquet timestamp): exact, no time zone applies; `Err` when the
    /// cell's time does not exist or is ambiguous in the source's time zone.
    fn instant(&self, _i: usize) -> Option<Result<crate::timeparse::Micros, String>> {
        None
    }
    /// Whether every cell is blank.
    fn is_blank(&self) -> bool;
}

impl Row for ::csv::StringRecord {
    fn text(&self, i: usize) -> Option<&str> {
        self.get(i)
    }
    fn is_blank(&self) -> bool {
        self.iter().all(|f| f.trim().is_empty())
    }
}

/// One column of a text field: a single cell, or a cell and every field after it (`#N..`,
/// for rows wider than the header).
#[derive(Debug, Clone, Copy)]
enum Pick {
    One(usize),
    Rest(usize),
}

/// A column as messages name it: `#9 ("Name")`, or `#9` without a header name.
fn column_name(header: Option<&[String]>, i: usize) -> String {
    match header.and_then(|h| h.get(i)).filter(|n| !n.is_empty()) {
        Some(n) => format!("#{} ({:?})", i + 1, super::cut(n)),
        None => format!("#{}", i + 1),
    }
}

/// The source of a csv or xlsx file as its parser needs it besides the format's own settings:
/// its name (on every line and message), its time zone (dates and times without an offset) and
/// the bounds on one of its files. The callers take it from the source's configuration
/// (`SourceConfig::table_source`), which holds this module's settings and so is not named
/// here.
#[derive(Debug, Clone, Copy)]
pub struct TableSource<'c> {
    /// The source's name.
    pub name: &'c str,
    /// Zone of dates and times without an offset.
    pub timezone: chrono_tz::Tz,
    /// The bounds on one of its files.
    pub limits: &'c InputLimits,
}

/// Column positions resolved from the header, with the source's settings.
pub struct Mapping<'c> {
    src: TableSource<'c>,
    t: &'c TabularSettings,
    txn: Vec<Pick>,
    reference: Vec<Pick>,
    recipient: Vec<Pick>,
    amount: Option<usize>,
    debit: Option<usize>,
    credit: Option<usize>,
    sign: Option<usize>,
    currency: Option<usize>,
    booked_at: usize,
    booked_time: Option<usize>,
    kind: Option<usize>,
    batch: Vec<Pick>,
    status: Option<usize>,
    original_amount: Option<usize>,
    original_currency: Option<usize>,
    fee: Option<usize>,
    balance: Option<usize>,
    skip: Vec<(usize, &'c SkipRow)>,
    origin: Arc<super::Origin>,
}

/// What one row is. Lives for one row only, so the large variant is not boxed (a box per
/// line would be one more allocation for each of a million lines).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Parsed {
    /// A booked line, with the running balance after it when a balance column is mapped.
    Line(StatementLine, Option<i64>),
    /// Not booked (its status value): not loaded, counted.
    NotBooked(String),
    /// Not a statement line (which `skip_rows` rule, or a zero amount): not loaded, counted.
    Skipped(String),
    /// Unreadable: which column and why.
    Bad(String),
}

impl<'c> Mapping<'c> {
    /// Resolves the columns `t` maps against `header` (`None`: positions only).
    pub fn new(
        src: TableSource<'c>,
        t: &'c TabularSettings,
        header: Option<&[String]>,
        file: &str,
    ) -> Result<Mapping<'c>> {
        let c = &t.columns;
        let opt = |v: &Option<String>, key: &str| {
            v.as_deref().map(|n| find(header, n, key, file)).transpose()
        };
        let picks = |v: &Option<String>, key: &'static str| -> Result<Vec<Pick>> {
            let Some(first) = v else {
                return Ok(Vec::new());
            };
            let more = c.more.get(key).map(Vec::as_slice).unwrap_or(&[]);
            std::iter::once(first)
                .chain(more)
                .map(|n| match column_rest(n) {
                    Some(i) => Ok(Pick::Rest(i)),
                    None => find(header, n, key, file).map(Pick::One),
                })
                .collect()
        };
        let skip = t
            .skip_rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                find(header, &r.column, &format!("skip_rows[{i}].column"), file).map(|at| (at, r))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Mapping {
            src,
            t,
            txn: picks(&c.provider_txn_id, "provider_txn_id")?,
            reference: picks(&c.reference, "reference")?,
            recipient: picks(&c.recipient, "recipient")?,
            amount: opt(&c.amount, "amount")?,
            debit: opt(&c.debit, "debit")?,
            credit: opt(&c.credit, "credit")?,
            sign: opt(&c.sign, "sign")?,
            currency: opt(&c.currency, "currency")?,
            booked_at: find(header, &c.booked_at, "booked_at", file)?,
            booked_time: opt(&c.booked_time, "booked_time")?,
            kind: opt(&c.kind, "kind")?,
            batch: picks(&c.batch, "batch")?,
            status: opt(&c.status, "status")?,
            original_amount: opt(&c.original_amount, "original_amount")?,
            original_currency: opt(&c.original_currency, "original_currency")?,
            fee: opt(&c.fee, "fee")?,
            balance: opt(&c.balance, "balance")?,
            skip,
            origin: super::Origin::new(Arc::from(src.name), Arc::from(file), None),
        })
    }

    /// Every column the mapping reads (0-based, ascending, once each); a `#N..` field
    /// counts its first column only.
    pub fn columns(&self) -> Vec<usize> {
        let picks = [&self.txn, &self.reference, &self.recipient, &self.batch]
            .into_iter()
            .flatten()
            .map(|p| match *p {
                Pick::One(i) | Pick::Rest(i) => i,
            });
        let single = [
            self.amount,
            self.debit,
            self.credit,
            self.sign,
            self.currency,
            Some(self.booked_at),
            self.booked_time,
            self.kind,
            self.status,
            self.original_amount,
            self.original_currency,
            self.fee,
            self.balance,
        ]
        .into_iter()
        .flatten();
        let mut all: Vec<usize> = picks
            .chain(single)
            .chain(self.skip.iter().map(|(i, _)| *i))
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// The column of `booked_at`.
    pub fn booked_at_column(&self) -> usize {
        self.booked_at
    }

    fn field<'r, R: Row>(&self, row: &'r R, i: usize, name: &str) -> Result<&'r str, String> {
        row.text(i)
            .ok_or_else(|| format!("column {name:?} is missing (short row)"))
    }

    /// Parses an amount cell (`None` when blank).
    fn amount_cell<R: Row>(
        &self,
        row: &R,
        i: usize,
        name: &str,
        currency: &'static str,
        exponent: u32,
    ) -> Result<Option<i64>, String> {
        let raw = self.field(row, i, name)?;
        let parsed = if row.is_number(i) {
            money::parse_decimal(raw, money::NumberFormat::DOT)
        } else {
            let cleaned: std::borrow::Cow<'_, str> = if self.t.amount_symbols.is_empty() {
                raw.into()
            } else {
                raw.chars()
                    .filter(|c| !self.t.amount_symbols.contains(c))
                    .collect::<String>()
                    .into()
            };
            if cleaned.trim().is_empty() {
                return Ok(None);
            }
            money::parse_decimal(&cleaned, self.t.number_format)
        };
        parsed
            .and_then(|d| money::to_minor(d, currency, exponent))
            .map(Some)
            .map_err(|e| format!("column {name:?}: {e}"))
    }

    /// The text of a field mapped to `picks`: the cells joined with `join_separator` (empty
    /// ones left out), `None` when every cell is empty or the field is not mapped.
    fn joined<R: Row>(&self, row: &R, picks: &[Pick]) -> Option<CompactString> {
        let mut out = String::new();
        let mut add = |cell: &str| {
            let t = normalize::text(cell);
            if !t.is_empty() {
                if !out.is_empty() {
                    out.push_str(&self.t.join_separator);
                }
                out.push_str(&t);
            }
        };
        for p in picks {
            match *p {
                Pick::One(i) => add(row.text(i).unwrap_or("")),
                Pick::Rest(from) => {
                    let mut i = from;
                    while let Some(t) = row.text(i) {
                        add(t);
                        i += 1;
                    }
                }
            }
        }
        (!out.is_empty()).then(|| CompactString::from(out))
    }

    /// Which `skip_rows` rule the row meets, if any.
    fn skip_rule<R: Row>(&self, row: &R) -> Option<String> {
        self.skip.iter().find_map(|(i, rule)| {
            let written = row.text(*i)?;
            let cell = normalize::label(written);
            let hit = rule.values.contains(&cell)
                || rule.contains.iter().any(|v| cell.contains(v.as_str()));
            hit.then(|| format!("{} {:?}", rule.column, super::cut(written.trim())))
        })
    }

    /// Turns one row into a canonical line, unless its status says it is not booked or a
    /// `skip_rows` rule says it is no statement line.
    pub fn row<R: Row>(&self, row: &R, line_no: u64) -> Parsed {
        if let Some(why) = self.skip_rule(row) {
            return Parsed::Skipped(why);
        }
        if let Some(i) = self.status {
            let name = self.t.columns.status.as_deref().unwrap_or("status");
            match self.field(row, i, name) {
                Err(e) => return Parsed::Bad(e),
                Ok(v) => {
                    let v = normalize::label(v);
                    if !self.t.booked_statuses.contains(&v) {
                        return Parsed::NotBooked(v);
                    }
                }
            }
        }
        let line = match self.line(row, line_no) {
            Ok(l) => l,
            Err(e) => return Parsed::Bad(e),
        };
        if self.t.skip_zero_amounts && line.amount_minor == 0 {
            return Parsed::Skipped("amount 0".into());
        }
        let balance = match self.balance {
            None => None,
            Some(i) => {
                let name = self.t.columns.balance.as_deref().unwrap_or("balance");
                let exponent = match text::currency(line.currency) {
                    Ok((_, e)) => e,
                    Err(e) => return Parsed::Bad(e),
                };
                match self.amount_cell(row, i, name, line.currency, exponent) {
                    Ok(b) => b,
                    Err(e) => return Parsed::Bad(e),
                }
            }
        };
        Parsed::Line(line, balance)
    }

    /// Turns one row into a canonical line, or says which column is wrong.
    pub fn line<R: Row>(&self, row: &R, line_no: u64) -> Result<StatementLine, String> {
        let c = &self.t.columns;
        let (currency, exponent) = match (self.currency, self.t.currency) {
            (Some(i), _) => {
                let name = c.currency.as_deref().unwrap_or("currency");
                text::currency(self.field(row, i, name)?)
                    .map_err(|e| format!("column {name:?}: {e}"))?
            }
            (None, Some(code)) => text::currency(code)?,
            (None, None) => return Err("no currency column".into()),
        };
        let amount = if let Some(i) = self.amount {
            let name = c.amount.as_deref().unwrap_or("amount");
            let v = self
                .amount_cell(row, i, name, currency, exponent)?
                .ok_or_else(|| format!("column {name:?}: empty amount"))?;
            match self.sign {
                None => v,
                Some(s) => {
                    let sname = c.sign.as_deref().unwrap_or("sign");
                    let flag = self.field(row, s, sname)?;
                    match self.t.signs.get(&normalize::label(flag)) {
                        Some(Sign::Credit) => v.abs(),
                        Some(Sign::Debit) => -v.abs(),
                        None => {
                            return Err(format!(
                                "column {sname:?}: value {flag:?} is not mapped to credit or debit (config key signs)"
                            ));
                        }
                    }
                }
            }
        } else {
            let debit = match self.debit {
                Some(i) => self.amount_cell(
                    row,
                    i,
                    c.debit.as_deref().unwrap_or("debit"),
                    currency,
                    exponent,
                )?,
                None => None,
            };
            let credit = match self.credit {
                Some(i) => self.amount_cell(
                    row,
                    i,
                    c.credit.as_deref().unwrap_or("credit"),
                    currency,
                    exponent,
                )?,
                None => None,
            };
            match (debit.filter(|v| *v != 0), credit.filter(|v| *v != 0)) {
                (Some(_), Some(_)) => {
                    return Err("both the debit and the credit column hold an amount".into());
                }
                // A debit column may hold the amount with or without its minus sign.
                (Some(d), None) => -d.abs(),
                (None, Some(cr)) if cr < 0 => {
                    return Err(format!(
                        "credit column holds a negative amount ({cr} minor units)"
                    ));
                }
                (None, Some(cr)) => cr,
                (None, None) if debit.is_some() || credit.is_some() => 0,
                (None, None) => {
                    return Err("neither the debit nor the credit column holds an amount".into());
                }
            }
        };
        let amount = match (self.fee, self.t.net_amount) {
            (Some(i), Some(how)) => {
                let name = c.fee.as_deref().unwrap_or("fee");
                // A blank fee cell is no fee (exports leave it empty on rows without one).
                let fee = self
                    .amount_cell(row, i, name, currency, exponent)?
                    .unwrap_or(0);
                match how {
                    NetAmount::MinusFee => amount.checked_sub(fee),
                    NetAmount::PlusFee => amount.checked_add(fee),
                }
                .ok_or_else(|| format!("column {name:?}: the net amount is out of range"))?
            }
            _ => amount,
        };
        let amount_minor = if self.t.negate_amounts {
            -amount
        } else {
            amount
        };
        let original = match (self.original_amount, self.original_currency) {
            (Some(ai), Some(ci)) => {
                let aname = c.original_amount.as_deref().unwrap_or("original_amount");
                let cname = c
                    .original_currency
                    .as_deref()
                    .unwrap_or("original_currency");
                let code = self.field(row, ci, cname)?.trim();
                let written = self.field(row, ai, aname)?;
                match (code.is_empty(), written.trim().is_empty()) {
                    (true, true) => None,
                    (true, false) => {
                        // An amount without its currency would be read in the account's.
                        return Err(format!(
                            "column {cname:?}: empty, but column {aname:?} holds an original amount"
                        ));
                    }
                    (false, true) => {
                        return Err(format!(
                            "column {aname:?}: empty, but column {cname:?} names an original currency"
                        ));
                    }
                    (false, false) => {
                        let (ocur, oexp) =
                            text::currency(code).map_err(|e| format!("column {cname:?}: {e}"))?;
                        let v = self
                            .amount_cell(row, ai, aname, ocur, oexp)?
                            .unwrap_or(0)
                            .abs();
                        // The line's direction is its account amount's; the original is
                        // often written unsigned.
                        Some(Box::new(OriginalAmount {
                            amount_minor: if amount_minor < 0 { -v } else { v },
                            currency: ocur,
                        }))
                    }
                }
            }
            _ => None,
        };
        let (booked_at, booked_day) = match (row.instant(self.booked_at), row.date(self.booked_at))
        {
            (Some(t), _) => (
                t.map_err(|e| format!("column {:?}: {e}", c.booked_at))?,
                None,
            ),
            // A spreadsheet date cell without a time of day is a date (a booking exactly at
            // midnight is far rarer than a date-formatted cell).
            (None, Some(naive))
                if naive.time() == chrono::NaiveTime::MIN && self.booked_time.is_none() =>
            {
                (
                    timeparse::day_start(naive.date(), self.src.timezone),
                    Some(naive.date()),
                )
            }
            (None, Some(naive)) => (
                timeparse::local_to_utc(naive, self.src.timezone)
                    .map_err(|e| format!("column {:?}: {e}", c.booked_at))?,
                None,
            ),
            (None, None) => {
                let booked_text = self.field(row, self.booked_at, &c.booked_at)?;
                let joined;
                let text = match self.booked_time {
                    None => booked_text,
                    Some(i) => {
                        let t = self.field(row, i, c.booked_time.as_deref().unwrap_or("time"))?;
                        joined = format!("{} {}", booked_text.trim(), t.trim());
                        &joined
                    }
                };
                timeparse::parse_booking(text, &self.t.timestamp_format, self.src.timezone)
                    .map_err(|e| format!("column {:?}: {e}", c.booked_at))?
            }
        };
        let recipient = match self.recipient.as_slice() {
            [] => CompactString::default(),
            picks => {
                let name = c.recipient.as_deref().unwrap_or("recipient");
                // Empty is allowed (a bank fee has no counterparty): the line then takes no
                // part in recipient-based matching (see `matching`).
                match picks {
                    [Pick::One(i)] => normalize::account(self.field(row, *i, name)?),
                    _ => self
                        .joined(row, picks)
                        .map(|r| normalize::account(&r))
                        .unwrap_or_default(),
                }
            }
        };
        let kind = match self.kind {
            None => LineKind::Payment,
            Some(i) => {
                let name = c.kind.as_deref().unwrap_or("kind");
                let v = self.field(row, i, name)?;
                let key = normalize::label(v);
                *self.t.kinds.get(&key).ok_or_else(|| {
                    format!(
                        "column {name:?}: value {v:?} is not mapped to PAYMENT, REFUND, FEE, PAYOUT or BALANCE (config key kinds)"
                    )
                })?
            }
        };
        let optional = |picks: &[Pick]| self.joined(row, picks);
        Ok(StatementLine {
            origin: self.origin.clone(),
            line_no,
            provider_txn_id: optional(&self.txn),
            reference: optional(&self.reference).map(|r| crate::model::Id::new(&r)),
            recipient,
            amount_minor,
            currency,
            booked_at,
            booked_to: match booked_day {
                Some(d) => timeparse::day_booking(d, self.src.timezone).1,
                None => booked_at,
            },
            booked_day,
            kind,
            entry: None,
            batch: optional(&self.batch),
            role: crate::model::Role::Provider,
            content_id: 0,
            original,
        })
    }
}

/// Collects accepted lines of one file, dropping re-deliveries within it (same provider id,
/// same content) and rejecting an id seen before with different content.
#[derive(Debug)]
pub struct Collector {
    source: String,
    file: String,
    /// Accepted lines.
    pub lines: Vec<StatementLine>,
    /// Rejected lines.
    pub rejected: Vec<Rejected>,
    /// Dropped re-deliveries.
    pub duplicates: usize,
    /// Rows not booked: (line, status value).
    pub not_booked: Vec<(u64, String)>,
    /// Rows that are no statement lines: (line, the rule that matched).
    pub skipped: Vec<(u64, String)>,
    /// Running balances of accepted lines, in file order: (index into `lines`, balance).
    pub balances: Vec<(usize, i64)>,
    /// Lines by provider_txn_id.
    seen: KeyIndex,
}

impl Collector {
    /// An empty collector for `file` of source `source`, with room for about `rows` lines
    /// (sized up front: growing a million-line vector copies it, and faults in fresh pages,
    /// about twenty times).
    pub fn new(source: &str, file: &str, rows: usize) -> Collector {
        Collector {
            source: source.to_string(),
            file: file.to_string(),
            lines: Vec::with_capacity(rows),
            rejected: Vec::new(),
            duplicates: 0,
            not_booked: Vec::new(),
            skipped: Vec::new(),
            balances: Vec::new(),
            seen: KeyIndex::with_capacity(rows),
        }
    }

    /// Records a rejected line (its reason [`crate::exit::bounded`]).
    pub fn reject(&mut self, line: u64, reason: String) {
        let reason = match crate::exit::bounded(&reason) {
            std::borrow::Cow::Borrowed(_) => reason,
            std::borrow::Cow::Owned(cut) => cut,
        };
        self.rejected.push(Rejected {
            source: self.source.clone(),
            file: self.file.clone(),
            line,
            reason,
        });
    }

    /// Adds a parsed row.
    pub fn push(&mut self, parsed: Parsed, line_no: u64) {
        let (line, balance) = match parsed {
            Parsed::Line(l, b) => (l, b),
            Parsed::NotBooked(status) => return self.not_booked.push((line_no, status)),
            Parsed::Skipped(why) => return self.skipped.push((line_no, why)),
            Parsed::Bad(reason) => return self.reject(line_no, reason),
        };
        if let Some(id) = &line.provider_txn_id {
            let lines = &self.lines;
            let id_of = |j: u32| lines[j as usize].provider_txn_id.as_deref().unwrap_or("");
            let next = u32::try_from(lines.len()).expect("under 2^32 lines in one file");
            if let Some(i) = self.seen.insert_new(id, next, id_of) {
                let first: &StatementLine = &self.lines[i as usize];
                if first.amount_minor == line.amount_minor
                    && first.currency == line.currency
                    && first.booked_at == line.booked_at
                    && first.recipient == line.recipient
                    && first.reference == line.reference
                    && first.kind == line.kind
                {
                    self.duplicates += 1;
                } else {
                    let reason = format!(
                        "provider_txn_id {id:?} already seen at line {} with different content",
                        first.line_no
                    );
                    self.reject(line_no, reason);
                }
                return;
            }
        }
        if let Some(b) = balance {
            self.balances.push((self.lines.len(), b));
        }
        self.lines.push(line);
    }
}

/// Lines by the value that put them in a list, for a message: `X at line(s) 3, 7, …`.
fn lines_by_value(rows: &[(u64, String)]) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    for (line, v) in rows {
        by.entry(v).or_default().push(*line);
    }
    by.iter()
        .map(|(v, lines)| {
            let shown: Vec<String> = lines.iter().take(5).map(u64::to_string).collect();
            let more = if lines.len() > 5 { ", …" } else { "" };
            format!("{v} at line(s) {}{more}", shown.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks a file's running balance column (DESIGN.md rule 2): each row's balance must be
/// the previous balance plus the row's amount as written (before `negate_amounts`). Rows
/// without a balance carry their amount to the next row that has one. Files newest-first
/// are read backwards. One statement per currency, so the completeness gates
/// (`balance_chain`, and `control_totals` for the rows that break the chain) judge it as they
/// judge a bank statement's balances.
fn balance_facts(
    src: TableSource<'_>,
    t: &TabularSettings,
    file: &str,
    out: &Collector,
) -> Vec<StatementFacts> {
    let mut facts = Vec::new();
    if t.columns.balance.is_none() || out.lines.is_empty() {
        return facts;
    }
    let by_line: std::collections::HashMap<usize, i64> = out.balances.iter().copied().collect();
    let mut currencies: Vec<&'static str> = out.lines.iter().map(|l| l.currency).collect();
    currencies.sort_unstable();
    currencies.dedup();
    for cur in currencies {
        // (line, amount as written, balance after it)
        let rows: Vec<(&StatementLine, i64, Option<i64>)> = out
            .lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.currency == cur)
            .map(|(i, l)| {
                let written = if t.negate_amounts {
                    -l.amount_minor
                } else {
                    l.amount_minor
                };
                (l, written, by_line.get(&i).copied())
            })
            .collect();
        // Booking order decides the direction; a file of one day may be either.
        let (first, last) = (rows[0].0.booked_at, rows[rows.len() - 1].0.booked_at);
        let forward = chain(rows.iter().copied());
        let backward = chain(rows.iter().rev().copied());
        let newest_first = first > last
            || (first == last
                && !forward.breaks.is_empty()
                && backward.breaks.len() < forward.breaks.len());
        let (c, order) = if newest_first {
            (backward, " (rows newest first)")
        } else {
            (forward, "")
        };
        let days = rows.iter().map(|(l, _, _)| match l.booked_day {
            Some(d) => d,
            None => crate::timeparse::local_date(l.booked_at, src.timezone),
        });
        let (from, to) = (days.clone().min(), days.max());
        let booked = match (from, to) {
            (Some(a), Some(b)) => format!(", bookings {a}..{b}"),
            _ => String::new(),
        };
        // No period of its own: a chain that breaks voids what the whole file claims (the
        // file lost rows), not only the days of its lines.
        let mut f = StatementFacts::new(file, format!("line {}{order}{booked}", rows[0].0.line_no));
        f.currency = Some(cur);
        let bal = |amount_minor| Balance {
            amount_minor,
            currency: cur,
            date: None,
        };
        f.opening = c.opening.map(bal);
        f.closing = c.closing.map(bal);
        f.entries = c.entries;
        f.entries_sum = c.sum;
        f.entries_gross = c.gross;
        if !c.breaks.is_empty() {
            f.control_totals_checked = true;
            let money = |m: i64| crate::money::format_minor(m, cur);
            f.control_problems = c
                .breaks
                .iter()
                .take(5)
                .map(|(l, prev, amount, got)| {
                    format!(
                        "line {}: balance {} is not the previous balance {} + amount {} = {} {cur}",
                        l.line_no,
                        money(*got),
                        money(*prev),
                        money(*amount),
                        money(prev.saturating_add(*amount)),
                    )
                })
                .collect();
            if c.breaks.len() > 5 {
                f.control_problems.push(format!(
                    "{} more rows break the running balance",
                    c.breaks.len() - 5
                ));
            }
        }
        facts.push(f);
    }
    facts
}

/// A running balance walked in booking order.
struct Chain<'l> {
    opening: Option<i64>,
    closing: Option<i64>,
    entries: u64,
    sum: i64,
    gross: i64,
    /// (row, previous balance, amount since it, the row's balance)
    breaks: Vec<(&'l StatementLine, i64, i64, i64)>,
}

fn chain<'l>(rows: impl Iterator<Item = (&'l StatementLine, i64, Option<i64>)>) -> Chain<'l> {
    let mut c = Chain {
        opening: None,
        closing: None,
        entries: 0,
        sum: 0,
        gross: 0,
        breaks: Vec::new(),
    };
    let (mut pending, mut n, mut gross) = (0i64, 0u64, 0i64);
    for (l, amount, balance) in rows {
        pending = pending.saturating_add(amount);
        n += 1;
        gross = gross.saturating_add(amount.saturating_abs());
        let Some(b) = balance else { continue };
        // Rows after the last balance are outside the chain.
        c.sum = c.sum.saturating_add(pending);
        c.entries += n;
        c.gross = c.gross.saturating_add(gross);
        (n, gross) = (0, 0);
        match c.closing {
            None => c.opening = Some(b.saturating_sub(pending)),
            Some(prev) if prev.checked_add(pending) != Some(b) => {
                c.breaks.push((l, prev, pending, b));
            }
            Some(_) => {}
        }
        c.closing = Some(b);
        pending = 0;
    }
    c
}

/// Reads one CSV file into `load`. Returns whether every data line was accepted.
/// An unreadable file or a header without a mapped column is an error for the whole file.
pub fn read_file(
    src: TableSource<'_>,
    csv: &CsvSettings,
    path: &Path,
    load: &mut SourceLoad,
) -> Result<bool> {
    read_table_file(src, &csv.table, path, load, |file, bytes| {
        parse_bytes(src, csv, file, bytes)
    })
}

/// Reads one file of a tabular format (CSV, XLSX, JSON lines) into `load`: its bytes within
/// the input limits, their sha256, `parse` (file name, bytes → the collected rows), then
/// [`finish_file`]. Returns whether every row was accepted.
pub fn read_table_file(
    src: TableSource<'_>,
    table: &TabularSettings,
    path: &Path,
    load: &mut SourceLoad,
    parse: impl FnOnce(&str, &[u8]) -> Result<Collector>,
) -> Result<bool> {
    let file = path.display().to_string();
    let bytes = src.limits.read(path)?;
    let sha256 = sha256_hex(&bytes);
    let out = parse(&file, &bytes)?;
    Ok(finish_file(src, table, file, sha256, out, load))
}

/// Records one csv/xlsx file's collected rows in `load`: lines, rejected rows, counts, and a
/// warning naming the rows that were not booked. Returns whether the file is clean: no row
/// rejected and none pending. A not-booked row is never evidence that a payment happened, and
/// while one is in the file its absence proves nothing either (the pending row may be the
/// payment), so such a file does not count as complete (DESIGN.md rule 2).
pub fn finish_file(
    src: TableSource<'_>,
    t: &TabularSettings,
    file: String,
    sha256: String,
    out: Collector,
    load: &mut SourceLoad,
) -> bool {
    let clean = out.rejected.is_empty() && out.not_booked.is_empty();
    load.facts.extend(balance_facts(src, t, &file, &out));
    if !out.skipped.is_empty() {
        tracing::info!(
            source = %src.name,
            file = %file,
            skipped = out.skipped.len(),
            "Skipped rows that are no statement lines."
        );
        load.notes.push(format!(
            "source {}: {file}: {} row(s) that are no statement lines were skipped (skip_rows / skip_zero_amounts): {}",
            src.name,
            out.skipped.len(),
            lines_by_value(&out.skipped)
        ));
    }
    if !out.not_booked.is_empty() {
        let mut by_status: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
        for (line, status) in &out.not_booked {
            by_status.entry(status).or_default().push(*line);
        }
        let parts: Vec<String> = by_status
            .iter()
            .map(|(st, lines)| {
                let shown: Vec<String> = lines.iter().take(5).map(u64::to_string).collect();
                let more = if lines.len() > 5 { ", …" } else { "" };
                format!("{st:?} at line(s) {}{more}", shown.join(", "))
            })
            .collect();
        load.warnings.push(format!(
            "source {}: {file}: {} row(s) not booked were not loaded: {}",
            src.name,
            out.not_booked.len(),
            parts.join("; ")
        ));
    }
    load.files.push(InputFile {
        source: src.name.to_string(),
        path: file,
        sha256,
        lines: out.lines.len(),
        rejected: out.rejected.len(),
        duplicates: out.duplicates,
        not_booked: out.not_booked.len(),
        skipped: out.skipped.len(),
    });
    super::absorb(&mut load.lines, out.lines);
    load.rejected.extend(out.rejected);
    clean
}

/// The 1-based line a record starts on. After a CRLF record end the csv crate reports the
/// next record at the `\n` still on the previous line; that `\n` belongs to the line before.
fn line_of(body: &[u8], p: &::csv::Position) -> u64 {
    let at = usize::try_from(p.byte()).unwrap_or(usize::MAX);
    match body.get(at) {
        Some(b'\n') => p.line() + 1,
        _ => p.line(),
    }
}

/// Parses CSV bytes: accepted lines, rejected and not-booked rows, dropped re-deliveries.
pub fn parse_bytes(
    src: TableSource<'_>,
    csv: &CsvSettings,
    file: &str,
    bytes: &[u8],
) -> Result<Collector> {
    let t = &csv.table;
    let decoded;
    let bytes = match csv.encoding {
        None => bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
        Some(_) => {
            let ctx = ParseContext {
                source: Arc::from(src.name),
                file: Arc::from(file),
                timezone: src.timezone,
                encoding: csv.encoding,
            };
            decoded = text::decode(&ctx, bytes)?;
            decoded.as_bytes()
        }
    };
    // Skip the preamble by physical lines, then let the csv crate handle quoting.
    let mut offset = 0usize;
    for _ in 0..t.skip_lines {
        match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(p) => offset += p + 1,
            None => offset = bytes.len(),
        }
    }
    let body = &bytes[offset..];
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let first_line = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    if t.has_header && first_line > MAX_HEADER_BYTES {
        return Err(fail(
            Failure::Input,
            format!(
                "{file}: line {}: the header line is {first_line} bytes, more than the {MAX_HEADER_BYTES} a header may have (hint: is this a statement file?)",
                t.skip_lines + 1
            ),
        ));
    }
    let mut reader = ::csv::ReaderBuilder::new()
        .delimiter(csv.delimiter)
        .quote(csv.quote)
        .has_headers(t.has_header)
        .flexible(true)
        .from_reader(body);
    let header = if t.has_header {
        if let Err(e) = reader.headers()
            && let ::csv::ErrorKind::Utf8 { err, .. } = e.kind()
        {
            return Err(fail(
                Failure::Input,
                format!(
                    "{file}: line {}: the header is not valid UTF-8 in column #{} {}",
                    t.skip_lines + 1,
                    err.field() + 1,
                    text::encoding_hint(text::sample(body, 0), None)
                ),
            ));
        }
        Some(header_of(&mut reader, file)?)
    } else {
        None
    };
    let mapping = Mapping::new(src, t, header.as_deref(), file)?;
    let line_base = t.skip_lines as u64;
    src.limits.check_lines(file, body, line_base + 1)?;
    // Records never outnumber line ends (plus a last line without one).
    let rows = body.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut out = Collector::new(src.name, file, rows);
    // Footer records are held back until we know they are not the last `skip_footer` ones.
    let mut held: VecDeque<(::csv::StringRecord, u64)> = VecDeque::with_capacity(t.skip_footer);
    let mut record = ::csv::StringRecord::new();
    let mut hint: Option<String> = None;
    loop {
        // A file with more unreadable lines than `max_rejected_lines` is no statement.
        src.limits.check_rejected(file, &out.rejected)?;
        let line_no = line_base + line_of(body, reader.position());
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e
                    .position()
                    .map(|p| line_base + line_of(body, p))
                    .unwrap_or(line_no);
                let reason = match e.kind() {
                    // The csv crate counts records and fields from 0 and places a record after
                    // a CRLF on the line before: say the line and column a user sees.
                    ::csv::ErrorKind::Utf8 { err, .. } => {
                        let at = e.position().map_or(0, |p| p.byte() as usize);
                        let hint = hint.get_or_insert_with(|| {
                            text::encoding_hint(text::sample(body, at), None)
                        });
                        format!(
                            "column {}: not valid UTF-8 {hint}",
                            column_name(header.as_deref(), err.field())
                        )
                    }
                    _ => format!("unreadable record: {e}"),
                };
                out.reject(line, reason);
                continue;
            }
        }
        let line_no = record
            .position()
            .map(|p| line_base + line_of(body, p))
            .unwrap_or(line_no);
        if record.is_blank() {
            continue;
        }
        if let Some((i, f)) = record
            .iter()
            .enumerate()
            .find(|(_, f)| f.len() > MAX_FIELD_BYTES)
        {
            let name = header
                .as_ref()
                .and_then(|h| h.get(i))
                .map_or_else(|| format!("#{}", i + 1), |n| format!("{:?}", super::cut(n)));
            out.reject(
                line_no,
                format!(
                    "column {name}: the field is {} bytes, more than the {MAX_FIELD_BYTES} a field may have",
                    f.len()
                ),
            );
            continue;
        }
        if t.skip_footer == 0 {
            out.push(mapping.row(&record, line_no), line_no);
            continue;
        }
        held.push_back((record.clone(), line_no));
        if held.len() > t.skip_footer
            && let Some((r, n)) = held.pop_front()
        {
            out.push(mapping.row(&r, n), n);
        }
    }
    if held.len() < t.skip_footer {
        return Err(fail(
            Failure::Input,
            format!(
                "{file}: has {} record(s) after the header, fewer than skip_footer = {}",
                held.len(),
                t.skip_footer
            ),
        ));
    }
    Ok(out)
}
