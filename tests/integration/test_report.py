# SPDX-License-Identifier: MIT
"""`agentbox report LOG [--json]`: the audit log of a real run, and
hand-written logs with exec/exit/denial records and hostile strings.

The real run: `agentbox run --log L -p default` of a shell that is refused
a host (curl through the proxy to evil.test), a DNS name (getent) and runs
/bin/true, /bin/false and ls.  When the log holds exec records (the
supervisor writes them), the tree must show those three under the shell
with statuses 0, 1 and 0.

Two more real runs: one that leaves a nested git repository and a gitlink
(the report's Warnings section), one whose harness saves a rendered
credentials file by rename, once carried out and once refused (Secrets).
"""

import json
import os

from abtest import INNER_PY, describe

ESC = "\x1b"

SCRIPT = ("curl -sS -o /dev/null --max-time 10 https://evil.test/ ; "
          "getent hosts evil.test ; /bin/true; /bin/false; ls / >/dev/null")


def _report(ctx, log, *extra):
    return ctx.run(["report"] + list(extra) + [log])


def _commands_by_argv(js):
    return {tuple(c["argv"]): c for c in js["commands"]}


def test_report_real_run(ctx):
    log = os.path.join(ctx.scratch, "audit.jsonl")
    r = ctx.sandbox(SCRIPT, extra_args=["--log", log])
    assert r.returncode == 0, describe(r)
    with open(log) as f:
        events = [json.loads(line) for line in f if line.strip()]
    has_exec = any(e.get("event") == "exec" for e in events)

    t = _report(ctx, log)
    assert t.returncode == 0, describe(t)
    out = t.stdout
    assert out.startswith("agentbox report: %s\n" % log), describe(t)
    assert "Profile:  default\n" in out, describe(t)
    assert "evil.test:443  1 attempt, rule not-listed" in out, describe(t)
    assert "    evil.test  " in out and "(NXDOMAIN)" in out, describe(t)
    assert "could not be read" not in out, describe(t)
    assert ESC not in out, describe(t)

    j = _report(ctx, log, "--json")
    assert j.returncode == 0, describe(j)
    js = json.loads(j.stdout)
    assert js["bad_lines"] == 0 and js["events"] == len(events), j.stdout
    assert js["sessions"][0]["profile"] == "default", j.stdout
    assert js["sessions"][0]["complete"] is True, j.stdout
    refused = [x for x in js["refused"] if x["host"] == "evil.test"]
    assert refused and refused[0]["port"] == 443 and refused[0]["count"] >= 1, j.stdout
    assert any(x["name"] == "evil.test" for x in js["dns_refused"]), j.stdout
    assert js["denial_counts"]["network"] >= 2, j.stdout

    # options after LOG work too, and give the same report
    j2 = ctx.run(["report", log, "--json"])
    assert j2.returncode == 0 and json.loads(j2.stdout) == js, describe(j2)

    if not has_exec:
        return
    cmds = _commands_by_argv(js)
    sh = [c for c in js["commands"] if c["argv"][:2] == ["sh", "-c"]]
    assert len(sh) == 1, j.stdout
    want = {("/bin/true",): 0, ("/bin/false",): 1, ("ls", "/"): 0}
    for argv, status in want.items():
        c = cmds.get(argv)
        assert c, "no command %r in %s" % (argv, j.stdout)
        assert c["parent"] == sh[0]["id"], "%r is not under the shell: %s" % (argv, j.stdout)
        assert c["state"] == "exited" and c["status"] == status, j.stdout
    assert sh[0]["status"] == 0, j.stdout
    lines = out.splitlines()
    idx = [next(i for i, l in enumerate(lines) if l.startswith("    " + name + "  ["))
           for name in ("/bin/true", "/bin/false", "ls /")]
    assert idx == sorted(idx), out
    assert "[exit 0" in lines[idx[0]] and "[exit 1" in lines[idx[1]] and \
        "[exit 0" in lines[idx[2]], out


HAND_LOG = [
    {"ts": "2026-01-02T03:04:05.000Z", "event": "start", "profile": "default", "proxy": 3128,
     "transparent": True, "grants": ["--allow example.org"]},
    {"ts": "2026-01-02T03:04:05.100Z", "event": "exec", "pid": 2, "ppid": 1, "cwd": "/w",
     "path": "/bin/sh", "argv": ["sh", "-c", "x"]},
    {"ts": "2026-01-02T03:04:05.200Z", "event": "exec", "pid": 3, "ppid": 2, "cwd": "/w",
     "path": "/bin/echo", "argv": ["echo", ESC + "]0;pwned\x07", "\x9b" + "31m", "\u202eevil"]},
    {"ts": "2026-01-02T03:04:05.300Z", "event": "exit", "pid": 3, "status": 0, "ms": 3},
    {"ts": "2026-01-02T03:04:05.400Z", "event": "denied", "kind": "syscall",
     "syscall": "ptrace", "errno": "EPERM", "pid": 2, "comm": ESC + "c", "ip": "0x1"},
    {"ts": "2026-01-02T03:04:05.500Z", "event": "denied-repeat", "kind": "syscall",
     "syscall": "ptrace", "pid": 2, "comm": "sh", "count": 4},
    {"ts": "2026-01-02T03:04:05.600Z", "event": "denied", "kind": "file", "source": "bpf",
     "pid": 2, "comm": "cat", "path": "/etc/shadow\n[fake line]", "op": "open",
     "errno": "EACCES"},
    {"ts": "2026-01-02T03:04:05.700Z", "event": "exit", "pid": 2, "signal": 15},
    {"ts": "2026-01-02T03:04:06.000Z", "event": "end"},
]


def test_report_handwritten_hostile(ctx):
    log = os.path.join(ctx.scratch, "hand.jsonl")
    body = "".join(json.dumps(e) + "\n" for e in HAND_LOG) + "not json\n{\"event\": 5}\n"
    ctx.host_file(log, body)
    t = _report(ctx, log)
    assert t.returncode == 0, describe(t)
    out = t.stdout
    for bad in (ESC, "\x07", "\x9b", "\u202e"):
        assert bad not in out, "raw %r in the report:\n%r" % (bad, out)
    assert "'\\x1b]0;pwned\\x07'" in out, out
    assert "'\\xc2\\x9b31m'" in out and "'\\xe2\\x80\\xaeevil'" in out, out
    assert "\n[fake line]" not in out and "/etc/shadow\\x0a[fake line]" in out, out
    assert "  sh -c x  [signal 15 (SIGTERM)" in out, out
    assert "    echo " in out and "[exit 0, 3 ms]" in out, out
    assert "    ptrace by \\x1bc  4 times (EPERM)" in out, out
    assert "2 lines could not be read (first: line 10)" in out, out
    j = _report(ctx, log, "--json")
    assert j.returncode == 0, describe(j)
    assert ESC not in j.stdout, j.stdout
    js = json.loads(j.stdout)
    echo = [c for c in js["commands"] if c["argv"][0] == "echo"][0]
    assert echo["argv"][1] == ESC + "]0;pwned\x07", js  # exact, escaped by the encoder
    assert js["bad_lines"] == 2 and js["first_bad_line"] == 10, js
    assert js["denial_counts"]["syscall"] == 4 and js["denial_counts"]["file"] == 1, js


def test_report_errors(ctx):
    missing = os.path.join(ctx.scratch, "missing.jsonl")
    r = _report(ctx, missing)
    assert r.returncode == 125 and "cannot open the log" in r.stderr, describe(r)
    assert r.stderr.count("agentbox:") == 1, describe(r)  # printed once
    r = _report(ctx, ctx.scratch)
    assert r.returncode == 125 and "not a regular file" in r.stderr, describe(r)
    fifo = os.path.join(ctx.scratch, "fifo")
    os.mkfifo(fifo)
    if ctx.uid != os.getuid():
        os.chown(fifo, ctx.uid, ctx.gid)
    r = _report(ctx, fifo)  # must not block on the FIFO
    assert r.returncode == 125 and "not a regular file" in r.stderr, describe(r)
    empty = ctx.host_file(os.path.join(ctx.scratch, "empty.jsonl"), "")
    r = _report(ctx, empty)
    assert r.returncode == 0 and "no events" in r.stdout, describe(r)
    r = _report(ctx, empty, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["events"] == 0, describe(r)
    junk = ctx.host_file(os.path.join(ctx.scratch, "junk.txt"), "hello\nworld\n")
    r = _report(ctx, junk)
    assert r.returncode == 125 and "not an agentbox audit log" in r.stderr, describe(r)
    for args in (["report"], ["report", "a", "b"], ["report", "--bogus", "x"]):
        r = ctx.run(args)
        assert r.returncode == 125 and r.stderr.strip(), describe(r)
    r = ctx.run(["report", "--help"])
    assert r.returncode == 0 and "agentbox report" in r.stdout, describe(r)
    r = ctx.run(["--help"])
    assert "report" in r.stdout, describe(r)


# ---------------------------------------------------------------- warnings, credentials

def test_report_git_warnings(ctx):
    """A run that arms a nested repository (core.fsmonitor, and a gitlink to
    it) and creates a `?` protect entry (.husky/): the report shows what
    was moved aside, before the commands, and --json lists it."""
    ctx.git_host("init", "-q", ".")
    ctx.host_file(os.path.join(ctx.ws, "README"), "hello\n")
    ctx.git_host("add", "README")
    ctx.git_host("commit", "-q", "-m", "initial")
    log = os.path.join(ctx.scratch, "audit.jsonl")
    r = ctx.sandbox("git -c user.name=a -c user.email=a@b init -q vendor/lib && "
                    "git -C vendor/lib -c user.name=a -c user.email=a@b commit -q "
                    "--allow-empty -m x && git -C vendor/lib config core.fsmonitor ./x && "
                    "git update-index --add --cacheinfo "
                    "160000,$(git -C vendor/lib rev-parse HEAD),vendor/lib && mkdir .husky",
                    extra_args=["--log", log])
    assert r.returncode == 0, describe(r)
    nested = ("disarmed a nested git repository armed during the run: %s/vendor/lib/.git "
              "(core.fsmonitor in config, line " % ctx.ws)
    husky = ("created during the run, where a \"?\" entry of filesystem.protect reserves "
             "nothing: %s/.husky, moved to .husky.agentbox-disarmed" % ctx.ws)
    t = _report(ctx, log)
    assert t.returncode == 0, describe(t)
    out = t.stdout
    head = out[out.index("\nWarnings (2)\n"):out.index("\nCommands (")]
    assert "  git: " + nested in head and "  unprotected: " + husky in head, out
    assert "of kinds this agentbox does not know" not in out, out
    j = _report(ctx, log, "--json")
    assert j.returncode == 0, describe(j)
    js = json.loads(j.stdout)
    assert js["unknown_events"] == 0 and js["warning_count"] == 2, j.stdout
    kinds = sorted((w["kind"], w["session"], w["count"]) for w in js["warnings"])
    assert kinds == [("git", 1, 1), ("unprotected", 1, 1)], j.stdout
    assert any(w["message"].startswith(nested) for w in js["warnings"]), j.stdout


CRED_PROFILE = {
    "version": 1, "extends": "default",
    "filesystem": {"write": ["~/.tool"], "deny": ["~/.tool/creds.json"]},
    "network": {"allow": ["tool.example.test"]},
    "secrets": {"TOOL_TOKEN": {
        "from": {"json": "~/.tool/creds.json", "pointer": "/token"}, "render": True,
        "env": False, "hosts": ["tool.example.test"], "in": ["header:authorization"]}},
}

# the harness's save (done), then one of a file with a second link (refused)
CRED_SAVE = r"""
import errno, os
p = os.path.expanduser("~/.tool/creds.json")
def save(name, link):
    q = os.path.join(os.path.dirname(p), name)
    with open(q, "w") as f:
        f.write('{"token": "new"}')
    if link:
        os.link(q, q + ".2")
    try:
        os.rename(q, p)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print(save("new", False), save("linked", True))
"""


def test_report_credentials_saved(ctx):
    """A rendered credentials file saved by rename (test_cred_rename.py): the
    report's Secrets section names the file as saved once and refused once,
    with the reason; --json has both under credentials_files."""
    d = os.path.join(ctx.home, ".tool")
    os.makedirs(d, exist_ok=True)
    if ctx.uid != 0:
        os.chown(d, ctx.uid, ctx.gid)
    creds = ctx.host_file(os.path.join(d, "creds.json"),
                          json.dumps({"token": "real-" + ctx.token}), 0o600)
    prof = ctx.host_file(os.path.join(ctx.scratch, "tool.json"), json.dumps(CRED_PROFILE))
    log = os.path.join(ctx.scratch, "audit.jsonl")
    r = ctx.run(["run", "-p", prof, "-w", ctx.ws, "--log", log, "--",
                 INNER_PY, "-c", CRED_SAVE])
    assert r.returncode == 0, describe(r)
    assert r.stdout.split() == ["ok", "EBUSY"], describe(r)
    t = _report(ctx, log)
    assert t.returncode == 0, describe(t)
    out = t.stdout
    assert "\nSecrets\n" in out and "none used" not in out, out
    assert "  credentials files saved inside: %s x1\n" % creds in out, out
    assert "  credentials files refused: %s (the new file has other links) x1\n" % creds \
        in out, out
    assert "of kinds this agentbox does not know" not in out, out
    j = _report(ctx, log, "--json")
    assert j.returncode == 0, describe(j)
    js = json.loads(j.stdout)
    assert js["unknown_events"] == 0, j.stdout
    got = sorted((c["path"], c["outcome"], c["reason"] or "", c["count"])
                 for c in js["credentials_files"])
    assert got == [(creds, "refused", "the new file has other links", 1),
                   (creds, "saved", "", 1)], j.stdout
