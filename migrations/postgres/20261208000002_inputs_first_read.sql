-- Which run day first read each statement file (source, path, content): a line booked before a
-- run's days surfaces in the run of the first day that read its file (late files, DESIGN.md
-- rule 8), and re-runs of that day reproduce it. Filled from the inputs of completed runs.
CREATE TABLE recon_inputs (
    source    text NOT NULL,
    path      text NOT NULL,
    sha256    text NOT NULL,
    first_day text NOT NULL,
    PRIMARY KEY (source, path, sha256)
);
INSERT INTO recon_inputs (source, path, sha256, first_day)
SELECT i->>'source', i->>'path', i->>'sha256', min(r.range_to)
FROM recon_runs r, jsonb_array_elements(r.inputs::jsonb) i
WHERE r.status = 'COMPLETED' AND i->>'sha256' IS NOT NULL
GROUP BY 1, 2, 3;
