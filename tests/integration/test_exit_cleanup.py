# SPDX-License-Identifier: MIT
"""The placeholders at exit: their names are gone before agentbox returns
(the cleanup watcher holds their inodes and frees them after, off the
caller's wait), so runs back to back in one workspace and host tools right
after a run see none; a killed agentbox is still cleaned up by the watcher;
a second run while one runs is still refused (docs/protected-paths.md,
docs/performance.md)."""

import os
import random
import signal
import subprocess

import abtest
from abtest import describe, host_procs_matching, tree_listing, wait_for


def _marker():
    return "1000.%06d%03d" % (random.randrange(10 ** 6), os.getpid() % 1000)


def _repo(ctx):
    """The workspace as a fresh repository: placeholders in the workspace
    (directories) and inside .git (files)."""
    ctx.git_host("init", "-q")
    return tree_listing(ctx.ws)


def _host_sh(ctx, script, timeout=120, **env):
    """`sh -c script` on the host as the test's user, with $AB the argv
    prefix that runs agentbox as that user and $WS the workspace."""
    cmd = ["sh", "-c", script]
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
               "--clear-groups"] + cmd
    e = ctx.env({"AB": abtest.BINARY, "WS": ctx.ws})
    e.update(env)
    return subprocess.run(cmd, cwd=ctx.ws, env=e, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def _left(ctx, before):
    return sorted(set(tree_listing(ctx.ws)) - set(before))


# Twenty rounds of two runs back to back, from a shell (no gap but the
# shell's own): after each run, before anything else, the workspace must
# list exactly what it did before, and a host tool must be able to make a
# directory where the run had a placeholder.  The second run's status must
# be its command's, and neither may print anything.
_LOOP = r'''
set -u
find "$WS" -mindepth 1 | LC_ALL=C sort >"$OUT/before"
i=0
while [ $i -lt 20 ]; do
    i=$((i + 1))
    "$AB" run -w "$WS" -- true >"$OUT/o1" 2>"$OUT/e1" || { echo "round $i: first run failed"; cat "$OUT/e1"; exit 1; }
    find "$WS" -mindepth 1 | LC_ALL=C sort >"$OUT/after"
    cmp -s "$OUT/before" "$OUT/after" || { echo "round $i: left right after the first run:"; comm -13 "$OUT/before" "$OUT/after"; exit 1; }
    mkdir "$WS/.vscode" && rmdir "$WS/.vscode" || { echo "round $i: .vscode still there"; exit 1; }
    rc=0
    "$AB" run -w "$WS" -- sh -c 'ls -A >/dev/null; exit 7' >"$OUT/o2" 2>"$OUT/e2" || rc=$?
    [ $rc -eq 7 ] || { echo "round $i: second run exited $rc, not 7"; cat "$OUT/e2"; exit 1; }
    find "$WS" -mindepth 1 | LC_ALL=C sort >"$OUT/after"
    cmp -s "$OUT/before" "$OUT/after" || { echo "round $i: left right after the second run:"; comm -13 "$OUT/before" "$OUT/after"; exit 1; }
    [ ! -s "$OUT/o1" ] && [ ! -s "$OUT/e1" ] && [ ! -s "$OUT/o2" ] && [ ! -s "$OUT/e2" ] || { echo "round $i: agentbox printed something:"; cat "$OUT/o1" "$OUT/e1" "$OUT/o2" "$OUT/e2"; exit 1; }
done
echo ok
'''


def test_back_to_back_runs_leave_no_placeholder(ctx):
    before = _repo(ctx)
    out = os.path.join(ctx.tbase, "loop")
    os.makedirs(out)
    if ctx.uid != 0:
        os.chown(out, ctx.uid, ctx.gid)
    r = _host_sh(ctx, _LOOP, OUT=out)
    assert r.returncode == 0 and r.stdout.strip() == "ok", describe(r)
    # and once every watcher is gone (they free the inodes), still nothing
    assert wait_for(lambda: not host_procs_matching(ctx.ws), 10), host_procs_matching(ctx.ws)
    assert not _left(ctx, before), "left in the workspace: %s" % _left(ctx, before)


def test_host_git_init_right_after_a_run(ctx):
    """Without .git, `.git` itself is a placeholder during the run: `git
    init` on the host right after agentbox returned must find nothing there."""
    r = _host_sh(ctx, '"$AB" run -w "$WS" -- true && git -c init.defaultBranch=main '
                      'init -q "$WS" && test -f "$WS/.git/HEAD" && echo ok')
    assert r.returncode == 0 and r.stdout.strip() == "ok", describe(r)


def test_killed_agentbox_still_cleaned_then_next_run_works(ctx):
    before = _repo(ctx)
    m = _marker()
    p = ctx.popen(["run", "-w", ctx.ws, "--", "sh", "-c", "sleep %s" % m])
    assert wait_for(lambda: [x for x in host_procs_matching(m) if x[1].startswith("sleep ")],
                    20), "the sandboxed sleep never started"
    assert _left(ctx, before), "the run made no placeholder: nothing to test"
    os.kill(p.pid, signal.SIGKILL)  # agentbox alone: its watcher cleans up
    p.wait(10)
    assert wait_for(lambda: not _left(ctx, before), 10), \
        "placeholders left after agentbox was killed: %s" % _left(ctx, before)
    # the watcher releases the lock when it is done: the next run may start
    # (it may be refused while the watcher is still exiting)
    r = None
    for _ in range(100):
        r = ctx.sandbox(["true"])
        if r.returncode != 125 or "another agentbox is running" not in r.stderr:
            break
        wait_for(lambda: False, 0.1)
    assert r.returncode == 0 and r.stderr == "", describe(r)
    assert not _left(ctx, before), "left in the workspace: %s" % _left(ctx, before)


def test_second_run_refused_while_one_runs_then_allowed(ctx):
    before = _repo(ctx)
    m = _marker()
    p = ctx.popen(["run", "-w", ctx.ws, "--", "sh", "-c", "sleep %s" % m])
    try:
        assert wait_for(lambda: [x for x in host_procs_matching(m)
                                 if x[1].startswith("sleep ")], 20), "sleep never started"
        r = ctx.sandbox(["true"])
        assert r.returncode == 125 and r.stderr.startswith(
            "agentbox: another agentbox is running in the workspace %s\n" % ctx.ws), describe(r)
        assert _left(ctx, before), "the first run's placeholders went with the refused run"
    finally:
        p.send_signal(signal.SIGTERM)  # agentbox ends the sandbox and exits
        p.wait(20)
    # right after the first one returned (no waiting): the next run works
    r = ctx.sandbox(["true"])
    assert r.returncode == 0 and r.stderr == "", describe(r)
    assert not _left(ctx, before), "left in the workspace: %s" % _left(ctx, before)




def _remove_placeholder_during_run(ctx, ablate=None):
    """Start a sandbox that keeps trying to write .envrc (a placeholder
    directory), rmdir the placeholder on the host, and return (returncode,
    stdout, stderr, whether .envrc is now a file on the host)."""
    envrc = os.path.join(ctx.ws, ".envrc")
    saved = abtest.BINARY
    env = None
    if ablate:
        abtest.BINARY = os.path.join(os.path.dirname(saved), "agentbox-ablate")
        assert os.access(abtest.BINARY, os.X_OK), "build agentbox-ablate with make"
        env = {"AGENTBOX_TEST_ABLATE": ablate}
    try:
        p = ctx.popen(["run", "-w", ctx.ws, "--", "sh", "-c",
                       "touch ready; i=0; while [ $i -lt 100 ]; do i=$((i+1)); "
                       "echo evil > .envrc 2>/dev/null && echo WROTE && break; "
                       "sleep 0.05; done"], env=env)
    finally:
        abtest.BINARY = saved
    try:
        assert wait_for(lambda: os.path.exists(os.path.join(ctx.ws, "ready")), 20), \
            "the sandbox never started"
        assert os.path.isdir(envrc), "no .envrc placeholder: nothing to test"
        os.rmdir(envrc)  # as root, or as the owner of the workspace
    finally:
        out, err = (x.decode(errors="replace") for x in p.communicate(timeout=30))
    return p.returncode, out, err, os.path.isfile(envrc)


def test_placeholder_removed_on_the_host_during_the_run_stops_it(ctx):
    """The watcher must hold no placeholder while the sandbox runs: an O_PATH
    fd of a placeholder directory keeps its dentry, so a host `rmdir` of it
    (which detaches the sandbox's read-only cover) would not raise
    IN_DELETE_SELF until that fd closed, and the sandbox would go on with a
    writable path where the placeholder was.  agentbox must stop it (125)."""
    before = tree_listing(ctx.ws)
    envrc = os.path.join(ctx.ws, ".envrc")
    rc, out, err, wrote = _remove_placeholder_during_run(ctx)
    assert rc == 125, (rc, out, err)
    assert ("protected or hidden path %s was replaced or removed" % envrc) in err, err
    assert not wrote, "the sandbox wrote .envrc on the host: %r" % out
    os.unlink(os.path.join(ctx.ws, "ready"))
    assert wait_for(lambda: tree_listing(ctx.ws) == before, 10), _left(ctx, before)


def test_placeholder_removed_on_the_host_during_the_run_ablated(ctx):
    """The test above can fail: with the watcher handed each placeholder as
    it is made (the test-only ablation "phhold"), the host's rmdir does not
    stop the sandbox, and it writes .envrc on the host."""
    rc, out, err, wrote = _remove_placeholder_during_run(ctx, ablate="phhold")
    assert rc == 0 and "WROTE" in out and wrote, (rc, out, err)
    assert "TEST ABLATION phhold" in err, err
