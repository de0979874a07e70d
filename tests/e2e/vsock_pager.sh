#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsock_pager.sh - the vhost-user-vsock device is a mapper of guest RAM: it
# must make evicted pages resident before it writes a guest buffer (TAP).
#
# Real QEMU with the preload shim (vmnapd's pager serves its RAM) and the
# vsock device on the same VM.  The guest posts its RX buffers at boot and
# fills half its RAM with a pattern (memfill); then the exercise of
# tests/lib/vsock_pager.sh: every page offloaded, 8 MiB written by the
# device into RX buffers that are not resident, data and pattern verified,
# the buffers read back by the pager's residency worker, never on vmnapd's
# event loop.  The ordering itself (residency asked before the first byte
# is written) is asserted by the unit test test_vhost_vsock
# (test_buffers_made_resident_before_write).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=vp
GUEST_MIB=256
FILL_PERCENT=50

TAP_NAME="vsock pager"
. tests/lib/tap.sh
# shellcheck source=tests/lib/vsock_pager.sh
. tests/lib/vsock_pager.sh

vsock_pager_boot vmnap-vsock-pager
vsock_pager_exercise
echo "1..$n"
[ "$failed" -eq 0 ]
