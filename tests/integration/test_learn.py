# SPDX-License-Identifier: MIT
"""`agentbox run --learn FILE`: learn a draft profile from a run (docs/learn.md).

A loopback registry on the host (a small HTTP server this file starts) serves
an npm package (its metadata JSON and a .tgz built here) and a Python wheel
(a PEP 503 simple index), reached inside as "registry.test" through the base
profile's `network.hosts` mapping.  The base profile allows nothing, so:

- `npm install` under the base profile fails (the proxy refuses
  registry.test); `--learn` lets it through, and the draft it writes lets the
  same command pass under normal enforcement;
- `pip install -c CONSTRAINTS` with the constraints file in a host directory
  the sandbox does not show (under /tmp, a private tmpfs inside) fails at
  the file in the first learning round; the draft names that file; a second
  round on top of the first draft learns the registry; the second draft
  passes;
- each draft passes `agentbox check`, `explain` shows its descriptions, and
  the draft's grants beyond the base are exactly what was learned: no home
  directory, no secret path (the test home plants ~/.npmrc and ~/.ssh: the
  run says the .npmrc npm looked for was left out, and why).
"""

import base64
import hashlib
import http.server
import io
import json
import os
import tarfile
import threading
import zipfile

from abtest import describe

PKG_JS = "module.exports = 'tiny-ok';\n"


# ---------------------------------------------------------------- the registry

def _npm_tgz():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in (("package/package.json",
                            json.dumps({"name": "abtiny", "version": "1.0.0",
                                        "main": "index.js"}).encode()),
                           ("package/index.js", PKG_JS.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _wheel():
    files = {
        "abtinypy/__init__.py": b"VALUE = 'tinypy-ok'\n",
        "abtinypy-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: abtinypy\n"
                                           b"Version: 1.0\n",
        "abtinypy-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: abtest\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, h, len(data)))
    record.append("abtinypy-1.0.dist-info/RECORD,,")
    files["abtinypy-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


class Registry:
    """npm metadata + tarball and a PEP 503 index on 127.0.0.1:PORT."""

    def __init__(self):
        tgz, whl = _npm_tgz(), _wheel()
        whl_name = "abtinypy-1.0-py3-none-any.whl"
        meta = {
            "name": "abtiny",
            "dist-tags": {"latest": "1.0.0"},
            "versions": {"1.0.0": {
                "name": "abtiny", "version": "1.0.0", "main": "index.js",
                "dist": {
                    "tarball": "http://registry.test/abtiny/-/abtiny-1.0.0.tgz",
                    "shasum": hashlib.sha1(tgz).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(
                        hashlib.sha512(tgz).digest()).decode(),
                }}},
        }
        self.files = {
            "/abtiny": ("application/json", json.dumps(meta).encode()),
            "/abtiny/-/abtiny-1.0.0.tgz": ("application/octet-stream", tgz),
            "/simple/abtinypy/": ("text/html", (
                '<html><body><a href="/files/%s#sha256=%s">%s</a></body></html>' % (
                    whl_name, hashlib.sha256(whl).hexdigest(), whl_name)).encode()),
            "/files/" + whl_name: ("application/octet-stream", whl),
        }
        self.hits = []
        files, hits = self.files, self.hits

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path
                if path.startswith("http://"):  # absolute form, through a proxy
                    path = "/" + path.split("/", 3)[3]
                path = path.split("?")[0]
                hits.append(path)
                if path not in files:
                    self.send_error(404)
                    return
                ctype, body = files[path]
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def _setup(ctx):
    reg = Registry()
    ctx.on_cleanup(reg.close)
    base = os.path.join(ctx.scratch, "base.json")
    with open(base, "w") as f:
        json.dump({"version": 1, "extends": "default",
                   "network": {"hosts": {"registry.test": "127.0.0.1:%d" % reg.port}}}, f)
    os.chmod(base, 0o644)
    return reg, base


def _learn(ctx, base, draft, command, timeout=180):
    return ctx.sandbox(command, profile=base, extra_args=["--learn", draft], timeout=timeout)


def _load(path):
    with open(path) as f:
        return json.load(f)


def _explain(ctx, profile):
    r = ctx.run(["explain", "--json", "-p", profile, "-w", ctx.ws])
    assert r.returncode == 0, describe(r)
    return json.loads(r.stdout)


def _binds(plan):
    return {(m["kind"], m.get("src"), m["dst"]) for m in plan["mounts"]
            if m["kind"] in ("bind-ro", "bind-rw")}


def _check_draft(ctx, base, draft, want_read=(), want_write=(), want_allow=()):
    """The draft is a checked profile; explain shows it; its grants beyond the
    base are exactly the learned ones, and none is the home or a secret."""
    d = _load(draft)
    fs = d.get("filesystem", {})
    assert sorted(fs.get("read", [])) == sorted(want_read), json.dumps(d, indent=1)
    assert sorted(fs.get("write", [])) == sorted(want_write), json.dumps(d, indent=1)
    assert sorted(d.get("network", {}).get("allow", [])) == sorted(want_allow), \
        json.dumps(d, indent=1)
    for lst in ("filesystem.read", "filesystem.write", "network.allow"):
        for entry in (fs.get(lst.split(".")[1], []) if lst.startswith("filesystem")
                      else d.get("network", {}).get("allow", [])):
            assert entry in d["descriptions"][lst], (lst, entry, d["descriptions"])
    r = ctx.run(["check", draft])
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", describe(r)
    plan, bplan = _explain(ctx, draft), _explain(ctx, base)
    shown = plan["profile"]["descriptions"]  # merged: the profiles it extends add theirs
    for lst, entries in d.get("descriptions", {}).items():
        for entry, text in entries.items():
            assert shown.get(lst, {}).get(entry) == text, (lst, entry, plan["profile"])
    extra = _binds(plan) - _binds(bplan)
    granted = {m[2] for m in extra}
    want = {os.path.expanduser(p) if p.startswith("~") else p
            for p in list(want_read) + list(want_write)}
    want = {p.replace(os.path.expanduser("~"), ctx.home, 1) if p.startswith(
        os.path.expanduser("~")) else p for p in want}
    assert granted == want, "explain's grants beyond the base: %s, want %s" % (granted, want)
    for g in granted:
        assert not (ctx.home + "/").startswith(g.rstrip("/") + "/"), "home granted: %s" % g
        for secret in (".ssh", ".npmrc", ".aws", ".netrc", ".git-credentials"):
            assert secret not in g.split("/"), "secret path granted: %s" % g
    return d


# ---------------------------------------------------------------- npm

NPM_CMD = ["npm", "install", "--no-audit", "--no-fund", "--no-update-notifier",
           "--registry", "http://registry.test/", "abtiny"]
NPM_CHECK = "node -e \"console.log(require('abtiny'))\""


def _npm_ws(ctx):
    with open(os.path.join(ctx.ws, "package.json"), "w") as f:
        json.dump({"name": "ws", "version": "1.0.0", "private": True}, f)
    if ctx.uid != 0:
        os.chown(os.path.join(ctx.ws, "package.json"), ctx.uid, ctx.gid)


def test_learn_npm_install(ctx):
    """npm install: refused under the base; learned; the draft passes."""
    reg, base = _setup(ctx)
    _npm_ws(ctx)
    cmd = ["sh", "-c", " ".join(NPM_CMD) + " && " + NPM_CHECK]
    # the base profile alone: the proxy refuses registry.test (the test can fail)
    r = ctx.sandbox(cmd, profile=base, timeout=180)
    assert r.returncode != 0 and "tiny-ok" not in r.stdout, describe(r)
    assert not any(h.endswith(".tgz") for h in reg.hits), reg.hits
    draft = os.path.join(ctx.scratch, "npm.json")
    r = _learn(ctx, base, draft, cmd)
    assert r.returncode == 0 and "tiny-ok" in r.stdout, describe(r)
    assert "agentbox:   + network.allow registry.test:80" in r.stderr, describe(r)
    # npm looked for ~/.npmrc (the test home has one, with a token): left out
    assert "left out: %s/.npmrc: a secret or credentials path" % ctx.home in r.stderr, \
        describe(r)
    assert ctx.token not in open(draft).read()
    d = _check_draft(ctx, base, draft, want_allow=["registry.test:80"])
    # the program that connected to the proxy, from the supervisor's connect
    why = d["descriptions"]["network.allow"]["registry.test:80"]
    assert why.startswith("reached by /usr/bin/node"), why
    # the same command under normal enforcement with the draft
    for n in ("node_modules", "package-lock.json"):
        p = os.path.join(ctx.ws, n)
        if os.path.isdir(p):
            import shutil
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.unlink(p)
    r = ctx.sandbox(cmd, profile=draft, timeout=180)
    assert r.returncode == 0 and "tiny-ok" in r.stdout, describe(r)


# ---------------------------------------------------------------- pip

def test_learn_pip_install_two_rounds(ctx):
    """pip install with a constraints file the sandbox does not show: round 1
    learns the file, round 2 (on the first draft) the registry; the second
    draft passes, the first alone does not."""
    reg, base = _setup(ctx)
    cons_dir = os.path.join(ctx.scratch, "pipcfg")
    os.makedirs(cons_dir, exist_ok=True)
    cons = os.path.join(cons_dir, "constraints.txt")
    with open(cons, "w") as f:
        f.write("abtinypy==1.0\n")
    os.chmod(cons_dir, 0o755)
    os.chmod(cons, 0o644)
    cmd = ["sh", "-c",
           "python3 -m pip install --disable-pip-version-check --no-cache-dir "
           "--no-input --target ./site --index-url http://registry.test/simple/ "
           "--trusted-host registry.test -c %s abtinypy && "
           "PYTHONPATH=./site python3 -c 'import abtinypy; print(abtinypy.VALUE)'" % cons]
    d1 = os.path.join(ctx.scratch, "pip1.json")
    r = _learn(ctx, base, d1, cmd)
    assert r.returncode != 0, describe(r)  # the constraints file is not there
    assert "agentbox:   + filesystem.read %s" % cons in r.stderr, describe(r)
    _check_draft(ctx, base, d1, want_read=[cons])
    d2 = os.path.join(ctx.scratch, "pip2.json")
    r = _learn(ctx, d1, d2, cmd)
    assert r.returncode == 0 and "tinypy-ok" in r.stdout, describe(r)
    assert _load(d2)["extends"] == [d1], _load(d2)
    why = _check_draft(ctx, d1, d2, want_allow=["registry.test:80"])[
        "descriptions"]["network.allow"]["registry.test:80"]
    assert why.startswith("reached by /usr/bin/python3"), why
    import shutil
    shutil.rmtree(os.path.join(ctx.ws, "site"), ignore_errors=True)
    r = ctx.sandbox(cmd, profile=d1, timeout=180)  # the first draft alone: refused
    assert r.returncode != 0 and "tinypy-ok" not in r.stdout, describe(r)
    shutil.rmtree(os.path.join(ctx.ws, "site"), ignore_errors=True)
    r = ctx.sandbox(cmd, profile=d2, timeout=180)
    assert r.returncode == 0 and "tinypy-ok" in r.stdout, describe(r)


# ---------------------------------------------------------------- edges

def test_learn_refuses_secret_and_home(ctx):
    """A command that reads the planted secrets and writes next to the home:
    the draft has none of it, and says why."""
    reg, base = _setup(ctx)
    draft = os.path.join(ctx.scratch, "sec.json")
    r = _learn(ctx, base, draft,
               "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.bashrc; "
               "echo x > ~/.bashrc.new; mkdir -p %s/newdir/sub; true" % ctx.home)
    assert r.returncode == 0, describe(r)
    d = _load(draft)
    assert "filesystem" not in d and "network" not in d, json.dumps(d, indent=1)
    for needle in ("/.ssh/id_ed25519: a secret or credentials path",
                   "/.aws/credentials: a secret or credentials path"):
        assert needle in r.stderr, describe(r)
    assert ctx.token not in r.stderr and ctx.token not in open(draft).read()


def test_learn_keeps_setuid_modes_refused(ctx):
    """The learning record's notification replaces the filter's set-user-ID
    mode rules for open/openat/creat/mkdir(at); the supervisor refuses those
    modes itself (EPERM), so a learning run is no weaker there."""
    reg, base = _setup(ctx)
    draft = os.path.join(ctx.scratch, "suid.json")
    code = ("import os, errno\n"
            "def t(f):\n"
            "    try:\n"
            "        f(); return 'ok'\n"
            "    except OSError as e:\n"
            "        return errno.errorcode[e.errno]\n"
            "print(t(lambda: os.open('s1', os.O_CREAT | os.O_WRONLY, 0o4755)),\n"
            "      t(lambda: os.mkdir('s2', 0o2755)),\n"
            "      t(lambda: os.open('plain', os.O_CREAT | os.O_WRONLY, 0o644)))\n")
    r = ctx.sandbox(["/usr/bin/python3", "-c", code], profile=base,
                    extra_args=["--learn", draft])
    assert r.returncode == 0 and r.stdout.split() == ["EPERM", "EPERM", "ok"], describe(r)
    assert not os.path.exists(os.path.join(ctx.ws, "s1"))


def test_learn_cli_errors(ctx):
    """--learn needs a file it can write, before anything runs; only run takes it."""
    r = ctx.run(["run", "--learn", "/nonexistent-dir/x.json", "--", "true"])
    assert r.returncode == 125 and "run --learn: create /nonexistent-dir/x.json" in r.stderr, \
        describe(r)
    r = ctx.run(["explain", "--learn", "x.json"])
    assert r.returncode == 125 and "unknown option '--learn'" in r.stderr, describe(r)
