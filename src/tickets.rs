//! The REVIEW queue: tickets keyed by a stable dedupe key, so re-runs never duplicate them. A
//! ticket a human resolved stays resolved while its evidence stays the same (same fingerprint);
//! when the evidence changes, the next run opens it again and records what changed. Every
//! status change is appended to the ticket's history.

use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::model::Outcome;
use anyhow::Result;

/// A ticket a run wants to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTicket {
    /// See [`dedupe_key`] — stable across runs.
    pub dedupe_key: String,
    /// Outcome name.
    pub kind: String,
    /// Severity name.
    pub severity: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// Line uids joined by `;`.
    pub line_ids: String,
    /// Amount at risk, minor units.
    pub amount_minor: Option<i64>,
    /// Its currency.
    pub currency: Option<String>,
    /// JSON evidence (masked; no full account numbers).
    pub evidence: String,
    /// sha256 of the evidence's canonical form ([`crate::evidence::fingerprint`]).
    pub evidence_sha256: String,
    /// Which run's view the evidence is (`YYYY-MM-DD|<as-of µs, 20 digits>`, compared as
    /// text): evidence from an older view never replaces a newer one.
    pub evidence_as_of: String,
}

/// The stable key of a ticket: `OUTCOME|payment_id|` for a payment's ticket (its lines are
/// evidence: a new candidate line changes the evidence, not the ticket), `OUTCOME||lines` for a
/// ticket about a statement line alone.
pub fn dedupe_key(kind: &str, payment_id: Option<&str>, line_ids: &str) -> String {
    match payment_id {
        Some(p) => format!("{kind}|{p}|"),
        None => format!("{kind}||{line_ids}"),
    }
}

/// What an upsert did to a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// A new OPEN ticket.
    Created,
    /// It existed with the same evidence (open or resolved); only `last_seen_run_id` moved.
    Existing,
    /// It was open and its evidence changed: the new evidence is stored, the change recorded.
    Updated,
    /// It was resolved and its evidence changed: it is OPEN again, the change recorded.
    Reopened,
}

/// A stored ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// Id.
    pub ticket_id: i64,
    /// Outcome name.
    pub kind: String,
    /// Severity.
    pub severity: String,
    /// OPEN or RESOLVED.
    pub status: String,
    /// Payment.
    pub payment_id: Option<String>,
    /// Lines.
    pub line_ids: String,
    /// Amount, minor units.
    pub amount_minor: Option<i64>,
    /// Currency.
    pub currency: Option<String>,
    /// Evidence JSON.
    pub evidence: String,
    /// sha256 of the evidence's canonical form (None for tickets from before it was kept).
    pub evidence_sha256: Option<String>,
    /// Run that created it.
    pub created_run_id: String,
    /// Last run that saw it.
    pub last_seen_run_id: String,
    /// When it was created (`2026-11-28T10:15:00Z`).
    pub created_at: String,
    /// When it was resolved, while RESOLVED.
    pub resolved_at: Option<String>,
    /// Who resolved it, while RESOLVED.
    pub resolved_by: Option<String>,
    /// Resolution note, while RESOLVED.
    pub resolution_note: Option<String>,
}

/// One row of a ticket's append-only history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Status before (None: the ticket was created).
    pub from_status: Option<String>,
    /// Status after.
    pub to_status: String,
    /// A person, or `recon` for what runs do.
    pub actor: String,
    /// The run, for what runs do.
    pub run_id: Option<String>,
    /// The person's note, or what changed in the evidence.
    pub note: String,
    /// Evidence fingerprint before an automatic change.
    pub old_sha256: Option<String>,
    /// Evidence fingerprint after.
    pub new_sha256: Option<String>,
    /// When (`2026-11-28T10:15:00Z`).
    pub changed_at: String,
}

/// Which tickets to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only OPEN tickets.
    pub open_only: bool,
    /// Only this outcome.
    pub kind: Option<String>,
}

/// Lists tickets, most severe first, then oldest first.
pub async fn list(db: &Db, open_only: bool) -> Result<Vec<Ticket>> {
    list_filtered(
        db,
        &Filter {
            open_only,
            kind: None,
        },
    )
    .await
}

/// Lists the tickets `filter` selects, most severe first, then oldest first. An unknown kind
/// is an argument error.
pub async fn list_filtered(db: &Db, filter: &Filter) -> Result<Vec<Ticket>> {
    if let Some(k) = &filter.kind
        && Outcome::parse(k)
            .and_then(Outcome::ticket_severity)
            .is_none()
    {
        let kinds: Vec<&str> = Outcome::ALL
            .into_iter()
            .filter(|o| o.ticket_severity().is_some())
            .map(Outcome::as_str)
            .collect();
        return Err(fail(
            Failure::Config,
            format!(
                "--kind {k:?} is not a ticket kind (hint: one of {})",
                kinds.join(", ")
            ),
        ));
    }
    let mut tx = db.begin().await?;
    let list = tx
        .list_tickets(filter.open_only, filter.kind.as_deref())
        .await?;
    tx.rollback().await?;
    Ok(list)
}

/// A ticket and its history, oldest first. An unknown id is an input error.
pub async fn show(db: &Db, ticket_id: i64) -> Result<(Ticket, Vec<HistoryEntry>)> {
    let mut tx = db.begin().await?;
    let ticket = tx.get_ticket(ticket_id).await?;
    let history = tx.ticket_history(ticket_id).await?;
    tx.rollback().await?;
    match ticket {
        Some(t) => Ok((t, history)),
        None => Err(no_such(ticket_id)),
    }
}

fn no_such(ticket_id: i64) -> anyhow::Error {
    fail(
        Failure::Input,
        format!("ticket {ticket_id} does not exist (hint: recon tickets list)"),
    )
}

/// Moves ticket `ticket_id` from `from` to `to` with the actor's note, and records it.
async fn change(
    db: &Db,
    ticket_id: i64,
    (from, to): (&str, &str),
    actor: &str,
    note: &str,
) -> Result<()> {
    for (what, value) in [("--actor", actor), ("--note", note)] {
        if value.trim().is_empty() {
            return Err(fail(
                Failure::Config,
                format!("{what} must not be empty: say who and why"),
            ));
        }
    }
    let now = crate::timeparse::to_db(chrono::Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    if !tx
        .change_ticket_status(ticket_id, from, to, actor, note, &now)
        .await?
    {
        let status = tx.get_ticket(ticket_id).await?.map(|t| t.status);
        tx.rollback().await?;
        return Err(match status {
            None => no_such(ticket_id),
            Some(s) => fail(
                Failure::Input,
                format!("ticket {ticket_id} is {s}, not {from}: nothing changed"),
            ),
        });
    }
    tx.commit().await
}

/// Resolves an open ticket with a note and the actor's name. Later runs keep it resolved
/// unless its evidence changes.
pub async fn resolve(db: &Db, ticket_id: i64, actor: &str, note: &str) -> Result<()> {
    change(db, ticket_id, ("OPEN", "RESOLVED"), actor, note).await
}

/// Opens a resolved ticket again, with a note and the actor's name.
pub async fn reopen(db: &Db, ticket_id: i64, actor: &str, note: &str) -> Result<()> {
    change(db, ticket_id, ("RESOLVED", "OPEN"), actor, note).await
}

fn amount_text(t: &Ticket) -> String {
    match (t.amount_minor, &t.currency) {
        (Some(a), Some(c)) => format!("{} {c}", crate::money::format_minor(a, c)),
        _ => String::new(),
    }
}

/// Renders one ticket with its evidence (pretty JSON) and history for the terminal.
pub fn render_one(t: &Ticket, history: &[HistoryEntry]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ticket {}  {}  {}  {}",
        t.ticket_id, t.kind, t.severity, t.status
    );
    let field = |s: &mut String, name: &str, value: &str| {
        let _ = writeln!(s, "  {name:<10} {value}");
    };
    field(&mut s, "payment", t.payment_id.as_deref().unwrap_or("-"));
    field(
        &mut s,
        "lines",
        if t.line_ids.is_empty() {
            "-"
        } else {
            &t.line_ids
        },
    );
    let amount = amount_text(t);
    field(
        &mut s,
        "amount",
        if amount.is_empty() { "-" } else { &amount },
    );
    field(
        &mut s,
        "created",
        &format!("{} by run {}", t.created_at, t.created_run_id),
    );
    field(&mut s, "last seen", &format!("run {}", t.last_seen_run_id));
    if t.status == "RESOLVED" {
        field(
            &mut s,
            "resolved",
            &format!(
                "{} by {}: {}",
                t.resolved_at.as_deref().unwrap_or("?"),
                t.resolved_by.as_deref().unwrap_or("?"),
                t.resolution_note.as_deref().unwrap_or("")
            ),
        );
    }
    field(
        &mut s,
        "sha256",
        t.evidence_sha256
            .as_deref()
            .unwrap_or("- (not computed yet)"),
    );
    let _ = writeln!(s, "evidence:");
    let pretty = serde_json::from_str::<serde_json::Value>(&t.evidence)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| t.evidence.clone());
    for line in pretty.lines() {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(s, "history:");
    for h in history {
        let change = match &h.from_status {
            None => format!("created {}", h.to_status),
            Some(f) => format!("{f} → {}", h.to_status),
        };
        let run = h
            .run_id
            .as_deref()
            .map(|r| format!(" (run {r})"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {}  {change:<20}  {}{run}: {}",
            h.changed_at, h.actor, h.note
        );
        if let (Some(a), Some(b)) = (&h.old_sha256, &h.new_sha256) {
            let _ = writeln!(s, "  {:27} evidence sha256 {a} → {b}", "");
        }
    }
    s
}

/// Renders tickets as a fixed-width table for the terminal.
pub fn render(tickets: &[Ticket]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if tickets.is_empty() {
        s.push_str("no tickets\n");
        return s;
    }
    let _ = writeln!(
        s,
        "{:>6}  {:<8}  {:<8}  {:<22}  {:<14}  {:>14}  lines",
        "id", "severity", "status", "kind", "payment", "amount"
    );
    for t in tickets {
        let amount = amount_text(t);
        let _ = writeln!(
            s,
            "{:>6}  {:<8}  {:<8}  {:<22}  {:<14}  {:>14}  {}",
            t.ticket_id,
            t.severity,
            t.status,
            t.kind,
            t.payment_id.as_deref().unwrap_or("-"),
            amount,
            t.line_ids
        );
    }
    s
}
