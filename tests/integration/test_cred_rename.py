# SPDX-License-Identifier: MIT
"""Saving a rendered credentials file by renaming a new one over it.

A rendered credentials file (docs/credentials.md, "render") is a mount point
inside, so rename(2) onto it fails with EBUSY in the kernel.  With a rendered
file in the plan, every rename notifies agentbox's supervisor
(src/observe/supervise.c): one onto the rendered file is carried out there (the new
file's bytes copied into the rendered copy, the new file removed), when the
new file is the sandbox's own (a regular file with one link, owned by the
sandbox, made during the run, in the same directory); anything else onto it
is left to the kernel, which refuses it as before (EBUSY), and so is every
other rename.

The profile here renders ~/.tool/creds.json (a json secret bound to a host no
test connects to); python3 inside plays the harness.
"""

import json
import os

from abtest import INNER_PY, describe
from upstream import read_log

PROFILE = {
    "version": 1, "extends": "default",
    "filesystem": {"write": ["~/.tool"], "deny": ["~/.tool/creds.json"]},
    "network": {"allow": ["tool.example.test"]},
    "secrets": {"TOOL_TOKEN": {
        "from": {"json": "~/.tool/creds.json", "pointer": "/token"}, "render": True,
        "env": False, "hosts": ["tool.example.test"], "in": ["header:authorization"]}},
}

# the harness's save: a new file next to the credentials file, renamed over it
SAVE = r"""
import errno, json, os
p = os.path.expanduser("~/.tool/creds.json")
d = os.path.dirname(p)
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
out = {"before": json.load(open(p))}
doc = dict(out["before"], saved=1)
tmp = os.path.join(d, ".creds.json.tmp-%d" % os.getpid())
with open(tmp, "w") as f:
    json.dump(doc, f)
out["rename"] = err(lambda: os.rename(tmp, p))
out["after"] = json.load(open(p))
out["tmp_left"] = os.path.exists(tmp)
# relative to a directory fd (renameat), the new file's name relative too
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
with open(os.path.join(d, "again"), "w") as f:
    json.dump(dict(doc, saved=2), f)
out["renameat"] = err(lambda: os.rename("again", "creds.json", src_dir_fd=fd, dst_dir_fd=fd))
out["after2"] = json.load(open(p))
out["again_left"] = os.path.exists(os.path.join(d, "again"))
# the cwd and a "." on the way
os.chdir(d)
with open("third", "w") as f:
    json.dump(dict(doc, saved=3), f)
os.mkdir("sub")
out["relative"] = err(lambda: os.rename("./third", "./sub/../creds.json"))
os.rmdir("sub")
out["after3"] = json.load(open(p))
print(json.dumps(out))
"""

REFUSED = r"""
import ctypes, errno, json, os
p = os.path.expanduser("~/.tool/creds.json")
d = os.path.dirname(p)
def err(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
def new(name, data='{"x": 1}'):
    q = os.path.join(d, name)
    with open(q, "w") as f:
        f.write(data)
    return q
before = open(p).read()
out = {}
# a file that is not the sandbox's (planted on the host, owned by another uid)
out["foreign"] = err(lambda: os.rename(os.path.join(d, "foreign"), p))
# one the sandbox's user made before this run
out["old"] = err(lambda: os.rename(os.path.join(d, "old"), p))
# a symlink to a file the sandbox may read
os.symlink(new("target"), os.path.join(d, "link"))
out["symlink"] = err(lambda: os.rename(os.path.join(d, "link"), p))
# a file with a second link
os.link(new("linked"), os.path.join(d, "linked2"))
out["hardlink"] = err(lambda: os.rename(os.path.join(d, "linked"), p))
# a file in another directory (below, and in the workspace)
os.makedirs(os.path.join(d, "sub"), exist_ok=True)
out["subdir"] = err(lambda: os.rename(new("sub/x"), p))
with open("ws-file", "w") as f:
    f.write("{}")
out["workspace"] = err(lambda: os.rename("ws-file", p))
# through a symlinked directory
os.symlink(d, os.path.join(d, "dirlink"))
new("viadir")
out["via_symlink_dir"] = err(lambda: os.rename(os.path.join(d, "dirlink", "viadir"), p))
# too large, a FIFO (must not block), a directory
out["large"] = err(lambda: os.rename(new("large", "x" * (64 * 1024 + 1)), p))
os.mkfifo(os.path.join(d, "fifo"))
out["fifo"] = err(lambda: os.rename(os.path.join(d, "fifo"), p))
os.mkdir(os.path.join(d, "adir"))
out["dir"] = err(lambda: os.rename(os.path.join(d, "adir"), p))
out["missing"] = err(lambda: os.rename(os.path.join(d, "missing"), p))
# renameat2 with flags: the kernel's answer (RENAME_NOREPLACE: it exists)
libc = ctypes.CDLL(None, use_errno=True)
def renameat2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
out["noreplace"] = err(lambda: renameat2(new("nr"), p, 1))
out["exchange"] = err(lambda: renameat2(new("ex"), p, 2))
# the rendered file itself, away
out["away"] = err(lambda: os.rename(p, os.path.join(d, "stolen")))
out["unchanged"] = open(p).read() == before
out["left"] = sorted(os.listdir(d))
# ordinary renames: untouched
new("a")
out["plain"] = err(lambda: os.rename(os.path.join(d, "a"), os.path.join(d, "b")))
with open("creds.json", "w") as f:   # the same name, another directory
    f.write("ws")
with open("n", "w") as f:
    f.write("n")
out["same_name_elsewhere"] = err(lambda: os.rename("n", "creds.json"))
out["ws_content"] = open("creds.json").read()
print(json.dumps(out))
"""


class Lab:
    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = os.path.join(ctx.home, ".tool")
        os.makedirs(self.dir, exist_ok=True)
        if ctx.uid != 0:
            os.chown(self.dir, ctx.uid, ctx.gid)
        self.real = "real-" + ctx.token
        self.file = ctx.host_file(os.path.join(self.dir, "creds.json"),
                                  json.dumps({"token": self.real, "other": 1}), 0o600)
        self.profile = ctx.host_file(os.path.join(ctx.scratch, "tool.json"),
                                     json.dumps(PROFILE))
        self.log = os.path.join(ctx.scratch, "audit.jsonl")

    def run(self, argv):
        return self.ctx.run(["run", "-p", self.profile, "-w", self.ctx.ws, "--log", self.log,
                             "--"] + argv)

    def events(self, name):
        entries, _ = read_log(self.log, self.ctx)
        return [e for e in entries if e.get("event") == name]


def test_rename_onto_rendered(ctx):
    """write-temp-then-rename over the rendered file: done; the new content is
    what the sandbox reads, the temporary file is gone, the host file and its
    real value untouched, the audit log says credentials-saved (no content)."""
    lab = Lab(ctx)
    before = open(lab.file).read()
    r = lab.run([INNER_PY, "-c", SAVE])
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert lab.real not in r.stdout
    ph = out["before"]["token"]
    assert ph != lab.real and out["before"]["other"] == 1
    assert out["rename"] == "ok" and out["after"] == dict(out["before"], saved=1), out
    assert not out["tmp_left"], "the temporary file is still there"
    assert out["renameat"] == "ok" and out["after2"]["saved"] == 2 and not out["again_left"], out
    assert out["relative"] == "ok" and out["after3"]["saved"] == 3, out
    assert open(lab.file).read() == before, "the host file changed"
    assert sorted(os.listdir(lab.dir)) == ["creds.json"], os.listdir(lab.dir)
    saved = lab.events("credentials-saved")
    assert [e["path"] for e in saved] == [lab.file] * 3, saved
    assert not lab.events("credentials-refused")
    with open(lab.log) as f:
        log = f.read()
    assert ph not in log and lab.real not in log, "content of the file in the audit log"


def test_rename_onto_rendered_refused(ctx):
    """Anything but the sandbox's own new file in the same directory is left to
    the kernel: EBUSY as before (or its earlier answer: ENOENT, ENOTDIR,
    EXDEV), nothing changes; renameat2 flags get the kernel's answer; other
    renames are the kernel's."""
    lab = Lab(ctx)
    # made by the sandbox's user in an earlier run: not this sandbox's
    r = lab.run(["sh", "-c", 'echo "{}" > ~/.tool/old'])
    assert r.returncode == 0, describe(r)
    foreign = os.path.join(lab.dir, "foreign")
    with open(foreign, "w") as f:
        f.write('{"foreign": 1}')
    os.chown(foreign, 4242, 4242)
    r = lab.run([INNER_PY, "-c", REFUSED])
    assert r.returncode == 0, describe(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # (as root, the idmapped home does not map uid 4242: the kernel says so first)
    assert out["foreign"] == ("EOVERFLOW" if ctx.uid == 0 else "EBUSY"), out
    for k in ("old", "symlink", "hardlink", "subdir", "via_symlink_dir", "large",
              "fifo", "away"):
        assert out[k] == "EBUSY", (k, out)
    # the kernel's own answers come first there
    assert out["missing"] == "ENOENT" and out["dir"] == "ENOTDIR", out
    assert out["workspace"] == "EXDEV", out
    assert out["noreplace"] == "EEXIST" and out["exchange"] == "EBUSY", out
    assert out["unchanged"], out
    for name in ("foreign", "old", "link", "linked", "linked2", "large", "fifo", "adir",
                 "target", "viadir", "nr", "ex"):
        assert name in out["left"], (name, out["left"])
    assert out["plain"] == "ok" and out["same_name_elsewhere"] == "ok", out
    assert out["ws_content"] == "n"
    assert os.path.exists(foreign) and os.stat(foreign).st_uid == 4242
    assert not lab.events("credentials-saved")
    reasons = {e["reason"] for e in lab.events("credentials-refused")}
    if ctx.uid != 0:
        # (as root on a root-owned workspace the sandbox's uid is nobody, which
        # is also how a uid the idmapped home does not map looks: its birth
        # time refuses it)
        assert "the new file is not the sandbox's" in reasons, reasons
    assert "the new file is older than the sandbox" in reasons, reasons
    assert "the new file has other links" in reasons, reasons
    assert "the new file is in another directory" in reasons, reasons


def test_rename_notify_only_with_render(ctx):
    """Renames notify only when the plan has a rendered file (explain says
    so); without one they are the kernel's alone, and work as usual."""
    lab = Lab(ctx)
    r = ctx.run(["explain", "-p", lab.profile, "-w", ctx.ws])
    assert r.returncode == 0 and "  renames: to agentbox" in r.stdout, describe(r)
    r = ctx.run(["explain", "-p", "default", "-w", ctx.ws])
    assert r.returncode == 0 and "renames:" not in r.stdout, describe(r)
    r = ctx.sandbox("echo a > a && mv a b && cat b", profile="default")
    assert r.returncode == 0 and r.stdout.strip() == "a", describe(r)
