# SPDX-License-Identifier: MIT
"""`agentbox test-escape`: the battery against every shipped
profile (must hold: exit 0), the output formats, and the ablation check that
proves the battery can fail: build/agentbox-ablate (a test-only build that
honours AGENTBOX_TEST_ABLATE) weakens one layer at a time and the probes tied
to that layer must go red, with exit 1.
"""

import json
import os
import re
import subprocess
import xml.dom.minidom

import abtest
from abtest import HOST_PATH, NOBODY_GID, NOBODY_UID, describe, users

TIMEOUT = 240


def _profiles():
    d = os.path.join(abtest.SRCDIR, "profiles")
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json") and f != "schema.json")


def _escape(ctx, args, binary=None, env=None):
    """Run test-escape as the test's user; returns (CompletedProcess, results)."""
    binary = binary or abtest.BINARY
    cmd = [binary, "test-escape"] + list(args)
    if ctx.uid != os.getuid():
        cmd = ["setpriv", "--reuid=%d" % NOBODY_UID, "--regid=%d" % NOBODY_GID,
               "--clear-groups"] + cmd
    e = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": ctx.home}
    e.update(env or {})
    r = subprocess.run(cmd, env=e, cwd=ctx.ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    r.cmdline = cmd
    return r


def _json_results(r):
    rows, summary = {}, None
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if "summary" in o:
            summary = o["summary"]
        else:
            rows[o["id"]] = o
    assert summary is not None, "no summary line:\n" + r.stdout[-2000:]
    return rows, summary


def _red(rows):
    return sorted(i for i, o in rows.items() if o["verdict"] != "ok" and o["verdict"] != "skip")


def _explain(rows, ids):
    out = []
    for i in ids:
        o = rows.get(i)
        if not o:
            continue
        bad = [a for a in o.get("attempts", []) if a.get("verdict") != "ok"]
        out.append("%s %s %s %s" % (i, o["verdict"], o.get("note", ""),
                                    json.dumps(bad[:6])))
    return "\n".join(out)


def _assert_holds(ctx, *profiles):
    profile = "+".join(profiles)
    args = []
    for p in profiles:
        args += ["-p", p]
    r = _escape(ctx, args + ["--format", "json"])
    rows, summary = _json_results(r)
    red = _red(rows)
    assert r.returncode == 0 and not red, \
        "test-escape -p %s: exit %d, not ok: %s\n%s\nstderr: %s" % (
            profile, r.returncode, red, _explain(rows, red), r.stderr[-3000:])
    assert summary["exit"] == 0 and summary["escaped"] == 0, summary
    # every probe of the registry ran (the controls included)
    listed = _escape(ctx, ["--list"]).stdout.split("\n")
    ids = [l.split()[0] for l in listed if l.strip()]
    assert sorted(rows) == sorted(ids), "ran %s, registry %s" % (sorted(rows), ids)
    # nothing canary-shaped ever printed
    assert not re.search(r"ABCANARY-[A-Z0-9]+-[0-9a-f]{32}", r.stdout + r.stderr)


def test_default_profile_holds(ctx):
    _assert_holds(ctx, "default")


def test_every_shipped_profile_holds(ctx):
    """Every shipped profile; an extension profile ("+npm") adds to another,
    so it is judged on top of default."""
    for p in _profiles():
        if p.startswith("+"):
            _assert_holds(ctx, "default", p)
        elif p != "default":
            _assert_holds(ctx, p)


@users("root")
def test_formats(ctx):
    # TAP 14: version, plan, one point per probe, all ok
    r = _escape(ctx, ["--only", "FS-01,SEC-01"])
    assert r.returncode == 0, describe(r)
    lines = r.stdout.splitlines()
    assert lines[0] == "TAP version 14", lines[:3]
    plan = [l for l in lines if re.match(r"^1\.\.\d+$", l)]
    points = [l for l in lines if re.match(r"^(not )?ok \d+ ", l)]
    assert plan and int(plan[0][3:]) == len(points), (plan, len(points))
    assert all(p.startswith("ok ") for p in points), points
    ids = {re.match(r"^ok \d+ - (\S+)", p).group(1) for p in points}
    assert {"FS-01", "SEC-01", "PRC-01", "CTL-01"} <= ids and "NET-01" not in ids, ids
    # JUnit: well-formed, one testsuite per category, no failure
    out = os.path.join(ctx.scratch, "r.xml")
    r = _escape(ctx, ["--only", "FS-01,SEC-01", "--format", "junit", "-o", out])
    assert r.returncode == 0 and r.stdout == "", describe(r)
    doc = xml.dom.minidom.parse(out)
    suites = doc.getElementsByTagName("testsuite")
    names = sorted(s.getAttribute("name") for s in suites)
    assert names == sorted(set(names)) and {"FS", "SEC", "CTL", "PRC"} <= set(names), names
    assert not doc.getElementsByTagName("failure"), open(out).read()[:2000]
    # usage errors: 125
    for bad in (["--format", "yaml"], ["--only", "NOPE-1"], ["extra"]):
        r = _escape(ctx, bad)
        assert r.returncode == 125, describe(r)


# layer -> probes that must go red when it is gone
ABLATIONS = {
    "seccomp": {"KRN-01", "KRN-02", "TTY-01"},
    "landlock": {"PRC-01"},
    "netns": {"NET-01", "NET-06"},
    "env": {"SEC-06"},
    "home": {"SEC-01", "SEC-02", "PER-01"},
    "pty": {"TTY-02"},
    "connect": {"CRD-01"},
}


def _ablate(ctx, layers, expect, judged=()):
    binary = os.path.join(os.path.dirname(abtest.BINARY), "agentbox-ablate")
    assert os.access(binary, os.X_OK), "build agentbox-ablate with make"
    r = _escape(ctx, ["--format", "json"], binary=binary,
                env={"AGENTBOX_TEST_ABLATE": layers})
    rows, summary = _json_results(r)
    escaped = {i for i, o in rows.items() if o["verdict"] == "escaped"}
    missing = expect - escaped
    assert not missing, "AGENTBOX_TEST_ABLATE=%s: %s stayed green (escaped: %s)\n%s" % (
        layers, sorted(missing), sorted(escaped), _explain(rows, sorted(missing)))
    assert r.returncode == 1 and summary["exit"] == 1, describe(r)
    for i in judged:  # seen from outside too, not only reported from inside
        seen = [a for a in rows[i]["attempts"]
                if a.get("source") == "judge" and a["verdict"] == "escaped"]
        assert seen, "AGENTBOX_TEST_ABLATE=%s: the judge saw nothing for %s\n%s" % (
            layers, i, _explain(rows, [i]))
    return rows


def test_ablation_seccomp(ctx):
    _ablate(ctx, "seccomp", ABLATIONS["seccomp"])


def test_ablation_landlock(ctx):
    _ablate(ctx, "landlock", ABLATIONS["landlock"])


def test_ablation_netns(ctx):
    _ablate(ctx, "netns", ABLATIONS["netns"], judged=("NET-01",))


def test_ablation_env(ctx):
    _ablate(ctx, "env", ABLATIONS["env"])


def test_ablation_home(ctx):
    _ablate(ctx, "home", ABLATIONS["home"], judged=("FS-01",))


def test_ablation_pty(ctx):
    _ablate(ctx, "pty", ABLATIONS["pty"], judged=("TTY-02",))


def test_ablation_connect(ctx):
    """The lab's socket bound after the start: seen from outside too."""
    _ablate(ctx, "connect", ABLATIONS["connect"], judged=("CRD-01",))


def test_profile_with_its_own_secrets(ctx):
    """A profile under /tmp (hidden by the lab's private /tmp, bound back)
    whose secret comes from a command the lab cannot run: the lab supplies a
    canary for it (same hosts and placeholder shape) and the battery holds;
    inside, the variable holds a placeholder of the profile's shape."""
    prof = os.path.join(ctx.scratch, "withsecret.json")
    with open(prof, "w") as f:
        json.dump({"version": 1, "extends": ["default"],
                   "network": {"allow": ["api.example.test"]},
                   "secrets": {"EXAMPLE_KEY": {
                       "from": {"command": ["/nonexistent/pass", "show", "x"]},
                       "hosts": ["api.example.test"],
                       "placeholder": {"prefix": "sk-ex-", "length": 40}}}}, f)
    os.chmod(prof, 0o644)
    r = _escape(ctx, ["-p", prof, "--format", "json"])
    rows, summary = _json_results(r)
    red = _red(rows)
    assert r.returncode == 0 and not red, "exit %d, not ok %s\n%s\n%s" % (
        r.returncode, red, _explain(rows, red), r.stderr[-2000:])
    assert "EXAMPLE_KEY" in rows["SEC-06"]["report"]["env_names"], rows["SEC-06"]["report"]


def test_profile_by_name_from_user_config(ctx):
    """`-p NAME` finds the caller's own profile (~/.config/agentbox/profiles),
    as `run` and `check` do, not one in the lab's fake home."""
    d = os.path.join(ctx.home, ".config", "agentbox", "profiles")
    os.makedirs(d, exist_ok=True)
    ctx.host_file(os.path.join(d, "myprofile.json"),
                  json.dumps({"version": 1, "extends": ["default"],
                              "network": {"allow": ["api.example.test"]}}))
    if ctx.uid != 0:
        abtest.chown_tree(os.path.join(ctx.home, ".config"), ctx.uid, ctx.gid)
    r = _escape(ctx, ["-p", "myprofile", "--only", "NET-01", "--format", "json"])
    assert r.returncode == 0, "exit %d\n%s" % (r.returncode, r.stderr[-2000:])
    rows, summary = _json_results(r)
    assert summary["exit"] == 0 and not _red(rows), _explain(rows, _red(rows))
    assert "myprofile" in r.stdout + r.stderr


@users("root")
def test_gate_stops_outside_a_sandbox(ctx):
    """The inside runner, started on the host itself (no sandbox at all):
    PRC-01 reports sandboxed=false and every later probe is skipped, which the
    harness turns into exit 4."""
    lab = os.path.join(ctx.scratch, "lab.json")
    out = os.path.join(ctx.scratch, "out.jsonl")
    with open(lab, "w") as f:
        json.dump({"run_id": "0" * 16, "home": ctx.home, "workspace": ctx.ws,
                   "only": ["SEC-01"]}, f)
    r = subprocess.run([abtest.BINARY, "__probe", lab, out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, describe(r)
    rows = [json.loads(l) for l in open(out)]
    gate = [o for o in rows if o["id"] == "PRC-01"]
    assert gate and gate[0]["report"]["sandboxed"] is False, gate
    after = rows[rows.index(gate[0]) + 1:]
    assert after and all(o["verdict"] == "skip" for o in after), after


def test_harness_dir_without_reservations_is_caught(ctx):
    """PER-02 proves the anchored protect entries of the harness profiles:
    a profile that grants ~/.claude and ~/.codex read-write without them lets
    the sandbox create hooks and settings the host's harness would run, and
    the judge sees those files appear on the host."""
    prof = os.path.join(ctx.scratch, "weak-harness.json")
    with open(prof, "w") as f:
        json.dump({"version": 1, "extends": ["default"],
                   "filesystem": {"write": ["~/.claude", "~/.codex"],
                                  "deny": ["~/.claude/.credentials.json", "~/.codex/auth.json",
                                           "~/.codex/.env"]}}, f)
    os.chmod(prof, 0o644)
    r = _escape(ctx, ["-p", prof, "--format", "json"])
    rows, summary = _json_results(r)
    per02 = rows["PER-02"]
    judged = [a for a in per02["attempts"]
              if a.get("source") == "judge" and a["verdict"] == "escaped"]
    assert per02["verdict"] == "escaped" and judged, _explain(rows, ["PER-02"])
    assert rows["SEC-04"]["verdict"] == "ok", _explain(rows, ["SEC-04"])
    assert r.returncode == 1, describe(r)
