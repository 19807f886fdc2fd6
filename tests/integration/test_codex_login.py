# SPDX-License-Identifier: MIT
"""Codex's ChatGPT login (~/.codex/auth.json) brokered by the shipped codex
profile: JWT-shaped placeholders, the file rendered inside, the
token refresh captured and written back.

The fake login: an auth.json whose id_token and access_token are JWTs minted
here (HS256 with a random key, fake claims: email, plan, account id, an
expiry), a random refresh token, and keys the sandbox must not see (an API
key, an unknown key).  A test extension profile maps chatgpt.com,
auth.openai.com and api.openai.com to one loopback mock (mock_openai.py,
certificate of the tests' CA); the secrets, hosts and grants are the shipped
profile's own.  No OPENAI_API_KEY is set.

  * test_codex_chatgpt_login_exec: the REAL pinned codex, `codex exec` in
    YOLO mode.  Its access token has expired, so codex refreshes first
    (POST https://auth.openai.com/oauth/token, the refresh token in a JSON
    body); the mock answers with new tokens, agentbox captures them, hands
    codex new JWT placeholders (the new claims, random signatures) and
    writes the new values to the host file.  Codex then checks its account
    and talks to https://chatgpt.com/backend-api/codex/responses (WebSocket)
    with the NEW real access token as Bearer; a tool call copies the
    auth.json codex sees into the workspace.  Inside: only placeholders,
    header and payload of each JWT kept, no API key, no unknown key.
  * test_codex_token_exchange_refused: python3 inside drives the token
    endpoint with the id_token as subject_token (the exchange codex's login
    uses to mint an API key): the placeholder is swapped in the body, but an
    answer whose access_token is not a JWT (an API key) is not passed on
    (502); nothing changes on the host.
  * test_codex_api_key_auth_json: an auth.json of an API-key login (no
    ChatGPT tokens) with OPENAI_API_KEY set: the login's secrets are skipped
    and auth.json is shown empty (its key never reaches the sandbox).
  * test_codex_no_credentials: neither: exit 125, the hint names `codex login`.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import secrets
import time

from abtest import INNER_PY, describe
from mock_openai import API_HOST, MockOpenAI, ShellScenario
from test_harness_codex import FINAL, PROMPT_MARKER, RUN_TIMEOUT, codex_prefix, \
    files_containing
from upstream import read_log

CHATGPT = "chatgpt.com"
AUTH = "auth.openai.com"
TOKEN_PATH = "/oauth/token"
ACCOUNT = "acct-" + secrets.token_hex(8)
SECRETS = ("CODEX_CHATGPT_ACCESS", "CODEX_CHATGPT_REFRESH", "CODEX_CHATGPT_ID")
SEEN = "auth-seen-inside.json"
TOOL_DONE = "agentbox-login-tool-done-7c1d"


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims, key):
    """An HS256 JWS with KEY (random per test: nothing can verify it)."""
    head = b64u(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64u(json.dumps(claims).encode())
    sig = hmac.new(key, ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest()
    return "%s.%s.%s" % (head, body, b64u(sig))


def claims_of(token):
    p = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))


USER = "user-" + secrets.token_hex(6)


def tokens(exp, email):
    """One login's tokens (the same user and account: codex refuses a refresh
    that returns another one)."""
    key = secrets.token_bytes(32)
    auth = {"chatgpt_plan_type": "pro", "chatgpt_account_id": ACCOUNT, "chatgpt_user_id": USER}
    return {"id_token": jwt({"email": email, "exp": exp, "https://api.openai.com/auth": auth},
                            key),
            "access_token": jwt({"exp": exp, "https://api.openai.com/auth": auth,
                                 "jti": secrets.token_hex(8)}, key),
            "refresh_token": "rt_" + secrets.token_urlsafe(48)}


class Login:
    """The fake login, the mock and the extension profile."""

    def __init__(self, ctx, auth=True, token_answer=None, scenario=None, expired=True):
        self.ctx = ctx
        now = int(time.time())
        # expired: codex refreshes before anything else
        self.old = tokens(now - 600 if expired else now + 3000, "old@example.test")
        self.new = tokens(now + 3600, "old@example.test")
        self.api_key_in_file = "sk-proj-" + ctx.token
        self.token_bodies = []
        self.token_answer = token_answer
        self.sc = scenario or ShellScenario("true", FINAL, PROMPT_MARKER)
        self.mock = MockOpenAI(ctx, self.sc, routes=self.route)
        self.log = os.path.join(ctx.scratch, "audit.jsonl")
        d = os.path.join(ctx.home, ".codex")
        os.makedirs(d, exist_ok=True)
        if ctx.uid != 0:
            os.chown(d, ctx.uid, ctx.gid)
        self.file = os.path.join(d, "auth.json")
        if auth:
            doc = {"auth_mode": "chatgpt", "OPENAI_API_KEY": self.api_key_in_file,
                   "tokens": dict(self.old, account_id=ACCOUNT),
                   "last_refresh": "2025-01-01T00:00:00Z" if expired else
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "unknown_key": {"secret": "unknown-" + ctx.token}}
            ctx.host_file(self.file, json.dumps(doc, indent=2) + "\n", 0o600)

    def route(self, host, method, path, headers, body):
        if path.startswith("/backend-api/wham/accounts/check"):
            return 200, json.dumps({"accounts": [{
                "id": ACCOUNT, "workspace_backend_origin": "https://chatgpt.com",
                "account_routing_override": "NO_CONSTRAINT"}],
                "account_ordering": [ACCOUNT]}).encode()
        if path == TOKEN_PATH and method == "POST":
            self.token_bodies.append(body)
            if self.token_answer is not None:
                return 200, self.token_answer
            return 200, json.dumps(dict(self.new, expires_in=3600)).encode()
        return None

    def profile(self, prefix=None):
        ca = self.ctx.host_file(os.path.join(self.ctx.scratch, "openai-test-ca.pem"),
                                open(self.mock.ca_file).read())
        to = "127.0.0.1:%d" % self.mock.port
        prof = {"version": 1, "description": "test extension: the mock ChatGPT backend",
                "network": {"hosts": {CHATGPT: to, AUTH: to, API_HOST: to}, "ca_file": ca}}
        if prefix:
            prof["filesystem"] = {"read": [prefix]}
            prof["env"] = {"set": {"PATH": os.path.join(prefix, "node_modules", ".bin") +
                                   ":/usr/local/bin:/usr/bin:/bin"}}
        return self.ctx.host_file(os.path.join(self.ctx.scratch, "codex-login.json"),
                                  json.dumps(prof, indent=2) + "\n")

    def run(self, argv, prefix=None, env=None, timeout=RUN_TIMEOUT):
        args = ["run", "-p", "codex", "-p", self.profile(prefix), "-w", self.ctx.ws,
                "--log", self.log, "--"] + argv
        return self.ctx.run(args, env=env or {"OPENAI_API_KEY": None}, timeout=timeout)

    def reals(self):
        return [v for t in (self.old, self.new) for v in t.values()] + [self.api_key_in_file]

    def audit(self):
        entries, _ = read_log(self.log, self.ctx)
        return entries


def redact(text, login):
    for v in login.reals():
        text = text.replace(v, "<REAL>")
    return text


def jwt_placeholder_of(ph, real):
    """PH is a JWT placeholder of REAL: same header and payload, same length,
    another (base64url) signature."""
    h, p, s = ph.split(".")
    rh, rp, rs = real.split(".")
    return (h, p) == (rh, rp) and len(s) == len(rs) and s != rs and \
        all(c.isalnum() or c in "-_" for c in s)


def _codex_exec(ctx, expired):
    """codex exec on the fake login; returns (lab, run, the tokens codex
    should be using by the Responses call)."""
    prefix = codex_prefix()
    cmd = "cp ~/.codex/auth.json %s; echo %s" % (SEEN, TOOL_DONE)
    lab = Login(ctx, scenario=ShellScenario(cmd, FINAL, PROMPT_MARKER), expired=expired)
    r = lab.run(["codex", "exec", "--dangerously-bypass-approvals-and-sandbox",
                 "--skip-git-repo-check", "--color", "never",
                 PROMPT_MARKER + ": copy your credentials file, then report."], prefix)
    out = redact(describe(r), lab)
    summary = redact(lab.mock.summary(), lab)
    assert r.returncode == 0 and FINAL in r.stdout, "codex exec failed\n%s\n%s" % (out, summary)
    assert lab.sc.tool_calls_sent == 1 and lab.sc.finals_sent == 1, summary
    assert TOOL_DONE in (lab.sc.tool_output or ""), summary
    cur = lab.new if expired else lab.old
    if expired:
        # the refresh: the REAL refresh token went to the token endpoint
        assert lab.token_bodies, "codex did not refresh\n" + summary
        sent = json.loads(lab.token_bodies[0])
        assert sent["grant_type"] == "refresh_token" and \
            sent["refresh_token"] == lab.old["refresh_token"], redact(str(sent), lab)
    # the backend: the real access token as Bearer on the Responses call
    recs = lab.mock.records()
    resp = [x for x in recs if x["path"].split("?")[0] == "/backend-api/codex/responses"]
    assert resp, "codex never called the ChatGPT Responses API\n" + summary
    for x in resp:
        a = dict(x["headers"]).get("authorization")
        assert a == "Bearer " + cur["access_token"], \
            "the Responses call did not carry the real access token: %s\n%s" % (
                redact(a or "<none>", lab)[:80], summary)
    for x in recs:
        a = dict(x["headers"]).get("authorization")
        assert a in (None, "Bearer " + lab.old["access_token"],
                     "Bearer " + lab.new["access_token"]), \
            "a placeholder or another token reached the backend: %s" % redact(a, lab)[:60]
    # inside: only placeholders (JWT-shaped for the JWTs), kept parts only
    with open(os.path.join(ctx.ws, SEEN)) as f:
        seen_text = f.read()
    for v in lab.reals():
        assert v not in seen_text, "a real value reached the sandbox's auth.json"
    assert "unknown-" + ctx.token not in seen_text
    seen = json.loads(seen_text)
    assert seen.get("OPENAI_API_KEY") is None, "the file's API key is shown inside"
    t = seen["tokens"]
    assert jwt_placeholder_of(t["access_token"], cur["access_token"]), \
        "the access token inside is not a JWT placeholder of the real one"
    assert jwt_placeholder_of(t["id_token"], cur["id_token"])
    assert claims_of(t["id_token"])["email"] == "old@example.test"
    assert len(t["refresh_token"]) == len(cur["refresh_token"]) and \
        t["refresh_token"] != cur["refresh_token"]
    assert t["account_id"] == ACCOUNT
    # the host file: the current real values, everything else kept
    host = json.load(open(lab.file))
    assert {k: host["tokens"][k] for k in cur} == cur, "the host file has other tokens"
    assert host["OPENAI_API_KEY"] == lab.api_key_in_file and \
        host["unknown_key"] == {"secret": "unknown-" + ctx.token}
    assert os.stat(lab.file).st_mode & 0o777 == 0o600 and os.stat(lab.file).st_uid == ctx.uid
    # nothing real anywhere the sandbox wrote, nor in its output or the log
    for v in lab.reals():
        assert v not in r.stdout and v not in r.stderr, "a real value is in codex's output"
        assert not files_containing([ctx.ws], v)
    home_hits = [h for v in lab.reals() for h in files_containing([ctx.home], v)
                 if h != lab.file]
    assert not home_hits, "real values in files after the run: %s" % home_hits
    entries = lab.audit()
    with open(lab.log) as fh:
        log = fh.read()
    for v in lab.reals():
        assert v not in log
    used = [e for e in entries if e.get("event") == "request" and e.get("host") == CHATGPT and
            "CODEX_CHATGPT_ACCESS" in (e.get("secrets") or "")]
    assert used, "the audit log shows no request to chatgpt.com with the access token"
    skipped = sorted(e["secret"] for e in entries if e.get("event") == "secret-skipped")
    assert skipped == ["CODEX_API_KEY", "OPENAI_API_KEY"], skipped
    return lab, entries


def test_codex_chatgpt_login_exec(ctx):
    """The real codex on a valid ChatGPT login, no API key: the backend gets
    the real access token, the sandbox JWT placeholders only."""
    lab, _ = _codex_exec(ctx, expired=False)
    assert not lab.token_bodies, "codex refreshed a valid login"


def test_codex_chatgpt_refresh_inside(ctx):
    """The real codex on an expired ChatGPT login: it refreshes, saves its
    login by renaming a new auth.json over the rendered one (carried out by
    agentbox's supervisor), and its next calls carry the new real access
    token."""
    lab, entries = _codex_exec(ctx, expired=True)
    rot = [e for e in entries if e.get("rotated")]
    assert rot and set(rot[0]["rotated"].split(",")) == set(SECRETS), rot
    saved = [e for e in entries if e.get("event") == "credentials-saved"]
    assert saved and saved[0]["path"] == lab.file, saved


REFRESH = r"""
import json, os, urllib.request, urllib.error
p = os.path.expanduser("~/.codex/auth.json")
out = {}
doc = json.load(open(p))
out["file0"] = json.loads(json.dumps(doc))
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
t = doc["tokens"]
out["api1"] = call("https://chatgpt.com/backend-api/wham/accounts/check", auth=t["access_token"])
out["token"] = call("https://auth.openai.com/oauth/token", {"client_id": "app_x",
    "grant_type": "refresh_token", "refresh_token": t["refresh_token"]})
if out["token"][0] == 200:
    n = json.loads(out["token"][1])
    t.update({k: n[k] for k in ("id_token", "access_token", "refresh_token")})
    tmp = p + ".tmp"
    with open(p, "w") as f:      # in place: a rename over the mount fails
        json.dump(doc, f)
    out["api2"] = call("https://chatgpt.com/backend-api/wham/accounts/check",
                       auth=t["access_token"])
    out["file1"] = json.load(open(p))
    doc["saved_by_rename"] = True
    with open(tmp, "w") as f:
        json.dump(doc, f)
    try:
        os.rename(tmp, p)       # as codex saves it: carried out by agentbox
        out["rename"] = "ok"
    except OSError as e:
        out["rename"] = e.errno
    out["tmp_left"] = os.path.exists(tmp)
    out["file2"] = json.load(open(p))
print(json.dumps(out))
"""


def test_codex_refresh_rotation(ctx):
    """The shipped profile's refresh, driven by python3 in codex's shape (JSON
    body, refresh_token): the token endpoint gets the real refresh token; the
    answer comes back with new JWT placeholders carrying the NEW claims; the
    backend then gets the new real access token; the host file is updated."""
    lab = Login(ctx)
    started = time.time()
    r = lab.run([INNER_PY, "-c", REFRESH])
    assert r.returncode == 0, redact(describe(r), lab)
    for v in lab.reals():
        assert v not in r.stdout and v not in r.stderr, "a real value reached the sandbox"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["api1"][0] == 200 and out["token"][0] == 200 and out["api2"][0] == 200, \
        redact(json.dumps(out), lab)
    t0, n = out["file0"]["tokens"], json.loads(out["token"][1])
    for k in ("access_token", "id_token"):
        assert jwt_placeholder_of(t0[k], lab.old[k]) and jwt_placeholder_of(n[k], lab.new[k]), k
        assert claims_of(n[k])["exp"] == claims_of(lab.new[k])["exp"] != claims_of(t0[k])["exp"]
    assert n["refresh_token"] == t0["refresh_token"], "the refresh placeholder stays the same"
    assert n["expires_in"] == 3600
    assert out["rename"] == "ok" and not out["tmp_left"], out["rename"]
    assert out["file2"]["saved_by_rename"] is True and \
        out["file2"]["tokens"] == out["file1"]["tokens"]
    sent = json.loads(lab.token_bodies[0])
    assert sent["refresh_token"] == lab.old["refresh_token"] and len(lab.token_bodies) == 1
    checks = [dict(x["headers"]).get("authorization") for x in lab.mock.records()
              if x["path"].startswith("/backend-api/wham/accounts/check")]
    assert checks == ["Bearer " + lab.old["access_token"], "Bearer " + lab.new["access_token"]], \
        [redact(a or "<none>", lab)[:40] for a in checks]
    host = json.load(open(lab.file))
    assert {k: host["tokens"][k] for k in lab.new} == lab.new, "the host file was not updated"
    assert host["unknown_key"] == {"secret": "unknown-" + ctx.token}
    # the profile's stamp: last_refresh is the refresh's time (RFC 3339 UTC)
    stamp = datetime.datetime.strptime(host["last_refresh"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    assert started - 1 <= stamp <= time.time() + 1, host["last_refresh"]
    rot = [e for e in lab.audit() if e.get("rotated")]
    assert len(rot) == 1 and set(rot[0]["rotated"].split(",")) == set(SECRETS), rot


EXCHANGE = r"""
import json, os, sys, urllib.parse, urllib.request, urllib.error
doc = json.load(open(os.path.expanduser("~/.codex/auth.json")))
body = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
    "client_id": "app_x", "requested_token": "openai-api-key",
    "subject_token": doc["tokens"]["id_token"],
    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token"}).encode()
req = urllib.request.Request("https://auth.openai.com/oauth/token", data=body,
    headers={"Content-Type": "application/x-www-form-urlencoded"}, method="POST")
try:
    r = urllib.request.urlopen(req, timeout=20)
    print(json.dumps([r.status, r.read().decode()]))
except urllib.error.HTTPError as e:
    print(json.dumps([e.code, e.read().decode()]))
"""


def test_codex_token_exchange_refused(ctx):
    """An id_token exchanged for an API key at the token endpoint: the
    answer is not passed on (its access_token is not a JWT: no placeholder
    can stand for it), no secret or host file changes."""
    key = "sk-proj-" + secrets.token_hex(40)
    lab = Login(ctx, token_answer=json.dumps({"access_token": key}).encode())
    before = open(lab.file).read()
    r = lab.run([INNER_PY, "-c", EXCHANGE])
    assert r.returncode == 0, redact(describe(r), lab)
    status, body = json.loads(r.stdout.strip().splitlines()[-1])
    assert status == 502 and key not in body and key not in r.stdout + r.stderr, \
        redact("%s %s" % (status, body), lab)
    # the id_token went upstream real (swapped in the body), once
    assert len(lab.token_bodies) == 1
    form = dict(x.split("=", 1) for x in lab.token_bodies[0].decode().split("&"))
    assert form["subject_token"] == lab.old["id_token"]
    assert open(lab.file).read() == before, "the host file changed"
    refused = [e for e in lab.audit() if e.get("event") == "request" and
               e.get("path") == TOKEN_PATH and e.get("status") == 502 and
               e.get("decision") == "error"]
    assert refused, "the audit log does not show the refused token answer:\n%s" % "\n".join(
        json.dumps(e) for e in lab.audit())


def test_codex_api_key_auth_json(ctx):
    """An API-key login's auth.json (no ChatGPT tokens): the login's secrets
    are skipped, the file inside is empty, the environment key works."""
    lab = Login(ctx, auth=False)
    ctx.host_file(lab.file, json.dumps({"OPENAI_API_KEY": lab.api_key_in_file,
                                        "tokens": None}) + "\n", 0o600)
    key = "sk-proj-" + secrets.token_hex(40)
    r = lab.run(["sh", "-c", "echo size=$(wc -c < ~/.codex/auth.json); "
                             "echo key=${#OPENAI_API_KEY}"], env={"OPENAI_API_KEY": key})
    assert r.returncode == 0, describe(r)
    assert "size=0" in r.stdout and "key=%d" % len(key) in r.stdout, describe(r)
    assert lab.api_key_in_file not in r.stdout + r.stderr and key not in r.stdout
    skipped = sorted(e["secret"] for e in lab.audit() if e.get("event") == "secret-skipped")
    assert skipped == sorted(SECRETS), skipped


def test_codex_no_credentials(ctx):
    """Neither OPENAI_API_KEY nor a ChatGPT login: exit 125 and the hint."""
    lab = Login(ctx, auth=False)
    r = lab.run(["true"])
    assert r.returncode == 125, describe(r)
    assert "OPENAI_API_KEY is not set" in r.stderr and "codex login" in r.stderr, describe(r)
