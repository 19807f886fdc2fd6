#!/bin/sh
# Install the container engines and tools `make check-containers` uses, from
# Debian: podman (with runc: crun refuses hybrid cgroup layouts), docker.io,
# debootstrap (the test image's root file system: no registry is needed).
# Run as root (or through sudo).  Idempotent.
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
pkgs="podman runc docker.io debootstrap uidmap slirp4netns fuse-overlayfs"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-engines: installing:$missing"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
else
	echo "install-engines: all engine packages present"
fi
