-- Issue 42 point 5: `accept difference` settles a netted fee in one decision. A confirmed line
-- whose amount differs from its payment's keeps the difference the reviewer accepted (line
-- minus payment, in minor units of their one currency); a later run matches the pair when the
-- line still differs by exactly that, and raises AMOUNT_MISMATCH as before for any other
-- difference. NULL: a plain `confirm N` (no difference accepted).
-- PostgreSQL flavour: migrations/postgres/20261218000100_accepted_difference.sql.
ALTER TABLE confirmed_lines ADD COLUMN accepted_difference_minor INTEGER;
