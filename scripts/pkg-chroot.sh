#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pkg-chroot.sh - a clean Debian bookworm chroot to install vmnap's .debs in.
#
# Usage: scripts/pkg-chroot.sh DEB... 
# Prints the path of a cached tarball (tar.zst) of a debootstrap minbase
# with systemd (for systemd-analyze verify) and every package the given
# .debs depend on (first alternative, from their Depends), so that dpkg -i
# needs no network.  Cached in $VMNAP_CACHE/pkg-chroot/<key>/base.tar.zst,
# key = suite, variant, package list, mirror and this recipe's version: a
# new dependency makes a new base.  Needs root (debootstrap).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VMNAP_CACHE=${VMNAP_CACHE:-/var/cache/vmnap}
SUITE=bookworm
VARIANT=minbase
RECIPE=1		# bump when the recipe below changes

die() { echo "pkg-chroot: $*" >&2; exit 1; }
[ $# -gt 0 ] || die "usage: $0 DEB..."
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap)"
command -v debootstrap >/dev/null || die "debootstrap missing: run 'make deps'"

# The mirror apt uses (as scripts/guest-rootfs.sh finds it).
MIRROR=${VMNAP_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}
[ -n "$MIRROR" ] || MIRROR=$(awk -v s="$SUITE" '$1 == "deb" { for (i = 2; i < NF; i++)
	if ($i ~ /:\/\// && $(i+1) == s) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null)
[ -n "$MIRROR" ] || die "no Debian $SUITE mirror found; set VMNAP_DEBIAN_MIRROR"

own=$(for d in "$@"; do dpkg-deb -f "$d" Package; done)
deps=$(for d in "$@"; do dpkg-deb -f "$d" Depends; done | tr ',' '\n' |
	sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' | grep -v '^$' |
	grep -vxF -f <(printf '%s\n' $own) | sort -u)
INCLUDE=$(printf '%s\n' systemd $deps | sort -u | paste -sd, -)
KEY=$(printf '%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "$MIRROR" "$RECIPE" | sha256sum | cut -c1-16)
CDIR=$VMNAP_CACHE/pkg-chroot/$KEY
TAR=$CDIR/base.tar.zst

if [ ! -e "$CDIR/complete" ]; then
	echo "pkg-chroot: debootstrap $SUITE ($VARIANT, +$INCLUDE) from $MIRROR" >&2
	rm -rf "$CDIR"
	mkdir -p "$CDIR"
	debootstrap --variant="$VARIANT" --include="$INCLUDE" \
		"$SUITE" "$CDIR/tree" "$MIRROR" >"$CDIR/debootstrap.log" 2>&1 ||
		die "debootstrap failed; see $CDIR/debootstrap.log"
	rm -rf "$CDIR"/tree/var/cache/apt/archives/*.deb "$CDIR"/tree/var/lib/apt/lists/*
	tar -C "$CDIR/tree" --numeric-owner -cf - . | zstd -q -T2 -o "$TAR.tmp"
	mv "$TAR.tmp" "$TAR"
	rm -rf "$CDIR/tree"
	printf 'suite=%s variant=%s include=%s mirror=%s recipe=%s\n' \
		"$SUITE" "$VARIANT" "$INCLUDE" "$MIRROR" "$RECIPE" >"$CDIR/complete"
fi
echo "$TAR"
