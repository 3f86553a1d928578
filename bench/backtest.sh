#!/usr/bin/env bash
# Backtest benchmark (issue 45): one job (SQLite) with DAYS recorded nights of N payments each,
# then `recon backtest` over all of them with a candidate rules folder, timed with a release
# build.
#   bench/backtest.sh [DAYS] [N] [SEED]        default: 30 100000 1
#   e.g. CARGO_TARGET_DIR=/var/tmp/recon-release bench/backtest.sh
# The job: `recon-tools generate` writes one day of N payments per seed (SEED, SEED+1, ...) for
# the days FIRST (default 2026-10-01) onwards; their ledgers are imported once, and their
# statement lines are re-cut by booking day (UTC) into the provider's daily files
# `psp-YYYY-MM-DD.csv`, each with its control file. Night by night, the day's file is delivered
# into the job's inbox, then `recon run --date D --as-of D+1T02:00Z` records the night (its
# inputs by sha256); the files of the days after the last night are delivered last, as a
# provider would keep delivering them. Then the candidate rules (the bundled rules with the
# fuzzy pass's `window_after` 72h -> 96h and `amount_tolerance_minor` 0 -> 50) are backtested
# over the DAYS nights. Exit 15 of `recon backtest` (flips into automatic transitions) is its
# expected answer here, not an error.
# Prints the recording runs' wall time, CPU and peak RSS (GNU time; each night and in total),
# and the backtest's, with its nights replayed / skipped and flips. The data stays in
# /var/tmp/recon-bench/backtest-<DAYS>x<N>/ (BENCH_DIR to move it; reused when its nights are
# recorded). BIN=path/to/recon (TOOLS=path/to/recon-tools, default beside it) times another
# build instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
days="${1:-30}"
n="${2:-100000}"
seed="${3:-1}"
first="${FIRST:-2026-10-01}"
if [ $((n % 1000)) -eq 0 ]; then label="$((n / 1000))k"; else label="$n"; fi
dir="${BENCH_DIR:-/var/tmp/recon-bench}/backtest-${days}x$label"
if [ -n "${BIN:-}" ]; then
    bin="$BIN"
    tools="${TOOLS:-$(dirname "$BIN")/recon-tools}"
else
    # Both binaries in one build: the recon library is compiled once, without the test features.
    cargo build --release --quiet -p recon -p recon-tools
    release="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release"
    bin="$release/recon"
    tools="$release/recon-tools"
fi
fmt="wall %e s, user %U s, sys %S s, peak RSS %M KiB"
day_of() { date -u -d "$first + $1 days" +%F; }
last="$(day_of $((days - 1)))"

if [ ! -f "$dir/recorded" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/gen" "$dir/feed" "$dir/inbox/psp"
    echo "== generate $days days of $n payments ($first .. $last, seeds $seed..$((seed + days - 1)))"
    start=$SECONDS
    for ((i = 0; i < days; i++)); do
        "$tools" generate --out "$dir/gen/$i" --payments "$n" --seed $((seed + i)) --date "$(day_of "$i")" >/dev/null
    done
    echo "generated in $((SECONDS - start)) s"
    # One ledger (the days' payments and attempts, in day order: creation order) and the
    # provider's daily files: every statement line in the file of its booking day (UTC), as a
    # daily `{date}` source claims, with `lines=` and `sha256=` in its control file.
    python3 - "$dir" "$days" <<'EOF'
import csv, hashlib, os, sys
d, days = sys.argv[1], int(sys.argv[2])
for name in ("payments.csv", "attempts.csv"):
    with open(os.path.join(d, name), "wb") as out:
        for i in range(days):
            with open(os.path.join(d, "gen", str(i), name), "rb") as f:
                header = f.readline()
                if i == 0:
                    out.write(header)
                while chunk := f.read(1 << 20):
                    out.write(chunk)
# Streamed: a generated day's lines are booked on its day and the two after it, so once day
# i is read, every file before day i is complete.
by_day, done, count, header = {}, set(), 0, None
def flush(before):
    global count
    for day in sorted(k for k in by_day if before is None or k < before):
        rows = by_day.pop(day)
        rows.sort(key=lambda row: row[booked])
        path = os.path.join(d, "feed", f"psp-{day}.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        with open(path, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        with open(path + ".ctl", "w") as f:
            f.write(f"lines={len(rows)}\nsha256={sha}\n")
        done.add(day)
        count += len(rows)
for i in range(days):
    first_day = None
    with open(os.path.join(d, "gen", str(i), "statement.csv"), newline="") as f:
        r = csv.reader(f)
        header = next(r)
        booked = header.index("booked_at")
        for row in r:
            day = row[booked][:10]
            if day in done:
                sys.exit(f"day {i}: a line booked on {day}, whose file is written")
            by_day.setdefault(day, []).append(row)
            first_day = day if first_day is None else min(first_day, day)
    flush(first_day)
flush(None)
print(f"{count} statement lines in {len(done)} daily files ({min(done)} .. {max(done)})")
EOF
    rm -rf "$dir/gen"
    # The job: the generated job's settings, the provider's daily files, the bundled rules.
    cat >"$dir/recon.toml" <<EOF
# bench/backtest.sh: $days nights of $n payments (recon-tools generate, seeds $seed..$((seed + days - 1)), $first .. $last).
timezone = "UTC"
database_url = "sqlite://recon.db"
output_dir = "out"
stale_submitting_minutes = 30
settlement_lag_hours = 24
carry_over_days = 14

[[source]]
name = "psp"
format = "csv"
path = "inbox/psp/psp-{date}.csv"
timezone = "UTC"
timestamp_format = "rfc3339"
decimal_separator = "."
completeness = "control_file"

[source.columns]
provider_txn_id = "txn_id"
reference = "reference"
recipient = "beneficiary"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
kind = "type"
EOF
    echo "== import $((days * n)) payments"
    "$bin" migrate --config "$dir/recon.toml" >/dev/null
    /usr/bin/time -o "$dir/import-time.txt" -f "$fmt" "$bin" ledger import --config "$dir/recon.toml" \
        --payments "$dir/payments.csv" --attempts "$dir/attempts.csv" >"$dir/import.log" 2>&1
    tail -1 "$dir/import-time.txt"
    rm -f "$dir/payments.csv" "$dir/attempts.csv"
    echo "== record $days nights"
    mkdir -p "$dir/out"
    for ((i = 0; i < days; i++)); do
        day="$(day_of "$i")"
        as_of="$(day_of $((i + 1)))T02:00:00Z"
        # The day's file arrives the morning after it, before the night's run.
        for f in "$dir/feed/psp-$day.csv" "$dir/feed/psp-$day.csv.ctl"; do
            [ ! -f "$f" ] || mv "$f" "$dir/inbox/psp/"
        done
        /usr/bin/time -o "$dir/record-times.txt" -a -f "$day $fmt" \
            "$bin" run --config "$dir/recon.toml" --date "$day" --as-of "$as_of" \
            --run-id "night-$day" >"$dir/out/night-$day.log" 2>&1 ||
            { echo "recon run $day failed:"; tail -20 "$dir/out/night-$day.log"; exit 1; }
        tail -1 "$dir/record-times.txt"
        # The night's reports (about 80 MB a night) are not what a backtest reads: keep its
        # summary.json.
        find "$dir/out/night-$day" -type f ! -name summary.json -delete
    done
    # The files of the days after the last night (payouts booked then) arrive later: the
    # backtest must replay each night on the files its run read, not on these.
    mv "$dir/feed/"* "$dir/inbox/psp/" 2>/dev/null || true
    rmdir "$dir/feed"
    touch "$dir/recorded"
fi
echo "== the $days recording runs (recon run, one a night)"
awk '/ wall / {w += $3; u += $6; s += $9; if ($13 > m) m = $13}
     END {printf "total: wall %.1f s, user %.1f s, sys %.1f s; per night %.2f s wall; peak RSS %d KiB (largest night)\n", w, u, s, w / NR, m}' \
    "$dir/record-times.txt"

# The candidate: the bundled rules with the fuzzy pass's window widened and a 50-cent tolerance.
rm -rf "$dir/rules-candidate"
mkdir -p "$dir/rules-candidate"
sed -e 's/^window_after = "72h"$/window_after = "96h"/' \
    -e 's/^amount_tolerance_minor = 0$/amount_tolerance_minor = 50/' \
    rules/default.toml >"$dir/rules-candidate/default.toml"
grep -q '^window_after = "96h"$' "$dir/rules-candidate/default.toml"
grep -q '^amount_tolerance_minor = 50$' "$dir/rules-candidate/default.toml"

# A job recorded by an older recon gets this one's migrations (the backtest reads its runs).
"$bin" migrate --config "$dir/recon.toml" >/dev/null
rm -rf "$dir/out/backtest"
echo "== backtest $first .. $last"
status=0
# The job file under the same path as the recording runs had it: a night's replay reads the
# files whose paths, as resolved from that spelling, its run recorded (another spelling of the
# same folder reads none of them; docs/benchmark.md "Backtest").
/usr/bin/time -o "$dir/backtest-time.txt" -f "$fmt" \
    "$bin" backtest --config "$dir/recon.toml" --rules "$dir/rules-candidate" \
    --from "$first" --to "$last" --out "$dir/out/backtest" >"$dir/backtest.out" 2>"$dir/backtest.log" ||
    status=$?
cat "$dir/backtest.out"
if [ "$status" -ne 0 ] && [ "$status" -ne 15 ]; then
    echo "recon backtest failed (exit $status):"
    tail -20 "$dir/backtest.log"
    exit "$status"
fi
echo "exit $status (15: flips into automatic transitions; 0: none)"
echo "backtest: $(tail -1 "$dir/backtest-time.txt")"
replayed="$(sed -nE '1s/.* on ([0-9]+) night\(s\).*/\1/p' "$dir/backtest.out")"
skipped="$(grep -c '^skipped ' "$dir/backtest.out" || true)"
flips="$(sed -nE '1s/.* change ([0-9]+) row\(s\).*/\1/p' "$dir/backtest.out")"
wall="$(tail -1 "$dir/backtest-time.txt" | awk '{print $2}')"
echo "nights replayed: ${replayed:-?}, skipped: $skipped, flips: ${flips:-0}; per night replayed: $(awk -v w="$wall" -v n="${replayed:-0}" 'BEGIN {if (n > 0) printf "%.2f s", w / n; else print "-"}')"
ls -l "$dir/out/backtest"
