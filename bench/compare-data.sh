#!/usr/bin/env bash
# Interleaved timing of one recon binary on several benchmark data sets (the default data and
# its variants from bench/variants.py, or `recon-tools generate --ids short` data): each round
# runs the binary once on a fresh copy of each data set's imported ledger, and the medians are
# compared. A run's cost should not depend on how the ids are spelled or how the rows are ordered.
#   [ROUNDS=3] bench/compare-data.sh BIN DIR_A DIR_B [DIR ...]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: [ROUNDS=3] bench/compare-data.sh BIN DIR_A DIR_B [DIR ...]" >&2; exit 2; }
bin="$1"; shift
rounds="${ROUNDS:-3}"
for d in "$@"; do
    [ -f "$d/recon.db" ] || { echo "no $d/recon.db (bench/run.sh or bench/variants.py makes one)" >&2; exit 2; }
done
out="$(mktemp)"
for _ in $(seq "$rounds"); do
    for d in "$@"; do
        rm -f "$d/run.db" "$d/run.db-wal" "$d/run.db-shm"
        cp "$d/recon.db" "$d/run.db"
        RECON_DATABASE_URL="sqlite://$d/run.db" "$bin" migrate --config "$d/recon.toml" >/dev/null
        rm -rf "$d/out/compare" "$d/out/compare.tmp"
        sync
        t=$(RECON_DATABASE_URL="sqlite://$d/run.db" /usr/bin/time -f "%e %U %S %M" \
            "$bin" run --config "$d/recon.toml" --date 2026-11-27 --as-of 2026-12-02T00:00:00Z \
            --run-id compare 2>&1 >/dev/null | tail -1)
        echo "$d $t" >> "$out"
    done
done
python3 "$(dirname "$0")/medians.py" "$out"
rm -f "$out"
