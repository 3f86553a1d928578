//! `<inbox>/<source>/manifest.json`: what `recon pull` fetched (every version of every remote
//! file: remote location, local copy, size, etag or mtime, sha256, when) and which remote files
//! it could not fetch. Runs read it to know a pulled source's versions and failed days.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of a source's manifest inside its inbox folder.
pub const FILE_NAME: &str = "manifest.json";

/// One version of a remote file, as pulled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The remote location (no credentials are ever in it).
    pub remote: String,
    /// The local copy, relative to the source's inbox folder.
    pub local: String,
    /// 1 for the first version pulled, then 2, 3 … when the remote file changed.
    pub version: u32,
    /// Bytes.
    pub size: u64,
    /// The server's entity tag (https, S3), when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The server's modification time (RFC 3339 for S3 and SFTP, the Last-Modified header
    /// for https), when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<String>,
    /// sha256 of the bytes (hex).
    pub sha256: String,
    /// When it was pulled (RFC 3339, UTC).
    pub pulled_at: String,
}

/// A remote file the last pull could not fetch (after its retries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failed {
    /// The remote location.
    pub remote: String,
    /// The day it is the file of (`YYYY-MM-DD`), or none for a fixed path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The last error.
    pub error: String,
    /// When the pull gave up (RFC 3339, UTC).
    pub at: String,
}

/// The manifest of one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Every version pulled, in pull order.
    pub files: Vec<Entry>,
    /// Remote files whose last pull failed.
    #[serde(default)]
    pub failed: Vec<Failed>,
}

impl Manifest {
    /// Reads `<dir>/manifest.json` (an empty manifest when there is none).
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a pull manifest", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes it atomically (temporary file, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        write_atomic(dir, FILE_NAME, text.as_bytes())
            .with_context(|| format!("cannot write {}", dir.join(FILE_NAME).display()))
    }

    /// The versions of `remote`, oldest first.
    pub fn versions<'a>(&'a self, remote: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.files.iter().filter(move |e| e.remote == remote)
    }

    /// The latest version of `remote`.
    pub fn latest(&self, remote: &str) -> Option<&Entry> {
        self.files.iter().rfind(|e| e.remote == remote)
    }
}

/// The local name of version `n` of a file whose first version is `local`: `local` itself,
/// then `local.v2`, `local.v3` … (a control file follows its data file: `local.v2.ctl`).
pub fn version_name(local: &str, n: u32) -> String {
    if n <= 1 {
        local.to_string()
    } else {
        format!("{local}.v{n}")
    }
}

/// The local files of a pulled source's file `path` (its first version): `path`, then every
/// later version that exists, in order. Runs read them all; lines a later version delivers
/// again are dropped by the re-delivery rules.
pub fn local_versions(path: &Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    let text = path.display().to_string();
    for n in 2.. {
        let p = PathBuf::from(version_name(&text, n));
        if !p.exists() {
            break;
        }
        out.push(p);
    }
    out
}

/// Why a pulled source is not complete for `day` (`None`: a fixed file): the failures the
/// last pull recorded in `dir`'s manifest.
pub fn failures(dir: &Path, day: Option<&str>) -> Vec<Failed> {
    match Manifest::load(dir) {
        Ok(m) => m
            .failed
            .into_iter()
            .filter(|f| f.day.as_deref() == day)
            .collect(),
        // A manifest that cannot be read proves nothing about what was pulled.
        Err(e) => vec![Failed {
            remote: dir.join(FILE_NAME).display().to_string(),
            day: day.map(str::to_string),
            error: format!("{e:#}"),
            at: String::new(),
        }],
    }
}

/// Writes `bytes` to `dir/rel` atomically (the manifest): a temporary file beside it, fsync,
/// rename over the target, folder synced. A failure leaves nothing behind.
fn write_atomic(dir: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let target = dir.join(rel);
    let tmp = dir.join(format!(".{rel}.part-{}", uuid::Uuid::new_v4().simple()));
    let result = (|| -> Result<()> {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &target)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), target.display()))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
