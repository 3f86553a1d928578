//! One row of a Decide sheet checked against the case as it is now: what to do, or why not.
//! Pure: the caller reads the case, its fingerprints and its decisions, and applies the plan.

use super::read::SheetRow;
use crate::model::Status;
use crate::report::cases::{self, CaseKind, Decision};
use crate::store::cases::{CaseCandidate, CasePayment, DecisionRecord, StoredCase};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

/// How many different reviewers a decision needs (`approvals`, `approvals_succeeded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approvals {
    /// For every decision that moves money ([`moves_money`]).
    pub money: u8,
    /// For `succeeded` (at least `money`).
    pub succeeded: u8,
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals {
            money: 1,
            succeeded: 1,
        }
    }
}

/// What the job allows beyond the case itself: reviewers, dismiss reasons, write-off limits.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// How many reviewers a decision needs.
    pub approvals: Approvals,
    /// `dismiss_reasons`: a `dismiss` must give one of them.
    pub dismiss_reasons: &'a [String],
    /// `write_off_limit`: currency → the largest difference one `accept difference` settles
    /// alone; above it, the decision needs a second, different reviewer.
    pub write_off_limit: &'a BTreeMap<String, Decimal>,
    /// Whether reviewers are authenticated people (`[[reviewer]]`: an OS user each), so two
    /// reviewers can be told apart; without, a name is typed and no second reviewer counts.
    pub reviewers_known: bool,
}

/// Whether `decision` on `case` moves money, now or through the next run, so that it waits
/// for a second reviewer under `approvals = 2`: `failed` and `succeeded` (a guarded
/// transition), `confirm N` when a payment of the case is still unresolved (UNKNOWN, REVIEW or
/// SUBMITTING: the next run resolves it on the confirmed line, and may resolve a look-alike
/// on the line's absence), `accept difference` (money the provider did not pay, or paid
/// beyond the ledger, is written off) and `dismiss` of a CRITICAL case (it takes paid-twice or
/// paid-after-failed money off the sheet and the email). An `accept difference` above
/// `write_off_limit` needs a second reviewer whatever `approvals` says ([`check`]).
pub fn moves_money(decision: Decision, case: &StoredCase) -> bool {
    match decision {
        Decision::Failed | Decision::Succeeded => true,
        Decision::Confirm(_) => case
            .payments
            .iter()
            .any(|p| matches!(p.status.as_str(), "UNKNOWN" | "REVIEW" | "SUBMITTING")),
        Decision::Dismiss => case.severity == "CRITICAL",
        Decision::Escalate => false,
        Decision::AcceptDifference => true,
    }
}

/// The key and fingerprint the hidden `check` cell holds, or why it holds none.
pub fn parse_check(row: &SheetRow) -> Result<(&str, &str), String> {
    let mut parts = row.check.split_whitespace();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(key), Some(fp), None)
            if key.starts_with("C-")
                && fp.len() == 64
                && fp.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok((key, fp))
        }
        _ if row.check.is_empty() => Err(
            "the row has no hidden check cell (hint: decide in the Decide sheet a run wrote; \
             rows added by hand cannot be applied)"
                .into(),
        ),
        _ => Err("the hidden check cell is not a case key and fingerprint: it was edited".into()),
    }
}

/// A status decision the row asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    /// The case's one payment, as the run that stored the case saw it.
    pub payment: CasePayment,
    /// FAILED or SUCCEEDED.
    pub to: Status,
}

/// What to do with a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Dismiss the case: its tickets are resolved, it stays dismissed while its evidence stays.
    Dismiss,
    /// Escalate it: it stays open, marked.
    Escalate,
    /// Candidate N is the match: recorded as evidence later runs keep.
    Confirm(CaseCandidate),
    /// The case's one candidate is the match with its amount difference accepted: recorded as
    /// evidence later runs keep.
    Accept(CaseCandidate, Difference),
    /// A guarded status transition.
    Status(StatusChange),
    /// The first of two reviewers: the decision waits for a second, different one; with why,
    /// when the job does not ask two reviewers for every such decision (a difference above
    /// `write_off_limit`).
    Wait(Option<String>),
}

/// The amount difference an `accept difference` settles, against the job's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Line minus payment, minor units.
    pub minor: i64,
    /// The difference as people read it: `-0.50 EUR`.
    pub text: String,
    /// The currency's `write_off_limit`: `1.00 EUR`.
    pub limit: String,
    /// Whether the difference (absolute) is above the limit: a second reviewer must approve.
    pub above: bool,
}

impl Difference {
    /// How the decision is told in the history: `accept difference of -0.50 EUR (within
    /// write_off_limit 1.00 EUR)`.
    pub fn told(&self) -> String {
        format!(
            "accept difference of {} ({} write_off_limit {})",
            self.text,
            if self.above { "above" } else { "within" },
            self.limit
        )
    }
}

/// The verdict on a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it; with the earlier decision it approves when it is the second reviewer's.
    Apply(Decision, Box<Plan>, Option<DecisionRecord>),
    /// Already done exactly so: nothing changes.
    Unchanged(String),
    /// Refused, with the reason.
    Refused(String),
}

/// What the caller read about the row's case.
#[derive(Debug, Clone, Copy)]
pub struct Now<'a> {
    /// The case as the latest committed run stored it (None: no such case).
    pub case: Option<&'a StoredCase>,
    /// The run that first stored the row's fingerprint for this case (None: never one).
    pub fingerprint_run: Option<&'a str>,
    /// The case's decisions, oldest first.
    pub decisions: &'a [DecisionRecord],
}

/// The decisions the stored case offers ([`cases::choices`], as for the sheet).
pub fn offered(case: &StoredCase) -> Vec<Decision> {
    let Some(kind) = CaseKind::parse(&case.kind) else {
        return vec![Decision::Dismiss, Decision::Escalate];
    };
    let statuses: Vec<Status> = case
        .payments
        .iter()
        .map(|p| Status::parse(&p.status).unwrap_or(Status::Pending))
        .collect();
    let difference = matches!(case.candidates.as_slice(), [c] if c.amounts.is_some());
    cases::choices(kind, case.candidates.len(), &statuses, difference)
}

fn offered_text(case: &StoredCase, reasons: &[String]) -> String {
    offered(case)
        .iter()
        .map(|d| match d {
            Decision::Dismiss => format!("dismiss: <{}>", reasons.join(" | ")),
            _ => d.text(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reason `reason` as the job spells it, or why the decision cannot take it: `dismiss`
/// needs one of the job's `dismiss_reasons` (case ignored), the others take none.
pub fn reason(
    decision: Decision,
    reason: Option<&str>,
    reasons: &[String],
) -> Result<Option<String>, String> {
    let allowed = || {
        reasons
            .iter()
            .map(|r| format!("\"dismiss: {r}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (decision, reason) {
        (Decision::Dismiss, None) => Err(format!(
            "dismiss needs a reason after a colon, one of: {}",
            allowed()
        )),
        (Decision::Dismiss, Some(r)) => match reasons.iter().find(|k| k.eq_ignore_ascii_case(r)) {
            Some(k) => Ok(Some(k.clone())),
            None => Err(format!(
                "{:?} is not a dismiss reason of this job (dismiss_reasons); allowed: {}",
                crate::textsafe::terminal(r),
                allowed()
            )),
        },
        (d, Some(_)) => Err(format!(
            "{} takes no reason after a colon (only dismiss does; put words in the note)",
            d.text()
        )),
        (_, None) => Ok(None),
    }
}

/// Whether `accept difference` may settle `c`: its difference (line minus payment) against
/// the currency's `write_off_limit` (above it, a second reviewer must approve), or why not (no
/// amounts recorded; no limit for the currency).
fn acceptable(
    key: &str,
    c: &CaseCandidate,
    limits: &BTreeMap<String, Decimal>,
) -> Result<Difference, String> {
    let Some(a) = &c.amounts else {
        return Err(format!(
            "case {key} has no amount difference recorded (it was stored before amounts were \
             kept, or its difference is not one of amount alone): decide on the next run's report"
        ));
    };
    let exp = crate::money::currency(&a.currency)
        .map(|(_, e)| e)
        .map_err(|e| format!("case {key}: currency {}: {e}", a.currency))?;
    let diff = a.difference();
    let shown = Decimal::from_i128_with_scale(i128::from(diff), exp);
    let Some(limit) = limits.get(&a.currency) else {
        return Err(format!(
            "no write_off_limit for {} in this job: accept difference is refused (the \
             difference is {shown} {}; confirm, escalate or dismiss with a reason instead)",
            a.currency, a.currency
        ));
    };
    Ok(Difference {
        minor: diff,
        text: format!("{shown} {}", a.currency),
        limit: format!("{limit} {}", a.currency),
        above: shown.abs() > *limit,
    })
}

/// Checks `row` (made by `actor`) against the case as it is now.
pub fn check(row: &SheetRow, actor: &str, now: Now<'_>, rules: &Rules<'_>) -> Verdict {
    let approvals = rules.approvals;
    let (key, fingerprint) = match parse_check(row) {
        Ok(k) => k,
        Err(e) => return Verdict::Refused(e),
    };
    if row.case != key {
        return Verdict::Refused(format!(
            "the row's check cell names case {key}, not {:?} of its case cell: one of them was \
             edited or moved without the other (a check copied from another row, or a sort of \
             part of the table: sort the whole table, e.g. from a filter drop-down); the row \
             decides neither case",
            crate::textsafe::terminal(&row.case)
        ));
    }
    let Some(case) = now.case else {
        return Verdict::Refused(format!(
            "unknown case {key}: no committed run stored it (hint: a dry run's report cannot \
             be applied)"
        ));
    };
    if case.status == "SUPERSEDED" {
        return Verdict::Refused(format!(
            "no run holds case {key} open any more: {} (decide on the latest report)",
            case.status_note
                .as_deref()
                .unwrap_or("its evidence changed")
        ));
    }
    if case.fingerprint != fingerprint {
        return Verdict::Refused(match now.fingerprint_run {
            Some(run) => format!(
                "stale: the evidence changed since this report (it shows run {run}'s evidence; \
                 run {} stored other evidence for the case): decide again on the latest report",
                case.last_seen_run_id
            ),
            None => format!(
                "the fingerprint is not one recon ever wrote for case {key}: the check cell was \
                 edited"
            ),
        });
    }
    let Some((decision, asked_reason)) = Decision::parse_with_reason(&row.decision) else {
        return Verdict::Refused(format!(
            "{:?} is not a decision (offered for this case: {})",
            row.decision,
            offered_text(case, rules.dismiss_reasons)
        ));
    };
    if !offered(case).contains(&decision) {
        return Verdict::Refused(format!(
            "{} is not offered for this case (offered: {})",
            decision.text(),
            offered_text(case, rules.dismiss_reasons)
        ));
    }
    let why = match reason(decision, asked_reason.as_deref(), rules.dismiss_reasons) {
        Ok(r) => r,
        Err(why) => return Verdict::Refused(why),
    };
    let text = decision.text_with(why.as_deref());
    let same = |d: &&DecisionRecord| d.decision == text && d.fingerprint == fingerprint;
    let me = |name: &str| crate::textsafe::same_name(name, actor);
    // Settled on this evidence: only the same decision by one of its reviewers is "unchanged".
    if matches!(case.status.as_str(), "DISMISSED" | "DECIDED")
        || (case.status == "ESCALATED" && decision == Decision::Escalate)
    {
        let last = now
            .decisions
            .iter()
            .rev()
            .find(|d| d.state == "APPLIED" && d.fingerprint == fingerprint);
        return match last {
            Some(d) if same(&d) && (me(&d.actor) || d.approved_by.as_deref().is_some_and(me)) => {
                Verdict::Unchanged(match &d.approved_by {
                    Some(by) => format!(
                        "already applied on {}: {} by {}, approved by {by}",
                        d.decided_at, d.decision, d.actor
                    ),
                    None => format!("already applied by you on {}", d.decided_at),
                })
            }
            _ => Verdict::Refused(format!(
                "already {}: {} by {}{}",
                case.status.to_lowercase(),
                last.map(|d| d.decision.as_str()).unwrap_or("decided"),
                case.status_by.as_deref().unwrap_or("?"),
                case.status_note
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            )),
        };
    }
    let plan = match decision {
        Decision::Dismiss => Plan::Dismiss,
        Decision::AcceptDifference => {
            let [c] = case.candidates.as_slice() else {
                return Verdict::Refused(format!("case {key} has not exactly one candidate"));
            };
            match acceptable(key, c, rules.write_off_limit) {
                Ok(d) if d.above && !rules.reviewers_known => {
                    return Verdict::Refused(format!(
                        "the difference {} is above write_off_limit {}: it needs a second, \
                         different reviewer, and this job cannot tell two reviewers apart (no \
                         [[reviewer]] in the job file: a name is typed): not accepted (hint: \
                         configure [[reviewer]] tables, a name with the OS login or uid of each \
                         reviewer, so another reviewer can approve it; or escalate it)",
                        d.text, d.limit
                    ));
                }
                Ok(d) => Plan::Accept(c.clone(), d),
                Err(why) => return Verdict::Refused(why),
            }
        }
        Decision::Escalate => Plan::Escalate,
        Decision::Confirm(n) => match case.candidates.iter().find(|c| c.number == n) {
            Some(c) => Plan::Confirm(c.clone()),
            None => {
                return Verdict::Refused(format!("case {key} has no candidate {n}"));
            }
        },
        Decision::Failed | Decision::Succeeded => {
            let [payment] = case.payments.as_slice() else {
                return Verdict::Refused(format!("case {key} is not about one payment"));
            };
            Plan::Status(StatusChange {
                payment: payment.clone(),
                to: if decision == Decision::Failed {
                    Status::Failed
                } else {
                    Status::Succeeded
                },
            })
        }
    };
    let needed = match decision {
        _ if !moves_money(decision, case) => 1,
        Decision::Succeeded => approvals.succeeded,
        _ => approvals.money,
    };
    // A difference above the limit is written off by two people, whatever `approvals` says.
    let above = match &plan {
        Plan::Accept(_, d) if d.above => Some(format!(
            "the difference {} is above write_off_limit {}: waiting for a second reviewer \
             (another reviewer applying the same decision approves it)",
            d.text, d.limit
        )),
        _ => None,
    };
    let needed = if above.is_some() { 2 } else { needed };
    if needed < 2 {
        return Verdict::Apply(decision, Box::new(plan), None);
    }
    let waiting: Vec<&DecisionRecord> = now
        .decisions
        .iter()
        .filter(|d| d.state == "WAITING")
        .filter(same)
        .collect();
    if let Some(first) = waiting.iter().find(|d| !me(&d.actor)) {
        Verdict::Apply(decision, Box::new(plan), Some((*first).clone()))
    } else if let Some(mine) = waiting.first() {
        Verdict::Refused(format!(
            "you made this decision on {}: it waits for a second, different reviewer \
             (nobody approves their own decision){}",
            mine.decided_at,
            match &plan {
                Plan::Accept(_, d) if d.above => format!(
                    "; the difference {} is above write_off_limit {}",
                    d.text, d.limit
                ),
                _ => String::new(),
            }
        ))
    } else {
        Verdict::Apply(decision, Box::new(Plan::Wait(above)), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const FP2: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn case(kind: &str, status: &str) -> StoredCase {
        StoredCase {
            key: "C-1".into(),
            kind: kind.into(),
            severity: "HIGH".into(),
            outcome: "AMBIGUOUS".into(),
            fingerprint: FP.into(),
            what: String::new(),
            why: String::new(),
            at_risk: String::new(),
            value: None,
            payments: vec![CasePayment {
                payment_id: "P-1".into(),
                status: status.into(),
                attempt_id: Some("A-1".into()),
            }],
            candidates: vec![CaseCandidate {
                number: 1,
                payment_id: "P-1".into(),
                source: "psp".into(),
                line_id: "L-1".into(),
                text: String::new(),
                reference: None,
                amounts: None,
            }],
            ticket_ids: vec![1],
            lines: vec![("psp".into(), "L-1".into())],
            status: "OPEN".into(),
            status_fingerprint: None,
            status_by: None,
            status_note: None,
            first_seen_run_id: "r1".into(),
            last_seen_run_id: "r2".into(),
            updated_at: String::new(),
        }
    }

    fn row(decision: &str, fp: &str) -> SheetRow {
        SheetRow {
            row_no: 2,
            case: "C-1".into(),
            check: format!("C-1 {fp}"),
            decision: decision.into(),
            note: String::new(),
            reviewer: String::new(),
            refused: None,
            same_as: None,
        }
    }

    fn waiting(actor: &str) -> DecisionRecord {
        DecisionRecord {
            id: 7,
            case_key: "C-1".into(),
            fingerprint: FP.into(),
            decision: "failed".into(),
            actor: actor.into(),
            note: String::new(),
            state: "WAITING".into(),
            approved_by: None,
            decided_at: "t".into(),
        }
    }

    fn verdict(r: &SheetRow, c: &StoredCase, decisions: &[DecisionRecord], two: bool) -> Verdict {
        let approvals = Approvals {
            money: if two { 2 } else { 1 },
            succeeded: if two { 2 } else { 1 },
        };
        let now = Now {
            case: Some(c),
            fingerprint_run: Some("r1"),
            decisions,
        };
        check(
            r,
            "bob",
            now,
            &Rules {
                approvals,
                dismiss_reasons: &reasons(),
                write_off_limit: &BTreeMap::new(),
                reviewers_known: two,
            },
        )
    }

    fn reasons() -> Vec<String> {
        crate::config::default_dismiss_reasons()
    }

    fn refused(v: Verdict) -> String {
        match v {
            Verdict::Refused(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn only_offered_decisions_on_the_current_evidence_are_applied() {
        let near = case("near miss", "UNKNOWN");
        assert!(matches!(
            verdict(&row("confirm 1", FP), &near, &[], false),
            Verdict::Apply(Decision::Confirm(1), p, None) if matches!(*p, Plan::Confirm(_))
        ));
        assert!(refused(verdict(&row("confirm 2", FP), &near, &[], false)).contains("not offered"));
        assert!(refused(verdict(&row("pay it", FP), &near, &[], false)).contains("not a decision"));
        // A payment already SUCCEEDED is not a human's to fail.
        let paid = case("exception", "SUCCEEDED");
        assert!(refused(verdict(&row("failed", FP), &paid, &[], false)).contains("not offered"));
        // Evidence of an earlier run: stale; a fingerprint recon never wrote: edited.
        assert!(
            refused(verdict(
                &row("dismiss: written off", FP2),
                &near,
                &[],
                false
            ))
            .starts_with("stale")
        );
        let now = Now {
            case: Some(&near),
            fingerprint_run: None,
            decisions: &[],
        };
        assert!(
            refused(check(
                &row("dismiss: written off", FP2),
                "bob",
                now,
                &Rules {
                    approvals: Approvals::default(),
                    dismiss_reasons: &reasons(),
                    write_off_limit: &BTreeMap::new(),
                    reviewers_known: false,
                }
            ))
            .contains("edited")
        );
        let mut moved = row("dismiss: written off", FP);
        moved.case = "C-2".into();
        assert!(refused(verdict(&moved, &near, &[], false)).contains("edited or moved"));
        let mut blank = row("dismiss: written off", FP);
        blank.check.clear();
        assert!(refused(verdict(&blank, &near, &[], false)).contains("no hidden check"));
    }

    #[test]
    fn failed_needs_two_different_reviewers_when_configured() {
        let c = case("near miss", "UNKNOWN");
        assert_eq!(
            verdict(&row("failed", FP), &c, &[], true),
            Verdict::Apply(Decision::Failed, Box::new(Plan::Wait(None)), None)
        );
        // Alice's decision waits: Bob approves it.
        match verdict(&row("failed", FP), &c, &[waiting("alice")], true) {
            Verdict::Apply(Decision::Failed, p, Some(first)) if matches!(*p, Plan::Status(_)) => {
                let Plan::Status(s) = *p else { unreachable!() };
                assert_eq!(s.to, Status::Failed);
                assert_eq!(first.actor, "alice");
            }
            other => panic!("{other:?}"),
        }
        // Bob's own waiting decision is never approved by Bob, however he spells his name.
        for me in ["bob", "Bob", "ＢＯＢ"] {
            assert!(
                refused(verdict(&row("failed", FP), &c, &[waiting(me)], true))
                    .contains("nobody approves their own"),
                "{me}"
            );
        }
        // One reviewer is enough without the setting.
        assert!(matches!(
            verdict(&row("failed", FP), &c, &[], false),
            Verdict::Apply(Decision::Failed, p, None) if matches!(*p, Plan::Status(_))
        ));
    }

    #[test]
    fn a_confirm_that_resolves_money_and_a_critical_dismiss_wait_for_a_second_reviewer() {
        // A confirm on a case whose payment is unresolved: the next run resolves it.
        let unresolved = case("ambiguity", "UNKNOWN");
        assert_eq!(
            verdict(&row("confirm 1", FP), &unresolved, &[], true),
            Verdict::Apply(Decision::Confirm(1), Box::new(Plan::Wait(None)), None)
        );
        let mut first = waiting("alice");
        first.decision = "confirm 1".into();
        assert!(matches!(
            verdict(&row("confirm 1", FP), &unresolved, std::slice::from_ref(&first), true),
            Verdict::Apply(Decision::Confirm(1), p, Some(f)) if matches!(*p, Plan::Confirm(_)) && f.actor == "alice"
        ));
        // Another decision than the waiting one is a first decision of its own.
        assert_eq!(
            verdict(
                &row("dismiss: written off", FP),
                &unresolved,
                &[first],
                true
            ),
            Verdict::Apply(Decision::Dismiss, Box::new(Plan::Dismiss), None)
        );
        // A confirm between payments already SUCCEEDED moves no money.
        let settled = case("ambiguity", "SUCCEEDED");
        assert!(matches!(
            verdict(&row("confirm 1", FP), &settled, &[], true),
            Verdict::Apply(Decision::Confirm(1), p, None) if matches!(*p, Plan::Confirm(_))
        ));
        // Dismissing a critical case waits; a high one does not.
        let mut critical = case("exception", "FAILED");
        critical.severity = "CRITICAL".into();
        assert_eq!(
            verdict(&row("dismiss: written off", FP), &critical, &[], true),
            Verdict::Apply(Decision::Dismiss, Box::new(Plan::Wait(None)), None)
        );
        let high = case("exception", "FAILED");
        assert_eq!(
            verdict(&row("dismiss: written off", FP), &high, &[], true),
            Verdict::Apply(Decision::Dismiss, Box::new(Plan::Dismiss), None)
        );
        assert_eq!(
            verdict(&row("escalate", FP), &critical, &[], true),
            Verdict::Apply(Decision::Escalate, Box::new(Plan::Escalate), None)
        );
    }

    /// `accept difference` on a near miss of 40.00 EUR paid 39.50, by bob, with a 0.49 EUR
    /// limit (the 0.50 difference is above it), `approvals = 1`.
    fn accept_above(decisions: &[DecisionRecord], reviewers_known: bool) -> Verdict {
        let mut c = case("near miss", "UNKNOWN");
        c.candidates[0].amounts = Some(crate::store::cases::CandidateAmounts {
            currency: "EUR".into(),
            payment_minor: 4000,
            line_minor: 3950,
        });
        let limits = BTreeMap::from([("EUR".to_string(), Decimal::new(49, 2))]);
        check(
            &row("accept difference", FP),
            "bob",
            Now {
                case: Some(&c),
                fingerprint_run: Some("r1"),
                decisions,
            },
            &Rules {
                approvals: Approvals::default(),
                dismiss_reasons: &reasons(),
                write_off_limit: &limits,
                reviewers_known,
            },
        )
    }

    #[test]
    fn a_difference_above_the_limit_waits_for_a_second_reviewer_even_with_one_approval() {
        let why = "the difference -0.50 EUR is above write_off_limit 0.49 EUR: waiting for a \
                   second reviewer";
        match accept_above(&[], true) {
            Verdict::Apply(Decision::AcceptDifference, p, None) => match *p {
                Plan::Wait(Some(w)) => assert!(w.starts_with(why), "{w}"),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        let mut first = waiting("alice");
        first.decision = "accept difference".into();
        match accept_above(std::slice::from_ref(&first), true) {
            Verdict::Apply(Decision::AcceptDifference, p, Some(f)) => {
                assert_eq!(f.actor, "alice");
                let Plan::Accept(_, d) = *p else {
                    panic!("{p:?}")
                };
                assert_eq!((d.minor, d.above), (-50, true));
                assert_eq!(
                    d.told(),
                    "accept difference of -0.50 EUR (above write_off_limit 0.49 EUR)"
                );
            }
            other => panic!("{other:?}"),
        }
        // Bob's own waiting decision: refused, saying why it waits.
        let why = refused(accept_above(
            &[waiting("bob")].map(|mut w| {
                w.decision = "accept difference".into();
                w
            }),
            true,
        ));
        assert!(
            why.contains("nobody approves their own") && why.contains("above write_off_limit"),
            "{why}"
        );
        // Typed names cannot be two people: refused, saying what to configure.
        let why = refused(accept_above(&[], false));
        assert!(
            why.contains("above write_off_limit 0.49 EUR") && why.contains("[[reviewer]]"),
            "{why}"
        );
    }

    #[test]
    fn a_superseded_case_is_refused_with_why() {
        let mut c = case("ambiguity", "UNKNOWN");
        c.status = "SUPERSEDED".into();
        c.status_note = Some("regrouped as case C-2 by run r3".into());
        let why = refused(verdict(&row("confirm 1", FP), &c, &[], false));
        assert!(why.contains("regrouped as case C-2 by run r3"), "{why}");
    }

    #[test]
    fn a_settled_case_is_unchanged_for_its_decider_and_refused_for_others() {
        let mut c = case("near miss", "UNKNOWN");
        c.status = "DISMISSED".into();
        c.status_by = Some("bob".into());
        let mut d = waiting("bob");
        d.state = "APPLIED".into();
        d.decision = "dismiss: written off".into();
        assert!(matches!(
            verdict(
                &row("dismiss: written off", FP),
                &c,
                std::slice::from_ref(&d),
                false
            ),
            Verdict::Unchanged(_)
        ));
        // Approved by Bob: Bob applying it again is unchanged too.
        d.actor = "alice".into();
        d.approved_by = Some("Bob".into());
        assert!(matches!(
            verdict(
                &row("dismiss: written off", FP),
                &c,
                std::slice::from_ref(&d),
                false
            ),
            Verdict::Unchanged(_)
        ));
        d.approved_by = None;
        assert!(
            refused(verdict(&row("dismiss: written off", FP), &c, &[d], false))
                .contains("already dismissed")
        );
    }
}
