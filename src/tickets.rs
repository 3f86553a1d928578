//! The REVIEW queue: tickets keyed by a stable dedupe key, so re-runs never duplicate them. A
//! ticket a human resolved stays resolved while its evidence stays the same (same fingerprint);
//! when the evidence changes, the next run opens it again and records what changed. Every
//! status change is appended to the ticket's history.
//!
//! The **fingerprint** is the sha256 of the evidence's canonical form: the decision-relevant
//! fields only (money, masked recipients, bookings, the candidates and why they qualified),
//! serialised with sorted keys and sorted lists. It leaves out what changes without the
//! evidence changing (file names and line numbers, the human `detail` text) and what a
//! reviewer changes when acting on a ticket (the payment's status and attempt).

use crate::db::Db;
use crate::exit::{Failure, fail};
use crate::model::Outcome;
use anyhow::Result;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

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
    /// sha256 of the evidence's canonical form ([`fingerprint`]).
    pub evidence_sha256: String,
    /// Which run's view the evidence is (`YYYY-MM-DD|<as-of µs, 20 digits>`, compared as
    /// text): evidence from an older view never replaces a newer one.
    pub evidence_as_of: String,
}

/// The stable key of a ticket: `OUTCOME|payment_id|` for a payment's ticket (its lines are
/// evidence: a new candidate line changes the evidence, not the ticket), `OUTCOME||lines` for a
/// ticket about a statement line alone, and `OUTCOME||rule` for a ticket of neither (a payout
/// status record that names no payment: its rule `payout_status:<name>#<id>` names it).
pub fn dedupe_key(kind: &str, payment_id: Option<&str>, line_ids: &str, rule: &str) -> String {
    match payment_id {
        Some(p) => format!("{kind}|{p}|"),
        None if line_ids.is_empty() => format!("{kind}||{rule}"),
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

/// A value for the terminal: control characters (escape sequences, line breaks) and invisible
/// ones (U+202E, U+200B, …) as `<U+XXXX>` ([`crate::textsafe::terminal`]), so a payment id,
/// a line id or a reviewer's note can neither move the cursor nor read as something else.
fn shown(value: &str) -> std::borrow::Cow<'_, str> {
    crate::textsafe::terminal(value)
}

/// Renders one ticket with its evidence (pretty JSON) and history for the terminal. Every
/// value goes through `shown` (control and bidi characters made visible).
pub fn render_one(t: &Ticket, history: &[HistoryEntry]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ticket {}  {}  {}  {}",
        t.ticket_id,
        shown(&t.kind),
        shown(&t.severity),
        shown(&t.status)
    );
    let field = |s: &mut String, name: &str, value: &str| {
        let _ = writeln!(s, "  {name:<10} {}", shown(value));
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
        let _ = writeln!(s, "  {}", shown(line));
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
            "  {}  {:<20}  {}{}: {}",
            shown(&h.changed_at),
            shown(&change),
            shown(&h.actor),
            shown(&run),
            shown(&h.note)
        );
        if let (Some(a), Some(b)) = (&h.old_sha256, &h.new_sha256) {
            let _ = writeln!(s, "  {:27} evidence sha256 {a} → {b}", "");
        }
    }
    s
}

/// Renders tickets as a fixed-width table for the terminal. Every value goes through
/// `shown` (control and bidi characters made visible).
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
            shown(&t.severity),
            shown(&t.status),
            shown(&t.kind),
            shown(t.payment_id.as_deref().unwrap_or("-")),
            amount,
            shown(&t.line_ids)
        );
    }
    s
}

/// The decision-relevant part of `evidence` (see the module docs).
pub fn canonical(evidence: &Value) -> Value {
    let mut v = evidence.clone();
    strip_volatile(&mut v);
    v
}

/// Removes from `v`, in place, what the canonical form leaves out (see the module docs).
fn strip_volatile(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("detail");
        let strip = |p: &mut Value| {
            if let Some(p) = p.as_object_mut() {
                p.remove("status");
                p.remove("attempt_id");
            }
        };
        if let Some(p) = o.get_mut("payment") {
            strip(p);
        }
        if let Some(ps) = o.get_mut("other_payments").and_then(Value::as_array_mut) {
            ps.iter_mut().for_each(strip);
        }
        if let Some(ls) = o.get_mut("lines").and_then(Value::as_array_mut) {
            for l in ls.iter_mut().filter_map(Value::as_object_mut) {
                l.remove("file");
                l.remove("line");
            }
        }
    }
}

/// sha256 (hex) of `v`'s text, serialised straight into the hash.
fn sha256_of(v: &Value) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // Writing into memory cannot fail, and a Value always serialises.
    let _ = serde_json::to_writer(&mut h, v);
    hex::encode(h.0.finalize())
}

/// sha256 (hex) of the canonical form of `evidence`. serde_json keeps object keys sorted, and
/// every list in the evidence is built sorted, so equal evidence gives equal text.
pub fn fingerprint(evidence: &Value) -> String {
    sha256_of(&canonical(evidence))
}

/// The stored text of `evidence` and its [`fingerprint`], consuming it: a ticket's evidence
/// is serialised once for the store and once, stripped in place, for the hash.
pub fn seal(mut evidence: Value) -> (String, String) {
    let text = evidence.to_string();
    strip_volatile(&mut evidence);
    (text, sha256_of(&evidence))
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Field-by-field changes of two objects: `amount 39.50 → 40.00`.
fn field_changes(prefix: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    let empty = serde_json::Map::new();
    let (a, b) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let (x, y) = (
            a.get(k).unwrap_or(&Value::Null),
            b.get(k).unwrap_or(&Value::Null),
        );
        if x == y {
            continue;
        }
        if let (Some(a), Some(b)) = (x.as_array(), y.as_array()) {
            // Lists of reasons: name only what left and what came.
            let gone: Vec<String> = a.iter().filter(|v| !b.contains(v)).map(text).collect();
            let came: Vec<String> = b.iter().filter(|v| !a.contains(v)).map(text).collect();
            let side = |v: Vec<String>| {
                if v.is_empty() {
                    "-".into()
                } else {
                    v.join(", ")
                }
            };
            out.push(format!("{prefix}{k} {} → {}", side(gone), side(came)));
        } else {
            out.push(format!("{prefix}{k} {} → {}", text(x), text(y)));
        }
    }
}

/// Items of a list keyed by `key`.
fn keyed(v: &Value, key: impl Fn(&Value) -> String) -> BTreeMap<String, &Value> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| (key(x), x))
        .collect()
}

fn list_changes(
    what: &str,
    old: &Value,
    new: &Value,
    key: impl Fn(&Value) -> String,
    skip_added: &BTreeSet<String>,
    out: &mut Vec<String>,
) -> BTreeSet<String> {
    let (a, b) = (keyed(old, &key), keyed(new, &key));
    let mut added = BTreeSet::new();
    for (k, y) in &b {
        match a.get(k) {
            None => {
                added.insert(k.clone());
                if !skip_added.contains(k) {
                    out.push(format!("{what} {k} added"));
                }
            }
            Some(x) if x != y => field_changes(&format!("{what} {k}: "), x, y, out),
            Some(_) => {}
        }
    }
    for k in a.keys().filter(|k| !b.contains_key(*k)) {
        if !skip_added.contains(k) {
            out.push(format!("{what} {k} removed"));
        }
    }
    added
}

/// A short human description of how the decision-relevant evidence changed from `old` to
/// `new` (both evidence JSON texts), e.g. `candidate L-9 added; payment amount 39.50 → 40.00`.
pub fn describe_changes(old: &str, new: &str) -> String {
    let (Ok(old), Ok(new)) = (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) else {
        return "evidence changed".into();
    };
    let (old, new) = (canonical(&old), canonical(&new));
    let mut out = Vec::new();
    for k in ["outcome", "rule"] {
        if old[k] != new[k] {
            out.push(format!("{k} {} → {}", text(&old[k]), text(&new[k])));
        }
    }
    if old["payment"] != new["payment"] {
        field_changes("payment ", &old["payment"], &new["payment"], &mut out);
    }
    // A payment's candidates are lines, a line's candidates are payments: name the other side.
    let has_payment = !new["payment"].is_null();
    let cand_key = |c: &Value| {
        let k = if has_payment { "line_id" } else { "payment_id" };
        text(&c[k])
    };
    let none = BTreeSet::new();
    let mut cands = Vec::new();
    let touched = list_changes(
        "candidate",
        &old["candidates"],
        &new["candidates"],
        cand_key,
        &none,
        &mut cands,
    );
    let mut removed_or_added = touched;
    for c in keyed(&old["candidates"], cand_key).keys() {
        if !keyed(&new["candidates"], cand_key).contains_key(c) {
            removed_or_added.insert(c.clone());
        }
    }
    let mut lines = Vec::new();
    let line_skip = if has_payment {
        &removed_or_added
    } else {
        &none
    };
    list_changes(
        "line",
        &old["lines"],
        &new["lines"],
        |l| text(&l["line_id"]),
        line_skip,
        &mut lines,
    );
    let pay_skip = if has_payment {
        &none
    } else {
        &removed_or_added
    };
    let mut pays = Vec::new();
    list_changes(
        "payment",
        &old["other_payments"],
        &new["other_payments"],
        |p| text(&p["payment_id"]),
        pay_skip,
        &mut pays,
    );
    out.extend(cands);
    out.extend(lines);
    out.extend(pays);
    if out.is_empty() {
        return "evidence changed".into();
    }
    const MAX: usize = 8;
    if out.len() > MAX {
        let more = out.len() - MAX;
        out.truncate(MAX);
        out.push(format!("and {more} more change(s)"));
    }
    out.join("; ")
}
