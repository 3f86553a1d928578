//! Ticket evidence: what a reviewer needs to decide, with every candidate the matcher paired
//! with the ticket's payment or line and why it qualified (the rules' criteria from
//! [`crate::matching::criteria`]). Account numbers are masked, statement text is neutralised,
//! money is exact decimal text in the currency's units.
//!
//! The **fingerprint** of the evidence and the description of how it changed are defined
//! with the tickets they identify ([`crate::tickets::fingerprint`]).

use crate::ledger::Payment;
use crate::matching::{MatchResult, Pair, criteria};
use crate::outcome::ResultRow;
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use crate::textsafe::csv_safe;
pub use crate::tickets::{canonical, describe_changes, fingerprint, seal};
use crate::{mask, money, timeparse};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};

/// How a pair was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Linked,
    Candidate,
    NearMiss,
    /// A return or reversal of the payment's money.
    Returned,
    /// A return that could be this payment's money or another's.
    ReturnCandidate,
}

impl Relation {
    fn as_str(self) -> &'static str {
        match self {
            Relation::Linked => "linked",
            Relation::Candidate => "candidate",
            Relation::NearMiss => "near_miss",
            Relation::Returned => "returned",
            Relation::ReturnCandidate => "return_candidate",
        }
    }
}

/// The matcher's pairs that touch ticket rows, by payment and by line.
#[derive(Default)]
pub(crate) struct PairIndex {
    by_payment: HashMap<u32, Vec<(Pair, Relation)>>,
    by_line: HashMap<u32, Vec<(Pair, Relation)>>,
}

impl PairIndex {
    /// Indexes only the pairs of payments and lines that `rows` with tickets mention (a run
    /// holds a million links; a few thousand tickets).
    pub(crate) fn new(m: &MatchResult, rows: &[ResultRow], n_pay: usize, n_lines: usize) -> Self {
        let mut pay = vec![false; n_pay];
        let mut line = vec![false; n_lines];
        // A ticket row's lines hold every line its payment was paired with, so indexing them
        // by line also gives each candidate line's competing payments.
        for r in rows
            .iter()
            .filter(|r| r.outcome.ticket_severity().is_some())
        {
            if let Some(p) = r.payment {
                pay[p as usize] = true;
            }
            r.lines.iter().for_each(|&l| line[l as usize] = true);
        }
        let mut ix = PairIndex {
            by_payment: HashMap::new(),
            by_line: HashMap::new(),
        };
        let all = [
            (&m.links, Relation::Linked),
            (&m.ambiguous, Relation::Candidate),
            (&m.near_misses, Relation::NearMiss),
            (&m.returns, Relation::Returned),
            (&m.returns_ambiguous, Relation::ReturnCandidate),
        ];
        for (list, rel) in all {
            for p in list.iter() {
                if pay[p.payment as usize] {
                    ix.by_payment.entry(p.payment).or_default().push((*p, rel));
                }
                if line[p.line as usize] {
                    ix.by_line.entry(p.line).or_default().push((*p, rel));
                }
            }
        }
        ix
    }
}

fn payment_json(p: &Payment) -> Value {
    json!({
        "payment_id": p.payment_id,
        "status": p.status.as_str(),
        "amount": money::format_minor(p.amount_minor, p.currency),
        "currency": p.currency,
        "recipient": mask::account(&p.recipient),
        "started_at": p.started_at.map(timeparse::format_utc),
        "attempt_id": p.attempt_id,
    })
}

fn line_json(l: &StatementLine) -> Value {
    json!({
        "line_id": l.uid(),
        "source": l.source(),
        "file": l.file(),
        "line": l.line_no,
        "reference": l.reference().as_deref().map(csv_safe),
        "amount": money::format_minor(l.amount_minor, l.currency),
        "currency": l.currency,
        "recipient": mask::account(&l.recipient),
        "booked_at": l.booked_text(),
        "kind": l.kind.as_str(),
    })
}

/// The evidence of one ticket row.
pub(crate) fn for_row(
    row: &ResultRow,
    payments: &[Payment],
    lines: &[StatementLine],
    rules: &RuleSet,
    ix: &PairIndex,
) -> Value {
    let pairs: &[(Pair, Relation)] = match row.payment {
        Some(p) => ix.by_payment.get(&p).map(Vec::as_slice).unwrap_or(&[]),
        None => row
            .lines
            .first()
            .and_then(|l| ix.by_line.get(l))
            .map(Vec::as_slice)
            .unwrap_or(&[]),
    };
    let mut others: BTreeSet<u32> = BTreeSet::new();
    let mut candidates: Vec<((String, String, u8), Value)> = Vec::new();
    for &(pair, rel) in pairs {
        let (p, l) = (&payments[pair.payment as usize], &lines[pair.line as usize]);
        let checks = match rel {
            Relation::NearMiss => criteria::near_miss(rules, p, l),
            _ if pair.pass == crate::matching::RETURNS => {
                criteria::Criterion::returns(rules, rules.return_reach).checks(p, l)
            }
            _ => criteria::pass_checks(&rules.passes[pair.pass], p, l),
        };
        let gate = match rel {
            Relation::NearMiss => "near_miss",
            _ => crate::matching::pass_name(rules, pair.pass),
        };
        // Other payments paired with this line by the same kind of evidence: the competition.
        let competing: BTreeSet<String> = ix
            .by_line
            .get(&pair.line)
            .into_iter()
            .flatten()
            .filter(|(o, r)| o.line == pair.line && o.payment != pair.payment && *r == rel)
            .map(|(o, _)| payments[o.payment as usize].payment_id.to_string())
            .collect();
        if row.payment != Some(pair.payment) {
            others.insert(pair.payment);
        }
        let qualified: Vec<&str> = checks
            .iter()
            .filter(|c| c.ok)
            .map(|c| c.text.as_str())
            .collect();
        let differs: Vec<&str> = checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.text.as_str())
            .collect();
        let line_id = l.uid().into_owned();
        candidates.push((
            (line_id.clone(), p.payment_id.to_string(), rel as u8),
            json!({
                "line_id": line_id,
                "payment_id": p.payment_id,
                "relation": rel.as_str(),
                "gate": gate,
                "qualified_by": qualified,
                "differs": differs,
                "competing_payments": competing,
            }),
        ));
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0));
    let mut others: Vec<&Payment> = others.iter().map(|&i| &payments[i as usize]).collect();
    others.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
    json!({
        "outcome": row.outcome.as_str(),
        "rule": row.rule,
        "detail": row.detail,
        "payment": row.payment.map(|i| payment_json(&payments[i as usize])),
        "lines": row.lines.iter().map(|&i| line_json(&lines[i as usize])).collect::<Vec<_>>(),
        "candidates": candidates.into_iter().map(|c| c.1).collect::<Vec<_>>(),
        "other_payments": others.into_iter().map(payment_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn ev(amount: &str, lines: &[&str]) -> Value {
        json!({
            "outcome": "AMBIGUOUS", "rule": "near_miss", "detail": "x",
            "payment": {"payment_id": "P-1", "amount": amount, "currency": "EUR", "status": "UNKNOWN"},
            "lines": lines.iter().map(|l| json!({"line_id": l, "amount": "1.00", "file": "f", "line": 2})).collect::<Vec<_>>(),
            "candidates": lines.iter().map(|l| json!({"line_id": l, "payment_id": "P-1", "gate": "near_miss"})).collect::<Vec<_>>(),
            "other_payments": [],
        })
    }

    #[test]
    fn the_fingerprint_ignores_volatile_fields_and_sees_the_money() {
        let a = ev("39.50", &["L-1"]);
        let mut b = a.clone();
        b["detail"] = json!("other words");
        b["payment"]["status"] = json!("REVIEW");
        b["lines"][0]["file"] = json!("renamed.csv");
        b["lines"][0]["line"] = json!(9);
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&ev("40.00", &["L-1"])));
        assert_ne!(fingerprint(&a), fingerprint(&ev("39.50", &["L-1", "L-9"])));
        // Sealing gives the stored text and the same fingerprint.
        assert_eq!(seal(a.clone()), (a.to_string(), fingerprint(&a)));
        assert_eq!(
            fingerprint(&a),
            hex::encode(Sha256::digest(canonical(&a).to_string().as_bytes()))
        );
    }

    #[test]
    fn changes_are_described_once_each() {
        let old = ev("39.50", &["L-1"]).to_string();
        let new = ev("40.00", &["L-1", "L-9"]).to_string();
        assert_eq!(
            describe_changes(&old, &new),
            "payment amount 39.50 → 40.00; candidate L-9 added"
        );
        assert_eq!(
            describe_changes(&new, &old),
            "payment amount 40.00 → 39.50; candidate L-9 removed"
        );
        assert_eq!(describe_changes("{not json", &new), "evidence changed");
    }
}
