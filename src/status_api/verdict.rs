//! What a status answer proves about one payment, and how it combines with the statement
//! evidence of the same payment.
//!
//! An answer is evidence only if it is about *this* payment: the echoed payment id /
//! reference, the amount and the currency must equal the ledger's (a `not_found` answer need
//! not echo money the provider does not know, but money it does echo must be equal). Anything
//! else is not evidence and becomes a ticket saying why. A status answer never overrules a
//! statement line: when they disagree a human decides.

use super::config::{Meaning, StatusApiConfig};
use crate::ledger::{Payment, Status};
use crate::outcome::{Action, Outcome, ResultRow};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

use crate::sources::jsonl::raw_at;

/// What one payment's query yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An answer about this payment.
    Evidence {
        /// What the provider's status means.
        meaning: Meaning,
        /// The provider's status as written.
        status: String,
        /// The provider's id of the payment, when the answer has one.
        provider_id: Option<String>,
    },
    /// A 2xx answer that is not about this payment or cannot be read: a ticket of `outcome`.
    NotEvidence {
        /// AMBIGUOUS (another payment, unreadable), AMOUNT_MISMATCH or CURRENCY_MISMATCH.
        outcome: Outcome,
        /// Why.
        why: String,
    },
    /// No answer (timeouts, errors, the budget): nothing is proven, the payment waits.
    Unanswered {
        /// Why.
        why: String,
    },
}

impl Answer {
    /// The verdict's name in the query log.
    pub fn verdict(&self) -> &'static str {
        match self {
            Answer::Evidence { meaning, .. } => meaning.as_str(),
            Answer::NotEvidence { .. } => "not_evidence",
            Answer::Unanswered { .. } => "unanswered",
        }
    }
}

/// Judges a 2xx body of the status API about `p`. With `pointers.list` the answer is a list
/// of payouts: exactly one element is judged as the answer; an empty list is `empty_list`'s
/// meaning (not evidence without it); several are not a unique answer, so not evidence.
pub fn judge(cfg: &StatusApiConfig, p: &Payment, body: &[u8]) -> Answer {
    let bad = |why: String| Answer::NotEvidence {
        outcome: Outcome::Ambiguous,
        why,
    };
    let (text, json) = match parse(body) {
        Ok(parsed) => parsed,
        Err(why) => return bad(why),
    };
    let Some(list) = cfg.pointers.list.as_deref() else {
        return judge_at(cfg, p, text, &json, "");
    };
    let shown = if list.is_empty() { "the top" } else { list };
    match json.pointer(list) {
        Some(Value::Array(items)) => match (items.len(), cfg.empty_list) {
            (0, Some(meaning)) => Answer::Evidence {
                meaning,
                status: "[]".into(),
                provider_id: None,
            },
            (0, None) => bad(format!(
                "the list at {shown} is empty (hint: empty_list = \"not_found\" if the provider \
                 answers so for a payout it does not know)"
            )),
            (1, _) => judge_at(cfg, p, text, &json, &format!("{list}/0")),
            (n, _) => bad(format!(
                "the list at {shown} holds {n} payouts: not a unique answer"
            )),
        },
        _ => bad(format!("malformed body: no list at {shown}")),
    }
}

/// Judges one webhook event about `p`: the pointers apply to the event itself.
pub fn judge_event(cfg: &StatusApiConfig, p: &Payment, body: &[u8]) -> Answer {
    match parse(body) {
        Ok((text, json)) => judge_at(cfg, p, text, &json, ""),
        Err(why) => Answer::NotEvidence {
            outcome: Outcome::Ambiguous,
            why,
        },
    }
}

/// A body as text and JSON, or why it is malformed.
fn parse(body: &[u8]) -> Result<(&str, Value), String> {
    let text = std::str::from_utf8(body).map_err(|_| "malformed body: not UTF-8".to_string())?;
    let json = serde_json::from_str(text).map_err(|e| format!("malformed body: {e}"))?;
    Ok((text, json))
}

/// Judges the payout at `base` (a JSON pointer; empty: the whole body) of `json`, parsed from
/// `text`.
fn judge_at(cfg: &StatusApiConfig, p: &Payment, text: &str, json: &Value, base: &str) -> Answer {
    let bad = |outcome: Outcome, why: String| Answer::NotEvidence { outcome, why };
    let ptr = &cfg.pointers;
    let text_at = |pointer: &str| -> Option<String> {
        let pointer = format!("{base}{pointer}");
        match json.pointer(&pointer)? {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(_) => raw_at(text, &pointer).map(str::to_string),
            _ => None,
        }
    };
    let Some(status) = text_at(&ptr.status) else {
        return bad(
            Outcome::Ambiguous,
            format!("malformed body: no status at {}", ptr.status),
        );
    };
    let Some(&meaning) = cfg.statuses.get(&status) else {
        return bad(
            Outcome::Ambiguous,
            format!("provider status {status:?} is not listed in [status_api.statuses]"),
        );
    };
    // The echo: every configured id must be present and ours.
    for (what, pointer) in [
        ("payment id", &ptr.payment_id),
        ("reference", &ptr.reference),
    ] {
        let Some(pointer) = pointer else { continue };
        match text_at(pointer) {
            None => {
                return bad(
                    Outcome::Ambiguous,
                    format!("the answer does not echo the {what} (nothing at {pointer})"),
                );
            }
            Some(v) if *v != *p.payment_id.text() => {
                return bad(
                    Outcome::Ambiguous,
                    format!("the answer is about {what} {v:?}, not this payment"),
                );
            }
            Some(_) => {}
        }
    }
    let provider_id = ptr.provider_payment_id.as_deref().and_then(text_at);
    if let (Some(theirs), Some(ours)) = (&provider_id, &p.provider_payment_id)
        && theirs != ours.as_str()
    {
        return bad(
            Outcome::Ambiguous,
            format!("the answer names provider id {theirs:?}, the ledger {ours:?}"),
        );
    }
    let money_optional = meaning == Meaning::NotFound;
    match text_at(&ptr.currency) {
        None if money_optional => {}
        None => {
            return bad(
                Outcome::Ambiguous,
                format!("malformed body: no currency at {}", ptr.currency),
            );
        }
        Some(c) if !c.eq_ignore_ascii_case(p.currency) => {
            return bad(
                Outcome::CurrencyMismatch,
                format!("ledger {} vs provider {c}", p.currency),
            );
        }
        Some(_) => {}
    }
    match text_at(&ptr.amount) {
        None if money_optional => {}
        None => {
            return bad(
                Outcome::Ambiguous,
                format!("malformed body: no amount at {}", ptr.amount),
            );
        }
        Some(a) => {
            let parsed = if cfg.amount_minor {
                a.parse::<i64>().map_err(|e| e.to_string())
            } else {
                crate::money::parse_minor(&a, crate::money::NumberFormat::DOT, p.currency)
                    .map_err(|e| e.to_string())
            };
            match parsed {
                Err(e) => {
                    return bad(
                        Outcome::Ambiguous,
                        format!("malformed body: amount {a:?}: {e}"),
                    );
                }
                Ok(m) if m != p.amount_minor => {
                    return bad(
                        Outcome::AmountMismatch,
                        format!(
                            "ledger {} vs provider {} {}",
                            crate::money::format_minor(p.amount_minor, p.currency),
                            crate::money::format_minor(m, p.currency),
                            p.currency
                        ),
                    );
                }
                Ok(_) => {}
            }
        }
    }
    Answer::Evidence {
        meaning,
        status,
        provider_id,
    }
}

/// The row of payment `p` once its answer is taken into account. `row` is what the statement
/// evidence says; `horizon_closed` whether no statement evidence can still arrive by time;
/// `decided` the status recon or a reviewer moved the payment to earlier and who (`recon in
/// run R`, `reviewer alice`), when this run judges that decision (an answer that contradicts it
/// is a ticket naming both claims, DESIGN.md rules 8 and 14); `from` where the answer came
/// from when it was a stored webhook event (file and line, event time).
#[allow(clippy::too_many_arguments)]
pub fn overlay(
    row: ResultRow,
    p: &Payment,
    answer: &Answer,
    cfg: &StatusApiConfig,
    horizon_closed: bool,
    rule: &Arc<str>,
    decided: Option<(Status, &str)>,
    from: Option<&str>,
) -> ResultRow {
    let statement_based = matches!(
        row.outcome,
        Outcome::AwaitingEvidence | Outcome::ResolvedFailed | Outcome::ResolvedSucceeded
    );
    let name = &cfg.name;
    let ticket = |mut row: ResultRow, outcome: Outcome, detail: String| {
        row.outcome = outcome;
        row.action = Action::Ticket;
        row.rule = rule.clone();
        row.detail = Cow::Owned(detail);
        row
    };
    let note = |mut row: ResultRow, text: String| {
        row.detail = if row.detail.is_empty() {
            Cow::Owned(text)
        } else {
            Cow::Owned(format!("{}; {text}", row.detail))
        };
        row
    };
    match answer {
        Answer::Unanswered { why } => note(row, format!("status_api {name}: no answer ({why})")),
        Answer::NotEvidence { outcome, why } if statement_based => ticket(
            row,
            *outcome,
            format!("status_api {name}: the answer is not evidence: {why}"),
        ),
        Answer::NotEvidence { why, .. } => {
            note(row, format!("status_api {name}: not evidence: {why}"))
        }
        // A payment neither unresolved nor decided earlier by recon or a reviewer (asked for
        // the payout id it claims, as a confirmation's look-alike): its answer moves nothing.
        Answer::Evidence { meaning, .. }
            if decided.is_none() && !matches!(p.status, Status::Unknown | Status::Submitting) =>
        {
            note(
                row,
                format!(
                    "status_api {name}: the provider says {} about this {} payment",
                    meaning.as_str(),
                    p.status.as_str()
                ),
            )
        }
        Answer::Evidence {
            meaning, status, ..
        } => {
            let says = match from {
                Some(at) => format!(
                    "status_api {name}: {at} says {status:?} ({})",
                    meaning.as_str()
                ),
                None => format!("status_api {name} says {status:?} ({})", meaning.as_str()),
            };
            // No statement line shows the money either way (candidates of an undecided row
            // show nothing): the answer alone speaks against what recon or a reviewer decided
            // earlier.
            let no_line = row.lines.is_empty() || row.outcome == Outcome::Ambiguous;
            match (decided, meaning) {
                (Some((Status::Succeeded, who)), Meaning::Failed | Meaning::NotFound)
                    if no_line =>
                {
                    return ticket(
                        row,
                        Outcome::Contradicted,
                        format!(
                            "{who} decided this payment SUCCEEDED, but {says} and no statement \
                             line shows the money: the two claims disagree, and the ledger may \
                             say paid for money that never left"
                        ),
                    );
                }
                (Some((Status::Failed, who)), Meaning::Succeeded) if no_line => {
                    return ticket(
                        row,
                        Outcome::FailedButPaid,
                        format!(
                            "{who} decided this payment FAILED, but {says}: a retry since then \
                             may have paid twice"
                        ),
                    );
                }
                _ => {}
            }
            match (row.outcome, meaning) {
                (Outcome::AwaitingEvidence, Meaning::Succeeded) => ResultRow {
                    outcome: Outcome::ResolvedSucceeded,
                    action: Action::Transition(Status::Succeeded),
                    rule: rule.clone(),
                    detail: Cow::Owned(format!("{} and {says}", p.status.as_str())),
                    ..row
                },
                (Outcome::AwaitingEvidence, Meaning::Failed) if cfg.failed_is_final => ResultRow {
                    outcome: Outcome::ResolvedFailed,
                    action: Action::Transition(Status::Failed),
                    rule: rule.clone(),
                    detail: Cow::Owned(format!("{says}, declared final")),
                    ..row
                },
                (Outcome::AwaitingEvidence, Meaning::NotFound)
                    if cfg.not_found_is_final && horizon_closed =>
                {
                    ResultRow {
                        outcome: Outcome::ResolvedFailed,
                        action: Action::Transition(Status::Failed),
                        rule: rule.clone(),
                        detail: Cow::Owned(format!(
                            "{says}, declared final, and the evidence horizon has closed"
                        )),
                        ..row
                    }
                }
                (Outcome::AwaitingEvidence, Meaning::NotFound) if cfg.not_found_is_final => {
                    note(row, format!("{says}; the evidence horizon is still open"))
                }
                (Outcome::AwaitingEvidence, _) => note(row, format!("{says}, not final")),
                // A line shows the payout (linked by recon's rules, or confirmed by a reviewer),
                // and the provider says it failed: two claims about one payout disagree.
                (
                    Outcome::ResolvedSucceeded
                    | Outcome::Matched
                    | Outcome::AmountMismatch
                    | Outcome::CurrencyMismatch
                    | Outcome::ProposedMatch,
                    Meaning::Failed | Meaning::NotFound,
                ) => ticket(
                    row,
                    Outcome::Contradicted,
                    format!(
                        "a statement line shows this payment paid, but {says}: the two claims \
                         disagree, nothing is resolved on either"
                    ),
                ),
                (Outcome::ResolvedFailed, Meaning::Succeeded | Meaning::Pending) => ticket(
                    row,
                    Outcome::Ambiguous,
                    format!(
                        "no statement line in a complete window, but {says}: the evidence contradicts itself"
                    ),
                ),
                _ => note(row, says),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> StatusApiConfig {
        let text = format!(
            "name = \"t\"\nurl = \"https://x/{{payment_id}}\"\n{extra}\n[pointers]\nstatus = \"/s\"\n\
             payment_id = \"/p\"\nprovider_payment_id = \"/id\"\namount = \"/a\"\ncurrency = \"/c\"\n\
             [statuses]\nsucceeded = [\"ok\"]\nnot_found = [\"nf\"]\n"
        );
        let raw: super::super::config::RawStatusApi = toml::from_str(&text).expect("block");
        raw.validate(std::path::Path::new("t.toml"), 0)
            .expect("valid")
    }

    fn payment(provider_id: Option<&str>) -> Payment {
        Payment {
            payment_id: "P-1".into(),
            recipient: "R".into(),
            amount_minor: 1005,
            currency: "EUR",
            current_status: Status::Unknown,
            status: Status::Unknown,
            attempt_id: None,
            provider_payment_id: provider_id.map(Into::into),
            started_at: Some(0),
            first_started_at: Some(0),
            created_at: 0,
            followup: None,
            recon: None,
            human: None,
            partition: crate::partition::NONE,
        }
    }

    fn verdict(c: &StatusApiConfig, p: &Payment, body: &str) -> (String, String) {
        match judge(c, p, body.as_bytes()) {
            Answer::Evidence { meaning, .. } => (meaning.as_str().into(), String::new()),
            Answer::NotEvidence { outcome, why } => (outcome.as_str().into(), why),
            Answer::Unanswered { why } => ("unanswered".into(), why),
        }
    }

    #[test]
    fn an_answer_is_evidence_only_about_this_payment_and_its_exact_money() {
        let c = cfg("");
        let p = payment(Some("psp-1"));
        let v = |body: &str| verdict(&c, &p, body).0;
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","id":"psp-1","a":10.05,"c":"EUR"}"#),
            "succeeded"
        );
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","a":"10.050","c":"eur"}"#),
            "succeeded"
        );
        // 10.05 written with more digits than f64 keeps apart from it.
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","a":10.0500000000000000001,"c":"EUR"}"#),
            "AMBIGUOUS"
        );
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","a":10.06,"c":"EUR"}"#),
            "AMOUNT_MISMATCH"
        );
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","id":"psp-2","a":10.05,"c":"EUR"}"#),
            "AMBIGUOUS"
        );
        assert_eq!(v(r#"{"s":"ok","a":10.05,"c":"EUR"}"#), "AMBIGUOUS");
        assert_eq!(v(r#"{"s":"ok","p":"P-1","a":10.05}"#), "AMBIGUOUS");
        assert_eq!(v(r#"{"s":"ok","p":"P-1","a":1e1,"c":"EUR"}"#), "AMBIGUOUS");
        assert_eq!(v(r#"[1,2]"#), "AMBIGUOUS");
        // not_found need not echo money, but echoed money must be ours.
        assert_eq!(v(r#"{"s":"nf","p":"P-1"}"#), "not_found");
        assert_eq!(
            v(r#"{"s":"nf","p":"P-1","a":"1.00","c":"EUR"}"#),
            "AMOUNT_MISMATCH"
        );
        let minor = cfg("amount_unit = \"minor\"");
        assert_eq!(
            verdict(&minor, &p, r#"{"s":"ok","p":"P-1","a":1005,"c":"EUR"}"#).0,
            "succeeded"
        );
        assert_eq!(
            verdict(&minor, &p, r#"{"s":"ok","p":"P-1","a":10.05,"c":"EUR"}"#).0,
            "AMBIGUOUS"
        );
    }

    /// A block whose answers are a list at `/data` (`empty_list` as given).
    fn list_cfg(empty_list: &str) -> StatusApiConfig {
        let text = format!(
            "name = \"t\"\nurl = \"https://x/payouts?reference={{reference}}\"\n{empty_list}\n\
             [pointers]\nlist = \"/data\"\nstatus = \"/s\"\nreference = \"/p\"\n\
             amount = \"/a\"\ncurrency = \"/c\"\n[statuses]\nsucceeded = [\"ok\"]\n"
        );
        let raw: super::super::config::RawStatusApi = toml::from_str(&text).expect("block");
        raw.validate(std::path::Path::new("t.toml"), 0)
            .expect("valid")
    }

    #[test]
    fn a_list_answer_is_its_one_element_empty_is_declared_and_several_are_no_answer() {
        let c = list_cfg("empty_list = \"not_found\"");
        let p = payment(None);
        let v = |body: &str| verdict(&c, &p, body);
        assert_eq!(v(r#"{"data":[]}"#).0, "not_found");
        assert_eq!(
            v(r#"{"data":[{"s":"ok","p":"P-1","a":"10.05","c":"EUR"}]}"#).0,
            "succeeded"
        );
        // The one element is judged as any answer: its echo and money must be ours.
        assert_eq!(
            v(r#"{"data":[{"s":"ok","p":"P-2","a":"10.05","c":"EUR"}]}"#).0,
            "AMBIGUOUS"
        );
        assert_eq!(
            v(r#"{"data":[{"s":"ok","p":"P-1","a":10.50,"c":"EUR"}]}"#).0,
            "AMOUNT_MISMATCH"
        );
        // Two payouts, even if one is ours: not a unique answer.
        let two = v(r#"{"data":[{"s":"ok","p":"P-1","a":"10.05","c":"EUR"},
                                {"s":"ok","p":"P-1","a":"10.05","c":"EUR"}]}"#);
        assert_eq!(two.0, "AMBIGUOUS");
        assert!(
            two.1.contains("2 payouts: not a unique answer"),
            "{}",
            two.1
        );
        assert_eq!(v(r#"{"data":{"s":"ok"}}"#).0, "AMBIGUOUS");
        assert_eq!(
            v(r#"{"s":"ok","p":"P-1","a":"10.05","c":"EUR"}"#).0,
            "AMBIGUOUS"
        );
        // Without empty_list an empty list proves nothing.
        let undeclared = list_cfg("");
        let (o, why) = verdict(&undeclared, &p, r#"{"data":[]}"#);
        assert_eq!(o, "AMBIGUOUS");
        assert!(why.contains("empty_list"), "{why}");
    }

    #[test]
    fn empty_list_needs_a_list_and_means_only_not_found() {
        let bad = |extra: &str, list: &str| {
            let text = format!(
                "name = \"t\"\nurl = \"https://x/{{payment_id}}\"\n{extra}\n[pointers]\n{list}\
                 status = \"/s\"\npayment_id = \"/p\"\namount = \"/a\"\ncurrency = \"/c\"\n\
                 [statuses]\nsucceeded = [\"ok\"]\n"
            );
            let raw: super::super::config::RawStatusApi = toml::from_str(&text).expect("block");
            format!(
                "{:#}",
                raw.validate(std::path::Path::new("t.toml"), 0)
                    .expect_err("invalid")
            )
        };
        let e = bad("empty_list = \"not_found\"", "");
        assert!(e.contains("key `empty_list`: needs pointers.list"), "{e}");
        let e = bad("empty_list = \"failed\"", "list = \"/data\"\n");
        assert!(e.contains("key `empty_list`: \"failed\""), "{e}");
        let e = bad("", "list = \"data\"\n");
        assert!(e.contains("key `pointers.list`"), "{e}");
    }

    #[test]
    fn raw_at_keeps_a_number_as_written() {
        let t = r#"{"a": {"x": [1, {"amount": 12.10}], "s": "q\"}"}, "amount": 1e2, "b~/c": 3}"#;
        assert_eq!(raw_at(t, "/a/x/1/amount"), Some("12.10"));
        assert_eq!(raw_at(t, "/amount"), Some("1e2"));
        assert_eq!(raw_at(t, "/b~0~1c"), Some("3"));
        assert_eq!(raw_at(t, "/a/s"), Some(r#""q\"}""#));
        assert_eq!(raw_at(t, "/a/x/2"), None);
        assert_eq!(raw_at(t, "/nope"), None);
        assert_eq!(raw_at("[]", "/0"), None);
    }
}
