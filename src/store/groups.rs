//! Run groups (`recon_run_groups`, `recon_run_shards`): the shards of one partitioned night
//! and what they must agree on (see docs/sharding.md); what each shard handed the gather
//! (`recon_shard_handover`, sealed when the shard commits); why the night's last gather failed.

use super::{Tx, db_err};
use anyhow::Result;

/// A night's run group as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its id (`--group`, default the night's date).
    pub group_id: String,
    /// First day.
    pub range_from: String,
    /// Last day.
    pub range_to: String,
    /// The as-of every shard runs with (RFC 3339): fixed by the first shard.
    pub as_of: String,
    /// Hash of the job file and rules every shard must run with.
    pub config_hash: String,
    /// How many shards the night has.
    pub shards: u32,
    /// When the gather wrote the night's report (None: not yet).
    pub gathered_at: Option<String>,
    /// The gather's folder.
    pub gather_folder: Option<String>,
    /// Why the last gather of the night failed (None: none failed since the last that
    /// completed it).
    pub gather_error: Option<String>,
}

/// One file a shard handed the gather, as the shard wrote it (sealed in the transaction that
/// committed the shard's effects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverFile {
    /// Its name in the shard's output folder.
    pub file: String,
    /// sha256 of its bytes, lowercase hex.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// One shard run of a group: its latest attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRunRecord {
    /// Shard index.
    pub shard: u32,
    /// The run.
    pub run_id: String,
    /// RUNNING, COMPLETED or FAILED.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
}

impl Tx {
    /// Creates the group unless it exists; returns it as stored and whether this call made it.
    pub async fn join_group(&mut self, g: &Group, now: &str) -> Result<(Group, bool)> {
        let mut q = self.sql(
            "INSERT INTO recon_run_groups (group_id, range_from, range_to, as_of, config_hash,
                                           shards, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (group_id) DO NOTHING",
        );
        q.bind(g.group_id.as_str())
            .bind(g.range_from.as_str())
            .bind(g.range_to.as_str())
            .bind(g.as_of.as_str())
            .bind(g.config_hash.as_str())
            .bind(i64::from(g.shards))
            .bind(now);
        let created = self
            .execute(q)
            .await
            .map_err(db_err("creating the run group"))?
            > 0;
        let stored = self
            .group(&g.group_id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("run group {} vanished", g.group_id))?;
        Ok((stored, created))
    }

    /// The group `group_id`, if it exists.
    pub async fn group(&mut self, group_id: &str) -> Result<Option<Group>> {
        let mut q = self.sql(
            "SELECT group_id, range_from, range_to, as_of, config_hash, shards, gathered_at,
                    gather_folder, gather_error
             FROM recon_run_groups WHERE group_id = $1",
        );
        q.bind(group_id);
        self.fetch_optional(q, |r| {
            Ok(Group {
                group_id: r.text(0)?,
                range_from: r.text(1)?,
                range_to: r.text(2)?,
                as_of: r.text(3)?,
                config_hash: r.text(4)?,
                shards: u32::try_from(r.int(5)?).unwrap_or(0),
                gathered_at: r.opt_text(6)?,
                gather_folder: r.opt_text(7)?,
                gather_error: r.opt_text(8)?,
            })
        })
        .await
        .map_err(db_err("reading the run group"))
    }

    /// Records that run `run_id` is shard `shard` of `group_id`.
    pub async fn add_shard_run(&mut self, group_id: &str, shard: u32, run_id: &str) -> Result<()> {
        let mut q =
            self.sql("INSERT INTO recon_run_shards (run_id, group_id, shard) VALUES ($1, $2, $3)");
        q.bind(run_id).bind(group_id).bind(i64::from(shard));
        self.execute(q)
            .await
            .map_err(db_err("recording the shard run"))?;
        Ok(())
    }

    /// The run group run `run_id` is a shard of, if it is one.
    pub async fn group_of_run(&mut self, run_id: &str) -> Result<Option<String>> {
        let mut q = self.sql("SELECT group_id FROM recon_run_shards WHERE run_id = $1");
        q.bind(run_id);
        self.fetch_optional(q, |r| r.text(0))
            .await
            .map_err(db_err("reading the shard run's group"))
    }

    /// Every run of the group's shards, oldest first.
    pub async fn shard_runs(&mut self, group_id: &str) -> Result<Vec<ShardRunRecord>> {
        let mut q = self.sql(
            "SELECT s.shard, r.run_id, r.status, r.error FROM recon_run_shards s
             JOIN recon_runs r ON r.run_id = s.run_id
             WHERE s.group_id = $1 ORDER BY r.started_at, r.run_id",
        );
        q.bind(group_id);
        self.fetch_all(q, |r| {
            Ok(ShardRunRecord {
                shard: u32::try_from(r.int(0)?).unwrap_or(u32::MAX),
                run_id: r.text(1)?,
                status: r.text(2)?,
                error: r.opt_text(3)?,
            })
        })
        .await
        .map_err(db_err("reading the shard runs"))
    }

    /// Marks the group gathered into `folder` (and forgets why an earlier gather failed).
    pub async fn mark_gathered(&mut self, group_id: &str, folder: &str, now: &str) -> Result<()> {
        let mut q = self.sql(
            "UPDATE recon_run_groups SET gathered_at = $1, gather_folder = $2, gather_error = NULL,
                                         gather_failed_at = NULL
             WHERE group_id = $3",
        );
        q.bind(now).bind(folder).bind(group_id);
        self.execute(q)
            .await
            .map_err(db_err("marking the run group gathered"))?;
        Ok(())
    }

    /// Records why a gather of the group failed (a group already gathered keeps its state:
    /// the failure of a later look at it is only logged).
    pub async fn record_gather_failure(
        &mut self,
        group_id: &str,
        error: &str,
        now: &str,
    ) -> Result<()> {
        let mut q = self.sql(
            "UPDATE recon_run_groups SET gather_error = $1, gather_failed_at = $2
             WHERE group_id = $3 AND gathered_at IS NULL",
        );
        q.bind(error).bind(now).bind(group_id);
        self.execute(q)
            .await
            .map_err(db_err("recording the gather's failure"))?;
        Ok(())
    }

    /// Seals what shard run `run_id` hands the gather: one row per file of its folder.
    pub async fn record_handover(&mut self, run_id: &str, files: &[HandoverFile]) -> Result<()> {
        for f in files {
            let mut q = self.sql(
                "INSERT INTO recon_shard_handover (run_id, file, sha256, bytes)
                 VALUES ($1, $2, $3, $4)",
            );
            q.bind(run_id)
                .bind(f.file.as_str())
                .bind(f.sha256.as_str())
                .bind(i64::try_from(f.bytes).unwrap_or(i64::MAX));
            self.execute(q)
                .await
                .map_err(db_err("sealing the shard's hand-over"))?;
        }
        Ok(())
    }

    /// What shard run `run_id` sealed when it committed, by file name (empty: nothing).
    pub async fn handover(&mut self, run_id: &str) -> Result<Vec<HandoverFile>> {
        let mut q = self.sql(
            "SELECT file, sha256, bytes FROM recon_shard_handover WHERE run_id = $1 ORDER BY file",
        );
        q.bind(run_id);
        self.fetch_all(q, |r| {
            Ok(HandoverFile {
                file: r.text(0)?,
                sha256: r.text(1)?,
                bytes: u64::try_from(r.int(2)?).unwrap_or(0),
            })
        })
        .await
        .map_err(db_err("reading the shard's sealed hand-over"))
    }
}
