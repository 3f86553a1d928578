-- The partition a night splits by (issue 34): `[partition] column = "merchant_id"` names this
-- column of the bundled ledger; each provider source is bound to one of its values, and no match
-- crosses two values. Nullable: a ledger that does not partition leaves it empty, and
-- `recon ledger import` fills it from an optional `merchant_id` column of the payments CSV.
-- PostgreSQL flavour: migrations/postgres/20261213000100_payments_merchant.sql.
ALTER TABLE payments ADD COLUMN merchant_id TEXT;
