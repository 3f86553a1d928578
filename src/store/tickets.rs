//! The review queue's tables: `review_tickets` and its append-only `review_ticket_history`.

use super::sql::{Bind, Row};
use super::{Tx, db_err};
use crate::exit::{Failure, fail};
use crate::tickets::{HistoryEntry, NewTicket, Ticket, Upserted};
use anyhow::Result;
use std::collections::HashMap;

/// The columns of a ticket, in the order [`Ticket`] has them.
const TICKET_COLUMNS: &str = "ticket_id, kind, severity, status, payment_id, line_ids, \
    amount_minor, currency, evidence, evidence_sha256, created_run_id, last_seen_run_id, \
    created_at, resolved_at, resolved_by, resolution_note";

fn ticket_from(r: Row<'_>) -> Result<Ticket, sqlx::Error> {
    Ok(Ticket {
        ticket_id: r.int("ticket_id")?,
        kind: r.text("kind")?,
        severity: r.text("severity")?,
        status: r.text("status")?,
        payment_id: r.opt_text("payment_id")?,
        line_ids: r.text("line_ids")?,
        amount_minor: r.opt_int("amount_minor")?,
        currency: r.opt_text("currency")?,
        evidence: r.text("evidence")?,
        evidence_sha256: r.opt_text("evidence_sha256")?,
        created_run_id: r.text("created_run_id")?,
        last_seen_run_id: r.text("last_seen_run_id")?,
        created_at: r.ts("created_at")?,
        resolved_at: r.opt_ts("resolved_at")?,
        resolved_by: r.opt_text("resolved_by")?,
        resolution_note: r.opt_text("resolution_note")?,
    })
}

impl Tx {
    /// Appends one row to a ticket's history.
    #[allow(clippy::too_many_arguments)]
    async fn ticket_history_row(
        &mut self,
        ticket_id: i64,
        (from, to): (Option<&str>, &str),
        actor: &str,
        run_id: Option<&str>,
        note: &str,
        (old_sha, new_sha): (Option<&str>, Option<&str>),
        now: &str,
    ) -> Result<()> {
        let mut q = self.sql(
            "INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, run_id,
                                                       note, old_sha256, new_sha256, changed_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        );
        q.bind(ticket_id)
            .bind(from)
            .bind(to)
            .bind(actor)
            .bind(run_id)
            .bind(note)
            .bind(old_sha)
            .bind(new_sha)
            .bind(Bind::Ts(now));
        self.execute(q)
            .await
            .map_err(db_err("review ticket history"))?;
        Ok(())
    }

    /// A known ticket whose evidence fingerprint differs: store the new evidence and open it
    /// (again), with what changed in its history. Guarded by the status read, so a human's
    /// concurrent resolve is never overwritten unrecorded.
    async fn ticket_evidence_changed(
        &mut self,
        ticket_id: i64,
        t: &NewTicket,
        run_id: &str,
        now: &str,
    ) -> Result<Upserted> {
        let err = db_err("review tickets");
        for _ in 0..3 {
            let mut q = self.sql(
                "SELECT status, evidence_sha256, evidence FROM review_tickets WHERE ticket_id = $1",
            );
            q.bind(ticket_id);
            let (status, old_sha, old_evidence) = self
                .fetch_one(q, |r| Ok((r.text(0)?, r.opt_text(1)?, r.text(2)?)))
                .await
                .map_err(&err)?;
            let mut q = self.sql(
                "UPDATE review_tickets SET evidence = $1, evidence_sha256 = $2, severity = $3,
                                line_ids = $4, amount_minor = $5, currency = $6, status = 'OPEN',
                                resolved_at = NULL, resolved_by = NULL, resolution_note = NULL,
                                evidence_as_of = $7
                         WHERE ticket_id = $8 AND status = $9",
            );
            q.bind(&t.evidence)
                .bind(&t.evidence_sha256)
                .bind(&t.severity)
                .bind(&t.line_ids)
                .bind(t.amount_minor)
                .bind(&t.currency)
                .bind(&t.evidence_as_of)
                .bind(ticket_id)
                .bind(&status);
            let n = self.execute(q).await.map_err(&err)?;
            if n == 0 {
                continue;
            }
            let changes = crate::tickets::describe_changes(&old_evidence, &t.evidence);
            let note = if status == "RESOLVED" {
                format!("reopened: the evidence changed: {changes}")
            } else {
                format!("the evidence changed: {changes}")
            };
            self.ticket_history_row(
                ticket_id,
                (Some(status.as_str()), "OPEN"),
                "recon",
                Some(run_id),
                &note,
                (old_sha.as_deref(), Some(&t.evidence_sha256)),
                now,
            )
            .await?;
            return Ok(if status == "RESOLVED" {
                Upserted::Reopened
            } else {
                Upserted::Updated
            });
        }
        Err(fail(
            Failure::Database,
            format!("review ticket {ticket_id} keeps changing under this run"),
        ))
    }

    /// Creates each ticket (with a `created` history row) or marks the existing one as seen by
    /// `run_id`. An existing ticket with the same evidence fingerprint stays as it is (a
    /// resolved one stays resolved); with a different fingerprint its new evidence is stored, a
    /// resolved one is opened again, and the history records the old and new fingerprint and
    /// what changed. A ticket stored before fingerprints existed takes the new evidence
    /// silently. One result per ticket, in order.
    pub async fn upsert_tickets(
        &mut self,
        tickets: &[NewTicket],
        run_id: &str,
        now: &str,
    ) -> Result<Vec<Upserted>> {
        let err = db_err("review tickets");
        let mut out = Vec::with_capacity(tickets.len());
        for chunk in tickets.chunks(self.batch()) {
            let by_key: HashMap<&str, &NewTicket> =
                chunk.iter().map(|t| (t.dedupe_key.as_str(), t)).collect();
            let mut q = self.sql(
                "INSERT INTO review_tickets (dedupe_key, kind, severity, payment_id, line_ids, \
                 amount_minor, currency, evidence, evidence_sha256, status, created_run_id, \
                 last_seen_run_id, created_at, evidence_as_of) ",
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
                    .push_bind(&t.evidence_sha256)
                    .push_bind("OPEN")
                    .push_bind(run_id)
                    .push_bind(run_id)
                    .push_bind(Bind::Ts(now))
                    .push_bind(&t.evidence_as_of);
            });
            q.push(" ON CONFLICT (dedupe_key) DO NOTHING RETURNING ticket_id, dedupe_key");
            let mut created = self
                .fetch_all(q, |r| Ok((r.int(0)?, r.text(1)?)))
                .await
                .map_err(&err)?;
            created.sort_unstable();
            let mut done: HashMap<String, Upserted> = HashMap::new();
            if !created.is_empty() {
                let mut h = self.sql(
                    "INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, \
                     run_id, note, old_sha256, new_sha256, changed_at) ",
                );
                h.push_values(&created, |mut b, (id, key)| {
                    let sha = by_key.get(key.as_str()).map(|t| t.evidence_sha256.as_str());
                    b.push_bind(*id)
                        .push_bind(None::<&str>)
                        .push_bind("OPEN")
                        .push_bind("recon")
                        .push_bind(run_id)
                        .push_bind("created")
                        .push_bind(None::<&str>)
                        .push_bind(sha)
                        .push_bind(Bind::Ts(now));
                });
                self.execute(h).await.map_err(&err)?;
                done.extend(created.into_iter().map(|(_, k)| (k, Upserted::Created)));
            }
            let existing: Vec<&NewTicket> = chunk
                .iter()
                .filter(|t| !done.contains_key(&t.dedupe_key))
                .collect();
            if !existing.is_empty() {
                let mut u = self.sql("UPDATE review_tickets SET last_seen_run_id = ");
                u.push_bind(run_id);
                u.push(" WHERE dedupe_key IN (");
                let mut sep = u.separated(", ");
                for t in &existing {
                    sep.push_bind(&t.dedupe_key);
                }
                u.push(") RETURNING ticket_id, dedupe_key, evidence_sha256, evidence_as_of");
                let mut seen = self
                    .fetch_all(u, |r| {
                        Ok((r.int(0)?, r.text(1)?, r.opt_text(2)?, r.opt_text(3)?))
                    })
                    .await
                    .map_err(&err)?;
                seen.sort_unstable();
                // Same evidence seen by a newer view: remember the newer view (one statement;
                // every ticket of a run has the same view).
                let same: Vec<i64> = seen
                    .iter()
                    .filter(|(_, key, sha, _)| {
                        by_key
                            .get(key.as_str())
                            .is_some_and(|t| sha.as_deref() == Some(t.evidence_sha256.as_str()))
                    })
                    .map(|(id, ..)| *id)
                    .collect();
                if let (false, Some(view)) =
                    (same.is_empty(), chunk.first().map(|t| &t.evidence_as_of))
                {
                    let mut b = self.sql("UPDATE review_tickets SET evidence_as_of = ");
                    b.push_bind(view);
                    b.push(" WHERE (evidence_as_of IS NULL OR evidence_as_of < ");
                    b.push_bind(view);
                    b.push(") AND ticket_id IN (");
                    let mut sep = b.separated(", ");
                    for id in &same {
                        sep.push_bind(*id);
                    }
                    b.push(")");
                    self.execute(b).await.map_err(&err)?;
                }
                for (id, key, sha, seen_as_of) in seen {
                    let Some(t) = by_key.get(key.as_str()) else {
                        continue;
                    };
                    let older_view = seen_as_of
                        .as_deref()
                        .is_some_and(|s| t.evidence_as_of.as_str() < s);
                    let what = match sha {
                        Some(s) if s == t.evidence_sha256 => Upserted::Existing,
                        // A re-run of an older day (or an earlier as-of) sees less than the run
                        // that stored this evidence: keep the newer evidence.
                        Some(_) if older_view => Upserted::Existing,
                        Some(_) => self.ticket_evidence_changed(id, t, run_id, now).await?,
                        None => {
                            let mut q = self.sql(
                                "UPDATE review_tickets SET evidence = $1, evidence_sha256 = $2,
                                                evidence_as_of = $3
                                         WHERE ticket_id = $4",
                            );
                            q.bind(&t.evidence)
                                .bind(&t.evidence_sha256)
                                .bind(&t.evidence_as_of)
                                .bind(id);
                            self.execute(q).await.map_err(&err)?;
                            Upserted::Existing
                        }
                    };
                    done.insert(key, what);
                }
            }
            out.extend(chunk.iter().map(|t| {
                done.get(&t.dedupe_key)
                    .copied()
                    .unwrap_or(Upserted::Existing)
            }));
        }
        Ok(out)
    }

    /// Tickets, most severe first, then oldest first; only OPEN ones with `open_only`, only of
    /// `kind` if given.
    pub async fn list_tickets(
        &mut self,
        open_only: bool,
        kind: Option<&str>,
    ) -> Result<Vec<Ticket>> {
        let mut q = self.sql("SELECT ");
        q.push(TICKET_COLUMNS).push(
            " FROM review_tickets
                     WHERE ($1 = 0 OR status = 'OPEN') AND ($2 IS NULL OR kind = $2)
                     ORDER BY CASE severity WHEN 'CRITICAL' THEN 0 WHEN 'HIGH' THEN 1 WHEN 'MEDIUM' THEN 2 ELSE 3 END,
                              ticket_id",
        );
        q.bind(i64::from(open_only)).bind(kind);
        self.fetch_all(q, ticket_from)
            .await
            .map_err(db_err("review tickets"))
    }

    /// One ticket.
    pub async fn get_ticket(&mut self, ticket_id: i64) -> Result<Option<Ticket>> {
        let mut q = self.sql("SELECT ");
        q.push(TICKET_COLUMNS)
            .push(" FROM review_tickets WHERE ticket_id = $1");
        q.bind(ticket_id);
        self.fetch_optional(q, ticket_from)
            .await
            .map_err(db_err("review tickets"))
    }

    /// A ticket's history, oldest first.
    pub async fn ticket_history(&mut self, ticket_id: i64) -> Result<Vec<HistoryEntry>> {
        let mut q = self.sql(
            "SELECT from_status, to_status, actor, run_id, note, old_sha256, new_sha256, changed_at
                     FROM review_ticket_history WHERE ticket_id = $1 ORDER BY id",
        );
        q.bind(ticket_id);
        self.fetch_all(q, |r| {
            Ok(HistoryEntry {
                from_status: r.opt_text("from_status")?,
                to_status: r.text("to_status")?,
                actor: r.text("actor")?,
                run_id: r.opt_text("run_id")?,
                note: r.text("note")?,
                old_sha256: r.opt_text("old_sha256")?,
                new_sha256: r.opt_text("new_sha256")?,
                changed_at: r.ts("changed_at")?,
            })
        })
        .await
        .map_err(db_err("review ticket history"))
    }

    /// A person moves a ticket from `from` to `to` (RESOLVED keeps who, when and the note on
    /// the ticket; OPEN clears them), with a history row. False if the ticket does not exist
    /// or is not `from`.
    pub async fn change_ticket_status(
        &mut self,
        ticket_id: i64,
        from: &str,
        to: &str,
        actor: &str,
        note: &str,
        now: &str,
    ) -> Result<bool> {
        let resolved = to == "RESOLVED";
        let mut q = self.sql(
            "UPDATE review_tickets SET status = $1, resolved_at = $2, resolved_by = $3,
                            resolution_note = $4
                     WHERE ticket_id = $5 AND status = $6",
        );
        q.bind(to)
            .bind(Bind::OptTs(resolved.then_some(now)))
            .bind(resolved.then_some(actor))
            .bind(resolved.then_some(note))
            .bind(ticket_id)
            .bind(from);
        let n = self.execute(q).await.map_err(db_err("review tickets"))?;
        if n == 0 {
            return Ok(false);
        }
        self.ticket_history_row(
            ticket_id,
            (Some(from), to),
            actor,
            None,
            note,
            (None, None),
            now,
        )
        .await?;
        Ok(true)
    }
}
