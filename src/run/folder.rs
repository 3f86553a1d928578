//! A run's output folder: written into `<name>.tmp/` and renamed into place once what it
//! stands for is committed. The whole night, a range's day, a shard and the gather all publish
//! their files this way, so a reader never sees half of them.

use crate::exit::{Failure, fail};
use crate::ledger::Payment;
use crate::outcome::ResultRow;
use crate::sources::StatementLine;
use anyhow::{Context as _, Result};
use std::path::{Path, PathBuf};

/// An output folder being written: `<parent>/<name>.tmp/`, to become `<parent>/<name>/`.
pub(crate) struct Folder {
    /// Where the folder goes once published.
    pub(crate) out_dir: PathBuf,
    /// Where it is written.
    pub(crate) tmp_dir: PathBuf,
}

impl Folder {
    /// `<parent>/<name>.tmp/`, created empty (what an interrupted run left there is removed).
    pub(crate) fn create(parent: &Path, name: &str) -> Result<Folder> {
        let out = Folder {
            out_dir: parent.join(name),
            tmp_dir: parent.join(format!("{name}.tmp")),
        };
        if out.tmp_dir.exists() {
            std::fs::remove_dir_all(&out.tmp_dir).map_err(|e| out.err("cannot clear", &e))?;
        }
        std::fs::create_dir_all(&out.tmp_dir).map_err(|e| out.err("cannot create", &e))?;
        Ok(out)
    }

    /// An output failure: `<name>.tmp: <what>: <e>`.
    pub(crate) fn err(&self, what: &str, e: &dyn std::fmt::Display) -> anyhow::Error {
        fail(
            Failure::Output,
            format!("{}: {what}: {e}", self.tmp_dir.display()),
        )
    }

    /// Removes the unfinished folder after a failure (best effort: the next run removes what
    /// is left).
    pub(crate) fn remove(&self) {
        if let Err(rm) = std::fs::remove_dir_all(&self.tmp_dir) {
            tracing::warn!(folder = %self.tmp_dir.display(), error = %rm, "Cannot remove the unfinished output folder; the next run removes it.");
        }
    }

    /// Publishes the folder: an earlier one of the same name replaced, `<name>.tmp/` renamed
    /// into place.
    pub(crate) fn rename_into_place(&self) -> Result<()> {
        if self.out_dir.exists() {
            std::fs::remove_dir_all(&self.out_dir).map_err(|e| self.err("cannot replace", &e))?;
        }
        std::fs::rename(&self.tmp_dir, &self.out_dir)
            .map_err(|e| self.err("cannot rename into place", &e))?;
        crate::fault::point("after_rename");
        Ok(())
    }
}

/// Writes `results.csv` and the reports' `diff.csv` (its listed rows) of `rows` into `dir`.
pub(crate) fn write_results(
    dir: &Path,
    rows: &[ResultRow],
    payments: &[Payment],
    lines: &[StatementLine],
) -> Result<()> {
    let path = dir.join("results.csv");
    let diff = dir.join(crate::report::DIFF_CSV_FILE);
    let create = |path: &Path| {
        std::fs::File::create(path)
            .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
            .with_context(|| format!("creating {}", path.display()))
    };
    crate::outputs::results::write(create(&path)?, create(&diff)?, rows, payments, lines)
        .with_context(|| format!("writing {} and {}", path.display(), diff.display()))
}
