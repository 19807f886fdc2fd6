"""Seccomp's set-id mode rules go in only where they protect something: a
writable idmapped grant (root caller, root-owned workspace), whose new files
belong to host root.  Elsewhere (every unprivileged run) every file the
sandbox can create or chmod is its own host uid's, a set-id bit gives nothing,
and open/openat stay off the filter's path (the kernel's action cache).

The ablated twins (root only: build/agentbox-ablate, AGENTBOX_TEST_ABLATE=setid)
show the rules are what stops a set-uid root file landing on the host, and
that test-escape's FS-03 goes red without them."""
import json
import os
import stat
import subprocess

import abtest
from abtest import HOST_PATH, NOBODY_GID, NOBODY_UID, describe, root_only

SETID_SH = ("printf x > plain; chmod 4755 plain; echo chmod=$?; "
            "python3 -c 'import os; os.open(\"made\", os.O_CREAT | os.O_WRONLY, 0o6755)'; "
            "echo create=$?")


def _ablated(ctx, args):
    binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
    assert os.access(binary, os.X_OK), "build agentbox-ablate with make"
    cmd = [binary] + list(args)
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
               "--clear-groups"] + cmd
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home,
           "AGENTBOX_TEST_ABLATE": "setid"}
    r = subprocess.run(cmd, env=env, cwd=ctx.ws, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    r.cmdline = cmd
    return r


def _setid_files(ws):
    out = {}
    for n in ("plain", "made"):
        p = os.path.join(ws, n)
        if os.path.exists(p):
            st = os.lstat(p)
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                out[n] = (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777))
    return out


def _explain_setid(r):
    assert r.returncode == 0, describe(r)
    return json.loads(r.stdout)["setid_checked"]


def test_setid_rules_where_needed(ctx):
    """Root (root-owned workspace, idmapped): refused, and explain says why.
    Unprivileged: allowed on the caller's own files, never root's."""
    sc = _explain_setid(ctx.run(["explain", "--json", "-w", ctx.ws]))
    r = ctx.sandbox(SETID_SH)
    assert r.returncode == 0, describe(r)
    got = _setid_files(ctx.ws)
    if ctx.uid == 0:
        assert sc["enforced"] is True and "idmapped" in sc["why"], sc
        assert "chmod=1" in r.stdout and "create=1" in r.stdout, describe(r)
        assert got == {}, "set-id files from inside are on the host: %s" % got
    else:
        assert sc["enforced"] is False and "uid %d" % ctx.uid in sc["why"], sc
        assert "chmod=0" in r.stdout and "create=0" in r.stdout, describe(r)
        assert set(got) == {"plain", "made"}, got
        for n, (uid, gid, mode) in got.items():
            assert uid == ctx.uid and gid == ctx.gid, "%s: %s" % (n, got)
    text = ctx.run(["explain", "-w", ctx.ws])
    assert "set-id mode bits: " in text.stdout, describe(text)


@root_only
def test_setid_rules_ablated(ctx):
    """The twin of the root case: without the rules (test-only build), the
    sandbox leaves a set-uid file owned by host root in the workspace."""
    sc = _explain_setid(_ablated(ctx, ["explain", "--json", "-w", ctx.ws]))
    assert sc["enforced"] is False and "NOT CHECKED (test ablation)" in sc["why"], sc
    r = _ablated(ctx, ["run", "-w", ctx.ws, "--", "sh", "-c", SETID_SH])
    assert r.returncode == 0 and "TEST ABLATION setid" in r.stderr, describe(r)
    got = _setid_files(ctx.ws)
    assert got.get("plain", (None,))[0] == 0 and got.get("made", (None,))[0] == 0, \
        "no set-uid root file without the rules: %s\n%s" % (got, describe(r))


def _fs03(ctx, r):
    rows = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if "id" in o:
            rows[o["id"]] = o
    assert "FS-03" in rows, describe(r)
    att = {a["what"]: a for a in rows["FS-03"]["attempts"]}
    return rows["FS-03"], att


def _escape(ctx, binary=None):
    cmd = [binary or abtest.BINARY, "test-escape", "--only", "FS-03", "--format", "json"]
    if binary:
        return _ablated(ctx, cmd[1:])
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
               "--clear-groups"] + cmd
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home}
    return subprocess.run(cmd, env=env, cwd=ctx.ws, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=240)


SETID_ATTEMPTS = ("create a set-user-ID file", "fchmod 4755", "chmod 2755")


def test_escape_setid_probes(ctx):
    """test-escape FS-03: as root (the lab's root-owned workspace is
    idmapped) seccomp refuses every set-id attempt; unprivileged the bit
    sticks on the caller's own file, which the probe judges harmless."""
    r = _escape(ctx)
    fs03, att = _fs03(ctx, r)
    assert fs03["verdict"] == "ok" and r.returncode == 0, json.dumps(fs03)[:3000]
    for w in SETID_ATTEMPTS:
        a = att[w]
        if ctx.uid == 0:
            assert a["result"] == "EPERM" and a.get("layer") == "seccomp", a
        else:
            assert a["verdict"] == "ok" and "sandbox's own file" in a["result"], a


@root_only
def test_escape_setid_probes_ablated(ctx):
    """The twin: without the rules, FS-03's set-id attempts escape as root."""
    binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
    r = _escape(ctx, binary)
    fs03, att = _fs03(ctx, r)
    assert fs03["verdict"] == "escaped" and r.returncode == 1, json.dumps(fs03)[:3000]
    for w in SETID_ATTEMPTS:
        assert att[w]["verdict"] == "escaped" and "idmapped" in att[w]["result"], att[w]
