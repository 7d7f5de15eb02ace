#!/usr/bin/env python3
"""Run several commands in turn, ROUNDS times, interleaved: every round
runs each once, so a machine that slows down or speeds up during the
run affects them all alike.  Prints, per command, "NAME MEDIAN P25 MIN"
in ms.  stdout of the commands is discarded; a command that exits other
than 0 stops the run.
Usage: interleave.py ROUNDS NAME=CMD [NAME=CMD ...]   (CMD split as sh words)
Leading VAR=VALUE words of a CMD go into its environment, as in sh: no
wrapper (sh, env) is timed with the command."""
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

rounds = int(sys.argv[1])
cmds = []
for arg in sys.argv[2:]:
    name, _, cmd = arg.partition('=')
    words = shlex.split(cmd)
    env = dict(os.environ)
    while words and re.match(r'[A-Za-z_][A-Za-z0-9_]*=', words[0]):
        var, _, value = words.pop(0).partition('=')
        env[var] = value
    cmds.append((name, words, env))
walls = {name: [] for name, _, _ in cmds}
for _ in range(rounds):
    for name, cmd, env in cmds:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env)
        walls[name].append((time.perf_counter() - t0) * 1000)
        if p.returncode != 0:
            sys.exit(f"interleave: {name} exited {p.returncode}")
for name, _, _ in cmds:
    w = sorted(walls[name])
    print(f"{name} {statistics.median(w):.2f} {w[len(w) // 4]:.2f} {w[0]:.2f}")
