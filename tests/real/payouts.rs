//! The public payout status files of `RECON_PAYOUT_FILES` (`../shared/payout-files/`, kept
//! apart from the statement corpus; provenance and licences in its `SOURCES.md`): every file
//! reads whole, and holds what SOURCES.md says it holds (levels, statuses, reason codes).

use recon::model::PayoutFormat;
use recon::sources::payout::{Level, PayoutFile, State};
use recon::sources::{self, InputLimits};
use std::path::PathBuf;

/// The payout corpus: `RECON_PAYOUT_FILES`, which must be set and name a folder.
fn payout_files() -> PathBuf {
    let Some(dir) = std::env::var_os("RECON_PAYOUT_FILES") else {
        panic!(
            "RECON_PAYOUT_FILES is not set: this target reads the public payout status files \
             from that folder (CI: RECON_PAYOUT_FILES=../shared/payout-files cargo test --test \
             real; see docs/testing.md)"
        );
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.is_dir(),
        "RECON_PAYOUT_FILES={} is not a folder",
        dir.display()
    );
    dir
}

/// Every file of the corpus with its format: a file that appears without an entry here fails
/// the test.
const FILES: &[(&str, PayoutFormat)] = &[
    ("nacha/moov_cor-example.ach", PayoutFormat::Nacha),
    ("nacha/moov_ppd-debit.ach", PayoutFormat::Nacha),
    (
        "nacha/moov_return-PPD-custom-reason-code.ach",
        PayoutFormat::Nacha,
    ),
    ("nacha/moov_return-WEB.ach", PayoutFormat::Nacha),
    (
        "pain002/libeufin_2_pain002_B-Level_ACCP_v2019.xml",
        PayoutFormat::Pain002,
    ),
    (
        "pain002/libeufin_3_pain002_B-und-C-Level_RJCT_v2019.xml",
        PayoutFormat::Pain002,
    ),
    (
        "pain002/libeufin_5_pain002_A-Level_ACTC_v2019.xml",
        PayoutFormat::Pain002,
    ),
    (
        "pain002/libeufin_6_pain002_A-Level_RJCT_v2019.xml",
        PayoutFormat::Pain002,
    ),
    ("pain002/libeufin_pain002_CHDD.xml", PayoutFormat::Pain002),
];

fn read(rel: &str) -> PayoutFile {
    let (_, format) = FILES
        .iter()
        .find(|(r, _)| *r == rel)
        .unwrap_or_else(|| panic!("{rel} is not listed"));
    sources::read_payout_file(*format, &payout_files().join(rel), &InputLimits::default())
        .unwrap_or_else(|e| panic!("{rel}: {e:#}"))
}

/// (level, state, code, reason) of each record.
fn summary(f: &PayoutFile) -> Vec<(Level, State, &str, Option<&str>)> {
    f.records
        .iter()
        .map(|r| (r.level, r.state, r.code.as_str(), r.reason.as_deref()))
        .collect()
}

#[test]
fn every_payout_file_is_listed_and_reads_whole() {
    let root = payout_files();
    let listed = crate::format_files::files_below(&root);
    let unlisted: Vec<&String> = listed
        .iter()
        .filter(|rel| !FILES.iter().any(|(r, _)| r == rel))
        .collect();
    assert!(
        unlisted.is_empty(),
        "payout files without an expectation: {unlisted:?}"
    );
    for (rel, _) in FILES {
        assert!(
            listed.iter().any(|l| l == rel),
            "{rel} is missing from the corpus"
        );
        read(rel);
    }
}

#[test]
fn pain002_samples_hold_their_group_and_payment_information_statuses() {
    use Level::{Group, PaymentInformation};
    use State::{Accepted, Rejected};
    let f = read("pain002/libeufin_2_pain002_B-Level_ACCP_v2019.xml");
    assert_eq!(summary(&f), [(PaymentInformation, Accepted, "ACCP", None)]);
    assert_eq!(
        f.records[0].original_payment_information_id.as_deref(),
        Some("PMTINF-01")
    );
    assert_eq!(
        f.records[0].original_message_id.as_deref(),
        Some("MSG-02-QRR-SCOR")
    );

    let f = read("pain002/libeufin_3_pain002_B-und-C-Level_RJCT_v2019.xml");
    assert_eq!(
        summary(&f),
        [(PaymentInformation, Rejected, "RJCT", Some("AC01"))]
    );
    let r = &f.records[0];
    assert_eq!(
        r.original_payment_information_id.as_deref(),
        Some("PMTINF-02")
    );
    assert_eq!(
        r.additional_info.as_deref(),
        Some("0999;CH7280005000088877766 Lastkonto unbekannt")
    );
    assert!(
        r.applies_to().contains("payment information PMTINF-02"),
        "{}",
        r.applies_to()
    );

    let f = read("pain002/libeufin_5_pain002_A-Level_ACTC_v2019.xml");
    assert_eq!(summary(&f), [(Group, Accepted, "ACTC", None)]);
    assert_eq!(
        f.records[0].original_message_id.as_deref(),
        Some("MsgId-001")
    );

    let f = read("pain002/libeufin_6_pain002_A-Level_RJCT_v2019.xml");
    assert_eq!(summary(&f), [(Group, Rejected, "RJCT", Some("AM10"))]);
    assert_eq!(
        f.records[0].additional_info.as_deref(),
        Some("904114;ControlSum fehlerhaft")
    );
    assert_eq!(f.records[0].date, Some("2022-05-02".parse().expect("day")));

    let f = read("pain002/libeufin_pain002_CHDD.xml");
    assert_eq!(summary(&f), [(PaymentInformation, Accepted, "ACCP", None)]);
    assert_eq!(
        f.records[0].original_payment_information_id.as_deref(),
        Some("PmtInfId-CHDD-1")
    );
    // None of the samples states a transaction-level status.
    for (rel, format) in FILES {
        if *format == PayoutFormat::Pain002 {
            assert!(
                read(rel)
                    .records
                    .iter()
                    .all(|r| r.level != Level::Transaction),
                "{rel}"
            );
        }
    }
}

#[test]
fn nacha_samples_hold_their_returns_and_notification_of_change() {
    use State::{NotificationOfChange, Returned};
    let t = Level::Transaction;
    let f = read("nacha/moov_return-WEB.ach");
    assert_eq!(
        summary(&f),
        [
            (t, Returned, "99", Some("R01")),
            (t, Returned, "99", Some("R03"))
        ]
    );
    let r = &f.records[0];
    assert_eq!(r.amount, Some((12_354, "USD")));
    assert_eq!(r.trace_number.as_deref(), Some("091000017611242"));
    assert_eq!(
        r.original_instruction_id.as_deref(),
        Some("091400600000001")
    );
    assert_eq!(r.individual_id.as_deref(), Some("MjMxNDAwMjAtOGQ"));
    assert_eq!(f.records[1].amount, Some((4_565, "USD")));

    let f = read("nacha/moov_return-PPD-custom-reason-code.ach");
    assert_eq!(summary(&f), [(t, Returned, "99", Some("R97"))]);
    assert_eq!(f.records[0].amount, Some((106_161, "USD")));
    assert_eq!(
        f.records[0].original_instruction_id.as_deref(),
        Some("092221172022300")
    );
    assert_eq!(f.records[0].date, Some("2021-07-02".parse().expect("day")));

    let f = read("nacha/moov_cor-example.ach");
    assert_eq!(summary(&f), [(t, NotificationOfChange, "98", Some("C01"))]);
    assert_eq!(f.records[0].corrected_data.as_deref(), Some("1918171614"));
    assert_eq!(
        f.records[0].original_instruction_id.as_deref(),
        Some("121042880000001")
    );

    let f = read("nacha/moov_ppd-debit.ach");
    assert!(f.records.is_empty(), "{:?}", f.records);
    assert_eq!(f.notes.len(), 1);
    assert!(f.notes[0].contains("1 ordinary entry"), "{:?}", f.notes);
}
