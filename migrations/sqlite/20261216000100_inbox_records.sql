-- Issue 41 points 3 and 7: what the decisions inbox did, and decision files kept bounded.
--
-- decision_files: a file applied is remembered by its sha256 and actor (the same bytes by the
-- same person are never applied twice) with where it was read (path) and where recon wrote
-- its result (result_file), and a bounded summary instead of its whole result CSV (154 MB for
-- a 1M-row file): counts per result (JSON {"applied": n, …}) and the first refused rows (JSON
-- [[row, case, why], …], at most 100). A file applied again answers `unchanged` for each of
-- its rows from these, from case_decisions and from the file itself. Results stored before
-- this migration are dropped with their column (their counts read as unknown).
ALTER TABLE decision_files DROP COLUMN result;
ALTER TABLE decision_files ADD COLUMN path TEXT;
ALTER TABLE decision_files ADD COLUMN result_file TEXT;
ALTER TABLE decision_files ADD COLUMN counts TEXT NOT NULL DEFAULT '{}';
ALTER TABLE decision_files ADD COLUMN refused TEXT NOT NULL DEFAULT '[]';

-- inbox_records: what a run's pass over the decisions inbox did (JSON: the files applied with
-- their reviewer, sha256 and result file; the folders and files skipped, with why; the files
-- applied by an earlier run and left where they are), by run id: the run's summary.json
-- `inbox` section and its email are made from it. Written before the run's record (the inbox
-- is applied first), so a run that fails later still leaves it.
CREATE TABLE inbox_records (
    run_id       TEXT PRIMARY KEY NOT NULL,
    summary      TEXT NOT NULL,
    recorded_at  TEXT NOT NULL
);
