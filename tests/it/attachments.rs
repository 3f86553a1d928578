//! What the alert carries (issue 42 point 3): report.xlsx when it fits `max_attachment_mb`,
//! else a decide-workbook (Summary and Decide for the first cases by severity, then value) shrunk until it
//! fits; diff.csv only while the message stays under `max_email_mb`; and no sentence calls a
//! file attached that the message lacks.

use crate::report::{Part, file_email, parse_message};
use crate::support::{Backend, Settings, TestEnv, openpyxl_python};
use recon::run::RunReport;
use std::path::Path;
use std::process::Command;

const IBAN: &str = "DE89370400440532013000";
/// Lines no payment of ours can be: each its own case, each worth 100.00 EUR more than the
/// one before, so the order by value is the reverse of the line order.
const LINES: usize = 60;

/// A night of [`LINES`] unknown lines (one case each) and one matched payment, with `email`
/// keys added to the file transport's `[email]`.
async fn night(email_keys: &str) -> (TestEnv, RunReport) {
    let env = TestEnv::on(
        Backend::Sqlite,
        Settings {
            extra: file_email().replace(
                "to = [\"finance@bank.test\"]\n",
                &format!("to = [\"finance@bank.test\"]\n{email_keys}"),
            ),
            ..Settings::default()
        },
    )
    .await;
    env.import(
        &format!("P-1,{IBAN},10.00,EUR,SUCCEEDED,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,2026-11-10T09:00:01Z,SUCCEEDED,,\n",
    )
    .await;
    let mut lines = format!("L-P1,P-1,{IBAN},10.00,EUR,2026-11-10T09:05:00Z,PAYMENT\n");
    for k in 1..=LINES {
        lines.push_str(&format!(
            "L-{k},,FR76300060000112345678{k:05},{}.00,EUR,2026-11-10T{:02}:{:02}:00Z,PAYMENT\n",
            100 * k,
            10 + k / 60,
            k % 60
        ));
    }
    env.statement(&lines);
    let report = env.try_standard_day("r1").await.expect("run");
    assert!(!report.alert.failed(), "{:?}", report.alert);
    (env, report)
}

/// The message's parts, its size in bytes, and its text and HTML bodies.
fn message(out_dir: &Path) -> (Vec<Part>, u64, String, String) {
    let raw = std::fs::read_to_string(out_dir.join("email.eml")).expect("email.eml");
    let size = raw.len() as u64;
    let (_, parts) = parse_message(&raw);
    let body = |mime: &str| {
        parts
            .iter()
            .find(|p| p.header("content-type").starts_with(mime))
            .unwrap_or_else(|| panic!("no {mime} part"))
            .text()
    };
    let (text, html) = (body("text/plain"), body("text/html"));
    (parts, size, text, html)
}

/// Names of the attachment parts, in message order.
fn attached(parts: &[Part]) -> Vec<String> {
    parts
        .iter()
        .filter(|p| p.header("content-disposition").starts_with("attachment"))
        .map(|p| {
            let d = p.header("content-disposition");
            let name = d.split("filename=").nth(1).expect("filename");
            name.trim_matches(|c| c == '"' || c == ';' || c == ' ')
                .to_string()
        })
        .collect()
}

/// Every file the body calls attached (`the attached X`, `Attached: X, Y.`) is an attachment
/// of the message, and every attachment is named in the `Attached:` line.
fn claims_match(body: &str, names: &[String]) {
    let files = ["report.xlsx", "decide.xlsx", "diff.csv"];
    for f in files {
        if body.contains(&format!("attached {f}")) {
            assert!(
                names.iter().any(|n| n == f),
                "says attached {f}: {names:?}\n{body}"
            );
        }
    }
    let line = body
        .split_once("Attached: ")
        .map(|(_, rest)| rest.split(['<', '\n']).next().unwrap_or_default())
        .unwrap_or_default();
    for f in files {
        assert_eq!(
            line.contains(f),
            names.iter().any(|n| n == f),
            "Attached line {line:?} vs parts {names:?}"
        );
    }
}

fn part_bytes<'a>(parts: &'a [Part], name: &str) -> &'a [u8] {
    parts
        .iter()
        .find(|p| {
            p.header("content-disposition").starts_with("attachment")
                && p.header("content-disposition").contains(name)
        })
        .unwrap_or_else(|| panic!("no {name} attachment"))
        .bytes()
}

/// Fills every row of the Decide sheet of `file` in openpyxl (a library other than the one
/// recon writes with): `dismiss` when offered, else the first offered decision, with a note.
const FILL: &str = r#"
import sys, openpyxl
wb = openpyxl.load_workbook(sys.argv[1])
ws = wb["Decide"]
head = [c.value for c in ws[1]]
col = lambda n: head.index(n) + 1
for r in range(2, ws.max_row + 1):
    offered = (ws.cell(r, col("offered")).value or "").split(", ")
    ws.cell(r, col("decision")).value = "dismiss" if "dismiss" in offered else offered[0]
    ws.cell(r, col("note")).value = "checked against the bank portal"
wb.save(sys.argv[2])
"#;

/// A limit report.xlsx exceeds: decide.xlsx is attached instead, under the limit, with the
/// first cases of report.xlsx's Decide sheet (all one severity here, so the most valuable first) and fewer than all;
/// the email says how many of how many and that report.xlsx is in the run folder, never that
/// it is attached; the attached file applies through `recon decisions apply`, every row.
#[tokio::test]
async fn over_the_attachment_limit_the_decide_workbook_is_attached_and_applies() {
    // 12 KiB (as a decimal MiB): under the report, over a decide-workbook of a few cases.
    let limit = 12 * 1024;
    let (env, report) = night("max_attachment_mb = 0.01171875\n").await;
    let dir = &report.out_dir;
    let report_len = std::fs::metadata(dir.join("report.xlsx"))
        .expect("report")
        .len();
    assert!(
        report_len > limit,
        "report.xlsx is {report_len} bytes: the test needs it over"
    );
    let (parts, _, text, html) = message(dir);
    let names = attached(&parts);
    assert_eq!(
        names.first().map(String::as_str),
        Some("decide.xlsx"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "report.xlsx"), "{names:?}");
    claims_match(&text, &names);
    claims_match(&html, &names);
    let decide = part_bytes(&parts, "decide.xlsx");
    assert!(
        decide.len() as u64 <= limit,
        "decide.xlsx is {} bytes",
        decide.len()
    );
    // The attachment is the file in the run folder.
    assert_eq!(
        std::fs::read(dir.join("decide.xlsx")).expect("decide.xlsx"),
        decide
    );
    let all = crate::decisions::decide_cases(&dir.join("report.xlsx"));
    assert_eq!(all.len(), LINES, "one case per unknown line");
    let held = crate::decisions::decide_cases(&dir.join("decide.xlsx"));
    assert!(
        !held.is_empty() && held.len() < all.len(),
        "{} of {}",
        held.len(),
        all.len()
    );
    assert_eq!(held, all[..held.len()], "the first cases of the one order");
    let said = format!(
        "the attached decide.xlsx (the first {} of {LINES} cases; all are in report.xlsx in \
         the run folder)",
        held.len()
    );
    assert!(text.contains(&said), "{said}\n{text}");
    assert!(!text.contains("attached report.xlsx"), "{text}");

    let decided = env.path("decided.xlsx");
    let out = Command::new(openpyxl_python())
        .args(["-c", FILL])
        .arg(dir.join("decide.xlsx"))
        .arg(&decided)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let applied = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["decisions", "apply", "--config"])
        .arg(&env.config_path)
        .args(["--actor", "alice"])
        .arg(&decided)
        .output()
        .expect("recon runs");
    assert_eq!(
        applied.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let rows = crate::support::read_columns(
        &recon::decisions::result::FileResult::result_path(&decided),
        &["case", "result"],
    );
    assert_eq!(rows.len(), held.len(), "{rows:?}");
    for (r, key) in rows.iter().zip(&held) {
        assert_eq!((&r[0], r[1].as_str()), (key, "applied"), "{rows:?}");
    }
}

/// A cap the message would pass with diff.csv: report.xlsx is attached, diff.csv stays in the
/// run folder (and the text says so), and the message is under the cap.
#[tokio::test]
async fn diff_csv_stays_in_the_folder_when_it_would_pass_the_email_cap() {
    // 0.095 MiB (97.3 KiB): the bodies (about 49 KiB) and report.xlsx (31 KiB, 41 as base64)
    // fit; diff.csv (8 KiB, 11 as base64) on top does not.
    let cap = 99_615;
    let (_env, report) = night("max_email_mb = 0.095\n").await;
    let dir = &report.out_dir;
    let (parts, size, text, html) = message(dir);
    let names = attached(&parts);
    assert_eq!(names, ["report.xlsx"], "{text}");
    assert!(size <= cap, "message is {size} bytes, cap {cap}");
    let diff_len = std::fs::metadata(dir.join("diff.csv"))
        .expect("diff.csv")
        .len();
    // Base64 takes 4 bytes per 3: with diff.csv the message would be over the cap.
    assert!(
        size + diff_len * 4 / 3 > cap,
        "diff.csv {diff_len} bytes would fit in a message of {size} bytes"
    );
    assert!(
        text.contains("diff.csv (") && text.contains("stays in the run folder"),
        "{text}"
    );
    claims_match(&text, &names);
    claims_match(&html, &names);
}

/// With `report_url`, the email links the full report where it would name the run folder, and
/// still attaches only what fits.
#[tokio::test]
async fn report_url_links_the_full_report_that_is_not_attached() {
    let (_env, report) =
        night("max_attachment_mb = 0.01171875\nreport_url = \"https://recon.example/runs/\"\n")
            .await;
    let (parts, _, text, html) = message(&report.out_dir);
    let names = attached(&parts);
    assert!(!names.iter().any(|n| n == "report.xlsx"), "{names:?}");
    let link = "https://recon.example/runs/r1/report.xlsx";
    assert!(
        text.contains(&format!("; all are in report.xlsx ({link}))")),
        "{text}"
    );
    assert!(text.contains(&format!("The full report: {link}")), "{text}");
    assert!(html.contains(link), "{html}");
    claims_match(&text, &names);
    claims_match(&html, &names);
}
