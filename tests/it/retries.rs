//! The current attempt's clock (DESIGN.md rule 11, issue 30 point 1), on both backends: the
//! payment service retries a payment whose first attempt was declined days ago. The payment
//! row says SUBMITTING with the retry's attempt id, while its `started_at` still holds the first
//! attempt's start. Staleness, the evidence horizon and every pass's window are measured from
//! the retry's start, through the bundled tables and through custom ledger queries alike.

use crate::backends::results;
use crate::support::{Backend, Settings, TestEnv, outcomes};

const IBAN: &str = "DE89370400440532013000";
/// The night after 2026-11-19.
const AS_OF: &str = "2026-11-20T00:00:00Z";

/// P-1, 10.00 EUR to IBAN: first attempt A-1 started at `first` and declined; the row still
/// has `first` as its `started_at`, and names the retry A-2, started at `retry`, in flight.
fn retried(first: &str, retry: &str) -> (String, String) {
    (
        format!("P-1,{IBAN},10.00,EUR,SUBMITTING,{first},{first},A-2,\n"),
        format!(
            "A-1,P-1,{first},{first},FAILED,,declined\n\
             A-2,P-1,{retry},,,,\n"
        ),
    )
}

async fn env_with(b: Backend, settings: Settings, first: &str, retry: &str) -> TestEnv {
    let env = TestEnv::on(b, settings).await;
    let (payments, attempts) = retried(first, retry);
    env.import(&payments, &attempts).await;
    env
}

async fn env(b: Backend, first: &str, retry: &str) -> TestEnv {
    env_with(b, Settings::default(), first, retry).await
}

/// P-1's outcome rows (outcome, provider_txn_id) in a run's results.
fn p1(report: &recon::run::RunReport) -> Vec<(String, String)> {
    outcomes(report)
        .into_iter()
        .filter(|r| r.1 == "P-1")
        .map(|r| (r.0, r.2))
        .collect()
}

async fn ledger(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT status || '|' || coalesce(attempt_id, '-') FROM payments \
         WHERE payment_id = 'P-1'",
    )
    .await
}

async fn history(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT from_status || '>' || to_status || '|' || coalesce(attempt_id, '-') \
         FROM payment_status_history ORDER BY id",
    )
    .await
}

/// A retry started 10 minutes before the as-of is in flight (the stale age is 30 minutes),
/// although the row's start is ten days old and that window closed long ago.
async fn a_retry_started_minutes_ago_is_in_flight(b: Backend) {
    let env = env(b, "2026-11-10T09:00:00Z", "2026-11-19T23:50:00Z").await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("IN_FLIGHT".to_string(), String::new())]);
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
    assert!(history(&env).await.is_empty());
    // results.csv shows the clock the run used.
    let text = String::from_utf8(results(&env, "r1")).expect("utf-8");
    let row = text.lines().find(|l| l.contains(",P-1,")).expect("P-1 row");
    assert!(row.contains("2026-11-19T23:50:00"), "{row}");
}

/// A retry started 25 hours before the as-of is stale, but its own 72 h window is open: no
/// line yet means AWAITING_EVIDENCE, not FAILED.
async fn a_stale_retry_whose_window_is_open_awaits_evidence(b: Backend) {
    let env = env(b, "2026-11-10T09:00:00Z", "2026-11-18T23:00:00Z").await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("AWAITING_EVIDENCE".to_string(), String::new())]);
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
}

/// Statements complete from September on: they cover a first attempt of 2026-10-01 too (the
/// absence of evidence is measured over every attempt that could have paid).
fn complete_since_september() -> Settings {
    Settings {
        complete: Some(("2026-09-01".into(), "2026-11-30".into())),
        ..Settings::default()
    }
}

/// A retry whose own window closed with every source complete (since before its first
/// attempt) is RESOLVED_FAILED, through the guard on the retry's attempt; the payment's row
/// started more than the carry-over ago (its first attempt), so only the retry's start brings
/// it into the run. A re-run reproduces it.
async fn a_retry_whose_window_closed_fails_with_its_attempt_in_the_guard(b: Backend) {
    let env = env_with(
        b,
        complete_since_september(),
        "2026-10-01T09:00:00Z",
        "2026-11-15T09:00:00Z",
    )
    .await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("RESOLVED_FAILED".to_string(), String::new())]);
    assert_eq!(run.summary.transitions.applied, 1);
    assert_eq!(ledger(&env).await, ["FAILED|A-2"]);
    assert_eq!(history(&env).await, ["SUBMITTING>FAILED|A-2"]);
    let again = env.run("2026-11-19", AS_OF, false, "r2").await;
    assert_eq!(results(&env, "r1"), results(&env, "r2"));
    assert_eq!(again.summary.transitions.applied, 0);
    assert_eq!(again.summary.transitions.already_applied, 1);
    assert_eq!(history(&env).await.len(), 1);
}

/// L-1 resolved P-1 SUCCEEDED, guarded on the retry A-2.
async fn assert_resolved_by_l1(env: &TestEnv, run: &recon::run::RunReport) {
    assert_eq!(
        outcomes(run),
        [(
            "RESOLVED_SUCCEEDED".to_string(),
            "P-1".to_string(),
            "L-1".to_string()
        )]
    );
    assert_eq!(ledger(env).await, ["SUCCEEDED|A-2"]);
    assert_eq!(history(env).await, ["SUBMITTING>SUCCEEDED|A-2"]);
}

/// The passes' windows move with the clock: a line to the recipient with the amount, booked
/// an hour after the retry started (days after the first attempt's window closed), is the
/// retry's money: RESOLVED_SUCCEEDED, not an orphan line beside a FAILED payment.
async fn a_line_in_the_retrys_window_resolves_it(b: Backend) {
    let env = env(b, "2026-11-10T09:00:00Z", "2026-11-15T09:00:00Z").await;
    env.statement(&format!(
        "L-1,,{IBAN},10.00,EUR,2026-11-15T10:00:00Z,PAYMENT\n"
    ));
    let run = env.run("2026-11-15", AS_OF, false, "r1").await;
    assert_resolved_by_l1(&env, &run).await;
}

/// A retry that started after a re-run's range (re-running an old day on the night of the
/// retry) is not judged on the first attempt's clock: it belongs to another day, and that day's
/// run finds it in flight.
async fn a_rerun_of_an_older_day_leaves_a_later_retry_alone(b: Backend) {
    let env = env(b, "2026-11-10T09:00:00Z", "2026-11-19T23:50:00Z").await;
    let run = env.run("2026-11-10", AS_OF, false, "r1").await;
    assert!(p1(&run).is_empty(), "{:?}", outcomes(&run));
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
}

/// More payments than one lookup statement takes (2,000 ids): every one whose retry started
/// after the older day's range is looked up and left to its retry's day, none judged on its
/// row's start.
async fn lookups_by_id_cover_every_batch(b: Backend) {
    let n = 4_100;
    let mut payments = String::new();
    let mut attempts = String::new();
    for i in 0..n {
        let first = "2026-11-10T09:00:00Z";
        payments.push_str(&format!(
            "P-{i:05},{IBAN},{}.00,EUR,SUBMITTING,{first},{first},B-{i:05},\n",
            i + 1
        ));
        attempts.push_str(&format!(
            "A-{i:05},P-{i:05},{first},{first},FAILED,,declined\n\
             B-{i:05},P-{i:05},2026-11-19T23:50:00Z,,,,\n"
        ));
    }
    let env = TestEnv::on(b, Settings::default()).await;
    env.import(&payments, &attempts).await;
    let run = env.run("2026-11-10", AS_OF, true, "old").await;
    let judged = outcomes(&run);
    assert!(
        judged.is_empty(),
        "{} judged on the first attempt's clock, from {:?}",
        judged.len(),
        judged.first()
    );
    let run = env.run("2026-11-19", AS_OF, true, "night").await;
    let rows = outcomes(&run);
    assert_eq!(rows.len(), n);
    assert!(rows.iter().all(|r| r.0 == "IN_FLIGHT"), "{:?}", &rows[..3]);
}

/// The ledger read through the user's own queries (views with other column names), whose
/// payments query returns the row's old `started_at`: the attempts query's start of the
/// current attempt counts, as with the bundled tables.
async fn a_custom_payments_query_uses_the_current_attempts_start(b: Backend) {
    let settings = Settings {
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
    };
    let env = env_with(b, settings, "2026-11-10T09:00:00Z", "2026-11-19T23:50:00Z").await;
    env.exec(
        "CREATE VIEW legacy_payments AS SELECT payment_id AS id, recipient_account AS iban,
         amount_minor AS cents, currency AS ccy, status AS state, created_at AS created,
         started_at AS started, attempt_id AS try_id, provider_payment_id AS psp_id
         FROM payments",
    )
    .await;
    env.exec(
        "CREATE VIEW legacy_attempts AS SELECT attempt_id AS try_id, payment_id AS pay_id,
         started_at AS started, provider_payment_id AS psp_id FROM payment_attempts",
    )
    .await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("IN_FLIGHT".to_string(), String::new())]);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
    // And the retry of a payment whose row started before the carry-over is found through
    // the attempts query (the payments query is looked up by id).
    env.exec(
        "UPDATE payments SET created_at = '2026-10-01 09:00:00.000000', \
         started_at = '2026-10-01 09:00:00.000000'",
    )
    .await;
    let run = env.run("2026-11-19", AS_OF, false, "r2").await;
    assert_eq!(p1(&run), [("IN_FLIGHT".to_string(), String::new())]);
}

/// The clock falls back to the payment row's start only when the current attempt has none:
/// here the row names an attempt the attempts do not hold.
async fn without_the_attempt_row_the_payments_start_counts(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,SUBMITTING,2026-11-15T09:00:00Z,2026-11-15T09:00:00Z,A-9,\n"
        ),
        "",
    )
    .await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("RESOLVED_FAILED".to_string(), String::new())]);
    assert_eq!(history(&env).await, ["SUBMITTING>FAILED|A-9"]);
}

/// The statements are complete only from 2026-11-01: a first attempt of 2026-10-01 could have
/// paid in October, where no source proves that nothing was booked. Its retry's window closed
/// with no line, but "no line → FAILED" is not proven: it awaits evidence (before the fix it
/// was RESOLVED_FAILED on the retry's window alone).
async fn no_line_is_not_proven_while_the_first_attempts_window_is_not_covered(b: Backend) {
    let env = env(b, "2026-10-01T09:00:00Z", "2026-11-15T09:00:00Z").await;
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("AWAITING_EVIDENCE".to_string(), String::new())]);
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
    // The same when the payment row's start moved to the retry's: A-1 (started long before
    // the ledger range the run reads attempts in) is found through the payment's attempts.
    env.exec(
        "UPDATE payments SET created_at = '2026-11-15 09:00:00.000000', \
         started_at = '2026-11-15 09:00:00.000000'",
    )
    .await;
    let run = env.run("2026-11-19", AS_OF, false, "r2").await;
    assert_eq!(p1(&run), [("AWAITING_EVIDENCE".to_string(), String::new())]);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
}

/// The retry of the hole (h-retry): A-1 started 2026-11-10T09:00 and timed out (UNKNOWN), the
/// payment service retried with A-2 on 2026-11-12T09:00 and moved the row's start to it. An
/// unnamed bank line (no reference, no provider id) with P-1's recipient, amount and currency
/// is booked an hour into A-1's window, two days before A-2's opens.
fn timed_out_then_retried() -> (String, String) {
    (
        format!("P-1,{IBAN},10.00,EUR,SUBMITTING,2026-11-10T08:59:00Z,2026-11-12T09:00:00Z,A-2,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-1,2026-11-12T09:00:00Z,,,,\n"
            .to_string(),
    )
}

async fn timed_out_env(b: Backend) -> TestEnv {
    let env = TestEnv::on(b, Settings::default()).await;
    let (payments, attempts) = timed_out_then_retried();
    env.import(&payments, &attempts).await;
    env
}

/// The money may have left with A-1: the line in A-1's window blocks "no line → FAILED" (a
/// FAILED would permit another retry that pays twice). It is not A-2's match either (outside
/// A-2's window): a near miss, AMBIGUOUS, one case for a human, no transition.
async fn a_line_in_an_earlier_attempts_window_blocks_failed(b: Backend) {
    let env = timed_out_env(b).await;
    env.statement(&format!(
        "L-1,,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n"
    ));
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    // The payment's row and the line's (the file is read for the first time: a late
    // delivery), as any near miss: one case.
    let row = |p: &str| ("AMBIGUOUS".to_string(), p.to_string(), "L-1".to_string());
    assert_eq!(outcomes(&run), [row("P-1"), row("")]);
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(run.summary.cases.cases, 1, "{:?}", run.summary.cases);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
    assert!(history(&env).await.is_empty());
    // `recon explain` says the absence check spans the earlier attempt.
    let out = crate::backends::output(crate::backends::recon(
        &env,
        &["explain", "P-1", "--date", "2026-11-12", "--as-of", AS_OF],
    ));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("absence of evidence: an earlier attempt started 2026-11-10T09:00:00Z"),
        "{text}"
    );
    assert!(
        text.contains("a look-alike line is in an earlier attempt's window"),
        "{text}"
    );
    assert!(text.contains("near miss"), "{text}");
}

/// The same payment without the line: every source covers both attempts' windows and the
/// lag passed, so no line is proven: RESOLVED_FAILED through A-2's guard (the wider span must
/// not stop progress).
async fn without_the_line_the_retried_payment_still_fails(b: Backend) {
    let env = timed_out_env(b).await;
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("RESOLVED_FAILED".to_string(), String::new())]);
    assert_eq!(run.summary.transitions.applied, 1);
    assert_eq!(ledger(&env).await, ["FAILED|A-2"]);
    assert_eq!(history(&env).await, ["SUBMITTING>FAILED|A-2"]);
}

/// A bank line without a recipient (nor reference, nor provider id), of P-1's currency and
/// amount, booked in A-1's window may be P-1's money too: it blocks FAILED as well.
async fn a_line_without_recipient_in_an_earlier_attempts_window_blocks_failed(b: Backend) {
    let env = timed_out_env(b).await;
    env.statement("L-1,,,10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n");
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    let row = |p: &str| ("AMBIGUOUS".to_string(), p.to_string(), "L-1".to_string());
    assert_eq!(outcomes(&run), [row("P-1"), row("")]);
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
}

/// A job whose provider delivers a file a day (`psp-{date}.csv`): each file proves its day.
/// A-1 of P-1 started 2026-10-20T09:00 and timed out; A-2 started 2026-11-12T09:00, as does
/// the row. A-1's day is further back than the run of 2026-11-12 reads statements for its own
/// days (the carry-over, 14 days, and the windows): that file is read for P-1 too. Every day's
/// file from 2026-10-19 to 2026-11-19 is delivered, `a1_day` on 2026-10-20.
async fn daily_env(b: Backend, a1_day: &str) -> TestEnv {
    let env = TestEnv::on(b, Settings::default()).await;
    let cfg = std::fs::read_to_string(&env.config_path).expect("config");
    let cfg = cfg
        .replace("path = \"statement.csv\"", "path = \"psp-{date}.csv\"")
        .replace(
            "complete_from = \"2026-11-01\"\ncomplete_to = \"2026-11-30\"\n",
            "",
        );
    assert!(cfg.contains("psp-{date}.csv") && !cfg.contains("complete_from"));
    std::fs::write(&env.config_path, cfg).expect("config");
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,SUBMITTING,2026-10-20T08:59:00Z,2026-11-12T09:00:00Z,A-2,\n"
        ),
        "A-1,P-1,2026-10-20T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-1,2026-11-12T09:00:00Z,,,,\n",
    )
    .await;
    let mut day = chrono::NaiveDate::from_ymd_opt(2026, 10, 19).expect("date");
    while day <= chrono::NaiveDate::from_ymd_opt(2026, 11, 19).expect("date") {
        let rows = if day.to_string() == "2026-10-20" {
            a1_day
        } else {
            ""
        };
        env.deliver(&format!("psp-{day}.csv"), rows);
        day = day.succ_opt().expect("next day");
    }
    env
}

/// Daily files: the line of A-1's day, three weeks before the run's, is read and blocks
/// FAILED (were that file not read, A-1's day would never be covered: the payment would
/// await evidence for ever, its look-alike unseen); without the line, every day is proven
/// quiet and the payment fails.
async fn daily_files_are_read_back_to_the_first_attempt(b: Backend) {
    let env = daily_env(
        b,
        &format!("L-1,,{IBAN},10.00,EUR,2026-10-20T10:00:00Z,PAYMENT\n"),
    )
    .await;
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    assert_eq!(
        p1(&run),
        [("AMBIGUOUS".to_string(), "L-1".to_string())],
        "{:?}",
        outcomes(&run)
    );
    assert_eq!(run.summary.transitions.applied, 0);
    assert_eq!(ledger(&env).await, ["SUBMITTING|A-2"]);
    let env = daily_env(b, "").await;
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    assert_eq!(p1(&run), [("RESOLVED_FAILED".to_string(), String::new())]);
    assert_eq!(ledger(&env).await, ["FAILED|A-2"]);
}

/// A line of A-1 that names the payment (its reference is P-1's id) is P-1's money, wherever
/// it is booked: RESOLVED_SUCCEEDED, as before.
async fn a_named_line_of_an_earlier_attempt_still_resolves_it(b: Backend) {
    let env = timed_out_env(b).await;
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n"
    ));
    let run = env.run("2026-11-12", AS_OF, false, "r1").await;
    assert_resolved_by_l1(&env, &run).await;
}

/// `recon explain` says which start the clock is.
async fn explain_shows_the_retrys_clock(b: Backend) {
    let env = env(b, "2026-11-10T09:00:00Z", "2026-11-18T23:00:00Z").await;
    let out = crate::backends::output(crate::backends::recon(
        &env,
        &["explain", "P-1", "--date", "2026-11-19", "--as-of", AS_OF],
    ));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("started 2026-11-18T23:00:00"), "{text}");
    assert!(
        text.contains("clock: started 2026-11-18T23:00:00Z is the start of attempt A-2"),
        "{text}"
    );
    assert!(text.contains("AWAITING_EVIDENCE"), "{text}");
}

on_both_backends!(
    a_retry_started_minutes_ago_is_in_flight,
    a_stale_retry_whose_window_is_open_awaits_evidence,
    a_retry_whose_window_closed_fails_with_its_attempt_in_the_guard,
    a_line_in_the_retrys_window_resolves_it,
    a_rerun_of_an_older_day_leaves_a_later_retry_alone,
    a_custom_payments_query_uses_the_current_attempts_start,
    lookups_by_id_cover_every_batch,
    without_the_attempt_row_the_payments_start_counts,
    explain_shows_the_retrys_clock,
    no_line_is_not_proven_while_the_first_attempts_window_is_not_covered,
    a_line_in_an_earlier_attempts_window_blocks_failed,
    without_the_line_the_retried_payment_still_fails,
    a_named_line_of_an_earlier_attempt_still_resolves_it,
    a_line_without_recipient_in_an_earlier_attempts_window_blocks_failed,
    daily_files_are_read_back_to_the_first_attempt,
);

/// On a PostgreSQL ledger whose id columns are `uuid`, the payments and attempts looked up by
/// id (`payment_id IN (…)`) are found as on `text`: P, whose row started before the carry-over,
/// by its retry's start, and Q, whose retry started after an older day's range, left out of
/// that day's run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid_ids_on_postgres_are_looked_up_by_their_retry() {
    let p = "7d1c0f3e-9a4b-4c2d-8e6f-000000000001";
    let q = "7d1c0f3e-9a4b-4c2d-8e6f-000000000002";
    let a = |n: u32| format!("0b8e2a91-5c3d-4f7e-9a1b-{n:012x}");
    let env = TestEnv::on(Backend::Postgres, complete_since_september()).await;
    env.import(
        &format!(
            "{p},{IBAN},10.00,EUR,SUBMITTING,2026-10-01T09:00:00Z,2026-10-01T09:00:00Z,{a2},\n\
             {q},{IBAN},20.00,EUR,SUBMITTING,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,{a4},\n",
            a2 = a(2).to_uppercase(),
            a4 = a(4),
        ),
        &format!(
            "{a1},{p},2026-10-01T09:00:00Z,2026-10-01T09:00:00Z,FAILED,,declined\n\
             {a2},{p},2026-11-15T09:00:00Z,,,,\n\
             {a3},{q},2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,FAILED,,declined\n\
             {a4},{q},2026-11-19T23:50:00Z,,,,\n",
            a1 = a(1),
            a2 = a(2),
            a3 = a(3),
            a4 = a(4),
        ),
    )
    .await;
    // The payments' attempt id stays text (P's upper case), the attempts' is uuid.
    crate::pg_uuid::to_uuid(
        &env,
        &[
            recon::db::IdColumn::PaymentId,
            recon::db::IdColumn::AttemptId,
            recon::db::IdColumn::AttemptPaymentId,
            recon::db::IdColumn::HistoryPaymentId,
        ],
    )
    .await;
    let old = env.run("2026-11-10", AS_OF, true, "old").await;
    assert!(
        outcomes(&old).is_empty(),
        "Q's retry is not the 10th's: {:?}",
        outcomes(&old)
    );
    let run = env.run("2026-11-19", AS_OF, false, "r1").await;
    assert_eq!(
        outcomes(&run),
        [
            ("RESOLVED_FAILED".to_string(), p.to_string(), String::new()),
            ("IN_FLIGHT".to_string(), q.to_string(), String::new()),
        ]
    );
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["FAILED", "SUBMITTING"]
    );
}
