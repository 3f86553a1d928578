//! `recon-tools`: recon's test and benchmark tools (see the library, `tools/src/lib.rs`). The
//! process is set up as `recon`'s is (`src/main.rs`: allocator, SQLite memory, logging), so
//! `bench-load` measures the ledger load under the conditions of a run.

use std::io::IsTerminal;

/// mimalloc, as in `recon` (the benchmarks measure recon's code under recon's allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h, set to 0 as `recon` does.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one mimalloc option (an integer in its option table); no threads yet.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    recon::db::tune_sqlite_memory();
    let filter = tracing_subscriber::EnvFilter::try_from_env("RECON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::io::stderr().is_terminal() {
        builder.init();
    } else {
        builder.json().init();
    }
    std::process::exit(recon_tools::cli::main());
}
