# SPDX-License-Identifier: MIT
"""The record: every exec and every denied syscall of the sandbox,
through seccomp user notification served by agentbox's parent (supervise.c).
Runs as root and as uid 65534 (the parent reads the sandbox's memory and
/proc across the user namespace in both cases)."""

import json
import os
import pty
import subprocess

from abtest import INNER_PY, ab_cmd, describe, skip, write_file

KEYCTL = 250 if os.uname().machine == "x86_64" else 219
MOUNT = 165 if os.uname().machine == "x86_64" else 40


def _log(ctx):
    return os.path.join(ctx.scratch, "audit.jsonl")


def _events(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line))  # every line is whole, valid JSON
    return out


def _run_logged(ctx, command, profile="default", **kw):
    log = _log(ctx)
    if os.path.exists(log):
        os.unlink(log)
    r = ctx.sandbox(command, profile=profile, extra_args=["--log", log], **kw)
    return r, _events(log)


def _own_profile(ctx, name, body):
    p = os.path.join(ctx.scratch, name + ".json")
    write_file(p, json.dumps(dict({"version": 1, "extends": "default"}, **body)))
    return p


def test_three_commands(ctx):
    """A script that runs three commands: three exec records with the right
    argv, parent and cwd, and each one's exit status."""
    r, ev = _run_logged(ctx, "/bin/true; /bin/false; ls / >/dev/null; echo done")
    assert r.returncode == 0 and r.stdout == "done\n", describe(r)
    execs = [e for e in ev if e["event"] == "exec"]
    assert execs[0]["argv"][0] == "sh" and execs[0]["path"] == "/usr/bin/sh", execs
    shell = execs[0]["pid"]
    got = [(e["argv"], e["path"]) for e in execs[1:]]
    assert got == [(["/bin/true"], "/bin/true"), (["/bin/false"], "/bin/false"),
                   (["ls", "/"], "/usr/bin/ls")], got
    for e in execs:
        assert e["cwd"] == ctx.ws, e
    for e in execs[1:]:
        assert e["ppid"] == shell, (shell, e)
    status = {}
    order = []
    for e in ev:
        if e["event"] in ("exec", "exit"):
            order.append((e["event"], e["pid"]))
        if e["event"] == "exit":
            status[e["pid"]] = e.get("status", e.get("signal"))
    assert [status.get(e["pid"]) for e in execs] == [0, 0, 1, 0], (status, execs)
    for e in execs:  # each exec comes before its exit
        assert order.index(("exec", e["pid"])) < order.index(("exit", e["pid"])), order
    assert ev[-1]["event"] == "end" and ev[-1]["status"] == 0, ev[-1]


def test_path_walk_is_one_record(ctx):
    """env(1) finds `true` with execvp, which tries each PATH directory in
    turn: only the attempt that exists is a record."""
    r, ev = _run_logged(ctx, ["env", "PATH=/nonexistent:/usr/local/bin:/usr/bin:/bin",
                              "true"])
    assert r.returncode == 0, describe(r)
    execs = [e["path"] for e in ev if e["event"] == "exec"]
    assert execs == ["/usr/bin/env", "/usr/bin/true"], execs


def test_signal_and_hostile_argv(ctx):
    """A process killed by a signal has "signal"; argv bytes that are not
    UTF-8 or are control characters stay valid JSON."""
    script = ("sleep 30 & until grep -qx sleep /proc/$!/comm; do :; done; kill -9 $!; wait; "
              "printf 'x' | /usr/bin/env \"$(printf 'a\\033]0;pwned\\007b\\377c')\" 2>/dev/null; "
              "exit 0")
    r, ev = _run_logged(ctx, script)
    assert r.returncode == 0, describe(r)
    sleep = [e for e in ev if e["event"] == "exec" and e["argv"][:1] == ["sleep"]]
    assert len(sleep) == 1, ev
    exits = {e["pid"]: e for e in ev if e["event"] == "exit"}
    assert exits[sleep[0]["pid"]].get("signal") == 9, exits.get(sleep[0]["pid"])
    env = [e for e in ev if e["event"] == "exec" and e["path"] == "/usr/bin/env"]
    assert env and env[0]["argv"][1] == "a\x1b]0;pwned\x07b\\xffc", env


def test_denied_syscall_once_per_site(ctx):
    """1,000 denied keyctl() calls from one call site: one "denied" line with
    the syscall's name, the process and the errno, then its count; a second
    site (mount) is a line of its own; the errno the program sees is the
    policy's."""
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True)\n"
            "e = set()\n"
            "for i in range(1000):\n"
            "    l.syscall(%d, 0, 0, 0); e.add(ctypes.get_errno())\n"
            "l.syscall(%d, 0, 0, 0, 0, 0); e.add(ctypes.get_errno())\n"
            "print(sorted(e))\n" % (KEYCTL, MOUNT))
    r, ev = _run_logged(ctx, [INNER_PY, "-c", code])
    assert r.returncode == 0 and r.stdout.strip() == "[1]", describe(r)  # EPERM only
    denied = [e for e in ev if e["event"] == "denied"]
    names = sorted(e["syscall"] for e in denied)
    assert names == ["keyctl", "mount"], denied
    for e in denied:
        assert e["kind"] == "syscall" and e["errno"] == "EPERM" and e["comm"] == "python3", e
    rep = [e for e in ev if e["event"] == "denied-repeat"]
    assert [(e["syscall"], e["count"]) for e in rep] == [("keyctl", 1000)], rep


def test_flood_stays_bounded(ctx):
    """100,000 denied calls from many call sites and processes: the log stays
    small (rate limit, per-site counting); every call was still denied."""
    code = ("import ctypes, os\n"
            "l = ctypes.CDLL(None, use_errno=True)\n"
            "for p in range(20):\n"
            "    if os.fork() == 0:\n"
            "        for i in range(5000): l.syscall(%d, 0, 0, 0)\n"
            "        os._exit(0)\n"
            "    os.wait()\n" % KEYCTL)
    r, ev = _run_logged(ctx, [INNER_PY, "-c", code], timeout=120)
    assert r.returncode == 0, describe(r)
    assert len(ev) < 100, len(ev)
    counted = sum(e["count"] for e in ev if e["event"] == "denied-repeat")
    assert counted == 100000, counted


def test_switches(ctx):
    """"audit": {"exec": false} logs no command; {"denials": false} no
    denial (the call is denied all the same)."""
    p = _own_profile(ctx, "quiet", {"audit": {"exec": False, "denials": False}})
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True)\n"
            "print(l.syscall(%d, 0, 0, 0), ctypes.get_errno())\n" % KEYCTL)
    r, ev = _run_logged(ctx, [INNER_PY, "-c", code], profile=p)
    assert r.returncode == 0 and r.stdout.strip() == "-1 1", describe(r)
    kinds = {e["event"] for e in ev}
    assert not kinds & {"exec", "exit", "denied", "denied-repeat"}, kinds


def test_no_log_no_exec_record(ctx):
    """Without an audit log there is nothing to write commands to: the exec
    notification is not even installed; denials still reach the summary."""
    r = ctx.sandbox(["sh", "-c", "grep Seccomp: /proc/self/status"])
    assert r.returncode == 0, describe(r)


def _stderr_on_tty(ctx, argv, *extra):
    """Run ARGV with agentbox's stderr on a terminal; (exit status, what it
    printed there, its stdout)."""
    master, slave = pty.openpty()
    p = ctx.popen(["run", "-w", ctx.ws, "--no-pty"] + list(extra) + ["--"] + argv,
                  stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    stdout = p.stdout.read().decode(errors="replace")
    return p.wait(timeout=30), out.decode(errors="replace"), stdout


def test_exit_summary_lists_denials(ctx):
    """With stderr on a terminal, the exit summary names the denied syscalls
    and how many commands the record holds."""
    code = ("import ctypes; l = ctypes.CDLL(None)\n"
            "[l.syscall(%d, 0, 0, 0) for i in range(3)]\n" % KEYCTL)
    rc, text, _ = _stderr_on_tty(ctx, [INNER_PY, "-c", code], "--log", _log(ctx))
    assert rc == 0, text
    assert "agentbox: denied syscalls: keyctl x3 (python3)" in text, text
    assert "agentbox: 1 command recorded in the audit log" in text, text


def test_exit_summary_quiet_for_ps(ctx):
    """ps (procps) reads its own NUMA policy (get_mempolicy) on every run; a
    read of the caller's own state is allowed, so an ordinary command leaves
    no denial in the exit summary (a summary that always says something
    teaches users to skip it)."""
    log = _log(ctx)
    rc, text, out = _stderr_on_tty(ctx, ["ps", "-o", "pid,comm"], "--log", log)
    assert rc == 0, text
    assert "denied syscalls" not in text, text
    assert " ps" in out, out
    # the record still has it
    with open(log) as f:
        assert '"syscall":"get_mempolicy"' in f.read()


NEST_PY = r'''
import ctypes, os, struct, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
insn = struct.pack("HBBI", 0x06, 0, 0, 0x7fff0000)   # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
buf = ctypes.create_string_buffer(insn)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(1, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0                     # PR_SET_NO_NEW_PRIVS
fd = libc.syscall(317, 1, 8, ctypes.byref(prog))           # SET_MODE_FILTER, NEW_LISTENER
assert fd >= 0, ctypes.get_errno()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)  # the listener stays open
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
sys.exit(r.returncode)
'''


def test_listener_taken_above(ctx):
    """Under a filter that already has a notification listener (a container
    runtime's), agentbox cannot have one: it refuses to run (connect
    mediation needs it) and says how to accept the loss; a profile that
    accepts "seccomp-user-notif" runs, denies as before, says connect is not
    mediated and that the log will hold no record."""
    if os.uname().machine != "x86_64":
        skip("the helper uses x86_64 syscall numbers")
    log = _log(ctx)
    code = ("import ctypes; l = ctypes.CDLL(None, use_errno=True); "
            "l.syscall(%d, 0, 0, 0); print(ctypes.get_errno())" % KEYCTL)
    prof = os.path.join(ctx.scratch, "notif-lost.json")
    with open(prof, "w") as f:
        json.dump({"version": 1, "extends": "default",
                   "allow_downgrade": ["seccomp-user-notif"]}, f)
    os.chmod(prof, 0o644)
    outs = []
    for extra in ([], ["-p", prof]):
        cmd = ["python3", "-c", NEST_PY] + ab_cmd(["run"] + extra + ["-w", ctx.ws, "--log", log,
                                                  "--", INNER_PY, "-c", code], ctx.user)
        outs.append(subprocess.run(cmd, env=ctx.env(), cwd=ctx.ws, capture_output=True,
                                   text=True, timeout=60))
    r = outs[0]
    assert r.returncode == 125, describe(r)
    assert "already has the one notification listener" in r.stderr, describe(r)
    assert '"seccomp-user-notif"' in r.stderr, describe(r)
    r = outs[1]
    assert r.returncode == 0 and r.stdout.strip() == "1", describe(r)
    assert "already has the one notification listener" in r.stderr, describe(r)
    assert "connect is NOT MEDIATED" in r.stderr, describe(r)
    kinds = {e["event"] for e in _events(log)}
    assert "exec" not in kinds and "denied" not in kinds, kinds