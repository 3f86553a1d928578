//! Decisions people make (issue 42 point 5): `dismiss: <reason>` from the job's
//! `dismiss_reasons` (a bare or unknown reason refused with the allowed ones), stored and shown
//! in `recon cases show`; `accept difference` settling a netted fee in one decision within
//! `write_off_limit` (the next night raises no AMOUNT_MISMATCH for it), refused without a limit,
//! waiting for a second reviewer under `approvals = 2`, and above the limit waiting for a
//! second reviewer even under `approvals = 1` (refused, saying what to configure, when the job
//! has no `[[reviewer]]` to tell two people apart).

use crate::decisions::REVIEWERS;
use crate::support::{Settings, TestEnv, outcomes, write_decide_file};
use recon::decisions::result::{FileResult, Status};
use recon::store::cases::StoredCase;
use std::path::Path;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_D: &str = "FR7630006000011234567890189";
const IBAN_E: &str = "BE68539007547034";
const IBAN_F: &str = "AT611904300234573201";
const IBAN_G: &str = "GB33BUKB20201555555555";
const DAY: &str = "2026-11-10";
const AS_OF: &str = "2026-11-20T00:00:00Z";

/// P-1 (40.00 EUR, UNKNOWN) and its netted line L-1 (39.50: a 0.50 fee kept by the provider,
/// no reference): a near miss. L-6 … L-9: lines no payment of ours can be (a case each).
async fn job(extra: &str) -> TestEnv {
    let env = TestEnv::with(Settings {
        extra: extra.to_string(),
        ..Settings::default()
    });
    env.import(
        &format!("P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n"),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&format!(
        "L-1,,{IBAN_A},39.50,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-6,,{IBAN_G},300.00,EUR,2026-11-10T15:50:00Z,PAYMENT\n\
         L-7,,{IBAN_D},310.00,EUR,2026-11-10T16:00:00Z,PAYMENT\n\
         L-8,,{IBAN_E},320.00,EUR,2026-11-10T16:10:00Z,PAYMENT\n\
         L-9,,{IBAN_F},330.00,EUR,2026-11-10T16:20:00Z,PAYMENT\n"
    ));
    env
}

/// The stored cases, by a payment or a line they name (P-1, or L-6 … L-9 through their
/// candidates-free `what`).
pub(crate) async fn cases(env: &TestEnv) -> Vec<StoredCase> {
    let db = env.db().await;
    let list = recon::decisions::queue::list(&db, false)
        .await
        .expect("cases");
    db.close().await;
    list
}

pub(crate) fn case_of<'a>(cases: &'a [StoredCase], id: &str) -> &'a StoredCase {
    let found: Vec<&StoredCase> = cases
        .iter()
        .filter(|c| {
            c.payments.iter().any(|p| p.payment_id == id) || c.lines.iter().any(|(_, l)| l == id)
        })
        .collect();
    assert_eq!(found.len(), 1, "{id}: {cases:#?}");
    found[0]
}

/// Applies a sheet deciding `rows` (case, decision) as `actor`.
async fn decide(
    env: &TestEnv,
    name: &str,
    rows: &[(&StoredCase, &str)],
    actor: &str,
) -> FileResult {
    let file = env.path(name);
    let rows: Vec<(String, String, String)> = rows
        .iter()
        .map(|(c, d)| (c.key.clone(), c.fingerprint.clone(), d.to_string()))
        .collect();
    write_decide_file(&file, &rows, &format!("reviewed ({name})"));
    let db = env.db().await;
    let r = recon::decisions::apply_file(&db, &env.config().decisions, &file, actor)
        .await
        .expect("apply");
    db.close().await;
    r
}

fn result<'a>(r: &'a FileResult, case: &StoredCase) -> &'a recon::decisions::result::RowResult {
    r.rows
        .iter()
        .find(|x| x.case == case.key)
        .unwrap_or_else(|| panic!("no row for {}: {r:#?}", case.key))
}

/// `recon cases show KEY` as printed.
async fn show(env: &TestEnv, key: &str) -> String {
    let db = env.db().await;
    let (c, decisions) = recon::decisions::queue::show(&db, key).await.expect("show");
    db.close().await;
    recon::decisions::queue::render_one(&c, &decisions)
}

/// The Decide sheet's `offered` cell of the row of case `key`.
fn offered_in_sheet(report: &Path, key: &str) -> String {
    let (header, rows) = crate::support::sheet_rows(report, "Decide");
    let col = header
        .iter()
        .position(|h| h == "offered")
        .expect("offered column");
    rows.iter()
        .find(|r| r[0] == key)
        .map(|r| r[col].to_string())
        .unwrap_or_else(|| panic!("no Decide row for {key}"))
}

#[tokio::test]
async fn dismiss_with_each_default_reason_is_stored_and_shown() {
    let env = job("").await;
    let r1 = env.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&env).await;
    let reasons = [
        ("L-6", "refund requested"),
        ("L-7", "ledger corrected"),
        ("L-8", "written off"),
        ("L-9", "duplicate claimed back"),
    ];
    // The sheet offers every reason in the drop-down's list (the offered cell repeats it).
    let offered = offered_in_sheet(&r1.out_dir.join("report.xlsx"), &case_of(&all, "L-6").key);
    for (_, reason) in reasons {
        assert!(offered.contains(&format!("dismiss: {reason}")), "{offered}");
    }
    // The sheet's drop-down (data validation) lists them too.
    let sheet_xml = {
        use std::io::Read as _;
        let f = std::fs::File::open(r1.out_dir.join("report.xlsx")).expect("xlsx");
        let mut zip = zip::ZipArchive::new(f).expect("zip");
        let mut text = String::new();
        for i in 0..zip.len() {
            let mut e = zip.by_index(i).expect("entry");
            if e.name().expect("name").starts_with("xl/worksheets/") {
                e.read_to_string(&mut text).expect("read");
            }
        }
        text
    };
    assert!(
        sheet_xml.contains("dismiss: written off"),
        "no drop-down entry"
    );
    // Spelt in any case, blanks collapsed: stored as the job spells the reason.
    let typed = [
        "dismiss: Refund Requested",
        "Dismiss:ledger   corrected",
        "dismiss: written off",
        "DISMISS : duplicate claimed back",
    ];
    let rows: Vec<(&StoredCase, &str)> = reasons
        .iter()
        .zip(typed)
        .map(|((id, _), d)| (case_of(&all, id), d))
        .collect();
    let r = decide(&env, "d.xlsx", &rows, "alice").await;
    for ((id, reason), _) in reasons.iter().zip(typed) {
        let c = case_of(&all, id);
        let row = result(&r, c);
        assert_eq!(row.status, Status::Applied, "{id}: {row:?}");
        let shown = show(&env, &c.key).await;
        // The decision with its reason, and the case's status note (its history).
        assert!(
            shown.contains(&format!("dismiss: {reason}  APPLIED")),
            "{id}: {shown}"
        );
        assert!(
            shown.contains(&format!(
                "status by    alice: dismiss: {reason} (case {}",
                c.key
            )),
            "{id}: {shown}"
        );
        let db = env.db().await;
        let (stored, decisions) = recon::decisions::queue::show(&db, &c.key)
            .await
            .expect("show");
        db.close().await;
        assert_eq!(stored.status, "DISMISSED");
        assert_eq!(
            decisions
                .iter()
                .map(|d| d.decision.as_str())
                .collect::<Vec<_>>(),
            [format!("dismiss: {reason}").as_str()]
        );
    }
}

#[tokio::test]
async fn a_bare_dismiss_or_an_unknown_reason_is_refused_with_the_allowed_ones() {
    let env = job("dismiss_reasons = [\"chargeback won\", \"test transfer\"]\n").await;
    env.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&env).await;
    let (c6, c7, c8, c9) = (
        case_of(&all, "L-6"),
        case_of(&all, "L-7"),
        case_of(&all, "L-8"),
        case_of(&all, "L-9"),
    );
    let r = decide(
        &env,
        "d.xlsx",
        &[
            (c6, "dismiss"),
            // A default reason the job replaced.
            (c7, "dismiss: written off"),
            (c8, "escalate: test transfer"),
            (c9, "dismiss: Test Transfer"),
        ],
        "alice",
    )
    .await;
    let allowed = "\"dismiss: chargeback won\", \"dismiss: test transfer\"";
    let bare = result(&r, c6);
    assert_eq!(bare.status, Status::Refused);
    assert!(
        bare.detail.contains("dismiss needs a reason") && bare.detail.contains(allowed),
        "{}",
        bare.detail
    );
    let unknown = result(&r, c7);
    assert_eq!(unknown.status, Status::Refused);
    assert!(
        unknown
            .detail
            .contains("\"written off\" is not a dismiss reason")
            && unknown.detail.contains(allowed),
        "{}",
        unknown.detail
    );
    let escalate = result(&r, c8);
    assert_eq!(escalate.status, Status::Refused);
    assert!(
        escalate.detail.contains("takes no reason"),
        "{}",
        escalate.detail
    );
    assert_eq!(
        result(&r, c9).status,
        Status::Applied,
        "{:?}",
        result(&r, c9)
    );
    let db = env.db().await;
    for (c, status, decided) in [
        (c6, "OPEN", None),
        (c7, "OPEN", None),
        (c8, "OPEN", None),
        (c9, "DISMISSED", Some("dismiss: test transfer")),
    ] {
        let (now, decisions) = recon::decisions::queue::show(&db, &c.key)
            .await
            .expect("show");
        assert_eq!(now.status, status, "{}", c.key);
        assert_eq!(
            decisions.first().map(|d| d.decision.as_str()),
            decided,
            "{}",
            c.key
        );
    }
    db.close().await;
    // A job listing no reason, a reason with a comma, or one twice is refused at load.
    for bad in [
        "dismiss_reasons = []\n",
        "dismiss_reasons = [\"a, b\"]\n",
        "dismiss_reasons = [\"x\", \"X\"]\n",
    ] {
        let env = TestEnv::with(Settings {
            extra: bad.into(),
            ..Settings::default()
        });
        let err = recon::config::Config::load(&env.config_path)
            .map(|_| ())
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("dismiss_reasons"),
            "{bad}: {err:#}"
        );
    }
}

/// The P-1 rows of a run's results and its open AMOUNT_MISMATCH tickets.
async fn p1_after(env: &TestEnv, r: &recon::run::RunReport) -> (Vec<String>, usize) {
    let rows: Vec<String> = outcomes(r)
        .into_iter()
        .filter(|(_, p, _)| p == "P-1")
        .map(|(o, _, _)| o)
        .collect();
    let db = env.db().await;
    let open = recon::tickets::list(&db, false)
        .await
        .expect("tickets")
        .into_iter()
        .filter(|t| t.kind == "AMOUNT_MISMATCH" && t.status == "OPEN")
        .count();
    db.close().await;
    (rows, open)
}

#[tokio::test]
async fn accept_difference_within_the_limit_settles_a_netted_fee_in_one_decision() {
    // As before: `confirm 1` alone leaves the next night an AMOUNT_MISMATCH to decide.
    let before = job("write_off_limit = { EUR = \"1.00\" }\n").await;
    before.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&before).await;
    let r = decide(
        &before,
        "d.xlsx",
        &[(case_of(&all, "P-1"), "confirm 1")],
        "alice",
    )
    .await;
    assert_eq!(r.rows[0].status, Status::Applied, "{r:?}");
    let r2 = before.run(DAY, AS_OF, false, "r2").await;
    let (rows, open) = p1_after(&before, &r2).await;
    assert_eq!((rows, open), (vec!["AMOUNT_MISMATCH".to_string()], 1));

    let env = job("write_off_limit = { EUR = \"1.00\" }\n").await;
    env.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&env).await;
    let p1 = case_of(&all, "P-1");
    assert_eq!(p1.kind, "near miss");
    let r = decide(&env, "d.xlsx", &[(p1, "accept difference")], "alice").await;
    let row = result(&r, p1);
    assert_eq!(row.status, Status::Applied, "{row:?}");
    // 39.50 - 40.00: the line is 0.50 short.
    assert!(
        row.detail.contains("difference of -0.50 EUR accepted"),
        "{}",
        row.detail
    );
    let shown = show(&env, &p1.key).await;
    assert!(shown.contains("accept difference  APPLIED"), "{shown}");
    // The next night: the pair matches, the payment is resolved on it; no AMOUNT_MISMATCH.
    let r2 = env.run(DAY, AS_OF, false, "r2").await;
    let (rows, open) = p1_after(&env, &r2).await;
    assert_eq!(rows, ["RESOLVED_SUCCEEDED"]);
    assert_eq!(open, 0, "an AMOUNT_MISMATCH ticket is open: {rows:?}");
    let db = env.db().await;
    let states = {
        let mut tx = db.begin().await.expect("tx");
        let s = tx
            .payment_states(&["P-1".to_string()])
            .await
            .expect("states");
        tx.rollback().await.expect("rollback");
        s
    };
    db.close().await;
    assert_eq!(
        states.get("P-1").map(|s| s.status.to_string()).as_deref(),
        Some("SUCCEEDED"),
        "{rows:?}"
    );
}

/// What the job confirmed: (line, payment, accepted difference, actor, approver).
async fn confirmed(env: &TestEnv) -> Vec<(String, String, Option<i64>, String, Option<String>)> {
    let db = env.db().await;
    let mut tx = db.begin().await.expect("tx");
    let c = tx.confirmed_lines(None).await.expect("confirmed");
    tx.rollback().await.expect("rollback");
    db.close().await;
    c.into_iter()
        .map(|c| {
            (
                c.line_id,
                c.payment_id,
                c.accepted_difference_minor,
                c.actor,
                c.approved_by,
            )
        })
        .collect()
}

#[tokio::test]
async fn accept_difference_without_a_limit_or_above_it_without_reviewers_is_refused() {
    for (extra, why) in [
        (
            "write_off_limit = { GBP = \"5.00\" }\n",
            "no write_off_limit for EUR",
        ),
        ("", "no write_off_limit for EUR"),
        // Above the limit it needs a second person, whom typed names cannot tell apart.
        (
            "write_off_limit = { EUR = \"0.49\" }\n",
            "the difference -0.50 EUR is above write_off_limit 0.49 EUR: it needs a second, \
             different reviewer, and this job cannot tell two reviewers apart (no [[reviewer]]",
        ),
    ] {
        let env = job(extra).await;
        env.run(DAY, AS_OF, false, "r1").await;
        let all = cases(&env).await;
        let p1 = case_of(&all, "P-1");
        let r = decide(&env, "d.xlsx", &[(p1, "accept difference")], "alice").await;
        let row = result(&r, p1);
        assert_eq!(row.status, Status::Refused, "{extra}: {row:?}");
        assert!(row.detail.contains(why), "{extra}: {}", row.detail);
        // Nothing confirmed: the next night still has the near miss to decide.
        let confirmed = confirmed(&env).await;
        assert!(confirmed.is_empty(), "{extra}: {confirmed:?}");
    }
}

/// With `[[reviewer]]` and one approval: a difference at the limit applies with one reviewer;
/// one cent above it waits for a second, the same reviewer approving it is refused, another
/// reviewer applies it, `recon cases show` tells the difference and both reviewers, and the
/// next night matches the pair.
#[tokio::test]
async fn accept_difference_above_the_limit_waits_for_a_second_reviewer_under_one_approval() {
    // At the limit (|39.50 - 40.00| = 0.50): alice alone settles it.
    let at = job(&format!(
        "write_off_limit = {{ EUR = \"0.50\" }}\n{REVIEWERS}"
    ))
    .await;
    at.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&at).await;
    let p1 = case_of(&all, "P-1");
    let r = decide(&at, "a.xlsx", &[(p1, "accept difference")], "alice").await;
    let row = result(&r, p1);
    assert_eq!(row.status, Status::Applied, "{row:?}");
    assert!(
        row.detail
            .contains("difference of -0.50 EUR accepted (within write_off_limit 0.50 EUR)"),
        "{}",
        row.detail
    );
    assert_eq!(
        confirmed(&at).await,
        [(
            "L-1".to_string(),
            "P-1".to_string(),
            Some(-50),
            "alice".to_string(),
            None
        )]
    );

    // One cent lower a limit: the same decision waits.
    let env = job(&format!(
        "write_off_limit = {{ EUR = \"0.49\" }}\n{REVIEWERS}"
    ))
    .await;
    env.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&env).await;
    let p1 = case_of(&all, "P-1");
    let first = decide(&env, "a.xlsx", &[(p1, "accept difference")], "alice").await;
    let row = result(&first, p1);
    assert_eq!(row.status, Status::Waiting, "{row:?}");
    assert!(
        row.detail.contains(
            "the difference -0.50 EUR is above write_off_limit 0.49 EUR: waiting for a second \
             reviewer"
        ),
        "{}",
        row.detail
    );
    assert!(
        confirmed(&env).await.is_empty(),
        "a waiting decision confirmed"
    );
    let shown = show(&env, &p1.key).await;
    assert!(
        shown.contains("accept difference  WAITING     alice"),
        "{shown}"
    );
    // The result file says it too.
    let written = first.csv().expect("result file");
    assert!(
        written.contains("above write_off_limit 0.49 EUR: waiting for a second reviewer"),
        "{written}"
    );
    // Alice again (another file): nobody approves their own decision.
    let again = decide(&env, "a2.xlsx", &[(p1, "accept difference")], "alice").await;
    let row = result(&again, p1);
    assert_eq!(row.status, Status::Refused, "{row:?}");
    assert!(
        row.detail.contains("nobody approves their own decision")
            && row.detail.contains("above write_off_limit 0.49 EUR"),
        "{}",
        row.detail
    );
    assert!(confirmed(&env).await.is_empty());
    // Bob approves it: applied, both named.
    let second = decide(&env, "b.xlsx", &[(p1, "accept difference")], "bob").await;
    let row = result(&second, p1);
    assert_eq!(row.status, Status::Applied, "{row:?}");
    assert!(
        row.detail.contains("approved alice's decision")
            && row
                .detail
                .contains("difference of -0.50 EUR accepted (above write_off_limit 0.49 EUR)"),
        "{}",
        row.detail
    );
    assert_eq!(
        confirmed(&env).await,
        [(
            "L-1".to_string(),
            "P-1".to_string(),
            Some(-50),
            "alice".to_string(),
            Some("bob".to_string())
        )]
    );
    // `recon cases show`: the decision approved, and the case's history line telling the
    // difference, the limit and both reviewers.
    let shown = show(&env, &p1.key).await;
    assert!(
        shown.contains("accept difference  APPLIED     alice, approved by bob"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "status by    alice: accept difference of -0.50 EUR (above write_off_limit 0.49 \
             EUR) by alice"
        ) && shown.contains("approved by bob"),
        "{shown}"
    );
    // The next night matches the pair: resolved on the line, no AMOUNT_MISMATCH.
    let r2 = env.run(DAY, AS_OF, false, "r2").await;
    let (rows, open) = p1_after(&env, &r2).await;
    assert_eq!(rows, ["RESOLVED_SUCCEEDED"]);
    assert_eq!(open, 0, "{rows:?}");
}

#[tokio::test]
async fn accept_difference_under_four_eyes_waits_for_a_second_reviewer() {
    let env = job(&format!(
        "approvals = 2\nwrite_off_limit = {{ EUR = \"1.00\" }}\n{REVIEWERS}"
    ))
    .await;
    env.run(DAY, AS_OF, false, "r1").await;
    let all = cases(&env).await;
    let p1 = case_of(&all, "P-1");
    let first = decide(&env, "a.xlsx", &[(p1, "accept difference")], "alice").await;
    assert_eq!(result(&first, p1).status, Status::Waiting, "{first:?}");
    let db = env.db().await;
    let confirmed = {
        let mut tx = db.begin().await.expect("tx");
        let c = tx.confirmed_lines(None).await.expect("confirmed");
        tx.rollback().await.expect("rollback");
        c
    };
    db.close().await;
    assert!(
        confirmed.is_empty(),
        "a waiting decision confirmed {confirmed:?}"
    );
    // Alice again (another file): nobody approves their own decision.
    let again = decide(&env, "a2.xlsx", &[(p1, "accept difference")], "alice").await;
    assert_eq!(result(&again, p1).status, Status::Refused);
    let second = decide(&env, "b.xlsx", &[(p1, "accept difference")], "bob").await;
    let row = result(&second, p1);
    assert_eq!(row.status, Status::Applied, "{row:?}");
    assert!(
        row.detail.contains("approved alice's decision"),
        "{}",
        row.detail
    );
    let r2 = env.run(DAY, AS_OF, false, "r2").await;
    let (rows, open) = p1_after(&env, &r2).await;
    assert!(!rows.iter().any(|o| o == "AMOUNT_MISMATCH"), "{rows:?}");
    assert_eq!(open, 0, "{rows:?}");
}
