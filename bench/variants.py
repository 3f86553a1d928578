#!/usr/bin/env python3
"""Variants of a benchmark data set, to check that a run's cost does not depend on how the ids
are spelled or in which order the rows come:

  upper     every UUID upper-cased (the same ids as SQL Server prints a uniqueidentifier)
  shuffled  the rows of every input file in a random (seeded) order

Usage: bench/variants.py upper|shuffled [N] [SEED]
Writes <BENCH_DIR>/n<N>-s<SEED>-<variant>/ beside bench/run.sh's data (payments, attempts,
statement with its control file, expected outcomes, recon.toml) and imports its ledger with the
release `recon` (RECON to choose another). Compare with the original on one binary in
alternation, e.g. `bench/compare-data.sh BIN DIR_A DIR_B`.
"""
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys

from release import recon_bin

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FILES = ("payments.csv", "attempts.csv", "statement.csv", "expected.csv")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("upper", "shuffled"):
        sys.exit(__doc__.strip().split("\n\n")[1])
    mode = sys.argv[1]
    n = sys.argv[2] if len(sys.argv) > 2 else "1000000"
    seed = sys.argv[3] if len(sys.argv) > 3 else "1"
    base = os.environ.get("BENCH_DIR", "/var/tmp/recon-bench")
    src = os.path.join(base, f"n{n}-s{seed}")
    if not os.path.exists(os.path.join(src, "expected.csv")):
        sys.exit(f"no benchmark data in {src}: run bench/run.sh {n} {seed} first")
    dst = f"{src}-{mode}"
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    rng = random.Random(int(seed))
    for name in FILES:
        with open(os.path.join(src, name), newline="") as f:
            head, *body = f.readlines()
        if mode == "upper":
            body = [UUID.sub(lambda m: m.group(0).upper(), line) for line in body]
        elif name != "expected.csv":
            rng.shuffle(body)
        with open(os.path.join(dst, name), "w", newline="") as f:
            f.write(head)
            f.writelines(body)
    shutil.copy(os.path.join(src, "recon.toml"), dst)
    # The control file vouches for the statement's content.
    with open(os.path.join(dst, "statement.csv"), "rb") as f:
        data = f.read()
    lines = data.count(b"\n") - 1
    with open(os.path.join(dst, "statement.csv.ctl"), "w") as f:
        f.write(f"lines={lines}\nsha256={hashlib.sha256(data).hexdigest()}\n")
    recon = recon_bin()
    env = {**os.environ, "RECON_DATABASE_URL": "sqlite://" + os.path.join(dst, "recon.db")}
    cfg = os.path.join(dst, "recon.toml")
    subprocess.run([recon, "migrate", "--config", cfg], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([recon, "ledger", "import", "--config", cfg, "--payments",
                    os.path.join(dst, "payments.csv"), "--attempts", os.path.join(dst, "attempts.csv")],
                   env=env, check=True)
    print(dst)


if __name__ == "__main__":
    main()
