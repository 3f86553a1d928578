//! `recon backtest` (issue 45), on both backends: three nights recorded with the live rules
//! (a fuzzy pass with a 2-hour window and no amount tolerance) while reviewers decide between
//! them, then a candidate with a 72-hour window and a 50-cent tolerance replayed over them.
//! The exact flips, the agreement with reviewers and the exit code are checked, the database
//! is the same after as before (a dump of every table), and a file changed since its night
//! skips that night with the file named.

use crate::decision_kinds::{case_of, cases};
use crate::support::{Backend, Settings, TestEnv, psp_source, write_decide_file};
use recon::backtest::{BacktestOptions, BacktestReport, Risk, Verdict};
use recon::store::cases::StoredCase;
use std::process::Command;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "NL91ABNA0417164300";
const IBAN_C: &str = "GB33BUKB20201555555555";
const IBAN_D: &str = "FR7630006000011234567890189";
const IBAN_E: &str = "BE68539007547034";

/// Identifiers, then recipient + amount + currency: pass `id` accepts a line up to
/// `window_after` after the payment was sent, `tolerance` cents apart.
fn rules(id: &str, window_after: &str, tolerance: u32) -> String {
    format!(
        "[[pass]]\nid = \"identifier\"\nkind = \"identifier\"\n\
         identifiers = [\"reference\", \"provider_txn_id\"]\n\
         auto_apply_succeeded = true\nauto_apply_unknown = true\n\n\
         [[pass]]\nid = \"{id}\"\nkind = \"fuzzy\"\nwindow_before = \"10m\"\n\
         window_after = \"{window_after}\"\namount_tolerance_minor = {tolerance}\n\
         auto_apply_succeeded = true\nauto_apply_unknown = true\n"
    )
}

/// A job reading one provider file per day (`psp-<day>.csv`), so each night's files stay as
/// its run read them, with the live rules and a reporting currency.
async fn job(b: Backend) -> TestEnv {
    let env = TestEnv::on(
        b,
        Settings {
            // The live rules: within 2 hours, exact.
            rules: Some(rules("recipient_amount_2h", "2h", 0)),
            complete: None,
            ..Settings::default()
        },
    )
    .await;
    let cfg = std::fs::read_to_string(&env.config_path).expect("config");
    let head = cfg.split("[[source]]").next().expect("head");
    env.write(
        "recon.toml",
        &format!(
            "{head}reporting_currency = \"EUR\"\n\n{}",
            psp_source("psp-{date}.csv", "")
        ),
    );
    std::fs::create_dir_all(env.path("rules-next")).expect("rules-next");
    // The candidate: a 72-hour window and a 50-cent tolerance.
    env.write(
        "rules-next/rules.toml",
        &rules("recipient_amount_72h_50c", "72h", 50),
    );
    // P-1, P-2 and P-5 are sent on the 10th, P-3 on the 11th, P-4 on the 12th; every call
    // timed out (UNKNOWN).
    env.import(
        &format!(
            "P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},50.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-2,\n\
             P-5,{IBAN_E},60.00,EUR,UNKNOWN,2026-11-10T12:00:00Z,2026-11-10T12:00:00Z,A-5,\n\
             P-3,{IBAN_C},30.00,EUR,UNKNOWN,2026-11-11T09:00:00Z,2026-11-11T09:00:00Z,A-3,\n\
             P-4,{IBAN_D},70.00,EUR,UNKNOWN,2026-11-12T09:00:00Z,2026-11-12T09:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-5,P-5,2026-11-10T12:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-11T09:00:00Z,,UNKNOWN,,timeout\n\
         A-4,P-4,2026-11-12T09:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    deliver_day(&env, "2026-11-10");
    env
}

/// The provider's file of `day`, delivered the morning after it, before that night's run.
/// L-1 and L-2: P-1's and P-2's exact amounts, 5 hours after they were sent (outside the live
/// window: near misses); L-5: 59.50 for P-5's 60.00 (a 50-cent fee kept) half an hour after
/// it. L-3 names P-3. L-4: P-4's amount 5 hours after it.
fn deliver_day(env: &TestEnv, day: &str) {
    let rows = match day {
        "2026-11-10" => format!(
            "L-1,,{IBAN_A},40.00,EUR,2026-11-10T14:00:00Z,PAYMENT\n\
             L-2,,{IBAN_B},50.00,EUR,2026-11-10T16:00:00Z,PAYMENT\n\
             L-5,,{IBAN_E},59.50,EUR,2026-11-10T12:30:00Z,PAYMENT\n"
        ),
        "2026-11-11" => format!("L-3,P-3,{IBAN_C},30.00,EUR,2026-11-11T09:30:00Z,PAYMENT\n"),
        _ => format!("L-4,,{IBAN_D},70.00,EUR,2026-11-12T14:00:00Z,PAYMENT\n"),
    };
    env.deliver(&format!("psp-{day}.csv"), &rows);
}

/// Applies a Decide sheet of `rows` (case, decision) as alice.
async fn decide(env: &TestEnv, name: &str, rows: &[(&StoredCase, &str)]) {
    let file = env.path(name);
    let rows: Vec<(String, String, String)> = rows
        .iter()
        .map(|(c, d)| (c.key.clone(), c.fingerprint.clone(), d.to_string()))
        .collect();
    write_decide_file(&file, &rows, "checked with the provider");
    let db = env.db().await;
    let r = recon::decisions::apply_file(&db, &env.config().decisions, &file, "alice")
        .await
        .expect("apply");
    db.close().await;
    assert!(
        r.rows
            .iter()
            .all(|x| x.status == recon::decisions::result::Status::Applied),
        "{r:#?}"
    );
}

/// Three nights with reviewers deciding after the first: alice confirms L-1 as P-1's and
/// sets P-2 FAILED (she trusted the provider's dashboard, which said it never left). Each
/// day's file arrives before its night.
async fn record_three_nights(env: &TestEnv) {
    env.run("2026-11-10", "2026-11-11T02:00:00Z", false, "n1")
        .await;
    let all = cases(env).await;
    let (c1, c2) = (case_of(&all, "P-1"), case_of(&all, "P-2"));
    assert!(c1.candidates.iter().any(|c| c.line_id == "L-1"), "{c1:#?}");
    decide(env, "decide-1.xlsx", &[(c1, "confirm 1"), (c2, "failed")]).await;
    deliver_day(env, "2026-11-11");
    env.run("2026-11-11", "2026-11-12T02:00:00Z", false, "n2")
        .await;
    deliver_day(env, "2026-11-12");
    env.run("2026-11-12", "2026-11-13T02:00:00Z", false, "n3")
        .await;
}

async fn backtest(env: &TestEnv, out: &str) -> BacktestReport {
    recon::backtest::backtest(
        &env.config(),
        &BacktestOptions {
            rules_dir: env.path("rules-next"),
            from: "2026-11-10".parse().expect("day"),
            to: "2026-11-12".parse().expect("day"),
            out_dir: Some(env.path(out)),
            allow_new_transitions: false,
        },
    )
    .await
    .expect("backtest")
}

/// Every row of every table, as text, in a stable order: what "the database is unchanged"
/// means.
async fn dump(env: &TestEnv) -> Vec<String> {
    let db = env.db().await;
    let mut out = Vec::new();
    match &db.pool {
        recon::db::Pool::Sqlite(p) => {
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
            )
            .fetch_all(p)
            .await
            .expect("tables");
            for t in tables {
                let cols: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT name FROM pragma_table_info('{t}')"
                )))
                .fetch_all(p)
                .await
                .expect("columns");
                let row = cols
                    .iter()
                    .map(|c| format!("quote(\"{c}\")"))
                    .collect::<Vec<_>>()
                    .join(" || ',' || ");
                let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT {row} FROM \"{t}\" ORDER BY 1"
                )))
                .fetch_all(p)
                .await
                .expect("rows");
                out.extend(rows.into_iter().map(|r| format!("{t}: {r}")));
            }
        }
        recon::db::Pool::Postgres(p) => {
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() ORDER BY 1",
            )
            .fetch_all(p)
            .await
            .expect("tables");
            for t in tables {
                let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT r::text FROM \"{t}\" r ORDER BY 1"
                )))
                .fetch_all(p)
                .await
                .expect("rows");
                out.extend(rows.into_iter().map(|r| format!("{t}: {r}")));
            }
        }
    }
    db.close().await;
    assert!(out.len() > 20, "a dump of a database with three nights");
    out
}

/// (day, id, risk, before, after, reviewers) of every flip.
fn flips(r: &BacktestReport) -> Vec<(String, String, Risk, String, String, Option<String>)> {
    r.flips
        .iter()
        .map(|f| {
            (
                f.day.to_string(),
                f.id.clone(),
                f.risk,
                f.before.label(),
                f.after.label(),
                f.reviewers.as_ref().map(|v| v.as_str().to_string()),
            )
        })
        .collect()
}

async fn a_wider_window_and_a_tolerance_are_judged_against_reviewers(b: Backend) {
    let env = job(b).await;
    record_three_nights(&env).await;
    let before = dump(&env).await;
    let r = backtest(&env, "bt").await;
    assert_eq!(dump(&env).await, before, "backtest wrote to the database");
    assert!(r.skipped.is_empty(), "{:#?}", r.skipped);
    assert_eq!(r.nights.len(), 3, "{:#?}", r.nights);
    let s = |x: &str| x.to_string();
    let flip = |day: &str, id: &str, risk, before: &str, after: &str, rev: Option<&str>| {
        (s(day), s(id), risk, s(before), s(after), rev.map(s))
    };
    let (review, resolved) = ("AMBIGUOUS (review)", "RESOLVED_SUCCEEDED → SUCCEEDED");
    let (mismatch, paid) = ("AMOUNT_MISMATCH (review)", "FAILED_BUT_PAID (review)");
    assert_eq!(
        flips(&r),
        vec![
            // Night 1, as its run saw it (before alice decided): the 72-hour window resolves
            // the two near misses. She confirmed L-1 as P-1's: the same. She set P-2 FAILED:
            // the candidate contradicts her. The tolerance makes P-5's near miss an amount
            // mismatch: still a case, no transition.
            flip(
                "2026-11-10",
                "P-1",
                Risk::ToTransition,
                review,
                resolved,
                Some("same")
            ),
            flip(
                "2026-11-10",
                "P-2",
                Risk::ToTransition,
                review,
                resolved,
                Some("different")
            ),
            flip(
                "2026-11-10",
                "P-5",
                Risk::OutcomeOnly,
                review,
                mismatch,
                None
            ),
            // Night 2: P-2 is FAILED (alice) and the candidate finds its money: a critical
            // case where the live rules see none; P-5 is carried over.
            flip("2026-11-11", "P-2", Risk::OutcomeOnly, "no row", paid, None),
            flip(
                "2026-11-11",
                "P-5",
                Risk::OutcomeOnly,
                review,
                mismatch,
                None
            ),
            // Night 3: the same two, and L-4 five hours after P-4: a near miss for the live
            // window, P-4's payment for the candidate's. Nobody decided on it.
            flip("2026-11-12", "P-2", Risk::OutcomeOnly, "no row", paid, None),
            flip(
                "2026-11-12",
                "P-4",
                Risk::ToTransition,
                review,
                resolved,
                Some("undecided")
            ),
            flip(
                "2026-11-12",
                "P-5",
                Risk::OutcomeOnly,
                review,
                mismatch,
                None
            ),
        ],
        "{:#?}",
        r.flips
    );
    let a = &r.agreement;
    assert_eq!(
        (a.decided, a.same, a.dismissed, a.escalated, a.undecided),
        (3, 1, 0, 0, 1)
    );
    assert_eq!(a.different.len(), 1, "{a:#?}");
    assert_eq!(a.different[0].1, "P-2");
    assert!(
        a.different[0].2.contains("alice set FAILED"),
        "{}",
        a.different[0].2
    );
    let p2 = r
        .flips
        .iter()
        .find(|f| f.id == "P-2" && f.risk == Risk::ToTransition)
        .expect("P-2");
    assert!(matches!(&p2.reviewers, Some(Verdict::Different(_))));
    assert_eq!(p2.value, Some("50.00".parse().expect("decimal")));
    // Three new transitions and a contradiction: the gate fails either way.
    assert_eq!(r.new_transitions(), 3);
    assert_eq!(r.exit_code(false), recon::exit::BACKTEST_GATE);
    assert_eq!(r.exit_code(true), recon::exit::BACKTEST_GATE);
    // backtest.csv: a row per flip, the reviewers' word beside the candidate's.
    let rows = crate::support::read_columns(
        &env.path("bt/backtest.csv"),
        &[
            "night",
            "id",
            "risk",
            "rule_after",
            "reviewers",
            "value_EUR",
        ],
    );
    assert_eq!(rows.len(), 8);
    assert_eq!(
        rows[1],
        vec![
            s("n1"),
            s("P-2"),
            s("to_transition"),
            s("recipient_amount_72h_50c"),
            s("different"),
            s("50.00")
        ]
    );
    let html = std::fs::read_to_string(env.path("bt/backtest.html")).expect("html");
    assert!(html.contains("review → automatic transition (3)"), "{html}");
    assert!(html.contains("alice set FAILED"), "{html}");
    assert!(env.path("bt/backtest.xlsx").exists());
    assert!(!env.path("bt.tmp").exists());
}

async fn a_file_changed_since_its_night_skips_that_night(b: Backend) {
    let env = job(b).await;
    record_three_nights(&env).await;
    // The provider re-delivers the 12th with a correction.
    env.deliver(
        "psp-2026-11-12.csv",
        &format!("L-4,,{IBAN_D},70.01,EUR,2026-11-12T14:00:00Z,PAYMENT\n"),
    );
    let r = backtest(&env, "bt").await;
    assert_eq!(r.nights.len(), 2);
    assert_eq!(r.skipped.len(), 1, "{:#?}", r.skipped);
    assert_eq!(r.skipped[0].day.to_string(), "2026-11-12");
    assert!(
        r.skipped[0]
            .why
            .contains("psp-2026-11-12.csv: changed since the run"),
        "{}",
        r.skipped[0].why
    );
    assert!(r.flips.iter().all(|f| f.day.to_string() != "2026-11-12"));
    // Nothing compared at all is no pass: every night of a range skipped is exit 4.
    let only = recon::backtest::backtest(
        &env.config(),
        &BacktestOptions {
            rules_dir: env.path("rules-next"),
            from: "2026-11-12".parse().expect("day"),
            to: "2026-11-12".parse().expect("day"),
            out_dir: Some(env.path("bt-12")),
            allow_new_transitions: true,
        },
    )
    .await
    .expect("backtest");
    assert_eq!((only.nights.len(), only.skipped.len()), (0, 1));
    assert_eq!(only.exit_code(true), recon::exit::INPUT);
}

on_both_backends!(
    a_wider_window_and_a_tolerance_are_judged_against_reviewers,
    a_file_changed_since_its_night_skips_that_night,
);

/// The command line: the summary on stdout and exit 15; an invalid candidate is exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_gates_on_new_transitions_and_refuses_invalid_rules() {
    let env = job(Backend::Sqlite).await;
    record_three_nights(&env).await;
    // The nights were run with the job file's absolute path; by hand it is named from its
    // folder: the replay still reads the files each run read.
    let run = |rules: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_recon"))
            .current_dir(env.dir.path())
            .args(["backtest", "--config", "recon.toml", "--rules", rules])
            .args(["--from", "2026-11-10", "--to", "2026-11-12"])
            .args(extra)
            .output()
            .expect("recon runs")
    };
    let out = run("rules-next", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(15), "{stdout}");
    assert!(
        stdout.contains("against a reviewer: P-2 (night n1): alice set FAILED"),
        "{stdout}"
    );
    assert!(
        stdout.starts_with("The candidate rules change 8 row(s) on 3 night(s)"),
        "{stdout}"
    );
    assert!(
        env.path("out/backtest-2026-11-10_2026-11-12/backtest.csv")
            .exists()
    );
    std::fs::create_dir_all(env.path("rules-bad")).expect("dir");
    env.write(
        "rules-bad/rules.toml",
        "[[pass]]\nid = \"x\"\nkind = \"fuzzy\"\n",
    );
    let out = run("rules-bad", &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn summary_json(r: &recon::run::RunReport) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(r.out_dir.join("summary.json")).expect("summary"))
        .expect("summary.json")
}

/// `[shadow]`: each night also plans with the shadow rules and applies nothing of them; the
/// summary (and from it the report and the email) says what they would change. Shadow rules
/// that do not validate are said there too, and the night is unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_rules_are_planned_beside_the_night_and_change_nothing() {
    let env = job(Backend::Sqlite).await;
    let cfg = std::fs::read_to_string(&env.config_path).expect("config");
    env.write(
        "recon.toml",
        &cfg.replacen(
            "[[source]]",
            "[shadow]\nrules_dir = \"rules-next\"\n\n[[source]]",
            1,
        ),
    );
    let r1 = env
        .run("2026-11-10", "2026-11-11T02:00:00Z", false, "n1")
        .await;
    let summary = summary_json(&r1);
    let shadow = &summary["shadow"];
    assert_eq!(shadow["to_transition"], 2, "{shadow}");
    assert_eq!(shadow["to_transition_value"], "90.00 EUR", "{shadow}");
    assert_eq!(shadow["outcome_only"], 1, "{shadow}");
    assert_eq!(shadow["from_transition"], 0, "{shadow}");
    assert_eq!(shadow["reviewers_undecided"], 2, "{shadow}");
    let first: Vec<(String, String)> = shadow["first"]
        .as_array()
        .expect("first")
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap_or_default().to_string(),
                f["after"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        first,
        vec![
            (
                "P-1".to_string(),
                "RESOLVED_SUCCEEDED → SUCCEEDED".to_string()
            ),
            (
                "P-2".to_string(),
                "RESOLVED_SUCCEEDED → SUCCEEDED".to_string()
            ),
            ("P-5".to_string(), "AMOUNT_MISMATCH (review)".to_string()),
        ]
    );
    // Nothing of it was applied: the live rules' near misses stand.
    let statuses = env
        .texts("SELECT payment_id || '=' || status FROM payments ORDER BY payment_id")
        .await;
    assert_eq!(
        statuses,
        [
            "P-1=UNKNOWN",
            "P-2=UNKNOWN",
            "P-3=UNKNOWN",
            "P-4=UNKNOWN",
            "P-5=UNKNOWN"
        ]
    );
    let html = std::fs::read_to_string(r1.out_dir.join("report.html")).expect("html");
    assert!(
        html.contains("<h2>Shadow rules would change</h2>")
            && html.contains("2 would become automatic transitions (90.00 EUR)"),
        "{html}"
    );
    // Shadow rules that do not validate: said in the summary, the night runs.
    env.write(
        "rules-next/rules.toml",
        "[[pass]]\nid = \"x\"\nkind = \"fuzzy\"\n",
    );
    let r2 = env
        .run("2026-11-10", "2026-11-11T02:00:00Z", false, "n1-again")
        .await;
    let summary = summary_json(&r2);
    let error = summary["shadow"]["error"].as_str().expect("an error");
    assert!(error.contains("rules.toml"), "{error}");
}
