# SPDX-License-Identifier: MIT
"""Nested git repositories: nothing the sandbox arms in one runs on the host.

The sandbox may create repositories below the workspace (`git clone`, `git
init`, `cargo new`) and change existing ones: the trees and the index stay
writable.  What it armed (a config key that names a program, a hook, a
gitfile or symlink pointing elsewhere) is disarmed when the run ends: the
`.git` is moved aside (src/observe/gitnest.c).  Each test arms one route from
inside, then runs the real host git the way the user or a prompt would, and
checks the marker its payload would touch.  Each route has an ablated twin
(AGENTBOX_TEST_ABLATE=settle) that shows the payload does run without this
layer, so the test can fail.  Payloads touch a marker in ctx.scratch: inside
the sandbox that path lies in the private /tmp, so only a payload that runs
on the host makes the host's marker.
"""

import json
import os
import pty
import signal
import subprocess
import time

import abtest
from abtest import HOST_PATH, NOBODY_GID, NOBODY_UID, describe, sh_quote as q, wait_for
from test_redteam import _as_user, _host_git, _marker, _repo, _submodule


def _run(ctx, script, ablate=False, ws=None):
    """`agentbox run -- sh -c SCRIPT`; ABLATE: the test-only build without
    the disarming of nested repositories."""
    if not ablate:
        r = ctx.sandbox(script, ws=ws)
        assert r.returncode == 0, describe(r)
        return r
    binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
    assert os.access(binary, os.X_OK), "build agentbox-ablate with make"
    cmd = [binary, "run", "-p", "default", "-w", ws or ctx.ws, "--", "sh", "-c", script]
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
               "--clear-groups"] + cmd
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home,
           "AGENTBOX_TEST_ABLATE": "settle"}
    r = subprocess.run(cmd, env=env, cwd=ws or ctx.ws, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=90)
    assert r.returncode == 0, "%s\n%s" % (r.stdout, r.stderr)
    assert "LEFT ARMED (test ablation)" in r.stderr, r.stderr
    return r


def _verdict(ctx, marker, what, ablate):
    if ablate:
        assert os.path.exists(marker), \
            "%s: the ablated twin did not run the payload: the test cannot fail" % what
    else:
        assert not os.path.exists(marker), \
            "%s: a payload planted inside the sandbox ran on the host" % what


# ---------------------------------------------------------------- the routes

_GITLINK = ("mkdir sub && cd sub && git init -q . && "
            "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m s && "
            "git config core.fsmonitor %s && cd .. && "
            "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub")


def _gitlink(ctx, ablate):
    """A nested repository with core.fsmonitor, registered as a gitlink in the
    (writable) index: the host's `git status` in the workspace recurses into
    it."""
    _repo(ctx)
    marker, payload = _marker(ctx)
    r = _run(ctx, _GITLINK % q(payload), ablate)
    _host_git(ctx, "status", "--porcelain")
    _verdict(ctx, marker, "nested repository via gitlink", ablate)
    return r


def test_nested_repo_via_gitlink(ctx):
    r = _gitlink(ctx, False)
    assert "disarmed a nested git repository armed during the run: %s/sub/.git " \
        "(core.fsmonitor in config, line " % ctx.ws in r.stderr, r.stderr
    # still a repository, without what armed it
    assert os.path.isfile(os.path.join(ctx.ws, "sub", ".git", "config.agentbox-disarmed"))
    assert not os.path.exists(os.path.join(ctx.ws, "sub", ".git", "config"))
    assert _host_git(ctx, "log", "--oneline", cwd=os.path.join(ctx.ws, "sub")).returncode == 0


def test_nested_repo_moved_back_next_run(ctx):
    """The next run moves the disarmed config back: its change time is new,
    so it is disarmed again."""
    _gitlink(ctx, False)
    marker, _ = _marker(ctx)
    r = _run(ctx, "mv sub/.git/config.agentbox-disarmed sub/.git/config")
    assert "disarmed a nested git repository" in r.stderr, describe(r)
    _host_git(ctx, "status", "--porcelain")
    _verdict(ctx, marker, "a disarmed config moved back", False)


def test_nested_repo_via_gitlink_ablated(ctx):
    _gitlink(ctx, True)


def _cd_prompt(ctx, ablate):
    """No gitlink: the user (or a git-aware prompt) runs git inside it."""
    marker, payload = _marker(ctx)
    _run(ctx, "git init -q deps/lib && git -C deps/lib config core.fsmonitor %s" % q(payload),
         ablate)
    _host_git(ctx, "status", "--porcelain", cwd=os.path.join(ctx.ws, "deps", "lib"))
    _verdict(ctx, marker, "cd into a nested repository", ablate)


def test_nested_repo_cd_prompt(ctx):
    _cd_prompt(ctx, False)


def test_nested_repo_cd_prompt_ablated(ctx):
    _cd_prompt(ctx, True)


def _submodule_gitfile(ctx, ablate):
    """An existing submodule's `.git` is a gitfile into .git/modules (protected);
    the sandbox points it at a git directory of its own."""
    _submodule(ctx)
    marker, payload = _marker(ctx)
    _run(ctx, "git clone -q --bare . sub/.evil && git -C sub/.evil config core.fsmonitor %s && "
         "git -C sub/.evil config core.bare false && git -C sub/.evil config core.worktree .. && "
         "printf 'gitdir: .evil\\n' > sub/.git" % q(payload), ablate)
    _host_git(ctx, "status", "--porcelain")
    _verdict(ctx, marker, "a submodule's .git replaced", ablate)


def test_submodule_gitfile_replaced(ctx):
    _submodule_gitfile(ctx, False)
    # the gitfile and the directory it names were both kept off the host
    # while the run lasted; the gitfile is moved aside whole, whichever of
    # the two the walk puts back first (else it names the disarmed sub/.evil,
    # a clone of the workspace without the submodule's commits)
    sub = os.path.join(ctx.ws, "sub")
    assert not os.path.lexists(os.path.join(sub, ".git")), os.listdir(sub)
    with open(os.path.join(sub, ".git.agentbox-disarmed")) as f:
        assert f.read() == "gitdir: .evil\n"
    # what the user restores it with (docs/threat-model.md, section 5)
    r = _host_git(ctx, "submodule", "update", "--init", "--force")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(sub, ".git")) as f:
        assert f.read() == "gitdir: ../.git/modules/sub\n"
    want = ctx.git_host("rev-parse", "HEAD:sub").strip()
    assert _host_git(ctx, "rev-parse", "HEAD", cwd=sub).stdout.strip() == want


def test_submodule_gitfile_replaced_ablated(ctx):
    _submodule_gitfile(ctx, True)


def _hook_in_existing(ctx, ablate):
    """An inert nested repository the user cloned before the run gets a hook
    from inside; the user commits in it on the host."""
    _repo(ctx)
    lib = os.path.join(ctx.ws, "vendor", "lib")
    os.makedirs(lib)
    if ctx.uid:
        os.chown(os.path.dirname(lib), ctx.uid, ctx.gid)
        os.chown(lib, ctx.uid, ctx.gid)
    _repo(ctx, lib)
    marker, payload = _marker(ctx)
    _run(ctx, "printf '#!/bin/sh\\n%s\\n' > vendor/lib/.git/hooks/pre-commit && "
         "chmod +x vendor/lib/.git/hooks/pre-commit" % payload, ablate)
    _host_git(ctx, "commit", "-q", "--allow-empty", "-m", "on the host", cwd=lib)
    _verdict(ctx, marker, "a hook added to an existing nested repository", ablate)


def test_hook_in_existing_nested_repo(ctx):
    _hook_in_existing(ctx, False)


def test_hook_in_existing_nested_repo_ablated(ctx):
    _hook_in_existing(ctx, True)


def _bare_pager(ctx, ablate):
    """A bare repository (no `.git` name at all) with core.pager: the user runs
    `git log` in it on a terminal."""
    _repo(ctx)
    marker, payload = _marker(ctx)
    _run(ctx, "git clone -q --bare . tools.git && git -C tools.git config core.pager %s"
         % q(payload), ablate)
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(os.path.join(ctx.ws, "tools.git"))
        cmd = _as_user(ctx, ["git", "-c", "safe.directory=*", "log"])
        os.execvpe(cmd[0], cmd, {"PATH": HOST_PATH, "HOME": ctx.scratch, "TERM": "xterm",
                                 "GIT_CONFIG_NOSYSTEM": "1"})
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    os.waitpid(pid, 0)
    _verdict(ctx, marker, "a bare repository's core.pager", ablate)


def test_bare_repo_pager(ctx):
    _bare_pager(ctx, False)


def test_bare_repo_pager_ablated(ctx):
    _bare_pager(ctx, True)


# ---------------------------------------------------------------- what keeps working

def test_inert_repositories_kept(ctx):
    """A clone of a dependency and a new project (`git init`) stay repositories:
    nothing in them runs anything, so nothing is moved and nothing is said."""
    _repo(ctx)
    r = _run(ctx, "git clone -q . third_party/dep && git init -q newproj && "
             "git -C newproj config user.email a@b && git -C newproj config user.name a && "
             "git -C newproj commit -q --allow-empty -m first && git status --porcelain "
             ">/dev/null")
    assert "nested" not in r.stderr and "disarm" not in r.stderr, describe(r)
    for d in ("third_party/dep", "newproj"):
        out = _host_git(ctx, "log", "--oneline", cwd=os.path.join(ctx.ws, d))
        assert out.returncode == 0 and out.stdout.strip(), (d, out.stderr)


def test_disarm_logged(ctx):
    """The move is in the audit log too (agentbox report reads it)."""
    _repo(ctx)
    log = os.path.join(ctx.scratch, "audit.jsonl")
    marker, payload = _marker(ctx)
    r = ctx.sandbox(_GITLINK % q(payload), extra_args=["--log", log])
    assert r.returncode == 0, describe(r)
    warnings = [json.loads(l) for l in open(log) if '"event":"warning"' in l]
    git = [w for w in warnings if w.get("kind") == "git"]
    assert len(git) == 1 and "sub/.git" in git[0]["message"], warnings
    rep = ctx.run(["report", log])
    assert rep.returncode == 0 and "sub/.git" in rep.stdout, describe(rep)


def test_killed_agentbox_still_disarms(ctx):
    """agentbox SIGKILLed mid-run: its cleanup watcher settles the nested
    repositories once the sandbox is gone."""
    _repo(ctx)
    marker, payload = _marker(ctx)
    ready = os.path.join(ctx.ws, "ready")
    p = ctx.popen(["run", "-p", "default", "-w", ctx.ws, "--", "sh", "-c",
                   (_GITLINK % q(payload)) + " && touch ready && sleep 60"])
    assert wait_for(lambda: os.path.exists(ready), 30, 0.05), "the sandbox never got ready"
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    cfg = os.path.join(ctx.ws, "sub", ".git", "config")
    assert wait_for(lambda: not os.path.exists(cfg), 20, 0.05), \
        "the nested repository was not disarmed after agentbox was killed"
    _host_git(ctx, "status", "--porcelain")
    assert not os.path.exists(marker), "the payload ran on the host"


def test_unguarded_optional_entry_named(ctx):
    """A `?` protect entry reserves nothing while absent (.husky/ in default):
    one the run creates is moved aside at the end, said on stderr and in the
    log.  One that was there before the run (protected) or that the run did
    not create is not."""
    _repo(ctx)
    log = os.path.join(ctx.scratch, "audit.jsonl")
    quiet = ctx.sandbox("true", extra_args=["--log", log])
    assert quiet.returncode == 0 and "moved to" not in quiet.stderr, describe(quiet)
    r = ctx.sandbox("mkdir .husky && echo 'npm test' > .husky/pre-commit",
                    extra_args=["--log", log])
    assert r.returncode == 0, describe(r)
    assert "reserves nothing: %s/.husky, moved to .husky.agentbox-disarmed;" % ctx.ws \
        in r.stderr, describe(r)
    assert not os.path.exists(os.path.join(ctx.ws, ".husky"))
    moved = os.path.join(ctx.ws, ".husky.agentbox-disarmed", "pre-commit")
    assert open(moved).read() == "npm test\n"
    ev = [json.loads(l) for l in open(log) if '"kind":"unprotected"' in l]
    assert len(ev) == 1 and ev[0]["path"] == os.path.join(ctx.ws, ".husky"), ev
    os.rename(os.path.dirname(moved), os.path.join(ctx.ws, ".husky"))  # the user's review
    again = ctx.sandbox("true")   # present at the start now: protected, not moved
    assert again.returncode == 0 and "moved to" not in again.stderr, describe(again)
    assert os.path.isdir(os.path.join(ctx.ws, ".husky"))


def _shared_hooks_path(ctx, ablate):
    """The user's global config sets a relative core.hooksPath: git takes it
    from every work tree, so a nested repository's `.githooks/` is its hooks
    directory.  The sandbox makes one; the user commits in it."""
    cfg = "[core]\n\thooksPath = .githooks\n"
    for home in (ctx.home, ctx.scratch):   # agentbox's HOME, and the host git's
        ctx.host_file(os.path.join(home, ".gitconfig"), cfg)
    _repo(ctx)
    marker, payload = _marker(ctx)
    _run(ctx, "git init -q sub && mkdir sub/.githooks && "
         "printf '#!/bin/sh\\n%s\\n' > sub/.githooks/pre-commit && "
         "chmod +x sub/.githooks/pre-commit" % payload, ablate)
    _host_git(ctx, "commit", "-q", "--allow-empty", "-m", "host", cwd=os.path.join(ctx.ws, "sub"))
    _verdict(ctx, marker, "a nested work tree's hooks directory named by the global config",
             ablate)


def test_global_relative_hooks_path_in_nested_repo(ctx):
    _shared_hooks_path(ctx, False)
    assert os.path.isdir(os.path.join(ctx.ws, "sub", ".githooks.agentbox-disarmed"))


def test_global_relative_hooks_path_in_nested_repo_ablated(ctx):
    _shared_hooks_path(ctx, True)
