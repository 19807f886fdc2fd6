# SPDX-License-Identifier: MIT
"""How init starts the command (src/sandbox/init.c, spawn_command): a
vfork-style clone that shares init's memory, or, when the exec is recorded
(--log, which makes the command's process dumpable before its exec), a copy.
What the command starts with must not depend on which: signals (also when
agentbox itself was started with them ignored or blocked, and in a pty, where
Ctrl-C must reach it), fds, the sandbox's environment and PATH, exec
failures, and an init that stays opaque to it (not dumpable) either way."""

import json
import os
import signal
import subprocess

from abtest import INNER_PY, PtyRun, describe, write_file
from test_redteam import INIT_PY

# the command's own state, read first thing by the program init exec'd
STATE_PY = r'''
import os
fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        fds.append(str(fd))
    except OSError:
        pass
for l in open("/proc/self/status"):
    if l.startswith(("SigBlk:", "SigIgn:", "SigPnd:")):
        print(l.strip())
print("FDS", " ".join(["0", "1", "2"] + fds))
print("SID", os.getsid(0), "PID", os.getpid())
if os.isatty(0):
    print("FG", os.tcgetpgrp(0), "PGRP", os.getpgrp())
'''

# Signal n is bit n-1 of /proc's masks.  A command that starts with SIGINT
# ignored or blocked never sees Ctrl-C (python installs its KeyboardInterrupt
# handler only over a default SIGINT; ignored and blocked both survive exec).
TERMINAL_SIGS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP)
FORWARDED_SIGS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)


def _bits(sigs):
    return sum(1 << (int(s) - 1) for s in sigs)


def _log_args(ctx):
    return ["--log", os.path.join(ctx.scratch, "spawn.jsonl")]


def _state(ctx, extra_args=()):
    r = ctx.sandbox(["/usr/bin/python3", "-c", STATE_PY], extra_args=extra_args)
    assert r.returncode == 0, describe(r)
    f = dict(l.split(None, 1) for l in r.stdout.splitlines() if l.strip())
    return f, r


def _check_state(f, r, how):
    # no signal blocked, ignored or pending: init blocks its forwarded set;
    # none of it may reach the command
    assert int(f["SigBlk:"], 16) == 0, "%s: signals blocked in the command\n%s" % (how, describe(r))
    assert int(f["SigPnd:"], 16) == 0, "%s\n%s" % (how, describe(r))
    assert int(f["SigIgn:"], 16) & _bits(TERMINAL_SIGS) == 0, "%s\n%s" % (how, describe(r))
    # nothing but 0-2 crossed the exec (not the sync socket, not the pty slave)
    assert f["FDS"].split() == ["0", "1", "2"], "%s: fds %s\n%s" % (how, f["FDS"], describe(r))
    # a session of its own (setsid or the pty's): the session id is its pid
    sid, pid = f["SID"].split()[0], f["SID"].split()[2]
    assert sid == pid, "%s: not a session leader\n%s" % (how, describe(r))


def test_command_state(ctx):
    """Without --log (no exec record)."""
    f, r = _state(ctx)
    _check_state(f, r, "no record")


def _fields(text):
    return dict(l.split(None, 1) for l in text.splitlines() if l.strip())


def test_command_state_in_pty(ctx):
    """In its own pty the command is what Ctrl-C reaches: the pty's
    foreground process group, with no terminal signal blocked or ignored."""
    p = PtyRun(ctx, ["run", "-w", ctx.ws, "--", INNER_PY, "-c", STATE_PY])
    rc = p.wait(30)
    text = p.text().replace("\r\n", "\n")
    assert rc == 0, text
    f = _fields(text)
    assert int(f["SigBlk:"], 16) == 0, "signals blocked in the command\n" + text
    assert int(f["SigPnd:"], 16) == 0, text
    assert int(f["SigIgn:"], 16) & _bits(TERMINAL_SIGS) == 0, text
    sid, pid = f["SID"].split()[0], f["SID"].split()[2]
    assert sid == pid, "not a session leader\n" + text
    fg, pgrp = f["FG"].split()[0], f["FG"].split()[2]
    assert fg == pgrp == pid, "not the pty's foreground process group\n" + text


def _ignore_and_block():
    for s in FORWARDED_SIGS:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, range(1, signal.NSIG))


def test_command_state_from_hostile_caller(ctx):
    """agentbox started with the terminal signals ignored and every signal
    blocked (a caller's trap '' INT, a launcher's mask): init and its spawn
    inherit both, and the command must still start with the signals agentbox
    forwards at their default and nothing blocked."""
    for how, extra in (("no record", ()), ("recorded", _log_args(ctx))):
        p = ctx.popen(["run", "-p", "default", "-w", ctx.ws] + list(extra) +
                      ["--", INNER_PY, "-c", STATE_PY], preexec_fn=_ignore_and_block)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        text = "%s: exit %s\nstdout: %s\nstderr: %s" % (how, p.returncode, out.decode(), err.decode())
        assert p.returncode == 0, text
        f = _fields(out.decode())
        assert int(f["SigBlk:"], 16) == 0, "signals blocked in the command\n" + text
        assert int(f["SigIgn:"], 16) & _bits(FORWARDED_SIGS) == 0, "ignored: " + text


def test_command_state_exec_recorded(ctx):
    """With --log the exec is recorded: the command runs on a copy."""
    f, r = _state(ctx, extra_args=_log_args(ctx))
    _check_state(f, r, "recorded")
    with open(os.path.join(ctx.scratch, "spawn.jsonl")) as fh:
        ev = [json.loads(l) for l in fh if l.strip()]
    first = [e for e in ev if e["event"] == "exec"][0]
    # agentbox read the arguments of the first exec out of the command's memory
    assert first["argv"][:2] == ["/usr/bin/python3", "-c"], first
    assert STATE_PY.startswith(first["argv"][2][:100]) and len(first["argv"][2]) >= 100, first


def test_init_opaque_with_and_without_record(ctx):
    """The command could ptrace init, or read and write its memory (and so its
    creator thread, which runs without the seccomp filter), if init's address
    space were dumpable.  The recorded exec needs a dumpable pre-exec copy:
    made dumpable on init's own memory, init would stay so after the command
    started."""
    for how, extra in (("no record", ()), ("recorded", _log_args(ctx))):
        r = ctx.sandbox(["/usr/bin/python3", "-c", INIT_PY], extra_args=extra)
        assert r.returncode == 0, describe(r)
        out = json.loads(r.stdout)
        opened = [k for k, v in out.items() if v == "OK"]
        assert not opened, "%s: pid 1 readable from the command: %s\n%s" % (how, opened, describe(r))


def test_sandbox_path_used_for_the_lookup(ctx):
    """execvp looks the command up in the sandbox's PATH (the profile's
    env.set), not agentbox's."""
    d = os.path.join(ctx.ws, "only-here")
    os.makedirs(d, exist_ok=True)
    ctx.host_file(os.path.join(d, "abit-only-here"),
                  "#!/bin/sh\necho found \"$ABIT_SPAWN\"\n", 0o755)
    prof = os.path.join(ctx.scratch, "spawnpath.json")
    write_file(prof, json.dumps({"version": 1, "extends": "default",
                                 "env": {"set": {"PATH": d + ":/usr/bin:/bin",
                                                 "ABIT_SPAWN": "set-by-profile"}}}))
    for how, extra in (("no record", ()), ("recorded", _log_args(ctx))):
        r = ctx.sandbox(["abit-only-here"], profile=prof, extra_args=extra)
        assert r.returncode == 0 and r.stdout == "found set-by-profile\n", "%s\n%s" % (
            how, describe(r))
    r = ctx.run(["run", "-p", "default", "-w", ctx.ws, "--", "abit-only-here"])
    assert r.returncode == 127, describe(r)


def test_exec_failures_with_and_without_record(ctx):
    """127 and 126 with a message, with or without the record; a command's own 127 is
    passed through without one."""
    ctx.host_file(os.path.join(ctx.ws, "notexec"), "#!/bin/sh\necho hi\n", 0o644)
    for how, extra in (("no record", ()), ("recorded", _log_args(ctx))):
        r = ctx.sandbox(["no-such-command-abit"], extra_args=extra)
        assert r.returncode == 127, "%s\n%s" % (how, describe(r))
        assert "no-such-command-abit: command not found" in r.stderr, "%s\n%s" % (how, describe(r))
        r = ctx.sandbox([os.path.join(ctx.ws, "notexec")], extra_args=extra)
        assert r.returncode == 126, "%s\n%s" % (how, describe(r))
        assert "notexec: Permission denied" in r.stderr, "%s\n%s" % (how, describe(r))
        r = ctx.sandbox("exit 127", extra_args=extra)
        assert r.returncode == 127 and "agentbox" not in r.stderr, "%s\n%s" % (how, describe(r))


def test_many_arguments(ctx):
    """A long argument list reaches the command whole, also through
    execvp's script fallback (which copies argv onto the stack)."""
    ctx.host_file(os.path.join(ctx.ws, "noshebang"), "echo $# \"$1\" \"${20000}\"\n", 0o755)
    args = ["a%d" % i for i in range(1, 20001)]
    r = ctx.sandbox([os.path.join(ctx.ws, "noshebang")] + args)
    assert r.returncode == 0 and r.stdout == "20000 a1 a20000\n", describe(r)
