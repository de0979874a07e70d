#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_vmmkill_qemu.sh - QEMU 7.2 (TCG; RAM through libvmnap-preload.so)
# is SIGKILLed while its VM is offloaded: vmnapd drops the VM's pager,
# deletes its store file and closes every fd it held for it (the count in
# /proc/<vmnapd>/fd is back to where it was before QEMU came); the
# departure is counted (mem_handshake.mappers_gone, vmnap_mappers_gone_total);
# the VM is not LOST; vmnapd still answers.  TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=pkill
GUEST_MIB=256
FILL_PERCENT=45
MIN_FILL_MIB=64
GUEST_TIMEOUT=900
READY_TIMEOUT=600
GONE_TIMEOUT=30

# shellcheck source=tests/lib/pager_e2e.sh
. tests/lib/pager_e2e.sh vmnap-vmmkill-e2e
nfds() { find "/proc/$vmnapd_pid/fd" -mindepth 1 -maxdepth 1 | wc -l; }

vmnapd_start "$tmp/vmnapd.log" "$RUN/pager-debug.sock" -- \
	-r "$RUN" -s "$store" -l info
check "vmnapd listens" test -S "$RUN/mem.sock" -a -S "$RUN/api.sock"
fds0=$(nfds)
pager_e2e_fill "$FILL_PERCENT" "$MIN_FILL_MIB" "$READY_TIMEOUT" \
	--mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT"
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "offloaded ($(echo "$out" | jget '["stats"]["pages"]["offloaded"]') pages out); vmnapd holds $(($(nfds) - fds0)) more fds" \
	test "$(echo "$out" | jget '["ok"]')" = True -a -e "$store/$VM.store"

check "QEMU (pid ${qpid:-?}) SIGKILLed" kill -KILL "${qpid:-0}"
deadline=$((SECONDS + GONE_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ] && [ -e "$store/$VM.store" ]; do sleep 0.1; done
check "its store file is deleted" test ! -e "$store/$VM.store"
fds1=$(nfds)
for ((i = 0; i < 50 && fds1 != fds0; i++)); do sleep 0.1; fds1=$(nfds); done
check "no fd left in /proc/$vmnapd_pid/fd: $fds1 open, $fds0 before QEMU came" test "$fds1" = "$fds0"
gone=$(api http://vmnapd/ | jget '["rejections"]["mem_handshake"]["mappers_gone"]')
check "counted: mappers_gone $gone" test "$gone" = 1
check "the VM is not LOST (state $(state))" test "$(state)" != LOST
check "vmnapd still runs and answers" test -n "$(kill -0 "$vmnapd_pid" && api http://vmnapd/)"
guest_wait "$VM"
echo "1..$n"
[ "$failed" = 0 ]
