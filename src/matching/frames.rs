//! Canonical frames for one pass and the Polars joins that produce candidate pairs.

use super::pairs_of;
use crate::ledger::Payment;
use crate::normalize::{self, Step};
use crate::rules::Identifiers;
use crate::sources::StatementLine;
use crate::timeparse::Micros;
use anyhow::Result;
use polars::prelude::*;
use std::borrow::Cow;

/// The hash identifier keys are joined on.
fn key_hash(key: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x0072_6563_6f6e).hash_one(key)
}

/// One side of an identifier join: each key's row number and the 64-bit hash of the key.
/// Joining on the hash instead of the text is faster in Polars (no string columns to build or
/// compare); every joined pair is then checked on the text itself, so a hash collision can
/// never link anything.
fn hashed_frame(
    row_name: &str,
    keys: &[Cow<'_, str>],
    hash: fn(&str) -> u64,
) -> PolarsResult<LazyFrame> {
    let rows: Vec<u32> = (0..keys.len() as u32).collect();
    let hashes: Vec<u64> = keys.iter().map(|k| hash(k)).collect();
    Ok(DataFrame::new(
        keys.len(),
        vec![
            Column::new(row_name.into(), rows),
            Column::new("h".into(), hashes),
        ],
    )?
    .lazy())
}

/// Joins line keys to payment keys on equal text: (line, payment) for every equal pair, sorted.
fn join_keys(
    (li, lk): (&[u32], &[Cow<'_, str>]),
    (pi, pk): (&[u32], &[Cow<'_, str>]),
    hash: fn(&str) -> u64,
) -> Result<Vec<(u32, u32)>> {
    let df = hashed_frame("s_row", lk, hash)?
        .join(
            hashed_frame("p_row", pk, hash)?,
            [col("h")],
            [col("h")],
            JoinArgs::new(JoinType::Inner),
        )
        .select([col("s_row"), col("p_row")])
        .collect()?;
    let s_rows = super::u32s(&df, "s_row")?;
    let p_rows = super::u32s(&df, "p_row")?;
    let mut pairs: Vec<(u32, u32)> = s_rows
        .into_iter()
        .zip(p_rows)
        .map(|(s, p)| (s as usize, p as usize))
        .filter(|&(s, p)| lk[s] == pk[p])
        .map(|(s, p)| (li[s], pi[p]))
        .collect();
    // Sorted here, on the join's own thread: the caller only merges.
    pairs.sort_unstable();
    Ok(pairs)
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
    let norm = |s| normalize::apply(steps, s);
    // Free lines' non-empty keys from one field: (line, normalised key).
    let line_keys = |field: fn(&StatementLine) -> Option<&str>| -> (Vec<u32>, Vec<Cow<'_, str>>) {
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| line_free[*i])
            .filter_map(|(i, l)| field(l).map(|k| (i as u32, norm(k))))
            .filter(|(_, k)| !k.is_empty())
            .unzip()
    };
    let by_reference = || -> Result<Vec<(u32, u32)>> {
        if !ids.reference {
            return Ok(Vec::new());
        }
        let (li, lk) = line_keys(|l| l.reference.as_deref());
        let (pi, pk): (Vec<u32>, Vec<Cow<'_, str>>) = payments
            .iter()
            .enumerate()
            .filter(|(i, _)| pay_free[*i])
            .map(|(i, p)| (i as u32, norm(&p.payment_id)))
            .unzip();
        join_keys((&li, &lk), (&pi, &pk), key_hash)
    };
    let by_provider_id = || -> Result<Vec<(u32, u32)>> {
        if !ids.provider_txn_id {
            return Ok(Vec::new());
        }
        let (li, lk) = line_keys(|l| l.provider_txn_id.as_deref());
        // Ids recorded on the payment row and on its attempts; repeats only repeat a pair,
        // and pairs are de-duplicated after the join.
        let on_payments = payments
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.provider_payment_id.as_deref().map(|id| (i as u32, id)));
        let on_attempts = provider_ids.iter().map(|(i, id)| (*i, id.as_str()));
        let (pi, pk): (Vec<u32>, Vec<Cow<'_, str>>) = on_payments
            .chain(on_attempts)
            .filter(|(i, _)| pay_free[*i as usize])
            .map(|(i, id)| (i, norm(id)))
            .filter(|(_, k)| !k.is_empty())
            .unzip();
        join_keys((&li, &lk), (&pi, &pk), key_hash)
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
    Ok(out)
}

/// Fuzzy pass: equal recipient and currency, amount equal (or within `tolerance`), booked in
/// `[started_at - before, started_at + after]`. `tolerance = None` ignores the amount (the
/// near-miss gate).
pub(super) fn fuzzy_pairs(
    payments: &[Payment],
    lines: &[StatementLine],
    line_free: &[bool],
    pay_free: &[bool],
    steps: &[Step],
    (before, after): (Micros, Micros),
    tolerance: Option<i64>,
) -> Result<Vec<(u32, u32)>> {
    let norm = |s| normalize::apply(steps, s);
    let mut s_idx = Vec::new();
    let mut s_rcpt = Vec::new();
    let mut s_cur = Vec::new();
    let mut s_amt = Vec::new();
    let mut s_at = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if line_free[i] {
            s_idx.push(i as u32);
            s_rcpt.push(norm(&l.recipient));
            s_cur.push(l.currency);
            s_amt.push(l.ledger_amount());
            s_at.push(l.booked_at);
        }
    }
    let mut p_idx = Vec::new();
    let mut p_rcpt = Vec::new();
    let mut p_cur = Vec::new();
    let mut p_amt = Vec::new();
    let mut p_start = Vec::new();
    for (i, p) in payments.iter().enumerate() {
        if let (true, Some(start)) = (pay_free[i], p.started_at) {
            p_idx.push(i as u32);
            p_rcpt.push(norm(&p.recipient));
            p_cur.push(p.currency);
            p_amt.push(p.amount_minor);
            p_start.push(start);
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
        ],
    )?
    .lazy();
    let ps = DataFrame::new(
        p_idx.len(),
        vec![
            Column::new("p_idx".into(), p_idx),
            Column::new("p_rcpt".into(), p_rcpt),
            Column::new("p_cur".into(), p_cur),
            Column::new("p_amt".into(), p_amt),
            Column::new("p_start".into(), p_start),
        ],
    )?
    .lazy();
    let mut preds = vec![
        col("s_rcpt").eq(col("p_rcpt")),
        col("s_cur").eq(col("p_cur")),
    ];
    match tolerance {
        Some(0) => preds.push(col("s_amt").eq(col("p_amt"))),
        Some(t) => {
            preds.push(col("s_amt").gt_eq(col("p_amt") - lit(t)));
            preds.push(col("s_amt").lt_eq(col("p_amt") + lit(t)));
        }
        None => {}
    }
    preds.push(col("s_at").gt_eq(col("p_start") - lit(before)));
    preds.push(col("s_at").lt_eq(col("p_start") + lit(after)));
    let df = ls
        .join_builder()
        .with(ps)
        .join_where(preds)
        .select([col("s_idx"), col("p_idx")])
        .collect()?;
    pairs_of(&df)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[&'static str]) -> Vec<Cow<'static, str>> {
        v.iter().map(|k| Cow::Borrowed(*k)).collect()
    }

    #[test]
    fn identifier_keys_link_on_equal_text_even_when_every_hash_collides() {
        let lines = keys(&["PAY-1", "PAY-2", "PAY-3"]);
        let pays = keys(&["PAY-2", "PAY-1", "PAY-9"]);
        let (li, pi) = ([10, 11, 12], [20, 21, 22]);
        for hash in [key_hash as fn(&str) -> u64, |_: &str| 0] {
            let mut got = join_keys((&li, &lines), (&pi, &pays), hash).unwrap();
            got.sort_unstable();
            assert_eq!(got, [(10, 21), (11, 20)]);
        }
    }
}
