//! Applying one decision file: every row checked against the case as it is now
//! ([`super::check`]) and applied in ONE transaction with the file's record, so a file is
//! applied whole or not at all; the result written next to it.

use super::check::{self, Approvals, Now, Plan, Rules, Verdict};
use super::read::{self, SheetRow};
use super::result::{FileResult, RowResult, Status};
use crate::config::DecisionSettings;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::ledger::transitions::{Applied, Transition};
use crate::store::Tx;
use crate::store::cases::{DecisionRecord, StoredCase};
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::path::Path;

fn approvals(s: &DecisionSettings) -> Approvals {
    Approvals {
        money: s.approvals,
        succeeded: s.approvals_succeeded.max(s.approvals),
    }
}

/// How many refused rows `decision_files` keeps of a file (with the counts per result): the
/// record stays small whatever the file's size.
pub const REFUSED_KEPT: usize = 100;

/// Applies the decision file at `path` as `actor` and returns what became of every row (the
/// caller writes the result file: [`FileResult::write`] puts it next to the input). An
/// unreadable workbook is one refused row 0 (nothing applied); the same file applied again by
/// the same actor changes nothing, each row `unchanged` with what it was then.
pub async fn apply_file(
    db: &Db,
    settings: &DecisionSettings,
    path: &Path,
    actor: &str,
) -> Result<FileResult> {
    let limits = crate::sources::InputLimits {
        max_file_bytes: settings.max_file_bytes,
        ..crate::sources::InputLimits::default()
    };
    let bytes = limits.read(path)?;
    let result_file = FileResult::result_path(path);
    let read = Read {
        path,
        bytes: &bytes,
        result_file: &result_file,
    };
    match apply_read(db, settings, read, actor, None).await? {
        Finished::Done(r) => Ok(r),
        // Without a check nothing is found changed.
        Finished::Changed(why) => Err(fail(Failure::Input, why)),
    }
}

/// A decision file as read: where from, its bytes, and where its result file goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Read<'a> {
    /// Where it was read.
    pub path: &'a Path,
    /// Its bytes.
    pub bytes: &'a [u8],
    /// Where its result file is written (recorded with it).
    pub result_file: &'a Path,
}

/// What became of a file [`apply_read`] was given.
#[derive(Debug)]
pub(crate) enum Finished {
    /// Applied (or refused whole, or applied before): every row's result.
    Done(FileResult),
    /// The file at its path is no longer the file read (the check said why): nothing of it
    /// was applied or recorded.
    Changed(String),
}

/// Says, just before a file is recorded as applied, whether the file at its path is still the
/// one read: `Some(why)` when not.
pub(crate) type StillThere<'a> = &'a (dyn Fn() -> Option<String> + Sync);

/// Applies `read` as `actor` in ONE transaction with its record in `decision_files` (its
/// sha256, path, result file, counts per result and the first refused rows). With `still`,
/// the file is checked just before it is recorded; a file changed since it was read rolls the
/// whole transaction back ([`Finished::Changed`]).
pub(crate) async fn apply_read(
    db: &Db,
    settings: &DecisionSettings,
    read: Read<'_>,
    actor: &str,
    still: Option<StillThere<'_>>,
) -> Result<Finished> {
    let actor = &super::reviewers::canonical(settings, actor)?;
    let path = read.path;
    let sha256 = hex::encode(Sha256::digest(read.bytes));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut result = FileResult {
        path: path.to_path_buf(),
        sha256: sha256.clone(),
        actor: actor.to_string(),
        rows: Vec::new(),
        undecided: 0,
        earlier: None,
    };
    let sheet = read::read(read.bytes, &settings.workbook);
    let mut tx = db.begin().await?;
    if let Some(earlier) = tx.decision_file(&sha256, actor).await? {
        let decided = tx.decisions_of_file(&sha256, actor).await?;
        tx.rollback().await?;
        result.rows = FileResult::applied_before(sheet.as_ref().ok(), &earlier, &decided);
        result.undecided = sheet.map(|s| s.undecided).unwrap_or_default();
        result.earlier = Some(earlier.applied_at);
        return Ok(Finished::Done(result));
    }
    let sheet = match sheet {
        Ok(s) => s,
        Err(why) => {
            tx.rollback().await?;
            result.rows.push(RowResult {
                row_no: 0,
                case: String::new(),
                decision: String::new(),
                status: Status::Refused,
                detail: format!("{}: {why}; nothing applied", path.display()),
                reviewer: String::new(),
            });
            return Ok(Finished::Done(result));
        }
    };
    result.undecided = sheet.undecided;
    let now = crate::timeparse::to_db(chrono::Utc::now().timestamp_micros());
    let rules = Rules {
        approvals: approvals(settings),
        dismiss_reasons: &settings.dismiss_reasons,
        write_off_limit: &settings.write_off_limit,
        reviewers_known: !settings.reviewers.is_empty(),
    };
    for row in &sheet.rows {
        let (status, mut detail) = match (&row.refused, row.same_as) {
            (Some(why), _) => (Status::Refused, why.clone()),
            // A copy of an earlier row of the file: that row's decision, taken once.
            (None, Some(first)) => {
                let then = result.rows.iter().find(|r| r.row_no == first);
                match then.map(|r| r.status) {
                    Some(Status::Refused) | None => (
                        Status::Refused,
                        format!("the same decision as row {first}, which was refused"),
                    ),
                    Some(s) => (
                        Status::Unchanged,
                        format!(
                            "the same decision as row {first} of this file, taken once there \
                             ({})",
                            s.as_str()
                        ),
                    ),
                }
            }
            (None, None) => {
                apply_row(&mut tx, row, actor, &rules, (&sha256, &file_name), &now).await?
            }
        };
        if !row.reviewer.is_empty() && !crate::textsafe::same_name(&row.reviewer, actor) {
            detail.push_str(&format!(
                " (the reviewer cell says \"{}\"; recorded as {actor}, who applied the file)",
                crate::textsafe::terminal(&row.reviewer)
            ));
        }
        result.rows.push(RowResult {
            row_no: row.row_no,
            case: row.case.clone(),
            decision: row.decision.clone(),
            status,
            detail,
            reviewer: row.reviewer.clone(),
        });
    }
    if let Some(still) = still {
        crate::fault::point("decisions_before_record");
        if let Some(why) = still() {
            tx.rollback().await?;
            return Ok(Finished::Changed(why));
        }
    }
    let counts = result.counts();
    let refused = result.refused_rows(REFUSED_KEPT);
    let (path_text, result_text) = (path.to_string_lossy(), read.result_file.to_string_lossy());
    tx.record_decision_file(&crate::store::cases::NewDecisionFile {
        sha256: &sha256,
        actor,
        file_name: &file_name,
        path: &path_text,
        result_file: Some(&result_text),
        counts: &counts,
        refused: &refused,
        now: &now,
    })
    .await?;
    tx.commit().await?;
    Ok(Finished::Done(result))
}

/// Reads what the check needs, checks the row and applies it inside `tx`.
async fn apply_row(
    tx: &mut Tx,
    row: &SheetRow,
    actor: &str,
    rules: &Rules<'_>,
    file: (&str, &str),
    now: &str,
) -> Result<(Status, String)> {
    let (case, fingerprint_run, decisions) = match check::parse_check(row) {
        Ok((key, fp)) => {
            let case = tx.get_case(key).await?;
            let run = tx.case_fingerprint_run(key, fp).await?;
            let decisions = tx.case_decisions(key).await?;
            (case, run, decisions)
        }
        Err(_) => (None, None, Vec::new()),
    };
    let verdict = check::check(
        row,
        actor,
        Now {
            case: case.as_ref(),
            fingerprint_run: fingerprint_run.as_deref(),
            decisions: &decisions,
        },
        rules,
    );
    let (decision, plan, approves, case) = match (verdict, case) {
        (Verdict::Refused(why), _) => return Ok((Status::Refused, why)),
        (Verdict::Unchanged(why), _) => return Ok((Status::Unchanged, why)),
        (Verdict::Apply(d, p, a), Some(c)) => (d, *p, a, c),
        (Verdict::Apply(..), None) => {
            return Ok((Status::Refused, "unknown case".into()));
        }
    };
    let note = if row.note.is_empty() {
        "(no note)"
    } else {
        row.note.as_str()
    };
    let (file_sha, file_name) = file;
    // The text as stored and shown: with the reason as the job spells it (`dismiss: written
    // off`), which the check accepted.
    let reason = crate::report::cases::Decision::parse_with_reason(&row.decision)
        .and_then(|(_, r)| check::reason(decision, r.as_deref(), rules.dismiss_reasons).ok())
        .flatten();
    let text = decision.text_with(reason.as_deref());
    // As the history tells it: an accepted difference with its amount and the limit.
    let told = match &plan {
        Plan::Accept(_, d) => d.told(),
        _ => text.clone(),
    };
    let about = format!(
        "{told} (case {}, {file_name} row {}): {note}",
        case.key, row.row_no
    );
    let by = Decided {
        case: &case,
        text: &text,
        actor,
        note: &row.note,
        file: (file_sha, i64::from(row.row_no)),
        now,
    };
    // Who decided, as the case, the tickets and the history record it: the first reviewer,
    // and the second who approved.
    let (decider, about) = match &approves {
        Some(first) => (
            first.actor.clone(),
            format!(
                "{told} by {} ({}), approved by {actor}: {about}",
                first.actor,
                if first.note.is_empty() {
                    "no note"
                } else {
                    first.note.as_str()
                }
            ),
        ),
        None => (actor.to_string(), about),
    };
    let approved = |done: String| match &approves {
        Some(first) => format!("approved {}'s decision: {done}", first.actor),
        None => done,
    };
    match plan {
        Plan::Wait(why) => {
            by.record(tx, "WAITING").await?;
            Ok((
                Status::Waiting,
                match why {
                    Some(why) => format!("{text}: {why}"),
                    None => format!("{text} waits for a second, different reviewer"),
                },
            ))
        }
        Plan::Escalate => {
            settle(tx, &case, "ESCALATED", (&decider, &about), now, false).await?;
            by.finish(tx, approves.as_ref()).await?;
            Ok((Status::Applied, "escalated: the case stays open".into()))
        }
        Plan::Dismiss => {
            by.finish(tx, approves.as_ref()).await?;
            settle(tx, &case, "DISMISSED", (&decider, &about), now, true).await?;
            Ok((
                Status::Applied,
                approved(format!(
                    "dismissed; {} ticket(s) resolved; stays dismissed while its evidence is unchanged",
                    case.ticket_ids.len()
                )),
            ))
        }
        Plan::Confirm(c) => {
            let approver = approves.as_ref().map(|_| actor);
            tx.confirm_line(
                &confirmation(&c, &case.key, (&decider, approver), None),
                now,
            )
            .await?;
            by.finish(tx, approves.as_ref()).await?;
            settle(tx, &case, "DECIDED", (&decider, &about), now, true).await?;
            Ok((
                Status::Applied,
                approved(format!(
                    "line {} of {} is payment {}'s: later runs read it as naming that payment",
                    c.line_id, c.source, c.payment_id
                )),
            ))
        }
        Plan::Accept(c, d) => {
            let diff = d.minor;
            let approver = approves.as_ref().map(|_| actor);
            tx.confirm_line(
                &confirmation(&c, &case.key, (&decider, approver), Some(diff)),
                now,
            )
            .await?;
            by.finish(tx, approves.as_ref()).await?;
            settle(tx, &case, "DECIDED", (&decider, &about), now, true).await?;
            let currency = c.amounts.as_ref().map_or("", |a| a.currency.as_str());
            Ok((
                Status::Applied,
                approved(format!(
                    "line {} of {} is payment {}'s with a difference of {} {currency} \
                     accepted ({} write_off_limit {}): later runs match the pair while the \
                     line differs by exactly that",
                    c.line_id,
                    c.source,
                    c.payment_id,
                    crate::money::format_minor(diff, currency),
                    if d.above { "above" } else { "within" },
                    d.limit
                )),
            ))
        }
        Plan::Status(change) => {
            let from = crate::ledger::Status::parse(&change.payment.status)
                .context("stored case payment status")?;
            let reason = format!("reviewer decision {about}");
            let t = Transition {
                payment_id: change.payment.payment_id.clone(),
                from,
                to: change.to,
                attempt_id: change.payment.attempt_id.clone(),
                provider_payment_id: None,
                prior_provider_payment_id: None,
                reason,
            };
            let applied = tx
                .apply_transitions_by(std::slice::from_ref(&t), &decider, None, now)
                .await?;
            match applied.first().copied().unwrap_or(Applied::Conflict) {
                Applied::Applied => {}
                Applied::AlreadyApplied => {
                    return Ok((
                        Status::Unchanged,
                        format!(
                            "payment {} is already {} by this decision",
                            t.payment_id,
                            t.to.as_str()
                        ),
                    ));
                }
                Applied::Conflict => {
                    let states = tx
                        .payment_states(std::slice::from_ref(&t.payment_id))
                        .await?;
                    let now_is = states
                        .get(&t.payment_id)
                        .map(|n| {
                            format!(
                                "{} (attempt {})",
                                n.status,
                                n.attempt_id.as_deref().unwrap_or("-")
                            )
                        })
                        .unwrap_or_else(|| "gone from the ledger".into());
                    return Ok((
                        Status::Refused,
                        format!(
                            "payment {} moved since the run that stored this case saw it {} \
                             (attempt {}); it is {now_is} now: nothing changed",
                            t.payment_id,
                            from.as_str(),
                            t.attempt_id.as_deref().unwrap_or("-")
                        ),
                    ));
                }
            }
            by.finish(tx, approves.as_ref()).await?;
            settle(tx, &case, "DECIDED", (&decider, &about), now, true).await?;
            Ok((
                Status::Applied,
                approved(format!(
                    "payment {} {} → {} (guarded transition, history actor {decider})",
                    t.payment_id,
                    from.as_str(),
                    t.to.as_str()
                )),
            ))
        }
    }
}

/// A decision as recorded in `case_decisions`.
struct Decided<'a> {
    case: &'a StoredCase,
    text: &'a str,
    actor: &'a str,
    note: &'a str,
    file: (&'a str, i64),
    now: &'a str,
}

impl Decided<'_> {
    /// The decision took effect: the waiting one it approves is APPLIED with this reviewer as
    /// approver (before the case is settled, which supersedes whatever still waits), or it is
    /// recorded APPLIED as this reviewer's own.
    async fn finish(&self, tx: &mut Tx, approves: Option<&DecisionRecord>) -> Result<()> {
        match approves {
            Some(first) => {
                if !tx.approve_decision(first.id, self.actor, self.now).await? {
                    return Err(fail(
                        Failure::Database,
                        format!(
                            "case {}: the decision to approve changed while it was applied",
                            self.case.key
                        ),
                    ));
                }
            }
            None => {
                self.record(tx, "APPLIED").await?;
            }
        }
        Ok(())
    }

    async fn record(&self, tx: &mut Tx, state: &str) -> Result<i64> {
        tx.insert_decision(
            (&self.case.key, &self.case.fingerprint),
            self.text,
            (self.actor, self.note),
            state,
            self.file,
            self.now,
        )
        .await
    }
}

/// Sets the case's status on its evidence and, with `resolve`, resolves its open tickets
/// (each with a history row: the actor and the note); other decisions waiting on the case
/// are superseded.
async fn settle(
    tx: &mut Tx,
    case: &StoredCase,
    status: &str,
    (actor, note): (&str, &str),
    now: &str,
    resolve: bool,
) -> Result<()> {
    if !tx
        .set_case_status(&case.key, &case.fingerprint, status, (actor, note), now)
        .await?
    {
        return Err(fail(
            Failure::Database,
            format!("case {} changed while its decision was applied", case.key),
        ));
    }
    if resolve {
        for id in &case.ticket_ids {
            // A ticket already resolved stays as it is.
            tx.change_ticket_status(*id, "OPEN", "RESOLVED", actor, note, now)
                .await?;
        }
        tx.supersede_waiting(&case.key).await?;
    }
    Ok(())
}

/// What `confirm N` and `accept difference` store for the candidate `c` of case `case_key`:
/// the line is the payment's (with the accepted difference, minor units, for the latter),
/// decided by `decider` and approved by `approver` when a second reviewer did.
fn confirmation(
    c: &crate::store::cases::CaseCandidate,
    case_key: &str,
    (decider, approver): (&str, Option<&str>),
    accepted_difference_minor: Option<i64>,
) -> crate::store::cases::Confirmation {
    crate::store::cases::Confirmation {
        source: c.source.clone(),
        line_id: c.line_id.clone(),
        payment_id: c.payment_id.clone(),
        case_key: case_key.to_string(),
        actor: decider.to_string(),
        approved_by: approver.map(str::to_string),
        reference: c.reference.clone(),
        accepted_difference_minor,
    }
}
