#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Egress proxy benchmark (`make bench-proxy`, run as root):

    python3 bench/proxy.py [--agentbox build/agentbox] [--reps 7] [--json FILE]
                           [--only latency,https,bulk,curl,memory,interception]
                           [--port-base 28080] [--perf] [--srt PATH|none]

Each figure is measured against a direct connection in the same run, the two
sides interleaved (direct, proxied, direct, proxied...) so that drift hits
both.  The direct client runs on the host against 127.0.0.1; the proxied
client runs inside `agentbox run` with a profile that maps bench.test to
127.0.0.1 and allows the bench ports, and goes through the explicit proxy
(127.0.0.1:3128 inside the sandbox).  The servers run on the host in one
separate process.

1. latency  small HTTP GET on one kept-alive connection: direct vs
            absolute-form through the proxy.  Median per request, added ms.
2. https    fresh connection per request: TCP connect + TLS 1.3 handshake
            (self-signed EC P-256 cert made with the openssl CLI, trusted
            through a CA file in the workspace) + GET; through the proxy
            CONNECT first.  Median, added ms.
3. bulk     a raw TCP server sends N bytes (a preallocated buffer, sendall)
            when asked; the python client reads them with recv_into into a
            preallocated buffer; direct vs a CONNECT tunnel (the splice path).
            Rate and ratio.  Also curl downloading N bytes from an HTTP
            server, direct vs absolute-form through the proxy: that is the
            proxy's HTTP forwarding path (user-space copies), not splice.
4. memory   a client inside opens 2,000 CONNECT tunnels to an echo server,
            sends a (binary) byte through each and reads it back, then holds them;
            the bench reads VmRSS and the fd count of the agentbox process
            (the proxy runs in it) with zero tunnels, with them held, and
            after they are closed.

5. interception (--only interception = ilat,imint,ibulk,icurl): TLS to a
   host a brokered secret is bound to (profile "secrets": the secret
   BENCH_KEY, bound to bench.test:P and *.bench.test:P, swapped in
   x-api-key; network.ca_file names the bench CA).  The proxied client
   sends the placeholder through a CONNECT tunnel and trusts the session CA
   through the bundle agentbox binds inside; the direct client sends the
   real value to 127.0.0.1 and trusts the bench CA.  The server answers 403
   when x-api-key is not the real value: those are counted (must be 0).
   Each client also checks who signed the leaf it got (the session CA
   inside, the bench CA directly).
   ilat     steady state: sequential small GETs on one kept-alive TLS
            connection.  Median, added ms (target <= +1 ms).
   imint    first request: fresh connection (+ CONNECT) + TLS 1.3 + GET +
            response, alternately to a name not used before in that run
            (nK.bench.test, mapped in network.hosts: the proxy mints a leaf)
            and to bench.test (its leaf cached).  Median, added ms (target
            <= +5 ms); new minus cached through the proxy = the mint.
   ibulk    1 GiB response body (Content-Length, from a preallocated buffer;
            --ibulk-body text: base64 lines, the default, or x: one byte
            repeated) read with recv_into through python's ssl: direct TLS,
            intercepted, and a blind TLS tunnel (the same server on a port
            the secret is not bound to), alternated.  Rates and ratios
            (target >= x0.5 of direct), the proxy's CPU per GB; with --perf,
            where the proxy's cycles go (perf record of the agentbox process
            in the first intercepted and blind runs: TLS crypto, the masking
            scan, kernel...).
   icurl    the same three with curl -o /dev/null as the client everywhere
            (C reads: shows whether python's ssl limits the direct rate).

The server certificate is a leaf for bench.test, *.bench.test and 127.0.0.1
signed by a bench CA made with the openssl CLI at start (ws/ca.pem).

srt (Anthropic's sandbox runtime, npm @anthropic-ai/sandbox-runtime): with
--srt PATH (its `srt` CLI), or when it is installed in the bench cache
(SRT_DEFAULT below: npm install --prefix /var/cache/agentbox-bench/npm
@anthropic-ai/sandbox-runtime; it needs node, bwrap, socat and rg), latency,
https and bulk also run the proxied client inside `srt`, as a third arm of
each repetition (direct, agentbox, srt).  Its settings allow bench.test:P
and 127.0.0.1:P for the bench ports (its proxy refuses a name that resolves
to loopback unless that literal address is allowed) and writes to the
workspace only.  Its proxy resolves names on the host: srt runs in a
private mount namespace (unshare -m) where a copy of /etc/hosts with
"127.0.0.1 bench.test" is bind-mounted over /etc/hosts; the host's file is
not touched.  Inside, the client reaches srt's proxy at 127.0.0.1:3128 (a
socat relay to a Unix socket; on the host socat again, to srt's node
proxy) and sends the Proxy-Authorization that srt puts in $HTTP_PROXY.  Its
"proxy CPU" is that of the node process and every socat in srt's tree.
--srt none, or an install that cannot run a command, skips srt.

Both sides run the same way: the client starts, says it is ready (a file in
the workspace), waits for "go", runs, writes its result and waits for
"exit".  Between go and the result the bench samples the CPU time of the
agentbox process (the proxy's cost per request / per GB) and how busy the
whole machine is (/proc/stat).  A busy machine is reported as a warning:
other work on a 2-CPU box moves these figures a lot.

The servers use 7 loopback ports from --port-base (default 28080..28086).
Python 3 standard library, openssl, curl (and perf for --perf).  About
2-3 minutes with the defaults (the interception part about 1-2 minutes).
"""
import argparse
import base64
import json
import os
import random
import resource
import selectors
import shutil
import signal
import socket
import ssl
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

NAME = "bench.test"
PROXY = ("127.0.0.1", 3128)
PORT_BASE = 28080  # http, bulk, echo, http bulk, https, tls, tls blind: base .. base+6
P_HTTP = P_BULK = P_ECHO = P_HBULK = P_HTTPS = P_TLS = P_TLSB = 0
PORTS = ()
NPORTS = 7


def set_ports(base):
    global P_HTTP, P_BULK, P_ECHO, P_HBULK, P_HTTPS, P_TLS, P_TLSB, PORTS
    PORTS = tuple(range(base, base + NPORTS))
    P_HTTP, P_BULK, P_ECHO, P_HBULK, P_HTTPS, P_TLS, P_TLSB = PORTS


# interception: the brokered secret (its value is in SECRET_SRC in agentbox's
# environment and the servers'; inside, SECRET_VAR holds the placeholder; the
# direct client gets the real value in SECRET_VAR)
SECRET_VAR = "BENCH_KEY"
SECRET_SRC = "AB_BENCH_SECRET"
SECRET_PREFIX = "sk-bench-"
BENCH_CA_CN = "agentbox bench CA"
CHUNK = 4 << 20  # bulk send/recv buffer
HTTP_RESP = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
             b"Content-Length: 3\r\n\r\nok\n")
CLIENT_NAME = "abproxy_client.py"
SRT_DEFAULT = "/var/cache/agentbox-bench/npm/node_modules/.bin/srt"
SRT_COMMS = ("node", "socat")  # srt's proxy: the node process and the socat relays
PROXY_AUTH = b""  # inside srt: a Proxy-Authorization line from $HTTP_PROXY
INTERCEPTION = ("ilat", "imint", "ibulk", "icurl")
# the interpreter the sandboxed client uses, for the direct client (and the
# servers) too: the same build on both sides
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


# ---------------------------------------------------------------- servers --

def _listen(port, backlog=128):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(backlog)
    return s


def _accept_loop(ls, handler):
    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handler, args=(c,), daemon=True).start()


def _read_head(sock, buf):
    """Read until a blank line; returns (head, rest) or (None, buf) at EOF."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _serve_http(c):
    """Keep-alive responder: every request head gets HTTP_RESP."""
    buf = b""
    try:
        while True:
            head, buf = _read_head(c, buf)
            if head is None:
                return
            c.sendall(HTTP_RESP)
    except OSError:
        pass
    finally:
        c.close()


def _serve_https(ctx):
    def handler(c):
        try:
            c.settimeout(10)
            t = ctx.wrap_socket(c, server_side=True)
            head, _ = _read_head(t, b"")
            if head is not None:
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                          b"Connection: close\r\n\r\nok\n")
            t.close()
        except (OSError, ssl.SSLError):
            c.close()
    return handler


def _serve_tls(ctx, check):
    """Kept-alive TLS (the interception target): GET /bulk/N answers N
    bytes, anything else 3.  With check, x-api-key must hold the real value
    (the proxy swapped the placeholder), else 403 "no" (the client counts
    those)."""
    want = os.environb.get(SECRET_SRC.encode(), b"")

    def handler(c):
        try:
            c.settimeout(10)
            t = ctx.wrap_socket(c, server_side=True)
            t.settimeout(None)  # blocking: bulk writes go out whole
            buf = b""
            while True:
                head, buf = _read_head(t, buf)
                if head is None:
                    break
                lines = head.split(b"\r\n")
                path = lines[0].split(b" ")[1]
                key = None
                for line in lines[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"x-api-key":
                        key = v.strip()
                if check and (not want or key != want):
                    t.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno\n")
                elif path.startswith(b"/bulk/"):
                    n = int(path[6:])
                    t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
                    _send_n(t, n, _TEXT)
                else:
                    t.sendall(HTTP_RESP)
        except (OSError, ssl.SSLError, ValueError, IndexError):
            pass
        finally:
            c.close()
    return handler


_BULK = None
_TEXT = None  # the TLS bulk body


def _text_body(kind):
    """CHUNK bytes for the intercepted bulk body.  "text": lines of base64
    of random bytes (every letter and digit, as in JSON or source code, so
    the masking scanner meets possible match starts all the time); "x": one
    byte repeated (the scanner's best case)."""
    if kind == "x":
        return _BULK
    raw = base64.b64encode(random.Random(1).randbytes(CHUNK * 3 // 4))
    lines = b"\n".join(raw[i:i + 76] for i in range(0, len(raw), 76))
    return bytearray((lines * 2)[:CHUNK])


def _send_n(c, n, buf=None):
    mv = memoryview(_BULK if buf is None else buf)
    while n > 0:
        k = min(n, len(mv))
        c.sendall(mv[:k])
        n -= k


def _serve_bulk(c):
    """Raw TCP: the client sends b'bulk N\\n', the server sends N bytes."""
    try:
        buf = b""
        while b"\n" not in buf:
            d = c.recv(256)
            if not d:
                return
            buf += d
        _send_n(c, int(buf.split()[1]))
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def _serve_hbulk(c):
    """HTTP: GET /N answers N bytes (for curl)."""
    try:
        head, _ = _read_head(c, b"")
        if head is None:
            return
        n = int(head.split(b" ")[1].rsplit(b"/", 1)[1])
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % n)
        _send_n(c, n)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def _serve_echo(ls):
    """One thread, many idle connections: echo whatever arrives."""
    sel = selectors.DefaultSelector()
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, 1)
                continue
            c = key.fileobj
            try:
                d = c.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if not d:
                sel.unregister(c)
                c.close()
                continue
            try:
                c.send(d)
            except OSError:
                pass


def serve(srvdir):
    global _BULK, _TEXT
    _raise_nofile()
    _BULK = bytearray(b"x" * CHUNK)
    _TEXT = _text_body(os.environ.get("AB_BENCH_BODY", "text"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(srvdir, "cert.pem"), os.path.join(srvdir, "key.pem"))
    ctx.num_tickets = 0  # no resumption: every handshake is a full one
    socks = {p: _listen(p, 4096) for p in PORTS}
    for port, h in ((P_HTTP, _serve_http), (P_HTTPS, _serve_https(ctx)),
                    (P_BULK, _serve_bulk), (P_HBULK, _serve_hbulk),
                    (P_TLS, _serve_tls(ctx, True)), (P_TLSB, _serve_tls(ctx, False))):
        threading.Thread(target=_accept_loop, args=(socks[port], h), daemon=True).start()
    threading.Thread(target=_serve_echo, args=(socks[P_ECHO],), daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- clients --
# The same code runs on the host (direct) and in the sandbox (--proxied).

def _raise_nofile(want=65536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < top:
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def _connect(addr):
    s = socket.create_connection(addr)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _proxy_auth():
    """A Proxy-Authorization line for the proxy named in $HTTP_PROXY when its
    URL carries a user and password (srt's does; agentbox's proxy has none)."""
    u = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", ""))
    if u.username is None:
        return b""
    cred = "%s:%s" % (urllib.parse.unquote(u.username), urllib.parse.unquote(u.password or ""))
    return b"Proxy-Authorization: Basic %s\r\n" % base64.b64encode(cred.encode())


def _tunnel(port, host=NAME):
    """A CONNECT tunnel to host:port through the proxy."""
    s = _connect(PROXY)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n"
              % (host.encode(), port, host.encode(), port, PROXY_AUTH))
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise RuntimeError("proxy closed during CONNECT")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or rest:
        raise RuntimeError("CONNECT refused: %r" % buf[:300])
    return s


def _dial(port, proxied):
    return _tunnel(port) if proxied else _connect(("127.0.0.1", port))


class _Reader:
    """Response reader for a kept-alive connection (Content-Length only)."""

    def __init__(self, sock, allow403=False):
        self.s, self.buf, self.allow403 = sock, b"", allow403

    def response(self):
        """Reads one response; True for a 200, False for a 403 when
        allowed (the key check failed)."""
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                break
            d = self.s.recv(65536)
            if not d:
                raise RuntimeError("connection closed in a response head")
            self.buf += d
        head = self.buf[:i]
        ok = head.startswith(b"HTTP/1.1 200")
        if not ok and not (self.allow403 and head.startswith(b"HTTP/1.1 403")):
            raise RuntimeError("unexpected response: %r" % head[:300])
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        end = i + 4 + n
        while len(self.buf) < end:
            d = self.s.recv(65536)
            if not d:
                raise RuntimeError("connection closed in a response body")
            self.buf += d
        self.buf = self.buf[end:]
        return ok


def client_latency(a):
    if a.proxied:
        s = _connect(PROXY)
        req = b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n" % (
            NAME.encode(), P_HTTP, NAME.encode(), P_HTTP, PROXY_AUTH)
    else:
        s = _connect(("127.0.0.1", P_HTTP))
        req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (NAME.encode(), P_HTTP)
    r = _Reader(s)
    clock = time.perf_counter_ns
    out = []
    for i in range(a.warmup + a.n):
        t0 = clock()
        s.sendall(req)
        r.response()
        if i >= a.warmup:
            out.append(clock() - t0)
    s.close()
    return {"ns": out}


def client_https(a):
    ctx = ssl.create_default_context(cafile=a.ca)
    req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (NAME.encode(), P_HTTPS)
    clock = time.perf_counter_ns
    out = []
    for i in range(a.warmup + a.n):
        t0 = clock()
        s = _dial(P_HTTPS, a.proxied)
        t = ctx.wrap_socket(s, server_hostname=NAME)
        t.sendall(req)
        _Reader(t).response()
        t.close()
        if i >= a.warmup:
            out.append(clock() - t0)
    return {"ns": out}


def client_bulk(a):
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    runs = []
    for _ in range(a.n):
        s = _dial(P_BULK, a.proxied)
        t0 = time.perf_counter_ns()
        s.sendall(b"bulk %d\n" % a.bytes)
        got = 0
        while got < a.bytes:
            k = s.recv_into(mv)
            if not k:
                raise RuntimeError("bulk: EOF after %d of %d bytes" % (got, a.bytes))
            got += k
        t1 = time.perf_counter_ns()
        s.close()
        runs.append({"bytes": got, "ns": t1 - t0})
    return {"runs": runs}


# -- interception: TLS to P_TLS (a secret is bound to it: the proxy ends the
#    client's TLS, swaps the placeholder, masks the response) and to P_TLSB
#    (allowed, not bound: a blind tunnel)

def _tls_ctx(a):
    """Direct: the bench CA only.  Inside: the default store (agentbox points
    SSL_CERT_FILE at its bundle, which holds the session CA) plus the bench
    CA, for the blind tunnel whose server is not intercepted."""
    if not a.proxied:
        return ssl.create_default_context(cafile=a.ca)
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(cafile=a.ca)
    return ctx


def _key():
    """The real value (direct) or the placeholder (inside)."""
    k = os.environ.get(SECRET_VAR, "")
    if not k:
        raise RuntimeError("$%s is not set" % SECRET_VAR)
    return k.encode()


def _tls_open(a, ctx, port, host=NAME):
    s = _tunnel(port, host) if a.proxied else _connect(("127.0.0.1", port))
    return ctx.wrap_socket(s, server_hostname=host)


def _tls_info(t):
    """Who signed the certificate the client got, and the TLS in use."""
    issuer = ""
    for rdn in (t.getpeercert() or {}).get("issuer", ()):
        for k, v in rdn:
            if k == "commonName":
                issuer = v
    return {"issuer": issuer, "version": t.version(), "cipher": t.cipher()[0]}


def client_ilat(a):
    """Sequential small GETs on one kept-alive TLS connection."""
    t = _tls_open(a, _tls_ctx(a), P_TLS)
    req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\nx-api-key: %s\r\n\r\n" % (
        NAME.encode(), P_TLS, _key())
    r = _Reader(t, allow403=True)
    clock = time.perf_counter_ns
    out, bad = [], 0
    for i in range(a.warmup + a.n):
        t0 = clock()
        t.sendall(req)
        ok = r.response()
        if i >= a.warmup:
            out.append(clock() - t0)
        bad += not ok
    res = {"ns": out, "mismatch": bad, "requests": a.warmup + a.n}
    res.update(_tls_info(t))
    t.close()
    return res


def _tls_get_once(a, ctx, host):
    """Fresh connection (+ CONNECT) + TLS + GET + response + close: ns, ok."""
    req = b"GET / HTTP/1.1\r\nHost: %s:%d\r\nx-api-key: %s\r\n\r\n" % (
        host.encode(), P_TLS, _key())
    t0 = time.perf_counter_ns()
    t = _tls_open(a, ctx, P_TLS, host)
    t.sendall(req)
    ok = _Reader(t, allow403=True).response()
    t1 = time.perf_counter_ns()
    info = _tls_info(t)
    t.close()
    return t1 - t0, ok, info


def client_imint(a):
    """Alternately: a name not used before in this run (n<i>.bench.test:
    the proxy mints a leaf), and bench.test (its leaf cached since the
    first round)."""
    ctx = _tls_ctx(a)
    new, cached, bad, info = [], [], 0, {}
    for i in range(a.warmup + a.n):
        for host, sink in (("n%d.%s" % (i, NAME), new), (NAME, cached)):
            ns, ok, info = _tls_get_once(a, ctx, host)
            bad += not ok
            if i >= a.warmup:
                sink.append(ns)
    res = {"new_ns": new, "cached_ns": cached, "mismatch": bad,
           "requests": 2 * (a.warmup + a.n)}
    res.update(info)
    return res


def client_ibulk(a):
    """a.bytes of response body on a TLS connection (made before the clock
    starts), read with recv_into into a preallocated buffer."""
    ctx = _tls_ctx(a)
    mv = memoryview(bytearray(CHUNK))
    runs, info = [], {}
    for _ in range(a.n):
        t = _tls_open(a, ctx, a.port)
        req = b"GET /bulk/%d HTTP/1.1\r\nHost: %s:%d\r\nx-api-key: %s\r\n\r\n" % (
            a.bytes, NAME.encode(), a.port, _key())
        t0 = time.perf_counter_ns()
        t.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = t.recv(65536)
            if not d:
                raise RuntimeError("ibulk: EOF in the response head")
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("ibulk: %r (403: the server did not get the real key)"
                               % head[:200])
        got = len(rest)
        while got < a.bytes:
            k = t.recv_into(mv)
            if not k:
                raise RuntimeError("ibulk: EOF after %d of %d bytes" % (got, a.bytes))
            got += k
        t1 = time.perf_counter_ns()
        info = _tls_info(t)
        t.close()
        runs.append({"bytes": got, "ns": t1 - t0})
    res = {"runs": runs}
    res.update(info)
    return res


def _wait_file(path, timeout=60):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.005)


def client_memory(a):
    """Stages, each acknowledged with a file in the workspace: 'base' (no
    tunnel yet), 'held' (a.n tunnels open and idle), 'closed'."""
    _raise_nofile(a.n + 256)
    d = a.sync
    open(os.path.join(d, "base"), "w").close()
    _wait_file(os.path.join(d, "go"))
    socks = []
    t0 = time.perf_counter_ns()
    for i in range(a.n):
        s = _tunnel(P_ECHO)
        # a binary byte: the proxy tunnels it at once (printable bytes with
        # no newline yet could still become an HTTP request line: it waits)
        s.sendall(b"\x00")
        got = s.recv(1)
        if got != b"\x00":
            raise RuntimeError("echo through tunnel %d failed: %r" % (i, got))
        socks.append(s)
    t1 = time.perf_counter_ns()
    open(os.path.join(d, "held"), "w").close()
    _wait_file(os.path.join(d, "release"))
    for s in socks:
        s.close()
    open(os.path.join(d, "closed"), "w").close()
    _wait_file(os.path.join(d, "exit"))
    return {"tunnels": a.n, "open_ns": t1 - t0}


CLIENTS = {"latency": client_latency, "https": client_https, "bulk": client_bulk,
           "memory": client_memory, "ilat": client_ilat, "imint": client_imint,
           "ibulk": client_ibulk}


def client_main(a):
    global PROXY_AUTH
    if a.proxied:
        PROXY_AUTH = _proxy_auth()
    # --hold: the bench reads the proxy's CPU time between OUT.start (the
    # client is ready, nothing sent yet) and OUT (the result is written);
    # the client waits for OUT.go and OUT.exit around them.
    if a.hold:
        open(a.out + ".start", "w").close()
        _wait_file(a.out + ".go")
    res = CLIENTS[a.client](a)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.rename(tmp, a.out)
    if a.hold:
        _wait_file(a.out + ".exit")


# ------------------------------------------------------------------ bench --

def cpu_ns(pid):
    """CPU time of a process so far (all its threads), in ns."""
    t = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                t += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return t


def tree_cpu_ns(root, comms):
    """CPU time so far of the processes in root's tree (root included) whose
    name is in comms: their threads, plus the children they have reaped (a
    relay's per-connection forks)."""
    kids, comm, reaped = {}, {}, {}
    tick = 1e9 / os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        pid = int(d)
        comm[pid] = st[st.index("(") + 1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split()
        kids.setdefault(int(f[1]), []).append(pid)
        reaped[pid] = (int(f[13]) + int(f[14])) * tick
    t, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        if comm.get(pid) in comms:
            try:
                t += cpu_ns(pid) + reaped[pid]
            except OSError:
                pass  # it exited: its time is in its parent's
    return t


def stat_sample():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def stat_busy(a, b):
    """Fraction of all CPUs busy between two samples (the whole machine)."""
    return 1 - (b[1] - a[1]) / max(1, b[0] - a[0])


def cpu_busy(seconds):
    s0 = stat_sample()
    time.sleep(seconds)
    return stat_busy(s0, stat_sample())


def perf_start(pid, path):
    """perf record (cycles, no call graphs) of the agentbox process."""
    if not shutil.which("perf"):
        return None
    rec = subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-p", str(pid), "-o", path],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # attached before the client starts
    return rec


def perf_stop(rec):
    if rec is None:
        return
    if rec.poll() is None:
        rec.send_signal(signal.SIGINT)
    try:
        rec.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rec.kill()
        rec.wait()


# where the proxy's cycles go, by symbol
PERF_GROUPS = (
    ("masking scan", lambda dso, sym: "agentbox" in dso and sym.startswith(
        ("ab_scan", "px_scan", "scan_byte", "emit", "cover", "may_start", "is_pair", "feed"))),
    # OpenSSL is linked into agentbox (STATIC_LIBS=1): its symbols, by name
    ("TLS crypto", lambda dso, sym: "libcrypto" in dso or "libssl" in dso or (
        "agentbox" in dso and any(k in sym for k in (
            "aesni", "_aes_", "gcm", "ghash", "chacha", "poly1305", "sha256", "sha512",
            "ossl_", "EVP_", "SSL_", "ssl3_", "tls1", "BIO_", "CRYPTO_")))),
    ("memcpy/memmove/bzero", lambda dso, sym: "libc" in dso and any(
        k in sym for k in ("memcpy", "memmove", "memset", "bzero"))),
    ("malloc/free", lambda dso, sym: "libc" in dso and any(
        k in sym for k in ("malloc", "free", "realloc", "_int_", "tcache", "unlink", "brk"))),
    ("kernel", lambda dso, sym: dso.startswith("[kernel") or dso == "[unknown]"),
    ("agentbox other", lambda dso, sym: "agentbox" in dso),
)


def perf_summary(path):
    p = subprocess.run(["perf", "report", "-i", path, "--stdio", "--no-children", "-q",
                        "--sort", "dso,sym", "--percent-limit", "0.05"],
                       capture_output=True, timeout=120)
    syms, groups = [], {g: 0.0 for g, _ in PERF_GROUPS}
    groups["other"] = 0.0
    for line in p.stdout.decode(errors="replace").splitlines():
        f = line.split(None, 3)
        if len(f) < 4 or not f[0].endswith("%"):
            continue
        pct, dso, sym = float(f[0][:-1]), f[1], f[3].strip()
        syms.append((pct, dso, sym))
        for g, match in PERF_GROUPS:
            if match(dso, sym):
                groups[g] += pct
                break
        else:
            groups["other"] += pct
    return {"groups": groups, "top": syms[:12]}


class Bench:
    def __init__(self, a):
        self.a = a
        self.root = tempfile.mkdtemp(prefix="abproxy.", dir=a.tmpdir)
        os.chmod(self.root, 0o755)
        self.ws = os.path.join(self.root, "ws")
        self.srv = os.path.join(self.root, "srv")
        os.makedirs(self.ws)
        os.makedirs(self.srv, mode=0o700)
        os.chmod(self.ws, 0o777)
        self.script = os.path.join(self.ws, CLIENT_NAME)
        shutil.copy(os.path.abspath(__file__), self.script)
        self.ca = os.path.join(self.ws, "ca.pem")
        self.profile = os.path.join(self.root, "profile.json")
        self.profile_secrets = os.path.join(self.root, "profile-secrets.json")
        self.secret = None
        self.server = None
        self.seq = 0
        self.srt = a.srt  # the srt CLI, or None: not measured
        self.srt_settings = os.path.join(self.root, "srt-settings.json")
        self.srt_hosts = os.path.join(self.root, "srt-hosts")
        self.srt_config = None

    # -- setup
    def setup(self):
        self.make_certs()
        self.secret = SECRET_PREFIX + "".join(
            random.SystemRandom().choice(string.ascii_letters + string.digits)
            for _ in range(40))
        prof = {"version": 1, "extends": ["default"],
                "network": {"allow": ["%s:%d" % (NAME, p) for p in PORTS],
                            "hosts": {NAME: "127.0.0.1"}}}
        with open(self.profile, "w") as f:
            json.dump(prof, f)
        # interception: the secret is bound to bench.test:P_TLS and every
        # name below it on that port; the names the leaf-minting client uses
        # are mapped one by one (network.hosts has no wildcard)
        hosts = {NAME: "127.0.0.1"}
        for i in range(self.a.mint_warmup + self.a.mint_n):
            hosts["n%d.%s" % (i, NAME)] = "127.0.0.1"
        bound = ["%s:%d" % (NAME, P_TLS), "*.%s:%d" % (NAME, P_TLS)]
        prof["network"] = {"allow": ["%s:%d" % (NAME, p) for p in PORTS] + bound[1:],
                           "hosts": hosts, "ca_file": self.ca}
        prof["secrets"] = {SECRET_VAR: {"from": {"env": SECRET_SRC}, "hosts": bound,
                                        "in": ["header:x-api-key"],
                                        "placeholder": {"prefix": SECRET_PREFIX}}}
        with open(self.profile_secrets, "w") as f:
            json.dump(prof, f)
        env = dict(os.environ, **{SECRET_SRC: self.secret, "AB_BENCH_BODY": self.a.ibulk_body})
        self.server = subprocess.Popen([PY, os.path.abspath(__file__), "--serve", self.srv,
                                        "--port-base", str(P_HTTP)], stdout=subprocess.PIPE,
                                       env=env)
        if self.server.stdout.readline().strip() != b"ready":
            raise SystemExit("bench: the servers did not start (ports %s busy?)" % (PORTS,))
        if self.srt:
            self.setup_srt()

    def setup_srt(self):
        """srt's settings (the bench ports by name and as 127.0.0.1, writes to
        the workspace only), the hosts file its proxy resolves bench.test
        with, and one command run in it: an install that cannot run one is
        skipped (or fatal when --srt named it)."""
        allow = ["%s:%d" % (NAME, p) for p in PORTS] + ["127.0.0.1:%d" % p for p in PORTS]
        self.srt_config = {"network": {"allowedDomains": allow, "deniedDomains": []},
                           "filesystem": {"denyRead": [], "allowRead": [],
                                          "allowWrite": [self.ws], "denyWrite": []}}
        with open(self.srt_settings, "w") as f:
            json.dump(self.srt_config, f, indent=1)
        with open("/etc/hosts") as f:
            hosts = f.read()
        with open(self.srt_hosts, "w") as f:
            f.write(hosts.rstrip("\n") + "\n127.0.0.1 %s\n" % NAME)
        os.chmod(self.srt_hosts, 0o644)
        p = subprocess.run(self.srt_cmd(["/bin/true"]), cwd=self.ws, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            why = (p.stdout + p.stderr).decode(errors="replace").strip()[-1000:]
            if self.a.srt_explicit:
                raise SystemExit("bench: srt (%s) cannot run a command:\n%s" % (self.srt, why))
            print("bench: srt (%s) cannot run a command, not measured: %s" % (self.srt, why),
                  file=sys.stderr)
            self.srt = None

    def srt_cmd(self, argv):
        """argv inside srt, itself in a private mount namespace whose
        /etc/hosts maps bench.test to 127.0.0.1 (srt's proxy resolves names
        on the host).  unshare and sh exec: the pid is srt's node process."""
        return ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"', self.srt_hosts,
                self.srt, "-s", self.srt_settings, "--"] + argv

    def make_certs(self):
        """A bench CA (EC P-256) and a leaf it signs for bench.test,
        *.bench.test and 127.0.0.1: the servers present the leaf; the direct
        clients trust the CA (ws/ca.pem), and so does agentbox for the
        intercepted upstreams (network.ca_file)."""
        cakey, key = os.path.join(self.srv, "ca-key.pem"), os.path.join(self.srv, "key.pem")
        cert, csr = os.path.join(self.srv, "cert.pem"), os.path.join(self.srv, "leaf.csr")
        ext = os.path.join(self.srv, "leaf.ext")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid:always\n"
                    "subjectAltName=DNS:%s,DNS:*.%s,IP:127.0.0.1\n" % (NAME, NAME))
        for argv in (["openssl", "req", "-x509"] + ec +
                     ["-keyout", cakey, "-out", self.ca, "-days", "2",
                      "-subj", "/CN=" + BENCH_CA_CN,
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                     ["openssl", "req"] + ec +
                     ["-keyout", key, "-out", csr, "-subj", "/CN=" + NAME],
                     ["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", cakey,
                      "-set_serial", str(random.SystemRandom().getrandbits(63)),
                      "-days", "2", "-extfile", ext, "-out", cert]):
            p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if p.returncode != 0:
                raise SystemExit("bench: %s failed: %s" % (" ".join(argv[:3]),
                                                          p.stderr.decode(errors="replace")))
        os.chmod(self.ca, 0o644)
        os.unlink(cakey)

    def cleanup(self):
        if self.server:
            self.server.terminate()
            self.server.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(self.a.tmpdir)  # only when nothing else is in it
        except OSError:
            pass

    # -- running clients
    def sandbox_cmd(self, argv, secrets=False):
        return [self.a.agentbox, "run", "--no-pty", "-q", "-p",
                self.profile_secrets if secrets else self.profile, "-w", self.ws,
                "--"] + argv

    def env(self, proxied, secrets):
        """With secrets: agentbox reads the value from SECRET_SRC (inside,
        SECRET_VAR holds the placeholder); the direct client gets the value
        itself in SECRET_VAR."""
        if not secrets:
            return None
        e = {k: v for k, v in os.environ.items() if k not in (SECRET_VAR, SECRET_SRC)}
        e[SECRET_SRC if proxied else SECRET_VAR] = self.secret
        return e

    def client(self, mode, proxied, extra, timeout=120, secrets=False, perf=None, srt=False):
        """Run one client (both sides the same way: start, wait for its
        ready file, go, wait for its result); returns its JSON result with
        the proxy's CPU time and the machine's busy fraction over the
        measured window added.  secrets: the interception profile.  perf: a
        file for `perf record` of the agentbox process over the window.
        srt (with proxied): inside srt instead of agentbox."""
        self.seq += 1
        out = "res-%d.json" % self.seq
        path = os.path.join(self.ws, out)
        argv = [self.script, "--hold", "--client", mode, "--out", out,
                "--port-base", str(P_HTTP)] + extra
        if srt:
            cmd = self.srt_cmd(["/usr/bin/python3"] + argv + ["--proxied"])
            proxy_cpu = lambda pid: tree_cpu_ns(pid, SRT_COMMS)
        else:
            cmd = self.sandbox_cmd(["/usr/bin/python3"] + argv + ["--proxied"], secrets) \
                if proxied else [PY] + argv
            proxy_cpu = cpu_ns
        p = subprocess.Popen(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=self.env(proxied, secrets))
        rec = None
        cpu = busy = None
        try:
            if self._wait_client(p, path + ".start", timeout):
                if perf and proxied:
                    rec = perf_start(p.pid, perf)
                c0 = proxy_cpu(p.pid) if proxied else 0
                s0 = stat_sample()
                open(path + ".go", "w").close()
                if self._wait_client(p, path, timeout, 0.01):
                    busy = stat_busy(s0, stat_sample())
                    cpu = proxy_cpu(p.pid) - c0 if proxied else None
                    perf_stop(rec)
                    rec = None
                    open(path + ".exit", "w").close()
            out_txt = p.communicate(timeout=30)[0]
        finally:
            perf_stop(rec)
            if p.poll() is None:
                p.kill()
                p.wait()
        if p.returncode != 0 or not os.path.exists(path):
            raise SystemExit("bench: %s client (%s) failed, exit %s:\n%s" % (
                mode, "srt" if srt else "proxied" if proxied else "direct", p.returncode,
                out_txt.decode(errors="replace")[-3000:]))
        with open(path) as f:
            res = json.load(f)
        for f in (path, path + ".start", path + ".go", path + ".exit"):
            if os.path.exists(f):
                os.unlink(f)
        res["proxy_cpu_ns"], res["busy"] = cpu, busy
        return res

    def abab(self, mode, extra, reps, secrets=False):
        """reps pairs, direct first then proxied in each pair."""
        d, p = [], []
        for _ in range(reps):
            d.append(self.client(mode, False, extra, secrets=secrets))
            p.append(self.client(mode, True, extra, secrets=secrets))
        return d, p

    def interleave(self, mode, extra, reps):
        """reps rounds of direct, agentbox and (when srt is measured) srt."""
        d, p, s = [], [], []
        for _ in range(reps):
            d.append(self.client(mode, False, extra))
            p.append(self.client(mode, True, extra))
            if self.srt:
                s.append(self.client(mode, True, extra, srt=True))
        return d, p, s

    # -- the measurements
    def latency_like(self, mode, n, warmup):
        d, p, s = self.interleave(mode, ["--n", str(n), "--warmup", str(warmup),
                                         "--ca", self.ca], self.a.reps)
        res = self.summarize(d, p, "ns", n + warmup)
        if s:
            res["srt"] = self.summarize(d, s, "ns", n + warmup)
        return res

    def summarize(self, d, p, key, nreq):
        """Medians of all samples of both sides, the added time, p90s, the
        added time per ABAB pair, the proxy's CPU per request."""
        dall = [x for r in d for x in r[key]]
        pall = [x for r in p for x in r[key]]
        dm, pm = statistics.median(dall) / 1e6, statistics.median(pall) / 1e6
        pairs = [(statistics.median(y[key]) - statistics.median(x[key])) / 1e6
                 for x, y in zip(d, p)]
        q = lambda v, f: sorted(v)[int(f * (len(v) - 1))] / 1e6
        cpu = [r["proxy_cpu_ns"] / nreq / 1e3 for r in p if r["proxy_cpu_ns"]]
        return {"n_per_rep": len(d[0][key]), "reps": len(d),
                "proxy_cpu_us_per_req": statistics.median(cpu) if cpu else None,
                "direct_median_ms": dm, "proxied_median_ms": pm,
                "added_ms": pm - dm, "ratio": pm / dm,
                "direct_p90_ms": q(dall, 0.9), "proxied_p90_ms": q(pall, 0.9),
                "added_ms_per_rep": pairs}

    # -- interception (the profile with the secret)
    @staticmethod
    def check_tls(d, p, blind=()):
        """The direct clients and the blind tunnels saw the bench CA's leaf;
        the intercepted ones a leaf of agentbox's session CA; no mismatch."""
        for r in list(d) + list(blind):
            if r.get("issuer") != BENCH_CA_CN:
                raise SystemExit("bench: a direct or blind TLS connection was answered by "
                                 "%r, not the bench server" % r.get("issuer"))
        for r in p:
            if r.get("issuer") in (None, "", BENCH_CA_CN):
                raise SystemExit("bench: the proxied TLS connection was not intercepted "
                                 "(issuer %r)" % r.get("issuer"))
        return {"direct_tls": "%s %s" % (d[0]["version"], d[0]["cipher"]),
                "intercepted_tls": "%s %s" % (p[0]["version"], p[0]["cipher"]),
                "session_ca": p[0]["issuer"]}

    def ilat(self):
        n, w = self.a.ilat_n, 200
        d, p = self.abab("ilat", ["--n", str(n), "--warmup", str(w), "--ca", self.ca],
                         self.a.reps, secrets=True)
        res = self.summarize(d, p, "ns", n + w)
        res.update(self.check_tls(d, p))
        res["mismatch_direct"] = sum(r["mismatch"] for r in d)
        res["mismatch_proxied"] = sum(r["mismatch"] for r in p)
        res["requests"] = sum(r["requests"] for r in d + p)
        return res

    def imint(self):
        n, w = self.a.mint_n, self.a.mint_warmup
        d, p = self.abab("imint", ["--n", str(n), "--warmup", str(w), "--ca", self.ca],
                         self.a.reps, secrets=True)
        res = {"new": self.summarize(d, p, "new_ns", 2 * (n + w)),
               "cached": self.summarize(d, p, "cached_ns", 2 * (n + w))}
        for k in ("new", "cached"):
            res[k]["proxy_cpu_us_per_req"] = None  # both kinds in one window: see below
        cpu = [r["proxy_cpu_ns"] / (2 * (n + w)) / 1e3 for r in p if r["proxy_cpu_ns"]]
        res["proxy_cpu_us_per_conn"] = statistics.median(cpu) if cpu else None
        # what the mint itself adds: new name vs cached leaf, per pair
        res["mint_ms_per_rep"] = [(statistics.median(y["new_ns"]) -
                                   statistics.median(y["cached_ns"])) / 1e6 for y in p]
        res["mint_ms"] = statistics.median(res["mint_ms_per_rep"])
        res.update(self.check_tls(d, p))
        res["mismatch_direct"] = sum(r["mismatch"] for r in d)
        res["mismatch_proxied"] = sum(r["mismatch"] for r in p)
        res["requests"] = sum(r["requests"] for r in d + p)
        return res

    def ibulk(self):
        """Python client: direct TLS, intercepted, blind tunnel (the same
        server on the unbound port), alternated."""
        n = self.a.ibulk_bytes
        ex = lambda port: ["--n", "1", "--bytes", str(n), "--port", str(port), "--ca", self.ca]
        arms = {"direct": [], "intercepted": [], "blind": []}
        for i in range(self.a.bulk_reps):
            arms["direct"].append(self.client("ibulk", False, ex(P_TLS), secrets=True))
            arms["intercepted"].append(self.client(
                "ibulk", True, ex(P_TLS), secrets=True,
                perf=self.perf_file("intercepted") if i == 0 else None))
            arms["blind"].append(self.client(
                "ibulk", True, ex(P_TLSB), secrets=True,
                perf=self.perf_file("blind") if i == 0 else None))
        rate = lambda r: r["runs"][0]["bytes"] / (r["runs"][0]["ns"] / 1e9) / 1e9
        rates = {k: [rate(x) for x in v] for k, v in arms.items()}
        med = {k: statistics.median(v) for k, v in rates.items()}
        cpu = lambda k: statistics.median(r["proxy_cpu_ns"] / 1e9 / (n / 1e9)
                                          for r in arms[k])
        res = {"bytes": n, "reps": self.a.bulk_reps, "client": "python ssl recv_into",
               "direct_gbps": med["direct"], "proxied_gbps": med["intercepted"],
               "blind_gbps": med["blind"],
               "ratio": med["intercepted"] / med["direct"],
               "blind_ratio": med["blind"] / med["direct"],
               "ratio_per_rep": [y / x for x, y in zip(rates["direct"], rates["intercepted"])],
               "blind_ratio_per_rep": [y / x for x, y in zip(rates["direct"], rates["blind"])],
               "proxy_cpu_s_per_gb": cpu("intercepted"), "blind_cpu_s_per_gb": cpu("blind"),
               "direct_busy": statistics.median(x["busy"] for x in arms["direct"]),
               "proxied_busy": statistics.median(x["busy"] for x in arms["intercepted"]),
               "all": rates}
        res.update(self.check_tls(arms["direct"], arms["intercepted"], arms["blind"]))
        for k in ("intercepted", "blind"):
            f = self.perf_file(k)
            if f and os.path.exists(f):
                res["perf_" + k] = perf_summary(f)
        return res

    def perf_file(self, what):
        return os.path.join(self.root, "perf-%s.data" % what) if self.a.perf else None

    def icurl(self):
        """curl as the client on every side (its TLS reads are C, not Python):
        direct (--resolve, the bench CA), intercepted (the bundle agentbox
        binds inside), blind tunnel (the bench CA)."""
        n = self.a.ibulk_bytes
        fmt = ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{speed_download} %{size_download}"]
        url = lambda port: "https://%s:%d/bulk/%d" % (NAME, port, n)
        dcmd = (["curl", "--noproxy", "*", "--cacert", self.ca, "--resolve",
                 "%s:%d:127.0.0.1" % (NAME, P_TLS), "-H", "x-api-key: " + self.secret] +
                fmt + [url(P_TLS)])
        inside = lambda port, extra: self.sandbox_cmd(
            ["/bin/sh", "-c", 'exec /usr/bin/curl "$@" -H "x-api-key: $%s"' % SECRET_VAR, "sh",
             "-x", "http://%s:%d" % PROXY] + extra + fmt + [url(port)], secrets=True)
        cmds = {"direct": (dcmd, self.env(False, True)),
                "intercepted": (inside(P_TLS, []), self.env(True, True)),
                "blind": (inside(P_TLSB, ["--cacert", self.ca]), self.env(True, True))}
        rates = {k: [] for k in cmds}
        for _ in range(self.a.bulk_reps):
            for k, (cmd, env) in cmds.items():
                p = subprocess.run(cmd, cwd=self.ws, stdin=subprocess.DEVNULL, env=env,
                                   capture_output=True, timeout=300)
                f = p.stdout.split()
                if p.returncode != 0 or len(f) < 3 or f[0] != b"200" or int(float(f[2])) != n:
                    raise SystemExit("bench: curl (%s) failed (exit %d): %s %s" % (
                        k, p.returncode, p.stdout[-300:], p.stderr[-1000:]))
                rates[k].append(float(f[1]) / 1e9)
        med = {k: statistics.median(v) for k, v in rates.items()}
        return {"bytes": n, "reps": self.a.bulk_reps, "client": "curl -o /dev/null",
                "direct_gbps": med["direct"], "proxied_gbps": med["intercepted"],
                "blind_gbps": med["blind"],
                "ratio": med["intercepted"] / med["direct"],
                "blind_ratio": med["blind"] / med["direct"],
                "ratio_per_rep": [y / x for x, y in zip(rates["direct"], rates["intercepted"])],
                "all": rates}

    def bulk(self):
        n = self.a.bulk_bytes
        d, p, s = self.interleave("bulk", ["--n", "1", "--bytes", str(n)], self.a.bulk_reps)
        rate = lambda r: r["runs"][0]["bytes"] / (r["runs"][0]["ns"] / 1e9) / 1e9
        dr, pr = [rate(x) for x in d], [rate(x) for x in p]
        cpu = lambda arm: [r["proxy_cpu_ns"] / 1e9 / (n / 1e9) for r in arm if r["proxy_cpu_ns"]]
        res = {"bytes": n, "reps": self.a.bulk_reps, "client": "python recv_into",
               "direct_busy": statistics.median(x["busy"] for x in d),
               "proxied_busy": statistics.median(x["busy"] for x in p),
               "proxy_cpu_s_per_gb": statistics.median(cpu(p)) if cpu(p) else None,
               "direct_gbps": statistics.median(dr), "proxied_gbps": statistics.median(pr),
               "ratio": statistics.median(pr) / statistics.median(dr),
               "ratio_per_rep": [y / x for x, y in zip(dr, pr)],
               "direct_all": dr, "proxied_all": pr}
        if s:
            sr = [rate(x) for x in s]
            res["srt"] = {"proxied_busy": statistics.median(x["busy"] for x in s),
                          "proxy_cpu_s_per_gb": statistics.median(cpu(s)) if cpu(s) else None,
                          "proxied_gbps": statistics.median(sr),
                          "ratio": statistics.median(sr) / statistics.median(dr),
                          "ratio_per_rep": [y / x for x, y in zip(dr, sr)],
                          "proxied_all": sr}
        return res

    def curl_bulk(self):
        n = self.a.curl_bytes
        fmt = ["-sS", "-o", "/dev/null", "-w", "%{speed_download} %{size_download}"]
        dcmd = ["curl", "--noproxy", "*"] + fmt + ["http://127.0.0.1:%d/%d" % (P_HBULK, n)]
        pcmd = self.sandbox_cmd(["/usr/bin/curl", "-x", "http://%s:%d" % PROXY] + fmt +
                                ["http://%s:%d/%d" % (NAME, P_HBULK, n)])
        dr, pr = [], []

        def one(cmd, sink):
            p = subprocess.run(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=120)
            speed, size = p.stdout.split()[:2] if p.returncode == 0 else (b"0", b"0")
            if p.returncode != 0 or int(float(size)) != n:
                raise SystemExit("bench: curl failed (exit %d): %s %s" % (
                    p.returncode, p.stdout[-300:], p.stderr[-1000:]))
            sink.append(float(speed) / 1e9)
        for _ in range(self.a.bulk_reps):
            one(dcmd, dr)
            one(pcmd, pr)
        return {"bytes": n, "reps": self.a.bulk_reps,
                "client": "curl, absolute-form through the proxy (HTTP forwarding path)",
                "direct_gbps": statistics.median(dr), "proxied_gbps": statistics.median(pr),
                "ratio": statistics.median(pr) / statistics.median(dr),
                "direct_all": dr, "proxied_all": pr}

    @staticmethod
    def proc_stats(pid):
        v = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    v[k] = int(rest.split()[0]) / 1024
        return {"rss_mb": v.get("VmRSS"), "hwm_mb": v.get("VmHWM"),
                "fds": len(os.listdir("/proc/%d/fd" % pid))}

    def memory(self):
        n = self.a.tunnels
        sync = os.path.join(self.ws, "sync")
        os.makedirs(sync)
        os.chmod(sync, 0o777)
        out = os.path.join(self.ws, "mem.json")
        cmd = self.sandbox_cmd(["/usr/bin/python3", self.script, "--client", "memory",
                                "--port-base", str(P_HTTP),
                                "--proxied", "--n", str(n), "--out", "mem.json",
                                "--sync", sync])
        p = subprocess.Popen(cmd, cwd=self.ws, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            exe = os.readlink("/proc/%d/exe" % p.pid)
            if os.path.basename(exe) != os.path.basename(self.a.agentbox):
                raise SystemExit("bench: pid %d is %s, not agentbox" % (p.pid, exe))
            stages = {}
            for stage, nxt in (("base", "go"), ("held", "release"), ("closed", "exit")):
                if not self._wait_client(p, os.path.join(sync, stage)):
                    break
                if stage != "base":
                    time.sleep(0.3)  # let the proxy finish closing
                stages[stage] = self.proc_stats(p.pid)
                open(os.path.join(sync, nxt), "w").close()
            out_txt = p.communicate(timeout=60)[0]
            if p.returncode != 0 or not os.path.exists(out) or len(stages) != 3:
                raise SystemExit("bench: memory client failed, exit %d:\n%s"
                                 % (p.returncode, out_txt.decode(errors="replace")[-3000:]))
            with open(out) as f:
                res = json.load(f)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        b, h = stages["base"], stages["held"]
        return {"tunnels": n, "pid_exe": exe,
                "open_all_s": res["open_ns"] / 1e9,
                "base_rss_mb": b["rss_mb"], "held_rss_mb": h["rss_mb"],
                "closed_rss_mb": stages["closed"]["rss_mb"],
                "peak_rss_mb": stages["closed"]["hwm_mb"],
                "per_tunnel_kb": (h["rss_mb"] - b["rss_mb"]) * 1024 / n,
                "base_fds": b["fds"], "held_fds": h["fds"], "closed_fds": stages["closed"]["fds"]}

    @staticmethod
    def _wait_client(p, path, timeout=120, poll=0.002):
        """Wait for a sync file; False if the client exited first."""
        end = time.monotonic() + timeout
        while not os.path.exists(path):
            if p.poll() is not None:
                return False
            if time.monotonic() > end:
                raise SystemExit("bench: a client timed out")
            time.sleep(poll)
        return True


def report(r):
    ok = lambda c: "ok" if c else "MISSED"
    rows = []
    L, H = r.get("latency"), r.get("https")
    srt_row = lambda x: ("  the same in srt", "", "%.3f ms" % x["proxied_median_ms"],
                         "+%.3f ms (x%.2f)" % (x["added_ms"], x["ratio"]), "(srt, reference)")
    if L:
        rows.append(("HTTP keep-alive GET, median", "%.3f ms" % L["direct_median_ms"],
                     "%.3f ms" % L["proxied_median_ms"],
                     "+%.3f ms (x%.2f)" % (L["added_ms"], L["ratio"]),
                     "<= +0.3 ms: " + ok(L["added_ms"] <= 0.3)))
        if "srt" in L:
            rows.append(srt_row(L["srt"]))
    if H:
        rows.append(("HTTPS fresh conn+TLS+GET, median", "%.3f ms" % H["direct_median_ms"],
                     "%.3f ms" % H["proxied_median_ms"],
                     "+%.3f ms (x%.2f)" % (H["added_ms"], H["ratio"]),
                     "<= +0.3 ms: " + ok(H["added_ms"] <= 0.3)))
        if "srt" in H:
            rows.append(srt_row(H["srt"]))
    B = r.get("bulk")
    if B:
        rows.append(("CONNECT bulk %d MiB (python)" % (B["bytes"] >> 20),
                     "%.2f GB/s" % B["direct_gbps"], "%.2f GB/s" % B["proxied_gbps"],
                     "x%.2f" % B["ratio"], ">= x0.9: " + ok(B["ratio"] >= 0.9)))
        if "srt" in B:
            rows.append(("  the same in srt", "", "%.2f GB/s" % B["srt"]["proxied_gbps"],
                         "x%.2f" % B["srt"]["ratio"], "(srt, reference)"))
    C = r.get("curl_bulk")
    if C:
        rows.append(("HTTP forward bulk %d MiB (curl)" % (C["bytes"] >> 20),
                     "%.2f GB/s" % C["direct_gbps"], "%.2f GB/s" % C["proxied_gbps"],
                     "x%.2f" % C["ratio"], "(no target)"))
    M = r.get("memory")
    if M:
        rows.append(("agentbox RSS, %d idle tunnels" % M["tunnels"],
                     "%.1f MB (0 tunnels)" % M["base_rss_mb"], "%.1f MB" % M["held_rss_mb"],
                     "%.1f KB/tunnel" % M["per_tunnel_kb"],
                     "<= 30 MB: " + ok(M["held_rss_mb"] <= 30)))
        rows.append(("agentbox fds / after close", "%d" % M["base_fds"], "%d" % M["held_fds"],
                     "%d fds, %.1f MB" % (M["closed_fds"], M["closed_rss_mb"]),
                     "back: " + ok(M["closed_fds"] == M["base_fds"])))
    IL, IM, IB, IC = r.get("ilat"), r.get("imint"), r.get("ibulk"), r.get("icurl")
    lat_row = lambda name, x, lim: (name, "%.3f ms" % x["direct_median_ms"],
                                    "%.3f ms" % x["proxied_median_ms"],
                                    "+%.3f ms (x%.2f)" % (x["added_ms"], x["ratio"]),
                                    ("<= +%g ms: " % lim + ok(x["added_ms"] <= lim))
                                    if lim else "(no target)")
    if IL:
        rows.append(lat_row("intercepted TLS keep-alive GET, median", IL, 1))
    if IM:
        rows.append(lat_row("intercepted conn+TLS+GET, new name", IM["new"], 5))
        rows.append(lat_row("intercepted conn+TLS+GET, cached leaf", IM["cached"], 5))
    for X, what in ((IB, "python"), (IC, "curl")):
        if X:
            rows.append(("intercepted bulk %d MiB (%s)" % (X["bytes"] >> 20, what),
                         "%.2f GB/s" % X["direct_gbps"], "%.2f GB/s" % X["proxied_gbps"],
                         "x%.2f" % X["ratio"], ">= x0.5: " + ok(X["ratio"] >= 0.5)))
            rows.append(("blind TLS tunnel bulk %d MiB (%s)" % (X["bytes"] >> 20, what),
                         "%.2f GB/s" % X["direct_gbps"], "%.2f GB/s" % X["blind_gbps"],
                         "x%.2f" % X["blind_ratio"], "(reference)"))
    mism = [x for x in (IL, IM) if x]
    if mism:
        bad = sum(x["mismatch_proxied"] + x["mismatch_direct"] for x in mism)
        rows.append(("key mismatches at the server",
                     "%d" % sum(x["mismatch_direct"] for x in mism),
                     "%d" % sum(x["mismatch_proxied"] for x in mism),
                     "of %d requests" % sum(x["requests"] for x in mism), "0: " + ok(bad == 0)))
    hdr = ("measure", "direct", "proxied", "added/ratio", "target")
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(5)]
    line = lambda x: "  ".join(str(v).ljust(w[i]) for i, v in enumerate(x)).rstrip()
    print(line(hdr))
    print("  ".join("-" * k for k in w))
    for x in rows:
        print(line(x))
    if L:
        print("latency added per rep (ms): " +
              " ".join("%.3f" % v for v in L["added_ms_per_rep"]) +
              "; p90 direct %.3f proxied %.3f" % (L["direct_p90_ms"], L["proxied_p90_ms"]))
    if H:
        print("https added per rep (ms):   " +
              " ".join("%.3f" % v for v in H["added_ms_per_rep"]))
    if B:
        print("bulk ratio per rep:         " + " ".join("%.2f" % v for v in B["ratio_per_rep"]))
    for X, what in ((L, "latency added per rep (ms):"), (H, "https added per rep (ms):  ")):
        if X and "srt" in X:
            print("srt " + what + " " + " ".join("%.3f" % v for v in X["srt"]["added_ms_per_rep"]))
    if B and "srt" in B:
        print("srt bulk ratio per rep:     " +
              " ".join("%.2f" % v for v in B["srt"]["ratio_per_rep"]))
    if L and L["proxy_cpu_us_per_req"] is not None:
        print("proxy CPU: %.1f us per kept-alive request" % L["proxy_cpu_us_per_req"] +
              (", %.1f us per https connection" % H["proxy_cpu_us_per_req"]
               if H and H["proxy_cpu_us_per_req"] is not None else "") +
              (", %.2f s per GB tunnelled" % B["proxy_cpu_s_per_gb"]
               if B and B["proxy_cpu_s_per_gb"] is not None else ""))
    S = [x["srt"] for x in (L, H, B) if x and "srt" in x]
    if S:
        sc = lambda x, k: x["srt"][k] if x and "srt" in x and x["srt"][k] is not None else None
        parts = [("%.1f us per kept-alive request", sc(L, "proxy_cpu_us_per_req")),
                 ("%.1f us per https connection", sc(H, "proxy_cpu_us_per_req")),
                 ("%.2f s per GB tunnelled", sc(B, "proxy_cpu_s_per_gb"))]
        print("srt proxy CPU (node + socat): " +
              ", ".join(f % v for f, v in parts if v is not None))
    if B:
        print("machine CPU busy during bulk: direct %.0f%%, proxied %.0f%% of %d CPUs" % (
            100 * B["direct_busy"], 100 * B["proxied_busy"], r["machine"]["cpus"]) +
              ("; srt %.0f%%" % (100 * B["srt"]["proxied_busy"]) if "srt" in B else ""))
    if M:
        print("%d tunnels opened in %.2f s; agentbox peak RSS %.1f MB" % (
            M["tunnels"], M["open_all_s"], M["peak_rss_mb"]))
    if IL:
        print("intercepted keep-alive added per rep (ms): " +
              " ".join("%.3f" % v for v in IL["added_ms_per_rep"]) +
              "; p90 direct %.3f proxied %.3f; proxy CPU %.1f us per request" % (
                  IL["direct_p90_ms"], IL["proxied_p90_ms"], IL["proxy_cpu_us_per_req"] or 0))
    if IM:
        print("intercepted new name added per rep (ms):   " +
              " ".join("%.3f" % v for v in IM["new"]["added_ms_per_rep"]))
        print("intercepted cached leaf added per rep (ms): " +
              " ".join("%.3f" % v for v in IM["cached"]["added_ms_per_rep"]))
        print("new name minus cached leaf through the proxy (the mint), per rep (ms): " +
              " ".join("%.3f" % v for v in IM["mint_ms_per_rep"]) +
              "; proxy CPU %.0f us per connection (both kinds)" % (
                  IM["proxy_cpu_us_per_conn"] or 0))
    for X, what in ((IB, "python"), (IC, "curl")):
        if X:
            print("intercepted bulk ratio per rep (%s): " % what +
                  " ".join("%.2f" % v for v in X["ratio_per_rep"]) +
                  "; direct GB/s " + " ".join("%.2f" % v for v in X["all"]["direct"]))
    if IB:
        print("proxy CPU per GB: intercepted %.2f s, blind tunnel %.2f s; machine busy: "
              "direct %.0f%%, intercepted %.0f%%" % (
                  IB["proxy_cpu_s_per_gb"], IB["blind_cpu_s_per_gb"],
                  100 * IB["direct_busy"], 100 * IB["proxied_busy"]))
        for k in ("intercepted", "blind"):
            P = IB.get("perf_" + k)
            if P:
                print("perf, %s bulk: " % k + ", ".join(
                    "%s %.1f%%" % (g, v) for g, v in
                    sorted(P["groups"].items(), key=lambda x: -x[1]) if v >= 0.5))
                for pct, dso, sym in P["top"][:8]:
                    print("    %5.1f%%  %-22s %s" % (pct, dso[:22], sym[:60]))
    for X in (IL, IM, IB):
        if X:
            print("TLS: direct %s; intercepted %s (leaf from %r)" % (
                X["direct_tls"], X["intercepted_tls"], X["session_ca"]))
            break
    if r.get("srt"):
        print("srt: %s (%s)" % (r["srt"]["path"], r["srt"]["version"]) if r["srt"].get("path")
              else "srt: not measured (%s)" % r["srt"]["skipped"])
    print("machine: %d CPUs, %.0f%% busy before the bench, %.0f%% after" % (
        r["machine"]["cpus"], 100 * r["busy_before"], 100 * r["busy_after"]))


def find_srt(a, only):
    """Sets a.srt (the srt CLI to measure, or None) and a.srt_explicit;
    returns why srt is not measured, or None."""
    a.srt_explicit = a.srt not in (None, "none")
    if only is not None and not only & {"latency", "https", "bulk"}:
        a.srt = None
        return None
    if a.srt == "none":
        a.srt = None
        return "--srt none"
    if a.srt is None:
        if not os.access(SRT_DEFAULT, os.X_OK):
            print("bench: srt not measured: %s is not there (npm install --prefix "
                  "/var/cache/agentbox-bench/npm @anthropic-ai/sandbox-runtime, with socat, "
                  "ripgrep and bubblewrap; or --srt PATH)" % SRT_DEFAULT, file=sys.stderr)
            return "not installed at " + SRT_DEFAULT
        a.srt = SRT_DEFAULT
    if not os.access(a.srt, os.X_OK):
        raise SystemExit("bench: --srt: not executable: %s" % a.srt)
    a.srt = os.path.abspath(a.srt)
    return None


def bench_main(a):
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root")
    if not os.access(a.agentbox, os.X_OK):
        raise SystemExit("bench: not executable: %s (run make first)" % a.agentbox)
    a.agentbox = os.path.abspath(a.agentbox)
    os.makedirs(a.tmpdir, exist_ok=True)
    only = set(a.only.split(",")) if a.only else None
    r = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release}}
    srt_why = find_srt(a, only)
    b = Bench(a)
    r["busy_before"] = cpu_busy(1.0)
    if r["busy_before"] > 0.1:
        print("bench: warning: the machine is %.0f%% busy before the bench starts: "
              "figures will be noisy (bulk throughput most)" % (100 * r["busy_before"]),
              file=sys.stderr)
    t0 = time.monotonic()
    try:
        b.setup()
        if a.srt and not b.srt:
            srt_why = "it could not run a command (see above)"
        if b.srt:
            v = subprocess.run([b.srt, "--version"], capture_output=True, timeout=30)
            r["srt"] = {"path": b.srt, "version": v.stdout.decode(errors="replace").strip(),
                        "settings": b.srt_config}
        elif srt_why:
            r["srt"] = {"skipped": srt_why}
        if only and "interception" in only:
            only |= set(INTERCEPTION)
        want = lambda k: only is None or k in only
        if want("latency"):
            r["latency"] = b.latency_like("latency", a.lat_n, 300)
        if want("https"):
            r["https"] = b.latency_like("https", a.https_n, 20)
        if want("bulk"):
            r["bulk"] = b.bulk()
        if want("curl"):
            r["curl_bulk"] = b.curl_bulk()
        if want("memory"):
            r["memory"] = b.memory()
        if want("ilat"):
            r["ilat"] = b.ilat()
        if want("imint"):
            r["imint"] = b.imint()
        if want("ibulk"):
            r["ibulk"] = b.ibulk()
        if want("icurl"):
            r["icurl"] = b.icurl()
    finally:
        b.cleanup()
    r["runtime_s"] = time.monotonic() - t0
    r["busy_after"] = cpu_busy(0.5)
    report(r)
    print("runtime %.0f s" % r["runtime_s"])
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description="agentbox egress proxy benchmark")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--agentbox", default=os.path.join(here, "..", "build", "agentbox"))
    ap.add_argument("--reps", type=int, default=7, help="ABAB pairs (latency, https, ilat, imint)")
    ap.add_argument("--bulk-reps", type=int, default=5,
                    help="pairs (bulk, curl), triples (ibulk, icurl)")
    ap.add_argument("--lat-n", type=int, default=3000, help="requests per latency run")
    ap.add_argument("--https-n", type=int, default=300, help="requests per https run")
    ap.add_argument("--bulk-bytes", type=int, default=2 << 30)
    ap.add_argument("--curl-bytes", type=int, default=1 << 30)
    ap.add_argument("--tunnels", type=int, default=2000)
    ap.add_argument("--ilat-n", type=int, default=2000,
                    help="requests per intercepted keep-alive run")
    ap.add_argument("--mint-n", type=int, default=50,
                    help="new names (leaves minted) per intercepted first-request run")
    ap.add_argument("--mint-warmup", type=int, default=5)
    ap.add_argument("--ibulk-bytes", type=int, default=1 << 30)
    ap.add_argument("--ibulk-body", choices=("text", "x"), default="text",
                    help="intercepted bulk body: base64 text lines, or 'x' repeated")
    ap.add_argument("--perf", action="store_true",
                    help="perf record the proxy during the first intercepted and blind "
                         "bulk runs and say where its cycles go")
    ap.add_argument("--only", help="comma list: latency,https,bulk,curl,memory,"
                    "interception (= ilat,imint,ibulk,icurl)")
    ap.add_argument("--port-base", type=int, default=PORT_BASE,
                    help="first of the %d loopback ports the servers use" % NPORTS)
    ap.add_argument("--tmpdir", default="/var/lib/agentbox-bench",
                    help="parent of the scratch dir (the workspace must not be /tmp)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--srt", help="the srt CLI of Anthropic's sandbox runtime: latency, https "
                    "and bulk also run inside it (default: %s when installed; none: skip)"
                    % SRT_DEFAULT)
    # internal
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--client", choices=sorted(CLIENTS), help=argparse.SUPPRESS)
    ap.add_argument("--proxied", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--bytes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ca", help=argparse.SUPPRESS)
    ap.add_argument("--sync", help=argparse.SUPPRESS)
    ap.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    set_ports(a.port_base)
    if a.serve:
        serve(a.serve)
    elif a.client:
        client_main(a)
    else:
        bench_main(a)


if __name__ == "__main__":
    main()
