#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod_freepage.sh - free page reporting never lets vmnapd punch a page
# the guest reuses (TAP).  Real QEMU with the preload shim (vmnapd's pager
# owns guest RAM, so a FREE_REPORT really punches the memfd) and vmnapd's
# vsock device; vmnap.ko loaded with host_cid=2 (free_ack_ms 1000).
#
#   1. vmnapd stopped (SIGSTOP); the guest fills and frees most of its RAM
#      (memfill), so page_reporting sends a FREE_REPORT that vmnapd cannot
#      answer; the test waits until it has been outstanding longer than
#      free_ack_ms (the module warned, or counted a failed batch).  The
#      guest then fills its RAM again with a pattern (memfill kept
#      running), vmnapd continues (SIGCONT) and punches what it was sent;
#      the pattern must verify.
#   2. The same with the link dropped by the guest while vmnapd is stopped
#      (the FREE_REPORT is still in vmnapd's queue): rmmod is refused while
#      the batch is orphaned, the pattern written meanwhile must verify
#      after vmnapd continued, punched and the module reconnected.
#
# With a reporter that hands pages back after free_ack_ms (or at link
# loss) the pattern is punched to zeros and the verify fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=kfp
CID=3
GUEST_MIB=384
FILL_PERCENT=70
GUEST_TIMEOUT=1500
BOOT_WAIT=300
STEP_WAIT=120
# memfill under TCG on a loaded host: a few MiB/s at worst
FILL_WAIT=600
# page_reporting's delay (2 s) + free_ack_ms (1 s) + a loaded TCG guest
HELD_WAIT=120
# longer than page_reporting's delay between passes (2 s)
SETTLE_SEC=5

TAP_NAME="kmod free page reporting e2e"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v curl >/dev/null || skip "curl not installed"
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill" vmnap.ko; do
	[ -e "$f" ] || skip "$f not built (make all; make module)"
done

W=$(mktemp -d /tmp/vmnap-kmod-freepage.XXXXXX)
RUN=$W/run
. tests/lib/guest.sh
. tests/lib/vmnapd.sh
trap 'vmnapd_cleanup "$W"' EXIT

# gdo TAG TIMEOUT CMD: run CMD in the guest, its output lines prefixed "TAG:"
step=0
gdo() {
	local tag=$1 timeout=$2
	step=$((step + 1))
	guest_send "$VM" "{ $3 ; } 2>&1 | sed 's/^/$tag:/'; echo DONE-$step"
	guest_wait_console "$VM" "^DONE-$step" "$timeout" >/dev/null
}
# gval TAG KEY: value of KEY=... in what gdo TAG printed
gval() { tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n "s/^$1:$2=//p" | tail -n 1; }
glines() { tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n "s/^$1://p"; }
# dropped: pages vmnapd's pager punched for FREE_REPORTs
dropped() {
	vm_json | python3 -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        if "dropped_free_pages" in o:
            return o["dropped_free_pages"]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    return None
try:
    r = find(json.load(sys.stdin))
except ValueError:
    r = None
print(-1 if r is None else r)'
}
# wait_dropped_above N: vmnapd punched more than N pages, then settled
wait_dropped_above() {
	local deadline=$((SECONDS + STEP_WAIT)) d prev=-1
	while [ "$SECONDS" -lt "$deadline" ]; do
		d=$(dropped)
		if [ "$d" -gt "$1" ] && [ "$d" = "$prev" ]; then
			return 0
		fi
		prev=$d
		sleep 1
	done
	echo "# dropped_free_pages $(dropped), wanted > $1"
	return 1
}
# settle_reports: what the guest freed last is reported (page_reporting
# waits 2 s before a pass): no new punch for SETTLE_SEC, so that a fill
# sized from MemAvailable is not squeezed by pages isolated meanwhile
settle_reports() {
	local deadline=$((SECONDS + STEP_WAIT)) d prev
	prev=$(dropped)
	while [ "$SECONDS" -lt "$deadline" ]; do
		sleep "$SETTLE_SEC"
		d=$(dropped)
		[ "$d" = "$prev" ] && return 0
		prev=$d
	done
	return 1
}
# held TAG FAILS0: a FREE_REPORT has been outstanding past free_ack_ms: the
# module warned about it, or (a reporter that gives up) counted a failure
held() {
	local tag=$1 fails0=$2 i
	for i in $(seq "$HELD_WAIT"); do
		gdo "$tag$i" "$STEP_WAIT" "vmnap-guest status | grep counter.free_fails; dmesg | grep -c 'no FREE_REPORT_ACK after' | sed 's/^/warned=/'" ||
			return 1
		[ "$(gval "$tag$i" warned)" -gt "${warned0:-0}" ] && return 0
		[ "$(gval "$tag$i" counter.free_fails)" -gt "$fails0" ] && return 0
		sleep 1
	done
	return 1
}
# fill_and_free TAG: fill FILL_PERCENT of MemAvailable and free it again
fill_and_free() {
	gdo "$1" "$FILL_WAIT" "memfill $FILL_PERCENT </dev/null | tail -n 2"
	glines "$1" | grep -q 'MEMFILL BYE'
}
# pattern_start TAG: memfill keeps a pattern in FILL_PERCENT of what is available
pattern_start() {
	gdo "$1" "$FILL_WAIT" "rm -f /tmp/mf /tmp/mf.out; mkfifo /tmp/mf; (memfill $FILL_PERCENT <>/tmp/mf >/tmp/mf.out 2>&1 &); for i in \$(seq 1200); do grep -q 'MEMFILL READY\|MEMFILL ERROR' /tmp/mf.out && break; sleep 0.5; done; cat /tmp/mf.out"
	glines "$1" | grep -q 'MEMFILL READY'
}
# pattern_verify TAG ROUND: memfill re-reads its pattern
pattern_verify() {
	gdo "$1" "$FILL_WAIT" "echo verify 1<>/tmp/mf; for i in \$(seq 1200); do grep -q 'MEMFILL VERIFY $2 ' /tmp/mf.out && break; sleep 0.5; done; cat /tmp/mf.out"
	glines "$1" | grep -q "MEMFILL VERIFY $2 OK"
}
# (a FIFO opened read-write: never blocks, even when memfill has exited)
pattern_stop() { gdo "$1" "$STEP_WAIT" "echo quit 1<>/tmp/mf; sleep 1; cat /tmp/mf.out"; }

vmnapd_start "$W/vmnapd.log" "$RUN/api.sock" -- \
	-r "$RUN" -s "$W/store" -e "$W/events.jsonl" -l debug
reg=$(vm_register_vsock "$W/vu.sock" "$CID" "$W/v.sock" -w ' %{http_code}')
check "VM registered with a vsock device" sh -c "echo '$reg' | grep -q ' 20[01]\$'"

preload_opts
guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" --vsock-user "$W/vu.sock" \
	"${PRELOAD_OPTS[@]}" -- "
insmod /lib/modules/vmnap.ko host_cid=2 test_hooks=1 || echo INSMOD-FAILED
$VMNAPD_GUEST_LOOP"
if guest_wait_console "$VM" '^GUEST-UP' "$BOOT_WAIT"; then
	ok "guest booted with the preload shim, module loaded (host_cid=2)"
else
	not_ok "guest booted with the preload shim, module loaded (host_cid=2)"
	tail -n 20 "$GUEST_DIR/$VM.log" "$GUEST_DIR/$VM.err" "$W/vmnapd.log" | sed 's/^/# /'
	echo "1..$n"; exit 1
fi
check "vmnapd sees the link up" wait_link up 60
check "the first reporting pass punched free pages (pager dropped_free_pages)" \
	wait_dropped_above 0

# ---- 1. vmnapd stopped past free_ack_ms while a report is in flight ----
check "reporting settled before the round" settle_reports
gdo S0 "$STEP_WAIT" "vmnap-guest status | grep counter.free_; dmesg | grep -c 'no FREE_REPORT_ACK after' | sed 's/^/warned=/'"
fails0=$(gval S0 counter.free_fails) reports0=$(gval S0 counter.free_reports)
warned0=$(gval S0 warned)
d0=$(dropped)
kill -STOP "$vmnapd_pid"
check "vmnapd stopped: the guest filled and freed $FILL_PERCENT% of its available RAM" \
	fill_and_free F1
check "a FREE_REPORT outstanding past free_ack_ms while vmnapd is stopped" held H1 "${fails0:-0}"
check "guest RAM refilled with a pattern while the report is outstanding" pattern_start P1
kill -CONT "$vmnapd_pid"
check "vmnapd continued and punched what it was sent" wait_dropped_above "$d0"
check "the pattern written after the report verifies (no reused page punched)" \
	pattern_verify V1 1
glines V1 | grep MEMFILL | sed 's/^/# /'
gdo S1 "$STEP_WAIT" "vmnap-guest status | grep counter.free_"
check "the outstanding batch was acked, not given up (free_fails ${fails0:-?} -> $(gval S1 counter.free_fails), free_reports ${reports0:-?} -> $(gval S1 counter.free_reports))" \
	sh -c "[ '$(gval S1 counter.free_fails)' = '${fails0:-x}' ] && [ '$(gval S1 counter.free_reports)' -gt '${reports0:-0}' ]"
pattern_stop Q1

# ---- 2. link dropped by the guest while vmnapd is stopped ----
check "link up again before the next round" wait_link up 60
check "reporting settled before the round" settle_reports
gdo S2 "$STEP_WAIT" "vmnap-guest status | grep counter.free_; dmesg | grep -c 'no FREE_REPORT_ACK after' | sed 's/^/warned=/'"
fails0=$(gval S2 counter.free_fails) warned0=$(gval S2 warned)
d0=$(dropped)
kill -STOP "$vmnapd_pid"
check "vmnapd stopped: the guest filled and freed its RAM again" fill_and_free F2
check "a FREE_REPORT outstanding past free_ack_ms (second round)" held H2 "${fails0:-0}"
gdo DROP "$STEP_WAIT" "vmnap-guest test-drop-link >/dev/null; vmnap-guest status | grep -E '^link=|counter.free_fails'"
gdo RM "$STEP_WAIT" "rmmod vmnap && echo rmmod=gone || echo rmmod=refused"
check "rmmod refused while the batch is orphaned (link down, vmnapd may still act)" \
	test "$(gval RM rmmod)" = refused
check "guest RAM refilled with a pattern while the batch is orphaned" pattern_start P2
kill -CONT "$vmnapd_pid"
check "vmnapd continued and punched what it was sent" wait_dropped_above "$d0"
check "the module reconnected (a new session)" wait_link up "$STEP_WAIT"
check "the pattern written after the link loss verifies (no reused page punched)" \
	pattern_verify V2 1
glines V2 | grep MEMFILL | sed 's/^/# /'
pattern_stop Q2
gdo S3 "$STEP_WAIT" "vmnap-guest status | grep counter.free_fails"
check "the orphaned batch went back unreported after the new session's HELLO_ACK (free_fails ${fails0:-?} -> $(gval S3 counter.free_fails))" \
	sh -c "[ '$(gval S3 counter.free_fails)' -gt '${fails0:-0}' ]"

# ---- unload ----
gdo RMMOD "$STEP_WAIT" "rmmod vmnap && echo gone=1"
check "unload once nothing is in flight" test "$(gval RMMOD gone)" = 1
guest_send "$VM" "exit 0"
rc=0
guest_wait "$VM" || rc=$?
check "guest exits cleanly (launcher: no BUG/WARNING/Oops on the console)" test "$rc" -eq 0
check "vmnapd logged no error for the VM" sh -c "! grep -E ' E ' '$W/vmnapd.log'"
grep -E ' E ' "$W/vmnapd.log" | head -n 5 | sed 's/^/# /'
echo "1..$n"
[ "$failed" = 0 ]
