# SPDX-License-Identifier: MIT
"""Egress, the parts around the proxy: `agentbox allow` on a running
sandbox, chaining through a corporate proxy (network.upstream_proxy), and
what `explain` says about the network."""

import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import threading
import time

import abtest
from abtest import INNER_PY, IS_ROOT, NOBODY_UID, alone, describe, run_ab, skip, users, wait_for
from upstream import Egress, write_profile

# Inside: GET http://http.test/<tag> through the proxy until it answers 200
# or CFG["tries"] run out; writes a marker file after the first refusal so
# the host knows when to call `agentbox allow`.
RETRY_PY = r'''
import json, os, sys, time, urllib.request, urllib.error
cfg = json.loads(sys.argv[1])
first = None
for i in range(cfg["tries"]):
    try:
        with urllib.request.urlopen("http://http.test/allow-live", timeout=5) as r:
            print(json.dumps({"first": first, "final": r.status, "tries": i + 1}))
            sys.exit(0)
    except urllib.error.HTTPError as e:
        body = e.read().decode("utf-8", "replace")
        if first is None:
            first = [e.code, body]
            open(cfg["marker"], "w").write("refused\n")
    time.sleep(0.1)
print(json.dumps({"first": first, "final": None}))
'''


def test_allow_running_sandbox(ctx):
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    marker = os.path.join(ctx.ws, "refused.marker")
    cfg = json.dumps({"tries": 150, "marker": marker})
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", RETRY_PY, cfg])
    assert wait_for(lambda: os.path.exists(marker), 20), "the sandbox never got its 403"
    r = ctx.run(["allow", "-w", ctx.ws, "http.test"])
    assert r.returncode == 0, describe(r)
    assert "allowed http.test" in r.stdout, describe(r)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, "agentbox: %s\n%s" % (p.returncode, err)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["first"][0] == 403 and "network.allow" in res["first"][1], res
    assert res["final"] == 200, res
    assert eg.http.count("/allow-live") >= 1


def test_allow_needs_a_running_sandbox_and_valid_rules(ctx):
    r = ctx.run(["allow", "-w", ctx.ws, "example.com"])
    assert r.returncode == 125, describe(r)
    assert "no agentbox is running in the workspace" in r.stderr, describe(r)
    r = ctx.run(["allow"])
    assert r.returncode == 125 and "at least one" in r.stderr, describe(r)
    # a rule that cannot be one is said as such, whether a sandbox runs or not
    bad = ("agentbox: allow: network rule 'bad host': not a valid host name")
    r = ctx.run(["allow", "-w", ctx.ws, "bad host"])
    assert r.returncode == 125 and r.stderr.startswith(bad), describe(r)
    assert len(r.stderr.splitlines()) == 1, describe(r)
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "5"])
    try:
        def answered():
            x = ctx.run(["allow", "-w", ctx.ws, "ok.upstream.test"], record=False)
            return x if x.returncode == 0 else None
        assert wait_for(answered, 10), "the sandbox never answered"
        r = ctx.run(["allow", "-w", ctx.ws, "other.upstream.test", "bad host"])
        assert r.returncode == 125 and r.stderr.startswith(bad), describe(r)
        assert len(r.stderr.splitlines()) == 1, describe(r)
    finally:
        p.terminate()
        p.wait()


# ---- the control socket (control.h): a socket in a directory only its user
# can enter, /run/user/UID/agentbox (when /run/user/UID is the user's) or
# /tmp/agentbox-UID, named after the workspace's device and inode.

def _ctl_dirs(uid):
    out = []
    run = "/run/user/%d" % uid
    try:
        st = os.lstat(run)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022:
            out.append(run + "/agentbox")
    except OSError:
        pass
    return out + ["/tmp/agentbox-%d" % uid]


def _ctl_path(uid, ws):
    st = os.stat(ws)
    return os.path.join(_ctl_dirs(uid)[0], "ctl-%x-%x" % (st.st_dev, st.st_ino))


def _old_ctl_name(uid, ws):
    """The abstract name agentbox used before: anyone could bind it first."""
    h = 1469598103934665603
    for b in ws.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "agentbox-ctl-%u-%016x" % (uid, h)


def _other_uid(ctx):
    """Another local user than the test's (None: not root, cannot be one)."""
    if not IS_ROOT:
        return None
    return NOBODY_UID if ctx.uid == 0 else NOBODY_UID - 1


def _as(uid, argv):
    if uid == os.getuid():
        return list(argv)
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + list(argv)


def _live(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


# Binds every address ("@name": abstract), accepts and closes without a word.
LISTEN_PY = r"""
import os, selectors, socket, sys
sel = selectors.DefaultSelector()
for a in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if a.startswith("@"):
        s.bind("\0" + a[1:])
    else:
        os.makedirs(os.path.dirname(a), mode=0o700, exist_ok=True)
        if os.path.exists(a):
            os.unlink(a)  # a dead run's (the inode of a removed workspace, reused)
        s.bind(a)
    s.listen(16)
    sel.register(s, selectors.EVENT_READ)
print("ready", flush=True)
while True:
    for k, _ in sel.select():
        c, _ = k.fileobj.accept()
        c.close()
"""


def _listener(ctx, uid, addrs):
    p = subprocess.Popen(_as(uid, [INNER_PY, "-c", LISTEN_PY] + list(addrs)), cwd="/",
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)

    def stop():
        if p.poll() is None:
            p.terminate()
        p.wait(20)
        p.stdout.close()
        p.stderr.close()
    ctx.on_cleanup(stop)
    line = p.stdout.readline()
    assert line.strip() == "ready", "listener: %r %r" % (line, p.stderr.read())
    return stop


def _allow_answered(ctx, ws, rule, timeout=10):
    """`allow` once the sandbox's endpoint is up (125 until then)."""
    def answered():
        x = ctx.run(["allow", "-w", ws, rule], record=False)
        return x if x.returncode != 125 else None
    return wait_for(answered, timeout) or ctx.run(["allow", "-w", ws, rule])


# Inside: connect to each address, and list each directory.
INSIDE_CTL_PY = r"""
import json, os, socket, sys
out = {"connect": {}, "list": {}}
for a in sys.argv[1:]:
    if a.startswith("dir:"):
        try:
            out["list"][a[4:]] = sorted(os.listdir(a[4:]))
        except OSError as e:
            out["list"][a[4:]] = "errno %d" % e.errno
        continue
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + a[1:] if a.startswith("@") else a)
        s.sendall(b"allow evil.test\n")
        s.shutdown(socket.SHUT_WR)
        out["connect"][a] = "connected: %r" % s.recv(100)
    except OSError as e:
        out["connect"][a] = "errno %d" % e.errno
    finally:
        s.close()
print(json.dumps(out))
"""


def test_control_socket_unreachable_from_inside(ctx):
    """A running sandbox's socket, and the sandbox's own, are out of reach
    from inside another sandbox, even one granted the control directories
    (masked), and `agentbox allow` inside fails; the socket goes at exit."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "30"])
    path = _ctl_path(ctx.uid, ctx.ws)
    try:
        assert wait_for(lambda: _live(path), 10), "no control socket at %s" % path
        inner_ab = os.path.join(ctx.sibling, "agentbox")
        shutil.copy(abtest.BINARY, inner_ab)
        os.chmod(inner_ab, 0o755)
        os.lchown(inner_ab, ctx.uid, ctx.gid)
        grants = []
        for d in _ctl_dirs(ctx.uid):
            grants += ["--read", d]
        own = _ctl_path(ctx.uid, ctx.sibling)
        args = [path, own, "@" + _old_ctl_name(ctx.uid, ctx.ws)] + \
            ["dir:" + d for d in _ctl_dirs(ctx.uid)]
        r = ctx.sandbox(["sh", "-c", '"$@"; ./agentbox allow -w . evil.test; echo "allow=$?"',
                         "sh", INNER_PY, "-c", INSIDE_CTL_PY] + args,
                        profile=prof, ws=ctx.sibling, extra_args=grants, cwd=ctx.sibling)
        assert r.returncode == 0, describe(r)
        lines = r.stdout.strip().splitlines()
        res = json.loads(lines[-2])
        for a, v in res["connect"].items():
            assert not v.startswith("connected"), (a, res)
        for d, v in res["list"].items():
            assert not (isinstance(v, list) and any(n.startswith("ctl-") for n in v)), (d, res)
        # (absent, or the masked directory: no way in either way)
        assert lines[-1] == "allow=125" and "allowed" not in r.stdout, describe(r)
        assert r.stderr.startswith("agentbox: "), describe(r)
        # and the endpoint still works from the host
        r = ctx.run(["allow", "-w", ctx.ws, "http.test"])
        assert r.returncode == 0 and "allowed http.test" in r.stdout, describe(r)
    finally:
        p.terminate()
        p.wait()
    assert not os.path.lexists(path), "the socket outlived its run"


def test_control_socket_other_uid_refused(ctx):
    """Root's sandbox: an unprivileged process on the host cannot even reach
    the socket (the directory is root's, 0700)."""
    if ctx.uid != 0:
        return
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "30"])
    path = _ctl_path(0, ctx.ws)
    code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
            "try:\n s.connect(sys.argv[1]); print('connected')\n"
            "except OSError as e: print(e.errno)")
    try:
        assert wait_for(lambda: _live(path), 10)
        r = subprocess.run(_as(NOBODY_UID, [INNER_PY, "-c", code, path]),
                           capture_output=True, text=True, timeout=20)
        assert r.stdout.strip() == str(errno.EACCES), (r.stdout, r.stderr)
    finally:
        p.terminate()
        p.wait(20)


@users("nobody")
def test_allow_reaches_only_the_users_own_sandbox(ctx):
    """nobody's sandbox: root's `allow` does not reach it and says how to
    (as that user); root's connection to the socket itself is not answered;
    nobody's own `allow` works."""
    if not IS_ROOT:
        skip("needs root for the other user")
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "30"])
    try:
        r = _allow_answered(ctx, ctx.ws, "http.test")
        assert r.returncode == 0 and "allowed http.test" in r.stdout, describe(r)
        r = run_ab(["allow", "-w", ctx.ws, "evil.test"], user="root", home=ctx.home)
        assert r.returncode == 125, describe(r)
        assert "no agentbox is running in the workspace %s" % ctx.ws in r.stderr, describe(r)
        assert "run it as that user" in r.stderr, describe(r)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(_ctl_path(ctx.uid, ctx.ws))
            s.sendall(b"allow evil.test\n")
            s.shutdown(socket.SHUT_WR)
            got = s.recv(100)
        except (ConnectionResetError, BrokenPipeError):
            got = b""
        finally:
            s.close()
        assert got == b"", "root was answered by nobody's sandbox: %r" % got
    finally:
        p.terminate()
        p.wait(20)


def test_control_abstract_name_squatted(ctx):
    """Another user binds the abstract name agentbox used to listen on:
    the sandbox still gets its endpoint, and `allow` works."""
    other = _other_uid(ctx)
    if other is None:
        skip("needs root for another user")
    _listener(ctx, other, ["@" + _old_ctl_name(ctx.uid, ctx.ws)])
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "30"])
    try:
        r = _allow_answered(ctx, ctx.ws, "http.test")
        assert r.returncode == 0 and "allowed http.test" in r.stdout, describe(r)
    finally:
        p.terminate()
        _, err = p.communicate(timeout=20)
    assert b"control socket" not in err, err


def _set_aside(ctx, path):
    """Move PATH away for the test (it may be a live directory of the same
    user); put it back at the end."""
    saved = path + ".saved-" + ctx.token[-8:]
    moved = os.path.lexists(path)
    if moved:
        os.rename(path, saved)

    def restore():
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
        if moved:
            os.rename(saved, path)
    ctx.on_cleanup(restore)


@alone("replaces the user's control directory (/tmp/agentbox-UID, /run/user/UID/agentbox), "
       "which every other run of that user shares")
def test_control_dir_squatted(ctx):
    """Another user made the control directory first (a directory of theirs,
    a symbolic link of theirs), or it is open to others: `run` says it has
    no control socket (stderr and the log) and runs; `allow` says why and
    exits 125."""
    other = _other_uid(ctx)
    if other is None:
        skip("needs root for another user")
    dirs = _ctl_dirs(ctx.uid)
    for d in dirs:
        _set_aside(ctx, d)
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    theirs = os.path.join(ctx.scratch, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, other, other)

    def squat_dir(d):
        os.mkdir(d, 0o700)
        os.chown(d, other, other)

    def squat_link(d):
        os.symlink(theirs, d)
        os.lchown(d, other, other)

    def left_open(d):
        os.mkdir(d, 0o700)
        os.chown(d, ctx.uid, ctx.gid)
        os.chmod(d, 0o755)

    cases = ((squat_dir, "belongs to uid %d, not to you" % other),
             (squat_link, "is a symbolic link of uid %d" % other),
             (left_open, "is open to other users (mode 0755)"))
    for n, (make, why) in enumerate(cases):
        for d in dirs:
            if os.path.islink(d):
                os.unlink(d)
            elif os.path.isdir(d):
                os.rmdir(d)
            make(d)
        log = os.path.join(ctx.scratch, "audit-%d.jsonl" % n)
        r = ctx.sandbox(["true"], profile=prof, extra_args=["--log", log])
        assert r.returncode == 0, describe(r)
        assert "warning: no control socket: `agentbox allow` cannot reach this sandbox" \
            in r.stderr, describe(r)
        assert dirs[0] in r.stderr and why in r.stderr, describe(r)
        with open(log) as f:
            evs = [json.loads(x) for x in f if x.strip()]
        w = [e for e in evs if e.get("event") == "warning" and e.get("kind") == "control"]
        assert len(w) == 1 and why in w[0]["message"], evs
        assert [e["event"] for e in evs].index("start") < evs.index(w[0]), evs
        r = ctx.run(["allow", "-w", ctx.ws, "http.test"])
        assert r.returncode == 125, describe(r)
        assert r.stderr.startswith("agentbox: ") and why in r.stderr, describe(r)
        assert os.listdir(theirs) == [], "a socket was made in the other user's directory"


def test_allow_failures_say_why(ctx):
    """Every failure of `allow` is one message and exit 125: no sandbox; an
    endpoint that answers nothing (at the old abstract name and at the new
    path); a dead run's socket.  A new run replaces a dead run's socket."""
    r = ctx.run(["allow", "-w", ctx.ws, "example.com"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.startswith("agentbox: no agentbox is running in the workspace"), describe(r)
    path = _ctl_path(ctx.uid, ctx.ws)
    stop = _listener(ctx, ctx.uid, [path, "@" + _old_ctl_name(ctx.uid, ctx.ws)])
    r = ctx.run(["allow", "-w", ctx.ws, "example.com"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.startswith("agentbox: allow: the agentbox of %s closed the connection "
                                "without an answer" % ctx.ws), describe(r)
    stop()
    assert os.path.exists(path)  # a dead listener's socket
    r = ctx.run(["allow", "-w", ctx.ws, "example.com"])
    assert r.returncode == 125, describe(r)
    assert "no agentbox is running in the workspace" in r.stderr, describe(r)
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "30"])
    try:
        r = _allow_answered(ctx, ctx.ws, "http.test")
        assert r.returncode == 0 and "allowed http.test" in r.stdout, describe(r)
        # a second run in the workspace is refused, and leaves the first's socket
        r = ctx.sandbox(["true"], profile=prof)
        assert r.returncode == 125 and "another agentbox is running" in r.stderr, describe(r)
        r = ctx.run(["allow", "-w", ctx.ws, "a.upstream.test"])
        assert r.returncode == 0 and "allowed a.upstream.test" in r.stdout, describe(r)
    finally:
        p.terminate()
        p.wait(20)


class CorpProxy:
    """A minimal corporate CONNECT proxy on host loopback: records every
    CONNECT target, maps *.test names to 127.0.0.1."""

    def __init__(self, ctx, ports):
        self.ports = ports  # name -> real port
        self.seen = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._loop, daemon=True).start()
        ctx.on_cleanup(self.sock.close)

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _one(self, c):
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                return
            buf += d
        line = buf.split(b"\r\n")[0].decode()
        self.seen.append(line)
        method, target, _ = line.split(" ")
        host, port = target.rsplit(":", 1)
        if method != "CONNECT" or host not in self.ports:
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            c.close()
            return
        u = socket.create_connection(("127.0.0.1", self.ports[host]))
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
        self._pipe(u, c)


def test_upstream_proxy_chaining(ctx):
    eg = Egress(ctx)
    corp = CorpProxy(ctx, {"far.upstream.test": eg.https.port, "plain.test": eg.http.port})
    hosts = eg.hosts()
    prof = write_profile(ctx, allow=("far.upstream.test:%d" % eg.https.port, "plain.test:%d" % eg.http.port,
                                     "refused.test:443", "upstream.test", "nochain.test:443"),
                         hosts={"upstream.test": hosts["upstream.test"]},
                         extra={"network": {
                             "allow": ["far.upstream.test:%d" % eg.https.port,
                                       "plain.test:%d" % eg.http.port,
                                       "refused.test:443", "upstream.test", "nochain.test:443"],
                             "hosts": {"upstream.test": hosts["upstream.test"]},
                             "upstream_proxy": "env"}})
    script = (
        "curl -sS --cacert ab-test-ca.pem "
        "https://far.upstream.test:%d/far -o /dev/null -w 'far %%{http_code}\\n'; "
        "curl -sS http://plain.test:%d/plain -o /dev/null -w 'plain %%{http_code}\\n'; "
        "curl -sS -k https://refused.test/ -o /dev/null -w 'refused %%{http_code}\\n'; "
        "curl -sS --cacert ab-test-ca.pem https://upstream.test/mapped -o /dev/null "
        "-w 'mapped %%{http_code}\\n'; "
        "curl -sS -k https://nochain.test/ -o /dev/null -w 'nochain %%{http_code}\\n'; true"
        % (eg.https.port, eg.http.port))
    r = ctx.sandbox(script, profile=prof,
                    env={"HTTPS_PROXY": "http://127.0.0.1:%d" % corp.port,
                         "NO_PROXY": "localhost,.nochain.test"})
    assert r.returncode == 0, describe(r)
    out = r.stdout
    assert "far 200" in out, describe(r)
    assert "plain 200" in out, describe(r)
    assert "mapped 200" in out, describe(r)
    assert "refused 200" not in out, describe(r)
    assert "nochain 200" not in out, describe(r)
    seen = " | ".join(corp.seen)
    assert "CONNECT far.upstream.test:%d" % eg.https.port in seen, seen
    assert "CONNECT plain.test:%d" % eg.http.port in seen, seen
    assert "CONNECT refused.test:443" in seen, seen       # the corporate proxy said no
    assert "CONNECT upstream.test" not in seen, "a mapped (local) name went through the chain: " + seen
    assert "nochain" not in seen, "a NO_PROXY name went through the chain: " + seen
    assert eg.https.count("/far") == 1 and eg.https.count("/mapped") == 1


def test_upstream_proxy_bad_url_refused(ctx):
    prof = write_profile(ctx, allow=("a.test",), extra={"network": {
        "allow": ["a.test"], "upstream_proxy": "env"}})
    r = ctx.sandbox("true", profile=prof,
                    env={"HTTPS_PROXY": "http://user:secretpw@proxy.example:8080"})
    assert r.returncode == 125, describe(r)
    assert "upstream proxy" in r.stderr and "secretpw" not in r.stderr, describe(r)
    bad = os.path.join(ctx.scratch, "bad.json")
    ctx.host_file(bad, json.dumps({"version": 1, "network": {"upstream_proxy": "socks5://x:1"}}))
    r = ctx.run(["check", bad])
    assert r.returncode == 125 and ":1:" in r.stderr and "upstream proxy" in r.stderr, describe(r)


def test_explain_shows_network(ctx):
    prof = write_profile(ctx, allow=("api.example.com", "*.cdn.example:8443"),
                         deny=("bad.example.com",), private=("127.0.0.1:9000",),
                         hosts={"up.test": "127.0.0.1:8443"})
    r = ctx.run(["explain", "-p", prof, "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    for s in ("explicit proxy: http://127.0.0.1:3128", "allow: api.example.com *.cdn.example:8443",
              "deny (checked first): bad.example.com", "127.0.0.1:9000", "up.test=127.0.0.1:8443",
              "transparent: on"):
        assert s in r.stdout, "missing %r\n%s" % (s, r.stdout)
    r = ctx.run(["explain", "--json", "-p", prof, "-w", ctx.ws])
    j = json.loads(r.stdout)["network"]
    assert j["mode"] == "proxy" and j["proxy_port"] == 3128 and j["transparent"] is True, j
    assert sorted(j["transparent_ports"]) == [80, 443, 8443, 9000], j
    assert j["allow"] == ["api.example.com", "*.cdn.example:8443"], j
