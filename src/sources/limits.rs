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

/// The default of `max_file_mb`. A run's memory is about seven times its statement's size
/// (the 1M-payment benchmark: a 110 MB statement, 771 MB peak, ledger included), so a 400 MB
/// file stays within the CronJob's 3 GiB limit (`deploy/cronjob.yaml`) with room for the
/// ledger. Raise it together with the pod's memory.
pub const DEFAULT_MAX_FILE_MB: u64 = 400;
/// The default of `max_line_bytes`: 1 MiB, sixteen times the longest field recon reads
/// ([`super::csv::MAX_FIELD_BYTES`]).
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
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_file_bytes: DEFAULT_MAX_FILE_MB << 20,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_rejected_lines: DEFAULT_MAX_REJECTED_LINES,
        }
    }
}

impl InputLimits {
    /// Fails when the file at `path` is larger than `max_file_mb`, from its metadata, before
    /// anything is read.
    pub fn check_size(&self, path: &Path) -> Result<()> {
        let file = path.display();
        let len = std::fs::metadata(path)
            .map_err(|e| fail(Failure::Input, format!("{file}: cannot read: {e}")))?
            .len();
        if len > self.max_file_bytes {
            return Err(fail(
                Failure::Input,
                format!(
                    "{file}: the file is {len} bytes, more than max_file_mb = {} allows (hint: is \
                     this a statement file? A larger statement needs a larger `max_file_mb` and \
                     memory to match, docs/configuration.md)",
                    self.max_file_bytes >> 20
                ),
            ));
        }
        Ok(())
    }

    /// The bytes of the file at `path`, after [`InputLimits::check_size`].
    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        self.check_size(path)?;
        std::fs::read(path).map_err(|e| {
            fail(
                Failure::Input,
                format!("{}: cannot read: {e}", path.display()),
            )
        })
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
