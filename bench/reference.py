#!/usr/bin/env python3
"""A read-and-label reference for issue 43's speed bar: what a night costs when a program only
reads the generated files and gives every payment and every statement line one label, with
nothing else (no rules, no windows, no evidence, no database, no reports).

    bench/reference.py DIR [OUT.csv]     # DIR: a `recon-tools generate` folder

DuckDB (PyPI `duckdb`, in a venv: `python3 -m venv V && V/bin/pip install duckdb`) reads
payments.csv, attempts.csv and every statement*.csv of DIR, joins the lines to payments by the
provider id of any attempt, labels each payment (MATCHED, AMOUNT_MISMATCH, CURRENCY_MISMATCH,
DUPLICATE_AT_PROVIDER, FAILED_BUT_PAID, PAID_WHILE_PENDING, MISSING_AT_PROVIDER, FAILED_OK,
NOT_SUBMITTED) and each line no payment claims (ORPHAN_AT_PROVIDER), and writes one CSV row each,
as recon writes results.csv. Amounts are DECIMAL (exact). It prints its wall time and the count
per label. `recon run`'s bar is at most twice this time on the same files and host.
"""
import pathlib
import sys
import time

import duckdb

SQL = """
CREATE TEMP TABLE p AS SELECT * FROM read_csv(?, header = true, all_varchar = true);
CREATE TEMP TABLE a AS SELECT * FROM read_csv(?, header = true, all_varchar = true);
CREATE TEMP TABLE s AS SELECT * FROM read_csv(?, header = true, all_varchar = true,
    union_by_name = true);
CREATE TEMP TABLE ids AS
    SELECT DISTINCT payment_id, provider_payment_id AS pid FROM a
    WHERE provider_payment_id IS NOT NULL AND provider_payment_id <> ''
    UNION SELECT payment_id, provider_payment_id FROM p
    WHERE provider_payment_id IS NOT NULL AND provider_payment_id <> '';
CREATE TEMP TABLE hits AS
    SELECT ids.payment_id, s.txn_id, CAST(s.amount AS DECIMAL(38, 4)) AS amount, s.currency
    FROM s JOIN ids ON s.txn_id = ids.pid;
CREATE TEMP TABLE per_payment AS
    SELECT payment_id, count(*) AS n, min(amount) AS amount, min(currency) AS currency,
           string_agg(txn_id, ';' ORDER BY txn_id) AS lines
    FROM hits GROUP BY payment_id;
CREATE TEMP TABLE labelled AS
    SELECT p.payment_id AS id, coalesce(h.lines, '') AS lines,
        CASE
            WHEN h.n > 1 THEN 'DUPLICATE_AT_PROVIDER'
            WHEN h.n = 1 AND p.status = 'FAILED' THEN 'FAILED_BUT_PAID'
            WHEN h.n = 1 AND p.status = 'PENDING' THEN 'PAID_WHILE_PENDING'
            WHEN h.n = 1 AND h.currency <> p.currency THEN 'CURRENCY_MISMATCH'
            WHEN h.n = 1 AND h.amount <> CAST(p.amount AS DECIMAL(38, 4)) THEN 'AMOUNT_MISMATCH'
            WHEN h.n = 1 THEN 'MATCHED'
            WHEN p.status = 'SUCCEEDED' THEN 'MISSING_AT_PROVIDER'
            WHEN p.status = 'FAILED' THEN 'FAILED_OK'
            ELSE 'NOT_SUBMITTED'
        END AS label
    FROM p LEFT JOIN per_payment h USING (payment_id)
    UNION ALL
    SELECT '' AS id, s.txn_id AS lines, 'ORPHAN_AT_PROVIDER' AS label
    FROM s ANTI JOIN ids ON s.txn_id = ids.pid;
"""


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = pathlib.Path(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else str(d / "reference.csv")
    statements = sorted(str(f) for f in d.glob("statement*.csv"))
    if not statements:
        sys.exit(f"{d}: no statement*.csv")
    started = time.monotonic()
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    params = [str(d / "payments.csv"), str(d / "attempts.csv"), statements]
    statements_sql = [x for x in SQL.split(";\n") if x.strip()]
    binds = {0: [params[0]], 1: [params[1]], 2: [params[2]]}
    for i, stmt in enumerate(statements_sql):
        con.execute(stmt, binds.get(i, []))
    con.execute(f"COPY labelled TO '{out}' (HEADER, DELIMITER ',')")
    counts = con.execute("SELECT label, count(*) FROM labelled GROUP BY 1 ORDER BY 1").fetchall()
    elapsed = time.monotonic() - started
    print(f"read and labelled in {elapsed:.2f} s -> {out}")
    for label, n in counts:
        print(f"  {label:<24} {n}")


if __name__ == "__main__":
    main()
