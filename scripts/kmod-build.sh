#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod-build.sh [--path] - build vmnap.ko for the guest kernel selected by
# VMNAP_KVER / VMNAP_KFLAVOUR (scripts/guest-kver.sh) and print its path.
#
#   default kernel   ./vmnap.ko, Kbuild in place ('make module')
#   any other        $BUILD/kmod-<release>/vmnap.ko: Kbuild, kmod/ and uapi/
#                    copied there (mtimes kept: incremental) and built with
#                    M= of that directory, so kernels never share objects
#
# --path prints the path without building.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
BUILD=${BUILD:-build}
die() { echo "kmod-build: $*" >&2; exit 1; }

ver=$("$here/guest-kver.sh") || die "cannot tell the guest kernel version (see above)"
default=$(env -u VMNAP_KVER -u VMNAP_KFLAVOUR "$here/guest-kver.sh" 2>/dev/null || true)
if [ "$ver" = "$default" ]; then
	dir=$root
else
	dir=$root/$BUILD/kmod-$ver
fi
if [ "${1:-}" = --path ]; then
	echo "$dir/vmnap.ko"
	exit 0
fi
[ $# -eq 0 ] || die "usage: kmod-build.sh [--path]"

# installed headers, else unpacked into the cache (guest-headers.sh)
kdir=$("$here/guest-headers.sh" "$ver") || die "no headers for $ver (see above)"
if [ "$dir" != "$root" ]; then
	mkdir -p "$dir"
	# Sources only: the in-place build's objects stay out.
	find Kbuild kmod uapi -type f \( -name Kbuild -o -name '*.[ch]' \) -print0 |
		tar --null -T - -cf - | tar -C "$dir" -xf -
fi
make -s -C "$kdir" M="$dir" modules >&2 || die "build against $kdir failed"
echo "$dir/vmnap.ko"
