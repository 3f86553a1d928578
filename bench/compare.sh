#!/usr/bin/env bash
# Interleaved timing of recon binaries on the SQLite benchmark data, for a host whose speed
# drifts (±15 % here within an hour, more on some days): each round runs every binary once on
# a fresh copy of the imported ledger, and the medians are compared.
#   [ROUNDS=5] [N=1000000] [SEED=1] bench/compare.sh BIN_A BIN_B [BIN ...]
# A "binary" may be a wrapper script that sets environment variables and execs recon.
# Needs the data bench/run.sh generated and imported (same N and SEED).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: [ROUNDS=5] [N=1000000] [SEED=1] bench/compare.sh BIN_A BIN_B [BIN ...]" >&2; exit 2; }
rounds="${ROUNDS:-5}"; n="${N:-1000000}"; seed="${SEED:-1}"
dir="${BENCH_DIR:-/var/tmp/recon-bench}/n$n-s$seed"
[ -f "$dir/recon.db" ] || { echo "no $dir/recon.db: run bench/run.sh $n $seed first" >&2; exit 2; }
out="$(mktemp)"
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        rm -f "$dir/run.db" "$dir/run.db-wal" "$dir/run.db-shm"
        cp "$dir/recon.db" "$dir/run.db"
        # Each binary brings the copy to its own schema (untimed): binaries on either side of a
        # migration compare on the same imported ledger.
        RECON_DATABASE_URL="sqlite://$dir/run.db" "$bin" migrate --config "$dir/recon.toml" >/dev/null
        rm -rf "$dir/out/compare" "$dir/out/compare.tmp"
        sync
        t=$(RECON_DATABASE_URL="sqlite://$dir/run.db" /usr/bin/time -f "%e %U %S %M" \
            "$bin" run --config "$dir/recon.toml" --date 2026-11-27 --as-of 2026-12-02T00:00:00Z \
            --run-id compare 2>&1 >/dev/null | tail -1)
        echo "$bin $t" >> "$out"
    done
done
python3 "$(dirname "$0")/medians.py" "$out"
rm -f "$out"
