//! `recon backtest --config F --rules DIR --from D --to D`: what a candidate rule set would
//! have decided on the nights recon recorded, beside what the live rules decide on the same
//! evidence and what reviewers decided (issue 45).
//!
//! A backtest is the night's stages with another rule set and a publisher that compares
//! instead of writing: each recorded night is planned twice (`run::plan`, as
//! `recon explain` plans it), with the job's rules and with the candidate's, on the same
//! evidence:
//! - the same input files: each run's record names them by sha256; a file gone or changed
//!   since, or a file the run did not read, skips the night with the reason (never guessed);
//! - the ledger as that run saw it (`run::Job::rewind`): every status change recorded
//!   after the run began (recon's own and reviewers') is taken back, payments created since
//!   are left out, and only the confirmations reviewers had made by then are evidence;
//! - the same as-of; no provider is asked (`[[status_api]]` answers are not replayed).
//!
//! Nothing is written to the database: no run record, no transition, no case, no outbox
//! message. What the payment service itself changed on a payment since (its amount, recipient
//! or a new attempt) cannot be rebuilt: the replay counts and names such payments.
//!
//! [`crate::flips`] pairs the two plans' rows into flips and sets them against reviewers'
//! decisions; `output.rs` writes `backtest.csv`, `backtest.html` and `backtest.xlsx`.

pub mod output;

use crate::config::Config;
use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::rules::RuleSet;
use crate::run::{Job, Part, RunOptions};
use crate::timeparse::Micros;
use anyhow::Result;
use chrono::{DateTime, NaiveDate};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::flips as compare;
pub use crate::flips::{Agreement, Flip, Risk, Verdict};

/// What to backtest.
#[derive(Debug, Clone)]
pub struct BacktestOptions {
    /// The candidate rules folder.
    pub rules_dir: PathBuf,
    /// First day.
    pub from: NaiveDate,
    /// Last day, inclusive.
    pub to: NaiveDate,
    /// Where the outputs go (default `<output_dir>/backtest-<from>_<to>/`).
    pub out_dir: Option<PathBuf>,
    /// Flips into automatic transitions are expected: they do not fail the backtest.
    pub allow_new_transitions: bool,
}

/// One recorded night to replay.
#[derive(Debug, Clone)]
struct Night {
    /// The run (or run group) id.
    label: String,
    day: NaiveDate,
    as_of: Micros,
    /// The moment the ledger is rebuilt to: when the run began.
    rewind: Micros,
    /// The inputs the run recorded (`source`, `path`, `sha256`).
    inputs: Vec<serde_json::Value>,
}

/// A night replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NightResult {
    /// The run (or run group) id.
    pub run: String,
    /// Its day.
    pub day: NaiveDate,
    /// Rows compared (the live plan's).
    pub rows: usize,
    /// Flips by risk.
    pub flips: BTreeMap<Risk, usize>,
    /// What could not be rebuilt for it, in words.
    pub notes: Vec<String>,
}

/// A night not replayed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The run (or run group) id.
    pub run: String,
    /// Its day.
    pub day: NaiveDate,
    /// Why, naming the file.
    pub why: String,
}

/// What a backtest found.
#[derive(Debug, Clone)]
pub struct BacktestReport {
    /// The nights replayed, oldest first.
    pub nights: Vec<NightResult>,
    /// The nights skipped.
    pub skipped: Vec<Skipped>,
    /// Every flip, by night then id.
    pub flips: Vec<Flip>,
    /// The candidate's automatic decisions against reviewers'.
    pub agreement: Agreement,
    /// The reporting currency the values are in (None: none configured).
    pub reporting_currency: Option<&'static str>,
    /// Where the outputs were written.
    pub out_dir: PathBuf,
    /// The candidate rules folder.
    pub rules_dir: PathBuf,
    /// The days asked for.
    pub from: NaiveDate,
    /// Last day asked for.
    pub to: NaiveDate,
}

impl BacktestReport {
    /// The flips that turn a case (or a row needing no action) into an automatic transition,
    /// or change the transition.
    pub fn new_transitions(&self) -> usize {
        self.flips
            .iter()
            .filter(|f| f.risk == Risk::ToTransition)
            .count()
    }

    /// The exit code: [`crate::exit::INPUT`] when every recorded night was skipped (nothing
    /// was compared: a gate must not pass on that); [`crate::exit::BACKTEST_GATE`] when a flip
    /// contradicts a reviewer's decision, or turns a case into an automatic transition (unless
    /// `allow_new_transitions`); OK otherwise.
    pub fn exit_code(&self, allow_new_transitions: bool) -> i32 {
        if self.nights.is_empty() && !self.skipped.is_empty() {
            crate::exit::INPUT
        } else if self.agreement.disagreements() > 0
            || (!allow_new_transitions && self.new_transitions() > 0)
        {
            crate::exit::BACKTEST_GATE
        } else {
            crate::exit::OK
        }
    }
}

/// Replays the recorded nights of `opts.from..=opts.to` with the job's rules and with the
/// candidate rules, compares, and writes the outputs. Writes nothing to the database.
pub async fn backtest(cfg: &Config, opts: &BacktestOptions) -> Result<BacktestReport> {
    if opts.from > opts.to {
        return Err(fail(
            Failure::Config,
            format!("--from {} is after --to {}", opts.from, opts.to),
        ));
    }
    let live = RuleSet::for_job(cfg)?;
    let mut candidate_cfg = cfg.clone();
    candidate_cfg.rules_dir = Some(opts.rules_dir.clone());
    let candidate = RuleSet::for_job(&candidate_cfg)?;
    if cfg.partition.is_some() {
        tracing::info!("A partitioned job: each night is replayed as one process plans it.");
    }
    let db = Db::for_job(cfg).await?;
    let result = Box::pin(replay_all(cfg, &db, (&live, &candidate), opts)).await;
    db.close().await;
    let (nights, skipped, flips, agreement) = result?;
    let out_dir = opts.out_dir.clone().unwrap_or_else(|| {
        cfg.output_dir
            .join(format!("backtest-{}_{}", opts.from, opts.to))
    });
    let report = BacktestReport {
        nights,
        skipped,
        flips,
        agreement,
        reporting_currency: cfg.reporting.as_ref().map(|r| r.currency),
        out_dir,
        rules_dir: opts.rules_dir.clone(),
        from: opts.from,
        to: opts.to,
    };
    output::write(&report)?;
    Ok(report)
}

type Replayed = (Vec<NightResult>, Vec<Skipped>, Vec<Flip>, Agreement);

async fn replay_all(
    cfg: &Config,
    db: &Db,
    (live, candidate): (&RuleSet, &RuleSet),
    opts: &BacktestOptions,
) -> Result<Replayed> {
    let nights = recorded_nights(db, opts.from, opts.to).await?;
    let reviewers = compare::Reviewers::read(db).await?;
    let (mut done, mut skipped, mut flips) = (Vec::new(), Vec::new(), Vec::new());
    let mut agreement = Agreement::default();
    for night in nights {
        if let Some(why) = inputs_changed(&night.inputs) {
            skipped.push(Skipped {
                run: night.label,
                day: night.day,
                why,
            });
            continue;
        }
        // The night reads the files its run read, and no other (a file delivered since).
        let cfg = &night_config(cfg, &night.inputs);
        // The candidate first, kept as its projection: the two plans never hold their
        // evidence at once.
        let after = Box::pin(replay(cfg, candidate, db, &night)).await?;
        let unrecorded = inputs_differ(&night.inputs, &after.summary_inputs());
        let mut projected = compare::Projection::of(after.data.flip_rows());
        drop(after);
        let before = Box::pin(replay(cfg, live, db, &night)).await?;
        if let Some(why) =
            unrecorded.or_else(|| inputs_differ(&night.inputs, &before.summary_inputs()))
        {
            skipped.push(Skipped {
                run: night.label,
                day: night.day,
                why,
            });
            continue;
        }
        let valuation = cfg.reporting.as_ref().map(|r| r.valuation(night.day).0);
        let mut night_flips = compare::flips(
            (&night.label, night.day),
            before.data.flip_rows(),
            &mut projected,
            valuation.as_ref(),
        );
        for f in &mut night_flips {
            let verdict = reviewers.verdict(f);
            agreement.add(f, verdict);
        }
        let mut by_risk = BTreeMap::new();
        for f in &night_flips {
            *by_risk.entry(f.risk).or_insert(0) += 1;
        }
        let mut notes = Vec::new();
        let retried = before
            .data
            .payments
            .iter()
            .filter(|p| p.started_at.is_some_and(|s| s > night.rewind))
            .count();
        if retried > 0 {
            notes.push(format!(
                "{retried} payment(s) were sent again after the night: they are replayed on \
                 their current attempt, which the run had not seen"
            ));
        }
        done.push(NightResult {
            run: night.label,
            day: night.day,
            rows: before.data.rows.len(),
            flips: by_risk,
            notes,
        });
        flips.extend(night_flips);
    }
    Ok((done, skipped, flips, agreement))
}

/// Plans `night` with `rules`, as that run saw the ledger; changes nothing.
async fn replay(
    cfg: &Config,
    rules: &RuleSet,
    db: &Db,
    night: &Night,
) -> Result<crate::run::plan::Plan> {
    let job = Job {
        cfg,
        rules,
        db,
        as_of: night.as_of,
        part: Part::Whole,
        rewind: Some(night.rewind),
        ask_providers: false,
    };
    let opts = RunOptions {
        from: night.day,
        to: night.day,
        as_of: None,
        dry_run: true,
        run_id: None,
        wait: false,
    };
    Box::pin(crate::run::plan(
        job,
        &opts,
        "backtest",
        &mut Default::default(),
    ))
    .await
}

/// The latest completed night of each day of `from..=to`: a one-process run or a gathered
/// run group, whichever began later.
async fn recorded_nights(db: &Db, from: NaiveDate, to: NaiveDate) -> Result<Vec<Night>> {
    let (from_text, to_text) = (from.to_string(), to.to_string());
    let mut tx = db.begin().await?;
    let runs = tx.completed_runs_within(&from_text, &to_text).await?;
    let groups = tx.groups_within(&from_text, &to_text).await?;
    tx.rollback().await?;
    let mut by_day: BTreeMap<NaiveDate, Night> = BTreeMap::new();
    let mut keep = |n: Night| match by_day.get(&n.day) {
        Some(seen) if seen.rewind > n.rewind => {}
        _ => {
            by_day.insert(n.day, n);
        }
    };
    for (run_id, range_from, range_to, as_of, started_at, inputs) in runs {
        if range_from != range_to {
            continue;
        }
        let bad = |what: &str, v: &str| {
            fail(Failure::Database, format!("run {run_id}: bad {what} {v:?}"))
        };
        let day: NaiveDate = range_from
            .parse()
            .map_err(|_| bad("range_from", &range_from))?;
        let as_of = DateTime::parse_from_rfc3339(&as_of)
            .map_err(|_| bad("as_of", &as_of))?
            .timestamp_micros();
        let rewind = DateTime::parse_from_rfc3339(&started_at)
            .map_err(|_| bad("started_at", &started_at))?
            .timestamp_micros();
        keep(Night {
            inputs: serde_json::from_str(&inputs).unwrap_or_default(),
            label: run_id,
            day,
            as_of,
            rewind,
        });
    }
    for group in groups {
        let (_, day, as_of, inputs) = crate::explain::recorded_night(db, Some(&group)).await?;
        keep(Night {
            label: group,
            day,
            as_of,
            rewind: as_of,
            inputs,
        });
    }
    Ok(by_day.into_values().collect())
}

/// The job as the replay of a night reads it: each source reads only the files the night's
/// run read.
fn night_config(cfg: &Config, inputs: &[serde_json::Value]) -> Config {
    let mut cfg = cfg.clone();
    for s in &mut cfg.sources {
        // Each path as the run wrote it and as it resolves now (the run may have named the
        // job file otherwise: `SourceConfig::may_read`).
        let read: std::collections::BTreeSet<String> = inputs
            .iter()
            .filter(|i| i["source"].as_str() == Some(s.name.as_str()))
            .filter_map(|i| i["path"].as_str())
            .flat_map(|p| {
                let resolved = std::fs::canonicalize(p)
                    .ok()
                    .map(|c| c.display().to_string());
                std::iter::once(p.to_string()).chain(resolved)
            })
            .collect();
        s.replay = Some(std::sync::Arc::new(read));
    }
    cfg
}

/// Why the files a night read cannot be read again as they were (None: each is there with
/// the bytes the run read).
fn inputs_changed(inputs: &[serde_json::Value]) -> Option<String> {
    let mut problems = Vec::new();
    for i in inputs {
        let (Some(path), Some(sha)) = (i["path"].as_str(), i["sha256"].as_str()) else {
            continue;
        };
        match std::fs::read(Path::new(path)) {
            Err(e) => problems.push(format!("{path}: gone since the run ({e})")),
            Ok(bytes) => {
                let now = hex(&Sha256::digest(&bytes));
                if now != sha {
                    problems.push(format!(
                        "{path}: changed since the run (sha256 {} then, {} now)",
                        &sha[..sha.len().min(12)],
                        &now[..12]
                    ));
                }
            }
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Why the replay did not read the files the run read (None: the same files, by sha256). A
/// file the run did not read (delivered after the night, or read under another name) would
/// make it another night; a file the run read and the replay did not would compare two blind
/// plans and find nothing. Either skips the night.
fn inputs_differ(
    recorded: &[serde_json::Value],
    read: &[crate::sources::InputFile],
) -> Option<String> {
    let recorded_sha = |r: &serde_json::Value| r["sha256"].as_str().map(str::to_string);
    let known: std::collections::BTreeSet<String> =
        recorded.iter().filter_map(recorded_sha).collect();
    let unknown: Vec<&str> = read
        .iter()
        .filter(|f| !known.contains(&f.sha256))
        .map(|f| f.path.as_str())
        .collect();
    if !unknown.is_empty() {
        return Some(format!(
            "{}: not read by the run (delivered since, or changed)",
            unknown.join(", ")
        ));
    }
    let missing: Vec<&str> = recorded
        .iter()
        .filter(|r| recorded_sha(r).is_some_and(|sha| !read.iter().any(|f| f.sha256 == sha)))
        .filter_map(|r| r["path"].as_str())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{}: read by the run, not by the replay (hint: a source whose path changed in the \
             job file since)",
            missing.join(", ")
        )
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
