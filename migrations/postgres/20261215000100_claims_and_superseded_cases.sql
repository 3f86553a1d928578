-- Issue 40: a reviewer's decision is evidence, not an override.
--
-- review_cases: a case that a later committed run no longer holds open is SUPERSEDED (its
-- status_note says why: settled on new evidence, or regrouped as another case), so no sheet
-- made before can be applied to it; evidence_as_of is the as-of of the run that stored it last
-- (microseconds, 20 digits, compared as text): a run that saw less (an earlier as-of) neither
-- overwrites nor supersedes it; lines are its
-- statement lines (JSON [[source, line id], …]; NULL before this column).
ALTER TABLE review_cases DROP CONSTRAINT IF EXISTS review_cases_status_check;
ALTER TABLE review_cases ADD CONSTRAINT review_cases_status_check
    CHECK (status IN ('OPEN', 'ESCALATED', 'DISMISSED', 'DECIDED', 'SUPERSEDED'));
ALTER TABLE review_cases ADD COLUMN evidence_as_of TEXT;
ALTER TABLE review_cases ADD COLUMN lines TEXT;

-- confirmed_lines: who approved a confirmation (approvals = 2), and the line's reference when
-- the reviewer saw it (NULL: none): a provider that later names another payment there
-- contradicts the confirmation, which then resolves nothing.
ALTER TABLE confirmed_lines ADD COLUMN approved_by TEXT;
ALTER TABLE confirmed_lines ADD COLUMN line_reference TEXT;
