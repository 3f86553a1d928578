-- The partition a night splits by (issue 34): `[partition] column = "merchant_id"` names this
-- column of the bundled ledger; each provider source is bound to one of its values, and no match
-- crosses two values. Nullable: a ledger that does not partition leaves it empty, and
-- `recon ledger import` fills it from an optional `merchant_id` column of the payments CSV.
-- Not indexed: a shard reads its payments by time window (payments_started_at) and keeps those
-- of its partitions, and recon never rewrites this column, so updates stay HOT
-- (20261210000001_payments_fillfactor.sql).
ALTER TABLE payments ADD COLUMN merchant_id text;
