#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_lost_qemu.sh - a real QEMU 7.2 guest (TCG) whose RAM goes through
# libvmnap-preload.so loses a page in the store: the guest fills part of its
# RAM (>= 64 MiB) with a pattern and its digest, is paused and offloaded;
# then every stored slot gets one byte flipped (the slot map's crc32c no
# longer matches) and the guest reads its RAM back.  The first fault on a
# bad slot loses the VM: vmnapd kills QEMU (SIGKILL) - the vCPU blocked in
# the userfaultfd is never given the wrong bytes (no "MEMFILL VERIFY" line
# at all, neither OK nor BAD) nor zeros; GET /vms/NAME says "state":
# "LOST" with the error, its coordinator (registered, QMP pause backend,
# managed) no longer manages it; a vm_lost event and vmnap_vms_lost_total;
# the store file is removed; vmnapd still answers.  TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=plost
GUEST_MIB=256
FILL_PERCENT=70
MIN_FILL_MIB=64
GUEST_TIMEOUT=900
READY_TIMEOUT=600
LOST_TIMEOUT=300

# shellcheck source=tests/lib/pager_e2e.sh
. tests/lib/pager_e2e.sh vmnap-lost-e2e

vmnapd_start "$tmp/vmnapd.log" "$RUN/pager-debug.sock" -- \
	-r "$RUN" -s "$store" -e "$tmp/events.jsonl" -l info
check "vmnapd listens" test -S "$RUN/mem.sock" -a -S "$RUN/api.sock"
QMP=$tmp/$VM.qmp
pager_e2e_fill "$FILL_PERCENT" "$MIN_FILL_MIB" "$READY_TIMEOUT" \
	--mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" --qmp "$QMP"
api -X PUT "http://vmnapd/vms/$VM" -d '{}' >/dev/null
check "registered, QMP pause backend" vm_set_qmp_pause "$QMP"
check "managed" test -n "$(api -X PATCH "http://vmnapd/vms/$VM" -d '{"managed": true}' |
	grep '"managed":true')"

guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "offloaded ($(echo "$out" | jget '["stats"]["pages"]["offloaded"]') pages out)" \
	test "$(echo "$out" | jget '["ok"]')" = True
npages=$(echo "$out" | jget '["stats"]["pages_total"]')
bad=$(python3 - "$store/$VM.store" "$npages" <<'PY'
import os, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR)
data_off, page = 4096, 4096
smap = os.pread(fd, n * 8, data_off + n * page)
bad = 0
for i in range(n):
    crc, flags = struct.unpack_from("<II", smap, i * 8)
    if flags & 1:  # STORE_SLOT_STORED
        off = data_off + i * page + 100
        b = os.pread(fd, 1, off)
        os.pwrite(fd, bytes([b[0] ^ 0x5A]), off)
        bad += 1
os.fsync(fd)
print(bad)
PY
)
check "one byte flipped in each of the ${bad:-0} stored slots" test "${bad:-0}" -gt 0
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify

deadline=$((SECONDS + LOST_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ] && [ "$(state 2>/dev/null)" != LOST ]; do
	sleep 0.2
done
j=$(vm_json)
vstate=$(echo "$j" | jget '["state"]') verr=$(echo "$j" | jget '.get("error", "")')
check "GET /vms/$VM: state $vstate, error: $verr" \
	test "$vstate" = LOST -a -n "$(echo "$verr" | grep 'checksum mismatch.*killed (1 process')"
check "its coordinator no longer manages it" test "$(echo "$j" | jget '["managed"]')" = False
for ((i = 0; i < 100; i++)); do
	if [ -z "$qpid" ] || ! kill -0 "$qpid" 2>/dev/null; then break; fi
	sleep 0.1
done
check "QEMU (pid ${qpid:-?}) was killed" sh -c "[ -n '$qpid' ] && ! kill -0 '$qpid' 2>/dev/null"
rc=0
guest_wait "$VM" || rc=$?
check "the guest never printed a verdict: no wrong data, no zeros reached it (run-guest status $rc)" \
	sh -c "! tr -d '\r' <'$GUEST_DIR/$VM.log' | grep -q 'MEMFILL VERIFY'"
check "a vm_lost event (reason checksum)" \
	grep -q '"type": *"vm_lost".*"checksum"\|"checksum".*"type": *"vm_lost"' "$tmp/events.jsonl"
check "vmnapd: the LOST line in its log" grep -q "LOST: a fault could not be served" "$tmp/vmnapd.log"
m=$(api http://vmnapd/metrics)
check "metrics: vmnap_vms_lost_total 1, vmnap_vm_lost{vm=\"$VM\"} 1" \
	test -n "$(echo "$m" | grep '^vmnap_vms_lost_total 1$')" \
	-a -n "$(echo "$m" | grep "^vmnap_vm_lost{vm=\"$VM\"} 1$")"
for ((i = 0; i < 50; i++)); do [ -e "$store/$VM.store" ] || break; sleep 0.1; done
check "its store file is removed" test ! -e "$store/$VM.store"
check "vmnapd still runs and answers" test -n "$(kill -0 "$vmnapd_pid" && api http://vmnapd/)"
echo "1..$n"
[ "$failed" = 0 ]
