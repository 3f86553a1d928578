-- A shard reads only its own partitions' payments (issue 44 point 9): its ledger query is
-- `coalesce(merchant_id, '') IN (…its merchants…) AND started_at in the night`, which without
-- this index read the whole night's rows of every merchant in every shard (N shards, N times the
-- reading). The expression is the one recon's shard filter writes (`coalesce(CAST(merchant_id AS
-- text), '') COLLATE "C"`; the cast of a text column to text is no cast), so the planner ranges
-- over one merchant's night at a time. Byte order ("C"), whatever the database's collation: shard
-- 0 also takes the payments of no bound partition, written as the ranges between the bound
-- values in byte order (the order recon sorts them in), which this index serves too.
-- The second index serves the branch for payments that never started (`started_at IS NULL AND
-- created_at in the night`), which read every payment created in the night through
-- payments_created_at to keep the few without a start, in one process and in every shard.
-- recon never rewrites merchant_id, started_at or created_at, so its transitions stay HOT updates
-- (20261210000001_payments_fillfactor.sql). Skipped where `payments` is not a plain table with a
-- merchant_id column (a ledger read through `payments_query`).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
               WHERE c.oid = to_regclass('payments') AND c.relkind = 'r'
                 AND a.attname = 'merchant_id' AND NOT a.attisdropped) THEN
        CREATE INDEX IF NOT EXISTS payments_partition_started
            ON payments ((coalesce(merchant_id, '') COLLATE "C"), started_at);
        CREATE INDEX IF NOT EXISTS payments_unstarted_created
            ON payments ((coalesce(merchant_id, '') COLLATE "C"), created_at) WHERE started_at IS NULL;
    END IF;
END
$$;
