//! Documented process exit codes (also listed in docs/operations.md, "Exit codes").
//!
//! A run that completed exits 0 even when it found exceptions: those are reported through
//! tickets and the report, so a scheduler must not retry the job for them.

/// The run completed; exceptions (if any) are in the report and the review queue.
pub const OK: i32 = 0;
/// Unexpected internal error (a bug): nothing was committed.
pub const INTERNAL: i32 = 1;
/// Invalid command line (clap's own code).
pub const USAGE: i32 = 2;
/// The job configuration or a rule file is invalid; no data was read.
pub const CONFIG: i32 = 3;
/// An input could not be read or was rejected whole: a ledger import file, a webhook file, a
/// fixed statement file that does not exist. (A statement file that exists but cannot be read
/// does not stop a run: [`INPUT_UNREADABLE`].)
pub const INPUT: i32 = 4;
/// The database could not be reached, migrated, read or written, or did not answer within a
/// `[database]` timeout.
pub const DATABASE: i32 = 5;
/// Another run holds the lock for this database.
pub const LOCKED: i32 = 6;
/// Writing the run's output files failed.
pub const OUTPUT: i32 = 7;
/// The run completed and recorded its results, but its email alert (or one queued by an
/// earlier run) could not be sent; it waits in `<output_dir>/outbox/`. Do not re-run the
/// range for this: the next run sends the outbox first.
pub const ALERT_FAILED: i32 = 8;
/// `recon pull` (or the pull of `recon run --pull`) could not fetch every remote file within
/// its retry budget, or a server was refused (host key, credentials). What was fetched is in
/// the inbox; the days of the files that were not are incomplete, and `recon run --pull` still
/// ran on what is local (so its results are committed: do not treat it as a failed run).
pub const PULL_INCOMPLETE: i32 = 9;
/// The run completed and committed its results, but a statement file that is there could not
/// be read or parsed (an empty or truncated file, a header that does not fit the mapping).
/// Nothing in it was used, the days it stands for are incomplete (no payment is resolved FAILED
/// on them), and the report and the alert name it as critical. Deliver the file again (a
/// corrected file is read by the next run as a late file); do not re-run for anything else.
/// [`ALERT_FAILED`] wins over it (the alert that names the file did not go out), and it wins
/// over [`PULL_INCOMPLETE`] (a pull is retried by the next one; an unreadable file needs a
/// person).
pub const INPUT_UNREADABLE: i32 = 10;
/// `recon decisions apply` applied the file, but at least one of its rows was refused (stale
/// evidence, an unknown case, an edited check cell, a decision not offered, a payment that
/// moved): the result file next to the input says which and why. The other rows were applied
/// (or wait for a second reviewer). A file that cannot be read at all exits [`INPUT`].
pub const DECISIONS_REFUSED: i32 = 12;
/// `recon gather`: the deadline (`--wait`) passed before every shard of the night's run
/// group had landed; the message names the missing shards and what became of them. Nothing was
/// gathered: re-run the missing indexes (`recon run --shard I/N --group G`), then gather.
pub const SHARDS_MISSING: i32 = 13;
/// `recon gather`: a file a shard handed over (its `shard.json`, `results.csv`, `diff.csv`,
/// `rejected.csv`, `settlement.csv` or `summary.json`) is not what the shard sealed when it
/// committed (another sha256 or size, missing, or no seal at all); the message names the
/// shard, its run and the file. Nothing was gathered and the night is not marked gathered; the
/// run group records why. A retry cannot help: restore the shard's folder as it was written,
/// or run the night's shards again under a new `--group`.
pub const HANDOVER_CHANGED: i32 = 14;
/// `recon backtest`: the candidate rules would contradict a reviewer's decision, or (without
/// `--allow-new-transitions`) turn a case into an automatic transition. The outputs are
/// written; the summary on stdout names the flips. A CI job of the rules' owners gates a rules
/// change on it.
pub const BACKTEST_GATE: i32 = 15;
/// `recon run` stopped on SIGINT (Ctrl-C) at a safe point: 128 + 2, the code a shell reports
/// for a process that SIGINT ended, so schedulers and scripts read it as "stopped by a signal".
/// A signal before the commit rolled back (nothing committed, the run record FAILED
/// "interrupted by SIGINT", the `.tmp` folder removed); days a range had already committed stay
/// committed and complete.
pub const INTERRUPTED_SIGINT: i32 = 128 + libc::SIGINT;
/// `recon run` stopped on SIGTERM (how Kubernetes and `docker stop` stop a container) at a safe
/// point: 128 + 15, as [`INTERRUPTED_SIGINT`] for SIGINT.
pub const INTERRUPTED_SIGTERM: i32 = 128 + libc::SIGTERM;

/// The exit code of a run stopped by `signal` ([`INTERRUPTED_SIGTERM`], [`INTERRUPTED_SIGINT`]):
/// 128 + the signal's number.
pub const fn interrupted(signal: i32) -> i32 {
    128 + signal
}

/// What kind of failure stopped a command; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// See [`CONFIG`].
    Config,
    /// See [`INPUT`].
    Input,
    /// See [`DATABASE`].
    Database,
    /// See [`LOCKED`].
    Locked,
    /// See [`OUTPUT`].
    Output,
    /// Stopped by this signal at a safe point ([`interrupted`]).
    Interrupted(i32),
    /// See [`SHARDS_MISSING`].
    ShardsMissing,
    /// See [`HANDOVER_CHANGED`].
    HandoverChanged,
}

impl Failure {
    /// The process exit code for this failure.
    pub fn code(self) -> i32 {
        match self {
            Failure::Config => CONFIG,
            Failure::Input => INPUT,
            Failure::Database => DATABASE,
            Failure::Locked => LOCKED,
            Failure::Output => OUTPUT,
            Failure::Interrupted(signal) => interrupted(signal),
            Failure::ShardsMissing => SHARDS_MISSING,
            Failure::HandoverChanged => HANDOVER_CHANGED,
        }
    }
}

/// An error that knows which exit code it maps to. Wrap with `anyhow::Context` freely: the
/// outermost `Failure` found in the chain decides.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Classified {
    /// The kind of failure.
    pub failure: Failure,
    /// What happened, with file/line/key where known.
    pub message: String,
}

/// The longest error message recon prints, logs or records, in bytes: a message that quotes
/// giant input (a 200 MB "header") must not become giant itself.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// `text` cut to at most `max` bytes (at a character boundary), saying how long it was.
pub fn cut_to(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len()).into()
}

/// `text` cut to [`MAX_MESSAGE_BYTES`].
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    cut_to(text, MAX_MESSAGE_BYTES)
}

/// Shorthand to build a classified `anyhow::Error` (its message [`bounded`]).
pub fn fail(failure: Failure, message: impl Into<String>) -> anyhow::Error {
    let message = message.into();
    let message = match bounded(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(cut) => cut,
    };
    anyhow::Error::new(Classified { failure, message })
}

/// The signal that stopped a run, when `err` is that stop ([`Failure::Interrupted`]).
pub fn interrupted_by(err: &anyhow::Error) -> Option<i32> {
    err.chain()
        .find_map(|e| e.downcast_ref::<Classified>())
        .and_then(|c| match c.failure {
            Failure::Interrupted(signal) => Some(signal),
            _ => None,
        })
}

/// Maps an error chain to an exit code.
pub fn code_for(err: &anyhow::Error) -> i32 {
    err.chain()
        .find_map(|e| e.downcast_ref::<Classified>())
        .map(|c| c.failure.code())
        .unwrap_or(INTERNAL)
}

/// Writes `text` to standard output and flushes it, for the commands' own output (`recon`'s and
/// `recon-tools`' `out!` macros). A reader that has gone (`recon runs list … | head`) ends the
/// process quietly with [`OK`]: everything the command had to do is done by the time it
/// prints. Any other failure to write is the [`OUTPUT`] error it is.
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(OK);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(OUTPUT);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_messages_are_cut_at_a_character_boundary_with_their_length() {
        assert_eq!(super::cut_to("short", 10), "short");
        let cut = super::cut_to("ééééé", 3);
        assert_eq!(cut, "é… (10 bytes in all)");
        assert!(super::bounded(&"x".repeat(1 << 20)).len() < super::MAX_MESSAGE_BYTES + 32);
    }
}
