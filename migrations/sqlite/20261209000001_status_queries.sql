-- Every request recon sent to a provider status API ([[status_api]], issue 14 part 2): what was
-- asked (URL without secrets: those travel only in headers), what came back (HTTP status, a
-- digest of the body, the provider's status) and what recon made of it (verdict, why). One row
-- per attempt; append-only.
CREATE TABLE recon_status_queries (
    request_id      TEXT PRIMARY KEY,
    run_id          TEXT NOT NULL,
    api             TEXT NOT NULL,
    payment_id      TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    url             TEXT NOT NULL,
    status_code     INTEGER,
    latency_ms      INTEGER NOT NULL,
    body_sha256     TEXT,
    verdict         TEXT NOT NULL,
    provider_status TEXT,
    detail          TEXT NOT NULL,
    sent_at         TEXT NOT NULL
);
CREATE INDEX recon_status_queries_payment ON recon_status_queries (payment_id, sent_at);
