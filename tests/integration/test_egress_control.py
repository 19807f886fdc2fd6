# SPDX-License-Identifier: MIT
"""Egress (issue 3), the parts around the proxy: `agentbox allow` on a running
sandbox, chaining through a corporate proxy (network.upstream_proxy), and
what `explain` says about the network."""

import json
import os
import socket
import subprocess
import threading
import time

from abtest import INNER_PY, NOBODY_UID, describe, run_ab, wait_for
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
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "5"])
    try:
        def answered():
            x = ctx.run(["allow", "-w", ctx.ws, "bad host"], record=False)
            return x if x.returncode != 125 else None
        r = wait_for(answered, 10)
        assert r and r.returncode == 1, "a bad rule must be refused by the sandbox"
        assert "not a valid host name" in r.stderr, describe(r)
    finally:
        p.kill()
        p.wait()


# The control socket lives in the host's network namespace: from inside, the
# same abstract name is unreachable.
INSIDE_CTL_PY = r'''
import json, socket, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0" + name)
    s.sendall(b"allow evil.test\n")
    s.shutdown(socket.SHUT_WR)
    print(json.dumps({"state": "connected", "answer": s.recv(100).decode()}))
except OSError as e:
    print(json.dumps({"state": "refused", "errno": e.errno}))
'''


def _ctl_name(uid, ws):
    h = 1469598103934665603
    for b in ws.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "agentbox-ctl-%u-%016x" % (uid, h)


def test_control_socket_unreachable_from_inside(ctx):
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    name = _ctl_name(ctx.uid, ctx.ws)
    r = ctx.sandbox([INNER_PY, "-c", INSIDE_CTL_PY, name], profile=prof)
    assert r.returncode == 0, describe(r)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["state"] == "refused", res
    # and the name is right: from the host, while a sandbox runs, it answers
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "5"])
    try:
        def up():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect("\0" + name)
                return True
            except OSError:
                return False
            finally:
                s.close()
        assert wait_for(up, 10), "the control socket never appeared on the host"
    finally:
        p.kill()
        p.wait()


def test_control_socket_other_uid_refused(ctx):
    """Root's sandbox: an unprivileged process on the host gets no answer."""
    if ctx.uid != 0:
        return
    eg = Egress(ctx)
    prof = eg.write_profile(allow=("upstream.test",))
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sleep", "5"])
    name = _ctl_name(0, ctx.ws)
    code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
            "s.connect('\\0'+sys.argv[1])\n"
            "try:\n"
            " s.sendall(b'allow evil.test\\n');s.shutdown(socket.SHUT_WR);print(repr(s.recv(100)))\n"
            "except (ConnectionResetError, BrokenPipeError): print(repr(b''))")
    try:
        def up():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect("\0" + name)
                return True
            except OSError:
                return False
            finally:
                s.close()
        assert wait_for(up, 10)
        r = subprocess.run(["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_UID,
                            "--clear-groups", INNER_PY, "-c", code, name],
                           capture_output=True, text=True, timeout=20)
        assert r.stdout.strip() == "b''", "another uid was answered: %r %r" % (r.stdout, r.stderr)
    finally:
        p.kill()
        p.wait()


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
