//! DESIGN.md rule 14 in a night: a statement line, a webhook, a status answer and a
//! reviewer's decision are all claims about which payout is which payment's. When a later one
//! contradicts an earlier one, the run resolves nothing on either and reports both sides as
//! CONTRADICTED (a critical case):
//! - a confirmed line whose provider reference now says something else than the reviewer saw
//!   ([`contested_pairs`], [`mark_contested`]);
//! - a payout id a status answer or webhook gives a payment, or a transition would record,
//!   while another payment holds it ([`payout_claims`], [`payout_holders`], [`mark_held`]):
//!   one payout, one payment;
//! - a line whose identifiers name two payments (its reference one, its provider id another
//!   the ledger gave it) ([`mark_named_twice`]).
//!
//! A reviewer's own SUCCEEDED or FAILED is re-checked by the classification
//! ([`crate::outcome::Decided`]); a FAILED word after any SUCCEEDED is the status overlay's.

use crate::decisions::confirmed::Overlaid;
use crate::ledger::Payment;
use crate::matching::MatchResult;
use crate::model::{Action, Outcome};
use crate::outcome::ResultRow;
use crate::sources::StatementLine;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Makes every contested confirmed line an undecided candidate of the payment it was
/// confirmed for and of every payment a pass linked it to ([`crate::matching::contest`]).
/// Returns every (line, payment) pair of a contested line.
pub(super) fn contested_pairs(
    confirmed: &Overlaid,
    payments: &[Payment],
    m: &mut MatchResult,
) -> Vec<(u32, u32)> {
    if confirmed.contested.is_empty() {
        return Vec::new();
    }
    let pairs: Vec<(u32, u32)> = confirmed
        .contested
        .iter()
        .filter_map(|(li, c)| {
            crate::ledger::lookup::position(payments, &c.payment_id).map(|p| (*li, p as u32))
        })
        .collect();
    crate::matching::contest(m, &pairs);
    let lines: HashSet<u32> = confirmed.contested.iter().map(|(l, _)| *l).collect();
    m.ambiguous
        .iter()
        .filter(|p| lines.contains(&p.line))
        .map(|p| (p.line, p.payment))
        .collect()
}

/// Rows of contested lines (the line's own row, and each payment row listing it) become
/// CONTRADICTED: the reviewer's confirmation and the provider's line disagree.
pub(super) fn mark_contested(
    rows: &mut [ResultRow],
    confirmed: &Overlaid,
    payments: &[Payment],
    lines: &[StatementLine],
) {
    if confirmed.contested.is_empty() {
        return;
    }
    let by_line: HashMap<u32, &crate::store::cases::Confirmation> =
        confirmed.contested.iter().map(|(l, c)| (*l, c)).collect();
    for r in rows.iter_mut() {
        let Some((li, c)) = r
            .lines
            .iter()
            .find_map(|l| by_line.get(l).map(|c| (*l, *c)))
        else {
            continue;
        };
        let l = &lines[li as usize];
        let now = l.reference().map(|r| r.to_string()).unwrap_or_default();
        let others: Vec<String> = rows_payments(r, payments)
            .filter(|p| *p != c.payment_id)
            .collect();
        r.outcome = Outcome::Contradicted;
        r.action = Action::Ticket;
        r.detail = format!(
            "line {} was confirmed as payment {}'s by {} (case {}{}), but the provider's line \
             now reads reference {now:?}{}: the two claims disagree, so nothing is resolved on \
             this line or on its absence until a reviewer decides again",
            l.uid(),
            c.payment_id,
            c.who(),
            c.case_key,
            match &c.reference {
                Some(r) => format!(", when its reference was {r:?}"),
                None => ", when it had no reference".into(),
            },
            if others.is_empty() {
                String::new()
            } else {
                format!(" (naming {})", others.join(", "))
            }
        )
        .into();
    }
}

fn rows_payments<'a>(r: &ResultRow, payments: &'a [Payment]) -> impl Iterator<Item = String> + 'a {
    r.payment
        .map(|i| payments[i as usize].payment_id.to_string())
        .into_iter()
}

/// The payout id each payment would be given tonight: the one a status answer names
/// (`answered`), and the provider id of the line a transition to SUCCEEDED rests on (what the
/// transition records).
pub(super) fn payout_claims(
    rows: &[ResultRow],
    lines: &[StatementLine],
    mut answered: HashMap<u32, String>,
) -> HashMap<u32, String> {
    for r in rows {
        if let (Some(i), Action::Transition(crate::model::Status::Succeeded)) =
            (r.payment, r.action)
            && let Some(id) = r
                .lines
                .first()
                .and_then(|&l| lines[l as usize].provider_txn_id.as_deref())
        {
            answered.entry(i).or_insert_with(|| id.to_string());
        }
    }
    answered
}

/// Rows of a line that identifier passes paired with two or more payments (its reference
/// names one, its provider id another, or the ledger gave two payments its provider id) become
/// CONTRADICTED: two claims about whose payout it is, and no pairing by recipient and money can
/// say which (DESIGN.md rule 14). Contested confirmations are [`mark_contested`]'s.
pub(super) fn mark_named_twice(
    rows: &mut [ResultRow],
    m: &MatchResult,
    rules: &crate::rules::RuleSet,
    payments: &[Payment],
    lines: &[StatementLine],
) {
    let identifier = |pass: usize| {
        rules.passes.get(pass).is_some_and(|p| {
            crate::matching::criteria::Criterion::of(p)
                .named()
                .is_some()
        })
    };
    let mut named: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for pair in m.ambiguous.iter().filter(|p| identifier(p.pass)) {
        named.entry(pair.line).or_default().push(pair.payment);
    }
    named.retain(|_, ps| {
        ps.sort_unstable();
        ps.dedup();
        ps.len() >= 2
    });
    if named.is_empty() {
        return;
    }
    for r in rows.iter_mut() {
        if r.outcome != Outcome::Ambiguous {
            continue;
        }
        let Some((li, ps)) = r.lines.iter().find_map(|l| named.get(l).map(|ps| (*l, ps))) else {
            continue;
        };
        let ids: Vec<String> = ps
            .iter()
            .map(|&p| payments[p as usize].payment_id.to_string())
            .collect();
        r.outcome = Outcome::Contradicted;
        r.detail = format!(
            "line {} names {} payments of ours by its identifiers ({}): one payout is one \
             payment's, a reviewer decides whose it is",
            lines[li as usize].uid(),
            ids.len(),
            ids.join(", ")
        )
        .into();
    }
}

/// Who else holds a payout id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Holder {
    /// The payment's index in the run's ledger, when loaded.
    pub(super) index: Option<u32>,
    /// Its id.
    pub(super) payment_id: String,
    /// The payout id.
    pub(super) payout: String,
}

/// For each payment given a payout id tonight (`answered`: payment index → id,
/// [`payout_claims`]), the other payments that hold that id already: on their loaded ledger row, on an attempt, a
/// transition's record (`owners`: what [`crate::ledger::lookup::payout_owners`] found in the
/// whole ledger), through a line a pass linked to them, or another answer of this run.
pub(super) fn payout_holders(
    answered: &HashMap<u32, String>,
    payments: &[Payment],
    lines: &[StatementLine],
    m: &MatchResult,
    owners: &[(String, String)],
) -> BTreeMap<u32, Vec<Holder>> {
    let mut out: BTreeMap<u32, Vec<Holder>> = BTreeMap::new();
    if answered.is_empty() {
        return out;
    }
    let wanted: HashSet<&str> = answered.values().map(String::as_str).collect();
    let mut by_id: HashMap<&str, Vec<(Option<u32>, String)>> = HashMap::new();
    let id_of = |i: u32| payments[i as usize].payment_id.to_string();
    for (i, p) in payments.iter().enumerate() {
        if let Some(id) = p.provider_payment_id.as_deref()
            && wanted.contains(id)
        {
            by_id
                .entry(id)
                .or_default()
                .push((Some(i as u32), id_of(i as u32)));
        }
    }
    for pair in &m.links {
        if let Some(id) = lines[pair.line as usize].provider_txn_id.as_deref()
            && wanted.contains(id)
        {
            by_id
                .entry(id)
                .or_default()
                .push((Some(pair.payment), id_of(pair.payment)));
        }
    }
    for (&i, id) in answered {
        by_id
            .entry(id.as_str())
            .or_default()
            .push((Some(i), id_of(i)));
    }
    for (pid, id) in owners {
        if let Some(id) = wanted.get(id.as_str()) {
            let index = crate::ledger::lookup::position(payments, pid).map(|i| i as u32);
            by_id.entry(id).or_default().push((index, pid.clone()));
        }
    }
    for (&i, id) in answered {
        let me = id_of(i);
        let mut seen = HashSet::new();
        let mut holders: Vec<Holder> = by_id
            .get(id.as_str())
            .into_iter()
            .flatten()
            .filter(|(_, p)| *p != me && seen.insert(p.clone()))
            .map(|(index, p)| Holder {
                index: *index,
                payment_id: p.clone(),
                payout: id.clone(),
            })
            .collect();
        holders.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
        if !holders.is_empty() {
            out.insert(i, holders);
        }
    }
    out
}

/// One payout, one payment: the row of a payment given tonight a payout id another payment
/// holds becomes CONTRADICTED (no transition records the id twice), and so does each loaded
/// holder's row; a payment of either side without a row tonight (watched, or out of the
/// night's scope) gets one, so that the case names both. Returns the rows to add.
pub(super) fn mark_held(
    rows: &mut [ResultRow],
    held: &BTreeMap<u32, Vec<Holder>>,
    payments: &[Payment],
    lines: &[StatementLine],
) -> Vec<ResultRow> {
    if held.is_empty() {
        return Vec::new();
    }
    let mut rows_of: HashMap<u32, usize> = HashMap::new();
    for (k, r) in rows.iter().enumerate() {
        if let Some(p) = r.payment {
            rows_of.insert(p, k);
        }
    }
    let name = |i: u32| payments[i as usize].payment_id.to_string();
    // The lines that carry each payout id: shown with both sides, so one case names them all.
    let payouts: HashSet<&str> = held.values().flatten().map(|h| h.payout.as_str()).collect();
    let mut lines_of: HashMap<&str, Vec<u32>> = HashMap::new();
    for (li, l) in lines.iter().enumerate() {
        if let Some(id) = l.provider_txn_id.as_deref()
            && payouts.contains(id)
        {
            lines_of.entry(id).or_default().push(li as u32);
        }
    }
    let with_lines = |mut have: Vec<u32>, payout: &str| {
        have.extend(lines_of.get(payout).into_iter().flatten().copied());
        have.sort_by(|&a, &b| lines[a as usize].uid().cmp(&lines[b as usize].uid()));
        have.dedup();
        have
    };
    // Payment index → (the payout id, what its row says).
    let mut notes: BTreeMap<u32, (String, Vec<String>)> = BTreeMap::new();
    for (&i, holders) in held {
        let others: Vec<String> = holders
            .iter()
            .map(|h| format!("payment {}", h.payment_id))
            .collect();
        let payout = holders[0].payout.clone();
        notes
            .entry(i)
            .or_insert_with(|| (payout.clone(), Vec::new()))
            .1
            .push(format!(
                "payout {payout:?} would be this payment's tonight, but {} already holds it: one \
             payout is one payment's, so neither is resolved on it until a reviewer decides",
                others.join(", ")
            ));
        for h in holders {
            if let Some(j) = h.index {
                notes
                    .entry(j)
                    .or_insert_with(|| (h.payout.clone(), Vec::new()))
                    .1
                    .push(format!(
                        "payout {:?}, which this payment holds, is given to payment {} \
                         tonight: one payout is one payment's, a reviewer decides whose it is",
                        h.payout,
                        name(i)
                    ));
            }
        }
    }
    let mut added = Vec::new();
    for (j, (payout, texts)) in notes {
        let detail = texts.join("; ");
        match rows_of.get(&j) {
            Some(&k) => {
                let r = &mut rows[k];
                let was = std::mem::take(&mut r.detail);
                r.outcome = Outcome::Contradicted;
                r.action = Action::Ticket;
                r.lines = with_lines(std::mem::take(&mut r.lines), &payout);
                r.detail = if was.is_empty() {
                    detail.into()
                } else {
                    format!("{detail} ({was})").into()
                };
            }
            None => added.push(ResultRow {
                outcome: Outcome::Contradicted,
                payment: Some(j),
                lines: with_lines(Vec::new(), &payout),
                rule: std::sync::Arc::from(""),
                action: Action::Ticket,
                detail: detail.into(),
            }),
        }
    }
    added
}

/// What the history of a transition says about the confirmations behind it (DESIGN.md rule
/// 13: the reviewer is named wherever their decision moves money): for each payment whose row
/// tonight is a transition, and that either has a line a reviewer confirmed as its own or is
/// another payment of the case that confirmation decided (its look-alike), the reviewers, the
/// line and the case.
pub(super) async fn confirmation_notes(
    db: &crate::db::Db,
    confirmed: &Overlaid,
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> anyhow::Result<HashMap<u32, String>> {
    let mut out: HashMap<u32, String> = HashMap::new();
    if confirmed.applied.is_empty() {
        return Ok(out);
    }
    let moving: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| r.payment.is_some() && matches!(r.action, Action::Transition(_)))
        .collect();
    if moving.is_empty() {
        return Ok(out);
    }
    let cases = cases_of(db, confirmed).await?;
    // Payment id → the confirmations of the cases it is in, but not as the confirmed payment.
    let mut lookalike: HashMap<&str, Vec<&crate::store::cases::Confirmation>> = HashMap::new();
    for c in confirmed.applied.values() {
        for p in cases.get(&c.case_key).into_iter().flatten() {
            if *p != c.payment_id {
                lookalike.entry(p.as_str()).or_default().push(c);
            }
        }
    }
    for r in moving {
        let Some(i) = r.payment else { continue };
        let mut notes: Vec<String> = r
            .lines
            .iter()
            .filter_map(|&l| confirmed.applied.get(&l).map(|c| (l, c)))
            .map(|(l, c)| {
                format!(
                    "line {} confirmed as this payment's by {} (case {})",
                    lines[l as usize].uid(),
                    c.who(),
                    c.case_key
                )
            })
            .collect();
        let id = payments[i as usize].payment_id.to_string();
        for c in lookalike.get(id.as_str()).into_iter().flatten() {
            notes.push(format!(
                "its candidate line {} was confirmed as payment {}'s by {} (case {})",
                c.line_id,
                c.payment_id,
                c.who(),
                c.case_key
            ));
        }
        if !notes.is_empty() {
            notes.sort();
            notes.dedup();
            out.insert(i, notes.join("; "));
        }
    }
    Ok(out)
}

/// The loaded payments of the cases whose confirmations the night applied, other than the
/// confirmed one (the look-alikes): the provider is asked about them too, so that a payout id
/// it gives one of them while a confirmed line carries it is seen whatever the night's scope
/// (one payout, one payment).
pub(super) async fn confirmation_lookalikes(
    db: &crate::db::Db,
    confirmed: &Overlaid,
    payments: &[Payment],
) -> anyhow::Result<Vec<u32>> {
    if confirmed.applied.is_empty() {
        return Ok(Vec::new());
    }
    let cases = cases_of(db, confirmed).await?;
    let mut out: Vec<u32> = confirmed
        .applied
        .values()
        .flat_map(|c| {
            cases
                .get(&c.case_key)
                .into_iter()
                .flatten()
                .filter(move |p| **p != c.payment_id)
        })
        .filter_map(|p| crate::ledger::lookup::position(payments, p).map(|i| i as u32))
        .collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The payment ids of the cases the night's applied confirmations were decided in.
async fn cases_of(
    db: &crate::db::Db,
    confirmed: &Overlaid,
) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let mut keys: Vec<&str> = confirmed
        .applied
        .values()
        .map(|c| c.case_key.as_str())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let mut tx = db.begin().await?;
    let cases = tx.case_payment_ids(&keys).await?;
    tx.rollback().await?;
    Ok(cases)
}
