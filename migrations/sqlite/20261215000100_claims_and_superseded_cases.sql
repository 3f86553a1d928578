-- Issue 40: a reviewer's decision is evidence, not an override.
--
-- review_cases: a case that a later committed run no longer holds open is SUPERSEDED (its
-- status_note says why: settled on new evidence, or regrouped as another case), so no sheet
-- made before can be applied to it; evidence_as_of is the as-of of the run that stored it last
-- (microseconds, 20 digits, compared as text): a run that saw less (an earlier as-of) neither
-- overwrites nor supersedes it; lines are its
-- statement lines (JSON [[source, line id], …]; NULL before this column). SQLite cannot
-- change a CHECK constraint: the table is copied.
CREATE TABLE review_cases_new (
    case_key            TEXT PRIMARY KEY NOT NULL,
    kind                TEXT NOT NULL,
    severity            TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    fingerprint         TEXT NOT NULL,
    what                TEXT NOT NULL,
    why                 TEXT NOT NULL,
    at_risk             TEXT NOT NULL,
    payments            TEXT NOT NULL,
    candidates          TEXT NOT NULL,
    ticket_ids          TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('OPEN', 'ESCALATED', 'DISMISSED', 'DECIDED', 'SUPERSEDED')),
    status_fingerprint  TEXT,
    status_by           TEXT,
    status_note         TEXT,
    first_seen_run_id   TEXT NOT NULL,
    last_seen_run_id    TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    evidence_as_of      TEXT,
    lines               TEXT
);
INSERT INTO review_cases_new (case_key, kind, severity, outcome, fingerprint, what, why, at_risk,
    payments, candidates, ticket_ids, status, status_fingerprint, status_by, status_note,
    first_seen_run_id, last_seen_run_id, updated_at)
SELECT case_key, kind, severity, outcome, fingerprint, what, why, at_risk, payments, candidates,
    ticket_ids, status, status_fingerprint, status_by, status_note, first_seen_run_id,
    last_seen_run_id, updated_at FROM review_cases;
DROP TABLE review_cases;
ALTER TABLE review_cases_new RENAME TO review_cases;
CREATE INDEX review_cases_status ON review_cases (status, severity);

-- confirmed_lines: who approved a confirmation (approvals = 2), and the line's reference when
-- the reviewer saw it (NULL: none): a provider that later names another payment there
-- contradicts the confirmation, which then resolves nothing.
ALTER TABLE confirmed_lines ADD COLUMN approved_by TEXT;
ALTER TABLE confirmed_lines ADD COLUMN line_reference TEXT;
