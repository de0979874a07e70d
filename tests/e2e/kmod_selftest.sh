#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod_selftest.sh [CPUS] - run vmnap_selftest (TAP) in a QEMU guest with
# CPUS vCPUs (default 2), a scratch virtio disk and a virtio NIC.  The
# module talks to the selftest's loopback peer (host_cid=1).  The launcher
# fails the run when the console shows BUG/WARNING/Oops/Call Trace.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
cpus=${1:-2}

module=$(scripts/kmod-build.sh --path)	# for the guest kernel VMNAP_KVER selects
[ -f "$module" ] || { echo "1..0 # SKIP $module not built (make module)"; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "1..0 # SKIP qemu-system-x86_64 missing"; exit 77; }

mkdir -p "$BUILD/kmod"
disk=$BUILD/kmod/selftest-$cpus.img
rm -f "$disk"
truncate -s 128M "$disk"
trap 'rm -f "$disk"' EXIT
scripts/run-guest.sh --cpus "$cpus" --mem 512 --timeout 600 \
	--name "kmod-selftest-$cpus" --disk "$disk" --net -- vmnap_selftest
