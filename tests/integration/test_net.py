# SPDX-License-Identifier: MIT
"""Network: only lo inside, no route out, host loopback and sockets unreachable, no DNS."""

import json
import os
import socket
import subprocess

from abtest import INNER_PY, Listener, describe

CONNECT_PY = r'''
import errno, json, socket, sys
out = {}
for spec in sys.argv[1:]:
    fam, host, port = spec.split("|")
    if fam == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        addr = host.replace("@", "\0", 1) if host.startswith("@") else host
    else:
        s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET, socket.SOCK_STREAM)
        addr = (host, int(port))
    s.settimeout(5)
    try:
        s.connect(addr)
        out[spec] = "CONNECTED"
    except socket.timeout:
        out[spec] = "TIMEOUT"
    except OSError as e:
        out[spec] = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
print(json.dumps(out))
'''

REFUSED = {"ENETUNREACH", "ECONNREFUSED", "EACCES", "EPERM", "EHOSTUNREACH", "EADDRNOTAVAIL",
           "ENOENT", "EAFNOSUPPORT"}


def _host_addrs():
    r = subprocess.run(["ip", "-o", "addr", "show", "scope", "global"], stdout=subprocess.PIPE,
                       text=True)
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) > 3 and f[2] in ("inet", "inet6"):
            out.append(("4" if f[2] == "inet" else "6", f[3].split("/")[0]))
    return out


def _connect_inside(ctx, specs):
    r = ctx.sandbox([INNER_PY, "-c", CONNECT_PY] + specs, timeout=60)
    assert r.returncode == 0, describe(r)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_only_lo(ctx):
    out = ctx.py_json("import json, socket; print(json.dumps([n for _, n in socket.if_nameindex()]))")
    assert out == ["lo"], "interfaces inside: %s" % out
    r = ctx.sandbox("ip -o link")
    if r.returncode == 0:
        names = [l.split(":")[1].strip() for l in r.stdout.splitlines() if ":" in l]
        assert names == ["lo"], describe(r)


def test_no_egress_and_no_host_loopback(ctx):
    l4 = Listener(socket.AF_INET, ("0.0.0.0", 0))
    ctx.on_cleanup(l4.close)
    port = l4.port
    l6 = None
    try:
        l6 = Listener(socket.AF_INET6, ("::", port))
        ctx.on_cleanup(l6.close)
    except OSError:
        pass
    specs = ["4|127.0.0.1|%d" % port, "4|0.0.0.0|%d" % port, "4|1.1.1.1|80", "4|8.8.8.8|53",
             "4|169.254.169.254|80", "6|::1|%d" % port, "6|2606:4700:4700::1111|443"]
    for fam, a in _host_addrs():
        specs.append("%s|%s|%d" % (fam, a, port))
    res = _connect_inside(ctx, specs)
    for spec, outcome in res.items():
        assert outcome in REFUSED, "connect %s from inside: %s (all: %s)" % (spec, outcome, res)
    hits = l4.count() + (l6.count() if l6 else 0)
    assert hits == 0, "the host listener accepted %d connection(s) from inside" % hits


def test_host_unix_sockets_unreachable(ctx):
    # a fake ssh-agent at $SSH_AUTH_SOCK and an abstract socket on the host
    agent = Listener(socket.AF_UNIX, os.path.join(ctx.tbase, "agent.sock"))
    ctx.on_cleanup(agent.close)
    abstract_name = "abit-" + ctx.token[-12:]
    abst = Listener(socket.AF_UNIX, "\0" + abstract_name)
    ctx.on_cleanup(abst.close)
    os.chmod(os.path.join(ctx.tbase, "agent.sock"), 0o777)
    res = _connect_inside(ctx, ["unix|%s|0" % os.path.join(ctx.tbase, "agent.sock"),
                                "unix|@%s|0" % abstract_name,
                                "unix|/run/dbus/system_bus_socket|0",
                                "unix|/var/run/docker.sock|0"])
    for spec, outcome in res.items():
        assert outcome in REFUSED, "connect %s from inside: %s" % (spec, outcome)
    assert agent.count() == 0 and abst.count() == 0, "a host unix socket was reached"


def test_no_dns(ctx):
    r = ctx.sandbox("getent hosts example.com")
    assert r.returncode != 0, "name resolution worked inside\n" + describe(r)
    out = ctx.py_json(
        "import json, socket\n"
        "try:\n socket.getaddrinfo('example.com', 443); print(json.dumps('RESOLVED'))\n"
        "except OSError as e: print(json.dumps(str(e)))\n", timeout=60)
    assert out != "RESOLVED", "getaddrinfo resolved example.com inside"


LOOPBACK_PY = (
    "import json, socket\n"
    "s = socket.socket(); s.bind(('127.0.0.1', PORT)); s.listen(1)\n"
    "c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept()\n"
    "c.sendall(b'ping'); print(json.dumps(a.recv(4).decode()))\n")


def test_loopback_ports_denied_by_default(ctx):
    """Listening is allowed; connecting to an unlisted loopback port is not
    (Landlock TCP connect rules), even to the sandbox's own server."""
    out = ctx.py_json(
        "import errno, json, socket\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "try:\n socket.create_connection(s.getsockname(), timeout=5); print(json.dumps('CONNECTED'))\n"
        "except OSError as e: print(json.dumps(errno.errorcode[e.errno]))\n")
    assert out in ("EACCES", "EPERM"), "connecting to a loopback port inside gave %s" % out


def test_loopback_inside_works_when_granted(ctx):
    """Positive control: the sandbox's own lo is up and usable when the profile
    grants loopback ports (Landlock TCP rules), and still isolated from the host."""
    for grant, port in (('"any"', 0), ("[47123]", 47123)):
        prof = ctx.host_file(os.path.join(ctx.scratch, "lo.json"),
                             '{"version": 1, "extends": "default", "network": {"loopback_ports": %s}}\n' % grant)
        r = ctx.sandbox([INNER_PY, "-c", LOOPBACK_PY.replace("PORT", str(port))], profile=prof)
        assert r.returncode == 0 and '"ping"' in r.stdout, describe(r)
