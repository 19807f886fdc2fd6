# SPDX-License-Identifier: MIT
"""Egress, hostile input and load: request smuggling and host
confusion from inside the sandbox, SNI mismatch, oversized heads, pipelining,
upstream resets, big transfers, slowloris, 2,000 tunnels, response framing,
hostile DNS, exit with connections open.  Shares the set-up of
test_egress.py (upstream.py has the servers and the inside client library).
"""

import hashlib
import json
import os
import resource
import socket
import time

import test_egress as base
from abtest import INNER_PY, PtyRun, describe, sanitized, skip, wait_for
from upstream import INNER_LIB, Egress, Upstream, big_body_chunk, inner_json, read_log

PROXY_PORT = base.PROXY_PORT
curl = base.curl
in_synth = base.in_synth
log_path = base.log_path
requests_in = base.requests_in
fmt_log = base.fmt_log
_policy = base._policy


HOSTILE_PY = INNER_LIB + r'''
cases = CFG["cases"]
res = {}
def bystander_req(s, path):
    s.sendall(("GET http://http.test%s HTTP/1.1\r\nHost: http.test\r\n\r\n" % path).encode())
    return read_response(s, 5)["status"]
by = socket.create_connection(PROXY, timeout=5)
res["_bystander_before"] = bystander_req(by, "/bystander-1")
def one(name, raw, tunnel):
    try:
        if tunnel:   # CONNECT first, then raw bytes inside the tunnel
            s, r0 = connect(tunnel)
            if s is None:
                res[name] = {"status": None, "state": "connect:%s" % r0.get("status")}
                return
        else:
            s = socket.create_connection(PROXY, timeout=5)
        send_some(s, raw.encode("latin-1"))
        r = read_response(s, 3)
        out = {"status": r["status"], "state": r["state"],
               "text": r["body"][:300].decode("utf-8", "replace")}
        if tunnel:
            out["raw"] = (r["rest"] or b"")[:200].decode("latin-1")
        s.close()
    except OSError as e:
        out = {"status": None, "state": ename(e)}
    out["after"] = normal_ok("after-" + name)
    res[name] = out
threads = [threading.Thread(target=one, args=(n, raw, t)) for n, raw, t in cases]
for t in threads:
    t.start()
for t in threads:
    t.join(30)
res["_bystander_after"] = bystander_req(by, "/bystander-2")
print(json.dumps(res))
'''


def _req(line, headers, body="", host="http.test"):
    """A raw request: line + CRLF-joined headers + blank line + body."""
    return line + "\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n" + body


def _smuggled(name):
    return "GET /smuggled-%s HTTP/1.1\r\nHost: http.test\r\n\r\n" % name


def _abs(name, method="POST"):
    return "%s http://http.test/case-%s HTTP/1.1" % (method, name)


def smuggling_cases():
    """(name, raw request, allowed outcomes: ints, 'closed' or 'any4xx')."""
    H = "Host: http.test"
    C = []

    def add(name, raw, ok, tunnel=None):
        C.append((name, raw, set(ok), tunnel))
    add("cl_te", _req(_abs("cl_te"), [H, "Content-Length: 5", "Transfer-Encoding: chunked"],
                      "0\r\n\r\n" + _smuggled("cl_te")), {400})
    add("te_cl", _req(_abs("te_cl"), [H, "Transfer-Encoding: chunked", "Content-Length: 40"],
                      "0\r\n\r\n" + _smuggled("te_cl")), {400})
    add("dup_cl", _req(_abs("dup_cl"), [H, "Content-Length: 0", "Content-Length: 44"],
                       _smuggled("dup_cl")), {400})
    add("dup_cl_list", _req(_abs("dup_cl_list"), [H, "Content-Length: 0, 44"],
                            _smuggled("dup_cl_list")), {400})
    for n, v in (("cl_neg", "-1"), ("cl_plus", "+0"), ("cl_hex", "0x0"), ("cl_alpha", "0a"),
                 ("cl_space", "0 44"), ("cl_huge", "99999999999999999999999999"),
                 ("cl_empty", "")):
        add(n, _req(_abs(n), [H, "Content-Length: " + v], _smuggled(n)),
            {400, 413} if n == "cl_huge" else {400})
    add("obs_fold", _req(_abs("obs_fold", "GET"), [H, "X-Fold: a", " b"]), {400})
    add("obs_fold_te", _req(_abs("obs_fold_te"), [H, "Transfer-Encoding:", " chunked",
                                                   "Content-Length: 0"],
                            "0\r\n\r\n" + _smuggled("obs_fold_te")), {400})
    add("leading_ws_line", _req(_abs("leading_ws_line", "GET"), [" X-A: b", H]), {400})
    add("bare_lf_line", _abs("bare_lf_line", "GET") + "\n" + H + "\r\n\r\n", {400})
    add("bare_lf_header", _abs("bare_lf_header", "GET") + "\r\n" + H + "\nX-A: b\r\n\r\n", {400})
    add("bare_lf_end", _abs("bare_lf_end", "GET") + "\r\n" + H + "\r\n\n", {400, "closed"})
    add("bare_cr", _req(_abs("bare_cr", "GET"), [H, "X-A: a\rb"]), {400})
    add("nul_header", _req(_abs("nul_header", "GET"), [H, "X-A: a\x00b"]), {400})
    add("space_before_colon", _req(_abs("space_before_colon"),
                                   [H, "Transfer-Encoding : chunked", "Content-Length: 0"],
                                   "0\r\n\r\n" + _smuggled("space_before_colon")), {400})
    add("te_unknown", _req(_abs("te_unknown"), [H, "Transfer-Encoding: foo"], "x"), {501})
    add("te_gzip_chunked", _req(_abs("te_gzip_chunked"), [H, "Transfer-Encoding: gzip, chunked"],
                                "0\r\n\r\n"), {400, 501})
    add("te_xchunked", _req(_abs("te_xchunked"), [H, "Transfer-Encoding: xchunked"], "0\r\n\r\n"),
        {400, 501})
    add("te_chunked_twice", _req(_abs("te_chunked_twice"),
                                 [H, "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"],
                                 "0\r\n\r\n" + _smuggled("te_chunked_twice")), {400, 501})
    # bad chunk sizes: the head may already be on its way upstream, so a 400
    # or a closed connection are both right; the smuggled request never arrives
    for n, chunk in (("chunk_hex", "zz\r\nhello\r\n0\r\n\r\n"),
                     ("chunk_neg", "-5\r\nhello\r\n0\r\n\r\n"),
                     ("chunk_0x", "0x5\r\nhello\r\n0\r\n\r\n"),
                     ("chunk_overflow", "1" + "0" * 20 + "\r\nhello\r\n0\r\n\r\n"),
                     ("chunk_bare_lf", "5\nhello\r\n0\r\n\r\n"),
                     ("chunk_no_crlf", "5\r\nhelloXX0\r\n\r\n"),
                     ("chunk_space", "5 5\r\nhello\r\n0\r\n\r\n")):
        add(n, _req(_abs(n), [H, "Transfer-Encoding: chunked"], chunk + _smuggled(n)),
            {400, "closed"})
    add("nested_connect_self", _req("CONNECT 127.0.0.1:%d HTTP/1.1" % PROXY_PORT,
                                    ["Host: 127.0.0.1:%d" % PROXY_PORT]), {400, 403})
    add("nested_connect_localhost", _req("CONNECT localhost:%d HTTP/1.1" % PROXY_PORT,
                                         ["Host: localhost:%d" % PROXY_PORT]), {400, 403})
    add("nested_connect_abs", _req("CONNECT http://upstream.test:443/ HTTP/1.1",
                                   ["Host: upstream.test:443"]), {400})
    add("connect_no_port", _req("CONNECT upstream.test HTTP/1.1", ["Host: upstream.test"]), {400})
    add("connect_empty_port", _req("CONNECT upstream.test: HTTP/1.1", ["Host: upstream.test:"]),
        {400})
    # a CONNECT request line sent inside an established tunnel is data, never
    # a second proxy request: no second "200 Connection established"
    add("nested_connect_in_tunnel", _req("CONNECT evil.test:443 HTTP/1.1",
                                         ["Host: evil.test:443"]), {"no200"},
        tunnel="upstream.test:443")
    add("h2c_upgrade", _req(_abs("h2c_upgrade", "GET"),
                            [H, "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c",
                             "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"]), {400})
    add("h2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", {400, 505})
    add("http09", "GET http://http.test/case-http09\r\n\r\n", {400, 505, "closed"})
    add("https_absolute", _req("GET https://upstream.test/case-https_absolute HTTP/1.1",
                               ["Host: upstream.test"]), {400, 501})
    return C


def host_confusion_cases():
    H = "Host: http.test"
    C = []

    def add(name, raw, ok):
        C.append((name, raw, set(ok), None))
    g = lambda n, auth="http.test": "GET http://%s/hc-%s HTTP/1.1" % (auth, n)  # noqa: E731
    add("two_hosts", _req(g("two_hosts"), [H, "Host: evil.test"]), {400})
    add("two_hosts_same", _req(g("two_hosts_same"), [H, H]), {400})
    add("abs_vs_host", _req(g("abs_vs_host"), ["Host: evil.test"]), {400})
    add("abs_vs_host_rev", _req(g("abs_vs_host_rev", "evil.test"), [H]), {400, 403})
    add("abs_vs_host_port", _req(g("abs_vs_host_port"), ["Host: http.test:8080"]), {400})
    add("userinfo", _req(g("userinfo", "user:pw@http.test"), [H]), {400})
    add("userinfo_evil", _req(g("userinfo_evil", "http.test@evil.test"), ["Host: evil.test"]),
        {400, 403})
    add("userinfo_connect", _req("CONNECT upstream.test@evil.test:443 HTTP/1.1",
                                 ["Host: evil.test:443"]), {400, 403})
    add("userinfo_connect2", _req("CONNECT user@upstream.test:443 HTTP/1.1",
                                  ["Host: upstream.test:443"]), {400})
    add("connect_host_mismatch", _req("CONNECT upstream.test:443 HTTP/1.1",
                                      ["Host: evil.test:443"]), {400})
    add("pct_host", _req(g("pct_host", "http%2etest"), ["Host: http%2etest"]), {400})
    add("pct_host_evil", _req(g("pct_host_evil", "evil%2etest"), ["Host: evil%2etest"]), {400})
    add("backslash", _req(g("backslash", "evil.test\\@http.test"), [H]), {400})
    add("space_in_host", _req(g("space_in_host"), ["Host: http.test evil.test"]), {400})
    add("idn_homoglyph", _req(g("idn_homoglyph", "http.t\xd0\xb5st"),
                              ["Host: http.t\xd0\xb5st"]), {400})
    add("abs_empty_port", _req(g("abs_empty_port", "http.test:"), ["Host: http.test:"]), {400})
    add("abs_port_overflow", _req(g("abs_port_overflow", "http.test:65616"),
                                  ["Host: http.test:65616"]), {400})
    add("abs_port_zero", _req(g("abs_port_zero", "http.test:0"), ["Host: http.test:0"]),
        {400, 403})
    add("port_not_allowed", _req(g("port_not_allowed", "http.test:22"), ["Host: http.test:22"]),
        {403})
    add("trailing_dot_case_ok", _req(g("trailing_dot_case_ok", "HTTP.Test."), ["Host: HTTP.Test."]),
        {200})
    return C


def _run_hostile(ctx, eg, prof, cases):
    cfg = {"cases": [(n, raw, t) for n, raw, _, t in cases], "ca": eg.ca}
    out, _ = inner_json(ctx, HOSTILE_PY, cfg, prof, timeout=80)
    bad = []
    for n, raw, ok, t in cases:
        v = out.get(n) or {}
        st = v.get("status")
        if "no200" in ok:
            good = "200 Connection" not in (v.get("raw") or "") and st != 200
        else:
            good = st in ok or (st is None and "closed" in ok and v.get("state") in (
                "closed", "ECONNRESET", "EPIPE"))
        if not good:
            bad.append("%-26s expected %s, got %s %s %r" % (
                n, "/".join(str(x) for x in sorted(ok, key=str)), st, v.get("state"),
                (v.get("text") or v.get("raw") or "")[:120]))
        if v.get("after") != 200:
            bad.append("%-26s a normal request afterwards got %s" % (n, v.get("after")))
    for k in ("_bystander_before", "_bystander_after"):
        if out.get(k) != 200:
            bad.append("%s: a keep-alive bystander connection got %s" % (k, out.get(k)))
    return out, bad


def test_smuggling_rejected(ctx):
    """Every request-smuggling item of the issue gets the right 4xx (or, once
    the head is forwarded, a closed connection); nothing smuggled reaches the
    upstream and other clients keep working."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    cases = smuggling_cases()
    out, bad = _run_hostile(ctx, eg, prof, cases)
    smuggled = [p for p in eg.http.paths() + eg.https.paths() if "smuggled" in p]
    if smuggled:
        bad.append("smuggled requests reached the upstream: %s" % smuggled)
    reached = [n for n, _, ok, _ in cases if ok <= {400, 501, 505, 413, 403}
               and "/case-%s" % n in eg.http.paths()]
    if reached:
        bad.append("rejected requests reached the upstream anyway: %s" % reached)
    if eg.evil_hits():
        bad.append("evil.test was reached")
    assert not bad, "%d problem(s):\n%s\n%s" % (len(bad), "\n".join(bad), eg.summary())


def test_host_confusion_rejected(ctx):
    """Host confusion is rejected, not rewritten: two Host headers, absolute-form
    vs Host, userinfo, percent-encoding, CONNECT authority vs Host; case and a
    trailing dot are normalised."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    cases = host_confusion_cases()
    out, bad = _run_hostile(ctx, eg, prof, cases)
    reached = [n for n, _, ok, _ in cases if 200 not in ok and "/hc-%s" % n in eg.http.paths()]
    if reached:
        bad.append("rejected requests reached the upstream: %s" % reached)
    if eg.evil_hits():
        bad.append("evil.test was reached (%d connections)" % eg.evil_hits())
    assert not bad, "%d problem(s):\n%s\n%s" % (len(bad), "\n".join(bad), eg.summary())


SNI_PY = INNER_LIB + r'''
out = {}
for key, authority, sni_name in CFG["cases"]:
    s, r = connect(authority)
    if s is None:
        out[key] = {"status": None, "state": "connect %s" % r}
        continue
    out[key] = https_get(s, sni_name, "/" + key, verify=False, timeout=3)
out["ok"] = tunnel_get("upstream.test:443", "upstream.test", "/sni-ok")
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def test_connect_sni_mismatch(ctx):
    """CONNECT upstream.test:443 then a ClientHello for another name: the proxy
    closes the tunnel and the upstream sees no request (domain fronting)."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    cases = [("sni-evil", "upstream.test:443", "evil.test"),
             ("sni-other-allowed", "upstream.test:443", "a.upstream.test"),
             ("sni-case-ok", "upstream.test:443", "UPSTREAM.test")]
    out, _ = inner_json(ctx, SNI_PY, {"cases": cases, "ca": eg.ca}, prof)
    assert out["ok"].get("status") == 200 and out["normal"] == 200, out
    assert out["sni-evil"].get("status") is None, \
        "CONNECT upstream.test:443 + SNI evil.test went through: %s" % out["sni-evil"]
    assert out["sni-other-allowed"].get("status") is None, \
        "CONNECT upstream.test:443 + SNI a.upstream.test went through: %s" % (
            out["sni-other-allowed"],)
    assert out["sni-case-ok"].get("status") == 200, \
        "SNI differing only in case was refused: %s" % out["sni-case-ok"]
    assert eg.https.count("/sni-evil") == 0 and eg.https.count("/sni-other") == 0, eg.summary()
    assert "evil.test" not in eg.https.snis, eg.summary()
    assert eg.evil_hits() == 0


HUGE_PY = INNER_LIB + r'''
out = {}
def big(name, raw):
    s = socket.create_connection(PROXY, timeout=5)
    sent_all = send_some(s, raw)
    r = read_response(s, 5)
    out[name] = {"status": r["status"], "state": r["state"], "sent_all": sent_all}
    s.close()
    out[name]["after"] = normal_ok()
h = lambda p: "GET http://http.test/%s HTTP/1.1\r\nHost: http.test\r\n" % p
big("one_64k", (h("huge-1") + "X-Big: " + "a" * 65536 + "\r\n\r\n").encode())
big("many_small", (h("huge-2") + "".join("X-H%d: %s\r\n" % (i, "b" * 300) for i in range(220))
                   + "\r\n").encode())
big("count_150", (h("huge-6") + "".join("X-C%d: c\r\n" % i for i in range(150)) + "\r\n").encode())
big("three_7k", (h("huge-3") + "".join("X-H%d: %s\r\n" % (i, "c" * 7000) for i in range(3))
                 + "\r\n").encode())
big("connect_64k", ("CONNECT upstream.test:443 HTTP/1.1\r\nHost: upstream.test:443\r\nX-Big: "
                    + "d" * 65536 + "\r\n\r\n").encode())
big("uri_64k", ("GET http://http.test/huge-4?" + "e" * 65536 +
                " HTTP/1.1\r\nHost: http.test\r\n\r\n").encode())
big("endless", (h("huge-5") + "X-Endless: " + "f" * (1 << 20)).encode())
print(json.dumps(out))
'''


def test_huge_headers_431(ctx):
    """A 64 KiB header, too many headers, or a header block over the limit get
    431 (a 64 KiB URI 414 or 431); the next request works."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, HUGE_PY, {}, prof)
    bad = []
    for k, ok in (("one_64k", {431}), ("many_small", {431}), ("three_7k", {431}),
                  ("count_150", {431}),
                  ("connect_64k", {431}), ("uri_64k", {414, 431}), ("endless", {431})):
        if out[k]["status"] not in ok:
            bad.append("%s: expected %s, got %s" % (k, ok, out[k]))
        if out[k]["after"] != 200:
            bad.append("%s: the next request got %s" % (k, out[k]["after"]))
    assert not bad, "\n".join(bad)
    assert eg.http.count("/huge") == 0 and eg.https.conns == 0, eg.summary()


PIPE_PY = INNER_LIB + r'''
out = {}
s = socket.create_connection(PROXY, timeout=5)
reqs = b"".join(("GET http://http.test/pipe-%d HTTP/1.1\r\nHost: http.test\r\n\r\n" % i).encode()
                for i in (1, 2)) + \
    b"POST http://http.test/pipe-3 HTTP/1.1\r\nHost: http.test\r\n" + \
    b"Content-Length: 5\r\n\r\nhello" + \
    b"GET http://other.test/pipe-4 HTTP/1.1\r\nHost: other.test\r\n\r\n"
s.sendall(reqs)
buf = b""
got = []
for i in range(4):
    r = read_response(s, 5, buf=buf)
    buf = r["rest"]
    got.append(jresp(r))
out["pipelined"] = got
s.sendall(b"GET http://http.test/pipe-5 HTTP/1.1\r\nHost: http.test\r\n\r\n")
r = read_response(s, 5, buf=buf)
out["keepalive"] = jresp(r)
buf = r["rest"]
s.sendall(b"GET http://evil.test/pipe-6 HTTP/1.1\r\nHost: evil.test\r\n\r\n"
          b"GET http://http.test/pipe-7 HTTP/1.1\r\nHost: http.test\r\n\r\n")
r = read_response(s, 5, buf=buf)
out["denied_in_pipeline"] = jresp(r)
r2 = read_response(s, 3, buf=r["rest"])
out["after_denied"] = jresp(r2)
s.close()
print(json.dumps(out))
'''


def test_pipelining_and_keepalive(ctx):
    """Pipelined requests (GET, POST with a body, another host) on one client
    connection are answered in order; the connection stays usable."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=["upstream.test", "http.test", "other.test"])
    out, _ = inner_json(ctx, PIPE_PY, {}, prof)
    paths = [(g.get("status"), (g.get("json") or {}).get("path")) for g in out["pipelined"]]
    assert paths == [(200, "/pipe-1"), (200, "/pipe-2"), (200, "/pipe-3"), (200, "/pipe-4")], \
        "pipelined responses: %s\n%s" % (out["pipelined"], eg.summary())
    assert out["pipelined"][2]["json"]["body_len"] == 5
    assert out["pipelined"][3]["json"]["host"] == "other.test" and \
        out["pipelined"][3]["json"]["server"] == "other", \
        "a pipelined request for other.test went to the wrong upstream: %s" % out["pipelined"][3]
    assert eg.other.paths() == ["/pipe-4"], eg.summary()
    assert out["keepalive"].get("status") == 200 and \
        out["keepalive"]["json"]["path"] == "/pipe-5", \
        out["keepalive"]
    assert out["denied_in_pipeline"].get("status") == 403, out["denied_in_pipeline"]
    a = out["after_denied"]
    assert a.get("status") in (200, None), "after a denied pipelined request: %s" % a
    assert eg.evil_hits() == 0


# ==========================================================================
# upstream failures, big transfers

RESET_PY = INNER_LIB + r'''
out = {}
s = socket.create_connection(PROXY, timeout=5)
s.sendall(plain_get("http.test", "/reset"))
r = read_response(s, 8)
out["http_reset"] = {"status": r["status"], "state": r["state"], "len": len(r["body"])}
s.close()
out["http_reset0"] = proxy_request(plain_get("http.test", "/reset0"), timeout=8)
out["after_http"] = normal_ok()
def tls_reset(sock):
    if isinstance(sock, str):
        return {"state": sock}
    try:
        t = tls_ctx().wrap_socket(sock, server_hostname="upstream.test")
        t.sendall(b"GET /reset HTTP/1.1\r\nHost: upstream.test\r\n\r\n")
        r = read_response(t, 8)
        return {"status": r["status"], "state": r["state"], "len": len(r["body"])}
    except (OSError, ssl.SSLError) as e:
        return {"state": "err:" + ename(e)}
s, _ = connect("upstream.test:443")
out["tunnel_reset"] = tls_reset(s) if s else {"state": "connect failed"}
out["transparent_reset"] = tls_reset(direct("upstream.test", 443))
out["after_tls"] = tunnel_get("upstream.test:443", "upstream.test", "/after-reset")
out["after_tp"] = https_get(direct("upstream.test", 443), "upstream.test", "/after-reset-tp")
out["after_http2"] = normal_ok()
print(json.dumps(out))
'''


def test_upstream_reset_mid_stream(ctx):
    """The upstream resets mid-body (or before answering): the client sees an
    error or a close (502 when nothing was sent yet), never a complete body;
    the proxy keeps serving."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, RESET_PY, {"ca": eg.ca}, prof)
    full = 16 << 20
    for k in ("http_reset", "tunnel_reset", "transparent_reset"):
        v = out[k]
        assert v.get("len", 0) < full and v.get("state") != "ok", \
            "%s: the client did not see the reset: %s" % (k, v)
    r0 = out["http_reset0"]
    assert r0.get("status") in (502, None), "reset before any response byte: %s" % r0
    for k in ("after_http", "after_http2"):
        assert out[k] == 200, "%s: %s" % (k, out[k])
    for k in ("after_tls", "after_tp"):
        assert out[k].get("status") == 200, "%s: %s" % (k, out[k])


def test_upstream_unreachable_502(ctx):
    """An allowed upstream that refuses connections: 502 (CONNECT and GET)."""
    eg = Egress(ctx)
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    ctx.on_cleanup(dead.close)
    dp = dead.getsockname()[1]
    prof = eg.write_profile(allow=["http.test", "down.test:%d" % dp],
                            hosts=eg.hosts(**{"down.test": "127.0.0.1:%d" % dp}))
    out = _policy(ctx, eg, prof, [("down-connect", "connect", "down.test:%d" % dp),
                                  ("down-get", "get", "down.test:%d" % dp)])
    for k in ("down-connect", "down-get"):
        assert out[k].get("status") == 502, "%s: %s" % (k, out[k])


def test_big_transfers(ctx):
    """32 MiB down over CONNECT, plain HTTP and the transparent path, 8 MiB up:
    bytes intact, in reasonable time."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    n = 32 << 20
    h = hashlib.sha256()
    for off in range(0, n, 1 << 20):
        h.update(big_body_chunk(off, 1 << 20))
    want = h.hexdigest()
    up = os.path.join(ctx.ws, "up.bin")
    with open(up, "wb") as f:
        f.write(os.urandom(8 << 20))
    os.chmod(up, 0o644)
    log = log_path(ctx)
    get = ('curl -sS --max-time 30 --cacert {ca} -o /tmp/{t}.bin {np} "{url}/big?n={n}"; '
           'echo "{t} $(sha256sum < /tmp/{t}.bin | cut -d" " -f1)"; rm -f /tmp/{t}.bin; ')
    script = "set -e; " + "".join(
        get.format(ca=eg.ca, t=t, np=np, url=url, n=n)
        for t, url, np in (("https", "https://upstream.test", ""),
                           ("http", "http://http.test", ""),
                           ("tp", "https://upstream.test", "--noproxy '*'"))) + \
        "curl -sS --max-time 30 --cacert %s --data-binary @%s https://upstream.test/upload" % (
            eg.ca, up)
    t0 = time.monotonic()
    r = ctx.sandbox(script, profile=prof, extra_args=["--log", log], timeout=90)
    dt = time.monotonic() - t0
    assert r.returncode == 0, describe(r) + "\n" + eg.summary()
    lines = r.stdout.splitlines()
    sums = {l.split()[0]: l.split()[1] for l in lines if len(l.split()) == 2 and
            len(l.split()[1]) == 64}
    for k in ("https", "http", "tp"):
        assert sums.get(k) == want, "%s: body hash %s, expected %s\n%s" % (k, sums.get(k), want,
                                                                           describe(r))
    js = [l for l in lines if l.startswith("{")]
    assert js and json.loads(js[-1])["body_len"] == 8 << 20, describe(r)
    assert dt < 60, "transfers took %.1fs" % dt
    entries, _ = read_log(log, ctx)
    c = [e for e in requests_in(entries) if e.get("host") == "upstream.test" and
         e.get("side") == "explicit" and e.get("method") == "CONNECT"]
    assert any(e.get("bytes_down", 0) >= n for e in c), \
        "no CONNECT line with bytes_down >= %d:\n%s" % (n, fmt_log(entries))
    assert any(e.get("bytes_up", 0) >= 8 << 20 for e in c), \
        "no CONNECT line with bytes_up >= 8 MiB:\n%s" % fmt_log(entries)


# ==========================================================================
# resource abuse: slowloris, thousands of tunnels

SLOW_PY = INNER_LIB + r'''
N = CFG["n"]
socks = []
errs = {}
for i in range(N):
    try:
        s = socket.create_connection(PROXY, timeout=5)
        s.setblocking(False)
        socks.append(s)
    except OSError as e:
        errs[ename(e)] = errs.get(ename(e), 0) + 1
head = b"GET http://http.test/slow HTTP/1.1\r\nHost: http.test\r\nX-Slow: " + b"a" * 4000
stop = threading.Event()
def drip():
    i = 0
    while not stop.is_set() and i < len(head):
        for s in socks:
            try:
                s.send(head[i:i + 1])
            except OSError:
                pass
        i += 1
        stop.wait(0.1)
t = threading.Thread(target=drip)
t.start()
slow_up = {}
def slow_upstream():  # an upstream that takes 4 s to answer must not stall anyone
    slow_up["r"] = proxy_request(plain_get("http.test", "/sleep?s=4"), timeout=10)["status"]
t2 = threading.Thread(target=slow_upstream)
t2.start()
time.sleep(0.3)
res = []
for i in range(4):
    t0 = time.monotonic()
    r = run(["curl", "-sS", "-o", "/dev/null", "--max-time", "10", "--cacert", CA, "-w",
             "%{http_code}", "https://upstream.test/slow-normal-%d" % i])
    res.append({"rc": r["rc"], "code": r["out"], "secs": round(time.monotonic() - t0, 3),
                "err": r["err"][-200:]})
    t1 = time.monotonic()
    st = normal_ok("slow-plain-%d" % i)
    res.append({"plain": st, "secs": round(time.monotonic() - t1, 3)})
    time.sleep(0.2)
stop.set()
t.join()
t2.join()
closed = sum(1 for s in socks if conn_closed(s, 0.01))
print(json.dumps({"opened": len(socks), "errs": errs, "normal": res, "closed_by_proxy": closed,
                  "slow_upstream": slow_up.get("r")}))
'''


def test_slowloris(ctx):
    """200 connections dripping a header byte at a time, and an upstream slow to
    answer, do not stall a normal client (curl over CONNECT and a plain GET
    stay fast)."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, SLOW_PY, {"n": 200, "ca": eg.ca}, prof, timeout=80)
    assert out["opened"] == 200, "could not open 200 connections to the proxy: %s" % out
    for v in out["normal"]:
        if "plain" in v:
            assert v["plain"] == 200 and v["secs"] < 2.0, "plain GET during slowloris: %s" % v
        else:
            assert v["rc"] == 0 and v["code"] == "200" and v["secs"] < 2.0, \
                "curl during slowloris: %s" % v
    assert out["slow_upstream"] == 200, "the slow upstream's answer: %s" % out
    assert "/slow" not in eg.http.paths(), \
        "a slowloris request reached the upstream: " + eg.summary()


TUNNELS_PY = INNER_LIB + r'''
import resource
N = CFG["n"]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
nofile = min(hard, max(soft, N + 256))
resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
ws = CFG["ws"]
def phase(name):
    with open(os.path.join(ws, "phase-" + name), "w") as f:
        f.write("1")
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(ws, "go-" + name)):
        if time.monotonic() > deadline:
            raise SystemExit("host never said go-" + name)
        time.sleep(0.02)
# warm up: one tunnel, closed
s, r = connect(CFG["target"])
if s:
    s.sendall(b"warm\n"); s.recv(10); s.close()
time.sleep(0.2)
phase("baseline")
socks, fails = [], {}
t0 = time.monotonic()
BATCH = 200
for b in range(0, N, BATCH):
    batch = []
    for i in range(b, min(N, b + BATCH)):
        try:
            s = socket.create_connection(PROXY, timeout=10)
            s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" %
                       (CFG["target"], CFG["target"])).encode())
            batch.append(s)
        except OSError as e:
            fails["connect " + ename(e)] = fails.get("connect " + ename(e), 0) + 1
    for s in batch:
        r = read_response(s, 15, head_only=True)
        if r["status"] == 200:
            socks.append(s)
        else:
            k = "status %s %s" % (r["status"], r["state"])
            fails[k] = fails.get(k, 0) + 1
            s.close()
t_open = time.monotonic() - t0
echo_ok = 0
for i, s in enumerate(socks):
    try:
        s.sendall(b"ping-%d\n" % i)
    except OSError as e:
        fails["send " + ename(e)] = fails.get("send " + ename(e), 0) + 1
for i, s in enumerate(socks):
    want = b"ping-%d\n" % i
    got = b""
    s.settimeout(10)
    try:
        while len(got) < len(want):
            d = s.recv(100)
            if not d:
                break
            got += d
    except OSError as e:
        fails["recv " + ename(e)] = fails.get("recv " + ename(e), 0) + 1
    if got == want:
        echo_ok += 1
phase("open")
for s in socks:
    s.close()
phase("closed")
print(json.dumps({"ok": len(socks), "echo_ok": echo_ok, "fails": fails,
                  "t_open": round(t_open, 2), "nofile": [nofile, hard]}))
'''


def _fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def _rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def test_2000_tunnels(ctx):
    """2,000 concurrent CONNECT tunnels all get 200 and echo; agentbox's fd
    count (and memory) return to the baseline once they are closed."""
    n = 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n + 512:
        skip("the runner's hard RLIMIT_NOFILE (%d) is below %d" % (hard, n + 512))
    if soft < n + 512:  # the host-side echo server lives in this process
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * n + 1024), hard))
    eg = Egress(ctx, echo=True)
    target = "echo.test:%d" % eg.echo.port
    prof = eg.write_profile(allow=["upstream.test", "http.test", target])
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", TUNNELS_PY,
                   json.dumps({"n": n, "target": target, "ws": ctx.ws})])
    pid = p.pid  # setpriv execs agentbox: the same pid

    def wait_phase(name):
        ok = wait_for(lambda: os.path.exists(os.path.join(ctx.ws, "phase-" + name)) or
                      p.poll() is not None, 60)
        if p.poll() is not None or not ok:
            out, err = p.communicate(timeout=10)
            raise AssertionError("the inner script stopped before phase %s (exit %s)\n%s\n%s"
                                 % (name, p.returncode, out[-3000:], err[-3000:]))

    def go(name):
        with open(os.path.join(ctx.ws, "go-" + name), "w") as f:
            f.write("1")
    wait_phase("baseline")
    time.sleep(0.3)
    base = _fds(pid)
    for _ in range(20):  # settled: two equal readings 0.1 s apart
        time.sleep(0.1)
        again = _fds(pid)
        if again == base:
            break
        base = again
    base_rss = _rss_kb(pid)
    go("baseline")
    wait_phase("open")
    peak, peak_rss = _fds(pid), _rss_kb(pid)
    echo_peak = eg.echo.peak
    go("open")
    wait_phase("closed")
    after = wait_for(lambda: (lambda v: v if v <= base + 2 else None)(_fds(pid)), 10) or _fds(pid)
    after_rss = _rss_kb(pid)
    go("closed")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, "exit %s\n%s\n%s" % (p.returncode, out[-3000:], err[-3000:])
    res = json.loads(out.strip().splitlines()[-1])
    nums = ("fds of agentbox (pid %d): baseline %d, with %d tunnels %d, after %d; RSS kB: "
            "baseline %d, peak %d, after %d; upstream peak concurrent %d; inner %s" % (
                pid, base, n, peak, after, base_rss, peak_rss, after_rss, echo_peak, res))
    if os.environ.get("AB_IT_VERBOSE"):
        print("      " + nums)
    assert res["ok"] == n and res["echo_ok"] == n, "not every tunnel worked: " + nums
    assert peak >= base + n, "agentbox's fd count did not grow with the tunnels (is pid %d the " \
        "process serving the proxy?): %s" % (pid, nums)
    assert after <= base + 2, "agentbox's fd count did not return to baseline: " + nums
    if not sanitized():  # ASan's quarantine holds freed memory on purpose
        assert after_rss <= base_rss + 16 * 1024, "agentbox's RSS did not come back: " + nums


# ==========================================================================
# message framing through the proxy

FRAMING_PY = INNER_LIB + r'''
def pat(n):
    return (bytes(range(256)) * (n // 256 + 1))[:n]
out = {}
s = socket.create_connection(PROXY, timeout=5)
s.sendall(b"HEAD http://http.test/big?n=1000000 HTTP/1.1\r\nHost: http.test\r\n\r\n"
          b"GET http://http.test/chunked?n=100000 HTTP/1.1\r\nHost: http.test\r\n\r\n"
          b"GET http://http.test/big?n=5000 HTTP/1.1\r\nHost: http.test\r\n\r\n")
r = read_response(s, 5, method="HEAD")
out["head"] = {"status": r["status"], "cl": r["headers"].get("content-length")}
r = read_response(s, 5, buf=r["rest"])
out["chunked"] = {"status": r["status"], "state": r["state"], "ok": r["body"] == pat(100000),
                  "len": len(r["body"])}
r = read_response(s, 5, buf=r["rest"])
out["after"] = {"status": r["status"], "ok": r["body"] == pat(5000), "len": len(r["body"])}
s.close()
s = socket.create_connection(PROXY, timeout=5)
s.sendall(b"GET http://http.test/close?n=200000 HTTP/1.1\r\nHost: http.test\r\n\r\n")
r = read_response(s, 5)
out["close_delimited"] = {"status": r["status"], "state": r["state"],
                          "ok": r["body"] == pat(200000), "len": len(r["body"])}
s.close()
ws = CFG["ws"]
out["curl_chunked_up"] = run(["curl", "-sS", "--max-time", "20", "-H", "Transfer-Encoding: chunked",
                              "--data-binary", "@" + ws + "/up.bin", "http://http.test/up-chunked"])
out["curl_expect_up"] = run(["curl", "-sS", "--max-time", "20", "-H", "Expect: 100-continue",
                             "--data-binary", "@" + ws + "/up.bin", "http://http.test/up-expect"])
print(json.dumps(out))
'''


def test_response_framing(ctx):
    """HEAD, chunked and close-delimited responses and chunked / Expect:
    100-continue uploads are relayed intact through the explicit proxy, and
    pipelined requests after them still line up."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    size = 3 << 20
    up = os.path.join(ctx.ws, "up.bin")
    with open(up, "wb") as f:
        f.write(os.urandom(size))
    os.chmod(up, 0o644)
    out, _ = inner_json(ctx, FRAMING_PY, {"ws": ctx.ws}, prof)
    assert out["head"] == {"status": 200, "cl": "1000000"}, "HEAD: %s" % out["head"]
    assert out["chunked"]["status"] == 200 and out["chunked"]["ok"], \
        "chunked response after a HEAD on the same connection: %s" % out["chunked"]
    assert out["after"]["status"] == 200 and out["after"]["ok"], \
        "third pipelined response: %s" % out["after"]
    assert out["close_delimited"]["status"] == 200 and out["close_delimited"]["ok"], \
        "close-delimited response: %s" % out["close_delimited"]
    for k in ("curl_chunked_up", "curl_expect_up"):
        v = out[k]
        try:
            js = json.loads(v["out"])
        except ValueError:
            js = {}
        assert v["rc"] == 0 and js.get("body_len") == size, "%s: %s" % (k, v)


# ==========================================================================
# DNS responder: hostile input

DNS_HOSTILE_PY = INNER_LIB + r'''
def hdr(qid=0x1234, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)
def qname(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
Q = qname("upstream.test") + b"\x00\x01\x00\x01"
bad = {
    "empty": b"",
    "one_byte": b"\x00",
    "header_only_qd0": hdr(qd=0),
    "qd_50": hdr(qd=50) + Q,
    "truncated_name": hdr() + b"\x08upstre",
    "pointer_loop": hdr() + b"\xc0\x0c\x00\x01\x00\x01",
    "pointer_forward": hdr() + b"\xc0\x40\x00\x01\x00\x01",
    "label_64": hdr() + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01",
    "name_300": hdr() + b"".join(b"\x3f" + b"a" * 63 for _ in range(5)) + b"\x00\x00\x01\x00\x01",
    "response_qr1": hdr(flags=0x8180, an=1) + Q +
                    b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x01\x02\x03\x04",
    "opcode_update": hdr(flags=0x2800) + Q,
    "random_4k": bytes(random.getrandbits(8) for _ in range(4000)),
    "class_chaos": hdr() + qname("version.bind") + b"\x00\x10\x00\x03",
    "nul_in_label": hdr() + b"\x05ev\x00il\x04test\x00\x00\x01\x00\x01",
    "dot_in_label": hdr() + b"\x0dupstream.test\x00\x00\x01\x00\x01",
}
out = {}
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(0.3)
for k, pkt in bad.items():
    try:
        u.sendto(pkt, ("127.0.0.1", 53))
        resp, _ = u.recvfrom(65536)
        rid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", resp[:12]) if len(resp) >= 12 \
            else (0, 0, 0, 0, 0, 0)
        out[k] = {"reply": True, "rcode": flags & 15, "ancount": an, "len": len(resp)}
    except socket.timeout:
        out[k] = {"reply": False}
    except OSError as e:
        out[k] = {"error": ename(e)}
# TCP: a stalled length prefix and a zero length must not block anyone
stall = socket.create_connection(("127.0.0.1", 53), timeout=3)
stall.sendall(b"\xff\xff" + b"x" * 10)
zero = socket.create_connection(("127.0.0.1", 53), timeout=3)
zero.sendall(b"\x00\x00")
t0 = time.monotonic()
out["after_udp"] = dns_query("upstream.test", 1)
out["after_tcp"] = dns_query("upstream.test", 1, tcp=True)
out["after_secs"] = round(time.monotonic() - t0, 3)
out["evil_after"] = dns_query("evil.test", 1)
stall.close(); zero.close()
print(json.dumps(out))
'''


def test_dns_hostile_input(ctx):
    """Malformed DNS messages get no answer (or an error rcode), responses are
    never answered, no weird query yields an address for a denied or invalid
    name, and the responder keeps answering over UDP and TCP."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, DNS_HOSTILE_PY, {}, prof)
    bad = []
    for k, v in out.items():
        if not isinstance(v, dict) or k.startswith(("after", "evil_after")):
            continue
        if v.get("reply") and v.get("ancount"):
            bad.append("%s: answered with %d record(s): %s" % (k, v["ancount"], v))
    if out["response_qr1"].get("reply"):
        bad.append("a DNS response (QR=1) was answered: %s" % out["response_qr1"])
    for k in ("after_udp", "after_tcp"):
        v = out[k]
        if not (v.get("rcode") == 0 and v.get("answers") and in_synth(v["answers"][0])):
            bad.append("%s: the responder stopped answering: %s" % (k, v))
    if out["after_secs"] > 1.5:
        bad.append("valid queries took %.2fs while a TCP client stalled" % out["after_secs"])
    if out["evil_after"].get("rcode") != 3:
        bad.append("evil.test afterwards: %s" % out["evil_after"])
    assert not bad, "\n".join(bad)


# ==========================================================================
# exit with connections still open

EXIT_PY = INNER_LIB + r'''
keep = []
for i in range(20):
    s, r = connect("upstream.test:443")
    if s:
        keep.append(s)
for i in range(20):
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(b"GET http://http.test/half HTTP/1.1\r\nHost: ht")
    keep.append(s)
s = socket.create_connection(PROXY, timeout=5)
s.sendall(plain_get("http.test", "/sleep?s=8"))
keep.append(s)
s = direct("upstream.test", 443)
keep.append(s)
time.sleep(0.3)
print(json.dumps({"open": len(keep)}))
sys.stdout.flush()
os._exit(0)
'''


def test_exit_with_open_connections(ctx):
    """The command exits while tunnels, half-sent requests and a request
    waiting on a slow upstream are open: agentbox exits promptly anyway."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    t0 = time.monotonic()
    out, r = inner_json(ctx, EXIT_PY, {}, prof, timeout=30)
    dt = time.monotonic() - t0
    assert out["open"] == 42, out
    assert dt < 4.0, "agentbox took %.1fs to exit with connections open\n%s" % (dt, describe(r))
