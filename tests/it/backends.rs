//! Database behaviour on BOTH backends — SQLite and the real PostgreSQL on 127.0.0.1:5432, each
//! test in a fresh database: idempotent re-runs, conflicts with someone else's update, the run
//! lock (two runs at once), SIGKILL at every stage and re-run, schema checks, and a ledger read
//! through the user's own queries. Crash and concurrency tests drive the real `recon` binary.

use crate::support::{Backend, Settings, TestEnv};
use recon::exit;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const IBAN: &str = "DE89370400440532013000";
pub(crate) const DAY: &str = "2026-11-10";
pub(crate) const AS_OF: &str = "2026-11-20T00:00:00Z";

/// The scenario of `runs::mixed_env` plus an AMBIGUOUS pair, so every kind of effect happens:
/// a RESOLVED_SUCCEEDED and a RESOLVED_FAILED transition, and tickets.
async fn env_on(backend: Backend) -> TestEnv {
    env_with(backend, Settings::default()).await
}

async fn env_with(backend: Backend, settings: Settings) -> TestEnv {
    let env = TestEnv::on(backend, settings).await;
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},20.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n\
             P-3,{IBAN},30.00,EUR,SUCCEEDED,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-3,\n\
             P-4,GB33BUKB20201555555555,40.00,GBP,UNKNOWN,2026-11-10T12:00:00Z,2026-11-10T12:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:00:00Z,2026-11-10T11:00:01Z,SUCCEEDED,,\n\
         A-4,P-4,2026-11-10T12:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
         L-4,,GB33BUKB20201555555555,39.50,GBP,2026-11-10T13:00:00Z,PAYMENT\n"
    ));
    env
}

pub(crate) fn results(env: &TestEnv, run_id: &str) -> Vec<u8> {
    std::fs::read(env.path(&format!("out/{run_id}/results.csv"))).expect("results.csv")
}

async fn count(env: &TestEnv, sql: &'static str) -> usize {
    env.texts(sql).await[0].parse().expect("a count")
}

const HISTORY: &str = "SELECT CAST(count(*) AS TEXT) FROM payment_status_history";
const TICKETS: &str = "SELECT CAST(count(*) AS TEXT) FROM review_tickets";

pub(crate) fn recon(env: &TestEnv, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_recon"));
    c.args(args)
        .arg("--config")
        .arg(&env.config_path)
        .env_remove("RECON_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("RECON_FAULT_PAUSE");
    c
}

pub(crate) fn run_cmd(env: &TestEnv, run_id: &str) -> Command {
    recon(
        env,
        &["run", "--date", DAY, "--as-of", AS_OF, "--run-id", run_id],
    )
}

pub(crate) fn output(mut c: Command) -> Output {
    c.output().expect("recon runs")
}

/// Starts `c` paused at `stage`; returns the child once it is there, and the marker to delete
/// to let it go on.
pub(crate) fn start_paused(env: &TestEnv, mut c: Command, stage: &str) -> (Child, PathBuf) {
    let marker = env.path(&format!("paused-{stage}"));
    let _ = std::fs::remove_file(&marker);
    let mut child = c
        .env("RECON_FAULT_PAUSE", format!("{stage}:{}", marker.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn recon");
    let t = Instant::now();
    while !marker.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().expect("output");
            panic!(
                "recon ended ({status}) before reaching {stage} (built without the feature \
                 fault-injection?): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{stage} never reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, marker)
}

/// Lets a run paused by [`start_paused`] go on and waits until it completed (exit 0).
pub(crate) fn release_and_complete(child: Child, marker: &std::path::Path) -> Output {
    std::fs::remove_file(marker).expect("release");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

async fn rerun_is_identical_and_changes_nothing_more(b: Backend) {
    let env = env_on(b).await;
    let first = env.run(DAY, AS_OF, false, "r1").await;
    let rows = crate::support::outcomes(&first);
    let has = |o: &str, p: &str| rows.iter().any(|r| r.0 == o && r.1 == p);
    assert!(has("RESOLVED_SUCCEEDED", "P-1"), "{rows:?}");
    assert!(has("RESOLVED_FAILED", "P-2"), "{rows:?}");
    assert!(has("MISSING_AT_PROVIDER", "P-3"), "{rows:?}");
    assert!(has("AMBIGUOUS", "P-4"), "{rows:?}");
    assert_eq!(first.summary.transitions.applied, 2);
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["SUCCEEDED", "FAILED", "SUCCEEDED", "UNKNOWN"]
    );
    assert_eq!(count(&env, HISTORY).await, 2);
    let tickets = count(&env, TICKETS).await;
    assert!(tickets >= 2, "AMBIGUOUS and MISSING_AT_PROVIDER tickets");

    let second = env.run(DAY, AS_OF, false, "r2").await;
    assert_eq!(results(&env, "r1"), results(&env, "r2"));
    assert_eq!(second.summary.transitions.applied, 0);
    assert_eq!(second.summary.transitions.already_applied, 2);
    assert_eq!(count(&env, HISTORY).await, 2);
    assert_eq!(count(&env, TICKETS).await, tickets);
    assert_eq!(
        env.texts("SELECT status FROM recon_runs ORDER BY run_id")
            .await,
        ["COMPLETED", "COMPLETED"]
    );
}

/// Someone else moves P-2 between recon's load and its write: the guarded update refuses it,
/// results.csv says so, the other party's change stands, and the contradiction is a ticket
/// (issue 12 point 5: every conflicting guarded transition raises one): recon found no line
/// in a complete window, yet the ledger now says SUCCEEDED.
async fn someone_elses_update_between_load_and_write_is_a_conflict(b: Backend) {
    let env = env_on(b).await;
    let (child, marker) = start_paused(&env, run_cmd(&env, "r1"), "after_plan");
    env.exec("UPDATE payments SET status = 'SUCCEEDED' WHERE payment_id = 'P-2'")
        .await;
    release_and_complete(child, &marker);
    let text = String::from_utf8(results(&env, "r1")).expect("utf-8");
    let p2 = text.lines().find(|l| l.contains(",P-2,")).expect("P-2 row");
    assert!(p2.contains("conflict:FAILED"), "{p2}");
    assert!(p2.starts_with("MISSING_AT_PROVIDER,"), "{p2}");
    assert_eq!(
        env.texts("SELECT kind || '|' || severity || '|' || status FROM review_tickets WHERE payment_id = 'P-2'")
            .await,
        ["MISSING_AT_PROVIDER|HIGH|OPEN"]
    );
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-2'")
            .await,
        ["SUCCEEDED"],
        "the other party's change stands"
    );
    // P-1's transition in the same batch went through.
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["SUCCEEDED"]
    );
    assert_eq!(count(&env, HISTORY).await, 1);
}

/// A second run while one holds the lock exits with LOCKED; with --wait it runs afterwards.
async fn two_runs_at_once_are_serialised(b: Backend) {
    let env = env_on(b).await;
    let (first, marker) = start_paused(&env, run_cmd(&env, "a"), "after_run_record");
    let second = output(run_cmd(&env, "b"));
    assert_eq!(second.status.code(), Some(exit::LOCKED));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("--wait"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let mut waiting = run_cmd(&env, "c");
    let waiting = waiting
        .arg("--wait")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !env.path("out/c").exists(),
        "the waiting run must not start while the lock is held"
    );
    std::fs::remove_file(&marker).expect("release");
    let first = first.wait_with_output().expect("wait a");
    assert_eq!(first.status.code(), Some(exit::OK));
    let waited = waiting.wait_with_output().expect("wait c");
    assert_eq!(
        waited.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert_eq!(results(&env, "a"), results(&env, "c"));
    assert_eq!(
        count(&env, HISTORY).await,
        2,
        "the waiting run re-found the changes"
    );
    assert_eq!(
        env.texts("SELECT run_id FROM recon_runs ORDER BY run_id")
            .await,
        ["a", "c"],
        "the refused run left no record"
    );
}

/// SIGKILL at every stage, then a normal run: the same results as an uninterrupted run, no
/// doubled transitions or tickets, and the killed run's record says it did not complete.
async fn a_run_killed_at_any_stage_leaves_nothing_half_done(b: Backend) {
    let reference = env_on(b).await;
    reference.run(DAY, AS_OF, false, "ref").await;
    let want_results = results(&reference, "ref");
    let want_history = count(&reference, HISTORY).await;
    let want_tickets = count(&reference, TICKETS).await;
    drop(reference);
    for stage in recon::fault::STAGES {
        let env = env_on(b).await;
        let (mut child, _marker) = start_paused(&env, run_cmd(&env, "killed"), stage);
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let committed = matches!(stage, "after_commit" | "after_rename");
        assert_eq!(
            count(&env, HISTORY).await,
            if committed { want_history } else { 0 },
            "history after a kill at {stage}"
        );
        assert_eq!(
            count(&env, TICKETS).await,
            if committed { want_tickets } else { 0 },
            "tickets after a kill at {stage}"
        );
        assert_eq!(
            env.texts("SELECT status FROM recon_runs").await,
            ["RUNNING"],
            "the killed run is not complete ({stage})"
        );
        let out = output(run_cmd(&env, "next"));
        assert_eq!(
            out.status.code(),
            Some(exit::OK),
            "{stage}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(results(&env, "next"), want_results, "results after {stage}");
        assert_eq!(count(&env, HISTORY).await, want_history, "{stage}");
        assert_eq!(count(&env, TICKETS).await, want_tickets, "{stage}");
        // Killed after its folder was renamed into place, the run had done everything but
        // mark its record: the next run completes the record from that folder (issue 33).
        let finished = stage == "after_rename";
        assert_eq!(
            env.texts("SELECT status FROM recon_runs ORDER BY run_id")
                .await,
            [if finished { "COMPLETED" } else { "FAILED" }, "COMPLETED"],
            "killed run marked as interrupted ({stage})"
        );
        if finished {
            assert_eq!(
                env.texts("SELECT counts FROM recon_runs WHERE run_id = 'killed'")
                    .await,
                env.texts("SELECT counts FROM recon_runs WHERE run_id = 'next'")
                    .await,
                "the completed record's counts come from its summary.json"
            );
            continue;
        }
        let error = env
            .texts("SELECT error FROM recon_runs WHERE run_id = 'killed'")
            .await;
        assert!(error[0].contains("interrupted"), "{error:?}");
        let listed = output(recon(&env, &["runs", "list"]));
        let listed = String::from_utf8_lossy(&listed.stdout);
        let killed = listed
            .lines()
            .find(|l| l.starts_with("killed "))
            .unwrap_or_else(|| panic!("{listed}"));
        assert!(
            killed.contains("FAILED") && killed.contains("interrupted"),
            "{listed}"
        );
        assert!(
            !env.path("out/killed.tmp").exists(),
            "half-written output removed ({stage})"
        );
    }
}

/// Unmigrated and newer schemas stop a run with the DATABASE code and a message saying what
/// to do; `recon migrate` fixes the first.
async fn schema_mismatches_stop_with_a_clear_message(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    let mut _cleanup = None;
    match b {
        // A fresh PostgreSQL database that nobody migrated.
        Backend::Postgres => {
            let (name, url) = crate::support::fresh_pg_database().await;
            let cfg = std::fs::read_to_string(&env.config_path).expect("config");
            let old = env.config().database_url;
            std::fs::write(&env.config_path, cfg.replace(&old, &url)).expect("config");
            _cleanup = Some(DropDb(name));
            check_unmigrated_then_migrate(&env).await;
            // The guarded transitions rewrite payments in place: the table keeps room on each
            // page for the new row version (a HOT update, no index entry).
            assert_eq!(
                env.texts(
                    "SELECT array_to_string(reloptions, ',') FROM pg_class \
                     WHERE oid = to_regclass('payments')"
                )
                .await,
                vec!["fillfactor=90".to_string()]
            );
        }
        // An existing SQLite file with someone's tables but no recon schema.
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&format!(
                "sqlite://{}?mode=rwc",
                env.path("recon.db").display()
            ))
            .await
            .expect("sqlite");
            sqlx::query("CREATE TABLE other (x INTEGER)")
                .execute(&pool)
                .await
                .expect("table");
            pool.close().await;
            check_unmigrated_then_migrate(&env).await;
        }
    }
    // A migration this binary does not know: a newer schema.
    env.exec(match b {
        Backend::Sqlite => {
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (29991231000000, 'from the future', TRUE, X'00', 0)"
        }
        Backend::Postgres => {
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (29991231000000, 'from the future', TRUE, '\\x00'::bytea, 0)"
        }
    })
    .await;
    let out = output(run_cmd(&env, "x"));
    assert_eq!(out.status.code(), Some(exit::DATABASE));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("29991231000000") && err.contains("newer"),
        "{err}"
    );
}

struct DropDb(String);
impl Drop for DropDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(crate::support::pg_admin_url())
            .arg("-qc")
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0))
            .output();
    }
}

async fn check_unmigrated_then_migrate(env: &TestEnv) {
    let out = output(run_cmd(env, "x"));
    assert_eq!(out.status.code(), Some(exit::DATABASE));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("recon migrate"), "{err}");
    let out = output(recon(env, &["migrate"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied migration"));
    let out = output(recon(env, &["migrate"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "schema up to date\n");
    let out = output(run_cmd(env, "after-migrate"));
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ledger read through the user's own queries (here: a legacy view with other column
/// names) gives the same results as the bundled tables.
async fn a_ledger_in_its_own_schema_is_read_through_configured_queries(b: Backend) {
    let bundled = env_on(b).await;
    bundled.run(DAY, AS_OF, true, "plain").await;
    let custom = env_with(
        b,
        Settings {
            extra: r#"
[ledger]
payments_query = """SELECT id AS payment_id, iban AS recipient_account, cents AS amount_minor,
    ccy AS currency, state AS status, created AS created_at, started AS started_at,
    try_id AS attempt_id, psp_id AS provider_payment_id FROM legacy_payments"""
attempts_query = """SELECT try_id AS attempt_id, pay_id AS payment_id, started AS started_at,
    NULL AS finished_at, NULL AS outcome, psp_id AS provider_payment_id FROM legacy_attempts"""
"#
            .into(),
            ..Settings::default()
        },
    )
    .await;
    custom
        .exec(
            "CREATE VIEW legacy_payments AS SELECT payment_id AS id, recipient_account AS iban,
             amount_minor AS cents, currency AS ccy, status AS state, created_at AS created,
             started_at AS started, attempt_id AS try_id, provider_payment_id AS psp_id
             FROM payments",
        )
        .await;
    custom
        .exec(
            "CREATE VIEW legacy_attempts AS SELECT attempt_id AS try_id, payment_id AS pay_id,
             started_at AS started, provider_payment_id AS psp_id FROM payment_attempts",
        )
        .await;
    custom.run(DAY, AS_OF, true, "plain").await;
    assert_eq!(results(&bundled, "plain"), results(&custom, "plain"));
    assert!(
        String::from_utf8(results(&custom, "plain"))
            .expect("utf-8")
            .contains("RESOLVED_SUCCEEDED,P-1"),
        "the custom read found the payments"
    );
}

/// A range runs day by day with one summary, and re-running it gives byte-identical days.
async fn a_range_rerun_is_byte_identical_per_day(b: Backend) {
    let env = env_on(b).await;
    let first = env
        .try_run("2026-11-09", "2026-11-12", AS_OF, false, "m1")
        .await
        .expect("range");
    let second = env
        .try_run("2026-11-09", "2026-11-12", AS_OF, false, "m2")
        .await
        .expect("range again");
    for day in ["2026-11-09", "2026-11-10", "2026-11-11", "2026-11-12"] {
        let a = std::fs::read(first.out_dir.join(day).join("results.csv")).expect("day 1");
        let b = std::fs::read(second.out_dir.join(day).join("results.csv")).expect("day 2");
        assert_eq!(a, b, "{day}");
    }
    let (_, range) = first.range.as_ref().expect("range summary");
    assert_eq!(range.days.len(), 4);
    assert_eq!(range.outcomes["RESOLVED_SUCCEEDED"].count, 1);
    assert_eq!(range.outcomes["RESOLVED_FAILED"].count, 1);
    assert!(first.out_dir.join("summary.json").exists());
    let (_, again) = second.range.as_ref().expect("range summary");
    assert_eq!(again.transitions.applied, 0);
    assert_eq!(again.transitions.already_applied, 2);
}

/// A payment resolved through the provider id only its attempt carried (the payment row had
/// none) is resolved the same way on a re-run: the re-run sees the payment as it was before
/// recon recorded that id on it, attempt id included. Two payments of the same amount to the
/// same recipient make the other way (recipient + amount + window) ambiguous, so a re-run that
/// lost the attempt's id would not reproduce the first run (DESIGN.md rule 4).
async fn a_rerun_still_links_through_the_attempts_provider_id(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:05:00Z,2026-11-10T09:05:00Z,A-2,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,PSP-77,timeout\n\
         A-2,P-2,2026-11-10T09:05:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&format!(
        "PSP-77,INV-9,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"
    ));
    let first = env.run(DAY, AS_OF, false, "r1").await;
    assert_eq!(
        crate::support::outcomes(&first),
        vec![
            ("RESOLVED_SUCCEEDED".into(), "P-1".into(), "PSP-77".into()),
            ("RESOLVED_FAILED".into(), "P-2".into(), String::new()),
        ]
    );
    let second = env.run(DAY, AS_OF, false, "r2").await;
    assert_eq!(
        String::from_utf8(results(&env, "r2")),
        String::from_utf8(results(&env, "r1"))
    );
    assert_eq!(second.summary.transitions.applied, 0);
    assert_eq!(second.summary.transitions.already_applied, 2);
    assert_eq!(second.summary.transitions.conflicts, 0);
    assert_eq!(second.summary.tickets.created, 0);
    assert_eq!(count(&env, HISTORY).await, 2, "no repeated transitions");
}

/// A run lock given back is free for the next run at once, and a held one still refuses: a
/// PostgreSQL server ends a closed connection's backend (and with it the advisory lock) a
/// moment after the process let it go, and a run started right after another ended must not
/// be refused as if the other were still at work (it was, now and then, on a busy CI host).
async fn a_run_lock_given_back_is_free_for_the_next_run_at_once(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    let db = env.db().await;
    for i in 0..30 {
        let lock = db
            .lock(false)
            .await
            .unwrap_or_else(|e| panic!("take {i} right after the last was given back: {e:#}"));
        drop(lock);
    }
    let held = db.lock(false).await.expect("take");
    let refused = db.lock(false).await.expect_err("a held lock refuses");
    assert!(
        format!("{refused:#}").contains("another recon run holds the run lock"),
        "{refused:#}"
    );
    drop(held);
    if b == Backend::Postgres {
        // A lock its holder gives back a moment later (as a server ends the backend of a
        // process that just exited) is taken, not refused.
        let held = db.lock(false).await.expect("take");
        let giving_back = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(held);
        });
        let next = db.lock(false).await;
        giving_back.await.expect("given back");
        if let Err(e) = next {
            panic!("a lock given back 0.5 s later was refused: {e:#}");
        }
    }
    db.close().await;
}

on_both_backends!(
    a_run_lock_given_back_is_free_for_the_next_run_at_once,
    rerun_is_identical_and_changes_nothing_more,
    someone_elses_update_between_load_and_write_is_a_conflict,
    two_runs_at_once_are_serialised,
    a_run_killed_at_any_stage_leaves_nothing_half_done,
    schema_mismatches_stop_with_a_clear_message,
    a_ledger_in_its_own_schema_is_read_through_configured_queries,
    a_range_rerun_is_byte_identical_per_day,
    a_rerun_still_links_through_the_attempts_provider_id,
);

/// Every schema change ships for both backends under the same version and name, so a ledger
/// column the code reads exists on either; the only exceptions are PostgreSQL storage settings
/// with no SQLite counterpart, listed here.
#[test]
fn both_backends_ship_the_same_migrations() {
    const POSTGRES_ONLY: [&str; 2] = ["payments fillfactor", "payments partition index"];
    let of = |m: &'static sqlx::migrate::Migrator| -> Vec<(i64, String)> {
        m.iter()
            .filter(|m| m.migration_type.is_up_migration())
            .map(|m| (m.version, m.description.to_string()))
            .collect()
    };
    let sqlite = of(&recon::db::SQLITE_MIGRATIONS);
    let postgres: Vec<(i64, String)> = of(&recon::db::POSTGRES_MIGRATIONS)
        .into_iter()
        .filter(|(_, d)| !POSTGRES_ONLY.contains(&d.as_str()))
        .collect();
    assert_eq!(sqlite, postgres);
    assert!(
        sqlite
            .iter()
            .any(|(v, d)| *v == 20261213000100 && d == "payments merchant"),
        "{sqlite:?}"
    );
}
