//! The morning's markers (issue 42 point 2): the email says, beside each case, what changed
//! since yesterday — new, reopened, escalated (with the note), waiting for your approval, and
//! created by yesterday's decisions — and counts them on its first screen.
//!
//! Night 1 lists five cases, all new. Reviewers then escalate one (with a note), dismiss two,
//! and confirm two look-alikes: one waits for a second reviewer, the other is approved. Night 2
//! (a re-run as of later, with one dismissed line delivered corrected and one new line) must
//! mark each case for what happened to it, and nothing else.

use crate::decisions::REVIEWERS;
use crate::support::{Settings, TestEnv, write_decide_file};
use recon::decisions::result::{FileResult, Status};
use recon::store::cases::StoredCase;
use std::collections::BTreeMap;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "DE02120300000000202051";
const IBAN_D: &str = "FR7630006000011234567890189";
const IBAN_E: &str = "BE68539007547034";
const IBAN_F: &str = "AT611904300234573201";
const IBAN_G: &str = "GB33BUKB20201555555555";
const DAY: &str = "2026-11-10";

/// P-1 (40.00, UNKNOWN) and its netted look-alike L-1 (39.50): a near miss. P-2 / P-3: twins
/// for one line L-2. L-7, L-8, L-9: lines no payment of ours can be. `night2` adds L-10 and
/// delivers L-9 corrected (331.00 instead of 330.00).
fn statement(night2: bool) -> String {
    let l9 = if night2 { "331.00" } else { "330.00" };
    let mut s = format!(
        "L-1,,{IBAN_A},39.50,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-2,,{IBAN_B},25.00,EUR,2026-11-10T12:00:00Z,PAYMENT\n\
         L-7,,{IBAN_D},310.00,EUR,2026-11-10T16:00:00Z,PAYMENT\n\
         L-8,,{IBAN_E},320.00,EUR,2026-11-10T16:10:00Z,PAYMENT\n\
         L-9,,{IBAN_F},{l9},EUR,2026-11-10T16:20:00Z,PAYMENT\n"
    );
    if night2 {
        s.push_str(&format!(
            "L-10,,{IBAN_G},340.00,EUR,2026-11-10T16:30:00Z,PAYMENT\n"
        ));
    }
    s
}

async fn job() -> TestEnv {
    let env = TestEnv::with(Settings {
        extra: format!(
            "approvals = 2\n{REVIEWERS}\n{}",
            crate::report::file_email()
        ),
        ..Settings::default()
    });
    env.import(
        &format!(
            "P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-2,\n\
             P-3,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:30:00Z,2026-11-10T11:30:00Z,A-3,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:30:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&statement(false));
    env
}

/// The stored case that names `id` (a payment, or a line alone).
async fn case_of(env: &TestEnv, id: &str) -> StoredCase {
    let db = env.db().await;
    let list = recon::decisions::queue::list(&db, true)
        .await
        .expect("cases");
    db.close().await;
    let found: Vec<StoredCase> = list
        .into_iter()
        .filter(|c| {
            c.payments.iter().any(|p| p.payment_id == id) || c.lines.iter().any(|(_, l)| l == id)
        })
        .collect();
    assert_eq!(found.len(), 1, "{id}: {found:#?}");
    found.into_iter().next().expect("one")
}

async fn decide(env: &TestEnv, name: &str, rows: &[(&StoredCase, &str)], note: &str, actor: &str) {
    let file = env.path(name);
    let rows: Vec<(String, String, String)> = rows
        .iter()
        .map(|(c, d)| (c.key.clone(), c.fingerprint.clone(), d.to_string()))
        .collect();
    write_decide_file(&file, &rows, note);
    let db = env.db().await;
    let r: FileResult = recon::decisions::apply_file(&db, &env.config().decisions, &file, actor)
        .await
        .expect("apply");
    db.close().await;
    for row in &r.rows {
        assert!(
            matches!(row.status, Status::Applied | Status::Waiting),
            "{name}: {row:?}"
        );
    }
}

/// The email's plain-text case blocks by case key: each block from its badges (`[NEW]`) to the
/// blank line after it.
fn blocks(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let block = block.trim_start_matches('\n');
        let numbered = block.lines().any(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        });
        if !numbered {
            continue;
        }
        if let Some(key) = block
            .split("case C-")
            .nth(1)
            .map(|k| format!("C-{}", &k[..16]))
        {
            out.insert(key, block.to_string());
        }
    }
    out
}

#[tokio::test]
async fn each_case_says_what_changed_since_yesterday() {
    let env = job().await;
    let r1 = env.run(DAY, "2026-11-20T00:00:00Z", false, "r1").await;
    let text = crate::report::email_body(&r1.out_dir, "text/plain").replace("\r\n", "\n");
    let first = blocks(&text);
    assert_eq!(first.len(), 5, "{text}");
    for (key, b) in &first {
        assert!(b.starts_with("[NEW]\n"), "{key} is new on night 1: {b}");
    }
    assert!(text.contains("Since yesterday: 5 new\n"), "{text}");

    let near = case_of(&env, "P-1").await;
    let twins = case_of(&env, "P-2").await;
    let (l7, l8, l9) = (
        case_of(&env, "L-7").await,
        case_of(&env, "L-8").await,
        case_of(&env, "L-9").await,
    );
    decide(
        &env,
        "esc.xlsx",
        &[(&l7, "escalate")],
        "ask treasury",
        "alice",
    )
    .await;
    decide(
        &env,
        "d.xlsx",
        &[
            (&l8, "dismiss: written off"),
            (&l9, "dismiss: refund requested"),
            (&twins, "confirm 1"),
            (&near, "confirm 1"),
        ],
        "checked",
        "alice",
    )
    .await;
    // bob approves the near miss's confirmation only: the twins' waits.
    decide(&env, "ok.xlsx", &[(&near, "confirm 1")], "agree", "bob").await;

    env.statement(&statement(true));
    let r2 = env.run(DAY, "2026-11-21T00:00:00Z", false, "r2").await;
    let text = crate::report::email_body(&r2.out_dir, "text/plain").replace("\r\n", "\n");
    let second = blocks(&text);
    let block = |key: &str| {
        second
            .get(key)
            .unwrap_or_else(|| panic!("{key} not listed: {text}"))
            .clone()
    };
    let badges = |b: &str| b.lines().next().unwrap_or("").to_string();

    // Escalated, with alice's note; not new.
    let b = block(&l7.key);
    assert!(b.starts_with("[ESCALATED]\n"), "{b}");
    assert!(b.contains("escalated by alice: \"ask treasury\""), "{b}");
    // Dismissed on the evidence it still has: not listed at all.
    assert!(!second.contains_key(&l8.key), "{text}");
    // Dismissed, then delivered corrected: reopened, saying who had settled it.
    let b = block(&l9.key);
    assert!(b.starts_with("[REOPENED]\n"), "{b}");
    assert!(b.contains("alice settled it on other evidence"), "{b}");
    // alice's confirmation of one twin waits for a second reviewer.
    let b = block(&twins.key);
    assert!(b.starts_with("[WAITING FOR YOUR APPROVAL]\n"), "{b}");
    assert!(
        b.contains("alice decided \"confirm 1\"; a second reviewer must approve it"),
        "{b}"
    );
    // The approved confirmation names P-1 with a line 0.50 short: the case is open again,
    // on evidence that decision made (not "reopened" as if the provider had changed it).
    let b = block(&near.key);
    assert_eq!(badges(&b), "[AFTER A DECISION]", "{b}");
    assert!(b.contains("Paid a different amount"), "{b}");
    assert!(
        b.contains(&format!(
            "follows alice's \"confirm 1\" on case {}",
            near.key
        )),
        "{b}"
    );
    // The new line: new, and nothing else.
    let (_, b) = second
        .iter()
        .find(|(_, b)| b.contains("line L-10"))
        .unwrap_or_else(|| panic!("L-10 not listed: {text}"));
    assert_eq!(badges(b), "[NEW]", "{b}");
    assert_eq!(second.len(), 5, "{text}");
    // The first screen counts them.
    assert!(
        text.contains(
            "Since yesterday: 1 new · 1 reopened · 1 escalated · 1 waiting for your approval · \
             1 after yesterday's decisions\n"
        ),
        "{text}"
    );
    // The HTML part says the same beside the same cases.
    let html = crate::report::email_body(&r2.out_dir, "text/html");
    for badge in [
        "ESCALATED",
        "REOPENED",
        "WAITING FOR YOUR APPROVAL",
        "AFTER A DECISION",
    ] {
        assert_eq!(
            html.matches(&format!(">{badge}</b>")).count(),
            1,
            "{badge}: {html}"
        );
    }
}
