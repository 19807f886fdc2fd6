#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Make a container engine's default seccomp profile let agentbox run inside.

    gen-seccomp.py --engine docker|podman [--base DEFAULT.json] -o OUT.json
    gen-seccomp.py --engine docker --base DEFAULT.json --check OUT.json

The output is the engine's default profile, unchanged, except that the calls
agentbox needs to build its sandbox (ADDED below) are allowed without the
capability the default asks for: their conditional and refusing rules are
taken out and one unconditional rule allows them.  Nothing else changes: no
capability, no other call.  --check verifies that OUT is exactly that.

The base is the engine's published default: podman's and CRI-O's is
/usr/share/containers/seccomp.json (Debian's golang-github-containers-common).
Docker's is compiled into dockerd; give it with --base (moby's
profiles/seccomp/default.json of your Docker version).  Without one, the
Docker profile is built on containers-common's default, which already allows
the namespace, mount, keyring and pidfd_getfd calls Docker's default gates.
"""

import argparse
import json
import os
import sys

# What agentbox calls while it builds the sandbox, that the engines' default
# profiles allow only with CAP_SYS_ADMIN (pidfd_getfd: CAP_SYS_PTRACE).
ADDED = {
    "podman": ["sethostname"],
    "docker": ["clone", "unshare", "setns", "mount", "umount2", "pivot_root", "sethostname",
               "open_tree", "move_mount", "mount_setattr", "keyctl", "pidfd_getfd"],
}
CONTAINERS_COMMON = "/usr/share/containers/seccomp.json"
COMMENT = "agentbox: the calls its sandbox set-up needs, without capabilities"


def unconditional(rule):
    """An allow rule that applies whatever the capabilities, args, kernel."""
    return (rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("args")
            and not rule.get("includes") and not rule.get("excludes"))


def allowed(profile):
    out = set()
    for r in profile.get("syscalls") or []:
        if unconditional(r):
            out.update(r.get("names") or [])
    return out


def generate(base, names):
    prof = json.loads(json.dumps(base))
    need = [n for n in names if n not in allowed(base)]
    rules = []
    for r in prof.get("syscalls") or []:
        if not unconditional(r):
            r["names"] = [n for n in (r.get("names") or []) if n not in need]
            if not r["names"]:
                continue
        rules.append(r)
    if need:
        rules.append({"names": sorted(need), "action": "SCMP_ACT_ALLOW", "args": [],
                      "comment": COMMENT, "includes": {}, "excludes": {}})
    prof["syscalls"] = rules
    return prof


def check(base, names, out):
    """Problems with OUT as the profile generate(base, names) must be."""
    probs = []
    want = set(names) - allowed(base)
    got = allowed(out) - allowed(base)
    if got != want:
        probs.append("unconditionally allowed beyond the default: %s, want %s"
                     % (sorted(got), sorted(want)))
    if allowed(base) - allowed(out):
        probs.append("no longer allowed: %s" % sorted(allowed(base) - allowed(out)))
    for k in base:
        if k != "syscalls" and base[k] != out.get(k):
            probs.append("%s differs from the default" % k)
    # every other rule is the default's, with only the added names removed
    rest = [r for r in out.get("syscalls", []) if r.get("comment") != COMMENT]
    expect = [r for r in generate(base, names)["syscalls"] if r.get("comment") != COMMENT]
    if rest != expect:
        probs.append("rules other than agentbox's differ from the default")
    return probs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, choices=sorted(ADDED))
    ap.add_argument("--base", help="the engine's default profile (default: %s)"
                    % CONTAINERS_COMMON)
    ap.add_argument("-o", "--output")
    ap.add_argument("--check", metavar="PROFILE")
    a = ap.parse_args()
    with open(a.base or CONTAINERS_COMMON) as f:
        base = json.load(f)
    names = ADDED[a.engine]
    if a.check:
        with open(a.check) as f:
            probs = check(base, names, json.load(f))
        for p in probs:
            print("%s: %s" % (a.check, p), file=sys.stderr)
        return 1 if probs else 0
    text = json.dumps(generate(base, names), indent=2) + "\n"
    if a.output:
        with open(a.output + ".tmp", "w") as f:
            f.write(text)
        os.rename(a.output + ".tmp", a.output)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
