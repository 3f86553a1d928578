//! The review queue on BOTH backends: evidence with every candidate and why it qualified,
//! show / resolve / reopen with actor, note and history, resolved tickets that stay resolved on
//! identical re-runs and reopen (with the change recorded) when the evidence changes.

use crate::support::{Backend, Settings, TestEnv};
use recon::tickets::{self, Filter, Ticket};
use serde_json::Value;

const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "NL91ABNA0417164300";
const IBAN_C: &str = "GB33BUKB20201555555555";
const IBAN_D: &str = "FR7630006000011234567890189";
const DAY: &str = "2026-11-10";
const AS_OF: &str = "2026-11-20T00:00:00Z";

/// P-1: a near miss (L-1, 39.50 for 40.00). P-2 / P-3: twins for one line L-2. P-4: named by
/// L-4's reference, but paid to another recipient. L-1's reference is a formula.
fn statement_rows(extra: &str) -> String {
    format!(
        "L-1,=SUM(A1),{IBAN_A},39.50,EUR,2026-11-10T10:00:00Z,PAYMENT\n\
         L-2,,{IBAN_B},25.00,EUR,2026-11-10T12:00:00Z,PAYMENT\n\
         L-4,P-4,{IBAN_C},10.00,EUR,2026-11-10T14:00:00Z,PAYMENT\n{extra}"
    )
}

async fn env_on(b: Backend) -> TestEnv {
    let env = TestEnv::on(b, Settings::default()).await;
    env.import(
        &format!(
            "P-1,{IBAN_A},40.00,EUR,UNKNOWN,2026-11-10T09:00:00Z,2026-11-10T09:00:00Z,A-1,\n\
             P-2,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:00:00Z,2026-11-10T11:00:00Z,A-2,\n\
             P-3,{IBAN_B},25.00,EUR,UNKNOWN,2026-11-10T11:30:00Z,2026-11-10T11:30:00Z,A-3,\n\
             P-4,{IBAN_D},10.00,EUR,UNKNOWN,2026-11-10T13:00:00Z,2026-11-10T13:00:00Z,A-4,\n"
        ),
        "A-1,P-1,2026-11-10T09:00:00Z,,UNKNOWN,,timeout\n\
         A-2,P-2,2026-11-10T11:00:00Z,,UNKNOWN,,timeout\n\
         A-3,P-3,2026-11-10T11:30:00Z,,UNKNOWN,,timeout\n\
         A-4,P-4,2026-11-10T13:00:00Z,,UNKNOWN,,timeout\n",
    )
    .await;
    env.statement(&statement_rows(""));
    env
}

async fn all_tickets(env: &TestEnv) -> Vec<Ticket> {
    let db = env.db().await;
    let list = tickets::list(&db, false).await.expect("list");
    db.close().await;
    list
}

/// The ticket of a payment (`P-1`) or of a line alone (`L-2`), of kind AMBIGUOUS.
async fn ambiguous(env: &TestEnv, id: &str) -> Ticket {
    let list = all_tickets(env).await;
    let found: Vec<Ticket> = list
        .into_iter()
        .filter(|t| t.kind == "AMBIGUOUS")
        .filter(|t| match t.payment_id.as_deref() {
            Some(p) => p == id,
            None => t.line_ids == format!("psp:{id}"),
        })
        .collect();
    assert_eq!(found.len(), 1, "one AMBIGUOUS ticket for {id}: {found:?}");
    found.into_iter().next().expect("one")
}

fn evidence(t: &Ticket) -> Value {
    serde_json::from_str(&t.evidence).expect("evidence is JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_str().expect("text").to_string())
        .collect()
}

fn candidate<'a>(ev: &'a Value, line: &str, payment: &str) -> &'a Value {
    ev["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|c| c["line_id"] == line && c["payment_id"] == payment)
        .unwrap_or_else(|| panic!("candidate {line}/{payment} in {ev:#}"))
}

async fn ambiguous_evidence_lists_every_candidate_and_why(b: Backend) {
    let env = env_on(b).await;
    env.run(DAY, AS_OF, false, "r1").await;
    for t in all_tickets(&env).await {
        for iban in [IBAN_A, IBAN_B, IBAN_C, IBAN_D] {
            assert!(!t.evidence.contains(iban), "full account in {}", t.evidence);
        }
        assert_eq!(t.evidence_sha256.as_deref().map(str::len), Some(64));
    }

    // The near miss: same recipient inside the window, any amount, any currency.
    let p1 = evidence(&ambiguous(&env, "P-1").await);
    assert_eq!(p1["payment"]["recipient"], "****3000");
    assert_eq!(p1["payment"]["amount"], "40.00");
    assert_eq!(p1["candidates"].as_array().map(Vec::len), Some(1), "{p1:#}");
    let c = candidate(&p1, "L-1", "P-1");
    assert_eq!(c["relation"], "near_miss");
    assert_eq!(c["gate"], "near_miss");
    let why = strings(&c["qualified_by"]);
    assert!(why.contains(&"same recipient".to_string()), "{why:?}");
    // The same words as before the gate took any currency: fingerprints stay the same.
    assert!(why.contains(&"same currency EUR".to_string()), "{why:?}");
    assert!(
        why.contains(&"amount 39.50 vs 40.00 (any amount counts)".to_string()),
        "{why:?}"
    );
    assert!(
        why.iter().any(|w| w
            .starts_with("booked 2026-11-10T10:00:00Z inside the window 2026-11-10T08:50:00Z .. ")),
        "{why:?}"
    );
    assert!(strings(&c["differs"]).is_empty());
    // Statement text is neutralised, the line's account masked.
    assert_eq!(p1["lines"][0]["reference"], "'=SUM(A1)");
    assert_eq!(p1["lines"][0]["recipient"], "****3000");

    // Twins: the line is a candidate of both, and each says who competes for it.
    let p2 = evidence(&ambiguous(&env, "P-2").await);
    let c = candidate(&p2, "L-2", "P-2");
    assert_eq!(c["relation"], "candidate");
    assert_eq!(c["gate"], "recipient_amount_window");
    let why = strings(&c["qualified_by"]);
    for w in ["same recipient", "same currency EUR", "amount 25.00 equal"] {
        assert!(why.contains(&w.to_string()), "{w}: {why:?}");
    }
    assert!(
        why.iter().any(|w| w.contains("inside the window")),
        "{why:?}"
    );
    assert_eq!(strings(&c["competing_payments"]), ["P-3"]);

    // The line's own ticket lists both payments, with their details masked.
    let l2 = evidence(&ambiguous(&env, "L-2").await);
    assert!(l2["payment"].is_null());
    let ids: Vec<&str> = l2["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["payment_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["P-2", "P-3"]);
    for p in ["P-2", "P-3"] {
        let c = candidate(&l2, "L-2", p);
        assert!(
            strings(&c["qualified_by"]).contains(&"amount 25.00 equal".to_string()),
            "{c}"
        );
    }
    let others = l2["other_payments"].as_array().expect("other payments");
    assert_eq!(others.len(), 2);
    assert!(
        others.iter().all(|p| p["recipient"] == "****4300"),
        "{l2:#}"
    );

    // Named by reference, paid elsewhere: qualified by the identifier, the recipient differs.
    let p4 = evidence(&ambiguous(&env, "P-4").await);
    let c = candidate(&p4, "L-4", "P-4");
    assert_eq!(c["relation"], "linked");
    assert_eq!(c["gate"], "identifier");
    let why = strings(&c["qualified_by"]);
    assert!(why.contains(&"named by reference".to_string()), "{why:?}");
    assert!(why.contains(&"amount 10.00 equal".to_string()), "{why:?}");
    assert_eq!(strings(&c["differs"]), ["recipient differs"]);
}

async fn show_resolve_reopen_with_actor_note_and_history(b: Backend) {
    let env = env_on(b).await;
    env.run(DAY, AS_OF, false, "r1").await;
    let id = ambiguous(&env, "P-1").await.ticket_id;
    let db = env.db().await;

    let (t, history) = tickets::show(&db, id).await.expect("show");
    assert_eq!(t.status, "OPEN");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].from_status, None);
    assert_eq!(history[0].to_status, "OPEN");
    assert_eq!(history[0].actor, "recon");
    assert_eq!(history[0].run_id.as_deref(), Some("r1"));
    assert_eq!(history[0].new_sha256, t.evidence_sha256);

    tickets::resolve(
        &db,
        id,
        "alice",
        "fee of 0.50 netted, confirmed with the PSP",
    )
    .await
    .expect("resolve");
    let err = tickets::resolve(&db, id, "bob", "again")
        .await
        .expect_err("already resolved");
    assert_eq!(recon::exit::code_for(&err), recon::exit::INPUT);
    assert!(format!("{err:#}").contains("RESOLVED"), "{err:#}");
    let (t, history) = tickets::show(&db, id).await.expect("show");
    assert_eq!(t.status, "RESOLVED");
    assert_eq!(t.resolved_by.as_deref(), Some("alice"));
    assert_eq!(
        t.resolution_note.as_deref(),
        Some("fee of 0.50 netted, confirmed with the PSP")
    );
    assert!(t.resolved_at.is_some());
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].from_status.as_deref(), Some("OPEN"));
    assert_eq!(history[1].to_status, "RESOLVED");
    assert_eq!(history[1].actor, "alice");
    assert_eq!(history[1].run_id, None);

    tickets::reopen(&db, id, "bob", "PSP says the fee was not theirs")
        .await
        .expect("reopen");
    let (t, history) = tickets::show(&db, id).await.expect("show");
    assert_eq!(t.status, "OPEN");
    assert_eq!(t.resolved_by, None);
    assert_eq!(history.len(), 3);
    assert_eq!(history[2].from_status.as_deref(), Some("RESOLVED"));
    assert_eq!(history[2].to_status, "OPEN");
    assert_eq!(history[2].actor, "bob");
    assert_eq!(history[2].note, "PSP says the fee was not theirs");
    let err = tickets::reopen(&db, id, "bob", "twice")
        .await
        .expect_err("already open");
    assert_eq!(recon::exit::code_for(&err), recon::exit::INPUT);

    // The rendering has every field, the evidence and the history, and no full account.
    let text = tickets::render_one(&t, &history);
    for want in [
        "AMBIGUOUS",
        "MEDIUM",
        "P-1",
        "40.00 EUR",
        "\"candidates\"",
        "OPEN → RESOLVED",
        "alice",
        "RESOLVED → OPEN",
        "PSP says the fee was not theirs",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!text.contains(IBAN_A), "{text}");

    let err = tickets::show(&db, 999_999).await.expect_err("unknown id");
    assert_eq!(recon::exit::code_for(&err), recon::exit::INPUT);
    let err = tickets::resolve(&db, 999_999, "alice", "x")
        .await
        .expect_err("unknown id");
    assert_eq!(recon::exit::code_for(&err), recon::exit::INPUT);
    assert!(format!("{err:#}").contains("does not exist"), "{err:#}");
    let err = tickets::resolve(&db, id, " ", "x")
        .await
        .expect_err("no actor");
    assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG);

    // --kind and --open filter.
    let amb = tickets::list_filtered(
        &db,
        &Filter {
            open_only: true,
            kind: Some("AMBIGUOUS".into()),
        },
    )
    .await
    .expect("list");
    assert!(
        amb.iter()
            .all(|t| t.kind == "AMBIGUOUS" && t.status == "OPEN")
    );
    assert!(amb.iter().any(|t| t.ticket_id == id));
    let err = tickets::list_filtered(
        &db,
        &Filter {
            open_only: false,
            kind: Some("MATCHED".into()),
        },
    )
    .await
    .expect_err("not a ticket kind");
    assert_eq!(recon::exit::code_for(&err), recon::exit::CONFIG);
    db.close().await;
}

async fn resolved_stays_resolved_until_the_evidence_changes(b: Backend) {
    let env = env_on(b).await;
    env.run(DAY, AS_OF, false, "r1").await;
    let before = ambiguous(&env, "P-1").await;
    let db = env.db().await;
    tickets::resolve(&db, before.ticket_id, "alice", "fee netted")
        .await
        .expect("resolve");

    // Identical re-run: nothing moves but last_seen.
    let again = env.run(DAY, AS_OF, false, "r2").await;
    assert_eq!(again.summary.tickets.reopened, 0);
    assert_eq!(again.summary.tickets.created, 0);
    let t = ambiguous(&env, "P-1").await;
    assert_eq!(t.status, "RESOLVED");
    assert_eq!(t.last_seen_run_id, "r2");
    assert_eq!(t.evidence_sha256, before.evidence_sha256);
    assert_eq!(
        tickets::show(&db, t.ticket_id).await.expect("show").1.len(),
        2
    );

    // A second look-alike line arrives: the same ticket opens again, with what changed.
    env.statement(&statement_rows(&format!(
        "L-9,,{IBAN_A},39.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n"
    )));
    let changed = env.run(DAY, AS_OF, false, "r3").await;
    assert_eq!(changed.summary.tickets.reopened, 1);
    let t = ambiguous(&env, "P-1").await;
    assert_eq!(
        t.ticket_id, before.ticket_id,
        "the same ticket, not a new one"
    );
    assert_eq!(t.status, "OPEN");
    assert_eq!(t.resolved_by, None);
    assert_eq!(t.line_ids, "psp:L-1;psp:L-9");
    assert_ne!(t.evidence_sha256, before.evidence_sha256);
    let ev = evidence(&t);
    let c = candidate(&ev, "L-9", "P-1");
    assert!(
        strings(&c["qualified_by"]).contains(&"amount 39.00 vs 40.00 (any amount counts)".into())
    );
    let (_, history) = tickets::show(&db, t.ticket_id).await.expect("show");
    assert_eq!(history.len(), 3, "{history:#?}");
    let h = &history[2];
    assert_eq!(h.from_status.as_deref(), Some("RESOLVED"));
    assert_eq!(h.to_status, "OPEN");
    assert_eq!(h.actor, "recon");
    assert_eq!(h.run_id.as_deref(), Some("r3"));
    assert_eq!(h.old_sha256, before.evidence_sha256);
    assert_eq!(h.new_sha256, t.evidence_sha256);
    assert_eq!(
        h.note, "reopened: the evidence changed: candidate L-9 added",
        "{h:#?}"
    );

    // Resolved again and re-run with the same statement: it stays resolved.
    tickets::resolve(&db, t.ticket_id, "alice", "both lines are fees")
        .await
        .expect("resolve");
    let same = env.run(DAY, AS_OF, false, "r4").await;
    assert_eq!(same.summary.tickets.reopened, 0);
    assert_eq!(ambiguous(&env, "P-1").await.status, "RESOLVED");

    // The amount of a candidate changes: reopened again, the amount named.
    env.statement(&statement_rows(&format!(
        "L-9,,{IBAN_A},38.00,EUR,2026-11-10T11:00:00Z,PAYMENT\n"
    )));
    env.run(DAY, AS_OF, false, "r5").await;
    let (t, history) = tickets::show(&db, t.ticket_id).await.expect("show");
    assert_eq!(t.status, "OPEN");
    let note = &history.last().expect("history").note;
    assert!(note.contains("line L-9: amount 39.00 → 38.00"), "{note}");
    db.close().await;
}

/// The CLI: `tickets show` prints the evidence and history; an unknown id exits with INPUT,
/// an unknown kind with CONFIG.
#[tokio::test]
async fn the_cli_shows_a_ticket_and_says_when_the_id_is_unknown() {
    let env = env_on(Backend::Sqlite).await;
    env.run(DAY, AS_OF, false, "r1").await;
    let id = ambiguous(&env, "P-1").await.ticket_id.to_string();
    let recon = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_recon"))
            .args(args)
            .arg("--config")
            .arg(&env.config_path)
            .env_remove("RECON_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .output()
            .expect("recon runs")
    };
    let out = recon(&[
        "tickets", "resolve", &id, "--actor", "alice", "--note", "ok",
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = recon(&["tickets", "show", &id]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "AMBIGUOUS",
        "near_miss",
        "****3000",
        "OPEN → RESOLVED",
        "alice: ok",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!text.contains(IBAN_A), "{text}");
    let out = recon(&["tickets", "list", "--kind", "AMBIGUOUS", "--open"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("P-2") && !text.contains("  P-1  "), "{text}");
    let out = recon(&["tickets", "show", "424242"]);
    assert_eq!(out.status.code(), Some(recon::exit::INPUT), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("424242"));
    let out = recon(&["tickets", "list", "--kind", "NOPE"]);
    assert_eq!(out.status.code(), Some(recon::exit::CONFIG), "{out:?}");
    let out = recon(&["tickets", "reopen", &id, "--actor", "bob", "--note", "no"]);
    assert!(out.status.success(), "{out:?}");
}

/// Replaying an older view (the same day with the earlier as-of of its nightly run) sees less
/// than a later run did. Its different evidence must neither overwrite the newer evidence nor
/// reopen a ticket a human resolved on it.
async fn an_older_view_never_reopens_or_overwrites_newer_evidence(b: Backend) {
    let env = env_on(b).await;
    // L-9 is booked on the 12th, inside P-1's window: known only to runs as of later.
    env.statement(&statement_rows(&format!(
        "L-9,,{IBAN_A},39.00,EUR,2026-11-12T10:00:00Z,PAYMENT\n"
    )));
    let early = "2026-11-12T00:00:00Z";
    env.run(DAY, early, false, "nightly").await;
    let first = ambiguous(&env, "P-1").await;
    assert_eq!(first.line_ids, "psp:L-1");
    env.run(DAY, AS_OF, false, "later").await;
    let newer = ambiguous(&env, "P-1").await;
    assert_eq!(newer.ticket_id, first.ticket_id);
    assert_eq!(newer.line_ids, "psp:L-1;psp:L-9", "the later view adds L-9");
    let db = env.db().await;
    tickets::resolve(&db, newer.ticket_id, "alice", "both are fees")
        .await
        .expect("resolve");
    // Replaying the nightly view: no reopen, the newer evidence stays.
    let replay = env.run(DAY, early, false, "replay").await;
    assert_eq!(replay.summary.tickets.reopened, 0);
    let t = ambiguous(&env, "P-1").await;
    assert_eq!(t.status, "RESOLVED");
    assert_eq!(t.evidence_sha256, newer.evidence_sha256);
    assert_eq!(t.line_ids, "psp:L-1;psp:L-9");
    assert_eq!(t.last_seen_run_id, "replay");
    // The later view again: the same evidence, still resolved.
    let again = env.run(DAY, AS_OF, false, "later-again").await;
    assert_eq!(again.summary.tickets.reopened, 0);
    assert_eq!(ambiguous(&env, "P-1").await.status, "RESOLVED");
    db.close().await;
}

on_both_backends!(
    ambiguous_evidence_lists_every_candidate_and_why,
    show_resolve_reopen_with_actor_note_and_history,
    resolved_stays_resolved_until_the_evidence_changes,
    an_older_view_never_reopens_or_overwrites_newer_evidence,
);
