#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod_vmnapd.sh [CPUS] - vmnap.ko against the real vmnapd through QEMU
# (TAP): the guest (CPUS vCPUs, default 2) reaches vmnapd over
# -device vhost-user-vsock-pci served by vmnapd itself (VM registered
# through the control API, QMP pause backend), the module loaded with
# host_cid=2.  One boot:
#
#   HELLO as vmnapd saw it (cpus, page size, RAM ranges vs /proc/iomem);
#   idle guest -> manual pause -> READY, PAUSED, plausible evidence and a
#   finite next timer in the API; resume; the guest's own counters; a file
#   written before the pause reads back intact; CPU hog -> BUSY (cpu,
#   runnable); vmnapd stopped (SIGSTOP) mid-handoff -> the guest's
#   fail-safe releases its devices, SIGCONT recovers; link dropped
#   mid-handoff -> released (link loss), reconnects; free page reports
#   reach vmnapd; unload while connected closes the link; no kernel
#   complaint, no vmnapd error.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

CPUS=${1:-2}
VM=kmd$CPUS
CID=3
GUEST_MIB=384
GUEST_TIMEOUT=500
BOOT_WAIT=300
STEP_WAIT=60
# a window long enough that vmnapd is stopped before the guest answers
SLOW_WINDOW_US=100000
LONG_FAILSAFE_MS=5000
PAGE_SIZE=4096
# TCG on a shared machine: an idle guest's CPUs are idle ~650..990 per mille
# of a window; the verdict thresholds are covered by the in-guest selftests,
# this test is about the path through vmnapd (a hog still reads ~0).
MIN_IDLE_PERMILLE=500
READY_ATTEMPTS=8
FREE_REPORT_BIT=2	# VMNAP_F_FREE_REPORT

TAP_NAME="kmod vmnapd e2e"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v curl >/dev/null || skip "curl not installed"
# the module for the guest kernel VMNAP_KVER selects
for f in "$BUILD/vmnapd" "$(scripts/kmod-build.sh --path)"; do
	[ -e "$f" ] || skip "$f not built (make all; make module)"
done

W=$(mktemp -d /tmp/vmnap-kmod-vmnapd.XXXXXX)
RUN=$W/run
. tests/lib/guest.sh
. tests/lib/vmnapd.sh
trap 'vmnapd_cleanup "$W"' EXIT

# back to RUNNING whatever the coordinator did meanwhile (resume if paused)
settle_running() {
	local deadline=$((SECONDS + STEP_WAIT)) s
	while [ "$SECONDS" -lt "$deadline" ]; do
		s=$(state)
		case $s in
		RUNNING) return 0 ;;
		PAUSED | OFFLOADED) api -X POST "http://vmnapd/vms/$VM/actions/resume" >/dev/null ;;
		esac
		sleep 0.2
	done
	echo "# state $(state), wanted RUNNING"
	return 1
}
counter() { vm_json | jget "[\"counters\"]$1"; }
# wait_answer BEFORE_READY BEFORE_BUSY [BEFORE_TIMEOUTS]: the guest
# answered a handoff READY (0), BUSY (1), or too late for vmnapd's ack
# timeout, which a loaded TCG host can cause (2)
wait_answer() {
	local deadline=$((SECONDS + STEP_WAIT))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(counter '["handoff_ready"]')" -gt "$1" ] && return 0
		[ "$(counter '["handoff_busy"]')" -gt "$2" ] && return 1
		[ "$(counter '["handoff_timeouts"]')" -gt "${3:-1000000}" ] && return 2
		sleep 0.1
	done
	return 1
}
# pause_busy: a manual pause of a busy guest is answered BUSY, retried
# while the answer came too late for vmnapd (counted as a timeout)
pause_busy() {
	local i r b t
	for i in $(seq $READY_ATTEMPTS); do
		r=$(counter '["handoff_ready"]') b=$(counter '["handoff_busy"]')
		t=$(counter '["handoff_timeouts"]')
		api -X POST "http://vmnapd/vms/$VM/actions/pause" >/dev/null
		wait_answer "$r" "$b" "$t"
		case $? in
		1) return 0 ;;
		2) echo "# answer after vmnapd's ack timeout, retrying"; sleep 1 ;;
		*) return 1 ;;
		esac
	done
	return 1
}
# manual pause of an idle guest, retried while the guest answers BUSY
# (console output and the previous step can keep a vCPU busy a moment)
paused_events() { grep -c '"to":"PAUSED"' "$W/events.jsonl"; }
# (a known budget makes the coordinator resume the VM in time for the
# guest's timer: PAUSED may last less than a poll, so events tell)
pause_idle() {
	local i r b t p deadline
	for i in $(seq $READY_ATTEMPTS); do
		r=$(counter '["handoff_ready"]') b=$(counter '["handoff_busy"]')
		t=$(counter '["handoff_timeouts"]') p=$(paused_events)
		api -X POST "http://vmnapd/vms/$VM/actions/pause" >/dev/null
		if wait_answer "$r" "$b" "$t"; then
			deadline=$((SECONDS + STEP_WAIT))
			while [ "$SECONDS" -lt "$deadline" ]; do
				[ "$(paused_events)" -gt "$p" ] && return 0
				sleep 0.1
			done
			return 1
		fi
		echo "# not ready yet: $(vm_json | jget '["evidence"]')"
		settle_running
		sleep 1
	done
	return 1
}
# silent_handoff KIND COUNTER: a handoff during which vmnapd is stopped
# (SIGSTOP) and KIND happens in the guest; retried until the guest's
# COUNTER moved (a BUSY answer holds nothing)
silent_handoff() {
	local kind=$1 ctr=$2 i before after code dstep
	for i in $(seq $READY_ATTEMPTS); do
		gdo "B$kind$i" "vmnap-guest status"
		before=$(gval "B$kind$i" "counter.$ctr")
		if [ "$kind" = drop ]; then
			# The guest drops its link 2 s from now and sleeps until
			# then: a command typed while the handoff measures would
			# make it answer BUSY (a slow TCG guest hears the HANDOFF
			# late), so the command starts first and the pause second.
			step=$((step + 1)) dstep=$step
			guest_send "$VM" "sleep 2; vmnap-guest test-drop-link >/dev/null; echo DONE-$dstep"
			sleep 1
		fi
		# the HANDOFF is sent before the API answers 202; any other
		# answer (the previous resume not yet acknowledged under load)
		# sent nothing, and a drop now would test nothing
		code=$(api -o /dev/null -w '%{http_code}' -X POST "http://vmnapd/vms/$VM/actions/pause")
		if [ "$code" != 202 ]; then
			echo "# $kind: pause answered HTTP $code, retrying"
			# the drop goes ahead unpaused: wait for the link to be back
			[ "$kind" = drop ] && { guest_wait_console "$VM" "^DONE-$dstep" "$STEP_WAIT" >/dev/null
						wait_link up 60; }
			settle_running; sleep 1
			continue
		fi
		kill -STOP "$vmnapd_pid"
		case $kind in
		silent) sleep 2 ;;
		drop) guest_wait_console "$VM" "^DONE-$dstep" "$STEP_WAIT" >/dev/null ;;
		esac
		kill -CONT "$vmnapd_pid"
		settle_running || return 1
		[ "$kind" = drop ] && { wait_link up 60 || return 1; }
		gdo "A$kind$i" "vmnap-guest status"
		after=$(gval "A$kind$i" "counter.$ctr")
		[ "${after:-0}" -gt "${before:-0}" ] && { last=A$kind$i; return 0; }
		echo "# $kind: guest answered $(gval "A$kind$i" last_verdict), retrying"
		sleep 1
	done
	return 1
}

# gdo TAG CMD: run CMD in the guest, its output lines prefixed "TAG:"
step=0
gdo() {
	local tag=$1
	step=$((step + 1))
	guest_send "$VM" "{ $2 ; } 2>&1 | sed 's/^/$tag:/'; echo DONE-$step"
	guest_wait_console "$VM" "^DONE-$step" "$STEP_WAIT" >/dev/null
}
# gval TAG KEY: value of KEY=... in what gdo TAG printed
gval() { tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n "s/^$1:$2=//p" | tail -n 1; }

vmnapd_start "$W/vmnapd.log" "$RUN/api.sock" -- \
	-r "$RUN" -s "$W/store" -e "$W/events.jsonl" -l debug

QMP=$W/$VM.qmp
disk=$W/disk.img
truncate -s 64M "$disk"
reg=$(vm_register_vsock "$W/vu.sock" "$CID" "$W/v.sock" -w ' %{http_code}')
check "VM registered with a vsock device" sh -c "echo '$reg' | grep -q ' 20[01]\$'"

guest_start "$VM" --cpus "$CPUS" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" \
	--qmp "$QMP" --vsock-user "$W/vu.sock" --disk "$disk" -- "
insmod /lib/modules/vmnap.ko host_cid=2 test_hooks=1 min_idle_permille=$MIN_IDLE_PERMILLE || echo INSMOD-FAILED
$VMNAPD_GUEST_LOOP"
if guest_wait_console "$VM" '^GUEST-UP' "$BOOT_WAIT"; then
	ok "guest booted on $CPUS vCPUs, module loaded (host_cid=2)"
else
	not_ok "guest booted on $CPUS vCPUs, module loaded (host_cid=2)"
	tail -n 20 "$GUEST_DIR/$VM.log" "$W/vmnapd.log" | sed 's/^/# /'
	echo "1..$n"; exit 1
fi
check "QMP pause backend set (PATCH)" vm_set_qmp_pause "$QMP"
check "vmnapd sees the link up" wait_link up 30

# ---- HELLO as vmnapd saw it ----
hello=$(grep 'guest HELLO:' "$W/vmnapd.log" | tail -n 1)
echo "# $hello"
gdo IOMEM "grep -c '^[0-9a-f].* : System RAM' /proc/iomem"
ranges=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n 's/^IOMEM://p' | tail -n 1)
check "HELLO: $CPUS cpus" sh -c "echo '$hello' | grep -q ', $CPUS cpus,'"
check "HELLO: page size $PAGE_SIZE" sh -c "echo '$hello' | grep -q 'page $PAGE_SIZE,'"
check "HELLO: RAM ranges = top-level System RAM of /proc/iomem ($ranges)" \
	sh -c "[ -n '$ranges' ] && echo '$hello' | grep -q ', $ranges RAM ranges,'"
offered=$(echo "$hello" | sed -n 's/.*features \(0x[0-9a-f]*\) .*/\1/p')
check "HELLO: free page reporting offered (features ${offered:-?})" \
	sh -c "[ -n '$offered' ] && [ \$(($offered & $FREE_REPORT_BIT)) -ne 0 ]"

# ---- free page reports reach vmnapd (registered at load: all free RAM) ----
check "free page reports reached vmnapd (API link.free_reports)" sh -c "
	for i in \$(seq 100); do
		[ \"\$(curl -s --unix-socket '$RUN/api.sock' http://x/vms/$VM | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"link\"][\"free_reports\"])')\" -gt 0 ] && exit 0
		sleep 0.3
	done; exit 1"

# ---- idle guest: manual pause, READY, PAUSED, evidence; resume ----
gdo PRE "dd if=/dev/urandom of=/tmp/pattern bs=64k count=16 2>/dev/null && dd if=/tmp/pattern of=/dev/vda bs=64k oflag=direct 2>/dev/null && md5sum </tmp/pattern | cut -c1-32 && sync"
sum0=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n 's/^PRE://p' | tail -n 1)
sleep 2
check "idle guest: manual pause -> READY -> PAUSED" pause_idle
ev=$(vm_json | jget '["evidence"]')
echo "# evidence $ev"
check "idle guest: plausible evidence (no busy reason, CPUs idle, nothing runnable or in flight)" \
	python3 -c "import sys; e=$ev; sys.exit(0 if e['busy_reasons']==0 and e['cpu_idle_permille']>=$MIN_IDLE_PERMILLE and e['nr_runnable']==0 and e['io_inflight']==0 else 1)"
check "idle guest: finite next timer in the API" \
	python3 -c "import sys; e=$ev; t=e['next_timer_ns']; sys.exit(0 if t is not None and 0 < t < 2**63 else 1)"
check "VM paused through QMP (pause backend counted it)" \
	test "$(vm_json | jget '["pause"]["pauses"]')" -gt 0
check "resumed (by the guest's timer budget or by hand) -> RUNNING" settle_running
grep '"type":"transition"' "$W/events.jsonl" | tail -n 3 | sed 's/^/# /' 
gdo ST1 "vmnap-guest status"
check "guest: devices were quiesced for the pause and released by RESUMED" \
	sh -c "[ '$(gval ST1 last_verdict)' = ready ] && [ '$(gval ST1 evidence.devices_quiesced)' -ge 1 ] &&
	       [ '$(gval ST1 counter.unquiesce_resumed)' -ge 1 ] && [ '$(gval ST1 handoff)' = idle ] &&
	       [ '$(gval ST1 quiesced_devices)' = 0 ]"
gdo POST "dd if=/dev/vda bs=64k count=16 iflag=direct 2>/dev/null | md5sum | cut -c1-32"
sum1=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n 's/^POST://p' | tail -n 1)
check "disk data written before the pause intact after resume" sh -c "[ -n '$sum0' ] && [ '$sum0' = '$sum1' ]"

# ---- busy guest: a CPU hog -> BUSY (cpu, runnable) ----
gdo HOG "(while :; do :; done) >/dev/null 2>&1 & echo \$! >/tmp/hog"
sleep 1
check "CPU hog: BUSY" pause_busy
bev=$(vm_json | jget '["evidence"]["busy_reasons"]')
bycpu=$(counter '["busy_by_reason"]["cpu"]')
byrun=$(counter '["busy_by_reason"]["runnable"]')
check "CPU hog: reason cpu or runnable (evidence busy_reasons $bev, by reason cpu $bycpu runnable $byrun)" \
	sh -c "[ $((bev & 3)) -ne 0 ] && [ $((bycpu + byrun)) -gt 0 ]"
check "CPU hog: not paused" settle_running
gdo UNHOG "kill \$(cat /tmp/hog)"

# ---- vmnapd silent mid-handoff: the guest's fail-safe ----
gdo SLOW "echo $SLOW_WINDOW_US >/sys/module/vmnap/parameters/window_us"
sleep 2
check "vmnapd silent mid-handoff (SIGSTOP): the fail-safe released the devices" \
	silent_handoff silent unquiesce_failsafe
check "vmnapd silent mid-handoff: nothing held afterwards" \
	sh -c "[ '$(gval "$last" handoff)' = idle ] && [ '$(gval "$last" quiesced_devices)' = 0 ]"
check "vmnapd silent mid-handoff: link still up after SIGCONT" wait_link up 30

# ---- link dropped mid-handoff ----
gdo LONG "echo $LONG_FAILSAFE_MS >/sys/module/vmnap/parameters/failsafe_ms"
fs0=$(gval "${last:-none}" counter.unquiesce_failsafe)
check "link dropped mid-handoff: devices released on link loss, module reconnected" \
	silent_handoff drop unquiesce_link
check "link dropped mid-handoff: not by the fail-safe, link up, nothing held" \
	sh -c "[ '$(gval "$last" counter.unquiesce_failsafe)' = '$fs0' ] &&
	       [ '$(gval "$last" handoff)' = idle ] && [ '$(gval "$last" link)' = up ]"
gdo RESET "echo 10000 >/sys/module/vmnap/parameters/window_us; echo 500 >/sys/module/vmnap/parameters/failsafe_ms"
check "guest free page counters agree (reports sent)" sh -c "[ '$(gval "$last" counter.free_reports)' -gt 0 ]"

# ---- unload while connected ----
# rmmod in the background: if it does not finish, say where it is blocked
# (its kernel stack and every blocked task's, from the guest's console).
gdo RMMOD "rmmod vmnap & p=\$!; i=0; \
while kill -0 \$p 2>/dev/null && [ \$i -lt $((STEP_WAIT / 2)) ]; do sleep 1; i=\$((i + 1)); done; \
if kill -0 \$p 2>/dev/null; then echo stuck=1; cat /proc/\$p/stack; echo w >/proc/sysrq-trigger; dmesg | tail -n 150; \
else wait \$p && echo gone=1; fi"
check "unload while connected: rmmod" sh -c "[ '$(gval RMMOD gone)' = 1 ]"
rc=0
if [ "$(gval RMMOD stuck)" = 1 ]; then
	tr -d '\r' <"$GUEST_DIR/$VM.log" | sed -n '/^RMMOD:/s/^/# /p' | tail -n 200
	vm_json | sed 's/^/# vmnapd: /'
	tail -n 30 "$W/vmnapd.log" | sed 's/^/# /'
	guest_kill "$VM"
	rc=1
else
	check "unload while connected: vmnapd sees the link closed" wait_link closed 30
	guest_send "$VM" "exit 0"
	guest_wait "$VM" || rc=$?
fi
check "guest exits cleanly (launcher: no BUG/WARNING/Oops on the console)" test "$rc" -eq 0
check "vmnapd logged no error for the VM" sh -c "! grep -E ' E ' '$W/vmnapd.log'"
grep -E ' E ' "$W/vmnapd.log" | head -n 5 | sed 's/^/# /'
echo "1..$n"
[ "$failed" = 0 ]
