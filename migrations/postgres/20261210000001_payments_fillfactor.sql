-- recon's guarded transitions rewrite a payment's status, provider id and updated_at in place.
-- On a full heap page (every page of a freshly loaded table) PostgreSQL must put the new row
-- version on another page and add an entry to every index of the table for it; with 10 % of each
-- page left free it keeps the new version on the same page and touches no index (a HOT update:
-- none of those columns is indexed), which is about half the server's work for a night's
-- transitions (docs/benchmark.md).
-- It applies to pages written from now on (`recon ledger import`, new payments); `VACUUM FULL
-- payments` rewrites an existing table with it. Skipped where `payments` is not a plain table.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_class
               WHERE oid = to_regclass('payments') AND relkind = 'r') THEN
        ALTER TABLE payments SET (fillfactor = 90);
    END IF;
END
$$;
