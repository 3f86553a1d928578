//! Two plans of the same night side by side (the live rules' and a candidate's: `recon
//! backtest`, and a nightly run's `[shadow]` rules): every row whose outcome or action differs
//! is a [`Flip`], grouped by [`Risk`]; a flip into an automatic transition is set against what
//! reviewers decided on that payment ([`Verdict`]). A leaf beside `outcome`: it reads a plan's
//! rows ([`Rows`]) and the review store, and knows nothing of how a night is run.

use crate::ledger::Payment;
use crate::model::{Action, Outcome, Status};
use crate::outcome::ResultRow;
use crate::rates::Valuation;
use crate::sources::StatementLine;
use anyhow::Result;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How dangerous a flip is, most dangerous first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// Review (or nothing to do) → an automatic transition, or a transition that changes
    /// (another status, or the same on other lines): money moves on the candidate's word.
    ToTransition,
    /// An automatic transition → a review case (or nothing): the candidate is more careful.
    FromTransition,
    /// The outcome changes, no transition either side.
    OutcomeOnly,
}

impl Risk {
    /// The group's heading.
    pub fn heading(self) -> &'static str {
        match self {
            Risk::ToTransition => "review → automatic transition",
            Risk::FromTransition => "automatic transition → review",
            Risk::OutcomeOnly => "outcome changes, no transition",
        }
    }

    /// The column value in backtest.csv.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::ToTransition => "to_transition",
            Risk::FromTransition => "from_transition",
            Risk::OutcomeOnly => "outcome_only",
        }
    }
}

/// One side of a flip: the row a rule set produced for the id (None: no row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// The outcome (None: the rule set reported no row for it).
    pub outcome: Option<Outcome>,
    /// What recon would do.
    pub action: Action,
    /// The rule (pass id) that decided, or a gate name.
    pub rule: String,
    /// The row's explanation.
    pub why: String,
    /// Its lines, as (source, line id).
    pub lines: Vec<(String, String)>,
}

impl Side {
    /// `AMBIGUOUS (ticket)`, `RESOLVED_SUCCEEDED → SUCCEEDED`, `no row`.
    pub fn label(&self) -> String {
        match (self.outcome, self.action) {
            (None, _) => "no row".into(),
            (Some(o), Action::Transition(s)) => format!("{} → {}", o.as_str(), s.as_str()),
            (Some(o), Action::Ticket) => format!("{} (review)", o.as_str()),
            (Some(o), _) => o.as_str().to_string(),
        }
    }

    fn transition(&self) -> Option<Status> {
        match self.action {
            Action::Transition(s) => Some(s),
            _ => None,
        }
    }
}

/// A row whose outcome or action the candidate rules change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flip {
    /// The run replayed.
    pub run: String,
    /// Its day.
    pub day: NaiveDate,
    /// The payment id, or `source:line id` for a row of a line alone.
    pub id: String,
    /// The payment's id (None: a line's row).
    pub payment_id: Option<String>,
    /// The money: `120.00 EUR`.
    pub amount: String,
    /// In the reporting currency (None: none configured, or no rate).
    pub value: Option<Decimal>,
    /// With the live rules.
    pub before: Side,
    /// With the candidate rules.
    pub after: Side,
    /// How dangerous.
    pub risk: Risk,
    /// What reviewers decided on it (for a flip into a transition; None otherwise).
    pub reviewers: Option<Verdict>,
}

/// A plan's rows, with the payments and lines they point into.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// The plan's payments.
    pub payments: &'a [Payment],
    /// Its statement lines.
    pub lines: &'a [StatementLine],
    /// Its rows.
    pub rows: &'a [ResultRow],
}

/// The id a row is compared by: the payment id, or `source:line id` for a line's own row
/// (None: a row with neither).
fn row_key(data: Rows<'_>, r: &ResultRow) -> Option<String> {
    match r.payment {
        Some(p) => Some(data.payments[p as usize].payment_id.text().to_string()),
        None => r.lines.first().map(|&l| line_key(data, l).join(":")),
    }
}

fn line_key(data: Rows<'_>, li: u32) -> [String; 2] {
    let l = &data.lines[li as usize];
    [l.source().to_string(), l.uid().into_owned()]
}

/// Separates a line's source from its id, and two lines, in [`Projected::lines`].
const UNIT: char = '\u{1f}';
const RECORD: char = '\u{1e}';

/// One row reduced to what a comparison needs.
#[derive(Debug, Clone)]
struct Projected {
    /// A payment's row (its key is the payment id).
    payment: bool,
    /// The money: the payment's, else the first line's.
    minor: i64,
    currency: &'static str,
    outcome: Outcome,
    action: Action,
    rule: Arc<str>,
    why: std::borrow::Cow<'static, str>,
    /// The row's lines, `source` [`UNIT`] `id`, joined by [`RECORD`]: one allocation a row.
    lines: Box<str>,
    /// Met by a row of the other plan.
    seen: bool,
}

impl Projected {
    fn side(&self) -> Side {
        Side {
            outcome: Some(self.outcome),
            action: self.action,
            rule: self.rule.to_string(),
            why: self.why.to_string(),
            lines: self
                .lines
                .split(RECORD)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (s, id) = l.split_once(UNIT).unwrap_or((l, ""));
                    (s.to_string(), id.to_string())
                })
                .collect(),
        }
    }
}

/// A plan's rows by id (the first row of each), reduced to what a comparison needs, so the
/// plan itself can be dropped before the other is made: `[shadow]` plans the shadow rules
/// first, keeps this, and lets their evidence go before the night's own plan loads its own
/// (the two never hold their evidence at once).
#[derive(Debug, Default)]
pub struct Projection(BTreeMap<Box<str>, Projected>);

impl Projection {
    /// Projects `data`'s rows.
    pub fn of(data: Rows<'_>) -> Projection {
        let mut out = BTreeMap::new();
        for r in data.rows {
            let Some(key) = row_key(data, r) else {
                continue;
            };
            if out.contains_key(key.as_str()) {
                continue;
            }
            let (minor, currency) = money_of(data, r);
            let mut lines = String::new();
            for (i, &l) in r.lines.iter().enumerate() {
                if i > 0 {
                    lines.push(RECORD);
                }
                let [s, id] = line_key(data, l);
                lines.push_str(&s);
                lines.push(UNIT);
                lines.push_str(&id);
            }
            out.insert(
                key.into_boxed_str(),
                Projected {
                    payment: r.payment.is_some(),
                    minor,
                    currency,
                    outcome: r.outcome,
                    action: r.action,
                    rule: Arc::clone(&r.rule),
                    why: r.detail.clone(),
                    lines: lines.into_boxed_str(),
                    seen: false,
                },
            );
        }
        Projection(out)
    }

    /// Rows projected.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no row was projected.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The money of row `r`: its payment's, else its first line's.
fn money_of(data: Rows<'_>, r: &ResultRow) -> (i64, &'static str) {
    match r.payment {
        Some(p) => {
            let p = &data.payments[p as usize];
            (p.amount_minor, p.currency)
        }
        None => match r.lines.first() {
            Some(&l) => {
                let l = &data.lines[l as usize];
                (l.amount_minor, l.currency)
            }
            None => (0, "EUR"),
        },
    }
}

fn side(data: Rows<'_>, r: Option<&ResultRow>) -> Side {
    let Some(r) = r else {
        return Side {
            outcome: None,
            action: Action::None,
            rule: String::new(),
            why: String::new(),
            lines: Vec::new(),
        };
    };
    Side {
        outcome: Some(r.outcome),
        action: r.action,
        rule: r.rule.to_string(),
        why: r.detail.to_string(),
        lines: r
            .lines
            .iter()
            .map(|&l| {
                let [s, id] = line_key(data, l);
                (s, id)
            })
            .collect(),
    }
}

/// The flips of one night, in the order of their ids: `before` planned with the live rules,
/// `after` with the candidate (projected, [`Projection::of`]; its rows are marked as met).
pub fn flips(
    (run, day): (&str, NaiveDate),
    before: Rows<'_>,
    after: &mut Projection,
    valuation: Option<&Valuation>,
) -> Vec<Flip> {
    let none = Side {
        outcome: None,
        action: Action::None,
        rule: String::new(),
        why: String::new(),
        lines: Vec::new(),
    };
    let mut out = Vec::new();
    let mut only_before: std::collections::HashSet<String> = Default::default();
    for r in before.rows {
        let Some(key) = row_key(before, r) else {
            continue;
        };
        let a = after.0.get_mut(key.as_str());
        let first_of_key = match &a {
            Some(p) => !p.seen,
            None => !only_before.contains(&key),
        };
        if !first_of_key {
            continue;
        }
        let sb = side(before, Some(r));
        let (sa, money, payment) = match a {
            Some(p) => {
                p.seen = true;
                (p.side(), (p.minor, p.currency), p.payment)
            }
            None => {
                // Rare: a row the candidate does not report at all.
                only_before.insert(key.clone());
                (none.clone(), money_of(before, r), r.payment.is_some())
            }
        };
        if let Some(f) = flip((run, day), key, (sb, sa), (money, payment), valuation) {
            out.push(f);
        }
    }
    for (key, p) in after.0.iter().filter(|(_, p)| !p.seen) {
        if let Some(f) = flip(
            (run, day),
            key.to_string(),
            (none.clone(), p.side()),
            ((p.minor, p.currency), p.payment),
            valuation,
        ) {
            out.push(f);
        }
    }
    out.sort_by(|x, y| x.id.cmp(&y.id));
    // A line's own row that flips because its payment's does (an orphan or a near miss now
    // linked) is shown with the payment's flip, not as a second one.
    let with_payments: std::collections::HashSet<String> = out
        .iter()
        .filter(|f| f.payment_id.is_some())
        .flat_map(|f| f.before.lines.iter().chain(&f.after.lines))
        .map(|(s, l)| format!("{s}:{l}"))
        .collect();
    out.retain(|f| f.payment_id.is_some() || !with_payments.contains(&f.id));
    out
}

/// The flip of one id, if the two sides differ.
fn flip(
    (run, day): (&str, NaiveDate),
    id: String,
    (sb, sa): (Side, Side),
    ((minor, currency), payment): ((i64, &'static str), bool),
    valuation: Option<&Valuation>,
) -> Option<Flip> {
    // A transition on other lines is another decision, whatever its outcome's name.
    let changed = sb.outcome != sa.outcome
        || sb.action != sa.action
        || (sa.transition().is_some() && sb.lines != sa.lines);
    if !changed {
        return None;
    }
    let risk = match (sb.transition(), sa.transition()) {
        (_, Some(_)) => Risk::ToTransition,
        (Some(_), None) => Risk::FromTransition,
        (None, None) => Risk::OutcomeOnly,
    };
    let exponent = crate::money::currency(currency).map_or(2, |(_, e)| e);
    let amount = Decimal::new(minor, exponent);
    Some(Flip {
        run: run.to_string(),
        day,
        payment_id: payment.then(|| id.clone()),
        id,
        amount: format!("{} {currency}", crate::money::format_minor(minor, currency)),
        value: valuation.and_then(|v| v.value(amount.abs(), currency)),
        before: sb,
        after: sa,
        risk,
        reviewers: None,
    })
}

/// What reviewers decided on a payment, against the candidate's automatic decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// They decided the same: set the same status, or confirmed the same line.
    Same(String),
    /// They decided otherwise (another status, another line): the candidate contradicts them.
    Different(String),
    /// They dismissed the case.
    Dismissed(String),
    /// They escalated it.
    Escalated(String),
    /// Nobody decided on it yet.
    Undecided,
}

impl Verdict {
    /// backtest.csv's `reviewers` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Same(_) => "same",
            Verdict::Different(_) => "different",
            Verdict::Dismissed(_) => "dismissed",
            Verdict::Escalated(_) => "escalated",
            Verdict::Undecided => "undecided",
        }
    }

    /// What they did, in words.
    pub fn text(&self) -> &str {
        match self {
            Verdict::Same(t) | Verdict::Different(t) | Verdict::Dismissed(t) => t,
            Verdict::Escalated(t) => t,
            Verdict::Undecided => "not decided yet",
        }
    }
}

/// Everything reviewers decided, by payment id.
#[derive(Debug, Default)]
pub struct Reviewers {
    /// The latest status a person set: (status, who).
    status: HashMap<String, (String, String)>,
    /// Lines confirmed as the payment's: (source, line id, who).
    confirmed: HashMap<String, Vec<(String, String, String)>>,
    /// The latest dismiss or escalate on a case naming the payment: (decision, who).
    cases: HashMap<String, (String, String)>,
}

impl Reviewers {
    /// Reads what reviewers decided (reads only).
    pub async fn read(db: &crate::db::Db) -> Result<Reviewers> {
        let mut tx = db.begin().await?;
        let changes = tx.human_status_changes().await?;
        let confirmed = tx.confirmed_lines(None).await?;
        let decisions = tx
            .decisions_applied_since(&crate::timeparse::to_db(0))
            .await?;
        tx.rollback().await?;
        let mut out = Reviewers::default();
        for (pid, to, actor) in changes {
            out.status.insert(pid, (to, actor));
        }
        for c in confirmed {
            let who = c.who();
            out.confirmed
                .entry(c.payment_id)
                .or_default()
                .push((c.source, c.line_id, who));
        }
        for d in decisions {
            if d.decision.starts_with("dismiss") || d.decision == "escalate" {
                for p in d.payments {
                    out.cases.insert(p, (d.decision.clone(), d.actor.clone()));
                }
            }
        }
        Ok(out)
    }

    /// What reviewers decided on the payment of `f`, a flip into an automatic transition
    /// (None for another flip: the candidate decides nothing there).
    pub fn verdict(&self, f: &Flip) -> Option<Verdict> {
        let status = f.after.transition()?;
        if f.risk != Risk::ToTransition {
            return None;
        }
        let pid = f.payment_id.as_deref()?;
        if let Some((to, who)) = self.status.get(pid) {
            return Some(if to == status.as_str() {
                Verdict::Same(format!("{who} set {to}"))
            } else {
                Verdict::Different(format!(
                    "{who} set {to}; the candidate would set {}",
                    status.as_str()
                ))
            });
        }
        if let Some(lines) = self.confirmed.get(pid) {
            let same = status == Status::Succeeded
                && lines
                    .iter()
                    .all(|(s, l, _)| f.after.lines.iter().any(|(fs, fl)| fs == s && fl == l));
            let (s, l, who) = &lines[0];
            return Some(if same {
                Verdict::Same(format!("{who} confirmed line {s}:{l}, the same"))
            } else {
                Verdict::Different(format!(
                    "{who} confirmed line {s}:{l}; the candidate would set {} on {}",
                    status.as_str(),
                    lines_text(&f.after.lines)
                ))
            });
        }
        if let Some((decision, who)) = self.cases.get(pid) {
            return Some(if decision == "escalate" {
                Verdict::Escalated(format!("{who} escalated the case"))
            } else {
                Verdict::Dismissed(format!("{who} dismissed the case"))
            });
        }
        Some(Verdict::Undecided)
    }
}

/// `psp:tx-1, psp:tx-2` or `no line`.
pub fn lines_text(lines: &[(String, String)]) -> String {
    if lines.is_empty() {
        return "no line".into();
    }
    lines
        .iter()
        .map(|(s, l)| format!("{s}:{l}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidate's automatic decisions against reviewers': counts by verdict, and every
/// disagreement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Flips into an automatic transition (each a payment the candidate would decide).
    pub decided: usize,
    /// Reviewers decided the same.
    pub same: usize,
    /// Reviewers dismissed the case.
    pub dismissed: usize,
    /// Reviewers escalated it.
    pub escalated: usize,
    /// Nobody decided yet.
    pub undecided: usize,
    /// (night, payment id, what reviewers did, what the candidate would do) where they differ.
    pub different: Vec<(String, String, String)>,
}

impl Agreement {
    /// Counts `f` with its verdict (which it then carries).
    pub fn add(&mut self, f: &mut Flip, verdict: Option<Verdict>) {
        let Some(v) = verdict else {
            return;
        };
        self.decided += 1;
        match &v {
            Verdict::Same(_) => self.same += 1,
            Verdict::Dismissed(_) => self.dismissed += 1,
            Verdict::Escalated(_) => self.escalated += 1,
            Verdict::Undecided => self.undecided += 1,
            Verdict::Different(t) => {
                self.different
                    .push((f.run.clone(), f.id.clone(), t.clone()));
            }
        }
        f.reviewers = Some(v);
    }

    /// How many decisions the candidate would make differently from reviewers.
    pub fn disagreements(&self) -> usize {
        self.different.len()
    }

    /// "This candidate would resolve 812 payments; reviewers decided 806 the same way, 6
    /// differently, …".
    pub fn sentence(&self) -> String {
        if self.decided == 0 {
            return "The candidate rules would resolve no payment that the live rules leave \
                    to reviewers."
                .into();
        }
        format!(
            "The candidate rules would resolve {} payment(s) automatically that the live rules \
             do not; reviewers decided {} the same way and {} differently; {} dismissed, {} \
             escalated, {} not decided yet.",
            self.decided,
            self.same,
            self.different.len(),
            self.dismissed,
            self.escalated,
            self.undecided
        )
    }
}
