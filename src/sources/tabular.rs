//! The keys csv and xlsx sources share: how a table's rows and columns become statement
//! lines (`timestamp_format`, number format, `columns`, `kinds`, `signs`, `skip_rows`, …).
//! The csv and xlsx modules, which use this one, add their own keys (`RawCsv`, `RawXlsx`) and
//! hold a [`TabularSettings`] each.

use super::keys::KeyAt;
use crate::model::{Format, LineKind, TimestampFormat};
use anyhow::Result;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The tabular keys as written (`#[serde(deny_unknown_fields)]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTabular {
    /// `rfc3339`, or a chrono strftime format such as `%d.%m.%Y %H:%M`.
    timestamp_format: Option<String>,
    /// `.` (default) or `,`.
    decimal_separator: Option<String>,
    /// Optional thousands separator to strip (`,`, `.`, `'` or ` `).
    thousands_separator: Option<String>,
    /// Characters removed from amount cells before parsing (currency signs: `"$€¤"`).
    amount_symbols: Option<String>,
    /// Whether the first row after `skip_lines` is a header (default true). Without one,
    /// columns are named by position: `#1`, `#2`, …
    has_header: Option<bool>,
    /// Lines (xlsx: rows) to skip before the header (bank preambles).
    skip_lines: Option<usize>,
    /// Non-empty records at the end of the file that are not statement lines (a footer with
    /// balances). They are dropped by count, never by guessing.
    skip_footer: Option<usize>,
    /// Negate amounts (statements that book payouts as negative numbers).
    negate_amounts: Option<bool>,
    /// ISO 4217 code of every line, for files without a currency column.
    currency: Option<String>,
    /// Which header names (or `#N` positions) hold the canonical fields.
    columns: Option<RawColumns>,
    /// Value of the `kind` column → `PAYMENT` or `REFUND` (case-insensitive keys).
    kinds: Option<BTreeMap<String, String>>,
    /// Value of the `sign` column → `credit` or `debit` (case-insensitive keys).
    signs: Option<BTreeMap<String, String>>,
    /// Values of the `status` column that mean booked (case-insensitive). Rows with any other
    /// status (pending, authorised, cancelled) are not loaded, and are counted.
    booked_statuses: Option<Vec<String>>,
    /// What joins the cells of a text field mapped to several columns (default " ").
    join_separator: Option<String>,
    /// `"amount - fee"` or `"amount + fee"`: the line's amount is computed from the amount and
    /// the `fee` column (providers that report the fee separately).
    net_amount: Option<String>,
    /// Rows that are not statement lines (notices, balance rows), by value. They are counted
    /// and listed, and do not make the file incomplete.
    skip_rows: Option<Vec<RawSkipRow>>,
    /// Skip rows whose amount is zero (notice rows), counted like `skip_rows`.
    skip_zero_amounts: Option<bool>,
}

/// One `[[skip_rows]]` rule as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkipRow {
    /// Header name or `#N` position of the column tested.
    column: String,
    /// Cell values (trimmed, case-insensitive) that mark a row to skip.
    #[serde(default)]
    values: Vec<String>,
    /// Texts (case-insensitive) whose presence anywhere in the cell marks a row to skip.
    #[serde(default)]
    contains: Vec<String>,
}

/// A text field's columns as written: one name, or a list joined with `join_separator`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawColumnList {
    One(String),
    Many(Vec<String>),
}

impl RawColumnList {
    fn into_vec(self) -> Vec<String> {
        match self {
            RawColumnList::One(s) => vec![s],
            RawColumnList::Many(v) => v,
        }
    }
}

/// Column mapping as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumns {
    provider_txn_id: Option<RawColumnList>,
    reference: Option<RawColumnList>,
    recipient: Option<RawColumnList>,
    amount: Option<String>,
    debit: Option<String>,
    credit: Option<String>,
    sign: Option<String>,
    currency: Option<String>,
    booked_at: String,
    booked_time: Option<String>,
    kind: Option<String>,
    batch: Option<RawColumnList>,
    status: Option<String>,
    original_amount: Option<String>,
    original_currency: Option<String>,
    fee: Option<String>,
    balance: Option<String>,
}

/// The validated tabular settings of a csv or xlsx source.
#[derive(Debug, Clone)]
pub struct TabularSettings {
    /// Timestamp format.
    pub timestamp_format: TimestampFormat,
    /// Number format (text cells).
    pub number_format: crate::money::NumberFormat,
    /// Characters removed from amount text before parsing (currency signs).
    pub amount_symbols: Vec<char>,
    /// Whether a header row follows the preamble.
    pub has_header: bool,
    /// Preamble lines (xlsx: rows) to skip.
    pub skip_lines: usize,
    /// Non-empty footer records to drop.
    pub skip_footer: usize,
    /// Negate amounts when reading.
    pub negate_amounts: bool,
    /// Currency of every line when the file has no currency column.
    pub currency: Option<&'static str>,
    /// Header names.
    pub columns: Columns,
    /// Upper-cased kind value → kind.
    pub kinds: BTreeMap<String, LineKind>,
    /// Upper-cased sign-column value → sign.
    pub signs: BTreeMap<String, Sign>,
    /// Upper-cased values of the status column that mean booked (empty: no status column).
    pub booked_statuses: std::collections::BTreeSet<String>,
    /// What joins the cells of a text field mapped to several columns.
    pub join_separator: String,
    /// How the `fee` column makes the line's amount (`None`: no fee column).
    pub net_amount: Option<NetAmount>,
    /// Rows that are not statement lines, by value.
    pub skip_rows: Vec<SkipRow>,
    /// Skip rows whose amount is zero.
    pub skip_zero_amounts: bool,
}

impl Default for TabularSettings {
    /// An empty mapping (no columns), with the defaults of every other key.
    fn default() -> Self {
        TabularSettings {
            timestamp_format: TimestampFormat::Rfc3339,
            number_format: crate::money::NumberFormat::DOT,
            amount_symbols: Vec::new(),
            has_header: true,
            skip_lines: 0,
            skip_footer: 0,
            negate_amounts: false,
            currency: None,
            columns: Columns::default(),
            kinds: default_kinds(),
            signs: BTreeMap::new(),
            booked_statuses: Default::default(),
            join_separator: " ".to_string(),
            net_amount: None,
            skip_rows: Vec::new(),
            skip_zero_amounts: false,
        }
    }
}

/// Which way a value of a sign / credit-debit indicator column books the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// Money in: the amount is positive.
    Credit,
    /// Money out: the amount is negative.
    Debit,
}

/// How a separately reported fee makes a line's amount (`net_amount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetAmount {
    /// `amount - fee`.
    MinusFee,
    /// `amount + fee`.
    PlusFee,
}

/// A `[[skip_rows]]` rule: rows whose `column` cell equals one of `values` or contains one of
/// `contains` (trimmed, upper-cased here and when compared) are not statement lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRow {
    /// Header name or `#N`.
    pub column: String,
    /// Upper-cased whole values.
    pub values: Vec<String>,
    /// Upper-cased substrings.
    pub contains: Vec<String>,
}

/// Header names (or `#N` positions) of the canonical fields.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// Provider transaction id column.
    pub provider_txn_id: Option<String>,
    /// Reference column.
    pub reference: Option<String>,
    /// Recipient account column (lines have no recipient when absent).
    pub recipient: Option<String>,
    /// Signed amount column.
    pub amount: Option<String>,
    /// Debit (money out) column, for files with separate debit/credit columns.
    pub debit: Option<String>,
    /// Credit (money in) column.
    pub credit: Option<String>,
    /// Sign / credit-debit indicator column; the amount's own sign is then ignored.
    pub sign: Option<String>,
    /// Currency column (or the source's fixed `currency`).
    pub currency: Option<String>,
    /// Booking timestamp column (or its date, with `booked_time`).
    pub booked_at: String,
    /// A separate time-of-day column; its text is appended to `booked_at`'s after a space
    /// before `timestamp_format` applies.
    pub booked_time: Option<String>,
    /// Kind column (all lines are payments when absent).
    pub kind: Option<String>,
    /// Settlement batch column (the grouping key of three-way matching), if any.
    pub batch: Option<String>,
    /// Booking status column (with `booked_statuses`): only booked rows are lines.
    pub status: Option<String>,
    /// More columns of a text field mapped to a list (`reference = ["A", "B", "#9.."]`), by
    /// field name: the first column is in the field itself, these follow it, joined with
    /// `join_separator`. `#N..` is column N and every field after it.
    pub more: BTreeMap<&'static str, Vec<String>>,
    /// The amount in the original (foreign) currency, beside the account-currency amount.
    pub original_amount: Option<String>,
    /// The original currency's ISO code.
    pub original_currency: Option<String>,
    /// A fee reported separately; with `net_amount` it makes the line's amount.
    pub fee: Option<String>,
    /// The account's running balance after each row; when mapped, each row's balance must
    /// be the previous one plus its amount (a completeness gate).
    pub balance: Option<String>,
}

/// Validates the tabular keys of a source of `format` (csv or xlsx).
pub fn settings(at: &KeyAt<'_>, s: RawTabular, format: Format) -> Result<TabularSettings> {
    let timestamp_format = timestamp_format(at, s.timestamp_format.as_deref(), format)?;
    let (number_format, amount_symbols) = number_format(at, &s)?;
    let currency = fixed_currency(at, s.currency.as_deref())?;
    let kinds = kinds(at, s.kinds.unwrap_or_default())?;
    let signs = signs(at, s.signs.unwrap_or_default())?;
    let columns = columns(at, s.columns, format)?;
    let has_header = s.has_header.unwrap_or(true);
    let booked_statuses = booked_statuses(s.booked_statuses.unwrap_or_default());
    check_columns(at, &columns, &signs, &booked_statuses, currency)?;
    check_positions(at, &columns, has_header)?;
    check_original_amount(at, &columns)?;
    let net_amount = net_amount(at, s.net_amount.as_deref(), &columns)?;
    let skip_rows = skip_rows(at, s.skip_rows.unwrap_or_default(), has_header)?;
    Ok(TabularSettings {
        timestamp_format,
        number_format,
        amount_symbols,
        has_header,
        skip_lines: s.skip_lines.unwrap_or(0),
        skip_footer: s.skip_footer.unwrap_or(0),
        negate_amounts: s.negate_amounts.unwrap_or(false),
        currency,
        columns,
        kinds,
        signs,
        booked_statuses,
        join_separator: s.join_separator.unwrap_or_else(|| " ".to_string()),
        net_amount,
        skip_rows,
        skip_zero_amounts: s.skip_zero_amounts.unwrap_or(false),
    })
}

/// `timestamp_format` (`ts`, required for `format`): `rfc3339` or a strftime pattern.
fn timestamp_format(at: &KeyAt<'_>, ts: Option<&str>, format: Format) -> Result<TimestampFormat> {
    let Some(ts) = ts else {
        return Err(at.on(
            "timestamp_format",
            format!(
                "key `{}` is missing (format {format} needs it)",
                at.key("timestamp_format")
            ),
        ));
    };
    Ok(if ts.eq_ignore_ascii_case("rfc3339") {
        TimestampFormat::Rfc3339
    } else if ts.contains('%') {
        TimestampFormat::Pattern(ts.to_string())
    } else {
        return Err(at.bad(
            "timestamp_format",
            format!("{ts:?} is neither `rfc3339` nor a strftime pattern like `%Y-%m-%d %H:%M:%S`"),
        ));
    })
}

/// The number format of text cells (`decimal_separator`, `thousands_separator`) and the
/// `amount_symbols` removed before parsing, none of which may be part of a number.
fn number_format(
    at: &KeyAt<'_>,
    s: &RawTabular,
) -> Result<(crate::money::NumberFormat, Vec<char>)> {
    let decimal = single_char(
        at,
        "decimal_separator",
        s.decimal_separator.as_deref().unwrap_or("."),
        &['.', ','],
    )?;
    let thousands = s
        .thousands_separator
        .as_deref()
        .map(|t| single_char(at, "thousands_separator", t, &[',', '.', '\'', ' ']))
        .transpose()?;
    if thousands == Some(decimal) {
        return Err(at.bad("thousands_separator", "same as the decimal separator"));
    }
    let amount_symbols: Vec<char> = s.amount_symbols.as_deref().unwrap_or("").chars().collect();
    if let Some(c) = amount_symbols.iter().find(|c| {
        c.is_ascii_digit() || **c == decimal || Some(**c) == thousands || **c == '-' || **c == '+'
    }) {
        return Err(at.bad(
            "amount_symbols",
            format!("{c:?} is part of a number and cannot be removed"),
        ));
    }
    Ok((
        crate::money::NumberFormat { decimal, thousands },
        amount_symbols,
    ))
}

/// The source's fixed `currency`, an ISO 4217 code.
fn fixed_currency(at: &KeyAt<'_>, currency: Option<&str>) -> Result<Option<&'static str>> {
    currency
        .map(|c| {
            crate::money::currency(c)
                .map(|(code, _)| code)
                .map_err(|e| at.bad("currency", e))
        })
        .transpose()
}

/// `[source.kinds]` (`raw_kinds`): upper-cased value of the kind column → kind; PAYMENT and
/// REFUND when there is none.
fn kinds(
    at: &KeyAt<'_>,
    raw_kinds: BTreeMap<String, String>,
) -> Result<BTreeMap<String, LineKind>> {
    let mut kinds = BTreeMap::new();
    if raw_kinds.is_empty() {
        kinds = default_kinds();
    }
    for (value, kind) in &raw_kinds {
        let k = match kind.to_ascii_uppercase().as_str() {
            "PAYMENT" => LineKind::Payment,
            "REFUND" => LineKind::Refund,
            "FEE" => LineKind::Fee,
            "PAYOUT" => LineKind::Payout,
            "BALANCE" => LineKind::Balance,
            other => {
                return Err(at.bad(
                    &format!("kinds.{value}"),
                    format!("{other:?} is not PAYMENT, REFUND, FEE, PAYOUT or BALANCE"),
                ));
            }
        };
        kinds.insert(value.trim().to_uppercase(), k);
    }
    Ok(kinds)
}

/// `[source.signs]` (`raw`): upper-cased value of the sign column → sign.
fn signs(at: &KeyAt<'_>, raw: BTreeMap<String, String>) -> Result<BTreeMap<String, Sign>> {
    let mut signs = BTreeMap::new();
    for (value, sign) in raw {
        let v = match sign.to_ascii_lowercase().as_str() {
            "credit" => Sign::Credit,
            "debit" => Sign::Debit,
            other => {
                return Err(at.bad(
                    &format!("signs.{value}"),
                    format!("{other:?} is not credit or debit"),
                ));
            }
        };
        signs.insert(value.trim().to_uppercase(), v);
    }
    Ok(signs)
}

/// `[source.columns]` (required for `format`): a text field mapped to a list keeps its first
/// column and puts the others in `more`.
fn columns(at: &KeyAt<'_>, c: Option<RawColumns>, format: Format) -> Result<Columns> {
    let Some(c) = c else {
        return Err(at.on(
            "columns",
            format!(
                "key `{}` is missing (format {format} needs a column mapping)",
                at.key("columns")
            ),
        ));
    };
    let mut more = BTreeMap::new();
    let mut text_field = |k: &'static str, v: Option<RawColumnList>| -> Result<Option<String>> {
        let Some(v) = v else { return Ok(None) };
        let mut v = v.into_vec();
        if v.is_empty() || v.iter().any(|c| c.trim().is_empty()) {
            return Err(at.bad(
                &format!("columns.{k}"),
                "give a column name or a non-empty list of them",
            ));
        }
        let first = v.remove(0);
        if !v.is_empty() {
            more.insert(k, v);
        }
        Ok(Some(first))
    };
    let provider_txn_id = text_field("provider_txn_id", c.provider_txn_id)?;
    let reference = text_field("reference", c.reference)?;
    let recipient = text_field("recipient", c.recipient)?;
    let batch = text_field("batch", c.batch)?;
    Ok(Columns {
        provider_txn_id,
        reference,
        recipient,
        amount: c.amount,
        debit: c.debit,
        credit: c.credit,
        sign: c.sign,
        currency: c.currency,
        booked_at: c.booked_at,
        booked_time: c.booked_time,
        kind: c.kind,
        batch,
        status: c.status,
        more,
        original_amount: c.original_amount,
        original_currency: c.original_currency,
        fee: c.fee,
        balance: c.balance,
    })
}

/// `booked_statuses`, trimmed and upper-cased, without empty values.
fn booked_statuses(raw: Vec<String>) -> std::collections::BTreeSet<String> {
    raw.iter()
        .map(|v| v.trim().to_uppercase())
        .filter(|v| !v.is_empty())
        .collect()
}

/// An error about column `k` of `[source.columns]`.
fn col_err(at: &KeyAt<'_>, k: &str, msg: &str) -> anyhow::Error {
    at.bad(&format!("columns.{k}"), msg)
}

/// The columns and the keys that go with them agree: an amount or debit/credit columns, a
/// sign column with its `signs`, a status column with its `booked_statuses`, one currency.
fn check_columns(
    at: &KeyAt<'_>,
    columns: &Columns,
    signs: &BTreeMap<String, Sign>,
    booked_statuses: &std::collections::BTreeSet<String>,
    currency: Option<&'static str>,
) -> Result<()> {
    let key = |k: &str| at.key(k);
    match (
        &columns.amount,
        columns.debit.is_some() || columns.credit.is_some(),
    ) {
        (Some(_), true) => {
            return Err(col_err(
                at,
                "amount",
                "give either amount or debit/credit columns, not both",
            ));
        }
        (None, false) => {
            return Err(col_err(
                at,
                "amount",
                "missing (or give debit and/or credit columns)",
            ));
        }
        _ => {}
    }
    if columns.sign.is_some() && columns.amount.is_none() {
        return Err(col_err(at, "sign", "a sign column needs an amount column"));
    }
    if columns.sign.is_some() && signs.is_empty() {
        return Err(at.on(
            "signs",
            format!(
                "key `{}` is missing: map every value of the sign column to credit or debit",
                key("signs")
            ),
        ));
    }
    if columns.status.is_some() && booked_statuses.is_empty() {
        return Err(at.on(
            "booked_statuses",
            format!(
                "key `{}` is missing: name the status values that mean booked",
                key("booked_statuses")
            ),
        ));
    }
    if columns.status.is_none() && !booked_statuses.is_empty() {
        return Err(col_err(
            at,
            "status",
            "missing: `booked_statuses` is given but no status column",
        ));
    }
    if columns.sign.is_none() && !signs.is_empty() {
        return Err(col_err(
            at,
            "sign",
            "missing: `signs` is given but no sign column",
        ));
    }
    match (&columns.currency, currency) {
        (Some(_), Some(_)) => {
            return Err(at.on(
                "currency",
                format!(
                    "keys `{}`/`{}`: give one of them",
                    key("currency"),
                    key("columns.currency")
                ),
            ));
        }
        (None, None) => {
            return Err(col_err(
                at,
                "currency",
                "missing (or give the source's fixed `currency`)",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// The columns are named by position (`#N`) when the file has no header, and an amount
/// column is never `#N..`.
fn check_positions(at: &KeyAt<'_>, columns: &Columns, has_header: bool) -> Result<()> {
    if !has_header {
        for (k, v) in [
            ("provider_txn_id", &columns.provider_txn_id),
            ("reference", &columns.reference),
            ("recipient", &columns.recipient),
            ("amount", &columns.amount),
            ("debit", &columns.debit),
            ("credit", &columns.credit),
            ("sign", &columns.sign),
            ("currency", &columns.currency),
            ("booked_at", &Some(columns.booked_at.clone())),
            ("booked_time", &columns.booked_time),
            ("kind", &columns.kind),
            ("batch", &columns.batch),
            ("original_amount", &columns.original_amount),
            ("original_currency", &columns.original_currency),
            ("fee", &columns.fee),
            ("balance", &columns.balance),
        ] {
            if let Some(v) = v
                && column_index(v).is_none()
                && column_rest(v).is_none()
            {
                return Err(col_err(
                    at,
                    k,
                    &format!("{v:?}: without a header, name columns by position (`#1`, `#2`, …)"),
                ));
            }
        }
        for (k, list) in &columns.more {
            if let Some(v) = list
                .iter()
                .find(|v| column_index(v).is_none() && column_rest(v).is_none())
            {
                return Err(col_err(
                    at,
                    k,
                    &format!("{v:?}: without a header, name columns by position (`#1`, `#2`, …)"),
                ));
            }
        }
    }
    for (k, v) in [
        ("amount", &columns.amount),
        ("debit", &columns.debit),
        ("credit", &columns.credit),
        ("original_amount", &columns.original_amount),
        ("fee", &columns.fee),
        ("balance", &columns.balance),
    ] {
        if let Some(v) = v
            && column_rest(v).is_some()
        {
            return Err(col_err(
                at,
                k,
                &format!("{v:?}: `#N..` (column N and all after it) is for text fields only"),
            ));
        }
    }
    Ok(())
}

/// The original amount and its currency come as a pair.
fn check_original_amount(at: &KeyAt<'_>, columns: &Columns) -> Result<()> {
    match (&columns.original_amount, &columns.original_currency) {
        (Some(_), None) => Err(col_err(
            at,
            "original_currency",
            "missing: an original amount needs its currency column (it is never read as the account currency)",
        )),
        (None, Some(_)) => Err(col_err(
            at,
            "original_amount",
            "missing: `original_currency` is given but no original amount column",
        )),
        _ => Ok(()),
    }
}

/// `net_amount` (`v`), which comes with a fee column: how the fee makes the line's amount.
fn net_amount(at: &KeyAt<'_>, v: Option<&str>, columns: &Columns) -> Result<Option<NetAmount>> {
    Ok(match (v, &columns.fee) {
        (None, None) => None,
        (Some(v), Some(_)) => match v.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["amount", "-", "fee"] => Some(NetAmount::MinusFee),
            ["amount", "+", "fee"] => Some(NetAmount::PlusFee),
            _ => {
                return Err(at.bad(
                    "net_amount",
                    format!("{v:?} (hint: \"amount - fee\" or \"amount + fee\")"),
                ));
            }
        },
        (Some(_), None) => {
            return Err(col_err(
                at,
                "fee",
                "missing: `net_amount` is given but no fee column",
            ));
        }
        (None, Some(_)) => {
            return Err(at.on(
                "net_amount",
                format!(
                    "key `{}` is missing: say how the fee column makes the amount (\"amount - fee\" or \"amount + fee\")",
                    at.key("net_amount")
                ),
            ));
        }
    })
}

/// `[[source.skip_rows]]` (`raw`): each rule tests one column and has values to match.
fn skip_rows(at: &KeyAt<'_>, raw: Vec<RawSkipRow>, has_header: bool) -> Result<Vec<SkipRow>> {
    let mut skip_rows = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let up = |v: &[String]| -> Vec<String> {
            v.iter()
                .map(|x| x.trim().to_uppercase())
                .filter(|x| !x.is_empty())
                .collect()
        };
        let rule = SkipRow {
            column: r.column.clone(),
            values: up(&r.values),
            contains: up(&r.contains),
        };
        let k = format!("skip_rows[{i}]");
        if rule.values.is_empty() && rule.contains.is_empty() {
            return Err(at.bad(
                &k,
                "give `values` or `contains` (the cells that mark a row to skip)",
            ));
        }
        if r.column.trim().is_empty()
            || column_rest(&r.column).is_some()
            || (!has_header && column_index(&r.column).is_none())
        {
            return Err(at.bad(
                &format!("{k}.column"),
                format!("{:?} is not one column (a header name, or `#N`)", r.column),
            ));
        }
        skip_rows.push(rule);
    }
    Ok(skip_rows)
}

/// Every column the mapping names, with its config key (`columns.amount`,
/// `skip_rows[0].column`), in the order of [`Columns`]: what a jsonl source reads as its
/// "header", and what a parquet source checks and decodes.
pub fn mapped_columns(t: &TabularSettings) -> Vec<(String, String)> {
    let c = &t.columns;
    let mut out = Vec::new();
    let mut add = |key: &str, v: &Option<String>| {
        if let Some(v) = v {
            out.push((format!("columns.{key}"), v.clone()));
        }
    };
    add("provider_txn_id", &c.provider_txn_id);
    add("reference", &c.reference);
    add("recipient", &c.recipient);
    add("amount", &c.amount);
    add("debit", &c.debit);
    add("credit", &c.credit);
    add("sign", &c.sign);
    add("currency", &c.currency);
    add("booked_at", &Some(c.booked_at.clone()));
    add("booked_time", &c.booked_time);
    add("kind", &c.kind);
    add("batch", &c.batch);
    add("status", &c.status);
    add("original_amount", &c.original_amount);
    add("original_currency", &c.original_currency);
    add("fee", &c.fee);
    add("balance", &c.balance);
    for (key, more) in &c.more {
        for m in more {
            out.push((format!("columns.{key}"), m.clone()));
        }
    }
    for (i, r) in t.skip_rows.iter().enumerate() {
        out.push((format!("skip_rows[{i}].column"), r.column.clone()));
    }
    out
}

/// Fails on the first of `keys` written in `table` (a tabular key a format has no use for),
/// saying `why` on its line.
pub fn refuse(
    table: &toml::Spanned<toml::de::DeTable<'_>>,
    at: &KeyAt<'_>,
    keys: &[&str],
    why: &str,
) -> Result<()> {
    match table
        .get_ref()
        .keys()
        .find(|k| keys.contains(&k.get_ref().as_ref()))
    {
        Some(k) => Err(at.bad(k.get_ref(), why)),
        None => Ok(()),
    }
}

/// The one character of key `k`'s `value`, one of `allowed`.
pub(crate) fn single_char(at: &KeyAt<'_>, k: &str, value: &str, allowed: &[char]) -> Result<char> {
    let mut chars = value.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if allowed.contains(&c) => Ok(c),
        _ => Err(at.bad(k, format!("{value:?} is not one of {allowed:?}"))),
    }
}

/// A `#N` column reference (1-based) as a 0-based index.
pub fn column_index(name: &str) -> Option<usize> {
    name.trim()
        .strip_prefix('#')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .map(|n| n - 1)
}

/// A `#N..` column reference (column N and every field after it, for rows wider than the
/// header) as the 0-based index of its first column.
pub fn column_rest(name: &str) -> Option<usize> {
    name.trim().strip_suffix("..").and_then(column_index)
}

/// `PAYMENT` and `REFUND`, the kinds a source without `[source.kinds]` knows.
fn default_kinds() -> std::collections::BTreeMap<String, LineKind> {
    let mut kinds = std::collections::BTreeMap::new();
    kinds.insert("PAYMENT".to_string(), LineKind::Payment);
    kinds.insert("REFUND".to_string(), LineKind::Refund);
    kinds
}
