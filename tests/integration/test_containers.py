# SPDX-License-Identifier: MIT
"""agentbox inside a container engine, reproduced without one.

What the engines do to agentbox is done here with the kernel alone, so it
runs in `make check` in a second:
- Docker and podman mount files over /proc (/proc/keys, /proc/timer_list,
  ...): in a private mount namespace with /dev/null bound over two of them,
  a fresh proc mount is refused exactly as in a container ("Mount too
  revealing").
- Their default seccomp profiles refuse some calls agentbox needs
  (sethostname in podman; sethostname, keyctl and pidfd_getfd in Docker):
  a seccomp filter installed before agentbox starts refuses the same calls.
$container names the engine, so the hint is the one that engine's users get.
The real engines are `make check-containers` (docs/containers.md).
"""

import json
import os
import subprocess

import abtest
from abtest import IS_ROOT, describe, skip
from upstream import read_log

# A seccomp filter that fails the named calls with EPERM, then exec argv.
# (x86_64 and aarch64; the filter and no_new_privs pass to agentbox.)
_FILTER_PY = r'''
import ctypes, os, struct, sys
arch = {"x86_64": (0xc000003e, {"sethostname": 170, "keyctl": 250, "pidfd_getfd": 438}),
        "aarch64": (0xc00000b7, {"sethostname": 161, "keyctl": 219, "pidfd_getfd": 438})}
audit, nrs = arch[os.uname().machine]
sep = sys.argv.index("--")
names, argv = sys.argv[1:sep], sys.argv[sep + 1:]
def st(code, k): return struct.pack("HBBI", code, 0, 0, k)
def jeq(k, jt, jf): return struct.pack("HBBI", 0x15, jt, jf, k)
prog = [st(0x20, 4), jeq(audit, 1, 0), st(0x06, 0x7fff0000), st(0x20, 0)]
for n in names:
    prog += [jeq(nrs[n], 0, 1), st(0x06, 0x00050000 | 1)]
prog.append(st(0x06, 0x7fff0000))
buf = ctypes.create_string_buffer(b"".join(prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
    sys.exit("seccomp: errno %d" % ctypes.get_errno())
os.execvp(argv[0], argv)
'''


def _run(ctx, prefix, args, env=None):
    """agentbox ARGS as ctx.user, started through PREFIX (an argv that ends
    by exec'ing the rest, before setpriv drops root)."""
    cmd = prefix + abtest.ab_cmd(args, ctx.user)
    r = subprocess.run(cmd, env=ctx.env(env), cwd=ctx.ws, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=abtest.DEFAULT_TIMEOUT)
    r.cmdline = cmd
    ctx._outputs.append(r)
    return r


def _masked_proc(ctx, args, env=None):
    if not IS_ROOT:
        skip("needs root to make a mount namespace with files bound over /proc")
    script = ("mount --bind /dev/null /proc/keys && "
              "mount --bind /dev/null /proc/timer_list && exec \"$@\"")
    return _run(ctx, ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"],
                args, env)


def _filtered(ctx, calls, args, env=None):
    if os.uname().machine not in ("x86_64", "aarch64"):
        skip("the test's seccomp filter knows x86_64 and aarch64 only")
    return _run(ctx, [abtest.INNER_PY, "-c", _FILTER_PY] + list(calls) + ["--"], args, env)


def _refused(r, *needles):
    assert r.returncode == 125, "expected 125\n" + describe(r)
    for n in needles:
        assert n in r.stderr, "%r missing\n%s" % (n, describe(r))


def test_container_proc_masked_names_cause(ctx):
    """podman's /proc: the error says why and which flag fixes it, and for
    container root without a user namespace it says never to unmask."""
    run = ["run", "-w", ctx.ws, "--", "true"]
    ok = _run(ctx, [], run)
    assert ok.returncode == 0, describe(ok)  # the same run without the overmounts
    r = _masked_proc(ctx, run, env={"container": "podman"})
    _refused(r, "mount /proc: Operation not permitted", "Mount too revealing",
             "/proc/keys, /proc/timer_list")
    if ctx.uid == 0:
        _refused(r, "Never unmask /proc for container root without a user namespace",
                 "core_pattern", "--userns=auto")
        assert "Hint: start the container with" not in r.stderr, describe(r)
    else:
        _refused(r, "Hint: start the container with --security-opt unmask=/proc/*")


def test_container_proc_masked_docker_flag(ctx):
    if ctx.uid == 0:
        skip("container root: the hint refuses to unmask (the podman test checks it)")
    r = _masked_proc(ctx, ["run", "-w", ctx.ws, "--", "true"], env={"container": "docker"})
    _refused(r, "Mount too revealing",
             "Hint: start the container with --security-opt systempaths=unconfined")


def test_container_proc_masked_doctor(ctx):
    r = _masked_proc(ctx, ["doctor"], env={"container": "podman"})
    assert r.returncode == 1, "doctor must say run cannot work\n" + describe(r)
    for n in ("proc mount", "Mount too revealing", "engine", "podman"):
        assert n in r.stdout, "%r missing\n%s" % (n, describe(r))


def test_container_sethostname_seccomp(ctx):
    """podman's default profile: sethostname only with CAP_SYS_ADMIN."""
    r = _filtered(ctx, ["sethostname"], ["run", "-w", ctx.ws, "--", "true"],
                  env={"container": "podman"})
    _refused(r, "sethostname: Operation not permitted",
             "podman's default seccomp profile allows sethostname only with CAP_SYS_ADMIN",
             "seccomp=", "podman-seccomp.json")
    d = _filtered(ctx, ["sethostname"], ["doctor"], env={"container": "podman"})
    assert d.returncode == 1 and "podman-seccomp.json" in d.stdout, describe(d)


def test_container_sethostname_test_escape(ctx):
    """test-escape names the refused step, not the broken pipe the parent
    met after the child had failed ("send the trust files: Connection reset
    by peer")."""
    r = _filtered(ctx, ["sethostname"], ["test-escape", "--format", "json"],
                  env={"container": "podman"})
    assert r.returncode == 3, describe(r)
    out = r.stdout + r.stderr
    assert "sethostname: Operation not permitted" in out, describe(r)
    assert "sethostname" in out and "Connection reset" not in out, describe(r)
    assert "Hint: " in out, describe(r)


def test_container_keyring_seccomp(ctx):
    """Docker's default profile refuses keyctl: the whole family is refused to
    agentbox and so to the sandbox, so the keyring join is skipped (explain
    and doctor say so), the run works, and keyctl stays refused inside."""
    code = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.syscall(250 if __import__('os').uname().machine == 'x86_64' else 219, "
            "0, -3, 0); print(r, ctypes.get_errno())")
    r = _filtered(ctx, ["keyctl"], ["run", "-w", ctx.ws, "--", abtest.INNER_PY, "-c", code],
                  env={"container": "docker"})
    assert r.returncode == 0, describe(r)
    assert r.stdout.split() == ["-1", "1"], "keyctl inside: %r\n%s" % (r.stdout, describe(r))
    e = _filtered(ctx, ["keyctl"], ["explain", "-w", ctx.ws], env={"container": "docker"})
    assert e.returncode == 0 and "keyring: not joined: keyctl is refused" in e.stdout, describe(e)
    plain = _run(ctx, [], ["explain", "-w", ctx.ws])
    assert "keyring: a fresh anonymous session keyring" in plain.stdout, describe(plain)
    d = _filtered(ctx, ["keyctl"], ["doctor"], env={"container": "docker"})
    assert "refuses keyctl" not in d.stdout, describe(d)


def test_container_pidfd_getfd_seccomp(ctx):
    """Docker's default profile: pidfd_getfd only with CAP_SYS_PTRACE; the
    warning names that, not Yama, when Yama is not what refused it."""
    if os.path.exists("/proc/sys/kernel/yama/ptrace_scope"):
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            if f.read().strip() == "3":
                skip("Yama ptrace_scope 3 here: the warning rightly names Yama")
    code = ("import socket\ns = socket.socket()\n"
            "try:\n  s.connect(('127.0.0.1', 9))\nexcept OSError as e:\n  print(e.errno)\n")
    r = _filtered(ctx, ["pidfd_getfd"],
                  ["run", "-w", ctx.ws, "--", abtest.INNER_PY, "-c", code],
                  env={"container": "docker"})
    assert "ptrace_scope" not in r.stderr, describe(r)
    assert "allows pidfd_getfd only with CAP_SYS_PTRACE" in r.stderr, describe(r)
    assert "docker-seccomp.json" in r.stderr, describe(r)


# ---- the shipped seccomp profiles (contrib/containers/gen-seccomp.py) ----

CTR_BASE = "/usr/share/containers/seccomp.json"


def _gen():
    import importlib.util
    path = os.path.join(abtest.SRCDIR, "contrib", "containers", "gen-seccomp.py")
    spec = importlib.util.spec_from_file_location("gen_seccomp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return path, mod


# A default in Docker's shape (written for this test): the calls agentbox
# needs are allowed only with CAP_SYS_ADMIN or CAP_SYS_PTRACE, clone only
# without namespace flags, clone3 fails with ENOSYS, keyctl not at all.
_DOCKER_SHAPED = {
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
    "syscalls": [
        {"names": ["read", "write", "exit_group", "prctl"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["clone", "mount", "umount2", "pivot_root", "setns", "unshare",
                   "sethostname", "open_tree", "move_mount", "mount_setattr", "bpf"],
         "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}],
         "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
         "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["pidfd_getfd", "ptrace"], "action": "SCMP_ACT_ALLOW",
         "includes": {"caps": ["CAP_SYS_PTRACE"]}},
    ],
}


@abtest.root_only
def test_container_seccomp_profiles_exact(ctx):
    """The shipped profiles are the engine's default plus exactly the calls
    agentbox's set-up needs: nothing else allowed, nothing of the default lost."""
    import json
    path, gen = _gen()
    docker = gen.ADDED["docker"]
    out = gen.generate(_DOCKER_SHAPED, docker)
    added = gen.allowed(out) - gen.allowed(_DOCKER_SHAPED)
    assert added == set(docker), sorted(added)
    assert "bpf" not in gen.allowed(out) and "ptrace" not in gen.allowed(out)
    assert not gen.check(_DOCKER_SHAPED, docker, out)
    # clone3 keeps failing with ENOSYS (glibc falls back to clone)
    assert any(r["names"] == ["clone3"] for r in out["syscalls"])
    # the check can fail: one call more, or one rule of the default gone
    worse = json.loads(json.dumps(out))
    worse["syscalls"][-1]["names"].append("ptrace")
    assert gen.check(_DOCKER_SHAPED, docker, worse)
    worse = json.loads(json.dumps(out))
    del worse["syscalls"][0]
    assert gen.check(_DOCKER_SHAPED, docker, worse)

    if not os.path.exists(CTR_BASE):
        skip("no %s (make deps installs golang-github-containers-common); the "
             "Docker-shaped base passed" % CTR_BASE)
    with open(CTR_BASE) as f:
        base = json.load(f)
    for engine in ("podman", "docker"):
        dst = os.path.join(ctx.scratch, engine + ".json")
        subprocess.run([abtest.INNER_PY, path, "--engine", engine, "-o", dst], check=True)
        with open(dst) as f:
            prof = json.load(f)
        # containers-common's default already allows all but sethostname
        assert gen.allowed(prof) - gen.allowed(base) == {"sethostname"}, engine
        r = subprocess.run([abtest.INNER_PY, path, "--engine", engine, "--check", dst],
                           stderr=subprocess.PIPE, text=True)
        assert r.returncode == 0, r.stderr
        shipped = os.path.join(os.path.dirname(abtest.BINARY), "containers",
                               engine + "-seccomp.json")
        if os.path.exists(shipped):  # what make install ships, if built
            with open(shipped) as f:
                assert json.load(f) == prof, shipped


@abtest.root_only
def test_container_root_test_escape_hint(ctx):
    """Root without CAP_SYS_ADMIN (container root): test-escape picks its lab
    from what the process can do, not from uid 0: a user namespace mapping
    every id, and the battery passes.  Without CAP_SETUID as well, the lab
    says why it cannot be built and what to do."""
    r = _run(ctx, ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"],
             ["test-escape", "--format", "json"])
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    red = sorted(o["id"] for o in rows if "id" in o and o["verdict"] not in ("ok", "skip"))
    assert r.returncode == 0 and not red, "%s\n%s" % (red, describe(r))
    r = _run(ctx, ["setpriv", "--bounding-set=-sys_admin,-setuid,-setgid",
                   "--inh-caps=-sys_admin,-setuid,-setgid"], ["test-escape", "--format", "json"])
    assert r.returncode == 3, describe(r)
    out = r.stdout + r.stderr
    assert "lab: map every id into the lab's user namespace" in out, describe(r)
    assert "non-root user" in out, describe(r)


# -- the "proc-outer" downgrade: only on purpose, and said everywhere --

_OUTER_PY = r'''
import json, os
out = {}
try:
    open("/proc/self/comm", "w").write("x")
    out["comm"] = "written"
except OSError as e:
    out["comm"] = e.errno
pid = int(os.environ["OUTSIDE"])
for what in ("environ", "cmdline"):
    try:
        out[what] = open("/proc/%d/%s" % (pid, what), "rb").read().decode("latin-1")
    except OSError as e:
        out[what] = e.errno
print(json.dumps(out))
'''


def _outer_profile(ctx):
    d = os.path.join(ctx.home, ".config", "agentbox", "profiles")
    os.makedirs(d, exist_ok=True)
    if ctx.uid != 0:
        for p in (os.path.join(ctx.home, ".config"), os.path.dirname(d), d):
            os.chown(p, ctx.uid, ctx.gid)
    return ctx.host_file(os.path.join(d, "outer-proc.json"), json.dumps(
        {"version": 1, "extends": "default", "allow_downgrade": ["proc-outer"],
         "env": {"pass": ["OUTSIDE"]}}) + "\n")


def test_container_proc_outer_downgrade(ctx):
    """A profile that allows "proc-outer" runs where a fresh /proc is refused:
    the outer /proc bound read-only, said by run (warning), explain and the
    audit log; an outside process of the same user shows its command line but
    not its environment (Landlock's ptrace scoping); where a fresh /proc
    works, the same profile gets one and no downgrade."""
    prof = _outer_profile(ctx)
    log = os.path.join(ctx.scratch, "outer.jsonl")
    # a process of the same user outside the sandbox, holding a secret
    drop = abtest.ab_cmd([], ctx.user)[:-1]     # setpriv ... for the test user, or []
    mark = "outer-proc-" + os.urandom(8).hex()   # not a canary: the test prints it
    outside = subprocess.Popen(drop + [abtest.INNER_PY, "-c", "import time; time.sleep(60)",
                                       mark],
                               env={"SECRET_X": mark, "PATH": "/usr/bin:/bin"},
                               stdin=subprocess.DEVNULL)
    try:
        env = {"OUTSIDE": str(outside.pid)}
        args = ["run", "-p", prof, "-w", ctx.ws, "--log", log, "--", abtest.INNER_PY, "-c",
                _OUTER_PY]
        r = _masked_proc(ctx, args, env=env)
        assert r.returncode == 0, describe(r)
        assert "warning: proc-outer: the sandbox's /proc is the outer one" in r.stderr, \
            describe(r)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["comm"] == 30, "the outer /proc is writable: %r" % got   # EROFS
        assert got["environ"] == 13, "an outside environment was read: %r" % got  # EACCES
        assert mark in got["cmdline"], "cmdline %r" % got
        start = [e for e in read_log(log)[0] if e.get("event") == "start"]
        assert start and any("proc-outer" in d for d in start[0].get("downgrades", [])), start
        e = _masked_proc(ctx, ["explain", "-p", prof, "-w", ctx.ws])
        assert "NOT FRESH: the outer /proc bound read-only (proc-outer)" in e.stdout, describe(e)
        assert "!! NOT ENFORCED: proc-outer" in e.stdout, describe(e)
        # where a fresh /proc works, the same profile gets it
        ok = _run(ctx, [], ["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c",
                            "ls /proc | grep -c '^[0-9]'"])
        assert ok.returncode == 0 and "proc-outer" not in ok.stderr, describe(ok)
        assert int(ok.stdout.strip()) < 5, "a fresh /proc lists the sandbox only\n" + describe(ok)
    finally:
        outside.kill()
        outside.wait()


def test_container_proc_outer_only_on_purpose(ctx):
    """Without the downgrade the masked /proc is still refused (125), and the
    hint names the downgrade only as the weaker choice."""
    r = _masked_proc(ctx, ["run", "-w", ctx.ws, "--", "true"], env={"container": "podman"})
    _refused(r, "mount /proc: Operation not permitted",
             'Weaker, on purpose only: "allow_downgrade": ["proc-outer"]')


def test_container_proc_outer_test_escape_fails(ctx):
    """test-escape with the downgraded profile does not pass: the probes that
    look at other processes see the lab's canary process."""
    _outer_profile(ctx)
    r = _masked_proc(ctx, ["test-escape", "-p", "outer-proc", "--format", "json"])
    assert r.returncode == 1, describe(r)
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    bad = {o["id"]: o["verdict"] for o in rows if "id" in o and o["verdict"] != "ok"}
    assert bad.get("SEC-06") == "escaped" and "PRC-04" in bad, "%s\n%s" % (bad, describe(r))


def test_container_workspace_of_another_user_names_the_owner(ctx):
    """A workspace the caller cannot write (podman --uidmap's container root
    on the non-root user's files): the placeholder error names both uids and
    says to run as the workspace's owner."""
    if ctx.uid == 0:
        skip("root writes any directory")
    ws = os.path.join(ctx.scratch, "others-ws")
    os.makedirs(ws)
    os.chown(ws, 0, 0)
    os.chmod(ws, 0o755)
    r = ctx.run(["run", "-w", ws, "--", "true"])
    _refused(r, "create placeholder", "Permission denied",
             "made as you (uid %d)" % ctx.uid, "which uid 0 owns",
             "run agentbox as the user who owns the workspace")
