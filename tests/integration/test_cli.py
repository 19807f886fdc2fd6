# SPDX-License-Identifier: MIT
"""The public CLI contract: --version, --help, check, explain, doctor, usage errors."""

import json
import os

import subprocess

import abtest
from abtest import describe, users

INVALID_PROFILE = """{
  "version": 1,
    "no_such_key": true
}
"""


def test_version(ctx):
    r = ctx.run(["--version"])
    assert r.returncode == 0, describe(r)
    lines = r.stdout.splitlines()
    assert lines[0] == "agentbox 0.1.0", describe(r)
    # the libraries a security fix may be in, as linked in
    import re
    assert re.match(r"  OpenSSL \d+\.\d+\.\d+", lines[1]), describe(r)
    assert re.match(r"  libseccomp \d+\.\d+\.\d+$", lines[2]), describe(r)
    assert re.match(r"  jansson \d+\.\d+", lines[3]), describe(r)
    assert lines[4].startswith("  libbpf "), describe(r)


def test_help(ctx):
    r = ctx.run(["--help"])
    assert r.returncode == 0, describe(r)
    out = r.stdout
    assert "Usage" in out or "usage" in out, describe(r)
    for cmd in ("run", "check", "explain", "doctor"):
        assert cmd in out, "global help does not mention %r\n%s" % (cmd, describe(r))


def test_command_help(ctx):
    for cmd in ("run", "check", "explain", "doctor"):
        r = ctx.run([cmd, "--help"])
        assert r.returncode == 0, describe(r)
        assert "agentbox %s" % cmd in r.stdout and "sage" in r.stdout, \
            "%s --help does not show its usage\n%s" % (cmd, describe(r))


def test_unknown_command(ctx):
    r = ctx.run(["frobnicate"])
    assert r.returncode == 125, describe(r)
    assert "frobnicate" in r.stderr, "message should name the unknown command\n" + describe(r)


def test_unknown_option(ctx):
    r = ctx.run(["run", "--no-such-option", "--", "true"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.strip(), describe(r)


def test_no_command(ctx):
    r = ctx.run([])
    assert r.returncode == 125, describe(r)
    assert r.stderr.strip(), describe(r)


def test_check_shipped_profiles(ctx):
    r = ctx.run(["check", "profiles/default.json", "profiles/shell.json"],
                cwd=_srcdir())
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", describe(r)
    # by name too
    r = ctx.run(["check", "default", "shell"])
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", describe(r)


def test_check_invalid_names_line_col(ctx):
    bad = ctx.host_file(os.path.join(ctx.scratch, "bad.json"), INVALID_PROFILE)
    r = ctx.run(["check", bad])
    assert r.returncode == 125, describe(r)
    assert "%s:3:5:" % bad in r.stderr, "error must name FILE:3:5:\n" + describe(r)
    assert "no_such_key" in r.stderr, describe(r)


def test_check_syntax_error_line_col(ctx):
    bad = ctx.host_file(os.path.join(ctx.scratch, "syntax.json"), '{\n  "version": 1,,\n}\n')
    r = ctx.run(["check", bad])
    assert r.returncode == 125, describe(r)
    assert "%s:2:" % bad in r.stderr, "syntax error must name FILE:LINE:COL\n" + describe(r)


def test_check_wrong_type(ctx):
    bad = ctx.host_file(os.path.join(ctx.scratch, "type.json"),
                        '{\n  "version": 1,\n  "filesystem": {\n    "read": "/usr"\n  }\n}\n')
    r = ctx.run(["check", bad])
    assert r.returncode == 125, describe(r)
    assert "%s:4:" % bad in r.stderr, "type error must name FILE:LINE:COL\n" + describe(r)


def _syscall_names(n):
    import re
    with open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h") as f:
        names = re.findall(r"#define __NR_(\w+) ", f.read())
    return [x for x in names if x != "execve"][:n]


# Profiles `run` refuses, each at a different step: the loader's limits and
# the planner's cross-key rules.  `check` must refuse every one of them too,
# with the same message.
RUN_REJECTS = {
    "syscalls-deny-257": {"syscalls": {"deny": None}},
    "secret-host-not-allowed": {"secrets": {"X": {"from": {"env": "X"},
                                                  "hosts": ["a.example"]}}},
    "loopback-port-is-proxy": {"network": {"loopback_ports": [3128]}},
    "rule-on-proxy-port": {"network": {"transparent": True, "allow": ["a.example:3128"]}},
    "optional-names-unknown": {"network": {"allow": ["a.example"]},
                               "secrets": {"X": {"from": {"env": "X"}, "hosts": ["a.example"],
                                                 "optional": ["NOPE"]}}},
}


def test_check_refuses_what_run_refuses(ctx):
    """One validation path: every profile run refuses, check refuses with
    the same message (check once passed a profile with 257 syscalls.deny
    entries, and one whose secret was bound to a host it did not allow)."""
    for name, body in RUN_REJECTS.items():
        doc = {"version": 1, "extends": ["default"]}
        doc.update(json.loads(json.dumps(body)))
        if name == "syscalls-deny-257":
            doc["syscalls"]["deny"] = _syscall_names(257)
        path = ctx.host_file(os.path.join(ctx.scratch, name + ".json"), json.dumps(doc))
        run = ctx.run(["run", "-p", path, "-w", ctx.ws, "--", "true"])
        assert run.returncode == 125, name + ": run accepted it\n" + describe(run)
        chk = ctx.run(["check", path])
        assert chk.returncode == 125, name + ": check accepted it\n" + describe(chk)
        assert chk.stderr == run.stderr, "%s: check and run differ\n%s%s" % (
            name, describe(chk), describe(run))
    # positions where one file is to blame
    chk = ctx.run(["check", os.path.join(ctx.scratch, "syscalls-deny-257.json")])
    assert "syscalls-deny-257.json:1:" in chk.stderr, describe(chk)


def test_check_missing_file(ctx):
    r = ctx.run(["check", os.path.join(ctx.scratch, "absent.json")])
    assert r.returncode == 125, describe(r)
    assert "absent.json" in r.stderr, describe(r)


def test_explain_default(ctx):
    r = ctx.run(["explain", "-p", "default", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    out = r.stdout
    assert ctx.ws in out, "explain should show the workspace\n" + describe(r)
    assert "hidden" in out.lower(), describe(r)
    assert "network" in out.lower(), describe(r)


def test_explain_json(ctx):
    r = ctx.run(["explain", "--json", "-p", "default", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError("explain --json is not JSON: %s\n%s" % (e, describe(r)))
    for k in ("mounts", "landlock", "seccomp"):
        assert k in doc, "explain --json lacks %r (keys: %s)" % (k, sorted(doc))
    assert ctx.ws in r.stdout, "workspace missing from explain --json"


def test_explain_unknown_profile(ctx):
    r = ctx.run(["explain", "-p", "no-such-profile-abit"])
    assert r.returncode == 125, describe(r)
    assert "no-such-profile-abit" in r.stderr, describe(r)


def test_doctor(ctx):
    r = ctx.run(["doctor"])
    assert r.returncode == 0, describe(r)
    assert r.stdout.strip(), describe(r)
    r = ctx.run(["doctor", "--json"])
    assert r.returncode == 0, describe(r)
    try:
        json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError("doctor --json is not JSON: %s\n%s" % (e, describe(r)))


def _srcdir():
    import abtest
    return abtest.SRCDIR


def test_one_off_grants(ctx):
    """--write/--read/--env/--allow add to the profile for one run, go through
    the profile's validation, and are shown by explain and in the audit log."""
    extra = os.path.join(ctx.projects, "extra")
    ro = os.path.join(ctx.projects, "ro")
    os.makedirs(extra, exist_ok=True)
    os.makedirs(ro, exist_ok=True)
    with open(os.path.join(ro, "f"), "w") as f:
        f.write("readable\n")
    for d in (extra, ro):
        os.chown(d, ctx.uid, ctx.gid)
    script = ("touch %s/made && cat %s/f && echo \"E=$MY_EDITOR\" && "
              "(touch %s/nope 2>/dev/null && echo WROTE || echo RO)") % (extra, ro, ro)
    # without the grants: neither directory exists inside
    r = ctx.sandbox(script, env={"MY_EDITOR": "vi"})
    assert r.returncode != 0 and not os.path.exists(os.path.join(extra, "made")), describe(r)
    log = os.path.join(ctx.scratch, "audit.log")
    r = ctx.sandbox(script, env={"MY_EDITOR": "vi"},
                    extra_args=["--write", extra, "--read", ro, "--env", "MY_EDITOR",
                                "--allow", "api.example.test", "--log", log])
    assert r.returncode == 0, describe(r)
    assert os.path.exists(os.path.join(extra, "made"))
    assert "readable" in r.stdout and "E=vi" in r.stdout and "RO" in r.stdout, r.stdout
    start = json.loads(open(log).readline())
    assert start["event"] == "start" and start["grants"] == [
        "--write " + extra, "--read " + ro, "--env MY_EDITOR", "--allow api.example.test"], start
    # explain shows them, as typed, and what they did
    r = ctx.run(["explain", "--json", "-w", ctx.ws, "--allow", "api.example.test:8443",
                 "--write", extra])
    assert r.returncode == 0, describe(r)
    j = json.loads(r.stdout)
    assert j["profile"]["cli_grants"] == ["--allow api.example.test:8443", "--write " + extra]
    assert "api.example.test:8443" in json.dumps(j["network"]), j["network"]
    assert extra in json.dumps(j["writable"]), j["writable"]
    # bad values: the profile's own checks, named after the option
    for args, msg in ((["--write", "/"], "--write /: refusing to make / writable"),
                      (["--allow", "bad host!"], "--allow bad host!: invalid network rule"),
                      (["--env", ""], "--env needs a value")):
        r = ctx.sandbox("true", extra_args=args)
        assert r.returncode == 125 and msg in r.stderr, describe(r)


def _bash_complete(words, cword):
    """COMPREPLY of the bash completion for `words` (cursor on word cword)."""
    comp = os.path.join(abtest.SRCDIR, "completions", "agentbox.bash")
    arr = " ".join("'%s'" % w for w in words)
    script = ("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _agentbox; "
              "printf '%%s\\n' \"${COMPREPLY[@]}\"") % (comp, arr, cword)
    env = dict(os.environ, PATH=os.path.dirname(abtest.BINARY) + ":" + abtest.HOST_PATH)
    r = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


@users("root")
def test_shell_completion(ctx):
    assert {"run", "test-escape", "explain"} <= _bash_complete(["agentbox", ""], 1)
    assert {"default", "shell"} <= _bash_complete(["agentbox", "run", "-p", ""], 3)
    assert "--allow" in _bash_complete(["agentbox", "run", "--al"], 2)
    assert _bash_complete(["agentbox", "test-escape", "--format", ""], 3) == {"tap", "junit",
                                                                             "json"}
    assert "FS-01" in _bash_complete(["agentbox", "test-escape", "--only", "FS"], 3)
    assert "--json" in _bash_complete(["agentbox", "explain", "--"], 2)
    # zsh: the function file parses and loads as a completion function
    zsh = "/usr/bin/zsh"
    if os.path.exists(zsh):
        r = subprocess.run([zsh, "-f", "-c", "fpath=(%s $fpath); autoload -U compinit; "
                            "compinit -u -D; autoload -Uz _agentbox; whence -w _agentbox"
                            % os.path.join(abtest.SRCDIR, "completions")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        assert r.returncode == 0 and "function" in r.stdout, (r.stdout, r.stderr)
        r = subprocess.run([zsh, "-n", os.path.join(abtest.SRCDIR, "completions", "_agentbox")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert r.returncode == 0, r.stderr


def test_explain_placeholder_wording_is_documented(ctx):
    """explain's words for a reserved absent path are the ones
    docs/protected-paths.md explains (a directory for a workspace entry, a
    file for an anchored harness entry)."""
    os.makedirs(os.path.join(ctx.home, ".claude"), exist_ok=True)
    if ctx.uid:
        os.chown(os.path.join(ctx.home, ".claude"), ctx.uid, ctx.gid)
    r = ctx.run(["explain", "-p", "claude-code", "-w", ctx.ws],
                env={"ANTHROPIC_API_KEY": "sk-ant-api03-x"})
    assert r.returncode == 0, describe(r)
    with open(os.path.join(_srcdir(), "docs", "protected-paths.md")) as f:
        doc = " ".join(f.read().split())
    for words, where in (("absent: reserved by an empty read-only directory", "/.envrc"),
                         ("absent: reserved by a read-only placeholder file",
                          "/.claude/settings.json")):
        lines = [l for l in r.stdout.splitlines() if words in l]
        assert any(where in l for l in lines), "%s: not in explain\n%s" % (words, r.stdout)
        assert words in doc, "docs/protected-paths.md lacks explain's words: " + words


def test_refused_write_grant_names_its_option(ctx):
    """A refused writable grant says where it came from: --write on the
    command line, fs.write in a profile."""
    os.makedirs(os.path.join(ctx.home, ".ssh"), exist_ok=True)
    r = ctx.run(["run", "-w", ctx.ws, "--write", "~/.ssh", "--", "true"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.startswith("agentbox: --write: refusing to make %s/.ssh writable"
                               % ctx.home), describe(r)
    prof = ctx.host_file(os.path.join(ctx.scratch, "w.json"), json.dumps(
        {"version": 1, "extends": ["default"], "filesystem": {"write": ["~/.ssh"]}}))
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--", "true"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.startswith("agentbox: fs.write: refusing to make"), describe(r)


def test_docs_link_inside_the_repository(ctx):
    """Every relative link in README.md and docs/ names a file of the
    repository (a reader of the repository has nothing outside it)."""
    import re
    src = _srcdir()
    files = [os.path.join(src, "README.md")] + [
        os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs"))
        if f.endswith(".md")]
    bad = []
    for f in files:
        with open(f) as fh:
            text = fh.read()
        for target in re.findall(r"\]\(([^)#\s]+)", text) + \
                re.findall(r"`(\.\./[^`\s]+)`", text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path = os.path.normpath(os.path.join(os.path.dirname(f), target))
            if not path.startswith(src + os.sep) or not os.path.exists(path):
                bad.append("%s: %s" % (os.path.relpath(f, src), target))
    assert not bad, "links that lead nowhere in the repository:\n" + "\n".join(bad)


def test_explain_limits_are_what_the_run_gets(ctx):
    """explain shows the limits a run really gets: a profile's value above
    agentbox's hard limit becomes that limit (default asks nofile 65536),
    and explain says why."""
    r = ctx.run(["explain", "--json", "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    rl = json.loads(r.stdout)["limits"]["rlimits"]
    got = ctx.py_json("import json, resource as r; print(json.dumps("
                      "[r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_NPROC)]))")
    assert [rl["nofile"]["soft"], rl["nofile"]["hard"]] == got[0], (rl, got)
    assert [rl["nproc"]["soft"], rl["nproc"]["hard"]] == got[1], (rl, got)
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 65536:
        assert rl["nofile"]["asked"] == 65536, rl
        t = ctx.run(["explain", "-w", ctx.ws]).stdout
        assert "nofile: %d (the profile asks 65536; agentbox's hard limit" % hard in t, t


def test_explain_shows_the_command(ctx):
    """explain COMMAND shows the command that run would start (it was
    accepted and ignored); without one, the profile's command or a shell."""
    r = ctx.run(["explain", "-w", ctx.ws, "--", "make", "my test", "it's"])
    assert r.returncode == 0, describe(r)
    assert "  command: make 'my test' 'it'\\''s'\n" in r.stdout, r.stdout
    r = ctx.run(["explain", "--json", "-w", ctx.ws, "--", "make", "test"])
    assert json.loads(r.stdout)["command"] == ["make", "test"], r.stdout
    r = ctx.run(["explain", "-w", ctx.ws])
    assert "  command: /bin/sh\n" in r.stdout, r.stdout


def test_readme_counts_the_escape_probes(ctx):
    """The README's count of escape attempts, controls and gate is the
    registry's (test-escape --list)."""
    import re
    r = ctx.run(["test-escape", "--list"])
    assert r.returncode == 0, describe(r)
    rows = [l for l in r.stdout.splitlines() if l.strip()]
    controls = [l for l in rows if "[control]" in l]
    gate = [l for l in rows if l.startswith("PRC-01")]
    attempts = len(rows) - len(controls) - len(gate)
    with open(os.path.join(_srcdir(), "README.md")) as f:
        text = " ".join(f.read().split())
    want = ("runs %d real escape attempts inside `agentbox run` with the profile (after %d "
            "controls, which must work, and a gate that checks the sandbox is in effect: %d "
            "probes in `--list`)" % (attempts, len(controls), len(rows)))
    assert want in text, "README.md should say: " + want


def test_every_command_exits_125_on_a_usage_error(ctx):
    """As agentbox(1) EXIT STATUS says: an unknown option is 125 with a
    message, for every command."""
    for cmd in ("run", "check", "explain", "doctor", "allow", "test-escape", "report"):
        r = ctx.run([cmd, "--bogus"])
        assert r.returncode == 125 and "unknown option" in r.stderr, describe(r)


def test_man_pages_name_every_shipped_profile(ctx):
    """agentbox(1) FILES and agentbox-profile(5) SHIPPED PROFILES name every
    profile in profiles/, and the profile error example shows the absolute
    path agentbox prints."""
    src = _srcdir()
    names = sorted(f[:-5] for f in os.listdir(os.path.join(src, "profiles"))
                   if f.endswith(".json") and f != "schema.json")
    for page, section in (("agentbox.1", ".SH FILES"), ("agentbox-profile.5",
                                                          ".SH SHIPPED PROFILES")):
        with open(os.path.join(src, "man", page)) as f:
            text = f.read()
        start = text.index(section)
        body = text[start:text.index("\n.SH ", start + 1)].replace("\\-", "-")
        missing = [n for n in names if n not in body]
        assert not missing, "%s %s does not name %s" % (page, section, missing)
    with open(os.path.join(src, "man", "agentbox-profile.5")) as f:
        text = f.read()
    examples = [l for l in text.splitlines() if l.startswith("agentbox: ") and ".json:" in l]
    assert examples and all(l.split(" ")[1].startswith("/") for l in examples), examples


def _usage_words(text):
    """A usage synopsis as one line of words (the wrapping differs)."""
    return " ".join(text.replace("Usage: ", "").split())


def test_readme_usage_is_the_help(ctx):
    """The README's usage block says what each command's --help says, option
    for option (the help is the source)."""
    with open(os.path.join(_srcdir(), "README.md")) as f:
        text = f.read()
    start = text.index("## Usage\n\n```\n") + len("## Usage\n\n```\n")
    block = text[start:text.index("```", start)]
    entries = {}
    for line in block.splitlines():
        if line.startswith("agentbox "):
            cur = line.split()[1]
            entries[cur] = line
        elif line.startswith(" "):
            entries[cur] += " " + line
    for cmd in ("run", "check", "explain", "doctor", "allow", "test-escape", "report"):
        r = ctx.run([cmd, "--help"])
        assert r.returncode == 0, describe(r)
        usage = []
        for line in r.stdout.splitlines():
            if line.startswith("Usage:") or (usage and line.startswith(" ")):
                usage.append(line)
            elif usage:
                break
        assert cmd in entries, "README's usage block lacks " + cmd
        assert _usage_words(entries[cmd]) == _usage_words("\n".join(usage)), \
            "README usage of %s:\n  %s\n--help says:\n  %s" % (
                cmd, _usage_words(entries[cmd]), _usage_words("\n".join(usage)))


def _schema_keys(node, out):
    if isinstance(node, dict):
        for k, v in (node.get("properties") or {}).items():
            out.add(k)
            _schema_keys(v, out)
        for k in ("items", "additionalProperties"):
            if isinstance(node.get(k), dict):
                _schema_keys(node[k], out)
        for k in ("oneOf", "anyOf", "allOf"):
            for v in node.get(k) or []:
                _schema_keys(v, out)
        for v in (node.get("$defs") or {}).values():
            _schema_keys(v, out)
    return out


def test_every_key_and_option_is_documented(ctx):
    """One source each: every key of profiles/schema.json is in
    agentbox-profile(5) (and the loader knows it: test_profile's
    test_schema_matches_parser), and every option each command's --help
    lists is in agentbox(1) and in both shell completions."""
    import re
    src = _srcdir()
    with open(os.path.join(src, "profiles", "schema.json")) as f:
        keys = _schema_keys(json.load(f), set()) - {"$schema"}
    with open(os.path.join(src, "man", "agentbox-profile.5")) as f:
        page5 = f.read().replace("\\-", "-")
    missing = sorted(k for k in keys if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(k),
                                                     page5))
    assert not missing, "keys of schema.json not in agentbox-profile(5): %s" % missing
    with open(os.path.join(src, "man", "agentbox.1")) as f:
        page1 = f.read().replace("\\-", "-")
    comps = {}
    for c in ("agentbox.bash", "_agentbox"):
        with open(os.path.join(src, "completions", c)) as f:
            comps[c] = f.read()
    problems = []
    for cmd in ("run", "check", "explain", "doctor", "allow", "test-escape", "report"):
        r = ctx.run([cmd, "--help"])
        for opt in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", r.stdout))):
            if opt == "--help":
                continue
            if opt not in page1:
                problems.append("%s %s: not in agentbox(1)" % (cmd, opt))
            for c, text in comps.items():
                if opt not in text:
                    problems.append("%s %s: not in completions/%s" % (cmd, opt, c))
    assert not problems, "\n".join(problems)
