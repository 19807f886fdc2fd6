# SPDX-License-Identifier: MIT
"""What users compose, run for real: every shipped profile with a user's
extension holding four secrets at once (env, file, command and a rendered
JSON file), in both orders (`-p SHIPPED -p mine.json` and the reverse),
on a harness's first run (its config directory without its files) and
after a subscription login (its credential file present, rendered inside).
Each run must start, see a placeholder for every secret and never a real
value.  An env secret after a rendered one once crashed the planner
(SIGSEGV); tests/unit/test_compose.c drives the same merges through the
planner alone, every subset of them.
"""

import json
import os

import abtest
from test_codex_login import tokens

REAL_GH = "ghp_" + "R" * 36
REAL_FILE = "file-real-" + "F" * 24
REAL_CMD = "cmd-real-" + "C" * 24
REAL_APP = "app-real-" + "A" * 24
REAL_CLAUDE_AT = "sk-ant-oat01-" + "Q" * 40

HARNESS_KEYS = {"OPENAI_API_KEY": "sk-proj-" + "O" * 40,
                "GEMINI_API_KEY": "AIzaSy" + "G" * 33}


def shipped():
    d = os.path.join(abtest.SRCDIR, "profiles")
    return sorted(f[:-5] for f in os.listdir(d)
                  if f.endswith(".json") and f != "schema.json")


def user_extension(ctx):
    hosts = ["env.example", "file.example", "cmd.example", "render.example"]
    ext = {"version": 1, "network": {"allow": hosts}, "secrets": {
        "GH_TOKEN": {"from": {"env": "GH_TOKEN"}, "hosts": ["env.example"],
                     "in": ["header:authorization"]},
        "FILE_TOKEN": {"from": {"file": "~/.config/tok/token"}, "hosts": ["file.example"]},
        "CMD_TOKEN": {"from": {"command": ["/bin/echo", REAL_CMD]}, "hosts": ["cmd.example"],
                      "in": ["body"]},
        "APP_TOKEN": {"from": {"json": "~/.myapp/creds.json", "pointer": "/auth/token"},
                      "render": {"keep": ["/auth"]}, "env": False, "hosts": ["render.example"]},
    }}
    ctx.host_file(os.path.join(ctx.home, ".config/tok/token"), REAL_FILE + "\n", 0o600)
    os.makedirs(os.path.join(ctx.home, ".myapp"), exist_ok=True)
    ctx.host_file(os.path.join(ctx.home, ".myapp/creds.json"),
                  json.dumps({"auth": {"token": REAL_APP, "user": "u"}}), 0o600)
    path = os.path.join(ctx.scratch, "mine.json")
    ctx.host_file(path, json.dumps(ext))
    if ctx.uid != 0:
        abtest.chown_tree(ctx.home, ctx.uid, ctx.gid)
    return path


def logged_in(ctx):
    """The harnesses' subscription logins, as their own login writes them."""
    files = {
        ".claude/.credentials.json": {"claudeAiOauth": {
            "accessToken": REAL_CLAUDE_AT, "refreshToken": "sk-ant-ort01-" + "R" * 40,
            "expiresAt": 4102444800000}},
        ".codex/auth.json": {"auth_mode": "chatgpt", "OPENAI_API_KEY": None,
                             "tokens": tokens(4102444800, "u@example.test")},
    }
    for rel, doc in files.items():
        p = os.path.join(ctx.home, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        ctx.host_file(p, json.dumps(doc), 0o600)
    if ctx.uid != 0:
        abtest.chown_tree(ctx.home, ctx.uid, ctx.gid)


INSIDE = ("printf 'GH=%s\\nFILE=%s\\nCMD=%s\\n' \"$GH_TOKEN\" \"$FILE_TOKEN\" \"$CMD_TOKEN\"; "
          "printf 'APP=%s\\n' \"$(cat ~/.myapp/creds.json)\"")


def compose_runs(ctx, state):
    mine = user_extension(ctx)
    env = dict(HARNESS_KEYS, GH_TOKEN=REAL_GH)
    reals = (REAL_GH, REAL_FILE, REAL_CMD, REAL_APP, REAL_CLAUDE_AT) + \
        tuple(HARNESS_KEYS.values())
    failures = []
    for name in shipped():
        # an extension (+github) is added to a base profile, as users do
        stack = ["default", name, mine] if name.startswith("+") else [name, mine]
        for order in (stack, stack[::-1]):
            args = ["run", "-q"]
            for p in order:
                args += ["-p", p]
            r = ctx.run(args + ["-w", ctx.ws, "--", "sh", "-c", INSIDE], env=env)
            where = "%s, %s" % (state, " ".join("-p " + os.path.basename(p) for p in order))
            if r.returncode != 0:
                failures.append("%s: exit %d\n%s" % (where, r.returncode, abtest.describe(r)))
                continue
            got = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            for k in ("GH", "FILE", "CMD"):
                if not got.get(k):
                    failures.append("%s: $%s_TOKEN has no placeholder" % (where, k))
            app = json.loads(got.get("APP") or "{}").get("auth", {})
            if not app.get("token") or app.get("user") != "u":
                failures.append("%s: the rendered file is not there: %r" % (where, got.get("APP")))
            for v in reals:
                if v in r.stdout or v in r.stderr:
                    failures.append("%s: a real value reached the sandbox or the output" % where)
    assert not failures, "\n".join(failures)


def test_shipped_with_user_secrets_first_run(ctx):
    compose_runs(ctx, "first run")


def test_shipped_with_user_secrets_logged_in(ctx):
    logged_in(ctx)
    compose_runs(ctx, "logged in")
