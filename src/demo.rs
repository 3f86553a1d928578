//! `recon demo`: a fresh SQLite database, the bundled sample ledger imported, one run.

use crate::config::Config;
use crate::run::{RunOptions, RunReport};
use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use std::path::Path;

/// The sample's run date and cut-off (the sample statement is complete up to 2026-11-30).
pub const SAMPLE_DATE: &str = "2026-11-27";
/// The sample's as-of: late enough to close most windows, early enough that one UNKNOWN
/// payment from the evening is still AWAITING_EVIDENCE.
pub const SAMPLE_AS_OF: &str = "2026-12-01T12:00:00Z";

/// Runs the demo from `sample_dir` (holding recon.toml, payments.csv, attempts.csv,
/// statement.csv). The database named in recon.toml is deleted first.
pub async fn run(sample_dir: &Path) -> Result<RunReport> {
    let cfg = Config::load(&sample_dir.join("recon.toml"))?;
    let Some(file) = cfg.database_url.strip_prefix("sqlite://") else {
        return Err(crate::exit::fail(
            crate::exit::Failure::Config,
            "the demo uses the embedded SQLite database (hint: unset RECON_DATABASE_URL / DATABASE_URL)",
        ));
    };
    {
        for suffix in ["", "-wal", "-shm"] {
            let p = format!("{file}{suffix}");
            if Path::new(&p).exists() {
                std::fs::remove_file(&p)
                    .with_context(|| format!("removing old demo database {p}"))?;
            }
        }
    }
    let db = crate::db::Db::open(&cfg.database_url).await?;
    crate::ledger::import::import(
        &db,
        &sample_dir.join("payments.csv"),
        Some(&sample_dir.join("attempts.csv")),
    )
    .await?;
    db.close().await;
    let date: NaiveDate = SAMPLE_DATE.parse()?;
    let as_of: DateTime<Utc> = SAMPLE_AS_OF.parse()?;
    crate::run::run(
        &cfg,
        &RunOptions {
            from: date,
            to: date,
            as_of: Some(as_of),
            dry_run: false,
            run_id: None,
            wait: false,
        },
    )
    .await
}
