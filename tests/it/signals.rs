//! Fault-matrix cells of issue 33 points 1 and 2, against the real `recon` binary: SIGTERM and
//! SIGINT to a running recon (as a child, and as PID 1 of a PID namespace, as in a container),
//! and a PostgreSQL that stops answering mid-run (a TCP proxy on loopback that stops
//! forwarding). Each run is held at a fault-injection pause point (`RECON_FAULT_PAUSE`), so the
//! signal or the stall always comes at the same stage.

use crate::backends::{AS_OF, DAY, output, start_paused};
use crate::support::{Backend, Settings, TestEnv, fresh_pg_database};
use recon::exit;
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const IBAN: &str = "DE89370400440532013000";

/// Two UNKNOWN payments recon resolves (one SUCCEEDED by a line, one FAILED: no line in a
/// complete window) and a SUCCEEDED one with no line (a ticket): a run that reaches its commit
/// has transitions, history rows and tickets to commit.
pub(crate) async fn scenario(env: &TestEnv) {
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},20.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n\
             P-3,{IBAN},30.00,EUR,SUCCEEDED,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-3,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:00:00Z,2026-11-10T11:00:01Z,SUCCEEDED,,\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"
    ));
}

/// `recon run` of the scenario's day, as a command (no pause, no database URL from the
/// environment).
fn run_args(env: &TestEnv, run_id: &str) -> Vec<String> {
    [
        "run",
        "--config",
        &env.config_path.display().to_string(),
        "--date",
        DAY,
        "--as-of",
        AS_OF,
        "--run-id",
        run_id,
    ]
    .map(String::from)
    .to_vec()
}

fn clean(mut c: Command) -> Command {
    c.env_remove("RECON_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("RECON_FAULT_PAUSE")
        .env_remove("RECON_LOG");
    c
}

fn recon_run(env: &TestEnv, run_id: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_recon"));
    c.args(run_args(env, run_id));
    clean(c)
}

/// Waits for `child` at most `limit` (a guard against a hang, not a timing assertion): a
/// child still running then is killed and the test fails.
async fn wait_at_most(mut child: Child, limit: Duration, what: &str) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{what}: recon still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn send(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a process this test started.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill {pid}: {}", std::io::Error::last_os_error());
}

/// What every stop before the commit leaves: the exit code of the signal, one line on stderr
/// that names it, the run record FAILED "interrupted by <signal>", no output folder (neither
/// `.tmp` nor renamed), and nothing of the run committed.
async fn assert_stopped_before_commit(env: &TestEnv, out: &Output, signal: &str, code: i32) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{signal}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{signal}: one line: {stderr}");
    assert!(
        lines[0].contains(&format!("interrupted by {signal}"))
            && lines[0].contains("nothing of this day was committed"),
        "{stderr}"
    );
    assert_eq!(
        env.texts("SELECT status || '|' || error FROM recon_runs WHERE run_id = 'r1'")
            .await,
        [format!(
            "FAILED|interrupted by {signal}: stopped {}",
            recon::run::stop::BEFORE_COMMIT
        )]
    );
    assert!(!env.path("out/r1.tmp").exists(), "{signal}: .tmp left");
    assert!(!env.path("out/r1").exists(), "{signal}: output renamed");
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["UNKNOWN", "UNKNOWN", "SUCCEEDED"],
        "{signal}: a transition was committed"
    );
    for table in [
        "SELECT CAST(count(*) AS TEXT) FROM payment_status_history",
        "SELECT CAST(count(*) AS TEXT) FROM review_tickets",
        "SELECT CAST(count(*) AS TEXT) FROM recon_followups",
    ] {
        assert_eq!(env.texts(table).await, ["0"], "{signal}: {table}");
    }
}

/// The stopped run changed nothing a re-run needs: the next run takes the lock, applies the
/// day's effects once and completes; the stopped run's record stays as it was.
async fn rerun_completes(env: &TestEnv) {
    let out = output(recon_run(env, "r2"));
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["SUCCEEDED", "FAILED", "SUCCEEDED"]
    );
    assert_eq!(
        env.texts("SELECT run_id || '|' || status FROM recon_runs ORDER BY run_id")
            .await,
        ["r1|FAILED", "r2|COMPLETED"]
    );
}

/// SIGTERM (as Kubernetes sends it) to a recon held just before its commit, its effects applied
/// in the open transaction and its output written into `r1.tmp/`.
async fn sigterm_before_the_commit_rolls_back_and_exits_143(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    scenario(&env).await;
    let (child, marker) = start_paused(&env, recon_run(&env, "r1"), "before_commit");
    assert!(env.path("out/r1.tmp/results.csv").exists());
    send(child.id(), libc::SIGTERM);
    std::fs::remove_file(&marker).expect("release");
    let out = wait_at_most(child, Duration::from_secs(60), "SIGTERM").await;
    assert_stopped_before_commit(&env, &out, "SIGTERM", exit::INTERRUPTED_SIGTERM).await;
    rerun_completes(&env).await;
}

/// Ctrl-C while recon plans (held after its run record): it stops at the next safe point,
/// exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_planning_stops_at_the_next_safe_point_and_exits_130() {
    let env = TestEnv::new();
    scenario(&env).await;
    let (child, marker) = start_paused(&env, recon_run(&env, "r1"), "after_run_record");
    send(child.id(), libc::SIGINT);
    std::fs::remove_file(&marker).expect("release");
    let out = wait_at_most(child, Duration::from_secs(60), "SIGINT").await;
    assert_stopped_before_commit(&env, &out, "SIGINT", exit::INTERRUPTED_SIGINT).await;
    rerun_completes(&env).await;
}

/// The pid of the only child of process `parent`.
fn only_child(parent: u32) -> u32 {
    let path = format!("/proc/{parent}/task/{parent}/children");
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let kids: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if kids.len() == 1 {
            return kids[0];
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{path}: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// recon as PID 1, as the entrypoint of a container: the kernel drops a signal whose action is
/// the default for PID 1 of a PID namespace, so before recon handled SIGTERM the run went on to
/// the end (rc 0) after being told to stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_recon_as_pid_1_of_a_pid_namespace_stops_it() {
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "this test needs `unshare --pid --fork --mount-proc` (util-linux, as root): {other:?}"
        ),
    }
    let env = TestEnv::new();
    scenario(&env).await;
    let mut c = Command::new("unshare");
    c.args([
        "--pid",
        "--fork",
        "--mount-proc",
        env!("CARGO_BIN_EXE_recon"),
    ])
    .args(run_args(&env, "r1"));
    let (child, marker) = start_paused(&env, clean(c), "before_commit");
    let recon = only_child(child.id());
    let status = std::fs::read_to_string(format!("/proc/{recon}/status")).expect("status");
    let nspid = status
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .expect("NSpid");
    assert!(nspid.trim_end().ends_with("\t1"), "not PID 1: {nspid:?}");
    send(recon, libc::SIGTERM);
    std::fs::remove_file(&marker).expect("release");
    // unshare --fork exits with its child's code.
    let out = wait_at_most(child, Duration::from_secs(60), "PID 1").await;
    assert_stopped_before_commit(&env, &out, "SIGTERM", exit::INTERRUPTED_SIGTERM).await;
}

/// A signal after the commit does not undo it: the day completes (folder in place, record
/// COMPLETED), and the process exits as a completed run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_after_the_commit_lets_the_day_complete() {
    let env = TestEnv::new();
    scenario(&env).await;
    let (child, marker) = start_paused(&env, recon_run(&env, "r1"), "after_commit");
    send(child.id(), libc::SIGTERM);
    std::fs::remove_file(&marker).expect("release");
    let out = wait_at_most(child, Duration::from_secs(60), "after the commit").await;
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env.path("out/r1/summary.json").exists());
    assert_eq!(
        env.texts("SELECT status FROM recon_runs WHERE run_id = 'r1'")
            .await,
        ["COMPLETED"]
    );
}

// ----------------------------------------------------------------------------------------
// A database that stops answering
// ----------------------------------------------------------------------------------------

/// A TCP proxy on loopback in front of the test PostgreSQL. Once [`StallingProxy::stall`]ed,
/// it still reads both sides but forwards nothing: the server never answers, the connections
/// stay open (a hung server, or a network that drops the packets). When one side closes, it
/// closes the other, as the network would once it delivers again.
struct StallingProxy {
    port: u16,
    stalled: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl StallingProxy {
    async fn start(upstream: String) -> StallingProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stalled = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let stalled = Arc::clone(&stalled);
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(forward(cr, sw, Arc::clone(&stalled)));
                    tokio::spawn(forward(sr, cw, Arc::clone(&stalled)));
                }
            }
        });
        StallingProxy {
            port,
            stalled,
            task,
        }
    }

    fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stalled: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stalled.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn authority(url: &str) -> String {
    let rest = url.split_once('@').map(|(_, r)| r).unwrap_or(url);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// Whether any session holds recon's run lock on the server.
async fn run_lock_held(direct: &sqlx::PgPool) -> bool {
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND ((classid::bigint << 32) | objid::bigint) = $1",
    )
    .bind(recon::db::RUN_LOCK_KEY)
    .fetch_one(direct)
    .await
    .expect("pg_locks");
    held > 0
}

/// A PostgreSQL that stops answering at three stages (while the ledger loads, when the
/// transaction begins, at the COMMIT): the run ends with exit 5 within the configured bounds
/// (the guard is a hang check, far above them), its message names the wait that ran out,
/// nothing is committed, the run lock is freed, and the run record keeps the database error
/// (the next run records it from the note the run left) instead of "killed or crashed".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_that_stops_answering_ends_the_run_with_exit_5_and_frees_the_lock() {
    for (stage, waited_for) in [
        ("after_run_record", "loading the ledger: "),
        ("after_plan", "cannot start a transaction: "),
        ("before_commit", "commit: "),
    ] {
        let (name, direct_url) = fresh_pg_database().await;
        let migrated = recon::db::Db::connect(&direct_url).await.expect("connect");
        migrated.migrate().await.expect("migrate");
        migrated.close().await;
        let upstream = authority(&direct_url);
        let proxy = StallingProxy::start(upstream.clone()).await;
        let proxied = direct_url.replace(&upstream, &format!("127.0.0.1:{}", proxy.port));
        let mut env = TestEnv::with(Settings {
            database_url: Some(proxied),
            extra: "[database]\nconnect_timeout = \"5s\"\nstatement_timeout = \"2s\"\n\
                    commit_timeout = \"3s\"\n"
                .into(),
            ..Settings::default()
        });
        env.pg_database = Some(name);
        scenario(&env).await;
        let direct = sqlx::PgPool::connect(&direct_url).await.expect("direct");

        let (child, marker) = start_paused(&env, recon_run(&env, "r1"), stage);
        proxy.stall(true);
        std::fs::remove_file(&marker).expect("release");
        let out = wait_at_most(child, Duration::from_secs(90), stage).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(exit::DATABASE), "{stage}: {stderr}");
        let bound = if stage == "before_commit" {
            "no answer within 3s (`[database] commit_timeout`"
        } else {
            "no answer within 2s (`[database] statement_timeout`"
        };
        assert!(
            stderr.contains(waited_for) && stderr.contains(bound),
            "{stage}: {stderr}"
        );
        if stage == "before_commit" {
            assert!(
                stderr.contains("whether the commit happened is unknown"),
                "{stderr}"
            );
        }
        // The server ends recon's sessions once the proxy passes their close on: the lock is
        // free (polled; the guard only bounds a hang).
        let started = Instant::now();
        while run_lock_held(&direct).await {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{stage}: the run lock is still held"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let statuses: Vec<String> =
            sqlx::query_scalar("SELECT status FROM payments ORDER BY payment_id")
                .fetch_all(&direct)
                .await
                .expect("payments");
        assert_eq!(statuses, ["UNKNOWN", "UNKNOWN", "SUCCEEDED"], "{stage}");
        let history: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_status_history")
            .fetch_one(&direct)
            .await
            .expect("history");
        assert_eq!(history, 0, "{stage}");
        assert!(!env.path("out/r1.tmp").exists(), "{stage}: .tmp left");

        // The network delivers again: the next run takes the lock, records r1's error and
        // completes.
        proxy.stall(false);
        let next = output(recon_run(&env, "r2"));
        assert_eq!(
            next.status.code(),
            Some(exit::OK),
            "{stage}: {}",
            String::from_utf8_lossy(&next.stderr)
        );
        let (status, error): (String, Option<String>) =
            sqlx::query_as("SELECT status, error FROM recon_runs WHERE run_id = 'r1'")
                .fetch_one(&direct)
                .await
                .expect("r1");
        let error = error.unwrap_or_default();
        assert_eq!(status, "FAILED", "{stage}");
        assert!(
            error.contains(waited_for) && error.contains(bound),
            "{stage}: {error}"
        );
        assert!(!env.path("out/r1.error").exists(), "{stage}: note left");
        direct.close().await;
    }
}

/// An invalid port in `database_url` is a configuration error (exit 3), found before anything
/// is tried; the message names the key and masks the password.
#[test]
fn an_invalid_port_in_the_database_url_is_a_config_error() {
    for url in [
        "postgres://recon:Secr3tPw@127.0.0.1:99999/recon",
        "postgres://recon:Secr3tPw@127.0.0.1:port/recon",
    ] {
        let env = TestEnv::with(Settings {
            database_url: Some(url.into()),
            ..Settings::default()
        });
        let out = output(recon_run(&env, "r1"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(exit::CONFIG), "{url}: {stderr}");
        assert!(stderr.contains("database_url"), "{stderr}");
        assert!(!stderr.contains("Secr3tPw"), "{stderr}");
    }
}

/// A run asked about the future (`--date` after today, `--as-of` after now) warns in one line
/// (it was accepted silently); a run of a past day does not.
#[test]
fn a_future_date_or_as_of_warns_in_one_line() {
    let env = TestEnv::new();
    let warned = |out: &Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("Run in the future."))
            .map(String::from)
            .collect()
    };
    let run = |args: &[&str], run_id: &str| {
        let mut c = clean(Command::new(env!("CARGO_BIN_EXE_recon")));
        c.args(["run", "--config"])
            .arg(&env.config_path)
            .args(args)
            .args(["--run-id", run_id]);
        output(c)
    };
    let past = run(&["--date", DAY, "--as-of", AS_OF], "past");
    assert_eq!(past.status.code(), Some(exit::OK));
    assert_eq!(warned(&past), Vec::<String>::new());
    let day = run(&["--date", "2099-01-01"], "day");
    let lines = warned(&day);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("2099-01-01 is after today"), "{lines:?}");
    let both = run(
        &["--date", "2099-01-01", "--as-of", "2099-01-02T00:00:00Z"],
        "both",
    );
    let lines = warned(&both);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("--as-of 2099-01-02T00:00:00+00:00 is in the future")
            && lines[0].contains("2099-01-01 is after today"),
        "{lines:?}"
    );
}

/// A tmpfs mounted over a folder for one test (root only), unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &std::path::Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(at).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs (root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(at.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A full disk under `output_dir`: writing the outputs fails before the commit, so the run
/// ends with exit 7, commits nothing, records why and leaves no `.tmp` folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_output_folder_fails_the_run_before_its_commit() {
    let env = TestEnv::new();
    scenario(&env).await;
    let disk = SmallDisk::mount(&env.path("out"), "8k");
    let out = output(recon_run(&env, "r1"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::OUTPUT), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!env.path("out/r1.tmp").exists(), ".tmp left");
    assert!(!env.path("out/r1").exists());
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["UNKNOWN", "UNKNOWN", "SUCCEEDED"]
    );
    let record = env
        .texts("SELECT status || '|' || error FROM recon_runs WHERE run_id = 'r1'")
        .await;
    assert!(
        record[0].starts_with("FAILED|") && record[0].contains("No space left on device"),
        "{record:?}"
    );
    drop(disk);
    rerun_completes(&env).await;
}

/// Someone else sets a payment SUCCEEDED between recon's load and its write, without the
/// provider's id that recon's line shows: recon's transition is refused (as before), and the id
/// it would have recorded is not dropped silently: a ticket names it. With the id, no ticket.
async fn succeeded_by_someone_else_without_the_provider_id_is_a_ticket(b: Backend) {
    for (update, ticket) in [
        (
            "UPDATE payments SET status = 'SUCCEEDED' WHERE payment_id = 'P-1'",
            true,
        ),
        (
            "UPDATE payments SET status = 'SUCCEEDED', provider_payment_id = 'L-1' \
             WHERE payment_id = 'P-1'",
            false,
        ),
    ] {
        let env = TestEnv::on(b, Settings::default()).await;
        scenario(&env).await;
        let (child, marker) = start_paused(&env, recon_run(&env, "r1"), "after_plan");
        env.exec(update).await;
        std::fs::remove_file(&marker).expect("release");
        let out = wait_at_most(child, Duration::from_secs(60), update).await;
        assert_eq!(
            out.status.code(),
            Some(exit::OK),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tickets = env
            .texts(
                "SELECT kind || '|' || status || '|' || evidence FROM review_tickets \
                 WHERE payment_id = 'P-1'",
            )
            .await;
        if ticket {
            assert_eq!(tickets.len(), 1, "{tickets:?}");
            assert!(
                tickets[0].starts_with("AMBIGUOUS|OPEN|")
                    && tickets[0].contains("provider id none where the provider's line shows L-1"),
                "{tickets:?}"
            );
        } else {
            assert_eq!(tickets, Vec::<String>::new());
        }
    }
}

on_both_backends!(
    sigterm_before_the_commit_rolls_back_and_exits_143,
    succeeded_by_someone_else_without_the_provider_id_is_a_ticket,
);

/// SIGTERM during a range, after its first day's commit: that day completes (folder in place,
/// record COMPLETED), the range stops before its next day and exits 143; the next day has no
/// record and no folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_in_a_range_completes_the_committed_day_and_stops_before_the_next() {
    let env = TestEnv::new();
    scenario(&env).await;
    let mut c = clean(Command::new(env!("CARGO_BIN_EXE_recon")));
    c.args(["run", "--config"]).arg(&env.config_path).args([
        "--from",
        "2026-11-10",
        "--to",
        "2026-11-11",
        "--as-of",
        AS_OF,
        "--run-id",
        "r1",
    ]);
    let (child, marker) = start_paused(&env, c, "after_commit");
    send(child.id(), libc::SIGTERM);
    std::fs::remove_file(&marker).expect("release");
    let out = wait_at_most(child, Duration::from_secs(60), "range").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(exit::INTERRUPTED_SIGTERM),
        "{stderr}"
    );
    assert!(
        stderr.contains("interrupted by SIGTERM: stopped before 2026-11-11 began"),
        "{stderr}"
    );
    assert_eq!(
        env.texts("SELECT run_id || '|' || status FROM recon_runs ORDER BY run_id")
            .await,
        ["r1-20261110|COMPLETED"]
    );
    assert!(env.path("out/r1/2026-11-10/summary.json").exists());
    assert!(!env.path("out/r1/2026-11-11").exists());
    assert!(!env.path("out/r1/2026-11-11.tmp").exists());
    assert!(
        !env.path("out/r1/summary.json").exists(),
        "the range did not finish"
    );
}
