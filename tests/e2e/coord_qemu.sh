#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# coord_qemu.sh - the coordinator end to end (TAP): real QEMU (TCG), the
# Debian guest kernel with vmnap.ko, vmnapd with its vhost-user-vsock
# device, the preload shim (pager) and the QMP pause backend, all
# registered through the control API.
#
#   1. a long model wait: WAITING -> HANDOFF -> PAUSED -> OFFLOADING ->
#      OFFLOADED (guest RAM resident bytes fall), data ready resumes it,
#      the guest's RESUME_ACK delivers the wait, the guest still works (a
#      guest timer resuming the VM just before the data makes the wait end
#      running: tried again with a new wait, up to 5 times); the first
#      offload is followed by the wake-path probe (a resume as for a
#      guest timer that faults the guest's wake path in), once.
#   2. a guest timer: `sleep 3` started in the guest before the wait; the
#      module reports the budget, vmnapd resumes the VM before the timer
#      (reason timer) and the timer fires in the guest on time while the
#      request is still pending; a new handoff follows; timer resumes
#      restore lazily, the data resume by the VM's policy (set to working-set
#      here, not the default lazy, so the two differ).  QMP stop also stops
#      the guest's clock (its timers are late by the time paused), so this
#      part pauses with the cgroup freezer on QEMU's own cgroup (v2), where
#      the guest clock keeps running; without a usable cgroup2 it stays on
#      QMP and checks the frozen-clock rule instead (timer late by at most
#      one budget, no pause/resume storm).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=co
CID=3
GUEST_MIB=384
GUEST_TIMEOUT=600
BOOT_WAIT=400
STATE_WAIT=60
FILL_MIB=64

TAP_NAME="coord e2e"
. tests/lib/tap.sh

. tests/lib/guest.sh
guest_require "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" vmnap.ko

W=$(mktemp -d /tmp/vmnap-coord-e2e.XXXXXX)
RUN=$W/run
. tests/lib/vmnapd.sh
cleanup() {
	guest_cleanup
	[ -n "${CG:-}" ] && [ -d "$CG" ] && { echo 0 >"$CG/cgroup.freeze" 2>/dev/null; sleep 0.2; rmdir "$CG" 2>/dev/null; }
	vmnapd_cleanup "$W"
}
trap cleanup EXIT

vmnapd_start "$W/vmnapd.log" "$RUN/api.sock" -- \
	-r "$RUN" -s "$W/store" -e "$W/events.jsonl" -l debug

QMP=$W/$VM.qmp
# QEMU connects to the vsock device at start: register it first; the QMP
# socket exists only once QEMU runs, so the pause backend comes by PATCH.
reg=$(vm_register_vsock "$W/vu.sock" "$CID" "$W/v.sock" -w ' %{http_code}')
check "VM registered with a vsock device" sh -c "echo '$reg' | grep -q ' 20[01]\$'"

preload_opts
guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" --qmp "$QMP" \
	--vsock-user "$W/vu.sock" "${PRELOAD_OPTS[@]}" -- "
dd if=/dev/urandom of=/tmp/fill bs=1M count=$FILL_MIB 2>/dev/null
insmod /lib/modules/vmnap.ko || echo INSMOD-FAILED
$VMNAPD_GUEST_LOOP"
if guest_wait_console "$VM" '^GUEST-UP' "$BOOT_WAIT"; then
	ok "guest booted, module loaded"
else
	not_ok "guest booted, module loaded"
	tail -n 20 "$GUEST_DIR/$VM.log" "$W/vmnapd.log" | sed 's/^/# /'
	echo "1..$n"; exit 1
fi
check "QMP pause backend set (PATCH)" vm_set_qmp_pause "$QMP"
check "guest link up (module HELLO over vhost-user-vsock)" \
	sh -c "for i in \$(seq 50); do [ \"\$(curl -s --unix-socket '$RUN/api.sock' http://x/vms/$VM | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"link\"][\"state\"])')\" = up ] && exit 0; sleep 0.2; done; exit 1"
check "pager attached through the preload shim" test "$(resident)" -gt 0
check "enable the coordinator" sh -c "curl -s --unix-socket '$RUN/api.sock' -X PATCH http://x/vms/$VM -d '{\"managed\": true, \"restore\": \"working-set\"}' | grep -q '\"managed\":true'"

# ---- 1. long model wait: offloaded, resumed by data ready ----
# has_event TYPE WAIT: an event of TYPE for WAIT is in events.jsonl
has_event() {
	python3 -c 'import json, sys; sys.exit(0 if any(e["type"] == sys.argv[2] and e.get("wait") == sys.argv[3] for e in map(json.loads, open(sys.argv[1]))) else 1)' \
		"$W/events.jsonl" "$1" "$2"
}
# data_resumed WAIT: a data resume came between WAIT's data and its delivery
data_resumed() {
	python3 - "$W/events.jsonl" "$1" <<'PY'
import json, sys
ev = list(map(json.loads, open(sys.argv[1])))
at = lambda t: next((k for k, e in enumerate(ev) if e["type"] == t and
                     e.get("wait") == sys.argv[2]), None)
i, j = at("wait_ready"), at("delivered")
sys.exit(0 if i is not None and j is not None and
         any(e["type"] == "resume" and e["reason"] == "data_ready" for e in ev[i:j]) else 1)
PY
}
# snapshot: the VM's state and resident bytes, from one GET
snapshot() {
	vm_json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["state"], d.get("pager", {}).get("resident_bytes", -1))'
}
# The data is posted as soon as the VM is seen OFFLOADED, but a guest timer
# may resume it just before (the cost policy offloads even for a timer due
# in 100 ms): the wait then ends while the guest runs, without the data
# resume this part is about.  Such a try starts over with a new wait.  The
# offload checks take the first try's figures.
W1=
before=$(resident)
for try in 1 2 3 4 5; do
	id=w1-$try
	api -X POST "http://vmnapd/vms/$VM/waits" -d "{\"id\": \"$id\", \"kind\": \"model\"}" >/dev/null
	offloaded=no
	deadline=$((SECONDS + STATE_WAIT))
	while [ "$SECONDS" -lt "$deadline" ]; do
		read -r st res < <(snapshot)
		[ "$st" = OFFLOADED ] && { offloaded=yes; break; }
		sleep "$VMNAPD_POLL_SEC"
	done
	api -X POST "http://vmnapd/vms/$VM/waits/$id/ready" >/dev/null
	[ "$try" = 1 ] && during=$res
	running=no
	wait_state RUNNING "$STATE_WAIT" && running=yes
	delivered=no
	for i in $(seq 50); do
		has_event delivered "$id" && { delivered=yes; break; }
		sleep 0.2
	done
	[ "$offloaded$running$delivered" = yesyesyes ] || break	# fails below
	if data_resumed "$id"; then
		W1=$id
		break
	fi
	echo "# try $try: a guest timer resumed the VM before $id's data came; again"
done
check "long wait: offloaded" test "$offloaded" = yes
check "resident bytes fell while offloaded ($before -> $during)" test "$during" -lt $((before / 2))
check "QEMU's PSS known (pid from the QMP socket)" test "$(vm_json | jget '.get("vmm", {}).get("pss_bytes", 0)')" -gt 0
check "data ready resumes: RUNNING" test "$running" = yes
check "wait delivered (guest RESUME_ACK)" test "$delivered" = yes
check "the data came while the VM was offloaded (in 5 tries)" test -n "$W1"
guest_send "$VM" "echo ALIVE-1"
check "guest runs after resume (faults served)" guest_wait_console "$VM" '^ALIVE-1' 120
check "transitions passed: WAITING HANDOFF PAUSED OFFLOADING OFFLOADED RESUMING RUNNING" python3 - "$W/events.jsonl" <<'PY'
import json, sys
seq = iter(e["to"] for e in map(json.loads, open(sys.argv[1])) if e["type"] == "transition")
want = ["WAITING", "HANDOFF", "PAUSED", "OFFLOADING", "OFFLOADED", "RESUMING", "RUNNING"]
# in this order (a guest timer may add a pause/resume cycle in between)
sys.exit(0 if all(w in seq for w in want) else 1)
PY
check "the first offload was followed by the wake-path probe, once (resume event, counter)" python3 - "$W/events.jsonl" "$(vm_json | jget '["counters"].get("wake_probes")')" <<'PY'
import json, sys
ev = list(map(json.loads, open(sys.argv[1])))
first = next(k for k, e in enumerate(ev) if e["type"] == "transition" and e["to"] == "OFFLOADED")
nxt = next(e for e in ev[first + 1:] if e["type"] == "transition")
probes = [e for e in ev if e["type"] == "resume" and e.get("probe")]
if nxt["why"] != "wake_probe":
    # a timer came during that offload: its resume (pending) went first
    # and, acknowledged, taught the wake path; no probe is needed then
    print(f"# first offload followed by {nxt['why']}, {len(probes)} probe(s)")
    sys.exit(0 if nxt["why"] == "resume_pending" and len(probes) <= 1 and
             sys.argv[2] == str(len(probes)) else 1)
res = next(e for e in ev[first + 1:] if e["type"] == "resume")
# the probe ran with the wake path out: it faulted on it
ok = len(probes) == 1 and res is probes[0] and res["reason"] == "timer" and \
     res["offloaded"] and res["acked"] and res["faults"] > 0 and res["restore"] == "lazy"
# and its breakdown says what the faults took and what the guest's own
# unquiesce (from its RESUME_ACK) took
ok = ok and res.get("fault_ns", 0) > 0 and 0 <= res.get("fault_read_ns", -1) <= res["fault_ns"] \
     and isinstance(res.get("guest_unquiesce_ns"), int) and res["guest_unquiesce_ns"] >= 0
sys.exit(0 if ok and sys.argv[2] == "1" else 1)
PY

# ---- 2. a guest timer resumes the VM on time ----
CG=/sys/fs/cgroup/unified/vmnap-e2e-$$
clock=stops
if [ -f /sys/fs/cgroup/unified/cgroup.procs ] && mkdir "$CG" 2>/dev/null &&
	echo "$(cat "$GUEST_DIR/$VM.pid")" >"$CG/cgroup.procs" 2>/dev/null &&
	[ -e "$CG/cgroup.freeze" ]; then
	clock=runs
	check "freezer pause backend on QEMU's cgroup (PATCH)" sh -c "curl -s --unix-socket '$RUN/api.sock' -X PATCH http://x/vms/$VM -d '{\"pause\": {\"backend\": \"freezer\", \"path\": \"$CG\"}}' | grep -q '\"backend\":\"freezer\"'"
else
	echo "# no usable cgroup2 here: the timer part runs on QMP (guest clock stops while paused)"
fi
guest_send "$VM" "(sleep 3; echo TIMER-FIRED) &"
sleep 0.5
t0=$(date +%s.%N)
api -X POST "http://vmnapd/vms/$VM/waits" -d '{"id": "w2", "kind": "model"}' >/dev/null
if guest_wait_console "$VM" '^TIMER-FIRED' 60; then
	t1=$(date +%s.%N)
	ok "guest timer fired while the wait was pending ($(python3 -c "print(round($t1-$t0,2))") s after the wait started)"
else
	not_ok "guest timer fired while the wait was pending"
fi
check "resumed with reason timer before it" python3 - "$W/events.jsonl" <<'PY'
import json, sys
ev = list(map(json.loads, open(sys.argv[1])))
sys.exit(0 if any(e["type"] == "transition" and e.get("why") == "guest_timer" for e in ev) else 1)
PY
if [ "$clock" = runs ]; then
	check "timer fired on time (no later than 1.5 s after its deadline)" python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 3.0 + 1.5 else 1)"
else
	check "frozen guest clock: timer late by at most one budget" python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 2 * 3.0 + 2 else 1)"
fi
sleep 1
check "request still pending: a new handoff followed" python3 - "$W/events.jsonl" <<'PY'
import json, sys
ev = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "transition"]
# the first timer resume: later ones (the guest's periodic timers, once
# the VM is paused again) may be too recent for their handoff
i = min(k for k, e in enumerate(ev) if e.get("why") == "guest_timer")
sys.exit(0 if any(e["to"] == "HANDOFF" for e in ev[i:]) else 1)
PY
check "timer resumes restore lazily, data resumes by the VM's policy (resume events)" python3 - "$W/events.jsonl" <<'PY'
import json, sys
ev = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "resume"]
timer = [e for e in ev if e["reason"] == "timer"]
data = [e for e in ev if e["reason"] == "data_ready"]
sys.exit(0 if timer and all(e["restore"] == "lazy" for e in timer) and
         all(e["restore"] == "working-set" and e["total_ns"] > 0 for e in data) else 1)
PY
check "the data resume's delivery counts its faults from the resume's request" python3 - "$W/events.jsonl" "$W1" <<'PY'
import json, sys
ev = list(map(json.loads, open(sys.argv[1])))
i = next((k for k, e in enumerate(ev) if e["type"] == "wait_ready" and
          e.get("wait") == sys.argv[2]), len(ev))
res = [e for e in ev[i:] if e["type"] == "resume" and e["reason"] == "data_ready"]
dl = [e for e in ev if e["type"] == "delivered" and e.get("wait") == sys.argv[2]]
ok = res and len(dl) == 1 and all(isinstance(dl[0].get(k), int) for k in
        ("resume_faults", "resume_fault_pages", "resume_zero_faults", "resume_fault_ns",
         "resume_fault_read_ns", "resume_fault_lock_ns", "resume_fault_in_flight_ns"))
d = dl[0] if ok else {}
sys.exit(0 if ok and d["resume_faults"] >= res[0]["faults"] and
         d.get("faults_from") == "resume" else 1)
PY
api -X POST "http://vmnapd/vms/$VM/waits/w2/ready" >/dev/null
check "data ready: RUNNING" wait_state RUNNING "$STATE_WAIT"
guest_send "$VM" "echo ALIVE-2"
check "guest runs after the second cycle" guest_wait_console "$VM" '^ALIVE-2' 120
echo "# $(vm_json | jget '["counters"]')"

guest_send "$VM" "poweroff -f"
rc=0
guest_wait "$VM" || rc=$?
check "no BUG/WARNING/Oops on the guest console" sh -c "! tr -d '\r' <'$GUEST_DIR/$VM.log' | grep -Eq 'BUG:|WARNING:|Oops|Call Trace'"
check "vmnapd logged no error for the VM" sh -c "! grep -E ' E vm $VM' '$W/vmnapd.log'"
grep -E ' E ' "$W/vmnapd.log" | head -n 5 | sed 's/^/# /'
echo "1..$n"
[ "$failed" = 0 ]
