#!/bin/sh
# SPDX-License-Identifier: MIT
# `make check-containers`: agentbox inside podman and Docker, for real.
# Builds a Debian root file system once with debootstrap (no image registry
# needed; cached in $AB_CTR_CACHE), imports it, builds
# contrib/containers/Dockerfile on it, and runs contrib/containers/matrix.sh
# with the shipped seccomp profile.  Skips, saying why, when an engine is
# missing (contrib/containers/install-engines.sh installs them) or not root.
#   contrib/containers/check.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
cache=${AB_CTR_CACHE:-/var/cache/agentbox-ctr}
mirror=${AB_CTR_MIRROR:-http://deb.debian.org/debian}
here=$top/contrib/containers
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

skip() { echo "check-containers: SKIPPED ($*)"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root: rootful podman and dockerd"
[ -x "$top/$build/agentbox" ] || { echo "check-containers: no $build/agentbox (make first)"; exit 1; }
command -v debootstrap >/dev/null || skip "no debootstrap; run $here/install-engines.sh"

rootfs() {
	[ -d "$cache/rootfs" ] && return 0
	echo "check-containers: debootstrap bookworm into $cache/rootfs (once)"
	mkdir -p "$cache" && rm -rf "$cache/rootfs.tmp" &&
		debootstrap --variant=minbase --include=git bookworm "$cache/rootfs.tmp" "$mirror" \
			>"$cache/debootstrap.log" 2>&1 &&
		mv "$cache/rootfs.tmp" "$cache/rootfs" ||
		{ echo "check-containers: debootstrap failed, see $cache/debootstrap.log"; return 1; }
}

image() { # ENGINE: import the root file system, build the image
	e=$1
	$e image inspect agentbox-ctr-base >/dev/null 2>&1 ||
		tar -C "$cache/rootfs" -c . | $e import - agentbox-ctr-base >/dev/null || return 1
	(cd "$top" && DOCKER_BUILDKIT=0 $e build -q -f contrib/containers/Dockerfile \
		--build-arg BASE=agentbox-ctr-base -t agentbox-ctr-test . >/dev/null)
}

ran=0 bad=0
rootfs || exit 1
for e in podman docker; do
	if ! command -v $e >/dev/null; then
		echo "check-containers: $e SKIPPED (not installed; run $here/install-engines.sh)"
		continue
	fi
	if ! $e info >/dev/null 2>&1; then
		echo "check-containers: $e SKIPPED (its daemon is not running)"
		continue
	fi
	echo "check-containers: $e"
	image $e || { echo "check-containers: $e: image build failed"; bad=1; continue; }
	img=agentbox-ctr-test
	[ $e = podman ] && img=localhost/agentbox-ctr-test
	sh "$here/matrix.sh" $e $img "$top/$build/containers/$e-seccomp.json" || bad=1
	ran=1
done
[ $ran = 1 ] || skip "no container engine could run"
[ $bad = 0 ] && echo "check-containers: passed" || echo "check-containers: FAILED"
exit $bad
