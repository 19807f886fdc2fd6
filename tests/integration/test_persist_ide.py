# SPDX-License-Identifier: MIT
"""Project files that IDEs, editors and coding agents execute merely because
the folder is opened or the agent is started in it again (docs/protected-paths.md,
the table of the default list).

Each test plants, from inside `agentbox run -p default`, every such file at
once: it creates the file where it is absent, or rewrites the one the user
has (in place, and by renaming a new file over it).  Each file names a
payload that touches a marker of its own in ctx.scratch.  Then a stand-in on
the HOST reads the project the way the real program does (devcontainer.json's
initializeCommand, the MCP servers of .cursor/mcp.json, .gemini/settings.json,
.codex/config.toml, .opencode/opencode.json..., the hooks of .cursor,
.windsurf, .github/hooks, .clinerules/hooks, the folderOpen tasks of
.vscode/tasks.json, ...) and starts what it finds.  No marker may appear.

The ablated twin runs the same attack under a full profile written by the
test: the shipped default without the entries this list added.  There every
stand-in must run its payload, so each case can fail.

The harness test starts each shipped harness profile's real program with
these entries absent (placeholders in the workspace) and present.
"""

import json
import os
import subprocess

import abtest
from abtest import HOST_PATH, INNER_PY, chown_tree, describe, tree_listing


# The entries of profiles/default.json this test covers (the ablated profile
# is the shipped default without them).
NEW_ENTRIES = [".claude/hooks/"] + ["${WORKSPACE}/%s/" % n for n in (
    ".devcontainer", ".devcontainer.json", ".cursor", ".zed", ".windsurf", ".continue",
    ".gemini", ".codex", ".opencode", ".kiro", ".amazonq", ".roo", ".clinerules",
    ".github/hooks")] + [
    "?opencode.json", "?opencode.jsonc", "?.aider.conf.yml", "?mise.toml", "?.mise.toml",
    "?mise.local.toml", "?.mise.local.toml", "?.mise/", "?.config/mise/", "?.config/mise.toml"]
# The ablated profile also drops .vscode/ (on the list before), so that its
# folderOpen task shows the stand-in at work too.
ABLATED = NEW_ENTRIES + [".vscode/"]

# The host-side stand-in: reads the project in the working directory the way
# each program does and starts what it names.  A file it cannot read or parse
# (absent, a placeholder directory) is skipped, as the programs skip it.
STANDIN = r'''
import glob, json, os, subprocess, tomllib

def sh(cmd, cwd="."):
    subprocess.run(["sh", "-c", cmd], cwd=cwd, timeout=10, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def spawn(argv):
    try:
        subprocess.run([str(a) for a in argv], timeout=10, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        pass

def js(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}

def toml(p):
    try:
        with open(p, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}

def mcp_servers(d, key="mcpServers"):
    for s in (d.get(key) or {}).values():
        if isinstance(s, dict) and isinstance(s.get("command"), str):
            spawn([s["command"]] + list(s.get("args") or []))

def hook_list(d, key="command", cwd="."):
    for ev in (d.get("hooks") or {}).values():
        for h in ev or []:
            if isinstance(h, dict) and isinstance(h.get(key), str):
                sh(h[key], cwd)

# Dev Containers (VS Code, Cursor, JetBrains, devcontainer CLI): initializeCommand
# runs on the host before the container is built.
for p in [".devcontainer/devcontainer.json", ".devcontainer.json"] + \
        glob.glob(".devcontainer/*/devcontainer.json"):
    c = js(p).get("initializeCommand")
    if isinstance(c, str):
        sh(c)
    elif isinstance(c, list):
        spawn(c)
# VS Code and its forks: tasks with runOptions.runOn = folderOpen.
for t in js(".vscode/tasks.json").get("tasks") or []:
    if (t.get("runOptions") or {}).get("runOn") == "folderOpen":
        sh(" ".join([t.get("command", "")] + list(t.get("args") or [])))
# Cursor: project MCP servers and agent hooks (commands relative to .cursor/).
mcp_servers(js(".cursor/mcp.json"))
hook_list(js(".cursor/hooks.json"), cwd=".cursor" if os.path.isdir(".cursor") else ".")
# Zed: context servers and language server binaries of .zed/settings.json.
z = js(".zed/settings.json")
for s in (z.get("context_servers") or {}).values():
    c = s.get("command")
    if isinstance(c, dict):
        spawn([c.get("path")] + list(c.get("args") or []))
    elif isinstance(c, str):
        spawn([c] + list(s.get("args") or []))
for s in (z.get("lsp") or {}).values():
    b = s.get("binary") or {}
    if b.get("path"):
        spawn([b["path"]] + list(b.get("arguments") or []))
# Windsurf (Cascade hooks), Gemini CLI, Amazon Q, Roo Code, Kiro: JSON files.
hook_list(js(".windsurf/hooks.json"))
mcp_servers(js(".gemini/settings.json"))
mcp_servers(js(".amazonq/mcp.json"))
mcp_servers(js(".roo/mcp.json"))
mcp_servers(js(".kiro/settings/mcp.json"))
for p in glob.glob(".kiro/hooks/*.kiro.hook"):
    then = js(p).get("then") or {}
    if then.get("type") == "runCommand":
        sh(then.get("command", ""))
# Continue: every MCP server block file in .continue/mcpServers/.
for p in glob.glob(".continue/mcpServers/*.json"):
    mcp_servers(js(p))
# Codex: [mcp_servers.NAME] of the project's .codex/config.toml (trusted project).
for s in (toml(".codex/config.toml").get("mcp_servers") or {}).values():
    spawn([s.get("command")] + list(s.get("args") or []))
# opencode: local MCP servers of the project's configuration files.
for p in ("opencode.json", "opencode.jsonc", ".opencode/opencode.json",
          ".opencode/opencode.jsonc"):
    for s in (js(p).get("mcp") or {}).values():
        if s.get("type") == "local":
            spawn(s.get("command") or [])
# Cline: executable hook scripts named after the event, run at TaskStart.
for p in glob.glob(".clinerules/hooks/*"):
    if os.access(p, os.X_OK):
        spawn([os.path.abspath(p)])
# GitHub Copilot CLI: .github/hooks/*.json, command hooks in "bash".
for p in glob.glob(".github/hooks/*.json"):
    hook_list(js(p), "bash")
# Claude Code: the hooks of .claude/settings.json (they name .claude/hooks/ scripts).
for ev in (js(".claude/settings.json").get("hooks") or {}).values():
    for m in ev:
        for h in m.get("hooks") or []:
            sh(h.get("command", ""))
# aider: lint-cmd of .aider.conf.yml (run after each edit), one "key: value" a line.
try:
    for line in open(".aider.conf.yml"):
        k, _, v = line.partition(":")
        if k.strip() in ("lint-cmd", "test-cmd") and v.strip():
            sh(v.strip())
except OSError:
    pass
# mise (trusted config): [hooks] enter runs on cd.
for p in ("mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml",
          ".mise/config.toml", ".config/mise/config.toml", ".config/mise.toml"):
    e = (toml(p).get("hooks") or {}).get("enter")
    if isinstance(e, str):
        sh(e)
'''

# Inside: move the top directory away, then create or rewrite each file: in
# place, else a new file renamed over it.
PLANT = r'''
import json, os, sys
res, moved = {}, set()
for path, (data, mode) in json.loads(sys.argv[1]).items():
    top = path.split("/")[0]
    if top not in moved and os.path.lexists(top):  # the user's, or the placeholder
        try:
            os.rename(top, top + ".away")
        except OSError:
            pass
    moved.add(top)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    except OSError:
        pass
    try:
        with open(path, "w") as f:
            f.write(data)
        os.chmod(path, mode)
        res[path] = "written"
        continue
    except OSError as e:
        res[path] = e.strerror
    try:
        tmp = path + ".new"
        with open(tmp, "w") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        res[path] = "replaced"
    except OSError as e:
        res[path] += " / " + e.strerror
        try:
            os.unlink(tmp)
        except OSError:
            pass
print(json.dumps(res))
'''


def _mcp(cmd):
    return {"mcpServers": {"x": {"command": "sh", "args": ["-c", cmd]}}}


def _files(cmd_of):
    """case -> {path: (content, mode)}; cmd_of(case) is the command each file
    names (the payload inside the attack, `true` for the user's own copy)."""
    def j(d):
        return json.dumps(d, indent=1) + "\n"
    c = cmd_of
    return {
        "devcontainer": {".devcontainer/devcontainer.json":
                         (j({"image": "debian", "initializeCommand": c("devcontainer")}), 0o644)},
        "devcontainer-top": {".devcontainer.json":
                             (j({"image": "debian",
                                 "initializeCommand": c("devcontainer-top")}), 0o644)},
        "vscode-task": {".vscode/tasks.json": (j({"version": "2.0.0", "tasks": [
            {"label": "x", "type": "shell", "command": c("vscode-task"),
             "runOptions": {"runOn": "folderOpen"}}]}), 0o644)},
        "cursor-mcp": {".cursor/mcp.json": (j(_mcp(c("cursor-mcp"))), 0o644)},
        "cursor-hook": {".cursor/hooks.json": (j({"version": 1, "hooks": {
            "sessionStart": [{"command": c("cursor-hook")}]}}), 0o644)},
        "zed": {".zed/settings.json": (j({"context_servers": {"x": {
            "command": "sh", "args": ["-c", c("zed")]}}}), 0o644)},
        "windsurf": {".windsurf/hooks.json": (j({"hooks": {
            "pre_user_prompt": [{"command": c("windsurf")}]}}), 0o644)},
        "continue": {".continue/mcpServers/x.json": (j(_mcp(c("continue"))), 0o644)},
        "gemini": {".gemini/settings.json": (j(_mcp(c("gemini"))), 0o644)},
        "codex": {".codex/config.toml":
                  ('[mcp_servers.x]\ncommand = "sh"\nargs = ["-c", %s]\n'
                   % json.dumps(c("codex")), 0o644)},
        "opencode-dir": {".opencode/opencode.json": (j({"mcp": {"x": {
            "type": "local", "command": ["sh", "-c", c("opencode-dir")]}}}), 0o644)},
        "kiro-mcp": {".kiro/settings/mcp.json": (j(_mcp(c("kiro-mcp"))), 0o644)},
        "kiro-hook": {".kiro/hooks/x.kiro.hook": (j({"enabled": True, "name": "x",
            "when": {"type": "fileEdited", "patterns": ["*"]},
            "then": {"type": "runCommand", "command": c("kiro-hook")}}), 0o644)},
        "amazonq": {".amazonq/mcp.json": (j(_mcp(c("amazonq"))), 0o644)},
        "roo": {".roo/mcp.json": (j(_mcp(c("roo"))), 0o644)},
        "cline": {".clinerules/hooks/TaskStart": ("#!/bin/sh\n%s\n" % c("cline"), 0o755)},
        "copilot": {".github/hooks/x.json": (j({"version": 1, "hooks": {"sessionStart": [
            {"type": "command", "bash": c("copilot")}]}}), 0o644)},
        "claude-hook": {".claude/hooks/start.sh": ("%s\n" % c("claude-hook"), 0o755)},
    }


# Protected only when present (`?`): the attack can only rewrite them.
def _files_present_only(cmd_of):
    c = cmd_of
    return {
        "opencode-json": {"opencode.json": (json.dumps({"mcp": {"x": {
            "type": "local", "command": ["sh", "-c", c("opencode-json")]}}}) + "\n", 0o644)},
        "aider": {".aider.conf.yml": ("lint-cmd: %s\n" % c("aider"), 0o644)},
        "mise": {"mise.toml": ("[hooks]\nenter = %s\n" % json.dumps(c("mise")), 0o644)},
    }


CLAUDE_SETTINGS = json.dumps({"hooks": {"SessionStart": [
    {"hooks": [{"type": "command", "command": "sh .claude/hooks/start.sh"}]}]}}) + "\n"


def _marker(ctx, case):
    return os.path.join(ctx.scratch, "pwned-" + case)


def _setup(ctx, present):
    """A repository; the user's .claude/settings.json names a hook script in
    .claude/hooks/ (protected itself); with present, the user's own copy of
    every file (naming `true`)."""
    ctx.git_host("init", "-q", ".")
    ctx.host_file(os.path.join(ctx.ws, "README"), "hello\n")
    os.makedirs(os.path.join(ctx.ws, ".claude"), exist_ok=True)
    ctx.host_file(os.path.join(ctx.ws, ".claude", "settings.json"), CLAUDE_SETTINGS)
    cases = dict(_files(lambda case: "true"))
    if present:
        cases.update(_files_present_only(lambda case: "true"))
        for files in cases.values():
            for path, (data, mode) in files.items():
                full = os.path.join(ctx.ws, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                ctx.host_file(full, data, mode)
    if ctx.uid != 0:
        chown_tree(ctx.ws, ctx.uid, ctx.gid)


def _attack(ctx, present, profile):
    cmd_of = lambda case: "touch %s" % _marker(ctx, case)  # noqa: E731
    cases = dict(_files(cmd_of))
    if present:
        cases.update(_files_present_only(cmd_of))
    plant = {}
    for files in cases.values():
        plant.update(files)
    r = ctx.sandbox([INNER_PY, "-c", PLANT, json.dumps(plant)], profile=profile)
    assert r.returncode == 0, "the planting script failed\n" + describe(r)
    return sorted(cases), r


def _standin(ctx):
    cmd = ["python3", "-c", STANDIN]
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
               "--clear-groups"] + cmd
    r = subprocess.run(cmd, cwd=ctx.ws, env={"PATH": HOST_PATH, "HOME": ctx.scratch},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, "the stand-in failed\n%s%s" % (r.stdout, r.stderr)


def _ran(ctx, cases):
    return [c for c in cases if os.path.exists(_marker(ctx, c))]


def _ablated_profile(ctx):
    """The shipped default as a full profile (no extends) without ABLATED."""
    with open(os.path.join(abtest.SRCDIR, "profiles", "default.json")) as f:
        prof = json.load(f)
    protect = prof["filesystem"]["protect"]
    missing = [e for e in ABLATED if e not in protect]
    assert not missing, "profiles/default.json lacks %s" % missing
    prof["filesystem"]["protect"] = [e for e in protect if e not in ABLATED]
    prof["description"] = "test: default without the IDE and agent entries"
    path = os.path.join(ctx.scratch, "ablated-ide.json")
    ctx.host_file(path, json.dumps(prof, indent=2) + "\n")
    return path


def _contents(ctx):
    """{path: bytes} of the workspace's files outside .git."""
    out = {}
    for rel in tree_listing(ctx.ws):
        full = os.path.join(ctx.ws, rel)
        if not rel.startswith(".git" + os.sep) and os.path.isfile(full) \
                and not os.path.islink(full):
            with open(full, "rb") as f:
                out[rel] = f.read()
    return out


def _protected(ctx, present):
    _setup(ctx, present)
    before, files = tree_listing(ctx.ws), _contents(ctx)
    cases, r = _attack(ctx, present, "default")
    _standin(ctx)
    ran = _ran(ctx, cases)
    assert not ran, "planted inside, run on the host by the stand-in: %s\n%s" % (
        ran, r.stdout)
    assert tree_listing(ctx.ws) == before, "the workspace changed: %s" % sorted(
        set(tree_listing(ctx.ws)) ^ set(before))
    changed = sorted(k for k, v in _contents(ctx).items() if files.get(k) != v)
    assert not changed, "files changed from inside: %s" % changed


def _ablated(ctx, present):
    _setup(ctx, present)
    cases, r = _attack(ctx, present, _ablated_profile(ctx))
    _standin(ctx)
    ran = _ran(ctx, cases)
    assert ran == cases, "without the entries, these payloads did not run: %s\n%s" % (
        sorted(set(cases) - set(ran)), r.stdout)


def test_ide_agent_files_absent_cannot_be_planted(ctx):
    """Every reserved IDE/agent file is absent; the sandbox creates each with
    a payload; the host stand-ins start nothing and no placeholder is left."""
    _protected(ctx, present=False)


def test_ide_agent_files_absent_ablated(ctx):
    """Twin: without the entries, each created file runs its payload on the host."""
    _ablated(ctx, present=False)


def test_ide_agent_files_present_cannot_be_modified(ctx):
    """Every IDE/agent file, `?` entries included, exists with the user's own
    command; the sandbox rewrites each (in place and by rename); the host
    stand-ins run only the user's commands."""
    _protected(ctx, present=True)


def test_ide_agent_files_present_ablated(ctx):
    """Twin: without the entries, each rewritten file runs its payload on the host."""
    _ablated(ctx, present=True)


def _absent_present_only(ctx, ablate):
    """The `?` files of the list that a harness on the host would run, absent:
    created inside with a payload (opencode and aider run inside too and
    cannot take a placeholder there), read by the stand-in on the host after
    the run, which moved them aside (src/sandbox/settle.c)."""
    _setup(ctx, present=False)
    cmd_of = lambda case: "touch %s" % _marker(ctx, case)  # noqa: E731
    cases = {k: v for k, v in _files_present_only(cmd_of).items() if k != "mise"}
    plant = {}
    for files in cases.values():
        plant.update(files)
    if ablate:
        import abtest
        binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
        cmd = [binary, "run", "-p", "default", "-w", ctx.ws, "--", INNER_PY, "-c", PLANT,
               json.dumps(plant)]
        if ctx.uid != os.getuid():
            cmd = ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
                   "--clear-groups"] + cmd
        env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home,
               "AGENTBOX_TEST_ABLATE": "settle"}
        r = subprocess.run(cmd, env=env, cwd=ctx.ws, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=90)
    else:
        r = ctx.sandbox([INNER_PY, "-c", PLANT, json.dumps(plant)])
    assert r.returncode == 0, describe(r)
    _standin(ctx)
    ran = _ran(ctx, sorted(cases))
    if ablate:
        assert sorted(ran) == sorted(cases), "the ablated twin ran only %s" % ran
        return
    assert not ran, "created inside, run on the host: %s\n%s" % (ran, r.stdout)
    for name in plant:
        assert os.path.exists(os.path.join(ctx.ws, name + ".agentbox-disarmed")), name
        assert "%s/%s, moved to %s.agentbox-disarmed" % (ctx.ws, name, name) in r.stderr, \
            describe(r)


def test_ide_agent_files_absent_opencode_json_aider(ctx):
    _absent_present_only(ctx, False)


def test_ide_agent_files_absent_opencode_json_aider_ablated(ctx):
    _absent_present_only(ctx, True)


# --------------------------------------------------------------------------
# the harnesses start with the entries absent (placeholders) and present

# Harmless copies of the project files, for the "present" run.
PRESENT = {
    ".devcontainer/devcontainer.json": '{"image": "debian"}\n',
    ".devcontainer.json": '{"image": "debian"}\n',
    ".cursor/mcp.json": '{"mcpServers": {}}\n',
    ".zed/settings.json": "{}\n",
    ".windsurf/hooks.json": '{"hooks": {}}\n',
    ".continue/config.yaml": "name: project\n",
    ".gemini/settings.json": "{}\n",
    ".codex/config.toml": "# project settings\n",
    ".opencode/opencode.json": '{"$schema": "https://opencode.ai/config.json"}\n',
    "opencode.json": '{"$schema": "https://opencode.ai/config.json"}\n',
    ".kiro/settings/mcp.json": '{"mcpServers": {}}\n',
    ".amazonq/mcp.json": '{"mcpServers": {}}\n',
    ".roo/mcp.json": '{"mcpServers": {}}\n',
    ".clinerules/rules.md": "Be brief.\n",
    ".github/hooks/hooks.json": '{"version": 1, "hooks": {}}\n',
    ".claude/hooks/start.sh": "true\n",
    ".aider.conf.yml": "auto-commits: false\n",
    "mise.toml": "[tools]\n",
}


def _harness_runs(ctx, run_one):
    """run_one() under each state of the workspace; both must succeed."""
    ctx.git_host("init", "-q", ".")
    before = tree_listing(ctx.ws)
    r = run_one()
    assert r.returncode == 0, "with the entries absent (placeholders)\n" + describe(r)
    assert tree_listing(ctx.ws) == before, "placeholders left: %s" % sorted(
        set(tree_listing(ctx.ws)) - set(before))
    for path, data in PRESENT.items():
        full = os.path.join(ctx.ws, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        ctx.host_file(full, data)
    if ctx.uid != 0:
        chown_tree(ctx.ws, ctx.uid, ctx.gid)
    r = run_one()
    assert r.returncode == 0, "with the entries present\n" + describe(r)


def test_ide_entries_claude_code_starts(ctx):
    """claude (native) `mcp list`, which reads the project's MCP and settings
    files, exits 0 in -p claude-code with the entries absent and present."""
    import test_harness_claude as hcl
    path = hcl.install_native(ctx)
    # A base URL on the sandbox's own loopback, refused at once: without it
    # claude resolves api.anthropic.com first and, offline, retries for ~18 s.
    _harness_runs(ctx, lambda: ctx.sandbox(
        ["claude", "mcp", "list"], profile="claude-code",
        extra_args=["--env", "ANTHROPIC_BASE_URL"],
        env={"PATH": path, "ANTHROPIC_API_KEY": hcl.new_key(),
             "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, timeout=hcl.RUN_TIMEOUT))


def test_ide_entries_codex_starts(ctx):
    """codex `mcp list` (loads its configuration layers) exits 0 in -p codex."""
    import test_harness_codex as hc
    prefix = hc.codex_prefix()
    hc.codex_home(ctx)
    ext = hc.ext_profile(ctx, prefix)
    _harness_runs(ctx, lambda: hc.run_codex(ctx, ext, ["codex", "mcp", "list"],
                                            hc.real_key(), timeout=hc.RUN_TIMEOUT))


def test_ide_entries_gemini_cli_starts(ctx):
    """gemini --version (it loads the user and workspace settings first)
    exits 0 in -p gemini-cli."""
    import test_harness_others as ho
    prefix = ho.npm_install(ho.GEMINI_PKG, ho.GEMINI_VER, ho.GEMINI_DIR)
    gemini = os.path.join(prefix, "node_modules", ".bin", "gemini")
    ext = ho.ext_profile(ctx, "gemini-test", prefix)
    ho.make_home_dirs(ctx, [".gemini"])
    ctx.host_file(os.path.join(ctx.home, ".gemini", "settings.json"), "{}\n")
    _harness_runs(ctx, lambda: ctx.sandbox(
        [gemini, "--version"], profile=None, extra_args=["-p", "gemini-cli", "-p", ext],
        env={"GEMINI_API_KEY": ho.gemini_key()}, timeout=80))


def test_ide_entries_opencode_starts(ctx):
    """opencode `debug config` (it loads every project configuration file:
    opencode.json, .opencode/) exits 0 in -p opencode."""
    import test_harness_others as ho
    prefix = ho.npm_install(ho.OPENCODE_PKG, ho.OPENCODE_VER, ho.OPENCODE_DIR)
    opencode = os.path.join(prefix, "node_modules", ".bin", "opencode")
    ext = ho.ext_profile(ctx, "opencode-test", prefix)
    ho.make_home_dirs(ctx, [".config/opencode", ".local/share/opencode", ".cache/opencode",
                            ".local/state/opencode"])
    _harness_runs(ctx, lambda: ctx.sandbox(
        [opencode, "debug", "config"], profile=None, extra_args=["-p", "opencode", "-p", ext],
        env={"ANTHROPIC_API_KEY": ho.anthropic_key()}, timeout=80))
