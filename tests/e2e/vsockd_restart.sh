#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsockd_restart.sh - the VM's vsock survives vmnapd SIGKILLs and restarts
# when its vhost-user-vsock device runs in vmnap-vsockd (real QEMU 7.2, TCG
# here, Debian guest kernel, vmnap.ko, the preload shim in QEMU and in
# vmnap-vsockd).  The guest loads the module (guest link through the device
# to vmnapd's "<uds>_5151"), serves an echo server on vsock port 1234 (the
# exec agent's port: the exec channel) and fills >= 64 MiB of its RAM with
# a digest (memfill).  A host stream to port 1234 opened at the start
# (vsock_session.py) is used after every step.
#
#   A. vmnapd killed while the VM runs: vmnap-vsockd lives on; the open
#      exec stream echoes while no vmnapd runs; a restarted vmnapd adopts
#      the VM (both mappers: QEMU and vmnap-vsockd), the module's link
#      comes back, a new exec stream works, the guest verifies its RAM.
#   B. vmnapd killed while the VM is offloaded (the rings and buffers the
#      device touches are evicted too): the device waits on its evicted
#      pages like the vCPUs (the exec round does not complete, the guest
#      does not verify), never reads zeros; after the restart both
#      complete, the link comes back, the guest verifies every byte.
#
# VSOCKD_E2E_DEVICE=builtin runs the same checks with vmnapd's built-in
# device instead (the state before vmnap-vsockd): they fail from the first
# kill on, since QEMU 7.2 does not reconnect its vhost-user chardev.
# TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=vsd
CID=3
ANY=4294967295			# VMADDR_CID_ANY
EXEC_PORT=1234
GUEST_MIB=256
FILL_PERCENT=60
MIN_FILL_MIB=64
GUEST_TIMEOUT=1500
READY_TIMEOUT=600
VERIFY_TIMEOUT=600
ROUND_TIMEOUT=600
LINK_TIMEOUT=120
ADOPT_TIMEOUT=60
DOWN_SEC=3			# how long the VM is watched while no vmnapd runs
DEVICE=${VSOCKD_E2E_DEVICE:-process}	# process (vmnap-vsockd) | builtin

TAP_NAME="vsockd restart"
. tests/lib/tap.sh
# shellcheck source=tests/lib/guest.sh
. tests/lib/guest.sh
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
guest_require "$BUILD/vmnapd" "$BUILD/vmnap-vsockd" "$BUILD/libvmnap-preload.so" \
	"$BUILD/tests/selftests/memfill" "$BUILD/tests/selftests/vsock_xfer"
[ -f vmnap.ko ] || skip "vmnap.ko not built (make module)"

tmp=$(mktemp -d /tmp/vmnap-vsockd-e2e.XXXXXX)
RUN=$tmp/run store=$tmp/store VU=$tmp/vu.sock UDS=$tmp/v.sock
daemons=0 vsockd_pid='' session_pid=''

# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh
finish() {
	exec 7>&- 2>/dev/null
	[ -n "$session_pid" ] && kill "$session_pid" 2>/dev/null
	guest_cleanup	# QEMU first: vmnap-vsockd then exits by itself
	[ -n "$vsockd_pid" ] && kill "$vsockd_pid" 2>/dev/null && wait "$vsockd_pid" 2>/dev/null
	vmnapd_cleanup "$tmp"
}
trap finish EXIT

start_vmnapd() {
	daemons=$((daemons + 1))
	vmnapd_start "$tmp/vmnapd-$daemons.log" "$RUN/api.sock" -- \
		-r "$RUN" -s "$store" -l info
}
# register: what vmnapd keeps only in memory (see README, Failure behaviour)
register() {
	local body="{\"link\": {\"hybrid\": \"$UDS\"}}"

	[ "$DEVICE" = builtin ] &&
		body="{\"vsock\": {\"vhost_user\": \"$VU\", \"cid\": $CID, \"uds\": \"$UDS\"}}"
	api -X PUT "http://vmnapd/vms/$VM" -d "$body" | grep -q '"name"'
}
# vsockd_in_uffd: vmnap-vsockd's loop waits in its userfaultfd (a page of
# guest RAM it touched is evicted and no vmnapd serves it)
vsockd_in_uffd() {
	local deadline=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$deadline" ]; do
		grep -q handle_userfault "/proc/$vsockd_pid/task/$vsockd_pid/stack" 2>/dev/null &&
			return 0
		sleep 0.2
	done
	return 1
}
# round NAME [TIMEOUT]: one echo round on the long-lived exec stream
round() {
	local deadline=$((SECONDS + ${2:-$ROUND_TIMEOUT}))
	echo "$1" >&7
	while [ "$SECONDS" -lt "$deadline" ]; do
		grep -q "^ROUND $1 " "$tmp/session.log" && break
		sleep 0.2
	done
	grep -q "^ROUND $1 OK" "$tmp/session.log"
}
round_done() { grep -q "^ROUND $1 " "$tmp/session.log"; }
new_stream() {
	"$BUILD/tests/selftests/vsock_xfer" client "hybrid:$UDS:$EXEC_PORT" echo:$((256 << 10)) \
		-t "$ROUND_TIMEOUT" >>"$tmp/xfer.log" 2>&1
}
# after_restart STEP: vmnapd back, VM adopted, link and exec channel back
after_restart() {
	start_vmnapd
	check "$1: vmnap-vsockd outlived vmnapd" kill -0 "$vsockd_pid"
	check "$1: VM registered again (guest link on ${UDS}_5151)" register
	pager_adopted "$1: QEMU and vmnap-vsockd handed guest RAM again" 2
	check "$1: the module reconnected: link up" wait_link up "$LINK_TIMEOUT"
	check "$1: a new exec stream (CONNECT $EXEC_PORT, 256 KiB echoed)" new_stream
}

start_vmnapd
check "vmnapd listens" test -S "$RUN/mem.sock" -a -S "$RUN/api.sock"
register || { not_ok "VM registered (guest link on ${UDS}_5151)"; echo "1..$n"; exit 1; }
if [ "$DEVICE" = process ]; then
	env LD_PRELOAD="$PWD/$BUILD/libvmnap-preload.so" VMNAP_SOCKET="$RUN/mem.sock" \
		VMNAP_VM="$VM" "$BUILD/vmnap-vsockd" --vhost-user "$VU" --cid "$CID" --uds "$UDS" \
		-l debug >"$tmp/vsockd.log" 2>&1 &
	vsockd_pid=$!
fi
for ((i = 0; i < 100; i++)); do [ -S "$VU" ] && break; sleep 0.1; done
check "the $DEVICE device serves $VU" test -S "$VU"

preload_opts
guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" --vsock-user "$VU" \
	"${PRELOAD_OPTS[@]}" -- "
insmod /lib/modules/vmnap.ko
vsock_xfer serve vsock:$ANY:$EXEC_PORT echo -n 0 -t $GUEST_TIMEOUT >/tmp/echo.log 2>&1 &
sleep 1
echo EXEC-READY
memfill $FILL_PERCENT </dev/ttyS1"
if guest_wait_console "$VM" 'MEMFILL READY' "$READY_TIMEOUT"; then
	line=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -o 'MEMFILL READY.*')
	mib=$(echo "$line" | sed -n 's/.*mib=\([0-9]*\).*/\1/p')
	check "guest filled ${mib:-?} MiB (>= $MIN_FILL_MIB) with its digest" \
		test "${mib:-0}" -ge "$MIN_FILL_MIB"
else
	not_ok "guest filled its RAM"
	tail -n 30 "$GUEST_DIR/$VM.err" "$tmp/vsockd.log" "$tmp/vmnapd-1.log" | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi
check "vmnap-vsockd is a second mapper of guest RAM" test "$(pager_stat mappers)" -ge 2
check "the module's link came up through vmnap-vsockd" wait_link up "$LINK_TIMEOUT"

mkfifo "$tmp/session.in"
python3 tests/e2e/vsock_session.py "$UDS" "$EXEC_PORT" <"$tmp/session.in" \
	>"$tmp/session.log" 2>&1 &
session_pid=$!
exec 7>"$tmp/session.in"
check "exec stream opened (CONNECT $EXEC_PORT)" round r0

# A. killed while the VM runs
vmnapd_kill
check "A: vmnapd killed (VM running): the open exec stream echoes meanwhile" round ra-down
after_restart A
# the VM runs: the guest hears the ring at once (offloaded in B and C, it
# may hear it only after the ring gave up; the module reconnects anyway)
check "A: registration rang the module's doorbell through vmnap-vsockd: answered" \
	[ "$(vm_json | jget '["link"]["doorbell"]["answered"]')" = 1 ]
check "A: the exec stream opened before the kill still echoes" round ra
guest_send "$VM" verify
memfill_verified 1 "A (killed running)"

# B. killed while the VM is offloaded
guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
check "B: offloaded ($(echo "$out" | jget '["stats"]["pages"]["offloaded"]') pages out)" \
	test "$(echo "$out" | jget '["ok"]')" = True
vmnapd_kill
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
guest_send "$VM" verify
echo rb >&7
sleep "$DOWN_SEC"
check "B: vmnapd killed (VM offloaded): the guest waits on its evicted pages (no VERIFY line)" \
	sh -c "! tr -d '\r' <'$GUEST_DIR/$VM.log' | grep -q 'MEMFILL VERIFY 2'"
check "B: the exec round waits meanwhile (not done, not failed)" \
	sh -c "! grep -q '^ROUND rb ' '$tmp/session.log'"
check "B: vmnap-vsockd waits in its userfaultfd on an evicted page (not zeros)" vsockd_in_uffd
after_restart B
deadline=$((SECONDS + ROUND_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ] && ! round_done rb; do sleep 0.2; done
check "B: the exec round sent while no vmnapd ran completed, every byte echoed" \
	grep -q '^ROUND rb OK' "$tmp/session.log"
memfill_verified 2 "B (killed offloaded)"
check "B: the exec stream opened at the start still echoes" round rb2

check "exec stream: no round failed" sh -c "! grep -q '^ROUND .* BAD' '$tmp/session.log'"
exec 7>&-
kill "$session_pid" 2>/dev/null	# children (the guest's feeder) hold the fifo too
wait "$session_pid" 2>/dev/null
session_pid=
guest_send "$VM" quit
rc=0
guest_wait "$VM" || rc=$?
check "guest exited cleanly, no BUG/WARNING on the console (run-guest status $rc)" test "$rc" = 0
for ((i = 0; i < 100; i++)); do kill -0 "$vsockd_pid" 2>/dev/null || break; sleep 0.1; done
check "vmnap-vsockd exits with its QEMU" sh -c "! kill -0 $vsockd_pid 2>/dev/null"
vsockd_pid=
for ((i = 0; i < 50; i++)); do [ -e "$store/$VM.store" ] || break; sleep 0.1; done
check "QEMU and vmnap-vsockd gone: the store file is removed" test ! -e "$store/$VM.store"
if [ "$failed" -gt 0 ]; then
	tail -n 40 "$tmp/vsockd.log" | sed 's/^/# vsockd: /'
	sed 's/^/# session: /' "$tmp/session.log"
fi
echo "1..$n"
[ "$failed" = 0 ]
