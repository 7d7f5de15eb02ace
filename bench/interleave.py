#!/usr/bin/env python3
"""Run several commands in turn, ROUNDS times, interleaved: every round
runs each once, so a machine that slows down or speeds up during the
run affects them all alike.  Prints, per command, "NAME MEDIAN P25 MIN"
in ms.  stdout of the commands is discarded; a command that exits other
than 0 stops the run.
Usage: interleave.py ROUNDS NAME=CMD [NAME=CMD ...]   (CMD split as sh words)"""
import shlex
import statistics
import subprocess
import sys
import time

rounds = int(sys.argv[1])
cmds = []
for arg in sys.argv[2:]:
    name, _, cmd = arg.partition('=')
    cmds.append((name, shlex.split(cmd)))
walls = {name: [] for name, _ in cmds}
for _ in range(rounds):
    for name, cmd in cmds:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        walls[name].append((time.perf_counter() - t0) * 1000)
        if p.returncode != 0:
            sys.exit(f"interleave: {name} exited {p.returncode}")
for name, _ in cmds:
    w = sorted(walls[name])
    print(f"{name} {statistics.median(w):.2f} {w[len(w) // 4]:.2f} {w[0]:.2f}")
