#!/usr/bin/env python3
"""What the database engine alone needs for a night's work at benchmark scale: the floor under
`recon run`'s and `recon ledger import`'s times that no change to recon's own code can go below.

Each measurement does the same database work as recon, with bare statements from Python's
sqlite3 module (C-level executemany) or from psql, and nothing else running in the process:

  sqlite-tx   the run's write transaction on a fresh copy of the imported ledger: the guarded
              transitions (UPDATE … WHERE payment_id AND status AND attempt_id), their history
              rows, the REVIEW tickets with their real evidence and the tickets' history, then
              the commit (WAL, synchronous=NORMAL, as recon opens the database)
  sqlite-import  the ledger import's inserts into a freshly migrated database (secondary
              indexes dropped first and built after, as recon does), then the commit
  pg-tx       the same transaction on a fresh copy of the PostgreSQL template database, each
              part as one statement in the server (rows sent with COPY into temporary tables)
  pg-import   COPY of the payments and attempts files into a freshly migrated database

Usage (after bench/run.sh N SEED, and BENCH_DB=postgres bench/run.sh N SEED for the pg-*):
  bench/floor.py sqlite-tx|sqlite-import|pg-tx|pg-import [N] [SEED]
Environment: BENCH_DIR (default /var/tmp/recon-bench), RECON (the recon binary, for
`recon migrate`; default: the release build), RECON_TEST_PG_URL (the PostgreSQL admin URL),
TEMPLATE (pg-tx: the imported database to copy; default bench/run.sh's).
Times are wall seconds of a single run: compare them with recon's own on the same host, in
alternation, as bench/compare.sh does.
"""
import csv
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from release import recon_bin

NOW = "2026-12-02 00:00:00.000000"


def usage():
    print(__doc__.strip().split("\n\n")[-2], file=sys.stderr)
    sys.exit(2)


def bench_dir(n, seed):
    base = os.environ.get("BENCH_DIR", "/var/tmp/recon-bench")
    d = os.path.join(base, f"n{n}-s{seed}")
    if not os.path.exists(os.path.join(d, "expected.csv")):
        sys.exit(f"no benchmark data in {d}: run bench/run.sh {n} {seed} first")
    return d


def transitions(d):
    """(payment_id, to_status, provider id) of every transition of the benchmark's run."""
    path = os.path.join(d, "out", "bench", "results.csv")
    if not os.path.exists(path):
        sys.exit(f"no {path}: run bench/run.sh first (its run writes the transitions planned)")
    out = []
    for r in csv.DictReader(open(path, newline="")):
        if r["action"].startswith("transition:"):
            out.append((r["payment_id"], r["action"].split(":", 1)[1], r["provider_txn_id"] or None))
    return out


TICKET_COLUMNS = ("dedupe_key, kind, severity, payment_id, line_ids, amount_minor, currency, "
                  "evidence, evidence_sha256, evidence_as_of")


def tickets(d):
    """The tickets of the benchmark's SQLite run, as recon wrote them (run.db of bench/run.sh)."""
    path = os.path.join(d, "run.db")
    if not os.path.exists(path):
        sys.exit(f"no {path}: run bench/run.sh (SQLite) first")
    src = sqlite3.connect(path)
    return src.execute(f"SELECT {TICKET_COLUMNS} FROM review_tickets ORDER BY ticket_id").fetchall()


def remove_db(path):
    """A SQLite database file with its WAL and shared-memory files."""
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(path + ext):
            os.remove(path + ext)


def fresh_copy(src, dst):
    remove_db(dst)
    shutil.copy(src, dst)


def sqlite_tx(d):
    ts, tk = transitions(d), tickets(d)
    db = os.path.join(d, "floor.db")
    fresh_copy(os.path.join(d, "recon.db"), db)
    c = sqlite3.connect(db, isolation_level=None)
    for p in ("journal_mode=wal", "synchronous=normal", "foreign_keys=on", "cache_size=-16384"):
        c.execute("PRAGMA " + p)
    state = {pid: (s, a) for pid, s, a in c.execute("SELECT payment_id, status, attempt_id FROM payments")}
    upd = [(to, pp, NOW, pid, state[pid][0], state[pid][1]) for pid, to, pp in ts]
    hist = [(pid, state[pid][0], to, state[pid][1], pp, "", "recon", "floor", "floor", NOW)
            for pid, to, pp in ts]
    t = [time.perf_counter()]
    c.execute("BEGIN")
    c.executemany("UPDATE payments SET status = ?, provider_payment_id = coalesce(?, provider_payment_id), "
                  "updated_at = ? WHERE payment_id = ? AND status = ? AND attempt_id IS ?", upd)
    c.executemany("INSERT INTO payment_status_history (payment_id, from_status, to_status, attempt_id, "
                  "provider_payment_id, prior_provider_payment_id, actor, run_id, reason, changed_at) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?)", hist)
    t.append(time.perf_counter())
    c.executemany(f"INSERT INTO review_tickets ({TICKET_COLUMNS}, status, created_run_id, last_seen_run_id, "
                  "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,'OPEN','floor','floor','" + NOW + "')", tk)
    c.execute("INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, run_id, note, "
              "new_sha256, changed_at) SELECT ticket_id, NULL, 'OPEN', 'recon', 'floor', 'created', "
              "evidence_sha256, created_at FROM review_tickets WHERE created_run_id = 'floor'")
    t.append(time.perf_counter())
    c.execute("COMMIT")
    t.append(time.perf_counter())
    c.close()
    print(f"sqlite-tx: {len(ts)} transitions {t[1] - t[0]:.2f} s, {len(tk)} tickets "
          f"({sum(len(x[7]) for x in tk) / 1e6:.0f} MB evidence) {t[2] - t[1]:.2f} s, "
          f"commit {t[3] - t[2]:.2f} s; total {t[3] - t[0]:.2f} s")
    remove_db(db)


def ledger_rows(d):
    def ts(s):
        # recon's stored form: fixed-width UTC text.
        return s.replace("T", " ").replace("Z", ".000000") if s else None

    def minor(s):
        units, _, frac = s.partition(".")
        return int(units + frac.ljust(2, "0"))  # the benchmark's currencies have 2 or 0 decimals

    pay, att = [], []
    with open(os.path.join(d, "payments.csv"), newline="") as f:
        r = csv.reader(f)
        next(r)
        for x in r:
            pay.append((x[0], x[1], minor(x[2]), x[3], x[4], ts(x[5]), ts(x[6]), x[7] or None,
                        x[8] or None, ts(x[5])))
    with open(os.path.join(d, "attempts.csv"), newline="") as f:
        r = csv.reader(f)
        next(r)
        for x in r:
            att.append((x[0], x[1], ts(x[2]), ts(x[3]), x[4] or None, x[5] or None, x[6] or None))
    return pay, att


SECONDARY = {
    "payments_started_at": "CREATE INDEX payments_started_at ON payments (started_at)",
    "payments_created_at": "CREATE INDEX payments_created_at ON payments (created_at)",
    "payment_attempts_payment": "CREATE INDEX payment_attempts_payment ON payment_attempts (payment_id)",
    "payment_attempts_started_at": "CREATE INDEX payment_attempts_started_at ON payment_attempts (started_at)",
}


def sqlite_import(d):
    pay, att = ledger_rows(d)
    db = os.path.join(d, "floor-import.db")
    remove_db(db)
    subprocess.run([recon_bin(), "migrate", "--config", os.path.join(d, "recon.toml")],
                   env={**os.environ, "RECON_DATABASE_URL": "sqlite://" + db},
                   check=True, stdout=subprocess.DEVNULL)
    c = sqlite3.connect(db, isolation_level=None)
    for p in ("journal_mode=wal", "synchronous=full", "foreign_keys=off", "cache_size=-262144"):
        c.execute("PRAGMA " + p)
    t = [time.perf_counter()]
    c.execute("BEGIN")
    for name in SECONDARY:
        c.execute("DROP INDEX " + name)
    c.executemany("INSERT INTO payments (payment_id, recipient_account, amount_minor, currency, status, "
                  "created_at, started_at, attempt_id, provider_payment_id, updated_at) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?)", pay)
    t.append(time.perf_counter())
    c.executemany("INSERT INTO payment_attempts (attempt_id, payment_id, started_at, finished_at, outcome, "
                  "provider_payment_id, error_detail) VALUES (?,?,?,?,?,?,?)", att)
    t.append(time.perf_counter())
    for sql in SECONDARY.values():
        c.execute(sql)
    t.append(time.perf_counter())
    c.execute("COMMIT")
    t.append(time.perf_counter())
    c.close()
    n = len(pay) + len(att)
    print(f"sqlite-import: payments {t[1] - t[0]:.2f} s, attempts {t[2] - t[1]:.2f} s, indexes "
          f"{t[3] - t[2]:.2f} s, commit {t[4] - t[3]:.2f} s; {n} rows in {t[4] - t[0]:.2f} s "
          f"= {n / (t[4] - t[0]):,.0f} rows/s")
    remove_db(db)


def pg_urls():
    admin = os.environ.get("RECON_TEST_PG_URL", "postgres://root@127.0.0.1:5432/test")
    return admin, admin.rsplit("/", 1)[0]


def psql(url, script):
    """Runs a psql script with \\timing; returns the (statement tag, ms) of each timed statement."""
    out = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", url], input=script,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    timed, tag = [], None
    for line in out.stdout.splitlines():
        if line.startswith("Time: "):
            timed.append((tag, float(line.split()[1])))
            tag = None
        elif line and not line.startswith(" "):
            tag = line
    return timed


def copy_text(v):
    if v is None:
        return "\\N"
    return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def pg_tx(d, n, seed):
    ts, tk = transitions(d), tickets(d)
    admin, base = pg_urls()
    template = os.environ.get("TEMPLATE", f"recon_bench_n{n}_s{seed}")
    psql(admin, f"DROP DATABASE IF EXISTS recon_bench_floor WITH (FORCE);\n"
                f"CREATE DATABASE recon_bench_floor TEMPLATE {template};\n")
    url = base + "/recon_bench_floor"
    led = sqlite3.connect(os.path.join(d, "recon.db"))
    state = {pid: (s, a) for pid, s, a in led.execute("SELECT payment_id, status, attempt_id FROM payments")}
    ts = [(pid, state[pid][0], to, state[pid][1], pp) for pid, to, pp in ts]
    lines = ["BEGIN;",
             "CREATE TEMP TABLE v (payment_id text, from_status text, to_status text, attempt_id text, "
             "ppid text);",
             "CREATE TEMP TABLE t (" + ", ".join(
                 c + (" bigint" if c == "amount_minor" else " text")
                 for c in TICKET_COLUMNS.split(", ")) + ");",
             "\\timing on",
             "COPY v FROM STDIN;"]
    lines += ["\t".join(copy_text(x) for x in row) for row in ts] + ["\\."]
    lines.append("COPY t FROM STDIN;")
    lines += ["\t".join(copy_text(x) for x in row) for row in tk] + ["\\."]
    lines.append(
        "WITH u AS (UPDATE payments p SET status = v.to_status, provider_payment_id = "
        "coalesce(v.ppid, p.provider_payment_id), updated_at = now() FROM v "
        "WHERE p.payment_id = v.payment_id AND p.status = v.from_status "
        "AND p.attempt_id IS NOT DISTINCT FROM v.attempt_id "
        "RETURNING p.payment_id, v.from_status, v.to_status, v.attempt_id, v.ppid) "
        "INSERT INTO payment_status_history (payment_id, from_status, to_status, attempt_id, "
        "provider_payment_id, prior_provider_payment_id, actor, run_id, reason, changed_at) "
        "SELECT payment_id, from_status, to_status, attempt_id, ppid, '', 'recon', 'floor', 'floor', "
        "now() FROM u;")
    lines.append(
        f"WITH c AS (INSERT INTO review_tickets ({TICKET_COLUMNS}, status, created_run_id, "
        f"last_seen_run_id, created_at) SELECT {TICKET_COLUMNS}, 'OPEN', 'floor', 'floor', now() "
        "FROM t ON CONFLICT (dedupe_key) DO NOTHING RETURNING ticket_id, evidence_sha256) "
        "INSERT INTO review_ticket_history (ticket_id, from_status, to_status, actor, run_id, note, "
        "new_sha256, changed_at) SELECT ticket_id, NULL, 'OPEN', 'recon', 'floor', 'created', "
        "evidence_sha256, now() FROM c;")
    lines.append("COMMIT;")
    timed = psql(url, "\n".join(lines) + "\n")
    ms = [t for _, t in timed]
    # COPY v, COPY t, transitions + history, tickets + history, commit
    print(f"pg-tx: rows sent {(ms[0] + ms[1]) / 1000:.2f} s, {len(ts)} transitions {ms[2] / 1000:.2f} s, "
          f"{len(tk)} tickets {ms[3] / 1000:.2f} s, commit {ms[4] / 1000:.2f} s; "
          f"total {sum(ms) / 1000:.2f} s")
    psql(admin, "DROP DATABASE IF EXISTS recon_bench_floor WITH (FORCE);\n")


def pg_import(d):
    admin, base = pg_urls()
    psql(admin, "DROP DATABASE IF EXISTS recon_bench_floor_import WITH (FORCE);\n"
                "CREATE DATABASE recon_bench_floor_import;\n")
    url = base + "/recon_bench_floor_import"
    subprocess.run([recon_bin(), "migrate", "--config", os.path.join(d, "recon.toml")],
                   env={**os.environ, "RECON_DATABASE_URL": url}, check=True, stdout=subprocess.DEVNULL)
    pay, att = ledger_rows(d)
    # In primary-key order, as recon sends them (random keys would dirty a random index page each).
    pay.sort()
    att.sort()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, rows in (("payments", pay), ("attempts", att)):
            path = os.path.join(tmp, name + ".tsv")
            with open(path, "w") as f:
                for row in rows:
                    f.write("\t".join(copy_text(x) for x in row) + "\n")
            files.append(path)
        script = "\n".join([
            "BEGIN;",
            "ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_payment_id_fkey;",
            "DROP INDEX payments_started_at, payments_created_at, payment_attempts_payment, "
            "payment_attempts_started_at;",
            "\\timing on",
            f"\\copy payments (payment_id, recipient_account, amount_minor, currency, status, created_at, "
            f"started_at, attempt_id, provider_payment_id, updated_at) FROM '{files[0]}'",
            f"\\copy payment_attempts (attempt_id, payment_id, started_at, finished_at, outcome, "
            f"provider_payment_id, error_detail) FROM '{files[1]}'",
            "CREATE INDEX payments_started_at ON payments (started_at);",
            "CREATE INDEX payments_created_at ON payments (created_at);",
            "CREATE INDEX payment_attempts_payment ON payment_attempts (payment_id);",
            "CREATE INDEX payment_attempts_started_at ON payment_attempts (started_at);",
            "ALTER TABLE payment_attempts ADD CONSTRAINT payment_attempts_payment_id_fkey "
            "FOREIGN KEY (payment_id) REFERENCES payments (payment_id);",
            "COMMIT;",
        ]) + "\n"
        ms = [t for _, t in psql(url, script)]
    n = len(pay) + len(att)
    total = sum(ms) / 1000
    print(f"pg-import: COPY payments {ms[0] / 1000:.2f} s, attempts {ms[1] / 1000:.2f} s, indexes and "
          f"foreign key {sum(ms[2:7]) / 1000:.2f} s, commit {ms[7] / 1000:.2f} s; {n} rows in "
          f"{total:.2f} s = {n / total:,.0f} rows/s (rows read from a local file by the server's "
          f"client, psql; no parsing or checking)")
    psql(admin, "DROP DATABASE IF EXISTS recon_bench_floor_import WITH (FORCE);\n")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("sqlite-tx", "sqlite-import", "pg-tx", "pg-import"):
        usage()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    d = bench_dir(n, seed)
    what = sys.argv[1]
    if what == "sqlite-tx":
        sqlite_tx(d)
    elif what == "sqlite-import":
        sqlite_import(d)
    elif what == "pg-tx":
        pg_tx(d, n, seed)
    else:
        pg_import(d)


if __name__ == "__main__":
    main()
