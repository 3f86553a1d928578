//! Matching: the rule passes, run as Polars joins over canonical frames.
//!
//! Every pass sees only what earlier passes left. Joins produce candidate pairs; counting them
//! per side decides: identifier links are kept (several lines for one payment are duplicates;
//! one line for several payments is a conflict), fuzzy pairs are accepted only when each side is
//! the other's only candidate (DESIGN.md rule 1). Nothing here loops over pairs of rows.

pub mod criteria;
mod frames;
pub mod named;
pub mod settlement;
pub mod shape;

use crate::ledger::Payment;
use crate::rules::RuleSet;
use crate::rules::kinds::Accept;
use crate::sources::StatementLine;
use anyhow::{Context, Result};
use polars::prelude::DataFrame;

/// A line linked to a payment by a pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pair {
    /// Index into the statement lines.
    pub line: u32,
    /// Index into the payments.
    pub payment: u32,
    /// Index of the pass in the rule set.
    pub pass: usize,
}

/// Everything the passes found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchResult {
    /// Accepted links: identifier links (possibly several lines per payment) and unique fuzzy
    /// pairs. Sorted.
    pub links: Vec<Pair>,
    /// Candidate pairs that could not be decided: fuzzy pairs where a side had more than one
    /// candidate, identifier links where one line named several payments. Sorted.
    pub ambiguous: Vec<Pair>,
    /// Near misses of unresolved payments left without evidence: a line not cleanly claimed, with the
    /// same recipient inside the evidence horizon, any amount, any currency. `pass` is unused (0).
    pub near_misses: Vec<Pair>,
    /// Returns and reversals (kind `REFUND`) linked to the payment whose money came back: by
    /// identifier (`pass` is that pass's index), or by recipient, currency and absolute amount
    /// when each is the other's only candidate (`pass` is [`RETURNS`]). Sorted.
    pub returns: Vec<Pair>,
    /// Returns that could be the money of several payments (or a payment with several
    /// candidate returns): never decided automatically. Sorted.
    pub returns_ambiguous: Vec<Pair>,
    /// Three-way matching: provider settlement batches ↔ bank credits.
    pub settlement: settlement::SettlementResult,
    /// Per line: an identifier pass paired it with a payment (a link, a return or an undecided
    /// pair). Such a line is a look-alike for other payments only with their exact money.
    pub named: Vec<bool>,
    /// Lines whose reference has the shape of our payment ids
    /// ([`Eligibility::own_reference`]) but that no identifier pass paired: they name no
    /// payment loaded, and are never fuzzy evidence for another one (DESIGN.md rule 12).
    /// Sorted.
    pub unknown_references: Vec<u32>,
    /// Old-named look-alikes (issue 40 point 7): a line whose reference names a payment (the
    /// pair's, found by the pair's identifier pass) but which is booked outside that
    /// payment's evidence horizon, and which a fuzzy pass found fitting another payment
    /// exactly. Such a line may be the named payment's second payout (or late booking) or the
    /// other payment's payout with a wrong echo: it is in `ambiguous` with both payments (with
    /// the named one in `links` still when that one is FAILED: a line after a FAILED is
    /// FAILED_BUT_PAID), never a link that settles either. Sorted.
    pub old_named: Vec<Pair>,
}

/// The partition wall ([`crate::partition`]) for look-alikes: keeps the (line, payment) pairs
/// whose line and payment are of the same partition. Every pair a fuzzy pass, the near-miss
/// gate or the return search by amount considers goes through here, so no payment is ever
/// matched, or kept from "no line came", by a look-alike booked in another partition's
/// source. A job without `[partition]` has one partition: nothing is removed.
pub(crate) fn wall(pairs: &mut Vec<(u32, u32)>, payments: &[Payment], lines: &[StatementLine]) {
    pairs.retain(|&(l, p)| lines[l as usize].origin.partition == payments[p as usize].partition);
}

/// The partition wall for the pairs an identifier pass found (the line names the payment by
/// reference or provider id): a line that names a payment is that payment's evidence wherever
/// it is booked (DESIGN.md rule 12), so such pairs cross partitions. Only the lines of a bank
/// source every partition shares stay out ([`crate::partition::SHARED`]): they are read once,
/// by the gather of a sharded night, for three-way matching, and are no payment's evidence.
pub(crate) fn named_wall(pairs: &mut Vec<(u32, u32)>, lines: &[StatementLine]) {
    pairs.retain(|&(l, _)| lines[l as usize].origin.partition != crate::partition::SHARED);
}

/// The `pass` of a return found by recipient, currency and amount (not by a rule pass).
pub const RETURNS: usize = usize::MAX;

/// The name results and evidence give a pair's pass: the rule's id, or `returns`.
pub fn pass_name(rules: &RuleSet, pass: usize) -> &str {
    if pass == RETURNS {
        return "returns";
    }
    rules.passes.get(pass).map(|p| &*p.id).unwrap_or("?")
}

/// Every (line, payment) pair the Polars join of `fz` finds among all `lines` and `payments`
/// (the frames the passes build): what the property test compares with
/// [`criteria::Criterion::holds`].
pub fn fuzzy_join(
    payments: &[Payment],
    lines: &[StatementLine],
    fz: &criteria::Criterion<'_>,
) -> Result<Vec<(u32, u32)>> {
    join_all(payments, &[], lines, fz)
}

/// Every (line, payment) pair the join of `crit` finds among all `lines` and `payments`, as a
/// pass runs it: the hash join on the keys of its [`crate::rules::kinds::Condition::Named`]
/// (provider ids recorded on attempts included: `provider_ids`), or the `join_where` of its
/// predicates. What each kind's test compares with its one-pair checks. Sorted and unique.
pub fn join_all(
    payments: &[Payment],
    provider_ids: &[(u32, String)],
    lines: &[StatementLine],
    crit: &criteria::Criterion<'_>,
) -> Result<Vec<(u32, u32)>> {
    let (line_free, pay_free) = (vec![true; lines.len()], vec![true; payments.len()]);
    match crit.named() {
        Some(ids) => {
            let mut pairs = frames::identifier_pairs(
                payments,
                provider_ids,
                lines,
                &line_free,
                &pay_free,
                ids,
                crit.steps,
            )?;
            pairs.retain(|&(l, p)| {
                crit.holds_besides_named(&payments[p as usize], &lines[l as usize])
            });
            Ok(pairs)
        }
        None => frames::fuzzy_pairs(payments, lines, &line_free, &pay_free, crit),
    }
}

/// Which payments may take part in what.
#[derive(Debug, Clone)]
pub struct Eligibility {
    /// May be linked by a fuzzy pass or a return by amount (everything but PENDING).
    pub linkable: Vec<bool>,
    /// May be linked by a pass that names it (identifier): every payment, PENDING included
    /// (a line that names a payment never submitted is that payment's evidence).
    pub named: Vec<bool>,
    /// Unresolved (UNKNOWN, stale SUBMITTING, REVIEW): subject to the near-miss gate.
    pub near_miss: Vec<bool>,
    /// Per line: its reference has the shape of our payment ids ([`shape::IdShape`]). Such a
    /// line is evidence only for the payment an identifier pass finds it naming: a fuzzy pass
    /// counts it as a candidate but never accepts it, and returns are never matched to it by
    /// amount. Empty: no line has it.
    pub own_reference: Vec<bool>,
    /// Per line: a reviewer confirmed it as the payment its reference now names (`confirm
    /// N`). A human decided whose it is: never an old-named look-alike
    /// ([`MatchResult::old_named`]). Empty: no line is.
    pub confirmed: Vec<bool>,
}

/// Runs every pass of `rules` and the near-miss gate.
pub fn run<'a>(
    payments: &'a [Payment],
    provider_ids: &[(u32, String)],
    lines: &'a [StatementLine],
    rules: &RuleSet,
    elig: &Eligibility,
) -> Result<MatchResult> {
    let mut line_free: Vec<bool> = lines.iter().map(StatementLine::ledger_candidate).collect();
    let mut pay_free: Vec<bool> = elig.named.clone();
    // A clean link (equal money) takes both sides out of later passes. Anything else — a link
    // whose money differs, a side left undecided — is still counted as a candidate by later
    // fuzzy passes (never accepted), so a payment is never auto-matched while a look-alike
    // sits on disputed evidence.
    let mut line_contested = vec![false; lines.len()];
    let mut line_clean = vec![false; lines.len()];
    // A payment is cleanly claimed with exactly one link, equal money and no open candidate.
    let mut pay_links = vec![0u32; payments.len()];
    let mut pay_disputed = vec![false; payments.len()];
    // Lines an identifier pass paired with a payment.
    let mut line_named = vec![false; lines.len()];
    // Identifier links by reference alone whose line is booked outside the named payment's
    // evidence horizon: not clean claims, so the fuzzy passes still see the line as a
    // candidate of the payments it fits (see `MatchResult::old_named`).
    let mut late_named: Vec<Pair> = Vec::new();
    let own = |l: usize| elig.own_reference.get(l).copied().unwrap_or(false);
    let mut result = MatchResult::default();
    // Returns and reversals not yet tied to a payment.
    let mut return_free: Vec<bool> = lines
        .iter()
        .map(|l| l.kind == crate::config::LineKind::Refund)
        .collect();
    let any_return = return_free.iter().any(|&b| b);
    for (pass_idx, pass) in rules.passes.iter().enumerate() {
        let started = std::time::Instant::now();
        let stage = || format!("matching pass {:?}", pass.id);
        // The pass's predicate, as its kind declares it: the join below and the checks of
        // evidence and `recon explain` both come from it.
        let crit = criteria::Criterion::of(pass);
        let fuzzy = crit.accept == Accept::UniqueBothSides;
        let masks;
        let (line_mask, pay_mask): (&[bool], &[bool]) = if fuzzy {
            // Lines: every one not cleanly claimed (free, contested, or left undecided by an
            // earlier pass) counts as a candidate; only free ones can pair. Payments: every
            // linkable one counts, and a payment an earlier pass claimed cleanly can pair too,
            // as its second payout: a named payout never settles an unnamed one by
            // elimination (the named payment may have been paid twice), so the outcome
            // depends neither on the night each line arrived nor on the order they were
            // booked in.
            let line_mask: Vec<bool> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| l.ledger_candidate() && !line_clean[i])
                .collect();
            // A claimed payment can only be a candidate of a line to its recipient (in its
            // currency, when the pass compares currencies): only those enter the join
            // (claimed payments are most of a day).
            let same_cur = crit.same_currency();
            let block = |recipient: &'a str, currency: &'a str| {
                (
                    crit.recipient_key(recipient),
                    if same_cur { currency } else { "" },
                )
            };
            let wanted: Option<foldhash::HashSet<(std::borrow::Cow<'a, str>, &'a str)>> =
                crit.compares_recipient().then(|| {
                    lines
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| line_mask[i])
                        .map(|(_, l)| block(&l.recipient, l.currency))
                        .collect()
                });
            let pay_mask: Vec<bool> = payments
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let clean = pay_links[i] == 1 && !pay_disputed[i];
                    elig.linkable[i]
                        && (!clean
                            || wanted
                                .as_ref()
                                .is_none_or(|w| w.contains(&block(&p.recipient, p.currency))))
                })
                .collect();
            masks = (line_mask, pay_mask);
            (&masks.0, &masks.1)
        } else {
            (&line_free, &pay_free)
        };
        let pairs = match crit.named() {
            Some(ids) => {
                // Returns ride along in the same join (their keys are few; the payments' side
                // is the expensive one), and are split off here.
                let mask: Vec<bool> = if any_return {
                    line_mask
                        .iter()
                        .zip(&return_free)
                        .map(|(&a, &b)| a || b)
                        .collect()
                } else {
                    Vec::new()
                };
                let mut pairs = frames::identifier_pairs(
                    payments,
                    provider_ids,
                    lines,
                    if any_return { &mask } else { line_mask },
                    pay_mask,
                    ids,
                    &pass.normalize,
                )
                .with_context(stage)?;
                if any_return {
                    let returns: Vec<(u32, u32)> = pairs
                        .iter()
                        .filter(|&&(l, _)| return_free[l as usize])
                        .copied()
                        .collect();
                    if !returns.is_empty() {
                        pairs.retain(|&(l, _)| !return_free[l as usize]);
                    }
                    returns_by_identifier(&returns, pass_idx, lines.len(), &mut result);
                    for &(l, _) in &returns {
                        return_free[l as usize] = false;
                        line_named[l as usize] = true;
                    }
                }
                // Whatever else the pairing asks of a named pair is checked on the few pairs
                // the key join found.
                if crit.pairing.len() > 1 {
                    pairs.retain(|&(l, p)| {
                        crit.holds_besides_named(&payments[p as usize], &lines[l as usize])
                    });
                }
                for &(l, _) in &pairs {
                    line_named[l as usize] = true;
                }
                pairs
            }
            None => {
                let mut pairs = frames::fuzzy_pairs(payments, lines, line_mask, pay_mask, &crit)
                    .with_context(stage)?;
                // A line that names a payment is a look-alike for another only with that
                // one's exact money (issue 30: a fee-netted line of a named payment is that
                // payment's AMOUNT_MISMATCH, not a candidate of its recipient's other payments).
                pairs.retain(|&(l, p)| {
                    !line_named[l as usize]
                        || criteria::same_money(&payments[p as usize], &lines[l as usize])
                });
                pairs
            }
        };
        let (per_line, per_pay) = count(&pairs, lines.len(), payments.len());
        for &(l, p) in &pairs {
            let (l_us, p_us) = (l as usize, p as usize);
            let pair = Pair {
                line: l,
                payment: p,
                pass: pass_idx,
            };
            let unique_line = per_line[l_us] == 1;
            let accept = if fuzzy {
                unique_line
                    && per_pay[p_us] == 1
                    && line_free[l_us]
                    && !own(l_us)
                    && (pay_free[p_us] || (pay_links[p_us] == 1 && !pay_disputed[p_us]))
            } else {
                unique_line
            };
            if accept {
                let (line, pay) = (&lines[l_us], &payments[p_us]);
                pay_links[p_us] += 1;
                // A link is clean only when money and recipient agree; anything else is
                // disputed evidence (an identifier says one thing, the booking another).
                if !criteria::clean_link(&pass.normalize, pay, line) {
                    line_contested[l_us] = true;
                    pay_disputed[p_us] = true;
                } else if !fuzzy
                    && !elig.confirmed.get(l_us).copied().unwrap_or(false)
                    && outside_horizon(pay, line, rules.evidence_window())
                    && !provider_id_names(&pass.normalize, pay, p, provider_ids, line)
                {
                    late_named.push(pair);
                } else {
                    line_clean[l_us] = true;
                }
                result.links.push(pair);
            } else {
                pay_disputed[p_us] = true;
                result.ambiguous.push(pair);
            }
        }
        for &(l, p) in &pairs {
            line_free[l as usize] = false;
            pay_free[p as usize] = false;
        }
        tracing::debug!(
            pass = %pass.id,
            pairs = pairs.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Pass done."
        );
    }
    result.old_named = old_named_look_alikes(&late_named, payments, &mut result);
    let started = std::time::Instant::now();
    // Near-miss gate: unresolved payments that are still without any evidence.
    let near_pay: Vec<bool> = (0..payments.len())
        .map(|i| pay_free[i] && elig.near_miss[i])
        .collect();
    // A line is only out of reach when a link claims it cleanly: equal money, not contested,
    // not a candidate of an undecided pair.
    let claimed: Vec<bool> = {
        let mut c = vec![false; lines.len()];
        for p in &result.links {
            c[p.line as usize] = !line_contested[p.line as usize];
        }
        for p in &result.ambiguous {
            c[p.line as usize] = false;
        }
        c
    };
    let near_lines: Vec<bool> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| l.ledger_candidate() && !claimed[i])
        .collect();
    if near_pay.iter().any(|&b| b) && near_lines.iter().any(|&b| b) {
        let mut pairs = frames::fuzzy_pairs(
            payments,
            lines,
            &near_lines,
            &near_pay,
            &criteria::Criterion::near_miss(rules),
        )
        .context("near-miss gate")?;
        // A line that names another payment (its money differs from that one's) is a look-alike
        // only with this payment's exact money: any other amount or currency makes it the named
        // payment's mismatch, not a near miss of every payment to its recipient (issue 30).
        pairs.retain(|&(l, p)| {
            !line_named[l as usize]
                || criteria::same_money(&payments[p as usize], &lines[l as usize])
        });
        result
            .near_misses
            .extend(pairs.into_iter().map(|(line, payment)| Pair {
                line,
                payment,
                pass: 0,
            }));
    }
    // A line without a recipient says nothing about whose money it is: one with a free
    // payment's currency and amount inside its evidence horizon could be that payment, so it
    // blocks "no provider line" as surely as a line to the same recipient (DESIGN.md rule 1).
    let blank = blank_recipient_near_misses(payments, lines, &near_lines, &near_pay, rules);
    result.near_misses.extend(blank);
    tracing::debug!(
        pairs = result.near_misses.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "Near-miss gate done."
    );
    if any_return {
        // A return whose reference has our id shape is money of the payment it names, or of
        // none: never matched to another by amount.
        for (l, free) in return_free.iter_mut().enumerate() {
            *free &= !own(l);
        }
        returns_by_amount(payments, lines, rules, elig, &return_free, &mut result)?;
    }
    result.unknown_references = (0..lines.len())
        .filter(|&l| own(l) && !line_named[l] && lines[l].ledger_candidate())
        .map(|l| l as u32)
        .collect();
    result.named = line_named;
    // Each pass added its pairs in order: the stable sort merges those runs in linear time
    // instead of sorting a million pairs from scratch.
    result.links.sort();
    result.ambiguous.sort();
    result.near_misses.sort();
    result.returns.sort();
    result.returns_ambiguous.sort();
    result.settlement = settlement::run(lines, &rules.settlements)?;
    Ok(result)
}

/// Whether line `l` is booked outside payment `p`'s evidence horizon (`window` before its
/// earliest attempt's start to after its current one's): no window of ours puts it there.
/// False for a payment never sent (no start).
fn outside_horizon(p: &Payment, l: &StatementLine, window: (i64, i64)) -> bool {
    match (p.absence_from(), p.started_at) {
        (Some(first), Some(start)) => !l.booked_within(first - window.0, start + window.1),
        _ => false,
    }
}

/// Whether line `l`'s provider id (normalised with `steps`) is one recorded for payment `p`
/// (index `pi`): on the payment row, or on one of its attempts (`provider_ids`, sorted by
/// payment index). Such a line is the payment's own transaction, booked late.
fn provider_id_names(
    steps: &[crate::normalize::Step],
    p: &Payment,
    pi: u32,
    provider_ids: &[(u32, String)],
    l: &StatementLine,
) -> bool {
    let Some(id) = l.provider_txn_id.as_deref() else {
        return false;
    };
    let id = crate::normalize::apply(steps, id);
    if id.trim().is_empty() {
        return false;
    }
    let from = provider_ids.partition_point(|(i, _)| *i < pi);
    p.provider_payment_id
        .as_deref()
        .into_iter()
        .chain(
            provider_ids[from..]
                .iter()
                .take_while(|(i, _)| *i == pi)
                .map(|(_, k)| k.as_str()),
        )
        .any(|k| crate::normalize::apply(steps, k) == id)
}

/// Issue 40 point 7: of the `late` identifier links (a line named by reference, booked outside
/// the named payment's evidence horizon), those whose line a fuzzy pass found fitting another
/// payment (an undecided pair) are moved from `links` to `ambiguous`: the line is a candidate
/// of both, and settles neither. A FAILED named payment keeps its link (a line after a FAILED
/// is FAILED_BUT_PAID, critical; the look-alike is reviewed in the same case through the
/// line). Returns those links, sorted.
fn old_named_look_alikes(
    late: &[Pair],
    payments: &[Payment],
    result: &mut MatchResult,
) -> Vec<Pair> {
    if late.is_empty() {
        return Vec::new();
    }
    // The late link is in `links`, so any undecided pair of its line is another payment's.
    let late_lines: std::collections::HashSet<u32> = late.iter().map(|n| n.line).collect();
    let fitting: std::collections::HashSet<u32> = result
        .ambiguous
        .iter()
        .map(|a| a.line)
        .filter(|l| late_lines.contains(l))
        .collect();
    let mut old: Vec<Pair> = late
        .iter()
        .filter(|n| fitting.contains(&n.line))
        .copied()
        .collect();
    old.sort();
    let moved: std::collections::HashSet<(u32, u32)> = old
        .iter()
        .filter(|n| payments[n.payment as usize].status != crate::ledger::Status::Failed)
        .map(|n| (n.line, n.payment))
        .collect();
    if !moved.is_empty() {
        result.links.retain(|x| {
            let m = moved.contains(&(x.line, x.payment));
            if m {
                result.ambiguous.push(*x);
            }
            !m
        });
    }
    old
}

/// Near misses of lines without a recipient: same currency and amount (as the ledger sees
/// it), booked inside the payment's evidence horizon (from `before` its EARLIEST attempt's
/// start to `after` its current one's: an earlier attempt may have paid). Keyed by (currency, amount), so the
/// cost is one lookup per free payment, never a pair loop.
fn blank_recipient_near_misses(
    payments: &[Payment],
    lines: &[StatementLine],
    near_lines: &[bool],
    near_pay: &[bool],
    rules: &RuleSet,
) -> Vec<Pair> {
    let fz = criteria::Criterion::near_miss(rules);
    let mut by_money: std::collections::HashMap<(&str, i64), Vec<u32>> =
        std::collections::HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        if near_lines[i] && fz.line_qualifies(l) && fz.recipient_key(&l.recipient).is_empty() {
            by_money
                .entry((l.currency, l.ledger_amount()))
                .or_default()
                .push(i as u32);
        }
    }
    if by_money.is_empty() {
        return Vec::new();
    }
    let (before, after) = fz.window;
    let mut out = Vec::new();
    for (pi, p) in payments.iter().enumerate() {
        let (true, Some(start), Some(first)) = (near_pay[pi], p.started_at, p.absence_from())
        else {
            continue;
        };
        let Some(ls) = by_money.get(&(p.currency, p.amount_minor)) else {
            continue;
        };
        out.extend(
            ls.iter()
                .filter(|&&li| {
                    let l = &lines[li as usize];
                    l.origin.partition == p.partition
                        && l.booked_within(first - before, start + after)
                })
                .map(|&line| Pair {
                    line,
                    payment: pi as u32,
                    pass: 0,
                }),
        );
    }
    out
}

/// Returns and reversals (DESIGN.md rule 10) found by an identifier pass: a `REFUND` line that
/// names one payment is that payment's money coming back; one that names several is ambiguous.
fn returns_by_identifier(
    pairs: &[(u32, u32)],
    pass: usize,
    n_lines: usize,
    result: &mut MatchResult,
) {
    if pairs.is_empty() {
        return;
    }
    let mut per_line = vec![0u32; n_lines];
    for &(l, _) in pairs {
        per_line[l as usize] += 1;
    }
    for &(l, p) in pairs {
        let pair = Pair {
            line: l,
            payment: p,
            pass,
        };
        if per_line[l as usize] == 1 {
            result.returns.push(pair);
        } else {
            result.returns_ambiguous.push(pair);
        }
    }
}

/// Returns that no identifier tied to a payment (`free`) are compared by recipient, currency
/// and absolute amount with every payment started in their reach ([`criteria::Criterion::returns`]),
/// and linked only when each is the other's only candidate. Only payments to a recipient some
/// return names are put in the join: returns are few, payments a million.
fn returns_by_amount(
    payments: &[Payment],
    lines: &[StatementLine],
    rules: &RuleSet,
    elig: &Eligibility,
    free: &[bool],
    result: &mut MatchResult,
) -> Result<()> {
    let fz = criteria::Criterion::returns(rules, rules.return_reach);
    let recipients: std::collections::HashSet<std::borrow::Cow<'_, str>> = lines
        .iter()
        .enumerate()
        .filter(|&(i, l)| free[i] && fz.line_qualifies(l))
        .map(|(_, l)| fz.recipient_key(&l.recipient))
        .collect();
    if recipients.is_empty() {
        return Ok(());
    }
    let pay_mask: Vec<bool> = payments
        .iter()
        .enumerate()
        .map(|(i, p)| elig.linkable[i] && recipients.contains(&fz.recipient_key(&p.recipient)))
        .collect();
    let pairs = frames::fuzzy_pairs(payments, lines, free, &pay_mask, &fz)
        .context("matching returns by recipient and amount")?;
    let (per_line, per_pay) = count(&pairs, lines.len(), payments.len());
    for &(l, p) in &pairs {
        let pair = Pair {
            line: l,
            payment: p,
            pass: RETURNS,
        };
        if per_line[l as usize] == 1 && per_pay[p as usize] == 1 {
            result.returns.push(pair);
        } else {
            result.returns_ambiguous.push(pair);
        }
    }
    Ok(())
}

/// Candidate counts per line and per payment.
fn count(pairs: &[(u32, u32)], n_lines: usize, n_pays: usize) -> (Vec<u32>, Vec<u32>) {
    let mut per_line = vec![0u32; n_lines];
    let mut per_pay = vec![0u32; n_pays];
    for &(l, p) in pairs {
        per_line[l as usize] += 1;
        per_pay[p as usize] += 1;
    }
    (per_line, per_pay)
}

/// Reads a u32 column of a collected frame.
fn u32s(df: &DataFrame, name: &str) -> Result<Vec<u32>> {
    let s = df
        .column(name)
        .with_context(|| format!("column {name}"))?
        .as_materialized_series()
        .u32()
        .with_context(|| format!("column {name} is not u32"))?
        .clone();
    Ok(s.into_no_null_iter().collect())
}

/// Pairs of (line, payment) from a frame with `s_idx` and `p_idx`, sorted and unique.
fn pairs_of(df: &DataFrame) -> Result<Vec<(u32, u32)>> {
    let l = u32s(df, "s_idx")?;
    let p = u32s(df, "p_idx")?;
    let mut v: Vec<(u32, u32)> = l.into_iter().zip(p).collect();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Reads a text column of a collected frame.
pub(crate) fn strs(df: &DataFrame, name: &str) -> Result<Vec<String>> {
    let s = df
        .column(name)
        .with_context(|| format!("column {name}"))?
        .as_materialized_series()
        .str()
        .with_context(|| format!("column {name} is not text"))?
        .clone();
    Ok(s.iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect())
}

/// Reads an i64 column of a collected frame (nulls as 0).
pub(crate) fn i64s(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let s = df
        .column(name)
        .with_context(|| format!("column {name}"))?
        .as_materialized_series()
        .i64()
        .with_context(|| format!("column {name} is not i64"))?
        .clone();
    Ok(s.iter().map(|v| v.unwrap_or(0)).collect())
}

/// Makes each contested line (line, payment a reviewer confirmed it for) an undecided
/// candidate of that payment and of every payment a pass linked it to (DESIGN.md rule 14: two
/// claims about one payout that disagree resolve nothing; a human decides). The line is then
/// named (no fuzzy evidence for anyone else).
pub fn contest(m: &mut MatchResult, contested: &[(u32, u32)]) {
    if contested.is_empty() {
        return;
    }
    let lines: std::collections::HashSet<u32> = contested.iter().map(|&(l, _)| l).collect();
    let pass = |m: &MatchResult, line: u32| {
        m.links
            .iter()
            .chain(&m.ambiguous)
            .find(|p| p.line == line)
            .map_or(0, |p| p.pass)
    };
    let mut added: Vec<Pair> = contested
        .iter()
        .map(|&(line, payment)| Pair {
            line,
            payment,
            pass: pass(m, line),
        })
        .collect();
    let (moved, kept): (Vec<Pair>, Vec<Pair>) =
        m.links.iter().partition(|p| lines.contains(&p.line));
    m.links = kept;
    added.extend(moved);
    m.ambiguous.extend(added);
    m.ambiguous.sort();
    m.ambiguous.dedup_by_key(|p| (p.line, p.payment));
    m.near_misses.retain(|p| !lines.contains(&p.line));
    for &l in &lines {
        if let Some(n) = m.named.get_mut(l as usize) {
            *n = true;
        }
    }
}
