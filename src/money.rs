//! Exact money: ISO 4217 currencies, decimal parsing and integer minor units.
//!
//! Amounts enter recon as text (CSV) and leave it as text (reports). Inside, an amount is an
//! `i64` count of the currency's minor unit (cents for EUR, yen for JPY, fils for KWD), so
//! equality joins are exact and cheap. Floating point never touches money.

use rust_decimal::Decimal;

/// ISO 4217 alphabetic codes with their minor-unit exponent (active codes, 2024 list).
/// Codes not listed here are rejected: a typo in a currency must not create a new currency.
///
/// ISO 4217 gives no minor unit ("N.A.") for the precious metals (XAG, XAU, XPD, XPT), the
/// bond-market units and special drawing rights (XBA–XBD, XDR, XSU, XUA), the testing code
/// XTS and XXX ("no currency"), which anonymised and test statements use. recon reads them
/// with a fixed working exponent: 4 for the metals (accounts are kept in fractions of an
/// ounce), 2 for the others. An amount written with more decimals is rejected with its
/// position, like any other, never rounded.
const CURRENCIES: &[(&str, u32)] = &[
    ("AED", 2),
    ("AFN", 2),
    ("ALL", 2),
    ("AMD", 2),
    ("ANG", 2),
    ("AOA", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("AWG", 2),
    ("AZN", 2),
    ("BAM", 2),
    ("BBD", 2),
    ("BDT", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BIF", 0),
    ("BMD", 2),
    ("BND", 2),
    ("BOB", 2),
    ("BRL", 2),
    ("BSD", 2),
    ("BTN", 2),
    ("BWP", 2),
    ("BYN", 2),
    ("BZD", 2),
    ("CAD", 2),
    ("CDF", 2),
    ("CHF", 2),
    ("CLF", 4),
    ("CLP", 0),
    ("CNY", 2),
    ("COP", 2),
    ("CRC", 2),
    ("CUP", 2),
    ("CVE", 2),
    ("CZK", 2),
    ("DJF", 0),
    ("DKK", 2),
    ("DOP", 2),
    ("DZD", 2),
    ("EGP", 2),
    ("ERN", 2),
    ("ETB", 2),
    ("EUR", 2),
    ("FJD", 2),
    ("FKP", 2),
    ("GBP", 2),
    ("GEL", 2),
    ("GHS", 2),
    ("GIP", 2),
    ("GMD", 2),
    ("GNF", 0),
    ("GTQ", 2),
    ("GYD", 2),
    ("HKD", 2),
    ("HNL", 2),
    ("HTG", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("IQD", 3),
    ("IRR", 2),
    ("ISK", 0),
    ("JMD", 2),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KGS", 2),
    ("KHR", 2),
    ("KMF", 0),
    ("KPW", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("KYD", 2),
    ("KZT", 2),
    ("LAK", 2),
    ("LBP", 2),
    ("LKR", 2),
    ("LRD", 2),
    ("LSL", 2),
    ("LYD", 3),
    ("MAD", 2),
    ("MDL", 2),
    ("MGA", 2),
    ("MKD", 2),
    ("MMK", 2),
    ("MNT", 2),
    ("MOP", 2),
    ("MRU", 2),
    ("MUR", 2),
    ("MVR", 2),
    ("MWK", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("MZN", 2),
    ("NAD", 2),
    ("NGN", 2),
    ("NIO", 2),
    ("NOK", 2),
    ("NPR", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PAB", 2),
    ("PEN", 2),
    ("PGK", 2),
    ("PHP", 2),
    ("PKR", 2),
    ("PLN", 2),
    ("PYG", 0),
    ("QAR", 2),
    ("RON", 2),
    ("RSD", 2),
    ("RUB", 2),
    ("RWF", 0),
    ("SAR", 2),
    ("SBD", 2),
    ("SCR", 2),
    ("SDG", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("SHP", 2),
    ("SLE", 2),
    ("SOS", 2),
    ("SRD", 2),
    ("SSP", 2),
    ("STN", 2),
    ("SVC", 2),
    ("SYP", 2),
    ("SZL", 2),
    ("THB", 2),
    ("TJS", 2),
    ("TMT", 2),
    ("TND", 3),
    ("TOP", 2),
    ("TRY", 2),
    ("TTD", 2),
    ("TWD", 2),
    ("TZS", 2),
    ("UAH", 2),
    ("UGX", 0),
    ("USD", 2),
    ("UYI", 0),
    ("UYU", 2),
    ("UYW", 4),
    ("UZS", 2),
    ("VES", 2),
    ("VND", 0),
    ("VUV", 0),
    ("WST", 2),
    ("XAF", 0),
    ("XAG", 4),
    ("XAU", 4),
    ("XBA", 2),
    ("XBB", 2),
    ("XBC", 2),
    ("XBD", 2),
    ("XCD", 2),
    ("XDR", 2),
    ("XOF", 0),
    ("XPD", 4),
    ("XPF", 0),
    ("XPT", 4),
    ("XSU", 2),
    ("XTS", 2),
    ("XUA", 2),
    ("XXX", 2),
    ("YER", 2),
    ("ZAR", 2),
    ("ZMW", 2),
    ("ZWG", 2),
];

/// Why a currency or an amount was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// Not an active ISO 4217 code.
    #[error("unknown currency {0:?} (expected an ISO 4217 code such as EUR)")]
    UnknownCurrency(String),
    /// Text that is not a decimal number.
    #[error("amount {0:?} is not a decimal number")]
    NotANumber(String),
    /// More decimals than the currency has (e.g. `12.345` EUR, `10.5` JPY).
    #[error("amount {amount:?} has more decimals than {currency} allows ({exponent})")]
    TooPrecise {
        /// The amount as written.
        amount: String,
        /// The currency code.
        currency: String,
        /// The currency's minor-unit exponent.
        exponent: u32,
    },
    /// Does not fit in i64 minor units.
    #[error("amount {0:?} is out of range")]
    OutOfRange(String),
    /// Digit groups that do not fit the declared thousands separator (`47,59` with `,` as the
    /// thousands separator): the text reads two ways, so it is rejected, never guessed.
    #[error(
        "amount {0:?}: digits around the thousands separator {1:?} are not groups of three (is the decimal separator set right?)"
    )]
    BadGrouping(String, char),
}

/// Normalises a currency code (trim, upper case) and returns it with its exponent.
pub fn currency(code: &str) -> Result<(&'static str, u32), MoneyError> {
    // The few codes that make up most traffic skip the search.
    match code {
        "EUR" => return Ok(("EUR", 2)),
        "USD" => return Ok(("USD", 2)),
        "GBP" => return Ok(("GBP", 2)),
        "JPY" => return Ok(("JPY", 0)),
        _ => {}
    }
    let t = code.trim().as_bytes();
    let unknown = || MoneyError::UnknownCurrency(code.to_string());
    if t.len() != 3 {
        return Err(unknown());
    }
    let upper = [
        t[0].to_ascii_uppercase(),
        t[1].to_ascii_uppercase(),
        t[2].to_ascii_uppercase(),
    ];
    CURRENCIES
        .binary_search_by(|(c, _)| c.as_bytes().cmp(&upper[..]))
        .map(|i| CURRENCIES[i])
        .map_err(|_| unknown())
}

/// How a decimal amount is written in a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NumberFormat {
    /// The decimal separator, `.` or `,`.
    pub decimal: char,
    /// An optional thousands separator that is removed (`,`, `.`, `'` or a space).
    pub thousands: Option<char>,
}

impl NumberFormat {
    /// `1234.56`
    pub const DOT: NumberFormat = NumberFormat {
        decimal: '.',
        thousands: None,
    };
}

/// Parses a decimal amount written in `fmt` into a `Decimal`. Accepts a leading sign and
/// surrounding spaces; rejects anything else (currency symbols, exponents, empty text).
pub fn parse_decimal(text: &str, fmt: NumberFormat) -> Result<Decimal, MoneyError> {
    let bad = || MoneyError::NotANumber(text.to_string());
    let t = text.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut mantissa: i128 = 0;
    let mut digits = 0u32;
    let mut scale: Option<u32> = None;
    let mut last_was_digit = false;
    // Digits since the last thousands separator (or the start), and whether one was seen:
    // the first group has 1–3 digits, every later one exactly 3.
    let mut group = 0u32;
    let mut grouped = false;
    let grouping = |group: u32, grouped: bool| -> Result<(), MoneyError> {
        if grouped && group != 3 {
            return Err(MoneyError::BadGrouping(
                text.to_string(),
                fmt.thousands.unwrap_or(','),
            ));
        }
        Ok(())
    };
    for ch in body.chars() {
        if let Some(d) = ch.to_digit(10).filter(|_| ch.is_ascii_digit()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(d)))
                .ok_or_else(|| MoneyError::OutOfRange(text.to_string()))?;
            digits += 1;
            match scale.as_mut() {
                Some(s) => *s += 1,
                None => group += 1,
            }
            last_was_digit = true;
        } else if ch == fmt.decimal && scale.is_none() && last_was_digit {
            grouping(group, grouped)?;
            scale = Some(0);
            last_was_digit = false;
        } else if Some(ch) == fmt.thousands && scale.is_none() && last_was_digit {
            if !grouped && group > 3 {
                return Err(MoneyError::BadGrouping(text.to_string(), ch));
            }
            grouping(group, grouped)?;
            grouped = true;
            group = 0;
            last_was_digit = false;
        } else {
            return Err(bad());
        }
    }
    if scale.is_none() && last_was_digit {
        grouping(group, grouped)?;
    }
    if digits == 0
        || !last_was_digit
        || scale.unwrap_or(0) > 28
        || mantissa > 0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF
    {
        return Err(if digits > 0 && last_was_digit {
            MoneyError::OutOfRange(text.to_string())
        } else {
            bad()
        });
    }
    let d = Decimal::from_i128_with_scale(
        if negative { -mantissa } else { mantissa },
        scale.unwrap_or(0),
    );
    Ok(d)
}

/// Converts an exact decimal to minor units of a currency with `exponent` decimals.
/// `12.3` and `12.30` EUR are both 1230; `12.345` EUR is rejected, never rounded.
pub fn to_minor(amount: Decimal, currency: &str, exponent: u32) -> Result<i64, MoneyError> {
    let normalized = amount.normalize();
    if normalized.scale() > exponent {
        return Err(MoneyError::TooPrecise {
            amount: amount.to_string(),
            currency: currency.to_string(),
            exponent,
        });
    }
    let mut scaled = normalized;
    scaled.rescale(exponent);
    i64::try_from(scaled.mantissa()).map_err(|_| MoneyError::OutOfRange(amount.to_string()))
}

/// Parses text in `fmt` straight to minor units of `currency` (already normalised).
pub fn parse_minor(text: &str, fmt: NumberFormat, currency: &str) -> Result<i64, MoneyError> {
    let (code, exponent) = self::currency(currency)?;
    to_minor(parse_decimal(text, fmt)?, code, exponent)
}

/// Appends minor units as plain decimal text to `buf` (see [`format_minor`]).
pub fn write_minor(buf: &mut String, amount_minor: i64, currency: &str) {
    let exponent = self::currency(currency).map(|(_, e)| e).unwrap_or(2) as usize;
    if amount_minor < 0 {
        buf.push('-');
    }
    let abs = amount_minor.unsigned_abs();
    let pow = 10u64.pow(exponent as u32);
    let (int, frac) = (abs / pow, abs % pow);
    let mut digits = itoa_u64(int);
    buf.push_str(digits.as_str());
    if exponent > 0 {
        buf.push('.');
        digits = itoa_u64(frac);
        for _ in digits.len()..exponent {
            buf.push('0');
        }
        buf.push_str(digits.as_str());
    }
}

/// Decimal digits of `v` on the stack.
pub(crate) struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[self.start..]).unwrap_or("")
    }
    fn len(&self) -> usize {
        20 - self.start
    }
}

pub(crate) fn itoa_u64(mut v: u64) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    d
}

/// Formats minor units as a plain decimal string with the currency's exponent (`1230` EUR →
/// `12.30`, `1500` JPY → `1500`). Unknown currencies are formatted with 2 decimals.
pub fn format_minor(amount_minor: i64, currency: &str) -> String {
    let mut s = String::with_capacity(24);
    write_minor(&mut s, amount_minor, currency);
    s
}

/// `amount` as people read it: digits grouped in thousands (`10,275,687.39`, `-1,000`), every
/// decimal the amount has kept (round it first for display). For the email and the HTML
/// report; CSV and XLSX cells keep plain numbers. The grouping is ICU's (`icu_decimal`,
/// root locale: `,` and `.`), not hand-made.
pub fn grouped(amount: &Decimal) -> String {
    use writeable::Writeable as _;
    thread_local! {
        // The root locale: `,` between groups of three, `.` before the decimals. Compiled
        // data (not `Sync`: one formatter a thread).
        static FORMATTER: Option<icu_decimal::DecimalFormatter> =
            icu_decimal::DecimalFormatter::try_new(Default::default(), Default::default()).ok();
    }
    let text = amount.to_string();
    FORMATTER.with(
        |f| match (f, icu_decimal::input::Decimal::try_from_str(&text)) {
            (Some(f), Ok(d)) => f.format(&d).write_to_string().into_owned(),
            // Compiled data always has the root locale, and a Decimal's text always parses: never
            // reached, and the plain text is still the exact amount.
            _ => text.clone(),
        },
    )
}

/// A count as people read it: `15,760` ([`grouped`]).
pub fn count(n: usize) -> String {
    grouped(&Decimal::from(n))
}

/// Minor units of `currency` as grouped text ([`grouped`]): `10,275,687.39` (2 decimals for
/// a code recon does not know).
pub fn grouped_minor(amount_minor: i128, currency: &str) -> String {
    let exp = self::currency(currency).map(|(_, e)| e).unwrap_or(2);
    match Decimal::try_from_i128_with_scale(amount_minor, exp) {
        Ok(d) => grouped(&d),
        Err(_) => format!("{amount_minor} (minor units)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn currency_table_is_sorted_for_binary_search() {
        assert!(CURRENCIES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn exponents_follow_iso_4217() {
        assert_eq!(currency(" eur ").unwrap(), ("EUR", 2));
        assert_eq!(currency("JPY").unwrap(), ("JPY", 0));
        assert_eq!(currency("KWD").unwrap(), ("KWD", 3));
        assert!(matches!(
            currency("EUX"),
            Err(MoneyError::UnknownCurrency(_))
        ));
    }

    #[test]
    fn trailing_zeros_do_not_change_the_amount() {
        assert_eq!(parse_minor("12.3", NumberFormat::DOT, "EUR").unwrap(), 1230);
        assert_eq!(
            parse_minor("12.30", NumberFormat::DOT, "EUR").unwrap(),
            1230
        );
        assert_eq!(
            parse_minor("12.300", NumberFormat::DOT, "EUR").unwrap(),
            1230
        );
        assert_eq!(parse_minor("1500", NumberFormat::DOT, "JPY").unwrap(), 1500);
        assert_eq!(
            parse_minor("1500.0", NumberFormat::DOT, "JPY").unwrap(),
            1500
        );
        assert_eq!(parse_minor("-0.01", NumberFormat::DOT, "EUR").unwrap(), -1);
    }

    #[test]
    fn more_decimals_than_the_currency_has_is_rejected_not_rounded() {
        assert!(matches!(
            parse_minor("12.345", NumberFormat::DOT, "EUR"),
            Err(MoneyError::TooPrecise { .. })
        ));
        assert!(matches!(
            parse_minor("10.5", NumberFormat::DOT, "JPY"),
            Err(MoneyError::TooPrecise { .. })
        ));
    }

    #[test]
    fn decimal_comma_and_thousands_separators() {
        let de = NumberFormat {
            decimal: ',',
            thousands: Some('.'),
        };
        assert_eq!(parse_minor("1.234,50", de, "EUR").unwrap(), 123450);
        let en = NumberFormat {
            decimal: '.',
            thousands: Some(','),
        };
        assert_eq!(parse_minor("1,234.50", en, "EUR").unwrap(), 123450);
        assert_eq!(parse_minor("1,234,567", en, "EUR").unwrap(), 123456700);
        assert_eq!(parse_minor("-12,345.6", en, "EUR").unwrap(), -1234560);
        assert_eq!(parse_minor("47.59", en, "EUR").unwrap(), 4759);
    }

    #[test]
    fn digit_groups_that_do_not_fit_the_thousands_separator_are_rejected() {
        // Issue 12 point 8: `47,59` with `,` as thousands separator is a decimal comma the
        // config did not declare, never 4759.00.
        let en = NumberFormat {
            decimal: '.',
            thousands: Some(','),
        };
        for bad in [
            "47,59",
            "1,23",
            "1,2345",
            "1234,567",
            "1,234,56",
            "12,3456.00",
            "1,23.45",
        ] {
            assert!(
                matches!(parse_decimal(bad, en), Err(MoneyError::BadGrouping(..))),
                "{bad:?} must be rejected, got {:?}",
                parse_decimal(bad, en)
            );
        }
        let de = NumberFormat {
            decimal: ',',
            thousands: Some('.'),
        };
        assert!(matches!(
            parse_decimal("47.59", de),
            Err(MoneyError::BadGrouping(..))
        ));
        assert_eq!(parse_minor("47,59", de, "EUR").unwrap(), 4759);
    }

    #[test]
    fn garbage_is_not_a_number() {
        for bad in [
            "", " ", "abc", "1e5", "€12", "1.2.3", "--1", "1-", ".5", "5.", "+-3",
        ] {
            assert!(
                parse_decimal(bad, NumberFormat::DOT).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn formatting_uses_the_currency_exponent() {
        assert_eq!(format_minor(1230, "EUR"), "12.30");
        assert_eq!(format_minor(-5, "EUR"), "-0.05");
        assert_eq!(format_minor(1500, "JPY"), "1500");
        assert_eq!(format_minor(1, "KWD"), "0.001");
        assert_eq!(format_minor(0, "EUR"), "0.00");
        assert_eq!(format_minor(i64::MIN, "EUR"), "-92233720368547758.08");
        assert_eq!(format_minor(-1500, "JPY"), "-1500");
        for v in [-100_001i64, -1, 0, 7, 123_456_789] {
            assert_eq!(format_minor(v, "EUR"), Decimal::new(v, 2).to_string());
        }
    }

    #[test]
    fn amounts_are_grouped_in_thousands_for_reading() {
        let d = |t: &str| t.parse::<Decimal>().unwrap();
        assert_eq!(grouped(&d("10275687.39")), "10,275,687.39");
        assert_eq!(grouped(&d("-1000")), "-1,000");
        assert_eq!(grouped(&d("999.5")), "999.5");
        assert_eq!(grouped(&d("0.00")), "0.00");
        assert_eq!(grouped_minor(1_027_568_739, "EUR"), "10,275,687.39");
        assert_eq!(grouped_minor(500_000, "JPY"), "500,000");
        assert_eq!(grouped_minor(1_234_567, "KWD"), "1,234.567");
    }
}
