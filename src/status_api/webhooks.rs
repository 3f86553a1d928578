//! Webhook events as evidence (issue 14 part 3): the provider's callbacks as the payment
//! service stored them (JSON lines in a file or a folder of `*.jsonl` files, or the rows of a
//! query on the job's database, `webhook_query`), read with the same
//! pointers and status mapping as the status API. Events may be duplicated and out of order:
//! per payment the latest event by the provider's event time wins, and it is validated as a
//! status answer is ([`super::verdict::judge`]). Different answers at the same latest time are
//! not evidence (a human decides).

use super::config::StatusApiConfig;
use super::verdict::{self, Answer};
use crate::ledger::Payment;
use crate::outcome::Outcome;
use crate::timeparse::Micros;
use anyhow::Result;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One stored event that names one of the payments asked about.
struct Event {
    time: Option<Micros>,
    at: String,
    text: String,
}

/// Payment index → the answer of its latest event, and which event that is (`webhook event
/// <file>:<line> at <event time>`, for the tickets that name it).
pub type Answers = Vec<(u32, Answer, String)>;

/// The files of `path`: itself, or a folder's `*.jsonl` in name order.
fn files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    crate::sources::file_or_folder(path, |p| p.extension().is_some_and(|x| x == "jsonl"))
}

/// The answer the latest webhook event gives each of `targets`, and warnings for summary.json
/// (lines that name no payment or are not JSON, a missing path). An event whose time is after
/// the run's `as_of` is not evidence yet: a re-run as of an earlier moment decides on what was
/// known then, as it does for statement lines. An event that gives one of `payouts` (payout
/// ids the night reads as a confirmed line's) to a loaded payment that is no target answers
/// for that payment too: it is a claim about the confirmed line (one payout, one payment).
pub async fn answers(
    cfg: &StatusApiConfig,
    db: &crate::db::Db,
    payments: &[Payment],
    targets: &[u32],
    as_of: Micros,
    payouts: &std::collections::HashSet<String>,
) -> Result<(Answers, Vec<String>)> {
    let mut warnings = Vec::new();
    // (where, text) of every stored event.
    let mut stored: Vec<(String, String)> = Vec::new();
    if let Some(path) = &cfg.webhook_path {
        match files(path) {
            Ok(list) => {
                for file in &list {
                    let text = std::fs::read_to_string(file).map_err(|e| {
                        crate::exit::fail(
                            crate::exit::Failure::Input,
                            format!("status_api {}: {}: {e}", cfg.name, file.display()),
                        )
                    })?;
                    for (n, line) in text.lines().enumerate() {
                        stored.push((format!("{}:{}", file.display(), n + 1), line.to_string()));
                    }
                }
            }
            Err(e) => warnings.push(format!(
                "status_api {}: webhook_path {}: {e}: no webhook events from files this run",
                cfg.name,
                path.display()
            )),
        }
    }
    if let Some(q) = &cfg.webhook_query {
        let rows = db.configured_texts(q).await.map_err(|e| {
            crate::exit::fail(
                crate::exit::Failure::Database,
                format!(
                    "status_api {}: key `webhook_query`: {e} (hint: one text column, the event's JSON)",
                    cfg.name,
                ),
            )
        })?;
        for (n, r) in rows.into_iter().enumerate() {
            stored.push((
                format!("webhook_query row {}", n + 1),
                r.unwrap_or_default(),
            ));
        }
    }
    let by_id: HashMap<String, u32> = targets
        .iter()
        .map(|&i| (payments[i as usize].payment_id.to_string(), i))
        .collect();
    let ptr = &cfg.pointers;
    let mut events: HashMap<u32, Vec<Event>> = HashMap::new();
    let mut unreadable: Vec<String> = Vec::new();
    // Events after the as-of (a re-run of an earlier moment), kept per payment: not evidence
    // for the run, but what recon has since been told.
    let mut later = 0usize;
    let mut later_events: HashMap<u32, Vec<Event>> = HashMap::new();
    for (at, line) in stored {
        if line.trim().is_empty() {
            continue;
        }
        let Ok(json) = serde_json::from_str::<Value>(&line) else {
            unreadable.push(at);
            continue;
        };
        let claimed = [&ptr.payment_id, &ptr.reference]
            .into_iter()
            .flatten()
            .find_map(|p| json.pointer(p).and_then(Value::as_str));
        let Some(claimed) = claimed else {
            unreadable.push(at);
            continue;
        };
        let gives_a_watched_payout = || {
            ptr.provider_payment_id
                .as_deref()
                .and_then(|p| json.pointer(p))
                .and_then(Value::as_str)
                .is_some_and(|id| payouts.contains(id.trim()))
        };
        let i = match by_id.get(claimed.trim()) {
            Some(&i) => i,
            None if !payouts.is_empty() && gives_a_watched_payout() => {
                match crate::ledger::lookup::position(payments, claimed.trim()) {
                    Some(i) => i as u32,
                    None => continue,
                }
            }
            None => continue,
        };
        let time = ptr
            .event_time
            .as_deref()
            .and_then(|p| json.pointer(p))
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t.trim()).ok())
            .map(|t| t.timestamp_micros());
        if time.is_some_and(|t| t > as_of) {
            later += 1;
            later_events.entry(i).or_default().push(Event {
                time,
                at,
                text: line,
            });
            continue;
        }
        events.entry(i).or_default().push(Event {
            time,
            at,
            text: line,
        });
    }
    if !unreadable.is_empty() {
        let shown: Vec<&str> = unreadable.iter().take(5).map(String::as_str).collect();
        warnings.push(format!(
            "status_api {}: {} webhook line(s) are not JSON or name no payment (first: {})",
            cfg.name,
            unreadable.len(),
            shown.join(", ")
        ));
    }
    if later > 0 {
        warnings.push(format!(
            "status_api {}: {later} webhook event(s) after the run's as-of were left out",
            cfg.name
        ));
    }
    let mut out: Answers = events
        .into_iter()
        .map(|(i, evs)| {
            let (answer, at) = latest(cfg, &payments[i as usize], evs);
            match later_events.remove(&i) {
                Some(after) => {
                    let (since, since_at) = latest(cfg, &payments[i as usize], after);
                    (i, unless_contradicted(answer, &at, &since, &since_at), at)
                }
                None => (i, answer, at),
            }
        })
        .collect();
    out.sort_by_key(|(i, _, _)| *i);
    Ok((out, warnings))
}

/// A re-run as of an earlier moment moves no money on an answer that an event after its as-of,
/// which recon already holds, contradicts (PAID then FAILED, or FAILED then PAID): the answer
/// becomes no evidence (AMBIGUOUS, a ticket naming both events). Otherwise `answer` stands.
fn unless_contradicted(answer: Answer, at: &str, since: &Answer, since_at: &str) -> Answer {
    use crate::config::status_api::Meaning;
    let terminal = |m: &Meaning| matches!(m, Meaning::Succeeded | Meaning::Failed);
    match (&answer, since) {
        (
            Answer::Evidence {
                meaning: then,
                status,
                ..
            },
            Answer::Evidence {
                meaning: now,
                status: later,
                ..
            },
        ) if terminal(then) && terminal(now) && then != now => Answer::NotEvidence {
            outcome: Outcome::Ambiguous,
            why: format!(
                "{at} says {status:?} as of this run, but {since_at}, after its as-of, says \
                 {later:?}: a run as of an earlier moment moves no money on what recon has \
                 since been told otherwise"
            ),
        },
        _ => answer,
    }
}

/// The answer of the latest of one payment's events, and which event it is.
fn latest(cfg: &StatusApiConfig, p: &Payment, events: Vec<Event>) -> (Answer, String) {
    let not = |why: String| Answer::NotEvidence {
        outcome: Outcome::Ambiguous,
        why,
    };
    if let Some(e) = events.iter().find(|e| e.time.is_none()) {
        let at = format!("webhook event {}", e.at);
        return (
            not(format!(
                "{at} has no RFC 3339 event time at {}",
                cfg.pointers.event_time.as_deref().unwrap_or("")
            )),
            at,
        );
    }
    let Some(t) = events.iter().filter_map(|e| e.time).max() else {
        return (not("no webhook event".into()), "no webhook event".into());
    };
    let last: Vec<&Event> = events.iter().filter(|e| e.time == Some(t)).collect();
    let judged: Vec<(Answer, &str)> = last
        .iter()
        .map(|e| {
            (
                verdict::judge_event(cfg, p, e.text.as_bytes()),
                e.at.as_str(),
            )
        })
        .collect();
    let first = &judged[0];
    let at = format!(
        "webhook event {} at {}",
        first.1,
        crate::timeparse::format_utc(t)
    );
    // Duplicates (the same event delivered twice) agree; anything else at that time does not.
    if judged.iter().any(|(a, _)| a != &first.0) {
        let all: Vec<&str> = judged.iter().map(|(_, at)| *at).collect();
        return (
            not(format!(
                "{} webhook events at the same latest time {} disagree ({})",
                judged.len(),
                crate::timeparse::format_utc(t),
                all.join(", ")
            )),
            at,
        );
    }
    let answer = match first.0.clone() {
        Answer::NotEvidence { outcome, why } => Answer::NotEvidence {
            outcome,
            why: format!("webhook event {}: {why}", first.1),
        },
        a => a,
    };
    (answer, at)
}

/// One answer from the status API's and the webhooks': equal or one-sided answers stand; a
/// `pending` gives way to a final word; any other disagreement is not evidence.
pub fn combine(api: Option<Answer>, hook: Option<Answer>) -> Option<Answer> {
    use super::config::Meaning::Pending;
    match (api, hook) {
        (None, x) | (x, None) => x,
        (Some(Answer::Unanswered { .. }), h) => h,
        (Some(a @ Answer::NotEvidence { .. }), _) => Some(a),
        (_, Some(h @ Answer::NotEvidence { .. })) => Some(h),
        (Some(a), Some(Answer::Unanswered { .. })) => Some(a),
        (Some(a), Some(h)) => {
            let (
                Answer::Evidence {
                    meaning: ma,
                    status: sa,
                    ..
                },
                Answer::Evidence {
                    meaning: mh,
                    status: sh,
                    ..
                },
            ) = (&a, &h)
            else {
                return Some(a);
            };
            if ma == mh || *mh == Pending {
                Some(a)
            } else if *ma == Pending {
                Some(h)
            } else {
                Some(Answer::NotEvidence {
                    outcome: Outcome::Ambiguous,
                    why: format!(
                        "the status API says {sa:?} ({}) but the latest webhook event says {sh:?} ({})",
                        ma.as_str(),
                        mh.as_str()
                    ),
                })
            }
        }
    }
}
