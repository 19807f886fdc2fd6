# SPDX-License-Identifier: MIT
"""Runnable documentation: the examples of README.md, docs/*.md, agentbox(1)
and agentbox-profile(5) print what the docs show and exit as they say.

Every example is marked, so that a new one cannot land unchecked (the
convention is in README.md, "Examples in the docs are tests"):

Markdown: an ```sh block says in its info string either
    doc-run [exit=N] [unprivileged]      run it here; default exit status 0;
                                         unprivileged: what root gets differs
                                         (the root variant lists it as skipped)
    doc-skip=REASON                      REASON is one of SKIP_REASONS, or
                                         tested:TEST_NAME (a test in
                                         tests/integration runs it)
A doc-run block whose lines start with "$ " is a transcript: each "$ "
line is a command (a line ending in "\\" continues it) and the lines up to
the next "$ " are its output.  Any other doc-run block is one script; its
output is the ```output (or bare ```) block that follows it, with only blank
lines between; without one, only the exit status is checked.
"<!-- doc-setup: SHELL -->" lines right above the fence run first (not
shown to the reader; they prepare files the example needs).

man pages: the roff comment lines right above .EX carry the same words
(.\\" doc-run, .\\" doc-skip=REASON, .\\" doc-setup: SHELL); the block is a
transcript ("$ " lines, the rest output; roff escapes are read as man shows
them).

Each example runs as the test's user with `sh -c` in a fresh empty
workspace (the current directory), HOME the test's fake home, agentbox on
PATH (this build), stdin /dev/null, stdout and stderr on one pipe.  Its
output is normalised (NORMALISATION), then compared with the documented
output, where "..." inside a line stands for any text and a line that is
just "..." for any number of lines.
"""

import glob
import os
import re
import subprocess

import abtest
from abtest import HOST_PATH, fmt_cmd

DOC_HOME = "/home/you"
DOC_WORKSPACE = "/home/you/project"
DOC_UID = 1000

SKIP_REASONS = {
    "network": "needs the internet (a package registry, a model API)",
    "login": "needs an account or an API key of a third party",
    "root": "needs root or host setup the test user does not have",
    "interactive": "needs a person at the terminal",
    "build": "a make target of the source tree (deps, the test suite, benchmarks)",
    "engine": "needs a container engine (podman, Docker, Kubernetes); make check-containers "
              "runs the engine examples it can",
    "illustration": "not a command to run as it stands (placeholders, a program the "
                    "reader has)",
}

# Done to the output before it is compared, in this order; nothing else.
NORMALISATION = (
    "the example's workspace -> " + DOC_WORKSPACE,
    "the fake home -> " + DOC_HOME,
    "'uid N' of the unprivileged test user -> 'uid %d'" % DOC_UID,
    "trailing blanks of each line and trailing empty lines removed",
)

SH_LIKE = ("console", "shell", "bash", "zsh", "shell-session", "sh-session")
ROFF_ESCAPES = {r"\-": "-", r"\(aq": "'", r"\(ti": "~", r"\(dq": '"', r"\&": "",
                r"\e": "\\", r"\(em": "\u2014", r"\(en": "\u2013", r"\(ha": "^",
                r"\(rs": "\\", r"\ ": " "}
TIMEOUT = 30


class Example:
    def __init__(self, path, line, text, setup):
        self.path = path          # relative to the source tree
        self.line = line          # of the fence or the .EX
        self.text = text          # the block as written
        self.setup = setup        # shell lines, or ""
        self.commands = None      # [(command, expected output or None)]
        self.output_line = None   # where a separate output block starts
        self.run = False
        self.exit = 0
        self.unprivileged = False
        self.skip = None

    def where(self):
        return "%s:%d" % (self.path, self.line)


def _srcdir():
    return abtest.SRCDIR or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


def doc_files(src):
    md = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    man = [os.path.join(src, "man", "agentbox.1"), os.path.join(src, "man", "agentbox-profile.5")]
    return md, man


def _transcript(lines):
    """[(command, output lines)] of a block whose commands start with "$ "."""
    out = []
    cmd = None
    cont = False
    for ln in lines:
        if cont:
            cmd.append(ln)
            cont = ln.endswith("\\")
        elif ln.startswith("$ "):
            cmd = [ln[2:]]
            cont = ln.endswith("\\")
            out.append((cmd, []))
        elif out:
            out[-1][1].append(ln)
        else:
            return None  # output before any command: not a transcript
    return [("\n".join(c), "\n".join(o)) for c, o in out]


def _apply_marks(ex, words, problems):
    for w in words:
        if w == "doc-run":
            ex.run = True
        elif w.startswith("doc-skip="):
            ex.skip = w[len("doc-skip="):]
            if ex.skip.startswith("tested:"):
                continue
            if ex.skip not in SKIP_REASONS:
                problems.append("%s: doc-skip=%s: the reason is one of %s or tested:TEST_NAME"
                                % (ex.where(), ex.skip, ", ".join(sorted(SKIP_REASONS))))
        elif re.fullmatch(r"exit=\d+", w):
            ex.exit = int(w[5:])
        elif w == "unprivileged":
            ex.unprivileged = True
        else:
            problems.append("%s: unknown word %r in the example's marks" % (ex.where(), w))
    if ex.run == bool(ex.skip):
        problems.append("%s: unmarked example: mark it doc-run or doc-skip=REASON "
                        "(README.md, \"Examples in the docs are tests\")\n%s"
                        % (ex.where(), _indent(ex.text)))
    elif ex.skip and (ex.exit or ex.unprivileged):
        problems.append("%s: exit= and unprivileged belong to doc-run" % ex.where())


FENCE = re.compile(r"^( *)(`{3,}|~{3,})[ \t]*([^`\s]*)(.*)$")


def parse_markdown(path, rel, problems):
    with open(path) as f:
        lines = f.read().split("\n")
    blocks = []  # (line, lang, words, body lines, setup lines, line after)
    stray = {n for n, l in enumerate(lines) if re.match(r" *<!-- *doc-", l)}
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = len(m.group(1)), m.group(2), m.group(3), m.group(4).split()
        j = i + 1
        close = re.compile(r"^ *%s%s* *$" % (re.escape(fence), re.escape(fence[0])))
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = [l[indent:] if l[:indent].strip() == "" else l for l in lines[i + 1:j]]
        setup = []
        k = i - 1
        while k >= 0 and re.match(r"^ *<!-- doc-setup: .* -->$", lines[k]):
            setup.insert(0, re.match(r"^ *<!-- doc-setup: (.*) -->$", lines[k]).group(1))
            stray.discard(k)
            k -= 1
        blocks.append((i + 1, lang, rest, body, setup, j + 1))
        i = j + 1
    for k in sorted(stray):
        problems.append("%s:%d: a doc- comment that is not \"<!-- doc-setup: SHELL -->\" "
                        "right above a fence" % (rel, k + 1))
    examples = []
    prev_run = None  # a doc-run script block still waiting for its output block
    prev_end = -1
    for line, lang, words, body, setup, end in blocks:
        between_blank = prev_run is not None and all(
            not l.strip() for l in lines[prev_end:line - 1])
        if lang in ("output", "") and prev_run is not None and between_blank and not words:
            prev_run.commands[0] = (prev_run.commands[0][0], "\n".join(body))
            prev_run.output_line = line
            prev_run = None
            continue
        prev_run = None
        if lang == "output":
            problems.append("%s:%d: an output block that does not follow a doc-run sh "
                            "block (only blank lines between)" % (rel, line))
            continue
        if lang in SH_LIKE:
            problems.append("%s:%d: a ```%s block: label shell examples ```sh and mark them"
                            % (rel, line, lang))
            continue
        if lang == "" and any(l.startswith("$ ") for l in body):
            problems.append("%s:%d: a transcript (\"$ \" lines) in a bare ``` block: make it "
                            "```sh and mark it" % (rel, line))
            continue
        if lang != "sh":
            continue
        text = "\n".join(body)
        ex = Example(rel, line, text, "\n".join(setup))
        _apply_marks(ex, words, problems)
        if any(l.startswith("$ ") for l in body):
            ex.commands = _transcript(body)
            if ex.commands is None:
                problems.append("%s: lines before the first \"$ \" command" % ex.where())
                continue
        else:
            ex.commands = [(text, None)]
            if ex.run:
                prev_run, prev_end = ex, end
        examples.append(ex)
    return examples


def roff_text(line, where, problems):
    """The line as man shows it (the escapes examples use; any other is refused)."""
    def one(m):
        if m.group(0) in ROFF_ESCAPES:
            return ROFF_ESCAPES[m.group(0)]
        problems.append("%s: roff escape %s in an example: add it to ROFF_ESCAPES in "
                        "tests/integration/test_docs.py" % (where, m.group(0)))
        return m.group(0)
    return re.sub(r"\\(\(..|.)", one, line)


def parse_man(path, rel, problems):
    with open(path) as f:
        lines = f.read().split("\n")
    examples = []
    stray = {n for n, l in enumerate(lines) if re.match(r'\.\\" *doc-', l)}
    i = 0
    while i < len(lines):
        if lines[i].strip() != ".EX":
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != ".EE":
            j += 1
        words, setup = [], []
        k = i - 1
        while k >= 0 and lines[k].startswith('.\\"'):
            c = lines[k][3:].strip()
            if c.startswith("doc-setup:"):
                setup.insert(0, c[len("doc-setup:"):].strip())
            elif c.startswith("doc-"):
                words = c.split() + words
            stray.discard(k)
            k -= 1
        where = "%s:%d" % (rel, i + 1)
        body = [roff_text(l, "%s:%d" % (rel, i + 2 + n), problems)
                for n, l in enumerate(lines[i + 1:j])]
        ex = Example(rel, i + 1, "\n".join(lines[i + 1:j]), "\n".join(setup))
        _apply_marks(ex, words, problems)
        ex.commands = _transcript(body)
        if ex.run and not ex.commands:
            problems.append("%s: a doc-run .EX block needs \"$ \" command lines" % where)
        examples.append(ex)
        i = j + 1
    for k in sorted(stray):
        problems.append("%s:%d: a doc- comment that is not right above an .EX" % (rel, k + 1))
    return examples


def all_examples():
    src = _srcdir()
    md, man = doc_files(src)
    problems, examples = [], []
    for p in md:
        examples += parse_markdown(p, os.path.relpath(p, src), problems)
    for p in man:
        examples += parse_man(p, os.path.relpath(p, src), problems)
    known_tests = set()
    for p in glob.glob(os.path.join(src, "tests", "integration", "test_*.py")):
        with open(p) as f:
            known_tests |= set(re.findall(r"^def (test_\w+)\(", f.read(), re.M))
    for ex in examples:
        if ex.skip and ex.skip.startswith("tested:") and ex.skip[7:] not in known_tests:
            problems.append("%s: doc-skip=%s: no such test in tests/integration"
                            % (ex.where(), ex.skip))
    return examples, problems


def _indent(s, pre="    "):
    return "\n".join(pre + l for l in s.splitlines())


def normalise(text, ws, home, uid):
    text = text.replace(ws, DOC_WORKSPACE).replace(home, DOC_HOME)
    if uid:
        text = re.sub(r"\buid %d\b" % uid, "uid %d" % DOC_UID, text)
    lines = [l.rstrip() for l in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _line_rx(line):
    return re.compile(r".*".join(re.escape(p) for p in line.split("...")) + r"\Z")


def _expected_lines(expected):
    exp = [l.rstrip() for l in expected.split("\n")]
    while exp and not exp[-1]:
        exp.pop()
    return exp


def align(expected, actual):
    """Line by line: how actual (normalised) differs from the documented
    output, where "..." in a line is any text and a line "..." any lines.
    Returns [(op, text)]: op " " agrees, "~" lines a "..." line stands for,
    "-" documented but not printed, "+" printed but not documented; or None
    when they agree."""
    exp = _expected_lines(expected)
    act = actual.split("\n") if actual else []
    rx = [None if l.strip() == "..." else _line_rx(l) for l in exp]
    E, A = len(exp), len(act)
    INF = float("inf")
    # cost[i][j]: fewest lines out of place to match exp[i:] with act[j:]
    cost = [[INF] * (A + 1) for _ in range(E + 1)]
    cost[E][A] = 0
    for i in range(E, -1, -1):
        for j in range(A, -1, -1):
            if i == E and j == A:
                continue
            best = INF
            if i < E and rx[i] is None:
                best = min(best, cost[i + 1][j])            # "..." done
                if j < A:
                    best = min(best, cost[i][j + 1])        # "..." takes act[j]
            if i < E and j < A and rx[i] is not None and rx[i].match(act[j]):
                best = min(best, cost[i + 1][j + 1])
            if i < E and rx[i] is not None:
                best = min(best, 1 + cost[i + 1][j])        # documented, not printed
            if j < A:
                best = min(best, 1 + cost[i][j + 1])        # printed, not documented
            cost[i][j] = best
    if cost[0][0] == 0:
        return None
    ops, i, j = [], 0, 0
    while i < E or j < A:
        c = cost[i][j]
        if i < E and rx[i] is None and cost[i + 1][j] == c:
            i += 1
        elif i < E and rx[i] is None and j < A and cost[i][j + 1] == c:
            ops.append(("~", act[j]))
            j += 1
        elif i < E and j < A and rx[i] is not None and rx[i].match(act[j]) and \
                cost[i + 1][j + 1] == c:
            ops.append((" ", act[j]))
            i, j = i + 1, j + 1
        elif i < E and rx[i] is not None and cost[i + 1][j] == c - 1:
            ops.append(("-", exp[i]))
            i += 1
        else:
            ops.append(("+", act[j]))
            j += 1
    return ops


def render(ops, context=3):
    """The differences, with a few agreeing lines around each (a run of
    lines a "..." stood for is one line)."""
    rows = []
    for op, text in ops:
        if op == "~" and rows and rows[-1][0] == "~":
            rows[-1] = ("~", rows[-1][1] + 1)
        else:
            rows.append((op, 1 if op == "~" else text))
    near = set()
    for k, (op, _) in enumerate(rows):
        if op in "+-":
            near.update(range(k - context, k + context + 1))
    out, gap = [], False
    for k, (op, v) in enumerate(rows):
        if k not in near:
            gap = True
            continue
        if gap:
            out.append("  (...)")
            gap = False
        out.append("  ... (%d line%s)" % (v, "s" * (v != 1)) if op == "~" else
                   "%s %s" % (op, v))
    return "\n".join(out)


def matches(expected, actual):
    return align(expected, actual) is None


def _as_user(ctx, argv):
    if ctx.uid != os.getuid():
        return ["setpriv", "--reuid=%d" % ctx.uid, "--regid=%d" % ctx.gid,
                "--clear-groups"] + argv
    return argv


def _bindir(ctx):
    """A directory with agentbox (this build) for the front of PATH."""
    d = os.path.join(ctx.scratch, "bin")
    if not os.path.isdir(d):
        os.makedirs(d)
        os.symlink(abtest.BINARY, os.path.join(d, "agentbox"))
    return d


def _sh(ctx, script, ws):
    cmd = _as_user(ctx, ["sh", "-c", script])
    env = ctx.env({"PATH": _bindir(ctx) + ":" + HOST_PATH})
    try:
        r = subprocess.run(cmd, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=TIMEOUT, text=True, errors="replace")
    except subprocess.TimeoutExpired:
        raise AssertionError("timed out after %ds: %s" % (TIMEOUT, fmt_cmd(cmd)))
    r.cmdline, r.stderr = cmd, ""
    ctx._outputs.append(r)  # scanned for the canaries at teardown
    return r


def run_example(ctx, ex, n):
    """Problems found running ex (a list of readable strings)."""
    ws = os.path.join(ctx.projects, "doc%d" % n)
    os.makedirs(ws)
    if ctx.uid:
        os.chown(ws, ctx.uid, ctx.gid)
    if ex.setup:
        r = _sh(ctx, ex.setup, ws)
        if r.returncode != 0:
            return ["%s: its doc-setup failed (exit %d):\n%s\n%s" % (
                ex.where(), r.returncode, _indent(ex.setup), _indent(r.stdout))]
    out = []
    for cmd, expected in ex.commands:
        r = _sh(ctx, cmd, ws)
        got = normalise(r.stdout, ws, ctx.home, ctx.uid)
        if r.returncode != ex.exit:
            out.append("%s: `%s` exited %d; the doc says %d (exit=N in its marks)\n"
                       "  it printed (normalised):\n%s" % (
                           ex.where(), cmd, r.returncode, ex.exit, _indent(got)))
        ops = align(expected, got) if expected is not None else None
        if ops:
            out.append("%s: `%s` printed something else than the doc shows%s\n"
                       "  (- documented, not printed; + printed, not documented):\n%s" % (
                           ex.where(), cmd, " (output at line %d)" % ex.output_line
                           if ex.output_line else "", _indent(render(ops))))
    return out


def test_docs_examples_are_marked(ctx):
    """Every sh block of README.md and docs/*.md and every .EX block of the
    man pages says whether it runs here, or why not; marks are well formed."""
    examples, problems = all_examples()
    assert examples, "no examples found"
    assert not problems, "\n".join(problems)


def test_docs_examples_run(ctx):
    """Every doc-run example exits as the doc says and prints what it shows
    (normalised: home, workspace; "..." stands for anything)."""
    examples, problems = all_examples()
    assert not problems, "\n".join(problems)
    failures, skipped, ran = [], [], 0
    for n, ex in enumerate(examples):
        if ex.skip:
            skipped.append((ex.where(), ex.skip))
            continue
        if ex.unprivileged and ctx.uid == 0:
            skipped.append((ex.where(), "unprivileged (root's run differs)"))
            continue
        failures += run_example(ctx, ex, n)
        ran += 1
    assert not failures, "%d of %d examples differ from the docs (normalisation: %s)\n\n%s" % (
        len(failures), ran, "; ".join(NORMALISATION), "\n\n".join(failures))
    if not ran:
        abtest.skip("no doc-run example")
    by = {}
    for where, why in skipped:
        by.setdefault(why, []).append(where)
    print("      %d examples ran; %d skipped:" % (ran, len(skipped)))
    for why, w in sorted(by.items()):
        print("        %s (%d): %s" % (why, len(w), " ".join(w)))


if __name__ == "__main__":
    # python3 tests/integration/test_docs.py: the inventory, without running anything
    exs, probs = all_examples()
    for e in exs:
        print("%-32s %s" % (e.where(), "run" + (" exit=%d" % e.exit if e.exit else "")
                            if e.run else "skip=%s" % e.skip))
    print("\n".join(probs))
