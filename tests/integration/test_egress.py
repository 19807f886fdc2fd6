# SPDX-License-Identifier: MIT
"""Egress: the allowlisting proxy is the sandbox's only way out.

Upstreams are loopback servers on the host (upstream.py): a TLS one reached as
"upstream.test"/"a.upstream.test", a plain one as "http.test", both through
the profile's `hosts` mapping; names that must never be reached
("evil.test", "bad.upstream.test") map to a counting listener that must see
zero connections.  Clients inside: curl, /usr/bin/python3 (urllib,
http.client, raw sockets), node (fetch, https.get), git.

The explicit proxy is 127.0.0.1:3128 inside; the transparent path is the DNS
responder on 127.0.0.1:53 plus listeners on the allowed ports.
"""

import hashlib
import ipaddress
import json
import os
import resource
import socket
import time

from abtest import INNER_PY, PtyRun, describe, skip, wait_for
from upstream import INNER_LIB, Egress, Upstream, big_body_chunk, inner_json, read_log

PROXY_PORT = 3128
SYNTH_NET = ipaddress.ip_network("198.18.0.0/15")
NODE = "/usr/bin/node"

# Runs the commands of CFG["cmds"] ({"name", "cmd", "env", "noproxy"}); prints
# {name: {"rc","out","err"}}.  A "{SYNTH:NAME}" argument is replaced by the
# address NAME resolves to inside.
RUN_CMDS_PY = INNER_LIB + r'''
res = {}
for c in CFG["cmds"]:
    cmd = []
    for a in c["cmd"]:
        while "{SYNTH:" in a:
            i = a.index("{SYNTH:")
            j = a.index("}", i)
            try:
                addr = socket.gethostbyname(a[i + 7:j])
            except OSError as e:
                addr = "unresolved-" + ename(e)
            a = a[:i] + addr + a[j + 1:]
        cmd.append(a)
    env = dict(c.get("env") or {})
    if c.get("noproxy"):
        env.update(NOPROXY_ENV)
    res[c["name"]] = run(cmd, env=env, timeout=c.get("timeout", 60))
    res[c["name"]]["argv"] = cmd
print(json.dumps(res))
'''


# --------------------------------------------------------------------------
# host-side helpers

def run_cmds(ctx, prof, cmds, extra_args=(), timeout=90):
    out, r = inner_json(ctx, RUN_CMDS_PY, {"cmds": cmds}, prof, timeout=timeout,
                        extra_args=extra_args)
    return out, r


def curl(name, url, *args, noproxy=False, ca=None, timeout=15):
    """A RUN_CMDS_PY entry: curl printing the body then a last line with codes."""
    cmd = ["curl", "-sS", "--max-time", str(timeout), "-w", "\n%{http_code} %{http_connect}"]
    if ca:
        cmd += ["--cacert", ca]
    if noproxy:
        cmd += ["--noproxy", "*"]
    return {"name": name, "cmd": cmd + list(args) + [url], "timeout": timeout + 10}


def curl_result(res):
    """(rc, http_code, http_connect, body text, parsed JSON or None)"""
    out = res["out"]
    body, _, last = out.rpartition("\n")
    codes = last.split()
    code = int(codes[0]) if codes and codes[0].isdigit() else None
    cconn = int(codes[1]) if len(codes) > 1 and codes[1].isdigit() else None
    try:
        js = json.loads(body)
    except ValueError:
        js = None
    return res["rc"], code, cconn, body, js


def assert_denial_body(text, hostport, what):
    for needle in ("agentbox:", hostport, "network.allow"):
        assert needle in (text or ""), "%s: the denial body does not mention %r: %r" % (
            what, needle, text)


def in_synth(addr):
    try:
        return ipaddress.ip_address(addr) in SYNTH_NET
    except ValueError:
        return False


def log_path(ctx, name="audit.jsonl"):
    p = os.path.join(ctx.scratch, name)
    return p


def scan_secrets(raw, secrets_, what="audit log"):
    text = raw.decode("utf-8", "replace")
    for s in secrets_:
        assert s not in text, "%s contains the secret %r:\n%s" % (what, s, text[-3000:])


def requests_in(log):
    return [e for e in log if e.get("event") == "request"]


def find(log, **kw):
    out = []
    for e in log:
        if all(e.get(k) == v for k, v in kw.items()):
            out.append(e)
    return out


def fmt_log(log, n=40):
    return "\n".join(json.dumps(e, sort_keys=True) for e in log[-n:])


# ==========================================================================
# Environment, resolv.conf, proxy port

ENV_PY = INNER_LIB + r'''
names = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
         "NODE_USE_ENV_PROXY", "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
         "JAVA_TOOL_OPTIONS", "ALL_PROXY", "all_proxy"]
out = {"env": {n: os.environ.get(n) for n in names}}
try:
    out["resolv"] = open("/etc/resolv.conf").read()
except OSError as e:
    out["resolv"] = "ERR " + ename(e)
def tcp(port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port))
        return "CONNECTED"
    except OSError as e:
        return ename(e)
    finally:
        s.close()
out["ports"] = {str(p): tcp(p) for p in CFG["ports"]}
print(json.dumps(out))
'''


def _check_env(env, port, what):
    url = "http://127.0.0.1:%d" % port
    for n in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env.get(n) == url, "%s: %s inside is %r, expected %r" % (what, n, env.get(n), url)
    for n in ("NO_PROXY", "no_proxy"):
        assert env.get(n) == "localhost,127.0.0.1,::1", "%s: %s inside is %r" % (
            what, n, env.get(n))
    assert env.get("NODE_USE_ENV_PROXY") == "1", "%s: NODE_USE_ENV_PROXY=%r" % (
        what, env.get("NODE_USE_ENV_PROXY"))
    for n in ("npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"):
        assert env.get(n) and "127.0.0.1:%d" % port in env[n], "%s: %s=%r" % (
            what, n, env.get(n))
    jto = env.get("JAVA_TOOL_OPTIONS") or ""
    for needle in ("-Dhttps.proxyHost=127.0.0.1", "-Dhttps.proxyPort=%d" % port):
        assert needle in jto.split(), "%s: JAVA_TOOL_OPTIONS=%r lacks %s" % (what, jto, needle)


def test_environment_and_resolv_conf(ctx):
    """Proxy variables point at the proxy (host proxy settings never cross);
    resolv.conf names only 127.0.0.1; a custom proxy_port moves all of it."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    host_proxy = {"HTTPS_PROXY": "http://corp.example:8080", "https_proxy": "http://corp:1",
                  "NO_PROXY": "corp.example,.internal", "no_proxy": "*",
                  "HTTP_PROXY": "http://corp.example:8080", "ALL_PROXY": "socks5://corp:1080"}
    r = ctx.sandbox([INNER_PY, "-c", ENV_PY, json.dumps({"ports": [PROXY_PORT]})],
                    profile=prof, env=host_proxy)
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    _check_env(out["env"], PROXY_PORT, "default port")
    for n in ("ALL_PROXY", "all_proxy"):
        assert "corp" not in (out["env"].get(n) or ""), "host %s crossed: %r" % (n, out["env"])
    ns = [l.split() for l in out["resolv"].splitlines()
          if l.strip() and not l.lstrip().startswith(("#", ";"))]
    nameservers = [l for l in ns if l[0] == "nameserver"]
    assert nameservers == [["nameserver", "127.0.0.1"]], \
        "/etc/resolv.conf inside:\n%s" % out["resolv"]
    assert out["ports"][str(PROXY_PORT)] == "CONNECTED", \
        "the proxy port 127.0.0.1:%d does not accept connections inside: %s" % (
            PROXY_PORT, out["ports"])

    # custom port: env follows, the proxy serves there, 3128 is not served
    port = 3199
    prof2 = eg.write_profile(name="port3199", proxy_port=port)
    code = ENV_PY.replace("print(json.dumps(out))", r'''
out["curl"] = run(["curl", "-sS", "--max-time", "10", "--cacert", CA, "-o", "/dev/null",
                   "-w", "%{http_code}", "https://upstream.test/port3199"])
print(json.dumps(out))''')
    r = ctx.sandbox([INNER_PY, "-c", code, json.dumps({"ports": [port, PROXY_PORT], "ca": eg.ca})],
                    profile=prof2)
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    _check_env(out["env"], port, "proxy_port 3199")
    assert out["ports"][str(port)] == "CONNECTED", "proxy_port %d not served: %s" % (
        port, out["ports"])
    assert out["ports"][str(PROXY_PORT)] != "CONNECTED", \
        "with proxy_port %d, 127.0.0.1:%d still accepts connections" % (port, PROXY_PORT)
    assert out["curl"]["rc"] == 0 and out["curl"]["out"] == "200", \
        "curl through proxy_port %d: %s\n%s" % (port, out["curl"], eg.summary())
    assert eg.https.count("/port3199") == 1, eg.summary()


# ==========================================================================
# curl

def test_curl_explicit_proxy(ctx):
    """curl honours the proxy variables: https (CONNECT) and http (absolute-form)
    to allowed hosts work, and the audit log says "explicit"."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    upload = os.path.join(ctx.ws, "upload.bin")
    with open(upload, "wb") as f:
        f.write(os.urandom(1 << 20))
    os.chmod(upload, 0o644)
    log = log_path(ctx)
    res, r = run_cmds(ctx, prof, [
        curl("https", "https://upstream.test/curl-https", ca=eg.ca),
        curl("http", "http://http.test/curl-http"),
        curl("post", "https://upstream.test/curl-post", "--data-binary", "@" + upload, ca=eg.ca),
        curl("wild", "https://a.upstream.test/curl-wild", ca=eg.ca),
    ], extra_args=["--log", log])
    rc, code, cconn, body, js = curl_result(res["https"])
    assert rc == 0 and code == 200 and js, "curl https: %s\n%s" % (res["https"], eg.summary())
    assert cconn == 200, "curl https did not go through a proxy CONNECT (http_connect=%s)" % cconn
    assert js["path"] == "/curl-https" and js["host"] == "upstream.test" and js["tls"], js
    assert js["sni"] == "upstream.test", "upstream saw SNI %r" % js["sni"]
    rc, code, _, body, js = curl_result(res["http"])
    assert rc == 0 and code == 200 and js, "curl http: %s\n%s" % (res["http"], eg.summary())
    assert js["path"] == "/curl-http" and js["host"] == "http.test" and not js["tls"], js
    rc, code, _, body, js = curl_result(res["post"])
    assert rc == 0 and code == 200 and js and js["body_len"] == 1 << 20, \
        "curl POST 1 MiB: %s" % res["post"]
    rc, code, _, body, js = curl_result(res["wild"])
    assert rc == 0 and code == 200 and js and js["host"] == "a.upstream.test", res["wild"]
    assert eg.https.count("/curl-https") == 1 and eg.http.count("/curl-http") == 1, eg.summary()
    assert eg.evil_hits() == 0
    entries, raw = read_log(log, ctx)
    reqs = requests_in(entries)
    c = find(reqs, method="CONNECT", host="upstream.test", port=443)
    assert c and c[0].get("side") == "explicit" and c[0].get("decision") == "allow", \
        "no explicit CONNECT upstream.test:443 allow line:\n" + fmt_log(entries)
    g = find(reqs, method="GET", host="http.test", port=80, path="/curl-http")
    assert g and g[0].get("side") == "explicit" and g[0].get("status") == 200, \
        "no explicit GET http.test:80 /curl-http line:\n" + fmt_log(entries)


DENIED_PY = INNER_LIB + r'''
out = {}
s, out["connect_evil"] = connect("evil.test:443")
out["get_evil"] = proxy_request(plain_get("evil.test", "/denied-get"))
s, out["connect_evil_port"] = connect("upstream.test:8443")
out["get_evil_port"] = proxy_request(plain_get("http.test:8080", "/denied-port"))
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def test_denied_explicit(ctx):
    """Denied host or port through the explicit proxy: 403 with a body that says
    how to allow it; curl fails; the upstream sees zero connections."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    res, _ = run_cmds(ctx, prof, [
        curl("https", "https://evil.test/curl-evil", ca=eg.ca),
        curl("http", "http://evil.test/curl-evil"),
    ])
    rc, code, cconn, body, _ = curl_result(res["https"])
    assert rc != 0 and cconn == 403, "curl https://evil.test: %s" % res["https"]
    rc, code, _, body, _ = curl_result(res["http"])
    assert code == 403, "curl http://evil.test: %s" % res["http"]
    assert_denial_body(body, "evil.test:80", "curl http://evil.test")
    out, _ = inner_json(ctx, DENIED_PY, {}, prof)
    ce = out["connect_evil"]
    assert ce["status"] == 403, "CONNECT evil.test:443: %s" % ce
    assert_denial_body(ce["text"], "evil.test:443", "CONNECT evil.test:443")
    assert (ce.get("ctype") or "").startswith("text/plain"), "403 Content-Type %r" % ce["ctype"]
    ge = out["get_evil"]
    assert ge["status"] == 403, "GET http://evil.test/: %s" % ge
    assert_denial_body(ge["text"], "evil.test:80", "GET http://evil.test/")
    cp = out["connect_evil_port"]
    assert cp["status"] == 403, "CONNECT upstream.test:8443 (port not allowed): %s" % cp
    assert_denial_body(cp["text"], "upstream.test:8443", "CONNECT upstream.test:8443")
    gp = out["get_evil_port"]
    assert gp["status"] == 403, "GET http://http.test:8080/ (port not allowed): %s" % gp
    assert out["normal"] == 200, out
    assert eg.evil_hits() == 0, "the denied upstream saw connections"
    assert eg.https.conns == 0, "CONNECT to a denied port reached the upstream: " + eg.summary()
    assert eg.http.count("/denied") == 0, eg.summary()


def test_curl_transparent(ctx):
    """curl --noproxy '*': allowed names work through DNS + the transparent
    listeners; denied names do not resolve; addresses go nowhere; a TLS
    ClientHello whose SNI differs from the dialled name is refused."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    log = log_path(ctx)
    res, r = run_cmds(ctx, prof, [
        curl("https", "https://upstream.test/tp-https", noproxy=True, ca=eg.ca),
        curl("http", "http://http.test/tp-http", noproxy=True),
        curl("evil", "https://evil.test/tp-evil", noproxy=True, ca=eg.ca),
        curl("evil_http", "http://evil.test/tp-evil", noproxy=True),
        curl("loopback", "http://127.0.0.1:%d/tp-loop" % eg.http.port, noproxy=True, timeout=5),
        curl("public_ip", "https://1.1.1.1/", "-k", noproxy=True, timeout=5),
        curl("front_evil", "https://evil.test/tp-front", "-k", "--resolve",
             "evil.test:443:{SYNTH:upstream.test}", noproxy=True, timeout=5),
        curl("front_allowed", "https://a.upstream.test/tp-front2", "-k", "--resolve",
             "a.upstream.test:443:{SYNTH:upstream.test}", noproxy=True, timeout=5),
        curl("host_mismatch", "http://http.test/tp-hostmm", "-H", "Host: evil.test",
             noproxy=True, timeout=5),
    ], extra_args=["--log", log])
    rc, code, _, body, js = curl_result(res["https"])
    assert rc == 0 and code == 200 and js and js["sni"] == "upstream.test", \
        "curl --noproxy https://upstream.test: %s\n%s" % (res["https"], eg.summary())
    rc, code, _, body, js = curl_result(res["http"])
    assert rc == 0 and code == 200 and js and js["host"] == "http.test", \
        "curl --noproxy http://http.test: %s\n%s" % (res["http"], eg.summary())
    assert res["evil"]["rc"] == 6 and res["evil_http"]["rc"] == 6, \
        "a denied name must not resolve (curl exit 6): %s %s" % (res["evil"], res["evil_http"])
    for k in ("loopback", "public_ip"):
        assert res[k]["rc"] != 0, "curl --noproxy to an address succeeded (%s): %s" % (k, res[k])
    for k in ("front_evil", "front_allowed"):
        rc, code, _, body, js = curl_result(res[k])
        assert rc != 0 and code in (0, None), \
            "TLS with a SNI other than the dialled name went through (%s): %s" % (k, res[k])
    assert "evil.test" not in eg.https.snis and "a.upstream.test" not in eg.https.snis, \
        "the upstream saw a fronted SNI: " + eg.summary()
    rc, code, _, body, js = curl_result(res["host_mismatch"])
    assert code != 200, "plain HTTP with Host: evil.test to http.test's address: %s" % (
        res["host_mismatch"],)
    assert eg.https.count("/tp-front") == 0 and eg.http.count("/tp-hostmm") == 0 and \
        eg.http.count("/tp-loop") == 0, eg.summary()
    assert eg.evil_hits() == 0, "evil upstream reached"
    entries, _ = read_log(log, ctx)
    t = [e for e in requests_in(entries) if e.get("side") == "transparent" and
         e.get("host") == "upstream.test" and e.get("decision") == "allow"]
    assert t and t[0].get("method") == "TLS" and t[0].get("port") == 443, \
        "no transparent TLS line for upstream.test:443:\n" + fmt_log(entries)
    t = find(requests_in(entries), side="transparent", host="http.test", path="/tp-http")
    assert t and t[0].get("method") == "GET", "no transparent GET line:\n" + fmt_log(entries)


# ==========================================================================
# python

PY_EXPLICIT = INNER_LIB + r'''
import urllib.request, urllib.error, http.client
out = {"proxies": urllib.request.getproxies()}
c = tls_ctx()
def urlopen(url, **kw):
    try:
        r = urllib.request.urlopen(url, timeout=10, **kw)
        return {"status": r.status, "json": json.loads(r.read())}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "text": e.read().decode("utf-8", "replace")}
    except Exception as e:
        return {"status": None, "error": "%s: %s" % (type(e).__name__, e)}
out["https"] = urlopen("https://upstream.test/py-https", context=c)
out["http"] = urlopen("http://http.test/py-http")
out["post"] = urlopen(urllib.request.Request("http://http.test/py-post", data=b"x" * 5000))
out["evil_http"] = urlopen("http://evil.test/py-evil")
out["evil_https"] = urlopen("https://evil.test/py-evil", context=c)
try:
    h = http.client.HTTPSConnection("127.0.0.1", PROXY[1], context=c, timeout=10)
    h.set_tunnel("upstream.test", 443)
    h.request("GET", "/py-tunnel")
    r = h.getresponse()
    out["tunnel"] = {"status": r.status, "json": json.loads(r.read())}
    h.request("GET", "/py-tunnel-2")  # same connection
    r = h.getresponse()
    out["tunnel2"] = {"status": r.status, "json": json.loads(r.read())}
except Exception as e:
    out["tunnel"] = {"status": None, "error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
'''


def test_python_explicit(ctx):
    """Python's urllib (proxy variables) and http.client set_tunnel."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    out, _ = inner_json(ctx, PY_EXPLICIT, {"ca": eg.ca}, prof)
    assert out["proxies"].get("https") == "http://127.0.0.1:%d" % PROXY_PORT, out["proxies"]
    for k, path, host in (("https", "/py-https", "upstream.test"),
                          ("http", "/py-http", "http.test"),
                          ("tunnel", "/py-tunnel", "upstream.test"),
                          ("tunnel2", "/py-tunnel-2", "upstream.test")):
        v = out.get(k) or {}
        assert v.get("status") == 200 and v["json"]["path"] == path and \
            v["json"]["host"] == host, "%s: %s\n%s" % (k, v, eg.summary())
    assert out["post"].get("status") == 200 and out["post"]["json"]["body_len"] == 5000, out
    assert out["evil_http"]["status"] == 403, out["evil_http"]
    assert_denial_body(out["evil_http"].get("text"), "evil.test:80", "urllib http://evil.test")
    assert out["evil_https"]["status"] is None and "403" in out["evil_https"]["error"], \
        "urllib https://evil.test: %s" % out["evil_https"]
    assert eg.evil_hits() == 0


PY_TRANSPARENT = INNER_LIB + r'''
out = {}
try:
    out["addr"] = socket.gethostbyname("upstream.test")
    out["addr2"] = socket.gethostbyname("upstream.test")
    out["addr_a"] = socket.gethostbyname("a.upstream.test")
    out["addr_http"] = socket.gethostbyname("http.test")
except OSError as e:
    out["addr"] = ename(e)
try:
    out["gai_evil"] = socket.gethostbyname("evil.test")
except OSError as e:
    out["gai_evil"] = ename(e)
try:
    out["gai_example"] = socket.gethostbyname("example.com")
except OSError as e:
    out["gai_example"] = ename(e)
s = direct("upstream.test", 443)
out["tls"] = https_get(s, "upstream.test", "/raw-tls") if not isinstance(s, str) else s
s = direct("http.test", 80)
if isinstance(s, str):
    out["http"] = s
else:
    s.sendall(b"GET /raw-http HTTP/1.1\r\nHost: http.test\r\n\r\n")
    out["http"] = jresp(read_response(s))
    # keep-alive on the transparent path
    s.sendall(b"GET /raw-http-2 HTTP/1.1\r\nHost: http.test\r\nConnection: close\r\n\r\n")
    out["http2"] = jresp(read_response(s))
    s.close()
def raw_http(name, host_line, path):
    s = direct(name, 80)
    if isinstance(s, str):
        return {"status": None, "state": s}
    s.sendall(("GET %s HTTP/1.1\r\n%sConnection: close\r\n\r\n" % (path, host_line)).encode())
    r = jresp(read_response(s, 3))
    s.close()
    return r
out["host_mismatch"] = raw_http("http.test", "Host: evil.test\r\n", "/raw-hostmm")
out["host_missing"] = raw_http("http.test", "", "/raw-nohost")
out["host_two"] = raw_http("http.test", "Host: http.test\r\nHost: evil.test\r\n", "/raw-host2")
out["host_other_allowed"] = raw_http("http.test", "Host: other.test\r\n", "/raw-other")
s = direct("http.test", 80)
if isinstance(s, str):
    out["switch"] = {"state": s}
else:  # a first good request, then another (allowed) host on the same connection
    s.sendall(b"GET /raw-switch-1 HTTP/1.1\r\nHost: http.test\r\n\r\n")
    r = read_response(s)
    out["switch_first"] = jresp(r)
    try:
        s.sendall(b"GET /raw-switch-2 HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
        out["switch"] = jresp(read_response(s, 3, buf=r["rest"]))
    except OSError as e:
        out["switch"] = {"status": None, "state": ename(e)}
    s.close()
def sni(name, sni_name, path):
    s = direct(name, 443) if not name[0].isdigit() else None
    if s is None:
        try:
            s = socket.create_connection((name, 443), timeout=3)
        except OSError as e:
            return {"status": None, "state": "connect:" + ename(e)}
    if isinstance(s, str):
        return {"status": None, "state": s}
    return https_get(s, sni_name, path, host="upstream.test", verify=False, timeout=3)
out["sni_evil"] = sni("upstream.test", "evil.test", "/raw-sni-evil")
out["sni_other_allowed"] = sni("upstream.test", "a.upstream.test", "/raw-sni-other")
out["sni_none"] = sni("upstream.test", None, "/raw-sni-none")
out["unassigned"] = sni("198.19.255.254", "upstream.test", "/raw-unassigned")
s = direct("upstream.test", 8443, timeout=3)
out["port_not_allowed"] = "CONNECTED" if not isinstance(s, str) else s
print(json.dumps(out))
'''


def test_python_transparent(ctx):
    """A program that ignores proxy variables (raw socket.create_connection by
    name) reaches allowed hosts and nothing else; SNI and Host are checked."""
    eg = Egress(ctx)
    prof = eg.write_profile(allow=["upstream.test", "a.upstream.test", "http.test", "other.test"])
    out, _ = inner_json(ctx, PY_TRANSPARENT, {"ca": eg.ca}, prof)
    assert in_synth(out["addr"]), "upstream.test resolved to %r inside" % out["addr"]
    assert out["addr2"] == out["addr"], "synthetic address not stable: %s" % out
    assert len({out["addr"], out["addr_a"], out["addr_http"]}) == 3, \
        "names share a synthetic address: %s" % out
    assert str(out["gai_evil"]).startswith("GAI:"), "evil.test resolved: %r" % out["gai_evil"]
    assert str(out["gai_example"]).startswith("GAI:"), "example.com resolved: %r" % out
    assert out["tls"].get("status") == 200 and out["tls"]["json"]["path"] == "/raw-tls", \
        "TLS to upstream.test:443 by name: %s\n%s" % (out["tls"], eg.summary())
    assert out["http"].get("status") == 200 and out["http"]["json"]["path"] == "/raw-http", \
        "plain HTTP to http.test:80 by name: %s\n%s" % (out["http"], eg.summary())
    assert out["http2"].get("status") == 200, "keep-alive on the transparent path: %s" % (
        out["http2"],)
    for k in ("host_mismatch", "host_missing", "host_two", "host_other_allowed", "switch"):
        st = out[k].get("status")
        assert st is None or 400 <= st < 500, "%s on the transparent path: %s" % (k, out[k])
    assert out["switch_first"].get("status") == 200, out["switch_first"]
    assert eg.other.paths() == [], "a connection dialled for http.test reached other.test: " + \
        eg.summary()
    for k in ("sni_evil", "sni_other_allowed", "unassigned"):
        assert out[k].get("status") is None, \
            "%s: TLS went through the transparent listener: %s" % (k, out[k])
    assert out["port_not_allowed"] != "CONNECTED", \
        "upstream.test:8443 (port not allowed) accepted a connection"
    for p in ("/raw-hostmm", "/raw-nohost", "/raw-host2"):
        assert eg.http.count(p) == 0, "%s reached the upstream: %s" % (p, eg.summary())
    for p in ("/raw-sni-evil", "/raw-sni-other", "/raw-unassigned"):
        assert eg.https.count(p) == 0, "%s reached the upstream: %s" % (p, eg.summary())
    assert eg.evil_hits() == 0


# ==========================================================================
# node

NODE_JS = r'''
const https = require('https'), http = require('http');
function get(mod, url) {
  return new Promise(res => {
    const req = mod.get(url, r => {
      let b = ''; r.setEncoding('utf8');
      r.on('data', d => b += d);
      r.on('end', () => { let j = null; try { j = JSON.parse(b) } catch (e) {}
                          res({status: r.statusCode, json: j, text: b.slice(0, 500)}) });
    });
    req.on('error', e => res({error: String(e.code || e)}));
    req.setTimeout(10000, () => { req.destroy(new Error('timeout')) });
  });
}
async function f(url) {
  try {
    const r = await fetch(url, {signal: AbortSignal.timeout(10000)});
    const t = await r.text(); let j = null; try { j = JSON.parse(t) } catch (e) {}
    return {status: r.status, json: j};
  } catch (e) { return {error: String((e.cause && (e.cause.code || e.cause.message)) || e)} }
}
(async () => {
  const out = {};
  out.fetch = await f('https://upstream.test/node-fetch');
  out.fetch_http = await f('http://http.test/node-fetch-http');
  out.fetch_evil = await f('https://evil.test/node-evil');
  out.get = await get(https, 'https://upstream.test/node-get');
  out.get_http = await get(http, 'http://http.test/node-get-http');
  out.get_evil = await get(https, 'https://evil.test/node-evil');
  console.log(JSON.stringify(out));
})();
'''


def test_node_fetch_and_https_get(ctx):
    """Node 20: built-in fetch and https.get (which ignore the proxy variables)
    reach allowed hosts through the transparent path; evil.test does not resolve."""
    if not os.path.exists(NODE):
        skip("%s is not installed" % NODE)
    eg = Egress(ctx)
    prof = eg.write_profile()
    log = log_path(ctx)
    r = ctx.sandbox(["env", "NODE_EXTRA_CA_CERTS=" + eg.ca, NODE, "-e", NODE_JS], profile=prof,
                    extra_args=["--log", log], timeout=60)
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for k, path in (("fetch", "/node-fetch"), ("fetch_http", "/node-fetch-http"),
                    ("get", "/node-get"), ("get_http", "/node-get-http")):
        v = out[k]
        assert v.get("status") == 200 and v["json"] and v["json"]["path"] == path, \
            "node %s: %s\n%s" % (k, v, eg.summary())
    for k in ("fetch_evil", "get_evil"):
        assert out[k].get("status") is None and "ENOTFOUND" in out[k].get("error", ""), \
            "node %s: %s" % (k, out[k])
    assert eg.evil_hits() == 0
    entries, _ = read_log(log, ctx)
    sides = {e.get("side") for e in requests_in(entries) if e.get("host") == "upstream.test"}
    assert sides, "no audit line for node's requests:\n" + fmt_log(entries)


# ==========================================================================
# git

def test_git_clone_https_and_http(ctx):
    """git clone from a local smart-HTTP server, over https and http, through
    the explicit proxy and the transparent path."""
    eg = Egress(ctx, git=True)
    prof = eg.write_profile()
    log = log_path(ctx)
    env = {"GIT_SSL_CAINFO": eg.ca, "GIT_TERMINAL_PROMPT": "0"}
    cmds = []
    for name, url, noproxy in (("https_explicit", "https://upstream.test/git/repo.git", False),
                               ("http_explicit", "http://http.test/git/repo.git", False),
                               ("https_transparent", "https://upstream.test/git/repo.git", True),
                               ("http_transparent", "http://http.test/git/repo.git", True)):
        dest = os.path.join(ctx.ws, "clone-" + name)
        cmds.append({"name": name, "cmd": ["git", "clone", "-q", url, dest], "env": env,
                     "noproxy": noproxy, "timeout": 60})
        cmds.append({"name": name + "_cat", "cmd": ["cat", os.path.join(dest, "hello.txt")]})
    res, _ = run_cmds(ctx, prof, cmds, extra_args=["--log", log], timeout=120)
    for name in ("https_explicit", "http_explicit", "https_transparent", "http_transparent"):
        assert res[name]["rc"] == 0, "git clone %s: %s\n%s" % (name, res[name], eg.summary())
        assert res[name + "_cat"]["out"] == eg.git_text, "clone %s content: %s" % (
            name, res[name + "_cat"])
    assert eg.https.count("/git/repo.git/info/refs") == 2, eg.summary()
    assert eg.http.count("/git/repo.git/info/refs") == 2, eg.summary()
    entries, _ = read_log(log, ctx)
    reqs = requests_in(entries)
    for host in ("upstream.test", "http.test"):
        sides = {e.get("side") for e in reqs if e.get("host") == host and
                 e.get("decision") == "allow"}
        assert sides == {"explicit", "transparent"}, \
            "%s: sides in the audit log %s\n%s" % (host, sides, fmt_log(entries))


# ==========================================================================
# DNS responder

DNS_PY = INNER_LIB + r'''
out = {}
for key, name, qt, tcp in CFG["queries"]:
    out[key] = dns_query(name, qt, tcp)
try:
    out["libc"] = socket.gethostbyname(CFG["queries"][0][1])
except OSError as e:
    out["libc"] = ename(e)
print(json.dumps(out))
'''


def _dns(ctx, prof, queries, extra_args=()):
    out, _ = inner_json(ctx, DNS_PY, {"queries": queries}, prof, extra_args=extra_args)
    return out


def test_dns_responder(ctx):
    """A for allowed names: one stable synthetic address per name in
    198.18.0.0/15 (UDP and TCP); AAAA: NOERROR, no answer; everything else:
    NXDOMAIN; queries are logged."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    log = log_path(ctx)
    q = [("up", "upstream.test", 1, False), ("up2", "upstream.test", 1, False),
         ("up_tcp", "upstream.test", 1, True), ("up_case", "UpStream.TEST.", 1, False),
         ("a", "a.upstream.test", 1, False), ("http", "http.test", 1, False),
         ("aaaa", "upstream.test", 28, False), ("evil", "evil.test", 1, False),
         ("evil_aaaa", "evil.test", 28, False), ("evil_tcp", "evil.test", 1, True),
         ("example", "example.com", 1, False), ("sub", "x.http.test", 1, False)]
    out = _dns(ctx, prof, q, extra_args=["--log", log])
    up = out["up"]
    assert up.get("rcode") == 0 and len(up.get("answers", [])) == 1 and \
        in_synth(up["answers"][0]), "A upstream.test: %s" % up
    addr = up["answers"][0]
    for k in ("up2", "up_tcp", "up_case"):
        assert out[k].get("rcode") == 0 and out[k].get("answers") == [addr], \
            "%s: %s (expected [%s])" % (k, out[k], addr)
    assert out["libc"] == addr, "getaddrinfo gave %r, DNS gave %r" % (out["libc"], addr)
    others = [out[k]["answers"][0] for k in ("a", "http") if out[k].get("answers")]
    assert len(others) == 2 and all(in_synth(a) for a in others) and \
        len({addr} | set(others)) == 3, "one address per name: %s" % out
    assert out["aaaa"].get("rcode") == 0 and out["aaaa"].get("ancount") == 0, \
        "AAAA upstream.test: %s" % out["aaaa"]
    for k in ("evil", "evil_aaaa", "evil_tcp", "example", "sub"):
        assert out[k].get("rcode") == 3, "%s: expected NXDOMAIN, got %s" % (k, out[k])
    entries, raw = read_log(log, ctx)
    dns = [e for e in entries if e.get("event") == "dns"]
    ok = [e for e in dns if e.get("name") == "upstream.test" and e.get("qtype") == "A" and
          e.get("decision") == "allow"]
    assert ok and ok[0].get("answer") == addr, "no dns allow line for upstream.test A:\n" + \
        fmt_log(entries)
    bad = [e for e in dns if e.get("name") == "evil.test" and e.get("decision") == "deny"]
    assert bad, "no dns deny line for evil.test:\n" + fmt_log(entries)
    for e in entries:
        assert isinstance(e.get("ts"), str) and e.get("event"), "bad log line %s" % e


# ==========================================================================
# policy: wildcard, deny, IP literals, private addresses

POLICY_PY = INNER_LIB + r'''
out = {}
for key, kind, arg in CFG["checks"]:
    if kind == "tunnel":      # CONNECT arg, TLS with SNI = host part, GET /key
        host = arg.rsplit(":", 1)[0].strip("[]")
        out[key] = tunnel_get(arg, host, "/" + key)
    elif kind == "connect":
        s, out[key] = connect(arg)
        if s is not None:
            s.close()
    elif kind == "get":
        out[key] = proxy_request(plain_get(arg, "/" + key))
    elif kind == "connect_resolved":  # CONNECT <what NAME resolves to inside>:443
        try:
            a = socket.gethostbyname(arg)
        except OSError as e:
            a = "unresolved"
        s, out[key] = connect("%s:443" % a)
        out[key]["addr"] = a
        if s is not None:
            s.close()
    elif kind == "dns":
        out[key] = dns_query(arg, 1)
    elif kind == "direct_tls":
        s = direct(arg, 443)
        out[key] = https_get(s, arg, "/" + key) if not isinstance(s, str) else {"state": s}
out["normal"] = normal_ok()
print(json.dumps(out))
'''


def _policy(ctx, eg, prof, checks):
    out, _ = inner_json(ctx, POLICY_PY, {"checks": checks, "ca": eg.ca}, prof)
    assert out.get("normal") == 200, "a normal request after the checks failed: %s" % out
    return out


def test_wildcard_and_deny(ctx):
    """"*.upstream.test" matches a.upstream.test (and deeper) but not
    upstream.test; a deny rule beats an allow wildcard; deny wins over an
    exact allow too."""
    eg = Egress(ctx)
    prof = eg.write_profile(
        name="wild", allow=["*.upstream.test", "http.test"], deny=["bad.upstream.test"],
        hosts=eg.hosts(upstream_test="127.0.0.1:%d" % eg.evil.port,
                       **{"b.a.upstream.test": "127.0.0.1:%d" % eg.https.port}))
    out = _policy(ctx, eg, prof, [
        ("w-a", "tunnel", "a.upstream.test:443"),
        ("w-deep", "tunnel", "b.a.upstream.test:443"),
        ("w-bare", "connect", "upstream.test:443"),
        ("w-bad", "connect", "bad.upstream.test:443"),
        ("w-bad-get", "get", "bad.upstream.test"),
        ("w-suffix", "connect", "evilupstream.test:443"),
        ("w-dns-a", "dns", "a.upstream.test"), ("w-dns-deep", "dns", "b.a.upstream.test"),
        ("w-dns-bare", "dns", "upstream.test"), ("w-dns-bad", "dns", "bad.upstream.test"),
        ("w-direct-a", "direct_tls", "a.upstream.test"),
    ])
    for k in ("w-a", "w-deep", "w-direct-a"):
        assert out[k].get("status") == 200, "%s: %s\n%s" % (k, out[k], eg.summary())
    for k in ("w-bare", "w-bad", "w-bad-get", "w-suffix"):
        assert out[k].get("status") == 403, "%s: expected 403, got %s" % (k, out[k])
    assert "agentbox:" in out["w-bad"]["text"] and \
        "bad.upstream.test:443" in out["w-bad"]["text"], \
        "deny-rule 403 body: %r" % out["w-bad"]["text"]
    assert_denial_body(out["w-bare"]["text"], "upstream.test:443", "bare suffix")
    for k in ("w-dns-a", "w-dns-deep"):
        assert out[k].get("rcode") == 0 and out[k]["answers"] and in_synth(out[k]["answers"][0]), \
            "%s: %s" % (k, out[k])
    for k in ("w-dns-bare", "w-dns-bad"):
        assert out[k].get("rcode") == 3, "%s: expected NXDOMAIN, got %s" % (k, out[k])
    assert eg.evil_hits() == 0, "a denied name reached its upstream"

    prof2 = eg.write_profile(name="denyexact", allow=["a.upstream.test", "http.test"],
                             deny=["*.upstream.test"])
    out = _policy(ctx, eg, prof2, [("d-a", "connect", "a.upstream.test:443"),
                                   ("d-dns", "dns", "a.upstream.test")])
    assert out["d-a"].get("status") == 403, "deny *.upstream.test vs allow a.upstream.test: %s" % (
        out["d-a"],)
    assert out["d-dns"].get("rcode") == 3, out["d-dns"]
    # w-a, w-deep and w-direct-a only
    assert eg.https.count("/d-a") == 0 and eg.https.conns == 3, eg.summary()


IPLIT_FORMS = ["0x7f.1", "2130706433", "[::ffff:127.0.0.1]", "127.1", "0177.0.0.1",
               "0x7f000001", "127.0.0.01", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::1]",
               "localhost", "127.000.000.001"]


def test_ip_literals(ctx):
    """IP literals are refused unless named explicitly; alternative spellings of
    127.0.0.1 are refused even when 127.0.0.1:PORT is allowed; an allowed
    literal that is private still needs "private"."""
    eg = Egress(ctx)
    ipsrv = Upstream(ctx, tls=True, name="ip")
    p = ipsrv.port
    prof = eg.write_profile(name="iplit", private=["127.0.0.1:%d" % p])
    checks = [("ip-ok", "tunnel", "127.0.0.1:%d" % p),
              ("ip-synth", "connect_resolved", "upstream.test")]
    for i, form in enumerate(IPLIT_FORMS):
        checks.append(("ip-form-%d" % i, "connect", "%s:%d" % (form, p)))
        checks.append(("ip-abs-%d" % i, "get", "%s:%d" % (form, p)))
    out = _policy(ctx, eg, prof, checks)
    assert out["ip-ok"].get("status") == 200, \
        "CONNECT 127.0.0.1:%d with private 127.0.0.1:%d: %s\n%s" % (
            p, p, out["ip-ok"], ipsrv.summary())
    bad = []
    if not in_synth(out["ip-synth"].get("addr")) or out["ip-synth"].get("status") not in (400, 403):
        bad.append("CONNECT to upstream.test's synthetic address: %s" % out["ip-synth"])
    for i, form in enumerate(IPLIT_FORMS):
        for kind in ("form", "abs"):
            v = out["ip-%s-%d" % (kind, i)]
            if v.get("status") not in (400, 403):
                bad.append("%s %s:%d -> %s" % ("CONNECT" if kind == "form" else "GET http://",
                                               form, p, v))
    assert not bad, "alternative IP forms not refused:\n" + "\n".join(bad)
    assert ipsrv.conns == 1, \
        "the IP upstream saw %d connections (expected only the allowed one)\n%s" % (
            ipsrv.conns, ipsrv.summary())
    assert eg.https.count("/ip-synth") == 0 and eg.https.conns == 0, eg.summary()

    prof2 = eg.write_profile(name="iplit-allow", allow=["127.0.0.1:%d" % p, "http.test"])
    prof3 = eg.write_profile(name="iplit-none")
    out2 = _policy(ctx, eg, prof2, [("ip-allow-only", "connect", "127.0.0.1:%d" % p)])
    out3 = _policy(ctx, eg, prof3, [("ip-none", "connect", "127.0.0.1:%d" % p),
                                    ("ip-public", "connect", "1.1.1.1:443"),
                                    ("ip-public-get", "get", "1.1.1.1")])
    assert out2["ip-allow-only"].get("status") == 403, \
        "127.0.0.1:%d in allow but not in private: %s" % (p, out2["ip-allow-only"])
    assert out3["ip-none"].get("status") == 403, out3["ip-none"]
    assert out3["ip-public"].get("status") == 403 and out3["ip-public-get"].get("status") == 403, \
        "public IP literal not in the allowlist: %s" % out3
    assert_denial_body(out3["ip-public"].get("text"), "1.1.1.1:443", "CONNECT 1.1.1.1:443")
    assert ipsrv.conns == 1, ipsrv.summary()


def test_private_addresses(ctx):
    """A name that resolves to a private address (localhost -> 127.0.0.1 via the
    host's /etc/hosts) is refused after resolution unless named in "private";
    a `hosts` mapping is the other way."""
    eg = Egress(ctx)
    ph = eg.http.port
    prof = eg.write_profile(name="priv-no", allow=["localhost:%d" % ph, "http.test"])
    out = _policy(ctx, eg, prof, [("priv-1", "get", "localhost:%d" % ph),
                                  ("priv-v6", "connect", "[::1]:%d" % ph)])
    assert out["priv-1"].get("status") == 403, \
        "localhost:%d (allowed, resolves to 127.0.0.1, not private): %s" % (ph, out["priv-1"])
    assert "agentbox:" in (out["priv-1"].get("text") or ""), out["priv-1"]
    assert out["priv-v6"].get("status") == 403, out["priv-v6"]
    assert eg.http.count("/priv-1") == 0, eg.summary()
    prof2 = eg.write_profile(name="priv-yes", allow=["http.test"],
                             private=["localhost:%d" % ph])
    out = _policy(ctx, eg, prof2, [("priv-2", "get", "localhost:%d" % ph)])
    assert out["priv-2"].get("status") == 200, \
        "localhost:%d named in private: %s\n%s" % (ph, out["priv-2"], eg.summary())
    # a hosts mapping without an allow rule does not allow the name
    prof3 = eg.write_profile(name="map-only", allow=["upstream.test", "http.test"],
                             hosts=eg.hosts(**{"mapped.test": "127.0.0.1:%d" % ph}))
    out = _policy(ctx, eg, prof3, [("map-1", "get", "mapped.test")])
    assert out["map-1"].get("status") == 403, "a mapped but unlisted name: %s" % out["map-1"]
    assert eg.http.count("/map-1") == 0


def test_ipv6_upstream(ctx):
    """`hosts` can map a name to "[::1]:PORT" and `private` can name
    "[::1]:PORT"; without that, the IPv6 loopback literal is refused."""
    eg = Egress(ctx)
    try:
        v6 = Upstream(ctx, name="v6", v6=True)
    except OSError as e:
        skip("no IPv6 loopback on this host (%s)" % e)
    p6 = v6.port
    hosts = eg.hosts(**{"v6.test": "[::1]:%d" % p6})
    prof = eg.write_profile(name="v6", allow=["http.test", "v6.test"],
                            private=["[::1]:%d" % p6], hosts=hosts)
    res, _ = run_cmds(ctx, prof, [
        curl("explicit", "http://v6.test/v6-explicit"),
        curl("transparent", "http://v6.test/v6-transparent", noproxy=True),
    ])
    for k in ("explicit", "transparent"):
        rc, code, _, _, js = curl_result(res[k])
        assert rc == 0 and code == 200 and js and js["server"] == "v6", \
            "%s: %s\n%s" % (k, res[k], v6.summary())
    # (curl would not proxy [::1]: it is in NO_PROXY; ask the proxy directly)
    out = _policy(ctx, eg, prof, [("v6-literal", "get", "[::1]:%d" % p6)])
    assert out["v6-literal"].get("status") == 200, "[::1]:%d named in private: %s\n%s" % (
        p6, out["v6-literal"], v6.summary())
    prof2 = eg.write_profile(name="v6-noprivate", allow=["http.test", "v6.test"], hosts=hosts)
    out = _policy(ctx, eg, prof2, [("v6-lit", "get", "[::1]:%d" % p6),
                                   ("v6-name", "get", "v6.test")])
    assert out["v6-lit"].get("status") == 403, "[::1]:%d without private: %s" % (p6, out["v6-lit"])
    assert out["v6-name"].get("status") == 200, "v6.test mapped to [::1]: %s" % out["v6-name"]
    assert "/v6-lit" not in v6.paths(), v6.summary()


def test_port_mapping(ctx):
    """`hosts` NAME -> ADDR (no port) dials the requested port; rules with a
    port open that port only, on both paths (a transparent listener on it)."""
    eg = Egress(ctx)
    ps, ph = eg.https.port, eg.http.port
    prof = eg.write_profile(
        name="ports", allow=["p.upstream.test:%d" % ps, "plain.test:%d" % ph],
        hosts=eg.hosts(**{"p.upstream.test": "127.0.0.1", "plain.test": "127.0.0.1"}))
    res, _ = run_cmds(ctx, prof, [
        curl("https_explicit", "https://p.upstream.test:%d/pm-1" % ps, ca=eg.ca),
        curl("https_transparent", "https://p.upstream.test:%d/pm-2" % ps, ca=eg.ca, noproxy=True),
        curl("http_explicit", "http://plain.test:%d/pm-3" % ph),
        curl("http_transparent", "http://plain.test:%d/pm-4" % ph, noproxy=True),
        curl("https_443", "https://p.upstream.test/pm-5", ca=eg.ca),
        curl("https_443_transparent", "https://p.upstream.test/pm-6", ca=eg.ca, noproxy=True,
             timeout=5),
    ])
    for k in ("https_explicit", "https_transparent", "http_explicit", "http_transparent"):
        rc, code, _, _, js = curl_result(res[k])
        assert rc == 0 and code == 200 and js, "%s: %s\n%s" % (k, res[k], eg.summary())
    rc, code, cconn, _, _ = curl_result(res["https_443"])
    assert cconn == 403, "p.upstream.test:443 with only a :%d rule: %s" % (ps, res["https_443"])
    assert res["https_443_transparent"]["rc"] != 0, res["https_443_transparent"]
    assert eg.https.count("/pm-5") == 0 and eg.https.count("/pm-6") == 0


# ==========================================================================
# UDP, raw sockets, transparent: false

UDP_PY = INNER_LIB + r'''
out = {}
for tgt in CFG["udp"]:
    out["udp " + tgt] = dns_query("example.com", 1, server=(tgt, 53), timeout=1.5)
try:
    synth = socket.gethostbyname("upstream.test")
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(1.0)
    try:
        u.sendto(b"\x00" * 1200, (synth, 443))  # e.g. QUIC
        u.recvfrom(100)
        out["udp synth:443"] = "reply"
    except socket.timeout:
        out["udp synth:443"] = "noreply"
    except OSError as e:
        out["udp synth:443"] = ename(e)
except OSError as e:
    out["udp synth:443"] = "unresolved " + ename(e)
out["tcp 8.8.8.8:53"] = (lambda s: "CONNECTED" if not isinstance(s, str) else s)(
    direct("8.8.8.8", 53, timeout=2))
for name, fam, typ, proto in (("raw icmp", socket.AF_INET, socket.SOCK_RAW, 1),
                              ("raw udp", socket.AF_INET, socket.SOCK_RAW, 17),
                              ("raw tcp6", socket.AF_INET6, socket.SOCK_RAW, 6),
                              ("packet", 17, socket.SOCK_RAW, 0x0300),
                              ("packet dgram", 17, socket.SOCK_DGRAM, 0x0300)):
    try:
        s = socket.socket(fam, typ, proto)
        try:
            s.settimeout(1.5)
            if fam == socket.AF_INET:
                s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("8.8.8.8", 0))
                s.recv(100)
                out[name] = "reply"
            else:
                out[name] = "opened"
        except socket.timeout:
            out[name] = "noreply"
        except OSError as e:
            out[name] = ename(e)
        s.close()
    except OSError as e:
        out[name] = ename(e)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(1.5)
    try:
        s.sendto(b"\x08\x00\x00\x00\x00\x01\x00\x01", ("8.8.8.8", 0))
        s.recv(100)
        out["ping"] = "reply"
    except socket.timeout:
        out["ping"] = "noreply"
    except OSError as e:
        out["ping"] = ename(e)
except OSError as e:
    out["ping"] = ename(e)
print(json.dumps(out))
'''


def _host_nameservers():
    try:
        with open("/etc/resolv.conf") as f:
            return [l.split()[1] for l in f if l.startswith("nameserver") and len(l.split()) > 1]
    except OSError:
        return []


def test_udp_and_raw_sockets_go_nowhere(ctx):
    """UDP (DNS to public and to the host's resolvers) and raw/packet sockets
    reach nothing; the sandbox's own responder answers NXDOMAIN for
    example.com and forwards nothing."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    udp = ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"] + \
        [a for a in _host_nameservers() if a not in ("127.0.0.1", "::1")]
    out, _ = inner_json(ctx, UDP_PY, {"udp": udp + ["127.0.0.1"]}, prof)
    for tgt in udp:
        v = out["udp " + tgt]
        assert "error" in v, "UDP DNS to %s got an answer: %s" % (tgt, v)
    v = out["udp 127.0.0.1"]
    assert v.get("rcode") == 3, "the sandbox's responder for example.com: %s" % v
    assert out["tcp 8.8.8.8:53"] != "CONNECTED", out
    assert not out["udp synth:443"].startswith("unresolved"), out
    for k in ("raw icmp", "raw udp", "raw tcp6", "packet", "packet dgram", "ping",
              "udp synth:443"):
        assert out[k] not in ("reply", "opened"), "%s: %s" % (k, out[k])


TRANSPARENT_OFF_PY = INNER_LIB + r'''
out = {"dns_udp": dns_query("upstream.test", 1, timeout=1.5),
       "dns_tcp": dns_query("upstream.test", 1, tcp=True, timeout=1.5)}
try:
    out["gai"] = socket.gethostbyname("upstream.test")
except OSError as e:
    out["gai"] = ename(e)
for p in (80, 443):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", p))
        out["listen %d" % p] = "CONNECTED"
    except OSError as e:
        out["listen %d" % p] = ename(e)
    s.close()
out["explicit"] = tunnel_get("upstream.test:443", "upstream.test", "/tf-explicit")
print(json.dumps(out))
'''


def test_transparent_false(ctx):
    """"transparent": false: no DNS responder, no listeners on 80/443; the
    explicit proxy still works."""
    eg = Egress(ctx)
    prof = eg.write_profile(name="notransparent", transparent=False)
    out, _ = inner_json(ctx, TRANSPARENT_OFF_PY, {"ca": eg.ca}, prof)
    for k in ("dns_udp", "dns_tcp"):
        assert "error" in out[k], "transparent:false but DNS answered (%s): %s" % (k, out[k])
    assert str(out["gai"]).startswith("GAI:"), "upstream.test resolved: %r" % out["gai"]
    for p in (80, 443):
        assert out["listen %d" % p] != "CONNECTED", "a listener on :%d with transparent:false" % p
    assert out["explicit"].get("status") == 200, "explicit proxy: %s\n%s" % (
        out["explicit"], eg.summary())


# ==========================================================================
# audit log

LOG_PY = INNER_LIB + r'''
sec = CFG["secret"]
out = {}
out["tls"] = tunnel_get("upstream.test:443", "upstream.test", "/log-tls?secret=" + sec + "a")
out["http"] = proxy_request(plain_get("http.test", "/log-http?secret=" + sec + "b",
                                      ("Authorization: Bearer %sc\r\nCookie: s=%sd\r\n" %
                                       (sec, sec)).encode()))
s, out["evil_connect"] = connect("evil.test:443")
out["evil_get"] = proxy_request(plain_get("evil.test", "/log-evil?token=" + sec + "e"))
s = direct("upstream.test", 443)
out["tp_tls"] = https_get(s, "upstream.test", "/log-tp?k=" + sec + "f") \
    if not isinstance(s, str) else {"state": s}
s = direct("http.test", 80)
out["tp_http"] = {"state": s}
if not isinstance(s, str):
    s.sendall(("GET /log-tp-http?q=%sg HTTP/1.1\r\nHost: http.test\r\nConnection: close\r\n\r\n"
               % sec).encode())
    out["tp_http"] = jresp(read_response(s))
    s.close()
try:
    socket.gethostbyname("evil.test")
except OSError:
    pass
out["down"] = proxy_request(plain_get("down.test:%d" % CFG["down"], "/log-down"))
print(json.dumps(out))
'''


def test_audit_log(ctx):
    """--log FILE: one JSON line per request/tunnel and per DNS query, with the
    documented fields; no query string, header value or canary in it."""
    eg = Egress(ctx)
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
    ctx.on_cleanup(dead.close)
    dport = dead.getsockname()[1]
    prof = eg.write_profile(allow=["upstream.test", "http.test", "down.test:%d" % dport],
                            hosts=eg.hosts(**{"down.test": "127.0.0.1:%d" % dport}))
    secret = "QS" + os.urandom(8).hex()
    log = log_path(ctx)
    out, r = inner_json(ctx, LOG_PY, {"ca": eg.ca, "secret": secret, "down": dport}, prof,
                        extra_args=["--log", log])
    for k in ("tls", "http", "tp_tls", "tp_http"):
        assert out[k].get("status") == 200, "%s: %s\n%s" % (k, out[k], eg.summary())
    assert out["evil_connect"]["status"] == 403 and out["evil_get"]["status"] == 403, out
    assert out["down"]["status"] == 502, "upstream refusing connections: %s" % out["down"]
    entries, raw = read_log(log, ctx)
    # The record's exec lines hold the command's argv as given (here the
    # probe's own arguments, query included): a command line, not what the
    # proxy saw.  Every other line holds no query, header value or canary.
    raw = b"\n".join(l for l in raw.split(b"\n") if b'"event":"exec"' not in l)
    scan_secrets(raw, [secret, ctx.token, ctx.env_token])
    text = raw.decode("utf-8", "replace")
    for needle in ("secret=", "token=", "?k=", "?q=", "Bearer"):
        assert needle not in text, "audit log contains %r:\n%s" % (needle, text[-3000:])
    for e in entries:
        assert isinstance(e.get("ts"), str) and isinstance(e.get("event"), str), \
            "line without ts/event: %s" % e
    reqs = requests_in(entries)
    for e in reqs:
        for f, typ in (("conn", int), ("port", int), ("status", int), ("bytes_up", int),
                       ("bytes_down", int), ("side", str), ("method", str), ("host", str),
                       ("decision", str), ("rule", str)):
            assert isinstance(e.get(f), typ) and not isinstance(e.get(f), bool), \
                "request line: %r is %r (expected %s): %s" % (f, e.get(f), typ.__name__, e)
        assert isinstance(e.get("duration_ms"), (int, float)), "duration_ms: %s" % e
        assert e["side"] in ("explicit", "transparent") and \
            e["decision"] in ("allow", "deny", "error"), e

    def one(what, **kw):
        m = find(reqs, **kw)
        assert m, "no %s line (%s) in the audit log:\n%s" % (what, kw, fmt_log(entries))
        return m[0]
    e = one("explicit CONNECT", side="explicit", method="CONNECT", host="upstream.test", port=443)
    assert e["decision"] == "allow" and e["status"] == 200 and "upstream.test" in e["rule"], e
    assert e["bytes_up"] > 0 and e["bytes_down"] > 0, e
    e = one("explicit GET", side="explicit", method="GET", host="http.test", port=80)
    assert e["path"] == "/log-http" and e["decision"] == "allow" and e["status"] == 200, e
    assert e["bytes_down"] > 0, e
    e = one("denied CONNECT", method="CONNECT", host="evil.test", port=443)
    assert e["decision"] == "deny" and e["status"] == 403 and e["rule"], e
    problems = []  # checked last, so that one missing field does not hide the rest
    e = one("denied GET", method="GET", host="evil.test", port=80)
    assert e["decision"] == "deny" and e["status"] == 403, e
    if e.get("path") != "/log-evil":
        problems.append("a denied plain-HTTP request has path %r, expected '/log-evil': %s" % (
            e.get("path"), e))
    e = one("transparent TLS", side="transparent", method="TLS", host="upstream.test", port=443)
    assert e["decision"] == "allow" and e["bytes_down"] > 0, e
    e = one("transparent GET", side="transparent", method="GET", host="http.test", port=80)
    assert e["path"] == "/log-tp-http" and e["status"] == 200, e
    e = one("unreachable upstream", host="down.test", port=dport)
    assert e["status"] == 502 and e["decision"] in ("error", "allow"), e
    if e.get("path") != "/log-down":
        problems.append("a plain-HTTP request answered 502 has path %r, expected '/log-down': %s"
                        % (e.get("path"), e))
    dns = [x for x in entries if x.get("event") == "dns"]
    assert find(dns, name="upstream.test", qtype="A", decision="allow"), \
        "no dns allow line:\n" + fmt_log(entries)
    assert find(dns, name="evil.test", decision="deny"), "no dns deny line:\n" + fmt_log(entries)
    assert not problems, "\n".join(problems)


def test_profile_log_and_cli_override(ctx):
    """network.log in the profile is used; --log overrides it."""
    eg = Egress(ctx)
    plog = os.path.join(ctx.scratch, "profile-audit.jsonl")
    clog = os.path.join(ctx.scratch, "cli-audit.jsonl")
    prof = eg.write_profile(log=plog)
    cmd = ["curl", "-sS", "-o", "/dev/null", "--max-time", "10", "--cacert", eg.ca,
           "https://upstream.test/plog"]
    r = ctx.sandbox(cmd, profile=prof)
    assert r.returncode == 0, describe(r)
    entries, _ = read_log(plog, ctx)
    assert find(requests_in(entries), host="upstream.test", decision="allow"), fmt_log(entries)
    os.unlink(plog)
    r = ctx.sandbox(cmd, profile=prof, extra_args=["--log", clog])
    assert r.returncode == 0, describe(r)
    entries, _ = read_log(clog, ctx)
    assert find(requests_in(entries), host="upstream.test", decision="allow"), fmt_log(entries)
    assert not os.path.exists(plog) or os.path.getsize(plog) == 0, \
        "--log did not override the profile's log (it was written too)"


def test_exit_summary_and_quiet(ctx):
    """On a terminal, agentbox prints a summary at exit naming denied hosts;
    --quiet suppresses it; without a terminal there is none."""
    eg = Egress(ctx)
    prof = eg.write_profile()
    script = ("curl -s -o /dev/null --max-time 5 https://evil.test/ ; "
              "curl -s -o /dev/null --max-time 5 --cacert %s https://upstream.test/ ; "
              "echo END-OF-COMMAND" % eg.ca)
    outs = {}
    for name, extra in (("summary", []), ("quiet", ["--quiet"])):
        pr = PtyRun(ctx, ["run", "-p", prof, "-w", ctx.ws] + extra + ["--", "sh", "-c", script])
        pr.expect(rb"END-OF-COMMAND", timeout=30)
        rc = pr.wait(timeout=30)
        outs[name] = pr.text()
        assert rc == 0, "%s: exit %s\n%s" % (name, rc, outs[name])
    after = outs["summary"].split("END-OF-COMMAND", 1)[1]
    assert "evil.test" in after, "no exit summary naming evil.test on a terminal:\n%r" % (
        outs["summary"],)
    assert "evil.test" not in outs["quiet"].split("END-OF-COMMAND", 1)[1], \
        "--quiet still printed a summary:\n%r" % outs["quiet"]
    r = ctx.sandbox(script, profile=prof)
    assert r.returncode == 0 and "evil.test" not in r.stderr, \
        "summary printed although stderr is not a terminal\n" + describe(r)


# ==========================================================================
# hostile input through the explicit proxy (raw sockets from inside)
