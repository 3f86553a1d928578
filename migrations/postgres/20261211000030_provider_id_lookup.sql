-- A statement line whose provider id names a payment of ours is that payment's evidence,
-- however old the payment (DESIGN.md rule 12, issue 30). A run looks the provider ids of the
-- lines no loaded payment claims up in the whole ledger: on the attempts (where the payment
-- service records them) and on the history (where recon records the ones it resolved with).
-- Both tables are append-only, so these indexes cost no in-place update. `payments` gets none:
-- recon's transitions rewrite its provider id, which stays unindexed for HOT updates
-- (20261210000001_payments_fillfactor.sql). Skipped where a table is not a plain table.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_class
               WHERE oid = to_regclass('payment_attempts') AND relkind = 'r') THEN
        CREATE INDEX IF NOT EXISTS payment_attempts_provider_payment_id
            ON payment_attempts (provider_payment_id) WHERE provider_payment_id IS NOT NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class
               WHERE oid = to_regclass('payment_status_history') AND relkind = 'r') THEN
        CREATE INDEX IF NOT EXISTS payment_status_history_provider_payment_id
            ON payment_status_history (provider_payment_id) WHERE provider_payment_id IS NOT NULL;
    END IF;
END
$$;
