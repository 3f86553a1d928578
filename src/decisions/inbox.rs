//! The decisions inbox (`decisions_inbox`): `<inbox>/<reviewer>/*.xlsx`, applied by the next
//! `recon run` before it reconciles, the way statements arrive.
//!
//! The file store's owners are the authentication, and recon only reads there:
//! - the inbox folder itself must not be writable by others than its owner (else anyone could
//!   make a folder named after a reviewer): when it is, nothing in it is applied;
//! - with `[[reviewer]]`, a sub-folder is applied only when its owner (uid) is the reviewer it
//!   is named after; without, its name is the actor. Either way a sub-folder that others can
//!   write to, or whose name is not a valid name (blanks at the ends, invisible characters),
//!   is skipped;
//! - a symbolic link, a FIFO, a device or a folder inside a reviewer's folder is skipped
//!   without being opened (`symlink_metadata`; the file is then opened with `O_NOFOLLOW` and
//!   `O_NONBLOCK` and checked again on the open descriptor);
//! - a file is applied in one transaction with its record (`decision_files`: sha256, path,
//!   reviewer); just before the record the file at its path is compared with what was read
//!   (inode, size, modification time and sha256): a file replaced meanwhile rolls back and
//!   is applied by the next run as the file it is then;
//! - recon never writes into a reviewer's folder: a file stays where the reviewer put it, the
//!   same bytes by the same reviewer are never applied twice (and are no error), and the
//!   result file goes to `<output_dir>/decisions/<reviewer>/<name>.<sha256 prefix>.result.csv`.
//!
//! Nothing in the inbox stops the night: every folder or file skipped, with why, is in the
//! run's `summary.json` (`inbox`), its email and `inbox_records`.

use super::apply::{self, Finished, Read};
use super::result::FileResult;
use crate::config::DecisionSettings;
use crate::db::Db;
use crate::outputs::summary::{InboxApplied, InboxSkipped, InboxSummary};
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// What the inbox held and what became of it.
#[derive(Debug, Default)]
pub struct InboxReport {
    /// One result per file applied now.
    pub files: Vec<FileResult>,
    /// What summary.json and the email show: applied, skipped with why, applied before.
    pub summary: InboxSummary,
}

impl InboxReport {
    fn skip(&mut self, path: &Path, why: impl Into<String>) {
        let why = why.into();
        tracing::warn!(path = %path.display(), why = %why, "Decisions inbox: skipped.");
        self.summary.skipped.push(InboxSkipped {
            path: path.display().to_string(),
            why,
        });
    }
}

/// Whether others than the owner can write to it (group or world write bit).
#[cfg(unix)]
fn writable_by_others(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    m.permissions().mode() & 0o022 != 0
}

#[cfg(not(unix))]
fn writable_by_others(_m: &std::fs::Metadata) -> bool {
    false
}

/// Its permission bits as `ls` shows them in octal (`0755`).
#[cfg(unix)]
fn mode_text(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    format!("mode {:04o}", m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_text(_m: &std::fs::Metadata) -> String {
    String::new()
}

/// The uid that owns it.
#[cfg(unix)]
fn owner(m: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    Some(m.uid())
}

#[cfg(not(unix))]
fn owner(_m: &std::fs::Metadata) -> Option<u32> {
    None
}

/// The reviewer whose folder `dir` (named `name`, `meta` its own metadata, not a link's
/// target's) is, or why it is no reviewer's.
fn folder_reviewer(
    settings: &DecisionSettings,
    meta: &std::fs::Metadata,
    name: &str,
) -> Result<String, String> {
    if let Some(why) = crate::textsafe::bad_name(name) {
        return Err(format!("its name {why}: not a reviewer's name"));
    }
    if writable_by_others(meta) {
        return Err(format!(
            "writable by others than its reviewer ({}), so its name proves nothing \
             (hint: chmod go-w)",
            mode_text(meta)
        ));
    }
    if settings.reviewers.is_empty() {
        return super::reviewers::canonical(settings, name).map_err(|e| format!("{e:#}"));
    }
    let Some(uid) = owner(meta) else {
        return Err("its owner cannot be read".into());
    };
    match super::reviewers::of_uid(&settings.reviewers, uid) {
        Some(r) if crate::textsafe::same_name(&r.name, name) => Ok(r.name.clone()),
        Some(r) => Err(format!(
            "owned by {}, who is reviewer {}, not {:?}: its files are not applied as {:?}",
            super::reviewers::describe_uid(uid),
            r.name,
            crate::textsafe::visible(name),
            crate::textsafe::visible(name)
        )),
        None => Err(format!(
            "owned by {}, who is no [[reviewer]] of this job",
            super::reviewers::describe_uid(uid)
        )),
    }
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        out.push(e?.path());
    }
    out.sort();
    Ok(out)
}

/// What identifies the file a descriptor was opened on: a file replaced at its path (a new
/// inode) or written again (size, modification time) is another file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt as _;
    Identity {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    }
}

#[cfg(not(unix))]
fn identity(m: &std::fs::Metadata) -> Identity {
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or((0, 0), |d| {
            (d.as_secs() as i64, i64::from(d.subsec_nanos()))
        });
    Identity {
        dev: 0,
        ino: 0,
        len: m.len(),
        mtime,
    }
}

/// Opens `path` without following a symbolic link and without waiting on a FIFO, checks on
/// the open descriptor that it is a regular file, and reads it: its bytes and identity, or why
/// not.
fn read_plain(path: &Path, max: u64) -> Result<(Vec<u8>, Identity), String> {
    use std::io::Read as _;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let f = options
        .open(path)
        .map_err(|e| format!("cannot be opened: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file: never read".into());
    }
    if meta.len() > max {
        return Err(too_large(meta.len(), max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64, max));
    }
    Ok((bytes, identity(&meta)))
}

/// Why a decision file of `len` bytes is not read.
fn too_large(len: u64, max: u64) -> String {
    format!(
        "{len} bytes or more, more than max_file_mb = {} allows: never read (a Decide sheet is \
         a few MB)",
        max >> 20
    )
}

/// Why the file at `path` is no longer the one read (`was`, with sha256 `sha256`), or None.
fn changed_since(path: &Path, was: Identity, sha256: &str, max: u64) -> Option<String> {
    let then = "nothing of it was applied; the next run applies the file that is there then";
    let now = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("gone since it was read ({e}): {then}")),
    };
    if identity(&now) != was {
        return Some(format!("replaced or written while it was applied: {then}"));
    }
    match read_plain(path, max) {
        Ok((bytes, _)) if hex::encode(Sha256::digest(&bytes)) == sha256 => None,
        Ok(_) => Some(format!("its content changed while it was applied: {then}")),
        Err(why) => Some(format!("{why} since it was read: {then}")),
    }
}

/// The folder of recon's own where a reviewer's result files go: the name as a single path
/// component (never `..`, never a separator).
fn own_folder(settings: &DecisionSettings, reviewer: &str) -> PathBuf {
    let mut name: String = reviewer
        .chars()
        .map(|c| if matches!(c, '/' | '\\') { '_' } else { c })
        .collect();
    if name.chars().all(|c| c == '.') {
        name = name.replace('.', "_");
    }
    settings.results_dir.join(name)
}

/// Whether `actor` applied these bytes before.
async fn applied_before(db: &Db, sha256: &str, actor: &str) -> Result<bool> {
    let mut tx = db.begin().await?;
    let found = tx.decision_file(sha256, actor).await?;
    tx.rollback().await?;
    Ok(found.is_some())
}

/// One entry of a reviewer's folder.
async fn one_file(
    db: &Db,
    settings: &DecisionSettings,
    file: &Path,
    actor: &str,
    report: &mut InboxReport,
) {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta = match std::fs::symlink_metadata(file) {
        Ok(m) => m,
        Err(e) => return report.skip(file, format!("cannot be read: {e}")),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return report.skip(
            file,
            "a symbolic link: never followed (its target may be a file its reviewer cannot \
             even read)",
        );
    }
    if kind.is_dir() {
        return report.skip(
            file,
            "a folder: only files directly in a reviewer's folder are applied",
        );
    }
    if !kind.is_file() {
        return report.skip(
            file,
            "not a regular file (a FIFO, socket or device): never opened",
        );
    }
    if name.starts_with("~$") {
        return report.skip(
            file,
            "a spreadsheet program's lock file (the workbook is open somewhere)",
        );
    }
    let is_xlsx = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("xlsx"));
    if !is_xlsx {
        return report.skip(file, "not an .xlsx file");
    }
    let (bytes, was) = match read_plain(file, settings.max_file_bytes) {
        Ok(read) => read,
        Err(why) => return report.skip(file, why),
    };
    let sha256 = hex::encode(Sha256::digest(&bytes));
    match applied_before(db, &sha256, actor).await {
        Ok(true) => {
            report
                .summary
                .applied_before
                .push(file.display().to_string());
            return;
        }
        Ok(false) => {}
        Err(e) => {
            return report.skip(
                file,
                format!("cannot be checked against the database: {e:#}; not applied"),
            );
        }
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "decisions".into());
    let result_file = own_folder(settings, actor).join(format!(
        "{stem}.{}.result.csv",
        sha256.get(..12).unwrap_or(&sha256)
    ));
    let still = || changed_since(file, was, &sha256, settings.max_file_bytes);
    let read = Read {
        path: file,
        bytes: &bytes,
        result_file: &result_file,
    };
    let result = match apply::apply_read(db, settings, read, actor, Some(&still)).await {
        Ok(Finished::Done(r)) => r,
        Ok(Finished::Changed(why)) => return report.skip(file, why),
        Err(e) => return report.skip(file, format!("not applied: {e:#}")),
    };
    // A file that is no readable Decide sheet is refused whole and recorded nowhere: the
    // reviewer's corrected file (or this one, once readable) is applied by a later run.
    if let Some(whole) = result.rows.iter().find(|r| r.row_no == 0) {
        return report.skip(file, whole.detail.clone());
    }
    let written = std::fs::create_dir_all(result_file.parent().unwrap_or(Path::new(".")))
        .map_err(anyhow::Error::from)
        .and_then(|()| result.write_to(&result_file));
    let note = match &written {
        Ok(()) => String::new(),
        Err(e) => format!("applied, but its result file could not be written: {e:#}"),
    };
    if !note.is_empty() {
        tracing::warn!(file = %file.display(), note = %note, "Decisions inbox.");
    }
    tracing::info!(
        file = %file.display(),
        actor = %actor,
        applied = result.count(super::result::Status::Applied),
        refused = result.count(super::result::Status::Refused),
        result = %result_file.display(),
        "Decision file applied."
    );
    report.summary.applied.push(InboxApplied {
        path: file.display().to_string(),
        reviewer: actor.to_string(),
        sha256: sha256.clone(),
        result_file: written.is_ok().then(|| result_file.display().to_string()),
        rows: result.counts(),
        note,
    });
    report.files.push(result);
}

/// Applies every `*.xlsx` in the inbox's reviewer folders, in name order, each as its folder's
/// reviewer (see the module docs). Never fails: whatever cannot be applied is skipped and
/// named, with why, in the report. A missing inbox folder is no error.
pub async fn apply_inbox(db: &Db, settings: &DecisionSettings) -> Result<InboxReport> {
    let mut report = InboxReport::default();
    let Some(inbox) = &settings.inbox else {
        return Ok(report);
    };
    report.summary.folder = inbox.display().to_string();
    // The inbox folder itself may be a link (a mounted volume): its target is what counts.
    let root = match std::fs::metadata(inbox) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => {
            report.skip(
                inbox,
                format!("cannot be read: {e}; nothing in it is applied"),
            );
            return Ok(report);
        }
    };
    if !root.is_dir() {
        report.skip(inbox, "not a folder; nothing is applied");
        return Ok(report);
    }
    if writable_by_others(&root) {
        report.skip(
            inbox,
            format!(
                "writable by others than its owner ({}): anyone could make a folder named \
                 after a reviewer in it, so nothing in it is applied (hint: chmod go-w)",
                mode_text(&root)
            ),
        );
        return Ok(report);
    }
    let folders = match sorted_entries(inbox) {
        Ok(f) => f,
        Err(e) => {
            report.skip(
                inbox,
                format!("cannot be listed: {e}; nothing in it is applied"),
            );
            return Ok(report);
        }
    };
    for dir in folders {
        let meta = match std::fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(e) => {
                report.skip(&dir, format!("cannot be read: {e}"));
                continue;
            }
        };
        // A symbolic link is not a reviewer's folder: its target's owner proves nothing.
        if meta.file_type().is_symlink() {
            report.skip(
                &dir,
                "a symbolic link: never followed (a reviewer's folder is a folder of its own)",
            );
            continue;
        }
        if !meta.is_dir() {
            report.skip(
                &dir,
                "not a folder: decision files go in the reviewer's own folder, <inbox>/<reviewer>/",
            );
            continue;
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let actor = match folder_reviewer(settings, &meta, &name) {
            Ok(a) => a,
            Err(why) => {
                report.skip(&dir, format!("{why}; its files are not applied"));
                continue;
            }
        };
        let files = match sorted_entries(&dir) {
            Ok(f) => f,
            Err(e) => {
                report.skip(
                    &dir,
                    format!("cannot be listed: {e}; its files are not applied"),
                );
                continue;
            }
        };
        for file in files {
            one_file(db, settings, &file, &actor, &mut report).await;
        }
    }
    Ok(report)
}

/// [`apply_inbox`] for the run `run_id`, whose record (`inbox_records`) keeps what it did:
/// the run's summary.json and email are made from it ([`recorded`]). A record that cannot be
/// written is a warning: the run goes on.
pub async fn apply_for_run(db: &Db, settings: &DecisionSettings, run_id: &str) -> InboxReport {
    let report = match apply_inbox(db, settings).await {
        Ok(r) => r,
        Err(e) => {
            // apply_inbox names every failure in its report; this is only a guard.
            let mut r = InboxReport::default();
            if let Some(inbox) = &settings.inbox {
                r.summary.folder = inbox.display().to_string();
                r.skip(inbox, format!("{e:#}"));
            }
            r
        }
    };
    if settings.inbox.is_none() {
        return report;
    }
    let now = crate::timeparse::to_db(chrono::Utc::now().timestamp_micros());
    let stored = async {
        let json = serde_json::to_string(&report.summary)?;
        let mut tx = db.begin().await?;
        let new = tx.record_inbox(run_id, &json, &now).await?;
        tx.commit().await?;
        anyhow::Ok(new)
    }
    .await;
    match stored {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            run_id,
            "Decisions inbox: run id already has a record (kept); the log above says what this pass did."
        ),
        Err(e) => tracing::warn!(
            run_id,
            error = %format!("{e:#}"),
            "Decisions inbox: what it did could not be recorded; the log above says it."
        ),
    }
    report
}

/// What the inbox pass of run `run_id` recorded, if it had one. A record that cannot be read
/// is a warning (the run's summary then lacks it; the log and `inbox_records` keep it).
pub async fn recorded(db: &Db, run_id: &str) -> Option<InboxSummary> {
    let read = async {
        let mut tx = db.begin().await?;
        let json = tx.inbox_record(run_id).await?;
        tx.rollback().await?;
        anyhow::Ok(json.map(|j| serde_json::from_str(&j)).transpose()?)
    }
    .await;
    read.unwrap_or_else(|e| {
        tracing::warn!(run_id, error = %format!("{e:#}"), "Decisions inbox: its record cannot be read.");
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> DecisionSettings {
        DecisionSettings {
            inbox: None,
            approvals: 1,
            approvals_succeeded: 1,
            reviewers: Vec::new(),
            results_dir: PathBuf::from("out/decisions"),
            apply_wait: crate::config::DEFAULT_APPLY_WAIT,
            max_file_bytes: 1 << 20,
            workbook: crate::workbook::WorkbookLimits::default(),
            dismiss_reasons: crate::config::default_dismiss_reasons(),
            write_off_limit: Default::default(),
        }
    }

    #[test]
    fn a_reviewers_own_folder_is_one_path_component_under_recons_folder() {
        let s = settings();
        for (name, want) in [
            ("bob", "bob"),
            ("Anna Müller", "Anna Müller"),
            ("a/../b", "a_.._b"),
            ("..", "__"),
            (".", "_"),
            ("x\\y", "x_y"),
        ] {
            assert_eq!(
                own_folder(&s, name),
                PathBuf::from("out/decisions").join(want)
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_others_can_write_to_or_badly_named_is_no_reviewers() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let s = settings();
        for (mode, name, why) in [
            (
                0o775,
                "bob",
                "writable by others than its reviewer (mode 0775)",
            ),
            (0o757, "bob", "mode 0757"),
            (0o755, "bob ", "must not begin or end with a blank"),
            (0o755, "bo\u{200B}b", "control or invisible character"),
        ] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode))
                .expect("chmod");
            let meta = std::fs::symlink_metadata(dir.path()).expect("meta");
            let err = folder_reviewer(&s, &meta, name).expect_err(name);
            assert!(err.contains(why), "{name:?} {mode:o}: {err}");
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let meta = std::fs::symlink_metadata(dir.path()).expect("meta");
        assert_eq!(folder_reviewer(&s, &meta, "bob").as_deref(), Ok("bob"));
    }
}
