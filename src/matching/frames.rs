//! Canonical frames for one pass and the Polars joins that produce candidate pairs.

use super::criteria::Criterion;
use super::pairs_of;
use crate::ledger::Payment;
use crate::normalize::{self, Step};
use crate::rules::kinds::Identifiers;
use crate::sources::StatementLine;
use anyhow::Result;
use polars::prelude::*;

/// The hash identifier keys are joined on.
fn key_hash(key: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x0072_6563_6f6e).hash_one(key)
}

/// One side of an identifier join: each key's source (what the side's key function takes: a
/// line, a payment, an attempt) and the 64-bit hash of its normalised key. Joining on the hash
/// instead of the text is faster in Polars (no string columns to build or compare); every
/// joined pair is then checked on the text itself, so a hash collision can never link
/// anything. Only (source, hash) is kept per key, 12 bytes: the normalised keys themselves
/// would be a copy of every key in new memory, and new memory is what this pass spent most of
/// its time on.
struct Side {
    src: Vec<u32>,
    hash: Vec<u64>,
}

impl Side {
    /// The keys of `keys` (source, raw key) that `hash` gives a hash (the non-empty ones).
    fn new<K: std::ops::Deref<Target = str>>(
        keys: impl Iterator<Item = (u32, K)>,
        hash: impl Fn(&str) -> Option<u64>,
    ) -> Side {
        // Sized once for the most keys the iterator can yield (capacity never filled costs no
        // memory; growing would copy the vectors into new memory again and again).
        let most = keys.size_hint().1.unwrap_or(0);
        let (mut src, mut hashes) = (Vec::with_capacity(most), Vec::with_capacity(most));
        for (i, raw) in keys {
            if let Some(h) = hash(&raw) {
                src.push(i);
                hashes.push(h);
            }
        }
        Side { src, hash: hashes }
    }

    fn frame(self, src_name: &str) -> PolarsResult<LazyFrame> {
        Ok(DataFrame::new(
            self.src.len(),
            vec![
                Column::new(src_name.into(), self.src),
                Column::new("h".into(), self.hash),
            ],
        )?
        .lazy())
    }
}

/// Joins line keys to payment keys on their hashes and keeps the pairs whose keys are equal:
/// `pair(line source, payment source)` says so, returning the (line, payment) they link.
/// Sorted.
fn join_keys(
    lines: Side,
    pays: Side,
    pair: impl Fn(u32, u32) -> Option<(u32, u32)>,
) -> Result<Vec<(u32, u32)>> {
    let df = lines
        .frame("s_src")?
        .join(
            pays.frame("p_src")?,
            [col("h")],
            [col("h")],
            JoinArgs::new(JoinType::Inner),
        )
        .select([col("s_src"), col("p_src")])
        .collect()?;
    let s_src = super::u32s(&df, "s_src")?;
    let p_src = super::u32s(&df, "p_src")?;
    let mut pairs: Vec<(u32, u32)> = s_src
        .into_iter()
        .zip(p_src)
        .filter_map(|(s, p)| pair(s, p))
        .collect();
    // Sorted here, on the join's own thread: the caller only merges.
    pairs.sort_unstable();
    Ok(pairs)
}

/// Whether two raw keys are equal once normalised (equal raw text needs no normalising).
fn same_key(steps: &[Step], a: &str, b: &str) -> bool {
    a == b || normalize::with_applied(steps, a, |a| normalize::with_applied(steps, b, |b| a == b))
}

/// The hash of a raw key once normalised, `None` when that is empty.
fn normalised_hash(steps: &[Step], raw: &str, hash: fn(&str) -> u64) -> Option<u64> {
    normalize::with_applied(steps, raw, |k| (!k.is_empty()).then(|| hash(k)))
}

/// Identifier pass: line reference = payment_id, line provider id = a recorded provider id.
pub(super) fn identifier_pairs(
    payments: &[Payment],
    provider_ids: &[(u32, String)],
    lines: &[StatementLine],
    line_free: &[bool],
    pay_free: &[bool],
    ids: Identifiers,
    steps: &[Step],
) -> Result<Vec<(u32, u32)>> {
    let hashed = |raw: &str| normalised_hash(steps, raw, key_hash);
    // Free lines' keys from one field: (line, raw key).
    fn line_keys<'l, K: std::ops::Deref<Target = str>>(
        lines: &'l [StatementLine],
        line_free: &'l [bool],
        field: impl Fn(&'l StatementLine) -> Option<K> + 'l,
    ) -> impl Iterator<Item = (u32, K)> + 'l {
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| line_free[*i])
            .filter_map(move |(i, l)| field(l).map(|k| (i as u32, k)))
    }
    let by_reference = || -> Result<Vec<(u32, u32)>> {
        if !ids.reference {
            return Ok(Vec::new());
        }
        let ls = Side::new(
            line_keys(lines, line_free, StatementLine::reference),
            hashed,
        );
        let ps = Side::new(
            payments
                .iter()
                .enumerate()
                .filter(|(i, _)| pay_free[*i])
                .map(|(i, p)| (i as u32, p.payment_id.text())),
            hashed,
        );
        join_keys(ls, ps, |l, p| {
            let key = lines[l as usize].reference();
            let key = key.as_deref().unwrap_or("");
            same_key(steps, key, &payments[p as usize].payment_id.text()).then_some((l, p))
        })
    };
    let by_provider_id = || -> Result<Vec<(u32, u32)>> {
        if !ids.provider_txn_id {
            return Ok(Vec::new());
        }
        let ls = Side::new(
            line_keys(lines, line_free, |l| l.provider_txn_id.as_deref()),
            hashed,
        );
        // Ids recorded on the payment row (source: the payment) and on its attempts (source:
        // the number of payments plus the attempt's row); repeats only repeat a pair, and
        // pairs are de-duplicated after the join.
        let n = payments.len() as u32;
        let on_payments = payments
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.provider_payment_id.as_deref().map(|id| (i as u32, id)));
        let on_attempts = provider_ids
            .iter()
            .enumerate()
            .map(|(a, (_, id))| (n + a as u32, id.as_str()));
        let payment_of = |src: u32| match src.checked_sub(n) {
            None => (src, payments[src as usize].provider_payment_id.as_deref()),
            Some(a) => {
                let (p, id) = &provider_ids[a as usize];
                (*p, Some(id.as_str()))
            }
        };
        let ps = Side::new(
            on_payments
                .chain(on_attempts)
                .filter(|&(src, _)| pay_free[payment_of(src).0 as usize]),
            hashed,
        );
        join_keys(ls, ps, |l, src| {
            let key = lines[l as usize].provider_txn_id.as_deref().unwrap_or("");
            let (p, id) = payment_of(src);
            same_key(steps, key, id.unwrap_or("")).then_some((l, p))
        })
    };
    // The two joins are independent; building their keys is single-threaded work, so they
    // run side by side.
    let (out, by_id) = std::thread::scope(|s| {
        let by_id = s.spawn(by_provider_id);
        let out = by_reference();
        (
            out,
            by_id
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e)),
        )
    });
    let mut out = out?;
    out.extend(by_id?);
    // Two sorted runs: the stable sort merges them in linear time.
    out.sort();
    out.dedup();
    // A line that names a payment is its evidence in whichever partition it is booked.
    super::named_wall(&mut out, lines);
    Ok(out)
}

/// Pairs (line, payment) that meet the criterion `fz` ([`Criterion::predicates`] in a
/// `join_where` over frames of the free lines and payments). Sorted and unique.
pub(super) fn fuzzy_pairs(
    payments: &[Payment],
    lines: &[StatementLine],
    line_free: &[bool],
    pay_free: &[bool],
    fz: &Criterion<'_>,
) -> Result<Vec<(u32, u32)>> {
    let mut s_idx = Vec::new();
    let mut s_rcpt = Vec::new();
    let mut s_cur = Vec::new();
    let mut s_amt = Vec::new();
    let mut s_at = Vec::new();
    let mut s_to = Vec::new();
    let by_recipient = fz.compares_recipient();
    for (i, l) in lines.iter().enumerate() {
        // A line without a recipient (a bank fee, a BAI2 entry) is nobody's by recipient: an
        // empty key must not join payments whose recipient is empty too.
        let key = fz.recipient_key(&l.recipient);
        if line_free[i] && fz.line_qualifies(l) && !(by_recipient && key.is_empty()) {
            s_idx.push(i as u32);
            s_rcpt.push(key);
            s_cur.push(l.currency);
            s_amt.push(fz.line_amount(l));
            s_at.push(l.booked_at);
            s_to.push(l.booked_to);
        }
    }
    let mut p_idx = Vec::new();
    let mut p_rcpt = Vec::new();
    let mut p_cur = Vec::new();
    let mut p_amt = Vec::new();
    let mut p_start = Vec::new();
    let spans = fz.spans_earlier_attempts();
    let mut p_first = Vec::new();
    // Without a window in the pairing, a payment never sent can pair too (its `p_start` is
    // then never compared).
    let no_start = (!fz.needs_start()).then_some(0);
    for (i, p) in payments.iter().enumerate() {
        if let (true, Some(start)) = (pay_free[i], p.started_at.or(no_start)) {
            p_idx.push(i as u32);
            p_rcpt.push(fz.recipient_key(&p.recipient));
            p_cur.push(p.currency);
            p_amt.push(p.amount_minor);
            p_start.push(start);
            if spans {
                p_first.push(p.absence_from().unwrap_or(start).min(start));
            }
        }
    }
    if s_idx.is_empty() || p_idx.is_empty() {
        return Ok(Vec::new());
    }
    let ls = DataFrame::new(
        s_idx.len(),
        vec![
            Column::new("s_idx".into(), s_idx),
            Column::new("s_rcpt".into(), s_rcpt),
            Column::new("s_cur".into(), s_cur),
            Column::new("s_amt".into(), s_amt),
            Column::new("s_at".into(), s_at),
            Column::new("s_to".into(), s_to),
        ],
    )?
    .lazy();
    let n_pay = p_idx.len();
    let mut p_cols = vec![
        Column::new("p_idx".into(), p_idx),
        Column::new("p_rcpt".into(), p_rcpt),
        Column::new("p_cur".into(), p_cur),
        Column::new("p_amt".into(), p_amt),
        Column::new("p_start".into(), p_start),
    ];
    if spans {
        p_cols.push(Column::new("p_first".into(), p_first));
    }
    let ps = DataFrame::new(n_pay, p_cols)?.lazy();
    let df = ls
        .join_builder()
        .with(ps)
        .join_where(fz.predicates())
        .select([col("s_idx"), col("p_idx")])
        .collect()?;
    let mut pairs = pairs_of(&df)?;
    super::wall(&mut pairs, payments, lines);
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_keys_link_on_equal_text_even_when_every_hash_collides() {
        // Normalised to upper case: "pay-2" is PAY-2.
        let lines = ["PAY-1", "pay-2", "PAY-3"];
        let pays = ["PAY-2", "PAY-1", "PAY-9"];
        let steps = [Step::Upper];
        for hash in [key_hash as fn(&str) -> u64, |_: &str| 0] {
            let side = |keys: &[&'static str], base: u32| {
                Side::new(
                    keys.iter().enumerate().map(|(i, k)| (base + i as u32, *k)),
                    |k| normalised_hash(&steps, k, hash),
                )
            };
            let got = join_keys(side(&lines, 10), side(&pays, 20), |l, p| {
                same_key(&steps, lines[(l - 10) as usize], pays[(p - 20) as usize])
                    .then_some((l, p))
            })
            .unwrap();
            assert_eq!(got, [(10, 21), (11, 20)]);
        }
    }
}
