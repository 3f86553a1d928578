#!/usr/bin/env bash
# Benchmark: reconcile N synthetic payments (default 1,000,000) end to end with a release build
# and score the result against the generator's expected outcomes.
#   bench/run.sh [N] [SEED]
# Prints wall time and peak memory of `recon run` (GNU time) and the accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
seed="${2:-1}"
date=2026-11-27
as_of=2026-12-02T00:00:00Z
dir="${BENCH_DIR:-/var/tmp/recon-bench}/n$n-s$seed"
cargo build --release --quiet
bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/recon"
timer=()
if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB"); fi

if [ ! -f "$dir/recon.db" ]; then
    rm -rf "$dir"
    echo "== generate $n payments (seed $seed)"
    "${timer[@]}" "$bin" generate --out "$dir" --payments "$n" --seed "$seed" --date "$date" >/dev/null
    echo "== import"
    "${timer[@]}" "$bin" ledger import --config "$dir/recon.toml" --payments "$dir/payments.csv" --attempts "$dir/attempts.csv"
fi
# Each benchmark run starts from the freshly imported ledger (recon changes statuses). Remove
# the old copy's WAL too, or SQLite would replay the previous run onto the fresh copy.
rm -f "$dir/run.db" "$dir/run.db-wal" "$dir/run.db-shm"
cp "$dir/recon.db" "$dir/run.db"
rm -rf "$dir/out/bench"
echo "== run"
RECON_DATABASE_URL="sqlite://$dir/run.db" "${timer[@]}" "$bin" run --config "$dir/recon.toml" \
    --date "$date" --as-of "$as_of" --run-id bench
python3 -c 'import json,sys; print("timings_ms", json.load(open(sys.argv[1]))["timings_ms"])' "$dir/out/bench/summary.json"
echo "== score"
"$bin" score --expected "$dir/expected.csv" --results "$dir/out/bench/results.csv"
