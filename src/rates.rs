//! Exchange rates for the reporting currency (issue 42 point 1): the ECB's euro foreign
//! exchange reference rates, and the valuation a night ranks and totals its cases with.
//!
//! The ECB publishes, on TARGET working days around 16:00 CET, how many units of each
//! currency one euro buys. recon reads the layouts it publishes them in:
//! - `eurofxref.csv` (one day): a header `Date, USD, JPY, …` and one row
//!   `25 January 2018, 1.2407, 135.12, …`, a space after every comma, a trailing `, `;
//! - `eurofxref-hist.csv` (every day, newest first): ISO dates, `N/A` for a currency not
//!   quoted that day, a trailing comma;
//! - `eurofxref-daily.xml` / `eurofxref-hist.xml`: a gesmes envelope with
//!   `<Cube time="YYYY-MM-DD"><Cube currency="USD" rate="1.0812"/>…</Cube>` per day.
//!
//! A rate is used for a night when it was published that day or, for a day the ECB did not
//! publish (weekends, holidays), the latest day before it; the job file's fixed table
//! (`[rates.fixed]`) fills in what the file does not hold. A currency with neither has no
//! rate: its cases are said to have none, ordered after the valued ones and left out of the
//! totals, never valued at a guess.
//!
//! Cross rates go through the euro: a value in the reporting currency R of an amount in C is
//! `amount / rate[C] * rate[R]` (the euro's rate is 1). The value is for ordering and totals
//! only; the exact amount in its own currency stays beside it everywhere it is shown.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Decimals a converted value keeps (the ordering key, stored with the case): finer than any
/// currency's minor unit, so rounding for display never reorders.
pub const VALUE_DECIMALS: u32 = 6;

/// A value in millionths of a unit (its [`VALUE_DECIMALS`] decimals as an integer: what the
/// database orders by), or `None` beyond i64.
pub fn micros(value: Decimal) -> Option<i64> {
    use rust_decimal::prelude::ToPrimitive as _;
    value
        .round_dp(VALUE_DECIMALS)
        .checked_mul(Decimal::from(1_000_000))?
        .to_i64()
}

/// Why a rates file cannot be used: the file, the line and, when it is about one, the
/// currency.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rates file {file}{}: {why}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
pub struct RatesError {
    /// The file.
    pub file: String,
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong (naming the currency when it is about one).
    pub why: String,
}

/// One day's rates: currency → units of it per 1 EUR.
pub type DayRates = BTreeMap<String, Decimal>;

/// Reads a rates file in either ECB layout (XML when its first non-blank character is `<`,
/// CSV otherwise): every day it holds.
pub fn read(path: &Path) -> Result<BTreeMap<NaiveDate, DayRates>, RatesError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| RatesError {
        file: file.clone(),
        line: None,
        why: format!("cannot read: {e}"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| RatesError {
        file: file.clone(),
        line: None,
        why: format!("not UTF-8 text: {e}"),
    })?;
    parse(&text, &file)
}

/// Parses the text of a rates file (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<BTreeMap<NaiveDate, DayRates>, RatesError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let days = if text.trim_start().starts_with('<') {
        parse_xml(text, file)?
    } else {
        parse_csv(text, file)?
    };
    if days.is_empty() {
        return Err(RatesError {
            file: file.into(),
            line: None,
            why: "holds no day of rates".into(),
        });
    }
    Ok(days)
}

/// A date as the ECB writes it: `2025-05-09` or `25 January 2018`.
fn parse_date(s: &str) -> Option<NaiveDate> {
    let s = s.trim();
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .or_else(|_| NaiveDate::parse_from_str(s, "%d %B %Y"))
        .ok()
}

/// An ISO 4217-shaped code (three ASCII capitals).
fn is_code(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// A rate as written: `None` for `N/A` or an empty cell; an error for anything but a positive
/// decimal.
fn parse_rate(
    s: &str,
    currency: &str,
    err: impl Fn(String) -> RatesError,
) -> Result<Option<Decimal>, RatesError> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("N/A") {
        return Ok(None);
    }
    match s.parse::<Decimal>() {
        Ok(d) if d > Decimal::ZERO => Ok(Some(d)),
        Ok(_) => Err(err(format!(
            "the rate of {currency} is {s:?}: a rate must be positive"
        ))),
        Err(_) => Err(err(format!(
            "the rate of {currency} is {s:?}, not a decimal number"
        ))),
    }
}

/// The CSV layouts: a `Date` header naming the currencies, one row per day.
fn parse_csv(text: &str, file: &str) -> Result<BTreeMap<NaiveDate, DayRates>, RatesError> {
    let err = |line: usize, why: String| RatesError {
        file: file.into(),
        line: Some(line),
        why,
    };
    let cells = |l: &str| -> Vec<String> {
        let mut v: Vec<String> = l.split(',').map(|c| c.trim().to_string()).collect();
        // The ECB ends every line with a separator: trailing empty cells are no columns.
        while v.last().is_some_and(|c| c.is_empty()) {
            v.pop();
        }
        v
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hl, header)) = lines.next() else {
        return Ok(BTreeMap::new());
    };
    let header = cells(header);
    if !header
        .first()
        .is_some_and(|c| c.eq_ignore_ascii_case("date"))
    {
        return Err(err(
            hl,
            "the header must start with `Date` (hint: the ECB's eurofxref.csv or \
             eurofxref-hist.csv, or its XML)"
                .into(),
        ));
    }
    let currencies = &header[1..];
    for c in currencies {
        if !is_code(c) {
            return Err(err(
                hl,
                format!("header column {c:?} is not a currency code"),
            ));
        }
    }
    let mut days = BTreeMap::new();
    for (n, line) in lines {
        let row = cells(line);
        let date = parse_date(&row[0]).ok_or_else(|| {
            err(
                n,
                format!("{:?} is not a date (2025-05-09 or 25 January 2018)", row[0]),
            )
        })?;
        if row.len() > header.len() {
            return Err(err(
                n,
                format!(
                    "{} values for {} currencies in the header",
                    row.len() - 1,
                    currencies.len()
                ),
            ));
        }
        let mut day = DayRates::new();
        for (c, v) in currencies.iter().zip(&row[1..]) {
            if let Some(r) = parse_rate(v, c, |why| err(n, why))? {
                day.insert(c.clone(), r);
            }
        }
        if days.insert(date, day).is_some() {
            return Err(err(n, format!("{date} is listed twice")));
        }
    }
    Ok(days)
}

/// The XML layouts: `<Cube time="…">` per day holding `<Cube currency="…" rate="…"/>`.
fn parse_xml(text: &str, file: &str) -> Result<BTreeMap<NaiveDate, DayRates>, RatesError> {
    use quick_xml::events::Event;
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |p: u64| starts.partition_point(|&s| s <= p as usize);
    let err = |line: usize, why: String| RatesError {
        file: file.into(),
        line: Some(line),
        why,
    };
    let mut reader = quick_xml::Reader::from_str(text);
    let mut days: BTreeMap<NaiveDate, DayRates> = BTreeMap::new();
    let mut current: Option<NaiveDate> = None;
    loop {
        let at = reader.buffer_position();
        let ev = reader.read_event().map_err(|e| {
            err(
                line_of(reader.error_position()),
                format!("not well-formed XML: {e}"),
            )
        })?;
        let (e, empty) = match ev {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::DocType(_) => {
                return Err(err(
                    line_of(at),
                    "DOCTYPE declarations are not accepted".into(),
                ));
            }
            Event::Eof => break,
            _ => continue,
        };
        if e.local_name().into_inner() != "Cube" {
            continue;
        }
        let n = line_of(at + 1);
        let mut attrs: BTreeMap<String, String> = BTreeMap::new();
        for a in e.attributes() {
            let a = a.map_err(|x| err(n, format!("bad attribute: {x}")))?;
            let v = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|x| err(n, format!("bad attribute value: {x}")))?;
            attrs.insert(a.key.local_name().into_inner().to_string(), v.into_owned());
        }
        if let Some(t) = attrs.get("time") {
            let date = parse_date(t)
                .ok_or_else(|| err(n, format!("time={t:?} is not a date (YYYY-MM-DD)")))?;
            if days.insert(date, DayRates::new()).is_some() {
                return Err(err(n, format!("{date} is listed twice")));
            }
            current = (!empty).then_some(date);
        } else if let Some(c) = attrs.get("currency") {
            if !is_code(c) {
                return Err(err(n, format!("currency={c:?} is not a currency code")));
            }
            let Some(date) = current else {
                return Err(err(
                    n,
                    format!("the rate of {c} is outside a <Cube time=\"…\"> day"),
                ));
            };
            let rate = attrs.get("rate").map(String::as_str).unwrap_or("");
            let rate = parse_rate(rate, c, |why| err(n, why))?
                .ok_or_else(|| err(n, format!("the rate of {c} is missing")))?;
            if let Some(day) = days.get_mut(&date)
                && day.insert(c.clone(), rate).is_some()
            {
                return Err(err(n, format!("{c} is listed twice on {date}")));
            }
        }
    }
    Ok(days)
}

/// Where a rate came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// Units of the currency per 1 EUR (as the ECB quotes).
    pub per_eur: Decimal,
    /// The day the rate was published (`YYYY-MM-DD`); `None` for the job file's fixed table.
    pub date: Option<String>,
    /// The rates file it was read from, or `fixed` (the job file's `[rates.fixed]`).
    pub from: String,
}

/// The reporting currency and the rates a night values its cases with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Valuation {
    /// ISO 4217 code of the reporting currency.
    pub currency: String,
    /// Currency → its rate (the euro is 1 and not listed).
    pub rates: BTreeMap<String, Rate>,
}

impl Valuation {
    /// Units of `currency` per 1 EUR, if known.
    pub fn per_eur(&self, currency: &str) -> Option<Decimal> {
        if currency == "EUR" {
            return Some(Decimal::ONE);
        }
        self.rates.get(currency).map(|r| r.per_eur)
    }

    /// `amount` (in units of `currency`) in the reporting currency, at [`VALUE_DECIMALS`]
    /// decimals: `amount / rate[currency] * rate[reporting]`; the amount itself in the
    /// reporting currency. `None` when a rate is missing (or the value overflows).
    pub fn value(&self, amount: Decimal, currency: &str) -> Option<Decimal> {
        if currency == self.currency {
            return Some(amount);
        }
        let from = self.per_eur(currency)?;
        let to = self.per_eur(&self.currency)?;
        amount
            .checked_div(from)?
            .checked_mul(to)
            .map(|v| v.round_dp(VALUE_DECIMALS))
    }

    /// Whether `currency` can be valued.
    pub fn has_rate(&self, currency: &str) -> bool {
        currency == self.currency
            || (self.per_eur(currency).is_some() && self.per_eur(&self.currency).is_some())
    }

    /// Which rates it is, for people: `ECB rates of 2026-11-27 (rates/x.csv); fixed rates for
    /// GBP` (the distinct days and files, then the currencies from the fixed table).
    pub fn sources_text(&self) -> String {
        let mut files: BTreeMap<(&str, &str), ()> = BTreeMap::new();
        let mut fixed: Vec<&str> = Vec::new();
        for (c, r) in &self.rates {
            match &r.date {
                Some(d) => {
                    files.insert((d.as_str(), r.from.as_str()), ());
                }
                None => fixed.push(c),
            }
        }
        let mut parts: Vec<String> = files
            .keys()
            .map(|(d, f)| format!("ECB rates of {d} ({f})"))
            .collect();
        if !fixed.is_empty() {
            parts.push(format!("fixed rates for {}", fixed.join(", ")));
        }
        if parts.is_empty() {
            "no exchange rate".into()
        } else {
            parts.join("; ")
        }
    }
}

/// The night's valuation: the rates of `file` (its day `date`, or the latest day before it)
/// over the `fixed` table, for `currency`; and what a person must know about them (the file
/// missing or unreadable, its rates older than the night). Never fails: a night is
/// reconciled without rates, its cases then ordered by the rule without them.
pub fn valuation(
    currency: &str,
    file: Option<&str>,
    fixed: &BTreeMap<String, Decimal>,
    date: NaiveDate,
) -> (Valuation, Vec<String>) {
    let mut warnings = Vec::new();
    let mut rates: BTreeMap<String, Rate> = fixed
        .iter()
        .filter(|(c, _)| c.as_str() != "EUR")
        .map(|(c, r)| {
            (
                c.clone(),
                Rate {
                    per_eur: *r,
                    date: None,
                    from: "fixed".into(),
                },
            )
        })
        .collect();
    if let Some(template) = file {
        match file_rates(template, date) {
            Ok((path, day, day_rates)) => {
                if day < date {
                    tracing::info!(file = %path, %day, night = %date, "Exchange rates of an earlier day.");
                }
                for (c, r) in day_rates {
                    rates.insert(
                        c,
                        Rate {
                            per_eur: r,
                            date: Some(day.to_string()),
                            from: path.clone(),
                        },
                    );
                }
            }
            Err(why) => warnings.push(format!(
                "exchange rates: {why}; {}",
                if fixed.is_empty() {
                    "no rate but the reporting currency's own"
                } else {
                    "the fixed rates of the job file are used"
                }
            )),
        }
    }
    (
        Valuation {
            currency: currency.to_string(),
            rates,
        },
        warnings,
    )
}

/// Days a daily rates file (`{date}` in its path) is looked for before the night: the ECB
/// publishes none on weekends and holidays (Easter: four days).
const LOOK_BACK_DAYS: u64 = 7;

/// The rates file for `date` (a `{date}` template tries the days before it when the night's
/// file is not there), and its latest day on or before `date`.
fn file_rates(template: &str, date: NaiveDate) -> Result<(String, NaiveDate, DayRates), String> {
    let candidates: Vec<String> = if template.contains("{date}") {
        (0..LOOK_BACK_DAYS)
            .filter_map(|back| date.checked_sub_days(chrono::Days::new(back)))
            .map(|d| template.replace("{date}", &d.format("%Y-%m-%d").to_string()))
            .collect()
    } else {
        vec![template.to_string()]
    };
    let Some(path) = candidates.iter().find(|p| Path::new(p).is_file()) else {
        return Err(if candidates.len() > 1 {
            format!(
                "no rates file {} nor for the {} days before",
                candidates[0],
                candidates.len() - 1
            )
        } else {
            format!("rates file {} not found", candidates[0])
        });
    };
    let days = read(Path::new(path)).map_err(|e| e.to_string())?;
    match days.range(..=date).next_back() {
        Some((d, r)) => Ok((path.clone(), *d, r.clone())),
        None => Err(format!(
            "rates file {path} holds no day on or before {date} (its first is {})",
            days.keys()
                .next()
                .map(|d| d.to_string())
                .unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    /// The one-day layout of the ECB's eurofxref.csv (a space after every comma, a trailing
    /// `, `), cut to five currencies.
    const DAILY_CSV: &str = "Date, USD, JPY, BGN, CZK, GBP, \n\
                             25 January 2018, 1.2407, 135.12, 1.9558, 25.381, 0.87038, \n";

    /// The history layout (eurofxref-hist.csv): ISO dates, newest first, `N/A` for a
    /// currency not quoted that day, a trailing comma.
    const HIST_CSV: &str = "Date,USD,JPY,CYP,GBP,\n\
                            2025-05-09,1.1252,163.36,N/A,0.8477,\n\
                            2025-05-08,1.1297,163.45,N/A,0.8476,\n\
                            2025-05-05,1.1343,163.19,N/A,0.8515,\n";

    /// The XML layout (eurofxref-daily.xml / -hist.xml): a gesmes envelope, one Cube a day.
    const XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">
	<gesmes:subject>Reference rates</gesmes:subject>
	<gesmes:Sender>
		<gesmes:name>European Central Bank</gesmes:name>
	</gesmes:Sender>
	<Cube>
		<Cube time="2025-05-09">
			<Cube currency="USD" rate="1.1252"/>
			<Cube currency="JPY" rate="163.36"/>
			<Cube currency="GBP" rate="0.8477"/>
		</Cube>
		<Cube time="2025-05-08">
			<Cube currency="USD" rate="1.1297"/>
		</Cube>
	</Cube>
</gesmes:Envelope>
"#;

    #[test]
    fn the_one_day_csv_reads_with_its_spaces_and_trailing_comma() {
        let days = parse(DAILY_CSV, "eurofxref.csv").unwrap();
        assert_eq!(days.len(), 1);
        let r = &days[&day("2018-01-25")];
        assert_eq!(r["USD"], d("1.2407"));
        assert_eq!(r["JPY"], d("135.12"));
        assert_eq!(r["GBP"], d("0.87038"));
        assert_eq!(r.len(), 5);
    }

    #[test]
    fn the_history_csv_skips_na_and_keeps_every_day() {
        let days = parse(HIST_CSV, "hist.csv").unwrap();
        assert_eq!(
            days.keys().map(|d| d.to_string()).collect::<Vec<_>>(),
            ["2025-05-05", "2025-05-08", "2025-05-09"]
        );
        let r = &days[&day("2025-05-08")];
        assert_eq!(r.get("CYP"), None, "N/A is no rate");
        assert_eq!(r["JPY"], d("163.45"));
    }

    #[test]
    fn the_xml_reads_every_day_cube() {
        let days = parse(XML, "eurofxref-daily.xml").unwrap();
        assert_eq!(days.len(), 2);
        assert_eq!(days[&day("2025-05-09")]["GBP"], d("0.8477"));
        assert_eq!(days[&day("2025-05-08")].len(), 1);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_currency() {
        let bad = HIST_CSV.replace("163.45", "16x.45");
        let e = parse(&bad, "hist.csv").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("hist.csv, line 3"), "{e}");
        assert!(e.to_string().contains("JPY"), "{e}");
        let bad = XML.replace("\"163.36\"", "\"-1\"");
        let e = parse(&bad, "x.xml").unwrap_err();
        assert_eq!(e.line, Some(10), "{e}");
        assert!(e.why.contains("JPY") && e.why.contains("positive"), "{e}");
        let e = parse("Day, USD\n2025-01-01, 1.1\n", "h.csv").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        let e = parse("Date, USD\n2025-13-01, 1.1\n", "h.csv").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = parse("Date, USD\n2025-01-01, 1.1, 2.2\n", "h.csv").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn the_night_takes_the_latest_day_on_or_before_it_over_the_fixed_table() {
        let dir = tempfile::tempdir().unwrap();
        let hist = dir.path().join("hist.csv");
        std::fs::write(&hist, HIST_CSV).unwrap();
        let fixed: BTreeMap<String, Decimal> = [
            ("GBP".to_string(), d("0.9")),
            ("CHF".to_string(), d("0.95")),
        ]
        .into();
        // A Sunday: Friday's rates; the fixed table only for what the file lacks.
        let (v, warnings) = valuation("EUR", hist.to_str(), &fixed, day("2025-05-11"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(v.per_eur("GBP"), Some(d("0.8477")));
        assert_eq!(v.rates["GBP"].date.as_deref(), Some("2025-05-09"));
        assert_eq!(v.per_eur("CHF"), Some(d("0.95")));
        assert_eq!(v.rates["CHF"].date, None);
        assert_eq!(v.per_eur("CYP"), None);
        // Thursday 8 May: that day's rate.
        let (v, _) = valuation("EUR", hist.to_str(), &fixed, day("2025-05-08"));
        assert_eq!(v.per_eur("USD"), Some(d("1.1297")));
        // Before the file's first day: said, and the fixed table only.
        let (v, warnings) = valuation("EUR", hist.to_str(), &fixed, day("2025-05-01"));
        assert_eq!(v.per_eur("USD"), None);
        assert!(
            warnings[0].contains("no day on or before 2025-05-01"),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_daily_template_looks_back_over_a_weekend_and_a_missing_file_is_said() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r-2018-01-25.csv"), DAILY_CSV).unwrap();
        let template = dir.path().join("r-{date}.csv");
        let template = template.to_str().unwrap();
        let (v, warnings) = valuation("USD", Some(template), &BTreeMap::new(), day("2018-01-27"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(v.rates["JPY"].date.as_deref(), Some("2018-01-25"));
        let (v, warnings) = valuation("EUR", Some(template), &BTreeMap::new(), day("2018-03-01"));
        assert!(v.rates.is_empty());
        assert!(
            warnings[0].contains("r-2018-03-01.csv") && warnings[0].contains("6 days before"),
            "{warnings:?}"
        );
    }

    #[test]
    fn cross_rates_go_through_the_euro() {
        let v = Valuation {
            currency: "USD".into(),
            rates: [
                ("USD".to_string(), d("1.25")),
                ("JPY".to_string(), d("125")),
            ]
            .into_iter()
            .map(|(c, r)| {
                (
                    c,
                    Rate {
                        per_eur: r,
                        date: None,
                        from: "fixed".into(),
                    },
                )
            })
            .collect(),
        };
        // 1000 JPY = 8 EUR = 10 USD; 8 EUR = 10 USD; USD itself exactly.
        assert_eq!(v.value(d("1000"), "JPY"), Some(d("10")));
        assert_eq!(v.value(d("8"), "EUR"), Some(d("10")));
        assert_eq!(v.value(d("3.33"), "USD"), Some(d("3.33")));
        assert_eq!(v.value(d("1"), "GBP"), None);
        assert!(!v.has_rate("GBP") && v.has_rate("EUR"));
    }
}
