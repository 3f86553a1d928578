//! The `recon` command line: parses arguments, sets up logging, calls the library and maps
//! errors to the documented exit codes (see `recon::exit`).

use anyhow::Result;
use chrono::{DateTime, NaiveDate, Utc};
use clap::{Parser, Subcommand};
use recon::config::Config;
use recon::exit;
use recon::{out, outln};
use std::path::PathBuf;

/// mimalloc instead of glibc malloc: Polars allocates a lot, and glibc's per-thread arenas keep
/// the Polars and writer threads' freed memory, so the run was slower and bigger with it
/// (docs/benchmark.md says how to measure such a change).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "recon",
    version,
    about = "Payment reconciliation: ledger vs provider statements"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reconcile one day or a range of days.
    Run {
        /// Job configuration (TOML).
        #[arg(long)]
        config: PathBuf,
        /// One day (default: yesterday in the configured time zone).
        #[arg(long, conflicts_with_all = ["from", "to"])]
        date: Option<NaiveDate>,
        /// First day of a range.
        #[arg(long, requires = "to")]
        from: Option<NaiveDate>,
        /// Last day of a range (inclusive).
        #[arg(long, requires = "from")]
        to: Option<NaiveDate>,
        /// Cut-off: RFC 3339 timestamp or a day (its start in the configured zone). Default now.
        #[arg(long)]
        as_of: Option<String>,
        /// Write results, change nothing in the database.
        #[arg(long)]
        dry_run: bool,
        /// Fixed run id (default: timestamp + random suffix).
        #[arg(long)]
        run_id: Option<String>,
        /// If another run holds the run lock, wait for it instead of exiting with code 6.
        #[arg(long)]
        wait: bool,
        /// First pull the remote sources' files for the range into the inbox (see `recon pull`).
        #[arg(long)]
        pull: bool,
        /// Run one shard of a partitioned night, I/N (0 ≤ I < N; see docs/sharding.md).
        #[arg(long, conflicts_with = "shards")]
        shard: Option<String>,
        /// Run shard $JOB_COMPLETION_INDEX of N (what a Kubernetes Indexed Job sets); without
        /// it, `[partition] shards` with $JOB_COMPLETION_INDEX set.
        #[arg(long)]
        shards: Option<u32>,
        /// The night's run group, shared by its shards and the gather (default: the date).
        #[arg(long)]
        group: Option<String>,
        /// With a shard: once it has landed, gather the night if every shard has (the last
        /// shard to land gathers it; docs/sharding.md).
        #[arg(long)]
        gather: bool,
        /// With a shard: how often Kubernetes retries a failed index (the Job's
        /// backoffLimitPerIndex). The attempt whose $RECON_INDEX_FAILURE_COUNT reaches it is
        /// the last: if it fails, the night's failure is recorded and alerted at once.
        #[arg(long, value_name = "N")]
        index_retries: Option<u32>,
    },
    /// Write a sharded night's one report, results and email once every shard has landed.
    Gather {
        /// Job configuration (TOML).
        #[arg(long)]
        config: PathBuf,
        /// The night (default: yesterday in the configured time zone).
        #[arg(long)]
        date: Option<NaiveDate>,
        /// The run group (default: the date).
        #[arg(long)]
        group: Option<String>,
        /// How long to wait for shards still missing (e.g. `3h`; default: look once). Past
        /// it, exit 13 naming the missing shards.
        #[arg(long)]
        wait: Option<String>,
    },
    /// How a partitioned night splits over its shards: payments and estimated memory per
    /// shard, with a warning where one exceeds the pods' memory limit.
    PlanShards {
        /// Job configuration (TOML) with a [partition] section.
        #[arg(long)]
        config: PathBuf,
        /// The night (default: yesterday in the configured time zone).
        #[arg(long)]
        date: Option<NaiveDate>,
        /// How many shards (default: `shards` in [partition]).
        #[arg(long)]
        shards: Option<u32>,
        /// The pods' memory limit (a Kubernetes quantity; deploy/k8s/recon-shards.yaml's).
        #[arg(long, default_value = "6Gi")]
        memory_limit: String,
    },
    /// Fetch the files of remote sources (sftp://, s3://, https://) into the local inbox.
    Pull {
        /// Job configuration (TOML).
        #[arg(long)]
        config: PathBuf,
        /// One day (default: yesterday in the configured time zone).
        #[arg(long, conflicts_with_all = ["from", "to"])]
        date: Option<NaiveDate>,
        /// First day of a range.
        #[arg(long, requires = "to")]
        from: Option<NaiveDate>,
        /// Last day of a range (inclusive).
        #[arg(long, requires = "from")]
        to: Option<NaiveDate>,
    },
    /// Replay recorded nights with candidate rules: what would change, and against what
    /// reviewers decided. Writes nothing to the database.
    Backtest {
        /// Job configuration (its rules are the live ones).
        #[arg(long)]
        config: PathBuf,
        /// The candidate rules folder.
        #[arg(long)]
        rules: PathBuf,
        /// First day.
        #[arg(long)]
        from: NaiveDate,
        /// Last day (inclusive).
        #[arg(long)]
        to: NaiveDate,
        /// Output folder (default `<output_dir>/backtest-<from>_<to>`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// New automatic transitions are expected: exit 0 unless a reviewer is contradicted.
        #[arg(long)]
        allow_new_transitions: bool,
    },
    /// Why a payment or statement line got its outcome: pass, rule, candidates and reasons.
    Explain {
        /// Job configuration.
        #[arg(long)]
        config: PathBuf,
        /// Payment id, or statement line id (provider id, `source#Lnn` or `source:id`).
        id: String,
        /// Run to explain (default: the latest completed run).
        #[arg(long, conflicts_with = "date")]
        run: Option<String>,
        /// Plan this day now instead of a recorded run.
        #[arg(long)]
        date: Option<NaiveDate>,
        /// Cut-off with --date (default now).
        #[arg(long, requires = "date")]
        as_of: Option<String>,
    },
    /// The run records, newest first (killed runs show as FAILED "interrupted" once the
    /// next run has taken the lock).
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Create or upgrade the database schema (SQLite or PostgreSQL, from the config).
    Migrate {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
    },
    /// Ledger maintenance.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// The review queue.
    Tickets {
        #[command(subcommand)]
        command: TicketsCommand,
    },
    /// Cases: one per human decision, as the latest committed run stored them.
    Cases {
        #[command(subcommand)]
        command: CasesCommand,
    },
    /// Reviewers' decisions from a report's Decide sheet.
    Decisions {
        #[command(subcommand)]
        command: DecisionsCommand,
    },
    /// Print the canonical statement lines recon reads from files, as CSV (or, for pain002
    /// and nacha, the payout status records).
    Parse {
        /// Format: csv, xlsx, camt053, camt054, camt052, mt940 (MT942 too), bai2, ofx (QFX
        /// too), jsonl or parquet; or a payout status format, pain002 or nacha, printed as a
        /// table of status records. Default: the source's format with --config, else required.
        #[arg(long)]
        format: Option<String>,
        /// Column mapping for csv, xlsx, jsonl and parquet (the keys of one `[[source]]`
        /// table). Bank formats need none (it may set `encoding` or `timezone`).
        #[arg(long, conflicts_with_all = ["config", "source"])]
        mapping: Option<PathBuf>,
        /// Job configuration whose source mapping to use (instead of --mapping).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Source name in the config (default: the first source).
        #[arg(long, requires = "config")]
        source: Option<String>,
        /// Print recipients in full instead of masked, to check a recipient mapping on your
        /// own machine (reports, results and email always mask them).
        #[arg(long)]
        unmasked: bool,
        /// Files to read.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Reconcile the bundled sample-data with a fresh SQLite database.
    Demo {
        /// Folder with the sample (recon.toml, payments.csv, attempts.csv, statement.csv).
        #[arg(long, default_value = "sample-data")]
        sample: PathBuf,
    },
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Load payments (and attempts) from CSV; any bad row rejects the whole import.
    Import {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// payments.csv
        #[arg(long)]
        payments: PathBuf,
        /// attempts.csv
        #[arg(long)]
        attempts: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RunsCommand {
    /// List run records.
    List {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// How many (newest first).
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
}

#[derive(Subcommand)]
enum CasesCommand {
    /// List cases, most severe first.
    List {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// Only cases waiting for a decision (open or escalated).
        #[arg(long)]
        open: bool,
    },
    /// Show one case: its candidates, tickets, offered decisions and the decisions made.
    Show {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// Case key (`C-…`).
        key: String,
    },
}

#[derive(Subcommand)]
enum DecisionsCommand {
    /// Apply the decisions of a report.xlsx's Decide sheet; writes FILE's `<stem>.result.csv`.
    Apply {
        /// Job configuration (for the database and `approvals`).
        #[arg(long)]
        config: PathBuf,
        /// Who decides (default: the login name, $USER). Never taken from the file.
        #[arg(long)]
        actor: Option<String>,
        /// The edited report.xlsx (or the decide.xlsx the email carried).
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum TicketsCommand {
    /// List tickets, most severe first.
    List {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// Only open tickets.
        #[arg(long)]
        open: bool,
        /// Only tickets of this kind (an outcome, e.g. AMBIGUOUS).
        #[arg(long)]
        kind: Option<String>,
    },
    /// Show one ticket: every field, its evidence and its history.
    Show {
        /// Job configuration (for the database).
        #[arg(long)]
        config: PathBuf,
        /// Ticket id.
        id: i64,
    },
    /// Resolve an open ticket.
    Resolve(TicketChange),
    /// Open a resolved ticket again.
    Reopen(TicketChange),
}

/// Who changes a ticket's status, and why.
#[derive(clap::Args)]
struct TicketChange {
    /// Job configuration (for the database).
    #[arg(long)]
    config: PathBuf,
    /// Ticket id.
    id: i64,
    /// Who resolves or reopens it.
    #[arg(long)]
    actor: String,
    /// The resolution, or why it is opened again.
    #[arg(long)]
    note: String,
}

fn main() {
    recon::process::init();
    let cli = Cli::parse();
    let code = recon::process::run_to_exit_code(dispatch(cli.command));
    std::process::exit(code);
}

/// The checked database of the job configuration at `config`.
async fn open_db(config: &std::path::Path) -> Result<recon::db::Db> {
    let cfg = Config::load(config)?;
    recon::db::Db::for_job(&cfg).await
}

fn parse_as_of(value: &str, cfg: &Config) -> Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc));
    }
    let day: NaiveDate = value.parse().map_err(|_| {
        exit::fail(
            exit::Failure::Config,
            format!("--as-of {value:?}: expected RFC 3339 (2026-11-30T06:00:00Z) or a day"),
        )
    })?;
    let micros = recon::timeparse::day_start(day, cfg.timezone);
    DateTime::from_timestamp_micros(micros).ok_or_else(|| {
        exit::fail(
            exit::Failure::Config,
            format!("--as-of {value:?} out of range"),
        )
    })
}

/// The days of `--date` / `--from --to`; default yesterday in the job's zone.
fn days(
    cfg: &Config,
    date: Option<NaiveDate>,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
) -> (NaiveDate, NaiveDate) {
    match (date, from, to) {
        (Some(d), _, _) => (d, d),
        (None, Some(f), Some(t)) => (f, t),
        _ => {
            let today = Utc::now().with_timezone(&cfg.timezone).date_naive();
            let y = today.pred_opt().unwrap_or(today);
            (y, y)
        }
    }
}

/// Pulls the remote sources for `from..=to`; prints the tally on stdout and every warning on
/// stderr.
async fn pull_and_report(
    cfg: &Config,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<recon::pull::PullReport> {
    let report = recon::pull::pull(cfg, from, to).await?;
    outln!("{}", report.text());
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    Ok(report)
}

/// `tickets resolve` and `tickets reopen`.
async fn change_ticket(c: TicketChange, reopen: bool) -> Result<()> {
    let cfg = Config::load(&c.config)?;
    // The same person check as a decision's: with [[reviewer]], the OS user's reviewer.
    let actor = recon::decisions::reviewers::acting(&cfg.decisions, Some(&c.actor))?;
    let db = recon::db::Db::for_job(&cfg).await?;
    let done = if reopen {
        recon::tickets::reopen(&db, c.id, &actor, &c.note).await
    } else {
        recon::tickets::resolve(&db, c.id, &actor, &c.note).await
    };
    db.close().await;
    done?;
    outln!(
        "ticket {} {}",
        c.id,
        if reopen { "reopened" } else { "resolved" }
    );
    Ok(())
}

/// The shard `recon run` runs: `--shard I/N`, or `$JOB_COMPLETION_INDEX` of `--shards N`
/// (or of `[partition] shards` when the index is set); None: the whole night.
fn which_shard(
    cfg: &Config,
    shard: Option<&str>,
    shards: Option<u32>,
) -> Result<Option<recon::partition::Shard>> {
    use recon::partition::Shard;
    if let Some(text) = shard {
        return Shard::parse(text).map(Some);
    }
    let index = std::env::var("JOB_COMPLETION_INDEX").ok();
    let count = shards.or_else(|| {
        index
            .as_ref()
            .and(cfg.partition.as_ref().and_then(|p| p.shards))
    });
    match (count, index) {
        (None, _) => Ok(None),
        (Some(n), Some(i)) => {
            let i: u32 = i
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("JOB_COMPLETION_INDEX={i:?} is not a shard index"))?;
            Shard::new(i, n).map(Some).ok_or_else(|| {
                exit::fail(
                    exit::Failure::Config,
                    format!("JOB_COMPLETION_INDEX={i} is not below the shard count {n}"),
                )
            })
        }
        (Some(_), None) => Err(exit::fail(
            exit::Failure::Config,
            "--shards N takes the shard index from $JOB_COMPLETION_INDEX, which is not set (hint: --shard I/N)",
        )),
    }
}

/// Refuses the options of `recon run` that do not apply to how it runs: `--run-id` and
/// `--pull` with a shard, `--group` without one. Each would otherwise be ignored without a
/// word. Checked before anything is opened.
fn refuse_unsharded_options(
    shard: Option<recon::partition::Shard>,
    run_id: Option<&str>,
    pull: bool,
    group: Option<&str>,
) -> Result<()> {
    let refuse = |why: String| Err(exit::fail(exit::Failure::Config, why));
    match shard {
        Some(s) if run_id.is_some() => refuse(format!(
            "--run-id does not apply to shard {s}: a shard's run id is made from its run group \
             and index (<group>-s{}of{}-…) so the gather and a retried index find it. Nothing \
             was run. Name the night with --group instead",
            s.index, s.count
        )),
        Some(s) => match pull {
            true => refuse(format!(
                "--pull does not apply to shard {s}: {} shards pulling into one inbox at once \
                 would race on the same files. Nothing was run. Pull once before the shards \
                 start (`recon pull --config F --date D`, e.g. the shards' init container or a \
                 Job before them; docs/sharding.md)",
                s.count
            )),
            false => Ok(()),
        },
        None => match group {
            Some(g) => refuse(format!(
                "--group {g} names a sharded night's run group, but this run is not a shard \
                 (no --shard I/N, no --shards N with $JOB_COMPLETION_INDEX). Nothing was run. \
                 Add --shard I/N, or drop --group (name a one-process night with --run-id)"
            )),
            None => Ok(()),
        },
    }
}

/// What a shard does after it ran: gather the night if it landed last (`--gather`), and
/// whether its failure can be its index's last (`--index-retries`).
#[derive(Debug, Clone, Copy)]
struct Then {
    gather: bool,
    index_retries: Option<u32>,
}

impl Then {
    /// Whether a shard that failed with `e` fails for good: Kubernetes fails the index at once
    /// on a config error (exit 3, the manifests' FailIndex), and after `--index-retries`
    /// failures ($RECON_INDEX_FAILURE_COUNT, the pod's `job-index-failure-count` annotation).
    /// A stop signal is not: a drained or preempted pod is retried without counting.
    fn last_attempt(self, e: &anyhow::Error) -> bool {
        let Some(retries) = self.index_retries else {
            return false;
        };
        if exit::interrupted_by(e).is_some() {
            return false;
        }
        let failures: u32 = std::env::var("RECON_INDEX_FAILURE_COUNT")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        exit::code_for(e) == exit::CONFIG || failures >= retries
    }
}

async fn shard_cmd(
    cfg: &Config,
    opts: &recon::run::RunOptions,
    shard: recon::partition::Shard,
    group: Option<&str>,
    then: Then,
) -> Result<i32> {
    let group_id = group
        .map(str::to_string)
        .unwrap_or_else(|| recon::run::default_group(opts));
    let outcome = match recon::run::run_shard(cfg, opts, shard, group).await {
        Ok(o) => o,
        Err(e) => {
            if then.last_attempt(&e) {
                let alert =
                    recon::run::gather::shard_failed_for_good(cfg, &group_id, shard, &e).await;
                eprintln!(
                    "recon run: shard {shard} failed for good: the night {group_id} is not \
                     gathered ({})",
                    recon::report::outbox::Alert {
                        status: alert,
                        ..recon::report::outbox::Alert::disabled()
                    }
                    .text()
                );
            }
            return Err(e);
        }
    };
    let code = match outcome {
        recon::run::ShardOutcome::Landed(run_id, dir) => {
            outln!(
                "recon run: shard {shard} already landed (run {run_id}, {}): nothing to do",
                dir.display()
            );
            exit::OK
        }
        recon::run::ShardOutcome::Ran(report) => {
            let out_dir = report.out_dir.display().to_string();
            out!("{}", report.summary.text(&out_dir));
            if !then.gather {
                outln!("  shard {shard}: the night's report and email come from recon gather");
            }
            if report.unreadable_inputs().is_empty() {
                exit::OK
            } else {
                eprintln!(
                    "warning: the shard completed, but {} statement file(s) could not be read (exit code {})",
                    report.unreadable_inputs().len(),
                    exit::INPUT_UNREADABLE
                );
                exit::INPUT_UNREADABLE
            }
        }
    };
    if !then.gather {
        return Ok(code);
    }
    let g = recon::run::gather::GatherOptions {
        group: group_id,
        wait: std::time::Duration::ZERO,
        poll: std::time::Duration::from_secs(5),
        if_complete: true,
    };
    let report = recon::run::gather::gather(cfg, &g).await?;
    if let Some(why) = &report.skipped {
        outln!(
            "  shard {shard}: not gathering the night {}: {why}",
            g.group
        );
        return Ok(code);
    }
    outln!(
        "  shard {shard}: the last to land: the night {} gathered",
        g.group
    );
    let gathered = gather_report(&report);
    Ok(if code == exit::OK { gathered } else { code })
}

async fn gather_cmd(
    config: &std::path::Path,
    date: Option<NaiveDate>,
    group: Option<String>,
    wait: Option<String>,
) -> Result<i32> {
    recon::run::stop::install()?;
    let cfg = Config::load(config)?;
    let (from, to) = days(&cfg, date, None, None);
    let wait = match wait {
        Some(w) => std::time::Duration::from_micros(
            recon::timeparse::parse_duration(&w)
                .map_err(|e| exit::fail(exit::Failure::Config, format!("--wait {w:?}: {e}")))?
                .max(0) as u64,
        ),
        None => std::time::Duration::ZERO,
    };
    let opts = recon::run::RunOptions {
        from,
        to,
        as_of: None,
        dry_run: false,
        run_id: None,
        wait: false,
    };
    let g = recon::run::gather::GatherOptions {
        group: group.unwrap_or_else(|| recon::run::default_group(&opts)),
        wait,
        poll: std::time::Duration::from_secs(5),
        if_complete: false,
    };
    let report = recon::run::gather::gather(&cfg, &g).await?;
    Ok(gather_report(&report))
}

/// Prints what a gather did; its exit code.
fn gather_report(report: &recon::run::gather::GatherReport) -> i32 {
    let Some(summary) = &report.summary else {
        outln!(
            "recon gather {}: already gathered into {}: nothing to do",
            report.group,
            report.out_dir.display()
        );
        let a = &report.alert;
        if a.outbox_sent > 0 {
            outln!(
                "  alert: {} queued alert(s) sent from the outbox",
                a.outbox_sent
            );
        }
        if let Some(e) = &a.outbox_error {
            outln!(
                "  alert: outbox not emptied ({e}); {} wait in it",
                a.outbox_left
            );
        }
        return if report.alert.failed() {
            exit::ALERT_FAILED
        } else {
            exit::OK
        };
    };
    out!("{}", summary.text(&report.out_dir.display().to_string()));
    for s in &summary.shards {
        outln!(
            "  shard {}: {} payments reported, {} loaded, {} lines ({})",
            s.shard,
            s.payments_in_scope,
            s.payments_loaded,
            s.statement_lines,
            s.partitions.join(", ")
        );
    }
    outln!("  {}", report.alert.text());
    if report.alert.failed() {
        return exit::ALERT_FAILED;
    }
    if !summary.unreadable_inputs.is_empty() {
        return exit::INPUT_UNREADABLE;
    }
    exit::OK
}

async fn dispatch(command: Command) -> Result<i32> {
    match command {
        Command::Gather {
            config,
            date,
            group,
            wait,
        } => gather_cmd(&config, date, group, wait).await,
        Command::Run {
            config,
            date,
            from,
            to,
            as_of,
            dry_run,
            run_id,
            wait,
            pull,
            shard,
            shards,
            group,
            gather,
            index_retries,
        } => {
            // SIGTERM / SIGINT stop a run at its next safe point (recon::run::stop).
            recon::run::stop::install()?;
            let cfg = Config::load(&config)?;
            let (from, to) = days(&cfg, date, from, to);
            let sharded = which_shard(&cfg, shard.as_deref(), shards)?;
            refuse_unsharded_options(sharded, run_id.as_deref(), pull, group.as_deref())?;
            if sharded.is_none() && (gather || index_retries.is_some()) {
                return Err(exit::fail(
                    exit::Failure::Config,
                    "--gather and --index-retries apply to a shard (--shard I/N, or --shards N \
                     with $JOB_COMPLETION_INDEX): the last shard to land gathers its night. \
                     Nothing was run. A night in one process writes its report itself"
                        .to_string(),
                ));
            }
            if let Some(shard) = sharded {
                let as_of = as_of.map(|a| parse_as_of(&a, &cfg)).transpose()?;
                let opts = recon::run::RunOptions {
                    from,
                    to,
                    as_of,
                    dry_run,
                    run_id: None,
                    wait,
                };
                let then = Then {
                    gather,
                    index_retries,
                };
                return shard_cmd(&cfg, &opts, shard, group.as_deref(), then).await;
            }
            let pulled = match pull {
                true => Some(
                    recon::run::stop::unless_stopped(
                        "while pulling: nothing was reconciled",
                        pull_and_report(&cfg, from, to),
                    )
                    .await?,
                ),
                false => None,
            };
            let as_of = as_of.map(|a| parse_as_of(&a, &cfg)).transpose()?;
            let report = recon::run::run(
                &cfg,
                &recon::run::RunOptions {
                    from,
                    to,
                    as_of,
                    dry_run,
                    run_id,
                    wait,
                },
            )
            .await?;
            let out_dir = report.out_dir.display().to_string();
            match &report.range {
                Some((_, range)) => out!("{}", range.text(&out_dir)),
                None => out!("{}", report.summary.text(&out_dir)),
            }
            outln!("  {}", report.alert.text());
            if report.alert.failed() {
                eprintln!(
                    "warning: the run completed, but an alert was not sent (exit code {})",
                    exit::ALERT_FAILED
                );
                return Ok(exit::ALERT_FAILED);
            }
            if !report.unreadable_inputs().is_empty() {
                eprintln!(
                    "warning: the run completed, but {} statement file(s) could not be read \
                     (exit code {}); their days are incomplete until they are delivered again",
                    report.unreadable_inputs().len(),
                    exit::INPUT_UNREADABLE
                );
                return Ok(exit::INPUT_UNREADABLE);
            }
            if pulled.is_some_and(|p| !p.complete()) {
                eprintln!(
                    "warning: the run completed on the local inbox, but the pull could not fetch \
                     every file (exit code {}); those days are incomplete",
                    exit::PULL_INCOMPLETE
                );
                return Ok(exit::PULL_INCOMPLETE);
            }
            Ok(exit::OK)
        }
        Command::PlanShards {
            config,
            date,
            shards,
            memory_limit,
        } => {
            let cfg = Config::load(&config)?;
            let limit = recon::run::shard_plan::parse_memory(&memory_limit)?;
            let (from, to) = days(&cfg, date, None, None);
            let opts = recon::run::RunOptions {
                from,
                to,
                as_of: None,
                dry_run: true,
                run_id: None,
                wait: false,
            };
            let plan = recon::run::shard_plan::plan_shards(&cfg, &opts, shards, limit).await?;
            out!("{}", plan.text());
            Ok(exit::OK)
        }
        Command::Pull {
            config,
            date,
            from,
            to,
        } => {
            let cfg = Config::load(&config)?;
            let (from, to) = days(&cfg, date, from, to);
            let report = pull_and_report(&cfg, from, to).await?;
            Ok(if report.complete() {
                exit::OK
            } else {
                exit::PULL_INCOMPLETE
            })
        }
        Command::Backtest {
            config,
            rules,
            from,
            to,
            out,
            allow_new_transitions,
        } => {
            let cfg = Config::load(&config)?;
            let report = recon::backtest::backtest(
                &cfg,
                &recon::backtest::BacktestOptions {
                    rules_dir: rules,
                    from,
                    to,
                    out_dir: out,
                    allow_new_transitions,
                },
            )
            .await?;
            out!("{}", recon::backtest::output::text(&report));
            Ok(report.exit_code(allow_new_transitions))
        }
        Command::Explain {
            config,
            id,
            run,
            date,
            as_of,
        } => {
            let cfg = Config::load(&config)?;
            let as_of = as_of.map(|a| parse_as_of(&a, &cfg)).transpose()?;
            let text = recon::explain::explain(
                &cfg,
                &recon::explain::ExplainOptions {
                    id,
                    run,
                    date,
                    as_of,
                },
            )
            .await?;
            out!("{text}");
            Ok(exit::OK)
        }
        Command::Runs {
            command: RunsCommand::List { config, limit },
        } => {
            let db = open_db(&config).await?;
            let mut tx = db.begin().await?;
            let runs = tx.list_runs(limit).await?;
            tx.rollback().await?;
            db.close().await;
            out!("{}", recon::store::RunRecord::render(&runs));
            Ok(exit::OK)
        }
        Command::Migrate { config } => {
            let cfg = Config::load(&config)?;
            let db = recon::db::Db::connect_with(&cfg.database_url, cfg.database).await?;
            let applied = db.migrate().await?;
            db.check_schema().await?;
            db.close().await;
            if applied.is_empty() {
                outln!("schema up to date");
            } else {
                outln!("applied migration(s) {applied:?}");
            }
            Ok(exit::OK)
        }
        Command::Ledger {
            command:
                LedgerCommand::Import {
                    config,
                    payments,
                    attempts,
                },
        } => {
            let db = open_db(&config).await?;
            let r = recon::ledger::import::import(&db, &payments, attempts.as_deref()).await?;
            db.close().await;
            outln!("imported {} payments, {} attempts", r.payments, r.attempts);
            Ok(exit::OK)
        }
        Command::Tickets { command } => {
            match command {
                TicketsCommand::List { config, open, kind } => {
                    let db = open_db(&config).await?;
                    let filter = recon::tickets::Filter {
                        open_only: open,
                        kind,
                    };
                    let list = recon::tickets::list_filtered(&db, &filter).await;
                    db.close().await;
                    out!("{}", recon::tickets::render(&list?));
                }
                TicketsCommand::Show { config, id } => {
                    let db = open_db(&config).await?;
                    let shown = recon::tickets::show(&db, id).await;
                    db.close().await;
                    let (ticket, history) = shown?;
                    out!("{}", recon::tickets::render_one(&ticket, &history));
                }
                TicketsCommand::Resolve(change) => change_ticket(change, false).await?,
                TicketsCommand::Reopen(change) => change_ticket(change, true).await?,
            }
            Ok(exit::OK)
        }
        Command::Cases { command } => {
            match command {
                CasesCommand::List { config, open } => {
                    let db = open_db(&config).await?;
                    let list = recon::decisions::queue::list(&db, open).await;
                    db.close().await;
                    out!("{}", recon::decisions::queue::render(&list?));
                }
                CasesCommand::Show { config, key } => {
                    let db = open_db(&config).await?;
                    let shown = recon::decisions::queue::show(&db, &key).await;
                    db.close().await;
                    let (case, decisions) = shown?;
                    out!("{}", recon::decisions::queue::render_one(&case, &decisions));
                }
            }
            Ok(exit::OK)
        }
        Command::Decisions {
            command:
                DecisionsCommand::Apply {
                    config,
                    actor,
                    file,
                },
        } => {
            let cfg = Config::load(&config)?;
            let actor = recon::decisions::reviewers::acting(&cfg.decisions, actor.as_deref())?;
            let db = recon::db::Db::for_job(&cfg).await?;
            // Never beside a run: it would store other evidence under the rows being checked.
            // A run that starts meanwhile waits for this apply (at most `apply_wait`).
            let lock = recon::decisions::lock::for_apply(&db).await?;
            let result = recon::decisions::apply_file(&db, &cfg.decisions, &file, &actor).await;
            drop(lock);
            db.close().await;
            let result = result?;
            let written = result.write()?;
            out!("{}", result.text(Some(&written)));
            Ok(result.exit_code())
        }
        Command::Parse {
            format,
            mapping,
            config,
            source,
            unmasked,
            files,
        } => {
            let recipients = if unmasked {
                recon::sources::Recipients::Unmasked
            } else {
                recon::sources::Recipients::Masked
            };
            // The files a bank sends back about payouts are no statements: a table of status
            // records, not canonical lines.
            if let Some(payout) = format
                .as_deref()
                .and_then(recon::model::PayoutFormat::parse)
            {
                if mapping.is_some() || config.is_some() {
                    return Err(exit::fail(
                        exit::Failure::Config,
                        format!(
                            "--format {payout} takes no --mapping or --config (a {payout} file declares its own layout)"
                        ),
                    ));
                }
                recon::sources::print_payouts(
                    payout,
                    &files,
                    &recon::sources::InputLimits::default(),
                    recipients,
                    std::io::stdout().lock(),
                    std::io::stderr().lock(),
                )?;
                return Ok(exit::OK);
            }
            let src = recon::config::parse_settings(
                format.as_deref(),
                mapping.as_deref(),
                config.as_deref(),
                source.as_deref(),
            )?;
            recon::sources::print_canonical(
                &src,
                &files,
                recipients,
                std::io::stdout().lock(),
                std::io::stderr().lock(),
            )?;
            Ok(exit::OK)
        }
        Command::Demo { sample } => {
            let report = recon::demo::run(&sample).await?;
            out!(
                "{}",
                recon::demo::text(&report, &sample.join("recon.toml"))?
            );
            Ok(exit::OK)
        }
    }
}
