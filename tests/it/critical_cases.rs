//! Critical cases that reached nobody (issue 30 points 3-5), each run night after night as a
//! schedule runs it: a later event that contradicts recon's own decision, a line paid for a
//! payment the ledger never submitted, and one unreadable file among readable ones.

use crate::support::{ATTEMPTS_HEADER, PAYMENTS_HEADER, TestEnv, outcomes, psp_source};

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
    let first_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("CRITICAL") || l.trim_start().starts_with("HIGH"))
        .expect("a listed row");
    assert!(
        first_row.contains("PAID_WHILE_PENDING") && first_row.contains("P-1"),
        "{text}"
    );
    assert!(
        text.lines().take(6).any(|l| l.contains("PAID_WHILE_PENDING")),
        "{text}"
    );
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
