//! Issue 46: the bank's payout status files (`[[payout_status]]`: pain.002, NACHA returns) as
//! evidence of a night. Each test could fail on a wrong automatic decision: a record names a
//! payment only by its exact id; a rejection is final only where nothing says paid; an
//! acceptance is no money; a return is a RETURNED case, the night after too; claims that
//! disagree are a critical case; money that differs is not evidence.

use crate::support::{Backend, Settings, TestEnv, outcomes, read_columns};

const IBAN: &str = "DE89370400440532013000";

/// A job whose statements prove nothing on their own (not declared complete), with a
/// `[[payout_status]]` block `bank` reading the folder `status/` in `format`, plus `extra` keys.
async fn job(backend: Backend, format: &str, extra: &str) -> TestEnv {
    let env = TestEnv::on(
        backend,
        Settings {
            complete: None,
            extra: block("bank", format, "status", extra),
            ..Settings::default()
        },
    )
    .await;
    std::fs::create_dir_all(env.path("status")).unwrap();
    env
}

fn block(name: &str, format: &str, path: &str, extra: &str) -> String {
    format!(
        "[[payout_status]]\nname = \"{name}\"\nformat = \"{format}\"\npath = \"{path}\"\n{extra}\n"
    )
}

/// Imports payments (id, amount, currency, status, started) with one attempt each.
async fn payments(env: &TestEnv, rows: &[(&str, &str, &str, &str, &str)]) {
    let mut p = String::new();
    let mut a = String::new();
    for (id, amount, cur, status, at) in rows {
        p.push_str(&format!(
            "{id},{IBAN},{amount},{cur},{status},{at},{at},A-{id},\n"
        ));
        a.push_str(&format!("A-{id},{id},{at},,{status},,\n"));
    }
    env.import(p.trim_end(), a.trim_end()).await;
}

/// UNKNOWN EUR payments of 10.00 started 2026-11-10T09:00Z.
async fn unknown(env: &TestEnv, ids: &[&str]) {
    let rows: Vec<_> = ids
        .iter()
        .map(|id| (*id, "10.00", "EUR", "UNKNOWN", "2026-11-10T09:00:00Z"))
        .collect();
    payments(env, &rows).await;
}

/// One `TxInfAndSts`: end-to-end id, status, reason, amount (`Some(("10.00", "EUR"))`).
struct Tx<'a>(
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<(&'a str, &'a str)>,
);

/// A pain.002.001.10 report created at `created` with one payment information block of
/// `txs`. The `n`th transaction's `TxInfAndSts` is on line `10 + 4n` plus the lines of the
/// reasons and amounts before it ([`tx_line`] counts them).
fn pain002(created: &str, txs: &[Tx<'_>]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.10\">\n\
         <CstmrPmtStsRpt>\n\
         <GrpHdr><MsgId>STS-1</MsgId><CreDtTm>{created}</CreDtTm></GrpHdr>\n\
         <OrgnlGrpInfAndSts><OrgnlMsgId>PAYOUTS-1</OrgnlMsgId></OrgnlGrpInfAndSts>\n\
         <OrgnlPmtInfAndSts>\n\
         <OrgnlPmtInfId>PMTINF-A</OrgnlPmtInfId>\n"
    );
    for Tx(e2e, sts, reason, amount) in txs {
        s.push_str(&format!(
            "<TxInfAndSts>\n<OrgnlEndToEndId>{e2e}</OrgnlEndToEndId>\n<TxSts>{sts}</TxSts>\n"
        ));
        if let Some(r) = reason {
            s.push_str(&format!("<StsRsnInf><Rsn><Cd>{r}</Cd></Rsn></StsRsnInf>\n"));
        }
        if let Some((a, c)) = amount {
            s.push_str(&format!(
                "<OrgnlTxRef><Amt><InstdAmt Ccy=\"{c}\">{a}</InstdAmt></Amt></OrgnlTxRef>\n"
            ));
        }
        s.push_str("</TxInfAndSts>\n");
    }
    s.push_str("</OrgnlPmtInfAndSts>\n</CstmrPmtStsRpt>\n</Document>\n");
    s
}

/// The line of the `n`th (0-based) `TxInfAndSts` of [`pain002`]'s output.
fn tx_line(xml: &str, n: usize) -> usize {
    xml.lines()
        .enumerate()
        .filter(|(_, l)| *l == "<TxInfAndSts>")
        .nth(n)
        .map(|(i, _)| i + 1)
        .unwrap()
}

/// A 94-character NACHA record from its fields (position, text), blank elsewhere.
fn record(fields: &[(usize, &str)]) -> String {
    let mut r = vec![b' '; 94];
    for (at, text) in fields {
        r[at - 1..at - 1 + text.len()].copy_from_slice(text.as_bytes());
    }
    String::from_utf8(r).unwrap()
}

/// One NACHA entry: individual id, DFI account, amount in cents, addenda type (`99`, `98`)
/// and code (`R01`, `C01`), addenda information (corrected data for a 98).
struct Entry<'a>(&'a str, &'a str, u64, &'a str, &'a str, &'a str);

/// A NACHA file created `yymmdd` at 09:30 with one batch of `entries`.
fn nacha(yymmdd: &str, entries: &[Entry<'_>]) -> String {
    let mut recs = vec![
        record(&[
            (1, "101 091000019 123456789"),
            (24, yymmdd),
            (30, "0930A094101RECON TEST BANK        RECON PAYOUTS INC"),
        ]),
        record(&[
            (1, "5200RECON PAYOUTS"),
            (41, "1234567890PPDPAYOUT"),
            (70, yymmdd),
            (79, "1091000010000001"),
        ]),
    ];
    for (k, Entry(id, account, cents, kind, code, info)) in entries.iter().enumerate() {
        let trace = format!("09100001{:07}", k + 1);
        recs.push(record(&[
            (1, "626231380104"),
            (13, account),
            (30, &format!("{cents:010}")),
            (40, id),
            (55, "ALICE EXAMPLE"),
            (79, "1"),
            (80, &trace),
        ]));
        recs.push(record(&[
            (1, &format!("7{kind}{code}")),
            (7, &format!("0910000199{:05}", k + 1)),
            (28, "23138010"),
            (36, info),
            (80, &trace),
        ]));
    }
    let n = entries.len() * 2;
    recs.push(record(&[
        (1, &format!("8200{n:06}")),
        (80, "091000010000001"),
    ]));
    recs.push(record(&[(1, &format!("9000001000001{n:08}"))]));
    recs.join("\n") + "\n"
}

async fn run(env: &TestEnv, day: &str, as_of: &str, id: &str) -> recon::run::RunReport {
    env.run(day, as_of, false, id).await
}

/// (outcome, detail, rule) of payment `id`'s row.
fn row_of(report: &recon::run::RunReport, id: &str) -> (String, String, String) {
    read_columns(
        &report.out_dir.join("results.csv"),
        &["outcome", "payment_id", "detail", "rule"],
    )
    .into_iter()
    .find(|r| r[1] == id)
    .map(|r| (r[0].clone(), r[2].clone(), r[3].clone()))
    .unwrap_or_else(|| panic!("no row for {id} in {:?}", outcomes(report)))
}

/// Payment `id`'s row has `outcome`, and its detail holds `text`; its detail.
#[track_caller]
fn says(report: &recon::run::RunReport, id: &str, outcome: &str, text: &str) -> String {
    let (got, detail, _) = row_of(report, id);
    assert_eq!(got, outcome, "{id}: {detail}");
    assert!(detail.contains(text), "{id}: {detail}");
    detail
}

/// A warning of the run's summary holds every one of `parts`.
#[track_caller]
fn warned(report: &recon::run::RunReport, parts: &[&str]) {
    let w = &report.summary.warnings;
    assert!(
        w.iter().any(|w| parts.iter().all(|p| w.contains(p))),
        "{parts:?} in {w:?}"
    );
}

async fn status(env: &TestEnv, id: &str) -> String {
    let sql: &'static str = Box::leak(
        format!("SELECT status FROM payments WHERE payment_id = '{id}'").into_boxed_str(),
    );
    env.texts(sql).await.remove(0)
}

/// The open tickets: `kind|severity|payment_id`.
async fn tickets(env: &TestEnv) -> Vec<String> {
    env.texts(
        "SELECT kind || '|' || severity || '|' || coalesce(payment_id, '') FROM review_tickets \
         WHERE status = 'OPEN' ORDER BY payment_id, kind",
    )
    .await
}

async fn a_rejection_names_exactly_one_payment_never_a_prefix_or_another_case(b: Backend) {
    let env = job(b, "pain002", "").await;
    unknown(&env, &["PAY-1", "PAY-10", "pay-1", "XPAY-1"]).await;
    let xml = pain002(
        "2026-11-10T18:00:00Z",
        &[Tx("PAY-1", "RJCT", Some("AC01"), Some(("10.00", "EUR")))],
    );
    env.write("status/sts-1.xml", &xml);
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    let at = tx_line(&xml, 0);
    let text = format!("pain.002 sts-1.xml:{at} RJCT rejected (AC01)");
    says(&r, "PAY-1", "RESOLVED_FAILED", &text);
    assert_eq!(row_of(&r, "PAY-1").2, "payout_status:bank");
    assert_eq!(status(&env, "PAY-1").await, "FAILED");
    for other in ["PAY-10", "pay-1", "XPAY-1"] {
        let (outcome, detail, _) = row_of(&r, other);
        assert_eq!(outcome, "AWAITING_EVIDENCE", "{other}");
        assert!(!detail.contains("pain.002"), "{other}: {detail}");
        assert_eq!(status(&env, other).await, "UNKNOWN", "{other}");
    }
    assert_eq!(r.summary.transitions.applied, 1);
}

async fn a_record_for_an_id_that_names_no_payment_is_a_ticket(b: Backend) {
    let env = job(b, "pain002", "").await;
    unknown(&env, &["PAY-1"]).await;
    let xml = pain002(
        "2026-11-10T18:00:00Z",
        &[
            Tx("PAY-404", "RJCT", Some("AC04"), None),
            Tx("pay-1", "RJCT", Some("AC04"), None),
        ],
    );
    env.write("status/sts-1.xml", &xml);
    for id in ["r1", "r2"] {
        let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", id).await;
        let rows = read_columns(
            &r.out_dir.join("results.csv"),
            &["outcome", "payment_id", "rule", "action", "detail"],
        );
        let orphans: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| r[2].starts_with("payout_status:bank#"))
            .collect();
        assert_eq!(orphans.len(), 2, "{rows:?}");
        for (o, id) in orphans.iter().zip(["PAY-404", "pay-1"]) {
            assert_eq!(o[0], "ORPHAN_AT_PROVIDER");
            assert_eq!(o[1], "");
            assert_eq!(o[2], format!("payout_status:bank#{id}"));
            assert_eq!(o[3], "ticket");
            assert!(
                o[4].contains("which is no payment of the ledger"),
                "{}",
                o[4]
            );
        }
        // PAY-1 itself is untouched by a rejection of its lower-case look-alike.
        assert_eq!(row_of(&r, "PAY-1").0, "AWAITING_EVIDENCE");
    }
    assert_eq!(status(&env, "PAY-1").await, "UNKNOWN");
    // One ticket each, not one per run.
    assert_eq!(
        tickets(&env).await,
        ["ORPHAN_AT_PROVIDER|MEDIUM|", "ORPHAN_AT_PROVIDER|MEDIUM|"]
    );
}

async fn an_acceptance_alone_leaves_the_payment_awaiting_with_the_banks_word(b: Backend) {
    let env = job(b, "pain002", "").await;
    unknown(&env, &["PAY-1", "PAY-2"]).await;
    let xml = pain002(
        "2026-11-10T18:00:00Z",
        &[
            Tx("PAY-1", "ACSC", None, Some(("10.00", "EUR"))),
            Tx("PAY-2", "PDNG", None, None),
        ],
    );
    env.write("status/sts-1.xml", &xml);
    let r = run(&env, "2026-11-10", "2026-11-20T00:00:00Z", "r1").await;
    let at = tx_line(&xml, 0);
    let text = format!("pain.002 sts-1.xml:{at} ACSC accepted: an acceptance is not money");
    says(&r, "PAY-1", "AWAITING_EVIDENCE", &text);
    says(&r, "PAY-2", "AWAITING_EVIDENCE", "PDNG pending");
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(status(&env, "PAY-1").await, "UNKNOWN");
    assert!(tickets(&env).await.is_empty());
}

async fn an_ach_return_after_recon_resolved_succeeded_is_a_returned_case_the_next_night(
    b: Backend,
) {
    let env = job(b, "nacha", "").await;
    payments(
        &env,
        &[
            ("P-1", "123.54", "USD", "UNKNOWN", "2026-11-10T09:00:00Z"),
            // Paid weeks ago by the ledger's own word, outside the night's ledger range.
            ("P-OLD", "75.00", "USD", "SUCCEEDED", "2026-09-01T09:00:00Z"),
        ],
    )
    .await;
    env.statement(&format!(
        "psp-1,P-1,{IBAN},123.54,USD,2026-11-10T09:05:00Z,PAYMENT"
    ));
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    assert_eq!(row_of(&r, "P-1").0, "RESOLVED_SUCCEEDED");
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
    // The return file arrives the day after.
    let ach = nacha(
        "261111",
        &[
            Entry(
                "P-1",
                "12345678901",
                12354,
                "99",
                "R01",
                "INSUFFICIENT FUNDS",
            ),
            Entry("P-OLD", "98765432100", 7500, "99", "R97", ""),
        ],
    );
    env.write("status/returns-1111.ach", &ach);
    let r = run(&env, "2026-11-11", "2026-11-12T00:00:00Z", "r2").await;
    let (outcome, detail, rule) = row_of(&r, "P-1");
    assert_eq!(outcome, "RETURNED");
    assert_eq!(rule, "payout_status:bank");
    assert!(
        detail.contains("NACHA returns-1111.ach:3 returned (R01: INSUFFICIENT FUNDS)"),
        "{detail}"
    );
    says(&r, "P-OLD", "RETURNED", "returned (R97)");
    // Nothing moves back: a human decides.
    assert_eq!(status(&env, "P-1").await, "SUCCEEDED");
    assert_eq!(status(&env, "P-OLD").await, "SUCCEEDED");
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(
        tickets(&env).await,
        ["RETURNED|HIGH|P-1", "RETURNED|HIGH|P-OLD"]
    );
    // No full account number anywhere in the outputs.
    for f in ["results.csv", "summary.json", "report.html"] {
        let text = std::fs::read_to_string(r.out_dir.join(f)).unwrap();
        assert!(!text.contains("12345678901"), "{f}");
        assert!(!text.contains("98765432100"), "{f}");
    }
}

async fn a_rejection_against_a_paid_line_or_an_acceptance_is_a_critical_contradiction(b: Backend) {
    let env = job(b, "pain002", "").await;
    unknown(&env, &["PAY-1", "PAY-2"]).await;
    env.statement(&format!(
        "psp-1,PAY-1,{IBAN},10.00,EUR,2026-11-10T09:05:00Z,PAYMENT"
    ));
    let a = pain002(
        "2026-11-10T12:00:00Z",
        &[Tx("PAY-2", "ACSC", None, Some(("10.00", "EUR")))],
    );
    let b2 = pain002(
        "2026-11-10T18:00:00Z",
        &[
            Tx("PAY-1", "RJCT", Some("AC01"), None),
            Tx("PAY-2", "RJCT", Some("AM04"), None),
        ],
    );
    env.write("status/a.xml", &a);
    env.write("status/b.xml", &b2);
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    let (outcome, detail, _) = row_of(&r, "PAY-1");
    assert_eq!(outcome, "CONTRADICTED");
    assert!(
        detail.contains("a statement line shows this payment paid")
            && detail.contains(&format!("pain.002 b.xml:{} RJCT rejected", tx_line(&b2, 0))),
        "{detail}"
    );
    let (outcome, detail, _) = row_of(&r, "PAY-2");
    assert_eq!(outcome, "CONTRADICTED");
    assert!(
        detail.contains(&format!("pain.002 a.xml:{} ACSC accepted", tx_line(&a, 0)))
            && detail.contains(&format!("pain.002 b.xml:{} RJCT rejected", tx_line(&b2, 1))),
        "{detail}"
    );
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(status(&env, "PAY-1").await, "UNKNOWN");
    assert_eq!(status(&env, "PAY-2").await, "UNKNOWN");
    assert_eq!(
        tickets(&env).await,
        ["CONTRADICTED|CRITICAL|PAY-1", "CONTRADICTED|CRITICAL|PAY-2"]
    );
}

on_both_backends!(
    a_rejection_names_exactly_one_payment_never_a_prefix_or_another_case,
    a_record_for_an_id_that_names_no_payment_is_a_ticket,
    an_acceptance_alone_leaves_the_payment_awaiting_with_the_banks_word,
    an_ach_return_after_recon_resolved_succeeded_is_a_returned_case_the_next_night,
    a_rejection_against_a_paid_line_or_an_acceptance_is_a_critical_contradiction,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_stating_other_money_is_not_evidence() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    unknown(&env, &["PAY-1", "PAY-2"]).await;
    env.write(
        "status/sts.xml",
        &pain002(
            "2026-11-10T18:00:00Z",
            &[
                Tx("PAY-1", "RJCT", Some("AC01"), Some(("12.00", "EUR"))),
                Tx("PAY-2", "RJCT", Some("AC01"), Some(("10.00", "USD"))),
            ],
        ),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    says(
        &r,
        "PAY-1",
        "AMOUNT_MISMATCH",
        "states 12.00 EUR, the ledger 10.00 EUR: not evidence",
    );
    assert_eq!(row_of(&r, "PAY-2").0, "CURRENCY_MISMATCH");
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(status(&env, "PAY-1").await, "UNKNOWN");
    assert_eq!(status(&env, "PAY-2").await, "UNKNOWN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_file_counts_once_and_reruns_are_byte_identical() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    unknown(&env, &["PAY-1"]).await;
    let xml = pain002("2026-11-10T18:00:00Z", &[Tx("PAY-1", "ACSP", None, None)]);
    env.write("status/a.xml", &xml);
    env.write("status/b.xml", &xml);
    let r1 = env
        .run("2026-11-10", "2026-11-11T00:00:00Z", true, "d1")
        .await;
    let r2 = env
        .run("2026-11-10", "2026-11-11T00:00:00Z", true, "d2")
        .await;
    let (_, detail, _) = row_of(&r1, "PAY-1");
    assert_eq!(detail.matches("ACSP accepted").count(), 1, "{detail}");
    warned(&r1, &["b.xml holds the same bytes as", "a.xml"]);
    let read = |r: &recon::run::RunReport| std::fs::read(r.out_dir.join("results.csv")).unwrap();
    assert_eq!(read(&r1), read(&r2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_night_as_of_before_the_file_was_written_does_not_read_it() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    unknown(&env, &["PAY-1"]).await;
    env.write(
        "status/sts.xml",
        &pain002(
            "2026-11-12T08:00:00+01:00",
            &[Tx("PAY-1", "RJCT", Some("AC01"), None)],
        ),
    );
    let r = env
        .run("2026-11-10", "2026-11-12T06:59:59Z", true, "d1")
        .await;
    assert_eq!(row_of(&r, "PAY-1").0, "AWAITING_EVIDENCE");
    warned(
        &r,
        &["1 record(s) of files created after the run's as-of were left out"],
    );
    let r = env
        .run("2026-11-10", "2026-11-12T07:00:00Z", true, "d2")
        .await;
    assert_eq!(row_of(&r, "PAY-1").0, "RESOLVED_FAILED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_status_without_transactions_names_no_payment_and_is_a_warning() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    unknown(&env, &["PAY-1"]).await;
    env.write(
        "status/group.xml",
        "<?xml version=\"1.0\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.03\">\n\
         <CstmrPmtStsRpt>\n<GrpHdr><MsgId>S</MsgId><CreDtTm>2026-11-10T18:00:00</CreDtTm></GrpHdr>\n\
         <OrgnlGrpInfAndSts>\n<OrgnlMsgId>PAYOUTS-1</OrgnlMsgId>\n<GrpSts>RJCT</GrpSts>\n\
         </OrgnlGrpInfAndSts>\n</CstmrPmtStsRpt>\n</Document>\n",
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    assert_eq!(row_of(&r, "PAY-1").0, "AWAITING_EVIDENCE");
    assert_eq!(status(&env, "PAY-1").await, "UNKNOWN");
    warned(
        &r,
        &[
            "group.xml:5 says RJCT (rejected) at group level",
            "every transaction of original message PAYOUTS-1",
            "names no payment and resolves nothing",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_of_change_is_a_note_with_the_corrected_account_masked() {
    let env = job(
        Backend::Sqlite,
        "nacha",
        "payment_id_field = \"individual_id\"",
    )
    .await;
    payments(
        &env,
        &[("P-1", "0.00", "USD", "UNKNOWN", "2026-11-10T09:00:00Z")],
    )
    .await;
    env.write(
        "status/noc.ach",
        &nacha(
            "261110",
            &[Entry("P-1", "744-5678-99", 0, "98", "C01", "1918171614")],
        ),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    says(
        &r,
        "P-1",
        "AWAITING_EVIDENCE",
        "notification-of-change (C01: corrected data ****1614)",
    );
    let text = std::fs::read_to_string(r.out_dir.join("results.csv")).unwrap();
    assert!(!text.contains("1918171614"));
    assert!(tickets(&env).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_number_names_the_payment_when_configured_so() {
    let env = job(
        Backend::Sqlite,
        "nacha",
        "payment_id_field = \"trace_number\"",
    )
    .await;
    payments(
        &env,
        &[
            (
                "091000019900001",
                "1.00",
                "USD",
                "SUCCEEDED",
                "2026-11-10T09:00:00Z",
            ),
            ("P-1", "1.00", "USD", "SUCCEEDED", "2026-11-10T09:00:00Z"),
        ],
    )
    .await;
    env.write(
        "status/r.ach",
        &nacha("261110", &[Entry("P-1", "1", 100, "99", "R01", "")]),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    assert_eq!(row_of(&r, "091000019900001").0, "RETURNED");
    assert_ne!(row_of(&r, "P-1").0, "RETURNED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_number_names_the_payout_by_the_provider_id_the_ledger_recorded() {
    let env = job(
        Backend::Sqlite,
        "nacha",
        "payment_id_field = \"trace_number\"\nledger_key = \"provider_payment_id\"",
    )
    .await;
    // P-1's row and attempt hold the ACH trace number of its payout; P-2's a longer one that
    // starts with it (a prefix is no match).
    env.import(
        &format!(
            "P-1,{IBAN},1.00,USD,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,091000019900001\n\
             P-2,{IBAN},1.00,USD,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-2,0910000199000011"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,SUCCEEDED,091000019900001,\n\
         A-2,P-2,2026-11-10T09:00:00Z,,SUCCEEDED,0910000199000011,",
    )
    .await;
    env.write(
        "status/r.ach",
        &nacha(
            "261110",
            &[
                Entry("x", "1", 100, "99", "R01", ""),
                Entry("y", "1", 100, "99", "R01", ""),
            ],
        ),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    assert_eq!(row_of(&r, "P-1").0, "RETURNED");
    assert_ne!(row_of(&r, "P-2").0, "RETURNED");
    // The second entry's original trace number (…00002) is nobody's provider id.
    let rows = read_columns(
        &r.out_dir.join("results.csv"),
        &["outcome", "rule", "detail"],
    );
    let orphan = rows
        .iter()
        .find(|r| r[1] == "payout_status:bank#091000019900002")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(orphan[0], "ORPHAN_AT_PROVIDER");
    assert!(
        orphan[2].contains("the provider id of no payment"),
        "{}",
        orphan[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_that_may_be_about_another_attempt_resolves_nothing() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    // P-1 was sent twice (a retry); P-2 once, at 12:00, after the bank wrote its file.
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T08:00:00Z,2026-11-10T09:00:00Z,A-1b,\n\
             P-2,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T08:00:00Z,2026-11-10T12:00:00Z,A-2,"
        ),
        "A-1a,P-1,2026-11-10T08:00:00Z,2026-11-10T08:01:00Z,FAILED,,declined\n\
         A-1b,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T12:00:00Z,,UNKNOWN,,timeout",
    )
    .await;
    env.write(
        "status/sts.xml",
        &pain002(
            "2026-11-10T11:00:00Z",
            &[
                Tx("P-1", "RJCT", Some("AC01"), None),
                Tx("P-2", "RJCT", Some("AC01"), None),
            ],
        ),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    says(&r, "P-1", "AMBIGUOUS", "sent more than once");
    says(&r, "P-2", "AMBIGUOUS", "before the current attempt started");
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(status(&env, "P-1").await, "UNKNOWN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_after_a_reviewers_succeeded_is_a_critical_contradiction() {
    let env = job(Backend::Sqlite, "pain002", "").await;
    unknown(&env, &["PAY-1"]).await;
    // A reviewer moved PAY-1 to SUCCEEDED at noon (anyone but recon is a person's word).
    env.exec("UPDATE payments SET status = 'SUCCEEDED' WHERE payment_id = 'PAY-1'")
        .await;
    env.exec(
        "INSERT INTO payment_status_history (payment_id, from_status, to_status, attempt_id, \
         actor, reason, changed_at) VALUES ('PAY-1', 'UNKNOWN', 'SUCCEEDED', 'A-PAY-1', 'alice', \
         'paid, says the bank', '2026-11-10 12:00:00.000000')",
    )
    .await;
    env.write(
        "status/sts.xml",
        &pain002(
            "2026-11-10T18:00:00Z",
            &[Tx("PAY-1", "RJCT", Some("AC01"), None)],
        ),
    );
    let r = run(&env, "2026-11-10", "2026-11-11T00:00:00Z", "r1").await;
    let detail = says(
        &r,
        "PAY-1",
        "CONTRADICTED",
        "reviewer alice decided this payment SUCCEEDED",
    );
    assert!(detail.contains("RJCT rejected (AC01)"), "{detail}");
    assert_eq!(status(&env, "PAY-1").await, "SUCCEEDED");
    assert_eq!(r.summary.transitions.planned, 0);
    assert_eq!(tickets(&env).await, ["CONTRADICTED|CRITICAL|PAY-1"]);
}

#[test]
fn a_bad_payout_status_block_names_the_file_line_and_key() {
    let cases = [
        (
            "format = \"pain002\"\npath = \"s\"\nbogus = 1\n",
            "bogus = 1",
            "unknown field `bogus`",
        ),
        (
            "format = \"camt\"\npath = \"s\"\n",
            "format = \"camt\"",
            "key `payout_status[0].format`: unsupported format",
        ),
        (
            "format = \"nacha\"\npath = \"s\"\npayment_id_field = \"OrgnlEndToEndId\"\n",
            "payment_id_field = \"OrgnlEndToEndId\"",
            "key `payout_status[0].payment_id_field`: \"OrgnlEndToEndId\" is no field of a nacha record",
        ),
        (
            "format = \"nacha\"\npath = \"s\"\nledger_key = \"iban\"\n",
            "ledger_key = \"iban\"",
            "key `payout_status[0].ledger_key`: unknown value",
        ),
        (
            "format = \"pain002\"\npath = \"s\"\ntimezone = \"Mars/Base\"\n",
            "timezone = \"Mars/Base\"",
            "key `payout_status[0].timezone`: unknown time zone",
        ),
    ];
    let env = TestEnv::new();
    let base = std::fs::read_to_string(&env.config_path).unwrap();
    for (keys, line, says) in cases {
        let text = format!("{base}\n[[payout_status]]\nname = \"bank\"\n{keys}");
        env.write("recon.toml", &text);
        let err = recon::config::Config::load(&env.config_path).expect_err(keys);
        assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG);
        let msg = format!("{err:#}");
        let n = 1 + text.lines().position(|l| l == line).unwrap();
        assert!(
            msg.contains("recon.toml: TOML parse error at line "),
            "{msg}"
        );
        assert!(msg.contains(&format!("\n{n} | {line}\n")), "{msg}");
        assert!(msg.contains(says), "{msg}");
    }
    // A name a source has, or a second block's, is refused on its line.
    let text = format!(
        "{base}\n{}{}",
        block("bank", "pain002", "s", ""),
        block("bank", "nacha", "t", "")
    );
    env.write("recon.toml", &text);
    let msg = format!(
        "{:#}",
        recon::config::Config::load(&env.config_path).unwrap_err()
    );
    assert!(
        msg.contains("key `payout_status[1].name`: duplicate"),
        "{msg}"
    );
    let text = format!("{base}\n{}", block("psp", "pain002", "s", ""));
    env.write("recon.toml", &text);
    let msg = format!(
        "{:#}",
        recon::config::Config::load(&env.config_path).unwrap_err()
    );
    assert!(msg.contains("is the name of a [[source]] too"), "{msg}");
}
