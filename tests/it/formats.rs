//! Statement formats: a golden `recon parse` output per own fixture (`recon_*` in
//! `tests/formats/input/`, written for recon in the shapes of real files), rejection of broken
//! files with their position, encodings, re-delivery idempotence, and parsers that never
//! panic on arbitrary bytes. The public real files are checked by their own target
//! (`tests/real/formats.rs`, `cargo test --test real`, docs/testing.md).
//!
//! Goldens are insta snapshots in `tests/formats/golden/<folder>/<file>.csv.snap` (the
//! canonical lines) and `….facts.snap` (what each statement declared: balances, totals,
//! period). They were reviewed by eye against the source files; after a deliberate change,
//! run `INSTA_UPDATE=always cargo test --test it formats::golden` and review the diff.

use crate::format_files::{Expect, csv_of, ctx, no_panic, repo};
use proptest::prelude::*;
use recon::config::{Format, SourceConfig};
use recon::sources::{self, SourceLoad};
use std::path::{Path, PathBuf};

use Expect::{Golden, Rejected};

/// The own fixtures (folder-relative to `tests/formats/input/`), their format, and what each
/// must give. csv/xlsx files read with `tests/formats/mappings/<file name>.toml`.
const FILES: &[(&str, Format, Expect)] = &[
    ("bank-csv/recon_fx_card.csv", Format::Csv, Golden),
    ("bank-csv/recon_oberbank_wide.csv", Format::Csv, Golden),
    ("bank-csv/recon_notices.csv", Format::Csv, Golden),
    (
        "provider-csv/recon_adyen_balance_fee.csv",
        Format::Csv,
        Golden,
    ),
    ("bank-csv/recon_running_balance.csv", Format::Csv, Golden),
    (
        "bank-csv/recon_fee_no_counterparty.csv",
        Format::Csv,
        Golden,
    ),
    ("bank-csv/recon_apostrophe_quotes.csv", Format::Csv, Golden),
    (
        "bank-csv/recon_misgrouped_digits.csv",
        Format::Csv,
        Rejected(
            "recon_misgrouped_digits.csv:3: column \"Amount\": amount \"47,59\": digits around the thousands separator ',' are not groups of three",
        ),
    ),
    ("bai2/recon_03_continued.bai2", Format::Bai2, Golden),
    (
        "provider-csv/recon_adyen_settlement_batch_7.csv",
        Format::Csv,
        Golden,
    ),
    ("camt053/recon_xxx_anonymised.xml", Format::Camt053, Golden),
    (
        "bank-csv/recon_latin1_crlf.csv",
        Format::Csv,
        Rejected(
            "recon_latin1_crlf.csv:2: column #9 (\"Name\"): not valid UTF-8 (hint: set the source's `encoding = \"windows-1252\"`",
        ),
    ),
    ("camt052/recon_intraday.xml", Format::Camt052, Golden),
    ("ofx/recon_sgml_checking.ofx", Format::Ofx, Golden),
    ("ofx/recon_xml_creditcard.qfx", Format::Ofx, Golden),
    (
        "ofx/recon_bad_amount.ofx",
        Format::Ofx,
        Rejected("recon_bad_amount.ofx:49: <TRNAMT>: "),
    ),
    ("jsonl/recon_provider_export.jsonl", Format::Jsonl, Golden),
    (
        "jsonl/recon_missing_key.jsonl",
        Format::Jsonl,
        Rejected("recon_missing_key.jsonl:2: column \"/amount/value\": empty amount"),
    ),
    (
        "parquet/recon_provider_export.parquet",
        Format::Parquet,
        Golden,
    ),
    (
        "mt940/recon_ibm852.sta",
        Format::Mt940,
        Rejected(
            "recon_ibm852.sta:6: not valid UTF-8 (hint: set the source's `encoding = \"ibm852\"`; the file decodes cleanly as ibm852)",
        ),
    ),
];

/// The payout status fixtures (`tests/formats/payout/`), for the never-panic property; what
/// they read as is checked in `payout_formats.rs`.
const PAYOUT_FILES: &[(&str, recon::model::PayoutFormat)] = &[
    (
        "pain002/recon_tx_level_v10.xml",
        recon::model::PayoutFormat::Pain002,
    ),
    (
        "pain002/recon_group_level_v03.xml",
        recon::model::PayoutFormat::Pain002,
    ),
    (
        "nacha/recon_returns_and_noc.ach",
        recon::model::PayoutFormat::Nacha,
    ),
    (
        "nacha/recon_ordinary_debits.ach",
        recon::model::PayoutFormat::Nacha,
    ),
];

/// The own fixtures' folder.
fn inputs() -> PathBuf {
    repo().join("tests/formats/input")
}

fn input(rel: &str) -> PathBuf {
    inputs().join(rel)
}

#[test]
fn golden_outputs_of_every_own_fixture() {
    crate::format_files::check_goldens(&inputs(), FILES);
}

/// Every file of `tests/formats/input/` is an own fixture with an expectation: no file of a
/// third party comes into the repository (their goldens are checked by `tests/real`).
#[test]
fn every_input_is_an_own_fixture_with_an_expectation() {
    let wrong: Vec<String> = crate::format_files::files_below(&inputs())
        .into_iter()
        .filter(|rel| {
            let own = Path::new(rel)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("recon_"));
            !own || !FILES.iter().any(|(r, _, _)| r == rel)
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "inputs that are not own recon_* fixtures with an expectation: {wrong:?}"
    );
}

fn bank_err(format: Format, bytes: &[u8]) -> String {
    match sources::parse_bank_bytes(format, &ctx("f"), bytes) {
        Ok(p) => panic!("accepted: {} lines", p.lines.len()),
        Err(e) => format!("{e:#}"),
    }
}

pub(crate) const CAMT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02">
 <BkToCstmrStmt>
  <Stmt>
   <Id>S1</Id>
   <Acct><Id><IBAN>DE89370400440532013000</IBAN></Id></Acct>
   <Ntry>
    <Amt Ccy="EUR">10.00</Amt>
    <CdtDbtInd>CRDT</CdtDbtInd>
    <Sts>BOOK</Sts>
    <BookgDt><Dt>2026-11-27</Dt></BookgDt>
   </Ntry>
  </Stmt>
 </BkToCstmrStmt>
</Document>
"#;

#[test]
fn broken_camt_files_are_rejected_with_their_position() {
    assert!(sources::parse_bank_bytes(Format::Camt053, &ctx("f"), CAMT.as_bytes()).is_ok());
    let truncated = &CAMT[..CAMT.find("</Ntry>").expect("tag")];
    let e = bank_err(Format::Camt053, truncated.as_bytes());
    assert!(e.contains("f:") && e.contains("truncated"), "{e}");
    let e = bank_err(Format::Camt053, CAMT.replace("CRDT", "CRED").as_bytes());
    assert!(e.contains("f:9: entry 1: CdtDbtInd \"CRED\""), "{e}");
    let e = bank_err(Format::Camt053, CAMT.replace("10.00", "10.005").as_bytes());
    assert!(
        e.contains("f:8: entry 1") && e.contains("more decimals"),
        "{e}"
    );
    let e = bank_err(Format::Camt054, CAMT.as_bytes());
    assert!(e.contains("not <BkToCstmrDbtCdtNtfctn>"), "{e}");
    let e = bank_err(
        Format::Camt053,
        CAMT.replace("<Sts>BOOK</Sts>", "<Sts>BOOK</Sts><Amt>")
            .as_bytes(),
    );
    assert!(e.contains("f:") && e.contains("XML"), "{e}");
}

#[test]
fn camt_pending_entries_are_reported_not_loaded() {
    let p = sources::parse_bank_bytes(
        Format::Camt053,
        &ctx("f"),
        CAMT.replace("BOOK", "PDNG").as_bytes(),
    )
    .expect("parses");
    assert!(p.lines.is_empty());
    assert_eq!(p.facts[0].not_loaded.len(), 1, "{:?}", p.facts);
    assert!(p.facts[0].describe().contains("PDNG"));
}

const MT940: &str = ":20:REF1\n:25:NL91ABNA0417164300\n:28C:1/1\n:60F:C261126EUR100,00\n:61:2611271127D25,50NTRFPAY-1//B1\n:86:/EREF/PAY-1/IBAN/DE89370400440532013000/REMI/invoice 7/\n:61:2611271127RC5,NTRFNONREF\n:62F:C261127EUR69,50\n-\n";

#[test]
fn mt940_signs_reversals_and_balances() {
    let p = sources::parse_bank_bytes(Format::Mt940, &ctx("f"), MT940.as_bytes()).expect("parses");
    assert_eq!(p.lines.len(), 2);
    assert_eq!(p.lines[0].amount_minor, -2550);
    assert_eq!(p.lines[0].reference().as_deref(), Some("PAY-1"));
    assert_eq!(p.lines[0].recipient, "DE89370400440532013000");
    assert_eq!(p.lines[0].provider_txn_id.as_deref(), Some("B1"));
    assert_eq!(p.lines[0].line_no, 5);
    // RC: reversal of a credit, booked as a debit.
    assert_eq!(p.lines[1].amount_minor, -500);
    assert_eq!(p.lines[1].kind.as_str(), "REFUND");
    assert_eq!(p.facts[0].balance_chains(), Some(true));
    let broken = MT940.replace("C261127EUR69,50", "C261127EUR70,50");
    let p = sources::parse_bank_bytes(Format::Mt940, &ctx("f"), broken.as_bytes()).expect("parses");
    assert_eq!(
        p.facts[0].balance_chains(),
        Some(false),
        "a broken chain is a fact"
    );
}

#[test]
fn broken_mt940_files_are_rejected_with_their_line() {
    let e = bank_err(Format::Mt940, MT940.replace("D25,50", "D25x50").as_bytes());
    assert!(e.contains("f:5: :61:"), "{e}");
    let e = bank_err(Format::Mt940, MT940.replace(":28C:", ":99Z:").as_bytes());
    assert!(e.contains("f:3: unsupported tag :99Z:"), "{e}");
    let e = bank_err(
        Format::Mt940,
        MT940.replace("C261126EUR", "X261126EUR").as_bytes(),
    );
    assert!(e.contains("f:4: :60F:"), "{e}");
    let e = bank_err(Format::Mt940, b"no statement here\n");
    assert!(e.contains("no MT940/MT942 statement"), "{e}");
    let e = bank_err(
        Format::Mt940,
        MT940.replace(":25:NL91ABNA0417164300\n", "").as_bytes(),
    );
    assert!(e.contains("without an account (:25:)"), "{e}");
}

const BAI2: &str = "01,SENDER,RECEIVER,261127,0800,1,80,1,2/\n02,RECEIVER,BANK,1,261127,2400,EUR,2/\n03,DE89370400440532013000,EUR,010,10000,,,015,12000,,/\n16,195,2500,Z,B1,PAY-1,incoming/\n16,495,500,Z,B2,,fee/\n49,25000,4/\n98,25000,1,6/\n99,25000,1,8/\n";

#[test]
fn bai2_signs_and_control_totals() {
    let p = sources::parse_bank_bytes(Format::Bai2, &ctx("f"), BAI2.as_bytes()).expect("parses");
    let amounts: Vec<i64> = p.lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, vec![2500, -500]);
    assert_eq!(p.lines[0].reference().as_deref(), Some("PAY-1"));
    assert!(p.facts[0].control_problems.is_empty());
    assert_eq!(p.facts[0].declared_totals_agree(), Some(true));
    assert_eq!(p.facts[0].balance_chains(), Some(true));
    // A wrong control total is reported as a fact naming the trailer's line.
    let wrong = BAI2.replace("49,25000,4/", "49,25001,4/");
    let p = sources::parse_bank_bytes(Format::Bai2, &ctx("f"), wrong.as_bytes()).expect("parses");
    assert_eq!(p.facts[0].declared_totals_agree(), Some(false));
    assert!(
        p.facts[0].control_problems[0].contains("line 6: 49 control total 25001"),
        "{:?}",
        p.facts
    );
}

#[test]
fn broken_bai2_files_are_rejected_with_their_line() {
    let e = bank_err(Format::Bai2, BAI2.replace("99,25000,1,8/\n", "").as_bytes());
    assert!(e.contains("without the 99 file trailer"), "{e}");
    let e = bank_err(Format::Bai2, BAI2.replace("16,495", "16,995").as_bytes());
    assert!(e.contains("f:5: record 16: type code 995"), "{e}");
    let e = bank_err(Format::Bai2, BAI2.replace("2500,Z", "2x00,Z").as_bytes());
    assert!(e.contains("f:4: record 16: amount"), "{e}");
    let e = bank_err(
        Format::Bai2,
        BAI2.replace("1,261127,2400", "4,261127,2400").as_bytes(),
    );
    assert!(
        e.contains("f:2: record 02: group status 4 (test only)"),
        "{e}"
    );
    let e = bank_err(Format::Bai2, BAI2.replace("49,25000,4/\n", "").as_bytes());
    assert!(
        e.contains("f:6: record 98: group trailer inside an account"),
        "{e}"
    );
}

fn csv_source(extra: &str) -> SourceConfig {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("m.toml");
    std::fs::write(
        &p,
        format!(
            "delimiter = \";\"\ntimestamp_format = \"%d.%m.%Y\"\ndecimal_separator = \",\"\ncurrency = \"EUR\"\n{extra}\n[columns]\nbooked_at = \"Datum\"\namount = \"Betrag\"\nreference = \"Text\"\n"
        ),
    )
    .expect("write");
    SourceConfig::load_mapping(&p, Format::Csv).expect("mapping")
}

fn csv_lines(
    cfg: &SourceConfig,
    bytes: &[u8],
) -> (Vec<sources::StatementLine>, Vec<sources::Rejected>) {
    let out =
        sources::csv::parse_bytes(cfg.table_source(), csv_of(cfg), "t.csv", bytes).expect("parse");
    let (lines, rejected) = (out.lines, out.rejected);
    (lines, rejected)
}

#[test]
fn encodings_round_trip() {
    for (label, text) in [
        ("windows-1252", "Zahlung für Müller – 5 €"),
        ("latin1", "Überweisung Ærø"),
        ("iso-8859-2", "Átutalás jóváírása Łódź"),
        ("gbk", "付款 参考 编号"),
    ] {
        let enc = encoding_rs::Encoding::for_label(label.as_bytes()).expect("label");
        let body = format!("Datum;Betrag;Text\n27.11.2026;12,30;{text}\n");
        let (bytes, _, lossy) = enc.encode(&body);
        assert!(!lossy, "{label} cannot encode {text}");
        let cfg = csv_source(&format!("encoding = \"{label}\""));
        let (lines, rejected) = csv_lines(&cfg, &bytes);
        assert!(rejected.is_empty(), "{label}: {rejected:?}");
        assert_eq!(lines[0].reference().as_deref(), Some(text), "{label}");
        assert_eq!(lines[0].amount_minor, 1230);
        // Read as UTF-8 instead, the non-ASCII bytes are an error naming the line, never
        // replaced silently.
        if bytes != body.as_bytes() {
            let (_, rejected) = csv_lines(&csv_source(""), &bytes);
            assert_eq!(rejected.len(), 1, "{label}");
            assert_eq!(rejected[0].line, 2, "{label}");
        }
    }
    // A UTF-8 byte-order mark is not part of the first header name.
    let cfg = csv_source("");
    let (lines, _) = csv_lines(
        &cfg,
        "\u{feff}Datum;Betrag;Text\n27.11.2026;-1,00;x\n".as_bytes(),
    );
    assert_eq!(lines[0].amount_minor, -100);
}

#[test]
fn mt940_encoding_comes_from_the_mapping() {
    let text = ":20:X\n:25:ACC\n:60F:C261126HUF0,\n:61:261127C5,NTRFNONREF\n:86:Átutalás\n:62F:C261127HUF5,\n";
    let (bytes, _, _) = encoding_rs::ISO_8859_2.encode(text);
    let e = bank_err(Format::Mt940, &bytes);
    assert!(
        e.contains("f:5: not valid UTF-8 (hint: set the source's `encoding = \"")
            && e.contains("decodes cleanly as ")
            && e.contains("iso-8859-2"),
        "{e}"
    );
    let mut c = ctx("f");
    c.encoding = Some(recon::config::TextEncoding::Whatwg(encoding_rs::ISO_8859_2));
    let p = sources::parse_bank_bytes(Format::Mt940, &c, &bytes).expect("parses");
    assert_eq!(p.lines[0].reference().as_deref(), Some("Átutalás"));
}

#[test]
fn a_wrong_single_byte_encoding_is_an_error_not_garbage() {
    // The own fixture is IBM852 (as the Raiffeisen sample of tests/real); read as ISO-8859-2
    // its 0x81 (ü) would become U+0081.
    let bytes = std::fs::read(input("mt940/recon_ibm852.sta")).expect("read");
    let mut c = ctx("f");
    c.encoding = Some(recon::config::TextEncoding::Whatwg(encoding_rs::ISO_8859_2));
    let e = match sources::parse_bank_bytes(Format::Mt940, &c, &bytes) {
        Ok(_) => panic!("accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("f:6: decoding as ISO-8859-2 gives the control character U+0081"),
        "{e}"
    );
    c.encoding = Some(recon::config::TextEncoding::Ibm852);
    let p = sources::parse_bank_bytes(Format::Mt940, &c, &bytes).expect("parses");
    assert_eq!(
        p.lines[0].reference().as_deref(),
        Some("Platba Müller Dvořák účet č. 12"),
        "{:?}",
        p.lines[0]
    );
}

#[test]
fn csv_rows_are_rejected_with_line_and_column() {
    let cfg = csv_source("");
    let (lines, rejected) = csv_lines(
        &cfg,
        b"Datum;Betrag;Text\n27.11.2026;1,005;a\n31.02.2026;1,00;b\n27.11.2026;2,00;c\n",
    );
    assert_eq!(lines.len(), 1);
    assert_eq!(rejected.len(), 2);
    assert_eq!(rejected[0].line, 2);
    assert!(
        rejected[0].reason.contains("\"Betrag\"") && rejected[0].reason.contains("more decimals"),
        "{rejected:?}"
    );
    assert_eq!(rejected[1].line, 3);
    assert!(rejected[1].reason.contains("\"Datum\""), "{rejected:?}");
}

#[test]
fn csv_sign_column_debit_credit_columns_and_footer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("m.toml");
    std::fs::write(
        &p,
        "skip_lines = 2\nskip_footer = 1\ntimestamp_format = \"%Y-%m-%d\"\nthousands_separator = \",\"\namount_symbols = \"$\"\ncurrency = \"USD\"\n[columns]\nbooked_at = \"d\"\ndebit = \"out\"\ncredit = \"in\"\n",
    )
    .expect("write");
    let cfg = SourceConfig::load_mapping(&p, Format::Csv).expect("mapping");
    let (lines, rejected) = csv_lines(
        &cfg,
        b"Bank export\nAccount ****1234\nd,out,in\n2026-11-27,\"$1,000.50\",\n2026-11-27,,$2.00\n2026-11-27,-3.00,\n2026-11-27,1.00,2.00\nClosing balance,,\n",
    );
    let amounts: Vec<i64> = lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, vec![-100050, 200, -300]);
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].line, 7);
    assert!(rejected[0].reason.contains("both the debit and the credit"));
    // A footer count larger than the file is an error for the file, not a silent skip.
    let e = sources::csv::parse_bytes(
        cfg.table_source(),
        csv_of(&cfg),
        "t.csv",
        b"a\nb\nd,out,in\n",
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("t.csv: has 0 record(s)"), "{e:#}");
}

#[test]
fn xlsx_native_numbers_are_exact_and_too_precise_ones_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let book_path = dir.path().join("s.xlsx");
    let mut wb = rust_xlsxwriter::Workbook::new();
    let ws = wb.add_worksheet();
    ws.set_name("Data").expect("name");
    let date = rust_xlsxwriter::ExcelDateTime::from_ymd(2026, 11, 27).expect("date");
    let fmt = rust_xlsxwriter::Format::new().set_num_format("yyyy-mm-dd");
    ws.write_string(0, 0, "Bank XY statement").expect("w");
    for (c, h) in ["Date", "Amount", "Ref"].iter().enumerate() {
        ws.write_string(2, c as u16, *h).expect("w");
    }
    for (r, (amount, reference)) in [(0.1, "a"), (-1234.56, "b"), (12.345, "c"), (1e-7, "d")]
        .iter()
        .enumerate()
    {
        let row = 3 + r as u32;
        ws.write_datetime_with_format(row, 0, &date, &fmt)
            .expect("w");
        ws.write_number(row, 1, *amount).expect("w");
        ws.write_string(row, 2, *reference).expect("w");
    }
    wb.save(&book_path).expect("save");
    let map = dir.path().join("m.toml");
    std::fs::write(
        &map,
        "sheet = \"Data\"\nskip_lines = 2\ntimestamp_format = \"%d.%m.%Y\"\ncurrency = \"EUR\"\ntimezone = \"Europe/Berlin\"\n[columns]\nbooked_at = \"Date\"\namount = \"Amount\"\nreference = \"Ref\"\n",
    )
    .expect("write");
    let cfg = SourceConfig::load_mapping(&map, Format::Xlsx).expect("mapping");
    let mut load = SourceLoad::default();
    let clean = sources::read_file(&cfg, &book_path, &mut load).expect("read");
    assert!(!clean);
    let amounts: Vec<i64> = load.lines.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts, vec![10, -123456]);
    // Native dates are local days in the source zone.
    assert_eq!(
        recon::timeparse::format_utc(load.lines[0].booked_at),
        "2026-11-26T23:00:00Z"
    );
    let rows: Vec<u64> = load.rejected.iter().map(|r| r.line).collect();
    assert_eq!(rows, vec![6, 7], "{:?}", load.rejected);
    assert!(
        load.rejected[0].reason.contains("more decimals"),
        "{:?}",
        load.rejected
    );
    // A missing sheet names the sheets there are.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&map)
            .expect("r")
            .replace("\"Data\"", "\"Nope\""),
    )
    .expect("w");
    let cfg = SourceConfig::load_mapping(&bad, Format::Xlsx).expect("mapping");
    let e = sources::read_file(&cfg, &book_path, &mut SourceLoad::default()).unwrap_err();
    assert!(format!("{e:#}").contains("no sheet \"Nope\""), "{e:#}");
}

#[test]
fn a_statement_delivered_twice_counts_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two identical lines within one file are two lines (two equal fees).
    let twice = MT940.replace(
        ":62F:",
        ":61:2611271127D1,NTRFFEE\n:61:2611271127D1,NTRFFEE\n:62F:",
    );
    let a = dir.path().join("a.sta");
    let b = dir.path().join("b.sta");
    std::fs::write(&a, &twice).expect("w");
    std::fs::write(&b, &twice).expect("w");
    let cfg = SourceConfig::bank_default(Format::Mt940);
    let mut load = SourceLoad::default();
    sources::read_file(&cfg, &a, &mut load).expect("a");
    assert_eq!(load.lines.len(), 4);
    sources::read_file(&cfg, &b, &mut load).expect("b");
    assert_eq!(load.lines.len(), 4, "the re-delivered file adds nothing");
    assert_eq!(load.files[1].duplicates, 4);
    // An overlapping file with one more fee adds exactly that fee.
    let c = dir.path().join("c.sta");
    std::fs::write(
        &c,
        twice.replace(":62F:", ":61:2611271127D1,NTRFFEE\n:62F:"),
    )
    .expect("w");
    sources::read_file(&cfg, &c, &mut load).expect("c");
    assert_eq!(load.lines.len(), 5);
    assert_eq!(load.files[2].lines, 1);
}

#[test]
fn csv_ids_seen_in_an_earlier_file_with_other_content_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("m.toml");
    std::fs::write(
        &p,
        "timestamp_format = \"rfc3339\"\n[columns]\nprovider_txn_id = \"id\"\nrecipient = \"iban\"\namount = \"amount\"\ncurrency = \"ccy\"\nbooked_at = \"at\"\n",
    )
    .expect("w");
    let cfg = SourceConfig::load_mapping(&p, Format::Csv).expect("mapping");
    let a = dir.path().join("a.csv");
    let b = dir.path().join("b.csv");
    std::fs::write(&a, "id,iban,amount,ccy,at\nT1,DE1,1.00,EUR,2026-11-27T10:00:00Z\nT2,DE2,2.00,EUR,2026-11-27T10:00:00Z\n").expect("w");
    std::fs::write(&b, "id,iban,amount,ccy,at\nT1,DE1,1.00,EUR,2026-11-27T10:00:00Z\nT2,DE2,9.00,EUR,2026-11-27T10:00:00Z\nT3,DE3,3.00,EUR,2026-11-27T10:00:00Z\n").expect("w");
    let mut load = SourceLoad::default();
    assert!(sources::read_file(&cfg, &a, &mut load).expect("a"));
    assert!(!sources::read_file(&cfg, &b, &mut load).expect("b"));
    assert_eq!(load.lines.len(), 3);
    assert_eq!(load.files[1].duplicates, 1);
    assert_eq!(load.rejected.len(), 1);
    assert_eq!(load.rejected[0].line, 3);
    assert!(
        load.rejected[0]
            .reason
            .contains("\"T2\" already loaded from"),
        "{:?}",
        load.rejected
    );
}

#[test]
fn job_config_reads_bank_formats_and_rejects_mapping_keys_for_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://r.db\"\noutput_dir = \"out\"\n\n[[source]]\nname = \"bank\"\nformat = \"camt053\"\npath = \"st.xml\"\n";
    let cfg_path = dir.path().join("job.toml");
    std::fs::write(&cfg_path, base).expect("w");
    std::fs::write(dir.path().join("st.xml"), CAMT).expect("w");
    let cfg = recon::config::Config::load(&cfg_path).expect("config");
    assert_eq!(cfg.sources[0].format(), Format::Camt053);
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 27).expect("day");
    let load = sources::load(&cfg.sources[0], (day, day), i64::MAX).expect("load");
    assert_eq!(load.lines.len(), 1);
    assert_eq!(load.lines[0].account(), Some("DE89370400440532013000"));
    // Dates without a time are local days in the job's zone.
    assert_eq!(
        recon::timeparse::format_utc(load.lines[0].booked_at),
        "2026-11-26T23:00:00Z"
    );
    assert_eq!(load.facts.len(), 1);
    std::fs::write(&cfg_path, format!("{base}delimiter = \";\"\n")).expect("w");
    let e = format!("{:#}", recon::config::Config::load(&cfg_path).unwrap_err());
    assert!(
        e.contains("job.toml") && e.contains("source[0].delimiter") && e.contains("camt053"),
        "{e}"
    );
    std::fs::write(&cfg_path, base.replace("camt053", "avro")).expect("w");
    let e = format!("{:#}", recon::config::Config::load(&cfg_path).unwrap_err());
    assert!(
        e.contains("source[0].format") && e.contains("\"avro\""),
        "{e}"
    );
}

#[test]
fn mapping_files_are_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("m.toml");
    std::fs::write(&p, "timestamp_format = \"%Y\"\ncurrency = \"EUR\"\nthousand_separator = \",\"\n[columns]\namount = \"a\"\nbooked_at = \"b\"\n").expect("w");
    let e = format!(
        "{:#}",
        SourceConfig::load_mapping(&p, Format::Csv).unwrap_err()
    );
    assert!(
        e.contains("m.toml") && e.contains("thousand_separator"),
        "{e}"
    );
    std::fs::write(
        &p,
        "timestamp_format = \"%Y\"\n[columns]\namount = \"a\"\nbooked_at = \"b\"\n",
    )
    .expect("w");
    let e = format!(
        "{:#}",
        SourceConfig::load_mapping(&p, Format::Csv).unwrap_err()
    );
    assert!(e.contains("columns.currency"), "{e}");
    let e = format!(
        "{:#}",
        recon::config::parse_settings(Some("csv"), None, None, None).unwrap_err()
    );
    assert!(e.contains("needs a column mapping"), "{e}");
}

proptest! {
    // Failing cases are kept under the target folder: a run leaves the clone as it found it.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            concat!(env!("CARGO_TARGET_TMPDIR"), "/proptest-regressions/formats.txt"),
        ))),
        ..ProptestConfig::default()
    })]

    /// Arbitrary bytes: an error or lines, never a panic.
    #[test]
    fn parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        for f in Format::ALL {
            no_panic(f, &bytes);
        }
        for f in recon::model::PayoutFormat::ALL {
            crate::format_files::no_panic_payout(f, &bytes);
        }
    }

    /// Own fixtures with a few bytes changed or cut short: nearly valid input reaches deep
    /// into each parser (`tests/real` does the same with the public real files).
    #[test]
    fn parsers_never_panic_on_mutated_fixtures(
        pick in 0usize..FILES.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (rel, format, _) = &FILES[pick];
        let bytes = std::fs::read(input(rel)).expect("read");
        let bytes = crate::format_files::mutated(bytes, edits, cut);
        no_panic(*format, &bytes);
        no_panic(Format::Mt940, &bytes);
        no_panic(Format::Bai2, &bytes);
        no_panic(Format::Ofx, &bytes);
    }

    /// The payout status fixtures (pain.002, NACHA) with a few bytes changed or cut short.
    #[test]
    fn payout_readers_never_panic_on_mutated_fixtures(
        pick in 0usize..PAYOUT_FILES.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (rel, format) = PAYOUT_FILES[pick];
        let path = repo().join("tests/formats/payout").join(rel);
        let bytes = std::fs::read(path).expect("read");
        let bytes = crate::format_files::mutated(bytes, edits, cut);
        crate::format_files::no_panic_payout(format, &bytes);
    }
}

/// A status column keeps pending and authorised rows out: counted, named in a warning, never
/// lines, and the file no longer counts as complete (a pending row may be the payment).
#[test]
fn rows_that_are_not_booked_are_counted_not_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let map = dir.path().join("m.toml");
    std::fs::write(
        &map,
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\nbooked_statuses = [\"completed\"]\n\
         [columns]\nbooked_at = \"date\"\namount = \"amount\"\nreference = \"ref\"\nstatus = \"state\"\n",
    )
    .expect("write");
    let cfg = SourceConfig::load_mapping(&map, Format::Csv).expect("mapping");
    let csv = dir.path().join("st.csv");
    std::fs::write(
        &csv,
        "date,amount,ref,state\n2026-11-27,10.00,A,Completed\n2026-11-27,20.00,B,PENDING\n\
         2026-11-27,30.00,C,completed\n2026-11-27,40.00,D,Authorised\n",
    )
    .expect("write");
    let mut load = sources::SourceLoad::default();
    let clean =
        sources::csv::read_file(cfg.table_source(), csv_of(&cfg), &csv, &mut load).expect("read");
    assert!(!clean, "a file with pending rows is not complete");
    let refs: Vec<_> = load
        .lines
        .iter()
        .map(|l| l.reference().as_deref().unwrap_or_default().to_string())
        .collect();
    assert_eq!(refs, ["A", "C"]);
    assert!(load.rejected.is_empty());
    assert_eq!(load.files[0].not_booked, 2);
    assert_eq!(load.files[0].lines, 2);
    let w = load.warnings.join("\n");
    assert!(
        w.contains("2 row(s) not booked")
            && w.contains("\"PENDING\" at line(s) 3")
            && w.contains("\"AUTHORISED\" at line(s) 5"),
        "{w}"
    );

    // Strict: a status column needs the booked values, and the values need the column.
    std::fs::write(
        &map,
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\n\
         [columns]\nbooked_at = \"date\"\namount = \"amount\"\nstatus = \"state\"\n",
    )
    .expect("write");
    let e = format!(
        "{:#}",
        SourceConfig::load_mapping(&map, Format::Csv).unwrap_err()
    );
    assert!(e.contains("booked_statuses"), "{e}");
    std::fs::write(
        &map,
        "timestamp_format = \"%Y-%m-%d\"\ncurrency = \"EUR\"\nbooked_statuses = [\"X\"]\n\
         [columns]\nbooked_at = \"date\"\namount = \"amount\"\n",
    )
    .expect("write");
    let e = format!(
        "{:#}",
        SourceConfig::load_mapping(&map, Format::Csv).unwrap_err()
    );
    assert!(e.contains("columns.status"), "{e}");
}

/// Issue 15 point 3: `recon parse` prints nothing to stdout unless the whole input reads; the
/// rejected line is the error.
#[test]
fn parse_prints_no_line_of_a_file_with_a_rejected_line() {
    let cfg = csv_source("");
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "Datum;Betrag;Text\n27.11.2026;1,00;first\n27.11.2026;zwei;second\n27.11.2026;3,00;third\n",
    )
    .expect("write");
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let masked = sources::Recipients::Masked;
    let err = sources::print_canonical(
        &cfg,
        std::slice::from_ref(&bad),
        masked,
        &mut out,
        &mut notes,
    )
    .expect_err("a rejected line fails the parse");
    assert!(out.is_empty(), "printed: {}", String::from_utf8_lossy(&out));
    assert!(format!("{err:#}").contains("bad.csv:3"), "{err:#}");
    // The same file without the bad line prints its lines.
    let good = dir.path().join("good.csv");
    std::fs::write(&good, "Datum;Betrag;Text\n27.11.2026;1,00;first\n").expect("write");
    sources::print_canonical(
        &cfg,
        std::slice::from_ref(&good),
        masked,
        &mut out,
        &mut notes,
    )
    .expect("parses");
    assert_eq!(String::from_utf8_lossy(&out).lines().count(), 2);
}

/// Issue 15 point 13: `recon parse --unmasked` shows recipients in full (to check a recipient
/// mapping); without it they are masked as everywhere else.
#[test]
fn parse_masks_recipients_unless_asked_not_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "delimiter = \";\"\ntimestamp_format = \"%d.%m.%Y\"\ndecimal_separator = \",\"\ncurrency = \"EUR\"\n[columns]\nbooked_at = \"Datum\"\namount = \"Betrag\"\nrecipient = \"IBAN\"\n",
    )
    .expect("write");
    let cfg = SourceConfig::load_mapping(&m, Format::Csv).expect("mapping");
    let f = dir.path().join("s.csv");
    std::fs::write(
        &f,
        "Datum;Betrag;IBAN\n27.11.2026;1,00;DE89 3704 0044 0532 0130 00\n",
    )
    .expect("write");
    let show = |recipients| {
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        sources::print_canonical(
            &cfg,
            std::slice::from_ref(&f),
            recipients,
            &mut out,
            &mut notes,
        )
        .expect("parses");
        String::from_utf8(out).expect("utf-8")
    };
    let masked = show(sources::Recipients::Masked);
    assert!(!masked.contains("DE89370400440532013000"), "{masked}");
    assert!(masked.contains("3000"), "{masked}");
    let full = show(sources::Recipients::Unmasked);
    assert!(full.contains(",DE89370400440532013000,"), "{full}");
}

/// Issue 15 point 8: the quote character is a key (`quote = "'"`), checked like the delimiter.
#[test]
fn exports_quoted_with_apostrophes_read_with_the_quote_key() {
    let cfg = csv_source("quote = \"'\"");
    let (lines, rejected) = csv_lines(
        &cfg,
        b"Datum;Betrag;Text\n27.11.2026;'12,50';'Rechnung; Teil 2'\n",
    );
    assert!(rejected.is_empty(), "{rejected:?}");
    assert_eq!(lines[0].amount_minor, 1_250);
    assert_eq!(lines[0].reference().as_deref(), Some("Rechnung; Teil 2"));
    // Without the key the apostrophes are text and the `;` splits the field.
    let (lines, _) = csv_lines(
        &csv_source(""),
        b"Datum;Betrag;Text\n27.11.2026;3,00;'Rechnung; Teil 2'\n",
    );
    assert_eq!(lines[0].reference().as_deref(), Some("'Rechnung"));
    // Only `"` and `'` are quote characters.
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "quote = \"x\"\ntimestamp_format = \"rfc3339\"\n[columns]\nbooked_at = \"D\"\namount = \"A\"\n",
    )
    .expect("write");
    let err = format!(
        "{:#}",
        SourceConfig::load_mapping(&m, Format::Csv).unwrap_err()
    );
    assert!(err.contains("quote"), "{err}");
}
