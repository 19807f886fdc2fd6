# SPDX-License-Identifier: MIT
"""Credential brokering: the sandbox holds placeholders; the proxy
puts the real value in, only where it belongs, and masks it on the way back.

Upstreams are loopback servers on the host (secrets_util.py): a TLS one for
the bound host "api.upstream.test" (verified by agentbox with the test CA
named in network.ca_file), a TLS one for the allowed but unbound
"other.upstream.test" (a blind tunnel: the client needs the test CA there), a
plain one for the allowed unbound "plain.test", and a plain one for the bound
"bound.test" (port 80).  Every upstream records exactly what it received.

Inside, clients use NO trust option for intercepted hosts: curl, python3
(urllib, ssl), node (fetch, https.get) and git trust the session CA through
the variables and the distro bundle agentbox provides.

The real values are passed to agentbox only (its environment, a file, a
command); the inner scripts get them hex-encoded when they must look for
them, so that no process inside holds the raw value in its argv.
"""

import base64
import binascii
import json
import os
import re
import select
import shutil
import stat
import subprocess
import time
import urllib.parse
import zlib

import abtest
from abtest import INNER_PY, PtyRun, ab_cmd, describe, sanitized, skip, wait_for
from secrets_util import (BOUND, BOUND_PLAIN, PLAIN, TUNNEL, Broker, encodings,
                          name_constraints, new_value, pem_certs, private_key_files,
                          x509_text)
from upstream import INNER_LIB, inner_json, read_log, server_ssl_context

NODE = "/usr/bin/node"
SRC = "AB_IT_SECRET_SRC"          # agentbox's own variable holding the value
SRC2 = "AB_IT_SECRET_SRC2"
PH_RE = re.compile(r"^[A-Za-z0-9_-]+$")
BUNDLE_VARS = ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "PIP_CERT",
               "GIT_SSL_CAINFO", "CODEX_CA_CERTIFICATE", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO")
CA_VARS = ("NODE_EXTRA_CA_CERTS", "DENO_CERT")
BUNDLE = "/run/agentbox/ca-bundle.pem"
SESSION_CA = "/run/agentbox/session-ca.pem"
DISTRO_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


# --------------------------------------------------------------------------
# host-side helpers

def secret(src, hosts=(BOUND,), places=None, prefix=None, length=None, env=None,
           mask_in_body=None, elsewhere=None):
    """One entry of the profile's "secrets"."""
    if isinstance(src, str):
        src = {"env": src}
    s = {"from": src, "hosts": list(hosts)}
    if mask_in_body is not None:
        s["mask_in_body"] = mask_in_body
    if elsewhere is not None:
        s["elsewhere"] = elsewhere
    if places is not None:
        s["in"] = list(places)
    ph = {}
    if prefix is not None:
        ph["prefix"] = prefix
    if length is not None:
        ph["length"] = length
    if ph:
        s["placeholder"] = ph
    if env is not None:
        s["env"] = env
    return s


def log_file(ctx, name="audit.jsonl"):
    return os.path.join(ctx.scratch, name)


def files_containing(roots, needles):
    """[(path, needle)] of regular files under roots that contain a needle."""
    bneedles = [n.encode() for n in needles]
    out = []
    for root in roots:
        for d, dirs, files in os.walk(root):
            for fn in files:
                p = os.path.join(d, fn)
                try:
                    if not os.path.isfile(p) or os.path.islink(p):
                        continue
                    with open(p, "rb") as f:
                        data = f.read(16 << 20)
                except OSError:
                    continue
                for n, bn in zip(needles, bneedles):
                    if bn in data:
                        out.append((p, n))
    return out


def assert_value_nowhere(ctx, values, runs=(), logs=(), what=""):
    """The real values are in no agentbox output, no audit log, no file of
    the workspace or the fake HOME."""
    for r in runs:
        for v in values:
            assert v not in (r.stdout or "") and v not in (r.stderr or ""), \
                "%sa secret's real value is in agentbox's output\n%s" % (
                    what, redact(describe(r), values))
    for lp in logs:
        if os.path.exists(lp):
            with open(lp, "rb") as f:
                raw = f.read()
            for v in values:
                assert v.encode() not in raw, "%sthe real value is in the audit log %s" % (
                    what, lp)
    hits = files_containing([ctx.ws, ctx.home], values)
    assert not hits, "%sthe real value is in files after the run: %s" % (
        what, sorted({p for p, _ in hits}))


def redact(text, values):
    """text with the real values replaced (for assertion messages)."""
    for v in values:
        text = text.replace(v, "<VALUE>")
    return text


def requests_in(log):
    return [e for e in log if e.get("event") == "request"]


def fmt_log(log, n=40):
    return "\n".join(json.dumps(e, sort_keys=True) for e in log[-n:])


def find_lines(log, **kw):
    return [e for e in requests_in(log) if all(e.get(k) == v for k, v in kw.items())]


def hexed(*values):
    return [binascii.hexlify(v.encode()).decode() for v in values]


def parse_out(r):
    assert r.returncode == 0, "inner script failed\n" + describe(r)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("inner script printed no JSON\n" + describe(r))


# Runs CFG["cmds"] ({"name", "sh", "env"}) with sh -c; prints
# {"vars": {NAME: value inside}, "res": {name: {"rc","out","err"}}}.
RUN_PY = INNER_LIB + r'''
out = {"vars": {k: os.environ.get(k) for k in CFG.get("vars", [])}, "res": {}}
for c in CFG["cmds"]:
    out["res"][c["name"]] = run(["sh", "-c", c["sh"]], env=c.get("env"),
                                timeout=c.get("timeout", 40))
print(json.dumps(out))
'''


def run_cmds(ctx, prof, cmds, vars_=("KEY",), env=None, extra_args=(), timeout=90):
    r = ctx.sandbox([INNER_PY, "-c", RUN_PY, json.dumps({"cmds": cmds, "vars": list(vars_)})],
                    profile=prof, env=env, extra_args=extra_args, timeout=timeout)
    return parse_out(r), r


def curl_cmd(name, url, *args, noproxy=False, env=None):
    a = " ".join(args)
    sh = "curl -sS --max-time 15 -w '\\n%%{http_code}' %s%s '%s'" % (
        "--noproxy '*' " if noproxy else "", a, url)
    return {"name": name, "sh": sh, "env": env}


def curl_result(res):
    """(rc, http code, body text, parsed JSON or None)"""
    body, _, last = res["out"].rpartition("\n")
    code = int(last) if last.strip().isdigit() else None
    try:
        js = json.loads(body)
    except ValueError:
        js = None
    return res["rc"], code, body, js


NOPROXY = {k: None for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}


# ==========================================================================
# The swap, for real clients that were given no trust option

PYCLIENT = r'''
import http.client, json, os, ssl, sys, urllib.request
mode, url, hname = sys.argv[1], sys.argv[2], sys.argv[3]
ph = os.environ["KEY"]
hval = ("Bearer " + ph) if hname == "authorization" else ph
try:
    if mode == "urllib":
        req = urllib.request.Request(url, headers={hname: hval})
        r = urllib.request.urlopen(req, timeout=10)
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
    else:  # http.client ignores the proxy variables: the transparent path
        host, path = url.split("/", 3)[2], "/" + url.split("/", 3)[3]
        h = http.client.HTTPSConnection(host, 443, timeout=10,
                                        context=ssl.create_default_context())
        h.request("GET", path, headers={hname: hval})
        r = h.getresponse()
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except Exception as e:
    print(json.dumps({"status": None, "error": "%s: %s" % (type(e).__name__, e)}))
'''

NODECLIENT = r'''
const https = require('https');
const ph = process.env.KEY;
function get(url) {
  return new Promise(res => {
    const req = https.get(url, {headers: {'x-api-key': ph}}, r => {
      let b = ''; r.setEncoding('utf8');
      r.on('data', d => b += d);
      r.on('end', () => res({status: r.statusCode, body: b}));
    });
    req.on('error', e => res({error: String(e.code || e)}));
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
  });
}
(async () => {
  const out = {};
  try {
    const r = await fetch('https://api.upstream.test/node-fetch',
                          {headers: {authorization: 'Bearer ' + ph},
                           signal: AbortSignal.timeout(10000)});
    out.fetch = {status: r.status, body: await r.text()};
  } catch (e) { out.fetch = {error: String((e.cause && (e.cause.code || e.cause.message)) || e)} }
  out.get = await get('https://api.upstream.test/node-get');
  console.log(JSON.stringify(out));
})();
'''


def test_swap_real_clients(ctx):
    """curl (explicit proxy, transparent, distro bundle path, -u Basic,
    keep-alive), python3 (urllib; http.client with and without SSL_CERT_FILE)
    and node (fetch, https.get) send the placeholder; the upstream receives
    the real value; the echo of it comes back masked; the audit log names
    the secret, never the value."""
    val = new_value()
    b = Broker(ctx, [val])
    log = log_file(ctx)
    prof = b.write_profile({"KEY": secret(SRC)})
    pyc = ctx.host_file(os.path.join(ctx.ws, "pyclient.py"), PYCLIENT)
    nodec = ctx.host_file(os.path.join(ctx.ws, "nodeclient.js"), NODECLIENT)
    base = "https://%s" % BOUND
    cmds = [
        curl_cmd("curl_explicit", base + "/curl-explicit", "--compressed",
                 '-H "x-api-key: $KEY"'),
        curl_cmd("curl_transparent", base + "/curl-transparent",
                 '-H "Authorization: Bearer $KEY"', noproxy=True),
        curl_cmd("curl_distro", base + "/curl-distro", '-H "X-API-Key: $KEY"',
                 env={"CURL_CA_BUNDLE": None, "SSL_CERT_FILE": None}),
        curl_cmd("curl_basic", base + "/curl-basic", '-u "user:$KEY"'),
        # two requests on one kept-alive intercepted connection
        curl_cmd("curl_keepalive", base + "/curl-ka-2", '-H "x-api-key: $KEY"',
                 base + "/curl-ka-1"),
        {"name": "py_urllib", "sh": "%s %s urllib %s/py-urllib authorization" % (
            INNER_PY, pyc, base)},
        {"name": "py_raw", "sh": "%s %s raw %s/py-raw x-api-key" % (INNER_PY, pyc, base)},
        {"name": "py_raw_nocertvar", "sh": "%s %s raw %s/py-nocertvar x-api-key" % (
            INNER_PY, pyc, base), "env": {"SSL_CERT_FILE": None, "REQUESTS_CA_BUNDLE": None}},
    ]
    have_node = os.path.exists(NODE)
    if have_node:
        cmds.append({"name": "node", "sh": "%s %s" % (NODE, nodec)})
    out, r = run_cmds(ctx, prof, cmds, env={SRC: val}, extra_args=["--log", log], timeout=120)
    ph = out["vars"]["KEY"]
    res = out["res"]
    assert ph and ph != val and PH_RE.match(ph) and len(ph) == len(val), \
        "the placeholder inside is %r (value length %d)" % (ph, len(val))
    problems = []

    def got(marker, header, want, what):
        seen = b.api.header(marker, header)
        if not seen:
            problems.append("%s: the upstream saw no request %s (%s)" % (
                what, marker, res.get(what)))
        elif any(x != want for x in seen):
            problems.append("%s: the upstream received %s: %r, expected the real value" % (
                what, header, ["<placeholder>" if ph in x else x for x in seen]))

    for name, marker, hdr, want in (
            ("curl_explicit", "/curl-explicit", "x-api-key", val),
            ("curl_transparent", "/curl-transparent", "authorization", "Bearer " + val),
            ("curl_distro", "/curl-distro", "x-api-key", val)):
        rc, code, body, js = curl_result(res[name])
        if rc != 0 or code != 200 or not js:
            problems.append("%s: %s" % (name, res[name]))
            continue
        got(marker, hdr, want, name)
        echoed = js["headers"].get(hdr)
        if echoed != want.replace(val, ph):
            problems.append("%s: the echo of %s reached the client as %r, expected the "
                            "placeholder (masked)" % (name, hdr, echoed))
    rc, code, body, js = curl_result(res["curl_basic"])
    bb = "Basic " + base64.b64encode(("user:" + val).encode()).decode()
    if rc != 0 or code != 200:
        problems.append("curl_basic: %s" % res["curl_basic"])
    else:
        got("/curl-basic", "authorization", bb, "curl_basic")
    if res["curl_keepalive"]["rc"] != 0:
        problems.append("curl_keepalive: %s" % res["curl_keepalive"])
    else:
        for m in ("/curl-ka-1", "/curl-ka-2"):
            got(m, "x-api-key", val, "curl_keepalive " + m)
    ae = [v for k, v in (b.api.find("/curl-explicit") or [{"headers": []}])[0]["headers"]
          if k == "accept-encoding"]
    if ae != ["identity"]:
        problems.append("curl --compressed: Accept-Encoding upstream %r, expected ['identity']"
                        % ae)
    for name, marker, hdr, want in (
            ("py_urllib", "/py-urllib", "authorization", "Bearer " + val),
            ("py_raw", "/py-raw", "x-api-key", val),
            ("py_raw_nocertvar", "/py-nocertvar", "x-api-key", val)):
        try:
            v = json.loads(res[name]["out"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            v = {"status": None, "error": res[name]}
        if v.get("status") != 200:
            problems.append("%s: %s" % (name, v))
            continue
        got(marker, hdr, want, name)
    if have_node:
        try:
            nv = json.loads(res["node"]["out"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            nv = {}
        for k, marker, hdr, want in (("fetch", "/node-fetch", "authorization", "Bearer " + val),
                                     ("get", "/node-get", "x-api-key", val)):
            if (nv.get(k) or {}).get("status") != 200:
                problems.append("node %s: %s / %s" % (k, nv.get(k), res["node"]))
                continue
            got(marker, hdr, want, "node " + k)
    for name, v in res.items():
        if val in v["out"] or val in v["err"]:
            problems.append("%s: the real value reached the sandbox: %s" % (name, v))
    # nothing of the placeholder went anywhere unswapped
    if ph in b.api.everything():
        problems.append("the bound upstream received the placeholder somewhere")

    entries, raw = read_log(log, ctx)
    for path in ("/curl-explicit", "/curl-transparent", "/py-urllib", "/py-raw"):
        ls = find_lines(entries, host=BOUND, path=path)
        if not ls or ls[0].get("intercepted") is not True or ls[0].get("secrets") != "KEY" \
                or ls[0].get("decision") != "allow" or ls[0].get("status") != 200:
            problems.append("audit line of %s: %s" % (path, ls))
    sides = {e.get("side") for e in find_lines(entries, host=BOUND, secrets="KEY")}
    if sides != {"explicit", "transparent"}:
        problems.append("intercepted requests seen on sides %s, expected both" % sides)
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r], [log])


def test_swap_git(ctx):
    """git clone over https from the bound host, which requires the real
    value: a token given with http.extraHeader (explicit proxy), and
    credentials in the URL (transparent path: git answers the 401 with
    Basic base64(user:placeholder), which the proxy swaps)."""
    val = new_value()
    b = Broker(ctx, [val], git=True)
    log = log_file(ctx)
    prof = b.write_profile({"KEY": secret(SRC)})
    base = "https://%s" % BOUND
    gitenv = {"GIT_TERMINAL_PROMPT": "0"}
    cmds = [
        {"name": "git_header", "env": gitenv, "sh":
            'git -c http.extraHeader="Authorization: Bearer $KEY" clone -q '
            '%s/gitauth/repo.git %s/clone-header && cat %s/clone-header/hello.txt' % (
                base, ctx.ws, ctx.ws)},
        {"name": "git_url", "env": dict(gitenv, **NOPROXY), "sh":
            'git clone -q "https://x-access-token:$KEY@%s/gitauth/repo.git" %s/clone-url '
            '&& cat %s/clone-url/hello.txt' % (BOUND, ctx.ws, ctx.ws)},
    ]
    out, r = run_cmds(ctx, prof, cmds, env={SRC: val}, extra_args=["--log", log], timeout=120)
    res = out["res"]
    problems = []
    for name in ("git_header", "git_url"):
        if res[name]["rc"] != 0 or res[name]["out"] != b.git_text:
            problems.append("git %s: %s" % (name, res[name]))
    auths = b.api.header("/gitauth/", "authorization")
    basic = "Basic " + base64.b64encode(("x-access-token:" + val).encode()).decode()
    if "Bearer " + val not in auths:
        problems.append("git http.extraHeader: the upstream never got 'Bearer <value>'")
    if basic not in auths:
        problems.append("git URL credentials: the upstream never got Basic "
                        "base64(x-access-token:<value>) (%d Authorization headers seen)" % (
                            len(auths),))
    entries, _ = read_log(log, ctx)
    git_lines = [e for e in find_lines(entries, host=BOUND)
                 if (e.get("path") or "").startswith("/gitauth/")]
    if not any(e.get("secrets") == "KEY" for e in git_lines):
        problems.append("no git request with secrets KEY in the log:\n" + fmt_log(git_lines))
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r], [log])


# ==========================================================================
# What the sandbox sees: environment, files, /proc, trust

INSIDE_PY = INNER_LIB + r'''
import binascii, hashlib, re as _re
vals = [binascii.unhexlify(h) for h in CFG["hex"]]
out = {"env": dict(os.environ), "hits": [], "keys": []}
def look(where, data):
    for i, v in enumerate(vals):
        if v in data:
            out["hits"].append([where, i])
for p in ["/proc/self/environ", "/proc/1/environ"]:
    try:
        look(p, open(p, "rb").read())
    except OSError as e:
        out.setdefault("unreadable", []).append(p + ": " + ename(e))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("cmdline", "environ"):
            try:
                look("/proc/%s/%s" % (pid, f), open("/proc/%s/%s" % (pid, f), "rb").read())
            except OSError:
                pass
for k, v in os.environ.items():
    look("env " + k, v.encode())
pem_key = _re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
nfiles = 0
for root in CFG["roots"]:
    for d, dirs, files in os.walk(root):
        if d.startswith(("/proc", "/sys")):
            dirs[:] = []
            continue
        for fn in files:
            p = os.path.join(d, fn)
            try:
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                data = open(p, "rb").read(8 << 20)
            except OSError:
                continue
            nfiles += 1
            look(p, data)
            if root != "/etc" and pem_key.search(data):
                out["keys"].append(p)
out["nfiles"] = nfiles
def rd(p):
    try:
        return open(p).read()
    except OSError as e:
        return "ERR " + ename(e)
out["distro"] = rd(CFG["distro"])
out["bundle"] = rd(CFG["bundle"])
out["ca"] = rd(CFG["session_ca"])
# one intercepted request, so that a leaf was minted before the disk is searched
s = direct(CFG["bound"], 443)
if isinstance(s, str):
    out["tls"] = s
else:
    t = ssl.create_default_context().wrap_socket(s, server_hostname=CFG["bound"])
    t.sendall(("GET /inside-view HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\n\r\n" % (
        CFG["bound"], os.environ.get("KEY"))).encode())
    out["tls"] = jresp(read_response(t))
# the chain the interception presents (leaf + issuing CA), for the host's key search
try:
    sc = subprocess.run(["openssl", "s_client", "-connect", CFG["bound"] + ":443",
                         "-servername", CFG["bound"], "-showcerts"], input=b"", timeout=20,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    out["chain"] = "\n".join(_re.findall(r"-----BEGIN CERTIFICATE-----\n.*?"
                                          r"-----END CERTIFICATE-----", sc, _re.S))
except (OSError, subprocess.SubprocessError) as e:
    out["chain"] = "ERR %s" % e
print(json.dumps(out), flush=True)
# wait for the host to search its disk while we run
deadline = time.monotonic() + 30
while not os.path.exists(CFG["go"]) and time.monotonic() < deadline:
    time.sleep(0.05)
'''


def _openssl_out(args, data=None):
    r = subprocess.run(["openssl"] + args, input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    return r.stdout.decode() if r.returncode == 0 else None


def _pubkeys_of_certs(pems):
    out = set()
    for pem in pems:
        k = _openssl_out(["x509", "-noout", "-pubkey"], pem.encode())
        if k:
            out.add(k.strip())
    return out


def _new_key_files(stamp):
    """Regular files (outside /proc, /sys) changed after stamp that hold a PEM
    private-key block."""
    r = subprocess.run(["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")",
                        "-prune", "-o", "-type", "f", "(", "-newer", stamp, "-o", "-cnewer",
                        stamp, ")", "-size", "-4M", "-print0"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    out = []
    for p in r.stdout.split(b"\0"):
        if not p:
            continue
        try:
            with open(p, "rb") as f:
                if b"PRIVATE KEY-----" in f.read(4 << 20):
                    out.append(p.decode("utf-8", "replace"))
        except OSError:
            pass
    return out


def _session_keys_on_disk(paths, pubkeys):
    """The files among paths whose private key belongs to one of pubkeys (the
    session CA, its issuing CA, the leaves).  Matching by public key keeps
    keys other concurrent test runs create out of it."""
    hits = []
    for p in paths:
        k = _openssl_out(["pkey", "-in", p, "-pubout", "-passin", "pass:"])
        if k and k.strip() in pubkeys:
            hits.append(p)
    return hits


def _isolated_tmp_cmd(ctx, args):
    """argv running agentbox with fresh host directories bound over /tmp,
    /var/tmp and /dev/shm in a private mount namespace, so that whatever
    agentbox leaves there is found without confusing it with concurrent test
    runs.  The entries this test needs there (its own directories, the
    agentbox binary's tree) are bound back at their paths.
    Returns (argv, {"/tmp": dir, ...}, set of the kept mount points)."""
    fake = os.path.join(ctx.tbase, "fake")
    dirs = {"/tmp": os.path.join(fake, "tmp"), "/var/tmp": os.path.join(fake, "vartmp"),
            "/dev/shm": os.path.join(fake, "shm")}
    for d in dirs.values():
        os.makedirs(d)
        os.chmod(d, 0o1777)
    binds, kept = [], set()
    for path in (ctx.tbase, ctx.vbase, abtest.BINARY):
        for root, d in dirs.items():
            if path.startswith(root + "/"):
                top = path[len(root) + 1:].split("/")[0]
                hold = os.path.join(d, top)
                if hold not in kept:
                    os.mkdir(hold)
                    kept.add(hold)
                    binds += [os.path.join(root, top), hold]
    script = ('while [ $# -gt 0 ] && [ "$1" != -- ]; do mount --rbind "$1" "$2"; shift 2; '
              'done; shift; mount --rbind "$1" /tmp; mount --rbind "$2" /var/tmp; '
              'mount --rbind "$3" /dev/shm; shift 3; exec "$@"')
    return (["unshare", "-m", "--propagation", "private", "sh", "-ec", script, "sh"] + binds +
            ["--", dirs["/tmp"], dirs["/var/tmp"], dirs["/dev/shm"]] + ab_cmd(args, ctx.user),
            dirs, kept)


def test_inside_view_trust_and_disk(ctx):
    """Inside: only placeholders (environment, /proc, files), even with
    env.pass naming the source variables; the trust files and variables;
    the session CA's name constraints are exactly the bound hosts; no CA
    key on disk during or after the run; nothing left in /tmp."""
    v1, v2 = new_value(), new_value("k2-")
    b = Broker(ctx, [v1, v2])
    secrets_ = {
        "KEY": secret(SRC),
        "KEY2": secret({"env": SRC2}, hosts=["*.w.upstream.test", BOUND_PLAIN]),
        # the host's ANTHROPIC_API_KEY (the env canary): the same name inside
        "ANTHROPIC_API_KEY": secret("ANTHROPIC_API_KEY", prefix="sk-ant-"),
    }
    prof = b.write_profile(secrets_, allow=[BOUND, TUNNEL, PLAIN, "*.w.upstream.test",
                                            BOUND_PLAIN],
                           extra={"env": {"pass": [SRC, SRC2, "ANTHROPIC_API_KEY", "KEY"]}})
    values = [v1, v2, ctx.env_token]
    go = os.path.join(ctx.ws, ".go")
    stamp = os.path.join(ctx.scratch, "stamp")
    open(stamp, "w").close()
    time.sleep(0.01)
    before_keys = private_key_files([ctx.ws, ctx.home])
    cfg = {"hex": hexed(*values), "go": go, "bound": BOUND, "distro": DISTRO_BUNDLE,
           "bundle": BUNDLE, "session_ca": SESSION_CA,
           "roots": ["/run", "/tmp", "/var/tmp", "/dev/shm", "/etc", ctx.home, ctx.ws]}
    if not abtest.IS_ROOT:
        skip("the isolated /tmp of this test needs a root runner (unshare -m)")
    argv, fakes, hold = _isolated_tmp_cmd(ctx, [
        "run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", INSIDE_PY, json.dumps(cfg)])
    p = subprocess.Popen(argv, env=ctx.env({SRC: v1, SRC2: v2}), cwd=ctx.ws,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.cmdline = argv
    ctx.procs.append(p)
    line = b""
    deadline = time.monotonic() + 40
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        rr, _, _ = select.select([p.stdout], [], [], 0.5)
        if rr:
            d = os.read(p.stdout.fileno(), 1 << 20)
            if not d:
                break
            line += d
    during = _new_key_files(stamp)  # the sandbox is still running
    ctx.host_file(go, "")
    try:
        rest, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    stdout, stderr = (line + rest).decode("utf-8", "replace"), err.decode("utf-8", "replace")
    assert p.returncode == 0, "exit %s\nstdout: %s\nstderr: %s" % (
        p.returncode, stdout[-3000:], stderr[-3000:])
    out = json.loads(stdout.strip().splitlines()[0])
    after = _new_key_files(stamp)
    left = {}
    # the user's control directory stays (made once, like tmux's), but empty
    ctl = "agentbox-%d" % ctx.uid
    for where, d in fakes.items():
        names = [n for n in os.listdir(d) if os.path.join(d, n) not in hold and
                 not (n == ctl and not os.listdir(os.path.join(d, n)))]
        if names:
            left[where] = names

    env = out["env"]
    problems = []
    for v in values:
        if v in stdout or v in stderr:
            problems.append("a real value is in agentbox's output")
    if out["hits"]:
        problems.append("real values seen inside: %s" % out["hits"])
    if out["nfiles"] < 3:
        problems.append("the inside file search read only %d files" % out["nfiles"])
    for n in (SRC, SRC2):
        if n in env:
            problems.append("the source variable %s crossed (env.pass lists it): %r" % (
                n, "<value>" if env[n] in values else env[n]))
    for n, vl, pre in (("KEY", len(v1), ""), ("KEY2", len(v2), ""),
                       ("ANTHROPIC_API_KEY", len(ctx.env_token), "sk-ant-")):
        ph = env.get(n)
        if not ph or not PH_RE.match(ph) or ph in values or not ph.startswith(pre) or \
                len(ph) != max(vl, len(pre) + 22):
            problems.append("%s inside is %r" % (n, ph))
    if len({env.get("KEY"), env.get("KEY2"), env.get("ANTHROPIC_API_KEY")}) != 3:
        problems.append("placeholders are not distinct")
    for n in BUNDLE_VARS:
        if env.get(n) != BUNDLE:
            problems.append("%s inside is %r, expected %s" % (n, env.get(n), BUNDLE))
    for n in CA_VARS:
        if env.get(n) != SESSION_CA:
            problems.append("%s inside is %r, expected %s" % (n, env.get(n), SESSION_CA))
    if (out.get("tls") or {}).get("status") != 200:
        problems.append("intercepted request with the default trust: %s" % out.get("tls"))
    elif b.api.header("/inside-view", "x-api-key") != [v1]:
        problems.append("the upstream did not receive the real value for /inside-view")

    # trust files: the distro bundle and ca-bundle.pem = system roots + session CA
    ca_certs = pem_certs(out["ca"])
    with open(DISTRO_BUNDLE) as f:
        host_certs = pem_certs(f.read())
    if len(ca_certs) != 1:
        problems.append("%s holds %d certificates (expected the CA alone): %r" % (
            SESSION_CA, len(ca_certs), out["ca"][:200]))
    for name, text in ((DISTRO_BUNDLE, out["distro"]), (BUNDLE, out["bundle"])):
        certs = pem_certs(text)
        if set(certs) != set(host_certs) | set(ca_certs) or len(certs) != len(host_certs) + 1:
            problems.append("%s inside: %d certificates, expected the %d of the host + the "
                            "session CA (CA in it: %s)" % (
                                name, len(certs), len(host_certs),
                                bool(ca_certs) and ca_certs[0] in certs))
    if ca_certs:
        pem = ctx.host_file(os.path.join(ctx.scratch, "session-ca.pem"), ca_certs[0] + "\n")
        text = x509_text(pem)
        nc = name_constraints(text)
        if nc is None:
            problems.append("the session CA has no nameConstraints:\n" + text)
        else:
            crit, perm, excl = nc
            want = {"DNS:" + BOUND, "DNS:.w.upstream.test", "DNS:" + BOUND_PLAIN}
            if not crit:
                problems.append("the nameConstraints extension is not critical")
            if set(perm) != want:
                problems.append("permitted names %s, expected exactly %s" % (perm, sorted(want)))
            for x in ("DNS:." + BOUND, "DNS:." + BOUND_PLAIN):
                if x not in excl:
                    problems.append("excluded names %s lack %s (subdomains of a bound "
                                    "host)" % (excl, x))
            if not any(x.startswith("IP:") for x in excl):
                problems.append("no IP exclusion in the name constraints: %s" % excl)
        if "CA:TRUE" not in text:
            problems.append("the session CA is not a CA:\n" + text)

    # the CA keys: not on disk inside, nor on the host during or after the run
    if out["keys"]:
        problems.append("PEM private keys inside the sandbox: %s" % out["keys"])
    chain = pem_certs(out.get("chain") or "")
    if len(chain) < 2:
        problems.append("openssl s_client inside did not show the intercepted chain: %r" % (
            (out.get("chain") or "")[:300],))
    pubkeys = _pubkeys_of_certs(chain + ca_certs)
    for when, found in (("during", during), ("after", after)):
        hits = _session_keys_on_disk(found, pubkeys)
        if hits:
            problems.append("a session CA/leaf private key is on disk %s the run: %s" % (
                when, hits))
        ours = [f for f in found if f.startswith((ctx.tbase + "/", ctx.vbase + "/"))]
        if ours:
            problems.append("PEM private-key files appeared %s the run in this test's "
                            "directories: %s" % (when, ours))
    if private_key_files([ctx.ws, ctx.home]) != before_keys:
        problems.append("private-key files changed in the workspace/HOME")
    if left:
        problems.append("left behind after exit: %s" % left)
    assert not problems, redact("\n".join(problems), values)
    hits = files_containing([ctx.ws, ctx.home], [v1, v2])
    assert not hits, "the real value is in files after the run: %s" % hits


def _descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        todo += kids.get(q, [])
    return out


def _memory_holds(pid, needle, cap=256 << 20):
    """True if a readable mapping of pid contains needle (root runner)."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as m:
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if "r" not in perms or hi - lo > cap or line.endswith("[vsyscall]"):
                continue
            try:
                m.seek(lo)
                if needle in m.read(hi - lo):
                    return True
            except (OSError, OverflowError, ValueError):
                continue
    return False


def test_parent_not_readable_by_same_user(ctx):
    """agentbox's parent holds the real values: once it does, it is not
    dumpable, so another process of the same user (outside the sandbox) can
    neither read its memory nor its environment, nor ptrace it."""
    if not abtest.IS_ROOT or ctx.user != "nobody":
        skip("needs a root runner to act as the same unprivileged user")
    val = new_value()
    b = Broker(ctx, [val])
    prof = b.write_profile({"KEY": secret(SRC)})
    go = os.path.join(ctx.ws, ".go")
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c",
                   "echo ready; while [ ! -e %s ]; do sleep 0.05; done" % go], env={SRC: val})
    try:
        assert wait_for(lambda: os.path.exists("/proc/%d" % p.pid) and any(
            os.readlink("/proc/%d/ns/pid" % q) != os.readlink("/proc/self/ns/pid")
            for q in _descendants(p.pid)), 20), "the sandbox never started"
        time.sleep(0.3)  # the broker has read the values by the time the command runs
        for what in ("environ", "mem", "maps"):
            r = subprocess.run(["setpriv", "--reuid=%d" % abtest.NOBODY_UID,
                                "--regid=%d" % abtest.NOBODY_GID, "--clear-groups",
                                "cat", "/proc/%d/%s" % (p.pid, what)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
            assert r.returncode != 0 and val.encode() not in r.stdout, \
                "the same user read agentbox's /proc/PID/%s" % what
    finally:
        ctx.host_file(go, "")
        p.communicate(timeout=20)


def test_value_not_in_sandbox_memory(ctx):
    """No process in the sandbox's pid namespace (agentbox's own init
    included) holds the real value, in its environ or its memory: the issue
    says the value never exists inside the sandbox, memory included.  (Seen
    from the host, which may read any process; agentbox's parent, outside,
    holds the value by design.)"""
    if not abtest.IS_ROOT:
        skip("reading the memory of the sandbox's processes needs a root runner")
    if sanitized():
        skip("an ASan build: the sanitizer runtime keeps its own copy of the environment "
             "block agentbox started with (the plain build is checked)")
    val = new_value()
    b = Broker(ctx, [val])
    prof = b.write_profile({"KEY": secret(SRC)})
    go = os.path.join(ctx.ws, ".go")
    p = ctx.popen(["run", "-p", prof, "-w", ctx.ws, "--", "sh", "-c",
                   "echo ready; while [ ! -e %s ]; do sleep 0.05; done" % go], env={SRC: val})
    line = b""
    deadline = time.monotonic() + 20
    while b"ready" not in line and time.monotonic() < deadline:
        rr, _, _ = select.select([p.stdout], [], [], 0.5)
        if rr:
            d = os.read(p.stdout.fileno(), 4096)
            if not d:
                break
            line += d
    host_ns = os.readlink("/proc/self/ns/pid")
    inside, problems = [], []
    try:
        assert b"ready" in line, "the sandbox never started: %r" % line
        for q in _descendants(p.pid):
            try:
                if os.readlink("/proc/%d/ns/pid" % q) == host_ns:
                    continue
                with open("/proc/%d/cmdline" % q, "rb") as f:
                    what = "pid %d (%s)" % (q, f.read()[:40].replace(b"\0", b" ").decode(
                        "utf-8", "replace").strip())
                inside.append(what)
                with open("/proc/%d/environ" % q, "rb") as f:
                    if val.encode() in f.read():
                        problems.append("%s: the real value is in its environ" % what)
                if _memory_holds(q, val.encode()):
                    problems.append("%s: the real value is in its memory" % what)
            except (OSError, ValueError):
                continue
    finally:
        ctx.host_file(go, "")
        try:
            p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
    assert len(inside) >= 2, "found only %s in the sandbox's pid namespace" % inside
    assert not problems, "\n".join(problems) + (
        "\n(likely the environment block agentbox was started with, %s=<value>, inherited "
        "by the processes it clones)" % SRC)


# ==========================================================================
# Exfiltration: the placeholder where it may not go

EXFIL_PY = INNER_LIB + r'''
import base64
ph = os.environ["KEY"]
out = {"ph": ph}
B, T = CFG["bound"], CFG["tunnel"]
def plain(host, path, hdrs="", body=b"", method="GET"):
    raw = ("%s http://%s%s HTTP/1.1\r\nHost: %s\r\n%s" % (method, host, path, host, hdrs)).encode()
    if body:
        raw += b"Content-Length: %d\r\n" % len(body)
    return proxy_request(raw + b"Connection: close\r\n\r\n" + body)
def tls(host, transparent=False, ctx=None):
    s = direct(host, 443) if transparent else connect(host + ":443")[0]
    if s is None or isinstance(s, str):
        raise OSError("no connection: %s" % (s,))
    return (ctx or ssl.create_default_context()).wrap_socket(s, server_hostname=host)
def bound(raw, transparent=False, late=None, host=None):
    try:
        t = tls(host or B, transparent)
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": "tls:" + ename(e)}
    try:
        t.sendall(raw)
        if late is not None:
            time.sleep(0.5)
            try:
                t.sendall(late)
            except OSError as e:
                return {"status": None, "state": "send:" + ename(e)}
        return jresp(read_response(t, 5))
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": ename(e)}
    finally:
        t.close()
def get(path, hdrs=""):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (path, B, hdrs)).encode()
def post(path, body, hdrs="", chunks=None):
    h = "POST %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n" % (path, B, hdrs)
    if chunks is None:
        return (h + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body
    raw = (h + "Transfer-Encoding: chunked\r\n\r\n").encode()
    for c in chunks:
        raw += b"%x\r\n" % len(c) + c + b"\r\n"
    return raw + b"0\r\n\r\n"
pct = "".join("%%%02X" % ord(c) for c in ph)
basic = base64.b64encode(("user:" + ph).encode()).decode()
# unbound hosts over plain HTTP (explicit proxy and the transparent path)
out["plain_hdr"] = plain("plain.test", "/x-plain-hdr", "Authorization: Bearer %s\r\n" % ph)
out["plain_query"] = plain("plain.test", "/x-plain-query?k=" + ph)
out["plain_pct_query"] = plain("plain.test", "/x-plain-pct?k=" + pct)
out["plain_basic"] = plain("plain.test", "/x-plain-basic", "Authorization: Basic %s\r\n" % basic)
out["plain_body"] = plain("plain.test", "/x-plain-body", body=b'{"k":"' + ph.encode() + b'"}',
                          method="POST")
s = direct("plain.test", 80)
if isinstance(s, str):
    out["plain_transparent"] = {"status": None, "state": s}
else:
    s.sendall(("GET /x-plain-tp HTTP/1.1\r\nHost: plain.test\r\nx-api-key: %s\r\n"
               "Connection: close\r\n\r\n" % ph).encode())
    out["plain_transparent"] = jresp(read_response(s))
    s.close()
# the bound host, places not allowed
out["bound_other_hdr"] = bound(get("/x-bound-hdr", "X-Other: %s\r\n" % ph))
out["bound_path"] = bound(get("/x-bound-path/%s/x" % ph))
out["bound_query"] = bound(get("/x-bound-query?k=%s" % ph))
out["bound_query_tp"] = bound(get("/x-bound-qtp?k=%s" % ph), transparent=True)
out["bound_body"] = bound(post("/x-bound-body", b'{"k":"' + ph.encode() + b'"}'))
out["bound_chunked"] = bound(post("/x-bound-chunked", None, chunks=[
    b'{"k":"' + ph[:7].encode(), ph[7:].encode() + b'"}']))
late_body = b'{"pad":"' + b"z" * 100 + b'","k":"' + ph.encode() + b'"}'
out["bound_body_late"] = bound(
    ("POST /x-bound-late HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close"
     "\r\n\r\n" % (B, len(late_body))).encode(), late=late_body)
out["bound_ok"] = bound(get("/x-bound-ok", "x-api-key: %s\r\n" % ph))
# an allowed TLS host the secret is not bound to: a blind tunnel
try:
    t = tls(T, ctx=ssl.create_default_context(cafile=CFG["ca"]))
    t.sendall(("GET /x-tunnel HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n"
               % (T, ph)).encode())
    out["tunnel"] = jresp(read_response(t))
    t.close()
except (OSError, ssl.SSLError) as e:
    out["tunnel"] = {"status": None, "state": ename(e)}
for k, tp in (("tunnel_default_trust", False), ("tunnel_default_trust_tp", True)):
    try:
        t = tls(T, transparent=tp)  # the session trust does not vouch for a blind tunnel
        out[k] = {"status": "handshake ok"}
        t.close()
    except (OSError, ssl.SSLError) as e:
        out[k] = {"status": None, "state": ename(e)}
print(json.dumps(out))
'''


def test_exfiltration_blocked(ctx):
    """With network.placeholder_elsewhere "refuse": a placeholder in a
    plain-HTTP request to an allowed unbound host, and (whatever that says) in
    a place not allowed (another header, the path, the query, the body) of a
    request to the bound host: 403 "agentbox ..." naming the secret and the
    place, logged as exfiltration, nothing reaches the upstream.  Through a
    blind tunnel to an unbound host it arrives as the worthless placeholder.
    (test_placeholder_elsewhere_forwarded: the default.)"""
    val = new_value()
    b = Broker(ctx, [val])
    log = log_file(ctx)
    # PORTKEY is bound to other.upstream.test:8443 only: port 443 stays a blind tunnel
    prof = b.write_profile({"KEY": secret(SRC),
                            "PORTKEY": secret(SRC, hosts=[TUNNEL + ":8443"],
                                              places=["header:x-port-key"])},
                           allow=[BOUND, TUNNEL, PLAIN, TUNNEL + ":8443"],
                           net_extra={"placeholder_elsewhere": "refuse"})
    out, r = inner_json(ctx, EXFIL_PY, {"bound": BOUND, "tunnel": TUNNEL, "ca": b.ca_ws}, prof,
                        env={SRC: val}, extra_args=["--log", log])
    ph = out["ph"]
    problems = []
    for k, needles in (
            ("plain_hdr", ("plain.test", "secrets.KEY.hosts",
                           'set secrets.KEY.elsewhere to "forward"')),
            ("plain_query", ("plain.test",)),
            ("plain_pct_query", ("plain.test",)),
            ("plain_basic", ("plain.test",)),
            ("plain_body", ("plain.test",)),
            ("plain_transparent", ("plain.test",)),
            ("bound_other_hdr", ("x-other", "secrets.KEY.in")),
            ("bound_path", ("path",)),
            ("bound_query", ("query", '"query"', "secrets.KEY.in")),
            ("bound_query_tp", ("query",)),
            ("bound_body", ("body", '"body"', "secrets.KEY.in"))):
        v = out[k]
        text = v.get("text") or ""
        if v.get("status") != 403:
            problems.append("%s: expected a 403, got %s" % (k, v))
            continue
        if not text.startswith("agentbox") or "KEY" not in text:
            problems.append("%s: the 403 body does not start with 'agentbox' and name the "
                            "secret: %r" % (k, text))
        for n in needles:
            if n not in text:
                problems.append("%s: the 403 body does not mention %r: %r" % (k, n, text))
        if ph in text:
            problems.append("%s: the 403 body repeats the placeholder" % k)
    v = out["bound_chunked"]
    if v.get("status") == 200 or (v.get("status") not in (None, 403)):
        problems.append("bound_chunked (placeholder in a chunked body, body not allowed): %s"
                        % v)
    v = out["bound_body_late"]
    if v.get("status") is not None:
        problems.append("bound_body_late (placeholder in a body sent after the head): expected "
                        "the connection cut, got %s" % v)
    if (out["bound_ok"] or {}).get("status") != 200:
        problems.append("bound_ok: %s" % out["bound_ok"])
    # upstreams: nothing of the refused requests
    if b.plain.recs:
        problems.append("the unbound plain upstream received requests: %s" % b.plain.summary())
    for m in ("/x-bound-hdr", "/x-bound-path", "/x-bound-query", "/x-bound-qtp",
              "/x-bound-body", "/x-bound-chunked"):
        if b.api.find(m):
            problems.append("the bound upstream received the refused request %s" % m)
    for rec in b.api.find("/x-bound-late"):
        if ph.encode() in bytes(rec["body"]) or val.encode() in bytes(rec["body"]):
            problems.append("the bound upstream received the late body's secret")
    if b.api.header("/x-bound-ok", "x-api-key") != [val]:
        problems.append("bound_ok: upstream x-api-key %r" % b.api.header("/x-bound-ok",
                                                                          "x-api-key"))
    if (out["tunnel"] or {}).get("status") != 200:
        problems.append("blind tunnel to %s: %s" % (TUNNEL, out["tunnel"]))
    elif b.tunnel.header("/x-tunnel", "x-api-key") != [ph]:
        problems.append("blind tunnel: upstream x-api-key %r, expected the placeholder" % (
            ["<value>" if x == val else x for x in b.tunnel.header("/x-tunnel", "x-api-key")],))
    if val in b.tunnel.everything() or val in b.plain.everything():
        problems.append("an unbound upstream received the real value")
    for k in ("tunnel_default_trust", "tunnel_default_trust_tp"):
        if out[k].get("status") is not None:
            problems.append("%s: %s is not a blind tunnel: the session trust vouched for it"
                            % (k, TUNNEL))
        elif "CERTIFICATE_VERIFY_FAILED" not in out[k].get("state", ""):
            problems.append("%s: blind tunnel with the session trust only: %s" % (k, out[k]))

    entries, raw = read_log(log, ctx)
    reqs = requests_in(entries)
    ex = [e for e in reqs if e.get("rule") == "exfiltration"]
    for e in ex:
        if e.get("decision") != "deny":
            problems.append("exfiltration line with decision %r: %s" % (e.get("decision"), e))
    # refused heads (5 to plain.test, 4 to the bound host), then refused bodies by path
    for host, n in ((PLAIN, 5), (BOUND, 4)):
        got = [e for e in ex if e.get("host") == host and not e.get("method") == "POST"]
        if len(got) < n:
            problems.append("%d exfiltration lines for refused heads to %s, expected %d" % (
                len(got), host, n))
    for path in ("/x-plain-body", "/x-bound-body", "/x-bound-chunked", "/x-bound-late"):
        ls = [e for e in reqs if e.get("path") == path]
        if not any(e.get("rule") == "exfiltration" and e.get("decision") == "deny"
                   for e in ls):
            problems.append("the refused body of %s is not logged as exfiltration: %s" % (
                path, ls))
    t = [e for e in reqs if e.get("host") == TUNNEL]
    if not t or any(e.get("intercepted") for e in t):
        problems.append("the tunnel to %s: %s" % (TUNNEL, t))
    if any(e.get("event") == "placeholder-elsewhere" or "elsewhere" in e for e in entries):
        problems.append("placeholders recorded as sent on although refused")
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r], [log])


ELSEWHERE_PY = EXFIL_PY.split("# unbound hosts over plain HTTP")[0] + r'''
oph, rph = os.environ["OTHER"], os.environ["REFUSER"]
out["oph"], out["rph"] = oph, rph
# KEY's placeholder to the unbound plain.test: every place and form, both paths
out["plain_hdr"] = plain("plain.test", "/e-plain-hdr", "Authorization: Bearer %s\r\n" % ph)
out["plain_query"] = plain("plain.test", "/e-plain-query?k=" + ph)
out["plain_pct_query"] = plain("plain.test", "/e-plain-pct?k=" + pct)
out["plain_basic"] = plain("plain.test", "/e-plain-basic", "Authorization: Basic %s\r\n" % basic)
out["plain_body"] = plain("plain.test", "/e-plain-body", body=b'{"k":"' + ph.encode() + b'"}',
                          method="POST")
s = direct("plain.test", 80)
if isinstance(s, str):
    out["plain_transparent"] = {"status": None, "state": s}
else:
    s.sendall(("GET /e-plain-tp HTTP/1.1\r\nHost: plain.test\r\nx-api-key: %s\r\n"
               "Connection: close\r\n\r\n" % ph).encode())
    out["plain_transparent"] = jresp(read_response(s))
    s.close()
# the bound (intercepted) host: KEY swapped, OTHER's placeholder (bound to
# other.upstream.test:8443) left as it is in a header and the body
out["bound_mixed"] = bound(post("/e-bound-mixed", b'{"o":"' + oph.encode() + b'"}',
                                "x-api-key: %s\r\nX-Other: %s\r\n" % (ph, oph)))
out["bound_chunked"] = bound(post("/e-bound-chunked", None, chunks=[
    b'{"o":"' + oph[:7].encode(), oph[7:].encode() + b'"}']))
# REFUSER ("elsewhere": "refuse"): refused there, in the body and in a header
out["bound_refuser_body"] = bound(post("/e-bound-refuser", b'{"r":"' + rph.encode() + b'"}'))
out["bound_refuser_hdr"] = bound(get("/e-bound-refuser-hdr", "X-R: %s\r\n" % rph))
print(json.dumps(out))
'''


def test_placeholder_elsewhere_forwarded(ctx):
    """The default: a placeholder in a request to a host its secret is not
    bound to goes on unchanged (never the value: the swap is only for the
    bound hosts) wherever it is (header, query, percent-encoded, Basic, body,
    a chunked body split across chunks; plain HTTP on both paths, or an
    intercepted host bound to another secret), and is recorded: the request
    line names the secret under "elsewhere", one placeholder-elsewhere event
    per (secret, host:port).  A secret with "elsewhere": "refuse" is still
    refused there (403 naming the key), wherever the placeholder is."""
    val, oval, rval = new_value(), new_value(), new_value()
    b = Broker(ctx, [val])
    log = log_file(ctx)
    prof = b.write_profile({
        "KEY": secret(SRC),
        "OTHER": secret(SRC2, hosts=[TUNNEL + ":8443"], places=["header:x-port-key"]),
        "REFUSER": secret(SRC3, hosts=[TUNNEL + ":8443"], elsewhere="refuse"),
    }, allow=[BOUND, TUNNEL, PLAIN, TUNNEL + ":8443"])
    out, r = inner_json(ctx, ELSEWHERE_PY, {"bound": BOUND, "tunnel": TUNNEL, "ca": b.ca_ws},
                        prof, env={SRC: val, SRC2: oval, SRC3: rval},
                        extra_args=["--log", log])
    ph, oph, rph = out["ph"], out["oph"], out["rph"]
    problems = []
    for k in ("plain_hdr", "plain_query", "plain_pct_query", "plain_basic", "plain_body",
              "plain_transparent", "bound_mixed", "bound_chunked"):
        if (out[k] or {}).get("status") != 200:
            problems.append("%s: expected a 200, got %s" % (k, out[k]))
    # what the upstreams received: the placeholders, exactly where they were sent
    pct = "".join("%%%02X" % ord(c) for c in ph)
    basic = base64.b64encode(("user:" + ph).encode()).decode()
    p = b.plain
    for marker, got, want in (
            ("/e-plain-hdr", p.header("/e-plain-hdr", "authorization"), ["Bearer " + ph]),
            ("/e-plain-query", [x["target"] for x in p.find("/e-plain-query")],
             ["/e-plain-query?k=" + ph]),
            ("/e-plain-pct", [x["target"] for x in p.find("/e-plain-pct")],
             ["/e-plain-pct?k=" + pct]),
            ("/e-plain-basic", p.header("/e-plain-basic", "authorization"), ["Basic " + basic]),
            ("/e-plain-body", [bytes(x["body"]) for x in p.find("/e-plain-body")],
             [b'{"k":"' + ph.encode() + b'"}']),
            ("/e-plain-tp", p.header("/e-plain-tp", "x-api-key"), [ph]),
            ("/e-bound-mixed", b.api.header("/e-bound-mixed", "x-api-key"), [val]),
            ("/e-bound-mixed", b.api.header("/e-bound-mixed", "x-other"), [oph]),
            ("/e-bound-mixed", [bytes(x["body"]) for x in b.api.find("/e-bound-mixed")],
             [b'{"o":"' + oph.encode() + b'"}']),
            ("/e-bound-chunked", [bytes(x["body"]) for x in b.api.find("/e-bound-chunked")],
             [b'{"o":"' + oph.encode() + b'"}'])):
        if got != want:
            problems.append("%s: the upstream received %r, expected %r" % (marker, got, want))
    for v, name in ((val, "KEY"), (oval, "OTHER"), (rval, "REFUSER")):
        if v in p.everything() or (name != "KEY" and v in b.api.everything()):
            problems.append("an upstream received %s's real value" % name)
    if rph in b.api.everything() or b.api.find("/e-bound-refuser"):
        problems.append("the bound upstream received the refused requests")
    for k in ("bound_refuser_body", "bound_refuser_hdr"):
        v = out[k]
        text = v.get("text") or ""
        if v.get("status") != 403 or "REFUSER" not in text or \
                'set secrets.REFUSER.elsewhere to "forward"' not in text:
            problems.append("%s: expected a 403 naming secrets.REFUSER.elsewhere, got %s" % (
                k, v))

    entries, raw = read_log(log, ctx)
    reqs = requests_in(entries)
    plain_lines = [e for e in reqs if e.get("host") == PLAIN and e.get("port") == 80]
    if len(plain_lines) != 6 or any(e.get("elsewhere") != "KEY" or
                                    e.get("decision") != "allow" for e in plain_lines):
        problems.append("plain.test request lines: %s" % plain_lines)
    for path in ("/e-bound-mixed", "/e-bound-chunked"):
        ls = [e for e in reqs if e.get("path") == path]
        if len(ls) != 1 or ls[0].get("elsewhere") != "OTHER" or \
                ls[0].get("secrets") != ("KEY" if path == "/e-bound-mixed" else None):
            problems.append("%s request lines: %s" % (path, ls))
    ref = [e for e in reqs if e.get("path", "").startswith("/e-bound-refuser")]
    if len(ref) != 2 or any(e.get("rule") != "exfiltration" or "elsewhere" in e for e in ref):
        problems.append("refused REFUSER lines: %s" % ref)
    ev = sorted(((e.get("secret"), e.get("host"), e.get("port"), e.get("where"))
                 for e in entries if e.get("event") == "placeholder-elsewhere"), key=str)
    want = sorted([("KEY", PLAIN, 80, "head"), ("OTHER", BOUND, 443, "head,body")], key=str)
    if ev != want:
        problems.append("placeholder-elsewhere events %s, expected %s" % (ev, want))
    for x in (ph.encode(), oph.encode(), rph.encode()):
        if x in raw:
            problems.append("a placeholder is in the audit log")
    assert not problems, redact("\n".join(problems) + "\n" + b.summary() + "\n" +
                                fmt_log(entries), [val, oval, rval])
    assert_value_nowhere(ctx, [val, oval, rval], [r], [log])


def test_placeholder_elsewhere_explain_and_errors(ctx):
    """explain shows the rule in force for each secret and the key that set
    it: the default (forward), the secret's own "elsewhere", or a later
    profile's network.placeholder_elsewhere (which the secret's own beats).
    A bad value is a FILE:LINE:COL error, exit 125."""
    b = Broker(ctx)
    prof = b.write_profile({"A": secret(SRC), "B": secret(SRC2, elsewhere="refuse"),
                            "C": secret(SRC3, elsewhere="forward")})
    top = os.path.join(ctx.scratch, "refuse-all.json")
    ctx.host_file(top, json.dumps({"version": 1,
                                   "network": {"placeholder_elsewhere": "refuse"}}) + "\n")
    for extra, want in (
            ([], {"A": ("forward", "default"), "B": ("refuse", "secrets.B.elsewhere"),
                  "C": ("forward", "secrets.C.elsewhere")}),
            (["-p", top], {"A": ("refuse", "network.placeholder_elsewhere"),
                           "B": ("refuse", "secrets.B.elsewhere"),
                           "C": ("forward", "secrets.C.elsewhere")})):
        r = ctx.run(["explain", "--json", "-p", prof] + extra + ["-w", ctx.ws])
        assert r.returncode == 0, describe(r)
        got = {x["name"]: (x.get("elsewhere"), x.get("elsewhere_by"))
               for x in json.loads(r.stdout)["secrets"]}
        assert got == want, "explain --json %s: %s" % (extra, got)
        r = ctx.run(["explain", "-p", prof] + extra + ["-w", ctx.ws])
        assert r.returncode == 0, describe(r)
        lines = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("elsewhere:")]
        assert len(lines) == 3, r.stdout
        for line, name in zip(lines, "ABC"):
            rule, by = want[name]
            assert line.startswith("elsewhere: %s: " % rule) and line.endswith(
                "(%s)" % ("the default" if by == "default" else by)), (name, line)
    bad = os.path.join(ctx.scratch, "bad.json")
    ctx.host_file(bad, '{"version": 1, "secrets": {"A": {"from": {"env": "A"},\n'
                       '  "hosts": ["api.upstream.test"], "elsewhere": "block"}}}\n')
    r = ctx.run(["explain", "-p", bad, "-w", ctx.ws])
    assert r.returncode == 125 and '%s:2:48: secrets.A.elsewhere: expected "forward" or ' \
        '"refuse", got "block"' % bad in r.stderr, describe(r)


def test_placeholder_elsewhere_summary(ctx):
    """On a terminal, the exit summary says which placeholders went on to
    hosts they are not bound to, and how often."""
    val = new_value()
    b = Broker(ctx, [val])
    prof = b.write_profile({"KEY": secret(SRC)})
    code = INNER_LIB + r'''
for i in range(3):
    proxy_request(("GET http://plain.test/s%d HTTP/1.1\r\nHost: plain.test\r\n"
                   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n"
                   % (i, os.environ["KEY"])).encode())
print("END-OF-COMMAND")
'''
    pr = PtyRun(ctx, ["run", "-p", prof, "-w", ctx.ws, "--", INNER_PY, "-c", code, "{}"],
                env={SRC: val})
    pr.expect(rb"END-OF-COMMAND", timeout=30)
    rc = pr.wait(timeout=30)
    text = pr.text()
    assert rc == 0, text
    assert "agentbox: placeholders sent on unchanged to hosts they are not bound to: " \
        "KEY to plain.test:80 x3" in text.split("END-OF-COMMAND", 1)[1], text
    assert len(b.plain.recs) == 3, b.summary()
    assert val not in text


# ==========================================================================
# Responses: the real value comes back masked

MASK_PY = INNER_LIB + r'''
out = {}
B = CFG["bound"]
def fetch_slow(path):
    """A reader that trickles (a pause per read): the proxy's side of the
    socket is full most of the time (writes wait for room)."""
    try:
        s = connect(B + ":443")[0]
        t = ssl.create_default_context().wrap_socket(s, server_hostname=B)
        t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n"
                   % (path, B, os.environ["KEY"])).encode())
        t.settimeout(20)
        data = bytearray()
        while True:
            d = t.recv(65536)
            if not d:
                break
            data += d
            time.sleep(0.001)
        t.close()
        head, _, body = bytes(data).partition(b"\r\n\r\n")
        return {"status": int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else None,
                "body": body.decode("latin-1")}
    except (OSError, ssl.SSLError, ValueError) as e:
        return {"status": None, "state": ename(e)}
def fetch(path, transparent=False, stall=0):
    try:
        s = direct(B, 443) if transparent else connect(B + ":443")[0]
        t = ssl.create_default_context().wrap_socket(s, server_hostname=B)
        t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close\r\n\r\n"
                   % (path, B, os.environ["KEY"])).encode())
        time.sleep(stall)  # a reader that stalls: the proxy's socket fills, it must wait
        r = read_response(t, 20)
        t.close()
        return {"status": r["status"], "state": r["state"], "headers": r["headers"],
                "body": r["body"].decode("latin-1")}
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": ename(e)}
out["plain"] = fetch("/reflect")
out["chunked"] = fetch("/reflect-chunked")
out["chunked_whole"] = fetch("/reflect-chunked?whole=1")
out["big"] = fetch("/reflect-big?n=300000")
out["stalled"] = fetch("/reflect-big?n=12000000", stall=1)
out["slow"] = fetch_slow("/reflect-big?n=3000000")
out["transparent"] = fetch("/reflect", transparent=True)
out["ph"] = os.environ["KEY"]
out["ph2"] = os.environ["KEY2"]
print(json.dumps(out))
'''


def _expected_reflect(pairs):
    """The /reflect body after masking: for each (value, placeholder)."""
    parts = []
    for v, p in pairs:
        ev, ep = encodings(v), encodings(p)
        for k in ev:
            if k == "basic":
                parts.append(None)  # checked separately
            elif len(ev[k]) == len(ep[k]):
                parts.append("%s=[%s]" % (k, ep[k]))
            else:
                parts.append("%s=[%s]" % (k, "*" * len(ev[k])))
    return parts


def test_response_masking(ctx):
    """An upstream that echoes the real values back (headers, body; raw,
    base64, base64url, percent-encoded, JSON-escaped, inside Basic base64;
    Content-Length, chunked with the value split over chunks, 300 kB; 12 MB
    to a client that reads only after a pause, 3 MB to one that trickles) reaches the client masked:
    same length, the placeholder where lengths match."""
    v1 = new_value("sk-m/", 20, "+x/y")   # '/' and '+': its encodings differ
    v2 = new_value("plain", 20)
    b = Broker(ctx, [v1, v2])
    prof = b.write_profile({"KEY": secret(SRC),
                            "KEY2": secret({"env": SRC2}, places=["header:x-other-key"])})
    out, r = inner_json(ctx, MASK_PY, {"bound": BOUND}, prof, env={SRC: v1, SRC2: v2})
    ph, ph2 = out["ph"], out["ph2"]
    problems = []
    for name, x in out.items():
        blob = json.dumps(x)
        for v in (v1, v2):
            for k, e in encodings(v).items():
                if e in blob:
                    problems.append("%s: the %s form of a real value reached the sandbox" % (
                        name, k))
    exp = _expected_reflect([(v1, ph), (v2, ph2)])
    for k in ("plain", "chunked", "chunked_whole", "transparent"):
        x = out[k]
        if x.get("status") != 200:
            problems.append("%s: %s" % (k, x))
            continue
        h = x["headers"]
        if h.get("x-reflect") != ph:
            problems.append("%s: X-Reflect header %r, expected the placeholder" % (
                k, h.get("x-reflect")))
        if h.get("x-reflect-b64") != encodings(ph)["b64"]:
            problems.append("%s: X-Reflect-B64 %r, expected base64(placeholder)" % (
                k, h.get("x-reflect-b64")))
        pv = encodings(v1)["pct"]
        if h.get("set-cookie") != "k=%s; Path=/" % ("*" * len(pv)):
            problems.append("%s: Set-Cookie %r, expected the percent-encoded value as '*'" % (
                k, h.get("set-cookie")))
        body = x["body"]
        got = body.strip().split(" ")[1:]
        if len(got) != len(exp) or not body.startswith("reflect: "):
            problems.append("%s: body %r" % (k, body[:300]))
            continue
        for g, e in zip(got, exp):
            if e is None:  # Basic base64 of user:value: not decodable to the value
                m = g[len("basic=["):-1]
                try:
                    dec = base64.b64decode(m + "=" * (-len(m) % 4))
                except (ValueError, binascii.Error):
                    dec = b""
                if v1.encode() in dec or v2.encode() in dec or len(g) not in (
                        len("basic=[%s]" % encodings(v)["basic"]) for v in (v1, v2)):
                    problems.append("%s: the Basic form was not masked: %r" % (k, g))
            elif g != e:
                problems.append("%s: masked %r, expected %r" % (k, g, e))
    x = out["big"]
    if x.get("status") != 200 or len(x.get("body", "")) != 300000:
        problems.append("big: status %s, %d bytes (expected 300000)" % (
            x.get("status"), len(x.get("body", ""))))
    elif x["body"].count(ph) != 5 or x["body"].replace(ph, "").strip(".") != "":
        problems.append("big: %d placeholders in the body (expected 5), other bytes changed: %s"
                        % (x["body"].count(ph), x["body"].replace(ph, "").strip(".")[:100]))
    x = out["stalled"]  # 12 MB read only after the proxy's side of the socket is full
    if x.get("status") != 200 or len(x.get("body", "")) != 12000000 or \
            x["body"].count(ph) != 5 or x["body"].replace(ph, "").strip(".") != "":
        problems.append("stalled reader: status %s, %d bytes, %d placeholders" % (
            x.get("status"), len(x.get("body", "")), x.get("body", "").count(ph)))
    x = out["slow"]
    if x.get("status") != 200 or len(x.get("body", "")) != 3000000 or \
            x["body"].count(ph) != 5 or x["body"].replace(ph, "").strip(".") != "":
        problems.append("slow reader: status %s, %d bytes, %d placeholders" % (
            x.get("status"), len(x.get("body", "")), x.get("body", "").count(ph)))
    for rec in b.api.recs:
        ae = [v for k, v in rec["headers"] if k == "accept-encoding"]
        if ae != ["identity"]:
            problems.append("%s: Accept-Encoding upstream %r" % (rec["target"], ae))
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [v1, v2])
    assert_value_nowhere(ctx, [v1, v2], [r])


def test_plain_http_bound_host_never_reflects(ctx):
    """A secret bound to a host (no port: 443 and 80) used over plain HTTP:
    whatever agentbox does with the request, the value never comes back into
    the sandbox (the upstream echoes headers and reflects the value)."""
    val = new_value()
    b = Broker(ctx, [val])
    prof = b.write_profile({"KEY": secret(SRC, hosts=[BOUND, BOUND_PLAIN])},
                           allow=[BOUND, BOUND_PLAIN])
    cmds = [curl_cmd("echo", "http://%s/bp-echo" % BOUND_PLAIN, '-H "x-api-key: $KEY"'),
            curl_cmd("reflect", "http://%s/reflect" % BOUND_PLAIN, '-H "x-api-key: $KEY"'),
            curl_cmd("reflect_tp", "http://%s/reflect" % BOUND_PLAIN, '-H "x-api-key: $KEY"',
                     "-i", noproxy=True)]
    out, r = run_cmds(ctx, prof, cmds, env={SRC: val})
    leaks = [k for k, v in out["res"].items() if any(
        e in v["out"] for e in encodings(val).values() if len(e) >= 8)]
    sent = b.bplain.header("/bp-echo", "x-api-key")
    assert not leaks, (
        "plain HTTP to the bound host %s: the upstream received %s and its response carried "
        "the real value back into the sandbox, unmasked (%s)\n%s" % (
            BOUND_PLAIN, "the real value" if sent == [val] else sent, ", ".join(leaks),
            b.summary()))


# ==========================================================================
# Coded responses: masking cannot see into them, so they are refused

CODED_PY = INNER_LIB + r'''
B = CFG["bound"]
def exchange(reqs, transparent=False):
    """Send the raw requests (KEY filled in) on one intercepted connection at
    once; everything the client receives until the close, latin-1."""
    try:
        s = direct(B, 443) if transparent else connect(B + ":443")[0]
        t = ssl.create_default_context().wrap_socket(s, server_hostname=B)
        t.sendall("".join(reqs).replace("KEY", os.environ["KEY"]).encode("latin-1"))
        t.settimeout(10)
        data, state = b"", "closed"
        while True:
            try:
                d = t.recv(65536)
            except (OSError, ssl.SSLError) as e:
                state = ename(e)
                break
            if not d:
                break
            data += d
        t.close()
        return {"raw": data.decode("latin-1"), "state": state}
    except (OSError, ssl.SSLError) as e:
        return {"raw": "", "state": ename(e)}
def req(path, method="GET", close=True):
    return "%s %s HTTP/1.1\r\nHost: %s\r\nx-api-key: KEY\r\n%s\r\n" % (
        method, path, B, "Connection: close\r\n" if close else "")
out = {}
for name, method, path, transparent in CFG["cases"]:
    out[name] = exchange([req(path, method)], transparent)
out["pipelined"] = exchange([req("/coded?comp=none&ce=identity", close=False),
                             req("/coded?comp=gzip&ce=gzip")])
# the decrypted stream of an intercepted tunnel is parsed strictly too
out["http09"] = exchange(["GET /t8-smuggled\r\n\r\n"])
out["ph"] = os.environ["KEY"]
print(json.dumps(out))
'''

CODED_CASES = [  # name, method, path, transparent; all refused but the last two
    ("gzip", "GET", "/coded?comp=gzip&ce=gzip", False),
    ("gzip_transparent", "GET", "/coded?comp=gzip&ce=gzip", True),
    ("deflate", "GET", "/coded?comp=deflate&ce=deflate", False),
    ("upper", "GET", "/coded?comp=gzip&ce=GZip", False),
    ("list", "GET", "/coded?comp=gzip&ce=identity,%20gzip", False),
    ("two_fields", "GET", "/coded?comp=gzip&ce=identity&ce=gzip", False),
    ("br", "GET", "/coded?comp=gzip&ce=br", False),
    ("zstd", "GET", "/coded?comp=gzip&ce=zstd", False),
    ("gzip_chunked", "GET", "/coded?comp=gzip&ce=gzip&te=chunked", False),
    ("te_gzip_chunked", "GET", "/coded?comp=gzip&te=gzip,%20chunked", False),
    ("te_gzip_close", "GET", "/coded?comp=gzip&te=gzip", False),
    ("post", "POST", "/coded?comp=gzip&ce=gzip", False),
    ("identity", "GET", "/coded?comp=none&ce=identity", False),
    ("head", "HEAD", "/coded?comp=gzip&ce=gzip", False),
]


def _dechunk(b):
    """A chunked body, leniently (whatever reached the client)."""
    out = bytearray()
    while True:
        line, sep, b = b.partition(b"\r\n")
        try:
            n = int(line.split(b";")[0], 16)
        except ValueError:
            return bytes(out)
        if not sep or n == 0:
            return bytes(out)
        out += b[:n]
        b = b[n + 2:]


def _responses(raw, head=False):
    """[(status, {header: [values]}, body)] of the responses in raw."""
    out = []
    while raw.startswith(b"HTTP/"):
        h, sep, rest = raw.partition(b"\r\n\r\n")
        lines = h.decode("latin-1").split("\r\n")
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs.setdefault(k.strip().lower(), []).append(v.strip())
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            status = None
        te = ",".join(hdrs.get("transfer-encoding", [])).lower()
        if head:
            body, raw = b"", rest
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"][0])
            body, raw = rest[:n], rest[n:]
        elif te.replace(" ", "").endswith("chunked"):
            body, raw = _dechunk(rest), b""
        else:
            body, raw = rest, b""
        out.append((status, hdrs, body))
    return out


def _inflated(blobs):
    """The blobs, and every gzip or zlib stream starting anywhere in them,
    inflated (what a client that decompressed could read)."""
    out = list(blobs)
    for b in blobs:
        for i in range(len(b) - 1):
            if b[i:i + 2] == b"\x1f\x8b" or (b[i] == 0x78 and ((b[i] << 8) | b[i + 1]) % 31 == 0):
                try:
                    out.append(zlib.decompressobj(47).decompress(b[i:], 1 << 24))
                except zlib.error:
                    pass
    return out


def test_coded_responses_refused(ctx):
    """An intercepted host that ignores Accept-Encoding: identity and answers
    gzip("secret=" + value) (deflate, any case, in a list, in a second field,
    labelled br or zstd, with chunked framing, or as a transfer-coding:
    "gzip, chunked", gzip until the close): the sandbox gets a 502 and no
    byte that decompresses to the value, the upstream connection is closed,
    and the audit log says why.  A response pipelined before it arrives
    intact; identity and HEAD pass.  Inside an intercepted tunnel an HTTP/0.9
    line is refused as anywhere else."""
    val = new_value("sk-gz-", 24)
    b = Broker(ctx, [val])
    log = log_file(ctx)
    prof = b.write_profile({"KEY": secret(SRC)}, log=log)
    out, r = inner_json(ctx, CODED_PY, {"bound": BOUND, "cases": CODED_CASES}, prof,
                        env={SRC: val}, timeout=120)
    ph = out["ph"]
    problems = []
    refused = [c[0] for c in CODED_CASES if c[0] not in ("identity", "head")] + ["pipelined"]
    for name, x in out.items():
        if name == "ph":
            continue
        raw = x["raw"].encode("latin-1")
        resps = _responses(raw, head=name == "head")
        views = _inflated([raw] + [body for _, _, body in resps])
        leaked = sorted({k for v in views for k, e in encodings(val).items() if e.encode() in v})
        if leaked:
            problems.append("%s: the real value reached the sandbox (%s forms, raw or "
                            "decompressed)" % (name, ", ".join(leaked)))
        want = {"identity": [200], "head": [200], "pipelined": [200, 502],
                "http09": [400]}.get(name, [502])
        got = [st for st, _, _ in resps]
        if got != want:
            problems.append("%s: statuses %s, expected %s (%s): %r" % (
                name, got, want, x["state"], raw[:300]))
            continue
        st, hdrs, body = resps[-1]
        if st == 502 and (hdrs.get("x-agentbox-decision") != ["deny"] or
                          not body.startswith(b"agentbox: ") or b"coded" not in body):
            problems.append("%s: the 502 does not say why: %r %r" % (name, hdrs, body[:300]))
        if name in ("identity", "pipelined") and ("secret=" + ph).encode() not in resps[0][2]:
            problems.append("%s: the identity body was not passed on masked: %r" % (
                name, resps[0][2][:200]))
    lg, _ = read_log(log)
    lines = find_lines(lg, rule="encoded-response")
    if len(lines) != len(refused):
        problems.append("%d encoded-response audit lines, expected %d:\n%s" % (
            len(lines), len(refused), fmt_log(lg)))
    for e in lines:
        if e.get("decision") != "deny" or e.get("status") != 502 or \
                e.get("host") != BOUND or "coded" not in e.get("reason", ""):
            problems.append("audit line: %s" % json.dumps(e))
    if not any("Transfer-Encoding: gzip" in e.get("reason", "") for e in lines) or \
            not any("Content-Encoding: GZip" in e.get("reason", "") for e in lines):
        problems.append("the audit lines do not name the coding:\n%s" % fmt_log(lg))
    if b.api.find("t8-smuggled"):
        problems.append("the HTTP/0.9 line reached the upstream")
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r], [log])


# ==========================================================================
# The intercepted upstream is verified

def test_intercepted_upstream_is_verified(ctx):
    """agentbox verifies the real host of an intercepted connection: without
    network.ca_file the test CA is unknown (system store), and a bound name
    the upstream's certificate does not cover fails the hostname check;
    either way the client gets an error answer and the upstream never sees
    the request, let alone the value."""
    val = new_value()
    b = Broker(ctx, [val])
    nomatch = "api.nomatch.test"
    cmds = [curl_cmd("noca", "https://%s/nv-noca" % BOUND, '-H "x-api-key: $KEY"')]
    out1, r1 = run_cmds(ctx, b.write_profile({"KEY": secret(SRC)}, name="noca", ca_file=False),
                        cmds, env={SRC: val})
    prof2 = b.write_profile({"KEY": secret(SRC, hosts=[nomatch])}, name="nomatch",
                            allow=[nomatch], extra_hosts={nomatch: "api"})
    out2, r2 = run_cmds(ctx, prof2, [curl_cmd("nomatch", "https://%s/nv-nomatch" % nomatch,
                                              '-H "x-api-key: $KEY"')], env={SRC: val})
    problems = []
    for out, k in ((out1, "noca"), (out2, "nomatch")):
        rc, code, body, js = curl_result(out["res"][k])
        if code == 200 or (code != 502 and rc == 0):
            problems.append("%s: expected a refusal (502), got %s" % (k, out["res"][k]))
        elif code == 502 and not body.startswith("agentbox"):
            problems.append("%s: the 502 body does not start with 'agentbox': %r" % (k, body))
    for m in ("/nv-noca", "/nv-nomatch"):
        if b.api.find(m):
            problems.append("the upstream received %s over an unverified connection" % m)
    if val in b.api.everything():
        problems.append("the upstream received the real value")
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r1, r2])


# ==========================================================================
# Query and body, where the profile allows them

QB_PY = INNER_LIB + r'''
import urllib.parse
ph = os.environ["Q"]
B = CFG["bound"]
def send(raw, late=None):
    try:
        s = connect(B + ":443")[0]
        t = ssl.create_default_context().wrap_socket(s, server_hostname=B)
        t.sendall(raw)
        if late:
            time.sleep(0.3)
            t.sendall(late)
        r = jresp(read_response(t, 10))
        t.close()
        return r
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": ename(e)}
def post(path, body, chunks=None):
    h = "POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % (path, B)
    if chunks is None:
        return (h + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body
    raw = (h + "Transfer-Encoding: chunked\r\n\r\n").encode()
    for c in chunks:
        raw += b"%x\r\n" % len(c) + c + b"\r\n"
    return raw + b"0\r\n\r\n"
out = {}
out["query"] = send(("GET /qb-query?a=1&key=%s&b=2 HTTP/1.1\r\nHost: %s\r\nConnection: close"
                     "\r\n\r\n" % (ph, B)).encode())
pct = "".join("%%%02X" % ord(c) for c in ph)
out["query_pct"] = send(("GET /qb-qpct?key=%s HTTP/1.1\r\nHost: %s\r\nConnection: close"
                         "\r\n\r\n" % (pct, B)).encode())
body = ('{"model":"x","api_key":"%s","n":1}' % ph).encode()
out["body"] = send(post("/qb-body", body))
out["chunked"] = send(post("/qb-chunked", None, chunks=[
    b'{"api_key":"' + ph[:5].encode(), ph[5:11].encode(), ph[11:].encode() + b'"}']))
big = bytearray(b"." * 1000000)
for off in (0, 16380, 65530, 500000, 1000000 - len(ph)):
    big[off:off + len(ph)] = ph.encode()
out["big"] = send(post("/qb-big", bytes(big)))
head = ("POST /qb-late HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (B, len(body))).encode()
out["late"] = send(head, late=body)
print(json.dumps(out))
'''


def test_query_and_body_when_allowed(ctx):
    """"in": ["header:authorization", "query", "body"]: the placeholder is
    swapped in the query (also percent-encoded; the value percent-encoded
    where needed) and in bodies (Content-Length, chunked with the placeholder
    split, 1 MB, body after the head), keeping the length."""
    val = new_value("q/", 20, "+=")
    b = Broker(ctx, [val])
    prof = b.write_profile({"Q": secret(SRC, places=["header:authorization", "query", "body"])})
    out, r = inner_json(ctx, QB_PY, {"bound": BOUND}, prof, env={SRC: val}, timeout=60)
    problems = []
    for k in ("query", "query_pct", "body", "chunked", "big", "late"):
        if (out.get(k) or {}).get("status") != 200:
            problems.append("%s: %s" % (k, out.get(k)))
    for marker in ("/qb-query", "/qb-qpct"):
        recs = b.api.find(marker)
        if recs:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(recs[0]["target"]).query)
            if q.get("key") != [val]:
                problems.append("%s: the upstream's query %r does not decode to the value" % (
                    marker, recs[0]["target"].replace(val, "<value>")))
    for marker, want in (("/qb-body", ('{"model":"x","api_key":"%s","n":1}' % val).encode()),
                         ("/qb-late", ('{"model":"x","api_key":"%s","n":1}' % val).encode()),
                         ("/qb-chunked", ('{"api_key":"%s"}' % val).encode())):
        recs = b.api.find(marker)
        if not recs:
            continue
        got = bytes(recs[0]["body"])
        if got != want:
            problems.append("%s: the upstream body %r, expected the value swapped in" % (
                marker, got[:200]))
        cl = [v for k, v in recs[0]["headers"] if k == "content-length"]
        if cl and int(cl[0]) != len(got):
            problems.append("%s: Content-Length %s but %d bytes" % (marker, cl, len(got)))
    recs = b.api.find("/qb-big")
    if recs:
        got = bytes(recs[0]["body"])
        if len(got) != 1000000 or got.count(val.encode()) != 5 or \
                got.replace(val.encode(), b"").strip(b".") != b"":
            problems.append("/qb-big: %d bytes upstream, %d values" % (
                len(got), got.count(val.encode())))
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val])
    assert_value_nowhere(ctx, [val], [r])


# ==========================================================================
# mask_in_body: the placeholder in a body to its own host goes out masked

SRC3 = "AB_IT_SECRET_SRC3"

MASKBODY_PY = INNER_LIB + r'''
ph, pw = os.environ["KEY"], os.environ["W"]
B, T = CFG["bound"], CFG["tunnel"]
def send(host, raw, late=None, transparent=False):
    try:
        s = direct(host, 443) if transparent else connect(host + ":443")[0]
        if s is None or isinstance(s, str):
            return {"status": None, "state": "connect:%s" % (s,)}
        t = ssl.create_default_context().wrap_socket(s, server_hostname=host)
        t.sendall(raw)
        if late:
            time.sleep(0.3)
            t.sendall(late)
        r = jresp(read_response(t, 10))
        t.close()
        return r
    except (OSError, ssl.SSLError) as e:
        return {"status": None, "state": ename(e)}
def post(host, path, body, chunks=None, hdrs=""):
    h = "POST %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n" % (path, host, hdrs)
    if chunks is None:
        return (h + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body
    raw = (h + "Transfer-Encoding: chunked\r\n\r\n").encode()
    for c in chunks:
        raw += b"%x\r\n" % len(c) + c + b"\r\n"
    return raw + b"0\r\n\r\n"
def get(host, path, hdrs=""):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (
        path, host, hdrs)).encode()
# a conversation that once showed `env`, resent in full
body = json.dumps({"messages": [{"role": "user", "content": "run env"},
                                {"role": "tool", "content": "HOME=/h\nKEY=%s\nX=1" % ph}],
                   "again": ph}).encode()
out = {"body": body.decode()}
out["bound_body"] = send(B, post(B, "/mb-body", body))
out["bound_tp"] = send(B, post(B, "/mb-tp", body), transparent=True)
i = body.index(ph.encode())
out["bound_chunked"] = send(B, post(B, "/mb-chunked", None, chunks=[
    body[:i + 5], body[i + 5:i + 9], body[i + 9:]]))
head = ("POST /mb-late HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close"
        "\r\n\r\n" % (B, len(body))).encode()
out["bound_late"] = send(B, head, late=body)
both = ('{"key":"%s","w":"%s"}' % (ph, pw)).encode()
out["both"] = (both.decode(), send(B, post(B, "/mb-both", both)))
out["bound_ok"] = send(B, get(B, "/mb-ok", "x-api-key: %s\r\n" % ph))
# still refused: other places on the bound host
out["bound_hdr"] = send(B, get(B, "/mb-hdr", "X-Other: %s\r\n" % ph))
out["bound_query"] = send(B, get(B, "/mb-query?k=%s" % ph))
out["bound_path"] = send(B, get(B, "/mb-path/%s" % ph))
# other hosts (KEY is not bound there): the body goes on unchanged, not masked
out["tunnel_body"] = send(T, post(T, "/mb-tunnel", body))
raw = ("POST http://plain.test/mb-plain HTTP/1.1\r\nHost: plain.test\r\nContent-Length: %d"
       "\r\nConnection: close\r\n\r\n" % len(body)).encode() + body
out["plain_body"] = proxy_request(raw)
print(json.dumps(out))
'''


def test_mask_in_body(ctx):
    """secrets.KEY.mask_in_body: a placeholder in a request body to KEY's own
    host (Content-Length, chunked and split, body after the head, explicit
    and transparent) reaches the upstream as a mask of the same length
    ("agentbox-masked***..."), never as the placeholder nor the value, and
    the audit line says "masked":"KEY".  Still refused (403, exfiltration):
    the placeholder in another header, the query or the path of the bound
    host.  The same body to an allowed host KEY is not bound to (intercepted
    TLS, plain HTTP) goes on unchanged, not masked (the mask is for KEY's own
    hosts; elsewhere is the "elsewhere" rule's, forward by default).  A
    secret with "body" allowed is swapped."""
    val, wval, oval = new_value(), new_value("sk-w-"), new_value("sk-o-")
    b = Broker(ctx, [val, wval, oval])
    log = log_file(ctx)
    prof = b.write_profile({
        "KEY": secret(SRC, mask_in_body=True),
        "W": secret(SRC2, places=["header:authorization", "body"], mask_in_body=True),
        # makes the TLS host other.upstream.test intercepted (else a blind tunnel)
        "OTHER": secret(SRC3, hosts=[TUNNEL]),
    })
    out, r = inner_json(ctx, MASKBODY_PY, {"bound": BOUND, "tunnel": TUNNEL}, prof,
                        env={SRC: val, SRC2: wval, SRC3: oval}, extra_args=["--log", log],
                        timeout=60)
    body = out["body"]
    ph = json.loads(body)["again"]
    mask = "agentbox-masked" + "*" * (len(ph) - len("agentbox-masked"))
    assert len(ph) == len(val) > len("agentbox-masked"), "placeholder %r" % ph
    want = body.replace(ph, mask).encode()
    problems = []
    for k, marker in (("bound_body", "/mb-body"), ("bound_tp", "/mb-tp"),
                      ("bound_chunked", "/mb-chunked"), ("bound_late", "/mb-late")):
        v = out[k]
        if v.get("status") != 200 or (v.get("json") or {}).get("body_len") != len(want):
            problems.append("%s: expected 200 and the echo of a %d-byte body, got %s" % (
                k, len(want), v))
        recs = b.api.find(marker)
        if len(recs) != 1:
            problems.append("%s: the bound upstream saw %d requests %s" % (k, len(recs), marker))
            continue
        got = bytes(recs[0]["body"])
        if got != want:
            problems.append("%s: the upstream received %r, expected the placeholder masked: %r"
                            % (k, got[:400], want[:400]))
        cl = [x for h, x in recs[0]["headers"] if h == "content-length"]
        if cl and int(cl[0]) != len(got):
            problems.append("%s: Content-Length %s but %d bytes" % (k, cl, len(got)))
    both, v = out["both"]
    recs = b.api.find("/mb-both")
    if v.get("status") != 200 or len(recs) != 1:
        problems.append("both: %s" % v)
    else:
        pw = json.loads(both)["w"]
        want_both = both.replace(ph, mask).replace(pw, wval).encode()
        if bytes(recs[0]["body"]) != want_both:
            problems.append("both: the upstream received %r: expected KEY masked, W swapped "
                            "(\"body\" allowed: the swap wins)" % bytes(recs[0]["body"]))
    if out["bound_ok"].get("status") != 200 or b.api.header("/mb-ok", "x-api-key") != [val]:
        problems.append("bound_ok (the allowed header still swaps): %s" % out["bound_ok"])
    for k, needles in (("bound_hdr", ("x-other",)), ("bound_query", ("query",)),
                       ("bound_path", ("path",))):
        v = out[k]
        text = v.get("text") or ""
        if v.get("status") != 403 or not text.startswith("agentbox") or "KEY" not in text or \
                any(n not in text for n in needles):
            problems.append("%s: expected a 403 naming KEY and %s, got %s" % (k, needles, v))
    for m in ("/mb-hdr", "/mb-query", "/mb-path"):
        if b.api.find(m):
            problems.append("the bound upstream received the refused request %s" % m)
    for k, up, marker in (("tunnel_body", b.tunnel, "/mb-tunnel"),
                          ("plain_body", b.plain, "/mb-plain")):
        recs = up.find(marker)
        if out[k].get("status") != 200 or len(recs) != 1 or \
                bytes(recs[0]["body"]) != body.encode():
            problems.append("%s: expected the body sent on unchanged, got %s; upstream %s" % (
                k, out[k], [bytes(x["body"])[:200] for x in recs]))
    with b.api.lock:
        bodies = b"".join(bytes(x["body"]) for x in b.api.recs)
    if ph.encode() in bodies or val.encode() in bodies:
        problems.append("a body reached the bound upstream with the placeholder or the value")

    entries, raw = read_log(log, ctx)
    # (the refused /mb-path/<placeholder> is logged with its path, as any path)
    if any(ph in json.dumps(e) for e in entries if not e.get("path", "").startswith("/mb-path/")):
        problems.append("the placeholder is in the audit log")
    for path in ("/mb-body", "/mb-tp", "/mb-chunked", "/mb-late", "/mb-both"):
        ls = find_lines(entries, host=BOUND, path=path)
        if len(ls) != 1 or ls[0].get("masked") != "KEY" or ls[0].get("decision") != "allow" \
                or ls[0].get("status") != 200:
            problems.append("audit line of %s: %s (expected \"masked\":\"KEY\")" % (path, ls))
    ls = find_lines(entries, host=BOUND, path="/mb-ok")
    if len(ls) != 1 or "masked" in ls[0] or ls[0].get("secrets") != "KEY":
        problems.append("audit line of /mb-ok: %s" % ls)
    for host, path in ((TUNNEL, "/mb-tunnel"), (PLAIN, "/mb-plain")):
        ls = find_lines(entries, host=host, path=path)
        if len(ls) != 1 or ls[0].get("elsewhere") != "KEY" or ls[0].get("decision") != "allow" \
                or "masked" in ls[0]:
            problems.append("audit line of %s: %s (expected \"elsewhere\":\"KEY\")" % (path, ls))
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [val, wval, oval])
    assert_value_nowhere(ctx, [val, wval, oval], [r], [log])


# ==========================================================================
# Placeholder shape, env name, sources

SHAPE_PY = INNER_LIB + r'''
import re as _re
out = {"env": {k: v for k, v in os.environ.items()}}
ph = os.environ.get("ANT", "")
# a client that checks the key's shape before it sends it
if not _re.match(r"^sk-ant-[A-Za-z0-9_-]{40,}$", ph):
    out["ant"] = {"status": None, "state": "client refused the key shape"}
else:
    try:
        s = connect(CFG["bound"] + ":443")[0]
        t = ssl.create_default_context().wrap_socket(s, server_hostname=CFG["bound"])
        t.sendall(("GET /shape HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nx-file-key: %s\r\n"
                   "x-cmd-key: %s\r\nx-custom: %s\r\nConnection: close\r\n\r\n" % (
                       CFG["bound"], ph, os.environ.get("FILEKEY"), os.environ.get("CMDKEY"),
                       os.environ.get("CUSTOM_VAR"))).encode())
        out["ant"] = jresp(read_response(t))
    except (OSError, ssl.SSLError) as e:
        out["ant"] = {"status": None, "state": ename(e)}
# a secret bound to a wildcard: intercepted for a name below it (transparent path)
try:
    s = direct(CFG["wild"], 443)
    t = ssl.create_default_context().wrap_socket(s, server_hostname=CFG["wild"])
    t.sendall(("GET /shape-wild HTTP/1.1\r\nHost: %s\r\nx-wild: %s\r\nConnection: close"
               "\r\n\r\n" % (CFG["wild"], os.environ.get("WILD"))).encode())
    out["wild"] = jresp(read_response(t))
except (OSError, ssl.SSLError) as e:
    out["wild"] = {"status": None, "state": ename(e)}
print(json.dumps(out))
'''


def test_placeholder_shape_env_and_sources(ctx):
    """Placeholder prefix/length (a shape-checking client accepts it), the
    minimum length, the default length = the value's, env: false and a
    custom variable name; file and command sources (read once); fresh
    placeholders per run."""
    ant = "sk-ant-api03-" + new_value("", 40)                 # 93 chars
    short = "abc12"
    fval, cval, nval = new_value("f-"), new_value("c-"), new_value("n-")
    b = Broker(ctx, [ant, fval, cval, nval])
    fpath = ctx.host_file(os.path.join(ctx.scratch, "key-file"), fval + "\r\n", 0o600)
    cfile = ctx.host_file(os.path.join(ctx.scratch, "cmd-src"), cval + "\n\n  \n", 0o600)
    counter = os.path.join(ctx.scratch, "cmd-runs")
    ctx.host_file(counter, "")
    secrets_ = {
        "ANT": secret(SRC, prefix="sk-ant-", length=60),
        "SHORT": secret({"env": "AB_IT_SHORT"}, places=["header:x-short"]),
        "GHP": secret({"env": "AB_IT_SHORT"}, prefix="ghp_", places=["header:x-ghp"]),
        "MINLEN": secret({"env": "AB_IT_SHORT"}, prefix="sk-ant-", length=22,
                         places=["header:x-minlen"]),
        "FILEKEY": secret({"file": fpath}, places=["header:x-file-key"]),
        "CMDKEY": secret({"command": ["sh", "-c", 'echo run >> "$1"; cat "$2"', "sh", counter,
                                      cfile]}, places=["header:x-cmd-key"]),
        "NOENV": secret({"env": "AB_IT_NOENV"}, places=["header:x-noenv"], env=False),
        "RENAMED": secret({"env": "AB_IT_NOENV"}, places=["header:x-custom"], env="CUSTOM_VAR"),
        "WILD": secret({"env": "AB_IT_NOENV"}, hosts=["*.a.upstream.test"],
                       places=["header:x-wild"]),
    }
    wild = "k.a.upstream.test"
    prof = b.write_profile(secrets_, allow=[BOUND, TUNNEL, PLAIN, "*.a.upstream.test"],
                           extra_hosts={wild: "api"})
    henv = {SRC: ant, "AB_IT_SHORT": short, "AB_IT_NOENV": nval}
    phs = []
    runs = []
    logs = [log_file(ctx, "shape-%d.jsonl" % i) for i in range(2)]
    for i in range(2):
        out, r = inner_json(ctx, SHAPE_PY, {"bound": BOUND, "wild": wild}, prof, env=henv,
                            extra_args=["--log", logs[i]])
        runs.append(r)
        phs.append(out["env"])
    env = phs[0]
    problems = []
    for n, pre, ln in (("ANT", "sk-ant-", 60), ("SHORT", "", 22), ("GHP", "ghp_", 26),
                       ("MINLEN", "sk-ant-", 29), ("FILEKEY", "", len(fval)),
                       ("CMDKEY", "", len(cval)), ("CUSTOM_VAR", "", len(nval))):
        ph = env.get(n)
        if not ph or not ph.startswith(pre) or len(ph) != ln or \
                not re.match(r"^[A-Za-z0-9]+$", ph[len(pre):]):
            problems.append("%s inside is %r, expected %r + [A-Za-z0-9], %d chars" % (
                n, ph, pre, ln))
        elif phs[1].get(n) == ph:
            problems.append("%s: the same placeholder in two runs" % n)
    for n in ("NOENV", "RENAMED"):
        if n in env:
            problems.append("%s is in the environment inside (%r)" % (n, env[n]))
    for v in (ant, fval, cval, nval):
        if any(v in x for x in env.values()):
            problems.append("a real value is in the environment inside")
    if out["ant"].get("status") != 200:
        problems.append("shape-checked request: %s" % out["ant"])
    for h, want in (("x-api-key", ant), ("x-file-key", fval), ("x-cmd-key", cval),
                    ("x-custom", nval)):
        got = b.api.header("/shape", h)
        if not got or any(g != want for g in got):
            problems.append("upstream %s: %r, expected the real value (%d chars)" % (
                h, got, len(want)))
    if out["wild"].get("status") != 200:
        problems.append("wildcard-bound %s: %s" % (wild, out["wild"]))
    elif b.api.header("/shape-wild", "x-wild") != [nval] * 2:
        problems.append("wildcard-bound %s: upstream x-wild %r" % (
            wild, ["<value>" if x == nval else x for x in b.api.header("/shape-wild", "x-wild")]))
    entries, _ = read_log(logs[1], ctx)
    ls = find_lines(entries, host=BOUND, path="/shape")
    names = set((ls[0].get("secrets") or "").split(",")) if ls else set()
    if not ls or names != {"ANT", "FILEKEY", "CMDKEY", "RENAMED"} or \
            ls[0].get("intercepted") is not True:
        problems.append("audit line of /shape (4 secrets injected): %s" % ls)
    ls = find_lines(entries, host=wild, path="/shape-wild")
    if not ls or ls[0].get("secrets") != "WILD" or ls[0].get("side") != "transparent":
        problems.append("audit line of /shape-wild: %s" % ls)
    with open(counter) as f:
        nruns = f.read().count("run")
    if nruns != 2:
        problems.append("the command source ran %d times in 2 sandbox runs (once each)" % nruns)
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(),
                                [ant, fval, cval, nval])
    assert_value_nowhere(ctx, [ant, fval, cval, nval], runs, logs)


STABLE_PY = INNER_LIB + r'''
out = {"env": {k: v for k, v in os.environ.items()}}
key = os.path.join(os.environ["HOME"], ".local/state/agentbox/placeholder.key")
out["key_visible"] = os.path.exists(key)
try:
    s = connect(CFG["bound"] + ":443")[0]
    t = ssl.create_default_context().wrap_socket(s, server_hostname=CFG["bound"])
    t.sendall(("GET /stable-%s HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nConnection: close"
               "\r\n\r\n" % (CFG["run"], CFG["bound"], os.environ.get("STABLE"))).encode())
    out["req"] = jresp(read_response(t))
except (OSError, ssl.SSLError) as e:
    out["req"] = {"status": None, "state": ename(e)}
print(json.dumps(out))
'''


def test_stable_placeholder(ctx):
    """placeholder.stable: the same placeholder every run for the same value
    (a harness that approved the key by its last characters asks once), a
    new one for a new value or another name, swapped as usual; the key file
    is made 0600 outside the sandbox and never visible inside.  A grant that
    covers the key file, or a key file that is not the caller's own 0600
    one, turns it into a new placeholder each run, with a warning."""
    v1 = "sk-ant-api03-" + new_value("", 40)
    v2 = "sk-ant-api03-" + new_value("", 40)
    b = Broker(ctx, [v1, v2])
    prof = b.write_profile({
        "STABLE": dict(secret(SRC, prefix="sk-ant-api03-"),
                       placeholder={"prefix": "sk-ant-api03-", "stable": True}),
        "TWIN": dict(secret(SRC, places=["header:x-twin"]), placeholder={"stable": True}),
        "FRESH": secret(SRC, places=["header:x-fresh"]),
    })
    keyf = os.path.join(ctx.home, ".local", "state", "agentbox", "placeholder.key")
    problems = []
    envs, runs = [], []

    def run(tag, value, extra_args=()):
        out, r = inner_json(ctx, STABLE_PY, {"bound": BOUND, "run": tag}, prof,
                            env={SRC: value}, extra_args=list(extra_args))
        runs.append(r)
        envs.append(out["env"])
        if out["key_visible"]:
            problems.append("%s: the placeholder key is visible inside" % tag)
        if out["req"].get("status") != 200:
            problems.append("%s: request with the placeholder: %s" % (tag, out["req"]))
        elif b.api.header("/stable-" + tag, "x-api-key") != [value]:
            problems.append("%s: upstream did not get the real value" % tag)
        return out["env"], r

    e1, r1 = run("a", v1)
    e2, _ = run("b", v1)
    e3, _ = run("c", v2)
    ph = e1.get("STABLE", "")
    if not ph.startswith("sk-ant-api03-") or len(ph) != len(v1) or \
            not re.match(r"^[A-Za-z0-9]+$", ph[13:]) or ph == v1:
        problems.append("STABLE inside is %r: expected the prefix + [A-Za-z0-9], %d chars" %
                        (ph, len(v1)))
    if e2.get("STABLE") != ph or e2.get("TWIN") != e1.get("TWIN"):
        problems.append("stable placeholders differ between two runs with the same value")
    if e1.get("TWIN") in (ph, None):
        problems.append("two names with one value share a placeholder")
    if e1.get("FRESH") == e2.get("FRESH"):
        problems.append("a placeholder without stable repeated in two runs")
    if e3.get("STABLE") == ph:
        problems.append("a new value kept the old stable placeholder")
    if "placeholder" in r1.stderr:
        problems.append("a warning in a normal run: %s" % r1.stderr.strip())
    try:
        st = os.lstat(keyf)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o777 != 0o600 or \
                st.st_size != 32 or st.st_uid != (ctx.uid or 0):
            problems.append("key file: mode %o, %d bytes, uid %d" % (
                st.st_mode, st.st_size, st.st_uid))
        if os.stat(os.path.dirname(keyf)).st_mode & 0o077:
            problems.append("the key's directory is open to others")
    except OSError as e:
        problems.append("no key file at %s: %s" % (keyf, e))
    # a grant covering the key hides it (run() checks) and keeps it in use
    state = os.path.join(ctx.home, ".local", "state")
    e4, _ = run("d", v1, ["--read", os.path.join(ctx.home, ".local")])
    e5, _ = run("e", v1, ["--write", state])
    if e4.get("STABLE") != ph or e5.get("STABLE") != ph:
        problems.append("a grant covering the key changed the stable placeholder")
    # a writable grant above a directory between it and the key: that
    # directory also holds the change sets of review mode, which every
    # sandbox has reserved with its parents pinned, so the sandbox cannot
    # move it away (and the key with it) to plant its own key at the path
    deep = os.path.join(state, "deep")
    xdg = {SRC: v1, "XDG_STATE_HOME": deep}
    dkey = os.path.join(deep, "agentbox", "placeholder.key")
    r = ctx.sandbox("true", profile=prof, env=xdg)
    ino = os.lstat(dkey).st_ino
    plant = ("cd %s && mv deep moved && mkdir -p deep/agentbox && "
             "head -c 32 /dev/zero > deep/agentbox/placeholder.key && "
             "chmod 600 deep/agentbox/placeholder.key" % state)
    r = ctx.sandbox(plant, profile=prof, extra_args=["--write", state], env=xdg)
    runs.append(r)
    if r.returncode == 0 or "Device or resource busy" not in r.stderr:
        problems.append("the key's directory was moved away: %s" % describe(r))
    if os.path.exists(os.path.join(state, "moved")) or os.lstat(dkey).st_ino != ino:
        problems.append("the key was replaced through a writable grant")
    shutil.rmtree(os.path.join(state, "moved"), ignore_errors=True)
    # a key file that is not the caller's own 0600 file: refused, a warning
    os.chmod(keyf, 0o644)
    e6, r6 = run("f", v1)
    if e6.get("STABLE") == ph or "mode 0600" not in r6.stderr:
        problems.append("a 0644 key was used (or no warning): %r" % r6.stderr)
    os.chmod(keyf, 0o600)
    e7, _ = run("g", v1)
    if e7.get("STABLE") != ph:
        problems.append("the restored key gave another placeholder")
    assert not problems, redact("\n".join(problems) + "\n" + b.summary(), [v1, v2])
    assert_value_nowhere(ctx, [v1, v2], runs, [])


class WsUpstream:
    """A TLS WebSocket server that reflects the real value in its frames:
    whole in small, 16-bit and 64-bit length frames, in a ping, and split
    across two TCP writes inside one payload; then an "end" frame.  ?mode=rsv
    sends a compressed-looking frame (RSV1) with the value instead."""

    def __init__(self, ctx, value):
        import socket as _s
        import threading as _t
        self.value = value.encode()
        self.heads = []
        self.sctx = server_ssl_context()
        self.ls = _s.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.ls.settimeout(0.2)
        self.port = self.ls.getsockname()[1]
        self.stop = False
        self.t = _t.Thread(target=self._serve, daemon=True)
        self.t.start()
        ctx.on_cleanup(self.close)

    def close(self):
        self.stop = True
        self.t.join(3)
        self.ls.close()

    @staticmethod
    def frame(op, payload, fin=True, rsv=0):
        b0 = (0x80 if fin else 0) | rsv | op
        n = len(payload)
        if n < 126:
            head = bytes([b0, n])
        elif n < 65536:
            head = bytes([b0, 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([b0, 127]) + n.to_bytes(8, "big")
        return head + payload

    def _serve(self):
        import base64 as _b
        import hashlib as _h
        while not self.stop:
            try:
                raw, _ = self.ls.accept()
            except OSError:
                continue
            try:
                c = self.sctx.wrap_socket(raw, server_side=True)
                c.settimeout(10)
                head = b""
                while b"\r\n\r\n" not in head:
                    d = c.recv(4096)
                    if not d:
                        break
                    head += d
                text = head.decode("latin-1")
                self.heads.append(text)
                key = ""
                for line in text.split("\r\n"):
                    if line.lower().startswith("sec-websocket-key:"):
                        key = line.split(":", 1)[1].strip()
                acc = _b.b64encode(_h.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                                           .encode()).digest()).decode()
                c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" %
                           acc).encode())
                v = self.value
                if "mode=many" in text.split("\r\n")[0]:
                    # more empty fragments than the proxy keeps waiting
                    c.sendall(self.frame(1, b"a" * 30, fin=False))
                    c.sendall(b"".join(self.frame(0, b"", fin=False) for _ in range(100)))
                    c.sendall(self.frame(0, b"b" * 30 + v))
                    c.sendall(self.frame(1, b"end"))
                elif "mode=rsv" in text.split("\r\n")[0]:
                    c.sendall(self.frame(1, b"deflated " + v, rsv=0x40))
                    time.sleep(0.5)
                    c.sendall(self.frame(1, b"end"))
                else:
                    c.sendall(self.frame(1, b'{"echo":"' + v + b'"}'))
                    c.sendall(self.frame(2, b"x" * 150 + v + b"y" * 150))
                    c.sendall(self.frame(2, b"z" * 70000 + v))
                    c.sendall(self.frame(9, v))
                    f = self.frame(1, b"split:" + v + b":tail")
                    cut = 2 + 6 + len(v) // 2
                    c.sendall(f[:cut])
                    time.sleep(0.3)
                    c.sendall(f[cut:])
                    # one message in two fragments, the value split between them
                    c.sendall(self.frame(1, b"frag:" + v[:20], fin=False))
                    time.sleep(0.3)
                    c.sendall(self.frame(0, v[20:] + b":end"))
                    c.sendall(self.frame(1, b"end"))
                time.sleep(0.5)
                c.close()
            except OSError:
                pass


WS_PY = INNER_LIB + r'''
import base64 as _b
out = {}
for mode in ("plain", "rsv", "many"):
    s = connect(CFG["host"] + ":443")[0]
    t = ssl.create_default_context().wrap_socket(s, server_hostname=CFG["host"])
    t.sendall(("GET /ws?mode=%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
               "x-api-key: %s\r\n\r\n" % (mode, CFG["host"], os.environ["WSKEY"])).encode())
    t.settimeout(10)
    data = b""
    while True:
        try:
            d = t.recv(65536)
        except (OSError, ssl.SSLError) as e:
            break
        if not d:
            break
        data += d
    out[mode] = _b.b64encode(data).decode()
print(json.dumps(out))
'''


def _ws_frames(data):
    """(status line, [(opcode, payload)], leftover bytes) of a 101 + frames."""
    head, _, rest = data.partition(b"\r\n\r\n")
    frames = []
    while len(rest) >= 2:
        b0, b1 = rest[0], rest[1]
        n, i = b1 & 0x7f, 2
        if n == 126:
            n, i = int.from_bytes(rest[2:4], "big"), 4
        elif n == 127:
            n, i = int.from_bytes(rest[2:10], "big"), 10
        if len(rest) < i + n:
            break
        frames.append((b0 & 0x0f, rest[i:i + n], b0 & 0x70))
        rest = rest[i + n:]
    return head.split(b"\r\n")[0], frames, rest


def test_websocket_frames_masked(ctx):
    """A WebSocket from an intercepted host: the real value in the server's
    frames (small, 16-bit and 64-bit lengths, a ping, a payload split across
    TCP writes, split across the two fragments of one message) reaches the
    client masked, every frame intact; the client's
    offer of compression is not passed on; a compressed frame (RSV1), which
    masking cannot see into, ends the connection instead of reaching it."""
    value = "sk-ws-" + new_value("", 40)
    b = Broker(ctx, [value])
    b.ws = WsUpstream(ctx, value)
    host = "ws.upstream.test"
    prof = b.write_profile({"WSKEY": secret(SRC, hosts=[host])},
                           allow=[BOUND, TUNNEL, PLAIN, host], extra_hosts={host: "ws"})
    out, r = inner_json(ctx, WS_PY, {"host": host}, prof, env={SRC: value})
    problems = []
    plain = base64.b64decode(out["plain"])
    status, frames, rest = _ws_frames(plain)
    if b" 101 " not in status:
        problems.append("no 101: %r" % plain[:200])
    want = [(1, 9 + len(value) + 2), (2, 300 + len(value)), (2, 70000 + len(value)),
            (9, len(value)), (1, 6 + len(value) + 5), (1, 25), (0, len(value) - 20 + 4),
            (1, 3)]
    if [(op, len(p)) for op, p, _ in frames] != want or rest:
        problems.append("frames (opcode, length) %r, expected %r (leftover %d)" % (
            [(op, len(p)) for op, p, _ in frames], want, len(rest)))
    if value.encode() in plain:
        problems.append("the real value reached the client in a frame")
    ph = None
    for op, p, _ in frames[:5]:
        m = re.search(rb"[A-Za-z0-9_-]{%d}" % len(value), p)
        if not m:
            problems.append("a frame without the masked value: %r" % p[:80])
    if len(frames) > 6:
        joined = frames[5][1] + frames[6][1]
        if value.encode() in joined or value[:20].encode() in frames[5][1]:
            problems.append("the value split across two fragments of a message was not masked")
    if frames and frames[-1][1] != b"end":
        problems.append("the last frame is %r" % (frames[-1][1][:40],))
    heads = [h for h in b.ws.heads if "mode=plain" in h.split("\r\n")[0]]
    if not heads or "sec-websocket-extensions" in heads[0].lower():
        problems.append("the compression offer reached the upstream: %r" % heads[:1])
    elif ("x-api-key: " + value).lower() not in heads[0].lower():
        problems.append("the upgrade request did not carry the real value")
    many = base64.b64decode(out["many"])
    _, mframes, mrest = _ws_frames(many)
    mwant = [(1, 30)] + [(0, 0)] * 100 + [(0, 30 + len(value)), (1, 3)]
    if [(op, len(p)) for op, p, _ in mframes] != mwant or mrest:
        problems.append("101 fragments: framing broken (%d frames, leftover %d)" % (
            len(mframes), len(mrest)))
    elif value.encode() in many:
        problems.append("the value after 100 empty fragments was not masked")
    rsv = base64.b64decode(out["rsv"])
    if value.encode() in rsv or b"deflated" in rsv or b"end" in rsv.partition(b"\r\n\r\n")[2]:
        problems.append("a compressed frame reached the client: %r" % rsv[:200])
    assert not problems, redact("\n".join(problems) + "\n" + describe(r), [value])
    assert_value_nowhere(ctx, [value], [r], [])


# ==========================================================================
# Start-up failures

def test_missing_or_bad_secret_fails_before_launch(ctx):
    """A missing or empty source (env unset, file missing/empty, command
    failing or silent) or a secret bound to a host network.allow does not
    allow: exit 125 before the command runs, naming the secret and the
    source, never a value."""
    b = Broker(ctx)
    marker = os.path.join(ctx.ws, "command-ran")
    empty = ctx.host_file(os.path.join(ctx.scratch, "empty"), "")
    badval = "bad" + new_value("", 8) + "\nmore" + new_value("", 8)
    bad = ctx.host_file(os.path.join(ctx.scratch, "bad"), badval + "\n")
    missing = os.path.join(ctx.scratch, "no-such-file")
    cases = [
        ("env_unset", secret({"env": "AB_IT_UNSET"}), None, ("KEY", "AB_IT_UNSET")),
        ("env_empty", secret({"env": "AB_IT_EMPTY"}), None, ("KEY", "AB_IT_EMPTY")),
        ("file_missing", secret({"file": missing}), None, ("KEY", missing)),
        ("file_empty", secret({"file": empty}), None, ("KEY", empty)),
        ("cmd_fails", secret({"command": ["false"]}), None, ("KEY", "false")),
        ("cmd_silent", secret({"command": ["true"]}), None, ("KEY", "true")),
        ("cmd_missing", secret({"command": ["ab-it-no-such-command"]}), None,
         ("KEY", "ab-it-no-such-command")),
        ("bad_bytes", secret({"file": bad}), None, ("KEY",)),
        ("host_not_allowed", secret(SRC, hosts=["evil.test"]), None, ("KEY", "evil.test")),
        ("wildcard_not_allowed", secret(SRC, hosts=["*.upstream.test"]), None,
         ("KEY", "*.upstream.test")),
    ]
    problems = []
    for name, sec, _, needles in cases:
        prof = b.write_profile({"KEY": sec}, name="bad-" + name)
        r = ctx.sandbox(["sh", "-c", "touch %s" % marker], profile=prof,
                        env={"AB_IT_EMPTY": "", SRC: "the-value-" + name})
        if r.returncode != 125:
            problems.append("%s: exit %s, expected 125\n%s" % (name, r.returncode, describe(r)))
        for n in needles:
            if n not in r.stderr:
                problems.append("%s: the message does not name %r: %r" % (
                    name, n, r.stderr.strip()))
        for v in (badval, "the-value-" + name, badval.split("\n")[0], badval.split("\n")[1]):
            if v in r.stderr or v in r.stdout:
                problems.append("%s: the value is in the message: %r" % (name, r.stderr))
        if os.path.exists(marker):
            problems.append("%s: the command ran" % name)
            os.unlink(marker)
    assert not problems, "\n".join(problems)


def test_secret_file_readable_inside_refused(ctx):
    """A secret read from a file the sandbox would see as it is (here one in
    the workspace) is refused: its real value would be readable inside.
    Denied, the same profile runs and the file is absent inside."""
    value = new_value()
    tok = ctx.host_file(os.path.join(ctx.ws, "token.txt"), value + "\n", 0o600)
    sec = {"from": {"file": "${WORKSPACE}/token.txt"}, "hosts": ["api.example.com"],
           "in": ["header:authorization"]}
    prof = {"version": 1, "extends": "default", "secrets": {"TOK": sec},
            "network": {"allow": ["api.example.com"]}}
    p1 = ctx.host_file(os.path.join(ctx.scratch, "tok.json"), json.dumps(prof))
    r = ctx.sandbox("cat token.txt", profile=p1)
    assert r.returncode == 125, describe(r)
    assert "secret TOK: its real value is in %s, which the sandbox can read" % tok \
        in r.stderr, describe(r)
    assert "filesystem.deny" in r.stderr and value not in r.stdout + r.stderr
    prof["filesystem"] = {"deny": ["${WORKSPACE}/token.txt"]}
    p2 = ctx.host_file(os.path.join(ctx.scratch, "tok2.json"), json.dumps(prof))
    r = ctx.sandbox("cat token.txt; echo \"[$TOK]\"", profile=p2)
    assert r.returncode == 0 and value not in r.stdout, describe(r)
    assert "[" in r.stdout and "[]" not in r.stdout, describe(r)
