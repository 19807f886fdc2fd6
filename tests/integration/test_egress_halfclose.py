# SPDX-License-Identifier: MIT
"""Egress proxy: a client that half-closes.

A client may send its request and at once shut down its write side
(shutdown(SHUT_WR), a TCP FIN) and then read the answer, as HTTP/1.1
allows.  The proxy must treat that FIN as the end of what the client sends,
not as an abort: explicit requests, requests inside a CONNECT tunnel and
opaque tunnels are all answered (intercepted connections too, whether the
client ends with a close_notify or a bare FIN), refusals still arrive, and
every one of them leaves its audit line, including a tunnel that closed
before carrying any byte.  No pause between the request and the FIN anywhere here: that is
the case that went unanswered.  Every other connection corks its socket
(TCP_CORK), so that the request and the FIN travel in one segment and the
proxy finds the FIN with the request whatever the scheduling; the others
send as clients do (write, then shutdown).
"""

import test_egress as base
from upstream import INNER_LIB, Egress, inner_json, read_log

requests_in = base.requests_in
fmt_log = base.fmt_log
log_path = base.log_path

N = 30

HALFCLOSE_PY = INNER_LIB + r'''
CORK = [False]

def halfclosed(data, timeout=5.0, addr=PROXY):
    """Send data, shut down the write side at once, read until EOF.  With
    CORK[0], data and the FIN leave in one segment (TCP_CORK holds the data
    until the shutdown): the FIN is surely there when the proxy first reads.
    -> (bytes read, how the reading ended)"""
    s = socket.create_connection(addr, timeout=timeout)
    got = b""
    state = "eof"
    try:
        if CORK[0]:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                state = "timeout"
                break
            s.settimeout(left)
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        state = "timeout"
    except OSError as e:
        state = ename(e)
    finally:
        s.close()
    return got, state

def http_answer(raw):
    """(status, JSON body or None) of the one HTTP response in raw."""
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b"\r\n")[0].split()[1])
    except (IndexError, ValueError):
        return None, None
    try:
        return status, json.loads(body.decode())
    except ValueError:
        return status, None

ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
out = {}
for case in CFG["cases"]:
    answered, fails = 0, []
    for i in range(CFG["n"]):
        CORK[0] = i % 2 == 0
        if case == "explicit":
            path = "/hc-%d" % i
            raw, state = halfclosed(("GET http://http.test%s HTTP/1.1\r\nHost: http.test\r\n\r\n"
                                     % path).encode())
            st, js = http_answer(raw)
            ok = st == 200 and js is not None and js.get("path") == path
        elif case == "tunnel_http":
            path = "/hct-%d" % i
            raw, state = halfclosed(("CONNECT http.test:80 HTTP/1.1\r\nHost: http.test:80\r\n\r\n"
                                     "GET %s HTTP/1.1\r\nHost: http.test\r\n\r\n" % path).encode())
            st, js = http_answer(raw[len(ESTABLISHED):])
            ok = raw.startswith(ESTABLISHED) and st == 200 and js is not None and \
                js.get("path") == path
        elif case == "transparent_http":   # the synthetic address of http.test, port 80
            path = "/hctp-%d" % i
            raw, state = halfclosed(("GET %s HTTP/1.1\r\nHost: http.test\r\n\r\n" % path).encode(),
                                    addr=(socket.gethostbyname("http.test"), 80))
            st, js = http_answer(raw)
            ok = st == 200 and js is not None and js.get("path") == path
        elif case == "tunnel_echo":
            payload = ("half-closed tunnel %d" % i).encode()
            raw, state = halfclosed(("CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test:%d\r\n\r\n"
                                     % (CFG["echo"], CFG["echo"])).encode() + payload)
            ok = raw == ESTABLISHED + payload
        elif case == "tunnel_empty":   # CONNECT, then the FIN: no byte through the tunnel
            raw, state = halfclosed(("CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test:%d\r\n\r\n"
                                     % (CFG["echo"], CFG["echo"])).encode())
            ok = raw == ESTABLISHED
        elif case == "tunnel_closed":  # CONNECT, the 200 read, then close(): no byte either
            s, r = connect("echo.test:%d" % CFG["echo"])
            if s is not None:
                s.close()
            raw, state, ok = b"", "eof" if s is not None else r.get("state"), s is not None
        ok = ok and state == "eof"
        answered += ok
        if not ok and len(fails) < 3:
            fails.append([state, raw[:300].decode("latin-1")])
    out[case] = {"answered": answered, "fails": fails}
CORK[0] = True
for name, data in CFG["refusals"]:
    raw, state = halfclosed(data.encode("latin-1"))
    if raw.startswith(ESTABLISHED):  # a refusal inside a tunnel
        raw = raw[len(ESTABLISHED):]
    st, _ = http_answer(raw)
    out[name] = {"status": st, "state": state, "text": raw[-300:].decode("latin-1")}
print(json.dumps(out))
'''


def _run(ctx, cases=(), refusals=(), n=N):
    eg = Egress(ctx, echo=True)
    prof = eg.write_profile(allow=["http.test", "echo.test:%d" % eg.echo.port])
    log = log_path(ctx)
    out, _ = inner_json(ctx, HALFCLOSE_PY, {"cases": list(cases), "refusals": list(refusals),
                                            "n": n, "echo": eg.echo.port},
                        prof, extra_args=["--log", log], timeout=120)
    entries, _ = read_log(log, ctx)
    return eg, out, requests_in(entries), entries


def _lines(reqs, **kw):
    return [e for e in reqs if all(e.get(k) == v for k, v in kw.items())]


def test_halfclosed_request_answered(ctx):
    """GET http://... then shutdown(SHUT_WR) at once, 30 times: every request
    reaches the upstream, every client gets the upstream's answer (then EOF),
    and every request has its audit line."""
    eg, out, reqs, entries = _run(ctx, cases=["explicit"])
    r = out["explicit"]
    assert r["answered"] == N, "%d of %d half-closed requests answered: %s\n%s" % (
        r["answered"], N, r["fails"], eg.summary())
    assert eg.http.count("/hc-") == N, eg.summary()
    for i in range(N):
        m = _lines(reqs, method="GET", host="http.test", path="/hc-%d" % i)
        assert len(m) == 1 and m[0]["decision"] == "allow" and m[0]["status"] == 200, \
            "audit line of /hc-%d: %s\n%s" % (i, m, fmt_log(entries))


def test_halfclosed_tunnels_answered(ctx):
    """CONNECT followed at once by the tunnel's bytes and the FIN, 30 times
    each: plain HTTP inside the tunnel (and on the transparent port 80) gets
    its response, an opaque tunnel to an echo server gets its bytes back; the
    half-close reaches the echo server (it closes on EOF, so the client's
    read ends); all logged."""
    cases = ["tunnel_http", "transparent_http", "tunnel_echo"]
    eg, out, reqs, entries = _run(ctx, cases=cases)
    assert all(out[k]["answered"] == N for k in cases), \
        "of %d half-closed tunnels answered: %s\n%s" % (N, out, eg.summary())
    for prefix, side in (("/hct-", "explicit"), ("/hctp-", "transparent")):
        assert eg.http.count(prefix) == N, eg.summary()
        for i in range(N):
            m = _lines(reqs, method="GET", host="http.test", path="%s%d" % (prefix, i))
            assert len(m) == 1 and m[0]["status"] == 200 and m[0]["side"] == side, \
                "audit line of %s%d: %s\n%s" % (prefix, i, m, fmt_log(entries))
    echo = _lines(reqs, method="CONNECT", host="echo.test", port=eg.echo.port)
    assert len(echo) == N, "%d CONNECT lines for %d tunnels:\n%s" % (len(echo), N,
                                                                     fmt_log(entries))
    for e in echo:
        assert e["decision"] == "allow" and e["status"] == 200 and \
            e["bytes_up"] == e["bytes_down"] > 0, e


def test_tunnel_closed_before_bytes_logged(ctx):
    """A tunnel that ends before any byte went through (the client's FIN right
    after CONNECT, or close() after reading the 200) still leaves its audit
    line; the half-closed one is answered and then ends."""
    n = 5
    eg, out, reqs, entries = _run(ctx, cases=["tunnel_empty", "tunnel_closed"], n=n)
    assert out["tunnel_empty"]["answered"] == out["tunnel_closed"]["answered"] == n, out
    echo = _lines(reqs, method="CONNECT", host="echo.test", port=eg.echo.port)
    assert len(echo) == 2 * n, "%d CONNECT lines for %d tunnels closed before any byte:\n%s" % (
        len(echo), 2 * n, fmt_log(entries))
    for e in echo:
        assert e["decision"] == "allow" and e["status"] == 200 and \
            e["bytes_up"] == 0 and e["bytes_down"] == 0, e


REFUSALS = [
    ("denied_get", "GET http://evil.test/hc-denied HTTP/1.1\r\nHost: evil.test\r\n\r\n"),
    ("denied_connect", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n"),
    ("garbage", "HELLO THERE\r\n\r\n"),
    ("incomplete_head", "GET http://http.test/hc-incomplete HTTP/1.1\r\nHost: http.te"),
    ("tunnel_incomplete_head", "CONNECT http.test:80 HTTP/1.1\r\nHost: http.test:80\r\n\r\n"
                               "GET /hct-incomplete HTTP/1.1\r\nHost: http.te"),
    ("cut_body", "POST http://http.test/hc-cut HTTP/1.1\r\nHost: http.test\r\n"
                 "Content-Length: 100\r\n\r\nonly part of it"),
]


def test_halfclosed_refusals_answered(ctx):
    """Answers the proxy gives itself reach a half-closed client, with their
    audit lines: 403 for a denied host (request and CONNECT), 400 for
    garbage and for a head the FIN cut short (on the proxy port and inside a
    tunnel).  A body the FIN cut short cannot be completed: the connection
    ends, and the request is logged as an error."""
    eg, out, reqs, entries = _run(ctx, refusals=REFUSALS)
    want = {"denied_get": 403, "denied_connect": 403, "garbage": 400, "incomplete_head": 400,
            "tunnel_incomplete_head": 400}
    bad = {k: out[k] for k, st in want.items()
           if (out[k]["status"], out[k]["state"]) != (st, "eof")}
    assert not bad, "refusals a half-closed client did not get: %s" % bad
    assert out["cut_body"]["state"] == "eof" and out["cut_body"]["status"] is None, out
    assert eg.evil_hits() == 0
    assert eg.http.count("/hc-incomplete") == eg.http.count("/hct-incomplete") == 0, eg.summary()

    def one(what, **kw):
        m = _lines(reqs, **kw)
        assert len(m) == 1, "%s: %d lines %s\n%s" % (what, len(m), kw, fmt_log(entries))
        return m[0]
    e = one("denied GET", method="GET", host="evil.test")
    assert e["decision"] == "deny" and e["status"] == 403, e
    e = one("denied CONNECT", method="CONNECT", host="evil.test")
    assert e["decision"] == "deny" and e["status"] == 403, e
    assert one("garbage", rule="malformed", status=400)
    e = one("incomplete head", rule="incomplete", side="explicit", port=0)
    assert e["status"] == 400 and e["decision"] == "deny", e
    e = one("incomplete head in a tunnel", rule="incomplete", host="http.test", port=80)
    assert e["status"] == 400 and e["decision"] == "deny", e
    e = one("cut body", method="POST", host="http.test", path="/hc-cut")
    assert e["decision"] == "error" and e["status"] == 0, e


INTERCEPT_PY = INNER_LIB + r'''
ph = os.environ["KEY"]
B = CFG["bound"]
def tls_halfclosed(raw, close_notify, timeout=5.0):
    """TLS to the bound host (intercepted: the session CA's leaf), raw sent,
    then the write side closed at once: a close_notify, or a bare TCP FIN.
    Reads until the end.  -> (bytes, how the reading ended)"""
    s, r = connect(B + ":443")
    if s is None:
        return b"", "connect:%s" % r.get("status")
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ssl.create_default_context().wrap_bio(inc, outg, server_hostname=B)
    s.settimeout(timeout)
    def flush():
        d = outg.read()
        if d:
            s.sendall(d)
    def feed():
        d = s.recv(65536)
        if d:
            inc.write(d)
        else:
            inc.write_eof()
    got, state = b"", "?"
    try:
        while True:
            try:
                o.do_handshake()
                break
            except ssl.SSLWantReadError:
                flush()
                feed()
        flush()
        o.write(raw)
        flush()
        if close_notify:
            try:
                o.unwrap()
            except ssl.SSLWantReadError:
                pass
            flush()
        else:
            s.shutdown(socket.SHUT_WR)
        while True:
            try:
                d = o.read(65536)
            except ssl.SSLWantReadError:
                flush()
                feed()
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                state = "end"  # (with or without the proxy's close_notify)
                break
            if not d:
                state = "end"
                break
            got += d
    except (OSError, ssl.SSLError) as e:
        state = ename(e)
    finally:
        s.close()
    return got, state

out = {}
for how in ("close_notify", "fin"):
    answered, fails = 0, []
    for i in range(CFG["n"]):
        path = "/hci-%s-%d" % (how, i)
        raw, state = tls_halfclosed(("GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n"
                                     % (path, B, ph)).encode(), how == "close_notify")
        ok = raw.startswith(b"HTTP/1.1 200 ") and state == "end"
        answered += ok
        if not ok and len(fails) < 3:
            fails.append([state, raw[:300].decode("latin-1")])
    out[how] = {"answered": answered, "fails": fails}
print(json.dumps(out))
'''


def test_halfclosed_intercepted_answered(ctx):
    """On an intercepted connection (a host a secret is bound to), a request
    followed at once by the client's close_notify, or by a bare TCP FIN, is
    still forwarded (placeholder swapped) and answered through the client's
    TLS session, and logged."""
    from secrets_util import BOUND, Broker, new_value
    from test_secrets import SRC, secret
    n = 10
    val = new_value()
    b = Broker(ctx, [val])
    log = log_path(ctx)
    prof = b.write_profile({"KEY": secret(SRC)})
    out, _ = inner_json(ctx, INTERCEPT_PY, {"bound": BOUND, "n": n}, prof, env={SRC: val},
                        extra_args=["--log", log])
    assert out["close_notify"]["answered"] == out["fin"]["answered"] == n, \
        "of %d half-closed intercepted requests answered: %s\n%s" % (n, out, b.summary())
    for how in ("close_notify", "fin"):
        for i in range(n):
            path = "/hci-%s-%d" % (how, i)
            assert b.api.header(path, "x-api-key") == [val], \
                "%s: the upstream did not get the swapped request\n%s" % (path, b.summary())
    reqs = requests_in(read_log(log, ctx)[0])
    got = [e for e in reqs if e.get("intercepted") and e.get("path", "").startswith("/hci-")
           and e.get("status") == 200]
    assert len(got) == 2 * n, "%d audit lines for %d requests:\n%s" % (
        len(got), 2 * n, fmt_log(reqs))
