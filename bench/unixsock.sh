#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What listing the host's unix sockets costs at startup (`make bench`):
#   bash bench/unixsock.sh build/agentbox
#
# For N in ${COUNTS:-0 200 2000}: a helper holds N listening pathname
# sockets and 3N connected unnamed ones (a busy desktop has a few hundred
# of the first and thousands of the second), then one hyperfine run
# measures, side by side,
#   agentbox run -p default -w WS -- /bin/true
#   cat /proc/net/unix       (what the text listing alone costs the kernel)
# --warmup 5, --runs ${RUNS:-60}.  agentbox lists the sockets through
# NETLINK_SOCK_DIAG (listening and unconnected ones only), falling back to
# /proc/net/unix.  Results: build/bench/unixsock-N.json.
set -euo pipefail
die() { echo "bench: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 PATH/TO/agentbox"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "$1") || die "no such binary: $1"
RUNS=${RUNS:-60}
OUT=${OUT:-$ROOT/build/bench}
command -v hyperfine >/dev/null || die "hyperfine not found (make deps)"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/ab-bench-unixsock.XXXXXX)
trap 'kill "$HOLDER" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ws"
HOLDER=
for n in ${COUNTS:-0 200 2000}; do
	python3 - "$n" "$WORK/socks" "$WORK/ready" <<'PY' &
import os, socket, sys, time
n, d, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.makedirs(d, exist_ok=True)
keep = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    p = os.path.join(d, "s%d.sock" % i)
    if os.path.exists(p):
        os.unlink(p)
    s.bind(p)
    s.listen(1)
    keep.append(s)
for i in range(n * 3 // 2):
    keep += list(socket.socketpair())
open(ready, "w").close()
time.sleep(3600)
PY
	HOLDER=$!
	for _ in $(seq 100); do [ -e "$WORK/ready" ] && break; sleep 0.1; done
	echo "== $n listening sockets, $((n * 3)) connected ones"
	hyperfine -N --style basic --warmup 5 --runs "$RUNS" \
		--export-json "$OUT/unixsock-$n.json" \
		"$BIN run -p default -w $WORK/ws -- /bin/true" "cat /proc/net/unix"
	kill "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
	rm -rf "$WORK/socks" "$WORK/ready"
done
