//! The fault-matrix cell "input size" (issue 33 point 3): whatever arrives as a statement
//! file, recon's memory stays bounded. A file over `max_file_mb` is refused from its size
//! before a byte is read, a line over `max_line_bytes` and more than `max_rejected_lines`
//! unreadable lines make the file unreadable (its days incomplete, exit 10) instead of a
//! million rejected rows. Peak RSS is read from `/proc` (`VmHWM`) of the `recon` binary run as
//! a child process; the generated files are written into the test's temp folder and deleted
//! with it.

use crate::support::{STATEMENT_HEADER, Settings, TestEnv};
use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

const IBAN: &str = "DE89370400440532013000";

/// What a `recon run` child process did: its exit code, the largest `VmHWM` read from
/// `/proc/<pid>/status` while it ran, and the kernel's own peak (`ru_maxrss` of `wait4`).
struct Child {
    code: Option<i32>,
    vm_hwm_kib: u64,
    maxrss_kib: u64,
    stderr: String,
}

/// `VmHWM` of process `pid` in KiB (0 once it has exited).
fn vm_hwm_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Runs the standard day of `env` with the `recon` binary as a child process, watching its
/// peak RSS.
fn run_child(env: &TestEnv) -> Child {
    let stderr_path = env.path("stderr.txt");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_recon"));
    cmd.args(["run", "--config"])
        .arg(&env.config_path)
        .args([
            "--date",
            "2026-11-10",
            "--as-of",
            "2026-11-20T00:00:00Z",
            "--run-id",
            "r1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
    let (code, vm_hwm_kib, maxrss_kib) = watch(cmd);
    Child {
        code,
        vm_hwm_kib,
        maxrss_kib,
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    }
}

/// Spawns `cmd` and waits for it, reading its `VmHWM` every 5 ms: its exit code, the largest
/// `VmHWM` seen and the kernel's own peak (`ru_maxrss` of `wait4`), in KiB.
///
/// The kernel's peak survives `exec`, and the child is spawned sharing this test process's
/// memory (`posix_spawn`, `CLONE_VM`): its `ru_maxrss` is at least this process's own peak,
/// which in a full suite run may be far above what recon used. When it is not above this
/// process's peak (read once the child has ended) it says nothing about recon, and the
/// sampled `VmHWM` (recon's own memory after `exec`) stands for it.
pub(crate) fn watch(mut cmd: Command) -> (Option<i32>, u64, u64) {
    let child = cmd.spawn().expect("recon binary");
    let pid = child.id() as i32;
    let mut vm_hwm = 0;
    let started = std::time::Instant::now();
    let (status, usage) = loop {
        vm_hwm = vm_hwm.max(vm_hwm_kib(pid));
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child; wait4 writes only into the two locals.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (status, usage);
        }
        assert!(got == 0, "wait4: {}", std::io::Error::last_os_error());
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "recon still runs after 600 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(child);
    // This process's peak only grows: read after the child ended, it bounds whatever the
    // child's `ru_maxrss` took over from it when it was spawned (other tests' threads may
    // have allocated meanwhile).
    let ours = vm_hwm_kib(std::process::id() as i32);
    (
        libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        vm_hwm,
        match usage.ru_maxrss as u64 {
            peak if peak > ours => peak,
            _ => vm_hwm,
        },
    )
}

/// A job of the standard day with an empty ledger and `extra` top-level config lines.
async fn job(extra: &str) -> TestEnv {
    let env = TestEnv::with(Settings {
        extra: extra.to_string(),
        ..Settings::default()
    });
    env.import("", "").await;
    env
}

/// Writes `statement.csv`: the statement header, then `len` bytes from `fill`, 1 MiB at a time.
fn write_statement(env: &TestEnv, len: u64, mut fill: impl FnMut(&mut [u8])) {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(env.path("statement.csv")).expect("create statement"),
    );
    writeln!(f, "{STATEMENT_HEADER}").expect("write");
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        fill(&mut chunk[..n]);
        f.write_all(&chunk[..n]).expect("write");
        left -= n as u64;
    }
    f.flush().expect("flush");
}

/// Random bytes (xorshift64*, seeded: the same garbage every run).
fn garbage(seed: u64) -> impl FnMut(&mut [u8]) {
    let mut x = seed | 1;
    move |buf: &mut [u8]| {
        for chunk in buf.chunks_mut(8) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// The error summary.json gives for the one unreadable statement file.
fn unreadable_error(env: &TestEnv) -> String {
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("out/r1/summary.json")).expect("summary.json"),
    )
    .expect("json");
    let files = summary["unreadable_inputs"]
        .as_array()
        .expect("unreadable_inputs");
    assert_eq!(files.len(), 1, "{files:?}");
    files[0]["error"].as_str().expect("error").to_string()
}

/// The peak RSS a run that reads almost nothing may have (the debug build maps its 300 MB
/// binary, touches a part of it, and builds its report writers).
const SMALL_RUN_KIB: u64 = 256 * 1024;

/// A valid header followed by a 2 GB line: refused from its size before it is read. It used
/// to be read whole (4.2 GiB peak in a debug build, 6.1 GiB in release) and exit 0.
#[tokio::test]
async fn a_2_gb_statement_is_refused_from_its_size_and_memory_stays_flat() {
    let env = job("").await;
    write_statement(&env, 2 << 30, |buf| buf.fill(b'x'));
    let run = run_child(&env);
    std::fs::remove_file(env.path("statement.csv")).expect("delete the 2 GB file");
    assert_eq!(
        run.code,
        Some(recon::exit::INPUT_UNREADABLE),
        "{}",
        run.stderr
    );
    assert!(
        run.vm_hwm_kib > 0 && run.vm_hwm_kib < SMALL_RUN_KIB,
        "peak RSS {} KiB (VmHWM)",
        run.vm_hwm_kib
    );
    assert!(
        run.maxrss_kib < SMALL_RUN_KIB,
        "peak RSS {} KiB (ru_maxrss)",
        run.maxrss_kib
    );
    let error = unreadable_error(&env);
    assert!(
        error.contains(
            "statement.csv: the file is 2147483702 bytes, more than max_file_mb = 112 allows"
        ),
        "{error}"
    );
}

/// A valid header followed by 200 MB of random bytes (1.6 million "lines" of garbage): the
/// file is unreadable after `max_rejected_lines`, not 1.6 million rejected rows and a 380 MB
/// rejected.csv (as it was: exit 0, 937 MiB peak in a debug build), and the encoding hint
/// looks at a sample, not at 200 MB once per candidate encoding.
#[tokio::test]
async fn a_header_and_200_mb_of_garbage_is_an_unreadable_file_not_a_million_rejected_rows() {
    let env = job("max_file_mb = 400").await;
    write_statement(&env, 200 << 20, garbage(33));
    let run = run_child(&env);
    std::fs::remove_file(env.path("statement.csv")).expect("delete the 200 MB file");
    assert_eq!(
        run.code,
        Some(recon::exit::INPUT_UNREADABLE),
        "{}",
        run.stderr
    );
    // The file is read whole (it is under max_file_mb): 200 MB, plus a small run.
    let bound = SMALL_RUN_KIB + 300 * 1024;
    assert!(
        run.vm_hwm_kib < bound,
        "peak RSS {} KiB (VmHWM)",
        run.vm_hwm_kib
    );
    assert!(
        run.maxrss_kib < bound,
        "peak RSS {} KiB (ru_maxrss)",
        run.maxrss_kib
    );
    let error = unreadable_error(&env);
    assert!(
        error.contains("more than max_rejected_lines = 1000 lines are unreadable"),
        "{error}"
    );
    let rejected = std::fs::read_to_string(env.path("out/r1/rejected.csv")).unwrap_or_default();
    assert!(
        rejected.lines().count() <= 1,
        "{} rejected rows",
        rejected.lines().count()
    );
}

/// A line over `max_line_bytes` makes its file unreadable, naming the line; a smaller limit
/// from the config applies.
#[tokio::test]
async fn a_line_over_max_line_bytes_makes_the_file_unreadable() {
    let env = job("max_line_bytes = 4096").await;
    let mut rows = format!("L-1,R-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n");
    rows.push_str(&format!(
        "L-2,{},{IBAN},11.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n",
        "R".repeat(5000)
    ));
    env.statement(&rows);
    let report = env.try_standard_day("r1").await.expect("the run completes");
    let unreadable = report.unreadable_inputs();
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert!(
        unreadable[0].error.contains(
            "statement.csv: line 3 is 5066 bytes or more, more than max_line_bytes = 4096"
        ),
        "{}",
        unreadable[0].error
    );
    assert_eq!(unreadable[0].period, "2026-11-01..2026-11-30");
}

/// `max_rejected_lines` rejected lines are a statement with a few bad lines (read, not
/// complete); one more makes the file unreadable, its days incomplete.
#[tokio::test]
async fn one_rejected_line_more_than_max_rejected_lines_makes_the_file_unreadable() {
    let bad = |n: usize| -> String {
        (0..n)
            .map(|i| format!("L-B{i},R,{IBAN},ten,EUR,2026-11-10T10:00:00Z,PAYMENT\n"))
            .collect()
    };
    let good = format!("L-1,R-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n");
    let env = job("max_rejected_lines = 2").await;
    env.statement(&format!("{good}{}", bad(2)));
    let report = env.try_standard_day("r1").await.expect("run");
    assert!(report.unreadable_inputs().is_empty());
    let rejected = crate::support::read_columns(&report.out_dir.join("rejected.csv"), &["line"]);
    assert_eq!(rejected.len(), 2, "{rejected:?}");

    env.statement(&format!("{good}{}", bad(3)));
    let report = env.try_standard_day("r2").await.expect("run");
    let unreadable = report.unreadable_inputs();
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert!(
        unreadable[0]
            .error
            .contains("more than max_rejected_lines = 2 lines are unreadable"),
        "{}",
        unreadable[0].error
    );
    assert!(
        unreadable[0].error.contains("line 3: column"),
        "{}",
        unreadable[0].error
    );
    assert!(
        crate::support::outcomes(&report).is_empty(),
        "nothing in an unreadable file is used"
    );
}

/// The bounds are job keys: 0 is refused, naming the key.
#[test]
fn a_bound_of_zero_is_a_config_error() {
    for key in ["max_file_mb", "max_line_bytes", "max_rejected_lines"] {
        let env = TestEnv::with(Settings {
            extra: format!("{key} = 0"),
            ..Settings::default()
        });
        let err = recon::config::Config::load(&env.config_path).expect_err("0");
        assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG);
        assert!(
            format!("{err:#}").contains(&format!("key `{key}`: must be at least 1")),
            "{err:#}"
        );
    }
}
