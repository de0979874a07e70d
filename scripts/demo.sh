#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# demo.sh - `make demo` (after `make deps` and `make all`): build the guest
# (Debian's kernel, busybox initramfs with vmnap.ko and the guest tools),
# then run the scripted agent session twice - vmnap disabled, then enabled -
# side by side (scripts/demo.py), print the table and write
# build/demo/summary.json.  A few minutes under TCG.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD

say() { echo "demo: $*"; }

for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" vmnap.ko; do
	[ -e "$f" ] || { say "missing $f: run 'make all' first"; exit 1; }
done
command -v qemu-system-x86_64 >/dev/null || { say "qemu-system-x86_64 missing: run 'make deps'"; exit 1; }
say "guest kernel: $(scripts/guest-kernel.sh)/vmlinuz"
say "initramfs: $(scripts/mkinitramfs.sh)"
exec python3 scripts/demo.py "$@"
