//! The run records (`recon_runs`): one per run, RUNNING until it completes or fails.

use super::sql::Bind;
use super::{Tx, db_err};
use crate::exit::{Failure, fail};
use anyhow::Result;

/// A run record as listed by `recon runs list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// Id.
    pub run_id: String,
    /// First day.
    pub range_from: String,
    /// Last day.
    pub range_to: String,
    /// Cut-off.
    pub as_of: String,
    /// RUNNING, COMPLETED or FAILED.
    pub status: String,
    /// Why it failed (or was interrupted).
    pub error: Option<String>,
    /// Started (report form).
    pub started_at: String,
    /// Finished (report form).
    pub finished_at: Option<String>,
}

impl RunRecord {
    /// Renders records as a table for the terminal. A RUNNING record is either the run that
    /// holds the lock now or one that was killed; the next run marks the latter FAILED.
    pub fn render(runs: &[RunRecord]) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if runs.is_empty() {
            s.push_str("no runs\n");
            return s;
        }
        let _ = writeln!(
            s,
            "{:<36}  {:<23}  {:<9}  {:<27}  {:<27}  error",
            "run", "range", "status", "started", "finished"
        );
        for r in runs {
            let range = if r.range_from == r.range_to {
                r.range_from.clone()
            } else {
                format!("{}..{}", r.range_from, r.range_to)
            };
            let error = r
                .error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or("");
            let _ = writeln!(
                s,
                "{:<36}  {:<23}  {:<9}  {:<27}  {:<27}  {}",
                r.run_id,
                range,
                r.status,
                r.started_at,
                r.finished_at.as_deref().unwrap_or("-"),
                error
            );
        }
        s
    }
}

/// The run record's start.
#[derive(Debug, Clone)]
pub struct RunStart<'a> {
    /// Id.
    pub run_id: &'a str,
    /// First day.
    pub from: &'a str,
    /// Last day.
    pub to: &'a str,
    /// As-of (RFC 3339).
    pub as_of: &'a str,
    /// Rules hash.
    pub rules_hash: &'a str,
    /// Now (UTC text).
    pub now: &'a str,
}

impl Tx {
    /// Inserts the run record as RUNNING. A reused run id is a config error.
    pub async fn insert_run(&mut self, r: &RunStart<'_>) -> Result<()> {
        let mut q = self.sql(
            "INSERT INTO recon_runs (run_id, range_from, range_to, as_of, dry_run, rules_hash,
                                             status, started_at)
                     VALUES ($1, $2, $3, $4, 0, $5, 'RUNNING', $6)",
        );
        q.bind(r.run_id)
            .bind(r.from)
            .bind(r.to)
            .bind(r.as_of)
            .bind(r.rules_hash)
            .bind(Bind::Ts(r.now));
        self.execute(q).await.map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => fail(
                Failure::Config,
                format!(
                    "run id {:?} was already used (hint: omit --run-id for a fresh one)",
                    r.run_id
                ),
            ),
            _ => fail(
                Failure::Database,
                format!("recording run {}: {e}", r.run_id),
            ),
        })?;
        Ok(())
    }

    /// Marks the run COMPLETED with its inputs and counts (JSON).
    pub async fn complete_run(
        &mut self,
        run_id: &str,
        inputs: &str,
        counts: &str,
        now: &str,
    ) -> Result<()> {
        let mut q = self.sql(
            "UPDATE recon_runs SET status = 'COMPLETED', inputs = $1, counts = $2, finished_at = $3
                     WHERE run_id = $4",
        );
        q.bind(inputs).bind(counts).bind(Bind::Ts(now)).bind(run_id);
        self.execute(q)
            .await
            .map_err(db_err("completing the run record"))?;
        Ok(())
    }

    /// Marks RUNNING records FAILED with `error`: `run_id = None` means every run still
    /// RUNNING (called under the run lock, so those were killed). Returns how many.
    pub async fn fail_runs(&mut self, run_id: Option<&str>, error: &str, now: &str) -> Result<u64> {
        let mut q = self.sql(
            "UPDATE recon_runs SET status = 'FAILED', error = $1, finished_at = $2
                     WHERE status = 'RUNNING' AND ($3 IS NULL OR run_id = $3)",
        );
        q.bind(error).bind(Bind::Ts(now)).bind(run_id);
        self.execute(q)
            .await
            .map_err(db_err("updating run records"))
    }

    /// (run_id, range_from) of every run record still RUNNING, oldest first.
    pub async fn running_runs(&mut self) -> Result<Vec<(String, String)>> {
        let q = self.sql(
            "SELECT run_id, range_from FROM recon_runs WHERE status = 'RUNNING'
                     ORDER BY started_at, run_id",
        );
        self.fetch_all(q, |r| Ok((r.text(0)?, r.text(1)?)))
            .await
            .map_err(db_err("reading run records"))
    }

    /// The completed runs (not shards of a run group) whose days lie within `[from, to]`
    /// (YYYY-MM-DD), oldest first: (run_id, range_from, range_to, as_of, started_at, inputs
    /// JSON). What `recon backtest` replays.
    pub async fn completed_runs_within(
        &mut self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(String, String, String, String, String, String)>> {
        let mut q = self.sql(
            "SELECT run_id, range_from, range_to, as_of, started_at, inputs FROM recon_runs
             WHERE status = 'COMPLETED' AND range_from >= $1 AND range_to <= $2
               AND run_id NOT IN (SELECT run_id FROM recon_run_shards)
             ORDER BY range_from, range_to, started_at, run_id",
        );
        q.bind(from);
        q.bind(to);
        self.fetch_all(q, |r| {
            Ok((
                r.text(0)?,
                r.text(1)?,
                r.text(2)?,
                r.text(3)?,
                r.ts(4)?,
                r.text(5)?,
            ))
        })
        .await
        .map_err(db_err("reading run records"))
    }

    /// The run groups (sharded nights) whose days lie within `[from, to]`, oldest first.
    pub async fn groups_within(&mut self, from: &str, to: &str) -> Result<Vec<String>> {
        let mut q = self.sql(
            "SELECT group_id FROM recon_run_groups
             WHERE range_from >= $1 AND range_to <= $2 AND gathered_at IS NOT NULL
             ORDER BY range_from, created_at, group_id",
        );
        q.bind(from);
        q.bind(to);
        self.fetch_all(q, |r| r.text(0))
            .await
            .map_err(db_err("reading run groups"))
    }

    /// The latest `limit` run records, newest first.
    pub async fn list_runs(&mut self, limit: i64) -> Result<Vec<RunRecord>> {
        let mut q = self.sql(
            "SELECT run_id, range_from, range_to, as_of, status, error, started_at,
                            finished_at
                     FROM recon_runs ORDER BY started_at DESC, run_id DESC LIMIT $1",
        );
        q.bind(limit);
        self.fetch_all(q, |r| {
            Ok(RunRecord {
                run_id: r.text("run_id")?,
                range_from: r.text("range_from")?,
                range_to: r.text("range_to")?,
                as_of: r.text("as_of")?,
                status: r.text("status")?,
                error: r.opt_text("error")?,
                started_at: r.ts("started_at")?,
                finished_at: r.opt_ts("finished_at")?,
            })
        })
        .await
        .map_err(db_err("reading run records"))
    }

    /// (run_id, range_from, as_of, inputs JSON) of run `run_id`, or of the latest completed run
    /// when `None`.
    pub async fn find_run(
        &mut self,
        run_id: Option<&str>,
    ) -> Result<Option<(String, String, String, String)>> {
        let mut q = self.sql(
            "SELECT run_id, range_from, as_of, inputs FROM recon_runs
                     WHERE ($1 IS NULL AND status = 'COMPLETED') OR run_id = $1
                     ORDER BY started_at DESC, run_id DESC LIMIT 1",
        );
        q.bind(run_id);
        self.fetch_optional(q, |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.text(3)?)))
            .await
            .map_err(db_err("reading run records"))
    }
}
