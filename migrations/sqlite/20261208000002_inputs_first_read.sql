-- Which run day first read each statement file (source, path, content): a line booked before a
-- run's days surfaces in the run of the first day that read its file (late files, DESIGN.md
-- rule 8), and re-runs of that day reproduce it. Filled from the inputs of completed runs.
CREATE TABLE recon_inputs (
    source    TEXT NOT NULL,
    path      TEXT NOT NULL,
    sha256    TEXT NOT NULL,
    first_day TEXT NOT NULL,
    PRIMARY KEY (source, path, sha256)
);
INSERT INTO recon_inputs (source, path, sha256, first_day)
SELECT json_extract(i.value, '$.source'), json_extract(i.value, '$.path'),
       json_extract(i.value, '$.sha256'), min(r.range_to)
FROM recon_runs r, json_each(r.inputs) i
WHERE r.status = 'COMPLETED' AND json_valid(r.inputs)
  AND json_extract(i.value, '$.sha256') IS NOT NULL
GROUP BY 1, 2, 3;
