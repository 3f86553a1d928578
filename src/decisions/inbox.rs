//! The decisions inbox (`decisions_inbox`): `<inbox>/<reviewer>/*.xlsx`, applied by the next
//! `recon run` before it reconciles, the way statements arrive. The sub-folder's name is the
//! actor: the file store's permissions are the authentication (only that reviewer can write
//! there), so a sub-folder that others can write to is skipped with a warning. Each file done
//! is moved to `<reviewer>/done/` with its result file beside it.

use super::result::FileResult;
use crate::config::DecisionSettings;
use crate::db::Db;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What the inbox held and what became of it.
#[derive(Debug, Default)]
pub struct InboxReport {
    /// One result per file applied (moved to `done/`).
    pub files: Vec<FileResult>,
    /// Folders or files left alone, and why.
    pub skipped: Vec<String>,
}

/// Whether others than the owner can write to `dir` (group or world write bit).
#[cfg(unix)]
fn writable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o022 != 0)
}

#[cfg(not(unix))]
fn writable_by_others(_dir: &Path) -> bool {
    false
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}

/// Applies every `*.xlsx` in the inbox's reviewer folders, in name order, each as its folder's
/// reviewer, and moves it with its result to `done/`. A missing inbox folder is no error.
pub async fn apply_inbox(db: &Db, settings: &DecisionSettings) -> Result<InboxReport> {
    let mut report = InboxReport::default();
    let Some(inbox) = &settings.inbox else {
        return Ok(report);
    };
    if !inbox.is_dir() {
        return Ok(report);
    }
    for dir in sorted_entries(inbox)? {
        if !dir.is_dir() {
            continue;
        }
        let actor = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if writable_by_others(&dir) {
            report.skipped.push(format!(
                "{}: writable by others than its reviewer, so its name proves nothing: its files \
                 are not applied (hint: chmod go-w)",
                dir.display()
            ));
            continue;
        }
        if super::apply::check_actor(&actor).is_err() {
            report.skipped.push(format!(
                "{}: not a reviewer's name, its files are not applied",
                dir.display()
            ));
            continue;
        }
        for file in sorted_entries(&dir)? {
            let is_xlsx = file
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("xlsx"));
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            // Spreadsheet lock files (`~$name.xlsx`) and half-copied files are not decisions.
            if !file.is_file() || !is_xlsx || name.as_deref().is_some_and(|n| n.starts_with("~$")) {
                continue;
            }
            let result = super::apply::apply_file(db, settings, &file, &actor).await?;
            let done = dir.join("done");
            std::fs::create_dir_all(&done)
                .with_context(|| format!("creating {}", done.display()))?;
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
            let target = done.join(format!("{stamp}-{}", name.unwrap_or_default()));
            std::fs::rename(&file, &target)
                .with_context(|| format!("moving {} to {}", file.display(), target.display()))?;
            let moved = FileResult {
                path: target,
                ..result
            };
            moved.write()?;
            tracing::info!(file = %moved.path.display(), actor = %actor, applied = moved.count(super::result::Status::Applied), refused = moved.count(super::result::Status::Refused), "Decision file applied.");
            report.files.push(moved);
        }
    }
    for s in &report.skipped {
        tracing::warn!(skipped = %s, "Decisions inbox.");
    }
    Ok(report)
}
