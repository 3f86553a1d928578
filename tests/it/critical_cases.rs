//! Critical cases that reached nobody (issue 30 points 3-5), each run night after night as a
//! schedule runs it: a later event that contradicts recon's own decision, a line paid for a
//! payment the ledger never submitted, and one unreadable file among readable ones.

use crate::support::{ATTEMPTS_HEADER, HOOKS, PAYMENTS_HEADER, TestEnv, outcomes, psp_source};

const IBAN: &str = "DE89370400440532013000";

fn row(o: &str, p: &str, l: &str) -> (String, String, String) {
    (o.into(), p.into(), l.into())
}

/// A job in Europe/Berlin with the daily provider source `psp` (`psp-<day>.csv`, proven
/// complete by a control file) and the email alert written to the run folder. `extra` goes
/// at the top of the config, `tail` after the source.
fn job(extra: &str, tail: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write(
        "recon.toml",
        &format!(
            "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\
             {extra}\n\n{}\n[email]\nfrom = \"recon <recon@bank.test>\"\nto = [\"finance@bank.test\"]\n\n{tail}",
            psp_source("psp-{date}.csv", "")
        ),
    );
    env
}

/// Delivers the provider's file for `day` (rows without header), with its control file.
fn psp(env: &TestEnv, day: &str, rows: &str) {
    env.deliver(&format!("psp-{day}.csv"), rows);
}

/// Delivers empty provider files for `days`: nothing was paid on them.
fn quiet(env: &TestEnv, days: &[&str]) {
    for d in days {
        psp(env, d, "");
    }
}

/// Imports EUR payments: (id, status, created, started); one attempt each when started.
async fn ledger(env: &TestEnv, rows: &[(&str, &str, &str, &str)]) {
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for (id, status, created, started) in rows {
        if started.is_empty() {
            p.push_str(&format!("{id},{IBAN},25.00,EUR,{status},{created},,,\n"));
        } else {
            p.push_str(&format!(
                "{id},{IBAN},25.00,EUR,{status},{created},{started},A-{id},\n"
            ));
            a.push_str(&format!("A-{id},{id},{started},,{status},,\n"));
        }
    }
    env.write("payments.csv", &p);
    env.write("attempts.csv", &a);
    env.import_files().await;
}

async fn night(env: &TestEnv, day: &str, as_of: &str, id: &str) -> recon::run::RunReport {
    env.run(day, as_of, false, id).await
}

async fn open_tickets(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT kind || '|' || severity || '|' || coalesce(payment_id, '') || '|' || line_ids \
         FROM review_tickets WHERE status = 'OPEN' ORDER BY ticket_id",
    )
    .await
}

/// The plain-text part of the run's alert (`email.eml`, file transport).
fn email_text(report: &recon::run::RunReport) -> String {
    let raw = std::fs::read_to_string(report.out_dir.join("email.eml")).expect("email.eml");
    let (_, parts) = crate::report::parse_message(&raw);
    parts
        .iter()
        .find(|p| p.header("content-type").starts_with("text/plain"))
        .expect("a plain-text part")
        .text()
}

// ---------------------------------------------------------------------------------------------
// Point 4: a line paid for a payment the ledger never submitted.

#[tokio::test]
async fn p4_a_line_for_a_pending_payment_is_a_critical_paid_while_pending_ticket() {
    let env = job("", "");
    // Created three days before the line; never submitted (no attempt, no start).
    ledger(&env, &[("P-1", "PENDING", "2026-11-07T09:00:00Z", "")]).await;
    quiet(&env, &["2026-11-07", "2026-11-08", "2026-11-09"]);
    let first = night(&env, "2026-11-07", "2026-11-08T02:00:00Z", "n07").await;
    assert_eq!(outcomes(&first), vec![row("NOT_SUBMITTED", "P-1", "")]);
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,P-1,{IBAN},25.00,EUR,2026-11-10T08:00:00Z,PAYMENT\n"),
    );
    let later = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "n10").await;
    assert_eq!(
        outcomes(&later),
        vec![row("PAID_WHILE_PENDING", "P-1", "T-1")],
        "the line names a payment of ours: never an orphan"
    );
    assert_eq!(
        open_tickets(&env).await,
        ["PAID_WHILE_PENDING|CRITICAL|P-1|psp:T-1"]
    );
    // No transition: the payment stays PENDING for a human to hold.
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["PENDING"]
    );
    // The alert says so in its first lines: the subject counts it critical, and it is the
    // first row listed.
    let text = email_text(&later);
    // The first case listed (its block: severity and amount, then what and whose).
    let first_case: String = text
        .split("\n1. ")
        .nth(1)
        .expect("a listed case")
        .lines()
        .take(5)
        .collect::<Vec<_>>()
        .join("\n");
    // Its plain title and next step, then whose; the outcome's name in its footer.
    assert!(
        first_case.starts_with("CRITICAL Paid before it was sent")
            && first_case.contains("Next: Stop the payment service from sending it")
            && first_case.contains("P-1")
            && first_case.contains("PAID_WHILE_PENDING"),
        "{text}"
    );
    // ... above the completeness warnings' details (the case list comes right after the
    // headline: money at risk by severity, what recon resolved and what waits).
    let case_at = text.find("PAID_WHILE_PENDING").expect("named");
    let warnings_at = text
        .find("Completeness warnings:")
        .expect("warnings listed");
    assert!(case_at < warnings_at, "{text}");
}

#[tokio::test]
async fn p4_a_pending_payment_is_never_a_fuzzy_candidate() {
    let env = job("", "");
    ledger(&env, &[("P-1", "PENDING", "2026-11-10T09:00:00Z", "")]).await;
    // Same recipient and amount, but the line does not name P-1: nothing proves it is P-1's.
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,INV-7,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    let report = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "n10").await;
    assert_eq!(
        outcomes(&report),
        vec![
            row("NOT_SUBMITTED", "P-1", ""),
            row("ORPHAN_AT_PROVIDER", "", "T-1")
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Point 3: later evidence that contradicts recon's own decision reaches the next night.

/// A stored webhook event about `id` (25.00 EUR, provider id `psp-<id>`).
fn event(id: &str, status: &str, at: &str) -> String {
    format!(
        r#"{{"id":"psp-{id}","status":"{status}","reference":"{id}","amount":"25.00","currency":"EUR","at":"{at}"}}"#
    )
}

fn hooks(env: &TestEnv, events: &[String]) {
    std::fs::create_dir_all(env.path("hooks")).expect("hooks");
    env.write("hooks/events.jsonl", &(events.join("\n") + "\n"));
}

/// The results.csv row of `id` (outcome, detail), if the run reported it.
fn row_of(report: &recon::run::RunReport, id: &str) -> Option<(String, String)> {
    crate::support::read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "detail"],
    )
    .into_iter()
    .find(|r| r[1] == id)
    .map(|r| (r[0].clone(), r[2].clone()))
}

#[tokio::test]
async fn p3_a_later_failed_event_after_recon_resolved_succeeded_is_judged_the_next_night() {
    let env = job(HOOKS, "");
    ledger(
        &env,
        &[(
            "P-1",
            "UNKNOWN",
            "2026-11-05T09:00:00Z",
            "2026-11-05T09:00:00Z",
        )],
    )
    .await;
    quiet(
        &env,
        &["2026-11-05", "2026-11-06", "2026-11-07", "2026-11-08"],
    );
    let paid = event("P-1", "PAID", "2026-11-05T10:00:00Z");
    hooks(&env, std::slice::from_ref(&paid));
    let n05 = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert_eq!(
        row_of(&n05, "P-1").map(|r| r.0).as_deref(),
        Some("RESOLVED_SUCCEEDED")
    );
    // Nothing new: the decision stands and is not reported again.
    let n06 = night(&env, "2026-11-06", "2026-11-07T02:00:00Z", "n06").await;
    assert_eq!(row_of(&n06, "P-1"), None);
    // The provider's later event for the same payout says FAILED; no line ever shows the money.
    hooks(
        &env,
        &[paid.clone(), event("P-1", "FAILED", "2026-11-06T15:00:00Z")],
    );
    let n07 = night(&env, "2026-11-07", "2026-11-08T02:00:00Z", "n07").await;
    let (outcome, detail) = row_of(&n07, "P-1").expect("the contradiction is reported tonight");
    assert_eq!(outcome, "CONTRADICTED");
    assert!(
        detail.contains("events.jsonl:2") && detail.contains("\"FAILED\""),
        "the ticket names the event that contradicts the decision: {detail}"
    );
    assert!(
        detail.contains("recon decided this payment SUCCEEDED"),
        "the ticket names the earlier claim too: {detail}"
    );
    // Two claims about one payout that disagree: critical (DESIGN.md rule 14).
    assert_eq!(open_tickets(&env).await, ["CONTRADICTED|CRITICAL|P-1|"]);
    // recon moves nothing back: the ledger keeps recon's SUCCEEDED for a human to judge.
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["SUCCEEDED"]
    );
    // The next night says the same, with the same ticket (no duplicate).
    let n08 = night(&env, "2026-11-08", "2026-11-09T02:00:00Z", "n08").await;
    assert_eq!(
        row_of(&n08, "P-1").map(|r| r.0).as_deref(),
        Some("CONTRADICTED")
    );
    assert_eq!(n08.summary.tickets.created, 0);
    assert_eq!(open_tickets(&env).await.len(), 1);
    // A re-run of the range says the same on the decision's day, naming the event too.
    let range = env
        .try_run(
            "2026-11-05",
            "2026-11-08",
            "2026-11-09T02:00:00Z",
            false,
            "range",
        )
        .await
        .expect("range");
    let (days, _) = range.range.as_ref().expect("a range");
    let (outcome, detail) = row_of(&days[0], "P-1").expect("its own day reports it");
    assert_eq!(outcome, "CONTRADICTED");
    assert!(detail.contains("events.jsonl:2"), "{detail}");
    assert_eq!(open_tickets(&env).await.len(), 1);
}

#[tokio::test]
async fn p3_a_later_paid_event_after_recon_resolved_failed_is_failed_but_paid_the_next_night() {
    let env = job(HOOKS, "");
    ledger(
        &env,
        &[(
            "P-1",
            "UNKNOWN",
            "2026-11-05T09:00:00Z",
            "2026-11-05T09:00:00Z",
        )],
    )
    .await;
    quiet(
        &env,
        &[
            "2026-11-05",
            "2026-11-06",
            "2026-11-07",
            "2026-11-08",
            "2026-11-09",
            "2026-11-10",
            "2026-11-11",
        ],
    );
    hooks(&env, &[]);
    // Every source complete for the window and the settlement lag passed: no line, FAILED.
    let n09 = night(&env, "2026-11-09", "2026-11-10T02:00:00Z", "n09").await;
    assert_eq!(
        row_of(&n09, "P-1").map(|r| r.0).as_deref(),
        Some("RESOLVED_FAILED")
    );
    // Two days later the provider says it paid (no statement line shows it).
    hooks(&env, &[event("P-1", "PAID", "2026-11-11T08:00:00Z")]);
    let n11 = night(&env, "2026-11-11", "2026-11-12T02:00:00Z", "n11").await;
    let (outcome, detail) = row_of(&n11, "P-1").expect("reported the next night");
    assert_eq!(outcome, "FAILED_BUT_PAID");
    assert!(detail.contains("events.jsonl:1"), "{detail}");
    assert_eq!(open_tickets(&env).await, ["FAILED_BUT_PAID|CRITICAL|P-1|"]);
}

#[tokio::test]
async fn p3_a_watched_decision_that_the_evidence_still_supports_is_not_reported_again() {
    let env = job(HOOKS, "");
    ledger(
        &env,
        &[
            (
                "P-1",
                "UNKNOWN",
                "2026-11-05T09:00:00Z",
                "2026-11-05T09:00:00Z",
            ),
            (
                "P-2",
                "UNKNOWN",
                "2026-11-05T09:00:00Z",
                "2026-11-05T09:00:00Z",
            ),
        ],
    )
    .await;
    // P-1 is proven by its line, P-2 by the provider's event; neither changes afterwards,
    // and the windows stay open (no day is complete beyond the first).
    psp(
        &env,
        "2026-11-05",
        &format!("T-1,P-1,{IBAN},25.00,EUR,2026-11-05T09:10:00Z,PAYMENT\n"),
    );
    hooks(&env, &[event("P-2", "PAID", "2026-11-05T10:00:00Z")]);
    let n05 = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert_eq!(
        outcomes(&n05),
        vec![
            row("RESOLVED_SUCCEEDED", "P-1", "T-1"),
            row("RESOLVED_SUCCEEDED", "P-2", "")
        ]
    );
    for (day, as_of, id) in [
        ("2026-11-06", "2026-11-07T02:00:00Z", "n06"),
        ("2026-11-07", "2026-11-08T02:00:00Z", "n07"),
    ] {
        let n = night(&env, day, as_of, id).await;
        assert_eq!(outcomes(&n), vec![], "{id}");
    }
    assert!(open_tickets(&env).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Point 5: one unreadable file stops nothing but its own days.

#[tokio::test]
async fn p5_an_unreadable_daily_file_leaves_its_days_incomplete_and_the_rest_reconciled() {
    let env = job("", "");
    ledger(
        &env,
        &[
            (
                "P-1",
                "UNKNOWN",
                "2026-11-05T09:00:00Z",
                "2026-11-05T09:00:00Z",
            ),
            (
                "P-2",
                "UNKNOWN",
                "2026-11-09T09:00:00Z",
                "2026-11-09T09:00:00Z",
            ),
        ],
    )
    .await;
    // 2026-11-05's file arrived with 0 bytes and no control file; the other days are fine.
    env.write("psp-2026-11-05.csv", "");
    quiet(
        &env,
        &[
            "2026-11-06",
            "2026-11-07",
            "2026-11-08",
            "2026-11-10",
            "2026-11-11",
            "2026-11-12",
            "2026-11-13",
        ],
    );
    psp(
        &env,
        "2026-11-09",
        &format!("T-2,P-2,{IBAN},25.00,EUR,2026-11-09T09:10:00Z,PAYMENT\n"),
    );
    let n09 = env
        .try_run(
            "2026-11-09",
            "2026-11-09",
            "2026-11-10T02:00:00Z",
            false,
            "n09",
        )
        .await
        .expect("an unreadable file does not stop the run");
    // Everything else is reconciled and committed; P-1's window holds the unreadable day, so
    // its absence of lines proves nothing.
    assert_eq!(
        outcomes(&n09),
        vec![
            row("AWAITING_EVIDENCE", "P-1", ""),
            row("RESOLVED_SUCCEEDED", "P-2", "T-2")
        ]
    );
    assert_eq!(
        env.texts("SELECT status FROM payments ORDER BY payment_id")
            .await,
        ["UNKNOWN", "SUCCEEDED"]
    );
    assert_eq!(
        env.texts("SELECT status FROM recon_runs WHERE run_id = 'n09'")
            .await,
        ["COMPLETED"]
    );
    let bad = n09.unreadable_inputs();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].path.ends_with("psp-2026-11-05.csv"), "{bad:?}");
    assert_eq!(bad[0].period, "2026-11-05..2026-11-05");
    assert!(
        n09.summary
            .gates
            .iter()
            .any(|g| g.check == "readable" && !g.ok && g.file.ends_with("psp-2026-11-05.csv"))
    );
    // The report and the alert name the file as critical, first.
    let text = email_text(&n09);
    // After the two title lines (where, how many cases) and a blank line.
    let head: Vec<&str> = text.lines().take(5).collect();
    assert!(
        head.iter()
            .any(|l| l.starts_with("CRITICAL: 1 statement file")),
        "{text}"
    );
    assert!(
        head.iter().any(|l| l.contains("psp-2026-11-05.csv")),
        "{text}"
    );
    assert!(!text.contains("Nothing to review"), "{text}");
    let html = std::fs::read_to_string(n09.out_dir.join("report.html")).expect("report.html");
    assert!(
        html.contains("CRITICAL: 1 statement file(s) cannot be read")
            && html.contains("psp-2026-11-05.csv"),
        "report.html names the file"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(n09.out_dir.join("summary.json")).expect("summary.json"),
    )
    .expect("json");
    assert_eq!(json["unreadable_inputs"][0]["source"], "psp");
    // As long as the day is in scope, nothing is resolved FAILED on it.
    let n13 = night(&env, "2026-11-13", "2026-11-14T02:00:00Z", "n13").await;
    assert_eq!(outcomes(&n13), vec![row("AWAITING_EVIDENCE", "P-1", "")]);
    assert_eq!(n13.unreadable_inputs().len(), 1);
    // Delivered again, readable and proven: the next run decides.
    psp(&env, "2026-11-05", "");
    let n14 = night(&env, "2026-11-14", "2026-11-15T02:00:00Z", "n14").await;
    assert!(n14.unreadable_inputs().is_empty());
    assert_eq!(outcomes(&n14), vec![row("RESOLVED_FAILED", "P-1", "")]);
}

#[tokio::test]
async fn p5_the_process_exits_with_its_own_code_and_a_config_error_still_stops_first() {
    let env = job("", "");
    ledger(
        &env,
        &[(
            "P-1",
            "UNKNOWN",
            "2026-11-10T09:00:00Z",
            "2026-11-10T09:00:00Z",
        )],
    )
    .await;
    // Not a statement at all: a mapped column is not in the header.
    env.write("psp-2026-11-10.csv", "hello,world\n1,2\n");
    let run = |id: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(["run", "--config"])
            .arg(&env.config_path)
            .args([
                "--date",
                "2026-11-10",
                "--as-of",
                "2026-11-11T02:00:00Z",
                "--run-id",
                id,
            ])
            .output()
            .expect("recon binary")
    };
    let out = run("r1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::INPUT_UNREADABLE),
        "{stderr}"
    );
    assert!(stderr.contains("could not be read"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("CRITICAL") && stdout.contains("psp-2026-11-10.csv"),
        "{stdout}"
    );
    assert_eq!(
        env.texts("SELECT status FROM recon_runs WHERE run_id = 'r1'")
            .await,
        ["COMPLETED"]
    );
    // A configuration error is still one: exit 3 before any data is read.
    let cfg = std::fs::read_to_string(&env.config_path).expect("config");
    env.write(
        "recon.toml",
        &cfg.replace("timestamp_format", "timestamp_fromat"),
    );
    assert_eq!(run("r2").status.code(), Some(recon::exit::CONFIG));
}
