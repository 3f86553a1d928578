//! Golden scenarios: one small, readable folder per outcome under `tests/golden/`, each with
//! the ledger, the statement, the run settings and the hand-written expected results.

use crate::support::{Settings, TestEnv, read_columns};
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    date: String,
    as_of: String,
    complete_from: Option<String>,
    complete_to: Option<String>,
    #[serde(default)]
    propose_only_fuzzy: bool,
    /// Further top-level keys of the job file (e.g. `reference_pattern = "…"`).
    #[serde(default)]
    extra: String,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

const COLUMNS: [&str; 5] = ["outcome", "payment_id", "provider_txn_id", "rule", "action"];

/// Runs one scenario; returns (expected, actual) rows.
async fn run_scenario(name: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>, TestEnv) {
    let dir = golden_dir().join(name);
    let scenario: Scenario =
        toml::from_str(&std::fs::read_to_string(dir.join("scenario.toml")).expect("scenario"))
            .expect("scenario.toml is valid");
    let mut settings = Settings {
        extra: format!("{}\n", scenario.extra),
        ..Settings::default()
    };
    if let (Some(a), Some(b)) = (&scenario.complete_from, &scenario.complete_to) {
        settings.complete = Some((a.clone(), b.clone()));
    }
    if scenario.propose_only_fuzzy {
        let rules = recon::rules::DEFAULT_RULES;
        let at = rules
            .find("id = \"recipient_amount_window\"")
            .expect("fuzzy pass");
        let (head, tail) = rules.split_at(at);
        settings.rules = Some(format!(
            "{head}{}",
            tail.replace("auto_apply_unknown = true", "auto_apply_unknown = false")
        ));
    }
    let env = TestEnv::with(settings);
    for f in ["payments.csv", "attempts.csv", "statement.csv"] {
        std::fs::copy(dir.join(f), env.path(f)).expect("copy fixture");
    }
    // Stored webhook events, for a scenario whose `extra` reads them (`webhook_path`).
    if dir.join("hooks").is_dir() {
        std::fs::create_dir_all(env.path("hooks")).expect("hooks folder");
        for e in std::fs::read_dir(dir.join("hooks")).expect("hooks") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), env.path("hooks").join(e.file_name())).expect("copy hook");
        }
    }
    // Delivered complete, with its control file (DESIGN.md rule 2).
    env.control("statement.csv");
    env.import_files().await;
    let report = env
        .run(&scenario.date, &scenario.as_of, false, "golden")
        .await;
    let actual = read_columns(&report.out_dir.join("results.csv"), &COLUMNS);
    let expected = read_columns(&dir.join("expected.csv"), &COLUMNS);
    (expected, actual, env)
}

macro_rules! golden {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (expected, actual, _env) = run_scenario(stringify!($name)).await;
                assert_eq!(actual, expected, "scenario {}", stringify!($name));
            }
        )*
        /// Every folder under tests/golden has a test above.
        #[test]
        fn every_golden_folder_is_tested() {
            let listed: std::collections::BTreeSet<&str> = [$(stringify!($name)),*].into_iter().collect();
            let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir(golden_dir())
                .expect("golden dir")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            let on_disk: std::collections::BTreeSet<&str> = on_disk.iter().map(String::as_str).collect();
            assert_eq!(listed, on_disk);
        }
    };
}

golden!(
    ambiguous_near_miss,
    contradicted_payout_held_twice,
    ambiguous_reference_other_recipient,
    ambiguous_twin_succeeded_with_named_partner,
    ambiguous_twin_unknown_with_named_partner,
    ambiguous_twins,
    amount_mismatch,
    amount_mismatch_is_no_near_miss,
    awaiting_evidence_incomplete_source,
    awaiting_evidence_settlement_lag,
    currency_mismatch,
    duplicate_at_provider,
    duplicate_at_provider_old_payment,
    failed_but_paid,
    failed_ok,
    in_flight,
    matched_by_provider_id,
    matched_by_reference,
    matched_by_window,
    missing_at_provider,
    not_submitted,
    orphan_at_provider,
    orphan_unknown_reference_shape,
    orphan_unknown_uuid_reference,
    paid_while_pending,
    proposed_match,
    refund,
    returned,
    resolved_failed,
    resolved_succeeded,
    resolved_succeeded_stale_submitting,
    review_is_never_transitioned,
);

/// Every outcome of the contract appears in at least one golden scenario.
#[test]
fn golden_scenarios_cover_every_outcome() {
    let mut seen = std::collections::BTreeSet::new();
    // Three-way scenarios (tests/it/threeway.rs) keep their expected rows beside the others'.
    let threeway = golden_dir().join("../threeway");
    let dirs = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .chain(std::fs::read_dir(threeway).expect("threeway dir"));
    for e in dirs {
        let path = e.expect("entry").path().join("expected.csv");
        for row in read_columns(&path, &["outcome"]) {
            seen.insert(row[0].clone());
        }
    }
    for o in recon::outcome::Outcome::ALL {
        assert!(
            seen.contains(o.as_str()),
            "no golden scenario for {}",
            o.as_str()
        );
    }
}

/// Re-running every scenario gives byte-identical results and changes nothing more.
#[tokio::test]
async fn golden_reruns_are_byte_identical() {
    for name in [
        "contradicted_payout_held_twice",
        "resolved_succeeded",
        "resolved_failed",
        "ambiguous_twins",
        "duplicate_at_provider",
        "duplicate_at_provider_old_payment",
        "ambiguous_twin_succeeded_with_named_partner",
    ] {
        let (_, _, env) = run_scenario(name).await;
        let scenario: Scenario = toml::from_str(
            &std::fs::read_to_string(golden_dir().join(name).join("scenario.toml")).expect("read"),
        )
        .expect("toml");
        let first = std::fs::read(env.path("out/golden/results.csv")).expect("first");
        let again = env
            .run(&scenario.date, &scenario.as_of, false, "again")
            .await;
        let second = std::fs::read(again.out_dir.join("results.csv")).expect("second");
        assert_eq!(first, second, "{name}: re-run changed results.csv");
        assert_eq!(again.summary.transitions.applied, 0, "{name}");
        assert_eq!(again.summary.tickets.created, 0, "{name}");
    }
}
