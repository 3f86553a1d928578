//! Classification: every payment in scope and every statement line not claimed by exactly one
//! payment gets exactly one [`Outcome`] (DESIGN.md's vocabulary), with the action it implies.

use crate::config::LineKind;
use crate::ledger::{Payment, Status};
use crate::matching::settlement::{Batch, BatchStatus, CreditStatus, SettlementResult};
use crate::matching::{MatchResult, Pair, criteria};
pub use crate::model::{Action, Outcome, Severity};
use crate::rules::RuleSet;
use crate::sources::{StatementLine, covers};
use crate::timeparse::Micros;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Shared per-run values: rule names of rows no pass decided, the widest window.
struct Names {
    none: Arc<str>,
    near_miss: Arc<str>,
    returns: Arc<str>,
    window: (Micros, Micros),
}

/// One row of `results.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRow {
    /// The outcome.
    pub outcome: Outcome,
    /// Payment index (None for line rows).
    pub payment: Option<u32>,
    /// Lines involved (linked or candidate), sorted by uid.
    pub lines: Vec<u32>,
    /// Rule (pass id) that decided, a gate name (`near_miss`), or empty.
    pub rule: Arc<str>,
    /// What recon does about it.
    pub action: Action,
    /// Human explanation.
    pub detail: Cow<'static, str>,
}

/// The inputs of classification besides the match result.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The run's cut-off.
    pub as_of: Micros,
    /// Stale SUBMITTING age.
    pub stale_after: Micros,
    /// Settlement lag after the window closes.
    pub settlement_lag: Micros,
    /// Merged coverage per source; a window is closed only if every source covers it.
    pub coverage: &'a [Vec<(Micros, Micros)>],
    /// The partition of each source of `coverage` (empty: a job without `[partition]`): a
    /// payment's window is closed when its own partition's sources cover it.
    pub source_partitions: &'a [u32],
    /// Payments in scope (reported).
    pub in_scope: &'a [bool],
    /// Payments out of scope that recon moved on an earlier day, whose evidence horizon is
    /// still open: re-checked against tonight's evidence and reported only when it
    /// contradicts that decision (DESIGN.md rule 8). Empty: none.
    pub watch: &'a [bool],
    /// The run's days, `[from, to)`: settlement rows and deadlines in it are reported.
    pub report_range: (Micros, Micros),
    /// The run's (first) day, YYYY-MM-DD: a decision made by a later day's run is not judged
    /// here (a range's days share one as-of), so re-running a range reproduces each day; a
    /// contradiction there still surfaces as a refused transition's ticket.
    pub run_day: &'a str,
    /// Lines this run reports: booked in the range, or delivered late (booked before it, in a
    /// file no earlier run read). Unclaimed ones get a row of their own.
    pub report_line: &'a [bool],
    /// Payments loaded only because a line names them (older than the run's ledger range,
    /// found by the whole-ledger lookup): their own lines were booked before the statements
    /// the run loads, so one line tonight is a late or second line (empty: none).
    pub named_only: &'a [bool],
    /// Line index → (payment id, amount difference: the line's ledger amount minus the
    /// payment's, minor units) a reviewer accepted with `accept difference`: that pair is not
    /// an AMOUNT_MISMATCH while the line differs by exactly that (empty: none).
    pub accepted: &'a std::collections::HashMap<u32, (String, i64)>,
}

/// Whether `p` is unresolved at `as_of`: UNKNOWN, REVIEW, or SUBMITTING older than
/// `stale_after`.
pub fn unresolved(p: &Payment, as_of: Micros, stale_after: Micros) -> bool {
    match p.status {
        Status::Unknown | Status::Review => true,
        Status::Submitting => p.started_at.is_none_or(|s| as_of - s >= stale_after),
        _ => false,
    }
}

/// Which payments take part in matching and in the near-miss gate at `as_of` (it needs no
/// scope: matching runs before the scope is final).
pub fn eligibility(
    payments: &[Payment],
    as_of: Micros,
    stale_after: Micros,
) -> crate::matching::Eligibility {
    crate::matching::Eligibility {
        linkable: payments
            .iter()
            .map(|p| p.status != Status::Pending)
            .collect(),
        // A PENDING payment is never a fuzzy look-alike (it was never sent), but a line that
        // names it is its evidence: PAID_WHILE_PENDING, not an orphan.
        named: vec![true; payments.len()],
        near_miss: payments
            .iter()
            .map(|p| unresolved(p, as_of, stale_after))
            .collect(),
        own_reference: Vec::new(),
        confirmed: Vec::new(),
    }
}

impl Context<'_> {
    /// Whether `p` is unresolved (see [`unresolved`]).
    pub fn unresolved(&self, p: &Payment) -> bool {
        unresolved(p, self.as_of, self.stale_after)
    }

    /// Which payments take part in matching and in the near-miss gate (see [`eligibility`]).
    pub fn eligibility(&self, payments: &[Payment]) -> crate::matching::Eligibility {
        eligibility(payments, self.as_of, self.stale_after)
    }

    /// Whether a run as of this context judges recon's own earlier decision about `p`: a run
    /// whose as-of is earlier than that decision's saw less and only reproduces.
    fn judges<'p>(&self, p: &'p Payment) -> Option<&'p crate::ledger::ReconChange> {
        p.recon.as_deref().filter(|c| {
            c.as_of.is_none_or(|t| t <= self.as_of)
                && (c.day.is_empty() || c.day.as_str() <= self.run_day)
        })
    }

    /// A reviewer's change to `p` that this run judges: every one it loaded (made before the
    /// run read the ledger; the status it left is the one classified, nothing is taken back
    /// to reproduce, so a run as of an earlier moment judges it too).
    fn judges_human<'p>(&self, p: &'p Payment) -> Option<&'p crate::ledger::HumanChange> {
        p.human.as_deref()
    }

    /// Whether no more evidence can arrive for a payment whose current attempt started at
    /// `start` and whose earliest attempt started at `first`: every source covers its whole
    /// span, from `before` the earliest attempt's start (an earlier attempt may have paid) to
    /// `after` the current one's, and that closed at least the settlement lag ago.
    fn window_closed(
        &self,
        partition: u32,
        first: Micros,
        start: Micros,
        window: (Micros, Micros),
    ) -> bool {
        let (a, b) = (first.min(start) - window.0, start + window.1);
        // The sources that can hold this payment's lines (all of them without partitions).
        let mut own = self.coverage.iter().enumerate().filter(|(i, _)| {
            self.source_partitions
                .get(*i)
                .is_none_or(|&sp| sp == partition)
        });
        let mut any = false;
        b + self.settlement_lag <= self.as_of
            && own.all(|(_, c)| {
                any = true;
                covers(c, a, b)
            })
            && any
    }
}

/// Items grouped by a dense key (compressed rows): one allocation for all groups instead of
/// one `Vec` per payment, which matters at a million payments.
struct Groups<T> {
    offsets: Vec<u32>,
    items: Vec<T>,
}

impl<T: Copy + Default> Groups<T> {
    fn new(n: usize, entries: impl Iterator<Item = (usize, T)> + Clone) -> Groups<T> {
        if entries.clone().next().is_none() {
            // Nothing to group (returns on most days): no per-key offsets at all.
            return Groups {
                offsets: Vec::new(),
                items: Vec::new(),
            };
        }
        let mut offsets = vec![0u32; n + 1];
        for (k, _) in entries.clone() {
            offsets[k + 1] += 1;
        }
        for k in 0..n {
            offsets[k + 1] += offsets[k];
        }
        let mut fill = offsets.clone();
        let mut items = vec![T::default(); offsets[n] as usize];
        for (k, v) in entries {
            items[fill[k] as usize] = v;
            fill[k] += 1;
        }
        Groups { offsets, items }
    }

    fn get(&self, k: usize) -> &[T] {
        if self.offsets.is_empty() {
            return &[];
        }
        &self.items[self.offsets[k] as usize..self.offsets[k + 1] as usize]
    }
}

/// Per-payment and per-line views of a match result.
struct Index {
    links_by_pay: Groups<Pair>,
    amb_by_pay: Groups<Pair>,
    near_by_pay: Groups<u32>,
    links_by_line: Vec<u32>,
    amb_lines: Groups<u32>,
    near_lines: Groups<u32>,
    returns_by_pay: Groups<Pair>,
    returns_amb_by_pay: Groups<Pair>,
    /// Payments a return is linked to (index + 1; 0: none).
    return_of_line: Vec<u32>,
    returns_amb_lines: Groups<u32>,
    /// Lines whose reference has our id shape but names no payment of ours (empty: none).
    unknown_reference: Vec<bool>,
}

impl Index {
    /// Whether line `l`'s reference has our id shape but names no payment of ours.
    fn unknown_reference(&self, l: usize) -> bool {
        self.unknown_reference.get(l).copied().unwrap_or(false)
    }

    fn new(m: &MatchResult, n_pay: usize, n_lines: usize) -> Index {
        let mut links_by_line = vec![0; n_lines];
        for p in &m.links {
            links_by_line[p.line as usize] += 1;
        }
        Index {
            links_by_pay: Groups::new(n_pay, m.links.iter().map(|p| (p.payment as usize, *p))),
            amb_by_pay: Groups::new(n_pay, m.ambiguous.iter().map(|p| (p.payment as usize, *p))),
            near_by_pay: Groups::new(
                n_pay,
                m.near_misses.iter().map(|p| (p.payment as usize, p.line)),
            ),
            links_by_line,
            amb_lines: Groups::new(
                n_lines,
                m.ambiguous.iter().map(|p| (p.line as usize, p.payment)),
            ),
            near_lines: Groups::new(
                n_lines,
                m.near_misses.iter().map(|p| (p.line as usize, p.payment)),
            ),
            returns_by_pay: Groups::new(n_pay, m.returns.iter().map(|p| (p.payment as usize, *p))),
            returns_amb_by_pay: Groups::new(
                n_pay,
                m.returns_ambiguous.iter().map(|p| (p.payment as usize, *p)),
            ),
            return_of_line: {
                let mut v = if m.returns.is_empty() {
                    Vec::new()
                } else {
                    vec![0; n_lines]
                };
                for p in &m.returns {
                    v[p.line as usize] = p.payment + 1;
                }
                v
            },
            returns_amb_lines: Groups::new(
                n_lines,
                m.returns_ambiguous
                    .iter()
                    .map(|p| (p.line as usize, p.payment)),
            ),
            unknown_reference: if m.unknown_references.is_empty() {
                Vec::new()
            } else {
                let mut v = vec![false; n_lines];
                for &l in &m.unknown_references {
                    v[l as usize] = true;
                }
                v
            },
        }
    }
}

fn sorted_lines(lines: &[StatementLine], mut v: Vec<u32>) -> Vec<u32> {
    v.sort_by(|a, b| {
        let (la, lb) = (&lines[*a as usize], &lines[*b as usize]);
        (la.uid(), la.source(), la.line_no).cmp(&(lb.uid(), lb.source(), lb.line_no))
    });
    v.dedup();
    v
}

/// Classifies every in-scope payment and every unclaimed line in the report range.
/// Rows come out in a deterministic order: payments by payment_id, then lines by uid.
pub fn classify(
    payments: &[Payment],
    lines: &[StatementLine],
    m: &MatchResult,
    rules: &RuleSet,
    ctx: &Context<'_>,
) -> Vec<ResultRow> {
    classify_with(payments, lines, m, rules, ctx, &|_, _, row, _| row)
}

/// Further evidence about payment `i` (see [`classify_with`]): its row from the statements
/// and the status recon or a reviewer moved it to earlier, with who (when judged) in, its row
/// on all evidence out.
pub type MoreEvidence<'a> =
    dyn Fn(usize, &Payment, ResultRow, Option<(Status, &str)>) -> ResultRow + Sync + 'a;

/// [`classify`] with further evidence about payments (provider status answers): `more` turns
/// the row the statements give payment `i` into the row all evidence gives it, before recon's
/// own earlier decision is re-checked; it is told the status recon moved the payment to when
/// this run judges that decision, so evidence that contradicts it is named in the ticket.
pub fn classify_with(
    payments: &[Payment],
    lines: &[StatementLine],
    m: &MatchResult,
    rules: &RuleSet,
    ctx: &Context<'_>,
    more: &MoreEvidence<'_>,
) -> Vec<ResultRow> {
    let ix = Index::new(m, payments.len(), lines.len());
    let old_named = OldNamedNotes::new(payments, m);
    let window = rules.evidence_window();
    let names = Names {
        none: Arc::from(""),
        near_miss: Arc::from("near_miss"),
        returns: Arc::from("returns"),
        window,
    };
    // One row per payment in scope, in payment order. Each payment is classified on its own,
    // so rayon spreads them over the cores and writes each row straight into its place.
    let watched = |i: usize| !ctx.in_scope[i] && ctx.watch.get(i).copied().unwrap_or(false);
    let scope: Vec<u32> = (0..payments.len())
        .filter(|&i| ctx.in_scope[i] || watched(i))
        .map(|i| i as u32)
        .collect();
    // Room for the line rows too (at most one per line, plus one per missing batch): growing
    // a million-row vector later would copy it into fresh memory, which costs more than the
    // copy itself here. Capacity never filled costs no memory.
    let mut rows: Vec<ResultRow> =
        Vec::with_capacity(scope.len() + lines.len() + m.settlement.batches.len());
    rows.par_extend(scope.par_iter().map(|&i| {
        let i = i as usize;
        let p = &payments[i];
        let change = ctx.judges(p);
        let human = ctx.judges_human(p);
        let who: Option<(Status, Cow<'_, str>)> = match (change, human) {
            (Some(c), _) => Some((c.to, Cow::Borrowed("recon"))),
            (None, Some(h)) => Some((h.to, Cow::Owned(format!("reviewer {}", h.actor)))),
            (None, None) => None,
        };
        let decided = who.as_ref().map(|(s, w)| (*s, w.as_ref()));
        let row = more(
            i,
            p,
            old_named.payment_row(classify_payment(i, p, lines, &ix, rules, ctx, &names)),
            decided,
        );
        // Evidence that contradicts recon's own earlier decision is a ticket, never a silent
        // replay (DESIGN.md rule 8); a reviewer's is re-checked too (rule 14).
        match (change, human) {
            (Some(change), _) => recheck(row, change, watched(i)),
            (None, Some(_)) if watched(i) => recheck_human(row),
            _ => row,
        }
    }));
    if scope.iter().any(|&i| watched(i as usize)) {
        // A watched payment is reported only when tonight's evidence contradicts recon's
        // decision (a ticket); otherwise it stays out of the night's results.
        rows.retain(|r| {
            r.payment
                .is_none_or(|i| !watched(i as usize) || r.action == Action::Ticket)
        });
    }
    drop(scope);
    let mut ambiguous_payments = vec![false; payments.len()];
    for r in &rows {
        if let Some(p) = r.payment {
            ambiguous_payments[p as usize] = r.outcome == Outcome::Ambiguous;
        }
    }
    // Lines: every line not claimed by exactly one payment, if booked in the report range or a
    // candidate of an in-scope payment that went to review.
    let mut line_rows: Vec<ResultRow> = Vec::new();
    let mut in_settlement_row = vec![false; lines.len()];
    line_rows.extend(three_way_rows(
        &m.settlement,
        lines,
        rules,
        ctx.report_range,
        &mut in_settlement_row,
    ));
    for (li, l) in lines.iter().enumerate() {
        let in_range = ctx.report_line[li];
        if l.bank_credit() {
            continue;
        }
        if matches!(l.kind, LineKind::Fee | LineKind::Payout | LineKind::Balance) {
            if in_range && !in_settlement_row[li] {
                line_rows.push(settlement_item_row(li as u32, l, &names.none));
            }
            continue;
        }
        if l.kind == LineKind::Refund {
            // A return linked to one payment is reported in that payment's row.
            if ix.return_of_line.get(li).is_some_and(|&p| p > 0) {
                continue;
            }
            let candidates: BTreeSet<u32> = ix.returns_amb_lines.get(li).iter().copied().collect();
            let of_scope_review = candidates.iter().any(|&p| ambiguous_payments[p as usize]);
            if !(in_range || of_scope_review) {
                continue;
            }
            line_rows.push(if candidates.is_empty() {
                ResultRow {
                    outcome: Outcome::Refund,
                    payment: None,
                    lines: vec![li as u32],
                    rule: names.none.clone(),
                    action: Action::None,
                    detail: "refund or return that names no loaded payment and matches none by \
                             recipient and amount"
                        .into(),
                }
            } else {
                let ids: Vec<String> = candidates
                    .iter()
                    .map(|&p| payments[p as usize].payment_id.to_string())
                    .collect();
                ResultRow {
                    outcome: Outcome::Ambiguous,
                    payment: None,
                    lines: vec![li as u32],
                    rule: names.returns.clone(),
                    action: Action::Ticket,
                    detail: format!(
                        "a return that could be the money of several payments: {}",
                        ids.join(";")
                    )
                    .into(),
                }
            });
            continue;
        }
        let candidates: BTreeSet<u32> = ix
            .amb_lines
            .get(li)
            .iter()
            .chain(ix.near_lines.get(li).iter())
            .copied()
            .collect();
        let of_scope_review = candidates.iter().any(|&p| ambiguous_payments[p as usize]);
        // A line one payment claims is that payment's row's, unless it is in doubt: a
        // candidate of several, or the near miss of a payment that went to review. (A near
        // miss of a payment that did not — in flight, say — makes it nobody's orphan.)
        if ix.links_by_line[li] == 1 && ix.amb_lines.get(li).is_empty() && !of_scope_review {
            continue;
        }
        if !(in_range || of_scope_review) {
            continue;
        }
        let ids: Vec<String> = candidates
            .iter()
            .map(|&p| payments[p as usize].payment_id.to_string())
            .collect();
        let row = if ix.unknown_reference(li) {
            // DESIGN.md rule 12: it names no payment of ours, so it is nobody's evidence.
            let reference = l.reference().map(|r| r.to_string()).unwrap_or_default();
            ResultRow {
                outcome: Outcome::OrphanAtProvider,
                payment: None,
                lines: vec![li as u32],
                rule: names.none.clone(),
                action: Action::Ticket,
                detail: if ids.is_empty() {
                    format!(
                        "reference {reference:?} has the shape of our payment ids but names no payment of ours"
                    )
                } else {
                    format!(
                        "reference {reference:?} has the shape of our payment ids but names no payment of ours: \
                         not evidence for look-alike payment(s) {}",
                        ids.join(";")
                    )
                }
                .into(),
            }
        } else if !ix.amb_lines.get(li).is_empty() {
            ResultRow {
                outcome: Outcome::Ambiguous,
                payment: None,
                lines: vec![li as u32],
                rule: names.none.clone(),
                action: Action::Ticket,
                detail: format!("candidate of several payments: {}", ids.join(";")).into(),
            }
        } else if of_scope_review {
            ResultRow {
                outcome: Outcome::Ambiguous,
                payment: None,
                lines: vec![li as u32],
                rule: names.near_miss.clone(),
                action: Action::Ticket,
                detail: format!(
                    "same recipient as unresolved payment(s) {}, inside their window (any amount or currency)",
                    ids.join(";")
                )
                .into(),
            }
        } else {
            ResultRow {
                outcome: Outcome::OrphanAtProvider,
                payment: None,
                lines: vec![li as u32],
                rule: names.none.clone(),
                action: Action::Ticket,
                detail: "no ledger payment for this line".into(),
            }
        };
        line_rows.push(old_named.line_row(li as u32, row));
    }
    sort_line_rows(&mut line_rows, lines);
    rows.extend(line_rows);
    rows
}

/// What the rows of old-named look-alikes say (issue 40 point 7, [`MatchResult::old_named`]):
/// a line that names one payment, booked far outside that payment's window, and fits another
/// exactly. Each AMBIGUOUS row of such a payment or line says which payment the line is in
/// doubt between and why. The line has its own AMBIGUOUS row, as any line in doubt between
/// payments has (its outcome); both payments' rows list it as a candidate.
#[derive(Default)]
struct OldNamedNotes {
    payment: std::collections::HashMap<u32, String>,
    line: std::collections::HashMap<u32, String>,
}

impl OldNamedNotes {
    fn new(payments: &[Payment], m: &MatchResult) -> OldNamedNotes {
        let mut notes = OldNamedNotes::default();
        if m.old_named.is_empty() {
            return notes;
        }
        // Per old-named line, the other payments it fits (its undecided pairs but the named).
        let mut fits: std::collections::HashMap<u32, Vec<u32>> =
            m.old_named.iter().map(|n| (n.line, Vec::new())).collect();
        for a in &m.ambiguous {
            if let Some(v) = fits.get_mut(&a.line) {
                v.push(a.payment);
            }
        }
        for n in &m.old_named {
            let fit: Vec<u32> = fits
                .get(&n.line)
                .map(|v| v.iter().copied().filter(|&p| p != n.payment).collect())
                .unwrap_or_default();
            let named = &payments[n.payment as usize];
            let id = &named.payment_id;
            let day = crate::timeparse::format_utc(named.anchor());
            let day = day.get(..10).unwrap_or_default();
            let others: BTreeSet<String> = fit
                .iter()
                .map(|&p| payments[p as usize].payment_id.to_string())
                .collect();
            let others: Vec<String> = others.into_iter().collect();
            let others = others.join(";");
            notes.line.insert(
                n.line,
                format!(
                    "reference names payment {id} (started {day}) but the line is booked far \
                     outside that payment's window, and fits payment(s) {others} exactly: \
                     {id}'s second payout or late booking, or the payout of {others} with a \
                     wrong reference; a human decides"
                ),
            );
            notes.payment.insert(
                n.payment,
                format!(
                    "a line booked far outside this payment's window (started {day}) names it \
                     and fits payment(s) {others} exactly: this payment's second payout or late \
                     booking, or the payout of {others} with a wrong reference; a human decides"
                ),
            );
            for &a in &fit {
                notes.payment.entry(a).or_insert_with(|| {
                    format!(
                        "a line with this payment's recipient and money inside its window names \
                         payment {id} (started {day}), booked far outside that payment's window: \
                         {id}'s second payout or late booking, or this payment's payout with a \
                         wrong reference; a human decides"
                    )
                });
            }
        }
        notes
    }

    /// `row` (a payment's), with the note when it is an AMBIGUOUS row of an old-named line.
    fn payment_row(&self, mut row: ResultRow) -> ResultRow {
        if row.outcome == Outcome::Ambiguous
            && let Some(note) = row.payment.and_then(|p| self.payment.get(&p))
        {
            row.detail = note.clone().into();
        }
        row
    }

    /// Line `li`'s own `row`, with the note when it is AMBIGUOUS and `li` an old-named line.
    fn line_row(&self, li: u32, mut row: ResultRow) -> ResultRow {
        if row.outcome == Outcome::Ambiguous
            && let Some(note) = self.line.get(&li)
        {
            row.detail = note.clone().into();
        }
        row
    }
}

/// Line rows in their order: by their first line's id, source and line number.
pub(crate) fn sort_line_rows(line_rows: &mut [ResultRow], lines: &[StatementLine]) {
    line_rows.sort_by(|a, b| {
        let (la, lb) = (&lines[a.lines[0] as usize], &lines[b.lines[0] as usize]);
        (la.uid(), la.source(), la.line_no).cmp(&(lb.uid(), lb.source(), lb.line_no))
    });
}

/// The three-way rows of `st`: one per bank credit booked in `range` (a paired batch's payout
/// lines go into the same row), and one per batch whose payout never reached the bank, on the
/// day of its deadline. Marks the provider lines those rows show in `in_settlement_row`.
pub(crate) fn three_way_rows(
    st: &SettlementResult,
    lines: &[StatementLine],
    rules: &RuleSet,
    range: (Micros, Micros),
    in_settlement_row: &mut [bool],
) -> Vec<ResultRow> {
    let mut line_rows = Vec::new();
    let in_range = |l: &StatementLine| l.booked_at >= range.0 && l.booked_at < range.1;
    for (&c, status) in &st.credits {
        let l = &lines[c as usize];
        if !in_range(l) {
            continue;
        }
        line_rows.push(settlement_row(c, status, st, lines, rules));
        if let CreditStatus::Settled(b) | CreditStatus::Mismatch(b) = status {
            for &pl in &st.batches[*b].payout_lines {
                in_settlement_row[pl as usize] = true;
            }
        }
    }
    // Batches whose payout never reached the bank: one row on the day of the deadline, with
    // the provider's payout line(s) (or the batch's first line when the file has none).
    for b in &st.batches {
        let BatchStatus::MissingAtBank(deadline) = b.status else {
            continue;
        };
        if deadline < range.0 || deadline >= range.1 {
            continue;
        }
        let shown: Vec<u32> = if b.payout_lines.is_empty() {
            b.items.iter().take(1).copied().collect()
        } else {
            b.payout_lines.clone()
        };
        if shown.is_empty() {
            continue;
        }
        for &l in &shown {
            in_settlement_row[l as usize] = true;
        }
        let rule = &rules.settlements[b.rule];
        let (from, to) = crate::matching::settlement::window(rule, b);
        line_rows.push(ResultRow {
            outcome: Outcome::PayoutMissingAtBank,
            payment: None,
            lines: sorted_lines(lines, shown),
            rule: rule.id.clone(),
            action: Action::Ticket,
            detail: format!(
                "provider {} batch {}: net {} {} ({} lines) never reached bank source {}: no credit \
                 between {} and {}, and that statement covers the window completely",
                rule.provider,
                b.key,
                crate::money::format_minor(b.net_minor, b.currency),
                b.currency,
                b.item_count,
                rule.bank,
                crate::timeparse::format_utc(from),
                crate::timeparse::format_utc(to),
            )
            .into(),
        });
    }
    line_rows
}

/// The row of a provider fee, payout or balance line that no three-way row shows.
pub(crate) fn settlement_item_row(li: u32, l: &StatementLine, none: &Arc<str>) -> ResultRow {
    let batch = l
        .batch
        .as_deref()
        .map(|b| format!(" of batch {b}"))
        .unwrap_or_default();
    ResultRow {
        outcome: Outcome::SettlementItem,
        payment: None,
        lines: vec![li],
        rule: none.clone(),
        action: Action::None,
        detail: format!(
            "provider {} line{batch} (see settlement.csv)",
            l.kind.as_str().to_lowercase()
        )
        .into(),
    }
}

/// The result row of a bank credit: what three-way matching said about it.
fn settlement_row(
    c: u32,
    status: &CreditStatus,
    st: &SettlementResult,
    lines: &[StatementLine],
    rules: &RuleSet,
) -> ResultRow {
    let l = &lines[c as usize];
    let money = |m: i64| crate::money::format_minor(m, l.currency);
    let describe = |b: &Batch| {
        let rule = &rules.settlements[b.rule];
        format!(
            "provider {} batch {}: {} lines, net {} {}",
            rule.provider,
            b.key,
            b.item_count,
            money(b.net_minor),
            b.currency
        )
    };
    let with_payout = |b: &Batch| {
        let mut v = vec![c];
        v.extend(&b.payout_lines);
        sorted_lines(lines, v)
    };
    match status {
        CreditStatus::Settled(b) => {
            let b = &st.batches[*b];
            ResultRow {
                outcome: Outcome::Settled,
                payment: None,
                lines: with_payout(b),
                rule: rules.settlements[b.rule].id.clone(),
                action: Action::None,
                detail: format!(
                    "{}; bank credit {} (difference {})",
                    describe(b),
                    money(l.amount_minor),
                    money(l.amount_minor - b.net_minor)
                )
                .into(),
            }
        }
        CreditStatus::Mismatch(b) => {
            let b = &st.batches[*b];
            ResultRow {
                outcome: Outcome::SettlementMismatch,
                payment: None,
                lines: with_payout(b),
                rule: rules.settlements[b.rule].id.clone(),
                action: Action::Ticket,
                detail: format!(
                    "{}; bank credit {} differs by {} (beyond the tolerance)",
                    describe(b),
                    money(l.amount_minor),
                    money(l.amount_minor - b.net_minor)
                )
                .into(),
            }
        }
        CreditStatus::Ambiguous(bs) => {
            let rule = bs
                .first()
                .map(|&b| rules.settlements[st.batches[b].rule].id.clone())
                .unwrap_or_else(|| Arc::from(""));
            let named: Vec<String> = bs.iter().map(|&b| describe(&st.batches[b])).collect();
            ResultRow {
                outcome: Outcome::Ambiguous,
                payment: None,
                lines: vec![c],
                rule,
                action: Action::Ticket,
                detail: format!(
                    "bank credit could be the payout of several batches (or a batch has several candidate credits): {}",
                    named.join("; ")
                )
                .into(),
            }
        }
        CreditStatus::Unmatched => ResultRow {
            outcome: Outcome::UnmatchedBankCredit,
            payment: None,
            lines: vec![c],
            rule: Arc::from(""),
            action: Action::Ticket,
            detail: "bank credit that no provider settlement batch explains".into(),
        },
    }
}

/// Why a single identifier link cannot be taken at face value, checked in order of severity.
/// Money and recipient are compared as the matcher compares them ([`criteria`]).
/// `accepted`: the difference (line minus payment) a reviewer accepted for this line, if any.
fn link_problem(
    p: &Payment,
    l: &StatementLine,
    steps: &[crate::normalize::Step],
    accepted: Option<i64>,
) -> Option<(Outcome, Cow<'static, str>)> {
    if p.status == Status::Failed {
        return Some((
            Outcome::FailedButPaid,
            "ledger says FAILED but the provider paid".into(),
        ));
    }
    if l.currency != p.currency {
        return Some((
            Outcome::CurrencyMismatch,
            format!("ledger {} vs provider {}", p.currency, l.currency).into(),
        ));
    }
    if !criteria::same_money(p, l) && accepted != l.ledger_amount().checked_sub(p.amount_minor) {
        return Some((
            Outcome::AmountMismatch,
            format!(
                "ledger {} vs provider {} {}",
                crate::money::format_minor(p.amount_minor, p.currency),
                crate::money::format_minor(l.amount_minor, l.currency),
                l.currency
            )
            .into(),
        ));
    }
    if !criteria::same_recipient(steps, p, l) {
        return Some((
            Outcome::Ambiguous,
            "the identifier matches but the provider paid another recipient".into(),
        ));
    }
    None
}

/// Whether the line carries the provider id recorded on the payment (the same transaction).
fn same_provider_id(steps: &[crate::normalize::Step], p: &Payment, l: &StatementLine) -> bool {
    match (
        l.provider_txn_id.as_deref(),
        p.provider_payment_id.as_deref(),
    ) {
        (Some(a), Some(b)) if !a.trim().is_empty() => {
            crate::normalize::apply(steps, a) == crate::normalize::apply(steps, b)
        }
        _ => false,
    }
}

/// The row of a payment recon moved earlier, given what the evidence says today: the same
/// decision reproduces; a contradicting one becomes a ticket without a transition. For a
/// `watched` payment (re-checked, not in the run's scope) a window that is still open with no
/// line yet contradicts nothing: absence of evidence is not evidence (DESIGN.md rule 2).
fn recheck(mut row: ResultRow, change: &crate::ledger::ReconChange, watched: bool) -> ResultRow {
    let when = if change.run_id.is_empty() {
        "earlier".to_string()
    } else {
        format!("in run {}", change.run_id)
    };
    match (change.to, row.outcome) {
        (Status::Failed, Outcome::ResolvedFailed)
        | (Status::Succeeded, Outcome::ResolvedSucceeded) => row,
        (
            Status::Failed,
            Outcome::ResolvedSucceeded | Outcome::Matched | Outcome::DuplicateAtProvider,
        ) => {
            row.outcome = Outcome::FailedButPaid;
            row.action = Action::Ticket;
            row.detail = format!(
                "recon resolved this payment FAILED {when}, but {} line(s) now show it was paid: \
                 a retry since then may have paid twice",
                row.lines.len()
            )
            .into();
            row
        }
        (Status::Succeeded, Outcome::AwaitingEvidence) if watched => row,
        (Status::Succeeded, Outcome::ResolvedFailed | Outcome::AwaitingEvidence) => {
            let evidence = if row.outcome == Outcome::ResolvedFailed {
                "although every source covers its window"
            } else {
                "any more (withdrawn or corrected)"
            };
            row.outcome = Outcome::MissingAtProvider;
            row.action = Action::Ticket;
            row.detail = format!(
                "recon resolved this payment SUCCEEDED {when}, but no statement line shows it \
                 {evidence}: the ledger may say paid for money that never left{}",
                if row.detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", row.detail)
                }
            )
            .into();
            row
        }
        // Every outcome left moves nothing (the two transitions are judged above): a ticket
        // says why it differs from recon's earlier decision, other rows stay as they are.
        (_, _) => {
            if !row.detail.is_empty() {
                row.detail = format!(
                    "{}; recon moved it to {} {when}",
                    row.detail,
                    change.to.as_str()
                )
                .into();
            }
            row
        }
    }
}

/// The row of a payment a reviewer moved to SUCCEEDED or FAILED, watched after their decision
/// (out of the run's scope): classified on the status they left, it is reported only when
/// evidence may contradict them — a line after FAILED (FAILED_BUT_PAID), a return after
/// SUCCEEDED (RETURNED), a second payout (DUPLICATE_AT_PROVIDER), a provider's word against
/// them (CONTRADICTED, FAILED_BUT_PAID), lines that may be its payout (AMBIGUOUS: its ticket
/// stays as the reviewer left it while the candidates stay the same, and opens again when one
/// joins). That no line came is what they decided knowing: no ticket again for it.
fn recheck_human(mut row: ResultRow) -> ResultRow {
    if !matches!(
        row.outcome,
        Outcome::FailedButPaid
            | Outcome::Returned
            | Outcome::DuplicateAtProvider
            | Outcome::Contradicted
            | Outcome::Ambiguous
    ) {
        row.action = Action::None;
    }
    row
}

/// Classifies one payment on the evidence (recon's own earlier decision is re-checked by
/// [`recheck`]).
fn classify_payment(
    i: usize,
    p: &Payment,
    lines: &[StatementLine],
    ix: &Index,
    rules: &RuleSet,
    ctx: &Context<'_>,
    names: &Names,
) -> ResultRow {
    let links = ix.links_by_pay.get(i);
    let amb = ix.amb_by_pay.get(i);
    let returns = ix.returns_by_pay.get(i);
    let returns_amb = ix.returns_amb_by_pay.get(i);
    let linked: Vec<u32> = sorted_lines(lines, links.iter().map(|l| l.line).collect());
    let row =
        |outcome, lines: Vec<u32>, rule: &Arc<str>, action, detail: Cow<'static, str>| ResultRow {
            outcome,
            payment: Some(i as u32),
            lines,
            rule: rule.clone(),
            action,
            detail,
        };
    let pass_id = |pair: &Pair| -> &Arc<str> {
        if pair.pass == crate::matching::RETURNS {
            &names.returns
        } else {
            &rules.passes[pair.pass].id
        }
    };
    let none = &names.none;
    let every_line = || {
        sorted_lines(
            lines,
            links
                .iter()
                .chain(amb)
                .chain(returns)
                .chain(returns_amb)
                .map(|l| l.line)
                .collect(),
        )
    };
    if p.status == Status::Pending {
        if links.is_empty() && amb.is_empty() && returns.is_empty() && returns_amb.is_empty() {
            return row(
                Outcome::NotSubmitted,
                vec![],
                none,
                Action::None,
                "not sent yet".into(),
            );
        }
        if !links.is_empty() {
            // A line names a payment the ledger has never submitted: the money left, and the
            // payment service is about to send it (again). Critical: stop it first.
            return row(
                Outcome::PaidWhilePending,
                every_line(),
                links
                    .iter()
                    .min_by_key(|l| l.pass)
                    .map(pass_id)
                    .unwrap_or(none),
                Action::Ticket,
                format!(
                    "the ledger says PENDING (never submitted), but {} provider line(s) show it \
                     paid: hold the payment before the payment service sends it again",
                    links.len()
                )
                .into(),
            );
        }
        return row(
            Outcome::Ambiguous,
            every_line(),
            links
                .iter()
                .chain(amb)
                .chain(returns)
                .chain(returns_amb)
                .min_by_key(|l| l.pass)
                .map(pass_id)
                .unwrap_or(none),
            Action::Ticket,
            "provider line(s) for a payment the ledger never submitted".into(),
        );
    }
    let unresolved = ctx.unresolved(p);
    if !amb.is_empty() || !returns_amb.is_empty() {
        let first = amb
            .iter()
            .min_by_key(|a| a.pass)
            .or(returns_amb.iter().min_by_key(|a| a.pass));
        return row(
            Outcome::Ambiguous,
            every_line(),
            first.map(pass_id).unwrap_or(none),
            Action::Ticket,
            if amb.is_empty() {
                "a return or reversal that could be this payment's money or another's: a human decides"
                    .into()
            } else if amb.iter().all(|a| ix.unknown_reference(a.line as usize)) {
                "a line with this payment's recipient and money whose reference has the shape of our \
                 payment ids but names none of ours: evidence for no payment, a human decides"
                    .into()
            } else {
                "more than one candidate: a human decides".into()
            },
        );
    }
    if let Some(ret) = returns.iter().min_by_key(|r| r.pass) {
        // Money that came back confirms nothing (DESIGN.md rule 10).
        let paid = links.len();
        let (outcome, detail) = if paid >= 2 {
            (
                Outcome::DuplicateAtProvider,
                format!(
                    "{paid} provider lines for one payment and {} return(s)",
                    returns.len()
                ),
            )
        } else {
            (Outcome::Returned, {
                // Summed in the payment's currency (a return in another currency is named
                // by its count only).
                let back: i64 = returns
                    .iter()
                    .map(|r| &lines[r.line as usize])
                    .filter(|l| l.currency == p.currency)
                    .map(|l| l.ledger_amount().saturating_abs())
                    .sum();
                format!(
                    "{} return(s) or reversal(s) of this payment{}: {} of {} {} came back",
                    returns.len(),
                    if paid == 1 {
                        " after its provider line"
                    } else {
                        " (its own line is not among the loaded statements)"
                    },
                    crate::money::format_minor(back, p.currency),
                    crate::money::format_minor(p.amount_minor, p.currency),
                    p.currency
                )
            })
        };
        let rule = links
            .iter()
            .min_by_key(|l| l.pass)
            .map(pass_id)
            .unwrap_or_else(|| pass_id(ret));
        return row(outcome, every_line(), rule, Action::Ticket, detail.into());
    }
    if p.status == Status::Submitting && !unresolved {
        return row(
            Outcome::InFlight,
            linked,
            links
                .iter()
                .min_by_key(|l| l.pass)
                .map(pass_id)
                .unwrap_or(none),
            Action::None,
            "SUBMITTING, younger than the stale age".into(),
        );
    }
    if links.len() >= 2 {
        let outcome = if p.status == Status::Failed {
            Outcome::FailedButPaid
        } else {
            Outcome::DuplicateAtProvider
        };
        return row(
            outcome,
            linked,
            links
                .iter()
                .min_by_key(|l| l.pass)
                .map(pass_id)
                .unwrap_or(none),
            Action::Ticket,
            format!(
                "{} provider lines for one payment (refund candidate)",
                links.len()
            )
            .into(),
        );
    }
    if let Some(link) = links.first() {
        let l = &lines[link.line as usize];
        let pass = &rules.passes[link.pass];
        let accepted = ctx
            .accepted
            .get(&link.line)
            .filter(|(pid, _)| *pid == p.payment_id.to_string())
            .map(|(_, d)| *d);
        if let Some((outcome, detail)) = link_problem(p, l, &pass.normalize, accepted) {
            return row(outcome, linked, &pass.id, Action::Ticket, detail);
        }
        if p.status == Status::Succeeded
            && ctx.named_only.get(i).copied().unwrap_or(false)
            && !same_provider_id(&pass.normalize, p, l)
        {
            // Its own line was booked long before the statements this run loads: this one is
            // a second payout or a very late booking, never taken as the payment's only line.
            return row(
                Outcome::DuplicateAtProvider,
                linked,
                &pass.id,
                Action::Ticket,
                format!(
                    "a line for a payment started {}, before the run's horizon: its own line was \
                     booked before the statements this run loads; a second payout or a very late \
                     booking (refund candidate)",
                    crate::timeparse::format_utc(p.anchor())
                        .get(..10)
                        .unwrap_or_default()
                )
                .into(),
            );
        }
        if p.status == Status::Succeeded {
            return if pass.auto_succeeded {
                row(
                    Outcome::Matched,
                    linked,
                    &pass.id,
                    Action::None,
                    Cow::Borrowed(""),
                )
            } else {
                row(
                    Outcome::ProposedMatch,
                    linked,
                    &pass.id,
                    Action::Ticket,
                    "unique match from a pass that only proposes".into(),
                )
            };
        }
        // Unresolved with exactly one line and equal money.
        return if pass.auto_unknown && p.status != Status::Review {
            row(
                Outcome::ResolvedSucceeded,
                linked,
                &pass.id,
                Action::Transition(Status::Succeeded),
                format!("{} with exactly one provider line", p.status.as_str()).into(),
            )
        } else {
            row(
                Outcome::ProposedMatch,
                linked,
                &pass.id,
                Action::Ticket,
                if p.status == Status::Review {
                    "payment is in REVIEW: proposed, not applied".into()
                } else {
                    "unique match from a pass that only proposes".into()
                },
            )
        };
    }
    // No line at all.
    if p.status == Status::Failed {
        return row(
            Outcome::FailedOk,
            vec![],
            none,
            Action::None,
            Cow::Borrowed(""),
        );
    }
    let near = ix.near_by_pay.get(i);
    if unresolved && !near.is_empty() {
        return row(
            Outcome::Ambiguous,
            sorted_lines(lines, near.to_vec()),
            &names.near_miss,
            Action::Ticket,
            if let (true, Some(s)) = (p.has_earlier_attempt(), p.started_at)
                && near
                    .iter()
                    .any(|&l| lines[l as usize].booked_to < s - names.window.0)
            {
                // Outside the current attempt's window, so not its match; but the money may
                // have left with the earlier attempt, and a FAILED permits a retry that pays
                // twice.
                "a look-alike line is in an earlier attempt's window: the money may have left with that attempt".into()
            } else if near.iter().all(|&l| lines[l as usize].recipient.is_empty()) {
                "a line without a recipient, of this payment's currency and amount, is in the window: it may be this payment's money".into()
            } else {
                "a line to the same recipient (another amount or currency: fee netted, converted?) is in the window".into()
            },
        );
    }
    // "No line" needs the absence of evidence over every attempt that could have paid.
    let closed = match (p.started_at, p.absence_from()) {
        (Some(s), Some(first)) => ctx.window_closed(p.partition, first, s, names.window),
        _ => false,
    };
    match (p.status, closed) {
        (Status::Succeeded, true) => row(
            Outcome::MissingAtProvider,
            vec![],
            none,
            Action::Ticket,
            "no provider line although every source covers the window".into(),
        ),
        (Status::Unknown | Status::Submitting, true) => row(
            Outcome::ResolvedFailed,
            vec![],
            none,
            Action::Transition(Status::Failed),
            if p.has_earlier_attempt() {
                "no provider line; every source complete from the first attempt's window to the \
                 current one's, and the settlement lag passed"
                    .into()
            } else {
                "no provider line; every source complete for the window and the settlement lag passed"
                    .into()
            },
        ),
        _ => row(
            Outcome::AwaitingEvidence,
            vec![],
            none,
            Action::None,
            "no line yet; the window is not closed or not completely covered".into(),
        ),
    }
}
