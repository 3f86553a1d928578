//! Bounds on what one statement file may cost (issue 33 point 3): its size, checked from the
//! file's metadata before a byte is read (`max_file_mb`), the length of one line
//! (`max_line_bytes`) and how many of its lines may be rejected before the file counts as no
//! statement at all (`max_rejected_lines`). A file over any of them is unreadable
//! ([`super::Unreadable`]): nothing in it is used, its days are incomplete, the run goes on and
//! exits 10.

use super::Rejected;
use crate::exit::{Failure, fail};
use anyhow::Result;
use std::path::Path;

/// The default of `max_file_mb`: what fits the CronJob's 3 GiB limit (`deploy/cronjob.yaml`)
/// by the memory model ([`memory_needed`]: 256 MiB + 22 × 112 MiB = 2.7 GiB, with room for a
/// ledger of a million payments), even when every line of the file is an exception. Raise it
/// together with the pod's memory.
pub const DEFAULT_MAX_FILE_MB: u64 = 112;
/// The memory model (docs/operations.md "Memory"): a run's peak is about this much ...
pub const MEMORY_BASE: u64 = 256 << 20;
/// ... plus this many times the statement text it reads (CSV, MT940, BAI2, camt) when every
/// line is an exception (a ticket, a case, a report row: measured 21.7 times for a 267 MB
/// statement of 2.2 million lines naming no payment of a 1M ledger; a usual night, 6 % of
/// exceptions, needs about 8 times) ...
pub const MEMORY_PER_STATEMENT_BYTE: u64 = 22;
/// ... or this many times an XLSX workbook's size (its sheets inflate about four times) ...
pub const MEMORY_PER_WORKBOOK_BYTE: u64 = 88;
/// ... plus this much per payment of the ledger.
pub const MEMORY_PER_PAYMENT: u64 = 160;

/// What the memory model says a run needs for `statement_bytes` of statement text and
/// `payments` payments.
pub fn memory_needed(statement_bytes: u64, payments: u64) -> u64 {
    MEMORY_BASE
        .saturating_add(statement_bytes.saturating_mul(MEMORY_PER_STATEMENT_BYTE))
        .saturating_add(payments.saturating_mul(MEMORY_PER_PAYMENT))
}

/// The memory limit of the process's cgroup (v2 `memory.max`, else v1
/// `memory.limit_in_bytes`), or None when there is none (unlimited, or not in a cgroup).
pub fn cgroup_memory_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
            candidates.push("/sys/fs/cgroup/memory.max".to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
            candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string());
        }
    }
    candidates.iter().find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        let n: u64 = text.trim().parse().ok()?;
        // cgroup v1 says "unlimited" as a number near 2^63.
        (n < 1 << 60).then_some(n)
    })
}

/// The resident memory of this process, in bytes (0 when /proc cannot say).
fn resident() -> u64 {
    let pages: u64 = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.saturating_mul(u64::try_from(page).unwrap_or(4096))
}
/// The longest field recon reads, in bytes; a longer one rejects its line (a csv field).
pub const MAX_FIELD_BYTES: usize = 64 * 1024;
/// The default of `max_line_bytes`: 1 MiB, sixteen times the longest field recon reads
/// ([`MAX_FIELD_BYTES`]).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// The default of `max_rejected_lines`: a statement with more unreadable lines than this is
/// not a statement with a few bad lines but the wrong file, or garbage.
pub const DEFAULT_MAX_REJECTED_LINES: usize = 1000;

/// The bounds on one statement file (job keys `max_file_mb`, `max_line_bytes`,
/// `max_rejected_lines`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// The largest file read, in bytes (`max_file_mb` × 2^20).
    pub max_file_bytes: u64,
    /// The longest physical line of a text file (csv), in bytes.
    pub max_line_bytes: usize,
    /// The most rejected lines a file may have; one more makes the whole file unreadable.
    pub max_rejected_lines: usize,
    /// What a workbook may inflate to (`max_inflated_mb`, `max_sheet_cells`).
    pub workbook: crate::workbook::WorkbookLimits,
    /// The memory a run may use (`memory_limit_mb`, else the cgroup's limit): a file the
    /// memory model says would not fit beside what the run holds already is unreadable, not
    /// an OOM-killed night. None: no limit known.
    pub memory_limit: Option<u64>,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_file_bytes: DEFAULT_MAX_FILE_MB << 20,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_rejected_lines: DEFAULT_MAX_REJECTED_LINES,
            workbook: crate::workbook::WorkbookLimits::default(),
            memory_limit: None,
        }
    }
}

impl InputLimits {
    /// Fails when the file at `path` is no regular file (a FIFO, a device such as `/dev/zero`,
    /// a folder: their size says nothing of what they hold) or is larger than `max_file_mb`,
    /// from its metadata, before anything is read.
    pub fn check_size(&self, path: &Path) -> Result<()> {
        self.check_meta(
            path,
            &std::fs::metadata(path).map_err(|e| cannot_read(path, &e))?,
        )
    }

    fn check_meta(&self, path: &Path, meta: &std::fs::Metadata) -> Result<()> {
        let file = path.display();
        if !meta.is_file() {
            return Err(fail(
                Failure::Input,
                format!(
                    "{file}: not a regular file (a pipe, a device or a folder), so never read \
                     (hint: name the statement file itself)"
                ),
            ));
        }
        let len = meta.len();
        if len > self.max_file_bytes {
            return Err(fail(
                Failure::Input,
                self.too_large(path, &format!("{len} bytes")),
            ));
        }
        if let Some(limit) = self.memory_limit {
            let per_byte = if is_workbook(path) {
                MEMORY_PER_WORKBOOK_BYTE
            } else {
                MEMORY_PER_STATEMENT_BYTE
            };
            let held = resident();
            let needed = held.saturating_add(len.saturating_mul(per_byte));
            if needed > limit {
                return Err(fail(
                    Failure::Input,
                    format!(
                        "{file}: reading it would need about {} MiB ({per_byte} × its {len} bytes \
                         beside the {} MiB the run holds), more than the memory limit of {} MiB \
                         (the pod's, or memory_limit_mb): not read, so that the night completes \
                         (hint: raise the pod's memory, or split the file; docs/operations.md \
                         \"Memory\")",
                        needed >> 20,
                        held >> 20,
                        limit >> 20
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Why the job's bounds do not fit its memory limit by the memory model (a statement of
    /// `max_file_mb` beside the base), or None when they fit or no limit is known.
    pub fn memory_warning(&self) -> Option<String> {
        let limit = self.memory_limit?;
        let needed = memory_needed(self.max_file_bytes, 0);
        (needed > limit).then(|| {
            format!(
                "memory: a statement of max_file_mb = {} needs about {} MiB by the memory model, \
                 more than the memory limit of {} MiB; such a file would be refused as unreadable \
                 (hint: lower max_file_mb or raise the pod's memory, docs/operations.md \
                 \"Memory\")",
                self.max_file_bytes >> 20,
                needed >> 20,
                limit >> 20
            )
        })
    }

    fn too_large(&self, path: &Path, size: &str) -> String {
        format!(
            "{}: the file is {size}, more than max_file_mb = {} allows (hint: is \
             this a statement file? A larger statement needs a larger `max_file_mb` and memory \
             to match, docs/operations.md \"Memory\")",
            path.display(),
            self.max_file_bytes >> 20
        )
    }

    /// The bytes of the file at `path`: checked as [`InputLimits::check_size`] says on the
    /// open file (not a FIFO opened first: it is opened without waiting), and read no further
    /// than `max_file_mb` whatever it grows to meanwhile.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        use std::io::Read as _;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.custom_flags(libc::O_NONBLOCK);
        }
        let f = options.open(path).map_err(|e| cannot_read(path, &e))?;
        let meta = f.metadata().map_err(|e| cannot_read(path, &e))?;
        self.check_meta(path, &meta)?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        f.take(self.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| cannot_read(path, &e))?;
        if bytes.len() as u64 > self.max_file_bytes {
            return Err(fail(
                Failure::Input,
                self.too_large(path, "still growing while it was read"),
            ));
        }
        Ok(bytes)
    }

    /// Fails at the first physical line of `body` longer than `max_line_bytes` (`first_line`:
    /// the number of `body`'s first line in the file).
    pub fn check_lines(&self, file: &str, body: &[u8], first_line: u64) -> Result<()> {
        let mut start = 0usize;
        let mut line = first_line;
        loop {
            let end = body[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(body.len(), |p| start + p);
            if end - start > self.max_line_bytes {
                return Err(fail(
                    Failure::Input,
                    format!(
                        "{file}: line {line} is {} bytes or more, more than max_line_bytes = {} \
                         (hint: is this a statement file?)",
                        end - start,
                        self.max_line_bytes
                    ),
                ));
            }
            if end >= body.len() {
                return Ok(());
            }
            start = end + 1;
            line += 1;
        }
    }

    /// Fails when `rejected` holds more than `max_rejected_lines` lines: the file is then no
    /// statement with a few bad lines, and is unreadable. The message names the first ones.
    pub fn check_rejected(&self, file: &str, rejected: &[Rejected]) -> Result<()> {
        if rejected.len() <= self.max_rejected_lines {
            return Ok(());
        }
        let first: Vec<String> = rejected
            .iter()
            .take(3)
            .map(|r| format!("line {}: {}", r.line, super::cut(&r.reason)))
            .collect();
        Err(fail(
            Failure::Input,
            format!(
                "{file}: more than max_rejected_lines = {} lines are unreadable, so the file is \
                 not read (hint: is this a statement file?); the first: {}",
                self.max_rejected_lines,
                first.join("; ")
            ),
        ))
    }
}

/// Whether `path` names a workbook (`.xlsx`, `.xls`), which inflates as it is read.
fn is_workbook(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("xlsx") || e.eq_ignore_ascii_case("xls"))
}

fn cannot_read(path: &Path, e: &std::io::Error) -> anyhow::Error {
    fail(
        Failure::Input,
        format!("{}: cannot read: {e}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_limit_is_named() {
        let limits = InputLimits {
            max_line_bytes: 4,
            ..InputLimits::default()
        };
        assert!(limits.check_lines("f", b"abcd\n1234\n", 1).is_ok());
        let err = limits
            .check_lines("f", b"ab\ncd\n12345\n", 3)
            .expect_err("too long");
        assert!(
            format!("{err:#}")
                .contains("f: line 5 is 5 bytes or more, more than max_line_bytes = 4"),
            "{err:#}"
        );
        assert!(
            limits.check_lines("f", b"ab\n12345", 1).is_err(),
            "a last line without \\n"
        );
    }
}
