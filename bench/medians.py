#!/usr/bin/env python3
"""Summarises timing lines `NAME WALL USER SYS MAXRSS_KIB` (GNU time's %e %U %S %M) by NAME:
median wall time with its range, median user and system time, the largest peak RSS."""
import collections
import statistics as st
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, *v = line.split()
    runs[name].append([float(x) for x in v])
for name, rs in runs.items():
    wall = [r[0] for r in rs]
    print("%s: wall median %.2f s (min %.2f, max %.2f), user %.2f s, sys %.2f s, peak RSS %.0f MB, %d runs"
          % (name, st.median(wall), min(wall), max(wall), st.median(r[1] for r in rs),
             st.median(r[2] for r in rs), max(r[3] for r in rs) / 1024, len(rs)))
