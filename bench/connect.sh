#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What connect mediation costs (`make bench`):
#   bash bench/connect.sh build/agentbox
#
# Inside one sandbox, a Python client connects ${N:-2000} times to a listener
# of its own, for each kind of socket:
#   unix              a pathname stream socket in the workspace (blocking: the
#                     parent connects in a thread of its own)
#   unix-nonblock     the same, O_NONBLOCK (connected in the server thread)
#   tcp               127.0.0.1, a port loopback_ports lists (blocking: a
#                     thread that holds the sandbox's Landlock port rules)
#   tcp-nonblock      the same, O_NONBLOCK (a listed port: the server thread)
# and prints the median microseconds per connect+close of 10 batches.  The
# same script runs under build/agentbox-ablate with AGENTBOX_TEST_ABLATE=
# connect (the kernel connects directly), alternating, ${ROUNDS:-5} rounds;
# the table has the medians of the rounds and their ratio.
set -euo pipefail
die() { echo "bench: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 PATH/TO/agentbox"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "$1") || die "no such binary: $1"
ABL=$(dirname "$BIN")/agentbox-ablate
[ -x "$ABL" ] || die "no $ABL (make)"
OUT=${OUT:-$ROOT/build/bench}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/ab-bench-connect.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ws"
PORT=47123
cat > "$WORK/prof.json" <<JSON
{"version": 1, "extends": "default", "network": {"loopback_ports": [$PORT]}}
JSON
cat > "$WORK/ws/c.py" <<'PY'
import errno, json, os, select, socket, statistics, sys, threading, time
n, port = int(sys.argv[1]), int(sys.argv[2])
path = os.path.join(os.getcwd(), "b.sock")
if os.path.exists(path):
    os.unlink(path)
u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen(4096)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", port)); t.listen(4096)
def drain(l):
    while True:
        try:
            l.accept()[0].close()
        except OSError:
            return
for l in (u, t):
    threading.Thread(target=drain, args=(l,), daemon=True).start()
def one(kind):
    if kind.startswith("unix"):
        s = socket.socket(socket.AF_UNIX)
        addr = path
    else:
        s = socket.socket()
        addr = ("127.0.0.1", port)
    if kind.endswith("nonblock"):
        s.setblocking(False)
        e = s.connect_ex(addr)
        if e == errno.EINPROGRESS:  # TCP: wait for the handshake
            select.select([], [s], [], 5)
    else:
        s.connect(addr)
    s.close()
out = {}
for kind in ("unix", "unix-nonblock", "tcp", "tcp-nonblock"):
    per = []
    for b in range(10):
        t0 = time.perf_counter()
        for _ in range(n // 10):
            one(kind)
        per.append((time.perf_counter() - t0) / (n // 10) * 1e6)
    out[kind] = statistics.median(per)
print(json.dumps(out))
PY
run() { # BINARY [ENV...]
	local bin=$1; shift
	env "$@" "$bin" run -q -p "$WORK/prof.json" -w "$WORK/ws" -- python3 c.py "${N:-2000}" "$PORT"
}
: > "$WORK/med.jsonl"
for r in $(seq "${ROUNDS:-5}"); do
	printf '{"mediated": %s, ' "$(run "$BIN")" >> "$WORK/med.jsonl"
	printf '"direct": %s}\n' "$(run "$ABL" AGENTBOX_TEST_ABLATE=connect 2>/dev/null)" >> "$WORK/med.jsonl"
done
python3 - "$WORK/med.jsonl" "$OUT/connect.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
res = {}
print("connect+close, us (median of %d rounds)   mediated   direct   ratio  added" % len(rows))
for kind in ("unix", "unix-nonblock", "tcp", "tcp-nonblock"):
    m = statistics.median(r["mediated"][kind] for r in rows)
    d = statistics.median(r["direct"][kind] for r in rows)
    res[kind] = {"mediated_us": m, "direct_us": d, "ratio": m / d}
    print("  %-14s %27.1f %8.1f %7.2f %6.1f" % (kind, m, d, m / d, m - d))
json.dump(res, open(sys.argv[2], "w"), indent=1)
PY
