//! Fault-injection points for the crash-safety tests (issue 3: "a run killed at any point").
//!
//! Compiled in only with the cargo feature `fault-injection`, which no production build has:
//! recon's own dev-dependency on itself enables it for `cargo test`, so the `recon` binary the
//! tests spawn has the points. Elsewhere [`point`] is an empty inline function and the run path
//! compiles to what it would be without the calls.
//!
//! With the feature, when `RECON_FAULT_PAUSE` is `STAGE:MARKER_FILE` and the run reaches
//! `STAGE`, the process creates `MARKER_FILE` and waits there until the file is deleted, so a
//! test can SIGKILL it at exactly that stage, or change the database under it and let it go on.
//! Unset, a point costs one environment lookup per run stage.

/// The stages a run passes, in order.
pub const STAGES: [&str; 5] = [
    "after_run_record",
    "after_plan",
    "before_commit",
    "after_commit",
    "after_rename",
];

/// Pauses here if the environment asks for it (see the module docs).
#[cfg(feature = "fault-injection")]
pub fn point(stage: &str) {
    let Ok(spec) = std::env::var("RECON_FAULT_PAUSE") else {
        return;
    };
    let Some((want, marker)) = spec.split_once(':') else {
        return;
    };
    if want != stage {
        return;
    }
    if std::fs::write(marker, stage).is_err() {
        return;
    }
    while std::path::Path::new(marker).exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Without the feature `fault-injection`: nothing (see the module docs).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_stage: &str) {}

/// The recon build a process states to its run group (`run::recon_build`): with the
/// feature, `RECON_FAULT_BUILD` stands for another build, so a test can run a night's shards
/// as two versions of recon.
#[cfg(feature = "fault-injection")]
pub fn build_override() -> Option<String> {
    std::env::var("RECON_FAULT_BUILD").ok()
}

/// Without the feature `fault-injection`: never (see the module docs).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn build_override() -> Option<String> {
    None
}
