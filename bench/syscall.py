#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Syscall-heavy jobs, sandboxed against unsandboxed (issue 18 target 5,
`make bench`):

    python3 bench/syscall.py [--agentbox build/agentbox] [--runs 7] [--json FILE]

Jobs (each timed inside its environment with bash's EPOCHREALTIME, so the
sandbox's start-up is not counted; the start-up has its own bench):
  find     find /usr -type f > /dev/null      (warm cache, open/getdents-heavy)
  cc       gcc -O0 -c of six of this repository's .c files, copied into the
           workspace (fork/exec/mmap/read-heavy)
  openat   a C loop of 100,000 openat+close of /usr/include/stdio.h, the
           cost of one open in isolation
  untar    tar x of /usr/include (a tarball made at setup) into the
           workspace, then rm -rf: creation-heavy (every file made through
           the creator, include/agentbox/mediate.h)
  creat    a C loop of 20,000 creat+close+unlink in the workspace, the cost
           of one creation in isolation

Configurations, as root (root-owned workspace: idmapped, so seccomp's set-id
rules are in) and as uid 65534 (setpriv, a workspace it owns: no set-id
rules), interleaved run by run:
  bare       the job without agentbox
  sandbox    agentbox run -p default -w WS -- bash -c JOB
  -setid     build/agentbox-ablate, AGENTBOX_TEST_ABLATE=setid (root only:
             the same sandbox without the set-id rules)
  -gitlive   build/agentbox-ablate, AGENTBOX_TEST_ABLATE=gitlive (creation
             calls left to the kernel: what carrying them out costs)
  -seccomp   build/agentbox-ablate, AGENTBOX_TEST_ABLATE=seccomp (no filter)
The ablated ones need build/agentbox-ablate (made by `make`); they are
skipped without it.  Prints medians and ratios to bare; target: sandbox
<= 1.05x bare.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOBODY = 65534
CC_FILES = ["src/base/common.c", "src/parse/http.c", "src/parse/dns.c",
            "src/config/profile.c", "src/kernel/seccomp.c", "src/plan/plan.c"]
OPENAT_C = r'''
#include <fcntl.h>
#include <unistd.h>
int main(void)
{
	for (int i = 0; i < 100000; i++) {
		int fd = open("/usr/include/stdio.h", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 1;
		close(fd);
	}
	return 0;
}
'''
CREAT_C = r'''
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	char name[32];
	for (int i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "f%d", i % 64);
		int fd = creat(name, 0644);
		if (fd < 0)
			return 1;
		close(fd);
		unlink(name);
	}
	return 0;
}
'''


def job_script(ws):
    return {
        "find": "find /usr -type f > /dev/null 2>&1; true",
        "cc": "cd %s/cc && for f in %s; do gcc -O0 -D_GNU_SOURCE -Iinclude -c $f "
              "-o bench.o || exit 1; done" % (ws, " ".join(CC_FILES)),
        "openat": "%s/openat" % ws,
        "untar": "cd %s && mkdir -p x && tar xf inc.tar -C x && rm -rf x" % ws,
        "creat": "mkdir -p %s/c && cd %s/c && %s/creat" % (ws, ws, ws),
    }


def timed(job):
    # the job's own time, in microseconds, printed last
    # and its CPU time (bash's `times`: children's user and system time), which
    # a machine shared with other work disturbs far less than wall time
    return ('s=$EPOCHREALTIME; %s; r=$?; e=$EPOCHREALTIME; [ $r = 0 ] || exit $r; '
            'echo "BENCH ${s/./} ${e/./}"; times' % job)


def _secs(t):  # "1m2.345s"
    m, rest = t.rstrip("s").split("m")
    return int(m) * 60 + float(rest)


def setup_ws(uid):
    base = tempfile.mkdtemp(prefix="agentbox-bench-syscall.")
    os.chmod(base, 0o755)
    ws = os.path.join(base, "ws")
    os.mkdir(ws)
    os.mkdir(os.path.join(base, "home"))
    cc = os.path.join(ws, "cc")
    for d in ("src", "include"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(cc, d))
    with open(os.path.join(ws, "openat.c"), "w") as f:
        f.write(OPENAT_C)
    subprocess.run(["gcc", "-O2", "-o", os.path.join(ws, "openat"),
                    os.path.join(ws, "openat.c")], check=True)
    with open(os.path.join(ws, "creat.c"), "w") as f:
        f.write(CREAT_C)
    subprocess.run(["gcc", "-O2", "-o", os.path.join(ws, "creat"),
                    os.path.join(ws, "creat.c")], check=True)
    subprocess.run(["tar", "cf", os.path.join(ws, "inc.tar"), "-C", "/usr", "include"],
                   check=True)
    if uid:
        for dp, dns, fns in os.walk(base):
            for n in [dp] + [os.path.join(dp, x) for x in dns + fns]:
                os.lchown(n, uid, uid)
    return ws


def command(cfg, user, ws, script, agentbox, ablate_bin):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "HOME": os.path.join(os.path.dirname(ws), "home")}
    inner = ["bash", "-c", timed(script)]
    if cfg == "bare":
        cmd = inner
    else:
        binary = agentbox if cfg == "sandbox" else ablate_bin
        cmd = [binary, "run", "-q", "-p", "default", "-w", ws, "--"] + inner
        if cfg != "sandbox":
            env["AGENTBOX_TEST_ABLATE"] = cfg.lstrip("-")
    if user == "nobody":
        cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
               "--clear-groups"] + cmd
    return cmd, env


def run_once(cmd, env, ws):
    r = subprocess.run(cmd, env=env, cwd=ws, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    lines = r.stdout.splitlines()
    at = [i for i, l in enumerate(lines) if l.startswith("BENCH ")]
    if r.returncode != 0 or not at or len(lines) < at[-1] + 3:
        sys.exit("bench: %s failed (%d)\n%s%s" % (" ".join(cmd), r.returncode,
                                                  r.stdout[-2000:], r.stderr[-2000:]))
    _, s, e = lines[at[-1]].split()
    u, sy = lines[at[-1] + 2].split()
    return (int(e) - int(s)) / 1000.0, (_secs(u) + _secs(sy)) * 1000.0  # ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agentbox", default=os.path.join(ROOT, "build", "agentbox"))
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "7")))
    ap.add_argument("--jobs", default="find,cc,openat,untar,creat")
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "syscall.json"))
    a = ap.parse_args()
    agentbox = os.path.abspath(a.agentbox)
    ablate_bin = os.path.join(os.path.dirname(agentbox), "agentbox-ablate")
    if not os.access(ablate_bin, os.X_OK):
        print("bench: %s missing: the ablated configurations are skipped" % ablate_bin)
        ablate_bin = None
    users = ["root", "nobody"] if os.geteuid() == 0 else ["self"]
    plan = []  # (user, cfg)
    for u in users:
        cfgs = ["bare", "sandbox"]
        if ablate_bin:
            cfgs += (["-setid"] if u == "root" else []) + ["-gitlive", "-seccomp"]
        plan += [(u, c) for c in cfgs]
    jobs = a.jobs.split(",")
    wss = {u: setup_ws(NOBODY if u == "nobody" else 0) for u in users}
    res = {(u, c, j): [] for u, c in plan for j in jobs}
    try:
        for u, c in plan:  # warm-up: page cache, gcc's files, agentbox itself
            for j in jobs:
                cmd, env = command(c, u, wss[u], job_script(wss[u])[j], agentbox, ablate_bin)
                run_once(cmd, env, wss[u])
        for i in range(a.runs):
            order = plan if i % 2 == 0 else list(reversed(plan))
            for j in jobs:
                for u, c in order:
                    cmd, env = command(c, u, wss[u], job_script(wss[u])[j], agentbox,
                                       ablate_bin)
                    res[(u, c, j)].append(run_once(cmd, env, wss[u]))
    finally:
        for ws in wss.values():
            shutil.rmtree(os.path.dirname(ws), ignore_errors=True)
    out = {"runs": a.runs, "results": []}
    print("\nSyscall-heavy jobs: medians of %d interleaved runs, the job inside "
          "(start-up excluded), ms: CPU (user+sys) and wall" % a.runs)
    print("%-7s %-7s %-9s %9s %8s %9s %8s" % ("user", "job", "config", "cpu", "vs bare",
                                              "wall", "vs bare"))
    for u in users:
        for j in jobs:
            bc = statistics.median(x[1] for x in res[(u, "bare", j)])
            bw = statistics.median(x[0] for x in res[(u, "bare", j)])
            for uu, c in plan:
                if uu != u:
                    continue
                mc = statistics.median(x[1] for x in res[(u, c, j)])
                mw = statistics.median(x[0] for x in res[(u, c, j)])
                print("%-7s %-7s %-9s %9.1f %7.3fx %9.1f %7.3fx" % (u, j, c, mc, mc / bc, mw,
                                                                  mw / bw))
                out["results"].append({"user": u, "job": j, "config": c, "cpu_ms": mc,
                                       "cpu_ratio": mc / bc, "wall_ms": mw,
                                       "wall_ratio": mw / bw, "samples": res[(u, c, j)]})
    worst = max(r["cpu_ratio"] for r in out["results"]
                if r["config"] == "sandbox" and r["job"] in ("find", "cc"))
    print("target: find and cc sandboxed <= 1.05x bare (CPU): %s (worst %.3fx)" %
          ("holds" if worst <= 1.05 else "MISSED", worst))
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
