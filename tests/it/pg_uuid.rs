//! A PostgreSQL ledger whose id columns are `uuid`, as the payment service declares them, in
//! any mix with `text` (docs/formats.md, "UUID ids on PostgreSQL"). Each test turns the
//! bundled tables' id columns into `uuid` (foreign keys dropped, `ALTER COLUMN … TYPE uuid
//! USING …::uuid`, keys re-added) and compares with the same data on the bundled `text`
//! schema: the same results.csv, transitions, history, tickets and follow-ups; a re-run that
//! finds its transitions already applied; someone else's update between load and write as a
//! conflict; `recon ledger import` into such tables; `recon explain`; and every guarded
//! transition through the primary key, never a scan of the ledger.

use crate::backends::{
    AS_OF, DAY, output, recon, release_and_complete, results, run_cmd, start_paused,
};
use crate::import::import;
use crate::support::{ATTEMPTS_HEADER, Backend, PAYMENTS_HEADER, Settings, TestEnv};
use recon::db::IdColumn;
use recon::exit;
use sqlx::Row as _;
use std::time::{Duration, Instant};

const IBAN: &str = "DE89370400440532013000";
const GBP_IBAN: &str = "GB33BUKB20201555555555";
const FR_IBAN: &str = "FR1420041010050500013M02606";

/// Payment `n`'s id.
fn pid(n: u32) -> String {
    format!("7d1c0f3e-9a4b-4c2d-8e6f-{n:012x}")
}

/// How the scenario spells attempt ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempts {
    /// UUIDs, canonical.
    Uuid,
    /// UUIDs in upper case (in text columns).
    UpperUuid,
    /// Not UUIDs (`A-1`): the attempt columns stay text.
    Text,
}

impl Attempts {
    fn id(self, n: u32) -> String {
        let uuid = format!("0b8e2a91-5c3d-4f7e-9a1b-{n:012x}");
        match self {
            Attempts::Uuid => uuid,
            Attempts::UpperUuid => uuid.to_uppercase(),
            Attempts::Text => format!("A-{n}"),
        }
    }
}

/// Every id column.
const ALL: [IdColumn; 6] = IdColumn::ALL;
/// The payment id columns only.
const PAYMENT_IDS: [IdColumn; 3] = [
    IdColumn::PaymentId,
    IdColumn::AttemptPaymentId,
    IdColumn::HistoryPaymentId,
];

/// A job on a fresh PostgreSQL database with the scenario's ledger and statement: P1 named by
/// its line in upper case (RESOLVED_SUCCEEDED), P2 without a line (RESOLVED_FAILED), P3
/// SUCCEEDED without a line (a ticket), P4 with a near miss (AMBIGUOUS), P5 named by the
/// provider id recorded on its attempt only (RESOLVED_SUCCEEDED), P6 never sent.
async fn scenario(attempts: Attempts) -> TestEnv {
    let env = TestEnv::on(Backend::Postgres, Settings::default()).await;
    let (payments, attempt_rows) = ledger_rows(attempts);
    env.import(&payments, &attempt_rows).await;
    env.statement(&format!(
        "L-1,{},{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
         L-4,,{GBP_IBAN},39.50,GBP,2026-11-10T13:00:00Z,PAYMENT\n\
         psp-5,,{FR_IBAN},50.00,EUR,2026-11-10T14:30:00Z,PAYMENT\n",
        pid(1).to_uppercase()
    ));
    env
}

/// The scenario's payments and attempts rows (without headers).
fn ledger_rows(attempts: Attempts) -> (String, String) {
    let a = |n| attempts.id(n);
    let payments = format!(
        "{p1},{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,{a1},\n\
         {p2},{IBAN},20.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,{a2},\n\
         {p3},{IBAN},30.00,EUR,SUCCEEDED,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,{a3},\n\
         {p4},{GBP_IBAN},40.00,GBP,UNKNOWN,2026-11-10T12:00:00Z,2026-11-10T12:00:00Z,{a4},\n\
         {p5},{FR_IBAN},50.00,EUR,UNKNOWN,2026-11-10T14:00:00Z,2026-11-10T14:00:00Z,{a5},\n\
         {p6},{IBAN},60.00,EUR,PENDING,2026-11-10T15:00:00Z,,,\n",
        p1 = pid(1),
        p2 = pid(2),
        p3 = pid(3),
        p4 = pid(4),
        p5 = pid(5),
        p6 = pid(6),
        a1 = a(1),
        a2 = a(2),
        a3 = a(3),
        a4 = a(4),
        a5 = a(5),
    );
    let attempt_rows = format!(
        "{a1},{p1},2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         {a2},{p2},2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n\
         {a3},{p3},2026-11-10T11:00:00Z,2026-11-10T11:00:01Z,SUCCEEDED,,\n\
         {a4},{p4},2026-11-10T12:00:00Z,,UNKNOWN,,timeout\n\
         {a5},{p5},2026-11-10T14:00:00Z,,UNKNOWN,psp-5,timeout\n",
        p1 = pid(1),
        p2 = pid(2),
        p3 = pid(3),
        p4 = pid(4),
        p5 = pid(5),
        a1 = a(1),
        a2 = a(2),
        a3 = a(3),
        a4 = a(4),
        a5 = a(5),
    );
    (payments, attempt_rows)
}

/// The rows of `sql` on the job's PostgreSQL database, every column as text (NULL = None).
async fn rows(env: &TestEnv, sql: &str) -> Vec<Vec<Option<String>>> {
    let recon::db::Pool::Postgres(pool) = env.db().await.pool else {
        panic!("a PostgreSQL job")
    };
    let out = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_all(&pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<Option<String>, _>(i))
                .collect()
        })
        .collect();
    pool.close().await;
    out
}

/// Runs `statements` in order on the job's PostgreSQL database.
async fn exec_all(env: &TestEnv, statements: &[String]) {
    let recon::db::Pool::Postgres(pool) = env.db().await.pool else {
        panic!("a PostgreSQL job")
    };
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    pool.close().await;
}

/// Turns `cols` of the job's ledger tables into `uuid`, with the rows in them: the foreign keys
/// on `payments.payment_id` are dropped, the columns altered `USING col::uuid`, and each key is
/// added again where both its ends have one type again.
pub(crate) async fn to_uuid(env: &TestEnv, cols: &[IdColumn]) {
    let mut sql = vec![
        "ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_payment_id_fkey".to_string(),
        "ALTER TABLE payment_status_history DROP CONSTRAINT payment_status_history_payment_id_fkey"
            .to_string(),
    ];
    for c in cols {
        sql.push(format!(
            "ALTER TABLE {t} ALTER COLUMN {c} TYPE uuid USING {c}::uuid",
            t = c.table(),
            c = c.column()
        ));
    }
    let uuid = |c: IdColumn| cols.contains(&c);
    for (child, col) in [
        ("payment_attempts", IdColumn::AttemptPaymentId),
        ("payment_status_history", IdColumn::HistoryPaymentId),
    ] {
        if uuid(col) == uuid(IdColumn::PaymentId) {
            sql.push(format!(
                "ALTER TABLE {child} ADD CONSTRAINT {child}_payment_id_fkey \
                 FOREIGN KEY (payment_id) REFERENCES payments (payment_id)"
            ));
        }
    }
    exec_all(env, &sql).await;
    // The test is about what it claims: exactly those columns are uuid now.
    let mut want: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
    want.sort();
    let mut got: Vec<String> = rows(
        env,
        "SELECT table_name || '.' || column_name FROM information_schema.columns \
         WHERE table_schema = current_schema() AND data_type = 'uuid'",
    )
    .await
    .into_iter()
    .map(|r| r[0].clone().expect("a name"))
    .collect();
    got.sort();
    assert_eq!(got, want);
}

/// What a run leaves in the database: payments, history, tickets and follow-ups, ids as text
/// (`history_attempt`: the expression for the history's attempt id). The job's folder, which
/// ticket evidence names with each statement file, reads `<job>`.
async fn state(env: &TestEnv, history_attempt: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let job = env.dir.path().display().to_string();
    let tables = vec![
        rows(
            env,
            "SELECT payment_id::text, status, attempt_id::text, provider_payment_id \
             FROM payments ORDER BY 1",
        )
        .await,
        rows(
            env,
            &format!(
                "SELECT payment_id::text, from_status, to_status, {history_attempt}, \
                 provider_payment_id, prior_provider_payment_id, actor, run_id, reason \
                 FROM payment_status_history ORDER BY id"
            ),
        )
        .await,
        rows(
            env,
            "SELECT dedupe_key, kind, severity, payment_id, line_ids, amount_minor::text, \
             currency, evidence, status, created_run_id, last_seen_run_id, evidence_sha256 \
             FROM review_tickets ORDER BY dedupe_key",
        )
        .await,
        rows(
            env,
            "SELECT payment_id, opened_on, closed_on FROM recon_followups ORDER BY 1",
        )
        .await,
    ];
    tables
        .into_iter()
        .map(|rows| {
            rows.into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|v| v.map(|v| v.replace(&job, "<job>")))
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// The scenario on the bundled `text` schema and with `cols` turned into `uuid` gives the same
/// results.csv and database rows; a re-run on the `uuid` ledger changes nothing, finds its
/// transitions already applied and writes the first run's results.csv again.
async fn same_as_on_text(attempts: Attempts, cols: &[IdColumn], history_attempt: &str) {
    let text = scenario(attempts).await;
    let uuid = scenario(attempts).await;
    to_uuid(&uuid, cols).await;
    let on_text = text.run(DAY, AS_OF, false, "r1").await;
    let on_uuid = uuid.run(DAY, AS_OF, false, "r1").await;

    let rows = crate::support::outcomes(&on_uuid);
    let has = |o: &str, p: u32| rows.iter().any(|r| r.0 == o && r.1 == pid(p));
    assert!(has("RESOLVED_SUCCEEDED", 1), "{rows:?}");
    assert!(has("RESOLVED_FAILED", 2), "{rows:?}");
    assert!(has("MISSING_AT_PROVIDER", 3), "{rows:?}");
    assert!(has("AMBIGUOUS", 4), "{rows:?}");
    assert!(has("RESOLVED_SUCCEEDED", 5), "{rows:?}");
    assert!(has("NOT_SUBMITTED", 6), "{rows:?}");
    assert_eq!(on_uuid.summary.transitions.applied, 3);
    assert_eq!(on_uuid.summary.transitions, on_text.summary.transitions);
    assert_eq!(on_uuid.summary.tickets, on_text.summary.tickets);
    assert_eq!(
        String::from_utf8(results(&uuid, "r1")).expect("utf-8"),
        String::from_utf8(results(&text, "r1")).expect("utf-8")
    );
    let want = state(&text, history_attempt).await;
    assert_eq!(state(&uuid, history_attempt).await, want);

    // A re-run finds its own transitions, not conflicts, changes nothing, reproduces the first
    // run and reports what a re-run on the text schema reports.
    let again = uuid.run(DAY, AS_OF, false, "r2").await;
    assert_eq!(
        String::from_utf8(results(&uuid, "r2")).expect("utf-8"),
        String::from_utf8(results(&uuid, "r1")).expect("utf-8")
    );
    assert_eq!(again.summary.transitions.applied, 0);
    assert_eq!(again.summary.transitions.already_applied, 3);
    assert_eq!(again.summary.transitions.conflicts, 0);
    let again_on_text = text.run(DAY, AS_OF, false, "r2").await;
    assert_eq!(again.summary.transitions, again_on_text.summary.transitions);
    assert_eq!(
        String::from_utf8(results(&uuid, "r2")).expect("utf-8"),
        String::from_utf8(results(&text, "r2")).expect("utf-8")
    );
    let after = state(&uuid, history_attempt).await;
    assert_eq!(after[..2], want[..2], "payments and history unchanged");
    assert_eq!(after[2].len(), want[2].len(), "no new ticket");
    assert_eq!(after, state(&text, history_attempt).await);
}

/// The payment service's ledger: every id column `uuid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_with_uuid_ids_gives_the_same_results_as_text() {
    same_as_on_text(Attempts::Uuid, &ALL, "attempt_id::text").await;
}

/// Payment ids `uuid`, attempt ids text that are no UUIDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid_payment_ids_with_text_attempt_ids_give_the_same_results() {
    same_as_on_text(Attempts::Text, &PAYMENT_IDS, "attempt_id::text").await;
}

/// The ledger `uuid`, the history table `text` (its payment id compared across the types).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_history_beside_a_uuid_ledger_gives_the_same_results() {
    same_as_on_text(
        Attempts::Uuid,
        &[
            IdColumn::PaymentId,
            IdColumn::PaymentAttemptId,
            IdColumn::AttemptId,
            IdColumn::AttemptPaymentId,
        ],
        "attempt_id::text",
    )
    .await;
}

/// Attempt ids spelled in upper case in the ledger's text columns, and a `uuid` history column
/// for them, which keeps their canonical text: the re-run still recognises recon's own rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upper_case_attempt_id_in_a_uuid_history_is_recognised_on_a_rerun() {
    same_as_on_text(
        Attempts::UpperUuid,
        &[
            IdColumn::PaymentId,
            IdColumn::AttemptPaymentId,
            IdColumn::HistoryPaymentId,
            IdColumn::HistoryAttemptId,
        ],
        "lower(attempt_id::text)",
    )
    .await;
}

/// A generated world shaped like the payment service's data (UUID v4 payment and attempt ids,
/// every kind of exception): the same results.csv and database rows on a `uuid` ledger as on
/// the `text` one, and a re-run that finds every transition already applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_world_gives_the_same_results_on_uuid_ids() {
    use recon_tools::generate::{GenerateOptions, generate};
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 28).expect("date");
    let mut envs = Vec::new();
    for uuid in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let report = generate(&GenerateOptions::new(dir.path(), 400, 11, date)).expect("generate");
        let (name, url) = crate::support::fresh_pg_database().await;
        let db = recon::db::Db::connect(&url).await.expect("connect");
        db.migrate().await.expect("migrate");
        db.close().await;
        let config_path = report.files.config.clone();
        let config = std::fs::read_to_string(&config_path).expect("recon.toml");
        std::fs::write(&config_path, config.replace("sqlite://recon.db", &url))
            .expect("recon.toml");
        let env = TestEnv {
            dir,
            config_path,
            pg_database: Some(name),
        };
        if uuid {
            to_uuid(&env, &ALL).await;
        }
        import(&env, "payments.csv", Some("attempts.csv"))
            .await
            .expect("import");
        let day = date.format("%Y-%m-%d").to_string();
        let as_of = report.as_of_rfc3339();
        let first = env.run(&day, &as_of, false, "g1").await;
        assert!(
            first.summary.transitions.applied > 0,
            "{:?}",
            first.summary.transitions
        );
        let again = env.run(&day, &as_of, false, "g2").await;
        assert_eq!(again.summary.transitions.applied, 0);
        assert_eq!(
            again.summary.transitions.already_applied,
            first.summary.transitions.applied
        );
        assert_eq!(results(&env, "g2"), results(&env, "g1"));
        envs.push((env, first.summary.transitions));
    }
    let (text, uuid) = (&envs[0], &envs[1]);
    assert_eq!(uuid.1, text.1);
    assert_eq!(
        String::from_utf8(results(&uuid.0, "g1")).expect("utf-8"),
        String::from_utf8(results(&text.0, "g1")).expect("utf-8")
    );
    assert_eq!(
        state(&uuid.0, "attempt_id::text").await,
        state(&text.0, "attempt_id::text").await
    );
}

/// Someone else moves P2 between recon's load and its write: on the `uuid` ledger as on the
/// `text` one, the guarded update refuses it, results.csv says so, the other party's change
/// stands and the contradiction is a ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_update_is_a_conflict_as_on_text() {
    let mut seen = Vec::new();
    for uuid in [false, true] {
        let env = scenario(Attempts::Uuid).await;
        if uuid {
            to_uuid(&env, &ALL).await;
        }
        let (child, marker) = start_paused(&env, run_cmd(&env, "r1"), "after_plan");
        exec_all(
            &env,
            &[format!(
                "UPDATE payments SET status = 'SUCCEEDED' WHERE payment_id = '{}'",
                pid(2)
            )],
        )
        .await;
        release_and_complete(child, &marker);
        let text = String::from_utf8(results(&env, "r1")).expect("utf-8");
        let p2 = text
            .lines()
            .find(|l| l.contains(&format!(",{},", pid(2))))
            .expect("P2 row");
        assert!(p2.contains("conflict:FAILED"), "{p2}");
        assert!(p2.starts_with("MISSING_AT_PROVIDER,"), "{p2}");
        let tickets = rows(
            &env,
            &format!(
                "SELECT kind || '|' || severity || '|' || status FROM review_tickets \
                 WHERE payment_id = '{}'",
                pid(2)
            ),
        )
        .await;
        assert_eq!(
            tickets,
            [[Some("MISSING_AT_PROVIDER|HIGH|OPEN".to_string())]]
        );
        let statuses = rows(&env, "SELECT status FROM payments ORDER BY payment_id").await;
        let history = rows(
            &env,
            "SELECT payment_id::text FROM payment_status_history ORDER BY id",
        )
        .await;
        // P1 and P5 went through in the same batch; P2's change by the other party stands.
        assert_eq!(history.len(), 2, "{history:?}");
        seen.push((text, statuses, history));
    }
    assert_eq!(seen[0], seen[1], "text and uuid ledgers alike");
}

/// Every guarded transition and the re-run's look at recon's own history go through the
/// indexes: with sequential scans made a last resort for the database's sessions, two runs
/// (the second finds everything already applied) scan neither the payments nor their history.
/// A comparison the index cannot serve (`payment_id::text = $1`) would be a scan per statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transitions_on_a_uuid_ledger_use_the_indexes() {
    let env = scenario(Attempts::Uuid).await;
    to_uuid(&env, &ALL).await;
    let name = env.pg_database.clone().expect("a PostgreSQL database");
    exec_all(
        &env,
        &[format!("ALTER DATABASE {name} SET enable_seqscan = off")],
    )
    .await;
    let before = scans(&env).await;
    for run_id in ["r1", "r2"] {
        let out = output(run_cmd(&env, run_id));
        assert_eq!(
            out.status.code(),
            Some(exit::OK),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let after = scans(&env).await;
    assert_eq!(after.len(), 2);
    for (table, (seq_before, idx_before), (seq_after, idx_after)) in before
        .iter()
        .zip(&after)
        .map(|((t, b), (_, a))| (t, *b, *a))
    {
        assert_eq!(seq_after, seq_before, "sequential scans of {table}");
        assert!(idx_after > idx_before, "{table} read through an index");
    }
    let history = rows(&env, "SELECT count(*)::text FROM payment_status_history").await;
    assert_eq!(history, [[Some("3".to_string())]]);
}

/// (table, (sequential scans, index scans)) of the payments and their history, once every
/// other session of the database has ended (a session's counts reach the statistics when it
/// ends, before it leaves `pg_stat_activity`). Read on one connection of its own, so that no
/// session of this reading is still ending while it waits.
async fn scans(env: &TestEnv) -> Vec<(String, (i64, i64))> {
    use sqlx::Connection as _;
    let url = env.config().database_url;
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    let t = Instant::now();
    loop {
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut conn)
        .await
        .expect("sessions");
        if others == 0 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "sessions still open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut conn)
        .await
        .expect("fresh statistics");
    let counts: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables \
         WHERE relname IN ('payments', 'payment_status_history') ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .expect("statistics");
    let _ = conn.close().await;
    counts
        .into_iter()
        .map(|(table, seq, idx)| (table, (seq, idx)))
        .collect()
}

/// `recon explain` on the `uuid` ledger says what it says on the `text` one, and finds the
/// payment by its id in upper case too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_works_on_a_uuid_ledger() {
    use recon::explain::{ExplainOptions, explain};
    let opts = |id: String| ExplainOptions {
        id,
        run: Some("r1".into()),
        date: None,
        as_of: None,
    };
    let text = scenario(Attempts::Uuid).await;
    let uuid = scenario(Attempts::Uuid).await;
    to_uuid(&uuid, &ALL).await;
    text.run(DAY, AS_OF, false, "r1").await;
    uuid.run(DAY, AS_OF, false, "r1").await;
    // What explain says, the job's folder (in the statement file's path) as `<job>`.
    let said =
        |env: &TestEnv, text: String| text.replace(&env.dir.path().display().to_string(), "<job>");
    for n in [1, 4, 5] {
        let on_uuid = explain(&uuid.config(), &opts(pid(n)))
            .await
            .expect("explain");
        assert!(on_uuid.contains(&pid(n)), "{on_uuid}");
        let on_text = explain(&text.config(), &opts(pid(n)))
            .await
            .expect("explain");
        assert_eq!(said(&uuid, on_uuid.clone()), said(&text, on_text));
        let upper = explain(&uuid.config(), &opts(pid(n).to_uppercase()))
            .await
            .expect("explain by the id in upper case");
        assert_eq!(upper, on_uuid);
    }
    // The CLI too.
    let out = output(recon(&uuid, &["explain", &pid(1)]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("RESOLVED_SUCCEEDED"));
}

/// `recon ledger import` into `uuid` tables: ids in any UUID spelling are stored as their
/// canonical text and checked in that form (a duplicate by case, an attempt of a payment
/// imported earlier, a payment already there), and an id that is no UUID is rejected with its
/// file and line, nothing imported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_import_fills_uuid_tables_and_rejects_other_ids_by_line() {
    let env = TestEnv::on(Backend::Postgres, Settings::default()).await;
    to_uuid(&env, &ALL).await;
    let (payments, attempts) = ledger_rows(Attempts::Uuid);
    // P1 in upper case, P2 in braces, A2 without hyphens: all the same UUIDs.
    let payments = payments
        .replace(&pid(1), &pid(1).to_uppercase())
        .replace(&pid(2), &format!("{{{}}}", pid(2)));
    let attempts = attempts.replace(
        &Attempts::Uuid.id(2),
        &Attempts::Uuid.id(2).replace('-', ""),
    );
    env.write("payments.csv", &format!("{PAYMENTS_HEADER}\n{payments}"));
    env.write("attempts.csv", &format!("{ATTEMPTS_HEADER}\n{attempts}"));
    import(&env, "payments.csv", Some("attempts.csv"))
        .await
        .expect("import");
    let dump = rows(
        &env,
        "SELECT payment_id::text, attempt_id::text FROM payments ORDER BY 1",
    )
    .await;
    let want: Vec<Vec<Option<String>>> = (1..=6)
        .map(|n| vec![Some(pid(n)), (n < 6).then(|| Attempts::Uuid.id(n))])
        .collect();
    assert_eq!(dump, want);
    let dump = rows(
        &env,
        "SELECT attempt_id::text, payment_id::text, provider_payment_id FROM payment_attempts \
         ORDER BY 1",
    )
    .await;
    assert_eq!(dump.len(), 5);
    assert!(
        dump.iter()
            .all(|r| r[0].as_deref().is_some_and(|a| a.len() == 36))
    );
    // The foreign keys and indexes the bulk load dropped are back.
    let fks = rows(
        &env,
        "SELECT conname::text FROM pg_constraint WHERE contype = 'f' AND conrelid IN \
         ('payments'::regclass, 'payment_attempts'::regclass, \
          'payment_status_history'::regclass) ORDER BY 1",
    )
    .await;
    assert_eq!(fks.len(), 2, "{fks:?}");

    // An attempt of a payment imported before (named in upper case), and a new payment.
    let p7 = pid(7);
    env.write(
        "more.csv",
        &format!("{PAYMENTS_HEADER}\n{p7},{IBAN},70.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n"),
    );
    env.write(
        "more-attempts.csv",
        &format!(
            "{ATTEMPTS_HEADER}\n{},{},2026-11-10T16:00:00Z,,FAILED,,declined\n",
            Attempts::Uuid.id(9),
            pid(3).to_uppercase()
        ),
    );
    import(&env, "more.csv", Some("more-attempts.csv"))
        .await
        .expect("an attempt of an earlier payment");
    assert_eq!(
        rows(
            &env,
            &format!(
                "SELECT payment_id::text FROM payment_attempts WHERE attempt_id = '{}'",
                Attempts::Uuid.id(9)
            )
        )
        .await,
        [[Some(pid(3))]]
    );

    let count = || async {
        rows(&env, "SELECT count(*)::text FROM payments")
            .await
            .remove(0)
            .remove(0)
    };
    let before = count().await;
    // Rejected, each with its file and line; nothing imported.
    let cases: [(&str, String, &str, String); 5] = [
        (
            "a payment id that is no UUID",
            format!("P-1,{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n"),
            "",
            "bad.csv:2: column payment_id: \"P-1\" is not a UUID (the database's \
             payments.payment_id is a uuid column)"
                .to_string(),
        ),
        (
            "an attempt id on the payment that is no UUID",
            format!(
                "{},{IBAN},1.00,EUR,UNKNOWN,2026-11-11T09:00:00Z,2026-11-11T09:00:00Z,A-1,\n",
                pid(20)
            ),
            "",
            "bad.csv:2: column attempt_id: \"A-1\" is not a UUID".to_string(),
        ),
        (
            "the same UUID twice, once in upper case",
            format!(
                "{p},{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n\
                 {u},{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n",
                p = pid(21),
                u = pid(21).to_uppercase()
            ),
            "",
            format!("bad.csv:3: payment_id \"{}\" also at line 2", pid(21)),
        ),
        (
            "a payment already in the database, in upper case",
            format!(
                "{},{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n",
                pid(1).to_uppercase()
            ),
            "",
            format!("payment_id \"{}\" is already in the database", pid(1)),
        ),
        (
            "an attempt whose payment id is no UUID",
            format!(
                "{},{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n",
                pid(22)
            ),
            "x,P-22,2026-11-11T09:00:00Z,,FAILED,,declined\n",
            "bad-attempts.csv:2: column attempt_id: \"x\" is not a UUID".to_string(),
        ),
    ];
    for (what, payments, attempts, message) in cases {
        env.write("bad.csv", &format!("{PAYMENTS_HEADER}\n{payments}"));
        env.write(
            "bad-attempts.csv",
            &format!("{ATTEMPTS_HEADER}\n{attempts}"),
        );
        let err = import(&env, "bad.csv", Some("bad-attempts.csv"))
            .await
            .expect_err(what);
        assert_eq!(exit::code_for(&err), exit::INPUT, "{what}: {err:#}");
        let text = format!("{err:#}");
        assert!(text.contains(&message), "{what}: {text}");
        assert!(!text.contains("invalid input syntax"), "{what}: {text}");
        assert_eq!(count().await, before, "{what}: nothing imported");
    }
    // The attempts file's payment id column is checked too.
    env.write(
        "bad.csv",
        &format!(
            "{PAYMENTS_HEADER}\n{},{IBAN},1.00,EUR,PENDING,2026-11-11T09:00:00Z,,,\n",
            pid(23)
        ),
    );
    env.write(
        "bad-attempts.csv",
        &format!(
            "{ATTEMPTS_HEADER}\n{},P-23,2026-11-11T09:00:00Z,,FAILED,,declined\n",
            Attempts::Uuid.id(23)
        ),
    );
    let err = import(&env, "bad.csv", Some("bad-attempts.csv"))
        .await
        .expect_err("a payment id that is no UUID");
    let text = format!("{err:#}");
    assert!(
        text.contains("bad-attempts.csv:2: column payment_id: \"P-23\" is not a UUID"),
        "{text}"
    );
}

/// Issue 30 point 2 on PostgreSQL, text and `uuid` id columns alike: a line that names a
/// payment older than the run's range (by its id in upper case, or by the provider id of its
/// attempt) is that payment's, found by the whole-ledger lookup; it is never evidence for the
/// UNKNOWN payment of the same recipient (another amount), which is resolved FAILED. (With
/// that payment's money too the line would fit it exactly: a case with both, issue 40 point 7,
/// tests/it/id_shape.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_naming_old_payments_are_theirs_on_uuid_ids() {
    for uuid in [false, true] {
        let env = TestEnv::on(Backend::Postgres, Settings::default()).await;
        let a = |n| Attempts::Uuid.id(n);
        let payments = format!(
            "{p1},{IBAN},9.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,{a1},\n\
             {p7},{IBAN},10.00,EUR,SUCCEEDED,2026-09-01T09:00:00Z,2026-09-01T09:00:00Z,{a7},psp-old-7\n\
             {p8},{FR_IBAN},25.00,EUR,SUCCEEDED,2026-09-02T09:00:00Z,2026-09-02T09:00:00Z,{a8},psp-old-8\n",
            p1 = pid(1),
            p7 = pid(7),
            p8 = pid(8),
            a1 = a(1),
            a7 = a(7),
            a8 = a(8),
        );
        let attempts = format!(
            "{a1},{p1},2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
             {a7},{p7},2026-09-01T09:00:00Z,2026-09-01T09:00:01Z,SUCCEEDED,psp-old-7,\n\
             {a8},{p8},2026-09-02T09:00:00Z,2026-09-02T09:00:01Z,SUCCEEDED,psp-old-8,\n",
            p1 = pid(1),
            p7 = pid(7),
            p8 = pid(8),
            a1 = a(1),
            a7 = a(7),
            a8 = a(8),
        );
        env.import(&payments, &attempts).await;
        if uuid {
            to_uuid(&env, &ALL).await;
        }
        env.statement(&format!(
            "L-1,{},{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             psp-old-8,,{FR_IBAN},25.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n",
            pid(7).to_uppercase()
        ));
        let run = env.run(DAY, AS_OF, false, "r1").await;
        let rows = crate::support::outcomes(&run);
        let has = |o: &str, p: &str| rows.iter().any(|r| r.0 == o && r.1 == p);
        assert!(has("RESOLVED_FAILED", &pid(1)), "uuid {uuid}: {rows:?}");
        // A second payout (or a very late booking) of the old payment: a ticket on it.
        assert!(
            has("DUPLICATE_AT_PROVIDER", &pid(7)),
            "uuid {uuid}: {rows:?}"
        );
        // Its own transaction (the provider id recorded on it), booked late.
        assert!(has("MATCHED", &pid(8)), "uuid {uuid}: {rows:?}");
        assert!(
            !rows.iter().any(|r| r.0 == "ORPHAN_AT_PROVIDER"),
            "uuid {uuid}: {rows:?}"
        );
        // A re-run reproduces it.
        env.run(DAY, AS_OF, false, "r2").await;
        assert_eq!(results(&env, "r2"), results(&env, "r1"), "uuid {uuid}");
    }
}
