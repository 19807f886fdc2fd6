# SPDX-License-Identifier: MIT
"""Exit status contract: the command's own, 128+N, 125/126/127."""

import os

from abtest import describe


def test_true(ctx):
    r = ctx.sandbox(["true"])
    assert r.returncode == 0, describe(r)


def test_exit_7(ctx):
    r = ctx.sandbox("exit 7")
    assert r.returncode == 7, describe(r)


def test_exit_255(ctx):
    r = ctx.sandbox("exit 255")
    assert r.returncode == 255, describe(r)


def test_stdio_passthrough(ctx):
    r = ctx.sandbox("cat; echo err >&2", input="hello from stdin\n")
    assert r.returncode == 0, describe(r)
    assert r.stdout == "hello from stdin\n", describe(r)
    assert "err" in r.stderr, describe(r)


def test_not_found_127(ctx):
    r = ctx.sandbox(["no-such-command-abit"])
    assert r.returncode == 127, describe(r)
    assert "no-such-command-abit" in r.stderr, "no message naming the command\n" + describe(r)
    r = ctx.sandbox(["/nonexistent/abit"])
    assert r.returncode == 127, describe(r)


def test_not_executable_126(ctx):
    ctx.host_file(os.path.join(ctx.ws, "notexec"), "#!/bin/sh\necho hi\n", 0o644)
    r = ctx.sandbox([os.path.join(ctx.ws, "notexec")])
    assert r.returncode == 126, describe(r)
    assert "notexec" in r.stderr, describe(r)
    r = ctx.sandbox(["./notexec"])
    assert r.returncode == 126, describe(r)


def test_directory_126(ctx):
    r = ctx.sandbox(["/usr"])
    assert r.returncode == 126, describe(r)


def test_killed_by_signal(ctx):
    r = ctx.sandbox("kill -9 $$")
    assert r.returncode == 137, describe(r)
    r = ctx.sandbox("kill -TERM $$")
    assert r.returncode == 143, describe(r)
    r = ctx.sandbox("kill -SEGV $$")
    assert r.returncode == 139, describe(r)


def test_invalid_profile_125(ctx):
    bad = ctx.host_file(os.path.join(ctx.scratch, "bad.json"),
                        '{\n  "version": 1,\n    "no_such_key": true\n}\n')
    r = ctx.run(["run", "-p", bad, "-w", ctx.ws, "--", "true"])
    assert r.returncode == 125, describe(r)
    assert "%s:3:5:" % bad in r.stderr, describe(r)


def test_unknown_profile_125(ctx):
    r = ctx.run(["run", "-p", "no-such-profile-abit", "--", "true"])
    assert r.returncode == 125, describe(r)
    assert "no-such-profile-abit" in r.stderr, describe(r)


def test_missing_workspace_125(ctx):
    r = ctx.run(["run", "-w", os.path.join(ctx.scratch, "absent"), "--", "true"])
    assert r.returncode == 125, describe(r)
    assert r.stderr.strip(), describe(r)


def test_default_workspace_is_cwd(ctx):
    r = ctx.run(["run", "--", "sh", "-c", "pwd; echo x > from-cwd"], cwd=ctx.ws)
    assert r.returncode == 0, describe(r)
    assert r.stdout.strip() == ctx.ws, describe(r)
    assert os.path.exists(os.path.join(ctx.ws, "from-cwd"))


def test_command_args_verbatim(ctx):
    args = ["a b", "", "$HOME", "*", "--", "-p", "ü"]
    r = ctx.sandbox(["printf", "[%s]\\n"] + args)
    assert r.returncode == 0, describe(r)
    assert r.stdout == "".join("[%s]\n" % a for a in args), describe(r)
