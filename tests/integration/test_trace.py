# SPDX-License-Identifier: MIT
"""`agentbox run --trace`: kernel tracing (BPF) into the audit log.

As root: a refused connect, a file open Landlock refuses, the programs a shell
starts, and nothing of the processes outside the sandbox.  As uid 65534:
`--trace` stops before the command with the documented message, and
`--trace=best-effort` warns once and runs.

The Landlock-only denial: the default profile's /proc rule grants read_file
and write_file but not truncate, so `printf x > /proc/self/comm` (an open with
O_TRUNC of a file the command owns, on a writable procfs) is refused by
Landlock alone: the same command under build/agentbox-ablate with the Landlock
layer ablated succeeds, and appending (no O_TRUNC) works in the real sandbox.
"""

import json
import os
import re
import subprocess
import time

import abtest
from abtest import (INNER_PY, Listener, describe, nobody_only, root_only, skip, wait_for,
                    write_file)

UNPRIV_MSG = re.compile(r"agentbox: --trace: kernel tracing needs root, or CAP_BPF and "
                        r"CAP_PERFMON: uid \d+ lacks (CAP_BPF and CAP_PERFMON|CAP_BPF|CAP_PERFMON)")
NOT_BUILT = "this agentbox was built without BPF tracing"


def _log(ctx, name="trace.jsonl"):
    return os.path.join(ctx.scratch, name)


def _events(path):
    out = []
    with open(path, "rb") as f:
        for line in f:
            out.append(json.loads(line))  # every line is one JSON object
    return out


def _fmt(events):
    return "\n".join(json.dumps(e) for e in events[-60:])


def _traced(ctx, command, log, **kw):
    """Run COMMAND with --trace --log LOG; skip when this build has no tracing."""
    r = ctx.sandbox(command, extra_args=["--trace", "--log", log] + list(kw.pop("extra", [])),
                    **kw)
    if r.returncode == 125 and NOT_BUILT in r.stderr:
        skip("built without BPF tracing (clang, bpftool or kernel BTF missing at build time)")
    assert "--trace" not in r.stderr, "tracing failed as root\n" + describe(r)
    return r


def _trace_events(events, kind):
    return [e for e in events if e.get("event") == "trace" and e.get("kind") == kind]


def _file_denials(events):
    return [e for e in events if e.get("event") == "denied" and e.get("kind") == "file"]


CONNECT_PY = r'''
import errno, json, os, socket
out = {"pid": os.getpid()}
def tcp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    e = s.connect_ex(addr)
    s.close()
    return errno.errorcode.get(e, "OK" if e == 0 else str(e))
def udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(addr)
        return "OK"
    except OSError as ex:
        return errno.errorcode.get(ex.errno, str(ex.errno))
    finally:
        s.close()
out["closed"] = tcp(("127.0.0.1", 9))        # nothing listens; Landlock: not a listed port
out["proxy"] = tcp(("127.0.0.1", 3128))      # agentbox's explicit proxy: connects
out["noroute"] = udp(("10.255.255.1", 53))   # only lo in the sandbox's netns
print(json.dumps(out))
'''


@root_only
def test_trace_refused_connect(ctx):
    log = _log(ctx)
    r = _traced(ctx, [INNER_PY, "-c", CONNECT_PY], log)
    assert r.returncode == 0, describe(r)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["closed"] in ("EACCES", "ECONNREFUSED"), res
    assert res["proxy"] == "OK", res
    assert res["noroute"] == "ENETUNREACH", res
    ev = _trace_events(_events(log), "connect")
    mine = [e for e in ev if e["pid"] == res["pid"]]
    assert mine, "no connect events of pid %s:\n%s" % (res["pid"], _fmt(_events(log)))
    closed = [e for e in mine if e.get("addr") == "127.0.0.1" and e.get("port") == 9]
    assert len(closed) == 1, _fmt(mine)
    c = closed[0]
    assert c["family"] == "inet" and c["comm"] == "python3", c
    assert c["ret"] < 0 and c["errno"] == res["closed"], c
    proxy = [e for e in mine if e.get("port") == 3128]
    assert proxy and proxy[0]["ret"] == 0 and "errno" not in proxy[0], _fmt(mine)
    nr = [e for e in mine if e.get("addr") == "10.255.255.1"]
    assert nr and nr[0]["errno"] == "ENETUNREACH" and nr[0]["port"] == 53, _fmt(mine)


@root_only
def test_trace_landlock_file_denial(ctx):
    log = _log(ctx)
    script = ("printf x > /proc/self/comm; echo trunc=$?; "
              "printf y >> /proc/self/comm; echo append=$?; "
              "true > /usr/ab-trace-erofs; echo rofs=$?")
    r = _traced(ctx, script, log)
    assert r.returncode == 0, describe(r)
    assert "trunc=2" in r.stdout and "append=0" in r.stdout and "rofs=2" in r.stdout, describe(r)
    events = _events(log)
    den = [e for e in _file_denials(events) if e.get("path") == "/proc/self/comm"]
    assert len(den) == 1, "expected one denied open of /proc/self/comm:\n" + _fmt(events)
    d = den[0]
    # an open for writing is carried out by agentbox's creator (docs/nested-git.md):
    # its refusal is recorded by agentbox for the caller, not by the kernel's trace
    assert d["source"] in ("bpf", "agentbox") and d["op"] == "open" and d["errno"] == "EACCES", d
    assert d["comm"] == "sh" and isinstance(d["pid"], int) and d["pid"] > 1, d
    # the read-only mount refused the other one with EROFS: not a Landlock
    # denial, not recorded
    assert not [e for e in _file_denials(events) if "ab-trace-erofs" in e.get("path", "")], \
        _fmt(events)
    # control: the same write with the Landlock layer ablated succeeds, so the
    # mount, procfs and DAC all allow it and the denial above is Landlock's
    ablate = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
    assert os.access(ablate, os.X_OK), "build agentbox-ablate with make"
    log2 = _log(ctx, "ablated.jsonl")
    cmd = [ablate, "run", "-p", "default", "-w", ctx.ws, "--trace", "--log", log2, "--",
           "sh", "-c", "printf x > /proc/self/comm; echo trunc=$?"]
    r2 = subprocess.run(cmd, env=ctx.env({"AGENTBOX_TEST_ABLATE": "landlock"}), cwd=ctx.ws,
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, timeout=abtest.DEFAULT_TIMEOUT)
    assert r2.returncode == 0 and "trunc=0" in r2.stdout, describe(r2)
    assert "TEST ABLATION landlock" in r2.stderr, describe(r2)
    assert not _file_denials(_events(log2)), _fmt(_events(log2))


@root_only
def test_trace_exec_events(ctx):
    log = _log(ctx)
    r = _traced(ctx, ["sh", "-c", "true; /bin/true; echo $$"], log)
    assert r.returncode == 0, describe(r)
    sh_pid = int(r.stdout.strip().splitlines()[-1])
    ex = _trace_events(_events(log), "exec")
    sh = [e for e in ex if e["pid"] == sh_pid]
    assert len(sh) == 1, "one exec of the shell (pid %d):\n%s" % (sh_pid, _fmt(ex))
    assert sh[0]["path"].endswith("/sh") and sh[0]["comm"] == "sh", sh[0]
    assert sh[0]["ppid"] == 1, "the command's parent is the sandbox's init: %s" % sh[0]
    tr = [e for e in ex if e["path"] == "/bin/true"]
    # `true` alone is a shell builtin: only /bin/true starts a program
    assert len(tr) == 1, _fmt(ex)
    assert tr[0]["ppid"] == sh_pid and tr[0]["comm"] == "true" and tr[0]["pid"] != sh_pid, tr[0]
    assert len(ex) == 2, "exactly the shell and /bin/true:\n" + _fmt(ex)


@root_only
def test_trace_sees_only_the_sandbox(ctx):
    """Programs, connects and refused opens of a host process that runs while
    the sandbox does are not recorded; the sandbox's own are."""
    log = _log(ctx)
    marker = "ab-host-marker-" + os.urandom(4).hex()
    prog = os.path.join(ctx.scratch, marker)
    with open("/bin/true", "rb") as src, open(prog, "wb") as dst:
        dst.write(src.read())
    os.chmod(prog, 0o755)
    secret = os.path.join(ctx.scratch, marker + ".denied")
    write_file(secret, "x", 0o600)
    lst = Listener()
    ctx.on_cleanup(lst.close)
    # one sleep whatever the timing: the loop's may never run when "done"
    # comes quickly, and the positive control below looks for it
    p = ctx.popen(["run", "-p", "default", "-w", ctx.ws, "--trace", "--log", log, "--", "sh",
                   "-c", "touch ready; sleep 0.01; while [ ! -e done ]; do sleep 0.05; done; "
                   "echo $$"])
    ready = wait_for(lambda: os.path.exists(os.path.join(ctx.ws, "ready")) or
                     p.poll() is not None, 20)
    if p.poll() is not None:
        out, err = p.communicate()
        if NOT_BUILT in err.decode():
            skip("built without BPF tracing")
        raise AssertionError("sandbox ended early: %s %s" % (out, err))
    assert ready
    # on the host, while the sandbox runs: a program, a connect, a refused open
    subprocess.run([prog], check=True)
    import socket
    s = socket.create_connection(("127.0.0.1", lst.port))
    s.close()
    h = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat",
                        secret], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert h.returncode != 0 and b"Permission denied" in h.stderr, h
    open(os.path.join(ctx.ws, "done"), "w").close()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    raw = open(log, "rb").read().decode()
    assert marker not in raw, "a host process was recorded:\n" + raw[-3000:]
    events = _events(log)
    ports = [e for e in _trace_events(events, "connect") if e.get("port") == lst.port]
    assert not ports, _fmt(events)
    # positive control: the sandbox's own programs are there (sh, touch, sleep)
    comms = {e["comm"] for e in _trace_events(events, "exec")}
    assert {"sh", "touch", "sleep"} <= comms, _fmt(events)


@root_only
def test_trace_flood_is_rate_limited(ctx):
    """A tight loop of refused opens: every one is accounted for (written,
    counted as suppressed, or lost), and no more are written than the rate
    limit allows (AB_TRACE_RATE_BURST + AB_TRACE_RATE_PER_S per second)."""
    n = 5000
    log = _log(ctx)
    code = ("import os\nfor i in range(%d):\n    try:\n        os.open('/proc/self/comm', "
            "os.O_WRONLY | os.O_TRUNC)\n    except PermissionError:\n        pass\n" % n)
    t0 = time.monotonic()
    r = _traced(ctx, [INNER_PY, "-c", code], log, timeout=120)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, describe(r)
    events = _events(log)
    written = [e for e in _file_denials(events) if e.get("path") == "/proc/self/comm"]
    supp = sum(e["count"] for e in events
               if e.get("event") == "suppressed" and e.get("kind") == "file")
    lost = sum(e["count"] for e in events if e.get("event") == "trace-lost")
    assert len(written) + supp + lost == n, (len(written), supp, lost)
    assert len(written) <= 1000 + 100 * (int(elapsed) + 1), (len(written), elapsed)
    assert supp > 0, "the limit never applied"


KEYCTL = 250 if os.uname().machine == "x86_64" else 219
MOUNT = 165 if os.uname().machine == "x86_64" else 40


@root_only
def test_trace_records_denials_in_the_kernel(ctx):
    """With --trace the seccomp filter's denials are recorded by the BPF
    programs (a sys_exit without its sys_enter), not by a round trip to the
    supervisor: 20,000 denied keyctl() calls from one site in a child of a
    child are one "denied" line (source bpf) and a count of exactly 20,000; a
    second site is a line of its own; the program still sees EPERM; a legal
    call failing with EPERM by itself (sched_setscheduler without
    CAP_SYS_NICE) is not a denial.  With "audit": {"denials": false}, nothing."""
    log = _log(ctx)
    code = ("import ctypes, os, signal\nl = ctypes.CDLL(None, use_errno=True)\ne = set()\n"
            "for i in range(20000):\n    l.syscall(%d, 0, 0, 0); e.add(ctypes.get_errno())\n"
            "l.syscall(%d, 0, 0, 0, 0, 0); e.add(ctypes.get_errno())\n"
            "try:\n    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
            "except PermissionError as x:\n    e.add(x.errno)\n"
            "print(sorted(e))\n" % (KEYCTL, MOUNT))
    write_file(os.path.join(ctx.ws, "deny.py"), code)
    r = _traced(ctx, "sh -c '%s deny.py'" % INNER_PY, log)
    assert r.returncode == 0 and r.stdout.strip() == "[1]", describe(r)
    events = _events(log)
    denied = [e for e in events if e.get("event") == "denied" and e.get("kind") == "syscall"]
    assert sorted(e["syscall"] for e in denied) == ["keyctl", "mount"], _fmt(events)
    for e in denied:
        assert e["source"] == "bpf" and e["errno"] == "EPERM" and e["comm"] == "python3", e
    rep = [(e["syscall"], e["count"], e.get("source")) for e in events
           if e.get("event") == "denied-repeat"]
    assert rep == [("keyctl", 20000, "bpf")], rep
    assert not [e for e in events if e.get("event") == "suppressed"], _fmt(events)

    prof = os.path.join(ctx.scratch, "nodeny.json")
    write_file(prof, json.dumps({"version": 1, "extends": "default",
                                 "audit": {"denials": False}}))
    log2 = _log(ctx, "trace2.jsonl")
    r = _traced(ctx, "sh -c '%s deny.py'" % INNER_PY, log2, profile=prof)
    assert r.returncode == 0 and r.stdout.strip() == "[1]", describe(r)
    events = _events(log2)
    assert not [e for e in events if e.get("event") in ("denied", "denied-repeat")
                and e.get("kind") == "syscall"], _fmt(events)


@nobody_only
def test_trace_unprivileged(ctx):
    if os.geteuid() != 0 and os.path.exists("/proc/self/status"):
        with open("/proc/self/status") as f:
            capeff = int(re.search(r"CapEff:\s*([0-9a-f]+)", f.read()).group(1), 16)
        if capeff & ((1 << 21) | (1 << 38) | (1 << 39)):
            skip("the runner itself holds CAP_SYS_ADMIN/CAP_BPF/CAP_PERFMON")
    marker = os.path.join(ctx.ws, "ran")
    r = ctx.sandbox("touch ran", extra_args=["--trace"])
    if NOT_BUILT in r.stderr:
        assert r.returncode == 125, describe(r)
        skip("built without BPF tracing")
    assert r.returncode == 125, describe(r)
    assert UNPRIV_MSG.search(r.stderr), describe(r)
    assert "Hint: run agentbox as root, or use --trace=best-effort" in r.stderr, describe(r)
    assert not os.path.exists(marker), "the command ran although --trace failed"
    log = _log(ctx)
    r = ctx.sandbox("touch ran; echo hi", extra_args=["--trace=best-effort", "--log", log])
    assert r.returncode == 0 and r.stdout.strip() == "hi", describe(r)
    warn = [ln for ln in r.stderr.splitlines() if "--trace" in ln]
    assert len(warn) == 1 and warn[0].startswith("agentbox: warning: --trace: kernel tracing "
                                                 "needs root") and \
        warn[0].endswith("; running without kernel tracing"), describe(r)
    assert os.path.exists(marker)
    ev = _events(log)
    assert not [e for e in ev if e.get("event") == "trace"], _fmt(ev)


def test_trace_usage(ctx):
    r = ctx.sandbox("true", extra_args=["--trace=always"])
    assert r.returncode == 125, describe(r)
    assert "run: --trace takes no value or '=best-effort', not 'always'" in r.stderr, describe(r)
    r = ctx.run(["explain", "-w", ctx.ws, "--trace"])
    assert r.returncode == 125 and "unknown option '--trace'" in r.stderr, describe(r)
