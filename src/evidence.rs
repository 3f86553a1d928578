//! Ticket evidence: what a reviewer needs to decide, with every candidate the matcher paired
//! with the ticket's payment or line and why it qualified (the rules' criteria from
//! [`crate::matching::criteria`]). Account numbers are masked, statement text is neutralised,
//! money is exact decimal text in the currency's units.
//!
//! The **fingerprint** is the sha256 of the evidence's canonical form: the decision-relevant
//! fields only (money, masked recipients, bookings, the candidates and why they qualified),
//! serialised with sorted keys and sorted lists. It leaves out what changes without the
//! evidence changing (file names and line numbers, the human `detail` text) and what a
//! reviewer changes when acting on a ticket (the payment's status and attempt).

use crate::ledger::Payment;
use crate::matching::{MatchResult, Pair, criteria};
use crate::outcome::ResultRow;
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use crate::textsafe::csv_safe;
use crate::{mask, money, timeparse};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
        "source": l.source,
        "file": l.file,
        "line": l.line_no,
        "reference": l.reference.as_deref().map(csv_safe),
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
                criteria::Fuzzy::returns(rules, rules.return_reach).checks(p, l)
            }
            _ => {
                let pass = &rules.passes[pair.pass];
                criteria::identifier(pass, p, l)
                    .or_else(|| criteria::fuzzy(pass, p, l))
                    .unwrap_or_default()
            }
        };
        let gate = match rel {
            Relation::NearMiss => "near_miss",
            _ => crate::matching::pass_name(rules, pair.pass),
        };
        // Other payments paired with this line by the same kind of evidence: the competition.
        let competing: BTreeSet<&str> = ix
            .by_line
            .get(&pair.line)
            .into_iter()
            .flatten()
            .filter(|(o, r)| o.line == pair.line && o.payment != pair.payment && *r == rel)
            .map(|(o, _)| payments[o.payment as usize].payment_id.as_str())
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

/// The decision-relevant part of `evidence` (see the module docs).
pub fn canonical(evidence: &Value) -> Value {
    let mut v = evidence.clone();
    strip_volatile(&mut v);
    v
}

/// Removes from `v`, in place, what the canonical form leaves out (see the module docs).
fn strip_volatile(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("detail");
        let strip = |p: &mut Value| {
            if let Some(p) = p.as_object_mut() {
                p.remove("status");
                p.remove("attempt_id");
            }
        };
        if let Some(p) = o.get_mut("payment") {
            strip(p);
        }
        if let Some(ps) = o.get_mut("other_payments").and_then(Value::as_array_mut) {
            ps.iter_mut().for_each(strip);
        }
        if let Some(ls) = o.get_mut("lines").and_then(Value::as_array_mut) {
            for l in ls.iter_mut().filter_map(Value::as_object_mut) {
                l.remove("file");
                l.remove("line");
            }
        }
    }
}

/// sha256 (hex) of `v`'s text, serialised straight into the hash.
fn sha256_of(v: &Value) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // Writing into memory cannot fail, and a Value always serialises.
    let _ = serde_json::to_writer(&mut h, v);
    hex::encode(h.0.finalize())
}

/// sha256 (hex) of the canonical form of `evidence`. serde_json keeps object keys sorted, and
/// every list in the evidence is built sorted, so equal evidence gives equal text.
pub fn fingerprint(evidence: &Value) -> String {
    sha256_of(&canonical(evidence))
}

/// The stored text of `evidence` and its [`fingerprint`], consuming it: a ticket's evidence
/// is serialised once for the store and once, stripped in place, for the hash.
pub fn seal(mut evidence: Value) -> (String, String) {
    let text = evidence.to_string();
    strip_volatile(&mut evidence);
    (text, sha256_of(&evidence))
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Field-by-field changes of two objects: `amount 39.50 → 40.00`.
fn field_changes(prefix: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    let empty = serde_json::Map::new();
    let (a, b) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let (x, y) = (
            a.get(k).unwrap_or(&Value::Null),
            b.get(k).unwrap_or(&Value::Null),
        );
        if x == y {
            continue;
        }
        if let (Some(a), Some(b)) = (x.as_array(), y.as_array()) {
            // Lists of reasons: name only what left and what came.
            let gone: Vec<String> = a.iter().filter(|v| !b.contains(v)).map(text).collect();
            let came: Vec<String> = b.iter().filter(|v| !a.contains(v)).map(text).collect();
            let side = |v: Vec<String>| {
                if v.is_empty() {
                    "-".into()
                } else {
                    v.join(", ")
                }
            };
            out.push(format!("{prefix}{k} {} → {}", side(gone), side(came)));
        } else {
            out.push(format!("{prefix}{k} {} → {}", text(x), text(y)));
        }
    }
}

/// Items of a list keyed by `key`.
fn keyed(v: &Value, key: impl Fn(&Value) -> String) -> BTreeMap<String, &Value> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| (key(x), x))
        .collect()
}

fn list_changes(
    what: &str,
    old: &Value,
    new: &Value,
    key: impl Fn(&Value) -> String,
    skip_added: &BTreeSet<String>,
    out: &mut Vec<String>,
) -> BTreeSet<String> {
    let (a, b) = (keyed(old, &key), keyed(new, &key));
    let mut added = BTreeSet::new();
    for (k, y) in &b {
        match a.get(k) {
            None => {
                added.insert(k.clone());
                if !skip_added.contains(k) {
                    out.push(format!("{what} {k} added"));
                }
            }
            Some(x) if x != y => field_changes(&format!("{what} {k}: "), x, y, out),
            Some(_) => {}
        }
    }
    for k in a.keys().filter(|k| !b.contains_key(*k)) {
        if !skip_added.contains(k) {
            out.push(format!("{what} {k} removed"));
        }
    }
    added
}

/// A short human description of how the decision-relevant evidence changed from `old` to
/// `new` (both evidence JSON texts), e.g. `candidate L-9 added; payment amount 39.50 → 40.00`.
pub fn describe_changes(old: &str, new: &str) -> String {
    let (Ok(old), Ok(new)) = (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) else {
        return "evidence changed".into();
    };
    let (old, new) = (canonical(&old), canonical(&new));
    let mut out = Vec::new();
    for k in ["outcome", "rule"] {
        if old[k] != new[k] {
            out.push(format!("{k} {} → {}", text(&old[k]), text(&new[k])));
        }
    }
    if old["payment"] != new["payment"] {
        field_changes("payment ", &old["payment"], &new["payment"], &mut out);
    }
    // A payment's candidates are lines, a line's candidates are payments: name the other side.
    let has_payment = !new["payment"].is_null();
    let cand_key = |c: &Value| {
        let k = if has_payment { "line_id" } else { "payment_id" };
        text(&c[k])
    };
    let none = BTreeSet::new();
    let mut cands = Vec::new();
    let touched = list_changes(
        "candidate",
        &old["candidates"],
        &new["candidates"],
        cand_key,
        &none,
        &mut cands,
    );
    let mut removed_or_added = touched;
    for c in keyed(&old["candidates"], cand_key).keys() {
        if !keyed(&new["candidates"], cand_key).contains_key(c) {
            removed_or_added.insert(c.clone());
        }
    }
    let mut lines = Vec::new();
    let line_skip = if has_payment {
        &removed_or_added
    } else {
        &none
    };
    list_changes(
        "line",
        &old["lines"],
        &new["lines"],
        |l| text(&l["line_id"]),
        line_skip,
        &mut lines,
    );
    let pay_skip = if has_payment {
        &none
    } else {
        &removed_or_added
    };
    let mut pays = Vec::new();
    list_changes(
        "payment",
        &old["other_payments"],
        &new["other_payments"],
        |p| text(&p["payment_id"]),
        pay_skip,
        &mut pays,
    );
    out.extend(cands);
    out.extend(lines);
    out.extend(pays);
    if out.is_empty() {
        return "evidence changed".into();
    }
    const MAX: usize = 8;
    if out.len() > MAX {
        let more = out.len() - MAX;
        out.truncate(MAX);
        out.push(format!("and {more} more change(s)"));
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
