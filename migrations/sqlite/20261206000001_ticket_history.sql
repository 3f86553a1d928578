-- The review queue keeps what it decided on (issue 5 point 5): each ticket stores the sha256 of
-- its evidence's canonical form, and every status change is appended to review_ticket_history
-- (who, when, from, to, note; for an automatic reopen the run and what changed).

ALTER TABLE review_tickets ADD COLUMN evidence_sha256 TEXT;

CREATE TABLE review_ticket_history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id    INTEGER NOT NULL REFERENCES review_tickets (ticket_id),
    from_status  TEXT CHECK (from_status IN ('OPEN', 'RESOLVED')),   -- NULL: created
    to_status    TEXT NOT NULL CHECK (to_status IN ('OPEN', 'RESOLVED')),
    actor        TEXT NOT NULL,
    run_id       TEXT,
    note         TEXT NOT NULL,
    old_sha256   TEXT,
    new_sha256   TEXT,
    changed_at   TEXT NOT NULL
);
CREATE INDEX review_ticket_history_ticket ON review_ticket_history (ticket_id, id);

-- What is known of existing tickets' past: their creation and their resolution.
INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, run_id, note, changed_at)
SELECT ticket_id, NULL, 'OPEN', 'recon', created_run_id, 'created', created_at
FROM review_tickets ORDER BY ticket_id;
INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, run_id, note, changed_at)
SELECT ticket_id, 'OPEN', 'RESOLVED', coalesce(resolved_by, 'unknown'), NULL,
       coalesce(resolution_note, ''), coalesce(resolved_at, created_at)
FROM review_tickets WHERE status = 'RESOLVED' ORDER BY ticket_id;

-- A payment's ticket is now keyed by outcome + payment only (its lines are evidence, so a new
-- candidate line changes the evidence of the same ticket instead of raising a second one).
-- The newest ticket of each (kind, payment) takes the new key; older ones keep theirs.
UPDATE review_tickets SET dedupe_key = kind || '|' || payment_id || '|'
WHERE payment_id IS NOT NULL
  AND ticket_id = (SELECT max(t.ticket_id) FROM review_tickets t
                   WHERE t.kind = review_tickets.kind AND t.payment_id = review_tickets.payment_id)
  AND NOT EXISTS (SELECT 1 FROM review_tickets x
                  WHERE x.dedupe_key = review_tickets.kind || '|' || review_tickets.payment_id || '|');
