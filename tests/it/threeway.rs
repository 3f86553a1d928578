//! Completeness gates, bank sources in matching and three-way matching (issue 4 points 4
//! and 6). The three-way scenarios (`tests/it/adyen.rs`) read an own Adyen settlement detail
//! report, `tests/formats/input/provider-csv/recon_adyen_settlement_batch_7.csv` (written for
//! recon in the layout of Adyen's real report), with a synthetic ledger and bank statement; the
//! real report of batch 380 is read by `tests/real/threeway.rs`.

use crate::adyen::{ADYEN_RULES, Batch, RESULT_COLUMNS, check};
use crate::support::{Settings, TestEnv, outcomes, read_columns};

/// An MT940 statement for November 2026 with one credit of 100.00; `closing` decides whether
/// the balances chain (1100,00) or not.
fn mt940(closing: &str) -> String {
    format!(
        ":20:STMT-NOV\r\n:25:NL16SNSB1234567809\r\n:28C:1/1\r\n:60F:C261101EUR1000,00\r\n:61:2611051105C100,00NTRFNONREF\r\n:86:incoming transfer\r\n:62F:C261130EUR{closing}\r\n-\r\n"
    )
}

/// A job with a second source, `bank` (its `[[source]]` keys after `name` and `role`), whose
/// file is `file` = (name, content), and the one UNKNOWN payment PAY-1 of 2026-11-10 (55.00 EUR).
async fn bank_env(source_keys: &str, file: (&str, &str)) -> TestEnv {
    let env = TestEnv::new();
    let mut cfg = std::fs::read_to_string(&env.config_path).expect("config");
    cfg.push_str(&format!(
        "\n[[source]]\nname = \"bank\"\nrole = \"bank\"\n{source_keys}"
    ));
    env.write("recon.toml", &cfg);
    env.write(file.0, file.1);
    env.import(
        "PAY-1,DE89 3704 0044 0532 0130 00,55.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n",
        "A-1,PAY-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env
}

/// MT940 source keys, complete for November 2026.
const MT940_BANK: &str = "format = \"mt940\"\npath = \"bank.sta\"\ncomplete_from = \"2026-11-01\"\ncomplete_to = \"2026-11-30\"\n";

async fn gate_run(closing: &str) -> (recon::run::RunReport, TestEnv) {
    let env = bank_env(MT940_BANK, ("bank.sta", &mt940(closing))).await;
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", true, "gate")
        .await;
    // The folder lives as long as the env; keep what the assertions need.
    let summary = std::fs::read_to_string(report.out_dir.join("summary.json")).expect("summary");
    assert!(summary.contains("\"gates\""), "{summary}");
    (report, env)
}

#[tokio::test]
async fn a_balance_that_does_not_chain_blocks_resolved_failed() {
    let (report, _env) = gate_run("1200,00").await;
    let rows = outcomes(&report);
    assert_eq!(
        rows[0].0, "AWAITING_EVIDENCE",
        "a failed gate must keep the payment open: {rows:?}"
    );
    let gate = gate(&report, "balance_chain");
    assert!(!gate.ok);
    assert_eq!(gate.period, "2026-11-01..2026-11-30");
    assert!(gate.detail.contains("difference 100.00"), "{}", gate.detail);
    assert!(
        report
            .summary
            .warnings
            .iter()
            .any(|w| w.contains("balance_chain gate failed")),
        "{:?}",
        report.summary.warnings
    );
}

#[tokio::test]
async fn a_balance_that_chains_lets_the_payment_resolve_failed() {
    let (report, _env) = gate_run("1100,00").await;
    let rows = outcomes(&report);
    assert_eq!(rows[0].0, "RESOLVED_FAILED", "{rows:?}");
    let gate = gate(&report, "balance_chain");
    assert!(gate.ok, "{gate:?}");
}

#[tokio::test]
async fn a_missing_daily_file_is_a_failed_gate() {
    let env = TestEnv::new();
    let mut cfg = std::fs::read_to_string(&env.config_path).expect("config");
    cfg.push_str("\n[[source]]\nname = \"bank\"\nrole = \"bank\"\nformat = \"mt940\"\npath = \"bank-{date}.sta\"\n");
    env.write("recon.toml", &cfg);
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", true, "daily")
        .await;
    let g = report
        .summary
        .gates
        .iter()
        .find(|g| g.check == "daily_file" && g.period == "2026-11-10..2026-11-10")
        .expect("daily gate");
    assert!(!g.ok);
}

/// A bank debit is our payment (negated amount); a bank credit of the same money to the same
/// account is not a candidate (else the payment would be AMBIGUOUS) and, with no settlement
/// rule, is an unmatched bank credit.
#[tokio::test]
async fn bank_debits_match_payments_and_credits_do_not() {
    let env = bank_env(
        r#"path = "bank.csv"
timestamp_format = "rfc3339"
[source.columns]
provider_txn_id = "id"
recipient = "counterparty"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
"#,
        (
            "bank.csv",
            "id,counterparty,amount,currency,booked_at\nB-1,DE89370400440532013000,-55.00,EUR,2026-11-10T12:00:00Z\nB-2,DE89370400440532013000,55.00,EUR,2026-11-10T13:00:00Z\n",
        ),
    )
    .await;
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", true, "bank")
        .await;
    let rows = read_columns(&report.out_dir.join("results.csv"), &RESULT_COLUMNS);
    // RESOLVED_SUCCEEDED by B-1 (-55.00), B-2 (55.00) an UNMATCHED_BANK_CREDIT ticket.
    check(
        &rows,
        "bank_debit_and_credit",
        "expected.csv",
        &RESULT_COLUMNS,
    );
}

#[test]
fn unknown_role_is_a_config_error_naming_the_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("recon.toml");
    let text = "timezone = \"UTC\"\ndatabase_url = \"sqlite://x.db\"\noutput_dir = \"out\"\n[[source]]\nname = \"b\"\nrole = \"banc\"\nformat = \"mt940\"\npath = \"b.sta\"\n";
    let err = recon::config::Config::parse(text, &path).expect_err("bad role");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("source[0].role") && msg.contains("recon.toml"),
        "{msg}"
    );
}

/// The own report: four Settled rows (two of them payments of the ledger below), a refund, a
/// fee and the payout of batch 7: net 31.15 + 21.74 + 26.20 + 95.93 - 19.95 - 1.10 = 153.97 USD.
fn batch_7() -> Batch {
    Batch {
        file: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/formats/input/provider-csv/recon_adyen_settlement_batch_7.csv"),
        ledger: "\
ORD-1001,SHOPCO_ACCOUNT,31.15,USD,SUCCEEDED,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-1,
ORD-1002,SHOPCO_ACCOUNT,21.74,USD,UNKNOWN,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-2,
",
        attempts: "A-1,ORD-1001,2021-01-04T23:00:00Z,2021-01-04T23:00:01Z,SUCCEEDED,,\nA-2,ORD-1002,2021-01-04T23:00:00Z,,UNKNOWN,,timeout\n",
        bank_id: "BNK-7",
        bank_purpose: "TX000000007XT batch 7",
        cases: [
            "own_adyen_settled",
            "own_adyen_mismatch",
            "own_adyen_missing_at_bank",
        ],
    }
}

#[tokio::test]
async fn adyen_batch_settles_three_way() {
    let batch = batch_7();
    // The day of the Settled rows: the ledger side.
    let env = crate::adyen::adyen_env(&batch, "153.97").await;
    let counts = crate::adyen::settled_day_counts(&env).await;
    let want = [
        ("MATCHED", 1),
        ("ORPHAN_AT_PROVIDER", 2), // ORD-1003 and ORD-1004: no payment of ours
        ("REFUND", 1),
        ("RESOLVED_SUCCEEDED", 1), // ORD-1002 was UNKNOWN
    ];
    assert_eq!(
        counts,
        want.map(|(o, n)| (o.to_string(), n)).to_vec(),
        "{counts:?}"
    );
    crate::adyen::batch_settles_three_way(&env, &batch).await;
}

#[tokio::test]
async fn adyen_batch_off_by_an_amount_is_a_ticket() {
    crate::adyen::batch_off_by_an_amount_is_a_ticket(&batch_7(), "150.00").await;
}

#[tokio::test]
async fn a_settlement_rule_over_a_source_without_a_batch_column_is_refused_before_reading() {
    let rules = format!(
        "{}{}",
        recon::rules::DEFAULT_RULES,
        ADYEN_RULES
            .replace("provider = \"adyen\"", "provider = \"psp\"")
            .replace("bank = \"bank\"", "bank = \"psp2\"")
    );
    let env = TestEnv::with(Settings {
        rules: Some(rules),
        ..Settings::default()
    });
    let err = env
        .try_run(
            "2026-11-10",
            "2026-11-10",
            "2026-11-20T00:00:00Z",
            true,
            "bad",
        )
        .await
        .expect_err("refused");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("adyen_payouts") && msg.contains("group_by") && msg.contains("batch column"),
        "{msg}"
    );
}

#[test]
fn settlement_keys_are_validated_strictly() {
    let bad = |text: &str| {
        let files = vec![(
            "rules.toml".to_string(),
            format!("{}{text}", recon::rules::DEFAULT_RULES),
        )];
        format!(
            "{:#}",
            recon::rules::RuleSet::compile(&files).expect_err("invalid")
        )
    };
    let msg = bad(&ADYEN_RULES.replace("group_by = \"batch\"", "group_by = \"reference\""));
    assert!(msg.contains("settlement[0].group_by"), "{msg}");
    // The value's line is quoted: the file, its line number, the line itself.
    let line = format!("{}{}", recon::rules::DEFAULT_RULES, ADYEN_RULES)
        .lines()
        .position(|l| l.starts_with("group_by"))
        .expect("group_by in the rules")
        + 1;
    assert!(
        msg.contains("rules.toml") && msg.contains(&format!("line {line},")),
        "{msg}"
    );
    assert!(msg.contains("group_by = \"reference\""), "{msg}");
    let msg = bad(&ADYEN_RULES.replace("window_after", "window_aftr"));
    assert!(msg.contains("window_aftr"), "{msg}");
    let msg = bad(&ADYEN_RULES.replace("= 0", "= -1"));
    assert!(msg.contains("amount_tolerance_minor"), "{msg}");
    assert!(msg.contains("TOML parse error at line"), "{msg}");
}

#[tokio::test]
async fn a_payout_that_never_reaches_a_complete_bank_statement_is_a_ticket() {
    crate::adyen::payout_that_never_reaches_a_complete_bank_statement_is_a_ticket(&batch_7()).await;
}

/// Two consecutive MT940 statements must hand over the balance: the second opens with what the
/// first closed with. If not, entries are missing between them, so neither period (nor the gap)
/// proves a payment absent. Each statement chains on its own here; only continuity fails.
async fn continuity_run(second_opening: &str) -> (recon::run::RunReport, TestEnv) {
    let statements = format!(
        ":20:STMT-1\r\n:25:NL16SNSB1234567809\r\n:28C:1/1\r\n:60F:C261101EUR1000,00\r\n\
             :61:2611051105C100,00NTRFNONREF\r\n:86:incoming transfer\r\n:62F:C261115EUR1100,00\r\n-\r\n\
             :20:STMT-2\r\n:25:NL16SNSB1234567809\r\n:28C:2/1\r\n:60F:C261116EUR{second_opening}\r\n\
             :61:2611201120C1,00NTRFNONREF\r\n:86:interest\r\n:62F:C261130EUR{}\r\n-\r\n",
        add_one(second_opening)
    );
    let env = bank_env(MT940_BANK, ("bank.sta", &statements)).await;
    let report = env
        .run("2026-11-10", "2026-11-20T00:00:00Z", true, "cont")
        .await;
    // Each statement chains by itself.
    assert!(
        report
            .summary
            .gates
            .iter()
            .filter(|g| g.check == "balance_chain")
            .all(|g| g.ok),
        "{:?}",
        report.summary.gates
    );
    (report, env)
}

/// The run's gate of `check` on source `bank`.
fn gate<'r>(report: &'r recon::run::RunReport, check: &str) -> &'r recon::sources::Gate {
    report
        .summary
        .gates
        .iter()
        .find(|g| g.source == "bank" && g.check == check)
        .unwrap_or_else(|| panic!("no {check} gate: {:?}", report.summary.gates))
}

/// `amount` (MT940 decimal comma) plus 1,00.
fn add_one(amount: &str) -> String {
    let cents: i64 = amount.replace(',', "").parse::<i64>().expect("amount") + 100;
    format!("{},{:02}", cents / 100, cents % 100)
}

#[tokio::test]
async fn statements_that_hand_over_the_balance_let_absence_prove_failure() {
    let (report, _env) = continuity_run("1100,00").await;
    let gate = gate(&report, "continuity");
    assert!(gate.ok, "{gate:?}");
    assert_eq!(gate.period, "2026-11-01..2026-11-30");
    assert_eq!(outcomes(&report)[0].0, "RESOLVED_FAILED");
}

#[tokio::test]
async fn a_balance_gap_between_statements_blocks_resolved_failed() {
    let (report, _env) = continuity_run("1200,00").await;
    let gate = gate(&report, "continuity");
    assert!(!gate.ok, "{gate:?}");
    assert!(
        gate.detail.contains("closes 1100.00 EUR") && gate.detail.contains("opens 1200.00 EUR"),
        "{}",
        gate.detail
    );
    assert!(gate.detail.contains("difference 100.00"), "{}", gate.detail);
    assert_eq!(
        outcomes(&report)[0].0,
        "AWAITING_EVIDENCE",
        "missing entries between the statements: absence proves nothing"
    );
    assert!(
        report
            .summary
            .warnings
            .iter()
            .any(|w| w.contains("continuity")),
        "{:?}",
        report.summary.warnings
    );
}
