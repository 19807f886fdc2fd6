#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Paired start-up timing (bench/startup.sh): run commands interleaved, round
by round (a new random order each round), and report per command the median
wall time from spawn to reaped, the median of its minor page faults (the whole
process tree's, from wait4), and ratios to reference commands.

  paired.py [--runs N] [--warmup N] [--ref NAME ...] [--json PATH]
            [--md PATH] [--title TEXT] NAME=COMMAND ...

COMMAND is split with shlex; it runs with this script's environment, stdout
to /dev/null, stderr kept aside and shown only if it fails.  Every command must exit 0 (a fast failure is not a
result).  Interleaving matters on a shared machine: a load spike then hits
every command of a round, not one command's whole series.
"""
import argparse
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time


def run_once(argv):
    devnull = os.open(os.devnull, os.O_RDWR)
    # stderr kept (an anonymous file, never read unless the command fails):
    # a failure says why, e.g. another run holding the same workspace
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                                       (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
    _, status, ru = os.wait4(pid, 0)
    t1 = time.perf_counter_ns()
    os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        err.seek(0)
        said = err.read()[-2000:].decode(errors="replace").rstrip()
        sys.exit("paired: %s exited with %d%s" % (shlex.join(argv),
                                                   os.waitstatus_to_exitcode(status),
                                                   ":\n" + said if said else ""))
    err.close()
    return (t1 - t0) / 1e6, ru.ru_minflt


def resolve(argv):
    if "/" not in argv[0]:
        for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
            p = os.path.join(d, argv[0])
            if os.access(p, os.X_OK):
                return [p] + argv[1:]
        sys.exit("paired: %s not found" % argv[0])
    return argv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ref", action="append", default=[])
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--title", default="Start-up")
    ap.add_argument("cmds", nargs="+")
    a = ap.parse_args()
    names, argvs = [], []
    for c in a.cmds:
        name, _, cmd = c.partition("=")
        names.append(name)
        argvs.append(resolve(shlex.split(cmd)))
    for r in a.ref:
        if r not in names:
            sys.exit("paired: no command named %s" % r)
    times = {n: [] for n in names}
    faults = {n: [] for n in names}
    order = list(range(len(names)))
    for rnd in range(a.warmup + a.runs):
        random.shuffle(order)
        for i in order:
            ms, flt = run_once(argvs[i])
            if rnd >= a.warmup:
                times[names[i]].append(ms)
                faults[names[i]].append(flt)
    med = {n: statistics.median(times[n]) for n in names}
    lines = ["### %s (median of %d interleaved runs each, kernel %s, %d CPUs, uid %d)"
             % (a.title, a.runs, platform.release(), os.cpu_count(), os.getuid()), ""]
    head = "| command | median ms | p25–p75 ms | minor faults |"
    rule = "|---|---:|---:|---:|"
    for r in a.ref:
        head += " vs %s |" % r
        rule += "---:|"
    lines += [head, rule]
    for n in names:
        q = statistics.quantiles(times[n], n=4) if len(times[n]) > 1 else [med[n]] * 3
        row = "| %s | %.2f | %.2f–%.2f | %d |" % (n, med[n], q[0], q[2],
                                               statistics.median(faults[n]))
        for r in a.ref:
            row += " %.2f× |" % (med[n] / med[r])
        lines.append(row)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "commands": [
                {"name": n, "command": shlex.join(argvs[i]), "times_ms": times[n],
                 "minflt": faults[n], "median_ms": med[n]}
                for i, n in enumerate(names)]}, f, indent=1)


if __name__ == "__main__":
    main()
