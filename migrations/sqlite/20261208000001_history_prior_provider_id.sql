-- recon records the provider id of the line that resolved a payment (RESOLVED_SUCCEEDED). A
-- re-run classifies on the payment as it was before recon's own change, so it must also know
-- the provider id the payment had before: '' = none, NULL = a row written before this column.
ALTER TABLE payment_status_history ADD COLUMN prior_provider_payment_id TEXT;
