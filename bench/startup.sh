#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Startup and overhead benchmark (`make bench`):
#   bash bench/startup.sh build/agentbox
#
# 1. Startup: one hyperfine run (so the commands are measured side by side) of
#      agentbox run -p default -w WS -- /bin/true
#      bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true
#      unshare -Urmnpf --mount-proc /bin/true
#      /bin/true
#    --warmup 20, --runs ${RUNS:-200}, no intermediate shell (-N).
# 1b. Every shipped profile (default, shell, claude-code, codex, gemini-cli,
#    opencode) with bwrap and unshare, interleaved by bench/paired.py
#    (--runs ${PROFILE_RUNS:-40}): median ms from spawn to reaped, minor
#    page faults of the whole tree, ratios to default and to bwrap; then
#    what this machine charges for memory (bench/vmcost.c: a page fault, a
#    copy on write, a fork per page, two processes faulting at once).
# 2. A syscall-heavy job, `find /usr -type f | wc -l`, sandboxed vs not
#    (--warmup 2, --runs ${FIND_RUNS:-20}).
# 3. Building a small C project (this project's library from a clone),
#    sandboxed vs not (--runs ${BUILD_RUNS:-12}, `make clean` before each).
#
# Results: build/bench/startup.json, build/bench/find.json (hyperfine's JSON)
# and build/bench/summary.md (the markdown tables printed at the end).
# Environment: RUNS, PROFILE_RUNS, FIND_RUNS, WARMUP, OUT (output dir), HYPERFINE_STYLE.
# ONLY=profiles runs part 1b alone.
set -euo pipefail

die() { echo "bench: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: $0 PATH/TO/agentbox"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "$1") || die "no such binary: $1"
[ -x "$BIN" ] || die "not executable: $BIN (run make first)"
RUNS=${RUNS:-200}
FIND_RUNS=${FIND_RUNS:-20}
WARMUP=${WARMUP:-20}
OUT=${OUT:-$ROOT/build/bench}
STYLE=${HYPERFINE_STYLE:-basic}
PY=$(command -v python3) || die "python3 not found (make deps)"

for t in hyperfine:hyperfine bwrap:bubblewrap unshare:util-linux; do
	command -v "${t%%:*}" >/dev/null || die "${t%%:*} not found: apt-get install ${t#*:} (or make deps)"
done
mkdir -p "$OUT"

WS=$(mktemp -d "${TMPDIR:-/tmp}/agentbox-bench.XXXXXX")
trap 'rm -rf "$WS"' EXIT
chmod 755 "$WS"

AB="$BIN run -p default -w $WS --"
# A typical project: a git repository (its .git/hooks and .git/config exist,
# so they are re-bound read-only rather than reserved by placeholders).
REPO="$WS/repo"
mkdir -p "$REPO" && git -C "$REPO" init -q
AB_REPO="$BIN run -p default -w $REPO --"
BWRAP="bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent"
UNSHARE="unshare -Urmnpf --mount-proc"

# Every command must work before it is timed: a fast failure is not a result.
check() {
	local name=$1; shift
	if ! out=$("$@" 2>&1); then
		echo "bench: '$name' fails on this machine:" >&2
		echo "  \$ $*" >&2
		echo "$out" | sed 's/^/  /' >&2
		exit 1
	fi
}
check agentbox $AB /bin/true
check agentbox-repo $AB_REPO /bin/true
check bwrap $BWRAP /bin/true
check unshare $UNSHARE /bin/true

if [ "${ONLY:-}" != profiles ]; then
echo "== startup: $RUNS runs each (warmup $WARMUP), $(uname -r), uid $(id -u)"
hyperfine -N --style "$STYLE" --warmup "$WARMUP" --runs "$RUNS" \
	--export-json "$OUT/startup.json" \
	-n "agentbox run -p default -- /bin/true (empty dir)" "$AB /bin/true" \
	-n "agentbox run -p default -- /bin/true (git repo)" "$AB_REPO /bin/true" \
	-n "bwrap --unshare-all ... /bin/true" "$BWRAP /bin/true" \
	-n "unshare -Urmnpf --mount-proc /bin/true" "$UNSHARE /bin/true" \
	-n "/bin/true (no sandbox)" "/bin/true"
fi

# 1b. Every shipped profile against default, bwrap and unshare: one table,
#     interleaved round by round (bench/paired.py), with page faults.  The
#     harness profiles get a dummy key and a throwaway HOME holding the
#     state each harness has after its first run.
PHOME="$WS/home"
mkdir -p "$PHOME/.claude" "$PHOME/.codex" "$PHOME/.gemini" "$PHOME/.config/opencode" \
	"$PHOME/.local/share/opencode" "$PHOME/.local/state/opencode" "$PHOME/.cache/opencode"
echo '{"numStartups":1,"projects":{}}' >"$PHOME/.claude.json"
echo '{}' >"$PHOME/.claude/settings.json"
echo 'model = "o3"' >"$PHOME/.codex/config.toml"
echo '{}' >"$PHOME/.gemini/settings.json"
chmod -R go+rX "$PHOME"
PWS="$WS/pws"
mkdir -p "$PWS" && chmod 755 "$PWS"
prof() { echo "$1=$BIN run -p $1 -w $PWS -- /bin/true"; }
echo
echo "== startup per profile: ${PROFILE_RUNS:=40} interleaved runs each"
env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_STATE_HOME -u XDG_CACHE_HOME HOME="$PHOME" \
	ANTHROPIC_API_KEY=sk-ant-api03-bench-dummy-key-0000000000000000000000 \
	OPENAI_API_KEY=sk-bench-dummy-key-00000000000000000000000000 \
	GEMINI_API_KEY=AIzaBenchDummyKey000000000000000000000 \
	"$PY" "$ROOT/bench/paired.py" --runs "$PROFILE_RUNS" --warmup 3 \
	--ref default --ref bwrap --title "Start-up per profile, run -- /bin/true" \
	--json "$OUT/profiles.json" --md "$OUT/profiles.md" \
	"bwrap=$BWRAP /bin/true" "unshare=$UNSHARE /bin/true" \
	"$(prof default)" "$(prof shell)" "$(prof claude-code)" "$(prof codex)" \
	"$(prof gemini-cli)" "$(prof opencode)"
# What a page fault, a copy-on-write and a fork cost here, and whether two
# CPUs fault independently: the start-up figures above are mostly these
# (docs/performance.md, "Why the start-up targets do not hold here").
cc -O2 -o "$WS/vmcost" "$ROOT/bench/vmcost.c" || die "compiling bench/vmcost.c (make deps)"
{ echo; "$WS/vmcost"; } | tee -a "$OUT/profiles.md"
[ "${ONLY:-}" != profiles ] || exit 0

FIND="sh -c 'find /usr -type f 2>/dev/null | wc -l'"
n_in=$($AB sh -c 'find /usr -type f 2>/dev/null | wc -l')
n_out=$(sh -c 'find /usr -type f 2>/dev/null | wc -l')
echo
echo "== syscall-heavy job: find /usr -type f | wc -l ($n_out files outside, $n_in inside)"
[ "$n_in" = "$n_out" ] || echo "bench: note: the sandbox sees $n_in files, the host $n_out" \
	"(the unprivileged uid inside cannot enter some root-only directories)" >&2
hyperfine -N --style "$STYLE" --warmup 2 --runs "$FIND_RUNS" \
	--export-json "$OUT/find.json" \
	-n "agentbox run -p default -- sh -c 'find ...'" "$AB $FIND" \
	-n "sh -c 'find ...' (no sandbox)" "$FIND"

# 3. A small C project: this project's own library, built from a copy.
PROJ="$WS/proj"
git clone -q "$ROOT" "$PROJ"
BUILDCMD="make -s -C $PROJ -j2 build/libagentbox.a OPT=-O1"
echo
echo "== build a small C project: $BUILDCMD"
check build-in-sandbox $BIN run -p default -w "$PROJ" -- $BUILDCMD
hyperfine -N --style "$STYLE" --warmup 1 --runs "${BUILD_RUNS:-12}" \
	--prepare "make -s -C $PROJ clean" \
	--export-json "$OUT/build.json" \
	-n "agentbox run -p default -- make (C project)" "$BIN run -p default -w $PROJ -- $BUILDCMD" \
	-n "make (C project, no sandbox)" "$BUILDCMD"

"$PY" - "$OUT/startup.json" "$OUT/find.json" "$OUT/summary.md" "$OUT/build.json" <<'EOF'
import json, platform, subprocess, sys

def load(p):
    with open(p) as f:
        return json.load(f)["results"]

def ms(x):
    return "%.2f" % (x * 1000)

startup, find, out_path = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
# Order is fixed by the hyperfine invocation: agentbox (empty dir), agentbox
# (git repo), bwrap, unshare, /bin/true.
ab, ab_repo, bw, un = (startup[i]["median"] for i in range(4))
lines = []
lines.append("### Startup (median of %d runs each, kernel %s)" % (len(startup[0]["times"]),
                                                               platform.release()))
lines.append("")
lines.append("| command | median ms | mean ± σ ms | min ms | vs unshare | vs bwrap |")
lines.append("|---|---:|---:|---:|---:|---:|")
for r in startup:
    lines.append("| %s | %s | %s ± %s | %s | %.2f× | %.2f× |" % (
        r["command"], ms(r["median"]), ms(r["mean"]), ms(r["stddev"] or 0), ms(r["min"]),
        r["median"] / un, r["median"] / bw))
lines.append("")
for label, v in (("empty dir", ab), ("git repo", ab_repo)):
    lines.append("agentbox (%s) / unshare = %.2f× (target ≤ 1.3×); / bwrap = %.2f× (target ≤ 1.0×)"
                 % (label, v / un, v / bw))
fs, fo = find[0]["median"], find[1]["median"]
lines.append("")
lines.append("### Syscall-heavy job: `find /usr -type f | wc -l` (median of %d runs)"
             % len(find[0]["times"]))
lines.append("")
lines.append("| command | median ms | mean ± σ ms |")
lines.append("|---|---:|---:|")
for r in find:
    lines.append("| %s | %s | %s ± %s |" % (r["command"], ms(r["median"]), ms(r["mean"]),
                                           ms(r["stddev"] or 0)))
lines.append("")
lines.append("overhead: %+.1f%% (target ≤ 5%%)" % ((fs / fo - 1) * 100))
build = load(sys.argv[4])
bs, bo = build[0]["median"], build[1]["median"]
lines.append("")
lines.append("### Building a small C project (this project's library, median of %d runs)"
             % len(build[0]["times"]))
lines.append("")
lines.append("| command | median ms | mean ± σ ms |")
lines.append("|---|---:|---:|")
for r in build:
    lines.append("| %s | %s | %s ± %s |" % (r["command"], ms(r["median"]), ms(r["mean"]),
                                           ms(r["stddev"] or 0)))
lines.append("")
lines.append("overhead: %+.1f%% (target ≤ 5%%)" % ((bs / bo - 1) * 100))
text = "\n".join(lines) + "\n"
with open(out_path, "w") as f:
    f.write(text)
print()
print(text, end="")
EOF
echo
cat "$OUT/profiles.md" >>"$OUT/summary.md"
echo
cat "$OUT/profiles.md"
echo
echo "JSON: $OUT/startup.json $OUT/profiles.json $OUT/find.json $OUT/build.json; tables: $OUT/summary.md"
