# SPDX-License-Identifier: MIT
"""run --ask, the paths (docs/ask.md): a creation or an open for writing the
sandbox's rules refuse is seen by the supervisor (the creator carries them
out), and at
exit agentbox offers, on its own terminal, the profile lines that would
grant it, as a diff of the profile "always" writes; `y` writes them and a
second run with that profile may create there; `n` writes nothing; with no
terminal to ask on, nothing is asked and the exit summary lists the path
and the lines.

The directory the command writes to is a host directory outside the
workspace that the profile shows read-only (so the creation is refused with
EROFS or EACCES), owned by the test user (so the host itself would allow
it)."""

import json
import os

from abtest import PtyRun, describe

PROMPT = rb"next run may write there\? \[y/n\]"


def _setup(ctx, name):
    out = os.path.join(ctx.projects, name)
    os.makedirs(out)
    if ctx.uid != 0:
        os.chown(out, ctx.uid, ctx.gid)
    prof = {"version": 1, "extends": ["default"], "filesystem": {"read": [out]}}
    path = ctx.host_file(os.path.join(ctx.scratch, name + ".json"),
                         json.dumps(prof, indent=2) + "\n")
    log = os.path.join(ctx.scratch, name + ".log")
    return out, path, log


def _cmd(out):
    return "touch %s/new; echo rc=$?; touch /etc/ab-never; echo done" % out


def _events(log):
    with open(log) as f:
        return [e for e in map(json.loads, f) if e.get("event") == "ask-path"]


def _offer(ctx, out, prof, log):
    p = PtyRun(ctx, ["run", "--ask", "--ask-timeout", "30", "-p", prof, "--log", log,
                     "-w", ctx.ws, "--", "sh", "-c", _cmd(out)], rows=40, cols=200)
    p.expect(rb"rc=1", timeout=30)
    p.expect(PROMPT, timeout=30)
    text = p.text()
    assert "REFUSED  %s/new  (openat" % out in text or "REFUSED  %s/new  (open" % out in text, text
    assert "by /usr/bin/touch" in text, text
    assert "add      filesystem.write %s\r\n" % out in text, text
    assert '+      "%s"' % out in text, "the diff does not show the line: %r" % text
    # a system directory is never offered: named, with the reason
    assert "not offered: /etc/ab-never: needs /etc writable, a system directory" in text, text
    return p


def test_refused_creation_offered_and_written(ctx):
    out, prof, log = _setup(ctx, "pa-yes")
    before = open(prof).read()
    p = _offer(ctx, out, prof, log)
    assert open(prof).read() == before, "written before the answer"
    p.write(b"y")
    p.expect(rb"agentbox: written", timeout=20)
    assert p.wait(30) == 0, p.text()
    after = json.loads(open(prof).read())
    assert after["filesystem"]["write"] == [out], after
    assert after["filesystem"]["read"] == [out] and after["extends"] == ["default"], after
    assert not os.path.exists(os.path.join(out, "new"))
    ev = _events(log)
    assert [e["phase"] for e in ev] == ["offer", "answer"], ev
    assert ev[1]["answer"] == "yes" and ev[1]["lines"] == ["filesystem.write " + out], ev
    assert ev[0]["paths"][0]["path"] == out + "/new" and ev[0]["paths"][0]["errno"] in (13, 30), ev
    assert ev[0]["profile"] == prof, ev
    rep = ctx.run(["report", log])
    assert "Paths offered at exit (run --ask): 1 offer, 1 answer" in rep.stdout, describe(rep)
    assert "line      filesystem.write " + out in rep.stdout, describe(rep)
    # the written profile is valid, and the same command now creates there
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c", "touch %s/new" % out])
    assert r.returncode == 0, describe(r)
    assert os.path.exists(os.path.join(out, "new"))


def test_refused_creation_declined_writes_nothing(ctx):
    out, prof, log = _setup(ctx, "pa-no")
    before = open(prof).read()
    p = _offer(ctx, out, prof, log)
    p.write(b"n")
    assert p.wait(30) == 0, p.text()
    assert b"agentbox: written" not in p.buf
    assert open(prof).read() == before
    ev = _events(log)
    assert [(e["phase"], e.get("answer")) for e in ev] == [("offer", None), ("answer", "no")], ev
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c", "touch %s/new" % out])
    assert r.returncode != 0 and not os.path.exists(os.path.join(out, "new")), describe(r)


def test_no_terminal_no_question_the_summary_lists_it(ctx):
    """stdin not a terminal (the asker's rule): no question, nothing written;
    the exit summary (stderr is a terminal) lists the path and the line."""
    out, prof, log = _setup(ctx, "pa-notty")
    before = open(prof).read()
    p = PtyRun(ctx, ["run", "--ask", "-p", prof, "--log", log, "-w", ctx.ws, "--", "sh", "-c",
                     _cmd(out)], rows=40, cols=200, stdin=open(os.devnull))
    assert p.wait(60) == 0, p.text()
    text = p.text()
    assert "[y/n]" not in text, text
    assert "2 paths the sandbox was refused creating or writing:" in text, text
    assert "REFUSED  %s/new" % out in text, text
    assert "a profile would grant it with: filesystem.write %s" % out in text, text
    assert open(prof).read() == before
    assert _events(log) == []
    assert "(run --ask on a terminal offers to add it to a profile)" in text, text


def test_trace_without_ask_lists_it(ctx):
    """--trace keeps the record too (--trace=best-effort: also where the
    kernel tracer cannot run): the summary lists it, nothing is asked."""
    out, prof, log = _setup(ctx, "pa-trace")
    before = open(prof).read()
    p = PtyRun(ctx, ["run", "--trace=best-effort", "-p", prof, "-w", ctx.ws, "--", "sh", "-c",
                     _cmd(out)], rows=40, cols=200)
    assert p.wait(60) == 0, p.text()
    text = p.text()
    assert "[y/n]" not in text, text
    assert "REFUSED  %s/new" % out in text, text
    assert "a profile would grant it with: filesystem.write %s" % out in text, text
    assert open(prof).read() == before


def test_refused_write_offers_the_file(ctx):
    """An open for writing of a file the host has: the file itself is offered
    (not its directory); after y the next run appends to it."""
    out, prof, log = _setup(ctx, "pa-file")
    f = ctx.host_file(os.path.join(out, "existing"), "before\n")
    p = PtyRun(ctx, ["run", "--ask", "--ask-timeout", "30", "-p", prof, "--log", log,
                     "-w", ctx.ws, "--", "sh", "-c", "echo more >> %s; echo rc=$?" % f],
               rows=40, cols=200)
    p.expect(rb"rc=[12]", timeout=30)
    p.expect(PROMPT, timeout=30)
    text = p.text()
    assert "add      filesystem.write %s\r\n" % f in text, text
    assert "filesystem.write %s\r\n" % out not in text, text
    p.write(b"y")
    p.expect(rb"agentbox: written", timeout=20)
    assert p.wait(30) == 0, p.text()
    assert json.loads(open(prof).read())["filesystem"]["write"] == [f]
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c", "echo more >> %s" % f])
    assert r.returncode == 0, describe(r)
    assert open(f).read() == "before\nmore\n"
