//! Recovery of an interrupted run: under the run lock, a run record still RUNNING belongs to a
//! process that was killed; it is marked FAILED and its unfinished output folders are removed.

use crate::config::Config;
use crate::db::Db;
use crate::timeparse;
use anyhow::Result;
use chrono::Utc;

/// Under the run lock no other run is alive, so a run record still RUNNING belongs to a run
/// that was killed: mark it FAILED, and remove the output folders it never renamed into place
/// (its database effects are either all committed or none are; a re-run reproduces its results).
pub(super) async fn recover_interrupted(db: &Db, cfg: &Config) -> Result<()> {
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    let n = tx
        .fail_runs(
            None,
            "interrupted: the process ended before the run completed (killed or crashed)",
            &now,
        )
        .await?;
    tx.commit().await?;
    if n > 0 {
        tracing::warn!(runs = n, "Marked interrupted runs as FAILED.");
    }
    let Ok(entries) = std::fs::read_dir(&cfg.output_dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "tmp") {
            tracing::warn!(folder = %path.display(), "Removing the output of an interrupted run.");
            let _ = std::fs::remove_dir_all(&path);
        } else if path.is_dir()
            // A finished run or range has its summary.json; only an unfinished range can hold
            // a day's `.tmp` folder.
            && !path.join("summary.json").exists()
            && let Ok(days) = std::fs::read_dir(&path)
        {
            for d in days.flatten() {
                if d.path().extension().is_some_and(|x| x == "tmp") {
                    let _ = std::fs::remove_dir_all(d.path());
                }
            }
        }
    }
    Ok(())
}
