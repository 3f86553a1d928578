#!/usr/bin/env python3
"""Peak RSS and wall time of `recon run` on hostile statement files (issue 33 point 3).

    bench/input_bounds.py RECON_BINARY WORKDIR [CASE ...] [--timeout S]

Writes, once, into WORKDIR: a job (recon.toml, an empty SQLite ledger) and the files
  garbage200m  a valid header, then 200 MB of random bytes
  line2g       a valid header, then one 2 GB line
  random2g     2 GB of random bytes
then runs `recon run` on each CASE (default: all three) as a child process and prints its exit
code, wall time and peak RSS (ru_maxrss from wait4, the child's VmHWM). A run still going
after --timeout seconds (default 600) is killed; its numbers are then lower bounds.
"""
import os, shutil, signal, subprocess, sys, threading, time

HEADER = b"id,reference,recipient,amount,currency,booked_at,type\n"
CASES = {
    "garbage200m": (HEADER, 200 << 20, "random"),
    "line2g": (HEADER, 2 << 30, "line"),
    "random2g": (b"", 2 << 30, "random"),
}
CONFIG = """timezone = "UTC"
database_url = "sqlite://recon.db"
output_dir = "out"

[[source]]
name = "psp"
format = "csv"
path = "statement.csv"
timestamp_format = "rfc3339"
completeness = "control_file"

[source.columns]
provider_txn_id = "id"
reference = "reference"
recipient = "recipient"
amount = "amount"
currency = "currency"
booked_at = "booked_at"
kind = "type"
"""


def write_case(path, header, size, kind):
    if os.path.exists(path) and os.path.getsize(path) == len(header) + size:
        return
    with open(path, "wb") as out:
        out.write(header)
        left = size
        chunk = b"x" * (1 << 20)
        with open("/dev/urandom", "rb") as rnd:
            while left:
                n = min(left, 1 << 20)
                out.write(rnd.read(n) if kind == "random" else chunk[:n])
                left -= n


def main():
    args = sys.argv[1:]
    timeout = 600.0
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = float(args[i + 1])
        del args[i : i + 2]
    binary, work, cases = os.path.abspath(args[0]), args[1], args[2:] or list(CASES)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "recon.toml"), "w") as f:
        f.write(CONFIG)
    for case in cases:
        header, size, kind = CASES[case]
        data = os.path.join(work, case + ".csv")
        write_case(data, header, size, kind)
        job = os.path.join(work, "job-" + case)
        shutil.rmtree(job, ignore_errors=True)
        os.makedirs(job)
        shutil.copy(os.path.join(work, "recon.toml"), job)
        os.symlink(data, os.path.join(job, "statement.csv"))
        with open(os.path.join(job, "payments.csv"), "w") as f:
            f.write("payment_id,recipient_account,amount,currency,status,created_at,started_at,attempt_id,provider_payment_id\n")
        subprocess.run([binary, "ledger", "import", "--config", os.path.join(job, "recon.toml"),
                        "--payments", os.path.join(job, "payments.csv")], check=True,
                       stdout=subprocess.DEVNULL)
        started = time.monotonic()
        child = subprocess.Popen(
            [binary, "run", "--config", os.path.join(job, "recon.toml"), "--date", "2026-11-10",
             "--as-of", "2026-11-20T00:00:00Z", "--run-id", "bench"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(job, "stderr.txt"), "wb"))
        killed = []
        def kill():
            killed.append(True)
            child.send_signal(signal.SIGKILL)
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, usage = os.wait4(child.pid, 0)
        timer.cancel()
        wall = time.monotonic() - started
        code = "killed" if killed else os.waitstatus_to_exitcode(status)
        with open(os.path.join(job, "stderr.txt"), "rb") as f:
            last = f.read()[-300:].decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        rejected = os.path.join(job, "out", "bench", "rejected.csv")
        rej = os.path.getsize(rejected) if os.path.exists(rejected) else 0
        print(f"{case:12} exit {code!s:6} wall {wall:8.1f} s  peak RSS {usage.ru_maxrss / 1024:8.0f} MiB"
              f"  rejected.csv {rej} bytes  | {last[0][:160]}", flush=True)
        shutil.rmtree(job, ignore_errors=True)


if __name__ == "__main__":
    main()
