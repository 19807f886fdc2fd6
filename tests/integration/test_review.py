# SPDX-License-Identifier: MIT
"""Review mode (run --review, agentbox review / apply / discard; docs/review.md).

The command works on a copy-on-write view of the workspace (an overlay whose
upper layer is a change set under $XDG_STATE_HOME/agentbox/review/): the real
workspace is untouched until `agentbox apply`.  Every test checks the real
workspace byte for byte on the host, as root and as an unprivileged user.
"""

import hashlib
import os
import signal
import stat
import subprocess
import time

from abtest import describe, root_only, wait_for


def _snapshot(root):
    """Every entry below ROOT: type, mode and content (or link target)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in sorted(dns + fns):
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as f:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode),
                                hashlib.sha256(f.read()).hexdigest())
    return out


def _state(ctx):
    return os.path.join(ctx.home, ".local", "state", "agentbox", "review")


def _project(ctx):
    """A small repository: a.txt b.txt c.txt keep.txt, committed."""
    for n, body in (("a.txt", "alpha\n"), ("b.txt", "beta\n"), ("c.txt", "gamma\n"),
                    ("keep.txt", "keep\n")):
        ctx.host_file(os.path.join(ctx.ws, n), body)
    ctx.git_host("init", "-q")
    ctx.git_host("add", "-A")
    ctx.git_host("commit", "-qm", "init")


EDITS = ("rm c.txt && echo more >> a.txt && echo BETA > b.txt && echo new > n.txt && "
         "mkdir sub && git init -q sub")


def _review(ctx, *args):
    r = ctx.run(["review", "-w", ctx.ws] + list(args))
    assert r.returncode == 0, describe(r)
    return r.stdout


def _listed(out):
    """The listing's lines: {path: (letter, rest)}."""
    got = {}
    for line in out.splitlines():
        if not line.startswith("  "):
            continue
        letter, path, rest = line[2], line[4:].split("  ")[0], line
        got[path] = (letter, rest)
    return got


def test_review_lists_discard_restores(ctx):
    _project(ctx)
    before = _snapshot(ctx.ws)
    r = ctx.sandbox(EDITS, extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    assert _snapshot(ctx.ws) == before, "the real workspace changed during a review run"
    assert "the workspace is untouched" in r.stderr, describe(r)
    got = _listed(_review(ctx))
    assert set(got) == {"a.txt", "b.txt", "c.txt", "n.txt", "sub/.git/"}, got
    assert got["a.txt"][0] == "M" and "1 -> 2 lines" in got["a.txt"][1], got
    assert got["b.txt"][0] == "M", got
    assert got["c.txt"][0] == "D" and "-1 lines" in got["c.txt"][1], got
    assert got["n.txt"][0] == "A" and "+1 lines" in got["n.txt"][1], got
    assert "nested .git" in got["sub/.git/"][1], got
    r = ctx.run(["discard", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    assert _snapshot(ctx.ws) == before
    assert os.listdir(_state(ctx)) == []
    r = ctx.run(["review", "-w", ctx.ws])
    assert r.returncode == 125 and "no change set" in r.stderr, describe(r)


def test_review_apply_chosen_paths(ctx):
    _project(ctx)
    before = _snapshot(ctx.ws)
    r = ctx.sandbox(EDITS, extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    r = ctx.run(["apply", "-w", ctx.ws, "n.txt", "c.txt"])
    assert r.returncode == 0, describe(r)
    after = _snapshot(ctx.ws)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {"n.txt", "c.txt"}, changed
    with open(os.path.join(ctx.ws, "n.txt")) as f:
        assert f.read() == "new\n"
    assert set(_listed(_review(ctx))) == {"a.txt", "b.txt", "sub/.git/"}
    # everything else: the nested .git stays out unless named
    r = ctx.run(["apply", "-w", ctx.ws])
    assert r.returncode == 1 and "sub/.git left out" in r.stderr, describe(r)
    assert not os.path.exists(os.path.join(ctx.ws, "sub", ".git"))
    with open(os.path.join(ctx.ws, "b.txt")) as f:
        assert f.read() == "BETA\n"
    r = ctx.run(["apply", "-w", ctx.ws, "sub/.git"])
    assert r.returncode == 0, describe(r)
    assert os.path.isfile(os.path.join(ctx.ws, "sub", ".git", "HEAD"))
    assert os.listdir(_state(ctx)) == [], "the change set stays after everything landed"


def test_review_git_commit_lands(ctx):
    _project(ctx)
    r = ctx.sandbox("echo more >> a.txt && git -c user.name=a -c user.email=a@b commit -qam inside "
                    "&& git status --porcelain", extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    assert ctx.git_host("log", "--format=%s").split() == ["init"]
    r = ctx.run(["apply", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    assert ctx.git_host("log", "--format=%s").split() == ["inside", "init"]
    assert ctx.git_host("status", "--porcelain") == ""


def test_review_protected_paths_hold_in_view(ctx):
    _project(ctx)
    before = _snapshot(ctx.ws)
    r = ctx.sandbox("echo '[core]' >> .git/config; mkdir -p .git/hooks; "
                    "echo x > .git/hooks/pre-commit; echo ok", extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    assert _snapshot(ctx.ws) == before
    assert ".git/config" not in _review(ctx) and ".git/hooks" not in _review(ctx)
    r = ctx.run(["explain", "-w", ctx.ws, "--review"])
    assert "mode: review" in r.stdout, describe(r)


def test_review_survives_kill9(ctx):
    _project(ctx)
    p = ctx.popen(["run", "-w", ctx.ws, "--review", "--", "sh", "-c",
                   "echo new > n.txt; echo more >> a.txt; touch started; sleep 60"])
    uppers = []

    def started():
        for d in os.listdir(_state(ctx)) if os.path.isdir(_state(ctx)) else []:
            u = os.path.join(_state(ctx), d, "upper")
            if os.path.exists(os.path.join(u, "started")):
                uppers.append(u)
                return True
        return False
    assert wait_for(started, timeout=20), "the review run did not start"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    assert not os.path.exists(os.path.join(ctx.ws, "n.txt"))
    deadline = time.time() + 15
    while True:
        r = ctx.run(["review", "-w", ctx.ws])
        if r.returncode == 0 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert r.returncode == 0, describe(r)
    assert set(_listed(r.stdout)) == {"a.txt", "n.txt", "started"}, r.stdout
    r = ctx.run(["apply", "-w", ctx.ws, "n.txt"])
    assert r.returncode == 0, describe(r)
    with open(os.path.join(ctx.ws, "n.txt")) as f:
        assert f.read() == "new\n"


def test_review_apply_refuses_symlink_swap(ctx):
    _project(ctx)
    os.makedirs(os.path.join(ctx.ws, "sub"))
    ctx.host_file(os.path.join(ctx.ws, "sub", "f.txt"), "old\n")
    if ctx.uid:
        os.lchown(os.path.join(ctx.ws, "sub"), ctx.uid, ctx.gid)
    r = ctx.sandbox("echo planted > sub/f.txt && echo two > sub/g.txt", extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    outside = os.path.join(ctx.scratch, "outside")
    os.makedirs(outside)
    if ctx.uid:
        os.chown(outside, ctx.uid, ctx.gid)
    # between the run and the apply, sub becomes a link to a directory outside
    os.rename(os.path.join(ctx.ws, "sub"), os.path.join(ctx.ws, "sub.old"))
    os.symlink(outside, os.path.join(ctx.ws, "sub"))
    r = ctx.run(["apply", "-w", ctx.ws])
    assert r.returncode == 125, describe(r)
    assert "symbolic link" in r.stderr, describe(r)
    assert os.listdir(outside) == [], "apply followed a symbolic link out of the workspace"
    assert set(_listed(_review(ctx))) == {"sub/f.txt", "sub/g.txt"}


def test_review_default_run_unchanged(ctx):
    _project(ctx)
    r = ctx.sandbox("echo direct > d.txt")
    assert r.returncode == 0, describe(r)
    with open(os.path.join(ctx.ws, "d.txt")) as f:
        assert f.read() == "direct\n"
    assert not os.path.exists(_state(ctx))
    r = ctx.run(["explain", "-w", ctx.ws])
    assert "mode: review" not in r.stdout


def test_review_refuses_write_grant_inside(ctx):
    os.makedirs(os.path.join(ctx.ws, "build"))
    r = ctx.sandbox("echo x > build/x", extra_args=["--review", "--write",
                                                     os.path.join(ctx.ws, "build")])
    assert r.returncode == 125, describe(r)
    assert "lies inside the workspace" in r.stderr, describe(r)
    assert not os.path.exists(os.path.join(ctx.ws, "build", "x"))


@root_only
def test_review_hostile_upper(ctx):
    """Entries the overlay would not write for a plain change, planted in the
    upper layer directly: listed as special, never applied, no crash."""
    _project(ctx)
    r = ctx.sandbox("echo new > n.txt", extra_args=["--review"])
    assert r.returncode == 0, describe(r)
    (d,) = os.listdir(_state(ctx))
    up = os.path.join(_state(ctx), d, "upper")
    os.mkfifo(os.path.join(up, "fifo"))
    os.mknod(os.path.join(up, "dev"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    with open(os.path.join(up, "redir"), "w") as f:
        f.write("x\n")
    os.setxattr(os.path.join(up, "redir"), "user.overlay.redirect", b"/etc/shadow")
    with open(os.path.join(up, "meta.txt"), "w") as f:
        f.write("x\n")
    os.setxattr(os.path.join(up, "meta.txt"), "user.overlay.metacopy", b"")
    os.mkdir(os.path.join(up, "odd"))
    os.setxattr(os.path.join(up, "odd"), "user.overlay.opaque", b"zz")
    with open(os.path.join(up, "esc\x1b]52;c;AAAA\x07.txt"), "w") as f:
        f.write("x\n")
    deep = up
    for _ in range(300):
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    before = _snapshot(ctx.ws)
    out = _review(ctx)
    got = _listed(out)
    for n in ("fifo", "dev", "redir", "meta.txt", "odd"):
        assert n in got and "never applied" in got[n][1], out
    assert "\x1b" not in out and "INCOMPLETE" in out, out
    r = ctx.run(["apply", "-w", ctx.ws])
    assert r.returncode == 125 and "too large" in r.stderr, describe(r)
    r = ctx.run(["apply", "-w", ctx.ws, "fifo", "dev", "redir", "meta.txt", "odd", "n.txt"])
    assert r.returncode == 1, describe(r)
    after = _snapshot(ctx.ws)
    assert {k for k in after if before.get(k) != after.get(k)} == {"n.txt"}, after


def test_review_claude_code_e2e(ctx):
    """The Done-when end to end: real Claude Code (claude -p, YOLO) against
    the mock API, in review mode, deletes a file, edits two, adds one and
    creates a .git in a subdirectory.  `review` lists exactly those, the
    nested .git flagged; `discard` leaves the workspace byte-identical; a
    second session's `apply` of chosen paths lands exactly those."""
    from mock_anthropic import Script, text_block, tool_use_block
    from test_harness_claude import RUN_TIMEOUT, VERSION, Lab
    _project(ctx)
    cmd = ("rm c.txt && printf 'alpha\\nedited\\n' > a.txt && printf 'BETA\\n' > b.txt && "
           "printf 'added\\n' > n.txt && mkdir sub && git init -q sub && echo done")

    def session():
        final = "FINAL-%d" % time.monotonic_ns()
        script = Script([
            [text_block("Editing."),
             tool_use_block("Bash", {"command": cmd, "description": "Edit the project"})],
            [text_block("Done. " + final)],
        ])
        for stale in (os.path.join(ctx.home, ".local", "bin", "claude"),
                      os.path.join(ctx.home, ".local", "share", "claude", "versions", VERSION)):
            if os.path.lexists(stale):
                os.unlink(stale)   # a second Lab installs again
        lab = Lab(ctx, script)
        args = lab.args(["claude", "-p", "Edit the project.", "--dangerously-skip-permissions"],
                        log=False)
        args.insert(1, "--review")
        r = ctx.run(args, env=lab.env(), timeout=RUN_TIMEOUT)
        assert r.returncode == 0 and final in r.stdout, lab.why(r)
        return lab, r

    before = _snapshot(ctx.ws)
    session()
    assert _snapshot(ctx.ws) == before, "Claude Code wrote the real workspace in review mode"
    got = _listed(_review(ctx))
    assert set(got) == {"a.txt", "b.txt", "c.txt", "n.txt", "sub/.git/"}, got
    assert [got[k][0] for k in ("a.txt", "b.txt", "c.txt", "n.txt")] == ["M", "M", "D", "A"]
    assert "nested .git" in got["sub/.git/"][1], got
    r = ctx.run(["discard", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    assert _snapshot(ctx.ws) == before
    # a second session, then land two of its changes
    _, r = session()
    r = ctx.run(["apply", "-w", ctx.ws, "a.txt", "c.txt"])
    assert r.returncode == 0, describe(r)
    after = _snapshot(ctx.ws)
    assert {k for k in set(before) | set(after) if before.get(k) != after.get(k)} == \
        {"a.txt", "c.txt"}
    assert set(_listed(_review(ctx))) == {"b.txt", "n.txt", "sub/.git/"}


@root_only
def test_review_overlay_impossible_fails_closed(ctx):
    """The overlay cannot be mounted (its work directory on another file
    system than its upper one): exit 125 with a hint, the command never
    runs, nothing falls back to the real workspace."""
    _project(ctx)
    r = ctx.sandbox("true", extra_args=["--review"])  # makes the change set
    assert r.returncode == 0, describe(r)
    (d,) = os.listdir(_state(ctx))
    work = os.path.join(_state(ctx), d, "work")
    subprocess.run(["rm", "-rf", work], check=True)
    os.mkdir(work)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "abreview", work], check=True)
    ctx.on_cleanup(lambda: subprocess.run(["umount", "-l", work]))
    before = _snapshot(ctx.ws)
    r = ctx.sandbox("echo ran > ran.txt", extra_args=["--review"])
    assert r.returncode == 125, describe(r)
    assert "review mode: overlay on" in r.stderr and "Hint:" in r.stderr, describe(r)
    assert _snapshot(ctx.ws) == before
