-- The ledger (payments + attempts, as the payment service keeps them) and recon's own tables,
-- PostgreSQL flavour of migrations/sqlite/20261129000001_ledger_and_recon.sql: the same tables,
-- columns and constraints, with native types (timestamptz, bigint, identity columns).
-- Money is bigint minor units of the currency (ISO 4217 exponent).

CREATE TABLE payments (
    payment_id          text PRIMARY KEY,
    recipient_account   text NOT NULL,
    amount_minor        bigint NOT NULL,
    currency            text NOT NULL,
    status              text NOT NULL CHECK (status IN
                          ('PENDING', 'SUBMITTING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'REVIEW')),
    created_at          timestamptz NOT NULL,
    started_at          timestamptz,
    attempt_id          text,
    provider_payment_id text,
    updated_at          timestamptz NOT NULL
);
CREATE INDEX payments_started_at ON payments (started_at);
CREATE INDEX payments_created_at ON payments (created_at);

-- Append-only: one row per attempt to send a payment.
CREATE TABLE payment_attempts (
    attempt_id          text PRIMARY KEY,
    payment_id          text NOT NULL REFERENCES payments (payment_id),
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    outcome             text,
    provider_payment_id text,
    error_detail        text
);
CREATE INDEX payment_attempts_payment ON payment_attempts (payment_id);
CREATE INDEX payment_attempts_started_at ON payment_attempts (started_at);

-- Append-only: every status change recon makes (and others may record).
CREATE TABLE payment_status_history (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id          text NOT NULL REFERENCES payments (payment_id),
    from_status         text NOT NULL,
    to_status           text NOT NULL,
    attempt_id          text,
    provider_payment_id text,
    actor               text NOT NULL,
    run_id              text,
    reason              text NOT NULL,
    changed_at          timestamptz NOT NULL
);
CREATE INDEX payment_status_history_payment ON payment_status_history (payment_id, id);
CREATE INDEX payment_status_history_changed_at ON payment_status_history (changed_at);

-- One row per run (also killed and failed ones: a killed run is marked FAILED by the next run
-- that takes the lock).
CREATE TABLE recon_runs (
    run_id        text PRIMARY KEY,
    range_from    text NOT NULL,
    range_to      text NOT NULL,
    as_of         text NOT NULL,
    dry_run       bigint NOT NULL,
    rules_hash    text NOT NULL,
    inputs        text NOT NULL DEFAULT '[]',
    counts        text NOT NULL DEFAULT '{}',
    status        text NOT NULL CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED')),
    error         text,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz
);

-- The review queue. dedupe_key is stable across runs.
CREATE TABLE review_tickets (
    ticket_id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dedupe_key       text NOT NULL UNIQUE,
    kind             text NOT NULL,
    severity         text NOT NULL,
    payment_id       text,
    line_ids         text NOT NULL,
    amount_minor     bigint,
    currency         text,
    evidence         text NOT NULL,
    status           text NOT NULL CHECK (status IN ('OPEN', 'RESOLVED')),
    created_run_id   text NOT NULL,
    last_seen_run_id text NOT NULL,
    created_at       timestamptz NOT NULL,
    resolved_at      timestamptz,
    resolved_by      text,
    resolution_note  text
);
CREATE INDEX review_tickets_status ON review_tickets (status, ticket_id);

-- Payments carried over to later runs (see the SQLite file for the semantics).
CREATE TABLE recon_followups (
    payment_id text PRIMARY KEY,
    opened_on  text NOT NULL,
    closed_on  text
);
