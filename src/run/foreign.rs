//! What a shard reads of the partitions other shards reconcile (issue 40 point 6): a line that
//! names a payment is that payment's evidence wherever it is booked (DESIGN.md rule 12), so
//! the shard that owns payment P must see a line of another partition's source that names P,
//! and report the two together, exactly as one process does (docs/sharding.md).
//!
//! A shard reads the other partitions' sources over the night's statement days and keeps only
//! the lines whose reference or provider id names one of its payments ([`NameIndex`]): those
//! of its ledger range first, then those the whole-ledger lookup finds. Their own partition's
//! shard reports no row for such a line (it is linked to a payment there too, through the
//! lookup, which in a shard searches every partition). Foreign lines count toward no coverage,
//! no summary and no settlement; they only name.
//!
//! Who reports a payment: the shard of its partition, when its ledger range loads it (the
//! night's payments); one found only by the lookup (older than the night) is reported by the
//! shard of its own partition when a line of that partition names it, else by the shard of the
//! first partition (by value) whose line names it. Every shard that finds such a payment sees
//! every line that names it (it reads all the sources), so they all agree on the one that
//! reports it.

use crate::config::LineKind;
use crate::ledger::Payment;
use crate::ledger::load::LoadedLedger;
use crate::matching::named::{Keyer, NameIndex};
use crate::matching::{self, MatchResult};
use crate::rules::RuleSet;
use crate::sources::{self, InputFile, StatementLine};
use crate::timeparse::Micros;
use anyhow::{Context as _, Result};
use std::collections::BTreeSet;

/// The loads of the sources of the partitions other shards reconcile (None in a whole night's
/// job, or when there are none), read on a blocking thread.
pub(super) fn load(
    cfg: &crate::config::Config,
    days: (chrono::NaiveDate, chrono::NaiveDate),
    as_of: Micros,
) -> Option<super::load::Loading> {
    let p = cfg.partition.as_ref()?;
    if p.foreign_sources.is_empty() {
        return None;
    }
    Some(super::load::load_sources(
        p.foreign_sources.clone(),
        true,
        days,
        as_of,
    ))
}

/// A shard's lines of other partitions, and which payments are not its own to report.
#[derive(Default)]
pub(super) struct Foreign {
    /// The partitions this shard reconciles (None: a whole night; nothing is foreign).
    mine: Option<crate::partition::Mine>,
    /// Lines of their sources that may name a payment (payments and returns with a reference
    /// or provider id, booked by the as-of), not taken into the night yet: in full until the
    /// night's ledger is loaded, then only their keys ([`Keyer`], `keys`): a shard of a large
    /// night holds most of its lines this way.
    waiting: Vec<StatementLine>,
    /// Where each waiting line is: (its source among the foreign sources, its place in that
    /// source's load), to read it again if a payment found later is named by it.
    waiting_at: Vec<(u32, u32)>,
    /// The keys of the waiting lines, [`Keyer::width`] per line, in `waiting_at` order.
    keys: Vec<u64>,
    keyer: Keyer,
    /// The earliest and latest booking of any of their lines (the night's ledger range covers
    /// every line, as one process's does).
    span: Option<(Micros, Micros)>,
    /// The files read (for late deliveries: a line's night is its file's).
    pub(super) inputs: Vec<InputFile>,
    /// How many lines the night holds of its own (the foreign ones follow them).
    own_lines: usize,
    /// How long reading them took (ms).
    pub(super) load_ms: Option<u64>,
    /// What was read: the sources, their days and the as-of.
    read: Option<(
        Vec<crate::sources::config::SourceConfig>,
        (chrono::NaiveDate, chrono::NaiveDate),
        Micros,
    )>,
}

impl Foreign {
    /// What `loads` (the sources of other partitions read over `days`, or nothing) offer shard
    /// `shard` of the job `cfg`.
    pub(super) fn new(
        cfg: &crate::config::Config,
        rules: &RuleSet,
        shard: Option<crate::partition::Shard>,
        loads: Option<(Vec<sources::SourceLoad>, u64)>,
        days: (chrono::NaiveDate, chrono::NaiveDate),
        as_of: Micros,
    ) -> Foreign {
        let (Some(p), Some(shard), Some((loads, ms))) = (&cfg.partition, shard, loads) else {
            return Foreign::default();
        };
        let mut out = Foreign {
            mine: Some(p.mine(shard)),
            load_ms: Some(ms),
            keyer: Keyer::new(rules),
            read: Some((p.foreign_sources.clone(), days, as_of)),
            ..Foreign::default()
        };
        for (s, load) in loads.into_iter().enumerate() {
            out.inputs.extend(load.files);
            for (i, l) in load.lines.into_iter().enumerate() {
                if l.booked_at > as_of {
                    continue;
                }
                out.span = Some(match out.span {
                    Some((a, b)) => (a.min(l.booked_at), b.max(l.booked_at)),
                    None => (l.booked_at, l.booked_at),
                });
                if may_name_any(&l) {
                    out.waiting.push(l);
                    out.waiting_at.push((s as u32, i as u32));
                }
            }
        }
        out
    }

    /// Whether there is anything of other partitions (a shard of a night of several).
    pub(super) fn is_empty(&self) -> bool {
        self.mine.is_none()
    }

    /// Whether partition `id` is one another shard reconciles.
    fn of_other_shard(&self, id: u32) -> bool {
        self.mine.as_ref().is_some_and(|m| !m.contains(id))
    }

    /// Reviewers' confirmed lines name their payment here too (`confirm N`); what the
    /// overlay did joins `into` (the night's own lines').
    pub(super) async fn overlay(
        &mut self,
        db: &crate::db::Db,
        into: &mut crate::decisions::confirmed::Overlaid,
    ) -> Result<()> {
        if !self.waiting.is_empty() {
            into.extend(crate::decisions::confirmed::overlay(db, &mut self.waiting, None).await?);
        }
        Ok(())
    }

    /// The earliest and latest booking of the night's lines, `own` and these.
    pub(super) fn booked_span(&self, own: &[StatementLine]) -> Option<(Micros, Micros)> {
        let mine = own.iter().map(|l| l.booked_at);
        let (lo, hi) = (mine.clone().min(), mine.max());
        let (lo, hi) = match (lo.zip(hi), self.span) {
            (Some((a, b)), Some((c, d))) => (a.min(c), b.max(d)),
            (x, y) => x.or(y)?,
        };
        Some((lo, hi))
    }

    /// Takes into `lines` (the night's, its own first) the waiting lines that may name one of
    /// the payments of `ledger` (the night's range of the shard's partitions); keeps only the
    /// keys of the others. Returns how many it took.
    pub(super) fn take_named(
        &mut self,
        lines: &mut Vec<StatementLine>,
        rules: &RuleSet,
        ledger: &LoadedLedger,
    ) -> usize {
        if self.waiting.is_empty() {
            return 0;
        }
        let index = NameIndex::new(rules, &ledger.payments, &ledger.provider_ids, |_| true);
        let before = lines.len();
        let mut at = Vec::new();
        let mut keys = Vec::new();
        for (l, place) in std::mem::take(&mut self.waiting)
            .into_iter()
            .zip(std::mem::take(&mut self.waiting_at))
        {
            let start = keys.len();
            self.keyer.push(&l, &mut keys);
            if index.names(&keys[start..]) {
                keys.truncate(start);
                lines.push(l);
            } else {
                at.push(place);
            }
        }
        keys.shrink_to_fit();
        at.shrink_to_fit();
        (self.keys, self.waiting_at) = (keys, at);
        lines.len() - before
    }

    /// Takes into `lines` the waiting lines (kept as keys) that may name one of the payments
    /// of `ledger` that `which` accepts (those the lookup found), read again from their files;
    /// lets the others go. Returns how many it took.
    pub(super) async fn take_named_again(
        &mut self,
        lines: &mut Vec<StatementLine>,
        rules: &RuleSet,
        ledger: &LoadedLedger,
        which: impl Fn(usize) -> bool,
        (db, confirmed): (&crate::db::Db, &mut crate::decisions::confirmed::Overlaid),
    ) -> Result<usize> {
        let (keys, at) = (
            std::mem::take(&mut self.keys),
            std::mem::take(&mut self.waiting_at),
        );
        let (Some((sources_cfg, days, as_of)), false) = (&self.read, at.is_empty()) else {
            return Ok(0);
        };
        let index = NameIndex::new(rules, &ledger.payments, &ledger.provider_ids, which);
        if index.is_empty() {
            return Ok(0);
        }
        let width = self.keyer.width().max(1);
        let hits: BTreeSet<(u32, u32)> = at
            .iter()
            .zip(keys.chunks_exact(width))
            .filter(|(_, k)| index.names(k))
            .map(|(place, _)| *place)
            .collect();
        if hits.is_empty() {
            return Ok(0);
        }
        // Only the sources that hold one (rare: an older payment named in another
        // partition's file), read as the night read them.
        let wanted: BTreeSet<u32> = hits.iter().map(|(s, _)| *s).collect();
        let again: Vec<_> = wanted
            .iter()
            .map(|&s| sources_cfg[s as usize].clone())
            .collect();
        let (loads, _) = super::load::load_sources(again, true, *days, *as_of)
            .await
            .context("statement loading task (other partitions, again)")??;
        let mut picked = Vec::new();
        for (load, s) in loads.into_iter().zip(&wanted) {
            for (i, l) in load.lines.into_iter().enumerate() {
                if hits.contains(&(*s, i as u32)) {
                    picked.push(l);
                }
            }
        }
        confirmed.extend(crate::decisions::confirmed::overlay(db, &mut picked, None).await?);
        // A file replaced since it was read: only lines that still name one are taken.
        picked.retain(|l| index.may_name(l));
        let n = picked.len();
        lines.extend(picked);
        Ok(n)
    }

    /// Marks where the night's own lines end (before any foreign line is taken).
    pub(super) fn set_own_lines(&mut self, n: usize) {
        self.own_lines = n;
    }

    /// How many of the night's lines are its own (they come first).
    pub(super) fn own_lines(&self, all: usize) -> usize {
        if self.is_empty() {
            all
        } else {
            self.own_lines.min(all)
        }
    }

    /// Lets the waiting lines go (the ones no payment of the shard's can be named by).
    pub(super) fn drop_waiting(&mut self) {
        (self.waiting, self.waiting_at, self.keys) = Default::default();
    }

    /// A payment of a partition another shard reconciles is only ever named here: no fuzzy
    /// pass, return by amount or near miss considers it (its look-alikes are its own shard's).
    pub(super) fn only_named(&self, payments: &[Payment], elig: &mut matching::Eligibility) {
        if self.is_empty() {
            return;
        }
        for (i, p) in payments.iter().enumerate() {
            if self.of_other_shard(p.partition) {
                elig.linkable[i] = false;
                elig.near_miss[i] = false;
            }
        }
    }

    /// The keys a shard looks up in the partitions other shards reconcile, among the payments
    /// of the night's range (those one process loads): every identifier of the foreign lines it
    /// took, and the identifiers of its own lines that an identifier pass paired with a payment
    /// but that do not name it (a provider id it has not recorded, a reference that is not its
    /// id). One process has those payments loaded, so a line that also names one of them is
    /// undecided there; so it is here.
    pub(super) fn other_shard_keys(
        &self,
        lines: &[StatementLine],
        m: &MatchResult,
        ledger: &LoadedLedger,
        rules: &RuleSet,
        shape: &matching::shape::IdShape,
    ) -> crate::ledger::lookup::Keys {
        if self.is_empty() {
            return Default::default();
        }
        let own = self.own_lines(lines.len());
        let mut named: Vec<bool> = (0..lines.len()).map(|i| i < own).collect();
        let identifier = |pass: usize| {
            rules
                .passes
                .get(pass)
                .is_some_and(|p| matching::criteria::Criterion::of(p).named().is_some())
        };
        for pair in m
            .links
            .iter()
            .chain(&m.ambiguous)
            .chain(&m.returns)
            .chain(&m.returns_ambiguous)
        {
            let (l, pi) = (pair.line as usize, pair.payment as usize);
            if l >= own || !named[l] || !identifier(pair.pass) {
                continue;
            }
            let from = ledger
                .provider_ids
                .partition_point(|(i, _)| (*i as usize) < pi);
            let attempts: Vec<&str> = ledger.provider_ids[from..]
                .iter()
                .take_while(|(i, _)| *i as usize == pi)
                .map(|(_, id)| id.as_str())
                .collect();
            if self
                .keyer
                .names_another(&lines[l], &ledger.payments[pi], &attempts)
            {
                named[l] = false;
            }
        }
        let only = MatchResult {
            named,
            ..MatchResult::default()
        };
        matching::shape::lookup_keys(lines, &only, rules, shape)
    }

    /// Per payment: whether another shard reports it (see the module docs). `found` says which
    /// payments the whole-ledger lookup found with the `coalesce(started_at, created_at)` of
    /// their rows; `range` is the night's ledger range.
    pub(super) fn reported_elsewhere(
        &self,
        payments: &[Payment],
        found: &[Option<Micros>],
        range: (Micros, Micros),
        lines: &[StatementLine],
        m: &MatchResult,
        rules: &RuleSet,
    ) -> Vec<bool> {
        if self.is_empty() {
            return Vec::new();
        }
        let identifier = |pass: usize| {
            rules
                .passes
                .get(pass)
                .is_some_and(|p| matching::criteria::Criterion::of(p).named().is_some())
        };
        let found = |i: usize| found.get(i).copied().flatten();
        // The partitions whose lines name each payment the lookup found.
        let mut naming: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); payments.len()];
        for pair in m
            .links
            .iter()
            .chain(&m.ambiguous)
            .chain(&m.returns)
            .chain(&m.returns_ambiguous)
        {
            if found(pair.payment as usize).is_some() && identifier(pair.pass) {
                naming[pair.payment as usize].insert(lines[pair.line as usize].origin.partition);
            }
        }
        payments
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let reporter = match found(i) {
                    // Of the night's range: its own partition's shard loaded it.
                    None => p.partition,
                    Some(start) if start >= range.0 && start < range.1 => p.partition,
                    // Older: its own partition when one of its lines names it, else the first
                    // partition whose line does.
                    Some(_) if naming[i].is_empty() || naming[i].contains(&p.partition) => {
                        p.partition
                    }
                    Some(_) => naming[i]
                        .iter()
                        .copied()
                        .min_by_key(|&id| crate::partition::value(id))
                        .unwrap_or(p.partition),
                };
                self.of_other_shard(reporter)
            })
            .collect()
    }
}

/// The settlement of the night's own lines only (`own` of them, first): foreign lines name a
/// payment and nothing else (their batches are their own shard's).
pub(super) fn own_settlement(
    lines: &[StatementLine],
    own: usize,
    rules: &RuleSet,
) -> Result<Option<matching::settlement::SettlementResult>> {
    if own == lines.len() {
        return Ok(None);
    }
    matching::settlement::run(&lines[..own], &rules.settlements)
        .context("settlement of the shard's own lines")
        .map(Some)
}

/// Per payment of the merged ledger: the row start of the ones the lookup added (`added`, in
/// the order of `row_starts`), None for the others.
pub(super) fn found_starts(added: &[bool], row_starts: &[Micros]) -> Vec<Option<Micros>> {
    let mut next = row_starts.iter();
    added
        .iter()
        .map(|&a| if a { next.next().copied() } else { None })
        .collect()
}

/// Leaves the payments another shard reports (`elsewhere`; empty: none) out of the night's
/// scope and watch.
pub(super) fn leave_out(elsewhere: &[bool], in_scope: &mut [bool], watch: &mut [bool]) {
    for (i, _) in elsewhere.iter().enumerate().filter(|(_, e)| **e) {
        in_scope[i] = false;
        watch[i] = false;
    }
}

/// The links of the night's own lines (the first `own`).
pub(super) fn own_links(
    links: &[matching::Pair],
    own: usize,
) -> std::borrow::Cow<'_, [matching::Pair]> {
    if links.iter().all(|p| (p.line as usize) < own) {
        std::borrow::Cow::Borrowed(links)
    } else {
        links
            .iter()
            .filter(|p| (p.line as usize) < own)
            .copied()
            .collect()
    }
}

/// Drops the line rows of foreign lines (those from `own` on): their own shard reports them.
pub(super) fn drop_line_rows(rows: &mut Vec<crate::outcome::ResultRow>, own: usize) {
    rows.retain(|r| r.payment.is_some() || r.lines.first().is_none_or(|&l| (l as usize) < own));
}

/// The keys ([`crate::run::handover::row_key`]) of the rows that share a line with a row of
/// another shard: a foreign line (from `own` on), or a line paired with a payment another shard
/// reports (`elsewhere`). One process groups such rows into cases with the other shard's rows;
/// a shard leaves those cases to the gather, which sees every shard's rows. Empty when nothing
/// is foreign.
pub(super) fn crossing_rows<'a>(
    rows: &[crate::outcome::ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
    pairs: &(impl Iterator<Item = &'a matching::Pair> + Clone),
    own: usize,
    elsewhere: &[bool],
) -> std::collections::HashSet<String> {
    if own == lines.len() && !elsewhere.iter().any(|&e| e) {
        return Default::default();
    }
    let mut shared = vec![false; lines.len()];
    for s in shared.iter_mut().skip(own) {
        *s = true;
    }
    for p in pairs.clone() {
        if elsewhere.get(p.payment as usize).copied().unwrap_or(false) {
            shared[p.line as usize] = true;
        }
    }
    rows.iter()
        .filter(|r| r.lines.iter().any(|&l| shared[l as usize]))
        .map(|r| crate::run::handover::row_key(r, payments, lines))
        .collect()
}

/// Whether line `l` can name a payment at all: a payment or a return with a reference or a
/// provider id.
fn may_name_any(l: &StatementLine) -> bool {
    (l.ledger_candidate() || l.kind == LineKind::Refund)
        && (l.reference.is_some() || l.provider_txn_id.is_some())
}
