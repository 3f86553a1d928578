//! The decisions inbox (`decisions_inbox`): `<inbox>/<reviewer>/*.xlsx`, applied by the next
//! `recon run` before it reconciles, the way statements arrive. The file store's permissions
//! are the authentication: with `[[reviewer]]`, a sub-folder is applied only when its owner
//! (uid) is the reviewer it is named after; without, its name is the actor. Either way a
//! sub-folder that others can write to, or whose name is not a valid name (blanks at the
//! ends, invisible characters), is skipped with a warning. Each file done is moved to
//! `<reviewer>/done/` with its result file beside it.

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

/// The uid that owns `dir`.
#[cfg(unix)]
fn owner(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(dir).ok().map(|m| m.uid())
}

#[cfg(not(unix))]
fn owner(_dir: &Path) -> Option<u32> {
    None
}

/// The reviewer whose folder `dir` (named `name`) is, or why it is no reviewer's.
fn folder_reviewer(settings: &DecisionSettings, dir: &Path, name: &str) -> Result<String, String> {
    if let Some(why) = crate::textsafe::bad_name(name) {
        return Err(format!("its name {why}: not a reviewer's name"));
    }
    if writable_by_others(dir) {
        return Err(
            "writable by others than its reviewer, so its name proves nothing \
                    (hint: chmod go-w)"
                .into(),
        );
    }
    if settings.reviewers.is_empty() {
        return super::reviewers::canonical(settings, name).map_err(|e| format!("{e:#}"));
    }
    let Some(uid) = owner(dir) else {
        return Err("its owner cannot be read".into());
    };
    match super::reviewers::of_uid(&settings.reviewers, uid) {
        Some(r) if crate::textsafe::same_name(&r.name, name) => Ok(r.name.clone()),
        Some(r) => Err(format!(
            "owned by {}, who is reviewer {}, not {name:?}: its files are not applied as {name:?}",
            super::reviewers::describe_uid(uid),
            r.name
        )),
        None => Err(format!(
            "owned by {}, who is no [[reviewer]] of this job",
            super::reviewers::describe_uid(uid)
        )),
    }
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
        // A symbolic link is not a reviewer's folder: its target's owner proves nothing.
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let actor = match folder_reviewer(settings, &dir, &name) {
            Ok(a) => a,
            Err(why) => {
                report.skipped.push(format!(
                    "{}: {why}; its files are not applied",
                    dir.display()
                ));
                continue;
            }
        };
        for file in sorted_entries(&dir)? {
            let is_xlsx = file
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("xlsx"));
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            // Spreadsheet lock files (`~$name.xlsx`) and half-copied files are not decisions.
            // A symbolic link is never applied: its target may be a file its reviewer
            // cannot even read.
            let plain = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
            if !plain || !is_xlsx || name.as_deref().is_some_and(|n| n.starts_with("~$")) {
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
