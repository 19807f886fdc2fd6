# SPDX-License-Identifier: MIT
"""The person at the keyboard, in the audit log and the report.

Review mode's steps each write a `review` event (docs/audit.md): the run
that ends with its change set pending ("held"), `agentbox review`
("shown"), `agentbox apply` ("applied": what was named, applied, left out,
failed) and `agentbox discard` ("discarded").  The commands write to the
log the run wrote, or to their own --log.  `agentbox report` shows them,
and run --ask's questions and answers, in text and --json.
"""

import json
import os
import re

from abtest import PtyRun, describe
from upstream import Egress


def _events(log, kind=None):
    with open(log) as f:
        evs = [json.loads(line) for line in f if line.strip()]
    return [e for e in evs if kind is None or e.get("event") == kind]


def _project(ctx):
    for n, body in (("a.txt", "alpha\n"), ("b.txt", "beta\n"), ("c.txt", "gamma\n")):
        ctx.host_file(os.path.join(ctx.ws, n), body)
    ctx.git_host("init", "-q")
    ctx.git_host("add", "-A")
    ctx.git_host("commit", "-qm", "init")


EDITS = ("rm c.txt && echo more >> a.txt && echo BETA > b.txt && echo new > n.txt && "
         "git init -q sub")


def _held_run(ctx, log):
    _project(ctx)
    args = ["--review"] + (["--log", log] if log else [])
    r = ctx.sandbox(EDITS, extra_args=args)
    assert r.returncode == 0, describe(r)
    return r


def test_review_steps_write_review_events(ctx):
    """run --review --log L, then review, review --diff, apply PATH (one
    that matches nothing), apply (the nested .git left out), discard: each
    writes its event to L, the run's before its "end"."""
    log = os.path.join(ctx.scratch, "audit.jsonl")
    _held_run(ctx, log)
    evs = _events(log)
    kinds = [e["event"] for e in evs]
    assert "review" in kinds and kinds[-1] == "end", kinds
    held = _events(log, "review")
    assert len(held) == 1 and held[0]["action"] == "held", held
    h = held[0]
    assert h["workspace"] == ctx.ws, h
    cs = h["change_set"]
    assert os.path.isdir(os.path.join(cs, "upper")), h
    assert (h["added"], h["modified"], h["deleted"]) >= (2, 2, 1), h
    assert h["changes"] == h["added"] + h["modified"] + h["deleted"], h

    for extra in ((), ("--diff",)):
        r = ctx.run(["review", "-w", ctx.ws] + list(extra))
        assert r.returncode == 0, describe(r)
    shown = _events(log, "review")[1:]
    assert [(e["action"], e["diff"]) for e in shown] == [("shown", False), ("shown", True)]
    assert all(e["change_set"] == cs and e["changes"] == h["changes"] for e in shown), shown

    r = ctx.run(["apply", "-w", ctx.ws, "a.txt", "nope.txt"])
    assert r.returncode == 1, describe(r)
    a = _events(log, "review")[-1]
    assert a["action"] == "applied" and a["workspace"] == ctx.ws and a["change_set"] == cs, a
    assert a["named"] == ["a.txt", "nope.txt"], a
    assert a["applied"] == ["a.txt"] and a["n_applied"] == 1, a
    assert a["left_out"] == [{"path": "nope.txt", "reason": "no pending change there"}], a
    assert a["failed"] == [] and a["pending"] == h["changes"] - 1 and a["status"] == 1, a

    r = ctx.run(["apply", "-w", ctx.ws])
    assert r.returncode == 1 and "sub/.git left out" in r.stderr, describe(r)
    a = _events(log, "review")[-1]
    assert "named" not in a, a
    assert sorted(a["applied"]) == ["b.txt", "c.txt", "n.txt"], a
    # the nested repository's files are one item, with the reason
    assert [x["path"] for x in a["left_out"]] == ["sub/.git/"], a
    assert "nested .git" in a["left_out"][0]["reason"], a
    assert a["n_left_out"] == 1 and a["pending"] >= 1 and a["status"] == 1, a

    r = ctx.run(["discard", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    d = _events(log, "review")[-1]
    assert d["action"] == "discarded" and d["change_set"] == cs and d["status"] == 0, d
    assert d["changes"] == a["pending"], (d, a)
    assert not os.path.exists(cs)


def test_review_commands_log_option(ctx):
    """A run without a log: the commands write only where --log says; a
    relative --log is the caller's working directory's."""
    _held_run(ctx, None)
    other = os.path.join(ctx.scratch, "later.jsonl")
    r = ctx.run(["review", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    assert not os.path.exists(other)
    r = ctx.run(["apply", "-w", ctx.ws, "--log", "later.jsonl", "n.txt"], cwd=ctx.scratch)
    assert r.returncode == 0, describe(r)
    evs = _events(other)
    assert [(e["event"], e["action"], e["applied"]) for e in evs] == [
        ("review", "applied", ["n.txt"])], evs
    r = ctx.run(["discard", "-w", ctx.ws, "--log", other])
    assert r.returncode == 0, describe(r)
    assert [e["action"] for e in _events(other)] == ["applied", "discarded"]


def test_review_commands_run_log_gone(ctx):
    """The run's log can no longer be opened (its directory is gone): the
    command says so and still does its work."""
    d = os.path.join(ctx.scratch, "logs")
    os.makedirs(d)
    if ctx.uid:
        os.chown(d, ctx.uid, ctx.gid)
    log = os.path.join(d, "audit.jsonl")
    _held_run(ctx, log)
    os.unlink(log)
    os.rmdir(d)
    r = ctx.run(["discard", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    assert "not recorded in the run's audit log" in r.stderr, describe(r)
    assert not os.path.exists(log)


def _report(ctx, log, *extra):
    r = ctx.run(["report"] + list(extra) + [log])
    assert r.returncode == 0, describe(r)
    return r.stdout


def test_report_shows_review_steps(ctx):
    """The report's Review section: the run's change set, the apply's paths
    (applied, left out with the reason) and the discard, in text and
    --json; no event of an unknown kind."""
    log = os.path.join(ctx.scratch, "audit.jsonl")
    _held_run(ctx, log)
    for args in (["review", "--diff"], ["apply", "a.txt", "nope.txt"], ["discard"]):
        r = ctx.run(args[:1] + ["-w", ctx.ws] + args[1:])
        assert r.returncode in (0, 1), describe(r)
    held = _events(log, "review")[0]
    out = _report(ctx, log)
    assert "of kinds this agentbox does not know" not in out, out
    sec = out[out.index("\nReview (run --review"):]
    lines = sec.splitlines()
    assert re.search(r"  \S+  held: %d changes \(%d added, %d modified, %d deleted\)$" % (
        held["changes"], held["added"], held["modified"], held["deleted"]), lines[2]), sec
    assert lines[3] == "      workspace %s, change set %s" % (ctx.ws, held["change_set"]), sec
    assert re.search(r"  \S+  shown: \d+ changes .*, as a diff$", lines[4]), sec
    assert re.search(r"  \S+  applied, of \d+ changes .*; 1 applied, 1 left out, 0 failed; "
                     r"\d+ still pending \[exit 1\]$", lines[5]), sec
    assert lines[6] == "      applied   a.txt", sec
    assert lines[7] == "      left out  nope.txt (no pending change there)", sec
    assert re.search(r"  \S+  discarded: \d+ changes .*\[exit 0\]$", lines[8]), sec

    js = json.loads(_report(ctx, log, "--json"))
    assert js["unknown_events"] == 0 and js["review_events"] == 4, js["review"]
    rv = js["review"]
    assert [x["action"] for x in rv] == ["held", "shown", "applied", "discarded"], rv
    assert all(x["workspace"] == ctx.ws and x["change_set"] == held["change_set"]
               and x["session"] == 1 for x in rv), rv
    assert rv[1]["diff"] is True and rv[0]["diff"] is None, rv
    a = rv[2]
    assert a["applied"] == ["a.txt"] and a["n_applied"] == 1, a
    assert a["left_out"] == [{"path": "nope.txt", "reason": "no pending change there"}], a
    assert a["failed"] == [] and a["n_failed"] == 0 and a["status"] == 1, a
    assert a["pending"] == held["changes"] - 1, a
    assert rv[3]["status"] == 0 and rv[3]["applied"] is None, rv


CURL = "curl -s -o /dev/null -w 'CODE=%%{http_code}\\n' --max-time 60 http://http.test/%s"


def test_report_shows_ask_questions_and_answers(ctx):
    """A real run --ask: one question answered "run" (the host joins the
    allow list), one answered "deny".  The report lists each answer with
    the host, port, program and request, and the policy change made by
    the answer; --json has them too."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    log = os.path.join(ctx.scratch, "ask.jsonl")
    cmd = CURL % "first" + "; " + CURL % "second" + "; " + (
        "curl -s -o /dev/null -w 'OTHER=%{http_code}\\n' --max-time 60 http://other.test/x")
    p = PtyRun(ctx, ["run", "--ask", "--ask-timeout", "30", "-p", prof, "--log", log,
                     "-w", ctx.ws, "--", "sh", "-c", cmd], rows=30, cols=160)
    p.expect(rb"allow for this run", timeout=30)
    p.write(b"r")
    p.expect(rb"CODE=200\r\nCODE=200", timeout=30)
    p.expect(rb"other\.test", timeout=30)
    p.write(b"d")
    p.expect(rb"OTHER=403", timeout=30)
    assert p.wait(30) == 0, p.text()
    answers = [e for e in _events(log, "ask") if e["phase"] == "answer"]
    assert [(e["host"], e["answer"]) for e in answers] == [
        ("http.test", "run"), ("other.test", "deny")], answers

    out = _report(ctx, log)
    assert "of kinds this agentbox does not know" not in out, out
    sec = out[out.index("\nQuestions asked (run --ask): 2 questions, 2 answers\n"):]
    lines = sec.splitlines()
    assert re.match(r"  \S+  http\.test:80  run \(after .+\)$", lines[2]), sec
    assert lines[3] == "      request  GET http://http.test:80/first", sec
    assert re.match(r"      program  curl .*http://http\.test/first \(pid \d+ on the host\)$",
                    lines[4]), sec
    assert re.match(r"  \S+  other\.test:80  deny \(after .+\)$", lines[5]), sec
    assert "without an answer" not in sec, sec
    assert re.search(r"allow http\.test:80  \(by ask:run\)\n", out), out

    js = json.loads(_report(ctx, log, "--json"))
    assert js["ask_counts"] == {"questions": 2, "answers": 2}, js["ask_counts"]
    a = js["asks"]
    assert [(x["host"], x["port"], x["answer"], x["session"]) for x in a] == [
        ("http.test", 80, "run", 1), ("other.test", 80, "deny", 1)], a
    assert a[0]["request"] == "GET http://http.test:80/first", a
    assert "curl" in a[0]["program"] and a[0]["waited_ms"] >= 0, a
    assert [(x["rule"], x["by"]) for x in js["policy"]] == [("http.test:80", "ask:run")], js
