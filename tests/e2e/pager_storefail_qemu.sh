#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_storefail_qemu.sh - a real QEMU 7.2 guest (TCG; RAM through
# libvmnap-preload.so) whose store is on a real block device that fails:
# ext4 on a loop device (64 MiB) that is shrunk under the mounted file
# system (LOOP_SET_STATUS64 lo_sizelimit 1 MiB: every block past it fails
# with EIO in the block layer; lifting the limit brings them back).  This
# kernel has no device-mapper, so no dm-error/dm-flakey.  The guest fills
# >= 64 MiB with a pattern and its digest; vmnapd runs with
# fault_error_timeout_ms 2000.
#
#   1. ENOSPC: offloading more than the file system holds stops with
#      "No space left on device"; the guest verifies every byte
#   2. EIO during an offload (device shrunk): the offload stops with EIO;
#      the device comes back; the guest verifies every byte
#   3. EIO on faults for good (offloaded, then the device shrunk): past
#      2 s the VM is LOST - QEMU killed, the guest never prints a verdict
#      (no wrong bytes, no zeros), GET /vms/NAME "state": "LOST" with the
#      Input/output error, a vm_lost event (store_io)
#
# TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD

VM=pfail
GUEST_MIB=256
FILL_PERCENT=70
MIN_FILL_MIB=64
FS_MIB=64
GUEST_TIMEOUT=900
READY_TIMEOUT=600
VERIFY_TIMEOUT=600
LOST_TIMEOUT=300

# shellcheck source=tests/lib/pager_e2e.sh
. tests/lib/pager_e2e.sh vmnap-storefail-e2e
[ -e /dev/loop-control ] || skip "no loop devices (/dev/loop-control)"
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4 (e2fsprogs)"

dev=
pager_e2e_cleanup() {
	[ -n "$dev" ] || return 0
	limit 0
	umount "$store" 2>/dev/null
	losetup -d "$dev" 2>/dev/null
}
# limit BYTES: the loop device ends after BYTES (0: the whole file)
limit() {
	python3 - "$dev" "$1" <<'PY'
import fcntl, os, struct, sys
LOOP_SET_STATUS64, LOOP_GET_STATUS64 = 0x4C04, 0x4C05
fd = os.open(sys.argv[1], os.O_RDWR)
info = bytearray(232)                      # struct loop_info64
fcntl.ioctl(fd, LOOP_GET_STATUS64, info)
struct.pack_into("<Q", info, 32, int(sys.argv[2]))   # lo_sizelimit
fcntl.ioctl(fd, LOOP_SET_STATUS64, bytes(info))
PY
}
offloaded() { echo "$1" | jget '["stats"]["pages"]["offloaded"]'; }
mkdir -p "$store"
truncate -s "${FS_MIB}M" "$tmp/disk.img"
dev=$(losetup -f --show "$tmp/disk.img") || skip "cannot set up a loop device"
mkfs.ext4 -q -F "$dev" >/dev/null 2>&1 || skip "mkfs.ext4 $dev failed"
mount -o noatime "$dev" "$store" || skip "cannot mount ext4 from $dev"
chmod 0700 "$store"
echo '{"fault_error_timeout_ms": 2000}' >"$tmp/vmnapd.conf"
vmnapd_start "$tmp/vmnapd.log" "$RUN/pager-debug.sock" -- \
	-c "$tmp/vmnapd.conf" -r "$RUN" -s "$store" -e "$tmp/events.jsonl" -l info
check "vmnapd listens; store on ext4 on $dev ($FS_MIB MiB)" test -S "$RUN/mem.sock"
pager_e2e_fill "$FILL_PERCENT" "$MIN_FILL_MIB" "$READY_TIMEOUT" \
	--mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT"

# 1. ENOSPC
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "1: the offload stops: $(echo "$out" | jget '["error"]') ($(offloaded "$out") pages out)" \
	test "$(echo "$out" | jget '["error"]')" = "No space left on device"
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
memfill_verified 1 "1 (ENOSPC)"

# 2. EIO during an offload
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
check "2: the device fails past 1 MiB" limit $((1 << 20))
out=$(pager_dbg offload "$VM")
check "2: the offload stops: $(echo "$out" | jget '["error"]')" \
	test "$(echo "$out" | jget '["error"]')" = "Input/output error"
check "2: the device is back" limit 0
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
memfill_verified 2 "2 (EIO during the offload)"

# 3. EIO on faults, for good
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
n_out=$(offloaded "$out")
check "3: offloaded what fits ($n_out pages out: $(echo "$out" | jget '["error"]'))" \
	test "${n_out:-0}" -gt 0
check "3: the device fails past 1 MiB, for good" limit $((1 << 20))
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
deadline=$((SECONDS + LOST_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ] && [ "$(state 2>/dev/null)" != LOST ]; do sleep 0.2; done
j=$(vm_json)
vstate=$(echo "$j" | jget '["state"]') verr=$(echo "$j" | jget '.get("error", "")')
check "3: GET /vms/$VM: state $vstate, error: $verr" \
	test "$vstate" = LOST -a -n "$(echo "$verr" | grep 'Input/output error.*killed (1 process')"
for ((i = 0; i < 100; i++)); do
	if [ -z "$qpid" ] || ! kill -0 "$qpid" 2>/dev/null; then break; fi
	sleep 0.1
done
check "3: QEMU (pid ${qpid:-?}) was killed" test -n "$qpid" -a ! -e "/proc/${qpid:-0}"
guest_wait "$VM"
check "3: the guest never printed a third verdict (no wrong bytes, no zeros)" \
	test -z "$(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep 'MEMFILL VERIFY 3')"
check "3: a vm_lost event (store_io)" \
	test -n "$(grep '"vm_lost"' "$tmp/events.jsonl" | grep '"store_io"')"
check "vmnapd still runs and answers" test -n "$(kill -0 "$vmnapd_pid" && api http://vmnapd/)"
echo "1..$n"
[ "$failed" = 0 ]
