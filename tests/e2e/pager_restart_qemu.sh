#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_restart_qemu.sh - vmnapd SIGKILLed and restarted under a real QEMU
# 7.2 guest (TCG here) whose RAM goes through libvmnap-preload.so.  The
# guest fills part of its RAM (>= 64 MiB) with a pseudo-random pattern
# (memfill, with a digest); three times in one boot vmnapd is killed and
# restarted on the same run and store directories:
#
#   1. offloaded, then the guest continued: it cannot get past its evicted
#      pages while no vmnapd runs (no VERIFY line, never zeros); the shim
#      hands the RAM to the restarted vmnapd, the API shows "recovered",
#      and the guest verifies every byte
#   2. mid-restore: while the guest reads its RAM back by faults
#   3. mid-offload: while an offload runs (the guest paused)
#
# After each restart the guest verifies every byte against its digest.
# Where in the restore or offload a kill lands is up to the scheduler: the
# adoption line says what the new vmnapd found (pages still out, pages
# back in the memfd); the checks hold wherever it lands.
# run-guest.sh fails the run on BUG/WARNING/Oops.  TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=pgr
GUEST_MIB=256
FILL_PERCENT=70
MIN_FILL_MIB=64
GUEST_TIMEOUT=1500
READY_TIMEOUT=600
VERIFY_TIMEOUT=600
ADOPT_TIMEOUT=60
DOWN_SEC=3		# how long the guest is watched while no vmnapd runs

# shellcheck source=tests/lib/pager_e2e.sh
. tests/lib/pager_e2e.sh vmnap-restart-e2e
daemons=0

start_vmnapd() {
	daemons=$((daemons + 1))
	vmnapd_start "$tmp/vmnapd-$daemons.log" "$RUN/pager-debug.sock" -- \
		-r "$RUN" -s "$store" -l info
}
# wait_above TIMEOUT VALUE KEY...: until the stat exceeds VALUE
wait_above() {
	local deadline=$((SECONDS + $1)) v=$2
	shift 2
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(pager_stat "$@")" -gt "$v" ] && return 0
		sleep 0.05
	done
	return 1
}

start_vmnapd
check "vmnapd listens on mem.sock and pager-debug.sock" test -S "$RUN/mem.sock" -a -S "$RUN/pager-debug.sock"
preload_opts
guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" "${PRELOAD_OPTS[@]}" \
	-- "memfill $FILL_PERCENT </dev/ttyS1"
if guest_wait_console "$VM" 'MEMFILL READY' "$READY_TIMEOUT"; then
	line=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -o 'MEMFILL READY.*')
	mib=$(echo "$line" | sed -n 's/.*mib=\([0-9]*\).*/\1/p')
	check "guest filled ${mib:-?} MiB (>= $MIN_FILL_MIB) with its digest: $line" \
		test "${mib:-0}" -ge "$MIN_FILL_MIB"
else
	not_ok "guest filled its RAM"
	sed 's/^/# /' "$GUEST_DIR/$VM.err" "$tmp/vmnapd-1.log" | tail -n 30
	echo "1..$n"
	exit 1
fi

# 1. killed while offloaded; the guest continues without vmnapd
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "1: offloaded ($(echo "$out" | jget '["stats"]["pages"]["offloaded"]') pages out)" \
	test "$(echo "$out" | jget '["ok"]')" = True
vmnapd_kill
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
sleep "$DOWN_SEC"
check "1: vmnapd killed, guest continued: it waits on its evicted pages (no VERIFY line, no zeros)" \
	sh -c "! tr -d '\r' <'$GUEST_DIR/$VM.log' | grep -q 'MEMFILL VERIFY 1'"
start_vmnapd
pager_adopted "1 (killed offloaded)"
memfill_verified 1 "1 (killed offloaded)"

# 2. killed while the guest reads its RAM back by faults
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "2: offloaded by the adopting vmnapd" test "$(echo "$out" | jget '["ok"]')" = True
base=$(pager_stat faults)
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
wait_above 120 "$base" faults
vmnapd_kill
start_vmnapd
pager_adopted "2 (killed mid-restore)"
memfill_verified 2 "2 (killed mid-restore)"

# 3. killed while an offload runs
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
pager_dbg offload "$VM" >/dev/null 2>&1 &
bg=$!
wait_above 120 0 pages offloaded
vmnapd_kill
wait "$bg" 2>/dev/null
start_vmnapd
pager_adopted "3 (killed mid-offload)"
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
memfill_verified 3 "3 (killed mid-offload)"

guest_send "$VM" quit
rc=0
guest_wait "$VM" || rc=$?
check "guest exited cleanly, no BUG/WARNING on the console (run-guest status $rc)" test "$rc" = 0
for ((i = 0; i < 50; i++)); do [ -e "$store/$VM.store" ] || break; sleep 0.1; done
check "QEMU gone: its store file is removed" test ! -e "$store/$VM.store"
echo "1..$n"
[ "$failed" = 0 ]
