# SPDX-License-Identifier: MIT
"""The real OpenAI Codex CLI (@openai/codex, pinned), unmodified, in YOLO mode
inside `agentbox run -p codex`.

The test installs the package itself from the npm registry into a cache that
survives between runs (/var/cache/agentbox-tests/npm/codex@VERSION, reused
once a marker says the install completed; never global).  Codex then runs
against a loopback HTTPS mock of the OpenAI Responses API (mock_openai.py)
that serves the REAL host name api.openai.com with a certificate of the
tests' CA.  The test's extension profile only

  * maps api.openai.com to the mock (network.hosts),
  * names the tests' CA as the upstream trust (network.ca_file),
  * lets the sandbox read the npm cache and puts its .bin first on PATH;

the allow rule, the secrets (OPENAI_API_KEY and CODEX_API_KEY, both read from
agentbox's own $OPENAI_API_KEY, bound to api.openai.com in the authorization
header, "sk-proj-" placeholders) and every filesystem grant are the shipped
profile's own.  So nothing reaches the real API, and what is tested is the
profile a user gets.

test_codex_version: `codex --version` (node launcher + native binary).

test_codex_exec_yolo: `codex exec --dangerously-bypass-approvals-and-sandbox`
with a prompt; the mock answers turn 1 with a tool call of Codex's code-mode
`exec` tool whose JavaScript runs a shell command through exec_command (it
creates a file in the workspace and writes the key variables it sees to
another one), and turn 2, which carries that command's output, with a final
answer.  Codex speaks WebSocket to the API by default: the upgrade request is
where the key goes, so that is the path exercised through agentbox's
interception.  test_codex_exec_http_fallback: the same when the mock refuses
the upgrade (HTTP POST + server-sent events).  test_codex_exec_env_key_provider:
the same with the documented config.toml recipe (a provider that reads
$OPENAI_API_KEY on every request).  Each exec run takes about 9 s with the
shipped profile: codex fetches its model catalog from chatgpt.com (with the
key's placeholder); chatgpt.com is allowed (for a ChatGPT login) but not
reachable from the tests, so codex retries with backoff before using its
bundled catalog (see docs/harnesses.md).  The ChatGPT login itself is tested
in test_codex_login.py.

test_codex_home_hardening: what in ~/.codex a later codex run on the host
would execute or obey cannot be changed from inside (read-only or private
tmpfs), the host daemon's control socket cannot be reached, auth.json is
hidden, and ordinary state is still written.
"""

import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time

import abtest
from abtest import describe, skip
from mock_openai import API_HOST, MockOpenAI, ShellScenario
from upstream import read_log

PKG = "@openai/codex"
VERSION = "0.171.0"
CACHE = os.environ.get("AB_IT_NPM_CACHE", "/var/cache/agentbox-tests/npm")
MARKER = ".agentbox-install-complete"
NPM_TIMEOUT = 300
FINAL = "agentbox-codex-final-answer-5d1c"
PROMPT_MARKER = "agentbox-codex-task-91e2"
CREATED = "created-by-codex.txt"
CREATED_TEXT = "codex was here\n"
RUN_TIMEOUT = 60


# --------------------------------------------------------------------------
# the npm cache

def codex_prefix():
    """The npm prefix holding @openai/codex@VERSION, installed on first use.
    A marker written after a complete, working install makes later runs
    reuse it; a partial install (no marker) is removed and redone."""
    prefix = os.path.join(CACHE, "codex@" + VERSION)
    if os.path.exists(os.path.join(prefix, MARKER)):
        return prefix
    npm = shutil.which("npm", path=abtest.HOST_PATH)
    if npm is None:
        skip("npm is not installed on this machine (needed to install %s)" % PKG)
    os.makedirs(CACHE, mode=0o755, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".install-codex-", dir=CACHE)
    try:
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "package.json"), "w") as f:
            f.write('{"name": "agentbox-test-cache", "private": true}\n')
        # the runner's environment: npm may need the machine's CA settings
        # (NODE_EXTRA_CA_CERTS) and proxy variables to reach the registry
        env = dict(os.environ, PATH=abtest.HOST_PATH, LANG="C.UTF-8",
                   npm_config_update_notifier="false")
        r = subprocess.run([npm, "install", "--prefix", tmp, "%s@%s" % (PKG, VERSION),
                            "--no-audit", "--no-fund", "--no-save", "--prefer-offline"],
                           cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=NPM_TIMEOUT, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, "npm install %s@%s failed (exit %d)\n%s%s" % (
            PKG, VERSION, r.returncode, r.stdout[-2000:], r.stderr[-3000:])
        # the native binary comes from the platform package (an optional
        # dependency): check the launcher finds it before marking complete
        v = subprocess.run([os.path.join(tmp, "node_modules", ".bin", "codex"), "--version"],
                           env={"PATH": abtest.HOST_PATH, "HOME": tmp}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert VERSION in v.stdout, "the installed codex does not run: %s%s" % (
            v.stdout, v.stderr)
        for d in ("tmp", ".codex"):       # what --version may have left behind
            shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
        with open(os.path.join(tmp, MARKER), "w") as f:
            f.write("%s@%s\n" % (PKG, VERSION))
        if os.path.exists(prefix):
            shutil.rmtree(prefix)
        os.rename(tmp, prefix)
        tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return prefix


# --------------------------------------------------------------------------
# helpers

def real_key():
    """A fresh, recognisable fake key of the shape of a project key."""
    return "sk-proj-" + secrets.token_hex(40)


ENV_KEY_PROVIDER = """\
# the recipe of docs/harnesses.md: the key is read from the environment on
# every request and never saved to auth.json
model_provider = "openai-env"
[model_providers.openai-env]
name = "OpenAI (key from the environment)"
base_url = "https://api.openai.com/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
"""


def codex_home(ctx, auth_canary=True, config="", settings=True):
    """ctx.home/.codex as a user who logged in on the host would have it:
    a config.toml (read-only inside), and an auth.json holding another key
    (a canary: the profile hides it, the sandbox must never see it).
    settings=False: no config.toml (a first run)."""
    d = os.path.join(ctx.home, ".codex")
    os.makedirs(d, exist_ok=True)
    if settings:
        ctx.host_file(os.path.join(d, "config.toml"),
                      "# written by test_harness_codex.py (a user's settings)\n" + config,
                      0o600)
    if auth_canary:
        ctx.host_file(os.path.join(d, "auth.json"),
                      json.dumps({"auth_mode": "apikey",
                                  "OPENAI_API_KEY": "sk-proj-" + ctx.token}) + "\n", 0o600)
    if ctx.uid != 0:
        os.chown(d, ctx.uid, ctx.gid)
    return d


def ext_profile(ctx, prefix, mock=None, log=None):
    """The test's extension profile (see the module doc)."""
    net = {}
    if mock is not None:
        ca = ctx.host_file(os.path.join(ctx.scratch, "openai-test-ca.pem"),
                           open(mock.ca_file).read())
        net = {"hosts": {API_HOST: "127.0.0.1:%d" % mock.port}, "ca_file": ca}
        if log:
            net["log"] = log
    prof = {"version": 1,
            "description": "test extension: the npm cache, the mock API",
            "filesystem": {"read": [prefix]},
            "env": {"set": {"PATH": os.path.join(prefix, "node_modules", ".bin") +
                            ":/usr/local/bin:/usr/bin:/bin"}}}
    if net:
        prof["network"] = net
    path = os.path.join(ctx.scratch, "codex-test.json")
    ctx.host_file(path, json.dumps(prof, indent=2) + "\n")
    return path


def run_codex(ctx, ext, argv, key, timeout=RUN_TIMEOUT):
    args = ["run", "-p", "codex", "-p", ext, "-w", ctx.ws, "--"] + argv
    t0 = time.monotonic()
    r = ctx.run(args, env={"OPENAI_API_KEY": key}, timeout=timeout)
    r.elapsed = time.monotonic() - t0
    return r


def redact(text, key):
    return text.replace(key, "<REAL KEY>")


def files_containing(roots, needle):
    hits = []
    b = needle.encode()
    for root in roots:
        for d, _, files in os.walk(root):
            for fn in files:
                p = os.path.join(d, fn)
                try:
                    if os.path.islink(p) or not os.path.isfile(p):
                        continue
                    with open(p, "rb") as f:
                        if b in f.read(64 << 20):
                            hits.append(p)
                except OSError:
                    pass
    return hits


SEEN = "seen-inside.txt"
TOOL_DONE = "agentbox-tool-done-3b7f"

# What the model asks codex to run.  The key variables go to a file, not to
# the command's output: the output goes back to the API in the next request
# body, where agentbox masks a placeholder (the profile's mask_in_body); the
# test checks the key inside from the file.
SHELL_CMD = ("printf '%s' > " + CREATED + "; "
             "{ printf 'CODEX_KEY_INSIDE=%%s\\n' \"$CODEX_API_KEY\"; "
             "printf 'OPENAI_KEY_INSIDE=%%s\\n' \"$OPENAI_API_KEY\"; "
             "printf 'AUTH_JSON_BYTES=%%s\\n' \"$(wc -c < ~/.codex/auth.json)\"; "
             "printf 'WHOAMI=%%s\\n' \"$(id -u)\"; } > " + SEEN + "; "
             "echo " + TOOL_DONE) % CREATED_TEXT.replace("\n", "\\n")


def check_exec_run(ctx, r, mock, sc, key, auth_before, log, secret="CODEX_API_KEY"):
    """Everything the exec tests assert."""
    out = redact(describe(r), key)
    summary = mock.summary()
    # codex did the job and said so
    assert r.returncode == 0, "codex exec failed\n%s\n%s" % (out, summary)
    assert FINAL in r.stdout, "codex did not print the final answer\n%s\n%s" % (out, summary)
    assert sc.tool_calls_sent == 1 and sc.finals_sent == 1, \
        "the mock's script did not run through (tool call, then answer)\n%s\n%s" % (
            summary, out)
    # the shell command ran in the workspace, as the sandbox user
    created = os.path.join(ctx.ws, CREATED)
    assert os.path.isfile(created), "the tool call did not create %s\n%s\n%s" % (
        created, out, summary)
    with open(created) as f:
        assert f.read() == CREATED_TEXT
    st = os.lstat(created)
    assert stat.S_ISREG(st.st_mode)
    if ctx.uid != 0:
        assert st.st_uid == ctx.uid, "created file owned by %d, not the caller" % st.st_uid
    # codex sent the command's output back to the API
    tool_out = sc.tool_output or ""
    assert TOOL_DONE in tool_out, "unexpected tool output: %r" % tool_out[:2000]
    assert key not in tool_out
    # what the sandbox saw
    with open(os.path.join(ctx.ws, SEEN)) as f:
        seen_text = f.read()
    assert key not in seen_text, "the REAL key reached the sandbox"
    seen = dict(line.split("=", 1) for line in seen_text.splitlines() if "=" in line)
    assert set(seen) == {"CODEX_KEY_INSIDE", "OPENAI_KEY_INSIDE", "AUTH_JSON_BYTES",
                         "WHOAMI"}, "unexpected %s: %r" % (SEEN, seen_text)
    for name in ("CODEX_KEY_INSIDE", "OPENAI_KEY_INSIDE"):
        ph = seen[name]
        assert ph.startswith("sk-proj-") and len(ph) == len(key) and ph != key, \
            "%s inside is not a placeholder of the key's shape: %r" % (name, ph)
    assert seen["CODEX_KEY_INSIDE"] != seen["OPENAI_KEY_INSIDE"]
    assert seen["AUTH_JSON_BYTES"] == "0", \
        "~/.codex/auth.json was readable inside (%s bytes)" % seen["AUTH_JSON_BYTES"]
    assert seen["WHOAMI"] == str(ctx.inside_uid)
    # the mock got the REAL key on every request, and only in the header
    recs = mock.records()
    assert recs, "the mock received nothing\n%s" % out
    auths = [dict(rec["headers"]).get("authorization") for rec in recs]
    assert all(a == "Bearer " + key for a in auths), \
        "not every request carried the real key: %s\n%s" % (
            [redact(a or "<none>", key)[:40] for a in auths], summary)
    for payload in mock.received_payloads():
        assert key not in payload, "the real key is in a request body or message"
        assert ctx.token not in payload, "the hidden auth.json reached the API"
    placeholders = (seen["CODEX_KEY_INSIDE"], seen["OPENAI_KEY_INSIDE"])
    everything = mock.received_text()
    for ph in placeholders:
        assert ph not in "\n".join(a or "" for a in auths), \
            "a placeholder reached the API in a header"
    assert ctx.token not in everything
    # nothing the mock sent back holds the key (it never echoes; belt and braces)
    assert key not in mock.sent_text()
    # the real key is nowhere the sandbox could have left it
    assert key not in r.stdout and key not in r.stderr, "the real key is in codex's output"
    hits = files_containing([ctx.ws, ctx.home], key)
    assert not hits, "the real key is in files after the run: %s" % hits
    # the hidden auth.json is untouched; codex kept its state in ~/.codex
    with open(os.path.join(ctx.home, ".codex", "auth.json"), "rb") as f:
        assert f.read() == auth_before, "~/.codex/auth.json was changed"
    state = os.listdir(os.path.join(ctx.home, ".codex"))
    assert any(n.endswith(".sqlite") for n in state) or "sessions" in state, \
        "codex kept no state in ~/.codex: %s" % state
    # the audit log: only api.openai.com was reached, intercepted with the key
    entries, _ = read_log(log, ctx)
    reqs = [e for e in entries if e.get("event") == "request"]
    allowed = [e for e in reqs if e.get("decision") == "allow"]
    assert allowed, "no allowed request in the audit log"
    assert all(e.get("host") == API_HOST for e in allowed), \
        "codex reached other hosts: %s" % sorted({(e.get("host"), e.get("port"))
                                                  for e in allowed})
    injected = [e for e in allowed if e.get("secrets") == secret]
    assert injected, "the audit log shows no request with the key put in:\n%s" % (
        "\n".join(json.dumps(e) for e in reqs[-10:]))
    assert key not in json.dumps(entries)
    r.audit = reqs
    return reqs


# --------------------------------------------------------------------------
# tests

def test_codex_version(ctx):
    """The shipped profile starts the real codex (node launcher + native
    binary from the platform package) and it prints its version."""
    prefix = codex_prefix()
    codex_home(ctx)
    ext = ext_profile(ctx, prefix)
    r = run_codex(ctx, ext, ["codex", "--version"], real_key(), timeout=30)
    assert r.returncode == 0, describe(r)
    assert "codex-cli " + VERSION in r.stdout, describe(r)


def _exec_test(ctx, refuse_websocket, config="", settings=True):
    prefix = codex_prefix()
    home = codex_home(ctx, config=config, settings=settings)
    with open(os.path.join(home, "auth.json"), "rb") as f:
        auth_before = f.read()
    key = real_key()
    sc = ShellScenario(SHELL_CMD, FINAL, PROMPT_MARKER)
    mock = MockOpenAI(ctx, sc, refuse_websocket=refuse_websocket)
    log = os.path.join(ctx.scratch, "audit.jsonl")
    ext = ext_profile(ctx, prefix, mock, log)
    prompt = "%s: create %s in the workspace, then report." % (PROMPT_MARKER, CREATED)
    r = run_codex(ctx, ext, ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox",
                             "--skip-git-repo-check", "--color", "never", prompt], key)
    reqs = check_exec_run(ctx, r, mock, sc, key, auth_before, log,
                          "OPENAI_API_KEY" if config else "CODEX_API_KEY")
    # the absent hooks.json is reserved by a "{}" file codex parses (an
    # empty one made it warn on every run)
    assert "failed to parse hooks config" not in r.stdout + r.stderr, describe(r)
    recs = mock.records()
    return r, recs, reqs


def test_codex_exec_yolo(ctx):
    """codex exec in YOLO mode: a tool call runs a shell command that creates
    a file in the workspace, then a final answer; over WebSocket (codex's
    default transport to api.openai.com)."""
    r, recs, _ = _exec_test(ctx, refuse_websocket=False)
    ws = [x for x in recs if x["transport"] == "ws" and x["status"] == 101]
    assert ws and all(x["transport"] == "ws" for x in recs), \
        "codex did not use the WebSocket transport: %s" % [
            (x["transport"], x["method"], x["path"], x["status"]) for x in recs]
    assert sum(len(x["ws"]) for x in ws) >= 2


def test_codex_exec_first_run(ctx):
    """codex exec with a ~/.codex holding neither config.toml nor hooks.json
    (the profile reserves both): it works and prints no parse warning; the
    placeholders are gone from the host afterwards."""
    _exec_test(ctx, refuse_websocket=False, settings=False)
    for n in ("config.toml", "hooks.json", "AGENTS.md", "AGENTS.override.md"):
        assert not os.path.exists(os.path.join(ctx.home, ".codex", n)), \
            "the placeholder %s was left in ~/.codex" % n


def test_codex_exec_http_fallback(ctx):
    """The same when the API refuses the WebSocket upgrade: codex retries, then
    falls back to HTTP POST /v1/responses with server-sent events."""
    r, recs, _ = _exec_test(ctx, refuse_websocket=True)
    posts = [x for x in recs if x["transport"] == "http" and x["method"] == "POST"
             and x["status"] == 200]
    assert len(posts) >= 2, "codex did not fall back to HTTP: %s" % [
        (x["transport"], x["method"], x["path"], x["status"]) for x in recs]


def test_codex_exec_env_key_provider(ctx):
    """The same with the documented provider recipe in ~/.codex/config.toml
    (read-only inside): codex takes the key from $OPENAI_API_KEY on every
    request, so nothing is saved to auth.json and the interactive TUI needs
    no login either; it speaks HTTP + SSE to the provider's base_url."""
    r, recs, _ = _exec_test(ctx, refuse_websocket=False, config=ENV_KEY_PROVIDER)
    assert "provider: openai-env" in r.stderr, describe(r)
    assert all(x["transport"] == "http" for x in recs)


HARDEN_PY = r'''
import errno, json, os, socket, sys
home = os.path.expanduser("~/.codex")
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "OK"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def append(p):
    with open(p, "a") as f:
        f.write("planted by the sandbox\n")
def create(p):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho planted\n")
    os.chmod(p, 0o755)
def connect(p):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(p)
    s.recv(16)
for rel in sys.argv[1].split(","):
    attempt("append:" + rel, lambda: append(os.path.join(home, rel)))
    p = os.path.join(home, rel)
    attempt("replace:" + rel, lambda: os.rename(p, p + ".x"))
for rel in sys.argv[2].split(","):
    attempt("create:" + rel, lambda: create(os.path.join(home, rel)))
for rel in sys.argv[3].split(","):
    attempt("connect:" + rel, lambda: connect(os.path.join(home, rel)))
attempt("state", lambda: create(os.path.join(home, "sessions", "probe-state")))
for name in ("auth.json", ".env"):
    with open(os.path.join(home, name), "rb") as f:
        out["bytes:" + name] = len(f.read())
print(json.dumps(out))
'''

# what a later codex run OUTSIDE the sandbox would obey or execute
READ_ONLY = ("config.toml", ".env", "hooks.json", "AGENTS.md", "rules/default.rules",
             "plugins/cache/p/hooks.json")
# planted here, each would run on the host: the daemon release the TUI starts,
# per-process helper links put on PATH, shell snapshots sourced before commands
PRIVATE = ("packages/app-server-daemon/releases/0.171.0-x86_64-unknown-linux-musl/bin/codex",
           "tmp/arg0-linux/codex-arg0host/apply_patch", "shell_snapshots/host.sh",
           ".tmp/.staging/plugin/hooks.json")
DAEMON_SOCK = "app-server-control/app-server-control.sock"
CONTROL_SOCK = "control.sock"      # a host socket in the writable part (positive control)


def test_codex_home_hardening(ctx):
    """The parts of ~/.codex that a codex run on the host (outside agentbox)
    would execute or obey cannot be changed from inside: settings, hooks,
    execpolicy rules, global instructions and plugins are read-only, .env
    (which codex loads into its environment, keys included) is hidden;
    the app-server daemon's installed release, helper links, shell snapshots
    and staging are private tmpfs (the host's copies are neither visible nor
    touched); the host daemon's control socket cannot be reached; auth.json
    is hidden; ordinary state (sessions) is still written to ~/.codex."""
    import socket
    import threading
    prefix = codex_prefix()
    home = codex_home(ctx)
    before = {}
    for rel in READ_ONLY + PRIVATE:
        p = os.path.join(home, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        ctx.host_file(p, "host content of %s\n" % rel)
        before[rel] = "host content of %s\n" % rel
    hits = []
    socks = []
    for rel in (DAEMON_SOCK, CONTROL_SOCK):
        p = os.path.join(home, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        s = socket.socket(socket.AF_UNIX)
        s.bind(p)
        os.chmod(p, 0o777)
        s.listen(4)
        s.settimeout(0.2)
        socks.append((rel, s))
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            for rel, s in socks:
                try:
                    c, _ = s.accept()
                except OSError:
                    continue
                hits.append(rel)
                c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    if ctx.uid != 0:
        abtest.chown_tree(home, ctx.uid, ctx.gid)
    try:
        ext = ext_profile(ctx, prefix)
        r = run_codex(ctx, ext, [abtest.INNER_PY, "-c", HARDEN_PY, ",".join(READ_ONLY),
                                 ",".join(PRIVATE), ",".join((DAEMON_SOCK, CONTROL_SOCK))],
                      real_key(), timeout=30)
    finally:
        stop.set()
        t.join(2)
        for _, s in socks:
            s.close()
    assert r.returncode == 0, describe(r)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for rel in READ_ONLY:
        assert res["append:" + rel] != "OK" and res["replace:" + rel] != "OK", \
            "~/.codex/%s is writable inside: %s" % (rel, res)
    for rel in READ_ONLY + PRIVATE:
        with open(os.path.join(home, rel)) as f:
            assert f.read() == before[rel], "the sandbox changed ~/.codex/%s on the host" % rel
    for rel in PRIVATE:
        assert res["create:" + rel] == "OK", \
            "codex's private %s should be writable inside (a tmpfs): %s" % (rel, res)
    assert DAEMON_SOCK not in hits and res["connect:" + DAEMON_SOCK] != "OK", \
        "the sandbox reached the host's codex daemon socket: %s (control: %s)" % (
            res, "reached" if CONTROL_SOCK in hits else "not reached")
    assert res["state"] == "OK", "codex cannot write its state to ~/.codex: %s" % res
    assert os.path.isfile(os.path.join(home, "sessions", "probe-state"))
    assert res["bytes:auth.json"] == 0, "~/.codex/auth.json is readable inside"
    assert res["bytes:.env"] == 0, "~/.codex/.env (codex loads keys from it) is readable inside"
    leftovers = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs
                 if f.endswith(".x")]
    assert not leftovers, leftovers


@abtest.root_only
def test_codex_ws_reflection_is_masked(ctx):
    """If api.openai.com sent the real key back (in a WebSocket event), codex
    must still only ever see a stand-in, as it does over HTTP + SSE."""
    prefix = codex_prefix()
    codex_home(ctx)
    key = real_key()
    sc = ShellScenario("true", "ECHO[%s]" % key, PROMPT_MARKER)
    mock = MockOpenAI(ctx, sc)
    ext = ext_profile(ctx, prefix, mock)
    r = run_codex(ctx, ext, ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox",
                             "--skip-git-repo-check", "--color", "never",
                             PROMPT_MARKER + ": answer"], key)
    assert r.returncode == 0 and "ECHO[" in r.stdout, redact(describe(r), key)
    assert any(x["transport"] == "ws" for x in mock.records())
    assert key not in r.stdout, "the real key reached the sandbox in a WebSocket frame"
