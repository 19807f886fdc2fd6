# SPDX-License-Identifier: MIT
"""Lifecycle: killing agentbox kills the sandbox; signals are forwarded; nothing is left."""

import os
import random
import signal
import time

from abtest import alone, host_procs_matching, mount_table, tree_listing, wait_for


def _marker():
    # A sleep argument nothing else on the machine uses.
    return "1000.%06d%03d" % (random.randrange(10 ** 6), os.getpid() % 1000)


def _start(ctx, script, marker):
    p = ctx.popen(["run", "-w", ctx.ws, "--", "sh", "-c", script])
    # Wait until the sandboxed sleep exists (not just agentbox's own argv).
    ok = wait_for(lambda: [x for x in host_procs_matching(marker)
                           if x[1].startswith("sleep ")], 20)
    if not ok:
        p.kill()
        out, err = p.communicate(timeout=10)
        raise AssertionError("the sandboxed sleep never started (rc %s)\nstderr: %s" % (
            p.returncode, err.decode(errors="replace")))
    return p


def _assert_gone(marker, within):
    t0 = time.monotonic()
    left = wait_for(lambda: not host_procs_matching(marker), within)
    if not left:
        raise AssertionError("processes still alive %.1fs after agentbox ended: %s" % (
            within, host_procs_matching(marker)))
    return time.monotonic() - t0


def test_sigkill_leaves_nothing(ctx):
    m = _marker()
    mounts = mount_table()
    ws_before = tree_listing(ctx.ws)
    p = _start(ctx, "sleep %s" % m, m)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    _assert_gone(m, 2.0)
    new = mount_table() - mounts
    assert not new, "mounts left on the host: %s" % sorted(new)
    left = wait_for(lambda: tree_listing(ctx.ws) == ws_before, 2.0)
    assert left, "files left in the workspace after agentbox was killed: %s" % sorted(
        set(tree_listing(ctx.ws)) - set(ws_before))


def test_sigkill_process_group_leaves_nothing(ctx):
    """SIGKILL to agentbox's whole process group (a closing terminal, tmux
    kill-session, systemd KillMode=control-group, the OOM killer taking all)."""
    m = _marker()
    ws_before = tree_listing(ctx.ws)
    p = ctx.popen(["run", "-w", ctx.ws, "--", "sh", "-c", "sleep %s" % m],
                  start_new_session=True)
    assert wait_for(lambda: [x for x in host_procs_matching(m) if x[1].startswith("sleep ")],
                    20), "the sandboxed sleep never started"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)
    _assert_gone(m, 2.0)
    left = wait_for(lambda: tree_listing(ctx.ws) == ws_before, 2.0)
    assert left, "files left in the workspace after SIGKILL to the process group: %s" % sorted(
        set(tree_listing(ctx.ws)) - set(ws_before))


def test_sigterm_leaves_no_files(ctx):
    ws_before = tree_listing(ctx.ws)
    m = _marker()
    p = _start(ctx, "sleep %s" % m, m)
    os.kill(p.pid, signal.SIGTERM)
    p.wait(15)
    assert tree_listing(ctx.ws) == ws_before, "files left in the workspace: %s" % sorted(
        set(tree_listing(ctx.ws)) - set(ws_before))


def test_sigkill_kills_daemonized_children(ctx):
    m = _marker()
    # setsid + double fork: the classic way to escape a process tree
    p = _start(ctx, "(setsid sh -c 'sleep %s & sleep %s' &) ; sleep %s" % (m, m, m), m)
    wait_for(lambda: len([x for x in host_procs_matching(m) if x[1].startswith("sleep ")]) >= 3,
             10)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    _assert_gone(m, 2.0)


def test_sigterm_forwarded(ctx):
    m = _marker()
    p = _start(ctx, "sleep %s" % m, m)
    os.kill(p.pid, signal.SIGTERM)
    rc = p.wait(15)
    assert rc == 143, "agentbox exited %s after SIGTERM (expected 143)\nstderr: %s" % (
        rc, p.stderr.read().decode(errors="replace"))
    _assert_gone(m, 2.0)


def test_sigterm_handled_by_command(ctx):
    m = _marker()
    p = _start(ctx, "trap 'echo got-term; exit 3' TERM; echo ready; sleep %s & wait" % m, m)
    os.kill(p.pid, signal.SIGTERM)
    rc = p.wait(15)
    out = p.stdout.read().decode(errors="replace")
    assert rc == 3 and "got-term" in out, "rc %s, stdout %r: SIGTERM not forwarded to the " \
        "command" % (rc, out)
    _assert_gone(m, 2.0)


def test_sigint_forwarded(ctx):
    m = _marker()
    p = _start(ctx, "sleep %s" % m, m)
    os.kill(p.pid, signal.SIGINT)
    rc = p.wait(15)
    assert rc == 130, "agentbox exited %s after SIGINT (expected 130)" % rc
    _assert_gone(m, 2.0)


def test_background_children_reaped_at_exit(ctx):
    # The command exits while a child it started keeps running: the sandbox
    # ends with the command, and nothing survives on the host.
    m = _marker()
    r = ctx.sandbox("sleep %s & echo started" % m, timeout=30)
    assert r.returncode == 0 and "started" in r.stdout, r
    _assert_gone(m, 2.0)


def _owned_by(uid, skip):
    owned = set()
    for d in ("/tmp", "/dev/shm", "/run", "/var/tmp"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for x in names:
            pth = os.path.join(d, x)
            try:
                if os.lstat(pth).st_uid == uid and pth not in skip:
                    owned.add(pth)
            except OSError:
                pass
    return owned


@alone("compares the listings of /tmp, /dev/shm, /run and /var/tmp and the mount table "
       "before and after, which other tests' runs change")
def test_no_leftover_mounts_or_files(ctx):
    mounts = mount_table()
    tmp_before = set(os.listdir("/tmp")) | {"/dev/shm/" + x for x in os.listdir("/dev/shm")}
    owned_before = _owned_by(ctx.uid, (ctx.tbase, ctx.vbase)) if ctx.uid else set()
    for _ in range(3):
        r = ctx.sandbox("echo x > /tmp/f; echo y > /dev/shm/g; true")
        assert r.returncode == 0, r
    assert not (mount_table() - mounts), "mounts left on the host: %s" % sorted(
        mount_table() - mounts)
    tmp_after = set(os.listdir("/tmp")) | {"/dev/shm/" + x for x in os.listdir("/dev/shm")}
    # the user's control directory stays (made once, like tmux's), emptied
    ctl = "agentbox-%d" % ctx.uid
    new = {x for x in tmp_after - tmp_before if ("agentbox" in x and x != ctl) or
           x in ("f", "/dev/shm/g")}
    assert not new, "agentbox left files behind: %s" % sorted(new)
    st = os.stat(ctx.ws)
    for d in ("/run/user/%d/agentbox" % ctx.uid, "/tmp/" + ctl):
        sock = os.path.join(d, "ctl-%x-%x" % (st.st_dev, st.st_ino))
        assert not os.path.lexists(sock), "the control socket outlived its run: " + sock
    if ctx.uid:
        owned = _owned_by(ctx.uid, (ctx.tbase, ctx.vbase)) - owned_before
        assert not owned, "files owned by uid %d left behind: %s" % (ctx.uid, sorted(owned))


def _doc_snippet(doc, after):
    """The first ```sh block after the line containing AFTER in docs/DOC."""
    import abtest
    with open(os.path.join(abtest.SRCDIR, "docs", doc)) as f:
        text = f.read()
    rest = text[text.index(after):]
    start = rest.index("```sh")
    start = rest.index("\n", start) + 1  # past the info string (test_docs.py's marks)
    return rest[start:rest.index("```", start)]


def test_leftover_placeholders_removed_by_the_documented_snippet(ctx):
    """When both agentbox and its cleanup watcher are killed by PID, the
    placeholders stay; the snippet docs/protected-paths.md gives removes
    them, in a repository with no .claude (where the placeholder is .claude
    itself) as in any other."""
    import subprocess
    import abtest
    from abtest import HOST_PATH
    ctx.git_host("init", "-q", ".")
    before = tree_listing(ctx.ws)
    m = _marker()
    p = _start(ctx, "sleep %s" % m, m)
    exe = os.path.realpath(abtest.BINARY)
    ours = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and os.path.realpath("/proc/%s/exe" % d) == exe and \
                    ctx.ws.encode() in open("/proc/%s/cmdline" % d, "rb").read():
                ours.append(int(d))
        except OSError:
            pass
    assert len(ours) >= 2, "agentbox and its watcher: %s" % ours
    for pid in ours:
        os.kill(pid, signal.SIGKILL)
    p.wait(10)
    _assert_gone(m, 10)
    assert os.path.isdir(os.path.join(ctx.ws, ".claude")), "no placeholder left to clean up"
    snippet = _doc_snippet("protected-paths.md", "You can remove them by hand")
    cmd = ["sh", "-c", snippet]
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid, "--clear-groups"] + cmd
    subprocess.run(cmd, cwd=ctx.ws, env={"PATH": HOST_PATH}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30)
    after = tree_listing(ctx.ws)
    assert after == before, "left after the snippet: %s" % sorted(set(after) - set(before))


def test_second_run_refused_as_documented(ctx):
    """A second run in the same workspace gets exactly the message and hint
    docs/protected-paths.md shows (the workspace path aside)."""
    m = _marker()
    p = _start(ctx, "sleep %s" % m, m)
    try:
        r = ctx.run(["run", "-w", ctx.ws, "--", "true"])
    finally:
        p.kill()
        p.wait(10)
    assert r.returncode == 125, r
    import abtest
    with open(os.path.join(abtest.SRCDIR, "docs", "protected-paths.md")) as f:
        doc = f.read()
    start = doc.index("agentbox: another agentbox is running")
    shown = doc[start:doc.index("```", start)].replace("/home/you/project", ctx.ws)
    assert r.stderr == shown, "agentbox printed:\n%s\nthe doc shows:\n%s" % (r.stderr, shown)
