//! Recovery of an interrupted run: under the run lock, a run record still RUNNING belongs to a
//! process that ended before it finished its record. A run whose output folder was renamed into
//! place (its commit done, its `summary.json` written) is marked COMPLETED from that folder; any
//! other is marked FAILED, with the error the run could not record itself (a note it left in
//! the output folder when the database was what failed), else as interrupted. Unfinished
//! output folders are removed.

use crate::config::Config;
use crate::db::Db;
use crate::timeparse;
use anyhow::Result;
use chrono::Utc;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The error of a run that ended without saying why.
const KILLED: &str = "interrupted: the process ended before the run completed (killed or crashed)";

/// The file name ending of the note a failed run leaves when the database does not take its
/// error: `<output_dir>/<run id>.error`.
const NOTE_SUFFIX: &str = ".error";

/// Under the run lock no other run is alive, so a run record still RUNNING belongs to a run
/// that ended early (see the module docs). Its database effects are either all committed or
/// none are; a re-run reproduces its results.
pub(super) async fn recover_interrupted(db: &Db, cfg: &Config) -> Result<()> {
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    let running = tx.running_runs().await?;
    let mut notes = Vec::new();
    let (mut completed, mut failed) = (0, 0);
    for (run_id, day) in &running {
        if let Some((inputs, counts)) = finished_folder(cfg, run_id, day) {
            tx.complete_run(run_id, &inputs, &counts, &now).await?;
            completed += 1;
            continue;
        }
        let error = error_of(cfg, run_id, &mut notes);
        failed += tx.fail_runs(Some(run_id), &error, &now).await?;
    }
    tx.commit().await?;
    for note in notes {
        let _ = std::fs::remove_file(note);
    }
    if failed > 0 {
        tracing::warn!(runs = failed, "Marked interrupted runs as FAILED.");
    }
    if completed > 0 {
        tracing::warn!(
            runs = completed,
            "Marked runs that ended after their output was in place as COMPLETED."
        );
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

/// Why run `run_id` ended early: the note it left (kept in `notes`, removed after the
/// commit), else "interrupted".
fn error_of(cfg: &Config, run_id: &str, notes: &mut Vec<PathBuf>) -> String {
    let note = note_path(cfg, run_id);
    match std::fs::read_to_string(&note) {
        Ok(text) if !text.trim().is_empty() => {
            notes.push(note);
            text.trim_end().to_string()
        }
        _ => KILLED.to_string(),
    }
}

/// Where run `run_id` leaves the note of an error the database did not take.
fn note_path(cfg: &Config, run_id: &str) -> PathBuf {
    cfg.output_dir.join(format!("{run_id}{NOTE_SUFFIX}"))
}

/// Records that run `run_id` failed with `error`: in its run record when the database takes it
/// within `statement_timeout`, else (the database is most likely what failed) in a note beside
/// its output, which the next run's recovery puts into the record, so the record keeps the real
/// cause instead of "killed or crashed".
pub(super) async fn record_failure(db: &Db, cfg: &Config, run_id: &str, error: &str) {
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let written = tokio::time::timeout(db.limits().statement_timeout, async {
        let mut tx = db.begin().await?;
        tx.fail_runs(Some(run_id), error, &now).await?;
        tx.commit().await
    })
    .await;
    if matches!(written, Ok(Ok(()))) {
        return;
    }
    let note = note_path(cfg, run_id);
    let part = note.with_extension("error.part");
    let saved = std::fs::create_dir_all(&cfg.output_dir)
        .and_then(|()| std::fs::write(&part, format!("{error}\n")))
        .and_then(|()| std::fs::rename(&part, &note));
    match saved {
        Ok(()) => {
            tracing::debug!(run_id, note = %note.display(), "The run's error waits for the next run to record it.")
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            tracing::warn!(run_id, error = %e, "Cannot keep the run's error for the next run.");
        }
    }
}

/// The inputs and outcome counts (JSON, as the run record keeps them) of run `run_id`'s output
/// folder, when that folder was renamed into place and holds the run's `summary.json`: the run
/// committed and wrote everything, and only its record was left RUNNING. A single day's folder
/// is `<output_dir>/<run id>`; a range's day `<output_dir>/<range id>/<day>` (its run id is
/// `<range id>-<YYYYMMDD>`).
fn finished_folder(cfg: &Config, run_id: &str, day: &str) -> Option<(String, String)> {
    let mut folders = vec![cfg.output_dir.join(run_id)];
    if let Some(range) = run_id.strip_suffix(&format!("-{}", day.replace('-', ""))) {
        folders.push(cfg.output_dir.join(range).join(day));
    }
    folders.iter().find_map(|f| summary_of(f, run_id))
}

fn summary_of(folder: &Path, run_id: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string(folder.join("summary.json")).ok()?;
    let summary: serde_json::Value = serde_json::from_str(&text).ok()?;
    if summary.get("run_id")?.as_str()? != run_id || summary.get("dry_run")?.as_bool()? {
        return None;
    }
    let inputs = summary.get("inputs")?;
    let counts: BTreeMap<&str, u64> = summary
        .get("outcomes")?
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.as_str(), v.get("count")?.as_u64()?)))
        .collect::<Option<_>>()?;
    Some((
        serde_json::to_string(inputs).ok()?,
        serde_json::to_string(&counts).ok()?,
    ))
}

/// Recovery of shard `index` of run group `group` (under that shard's lock; other shards run
/// beside it, so nothing of theirs is touched): its runs still RUNNING are completed from
/// their folder or marked FAILED, and their unfinished folders are removed.
pub(super) async fn recover_shard(db: &Db, cfg: &Config, group: &str, index: u32) -> Result<()> {
    let now = timeparse::to_db(Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    let mine: Vec<String> = tx
        .shard_runs(group)
        .await?
        .into_iter()
        .filter(|r| r.shard == index && r.status == "RUNNING")
        .map(|r| r.run_id)
        .collect();
    let mut notes = Vec::new();
    for run_id in &mine {
        if let Some((inputs, counts)) = summary_of(&cfg.output_dir.join(run_id), run_id) {
            tx.complete_run(run_id, &inputs, &counts, &now).await?;
            continue;
        }
        let error = error_of(cfg, run_id, &mut notes);
        tx.fail_runs(Some(run_id), &error, &now).await?;
        tracing::warn!(run_id, "Marked this shard's interrupted run as FAILED.");
    }
    tx.commit().await?;
    for note in notes {
        let _ = std::fs::remove_file(note);
    }
    for run_id in &mine {
        let tmp = cfg.output_dir.join(format!("{run_id}.tmp"));
        if tmp.exists() {
            tracing::warn!(folder = %tmp.display(), "Removing the output of this shard's interrupted run.");
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
    Ok(())
}
