//! Positions of items by a text key the items hold themselves: a hash table of 4-byte
//! positions instead of a map that copies or borrows every key. At a million payments the
//! borrowed-key map took 50 MB and the copied-key map of statement ids 33 MB, all of it fresh
//! memory, which is what loading spends most of its time on (the kernel zeroes each new page).

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use std::hash::BuildHasher;

/// Item positions keyed by text that `key_of(position)` reads back from the items. Seeded per
/// process: keys come from provider files.
#[derive(Debug, Clone)]
pub struct KeyIndex {
    table: HashTable<u32>,
    hasher: RandomState,
}

impl KeyIndex {
    /// An empty index with room for `n` keys.
    pub fn with_capacity(n: usize) -> KeyIndex {
        KeyIndex {
            table: HashTable::with_capacity(n),
            hasher: RandomState::default(),
        }
    }

    /// The position of the item whose key is `key`.
    pub fn get<K: std::ops::Deref<Target = str>>(
        &self,
        key: &str,
        key_of: impl Fn(u32) -> K,
    ) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.table.find(hash, |&i| *key_of(i) == *key).copied()
    }

    /// Records item `i` under `key`, unless an item already has that key: then returns that
    /// item's position and records nothing.
    pub fn insert_new<K: std::ops::Deref<Target = str>>(
        &mut self,
        key: &str,
        i: u32,
        key_of: impl Fn(u32) -> K,
    ) -> Option<u32> {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(key);
        match self.table.entry(
            hash,
            |&j| *key_of(j) == *key,
            |&j| hasher.hash_one(&*key_of(j)),
        ) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(v) => {
                v.insert(i);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_key_and_keeps_the_first_of_equal_keys() {
        let keys = ["b", "a", "c", "a", "", "b"];
        let mut ix = KeyIndex::with_capacity(2); // grows past its first capacity
        let first: Vec<Option<u32>> = (0..keys.len() as u32)
            .map(|i| ix.insert_new(keys[i as usize], i, |j| keys[j as usize]))
            .collect();
        assert_eq!(first, [None, None, None, Some(1), None, Some(0)]);
        let at = |k: &str| ix.get(k, |j| keys[j as usize]);
        assert_eq!(
            (at("a"), at("b"), at("c"), at("")),
            (Some(1), Some(0), Some(2), Some(4))
        );
        assert_eq!(at("d"), None);
    }
}
