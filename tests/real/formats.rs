//! Statement formats against the public real files of `RECON_REAL_DATA`: a reviewed golden
//! `recon parse` output per file (`tests/formats/golden/`), spot checks that would catch a wrong
//! golden being blessed, and parsers that never panic on mutated real files.

use crate::format_files::{Expect, ctx, no_panic, parse};
use crate::real_data;
use proptest::prelude::*;
use recon::config::Format;
use recon::sources;

use Expect::{Golden, Rejected};

/// Every file of the corpus (folder-relative), its format, and what it must give. csv/xlsx
/// files read with `tests/formats/mappings/<file name>.toml`.
const FILES: &[(&str, Format, Expect)] = &[
    (
        "bai2/moj_account_trailer_amount_blank_example.bai2",
        Format::Bai2,
        Golden,
    ),
    ("bai2/moj_citi_example.bai2", Format::Bai2, Golden),
    ("bai2/moj_nwb_example.bai2", Format::Bai2, Golden),
    ("bai2/moov_sample1.txt", Format::Bai2, Golden),
    ("bai2/moov_sample2.txt", Format::Bai2, Golden),
    ("bai2/moov_sample3.txt", Format::Bai2, Golden),
    (
        "bai2/moov_sample4-continuations-newline-delimited.txt",
        Format::Bai2,
        Golden,
    ),
    ("bai2/venturehacks_daily.bai2", Format::Bai2, Golden),
    (
        "bai2/venturehacks_daily_with_summary.bai2",
        Format::Bai2,
        Golden,
    ),
    (
        "bai2/venturehacks_eod_with_slash_in_text.bai2",
        Format::Bai2,
        Golden,
    ),
    (
        "bai2/venturehacks_eod_without_as_of_time.bai2",
        Format::Bai2,
        Golden,
    ),
    (
        "bai2/zepto_group_trailer_without_number_of_accounts.bai2",
        Format::Bai2,
        Golden,
    ),
    ("bank-csv/oca_sheet_debit_credit.csv", Format::Csv, Golden),
    (
        "bank-csv/oca_sheet_sample_statement_en.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/ofxs-austrian_easybank-giro.csv",
        Format::Csv,
        Golden,
    ),
    ("bank-csv/ofxs-austrian_ing-diba.csv", Format::Csv, Golden),
    ("bank-csv/ofxs-austrian_oberbank.csv", Format::Csv, Golden),
    ("bank-csv/ofxs-austrian_raiffeisen.csv", Format::Csv, Golden),
    (
        "bank-csv/ofxs-dutch_Knab_transactieoverzicht_ok.csv",
        Format::Csv,
        Golden,
    ),
    ("bank-csv/ofxs-dutch_ing_ok.csv", Format::Csv, Golden),
    (
        "bank-csv/pretix_csvimport_data_de_bbbank.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/pretix_csvimport_data_de_postbank.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/pretix_csvimport_data_de_sparkassernn.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/pretix_csvimport_data_gb_lloyds.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/reds_dcu_Main_Checking_Account_Transactions.csv",
        Format::Csv,
        Golden,
    ),
    (
        "bank-csv/reds_schwab_XXX234_Checking_Transactions_20220203.csv",
        Format::Csv,
        Golden,
    ),
    (
        "camt053/camt2coda_BE68793230773034-202411.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/camt2coda_LT625883379695428516_2024-03-07.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/genkgo_camt053.v2.five.decimals.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/genkgo_camt053.v2.multi.statement.xml",
        Format::Camt053,
        Golden,
    ),
    ("camt053/genkgo_camt053.v8.xml", Format::Camt053, Golden),
    ("camt053/libeufin_gls_camt053.xml", Format::Camt053, Golden),
    (
        "camt053/libeufin_postfinance_camt053_v2009.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/oca_test-camt053-bookgdt-dttm.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/oca_test-camt053-no-ntry.xml",
        Format::Camt053,
        Golden,
    ),
    (
        "camt053/oca_test-camt053-txdtls.xml",
        Format::Camt053,
        Golden,
    ),
    ("camt053/oca_test-camt053.xml", Format::Camt053, Golden),
    (
        "camt053/ofxs-iso20022_davider80.xml",
        Format::Camt053,
        Golden,
    ),
    ("camt053/ofxs-iso20022_simple.xml", Format::Camt053, Golden),
    (
        "camt053/tryton_camt.053.001.02.xml",
        Format::Camt053,
        Golden,
    ),
    ("camt054/genkgo_camt054.v4.xml", Format::Camt054, Golden),
    (
        "camt054/genkgo_camt054.v8-with-UETR.xml",
        Format::Camt054,
        Golden,
    ),
    (
        "camt054/libeufin_200519_camt054-ESR-ASR_P_CH2909000000250094239_1110092704_0_2019042500372179_v2019.xml",
        Format::Camt054,
        Golden,
    ),
    (
        "camt054/libeufin_9_camt054_Return_Detailavisierung_mit_Sammelbuchung_ISO2019_v2019.xml",
        Format::Camt054,
        Golden,
    ),
    (
        "camt054/libeufin_camt054-CHDD_P_CH2909000000250094239_1110097484_0_20220615375204228751067.xml",
        Format::Camt054,
        Golden,
    ),
    ("camt054/oca_test-camt054.xml", Format::Camt054, Golden),
    (
        "mt940/mt940rs_danskebank_MT940_DK_Example.sta",
        Format::Mt940,
        Golden,
    ),
    (
        "mt940/mt940rs_danskebank_MT940_SE_Example.sta",
        Format::Mt940,
        Golden,
    ),
    (
        "mt940/mt940rs_sparkasse_buxtehude.sta",
        Format::Mt940,
        Golden,
    ),
    (
        "mt940/oca_mollie_Voorbeeld_MT-940.mt940",
        Format::Mt940,
        Golden,
    ),
    ("mt940/phpmt940_Bunq_sample.sta", Format::Mt940, Golden),
    ("mt940/phpmt940_Hsbc_sample.sta", Format::Mt940, Golden),
    ("mt940/phpmt940_Knab_sample.sta", Format::Mt940, Golden),
    ("mt940/phpmt940_Rabo_sample.sta", Format::Mt940, Golden),
    ("mt940/phpmt940_Triodos_sample.sta", Format::Mt940, Golden),
    (
        "mt940/wolph_betterplace_sepa_mt9401.sta",
        Format::Mt940,
        Golden,
    ),
    ("mt940/wolph_cmxl_mt940.sta", Format::Mt940, Golden),
    ("mt940/wolph_jejik_abnamro.sta", Format::Mt940, Golden),
    ("mt940/wolph_jejik_postfinance.sta", Format::Mt940, Golden),
    ("mt940/wolph_mBank_mt940.sta", Format::Mt940, Golden),
    ("mt940/wolph_mBank_mt942.sta", Format::Mt940, Golden),
    ("mt940/wolph_raiffeisen-cmi.sta", Format::Mt940, Golden),
    (
        "mt940/wolph_sberbank_171011_01234945.sta",
        Format::Mt940,
        Golden,
    ),
    ("mt940/wolph_self-provided_mt942.sta", Format::Mt940, Golden),
    // A fragment: a :61: split over lines with no :20:/:25: statement around it.
    (
        "mt940/wolph_sparkassen.sta",
        Format::Mt940,
        Rejected(
            "wolph_sparkassen.sta:1: tag :61: outside a statement (hint: every statement starts with :20:)",
        ),
    ),
    ("mt940/zilverline_deutsche_bank.txt", Format::Mt940, Golden),
    ("mt940/zilverline_ing_mt940_iban.txt", Format::Mt940, Golden),
    ("mt940/zilverline_sns.txt", Format::Mt940, Golden),
    (
        "provider-csv/adyen/gp-adyen_settlement_detail_report_batch_89.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/adyen/oca_settlement_detail_report_batch_380.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/paypal/hledger_paypal-custom.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/paypal/oca_paypal_activity_en.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/paypal/oca_paypal_statement_en.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/revolut/ofxs-revolut_2022-january.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/stripe/hledger_stripe.csv",
        Format::Csv,
        Golden,
    ),
    (
        "provider-csv/wise/ofxs-wise_sample-statement.csv",
        Format::Csv,
        Golden,
    ),
    ("xlsx/oca_adyen_test.xlsx", Format::Xlsx, Golden),
    (
        "xlsx/oca_sheet_meta_data_separated_credit_debit.xlsx",
        Format::Xlsx,
        Golden,
    ),
    (
        "xlsx/oca_sheet_sample_statement_en.xlsx",
        Format::Xlsx,
        Golden,
    ),
    ("xlsx/ofxs-fineco_movements.xlsx", Format::Xlsx, Golden),
    (
        "xlsx/ofxs-handelsbanken_transactions.xlsx",
        Format::Xlsx,
        Golden,
    ),
    (
        "xlsx/reds_uob_ACC_TXN_History_1234_clean.xls",
        Format::Xlsx,
        Golden,
    ),
];

#[test]
fn golden_outputs_of_every_real_file() {
    crate::format_files::check_goldens(&real_data(), FILES);
}

#[test]
fn every_real_file_has_an_expectation() {
    let missing: Vec<String> = crate::format_files::files_below(&real_data())
        .into_iter()
        .filter(|rel| !FILES.iter().any(|(r, _, _)| r == rel))
        .collect();
    assert!(
        missing.is_empty(),
        "real files without a golden: {missing:?}"
    );
}

/// Spot checks that would catch a wrong golden being blessed: signs, reversals, batches.
#[test]
fn golden_spot_checks() {
    let root = real_data();
    let lines = |rel: &str, f: Format| -> Vec<Vec<String>> {
        let (out, _) = parse(&root, rel, f).expect(rel);
        let mut r = csv::Reader::from_reader(out.as_bytes());
        r.records()
            .map(|x| x.expect("record").iter().map(str::to_string).collect())
            .collect()
    };
    // camt.053 OCA: 3 entries, 4 details; the batch entry is split in two lines, the
    // reversal (RvslInd=true) is a REFUND.
    let oca = lines("camt053/oca_test-camt053.xml", Format::Camt053);
    assert_eq!(oca.len(), 4);
    assert!(oca.iter().any(|l| l[8] == "REFUND"), "{oca:?}");
    assert_eq!(
        oca.iter().filter(|l| l[1].contains("/detail ")).count(),
        2,
        "{oca:?}"
    );
    // MT940 betterplace: 97 transactions, 2 of them RC reversals (debits).
    let bp = lines("mt940/wolph_betterplace_sepa_mt9401.sta", Format::Mt940);
    assert_eq!(bp.len(), 97);
    let reversals: Vec<_> = bp.iter().filter(|l| l[8] == "REFUND").collect();
    assert_eq!(reversals.len(), 2);
    assert!(
        reversals.iter().all(|l| l[5].starts_with('-')),
        "{reversals:?}"
    );
    // BAI2 moov sample 3: 26 details, several records per physical line.
    assert_eq!(lines("bai2/moov_sample3.txt", Format::Bai2).len(), 26);
    // OCA debit/credit CSV: the D/C flag wins over the amount's own sign.
    let dc = lines("bank-csv/oca_sheet_debit_credit.csv", Format::Csv);
    assert_eq!(dc[0][5], "-33.50");
    assert_eq!(dc[1][5], "1533.50");
    // Recipients are masked in the output.
    let ing = lines("mt940/zilverline_ing_mt940_iban.txt", Format::Mt940);
    assert!(
        ing.iter()
            .all(|l| l[4].is_empty() || l[4].starts_with("****")),
        "{ing:?}"
    );
    assert!(
        !ing.iter()
            .any(|l| l.iter().any(|c| c.contains("NL57ABNA0876543211")))
    );
}

#[test]
fn a_wrong_single_byte_encoding_is_an_error_not_garbage() {
    // The Raiffeisen sample is IBM852; read as ISO-8859-2 its 0x94 (ö) would become U+0094.
    let bytes = std::fs::read(real_data().join("mt940/wolph_raiffeisen-cmi.sta")).expect("read");
    let mut c = ctx("f");
    c.encoding = Some(recon::config::TextEncoding::Whatwg(encoding_rs::ISO_8859_2));
    let e = match sources::parse_bank_bytes(Format::Mt940, &c, &bytes) {
        Ok(_) => panic!("accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("f:11: decoding as ISO-8859-2 gives the control character U+0094"),
        "{e}"
    );
    c.encoding = Some(recon::config::TextEncoding::Ibm852);
    let p = sources::parse_bank_bytes(Format::Mt940, &c, &bytes).expect("parses");
    assert!(
        p.lines[0]
            .reference()
            .as_deref()
            .is_some_and(|r| r.contains("összevont utánvét")),
        "{:?}",
        p.lines[0]
    );
}

proptest! {
    // Failing cases are kept under the target folder: a run leaves the clone as it found it.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            concat!(env!("CARGO_TARGET_TMPDIR"), "/proptest-regressions/real-formats.txt"),
        ))),
        ..ProptestConfig::default()
    })]

    /// Real files with a few bytes changed or cut short: nearly valid input reaches deep into
    /// each parser.
    #[test]
    fn parsers_never_panic_on_mutated_real_files(
        pick in 0usize..FILES.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (rel, format, _) = &FILES[pick];
        let bytes = std::fs::read(real_data().join(rel)).expect("read");
        let bytes = crate::format_files::mutated(bytes, edits, cut);
        no_panic(*format, &bytes);
        no_panic(Format::Mt940, &bytes);
        no_panic(Format::Bai2, &bytes);
    }
}
