#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# guest-rootfs.sh - the replay benchmark's guest root filesystem.
#
# A Debian bookworm minbase tree with git and python3, made by debootstrap
# from the Debian mirror this host's apt is configured with, cached in
# $VMNAP_CACHE/rootfs/<key>/tree (key = suite, mirror, package list and
# this script's recipe version).  The tree plus the replay extras (the
# in-guest exec agent, the guest init script and the agent's workspace
# project) becomes an ext4 image with mke2fs -d.  The image is rebuilt only
# when one of its inputs changed (a hash of them sits beside it).
#
# Usage: scripts/guest-rootfs.sh [--agent BIN] [--project DIR] [--init FILE]
#                                [-o IMAGE] [--tree-only]
# Prints the image path (with --tree-only, the cached tree's) on its last
# line.  Needs root (debootstrap, chroot).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
VMNAP_CACHE=${VMNAP_CACHE:-/var/cache/vmnap}
SUITE=bookworm
VARIANT=minbase
INCLUDE=git,python3
RECIPE=2		# bump when the tree recipe below changes
IMAGE_HEADROOM_MIB=256	# free space in the image for the workspace and /tmp

AGENT=$ROOT/$BUILD/tests/replay/exec_agent
PROJECT=$ROOT/tests/data/replay-project
INIT=$ROOT/tests/replay/guest-init.sh
OUT=$ROOT/$BUILD/replay/rootfs.img
TREE_ONLY=0

die() { echo "guest-rootfs: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--agent) AGENT=$2; shift 2 ;;
	--project) PROJECT=$2; shift 2 ;;
	--init) INIT=$2; shift 2 ;;
	-o) OUT=$2; shift 2 ;;
	--tree-only) TREE_ONLY=1; shift ;;
	-h|--help) sed -n '3,17p' "$0"; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
done

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap); try sudo"
command -v debootstrap >/dev/null || die "debootstrap missing: run 'make deps'"
command -v mke2fs >/dev/null || die "mke2fs missing: run 'make deps'"

# The Debian mirror apt is configured with: deb822 "URIs:" of a stanza whose
# suites include $SUITE, else a one-line "deb URI $SUITE" entry.
debian_mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		uri=$(awk -v s="$SUITE" '
			/^$/ { if (u != "" && ok) { print u; exit } u=""; ok=0; next }
			/^URIs:/ { u=$2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) ok=1 }
			END { if (u != "" && ok) print u }' "$f" | head -n1)
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		uri=$(awk -v s="$SUITE" '$1 == "deb" {
			for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i ~ /:\/\//) {
				if ($(i+1) == s) { print $i; exit } } }' "$f")
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	return 1
}

MIRROR=${VMNAP_DEBIAN_MIRROR:-$(debian_mirror)} ||
	die "no Debian $SUITE mirror in /etc/apt/sources.list*; set VMNAP_DEBIAN_MIRROR"
KEY=$(printf '%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "$MIRROR" "$RECIPE" |
	sha256sum | cut -c1-16)
CDIR=$VMNAP_CACHE/rootfs/$KEY
TREE=$CDIR/tree

# One debootstrap at a time per tree: make check starts --tree-only in the
# background (an "@warm" line) while a replay test may want the same tree.
mkdir -p "$VMNAP_CACHE/rootfs"
exec 9>"$CDIR.lock"
flock 9
if [ ! -e "$CDIR/complete" ]; then
	echo "guest-rootfs: debootstrap $SUITE ($VARIANT, +$INCLUDE) from $MIRROR into $TREE" >&2
	rm -rf "$CDIR"
	mkdir -p "$CDIR"
	debootstrap --variant="$VARIANT" --include="$INCLUDE" \
		"$SUITE" "$TREE.tmp" "$MIRROR" >"$CDIR/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $CDIR/debootstrap.log"
	# Trim what a guest never reads; keep dpkg's database intact.
	rm -rf "$TREE.tmp"/var/cache/apt/archives/*.deb \
		"$TREE.tmp"/var/lib/apt/lists/* \
		"$TREE.tmp"/usr/share/doc/* "$TREE.tmp"/usr/share/man/* \
		"$TREE.tmp"/usr/share/locale/* "$TREE.tmp"/usr/share/info/*
	mv "$TREE.tmp" "$TREE"
	printf '%s\n' "suite=$SUITE variant=$VARIANT include=$INCLUDE mirror=$MIRROR recipe=$RECIPE" >"$CDIR/complete"
fi
exec 9>&-
[ "$TREE_ONLY" = 1 ] && { echo "$TREE"; exit 0; }

[ -x "$AGENT" ] || die "exec agent $AGENT missing: run 'make userspace'"
[ -d "$PROJECT" ] || die "workspace project $PROJECT missing"
[ -r "$INIT" ] || die "guest init $INIT missing"

# ext4 lists a directory in the order of its names' hashes, keyed by a
# seed mke2fs draws at random: a fixed seed (and UUID) gives every image
# built from the same inputs the same readdir order, so a command that
# walks directories prints the same in every guest and every rebuild.
FS_SEED=6a1d2c3e-7b8f-4e5a-9c0d-1e2f3a4b5c6d
# Image inputs: the cached tree's key plus every extra file's content.
inputs=$({ echo "$KEY $IMAGE_HEADROOM_MIB $FS_SEED"; sha256sum "$AGENT" "$INIT" | cut -d' ' -f1;
	(cd "$PROJECT" && find . -type f -print0 | sort -z | xargs -0 sha256sum); } |
	sha256sum | cut -c1-16)
if [ -f "$OUT" ] && [ "$(cat "$OUT.inputs" 2>/dev/null)" = "$inputs" ]; then
	echo "$OUT"; exit 0
fi

mkdir -p "$(dirname "$OUT")"
STAGE=$(mktemp -d "$(dirname "$OUT")/rootfs-stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# Hard links when cache and build share a filesystem (cheap), else a copy.
cp -al "$TREE/." "$STAGE/" 2>/dev/null || cp -a "$TREE/." "$STAGE/"
install -D -m 0755 "$AGENT" "$STAGE/usr/local/sbin/vmnap-exec-agent"
rm -f "$STAGE/usr/local/sbin/vmnap-replay-init"
install -D -m 0755 "$INIT" "$STAGE/usr/local/sbin/vmnap-replay-init"
rm -rf "$STAGE/srv/project"
mkdir -p "$STAGE/srv"
cp -r "$PROJECT" "$STAGE/srv/project"
# Byte-identical checkouts in every guest: fixed timestamps.
find "$STAGE/srv/project" -exec touch -h -d @0 {} +

used_kib=$(du -sk "$STAGE" | cut -f1)
size_mib=$(( used_kib / 1024 * 5 / 4 + IMAGE_HEADROOM_MIB ))
rm -f "$OUT.tmp"
mke2fs -q -t ext4 -L vmnap-replay -U "$FS_SEED" -E root_owner=0:0,hash_seed="$FS_SEED" \
	-d "$STAGE" "$OUT.tmp" "${size_mib}M" ||
	die "mke2fs -d failed"
mv "$OUT.tmp" "$OUT"
echo "$inputs" >"$OUT.inputs"
echo "guest-rootfs: $OUT (${size_mib} MiB, tree $KEY)" >&2
echo "$OUT"
