-- Issue 41 point 6: the gather trusts nothing it did not write.
--
-- recon_shard_handover: what a shard handed the gather, sealed in the transaction that
-- commits the shard's effects: one row per file of its output folder (results.csv, diff.csv,
-- rejected.csv, settlement.csv, summary.json, shard.json), its sha256 (lowercase hex) and
-- size. The gather recomputes both while it reads the files and refuses the night (exit 14,
-- naming the shard and the file) when one differs.
CREATE TABLE recon_shard_handover (
    run_id text NOT NULL REFERENCES recon_run_shards (run_id),
    file   text NOT NULL,
    sha256 text NOT NULL,
    bytes  integer NOT NULL,
    PRIMARY KEY (run_id, file)
);

-- recon_run_groups: why the night's last gather failed (NULL once a gather completed it), and
-- when: a gather that stops leaves a record, as a run does.
ALTER TABLE recon_run_groups ADD COLUMN gather_error text;
ALTER TABLE recon_run_groups ADD COLUMN gather_failed_at text;
