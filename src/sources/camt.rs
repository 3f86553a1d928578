//! ISO 20022 camt.053 (bank-to-customer statement) and camt.054 (debit/credit notification),
//! any version (.001.02 to .001.08+), read with quick-xml into a small element tree.
//!
//! One line per booked entry (`Ntry`), or one line per transaction detail (`TxDtls`) when a
//! batch entry's details all carry an amount in the entry's currency (`TxDtls/Amt`, else
//! `AmtDtls/TxAmt/Amt`) and those amounts add up to the entry's amount; otherwise (details
//! without amounts, or in another currency only) the entry is one line. Amounts are signed by
//! `CdtDbtInd` (a detail's own, else the entry's): credit positive, debit negative. A reversal
//! (`RvslInd` true) keeps the sign of its own booking and has kind `REFUND`, as has a detail
//! with return information (`RtrInf`, an R-transaction).
//!
//! Entries whose status is not booked (`PDNG`, `INFO`) are not lines; they are listed in the
//! statement's [`StatementFacts::not_loaded`]. Balances `OPBD` (or `PRCD`) and `CLBD`, the
//! period `FrToDt` and `TxsSummry` totals are reported as facts.

use super::config::{KeyAt, keys_of};
use super::text::{self, day_start, line_of};
use super::{Balance, EntryRef, ParseContext, Parsed, StatementFacts, StatementLine};
use crate::model::{Format, LineKind};
use crate::money::NumberFormat;
use anyhow::Result;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use quick_xml::events::Event;
use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeTable;

// ---------------------------------------------------------------------------------------------
// Configuration: a camt source (053 or 054) takes no keys besides the common ones; the file
// declares its layout and its encoding.
// ---------------------------------------------------------------------------------------------

/// The keys only a camt source takes, as written: none.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCamt {}

/// The validated settings of a camt source: none.
#[derive(Debug, Clone, Default)]
pub struct CamtSettings {}

/// Every key of a camt source besides the common ones.
pub fn keys() -> Vec<&'static str> {
    keys_of::<RawCamt>().to_vec()
}

/// Reads the camt keys of a source (`table`: its keys besides the common ones).
pub fn settings(table: Spanned<DeTable<'_>>, at: &KeyAt<'_>) -> Result<CamtSettings> {
    let RawCamt {} = at.read(table)?;
    Ok(CamtSettings {})
}

/// A parsed element: local name, text content, children, 1-based line of its start tag.
#[derive(Debug, Default)]
struct El {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<El>,
    line: u64,
}

impl El {
    fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a El> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    fn path(&self, path: &[&str]) -> Option<&El> {
        let mut e = self;
        for p in path {
            e = e.child(p)?;
        }
        Some(e)
    }
    fn text_at(&self, path: &[&str]) -> Option<&str> {
        self.path(path)
            .map(|e| e.text.trim())
            .filter(|t| !t.is_empty())
    }
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn local(name: &str) -> String {
    let s = name;
    match s.rfind(':') {
        Some(p) => s[p + 1..].to_string(),
        None => s.to_string(),
    }
}

fn tree(ctx: &ParseContext, xml: &str) -> Result<El> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<El> = vec![El::default()];
    // Byte offset → line number by binary search over line starts (not a count per element).
    let starts: Vec<usize> = std::iter::once(0)
        .chain(xml.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let pos_line = |p: u64| starts.partition_point(|&s| s <= p as usize) as u64;
    loop {
        let at = reader.buffer_position();
        let ev = reader.read_event().map_err(|e| {
            ctx.error(
                pos_line(reader.error_position()),
                format!("not well-formed XML: {e}"),
            )
        })?;
        match ev {
            Event::Start(e) => {
                let el = element(ctx, &e, pos_line(at + 1))?;
                stack.push(el);
            }
            Event::Empty(e) => {
                let el = element(ctx, &e, pos_line(at + 1))?;
                if let Some(parent) = stack.last_mut() {
                    parent.children.push(el);
                }
            }
            Event::End(_) => {
                let el = stack
                    .pop()
                    .ok_or_else(|| ctx.error(pos_line(at), "unbalanced end tag"))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => return Err(ctx.error(pos_line(at), "unbalanced end tag")),
                }
            }
            Event::Text(t) => {
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let s: String = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => match &*r {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => {
                            return Err(
                                ctx.error(pos_line(at), format!("unknown entity &{other};"))
                            );
                        }
                    },
                };
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&s);
                }
            }
            Event::DocType(_) => {
                return Err(ctx.error(
                    pos_line(at),
                    "DOCTYPE declarations are not accepted in camt files",
                ));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(ctx.error(
            line_of(xml, xml.len()),
            "XML ends inside an element (truncated?)",
        ));
    }
    let root = stack.pop().unwrap_or_default();
    let mut elements = root.children.into_iter();
    let doc = elements
        .next()
        .ok_or_else(|| ctx.error(1, "no XML root element"))?;
    Ok(doc)
}

fn element(ctx: &ParseContext, e: &quick_xml::events::BytesStart<'_>, line: u64) -> Result<El> {
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| ctx.error(line, format!("bad attribute: {err}")))?;
        let v = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|err| ctx.error(line, format!("bad attribute value: {err}")))?;
        attrs.push((local(a.key.as_ref()), v.into_owned()));
    }
    Ok(El {
        name: local(e.name().as_ref()),
        attrs,
        line,
        ..El::default()
    })
}

fn decode_xml<'b>(ctx: &ParseContext, bytes: &'b [u8]) -> Result<std::borrow::Cow<'b, str>> {
    // The declaration names the encoding; UTF-8 when absent.
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    let declared = head
        .find("encoding=")
        .and_then(|p| {
            let rest = &head[p + 9..];
            let q = rest.chars().next()?;
            let rest = &rest[1..];
            rest.find(q).map(|e| rest[..e].to_string())
        })
        .filter(|_| head.trim_start_matches('\u{feff}').starts_with("<?xml"));
    let mut c = ctx.clone();
    c.encoding = match declared.as_deref().map(str::trim) {
        None => None,
        Some(label) => {
            let enc = encoding_rs::Encoding::for_label(label.as_bytes())
                .ok_or_else(|| ctx.error(1, format!("unknown XML encoding {label:?}")))?;
            (enc != encoding_rs::UTF_8).then_some(super::TextEncoding::Whatwg(enc))
        }
    };
    text::decode(&c, bytes)
}

fn dec(ctx: &ParseContext, el: &El, what: &str) -> Result<rust_decimal::Decimal> {
    crate::money::parse_decimal(el.text.trim(), NumberFormat::DOT)
        .map_err(|e| ctx.error(el.line, format!("{what}: {e}")))
}

/// An `Amt`-like element with its `Ccy` attribute, in minor units.
fn money(ctx: &ParseContext, el: &El, what: &str) -> Result<(i64, &'static str)> {
    let ccy = el
        .attr("Ccy")
        .ok_or_else(|| ctx.error(el.line, format!("{what}: amount without a Ccy attribute")))?;
    let (code, _) = text::currency(ccy).map_err(|e| ctx.error(el.line, format!("{what}: {e}")))?;
    let v = dec(ctx, el, what)?;
    if v.is_sign_negative() {
        return Err(ctx.error(
            el.line,
            format!(
                "{what}: negative amount (camt amounts are unsigned; CdtDbtInd gives the direction)"
            ),
        ));
    }
    let m = text::minor(v, code).map_err(|e| ctx.error(el.line, format!("{what}: {e}")))?;
    Ok((m, code))
}

fn sign(ctx: &ParseContext, el: Option<&El>, what: &str, at: u64) -> Result<i64> {
    match el.map(|e| e.text.trim()) {
        Some("CRDT") => Ok(1),
        Some("DBIT") => Ok(-1),
        Some(other) => Err(ctx.error(
            el.map_or(at, |e| e.line),
            format!("{what}: CdtDbtInd {other:?} is not CRDT or DBIT"),
        )),
        None => Err(ctx.error(at, format!("{what}: no CdtDbtInd"))),
    }
}

/// `Dt` or `DtTm` inside `el` → (UTC micros, local date).
fn date_of(ctx: &ParseContext, el: &El, what: &str) -> Result<Option<Booking>> {
    if let Some(d) = el.child("Dt") {
        let t = d.text.trim();
        // xs:date may carry a zone (`2017-04-01+02:00`, `…Z`): the day is what counts.
        let day = t
            .get(..10)
            .filter(|_| t.len() == 10 || t[10..].starts_with(['+', '-', 'Z']))
            .unwrap_or(t);
        let date = NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|e| ctx.error(d.line, format!("{what}: date {t:?}: {e}")))?;
        return Ok(Some(Booking {
            at: day_start(ctx, date),
            to: super::text::day_end(ctx, date),
            day: date,
            date_only: true,
        }));
    }
    if let Some(d) = el.child("DtTm") {
        return datetime(ctx, d, what).map(|(at, day)| {
            Some(Booking {
                at,
                to: at,
                day,
                date_only: false,
            })
        });
    }
    Ok(None)
}

/// When an entry was booked: an instant (`DtTm`), or a whole day (`Dt`).
#[derive(Debug, Clone, Copy)]
struct Booking {
    at: i64,
    to: i64,
    day: NaiveDate,
    date_only: bool,
}

fn datetime(ctx: &ParseContext, d: &El, what: &str) -> Result<(i64, NaiveDate)> {
    let t = d.text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok((dt.with_timezone(&Utc).timestamp_micros(), dt.date_naive()));
    }
    let naive = NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f")
        .map_err(|e| ctx.error(d.line, format!("{what}: date-time {t:?}: {e}")))?;
    let micros = crate::timeparse::local_to_utc(naive, ctx.timezone)
        .map_err(|e| ctx.error(d.line, format!("{what}: {e}")))?;
    Ok((micros, naive.date()))
}

fn account_of(acct: Option<&El>) -> Option<String> {
    let id = acct?.child("Id")?;
    id.text_at(&["IBAN"])
        .or_else(|| id.text_at(&["Othr", "Id"]))
        .map(str::to_string)
}

/// Parses camt.053 / camt.054 bytes.
pub fn parse(ctx: &ParseContext, bytes: &[u8], format: Format) -> Result<Parsed> {
    let xml = decode_xml(ctx, bytes)?;
    let doc = tree(ctx, &xml)?;
    if doc.name != "Document" {
        return Err(ctx.error(
            doc.line,
            format!("root element is <{}>, not <Document>", doc.name),
        ));
    }
    let ns = doc.attr("xmlns").unwrap_or("");
    let (msg_name, stmt_name, want) = match format {
        Format::Camt054 => ("BkToCstmrDbtCdtNtfctn", "Ntfctn", "camt.054"),
        _ => ("BkToCstmrStmt", "Stmt", "camt.053"),
    };
    let Some(msg) = doc.child(msg_name) else {
        let found = doc
            .children
            .first()
            .map(|c| c.name.as_str())
            .unwrap_or("nothing");
        return Err(ctx.error(
            doc.line,
            format!("<Document> holds <{found}>, not <{msg_name}> (hint: is this a {want} file? namespace {ns:?})"),
        ));
    };
    if !ns.is_empty() && !ns.contains(want) {
        return Err(ctx.error(doc.line, format!("namespace {ns:?} is not {want}")));
    }
    let mut parsed = Parsed::default();
    let mut entry_no = 0u32;
    let mut statements = 0;
    for st in msg.all(stmt_name) {
        statements += 1;
        statement(ctx, st, msg.child("GrpHdr"), &mut entry_no, &mut parsed)?;
    }
    if statements == 0 {
        return Err(ctx.error(msg.line, format!("<{msg_name}> holds no <{stmt_name}>")));
    }
    Ok(parsed)
}

fn statement(
    ctx: &ParseContext,
    st: &El,
    header: Option<&El>,
    entry_no: &mut u32,
    parsed: &mut Parsed,
) -> Result<()> {
    let mut facts = StatementFacts::new(&ctx.file, format!("line {}", st.line));
    facts.statement_id = st.text_at(&["Id"]).map(str::to_string);
    facts.account = account_of(st.child("Acct"));
    let acct_ccy = match st.text_at(&["Acct", "Ccy"]) {
        Some(c) => Some(
            text::currency(c)
                .map_err(|e| ctx.error(st.line, format!("Acct/Ccy: {e}")))?
                .0,
        ),
        None => None,
    };
    if let Some(p) = st.child("FrToDt") {
        if let Some(f) = p.child("FrDtTm") {
            facts.from = Some(datetime(ctx, f, "FrToDt/FrDtTm")?.1);
        }
        if let Some(t) = p.child("ToDtTm") {
            facts.to = Some(datetime(ctx, t, "FrToDt/ToDtTm")?.1);
        }
    }
    for bal in st.all("Bal") {
        let code = bal
            .text_at(&["Tp", "CdOrPrtry", "Cd"])
            .or_else(|| bal.text_at(&["Tp", "CdOrPrtry", "Prtry"]))
            .unwrap_or("");
        let amt = bal
            .child("Amt")
            .ok_or_else(|| ctx.error(bal.line, "Bal without Amt"))?;
        let (m, ccy) = money(ctx, amt, "Bal/Amt")?;
        // A balance without CdtDbtInd (seen in Lithuanian exports) is taken as a credit; the
        // balance chain check confirms or refutes that.
        let s = match bal.child("CdtDbtInd") {
            None => 1,
            Some(c) => sign(ctx, Some(c), "Bal", bal.line)?,
        };
        let date = match bal.child("Dt") {
            Some(d) => date_of(ctx, d, "Bal/Dt")?.map(|x| x.day),
            None => None,
        };
        let b = Balance {
            amount_minor: s * m,
            currency: ccy,
            date,
        };
        match code {
            "OPBD" => facts.opening = Some(b),
            "PRCD" if facts.opening.is_none() => facts.opening = Some(b),
            "CLBD" => facts.closing = Some(b),
            _ => {}
        }
    }
    if let Some(s) = st.child("TxsSummry") {
        if let Some(n) = s.text_at(&["TtlNtries", "NbOfNtries"]) {
            facts.declared_entries = Some(
                n.parse()
                    .map_err(|_| ctx.error(s.line, format!("TxsSummry NbOfNtries {n:?}")))?,
            );
        }
        let cur = acct_ccy
            .or(facts.opening.map(|b| b.currency))
            .unwrap_or("EUR");
        if let Some(sum) = s.path(&["TtlNtries", "Sum"]) {
            let v = dec(ctx, sum, "TtlNtries/Sum")?;
            facts.declared_gross = Some(
                text::minor(v, cur)
                    .map_err(|e| ctx.error(sum.line, format!("TtlNtries/Sum: {e}")))?,
            );
        }
        if let Some(net) = s.path(&["TtlNtries", "TtlNetNtry"]) {
            let amt = net
                .child("Amt")
                .ok_or_else(|| ctx.error(net.line, "TtlNetNtry without Amt"))?;
            let v = dec(ctx, amt, "TtlNetNtry/Amt")?;
            let cur = acct_ccy
                .or(facts.opening.map(|b| b.currency))
                .unwrap_or("EUR");
            let m =
                text::minor(v, cur).map_err(|e| ctx.error(amt.line, format!("TtlNetNtry: {e}")))?;
            let s = sign(ctx, net.child("CdtDbtInd"), "TtlNetNtry", net.line)?;
            facts.declared_net = Some(s * m);
        }
    }
    let origin = super::Origin::new(
        ctx.source.clone(),
        ctx.file.clone(),
        facts.account.as_deref().map(Arc::from),
    );
    let stmt_currency = acct_ccy
        .or(facts.opening.map(|b| b.currency))
        .or(facts.closing.map(|b| b.currency));
    let mut entry_currency: Option<&'static str> = None;
    let one_day = |a: Option<NaiveDate>, b: Option<NaiveDate>| match (a, b) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    };
    let created = |el: Option<&El>| -> Result<Option<NaiveDate>> {
        match el.and_then(|e| e.child("CreDtTm")) {
            Some(c) => Ok(Some(datetime(ctx, c, "CreDtTm")?.1)),
            None => Ok(None),
        }
    };
    let fallback_day = match one_day(facts.from, facts.to).or(one_day(
        facts.opening.and_then(|b| b.date),
        facts.closing.and_then(|b| b.date),
    )) {
        Some(d) => Some(d),
        None => match created(Some(st))? {
            Some(d) => Some(d),
            None => created(header)?,
        },
    };
    for ntry in st.all("Ntry") {
        *entry_no += 1;
        let n = *entry_no;
        let what = format!("entry {n}");
        let status = ntry
            .text_at(&["Sts", "Cd"])
            .or_else(|| ntry.text_at(&["Sts"]))
            .unwrap_or("BOOK");
        let amt_el = ntry
            .child("Amt")
            .ok_or_else(|| ctx.error(ntry.line, format!("{what}: no Amt")))?;
        let (amount, ccy) = money(ctx, amt_el, &what)?;
        let s = sign(ctx, ntry.child("CdtDbtInd"), &what, ntry.line)?;
        if status != "BOOK" {
            facts.not_loaded.push(format!(
                "entry {n} (line {}) has status {status}",
                ntry.line
            ));
            continue;
        }
        let reversal = match ntry.text_at(&["RvslInd"]) {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                return Err(ctx.error(
                    ntry.line,
                    format!("{what}: RvslInd {other:?} is not true/false"),
                ));
            }
        };
        let booked = match ntry.child("BookgDt") {
            Some(b) => date_of(ctx, b, "BookgDt")?,
            None => None,
        };
        let booked = match booked {
            Some(b) => Some(b),
            None => match ntry.child("ValDt") {
                Some(v) => date_of(ctx, v, "ValDt")?,
                None => None,
            },
        };
        // Entries without dates (Lithuanian exports, minimal notifications): the day of a
        // one-day statement period, else of one-day balances, else the day the statement was
        // created.
        let booked = match booked.or(fallback_day.map(|d| Booking {
            at: day_start(ctx, d),
            to: super::text::day_end(ctx, d),
            day: d,
            date_only: true,
        })) {
            Some(b) => b,
            None => {
                return Err(ctx.error(
                    ntry.line,
                    format!("{what}: no BookgDt or ValDt, and the statement names no single day"),
                ));
            }
        };
        let signed = s * amount;
        facts.entries += 1;
        facts.entries_gross += amount;
        if entry_currency.is_none_or(|c| c == ccy) {
            facts.entries_sum += signed;
            entry_currency = Some(ccy);
        } else {
            return Err(ctx.error(
                ntry.line,
                format!(
                    "{what}: currency {ccy} differs from earlier entries ({})",
                    entry_currency.unwrap_or("")
                ),
            ));
        }
        facts.from = Some(facts.from.map_or(booked.day, |d| d.min(booked.day)));
        facts.to = Some(facts.to.map_or(booked.day, |d| d.max(booked.day)));
        let entry_ref = ntry
            .text_at(&["AcctSvcrRef"])
            .or_else(|| ntry.text_at(&["NtryRef"]));
        let details: Vec<&El> = ntry.all("NtryDtls").flat_map(|d| d.all("TxDtls")).collect();
        let kind = if reversal {
            LineKind::Refund
        } else {
            LineKind::Payment
        };
        let detail_refs: Vec<&str> = details
            .iter()
            .filter_map(|d| d.text_at(&["Refs", "AcctSvcrRef"]))
            .collect();
        let unique_refs: Vec<&str> = detail_refs
            .iter()
            .copied()
            .filter(|r| detail_refs.iter().filter(|x| *x == r).count() == 1)
            .collect();
        let make = |detail: Option<(u32, &El)>, amount_minor: i64, line: u64| -> StatementLine {
            let tx = detail.map(|d| d.1);
            let refs = tx.and_then(|t| t.child("Refs"));
            let pick = |k: &str| {
                refs.and_then(|r| r.text_at(&[k]))
                    .filter(|v| !v.eq_ignore_ascii_case("NOTPROVIDED"))
            };
            let txn_id = match detail {
                // A detail's own reference, when it tells the details apart.
                Some((i, _)) => pick("AcctSvcrRef")
                    .filter(|r| details.len() == 1 || unique_refs.contains(r))
                    .map(str::to_string)
                    .or_else(|| {
                        entry_ref.map(|r| {
                            if details.len() > 1 {
                                format!("{r}/{i}")
                            } else {
                                r.to_string()
                            }
                        })
                    }),
                None => entry_ref.map(str::to_string),
            }
            .or_else(|| pick("TxId").or_else(|| pick("UETR")).map(str::to_string));
            let remittance = tx.and_then(|t| t.child("RmtInf")).and_then(|r| {
                r.text_at(&["Strd", "CdtrRefInf", "Ref"])
                    .map(str::to_string)
                    .or_else(|| {
                        let u: Vec<&str> = r.all("Ustrd").map(|u| u.text.trim()).collect();
                        (!u.is_empty()).then(|| u.join(" "))
                    })
            });
            let reference = pick("EndToEndId")
                .map(str::to_string)
                .or(remittance)
                .or_else(|| ntry.text_at(&["AddtlNtryInf"]).map(str::to_string))
                .and_then(|r| text::reference(&r));
            // The counterparty: the creditor for money out, the debtor for money in.
            let parties = tx.and_then(|t| t.child("RltdPties"));
            let counter = parties.and_then(|p| {
                if amount_minor < 0 {
                    account_of(p.child("CdtrAcct"))
                } else {
                    account_of(p.child("DbtrAcct"))
                }
            });
            StatementLine {
                origin: origin.clone(),
                line_no: line,
                provider_txn_id: txn_id.map(Into::into),
                reference,
                recipient: counter
                    .map(|a| crate::normalize::account(&a))
                    .unwrap_or_default(),
                amount_minor,
                currency: ccy,
                booked_at: booked.at,
                booked_to: booked.to,
                booked_day: booked.date_only.then_some(booked.day),
                // A returned payment (R-transaction, `RtrInf`) is money coming back.
                kind: if tx.is_some_and(|t| t.child("RtrInf").is_some()) {
                    LineKind::Refund
                } else {
                    kind
                },
                entry: Some(EntryRef {
                    entry: n,
                    detail: detail.map(|d| d.0),
                }),
                batch: None,
                role: crate::model::Role::Provider,
                content_id: 0,
                original: None,
            }
        };
        // Split a batch into its details only when every detail has an amount in the
        // entry's currency and they add up to the entry.
        let mut split = Vec::new();
        if details.len() > 1 {
            for (i, d) in details.iter().enumerate() {
                let amt = [d.child("Amt"), d.path(&["AmtDtls", "TxAmt", "Amt"])]
                    .into_iter()
                    .flatten()
                    .find(|a| a.attr("Ccy").is_some_and(|c| c.eq_ignore_ascii_case(ccy)));
                let Some(amt) = amt else {
                    split.clear();
                    break;
                };
                let (m, _) = money(ctx, amt, &format!("{what}/detail {}", i + 1))?;
                let ds = match d.child("CdtDbtInd") {
                    Some(c) => sign(ctx, Some(c), &format!("{what}/detail {}", i + 1), d.line)?,
                    None => s,
                };
                split.push((i as u32 + 1, *d, ds * m));
            }
            if !split.is_empty() {
                let total: i64 = split.iter().map(|x| x.2).sum();
                if total != signed {
                    return Err(ctx.error(
                        ntry.line,
                        format!(
                            "{what}: its {} transaction details add up to {} but the entry books {} {ccy}",
                            split.len(),
                            crate::money::format_minor(total, ccy),
                            crate::money::format_minor(signed, ccy)
                        ),
                    ));
                }
            }
        }
        if split.is_empty() {
            let detail = (details.len() == 1).then(|| (1u32, details[0]));
            parsed.lines.push(make(detail, signed, ntry.line));
            if let Some(last) = parsed.lines.last_mut() {
                // A single detail describes the whole entry: keep the entry's position.
                last.entry = Some(EntryRef {
                    entry: n,
                    detail: None,
                });
            }
        } else {
            for (i, d, m) in split {
                parsed.lines.push(make(Some((i, d)), m, d.line));
            }
        }
    }
    facts.currency = stmt_currency.or(entry_currency);
    parsed.facts.push(facts);
    Ok(())
}
