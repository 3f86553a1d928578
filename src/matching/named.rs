//! Which of many statement lines name one of a set of payments, by the keys the identifier
//! passes compare, without a join: how a shard finds, among the lines of the partitions other
//! shards reconcile, the few that name one of its own payments (a line that names a payment is
//! that payment's evidence wherever it is booked: DESIGN.md rule 12, docs/sharding.md).
//!
//! Keys are 64-bit hashes of the normalised identifiers, per identifier pass, as the pass's
//! hash join compares them (`frames.rs`). A hash collision only lets a line through that
//! names nobody: the passes' own join, which compares the keys' text, then decides. A line's
//! keys can be kept instead of the line ([`Keyer`]): 16 bytes per identifier pass.

use super::criteria::Criterion;
use crate::ledger::Payment;
use crate::normalize::{self, Step};
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use foldhash::HashSet;

/// The key of `raw` as `steps` normalise it; 0 when that is empty (a real key is never 0).
fn hashed(steps: &[Step], raw: &str) -> u64 {
    use std::hash::BuildHasher;
    normalize::with_applied(steps, raw.trim(), |k| {
        if k.is_empty() {
            0
        } else {
            foldhash::fast::FixedState::with_seed(0x6e61_6d65).hash_one(k) | 1
        }
    })
}

/// How the identifier passes of a rule set key a line: per pass, its normalisation and which
/// identifiers it compares.
#[derive(Debug, Clone, Default)]
pub struct Keyer {
    passes: Vec<(Vec<Step>, bool, bool)>,
}

impl Keyer {
    /// The identifier passes of `rules`, in order.
    pub fn new(rules: &RuleSet) -> Keyer {
        Keyer {
            passes: rules
                .passes
                .iter()
                .filter_map(|pass| {
                    let ids = Criterion::of(pass).named()?;
                    Some((pass.normalize.clone(), ids.reference, ids.provider_txn_id))
                })
                .collect(),
        }
    }

    /// How many keys [`Keyer::push`] appends per line: two per identifier pass.
    pub fn width(&self) -> usize {
        2 * self.passes.len()
    }

    /// Appends line `l`'s keys: per identifier pass its reference's and its provider id's
    /// (0: none, or not compared by the pass).
    pub fn push(&self, l: &StatementLine, out: &mut Vec<u64>) {
        for (steps, references, provider_ids) in &self.passes {
            out.push(match (references, l.reference()) {
                (true, Some(r)) => hashed(steps, &r),
                _ => 0,
            });
            out.push(match (provider_ids, l.provider_txn_id.as_deref()) {
                (true, Some(id)) => hashed(steps, id),
                _ => 0,
            });
        }
    }
}

impl Keyer {
    /// Whether line `l`, which an identifier pass paired with payment `p` (`attempts`: the
    /// provider ids recorded on its attempts), carries an identifier that does not name `p`
    /// (a reference that is not its id, a provider id it has not recorded): that identifier may
    /// name another payment.
    pub fn names_another(&self, l: &StatementLine, p: &Payment, attempts: &[&str]) -> bool {
        self.passes.iter().any(|(steps, references, provider_ids)| {
            let other_reference = *references
                && l.reference().is_some_and(|r| {
                    let k = hashed(steps, &r);
                    k != 0 && k != hashed(steps, &p.payment_id.text())
                });
            let other_id = *provider_ids
                && l.provider_txn_id.as_deref().is_some_and(|id| {
                    let k = hashed(steps, id);
                    k != 0
                        && !p
                            .provider_payment_id
                            .as_deref()
                            .into_iter()
                            .chain(attempts.iter().copied())
                            .any(|r| hashed(steps, r) == k)
                });
            other_reference || other_id
        })
    }
}

/// The keys of some payments, per identifier pass.
#[derive(Debug, Default)]
pub struct NameIndex {
    keyer: Keyer,
    /// Per identifier pass: the payments' ids, and their recorded provider ids.
    keys: Vec<(HashSet<u64>, HashSet<u64>)>,
}

impl NameIndex {
    /// The keys of the payments `which` accepts (`provider_ids`: the provider ids recorded on
    /// attempts, by payment index), for every identifier pass of `rules`.
    pub fn new(
        rules: &RuleSet,
        payments: &[Payment],
        provider_ids: &[(u32, String)],
        which: impl Fn(usize) -> bool,
    ) -> NameIndex {
        let keyer = Keyer::new(rules);
        let keys = keyer
            .passes
            .iter()
            .map(|(steps, references, ids)| {
                let (mut by_id, mut by_provider_id) = (HashSet::default(), HashSet::default());
                let chosen = payments
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| which(*i))
                    .map(|(_, p)| p);
                for p in chosen {
                    if *references {
                        by_id.insert(hashed(steps, &p.payment_id.text()));
                    }
                    if *ids && let Some(id) = p.provider_payment_id.as_deref() {
                        by_provider_id.insert(hashed(steps, id));
                    }
                }
                if *ids {
                    for (i, id) in provider_ids {
                        if which(*i as usize) {
                            by_provider_id.insert(hashed(steps, id));
                        }
                    }
                }
                by_id.remove(&0);
                by_provider_id.remove(&0);
                (by_id, by_provider_id)
            })
            .collect();
        NameIndex { keyer, keys }
    }

    /// Whether no payment's key is in the index.
    pub fn is_empty(&self) -> bool {
        self.keys.iter().all(|(a, b)| a.is_empty() && b.is_empty())
    }

    /// Whether a line with `keys` ([`Keyer::push`] of the same rules) may name one of the
    /// payments: one of its keys is one of theirs (or collides with one).
    pub fn names(&self, keys: &[u64]) -> bool {
        self.keys
            .iter()
            .zip(keys.chunks_exact(2))
            .any(|((ids, provider_ids), k)| {
                (k[0] != 0 && ids.contains(&k[0])) || (k[1] != 0 && provider_ids.contains(&k[1]))
            })
    }

    /// Whether line `l` may name one of the payments (see [`NameIndex::names`]).
    pub fn may_name(&self, l: &StatementLine) -> bool {
        let mut keys = Vec::with_capacity(self.keyer.width());
        self.keyer.push(l, &mut keys);
        self.names(&keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::kinds::testkit;

    #[test]
    fn a_line_is_found_by_either_identifier_as_the_pass_normalises_it() {
        let rules = RuleSet::compile(&[("d.toml".into(), crate::rules::DEFAULT_RULES.into())])
            .expect("rules");
        let mut p = testkit::payment("PAY-7", "R", 1000, "EUR");
        p.provider_payment_id = Some("pt-7".into());
        let other = testkit::payment("PAY-8", "R", 1000, "EUR");
        let attempts = [(1u32, "pt-8".to_string())];
        let index = NameIndex::new(&rules, &[p, other], &attempts, |i| i == 0);
        let line = |reference: Option<&str>, id: Option<&str>| {
            let mut l = testkit::line("R", 1000, "EUR", 0);
            l.reference = reference.map(crate::model::Id::new);
            l.provider_txn_id = id.map(Into::into);
            l
        };
        // The default identifier pass upper-cases and drops spaces.
        assert!(index.may_name(&line(Some("pay-7"), None)));
        assert!(index.may_name(&line(Some(" pay -7 "), None)));
        assert!(index.may_name(&line(None, Some("PT-7"))));
        // Kept as keys, the line is found the same way.
        let keyer = Keyer::new(&rules);
        let mut keys = Vec::new();
        keyer.push(&line(Some("x"), Some("pt -7")), &mut keys);
        assert_eq!(keys.len(), keyer.width());
        assert!(index.names(&keys));
        // A line paired with PAY-7 by its reference whose provider id is not PAY-7's.
        let seven = testkit::payment("PAY-7", "R", 1000, "EUR");
        assert!(keyer.names_another(&line(Some("PAY-7"), Some("pt-9")), &seven, &[]));
        assert!(!keyer.names_another(&line(Some("PAY-7"), Some("pt-9")), &seven, &["PT-9"]));
        assert!(!keyer.names_another(&line(Some("pay-7"), None), &seven, &[]));
        assert!(keyer.names_another(&line(Some("PAY-8"), Some("pt-9")), &seven, &["pt-9"]));
        // Another payment's keys (the one `which` left out), and nothing at all.
        assert!(!index.may_name(&line(Some("PAY-8"), None)));
        assert!(!index.may_name(&line(None, Some("pt-8"))));
        assert!(!index.may_name(&line(None, None)));
        assert!(!index.may_name(&line(Some(""), Some(" "))));
        assert!(!NameIndex::new(&rules, &[], &[], |_| true).may_name(&line(Some("PAY-7"), None)));
    }
}
