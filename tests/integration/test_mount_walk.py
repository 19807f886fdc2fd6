# SPDX-License-Identifier: MIT
"""The child reaches every mount target in the new root without following a
symlink (src/sandbox/mount_walk.c): the directory holding a target is opened
once in an openat2 with RESOLVE_NO_SYMLINKS and kept for the next targets,
the last component is opened O_NOFOLLOW.  A writable grant is the host's own
directory: a symlink planted in it before the run (by an earlier run, say)
must neither redirect a mount nor make a directory outside the grant.

filesystem.tmpfs inside the workspace is the target the planner does not
vet on the host (protected paths and masks are refused there already, see
test_fs.py::test_protected_parent_symlink_refused), so these runs reach the
child's walk itself."""

import json
import os

from abtest import describe


def _plant_link(ctx, target, link):
    os.symlink(target, link)
    if ctx.uid != 0:
        os.lchown(link, ctx.uid, ctx.gid)


def _mkdir(ctx, path, mode=None):
    os.makedirs(path, exist_ok=True)
    for dp, dns, _ in os.walk(path):
        if ctx.uid != 0:
            os.chown(dp, ctx.uid, ctx.gid)
        if mode is not None:
            os.chmod(dp, mode)


def _listing(top):
    out = []
    for dp, dns, fns in os.walk(top):
        out += [os.path.relpath(os.path.join(dp, n), top) for n in dns + fns]
    return sorted(out)


def _tmpfs_profile(ctx, name, paths):
    return ctx.host_file(os.path.join(ctx.scratch, name), json.dumps(
        {"version": 1, "extends": ["default"],
         "filesystem": {"tmpfs": ["${WORKSPACE}/" + p for p in paths]}}))


def _refused_untouched(ctx, r, outside, before, what):
    after = _listing(outside)
    assert after == before, "%s: the walk followed the link and made %s outside the grant" % (
        what, sorted(set(after) - set(before)))
    assert r.returncode == 125, "%s: the run was not refused\n%s" % (what, describe(r))
    assert "symbolic link" in r.stderr, "%s: refused for another reason\n%s" % (what, describe(r))


def test_tmpfs_target_below_planted_symlink(ctx):
    """A symlink as the target's parent, and one further up the way: the run
    is refused and nothing is made where the links point; the same targets
    through real directories work (so the refusal is the link's)."""
    # writable by anyone: a walk that followed a link could make its mount
    # point there, whichever uid it runs as
    outside = os.path.join(ctx.sibling, "lnk")
    _mkdir(ctx, os.path.join(outside, "b"))
    _mkdir(ctx, outside, 0o777)
    before = _listing(outside)
    cases = [("nm", outside, "nm/cache"),            # the parent is the link
             ("a", outside, "a/b/c"),                # a link further up
             ("dn", os.path.join(outside, "gone"), "dn/c")]  # a dangling one
    for link, target, dst in cases:
        _plant_link(ctx, target, os.path.join(ctx.ws, link))
        prof = _tmpfs_profile(ctx, link + ".json", [dst])
        r = ctx.sandbox("echo ran > %s/f" % dst, profile=prof)
        _refused_untouched(ctx, r, outside, before, dst)
        os.unlink(os.path.join(ctx.ws, link))
        _mkdir(ctx, os.path.join(ctx.ws, link))
        r = ctx.sandbox("echo ran > %s/f && cat %s/f" % (dst, dst), profile=prof)
        assert r.returncode == 0 and r.stdout.strip() == "ran", describe(r)
        assert _listing(os.path.join(ctx.ws, dst)) == [], "the tmpfs wrote to the host"


def test_symlink_after_a_kept_parent(ctx):
    """Two targets in one directory: the first opens and keeps it, the second,
    a planted symlink, is reached from the kept directory and still refused."""
    outside = os.path.join(ctx.sibling, "kept")
    _mkdir(ctx, outside, 0o777)
    before = _listing(outside)
    _mkdir(ctx, os.path.join(ctx.ws, "d", "x"))
    _plant_link(ctx, outside, os.path.join(ctx.ws, "d", "y"))
    prof = _tmpfs_profile(ctx, "kept.json", ["d/x", "d/y"])
    r = ctx.sandbox("echo ran > d/y/f", profile=prof)
    _refused_untouched(ctx, r, outside, before, "d/y")
    assert not os.path.exists(os.path.join(outside, "f")), "the command wrote through the link"


def test_kept_directory_dropped_once_covered(ctx):
    """The same mount tree as a fresh walk for every target: a tmpfs at
    p/x keeps p open (what the workspace bind shows there); fs.protect then
    mounts p again, read-only, so the mask of p/secret.txt must go into that
    new mount, not into the covered directory the kept fd still shows (where
    it would hide nothing)."""
    _mkdir(ctx, os.path.join(ctx.ws, "p"))
    ctx.host_file(os.path.join(ctx.ws, "p", "secret.txt"), "secret " + ctx.token + "\n")
    prof = ctx.host_file(os.path.join(ctx.scratch, "covered.json"), json.dumps(
        {"version": 1, "extends": ["default"],
         "filesystem": {"tmpfs": ["${WORKSPACE}/p/x"], "protect": ["${WORKSPACE}/p"],
                        "deny": ["${WORKSPACE}/p/secret.txt"]}}))
    r = ctx.sandbox("cat p/secret.txt; test -d p/x && echo x-there; "
                    "touch p/new 2>/dev/null && echo p-writable; true", profile=prof)
    assert r.returncode == 0, describe(r)
    assert ctx.token not in r.stdout, "the masked file was read inside\n" + describe(r)
    assert "x-there" in r.stdout and "p-writable" not in r.stdout, describe(r)
