#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# mkinitramfs.sh - build the guest initramfs $BUILD/guest/initramfs.cpio.gz
# (BUILD defaults to build; for a kernel other than the default one chosen
# with VMNAP_KVER, $BUILD/guest-<release>/initramfs.cpio.gz) from:
#   busybox-static            /bin/busybox + applet links
#   scripts/guest-init        /init
#   guest kernel modules      /lib/modules/<ver>/... (guest-modules.order,
#                             modules.dep from depmod: modprobe works)
#   optional kernel modules   OPTIONAL_MODULES below with their dependencies,
#                             present for modprobe but not loaded at boot
#   vmnap.ko                  /lib/modules/vmnap.ko (not loaded at boot), the
#                             build for this kernel (scripts/kmod-build.sh)
#   $(GUEST_PROGRAMS)         /usr/bin/<name>, with their shared libraries
# Skips the work when none of these inputs changed (content hash).
# Needs the guest kernel (scripts/guest-kernel.sh, called here; cached) and
# the build (make all).  Prints the image path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
die() { echo "mkinitramfs: $*" >&2; exit 1; }

BUILD=${BUILD:-build}
busybox=/bin/busybox
init=$here/guest-init

kdir=$("$here/guest-kernel.sh") || die "guest kernel unavailable (see above)"
ver=$("$here/guest-kver.sh")
moddir=$kdir/lib/modules/$ver
module=$("$here/kmod-build.sh" --path)
out_dir=$BUILD/guest
[ "$(dirname "$module")" = "$root" ] || out_dir=$BUILD/guest-$ver
out=$out_dir/initramfs.cpio.gz
stamp=$out_dir/initramfs.inputs

[ -x "$busybox" ] || die "$busybox missing; run 'make deps' (busybox-static)"
if ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked; install busybox-static ('make deps')"
fi


program_list=$(make -s --no-print-directory print-guest-programs) ||
	die "cannot list GUEST_PROGRAMS ('make print-guest-programs' failed)"
read -r -a programs <<<"$program_list"
for p in ${programs[@]+"${programs[@]}"}; do
	[ -x "$p" ] || die "guest program $p not built; run 'make all'"
done

# Shared libraries of a program, as the absolute paths ldd resolves
# (including the dynamic loader).  Static programs have none.
shared_libs() {
	{ ldd "$1" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\//{print $1}'
}
mapfile -t libs < <(for p in ${programs[@]+"${programs[@]}"}; do shared_libs "$p"; done | sort -u)

# Modules a test may modprobe: virtio_balloon (it holds free page reporting,
# vmnap.ko's -EBUSY path).  Resolved with their dependencies like the boot
# modules (guest-kernel.sh), not loaded at boot.
OPTIONAL_MODULES="virtio_balloon"
mapfile -t optional_modules < <(for m in $OPTIONAL_MODULES; do
	modprobe -d "$kdir" -S "$ver" --show-depends "$m" | sed -n "s|^insmod $moddir/||p" |
		sed 's/ *$//'
done)

# Content hash of every input decides whether to rebuild.
mapfile -t boot_modules <"$kdir/guest-modules.order"
inputs=("$0" "$init" "$busybox" "$module" "$kdir/.complete"
	"${boot_modules[@]/#/$moddir/}" "${optional_modules[@]/#/$moddir/}"
	${programs[@]+"${programs[@]}"} ${libs[@]+"${libs[@]}"})
digest=$( { printf '%s\n' "$ver" ${programs[@]+"${programs[@]}"}; sha256sum "${inputs[@]}"; } | sha256sum | cut -d' ' -f1)
up_to_date() { [ -f "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; }
if up_to_date; then
	echo "$out"
	exit 0
fi

mkdir -p "$out_dir"
# One builder at a time (tests and people run this concurrently).
exec 8>"$out_dir/.initramfs.lock"
flock 8
if up_to_date; then
	echo "$out"
	exit 0
fi
stage=$(mktemp -d "$out_dir/.initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,lib/modules,etc,root,proc,sys,dev,run,tmp}
chmod 1777 "$stage/tmp"
# The kernel opens /dev/console for init before devtmpfs is mounted.
mknod -m 0600 "$stage/dev/console" c 5 1
mknod -m 0666 "$stage/dev/null" c 1 3

cp "$busybox" "$stage/bin/busybox"
for a in $("$busybox" --list-full); do
	[ -e "$stage/$a" ] || ln -s /bin/busybox "$stage/$a"
done
install -m 0755 "$init" "$stage/init"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
printf 'root:x:0:\n' >"$stage/etc/group"

smod=$stage/lib/modules/$ver
for m in "${boot_modules[@]}" "${optional_modules[@]}"; do
	install -D -m 0644 "$moddir/$m" "$smod/$m"
done
cp "$kdir/guest-modules.order" "$smod/"
cp "$moddir"/modules.builtin "$moddir"/modules.builtin.modinfo "$moddir"/modules.order "$smod/"
depmod -b "$stage" "$ver"
install -m 0644 "$module" "$stage/lib/modules/vmnap.ko"

mkdir -p "$stage/etc/vmnap"
for p in ${programs[@]+"${programs[@]}"}; do
	install -m 0755 "$p" "$stage/usr/bin/$(basename "$p")"
	echo "/usr/bin/$(basename "$p")" >>"$stage/etc/vmnap/guest-programs"
done
for l in ${libs[@]+"${libs[@]}"}; do
	install -D -m 0755 "$l" "$stage$l"
done

(cd "$stage" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc -R 0:0 --quiet) | gzip -6 -n >"$out.tmp"
mv "$out.tmp" "$out"
echo "$digest" >"$stamp"
echo "mkinitramfs: $out ($(du -h "$out" | cut -f1), ${#boot_modules[@]} modules," \
	"${#programs[@]} programs)" >&2
echo "$out"
