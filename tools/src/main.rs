//! `recon-tools`: recon's test and benchmark tools (see the library, `tools/src/lib.rs`). The
//! process is set up as `recon`'s is (mimalloc and [`recon::process::init`]: allocator
//! settings, SQLite memory, logging), so `bench-load` measures the ledger load under the
//! conditions of a run.

/// mimalloc, as in `recon` (the benchmarks measure recon's code under recon's allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    recon::process::init();
    std::process::exit(recon_tools::cli::main());
}
