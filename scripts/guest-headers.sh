#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# guest-headers.sh RELEASE - the kernel build directory for RELEASE
# (6.12.117+deb12-amd64), printed: /usr/src/linux-headers-RELEASE when the
# package is installed, else Debian's headers unpacked into
# $VMNAP_CACHE/headers/RELEASE/ without installing them.  Installing
# linux-headers-<6.12 release> would pull that kernel's image (and
# initramfs-tools) onto the host, which a guest module build has no use for.
#
# The cache holds linux-headers-RELEASE, its -common package and
# linux-kbuild-<version> unpacked into one root (their relative links hold),
# the flavour Makefile's absolute include pointed into that root, and a
# stamp with the package version (guest-kernel.sh downloads the image of
# that version).  Idempotent; one fetch at a time.
set -euo pipefail
die() { echo "guest-headers: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: guest-headers.sh RELEASE"
rel=$1
[[ $rel =~ ^[0-9][0-9a-z.+~-]*$ ]] || die "bad release '$rel'"
if [ -d "/usr/src/linux-headers-$rel" ]; then
	echo "/usr/src/linux-headers-$rel"
	exit 0
fi
cache=${VMNAP_CACHE:-/var/cache/vmnap}
dir=$cache/headers/$rel
kdir=$dir/usr/src/linux-headers-$rel
[ -f "$dir/.complete" ] && [ -d "$kdir" ] && { echo "$kdir"; exit 0; }

for tool in apt-get apt-cache dpkg-deb flock; do
	command -v "$tool" >/dev/null || die "'$tool' not found"
done
mkdir -p "$cache/headers"
exec 9>"$cache/headers/.lock"
flock 9
[ -f "$dir/.complete" ] && [ -d "$kdir" ] && { echo "$kdir"; exit 0; }

pkg=linux-headers-$rel
version=$(apt-cache show "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
[ -n "$version" ] || die "$pkg is not in the package lists (apt-get update?)"
# -common and linux-kbuild-*, as the headers package names them
deps=$(apt-cache show "$pkg=$version" | sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
	sed 's/^ *//; s/ .*//' | grep -E '^(linux-headers-.*-common(-rt)?|linux-kbuild-.*)$' || true)
[ -n "$deps" ] || die "cannot tell what $pkg $version depends on"
work=$(mktemp -d "$cache/headers/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
id _apt >/dev/null 2>&1 && chown _apt "$work" || true
pkgs=("$pkg=$version")
for d in $deps; do pkgs+=("$d=$version"); done
(cd "$work" && apt-get download -q "${pkgs[@]}") >"$work/apt.log" 2>&1 ||
	{ cat "$work/apt.log" >&2; die "cannot download ${pkgs[*]}"; }
for deb in "$work"/*.deb; do
	dpkg-deb -x "$deb" "$work/root"
done
[ -d "$work/root/usr/src/linux-headers-$rel" ] || die "$pkg has no usr/src/linux-headers-$rel"
# "include /usr/src/linux-headers-<v>-common/Makefile": into this root
sed -i "s|^include /usr/src/|include $dir/usr/src/|" "$work/root/usr/src/linux-headers-$rel/Makefile"
echo "$version" >"$work/root/.complete"
rm -rf "$dir"
mv "$work/root" "$dir"
echo "guest-headers: $pkg $version -> $dir" >&2
echo "$kdir"
