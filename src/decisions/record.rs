//! The cases of a committed run, stored in the run's transaction: what `recon decisions
//! apply` checks a row against ("the case as it is now": as the latest committed run stored
//! it), and what earlier decisions left on the cases for the next report.

use crate::ledger::Payment;
use crate::model::Id;
use crate::report::ReportView;
use crate::report::cases::{Case, Marks};
use crate::store::Tx;
use crate::store::cases::{CaseCandidate, CasePayment, NewCase};
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// A ticket's dedupe key as the run's effects wrote it, from a review row of the view.
fn dedupe_key(item: &crate::report::Item) -> String {
    let lines: Vec<String> = item
        .lines
        .iter()
        .map(|l| format!("{}:{}", l.origin.source, l.id))
        .collect();
    crate::tickets::dedupe_key(
        item.outcome.as_str(),
        item.payment_id.as_ref().map(Id::to_string).as_deref(),
        &lines.join(";"),
        &item.rule,
    )
}

/// What a run judged: the payments and the statement lines it has a result row for. A case
/// about any of them that the run no longer stores is no longer open (`supersede`).
#[derive(Debug, Default)]
pub struct Judged {
    /// Payment ids.
    pub payments: HashSet<String>,
    /// (source, line id).
    pub lines: HashSet<(String, String)>,
    /// Keys of cases the run holds but another step stores (a shard leaves a case that spans
    /// shards to the gather): never superseded by this run.
    pub held_elsewhere: HashSet<String>,
}

impl Judged {
    /// Adds what another run of the same range judged and stored (its days count as one run).
    pub fn extend(&mut self, other: Judged) {
        self.payments.extend(other.payments);
        self.lines.extend(other.lines);
        self.held_elsewhere.extend(other.held_elsewhere);
    }

    /// The payments and lines of `rows` that belong to a case still waiting for a decision
    /// that a run with this view (`seen`) may close: the only ones `supersede` asks about
    /// (a night of a million rows keeps a few ids, not a million).
    pub async fn of_rows(
        tx: &mut Tx,
        (run_id, seen): (&str, &str),
        rows: &[crate::outcome::ResultRow],
        payments: &[Payment],
        lines: &[crate::sources::StatementLine],
    ) -> Result<Judged> {
        let mut j = Judged::default();
        let open = tx.open_cases_not_stored_by(run_id, seen).await?;
        if open.is_empty() {
            return Ok(j);
        }
        let mut want_payments: HashSet<&str> = HashSet::new();
        let mut want_lines: HashSet<(&str, &str)> = HashSet::new();
        for c in &open {
            want_payments.extend(c.payments.iter().map(|p| p.payment_id.as_str()));
            want_lines.extend(c.lines.iter().map(|(s, l)| (s.as_str(), l.as_str())));
            want_lines.extend(
                c.candidates
                    .iter()
                    .map(|k| (k.source.as_str(), k.line_id.as_str())),
            );
        }
        for r in rows {
            if let Some(p) = r.payment.and_then(|i| payments.get(i as usize)) {
                let id = p.payment_id.to_string();
                if want_payments.contains(id.as_str()) {
                    j.payments.insert(id);
                }
            }
            for l in r.lines.iter().filter_map(|&i| lines.get(i as usize)) {
                let uid = l.uid();
                if want_lines.contains(&(l.source(), uid.as_ref())) {
                    j.lines.insert((l.source().to_string(), uid.into_owned()));
                }
            }
        }
        Ok(j)
    }
}

/// Stores every case of `view` (the run's review rows) with its payments as the run loaded
/// them (status and attempt now, which a status decision is guarded on), its numbered
/// candidates, its lines and its tickets; then, with `judged`, closes the cases the run no
/// longer holds (`supersede`). Inside the run's transaction, after its tickets. `ids` is
/// the run id and its view (its as-of, 20 digits of microseconds).
pub async fn record(
    tx: &mut Tx,
    view: &ReportView,
    payments: &[Payment],
    judged: Option<&Judged>,
    (run_id, seen): (&str, &str),
    now: &str,
) -> Result<()> {
    if let Some(j) = judged {
        supersede(tx, view, j, (run_id, seen), now).await?;
    }
    let cases: Vec<&Case> = view.cases.iter().collect();
    store_cases(tx, view, &cases, payments, (run_id, seen), now).await
}

/// Stores `cases` (cases of `view`) as [`record`] stores all of them, closing none: the
/// gather's, which stores only the cases that span shards (each shard stored its others)
/// without a second copy of the night's cases.
pub async fn store_cases(
    tx: &mut Tx,
    view: &ReportView,
    cases: &[&Case],
    payments: &[Payment],
    (run_id, seen): (&str, &str),
    now: &str,
) -> Result<()> {
    if cases.is_empty() {
        return Ok(());
    }
    let wanted: HashSet<&Id> = cases.iter().flat_map(|c| c.payments.iter()).collect();
    let states: HashMap<&Id, (&str, Option<String>)> = payments
        .iter()
        .filter(|p| wanted.contains(&p.payment_id))
        .map(|p| {
            (
                &p.payment_id,
                (
                    p.current_status.as_str(),
                    p.attempt_id.as_ref().map(Id::to_string),
                ),
            )
        })
        .collect();
    // A chunk of cases at a time: a night of fifty thousand cases never holds all their
    // stored forms (JSON texts) at once.
    for cases in cases.chunks(CASES_A_CHUNK) {
        let out = stored_cases(tx, view, cases, &states).await?;
        tx.upsert_cases(&out, (run_id, seen), now).await?;
    }
    Ok(())
}

/// Cases stored a chunk at a time.
const CASES_A_CHUNK: usize = 4096;

/// `cases` as the store keeps them, with the tickets of their rows.
async fn stored_cases(
    tx: &mut Tx,
    view: &ReportView,
    cases: &[&Case],
    states: &HashMap<&Id, (&str, Option<String>)>,
) -> Result<Vec<NewCase>> {
    let keys: Vec<String> = cases
        .iter()
        .flat_map(|c| c.members.iter().map(|&i| dedupe_key(&view.items[i])))
        .collect();
    let ids = tx.ticket_ids_by_key(&keys).await?;
    let mut out = Vec::with_capacity(cases.len());
    for c in cases {
        let case_payments: Vec<CasePayment> = c
            .payments
            .iter()
            .map(|p| {
                let (status, attempt) = states
                    .get(p)
                    .map(|(s, a)| (s.to_string(), a.clone()))
                    .unwrap_or_else(|| ("PENDING".into(), None));
                CasePayment {
                    payment_id: p.to_string(),
                    status,
                    attempt_id: attempt,
                }
            })
            .collect();
        // An amount difference alone: its amounts, for `accept difference`.
        let paid = c.amount_difference(&view.items);
        let candidates: Vec<CaseCandidate> = c
            .candidates
            .iter()
            .map(|k| CaseCandidate {
                number: k.number,
                payment_id: k.payment_id.to_string(),
                source: k.line.origin.source.to_string(),
                line_id: k.line.id.to_string(),
                text: k.text(),
                reference: k.line.reference.as_ref().map(Id::to_string),
                amounts: paid.map(|p| crate::store::cases::CandidateAmounts {
                    currency: p.currency.to_string(),
                    payment_minor: p.minor,
                    line_minor: k.line.amount.minor,
                }),
            })
            .collect();
        let case_lines: Vec<(String, String)> = c
            .members
            .iter()
            .flat_map(|&i| view.items[i].lines.iter())
            .map(|l| (l.origin.source.to_string(), l.id.to_string()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut tickets: Vec<i64> = c
            .members
            .iter()
            .filter_map(|&i| ids.get(&dedupe_key(&view.items[i])).copied())
            .collect();
        tickets.sort_unstable();
        tickets.dedup();
        out.push(NewCase {
            key: c.key.to_string(),
            kind: c.kind.as_str().to_string(),
            severity: c.severity.as_str().to_string(),
            outcome: c.outcome.as_str().to_string(),
            fingerprint: c.fingerprint.clone(),
            // What and whose, as the email says it: `AMBIGUOUS: payments P-1, P-2, line L-9`.
            what: format!("{}: {}", c.what(), c.whose()),
            why: c.why(&view.items),
            at_risk: c.amount_text(),
            // What `recon cases list` orders by, as the reports do: the value in the reporting
            // currency (with it), else the units of the largest amount (currency left empty,
            // stored NULL: ordered after valued cases, never shown as a value).
            value: {
                let currency = c
                    .value
                    .and(view.summary.reporting.as_ref())
                    .map(|r| r.valuation.currency.clone())
                    .unwrap_or_default();
                let v = if currency.is_empty() {
                    c.weight()
                } else {
                    c.value.unwrap_or_default()
                };
                crate::rates::micros(v).map(|m| (m, currency))
            },
            payments: serde_json::to_string(&case_payments)?,
            candidates: serde_json::to_string(&candidates)?,
            ticket_ids: serde_json::to_string(&tickets)?,
            lines: serde_json::to_string(&case_lines)?,
        });
    }
    Ok(out)
}

/// Closes as SUPERSEDED every open case (OPEN or ESCALATED) that this run judged — it has a
/// result row for one of the case's payments or lines — but does not store: its evidence
/// settled it ("settled by run R on new evidence"), or it was regrouped under another key
/// ("regrouped as case K by run R"). A sheet made before can then not be applied to it. A
/// case stored last by a run that saw more (a later as-of) is left alone.
async fn supersede(
    tx: &mut Tx,
    view: &ReportView,
    judged: &Judged,
    (run_id, seen): (&str, &str),
    now: &str,
) -> Result<()> {
    let stored: HashSet<&str> = view.cases.iter().map(|c| c.key.as_str()).collect();
    let mut case_of_payment: HashMap<String, &str> = HashMap::new();
    let mut case_of_line: HashMap<(String, String), &str> = HashMap::new();
    for c in &view.cases {
        for p in &c.payments {
            case_of_payment.insert(p.to_string(), &c.key);
        }
        for &i in &c.members {
            for l in &view.items[i].lines {
                case_of_line.insert((l.origin.source.to_string(), l.id.to_string()), &c.key);
            }
        }
    }
    for old in tx.open_cases_not_stored_by(run_id, seen).await? {
        if stored.contains(old.key.as_str()) || judged.held_elsewhere.contains(&old.key) {
            continue;
        }
        let payments = old.payments.iter().map(|p| p.payment_id.clone());
        let lines: Vec<(String, String)> = old
            .lines
            .iter()
            .cloned()
            .chain(
                old.candidates
                    .iter()
                    .map(|c| (c.source.clone(), c.line_id.clone())),
            )
            .collect();
        let touched = payments.clone().any(|p| judged.payments.contains(&p))
            || lines.iter().any(|l| judged.lines.contains(l));
        if !touched {
            continue;
        }
        let regrouped: std::collections::BTreeSet<&str> = payments
            .filter_map(|p| case_of_payment.get(&p).copied())
            .chain(lines.iter().filter_map(|l| case_of_line.get(l).copied()))
            .collect();
        let why = if regrouped.is_empty() {
            format!("settled by run {run_id} on new evidence")
        } else {
            format!(
                "regrouped as case {} by run {run_id}",
                regrouped.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        tx.supersede_case(&old.key, &why, now).await?;
    }
    Ok(())
}

/// What earlier decisions left on the cases: the settled ones (dismissed or decided on the
/// evidence they had), a status text for those escalated or waiting for a second reviewer, and
/// the job's `dismiss_reasons` (the Decide sheet offers `dismiss: <reason>` for each).
pub async fn marks(db: &crate::db::Db, dismiss_reasons: &[String]) -> Result<Marks> {
    let mut tx = db.begin().await?;
    let marked = tx.marked_cases().await?;
    let waiting = tx.waiting_decisions().await?;
    tx.rollback().await?;
    let mut m = Marks {
        dismiss_reasons: dismiss_reasons.to_vec(),
        ..Marks::default()
    };
    for (key, fp, status, by) in marked {
        match status.as_str() {
            "DISMISSED" | "DECIDED" => {
                m.settled.insert((key, fp));
            }
            other => {
                m.status
                    .insert(key, format!("{} by {by}", other.to_lowercase()));
            }
        }
    }
    for d in waiting {
        let s = m.status.entry(d.case_key).or_default();
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str(&format!(
            "waiting for a second reviewer: {} by {}",
            d.decision, d.actor
        ));
    }
    Ok(m)
}
