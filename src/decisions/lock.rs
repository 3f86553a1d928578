//! `recon decisions apply` and the nightly run share the run lock (an apply checks rows against
//! the cases as the latest committed run stored them, so no run may store other evidence under
//! it). They wait for each other, each its own way:
//! - an apply waits for a run that holds the lock, as long as it takes (a person is there);
//! - a run that finds the lock held by an apply waits for it, at most `apply_wait` (default
//!   30m), then exits with the LOCKED code naming the apply; a lock held by another run still
//!   makes it exit at once (or wait with `--wait`), as before.
//!
//! A run tells an apply from another run by a second lock that only an apply holds, taken
//! before the run lock and released after it: `<database>.apply.lock` beside a SQLite
//! database, an advisory lock ([`APPLY_LOCK_CLASS`], 0) on PostgreSQL. Both vanish with the
//! process, as the run lock does.

use crate::db::{Db, RunLock};
use crate::exit::{Failure, fail};
use anyhow::Result;
use std::time::{Duration, Instant};

/// PostgreSQL advisory lock class (two-key form) held by a `recon decisions apply` while it
/// holds or waits for the run lock.
pub const APPLY_LOCK_CLASS: i32 = 0x7265_6361;

/// How often a run waiting for an apply tries the run lock again.
const POLL: Duration = Duration::from_millis(200);

/// The marker an apply holds: whoever finds the run lock held and this one held too knows an
/// apply has (or waits for) the run lock.
enum Marker {
    /// `<database>.apply.lock`, locked.
    File { _held: std::fs::File },
    /// The advisory lock's connection.
    Pg { _held: RunLock },
    /// An in-memory SQLite database: one process, nobody to tell.
    None,
}

/// The locks a `recon decisions apply` holds: the run lock, then the apply marker. The fields
/// drop in this order, so a waiting run never sees the run lock held without the marker.
pub struct ApplyLock {
    _run: RunLock,
    _marker: Marker,
}

fn marker_path(db: &Db) -> Option<std::path::PathBuf> {
    db.file.as_ref().map(|f| {
        let mut p = f.clone().into_os_string();
        p.push(".apply.lock");
        std::path::PathBuf::from(p)
    })
}

fn open_marker(path: &std::path::Path) -> Result<std::fs::File> {
    std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| {
            fail(
                Failure::Database,
                format!("{}: cannot open lock file: {e}", path.display()),
            )
        })
}

/// Takes the apply marker (waiting for another apply) and then the run lock (waiting for a
/// run that holds it).
pub async fn for_apply(db: &Db) -> Result<ApplyLock> {
    let marker = if db.is_postgres() {
        Marker::Pg {
            _held: db
                .pg_locks(
                    "another recon decisions apply",
                    &[format!(
                        "SELECT pg_try_advisory_lock({APPLY_LOCK_CLASS}, 0)"
                    )],
                    Some(&[format!("SELECT pg_advisory_lock({APPLY_LOCK_CLASS}, 0)")]),
                )
                .await?,
        }
    } else if let Some(path) = marker_path(db) {
        let f = open_marker(&path)?;
        let waited = f.try_clone().map_err(|e| {
            fail(
                Failure::Database,
                format!("{}: cannot lock: {e}", path.display()),
            )
        })?;
        tokio::task::spawn_blocking(move || waited.lock())
            .await
            .map_err(|e| fail(Failure::Database, format!("{}: {e}", path.display())))?
            .map_err(|e| {
                fail(
                    Failure::Database,
                    format!("{}: cannot lock: {e}", path.display()),
                )
            })?;
        Marker::File { _held: f }
    } else {
        Marker::None
    };
    let run = db.lock(true).await?;
    Ok(ApplyLock {
        _run: run,
        _marker: marker,
    })
}

/// Whether a `recon decisions apply` holds (or waits for) the run lock now.
pub async fn apply_holds(db: &Db) -> Result<bool> {
    if db.is_postgres() {
        let probe = db
            .pg_locks(
                "a recon decisions apply",
                &[format!(
                    "SELECT pg_try_advisory_lock({APPLY_LOCK_CLASS}, 0)"
                )],
                None,
            )
            .await;
        return match probe {
            // Free: nobody applies (the probe's connection, and its lock, end here).
            Ok(_free) => Ok(false),
            Err(e) if crate::exit::code_for(&e) == crate::exit::LOCKED => Ok(true),
            Err(e) => Err(e),
        };
    }
    let Some(path) = marker_path(db) else {
        return Ok(false);
    };
    if !path.exists() {
        return Ok(false);
    }
    let f = open_marker(&path)?;
    match f.try_lock() {
        Ok(()) => Ok(false),
        Err(std::fs::TryLockError::WouldBlock) => Ok(true),
        Err(std::fs::TryLockError::Error(e)) => Err(fail(
            Failure::Database,
            format!("{}: cannot lock: {e}", path.display()),
        )),
    }
}

/// The run lock for a run: with `wait`, waits for whoever holds it; else a lock held by
/// another run fails at once (LOCKED), and one held by a `recon decisions apply` is waited
/// for, at most `apply_wait`.
pub async fn for_run(db: &Db, wait: bool, apply_wait: Duration) -> Result<RunLock> {
    if wait {
        return db.lock(true).await;
    }
    let started = Instant::now();
    let mut said = false;
    loop {
        let held = match db.lock(false).await {
            Ok(lock) => return Ok(lock),
            Err(e) => e,
        };
        if crate::exit::code_for(&held) != crate::exit::LOCKED || !apply_holds(db).await? {
            return Err(held);
        }
        let waited = started.elapsed();
        if waited >= apply_wait {
            return Err(fail(
                Failure::Locked,
                format!(
                    "a `recon decisions apply` has held the run lock for {}s, longer than \
                     `apply_wait` ({}s): the run gives up (hint: run it again once the apply \
                     is done, or raise `apply_wait`)",
                    waited.as_secs(),
                    apply_wait.as_secs()
                ),
            ));
        }
        if !said {
            tracing::info!(
                apply_wait_s = apply_wait.as_secs(),
                "A recon decisions apply holds the run lock; waiting for it (at most apply_wait)."
            );
            said = true;
        }
        tokio::time::sleep(POLL.min(apply_wait - waited)).await;
    }
}
