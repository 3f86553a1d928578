-- Every request recon sent to a provider status API ([[status_api]], issue 14 part 2): what was
-- asked (URL without secrets: those travel only in headers), what came back (HTTP status, a
-- digest of the body, the provider's status) and what recon made of it (verdict, why). One row
-- per attempt; append-only.
CREATE TABLE recon_status_queries (
    request_id      text PRIMARY KEY,
    run_id          text NOT NULL,
    api             text NOT NULL,
    payment_id      text NOT NULL,
    attempt         bigint NOT NULL,
    url             text NOT NULL,
    status_code     bigint,
    latency_ms      bigint NOT NULL,
    body_sha256     text,
    verdict         text NOT NULL,
    provider_status text,
    detail          text NOT NULL,
    sent_at         timestamptz NOT NULL
);
CREATE INDEX recon_status_queries_payment ON recon_status_queries (payment_id, sent_at);
