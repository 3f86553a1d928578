//! The tests against the public real statement files: a test target of its own, which plain
//! `cargo test` does not run (`test = false` in Cargo.toml). Run it with
//! `RECON_REAL_DATA=<corpus> cargo test --test real`; without `RECON_REAL_DATA` every test
//! fails (never skips). The corpus is the folder of real samples with its `SOURCES.md`
//! (provenance and licences); the files are not in this repository (several are GPL/AGPL),
//! only their reviewed goldens (`tests/formats/golden/`) and expected rows (`tests/threeway/`).
//! CI runs it with the shared corpus (`.ci/run`).

// The default suite's helpers, shared by path (not every one is used here).
#[allow(dead_code, unused_macros)]
#[path = "../it/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../it/format_files.rs"]
mod format_files;

#[allow(dead_code)]
#[path = "../it/adyen.rs"]
mod adyen;

mod formats;
mod payouts;
mod threeway;

use std::path::PathBuf;

/// The corpus: `RECON_REAL_DATA`, which must be set and name a folder.
pub fn real_data() -> PathBuf {
    let Some(dir) = std::env::var_os("RECON_REAL_DATA") else {
        panic!(
            "RECON_REAL_DATA is not set: this target reads the public real statement files \
             from that folder (CI: RECON_REAL_DATA=../shared/real-data cargo test --test real; \
             see docs/testing.md)"
        );
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.is_dir(),
        "RECON_REAL_DATA={} is not a folder",
        dir.display()
    );
    dir
}
