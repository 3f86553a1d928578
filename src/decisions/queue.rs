//! `recon cases list|show`: the cases as the latest committed run stored them, and what
//! reviewers decided, for the terminal.

use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::report::text_safe;
use crate::store::cases::{DecisionRecord, StoredCase};
use anyhow::Result;
use std::fmt::Write as _;

/// Cases, most severe first; only those waiting for a decision with `open_only`.
pub async fn list(db: &Db, open_only: bool) -> Result<Vec<StoredCase>> {
    let mut tx = db.begin().await?;
    let cases = tx.list_cases(open_only).await?;
    tx.rollback().await?;
    Ok(cases)
}

/// One case and its decisions. An unknown key is an input error.
pub async fn show(db: &Db, key: &str) -> Result<(StoredCase, Vec<DecisionRecord>)> {
    let mut tx = db.begin().await?;
    let case = tx.get_case(key).await?;
    let decisions = tx.case_decisions(key).await?;
    tx.rollback().await?;
    match case {
        Some(c) => Ok((c, decisions)),
        None => Err(fail(
            Failure::Input,
            format!("case {key} does not exist (hint: recon cases list)"),
        )),
    }
}

/// The cases as a table. Every value is shown by the terminal rule
/// ([`crate::textsafe::terminal`]): a control, invisible or direction character from a
/// provider's id or a reviewer's note shows as `<U+XXXX>`.
pub fn render(cases: &[StoredCase]) -> String {
    let mut s = String::new();
    if cases.is_empty() {
        s.push_str("no cases\n");
        return s;
    }
    // One line a case: the fixed columns first, then what and whose, and why. With a
    // reporting currency, the value the cases are ordered by after the amount.
    let valued: Option<&str> = cases
        .iter()
        .find_map(|c| c.value.as_ref().map(|(_, cur)| cur.as_str()));
    let value_header = valued
        .map(|cur| format!("  {:>22}", format!("value ({cur}, for ordering)")))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{:<18}  {:<8}  {:<9}  {:>16}{value_header}  what and whose — why",
        "case", "severity", "status", "at risk"
    );
    for c in cases {
        let value = match (valued, &c.value) {
            (None, _) => String::new(),
            (Some(_), Some((micros, cur))) => {
                format!("  {:>22}", text_safe(&value_text(*micros, cur)))
            }
            (Some(_), None) => format!("  {:>22}", "no rate"),
        };
        let _ = writeln!(
            s,
            "{:<18}  {:<8}  {:<9}  {:>16}{value}  {} — {}",
            text_safe(&c.key),
            text_safe(&c.severity),
            text_safe(&c.status),
            text_safe(&c.at_risk),
            text_safe(&c.what),
            text_safe(&c.why)
        );
    }
    s
}

/// A stored value (millionths of a unit) as people read it: `3,069.17 EUR`.
fn value_text(micros: i64, currency: &str) -> String {
    let d = rust_decimal::Decimal::new(micros, crate::rates::VALUE_DECIMALS);
    format!(
        "{} {currency}",
        crate::report::cases::display_value(d, currency)
    )
}

/// One case with its candidates, tickets, decisions and where they left it, every value by
/// the terminal rule (as [`render`]).
pub fn render_one(c: &StoredCase, decisions: &[DecisionRecord]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "case {}  {}  {}  {}",
        text_safe(&c.key),
        text_safe(&c.severity),
        text_safe(&c.status),
        text_safe(&c.what)
    );
    let field = |s: &mut String, name: &str, value: &str| {
        let _ = writeln!(s, "  {name:<12} {}", text_safe(value));
    };
    field(&mut s, "kind", &c.kind);
    field(&mut s, "why", &c.why);
    field(&mut s, "at risk", &c.at_risk);
    let payments: Vec<String> = c
        .payments
        .iter()
        .map(|p| {
            format!(
                "{} ({}, attempt {})",
                p.payment_id,
                p.status,
                p.attempt_id.as_deref().unwrap_or("-")
            )
        })
        .collect();
    field(
        &mut s,
        "payments",
        &if payments.is_empty() {
            "-".into()
        } else {
            payments.join(", ")
        },
    );
    let tickets: Vec<String> = c.ticket_ids.iter().map(i64::to_string).collect();
    field(
        &mut s,
        "tickets",
        &format!("{} (recon tickets show ID)", tickets.join(", ")),
    );
    field(
        &mut s,
        "seen",
        &format!(
            "first by run {}, last by run {}",
            c.first_seen_run_id, c.last_seen_run_id
        ),
    );
    field(&mut s, "fingerprint", &c.fingerprint);
    if let (Some(by), false) = (&c.status_by, c.status == "OPEN") {
        field(
            &mut s,
            "status by",
            &format!("{by}: {}", c.status_note.as_deref().unwrap_or("")),
        );
    }
    let offered: Vec<String> = super::check::offered(c).iter().map(|d| d.text()).collect();
    field(&mut s, "offered", &offered.join(", "));
    let _ = writeln!(s, "candidates:");
    if c.candidates.is_empty() {
        let _ = writeln!(s, "  -");
    }
    for k in &c.candidates {
        let _ = writeln!(
            s,
            "  {}  (line of {})",
            text_safe(&k.text),
            text_safe(&k.source)
        );
    }
    let _ = writeln!(s, "decisions:");
    if decisions.is_empty() {
        let _ = writeln!(s, "  -");
    }
    for d in decisions {
        let approved = d
            .approved_by
            .as_deref()
            .map(|a| format!(", approved by {}", text_safe(a)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {}  {:<10}  {:<10}  {}{approved}: {}",
            d.decided_at,
            text_safe(&d.decision),
            text_safe(&d.state),
            text_safe(&d.actor),
            text_safe(&d.note)
        );
    }
    s
}
