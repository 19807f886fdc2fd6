# SPDX-License-Identifier: MIT
"""run --ask (docs/ask.md): a request to a host the profile does not list is
held, and agentbox asks on its own terminal (outside the sandbox's pty).
Each answer through a real pty: once, run, always (the profile written after
a diff), deny, timeout; bytes the sandboxed program writes to its own
terminal never answer; with no terminal, no question and the old 403; the
held request goes on with the real client (curl through the proxy to a
loopback server the test starts)."""

import json
import os
import re
import subprocess
import time

from abtest import PtyRun, describe
from upstream import Egress

CURL = "curl -s -o /dev/null -w 'CODE=%%{http_code}\\n' --max-time 60 http://http.test/%s"


def _start(ctx, cmd, timeout=20, extra=(), allow=("upstream.test",)):
    eg = Egress(ctx)
    prof = eg.write_profile(allow=allow)
    log = os.path.join(ctx.scratch, "ask-audit.log")
    args = ["run", "--ask", "--ask-timeout", str(timeout), "-p", prof, "--log", log,
            "-w", ctx.ws] + list(extra) + ["--", "sh", "-c", cmd]
    return eg, prof, log, PtyRun(ctx, args, rows=30, cols=160)


def _expect_nth(p, pattern, n, timeout=30):
    """Wait until PATTERN (bytes regex) appears N times in the output."""
    deadline = time.monotonic() + timeout
    while len(re.findall(pattern, p.buf)) < n:
        if time.monotonic() > deadline or p.proc.poll() is not None:
            p._drain()
            if len(re.findall(pattern, p.buf)) >= n:
                break
            raise AssertionError("%r not seen %d times (agentbox %s)\noutput: %r" % (
                pattern, n, p.proc.poll(), p.buf[-3000:]))
        p._read_some(0.2)


def _events(log, kind="ask"):
    out = []
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == kind:
                out.append(e)
    return out


def test_ask_once_then_deny(ctx):
    """o: the held request goes on (200 from the real server); the next
    request to the same host asks again; d: its 403."""
    eg, _, log, p = _start(ctx, (CURL % "ask-once") + "; " + (CURL % "ask-again"))
    p.expect(rb"allow once", timeout=30)
    text = p.text()
    assert "http.test" in text and "port 80" in text, text
    assert "GET http://http.test:80/ask-once" in text, text
    assert re.search(r"program +curl ", text), "the program that asked is not named: %r" % text
    p.write(b"o")
    p.expect(rb"CODE=200")
    _expect_nth(p, rb"allow once", 2)
    p.write(b"d")
    p.expect(rb"CODE=403")
    assert p.wait(30) == 0, p.text()
    assert eg.http.count("/ask-once") == 1
    assert eg.http.count("/ask-again") == 0
    ev = _events(log)
    answers = [(e["host"], e["answer"]) for e in ev if e["phase"] == "answer"]
    assert answers == [("http.test", "once"), ("http.test", "deny")], ev
    q = [e for e in ev if e["phase"] == "question"]
    assert len(q) == 2 and q[0]["request"].startswith("GET http://http.test:80/ask-once"), ev
    assert "curl" in q[0].get("program", ""), ev
