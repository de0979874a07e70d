#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# demo.sh - `make demo` at this stage: build the guest (Debian's kernel,
# busybox initramfs with vmnap.ko), boot it in QEMU, load vmnap.ko and show
# that it runs.  (`make demo` has already run `make deps` and `make all`.)
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DEMO_TIMEOUT_SEC=300
NAME=demo

say() { echo "demo: $*"; }

say "guest kernel: $(scripts/guest-kernel.sh)/vmlinuz"
image=$(scripts/mkinitramfs.sh)
say "initramfs: $image"
say "booting the guest in QEMU and loading vmnap.ko (console: $BUILD/guest/$NAME.log)"

guest_cmd='
insmod /lib/modules/vmnap.ko || exit 1
echo "module: $(grep "^vmnap " /proc/modules)"
echo "version-line: $(dmesg | grep "vmnap: .*version" | tail -n 1)"
for p in /sys/module/vmnap/parameters/*; do echo "param: ${p##*/}=$(cat "$p")"; done
echo "kernel: $(uname -r), $(nproc) vCPU"
'
rc=0
out=$(scripts/run-guest.sh --name "$NAME" --cpus 2 --timeout "$DEMO_TIMEOUT_SEC" \
	--initrd "$image" -- "$guest_cmd") || rc=$?
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out"
	say "FAILED: the guest run ended with status $rc (console: $BUILD/guest/$NAME.log)"
	exit 1
fi
version_line=$(sed -n 's/^version-line: //p' <<<"$out")
[ -n "$version_line" ] || { printf '%s\n' "$out"; say "FAILED: no version line from vmnap.ko"; exit 1; }
say "guest $(sed -n 's/^kernel: //p' <<<"$out")"
say "vmnap.ko loaded in the guest; it says:"
echo "    $version_line"
sed -n 's/^param: /    parameter /p' <<<"$out"
say "OK: the guest booted with vmnap.ko loaded"
