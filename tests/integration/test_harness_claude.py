# SPDX-License-Identifier: MIT
"""Claude Code, unmodified, inside `agentbox run -p claude-code`.

The test installs @anthropic-ai/claude-code from the npm registry itself, into
a cache that survives between runs (/var/cache/agentbox-tests/npm/
claude-code@VERSION, reused once a marker says the install completed; never
global).  The package is a native binary (bin/claude.exe, hard-linked by its
postinstall from the platform package).  Each test then lays it out in the
fake HOME the way Claude Code's native installer does (~/.local/share/claude/
versions/VERSION, ~/.local/bin/claude -> it, ~/.local/bin first on PATH), so
the shipped profile's own read grants are what makes it run: the test adds no
filesystem grant.

The model API is mock_anthropic.py on 127.0.0.1 with the test CA.  The test's
extension profile (second -p) maps the mock's name to it (network.hosts),
allows it, trusts the test CA upstream (network.ca_file), re-declares the
secret ANTHROPIC_API_KEY bound to the mock's name, and points ANTHROPIC_BASE_URL
at it.  It also maps api.anthropic.com and the denied host to counting
listeners on loopback, so nothing can leave the machine, and so the tests
see any attempt.  The fake HOME is seeded as a real user's is: ~/.claude.json
(onboarding done, the workspace trusted), ~/.claude/settings.json, and a
subscription login in ~/.claude/.credentials.json whose tokens are the
canary.

  * test_claude_version: `claude --version` under the shipped profile alone.
  * test_claude_yolo_end_to_end: `claude -p ... --dangerously-skip-permissions`
    against a scripted model: a Bash tool call that creates a file in the
    workspace, one that reads the SSH key of the real home, fetches a denied
    host and fingerprints $ANTHROPIC_API_KEY, then a final answer.
  * test_claude_environment: what the sandbox's environment holds.
  * test_claude_placeholder_in_conversation_is_masked: a tool result that
    carries the placeholder puts it into the next API request's body; the
    shipped secret's mask_in_body has the proxy send a mask of the same
    length there instead of refusing, so the conversation goes on (the API
    never sees the placeholder nor the key in a body; the audit log says
    "masked").
  * test_claude_other_secrets_placeholder_in_conversation: a second brokered
    secret (GH_TOKEN, bound to another host) whose placeholder the agent
    prints: every later API request carries it in its body; the proxy sends
    it on unchanged (a placeholder is worthless away from its own host) and
    records it once (placeholder-elsewhere), so the session finishes.
  * test_claude_tui: the interactive TUI in agentbox's pty: first screen,
    API key question, a prompt and its answer, a resize, Ctrl-C twice, the
    outer terminal restored.
"""

import fcntl
import glob
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import termios
import time

import abtest
from abtest import HOST_PATH, Listener, PtyRun, describe, skip
from mock_anthropic import MOCK_HOST, MockAnthropic, Script, text_block, tool_results, \
    tool_use_block
from upstream import read_log, session_ca

PKG = "@anthropic-ai/claude-code"
VERSION = "2.1.332"
CACHE = os.environ.get("AB_IT_NPM_CACHE", "/var/cache/agentbox-tests/npm")
MARKER = ".agentbox-install-complete"
NPM_TIMEOUT = 80
RUN_TIMEOUT = 60

DENIED = "denied.test"
REAL_API = "api.anthropic.com"
GH_HOST = "api.github.test"   # the second secret's host: a counting listener
KEY_PREFIX = "sk-ant-api03-"
KEY_RE = re.compile(r"sk-ant-api03-[A-Za-z0-9_-]+")
HRULE = "\u2500".encode()   # the box-drawing line of the prompt box


# --------------------------------------------------------------------------
# the npm cache

def claude_prefix():
    """The npm prefix holding @anthropic-ai/claude-code@VERSION, installed on
    first use (one installer at a time: a lock next to it).  A marker written
    after a complete, working install makes later runs reuse it; a partial
    install (no marker) is removed and redone."""
    prefix = os.path.join(CACHE, "claude-code@" + VERSION)
    if os.path.exists(os.path.join(prefix, MARKER)):
        return prefix
    npm = shutil.which("npm", path=HOST_PATH)
    if npm is None:
        skip("npm is not installed on this machine (needed to install %s)" % PKG)
    os.makedirs(CACHE, mode=0o755, exist_ok=True)
    lockf = open(os.path.join(CACHE, ".claude-code@%s.lock" % VERSION), "w")
    try:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(prefix, MARKER)):
            return prefix
        tmp = tempfile.mkdtemp(prefix=".install-claude-code-", dir=CACHE)
        try:
            os.chmod(tmp, 0o755)
            with open(os.path.join(tmp, "package.json"), "w") as f:
                f.write('{"name": "agentbox-test-cache", "private": true}\n')
            # npm as the user runs it: the machine's own environment (its
            # proxy, CA bundle, registry settings) reaches the registry
            env = dict(os.environ, npm_config_update_notifier="false")
            env.setdefault("PATH", HOST_PATH)
            r = subprocess.run([npm, "install", "--prefix", tmp, "%s@%s" % (PKG, VERSION),
                                "--no-audit", "--no-fund", "--no-save"],
                               cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=NPM_TIMEOUT, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, "npm install %s@%s failed (exit %d)\n%s%s" % (
                PKG, VERSION, r.returncode, r.stdout[-2000:], r.stderr[-3000:])
            binary = _native_binary(tmp)
            v = subprocess.run([binary, "--version"], env={"PATH": HOST_PATH, "HOME": tmp},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            assert VERSION in v.stdout, "the installed claude does not run: %s%s" % (
                v.stdout, v.stderr)
            for d in (".claude", ".claude.json", "tmp"):   # what --version may leave
                p = os.path.join(tmp, d)
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                elif os.path.exists(p):
                    os.unlink(p)
            with open(os.path.join(tmp, MARKER), "w") as f:
                f.write("%s@%s\n" % (PKG, VERSION))
            if os.path.exists(prefix):
                shutil.rmtree(prefix)
            os.rename(tmp, prefix)
            tmp = None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        lockf.close()
    return prefix


def _is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _native_binary(prefix):
    """The native claude executable of an install: bin/claude.exe once the
    postinstall replaced its stub, else the platform package's binary."""
    mods = os.path.join(prefix, "node_modules", "@anthropic-ai")
    for p in [os.path.join(mods, "claude-code", "bin", "claude.exe")] + \
            sorted(glob.glob(os.path.join(mods, "claude-code-linux-*", "claude"))):
        if _is_elf(p):
            return p
    raise AssertionError("no native claude binary under %s" % mods)


# --------------------------------------------------------------------------
# the fake HOME: an install and a user's state

def install_native(ctx):
    """Lay the cached binary out in ctx.home as the native installer does;
    returns the PATH to run with (~/.local/bin first)."""
    binary = _native_binary(claude_prefix())
    h = ctx.home
    versions = os.path.join(h, ".local", "share", "claude", "versions")
    bindir = os.path.join(h, ".local", "bin")
    os.makedirs(versions, exist_ok=True)
    os.makedirs(bindir, exist_ok=True)
    dest = os.path.join(versions, VERSION)
    try:
        os.link(binary, dest)          # same file system: instant, no space
    except OSError:
        shutil.copy2(binary, dest)
    os.symlink(dest, os.path.join(bindir, "claude"))
    if ctx.uid != 0:
        for d in (os.path.join(h, ".local"), os.path.join(h, ".local", "share"),
                  os.path.join(h, ".local", "share", "claude"), versions, bindir):
            os.chown(d, ctx.uid, ctx.gid)
        os.lchown(os.path.join(bindir, "claude"), ctx.uid, ctx.gid)
    return bindir + ":" + HOST_PATH


def seed_user_state(ctx):
    """~/.claude.json, ~/.claude/settings.json and a subscription login, as a
    user who has used Claude Code before has them.  Returns {path: bytes} of
    the files the sandbox must not change."""
    h = ctx.home
    state = {
        "numStartups": 7,
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": VERSION,
        "lastReleaseNotesSeen": VERSION,
        "theme": "dark",
        "projects": {ctx.ws: {"allowedTools": [], "hasTrustDialogAccepted": True,
                              "hasCompletedProjectOnboarding": True}},
    }
    ctx.host_file(os.path.join(h, ".claude.json"), json.dumps(state, indent=2) + "\n", 0o600)
    os.makedirs(os.path.join(h, ".claude"), mode=0o700, exist_ok=True)
    if ctx.uid != 0:
        os.chown(os.path.join(h, ".claude"), ctx.uid, ctx.gid)
    settings = json.dumps({"cleanupPeriodDays": 30, "includeCoAuthoredBy": False},
                          indent=2) + "\n"
    creds = json.dumps({"claudeAiOauth": {
        "accessToken": "sk-ant-oat01-" + ctx.token, "refreshToken": "sk-ant-ort01-" + ctx.token,
        "expiresAt": int(time.time() * 1000) + 3600000, "scopes": ["user:inference"],
        "subscriptionType": "max"}}) + "\n"
    keep = {}
    for rel, data, mode in ((".claude/settings.json", settings, 0o644),
                            (".claude/.credentials.json", creds, 0o600)):
        p = os.path.join(h, rel)
        ctx.host_file(p, data, mode)
        keep[p] = data.encode()
    return keep


# --------------------------------------------------------------------------
# the mock API and the extension profile

def shipped_secret():
    """secrets.ANTHROPIC_API_KEY of the shipped profiles/claude-code.json."""
    with open(os.path.join(abtest.SRCDIR, "profiles", "claude-code.json")) as f:
        return json.load(f)["secrets"]["ANTHROPIC_API_KEY"]


def new_key():
    """A fresh API key shaped like Anthropic's (108 characters)."""
    body = "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789") for _ in range(86))
    return KEY_PREFIX + body + "-" + secrets.token_hex(3) + "AA"


class Lab:
    """The mock API, the counting listeners, the extension profile and the
    environment of one test."""

    def __init__(self, ctx, script, gh_token=False):
        """gh_token: also broker GH_TOKEN (a fresh value in agentbox's
        environment, placeholder prefix ghp_), bound to GH_HOST, which is
        allowed and mapped to a counting listener."""
        self.ctx = ctx
        self.key = new_key()
        self.gh_value = None
        self.mock = MockAnthropic([self.key], script, on_cleanup=ctx.on_cleanup)
        self.denied = Listener()
        self.real_api = Listener()
        ctx.on_cleanup(self.denied.close)
        ctx.on_cleanup(self.real_api.close)
        self.log = os.path.join(ctx.scratch, "audit.jsonl")
        ca = os.path.join(ctx.scratch, "upstream-ca.pem")
        with open(session_ca()["ca"]) as f:
            ctx.host_file(ca, f.read())
        prof = {
            "version": 1,
            "description": "test extension: the Anthropic API mocked on loopback",
            "network": {
                "allow": [MOCK_HOST],
                "deny": [DENIED],
                "hosts": {MOCK_HOST: "127.0.0.1:%d" % self.mock.port,
                          DENIED: "127.0.0.1:%d" % self.denied.port,
                          REAL_API: "127.0.0.1:%d" % self.real_api.port},
                "ca_file": ca,
            },
            # the shipped secret (places, placeholder shape, mask_in_body),
            # bound to the mock's name instead
            "secrets": {"ANTHROPIC_API_KEY": dict(shipped_secret(), hosts=[MOCK_HOST])},
            "env": {"set": {"ANTHROPIC_BASE_URL": "https://" + MOCK_HOST,
                            "CLAUDE_CODE_MAX_RETRIES": "1"}},
        }
        if gh_token:
            self.gh_value = "ghp_" + "".join(secrets.choice(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
                for _ in range(36))
            self.gh = Listener()
            ctx.on_cleanup(self.gh.close)
            prof["network"]["allow"].append(GH_HOST)
            prof["network"]["hosts"][GH_HOST] = "127.0.0.1:%d" % self.gh.port
            prof["secrets"]["GH_TOKEN"] = {"from": {"env": "GH_TOKEN"}, "hosts": [GH_HOST],
                                           "placeholder": {"prefix": "ghp_"}}
        self.profile = os.path.join(ctx.scratch, "claude-mock.json")
        ctx.host_file(self.profile, json.dumps(prof, indent=2) + "\n")
        self.path = install_native(ctx)
        self.keep = seed_user_state(ctx)

    def env(self, **extra):
        e = {"ANTHROPIC_API_KEY": self.key, "PATH": self.path}
        if self.gh_value:
            e["GH_TOKEN"] = self.gh_value
        e.update(extra)
        return e

    def args(self, command, log=True):
        a = ["run", "-p", "claude-code", "-p", self.profile, "-w", self.ctx.ws]
        if log:
            a += ["--log", self.log]
        return a + ["--"] + list(command)

    def run(self, command, timeout=RUN_TIMEOUT):
        return self.ctx.run(self.args(command), env=self.env(), timeout=timeout)

    def audit(self):
        entries, _ = read_log(self.log, self.ctx)
        return entries

    def why(self, r=None):
        """Context for an assertion message (the real key redacted)."""
        parts = []
        if r is not None:
            parts.append(describe(r))
        parts.append(self.mock.summary())
        if os.path.exists(self.log):
            with open(self.log) as f:
                parts.append("audit log:\n" + "".join(f.readlines()[-30:]))
        out = "\n".join(parts).replace(self.key, "<REAL KEY>")
        return out.replace(self.gh_value, "<REAL GH_TOKEN>") if self.gh_value else out

    def check_mock_saw_only_the_key(self, r=None):
        """Every request reached the mock with the real key in x-api-key, and
        no other sk-ant-api03- string (a placeholder) arrived anywhere."""
        recs = self.mock.requests()
        assert recs, "the mock received no request\n" + self.why(r)
        for rec in recs:
            got = self.mock.header(rec, "x-api-key")
            assert got == [self.key], "%s %s reached the mock with x-api-key %s, expected " \
                "the real key\n%s" % (rec["method"], rec["target"],
                                      ["<REAL KEY>" if g == self.key else g for g in got],
                                      self.why(r))
            assert self.key.encode() not in rec["body"], \
                "the real key is in the body of %s %s (the sandbox had it)" % (
                    rec["method"], rec["target"])
        others = set(KEY_RE.findall(self.mock.everything())) - {self.key}
        assert not others, "the mock received other sk-ant-api03- strings (placeholders " \
            "that were not swapped): %s\n%s" % (sorted(others), self.why(r))

    def check_nothing_else_reached(self, r=None):
        assert self.denied.count() == 0, "%s got %d connection(s)\n%s" % (
            DENIED, self.denied.count(), self.why(r))
        assert self.real_api.count() == 0, "%s got %d connection(s): the profile's " \
            "environment did not keep Claude Code on ANTHROPIC_BASE_URL\n%s" % (
                REAL_API, self.real_api.count(), self.why(r))

    def check_key_nowhere(self, runs=()):
        """The real key is in no agentbox output, no audit log line, no file
        of the workspace or the fake HOME (transcripts, ~/.claude.json)."""
        v = self.key
        for r in runs:
            assert v not in (r.stdout or "") and v not in (r.stderr or ""), \
                "the real key is in agentbox's output\n" + self.why(r)
        if os.path.exists(self.log):
            with open(self.log, "rb") as f:
                assert v.encode() not in f.read(), "the real key is in the audit log"
        hits = []
        for root in (self.ctx.ws, self.ctx.home):
            for d, _, files in os.walk(root):
                for fn in files:
                    p = os.path.join(d, fn)
                    if os.path.islink(p) or not os.path.isfile(p) or \
                            os.path.getsize(p) > (16 << 20):
                        continue
                    with open(p, "rb") as f:
                        if v.encode() in f.read():
                            hits.append(p)
        assert not hits, "the real key is in files after the run: %s" % hits

    def check_user_files_kept(self):
        for p, data in self.keep.items():
            with open(p, "rb") as f:
                now = f.read()
            assert now == data, "%s was changed by the sandbox:\n%r" % (p, now[:500])


def _requests_in(entries, **kw):
    return [e for e in entries if e.get("event") == "request" and
            all(e.get(k) == v for k, v in kw.items())]


# --------------------------------------------------------------------------
# the tests

def test_claude_version(ctx):
    """`claude --version` runs under the shipped profile alone, from the
    native installer's layout in HOME (~/.local/bin -> ~/.local/share/claude)."""
    path = install_native(ctx)
    r = ctx.sandbox(["claude", "--version"], profile="claude-code",
                    env={"PATH": path, "ANTHROPIC_API_KEY": new_key()}, timeout=RUN_TIMEOUT)
    assert r.returncode == 0 and r.stdout.strip() == "%s (Claude Code)" % VERSION, \
        "claude --version inside agentbox run -p claude-code\n" + describe(r)


def test_claude_yolo_end_to_end(ctx):
    """claude -p in YOLO mode: the scripted model has it create a file in the
    workspace, try the real home's SSH key and a denied host, fingerprint
    its API key; then it answers.  The file exists, the mock got the real key
    on every request and never a placeholder, the tools saw only the
    placeholder, the canary stayed unread, the denied host saw nothing and
    the audit log says why, Claude Code printed the answer and exited 0."""
    mark = "agentbox-e2e-" + secrets.token_hex(6)
    final = "FINAL-ANSWER-" + secrets.token_hex(6)
    created = "agent-was-here.txt"
    canary = os.path.join(ctx.home, ".ssh", "id_ed25519")
    cmd1 = "printf '%%s\\n' %s > %s && ls -l %s" % (mark, created, created)
    cmd2 = ('cat %s; echo "cat_rc=$?"; '
            'curl -sS --max-time 10 https://%s/ 2>&1; echo "curl_rc=$?"; '
            'printf "key_len=%%s key_prefix=%%s key_sha256=%%s\\n" "${#ANTHROPIC_API_KEY}" '
            '"${ANTHROPIC_API_KEY:0:13}" '
            '"$(printf %%s "$ANTHROPIC_API_KEY" | sha256sum | cut -d" " -f1)"') % (
                canary, DENIED)
    script = Script([
        [text_block("I'll create the file first."),
         tool_use_block("Bash", {"command": cmd1, "description": "Create a file in the workspace"})],
        [text_block("Now the SSH key, the other host and the API key."),
         tool_use_block("Bash", {"command": cmd2,
                                 "description": "Read the SSH key, fetch a host, check the key"})],
        [text_block("Done. " + final)],
    ])
    lab = Lab(ctx, script)
    r = lab.run(["claude", "-p", "Create %s in the workspace, then report." % created,
                 "--dangerously-skip-permissions"])
    why = lab.why(r)
    assert r.returncode == 0, "claude exited %s\n%s" % (r.returncode, why)
    assert final in r.stdout, "claude did not print the final answer\n" + why

    # the workspace file
    p = os.path.join(ctx.ws, created)
    assert os.path.isfile(p), "%s was not created in the workspace\n%s" % (created, why)
    with open(p) as f:
        assert f.read() == mark + "\n", "%s holds something else" % created

    # the conversation the mock saw
    loop = lab.mock.messages()
    assert len(loop) >= 3, "expected 3 turns of the agent loop, got %d\n%s" % (len(loop), why)
    results = tool_results(loop[-1]["json"])
    assert len(results) == 2, "expected 2 tool results in the last request, got %r\n%s" % (
        results, why)
    r1, r2 = results[0][1], results[1][1]
    assert created in r1 and not results[0][2], "first tool result: %r" % r1
    assert ctx.token not in lab.mock.everything(), \
        "the canary (SSH key / subscription tokens of the real home) reached the API\n" + why
    assert "No such file or directory" in r2 and "cat_rc=1" in r2, \
        "reading the real home's SSH key did not fail as absent: %r" % r2
    m = re.search(r"curl_rc=(\d+)", r2)
    assert m and m.group(1) != "0", "curl to the denied host did not fail: %r" % r2
    m = re.search(r"key_len=(\d+) key_prefix=(\S*) key_sha256=([0-9a-f]{64})", r2)
    assert m, "no key fingerprint in the tool result: %r" % r2
    assert m.group(2) == KEY_PREFIX and int(m.group(1)) == len(lab.key), \
        "the key inside has prefix %r and length %s (real: %d)" % (
            m.group(2), m.group(1), len(lab.key))
    assert m.group(3) != hashlib.sha256(lab.key.encode()).hexdigest(), \
        "the tools inside saw the real API key"
    lab.check_mock_saw_only_the_key(r)
    lab.check_nothing_else_reached(r)

    # the audit log
    entries = lab.audit()
    refused = _requests_in(entries, host=DENIED)
    assert refused and all(e.get("decision") == "deny" for e in refused) and \
        any(e.get("rule") == DENIED for e in refused), \
        "the audit log does not record the denial of %s by its rule:\n%s" % (
            DENIED, json.dumps(refused))
    api = _requests_in(entries, host=MOCK_HOST)
    assert api and all(e.get("intercepted") is True and e.get("secrets") == "ANTHROPIC_API_KEY"
                       and e.get("status") == 200 for e in api), \
        "API requests in the audit log:\n%s" % json.dumps(api)
    allowed = {e.get("host") for e in entries if e.get("event") == "request" and
               e.get("decision") == "allow"}
    assert allowed == {MOCK_HOST}, "hosts reached besides the API: %s\n%s" % (allowed, why)

    # Claude Code's own state lives on in the real ~/.claude and ~/.claude.json
    transcripts = glob.glob(os.path.join(ctx.home, ".claude", "projects", "*", "*.jsonl"))
    assert any(mark in open(t, errors="replace").read() for t in transcripts), \
        "no transcript of the session in ~/.claude/projects: %s" % transcripts
    with open(os.path.join(ctx.home, ".claude.json")) as f:
        state = json.load(f)
    assert state.get("hasCompletedOnboarding") is True and ctx.ws in state.get("projects", {}), \
        "~/.claude.json lost the user's state: %s" % sorted(state)
    assert state.get("userID") and state.get("firstStartTime"), \
        "~/.claude.json was not updated by the run: %s" % sorted(state)
    lab.check_user_files_kept()
    lab.check_key_nowhere([r])


ENV_SH = r'''
printf 'KEYSHA=%s\n' "$(printf %s "$ANTHROPIC_API_KEY" | sha256sum | cut -d' ' -f1)"
env
'''


def test_claude_environment(ctx):
    """The environment inside: ANTHROPIC_API_KEY is a placeholder of the
    real key's shape, the real key is nowhere, the profile's switches for
    telemetry and updates are set, the caller's other variables are not."""
    lab = Lab(ctx, Script([[text_block("unused")]]))
    r = ctx.run(lab.args(["sh", "-c", ENV_SH], log=False),
                env=lab.env(ANTHROPIC_MODEL="claude-test-model", CLAUDE_CODE_OAUTH_TOKEN="x" +
                            ctx.env_token), timeout=RUN_TIMEOUT)
    assert r.returncode == 0, describe(r)
    env = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    ph = env.get("ANTHROPIC_API_KEY", "")
    assert ph.startswith(KEY_PREFIX) and len(ph) == len(lab.key) and ph != lab.key, \
        "ANTHROPIC_API_KEY inside is %r" % ph.replace(lab.key, "<REAL KEY>")
    assert env.get("KEYSHA") != hashlib.sha256(lab.key.encode()).hexdigest()
    lab.check_key_nowhere([r])
    for k in ("DISABLE_AUTOUPDATER", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
              "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"):
        assert env.get(k) == "1", "%s inside: %r" % (k, env.get(k))
    assert env.get("ANTHROPIC_MODEL") == "claude-test-model", "env.pass lost ANTHROPIC_MODEL"
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in env, "CLAUDE_CODE_OAUTH_TOKEN crossed into the sandbox"


def test_claude_placeholder_in_conversation_is_masked(ctx):
    """An agent that prints its environment puts the placeholder into the
    conversation, and every later API request carries it in its body.  The
    shipped profile's secret has "mask_in_body": true: the proxy replaces it
    there by a mask of the same length ("agentbox-masked***...") instead of
    refusing the request, so the conversation goes on: the mock receives the
    masked tool result (never the placeholder, never the key in a body), the
    final answer is printed, the audit log names the secret under "masked"
    and records no exfiltration.  (See docs/harnesses.md, "Known costs".)"""
    assert shipped_secret().get("mask_in_body") is True, \
        "profiles/claude-code.json: secrets.ANTHROPIC_API_KEY.mask_in_body is not true"
    final = "FINAL-ANSWER-" + secrets.token_hex(6)
    script = Script([
        [tool_use_block("Bash", {"command": "env | grep ANTHROPIC_API_KEY",
                                 "description": "Show the API key variable"})],
        [text_block("Done. " + final)],
    ])
    lab = Lab(ctx, script)
    r = lab.run(["claude", "-p", "show me the environment", "--dangerously-skip-permissions"])
    why = lab.why(r)
    assert r.returncode == 0, "claude exited %s: its request was not let through\n%s" % (
        r.returncode, why)
    assert "agentbox blocked this request" not in r.stdout + r.stderr, \
        "agentbox refused a request\n" + why
    assert final in r.stdout, "claude did not print the final answer\n" + why
    # the tool result, as the API received it: the variable with the mask
    mask = "agentbox-masked" + "*" * (len(lab.key) - len("agentbox-masked"))
    loop = lab.mock.messages()
    assert len(loop) >= 2, "expected 2 turns of the agent loop, got %d\n%s" % (len(loop), why)
    results = tool_results(loop[-1]["json"])
    assert results and "ANTHROPIC_API_KEY=" + mask in results[0][1], \
        "the tool result that reached the API is %r, expected the variable with the mask " \
        "%r\n%s" % ([t for _, t, _ in results], mask, why)
    assert len(results[0][1].split("ANTHROPIC_API_KEY=", 1)[1].split("\n")[0]) == len(lab.key)
    # never the placeholder (no other sk-ant-api03- string) nor the key in a body
    lab.check_mock_saw_only_the_key(r)
    lab.check_nothing_else_reached(r)
    api = _requests_in(lab.audit(), host=MOCK_HOST)
    assert api and all(e.get("decision") == "allow" and e.get("status") == 200 and
                       e.get("rule") != "exfiltration" for e in api), \
        "API requests in the audit log:\n%s" % json.dumps(api)
    masked = [e for e in api if e.get("masked") == "ANTHROPIC_API_KEY"]
    assert masked and any(e.get("path", "").startswith("/v1/messages") for e in masked), \
        "no API request in the audit log says \"masked\": \"ANTHROPIC_API_KEY\":\n%s" % (
            json.dumps(api))
    lab.check_key_nowhere([r])


def test_claude_other_secrets_placeholder_in_conversation(ctx):
    """Two brokered secrets: the API key and GH_TOKEN, bound to another host.
    The agent prints $GH_TOKEN; from then on every API request carries
    GH_TOKEN's placeholder in its body, to a host GH_TOKEN is not bound to.
    The placeholder is worthless there, so by default the proxy sends it on
    unchanged (it never swaps it: the API sees the placeholder, never the
    value) and records it: one placeholder-elsewhere event for the pair
    however many requests carry it, the secret's name on each request line.
    The session goes on to its final answer and exits 0.  (Before, each of
    those requests got a 403 and Claude Code stopped: "Failed to
    authenticate".)"""
    final = "FINAL-ANSWER-" + secrets.token_hex(6)
    script = Script([
        [tool_use_block("Bash", {"command": 'echo "GH_TOKEN=$GH_TOKEN"',
                                 "description": "Show the GitHub token variable"})],
        [tool_use_block("Bash", {"command": "echo second-step",
                                 "description": "Run one more command"})],
        [text_block("Done. " + final)],
    ])
    lab = Lab(ctx, script, gh_token=True)
    r = lab.run(["claude", "-p", "show me $GH_TOKEN", "--dangerously-skip-permissions"])
    why = lab.why(r)
    assert r.returncode == 0, "claude exited %s: a request was not let through\n%s" % (
        r.returncode, why)
    assert "agentbox blocked this request" not in r.stdout + r.stderr, \
        "agentbox refused a request\n" + why
    assert final in r.stdout, "claude did not print the final answer\n" + why
    # the tool result, as the API received it: GH_TOKEN's placeholder, unchanged
    loop = lab.mock.messages()
    assert len(loop) >= 3, "expected 3 turns of the agent loop, got %d\n%s" % (len(loop), why)
    results = tool_results(loop[-1]["json"])
    m = re.search(r"GH_TOKEN=(\S+)", results[0][1]) if results else None
    assert m, "no GH_TOKEN in the first tool result that reached the API: %r\n%s" % (
        [t for _, t, _ in results], why)
    ph = m.group(1)
    assert ph.startswith("ghp_") and len(ph) == len(lab.gh_value) and ph != lab.gh_value, \
        "GH_TOKEN reached the API as %r (expected its placeholder)" % ph.replace(
            lab.gh_value, "<REAL GH_TOKEN>")
    with_ph = [rec for rec in loop if ph.encode() in rec["body"]]
    assert len(with_ph) >= 2, "expected at least 2 API requests carrying the placeholder, " \
        "got %d\n%s" % (len(with_ph), why)
    assert lab.gh_value not in lab.mock.everything(), "GH_TOKEN's value reached the API"
    assert lab.gh.count() == 0, "%s got %d connection(s)" % (GH_HOST, lab.gh.count())
    lab.check_mock_saw_only_the_key(r)
    lab.check_nothing_else_reached(r)
    # the audit log: the requests went through, GH_TOKEN named on them, one event
    entries = lab.audit()
    api = _requests_in(entries, host=MOCK_HOST)
    assert api and all(e.get("decision") == "allow" and e.get("status") == 200 and
                       e.get("rule") != "exfiltration" for e in api), \
        "API requests in the audit log:\n%s" % json.dumps(api)
    named = [e for e in api if e.get("elsewhere") == "GH_TOKEN"]
    assert len(named) >= 2, "the API requests that carried GH_TOKEN's placeholder do not " \
        "say \"elsewhere\": \"GH_TOKEN\":\n%s" % json.dumps(api)
    ev = [e for e in entries if e.get("event") == "placeholder-elsewhere"]
    assert len(ev) == 1 and ev[0].get("secret") == "GH_TOKEN" and \
        ev[0].get("host") == MOCK_HOST and ev[0].get("port") == 443 and \
        ev[0].get("where") == "body", \
        "expected one placeholder-elsewhere event for GH_TOKEN at %s:443 in the body, " \
        "got:\n%s" % (MOCK_HOST, json.dumps(ev))
    with open(lab.log) as f:
        log = f.read()
    assert lab.gh_value not in log and ph not in log, \
        "the audit log holds GH_TOKEN's value or placeholder"
    assert lab.gh_value not in r.stdout + r.stderr, "GH_TOKEN's value in agentbox's output"
    lab.check_key_nowhere([r])


def _norm(attrs):
    cc = [c if isinstance(c, int) else ord(c) for c in attrs[6]]
    return attrs[:6] + [cc]


_CSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def screen_text(data):
    """What a terminal would show, roughly: escape sequences (cursor moves
    between words, colours) become one space, runs of blanks collapse."""
    t = _CSI.sub(b" ", data).decode("utf-8", "replace")
    return re.sub(r"[ \t\r]+", " ", t)


def screen_expect(p, pattern, timeout=20, start=0):
    """Wait until `pattern` (a str regex) matches the screen text of the
    output from byte offset `start`; returns the match."""
    rx = re.compile(pattern, re.S)
    deadline = time.monotonic() + timeout
    while True:
        m = rx.search(screen_text(p.buf[start:]))
        if m:
            return m
        if time.monotonic() > deadline or (p.proc.poll() is not None and
                                           not p._read_some(0.1)):
            raise AssertionError("%r not on the screen within %ss (agentbox %s)\nscreen: %r" % (
                pattern, timeout, "exited %s" % p.proc.returncode
                if p.proc.poll() is not None else "still running",
                screen_text(p.buf[start:])[-2500:]))
        p._read_some(0.2)


def _rule_of(width):
    """A horizontal rule exactly `width` cells wide (the prompt box's)."""
    return re.compile(b"(?<!" + HRULE + b")(?:" + HRULE + b"){%d}(?!" % width + HRULE + b")")


def test_claude_tui(ctx):
    """The interactive TUI in agentbox's pty: the first screen (the question
    about the key in the environment, which shows the placeholder's tail,
    not the key's), the main screen at the terminal's width, a prompt
    answered through the proxy, a resize redrawn at the new width, Ctrl-C
    twice exits 0, and the outer terminal's settings are restored; a second start
    does not ask about the key again (the placeholder is stable)."""
    pong = "PONG-" + secrets.token_hex(6)
    lab = Lab(ctx, Script([[text_block(pong)]]))
    p = PtyRun(ctx, lab.args(["claude"]), rows=33, cols=101,
               env=lab.env(TERM="xterm-256color"))
    m = screen_expect(p, r"Detected a custom API key in your environment.*?"
                         r"sk-ant-\.\.\.([A-Za-z0-9_-]{20})", timeout=30)
    assert m.group(1) != lab.key[-20:], "the TUI shows the tail of the real key"
    screen_expect(p, r"Do you want to use this API key\?")
    p.write(b"\x1b[A")       # up: "Yes"
    time.sleep(0.3)
    n = len(p.buf)
    p.write(b"\r")
    screen_expect(p, r"Claude Code v" + re.escape(VERSION), timeout=30, start=n)
    deadline = time.monotonic() + 20
    while not _rule_of(101).search(p.buf, n):
        assert time.monotonic() < deadline, "no prompt box 101 columns wide: %r" % (
            screen_text(p.buf[n:])[-1500:],)
        p._read_some(0.2)
    time.sleep(0.5)
    n = len(p.buf)
    p.resize(40, 90)
    deadline = time.monotonic() + 20
    while not _rule_of(90).search(p.buf, n):
        assert time.monotonic() < deadline, "no redraw at 90 columns after the resize: %r" % (
            screen_text(p.buf[n:])[-1500:],)
        p._read_some(0.2)
    time.sleep(0.5)
    p.write(b"say hi")
    time.sleep(0.5)
    n = len(p.buf)
    p.write(b"\r")
    screen_expect(p, re.escape(pong), timeout=30, start=n)
    time.sleep(0.5)
    n = len(p.buf)
    p.write(b"\x03")
    screen_expect(p, r"Press Ctrl-C again to exit", timeout=10, start=n)
    p.write(b"\x03")
    rc = p.wait(30)
    assert rc == 0, "claude exited %s after Ctrl-C twice\nscreen: %r" % (
        rc, screen_text(p.buf)[-1500:])
    after = termios.tcgetattr(p.slave)
    assert _norm(after) == _norm(p.termios_before), \
        "outer termios not restored:\nbefore %s\nafter  %s" % (p.termios_before, after)
    assert lab.mock.messages(), "the prompt never reached the API\n" + lab.why()
    lab.check_mock_saw_only_the_key()
    lab.check_nothing_else_reached()
    lab.check_user_files_kept()
    assert lab.key.encode() not in p.buf, "the real key reached the terminal"
    # the placeholder is stable (placeholder.stable): the next start does not ask again
    q = PtyRun(ctx, lab.args(["claude"]), rows=33, cols=101,
               env=lab.env(TERM="xterm-256color"))
    screen_expect(q, r"Claude Code v" + re.escape(VERSION), timeout=30)
    time.sleep(1.0)
    q._read_some(0.5)
    assert "Detected a custom API key" not in screen_text(q.buf), \
        "the second start asked about the key again: %r" % screen_text(q.buf)[-1500:]
    q.write(b"\x03")
    screen_expect(q, r"Press Ctrl-C again to exit", timeout=10)
    q.write(b"\x03")
    assert q.wait(30) == 0, "claude's second start: %r" % screen_text(q.buf)[-1500:]
