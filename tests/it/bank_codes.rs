//! Bank statements as some banks really write them (issue 15, points 14 and 15): BAI2 account
//! summaries continued in `88` records, and ISO 4217 codes without a minor unit.

use recon::config::Format;
use recon::sources::{self, ParseContext, Parsed};

fn ctx() -> ParseContext {
    ParseContext {
        source: "bank".into(),
        file: "f".into(),
        timezone: chrono_tz::UTC,
        encoding: None,
    }
}

fn parse(format: Format, text: &str) -> Result<Parsed, String> {
    sources::parse_bank_bytes(format, &ctx(), text.as_bytes()).map_err(|e| format!("{e:#}"))
}

/// A one-account BAI2 file whose `03` record is `account` (with its continuations); the
/// record counts in the trailers count the `88`s.
fn bai2(account: &str) -> String {
    let n88 = account.matches("\n88,").count() as u64;
    format!(
        "01,SENDER,RECEIVER,261127,0800,1,80,1,2/\n02,RECEIVER,BANK,1,261127,2400,EUR,2/\n\
         {account}\n16,195,2500,Z,B1,PAY-1,incoming/\n16,495,500,Z,B2,,fee/\n49,25000,{}/\n\
         98,25000,1,{}/\n99,25000,1,{}/\n",
        4 + n88,
        6 + n88,
        8 + n88
    )
}

/// Opening 100.00, closing 120.00, entries +25.00 −5.00: the summary is read right only if
/// the balances chain and the control totals agree.
fn assert_read_right(account: &str) {
    let p = parse(Format::Bai2, &bai2(account)).unwrap_or_else(|e| panic!("{account}: {e}"));
    let amounts: Vec<i64> = p.lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, vec![2500, -500], "{account}");
    assert_eq!(
        p.facts[0].balance_chains(),
        Some(true),
        "{account}: {:?}",
        p.facts
    );
    assert_eq!(p.facts[0].declared_totals_agree(), Some(true), "{account}");
    assert!(
        p.facts[0].control_problems.is_empty(),
        "{account}: {:?}",
        p.facts
    );
}

#[test]
fn bai2_account_summaries_continued_in_88_records_are_aligned_as_the_spec_defines() {
    let acct = "03,DE89370400440532013000,EUR";
    // In one record (the reference).
    assert_read_right(&format!("{acct},010,10000,,,015,12000,,/"));
    // The group's defaulted count and funds type close the record; the next group is in the 88.
    assert_read_right(&format!("{acct},010,10000,,/\n88,015,12000,,/"));
    // As some US banks write it: one more `,` before the `/`, which only ends the physical
    // record (this was "summary amount without a type code").
    assert_read_right(&format!("{acct},010,10000,,,/\n88,015,12000,,/"));
    // A group split between its type code and its amount.
    assert_read_right(&format!("{acct},010,10000,,,015,/\n88,12000,,/"));
    // Several continuations.
    assert_read_right(&format!("{acct},010,/\n88,10000,,,/\n88,015,12000,,/"));
}

#[test]
fn bai2_really_malformed_summaries_are_still_rejected_with_their_line() {
    let acct = "03,DE89370400440532013000,EUR";
    // An amount without a type code inside a record, with or without a continuation after it.
    for account in [
        format!("{acct},010,10000,,,,77,,/"),
        format!("{acct},010,10000,,,,77,,/\n88,015,12000,,/"),
    ] {
        let e = parse(Format::Bai2, &bai2(&account))
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("f:3: record 03: summary amount \"77\" without a type code"),
            "{account}: {e}"
        );
    }
    // A continuation that shifts the groups is caught by the balances, not taken as read.
    let p = parse(
        Format::Bai2,
        &bai2(&format!("{acct},010,10000,,/\n88,,015,12000,,/")),
    );
    match p {
        Err(e) => assert!(e.contains("f:3: record 03"), "{e}"),
        Ok(p) => assert_ne!(p.facts[0].balance_chains(), Some(true), "{:?}", p.facts),
    }
}

/// The one-entry camt.053 of the formats tests, in currency `code`.
fn camt(code: &str) -> String {
    crate::formats::CAMT.replace("Ccy=\"EUR\"", &format!("Ccy=\"{code}\""))
}

#[test]
fn iso_codes_without_a_minor_unit_parse_with_the_code_kept() {
    // XXX (no currency) and XTS (testing) in anonymised camt.053 samples: two decimals.
    for code in ["XXX", "XTS", "XDR"] {
        let p = parse(Format::Camt053, &camt(code)).expect(code);
        assert_eq!(p.lines[0].currency, code);
        assert_eq!(p.lines[0].amount_minor, 1000, "{code}");
    }
    // Precious metals are kept in fractions of an ounce: four decimals.
    let p = parse(Format::Camt053, &camt("XAU").replace("10.00", "1.2345")).expect("XAU");
    assert_eq!(
        (p.lines[0].currency, p.lines[0].amount_minor),
        ("XAU", 12345)
    );
    // More decimals than the working exponent are rejected with the position, never rounded.
    let e = parse(Format::Camt053, &camt("XXX").replace("10.00", "10.005"))
        .err()
        .unwrap_or_default();
    assert!(
        e.contains("f:8: entry 1") && e.contains("more decimals"),
        "{e}"
    );
    // A code ISO 4217 does not have is still an error.
    let e = parse(Format::Camt053, &camt("XYZ"))
        .err()
        .unwrap_or_default();
    assert!(e.contains("XYZ"), "{e}");
    // MT940 with the testing code.
    let mt940 = ":20:REF1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C261126XTS100,00\n\
                 :61:2611271127D25,50NTRFPAY-1//B1\n:86:/EREF/PAY-1/\n:62F:C261127XTS74,50\n-\n";
    let p = parse(Format::Mt940, mt940).expect("mt940 XTS");
    assert_eq!(
        (p.lines[0].currency, p.lines[0].amount_minor),
        ("XTS", -2550)
    );
    assert_eq!(p.facts[0].balance_chains(), Some(true));
}
