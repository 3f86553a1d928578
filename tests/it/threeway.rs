//! Completeness gates, bank sources in matching and three-way matching (issue 4 points 4
//! and 6). The three-way scenario reads the real Adyen settlement file of batch 380 from the
//! shared folder (AGPL: referenced, not copied) with a synthetic ledger and bank statement.

use crate::support::{Settings, TestEnv, outcomes, read_columns};
use std::path::{Path, PathBuf};

/// The shared real-data folder (see tests/it/formats.rs).
fn shared() -> PathBuf {
    if let Some(dir) = std::env::var_os("RECON_SHARED_DATA") {
        return PathBuf::from(dir);
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/real-data");
    if beside.exists() {
        return beside;
    }
    PathBuf::from("/work/shared/real-data")
}

fn expected_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/threeway")
}

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

const ADYEN_RULES: &str = r#"
[[settlement]]
id = "adyen_payouts"
provider = "adyen"
bank = "bank"
group_by = "batch"
amount_tolerance_minor = 0
window_before = "24h"
window_after = "120h"
"#;

/// Three payments of the synthetic ledger are Settled rows of batch 380 (merchant reference =
/// payment id, amount = the row's net credit, recipient = the merchant account the file names).
const ADYEN_LEDGER: &str = "\
CM1000028854,YOURCOMPANY_ACCOUNT,31.15,USD,SUCCEEDED,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-1,
CM2000162856,YOURCOMPANY_ACCOUNT,21.74,USD,UNKNOWN,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-2,
";

async fn adyen_env(bank_amount: &str) -> TestEnv {
    let file = shared().join("provider-csv/adyen/oca_settlement_detail_report_batch_380.csv");
    assert!(file.exists(), "{} (see SOURCES.md)", file.display());
    let env = TestEnv::with(Settings {
        timezone: "Europe/Amsterdam".into(),
        complete: None,
        rules: Some(format!("{}{ADYEN_RULES}", recon::rules::DEFAULT_RULES)),
        ..Settings::default()
    });
    let cfg = format!(
        r#"timezone = "Europe/Amsterdam"
database_url = "sqlite://recon.db"
output_dir = "out"
rules_dir = "rules"

[[source]]
name = "adyen"
path = "{file}"
timestamp_format = "%Y-%m-%d %H:%M:%S"
timezone = "CET"
[source.columns]
booked_at = "Creation Date"
debit = "Net Debit (NC)"
credit = "Net Credit (NC)"
currency = "Net Currency"
provider_txn_id = "Modification Reference"
reference = "Merchant Reference"
recipient = "Merchant Account"
kind = "Type"
batch = "Batch Number"
[source.kinds]
Settled = "PAYMENT"
Refunded = "REFUND"
Fee = "FEE"
MerchantPayout = "PAYOUT"

[[source]]
name = "bank"
role = "bank"
path = "bank.csv"
timestamp_format = "rfc3339"
[source.columns]
provider_txn_id = "id"
reference = "purpose"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
"#,
        file = file.display()
    );
    env.write("recon.toml", &cfg);
    env.write(
        "bank.csv",
        &format!("id,purpose,amount,currency,booked_at\nBNK-380,TX635094301XT batch 380,{bank_amount},USD,2021-01-07T10:00:00+01:00\n"),
    );
    env.import(ADYEN_LEDGER, "A-1,CM1000028854,2021-01-04T23:00:00Z,2021-01-04T23:00:01Z,SUCCEEDED,,\nA-2,CM2000162856,2021-01-04T23:00:00Z,,UNKNOWN,,timeout\n")
        .await;
    env
}

/// Results rows without a payment (the three-way rows) and settlement.csv of a run on
/// 2021-01-07, the day the payout and the bank credit are booked.
async fn payout_day(env: &TestEnv, id: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let report = env
        .run("2021-01-07", "2021-01-20T00:00:00Z", false, id)
        .await;
    let rows = read_columns(&report.out_dir.join("results.csv"), &RESULT_COLUMNS);
    let settlement = read_columns(&report.out_dir.join("settlement.csv"), &SETTLEMENT_COLUMNS);
    // Payment rows of the carried-over days are not what this view is about.
    let rows = rows.into_iter().filter(|r| r[1].is_empty()).collect();
    (rows, settlement)
}

/// The reviewed expected rows; `RECON_UPDATE_SNAPSHOTS=1` rewrites them from `actual` (review
/// the diff by eye).
fn check(actual: &[Vec<String>], name: &str, file: &str, columns: &[&str]) {
    let path = expected_dir().join(name).join(file);
    if std::env::var_os("RECON_UPDATE_SNAPSHOTS").is_some() {
        let mut w = csv::Writer::from_path(&path).expect("write expected");
        w.write_record(columns).expect("header");
        for r in actual {
            w.write_record(r).expect("row");
        }
        w.flush().expect("flush");
    }
    assert_eq!(actual, read_columns(&path, columns), "{}", path.display());
}

const RESULT_COLUMNS: [&str; 7] = [
    "outcome",
    "payment_id",
    "provider_txn_id",
    "rule",
    "action",
    "line_amount",
    "detail",
];
const SETTLEMENT_COLUMNS: [&str; 12] = [
    "rule",
    "provider",
    "batch",
    "currency",
    "items",
    "ledger_matched",
    "provider_net",
    "provider_payout",
    "bank_line",
    "bank_amount",
    "difference",
    "status",
];

#[tokio::test]
async fn adyen_batch_settles_three_way() {
    let env = adyen_env("55308.07").await;
    // The day of the Settled rows: the ledger side.
    let day5 = env
        .run("2021-01-05", "2021-01-20T00:00:00Z", false, "d5")
        .await;
    let rows = outcomes(&day5);
    let count = |o: &str| rows.iter().filter(|r| r.0 == o).count();
    assert_eq!(count("MATCHED"), 1, "{rows:?}");
    assert_eq!(count("RESOLVED_SUCCEEDED"), 1);
    assert_eq!(
        count("ORPHAN_AT_PROVIDER"),
        218,
        "the Settled rows no payment claims"
    );
    assert_eq!(count("REFUND"), 6);
    let (rows, settlement) = payout_day(&env, "d7").await;
    check(&rows, "adyen_settled", "expected.csv", &RESULT_COLUMNS);
    check(
        &settlement,
        "adyen_settled",
        "settlement.csv",
        &SETTLEMENT_COLUMNS,
    );
}

#[tokio::test]
async fn adyen_batch_off_by_an_amount_is_a_ticket() {
    let env = adyen_env("55300.00").await;
    let (rows, settlement) = payout_day(&env, "d7").await;
    check(&rows, "adyen_mismatch", "expected.csv", &RESULT_COLUMNS);
    check(
        &settlement,
        "adyen_mismatch",
        "settlement.csv",
        &SETTLEMENT_COLUMNS,
    );
    let open = env
        .texts("SELECT kind FROM review_tickets WHERE status = 'OPEN' ORDER BY kind")
        .await;
    assert!(open.iter().any(|o| o == "SETTLEMENT_MISMATCH"), "{open:?}");
    // A re-run reproduces the three-way rows and raises no ticket twice.
    let again = env
        .run("2021-01-07", "2021-01-20T00:00:00Z", false, "d7-again")
        .await;
    assert_eq!(again.summary.tickets.created, 0);
    for f in ["results.csv", "settlement.csv"] {
        assert_eq!(
            std::fs::read(env.path("out/d7").join(f)).expect("first"),
            std::fs::read(again.out_dir.join(f)).expect("second"),
            "{f}"
        );
    }
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

/// The bank statement of the payout's window, declared complete, has no credit for batch 380:
/// once the window (120 h after the batch's last line) and the settlement lag (24 h) have
/// passed, the payout is missing at the bank — a ticket, reported on the day of that deadline
/// (2021-01-13 in Amsterdam). Without the completeness declaration, absence proves nothing.
#[tokio::test]
async fn a_payout_that_never_reaches_a_complete_bank_statement_is_a_ticket() {
    let env = adyen_env("0").await;
    env.write("bank.csv", "id,purpose,amount,currency,booked_at\n");
    let cfg = std::fs::read_to_string(env.path("recon.toml")).expect("config");
    let complete = cfg.replace(
        "path = \"bank.csv\"",
        "path = \"bank.csv\"\ncomplete_from = \"2021-01-01\"\ncomplete_to = \"2021-01-31\"\ncompleteness = \"control_file\"",
    );
    // The bank delivered the (empty) statement with its control file: no activity, proven.
    env.control("bank.csv");
    // Not complete: the batch waits, whatever the day.
    let open = env
        .run("2021-01-13", "2021-01-20T00:00:00Z", false, "open")
        .await;
    assert!(
        !crate::support::outcomes(&open)
            .iter()
            .any(|r| r.0 == "PAYOUT_MISSING_AT_BANK"),
        "an incomplete bank statement proves nothing"
    );
    env.write("recon.toml", &complete);
    // Complete, but the deadline (2021-01-12T23:46:38Z) has not passed at this as-of.
    let early = env
        .run("2021-01-13", "2021-01-12T12:00:00Z", true, "early")
        .await;
    assert!(
        !crate::support::outcomes(&early)
            .iter()
            .any(|r| r.0 == "PAYOUT_MISSING_AT_BANK")
    );
    let report = env
        .run("2021-01-13", "2021-01-20T00:00:00Z", false, "d13")
        .await;
    let rows: Vec<Vec<String>> = read_columns(&report.out_dir.join("results.csv"), &RESULT_COLUMNS)
        .into_iter()
        .filter(|r| r[1].is_empty())
        .collect();
    let settlement = read_columns(&report.out_dir.join("settlement.csv"), &SETTLEMENT_COLUMNS);
    check(
        &rows,
        "adyen_missing_at_bank",
        "expected.csv",
        &RESULT_COLUMNS,
    );
    check(
        &settlement,
        "adyen_missing_at_bank",
        "settlement.csv",
        &SETTLEMENT_COLUMNS,
    );
    let open = env
        .texts("SELECT kind FROM review_tickets WHERE status = 'OPEN' ORDER BY kind")
        .await;
    assert!(
        open.iter().any(|o| o == "PAYOUT_MISSING_AT_BANK"),
        "{open:?}"
    );
    // The day before the deadline does not report it.
    let day12 = env
        .run("2021-01-12", "2021-01-20T00:00:00Z", true, "d12")
        .await;
    assert!(
        !crate::support::outcomes(&day12)
            .iter()
            .any(|r| r.0 == "PAYOUT_MISSING_AT_BANK")
    );
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
