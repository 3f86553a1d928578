//! Helpers the text formats share: strict decoding, line numbers, dates, amounts and the
//! few withdrawn currencies that old statements still carry.

use super::ParseContext;
use super::keys::KeyAt;
use crate::money;
pub use crate::textsafe::control_character;
use anyhow::Result;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::borrow::Cow;

/// A text encoding other than UTF-8: any the WHATWG Encoding Standard names (through
/// encoding_rs), plus IBM code page 852, which Central European MT940 files still use and
/// encoding_rs does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEncoding {
    /// An encoding_rs encoding (never UTF-8, UTF-16 or replacement).
    Whatwg(&'static encoding_rs::Encoding),
    /// IBM 852 (DOS Latin 2).
    Ibm852,
}

impl TextEncoding {
    /// The encoding's name.
    pub fn name(self) -> &'static str {
        match self {
            TextEncoding::Whatwg(e) => e.name(),
            TextEncoding::Ibm852 => "IBM852",
        }
    }
}

/// Reads a source's `encoding` key (csv, mt940, bai2): `None` for UTF-8.
pub(crate) fn parse_encoding(at: &KeyAt<'_>, label: &str) -> Result<Option<TextEncoding>> {
    let l = label.trim().to_ascii_lowercase();
    if matches!(l.as_str(), "ibm852" | "cp852" | "852" | "ibm-852") {
        return Ok(Some(TextEncoding::Ibm852));
    }
    let enc = encoding_rs::Encoding::for_label(l.as_bytes()).ok_or_else(|| {
        at.bad(
            "encoding",
            format!("unknown encoding {label:?} (hint: utf-8, windows-1252, latin1, iso-8859-2, iso-8859-15, ibm852, gbk)"),
        )
    })?;
    if enc == encoding_rs::UTF_8 {
        Ok(None)
    } else if enc.output_encoding() != enc {
        Err(at.bad(
            "encoding",
            format!("{label:?} is not supported (UTF-16 and replacement encodings are not)"),
        ))
    } else {
        Ok(Some(TextEncoding::Whatwg(enc)))
    }
}

/// Decodes file bytes: strict UTF-8 (a leading BOM removed) unless the source declares an
/// encoding. Invalid bytes are an error naming the line, never replaced silently.
pub fn decode<'b>(ctx: &ParseContext, bytes: &'b [u8]) -> Result<Cow<'b, str>> {
    match ctx.encoding {
        None => {
            let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            std::str::from_utf8(body).map(Cow::Borrowed).map_err(|e| {
                let line = 1 + body[..e.valid_up_to()]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                ctx.error(
                    line,
                    format!(
                        "not valid UTF-8 {}",
                        encoding_hint(sample(body, e.valid_up_to()), None)
                    ),
                )
            })
        }
        Some(enc) => {
            let text: Cow<'b, str> = match enc {
                TextEncoding::Whatwg(e) => {
                    let (text, had_errors) = e.decode_without_bom_handling(bytes);
                    if had_errors {
                        let at = text.find('\u{fffd}').unwrap_or(0);
                        return Err(ctx.error(
                            line_of(&text, at),
                            format!(
                                "bytes that are not valid {} {}",
                                e.name(),
                                encoding_hint(sample(bytes, byte_near(&text, at)), Some(enc))
                            ),
                        ));
                    }
                    text
                }
                TextEncoding::Ibm852 => Cow::Owned(ibm852(bytes)),
            };
            // C1 control characters never occur in statements: they mean the bytes were
            // decoded with the wrong single-byte table (e.g. IBM852 read as ISO-8859-2), which
            // would silently garble names and references.
            if let Some(at) = text.find(|c: char| ('\u{80}'..='\u{9f}').contains(&c)) {
                let c = text[at..].chars().next().unwrap_or('\u{80}');
                return Err(ctx.error(
                    line_of(&text, at),
                    format!(
                        "decoding as {} gives the control character U+{:04X}: the file is in another encoding {}",
                        enc.name(),
                        c as u32,
                        encoding_hint(sample(bytes, byte_near(&text, at)), Some(enc))
                    ),
                ));
            }
            Ok(match text {
                Cow::Borrowed(s) => Cow::Borrowed(s.strip_prefix('\u{feff}').unwrap_or(s)),
                Cow::Owned(s) => Cow::Owned(s.strip_prefix('\u{feff}').unwrap_or(&s).to_string()),
            })
        }
    }
}

/// How many bytes [`sample`] gives the encoding sniffing.
const SAMPLE_BYTES: usize = 64 * 1024;

/// The bytes the encoding sniffing ([`encoding_hint`]) looks at, never the whole file (a 2 GB
/// file decoded once per candidate encoding took minutes and gigabytes): at most 64 KiB from
/// the start of the line that holds byte `at` (where decoding failed), ending at a line break
/// when there is one after `at`, so no character is cut in two.
pub fn sample(bytes: &[u8], at: usize) -> &[u8] {
    let at = at.min(bytes.len());
    let from = at.saturating_sub(SAMPLE_BYTES / 2);
    let start = bytes[from..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(from, |p| from + p + 1);
    let end = (start + SAMPLE_BYTES).min(bytes.len());
    match bytes[at..end].iter().rposition(|&b| b == b'\n') {
        Some(p) if end < bytes.len() => &bytes[start..at + p + 1],
        _ => &bytes[start..end],
    }
}

/// The byte offset in the source of character offset `at` of a text decoded from it, for a
/// single-byte encoding (one byte per character); near it for a multi-byte one.
fn byte_near(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].chars().count()
}

/// The encodings a statement may be in that `encoding_hint` tries, as the `encoding` key
/// spells them: the single-byte tables of European bank exports and IBM 852 (Central European
/// MT940). Multi-byte ones (GBK, Shift_JIS) decode most Latin bytes too, so they are offered
/// only when chardetng guesses them.
const CANDIDATES: [&str; 6] = [
    "utf-8",
    "windows-1252",
    "iso-8859-15",
    "iso-8859-2",
    "windows-1250",
    "ibm852",
];

/// `bytes` decoded with the IBM 852 table (ASCII below 0x80).
fn ibm852(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b < 0x80 {
                b as char
            } else {
                IBM852[usize::from(b - 0x80)]
            }
        })
        .collect()
}

/// `bytes` decoded as `label`, when that decoding is clean: no invalid sequence, no control
/// character other than tab and line breaks, and (IBM 852, whose table decodes any byte) no
/// box-drawing character, which no statement text holds.
fn decodes_cleanly(bytes: &[u8], label: &str) -> bool {
    let text: Cow<'_, str> = if label == "ibm852" {
        Cow::Owned(ibm852(bytes))
    } else {
        let Some(enc) = encoding_rs::Encoding::for_label(label.as_bytes()) else {
            return false;
        };
        let (text, had_errors) = enc.decode_without_bom_handling(bytes);
        if had_errors {
            return false;
        }
        text
    };
    !text.chars().any(|c| {
        (c.is_control() && !matches!(c, '\t' | '\r' | '\n'))
            || c == '\u{fffd}'
            || (label == "ibm852" && ('\u{2500}'..='\u{25ff}').contains(&c))
    })
}

/// The encodings in which `bytes` decode cleanly, most likely first (chardetng's guess, then
/// the order of [`CANDIDATES`]), leaving out `tried`.
pub fn clean_encodings(bytes: &[u8], tried: Option<TextEncoding>) -> Vec<String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let guess = detector
        .guess(None, chardetng::Utf8Detection::Allow)
        .name()
        .to_ascii_lowercase();
    let tried = tried.map(|t| t.name().to_ascii_lowercase());
    let mut out: Vec<String> = Vec::new();
    for c in std::iter::once(guess.as_str()).chain(CANDIDATES) {
        if !out.iter().any(|o| o == c) && tried.as_deref() != Some(c) && decodes_cleanly(bytes, c) {
            out.push(c.to_string());
        }
    }
    out
}

/// The hint for a file that does not decode: the `encoding` values under which `bytes` (a
/// [`sample`] of it) decode.
pub fn encoding_hint(bytes: &[u8], tried: Option<TextEncoding>) -> String {
    match clean_encodings(bytes, tried).as_slice() {
        [] => format!(
            "(hint: none of {} decodes the file cleanly; is it a statement file?)",
            CANDIDATES.join(", ")
        ),
        [first, ..] if *first == "utf-8" => {
            "(hint: the file is UTF-8: leave out the source's `encoding`)".to_string()
        }
        found => format!(
            "(hint: set the source's `encoding = \"{}\"`; the file decodes cleanly as {})",
            found[0],
            found.join(", ")
        ),
    }
}

/// IBM code page 852 (DOS Latin 2), bytes 0x80–0xFF.
const IBM852: [char; 128] = [
    'Ç', 'ü', 'é', 'â', 'ä', 'ů', 'ć', 'ç', 'ł', 'ë', 'Ő', 'ő', 'î', 'Ź', 'Ä', 'Ć', //
    'É', 'Ĺ', 'ĺ', 'ô', 'ö', 'Ľ', 'ľ', 'Ś', 'ś', 'Ö', 'Ü', 'Ť', 'ť', 'Ł', '×', 'č', //
    'á', 'í', 'ó', 'ú', 'Ą', 'ą', 'Ž', 'ž', 'Ę', 'ę', '¬', 'ź', 'Č', 'ş', '«', '»', //
    '░', '▒', '▓', '│', '┤', 'Á', 'Â', 'Ě', 'Ş', '╣', '║', '╗', '╝', 'Ż', 'ż', '┐', //
    '└', '┴', '┬', '├', '─', '┼', 'Ă', 'ă', '╚', '╔', '╩', '╦', '╠', '═', '╬', '¤', //
    'đ', 'Đ', 'Ď', 'Ë', 'ď', 'Ň', 'Í', 'Î', 'ě', '┘', '┌', '█', '▄', 'Ţ', 'Ů', '▀', //
    'Ó', 'ß', 'Ô', 'Ń', 'ń', 'ň', 'Š', 'š', 'Ŕ', 'Ú', 'ŕ', 'Ű', 'ý', 'Ý', 'ţ', '´', //
    '\u{ad}', '˝', '˛', 'ˇ', '˘', '§', '÷', '¸', '°', '¨', '˙', 'ű', 'Ř', 'ř', '■', '\u{a0}',
];

/// 1-based line number of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> u64 {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64
}

/// Withdrawn ISO 4217 codes that historical statements (and bank examples) still use.
const WITHDRAWN: &[(&str, u32)] = &[("ATS", 2), ("DEM", 2), ("FIM", 2), ("FRF", 2), ("NLG", 2)];

/// An ISO 4217 code with its exponent: the active list, plus a few withdrawn European codes.
pub fn currency(code: &str) -> Result<(&'static str, u32), String> {
    money::currency(code).or_else(|e| {
        let upper = code.trim().to_ascii_uppercase();
        WITHDRAWN
            .iter()
            .find(|(c, _)| *c == upper)
            .copied()
            .ok_or_else(|| e.to_string())
    })
}

/// Exact decimal to minor units, rejecting more decimals than the currency has.
pub fn minor(amount: Decimal, currency: &'static str) -> Result<i64, String> {
    let (code, exp) = self::currency(currency)?;
    money::to_minor(amount, code, exp).map_err(|e| e.to_string())
}

/// `YYMMDD` (SWIFT, BAI2): years 00–79 are 20xx, 80–99 19xx.
pub fn yymmdd(s: &str) -> Result<NaiveDate, String> {
    if s.len() != 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("date {s:?} is not YYMMDD"));
    }
    let yy: i32 = s[0..2].parse().map_err(|_| format!("date {s:?}"))?;
    let year = if yy < 80 { 2000 + yy } else { 1900 + yy };
    let m: u32 = s[2..4].parse().map_err(|_| format!("date {s:?}"))?;
    let d: u32 = s[4..6].parse().map_err(|_| format!("date {s:?}"))?;
    NaiveDate::from_ymd_opt(year, m, d).ok_or_else(|| format!("date {s:?} does not exist"))
}

/// Midnight of `date` in the context's zone, as UTC microseconds.
pub fn day_start(ctx: &ParseContext, date: NaiveDate) -> crate::timeparse::Micros {
    crate::timeparse::day_start(date, ctx.timezone)
}

/// The inclusive end of a date-only booking on `date` (the day's last microsecond in the
/// source's zone).
pub fn day_end(ctx: &ParseContext, date: NaiveDate) -> crate::timeparse::Micros {
    crate::timeparse::day_booking(date, ctx.timezone).1
}

/// Collapses runs of white space (including line breaks) to one space and trims.
pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Free text for the canonical `reference`: collapsed, width-folded, `None` when empty.
pub fn reference(s: &str) -> Option<crate::model::Id> {
    let t = crate::normalize::text(&collapse(s));
    (!t.is_empty()).then(|| crate::model::Id::new(&t))
}
