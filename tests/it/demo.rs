//! The README's quick start as a user runs it: the built `recon` binary, `recon demo` in a
//! checkout's folder (here a copy of `sample-data/`, so the test leaves the clone as it found
//! it), then the next steps the demo names: `recon explain` on a payment and on a statement
//! line, and the review queue.

use std::path::Path;
use std::process::{Command, Output};

/// `recon ARGS` in `dir`, without the environment's database URL overrides.
fn recon(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(args)
        .current_dir(dir)
        .env_remove("RECON_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("RECON_LOG")
        .output()
        .expect("recon runs")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A folder laid out as the repository's root for the quick start: `sample-data/` copied
/// (with its `rules-next/`).
fn checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::support::copy_sample_data(&dir.path().join("sample-data"));
    dir
}

/// The line of `text` that starts (after indentation) with `start`, split on whitespace.
fn row<'t>(text: &'t str, start: &str) -> Vec<&'t str> {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in:\n{text}"))
        .split_whitespace()
        .collect()
}

#[test]
fn the_quick_start_demo_prints_payments_and_lines_apart_and_names_the_next_steps() {
    let dir = checkout();
    let out = ok(&recon(dir.path(), &["demo"]));

    // The sample: 18 payments and 15 statement lines, one payment row each.
    assert!(
        out.contains("18 payments in scope, 15 statement lines read, 0 rejected"),
        "{out}"
    );
    // Every payment once, with its own amount (reviewed against sample-data/payments.csv):
    // AMBIGUOUS are P-1014 and P-1015 (500.00 each, one 500.00 line fits both) and P-1016
    // (200.00, a 198.50 line nearly fits); MATCHED are 75.50 EUR, 42 GBP and 1500 JPY.
    let table = |title: &str| -> Vec<Vec<&str>> {
        out.lines()
            .skip_while(|l| l.trim_start() != title)
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .map(|l| l.split_whitespace().collect())
            .collect()
    };
    fn want(rows: &[&'static str]) -> Vec<Vec<&'static str>> {
        rows.iter()
            .map(|r| r.split_whitespace().collect())
            .collect()
    }
    assert_eq!(
        table("payments: 18, one outcome each"),
        want(&[
            "AMBIGUOUS 3 1200.00 EUR",
            "AMOUNT_MISMATCH 1 100.00 EUR",
            "AWAITING_EVIDENCE 1 80.00 EUR",
            "CURRENCY_MISMATCH 1 60.00 EUR",
            "DUPLICATE_AT_PROVIDER 1 250.00 EUR",
            "FAILED_BUT_PAID 1 45.00 EUR",
            "FAILED_OK 1 33.00 EUR",
            "MATCHED 3 75.50 EUR, 42.00 GBP, 1500 JPY",
            "MISSING_AT_PROVIDER 1 999.00 EUR",
            "NOT_SUBMITTED 1 10.00 EUR",
            "RESOLVED_FAILED 1 55.00 EUR",
            "RESOLVED_SUCCEEDED 2 319.99 EUR",
            "RETURNED 1 120.00 EUR",
        ]),
        "{out}"
    );
    // The lines no single payment claims, each once: PSP-0014 (500.00) and PSP-0016 (198.50)
    // behind the AMBIGUOUS payments, PSP-0020 (310.00) nobody's.
    assert_eq!(
        table("statement lines not claimed by exactly one payment: 3, one outcome each"),
        want(&["AMBIGUOUS 2 698.50 EUR", "ORPHAN_AT_PROVIDER 1 310.00 EUR"]),
        "{out}"
    );

    // What it wrote, where it says.
    let results = row(&out, "results:")[1];
    let run_dir = dir.path().join(results);
    assert!(
        run_dir.starts_with(dir.path().join("var/demo/out")),
        "{}",
        run_dir.display()
    );
    for f in [
        "results.csv",
        "summary.json",
        "rejected.csv",
        "report.xlsx",
        "report.html",
        "diff.csv",
        "email.eml",
    ] {
        assert!(
            run_dir.join(f).is_file(),
            "{f} missing in {}",
            run_dir.display()
        );
    }
    // The demo's job names shadow rules (a 1.50 tolerance): the report and the email say
    // what they would change, and nothing of it was applied.
    let html = std::fs::read_to_string(run_dir.join("report.html")).expect("report.html");
    let shadow = html
        .split("<h2>Shadow rules would change</h2>")
        .nth(1)
        .expect("a shadow section in report.html");
    assert!(
        shadow.contains("would change 1 row(s) tonight")
            && shadow.contains("P-1016")
            && shadow.contains("AMOUNT_MISMATCH (review)"),
        "{shadow}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).expect("json"))
            .expect("summary.json");
    assert_eq!(
        summary["shadow"]["outcome_only"], 1,
        "{}",
        summary["shadow"]
    );
    assert_eq!(summary["shadow"]["to_transition"], 0);
    let results_csv = std::fs::read_to_string(run_dir.join("results.csv")).expect("results");
    assert!(
        results_csv
            .lines()
            .any(|l| l.contains("P-1016") && l.contains("AMBIGUOUS")),
        "the live rules' outcome is the one reported"
    );
    assert_eq!(
        results_csv
            .lines()
            .skip(1)
            .filter(|l| l.split(',').nth(1).is_some_and(|p| !p.is_empty()))
            .count(),
        18,
        "one row per payment"
    );

    // The next steps: each command it names runs as printed and is about what it says.
    let next = out.split("\nNext ").nth(1).expect("next steps");
    let commands: Vec<Vec<&str>> = next
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("recon "))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    assert_eq!(commands.len(), 3, "{next}");
    assert_eq!(
        commands[0][..3],
        ["explain", "--config", "sample-data/recon.toml"]
    );
    assert_eq!(
        commands[1][..3],
        ["explain", "--config", "sample-data/recon.toml"]
    );
    assert_eq!(
        commands[2],
        [
            "cases",
            "list",
            "--config",
            "sample-data/recon.toml",
            "--open"
        ]
    );
    let payment = commands[0][3];
    let line = commands[1][3];
    assert_eq!((payment, line), ("P-1014", "PSP-0020"), "{next}");
    assert!(next.contains("why payment P-1014 is AMBIGUOUS"), "{next}");
    assert!(
        next.contains("why statement line PSP-0020 is ORPHAN_AT_PROVIDER"),
        "{next}"
    );
    let explained = ok(&recon(dir.path(), &commands[0]));
    assert!(
        explained.contains(&format!("payment {payment} ")) && explained.contains("AMBIGUOUS"),
        "{explained}"
    );
    let explained = ok(&recon(dir.path(), &commands[1]));
    assert!(explained.contains(&format!("line {line} ")), "{explained}");
    // The queue of cases names what each is about: the ambiguous payment, the orphan line.
    let queue = ok(&recon(dir.path(), &commands[2]));
    assert!(queue.contains(payment), "{queue}");
    assert!(
        queue
            .lines()
            .any(|l| l.contains("ORPHAN_AT_PROVIDER: line PSP-0020") && l.contains("OPEN")),
        "{queue}"
    );
    assert_eq!(
        queue.lines().count(),
        1 + 9,
        "a header and the demo's 9 cases: {queue}"
    );

    // The same candidate replayed over the recorded night: one flip, no new transition.
    let out = recon(
        dir.path(),
        &[
            "backtest",
            "--config",
            "sample-data/recon.toml",
            "--rules",
            "sample-data/rules-next",
            "--from",
            "2026-11-27",
            "--to",
            "2026-11-27",
        ],
    );
    let text = ok(&out);
    assert!(
        text.contains("The candidate rules change 1 row(s) on 1 night(s): 0 would become automatic transitions."),
        "{text}"
    );

    // The repository's sample is not what the demo writes into.
    assert!(
        !Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sample-data/var")
            .exists()
    );
}

/// `source#Lnn` names any line by its place in the file, whether or not it has a provider id;
/// a line that is not there is an error that says which forms work.
#[test]
fn explain_takes_source_and_line_number_for_every_line() {
    let dir = checkout();
    ok(&recon(dir.path(), &["demo"]));
    let explain = |id: &str| {
        recon(
            dir.path(),
            &["explain", "--config", "sample-data/recon.toml", id],
        )
    };
    // Line 2 of statement.csv (after the header) is PSP-0001, a line with a provider id.
    let by_number = ok(&explain("acme-pay#L2"));
    let by_id = ok(&explain("PSP-0001"));
    assert!(by_number.contains("line PSP-0001 "), "{by_number}");
    assert_eq!(by_number, by_id);
    let out = explain("acme-pay#L99");
    assert_eq!(out.status.code(), Some(recon::exit::INPUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("acme-pay#L99") && err.contains("`source#Lnn`") && err.contains("`source:id`"),
        "{err}"
    );
}

/// Step 3 of the quick start needs no server set up first: the backend tests' PostgreSQL
/// answers at the URL every message names, the suite's own cluster when `RECON_TEST_PG_URL` is
/// unset (so nothing on 5432 is needed), else that URL.
#[tokio::test]
async fn the_test_server_answers_at_the_url_its_messages_name() {
    use sqlx::Connection;
    let url = crate::support::pg_admin_url();
    let described = crate::support::pg_described();
    assert!(described.contains(&recon::mask::url(&url)), "{described}");
    if crate::support::pg_url_from_env().is_none() {
        let cluster = crate::support::own_cluster();
        assert!(
            described.contains("own cluster")
                && described.contains(&*cluster.dir.to_string_lossy()),
            "{described}"
        );
        assert!(cluster.dir.join("data/PG_VERSION").exists());
    }
    let mut conn = sqlx::PgConnection::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{described}: {e}"));
    let port: String = sqlx::query_scalar("SELECT current_setting('port')")
        .fetch_one(&mut conn)
        .await
        .expect("port");
    assert!(url.contains(&format!(":{port}/")), "{url} vs port {port}");
    let _ = conn.close().await;
}
