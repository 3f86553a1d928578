//! Stopping a run on SIGTERM or SIGINT (Kubernetes stops a pod with SIGTERM and kills it
//! 30 s later; a person presses Ctrl-C).
//!
//! [`install`] replaces the default action of both signals with a handler that only records
//! which signal came (an atomic store, async-signal-safe). A process with a handler also gets
//! the signal as PID 1 of a container or PID namespace, where a signal left at its default
//! action is dropped by the kernel. The run then stops at its next safe point ([`check`], or
//! a wait raced with [`requested`]): before the commit it rolls back, marks its run record
//! FAILED ("interrupted by SIGTERM …"), removes its `.tmp` output folder and exits with
//! [`crate::exit::INTERRUPTED_SIGTERM`] or [`crate::exit::INTERRUPTED_SIGINT`]; once the commit
//! has begun it is never interrupted, and the day it committed completes (its folder renamed
//! into place, its record COMPLETED) before the run stops. A second signal while it stops ends
//! the process at once with the same code (the next run cleans up as after a kill).
//!
//! Only `recon run` installs the handler: the other commands keep the default action, so a
//! signal ends them as it always did (none of them leaves anything half-done).

use crate::exit::{Failure, fail};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Whether a stop signal was received (a second one then ends the process at once).
static RECEIVED: AtomicBool = AtomicBool::new(false);

/// Where a run stopped at any safe point before its commit: what that means.
pub const BEFORE_COMMIT: &str =
    "before the commit: rolled back, nothing of this day was committed, its output removed";

/// The signals that stop a run.
const SIGNALS: [i32; 2] = [libc::SIGTERM, libc::SIGINT];

/// The name of a stop signal, for messages and the run record.
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// Installs the handlers (once per process; a second call does nothing more).
pub fn install() -> anyhow::Result<()> {
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            for sig in SIGNALS {
                // SAFETY: the handler does two atomic operations, which are async-signal-safe.
                unsafe {
                    signal_hook::low_level::register(sig, move || {
                        let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                        if RECEIVED.swap(true, Ordering::SeqCst) {
                            // Already stopping: end now (`_exit`, async-signal-safe).
                            signal_hook::low_level::exit(crate::exit::interrupted(sig));
                        }
                    })
                }
                .map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the SIGTERM/SIGINT handlers: {e}"))
}

/// The stop signal received so far, if any.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The error a run stops with after `signal`, saying where it stopped (`at`) and what that
/// means for the database.
pub fn interrupted(signal: i32, at: &str) -> anyhow::Error {
    fail(
        Failure::Interrupted(signal),
        format!("interrupted by {}: stopped {at}", name(signal)),
    )
}

/// A safe point: `Err` (see [`interrupted`]) once a stop signal came.
pub fn check(at: &str) -> anyhow::Result<()> {
    match signal() {
        Some(s) => Err(interrupted(s, at)),
        None => Ok(()),
    }
}

/// Completes once a stop signal came (polled every 50 ms: the handler cannot wake a task).
pub async fn requested() -> i32 {
    loop {
        if let Some(s) = signal() {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `fut` unless a stop signal comes first; then `fut` is dropped (cancelled: an open
/// transaction it held rolls back) and the result is [`interrupted`] at `at`.
pub async fn unless_stopped<T>(
    at: &str,
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    check(at)?;
    tokio::select! {
        r = fut => r,
        s = requested() => Err(interrupted(s, at)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signal_names() {
        assert_eq!(super::name(libc::SIGTERM), "SIGTERM");
        assert_eq!(super::name(libc::SIGINT), "SIGINT");
    }
}
