//! Cases as the latest committed run stored them (`review_cases`, with every fingerprint a
//! case had in `review_case_evidence`), reviewers' decisions (`case_decisions`), the decision
//! files applied (`decision_files`, a bounded summary each), what each run's pass over the
//! decisions inbox did (`inbox_records`) and the confirmed lines later runs keep
//! (`confirmed_lines`).

use super::sql::{Bind, Row};
use super::{Tx, db_err};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A payment of a stored case, as the run that stored it saw it in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CasePayment {
    /// Payment id.
    pub payment_id: String,
    /// Its status in the ledger when the run loaded it.
    pub status: String,
    /// Its current attempt then: a status decision is guarded on it.
    pub attempt_id: Option<String>,
}

/// A numbered candidate of a stored case: one (payment, line) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseCandidate {
    /// 1, 2, … as the Decide sheet numbers them.
    pub number: u32,
    /// The payment.
    pub payment_id: String,
    /// The line's source.
    pub source: String,
    /// The line's id (provider id or content id).
    pub line_id: String,
    /// `2: P-7 ↔ L-9 (99.00 EUR, 2026-11-10T10:05:00Z)`.
    pub text: String,
    /// The line's statement reference as the run saw it (a confirmation is made on it: a
    /// provider that later names another payment there contradicts the reviewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// When the case's difference is one of amount alone (an AMOUNT_MISMATCH or a near miss
    /// with this one candidate, its line in the payment's currency and sign): the
    /// amounts, so `accept difference` can be checked against `write_off_limit`. Absent for
    /// every other candidate and in cases stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amounts: Option<CandidateAmounts>,
}

/// A candidate's payment and line amounts, in their one currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateAmounts {
    /// ISO 4217 code of both.
    pub currency: String,
    /// The payment's amount, minor units.
    pub payment_minor: i64,
    /// The line's amount, minor units.
    pub line_minor: i64,
}

impl CandidateAmounts {
    /// Line minus payment, minor units (what an `accept difference` accepts).
    pub fn difference(&self) -> i64 {
        self.line_minor.saturating_sub(self.payment_minor)
    }
}

/// A `confirm N` that took effect: line (source, id) is the payment's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// The line's source.
    pub source: String,
    /// The line's id.
    pub line_id: String,
    /// The payment it is.
    pub payment_id: String,
    /// The case it was decided in.
    pub case_key: String,
    /// The reviewer who decided.
    pub actor: String,
    /// The second reviewer who approved, under `approvals = 2`.
    pub approved_by: Option<String>,
    /// The line's reference when the reviewer saw it (None: it had none).
    pub reference: Option<String>,
    /// `accept difference`: the line's amount minus the payment's (minor units) the reviewer
    /// accepted; None for a plain `confirm N`.
    pub accepted_difference_minor: Option<i64>,
}

impl Confirmation {
    /// `alice` or `alice, approved by bob`.
    pub fn who(&self) -> String {
        match &self.approved_by {
            Some(b) => format!("{}, approved by {b}", self.actor),
            None => self.actor.clone(),
        }
    }
}

/// One case as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCase {
    /// Stable key (`C-…`).
    pub key: String,
    /// Kind name (`ambiguity`, `near miss`, …).
    pub kind: String,
    /// Severity name.
    pub severity: String,
    /// The most severe row's outcome.
    pub outcome: String,
    /// sha256 of the decision-relevant evidence.
    pub fingerprint: String,
    /// What it is (`AMBIGUOUS (near miss)`).
    pub what: String,
    /// One sentence of why.
    pub why: String,
    /// Money at risk as text (`250.00 EUR`).
    pub at_risk: String,
    /// What the case is ordered by, in millionths: its value in the reporting currency with
    /// that currency, or (currency empty, stored NULL) the units of its largest amount when
    /// there is no reporting currency or no rate.
    pub value: Option<(i64, String)>,
    /// Its payments.
    pub payments: Vec<CasePayment>,
    /// Its numbered candidates.
    pub candidates: Vec<CaseCandidate>,
    /// Its tickets.
    pub ticket_ids: Vec<i64>,
    /// Its statement lines: (source, line id).
    pub lines: Vec<(String, String)>,
    /// OPEN, ESCALATED, DISMISSED, DECIDED or SUPERSEDED.
    pub status: String,
    /// The fingerprint the status was decided on (None while OPEN).
    pub status_fingerprint: Option<String>,
    /// Who set the status.
    pub status_by: Option<String>,
    /// Their note.
    pub status_note: Option<String>,
    /// The run that stored it first.
    pub first_seen_run_id: String,
    /// The latest run that stored it.
    pub last_seen_run_id: String,
    /// When it last changed.
    pub updated_at: String,
}

/// A case a run stores (the fields a run knows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCase {
    /// Stable key.
    pub key: String,
    /// Kind name.
    pub kind: String,
    /// Severity name.
    pub severity: String,
    /// Outcome name.
    pub outcome: String,
    /// Fingerprint.
    pub fingerprint: String,
    /// What it is.
    pub what: String,
    /// Why.
    pub why: String,
    /// Money at risk as text.
    pub at_risk: String,
    /// The money at risk in the reporting currency in millionths of a unit, and the
    /// currency: the ordering key of `recon cases list` (None: no value).
    pub value: Option<(i64, String)>,
    /// Payments (JSON text of `[CasePayment]`).
    pub payments: String,
    /// Candidates (JSON text of `[CaseCandidate]`).
    pub candidates: String,
    /// Tickets (JSON text of `[i64]`).
    pub ticket_ids: String,
    /// Lines (JSON text of `[[source, line id]]`).
    pub lines: String,
}

/// A case's state as the email's markers read it ([`Tx::case_states`]).
#[derive(Debug, Clone)]
pub struct CaseState {
    /// Case key.
    pub key: String,
    /// OPEN, ESCALATED, DISMISSED, DECIDED or SUPERSEDED.
    pub status: String,
    /// Who set the status last (a reviewer, or `recon`); kept when new evidence opens it again.
    pub status_by: Option<String>,
    /// Their note.
    pub status_note: Option<String>,
    /// The run that first stored the case.
    pub first_seen_run_id: String,
    /// The run that first stored the case's current evidence (fingerprint).
    pub evidence_run_id: Option<String>,
}

/// An applied decision and what its case was about ([`Tx::decisions_applied_since`]).
#[derive(Debug, Clone)]
pub struct AppliedDecision {
    /// The case it was made on.
    pub case_key: String,
    /// `confirm 1`, `failed`, …
    pub decision: String,
    /// Who made it.
    pub actor: String,
    /// The case's payment ids.
    pub payments: Vec<String>,
    /// The case's statement lines (source, line id), candidates' included.
    pub lines: Vec<(String, String)>,
}

/// A decision recorded for a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    /// Row id.
    pub id: i64,
    /// Case key.
    pub case_key: String,
    /// The evidence it was made on.
    pub fingerprint: String,
    /// `confirm 2`, `failed`, …
    pub decision: String,
    /// Who made it.
    pub actor: String,
    /// Their note.
    pub note: String,
    /// WAITING, APPLIED or SUPERSEDED.
    pub state: String,
    /// The second reviewer, once approved.
    pub approved_by: Option<String>,
    /// When.
    pub decided_at: String,
}

/// A refused row as `decision_files` keeps it: (row number, case, why).
pub type RefusedRow = (u32, String, String);

/// A decision file applied, as `decision_files` keeps it: bounded, whatever the file's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionFileRecord {
    /// When.
    pub applied_at: String,
    /// Where it was read (None before recon recorded it).
    pub path: Option<String>,
    /// Where recon wrote its result file.
    pub result_file: Option<String>,
    /// Rows per result (`applied`, `refused`, …); empty when not recorded.
    pub counts: std::collections::BTreeMap<String, usize>,
    /// The first refused rows.
    pub refused: Vec<RefusedRow>,
}

/// A decision file to record as applied.
#[derive(Debug, Clone, Copy)]
pub struct NewDecisionFile<'a> {
    /// sha256 of its bytes.
    pub sha256: &'a str,
    /// Who applied it.
    pub actor: &'a str,
    /// Its file name.
    pub file_name: &'a str,
    /// Where it was read.
    pub path: &'a str,
    /// Where its result file is written.
    pub result_file: Option<&'a str>,
    /// Rows per result.
    pub counts: &'a std::collections::BTreeMap<String, usize>,
    /// The first refused rows (the caller bounds them).
    pub refused: &'a [RefusedRow],
    /// Now (UTC text).
    pub now: &'a str,
}

/// The columns of a case, in the order [`StoredCase`] has them.
const CASE_COLUMNS: &str = "case_key, kind, severity, outcome, fingerprint, what, why, at_risk, \
    payments, candidates, ticket_ids, status, status_fingerprint, status_by, status_note, \
    first_seen_run_id, last_seen_run_id, updated_at, lines, value_micros, value_currency";

fn json<T: for<'de> Deserialize<'de>>(text: &str, what: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(format!("{what}: {e}").into()))
}

fn case_from(r: Row<'_>) -> Result<StoredCase, sqlx::Error> {
    Ok(StoredCase {
        key: r.text("case_key")?,
        kind: r.text("kind")?,
        severity: r.text("severity")?,
        outcome: r.text("outcome")?,
        fingerprint: r.text("fingerprint")?,
        what: r.text("what")?,
        why: r.text("why")?,
        at_risk: r.text("at_risk")?,
        value: match (r.opt_int("value_micros")?, r.opt_text("value_currency")?) {
            (Some(v), Some(c)) => Some((v, c)),
            _ => None,
        },
        payments: json(&r.text("payments")?, "review_cases.payments")?,
        candidates: json(&r.text("candidates")?, "review_cases.candidates")?,
        ticket_ids: json(&r.text("ticket_ids")?, "review_cases.ticket_ids")?,
        lines: match r.opt_text("lines")? {
            Some(t) => json(&t, "review_cases.lines")?,
            None => Vec::new(),
        },
        status: r.text("status")?,
        status_fingerprint: r.opt_text("status_fingerprint")?,
        status_by: r.opt_text("status_by")?,
        status_note: r.opt_text("status_note")?,
        first_seen_run_id: r.text("first_seen_run_id")?,
        last_seen_run_id: r.text("last_seen_run_id")?,
        updated_at: r.ts("updated_at")?,
    })
}

fn decision_from(r: Row<'_>) -> Result<DecisionRecord, sqlx::Error> {
    Ok(DecisionRecord {
        id: r.int("id")?,
        case_key: r.text("case_key")?,
        fingerprint: r.text("fingerprint")?,
        decision: r.text("decision")?,
        actor: r.text("actor")?,
        note: r.text("note")?,
        state: r.text("state")?,
        approved_by: r.opt_text("approved_by")?,
        decided_at: r.ts("decided_at")?,
    })
}

const DECISION_COLUMNS: &str =
    "id, case_key, fingerprint, decision, actor, note, state, approved_by, decided_at";

impl Tx {
    /// Stores a run's cases: a new case is OPEN; a known one takes the run's evidence and
    /// keeps the status a decision gave it while its fingerprint is the one that status was
    /// decided on (otherwise it is OPEN again: the evidence changed). Every fingerprint is
    /// remembered with the run that stored it first.
    pub async fn upsert_cases(
        &mut self,
        cases: &[NewCase],
        (run_id, view): (&str, &str),
        now: &str,
    ) -> Result<()> {
        let err = db_err("review cases");
        // 19 binds a row (the batch sizes are made for 14): half a batch a statement.
        for chunk in cases.chunks(self.batch() / 2) {
            let mut q = self.sql(
                "INSERT INTO review_cases (case_key, kind, severity, outcome, fingerprint, what, \
                 why, at_risk, payments, candidates, ticket_ids, status, first_seen_run_id, \
                 last_seen_run_id, updated_at, evidence_as_of, lines, value_micros, \
                 value_currency) ",
            );
            q.push_values(chunk, |mut b, c| {
                b.push_bind(&c.key)
                    .push_bind(&c.kind)
                    .push_bind(&c.severity)
                    .push_bind(&c.outcome)
                    .push_bind(&c.fingerprint)
                    .push_bind(&c.what)
                    .push_bind(&c.why)
                    .push_bind(&c.at_risk)
                    .push_bind(&c.payments)
                    .push_bind(&c.candidates)
                    .push_bind(&c.ticket_ids)
                    .push_bind("OPEN")
                    .push_bind(run_id)
                    .push_bind(run_id)
                    .push_bind(Bind::Ts(now))
                    .push_bind(view)
                    .push_bind(&c.lines)
                    .push_bind(c.value.as_ref().map(|(v, _)| *v))
                    .push_bind(
                        c.value
                            .as_ref()
                            .map(|(_, c)| c.as_str())
                            .filter(|c| !c.is_empty()),
                    );
            });
            // A run that saw less than the one that stored the case last (an earlier as-of)
            // leaves it as it is. A superseded case stored again is open again.
            q.push(
                " ON CONFLICT (case_key) DO UPDATE SET kind = excluded.kind, \
                 severity = excluded.severity, outcome = excluded.outcome, \
                 fingerprint = excluded.fingerprint, what = excluded.what, why = excluded.why, \
                 at_risk = excluded.at_risk, payments = excluded.payments, \
                 candidates = excluded.candidates, ticket_ids = excluded.ticket_ids, \
                 lines = excluded.lines, evidence_as_of = excluded.evidence_as_of, \
                 value_micros = excluded.value_micros, value_currency = excluded.value_currency, \
                 last_seen_run_id = excluded.last_seen_run_id, \
                 updated_at = CASE WHEN review_cases.fingerprint = excluded.fingerprint \
                     AND review_cases.status <> 'SUPERSEDED' \
                     THEN review_cases.updated_at ELSE excluded.updated_at END, \
                 status = CASE WHEN review_cases.status <> 'SUPERSEDED' \
                     AND review_cases.status_fingerprint = excluded.fingerprint \
                     THEN review_cases.status ELSE 'OPEN' END, \
                 status_by = CASE WHEN review_cases.status = 'SUPERSEDED' \
                     THEN NULL ELSE review_cases.status_by END, \
                 status_note = CASE WHEN review_cases.status = 'SUPERSEDED' \
                     THEN NULL ELSE review_cases.status_note END, \
                 status_fingerprint = CASE WHEN review_cases.status <> 'SUPERSEDED' \
                     AND review_cases.status_fingerprint = excluded.fingerprint \
                     THEN review_cases.status_fingerprint ELSE NULL END \
                 WHERE review_cases.evidence_as_of IS NULL \
                     OR review_cases.evidence_as_of <= excluded.evidence_as_of",
            );
            self.execute(q).await.map_err(&err)?;
            let mut e = self
                .sql("INSERT INTO review_case_evidence (case_key, fingerprint, run_id, seen_at) ");
            e.push_values(chunk, |mut b, c| {
                b.push_bind(&c.key)
                    .push_bind(&c.fingerprint)
                    .push_bind(run_id)
                    .push_bind(Bind::Ts(now));
            });
            e.push(" ON CONFLICT (case_key, fingerprint) DO NOTHING");
            self.execute(e).await.map_err(&err)?;
        }
        Ok(())
    }

    /// The cases still waiting for a decision (OPEN or ESCALATED) that `run_id` did not store
    /// and that a run with this view (its as-of) may judge: stored last by a run that saw no
    /// more.
    pub async fn open_cases_not_stored_by(
        &mut self,
        run_id: &str,
        view: &str,
    ) -> Result<Vec<StoredCase>> {
        let mut q = self.sql("SELECT ");
        q.push(CASE_COLUMNS).push(
            " FROM review_cases WHERE status IN ('OPEN', 'ESCALATED') \
              AND last_seen_run_id <> $1 \
              AND (evidence_as_of IS NULL OR evidence_as_of <= $2) ORDER BY case_key",
        );
        q.bind(run_id).bind(view);
        self.fetch_all(q, case_from)
            .await
            .map_err(db_err("review cases"))
    }

    /// Closes a case no run holds open any more: SUPERSEDED, with why; decisions still
    /// waiting on it are superseded too. False when it was decided meanwhile.
    pub async fn supersede_case(&mut self, key: &str, why: &str, now: &str) -> Result<bool> {
        let mut q = self.sql(
            "UPDATE review_cases SET status = 'SUPERSEDED', status_fingerprint = NULL,
                    status_by = 'recon', status_note = $1, updated_at = $2
             WHERE case_key = $3 AND status IN ('OPEN', 'ESCALATED')",
        );
        q.bind(why).bind(Bind::Ts(now)).bind(key);
        let done = self.execute(q).await.map_err(db_err("review cases"))? == 1;
        if done {
            self.supersede_waiting(key).await?;
        }
        Ok(done)
    }

    /// The ticket id of each of these dedupe keys that exists.
    pub async fn ticket_ids_by_key(&mut self, keys: &[String]) -> Result<HashMap<String, i64>> {
        let mut out = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(self.batch()) {
            let mut q =
                self.sql("SELECT dedupe_key, ticket_id FROM review_tickets WHERE dedupe_key IN (");
            let mut sep = q.separated(", ");
            for k in chunk {
                sep.push_bind(k);
            }
            q.push(")");
            let rows = self
                .fetch_all(q, |r| Ok((r.text(0)?, r.int(1)?)))
                .await
                .map_err(db_err("review tickets"))?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// One case as it is now.
    pub async fn get_case(&mut self, key: &str) -> Result<Option<StoredCase>> {
        let mut q = self.sql("SELECT ");
        q.push(CASE_COLUMNS)
            .push(" FROM review_cases WHERE case_key = $1");
        q.bind(key);
        self.fetch_optional(q, case_from)
            .await
            .map_err(db_err("review cases"))
    }

    /// Cases in the reports' order (`report::cases`): most severe first; then the cases with a
    /// value in the reporting currency by value, largest first, before those without, which
    /// follow by the units of their largest amount (as every case does without a reporting
    /// currency); then the most recently changed. Only those still waiting for a decision
    /// (OPEN or ESCALATED) with `open_only`.
    pub async fn list_cases(&mut self, open_only: bool) -> Result<Vec<StoredCase>> {
        let mut q = self.sql("SELECT ");
        q.push(CASE_COLUMNS).push(
            " FROM review_cases WHERE ($1 = 0 OR status IN ('OPEN', 'ESCALATED'))
              ORDER BY CASE severity WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END,
                       CASE WHEN value_currency IS NULL THEN 1 ELSE 0 END,
                       CASE WHEN value_micros IS NULL THEN 1 ELSE 0 END, value_micros DESC,
                       updated_at DESC, case_key",
        );
        q.bind(i64::from(open_only));
        self.fetch_all(q, case_from)
            .await
            .map_err(db_err("review cases"))
    }

    /// The payment ids of each of these cases that exists.
    pub async fn case_payment_ids(
        &mut self,
        keys: &[&str],
    ) -> Result<HashMap<String, Vec<String>>> {
        let mut out = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(self.batch()) {
            let mut q = self.sql("SELECT case_key, payments FROM review_cases WHERE case_key IN (");
            let mut sep = q.separated(", ");
            for k in chunk {
                sep.push_bind(*k);
            }
            q.push(")");
            let rows = self
                .fetch_all(q, |r| {
                    let payments: Vec<CasePayment> = json(&r.text(1)?, "review_cases.payments")?;
                    Ok((
                        r.text(0)?,
                        payments.into_iter().map(|p| p.payment_id).collect(),
                    ))
                })
                .await
                .map_err(db_err("review cases"))?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// What the email's markers are read from, for each of these cases that exists: its
    /// status as stored now (after the run stored its cases), who set it and their note, the
    /// run that first stored the case, and the run that first stored its current evidence.
    pub async fn case_states(&mut self, keys: &[&str]) -> Result<Vec<CaseState>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(self.batch()) {
            let mut q = self.sql(
                "SELECT c.case_key, c.status, c.status_by, c.status_note, c.first_seen_run_id, \
                        e.run_id \
                 FROM review_cases c LEFT JOIN review_case_evidence e \
                   ON e.case_key = c.case_key AND e.fingerprint = c.fingerprint \
                 WHERE c.case_key IN (",
            );
            let mut sep = q.separated(", ");
            for k in chunk {
                sep.push_bind(*k);
            }
            q.push(")");
            let rows = self
                .fetch_all(q, |r| {
                    Ok(CaseState {
                        key: r.text(0)?,
                        status: r.text(1)?,
                        status_by: r.opt_text(2)?,
                        status_note: r.opt_text(3)?,
                        first_seen_run_id: r.text(4)?,
                        evidence_run_id: r.opt_text(5)?,
                    })
                })
                .await
                .map_err(db_err("review cases"))?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// The decisions applied (by one reviewer, or approved by a second) since `since`, each
    /// with the payments and statement lines of its case (lines and candidates' lines).
    pub async fn decisions_applied_since(&mut self, since: &str) -> Result<Vec<AppliedDecision>> {
        let mut q = self.sql(
            "SELECT d.case_key, d.decision, d.actor, c.payments, c.candidates, c.lines \
             FROM case_decisions d JOIN review_cases c ON c.case_key = d.case_key \
             WHERE d.state = 'APPLIED' AND coalesce(d.approved_at, d.decided_at) >= $1 \
             ORDER BY d.id",
        );
        q.bind(Bind::Ts(since));
        self.fetch_all(q, |r| {
            let payments: Vec<CasePayment> = json(&r.text(3)?, "review_cases.payments")?;
            let candidates: Vec<CaseCandidate> = json(&r.text(4)?, "review_cases.candidates")?;
            let mut lines: Vec<(String, String)> = match r.opt_text(5)? {
                Some(t) => json(&t, "review_cases.lines")?,
                None => Vec::new(),
            };
            lines.extend(candidates.into_iter().map(|c| (c.source, c.line_id)));
            Ok(AppliedDecision {
                case_key: r.text(0)?,
                decision: r.text(1)?,
                actor: r.text(2)?,
                payments: payments.into_iter().map(|p| p.payment_id).collect(),
                lines,
            })
        })
        .await
        .map_err(db_err("case decisions"))
    }

    /// The run that first stored `fingerprint` for the case, if any ever did.
    pub async fn case_fingerprint_run(
        &mut self,
        key: &str,
        fingerprint: &str,
    ) -> Result<Option<String>> {
        let mut q = self.sql(
            "SELECT run_id FROM review_case_evidence WHERE case_key = $1 AND fingerprint = $2",
        );
        q.bind(key).bind(fingerprint);
        self.fetch_optional(q, |r| r.text(0))
            .await
            .map_err(db_err("review cases"))
    }

    /// Sets a case's status, decided on `fingerprint`, if the case still has that evidence.
    /// False when it has other evidence now.
    pub async fn set_case_status(
        &mut self,
        key: &str,
        fingerprint: &str,
        status: &str,
        (actor, note): (&str, &str),
        now: &str,
    ) -> Result<bool> {
        let mut q = self.sql(
            "UPDATE review_cases SET status = $1, status_fingerprint = $2, status_by = $3,
                    status_note = $4, updated_at = $5
             WHERE case_key = $6 AND fingerprint = $2",
        );
        q.bind(status)
            .bind(fingerprint)
            .bind(actor)
            .bind(note)
            .bind(Bind::Ts(now))
            .bind(key);
        Ok(self.execute(q).await.map_err(db_err("review cases"))? == 1)
    }

    /// (case key, fingerprint, status, by) of every case a decision settled or escalated.
    pub async fn marked_cases(&mut self) -> Result<Vec<(String, String, String, String)>> {
        let q = self.sql(
            "SELECT case_key, status_fingerprint, status, coalesce(status_by, '') FROM review_cases
             WHERE status <> 'OPEN' AND status_fingerprint IS NOT NULL ORDER BY case_key",
        );
        self.fetch_all(q, |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.text(3)?)))
            .await
            .map_err(db_err("review cases"))
    }

    /// Records a decision (WAITING or APPLIED); returns its id.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_decision(
        &mut self,
        (key, fingerprint): (&str, &str),
        decision: &str,
        (actor, note): (&str, &str),
        state: &str,
        (file_sha256, row_no): (&str, i64),
        now: &str,
    ) -> Result<i64> {
        let mut q = self.sql(
            "INSERT INTO case_decisions (case_key, fingerprint, decision, actor, note, state,
                                         file_sha256, row_no, decided_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        );
        q.bind(key)
            .bind(fingerprint)
            .bind(decision)
            .bind(actor)
            .bind(note)
            .bind(state)
            .bind(file_sha256)
            .bind(row_no)
            .bind(Bind::Ts(now));
        self.fetch_one(q, |r| r.int(0))
            .await
            .map_err(db_err("case decisions"))
    }

    /// The decisions recorded for a case, oldest first.
    pub async fn case_decisions(&mut self, key: &str) -> Result<Vec<DecisionRecord>> {
        let mut q = self.sql("SELECT ");
        q.push(DECISION_COLUMNS)
            .push(" FROM case_decisions WHERE case_key = $1 ORDER BY id");
        q.bind(key);
        self.fetch_all(q, decision_from)
            .await
            .map_err(db_err("case decisions"))
    }

    /// Every decision that waits for a second reviewer, oldest first.
    pub async fn waiting_decisions(&mut self) -> Result<Vec<DecisionRecord>> {
        let mut q = self.sql("SELECT ");
        q.push(DECISION_COLUMNS)
            .push(" FROM case_decisions WHERE state = 'WAITING' ORDER BY id");
        self.fetch_all(q, decision_from)
            .await
            .map_err(db_err("case decisions"))
    }

    /// A waiting decision approved by `approver`: APPLIED. False if it no longer waits.
    pub async fn approve_decision(&mut self, id: i64, approver: &str, now: &str) -> Result<bool> {
        let mut q = self.sql(
            "UPDATE case_decisions SET state = 'APPLIED', approved_by = $1, approved_at = $2
             WHERE id = $3 AND state = 'WAITING'",
        );
        q.bind(approver).bind(Bind::Ts(now)).bind(id);
        Ok(self.execute(q).await.map_err(db_err("case decisions"))? == 1)
    }

    /// Every decision of a case that still waits is superseded (another decision settled it).
    pub async fn supersede_waiting(&mut self, key: &str) -> Result<()> {
        let mut q = self.sql(
            "UPDATE case_decisions SET state = 'SUPERSEDED' WHERE case_key = $1 AND state = 'WAITING'",
        );
        q.bind(key);
        self.execute(q).await.map_err(db_err("case decisions"))?;
        Ok(())
    }

    /// What `decision_files` kept of the file with this sha256 that `actor` applied, if any.
    pub async fn decision_file(
        &mut self,
        sha256: &str,
        actor: &str,
    ) -> Result<Option<DecisionFileRecord>> {
        let mut q = self.sql(
            "SELECT applied_at, path, result_file, counts, refused FROM decision_files
             WHERE sha256 = $1 AND actor = $2",
        );
        q.bind(sha256).bind(actor);
        self.fetch_optional(q, |r| {
            Ok(DecisionFileRecord {
                applied_at: r.ts(0)?,
                path: r.opt_text(1)?,
                result_file: r.opt_text(2)?,
                // A record written before counts were kept reads as no counts: unknown.
                counts: serde_json::from_str(&r.text(3)?).unwrap_or_default(),
                refused: serde_json::from_str(&r.text(4)?).unwrap_or_default(),
            })
        })
        .await
        .map_err(db_err("decision files"))
    }

    /// Records that `actor` applied the file, with its bounded summary (never every row).
    pub async fn record_decision_file(&mut self, f: &NewDecisionFile<'_>) -> Result<()> {
        let mut q = self.sql(
            "INSERT INTO decision_files (sha256, actor, file_name, applied_at, path, result_file,
                                         counts, refused)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        );
        let (counts, refused) = (
            serde_json::to_string(f.counts)?,
            serde_json::to_string(f.refused)?,
        );
        q.bind(f.sha256)
            .bind(f.actor)
            .bind(f.file_name)
            .bind(Bind::Ts(f.now))
            .bind(f.path)
            .bind(f.result_file)
            .bind(counts.as_str())
            .bind(refused.as_str());
        self.execute(q).await.map_err(db_err("decision files"))?;
        Ok(())
    }

    /// The decisions `actor` recorded from the file with this sha256, by its row number:
    /// (decision, state).
    pub async fn decisions_of_file(
        &mut self,
        sha256: &str,
        actor: &str,
    ) -> Result<HashMap<i64, (String, String)>> {
        let mut q = self.sql(
            "SELECT row_no, decision, state FROM case_decisions
             WHERE file_sha256 = $1 AND actor = $2 ORDER BY id",
        );
        q.bind(sha256).bind(actor);
        let rows = self
            .fetch_all(q, |r| Ok((r.int(0)?, (r.text(1)?, r.text(2)?))))
            .await
            .map_err(db_err("case decisions"))?;
        Ok(rows.into_iter().collect())
    }

    /// Records what a run's pass over the decisions inbox did (JSON), under the run's id.
    /// False when that run id has a record already (a reused `--run-id`, which the run record
    /// then refuses): the first is kept.
    pub async fn record_inbox(&mut self, run_id: &str, summary: &str, now: &str) -> Result<bool> {
        let mut q = self.sql(
            "INSERT INTO inbox_records (run_id, summary, recorded_at) VALUES ($1, $2, $3)
             ON CONFLICT (run_id) DO NOTHING",
        );
        q.bind(run_id).bind(summary).bind(Bind::Ts(now));
        Ok(self.execute(q).await.map_err(db_err("inbox records"))? == 1)
    }

    /// What the inbox pass of run `run_id` recorded (JSON), if it had one.
    pub async fn inbox_record(&mut self, run_id: &str) -> Result<Option<String>> {
        let mut q = self.sql("SELECT summary FROM inbox_records WHERE run_id = $1");
        q.bind(run_id);
        self.fetch_optional(q, |r| r.text(0))
            .await
            .map_err(db_err("inbox records"))
    }

    /// Records that the line (source, id) is the payment's; a later confirmation of the same
    /// line replaces an earlier one.
    pub async fn confirm_line(&mut self, c: &Confirmation, now: &str) -> Result<()> {
        let mut q = self.sql(
            "INSERT INTO confirmed_lines (source, line_id, payment_id, case_key, actor, decided_at,
                                          approved_by, line_reference, accepted_difference_minor)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (source, line_id) DO UPDATE SET payment_id = excluded.payment_id,
                 case_key = excluded.case_key, actor = excluded.actor,
                 decided_at = excluded.decided_at, approved_by = excluded.approved_by,
                 line_reference = excluded.line_reference,
                 accepted_difference_minor = excluded.accepted_difference_minor",
        );
        q.bind(c.source.as_str())
            .bind(c.line_id.as_str())
            .bind(c.payment_id.as_str())
            .bind(c.case_key.as_str())
            .bind(c.actor.as_str())
            .bind(Bind::Ts(now))
            .bind(c.approved_by.as_deref())
            .bind(c.reference.as_deref())
            .bind(c.accepted_difference_minor);
        self.execute(q).await.map_err(db_err("confirmed lines"))?;
        Ok(())
    }

    /// Every confirmed line.
    pub async fn confirmed_lines(&mut self, until: Option<&str>) -> Result<Vec<Confirmation>> {
        let mut q = match until {
            None => self.sql(
                "SELECT source, line_id, payment_id, case_key, actor, approved_by, line_reference,
                        accepted_difference_minor
                 FROM confirmed_lines ORDER BY source, line_id",
            ),
            Some(_) => self.sql(
                "SELECT source, line_id, payment_id, case_key, actor, approved_by, line_reference,
                        accepted_difference_minor
                 FROM confirmed_lines WHERE decided_at <= $1 ORDER BY source, line_id",
            ),
        };
        if let Some(t) = until {
            q.bind(Bind::Ts(t));
        }
        self.fetch_all(q, |r| {
            Ok(Confirmation {
                source: r.text(0)?,
                line_id: r.text(1)?,
                payment_id: r.text(2)?,
                case_key: r.text(3)?,
                actor: r.text(4)?,
                approved_by: r.opt_text(5)?,
                reference: r.opt_text(6)?,
                accepted_difference_minor: r.opt_int(7)?,
            })
        })
        .await
        .map_err(db_err("confirmed lines"))
    }
}
