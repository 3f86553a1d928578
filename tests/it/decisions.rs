//! Decisions in the spreadsheet (issue 32 points 3 and 4), on BOTH backends: recon writes
//! report.xlsx, Python's openpyxl (another spreadsheet library) fills the Decide sheet, and
//! `recon decisions apply` shows applied, stale-refused, edited, not-offered, waiting for a
//! second reviewer, self-approval refused, approved by a second reviewer, and a file applied
//! twice changing nothing; the next run keeps the confirmed candidate, and the dismissed case
//! stays dismissed. `recon decisions apply`, like every command on the job's database, waits
//! for it only as long as the job's `[database]` allows.

use crate::support::{Backend, Settings, TestEnv, openpyxl_python, read_columns};
use recon::decisions::result::{FileResult, Status};
use std::path::{Path, PathBuf};
use std::process::Command;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "NL91ABNA0417164300";
const IBAN_C: &str = "GB33BUKB20201555555555";
const IBAN_D: &str = "FR7630006000011234567890189";
const IBAN_E: &str = "BE68539007547034";
const IBAN_F: &str = "AT611904300234573201";
const DAY: &str = "2026-11-10";

/// The reviewers of the two-reviewer job: the tests run as root, who is alice (so
/// `recon decisions apply` run by the test applies as alice); bob and carol are other uids.
pub const REVIEWERS: &str = "[[reviewer]]\nname = \"alice\"\nuid = 0\n\n\
                             [[reviewer]]\nname = \"bob\"\nuid = 4242\n\n\
                             [[reviewer]]\nname = \"carol\"\nuid = 4243\n";

/// P-1: a near miss (L-1, 39.50 for 40.00). P-2 / P-3: twins for one line L-2. P-5: a near
/// miss (L-5) that gets a second look-alike (L-6) in a later delivery. L-7, L-8, L-9: lines no
/// payment of ours can be.
fn statement(extra: &str) -> String {
    format!(
        "L-1,,{IBAN_A},39.50,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-2,,{IBAN_B},25.00,EUR,2026-11-10T12:00:00Z,PAYMENT\n\
         L-5,,{IBAN_C},69.00,EUR,2026-11-10T15:00:00Z,PAYMENT\n\
         L-7,,{IBAN_D},310.00,EUR,2026-11-10T16:00:00Z,PAYMENT\n\
         L-8,,{IBAN_E},320.00,EUR,2026-11-10T16:10:00Z,PAYMENT\n\
         L-9,,{IBAN_F},330.00,EUR,2026-11-10T16:20:00Z,PAYMENT\n{extra}"
    )
}

async fn job(b: Backend) -> TestEnv {
    let env = TestEnv::on(
        b,
        Settings {
            extra: format!(
                "approvals = 2\n{REVIEWERS}\n{}",
                crate::report::file_email()
            ),
            ..Settings::default()
        },
    )
    .await;
    env.import(
        &format!(
            "P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-2,\n\
             P-3,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:30:00Z,2026-11-10T11:30:00Z,A-3,\n\
             P-5,{IBAN_C},70.00,EUR,UNKNOWN,2026-11-10T14:00:00Z,2026-11-10T14:00:00Z,A-5,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:30:00Z,,UNKNOWN,,timeout\n\
         A-5,P-5,2026-11-10T14:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&statement(""));
    env
}

/// Fills the Decide sheet of `src` with openpyxl and saves it as `dst`. Each edit names the
/// row by an id in its `whose` cell; `confirm` picks the candidate of that payment by reading
/// the numbered candidates cell; `edit_check` changes the hidden fingerprint's last digit.
const FILL: &str = r#"
import json, re, sys
import openpyxl
src, dst, edits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
wb = openpyxl.load_workbook(src)
ws = wb["Decide"]
col = {c.value: i for i, c in enumerate(ws[1])}
assert ws.column_dimensions[openpyxl.utils.get_column_letter(col["check"] + 1)].hidden, "check column not hidden"
for e in edits:
    rows = [r for r in ws.iter_rows(min_row=2)
            if re.search(r"\b%s\b" % re.escape(e["id"]), r[col["whose"]].value or "")]
    assert len(rows) == 1, "%s: %d rows" % (e["id"], len(rows))
    r = rows[0]
    decision = e.get("decision")
    if "confirm" in e:
        m = re.search(r"^(\d+): %s " % re.escape(e["confirm"]), r[col["candidates"]].value, re.M)
        assert m, r[col["candidates"]].value
        decision = "confirm " + m.group(1)
    assert decision.split()[0] in r[col["offered"]].value or e.get("not_offered"), (decision, r[col["offered"]].value)
    r[col["decision"]].value = decision
    r[col["note"]].value = e.get("note", "")
    r[col["reviewer"]].value = e.get("reviewer", "")
    if e.get("edit_check"):
        v = r[col["check"]].value
        r[col["check"]].value = v[:-1] + ("0" if v[-1] != "0" else "1")
wb.save(dst)
"#;

fn fill(src: &Path, dst: &Path, edits: serde_json::Value) {
    let out = Command::new(openpyxl_python())
        .arg("-c")
        .arg(FILL)
        .arg(src)
        .arg(dst)
        .arg(edits.to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "openpyxl edit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The result file's rows: (case or whose, decision, result, detail) by row.
fn results(input: &Path) -> Vec<(String, String, String)> {
    read_columns(
        &FileResult::result_path(input),
        &["decision", "result", "detail"],
    )
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
    .collect()
}

async fn apply(env: &TestEnv, file: &Path, actor: &str) -> FileResult {
    let db = env.db().await;
    let cfg = env.config();
    let r = recon::decisions::apply_file(&db, &cfg.decisions, file, actor)
        .await
        .expect("apply");
    db.close().await;
    r.write().expect("result file");
    r
}

/// The row of `result` whose decision is `decision` (each file here has one each, but P-5's
/// and L-9's dismiss and L-7's: found by the case key instead).
fn row<'a>(r: &'a FileResult, case: &str) -> &'a recon::decisions::result::RowResult {
    r.rows
        .iter()
        .find(|x| x.case == case)
        .unwrap_or_else(|| panic!("no row for {case}: {r:#?}"))
}

/// The key of the case of a payment, or of a line alone (found through its ticket).
async fn case_key(env: &TestEnv, payment_or_line: &str) -> String {
    let db = env.db().await;
    let list = recon::decisions::queue::list(&db, false)
        .await
        .expect("cases");
    let tickets = recon::tickets::list(&db, false).await.expect("tickets");
    db.close().await;
    let line_tickets: Vec<i64> = tickets
        .iter()
        .filter(|t| t.line_ids == format!("psp:{payment_or_line}"))
        .map(|t| t.ticket_id)
        .collect();
    let found: Vec<String> = list
        .iter()
        .filter(|c| {
            c.payments.iter().any(|p| p.payment_id == payment_or_line)
                || c.ticket_ids.iter().any(|t| line_tickets.contains(t))
        })
        .map(|c| c.key.clone())
        .collect();
    assert_eq!(found.len(), 1, "{payment_or_line}: {found:?} of {list:#?}");
    found.into_iter().next().expect("one")
}

/// The `case` column of a report's Decide sheet.
pub fn decide_cases(report: &Path) -> Vec<String> {
    use calamine::Reader as _;
    let mut book: calamine::Xlsx<_> = calamine::open_workbook(report).expect("xlsx");
    let range = book.worksheet_range("Decide").expect("Decide sheet");
    range.rows().skip(1).map(|r| r[0].to_string()).collect()
}

fn copy_in(env: &TestEnv, from: &Path, name: &str) -> PathBuf {
    let to = env.path(name);
    std::fs::copy(from, &to).expect("copy");
    to
}

async fn round_trip(b: Backend) {
    let env = job(b).await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let report1 = copy_in(&env, &r1.out_dir.join("report.xlsx"), "report1.xlsx");
    let (k1, k23, k5, k7, k8, k9) = (
        case_key(&env, "P-1").await,
        case_key(&env, "P-2").await,
        case_key(&env, "P-5").await,
        case_key(&env, "L-7").await,
        case_key(&env, "L-8").await,
        case_key(&env, "L-9").await,
    );
    // Every case of the run is a row to decide.
    let mut listed = decide_cases(&report1);
    listed.sort();
    let mut keys = vec![
        k1.clone(),
        k23.clone(),
        k5.clone(),
        k7.clone(),
        k8.clone(),
        k9.clone(),
    ];
    keys.sort();
    assert_eq!(listed, keys);

    // Alice decides in openpyxl.
    let alice = env.path("alice.xlsx");
    fill(
        &report1,
        &alice,
        serde_json::json!([
            {"id": "P-1", "decision": "failed", "note": "never left: bank says no debit", "reviewer": "alice"},
            {"id": "P-2", "confirm": "P-3", "note": "the invoice says P-3", "reviewer": "alice"},
            {"id": "P-5", "decision": "dismiss: written off", "note": "fee netted", "reviewer": "alice"},
            {"id": "L-7", "decision": "dismiss: written off", "edit_check": true},
            {"id": "L-8", "decision": "failed", "not_offered": true},
            {"id": "L-9", "decision": "dismiss: written off", "note": "a test transfer", "reviewer": "mallory"},
        ]),
    );
    // A later delivery adds a second look-alike for P-5: its evidence changes after the export.
    env.statement(&statement(&format!(
        "L-6,,{IBAN_C},68.00,EUR,2026-11-10T15:30:00Z,PAYMENT\n"
    )));
    env.run(DAY, "2026-11-21T00:00:00Z", false, "r2").await;

    // Applied through the binary: exit 12 (a row refused), the summary on stdout.
    let out = Command::new(env!("CARGO_BIN_EXE_recon"))
        .args(["decisions", "apply", "--config"])
        .arg(&env.config_path)
        .args(["--actor", "alice"])
        .arg(&alice)
        .output()
        .expect("recon runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(recon::exit::DECISIONS_REFUSED),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The confirm of P-2 / P-3 resolves money through the next run: it waits for a second
    // reviewer like `failed` (issue 40).
    assert!(
        stdout.contains("1 applied, 2 waiting for approval, 0 unchanged, 3 refused"),
        "{stdout}"
    );
    let first = results(&alice);
    assert_eq!(first.len(), 6, "{first:?}");
    let by_case = |case: &str| {
        let rows = read_columns(
            &FileResult::result_path(&alice),
            &["case", "result", "detail"],
        );
        rows.into_iter()
            .find(|r| r[0] == case)
            .map(|r| (r[1].clone(), r[2].clone()))
            .unwrap_or_else(|| panic!("no result row for {case}"))
    };
    let (res, detail) = by_case(&k1);
    assert_eq!(res, "waiting for approval", "{detail}");
    let (res, detail) = by_case(&k23);
    assert_eq!(res, "waiting for approval", "{detail}");
    let (res, detail) = by_case(&k5);
    assert_eq!(res, "refused");
    assert!(
        detail.starts_with("stale: the evidence changed"),
        "{detail}"
    );
    let (res, detail) = by_case(&k7);
    assert_eq!(res, "refused");
    assert!(detail.contains("edited"), "{detail}");
    let (res, detail) = by_case(&k8);
    assert_eq!(res, "refused");
    assert!(detail.contains("failed is not offered"), "{detail}");
    let (res, detail) = by_case(&k9);
    assert_eq!(res, "applied", "{detail}");
    // The reviewer cell is shown, never taken: alice applied it.
    assert!(
        detail.contains("reviewer cell says \"mallory\"") && detail.contains("recorded as alice"),
        "{detail}"
    );
    let l9_ticket = env
        .texts("SELECT status || ' ' || coalesce(resolved_by, '') FROM review_tickets WHERE line_ids = 'psp:L-9'")
        .await;
    assert_eq!(l9_ticket, ["RESOLVED alice"]);

    // The same file again changes nothing.
    let decisions_before = env
        .texts("SELECT CAST(count(*) AS TEXT) FROM case_decisions")
        .await;
    let again = apply(&env, &alice, "alice").await;
    assert_eq!(again.rows.len(), 6);
    assert!(
        again.rows.iter().all(|r| r.status == Status::Unchanged),
        "{again:#?}"
    );
    assert!(again.earlier.is_some());
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM case_decisions")
            .await,
        decisions_before
    );
    assert!(results(&alice).iter().all(|(_, r, _)| r == "unchanged"));

    // Alice cannot approve her own `failed`, even from another file.
    let alice2 = env.path("alice2.xlsx");
    fill(
        &report1,
        &alice2,
        serde_json::json!([{"id": "P-1", "decision": "failed", "note": "really"}]),
    );
    let own = apply(&env, &alice2, "alice").await;
    assert_eq!(row(&own, &k1).status, Status::Refused);
    assert!(
        row(&own, &k1).detail.contains("nobody approves their own"),
        "{own:#?}"
    );
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["UNKNOWN"]
    );

    // Bob's same decisions approve them: the guarded transition, with the reviewers in history.
    let bob = env.path("bob.xlsx");
    fill(
        &report1,
        &bob,
        serde_json::json!([
            {"id": "P-1", "decision": "failed", "note": "agree", "reviewer": "bob"},
            {"id": "P-2", "confirm": "P-3", "note": "agree", "reviewer": "bob"},
        ]),
    );
    let approved = apply(&env, &bob, "bob").await;
    assert_eq!(row(&approved, &k1).status, Status::Applied, "{approved:#?}");
    assert_eq!(
        row(&approved, &k23).status,
        Status::Applied,
        "{approved:#?}"
    );
    assert!(
        row(&approved, &k23)
            .detail
            .contains("approved alice's decision")
            && row(&approved, &k23).detail.contains("L-2"),
        "{approved:#?}"
    );
    // Stored as approved, with its approver: not superseded by the settlement it caused.
    for key in [&k1, &k23] {
        let db = env.db().await;
        let (case, decisions) = recon::decisions::queue::show(&db, key).await.expect("case");
        db.close().await;
        assert_eq!(case.status, "DECIDED");
        let states: Vec<(String, String, Option<String>)> = decisions
            .iter()
            .map(|d| (d.actor.clone(), d.state.clone(), d.approved_by.clone()))
            .collect();
        assert_eq!(
            states,
            [(
                "alice".to_string(),
                "APPLIED".to_string(),
                Some("bob".to_string())
            )],
            "{key}"
        );
    }
    // The approver applying the same decision again, from another file: unchanged.
    let bob2 = env.path("bob2.xlsx");
    fill(
        &report1,
        &bob2,
        serde_json::json!([{"id": "P-1", "decision": "failed", "note": "once more"}]),
    );
    let again = apply(&env, &bob2, "BOB").await;
    assert_eq!(row(&again, &k1).status, Status::Unchanged, "{again:#?}");
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["FAILED"]
    );
    let history = env
        .texts(
            "SELECT from_status || ' ' || to_status || ' ' || actor || ' ' || reason \
             FROM payment_status_history WHERE payment_id = 'P-1' ORDER BY id",
        )
        .await;
    assert_eq!(history.len(), 1, "{history:?}");
    assert!(
        history[0].starts_with("UNKNOWN FAILED alice ")
            && history[0].contains("approved by bob")
            && history[0].contains("never left: bank says no debit"),
        "{history:?}"
    );

    // The next run: the confirmed candidate is evidence it keeps (L-2 is P-3's), the dismissed
    // case stays dismissed and out of the Decide sheet; the stale case is there to decide again.
    let r3 = env.run(DAY, "2026-11-22T00:00:00Z", false, "r3").await;
    let rows = read_columns(
        &r3.out_dir.join("results.csv"),
        &["outcome", "payment_id", "provider_txn_id"],
    );
    assert!(
        rows.iter()
            .any(|r| r[1] == "P-3" && r[2] == "L-2" && r[0] == "RESOLVED_SUCCEEDED"),
        "{rows:?}"
    );
    assert!(
        !rows.iter().any(|r| r[1] == "P-2" && r[2] == "L-2"),
        "{rows:?}"
    );
    // recon's transition names the reviewers whose confirmation it rests on (issue 40).
    let p3 = env
        .texts("SELECT actor || ' ' || reason FROM payment_status_history WHERE payment_id = 'P-3'")
        .await;
    assert_eq!(p3.len(), 1, "{p3:?}");
    assert!(
        p3[0].starts_with("recon RESOLVED_SUCCEEDED")
            && p3[0].contains("line L-2 confirmed as this payment's by alice, approved by bob")
            && p3[0].contains(&k23),
        "{p3:?}"
    );
    // Its look-alike, if recon moves it, says whose the line was confirmed as.
    for h in env
        .texts("SELECT reason FROM payment_status_history WHERE payment_id = 'P-2'")
        .await
    {
        assert!(
            h.contains("confirmed as payment P-3's by alice, approved by bob"),
            "{h}"
        );
    }
    let decide3 = decide_cases(&r3.out_dir.join("report.xlsx"));
    assert!(!decide3.contains(&k9), "{decide3:?}");
    assert!(!decide3.contains(&k23), "{decide3:?}");
    assert!(decide3.contains(&k5), "{decide3:?}");
    let db = env.db().await;
    let (c9, _) = recon::decisions::queue::show(&db, &k9).await.expect("case");
    db.close().await;
    assert_eq!(c9.status, "DISMISSED");
    assert_eq!(c9.last_seen_run_id, "r3");
    // The email lists what waits for a decision: the dismissed case is counted, not listed.
    let text = crate::report::email_body(&r3.out_dir, "text/plain");
    assert!(
        text.contains(
            "1 case dismissed or decided by reviewers on the same evidence is not listed"
        ),
        "{text}"
    );
    assert!(text.contains("4 cases to decide"), "{text}");
    assert!(
        text.contains("How to decide: open the attached report.xlsx, sheet Decide"),
        "{text}"
    );
    assert!(!text.contains("L-9"), "{text}");
    assert_eq!(l9_ticket, env
        .texts("SELECT status || ' ' || coalesce(resolved_by, '') FROM review_tickets WHERE line_ids = 'psp:L-9'")
        .await);
}

#[tokio::test]
async fn round_trip_through_openpyxl_on_sqlite() {
    round_trip(Backend::Sqlite).await;
}

#[tokio::test]
async fn round_trip_through_openpyxl_on_postgres() {
    round_trip(Backend::Postgres).await;
}

/// A re-run of a period: its one report groups the days' rows into cases (a payment carried
/// over to the last day with a line booked on the first is one case), and its Decide sheet is
/// decided and applied like a night's.
#[tokio::test]
async fn the_decide_sheet_of_a_range_rerun_applies() {
    let env = job(Backend::Sqlite).await;
    env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let range = env
        .try_run(DAY, "2026-11-12", "2026-11-20T00:00:00Z", false, "range")
        .await
        .expect("range run");
    // P-2 is carried over to the range's last day, L-2 is booked on its first.
    let last_day = read_columns(
        &range.out_dir.join("2026-11-12/results.csv"),
        &["outcome", "payment_id"],
    );
    assert!(
        last_day
            .iter()
            .any(|r| r[0] == "AMBIGUOUS" && r[1] == "P-2"),
        "{last_day:?}"
    );
    let report = copy_in(&env, &range.out_dir.join("report.xlsx"), "range.xlsx");
    let decided = env.path("range-decided.xlsx");
    fill(
        &report,
        &decided,
        serde_json::json!([{"id": "P-2", "confirm": "P-3", "note": "bank confirms", "reviewer": "alice"}]),
    );
    let r = apply(&env, &decided, "alice").await;
    // Under approvals = 2 a confirm of unresolved payments waits for a second reviewer.
    assert_eq!(r.count(Status::Waiting), 1, "{}", r.text(None));
    assert_eq!(r.count(Status::Refused), 0, "{}", r.text(None));
    let r = apply(&env, &decided, "bob").await;
    assert_eq!(r.count(Status::Applied), 1, "{}", r.text(None));
}

/// The decisions inbox: the next run applies `<inbox>/<reviewer>/*.xlsx` as that reviewer
/// before it reconciles, leaves each file where it is and writes its result into
/// `<output_dir>/decisions/<reviewer>/`; a folder others can write to proves nothing, so its
/// files are not applied.
#[tokio::test]
async fn the_next_run_applies_the_inbox_as_each_folders_reviewer() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = TestEnv::on(
        Backend::Sqlite,
        Settings {
            extra: "decisions_inbox = \"decisions\"\n".into(),
            ..Settings::default()
        },
    )
    .await;
    let plain = job(Backend::Sqlite).await;
    // The same ledger and statement as the round trip, in this job (one approval).
    for f in [
        "payments.csv",
        "attempts.csv",
        "statement.csv",
        "statement.csv.ctl",
    ] {
        std::fs::copy(plain.path(f), env.path(f)).expect("copy");
    }
    env.import_files().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let k9 = case_key(&env, "L-9").await;
    let carol = env.path("decisions/carol");
    let open = env.path("decisions/shared");
    for d in [&carol, &open] {
        std::fs::create_dir_all(d).expect("inbox folder");
    }
    std::fs::set_permissions(&carol, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    fill(
        &r1.out_dir.join("report.xlsx"),
        &carol.join("night1.xlsx"),
        serde_json::json!([{"id": "L-9", "decision": "dismiss: written off", "note": "test transfer", "reviewer": "carol"}]),
    );
    fill(
        &r1.out_dir.join("report.xlsx"),
        &open.join("night1.xlsx"),
        serde_json::json!([{"id": "P-1", "decision": "failed", "note": "anyone could write this"}]),
    );
    let r2 = env.run(DAY, "2026-11-21T00:00:00Z", false, "r2").await;
    // Carol's file: applied as carol and left where she put it (recon writes nothing into a
    // reviewer's folder); its result is in recon's own folder (issue 41 point 3).
    assert!(carol.join("night1.xlsx").exists());
    let own = env.path("out/decisions/carol");
    let done: Vec<String> = std::fs::read_dir(&own)
        .expect("recon's folder for carol")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(
        done[0].starts_with("night1.") && done[0].ends_with(".result.csv"),
        "{done:?}"
    );
    let rows = read_columns(&own.join(&done[0]), &["case", "result", "actor"]);
    assert_eq!(rows, [vec![k9.clone(), "applied".into(), "carol".into()]]);
    let db = env.db().await;
    let (c9, decisions) = recon::decisions::queue::show(&db, &k9).await.expect("case");
    db.close().await;
    assert_eq!(c9.status, "DISMISSED");
    assert_eq!(decisions[0].actor, "carol");
    // The run that applied it already reconciled on it: the case is not offered again.
    assert!(!decide_cases(&r2.out_dir.join("report.xlsx")).contains(&k9));
    // The world-writable folder's file is left alone, and P-1 is as it was.
    assert!(open.join("night1.xlsx").exists());
    assert_eq!(
        env.texts("SELECT status FROM payments WHERE payment_id = 'P-1'")
            .await,
        ["UNKNOWN"]
    );
}

/// A file that is not a report with a Decide sheet is refused whole (row 0, exit 4): nothing
/// is guessed from it and nothing recorded, so the corrected file can be applied.
#[tokio::test]
async fn a_file_that_is_no_decide_sheet_is_refused_whole() {
    let env = job(Backend::Sqlite).await;
    env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let garbage = env.path("garbage.xlsx");
    std::fs::write(&garbage, b"PK\x03\x04 not really a workbook").expect("write");
    let other = env.path("other.xlsx");
    let mut wb = rust_xlsxwriter::Workbook::new();
    let ws = wb.add_worksheet().set_name("Decisions").expect("name");
    ws.write_string(0, 0, "decision").expect("cell");
    ws.write_string(1, 0, "dismiss").expect("cell");
    wb.save(&other).expect("save");
    for (file, why) in [
        (&garbage, "not a readable XLSX"),
        (&other, "no readable \"Decide\" sheet"),
    ] {
        let r = apply(&env, file, "alice").await;
        assert_eq!(r.rows.len(), 1, "{r:#?}");
        assert_eq!((r.rows[0].row_no, r.rows[0].status), (0, Status::Refused));
        assert!(r.rows[0].detail.contains(why), "{r:#?}");
        assert_eq!(r.exit_code(), recon::exit::INPUT);
    }
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM decision_files")
            .await,
        ["0"]
    );
    assert_eq!(
        env.texts("SELECT CAST(count(*) AS TEXT) FROM case_decisions")
            .await,
        ["0"]
    );
}

/// `[database]` bounds every command that opens the job's database, `recon decisions apply`
/// first (it once opened it with the defaults, so its waits ignored the job's bounds): against
/// a PostgreSQL address that takes the connection and never answers, each command gives up
/// after the job's `connect_timeout` (1s here; the default is 30s) with the database's exit
/// code, and its message names that bound and the key.
#[test]
fn every_command_on_the_jobs_database_waits_only_as_long_as_its_database_section_allows() {
    // Never accepted: the kernel completes the handshake, and nobody ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("recon.toml");
    std::fs::write(
        &job,
        format!(
            "timezone = \"UTC\"\ndatabase_url = \"postgres://recon@127.0.0.1:{port}/recon\"\n\
             output_dir = \"out\"\n\n[database]\nconnect_timeout = \"1s\"\n"
        ),
    )
    .expect("job");
    let cfg = job.display().to_string();
    let sheet = dir.path().join("report.xlsx").display().to_string();
    let commands: &[&[&str]] = &[
        &[
            "decisions",
            "apply",
            "--config",
            &cfg,
            "--actor",
            "alice",
            &sheet,
        ],
        &["cases", "list", "--config", &cfg],
        &["tickets", "list", "--config", &cfg],
        &["runs", "list", "--config", &cfg],
        &["migrate", "--config", &cfg],
        &[
            "tickets", "resolve", "--config", &cfg, "1", "--actor", "alice", "--note", "n",
        ],
        &["explain", "--config", &cfg, "P-1"],
        &["run", "--config", &cfg, "--date", "2026-11-28"],
    ];
    for args in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(*args)
            .env_remove("RECON_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .output()
            .expect("recon");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(recon::exit::DATABASE),
            "recon {}: {stderr}",
            args[..2].join(" ")
        );
        assert!(
            stderr.contains("no connection within 1s (`[database] connect_timeout`)"),
            "recon {}: {stderr}",
            args[..2].join(" ")
        );
    }
    drop(silent);
}
