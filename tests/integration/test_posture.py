# SPDX-License-Identifier: MIT
"""Process posture inside: capabilities, no_new_privs, seccomp, uid, env, fds."""

import os
import re
import socket

from abtest import describe, parse_status

ALLOWED_ENV = {"TERM", "LANG", "LANGUAGE", "COLORTERM", "TZ", "NO_COLOR", "PATH", "HOME",
               "TMPDIR"}
# Set by agentbox itself (not copied from the host) if at all.
AGENTBOX_SET_ENV = {"USER", "LOGNAME", "SHELL", "HOSTNAME", "PWD", "container", "AGENTBOX"}
# the egress proxy's variables (src/plan/plan_net.c); values are checked in test_egress.py
AGENTBOX_SET_ENV |= {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY",
                     "no_proxy", "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
                     "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "NODE_USE_ENV_PROXY",
                     "JAVA_TOOL_OPTIONS"}


def test_status_posture(ctx):
    st = parse_status(ctx.sh_ok("cat /proc/self/status"))
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert k in st, "no %s in /proc/self/status" % k
        assert int(st[k], 16) == 0, "%s is %s inside" % (k, st[k])
    assert st.get("NoNewPrivs") == "1", "NoNewPrivs=%s" % st.get("NoNewPrivs")
    assert st.get("Seccomp") == "2", "Seccomp=%s" % st.get("Seccomp")


def test_uid_gid(ctx):
    out = ctx.sh_ok("id -u; id -g; id -G; cat /proc/self/uid_map /proc/self/gid_map")
    lines = out.splitlines()
    assert int(lines[0]) == ctx.inside_uid, "uid inside %s, expected %d" % (lines[0], ctx.inside_uid)
    assert int(lines[1]) == ctx.inside_uid, "gid inside %s" % lines[1]
    assert int(lines[0]) != 0
    assert lines[2].split() == [lines[1]], "supplementary groups inside: %s" % lines[2]
    maps = [l.split() for l in lines[3:] if l.strip()]
    assert len(maps) == 2 and all(m[2] == "1" for m in maps), \
        "expected a single one-id uid and gid mapping, got %s" % maps


def test_env_allowlist(ctx):
    r = ctx.sandbox(["/usr/bin/env"], env={"EDITOR": "vi", "MY_VAR": ctx.env_token,
                                           "LC_ALL": "C.UTF-8", "TZ": "UTC"})
    assert r.returncode == 0, describe(r)
    env = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    assert ctx.env_token not in r.stdout, "an env canary crossed:\n" + r.stdout
    for k in ("AB_CANARY_ENV", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "DBUS_SESSION_BUS_ADDRESS",
              "DISPLAY", "XDG_RUNTIME_DIR", "MY_VAR", "EDITOR"):
        assert k not in env, "%s crossed into the sandbox" % k
    extra = set(env) - ALLOWED_ENV - AGENTBOX_SET_ENV
    extra = {k for k in extra if not k.startswith("LC_")}
    assert not extra, "variables outside the allowlist inside: %s" % sorted(extra)
    assert env.get("HOME") == ctx.home, "HOME inside %r, expected %r" % (env.get("HOME"), ctx.home)
    assert env.get("LC_ALL") == "C.UTF-8" and env.get("TZ") == "UTC", \
        "allowlisted variables did not pass: %s" % env
    assert env.get("TERM") == "xterm", env
    assert "PATH" in env and "/usr/bin" in env["PATH"].split(":"), env
    assert env.get("TMPDIR"), "TMPDIR not set inside"


def test_tmpdir_writable(ctx):
    out = ctx.sh_ok('f=$(mktemp) && echo ok > "$f" && cat "$f" && echo "$f"')
    assert out.splitlines()[0] == "ok", out
    assert not os.path.exists(out.splitlines()[1]), "mktemp file reached the host"


def test_extra_fds_closed(ctx):
    canary = os.path.join(ctx.home, ".ssh", "id_ed25519")
    f = os.open(canary, os.O_RDONLY)           # no O_CLOEXEC issue: pass_fds keeps them
    d = os.open(ctx.home, os.O_RDONLY | os.O_DIRECTORY)
    s1, s2 = socket.socketpair()
    fds = [f, d, s1.fileno()]
    try:
        for x in fds:
            os.set_inheritable(x, True)
        r = ctx.sandbox("ls /proc/self/fd; for x in /proc/self/fd/*; do readlink $x; done; "
                        "cat <&%d; ls <&%d; true" % (f, d), pass_fds=tuple(fds))
    finally:
        os.close(f)
        os.close(d)
        s1.close()
        s2.close()
    assert ctx.token not in r.stdout, "passed fd readable inside\n" + describe(r)
    lines = r.stdout.split("\n")
    fdnums = set()
    for l in lines:
        if re.fullmatch(r"\d+", l.strip()):
            fdnums.add(int(l))
    assert fdnums and fdnums <= {0, 1, 2, 3}, \
        "unexpected fds inside: %s (passed %s)\n%s" % (sorted(fdnums), fds, describe(r))
    for l in lines:
        assert ctx.home not in l and ".ssh" not in l, "an fd points into the host home: %s" % l
        assert "socket:" not in l, "a passed socket is visible inside: %s" % l


def test_hostname(ctx):
    out = ctx.sh_ok("cat /proc/sys/kernel/hostname")
    assert out.strip() == "agentbox", "hostname inside %r" % out.strip()


def test_rlimit_core_zero(ctx):
    out = ctx.sh_ok("ulimit -c")
    assert out.strip() == "0", "core limit inside %r" % out.strip()

