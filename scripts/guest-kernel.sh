#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# guest-kernel.sh - fetch the guest kernel: Debian's linux-image-<ver>-amd64
# matching the installed linux-headers-<ver>-amd64 (vmnap.ko is built
# against those headers), unpacked into $VMNAP_CACHE/kernel/<ver>/.
#
# Result (printed path is the directory):
#   <dir>/vmlinuz                    the kernel (bzImage)
#   <dir>/vmlinux                    the same kernel uncompressed (ELF with a
#                                    PVH entry note): QEMU starts it directly,
#                                    skipping real-mode setup and the in-guest
#                                    decompression (seconds under TCG)
#   <dir>/lib/modules/<ver>/         every module of the package + depmod indexes
#   <dir>/guest-modules.order        modules the guest loads at boot, one path
#                                    (relative to lib/modules/<ver>) a line, in
#                                    load order with their dependencies first
#   <dir>/.complete                  stamp: package version; present = done
#
# Idempotent and fast when cached: nothing is downloaded when the stamp
# matches.  The module list is resolved from the package's own modules.dep
# and softdeps (modprobe --show-depends), never hard-coded.
#
# Environment: VMNAP_CACHE (default /var/cache/vmnap), VMNAP_KVER (override
# the kernel release), VMNAP_GUEST_MODULES (override GUEST_MODULES below).
set -euo pipefail

# What the guest loads at boot: virtio transport and devices, the vsock core
# with its virtio and loopback transports, fw_cfg (run-guest.sh passes the
# command through it) and ext4 (for --rootfs).  Dependencies are added.
GUEST_MODULES="virtio_pci virtio_blk virtio_net virtio_console vsock
	vmw_vsock_virtio_transport vsock_loopback qemu_fw_cfg ext4"
GUEST_MODULES=${VMNAP_GUEST_MODULES:-$GUEST_MODULES}

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "guest-kernel: $*" >&2; exit 1; }

cache=${VMNAP_CACHE:-/var/cache/vmnap}
ver=$("$here/guest-kver.sh") || die "cannot tell the guest kernel version (see above)"
hdr_pkg=linux-headers-$ver
img_pkg=linux-image-$ver
hdr_version=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$hdr_pkg" 2>/dev/null |
	sed -n 's/^installed //p' || true)
# or unpacked into the cache by guest-headers.sh (not installed)
hdr_stamp=${VMNAP_CACHE:-/var/cache/vmnap}/headers/$ver/.complete
[ -n "$hdr_version" ] || [ ! -f "$hdr_stamp" ] || hdr_version=$(cat "$hdr_stamp")
if [ -z "$hdr_version" ]; then
	if [ -n "${VMNAP_KVER:-}" ]; then
		die "$hdr_pkg is not installed (VMNAP_KVER=$VMNAP_KVER); install it: apt-get install $hdr_pkg"
	fi
	die "$hdr_pkg is not installed; run 'make deps' (installs linux-headers-amd64)"
fi

dir=$cache/kernel/$ver
stamp=$dir/.complete
pvh_stamp=$dir/.vmlinux-done
complete() {
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hdr_version" ] &&
		[ -f "$dir/vmlinuz" ] && [ -s "$dir/guest-modules.order" ] && [ -f "$pvh_stamp" ]
}
if complete; then
	echo "$dir"
	exit 0
fi

# extract_vmlinux BZIMAGE OUT: the ELF kernel inside a bzImage, kept only if
# it has the PVH entry note (Xen ELF note PHYS32_ENTRY) QEMU needs.
PVH_NOTE_TYPE=0x00000012
extract_vmlinux() {
	local bz=$1 out=$2 magic tool off
	for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
		tool=${magic%%:*}
		off=$(LC_ALL=C grep -obUaP "${magic#*:}" "$bz" | head -n1 | cut -d: -f1)
		[ -n "$off" ] || continue
		case $tool in
		xz) tail -c +$((off + 1)) "$bz" | xz -dc --single-stream >"$out.tmp" 2>/dev/null ;;
		zstd) tail -c +$((off + 1)) "$bz" | zstd -dcq >"$out.tmp" 2>/dev/null ;;
		gzip) tail -c +$((off + 1)) "$bz" | gzip -dcq >"$out.tmp" 2>/dev/null ;;
		esac
		if [ "$(head -c 4 "$out.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] &&
		   readelf -n "$out.tmp" 2>/dev/null | grep -q "Xen.*$PVH_NOTE_TYPE"; then
			mv "$out.tmp" "$out"
			return 0
		fi
	done
	rm -f "$out.tmp"
	return 1
}

# Derived from vmlinuz; an older cache entry gets it without a new download.
make_vmlinux() {
	local d=$1
	if extract_vmlinux "$d/vmlinuz" "$d/vmlinux"; then
		echo "guest-kernel: $d/vmlinux (PVH entry) extracted" >&2
	else
		echo "guest-kernel: no PVH-capable vmlinux in $d/vmlinuz; QEMU boots the bzImage (slower)" >&2
	fi
	: >"$d/.vmlinux-done"
}

for tool in apt-get dpkg-deb depmod modprobe flock readelf xz; do
	command -v "$tool" >/dev/null || die "'$tool' not found; run 'make deps'"
done
mkdir -p "$cache/kernel"
# One fetch at a time: other engineers' tests may call this concurrently.
exec 9>"$cache/kernel/.lock"
flock 9
if complete; then
	echo "$dir"
	exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hdr_version" ] &&
   [ -f "$dir/vmlinuz" ] && [ -s "$dir/guest-modules.order" ]; then
	make_vmlinux "$dir"
	echo "$dir"
	exit 0
fi

work=$(mktemp -d "$cache/kernel/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
# apt drops privileges to _apt for downloads; let it write here.
chmod 0755 "$work"
id _apt >/dev/null 2>&1 && chown _apt "$work" || true

download() {
	(cd "$work" && apt-get download -q "$img_pkg=$hdr_version") >"$work/apt.log" 2>&1
}
if ! download; then
	echo "guest-kernel: $img_pkg=$hdr_version not in the package lists; running apt-get update" >&2
	apt-get update -q >/dev/null 2>&1 || true
	if ! download; then
		cat "$work/apt.log" >&2
		avail=$(apt-cache policy "$img_pkg" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
		die "cannot download $img_pkg version $hdr_version (the installed $hdr_pkg).
  apt offers: ${avail:-nothing}.  Install headers and image of one version, e.g.
    apt-get update && apt-get install linux-headers-amd64   (then: make guest-kernel)
  or pick a release apt has with VMNAP_KVER=<release>-amd64 and install linux-headers-<release>-amd64."
	fi
fi
deb=$(ls "$work"/"$img_pkg"_*.deb)
deb_version=$(dpkg-deb -f "$deb" Version)
[ "$deb_version" = "$hdr_version" ] ||
	die "downloaded $img_pkg $deb_version but headers are $hdr_version; install matching versions"

stage=$work/root
dpkg-deb -x "$deb" "$stage"
[ -f "$stage/boot/vmlinuz-$ver" ] || die "$deb has no boot/vmlinuz-$ver"
[ -d "$stage/lib/modules/$ver" ] || die "$deb has no lib/modules/$ver"
ln -s "boot/vmlinuz-$ver" "$stage/vmlinuz"
depmod -b "$stage" "$ver"

# Resolve the boot modules with their dependencies and softdeps, in load
# order, without duplicates.  Built-in modules print "builtin" and are
# skipped; an unknown module is an error.
moddir=$stage/lib/modules/$ver
: >"$stage/guest-modules.order"
for m in $GUEST_MODULES; do
	out=$(modprobe -d "$stage" -S "$ver" --show-depends "$m" 2>&1) ||
		die "module $m not found in $img_pkg: $out"
	printf '%s\n' "$out" | sed -n "s|^insmod $moddir/||p" | sed 's/ *$//' \
		>>"$stage/guest-modules.order"
done
awk '!seen[$0]++' "$stage/guest-modules.order" >"$stage/guest-modules.order.tmp"
mv "$stage/guest-modules.order.tmp" "$stage/guest-modules.order"
make_vmlinux "$stage"
echo "$hdr_version" >"$stage/.complete"

rm -rf "$dir"
mv "$stage" "$dir"
echo "guest-kernel: $img_pkg $hdr_version -> $dir ($(wc -l <"$dir/guest-modules.order") boot modules)" >&2
echo "$dir"
