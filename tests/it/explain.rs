//! `recon explain`: the decision, the candidates and the reason each was rejected.

use crate::support::TestEnv;
use recon::explain::{ExplainOptions, explain};

const IBAN: &str = "DE89370400440532013000";

async fn scenario() -> TestEnv {
    let env = TestEnv::new();
    env.import(
        &format!(
            "P-1,{IBAN},10.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-4,GB33BUKB20201555555555,40.00,GBP,UNKNOWN,2026-11-10T12:00:00Z,2026-11-10T12:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-4,P-4,2026-11-10T12:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    // L-1 names P-1; L-4 is P-4's recipient and currency net of a fee; L-5 is the same
    // recipient four days later (outside the 72 h window).
    env.statement(&format!(
        "L-1,P-1,{IBAN},10.00,EUR,2026-11-10T09:30:00Z,PAYMENT\n\
         L-4,,GB33BUKB20201555555555,39.50,GBP,2026-11-10T13:00:00Z,PAYMENT\n\
         L-5,,GB33BUKB20201555555555,40.00,GBP,2026-11-14T13:00:00Z,PAYMENT\n"
    ));
    env.run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    env
}

fn opts(id: &str) -> ExplainOptions {
    ExplainOptions {
        id: id.into(),
        run: Some("r1".into()),
        date: None,
        as_of: None,
    }
}

#[tokio::test]
async fn a_near_miss_names_the_line_that_blocked_resolution_and_why_others_were_rejected() {
    let env = scenario().await;
    let text = explain(&env.config(), &opts("P-4")).await.expect("explain");
    assert!(text.starts_with("run r1: 2026-11-10"), "{text}");
    assert!(
        text.contains("outcome: AMBIGUOUS   rule: near_miss"),
        "{text}"
    );
    let near = text
        .lines()
        .find(|l| l.starts_with("near miss"))
        .expect("near miss line");
    assert!(
        near.contains("line L-4") && near.contains("39.50"),
        "{near}"
    );
    // L-5: right amount, outside the window; the reason says so.
    let l5 = text
        .split("considered: line L-5")
        .nth(1)
        .expect("L-5 considered");
    assert!(l5.contains("outside the window"), "{text}");
    assert!(!l5.contains(" ≠ "), "L-5 amount and currency fit: {text}");
    // Masked account numbers only.
    assert!(!text.contains("GB33BUKB20201555555555"), "{text}");
}

#[tokio::test]
async fn a_line_explains_its_link_and_the_run_is_replayed_not_rewritten() {
    let env = scenario().await;
    let text = explain(&env.config(), &opts("L-1")).await.expect("explain");
    assert!(
        text.contains("outcome: RESOLVED_SUCCEEDED   rule: identifier"),
        "{text}"
    );
    assert!(
        text.contains("linked (pass \"identifier\"): payment P-1"),
        "{text}"
    );
    // recon's own transition is undone for the replay: P-1 shows as the run saw it.
    assert!(text.contains("payment P-1 (UNKNOWN"), "{text}");
}

#[tokio::test]
async fn a_changed_statement_is_flagged_and_unknown_ids_are_errors() {
    let env = scenario().await;
    let path = env.path("statement.csv");
    let mut st = std::fs::read_to_string(&path).expect("statement");
    st.push_str("L-9,,X,1.00,EUR,2026-11-10T15:00:00Z,PAYMENT\n");
    std::fs::write(&path, st).expect("write");
    let text = explain(&env.config(), &opts("P-1")).await.expect("explain");
    assert!(text.contains("changed since the run"), "{text}");
    let err = explain(&env.config(), &opts("P-404"))
        .await
        .expect_err("unknown");
    assert_eq!(recon::exit::code_for(&err), recon::exit::INPUT);
    assert!(format!("{err:#}").contains("P-404"));
}

/// Issue 18: explain names the look-alike in another currency that blocked RESOLVED_FAILED,
/// and says why a line proven to be another payment's is no look-alike.
#[tokio::test]
async fn explain_names_the_currency_look_alike_and_why_a_proven_line_is_none() {
    let env = TestEnv::new();
    env.import(
        &format!(
            "P-1,{IBAN},30.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN},80.00,EUR,SUCCEEDED,2026-11-10T10:00:00Z,2026-11-10T10:00:00Z,A-2,\n\
             P-3,{IBAN},20.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-3,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T10:00:00Z,,SUCCEEDED,,\n\
         A-3,P-3,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    // L-1: the same recipient, 30.00 but in USD, no reference. L-2 names P-2.
    env.statement(&format!(
        "L-1,,{IBAN},30.00,USD,2026-11-10T09:30:00Z,PAYMENT\n\
         L-2,P-2,{IBAN},80.00,EUR,2026-11-10T10:30:00Z,PAYMENT\n"
    ));
    env.run("2026-11-10", "2026-11-20T00:00:00Z", false, "r1")
        .await;
    let p1 = explain(&env.config(), &opts("P-1")).await.expect("explain");
    assert!(p1.contains("outcome: AMBIGUOUS   rule: near_miss"), "{p1}");
    let near = p1
        .lines()
        .find(|l| l.starts_with("near miss"))
        .expect("near miss line");
    assert!(near.contains("line L-1") && near.contains("USD"), "{near}");
    assert!(near.contains("any amount or currency"), "{near}");
    // P-3 is blocked by L-1 too (same recipient, any amount, any currency); L-2 is P-2's.
    let p3 = explain(&env.config(), &opts("P-3")).await.expect("explain");
    let l2 = p3
        .split("considered: line L-2")
        .nth(1)
        .expect("L-2 considered");
    assert!(
        l2.lines()
            .nth(1)
            .is_some_and(|l| l
                .contains("not a look-alike: proven to be payment P-2's by pass \"identifier\"")),
        "{p3}"
    );
}

/// Issue 30 point 10: the run named the config by its absolute path (as a scheduler does);
/// `recon explain --config recon.toml` from the job's folder names the same inputs relative to
/// it. They are the files the run read: no warning.
#[tokio::test]
async fn explain_with_a_relative_config_path_knows_the_files_the_run_read() {
    let env = scenario().await;
    assert!(env.config_path.is_absolute());
    let explain = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_recon"))
            .current_dir(env.dir.path())
            .args(["explain", "P-1", "--run", "r1", "--config", "recon.toml"])
            .env_remove("RECON_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .output()
            .expect("recon runs")
    };
    let out = explain();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("outcome: RESOLVED_SUCCEEDED"), "{stdout}");
    assert!(!stdout.contains("warning"), "{stdout}");
    // A change is still seen through the other spelling.
    let path = env.path("statement.csv");
    let mut st = std::fs::read_to_string(&path).expect("statement");
    st.push_str("L-9,,X,1.00,EUR,2026-11-10T15:00:00Z,PAYMENT\n");
    std::fs::write(&path, st).expect("write");
    let out = explain();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("warning: statement.csv changed since the run"),
        "{stdout}"
    );
    assert!(!stdout.contains("was not read by the run"), "{stdout}");
}
