//! A reviewer's decision is evidence, not an override (issue 40, DESIGN.md rules 13 and 14),
//! each point played night after night as a schedule runs it, with the decisions applied as
//! reviewers apply them:
//! 1. a confirmation that the provider's later reference contradicts resolves nobody (never
//!    a FAILED on the absence the confirmation made);
//! 2. one payout, one payment: a webhook giving a confirmed payout to another payment
//!    resolves neither;
//! 3. a sheet made before new evidence settled or regrouped its case is refused, and such a
//!    case is SUPERSEDED, not left open;
//! 4. a reviewer's SUCCEEDED is re-checked against the provider's later word;
//! 5. four eyes that hold: a reviewer is the OS user (`[[reviewer]]`), `--actor` cannot be
//!    someone else, names are folded and invisible characters refused, an inbox folder counts
//!    only for its owner, and a critical case's dismissal waits for a second reviewer.

use crate::support::{
    ATTEMPTS_HEADER, Backend, HOOKS, PAYMENTS_HEADER, TestEnv, psp_source, read_columns,
    write_decide_file,
};
use recon::decisions::result::Status;
use recon::store::cases::StoredCase;
use std::process::Command;

const IBAN: &str = "DE89370400440532013000";
const OTHER_IBAN: &str = "NL91ABNA0417164300";

/// A job in Europe/Berlin with the daily provider source `psp` (`psp-<day>.csv`, proven
/// complete by control files), the stored webhook events and the reviewers. `top` goes
/// before the tables (e.g. `approvals = 2`).
fn job(top: &str) -> TestEnv {
    let env = TestEnv::new();
    write_job(&env, "sqlite://recon.db", top);
    env
}

/// [`job`] on `backend` (PostgreSQL: a fresh, migrated database).
async fn job_on(backend: Backend, top: &str) -> TestEnv {
    let env = TestEnv::on(backend, Default::default()).await;
    let url = env.config().database_url;
    write_job(&env, &url, top);
    env
}

fn write_job(env: &TestEnv, url: &str, top: &str) {
    env.write(
        "recon.toml",
        &format!(
            "timezone = \"Europe/Berlin\"\ndatabase_url = \"{url}\"\noutput_dir = \"out\"\n\
             {top}\n\n{}\n{HOOKS}\n{}",
            psp_source("psp-{date}.csv", ""),
            crate::decisions::REVIEWERS
        ),
    );
    std::fs::create_dir_all(env.path("hooks")).expect("hooks folder");
    env.write("hooks/events.jsonl", "");
}

/// Delivers the provider's file for `day` (rows without header) with its control file.
fn psp(env: &TestEnv, day: &str, rows: &str) {
    env.deliver(&format!("psp-{day}.csv"), rows);
}

/// Empty provider files for November `from..=to`: nothing else was paid.
fn quiet(env: &TestEnv, from: u32, to: u32) {
    for d in from..=to {
        psp(env, &format!("2026-11-{d:02}"), "");
    }
}

/// Imports UNKNOWN EUR payments of 25.00: (id, recipient, started), one attempt each.
async fn unknown(env: &TestEnv, rows: &[(&str, &str, &str)]) {
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for (id, iban, started) in rows {
        p.push_str(&format!(
            "{id},{iban},25.00,EUR,UNKNOWN,{started},{started},A-{id},\n"
        ));
        a.push_str(&format!("A-{id},{id},{started},,UNKNOWN,,timeout\n"));
    }
    env.write("payments.csv", &p);
    env.write("attempts.csv", &a);
    env.import_files().await;
}

/// The nightly run of November `day` (as of 02:00 Berlin the next morning).
async fn night(env: &TestEnv, day: u32) -> recon::run::RunReport {
    env.run(
        &format!("2026-11-{day:02}"),
        &format!("2026-11-{:02}T01:00:00Z", day + 1),
        false,
        &format!("n{day:02}"),
    )
    .await
}

/// (outcome, detail) of every row of `id` (a payment id or a line id) in the run's results.
fn rows_of(report: &recon::run::RunReport, id: &str) -> Vec<(String, String)> {
    read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "provider_txn_id", "detail"],
    )
    .into_iter()
    .filter(|r| r[1] == id || (r[1].is_empty() && r[2] == id))
    .map(|r| (r[0].clone(), r[3].clone()))
    .collect()
}

async fn status(env: &TestEnv, id: &str) -> String {
    let sql: &'static str = match id {
        "P-1" => "SELECT status FROM payments WHERE payment_id = 'P-1'",
        "P-2" => "SELECT status FROM payments WHERE payment_id = 'P-2'",
        "P-3" => "SELECT status FROM payments WHERE payment_id = 'P-3'",
        other => panic!("no query for {other}"),
    };
    env.texts(sql).await.remove(0)
}

async fn cases(env: &TestEnv, open_only: bool) -> Vec<StoredCase> {
    let db = env.db().await;
    let list = recon::decisions::queue::list(&db, open_only)
        .await
        .expect("cases");
    db.close().await;
    list
}

/// The open case whose payments are exactly `payments`.
async fn case_of(env: &TestEnv, payments: &[&str]) -> StoredCase {
    let all = cases(env, true).await;
    all.iter()
        .find(|c| {
            let mut ids: Vec<&str> = c.payments.iter().map(|p| p.payment_id.as_str()).collect();
            ids.sort_unstable();
            ids == payments
        })
        .cloned()
        .unwrap_or_else(|| panic!("no open case of {payments:?}: {all:#?}"))
}

/// `confirm N` of the candidate pairing `payment` with the case's line.
fn confirm(case: &StoredCase, payment: &str) -> String {
    let n = case
        .candidates
        .iter()
        .find(|c| c.payment_id == payment)
        .unwrap_or_else(|| panic!("no candidate {payment}: {case:#?}"))
        .number;
    format!("confirm {n}")
}

/// A Decide file of (case, decision) rows on the cases as stored now.
fn sheet(env: &TestEnv, name: &str, rows: &[(&StoredCase, String)]) -> std::path::PathBuf {
    let path = env.path(name);
    let rows: Vec<(String, String, String)> = rows
        .iter()
        .map(|(c, d)| (c.key.clone(), c.fingerprint.clone(), d.clone()))
        .collect();
    // The file name is the note: two files are two files (never the same bytes).
    write_decide_file(&path, &rows, &format!("checked with the provider ({name})"));
    path
}

async fn apply(env: &TestEnv, file: &std::path::Path, actor: &str) -> recon::decisions::FileResult {
    let cfg = env.config();
    let db = env.db().await;
    let r = recon::decisions::apply_file(&db, &cfg.decisions, file, actor)
        .await
        .expect("apply");
    db.close().await;
    r
}

async fn open_tickets(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT kind || '|' || severity || '|' || coalesce(payment_id, '') || '|' || line_ids \
         FROM review_tickets WHERE status = 'OPEN' ORDER BY ticket_id",
    )
    .await
}

/// Night 5: T-1, with no reference, fits P-1 and P-2 (same recipient and money): their case.
async fn twins(env: &TestEnv) -> StoredCase {
    unknown(
        env,
        &[
            ("P-1", IBAN, "2026-11-05T09:00:00Z"),
            ("P-2", IBAN, "2026-11-05T09:10:00Z"),
        ],
    )
    .await;
    quiet(env, 4, 12);
    psp(
        env,
        "2026-11-05",
        &format!("T-1,,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n"),
    );
    night(env, 5).await;
    case_of(env, &["P-1", "P-2"]).await
}

/// [`twins`], then Alice confirms T-1 as P-1's, night 6 resolves P-1 SUCCEEDED on it.
async fn confirmed_as_p1(env: &TestEnv) {
    let case = twins(env).await;
    let decided = sheet(env, "alice.xlsx", &[(&case, confirm(&case, "P-1"))]);
    let r = apply(env, &decided, "alice").await;
    assert_eq!(r.count(Status::Applied), 1, "{}", r.text(None));
    let n06 = night(env, 6).await;
    assert_eq!(rows_of(&n06, "P-1")[0].0, "RESOLVED_SUCCEEDED");
    assert_eq!(status(env, "P-1").await, "SUCCEEDED");
}

/// Point 1: the provider re-delivers the file with T-1's reference naming P-2. The line is no
/// longer read as P-1's: P-1, P-2 and T-1 are one critical case, and P-2 is never resolved
/// FAILED on the absence the confirmation made (before: it was, on night 9).
#[tokio::test]
async fn a_providers_later_reference_contradicts_a_confirmation_and_fails_nobody() {
    let env = job("");
    confirmed_as_p1(&env).await;
    psp(
        &env,
        "2026-11-05",
        &format!("T-1,P-2,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n"),
    );
    let n07 = night(&env, 7).await;
    for id in ["P-1", "P-2", "T-1"] {
        let rows = rows_of(&n07, id);
        assert_eq!(rows.len(), 1, "{id}: {rows:?}");
        assert_eq!(rows[0].0, "CONTRADICTED", "{id}: {rows:?}");
    }
    let (_, detail) = &rows_of(&n07, "P-2")[0];
    assert!(
        detail.contains("confirmed as payment P-1's by alice") && detail.contains("\"P-2\""),
        "the row names both claims: {detail}"
    );
    // One critical case naming both payments.
    let case = case_of(&env, &["P-1", "P-2"]).await;
    assert_eq!(
        (case.severity.as_str(), case.outcome.as_str()),
        ("CRITICAL", "CONTRADICTED")
    );
    // The windows close, the files are complete: still nobody is FAILED, nothing moved back.
    for day in 8..=11 {
        let n = night(&env, day).await;
        assert!(
            rows_of(&n, "P-2")
                .iter()
                .all(|(o, _)| o != "RESOLVED_FAILED"),
            "night {day}: {:?}",
            rows_of(&n, "P-2")
        );
    }
    assert_eq!(status(&env, "P-2").await, "UNKNOWN");
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
    let open = open_tickets(&env).await;
    assert!(
        open.iter()
            .any(|t| t.starts_with("CONTRADICTED|CRITICAL|P-2|")),
        "{open:?}"
    );
}

/// Point 2: instead of a corrected file, the provider's webhook says payout T-1 (which P-1
/// holds since night 6) is P-2's, PAID. Neither is resolved on it: one critical case names
/// P-1, P-2 and the line, and no two payments ever hold T-1 (before: P-2 was resolved
/// SUCCEEDED with T-1 and nobody was told for two nights).
#[tokio::test]
async fn a_webhook_giving_a_held_payout_to_another_payment_resolves_neither() {
    let env = job("");
    confirmed_as_p1(&env).await;
    env.write(
        "hooks/events.jsonl",
        r#"{"id":"T-1","status":"PAID","reference":"P-2","amount":"25.00","currency":"EUR","at":"2026-11-06T12:00:00Z"}
"#,
    );
    let n07 = night(&env, 7).await;
    let p2 = rows_of(&n07, "P-2");
    assert_eq!(p2.len(), 1, "{p2:?}");
    assert_eq!(p2[0].0, "CONTRADICTED", "{p2:?}");
    assert!(
        p2[0].1.contains("\"T-1\"") && p2[0].1.contains("payment P-1"),
        "{p2:?}"
    );
    assert_eq!(rows_of(&n07, "P-1")[0].0, "CONTRADICTED");
    let case = case_of(&env, &["P-1", "P-2"]).await;
    assert_eq!(case.severity, "CRITICAL");
    assert!(case.lines.iter().any(|(_, l)| l == "T-1"), "{case:#?}");
    for day in 8..=11 {
        night(&env, day).await;
    }
    assert_eq!(status(&env, "P-2").await, "UNKNOWN");
    assert_eq!(
        env.texts("SELECT payment_id FROM payments WHERE provider_payment_id = 'T-1'")
            .await,
        ["P-1"]
    );
}

/// Point 3: a sheet kept while new evidence arrives. Night 5's case {P-1, P-2} is regrouped
/// on night 6 (a third look-alike payment and a second line join it): the old case is
/// SUPERSEDED, `cases list --open` no longer shows it, and its `confirm` is refused with why.
/// Then the provider names each payout and night 7 settles the new case: a sheet made on
/// night 6 is refused as settled.
#[tokio::test]
async fn a_sheet_made_before_its_case_was_regrouped_or_settled_is_refused() {
    let env = job("");
    let old = twins(&env).await;
    let kept = sheet(&env, "kept.xlsx", &[(&old, confirm(&old, "P-1"))]);
    // A third payment and its payout arrive late: every line fits every payment.
    unknown(&env, &[("P-3", IBAN, "2026-11-05T09:30:00Z")]).await;
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n\
             T-2,,{IBAN},25.00,EUR,2026-11-05T09:40:00Z,PAYMENT\n"
        ),
    );
    night(&env, 6).await;
    let new = case_of(&env, &["P-1", "P-2", "P-3"]).await;
    let listed: Vec<String> = cases(&env, true).await.into_iter().map(|c| c.key).collect();
    assert!(!listed.contains(&old.key), "{listed:?}");
    let all = cases(&env, false).await;
    let was = all.iter().find(|c| c.key == old.key).expect("still stored");
    assert_eq!(was.status, "SUPERSEDED");
    assert_eq!(
        was.status_note.as_deref(),
        Some(format!("regrouped as case {} by run n06", new.key).as_str())
    );
    let r = apply(&env, &kept, "alice").await;
    assert_eq!(r.rows[0].status, Status::Refused, "{}", r.text(None));
    assert!(
        r.rows[0]
            .detail
            .contains(&format!("regrouped as case {}", new.key)),
        "{}",
        r.text(None)
    );
    // Night 6's sheet, kept while the provider names every payout.
    let kept6 = sheet(&env, "kept6.xlsx", &[(&new, confirm(&new, "P-3"))]);
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n\
             T-2,P-2,{IBAN},25.00,EUR,2026-11-05T09:40:00Z,PAYMENT\n"
        ),
    );
    night(&env, 7).await;
    let all = cases(&env, false).await;
    let was = all.iter().find(|c| c.key == new.key).expect("still stored");
    assert_eq!(was.status, "SUPERSEDED");
    assert_eq!(
        was.status_note.as_deref(),
        Some("settled by run n07 on new evidence")
    );
    let r = apply(&env, &kept6, "alice").await;
    assert_eq!(r.rows[0].status, Status::Refused, "{}", r.text(None));
    assert!(
        r.rows[0].detail.contains("settled by run n07"),
        "{}",
        r.text(None)
    );
    // Nothing the kept sheets asked for happened.
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM confirmed_lines")
            .await,
        ["0"]
    );
    assert!(
        cases(&env, true).await.is_empty(),
        "{:#?}",
        cases(&env, true).await
    );
}

/// Night 5: P-1 and P-2 (two recipients) each have a look-alike line (same recipient, other
/// money): a near-miss case each, returned in that order.
async fn near_misses(env: &TestEnv) -> (StoredCase, StoredCase) {
    unknown(
        env,
        &[
            ("P-1", IBAN, "2026-11-05T09:00:00Z"),
            ("P-2", OTHER_IBAN, "2026-11-05T09:00:00Z"),
        ],
    )
    .await;
    quiet(env, 4, 12);
    psp(
        env,
        "2026-11-05",
        &format!(
            "T-7,,{IBAN},24.50,EUR,2026-11-05T09:20:00Z,PAYMENT\n\
             T-8,,{OTHER_IBAN},24.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n"
        ),
    );
    night(env, 5).await;
    (case_of(env, &["P-1"]).await, case_of(env, &["P-2"]).await)
}

/// Point 4: alice decides a near miss `succeeded`; the provider's webhook later says FAILED.
/// The next night reports it as a critical contradiction naming alice (before: nothing, on
/// any later night). A return after her SUCCEEDED is RETURNED.
#[tokio::test]
async fn a_reviewers_succeeded_is_rechecked_like_recons_own_on_sqlite() {
    reviewers_succeeded_is_rechecked(Backend::Sqlite).await;
}

/// The same on PostgreSQL (the time of a reviewer's change is read back from a `timestamptz`).
#[tokio::test]
async fn a_reviewers_succeeded_is_rechecked_like_recons_own_on_postgres() {
    reviewers_succeeded_is_rechecked(Backend::Postgres).await;
}

async fn reviewers_succeeded_is_rechecked(backend: Backend) {
    let env = job_on(backend, "").await;
    let (c1, c2) = near_misses(&env).await;
    let decided = sheet(
        &env,
        "alice.xlsx",
        &[(&c1, "succeeded".into()), (&c2, "succeeded".into())],
    );
    let r = apply(&env, &decided, "alice").await;
    assert_eq!(r.count(Status::Applied), 2, "{}", r.text(None));
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
    let n06 = night(&env, 6).await;
    assert!(
        rows_of(&n06, "P-1").is_empty(),
        "{:?}",
        rows_of(&n06, "P-1")
    );
    // The provider's later word about P-1; a return of P-2's money.
    env.write(
        "hooks/events.jsonl",
        r#"{"id":"X-1","status":"FAILED","reference":"P-1","amount":"25.00","currency":"EUR","at":"2026-11-06T15:00:00Z"}
"#,
    );
    psp(
        &env,
        "2026-11-07",
        &format!("R-2,P-2,{OTHER_IBAN},-25.00,EUR,2026-11-07T08:00:00Z,REFUND\n"),
    );
    let n07 = night(&env, 7).await;
    let p1 = rows_of(&n07, "P-1");
    assert_eq!(p1.len(), 1, "{p1:?}");
    assert_eq!(p1[0].0, "CONTRADICTED");
    assert!(
        p1[0]
            .1
            .contains("reviewer alice decided this payment SUCCEEDED")
            && p1[0].1.contains("\"FAILED\""),
        "{p1:?}"
    );
    assert_eq!(rows_of(&n07, "P-2")[0].0, "RETURNED");
    let open = open_tickets(&env).await;
    assert!(
        open.iter().any(|t| t == "CONTRADICTED|CRITICAL|P-1|"),
        "{open:?}"
    );
    // recon moves nothing back: the reviewer's SUCCEEDED stands for a human to judge.
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
}

/// Point 5 (a, d): under `approvals = 2` a `confirm` that resolves money through the next run,
/// and the dismissal of a critical case, wait for a second reviewer: the next run resolves
/// nothing on a waiting confirm, and a critical case waiting to be dismissed stays in the
/// Decide sheet.
#[tokio::test]
async fn a_confirm_and_a_critical_dismissal_wait_for_a_second_reviewer() {
    let env = job("approvals = 2");
    unknown(
        &env,
        &[
            ("P-1", IBAN, "2026-11-05T09:00:00Z"),
            ("P-2", IBAN, "2026-11-05T09:10:00Z"),
        ],
    )
    .await;
    // P-3: FAILED in the ledger, yet a line names it: FAILED_BUT_PAID, critical.
    env.write(
        "payments.csv",
        &format!(
            "{PAYMENTS_HEADER}\nP-3,{OTHER_IBAN},25.00,EUR,FAILED,2026-11-05T09:00:00Z,2026-11-05T09:00:00Z,A-P-3,\n"
        ),
    );
    env.write(
        "attempts.csv",
        &format!("{ATTEMPTS_HEADER}\nA-P-3,P-3,2026-11-05T09:00:00Z,,FAILED,,declined\n"),
    );
    env.import_files().await;
    quiet(&env, 4, 12);
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n\
             T-3,P-3,{OTHER_IBAN},25.00,EUR,2026-11-05T09:30:00Z,PAYMENT\n"
        ),
    );
    night(&env, 5).await;
    let amb = case_of(&env, &["P-1", "P-2"]).await;
    let critical = case_of(&env, &["P-3"]).await;
    assert_eq!(critical.severity, "CRITICAL");
    let rows = [
        (&amb, confirm(&amb, "P-1")),
        (&critical, "dismiss: written off".to_string()),
    ];
    let a = apply(&env, &sheet(&env, "alice.xlsx", &rows), "alice").await;
    assert_eq!(a.count(Status::Waiting), 2, "{}", a.text(None));
    // Alice cannot approve herself, whatever she calls herself.
    let again = apply(&env, &sheet(&env, "alice2.xlsx", &rows), "ALICE").await;
    assert_eq!(again.count(Status::Refused), 2, "{}", again.text(None));
    let n06 = night(&env, 6).await;
    assert_ne!(rows_of(&n06, "P-1")[0].0, "RESOLVED_SUCCEEDED");
    assert_eq!(status(&env, "P-1").await, "UNKNOWN");
    // The critical case waits, open: still in the queue, and in the Decide sheet of any run
    // that reports it (a re-run of its day).
    assert!(
        cases(&env, true)
            .await
            .iter()
            .any(|c| c.key == critical.key),
        "{:#?}",
        cases(&env, true).await
    );
    let re05 = env
        .run("2026-11-05", "2026-11-07T01:00:00Z", false, "re05")
        .await;
    let decide = crate::decisions::decide_cases(&re05.out_dir.join("report.xlsx"));
    assert!(decide.contains(&critical.key), "{decide:?}");
    // Bob approves both on night 6's cases (same evidence).
    let amb = case_of(&env, &["P-1", "P-2"]).await;
    let critical = case_of(&env, &["P-3"]).await;
    let b = apply(
        &env,
        &sheet(
            &env,
            "bob.xlsx",
            &[
                (&amb, confirm(&amb, "P-1")),
                (&critical, "dismiss: written off".into()),
            ],
        ),
        "bob",
    )
    .await;
    assert_eq!(b.count(Status::Applied), 2, "{}", b.text(None));
    let n07 = night(&env, 7).await;
    assert_eq!(rows_of(&n07, "P-1")[0].0, "RESOLVED_SUCCEEDED");
    let history = env
        .texts("SELECT reason FROM payment_status_history WHERE payment_id = 'P-1'")
        .await;
    assert!(
        history[0].contains("by alice, approved by bob"),
        "{history:?}"
    );
    // Dismissed by two: stored so, and out of the Decide sheet of a run that reports it.
    let db = env.db().await;
    let (case, decisions) = recon::decisions::queue::show(&db, &critical.key)
        .await
        .expect("case");
    db.close().await;
    assert_eq!(case.status, "DISMISSED");
    assert_eq!(
        decisions
            .iter()
            .map(|d| (d.actor.as_str(), d.state.as_str(), d.approved_by.as_deref()))
            .collect::<Vec<_>>(),
        [("alice", "APPLIED", Some("bob"))]
    );
    let re05 = env
        .run("2026-11-05", "2026-11-08T01:00:00Z", false, "re05b")
        .await;
    let decide = crate::decisions::decide_cases(&re05.out_dir.join("report.xlsx"));
    assert!(!decide.contains(&critical.key), "{decide:?}");
}

fn recon_cli(env: &TestEnv, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args)
        .arg("--config")
        .arg(&env.config_path)
        .output()
        .expect("recon runs")
}

/// Point 5 (c): who decides is the OS user. This process is root, whom `[[reviewer]]` maps
/// to alice: `--actor bob` is refused (exit 3), `--actor Alice` is alice, a name with a
/// zero-width character is refused; `approvals = 2` without reviewers is refused at config
/// time.
#[tokio::test]
async fn the_actor_is_the_os_user_and_no_typed_name() {
    let env = job("approvals = 2");
    unknown(&env, &[("P-1", IBAN, "2026-11-05T09:00:00Z")]).await;
    quiet(&env, 4, 12);
    psp(
        &env,
        "2026-11-05",
        &format!("T-7,,{IBAN},24.50,EUR,2026-11-05T09:20:00Z,PAYMENT\n"),
    );
    night(&env, 5).await;
    let case = case_of(&env, &["P-1"]).await;
    let file = sheet(&env, "mine.xlsx", &[(&case, "escalate".into())]);
    let file = file.to_str().expect("utf-8 path");
    for (actor, code, says) in [
        ("bob", recon::exit::CONFIG, "is not you"),
        ("ali\u{200B}ce", recon::exit::CONFIG, "is not you"),
        ("Alice", recon::exit::OK, "1 applied"),
    ] {
        let out = recon_cli(&env, &["decisions", "apply", "--actor", actor, file]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{actor:?}: {text}");
        assert!(text.contains(says), "{actor:?}: {text}");
    }
    let db = env.db().await;
    let (_, decisions) = recon::decisions::queue::show(&db, &case.key)
        .await
        .expect("case");
    db.close().await;
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].actor, "alice");
    // Four eyes need reviewers recon can tell apart.
    let plain = TestEnv::new();
    plain.write(
        "recon.toml",
        &format!(
            "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\
             approvals = 2\n\n{}",
            psp_source("psp-{date}.csv", "")
        ),
    );
    let out = recon_cli(&plain, &["runs", "list"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{text}");
    assert!(text.contains("[[reviewer]]"), "{text}");
}

/// Point 5 (c): an inbox folder counts only for the reviewer who owns it. `alice` (root's)
/// and `bob` (uid 4242's) are applied as them; `erin`, owned by bob, and `bob ` (a trailing
/// blank), owned by carol, are left alone; a symbolic link is never followed.
#[tokio::test]
async fn an_inbox_folder_counts_only_for_its_owner() {
    use std::os::unix::fs::{PermissionsExt as _, chown, symlink};
    let env = job("decisions_inbox = \"decisions\"");
    let (c1, c2) = near_misses(&env).await;
    let folder = |name: &str, uid: u32| {
        let d = env.path(&format!("decisions/{name}"));
        std::fs::create_dir_all(&d).expect("folder");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        chown(&d, Some(uid), None).expect("chown (the tests run as root)");
        d
    };
    let alice = folder("alice", 0);
    let bob = folder("bob", 4242);
    let erin = folder("erin", 4242);
    let fake_bob = folder("bob ", 4243);
    write_decide_file(
        &alice.join("a.xlsx"),
        &[(c1.key.clone(), c1.fingerprint.clone(), "escalate".into())],
        "alice's",
    );
    write_decide_file(
        &bob.join("b.xlsx"),
        &[(c2.key.clone(), c2.fingerprint.clone(), "escalate".into())],
        "bob's",
    );
    for (d, c) in [(&erin, &c1), (&fake_bob, &c2)] {
        write_decide_file(
            &d.join("x.xlsx"),
            &[(
                c.key.clone(),
                c.fingerprint.clone(),
                "dismiss: written off".into(),
            )],
            "not theirs",
        );
    }
    // A link in bob's folder to a file elsewhere is not bob's decision.
    let elsewhere = env.path("elsewhere.xlsx");
    write_decide_file(
        &elsewhere,
        &[(
            c2.key.clone(),
            c2.fingerprint.clone(),
            "dismiss: written off".into(),
        )],
        "linked",
    );
    symlink(&elsewhere, bob.join("linked.xlsx")).expect("symlink");
    night(&env, 6).await;
    // recon never moves or writes anything in a reviewer's folder (issue 41 point 3).
    for f in [
        alice.join("a.xlsx"),
        bob.join("b.xlsx"),
        erin.join("x.xlsx"),
        fake_bob.join("x.xlsx"),
        bob.join("linked.xlsx"),
    ] {
        assert!(f.exists(), "{}", f.display());
    }
    let mut decided: Vec<(String, String, String)> = Vec::new();
    for c in [&c1, &c2] {
        let db = env.db().await;
        let (case, decisions) = recon::decisions::queue::show(&db, &c.key)
            .await
            .expect("case");
        db.close().await;
        for d in decisions {
            decided.push((d.case_key, d.decision, d.actor));
        }
        assert_eq!(case.status, "ESCALATED", "{case:#?}");
    }
    decided.sort();
    let mut want = vec![
        (c1.key.clone(), "escalate".to_string(), "alice".to_string()),
        (c2.key.clone(), "escalate".to_string(), "bob".to_string()),
    ];
    want.sort();
    assert_eq!(decided, want);
}

/// One payout, one payment, with lines: a line whose reference names P-1 while the ledger gave
/// its provider id to P-2 is a critical case of both (before: AMBIGUOUS, medium); a line that
/// names P-3 by reference and carries the payout id an old payment (outside the night's
/// range) holds never resolves P-3 with it (before: P-3 RESOLVED_SUCCEEDED, recording a
/// payout id two payments then held).
#[tokio::test]
async fn a_line_whose_payout_another_payment_holds_resolves_nobody() {
    let env = job("");
    env.write(
        "payments.csv",
        &format!(
            "{PAYMENTS_HEADER}\n\
             P-1,{IBAN},25.00,EUR,UNKNOWN,2026-11-05T09:00:00Z,2026-11-05T09:00:00Z,A-P-1,\n\
             P-2,{IBAN},25.00,EUR,UNKNOWN,2026-11-05T09:10:00Z,2026-11-05T09:10:00Z,A-P-2,\n\
             P-3,{OTHER_IBAN},25.00,EUR,UNKNOWN,2026-11-05T09:00:00Z,2026-11-05T09:00:00Z,A-P-3,\n\
             P-OLD,{OTHER_IBAN},25.00,EUR,SUCCEEDED,2026-09-01T09:00:00Z,2026-09-01T09:00:00Z,A-P-OLD,T-5\n"
        ),
    );
    env.write(
        "attempts.csv",
        &format!(
            "{ATTEMPTS_HEADER}\n\
             A-P-1,P-1,2026-11-05T09:00:00Z,,UNKNOWN,,timeout\n\
             A-P-2,P-2,2026-11-05T09:10:00Z,,UNKNOWN,T-6,timeout\n\
             A-P-3,P-3,2026-11-05T09:00:00Z,,UNKNOWN,,timeout\n\
             A-P-OLD,P-OLD,2026-09-01T09:00:00Z,2026-09-01T09:01:00Z,SUCCEEDED,T-5,\n"
        ),
    );
    env.import_files().await;
    quiet(&env, 4, 12);
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-6,P-1,{IBAN},25.00,EUR,2026-11-05T09:20:00Z,PAYMENT\n\
             T-5,P-3,{OTHER_IBAN},25.00,EUR,2026-11-05T09:30:00Z,PAYMENT\n"
        ),
    );
    let n05 = night(&env, 5).await;
    for id in ["P-1", "P-2", "T-6"] {
        let rows = rows_of(&n05, id);
        assert_eq!(rows.len(), 1, "{id}: {rows:?}");
        assert_eq!(rows[0].0, "CONTRADICTED", "{id}: {rows:?}");
    }
    let p3 = rows_of(&n05, "P-3");
    assert_eq!(p3.len(), 1, "{p3:?}");
    assert_eq!(p3[0].0, "CONTRADICTED", "{p3:?}");
    assert!(p3[0].1.contains("payment P-OLD"), "{p3:?}");
    let case = case_of(&env, &["P-1", "P-2"]).await;
    assert_eq!(case.severity, "CRITICAL");
    for day in 6..=10 {
        night(&env, day).await;
    }
    for id in ["P-1", "P-2", "P-3"] {
        assert_eq!(status(&env, id).await, "UNKNOWN", "{id}");
    }
    assert_eq!(
        env.texts("SELECT payment_id FROM payments WHERE provider_payment_id = 'T-5'")
            .await,
        ["P-OLD"]
    );
}
