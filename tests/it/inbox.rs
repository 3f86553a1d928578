//! The decisions inbox as the shipped pod runs it, and the decision surfaces around it
//! (issue 41 points 1, 3, 4, 5 and 7). The tests run as root; recon runs as another uid
//! (`setpriv`, uid [`RECON_UID`], no reviewer) against a job folder it owns, with the reviewers'
//! folders owned by the reviewers, as on a file share:
//! - a reviewer's own `755` folder is applied while recon runs as another uid, and recon writes
//!   nothing into it: the result file goes to `<output_dir>/decisions/<reviewer>/`, the same
//!   bytes are not applied again on the next night (and are no error);
//! - one cause a test, each leaving the night completed with its run record, the cause named
//!   with why in summary.json `inbox` and in the email: an unreadable file, a symbolic link,
//!   a FIFO, a folder recon cannot list, an inbox root others can write to, a file replaced
//!   while it was applied (the fault point `decisions_before_record`);
//! - a run that starts while `recon decisions apply` holds the run lock waits for it (at most
//!   `apply_wait`), on both databases;
//! - control characters from `_xHHHH_` escapes are refused with why; names, notes and a
//!   provider's id show by the visible-text rule in `recon cases show|list` and the apply
//!   summary;
//! - `decision_files` keeps counts and the first refused rows, not every row, and the same
//!   file applied again still answers `unchanged` for each row.

use crate::support::{
    ATTEMPTS_HEADER, Backend, PAYMENTS_HEADER, Settings, TestEnv, psp_source, read_columns,
    write_decide_file,
};
use recon::decisions::result::Status;
use recon::store::cases::StoredCase;
use std::io::BufRead as _;
use std::os::unix::fs::{PermissionsExt as _, chown, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const IBAN: &str = "DE89370400440532013000";
/// The uid recon runs as: the image's `runAsUser`, no reviewer of the job.
const RECON_UID: u32 = 10001;
/// Reviewer bob's uid ([`crate::decisions::REVIEWERS`]).
const BOB: u32 = 4242;
/// Reviewer carol's uid.
const CAROL: u32 = 4243;

/// A job in Europe/Berlin with the daily provider source `psp`, the reviewers alice (root),
/// bob and carol, the decisions inbox `decisions/` and the email written to the run folder.
fn job() -> TestEnv {
    let env = TestEnv::new();
    env.write(
        "recon.toml",
        &format!(
            "timezone = \"Europe/Berlin\"\ndatabase_url = \"sqlite://recon.db\"\noutput_dir = \"out\"\n\
             decisions_inbox = \"decisions\"\n\n{}\n{}\n{}",
            psp_source("psp-{date}.csv", ""),
            crate::decisions::REVIEWERS,
            crate::report::file_email()
        ),
    );
    env
}

/// Night 5 (run `n05`, as root): UNKNOWN P-1 (25.00 EUR) has a look-alike line `line_id`
/// (24.50, same recipient): one near-miss case, returned. The provider's files of November
/// 4–12 are delivered.
async fn a_case(env: &TestEnv, line_id: &str) -> StoredCase {
    let started = "2026-11-05T09:00:00Z";
    env.write(
        "payments.csv",
        &format!("{PAYMENTS_HEADER}\nP-1,{IBAN},25.00,EUR,UNKNOWN,{started},{started},A-1,\n"),
    );
    env.write(
        "attempts.csv",
        &format!("{ATTEMPTS_HEADER}\nA-1,P-1,{started},,UNKNOWN,,timeout\n"),
    );
    env.import_files().await;
    for d in 4..=12 {
        let rows = if d == 5 {
            format!("{line_id},,{IBAN},24.50,EUR,2026-11-05T09:20:00Z,PAYMENT\n")
        } else {
            String::new()
        };
        env.deliver(&format!("psp-2026-11-{d:02}.csv"), &rows);
    }
    env.run("2026-11-05", "2026-11-06T01:00:00Z", false, "n05")
        .await;
    let open = cases(env).await;
    assert_eq!(open.len(), 1, "{open:#?}");
    open.into_iter().next().expect("one case")
}

async fn cases(env: &TestEnv) -> Vec<StoredCase> {
    let db = env.db().await;
    let list = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases");
    db.close().await;
    list
}

/// The case as stored now and the (decision, actor) of its decisions.
async fn case_now(env: &TestEnv, key: &str) -> (String, Vec<(String, String)>) {
    let db = env.db().await;
    let (case, decisions) = recon::decisions::queue::show(&db, key).await.expect("case");
    db.close().await;
    (
        case.status,
        decisions
            .into_iter()
            .map(|d| (d.decision, d.actor))
            .collect(),
    )
}

/// `decisions/<name>` with `mode`, owned by `uid` (the inbox root `decisions/` itself is
/// root's, `755`).
fn folder(env: &TestEnv, name: &str, uid: u32, mode: u32) -> PathBuf {
    let root = env.path("decisions");
    std::fs::create_dir_all(&root).expect("inbox");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let d = root.join(name);
    std::fs::create_dir_all(&d).expect("folder");
    chown(&d, Some(uid), Some(uid)).expect("chown (the tests run as root)");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).expect("chmod");
    d
}

/// A decision file at `path` deciding `decision` on `case`, owned by `uid`, `644`.
fn decide(path: &Path, case: &StoredCase, decision: &str, uid: u32) {
    write_decide_file(
        path,
        &[(case.key.clone(), case.fingerprint.clone(), decision.into())],
        "checked with the provider",
    );
    chown(path, Some(uid), Some(uid)).expect("chown");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// Gives the job folder and everything in it to [`RECON_UID`], but the inbox (its folders keep
/// their owners): recon can write its database, lock, outputs and outbox, and nothing else.
fn give_to_recon(env: &TestEnv) {
    fn walk(p: &Path, inbox: &Path) {
        if p == inbox {
            return;
        }
        std::os::unix::fs::lchown(p, Some(RECON_UID), Some(RECON_UID)).expect("chown");
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
            for e in std::fs::read_dir(p).expect("list") {
                walk(&e.expect("entry").path(), inbox);
            }
        }
    }
    walk(env.dir.path(), &env.path("decisions"));
}

/// The `recon` command as [`RECON_UID`] (`setpriv`), in the job folder.
fn as_recon(env: &TestEnv) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={RECON_UID}"),
        &format!("--regid={RECON_UID}"),
        "--clear-groups",
    ])
    .arg(env!("CARGO_BIN_EXE_recon"))
    .current_dir(env.dir.path());
    c
}

/// `recon run` of November `day` (as of 02:00 Berlin the next morning) as `run_id`.
fn night_args(env: &TestEnv, day: u32, run_id: &str) -> Vec<String> {
    vec![
        "run".into(),
        "--config".into(),
        env.config_path.display().to_string(),
        "--date".into(),
        format!("2026-11-{day:02}"),
        "--as-of".into(),
        format!("2026-11-{:02}T01:00:00Z", day + 1),
        "--run-id".into(),
        run_id.into(),
    ]
}

/// The night of November `day` run by recon as [`RECON_UID`].
fn night_as_recon(env: &TestEnv, day: u32, run_id: &str) -> Output {
    give_to_recon(env);
    as_recon(env)
        .args(night_args(env, day, run_id))
        .output()
        .expect("setpriv runs recon")
}

fn said(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The run record's status, or `none` when the run left no record.
async fn record(env: &TestEnv, run_id: &str) -> String {
    let all = env
        .texts("SELECT run_id || ' ' || status FROM recon_runs ORDER BY run_id")
        .await;
    all.iter()
        .find_map(|r| r.strip_prefix(&format!("{run_id} ")).map(str::to_string))
        .unwrap_or_else(|| "none".into())
}

/// The run's summary.json `inbox` section (`null` when there is none).
fn inbox_section(env: &TestEnv, run_id: &str) -> serde_json::Value {
    let path = env.path(&format!("out/{run_id}/summary.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let summary: serde_json::Value = serde_json::from_str(&text).expect("summary.json");
    summary["inbox"].clone()
}

/// How the email names an inbox entry: its path inside the inbox folder (`bob/fifo.xlsx`),
/// never the server's path to the inbox (issue 42).
fn in_inbox(inbox: &serde_json::Value, path: &Path) -> String {
    let folder = inbox["folder"].as_str().expect("inbox folder");
    path.strip_prefix(folder)
        .unwrap_or_else(|_| panic!("{} is not in {folder}", path.display()))
        .display()
        .to_string()
}

/// The `why` summary.json gives for the skipped `path`, if it names it.
fn why_skipped(inbox: &serde_json::Value, path: &Path) -> Option<String> {
    inbox["skipped"].as_array()?.iter().find_map(|s| {
        (s["path"].as_str() == Some(&path.display().to_string()))
            .then(|| s["why"].as_str().unwrap_or_default().to_string())
    })
}

/// Night 6 as recon with bob's `b.xlsx` (escalate, owned by bob) and one more entry that
/// `plant` makes in bob's folder (`plant` returns its path): the night completes (exit 0, its
/// record COMPLETED), bob's good file is applied, and the entry is named in summary.json and in
/// the email with a why containing `why`. Returns the case for further checks.
async fn one_cause(
    plant: impl FnOnce(&TestEnv, &Path, &StoredCase) -> PathBuf,
    why: &str,
) -> (TestEnv, StoredCase) {
    let env = job();
    let case = a_case(&env, "T-7").await;
    let bob = folder(&env, "bob", BOB, 0o755);
    decide(&bob.join("b.xlsx"), &case, "escalate", BOB);
    let planted = plant(&env, &bob, &case);
    let out = night_as_recon(&env, 6, "n06");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(record(&env, "n06").await, "COMPLETED", "{}", said(&out));
    let inbox = inbox_section(&env, "n06");
    let got = why_skipped(&inbox, &planted).unwrap_or_else(|| {
        panic!(
            "{} is not named in summary.json: {inbox:#}",
            planted.display()
        )
    });
    assert!(got.contains(why), "{got}");
    let email = crate::report::email_body(&env.path("out/n06"), "text/plain");
    let named = in_inbox(&inbox, &planted);
    assert!(
        email.contains(&format!("  - {named}: ")) && email.contains(why),
        "the email does not name {named}: {email}"
    );
    // bob's own file was applied all the same.
    let (status, decisions) = case_now(&env, &case.key).await;
    assert_eq!(status, "ESCALATED", "{}", said(&out));
    assert_eq!(decisions, [("escalate".to_string(), "bob".to_string())]);
    (env, case)
}

/// Point 3 and point 1 (an inbox folder recon cannot write to): bob's own `755` folder, recon
/// as another uid. Before: applied, then `creating decisions/bob/done: Permission denied`,
/// exit 1, no run record. Now the night completes; bob's file stays as he left it; its result
/// is in recon's own folder; the next night does not apply it again, without an error.
#[tokio::test]
async fn a_reviewers_own_folder_applies_while_recon_runs_as_another_uid_and_stays_untouched() {
    let env = job();
    let case = a_case(&env, "T-7").await;
    let bob = folder(&env, "bob", BOB, 0o755);
    let file = bob.join("b.xlsx");
    decide(&file, &case, "escalate", BOB);
    let bytes = std::fs::read(&file).expect("read");
    let out = night_as_recon(&env, 6, "n06");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(record(&env, "n06").await, "COMPLETED");
    assert_eq!(
        case_now(&env, &case.key).await,
        (
            "ESCALATED".to_string(),
            vec![("escalate".to_string(), "bob".to_string())]
        )
    );
    // recon wrote nothing into bob's folder.
    let listed: Vec<String> = std::fs::read_dir(&bob)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["b.xlsx"]);
    assert_eq!(std::fs::read(&file).expect("read"), bytes);
    // What was applied, by whom, and where its result is.
    let inbox = inbox_section(&env, "n06");
    let applied = inbox["applied"].as_array().expect("applied");
    assert_eq!(applied.len(), 1, "{inbox:#}");
    assert_eq!(applied[0]["path"], file.display().to_string());
    assert_eq!(applied[0]["reviewer"], "bob");
    assert_eq!(applied[0]["rows"]["applied"], 1);
    let result = PathBuf::from(applied[0]["result_file"].as_str().expect("result file"));
    assert!(
        result.starts_with(env.path("out/decisions/bob")),
        "{}",
        result.display()
    );
    assert_eq!(
        read_columns(&result, &["case", "result", "actor"]),
        [vec![case.key.clone(), "applied".into(), "bob".into()]]
    );
    assert_eq!(
        env.texts("SELECT actor || ' ' || path FROM decision_files")
            .await,
        [format!("bob {}", file.display())]
    );
    // Night 7: the same bytes by the same reviewer are not applied again, and no error.
    let out = night_as_recon(&env, 7, "n07");
    assert!(out.status.success(), "{}", said(&out));
    let inbox = inbox_section(&env, "n07");
    assert_eq!(inbox["applied"], serde_json::json!([]), "{inbox:#}");
    assert_eq!(inbox["skipped"], serde_json::json!([]), "{inbox:#}");
    assert_eq!(
        inbox["applied_before"],
        serde_json::json!([file.display().to_string()])
    );
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM case_decisions")
            .await,
        ["1"]
    );
}

/// Point 1, an unreadable file (mode 000 in bob's folder). Before: exit 4, no run record.
#[tokio::test]
async fn an_unreadable_decision_file_is_skipped_with_why_and_the_night_completes() {
    one_cause(
        |_, bob, case| {
            let f = bob.join("secret.xlsx");
            decide(&f, case, "dismiss: written off", BOB);
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).expect("chmod");
            f
        },
        "Permission denied",
    )
    .await;
}

/// Point 3, a symbolic link in bob's folder to a decision file elsewhere (readable, so
/// following it would apply it): never followed. Before: skipped, named only in the log.
#[tokio::test]
async fn a_symbolic_link_in_a_reviewers_folder_is_never_followed_and_is_named() {
    let (env, _) = one_cause(
        |env, bob, case| {
            let target = env.path("elsewhere.xlsx");
            decide(&target, case, "dismiss: written off", 0);
            let link = bob.join("linked.xlsx");
            symlink(&target, &link).expect("symlink");
            link
        },
        "symbolic link",
    )
    .await;
    assert_eq!(
        env.texts("SELECT decision FROM case_decisions").await,
        ["escalate"]
    );
}

/// Point 3, a FIFO named like a decision file: never opened (opening it would wait for a
/// writer forever). Before: skipped, named only in the log.
#[tokio::test]
async fn a_fifo_in_a_reviewers_folder_is_never_opened_and_is_named() {
    one_cause(
        |_, bob, _| {
            let fifo = bob.join("pipe.xlsx");
            let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
            assert!(made.success());
            chown(&fifo, Some(BOB), Some(BOB)).expect("chown");
            fifo
        },
        "not a regular file",
    )
    .await;
}

/// Point 1, a reviewer's folder recon cannot list (carol's, `700`). Before: `reading
/// decisions/carol: Permission denied`, exit 1, no run record.
#[tokio::test]
async fn a_reviewers_folder_recon_cannot_list_is_skipped_with_why() {
    one_cause(
        |env, _, case| {
            let carol = folder(env, "carol", CAROL, 0o700);
            decide(&carol.join("c.xlsx"), case, "dismiss: written off", CAROL);
            carol
        },
        "cannot be listed: Permission denied",
    )
    .await;
}

/// Point 3: an inbox root others can write to (anyone could make a folder named after a
/// reviewer): nothing in it is applied, and the run says so. Before: bob's file was applied.
#[tokio::test]
async fn an_inbox_root_others_can_write_to_applies_nothing_and_says_so() {
    let env = job();
    let case = a_case(&env, "T-7").await;
    let bob = folder(&env, "bob", BOB, 0o755);
    decide(&bob.join("b.xlsx"), &case, "escalate", BOB);
    std::fs::set_permissions(
        env.path("decisions"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .expect("chmod");
    let out = night_as_recon(&env, 6, "n06");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(record(&env, "n06").await, "COMPLETED");
    assert_eq!(
        case_now(&env, &case.key).await,
        ("OPEN".to_string(), vec![])
    );
    let inbox = inbox_section(&env, "n06");
    let why = why_skipped(&inbox, &env.path("decisions")).unwrap_or_default();
    assert!(why.contains("writable by others"), "{inbox:#}");
    let email = crate::report::email_body(&env.path("out/n06"), "text/plain");
    assert!(email.contains("writable by others"), "{email}");
}

/// Point 3, a file replaced while it is applied: recon pauses at the fault point
/// `decisions_before_record` (its rows applied in the open transaction, not yet recorded), bob
/// replaces `b.xlsx` with another decision; the replaced file is not recorded as applied (the
/// transaction rolls back), the run names it, and the next night applies the file there then.
/// Before: no such check (the new version was moved to `done/` unapplied).
#[tokio::test]
async fn a_file_replaced_while_it_is_applied_is_not_recorded_and_the_next_night_applies_it() {
    let env = job();
    let case = a_case(&env, "T-7").await;
    let bob = folder(&env, "bob", BOB, 0o755);
    let file = bob.join("b.xlsx");
    decide(&file, &case, "escalate", BOB);
    give_to_recon(&env);
    let marker = env.path("paused");
    let mut child = as_recon(&env)
        .args(night_args(&env, 6, "n06"))
        .env(
            "RECON_FAULT_PAUSE",
            format!("decisions_before_record:{}", marker.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("recon starts");
    while !marker.exists() {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "recon never paused before recording the file ({status}): {}",
                said(&out)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Bob saves another decision over it (a new file renamed into place).
    let new = bob.join("b.xlsx.new");
    decide(&new, &case, "dismiss: written off", BOB);
    std::fs::rename(&new, &file).expect("rename");
    std::fs::remove_file(&marker).expect("let recon go on");
    let out = child.wait_with_output().expect("recon ends");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(record(&env, "n06").await, "COMPLETED");
    let why = why_skipped(&inbox_section(&env, "n06"), &file).unwrap_or_default();
    assert!(
        why.contains("replaced or written while it was applied"),
        "{why:?}"
    );
    assert_eq!(
        case_now(&env, &case.key).await,
        ("OPEN".to_string(), vec![])
    );
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM decision_files")
            .await,
        ["0"]
    );
    let out = night_as_recon(&env, 7, "n07");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        case_now(&env, &case.key).await,
        (
            "DISMISSED".to_string(),
            vec![("dismiss: written off".to_string(), "bob".to_string())]
        )
    );
}

/// A run's stderr lines, read on a thread of their own (so the pipe never fills), sent as
/// they come.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Point 4: while `recon decisions apply` holds the run lock (the library's
/// `decisions::lock::for_apply`, as the command takes it), a nightly run waits for it and
/// completes once it is released; with `apply_wait` shorter than the apply, it gives up with
/// exit 6 naming the apply. A run lock held by another run still fails at once (exit 6).
/// Before: exit 6 at once, in every case.
async fn a_run_waits_for_a_decisions_apply_that_holds_the_lock(b: Backend) {
    let env = TestEnv::on(b, Settings::default()).await;
    let recon_run = |config: &Path, run_id: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_recon"));
        c.args(["run", "--config"])
            .arg(config)
            .args([
                "--date",
                "2026-11-10",
                "--as-of",
                "2026-11-20T00:00:00Z",
                "--run-id",
                run_id,
            ])
            .env("RECON_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let db = env.db().await;
    let apply = recon::decisions::lock::for_apply(&db)
        .await
        .expect("the apply's locks");
    let mut child = recon_run(&env.config_path, "w1")
        .spawn()
        .expect("recon starts");
    let lines = lines_of(&mut child);
    let mut seen = Vec::new();
    loop {
        match lines.recv() {
            Ok(l) => {
                let waits = l.contains("holds the run lock; waiting for it");
                seen.push(l);
                if waits {
                    break;
                }
            }
            Err(_) => panic!(
                "the run never waited for the apply ({:?}): {seen:#?}",
                child.wait()
            ),
        }
    }
    drop(apply);
    let status = child.wait().expect("recon ends");
    let rest: Vec<String> = lines.iter().collect();
    assert!(status.success(), "{status}: {seen:#?} {rest:#?}");
    assert_eq!(record(&env, "w1").await, "COMPLETED");
    // Bounded: an apply that holds the lock longer than `apply_wait`.
    let short = env.path("recon-short.toml");
    let text = std::fs::read_to_string(&env.config_path).expect("config");
    std::fs::write(
        &short,
        text.replacen(
            "output_dir = \"out\"\n",
            "output_dir = \"out\"\napply_wait = \"1s\"\n",
            1,
        ),
    )
    .expect("config");
    let apply = recon::decisions::lock::for_apply(&db)
        .await
        .expect("the apply's locks");
    let out = recon_run(&short, "w2").output().expect("recon runs");
    drop(apply);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::LOCKED),
        "{}",
        said(&out)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("recon decisions apply") && err.contains("apply_wait"),
        "{err}"
    );
    assert_eq!(record(&env, "w2").await, "none");
    // A lock another run holds is not waited for.
    let run = db.lock(false).await.expect("the run lock");
    let out = recon_run(&env.config_path, "w3")
        .output()
        .expect("recon runs");
    drop(run);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::LOCKED),
        "{}",
        said(&out)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another recon run holds the run lock") && !err.contains("waiting for it"),
        "{err}"
    );
    db.close().await;
}

on_both_backends!(a_run_waits_for_a_decisions_apply_that_holds_the_lock);

/// A Decide file of (case, check, decision, note, reviewer) rows, written by a spreadsheet
/// library as a spreadsheet program would save them (control characters as `_xHHHH_`).
fn decide_rows(path: &Path, rows: &[(&str, &str, &str, &str, &str)]) {
    let rows: Vec<[String; 5]> = rows
        .iter()
        .map(|(a, b, c, d, e)| [a, b, c, d, e].map(|s| s.to_string()))
        .collect();
    crate::support::write_decide_rows(path, &rows);
}

/// The raw characters no output may carry: ESC and the direction override.
fn raw_hostile(text: &str) -> bool {
    text.contains('\u{1b}') || text.contains('\u{202E}') || text.contains('\u{200B}')
}

/// Point 5: a note whose `_x001B_` escape decodes to ESC is refused with why (before: applied,
/// the ESC stored in the decision and the case's status note); a reviewer cell and a note with
/// a direction override, a provider id with one, and a legacy actor with a zero-width space
/// show as `<U+XXXX>` in the apply summary, `recon cases show` and `recon cases list` (before:
/// raw).
#[tokio::test]
async fn hostile_text_on_the_decision_surfaces_is_refused_or_shown_escaped() {
    let env = job();
    let case = a_case(&env, "T-\u{202E}7").await;
    let check = format!("{} {}", case.key, case.fingerprint);
    let file = env.path("decide.xlsx");
    // One row per file: two rows of one case with different notes would refuse the case
    // (one decision per case per file), whatever else they hold.
    decide_rows(
        &file,
        &[(&case.key, &check, "escalate", "ok\u{1b}[2J", "bo\u{202E}b")],
    );
    // The file carries the escape, as Excel and LibreOffice write one.
    let strings = Command::new("unzip")
        .args(["-p"])
        .arg(&file)
        .arg("xl/sharedStrings.xml")
        .output()
        .expect("unzip");
    assert!(
        String::from_utf8_lossy(&strings.stdout).contains("_x001B_"),
        "{}",
        String::from_utf8_lossy(&strings.stdout)
    );
    let apply = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["decisions", "apply", "--config"])
        .arg(&env.config_path)
        .arg(&file)
        .output()
        .expect("recon runs");
    let stdout = String::from_utf8_lossy(&apply.stdout).into_owned();
    assert_eq!(
        apply.status.code(),
        Some(recon::exit::DECISIONS_REFUSED),
        "{}",
        said(&apply)
    );
    assert!(!raw_hostile(&stdout), "{stdout}");
    assert!(
        stdout.contains("U+001B") && stdout.contains("_x001B_"),
        "{stdout}"
    );
    assert!(stdout.contains("bo<U+202E>b"), "{stdout}");
    let result = read_columns(
        &recon::decisions::FileResult::result_path(&file),
        &["row", "result", "detail"],
    );
    assert_eq!(
        result[0][..2],
        ["2".to_string(), "refused".to_string()],
        "{result:?}"
    );
    assert_eq!(result.len(), 1, "{result:?}");
    let file = env.path("decide-again.xlsx");
    decide_rows(
        &file,
        &[(&case.key, &check, "escalate", "see \u{202E}lmth.exe", "")],
    );
    let apply = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["decisions", "apply", "--config"])
        .arg(&env.config_path)
        .arg(&file)
        .output()
        .expect("recon runs");
    assert!(apply.status.success(), "{}", said(&apply));
    assert!(
        !raw_hostile(&String::from_utf8_lossy(&apply.stdout)),
        "{}",
        said(&apply)
    );
    let result = read_columns(
        &recon::decisions::FileResult::result_path(&file),
        &["row", "result", "detail"],
    );
    assert_eq!(
        result[0][..2],
        ["2".to_string(), "applied".to_string()],
        "{result:?}"
    );
    // Nothing raw was stored from the file: the refused row not at all.
    let stored = env
        .texts("SELECT note FROM case_decisions UNION ALL SELECT coalesce(status_note, '') FROM review_cases")
        .await;
    assert!(stored.iter().all(|t| !t.contains('\u{1b}')), "{stored:?}");
    assert_eq!(
        env.texts("SELECT decision || ' ' || actor FROM case_decisions")
            .await,
        ["escalate alice"]
    );
    // A decision recorded before names were checked (written here directly).
    let pool = env.pool().await;
    sqlx::query(
        "INSERT INTO case_decisions (case_key, fingerprint, decision, actor, note, state, \
         file_sha256, row_no, decided_at) VALUES (?, ?, 'escalate', ?, ?, 'APPLIED', 'x', 2, \
         '2026-11-06 10:00:00.000000')",
    )
    .bind(&case.key)
    .bind(&case.fingerprint)
    .bind("ev\u{200B}e")
    .bind("old\u{1b}note")
    .execute(&pool)
    .await
    .expect("insert");
    pool.close().await;
    for args in [
        vec!["cases", "show", case.key.as_str()],
        vec!["cases", "list"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(&args)
            .arg("--config")
            .arg(&env.config_path)
            .output()
            .expect("recon runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{}", said(&out));
        assert!(!raw_hostile(&text), "{args:?}: {text}");
        assert!(text.contains("T-<U+202E>7"), "{args:?}: {text}");
        if args[1] == "show" {
            assert!(
                text.contains("ev<U+200B>e") && text.contains("old<U+001B>note"),
                "{text}"
            );
            assert!(text.contains("see <U+202E>lmth.exe"), "{text}");
        }
    }
}

/// The bytes of every text value of `decision_files`.
async fn stored_bytes(env: &TestEnv) -> usize {
    use sqlx::{Column as _, Row as _};
    let pool = env.pool().await;
    let rows = sqlx::query("SELECT * FROM decision_files")
        .fetch_all(&pool)
        .await
        .expect("decision_files");
    pool.close().await;
    rows.iter()
        .map(|r| {
            r.columns()
                .iter()
                .map(|c| {
                    r.try_get::<Option<String>, _>(c.ordinal())
                        .ok()
                        .flatten()
                        .map_or(0, |t| t.len())
                })
                .sum::<usize>()
        })
        .sum()
}

/// Point 7: a file of 2,001 decided rows (one applies, 2,000 name cases that do not exist) is
/// kept in `decision_files` as its counts and its first 100 refused rows: a few KiB, not the
/// result file (before: the whole result CSV, ~170 KiB here, 154 MB for a 1M-row file). The
/// same file applied again still answers `unchanged` for each of its 2,001 rows, saying what
/// each was then.
#[tokio::test]
async fn decision_files_keeps_counts_and_the_first_refused_rows_not_every_row() {
    let env = job();
    let case = a_case(&env, "T-7").await;
    let check = format!("{} {}", case.key, case.fingerprint);
    let mut rows: Vec<(String, String, String)> =
        vec![(case.key.clone(), check, "escalate".into())];
    for i in 0..2000 {
        let key = format!("C-{i:016x}");
        rows.push((
            key.clone(),
            format!("{key} {}", "0".repeat(64)),
            "dismiss: written off".into(),
        ));
    }
    let file = env.path("big.xlsx");
    let rows_ref: Vec<(&str, &str, &str, &str, &str)> = rows
        .iter()
        .map(|(k, c, d)| (k.as_str(), c.as_str(), d.as_str(), "checked", ""))
        .collect();
    decide_rows(&file, &rows_ref);
    let cfg = env.config();
    let db = env.db().await;
    let first = recon::decisions::apply_file(&db, &cfg.decisions, &file, "alice")
        .await
        .expect("apply");
    let written = first.write().expect("result file");
    assert_eq!(
        (first.count(Status::Applied), first.count(Status::Refused)),
        (1, 2000)
    );
    let result_bytes = std::fs::metadata(&written).expect("result").len() as usize;
    let kept = stored_bytes(&env).await;
    eprintln!("2,001 rows: result file {result_bytes} bytes, decision_files {kept} bytes");
    assert!(result_bytes > 100 * 1024, "{result_bytes}");
    assert!(kept < 32 * 1024, "decision_files keeps {kept} bytes");
    let counts: serde_json::Value = serde_json::from_str(
        &env.texts("SELECT counts FROM decision_files")
            .await
            .remove(0),
    )
    .expect("counts");
    assert_eq!(counts["refused"], 2000);
    assert_eq!(counts["applied"], 1);
    let again = recon::decisions::apply_file(&db, &cfg.decisions, &file, "alice")
        .await
        .expect("apply again");
    db.close().await;
    assert_eq!(again.rows.len(), 2001);
    assert_eq!(again.count(Status::Unchanged), 2001, "{}", again.text(None));
    assert!(again.earlier.is_some());
    let row = |n: u32| {
        again
            .rows
            .iter()
            .find(|r| r.row_no == n)
            .unwrap_or_else(|| panic!("row {n}"))
            .detail
            .clone()
    };
    assert!(
        row(2).contains("escalate was recorded then (applied)"),
        "{}",
        row(2)
    );
    assert!(row(3).contains("refused then (unknown case"), "{}", row(3));
    // Past the first 100 refused rows: the counts of then.
    assert!(row(2002).contains("2000 refused"), "{}", row(2002));
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM case_decisions")
            .await,
        ["1"]
    );
}

/// A statement source read from `bank.xlsx` (Date, Amount, Ref in EUR).
const XLSX_SOURCE: &str = r#"
[[source]]
name = "bank"
format = "xlsx"
path = "bank.xlsx"
timestamp_format = "%Y-%m-%d"
currency = "EUR"
[source.columns]
booked_at = "Date"
amount = "Amount"
reference = "Ref"
"#;

/// Issue 41, "done when": one night with a 1.6 KB far-cell XLSX statement, a decision bomb (a
/// Decide sheet with a cell at XFD1048576) and an unreadable decision file in bob's folder
/// completes with exit 10 (an input unreadable), a run record and an email naming all three;
/// bob's good file is applied all the same. Before: the statement's dense range (17 billion
/// cells) or the bomb's OOM-killed the night, every night, with the run record left RUNNING.
#[tokio::test]
async fn a_night_with_a_far_cell_statement_a_decision_bomb_and_an_unreadable_file_completes() {
    use crate::bombs::{far_cell_row, sheet_xml, text_cell, workbook};
    let env = job();
    let case = a_case(&env, "T-7").await;
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    env.write("recon.toml", &format!("{config}\n{XLSX_SOURCE}"));
    let statement = workbook(
        "Sheet1",
        &sheet_xml(
            None,
            &format!(
                "<row r=\"1\">{}{}{}</row>{}",
                text_cell("A1", "Date"),
                text_cell("B1", "Amount"),
                text_cell("C1", "Ref"),
                far_cell_row()
            ),
        ),
        None,
    );
    assert!(statement.len() < 2048, "{} bytes", statement.len());
    std::fs::write(env.path("bank.xlsx"), &statement).expect("statement");
    let bob = folder(&env, "bob", BOB, 0o755);
    decide(&bob.join("b.xlsx"), &case, "escalate", BOB);
    let header: String = recon::report::xlsx::DECIDE_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, h)| text_cell(&recon::workbook::cell_name(0, i as u32), h))
        .collect();
    let bomb = bob.join("bomb.xlsx");
    std::fs::write(
        &bomb,
        workbook(
            recon::report::xlsx::DECIDE_SHEET,
            &sheet_xml(
                None,
                &format!("<row r=\"1\">{header}</row>{}", far_cell_row()),
            ),
            None,
        ),
    )
    .expect("bomb");
    chown(&bomb, Some(BOB), Some(BOB)).expect("chown");
    let secret = bob.join("secret.xlsx");
    decide(&secret, &case, "dismiss: written off", BOB);
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).expect("chmod");

    let out = night_as_recon(&env, 6, "n06");
    assert_eq!(
        out.status.code(),
        Some(recon::exit::INPUT_UNREADABLE),
        "{}",
        said(&out)
    );
    let status = record(&env, "n06").await;
    assert!(
        status != "none" && status != "RUNNING",
        "run record {status}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.path("out/n06/summary.json")).expect("summary.json"),
    )
    .expect("json");
    let unreadable = summary["unreadable_inputs"].to_string();
    assert!(
        unreadable.contains("bank.xlsx") && unreadable.contains("XFD1048576"),
        "{unreadable}"
    );
    let inbox = &summary["inbox"];
    let bomb_why = why_skipped(inbox, &bomb).unwrap_or_else(|| panic!("{inbox:#}"));
    assert!(bomb_why.contains("XFD1048576"), "{bomb_why}");
    let secret_why = why_skipped(inbox, &secret).unwrap_or_else(|| panic!("{inbox:#}"));
    assert!(secret_why.contains("Permission denied"), "{secret_why}");
    let email = crate::report::email_body(&env.path("out/n06"), "text/plain");
    for named in [
        "bank.xlsx".to_string(),
        in_inbox(inbox, &bomb),
        in_inbox(inbox, &secret),
    ] {
        assert!(
            email.contains(&named),
            "the email does not name {named}: {email}"
        );
    }
    // bob's good file was applied all the same.
    let (status, decisions) = case_now(&env, &case.key).await;
    assert_eq!(status, "ESCALATED", "{}", said(&out));
    assert_eq!(decisions, [("escalate".to_string(), "bob".to_string())]);
}
