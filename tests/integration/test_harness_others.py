# SPDX-License-Identifier: MIT
"""Smoke tests of the shipped gemini-cli and opencode profiles with the real
programs, and of the registry extension profiles npm, pypi and github (meant
to be named +npm, +pypi, +github once the profile loader accepts a leading +).

Each harness is installed by the test itself from the npm registry into a
cache that survives between runs (/var/cache/agentbox-tests/npm/NAME@VERSION,
pinned, reused once a marker says the install completed).  It then runs
UNMODIFIED inside `agentbox run -p <shipped profile> -p <test extension>`:

  * it prints its version;
  * a one-shot prompt (gemini -p, opencode run) reaches its API host through
    agentbox's proxy.  The API is a loopback HTTPS mock started here, serving
    the REAL API host name (generativelanguage.googleapis.com,
    api.anthropic.com) with a certificate of the test CA.  The test extension
    profile only maps that name to the mock (network.hosts), names the test
    CA as the upstream trust (network.ca_file) and lets the sandbox read the
    cache; the secret, its host binding, its header places and the
    placeholder shape are the shipped profile's own.  The mock must receive
    the real key (the test's value, given to agentbox only); the sandbox only
    ever holds the placeholder.

Nothing here reaches a real API: the real names are answered by the mock
through the mapping, and the upstream is verified against the test CA only.
"""

import atexit
import http.server
import json
import os
import secrets as pysecrets
import shutil
import socketserver
import ssl
import subprocess
import tempfile
import threading

import abtest
from abtest import describe, skip
from upstream import read_log, session_ca

CACHE = os.environ.get("AB_IT_NPM_CACHE", "/var/cache/agentbox-tests/npm")
if not abtest.IS_ROOT and not os.environ.get("AB_IT_NPM_CACHE"):  # unprivileged runner
    CACHE = os.path.join(os.path.expanduser("~"), ".cache", "agentbox-tests", "npm")
GEMINI_PKG, GEMINI_VER, GEMINI_DIR = "@google/gemini-cli", "0.61.0", "gemini-cli"
OPENCODE_PKG, OPENCODE_VER, OPENCODE_DIR = "opencode-ai", "1.18.33", "opencode-ai"
GEMINI_HOST = "generativelanguage.googleapis.com"
ANTHROPIC_HOST = "api.anthropic.com"
MOCK_NAMES = (GEMINI_HOST, ANTHROPIC_HOST)
MARKER = ".agentbox-install-complete"
REPLY = "agentbox-mock-reply-7f3a"
NPM_TIMEOUT = 75


# --------------------------------------------------------------------------
# the npm cache

def npm_install(pkg, version, dirname):
    """The prefix holding pkg@version, installed there on first use.  A
    marker file written after a complete install makes later runs reuse it;
    a partial install (no marker) is removed and redone.  Never global."""
    prefix = os.path.join(CACHE, "%s@%s" % (dirname, version))
    if os.path.exists(os.path.join(prefix, MARKER)):
        return prefix
    npm = shutil.which("npm", path=abtest.HOST_PATH)
    if npm is None:
        skip("npm is not installed on this machine (needed to install %s)" % pkg)
    os.makedirs(CACHE, mode=0o755, exist_ok=True)
    os.chmod(CACHE, 0o755)
    tmp = tempfile.mkdtemp(prefix=".install-%s-" % dirname, dir=CACHE)
    xdg = tempfile.mkdtemp(prefix="abit-npm-xdg-")
    try:
        os.chmod(tmp, 0o755)
        # A neutral project name: npm refuses to install a package into a
        # project of the same name (the directory's name otherwise).
        with open(os.path.join(tmp, "package.json"), "w") as f:
            f.write('{"name": "agentbox-test-cache", "private": true}\n')
        # The runner's own environment: it may name the CA of a proxy on the
        # way to the registry (NODE_EXTRA_CA_CERTS and the like).
        # Install scripts that start the program (opencode's postinstall runs
        # `opencode --version`) write their XDG directories here, not into
        # the runner's home.
        env = dict(os.environ, npm_config_update_notifier="false",
                   XDG_CONFIG_HOME=os.path.join(xdg, "config"),
                   XDG_DATA_HOME=os.path.join(xdg, "data"),
                   XDG_CACHE_HOME=os.path.join(xdg, "cache"),
                   XDG_STATE_HOME=os.path.join(xdg, "state"))
        r = subprocess.run([npm, "install", "--prefix", tmp, "%s@%s" % (pkg, version),
                            "--no-audit", "--no-fund", "--no-save"],
                           cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=NPM_TIMEOUT, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, "npm install %s@%s failed (exit %d)\n%s%s" % (
            pkg, version, r.returncode, r.stdout[-2000:], r.stderr[-3000:])
        with open(os.path.join(tmp, MARKER), "w") as f:
            f.write("%s@%s\n" % (pkg, version))
        if os.path.exists(prefix):  # a partial install of an earlier run
            shutil.rmtree(prefix)
        os.rename(tmp, prefix)
        tmp = None
    finally:
        shutil.rmtree(xdg, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return prefix


# --------------------------------------------------------------------------
# the mock API (host side)

_LEAF = None
_LEAF_LOCK = threading.Lock()


def mock_leaf():
    """(cert, key) paths of a leaf for the real API names, signed by the
    test CA of upstream.session_ca() (made once per runner)."""
    global _LEAF
    with _LEAF_LOCK:
        if _LEAF is not None:
            return _LEAF
        ca = session_ca()
        d = tempfile.mkdtemp(prefix="abit-harness-leaf-")
        atexit.register(shutil.rmtree, d, True)

        def ossl(args):
            r = subprocess.run(["openssl"] + args, cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError("openssl %s: %s" % (args[0], r.stderr))
        ossl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=" + MOCK_NAMES[0]])
        with open(os.path.join(d, "leaf.ext"), "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid\nsubjectAltName=%s\n"
                    % ",".join("DNS:" + n for n in MOCK_NAMES))
        ossl(["x509", "-req", "-in", "leaf.csr", "-CA", ca["ca"], "-CAkey", ca["ca_key"],
              "-set_serial", "0x%x" % int.from_bytes(os.urandom(8), "big"), "-out", "leaf.pem",
              "-days", "3", "-sha256", "-extfile", "leaf.ext"])
        _LEAF = (os.path.join(d, "leaf.pem"), os.path.join(d, "leaf.key"))
        return _LEAF


def _sse(events):
    """Server-sent events: [(event name or None, JSON object)]."""
    out = b""
    for name, obj in events:
        if name:
            out += b"event: " + name.encode() + b"\n"
        out += b"data: " + json.dumps(obj).encode() + b"\n\n"
    return out


def gemini_answer(path, body):
    """(status, content type, body) of the Gemini API for one request."""
    cand = {"candidates": [{"content": {"role": "model", "parts": [{"text": REPLY}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3,
                              "totalTokenCount": 8},
            "modelVersion": "gemini-2.5-pro"}
    if ":streamGenerateContent" in path:
        return 200, "text/event-stream", _sse([(None, cand)])
    if ":generateContent" in path:
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = {}
        gc = req.get("generationConfig") or {}
        if gc.get("responseMimeType") == "application/json" or gc.get("responseJsonSchema") \
                or gc.get("responseSchema"):
            # the CLI's internal classifiers ask for JSON
            text = json.dumps({"reasoning": "mock", "model_choice": "flash",
                               "complexity_reasoning": "mock", "complexity_score": 1,
                               "next_speaker": "user"})
            cand = json.loads(json.dumps(cand))
            cand["candidates"][0]["content"]["parts"][0]["text"] = text
        return 200, "application/json", json.dumps(cand).encode()
    if ":countTokens" in path:
        return 200, "application/json", b'{"totalTokens": 5}'
    if ":embedContent" in path or ":batchEmbedContents" in path:
        return 200, "application/json", b'{"embeddings": [{"values": [0.0]}]}'
    return 404, "application/json", json.dumps(
        {"error": {"code": 404, "message": "mock: no such method " + path,
                   "status": "NOT_FOUND"}}).encode()


def anthropic_answer(path, body):
    """(status, content type, body) of the Anthropic Messages API."""
    try:
        req = json.loads(body or b"{}")
    except ValueError:
        req = {}
    if not path.split("?")[0].endswith("/v1/messages"):
        return 404, "application/json", json.dumps(
            {"type": "error", "error": {"type": "not_found_error",
                                        "message": "mock: " + path}}).encode()
    model = req.get("model") or "claude-sonnet-4-5"
    usage = {"input_tokens": 5, "output_tokens": 3}
    msg = {"id": "msg_mock01", "type": "message", "role": "assistant", "model": model,
           "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    if not req.get("stream"):
        msg = dict(msg, content=[{"type": "text", "text": REPLY}], stop_reason="end_turn")
        return 200, "application/json", json.dumps(msg).encode()
    return 200, "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": msg}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": REPLY}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ])


class _MockHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "abit-mock-api"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        self.request.settimeout(30)
        self.request.do_handshake()
        super().setup()

    def _body(self):
        te = self.headers.get("Transfer-Encoding", "").lower()
        if te == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline(1100).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.read(2)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self):
        mock = self.server.mock
        body = self._body()
        rec = {"method": self.command, "path": self.path, "host": self.headers.get("Host"),
               "headers": [(k.lower(), v) for k, v in self.headers.items()], "body": body}
        with mock.lock:
            mock.recs.append(rec)
        status, ctype, out = mock.answer(self.path, body)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = _handle


class _MockServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):
        sock, addr = self.socket.accept()
        return self.sslctx.wrap_socket(sock, server_side=True,
                                       do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass


class MockAPI:
    """A loopback HTTPS server answering as the real API host(s) (the leaf
    of mock_leaf()); records every request (method, path, headers, body)."""

    def __init__(self, ctx, answer):
        self.answer = answer
        self.lock = threading.Lock()
        self.recs = []
        cert, key = mock_leaf()
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(cert, key)
        sctx.set_alpn_protocols(["http/1.1"])
        self.srv = _MockServer(("127.0.0.1", 0), _MockHandler)
        self.srv.sslctx = sctx
        self.srv.mock = self
        self.port = self.srv.server_address[1]
        t = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1},
                             daemon=True, name="abit-mock-api")
        t.start()
        ctx.on_cleanup(self.stop)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()

    def records(self):
        with self.lock:
            return list(self.recs)

    def header_values(self, name):
        return [v for r in self.records() for k, v in r["headers"] if k == name]

    def everything(self):
        parts = []
        for r in self.records():
            parts.append(r["path"])
            parts += ["%s: %s" % kv for kv in r["headers"]]
            parts.append(r["body"].decode("latin-1"))
        return "\n".join(parts)

    def summary(self):
        recs = self.records()
        return "mock saw %d requests: %s" % (len(recs), [
            (r["method"], r["path"], [k for k, _ in r["headers"]]) for r in recs][:12])


# --------------------------------------------------------------------------
# helpers

def ext_profile(ctx, name, prefix, mock=None, names=()):
    """The test extension profile: read the harness's cache, map the API
    names to the mock and trust the test CA upstream."""
    prof = {"version": 1, "filesystem": {"read": [prefix]}}
    if mock is not None:
        ca_file = os.path.join(ctx.scratch, "upstream-ca.pem")
        with open(session_ca()["ca"]) as f:
            ctx.host_file(ca_file, f.read())
        prof["network"] = {"hosts": {n: "127.0.0.1:%d" % mock.port for n in names},
                           "ca_file": ca_file}
    path = os.path.join(ctx.scratch, name + ".json")
    ctx.host_file(path, json.dumps(prof, indent=2) + "\n")
    return path


def gemini_key():
    """A fresh value shaped like a Gemini API key: AIza + 35 characters."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "AIza" + "".join(pysecrets.choice(alnum) for _ in range(35))


def anthropic_key():
    """A fresh value shaped like an Anthropic API key."""
    return "sk-ant-api03-" + pysecrets.token_urlsafe(70)[:93] + "AA"


def assert_value_nowhere(ctx, value, runs, logs=()):
    for r in runs:
        assert value not in (r.stdout or "") and value not in (r.stderr or ""), \
            "the real key is in agentbox's output\n" + describe(r).replace(value, "<KEY>")
    for lp in logs:
        if os.path.exists(lp):
            with open(lp, "rb") as f:
                assert value.encode() not in f.read(), "the real key is in the audit log"
    for root in (ctx.ws, ctx.home):
        for d, _, files in os.walk(root):
            for fn in files:
                p = os.path.join(d, fn)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    with open(p, "rb") as f:
                        data = f.read(16 << 20)
                except OSError:
                    continue
                assert value.encode() not in data, "the real key was written to %s" % p


# Runs inside (argv[1] = JSON config): tries to create or modify each path of
# "writes" (the answer is "ok" or the errno name), then runs each command of
# "cmds"; prints one line "ABIT-RESULT {json}" with the placeholder variable.
INNER = r"""
import errno, json, os, subprocess, sys
cfg = json.loads(sys.argv[1])
out = {"ph": os.environ.get(cfg["var"]), "writes": {}, "cmds": []}
for p in cfg.get("writes", []):
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "a") as f:
            f.write("{}")
        out["writes"][p] = "ok"
    except OSError as e:
        out["writes"][p] = errno.errorcode.get(e.errno, str(e.errno))
for cmd in cfg["cmds"]:
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=cfg.get("timeout", 50))
        res = {"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace")[-6000:],
               "err": r.stderr.decode("utf-8", "replace")[-6000:]}
    except subprocess.TimeoutExpired as e:
        res = {"rc": "timeout", "out": (e.stdout or b"").decode("utf-8", "replace")[-6000:],
               "err": (e.stderr or b"").decode("utf-8", "replace")[-6000:]}
    out["cmds"].append(res)
print("ABIT-RESULT " + json.dumps(out))
"""


def inner_run(ctx, profiles, var, cmds, env, log, writes=(), timeout=80):
    """agentbox run -p P... --log LOG -- python3 INNER; returns (result, run)."""
    args = []
    for p in profiles:
        args += ["-p", p]
    cfg = {"var": var, "cmds": cmds, "writes": list(writes)}
    r = ctx.sandbox([abtest.INNER_PY, "-c", INNER, json.dumps(cfg)], profile=None,
                    extra_args=args + ["--log", log], env=env, timeout=timeout)
    line = [l for l in r.stdout.splitlines() if l.startswith("ABIT-RESULT ")]
    assert r.returncode == 0 and line, "the inner runner failed\n" + describe(r)
    return json.loads(line[-1][len("ABIT-RESULT "):]), r


def fmt_cmd(res):
    return "exit %s\nstdout: %s\nstderr: %s" % (res["rc"], res["out"][-1500:], res["err"][-2500:])


def make_home_dirs(ctx, rels):
    """Directories of the fake HOME a profile grants (they must exist on the
    host to be granted), owned by the test's user."""
    for rel in rels:
        d = os.path.join(ctx.home, rel)
        os.makedirs(d, exist_ok=True)
        if ctx.uid != 0:
            abtest.chown_tree(os.path.join(ctx.home, rel.split("/")[0]), ctx.uid, ctx.gid)


def check_brokered(ctx, mock, host, secret, header, value, ph, prefix, log, runs):
    """The placeholder had the shipped profile's shape; the mock received the
    real value (and never the placeholder) in every request; the audit log
    shows intercepted requests that carried the secret; the value is nowhere
    on disk or in agentbox's output."""
    assert ph and ph != value and ph.startswith(prefix) and len(ph) == len(value), \
        "placeholder inside %r (value %d chars, expected prefix %r)" % (ph, len(value), prefix)
    recs = mock.records()
    assert recs, "the mock API received no request\n" + mock.summary()
    seen = mock.header_values(header)
    assert seen and all(v == value for v in seen), \
        "the mock received %s %r, expected the real key on every request\n%s" % (
            header, ["<placeholder>" if v == ph else ("<real>" if v == value else v[:16])
                     for v in seen], mock.summary())
    assert len(seen) == len(recs), "a request without the key: " + mock.summary()
    assert ph not in mock.everything(), "the placeholder reached the API"
    assert ctx.token not in mock.everything(), "a canary of the fake HOME reached the API"
    entries, _ = read_log(log, ctx)
    lines = [e for e in entries if e.get("event") == "request" and e.get("host") == host]
    assert lines and all(e.get("intercepted") is True and e.get("decision") == "allow"
                         for e in lines), "audit log lines for %s: %s" % (host, lines)
    assert all(e.get("secrets") == secret for e in lines), lines
    assert_value_nowhere(ctx, value, runs, [log])
    return entries


def denied_hosts(entries):
    return sorted({e.get("host") for e in entries
                   if e.get("event") == "request" and e.get("decision") == "deny"})


# --------------------------------------------------------------------------
# gemini-cli

def test_gemini_cli_smoke(ctx):
    """gemini (@google/gemini-cli, unmodified) in -p gemini-cli: prints its
    version; `gemini -p hi` reaches generativelanguage.googleapis.com (the
    mock) through the proxy with the real key in x-goog-api-key while the
    sandbox holds an AIza... placeholder; the Google login tokens of
    ~/.gemini stay hidden; the workspace's .gemini/ cannot be written."""
    prefix = npm_install(GEMINI_PKG, GEMINI_VER, GEMINI_DIR)
    gemini = os.path.join(prefix, "node_modules", ".bin", "gemini")
    mock = MockAPI(ctx, gemini_answer)
    ext = ext_profile(ctx, "gemini-test", prefix, mock, [GEMINI_HOST])
    make_home_dirs(ctx, [".gemini"])
    ctx.host_file(os.path.join(ctx.home, ".gemini", "oauth_creds.json"),
                  '{"refresh_token": "%s"}\n' % ctx.token, 0o600)
    key = gemini_key()
    log = os.path.join(ctx.scratch, "gemini-audit.jsonl")
    user_settings = ctx.host_file(os.path.join(ctx.home, ".gemini", "settings.json"),
                                  '{"privacy": {"usageStatisticsEnabled": true}}\n')
    # the workspace's .gemini/ (absent: reserved), the user's settings
    # (read-only inside its writable ~/.gemini), a new file in ~/.gemini
    writes = [os.path.join(ctx.ws, ".gemini", "settings.json"), user_settings,
              os.path.join(ctx.home, ".gemini", "state-probe.json")]
    res, r = inner_run(ctx, ["gemini-cli", ext], "GEMINI_API_KEY",
                       [[gemini, "--version"],
                        [gemini, "-p", "hi", "--skip-trust", "--output-format", "text"],
                        ["cat", os.path.join(ctx.home, ".gemini", "oauth_creds.json")]],
                       {"GEMINI_API_KEY": key}, log, writes=writes)
    ver, run, cat = res["cmds"]
    assert ver["rc"] == 0 and ver["out"].strip() == GEMINI_VER, "gemini --version\n" + fmt_cmd(ver)
    assert run["rc"] == 0 and REPLY in run["out"], "gemini -p hi\n" + fmt_cmd(run) + \
        "\n" + mock.summary()
    entries = check_brokered(ctx, mock, GEMINI_HOST, "GEMINI_API_KEY", "x-goog-api-key", key,
                             res["ph"], "AIza", log, [r])
    assert any(":streamGenerateContent" in x["path"] or ":generateContent" in x["path"]
               for x in mock.records()), mock.summary()
    # only its API host was reached; anything else it tried was refused
    assert set(denied_hosts(entries)) <= {"play.googleapis.com"}, denied_hosts(entries)
    assert ctx.token not in cat["out"], "~/.gemini/oauth_creds.json was readable inside"
    for w in writes[:2]:
        assert res["writes"][w] in ("EROFS", "EACCES", "EPERM"), \
            "%s was writable: %s" % (w, res["writes"])
    assert res["writes"][writes[2]] == "ok", "~/.gemini was not writable: %s" % res["writes"]
    assert os.path.exists(os.path.join(ctx.home, ".gemini", "state-probe.json"))
    assert not os.path.exists(os.path.join(ctx.ws, ".gemini")), \
        "the placeholder .gemini was left in the workspace"


def test_gemini_cli_first_run(ctx):
    """gemini's first run: ~/.gemini present without settings.json, and no
    ~/.gemini at all.  The profile reserves the absent settings.json and
    trustedFolders.json with read-only "{}" files (an empty one is invalid
    JSON to gemini, which exited 52), so --version and `-p hi` work; the
    placeholders are gone from the host afterwards."""
    prefix = npm_install(GEMINI_PKG, GEMINI_VER, GEMINI_DIR)
    gemini = os.path.join(prefix, "node_modules", ".bin", "gemini")
    mock = MockAPI(ctx, gemini_answer)
    ext = ext_profile(ctx, "gemini-test", prefix, mock, [GEMINI_HOST])
    gdir = os.path.join(ctx.home, ".gemini")
    for state in ("empty ~/.gemini", "no ~/.gemini"):
        if state == "empty ~/.gemini":
            make_home_dirs(ctx, [".gemini"])
        else:
            shutil.rmtree(gdir)
        log = os.path.join(ctx.scratch, "gemini-first.jsonl")
        res, r = inner_run(ctx, ["gemini-cli", ext], "GEMINI_API_KEY",
                           [[gemini, "--version"],
                            [gemini, "-p", "hi", "--skip-trust", "--output-format", "text"],
                            ["cat", os.path.join(gdir, "settings.json")]],
                           {"GEMINI_API_KEY": gemini_key()}, log)
        ver, run, cat = res["cmds"]
        assert ver["rc"] == 0 and ver["out"].strip() == GEMINI_VER, \
            "%s: gemini --version\n%s" % (state, fmt_cmd(ver))
        assert run["rc"] == 0 and REPLY in run["out"], "%s: gemini -p hi\n%s\n%s" % (
            state, fmt_cmd(run), mock.summary())
        if state == "empty ~/.gemini":
            assert cat["out"] == "{}", "settings.json inside: %r" % cat["out"]
            for n in ("settings.json", "trustedFolders.json"):
                assert not os.path.exists(os.path.join(gdir, n)), \
                    "the placeholder %s was left in ~/.gemini" % n


# --------------------------------------------------------------------------
# opencode

def test_opencode_smoke(ctx):
    """opencode (opencode-ai, unmodified) in -p opencode: prints its version;
    `opencode run hi` reaches api.anthropic.com (the mock) through the proxy
    with the real key in x-api-key while the sandbox holds an sk-ant-api03-
    placeholder; its stored provider logins (auth.json) stay hidden; the
    project's opencode.json and .opencode/ cannot be written."""
    prefix = npm_install(OPENCODE_PKG, OPENCODE_VER, OPENCODE_DIR)
    opencode = os.path.join(prefix, "node_modules", ".bin", "opencode")
    mock = MockAPI(ctx, anthropic_answer)
    ext = ext_profile(ctx, "opencode-test", prefix, mock, [ANTHROPIC_HOST])
    make_home_dirs(ctx, [".config/opencode", ".local/share/opencode", ".cache/opencode",
                         ".local/state/opencode"])
    auth = os.path.join(ctx.home, ".local", "share", "opencode", "auth.json")
    ctx.host_file(auth, '{"anthropic": {"type": "api", "key": "%s"}}\n' % ctx.token, 0o600)
    project_cfg = ctx.host_file(os.path.join(ctx.ws, "opencode.json"),
                                '{"$schema": "https://opencode.ai/config.json"}\n')
    key = anthropic_key()
    log = os.path.join(ctx.scratch, "opencode-audit.jsonl")
    user_cfg = ctx.host_file(os.path.join(ctx.home, ".config", "opencode", "opencode.jsonc"),
                             '{"$schema": "https://opencode.ai/config.json"}\n')
    # the project's config (present: read-only), its .opencode/ (absent:
    # reserved), the user's config (read-only inside its writable config dir),
    # and a data file
    writes = [project_cfg, os.path.join(ctx.ws, ".opencode", "plugin", "x.js"), user_cfg,
              os.path.join(ctx.home, ".local", "share", "opencode", "state-probe.json")]
    res, r = inner_run(ctx, ["opencode", ext], "ANTHROPIC_API_KEY",
                       [[opencode, "--version"], [opencode, "run", "hi"], ["cat", auth]],
                       {"ANTHROPIC_API_KEY": key}, log, writes=writes)
    ver, run, cat = res["cmds"]
    assert ver["rc"] == 0 and ver["out"].strip() == OPENCODE_VER, \
        "opencode --version\n" + fmt_cmd(ver)
    assert run["rc"] == 0 and REPLY in run["out"], "opencode run hi\n" + fmt_cmd(run) + \
        "\n" + mock.summary()
    entries = check_brokered(ctx, mock, ANTHROPIC_HOST, "ANTHROPIC_API_KEY", "x-api-key", key,
                             res["ph"], "sk-ant-api03-", log, [r])
    assert all(x["path"].startswith("/v1/messages") for x in mock.records()), mock.summary()
    # its background plugin install may knock at the npm registry: refused
    assert set(denied_hosts(entries)) <= {"registry.npmjs.org"}, denied_hosts(entries)
    assert ctx.token not in cat["out"], "opencode's auth.json was readable inside"
    for w in writes[:3]:
        assert res["writes"][w] in ("EROFS", "EACCES", "EPERM"), \
            "%s was writable: %s" % (w, res["writes"])
    assert res["writes"][writes[3]] == "ok", "opencode's data dir was not writable: %s" % (
        res["writes"],)
    with open(project_cfg) as f:
        assert "{}" not in f.read(), "the project's opencode.json was modified"
    assert not os.path.exists(os.path.join(ctx.ws, ".opencode")), \
        "the placeholder .opencode was left in the workspace"


# --------------------------------------------------------------------------
# registry extensions

EXTENSIONS = {
    "+npm": ["registry.npmjs.org", "registry.yarnpkg.com"],
    "+pypi": ["pypi.org", "files.pythonhosted.org"],
    "+github": ["github.com", "api.github.com", "codeload.github.com",
               "raw.githubusercontent.com", "objects.githubusercontent.com",
               "release-assets.githubusercontent.com"],
}


def explain_json(ctx, *profiles):
    args = ["explain"]
    for p in profiles:
        args += ["-p", p]
    r = ctx.run(args + ["-w", ctx.ws, "--json"])
    assert r.returncode == 0, describe(r)
    return json.loads(r.stdout)


def test_registry_extensions(ctx):
    """npm, pypi and github each only add their registry hosts to
    network.allow: `explain -p default -p EXT` equals `explain -p default`
    but for the allow list (and the ports it implies); after a harness
    profile they add their hosts and change nothing else of it (secret,
    description); check passes; test-escape -p default -p EXT exits 0."""
    base = explain_json(ctx, "default")
    gem_env = {"GEMINI_API_KEY": gemini_key()}
    for ext, hosts in EXTENSIONS.items():
        r = ctx.run(["check", ext])
        assert r.returncode == 0, describe(r)
        d = explain_json(ctx, "default", ext)
        assert d["network"]["allow"] == hosts, (ext, d["network"]["allow"])
        for k in base:
            if k in ("profile", "network"):
                continue
            assert d[k] == base[k], "%s changes %s:\n%s\nvs\n%s" % (ext, k, d[k], base[k])
        for k in base["network"]:
            if k not in ("allow", "transparent_ports", "loopback_ports"):
                assert d["network"][k] == base["network"][k], (ext, k)
        assert d["network"]["transparent_ports"] == [443, 80], d["network"]
        # composed after a harness profile: everything of it stays
        r = ctx.run(["explain", "-p", "gemini-cli", "-p", ext, "-w", ctx.ws, "--json"],
                    env=gem_env)
        assert r.returncode == 0, describe(r)
        g = json.loads(r.stdout)
        assert g["network"]["allow"] == [GEMINI_HOST] + hosts, g["network"]["allow"]
        assert g["profile"]["description"].startswith("Gemini CLI"), g["profile"]
        assert [s.get("name") for s in g["secrets"]] == ["GEMINI_API_KEY"], g["secrets"]
        esc = ctx.run(["test-escape", "-p", "default", "-p", ext], timeout=120)
        assert esc.returncode == 0, describe(esc)
