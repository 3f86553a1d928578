//! ISO 20022 camt.053 (bank-to-customer statement), camt.054 (debit/credit notification) and
//! camt.052 (intraday account report: `BkToCstmrAcctRpt/Rpt`, otherwise the statement's
//! elements; its source never proves a day complete), any version (.001.02 to .001.08+), read with quick-xml one entry at a time: each `Ntry`
//! is a small element tree, read into lines and dropped when its end tag is read.
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

use super::keys::{KeyAt, keys_of};
use super::text::{self, day_start};
use super::xml::{El, dec, decode_xml, money, tree};
use super::{Balance, EntryRef, ParseContext, Parsed, StatementFacts, StatementLine};
use crate::model::{Format, LineKind};
use anyhow::Result;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
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

/// The element names of one camt message kind, and the namespace part that names it.
#[derive(Clone, Copy)]
struct Names {
    msg: &'static str,
    stmt: &'static str,
    want: &'static str,
}

/// Parses camt.053 / camt.054 bytes, one entry at a time (issue 41 point 2: the element tree
/// of a whole 300 MB file took 4.6 GiB): each `Ntry` of a statement becomes lines as soon as
/// its end tag is read and is then dropped, and so is each statement at its end. Memory holds
/// the text, the lines, a statement's header and one entry's elements. The result and the
/// errors are those of reading the whole tree first: an XML error anywhere in the file comes
/// before any problem of the statements, and the checks of the root come before both.
pub fn parse(ctx: &ParseContext, bytes: &[u8], format: Format) -> Result<Parsed> {
    let xml = decode_xml(ctx, bytes)?;
    let names = match format {
        Format::Camt054 => Names {
            msg: "BkToCstmrDbtCdtNtfctn",
            stmt: "Ntfctn",
            want: "camt.054",
        },
        Format::Camt052 => Names {
            msg: "BkToCstmrAcctRpt",
            stmt: "Rpt",
            want: "camt.052",
        },
        _ => Names {
            msg: "BkToCstmrStmt",
            stmt: "Stmt",
            want: "camt.053",
        },
    };
    let (msg_name, stmt_name, want) = (names.msg, names.stmt, names.want);
    let mut reading = Reading {
        ctx,
        names,
        parsed: Parsed::default(),
        entry_no: 0,
        statements: 0,
        open: None,
        failed: None,
        group_header_asked: false,
    };
    let doc = tree(ctx, &xml, |ancestors, el| reading.ended(ancestors, el))?;
    if doc.name != "Document" {
        return Err(ctx.error(
            doc.line,
            format!("root element is <{}>, not <Document>", doc.name),
        ));
    }
    let ns = doc.attr("xmlns").unwrap_or("");
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
    if let Some(e) = reading.failed {
        return Err(e);
    }
    if reading.statements == 0 {
        return Err(ctx.error(msg.line, format!("<{msg_name}> holds no <{stmt_name}>")));
    }
    Ok(reading.parsed)
}

/// The statements of a file while its XML is read: the lines and facts so far, the statement
/// whose entries are being read, and the first problem found.
struct Reading<'c> {
    ctx: &'c ParseContext,
    names: Names,
    parsed: Parsed,
    /// Entries seen in the file (numbered from 1 across its statements).
    entry_no: u32,
    /// Statements of the message seen.
    statements: u32,
    /// The statement whose header has been read and whose end has not.
    open: Option<Statement>,
    /// The first problem of the statements: reported once the XML is known to be whole and
    /// well-formed (nothing more is read into lines after it).
    failed: Option<anyhow::Error>,
    /// Whether a statement looked for the group header's `CreDtTm` before there was one.
    group_header_asked: bool,
}

impl Reading<'_> {
    /// Takes an element that just ended (see [`tree`]): the entries and statements of the
    /// message `parse` reads (the first `<msg>` of a root `<Document>`) are read here and
    /// dropped; everything else is given back to the tree.
    fn ended(&mut self, ancestors: &[El], el: El) -> Option<El> {
        let [holder, doc, msg, inner @ ..] = ancestors else {
            return Some(el);
        };
        if !holder.children.is_empty()
            || doc.name != "Document"
            || msg.name != self.names.msg
            || doc.children.iter().any(|c| c.name == self.names.msg)
        {
            return Some(el);
        }
        match inner {
            [st] if st.name == self.names.stmt && el.name == "Ntry" => {
                self.entry(doc, msg, st, &el);
                None
            }
            [] if el.name == self.names.stmt => {
                self.statement_end(doc, msg, &el);
                None
            }
            [] if el.name == "GrpHdr" => {
                self.group_header(msg, &el);
                Some(el)
            }
            _ => Some(el),
        }
    }

    /// Whether the statements are read at all: nothing failed yet, and the root's namespace
    /// names the message kind (else `parse` reports it, before any problem of theirs).
    fn reads(&self, doc: &El) -> bool {
        let ns = doc.attr("xmlns").unwrap_or("");
        self.failed.is_none() && (ns.is_empty() || ns.contains(self.names.want))
    }

    /// An entry of statement `st` (which holds what came before it, entries aside).
    fn entry(&mut self, doc: &El, msg: &El, st: &El, ntry: &El) {
        if !self.reads(doc) {
            return;
        }
        let ctx = self.ctx;
        let open = match self.open.take() {
            Some(open) => open,
            None => match Statement::begin(ctx, st, msg.child("GrpHdr")) {
                Ok(open) => {
                    self.group_header_asked |= open.head.asks_group_header;
                    open
                }
                Err(e) => {
                    self.failed = Some(e);
                    return;
                }
            },
        };
        self.entry_no += 1;
        let open = self.open.insert(open);
        if let Err(e) = open.entry(ctx, ntry, self.entry_no, &mut self.parsed) {
            self.failed = Some(e);
        }
    }

    /// The end of statement `st` (its entries already read and dropped).
    fn statement_end(&mut self, doc: &El, msg: &El, st: &El) {
        self.statements += 1;
        let open = self.open.take();
        if !self.reads(doc) {
            return;
        }
        let ctx = self.ctx;
        let group = msg.child("GrpHdr");
        let facts = match open {
            Some(open) => open.finish(ctx, st, group),
            None => Statement::begin(ctx, st, group).and_then(|open| {
                self.group_header_asked |= open.head.asks_group_header;
                open.finish(ctx, st, group)
            }),
        };
        match facts {
            Ok(facts) => self.parsed.facts.push(facts),
            Err(e) => self.failed = Some(e),
        }
    }

    /// A group header of the message. The schema puts it first; one after a statement that
    /// looked for its `CreDtTm` (the day of undated entries) would have changed what that
    /// statement read, so the file is refused rather than read differently.
    fn group_header(&mut self, msg: &El, el: &El) {
        if self.group_header_asked && msg.child("GrpHdr").is_none() && el.child("CreDtTm").is_some()
        {
            // Whatever failed after the statement asked may have failed for want of it.
            self.failed = Some(self.ctx.error(
                el.line,
                "<GrpHdr> comes after a statement whose entries without dates take its CreDtTm; camt puts <GrpHdr> before the statements",
            ));
        }
    }
}

/// What a statement says before its entries: its facts so far, its account's currency and
/// the day of its entries without dates.
struct Header {
    facts: StatementFacts,
    acct_ccy: Option<&'static str>,
    fallback_day: Option<NaiveDate>,
    /// Whether the day of undated entries was looked for in the group header, and there was
    /// none.
    asks_group_header: bool,
}

/// The elements of a statement that [`header`] reads (the schema puts them before the
/// entries).
const HEADER_ELEMENTS: [&str; 6] = ["Id", "CreDtTm", "FrToDt", "Acct", "Bal", "TxsSummry"];

/// Reads the header of statement `st`: id, account, period, balances, declared totals, and
/// the day of entries without dates (`group`: the message's `GrpHdr`).
fn header(ctx: &ParseContext, st: &El, group: Option<&El>) -> Result<Header> {
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
    let mut asks_group_header = false;
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
            None => {
                asks_group_header = group.is_none();
                created(group)?
            }
        },
    };
    Ok(Header {
        facts,
        acct_ccy,
        fallback_day,
        asks_group_header,
    })
}

/// A statement whose entries are being read: its header (read when its first entry arrived,
/// or at its end when it has none) and what its entries added.
struct Statement {
    head: Header,
    origin: Arc<super::Origin>,
    /// The statement element's children when the header was read (its entries are not kept).
    header_len: usize,
    /// Line of its first entry, when the header was read for one.
    first_entry: Option<u64>,
    /// The currency of its booked entries.
    entry_currency: Option<&'static str>,
    /// First and last booking day of its booked entries.
    days: Option<(NaiveDate, NaiveDate)>,
    /// Whether an entry without dates took the header's day.
    used_fallback: bool,
    /// Whether its entries made lines (they carry the header's account).
    made_lines: bool,
}

impl Statement {
    /// Reads the header of `st` as it is now (everything before its first entry).
    fn begin(ctx: &ParseContext, st: &El, group: Option<&El>) -> Result<Statement> {
        let head = header(ctx, st, group)?;
        let origin = super::Origin::new(
            ctx.source.clone(),
            ctx.file.clone(),
            head.facts.account.as_deref().map(Arc::from),
        );
        Ok(Statement {
            head,
            origin,
            header_len: st.children.len(),
            first_entry: None,
            entry_currency: None,
            days: None,
            used_fallback: false,
            made_lines: false,
        })
    }

    /// Reads entry `n` of the file into `parsed`'s lines and the statement's facts.
    fn entry(&mut self, ctx: &ParseContext, ntry: &El, n: u32, parsed: &mut Parsed) -> Result<()> {
        self.first_entry.get_or_insert(ntry.line);
        let Statement {
            head,
            origin,
            entry_currency,
            days,
            used_fallback,
            made_lines,
            ..
        } = self;
        let facts = &mut head.facts;
        let fallback_day = head.fallback_day;
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
            return Ok(());
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
        *used_fallback |= booked.is_none() && fallback_day.is_some();
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
        *made_lines = true;
        facts.entries += 1;
        facts.entries_gross += amount;
        if entry_currency.is_none_or(|c| c == ccy) {
            facts.entries_sum += signed;
            *entry_currency = Some(ccy);
        } else {
            return Err(ctx.error(
                ntry.line,
                format!(
                    "{what}: currency {ccy} differs from earlier entries ({})",
                    entry_currency.unwrap_or("")
                ),
            ));
        }
        *days = Some(match *days {
            None => (booked.day, booked.day),
            Some((a, b)) => (a.min(booked.day), b.max(booked.day)),
        });
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
        Ok(())
    }

    /// The statement's facts, once its end tag is read (`st`: the statement without its
    /// entries). A header element after the first entry (the schema does not allow it) is
    /// read with the others, as if it came first; when it would have changed the lines read
    /// before it (their account, the day of those without dates) the statement is refused.
    fn finish(self, ctx: &ParseContext, st: &El, group: Option<&El>) -> Result<StatementFacts> {
        let late = st.children[self.header_len.min(st.children.len())..]
            .iter()
            .find(|c| HEADER_ELEMENTS.contains(&c.name.as_str()));
        let (mut facts, acct_ccy) = match late {
            None => (self.head.facts, self.head.acct_ccy),
            Some(late) => {
                let head = header(ctx, st, group)?;
                if (self.made_lines && head.facts.account != self.head.facts.account)
                    || (self.used_fallback && head.fallback_day != self.head.fallback_day)
                {
                    return Err(ctx.error(
                        late.line,
                        format!(
                            "<{}> comes after the statement's first entry (line {}) and changes the account or the day of its entries; camt puts a statement's header before its entries",
                            late.name,
                            self.first_entry.unwrap_or(st.line)
                        ),
                    ));
                }
                let read = self.head.facts;
                let mut facts = head.facts;
                facts.entries = read.entries;
                facts.entries_sum = read.entries_sum;
                facts.entries_gross = read.entries_gross;
                facts.not_loaded = read.not_loaded;
                (facts, head.acct_ccy)
            }
        };
        if let Some((first, last)) = self.days {
            facts.from = Some(facts.from.map_or(first, |d| d.min(first)));
            facts.to = Some(facts.to.map_or(last, |d| d.max(last)));
        }
        let stmt_currency = acct_ccy
            .or(facts.opening.map(|b| b.currency))
            .or(facts.closing.map(|b| b.currency));
        facts.currency = stmt_currency.or(self.entry_currency);
        Ok(facts)
    }
}
