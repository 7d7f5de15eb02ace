#!/usr/bin/env python3
"""Run a command RUNS times; print the median and best wall time in ms and
the peak RSS in KiB.  stdout of the command is discarded.

Peak RSS comes from GNU time(1) in one extra run: Linux keeps the parent's
high-water mark in a forked child's maxrss across exec, so a measurement
forked from python would report python's own size.
Usage: measure.py RUNS CMD [ARGS...]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

runs = int(sys.argv[1])
cmd = sys.argv[2:]
walls = []
for _ in range(runs):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    walls.append((time.perf_counter() - t0) * 1000)
    if p.returncode not in (0, 3):
        sys.exit(f"measure: {cmd[0]} exited {p.returncode}")
with tempfile.NamedTemporaryFile("r") as f:
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f.name] + cmd,
                   stdout=subprocess.DEVNULL)
    rss = int(f.read().split()[-1])
print(f"{statistics.median(walls):.2f} {min(walls):.2f} {rss}")
