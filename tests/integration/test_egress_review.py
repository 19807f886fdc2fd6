# SPDX-License-Identifier: MIT
"""Egress proxy, regressions found in review: memory safety of the HTTP
engine, busy loops and lost wakeups of the event loop, host confusion of the
tunnel check, and answers that must arrive in order and intact.

Most cases use a raw host-side upstream (RawServer) whose behaviour the
proxy's own test upstreams cannot produce (answering before the request body
is read, closing a kept-alive connection, speaking first, never answering).
Busy loops are measured as the CPU time the agentbox process (the proxy)
uses while the sandbox holds a connection in the suspicious state.
"""

import json
import os
import resource
import socket
import threading
import time

from abtest import INNER_PY, root_only
from upstream import INNER_LIB, Egress, big_body_chunk, inner_json, read_log, write_profile


# ---------------------------------------------------------------- host side

class RawServer:
    """A TCP server on 127.0.0.1:<ephemeral>; handler(server, conn) runs in a
    thread per connection.  Everything a handler reads is kept in .received."""

    def __init__(self, ctx, handler):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.handler = handler
        self.lock = threading.Lock()
        self.received = []
        self.conns = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        ctx.on_cleanup(self.stop)

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                self.received.append(b"")
                idx = len(self.received) - 1
            c.settimeout(20)
            threading.Thread(target=self._run, args=(c, idx), daemon=True).start()

    def _run(self, c, idx):
        try:
            self.handler(self, c, idx)
        except OSError:
            pass
        finally:
            c.close()

    def recv(self, c, idx, n=65536):
        d = c.recv(n)
        with self.lock:
            self.received[idx] += d
        return d

    def read_head(self, c, idx, buf=b""):
        while b"\r\n\r\n" not in buf:
            d = self.recv(c, idx)
            if not d:
                return None
            buf += d
        return buf

    def drain(self, c, idx):
        while self.recv(c, idx):
            pass

    def all_bytes(self):
        with self.lock:
            return b"".join(self.received)

    def stop(self):
        self.stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def cpu_secs(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phased(ctx, code, cfg, prof, window=1.5, timeout=60, env=None, **popen_kw):
    """Run INNER_PY code in the sandbox (agentbox in the background).  Each
    time the script calls phase(NAME), measure the CPU agentbox uses during
    `window` seconds, then let the script go on.  Returns (JSON, {NAME: cpu})."""
    cfg = dict(cfg, ws=ctx.ws)
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", code,
                   json.dumps(cfg)], env=env, **popen_kw)
    cpu, done = {}, set()
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        names = [n[6:] for n in os.listdir(ctx.ws) if n.startswith("phase-")]
        for n in names:
            if n in done:
                continue
            t0 = cpu_secs(p.pid)
            time.sleep(window)
            cpu[n] = cpu_secs(p.pid) - t0
            done.add(n)
            with open(os.path.join(ctx.ws, "go-" + n), "w") as f:
                f.write("1")
        time.sleep(0.02)
    try:
        out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
    except Exception:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("agentbox did not finish\n%s" % err.decode("utf-8", "replace"))
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    assert p.returncode == 0, "agentbox exited %s\nstdout: %s\nstderr: %s" % (
        p.returncode, out[-3000:], err[-3000:])
    try:
        return json.loads(out.strip().splitlines()[-1]), cpu, err
    except (ValueError, IndexError):
        raise AssertionError("inner python printed no JSON\nstdout: %s\nstderr: %s" % (
            out[-3000:], err[-3000:]))


PHASE_LIB = INNER_LIB + r'''
def phase(name):
    open(os.path.join(CFG["ws"], "phase-" + name), "w").write("1")
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(CFG["ws"], "go-" + name)):
        if time.monotonic() > deadline:
            raise SystemExit("the host never said go-" + name)
        time.sleep(0.02)

def raw_resp(s, timeout=5.0, buf=b""):
    r = read_response(s, timeout, buf=buf)
    return {"status": r["status"], "state": r["state"], "headers": r["headers"],
            "body": r["body"].decode("latin-1"), "rest": r["rest"].decode("latin-1")}
'''

BUSY_CPU = 0.4  # seconds of agentbox CPU in a 1.5 s window that mean a busy loop


# ---------------------------------------------------------------- memory safety

EARLY_PY = PHASE_LIB + r'''
out = {}
hp = "raw.test:%d" % CFG["port"]
s = socket.create_connection(PROXY, timeout=5)
s.sendall(("POST http://%s/upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 300000\r\n\r\n"
           % (hp, hp)).encode() + b"a" * 1000)
r = read_response(s, 5)
out["early"] = [r["status"], r["body"].decode("latin-1")]
# the rest of the body after the response is complete
sent = send_some(s, b"b" * 100000)
out["after"] = "closed" if conn_closed(s, 3) else "open"
s.close()
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def _early_answer(srv, c, idx):
    if srv.read_head(c, idx) is None:
        return
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")
    srv.drain(c, idx)


def test_early_response_while_request_body_flows(ctx):
    """The upstream answers before the request body is complete (a 413, an
    early 401...): the response reaches the client, the rest of the body is
    not forwarded, the connection closes, and the proxy survives (this wrote
    before the pipeline array: fifo[-1])."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _early_answer)
    prof = eg.write_profile(allow=["http.test", "raw.test:%d" % raw.port],
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, _ = inner_json(ctx, EARLY_PY, {"port": raw.port}, prof)
    assert out["early"] == [200, "early"], out
    assert out["after"] == "closed", "the client connection stayed open after an early " \
        "response to an unfinished body: %s" % out
    assert out["normal"] == 200, out
    assert len(raw.all_bytes()) < 300000, "the whole body was relayed after the response"


# ---------------------------------------------------------------- answers in order

REDIAL_PY = PHASE_LIB + r'''
out = {}
hp = "raw.test:%d" % CFG["port"]
s, r = connect(hp)
out["connect"] = r["status"]
buf = b""
for i in (1, 2, 3):
    s.sendall(("GET /r%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (i, hp)).encode())
    r = read_response(s, 5, buf=buf)
    buf = r["rest"]
    out["r%d" % i] = [r["status"], r["headers"].get("x-raw"), r["body"].decode("latin-1")]
    time.sleep(0.3)  # the upstream closes its side meanwhile
s.close()
print(json.dumps(out))
'''


def _answer_then_close(srv, c, idx):
    head = srv.read_head(c, idx)
    if head is None:
        return
    path = head.split(b" ")[1]
    c.sendall(b"HTTP/1.1 200 OK\r\nX-Raw: yes\r\nContent-Length: %d\r\n\r\n%s" % (len(path),
                                                                                   path))


def test_redial_inside_connect_tunnel(ctx):
    """Plain HTTP inside a CONNECT tunnel whose upstream closed a kept-alive
    connection: the next request dials again, and the client sees only the
    upstream's response (not a second '200 Connection established')."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _answer_then_close)
    prof = eg.write_profile(allow=["raw.test:%d" % raw.port],
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, _ = inner_json(ctx, REDIAL_PY, {"port": raw.port}, prof)
    assert out["connect"] == 200, out
    for i in (1, 2, 3):
        assert out["r%d" % i] == [200, "yes", "/r%d" % i], out


ORDER_PY = PHASE_LIB + r'''
out = {}
def pipeline(name, sock, raw, n):
    sock.sendall(raw)
    buf, got = b"", []
    for i in range(n):
        r = read_response(sock, 5, buf=buf)
        buf = r["rest"]
        j = jresp(r)
        got.append([j["status"], (j["json"] or {}).get("path") if j["json"] else j["text"][:200]])
        if r["status"] is None:
            break
    out[name] = got
    sock.close()

hp = "http.test:%d" % CFG["http_port"]
# explicit: an allowed request, then one for a denied host
pipeline("explicit_deny", socket.create_connection(PROXY, timeout=5),
         plain_get("http.test", "/o1").replace(b"Connection: close\r\n", b"") +
         plain_get("evil.test", "/o2"), 2)
# explicit: an allowed request, then an origin-form request
pipeline("explicit_origin", socket.create_connection(PROXY, timeout=5),
         plain_get("http.test", "/o3").replace(b"Connection: close\r\n", b"") +
         b"GET /o4 HTTP/1.1\r\nHost: http.test\r\n\r\n", 2)
# inside a CONNECT tunnel: an allowed request, then one naming another host
s, r = connect(hp)
pipeline("tunnel_mismatch", s,
         ("GET /o5 HTTP/1.1\r\nHost: %s\r\n\r\nGET /o6 HTTP/1.1\r\nHost: evil.test\r\n\r\n"
          % hp).encode(), 2)
# a close-delimited response followed by a pipelined request
s = socket.create_connection(PROXY, timeout=5)
s.sendall(plain_get("http.test", "/close?n=5000").replace(b"Connection: close\r\n", b"") +
          plain_get("http.test", "/o7"))
r = read_response(s, 5)
body = r["body"]
out["close_delimited"] = [r["status"], len(body), body == CFG["pattern"].encode("latin-1")]
s.close()
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def test_answers_stay_in_order_and_intact(ctx):
    """A refusal behind a request in flight is answered after that request's
    response (never instead of it), and a response is never cut short by the
    refusal or by a pipelined request behind a close-delimited body."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=["http.test", "http.test:%d" % eg.http.port])
    cfg = {"http_port": eg.http.port, "pattern": big_body_chunk(0, 5000).decode("latin-1")}
    out, _ = inner_json(ctx, ORDER_PY, cfg, prof)
    assert out["explicit_deny"][0] == [200, "/o1"], out
    assert out["explicit_deny"][1][0] == 403, out
    assert out["explicit_origin"][0] == [200, "/o3"], out
    assert out["explicit_origin"][1][0] == 400, out
    assert out["tunnel_mismatch"][0] == [200, "/o5"], out
    assert out["tunnel_mismatch"][1][0] == 400, out
    assert out["close_delimited"] == [200, 5000, True], out
    assert out["normal"] == 200, out
    assert eg.evil_hits() == 0
    assert "/o6" not in eg.http.paths() and "/o4" not in eg.http.paths(), eg.summary()


# ---------------------------------------------------------------- busy loops

HELLO_PY = PHASE_LIB + r'''
out = {}
for mode in ("banner", "close"):
    s, r = connect("raw.test:%d" % CFG["port"])
    s.sendall(b"\x16\x03\x01")          # the start of a ClientHello, no more
    time.sleep(0.5)                      # the upstream speaks (or closes) meanwhile
    phase("hello-" + mode)
    out[mode] = "closed" if conn_closed(s, 0.1) else "open"
    s.close()
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def _speak_first(srv, c, idx):
    time.sleep(0.2)
    if idx % 2 == 0:
        c.sendall(b"SSH-2.0-banner\r\n")
        srv.drain(c, idx)
    # odd connections: close at once


def test_no_busy_loop_in_hello(ctx):
    """A client stops inside its ClientHello while the upstream speaks first
    or closes: agentbox waits (the hello timeout ends it), it does not spin."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _speak_first)
    prof = eg.write_profile(allow=["http.test", "raw.test:%d" % raw.port],
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, cpu, err = run_phased(ctx, HELLO_PY, {"port": raw.port}, prof)
    assert out["normal"] == 200, out
    for k, v in cpu.items():
        assert v < BUSY_CPU, "agentbox used %.2f s of CPU in 1.5 s (%s): a busy loop\n%s" % (
            v, k, cpu)


SWITCH_PY = PHASE_LIB + r'''
out = {}
s = socket.create_connection(PROXY, timeout=5)
# the second request goes to a name dialled through a corporate proxy that
# never answers: the first response must arrive meanwhile
s.sendall(plain_get("http.test", "/first").replace(b"Connection: close\r\n", b"") +
          plain_get("far.test", "/second"))
t0 = time.monotonic()
r = read_response(s, 5)
out["first"] = [r["status"], round(time.monotonic() - t0, 2)]
phase("dialling")
s.close()
# an IP literal the allow list names is still checked against the private
# ranges when the dial would go through the corporate proxy
out["literal"] = proxy_request(plain_get("10.1.2.3", "/lit")).get("status")
s, r = connect("10.1.2.3:443")
out["literal_connect"] = r.get("status")
print(json.dumps(out))
'''


def _hold(srv, c, idx):
    srv.drain(c, idx)  # a corporate proxy that never answers


def test_switching_upstream_while_response_unflushed(ctx):
    """A kept-alive client switches to a destination whose dial takes long
    (here: a silent corporate proxy): the previous response is delivered at
    once and agentbox does not spin while the dial is pending."""
    eg = Egress(ctx)
    corp = RawServer(ctx, _hold)
    net = {"allow": ["http.test", "far.test", "10.1.2.3"], "hosts": eg.hosts(),
           "upstream_proxy": "env"}
    prof = write_profile(ctx, extra={"network": net})
    out, cpu, err = run_phased(ctx, SWITCH_PY, {}, prof,
                               env={"HTTPS_PROXY": "http://127.0.0.1:%d" % corp.port})
    assert out["first"][0] == 200 and out["first"][1] < 2, out
    assert cpu["dialling"] < BUSY_CPU, "agentbox used %.2f s of CPU in 1.5 s while dialling" % (
        cpu["dialling"])
    assert out["literal"] == 403 and out["literal_connect"] == 403, out
    assert b"10.1.2.3" not in corp.all_bytes(), corp.all_bytes()


# ---------------------------------------------------------------- host confusion

CONFUSE_PY = PHASE_LIB + r'''
out = {}
def via_connect(first):
    s, r = connect("raw.test:%d" % CFG["port"])
    if s is None:
        return "connect %s" % r
    return send_and_read(s, first)
def via_transparent(first):
    s = direct("raw.test", CFG["port"])
    if isinstance(s, str):
        return "direct " + s
    return send_and_read(s, first)
def send_and_read(s, first):
    s.sendall(first.encode("latin-1"))
    r = read_response(s, 3)
    s.close()
    return [r["status"], r["state"]]
for name, first in CFG["cases"]:
    out["connect-" + name] = via_connect(first)
    out["transparent-" + name] = via_transparent(first)
print(json.dumps(out))
'''

CONFUSE_CASES = [
    ("leading-crlf", "\r\nGET /lc HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("leading-lf", "\nGET /lf HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("dash-method", "M-SEARCH /ds HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("lower-method", "get /lm HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("tab", "GET\t/tab HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("long-method", "ABCDEFGHIJKLMNOPQRSTUVWXYZ /lg HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    # a server trusting PROXY protocol would read the request behind it
    ("proxy-v1", "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\nGET /p1 HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("proxy-v2", "\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c" + "\x0a\x00\x00\x01" * 3 +
     "GET /p2 HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
]


def _record_and_echo_status(srv, c, idx):
    head = srv.read_head(c, idx)
    if head is not None:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    srv.drain(c, idx)


def test_tunnel_http_check_not_bypassed(ctx):
    """Bytes a lenient HTTP server would read as a request (after an empty
    line, with a '-' or lower-case method, a tab) are checked as HTTP (Host
    must name the tunnel's host), not relayed as an opaque protocol; a
    protocol that is not HTTP is still relayed."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _record_and_echo_status)
    prof = eg.write_profile(allow=["raw.test:%d" % raw.port],
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, _ = inner_json(ctx, CONFUSE_PY, {"port": raw.port, "cases": CONFUSE_CASES}, prof)
    got = raw.all_bytes()
    assert b"evil.test" not in got, "a request for evil.test was relayed: %r\n%s" % (got, out)
    for k, v in out.items():
        assert v[0] != 200, "%s: %s" % (k, out)


NONHTTP_PY = PHASE_LIB + r'''
out = {}
def first_bytes(s, data):
    s.sendall(data.encode("latin-1"))
    r = read_response(s, 3)
    s.close()
    return [r["status"], r["state"], r["body"].decode("latin-1")[:300]]
for name, data in CFG["cases"]:
    s, r = connect("raw.test:%d" % CFG["port"])
    out["connect-" + name] = first_bytes(s, data) if s else ["connect", r]
    s = direct("raw.test", CFG["port"])
    out["transparent-" + name] = ["direct", s] if isinstance(s, str) else first_bytes(s, data)
# keep-alive in a tunnel: a request, then an HTTP/0.9 line on the same connection
s, r = connect("raw.test:%d" % CFG["port"])
s.sendall(("GET /t8-first HTTP/1.1\r\nHost: raw.test:%d\r\n\r\n" % CFG["port"]).encode())
a = read_response(s, 3)
s.sendall(b"GET /t8-after\r\n\r\n")
b = read_response(s, 3)
out["keepalive"] = [a["status"], b["status"], b["body"].decode("latin-1")[:300]]
print(json.dumps(out))
'''

NONHTTP_CASES = [
    # a lenient server that skips the NUL reads a request for another name
    ("nul-led", "\x00GET /t8-nul HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    # HTTP/0.9: no version, no Host (the server picks a name)
    ("http09", "GET /t8-smuggled\r\n\r\n"),
    # a version that is not HTTP/1.x: no "HTTP/" on the line
    ("no-http", "GET /t8-noversion XTTP/1.1\r\nHost: evil.test\r\n\r\n"),
]


def test_tunnel_non_http_lines_refused(ctx):
    """First bytes in a tunnel (CONNECT, transparent) that a lenient server
    would read as a request but the strict parser refuses (a NUL first, an
    HTTP/0.9 line, a line without HTTP/1.x) get a 400 with the parser's
    reason and an audit line; the upstream sees none of them.  In a tunnel
    already speaking HTTP, a request is answered and the HTTP/0.9 line after
    it refused."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _record_and_echo_status)
    log = os.path.join(ctx.scratch, "audit.jsonl")
    prof = eg.write_profile(allow=["raw.test:%d" % raw.port], log=log,
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, _ = inner_json(ctx, NONHTTP_PY, {"port": raw.port, "cases": NONHTTP_CASES}, prof)
    got = raw.all_bytes()
    problems = []
    for marker in (b"t8-nul", b"t8-smuggled", b"t8-noversion", b"t8-after"):
        if marker in got:
            problems.append("%s reached the upstream: %r" % (marker.decode(), got[:400]))
    reasons = {"nul-led": "invalid method token", "http09": "no HTTP version",
               "no-http": "malformed HTTP version"}
    for k, v in out.items():
        if k == "keepalive":
            continue
        want = reasons[k.split("-", 1)[1]]
        if v[0] != 400 or want not in v[2]:
            problems.append("%s: %s (expected 400: %s)" % (k, v, want))
    if out["keepalive"][:2] != [200, 400] or "no HTTP version" not in out["keepalive"][2]:
        problems.append("keep-alive then HTTP/0.9: %s" % out["keepalive"])
    lg, _ = read_log(log)
    denied = [e for e in lg if e.get("event") == "request" and e.get("rule") == "malformed" and
              e.get("decision") == "deny" and e.get("status") == 400]
    if len(denied) != 2 * len(NONHTTP_CASES) + 1:
        problems.append("%d 'malformed' audit lines, expected %d:\n%s" % (
            len(denied), 2 * len(NONHTTP_CASES) + 1,
            "\n".join(json.dumps(e) for e in lg[-20:])))
    assert not problems, "\n".join(problems)


OPAQUE_PY = INNER_LIB + r'''
out = {}
for name, data in CFG["cases"]:
    s, r = connect("echo.test:%d" % CFG["port"])
    s.sendall(data.encode("latin-1"))
    got = b""
    s.settimeout(3)
    try:
        while len(got) < len(data):
            d = s.recv(4096)
            if not d:
                break
            got += d
    except OSError:
        pass
    out[name] = got.decode("latin-1") == data
    s.close()
print(json.dumps(out))
'''


def test_opaque_protocols_still_relayed(ctx):
    """Client-first protocols that are not HTTP (a line without 'HTTP/', a
    binary message with NUL bytes, one that starts with NULs, a lower-case
    'get') still pass as opaque tunnels."""
    eg = Egress(ctx, echo=True)
    prof = eg.write_profile(allow=["echo.test:%d" % eg.echo.port])
    cases = [("redis", "PING\r\n"), ("binary", "0032git-upload-pack /x\x00host=a\x00"),
             ("lower", "hello world\n"),
             ("postgres", "\x00\x00\x00\x08\x04\xd2\x16\x2f"),  # SSLRequest: NULs first
             ("memcached", "get key\r\n")]
    out, _ = inner_json(ctx, OPAQUE_PY, {"port": eg.echo.port, "cases": cases}, prof)
    assert all(out.values()), out


# ---------------------------------------------------------------- refusals arrive

LINGER_PY = INNER_LIB + r'''
out = {}
for i in range(3):
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(b"POST http://evil.test/up HTTP/1.1\r\nHost: evil.test\r\n"
              b"Content-Length: 4000000\r\n\r\n")
    def pump():
        try:
            s.sendall(b"x" * 4000000)
        except OSError:
            pass
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    time.sleep(0.3)
    r = read_response(s, 5)
    out["try%d" % i] = [r["status"], r["state"]]
    s.close()
print(json.dumps(out))
'''


def test_refusal_survives_unread_body(ctx):
    """A refused request whose body is still arriving gets its 403: the proxy
    does not reset the connection under the answer (lingering close)."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, LINGER_PY, {}, prof)
    for k, v in out.items():
        assert v[0] == 403, "%s: %s" % (k, out)
    assert eg.evil_hits() == 0


# ---------------------------------------------------------------- limits

EMFILE_PY = PHASE_LIB + r'''
out = {}
socks = []
fails = 0
for i in range(60):
    try:
        s, r = connect("echo.test:%d" % CFG["port"], timeout=3)
    except OSError:
        s = None
    if s is None:
        break
    socks.append(s)
    try:  # the first byte makes it a relayed tunnel (two pipes more)
        s.sendall(b"x")
        if s.recv(1) != b"x":
            break
    except OSError:
        break
out["tunnels"] = len(socks)
waiting = []
for i in range(10):
    try:
        w = socket.create_connection(PROXY, timeout=3)
        waiting.append(w)
    except OSError:
        pass
time.sleep(0.3)
phase("exhausted")
for s in socks:
    s.close()
time.sleep(0.5)
ok = 0
for w in waiting:
    try:
        w.sendall(plain_get("http.test", "/after-emfile"))
        r = read_response(w, 5)
        ok += r["status"] == 200
    except OSError:
        pass
    w.close()
out["served_after"] = ok
out["normal"] = normal_ok()
print(json.dumps(out))
'''


@root_only
def test_fd_exhaustion_no_spin(ctx):
    """With its descriptors used up, agentbox pauses accepting rather than
    spinning on the listener, and serves the waiting clients once
    descriptors are free again."""
    eg = Egress(ctx, echo=True)
    prof = eg.write_profile(allow=["http.test", "echo.test:%d" % eg.echo.port])

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))
    out, cpu, err = run_phased(ctx, EMFILE_PY, {"port": eg.echo.port}, prof,
                               preexec_fn=low_nofile)
    assert out["tunnels"] < 60, "the descriptor limit was not reached: %s" % out
    assert cpu["exhausted"] < BUSY_CPU, \
        "agentbox used %.2f s of CPU in 1.5 s at its descriptor limit" % cpu["exhausted"]
    assert out["served_after"] == 10 and out["normal"] == 200, out


# ---------------------------------------------------------------- policy

DENYIP_PY = INNER_LIB + r'''
out = {"plain": proxy_request(plain_get("sneaky.test", "/s")).get("status")}
s, r = connect("sneaky.test:443")
out["connect"] = r.get("status")
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def test_deny_ip_rule_covers_local_names(ctx):
    """A deny rule naming an address also refuses a local name (network.hosts)
    mapped to that address: deny comes first."""
    eg = Egress(ctx)
    hosts = eg.hosts(sneaky_test="127.0.0.1:%d" % eg.evil.port)
    prof = eg.write_profile(allow=["http.test", "sneaky.test"], hosts=hosts,
                            deny=["127.0.0.1:%d" % eg.evil.port])
    out, _ = inner_json(ctx, DENYIP_PY, {}, prof)
    assert out["plain"] == 403 and out["connect"] == 403, out
    assert out["normal"] == 200, out
    assert eg.evil_hits() == 0


# ---------------------------------------------------------------- slowloris in tunnels

DRIP_PY = INNER_LIB + r'''
out = {}
s, r = connect("http.test:%d" % CFG["port"])
s.sendall(b"GET /drip HTTP/1.1\r\n")
t0 = time.monotonic()
closed_at = None
for i in range(45):
    try:
        s.sendall(b"X")
    except OSError:
        closed_at = time.monotonic() - t0
        break
    s.settimeout(1.0)
    try:
        d = s.recv(4096)  # the 408 answer, or EOF, ends the head
    except socket.timeout:
        continue
    except OSError:
        d = b""
    out["answer"] = d[:12].decode("latin-1")
    closed_at = time.monotonic() - t0
    break
out["closed_after"] = closed_at
print(json.dumps(out))
'''


@root_only
def test_head_deadline_inside_tunnel(ctx):
    """Plain HTTP inside a CONNECT tunnel: a head dripped byte by byte is cut
    off by the head timeout (30 s), not kept for the idle timeout."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=["http.test:%d" % eg.http.port])
    out, _ = inner_json(ctx, DRIP_PY, {"port": eg.http.port}, prof, timeout=80)
    assert out["closed_after"] is not None and out["closed_after"] < 36, out
    assert "/drip" not in eg.http.paths()


# ---------------------------------------------------------------- cut responses

CUT_PY = PHASE_LIB + r'''
s = socket.create_connection(PROXY, timeout=5)
s.sendall(plain_get("raw.test:%d" % CFG["port"], "/cut"))
r = read_response(s, 5)
print(json.dumps({"status": r["status"], "state": r["state"], "len": len(r["body"]),
                  "normal": normal_ok()}))
'''


def _close_delimited_then_reset(srv, c, idx):
    if srv.read_head(c, idx) is None:
        return
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"x" * 3000)
    time.sleep(0.2)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def test_reset_of_close_delimited_body_is_not_an_end(ctx):
    """A body delimited by the upstream's close that ends in a reset reaches
    the client as a reset too: a plain close would make the cut body look
    complete."""
    eg = Egress(ctx)
    raw = RawServer(ctx, _close_delimited_then_reset)
    prof = eg.write_profile(allow=["http.test", "raw.test:%d" % raw.port],
                            hosts=eg.hosts(raw_test="127.0.0.1:%d" % raw.port))
    out, _ = inner_json(ctx, CUT_PY, {"port": raw.port}, prof)
    assert out["status"] == 200 and out["state"] != "ok", out
    assert out["normal"] == 200, out


BANNER_PY = PHASE_LIB + r'''
s = socket.create_connection(PROXY, timeout=5)
s.sendall(b"CONNECT far.test:2525 HTTP/1.1\r\nHost: far.test:2525\r\n\r\n")
r = read_response(s, 5, head_only=True)
out = {"connect": r["status"]}
got = r["rest"]
s.settimeout(3)
try:
    while not got.endswith(b"\r\n"):
        d = s.recv(100)
        if not d:
            break
        got += d
    out["banner"] = got.decode("latin-1")
except OSError as e:
    out["banner"] = ename(e)
print(json.dumps(out))
'''


def _corp_with_banner(srv, c, idx):
    if srv.read_head(c, idx) is None:
        return
    # the 200 and the server's first bytes arrive together
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n220 far.test ESMTP\r\n")
    srv.drain(c, idx)


def test_server_first_bytes_behind_chained_200(ctx):
    """Through a corporate proxy, a server that speaks first (SMTP): its
    banner, read together with the proxy's 200, reaches the client at once."""
    corp = RawServer(ctx, _corp_with_banner)
    prof = write_profile(ctx, extra={"network": {"allow": ["far.test:2525"],
                                                 "upstream_proxy": "env"}})
    out, _ = inner_json(ctx, BANNER_PY, {}, prof,
                        env={"HTTPS_PROXY": "http://127.0.0.1:%d" % corp.port})
    assert out == {"connect": 200, "banner": "220 far.test ESMTP\r\n"}, out


# ---------------------------------------------------------------- DNS responder

DNS_PY = PHASE_LIB + r'''
out = {"bad": dns_query("bad.upstream.test"), "evil": dns_query("evil.test")}
# TCP: a query dripped a byte a second does not hold its slot for ever
s = socket.create_connection(("127.0.0.1", 53), timeout=5)
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x04test\x00" + struct.pack(">HH", 1, 1)
msg = struct.pack(">H", len(q)) + q
t0 = time.monotonic()
closed = None
for i in range(len(msg) - 1):
    try:
        s.sendall(msg[i:i + 1])
    except OSError:
        closed = time.monotonic() - t0
        break
    if conn_closed(s, 1.0):
        closed = time.monotonic() - t0
        break
out["drip_closed_after"] = closed
print(json.dumps(out))
'''


@root_only
def test_dns_answers_and_tcp_drip(ctx):
    """A deny rule for one port of a name leaves the name resolvable (it is
    allowed on the other default port); a TCP client dripping a query is
    closed after the idle time, not kept while it drips."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=["*.upstream.test"], deny=["bad.upstream.test:443"])
    out, _ = inner_json(ctx, DNS_PY, {}, prof, timeout=60)
    assert out["bad"].get("rcode") == 0 and out["bad"].get("answers"), out
    assert out["evil"].get("rcode") == 3, out
    assert out["drip_closed_after"] is not None and out["drip_closed_after"] < 14, out
