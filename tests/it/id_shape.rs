//! The shape of our payment ids and old-named look-alikes (issue 40 point 7, DESIGN.md rule
//! 12): real runs of small jobs, through the library's run entry as the other modules do.
//!
//! (a) Without `reference_pattern`, the shape of our ids is learnt from the ledger's ids: a
//!     reference in that shape that names no payment of ours is a ticket of its own, never
//!     fuzzy evidence for the payment whose recipient and money it has; a reference of
//!     another shape (an invoice number) still is.
//! (b) A line that fits an unresolved payment exactly but whose reference names an OLD payment
//!     of ours, booked far outside that payment's own window, may be the old payment's second
//!     payout or this payment's payout with a wrong echo: one case naming both payments with
//!     the line as their candidate, never a FAILED (nor SUCCEEDED) of the first — whatever
//!     the shape of the ids (learnt, UUIDs, a configured pattern, or none).

use crate::support::{ATTEMPTS_HEADER, PAYMENTS_HEADER, Settings, TestEnv, read_columns};

/// A recipient per payment, so no payment is another's near miss by accident.
const IBAN: [&str; 4] = [
    "DE89370400440532013000",
    "DE02120300000000202051",
    "DE44500105175407324931",
    "DE75512108001245126199",
];

/// One ledger payment: id, recipient, amount (EUR), status, started (also created),
/// provider id recorded on it (SUCCEEDED payments).
struct Pay<'a> {
    id: &'a str,
    rcpt: &'a str,
    amount: &'a str,
    status: &'a str,
    started: &'a str,
    provider: &'a str,
}

/// A job with the default rules and statement source (complete for November), `extra` at the
/// top of its config, `payments` in the ledger (one attempt each) and `statement` (rows of
/// `id,reference,recipient,amount,currency,booked_at,type`) delivered complete.
async fn job(extra: &str, payments: &[Pay<'_>], statement: &str) -> TestEnv {
    let env = TestEnv::with(Settings {
        extra: format!("{extra}\n"),
        ..Settings::default()
    });
    let mut p = format!("{PAYMENTS_HEADER}\n");
    let mut a = format!("{ATTEMPTS_HEADER}\n");
    for x in payments {
        let finished = if x.status == "UNKNOWN" { "" } else { x.started };
        p.push_str(&format!(
            "{id},{rcpt},{amount},EUR,{status},{started},{started},A-{id},{provider}\n",
            id = x.id,
            rcpt = x.rcpt,
            amount = x.amount,
            status = x.status,
            started = x.started,
            provider = x.provider,
        ));
        a.push_str(&format!(
            "A-{id},{id},{started},{finished},{status},{provider},\n",
            id = x.id,
            started = x.started,
            status = x.status,
            provider = x.provider,
        ));
    }
    env.write("payments.csv", &p);
    env.write("attempts.csv", &a);
    env.import_files().await;
    env.statement(statement);
    env
}

/// Runs 2026-11-10 as of 2026-11-20 (every window closed, the settlement lag passed) and
/// returns (outcome, payment_id, provider_txn_id, rule, action, detail) per results.csv row.
async fn night(env: &TestEnv) -> Vec<[String; 6]> {
    run_rows(env, "2026-11-20T00:00:00Z", "n10").await
}

/// Runs 2026-11-10 as of `as_of` and returns (outcome, payment_id, provider_txn_id, rule,
/// action, detail) per results.csv row.
async fn run_rows(env: &TestEnv, as_of: &str, run_id: &str) -> Vec<[String; 6]> {
    let report = env.run("2026-11-10", as_of, false, run_id).await;
    read_columns(
        &report.out_dir.join("results.csv"),
        &[
            "outcome",
            "payment_id",
            "provider_txn_id",
            "rule",
            "action",
            "detail",
        ],
    )
    .into_iter()
    .map(|r| std::array::from_fn(|i| r[i].clone()))
    .collect()
}

/// The first five columns of `rows` (everything but the detail).
fn decided(rows: &[[String; 6]]) -> Vec<[&str; 5]> {
    rows.iter()
        .map(|r| [&*r[0], &*r[1], &*r[2], &*r[3], &*r[4]])
        .collect()
}

/// The ledger status of payment `id`.
async fn status(env: &TestEnv, id: &str) -> String {
    let sql: &'static str = Box::leak(
        format!("SELECT status FROM payments WHERE payment_id = '{id}'").into_boxed_str(),
    );
    env.texts(sql).await.remove(0)
}

// ---------------------------------------------------------------------------------------------
// (a) The shape learnt from the ledger's ids.

#[tokio::test]
async fn a_reference_in_the_ledgers_id_shape_that_names_no_payment_is_no_fuzzy_evidence() {
    // Ids PAY-0001…: no `reference_pattern`, and not UUIDs.
    let env = job(
        "",
        &[
            Pay {
                id: "PAY-0001",
                rcpt: IBAN[0],
                amount: "100.00",
                status: "UNKNOWN",
                started: "2026-11-10T09:00:00Z",
                provider: "",
            },
            Pay {
                id: "PAY-0002",
                rcpt: IBAN[1],
                amount: "250.00",
                status: "UNKNOWN",
                started: "2026-11-10T10:00:00Z",
                provider: "",
            },
            Pay {
                id: "PAY-0003",
                rcpt: IBAN[2],
                amount: "75.00",
                status: "UNKNOWN",
                started: "2026-11-10T11:00:00Z",
                provider: "",
            },
            Pay {
                id: "PAY-0004",
                rcpt: IBAN[3],
                amount: "40.00",
                status: "SUCCEEDED",
                started: "2026-11-10T12:00:00Z",
                provider: "T-4",
            },
        ],
        &format!(
            // L-1: our shape, names no payment of ours, PAY-0001's recipient and money.
            // L-2: an invoice number, PAY-0002's recipient and money: free text.
            // L-3: our ids' prefix with a garbled rest, PAY-0003's recipient and money.
            // L-4: PAY-0004's own line.
            "L-1,PAY-0999,{},100.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
             L-2,INV-2231,{},250.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n\
             L-3,PAY-12a,{},75.00,EUR,2026-11-10T11:30:00Z,PAYMENT\n\
             T-4,PAY-0004,{},40.00,EUR,2026-11-10T12:30:00Z,PAYMENT\n",
            IBAN[0], IBAN[1], IBAN[2], IBAN[3]
        ),
    )
    .await;
    let rows = night(&env).await;
    assert_eq!(
        decided(&rows),
        vec![
            [
                "AMBIGUOUS",
                "PAY-0001",
                "L-1",
                "recipient_amount_window",
                "ticket"
            ],
            [
                "RESOLVED_SUCCEEDED",
                "PAY-0002",
                "L-2",
                "recipient_amount_window",
                "transition:SUCCEEDED"
            ],
            [
                "AMBIGUOUS",
                "PAY-0003",
                "L-3",
                "recipient_amount_window",
                "ticket"
            ],
            ["MATCHED", "PAY-0004", "T-4", "identifier", "none"],
            ["ORPHAN_AT_PROVIDER", "", "L-1", "", "ticket"],
            ["ORPHAN_AT_PROVIDER", "", "L-3", "", "ticket"],
        ],
        "{rows:#?}"
    );
    for (line, reference) in [("L-1", "PAY-0999"), ("L-3", "PAY-12a")] {
        let row = rows
            .iter()
            .find(|r| r[0] == "ORPHAN_AT_PROVIDER" && r[2] == line)
            .expect("orphan row");
        assert!(
            row[5].contains(&format!(
                "reference {reference:?} has the shape of our payment ids but names no payment of ours"
            )),
            "{row:?}"
        );
    }
    // Nothing moved on a line that names none of ours; the invoice line still resolves.
    assert_eq!(status(&env, "PAY-0001").await, "UNKNOWN");
    assert_eq!(status(&env, "PAY-0003").await, "UNKNOWN");
    assert_eq!(status(&env, "PAY-0002").await, "SUCCEEDED");
}

#[tokio::test]
async fn a_ledger_of_mixed_id_shapes_learns_none_and_keeps_references_free_text() {
    // Two shapes of ids (PAY-0001 and a legacy number): no shape is learnt, so a reference
    // that names no payment is free text, as before (set `reference_pattern` for more).
    let env = job(
        "",
        &[
            Pay {
                id: "PAY-0001",
                rcpt: IBAN[0],
                amount: "100.00",
                status: "UNKNOWN",
                started: "2026-11-10T09:00:00Z",
                provider: "",
            },
            Pay {
                id: "770412",
                rcpt: IBAN[1],
                amount: "250.00",
                status: "UNKNOWN",
                started: "2026-11-10T10:00:00Z",
                provider: "",
            },
        ],
        &format!(
            "L-1,PAY-0999,{},100.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n",
            IBAN[0]
        ),
    )
    .await;
    let rows = night(&env).await;
    assert_eq!(
        decided(&rows),
        vec![
            ["RESOLVED_FAILED", "770412", "", "", "transition:FAILED"],
            [
                "RESOLVED_SUCCEEDED",
                "PAY-0001",
                "L-1",
                "recipient_amount_window",
                "transition:SUCCEEDED"
            ],
        ],
        "{rows:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// (b) A line that fits a payment exactly but names an old payment far outside its window.

/// The two payments of (b): `first` UNKNOWN, started 2026-11-10 09:00, 100.00 to IBAN[0];
/// `old` started 2026-09-01 (far outside the run's horizon), `old_status`, the same recipient
/// and money, provider id PSP-OLD recorded when SUCCEEDED. Further payments `more` of the
/// ledger's shape, FAILED (no line, no ticket).
async fn old_named_job(
    extra: &str,
    first: &str,
    old: &str,
    old_status: &str,
    more: &[&str],
    statement: &str,
) -> TestEnv {
    let mut pays = vec![
        Pay {
            id: first,
            rcpt: IBAN[0],
            amount: "100.00",
            status: "UNKNOWN",
            started: "2026-11-10T09:00:00Z",
            provider: "",
        },
        Pay {
            id: old,
            rcpt: IBAN[0],
            amount: "100.00",
            status: old_status,
            started: "2026-09-01T09:00:00Z",
            provider: if old_status == "SUCCEEDED" {
                "PSP-OLD"
            } else {
                ""
            },
        },
    ];
    for (k, id) in more.iter().enumerate() {
        pays.push(Pay {
            id,
            rcpt: IBAN[1],
            amount: "10.00",
            status: "FAILED",
            started: ["2026-11-10T13:00:00Z", "2026-11-10T14:00:00Z"][k % 2],
            provider: "",
        });
    }
    job(extra, &pays, statement).await
}

/// The line of (b): booked 2026-11-10 09:30, `first`'s recipient and money, reference `old`.
fn old_named_line(old: &str) -> String {
    format!(
        "L-1,{old},{},100.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n",
        IBAN[0]
    )
}

/// Asserts the case of (b): both payments AMBIGUOUS with the line as their candidate, the line
/// AMBIGUOUS in a row of its own (its one outcome, as for any line in doubt between payments),
/// `first` not moved, and one open case with both payments and the line as the candidate of
/// each. Rows of the other payments (FAILED_OK) are left out.
async fn assert_one_case(env: &TestEnv, rows: &[[String; 6]], first: &str, old: &str) {
    let rows: Vec<[String; 6]> = rows
        .iter()
        .filter(|r| r[1] == first || r[1] == old || r[1].is_empty())
        .cloned()
        .collect();
    let mut want = vec![
        [
            "AMBIGUOUS",
            first,
            "L-1",
            "recipient_amount_window",
            "ticket",
        ],
        ["AMBIGUOUS", old, "L-1", "identifier", "ticket"],
    ];
    want.sort_by_key(|r| recon::model::Id::new(r[1]));
    want.push(["AMBIGUOUS", "", "L-1", "", "ticket"]);
    assert_eq!(decided(&rows), want, "{rows:#?}");
    // Each row says what the line is in doubt between and why.
    for r in &rows {
        let other = if r[1] == first { old } else { first };
        assert!(r[5].contains(other) && r[5].contains("outside"), "{r:?}");
    }
    let line = rows.iter().find(|r| r[1].is_empty()).expect("line row");
    assert!(line[5].contains(old), "{line:?}");
    assert_eq!(status(env, first).await, "UNKNOWN");
    let db = env.db().await;
    let cases = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases");
    db.close().await;
    assert_eq!(cases.len(), 1, "{cases:#?}");
    let c = &cases[0];
    assert_eq!(c.kind, "ambiguity", "{c:#?}");
    let mut payments: Vec<&str> = c.payments.iter().map(|p| p.payment_id.as_str()).collect();
    payments.sort_unstable();
    let mut both = vec![first, old];
    both.sort_unstable();
    assert_eq!(payments, both, "{c:#?}");
    let mut candidates: Vec<(&str, &str)> = c
        .candidates
        .iter()
        .map(|k| (k.payment_id.as_str(), k.line_id.as_str()))
        .collect();
    candidates.sort_unstable();
    assert_eq!(
        candidates,
        both.iter().map(|p| (*p, "L-1")).collect::<Vec<_>>(),
        "{c:#?}"
    );
}

#[tokio::test]
async fn an_old_named_look_alike_is_one_case_with_ids_of_a_learnt_shape() {
    let env = old_named_job(
        "",
        "PAY-0101",
        "PAY-0042",
        "SUCCEEDED",
        &["PAY-0102", "PAY-0103"],
        &old_named_line("PAY-0042"),
    )
    .await;
    let rows = night(&env).await;
    assert_one_case(&env, &rows, "PAY-0101", "PAY-0042").await;
}

#[tokio::test]
async fn an_old_named_look_alike_is_one_case_with_uuid_ids() {
    let (first, old) = (
        "7d1c0f3e-9a4b-4c2d-8e6f-000000000101",
        "7d1c0f3e-9a4b-4c2d-8e6f-000000000042",
    );
    let env = old_named_job(
        "",
        first,
        old,
        "SUCCEEDED",
        &["7d1c0f3e-9a4b-4c2d-8e6f-000000000102"],
        &old_named_line(old),
    )
    .await;
    let rows = night(&env).await;
    assert_one_case(&env, &rows, first, old).await;
}

#[tokio::test]
async fn an_old_named_look_alike_is_one_case_with_a_configured_pattern() {
    let env = old_named_job(
        "reference_pattern = \"^PAY-[0-9]+$\"",
        "PAY-0101",
        "PAY-0042",
        "SUCCEEDED",
        &[],
        &old_named_line("PAY-0042"),
    )
    .await;
    let rows = night(&env).await;
    assert_one_case(&env, &rows, "PAY-0101", "PAY-0042").await;
}

#[tokio::test]
async fn an_old_named_look_alike_is_one_case_when_no_shape_is_known() {
    // Mixed ids: no shape learnt; the old payment is still found by the whole-ledger lookup.
    let env = old_named_job(
        "",
        "PAY-0101",
        "legacy_42",
        "SUCCEEDED",
        &["880031"],
        &old_named_line("legacy_42"),
    )
    .await;
    let rows = night(&env).await;
    assert_one_case(&env, &rows, "PAY-0101", "legacy_42").await;
}

#[tokio::test]
async fn an_old_named_look_alike_of_a_failed_old_payment_stays_failed_but_paid() {
    // A line after a FAILED is FAILED_BUT_PAID (critical); the payment it fits is not failed
    // on its absence but reviewed with it, in one critical case.
    let env = old_named_job(
        "",
        "PAY-0101",
        "PAY-0042",
        "FAILED",
        &[],
        &old_named_line("PAY-0042"),
    )
    .await;
    let rows = night(&env).await;
    assert_eq!(
        decided(&rows),
        vec![
            ["FAILED_BUT_PAID", "PAY-0042", "L-1", "identifier", "ticket"],
            [
                "AMBIGUOUS",
                "PAY-0101",
                "L-1",
                "recipient_amount_window",
                "ticket"
            ],
            ["AMBIGUOUS", "", "L-1", "", "ticket"],
        ],
        "{rows:#?}"
    );
    assert_eq!(status(&env, "PAY-0101").await, "UNKNOWN");
    let db = env.db().await;
    let cases = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases");
    db.close().await;
    assert_eq!(cases.len(), 1, "{cases:#?}");
    assert_eq!(cases[0].severity, "CRITICAL", "{cases:#?}");
    assert_eq!(cases[0].payments.len(), 2, "{cases:#?}");
}

#[tokio::test]
async fn a_line_naming_an_old_payment_without_a_look_alike_stays_the_old_payments() {
    // The same old-named line, but the UNKNOWN payment has another amount: the line fits no
    // payment but the one it names, so it is that one's second payout or very late booking,
    // and the UNKNOWN payment has no line (its window is closed and covered): FAILED.
    let env = job(
        "",
        &[
            Pay {
                id: "PAY-0101",
                rcpt: IBAN[0],
                amount: "90.00",
                status: "UNKNOWN",
                started: "2026-11-10T09:00:00Z",
                provider: "",
            },
            Pay {
                id: "PAY-0042",
                rcpt: IBAN[0],
                amount: "100.00",
                status: "SUCCEEDED",
                started: "2026-09-01T09:00:00Z",
                provider: "PSP-OLD",
            },
        ],
        &old_named_line("PAY-0042"),
    )
    .await;
    let rows = night(&env).await;
    assert_eq!(
        decided(&rows),
        vec![
            [
                "DUPLICATE_AT_PROVIDER",
                "PAY-0042",
                "L-1",
                "identifier",
                "ticket"
            ],
            ["RESOLVED_FAILED", "PAY-0101", "", "", "transition:FAILED"],
        ],
        "{rows:#?}"
    );
}

#[tokio::test]
async fn a_late_line_carrying_the_old_payments_provider_id_is_its_own() {
    // The provider's own id names the old payment's transaction: its payout, booked late; not
    // a look-alike of the payment that merely has its recipient and money.
    let env = old_named_job(
        "",
        "PAY-0101",
        "PAY-0042",
        "SUCCEEDED",
        &[],
        &format!(
            "PSP-OLD,PAY-0042,{},100.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n",
            IBAN[0]
        ),
    )
    .await;
    let rows = night(&env).await;
    assert_eq!(
        decided(&rows),
        vec![
            ["MATCHED", "PAY-0042", "PSP-OLD", "identifier", "none"],
            ["RESOLVED_FAILED", "PAY-0101", "", "", "transition:FAILED"],
        ],
        "{rows:#?}"
    );
}

/// Night 1 of (b) with ids of a learnt shape, then a reviewer confirms the line as
/// `confirmed`'s (`confirm N` of the case, applied as alice), then the night is run again.
/// Returns the second run's rows.
async fn confirm_and_rerun(confirmed: &str) -> (TestEnv, Vec<[String; 6]>) {
    let env = old_named_job(
        "",
        "PAY-0101",
        "PAY-0042",
        "SUCCEEDED",
        &[],
        &old_named_line("PAY-0042"),
    )
    .await;
    let rows = night(&env).await;
    assert_one_case(&env, &rows, "PAY-0101", "PAY-0042").await;
    let db = env.db().await;
    let case = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases")
        .remove(0);
    let n = case
        .candidates
        .iter()
        .find(|c| c.payment_id == confirmed)
        .expect("candidate")
        .number;
    let file = env.path("decide.xlsx");
    crate::support::write_decide_file(
        &file,
        &[(
            case.key.clone(),
            case.fingerprint.clone(),
            format!("confirm {n}"),
        )],
        "",
    );
    let applied = recon::decisions::apply_file(&db, &env.config().decisions, &file, "alice")
        .await
        .expect("apply");
    db.close().await;
    assert_eq!(
        applied.rows.iter().map(|r| r.status).collect::<Vec<_>>(),
        [recon::decisions::result::Status::Applied],
        "{applied:#?}"
    );
    let rows = run_rows(&env, "2026-11-21T00:00:00Z", "n10-again").await;
    (env, rows)
}

#[tokio::test]
async fn a_reviewer_who_confirms_the_line_as_the_old_payments_settles_the_case() {
    // A human decided whose the line is: it is no look-alike any more. The old payment has a
    // second payout (a ticket), and the payment it fitted has no line: FAILED on absence.
    let (env, rows) = confirm_and_rerun("PAY-0042").await;
    assert_eq!(
        decided(&rows),
        vec![
            [
                "DUPLICATE_AT_PROVIDER",
                "PAY-0042",
                "L-1",
                "identifier",
                "ticket"
            ],
            ["RESOLVED_FAILED", "PAY-0101", "", "", "transition:FAILED"],
        ],
        "{rows:#?}"
    );
    assert_eq!(status(&env, "PAY-0101").await, "FAILED");
}

#[tokio::test]
async fn a_reviewer_who_confirms_the_line_as_the_look_alikes_resolves_it() {
    // The line is the UNKNOWN payment's payout with a wrong echo: it resolves SUCCEEDED on it,
    // and the old payment is no longer named.
    let (env, rows) = confirm_and_rerun("PAY-0101").await;
    assert_eq!(
        decided(&rows),
        vec![[
            "RESOLVED_SUCCEEDED",
            "PAY-0101",
            "L-1",
            "identifier",
            "transition:SUCCEEDED"
        ]],
        "{rows:#?}"
    );
    assert_eq!(status(&env, "PAY-0101").await, "SUCCEEDED");
}
