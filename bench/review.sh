#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The cost of review mode (docs/review.md) on a large tree:
#   bash bench/review.sh build/agentbox
#
# A generated repository of ${FILES:-100000} files (1000 directories, one
# commit), then one hyperfine run per pair, each pair side by side:
#   1. start:      agentbox run -- /bin/true        vs  run --review -- /bin/true
#   2. git status: agentbox run -- git status       vs  run --review -- git status
#   3. changes:    a run that edits 100 files, direct and in review mode (with
#                  its listing at exit), then `agentbox review` of those 100
#                  (the listing walks the change set, not the tree)
# Each review run starts from an empty change set (hyperfine --prepare runs
# `agentbox discard`).  Results: build/bench/review-*.json, and the markdown
# tables in build/bench/review.md.  Environment: FILES, RUNS, OUT, WS.
set -euo pipefail

die() { echo "bench: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 PATH/TO/agentbox"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "$1") || die "no such binary: $1"
FILES=${FILES:-100000}
RUNS=${RUNS:-10}
OUT=${OUT:-$ROOT/build/bench}
WS=${WS:-/var/tmp/agentbox-bench-review}
command -v hyperfine >/dev/null || die "hyperfine not found (make deps)"
mkdir -p "$OUT"

if [ ! -f "$WS/.complete-$FILES" ]; then
	rm -rf "$WS" && mkdir -p "$WS"
	python3 - "$WS" "$FILES" <<'PY'
import os, sys
ws, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(ws, "d%03d" % (i % 1000))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.c" % i), "w") as f:
        f.write("int f%d(void) { return %d; }\n" % (i, i))
PY
	git -C "$WS" init -q
	git -C "$WS" add -A
	git -C "$WS" -c user.name=b -c user.email=b@b commit -qm tree
	touch "$WS/.complete-$FILES"
fi
git -C "$WS" status --porcelain >/dev/null # a fresh index: no refresh to write

AB="$BIN run -q -w $WS"
DISCARD="$BIN discard -w $WS >/dev/null 2>&1 || true"
EDIT='for i in $(seq 0 99); do echo "/* edited */" >> d$(printf %03d $i)/f$(printf %06d $i).c; done'
hf() { hyperfine -N --style basic --warmup 2 --runs "$RUNS" "$@"; }
$BIN discard -w "$WS" >/dev/null 2>&1 || true
hf --export-json "$OUT/review-start.json" --export-markdown "$OUT/review-start.md" \
	--prepare "sh -c '$DISCARD'" -n direct "$AB -- /bin/true" \
	-n review "$AB --review -- /bin/true"
hf --export-json "$OUT/review-status.json" --export-markdown "$OUT/review-status.md" \
	--prepare "sh -c '$DISCARD'" -n direct "$AB -- git status --porcelain" \
	-n review "$AB --review -- git status --porcelain"
PREP="$OUT/review-prep.sh"
cat >"$PREP" <<PREP
#!/bin/sh
$BIN discard -w $WS >/dev/null 2>&1
[ "\$1" = edit ] && $AB --review -- sh -c '$EDIT' >/dev/null 2>&1
exit 0
PREP
hf --export-json "$OUT/review-edit.json" --export-markdown "$OUT/review-edit.md" \
	-n "direct run editing 100 files" --prepare "git -C $WS checkout -q -- ." \
	"$AB -- sh -c '$EDIT'" \
	-n "review run editing 100 files" --prepare "sh $PREP" "$AB --review -- sh -c '$EDIT'" \
	-n "agentbox review (100 changes)" --prepare "sh $PREP edit" "$BIN review -w $WS"
git -C "$WS" checkout -q -- .
$BIN discard -w "$WS" >/dev/null 2>&1 || true
cat "$OUT"/review-start.md "$OUT"/review-status.md "$OUT"/review-edit.md | tee "$OUT/review.md"
