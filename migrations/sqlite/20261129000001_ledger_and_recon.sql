-- The ledger (payments + attempts, as the payment service keeps them) and recon's own tables.
-- Timestamps are TEXT 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC (fixed width: text order = time order).
-- Money is INTEGER minor units of the currency (ISO 4217 exponent).

CREATE TABLE payments (
    payment_id          TEXT PRIMARY KEY NOT NULL,
    recipient_account   TEXT NOT NULL,
    amount_minor        INTEGER NOT NULL,
    currency            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN
                          ('PENDING', 'SUBMITTING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'REVIEW')),
    created_at          TEXT NOT NULL,
    started_at          TEXT,
    attempt_id          TEXT,
    provider_payment_id TEXT,
    updated_at          TEXT NOT NULL
);
CREATE INDEX payments_started_at ON payments (started_at);
CREATE INDEX payments_created_at ON payments (created_at);

-- Append-only: one row per attempt to send a payment.
CREATE TABLE payment_attempts (
    attempt_id          TEXT PRIMARY KEY NOT NULL,
    payment_id          TEXT NOT NULL REFERENCES payments (payment_id),
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    outcome             TEXT,
    provider_payment_id TEXT,
    error_detail        TEXT
);
CREATE INDEX payment_attempts_payment ON payment_attempts (payment_id);
CREATE INDEX payment_attempts_started_at ON payment_attempts (started_at);

-- Append-only: every status change recon makes (and others may record).
CREATE TABLE payment_status_history (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    payment_id          TEXT NOT NULL REFERENCES payments (payment_id),
    from_status         TEXT NOT NULL,
    to_status           TEXT NOT NULL,
    attempt_id          TEXT,
    provider_payment_id TEXT,
    actor               TEXT NOT NULL,
    run_id              TEXT,
    reason              TEXT NOT NULL,
    changed_at          TEXT NOT NULL
);
CREATE INDEX payment_status_history_payment ON payment_status_history (payment_id, id);
CREATE INDEX payment_status_history_changed_at ON payment_status_history (changed_at);

-- One row per run (also killed and failed ones: status stays RUNNING or becomes FAILED).
CREATE TABLE recon_runs (
    run_id        TEXT PRIMARY KEY NOT NULL,
    range_from    TEXT NOT NULL,
    range_to      TEXT NOT NULL,
    as_of         TEXT NOT NULL,
    dry_run       INTEGER NOT NULL,
    rules_hash    TEXT NOT NULL,
    inputs        TEXT NOT NULL DEFAULT '[]',
    counts        TEXT NOT NULL DEFAULT '{}',
    status        TEXT NOT NULL CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED')),
    error         TEXT,
    started_at    TEXT NOT NULL,
    finished_at   TEXT
);

-- The review queue. dedupe_key is stable across runs, so re-runs never duplicate a ticket
-- and a ticket a human resolved stays resolved.
CREATE TABLE review_tickets (
    ticket_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key       TEXT NOT NULL UNIQUE,
    kind             TEXT NOT NULL,
    severity         TEXT NOT NULL,
    payment_id       TEXT,
    line_ids         TEXT NOT NULL,
    amount_minor     INTEGER,
    currency         TEXT,
    evidence         TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('OPEN', 'RESOLVED')),
    created_run_id   TEXT NOT NULL,
    last_seen_run_id TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    resolved_at      TEXT,
    resolved_by      TEXT,
    resolution_note  TEXT
);
CREATE INDEX review_tickets_status ON review_tickets (status, ticket_id);

-- Payments a run could not finish (AWAITING_EVIDENCE) or carried over from earlier days.
-- A later run's scope includes them until closed; closed_on keeps re-runs of the closing
-- range reproducible.
CREATE TABLE recon_followups (
    payment_id TEXT PRIMARY KEY NOT NULL,
    opened_on  TEXT NOT NULL,
    closed_on  TEXT
);
