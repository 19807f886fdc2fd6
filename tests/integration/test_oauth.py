# SPDX-License-Identifier: MIT
"""Subscription logins: a credentials file rendered with
placeholders, OAuth tokens brokered, and a token refresh captured.

The shipped claude-code profile runs with NO API key and a fake
~/.claude/.credentials.json in the fake HOME.  A test extension profile maps
api.anthropic.com and platform.claude.com (the real names the profile binds
its secrets to) to one loopback TLS server whose certificate, for those two
names, comes from a CA made here (network.ca_file).  Inside, python3 plays
the harness: it reads the rendered file, calls the API with the access token
as Bearer, refreshes the tokens at platform.claude.com/v1/oauth/token with
the refresh token in a JSON body, writes the answer into its file (as
Claude Code does) and calls the API again with the new access token.

  * test_oauth_render_and_refresh: the API receives the real access token,
    then the rotated one; the token endpoint the real refresh token; the
    sandbox only ever sees placeholders (file, environment, responses); the
    host file gets the rotated tokens (atomically, mode 0600, other keys
    kept) and the audit log names the rotated secrets.
  * test_oauth_no_credentials: neither an API key nor a login: exit 125 and
    the profile's hint.
  * test_oauth_api_key_only: the login's secrets are optional: skipped, the
    audit log says so, nothing is rendered.
  * test_oauth_bad_refresh_response: a token endpoint answering 200 with
    something that is not JSON: the sandbox gets a 502, the host file is
    unchanged.

(Claude Code itself cannot be pointed at a loopback token endpoint: its
CLAUDE_CODE_CUSTOM_OAUTH_URL accepts only Anthropic's own hosts, so the
refresh is driven by python3 with the shipped profile's exact secrets.)
"""

import http.server
import json
import os
import secrets
import socketserver
import ssl
import stat
import subprocess
import threading
import time

from abtest import INNER_PY, describe
from upstream import read_log

API = "api.anthropic.com"
AUTH = "platform.claude.com"
TOKEN_PATH = "/v1/oauth/token"

INNER = r"""
import json, os, sys, urllib.request, urllib.error
p = os.path.expanduser("~/.claude/.credentials.json")
out = {"env": dict(os.environ)}
doc = json.load(open(p))
out["file0"] = doc
st = os.stat(p)
out["mode"] = oct(st.st_mode & 0o777)
def call(url, body=None, auth=None):
    h = {"Content-Type": "application/json"}
    if auth:
        h["Authorization"] = "Bearer " + auth
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers=h, method="POST" if body is not None else "GET")
    try:
        r = urllib.request.urlopen(req, timeout=20)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
o = doc["claudeAiOauth"]
out["api1"] = call("https://%(api)s/api/oauth/profile", auth=o["accessToken"])
out["token"] = call("https://%(auth)s%(path)s", {"grant_type": "refresh_token",
    "refresh_token": o["refreshToken"], "client_id": "x", "scope": "user:inference"})
if out["token"][0] == 200:
    t = json.loads(out["token"][1])
    o["accessToken"] = t["access_token"]
    o["refreshToken"] = t.get("refresh_token", o["refreshToken"])
    with open(p, "w") as f:  # in place, as Claude Code's writer ends up doing
        json.dump(doc, f)
    out["file1"] = json.load(open(p))
    out["api2"] = call("https://%(api)s/api/oauth/profile", auth=o["accessToken"])
print(json.dumps(out))
""" % {"api": API, "auth": AUTH, "path": TOKEN_PATH}


def _openssl(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)


def make_ca(d):
    """A CA and a leaf for API and AUTH; returns (ca, cert, key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                                      "-subj", "/CN=agentbox oauth test CA",
                                      "-addext", "basicConstraints=critical,CA:TRUE",
                                      "-addext", "keyUsage=critical,keyCertSign"], d)
    _openssl(["req", "-new"] + ec + ["-keyout", "leaf.key", "-out", "leaf.csr",
                                     "-subj", "/CN=" + API], d)
    with open(os.path.join(d, "leaf.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:%s,DNS:%s\n" % (API, AUTH))
    _openssl(["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
              "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext"], d)
    os.chmod(os.path.join(d, "ca.pem"), 0o644)
    return [os.path.join(d, n) for n in ("ca.pem", "leaf.pem", "leaf.key")]


class Server:
    """The API and the token endpoint, on loopback, recording everything."""

    def __init__(self, ctx, cert, key, new_tokens, token_status=200, token_body=None):
        self.recs = []
        self.lock = threading.Lock()
        srv_self = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _do(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                rec = {"method": self.command, "path": self.path,
                       "host": self.headers.get("Host"),
                       "auth": self.headers.get("Authorization"), "body": body}
                with srv_self.lock:
                    srv_self.recs.append(rec)
                if self.path == TOKEN_PATH:
                    data = token_body if token_body is not None else json.dumps(dict(
                        new_tokens, expires_in=3600, token_type="Bearer",
                        scope="user:inference")).encode()
                    code = token_status
                else:
                    data, code = b'{"account": {"uuid": "u"}}', 200
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _do

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                return self.sslctx.wrap_socket(sock, server_side=True), addr

        self.srv = S(("127.0.0.1", 0), H)
        self.srv.sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.srv.sslctx.load_cert_chain(cert, key)
        self.port = self.srv.server_address[1]
        t = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1},
                             daemon=True)
        t.start()
        ctx.on_cleanup(lambda: (self.srv.shutdown(), self.srv.server_close()))

    def records(self):
        with self.lock:
            return list(self.recs)


def tok(prefix):
    return prefix + secrets.token_urlsafe(60).replace("-", "A").replace("_", "B")[:80] + "AA"


class Lab:
    def __init__(self, ctx, login=True, token_status=200, token_body=None):
        self.ctx = ctx
        d = os.path.join(ctx.scratch, "oauth-ca")
        os.makedirs(d, exist_ok=True)
        ca, cert, key = make_ca(d)
        self.at, self.rt = tok("sk-ant-oat01-"), tok("sk-ant-ort01-")
        self.new_at, self.new_rt = tok("sk-ant-oat01-"), tok("sk-ant-ort01-")
        self.mcp = "mcp-" + ctx.token
        self.srv = Server(ctx, cert, key, {"access_token": self.new_at,
                                           "refresh_token": self.new_rt},
                          token_status, token_body)
        self.log = os.path.join(ctx.scratch, "audit.jsonl")
        cafile = ctx.host_file(os.path.join(ctx.scratch, "ca.pem"), open(ca).read())
        prof = {"version": 1, "network": {
            "hosts": {API: "127.0.0.1:%d" % self.srv.port, AUTH: "127.0.0.1:%d" % self.srv.port},
            "ca_file": cafile}}
        self.profile = ctx.host_file(os.path.join(ctx.scratch, "oauth.json"), json.dumps(prof))
        self.creds = os.path.join(ctx.home, ".claude", ".credentials.json")
        os.makedirs(os.path.dirname(self.creds), mode=0o700, exist_ok=True)
        if ctx.uid != 0:
            os.chown(os.path.dirname(self.creds), ctx.uid, ctx.gid)
        self.expires = int(time.time() * 1000) - 1000   # expired: a refresh is due
        if login:
            ctx.host_file(self.creds, json.dumps({
                "claudeAiOauth": {"accessToken": self.at, "refreshToken": self.rt,
                                  "expiresAt": self.expires, "scopes": ["user:inference"],
                                  "subscriptionType": "max"},
                "mcpOAuth": {"srv": {"accessToken": self.mcp}}}), 0o600)

    def run(self, env=None):
        args = ["run", "-p", "claude-code", "-p", self.profile, "-w", self.ctx.ws,
                "--log", self.log, "--", INNER_PY, "-c", INNER]
        return self.ctx.run(args, env=env or {"ANTHROPIC_API_KEY": None}, timeout=90)

    def audit(self):
        entries, _ = read_log(self.log, self.ctx)
        return entries

    def reals(self):
        return [self.at, self.rt, self.new_at, self.new_rt]


def test_oauth_render_and_refresh(ctx):
    lab = Lab(ctx)
    t0 = int(time.time() * 1000)
    r = lab.run()
    assert r.returncode == 0, describe(r)
    for v in lab.reals() + [lab.mcp]:
        assert v not in r.stdout and v not in r.stderr, "a real token reached the sandbox\n" + \
            describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    f0 = out["file0"]
    assert set(f0) == {"claudeAiOauth"}, "only the login is shown (no mcpOAuth): %s" % f0
    o = f0["claudeAiOauth"]
    assert o["accessToken"].startswith("sk-ant-oat01-") and o["accessToken"] != lab.at
    assert o["refreshToken"].startswith("sk-ant-ort01-") and len(o["refreshToken"]) == len(lab.rt)
    assert o["expiresAt"] == lab.expires and o["subscriptionType"] == "max", o
    assert out["mode"] == "0o600", out["mode"]
    assert "CLAUDE_OAUTH_TOKEN" not in out["env"] and "CLAUDE_OAUTH_REFRESH" not in out["env"]
    assert out["api1"][0] == 200 and out["token"][0] == 200 and out["api2"][0] == 200, out
    t = json.loads(out["token"][1])
    assert t["access_token"] == o["accessToken"], "the same placeholder, now the new value"
    assert t["refresh_token"] == o["refreshToken"]
    assert t["expires_in"] == 3600
    recs = lab.srv.records()
    api = [x for x in recs if x["path"] != TOKEN_PATH]
    toks = [x for x in recs if x["path"] == TOKEN_PATH]
    assert [x["auth"] for x in api] == ["Bearer " + lab.at, "Bearer " + lab.new_at], \
        [x["auth"] for x in api]
    assert len(toks) == 1 and json.loads(toks[0]["body"])["refresh_token"] == lab.rt
    # the host file: rotated tokens, everything else kept, mode kept
    st = os.stat(lab.creds)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == ctx.uid
    host = json.load(open(lab.creds))
    assert host["claudeAiOauth"]["accessToken"] == lab.new_at, "the host file was not updated"
    # the profile's stamp: expiresAt = the refresh's time + expires_in (3600 s), in ms
    exp = host["claudeAiOauth"]["expiresAt"]
    assert isinstance(exp, int) and t0 + 3600 * 1000 <= exp <= time.time() * 1000 + 3600 * 1000, \
        (exp, t0)
    assert host["claudeAiOauth"]["refreshToken"] == lab.new_rt
    assert host["mcpOAuth"] == {"srv": {"accessToken": lab.mcp}}
    assert host["claudeAiOauth"]["scopes"] == ["user:inference"]
    assert not [n for n in os.listdir(os.path.dirname(lab.creds)) if "agentbox" in n]
    rot = [e for e in lab.audit() if e.get("rotated")]
    assert len(rot) == 1 and rot[0]["rotated"] == "CLAUDE_OAUTH_TOKEN,CLAUDE_OAUTH_REFRESH", rot
    with open(lab.log) as fh:
        log = fh.read()
    for v in lab.reals():
        assert v not in log


def test_oauth_no_credentials(ctx):
    lab = Lab(ctx, login=False)
    r = lab.run()
    assert r.returncode == 125, describe(r)
    assert "ANTHROPIC_API_KEY is not set" in r.stderr and "claude-code has no credentials" \
        in r.stderr, describe(r)


def test_oauth_api_key_only(ctx):
    lab = Lab(ctx, login=False)
    key = "sk-ant-api03-" + secrets.token_hex(40)
    args = ["run", "-p", "claude-code", "-p", lab.profile, "-w", ctx.ws, "--log", lab.log,
            "--", "sh", "-c", "echo size=$(wc -c < ~/.claude/.credentials.json); "
            "echo key=${#ANTHROPIC_API_KEY}"]
    r = ctx.run(args, env={"ANTHROPIC_API_KEY": key}, timeout=60)
    assert r.returncode == 0, describe(r)
    # nothing rendered: the absent file stays reserved (empty, read-only)
    assert "size=0" in r.stdout and "key=%d" % len(key) in r.stdout, describe(r)
    skipped = sorted(e["secret"] for e in lab.audit() if e.get("event") == "secret-skipped")
    assert skipped == ["CLAUDE_CONFIG_API_KEY", "CLAUDE_OAUTH_REFRESH", "CLAUDE_OAUTH_TOKEN"], \
        skipped


def test_oauth_bad_refresh_response(ctx):
    lab = Lab(ctx, token_body=b"<html>not json</html>")
    before = open(lab.creds).read()
    r = lab.run()
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["token"][0] == 502 and "not passed on" in out["token"][1], out["token"]
    assert open(lab.creds).read() == before, "the host file changed"
