-- A statement line whose provider id names a payment of ours is that payment's evidence,
-- however old the payment (DESIGN.md rule 12, issue 30). A run looks the provider ids of the
-- lines no loaded payment claims up in the whole ledger: on the attempts (where the payment
-- service records them) and on the history (where recon records the ones it resolved with).
-- Both tables are append-only, so these indexes cost no in-place update. `payments` gets none:
-- recon's transitions rewrite its provider id, which must stay unindexed (docs/benchmark.md).
CREATE INDEX payment_attempts_provider_payment_id ON payment_attempts (provider_payment_id)
    WHERE provider_payment_id IS NOT NULL;
CREATE INDEX payment_status_history_provider_payment_id
    ON payment_status_history (provider_payment_id) WHERE provider_payment_id IS NOT NULL;
