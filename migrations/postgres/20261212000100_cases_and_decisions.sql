-- PostgreSQL flavour of migrations/sqlite/20261212000100_cases_and_decisions.sql (same tables
-- and columns; timestamptz, bigint identity). Cases and reviewers' decisions (issue 32 points 3 and 4).
--
-- review_cases: every case a committed run stored, as the latest run that saw it stored it
-- ("the case as it is now"): its key, kind, severity, the fingerprint of its evidence, its
-- payments (with the status and attempt the run saw), its numbered candidates and its
-- tickets (JSON), the runs that saw it first and last, and where the decisions left it.
CREATE TABLE review_cases (
    case_key            TEXT PRIMARY KEY NOT NULL,
    kind                TEXT NOT NULL,
    severity            TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    fingerprint         TEXT NOT NULL,
    what                TEXT NOT NULL,
    why                 TEXT NOT NULL,
    at_risk             TEXT NOT NULL,
    payments            TEXT NOT NULL,   -- JSON [{payment_id, status, attempt_id}]
    candidates          TEXT NOT NULL,   -- JSON [{number, payment_id, source, line_id, ...}]
    ticket_ids          TEXT NOT NULL,   -- JSON [ticket_id, …]
    status              TEXT NOT NULL CHECK (status IN ('OPEN', 'ESCALATED', 'DISMISSED', 'DECIDED')),
    status_fingerprint  TEXT,            -- the evidence DISMISSED / DECIDED / ESCALATED was decided on
    status_by           TEXT,
    status_note         TEXT,
    first_seen_run_id   TEXT NOT NULL,
    last_seen_run_id    TEXT NOT NULL,
    updated_at          timestamptz NOT NULL
);
CREATE INDEX review_cases_status ON review_cases (status, severity);

-- Every fingerprint a case ever had, with the run that stored it first: a decision made on
-- an earlier one is stale; one recon never wrote was edited.
CREATE TABLE review_case_evidence (
    case_key     TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    seen_at      timestamptz NOT NULL,
    PRIMARY KEY (case_key, fingerprint)
);

-- Every decision a reviewer made that was applied or waits for a second reviewer.
CREATE TABLE case_decisions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_key     TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    decision     TEXT NOT NULL,
    actor        TEXT NOT NULL,
    note         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('WAITING', 'APPLIED', 'SUPERSEDED')),
    approved_by  TEXT,
    file_sha256  TEXT NOT NULL,
    row_no       bigint NOT NULL,
    decided_at   timestamptz NOT NULL,
    approved_at  timestamptz
);
CREATE INDEX case_decisions_case ON case_decisions (case_key, id);

-- Decision files applied, per actor: the same file applied again by the same person changes
-- nothing and gets its first result back.
CREATE TABLE decision_files (
    sha256      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    file_name   TEXT NOT NULL,
    applied_at  timestamptz NOT NULL,
    result      TEXT NOT NULL,   -- the result file's CSV text
    PRIMARY KEY (sha256, actor)
);

-- `confirm N`: this statement line is this payment's. Later runs load the line as naming the
-- payment (its reference), so the decision is evidence every later run keeps.
CREATE TABLE confirmed_lines (
    source      TEXT NOT NULL,
    line_id     TEXT NOT NULL,
    payment_id  TEXT NOT NULL,
    case_key    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    decided_at  timestamptz NOT NULL,
    PRIMARY KEY (source, line_id)
);
