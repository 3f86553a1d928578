//! Issue 41 point 6: the gather trusts nothing it did not write. Each shard seals what it
//! hands over (the sha256 and size of every file of its folder) in the transaction that
//! commits it; the gather checks every byte it reads against that seal and gathers nothing
//! that differs (exit 14, naming the shard, its run and the file), records why in the run
//! group and alerts. The night's email is kept in the gathered folder before the commit that
//! marks the night gathered, so a gather killed after its rename sends it exactly once when it
//! is run again.
//!
//! Loopback PostgreSQL (shards need it), a small generated night split into five merchants
//! (`shards::night`).

use crate::report::{SmtpServer, file_email, parse_message, smtp_email};
use crate::shards::{NIGHT, Night, Variant, night, ok, recon, variant};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Appends `text` (an `[email]` section) to the variant's job file.
fn with_email(v: &Variant, text: &str) {
    let mut job = std::fs::read_to_string(&v.config).unwrap();
    job.push('\n');
    job.push_str(text);
    std::fs::write(&v.config, job).unwrap();
}

/// Runs the night's `count` shards one after the other; each must land. Their folders, in
/// shard order.
async fn land_shards(n: &Night, v: &Variant, count: u32) -> Vec<PathBuf> {
    let cfg = v.config.display().to_string();
    let (date, as_of) = (n.report.date.to_string(), n.report.as_of_rfc3339());
    for i in 0..count {
        ok(
            recon(
                &[
                    "run",
                    "--config",
                    &cfg,
                    "--date",
                    &date,
                    "--as-of",
                    &as_of,
                    "--shard",
                    &format!("{i}/{count}"),
                    "--group",
                    NIGHT,
                ],
                v,
            ),
            &format!("shard {i}/{count}"),
        );
    }
    let mut conn = connect(v).await;
    let runs: Vec<(i64, String)> = sqlx::query_as(
        "SELECT s.shard, r.run_id FROM recon_run_shards s JOIN recon_runs r USING (run_id)
         WHERE r.status = 'COMPLETED' ORDER BY s.shard",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(runs.len(), count as usize, "{runs:?}");
    runs.into_iter().map(|(_, r)| v.out.join(r)).collect()
}

async fn connect(v: &Variant) -> sqlx::PgConnection {
    <sqlx::PgConnection as sqlx::Connection>::connect(&v.url)
        .await
        .unwrap()
}

/// `recon gather` of the night (with extra environment): its output.
fn gather_with(n: &Night, v: &Variant, env: &[(&str, String)]) -> std::process::Output {
    let cfg = v.config.display().to_string();
    let date = n.report.date.to_string();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_recon"));
    cmd.args([
        "gather", "--config", &cfg, "--date", &date, "--group", NIGHT,
    ])
    .env("RECON_DATABASE_URL", &v.url)
    .env_remove("JOB_COMPLETION_INDEX");
    for (k, val) in env {
        cmd.env(k, val);
    }
    cmd.output().unwrap()
}

/// The group's (gathered_at, gather_error).
async fn group_state(v: &Variant) -> (Option<String>, Option<String>) {
    let mut conn = connect(v).await;
    sqlx::query_as("SELECT gathered_at, gather_error FROM recon_run_groups WHERE group_id = $1")
        .bind(NIGHT)
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

/// The first data line of `text` whose outcome (first field) is one of `outcomes`, with the
/// byte range of its `column`-th field (unquoted: the first seven fields of results.csv are
/// plain tokens).
fn field_of_row(text: &str, outcomes: &[&str], column: usize) -> Option<(usize, usize)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let Some(outcome) = line.split(',').next() else {
            continue;
        };
        if !outcomes.contains(&outcome) {
            continue;
        }
        let mut from = start;
        for (i, f) in line.split(',').enumerate() {
            if i == column {
                return (!f.is_empty()).then_some((from, from + f.len()));
            }
            from += f.len() + 1;
        }
    }
    None
}

/// `bytes` with the first ASCII digit in `range` changed to another digit (same size).
fn other_digit(bytes: &mut [u8], range: (usize, usize)) -> String {
    let i = (range.0..range.1)
        .find(|&i| bytes[i].is_ascii_digit())
        .expect("a digit to change");
    let before = String::from_utf8_lossy(&bytes[range.0..range.1]).into_owned();
    bytes[i] = if bytes[i] == b'9' { b'1' } else { bytes[i] + 1 };
    format!(
        "{before} -> {}",
        String::from_utf8_lossy(&bytes[range.0..range.1])
    )
}

/// The ticket outcomes of results.csv: what finance must see.
const TICKETS: [&str; 7] = [
    "FAILED_BUT_PAID",
    "AMOUNT_MISMATCH",
    "MISSING_AT_PROVIDER",
    "ORPHAN_AT_PROVIDER",
    "DUPLICATE_AT_PROVIDER",
    "AMBIGUOUS",
    "CURRENCY_MISMATCH",
];

type Tamper = Box<dyn Fn(&Path) -> String>;

/// The ways a shard's hand-over is changed after the shard committed: (what, file, how).
fn tampers() -> Vec<(&'static str, &'static str, Tamper)> {
    vec![
        (
            "the rows finance must see removed from results.csv",
            "results.csv",
            Box::new(|dir: &Path| {
                let path = dir.join("results.csv");
                let text = std::fs::read_to_string(&path).unwrap();
                let kept: String = text
                    .split_inclusive('\n')
                    .filter(|l| !TICKETS.contains(&l.split(',').next().unwrap_or("")))
                    .collect();
                let removed = text.lines().count() - kept.lines().count();
                assert!(removed > 0, "the shard has ticket rows to remove");
                std::fs::write(&path, kept).unwrap();
                format!("{removed} rows removed")
            }),
        ),
        (
            "one amount of a ticket row in results.csv, same size",
            "results.csv",
            Box::new(|dir: &Path| {
                let path = dir.join("results.csv");
                let mut bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8(bytes.clone()).unwrap();
                // `amount` is the seventh column.
                let range = field_of_row(&text, &TICKETS, 6)
                    .or_else(|| field_of_row(&text, &["MATCHED", "RESOLVED_SUCCEEDED"], 6))
                    .expect("a row with an amount");
                let what = other_digit(&mut bytes, range);
                std::fs::write(&path, bytes).unwrap();
                what
            }),
        ),
        (
            "an amount of shard.json's report rows set to 1",
            "shard.json",
            Box::new(|dir: &Path| {
                let path = dir.join("shard.json");
                let text = std::fs::read_to_string(&path).unwrap();
                let at = text.find("\"amount\":[").expect("an amount") + "\"amount\":[".len();
                let end = at + text[at..].find(',').unwrap();
                let edited = format!("{}1{}", &text[..at], &text[end..]);
                std::fs::write(&path, edited).unwrap();
                format!("{} -> 1", &text[at..end])
            }),
        ),
        (
            "one digit of shard.json, same size",
            "shard.json",
            Box::new(|dir: &Path| {
                let path = dir.join("shard.json");
                let mut bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8(bytes.clone()).unwrap();
                let at = text.find("\"amount\":[").expect("an amount") + "\"amount\":[".len();
                let end = at + text[at..].find(',').unwrap();
                let what = other_digit(&mut bytes, (at, end));
                std::fs::write(&path, bytes).unwrap();
                what
            }),
        ),
        (
            "a column of results.csv renamed in its header, same size",
            "results.csv",
            Box::new(|dir: &Path| {
                let path = dir.join("results.csv");
                let text = std::fs::read_to_string(&path).unwrap();
                let edited = text.replacen("source_lines", "source_linez", 1);
                assert_ne!(edited, text);
                std::fs::write(&path, edited).unwrap();
                "source_lines -> source_linez".to_string()
            }),
        ),
        (
            "diff.csv removed",
            "diff.csv",
            Box::new(|dir: &Path| {
                std::fs::remove_file(dir.join("diff.csv")).unwrap();
                "removed".to_string()
            }),
        ),
        (
            "a count in summary.json, same size",
            "summary.json",
            Box::new(|dir: &Path| {
                let path = dir.join("summary.json");
                let mut bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8(bytes.clone()).unwrap();
                let at = text.find("\"payments_in_scope\": ").expect("the count")
                    + "\"payments_in_scope\": ".len();
                let end = at + text[at..].find([',', '\n']).unwrap();
                let what = other_digit(&mut bytes, (at, end));
                std::fs::write(&path, bytes).unwrap();
                what
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_changed_after_its_shard_committed_is_refused_naming_the_shard_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 300, 41);
    let v = variant(&n, "trust").await;
    with_email(&v, &file_email());
    let folders = land_shards(&n, &v, 3).await;
    // Shard 1 is the one changed; its run id names it.
    let victim = &folders[1];
    let run_id = victim.file_name().unwrap().to_string_lossy().into_owned();
    // Its seal: every file of its folder, each of the size it has.
    let mut conn = connect(&v).await;
    let sealed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT file, bytes FROM recon_shard_handover WHERE run_id = $1 ORDER BY file",
    )
    .bind(&run_id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut on_disk: Vec<(String, i64)> = std::fs::read_dir(victim)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len() as i64,
            )
        })
        .collect();
    on_disk.sort();
    assert_eq!(sealed, on_disk);
    let names: Vec<&str> = sealed.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "diff.csv",
            "rejected.csv",
            "results.csv",
            "settlement.csv",
            "shard.json",
            "summary.json"
        ]
    );
    let failed_alert = v.out.join(format!("{NIGHT}-gather-failed.eml"));
    let mut failures = Vec::new();
    let cells = tampers();
    for (what, file, tamper) in &cells {
        let path = victim.join(file);
        let kept = std::fs::read(&path).unwrap();
        let how = tamper(victim);
        let out = gather_with(&n, &v, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let (gathered_at, error) = group_state(&v).await;
        let mut wrong = Vec::new();
        if out.status.code() != Some(recon::exit::HANDOVER_CHANGED) {
            wrong.push(format!("exit {:?}, not 14", out.status.code()));
        }
        for needle in [
            "shard 1/3".to_string(),
            format!("run {run_id}"),
            file.to_string(),
            "nothing was gathered".to_string(),
        ] {
            if !stderr.contains(&needle) {
                wrong.push(format!("the message does not say {needle:?}"));
            }
        }
        if !stderr.contains("changed since the shard committed")
            && !stderr.contains("removed since the shard committed")
        {
            wrong.push("the message does not say it changed since the shard committed".into());
        }
        if v.out.join(NIGHT).exists() {
            wrong.push("the night's folder was written".into());
        }
        if gathered_at.is_some() {
            wrong.push("the night is marked gathered".into());
        }
        // Point 1: the group records why, and the alert says so.
        if !error
            .as_deref()
            .is_some_and(|e| e.contains("shard 1/3") && e.contains(file))
        {
            wrong.push(format!("the group's gather_error is {error:?}"));
        }
        match std::fs::read_to_string(&failed_alert) {
            Ok(raw) => {
                let (headers, parts) = parse_message(&raw);
                let subject = headers.get("subject").cloned().unwrap_or_default();
                let body = parts.first().map(|p| p.text()).unwrap_or_default();
                if !subject.contains("NOT gathered") || !body.contains(file) {
                    wrong.push(format!("the failure alert says {subject:?}: {body}"));
                }
            }
            Err(e) => wrong.push(format!("no failure alert ({e})")),
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{what} ({how}):\n    {}\n    {stderr}",
                wrong.join("\n    ")
            ));
        }
        // Back as the shard wrote it, and (for a gather that took the change) not gathered.
        std::fs::write(&path, kept).unwrap();
        let _ = std::fs::remove_file(&failed_alert);
        if v.out.join(NIGHT).exists() {
            std::fs::remove_dir_all(v.out.join(NIGHT)).unwrap();
        }
        sqlx::query("UPDATE recon_run_groups SET gathered_at = NULL WHERE group_id = $1")
            .bind(NIGHT)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    assert!(
        failures.is_empty(),
        "{} of {} changed hand-overs were not refused:\n{}",
        failures.len(),
        cells.len(),
        failures.join("\n")
    );
    // A shard whose run sealed nothing (a recon from before the seal) is not trusted either.
    let seal: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT file, sha256, bytes FROM recon_shard_handover WHERE run_id = $1 ORDER BY file",
    )
    .bind(&run_id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    sqlx::query("DELETE FROM recon_shard_handover WHERE run_id = $1")
        .bind(&run_id)
        .execute(&mut conn)
        .await
        .unwrap();
    let out = gather_with(&n, &v, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(recon::exit::HANDOVER_CHANGED),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "shard 1/3 (run {run_id}): has no sealed hand-over"
        )),
        "{stderr}"
    );
    assert!(!v.out.join(NIGHT).exists());
    for (file, sha256, bytes) in &seal {
        sqlx::query(
            "INSERT INTO recon_shard_handover (run_id, file, sha256, bytes) VALUES ($1, $2, $3, $4)",
        )
        .bind(&run_id)
        .bind(file)
        .bind(sha256)
        .bind(bytes)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // Untouched, the night is gathered as before, and the group forgets the failures.
    let text = ok(
        gather_with(&n, &v, &[]),
        "the gather of the untouched shards",
    );
    assert!(text.contains("shard 2:"), "{text}");
    let (gathered_at, error) = group_state(&v).await;
    assert!(gathered_at.is_some() && error.is_none(), "{error:?}");
    let rows = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count() - 1;
    assert_eq!(
        rows(&v.out.join(NIGHT).join("results.csv")),
        folders
            .iter()
            .map(|f| rows(&f.join("results.csv")))
            .sum::<usize>()
    );
    assert!(v.out.join(NIGHT).join("email.eml").exists());
}

/// Writes `name` of `dir` again with `edit` applied to its header and records (a shard of
/// another recon version would have written it so) and seals it again in the database, as
/// the shard would have.
async fn rewrite_sealed(
    v: &Variant,
    dir: &Path,
    name: &str,
    edit: &dyn Fn(&csv::StringRecord) -> csv::StringRecord,
) {
    let path = dir.join(name);
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(&path)
        .unwrap();
    let records: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_path(&path)
        .unwrap();
    for r in &records {
        w.write_record(&edit(r)).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let sealed = recon::run::handover::seal(dir).unwrap();
    let file = sealed.iter().find(|f| f.file == name).unwrap();
    let mut conn = connect(v).await;
    let done = sqlx::query(
        "UPDATE recon_shard_handover SET sha256 = $3, bytes = $4 WHERE run_id = $1 AND file = $2",
    )
    .bind(&run_id)
    .bind(name)
    .bind(&file.sha256)
    .bind(file.bytes as i64)
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// Issue 43: the gather reads the shards' CSV files by their header names, not by column
/// number. A shard whose results.csv and diff.csv have their columns in another order (as a
/// shard of another version could write them, sealed so) is merged into the same night, byte
/// for byte; a shard whose header lacks a column the merge orders the rows by is refused,
/// naming its file and the column, and nothing is gathered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gather_reads_the_shards_files_by_their_header_names() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 200, 43);
    let v = variant(&n, "names").await;
    let folders = land_shards(&n, &v, 3).await;
    let night_dir = v.out.join(NIGHT);
    let files = ["results.csv", "diff.csv", "settlement.csv"];
    let read_all = || -> Vec<String> {
        files
            .iter()
            .map(|f| std::fs::read_to_string(night_dir.join(f)).unwrap())
            .collect()
    };
    ok(
        gather_with(&n, &v, &[]),
        "the gather of the shards as written",
    );
    let want = read_all();
    assert!(
        want[0].lines().count() > 100,
        "a night with rows: {}",
        want[0].lines().count()
    );
    let mut conn = connect(&v).await;
    let again = async |conn: &mut sqlx::PgConnection| {
        std::fs::remove_dir_all(&night_dir).unwrap();
        sqlx::query("UPDATE recon_run_groups SET gathered_at = NULL WHERE group_id = $1")
            .bind(NIGHT)
            .execute(conn)
            .await
            .unwrap();
    };
    again(&mut conn).await;
    // Shard 1 wrote its columns in the reverse order.
    for f in files {
        rewrite_sealed(&v, &folders[1], f, &|r| r.iter().rev().collect()).await;
    }
    assert!(
        std::fs::read_to_string(folders[1].join("results.csv"))
            .unwrap()
            .starts_with("detail,source_lines,")
    );
    ok(
        gather_with(&n, &v, &[]),
        "the gather of a shard in another column order",
    );
    assert!(
        read_all() == want,
        "the night differs when one shard orders its columns otherwise"
    );
    again(&mut conn).await;
    // Shard 2 names the column of its rows' lines otherwise: refused.
    rewrite_sealed(&v, &folders[2], "results.csv", &|r| {
        r.iter()
            .map(|f| if f == "source_lines" { "lines" } else { f })
            .collect()
    })
    .await;
    let out = gather_with(&n, &v, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(recon::exit::OUTPUT), "{stderr}");
    let path = folders[2].join("results.csv").display().to_string();
    assert!(
        stderr.contains(&path) && stderr.contains("no column \"source_lines\""),
        "{stderr}"
    );
    assert!(!night_dir.exists());
    assert!(group_state(&v).await.0.is_none());
}

/// Starts `recon gather` paused at its `after_rename` fault point, waits until it is there and
/// kills it (SIGKILL): the night's folder is in place and the night marked gathered.
fn gather_killed_after_its_rename(n: &Night, v: &Variant, marker: &Path) {
    let cfg = v.config.display().to_string();
    let date = n.report.date.to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args([
            "gather", "--config", &cfg, "--date", &date, "--group", NIGHT,
        ])
        .env("RECON_DATABASE_URL", &v.url)
        .env_remove("JOB_COMPLETION_INDEX")
        .env(
            "RECON_FAULT_PAUSE",
            format!("after_rename:{}", marker.display()),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !marker.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the gather never reached its rename"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the gather ended before its rename"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(marker).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_killed_after_its_rename_sends_the_night_s_email_once_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let n = night(dir.path(), 200, 42);
    let server = SmtpServer::start();
    let v = variant(&n, "smtp").await;
    with_email(&v, &smtp_email(server.port, ""));
    land_shards(&n, &v, 2).await;
    gather_killed_after_its_rename(&n, &v, &dir.path().join("paused-smtp"));
    let night_dir = v.out.join(NIGHT);
    assert!(
        night_dir.join("summary.json").exists(),
        "the folder is in place"
    );
    assert!(
        group_state(&v).await.0.is_some(),
        "the night is marked gathered"
    );
    assert_eq!(
        server.messages().len(),
        0,
        "nothing was sent before the kill"
    );
    // Run again: the night is gathered, and its email leaves now.
    let again = ok(gather_with(&n, &v, &[]), "the gather run again");
    assert!(again.contains("already gathered"), "{again}");
    let sent = server.messages();
    assert_eq!(sent.len(), 1, "{again}");
    let (headers, _) = parse_message(&sent[0]);
    assert!(headers.contains_key("subject"), "{headers:?}");
    assert_eq!(crate::report::message_run(&sent[0]), NIGHT);
    assert!(!night_dir.join(recon::report::outbox::PENDING_EML).exists());
    assert!(
        recon::report::outbox::queued(&v.out).unwrap().is_empty(),
        "the outbox is empty"
    );
    // And again: not twice.
    let third = ok(gather_with(&n, &v, &[]), "the gather a third time");
    assert!(third.contains("already gathered"), "{third}");
    assert_eq!(server.messages().len(), 1, "{third}");

    // With the file transport the email is in the folder that the rename put in place.
    let f = variant(&n, "file").await;
    with_email(&f, &file_email());
    land_shards(&n, &f, 2).await;
    gather_killed_after_its_rename(&n, &f, &dir.path().join("paused-file"));
    let eml = f.out.join(NIGHT).join("email.eml");
    assert!(eml.exists(), "the night's email is in its folder");
    assert_eq!(
        crate::report::message_run(&std::fs::read_to_string(&eml).unwrap()),
        NIGHT
    );
    let again = ok(gather_with(&n, &f, &[]), "the file gather run again");
    assert!(again.contains("already gathered"), "{again}");
}
