//! Which of many statement lines name one of a set of payments, by the keys the identifier
//! passes compare, without a join: how a shard finds, among the lines of the partitions other
//! shards reconcile, the few that name one of its own payments (a line that names a payment is
//! that payment's evidence wherever it is booked: DESIGN.md rule 12, docs/sharding.md).
//!
//! The index holds 64-bit hashes of the normalised keys, per identifier pass, as the pass's
//! hash join does ([`super::frames`]). A hash collision only lets a line through that names
//! nobody: the passes' own join, which compares the keys' text, then decides.

use super::criteria::Criterion;
use crate::ledger::Payment;
use crate::normalize::{self, Step};
use crate::rules::RuleSet;
use crate::sources::StatementLine;
use foldhash::HashSet;

/// The keys of some payments, per identifier pass.
#[derive(Debug, Default)]
pub struct NameIndex {
    passes: Vec<PassKeys>,
}

/// One identifier pass's normalisation and the hashes of the payments' keys it compares.
#[derive(Debug)]
struct PassKeys {
    steps: Vec<Step>,
    /// Hashes of the normalised payment ids (empty when the pass compares no references).
    ids: HashSet<u64>,
    /// Hashes of the normalised provider ids recorded on the payments and their attempts
    /// (empty when the pass compares no provider ids).
    provider_ids: HashSet<u64>,
    references: bool,
    provider_txn_ids: bool,
}

/// The hash of `raw` as `steps` normalise it (`None` when that is empty).
fn hashed(steps: &[Step], raw: &str) -> Option<u64> {
    use std::hash::BuildHasher;
    normalize::with_applied(steps, raw.trim(), |k| {
        (!k.is_empty()).then(|| foldhash::fast::FixedState::with_seed(0x6e61_6d65).hash_one(k))
    })
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
        let passes = rules
            .passes
            .iter()
            .filter_map(|pass| {
                let ids = Criterion::of(pass).named()?;
                let steps = pass.normalize.clone();
                let mut keys = PassKeys {
                    ids: HashSet::default(),
                    provider_ids: HashSet::default(),
                    references: ids.reference,
                    provider_txn_ids: ids.provider_txn_id,
                    steps,
                };
                for (i, p) in payments.iter().enumerate() {
                    if !which(i) {
                        continue;
                    }
                    if ids.reference {
                        keys.ids.extend(hashed(&keys.steps, &p.payment_id.text()));
                    }
                    if ids.provider_txn_id
                        && let Some(id) = p.provider_payment_id.as_deref()
                    {
                        keys.provider_ids.extend(hashed(&keys.steps, id));
                    }
                }
                if ids.provider_txn_id {
                    for (i, id) in provider_ids {
                        if which(*i as usize) {
                            keys.provider_ids.extend(hashed(&keys.steps, id));
                        }
                    }
                }
                Some(keys)
            })
            .collect();
        NameIndex { passes }
    }

    /// Whether no payment's key is in the index.
    pub fn is_empty(&self) -> bool {
        self.passes
            .iter()
            .all(|p| p.ids.is_empty() && p.provider_ids.is_empty())
    }

    /// Whether line `l`'s reference or provider id may name one of the payments: its key, as
    /// an identifier pass normalises it, is one of theirs (or collides with one).
    pub fn may_name(&self, l: &StatementLine) -> bool {
        self.passes.iter().any(|p| {
            (p.references
                && !p.ids.is_empty()
                && l.reference()
                    .and_then(|r| hashed(&p.steps, &r))
                    .is_some_and(|h| p.ids.contains(&h)))
                || (p.provider_txn_ids
                    && !p.provider_ids.is_empty()
                    && l.provider_txn_id
                        .as_deref()
                        .and_then(|id| hashed(&p.steps, id))
                        .is_some_and(|h| p.provider_ids.contains(&h)))
        })
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
        // Another payment's keys (the one `which` left out), and nothing at all.
        assert!(!index.may_name(&line(Some("PAY-8"), None)));
        assert!(!index.may_name(&line(None, Some("pt-8"))));
        assert!(!index.may_name(&line(None, None)));
        assert!(!NameIndex::new(&rules, &[], &[], |_| true).may_name(&line(Some("PAY-7"), None)));
    }
}
