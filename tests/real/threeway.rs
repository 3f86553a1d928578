//! Three-way matching with the public Adyen settlement detail report of batch 380 (220 Settled
//! rows, 6 refunds, a fee, the payout), a synthetic ledger of two of its payments and a bank
//! statement: the scenarios of `tests/it/adyen.rs`, with the reviewed expected rows in
//! `tests/threeway/adyen_*`.

use crate::adyen::{
    Batch, adyen_env, batch_off_by_an_amount_is_a_ticket, batch_settles_three_way,
    payout_that_never_reaches_a_complete_bank_statement_is_a_ticket, settled_day_counts,
};
use crate::real_data;

/// The report, relative to the corpus.
const ADYEN_380: &str = "provider-csv/adyen/oca_settlement_detail_report_batch_380.csv";

/// Two payments of the synthetic ledger are Settled rows of batch 380 (merchant reference =
/// payment id, amount = the row's net credit, recipient = the merchant account the file names).
fn batch_380() -> Batch {
    Batch {
        file: real_data().join(ADYEN_380),
        ledger: "\
CM1000028854,YOURCOMPANY_ACCOUNT,31.15,USD,SUCCEEDED,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-1,
CM2000162856,YOURCOMPANY_ACCOUNT,21.74,USD,UNKNOWN,2021-01-04T23:00:00Z,2021-01-04T23:00:00Z,A-2,
",
        attempts: "A-1,CM1000028854,2021-01-04T23:00:00Z,2021-01-04T23:00:01Z,SUCCEEDED,,\nA-2,CM2000162856,2021-01-04T23:00:00Z,,UNKNOWN,,timeout\n",
        bank_id: "BNK-380",
        bank_purpose: "TX635094301XT batch 380",
        cases: ["adyen_settled", "adyen_mismatch", "adyen_missing_at_bank"],
    }
}

#[tokio::test]
async fn adyen_batch_settles_three_way() {
    let batch = batch_380();
    let env = adyen_env(&batch, "55308.07").await;
    let counts = settled_day_counts(&env).await;
    let want = [
        ("MATCHED", 1),
        ("ORPHAN_AT_PROVIDER", 218), // the Settled rows no payment claims
        ("REFUND", 6),
        ("RESOLVED_SUCCEEDED", 1),
    ];
    assert_eq!(
        counts,
        want.map(|(o, n)| (o.to_string(), n)).to_vec(),
        "{counts:?}"
    );
    batch_settles_three_way(&env, &batch).await;
}

#[tokio::test]
async fn adyen_batch_off_by_an_amount_is_a_ticket() {
    batch_off_by_an_amount_is_a_ticket(&batch_380(), "55300.00").await;
}

#[tokio::test]
async fn a_payout_that_never_reaches_a_complete_bank_statement_is_a_ticket() {
    payout_that_never_reaches_a_complete_bank_statement_is_a_ticket(&batch_380()).await;
}
