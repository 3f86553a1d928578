//! A sharded night as a platform team runs it (issue 44, points 1–4 and 8): the gather and
//! every shard run one job file, one set of rules and one recon build, or are refused naming
//! what differs; a whole-night run cannot remove a running gather's output; options that do not
//! apply to a shard (or to a run that is not one) are refused, not ignored; `recon explain`
//! knows a sharded night by its run group and by any of its shard runs.

use crate::shards::{NIGHT, Night, Variant, night, ok, paused_at, recon, variant};
use std::path::Path;
use std::process::{Command, Output};

/// The night's shards, `count` of them one after the other, without the gather.
fn shards(v: &Variant, date: &str, as_of: &str, count: u32, env: &[(&str, &str)]) {
    for i in 0..count {
        let out = run_shard(v, date, as_of, &format!("{i}/{count}"), env);
        ok(out, &format!("shard {i}/{count}"));
    }
}

fn run_shard(v: &Variant, date: &str, as_of: &str, shard: &str, env: &[(&str, &str)]) -> Output {
    let cfg = v.config.display().to_string();
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args([
            "run", "--config", &cfg, "--date", date, "--as-of", as_of, "--shard", shard, "--group",
            NIGHT,
        ])
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn gather_with(v: &Variant, config: &Path, date: &str, env: &[(&str, &str)]) -> Output {
    let cfg = config.display().to_string();
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["gather", "--config", &cfg, "--date", date, "--group", NIGHT])
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A generated night of `payments` in `k` merchants with its ledger imported into a SQLite
/// file (what needs no cluster): the night and its variant.
fn sqlite_night(dir: &Path, payments: usize, seed: u64, k: u32) -> (Night, Variant) {
    let n = crate::shards::generated_night(dir, payments, seed, k);
    let v = crate::shards::sqlite_variant(dir, &n, "sqlite.toml");
    let cfg = v.config.display().to_string();
    ok(recon(&["migrate", "--config", &cfg], &v), "migrate");
    let (payments, attempts) = (
        n.dir.join("payments.csv").display().to_string(),
        n.dir.join("attempts.csv").display().to_string(),
    );
    let import = [
        "ledger",
        "import",
        "--config",
        &cfg,
        "--payments",
        &payments,
        "--attempts",
        &attempts,
    ];
    ok(recon(&import, &v), "import");
    (n, v)
}

/// Column `column` of the night's run group, as the database holds it.
async fn group_column(v: &Variant, column: &str) -> Option<String> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {column} FROM recon_run_groups WHERE group_id = $1"
    )))
    .bind(NIGHT)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

fn refused(out: &Output, code: i32, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "{what}: {text}");
    text
}

/// Point 1 and 8: the gather with another job file (here the shards' with one line more), or
/// as another recon build, is refused (exit 3) naming what differs; nothing is written and the
/// night is not marked gathered, so the right gather still gathers it. A shard of another
/// build is refused the same way when it joins the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_or_shard_with_another_job_file_or_recon_build_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 240, 441);
    let v = variant(&n, "agree").await;
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    // Shard 1 as another build: refused when it joins the group shard 0 created.
    ok(run_shard(&v, &date, &as_of, "0/2", &[]), "shard 0/2");
    let skew = run_shard(&v, &date, &as_of, "1/2", &[("RECON_FAULT_BUILD", "0.0.9")]);
    let text = refused(&skew, recon::exit::CONFIG, "shard of another build");
    assert!(
        text.contains("the recon build (0.1.0 for the group, 0.0.9 here)"),
        "{text}"
    );
    ok(run_shard(&v, &date, &as_of, "1/2", &[]), "shard 1/2");

    let other = dir.path().join("gather-elsewhere.toml");
    let mut job = std::fs::read_to_string(&v.config).unwrap();
    job.push_str("\n# the gather's own copy, edited since the shards ran\n");
    std::fs::write(&other, job).unwrap();
    let text = refused(
        &gather_with(&v, &other, &date, &[]),
        recon::exit::CONFIG,
        "gather with another job file",
    );
    assert!(
        text.contains("differs from the night's shards in the job file"),
        "{text}"
    );
    assert!(!text.contains("the rules"), "{text}");
    let text = refused(
        &gather_with(&v, &v.config, &date, &[("RECON_FAULT_BUILD", "0.2.0")]),
        recon::exit::CONFIG,
        "gather of another build",
    );
    assert!(
        text.contains("the recon build (0.1.0 for the group, 0.2.0 here)"),
        "{text}"
    );
    assert!(!v.out.join(NIGHT).exists(), "nothing written");
    let text = ok(gather_with(&v, &v.config, &date, &[]), "the right gather");
    assert!(!text.contains("already gathered"), "{text}");
    assert!(v.out.join(NIGHT).join("results.csv").exists());
}

/// Point 2: a whole-night `recon run` of the same date (another run id) while the gather writes
/// its `.tmp` folder is refused (exit 6) and leaves the folder; the gather completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_night_run_cannot_remove_a_running_gathers_output() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 200, 442);
    let v = variant(&n, "gatherlock").await;
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    shards(&v, &date, &as_of, 2, &[]);
    let marker = dir.path().join("gather-paused");
    let cfg = v.config.display().to_string();
    let gather = paused_at(
        &v,
        &[
            "gather", "--config", &cfg, "--date", &date, "--group", NIGHT,
        ],
        "gather_written",
        &marker,
    );
    let tmp = v.out.join(format!("{NIGHT}.tmp"));
    assert!(tmp.join("results.csv").exists());
    let whole = recon(
        &[
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--run-id", "other",
        ],
        &v,
    );
    refused(&whole, recon::exit::LOCKED, "whole night beside the gather");
    assert!(
        tmp.join("results.csv").exists(),
        "the gather's output is kept"
    );
    std::fs::remove_file(&marker).unwrap();
    let text = ok(
        gather.wait_with_output().unwrap(),
        "the gather after its pause",
    );
    assert!(text.contains("shard 1:"), "{text}");
    assert!(v.out.join(NIGHT).join("report.xlsx").exists());
}

/// Point 3: `--run-id` and `--pull` with a shard, `--group` without one: refused (exit 3)
/// saying why, before anything is opened (no run folder, no run record).
#[tokio::test]
async fn options_a_shard_cannot_honour_are_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 60, 443);
    let v = variant(&n, "options").await;
    let cfg = v.config.display().to_string();
    let date = n.report.date.to_string();
    let base = ["run", "--config", &cfg, "--date", &date];
    // (arguments, $JOB_COMPLETION_INDEX, what the refusal says)
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (
            &["--shard", "0/2", "--run-id", "mine"],
            None,
            "--run-id does not apply to shard 0/2",
        ),
        (
            &["--shard", "1/2", "--pull"],
            None,
            "--pull does not apply to shard 1/2",
        ),
        (
            &["--group", "g1"],
            None,
            "--group g1 names a sharded night's run group",
        ),
        (
            &["--shards", "2", "--run-id", "x"],
            Some("1"),
            "--run-id does not apply to shard 1/2",
        ),
    ];
    for (extra, index, says) in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_recon"));
        cmd.args(&args)
            .env("RECON_DATABASE_URL", &v.url)
            .env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = index {
            cmd.env("JOB_COMPLETION_INDEX", i);
        }
        let out = cmd.output().unwrap();
        let text = refused(&out, recon::exit::CONFIG, &args.join(" "));
        assert!(text.contains(says), "{}: {text}", args.join(" "));
        assert!(text.contains("Nothing was run"), "{text}");
    }
    assert!(!v.out.exists(), "nothing written");
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap();
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM recon_runs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(runs, 0);
}

/// Point 4: `recon explain P --run <group>` explains the gathered night (its day and as-of, the
/// inputs every shard read), and without `--run` the latest shard run stands for its night: the
/// payment's own statement file is not "not read by the run", and the outcome is the one the
/// gathered results.csv gives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_knows_a_sharded_night_by_its_group_and_by_its_shard_runs() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 200, 444);
    let v = variant(&n, "explain").await;
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    shards(&v, &date, &as_of, 3, &[]);
    ok(gather_with(&v, &v.config, &date, &[]), "gather");
    // A payment of each outcome the night has, as the gathered results say.
    let mut rd = csv::Reader::from_path(v.out.join(NIGHT).join("results.csv")).unwrap();
    let h = rd.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (pid, outcome) = (col("payment_id"), col("outcome"));
    let mut by_outcome = std::collections::BTreeMap::new();
    for r in rd.records() {
        let r = r.unwrap();
        if !r[pid].is_empty() {
            by_outcome
                .entry(r[outcome].to_string())
                .or_insert(r[pid].to_string());
        }
    }
    assert!(by_outcome.len() >= 3, "{by_outcome:?}");
    let cfg = v.config.display().to_string();
    for (want, payment) in &by_outcome {
        for run in [Some(NIGHT), None] {
            let mut args = vec!["explain", "--config", &cfg, payment.as_str()];
            if let Some(r) = run {
                args.extend(["--run", r]);
            }
            let text = ok(recon(&args, &v), &args.join(" "));
            assert!(
                text.starts_with(&format!("night {NIGHT} (3 shards, gathered;")),
                "{}: {text}",
                args.join(" ")
            );
            assert!(text.contains(&format!("outcome: {want} ")), "{text}");
            assert!(!text.contains("was not read by the run"), "{text}");
        }
    }
    let out = recon(&["explain", "--config", &cfg, "x", "--run", "nope"], &v);
    let text = refused(&out, recon::exit::INPUT, "an unknown run");
    assert!(text.contains("no run or run group \"nope\""), "{text}");
}

/// The shard with `--gather`, as the Indexed Job runs it.
fn run_shard_gathering(
    v: &Variant,
    date: &str,
    as_of: &str,
    shard: &str,
    env: &[(&str, &str)],
) -> Output {
    let cfg = v.config.display().to_string();
    Command::new(env!("CARGO_BIN_EXE_recon"))
        .args([
            "run",
            "--config",
            &cfg,
            "--date",
            date,
            "--as-of",
            as_of,
            "--shard",
            shard,
            "--group",
            NIGHT,
            "--gather",
            "--index-retries",
            "2",
        ])
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("RECON_INDEX_FAILURE_COUNT")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The engine sequences the night: each shard runs with `--gather`; those that land while
/// others are missing say so and write nothing of the night; the last to land gathers it (the
/// night's folder, its email, the group marked gathered); a retried index afterwards finds it
/// gathered. Run again with all shards at once: exactly one gathers, every shard exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_shard_to_land_gathers_the_night() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 240, 445);
    let v = variant(&n, "lastgathers").await;
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    for (i, still) in [(2, 2), (0, 1)] {
        let text = ok(
            run_shard_gathering(&v, &date, &as_of, &format!("{i}/3"), &[]),
            &format!("shard {i}/3"),
        );
        assert!(
            text.contains(&format!(
                "shard {i}/3: not gathering the night {NIGHT}: {still} shard(s) still to land"
            )),
            "{text}"
        );
        assert!(!v.out.join(NIGHT).exists());
    }
    let text = ok(
        run_shard_gathering(&v, &date, &as_of, "1/3", &[]),
        "the last shard",
    );
    assert!(
        text.contains("shard 2:"),
        "the gathered night's shards: {text}"
    );
    let night_dir = v.out.join(NIGHT);
    for file in ["results.csv", "report.xlsx", "report.html", "summary.json"] {
        assert!(night_dir.join(file).exists(), "{file}");
    }
    assert!(group_column(&v, "gathered_at").await.is_some());
    let text = ok(
        run_shard_gathering(&v, &date, &as_of, "0/3", &[]),
        "a retried index",
    );
    assert!(text.contains("already landed"), "{text}");
    assert!(text.contains("already gathered"), "{text}");

    // All at once, on a second night (another group): one of them gathers.
    let texts = crate::shards::indexed_shards(&n, &v, 3, &["--group", "at-once", "--gather"]);
    let gatherers = texts.iter().filter(|t| t.contains("  shard 2:")).count();
    assert_eq!(gatherers, 1, "{texts:#?}");
    assert!(v.out.join("at-once").join("report.xlsx").exists());
}

/// A shard that fails for good fails the night visibly at once: on its index's last attempt
/// (`RECON_INDEX_FAILURE_COUNT` = `--index-retries`), or on a config error (exit 3, which the
/// Job does not retry), it records why in the run group and sends the night's "NOT gathered"
/// alert. An attempt that Kubernetes will retry does neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_fails_for_good_alerts_the_night_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 120, 446);
    let v = variant(&n, "forgood").await;
    // The night's email, as files in the output folder.
    let job = std::fs::read_to_string(&v.config).unwrap();
    std::fs::write(&v.config, format!("{job}\n{}", crate::report::file_email())).unwrap();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    ok(
        run_shard_gathering(&v, &date, &as_of, "0/2", &[]),
        "shard 0/2",
    );
    let alert = v.out.join(format!("{NIGHT}-shard-1-failed.eml"));
    let gather_error = || group_column(&v, "gather_error");
    // Shard 1 is busy elsewhere (paused holding its lock): each attempt exits 6.
    let marker = dir.path().join("paused");
    let cfg = v.config.display().to_string();
    let busy = paused_at(
        &v,
        &[
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", "1/2",
            "--group", NIGHT,
        ],
        "after_plan",
        &marker,
    );
    for failures in ["0", "1"] {
        let out = run_shard_gathering(
            &v,
            &date,
            &as_of,
            "1/2",
            &[("RECON_INDEX_FAILURE_COUNT", failures)],
        );
        refused(&out, recon::exit::LOCKED, "an attempt to be retried");
        assert!(!alert.exists(), "no alert while retries remain");
        assert_eq!(gather_error().await, None);
    }
    let out = run_shard_gathering(
        &v,
        &date,
        &as_of,
        "1/2",
        &[("RECON_INDEX_FAILURE_COUNT", "2")],
    );
    let text = refused(&out, recon::exit::LOCKED, "the last attempt");
    assert!(text.contains("shard 1/2 failed for good"), "{text}");
    let mail = std::fs::read_to_string(&alert)
        .unwrap_or_else(|e| panic!("{}: {e}: {text}", alert.display()));
    let unfolded = mail.replace("\r\n ", " ").replace("\n ", " ");
    assert!(
        unfolded.contains(&format!(
            "CRITICAL night {NIGHT} NOT gathered: shard 1/2 failed for good"
        )),
        "{mail}"
    );
    let recorded = gather_error().await.expect("recorded in the group");
    assert!(
        recorded.contains("shard 1/2 failed for good (recon exit 6"),
        "{recorded}"
    );
    std::fs::remove_file(&marker).unwrap();
    ok(busy.wait_with_output().unwrap(), "shard 1 after its pause");
    std::fs::remove_file(&alert).unwrap();

    // Exit 3 (another build) is the last attempt at once.
    let out = run_shard_gathering(&v, &date, &as_of, "1/2", &[("RECON_FAULT_BUILD", "9.9.9")]);
    let text = refused(&out, recon::exit::CONFIG, "another build");
    assert!(text.contains("failed for good"), "{text}");
    assert!(alert.exists());
    // The index re-run by hand lands (it had landed) and gathers the night; the group forgets
    // the failure.
    let text = ok(run_shard_gathering(&v, &date, &as_of, "1/2", &[]), "re-run");
    assert!(text.contains("  shard 1:"), "{text}");
    assert_eq!(gather_error().await, None);
}

/// `recon plan-shards` counts the payments each shard of a night would load, partition by
/// partition, as the job's assignment splits them (here on SQLite: a plan needs no cluster),
/// and warns for every shard above the pods' memory limit, naming `[partition.assign]`.
#[test]
fn plan_shards_counts_each_shards_payments_and_warns_above_the_pod_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (n, v) = sqlite_night(dir.path(), 400, 447, 5);
    let cfg = v.config.display().to_string();
    let date = n.report.date.to_string();
    // What the ledger holds per merchant, and where the job's partitioning puts each.
    let job = recon::config::Config::load(&v.config).unwrap();
    let partition = job.partition.as_ref().unwrap();
    let mut rd = csv::Reader::from_path(n.dir.join("payments.csv")).unwrap();
    let m = rd
        .headers()
        .unwrap()
        .iter()
        .position(|c| c == "merchant_id")
        .unwrap();
    let mut by_merchant: std::collections::BTreeMap<String, usize> = Default::default();
    for r in rd.records() {
        *by_merchant.entry(r.unwrap()[m].to_string()).or_default() += 1;
    }
    assert_eq!(by_merchant.len(), 5, "{by_merchant:?}");
    let mut per_shard = [0usize; 3];
    for (merchant, count) in &by_merchant {
        per_shard[partition.shard_of(merchant, 3) as usize] += count;
    }
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan-shards", "--config", &cfg, "--date", &date];
        args.extend_from_slice(extra);
        recon(&args, &v)
    };
    let text = ok(plan(&["--shards", "3"]), "plan-shards");
    let total: usize = by_merchant.values().sum();
    assert!(
        text.starts_with(&format!(
            "night {date}: {total} payments loaded by 3 shard(s)"
        )),
        "{text}"
    );
    for (i, want) in per_shard.iter().enumerate() {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{i}/3 ")))
            .unwrap_or_else(|| panic!("no line for shard {i}/3: {text}"));
        let got: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(got, *want, "{line}");
        for (merchant, count) in &by_merchant {
            if partition.shard_of(merchant, 3) as usize == i {
                assert!(line.contains(&format!("{merchant} ({count})")), "{line}");
            }
        }
    }
    assert!(!text.contains("warning"), "{text}");
    // A limit no shard fits: one warning per shard, with the fix.
    let out = plan(&["--shards", "3", "--memory-limit", "50Mi"]);
    let text = ok(out, "plan-shards under a small limit");
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 3, "{text}");
    assert!(
        warnings.iter().all(|w| w.contains("[partition.assign]")),
        "{text}"
    );
    let out = plan(&["--memory-limit", "6 GB"]);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG));
}

/// Point 6: a pod with a read-only root filesystem has no writable temp folder unless one is
/// mounted. The night's workbook is assembled beside its own output (in the run's `.tmp`
/// folder), so a night whose temp folder cannot be written still writes its report.
#[test]
fn a_night_writes_its_report_without_a_writable_temp_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (n, v) = sqlite_night(dir.path(), 200, 448, 3);
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    let out = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args([
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--run-id", "notmp",
        ])
        .env("RECON_DATABASE_URL", &v.url)
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .output()
        .unwrap();
    ok(out, "a night without a temp folder");
    // The sheets' temporary files were anonymous: nothing of them is left in the folder.
    let left: Vec<String> = std::fs::read_dir(v.out.join("notmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.contains("tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let report = v.out.join("notmp").join("report.xlsx");
    let mut wb: calamine::Xlsx<_> = calamine::open_workbook(&report).unwrap();
    use calamine::Reader as _;
    assert!(wb.sheet_names().iter().any(|s| s == "Cases"));
    let cases = wb.worksheet_range("Cases").unwrap();
    assert!(cases.height() > 1, "the Cases sheet has its rows");
}

/// A shard killed mid-run leaves its run RUNNING until a retry recovers it: the gather says it
/// was killed (nobody holds its shard lock), not "still running"; a shard that does hold its
/// lock is still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gather_tells_a_killed_shard_from_a_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 120, 449);
    let v = variant(&n, "killed").await;
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    let cfg = v.config.display().to_string();
    let paused = |shard: &str, marker: &Path| {
        let args = [
            "run", "--config", &cfg, "--date", &date, "--as-of", &as_of, "--shard", shard,
            "--group", NIGHT,
        ];
        paused_at(&v, &args, "after_plan", marker)
    };
    let (m0, m1) = (dir.path().join("p0"), dir.path().join("p1"));
    let mut killed = paused("0/2", &m0);
    let mut running = paused("1/2", &m1);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let out = gather_with(&v, &v.config, &date, &[]);
    let text = refused(&out, recon::exit::SHARDS_MISSING, "two shards missing");
    assert!(
        text.contains("shard 0/2: killed (its run is RUNNING"),
        "{text}"
    );
    assert!(text.contains("shard 1/2: still running (run"), "{text}");
    std::fs::remove_file(&m1).unwrap();
    running.wait().unwrap();
}
