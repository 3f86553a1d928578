//! Re-delivery: a line an earlier file of the source already delivered is dropped (or, with
//! the same provider id and other content, rejected), and every line without a provider id
//! gets its content id, so a re-delivered file names its lines the same.

use super::{Rejected, SourceLoad, StatementLine};
use compact_str::CompactString;
use std::sync::Arc;

impl SourceLoad {
    /// Adds the lines of one file, dropping re-deliveries of lines already loaded from
    /// earlier files of this source (DESIGN.md rule 4, issue 4 point 5):
    /// - with `ids_unique` (csv/xlsx with a provider id column), a line whose account and
    ///   provider id were loaded before is dropped when its content is the same, and rejected
    ///   when it differs (two different lines cannot share one provider id);
    /// - otherwise (and for lines without an id) lines are compared by content
    ///   ([`StatementLine::fingerprint`]), as multisets: a file that repeats k lines an
    ///   earlier file had adds only what goes beyond them. Identical lines within one file are
    ///   all kept: two equal fees on one day are two fees.
    ///
    /// Returns the number of lines kept and the rejected ones.
    pub fn add(&mut self, lines: Vec<StatementLine>, ids_unique: bool) -> (usize, Vec<Rejected>) {
        use foldhash::{HashMap, HashMapExt};
        // Bring the index up to date with lines loaded without it (the first file).
        let idx = &mut self.dedupe;
        for (i, l) in self.lines.iter().enumerate().skip(idx.indexed) {
            match (&l.provider_txn_id, ids_unique) {
                (Some(id), true) => {
                    idx.by_id.insert((l.origin.account.clone(), id.clone()), i);
                }
                _ => *idx.by_content.entry(l.fingerprint()).or_insert(0) += 1,
            }
        }
        idx.indexed = self.lines.len();
        if self.lines.is_empty() {
            // Nothing loaded yet: nothing to compare with (the index is built on demand).
            let n = lines.len();
            self.lines = lines;
            return (n, Vec::new());
        }
        // Per file: how many loaded copies of a content this file has matched, and how many
        // it added itself (those are not available to its own later lines).
        let mut matched: HashMap<String, usize> = HashMap::new();
        let mut added: HashMap<String, usize> = HashMap::new();
        let mut rejected = Vec::new();
        let mut kept = 0usize;
        for l in lines {
            match (&l.provider_txn_id, ids_unique) {
                (Some(id), true) => {
                    let key = (l.origin.account.clone(), id.clone());
                    if let Some(&i) = idx.by_id.get(&key) {
                        let first = &self.lines[i];
                        if first.content_key() != l.content_key() {
                            rejected.push(Rejected {
                                source: l.source().to_string(),
                                file: l.file().to_string(),
                                line: l.line_no,
                                reason: format!(
                                    "provider_txn_id {id:?} already loaded from {} with different content",
                                    first.position()
                                ),
                            });
                        }
                        continue;
                    }
                    idx.by_id.insert(key, self.lines.len());
                }
                _ => {
                    let fp = l.fingerprint();
                    let loaded = idx.by_content.get(&fp).copied().unwrap_or(0);
                    let own = added.get(&fp).copied().unwrap_or(0);
                    let m = matched.entry(fp.clone()).or_insert(0);
                    if *m < loaded - own {
                        *m += 1;
                        continue;
                    }
                    *idx.by_content.entry(fp.clone()).or_insert(0) += 1;
                    *added.entry(fp).or_insert(0) += 1;
                }
            }
            kept += 1;
            self.lines.push(l);
        }
        idx.indexed = self.lines.len();
        (kept, rejected)
    }
}

/// What [`SourceLoad::add`] has seen, kept between files so each file costs its own size.
#[derive(Debug, Clone, Default)]
pub struct DedupeIndex {
    by_id: foldhash::HashMap<(Option<Arc<str>>, CompactString), usize>,
    by_content: foldhash::HashMap<String, usize>,
    indexed: usize,
}

/// Gives every line without a provider id its content id ([`StatementLine::content_id`]): the
/// first 12 hex digits of its content fingerprint, and `.N` for the N-th line of the same
/// content in the source (two equal fees on one day are two lines). Position plays no part,
/// so a re-delivered or re-ordered file names its lines the same.
pub fn assign_line_ids(lines: &mut [StatementLine]) {
    let mut seen: foldhash::HashMap<u64, u64> = Default::default();
    for l in lines.iter_mut().filter(|l| l.provider_txn_id.is_none()) {
        let fp = l.fingerprint();
        let digest = u64::from_str_radix(&fp[..12], 16).unwrap_or(0);
        let n = seen.entry(digest).or_insert(0);
        *n = (*n + 1).min(0xFFFF);
        l.content_id = (*n << 48) | digest;
    }
}
