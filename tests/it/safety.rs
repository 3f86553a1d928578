//! Safety across nights (issue 12): small multi-day jobs built from the documented config and
//! ledger formats, run night after night as a schedule runs them — late and re-delivered files,
//! date-only bank bookings, money that comes back, re-runs after recon moved a payment. Each
//! test names the point of the issue it holds.

use crate::support::{ATTEMPTS_HEADER, PAYMENTS_HEADER, TestEnv, outcomes, psp_source};
use recon::exit;

const IBAN: &str = "DE89370400440532013000";
const OTHER: &str = "FR1420041010050500013M02606";

fn row(o: &str, p: &str, l: &str) -> (String, String, String) {
    (o.into(), p.into(), l.into())
}

/// A job in Europe/Berlin with a daily provider source `psp` (`psp-<day>.csv`, proven
/// complete by a control file) and, when `bank` is set, a daily bank source with date-only
/// bookings (`bank-<day>.csv`, `%Y-%m-%d`). `extra` goes at the top of the config.
fn job(extra: &str, bank: bool) -> TestEnv {
    let env = TestEnv::new();
    let mut cfg = format!(
        "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\
         {extra}\n\n{}",
        psp_source("psp-{date}.csv", "")
    );
    if bank {
        cfg.push_str(
            r#"
[[source]]
name = "bank"
role = "bank"
format = "csv"
path = "bank-{date}.csv"
timestamp_format = "%Y-%m-%d"
completeness = "control_file"

[source.columns]
reference = "purpose"
recipient = "counterparty"
amount = "amount"
currency = "currency"
booked_at = "date"
kind = "type"

[source.kinds]
DEBIT = "PAYMENT"
CREDIT = "PAYMENT"
RETURN = "REFUND"
"#,
        );
    }
    env.write("recon.toml", &cfg);
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

/// Delivers the bank's file for `day` (rows: purpose,counterparty,amount,currency,date,type).
fn bank(env: &TestEnv, day: &str, rows: &str) {
    env.deliver_csv(
        &format!("bank-{day}.csv"),
        "purpose,counterparty,amount,currency,date,type",
        rows,
    );
}

/// A payment row for [`ledger`]: id, recipient, amount (EUR), status, started.
type Pay<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// [`Pay`], in one call per payment.
fn pay<'a>(
    id: &'a str,
    rcpt: &'a str,
    amount: &'a str,
    status: &'a str,
    started: &'a str,
) -> Pay<'a> {
    (id, rcpt, amount, status, started)
}

/// Imports EUR payments ([`pay`]), one attempt each.
async fn ledger(env: &TestEnv, rows: &[Pay<'_>]) {
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for (id, rcpt, amount, status, started) in rows {
        p.push_str(&format!(
            "{id},{rcpt},{amount},EUR,{status},{started},{started},A-{id},\n"
        ));
        a.push_str(&format!("A-{id},{id},{started},,{status},,\n"));
    }
    env.write("payments.csv", &p);
    env.write("attempts.csv", &a);
    env.import_files().await;
}

async fn night(env: &TestEnv, day: &str, as_of: &str, id: &str) -> recon::run::RunReport {
    env.run(day, as_of, false, id).await
}

fn has(report: &recon::run::RunReport, o: &str, p: &str) -> bool {
    outcomes(report).iter().any(|r| r.0 == o && r.1 == p)
}

async fn open_tickets(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT kind || '|' || severity || '|' || coalesce(payment_id, '') || '|' || line_ids \
         FROM review_tickets WHERE status = 'OPEN' ORDER BY ticket_id",
    )
    .await
}

async fn status(env: &TestEnv, id: &'static str) -> String {
    let sql: &'static str = Box::leak(
        format!("SELECT status FROM payments WHERE payment_id = '{id}'").into_boxed_str(),
    );
    env.texts(sql).await.remove(0)
}

/// Every statement line booked in the run's days appears in its results.csv exactly once as
/// an owner: its own row, or the one payment row that links it (`source:file:line`).
fn assert_every_line_owned(report: &recon::run::RunReport, booked_in_range: &[&str]) {
    let rows = crate::support::read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "source_lines"],
    );
    for want in booked_in_range {
        let owners = rows
            .iter()
            .filter(|r| r[2].split(';').any(|s| s.ends_with(want)))
            .count();
        assert!(
            owners >= 1,
            "line {want} is in no row of {}",
            report.out_dir.display()
        );
        let own_rows = rows
            .iter()
            .filter(|r| r[1].is_empty() && r[2].split(';').any(|s| s.ends_with(want)))
            .count();
        let payment_rows = owners - own_rows;
        assert!(
            own_rows == 1 || (own_rows == 0 && payment_rows == 1),
            "line {want}: {own_rows} own row(s), {payment_rows} payment row(s)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Point 1: late evidence about finished payments surfaces.

#[tokio::test]
async fn p1_a_line_booked_days_later_for_a_failed_payment_is_failed_but_paid_in_its_run() {
    let env = job("", false);
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "FAILED", "2026-11-05T09:00:00Z")],
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
        ],
    );
    let first = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert_eq!(outcomes(&first), vec![row("FAILED_OK", "P-1", "")]);
    // Five days later the provider books the payment the ledger called FAILED.
    psp(
        &env,
        "2026-11-10",
        "T-9,P-1,DE89370400440532013000,25.00,EUR,2026-11-10T08:00:00Z,PAYMENT\n",
    );
    let later = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "n10").await;
    assert_eq!(
        outcomes(&later),
        vec![row("FAILED_BUT_PAID", "P-1", "T-9")],
        "the line names a payment outside the day's scope: it must not vanish"
    );
    assert_every_line_owned(&later, &["psp:psp-2026-11-10.csv:2"]);
    assert_eq!(
        open_tickets(&env).await,
        ["FAILED_BUT_PAID|CRITICAL|P-1|psp:T-9"]
    );
}

#[tokio::test]
async fn p1_a_second_line_for_a_matched_or_resolved_payment_is_a_duplicate() {
    let env = job("", false);
    ledger(
        &env,
        &[
            pay("P-1", IBAN, "25.00", "SUCCEEDED", "2026-11-05T09:00:00Z"),
            pay("P-2", OTHER, "30.00", "UNKNOWN", "2026-11-05T10:00:00Z"),
        ],
    )
    .await;
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-05T09:05:00Z,PAYMENT\n\
             T-2,P-2,{OTHER},30.00,EUR,2026-11-05T10:05:00Z,PAYMENT\n"
        ),
    );
    let first = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert!(has(&first, "MATCHED", "P-1"), "{:?}", outcomes(&first));
    assert!(
        has(&first, "RESOLVED_SUCCEEDED", "P-2"),
        "{:?}",
        outcomes(&first)
    );
    quiet(&env, &["2026-11-06", "2026-11-07"]);
    // Three days later both are paid a second time.
    psp(
        &env,
        "2026-11-08",
        &format!(
            "T-3,P-1,{IBAN},25.00,EUR,2026-11-08T11:00:00Z,PAYMENT\n\
             T-4,P-2,{OTHER},30.00,EUR,2026-11-08T12:00:00Z,PAYMENT\n"
        ),
    );
    let later = night(&env, "2026-11-08", "2026-11-09T02:00:00Z", "n08").await;
    assert_eq!(
        outcomes(&later),
        vec![
            row("DUPLICATE_AT_PROVIDER", "P-1", "T-1;T-3"),
            row("DUPLICATE_AT_PROVIDER", "P-2", "T-2;T-4"),
        ]
    );
    assert_eq!(
        later.summary.transitions.planned, 0,
        "no transition: recon already resolved P-2, and a duplicate moves nothing"
    );
    assert_every_line_owned(
        &later,
        &["psp:psp-2026-11-08.csv:2", "psp:psp-2026-11-08.csv:3"],
    );
}

#[tokio::test]
async fn p1_a_late_file_surfaces_its_evidence_in_the_first_run_that_reads_it() {
    let env = job("", false);
    ledger(
        &env,
        &[
            pay("P-1", IBAN, "25.00", "FAILED", "2026-11-05T09:00:00Z"),
            pay("P-2", OTHER, "30.00", "SUCCEEDED", "2026-11-04T09:00:00Z"),
        ],
    )
    .await;
    psp(
        &env,
        "2026-11-04",
        &format!("T-2,P-2,{OTHER},30.00,EUR,2026-11-04T09:05:00Z,PAYMENT\n"),
    );
    night(&env, "2026-11-04", "2026-11-05T02:00:00Z", "n04").await;
    // The file of the 5th is late: the night of the 5th has nothing.
    let n05 = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert_eq!(outcomes(&n05), vec![row("FAILED_OK", "P-1", "")]);
    psp(&env, "2026-11-06", "");
    night(&env, "2026-11-06", "2026-11-07T02:00:00Z", "n06").await;
    // It arrives before the night of the 7th: the payment the ledger failed was paid on the
    // 5th, and an orphan line of the 5th comes with it.
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-05T09:10:00Z,PAYMENT\n\
             T-5,,{OTHER},99.00,EUR,2026-11-05T12:00:00Z,PAYMENT\n"
        ),
    );
    psp(&env, "2026-11-07", "");
    let n07 = night(&env, "2026-11-07", "2026-11-08T02:00:00Z", "n07").await;
    assert_eq!(
        outcomes(&n07),
        vec![
            row("FAILED_BUT_PAID", "P-1", "T-1"),
            row("ORPHAN_AT_PROVIDER", "", "T-5"),
        ]
    );
    // The next night does not report them again; a re-run of the 7th reproduces them.
    psp(&env, "2026-11-08", "");
    let n08 = night(&env, "2026-11-08", "2026-11-09T02:00:00Z", "n08").await;
    assert_eq!(outcomes(&n08), vec![]);
    let again = night(&env, "2026-11-07", "2026-11-08T02:00:00Z", "n07b").await;
    assert_eq!(
        std::fs::read(n07.out_dir.join("results.csv")).expect("n07"),
        std::fs::read(again.out_dir.join("results.csv")).expect("again"),
    );
}

// ---------------------------------------------------------------------------------------------
// Point 2: the evidence horizon never shrinks.

#[tokio::test]
async fn p2_an_identifier_only_rule_set_keeps_the_whole_horizon() {
    let env = job("rules_dir = \"rules\"", false);
    std::fs::create_dir_all(env.path("rules")).expect("rules dir");
    env.write(
        "rules/ids.toml",
        "[[pass]]\nid = \"identifier\"\nkind = \"identifier\"\n\
         identifiers = [\"reference\", \"provider_txn_id\"]\n\
         normalize = [\"fold_width\", \"no_spaces\", \"upper\"]\n\
         auto_apply_succeeded = true\nauto_apply_unknown = true\n",
    );
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T08:00:00Z")],
    )
    .await;
    psp(&env, "2026-11-10", "");
    // The 11th's file is late. Two days later, an UNKNOWN payment of the 10th must wait: its
    // line may well be in the missing file.
    let r = night(&env, "2026-11-10", "2026-11-12T02:00:00Z", "a").await;
    assert_eq!(outcomes(&r), vec![row("AWAITING_EVIDENCE", "P-1", "")]);
    assert_eq!(status(&env, "P-1").await, "UNKNOWN");
    // With every file of the horizon (72 h) delivered and the lag passed, it resolves FAILED.
    quiet(&env, &["2026-11-11", "2026-11-12", "2026-11-13"]);
    let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "b").await;
    assert_eq!(outcomes(&r), vec![row("RESOLVED_FAILED", "P-1", "")]);
}

#[test]
fn p2_a_horizon_narrower_than_a_pass_window_is_a_configuration_error() {
    let env = job("evidence_window_after = \"24h\"", false);
    let err = recon::rules::RuleSet::for_job(&env.config()).expect_err("narrower than 72h");
    assert_eq!(exit::code_for(&err), exit::CONFIG);
    let msg = format!("{err:#}");
    assert!(msg.contains("evidence_window_after"), "{msg}");
    assert!(msg.contains("recipient_amount_window"), "{msg}");
    let env = job("evidence_window_after = \"5d\"", false);
    let rules = recon::rules::RuleSet::for_job(&env.config()).expect("wider is fine");
    assert_eq!(rules.evidence_window().1, 5 * recon::timeparse::DAY);
}

// ---------------------------------------------------------------------------------------------
// Point 3: a booking is as precise as its source.

#[tokio::test]
async fn p3_a_same_day_date_only_bank_debit_proves_an_unknown_payment() {
    let env = job("", true);
    ledger(
        &env,
        &[
            pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z"),
            pay("P-2", OTHER, "40.00", "UNKNOWN", "2026-11-10T15:00:00Z"),
        ],
    )
    .await;
    for d in ["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"] {
        psp(&env, d, "");
        bank(&env, d, "");
    }
    // The bank books the debit for P-1 on the 10th, without a time; for P-2's recipient it
    // books another amount on the 10th (a near miss, whatever the hour).
    bank(
        &env,
        "2026-11-10",
        &format!(
            "payout,{IBAN},-25.00,EUR,2026-11-10,DEBIT\n\
             payout,{OTHER},-39.50,EUR,2026-11-10,DEBIT\n"
        ),
    );
    let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "r").await;
    let rows = crate::support::read_columns(
        &r.out_dir.join("results.csv"),
        &["outcome", "payment_id", "booked_at", "source_lines"],
    );
    assert_eq!(
        rows,
        vec![
            vec![
                "RESOLVED_SUCCEEDED",
                "P-1",
                "2026-11-10",
                "bank:bank-2026-11-10.csv:2"
            ],
            vec![
                "AMBIGUOUS",
                "P-2",
                "2026-11-10",
                "bank:bank-2026-11-10.csv:3"
            ],
            vec!["AMBIGUOUS", "", "2026-11-10", "bank:bank-2026-11-10.csv:3"],
        ],
        "the whole day overlaps the window: proof for P-1, a near miss for P-2"
    );
}

// ---------------------------------------------------------------------------------------------
// Point 4: money that came back never confirms a payment.

#[tokio::test]
async fn p4_a_debit_and_its_return_on_one_statement_are_returned_never_resolved() {
    let env = job("", true);
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    for d in ["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"] {
        psp(&env, d, "");
        bank(&env, d, "");
    }
    bank(
        &env,
        "2026-11-10",
        &format!("P-1,{IBAN},-25.00,EUR,2026-11-10,DEBIT\n"),
    );
    bank(
        &env,
        "2026-11-11",
        &format!("RETURN P-1,{IBAN},25.00,EUR,2026-11-11,RETURN\n"),
    );
    let r = night(&env, "2026-11-11", "2026-11-15T02:00:00Z", "r").await;
    // Reported on the return's day with both lines; the payment stays UNKNOWN.
    let rows = crate::support::read_columns(
        &r.out_dir.join("results.csv"),
        &["outcome", "payment_id", "action"],
    );
    assert_eq!(rows, vec![vec!["RETURNED", "P-1", "ticket"]]);
    assert_eq!(status(&env, "P-1").await, "UNKNOWN");
    assert_eq!(
        open_tickets(&env).await.len(),
        1,
        "{:?}",
        open_tickets(&env).await
    );
    assert!(open_tickets(&env).await[0].starts_with("RETURNED|HIGH|P-1|"));
    // The ticket's evidence names the return and why it is this payment's money.
    let evidence: serde_json::Value = serde_json::from_str(
        &env.texts("SELECT evidence FROM review_tickets WHERE kind = 'RETURNED'")
            .await[0],
    )
    .expect("json");
    let candidates = evidence["candidates"].as_array().expect("candidates");
    let ret = candidates
        .iter()
        .find(|c| c["relation"] == "returned")
        .unwrap_or_else(|| panic!("no return among {candidates:?}"));
    assert_eq!(ret["gate"], "returns");
    let why = ret["qualified_by"].to_string();
    assert!(why.contains("came back, the payment's amount"), "{why}");
    // The run of the debit's day sees the return too (same evidence, as of the 15th).
    let d10 = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "d10").await;
    assert_eq!(outcomes(&d10)[0].0, "RETURNED");
}

#[tokio::test]
async fn p4_a_return_nights_after_success_reopens_the_case() {
    let env = job("", false);
    ledger(
        &env,
        &[
            pay("P-1", IBAN, "25.00", "SUCCEEDED", "2026-11-05T09:00:00Z"),
            pay("P-2", OTHER, "30.00", "UNKNOWN", "2026-11-05T10:00:00Z"),
        ],
    )
    .await;
    psp(
        &env,
        "2026-11-05",
        &format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-05T09:05:00Z,PAYMENT\n\
             T-2,P-2,{OTHER},30.00,EUR,2026-11-05T10:05:00Z,PAYMENT\n"
        ),
    );
    let n05 = night(&env, "2026-11-05", "2026-11-06T02:00:00Z", "n05").await;
    assert!(has(&n05, "RESOLVED_SUCCEEDED", "P-2"));
    quiet(&env, &["2026-11-06", "2026-11-07", "2026-11-08"]);
    // Four days later both come back: P-1's return names no payment (same recipient and
    // amount), P-2's names it by reference.
    psp(
        &env,
        "2026-11-09",
        &format!(
            "R-1,,{IBAN},-25.00,EUR,2026-11-09T07:00:00Z,REFUND\n\
             R-2,P-2,{OTHER},-30.00,EUR,2026-11-09T08:00:00Z,REFUND\n"
        ),
    );
    let n09 = night(&env, "2026-11-09", "2026-11-10T02:00:00Z", "n09").await;
    assert_eq!(
        outcomes(&n09),
        vec![
            row("RETURNED", "P-1", "R-1;T-1"),
            row("RETURNED", "P-2", "R-2;T-2"),
        ]
    );
    let kinds: Vec<String> = open_tickets(&env)
        .await
        .iter()
        .map(|t| t.split('|').take(3).collect::<Vec<_>>().join("|"))
        .collect();
    assert_eq!(kinds, ["RETURNED|HIGH|P-1", "RETURNED|HIGH|P-2"]);
}

// ---------------------------------------------------------------------------------------------
// Point 5: recon's own decisions are re-checked, never replayed blindly.

#[tokio::test]
async fn p5_a_line_for_a_payment_recon_failed_is_failed_but_paid_on_re_run() {
    let env = job("", false);
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    quiet(
        &env,
        &["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"],
    );
    let first = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "a").await;
    assert_eq!(outcomes(&first), vec![row("RESOLVED_FAILED", "P-1", "")]);
    assert_eq!(status(&env, "P-1").await, "FAILED");
    // The provider corrects the file of the 10th: the payment was paid after all.
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,P-1,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    let rerun = night(&env, "2026-11-10", "2026-11-20T02:00:00Z", "b").await;
    let rows = crate::support::read_columns(
        &rerun.out_dir.join("results.csv"),
        &["outcome", "payment_id", "action"],
    );
    assert_eq!(rows, vec![vec!["FAILED_BUT_PAID", "P-1", "ticket"]]);
    assert_eq!(
        rerun.summary.transitions.conflicts, 0,
        "not a silent conflict"
    );
    assert_eq!(
        open_tickets(&env).await,
        ["FAILED_BUT_PAID|CRITICAL|P-1|psp:T-1"]
    );
    // The line is booked before the first run's as-of: re-run with that as-of, the day sees
    // the corrected file too and says the same.
    let again = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "c").await;
    assert_eq!(outcomes(&again), vec![row("FAILED_BUT_PAID", "P-1", "T-1")]);
    assert_eq!(
        again.summary.tickets.created, 0,
        "the same ticket, not a second one"
    );
}

#[tokio::test]
async fn p5_a_withdrawn_line_after_recon_resolved_succeeded_is_a_ticket() {
    let env = job("", false);
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    quiet(&env, &["2026-11-11", "2026-11-12", "2026-11-13"]);
    let first = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "a").await;
    assert_eq!(
        outcomes(&first),
        vec![row("RESOLVED_SUCCEEDED", "P-1", "T-1")]
    );
    // The provider withdraws the line (corrected file); re-running the day must not replay
    // SUCCEEDED nor try to fail the payment.
    psp(&env, "2026-11-10", "");
    let rerun = night(&env, "2026-11-10", "2026-11-20T02:00:00Z", "b").await;
    let rows = crate::support::read_columns(
        &rerun.out_dir.join("results.csv"),
        &["outcome", "payment_id", "action"],
    );
    assert_eq!(rows, vec![vec!["MISSING_AT_PROVIDER", "P-1", "ticket"]]);
    assert_eq!(rerun.summary.transitions.planned, 0);
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
}

// ---------------------------------------------------------------------------------------------
// Point 6: one comparison everywhere.

#[tokio::test]
async fn p6_a_ledger_recipient_written_with_spaces_and_lower_case_is_the_same_recipient() {
    let env = job("", false);
    ledger(
        &env,
        &[
            pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z"),
            pay("P-2", OTHER, "30.00", "UNKNOWN", "2026-11-10T10:00:00Z"),
        ],
    )
    .await;
    // The payment service wrote the IBANs its own way (import would have normalised them).
    env.exec(
        "UPDATE payments SET recipient_account = 'de89 3704 0044 0532 0130 00' \
         WHERE payment_id = 'P-1'",
    )
    .await;
    env.exec(
        "UPDATE payments SET recipient_account = 'fr14 2004 1010 0505 0001 3m02 606' \
         WHERE payment_id = 'P-2'",
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             T-2,,{OTHER},30.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n"
        ),
    );
    let r = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "r").await;
    assert_eq!(
        outcomes(&r),
        vec![
            row("RESOLVED_SUCCEEDED", "P-1", "T-1"),
            row("RESOLVED_SUCCEEDED", "P-2", "T-2"),
        ],
        "an exact reference match is not 'paid another recipient'"
    );
}

// ---------------------------------------------------------------------------------------------
// Point 7: line identity is unique across files and stable across re-deliveries.

#[tokio::test]
async fn p7_line_two_of_two_daily_files_are_two_tickets() {
    let env = job("", true);
    ledger(&env, &[]).await;
    bank(
        &env,
        "2026-11-10",
        &format!("fee,{IBAN},-1.00,EUR,2026-11-10,DEBIT\n"),
    );
    bank(
        &env,
        "2026-11-11",
        &format!("fee,{OTHER},-2.00,EUR,2026-11-11,DEBIT\n"),
    );
    quiet(&env, &["2026-11-10", "2026-11-11"]);
    let a = night(&env, "2026-11-10", "2026-11-12T02:00:00Z", "a").await;
    let b = night(&env, "2026-11-11", "2026-11-12T02:00:00Z", "b").await;
    let ida = outcomes(&a)[0].2.clone();
    let idb = outcomes(&b)[0].2.clone();
    assert_ne!(ida, idb, "two lines, two identities");
    assert_eq!(
        open_tickets(&env).await.len(),
        2,
        "{:?}",
        open_tickets(&env).await
    );
    // Delivered again (the same bytes, in a file with another name in its path order), the
    // line keeps its identity: the re-run raises nothing new.
    bank(
        &env,
        "2026-11-10",
        &format!("fee,{IBAN},-1.00,EUR,2026-11-10,DEBIT\n"),
    );
    let again = night(&env, "2026-11-10", "2026-11-12T02:00:00Z", "c").await;
    assert_eq!(outcomes(&again)[0].2, ida);
    assert_eq!(again.summary.tickets.created, 0);
}

// ---------------------------------------------------------------------------------------------
// Point 8: fail closed on input that reads two ways.

#[tokio::test]
async fn p8_a_misgrouped_amount_is_a_rejected_line_never_a_bigger_amount() {
    let env = job("", false);
    let cfg = std::fs::read_to_string(env.path("recon.toml")).expect("cfg");
    env.write(
        "recon.toml",
        &cfg.replace(
            "completeness = \"control_file\"",
            "completeness = \"control_file\"\nthousands_separator = \",\"",
        ),
    );
    ledger(
        &env,
        &[pay("P-1", IBAN, "47.59", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,P-1,{IBAN},\"47,59\",EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    let r = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "r").await;
    assert_eq!(outcomes(&r), vec![row("AWAITING_EVIDENCE", "P-1", "")]);
    let rejected =
        crate::support::read_columns(&r.out_dir.join("rejected.csv"), &["file", "line", "reason"]);
    assert_eq!(rejected.len(), 1);
    assert!(rejected[0][0].ends_with("psp-2026-11-10.csv"));
    assert_eq!(rejected[0][1], "2");
    assert!(rejected[0][2].contains("47,59"), "{:?}", rejected[0]);
}

#[tokio::test]
async fn p8_an_empty_daily_file_is_complete_only_when_the_source_says_so() {
    for (empty_file, want) in [
        ("", "AWAITING_EVIDENCE"),
        ("empty_file = \"no_activity\"", "RESOLVED_FAILED"),
    ] {
        let env = job("", false);
        let cfg = std::fs::read_to_string(env.path("recon.toml")).expect("cfg");
        env.write(
            "recon.toml",
            &cfg.replace(
                "completeness = \"control_file\"",
                &format!("completeness = \"last_line\"\n{empty_file}"),
            ),
        );
        ledger(
            &env,
            &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
        )
        .await;
        quiet(
            &env,
            &["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"],
        );
        let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "r").await;
        assert_eq!(outcomes(&r), vec![row(want, "P-1", "")], "{empty_file:?}");
    }
}

#[tokio::test]
async fn p8_a_nightly_run_does_not_ask_for_files_of_days_after_its_as_of() {
    let env = job("", false);
    ledger(&env, &[]).await;
    psp(&env, "2026-11-10", "");
    let r = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "r").await;
    let missing: Vec<&String> = r
        .summary
        .warnings
        .iter()
        .filter(|w| w.contains("no file for"))
        .collect();
    // The 11th has not ended at the as-of: its file cannot exist yet. Earlier days of the
    // window (the carry-over) may be missing and say so.
    assert!(
        missing
            .iter()
            .all(|w| !w.contains("2026-11-1") || w.contains("2026-11-10")),
        "{missing:?}"
    );
    assert!(
        !missing
            .iter()
            .any(|w| w.contains("2026-11-11") || w.contains("2026-11-12"))
    );
}

// ---------------------------------------------------------------------------------------------
// Point 9: a completeness claim must be checkable.

#[tokio::test]
async fn p9_a_statement_cut_at_a_line_boundary_or_header_only_proves_nothing() {
    for (what, body) in [
        (
            "cut after its first line",
            format!("T-1,P-1,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
        ),
        ("header only", String::new()),
    ] {
        let env = TestEnv::new();
        env.import(
            &format!(
                "P-1,{IBAN},25.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
                 P-2,{OTHER},30.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n"
            ),
            "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
             A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n",
        )
        .await;
        // The provider's control file describes the whole statement (two lines) …
        env.statement(&format!(
            "T-1,P-1,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             T-2,P-2,{OTHER},30.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n"
        ));
        // … but the file arrived cut.
        env.write(
            "statement.csv",
            &format!("{}\n{body}", crate::support::STATEMENT_HEADER),
        );
        let r = env
            .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r")
            .await;
        let rows = outcomes(&r);
        assert!(
            !rows.iter().any(|r| r.0 == "RESOLVED_FAILED"),
            "{what}: a paid payment moved to FAILED: {rows:?}"
        );
        assert!(
            rows.contains(&row("AWAITING_EVIDENCE", "P-2", "")),
            "{what}: {rows:?}"
        );
        assert!(
            r.summary
                .warnings
                .iter()
                .any(|w| w.contains("control file")),
            "{what}: {:?}",
            r.summary.warnings
        );
    }
}

#[tokio::test]
async fn p9_last_line_coverage_ends_at_the_last_booked_line() {
    let env = TestEnv::new();
    let cfg = std::fs::read_to_string(&env.config_path).expect("cfg");
    env.write(
        "recon.toml",
        &cfg.replace(
            "completeness = \"control_file\"",
            "completeness = \"last_line\"",
        ),
    );
    env.import(
        &format!(
            "P-1,{IBAN},25.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{OTHER},30.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T10:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    // A file in booking order whose last line is on the 12th: P-1's window (to the 13th
    // 09:00) is not covered, so P-1 waits; a file covering past it lets P-1 fail.
    env.write(
        "statement.csv",
        &format!(
            "{}\nT-2,P-2,{OTHER},30.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n\
             T-3,,{OTHER},1.00,EUR,2026-11-12T18:00:00Z,FEE\n",
            crate::support::STATEMENT_HEADER
        ),
    );
    let cfg = std::fs::read_to_string(&env.config_path).expect("cfg");
    let kinds = "[source.kinds]\nPAYMENT = \"PAYMENT\"\nREFUND = \"REFUND\"\nFEE = \"FEE\"\n";
    env.write("recon.toml", &format!("{cfg}\n{kinds}"));
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "r")
        .await;
    assert!(
        outcomes(&r).contains(&row("AWAITING_EVIDENCE", "P-1", "")),
        "{:?}",
        outcomes(&r)
    );
    env.write(
        "statement.csv",
        &format!(
            "{}\nT-2,P-2,{OTHER},30.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n\
             T-3,,{OTHER},1.00,EUR,2026-11-14T18:00:00Z,FEE\n",
            crate::support::STATEMENT_HEADER
        ),
    );
    let r = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", false, "s")
        .await;
    assert!(
        outcomes(&r).contains(&row("RESOLVED_FAILED", "P-1", "")),
        "{:?}",
        outcomes(&r)
    );
}

// ---------------------------------------------------------------------------------------------
// Point 10: re-runs are byte-identical, including after a commit.

#[tokio::test]
async fn p10_a_fuzzy_resolution_keeps_its_rule_after_recon_recorded_the_provider_id() {
    let env = job("", false);
    ledger(
        &env,
        &[pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    // No reference: only recipient + amount + window find the line.
    psp(
        &env,
        "2026-11-10",
        &format!("T-1,,{IBAN},25.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    let first = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "a").await;
    let again = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "b").await;
    let rule = crate::support::read_columns(&first.out_dir.join("results.csv"), &["rule"]);
    assert_eq!(rule, vec![vec!["recipient_amount_window"]]);
    assert_eq!(
        env.texts("SELECT provider_payment_id FROM payments").await,
        ["T-1"],
        "recon recorded the provider id"
    );
    assert_eq!(
        std::fs::read(first.out_dir.join("results.csv")).expect("a"),
        std::fs::read(again.out_dir.join("results.csv")).expect("b"),
    );
    assert_eq!(again.summary.transitions.already_applied, 1);
}

// ---------------------------------------------------------------------------------------------
// Issue 18: the near-miss gate looks at the right look-alikes.

#[tokio::test]
async fn i18_lines_proven_to_be_another_payments_are_not_look_alikes() {
    let env = job("", false);
    ledger(
        &env,
        &[
            // Twins: same recipient and amount, minutes apart; T-1 paid by reference, T-2 lost.
            pay("T-1", IBAN, "50.00", "UNKNOWN", "2026-11-10T09:00:00Z"),
            pay("T-2", IBAN, "50.00", "UNKNOWN", "2026-11-10T09:04:00Z"),
            // The same recipient is paid another amount the same day (by reference); P-3 lost.
            pay("P-2", IBAN, "80.00", "SUCCEEDED", "2026-11-10T11:00:00Z"),
            pay("P-3", IBAN, "20.00", "UNKNOWN", "2026-11-10T12:00:00Z"),
        ],
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!(
            "L-1,T-1,{IBAN},50.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             L-2,P-2,{IBAN},80.00,EUR,2026-11-10T11:30:00Z,PAYMENT\n"
        ),
    );
    quiet(&env, &["2026-11-11", "2026-11-12", "2026-11-13"]);
    let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "r").await;
    assert_eq!(
        outcomes(&r),
        vec![
            row("MATCHED", "P-2", "L-2"),
            row("RESOLVED_FAILED", "P-3", ""),
            row("RESOLVED_SUCCEEDED", "T-1", "L-1"),
            row("RESOLVED_FAILED", "T-2", ""),
        ]
    );
}

#[tokio::test]
async fn i18_a_look_alike_in_another_currency_blocks_resolved_failed() {
    let env = job("", false);
    ledger(
        &env,
        &[pay("P-1", IBAN, "30.00", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!("L-1,,{IBAN},30.00,USD,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    quiet(&env, &["2026-11-11", "2026-11-12", "2026-11-13"]);
    let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "r").await;
    assert_eq!(
        outcomes(&r),
        vec![row("AMBIGUOUS", "P-1", "L-1"), row("AMBIGUOUS", "", "L-1")],
        "a provider that booked our payment in another currency: a retry would pay twice"
    );
}

// ---------------------------------------------------------------------------------------------
// Elimination never rests on a later named payout (simulator seeds 15 and 16).

#[tokio::test]
async fn p1_a_later_payout_naming_one_twin_never_settles_an_earlier_unnamed_one() {
    for split_nights in [false, true] {
        let env = job("", false);
        ledger(
            &env,
            &[
                // Twins: same recipient and amount, minutes apart. A was lost; B was paid twice,
                // first without a reference, then naming B.
                pay("A", IBAN, "20.00", "UNKNOWN", "2026-11-10T09:00:00Z"),
                pay("B", IBAN, "20.00", "SUCCEEDED", "2026-11-10T09:06:00Z"),
            ],
        )
        .await;
        let unnamed = format!("L-1,,{IBAN},20.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n");
        let named = format!("L-2,B,{IBAN},20.00,EUR,2026-11-11T10:00:00Z,PAYMENT\n");
        quiet(&env, &["2026-11-12", "2026-11-13"]);
        if split_nights {
            psp(&env, "2026-11-10", &unnamed);
            let n1 = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "n1").await;
            assert!(has(&n1, "AMBIGUOUS", "A"), "{:?}", outcomes(&n1));
            psp(&env, "2026-11-11", &named);
            night(&env, "2026-11-11", "2026-11-12T02:00:00Z", "n2").await;
        } else {
            psp(&env, "2026-11-10", &unnamed);
            psp(&env, "2026-11-11", &named);
        }
        // Whatever night each line arrived, L-1 could be A's or B's first payout: no
        // elimination, on any later night either.
        let last = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "late").await;
        let rows = outcomes(&last);
        assert!(
            !rows
                .iter()
                .any(|r| r.1 == "A" && r.0 == "RESOLVED_SUCCEEDED"),
            "split {split_nights}: {rows:?}"
        );
        assert_eq!(status(&env, "A").await, "UNKNOWN", "split {split_nights}");
        assert!(
            has(&last, "AMBIGUOUS", "A"),
            "split {split_nights}: {rows:?}"
        );
        assert!(
            has(&last, "AMBIGUOUS", "B"),
            "split {split_nights}: {rows:?}"
        );
    }
}

#[tokio::test]
async fn p1_an_unnamed_payout_and_a_later_named_one_for_the_same_payment_are_a_duplicate() {
    let env = job("", false);
    ledger(
        &env,
        &[pay(
            "P-1",
            IBAN,
            "20.00",
            "SUCCEEDED",
            "2026-11-10T09:00:00Z",
        )],
    )
    .await;
    psp(
        &env,
        "2026-11-10",
        &format!(
            "L-1,,{IBAN},20.00,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
             L-2,P-1,{IBAN},20.00,EUR,2026-11-10T15:00:00Z,PAYMENT\n"
        ),
    );
    let r = night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "r").await;
    assert_eq!(
        outcomes(&r),
        vec![row("DUPLICATE_AT_PROVIDER", "P-1", "L-1;L-2")],
        "the same answer as when the two payouts arrive on different nights"
    );
}

#[tokio::test]
async fn p1_a_named_payout_in_a_late_file_does_not_hide_the_unnamed_one_matched_before() {
    // Simulator seeds 14, 24, 39: the payout naming P-1 is booked first but its file arrives
    // late; the unnamed second payout arrived first and matched P-1 on its own.
    let env = job("", false);
    ledger(
        &env,
        &[pay(
            "P-1",
            IBAN,
            "20.00",
            "SUCCEEDED",
            "2026-11-10T09:00:00Z",
        )],
    )
    .await;
    psp(&env, "2026-11-11", "");
    psp(
        &env,
        "2026-11-12",
        &format!("L-2,,{IBAN},20.00,EUR,2026-11-12T10:00:00Z,PAYMENT\n"),
    );
    night(&env, "2026-11-10", "2026-11-11T02:00:00Z", "n10").await;
    night(&env, "2026-11-11", "2026-11-12T02:00:00Z", "n11").await;
    let n12 = night(&env, "2026-11-12", "2026-11-13T02:00:00Z", "n12").await;
    assert_eq!(outcomes(&n12), vec![row("MATCHED", "P-1", "L-2")]);
    // The file of the 10th arrives: P-1 was paid that day, naming it.
    psp(
        &env,
        "2026-11-10",
        &format!("L-1,P-1,{IBAN},20.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n"),
    );
    psp(&env, "2026-11-13", "");
    let n13 = night(&env, "2026-11-13", "2026-11-14T02:00:00Z", "n13").await;
    assert_eq!(
        outcomes(&n13),
        vec![row("DUPLICATE_AT_PROVIDER", "P-1", "L-1;L-2")]
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 15.2: a statement line without a recipient (a bank fee, a BAI2 entry).

#[tokio::test]
async fn i15_a_line_without_a_recipient_is_read_takes_no_recipient_match_and_blocks_resolved_failed()
 {
    let env = job("", true);
    ledger(
        &env,
        &[
            // Lost at the provider; the bank shows a debit of its amount without a counterparty.
            pay("P-1", IBAN, "25.00", "UNKNOWN", "2026-11-10T09:00:00Z"),
            // Lost; nothing of its amount anywhere.
            pay("P-2", OTHER, "40.00", "UNKNOWN", "2026-11-10T15:00:00Z"),
        ],
    )
    .await;
    for d in ["2026-11-10", "2026-11-11", "2026-11-12", "2026-11-13"] {
        psp(&env, d, "");
        bank(&env, d, "");
    }
    // A fee without counterparty (was: the whole file rejected for "empty recipient"), and a
    // debit of P-1's amount without counterparty or reference.
    bank(
        &env,
        "2026-11-10",
        "account fee,,-3.50,EUR,2026-11-10,DEBIT\n\
         ,,-25.00,EUR,2026-11-10,DEBIT\n",
    );
    let r = night(&env, "2026-11-10", "2026-11-15T02:00:00Z", "r").await;
    assert_eq!(r.summary.rejected_lines, 0, "{:?}", r.summary.warnings);
    let rows = crate::support::read_columns(
        &r.out_dir.join("results.csv"),
        &["outcome", "payment_id", "source_lines"],
    );
    // P-1 may have been paid (the debit could be its money): a human decides, never
    // RESOLVED_FAILED. P-2 has no look-alike anywhere: failed. Neither line is matched by
    // recipient to anything.
    assert_eq!(
        rows,
        vec![
            vec!["AMBIGUOUS", "P-1", "bank:bank-2026-11-10.csv:3"],
            vec!["RESOLVED_FAILED", "P-2", ""],
            vec!["ORPHAN_AT_PROVIDER", "", "bank:bank-2026-11-10.csv:2"],
            vec!["AMBIGUOUS", "", "bank:bank-2026-11-10.csv:3"],
        ]
    );
    assert_eq!(status(&env, "P-1").await, "UNKNOWN");
    assert_eq!(status(&env, "P-2").await, "FAILED");
    // The reviewer's ticket says why the line counts.
    let evidence = env
        .texts("SELECT evidence FROM review_tickets WHERE payment_id = 'P-1'")
        .await;
    assert_eq!(evidence.len(), 1, "{evidence:?}");
    assert!(
        evidence[0].contains("the line names no recipient (it may be this payment's)")
            && evidence[0].contains("amount 25.00 equal")
            && evidence[0].contains("it may be this payment's money"),
        "{}",
        evidence[0]
    );
}
