//! OFX / QFX bank downloads (Open Financial Exchange), both SGML 1.x (a header of
//! `OFXHEADER:100` lines, then tags whose values are not closed: `<TRNAMT>-50.00`) and XML 2.x
//! (`<?OFX OFXHEADER="200" …?>`, every tag closed). One reader serves both: a tag followed by
//! text is a value (its end tag optional), any other tag opens an aggregate that its end tag
//! closes, and an end tag that closes no open aggregate is an error with its line.
//!
//! One line per `STMTTRN` of a bank (`STMTRS`) or credit-card (`CCSTMTRS`) statement: `FITID`
//! is the line's provider id (required), the amount is `TRNAMT` as written (signed: credit
//! positive, debit negative) in the statement's `CURDEF`, exact minor units; the booking is
//! `DTPOSTED` (`YYYYMMDD` is a whole day; with a time, the bracket `[-5:EST]` or `[+5.30]`
//! gives the offset in hours and optional minutes, else the source's `timezone` applies — the
//! OFX specification says GMT, so set `timezone = "UTC"` for a bank that follows it); the
//! reference is `REFNUM`, else `CHECKNUM`, else `MEMO`, else `NAME`; the recipient is the
//! transaction's `BANKACCTTO`/`CCACCTTO` account if it names one. `TRNTYPE` `FEE` and
//! `SRVCHG` are fees, every other type of the specification a payment line.
//!
//! Each statement's facts: the account (`BANKACCTFROM`/`CCACCTFROM` `ACCTID`, masked when
//! printed), `CURDEF`, the period `BANKTRANLIST` `DTSTART`..`DTEND` and the closing `LEDGERBAL`.
//! OFX declares no opening balance and no control totals, so an OFX file never proves a day
//! complete by itself (`completeness = "statement"` finds nothing to check). Not read:
//! investment statements, `CURRENCY`/`ORIGCURRENCY` (the original currency of a line),
//! `AVAILBAL`, the sign-on and status aggregates.

use super::keys::{KeyAt, keys_of};
use super::text;
use super::{Balance, ParseContext, Parsed, StatementFacts, StatementLine};
use crate::model::LineKind;
use crate::money::NumberFormat;
use anyhow::Result;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: none besides the common keys; the file declares its encoding.
// ---------------------------------------------------------------------------------------------

/// The keys only an ofx source takes, as written: none.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOfx {}

/// The validated settings of an ofx source: none.
#[derive(Debug, Clone, Default)]
pub struct OfxSettings {}

/// Every key of an ofx source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawOfx>().to_vec()
}

/// Reads the ofx keys of a source (`table`: its keys besides the common ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<OfxSettings> {
    let RawOfx {} = at.read(table)?;
    Ok(OfxSettings {})
}

// ---------------------------------------------------------------------------------------------
// Tags.
// ---------------------------------------------------------------------------------------------

/// One tag of the body, with the line it starts on.
#[derive(Debug, PartialEq, Eq)]
enum Tag<'t> {
    /// An aggregate opens.
    Open(&'t str, u64),
    /// A value: its tag and text (entities decoded, trimmed).
    Value(&'t str, String, u64),
    /// An aggregate (or, in XML, a value already read) closes.
    Close(&'t str, u64),
}

/// The tags of an OFX body (from its first `<`), in order. Processing instructions and
/// comments are skipped.
fn tags<'t>(ctx: &ParseContext, body: &'t str, first_line: u64) -> Result<Vec<Tag<'t>>> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut line = first_line;
    let mut i = 0;
    let count = |from: usize, to: usize| b[from..to].iter().filter(|&&c| c == b'\n').count() as u64;
    while i < b.len() {
        let Some(lt) = body[i..].find('<').map(|p| i + p) else {
            if !body[i..].trim().is_empty() {
                return Err(ctx.error(line + count(i, i), "text after the last tag"));
            }
            break;
        };
        if !body[i..lt].trim().is_empty() {
            return Err(ctx.error(
                line + count(i, lt),
                format!(
                    "text {:?} outside any value tag",
                    super::cut(body[i..lt].trim())
                ),
            ));
        }
        line += count(i, lt);
        if body[lt..].starts_with("<!--") {
            let end = body[lt..]
                .find("-->")
                .ok_or_else(|| ctx.error(line, "comment without its end (-->)"))?;
            line += count(lt, lt + end);
            i = lt + end + 3;
            continue;
        }
        let gt = body[lt..]
            .find('>')
            .map(|p| lt + p)
            .ok_or_else(|| ctx.error(line, "tag without its closing '>' (truncated?)"))?;
        let inner = &body[lt + 1..gt];
        // Processing instructions, declarations and empty elements (`<MEMO/>`) hold nothing.
        if inner.starts_with('?') || inner.starts_with('!') || inner.ends_with('/') {
            line += count(lt, gt);
            i = gt + 1;
            continue;
        }
        let (closing, name) = match inner.strip_prefix('/') {
            Some(n) => (true, n.trim()),
            None => (false, inner.trim()),
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_')
        {
            return Err(ctx.error(line, format!("malformed tag <{}>", super::cut(inner))));
        }
        if closing {
            out.push(Tag::Close(name, line));
            i = gt + 1;
            continue;
        }
        // A value runs to the next tag.
        let next = body[gt + 1..].find('<').map_or(b.len(), |p| gt + 1 + p);
        let raw = body[gt + 1..next].trim();
        if raw.is_empty() {
            out.push(Tag::Open(name, line));
            i = gt + 1;
        } else {
            let value = entities(raw).map_err(|e| ctx.error(line, format!("<{name}>: {e}")))?;
            out.push(Tag::Value(name, value, line));
            line += count(gt, next);
            i = next;
            // XML 2.x closes the value: `</NAME>` right after it belongs to it.
            let close = format!("</{name}>");
            if body[i..].starts_with(&close) {
                i += close.len();
            }
        }
    }
    Ok(out)
}

/// Decodes the entities SGML and XML OFX use (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`,
/// `&#NN;`, `&#xNN;`); an `&` that starts none of them is kept as written (SGML files do that).
fn entities(raw: &str) -> Result<String, String> {
    if !raw.contains('&') {
        return Ok(raw.to_string());
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        rest = &rest[p..];
        // Byte-wise: an entity is ASCII, and `;` never sits inside a multi-byte character.
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|&b| b == b';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Header and encoding.
// ---------------------------------------------------------------------------------------------

/// The text of the file and where its body (the first `<OFX>`-level tag) starts: SGML
/// headers `ENCODING`/`CHARSET` or the XML declaration name the encoding.
fn decode<'b>(ctx: &ParseContext, bytes: &'b [u8]) -> Result<(Cow<'b, str>, usize)> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(600)]).into_owned();
    let trimmed = head.trim_start();
    let mut c = ctx.clone();
    if trimmed.starts_with("<?xml") || trimmed.starts_with("<?OFX") || trimmed.starts_with("<OFX") {
        let declared = head.find("encoding=").and_then(|p| {
            let rest = &head[p + 9..];
            let q = rest.chars().next()?;
            let rest = &rest[q.len_utf8()..];
            rest.find(q).map(|e| rest[..e].to_string())
        });
        c.encoding = match declared.as_deref().map(str::trim) {
            None => None,
            Some(label) => {
                let enc = encoding_rs::Encoding::for_label(label.as_bytes())
                    .ok_or_else(|| ctx.error(1, format!("unknown XML encoding {label:?}")))?;
                (enc != encoding_rs::UTF_8).then_some(super::TextEncoding::Whatwg(enc))
            }
        };
    } else if trimmed.starts_with("OFXHEADER") {
        let field = |key: &str| {
            head.lines()
                .take_while(|l| !l.trim_start().starts_with('<'))
                .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
                .map(|v| v.trim().to_ascii_uppercase())
        };
        let encoding = field("ENCODING");
        let charset = field("CHARSET");
        c.encoding = match (encoding.as_deref(), charset.as_deref()) {
            (Some("UTF-8" | "UNICODE"), _) => None,
            (_, Some("1252" | "WINDOWS-1252")) => {
                Some(super::TextEncoding::Whatwg(encoding_rs::WINDOWS_1252))
            }
            (_, Some("ISO-8859-1" | "8859-1" | "LATIN1")) => {
                Some(super::TextEncoding::Whatwg(encoding_rs::WINDOWS_1252))
            }
            (_, Some("NONE") | None) => None,
            (_, Some(other)) => {
                return Err(ctx.error(
                    1,
                    format!("OFX header CHARSET:{other} is not supported (hint: 1252, ISO-8859-1 or NONE)"),
                ));
            }
        };
    } else {
        return Err(ctx.error(
            1,
            "not an OFX file: it starts with neither an OFXHEADER line nor an XML declaration",
        ));
    }
    let text = text::decode(&c, bytes)?;
    // The body starts at the first tag that is no processing instruction.
    let start = text
        .match_indices('<')
        .map(|(p, _)| p)
        .find(|&p| !text[p..].starts_with("<?"))
        .ok_or_else(|| ctx.error(1, "no <OFX> element"))?;
    Ok((text, start))
}

// ---------------------------------------------------------------------------------------------
// Reading.
// ---------------------------------------------------------------------------------------------

/// `DTPOSTED`-style date-time: `YYYYMMDD[HHMM[SS[.XXX]]][[±H[.MM][:NAME]]]`, as (first
/// instant, last instant, day, date only).
fn datetime(ctx: &ParseContext, value: &str) -> Result<(i64, i64, NaiveDate, bool), String> {
    let (stamp, zone) = match value.find('[') {
        Some(p) => {
            let z = value[p + 1..]
                .strip_suffix(']')
                .ok_or_else(|| format!("{value:?}: time zone bracket without ']'"))?;
            (&value[..p], Some(z))
        }
        None => (value, None),
    };
    let (digits, frac) = match stamp.split_once('.') {
        Some((d, f)) => (d, Some(f)),
        None => (stamp, None),
    };
    let bad = || format!("{value:?} is not an OFX date (YYYYMMDD[HHMMSS[.XXX]][[offset:zone]])");
    if !digits.bytes().all(|c| c.is_ascii_digit())
        || !matches!(digits.len(), 8 | 12 | 14)
        || frac
            .is_some_and(|f| f.is_empty() || f.len() > 6 || !f.bytes().all(|c| c.is_ascii_digit()))
    {
        return Err(bad());
    }
    let day = NaiveDate::parse_from_str(&digits[..8], "%Y%m%d").map_err(|_| bad())?;
    if digits.len() == 8 {
        if frac.is_some() {
            return Err(bad());
        }
        let (at, to) = crate::timeparse::day_booking(day, ctx.timezone);
        return Ok((at, to, day, true));
    }
    let num = |r: std::ops::Range<usize>| digits.get(r).and_then(|s| s.parse::<u32>().ok());
    let (h, m) = (num(8..10).ok_or_else(bad)?, num(10..12).ok_or_else(bad)?);
    let s = if digits.len() == 14 {
        num(12..14).ok_or_else(bad)?
    } else {
        0
    };
    let micros = match frac {
        Some(f) => format!("{f:0<6}").parse::<u32>().map_err(|_| bad())?,
        None => 0,
    };
    let time = NaiveTime::from_hms_micro_opt(h, m, s, micros).ok_or_else(bad)?;
    let naive = NaiveDateTime::new(day, time);
    let at = match zone {
        None => crate::timeparse::local_to_utc(naive, ctx.timezone)?,
        Some(z) => {
            let offset = z.split(':').next().unwrap_or("").trim();
            let (sign, rest) = match offset.as_bytes().first() {
                Some(b'-') => (-1i64, &offset[1..]),
                Some(b'+') => (1, &offset[1..]),
                _ => (1, offset),
            };
            let (hours, minutes) = match rest.split_once('.') {
                Some((hh, mm)) => (hh, mm),
                None => (rest, "0"),
            };
            let hours: i64 = hours
                .parse()
                .ok()
                .filter(|h| (0..=14).contains(h))
                .ok_or_else(|| {
                    format!(
                        "{value:?}: time zone offset {offset:?} is not ±hours[.minutes] (−14…+14)"
                    )
                })?;
            let minutes: i64 = minutes
                .parse()
                .ok()
                .filter(|m| (0..60).contains(m))
                .ok_or_else(|| {
                    format!("{value:?}: time zone offset {offset:?} is not ±hours[.minutes]")
                })?;
            let offset_s = sign * (hours * 3600 + minutes * 60);
            naive.and_utc().timestamp_micros() - offset_s * 1_000_000
        }
    };
    Ok((at, at, day, false))
}

/// The transaction types of the OFX specification (`TRNTYPE`).
const TRNTYPES: [&str; 18] = [
    "CREDIT",
    "DEBIT",
    "INT",
    "DIV",
    "FEE",
    "SRVCHG",
    "DEP",
    "ATM",
    "POS",
    "XFER",
    "CHECK",
    "PAYMENT",
    "CASH",
    "DIRECTDEP",
    "DIRECTDEBIT",
    "REPEATPMT",
    "HOLD",
    "OTHER",
];

/// A statement (`STMTRS` / `CCSTMTRS`) being read.
struct Statement {
    facts: StatementFacts,
    origin: Option<Arc<super::Origin>>,
}

/// The values of a `STMTTRN` being read: (path below it, value, line).
type Fields<'t> = Vec<(String, String, u64)>;

/// Parses OFX bytes (SGML 1.x or XML 2.x) into statement lines and one facts record per
/// statement. Any problem rejects the whole file with its line and tag.
pub fn parse(ctx: &ParseContext, bytes: &[u8]) -> Result<Parsed> {
    let (text, start) = decode(ctx, bytes)?;
    let first_line = text::line_of(&text, start);
    let tags = tags(ctx, &text[start..], first_line)?;
    let mut parsed = Parsed::default();
    let mut stack: Vec<&str> = Vec::new();
    let mut statement: Option<Statement> = None;
    let mut txn: Option<(u64, Fields<'_>)> = None;
    let mut statements = 0;
    for tag in &tags {
        match tag {
            Tag::Open(name, line) => {
                if stack.is_empty() && *name != "OFX" {
                    return Err(
                        ctx.error(line, format!("the body starts with <{name}>, not <OFX>"))
                    );
                }
                match *name {
                    "STMTRS" | "CCSTMTRS" => {
                        if statement.is_some() {
                            return Err(
                                ctx.error(line, format!("<{name}> inside another statement"))
                            );
                        }
                        statement = Some(Statement {
                            facts: StatementFacts::new(&ctx.file, format!("line {line}")),
                            origin: None,
                        });
                    }
                    "STMTTRN" => {
                        if statement.is_none() || txn.is_some() {
                            return Err(
                                ctx.error(line, "<STMTTRN> outside a statement's BANKTRANLIST")
                            );
                        }
                        txn = Some((*line, Vec::new()));
                    }
                    _ => {}
                }
                stack.push(name);
            }
            Tag::Value(name, value, line) => {
                if stack.is_empty() {
                    return Err(ctx.error(line, format!("<{name}> outside <OFX>")));
                }
                if let Some((_, fields)) = &mut txn {
                    let from = stack.iter().rposition(|s| *s == "STMTTRN").unwrap_or(0);
                    let mut path: Vec<&str> = stack[from + 1..].to_vec();
                    path.push(name);
                    fields.push((path.join("/"), value.clone(), *line));
                    continue;
                }
                let parent = stack.last().copied().unwrap_or("");
                let Some(st) = &mut statement else { continue };
                statement_value(ctx, st, parent, name, value, *line)?;
            }
            Tag::Close(name, line) => {
                let Some(pos) = stack.iter().rposition(|s| s == name) else {
                    // XML 2.x closes values; a close of a value read just before it was taken
                    // with the value. Anything else closes nothing that is open.
                    return Err(ctx.error(
                        line,
                        format!(
                            "</{name}> closes no open element (open: {})",
                            stack.join("/")
                        ),
                    ));
                };
                if pos + 1 != stack.len() && stack[pos + 1..].iter().any(|s| AGGREGATES.contains(s))
                {
                    return Err(ctx.error(
                        line,
                        format!(
                            "</{name}> closes <{}> too, which is still open",
                            stack[pos + 1..].join("/")
                        ),
                    ));
                }
                stack.truncate(pos);
                match *name {
                    "STMTTRN" => {
                        if let (Some((at, fields)), Some(st)) = (txn.take(), &mut statement) {
                            let l = transaction(ctx, st, at, &fields)?;
                            parsed.lines.push(l);
                        }
                    }
                    "STMTRS" | "CCSTMTRS" => {
                        if let Some(st) = statement.take() {
                            statements += 1;
                            parsed.facts.push(st.facts);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(open) = stack.last() {
        return Err(ctx.error(
            text::line_of(&text, text.len()),
            format!("the file ends inside <{open}> (truncated?)"),
        ));
    }
    if statements == 0 {
        return Err(ctx.error(
            first_line,
            "no bank (STMTRS) or credit-card (CCSTMTRS) statement in the file",
        ));
    }
    Ok(parsed)
}

/// Aggregates a reader must see closed before their parent closes (values need no close).
const AGGREGATES: [&str; 8] = [
    "STMTTRN",
    "BANKTRANLIST",
    "STMTRS",
    "CCSTMTRS",
    "BANKACCTFROM",
    "CCACCTFROM",
    "LEDGERBAL",
    "STMTTRNRS",
];

/// A value of a statement outside its transactions.
fn statement_value(
    ctx: &ParseContext,
    st: &mut Statement,
    parent: &str,
    name: &str,
    value: &str,
    line: u64,
) -> Result<()> {
    let facts = &mut st.facts;
    match (parent, name) {
        ("STMTRS" | "CCSTMTRS", "CURDEF") => {
            let (code, _) =
                text::currency(value).map_err(|e| ctx.error(line, format!("<CURDEF>: {e}")))?;
            facts.currency = Some(code);
        }
        ("BANKACCTFROM" | "CCACCTFROM", "ACCTID") => {
            if st.origin.is_some() {
                return Err(ctx.error(
                    line,
                    "<ACCTID> of the statement's account comes after its first transaction",
                ));
            }
            facts.account = Some(value.to_string());
        }
        ("BANKTRANLIST", "DTSTART" | "DTEND") => {
            let (_, _, day, _) =
                datetime(ctx, value).map_err(|e| ctx.error(line, format!("<{name}>: {e}")))?;
            if name == "DTSTART" {
                facts.from = Some(day);
            } else {
                facts.to = Some(day);
            }
        }
        ("LEDGERBAL", "BALAMT") => {
            let cur = facts
                .currency
                .ok_or_else(|| ctx.error(line, "<LEDGERBAL> before the statement's <CURDEF>"))?;
            let v = crate::money::parse_decimal(value, NumberFormat::DOT)
                .map_err(|e| ctx.error(line, format!("<LEDGERBAL>/<BALAMT>: {e}")))?;
            let m = text::minor(v, cur)
                .map_err(|e| ctx.error(line, format!("<LEDGERBAL>/<BALAMT>: {e}")))?;
            let date = facts.closing.and_then(|b| b.date);
            facts.closing = Some(Balance {
                amount_minor: m,
                currency: cur,
                date,
            });
        }
        ("LEDGERBAL", "DTASOF") => {
            let (_, _, day, _) = datetime(ctx, value)
                .map_err(|e| ctx.error(line, format!("<LEDGERBAL>/<DTASOF>: {e}")))?;
            if let Some(b) = &mut facts.closing {
                b.date = Some(day);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The line of the `STMTTRN` at `line` with `fields`.
fn transaction(
    ctx: &ParseContext,
    st: &mut Statement,
    line: u64,
    fields: &Fields<'_>,
) -> Result<StatementLine> {
    let get = |k: &str| {
        fields
            .iter()
            .find(|(p, _, _)| p == k)
            .map(|(_, v, l)| (v.as_str(), *l))
    };
    let need = |k: &str| get(k).ok_or_else(|| ctx.error(line, format!("<STMTTRN> without <{k}>")));
    let currency = st.facts.currency.ok_or_else(|| {
        ctx.error(
            line,
            "<STMTTRN> before the statement's <CURDEF> (its currency)",
        )
    })?;
    let (trntype, tl) = need("TRNTYPE")?;
    let kind = match trntype.to_ascii_uppercase().as_str() {
        "FEE" | "SRVCHG" => LineKind::Fee,
        t if TRNTYPES.contains(&t) => LineKind::Payment,
        _ => {
            return Err(ctx.error(
                tl,
                format!(
                    "<TRNTYPE> {:?} is no OFX transaction type",
                    super::cut(trntype)
                ),
            ));
        }
    };
    let (posted, pl) = need("DTPOSTED")?;
    let (at, to, day, date_only) =
        datetime(ctx, posted).map_err(|e| ctx.error(pl, format!("<DTPOSTED>: {e}")))?;
    let (amount, al) = need("TRNAMT")?;
    let v = crate::money::parse_decimal(amount, NumberFormat::DOT)
        .map_err(|e| ctx.error(al, format!("<TRNAMT>: {e}")))?;
    let amount_minor =
        text::minor(v, currency).map_err(|e| ctx.error(al, format!("<TRNAMT>: {e}")))?;
    let (fitid, _) = need("FITID")?;
    let reference = ["REFNUM", "CHECKNUM", "MEMO", "NAME"]
        .iter()
        .find_map(|k| get(k).map(|(v, _)| v))
        .and_then(text::reference);
    let recipient = ["BANKACCTTO/ACCTID", "CCACCTTO/ACCTID"]
        .iter()
        .find_map(|k| get(k).map(|(v, _)| crate::normalize::account(v)))
        .unwrap_or_default();
    let facts = &mut st.facts;
    facts.entries += 1;
    facts.entries_sum = facts.entries_sum.saturating_add(amount_minor);
    facts.entries_gross = facts
        .entries_gross
        .saturating_add(amount_minor.saturating_abs());
    let origin = st
        .origin
        .get_or_insert_with(|| {
            super::Origin::new(
                ctx.source.clone(),
                ctx.file.clone(),
                facts.account.as_deref().map(Arc::from),
            )
        })
        .clone();
    Ok(StatementLine {
        origin,
        line_no: line,
        provider_txn_id: Some(fitid.into()),
        reference,
        recipient,
        amount_minor,
        currency,
        booked_at: at,
        booked_to: to,
        booked_day: date_only.then_some(day),
        kind,
        entry: None,
        batch: None,
        role: crate::model::Role::Provider,
        content_id: 0,
        original: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ParseContext {
        ParseContext {
            source: "ofx".into(),
            file: "f.ofx".into(),
            timezone: chrono_tz::Europe::Berlin,
            encoding: None,
        }
    }

    #[test]
    fn a_date_time_takes_its_bracket_else_the_source_zone() {
        let c = ctx();
        let utc = |s: &str| crate::timeparse::format_utc(datetime(&c, s).unwrap().0);
        assert_eq!(utc("20261126120000.000[-5:EST]"), "2026-11-26T17:00:00Z");
        assert_eq!(utc("20261126120000[+5.30:IST]"), "2026-11-26T06:30:00Z");
        assert_eq!(utc("20261126120000[0:GMT]"), "2026-11-26T12:00:00Z");
        // Without a bracket: the source's zone (Berlin, UTC+1 in November).
        assert_eq!(utc("202611261200"), "2026-11-26T11:00:00Z");
        let (_, _, day, date_only) = datetime(&c, "20261126").unwrap();
        assert!(date_only);
        assert_eq!(day.to_string(), "2026-11-26");
        for bad in [
            "2026112",
            "20261126120000[-5:EST",
            "20261131",
            "20261126126000",
            "20261126120000[-25]",
        ] {
            assert!(datetime(&c, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entities_decode_and_a_bare_ampersand_stays() {
        assert_eq!(
            entities("A &amp; B &#233;&#xE9; &lt;x&gt;").unwrap(),
            "A & B éé <x>"
        );
        assert_eq!(entities("AT&T").unwrap(), "AT&T");
        // Non-ASCII right after a bare `&` (SGML files write them) is kept, not cut.
        assert_eq!(entities("Caf&éééééé;").unwrap(), "Caf&éééééé;");
        assert_eq!(entities("&unknown;").unwrap(), "&unknown;");
    }

    #[test]
    fn values_may_be_closed_or_not_and_an_unopened_close_is_an_error() {
        let c = ctx();
        let t = tags(&c, "<OFX>\n<A>1\n<B>x &amp; y</B>\n</OFX>", 1).unwrap();
        assert_eq!(
            t,
            vec![
                Tag::Open("OFX", 1),
                Tag::Value("A", "1".into(), 2),
                Tag::Value("B", "x & y".into(), 3),
                Tag::Close("OFX", 4),
            ]
        );
        assert!(tags(&c, "<OFX><A", 1).is_err());
        let e = format!(
            "{:#}",
            parse(&c, b"OFXHEADER:100\n\n<OFX>\n</STMTRS>\n</OFX>\n").unwrap_err()
        );
        assert!(
            e.contains("f.ofx:4: </STMTRS> closes no open element (open: OFX)"),
            "{e}"
        );
    }

    #[test]
    fn a_malformed_transaction_names_its_line_and_tag() {
        let c = ctx();
        let file = |trn: &str| {
            format!(
                "OFXHEADER:100\nDATA:OFXSGML\n\n<OFX>\n<BANKMSGSRSV1><STMTTRNRS><STMTRS>\n<CURDEF>EUR\n\
                 <BANKACCTFROM><ACCTID>DE89370400440532013000</BANKACCTFROM>\n<BANKTRANLIST>\n\
                 <STMTTRN>\n{trn}\n</STMTTRN>\n</BANKTRANLIST></STMTRS></STMTTRNRS></BANKMSGSRSV1>\n</OFX>\n"
            )
        };
        let ok = parse(
            &c,
            file("<TRNTYPE>DEBIT<DTPOSTED>20261126<TRNAMT>-1.5<FITID>A").as_bytes(),
        )
        .unwrap();
        assert_eq!(ok.lines.len(), 1);
        assert_eq!(ok.lines[0].amount_minor, -150);
        assert_eq!(ok.lines[0].account(), Some("DE89370400440532013000"));
        for (trn, want) in [
            (
                "<TRNTYPE>DEBIT<DTPOSTED>20261126<TRNAMT>-1.5",
                "f.ofx:9: <STMTTRN> without <FITID>",
            ),
            (
                "<TRNTYPE>DEBIT<DTPOSTED>20261126<TRNAMT>-1.505<FITID>A",
                "f.ofx:10: <TRNAMT>: ",
            ),
            (
                "<TRNTYPE>GIFT<DTPOSTED>20261126<TRNAMT>-1<FITID>A",
                "f.ofx:10: <TRNTYPE> \"GIFT\" is no OFX transaction type",
            ),
            (
                "<TRNTYPE>DEBIT<DTPOSTED>2026-11-26<TRNAMT>-1<FITID>A",
                "f.ofx:10: <DTPOSTED>: \"2026-11-26\" is not an OFX date",
            ),
        ] {
            let e = format!("{:#}", parse(&c, file(trn).as_bytes()).unwrap_err());
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
    }
}
