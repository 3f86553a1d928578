//! Partitioned nights past one machine (issue 34): `recon run --shard I/N` reconciles the
//! partitions whose stable hash falls to shard I ([`crate::partition`]), and `recon gather`
//! makes the night's one report, one results set and one email from what the shards
//! committed. The engine is Kubernetes (an Indexed Job runs the shards, `deploy/`); the
//! shards meet only in PostgreSQL (run group, run records, locks) and in the output folder.
//!
//! Why the night gathered from N shards is the night one process writes: matching never
//! crosses a partition (the wall, [`crate::matching`]), every source belongs to one partition,
//! and "no line came" is judged on the payment's own partition's sources; so each payment's
//! and each line's row depends only on its partition. The rows are ordered the same way in
//! both (payments by id, then line rows by their source's place in the job file), and the
//! report rows are sorted by the same total order. docs/sharding.md says what is left out.

pub mod gather;
pub mod record;

use crate::config::Config;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::rules::RuleSet;
use crate::store::groups::Group;
use anyhow::Result;

/// A three-way rule pairs one provider source's batches with one bank source's credits: in a
/// partitioned job both must be of one partition (a bank account shared by all partitions
/// is refused: its three-way work would need every shard's lines).
pub fn check_settlements(cfg: &Config, rules: &RuleSet) -> Result<()> {
    if cfg.partition.is_none() {
        return Ok(());
    }
    let part = |name: &str| {
        cfg.sources
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.partition.as_deref())
    };
    for r in &rules.settlements {
        if part(&r.provider) != part(&r.bank) {
            return Err(fail(
                Failure::Config,
                format!(
                    "settlement rule {}: provider source {:?} (partition {:?}) and bank source \
                     {:?} (partition {:?}) are in different partitions: three-way matching \
                     would cross partitions (hint: bind the bank source to the provider's \
                     partition, or run the job without [partition])",
                    r.id,
                    r.provider,
                    part(&r.provider).unwrap_or("-"),
                    r.bank,
                    part(&r.bank).unwrap_or("-")
                ),
            ));
        }
    }
    Ok(())
}

/// A group id is part of folder names and run ids.
pub fn check_group_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 64
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || id.starts_with('.')
    {
        return Err(fail(
            Failure::Config,
            format!("--group {id:?}: use 1 to 64 letters, digits, `-`, `_` or `.`"),
        ));
    }
    Ok(())
}

/// Whether a shard may join the stored group: same night, config and shard count, and the
/// group's as-of (an explicit `--as-of` must be the group's).
pub fn agrees(stored: &Group, wanted: &Group, explicit_as_of: bool) -> Result<()> {
    let differ = |key: &str, a: &str, b: &str| {
        fail(
            Failure::Config,
            format!(
                "run group {}: {key} is {a} for the group but {b} for this shard (hint: every \
                 shard of a night runs with the same job file, rules, --date and shard count; \
                 a re-run with other settings needs another --group)",
                stored.group_id
            ),
        )
    };
    if (&stored.range_from, &stored.range_to) != (&wanted.range_from, &wanted.range_to) {
        return Err(differ("the night", &stored.range_from, &wanted.range_from));
    }
    if stored.config_hash != wanted.config_hash {
        return Err(differ(
            "the config hash (job file + rules)",
            &stored.config_hash,
            &wanted.config_hash,
        ));
    }
    if stored.shards != wanted.shards {
        return Err(differ(
            "the shard count",
            &stored.shards.to_string(),
            &wanted.shards.to_string(),
        ));
    }
    if explicit_as_of && stored.as_of != wanted.as_of {
        return Err(differ("--as-of", &stored.as_of, &wanted.as_of));
    }
    Ok(())
}

/// The run that landed shard `index` of `group` (COMPLETED), if one did.
pub async fn landed(db: &Db, _cfg: &Config, group: &str, index: u32) -> Result<Option<String>> {
    let mut tx = db.begin().await?;
    let runs = tx.shard_runs(group).await?;
    tx.rollback().await?;
    Ok(runs
        .into_iter()
        .find(|r| r.shard == index && r.status == "COMPLETED")
        .map(|r| r.run_id))
}
