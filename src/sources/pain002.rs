//! ISO 20022 pain.002 customer payment status reports (`CstmrPmtStsRpt`, versions .001.03 to
//! .001.10 and the national variants that keep its element names): the bank's answer to a
//! pain.001 we sent, read into [`PayoutStatus`] records.
//!
//! A record per status the file states:
//! - group level: `OrgnlGrpInfAndSts/GrpSts`, for every transaction of the original message
//!   (`OrgnlMsgId`) that has no status of its own;
//! - payment-information level: `OrgnlPmtInfAndSts/PmtInfSts`, for every transaction of that
//!   block (`OrgnlPmtInfId`) without a status of its own;
//! - transaction level: each `TxInfAndSts`, with `OrgnlEndToEndId`, `OrgnlInstrId`,
//!   `AcctSvcrRef`, `TxSts` (when it has none, the status of its payment information or group,
//!   and the record says so), the amount `OrgnlTxRef/Amt/InstdAmt` and the day
//!   `OrgnlTxRef/ReqdExctnDt`.
//!
//! Every level's `StsRsnInf` gives the reason (`Rsn/Cd`, else `Rsn/Prtry`) and the free text
//! (`AddtlInf`). Codes: `ACCP`, `ACSP`, `ACSC`, `ACTC`, `ACWC`, `ACCC`, `ACFC`, `ACIS`, `ACWP`
//! are accepted (not money); `PDNG` and `RCVD` pending; `RJCT` rejected (final); `PART` and
//! `PATC` (group or payment information only) partial. Any other code (`CANC` included) fails
//! the file with its line and element, rather than being guessed. Not read: `NbOfTxsPerSts`,
//! charges, the original transaction's parties and remittance information.

use super::payout::{Created, Level, PayoutFile, PayoutStatus, State};
use super::xml::{El, decode_xml, money, tree};
use super::{ParseContext, text};
use anyhow::Result;
use chrono::NaiveDate;
use std::sync::Arc;

/// What a status code means at `level`, or `None` for a code recon does not know there.
fn state_of(code: &str, level: Level) -> Option<State> {
    Some(match code {
        "ACCP" | "ACSP" | "ACSC" | "ACTC" | "ACWC" | "ACCC" | "ACFC" | "ACIS" | "ACWP" => {
            State::Accepted
        }
        "PDNG" | "RCVD" => State::Pending,
        "RJCT" => State::Rejected,
        "PART" | "PATC" if level != Level::Transaction => State::Partial,
        _ => return None,
    })
}

/// A status element's code and meaning, or the error naming it.
fn status(ctx: &ParseContext, el: &El, path: &str, level: Level) -> Result<(String, State)> {
    let code = el.text.trim().to_string();
    let state = state_of(&code, level).ok_or_else(|| {
        ctx.error(
            el.line,
            format!(
                "{path}/{}: status {:?} is not one recon reads at {} level (hint: ACCP, ACSP, ACSC, ACTC, ACWC, ACCC, ACFC, ACIS, ACWP, PDNG, RCVD, RJCT{})",
                el.name,
                super::cut(&code),
                level.as_str(),
                if level == Level::Transaction { "" } else { ", PART, PATC" }
            ),
        )
    })?;
    Ok((code, state))
}

/// The reason codes and free text of `el`'s `StsRsnInf` elements.
fn reasons(el: &El) -> (Option<String>, Option<String>) {
    let mut codes = Vec::new();
    let mut info = Vec::new();
    for r in el.all("StsRsnInf") {
        if let Some(c) = r
            .text_at(&["Rsn", "Cd"])
            .or_else(|| r.text_at(&["Rsn", "Prtry"]))
        {
            codes.push(c.to_string());
        }
        for a in r.all("AddtlInf") {
            let t = text::collapse(&a.text);
            if !t.is_empty() {
                info.push(t);
            }
        }
    }
    let join = |v: Vec<String>, sep: &str| (!v.is_empty()).then(|| v.join(sep));
    (join(codes, ","), join(info, " / "))
}

/// The day of an ISO date or date-time text (`2026-11-26`, `2026-11-26T10:00:00+01:00`): the
/// day as written.
fn day(ctx: &ParseContext, el: &El, path: &str) -> Result<NaiveDate> {
    let t = el.text.trim();
    t.get(..10)
        .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        .ok_or_else(|| {
            ctx.error(
                el.line,
                format!("{path}: {:?} is not an ISO date", super::cut(t)),
            )
        })
}

/// The creation date-time of `GrpHdr/CreDtTm` (ISO 8601: a date, a time with optional
/// fractions, and an optional `Z` or `±hh:mm`), or the error naming it.
fn creation(ctx: &ParseContext, el: &El) -> Result<Created> {
    let t = el.text.trim();
    let bad = || {
        ctx.error(
            el.line,
            format!(
                "GrpHdr/CreDtTm: {:?} is not an ISO date-time",
                super::cut(t)
            ),
        )
    };
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(Created {
            date: dt.naive_local().date(),
            time: Some(dt.naive_local().time()),
            offset: Some(*dt.offset()),
        });
    }
    let naive =
        chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").map_err(|_| bad())?;
    Ok(Created {
        date: naive.date(),
        time: Some(naive.time()),
        offset: None,
    })
}

/// Parses pain.002 bytes into status records; any problem fails the whole file with its line
/// and element path.
pub fn parse(file: &Arc<str>, bytes: &[u8]) -> Result<PayoutFile> {
    let ctx = ParseContext {
        source: Arc::from("pain002"),
        file: file.clone(),
        timezone: chrono_tz::UTC,
        encoding: None,
    };
    let ctx = &ctx;
    let xml = decode_xml(ctx, bytes)?;
    let doc = tree(ctx, &xml, |_, el| Some(el))?;
    if doc.name != "Document" {
        return Err(ctx.error(
            doc.line,
            format!("root element is <{}>, not <Document>", doc.name),
        ));
    }
    let ns = doc.attr("xmlns").unwrap_or("");
    if !ns.is_empty() && !ns.contains("pain.002") {
        return Err(ctx.error(doc.line, format!("namespace {ns:?} is not pain.002")));
    }
    let Some(rpt) = doc.child("CstmrPmtStsRpt") else {
        let found = doc.children.first().map_or("nothing", |c| c.name.as_str());
        return Err(ctx.error(
            doc.line,
            format!(
                "<Document> holds <{found}>, not <CstmrPmtStsRpt> (hint: is this a pain.002 file?)"
            ),
        ));
    };
    let (created, created_at) = match rpt.path(&["GrpHdr", "CreDtTm"]) {
        Some(c) => (
            Some(day(ctx, c, "GrpHdr/CreDtTm")?),
            Some(creation(ctx, c)?),
        ),
        None => (None, None),
    };
    let Some(grp) = rpt.child("OrgnlGrpInfAndSts") else {
        return Err(ctx.error(rpt.line, "CstmrPmtStsRpt: no OrgnlGrpInfAndSts"));
    };
    let msg_id = grp.text_at(&["OrgnlMsgId"]).map(str::to_string);
    if msg_id.is_none() {
        return Err(ctx.error(grp.line, "OrgnlGrpInfAndSts: no OrgnlMsgId"));
    }
    let mut out = PayoutFile {
        created: created_at,
        ..PayoutFile::default()
    };
    let group = match grp.child("GrpSts") {
        Some(s) => Some(status(ctx, s, "OrgnlGrpInfAndSts", Level::Group)?),
        None => None,
    };
    let group_reasons = reasons(grp);
    if let Some((code, state)) = &group {
        let mut r = PayoutStatus::new(
            file,
            grp.line,
            "OrgnlGrpInfAndSts".into(),
            Level::Group,
            code,
            *state,
        );
        r.original_message_id = msg_id.clone();
        (r.reason, r.additional_info) = group_reasons.clone();
        r.date = created;
        out.records.push(r);
    }
    // pain.002.001.02 and older put TxInfAndSts beside OrgnlPmtInfAndSts; .03 on nest them.
    if let Some(tx) = rpt.child("TxInfAndSts") {
        return Err(ctx.error(
            tx.line,
            "CstmrPmtStsRpt/TxInfAndSts outside OrgnlPmtInfAndSts: a pain.002 before version .001.03, which recon does not read",
        ));
    }
    for (i, pmt) in rpt.all("OrgnlPmtInfAndSts").enumerate() {
        let path = format!("OrgnlPmtInfAndSts[{}]", i + 1);
        let pmt_id = pmt.text_at(&["OrgnlPmtInfId"]).map(str::to_string);
        if pmt_id.is_none() {
            return Err(ctx.error(pmt.line, format!("{path}: no OrgnlPmtInfId")));
        }
        let own = match pmt.child("PmtInfSts") {
            Some(s) => Some(status(ctx, s, &path, Level::PaymentInformation)?),
            None => None,
        };
        let pmt_reasons = reasons(pmt);
        if let Some((code, state)) = &own {
            let mut r = PayoutStatus::new(
                file,
                pmt.line,
                path.clone(),
                Level::PaymentInformation,
                code,
                *state,
            );
            r.original_message_id = msg_id.clone();
            r.original_payment_information_id = pmt_id.clone();
            (r.reason, r.additional_info) = pmt_reasons.clone();
            r.date = created;
            out.records.push(r);
        }
        for (j, tx) in pmt.all("TxInfAndSts").enumerate() {
            let path = format!("{path}/TxInfAndSts[{}]", j + 1);
            let (code, state, inherited, (reason, info)) = match tx.child("TxSts") {
                Some(s) => {
                    let (c, st) = status(ctx, s, &path, Level::Transaction)?;
                    (c, st, None, reasons(tx))
                }
                None => {
                    let (from, (c, st), parent) = match (&own, &group) {
                        (Some(o), _) => (Level::PaymentInformation, o.clone(), &pmt_reasons),
                        (None, Some(g)) => (Level::Group, g.clone(), &group_reasons),
                        (None, None) => {
                            return Err(ctx.error(
                                tx.line,
                                format!("{path}: no TxSts, and neither PmtInfSts nor GrpSts gives the status it would take"),
                            ));
                        }
                    };
                    if st == State::Partial {
                        return Err(ctx.error(
                            tx.line,
                            format!("{path}: no TxSts, and its {} status is {c} (partial), which says nothing about this transaction", from.as_str()),
                        ));
                    }
                    let own = reasons(tx);
                    let r = if own.0.is_some() || own.1.is_some() {
                        own
                    } else {
                        parent.clone()
                    };
                    (c, st, Some(from), r)
                }
            };
            let e2e = tx.text_at(&["OrgnlEndToEndId"]).map(str::to_string);
            let instr = tx.text_at(&["OrgnlInstrId"]).map(str::to_string);
            if e2e.is_none() && instr.is_none() {
                return Err(ctx.error(
                    tx.line,
                    format!(
                        "{path}: neither OrgnlEndToEndId nor OrgnlInstrId names the transaction"
                    ),
                ));
            }
            let mut r = PayoutStatus::new(
                file,
                tx.line,
                path.clone(),
                Level::Transaction,
                &code,
                state,
            );
            r.inherited_from = inherited;
            r.original_message_id = msg_id.clone();
            r.original_payment_information_id = pmt_id.clone();
            r.original_end_to_end_id = e2e;
            r.original_instruction_id = instr;
            r.trace_number = tx.text_at(&["AcctSvcrRef"]).map(str::to_string);
            r.reason = reason;
            r.additional_info = info;
            if let Some(reference) = tx.child("OrgnlTxRef") {
                let amt = reference
                    .path(&["Amt", "InstdAmt"])
                    .or_else(|| reference.path(&["Amt", "EqvtAmt", "Amt"]));
                if let Some(a) = amt {
                    r.amount = Some(money(ctx, a, &format!("{path}/OrgnlTxRef/Amt"))?);
                }
                if let Some(d) = reference.child("ReqdExctnDt") {
                    let el = d.child("Dt").or_else(|| d.child("DtTm")).unwrap_or(d);
                    r.date = Some(day(ctx, el, &format!("{path}/OrgnlTxRef/ReqdExctnDt"))?);
                }
            }
            if r.date.is_none() {
                r.date = created;
            }
            out.records.push(r);
        }
    }
    if out.records.is_empty() {
        return Err(ctx.error(
            grp.line,
            "the report states no status: no GrpSts, PmtInfSts or TxInfAndSts",
        ));
    }
    Ok(out)
}
