-- Which run's view a ticket's evidence is: `YYYY-MM-DD|<as-of in microseconds, 20 digits>`,
-- compared as text. A re-run of an older day (or with an earlier as-of) sees less than a later
-- run did; its different evidence must not overwrite the newer one or reopen the ticket.
-- NULL (tickets stored before this column): any new evidence is newer.
ALTER TABLE review_tickets ADD COLUMN evidence_as_of TEXT;
