//! Whole runs against a real SQLite database: idempotency, dry runs, the review queue,
//! carry-over, imports, normalisation across time zones and currencies, exit codes.

use crate::support::{Settings, TestEnv, outcomes};
use recon::exit;

const IBAN: &str = "DE89370400440532013000";

fn row(o: &str, p: &str, l: &str) -> (String, String, String) {
    (o.into(), p.into(), l.into())
}

async fn status_of(env: &TestEnv, id: &str) -> String {
    let pool = env.pool().await;
    let (s,): (String,) = sqlx::query_as("SELECT status FROM payments WHERE payment_id = ?1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .expect("payment");
    s
}

async fn count(env: &TestEnv, sql: &'static str) -> i64 {
    let pool = env.pool().await;
    let (n,): (i64,) = sqlx::query_as(sql).fetch_one(&pool).await.expect("count");
    n
}

/// A small ledger with one of each state change and one ticket (the scenario of the signal
/// tests).
async fn mixed_env() -> TestEnv {
    let env = TestEnv::new();
    crate::signals::scenario(&env).await;
    env
}

#[tokio::test]
async fn rerun_is_byte_identical_without_new_transitions_or_tickets() {
    let env = mixed_env().await;
    let first = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    assert_eq!(
        outcomes(&first),
        vec![
            row("RESOLVED_SUCCEEDED", "P-1", "L-1"),
            row("RESOLVED_FAILED", "P-2", ""),
            row("MISSING_AT_PROVIDER", "P-3", ""),
        ]
    );
    assert_eq!(first.summary.transitions.applied, 2);
    assert_eq!(status_of(&env, "P-1").await, "SUCCEEDED");
    assert_eq!(status_of(&env, "P-2").await, "FAILED");
    let history = "SELECT count(*) FROM payment_status_history";
    let tickets = "SELECT count(*) FROM review_tickets";
    assert_eq!(count(&env, history).await, 2);
    assert_eq!(count(&env, tickets).await, 1);

    let second = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r2")
        .await;
    assert_eq!(
        std::fs::read(first.out_dir.join("results.csv")).expect("r1"),
        std::fs::read(second.out_dir.join("results.csv")).expect("r2"),
    );
    assert_eq!(second.summary.transitions.applied, 0);
    assert_eq!(second.summary.transitions.already_applied, 2);
    assert_eq!(count(&env, history).await, 2, "no repeated transitions");
    assert_eq!(count(&env, tickets).await, 1, "no duplicate tickets");
    // The provider id was recorded on the resolved payment.
    let pool = env.pool().await;
    let (ppid,): (Option<String>,) =
        sqlx::query_as("SELECT provider_payment_id FROM payments WHERE payment_id = 'P-1'")
            .fetch_one(&pool)
            .await
            .expect("ppid");
    assert_eq!(ppid.as_deref(), Some("L-1"));
    let (runs,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM recon_runs WHERE status = 'COMPLETED'")
            .fetch_one(&pool)
            .await
            .expect("runs");
    assert_eq!(runs, 2);
}

#[tokio::test]
async fn dry_run_writes_results_but_changes_nothing() {
    let env = mixed_env().await;
    let dry = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", true, "dry")
        .await;
    assert!(dry.out_dir.join("results.csv").exists());
    assert_eq!(dry.summary.transitions.planned, 2);
    assert_eq!(status_of(&env, "P-1").await, "UNKNOWN");
    assert_eq!(status_of(&env, "P-2").await, "UNKNOWN");
    for sql in [
        "SELECT count(*) FROM payment_status_history",
        "SELECT count(*) FROM review_tickets",
        "SELECT count(*) FROM recon_runs",
        "SELECT count(*) FROM recon_followups",
    ] {
        assert_eq!(count(&env, sql).await, 0, "{sql}");
    }
    // A real run afterwards reports exactly what the dry run predicted.
    let real = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "real")
        .await;
    assert_eq!(
        std::fs::read(dry.out_dir.join("results.csv")).expect("dry"),
        std::fs::read(real.out_dir.join("results.csv")).expect("real"),
    );
}

#[tokio::test]
async fn a_resolved_ticket_stays_resolved_on_reruns() {
    let env = mixed_env().await;
    env.run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    let db = env.db().await;
    let open = recon::tickets::list(&db, true).await.expect("list");
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].kind, "MISSING_AT_PROVIDER");
    recon::tickets::resolve(&db, open[0].ticket_id, "alice", "confirmed with provider")
        .await
        .expect("resolve");
    assert!(
        recon::tickets::resolve(&db, open[0].ticket_id, "bob", "again")
            .await
            .is_err()
    );
    env.run("2026-11-10", "2026-11-20T00:00:00Z", false, "r2")
        .await;
    assert!(
        recon::tickets::list(&db, true)
            .await
            .expect("list")
            .is_empty()
    );
    let all = recon::tickets::list(&db, false).await.expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, "RESOLVED");
    assert_eq!(all[0].resolved_by.as_deref(), Some("alice"));
    assert_eq!(all[0].last_seen_run_id, "r2");
    // Evidence never carries the full account number.
    assert!(!all[0].evidence.contains(IBAN), "{}", all[0].evidence);
    assert!(all[0].evidence.contains("****3000"));
}

#[tokio::test]
async fn awaiting_payments_are_carried_into_later_runs_until_resolved() {
    let env = TestEnv::with(Settings {
        complete: Some(("2026-11-01".into(), "2026-11-30".into())),
        ..Settings::default()
    });
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T22:00:00Z,2026-11-10T22:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T22:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    // Night of the 10th: nothing yet.
    let d10 = env
        .run("2026-11-10", "2026-11-11T02:00:00Z", false, "d10")
        .await;
    assert_eq!(outcomes(&d10), vec![row("AWAITING_EVIDENCE", "P-1", "")]);
    // The provider books it on the 12th; the run for the 12th picks P-1 up.
    env.statement(&format!(
        "L-9,P-1,{IBAN},10.00,EUR,2026-11-12T08:00:00Z,PAYMENT\n"
    ));
    let d11 = env
        .run("2026-11-11", "2026-11-12T02:00:00Z", false, "d11")
        .await;
    assert_eq!(outcomes(&d11), vec![row("AWAITING_EVIDENCE", "P-1", "")]);
    let d12 = env
        .run("2026-11-12", "2026-11-13T02:00:00Z", false, "d12")
        .await;
    assert_eq!(
        outcomes(&d12),
        vec![row("RESOLVED_SUCCEEDED", "P-1", "L-9")]
    );
    assert_eq!(status_of(&env, "P-1").await, "SUCCEEDED");
    // Re-running the 12th reproduces it; the 13th no longer carries it.
    let again = env
        .run("2026-11-12", "2026-11-13T02:00:00Z", false, "d12b")
        .await;
    assert_eq!(
        std::fs::read(d12.out_dir.join("results.csv")).expect("a"),
        std::fs::read(again.out_dir.join("results.csv")).expect("b")
    );
    let d13 = env
        .run("2026-11-13", "2026-11-14T02:00:00Z", false, "d13")
        .await;
    assert!(outcomes(&d13).is_empty(), "{:?}", outcomes(&d13));
}

#[tokio::test]
async fn someone_else_moving_the_payment_is_a_conflict_not_forced() {
    let env = mixed_env().await;
    // The payment service retries P-2 with a new attempt between recon's load and write:
    // simulated by changing the attempt before the run while recon's plan uses the loaded row.
    let pool = env.pool().await;
    sqlx::query("UPDATE payments SET status = 'FAILED' WHERE payment_id = 'P-2'")
        .execute(&pool)
        .await
        .expect("update");
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    // Loaded as FAILED now: classified FAILED_OK, no transition attempted.
    assert!(outcomes(&report).contains(&row("FAILED_OK", "P-2", "")));
    let t = recon::ledger::transitions::Transition {
        payment_id: "P-1".into(),
        from: recon::ledger::Status::Unknown,
        to: recon::ledger::Status::Failed,
        attempt_id: Some("A-1".into()),
        provider_payment_id: None,
        prior_provider_payment_id: None,
        reason: "test".into(),
    };
    // P-1 is SUCCEEDED (recon moved it): a transition from UNKNOWN is refused, not forced.
    let db = env.db().await;
    let mut tx = db.begin().await.expect("tx");
    let applied = recon::store::apply(&mut tx, &t, "x", "2026-11-20 00:00:00.000000")
        .await
        .expect("apply");
    assert_eq!(applied, recon::ledger::transitions::Applied::Conflict);
    tx.commit().await.expect("commit");
    assert_eq!(status_of(&env, "P-1").await, "SUCCEEDED");
    // A wrong attempt id is a conflict too.
    sqlx::query(
        "UPDATE payments SET status = 'UNKNOWN', attempt_id = 'A-1b' WHERE payment_id = 'P-3'",
    )
    .execute(&pool)
    .await
    .expect("update");
    let t3 = recon::ledger::transitions::Transition {
        payment_id: "P-3".into(),
        attempt_id: Some("A-3".into()),
        ..t
    };
    let mut tx = db.begin().await.expect("tx");
    let applied = recon::store::apply(&mut tx, &t3, "x", "2026-11-20 00:00:00.000000")
        .await
        .expect("apply");
    assert_eq!(applied, recon::ledger::transitions::Applied::Conflict);
}

#[tokio::test]
async fn timestamps_with_offsets_crossing_midnight_land_in_the_right_day() {
    let env = TestEnv::with(Settings {
        timezone: "Europe/Berlin".into(),
        ..Settings::default()
    });
    // 23:30Z on the 9th is 00:30 on the 10th in Berlin; 23:30Z on the 10th is the 11th.
    env.import(
        &format!(
            "P-IN,{IBAN},10.00,EUR,SUCCEEDED,2026-11-09T23:30:00Z,2026-11-10T00:30:00+01:00,A-1,\n\
             P-OUT,{IBAN},11.00,EUR,SUCCEEDED,2026-11-10T23:30:00Z,2026-11-10T23:30:00Z,A-2,\n"
        ),
        "",
    )
    .await;
    // The line says 00:35 Berlin time on the 10th with an offset: 23:35Z on the 9th.
    env.statement(&format!(
        "L-1,,{IBAN},10.00,EUR,2026-11-10T00:35:00+01:00,PAYMENT\n\
         L-2,P-OUT,{IBAN},11.00,EUR,2026-11-11T00:40:00+01:00,PAYMENT\n"
    ));
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "tz")
        .await;
    assert_eq!(outcomes(&r), vec![row("MATCHED", "P-IN", "L-1")]);
    let next = env
        .run("2026-11-11", "2026-11-20T00:00:00Z", false, "tz2")
        .await;
    assert_eq!(outcomes(&next), vec![row("MATCHED", "P-OUT", "L-2")]);
}

#[tokio::test]
async fn currencies_compare_in_their_own_minor_units() {
    let env = TestEnv::new();
    env.import(
        &format!(
            "P-JPY,{IBAN},1500,JPY,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-EUR,FR7630006000011234567890189,12.3,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-2,\n\
             P-KWD,GB33BUKB20201555555555,1.5,KWD,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-3,\n"
        ),
        "",
    )
    .await;
    env.statement(
        "L-1,,de89 3704 0044 0532 0130 00,1500.0,jpy,2026-11-10T09:05:00Z,PAYMENT\n\
         L-2,,FR76 3000 6000 0112 3456 7890 189,12.30,EUR,2026-11-10T09:05:00Z,PAYMENT\n\
         L-3,p-kwd,GB33BUKB20201555555555,1.500,KWD,2026-11-10T09:05:00Z,PAYMENT\n",
    );
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "ccy")
        .await;
    assert_eq!(
        outcomes(&r),
        vec![
            row("MATCHED", "P-EUR", "L-2"),
            row("MATCHED", "P-JPY", "L-1"),
            row("MATCHED", "P-KWD", "L-3"),
        ]
    );
    let amounts =
        crate::support::read_columns(&r.out_dir.join("results.csv"), &["amount", "line_amount"]);
    assert_eq!(amounts[0], vec!["12.30", "12.30"]);
    assert_eq!(amounts[1], vec!["1500", "1500"]);
    assert_eq!(amounts[2], vec!["1.500", "1.500"]);
}

#[tokio::test]
async fn a_malformed_statement_line_is_rejected_and_blocks_resolved_failed() {
    let env = mixed_env().await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
         L-2,,{IBAN},12.345,EUR,2026-11-10T09:40:00Z,PAYMENT\n\
         L-3,,{IBAN},5.00,EUR,yesterday,PAYMENT\n"
    ));
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "bad")
        .await;
    // P-2 would be RESOLVED_FAILED with a clean file; one unreadable line means the file is
    // not complete, so absence proves nothing.
    assert!(
        outcomes(&r).contains(&row("AWAITING_EVIDENCE", "P-2", "")),
        "{:?}",
        outcomes(&r)
    );
    assert_eq!(r.summary.rejected_lines, 2);
    let rejected =
        crate::support::read_columns(&r.out_dir.join("rejected.csv"), &["line", "reason"]);
    assert_eq!(rejected[0][0], "3");
    assert!(
        rejected[0][1].contains("amount") && rejected[0][1].contains("12.345"),
        "{:?}",
        rejected
    );
    assert_eq!(rejected[1][0], "4");
    assert!(rejected[1][1].contains("booked_at"), "{:?}", rejected);
    assert!(
        r.summary
            .warnings
            .iter()
            .any(|w| w.contains("rejected or not-booked lines"))
    );
}

#[tokio::test]
async fn a_bad_import_row_rejects_the_whole_file_with_file_and_line() {
    let env = TestEnv::new();
    env.write(
        "payments.csv",
        &format!(
            "{}\nP-1,{IBAN},10.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},10.001,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-2,\n\
             P-3,{IBAN},5.00,EUR,DONE,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-3,\n\
             P-1,{IBAN},5.00,EUR,PENDING,2026-11-10T09:00:00Z,,,\n",
            crate::support::PAYMENTS_HEADER
        ),
    );
    let db = env.db().await;
    let pool = env.pool().await;
    let err = recon::ledger::import::import(&db, &env.path("payments.csv"), None)
        .await
        .expect_err("must reject");
    let msg = format!("{err:#}");
    assert_eq!(exit::code_for(&err), exit::INPUT);
    assert!(
        msg.contains("payments.csv:3") && msg.contains("10.001"),
        "{msg}"
    );
    assert!(
        msg.contains("payments.csv:4") && msg.contains("DONE"),
        "{msg}"
    );
    assert!(
        msg.contains("payments.csv:5") && msg.contains("also at line 2"),
        "{msg}"
    );
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM payments")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(n, 0, "nothing half-imported");
}

#[tokio::test]
async fn importing_an_existing_payment_again_is_rejected() {
    let env = mixed_env().await;
    env.write(
        "again.csv",
        &format!(
            "{}\nP-1,{IBAN},10.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n",
            crate::support::PAYMENTS_HEADER
        ),
    );
    let db = env.db().await;
    let err = recon::ledger::import::import(&db, &env.path("again.csv"), None)
        .await
        .expect_err("duplicate");
    assert!(format!("{err:#}").contains("already in the database"));
}

#[tokio::test]
async fn invalid_rules_are_rejected_before_any_data_is_read() {
    let env = TestEnv::with(Settings {
        rules: Some(recon::rules::DEFAULT_RULES.replace("window_after", "window_aftr")),
        ..Settings::default()
    });
    let err = env.try_standard_day("x").await.expect_err("bad rules");
    assert_eq!(exit::code_for(&err), exit::CONFIG);
    assert!(format!("{err:#}").contains("window_aftr"));
    // The rule file and the key's line, as a job file's unknown key gives them.
    assert!(
        format!("{err:#}").contains("rules.toml: TOML parse error at line 30, column 1\n"),
        "{err:#}"
    );
    assert!(!env.path("recon.db").exists(), "no database touched");
}

#[tokio::test]
async fn a_second_run_while_the_lock_is_held_exits_with_the_lock_code() {
    let env = mixed_env().await;
    let db = recon::db::Db::open(&env.config().database_url)
        .await
        .expect("db");
    let _held = db.lock(false).await.expect("first lock");
    let err = env.try_standard_day("x").await.expect_err("locked");
    assert_eq!(exit::code_for(&err), exit::LOCKED);
}

#[tokio::test]
async fn a_missing_statement_file_fails_the_run_with_the_input_code() {
    let env = mixed_env().await;
    std::fs::remove_file(env.path("statement.csv")).expect("rm");
    let err = env.try_standard_day("x").await.expect_err("missing file");
    assert_eq!(exit::code_for(&err), exit::INPUT);
    assert!(format!("{err:#}").contains("statement.csv"));
    let pool = env.pool().await;
    let (status,): (String,) = sqlx::query_as("SELECT status FROM recon_runs WHERE run_id = 'x'")
        .fetch_one(&pool)
        .await
        .expect("run record");
    assert_eq!(status, "FAILED");
    assert!(!env.path("out/x").exists(), "no half-written output");
}

#[tokio::test]
async fn a_day_of_a_long_ledger_loads_only_what_it_needs() {
    // 60 days of payments and one statement file per day: a one-day run reads a few days'
    // files and takes the index path in the ledger load; the two-month run scans the table.
    // Both must see the same payments for that day.
    let env = TestEnv::with(Settings {
        complete: None,
        extra: "carry_over_days = 1".into(),
        ..Settings::default()
    });
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    std::fs::write(
        &env.config_path,
        config.replace("path = \"statement.csv\"", "path = \"st-{date}.csv\""),
    )
    .expect("config");
    let mut payments = String::new();
    let mut attempts = String::new();
    for d in 0..60 {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 9, 1).expect("date") + chrono::Days::new(d);
        let t = format!("{day}T12:00:00Z");
        payments.push_str(&format!(
            "P-{d:02},{IBAN},{d}.00,EUR,SUCCEEDED,{t},{t},A-{d:02},\n"
        ));
        attempts.push_str(&format!(
            "A-{d:02},P-{d:02},{t},{t},SUCCEEDED,PSP-{d:02},\n"
        ));
        env.write(
            &format!("st-{day}.csv"),
            &format!(
                "{}\nPSP-{d:02},,{IBAN},{d}.00,EUR,{day}T12:05:00Z,PAYMENT\n",
                crate::support::STATEMENT_HEADER
            ),
        );
    }
    env.import(&payments, &attempts).await;
    let one = env
        .run("2026-10-15", "2026-11-30T00:00:00Z", false, "one")
        .await;
    assert_eq!(outcomes(&one), vec![row("MATCHED", "P-44", "PSP-44")]);
    assert!(
        one.summary.payments_loaded < 20,
        "loaded {}",
        one.summary.payments_loaded
    );
    let all = env
        .try_run(
            "2026-09-01",
            "2026-10-30",
            "2026-11-30T00:00:00Z",
            true,
            "all",
        )
        .await
        .expect("range run");
    // A range runs day by day: one folder per day, each with that day's payment.
    let (days, range) = all.range.as_ref().expect("a range report");
    assert_eq!(days.len(), 60);
    for (d, day) in days.iter().enumerate() {
        assert_eq!(
            outcomes(day),
            vec![row("MATCHED", &format!("P-{d:02}"), &format!("PSP-{d:02}"))]
        );
    }
    assert_eq!(range.outcomes["MATCHED"].count, 60);
    assert_eq!(range.outcomes["MATCHED"].amounts["EUR"], "1770.00");
    assert!(all.out_dir.join("summary.json").exists());
    assert!(all.out_dir.join("2026-09-01/results.csv").exists());
}

#[tokio::test]
async fn a_reused_run_id_is_refused_before_anything_changes() {
    let env = mixed_env().await;
    env.run("2026-11-10", "2026-11-20T00:00:00Z", false, "same")
        .await;
    let err = env.try_standard_day("same").await.expect_err("reused id");
    assert_eq!(exit::code_for(&err), exit::CONFIG);
    assert!(format!("{err:#}").contains("already used"), "{err:#}");
}

#[tokio::test]
async fn attempts_may_belong_to_payments_imported_earlier_but_not_to_unknown_ones() {
    let env = TestEnv::new();
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "",
    )
    .await;
    let header = crate::support::PAYMENTS_HEADER;
    let att_header = crate::support::ATTEMPTS_HEADER;
    env.write(
        "p2.csv",
        &format!("{header}\nP-2,{IBAN},20.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n"),
    );
    env.write(
        "a2.csv",
        &format!("{att_header}\nA-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,\nA-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,\n"),
    );
    env.write(
        "a3.csv",
        &format!("{att_header}\nA-9,P-9,2026-11-10T09:00:00Z,,UNKNOWN,,\n"),
    );
    let db = env.db().await;
    let r = recon::ledger::import::import(&db, &env.path("p2.csv"), Some(&env.path("a2.csv")))
        .await
        .expect("import");
    assert_eq!((r.payments, r.attempts), (1, 2));
    env.write("p3.csv", &format!("{header}\n"));
    let err = recon::ledger::import::import(&db, &env.path("p3.csv"), Some(&env.path("a3.csv")))
        .await
        .expect_err("unknown payment");
    assert!(
        format!("{err:#}").contains("a3.csv:2") && format!("{err:#}").contains("P-9"),
        "{err:#}"
    );
}

/// The safety case behind the status filter: the provider shows the payment as PENDING. That is
/// neither proof it was paid (no RESOLVED_SUCCEEDED) nor, in a statement declared complete,
/// proof it was not (no RESOLVED_FAILED, which would invite a second payment).
#[tokio::test]
async fn a_pending_provider_row_neither_resolves_nor_fails_the_payment() {
    let env = TestEnv::new();
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    std::fs::write(
        &env.config_path,
        config
            .replace(
                "path = \"statement.csv\"",
                "path = \"statement.csv\"\nbooked_statuses = [\"BOOKED\"]",
            )
            .replace("kind = \"type\"", "kind = \"type\"\nstatus = \"state\""),
    )
    .expect("config");
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},20.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.write(
        "statement.csv",
        &format!(
            "id,reference,recipient,amount,currency,booked_at,type,state\n\
             L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT,PENDING\n"
        ),
    );
    env.control("statement.csv");
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    let rows = outcomes(&report);
    assert_eq!(
        rows,
        vec![
            row("AWAITING_EVIDENCE", "P-1", ""),
            row("AWAITING_EVIDENCE", "P-2", ""),
        ],
        "no transition on a pending row, and no failure proven by a file that has one"
    );
    assert_eq!(report.summary.transitions.applied, 0);
    assert!(
        report
            .summary
            .warnings
            .iter()
            .any(|w| w.contains("not booked") && w.contains("PENDING")),
        "{:?}",
        report.summary.warnings
    );
    // Once the provider books it, the same payment resolves.
    env.write(
        "statement.csv",
        &format!(
            "id,reference,recipient,amount,currency,booked_at,type,state\n\
             L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT,BOOKED\n"
        ),
    );
    env.control("statement.csv");
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r2")
        .await;
    let rows = outcomes(&report);
    assert!(
        rows.contains(&row("RESOLVED_SUCCEEDED", "P-1", "L-1")),
        "{rows:?}"
    );
    assert!(
        rows.contains(&row("RESOLVED_FAILED", "P-2", "")),
        "{rows:?}"
    );
}

/// `recon migrate … | head`: a reader that goes away ends the command quietly, never with a
/// panic and a backtrace (every command prints through `recon::exit::write_stdout`, and so do
/// `recon-tools`' commands).
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let env = TestEnv::new();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_recon"))
        .arg("migrate")
        .arg("--config")
        .arg(&env.config_path)
        .env_remove("RECON_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the command has written anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?} {stderr}", out.status);
}
