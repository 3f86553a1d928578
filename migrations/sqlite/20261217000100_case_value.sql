-- Issue 42 points 1 and 6: one ordering everywhere. A case's money at risk in the reporting
-- currency (`reporting_currency`), as the run that stored it valued it: millionths of a unit
-- of `value_currency` (the value at rates::VALUE_DECIMALS = 6 decimals, the ordering key of
-- the reports), for ordering only. NULL without a reporting currency or when one of the
-- case's currencies had no rate: `recon cases list` orders by severity, then the valued cases
-- by value (largest first), then the others, then the most recently changed.
-- PostgreSQL flavour: migrations/postgres/20261217000100_case_value.sql.
ALTER TABLE review_cases ADD COLUMN value_micros INTEGER;
ALTER TABLE review_cases ADD COLUMN value_currency TEXT;
