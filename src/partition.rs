//! Partitioned nights (`[partition]`, issue 34): what splits a night so that no decision
//! ever needs two parts of it, and which shard of `recon run --shard I/N` reconciles which
//! part.
//!
//! A partition is a value of one ledger column (a merchant or provider account), and every
//! statement source is bound to exactly one value (`partition = "…"` on its `[[source]]`).
//! The *wall*: matching pairs a line only with payments of its own partition (identifier and
//! fuzzy passes, near misses, returns), and "no line came" is judged on the coverage of the
//! payment's own partition's sources. So everything recon decides about a payment depends only
//! on its partition's payments and lines, and a shard that loads only some partitions decides
//! exactly what one process that loads all of them decides (docs/sharding.md). A job without
//! `[partition]` has one partition (every id is [`NONE`]) and nothing changes.
//!
//! Partition values become small ids ([`id`]) for the wall: a process-wide table, since the
//! ids are only ever compared within one process.

use crate::exit::{Failure, fail};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, OnceLock};

/// The partition id of everything in a job without `[partition]`.
pub const NONE: u32 = 0;

/// The partition id of the lines of a source shared by all partitions (a bank account that
/// receives every partition's payouts): no payment has it, so the wall keeps them out of every
/// pairing with payments (the `shared` module).
pub const SHARED: u32 = u32::MAX;

/// `[partition]` as validated.
#[derive(Debug, Clone)]
pub struct PartitionConfig {
    /// The ledger column that holds each payment's partition (bundled schema: `merchant_id`;
    /// a custom `payments_query` must return it).
    pub column: String,
    /// Default shard count for `--shards` / `JOB_COMPLETION_INDEX` (None: must be given).
    pub shards: Option<u32>,
    /// Partitions pinned to a shard (a partition too big to share one).
    pub assign: BTreeMap<String, u32>,
    /// Every partition value a source is bound to, sorted.
    pub values: BTreeSet<String>,
    /// Every source's name, in the job file's order (a shard's job keeps only its own
    /// sources; rows are ordered by this whole list).
    pub source_order: Vec<String>,
    /// In a shard's job: the sources bound to the partitions other shards reconcile. The shard
    /// reads them only for the lines that name one of its payments (a line that names a
    /// payment is that payment's evidence wherever it is booked, DESIGN.md rule 12); they
    /// count toward no coverage and no summary. Empty in a whole night's job.
    pub foreign_sources: Vec<crate::sources::config::SourceConfig>,
}

/// `[partition]` as written.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPartition {
    column: String,
    shards: Option<u32>,
    #[serde(default)]
    assign: BTreeMap<String, u32>,
}

impl RawPartition {
    /// Validates `[partition]` against the job's sources: every source is bound to a value but
    /// a bank source shared by all partitions (whose use the rules check:
    /// `RuleSet::for_job`), assignments name bound values and fit the shard count.
    pub(crate) fn validate(
        self,
        path: &std::path::Path,
        sources: &[crate::sources::config::SourceConfig],
    ) -> anyhow::Result<PartitionConfig> {
        let err = |m: String| crate::sources::keys::config_error(path, m);
        let ident = |s: &str| {
            let mut c = s.chars();
            c.next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        };
        if !ident(&self.column) {
            return Err(err(format!(
                "key `partition.column`: {:?} is not a column name (letters, digits, `_`)",
                self.column
            )));
        }
        if self.shards == Some(0) {
            return Err(err("key `partition.shards`: must be at least 1".into()));
        }
        let mut values = BTreeSet::new();
        for (i, s) in sources.iter().enumerate() {
            match s.partition.as_deref() {
                Some(v) if !v.trim().is_empty() => {
                    values.insert(v.to_string());
                }
                Some(_) => {
                    return Err(err(format!(
                        "key `source[{i}].partition` (source {:?}): must not be empty",
                        s.name
                    )));
                }
                // A bank source may be shared by all partitions, as the bank side of
                // settlement rules only: checked with the rules (`RuleSet::for_job`).
                None if s.role == crate::model::Role::Bank => {}
                None => {
                    return Err(err(format!(
                        "key `source[{i}].partition` is missing (source {:?}): a partitioned job \
                         needs every provider source bound to the one partition its lines \
                         belong to, so that no match crosses partitions (hint: one [[source]] \
                         per partition, or run the job without [partition]; only a bank source \
                         that receives payouts may be shared by all partitions)",
                        s.name
                    )));
                }
            }
        }
        for (v, &shard) in &self.assign {
            if !values.contains(v) {
                return Err(err(format!(
                    "key `partition.assign.{v}`: no source is bound to partition {v:?}"
                )));
            }
            if let Some(n) = self.shards
                && shard >= n
            {
                return Err(err(format!(
                    "key `partition.assign.{v}`: shard {shard} does not exist with \
                     `partition.shards` = {n} (shards are numbered from 0)"
                )));
            }
        }
        Ok(PartitionConfig {
            column: self.column,
            shards: self.shards,
            assign: self.assign,
            values,
            source_order: sources.iter().map(|s| s.name.clone()).collect(),
            foreign_sources: Vec::new(),
        })
    }
}

/// Rejects a source bound to a partition in a job without `[partition]` (a forgotten section
/// would otherwise silently let matches cross).
pub(crate) fn check_unpartitioned(
    path: &std::path::Path,
    sources: &[crate::sources::config::SourceConfig],
) -> anyhow::Result<()> {
    match sources.iter().position(|s| s.partition.is_some()) {
        Some(i) => Err(crate::sources::keys::config_error(
            path,
            format!(
                "key `source[{i}].partition`: the job has no [partition] section (hint: add \
                 [partition] with the ledger column that holds each payment's partition)"
            ),
        )),
        None => Ok(()),
    }
}

/// Shard `index` of `count` (`--shard I/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// 0-based index.
    pub index: u32,
    /// How many shards the night has.
    pub count: u32,
}

impl Shard {
    /// Parses `I/N`.
    pub fn parse(text: &str) -> anyhow::Result<Shard> {
        let bad = || {
            fail(
                Failure::Config,
                format!("--shard {text:?}: expected I/N with 0 ≤ I < N, e.g. 2/4"),
            )
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse::<u32>().map_err(|_| bad())?,
            n.trim().parse::<u32>().map_err(|_| bad())?,
        );
        Shard::new(index, count).ok_or_else(bad)
    }

    /// Shard `index` of `count`, if it exists.
    pub fn new(index: u32, count: u32) -> Option<Shard> {
        (count > 0 && index < count).then_some(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// FNV-1a (64 bit) of the value's UTF-8 bytes: stable across processes, machines and
/// versions (a shard's partitions must not move between a night's shards).
pub fn stable_hash(value: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in value.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl PartitionConfig {
    /// The shard that reconciles partition `value`: its assignment, else its stable hash
    /// modulo `count`. A payment whose partition no source is bound to (it has no evidence
    /// anywhere) is shard 0's.
    pub fn shard_of(&self, value: &str, count: u32) -> u32 {
        if !self.values.contains(value) {
            return 0;
        }
        match self.assign.get(value) {
            Some(&s) if s < count => s,
            _ => (stable_hash(value) % u64::from(count)) as u32,
        }
    }

    /// The partitions shard `shard` reconciles (sorted).
    pub fn values_of(&self, shard: Shard) -> Vec<&str> {
        self.values
            .iter()
            .filter(|v| self.shard_of(v, shard.count) == shard.index)
            .map(String::as_str)
            .collect()
    }

    /// Checks an assignment against the shard count of a run.
    pub fn check_shard(&self, shard: Shard) -> anyhow::Result<()> {
        if let Some((v, s)) = self.assign.iter().find(|(_, s)| **s >= shard.count) {
            return Err(fail(
                Failure::Config,
                format!(
                    "key `partition.assign.{v}`: shard {s} does not exist in a night of {} \
                     shard(s)",
                    shard.count
                ),
            ));
        }
        Ok(())
    }

    /// The SQL expression of a payment's partition (NULL is the empty value).
    pub fn sql_value(&self) -> String {
        format!("coalesce(CAST({} AS text), '')", self.column)
    }

    /// What the ledger load of shard `shard` selects (None: every payment). A shard's filter
    /// is PostgreSQL's SQL (shards need PostgreSQL): the partition compared as bytes
    /// (`COLLATE "C"`, the order Rust sorts [`PartitionConfig::values`] in, and the expression
    /// of the index `payments_partition_started`), so each shard's rows are index ranges.
    /// Shard 0 also takes the payments of no bound partition: the ranges between the bound
    /// values (an index can serve them, where `NOT IN` reads the whole night), and `NOT IN`
    /// besides, so no bound value can slip in whatever the ranges.
    pub fn select(&self, shard: Option<Shard>) -> Select {
        let expr = self.sql_value();
        let filter = shard.map(|shard| {
            let bytes = format!("{expr} COLLATE \"C\"");
            let lit = |v: &str| format!("'{}'", v.replace('\'', "''"));
            let list = |vs: &[&str]| vs.iter().map(|v| lit(v)).collect::<Vec<_>>().join(", ");
            let mine = self.values_of(shard);
            let own = if mine.is_empty() {
                "1 = 0".to_string()
            } else {
                format!("{bytes} IN ({})", list(&mine))
            };
            if shard.index != 0 {
                return own;
            }
            let all: Vec<&str> = self.values.iter().map(String::as_str).collect();
            let (Some(first), Some(last)) = (all.first(), all.last()) else {
                return "1 = 1".to_string();
            };
            let mut gaps = vec![format!("{bytes} < {}", lit(first))];
            for w in all.windows(2) {
                gaps.push(format!(
                    "({bytes} > {} AND {bytes} < {})",
                    lit(w[0]),
                    lit(w[1])
                ));
            }
            gaps.push(format!("{bytes} > {}", lit(last)));
            format!(
                "({own} OR (({}) AND {bytes} NOT IN ({})))",
                gaps.join(" OR "),
                list(&all)
            )
        });
        Select {
            column: expr,
            filter,
            shard,
        }
    }

    /// The position of source `name` in the job file (unknown names last).
    pub fn source_index(&self, name: &str) -> usize {
        self.source_order
            .iter()
            .position(|s| s == name)
            .unwrap_or(usize::MAX)
    }

    /// Which partition ids ([`id`]) shard `shard` reconciles: see [`Mine`].
    pub fn mine(&self, shard: Shard) -> Mine {
        Mine {
            bound: self
                .values
                .iter()
                .map(|v| (id(v), self.in_shard(v, shard)))
                .collect(),
            unbound: shard.index == 0,
        }
    }

    /// Whether a payment of partition `value` belongs to `shard`.
    pub fn in_shard(&self, value: &str, shard: Shard) -> bool {
        self.shard_of(value, shard.count) == shard.index
    }
}

/// The partitions one shard reconciles, by id ([`id`]): of the partitions a source is bound
/// to, those the shard falls to; of any other value (a payment whose partition no source
/// names), shard 0 reconciles them.
#[derive(Debug, Clone, Default)]
pub struct Mine {
    /// Every bound partition's id, and whether the shard reconciles it.
    bound: HashMap<u32, bool>,
    /// Whether the shard reconciles the partitions no source is bound to (shard 0).
    unbound: bool,
}

impl Mine {
    /// Whether the shard reconciles partition `id` ([`SHARED`] is nobody's).
    pub fn contains(&self, id: u32) -> bool {
        id != SHARED && self.bound.get(&id).copied().unwrap_or(self.unbound)
    }
}

/// What a partitioned ledger load selects: the partition expression as an extra column, and
/// the shard's filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select {
    /// SQL expression of a payment's partition value.
    pub column: String,
    /// SQL condition a shard's payments meet (None: all).
    pub filter: Option<String>,
    /// The shard.
    pub shard: Option<Shard>,
}

impl Select {
    /// `AND <filter>` for a WHERE clause, or nothing.
    pub fn and_filter(&self) -> String {
        self.filter
            .as_deref()
            .map(|f| format!(" AND {f}"))
            .unwrap_or_default()
    }
}

/// Partition value → id, and id → value.
type Table = (HashMap<String, u32>, Vec<String>);

fn table() -> &'static Mutex<Table> {
    static T: OnceLock<Mutex<Table>> = OnceLock::new();
    T.get_or_init(|| Mutex::new((HashMap::new(), vec![String::new()])))
}

/// The id of partition `value` in this process (never [`NONE`]).
pub fn id(value: &str) -> u32 {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = t.0.get(value) {
        return i;
    }
    let i = t.1.len() as u32;
    t.1.push(value.to_string());
    t.0.insert(value.to_string(), i);
    i
}

/// The value of partition id `id` ("" for [`NONE`] or an unknown id).
pub fn value(id: u32) -> String {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    if id == NONE {
        return String::new();
    }
    t.1.get(id as usize).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(values: &[&str], assign: &[(&str, u32)]) -> PartitionConfig {
        PartitionConfig {
            column: "merchant_id".into(),
            shards: None,
            assign: assign.iter().map(|(v, s)| (v.to_string(), *s)).collect(),
            values: values.iter().map(|v| v.to_string()).collect(),
            source_order: Vec::new(),
            foreign_sources: Vec::new(),
        }
    }

    #[test]
    fn every_partition_falls_to_exactly_one_shard_and_assignments_win() {
        let c = cfg(&["M01", "M02", "M03", "M04", "M05"], &[("M03", 2)]);
        for n in 1..=5 {
            let mut seen = BTreeSet::new();
            for i in 0..n {
                for v in c.values_of(Shard::new(i, n).unwrap()) {
                    assert!(seen.insert(v.to_string()), "{v} twice with {n} shards");
                }
            }
            assert_eq!(seen.len(), 5, "{n} shards");
        }
        assert_eq!(c.shard_of("M03", 4), 2);
        assert_eq!(
            c.shard_of("unbound", 4),
            0,
            "values without a source go to shard 0"
        );
    }

    #[test]
    fn a_shard_reconciles_its_partitions_and_shard_zero_the_unbound_ones() {
        let c = cfg(&["M01", "M02"], &[("M01", 0), ("M02", 1)]);
        let (zero, one) = (
            c.mine(Shard::new(0, 2).unwrap()),
            c.mine(Shard::new(1, 2).unwrap()),
        );
        let (m1, m2, stray) = (id("M01"), id("M02"), id("no source names me"));
        assert!(zero.contains(m1) && !zero.contains(m2) && zero.contains(stray));
        assert!(!one.contains(m1) && one.contains(m2) && !one.contains(stray));
        assert!(!zero.contains(SHARED) && !one.contains(SHARED));
    }

    #[test]
    fn the_hash_is_fixed_so_shards_agree_across_versions() {
        // FNV-1a 64 test vectors.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn shard_text_is_checked() {
        assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
        for bad in ["4/4", "1", "a/2", "0/0", "-1/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_shard_filter_quotes_values_and_shard_zero_takes_the_unbound() {
        let c = cfg(&["O'Brien", "M02"], &[("O'Brien", 1), ("M02", 0)]);
        let s1 = c.select(Some(Shard::new(1, 2).unwrap()));
        let v = "coalesce(CAST(merchant_id AS text), '') COLLATE \"C\"";
        assert_eq!(s1.filter.as_deref(), Some(&*format!("{v} IN ('O''Brien')")));
        let s0 = c.select(Some(Shard::new(0, 2).unwrap()));
        // Its own, or between/around the bound values (in byte order) and none of them.
        assert_eq!(
            s0.filter.as_deref(),
            Some(&*format!(
                "({v} IN ('M02') OR (({v} < 'M02' OR ({v} > 'M02' AND {v} < 'O''Brien') OR \
                 {v} > 'O''Brien') AND {v} NOT IN ('M02', 'O''Brien')))"
            ))
        );
        assert_eq!(c.select(None).filter, None);
    }
}
