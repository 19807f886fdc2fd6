# SPDX-License-Identifier: MIT
"""Red team: paths the host's git configuration names inside the workspace.

The host's config (the repository's .git/config, the user's ~/.gitconfig, and
the files they include) names programs and hook directories; when one of
those lies in the workspace, the sandbox could write it and the user's next
`git status`, `git commit`, `git add`, `git diff` or credential lookup on the
host would run it.  agentbox reads that config at start (src/plan/plan_gitcfg.c)
and protects each such path.  Each test plants a payload from inside, then
runs the real host git and checks on the host that the payload did not run
(a marker file in a host-only directory stays absent).  Its "_ablated" twin
runs the same attack with build/agentbox-ablate and
AGENTBOX_TEST_ABLATE=gitconfig, which skips that planning: the payload runs,
so the test can fail.
"""

import json
import os
import subprocess

import abtest
from abtest import HOST_PATH, describe


def _as_user(ctx, cmd):
    if ctx.uid != os.getuid():
        return ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
                "--clear-groups"] + list(cmd)
    return list(cmd)


def _git(ctx, *args, home=None, check=True, input=None):
    """The real git on the host as the test user (HOME: the scratch dir,
    or HOME to use a ~/.gitconfig the test wrote)."""
    cmd = _as_user(ctx, ["git", "-c", "safe.directory=*", "-c", "user.name=host",
                         "-c", "user.email=host@example.com"] + list(args))
    env = {"PATH": HOST_PATH, "HOME": home or ctx.scratch, "LANG": "C.UTF-8",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    r = subprocess.run(cmd, cwd=ctx.ws, env=env, input=input, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    if check:
        assert r.returncode == 0, "host git %s failed:\n%s%s" % (args, r.stdout, r.stderr)
    return r


def _repo(ctx, files=None, config=()):
    """A committed repository in the workspace with FILES and CONFIG pairs."""
    _git(ctx, "init", "-q", "-b", "main", ".")
    for rel, (data, mode) in (files or {}).items():
        p = os.path.join(ctx.ws, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        ctx.host_file(p, data, mode)
        if ctx.uid and os.path.dirname(p) != ctx.ws:
            os.chown(os.path.dirname(p), ctx.uid, ctx.gid)
    _git(ctx, "add", "-A")
    _git(ctx, "commit", "-q", "--no-verify", "-m", "initial")
    for k, v in config:
        _git(ctx, "config", k, v)


def _marker(ctx):
    m = os.path.join(ctx.scratch, "pwned")
    return m, "#!/bin/sh\ntouch %s\nexit 1\n" % m


def _sandbox(ctx, script, ablate=None):
    """Run SCRIPT inside (the plain build, or the ablated one)."""
    if not ablate:
        return ctx.sandbox(script)
    saved = abtest.BINARY
    abtest.BINARY = os.path.join(os.path.dirname(saved), "agentbox-ablate")
    assert os.access(abtest.BINARY, os.X_OK), "build agentbox-ablate with make"
    try:
        return ctx.sandbox(script, env={"AGENTBOX_TEST_ABLATE": ablate})
    finally:
        abtest.BINARY = saved


def _plant(ctx, files, ablate):
    """Write FILES (rel -> payload) from inside, executable; True if all
    writes succeeded."""
    cmds = []
    for rel, data in files.items():
        d = os.path.dirname(rel)
        cmds.append("%sprintf '%%s' %s > %s && chmod +x %s" % (
            ("mkdir -p %s && " % abtest.sh_quote(d)) if d else "",
            abtest.sh_quote(data), abtest.sh_quote(rel), abtest.sh_quote(rel)))
    r = _sandbox(ctx, " ; ".join("(%s) 2>/dev/null" % c for c in cmds) + "; true", ablate)
    assert r.returncode == 0, describe(r)
    return r


def _verdict(ctx, marker, ablate, what):
    if ablate:
        assert os.path.exists(marker), \
            "%s: with the gitconfig layer ablated the payload did not run, so the " \
            "test cannot tell a protection from a broken attack" % what
    else:
        assert not os.path.exists(marker), \
            "%s: a payload planted inside the sandbox ran on the host" % what


# ---------------------------------------------------------------- the attacks

def _hooks_path(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {".githooks/pre-commit": ("#!/bin/sh\nexit 0\n", 0o755)},
          [("core.hooksPath", ".githooks")])
    _plant(ctx, {".githooks/pre-commit": payload, ".githooks/post-commit": payload}, ablate)
    ctx.host_file(os.path.join(ctx.ws, "f"), "x\n")
    _git(ctx, "add", "f")
    _git(ctx, "commit", "-q", "-m", "host commit", check=False)
    _verdict(ctx, marker, ablate, "core.hooksPath=.githooks, host git commit")


def test_gitcfg_hooks_path(ctx):
    """core.hooksPath = .githooks (husky, lefthook): the hook directory is
    read-only inside, so the host's `git commit` runs the committed hooks."""
    _hooks_path(ctx, None)


def test_gitcfg_hooks_path_ablated(ctx):
    _hooks_path(ctx, "gitconfig")


def _fsmonitor(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {"README": ("hi\n", 0o644)}, [("core.fsmonitor", "./tools/fsmon.sh")])
    _plant(ctx, {"tools/fsmon.sh": payload}, ablate)
    _git(ctx, "status", "--porcelain", check=False)
    _verdict(ctx, marker, ablate, "core.fsmonitor=./tools/fsmon.sh, host git status")


def test_gitcfg_fsmonitor(ctx):
    """core.fsmonitor names a workspace script that does not exist yet: it
    is reserved (and its missing directory), so the sandbox cannot create it."""
    _fsmonitor(ctx, None)


def test_gitcfg_fsmonitor_ablated(ctx):
    _fsmonitor(ctx, "gitconfig")


def _include(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {"README": ("hi\n", 0o644)}, [("include.path", "../project.gitconfig")])
    # the included file does not exist on the host; the sandbox writes one
    # that sets core.fsmonitor to a script it writes too
    script = os.path.join(ctx.ws, "fsmon2.sh")
    _plant(ctx, {"project.gitconfig": "[core]\n\tfsmonitor = %s\n" % script,
                 "fsmon2.sh": payload}, ablate)
    _git(ctx, "status", "--porcelain", check=False)
    _verdict(ctx, marker, ablate, "include.path -> core.fsmonitor, host git status")


def test_gitcfg_include(ctx):
    """include.path (relative to .git/config: ../project.gitconfig) names a
    workspace file: it cannot be created inside, so nothing it would set runs."""
    _include(ctx, None)


def test_gitcfg_include_ablated(ctx):
    _include(ctx, "gitconfig")


def _filter(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {".gitattributes": ("*.dat filter=x\n", 0o644),
                "clean.sh": ("#!/bin/sh\ncat\n", 0o755)},
          [("filter.x.clean", "./clean.sh %f")])
    _plant(ctx, {"clean.sh": payload}, ablate)
    ctx.host_file(os.path.join(ctx.ws, "a.dat"), "data\n")
    _git(ctx, "add", "a.dat", check=False)
    _verdict(ctx, marker, ablate, "filter.x.clean, host git add")


def test_gitcfg_filter_clean(ctx):
    """filter.x.clean = ./clean.sh with .gitattributes routing *.dat through
    it: the script stays read-only inside, so the host's `git add` runs the
    committed one."""
    _filter(ctx, None)


def test_gitcfg_filter_clean_ablated(ctx):
    _filter(ctx, "gitconfig")


def _textconv(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {".gitattributes": ("*.txt diff=x\n", 0o644), "a.txt": ("one\n", 0o644),
                "bin/textconv": ("#!/bin/sh\ncat \"$1\"\n", 0o755)},
          [("diff.x.textconv", "bin/textconv")])
    _plant(ctx, {"bin/textconv": payload}, ablate)
    ctx.host_file(os.path.join(ctx.ws, "a.txt"), "two\n")
    _git(ctx, "diff", check=False)
    _git(ctx, "log", "-p", "-1", check=False)
    _verdict(ctx, marker, ablate, "diff.x.textconv, host git diff")


def test_gitcfg_textconv(ctx):
    """diff.x.textconv = bin/textconv (a relative word with a '/')."""
    _textconv(ctx, None)


def test_gitcfg_textconv_ablated(ctx):
    _textconv(ctx, "gitconfig")


def _ssh_command(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {"README": ("hi\n", 0o644)},
          [("core.sshCommand", "scripts/ssh.sh -o BatchMode=yes")])
    _plant(ctx, {"scripts/ssh.sh": payload}, ablate)
    _git(ctx, "fetch", "ssh://git.invalid/x.git", check=False)
    _verdict(ctx, marker, ablate, "core.sshCommand, host git fetch over ssh://")


def test_gitcfg_ssh_command(ctx):
    """core.sshCommand names a workspace script (relative, absent): reserved."""
    _ssh_command(ctx, None)


def test_gitcfg_ssh_command_ablated(ctx):
    _ssh_command(ctx, "gitconfig")


def _credential_helper(ctx, ablate):
    marker, payload = _marker(ctx)
    cred = os.path.join(ctx.ws, "scripts", "cred.sh")
    _repo(ctx, {"README": ("hi\n", 0o644)}, [("credential.helper", cred)])
    _plant(ctx, {"scripts/cred.sh": payload}, ablate)
    _git(ctx, "credential", "fill", check=False,
         input="protocol=https\nhost=example.com\n\n")
    _verdict(ctx, marker, ablate, "credential.helper, host git credential fill")


def test_gitcfg_credential_helper(ctx):
    """credential.helper names a workspace script by its absolute path
    (absent): reserved."""
    _credential_helper(ctx, None)


def test_gitcfg_credential_helper_ablated(ctx):
    _credential_helper(ctx, "gitconfig")


def _global_hooks(ctx, ablate):
    marker, payload = _marker(ctx)
    _repo(ctx, {"README": ("hi\n", 0o644)})
    # the user's own ~/.gitconfig (agentbox runs with HOME=ctx.home)
    ctx.host_file(os.path.join(ctx.home, ".gitconfig"), "[core]\n\thooksPath = .hooks\n")
    _plant(ctx, {".hooks/pre-commit": payload}, ablate)
    ctx.host_file(os.path.join(ctx.ws, "f"), "x\n")
    _git(ctx, "add", "f", home=ctx.home)
    _git(ctx, "commit", "-q", "-m", "host commit", home=ctx.home, check=False)
    _verdict(ctx, marker, ablate, "~/.gitconfig core.hooksPath=.hooks, host git commit")


def test_gitcfg_global_hooks_path(ctx):
    """The user's global ~/.gitconfig sets a relative core.hooksPath: it
    resolves in every repository, so the workspace's .hooks/ is reserved."""
    _global_hooks(ctx, None)


def test_gitcfg_global_hooks_path_ablated(ctx):
    _global_hooks(ctx, "gitconfig")


# ---------------------------------------------------------------- explain, refusal

def test_gitcfg_explain(ctx):
    """explain (text and JSON) names each protected path, its key and the
    file:line that named it."""
    _repo(ctx, {"README": ("hi\n", 0o644)},
          [("core.hooksPath", ".githooks"), ("include.path", "../inc.gitconfig")])
    ctx.host_file(os.path.join(ctx.ws, "inc.gitconfig"),
                  "# included\n[diff \"x\"]\n\ttextconv = ./tc.sh\n")
    r = ctx.run(["explain", "-p", "default", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    for line in ("protect .githooks/ (core.hookspath in .git/config:",
                 "protect inc.gitconfig (include.path in .git/config:",
                 "protect tc.sh (diff.x.textconv in inc.gitconfig:3)"):
        assert line in r.stdout, "%r not in explain\n%s" % (line, describe(r))
    r = ctx.run(["explain", "--json", "-p", "default", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    g = json.loads(r.stdout)["gitconfig"]
    assert {"path": "tc.sh", "key": "diff.x.textconv", "source": "inc.gitconfig:3"} in g, g
    paths = json.loads(r.stdout)["protected"]
    assert os.path.join(ctx.ws, ".githooks") in paths, paths


def test_gitcfg_unparsable_refuses(ctx):
    """A config file git itself would refuse makes agentbox refuse (125),
    naming file:line:column; nothing runs."""
    _repo(ctx, {"README": ("hi\n", 0o644)}, [("include.path", "../bad.gitconfig")])
    ctx.host_file(os.path.join(ctx.ws, "bad.gitconfig"), "[core]\n\tx = \"open\n")
    r = ctx.sandbox("echo RAN")
    assert r.returncode == 125, describe(r)
    assert "RAN" not in r.stdout
    assert "bad.gitconfig:2:11: unterminated quoted value" in r.stderr, describe(r)
    assert _git(ctx, "status", check=False).returncode != 0  # git refuses it too
