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


def test_ask_run_allows_the_rest_of_the_run(ctx):
    """r: the held request goes on and later ones pass without a question."""
    eg, _, log, p = _start(ctx, (CURL % "run-1") + "; " + (CURL % "run-2"))
    p.expect(rb"allow for this run", timeout=30)
    p.write(b"r")
    _expect_nth(p, rb"CODE=200", 2)
    assert p.wait(30) == 0, p.text()
    assert len(re.findall(rb"allow for this run", p.buf)) == 1, p.text()
    assert eg.http.count("/run-1") == 1 and eg.http.count("/run-2") == 1
    pol = _events(log, "policy")
    assert [(e["rule"], e.get("by")) for e in pol] == [("http.test:80", "ask:run")], pol
    assert [e["answer"] for e in _events(log) if e["phase"] == "answer"] == ["run"]


def test_ask_always_writes_the_profile_after_a_diff(ctx):
    """a: the diff of the profile is shown; y writes it and allows the host;
    the next run with that profile reaches the host without asking."""
    eg, prof, log, p = _start(ctx, CURL % "always")
    before = open(prof).read()
    p.expect(rb"always \(", timeout=30)
    p.write(b"a")
    p.expect(rb"write this and allow http\.test:80 for this run\? \[y/n\]")
    assert b'+      "http.test:80"' in p.buf or b'+    "http.test:80"' in p.buf, p.text()
    assert open(prof).read() == before, "written before the answer"
    p.write(b"y")
    p.expect(rb"CODE=200")
    assert p.wait(30) == 0, p.text()
    after = json.loads(open(prof).read())
    assert "http.test:80" in after["network"]["allow"], after
    assert after["network"]["hosts"] == json.loads(before)["network"]["hosts"], after
    assert [e["answer"] for e in _events(log) if e["phase"] == "answer"] == ["always"]
    # the written profile is a valid one, and it now allows the host
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c", CURL % "after"])
    assert r.returncode == 0 and "CODE=200" in r.stdout, describe(r)


def test_ask_always_declined_goes_back_to_the_question(ctx):
    """a then n: nothing written, the question again; then d."""
    eg, prof, log, p = _start(ctx, CURL % "always-no")
    before = open(prof).read()
    p.expect(rb"always \(", timeout=30)
    p.write(b"a")
    p.expect(rb"\[y/n\]")
    p.write(b"n")
    _expect_nth(p, rb"allow once", 2)
    p.write(b"d")
    p.expect(rb"CODE=403")
    assert p.wait(30) == 0, p.text()
    assert open(prof).read() == before
    assert eg.http.count("/always-no") == 0


def test_ask_timeout_is_a_deny(ctx):
    eg, _, log, p = _start(ctx, CURL % "timeout", timeout=2)
    p.expect(rb"allow once", timeout=30)
    p.expect(rb"CODE=403", timeout=20)
    assert p.wait(30) == 0, p.text()
    assert eg.http.count("/timeout") == 0
    ans = [e for e in _events(log) if e["phase"] == "answer"]
    assert [e["answer"] for e in ans] == ["timeout"] and ans[0]["waited_ms"] >= 1900, ans


# The sandboxed program floods its own terminal with every answer key (and
# a title-report query, whose reply a real terminal would type) while its
# request waits: none of it may answer.  Nobody answers, so the question
# times out: a deny.
FLOOD = ("(i=0; while [ $i -lt 200 ]; do printf 'o\\nr\\na\\ny\\n\\033[21t'; "
         "printf 'o\\r' > /dev/tty; i=$((i+1)); sleep 0.01; done) & " + CURL % "flood" + "; wait")


def test_sandbox_output_never_answers(ctx):
    eg, _, log, p = _start(ctx, FLOOD, timeout=4)
    p.expect(rb"allow once", timeout=30)
    p.expect(rb"CODE=403", timeout=30)
    assert p.wait(60) == 0, p.text()
    assert eg.http.count("/flood") == 0, "a byte the sandbox wrote answered the question"
    # the bytes were written, and reached the user's screen (after the question)
    assert b"o\r\nr\r\na\r\ny\r\n" in p.buf, p.buf[-500:]
    ans = [e["answer"] for e in _events(log) if e["phase"] == "answer"]
    assert ans == ["timeout"], ans


def test_no_terminal_no_question(ctx):
    """--ask without a terminal (CI): no question, the 403 at once."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    log = os.path.join(ctx.scratch, "ask-notty.log")
    t0 = time.monotonic()
    r = ctx.run(["run", "--ask", "-p", prof, "--log", log, "-w", ctx.ws, "--",
                 "sh", "-c", CURL % "notty"])
    assert r.returncode == 0 and "CODE=403" in r.stdout, describe(r)
    assert time.monotonic() - t0 < 30
    assert "allow once" not in r.stdout + r.stderr, describe(r)
    assert _events(log) == []
    assert eg.http.count("/notty") == 0


def test_without_ask_no_question_on_a_terminal(ctx):
    """The default run on a terminal is unchanged: the 403, no question."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = PtyRun(ctx, ["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c", CURL % "default"])
    p.expect(rb"CODE=403", timeout=30)
    assert p.wait(30) == 0
    assert b"allow once" not in p.buf


def test_profile_key_ask_and_other_hosts_flow(ctx):
    """"ask": true in a profile asks too; while a question is up, a listed
    host is served (the loop is not blocked)."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test", "other.test"), extra={"ask": True})
    log = os.path.join(ctx.scratch, "ask-key.log")
    cmd = ("(" + CURL % "held" + ") & sleep 1; "
           "curl -s -o /dev/null -w 'OTHER=%{http_code}\\n' --max-time 20 http://other.test/x; wait")
    p = PtyRun(ctx, ["run", "--ask-timeout", "30", "-p", prof, "--log", log, "-w", ctx.ws,
                     "--", "sh", "-c", cmd])
    p.expect(rb"allow once", timeout=30)
    # the question pauses the relay: OTHER's line shows after the answer
    deadline = time.monotonic() + 20
    while eg.other.count("/x") == 0 and time.monotonic() < deadline:
        p._read_some(0.2)
    assert eg.other.count("/x") == 1, "a listed host waited for the question"
    p.write(b"o")
    p.expect(rb"CODE=200")
    p.expect(rb"OTHER=200")
    assert p.wait(30) == 0


def test_check_rejects_a_bad_ask_value(ctx):
    path = os.path.join(ctx.scratch, "bad-ask.json")
    ctx.host_file(path, '{"version": 1, "ask": "yes"}\n')
    r = ctx.run(["check", path])
    assert r.returncode == 125, describe(r)
    assert re.search(r"bad-ask\.json:1:\d+: ask: expected true or false", r.stderr), describe(r)


def test_explain_says_whether_it_asks(ctx):
    """explain shows the answer the plan gave: "ask" on with a terminal (and
    the timeout), off without one, the same profile both times."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",), extra={"ask": True})
    p = PtyRun(ctx, ["explain", "-p", prof, "-w", ctx.ws])
    p.expect(rb"ask: on: a request to a host not listed waits for your answer", timeout=30)
    assert p.wait(30) == 0
    r = ctx.run(["explain", "-p", prof, "-w", ctx.ws])
    assert r.returncode == 0 and "ask: off" in r.stdout, describe(r)
    j = json.loads(ctx.run(["explain", "--json", "-p", prof, "-w", ctx.ws]).stdout)
    assert j["ask"] == {"on": False}, j["ask"]
