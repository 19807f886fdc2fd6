# SPDX-License-Identifier: MIT
"""Helpers for agentbox's integration tests (python3 stdlib only).

Every test function takes one argument, a Ctx, which owns a fresh fake HOME
full of canaries, a workspace, a scratch directory and the user the test runs
agentbox as ('root', or 'nobody' = uid/gid 65534 through setpriv).  run.py
runs each test once per user unless the test is decorated otherwise.

Canaries: ctx.token is written into every secret file of the fake HOME and
ctx.env_token into host environment variables that must not cross; every
output agentbox produces during a test is scanned for both at teardown.
"""

import errno
import fcntl
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import termios
import time

# ---- configuration, filled in by run.py ----
BINARY = None          # absolute path of build/agentbox
SRCDIR = None          # repository root
IS_ROOT = os.geteuid() == 0
NOBODY_UID = 65534
NOBODY_GID = 65534
ROOT_INSIDE_UID = 1000  # AB_ROOT_INSIDE_UID in include/agentbox/plan.h
DEFAULT_TIMEOUT = 30    # per agentbox invocation
INNER_PY = "/usr/bin/python3"  # Debian's python3: visible inside (system dirs only)

# Where test workspaces live (see Ctx).
WS_ROOT = os.environ.get("AB_IT_WSROOT", "/var/lib/agentbox-it")

HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Variables that must never cross into the sandbox (set on the host side).
LEAKY_VARS = ("AB_CANARY_ENV", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "ANTHROPIC_API_KEY",
              "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "GPG_AGENT_INFO",
              "XDG_RUNTIME_DIR", "AWS_SECRET_ACCESS_KEY")


def known_gap(reason):
    """Mark a test that demonstrates a documented, still-open limitation: the
    runner reports its failure as a skip with the reason, and fails the run
    when it starts passing (so the marker and the docs get updated)."""
    def mark(fn):
        fn.known_gap = reason
        return fn
    return mark


class Skip(Exception):
    """Raise (via skip()) when the kernel truly lacks a feature; give the reason."""


_SANITIZED = {}


def sanitized():
    """Is BINARY built with AddressSanitizer (`make asan`)?  Its runtime keeps
    freed memory in quarantine and its own copy of the environment block, so
    the few tests that measure agentbox's memory say so and skip that part."""
    if BINARY not in _SANITIZED:
        with open(BINARY, "rb") as f:
            _SANITIZED[BINARY] = b"__asan_init" in f.read()
    return _SANITIZED[BINARY]


def skip(reason):
    if not reason:
        raise ValueError("a skip needs a reason")
    raise Skip(reason)


# ---- which users a test runs as ----

def users(*names):
    def deco(fn):
        fn._ab_users = tuple(names)
        return fn
    return deco


def alone(reason):
    """Mark a test that must not run alongside others (run.py -j): it looks at
    state the whole machine shares (the listing of /tmp, the mount table).  The
    runner runs such tests last, one at a time, with nothing else running."""
    if not reason:
        raise ValueError("@alone needs a reason")

    def mark(fn):
        fn._ab_alone = reason
        return fn
    return mark


root_only = users("root")
nobody_only = users("nobody")


# ---- command lines ----

def ab_cmd(args, user="root"):
    """The argv that runs agentbox with `args` as `user`."""
    if BINARY is None:
        raise RuntimeError("abtest.BINARY not set (use run.py)")
    if user == "nobody" and IS_ROOT:
        return ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
                "--clear-groups", BINARY] + list(args)
    return [BINARY] + list(args)


def _merge_env(base, env):
    out = dict(base)
    for k, v in (env or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def run_ab(args, user="root", env=None, cwd=None, input=None, timeout=DEFAULT_TIMEOUT,
           pass_fds=(), stdin=None, home=None):
    """Run agentbox to completion; returns CompletedProcess with text stdout/stderr.

    `env` is merged over a minimal environment (PATH, HOME, LANG); a value of
    None removes a variable.  Without `input`, stdin is /dev/null (not a tty).
    """
    base = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": home or "/nonexistent-home"}
    full_env = _merge_env(base, env)
    if input is None and stdin is None:
        stdin = subprocess.DEVNULL
    cmd = ab_cmd(args, user)
    try:
        r = subprocess.run(cmd, env=full_env, cwd=cwd or "/", input=input, stdin=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           pass_fds=pass_fds, text=True, errors="replace")
    except subprocess.TimeoutExpired as e:
        raise AssertionError("timed out after %ss: %s\nstdout: %s\nstderr: %s" % (
            timeout, fmt_cmd(cmd), _s(e.stdout), _s(e.stderr)))
    r.cmdline = cmd
    return r


def _s(b):
    if b is None:
        return ""
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b


def fmt_cmd(cmd):
    import shlex
    return " ".join(shlex.quote(c if len(c) < 200 else c[:60] + "...<%d bytes>" % len(c))
                    for c in cmd)


def describe(r):
    """One block describing a finished run, for assertion messages."""
    return "command: %s\nexit: %s\nstdout: %s\nstderr: %s" % (
        fmt_cmd(getattr(r, "cmdline", r.args)), r.returncode, r.stdout[-3000:],
        r.stderr[-3000:])


# ---- host-side helpers ----

def host_procs_matching(needle):
    """pids (not ours) whose cmdline contains `needle` (bytes or str)."""
    if isinstance(needle, str):
        needle = needle.encode()
    out = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cl = f.read()
        except OSError:
            continue
        if needle in cl:
            out.append((int(d), cl.replace(b"\0", b" ").decode("utf-8", "replace")))
    return out


def wait_for(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            return v
        time.sleep(interval)


def mount_table():
    """Set of (mountpoint, fstype, source) of the host's mount namespace."""
    out = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a, _, b = line.partition(" - ")
            fields = a.split()
            rest = b.split()
            out.add((fields[4], rest[0] if rest else "", rest[1] if len(rest) > 1 else ""))
    return out


def tree_listing(root):
    """Sorted relative paths below root (not following symlinks)."""
    out = []
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            out.append(os.path.relpath(os.path.join(dp, n), root))
    return sorted(out)


def chown_tree(path, uid, gid):
    os.lchown(path, uid, gid)
    for dp, dns, fns in os.walk(path):
        for n in dns + fns:
            os.lchown(os.path.join(dp, n), uid, gid)


def write_file(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    os.chmod(path, mode)


def sh_quote(s):
    import shlex
    return shlex.quote(s)


# ---- the per-test context ----

class Ctx:
    def __init__(self, user, name):
        self.user = user
        self.name = name
        self.token = "ABCANARY" + secrets.token_hex(12)
        self.env_token = "ABENVCANARY" + secrets.token_hex(12)
        if user == "nobody" and IS_ROOT:
            self.uid, self.gid = NOBODY_UID, NOBODY_GID
        else:
            self.uid, self.gid = os.getuid(), os.getgid()
        # Expected uid of the command inside.
        self.inside_uid = ROOT_INSIDE_UID if self.uid == 0 else self.uid
        self._outputs = []
        self.procs = []
        self._closers = []
        # HOME under /tmp; workspaces under WS_ROOT, outside HOME and every
        # directory the default profile replaces with a private tmpfs (/tmp,
        # /var/tmp, /run, /dev/shm), so that "the parent of the workspace" is
        # a real host directory the sandbox must not be able to write.
        self.tbase = tempfile.mkdtemp(prefix="abit-", dir="/tmp")
        try:
            os.makedirs(WS_ROOT, mode=0o755, exist_ok=True)
            self.vbase = tempfile.mkdtemp(prefix="abit-", dir=WS_ROOT)
        except PermissionError:  # unprivileged runner: next best place
            home = os.path.expanduser("~")
            self.vbase = tempfile.mkdtemp(
                prefix="abit-", dir=home if os.access(home, os.W_OK) else "/var/tmp")
        os.chmod(self.tbase, 0o755)
        os.chmod(self.vbase, 0o755)
        self.home = os.path.join(self.tbase, "home")
        self.scratch = os.path.join(self.tbase, "scratch")   # host-only files
        self.projects = os.path.join(self.vbase, "projects")
        self.ws = os.path.join(self.projects, "ws")
        self.sibling = os.path.join(self.projects, "other")
        for d in (self.home, self.scratch, self.projects, self.ws, self.sibling):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.scratch, 0o755)
        self._plant_home()
        write_file(os.path.join(self.sibling, "secret.txt"), "sibling " + self.token + "\n", 0o600)
        # Everything the test user needs is owned by it, so that the host's
        # own permissions would allow every write the sandbox must refuse.
        if self.uid != 0:
            for d in (self.home, self.projects):
                chown_tree(d, self.uid, self.gid)
            os.chown(self.scratch, self.uid, self.gid)
        self.home_listing = tree_listing(self.home)

    def _plant_home(self):
        h, t = self.home, self.token
        os.chmod(h, 0o700)
        files = {
            ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n"
                               "-----END OPENSSH PRIVATE KEY-----\n" % t,
            ".ssh/id_rsa": "-----BEGIN RSA PRIVATE KEY-----\n%s\n" % t,
            ".ssh/config": "Host *\n  IdentityFile ~/.ssh/id_ed25519 # %s\n" % t,
            ".ssh/known_hosts": "example.com ssh-ed25519 %s\n" % t,
            ".aws/credentials": "[default]\naws_access_key_id = AKIA%s\n"
                                "aws_secret_access_key = %s\n" % (t[-8:], t),
            ".config/gh/hosts.yml": "github.com:\n  oauth_token: %s\n" % t,
            ".git-credentials": "https://user:%s@github.com\n" % t,
            ".netrc": "machine example.com login u password %s\n" % t,
            ".npmrc": "//registry.npmjs.org/:_authToken=%s\n" % t,
            ".kube/config": "token: %s\n" % t,
            ".docker/config.json": '{"auths":{"x":{"auth":"%s"}}}\n' % t,
            ".bash_history": "export SECRET=%s\n" % t,
            ".bashrc": "# host bashrc %s\n" % t,
            ".profile": "# host profile %s\n" % t,
            "src/other-repo/secret.txt": "repo %s\n" % t,
        }
        for rel, data in files.items():
            write_file(os.path.join(h, rel), data, 0o600)
        for d in (".ssh", ".aws"):
            os.chmod(os.path.join(h, d), 0o700)

    # -- environment --
    def env(self, extra=None):
        """Host environment for agentbox: minimal plus canaries that must not cross."""
        e = {
            "PATH": HOST_PATH,
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "xterm",
            "AB_CANARY_ENV": self.env_token,
            "SSH_AUTH_SOCK": os.path.join(self.tbase, "agent.sock"),
            "GITHUB_TOKEN": self.env_token,
            "ANTHROPIC_API_KEY": self.env_token,
            "AWS_SECRET_ACCESS_KEY": self.env_token,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=" + os.path.join(self.tbase, "bus"),
            "DISPLAY": ":0",
            "XDG_RUNTIME_DIR": os.path.join(self.tbase, "run"),
        }
        return _merge_env(e, extra)

    # -- running agentbox --
    def run(self, args, env=None, cwd=None, input=None, timeout=DEFAULT_TIMEOUT,
            pass_fds=(), stdin=None, record=True):
        r = run_ab(args, user=self.user, env=self.env(env), cwd=cwd or self.ws,
                   input=input, timeout=timeout, pass_fds=pass_fds, stdin=stdin,
                   home=self.home)
        if record:
            self._outputs.append(r)
        return r

    def sandbox(self, command, profile="default", ws=None, extra_args=(), **kw):
        """agentbox run -p PROFILE -w WS -- COMMAND..."""
        if isinstance(command, str):
            command = ["sh", "-c", command]
        args = ["run"]
        if profile:
            args += ["-p", profile]
        args += ["-w", ws or self.ws] + list(extra_args) + ["--"] + list(command)
        return self.run(args, **kw)

    def sh_ok(self, script, **kw):
        """Run `sh -c script` inside; assert exit 0; return stdout."""
        r = self.sandbox(script, **kw)
        assert r.returncode == 0, "expected exit 0\n" + describe(r)
        return r.stdout

    def py(self, code, **kw):
        """Run /usr/bin/python3 -c code inside; returns the CompletedProcess."""
        return self.sandbox([INNER_PY, "-c", code], **kw)

    def py_json(self, code, **kw):
        r = self.py(code, **kw)
        assert r.returncode == 0, "inner python failed\n" + describe(r)
        try:
            return json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError("inner python printed no JSON\n" + describe(r))

    def popen(self, args, env=None, cwd=None, **kw):
        cmd = ab_cmd(args, self.user)
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(cmd, env=self.env(env), cwd=cwd or self.ws, **kw)
        p.cmdline = cmd
        self.procs.append(p)
        return p

    def on_cleanup(self, fn):
        self._closers.append(fn)

    # -- host-side files owned by the test user --
    def host_file(self, path, data, mode=0o644):
        write_file(path, data, mode)
        if self.uid != 0:
            os.lchown(path, self.uid, self.gid)
        return path

    def git_host(self, *args, cwd=None):
        """Run git on the host (as root or as the test user)."""
        cmd = ["git", "-c", "safe.directory=*", "-c", "init.defaultBranch=main",
               "-c", "user.name=host", "-c", "user.email=host@example.com"] + list(args)
        if self.uid != os.getuid():
            cmd = ["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.gid,
                   "--clear-groups"] + cmd
        env = {"PATH": HOST_PATH, "HOME": self.scratch, "LANG": "C.UTF-8",
               "GIT_CONFIG_NOSYSTEM": "1"}
        r = subprocess.run(cmd, cwd=cwd or self.ws, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        assert r.returncode == 0, "host git failed: %s\n%s%s" % (fmt_cmd(cmd), r.stdout,
                                                                  r.stderr)
        return r.stdout

    # -- teardown --
    def _stray_procs(self):
        """Processes (not ours) still using this test's directories."""
        out = []
        me = os.getpid()
        keys = (self.tbase, self.vbase)
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cl = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
                cwd = os.readlink("/proc/%s/cwd" % d)
            except OSError:
                continue
            if any(k in cl or cwd.startswith(k) for k in keys):
                out.append((int(d), cl.strip(), cwd))
        return out

    def leak_check(self):
        for p in self.procs:
            if p.poll() is None:
                raise AssertionError("agentbox still running at the end of the test: %s"
                                     % fmt_cmd(p.cmdline))
        stray = wait_for(lambda: not self._stray_procs(), 3)
        if not stray:
            raise AssertionError("processes left behind after the test: %s"
                                 % self._stray_procs())
        for r in self._outputs:
            for tok, what in ((self.token, "file canary"), (self.env_token, "env canary")):
                if tok in (r.stdout or "") or tok in (r.stderr or ""):
                    raise AssertionError("%s leaked into agentbox output\n%s" % (what, describe(r)))

    def cleanup(self):
        for fn in reversed(self._closers):
            try:
                fn()
            except Exception:
                pass
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                    p.wait(5)
                except Exception:
                    pass
            for f in (p.stdin, p.stdout, p.stderr):
                if f:
                    try:
                        f.close()
                    except Exception:
                        pass
        for d in (self.tbase, self.vbase):
            _rmtree(d)


def _rmtree(d):
    def onerr(func, path, exc):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass
    shutil.rmtree(d, onerror=onerr)


# ---- status parsing ----

def parse_status(text):
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


# ---- probes run inside with /usr/bin/python3 ----

# Prints one JSON object {name: [ret, errno_name]} for the probes named in argv.
PROBES_PY = r'''
import ctypes, ctypes.util, errno, json, os, socket, sys, fcntl, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    args = [ctypes.c_long(x) if isinstance(x, int) else x for x in a]
    r = libc.syscall(ctypes.c_long(nr), *args)
    e = ctypes.get_errno() if r == -1 else 0
    return [r, errno.errorcode.get(e, str(e)) if e else "OK"]
def call(f, *a):
    r = f(*a)
    e = ctypes.get_errno() if r == -1 else 0
    return [r, errno.errorcode.get(e, str(e)) if e else "OK"]
def pyerr(fn):
    try:
        r = fn()
        return [r if isinstance(r, int) else 0, "OK"]
    except OSError as ex:
        return [-1, errno.errorcode.get(ex.errno, str(ex.errno))]
NR = dict(keyctl=250, add_key=248, request_key=249, io_uring_setup=425, ptrace=101,
          clone3=435, fsopen=430, open_tree=428, move_mount=429, fsmount=432, mount_setattr=442,
          bpf=321, perf_event_open=298, userfaultfd=323, setns=308, unshare=272,
          process_vm_readv=310, kexec_load=246, init_module=175, ioctl=16, mount=165,
          pivot_root=155, chroot=161, personality=135, syslog=103)
res = {}
P = {}
P["keyctl"] = lambda: sc(NR["keyctl"], 0, -3, 0)              # KEYCTL_GET_KEYRING_ID @s
P["keyctl_user"] = lambda: sc(NR["keyctl"], 0, -4, 1)         # @u, create
P["add_key"] = lambda: sc(NR["add_key"], ctypes.c_char_p(b"user"), ctypes.c_char_p(b"abit"),
                          ctypes.c_char_p(b"x"), 1, 0)  # keyring 0: EINVAL if unfiltered
P["request_key"] = lambda: sc(NR["request_key"], ctypes.c_char_p(b"user"),
                              ctypes.c_char_p(b"abit"), None, 0)
P["unshare_user"] = lambda: call(libc.unshare, 0x10000000)
P["unshare_mnt"] = lambda: call(libc.unshare, 0x00020000)
P["unshare_net"] = lambda: call(libc.unshare, 0x40000000)
P["setns"] = lambda: call(libc.setns, os.open("/proc/self/ns/net", os.O_RDONLY), 0)
params = ctypes.create_string_buffer(120)
P["io_uring_setup"] = lambda: sc(NR["io_uring_setup"], 4, params)
c = ctypes.c_char(b"x")
P["tiocsti"] = lambda: sc(NR["ioctl"], 0, 0x5412, ctypes.byref(c))
P["tiocsti_hi"] = lambda: sc(NR["ioctl"], 0, 0x5412 | (1 << 32), ctypes.byref(c))
P["tiocsti_badfd"] = lambda: sc(NR["ioctl"], -1, 0x5412, ctypes.byref(c))
P["tioclinux"] = lambda: sc(NR["ioctl"], 0, 0x541C, ctypes.byref(c))
def attach(pid):
    r = sc(NR["ptrace"], 16, pid, 0, 0)                    # PTRACE_ATTACH
    if r[0] == 0:                                           # escaped: let it go again
        try:
            os.waitpid(pid, 0x40000000)                     # __WALL
        except OSError:
            pass
        sc(NR["ptrace"], 17, pid, 0, 0)                     # PTRACE_DETACH
    return r
P["ptrace_init"] = lambda: attach(1)
P["ptrace_parent"] = lambda: attach(os.getppid())
P["mount"] = lambda: call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)
P["mount_bind"] = lambda: call(libc.mount, b"/", b"/tmp", None, 0x1000, None)  # MS_BIND
P["fsopen"] = lambda: sc(NR["fsopen"], ctypes.c_char_p(b"tmpfs"), 0)
P["open_tree"] = lambda: sc(NR["open_tree"], -100, ctypes.c_char_p(b"/"), 1)
P["clone3"] = lambda: sc(NR["clone3"], None, 0)
P["bpf"] = lambda: sc(NR["bpf"], 0, None, 0)
P["perf_event_open"] = lambda: sc(NR["perf_event_open"], None, 0, -1, -1, 0)
P["userfaultfd"] = lambda: sc(NR["userfaultfd"], 0)
P["kexec_load"] = lambda: sc(NR["kexec_load"], 0, 0, None, 0)
P["init_module"] = lambda: sc(NR["init_module"], None, 0, ctypes.c_char_p(b""))
P["pivot_root"] = lambda: sc(NR["pivot_root"], ctypes.c_char_p(b"/tmp"), ctypes.c_char_p(b"/tmp"))
P["chroot"] = lambda: sc(NR["chroot"], ctypes.c_char_p(b"/tmp"))
P["core_pattern"] = lambda: pyerr(lambda: os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
P["sysrq"] = lambda: pyerr(lambda: os.open("/proc/sysrq-trigger", os.O_WRONLY))
P["modprobe"] = lambda: pyerr(lambda: os.open("/proc/sys/kernel/modprobe", os.O_WRONLY))
P["getpid"] = lambda: [os.getpid(), "OK"]
P["getppid"] = lambda: [os.getppid(), "OK"]
for name in sys.argv[1:]:
    try:
        res[name] = P[name]()
    except Exception as ex:
        res[name] = [-1, "PYEXC:" + type(ex).__name__ + ":" + str(ex)]
print(json.dumps(res))
'''


def probes(ctx, *names, **kw):
    """Run the named probes inside the default sandbox; {name: (ret, errname)}."""
    r = ctx.sandbox([INNER_PY, "-c", PROBES_PY] + list(names), **kw)
    assert r.returncode == 0, "probe runner failed\n" + describe(r)
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("probe runner printed no JSON\n" + describe(r))
    return {k: tuple(v) for k, v in out.items()}


def host_probes(*names):
    """The same probes run unsandboxed on the host (positive control)."""
    r = subprocess.run([INNER_PY, "-c", PROBES_PY] + list(names), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return {k: tuple(v) for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


# ---- real-pty driver ----

def set_winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def get_winsize(fd):
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return rows, cols


class PtyRun:
    """agentbox with a real pty as its controlling terminal and stdin/stdout/stderr.

    The test keeps both ends: it reads and writes the master (the "user"), and
    keeps the slave to check the outer termios after agentbox exits.
    """

    def __init__(self, ctx, args, rows=33, cols=101, env=None, cwd=None, stdin=None,
                 stdout=None):
        self.ctx = ctx
        self.master, self.slave = os.openpty()
        set_winsize(self.slave, rows, cols)
        if ctx.uid != 0:
            os.fchown(self.slave, ctx.uid, -1)
        self.termios_before = termios.tcgetattr(self.slave)
        self.buf = b""
        slave = self.slave

        def child_setup():
            # start_new_session already did setsid(); take the pty as ctty.
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.cmd = ab_cmd(args, ctx.user)
        # stdin/stdout default to the pty; pass subprocess.DEVNULL/PIPE to mix.
        self.proc = subprocess.Popen(self.cmd, stdin=slave if stdin is None else stdin,
                                     stdout=slave if stdout is None else stdout,
                                     stderr=slave if stdout is None else subprocess.STDOUT,
                                     env=ctx.env(_merge_env({"TERM": "xterm"}, env)),
                                     cwd=cwd or ctx.ws, start_new_session=True,
                                     preexec_fn=child_setup, close_fds=True)
        ctx.procs.append(self.proc)
        ctx.on_cleanup(self.close)
        os.set_blocking(self.master, False)

    def _read_some(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno == errno.EIO:
                return False
            raise
        self.buf += data
        return bool(data)

    def expect(self, pattern, timeout=20):
        """Wait until `pattern` (bytes regex) appears in the output; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not self._read_some(min(left, 0.2)) and self.proc.poll() is not None:
                self._drain()
                m = rx.search(self.buf)
                if m:
                    return m
                break
        raise AssertionError("pattern %r not seen within %ss (agentbox %s)\noutput: %r" % (
            pattern, timeout, "exited %s" % self.proc.returncode
            if self.proc.poll() is not None else "still running", self.buf[-2000:]))

    def _drain(self):
        while self._read_some(0.05):
            pass

    def write(self, data):
        os.write(self.master, data)

    def resize(self, rows, cols, send_sigwinch=True):
        set_winsize(self.master, rows, cols)
        if send_sigwinch and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGWINCH)

    def wait(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError("agentbox did not exit within %ss\noutput: %r" % (
                    timeout, self.buf[-2000:]))
            self._read_some(0.1)
        self._drain()
        return self.proc.returncode

    def text(self):
        return self.buf.decode("utf-8", "replace")

    def close(self):
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self.master = self.slave = -1


# ---- loopback listeners ----

class Listener:
    """A host TCP (or unix) listener that counts connection attempts."""

    def __init__(self, family=socket.AF_INET, addr=("127.0.0.1", 0)):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family != socket.AF_UNIX:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(addr)
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.addr = self.sock.getsockname()
        self.port = self.addr[1] if family != socket.AF_UNIX else None
        self.hits = 0

    def count(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            self.hits += 1
            c.close()
        return self.hits

    def close(self):
        self.sock.close()

