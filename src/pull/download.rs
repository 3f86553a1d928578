//! A download on its way into the inbox: a temporary file in the source's folder, hashed as it
//! is written, so a statement of any size streams to disk. It is removed when dropped, unless
//! it was [`Download::keep`]-ed under its final name.

use super::FetchError;
use sha2::{Digest, Sha256};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// A temporary file being written.
pub struct Download {
    path: PathBuf,
    file: Option<std::fs::File>,
    hasher: Sha256,
    len: u64,
    /// The checked sha256, once [`Download::finish`] succeeded.
    checked: Option<String>,
}

impl Download {
    /// A new, empty temporary file in `dir` (`.pull-<uuid>.part`: never a name runs read).
    pub fn new(dir: &Path) -> Result<Download, FetchError> {
        let path = dir.join(format!(".pull-{}.part", uuid::Uuid::new_v4().simple()));
        let file = std::fs::File::create(&path)
            .map_err(|e| FetchError::Fatal(format!("cannot create {}: {e}", path.display())))?;
        Ok(Download {
            path,
            file: Some(file),
            hasher: Sha256::new(),
            len: 0,
            checked: None,
        })
    }

    /// Appends a chunk.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), FetchError> {
        let Some(f) = self.file.as_mut() else {
            return Err(FetchError::Fatal("write after finish".into()));
        };
        f.write_all(chunk)
            .map_err(|e| FetchError::Fatal(format!("cannot write {}: {e}", self.path.display())))?;
        self.hasher.update(chunk);
        self.len += chunk.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Syncs and closes the file, reads it back and checks it against what was received
    /// (length and sha256). Returns the sha256 (hex); again on later calls, without work.
    pub fn finish(&mut self) -> Result<String, FetchError> {
        if let Some(sha) = &self.checked {
            return Ok(sha.clone());
        }
        let sha = hex::encode(self.hasher.clone().finalize());
        if let Some(f) = self.file.take() {
            f.sync_all().map_err(|e| {
                FetchError::Fatal(format!("cannot sync {}: {e}", self.path.display()))
            })?;
        }
        let mut back = std::fs::File::open(&self.path)
            .map_err(|e| FetchError::Fatal(format!("cannot read {}: {e}", self.path.display())))?;
        let (mut hasher, mut len, mut buf) = (Sha256::new(), 0u64, vec![0u8; 1 << 16]);
        loop {
            let n = back.read(&mut buf).map_err(|e| {
                FetchError::Fatal(format!("cannot read {}: {e}", self.path.display()))
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        let read_back = hex::encode(hasher.finalize());
        if len != self.len || read_back != sha {
            return Err(FetchError::Transient(format!(
                "{}: read back {len} bytes with sha256 {read_back}, received {} with {sha}",
                self.path.display(),
                self.len
            )));
        }
        self.checked = Some(sha.clone());
        Ok(sha)
    }

    /// Gives the checked file its final name `target` (never replacing a file there: the
    /// name is linked, which fails if it exists) and syncs the folder.
    pub fn keep(self, target: &Path) -> Result<(), FetchError> {
        let parent = target.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::hard_link(&self.path, target))
            .map_err(|e| {
                FetchError::Fatal(format!(
                    "cannot move {} to {}: {e}",
                    self.path.display(),
                    target.display()
                ))
            })?;
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
        Ok(())
        // Drop removes the temporary name.
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_on_disk_fails_the_check_and_nothing_is_left_behind() {
        let dir = tempfile::tempdir().expect("dir");
        let mut d = Download::new(dir.path()).expect("new");
        d.write(b"id,amount\n1,2.00\n").expect("write");
        std::fs::write(&d.path, b"id,amount\n1,9.00\n").expect("tamper");
        assert!(matches!(d.finish(), Err(FetchError::Transient(_))));
        drop(d);
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
    }

    #[test]
    fn a_kept_download_never_replaces_a_file() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("sub/x.csv");
        let mut d = Download::new(dir.path()).expect("new");
        d.write(b"first").expect("write");
        assert_eq!(
            d.finish().expect("checked"),
            hex::encode(Sha256::digest(b"first"))
        );
        d.keep(&target).expect("kept");
        let mut d = Download::new(dir.path()).expect("new");
        d.write(b"second").expect("write");
        d.finish().expect("checked");
        assert!(d.keep(&target).is_err());
        assert_eq!(std::fs::read(&target).expect("read"), b"first");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("sub")],
            "no temporary file left"
        );
    }
}
