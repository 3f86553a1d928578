//! Sorting large rows by a text key without moving them around during the sort: the sort runs
//! on (16-byte key prefix, position) pairs, and the rows are then moved into place once, along
//! the permutation's cycles. A row of a hundred bytes or more whose key lives on the heap (a
//! UUID does not fit inline) is expensive to compare and to move; a prefix compare settles
//! almost every comparison without touching the row, whatever the key's spelling.

use std::cmp::Ordering;

/// The first 16 bytes of `key`, big-endian, zero-padded: ordering prefixes orders keys, except
/// that keys equal in their first 16 bytes need their full text compared (a key shorter than
/// 16 bytes pads with zeros, which sorts it before every longer key with the same start, as
/// text order does, since text has no NUL bytes to tie with the padding).
fn prefix(key: &str) -> u128 {
    let mut buf = [0u8; 16];
    let n = key.len().min(16);
    buf[..n].copy_from_slice(&key.as_bytes()[..n]);
    u128::from_be_bytes(buf)
}

/// Sorts `rows` by `key(row)` (text order, ties kept in no particular order; keys are meant to
/// be unique).
pub fn sort_by_text_key<T>(rows: &mut [T], key: impl Fn(&T) -> &str) {
    sort_by_prefix(rows, |r| prefix(key(r)), |a, b| key(a).cmp(key(b)));
}

/// Sorts `rows` by the id `key(row)`, in the text order of the ids (as
/// [`sort_by_text_key`] on their text).
pub fn sort_by_id_key<T>(rows: &mut [T], key: impl Fn(&T) -> &crate::model::Id) {
    sort_by_prefix(rows, |r| prefix(&key(r).text()), |a, b| key(a).cmp(key(b)));
}

/// Sorts by `cmp`, of which `prefix_of` orders all but the ties (equal prefixes).
fn sort_by_prefix<T>(
    rows: &mut [T],
    prefix_of: impl Fn(&T) -> u128,
    cmp: impl Fn(&T, &T) -> Ordering,
) {
    let mut order: Vec<(u128, u32)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (prefix_of(r), i as u32))
        .collect();
    order.sort_unstable_by(|(pa, a), (pb, b)| match pa.cmp(pb) {
        Ordering::Equal => cmp(&rows[*a as usize], &rows[*b as usize]),
        other => other,
    });
    let mut from: Vec<u32> = order.into_iter().map(|(_, i)| i).collect();
    permute(rows, &mut from);
}

/// Reorders `items` so that position k holds what was at `from[k]`, by swaps along the
/// permutation's cycles. `from` is left as the identity.
pub fn permute<T>(items: &mut [T], from: &mut [u32]) {
    for start in 0..items.len() {
        let mut k = start;
        while from[k] as usize != start {
            let j = from[k] as usize;
            items.swap(k, j);
            from[k] = k as u32;
            k = j;
        }
        from[k] = k as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_moves_each_item_from_its_source_position() {
        // Two cycles of different lengths and a fixed point.
        let mut items = vec!['a', 'b', 'c', 'd', 'e', 'f'];
        let mut from = vec![2, 0, 1, 3, 5, 4];
        permute(&mut items, &mut from);
        assert_eq!(items, ['c', 'a', 'b', 'd', 'f', 'e']);
        assert_eq!(from, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn rows_come_out_in_text_order_of_their_keys() {
        // Shared 16-byte prefixes, prefixes of each other, UUIDs, upper and lower case.
        let mut keys: Vec<String> = vec![
            "ORDER-2026-11-27-000010".into(),
            "ORDER-2026-11-27-000002".into(),
            "ORDER-2026-11-27".into(),
            "ORDER-2026-11-2".into(),
            "ea590ca0-9d7a-4a7e-9c90-7447621262c5".into(),
            "0c2c1fd6-233c-4b84-bec2-7a3a6b907959".into(),
            "PAY-0000002".into(),
            "PAY-0000010".into(),
            "pay-0000001".into(),
            "".into(),
            "é-accent".into(),
        ];
        for i in 0..200u32 {
            keys.push(format!(
                "{:08x}-same-prefix-{}",
                7,
                i.wrapping_mul(2_654_435_761)
            ));
        }
        let mut want = keys.clone();
        want.sort();
        let mut rows: Vec<(String, usize)> =
            keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
        sort_by_text_key(&mut rows, |r| r.0.as_str());
        let got: Vec<String> = rows.into_iter().map(|r| r.0).collect();
        assert_eq!(got, want);
    }
}
