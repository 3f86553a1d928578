//! Cases (issue 32): the review rows one human decision settles, grouped, on the demo's data.
//! The demo has 12 review rows: among them one line that fits two payments (three AMBIGUOUS
//! rows) and a near miss (the payment and its look-alike line, two rows).

use calamine::{Data, Reader, Xlsx, open_workbook};
use recon::run::RunReport;
use std::path::Path;

/// Runs `recon demo` on a copy of sample-data/ in a temporary folder (the demo's database and
/// output go beside it, under `var/demo/`).
pub(crate) async fn demo() -> (tempfile::TempDir, RunReport) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let sample = tmp.path().join("sample-data");
    crate::support::copy_sample_data(&sample);
    let report = recon::demo::run(&sample).await.expect("demo");
    (tmp, report)
}

fn cell(d: Option<&Data>) -> String {
    match d {
        Some(Data::String(s)) => s.clone(),
        Some(Data::Float(f)) => format!("{f}"),
        Some(Data::Int(i)) => format!("{i}"),
        Some(Data::Empty) | None => String::new(),
        Some(other) => format!("{other:?}"),
    }
}

/// The Cases sheet as rows of (column name → text).
fn cases_sheet(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut wb: Xlsx<_> = open_workbook(path).expect("open xlsx");
    let range = wb.worksheet_range("Cases").expect("Cases sheet");
    let header: Vec<String> = (0..range.width() as u32)
        .map(|c| cell(range.get_value((0, c))))
        .collect();
    (1..range.height() as u32)
        .map(|r| {
            header
                .iter()
                .enumerate()
                .map(|(c, h)| (h.clone(), cell(range.get_value((r, c as u32)))))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn one_decision_is_one_case_in_summary_json_and_the_cases_sheet() {
    let (_tmp, report) = demo().await;
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.out_dir.join("summary.json")).expect("summary.json"),
    )
    .expect("json");
    // 12 review rows: the line that fits two payments (3 rows) and the near miss (2 rows)
    // are one case each: 12 - 2 - 1 = 9.
    assert_eq!(summary["cases"]["tickets"], 12, "{}", summary["cases"]);
    assert_eq!(summary["cases"]["cases"], 9, "{}", summary["cases"]);
    assert_eq!(
        summary["cases"]["by_severity"],
        serde_json::json!({"CRITICAL": 2, "HIGH": 4, "MEDIUM": 3})
    );
    assert_eq!(
        summary["tickets"]["created"], 12,
        "tickets stay one per row"
    );

    let rows = cases_sheet(&report.out_dir.join("report.xlsx"));
    assert_eq!(rows.len(), 9);
    // Most severe first, by severity alone.
    let severities: Vec<&str> = rows.iter().map(|r| r["severity"].as_str()).collect();
    assert!(
        severities.windows(2).all(|w| {
            let rank = |s: &str| {
                ["CRITICAL", "HIGH", "MEDIUM", "LOW"]
                    .iter()
                    .position(|x| *x == s)
            };
            rank(w[0]) <= rank(w[1])
        }),
        "{severities:?}"
    );
    let ambiguity = rows
        .iter()
        .find(|r| r["lines"] == "PSP-0014")
        .expect("the line that fits two payments");
    assert_eq!(ambiguity["payments"], "P-1014;P-1015");
    assert_eq!(ambiguity["tickets"], "3");
    assert_eq!(ambiguity["what"], "AMBIGUOUS");
    // One 500.00 line: 500.00 at risk, not both payments' 1000.00.
    assert_eq!(ambiguity["amount"], "500");
    let candidates: Vec<&str> = ambiguity["candidates"].lines().collect();
    assert_eq!(candidates.len(), 2, "{candidates:?}");
    assert!(
        candidates[0].starts_with("1: P-1014 ↔ PSP-0014"),
        "{candidates:?}"
    );
    assert!(
        candidates[1].starts_with("2: P-1015 ↔ PSP-0014"),
        "{candidates:?}"
    );
    assert!(
        ambiguity["why"].contains("fits 2 payments"),
        "{ambiguity:?}"
    );

    let near = rows
        .iter()
        .find(|r| r["payments"] == "P-1016")
        .expect("the near miss");
    assert_eq!(
        (
            near["what"].as_str(),
            near["tickets"].as_str(),
            near["lines"].as_str()
        ),
        ("AMBIGUOUS (near miss)", "2", "PSP-0016")
    );
    assert_eq!(near["amount"], "200");
    // Keys and fingerprints: `C-` and 16 hex digits; a sha256.
    for r in &rows {
        assert!(
            r["case"].starts_with("C-") && r["case"].len() == 18,
            "{r:?}"
        );
        assert_eq!(r["fingerprint"].len(), 64, "{r:?}");
    }
}

#[tokio::test]
async fn a_rerun_keeps_every_case_key_and_fingerprint() {
    let key_and_print = |report: &RunReport| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = cases_sheet(&report.out_dir.join("report.xlsx"))
            .into_iter()
            .map(|r| (r["case"].clone(), r["fingerprint"].clone()))
            .collect();
        v.sort();
        v
    };
    let (_a, first) = demo().await;
    let (_b, second) = demo().await;
    assert_ne!(first.run_id, second.run_id);
    assert_eq!(key_and_print(&first), key_and_print(&second));
}
