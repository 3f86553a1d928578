-- Partitioned nights (issue 34): the shards of one night are runs in one run group. The group
-- fixes what every shard must agree on (range, as-of, config, shard count); each shard run
-- is a row of recon_run_shards beside its own run record in recon_runs; the gather marks the
-- group gathered once it has written the night's report and sent its email.
CREATE TABLE recon_run_groups (
    group_id      text PRIMARY KEY,
    range_from    text NOT NULL,
    range_to      text NOT NULL,
    as_of         text NOT NULL,
    config_hash   text NOT NULL,
    shards        integer NOT NULL,
    created_at    text NOT NULL,
    gathered_at   text,
    gather_folder text
);
CREATE TABLE recon_run_shards (
    run_id   text PRIMARY KEY,
    group_id text NOT NULL REFERENCES recon_run_groups (group_id),
    shard    integer NOT NULL
);
CREATE INDEX recon_run_shards_group ON recon_run_shards (group_id, shard);
