#!/bin/sh
# SPDX-License-Identifier: MIT
# Measure agentbox inside a container engine, one row per setting
# (docs/containers.md's matrix), and check the minimal flags work:
#   contrib/containers/matrix.sh podman|docker IMAGE SECCOMP.json
# Prints "setting | exit | what agentbox said (first line) | Hint".  Exits 1
# when the minimal flags do not give a passing `run` and `test-escape` as
# the image's non-root user, or a default setting does not fail closed.
set -u
engine=$1 image=$2 profile=$3
case $engine in
podman) unmask="--security-opt unmask=/proc/*" ;;
docker) unmask="--security-opt systempaths=unconfined" ;;
*) echo "usage: $0 podman|docker IMAGE SECCOMP.json" >&2; exit 2 ;;
esac
sec="--security-opt seccomp=$profile"
bad=0

row() { # NAME WANT(0|125) FLAGS... -- ARGS...
	name=$1 want=$2
	shift 2
	flags=""
	while [ "$1" != "--" ]; do flags="$flags $1"; shift; done
	shift
	# shellcheck disable=SC2086
	out=$($engine run --rm --network none $flags "$image" "$@" 2>&1)
	rc=$?
	first=$(printf '%s\n' "$out" | grep -m1 '^agentbox: ' | cut -c1-200)
	hint=$(printf '%s\n' "$out" | grep -m1 '^Hint: ' | cut -c1-200)
	printf '%s | %s | %s | %s\n' "$name" "$rc" "${first:-}" "${hint:-}"
	[ "$rc" = "$want" ] || { echo "  FAIL: $name: exit $rc, want $want" >&2; bad=1; }
}

row "defaults, non-root user" 125 -- run -- true
row "seccomp profile, /proc masked" 125 $sec -- run -- true
row "minimal flags, non-root user" 0 $sec $unmask -- run -- true
row "minimal flags, claude-code profile" 0 $sec $unmask -e ANTHROPIC_API_KEY=sk-ant-x -- \
	run -p claude-code -- true
row "minimal flags, test-escape" 0 $sec $unmask -- test-escape --format json
row "container root, no user namespace, seccomp profile" 125 $sec --user 0 -- run -- true
row "container root, test-escape" 3 $sec --user 0 -- test-escape --format json
exit $bad
