//! The files a bank sends back about payouts (issue 46): pain.002 status reports and NACHA ACH
//! returns / notifications of change, read from own fixtures in `tests/formats/payout/`
//! (written for recon from the formats' specifications) into status records, and printed by
//! `recon parse`. Each test names what a reader must keep apart: ids that differ only in case
//! or are prefixes of each other, a group status against a transaction's own, an ordinary
//! entry against a return.

use recon::model::PayoutFormat;
use recon::sources::payout::{Level, PayoutFile, PayoutStatus, State};
use recon::sources::{self, InputLimits, Recipients};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

fn fixture(rel: &str) -> PathBuf {
    crate::format_files::repo()
        .join("tests/formats/payout")
        .join(rel)
}

fn read(format: PayoutFormat, rel: &str) -> PayoutFile {
    sources::read_payout_file(format, &fixture(rel), &InputLimits::default())
        .unwrap_or_else(|e| panic!("{rel}: {e:#}"))
}

fn error(format: PayoutFormat, rel: &str) -> String {
    let e =
        sources::read_payout_file(format, &fixture(rel), &InputLimits::default()).expect_err(rel);
    assert_eq!(recon::exit::code_for(&e), recon::exit::INPUT, "{e:#}");
    format!("{e:#}")
}

fn parse_bytes(format: PayoutFormat, bytes: &[u8]) -> anyhow::Result<PayoutFile> {
    sources::parse_payout_bytes(format, &Arc::from("t.file"), bytes, &InputLimits::default())
}

/// The one record whose end-to-end id is exactly `id`.
fn by_e2e<'r>(records: &'r [PayoutStatus], id: &str) -> &'r PayoutStatus {
    let found: Vec<&PayoutStatus> = records
        .iter()
        .filter(|r| r.original_end_to_end_id.as_deref() == Some(id))
        .collect();
    assert_eq!(found.len(), 1, "records for {id:?}: {found:?}");
    found[0]
}

fn day(s: &str) -> chrono::NaiveDate {
    s.parse().expect("date")
}

#[test]
fn pain002_transaction_statuses_keep_ids_that_differ_in_case_or_are_prefixes_apart() {
    let f = read(PayoutFormat::Pain002, "pain002/recon_tx_level_v10.xml");
    let r = &f.records;
    assert_eq!(r.len(), 6, "{r:#?}");
    // Payment information A is partly accepted: its transactions say which.
    assert_eq!(
        (r[0].level, r[0].state, r[0].code.as_str(), r[0].line),
        (Level::PaymentInformation, State::Partial, "PART", 15)
    );
    assert_eq!(
        r[0].original_payment_information_id.as_deref(),
        Some("PMTINF-A")
    );
    let accepted = by_e2e(r, "PAY-1");
    assert_eq!(
        (accepted.state, accepted.code.as_str(), accepted.level),
        (State::Accepted, "ACSC", Level::Transaction)
    );
    assert_eq!(accepted.original_instruction_id.as_deref(), Some("INSTR-1"));
    assert_eq!(accepted.trace_number.as_deref(), Some("BANKREF-1"));
    assert_eq!(accepted.amount, Some((125_000, "EUR")));
    assert_eq!(accepted.date, Some(day("2026-11-26")));
    assert_eq!(accepted.inherited_from, None);
    assert_eq!(accepted.position, "OrgnlPmtInfAndSts[1]/TxInfAndSts[1]");
    assert_eq!(accepted.line, 18);
    // The rejection is pay-1's alone, not PAY-1's (case) nor PAY-10's (prefix).
    let rejected = by_e2e(r, "pay-1");
    assert_eq!(rejected.state, State::Rejected);
    assert_eq!(rejected.reason.as_deref(), Some("AC04"));
    assert_eq!(
        rejected.additional_info.as_deref(),
        Some("Account closed / DE89370400440532013000 closed since 2026-10-01")
    );
    assert_eq!(rejected.amount, Some((5000, "JPY")));
    // No requested execution date: the report's creation day.
    assert_eq!(rejected.date, Some(day("2026-11-27")));
    assert_eq!(by_e2e(r, "PAY-10").state, State::Pending);
    assert_eq!(
        r.iter().filter(|x| x.state == State::Rejected).count(),
        3,
        "pay-1, block B and PAY-2"
    );
    for id in ["PAY-1", "PAY-10"] {
        assert_ne!(by_e2e(r, id).state, State::Rejected, "{id}");
    }
}

#[test]
fn pain002_a_block_status_is_taken_by_its_transactions_and_says_so() {
    let f = read(PayoutFormat::Pain002, "pain002/recon_tx_level_v10.xml");
    let block = f
        .records
        .iter()
        .find(|x| {
            x.original_payment_information_id.as_deref() == Some("PMTINF-B")
                && x.level == Level::PaymentInformation
        })
        .expect("block B");
    assert_eq!(
        (block.state, block.reason.as_deref()),
        (State::Rejected, Some("AM04"))
    );
    assert!(
        block.applies_to().contains(
            "every transaction of payment information PMTINF-B (original message PAYOUTS-20261126)"
        ),
        "{}",
        block.applies_to()
    );
    let tx = by_e2e(&f.records, "PAY-2");
    assert_eq!(tx.state, State::Rejected);
    assert_eq!(tx.code, "RJCT");
    assert_eq!(tx.inherited_from, Some(Level::PaymentInformation));
    assert_eq!(tx.reason.as_deref(), Some("AM04"));
    assert_eq!(
        tx.applies_to(),
        "this transaction (status of its payment-information level)"
    );
}

#[test]
fn pain002_group_status_v03_covers_a_transaction_without_its_own() {
    let f = read(PayoutFormat::Pain002, "pain002/recon_group_level_v03.xml");
    assert_eq!(f.records.len(), 2);
    let g = &f.records[0];
    assert_eq!(
        (g.level, g.state, g.code.as_str()),
        (Level::Group, State::Accepted, "ACTC")
    );
    assert_eq!(g.original_message_id.as_deref(), Some("PAYOUTS-20261126-B"));
    assert!(
        g.applies_to()
            .starts_with("every transaction of original message PAYOUTS-20261126-B"),
        "{}",
        g.applies_to()
    );
    let tx = &f.records[1];
    assert_eq!(tx.level, Level::Transaction);
    assert_eq!(tx.inherited_from, Some(Level::Group));
    assert_eq!(tx.state, State::Accepted);
    assert_eq!(tx.original_end_to_end_id, None);
    assert_eq!(tx.original_instruction_id.as_deref(), Some("INSTR-9"));
    assert_eq!(tx.amount, Some((1, "EUR")));
    // pain.002.001.03 writes ReqdExctnDt as a plain date.
    assert_eq!(tx.date, Some(day("2026-11-26")));
}

#[test]
fn pain002_an_unknown_status_names_the_file_line_and_element() {
    let e = error(PayoutFormat::Pain002, "pain002/recon_unknown_status.xml");
    assert!(
        e.contains("recon_unknown_status.xml:15: OrgnlPmtInfAndSts[1]/TxInfAndSts[1]/TxSts: status \"ACXX\" is not one recon reads at transaction level"),
        "{e}"
    );
}

#[test]
fn pain002_malformed_reports_are_errors_with_their_position() {
    let doc = |body: &str| {
        format!(
            "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.002.001.09\">\n<CstmrPmtStsRpt>\n<GrpHdr><MsgId>M</MsgId><CreDtTm>2026-11-27T06:00:00</CreDtTm></GrpHdr>\n<OrgnlGrpInfAndSts><OrgnlMsgId>O</OrgnlMsgId></OrgnlGrpInfAndSts>\n{body}\n</CstmrPmtStsRpt>\n</Document>\n"
        )
    };
    let cases = [
        (
            doc(
                "<OrgnlPmtInfAndSts><OrgnlPmtInfId>P</OrgnlPmtInfId>\n<TxInfAndSts><TxSts>RJCT</TxSts></TxInfAndSts></OrgnlPmtInfAndSts>",
            ),
            "t.file:6: OrgnlPmtInfAndSts[1]/TxInfAndSts[1]: neither OrgnlEndToEndId nor OrgnlInstrId",
        ),
        (
            doc(
                "<OrgnlPmtInfAndSts><OrgnlPmtInfId>P</OrgnlPmtInfId>\n<TxInfAndSts><OrgnlEndToEndId>E</OrgnlEndToEndId></TxInfAndSts></OrgnlPmtInfAndSts>",
            ),
            "t.file:6: OrgnlPmtInfAndSts[1]/TxInfAndSts[1]: no TxSts, and neither PmtInfSts nor GrpSts",
        ),
        (
            doc(
                "<OrgnlPmtInfAndSts><OrgnlPmtInfId>P</OrgnlPmtInfId>\n<TxInfAndSts><OrgnlEndToEndId>E</OrgnlEndToEndId><TxSts>ACSC</TxSts>\n<OrgnlTxRef><Amt><InstdAmt Ccy=\"EUR\">1.001</InstdAmt></Amt></OrgnlTxRef></TxInfAndSts></OrgnlPmtInfAndSts>",
            ),
            "t.file:7: OrgnlPmtInfAndSts[1]/TxInfAndSts[1]/OrgnlTxRef/Amt",
        ),
        (doc("<OrgnlPmtInfAndSts>"), "t.file:"),
        (
            doc("").replace("pain.002.001.09", "camt.053.001.08"),
            "t.file:1: namespace \"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\" is not pain.002",
        ),
        (doc(""), "t.file:4: the report states no status"),
    ];
    for (xml, want) in cases {
        let e = format!(
            "{:#}",
            parse_bytes(PayoutFormat::Pain002, xml.as_bytes()).expect_err(want)
        );
        assert!(e.contains(want), "{e}\nwanted: {want}");
    }
}

#[test]
fn nacha_returns_and_a_notification_of_change_are_records_and_an_ordinary_entry_is_not() {
    let f = read(PayoutFormat::Nacha, "nacha/recon_returns_and_noc.ach");
    let r = &f.records;
    assert_eq!(r.len(), 4, "{r:#?}");
    let ids: Vec<&str> = r
        .iter()
        .filter_map(|x| x.individual_id.as_deref())
        .collect();
    assert_eq!(ids, ["PAY-1", "pay-1", "PAY-10", "PAY-12"]);
    let r01 = &r[0];
    assert_eq!(
        (r01.state, r01.code.as_str(), r01.reason.as_deref()),
        (State::Returned, "99", Some("R01"))
    );
    assert_eq!(r01.trace_number.as_deref(), Some("091000010000101"));
    assert_eq!(
        r01.original_instruction_id.as_deref(),
        Some("091000010000001")
    );
    assert_eq!(r01.amount, Some((12_354, "USD")));
    assert_eq!(r01.account.as_deref(), Some("12345678901"));
    assert_eq!(r01.additional_info.as_deref(), Some("INSUFFICIENT FUNDS"));
    assert_eq!(r01.date, Some(day("2026-11-26")));
    assert_eq!(r01.date_of_death, None);
    assert_eq!(
        (r01.line, r01.position.as_str()),
        (3, "batch 1 (PPD), entry 1")
    );
    // A non-standard reason code is kept as written.
    assert_eq!(r[1].reason.as_deref(), Some("R97"));
    assert_eq!(r[1].amount, Some((106_161, "USD")));
    assert_eq!(r[1].additional_info, None);
    assert_eq!(r[2].reason.as_deref(), Some("R15"));
    assert_eq!(r[2].date_of_death, Some(day("2026-11-20")));
    let noc = &r[3];
    assert_eq!(
        (noc.state, noc.code.as_str(), noc.reason.as_deref()),
        (State::NotificationOfChange, "98", Some("C01"))
    );
    assert_eq!(noc.corrected_data.as_deref(), Some("1918171614"));
    assert_eq!(noc.amount, Some((0, "USD")));
    // A COR batch's effective date of zeros is no date.
    assert_eq!(noc.date, None);
    assert_eq!(noc.position, "batch 2 (COR), entry 1");
    assert_eq!(f.notes.len(), 1);
    assert!(f.notes[0].contains("1 ordinary entry"), "{:?}", f.notes);
}

#[test]
fn nacha_an_ordinary_debit_file_holds_no_return() {
    let f = read(PayoutFormat::Nacha, "nacha/recon_ordinary_debits.ach");
    assert!(f.records.is_empty(), "{:?}", f.records);
    assert!(f.notes[0].contains("2 ordinary entries"), "{:?}", f.notes);
}

#[test]
fn nacha_a_malformed_record_names_its_line_and_field() {
    let e = error(PayoutFormat::Nacha, "nacha/recon_bad_amount.ach");
    assert!(
        e.contains("recon_bad_amount.ach:3: entry detail: amount (positions 30-39) \"0000x12354\" is not 10 digits"),
        "{e}"
    );
    let e = error(PayoutFormat::Nacha, "nacha/recon_bad_batch_count.ach");
    assert!(
        e.contains("recon_bad_batch_count.ach:5: batch control: entry/addenda count (positions 5-10) says 3, but the batch of line 2 has 2"),
        "{e}"
    );
    let good = std::fs::read_to_string(fixture("nacha/recon_returns_and_noc.ach")).expect("read");
    let lines: Vec<&str> = good.lines().collect();
    // Cut before the file control: truncated.
    let cut = lines[..14].join("\n");
    let e = format!(
        "{:#}",
        parse_bytes(PayoutFormat::Nacha, cut.as_bytes()).unwrap_err()
    );
    assert!(
        e.contains("ends without its file control record (9)"),
        "{e}"
    );
    // A record longer than 94 characters.
    let long = good.replacen("INSUFFICIENT FUNDS", "INSUFFICIENT FUNDS!", 1);
    let e = format!(
        "{:#}",
        parse_bytes(PayoutFormat::Nacha, long.as_bytes()).unwrap_err()
    );
    assert!(e.contains("t.file:4: record is 95 characters"), "{e}");
    // A reason code that is no R code.
    let bad = good.replacen("799R97", "799X97", 1);
    let e = format!(
        "{:#}",
        parse_bytes(PayoutFormat::Nacha, bad.as_bytes()).unwrap_err()
    );
    assert!(
        e.contains("t.file:6: addenda 99: return reason code (positions 4-6) \"X97\""),
        "{e}"
    );
    // An addenda for an entry whose indicator says it has none.
    let bad = good.replacen("DAVE EXAMPLE            0", "DAVE EXAMPLE            1", 1);
    let e = format!(
        "{:#}",
        parse_bytes(PayoutFormat::Nacha, bad.as_bytes()).unwrap_err()
    );
    assert!(e.contains("t.file:9: entry detail: addenda indicator (position 79) is 1, but no addenda record (7) follows"), "{e}");
    // Not a NACHA file.
    let e = format!(
        "{:#}",
        parse_bytes(PayoutFormat::Nacha, b"date,amount\n").unwrap_err()
    );
    assert!(
        e.contains("t.file:1: the first record is of type \"d\""),
        "{e}"
    );
}

#[test]
fn nacha_a_file_without_line_breaks_reads_as_94_character_records() {
    let good = std::fs::read_to_string(fixture("nacha/recon_ordinary_debits.ach")).expect("read");
    let joined: String = good.lines().map(|l| format!("{l:<94}")).collect();
    let f = parse_bytes(PayoutFormat::Nacha, joined.as_bytes()).expect("unbroken");
    assert!(f.records.is_empty());
    assert!(f.notes[0].contains("2 ordinary entries"), "{:?}", f.notes);
}

#[test]
fn recon_parse_prints_status_records_with_accounts_masked() {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    sources::print_payouts(
        PayoutFormat::Nacha,
        &[fixture("nacha/recon_returns_and_noc.ach")],
        &InputLimits::default(),
        Recipients::Masked,
        &mut out,
        &mut notes,
    )
    .expect("print");
    let out = String::from_utf8(out).expect("utf-8");
    let notes = String::from_utf8(notes).expect("utf-8");
    let mut rows = out.lines();
    assert_eq!(rows.next(), Some(sources::PAYOUT_HEADER.join(",").as_str()));
    assert_eq!(rows.count(), 4);
    assert!(out.contains(",returned,99,R01,"), "{out}");
    assert!(out.contains(",notification-of-change,98,C01,"), "{out}");
    assert!(
        out.contains("****8901") && !out.contains("12345678901"),
        "{out}"
    );
    // C01's corrected data is an account number.
    assert!(
        out.contains("****1614") && !out.contains("1918171614"),
        "{out}"
    );
    assert!(notes.contains("4 status record(s): 0 accepted, 0 pending, 0 partial, 0 rejected, 3 returned, 1 notification(s) of change"), "{notes}");
}

#[test]
fn recon_parse_masks_an_account_quoted_in_the_additional_information() {
    let print = |recipients| {
        let mut out = Vec::new();
        sources::print_payouts(
            PayoutFormat::Pain002,
            &[fixture("pain002/recon_tx_level_v10.xml")],
            &InputLimits::default(),
            recipients,
            &mut out,
            std::io::sink(),
        )
        .expect("print");
        String::from_utf8(out).expect("utf-8")
    };
    let masked = print(Recipients::Masked);
    assert!(
        masked.contains("Account closed / ****3000 closed since 2026-10-01"),
        "{masked}"
    );
    assert!(!masked.contains("DE89370400440532013000"), "{masked}");
    assert!(
        print(Recipients::Unmasked).contains("DE89370400440532013000 closed"),
        "unmasked on request"
    );
}

#[test]
fn recon_parse_on_the_command_line_reads_pain002() {
    let out = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["parse", "--format", "pain002"])
        .arg(fixture("pain002/recon_group_level_v03.xml"))
        .stdin(Stdio::null())
        .output()
        .expect("run recon");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = stdout.lines().collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(rows[1].contains(",group,accepted,ACTC,"), "{stdout}");
    assert!(rows[2].contains(",transaction,accepted,ACTC,,"), "{stdout}");
    assert!(
        rows[2].ends_with(",group,this transaction (status of its group level)"),
        "{stdout}"
    );
    // An unreadable file prints nothing and exits with the input code.
    let out = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["parse", "--format", "nacha"])
        .arg(fixture("nacha/recon_ordinary_debits.ach"))
        .arg(fixture("nacha/recon_bad_amount.ach"))
        .stdin(Stdio::null())
        .output()
        .expect("run recon");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(out.status.code(), Some(recon::exit::INPUT));
}
