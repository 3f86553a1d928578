//! What a recon process sets up before it does anything (shared by the `recon` binary and
//! `recon-tools`, so the benchmarks measure recon's code under a run's conditions), and the
//! `out!` / `outln!` macros for standard output.

use std::io::IsTerminal;

/// `mi_option_purge_delay` in mimalloc.h (v2 and v3): how long freed memory is kept before it
/// goes back to the OS. 0 returns it at once: a lower peak RSS at the same wall time (see
/// docs/benchmark.md for how such a setting is measured).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's purge delay (when mimalloc is the process's allocator, as in both
/// binaries), SQLite's process-wide memory settings and the log output (`RECON_LOG`, default
/// `warn`; JSON lines when stderr is not a terminal). Call first in `main`, before any thread.
pub fn init() {
    // mimalloc's own MIMALLOC_PURGE_DELAY, when set, wins (for measuring).
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one mimalloc option (an integer in its option table); no threads yet.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    crate::db::tune_sqlite_memory();
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
}

/// Runs a command on a fresh async runtime and gives the process's exit code: the command's
/// own, or, after printing the error (bounded) on stderr, the code the error stands for.
pub fn run_to_exit_code(command: impl std::future::Future<Output = anyhow::Result<i32>>) -> i32 {
    use crate::exit;
    match tokio::runtime::Runtime::new() {
        Ok(rt) => match rt.block_on(command) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {}", exit::bounded(&format!("{e:#}")));
                exit::code_for(&e)
            }
        },
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            exit::INTERNAL
        }
    }
}

/// `print!` that ends the command quietly when the reader has gone (`recon runs list … | head`);
/// see [`crate::exit::write_stdout`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::exit::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` counterpart of [`out!`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::exit::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}
