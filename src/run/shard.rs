//! `recon run --shard I/N`: one shard of a partitioned night (see docs/sharding.md).
//!
//! 1. The job must be partitioned, on PostgreSQL, one day, not a dry run.
//! 2. Under the group lock, the night's run group is joined (created by the first shard, which
//!    applies the reviewers' decisions inbox before any shard plans): range, config hash and
//!    shard count must agree, and every shard runs with the group's as-of.
//! 3. A shard that already landed (a COMPLETED run in the group) does nothing: a retried
//!    index lands exactly once.
//! 4. Under its own lock (two shards run at once; the same shard twice is refused) and a
//!    shared hold on the run lock (a plain `recon run` excludes every shard), it recovers its
//!    own interrupted runs, then runs the day with only its partitions' payments and sources.
//!    It writes its results and `shard.json` for the gather; no report and no email.

use super::day::run_day;
use super::session::{Secrets, Session};
use super::{Job, ReadInRange, RunReport, stop};
use crate::config::Config;
use crate::db::{Db, GROUP_LOCK_CLASS, RUN_LOCK_KEY, RunLock, SHARD_LOCK_CLASS};
use crate::exit::{Failure, fail};
use crate::partition::{PartitionConfig, Shard};
use crate::rules::RuleSet;
use crate::run::data::RunOptions;
use crate::store::groups::Group;
use crate::timeparse;
use anyhow::Result;
use chrono::Utc;

/// What `recon run --shard` did.
#[derive(Debug)]
pub enum ShardOutcome {
    /// The shard ran and landed.
    Ran(Box<RunReport>),
    /// The shard had landed already (run id, folder): nothing was done.
    Landed(String, std::path::PathBuf),
}

/// What every process of a run group must run with, as the group stores it: the job file's
/// bytes, the rules and the recon build, each named (`job <sha> rules <sha> recon <build>`) so
/// a refusal can say which differs ([`disagreement`]).
pub fn config_hash(cfg: &Config, rules: &RuleSet) -> Result<String> {
    let text = std::fs::read(&cfg.path)
        .map_err(|e| fail(Failure::Config, format!("{}: {e}", cfg.path.display())))?;
    let job = &crate::sources::sha256_hex(&text)[..16];
    let rules = &crate::sources::sha256_hex(rules.hash.as_bytes())[..16];
    Ok(format!("job {job} rules {rules} recon {}", recon_build()))
}

/// This binary's build: its version, and the build id the image was made with
/// (`RECON_BUILD` at compile time, e.g. the commit; deploy/Dockerfile sets it). Shards and the
/// gather of one night must be one build.
pub fn recon_build() -> String {
    if let Some(b) = crate::fault::build_override() {
        return b;
    }
    match option_env!("RECON_BUILD") {
        Some(id) if !id.is_empty() => format!("{}+{id}", env!("CARGO_PKG_VERSION")),
        _ => env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// What differs between a group's stored agreement (`stored`) and a process's (`wanted`), in
/// words (None: they agree). A group stored before the agreement named its parts differs as a
/// whole.
pub fn disagreement(stored: &str, wanted: &str) -> Option<String> {
    if stored == wanted {
        return None;
    }
    let parts = |s: &str| -> Option<Vec<(String, String)>> {
        let words: Vec<&str> = s.split(' ').collect();
        (words.len() == 6)
            .then(|| {
                words
                    .chunks(2)
                    .map(|kv| (kv[0].to_string(), kv[1].to_string()))
                    .collect()
            })
            .filter(|kv: &Vec<(String, String)>| {
                kv.iter()
                    .map(|(k, _)| k.as_str())
                    .eq(["job", "rules", "recon"])
            })
    };
    let (Some(a), Some(b)) = (parts(stored), parts(wanted)) else {
        return Some(format!(
            "the job file, rules and recon build (stored as {stored}, here {wanted})"
        ));
    };
    let named: Vec<String> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x.1 != y.1)
        .map(|((k, x), (_, y))| match k.as_str() {
            "job" => format!("the job file (sha256 {x}… for the group, {y}… here)"),
            "rules" => format!("the rules (sha256 {x}… for the group, {y}… here)"),
            _ => format!("the recon build ({x} for the group, {y} here)"),
        })
        .collect();
    Some(named.join(", and "))
}

/// The default run group of a night: its day (`YYYY-MM-DD`).
pub fn default_group(opts: &RunOptions) -> String {
    if opts.from == opts.to {
        opts.from.to_string()
    } else {
        format!("{}_{}", opts.from, opts.to)
    }
}

/// The refusal of a range (`--from D1 --to D2`) with `--shard`: a run group is one night's
/// shards and the gather writes that one night, so a sharded range is a sharded night per day.
/// Refused before anything is opened or written.
fn range_refused(opts: &RunOptions, shard: Shard) -> anyhow::Error {
    fail(
        Failure::Config,
        format!(
            "--shard runs one night, not a range (--from {} --to {}): a night's shards form \
             one run group, and the gather writes that one night. Nothing was run. Run the \
             range day by day, each day as a sharded night: for each day D, `recon run --date \
             D --shard I/{}` for every shard I, then `recon gather --date D` \
             (docs/sharding.md); or run the range in one process, without --shard",
            opts.from, opts.to, shard.count
        ),
    )
}

/// The job's partitioning, if `opts` may run as `shard` of it: one night, partitioned, a shard
/// the partitioning has, not a dry run. Checked before anything is opened.
fn shardable<'c>(cfg: &'c Config, opts: &RunOptions, shard: Shard) -> Result<&'c PartitionConfig> {
    if opts.from != opts.to {
        return Err(range_refused(opts, shard));
    }
    let partition = cfg.partition_for("--shard")?;
    partition.check_shard(shard)?;
    if opts.dry_run {
        return Err(fail(
            Failure::Config,
            "--shard cannot be a dry run: a shard's results exist for the gather, which \
             reads what shards committed (hint: a dry run of the whole night without --shard)"
                .to_string(),
        ));
    }
    Ok(partition)
}

/// Why a shard refuses a SQLite job.
const NEEDS_POSTGRES: &str = "--shard needs PostgreSQL: shards are processes on several \
     machines sharing one ledger, and a SQLite ledger is one file on one machine (hint: run the \
     night without --shard; it reconciles every partition in one process)";

/// Runs shard `shard` of the night `opts` in run group `group`.
pub async fn run_shard(
    cfg: &Config,
    opts: &RunOptions,
    shard: Shard,
    group: Option<&str>,
) -> Result<ShardOutcome> {
    let partition = shardable(cfg, opts, shard)?;
    // A shard sends no email: the gather does.
    let secrets = Secrets {
        status_api: true,
        smtp: false,
    };
    let checked = Session::check(cfg, secrets)?;
    let group_id = group
        .map(str::to_string)
        .unwrap_or_else(|| default_group(opts));
    check_group_id(&group_id)?;
    let hash = config_hash(cfg, &checked.rules)?;
    // Opened with the moment it began; it runs with its group's as-of.
    let as_of = opts.as_of.unwrap_or_else(Utc::now).timestamp_micros();
    let mut session = checked.open_unless_stopped(as_of).await?;
    session.require_postgres(NEEDS_POSTGRES)?;
    session.as_of = join(&session, opts, shard, &group_id, hash).await?;
    let landed_as =
        |run_id: String| ShardOutcome::Landed(run_id.clone(), cfg.output_dir.join(run_id));
    if let Some(done) = landed(&session.db, &group_id, shard.index).await? {
        return Ok(landed_as(done));
    }
    let lock = lock_shard(&session, opts, shard).await?;
    // Landed while this process waited for the lock?
    if let Some(done) = landed(&session.db, &group_id, shard.index).await? {
        return Ok(landed_as(done));
    }
    session.recover_shard(&group_id, shard.index).await?;
    stop::check(super::NOTHING_DONE)?;
    let job_cfg = shard_job(cfg, partition, shard);
    let run_id = format!(
        "{group_id}-s{}of{}-{}",
        shard.index,
        shard.count,
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    tracing::info!(
        run_id,
        shard = %shard,
        partitions = ?partition.values_of(shard),
        sources = job_cfg.sources.len(),
        "Shard started."
    );
    let job = Job {
        cfg: &job_cfg,
        ..session.job(super::Part::Shard(shard, &group_id))
    };
    let mut read = ReadInRange::new();
    let result = run_day(job, opts, opts.from, &run_id, &mut read, None).await;
    drop(lock);
    session.close().await;
    let (report, _, view) = result?;
    super::free_in_background(view);
    Ok(ShardOutcome::Ran(Box::new(report)))
}

/// Joins the night's run group under the group lock and returns the group's as-of: the first
/// shard creates the group and applies the decisions inbox while the others wait for the lock.
async fn join(
    session: &Session<'_>,
    opts: &RunOptions,
    shard: Shard,
    group_id: &str,
    config_hash: String,
) -> Result<timeparse::Micros> {
    let db = &session.db;
    let now = || timeparse::to_db(Utc::now().timestamp_micros());
    let group = {
        let _group_lock = db
            .pg_locks(
                "the run group lock",
                &[format!(
                    "SELECT pg_try_advisory_lock({GROUP_LOCK_CLASS}, 0)"
                )],
                Some(&[format!("SELECT pg_advisory_lock({GROUP_LOCK_CLASS}, 0)")]),
            )
            .await?;
        let as_of = opts.as_of.unwrap_or_else(Utc::now).timestamp_micros();
        let wanted = Group {
            group_id: group_id.to_string(),
            range_from: opts.from.to_string(),
            range_to: opts.to.to_string(),
            as_of: timeparse::format_utc(as_of),
            config_hash,
            shards: shard.count,
            gathered_at: None,
            gather_folder: None,
            gather_error: None,
        };
        let mut tx = db.begin().await?;
        let (stored, created) = tx.join_group(&wanted, &now()).await?;
        tx.commit().await?;
        agrees(&stored, &wanted, opts.as_of.is_some())?;
        if created {
            session.apply_inbox().await?;
        }
        stored
    };
    timeparse::parse_ledger(&group.as_of).map_err(|e| {
        fail(
            Failure::Database,
            format!("run group {group_id}: as_of: {e}"),
        )
    })
}

/// Takes this shard's own lock (two shards run at once; the same shard twice is refused) and
/// a shared hold on the run lock (a plain `recon run` excludes every shard).
async fn lock_shard(session: &Session<'_>, opts: &RunOptions, shard: Shard) -> Result<RunLock> {
    session
        .db
        .pg_locks(
            &format!("another process runs shard {shard} (or a whole night holds the run lock)"),
            &[
                format!("SELECT pg_try_advisory_lock_shared({RUN_LOCK_KEY})"),
                format!(
                    "SELECT pg_try_advisory_lock({SHARD_LOCK_CLASS}, {})",
                    shard.index
                ),
            ],
            opts.wait.then_some(
                &[
                    format!("SELECT pg_advisory_lock_shared({RUN_LOCK_KEY})"),
                    format!(
                        "SELECT pg_advisory_lock({SHARD_LOCK_CLASS}, {})",
                        shard.index
                    ),
                ][..],
            ),
        )
        .await
}

/// The job as `shard` runs it: its partitions' sources; the other partitions' sources are read
/// only for the lines that name one of its payments (a shared bank source is the gather's).
fn shard_job(cfg: &Config, partition: &PartitionConfig, shard: Shard) -> Config {
    let mut job_cfg = cfg.clone();
    let (own, others): (Vec<_>, Vec<_>) = std::mem::take(&mut job_cfg.sources)
        .into_iter()
        .partition(|s| {
            s.partition
                .as_deref()
                .is_some_and(|v| partition.in_shard(v, shard))
        });
    job_cfg.sources = own;
    if let Some(p) = job_cfg.partition.as_mut() {
        p.foreign_sources = others
            .into_iter()
            .filter(|s| s.partition.is_some())
            .collect();
    }
    job_cfg
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
    if let Some(what) = disagreement(&stored.config_hash, &wanted.config_hash) {
        return Err(fail(
            Failure::Config,
            format!(
                "run group {}: this shard differs from the group in {what} (hint: every shard \
                 and the gather of a night run one recon build with the same job file and \
                 rules; a re-run with other settings needs another --group)",
                stored.group_id
            ),
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
pub async fn landed(db: &Db, group: &str, index: u32) -> Result<Option<String>> {
    let mut tx = db.begin().await?;
    let runs = tx.shard_runs(group).await?;
    tx.rollback().await?;
    Ok(runs
        .into_iter()
        .find(|r| r.shard == index && r.status == "COMPLETED")
        .map(|r| r.run_id))
}
