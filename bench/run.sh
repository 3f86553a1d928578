#!/usr/bin/env bash
# Benchmark: reconcile N synthetic payments (default 1,000,000) end to end with a release build
# and score the result against the generator's expected outcomes. The data, the score and the
# load rate come from recon-tools (tools/); what is timed is the production recon binary.
#   bench/run.sh [N] [SEED]
#   BENCH_DB=postgres bench/run.sh [N] [SEED]   # the same on the PostgreSQL at 127.0.0.1:5432
# Prints wall time and peak memory of `recon run` (GNU time), the ledger load rate
# (`recon-tools bench-load`: rows/s of the run's load path, and of sqlx row-by-row on PostgreSQL)
# and the accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
seed="${2:-1}"
backend="${BENCH_DB:-sqlite}"
date=2026-11-27
as_of=2026-12-02T00:00:00Z
dir="${BENCH_DIR:-/var/tmp/recon-bench}/n$n-s$seed"
pg_admin="${RECON_TEST_PG_URL:-postgres://root@127.0.0.1:5432/test}"
pg_base="${pg_admin%/*}"
# Both binaries in one build: the recon library is compiled once, without the test features.
cargo build --release --quiet -p recon -p recon-tools
release="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release"
bin="$release/recon"
tools="$release/recon-tools"
timer=()
if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB"); fi

if [ ! -f "$dir/expected.csv" ]; then
    rm -rf "$dir"
    echo "== generate $n payments (seed $seed)"
    "${timer[@]}" "$tools" generate --out "$dir" --payments "$n" --seed "$seed" --date "$date" >/dev/null
fi
if [ "$backend" = postgres ]; then
    master="recon_bench_n${n}_s${seed}"
    if ! psql "$pg_admin" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$master'" | grep -q 1; then
        echo "== import into PostgreSQL database $master"
        psql "$pg_admin" -qc "CREATE DATABASE $master"
        RECON_DATABASE_URL="$pg_base/$master" "$bin" migrate --config "$dir/recon.toml"
        RECON_DATABASE_URL="$pg_base/$master" "${timer[@]}" "$bin" ledger import --config "$dir/recon.toml" \
            --payments "$dir/payments.csv" --attempts "$dir/attempts.csv"
        psql "$pg_base/$master" -qc "VACUUM ANALYZE"
    fi
    # Each run starts from the freshly imported ledger (recon changes statuses).
    psql "$pg_admin" -qc "DROP DATABASE IF EXISTS recon_bench_run WITH (FORCE)"
    psql "$pg_admin" -qc "CREATE DATABASE recon_bench_run TEMPLATE $master"
    url="$pg_base/recon_bench_run"
else
    if [ ! -f "$dir/recon.db" ]; then
        echo "== import"
        "${timer[@]}" "$bin" ledger import --config "$dir/recon.toml" --payments "$dir/payments.csv" --attempts "$dir/attempts.csv"
    fi
    # Remove the old copy's WAL too, or SQLite would replay the previous run onto the fresh copy.
    rm -f "$dir/run.db" "$dir/run.db-wal" "$dir/run.db-shm"
    cp "$dir/recon.db" "$dir/run.db"
    url="sqlite://$dir/run.db"
fi
# A ledger imported by an older recon gets this one's migrations (a run refuses an old schema).
RECON_DATABASE_URL="$url" "$bin" migrate --config "$dir/recon.toml" >/dev/null
echo "== ledger load ($backend)"
RECON_DATABASE_URL="$url" "$tools" bench-load --config "$dir/recon.toml"
rm -rf "$dir/out/bench"
echo "== run ($backend)"
RECON_DATABASE_URL="$url" "${timer[@]}" "$bin" run --config "$dir/recon.toml" \
    --date "$date" --as-of "$as_of" --run-id bench
python3 -c 'import json,sys; print("timings_ms", json.load(open(sys.argv[1]))["timings_ms"])' "$dir/out/bench/summary.json"
echo "== score"
"$tools" score --expected "$dir/expected.csv" --results "$dir/out/bench/results.csv"
