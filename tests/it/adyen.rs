//! Three-way matching of an Adyen settlement detail report (provider), a synthetic ledger and
//! a bank statement: the scenarios shared by the default suite (`tests/it/threeway.rs`, the own
//! report `tests/formats/input/provider-csv/recon_adyen_settlement_batch_7.csv`) and the
//! real-file target
//! (`tests/real/threeway.rs`, the public report of batch 380 from `RECON_REAL_DATA`). Each
//! compares its rows with reviewed expected rows in `tests/threeway/<case>/`.

use crate::support::{Settings, TestEnv, outcomes, read_columns};
use std::path::{Path, PathBuf};

/// The settlement rule of the scenarios: a provider batch against the bank's payout credit.
pub const ADYEN_RULES: &str = r#"
[[settlement]]
id = "adyen_payouts"
provider = "adyen"
bank = "bank"
group_by = "batch"
amount_tolerance_minor = 0
window_before = "24h"
window_after = "120h"
"#;

/// One settlement report and the ledger beside it.
pub struct Batch {
    /// The report (Adyen's settlement detail report layout).
    pub file: PathBuf,
    /// Payment rows (import layout, no header): some of the report's Settled rows.
    pub ledger: &'static str,
    /// Their attempt rows (no header).
    pub attempts: &'static str,
    /// The id of the bank's payout credit.
    pub bank_id: &'static str,
    /// Its purpose text.
    pub bank_purpose: &'static str,
    /// The `tests/threeway/` folders of the expected rows: settled, mismatch, missing at bank.
    pub cases: [&'static str; 3],
}

/// The reviewed expected rows' folder.
pub fn expected_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/threeway")
}

/// The reviewed expected rows; `RECON_UPDATE_SNAPSHOTS=1` rewrites them from `actual` (review
/// the diff by eye).
pub fn check(actual: &[Vec<String>], name: &str, file: &str, columns: &[&str]) {
    let path = expected_dir().join(name).join(file);
    if std::env::var_os("RECON_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(expected_dir().join(name)).expect("expected folder");
        let mut w = csv::Writer::from_path(&path).expect("write expected");
        w.write_record(columns).expect("header");
        for r in actual {
            w.write_record(r).expect("row");
        }
        w.flush().expect("flush");
    }
    assert_eq!(actual, read_columns(&path, columns), "{}", path.display());
}

/// The columns of results.csv the scenarios compare.
pub const RESULT_COLUMNS: [&str; 7] = [
    "outcome",
    "payment_id",
    "provider_txn_id",
    "rule",
    "action",
    "line_amount",
    "detail",
];
/// The columns of settlement.csv.
pub const SETTLEMENT_COLUMNS: [&str; 12] = [
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

/// A job in Europe/Amsterdam with the report as source `adyen`, a bank source whose one
/// credit of `bank_amount` USD is booked on 2021-01-07, and the batch's ledger imported.
pub async fn adyen_env(batch: &Batch, bank_amount: &str) -> TestEnv {
    let file = &batch.file;
    assert!(file.exists(), "{} does not exist", file.display());
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
        &format!(
            "id,purpose,amount,currency,booked_at\n{},{},{bank_amount},USD,2021-01-07T10:00:00+01:00\n",
            batch.bank_id, batch.bank_purpose
        ),
    );
    env.import(batch.ledger, batch.attempts).await;
    env
}

/// Results rows without a payment (the three-way rows) and settlement.csv of a run on
/// 2021-01-07, the day the payout and the bank credit are booked.
pub async fn payout_day(env: &TestEnv, id: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let report = env
        .run("2021-01-07", "2021-01-20T00:00:00Z", false, id)
        .await;
    let rows = read_columns(&report.out_dir.join("results.csv"), &RESULT_COLUMNS);
    let settlement = read_columns(&report.out_dir.join("settlement.csv"), &SETTLEMENT_COLUMNS);
    // Payment rows of the carried-over days are not what this view is about.
    let rows = rows.into_iter().filter(|r| r[1].is_empty()).collect();
    (rows, settlement)
}

/// The day of the Settled rows: (outcome, count) of every outcome with rows, sorted.
pub async fn settled_day_counts(env: &TestEnv) -> Vec<(String, usize)> {
    let day5 = env
        .run("2021-01-05", "2021-01-20T00:00:00Z", false, "d5")
        .await;
    let mut counts = std::collections::BTreeMap::new();
    for r in outcomes(&day5) {
        *counts.entry(r.0).or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

/// On the payout day of a job whose bank credits the batch's net ([`adyen_env`]): SETTLED.
pub async fn batch_settles_three_way(env: &TestEnv, batch: &Batch) {
    let (rows, settlement) = payout_day(env, "d7").await;
    check(&rows, batch.cases[0], "expected.csv", &RESULT_COLUMNS);
    check(
        &settlement,
        batch.cases[0],
        "settlement.csv",
        &SETTLEMENT_COLUMNS,
    );
}

/// The bank credits another amount: a SETTLEMENT_MISMATCH ticket, raised once.
pub async fn batch_off_by_an_amount_is_a_ticket(batch: &Batch, bank_amount: &str) {
    let env = adyen_env(batch, bank_amount).await;
    let (rows, settlement) = payout_day(&env, "d7").await;
    check(&rows, batch.cases[1], "expected.csv", &RESULT_COLUMNS);
    check(
        &settlement,
        batch.cases[1],
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

/// The bank statement of the payout's window, declared complete, has no credit for the batch:
/// once the window (120 h after the batch's last line, 2021-01-07 00:46:38 CET) and the
/// settlement lag (24 h) have passed, the payout is missing at the bank — a ticket, reported on
/// the day of that deadline (2021-01-13 in Amsterdam). Without the completeness declaration,
/// absence proves nothing.
pub async fn payout_that_never_reaches_a_complete_bank_statement_is_a_ticket(batch: &Batch) {
    let env = adyen_env(batch, "0").await;
    env.write("bank.csv", "id,purpose,amount,currency,booked_at\n");
    let cfg = std::fs::read_to_string(env.path("recon.toml")).expect("config");
    let complete = cfg.replace(
        "path = \"bank.csv\"",
        "path = \"bank.csv\"\ncomplete_from = \"2021-01-01\"\ncomplete_to = \"2021-01-31\"\ncompleteness = \"control_file\"",
    );
    // The bank delivered the (empty) statement with its control file: no activity, proven.
    env.control("bank.csv");
    let missing = |report: &recon::run::RunReport| {
        outcomes(report)
            .iter()
            .any(|r| r.0 == "PAYOUT_MISSING_AT_BANK")
    };
    // Not complete: the batch waits, whatever the day.
    let open = env
        .run("2021-01-13", "2021-01-20T00:00:00Z", false, "open")
        .await;
    assert!(
        !missing(&open),
        "an incomplete bank statement proves nothing"
    );
    env.write("recon.toml", &complete);
    // Complete, but the deadline (2021-01-12T23:46:38Z) has not passed at this as-of.
    let early = env
        .run("2021-01-13", "2021-01-12T12:00:00Z", true, "early")
        .await;
    assert!(!missing(&early));
    let report = env
        .run("2021-01-13", "2021-01-20T00:00:00Z", false, "d13")
        .await;
    let rows: Vec<Vec<String>> = read_columns(&report.out_dir.join("results.csv"), &RESULT_COLUMNS)
        .into_iter()
        .filter(|r| r[1].is_empty())
        .collect();
    let settlement = read_columns(&report.out_dir.join("settlement.csv"), &SETTLEMENT_COLUMNS);
    check(&rows, batch.cases[2], "expected.csv", &RESULT_COLUMNS);
    check(
        &settlement,
        batch.cases[2],
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
    assert!(!missing(&day12));
}
