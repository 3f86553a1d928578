//! `recon pull`: fetches the files of remote sources (`sftp://`, `s3://`, `https://`) into the
//! local inbox, so that a run always reads local, hashed inputs.
//!
//! Each file is downloaded whole, checked (the size the server announced, the sha256 of the
//! bytes written read back) and only then renamed into `<inbox>/<source>/…`, so a failed
//! download never leaves a partial file where a run would read it. The source's
//! [`manifest`] records every version. Pulling again downloads nothing the server says is
//! unchanged (etag, size + mtime) and adds nothing whose bytes are the same; a file that
//! changed after it was pulled is kept beside the first (`….v2`) with a warning, and runs read
//! both under the re-delivery rules. A file the server does not have is missing, never empty.
//! Transient errors are retried with exponential backoff inside the source's time budget;
//! after it the file's day is recorded as failed, and runs treat that day as incomplete.

pub mod download;
pub mod https;
pub use crate::sources::manifest;
pub use crate::sources::remote;
pub mod s3;
pub mod sftp;

use crate::config::{Completeness, Config, SourceConfig, SourcePath};
use crate::exit::{Failure, fail};
use anyhow::Result;
use chrono::NaiveDate;
use download::Download;
use manifest::{Entry, Manifest};
use remote::{Location, Remote};
use std::path::Path;
use std::time::{Duration, Instant};

/// What one request for a remote file gave.
#[derive(Debug)]
pub enum Got {
    /// The server says the file is the one already pulled (etag or size + mtime).
    NotModified,
    /// The file's bytes were written to the [`download::Download`].
    Body {
        /// The size the server announced before sending it, if it did.
        declared: Option<u64>,
        /// Entity tag.
        etag: Option<String>,
        /// Modification time.
        mtime: Option<String>,
    },
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// The server does not have the file.
    NotFound,
    /// Worth retrying (timeout, connection reset, 5xx, 429, a truncated body).
    Transient(String),
    /// Not worth retrying (refused host key, authentication, permission).
    Fatal(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::NotFound => f.write_str("not found"),
            FetchError::Transient(m) | FetchError::Fatal(m) => f.write_str(m),
        }
    }
}

/// What the pull did with one remote file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// First version downloaded.
    New,
    /// Same as the version already pulled: nothing written.
    Unchanged,
    /// Changed since it was pulled: a new version kept beside the first.
    Changed,
    /// The server does not have it (the day stays incomplete).
    Missing,
    /// Could not be fetched within the retry budget, or refused (the day is incomplete).
    Failed,
}

/// One remote file of a pull.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pulled {
    /// Source name.
    pub source: String,
    /// Day (`None` for a fixed path).
    pub day: Option<String>,
    /// The remote location.
    pub remote: String,
    /// The local copy (a path), when there is one.
    pub local: Option<String>,
    /// What happened.
    pub status: Status,
    /// Requests that failed before the last one.
    pub retries: u32,
    /// Why it failed (for `Failed`).
    pub error: Option<String>,
    /// A failure that stops the source's other files (refused host key, authentication).
    #[serde(skip)]
    fatal: bool,
}

/// The result of `recon pull`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PullReport {
    /// Every remote file considered (data and control files), in order.
    pub files: Vec<Pulled>,
    /// What a person should know: changed files, missing files, failures.
    pub warnings: Vec<String>,
}

impl PullReport {
    /// Whether every remote file was fetched or is definitely missing (no failure).
    pub fn complete(&self) -> bool {
        !self.files.iter().any(|f| f.status == Status::Failed)
    }

    /// How many files had `status`.
    pub fn count(&self, status: Status) -> usize {
        self.files.iter().filter(|f| f.status == status).count()
    }

    /// One line for the terminal.
    pub fn text(&self) -> String {
        format!(
            "pull: {} new, {} changed (kept beside), {} unchanged, {} missing, {} failed",
            self.count(Status::New),
            self.count(Status::Changed),
            self.count(Status::Unchanged),
            self.count(Status::Missing),
            self.count(Status::Failed)
        )
    }
}

/// A connection to one source's server.
enum Client {
    Https(https::Client),
    S3(s3::Client),
    Sftp(Box<sftp::Client>),
}

impl Client {
    fn new(source: &str, remote: &Remote) -> Result<Client> {
        Ok(match &remote.location {
            Location::Https(_) => Client::Https(https::Client::new(source, remote)?),
            Location::S3 { .. } => Client::S3(s3::Client::new(source, remote)?),
            Location::Sftp { .. } => Client::Sftp(Box::new(sftp::Client::new(source, remote)?)),
        })
    }

    /// Forgets a connection that a timeout interrupted mid-request.
    fn reset(&mut self) {
        if let Client::Sftp(c) = self {
            c.reset();
        }
    }

    async fn get(
        &mut self,
        path: &str,
        known: Option<&Entry>,
        to: &mut Download,
    ) -> Result<Got, FetchError> {
        match self {
            Client::Https(c) => c.get(path, known, to).await,
            Client::S3(c) => c.get(path, known, to).await,
            Client::Sftp(c) => c.get(path, known, to).await,
        }
    }
}

/// Pulls every remote source's files for the days `from..=to` (a fixed remote path once).
/// An error is returned only for what stops the whole pull (configuration, credentials that
/// are not set, an inbox that cannot be written); a file that cannot be fetched is a
/// [`Status::Failed`] entry and a warning.
pub async fn pull(cfg: &Config, from: NaiveDate, to: NaiveDate) -> Result<PullReport> {
    let mut report = PullReport::default();
    for src in cfg.sources.iter().filter(|s| s.remote.is_some()) {
        pull_source(src, from, to, &mut report).await?;
    }
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    Ok(report)
}

async fn pull_source(
    src: &SourceConfig,
    from: NaiveDate,
    to: NaiveDate,
    report: &mut PullReport,
) -> Result<()> {
    let Some(remote) = &src.remote else {
        return Ok(());
    };
    let dir = remote.inbox_dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| {
        fail(
            Failure::Output,
            format!("source {}: cannot create {}: {e}", src.name, dir.display()),
        )
    })?;
    // One pull per source at a time (two `run --pull` may overlap before the run lock): the
    // manifest is read, changed and written whole. flock is released when the process dies.
    let _lock = lock(&dir, &src.name)?;
    let mut manifest = Manifest::load(&dir)?;
    let mut client = Client::new(&src.name, remote)?;
    let days: Vec<Option<String>> = match &src.path {
        SourcePath::Daily(_) => {
            let mut v = Vec::new();
            let mut d = from;
            while d <= to {
                v.push(Some(d.format("%Y-%m-%d").to_string()));
                match d.succ_opt() {
                    Some(n) => d = n,
                    None => break,
                }
            }
            v
        }
        SourcePath::Fixed { .. } => vec![None],
    };
    let deadline = Instant::now() + remote.budget;
    let mut fatal: Option<String> = None;
    for day in days {
        let date = day.clone().unwrap_or_default();
        let shown = remote.display_for(&date);
        let data = fetch_one(
            &mut client,
            src,
            remote,
            &dir,
            &mut manifest,
            FileRef {
                day: day.clone(),
                path: remote.remote_for(&date),
                shown: shown.clone(),
                local: remote.local.replace("{date}", &date),
                control_of: None,
            },
            deadline,
            fatal.as_deref(),
        )
        .await;
        if data.fatal {
            fatal = data.error.clone();
        }
        let local_data = data.local.clone();
        let status = data.status;
        report_file(report, &mut manifest, data, &src.name);
        // The control file goes with the data version it describes.
        if src.completeness == Completeness::ControlFile
            && matches!(status, Status::New | Status::Changed | Status::Unchanged)
            && let Some(local) = local_data
        {
            let rel = Path::new(&local)
                .strip_prefix(&dir)
                .map(|p| p.display().to_string())
                .unwrap_or(local);
            let ctl = fetch_one(
                &mut client,
                src,
                remote,
                &dir,
                &mut manifest,
                FileRef {
                    day: day.clone(),
                    path: control_path(&remote.remote_for(&date)),
                    shown: control_path(&shown),
                    local: format!("{rel}.ctl"),
                    control_of: Some(rel),
                },
                deadline,
                fatal.as_deref(),
            )
            .await;
            report_file(report, &mut manifest, ctl, &src.name);
        }
    }
    manifest
        .save(&dir)
        .map_err(|e| fail(Failure::Output, format!("source {}: {e:#}", src.name)))?;
    Ok(())
}

/// Holds an exclusive `flock` on `<dir>/.pull.lock` (exit code 6 when another pull has it).
fn lock(dir: &Path, source: &str) -> Result<std::fs::File> {
    use std::os::fd::AsRawFd as _;
    let path = dir.join(".pull.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| {
            fail(
                Failure::Output,
                format!("source {source}: cannot open {}: {e}", path.display()),
            )
        })?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(fail(
            Failure::Locked,
            format!(
                "source {source}: another recon pull holds {} (try again when it has finished)",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// The control file of a remote file: `<path>.ctl` (before a URL's query).
fn control_path(path: &str) -> String {
    match path.find(['?', '#']) {
        Some(i) => format!("{}.ctl{}", &path[..i], &path[i..]),
        None => format!("{path}.ctl"),
    }
}

fn report_file(report: &mut PullReport, manifest: &mut Manifest, p: Pulled, source: &str) {
    manifest.failed.retain(|f| f.remote != p.remote);
    let mut p = p;
    match p.status {
        Status::Changed => report.warnings.extend(p.error.take()),
        Status::Failed => {
            let error = p.error.clone().unwrap_or_default();
            report.warnings.push(format!(
                "source {source}: could not pull {} ({error}); {} is not treated as complete",
                p.remote,
                p.day
                    .as_deref()
                    .map(|d| format!("day {d}"))
                    .unwrap_or_else(|| "its period".into())
            ));
            manifest.failed.push(manifest::Failed {
                remote: p.remote.clone(),
                day: p.day.clone(),
                error,
                at: now_text(),
            });
        }
        Status::Missing if !p.remote.ends_with(".ctl") => report.warnings.push(format!(
            "source {source}: {} is not on the server (missing, not empty: {} stays incomplete)",
            p.remote,
            p.day
                .as_deref()
                .map(|d| format!("day {d}"))
                .unwrap_or_else(|| "its period".into())
        )),
        _ => {}
    }
    report.files.push(p);
}

/// One remote file to fetch.
struct FileRef {
    day: Option<String>,
    /// What the client asks for (path, key or URL).
    path: String,
    /// The location as shown and recorded.
    shown: String,
    /// The local copy of version 1, relative to the source's inbox folder.
    local: String,
    /// For a control file: the local data file (relative) it belongs to.
    control_of: Option<String>,
}

#[allow(clippy::too_many_arguments)]
async fn fetch_one(
    client: &mut Client,
    src: &SourceConfig,
    remote: &Remote,
    dir: &Path,
    manifest: &mut Manifest,
    file: FileRef,
    deadline: Instant,
    fatal: Option<&str>,
) -> Pulled {
    let mut out = Pulled {
        source: src.name.clone(),
        day: file.day.clone(),
        remote: file.shown.clone(),
        local: None,
        status: Status::Failed,
        retries: 0,
        error: None,
        fatal: false,
    };
    if let Some(e) = fatal {
        out.error = Some(format!("not tried: {e}"));
        return out;
    }
    // A control file is compared with the one of the data version it belongs to.
    let known = match &file.control_of {
        Some(_) => manifest
            .versions(&file.shown)
            .find(|e| Some(&e.local) == Some(&file.local))
            .cloned(),
        None => manifest.latest(&file.shown).cloned(),
    };
    let mut backoff = remote.initial_backoff;
    let (got, mut download) = loop {
        let mut download = match Download::new(dir) {
            Ok(d) => d,
            Err(e) => {
                out.error = Some(e.to_string());
                out.fatal = true;
                return out;
            }
        };
        let attempt = match tokio::time::timeout(
            remote.timeout,
            client.get(&file.path, known.as_ref(), &mut download),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => {
                client.reset();
                Err(FetchError::Transient(format!(
                    "timed out after {} s (timeout_seconds)",
                    remote.timeout.as_secs()
                )))
            }
        };
        let attempt = attempt.and_then(|g| match g {
            Got::Body {
                declared: Some(n), ..
            } if n != download.len() => Err(FetchError::Transient(format!(
                "truncated: {} of the {n} bytes the server announced",
                download.len()
            ))),
            Got::Body { .. } => download.finish().map(|_| g),
            g => Ok(g),
        });
        match attempt {
            Ok(g) => break (g, download),
            Err(FetchError::NotFound) => {
                out.status = Status::Missing;
                return out;
            }
            Err(FetchError::Fatal(e)) => {
                out.error = Some(e);
                out.fatal = true;
                return out;
            }
            Err(FetchError::Transient(e)) => {
                let now = Instant::now();
                if now + backoff > deadline {
                    out.error = Some(format!(
                        "{e}; gave up after {} retries (retry_budget_seconds = {})",
                        out.retries,
                        remote.budget.as_secs()
                    ));
                    return out;
                }
                tracing::info!(source = %src.name, remote = %file.shown, error = %e, "Retrying.");
                out.retries += 1;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    };
    let (etag, mtime) = match got {
        Got::NotModified => {
            out.status = Status::Unchanged;
            out.local = known.map(|k| dir.join(&k.local).display().to_string());
            return out;
        }
        Got::Body { etag, mtime, .. } => (etag, mtime),
    };
    let sha = match download.finish() {
        Ok(sha) => sha,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let size = download.len();
    let versions: Vec<Entry> = match &file.control_of {
        Some(_) => manifest
            .versions(&file.shown)
            .filter(|e| e.local.starts_with(&file.local))
            .cloned()
            .collect(),
        None => manifest.versions(&file.shown).cloned().collect(),
    };
    if let Some(same) = versions.iter().find(|e| e.sha256 == sha) {
        // Same bytes: nothing new. Remember the server's new etag/mtime so the next pull can
        // skip the download.
        let local = same.local.clone();
        if let Some(e) = manifest
            .files
            .iter_mut()
            .rev()
            .find(|e| e.remote == file.shown && e.local == local)
            && (e.etag != etag || e.mtime != mtime)
        {
            e.etag = etag;
            e.mtime = mtime;
        }
        out.status = Status::Unchanged;
        out.local = Some(dir.join(local).display().to_string());
        return out;
    }
    // Never reuse a local name, even one the manifest does not list (a crash between the
    // rename and the manifest write): kept versions are never overwritten.
    let mut version = versions.iter().map(|e| e.version).max().unwrap_or(0) + 1;
    while dir
        .join(manifest::version_name(&file.local, version))
        .exists()
    {
        version += 1;
    }
    let local = manifest::version_name(&file.local, version);
    if let Err(e) = download.keep(&dir.join(&local)) {
        out.error = Some(e.to_string());
        return out;
    }
    if version > 1 {
        let first = versions
            .first()
            .map(|e| e.pulled_at.clone())
            .unwrap_or_default();
        out.status = Status::Changed;
        let what = if file.control_of.is_some() {
            "its data file was not changed, so runs do not read this control file"
        } else {
            "runs read both; lines it delivers again count once (re-delivery rules)"
        };
        tracing::warn!(source = %src.name, remote = %file.shown, version, "Remote file changed since it was pulled.");
        // report_file moves it to the warnings.
        out.error = Some(format!(
            "source {}: {} changed since it was pulled on {first} (sha256 {} → {sha}); kept beside the first as {local}: {what}",
            src.name,
            file.shown,
            versions.last().map(|e| e.sha256.as_str()).unwrap_or("?"),
        ));
    } else {
        out.status = Status::New;
    }
    manifest.files.push(Entry {
        remote: file.shown.clone(),
        local: local.clone(),
        version,
        size,
        etag,
        mtime,
        sha256: sha,
        pulled_at: now_text(),
    });
    out.local = Some(dir.join(local).display().to_string());
    out
}

fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
