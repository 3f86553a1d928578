//! The REVIEW queue: tickets keyed by a stable dedupe key, so re-runs never duplicate them and
//! a ticket a human resolved stays resolved.

use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::store::Tx;
use anyhow::Result;

/// A ticket a run wants to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTicket {
    /// `OUTCOME|payment_id|line uids joined by ;` — stable across runs.
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
}

/// The stable key of a ticket.
pub fn dedupe_key(kind: &str, payment_id: Option<&str>, line_ids: &str) -> String {
    format!("{kind}|{}|{line_ids}", payment_id.unwrap_or(""))
}

/// Whether an upsert created a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// A new OPEN ticket.
    Created,
    /// It existed (open or resolved); only `last_seen_run_id` moved.
    Existing,
}

/// Creates the ticket or marks the existing one as seen by `run_id`.
pub async fn upsert(tx: &mut Tx, t: &NewTicket, run_id: &str, now: &str) -> Result<Upserted> {
    let r = tx
        .upsert_tickets(std::slice::from_ref(t), run_id, now)
        .await?;
    Ok(r.first().copied().unwrap_or(Upserted::Existing))
}

/// A ticket as listed.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
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
    /// Run that created it.
    pub created_run_id: String,
    /// Last run that saw it.
    pub last_seen_run_id: String,
    /// Who resolved it.
    pub resolved_by: Option<String>,
    /// Resolution note.
    pub resolution_note: Option<String>,
}

/// Lists tickets, most severe first, then oldest first.
pub async fn list(db: &Db, open_only: bool) -> Result<Vec<Ticket>> {
    let mut tx = db.begin().await?;
    let list = tx.list_tickets(open_only).await?;
    tx.rollback().await?;
    Ok(list)
}

/// Resolves an open ticket with a note and the actor's name.
pub async fn resolve(db: &Db, ticket_id: i64, actor: &str, note: &str) -> Result<()> {
    let now = crate::timeparse::to_db(chrono::Utc::now().timestamp_micros());
    let mut tx = db.begin().await?;
    if !tx.resolve_ticket(ticket_id, actor, note, &now).await? {
        return Err(fail(
            Failure::Input,
            format!("ticket {ticket_id} does not exist or is not open"),
        ));
    }
    tx.commit().await
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
        let amount = match (t.amount_minor, &t.currency) {
            (Some(a), Some(c)) => format!("{} {c}", crate::money::format_minor(a, c)),
            _ => String::new(),
        };
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
