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

from abtest import describe


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
