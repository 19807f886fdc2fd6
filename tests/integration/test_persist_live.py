# SPDX-License-Identifier: MIT
"""While the run lasts: a `.git` the sandbox makes is not the host's.

Every call that gives something a name is carried out by the sandbox's
creator (include/agentbox/mediate.h); a new `.git` in a writable grant
becomes a link to /.agentbox-git/GRANT/TAG.N, a path only the sandbox's root
has, so the host's git, an IDE or a prompt find no repository there until
the run ends, when the content is put back and judged (gitnest.c).  Each
route is armed from inside; then, WHILE the command still runs, the host's
real git runs the way an IDE or a prompt would, and the marker its payload
would touch must stay absent.  The ablated twins (AGENTBOX_TEST_ABLATE=
gitlive) show the payload running during the run, so the tests can fail.
"""

import os
import signal
import stat
import subprocess
import time

import abtest
from abtest import HOST_PATH, NOBODY_GID, NOBODY_UID, describe, sh_quote as q, wait_for
from test_redteam import _host_git, _marker, _repo

READY, GO = ".ab-ready", ".ab-go"


def _cmd(ctx, script, ablate, ws):
    binary = abtest.BINARY
    env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home}
    if ablate:
        binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
        assert os.access(binary, os.X_OK), "build agentbox-ablate with make"
        env["AGENTBOX_TEST_ABLATE"] = "gitlive"
    cmd = [binary, "run", "-p", "default", "-w", ws, "--", "sh", "-c", script]
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
               "--clear-groups"] + cmd
    return cmd, env


def _live(ctx, arm, while_running, ablate=False, ws=None):
    """Run ARM inside, then hold the sandbox open while WHILE_RUNNING() runs
    on the host; the run's result after it ends."""
    ws = ws or ctx.ws
    script = "set -e; %s; touch %s; while [ ! -e %s ]; do sleep 0.05; done" % (arm, READY, GO)
    cmd, env = _cmd(ctx, script, ablate, ws)
    p = subprocess.Popen(cmd, env=env, cwd=ws, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ok = wait_for(lambda: os.path.exists(os.path.join(ws, READY)) or p.poll() is not None,
                      timeout=60)
        if p.poll() is not None or not ok:
            p.kill()
            out, err = p.communicate()
            raise AssertionError("the sandbox did not get ready:\n%s\n%s" % (out, err))
        while_running()
    finally:
        ctx.host_file(os.path.join(ws, GO), "")
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, "%s\n%s" % (out, err)
    return out, err


def _verdict(marker, what, ablate):
    if ablate:
        assert os.path.exists(marker), \
            "%s: the ablated twin did not run the payload: the test cannot fail" % what
    else:
        assert not os.path.exists(marker), \
            "%s: a payload planted inside ran on the host while the run lasted" % what


_GITLINK = ("mkdir sub && cd sub && git init -q . && "
            "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m s && "
            "git config core.fsmonitor %s && cd .. && "
            "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub")


def _gitlink(ctx, ablate):
    """The IDE's `git status` in the workspace (recursing through a gitlink)
    and in the nested repository itself, while the agent still runs."""
    _repo(ctx)
    marker, payload = _marker(ctx)

    def host():
        _host_git(ctx, "status", "--porcelain")
        _host_git(ctx, "status", "--porcelain", cwd=os.path.join(ctx.ws, "sub"))

    _, err = _live(ctx, _GITLINK % q(payload), host, ablate)
    _verdict(marker, "a nested repository via a gitlink", ablate)
    return err


def test_live_gitlink(ctx):
    err = _gitlink(ctx, False)
    # after the run: the repository is back in place, and disarmed
    sub = os.path.join(ctx.ws, "sub", ".git")
    assert os.path.isdir(sub) and not os.path.islink(sub), err
    assert os.path.isfile(os.path.join(sub, "config.agentbox-disarmed")), err
    assert "disarmed a nested git repository" in err, err
    assert not os.path.exists(os.path.join(ctx.ws, ".agentbox-git")), err


def test_live_gitlink_ablated(ctx):
    _gitlink(ctx, True)


def _gitfile(ctx, ablate):
    """A gitfile pointing at a git directory made under another name."""
    marker, payload = _marker(ctx)
    arm = ("git init -q --bare gd && git --git-dir=gd config core.bare false && "
           "git --git-dir=gd config core.fsmonitor %s && mkdir wt && "
           "printf 'gitdir: ../gd\\n' > wt/.git" % q(payload))
    _live(ctx, arm, lambda: _host_git(ctx, "status", cwd=os.path.join(ctx.ws, "wt")), ablate)
    _verdict(marker, "a gitfile", ablate)


def test_live_gitfile(ctx):
    _gitfile(ctx, False)


def test_live_gitfile_ablated(ctx):
    _gitfile(ctx, True)


def test_live_dotgit_other_ways_refused(ctx):
    """A symlink, a hard link or a node named .git is refused; a directory
    renamed onto .git gets EXDEV (mv copies it, and the copy is kept off the
    host like any new one)."""
    script = r"""
mkdir a b c d
ln -s ../a d/.git 2>/dev/null && echo SYMLINK-MADE
echo x > f; ln f a/.git 2>/dev/null && echo LINK-MADE
mkfifo b/.git 2>/dev/null && echo NODE-MADE
mkdir -p src/objects src/refs
python3 -c 'import os
try:
    os.rename("src", "c/.git"); print("RENAME-MADE")
except OSError as e:
    print("rename", e.errno)'
mv src c/.git && echo mv-ok
readlink c/.git
git init -q e && mv e/.git e/moved && mv e/moved e/.git && echo link-moves-ok
"""
    out = ctx.sh_ok(script)
    for bad in ("SYMLINK-MADE", "LINK-MADE", "NODE-MADE", "RENAME-MADE"):
        assert bad not in out, out
    assert "rename 18" in out, out  # EXDEV
    assert "mv-ok" in out and "link-moves-ok" in out, out
    assert "/.agentbox-git/" in out, out
    # after the run: c/.git is the repository, in place
    c = os.path.join(ctx.ws, "c", ".git")
    assert os.path.isdir(c) and not os.path.islink(c)
    for d in ("a", "b", "d"):
        assert not os.path.lexists(os.path.join(ctx.ws, d, ".git")), d


def test_live_clone_and_commit_work(ctx):
    """What agents do: clone, init, commit, status, log inside; after the run
    the repositories are ordinary ones on the host, and none is disarmed."""
    src = os.path.join(ctx.ws, "upstream")
    os.makedirs(src)
    if ctx.uid:
        os.chown(src, ctx.uid, ctx.gid)
    _repo(ctx, src)
    script = (
        "git clone -q %s deps/up && git -C deps/up log --oneline | wc -l && "
        "cd deps/up && echo change >> README && git -c user.name=a -c user.email=a@b "
        "commit -qam change && git log --oneline | wc -l && cd ../.. && "
        "mkdir newproj && cd newproj && git init -q && echo x > x && git add x && "
        "git -c user.name=a -c user.email=a@b commit -qm first && git status --porcelain && "
        "test -L .git && echo LINKED" % q(src))
    out = ctx.sh_ok(script.replace(q(src), "upstream"))
    assert out.split() == ["1", "2", "LINKED"], out
    for rel, n in (("deps/up", 2), ("newproj", 1)):
        d = os.path.join(ctx.ws, rel, ".git")
        assert os.path.isdir(d) and not os.path.islink(d), rel
        r = _host_git(ctx, "log", "--oneline", cwd=os.path.join(ctx.ws, rel))
        assert r.returncode == 0 and len(r.stdout.split("\n")) - 1 == n, describe(r)
        assert not os.path.exists(os.path.join(d, "config.agentbox-disarmed")), rel
    assert not os.path.exists(os.path.join(ctx.ws, ".agentbox-git"))


def test_live_store_hidden_from_host_status(ctx):
    """While the run lasts, the store does not show in the host's `git
    status` (it ignores itself)."""
    _repo(ctx)

    def host():
        r = _host_git(ctx, "status", "--porcelain", "--untracked-files=all")
        assert ".agentbox-git" not in r.stdout, r.stdout
        assert os.path.isdir(os.path.join(ctx.ws, ".agentbox-git"))

    _live(ctx, "git init -q inner", host)


def test_live_creation_semantics(ctx):
    """Everything else is made as asked: modes under the umask, O_EXCL,
    O_TRUNC, O_APPEND, O_CLOEXEC, a directory fd, /dev/stdout and
    /proc/self/fd (of a pipe made inside: the host's pipe that the test's
    stdout is cannot be opened again from inside, by the kernel either), a
    hard link of an O_TMPFILE file, renames, FIFOs (a writer that opens first
    waits for its reader, as with the kernel)."""
    script = r"""
umask 027
python3 - <<'EOF'
import fcntl, os, stat
os.mkdir("d", 0o777); print("dir", oct(stat.S_IMODE(os.stat("d").st_mode)))
fd = os.open("d/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666); os.write(fd, b"abc"); os.close(fd)
print("file", oct(stat.S_IMODE(os.stat("d/f").st_mode)))
try:
    os.open("d/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
except FileExistsError:
    print("excl ok")
fd = os.open("d/f", os.O_WRONLY | os.O_CREAT | os.O_APPEND); os.write(fd, b"def"); os.close(fd)
print("append", open("d/f").read())
fd = os.open("d/f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC); os.close(fd)
print("trunc", os.path.getsize("d/f"))
fd = os.open("d/g", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
print("cloexec", bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
fd2 = libc.open(b"d/h", os.O_WRONLY | os.O_CREAT, 0o644)  # no O_CLOEXEC (os.open adds it)
print("inherit", not (fcntl.fcntl(fd2, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
print("blocking", not (fcntl.fcntl(fd2, fcntl.F_GETFL) & os.O_NONBLOCK))
dfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
os.close(os.open("rel", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd)); print("dirfd", os.path.exists("d/rel"))
os.mkdir("sub", dir_fd=dfd); print("mkdirat", os.path.isdir("d/sub"))
t = os.open("d", os.O_WRONLY | os.O_TMPFILE, 0o600); os.write(t, b"tmp")
r = libc.linkat(-100, b"/proc/self/fd/%d" % t, -100, b"d/linked", 0x400)  # AT_SYMLINK_FOLLOW
print("tmpfile", r, open("d/linked").read())
os.symlink("f", "d/sl"); print("symlink", os.readlink("d/sl"))
os.link("d/f", "d/hl"); print("link", os.stat("d/hl").st_nlink)
os.rename("d/hl", "d/hl2"); print("rename", os.path.exists("d/hl2"))
os.mkfifo("d/fifo"); print("fifo", stat.S_ISFIFO(os.stat("d/fifo").st_mode))
os.mknod("d/node", 0o600 | stat.S_IFREG); print("mknod", os.path.isfile("d/node"))
EOF
(echo to-stdout > /dev/stdout) | cat
(echo to-fd > /proc/self/fd/1) | cat
mkfifo d/p; (sleep 0.3; cat d/p) & echo writer-first > d/p; wait
"""
    out = ctx.sh_ok(script)
    want = ["dir 0o750", "file 0o640", "excl ok", "append abcdef", "trunc 0", "cloexec True",
            "inherit True", "blocking True", "dirfd True", "mkdirat True", "tmpfile 0 tmp",
            "symlink f", "link 2", "rename True", "fifo True", "mknod True", "to-stdout",
            "to-fd", "writer-first"]
    assert out.strip().split("\n") == want, out


def test_live_killed_agentbox_puts_back(ctx):
    """agentbox SIGKILLed while the command runs: its watcher settles, and the
    repository the run made is put back in place."""
    script = "git init -q kept && touch %s && sleep 60" % READY
    cmd, env = _cmd(ctx, script, False, ctx.ws)
    p = subprocess.Popen(cmd, env=env, cwd=ctx.ws, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: os.path.exists(os.path.join(ctx.ws, READY)), timeout=60)
    assert os.path.islink(os.path.join(ctx.ws, "kept", ".git"))
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    d = os.path.join(ctx.ws, "kept", ".git")
    assert wait_for(lambda: os.path.isdir(d) and not os.path.islink(d), timeout=30), \
        os.listdir(os.path.join(ctx.ws, "kept"))
    assert _host_git(ctx, "status", cwd=os.path.join(ctx.ws, "kept")).returncode == 0


def _existing(ctx, ablate):
    """The user's own nested repository, there before the run: the sandbox
    appends core.fsmonitor to its config in place (no O_CREAT, no rename),
    then the host's git runs in it while the run lasts."""
    sub = os.path.join(ctx.ws, "vendor", "x")
    os.makedirs(sub)
    if ctx.uid:
        os.chown(os.path.join(ctx.ws, "vendor"), ctx.uid, ctx.gid)
        os.chown(sub, ctx.uid, ctx.gid)
    _repo(ctx, sub)
    marker, payload = _marker(ctx)
    arm = ("python3 -c 'import sys\n"
           "f = open(\"vendor/x/.git/config\", \"r+\"); f.seek(0, 2)\n"
           "f.write(\"[core]\\n\\tfsmonitor = \" + sys.argv[1] + \"\\n\"); f.close()' %s"
           % q(payload))
    _, err = _live(ctx, arm, lambda: _host_git(ctx, "status", cwd=sub), ablate)
    _verdict(marker, "the user's nested repository armed in place", ablate)
    return sub, err


def test_live_existing_repo_armed_in_place(ctx):
    sub, err = _existing(ctx, False)
    d = os.path.join(sub, ".git")
    assert os.path.isdir(d) and not os.path.islink(d), err
    assert os.path.isfile(os.path.join(d, "config.agentbox-disarmed")), err
    assert _host_git(ctx, "log", "--oneline", cwd=sub).returncode == 0


def test_live_existing_repo_armed_in_place_ablated(ctx):
    _existing(ctx, True)


def test_live_existing_repo_read_stays(ctx):
    """Reading the user's nested repository (git log) leaves it where it is,
    with its own hooks: nothing is moved, nothing disarmed."""
    sub = os.path.join(ctx.ws, "lib")
    os.makedirs(sub)
    if ctx.uid:
        os.chown(sub, ctx.uid, ctx.gid)
    _repo(ctx, sub)
    hook = os.path.join(sub, ".git", "hooks", "pre-commit")
    ctx.host_file(hook, "#!/bin/sh\nexit 0\n", 0o755)

    def host():
        d = os.path.join(sub, ".git")
        assert os.path.isdir(d) and not os.path.islink(d)

    _, err = _live(ctx, "git -C lib log --oneline >/dev/null && cat lib/.git/config >/dev/null",
                   host)
    assert "disarmed" not in err, err
    assert os.path.isfile(hook)



def _bare(ctx, ablate, existing):
    """A directory shaped like a git directory under another name (a bare
    repository, made inside, or EXISTING: the user's, there before the run),
    given core.worktree and core.fsmonitor: a prompt in it runs `git status`
    there while the run lasts."""
    wt = os.path.join(ctx.ws, "wt")
    if existing:
        ctx.git_host("init", "-q", "--bare", "x.git")
    marker, payload = _marker(ctx)
    arm = ("mkdir -p wt && %sgit --git-dir=x.git config core.bare false && "
           "git --git-dir=x.git config core.worktree %s && "
           "git --git-dir=x.git config core.fsmonitor %s"
           % ("" if existing else "git init -q --bare x.git && ", q(wt), q(payload)))
    bare = os.path.join(ctx.ws, "x.git")

    def host():
        # a prompt runs git there once the user is in it: a link that leads
        # nowhere cannot be entered
        if os.path.isdir(bare):
            _host_git(ctx, "status", cwd=bare)
        else:
            assert os.path.islink(bare), os.listdir(ctx.ws)

    _, err = _live(ctx, arm, host, ablate)
    _verdict(marker, "a bare repository (%s)" % ("the user's" if existing else "new"), ablate)
    return err


def test_live_bare_repo(ctx):
    err = _bare(ctx, False, False)
    d = os.path.join(ctx.ws, "x.git")
    assert os.path.isdir(d) and not os.path.islink(d), err
    assert "disarmed a bare git repository" in err, err


def test_live_bare_repo_ablated(ctx):
    _bare(ctx, True, False)


def test_live_existing_bare_repo(ctx):
    err = _bare(ctx, False, True)
    d = os.path.join(ctx.ws, "x.git")
    assert os.path.isdir(d) and not os.path.islink(d), err
    assert os.path.isfile(os.path.join(d, "config.agentbox-disarmed")), err


def test_live_existing_bare_repo_ablated(ctx):
    _bare(ctx, True, True)


def test_live_creator_never_acts_on_inits_proc(ctx):
    """The creator is a thread of init: /proc as it sees it is init's own.
    A creation through init's /proc entries (directly, or up from the
    caller's rewritten /proc/self) is refused, where the kernel would have
    refused the caller (init is not dumpable)."""
    script = r"""python3 - <<'EOF'
import os
for p in ("/proc/1/fd/x", "/proc/self/../1/fd/x", "/proc/1/cwd/made-through-init"):
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT)); print(p, "MADE")
    except OSError as e:
        print(p, e.errno)
EOF
"""
    out = ctx.sh_ok(script)
    assert "MADE" not in out, out
    assert not os.path.exists(os.path.join(ctx.ws, "made-through-init"))


def test_live_downgrade_by_choice(ctx):
    """A profile that gives the protection up for speed
    (allow_downgrade: nested-git-live) gets what the ablated twin gets, and
    says so: explain and run name it."""
    prof = os.path.join(ctx.scratch, "fast.json")
    ctx.host_file(prof, '{"version": 1, "extends": "default", '
                        '"allow_downgrade": ["nested-git-live"]}\n')
    r = ctx.run(["explain", "-p", prof])
    assert r.returncode == 0 and "creations and writes: NOT MEDIATED" in r.stdout, describe(r)
    r = ctx.sandbox("git init -q x && test -d x/.git && ! test -L x/.git && echo real",
                    profile=prof)
    assert r.returncode == 0 and r.stdout.strip() == "real", describe(r)
    assert "nested-git-live: creations and writes are NOT MEDIATED" in r.stderr, r.stderr


def test_live_many_writers_at_once(ctx):
    """Eight processes making, renaming and removing files at once, two
    threads each, with FIFOs whose writers open first: every call is carried
    out (none lost, none stuck) and the files are what they wrote."""
    script = r"""python3 - <<'EOF'
import os, threading
def work(p, t):
    d = "w%d_%d" % (p, t)
    os.mkdir(d)
    for i in range(150):
        with open("%s/f%d" % (d, i), "w") as f:
            f.write("%d %d %d\n" % (p, t, i))
        os.rename("%s/f%d" % (d, i), "%s/g%d" % (d, i))
    os.mkfifo(d + "/p")
    r = threading.Thread(target=lambda: open(d + "/p").read())
    w = threading.Thread(target=lambda: open(d + "/p", "w").write("x"))
    w.start(); r.start(); w.join(); r.join()
pids = []
for p in range(8):
    pid = os.fork()
    if pid == 0:
        ts = [threading.Thread(target=work, args=(p, t)) for t in range(2)]
        [t.start() for t in ts]; [t.join() for t in ts]
        os._exit(0)
    pids.append(pid)
bad = sum(os.waitpid(pid, 0)[1] != 0 for pid in pids)
n = sum(len(os.listdir(d)) for d in os.listdir(".") if d.startswith("w"))
print("bad", bad, "files", n)
EOF
"""
    out = ctx.sh_ok(script, timeout=120)
    assert out.split() == ["bad", "0", "files", str(8 * 2 * 151)], out
    for p in range(8):
        for t in range(2):
            with open(os.path.join(ctx.ws, "w%d_%d" % (p, t), "g149")) as f:
                assert f.read() == "%d %d 149\n" % (p, t)


def test_live_refusals_in_the_log_and_report(ctx):
    """A .git refused or kept off the host is an audit event; the report
    lists the refusals with the warnings (keeping one off is no finding)."""
    log = os.path.join(ctx.scratch, "audit.jsonl")
    r = ctx.sandbox("git init -q a && mkdir b && (ln -s x b/.git || true)",
                    extra_args=["--log", log])
    assert r.returncode == 0, describe(r)
    import json
    evs = [json.loads(l) for l in open(log) if '"nested-git"' in l]
    acts = sorted((e["action"], e["call"]) for e in evs)
    assert ("kept-off-host", "mkdir") in acts and ("refused", "symlinkat") in acts, acts
    t = ctx.run(["report", log])
    assert t.returncode == 0, describe(t)
    assert "nested-git: refused: b/.git (symlinkat)" in t.stdout, t.stdout
    assert "kept-off-host" not in t.stdout, t.stdout
