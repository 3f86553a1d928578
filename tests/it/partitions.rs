//! A statement line that names a payment of another partition (issue 40 point 6, DESIGN.md
//! rule 12): it is that payment's evidence wherever it is booked. One process, a partitioned
//! SQLite job of two merchants (A and B), each with its own provider file: lines booked in A's
//! file that name B's payments by reference or provider id are B's payments' lines; a line that
//! names no payment but looks like one of B's (same recipient and money) stays behind the
//! partition wall. The sharded side of the same rule is `shards.rs`.

use crate::support::{PAYMENTS_HEADER, TestEnv, outcomes, psp_source, read_columns};

const DAY: &str = "2026-11-10";
const AS_OF: &str = "2026-11-20T00:00:00Z";

/// A partitioned job with sources `psp-A` (statement-A.csv) and `psp-B` (statement-B.csv).
fn partitioned_job(env: &TestEnv) {
    let complete = "complete_from = \"2026-11-01\"\ncomplete_to = \"2026-11-30\"\n";
    let source = |m: &str| {
        psp_source(
            &format!("statement-{m}.csv"),
            &format!("{complete}partition = \"{m}\"\n"),
        )
        .replacen("name = \"psp\"", &format!("name = \"psp-{m}\""), 1)
    };
    env.write(
        "recon.toml",
        &format!(
            "timezone = \"UTC\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\n\
             [partition]\ncolumn = \"merchant_id\"\n\n{}\n{}",
            source("A"),
            source("B")
        ),
    );
}

const ACC_A1: &str = "DE02100100109307118603";
const ACC_B1: &str = "DE02120300000000202051";
const ACC_B2: &str = "DE02500105170137075030";
const ACC_B3: &str = "DE02370502990000684712";
const ACC_B4: &str = "DE02300209000106531065";

/// The two merchants' ledger: A's one payment is paid in A's file; B's payments are the
/// subject.
async fn ledger(env: &TestEnv) {
    let payments = [
        // A's own payment, matched by its own line in A's file.
        format!(
            "PAY-A1,{ACC_A1},100.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,ATT-A1,pt-A1,A"
        ),
        // UNKNOWN; its only line is booked in A's file and names it by reference.
        format!(
            "PAY-B1,{ACC_B1},250.00,EUR,UNKNOWN,2026-11-10T10:00:00Z,2026-11-10T10:00:01Z,ATT-B1,,B"
        ),
        // SUCCEEDED with a recorded provider id; its only line is in A's file, naming it by that
        // provider id alone (no reference).
        format!(
            "PAY-B2,{ACC_B2},75.00,EUR,SUCCEEDED,2026-11-10T11:00:00Z,2026-11-10T11:00:01Z,ATT-B2,pt-B2,B"
        ),
        // SUCCEEDED, paid by its own line in B's file, and a second line in A's file names it.
        format!(
            "PAY-B3,{ACC_B3},40.00,EUR,SUCCEEDED,2026-11-10T12:00:00Z,2026-11-10T12:00:01Z,ATT-B3,pt-B3,B"
        ),
        // UNKNOWN; a line in A's file has its recipient and money but names nobody.
        format!(
            "PAY-B4,{ACC_B4},60.00,EUR,UNKNOWN,2026-11-10T13:00:00Z,2026-11-10T13:00:01Z,ATT-B4,,B"
        ),
    ];
    env.write(
        "payments.csv",
        &format!("{PAYMENTS_HEADER},merchant_id\n{}\n", payments.join("\n")),
    );
    env.write(
        "attempts.csv",
        &format!(
            "{}\n\
             ATT-A1,PAY-A1,2026-11-10T09:00:01Z,2026-11-10T09:00:02Z,SUCCEEDED,pt-A1,\n\
             ATT-B1,PAY-B1,2026-11-10T10:00:01Z,,UNKNOWN,,timeout\n\
             ATT-B2,PAY-B2,2026-11-10T11:00:01Z,2026-11-10T11:00:02Z,SUCCEEDED,pt-B2,\n\
             ATT-B3,PAY-B3,2026-11-10T12:00:01Z,2026-11-10T12:00:02Z,SUCCEEDED,pt-B3,\n\
             ATT-B4,PAY-B4,2026-11-10T13:00:01Z,,UNKNOWN,,timeout\n",
            crate::support::ATTEMPTS_HEADER
        ),
    );
    env.import_files().await;
    // A's file: A's own line, then the lines of B's payments booked there.
    env.deliver(
        "statement-A.csv",
        &format!(
            "pt-A1,PAY-A1,{ACC_A1},100.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             pt-B1,PAY-B1,{ACC_B1},250.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n\
             pt-B2,,{ACC_B2},75.00,EUR,2026-11-10T11:30:00Z,PAYMENT\n\
             pt-B3x,PAY-B3,{ACC_B3},40.00,EUR,2026-11-10T14:00:00Z,PAYMENT\n\
             pt-B4,,{ACC_B4},60.00,EUR,2026-11-10T13:30:00Z,PAYMENT\n"
        ),
    );
    env.deliver(
        "statement-B.csv",
        &format!("pt-B3,PAY-B3,{ACC_B3},40.00,EUR,2026-11-10T12:30:00Z,PAYMENT\n"),
    );
}

/// The row of `id` (a payment id, or a line's provider id for a line row).
fn row<'a>(rows: &'a [(String, String, String)], id: &str) -> &'a (String, String, String) {
    rows.iter()
        .find(|(_, p, t)| p == id || (p.is_empty() && t == id))
        .unwrap_or_else(|| panic!("no row for {id}: {rows:#?}"))
}

/// Before issue 40, A's line naming B's UNKNOWN payment was ORPHAN_AT_PROVIDER ("no ledger
/// payment for this line") and the payment RESOLVED_FAILED on the absence of a line in B's
/// file: a retry would pay it twice. Now the line is its evidence: RESOLVED_SUCCEEDED with the
/// line's provider id recorded, and no line of A's file that names a payment is an orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_in_one_merchants_file_naming_another_merchants_payment_is_its_evidence() {
    let env = TestEnv::new();
    partitioned_job(&env);
    ledger(&env).await;
    let report = env.run(DAY, AS_OF, false, "r1").await;
    let rows = outcomes(&report);
    // The UNKNOWN payment: resolved on the line that names it, never failed.
    assert_eq!(
        row(&rows, "PAY-B1"),
        &(
            "RESOLVED_SUCCEEDED".to_string(),
            "PAY-B1".to_string(),
            "pt-B1".to_string()
        )
    );
    // Named by its recorded provider id alone: matched, not MISSING with an orphan beside it.
    assert_eq!(row(&rows, "PAY-B2").0, "MATCHED");
    assert_eq!(row(&rows, "PAY-B2").2, "pt-B2");
    // Its own line in B's file and a second one in A's: both are its payouts.
    assert_eq!(row(&rows, "PAY-B3").0, "DUPLICATE_AT_PROVIDER");
    let b3: Vec<&str> = row(&rows, "PAY-B3").2.split(';').collect();
    assert_eq!(b3.len(), 2, "{b3:?}");
    assert!(b3.contains(&"pt-B3") && b3.contains(&"pt-B3x"), "{b3:?}");
    // A's own payment is untouched.
    assert_eq!(row(&rows, "PAY-A1").0, "MATCHED");
    // No line that names a payment is an orphan.
    for t in ["pt-B1", "pt-B2", "pt-B3x"] {
        assert!(
            !rows.iter().any(|(_, p, x)| p.is_empty() && x == t),
            "{t} has a line row: {rows:#?}"
        );
    }
    // Fuzzy evidence stays behind the wall: A's unnamed line with B4's recipient and money is
    // no candidate of B4 (a look-alike of another merchant is another payment).
    assert_eq!(row(&rows, "pt-B4").0, "ORPHAN_AT_PROVIDER");
    assert_eq!(row(&rows, "PAY-B4").0, "RESOLVED_FAILED");
    // The detail says where the line was booked.
    let details = read_columns(
        &report.out_dir.join("results.csv"),
        &["payment_id", "detail"],
    );
    let detail = |id: &str| {
        details
            .iter()
            .find(|r| r[0] == id)
            .map(|r| r[1].clone())
            .unwrap_or_default()
    };
    for id in ["PAY-B1", "PAY-B2", "PAY-B3"] {
        assert!(
            detail(id).contains("booked in partition \"A\"'s source psp-A"),
            "{id}: {}",
            detail(id)
        );
    }
    assert!(
        !detail("PAY-A1").contains("partition"),
        "{}",
        detail("PAY-A1")
    );
    // The ledger: B1 moved to SUCCEEDED with the line's provider id; nothing failed.
    let history = env
        .texts(
            "SELECT payment_id || '|' || to_status || '|' || coalesce(provider_payment_id, '') \
             FROM payment_status_history ORDER BY payment_id",
        )
        .await;
    assert!(
        history.contains(&"PAY-B1|SUCCEEDED|pt-B1".to_string()),
        "{history:?}"
    );
    assert!(
        !history.iter().any(|h| h.starts_with("PAY-B1|FAILED")),
        "{history:?}"
    );
}
