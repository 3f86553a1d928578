//! The reviewers of the night simulator (issue 40): people who decide cases right, wrong, late
//! or twice, under one or four eyes, through `recon decisions apply` or the decisions inbox, and
//! the provider's later word that contradicts them. A child module of `nights`: it works on the
//! same [`Harness`].
//!
//! What the reviewers play (each a probability of `recon_tools::sim::Probs`, 0 switches it off):
//! - a decision per open case of the nightly run's spreadsheet, per the truth, or WRONG: the
//!   wrong candidate of an ambiguity or near miss confirmed (`wrong_confirm`), `succeeded` on a
//!   lost payment or `failed` on a paid one (`wrong_status`); dismissals and escalations;
//! - issue 42: `dismiss: <reason>` with a reason of the job's `dismiss_reasons`, or one not on
//!   it (or none), which must be refused (`dismiss_bad_reason`); `accept difference` where a
//!   case offers it (`accept_difference`), within the job's `write_off_limit` (applied, or
//!   waiting under four eyes) or above it (never applied by one reviewer alone: refused, or
//!   waiting for a second reviewer);
//! - sheets kept 1–4 nights before they are applied (`sheet_kept`), and always across the night
//!   whose second payout regroups a twin ambiguity (the world shape `regroup`);
//! - four eyes (`four_eyes`, per world: `approvals = 2`): the first reviewer's money-moving
//!   decision waits, they try to approve it themselves with another file (`self_approval`), a
//!   second reviewer approves it, and applies it again (`approver_again`); any reviewer applies
//!   the same file twice;
//! - the decisions inbox (`inbox`): files put in `decisions/<reviewer>/`, a folder the reviewer's
//!   uid owns, applied by the next run; somebody else's files in `decisions/dave/` (dave is a
//!   reviewer, the folder is not his) and `decisions/bob ` (`inbox_intruder`) must never be;
//! - what the provider says afterwards: the confirmed line's file re-delivered with its
//!   reference naming the payment that truly owns the payout (`corrected_after_confirm`), a
//!   webhook saying that payout id is its true payment's, PAID (`hook_after_confirm`), a FAILED
//!   webhook after a human SUCCEEDED (`failed_hook_after_human`), a return after it
//!   (`return_after_human`), a payout after a human FAILED (`line_after_human_failed`).
//!
//! What it checks, against the truth and the contract of issue 40:
//! - every row ends as the contract says: applied; waiting for a second reviewer when it moves
//!   money under four eyes (`failed`, `succeeded`, `confirm N` while a payment of the case is
//!   UNKNOWN / REVIEW / SUBMITTING, `dismiss` of a CRITICAL case); refused when the reviewer
//!   approves their own, or when the case is not what the latest committed run holds open with
//!   that fingerprint (stale, settled, regrouped); unchanged for the same file again and for the
//!   approver again. An approved decision is stored APPLIED with its approver;
//! - the ledger: every human transition comes from a decision that took effect (a waiting one
//!   changes nothing), names its reviewer (and approver), and is judged against the truth; every
//!   confirmed line comes from a confirmation that took effect;
//! - cases: after every committed run, `recon::decisions::queue::list(&db, true)` lists no case
//!   that a committed run (not older than the one that stored it) reported without storing;
//! - one payout, one payment: no two payments hold one provider id;
//! - after a WRONG decision, the first nightly run whose inputs hold the contradicting evidence
//!   has a ticket naming each payment involved, and recon adds no wrong automatic transition on
//!   top once it holds that evidence (see `Harness::wrong_human`).

use super::{DayRun, Fact, Harness, Ticket, parse_results};
use recon::config::Config;
use recon::decisions::result::Status;
use recon::store::cases::StoredCase;
use recon::timeparse::{MINUTE, Micros};
use recon_tools::sim::{self, Fate, HookEvent, LineRole, Shape, Source, World};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The reviewers and the uids that own their inbox folders.
pub(super) const REVIEWERS: [(&str, u32); 3] = [("alice", 2001), ("bob", 2002), ("carol", 2003)];
/// A configured reviewer whose inbox folder somebody else owns.
const DAVE: (&str, u32) = ("dave", 2004);
/// Somebody who is no reviewer.
const STRANGER: u32 = 2999;
/// The decisions inbox, relative to the job file.
const INBOX: &str = "decisions";
/// Of the open cases a nightly run stored, the share a reviewer decides that night.
const DECIDE: u64 = 6_000;

/// What a reviewer decided, in the truth's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ConfirmRight,
    ConfirmWrong,
    Failed,
    Succeeded,
    Dismiss,
    Escalate,
    /// `accept difference` on a case's one candidate (issue 42).
    AcceptDifference,
    /// `dismiss` with a reason not on the job's list, or none (issue 42): refused.
    DismissBadReason,
}

/// One decision about one case, with what the harness knows about it.
#[derive(Debug, Clone)]
pub(super) struct Intent {
    case: String,
    fingerprint: String,
    decision: String,
    kind: Kind,
    /// Whether the truth agrees with it.
    right: bool,
    severity: String,
    case_kind: String,
    /// The case's payments and their status as the run that stored it saw them.
    payments: Vec<(String, String)>,
    /// `confirm N`: (world line, payment index, source, line id).
    confirm: Option<(usize, usize, String, String)>,
    /// `confirm N`: the line's reference as the case showed it to the reviewer.
    seen: Option<String>,
    /// `failed` / `succeeded`: the payment index.
    status_of: Option<usize>,
    /// `accept difference`: whether the difference (by the truth's amounts) is within the
    /// job's `write_off_limit` (issue 42).
    within_limit: Option<bool>,
}

impl Intent {
    /// Whether it moves money, directly or through the next run (the contract's point 1).
    fn moves_money(&self) -> bool {
        match self.kind {
            Kind::Failed | Kind::Succeeded => true,
            Kind::ConfirmRight | Kind::ConfirmWrong => self
                .payments
                .iter()
                .any(|(_, s)| matches!(s.as_str(), "UNKNOWN" | "REVIEW" | "SUBMITTING")),
            Kind::Dismiss => self.severity == "CRITICAL",
            Kind::Escalate | Kind::DismissBadReason => false,
            Kind::AcceptDifference => true,
        }
    }

    /// An `accept difference` above the job's `write_off_limit` (issue 42).
    fn above_limit(&self) -> bool {
        self.kind == Kind::AcceptDifference && self.within_limit == Some(false)
    }

    fn describe(&self) -> String {
        format!(
            "{} on case {} ({}, {}, payments {:?}; {} per the truth)",
            self.decision,
            self.case,
            self.case_kind,
            self.severity,
            self.payments,
            if self.right { "right" } else { "WRONG" }
        )
    }
}

/// Who applies a row, and in which part of the four-eyes flow.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// A fresh decision.
    First,
    /// A fresh decision from a sheet kept some nights.
    Held,
    /// The first reviewer again, with another file, while their decision waits.
    SelfApproval,
    /// A second, different reviewer approving `first`'s waiting decision.
    Approver { first: String },
    /// The approver once more, from another file.
    ApproverAgain,
    /// The same file by the same reviewer again.
    Again,
}

/// How a row must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Applied,
    Waiting,
    /// The reviewer approves their own decision.
    RefusedOwn,
    /// The case is not what the latest committed run holds open with that fingerprint.
    RefusedStale,
    Unchanged,
    /// A kept sheet on a case still held open: it may have been decided meanwhile.
    Lenient,
    /// A `dismiss` with a reason not on the job's list (issue 42).
    RefusedReason,
    /// An `accept difference` above the job's `write_off_limit` (issue 42): refused, or waiting
    /// for a second reviewer; never applied by one reviewer alone.
    NotAlone,
}

/// A decision file.
#[derive(Debug, Clone)]
struct Sheet {
    path: PathBuf,
    actor: String,
    made: u32,
    rows: Vec<(Intent, Role)>,
    /// The shape it plays (for the violations it finds).
    shape: &'static str,
}

/// `text` tagged with the shape that played it (the summary counts violations per shape).
fn shaped(shape: &str, text: impl std::fmt::Display) -> String {
    format!("(shape: {shape}) {text}")
}

/// A file in the inbox, waiting for the next run, with what each row must become.
#[derive(Debug)]
pub(super) struct Pending {
    sheet: Sheet,
    expects: Vec<Expect>,
}

/// A sheet kept until night `due`.
#[derive(Debug)]
struct Held {
    sheet: Sheet,
    due: u32,
    /// Kept across the night a twin's second payout regroups its case.
    across_regroup: bool,
}

/// A decision that waits for a second reviewer.
#[derive(Debug, Clone)]
struct Waiting {
    intent: Intent,
    first: String,
}

/// A case as the harness models "held open by the latest committed run" (the contract's point
/// 3): the fingerprint and as-of of the run that last stored it, and whether a committed run
/// not older than that one has since reported its payments or lines without storing it.
#[derive(Debug, Clone)]
struct CaseModel {
    fingerprint: String,
    as_of: Micros,
    held: bool,
    payments: Vec<String>,
    uids: Vec<String>,
    gone_by: String,
    gone_as_of: Micros,
}

/// Evidence that contradicts a human decision, as a run can hold it.
#[derive(Debug, Clone)]
pub(super) enum Evidence {
    /// A version of the line's file that shows it with this reference.
    Renamed { line: usize, reference: String },
    /// A webhook event stored at this time.
    Hook { at: Micros },
    /// The line itself (it names its payment).
    Line(usize),
}

/// A ticket due on the first nightly run after night `after` whose inputs hold `evidence`.
#[derive(Debug, Clone)]
struct Due {
    payments: Vec<usize>,
    /// The confirmed line it is about (a later confirmation of the line replaces it).
    line: Option<usize>,
    what: &'static str,
    /// The shape that played it.
    shape: &'static str,
    /// The ticket must be CRITICAL (CONTRADICTED is, by the contract's point 4).
    critical: bool,
    evidence: Evidence,
    after: u32,
    /// Only when this payment holds this provider id by then (the contract's point 4c).
    holder: Option<(usize, String)>,
    done: bool,
}

impl Due {
    /// This due split by whether the simulated ledger holds each of its payments as of `as_of`
    /// (what the harness imported for a night of that as-of, [`World::ledger_csv`]): the part
    /// a run of that as-of can be held to, and the part still to come (not done).
    fn split_by_ledger(&self, world: &World, as_of: Micros) -> (Option<Due>, Option<Due>) {
        let (held, absent): (Vec<usize>, Vec<usize>) = self
            .payments
            .iter()
            .partition(|&&p| world.payments[p].ledger_from <= as_of);
        let part = |payments: Vec<usize>| {
            (!payments.is_empty()).then(|| Due {
                payments,
                done: false,
                ..self.clone()
            })
        };
        (part(held), part(absent))
    }
}

/// A wrong human decision that took effect, and the evidence that contradicts it.
#[derive(Debug, Clone)]
pub(super) struct Wrong {
    payments: Vec<usize>,
    /// The wrongly confirmed line.
    line: Option<usize>,
    /// Index of the first run that worked on it.
    since_run: usize,
    evidence: Vec<Evidence>,
    what: String,
}

/// A decision that took effect.
#[derive(Debug, Clone)]
struct Effective {
    intent: Intent,
    actor: String,
    approver: Option<String>,
    /// For a status decision: whether its payment was truly paid when it took effect (the
    /// provider may pay it later: that is new evidence, not the reviewer's mistake).
    paid: Option<bool>,
    /// Matched by a human history row already.
    seen: bool,
}

/// A file somebody put in an inbox folder they do not own as its reviewer.
#[derive(Debug, Clone)]
struct Intruder {
    intent: Intent,
    path: PathBuf,
    sha: String,
    folder: String,
    night: u32,
    counted: bool,
}

/// The reviewers' side of a world.
#[derive(Debug, Default)]
pub(super) struct Reviewers {
    four_eyes: bool,
    inbox: Option<PathBuf>,
    pending: Vec<Pending>,
    held: Vec<Held>,
    waiting: Vec<Waiting>,
    cases: BTreeMap<String, CaseModel>,
    effective: Vec<Effective>,
    wrong: Vec<Wrong>,
    dues: Vec<Due>,
    intruders: Vec<Intruder>,
    history_seen: i64,
    confirmed_seen: BTreeSet<(String, String, String)>,
    listed_reported: BTreeSet<(String, String)>,
    /// Cases an intruder's file decides: the reviewers leave them alone, so that a file
    /// wrongly applied is one violation, not a cascade.
    spoiled: BTreeSet<String>,
    duplicates_reported: BTreeSet<String>,
    /// (line, reference) of every re-delivered reference delivered so far.
    pub(super) renamed: BTreeSet<(usize, String)>,
    files: usize,
}

/// What every CI world set must have played at least once (`nights_on_sqlite` asserts it, so
/// that no decision kind or shape silently drops out of the small worlds CI runs).
pub(super) const PLAYED_IN_CI: &[&str] = &[
    "decided: confirm right",
    "decided: confirm wrong",
    "decided: failed",
    "decided: succeeded",
    "decided: dismiss",
    "decided: escalate",
    "decisions: applied",
    "decisions: waiting",
    "decisions: approved",
    "decisions: refused self-approval",
    "decisions: stale refused",
    "decisions: unchanged",
    "decisions: inbox applied",
    "decisions: inbox skipped",
    "shape: one reviewer (world)",
    "shape: four eyes (world)",
    "shape: wrong confirm",
    "shape: wrong status",
    "shape: corrected after confirm",
    "shape: hook after confirm",
    "shape: FAILED hook after human SUCCEEDED",
    "shape: return after human SUCCEEDED",
    "shape: line after human FAILED",
    "shape: sheet kept",
    "shape: sheet kept across a regrouping night",
    "shape: regroup (world)",
    "shape: self-approval tried",
    "shape: approver again",
    "shape: same file twice",
    "shape: inbox",
    "shape: inbox intruder",
    "contradictions checked",
    "human transitions",
    "transitions on a confirmed line",
    // Issue 42.
    "decided: accept difference (within the limit)",
    "decided: accept difference (above the limit)",
    "decided: dismiss with a reason not on the list",
    "decisions: dismiss with a reason not on the list refused",
    "decisions: accept difference took effect",
    "shape: currency mismatch (world)",
    "shape: multi-currency recipient (world)",
    "shape: netted fee within the limit (world)",
    "shape: netted fee above the limit (world)",
    "currencies: CURRENCY_MISMATCH reported",
    "multi-currency: paired in its own currency",
    "email: cases in another currency than EUR",
    "email: cases without a rate",
];

/// The reviewers' part of the world's job file.
pub(super) fn desk(world: &World) -> sim::Desk {
    let pr = &world.opts.probs;
    sim::Desk {
        approvals: if world.four_eyes { 2 } else { 1 },
        inbox: (pr.inbox > 0 || pr.inbox_intruder > 0).then(|| INBOX.to_string()),
        reviewers: REVIEWERS
            .iter()
            .chain(std::iter::once(&DAVE))
            .map(|(n, u)| (n.to_string(), *u))
            .collect(),
    }
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap_or_else(|e| {
        panic!(
            "chown {} to uid {uid}: {e} (the simulator's inbox folders need root: they belong to \
             the reviewers' uids)",
            path.display()
        )
    });
}

fn status_of(text: &str) -> Option<Status> {
    [
        Status::Applied,
        Status::Waiting,
        Status::Unchanged,
        Status::Refused,
    ]
    .into_iter()
    .find(|s| s.as_str() == text)
}

/// (case, status, detail) of each row of a result file (`<name>.result.csv`).
fn read_result_csv(path: &Path) -> Vec<(String, Status, String)> {
    let mut rdr =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header: Vec<String> = rdr
        .headers()
        .expect("result header")
        .iter()
        .map(String::from)
        .collect();
    let col = |n: &str| {
        header
            .iter()
            .position(|h| h == n)
            .unwrap_or_else(|| panic!("{}: no column {n}", path.display()))
    };
    let (c, r, d) = (col("case"), col("result"), col("detail"));
    rdr.records()
        .map(|rec| {
            let rec = rec.expect("result record");
            let status = status_of(&rec[r])
                .unwrap_or_else(|| panic!("{}: result {:?}", path.display(), &rec[r]));
            (rec[c].to_string(), status, rec[d].to_string())
        })
        .collect()
}

impl Harness {
    /// The reviewers' desk: the job's `[[reviewer]]` table (if recon refuses it, a violation
    /// and the job without it, so the other shapes still play), the inbox folders owned by the
    /// reviewers' uids, and the two folders whose files must never be applied.
    pub(super) fn set_up_reviewers(&mut self, url: &str) {
        let mut d = desk(&self.world);
        self.rev.four_eyes = self.world.four_eyes;
        std::fs::write(
            &self.env.config_path,
            self.world.config_toml_for(url, Some(&d)),
        )
        .expect("config");
        if let Err(e) = Config::load(&self.env.config_path) {
            let text = format!("{e:#}");
            assert!(
                text.contains("reviewer"),
                "the simulator's config does not load: {text}"
            );
            self.violation(
                0,
                "config",
                "the job's reviewer table is refused (contract 2)",
                shaped("ReviewerTable", format!("{text}; played without the table")),
            );
            d.reviewers.clear();
            std::fs::write(
                &self.env.config_path,
                self.world.config_toml_for(url, Some(&d)),
            )
            .expect("config");
            Config::load(&self.env.config_path).expect("the simulator's config loads");
        }
        if self.world.four_eyes {
            *self.stats.entry("shape: four eyes (world)").or_insert(0) += 1;
        } else {
            *self.stats.entry("shape: one reviewer (world)").or_insert(0) += 1;
        }
        let regrouped = self
            .world
            .payments
            .iter()
            .filter(|p| matches!(p.shape, Some(Shape::Regroup { .. })))
            .count();
        if regrouped > 0 {
            *self.stats.entry("shape: regroup (world)").or_insert(0) += regrouped / 2;
        }
        let lost = self
            .world
            .payments
            .iter()
            .filter(|p| matches!(p.shape, Some(Shape::LostTwin { .. })))
            .count();
        if lost > 0 {
            *self.stats.entry("shape: lost twin (world)").or_insert(0) += lost / 2;
        }
        if d.inbox.is_some() {
            use std::os::unix::fs::PermissionsExt as _;
            let inbox = self.env.path(INBOX);
            let folders = REVIEWERS
                .iter()
                .map(|&(n, u)| (n, u))
                .chain([(DAVE.0, STRANGER), ("bob ", STRANGER)]);
            for (name, uid) in folders {
                let dir = inbox.join(name);
                std::fs::create_dir_all(&dir).expect("inbox folder");
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod");
                chown(&dir, uid);
            }
            self.rev.inbox = Some(inbox);
        }
    }

    fn uid_of(&self, reviewer: &str) -> u32 {
        REVIEWERS
            .iter()
            .find(|(n, _)| *n == reviewer)
            .map_or(STRANGER, |(_, u)| *u)
    }

    // ----- the decisions -----

    /// What a reviewer decides for an open case: per the truth, or wrong (the shapes of issue
    /// 40), as the Decide sheet offers it. None: left for later.
    fn choose(&mut self, c: &StoredCase, line_of: &BTreeMap<String, usize>) -> Option<Intent> {
        let pr = self.world.opts.probs.clone();
        let offered: Vec<String> = recon::decisions::check::offered(c)
            .iter()
            .map(|d| d.text())
            .collect();
        let mut intent = Intent {
            case: c.key.clone(),
            fingerprint: c.fingerprint.clone(),
            decision: String::new(),
            kind: Kind::Dismiss,
            right: true,
            severity: c.severity.clone(),
            case_kind: c.kind.clone(),
            payments: c
                .payments
                .iter()
                .map(|p| (p.payment_id.clone(), p.status.clone()))
                .collect(),
            confirm: None,
            seen: None,
            status_of: None,
            within_limit: None,
        };
        // Issue 42: where the case offers it, `accept difference` on its one candidate (a
        // netted fee's payout, rightly; a near miss's look-alike, wrongly and rarely). Its own
        // dice, so that the other decisions draw as they did.
        if offered.iter().any(|d| d == "accept difference")
            && self.dice42.chance(pr.accept_difference)
            && let [cand] = c.candidates.as_slice()
            && let (Some(&l), Some(&p)) = (
                line_of.get(&format!("{}:{}", cand.source, cand.line_id)),
                self.payment_by_id.get(&cand.payment_id),
            )
        {
            let right = matches!(self.world.lines[l].role, LineRole::Payment { payment, .. } if payment == p);
            // Accepting a look-alike's difference is a wrong confirmation: rarer than one.
            if right || self.dice42.chance(pr.wrong_confirm / 4) {
                let (line, pay) = (&self.world.lines[l], &self.world.payments[p]);
                let difference = (line.amount_minor.abs() - pay.amount_minor).abs();
                intent.decision = "accept difference".into();
                intent.kind = Kind::AcceptDifference;
                intent.right = right;
                intent.within_limit = Some(
                    line.currency == pay.currency
                        && sim::write_off_limit(pay.currency).is_some_and(|m| difference <= m),
                );
                intent.seen = cand.reference.clone();
                intent.confirm = Some((l, p, cand.source.clone(), cand.line_id.clone()));
                return Some(intent);
            }
        }
        let status_offered = offered.iter().any(|d| d == "failed");
        // Where the sheet offers a status decision, a reviewer who knows the payment's fate
        // often takes it rather than pointing at a line.
        let prefer_status = status_offered && self.dice.chance(5_000);
        if matches!(c.kind.as_str(), "ambiguity" | "near miss") && !prefer_status {
            let mut right = None;
            let mut wrong = Vec::new();
            for cand in &c.candidates {
                let (Some(&l), Some(&p)) = (
                    line_of.get(&format!("{}:{}", cand.source, cand.line_id)),
                    self.payment_by_id.get(&cand.payment_id),
                ) else {
                    continue;
                };
                let pick = (cand.number, l, p, cand.source.clone(), cand.line_id.clone());
                if matches!(self.world.lines[l].role, LineRole::Payment { payment, .. } if payment == p)
                {
                    right.get_or_insert(pick);
                } else {
                    wrong.push(pick);
                }
            }
            let pick = if !wrong.is_empty() && self.dice.chance(pr.wrong_confirm) {
                // Most tempting: a line that is another payment's payout (a provider's first,
                // whose id the provider can name later).
                let owned = |w: &(u32, usize, usize, String, String), psp: bool| {
                    let l = &self.world.lines[w.1];
                    l.payment(&self.world.lines).is_some()
                        && (!psp
                            || (l.source == Source::Psp
                                && matches!(l.role, LineRole::Payment { nth: 0, .. })))
                };
                let best: Vec<_> = wrong.iter().filter(|w| owned(w, true)).cloned().collect();
                let good: Vec<_> = wrong.iter().filter(|w| owned(w, false)).cloned().collect();
                let from = [&best, &good, &wrong]
                    .into_iter()
                    .find(|v| !v.is_empty())
                    .unwrap_or(&wrong);
                let k = self.dice.below(from.len() as u64) as usize;
                Some((from[k].clone(), false))
            } else {
                right.map(|r| (r, true))
            };
            if let Some(((n, l, p, source, line_id), ok)) = pick {
                intent.decision = format!("confirm {n}");
                intent.kind = if ok {
                    Kind::ConfirmRight
                } else {
                    Kind::ConfirmWrong
                };
                intent.right = ok;
                intent.seen = c
                    .candidates
                    .iter()
                    .find(|k| k.number == n)
                    .and_then(|k| k.reference.clone());
                intent.confirm = Some((l, p, source, line_id));
                return Some(intent);
            }
        }
        if let [cp] = &c.payments[..]
            && status_offered
            && let Some(&p) = self.payment_by_id.get(&cp.payment_id)
        {
            let fate = self.world.payments[p].fate;
            let own_payout_offered = c.candidates.iter().any(|k| {
                line_of
                    .get(&format!("{}:{}", k.source, k.line_id))
                    .is_some_and(|&l| self.world.payments[p].lines.contains(&l))
            });
            let wrong = self.dice.chance(pr.wrong_status);
            let choice = match (fate, wrong) {
                (Fate::Lost, false) => Some((Kind::Failed, true)),
                (Fate::Lost, true) => Some((Kind::Succeeded, false)),
                // Paid: a reviewer who knows it says so (confirming its payout, when the case
                // offers it, is the other right way).
                (Fate::PaidOnce, false) if prefer_status || !own_payout_offered => {
                    Some((Kind::Succeeded, true))
                }
                (_, true) => Some((Kind::Failed, false)),
                _ => None,
            };
            if let Some((kind, right)) = choice {
                intent.kind = kind;
                intent.right = right;
                intent.decision = if kind == Kind::Failed {
                    "failed".into()
                } else {
                    "succeeded".into()
                };
                intent.status_of = Some(p);
                return Some(intent);
            }
        }
        if self.dice.chance(pr.escalate) {
            intent.kind = Kind::Escalate;
            intent.decision = "escalate".into();
            return Some(intent);
        }
        if !self.dice.chance(5_000) {
            return None;
        }
        // Issue 42: a reason from the job's list (as a person types it), or sometimes one
        // that is not on it, or none: refused.
        if self.dice42.chance(pr.dismiss_bad_reason) {
            const BAD: [&str; 4] = [
                "dismiss",
                "dismiss: because",
                "dismiss: written-off",
                "dismiss: refund",
            ];
            intent.kind = Kind::DismissBadReason;
            intent.decision = BAD[self.dice42.below(BAD.len() as u64) as usize].into();
        } else {
            let reason =
                sim::DISMISS_REASONS[self.dice42.below(sim::DISMISS_REASONS.len() as u64) as usize];
            intent.decision = if self.dice42.chance(2_000) {
                format!("Dismiss: {}", reason.to_uppercase())
            } else {
                format!("dismiss: {reason}")
            };
        }
        Some(intent)
    }

    /// The nights the sheet deciding case `c` is kept when one of its payments is a regrouped
    /// twin whose second payout has not arrived yet: until the night it arrives (at most 4).
    fn regroup_hold(&self, c: &StoredCase, night: u32) -> Option<(u32, bool)> {
        for cp in &c.payments {
            let Some(&p) = self.payment_by_id.get(&cp.payment_id) else {
                continue;
            };
            let Some(Shape::Regroup { other }) = self.world.payments[p].shape else {
                continue;
            };
            let arrival = [p, other]
                .iter()
                .flat_map(|&q| self.world.payments[q].lines.clone())
                .filter_map(|l| self.first_arrival(l))
                .max()?;
            if arrival > night {
                let k = arrival - night;
                return Some((k.min(4), k <= 4));
            }
        }
        None
    }

    /// The first night a version holding line `l` arrives.
    fn first_arrival(&self, l: usize) -> Option<u32> {
        self.world
            .versions
            .iter()
            .filter(|v| v.lines.contains(&l))
            .map(|v| v.arrival)
            .min()
    }

    fn pick_reviewer(&mut self, night: u32, not: Option<&str>) -> String {
        if !self.rev.four_eyes && not.is_none() {
            return if night.is_multiple_of(2) {
                "alice"
            } else {
                "bob"
            }
            .to_string();
        }
        let names: Vec<&str> = REVIEWERS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| Some(*n) != not)
            .collect();
        names[self.dice.below(names.len() as u64) as usize].to_string()
    }

    fn new_sheet(
        &mut self,
        night: u32,
        actor: &str,
        rows: Vec<(Intent, Role)>,
        tag: &str,
    ) -> Sheet {
        self.rev.files += 1;
        let path = self.env.path(&format!(
            "decide-{night:02}-{}-{tag}-{actor}.xlsx",
            self.rev.files
        ));
        let cells: Vec<(String, String, String)> = rows
            .iter()
            .map(|(i, _)| (i.case.clone(), i.fingerprint.clone(), i.decision.clone()))
            .collect();
        // A note of its own: two files never have the same bytes by chance.
        super::write_decide_file(
            &path,
            &cells,
            &format!(
                "{tag} by {actor} on night {night} (file {})",
                self.rev.files
            ),
        );
        Sheet {
            path,
            actor: actor.to_string(),
            made: night,
            rows,
            shape: match tag {
                "approve" => "FourEyes",
                "approve-own" => "SelfApproval",
                "approve-again" => "ApproverAgain",
                _ => "Decide",
            },
        }
    }

    /// Whether the latest committed runs hold case `key` open with `fingerprint`.
    fn held_open(&self, key: &str, fingerprint: &str) -> bool {
        self.rev
            .cases
            .get(key)
            .is_some_and(|m| m.held && m.fingerprint == fingerprint)
    }

    fn expect(&self, intent: &Intent, role: &Role) -> Expect {
        if intent.kind == Kind::DismissBadReason {
            return Expect::RefusedReason;
        }
        if intent.above_limit()
            && matches!(
                role,
                Role::First | Role::Held | Role::SelfApproval | Role::Again
            )
        {
            return Expect::NotAlone;
        }
        if *role == Role::Again {
            return Expect::Unchanged;
        }
        if !self.held_open(&intent.case, &intent.fingerprint) {
            return Expect::RefusedStale;
        }
        match role {
            Role::First => {
                if self.rev.four_eyes && intent.moves_money() {
                    Expect::Waiting
                } else {
                    Expect::Applied
                }
            }
            Role::Held => Expect::Lenient,
            Role::SelfApproval => Expect::RefusedOwn,
            Role::Approver { .. } => Expect::Applied,
            Role::ApproverAgain | Role::Again => Expect::Unchanged,
        }
    }

    /// Applies `sheet` now with `recon::decisions::apply_file` (what `recon decisions apply`
    /// does) and checks every row. Returns the rows' statuses by case.
    async fn apply_now(&mut self, night: u32, sheet: &Sheet) -> BTreeMap<String, Status> {
        let expects: Vec<Expect> = sheet.rows.iter().map(|(i, r)| self.expect(i, r)).collect();
        let cfg = Config::load(&self.env.config_path).expect("the simulator's config loads");
        let db = self.env.db().await;
        // A kept sheet is checked against the case as it is now (the contract's point 3): its
        // payments' statuses are the latest run's, which decide whether a row moves money.
        let now: BTreeMap<String, Vec<(String, String)>> =
            recon::decisions::queue::list(&db, false)
                .await
                .expect("cases")
                .into_iter()
                .map(|c| {
                    let ps = c
                        .payments
                        .into_iter()
                        .map(|p| (p.payment_id, p.status))
                        .collect();
                    (c.key, ps)
                })
                .collect();
        let mut refreshed = sheet.clone();
        for (intent, role) in &mut refreshed.rows {
            if *role == Role::Held
                && let Some(ps) = now.get(&intent.case)
            {
                intent.payments = ps.clone();
            }
        }
        let sheet = &refreshed;
        let res =
            recon::decisions::apply_file(&db, &cfg.decisions, &sheet.path, &sheet.actor).await;
        db.close().await;
        let got: Vec<(String, Status, String)> = match res {
            Ok(r) => r
                .rows
                .iter()
                .map(|r| (r.case.clone(), r.status, r.detail.clone()))
                .collect(),
            Err(e) => {
                self.violation(
                    night,
                    "decisions",
                    "a decision file could not be applied",
                    format!("{} as {}: {e:#}", sheet.path.display(), sheet.actor),
                );
                return BTreeMap::new();
            }
        };
        self.judge_rows(night, sheet, &expects, &got, "apply").await
    }

    /// Puts `sheet` into its reviewer's inbox folder: the next committed run applies it.
    fn submit_to_inbox(&mut self, sheet: Sheet) {
        let Some(inbox) = self.rev.inbox.clone() else {
            return;
        };
        let expects: Vec<Expect> = sheet.rows.iter().map(|(i, r)| self.expect(i, r)).collect();
        let name = sheet
            .path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let target = inbox.join(&sheet.actor).join(&name);
        std::fs::rename(&sheet.path, &target).expect("into the inbox");
        chown(&target, self.uid_of(&sheet.actor));
        *self.stats.entry("shape: inbox").or_insert(0) += 1;
        self.rev.pending.push(Pending {
            sheet: Sheet {
                path: target,
                shape: "Inbox",
                ..sheet
            },
            expects,
        });
    }

    /// Takes the files waiting in the inbox (the next committed run applies them first).
    pub(super) fn take_pending_inbox(&mut self) -> Vec<Pending> {
        std::mem::take(&mut self.rev.pending)
    }

    /// After a committed run: what became of the inbox files it applied first. Called before
    /// the run's own checks, which depend on the decisions in force.
    pub(super) async fn collect_inbox(&mut self, night: u32, run: &str, pending: Vec<Pending>) {
        for p in pending {
            let path = &p.sheet.path;
            let stem = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            // recon reads a reviewer's folder and writes nothing there (issue 41): the file
            // stays, recorded by its sha256; its result is in recon's own folder.
            let sha = {
                use sha2::Digest as _;
                hex::encode(sha2::Sha256::digest(
                    std::fs::read(path).expect("inbox file"),
                ))
            };
            let result = self
                .env
                .path("out/decisions")
                .join(&p.sheet.actor)
                .join(format!("{stem}.{}.result.csv", &sha[..12]));
            if !path.exists() {
                self.violation(
                    night,
                    run,
                    "recon changed a reviewer's inbox folder (issue 41)",
                    shaped("Inbox", format!("{} is gone after the run", path.display())),
                );
                continue;
            }
            if !result.exists() {
                self.violation(
                    night,
                    run,
                    "a reviewer's inbox file was not applied (contract 2)",
                    shaped(
                        "Inbox",
                        format!(
                            "{} (folder owned by uid {}, reviewer {}): no result {} after the run",
                            path.display(),
                            self.uid_of(&p.sheet.actor),
                            p.sheet.actor,
                            result.display()
                        ),
                    ),
                );
                continue;
            }
            *self.stats.entry("decisions: inbox applied").or_insert(0) += 1;
            let got = read_result_csv(&result);
            self.judge_rows(night, &p.sheet, &p.expects, &got, "inbox")
                .await;
        }
        // Files in folders their reviewer does not own: never applied, whatever run comes.
        let applied: BTreeSet<String> = self
            .query("SELECT sha256 FROM decision_files")
            .await
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        let mut keep = Vec::new();
        for mut i in std::mem::take(&mut self.rev.intruders) {
            if applied.contains(&i.sha) {
                // What it decided took effect (as the folder's name): the ledger checks and
                // the re-run key see it.
                self.decisions_applied += 1;
                self.rev.effective.push(Effective {
                    intent: i.intent.clone(),
                    actor: i.folder.trim().to_string(),
                    approver: None,
                    paid: i
                        .intent
                        .status_of
                        .map(|p| self.world.payments[p].fate.paid()),
                    seen: false,
                });
                self.violation(
                    night,
                    run,
                    "an inbox file was applied from a folder its reviewer does not own (contract 2)",
                    shaped("InboxIntruder", format!(
                        "{} (folder {:?} owned by uid {STRANGER}, put there on night {}) was applied{}",
                        i.path.display(),
                        i.folder,
                        i.night,
                        if applied.contains(&i.sha) {
                            " (recorded in decision_files)"
                        } else {
                            " (moved away)"
                        }
                    )),
                );
                continue;
            }
            if !i.counted {
                i.counted = true;
                *self.stats.entry("decisions: inbox skipped").or_insert(0) += 1;
                self.notes.push(format!(
                    "[seed {} night {night} run {run}] inbox file {} (folder {:?}, put there on night {}) left alone",
                    self.seed,
                    i.path.display(),
                    i.folder,
                    i.night
                ));
            }
            keep.push(i);
        }
        self.rev.intruders = keep;
    }

    /// Checks each row's result against what it must be, and lets what took effect take
    /// effect in the harness's world. Returns the statuses by case.
    async fn judge_rows(
        &mut self,
        night: u32,
        sheet: &Sheet,
        expects: &[Expect],
        got: &[(String, Status, String)],
        via: &str,
    ) -> BTreeMap<String, Status> {
        let mut out = BTreeMap::new();
        for ((intent, role), &expect) in sheet.rows.iter().zip(expects) {
            let Some((_, status, detail)) = got.iter().find(|(c, _, _)| *c == intent.case) else {
                self.violation(
                    night,
                    "decisions",
                    "a decision row has no result",
                    format!("{} ({via}, {})", intent.describe(), sheet.path.display()),
                );
                continue;
            };
            let status = *status;
            out.insert(intent.case.clone(), status);
            let what = format!(
                "{} by {} ({via}, {role:?}, made on night {}): {} — {detail}",
                intent.describe(),
                sheet.actor,
                sheet.made,
                status.as_str()
            );
            let bad = |cat: &'static str| Some(cat);
            let violation = match (expect, status) {
                (Expect::RefusedStale, Status::Refused) => {
                    *self.stats.entry("decisions: stale refused").or_insert(0) += 1;
                    None
                }
                (Expect::RefusedStale, Status::Applied | Status::Waiting) => {
                    let why = self
                        .rev
                        .cases
                        .get(&intent.case)
                        .map(|m| {
                            if m.held {
                                format!(
                                    "the case holds fingerprint {} now",
                                    &m.fingerprint[..12.min(m.fingerprint.len())]
                                )
                            } else {
                                format!(
                                    "run {} reported its payments or lines without storing it",
                                    m.gone_by
                                )
                            }
                        })
                        .unwrap_or_else(|| "no committed run stored it".into());
                    self.violation(
                        night,
                        "decisions",
                        "a sheet row applied on a case no run holds open with its fingerprint (contract 3)",
                        shaped(sheet.shape, format!("{what}\n    {why}")),
                    );
                    None
                }
                (Expect::RefusedStale, Status::Unchanged) => None,
                (Expect::RefusedOwn, Status::Refused) => {
                    *self
                        .stats
                        .entry("decisions: refused self-approval")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::RefusedOwn, _) => {
                    bad("a reviewer approved their own decision (contract 1)")
                }
                (Expect::Applied, Status::Applied) | (Expect::Waiting, Status::Waiting) => None,
                // The same decision another reviewer made earlier and that waits: this one is
                // the second pair of eyes (recon says whose it approved; never one's own).
                (Expect::Waiting, Status::Applied)
                    if detail.starts_with("approved ")
                        && !detail.starts_with(&format!("approved {}'s", sheet.actor)) =>
                {
                    *self
                        .stats
                        .entry("decisions: a first decision approved another's")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::Waiting, Status::Applied) => {
                    bad("a money-moving decision took effect with one reviewer (contract 1)")
                }
                // The same first decision twice (two files of one reviewer in one inbox pass):
                // the second finds the first waiting, and nothing changes.
                (Expect::Waiting, Status::Refused)
                    if detail.contains("nobody approves their own decision") =>
                {
                    *self
                        .stats
                        .entry("decisions: a first decision repeated while it waits")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::Applied | Expect::Waiting, _) => {
                    bad("a current decision not applied (contract 1, 3)")
                }
                (Expect::Unchanged, Status::Unchanged) => {
                    *self.stats.entry("decisions: unchanged").or_insert(0) += 1;
                    None
                }
                // The same file by the same reviewer: nothing may change; a waiting row may be
                // refused instead (the contract: the first reviewer applying it again is).
                (Expect::Unchanged, Status::Refused) if *role == Role::Again => None,
                (Expect::Unchanged, _) if *role == Role::ApproverAgain => {
                    bad("the approver applying again is not unchanged (contract 1)")
                }
                (Expect::Unchanged, _) => {
                    bad("a decision applied again changed something (contract 1)")
                }
                (Expect::RefusedReason, Status::Refused) => {
                    *self
                        .stats
                        .entry("decisions: dismiss with a reason not on the list refused")
                        .or_insert(0) += 1;
                    None
                }
                // The same file again: recon says it saw the file (and refused the row) before.
                (Expect::RefusedReason, Status::Unchanged) if *role == Role::Again => None,
                (Expect::RefusedReason, _) => {
                    bad("a dismiss with a reason not on the job's list was not refused (issue 42)")
                }
                (Expect::NotAlone, Status::Refused) => {
                    *self
                        .stats
                        .entry("decisions: accept difference above the limit refused")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::NotAlone, Status::Waiting) => {
                    *self
                        .stats
                        .entry("decisions: accept difference above the limit waits")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::NotAlone, Status::Applied)
                    if detail.starts_with("approved ")
                        && !detail.starts_with(&format!("approved {}'s", sheet.actor)) =>
                {
                    *self
                        .stats
                        .entry("decisions: accept difference above the limit approved by a second reviewer")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::NotAlone, Status::Applied) => bad(
                    "accept difference above write_off_limit applied by one reviewer alone (issue 42)",
                ),
                (Expect::NotAlone, Status::Unchanged) => None,
                (Expect::Lenient, Status::Applied) if intent.above_limit() => bad(
                    "accept difference above write_off_limit applied by one reviewer alone (issue 42)",
                ),
                (Expect::Lenient, Status::Applied)
                    if self.rev.four_eyes && intent.moves_money() =>
                {
                    bad("a money-moving decision took effect with one reviewer (contract 1)")
                }
                (Expect::Lenient, Status::Refused) => {
                    *self
                        .stats
                        .entry("decisions: kept sheet refused (case decided meanwhile)")
                        .or_insert(0) += 1;
                    None
                }
                (Expect::Lenient, _) => None,
            };
            if let Some(cat) = violation {
                let shape = if cat.contains("write_off_limit") {
                    "AcceptDifference"
                } else if cat.contains("one reviewer") {
                    "FourEyes"
                } else if *role == Role::Again {
                    "SameFileTwice"
                } else {
                    sheet.shape
                };
                self.violation(night, "decisions", cat, shaped(shape, &what));
            }
            match status {
                Status::Applied | Status::Waiting => self.decisions_applied += 1,
                _ => {}
            }
            if status == Status::Waiting && !matches!(role, Role::Again | Role::ApproverAgain) {
                *self.stats.entry("decisions: waiting").or_insert(0) += 1;
                self.rev.waiting.push(Waiting {
                    intent: intent.clone(),
                    first: sheet.actor.clone(),
                });
            }
            if status == Status::Applied {
                let (actor, approver) = match role {
                    Role::Approver { first } => (first.clone(), Some(sheet.actor.clone())),
                    Role::SelfApproval => (sheet.actor.clone(), Some(sheet.actor.clone())),
                    Role::Again | Role::ApproverAgain => continue,
                    _ => (sheet.actor.clone(), None),
                };
                *self.stats.entry("decisions: applied").or_insert(0) += 1;
                if let Role::Approver { first } = role {
                    *self.stats.entry("decisions: approved").or_insert(0) += 1;
                    self.check_stored_approval(night, intent, first, &sheet.actor)
                        .await;
                }
                self.take_effect(night, intent, actor, approver);
            }
        }
        out
    }

    /// After an approval: the decision is stored APPLIED with the approver (contract 1).
    async fn check_stored_approval(
        &mut self,
        night: u32,
        intent: &Intent,
        first: &str,
        approver: &str,
    ) {
        let db = self.env.db().await;
        let shown = recon::decisions::queue::show(&db, &intent.case).await;
        db.close().await;
        let Ok((_, decisions)) = shown else {
            return;
        };
        let stored = decisions.iter().any(|d| {
            // As the job spells it (a reviewer may type `Dismiss: WRITTEN OFF`).
            d.decision.eq_ignore_ascii_case(&intent.decision)
                && d.fingerprint == intent.fingerprint
                && d.state == "APPLIED"
                && d.actor.eq_ignore_ascii_case(first)
                && d.approved_by
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(approver))
        });
        if !stored {
            let rows: Vec<String> = decisions
                .iter()
                .map(|d| {
                    format!(
                        "{} {} by {} approved by {:?}",
                        d.decision, d.state, d.actor, d.approved_by
                    )
                })
                .collect();
            self.violation(
                night,
                "decisions",
                "an approved decision is not stored APPLIED with its approver (contract 1)",
                shaped(
                    "FourEyes",
                    format!(
                        "{} by {first}, approved by {approver}; case_decisions: {rows:?}",
                        intent.describe()
                    ),
                ),
            );
        }
    }

    /// A decision took effect: the world learns of it, and the provider may answer.
    fn take_effect(
        &mut self,
        night: u32,
        intent: &Intent,
        actor: String,
        approver: Option<String>,
    ) {
        self.rev.effective.push(Effective {
            intent: intent.clone(),
            actor,
            approver,
            paid: intent.status_of.map(|p| self.world.payments[p].fate.paid()),
            seen: false,
        });
        match intent.kind {
            Kind::ConfirmRight | Kind::ConfirmWrong => self.confirm_effect(night, intent),
            Kind::AcceptDifference => {
                // The line is the payment's with exactly that difference: as a confirmation.
                if let Some((l, p, _, _)) = &intent.confirm {
                    let pid = self.world.payments[*p].id.clone();
                    self.cur.accepted.retain(|(x, _)| x != l);
                    self.cur.accepted.insert((*l, pid));
                }
                *self
                    .stats
                    .entry(if intent.above_limit() {
                        "decisions: accept difference above the limit took effect"
                    } else {
                        "decisions: accept difference took effect"
                    })
                    .or_insert(0) += 1;
                self.confirm_effect(night, intent)
            }
            Kind::Failed => self.failed_effect(night, intent),
            Kind::Succeeded => self.succeeded_effect(night, intent),
            Kind::Dismiss | Kind::Escalate | Kind::DismissBadReason => {}
        }
    }

    /// A confirmation took effect: the line names its payment now; the provider may answer.
    fn confirm_effect(&mut self, night: u32, intent: &Intent) {
        let pr = self.world.opts.probs.clone();
        let nights = self.world.opts.nights();
        let since_run = self.runs.len();
        let Some((l, p, _, _)) = intent.confirm.clone() else {
            return;
        };
        let pid = self.world.payments[p].id.clone();
        // A later confirmation of a line replaces the earlier one (and what the
        // earlier one was contradicted by).
        self.confirmed.retain(|(x, _)| *x != l);
        if intent.kind != Kind::AcceptDifference {
            self.cur.accepted.retain(|(x, _)| *x != l);
        }
        self.rev.wrong.retain(|w| w.line != Some(l));
        for d in &mut self.rev.dues {
            if d.line == Some(l) {
                d.done = true;
            }
        }
        self.confirmed.insert((l, pid.clone()));
        let owner = self.world.lines[l].payment(&self.world.lines);
        let wrong = !intent.right;
        if wrong {
            *self.stats.entry("shape: wrong confirm").or_insert(0) += 1;
            self.human_decided.insert(pid.clone());
            let mut payments = vec![p];
            if let Some(q) = owner {
                self.human_decided.insert(self.world.payments[q].id.clone());
                payments.push(q);
            }
            self.rev.wrong.push(Wrong {
                payments,
                line: Some(l),
                since_run,
                evidence: Vec::new(),
                what: intent.describe(),
            });
        }
        // The provider's word on the line: its reference corrected, or its payout id
        // named in a webhook, for the payment that truly owns it.
        let line = self.world.lines[l].clone();
        let Some(q) = owner.filter(|_| line.source == Source::Psp) else {
            return;
        };
        let Some(txn) = line.txn_id.clone() else {
            return;
        };
        let qid = self.world.payments[q].id.clone();
        // The webhook comes two nights later, so that the confirmed payment may have
        // been resolved on the line (and hold its payout id) the night before; when it
        // does not hold it then, the contradiction is not required (see `Due::holder`).
        let hook = self.world.payments[q].provider_id.as_deref() == Some(txn.as_str())
            && night + 2 < nights;
        // Issue 40's point 2 exactly: both payments unresolved and the case an ambiguity
        // (same money), so the next run resolves the confirmed one on the line and the
        // webhook then names the other for the same payout id.
        let unresolved = |id: &str| {
            intent
                .payments
                .iter()
                .any(|(x, s)| x == id && matches!(s.as_str(), "UNKNOWN" | "SUBMITTING"))
        };
        let resolvable =
            wrong && intent.case_kind == "ambiguity" && unresolved(&pid) && unresolved(&qid);
        // Otherwise either answer, when both are possible.
        if hook
            && (resolvable || self.dice.chance(6_000))
            && self.dice.chance(pr.hook_after_confirm)
        {
            let at =
                sim::night_as_of(self.start(), night + 1) + self.dice.between(60, 20 * 60) * MINUTE;
            self.world.add_hook(HookEvent {
                payment: q,
                status: "PAID",
                at,
            });
            *self
                .stats
                .entry(if wrong {
                    "shape: hook after a wrong confirm"
                } else {
                    "shape: hook after a right confirm"
                })
                .or_insert(0) += 1;
            *self.stats.entry("shape: hook after confirm").or_insert(0) += 1;
            if wrong {
                let ev = Evidence::Hook { at };
                self.push_wrong_evidence(l, ev.clone());
                self.rev.dues.push(Due {
                    payments: vec![p, q],
                    line: Some(l),
                    what: "the provider's webhook names another payment for the confirmed line's payout id",
                    shape: "HookAfterConfirm",
                    critical: true,
                    evidence: ev,
                    after: night,
                    holder: Some((p, txn)),
                    done: false,
                });
            }
        } else if self.dice.chance(pr.corrected_after_confirm) {
            // A re-delivery that names the payment the reviewer saw named already tells them
            // nothing new: the confirmation stands against it (only a later, other word
            // contradicts it).
            let repeats = intent
                .seen
                .as_deref()
                .is_some_and(|r| r.trim().eq_ignore_ascii_case(&qid));
            if repeats {
                *self
                    .stats
                    .entry("shape: corrected after confirm, as the reviewer saw it")
                    .or_insert(0) += 1;
                return;
            }
            let arrival = night + 1 + self.dice.below(2) as u32;
            if self
                .world
                .redeliver_with_reference(l, &qid, arrival)
                .is_some()
            {
                self.refresh_versions();
                *self
                    .stats
                    .entry(if wrong {
                        "shape: corrected after a wrong confirm"
                    } else {
                        "shape: corrected after a right confirm"
                    })
                    .or_insert(0) += 1;
                *self
                    .stats
                    .entry("shape: corrected after confirm")
                    .or_insert(0) += 1;
                if wrong {
                    let ev = Evidence::Renamed {
                        line: l,
                        reference: qid,
                    };
                    self.push_wrong_evidence(l, ev.clone());
                    self.rev.dues.push(Due {
                        payments: vec![p, q],
                        line: Some(l),
                        what: "the provider re-delivered the confirmed line naming another payment",
                        shape: "CorrectedAfterConfirm",
                        critical: true,
                        evidence: ev,
                        after: night,
                        holder: None,
                        done: false,
                    });
                }
            }
        }
    }

    /// A human FAILED took effect: a paid payment's payout contradicts it when it arrives or
    /// is renamed; a lost one may be paid after all.
    fn failed_effect(&mut self, night: u32, intent: &Intent) {
        let pr = self.world.opts.probs.clone();
        let since_run = self.runs.len();
        let Some(p) = intent.status_of else { return };
        self.human_decided.insert(self.world.payments[p].id.clone());
        if !intent.right {
            *self.stats.entry("shape: wrong failed").or_insert(0) += 1;
            *self.stats.entry("shape: wrong status").or_insert(0) += 1;
            let mut evidence = Vec::new();
            let payouts: Vec<usize> = self.world.payments[p]
                .lines
                .iter()
                .copied()
                .filter(|&l| matches!(self.world.lines[l].role, LineRole::Payment { .. }))
                .collect();
            let pid = self.world.payments[p].id.clone();
            // Its payout contradicts the reviewer when recon can tell whose it is: it
            // names the payment, or it is the lone exact look-alike of a near miss.
            let near_miss = matches!(self.world.payments[p].shape, Some(Shape::NearMiss { .. }));
            for l in payouts {
                let line = self.world.lines[l].clone();
                // A payout some run had already is what the reviewer decided on, not
                // later evidence (the contract's point 5 speaks of a later line); its
                // file re-delivered naming the payment is.
                let seen = self
                    .runs
                    .iter()
                    .any(|r| r.visible.values().any(|&v| v == l));
                if line.reference == pid || near_miss {
                    if !seen {
                        evidence.push(Evidence::Line(l));
                    }
                } else if line.source == Source::Psp
                    && line.txn_id.is_some()
                    && self.dice.chance(pr.corrected_after_confirm)
                {
                    let arrival = night + 1 + self.dice.below(2) as u32;
                    if self
                        .world
                        .redeliver_with_reference(l, &pid, arrival)
                        .is_some()
                    {
                        self.refresh_versions();
                        *self
                            .stats
                            .entry("shape: payout renamed after a wrong failed")
                            .or_insert(0) += 1;
                        evidence.push(Evidence::Renamed {
                            line: l,
                            reference: pid.clone(),
                        });
                    }
                }
            }
            for ev in &evidence {
                self.rev.dues.push(Due {
                    payments: vec![p],
                    line: None,
                    what: "a payout names a payment a reviewer decided FAILED",
                    shape: "WrongStatus",
                    critical: false,
                    evidence: ev.clone(),
                    after: night,
                    holder: None,
                    done: false,
                });
            }
            self.rev.wrong.push(Wrong {
                payments: vec![p],
                line: None,
                since_run,
                evidence,
                what: intent.describe(),
            });
        } else if self.dice.chance(pr.line_after_human_failed) {
            // The money left after all: a payout naming it, booked tomorrow.
            let booked = sim::day_start(self.start(), night as i64 + 1)
                + self.dice.between(3 * 60, 20 * 60) * MINUTE;
            let txn = Some(self.dice.provider_id());
            let line = self.world.line_for(p, booked, false, txn);
            if let Some(l) = self.world.add_line(line, night) {
                self.refresh_versions();
                let pay = &mut self.world.payments[p];
                pay.lines.push(l);
                pay.fate = Fate::PaidOnce;
                // Judged as the ledger's paid-after-FAILED facts are (invariant 2).
                self.facts.push(Fact {
                    payment: p,
                    what: "paid after a reviewer decided FAILED",
                    evidence: vec![l],
                    critical: false,
                });
                *self
                    .stats
                    .entry("shape: line after human FAILED")
                    .or_insert(0) += 1;
            }
        }
    }

    /// A human SUCCEEDED took effect: the money may come back, or the provider say FAILED.
    fn succeeded_effect(&mut self, night: u32, intent: &Intent) {
        let pr = self.world.opts.probs.clone();
        let nights = self.world.opts.nights();
        let since_run = self.runs.len();
        let Some(p) = intent.status_of else { return };
        self.human_decided.insert(self.world.payments[p].id.clone());
        if !intent.right {
            *self.stats.entry("shape: wrong succeeded").or_insert(0) += 1;
            *self.stats.entry("shape: wrong status").or_insert(0) += 1;
            self.rev.wrong.push(Wrong {
                payments: vec![p],
                line: None,
                since_run,
                evidence: Vec::new(),
                what: intent.describe(),
            });
        }
        let pay = self.world.payments[p].clone();
        // A right one: its money may come back; any one: the provider may say FAILED.
        if intent.right && self.dice.chance(pr.return_after_human) {
            let booked = sim::day_start(self.start(), night as i64 + 1)
                + self.dice.between(3 * 60, 20 * 60) * MINUTE;
            let txn = Some(self.dice.provider_id());
            let line = self.world.line_for(p, booked, true, txn);
            if let Some(l) = self.world.add_line(line, night) {
                self.refresh_versions();
                let pay = &mut self.world.payments[p];
                pay.lines.push(l);
                pay.fate = Fate::Returned;
                self.facts.push(Fact {
                    payment: p,
                    what: "money returned after a reviewer decided SUCCEEDED",
                    evidence: vec![l],
                    critical: false,
                });
                *self
                    .stats
                    .entry("shape: return after human SUCCEEDED")
                    .or_insert(0) += 1;
            }
        } else if pay.rail == Source::Psp
            && pay.provider_id.is_some()
            && night + 1 < nights
            && self.dice.chance(pr.failed_hook_after_human)
        {
            let at =
                sim::night_as_of(self.start(), night) + self.dice.between(60, 20 * 60) * MINUTE;
            self.world.add_hook(HookEvent {
                payment: p,
                status: "FAILED",
                at,
            });
            *self
                .stats
                .entry("shape: FAILED hook after human SUCCEEDED")
                .or_insert(0) += 1;
            let ev = Evidence::Hook { at };
            if !intent.right
                && let Some(w) = self.rev.wrong.last_mut()
            {
                w.evidence.push(ev.clone());
            }
            self.rev.dues.push(Due {
                payments: vec![p],
                line: None,
                what: "a FAILED webhook after a reviewer decided SUCCEEDED",
                shape: "FailedHookAfterHumanSucceeded",
                critical: true,
                evidence: ev,
                after: night,
                holder: None,
                done: false,
            });
        }
    }

    fn push_wrong_evidence(&mut self, line: usize, ev: Evidence) {
        if let Some(w) = self
            .rev
            .wrong
            .iter_mut()
            .rev()
            .find(|w| w.line == Some(line))
        {
            w.evidence.push(ev);
        }
    }

    /// The world's files changed: the versions' index by sha256 again.
    pub(super) fn refresh_versions(&mut self) {
        self.version_by_sha.clear();
        self.version_sha.clear();
        for (k, v) in self.world.versions.iter().enumerate() {
            let files = self.world.render_version(v);
            let sha = recon::sources::sha256_hex(&files[0].1);
            self.version_sha.push(sha.clone());
            self.version_by_sha.insert((v.source, v.day, sha), k);
        }
    }

    /// Whether run `r` holds evidence `ev`.
    pub(super) fn holds(&self, r: &DayRun, ev: &Evidence) -> bool {
        match ev {
            Evidence::Hook { at } => r.as_of >= *at && r.night >= self.world.first_night_at(*at),
            Evidence::Line(l) => r.visible.values().any(|v| v == l),
            Evidence::Renamed { line, reference } => {
                let l = &self.world.lines[*line];
                let name = self.world.file_name(l.source, l.file_day);
                r.inputs.iter().any(|(path, sha)| {
                    path.ends_with(&name)
                        && self
                            .version_by_sha
                            .get(&(l.source, l.file_day, sha.clone()))
                            .is_some_and(|&k| {
                                self.world.versions[k]
                                    .overrides
                                    .iter()
                                    .any(|(x, rf)| x == line && rf == reference)
                            })
                })
            }
        }
    }

    /// A recon transition of payment `p` in run `run` (index `i`) that the truth calls wrong,
    /// on a payment a WRONG human decision that took effect before the run is about: Some(true)
    /// when the run's inputs already hold evidence that contradicts that decision (recon must
    /// not decide on top of it), Some(false) when they do not (the reviewer caused it).
    pub(super) fn wrong_human(&self, p: usize, i: usize) -> Option<bool> {
        let r = &self.runs[i];
        let mut found = None;
        for w in &self.rev.wrong {
            if w.since_run <= i && w.payments.contains(&p) {
                let held = w.evidence.iter().any(|ev| self.holds(r, ev));
                found = Some(found.unwrap_or(false) || held);
            }
        }
        found
    }

    /// Whether a wrong confirmation of line `l` is contradicted by evidence run `i` holds.
    pub(super) fn confirmation_contradicted(&self, l: usize, i: usize) -> bool {
        let r = &self.runs[i];
        // The provider's webhook speaks about the payment it names: a run sees it contradict
        // the confirmation when that payment is among what the run reports (a re-run of an
        // old day whose scope holds only the confirmed payment has no word about the other).
        let reports = |q: usize| {
            String::from_utf8_lossy(&r.results).contains(self.world.payments[q].id.as_str())
        };
        self.rev.wrong.iter().any(|w| {
            w.line == Some(l)
                && w.since_run <= i
                && w.evidence.iter().any(|ev| {
                    self.holds(r, ev)
                        && (!matches!(ev, Evidence::Hook { .. })
                            || w.payments.iter().skip(1).any(|&q| reports(q)))
                })
        })
    }

    /// The reviewer(s) and case that confirmed line `l` as payment `id`'s.
    pub(super) fn confirmed_by(
        &self,
        l: usize,
        id: &str,
    ) -> Option<(String, Option<String>, String)> {
        self.rev.effective.iter().rev().find_map(|e| {
            let (x, p, _, _) = e.intent.confirm.as_ref()?;
            (*x == l && self.world.payments[*p].id == id)
                .then(|| (e.actor.clone(), e.approver.clone(), e.intent.case.clone()))
        })
    }

    // ----- a night's decisions -----

    /// Reviewers decide: kept sheets fall due, waiting decisions are approved, tonight's cases
    /// are decided, somebody drops a file where they should not. Then the ledger and the
    /// confirmed lines are checked against what took effect.
    pub(super) async fn decide(&mut self, night: u32) {
        let pr = self.world.opts.probs.clone();
        // Kept sheets due tonight.
        let (due, keep): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.rev.held)
            .into_iter()
            .partition(|h| h.due <= night);
        self.rev.held = keep;
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for h in due {
            if h.across_regroup {
                *self
                    .stats
                    .entry("shape: sheet kept across a regrouping night")
                    .or_insert(0) += 1;
            }
            let sheet = Sheet {
                rows: h
                    .sheet
                    .rows
                    .iter()
                    .map(|(i, _)| (i.clone(), Role::Held))
                    .collect(),
                ..h.sheet
            };
            let got = self.apply_now(night, &sheet).await;
            for (intent, _) in &sheet.rows {
                if got.get(&intent.case) == Some(&Status::Applied) {
                    touched.extend(intent.payments.iter().map(|(id, _)| id.clone()));
                }
            }
        }
        // Tonight's cases: those the nightly run stored, open.
        let db = self.env.db().await;
        let cases = recon::decisions::queue::list(&db, true)
            .await
            .expect("cases");
        db.close().await;
        let nightly = self
            .runs
            .iter()
            .rev()
            .find(|r| r.night == night && r.nightly)
            .map(|r| r.run_id.clone());
        let line_of: BTreeMap<String, usize> =
            self.uids.iter().map(|(&l, u)| (u.clone(), l)).collect();
        let busy = self.busy_cases();
        let mut rows = Vec::new();
        let mut hold: Option<(u32, bool)> = None;
        for c in &cases {
            if c.status != "OPEN"
                || Some(&c.last_seen_run_id) != nightly.as_ref()
                || busy.contains(&c.key)
                || c.payments.iter().any(|p| touched.contains(&p.payment_id))
            {
                continue;
            }
            let regroup = self.regroup_hold(c, night);
            // Status decisions are rarer: reviewers take those cases first.
            let status = recon::decisions::check::offered(c)
                .iter()
                .any(|d| d.text() == "failed");
            if regroup.is_none() && !self.dice.chance(if status { 8_000 } else { DECIDE }) {
                continue;
            }
            if let Some(intent) = self.choose(c, &line_of) {
                let kind = match intent.kind {
                    Kind::ConfirmRight => "decided: confirm right",
                    Kind::ConfirmWrong => "decided: confirm wrong",
                    Kind::Failed => "decided: failed",
                    Kind::Succeeded => "decided: succeeded",
                    Kind::Dismiss => "decided: dismiss",
                    Kind::Escalate => "decided: escalate",
                    Kind::AcceptDifference if intent.above_limit() => {
                        "decided: accept difference (above the limit)"
                    }
                    Kind::AcceptDifference => "decided: accept difference (within the limit)",
                    Kind::DismissBadReason => "decided: dismiss with a reason not on the list",
                };
                *self.stats.entry(kind).or_insert(0) += 1;
                if regroup.is_some() {
                    hold = hold.max(regroup);
                }
                rows.push((intent, Role::First));
            }
        }
        if !rows.is_empty() {
            let actor = self.pick_reviewer(night, None);
            let sheet = self.new_sheet(night, &actor, rows, "decide");
            if let Some((k, across)) = hold {
                *self.stats.entry("shape: sheet kept").or_insert(0) += 1;
                self.rev.held.push(Held {
                    sheet: Sheet {
                        shape: if across {
                            "SheetKeptAcrossRegroup"
                        } else {
                            "SheetKept"
                        },
                        ..sheet
                    },
                    due: night + k,
                    across_regroup: across,
                });
            } else if self.dice.chance(pr.sheet_kept) {
                *self.stats.entry("shape: sheet kept").or_insert(0) += 1;
                let k = self.dice.between(1, 4) as u32;
                self.rev.held.push(Held {
                    sheet: Sheet {
                        shape: "SheetKept",
                        ..sheet
                    },
                    due: night + k,
                    across_regroup: false,
                });
            } else if self.rev.inbox.is_some() && self.dice.chance(pr.inbox) {
                self.submit_to_inbox(sheet);
            } else {
                let got = self.apply_now(night, &sheet).await;
                self.after_first(night, &sheet, &got).await;
            }
        }
        self.approve(night).await;
        self.intrude(night, &cases, nightly.as_deref());
        self.check_human_history(night, "decisions").await;
        self.check_confirmed_lines(night, "decisions").await;
    }

    /// After a fresh sheet applied now: the same file again, and (under four eyes) the first
    /// reviewer trying to approve their own waiting decisions.
    async fn after_first(&mut self, night: u32, sheet: &Sheet, got: &BTreeMap<String, Status>) {
        let pr = self.world.opts.probs.clone();
        if self.dice.chance(3_500) {
            *self.stats.entry("shape: same file twice").or_insert(0) += 1;
            let before = self.history().await.len();
            let again = Sheet {
                rows: sheet
                    .rows
                    .iter()
                    .map(|(i, _)| (i.clone(), Role::Again))
                    .collect(),
                ..sheet.clone()
            };
            self.apply_now(night, &again).await;
            let after = self.history().await.len();
            if after != before {
                self.violation(
                    night,
                    "decisions",
                    "a decision applied again changed something (contract 1)",
                    shaped(
                        "SameFileTwice",
                        format!(
                            "{} applied twice by {}: history rows {before} → {after}",
                            sheet.path.display(),
                            sheet.actor
                        ),
                    ),
                );
            }
        }
        let waiting: Vec<(Intent, Role)> = sheet
            .rows
            .iter()
            .filter(|(i, _)| got.get(&i.case) == Some(&Status::Waiting))
            .map(|(i, _)| (i.clone(), Role::SelfApproval))
            .collect();
        if !waiting.is_empty() && self.dice.chance(pr.self_approval) {
            *self.stats.entry("shape: self-approval tried").or_insert(0) += 1;
            let own = self.new_sheet(night, &sheet.actor, waiting, "approve-own");
            self.apply_now(night, &own).await;
        }
    }

    /// Cases a decision is under way for (waiting, in the inbox, in a kept sheet) or that an
    /// intruder decided.
    fn busy_cases(&self) -> BTreeSet<String> {
        self.rev
            .waiting
            .iter()
            .map(|w| w.intent.case.clone())
            .chain(
                self.rev
                    .pending
                    .iter()
                    .flat_map(|p| p.sheet.rows.iter().map(|(i, _)| i.case.clone())),
            )
            .chain(
                self.rev
                    .held
                    .iter()
                    .flat_map(|h| h.sheet.rows.iter().map(|(i, _)| i.case.clone())),
            )
            .chain(self.rev.spoiled.iter().cloned())
            .collect()
    }

    /// Second reviewers approve waiting decisions whose case is still what it was.
    async fn approve(&mut self, night: u32) {
        let pr = self.world.opts.probs.clone();
        let mut by_approver: BTreeMap<String, Vec<(Intent, Role)>> = BTreeMap::new();
        let mut own: BTreeMap<String, Vec<(Intent, Role)>> = BTreeMap::new();
        let mut keep = Vec::new();
        for w in std::mem::take(&mut self.rev.waiting) {
            if !self.held_open(&w.intent.case, &w.intent.fingerprint)
                || self.rev.spoiled.contains(&w.intent.case)
            {
                *self
                    .stats
                    .entry("decisions: waiting left (the case changed)")
                    .or_insert(0) += 1;
                continue;
            }
            // The first reviewer, impatient, applies their decision again from a new file.
            if self.dice.chance(pr.self_approval / 2) {
                own.entry(w.first.clone())
                    .or_default()
                    .push((w.intent.clone(), Role::SelfApproval));
            }
            if !self.dice.chance(6_000) {
                keep.push(w);
                continue;
            }
            let approver = self.pick_reviewer(night, Some(&w.first));
            by_approver.entry(approver).or_default().push((
                w.intent.clone(),
                Role::Approver {
                    first: w.first.clone(),
                },
            ));
        }
        self.rev.waiting = keep;
        for (first, rows) in own {
            *self.stats.entry("shape: self-approval tried").or_insert(0) += 1;
            let sheet = self.new_sheet(night, &first, rows, "approve-own");
            self.apply_now(night, &sheet).await;
        }
        for (approver, rows) in by_approver {
            let sheet = self.new_sheet(night, &approver, rows, "approve");
            if self.rev.inbox.is_some() && self.dice.chance(pr.inbox) {
                self.submit_to_inbox(sheet);
                continue;
            }
            let got = self.apply_now(night, &sheet).await;
            let approved: Vec<(Intent, Role)> = sheet
                .rows
                .iter()
                .filter(|(i, _)| got.get(&i.case) == Some(&Status::Applied))
                .map(|(i, _)| (i.clone(), Role::ApproverAgain))
                .collect();
            if !approved.is_empty() && self.dice.chance(pr.approver_again) {
                *self.stats.entry("shape: approver again").or_insert(0) += 1;
                let before = self.history().await.len();
                let again = self.new_sheet(night, &approver, approved, "approve-again");
                self.apply_now(night, &again).await;
                let after = self.history().await.len();
                if after != before {
                    self.violation(
                        night,
                        "decisions",
                        "a decision applied again changed something (contract 1)",
                        shaped(
                            "ApproverAgain",
                            format!(
                                "the approver {approver} again: history rows {before} → {after}"
                            ),
                        ),
                    );
                }
            }
        }
    }

    /// Somebody puts a decision file into an inbox folder whose reviewer they are not: a folder
    /// named for reviewer dave but owned by another uid, or `bob ` with a trailing blank.
    fn intrude(&mut self, night: u32, cases: &[StoredCase], nightly: Option<&str>) {
        let Some(inbox) = self.rev.inbox.clone() else {
            return;
        };
        if !self.dice.chance(self.world.opts.probs.inbox_intruder) {
            return;
        }
        let busy = self.busy_cases();
        let open: Vec<&StoredCase> = cases
            .iter()
            .filter(|c| {
                c.status == "OPEN"
                    && Some(c.last_seen_run_id.as_str()) == nightly
                    && !busy.contains(&c.key)
            })
            .collect();
        if open.is_empty() {
            return;
        }
        let c = open[self.dice.below(open.len() as u64) as usize];
        let offered: Vec<String> = recon::decisions::check::offered(c)
            .iter()
            .map(|d| d.text())
            .collect();
        let decision = if offered.iter().any(|d| d == "failed") {
            "failed"
        } else {
            "dismiss: written off"
        };
        let status_of = (decision == "failed")
            .then(|| self.payment_by_id.get(&c.payments[0].payment_id).copied())
            .flatten();
        let intent = Intent {
            case: c.key.clone(),
            fingerprint: c.fingerprint.clone(),
            decision: decision.to_string(),
            kind: if decision == "failed" {
                Kind::Failed
            } else {
                Kind::Dismiss
            },
            right: status_of.is_none_or(|p| !self.world.payments[p].fate.paid()),
            severity: c.severity.clone(),
            case_kind: c.kind.clone(),
            payments: c
                .payments
                .iter()
                .map(|p| (p.payment_id.clone(), p.status.clone()))
                .collect(),
            confirm: None,
            seen: None,
            status_of,
            within_limit: None,
        };
        self.rev.spoiled.insert(c.key.clone());
        let folder = if self.dice.chance(5_000) {
            DAVE.0
        } else {
            "bob "
        };
        self.rev.files += 1;
        let path = inbox.join(folder).join(format!(
            "decide-{night:02}-{}-intruder.xlsx",
            self.rev.files
        ));
        super::write_decide_file(
            &path,
            &[(c.key.clone(), c.fingerprint.clone(), decision.to_string())],
            &format!("not mine to decide, night {night}"),
        );
        chown(&path, STRANGER);
        let sha = recon::sources::sha256_hex(&std::fs::read(&path).expect("intruder file"));
        *self.stats.entry("shape: inbox intruder").or_insert(0) += 1;
        self.rev.intruders.push(Intruder {
            intent,
            path,
            sha,
            folder: folder.to_string(),
            night,
            counted: false,
        });
    }

    // ----- checks against the database -----

    /// Every human transition since the last check comes from a decision that took effect,
    /// names its reviewer (and approver), and is judged against the truth.
    pub(super) async fn check_human_history(&mut self, night: u32, label: &str) {
        let rows = self
            .query(
                "SELECT CAST(id AS TEXT), payment_id, from_status, to_status, actor, reason \
                 FROM payment_status_history WHERE actor <> 'recon' ORDER BY id",
            )
            .await;
        let mut rows: Vec<(i64, Vec<String>)> = rows
            .into_iter()
            .map(|r| (r[0].parse().expect("id"), r))
            .collect();
        rows.sort_by_key(|r| r.0);
        for (id, r) in rows {
            if id <= self.rev.history_seen {
                continue;
            }
            self.rev.history_seen = id;
            let (payment, from, to, actor, reason) = (&r[1], &r[2], &r[3], &r[4], &r[5]);
            *self.stats.entry("human transitions").or_insert(0) += 1;
            let want = if to == "FAILED" {
                Kind::Failed
            } else {
                Kind::Succeeded
            };
            let found = self.rev.effective.iter().position(|e| {
                !e.seen
                    && e.intent.kind == want
                    && e.intent
                        .status_of
                        .is_some_and(|p| self.world.payments[p].id == *payment)
            });
            let Some(k) = found else {
                self.violation(
                    night,
                    label,
                    "a human transition no decision that took effect asked for (contract 1)",
                    shaped(
                        "FourEyes",
                        format!("{payment} {from}→{to} by {actor}: {reason}"),
                    ),
                );
                continue;
            };
            self.rev.effective[k].seen = true;
            let e = self.rev.effective[k].clone();
            let text = format!("{actor} {reason}").to_lowercase();
            let names_all = std::iter::once(&e.actor)
                .chain(e.approver.as_ref())
                .all(|n| text.contains(&n.to_lowercase()));
            let known = REVIEWERS
                .iter()
                .chain(std::iter::once(&DAVE))
                .any(|(n, _)| actor.eq_ignore_ascii_case(n));
            if !names_all || !known {
                self.violation(
                    night,
                    label,
                    "a human transition does not name its reviewer and approver (contract 1)",
                    shaped(
                        "FourEyes",
                        format!(
                            "{payment} {from}→{to} by {actor} ({reason}); decided by {}{}",
                            e.actor,
                            e.approver
                                .as_deref()
                                .map(|a| format!(", approved by {a}"))
                                .unwrap_or_default()
                        ),
                    ),
                );
            }
            let p = self.payment_by_id[payment.as_str()];
            let paid = e.paid.unwrap_or_else(|| self.world.payments[p].fate.paid());
            let contradicts = (to == "FAILED" && paid) || (to == "SUCCEEDED" && !paid);
            if contradicts && e.intent.right {
                self.violation(
                    night,
                    label,
                    "a right reviewer's transition contradicts the truth (issue 40)",
                    format!(
                        "{payment} {from}→{to} by {actor} for {}\n    truth: {}",
                        e.intent.describe(),
                        self.world.describe_payment(p)
                    ),
                );
            } else if contradicts {
                *self
                    .stats
                    .entry("human transitions wrong by the truth (played)")
                    .or_insert(0) += 1;
            }
        }
    }

    /// Every confirmed line comes from a confirmation that took effect.
    pub(super) async fn check_confirmed_lines(&mut self, night: u32, label: &str) {
        let rows = self
            .query(
                "SELECT source, line_id, payment_id FROM confirmed_lines ORDER BY source, line_id",
            )
            .await;
        for r in rows {
            let key = (r[0].clone(), r[1].clone(), r[2].clone());
            if self.rev.confirmed_seen.contains(&key) {
                continue;
            }
            self.rev.confirmed_seen.insert(key.clone());
            let ok = self.rev.effective.iter().any(|e| {
                e.intent.confirm.as_ref().is_some_and(|(_, p, s, l)| {
                    *s == key.0 && *l == key.1 && self.world.payments[*p].id == key.2
                })
            });
            if !ok {
                self.violation(
                    night,
                    label,
                    "a confirmation took effect that no applied decision made (contract 1)",
                    shaped(
                        "FourEyes",
                        format!("line {}:{} confirmed as {}'s", key.0, key.1, key.2),
                    ),
                );
            }
        }
    }

    /// After a committed run (its days `first..`): the cases it stored or left, the open list,
    /// one payout per payment, and the ledger against what took effect.
    pub(super) async fn after_commit(&mut self, night: u32, first: usize) {
        let label = self.runs[first].label.clone();
        let as_of = self.runs[first].as_of;
        let ids: BTreeSet<String> = self.runs[first..]
            .iter()
            .map(|r| r.run_id.clone())
            .collect();
        let mut payments: BTreeSet<String> = BTreeSet::new();
        let mut uids: BTreeSet<String> = BTreeSet::new();
        for r in &self.runs[first..] {
            for row in parse_results(&r.results, self.start()) {
                if !row.payment_id.is_empty() {
                    payments.insert(row.payment_id.clone());
                }
                uids.extend(row.uids.iter().cloned());
            }
        }
        let db = self.env.db().await;
        let all = recon::decisions::queue::list(&db, false)
            .await
            .expect("cases");
        let open = recon::decisions::queue::list(&db, true)
            .await
            .expect("cases");
        db.close().await;
        let stored: BTreeSet<String> = all
            .iter()
            .filter(|c| ids.contains(&c.last_seen_run_id))
            .map(|c| c.key.clone())
            .collect();
        for c in all.iter().filter(|c| stored.contains(&c.key)) {
            let newer = self.rev.cases.get(&c.key).is_none_or(|m| as_of >= m.as_of);
            if newer {
                self.rev.cases.insert(
                    c.key.clone(),
                    CaseModel {
                        fingerprint: c.fingerprint.clone(),
                        as_of,
                        held: true,
                        payments: c.payments.iter().map(|p| p.payment_id.clone()).collect(),
                        uids: c
                            .candidates
                            .iter()
                            .map(|k| format!("{}:{}", k.source, k.line_id))
                            .collect(),
                        gone_by: String::new(),
                        gone_as_of: 0,
                    },
                );
            }
        }
        let run_id = self.runs[first].run_id.clone();
        for (key, m) in self.rev.cases.iter_mut() {
            if !m.held || stored.contains(key) || as_of < m.as_of {
                continue;
            }
            if m.payments.iter().any(|p| payments.contains(p))
                || m.uids.iter().any(|u| uids.contains(u))
            {
                m.held = false;
                m.gone_by = run_id.clone();
                m.gone_as_of = as_of;
            }
        }
        for c in &open {
            let Some(m) = self.rev.cases.get(&c.key).filter(|m| !m.held) else {
                continue;
            };
            if !self
                .rev
                .listed_reported
                .insert((c.key.clone(), c.fingerprint.clone()))
            {
                continue;
            }
            let shape = c
                .payments
                .iter()
                .filter_map(|p| self.payment_by_id.get(&p.payment_id))
                .find_map(|&p| self.world.payments[p].shape)
                .map(|s| {
                    let name: String = format!("{s:?}")
                        .chars()
                        .take_while(|c| c.is_alphanumeric())
                        .collect();
                    format!("(shape: {name}) ")
                })
                .unwrap_or_default();
            let s = format!(
                "{shape}case {} ({}, {}, status {}, last stored by run {} as of {}) is listed open, but run {} (as of {}) reported its payments or lines without storing it",
                c.key,
                c.kind,
                c.what,
                c.status,
                c.last_seen_run_id,
                super::fmt_t(m.as_of),
                m.gone_by,
                super::fmt_t(m.gone_as_of)
            );
            self.violation(
                night,
                &label,
                "a case no run holds open is listed open (contract 3)",
                s,
            );
        }
        *self.stats.entry("cases modelled").or_insert(0) += stored.len();
        // One payout, one payment.
        let held = self
            .query(
                "SELECT provider_payment_id, payment_id FROM payments \
                 WHERE provider_payment_id IS NOT NULL AND provider_payment_id <> '' \
                 ORDER BY provider_payment_id, payment_id",
            )
            .await;
        let mut by_id: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in held {
            by_id.entry(r[0].clone()).or_default().push(r[1].clone());
        }
        for (id, holders) in by_id {
            if holders.len() < 2 || !self.rev.duplicates_reported.insert(id.clone()) {
                continue;
            }
            let hooked = self.rev.dues.iter().any(|d| {
                d.holder.is_some()
                    && d.payments
                        .iter()
                        .any(|&p| holders.contains(&self.world.payments[p].id))
            });
            let mut s = format!(
                "(shape: {}) provider id {id} is held by {} payments:",
                if hooked { "HookAfterConfirm" } else { "-" },
                holders.len()
            );
            for h in &holders {
                if let Some(&p) = self.payment_by_id.get(h) {
                    let _ = write!(s, "\n    {}", self.world.describe_payment(p));
                    let _ = write!(
                        s,
                        "\n      every row recon wrote about it:{}",
                        self.timeline(h)
                    );
                }
            }
            self.violation(
                night,
                &label,
                "one payout held by two payments (contract 4c)",
                s,
            );
        }
        self.check_human_history(night, &label).await;
        self.check_confirmed_lines(night, &label).await;
    }

    /// After a nightly run: the tickets due on contradicting evidence it holds.
    pub(super) async fn check_dues(&mut self, night: u32, tickets: &[Ticket]) {
        let Some(i) = self
            .runs
            .iter()
            .rposition(|r| r.night == night && r.nightly && !r.dry)
        else {
            return;
        };
        let nightly = self.runs[i].clone();
        let mut holders: Option<BTreeMap<String, String>> = None;
        for k in 0..self.rev.dues.len() {
            let d = self.rev.dues[k].clone();
            if d.done || d.after >= night || !self.holds(&nightly, &d.evidence) {
                continue;
            }
            self.rev.dues[k].done = true;
            if let Some((p, id)) = &d.holder {
                if holders.is_none() {
                    holders = Some(
                        self.query(
                            "SELECT payment_id, COALESCE(provider_payment_id, '') FROM payments",
                        )
                        .await
                        .into_iter()
                        .map(|r| (r[0].clone(), r[1].clone()))
                        .collect(),
                    );
                }
                let pid = &self.world.payments[*p].id;
                if holders.as_ref().and_then(|h| h.get(pid)) != Some(id) {
                    self.notes.push(format!(
                        "[seed {} night {night}] {}: {pid} holds {:?}, not {id}, so no contradiction is required; every row recon wrote about it:{}",
                        self.seed,
                        d.what,
                        holders.as_ref().and_then(|h| h.get(pid)),
                        self.timeline(pid)
                    ));
                    *self
                        .stats
                        .entry("contradictions waived (the confirmed payment does not hold the payout id)")
                        .or_insert(0) += 1;
                    continue;
                }
            }
            // recon can name only payments its ledger holds. The simulated ledger gets a row
            // at the payment's `ledger_from` (the harness imports up to each night's as-of): a
            // blind or live retry's row appears only at the retry, days after the payout it
            // truly owns, so a corrected re-delivery can name a payment recon cannot know yet.
            // That payment's part of the due waits for the first nightly run whose ledger holds
            // it and whose inputs still hold the evidence (recon must name it then); the
            // payments the ledger holds are checked now.
            let (now, later) = d.split_by_ledger(&self.world, nightly.as_of);
            if let Some(mut later) = later {
                // Not before the next night (this night's checks may run again).
                later.after = night;
                self.notes.push(format!(
                    "[seed {} night {night}] {} (shape {}): {} not in the ledger of nightly run {} yet; checked on the first nightly run that holds it and the evidence",
                    self.seed,
                    d.what,
                    d.shape,
                    later
                        .payments
                        .iter()
                        .map(|&p| self.world.payments[p].id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    nightly.run_id
                ));
                *self
                    .stats
                    .entry("contradictions deferred (a payment not in the ledger yet)")
                    .or_insert(0) += 1;
                self.rev.dues.push(later);
            }
            let Some(d) = now else { continue };
            *self.stats.entry("contradictions checked").or_insert(0) += 1;
            // Like the paid-after-FAILED invariant: a ticket about the evidence line itself
            // (seen by this run) answers a non-critical due too.
            let line_uid = match &d.evidence {
                Evidence::Line(l) if !d.critical => self.uids.get(l).cloned(),
                _ => None,
            };
            let line_ticket = line_uid.is_some_and(|u| {
                tickets.iter().any(|t| {
                    t.line_ids.split(';').any(|x| x == u)
                        && self
                            .run_by_id(&t.last_seen_run_id)
                            .is_some_and(|r| !r.dry && r.as_of >= nightly.as_of)
                })
            });
            if line_ticket {
                continue;
            }
            let missing: Vec<usize> = d
                .payments
                .iter()
                .copied()
                .filter(|&p| {
                    let id = &self.world.payments[p].id;
                    // CONTRADICTED is CRITICAL: an older, milder ticket about the payment is not
                    // the answer.
                    !tickets.iter().any(|t| {
                        t.payment_id == *id
                            && (!d.critical || t.severity == "CRITICAL")
                            && self
                                .run_by_id(&t.last_seen_run_id)
                                .is_some_and(|r| !r.dry && r.as_of >= nightly.as_of)
                    })
                })
                .collect();
            if missing.is_empty() {
                continue;
            }
            let mut s = format!(
                "(shape: {}) {}: nightly run {} holds it ({:?}) but no {}ticket it raised or saw names {}",
                d.shape,
                d.what,
                nightly.run_id,
                d.evidence,
                if d.critical { "CRITICAL " } else { "" },
                missing
                    .iter()
                    .map(|&p| self.world.payments[p].id.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for &p in &d.payments {
                let id = self.world.payments[p].id.clone();
                let _ = write!(s, "\n    truth: {}", self.world.describe_payment(p));
                for t in tickets.iter().filter(|t| t.payment_id == id) {
                    let _ = write!(
                        s,
                        "\n      ticket {} {} {} {} last seen by {}",
                        t.id, t.kind, t.severity, t.status, t.last_seen_run_id
                    );
                }
                let _ = write!(
                    s,
                    "\n      every row recon wrote about it:{}",
                    self.timeline(&id)
                );
            }
            if let Some(w) = self
                .rev
                .wrong
                .iter()
                .find(|w| d.payments.iter().all(|p| w.payments.contains(p)))
            {
                let _ = write!(s, "\n    the decision: {}", w.what);
            }
            self.violation(
                night,
                &nightly.label,
                "contradicting evidence after a human decision not surfaced (issue 40)",
                s,
            );
        }
    }

    /// Re-delivered references that night `n` delivered: the line names that payment now.
    pub(super) fn note_renamed(&mut self, n: u32) {
        for v in self.world.versions.iter().filter(|v| v.arrival <= n) {
            for (l, r) in &v.overrides {
                self.rev.renamed.insert((*l, r.clone()));
            }
        }
    }
}

/// Harness self-test: a due about a payment the simulated ledger does not hold yet (a blind
/// retry's row appears only at its retry, after the payout it owns was booked) is held to the
/// payments the ledger holds, and the rest of it waits; "held" is what the harness imports.
#[test]
fn a_due_waits_for_a_payment_the_ledger_does_not_hold_yet() {
    let w = World::build(&sim::SimOptions::new(108));
    let b = w
        .payments
        .iter()
        .position(|p| matches!(p.shape, Some(Shape::BlindRetry { .. })))
        .expect("seed 108's world has a blind retry");
    let row_at = w.payments[b].ledger_from;
    // Its payout was booked before its row is in the ledger: a re-delivery can name it early.
    let payout = w.payments[b].lines[0];
    assert!(w.lines[payout].booked_at < row_at);
    let before = row_at - 1;
    let a = w
        .payments
        .iter()
        .position(|p| p.ledger_from <= before)
        .expect("a payment in the ledger before it");
    let (ids, _, _) = w.ledger_csv(None, before);
    assert!(ids.contains(&w.payments[a].id));
    assert!(!ids.contains(&w.payments[b].id));
    let due = Due {
        payments: vec![a, b],
        line: Some(payout),
        what: "self-test",
        shape: "self-test",
        critical: true,
        evidence: Evidence::Hook { at: before },
        after: 0,
        holder: None,
        done: true,
    };
    let (now, later) = due.split_by_ledger(&w, before);
    let (now, later) = (now.expect("a's part"), later.expect("b's part"));
    assert_eq!((now.payments, now.done), (vec![a], false));
    assert_eq!((later.payments, later.done), (vec![b], false));
    assert_eq!(later.line, Some(payout));
    // Once the row is imported, the whole due is checked.
    let (ids, _, _) = w.ledger_csv(None, row_at);
    assert!(ids.contains(&w.payments[b].id));
    let (now, later) = due.split_by_ledger(&w, row_at);
    assert_eq!(now.expect("the whole due").payments, vec![a, b]);
    assert!(later.is_none());
}
