//! The REVIEW queue: tickets keyed by a stable dedupe key, so re-runs never duplicate them and
//! a ticket a human resolved stays resolved.

use crate::exit::{Failure, fail};
use anyhow::Result;
use sqlx::{SqliteConnection, SqlitePool};

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

fn db_err(e: sqlx::Error) -> anyhow::Error {
    fail(Failure::Database, format!("review tickets: {e}"))
}

/// Creates the ticket or marks the existing one as seen by `run_id`.
pub async fn upsert(
    conn: &mut SqliteConnection,
    t: &NewTicket,
    run_id: &str,
    now: &str,
) -> Result<Upserted> {
    let r = upsert_batch(conn, std::slice::from_ref(t), run_id, now).await?;
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
pub async fn list(pool: &SqlitePool, open_only: bool) -> Result<Vec<Ticket>> {
    let sql = "SELECT ticket_id, kind, severity, status, payment_id, line_ids, amount_minor, currency,
                      evidence, created_run_id, last_seen_run_id, resolved_by, resolution_note
               FROM review_tickets
               WHERE (?1 = 0 OR status = 'OPEN')
               ORDER BY CASE severity WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END,
                        ticket_id";
    sqlx::query_as::<_, Ticket>(sql)
        .bind(i64::from(open_only))
        .fetch_all(pool)
        .await
        .map_err(db_err)
}

/// Resolves an open ticket with a note and the actor's name.
pub async fn resolve(pool: &SqlitePool, ticket_id: i64, actor: &str, note: &str) -> Result<()> {
    let now = crate::timeparse::to_db(chrono::Utc::now().timestamp_micros());
    let n = sqlx::query(
        "UPDATE review_tickets SET status = 'RESOLVED', resolved_at = ?1, resolved_by = ?2, resolution_note = ?3
         WHERE ticket_id = ?4 AND status = 'OPEN'",
    )
    .bind(&now)
    .bind(actor)
    .bind(note)
    .bind(ticket_id)
    .execute(pool)
    .await
    .map_err(db_err)?
    .rows_affected();
    if n == 0 {
        return Err(fail(
            Failure::Input,
            format!("ticket {ticket_id} does not exist or is not open"),
        ));
    }
    Ok(())
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

/// [`upsert`] for many tickets with one multi-row insert and one update per batch. Returns
/// one result per input, in order. Keys must be unique within `tickets`.
pub async fn upsert_batch(
    conn: &mut SqliteConnection,
    tickets: &[NewTicket],
    run_id: &str,
    now: &str,
) -> Result<Vec<Upserted>> {
    use sqlx::{QueryBuilder, Sqlite};
    use std::collections::HashSet;
    let mut out = Vec::with_capacity(tickets.len());
    for chunk in tickets.chunks(500) {
        let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(
            "INSERT INTO review_tickets (dedupe_key, kind, severity, payment_id, line_ids, amount_minor, \
             currency, evidence, status, created_run_id, last_seen_run_id, created_at) ",
        );
        q.push_values(chunk, |mut b, t| {
            b.push_bind(&t.dedupe_key)
                .push_bind(&t.kind)
                .push_bind(&t.severity)
                .push_bind(&t.payment_id)
                .push_bind(&t.line_ids)
                .push_bind(t.amount_minor)
                .push_bind(&t.currency)
                .push_bind(&t.evidence)
                .push_bind("OPEN")
                .push_bind(run_id)
                .push_bind(run_id)
                .push_bind(now);
        });
        q.push(" ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key");
        let created: Vec<(String,)> = q
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        let created: HashSet<String> = created.into_iter().map(|(k,)| k).collect();
        let existing: Vec<&NewTicket> = chunk
            .iter()
            .filter(|t| !created.contains(&t.dedupe_key))
            .collect();
        if !existing.is_empty() {
            let mut u: QueryBuilder<Sqlite> =
                QueryBuilder::new("UPDATE review_tickets SET last_seen_run_id = ");
            u.push_bind(run_id);
            u.push(" WHERE dedupe_key IN (");
            let mut sep = u.separated(", ");
            for t in &existing {
                sep.push_bind(&t.dedupe_key);
            }
            u.push(")");
            u.build().execute(&mut *conn).await.map_err(db_err)?;
        }
        out.extend(chunk.iter().map(|t| {
            if created.contains(&t.dedupe_key) {
                Upserted::Created
            } else {
                Upserted::Existing
            }
        }));
    }
    Ok(out)
}
