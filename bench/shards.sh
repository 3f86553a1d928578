#!/usr/bin/env bash
# Sharded nights (issue 34): one generated night of N payments in K merchants on PostgreSQL,
# reconciled as one process and as S shard processes side by side plus `recon gather`, each on
# a fresh copy of the imported ledger. Prints per process wall time, CPU and peak RSS (GNU
# time), the shards' total CPU, the local PostgreSQL server's CPU over the one process and over
# the shards plus gather (every postgres process's time read from /proc: run it on an
# otherwise idle server), and whether the gathered results.csv is the one process's.
#   bench/shards.sh [N] [K] [S ...]        default: 1000000 8 4 8
#   e.g. CARGO_TARGET_DIR=/var/tmp/recon-release bench/shards.sh 10000000 8 4 8
# The data stays in /var/tmp/recon-bench/shards-n<N>-k<K>/ (BENCH_DIR to move it); the imported
# ledger is the PostgreSQL template database recon_bench_shards_n<N>_k<K>. BIN=path/to/recon
# (TOOLS=path/to/recon-tools, default beside it) times another build instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
k="${2:-8}"
shift 2 2>/dev/null || shift $#
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(4 8)
seed=1
date=2026-11-27
as_of=2026-12-02T00:00:00Z
dir="${BENCH_DIR:-/var/tmp/recon-bench}/shards-n$n-k$k"
pg_admin="${RECON_TEST_PG_URL:-postgres://root@127.0.0.1:5432/test}"
pg_base="${pg_admin%/*}"
if [ -n "${BIN:-}" ]; then
    # Another build (say, the one before a change): BIN=path/to/recon TOOLS=path/to/recon-tools.
    bin="$BIN"
    tools="${TOOLS:-$(dirname "$BIN")/recon-tools}"
else
    cargo build --release --quiet -p recon -p recon-tools
    release="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release"
    bin="$release/recon"
    tools="$release/recon-tools"
fi
fmt="wall %e s, user %U s, sys %S s, peak RSS %M KiB"

if [ ! -f "$dir/expected.csv" ]; then
    rm -rf "$dir"
    echo "== generate $n payments in $k merchants (seed $seed)"
    /usr/bin/time -f "$fmt" "$tools" generate --out "$dir" --payments "$n" --seed "$seed" \
        --date "$date" --partitions "$k" | grep -E '^ +M[0-9]+ ' || true
fi
# One merchant's statement of a large night exceeds the default max_file_mb (112).
grep -q '^max_file_mb' "$dir/recon.toml" || sed -i '0,/^output_dir/s//max_file_mb = 4000\noutput_dir/' "$dir/recon.toml"
master="recon_bench_shards_n${n}_k${k}"
if ! psql "$pg_admin" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$master'" | grep -q 1; then
    echo "== import into PostgreSQL database $master"
    psql "$pg_admin" -qc "CREATE DATABASE $master"
    RECON_DATABASE_URL="$pg_base/$master" "$bin" migrate --config "$dir/recon.toml" >/dev/null
    RECON_DATABASE_URL="$pg_base/$master?sslmode=disable" /usr/bin/time -f "$fmt" "$bin" ledger import \
        --config "$dir/recon.toml" --payments "$dir/payments.csv" --attempts "$dir/attempts.csv"
    psql "$pg_base/$master" -qc "VACUUM ANALYZE"
fi
fresh() {
    psql "$pg_admin" -qc "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
    psql "$pg_admin" -qc "CREATE DATABASE $1 TEMPLATE $master"
    echo "$pg_base/$1?sslmode=disable"
}
pg_cpu() { # CPU seconds the local PostgreSQL server has used so far: every postgres process's
    # own user+sys time, plus the reaped backends' (the postmaster's children's times)
    python3 - <<'PY'
import os
tick = os.sysconf("SC_CLK_TCK")
total = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{pid}/comm").read().strip() != "postgres":
            continue
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(f[11]) + int(f[12])
        parent = open(f"/proc/{int(f[1])}/comm").read().strip() if int(f[1]) > 1 else ""
        if parent != "postgres":  # the postmaster: its reaped children's times
            total += int(f[13]) + int(f[14])
    except (OSError, IndexError, ValueError):
        pass
print(f"{total / tick:.1f}")
PY
}
cpu() { # total user+sys seconds of GNU time lines in the files given
    cat "$@" | sed -E 's/.*user ([0-9.]+) s, sys ([0-9.]+) s.*/\1 \2/' | awk '{t += $1 + $2} END {printf "%.1f", t}'
}
mkdir -p "$dir/times"
# SHARDS_ONLY=1 keeps the one process's results of an earlier call (to re-measure shards).
if [ "${SHARDS_ONLY:-0}" != 1 ] || [ ! -f "$dir/out/whole/results.csv" ]; then
    rm -rf "$dir/out"
    echo "== one process"
    url="$(fresh recon_bench_shards_whole)"
    pg0=$(pg_cpu)
    RECON_DATABASE_URL="$url" /usr/bin/time -o "$dir/times/whole" -f "$fmt" "$bin" run \
        --config "$dir/recon.toml" --date "$date" --as-of "$as_of" --run-id whole >/dev/null
    pg1=$(pg_cpu)
    echo "  recon run: $(cat "$dir/times/whole")"
    echo "  PostgreSQL CPU: $(echo "$pg1 - $pg0" | bc) s"
    psql "$pg_admin" -qc "DROP DATABASE IF EXISTS recon_bench_shards_whole WITH (FORCE)"
fi

for s in "${counts[@]}"; do
    echo "== $s shards side by side, then the gather"
    rm -rf "$dir/out/s$s" "$dir"/out/s$s-s*
    url="$(fresh recon_bench_shards_s$s)"
    pg0=$(pg_cpu)
    started=$(date +%s.%N)
    pids=()
    for ((i = 0; i < s; i++)); do
        RECON_DATABASE_URL="$url" /usr/bin/time -o "$dir/times/s$s-$i" -f "$fmt" "$bin" run \
            --config "$dir/recon.toml" --date "$date" --as-of "$as_of" --shard "$i/$s" \
            --group "s$s" >"$dir/times/s$s-$i.out" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    shards_done=$(date +%s.%N)
    RECON_DATABASE_URL="$url" /usr/bin/time -o "$dir/times/s$s-gather" -f "$fmt" "$bin" gather \
        --config "$dir/recon.toml" --date "$date" --group "s$s" >"$dir/times/s$s-gather.out"
    ended=$(date +%s.%N)
    pg1=$(pg_cpu)
    for ((i = 0; i < s; i++)); do
        echo "  shard $i/$s: $(cat "$dir/times/s$s-$i")  [$(grep -Eo '[0-9]+ payments in scope' "$dir/times/s$s-$i.out" || true)]"
    done
    echo "  gather: $(cat "$dir/times/s$s-gather")"
    printf '  night: shards %.1f s side by side, gather %.1f s; shards total CPU %s s\n' \
        "$(echo "$shards_done - $started" | bc)" "$(echo "$ended - $shards_done" | bc)" \
        "$(cpu $(for ((i = 0; i < s; i++)); do echo "$dir/times/s$s-$i"; done))"
    echo "  PostgreSQL CPU, shards and gather: $(echo "$pg1 - $pg0" | bc) s"
    if cmp -s "$dir/out/whole/results.csv" "$dir/out/s$s/results.csv"; then
        echo "  results.csv: identical to one process's"
    else
        echo "  results.csv: DIFFERS from one process's"
    fi
    psql "$pg_admin" -qc "DROP DATABASE IF EXISTS recon_bench_shards_s$s WITH (FORCE)"
done
