#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_highmem.sh - guest RAM above the PCI hole: the pager's GPA map must
# come from the vhost-user memory table, not from memfd offsets (TAP).
#
# QEMU q35 with 3 GiB puts 2 GiB of RAM at gpa 0 and the last GiB at gpa
# 4 GiB, memfd offset 2 GiB.  The preload shim can only guess gpa = memfd
# offset; vmnapd must take the true layout from the built-in
# vhost-user-vsock device's SET_MEM_TABLE.  Then the exercise of
# tests/lib/vsock_pager.sh (as tests/e2e/vsock_pager.sh): the guest fills
# RAM (the kernel prefers the high zone), the host stops it, offloads every
# page, continues it, and sends 8 MiB through the device into RX buffers
# that are not resident (they live above 4 GiB): each buffer is made
# resident by gpa, so a wrong map would refuse it or restore the wrong
# page.  Data and RAM pattern must verify.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=hm
GUEST_MIB=3072
FILL_PERCENT=25
HIGH_GPA=0x100000000

TAP_NAME="pager highmem"
. tests/lib/tap.sh
# shellcheck source=tests/lib/vsock_pager.sh
. tests/lib/vsock_pager.sh

vsock_pager_boot vmnap-pager-highmem

st=$(pager_dbg stats "$VM")
check "the handshake's GPA map was only a guess: replaced by the memory table" \
	grep -q "GPA guess (memfd offset) was wrong" "$W/vmnapd.log"
check "GPA map from the vhost-user memory table ($(echo "$st" | jget '["stats"]["gpa_source"]'))" \
	[ "$(echo "$st" | jget '["stats"]["gpa_source"]')" = mem_table ]
check "RAM above the PCI hole: gpa $HIGH_GPA is guest RAM page 524288 (memfd offset 2 GiB)" \
	grep -q "gpa $HIGH_GPA+0x40000000 = guest RAM page 524288" "$W/vmnapd.log"

vsock_pager_exercise
check "no GPA operation was refused" eval '! grep -q "refused: the guest-physical map" "$W/vmnapd.log"'
echo "1..$n"
[ "$failed" -eq 0 ]
