# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# tests/lib/vmnapd.sh - run vmnapd for QEMU end-to-end tests and talk to it.
# Source it from the repository root after tests/lib/guest.sh:
#   . tests/lib/guest.sh; . tests/lib/vmnapd.sh
#
#   vmnapd_start LOG SOCKET... -- ARGS   $BUILD/vmnapd ARGS in the background
#                                        (stdout+stderr to LOG); waits for
#                                        every SOCKET (bounded)
#   vmnapd_stop                          stop it (SIGCONT first: it may be
#                                        SIGSTOPped), wait for it
#   vmnapd_kill                          SIGKILL it, wait; its run dir's sockets
#                                        go, so the next vmnapd_start waits
#                                        for the new daemon's
#   vmnapd_cleanup [DIR]                 guests, vmnapd, then DIR: kept (and
#                                        said so) when $failed > 0 or KEEP set
#   api CURL-ARGS...                     curl on $RUN/api.sock
#   jget EXPR                            d<EXPR> of the JSON on stdin
#   vm_json / state / link_state / resident   GET /vms/$VM and parts of it
#   wait_state STATE TIMEOUT             until /vms/$VM is in STATE
#   wait_link STATE TIMEOUT              until /vms/$VM's link is in STATE
#   vm_register_vsock VU CID UDS [CURL-ARGS]   PUT /vms/$VM with the built-in
#                                        vhost-user-vsock device
#   vm_set_qmp_pause QMP                 PATCH /vms/$VM: QMP pause backend
#                                        (allow_clock_stop: the tests that
#                                        manage it know QMP stops the clock)
#   preload_opts                         sets PRELOAD_OPTS: guest_start options
#                                        for QEMU with the preload shim ($VM)
#   pager_dbg CMD...                     one command to $RUN/pager-debug.sock
#   pager_stat KEY...                    a number from the VM's pager stats
#                                        (0 when none)
#   pager_adopted WHAT [MAPPERS]         TAP line: a restarted vmnapd has the
#                                        VM back from MAPPERS (default 1)
#                                        mappers, "recovered" (ADOPT_TIMEOUT)
#   memfill_verified ROUND WHAT          TAP line: the guest's memfill said
#                                        "MEMFILL VERIFY ROUND OK"
#   $VMNAPD_GUEST_LOOP                   end of a guest command: wait for
#                                        vmnap.ko's link, GUEST-UP, then run
#                                        each line guest_send sends
#
# Globals the caller sets: RUN (vmnapd's run dir), VM (the VM's name);
# VMNAPD_API_MAX_SEC bounds each API request (default 30).  vmnapd_pid is
# vmnapd's pid (empty when none runs), vmnapd_log its log.  Functions must run in the sourcing
# shell (not in a $(...) subshell) where they keep state: vmnapd_start,
# vmnapd_stop, vmnapd_cleanup, preload_opts.  Sourcing installs an EXIT trap
# that calls vmnapd_cleanup (no DIR); a test that sets its own EXIT trap
# must call vmnapd_cleanup (or guest_cleanup and vmnapd_stop) from it.

VMNAPD_POLL_SEC=0.1		# socket and state polling interval
VMNAPD_SOCKET_POLLS=50		# vmnapd creates its sockets right after start
VMNAPD_API_MAX_SEC=${VMNAPD_API_MAX_SEC:-30}
vmnapd_pid=

# vmnapd_start LOG SOCKET... -- ARGS: start vmnapd, wait for its sockets
vmnapd_start() {
	local log=$1 socks=() s='' i
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do socks+=("$1"); shift; done
	shift
	"${BUILD:-build}/vmnapd" "$@" >"$log" 2>&1 &
	vmnapd_pid=$! vmnapd_log=$log
	for ((i = 0; i < VMNAPD_SOCKET_POLLS; i++)); do
		for s in "${socks[@]}"; do [ -S "$s" ] || break; done
		[ -S "$s" ] && break
		sleep "$VMNAPD_POLL_SEC"
	done
}

# vmnapd_stop: SIGCONT (it may be stopped), SIGTERM, wait
vmnapd_stop() {
	[ -n "${vmnapd_pid:-}" ] || return 0
	kill -CONT "$vmnapd_pid" 2>/dev/null
	kill "$vmnapd_pid" 2>/dev/null
	wait "$vmnapd_pid" 2>/dev/null
	vmnapd_pid=
}

# vmnapd_kill: SIGKILL (a crash), wait; drop the stale sockets in $RUN
vmnapd_kill() {
	[ -n "${vmnapd_pid:-}" ] || return 0
	kill -KILL "$vmnapd_pid" 2>/dev/null
	wait "$vmnapd_pid" 2>/dev/null
	vmnapd_pid=
	rm -f "$RUN/api.sock" "$RUN/mem.sock" "$RUN/pager-debug.sock"
}

# vmnapd_cleanup [DIR]: kill guests and vmnapd; keep DIR on failure or KEEP
vmnapd_cleanup() {
	guest_cleanup
	vmnapd_stop
	wait 2>/dev/null
	[ -n "${1:-}" ] || return 0
	if [ "${failed:-0}" -gt 0 ] || [ -n "${KEEP:-}" ]; then
		echo "# logs kept in $1"
	else
		rm -rf "$1"
	fi
}

# api CURL-ARGS...: one request to the control API
api() { curl -s --max-time "$VMNAPD_API_MAX_SEC" --unix-socket "$RUN/api.sock" "$@"; }
# jget EXPR: print d<EXPR> of the JSON document d on stdin
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
# vm_json: the VM's API object
vm_json() { api "http://vmnapd/vms/$VM"; }
# state: the VM's coordinator state
state() { vm_json | jget '["state"]'; }
# link_state: the guest link's state ("" when none)
link_state() { vm_json | jget '.get("link", {}).get("state", "")'; }
# resident: the pager's resident bytes of guest RAM (-1 when no pager)
resident() { vm_json | jget '.get("pager", {}).get("resident_bytes", -1)'; }

# wait_state STATE TIMEOUT: says what it saw when it gives up
wait_state() {
	local deadline=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(state)" = "$1" ] && return 0
		sleep "$VMNAPD_POLL_SEC"
	done
	echo "# state $(state), wanted $1"
	return 1
}

# wait_link STATE TIMEOUT
wait_link() {
	local deadline=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(link_state)" = "$1" ] && return 0
		sleep 0.2
	done
	return 1
}

# vm_register_vsock VU CID UDS [CURL-ARGS]: register $VM with a vsock device
vm_register_vsock() {
	local vu=$1 cid=$2 uds=$3
	shift 3
	api -X PUT "http://vmnapd/vms/$VM" "$@" \
		-d "{\"vsock\": {\"vhost_user\": \"$vu\", \"cid\": $cid, \"uds\": \"$uds\"}}"
}

# vm_set_qmp_pause QMP: wait for QEMU's QMP socket, make it the pause backend
vm_set_qmp_pause() {
	local i
	for ((i = 0; i < VMNAPD_SOCKET_POLLS; i++)); do
		[ -S "$1" ] && break
		sleep "$VMNAPD_POLL_SEC"
	done
	api -X PATCH "http://vmnapd/vms/$VM" \
		-d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$1\", \"allow_clock_stop\": true}}" |
		grep -q '"backend":"qmp"'
}

# preload_opts: PRELOAD_OPTS=(guest_start options: QEMU's RAM served by vmnapd)
preload_opts() {
	# shellcheck disable=SC2034  # for the caller's guest_start
	PRELOAD_OPTS=(--env "LD_PRELOAD=$PWD/${BUILD:-build}/libvmnap-preload.so"
		--env "VMNAP_SOCKET=$RUN/mem.sock" --env "VMNAP_VM=$VM")
}

# pager_dbg CMD...: one command to the pager debug endpoint; its JSON answer
pager_dbg() {
	python3 - "$RUN/pager-debug.sock" "$*" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(300)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    b = s.recv(65536)
    if not b:
        break
    buf += b
print(buf.decode().strip())
PY
}

# pager_stat KEY...: a number from the VM's pager stats (0 when none)
pager_stat() {
	pager_dbg stats "$VM" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)["stats"]
    for k in sys.argv[1:]:
        d = d[k]
    print(int(d))
except Exception:
    print(0)' "$@"
}

# pager_adopted WHAT [MAPPERS]: the restarted vmnapd has the VM back (TAP)
pager_adopted() {
	local deadline=$((SECONDS + ${ADOPT_TIMEOUT:-60})) want=${2:-1} j=''
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(pager_stat mappers)" -ge "$want" ] && break
		sleep 0.1
	done
	j=$(vm_json)
	if [ "$(pager_stat mappers)" -ge "$want" ] &&
		[ "$(echo "$j" | jget '.get("recovered")')" = True ]; then
		ok "$1: the restarted vmnapd adopted the VM ($want mapper(s)): $(echo "$j" |
			jget '["pager"]["recovery"]')"
	else
		not_ok "$1: the restarted vmnapd adopted the VM ($want mapper(s))"
		echo "# $j"
		tail -n 20 "$vmnapd_log" | sed 's/^/# /'
	fi
}

# memfill_verified ROUND WHAT: the guest's memfill verified round ROUND (TAP)
memfill_verified() {
	if guest_wait_console "$VM" "MEMFILL VERIFY $1 (OK|BAD)" "${VERIFY_TIMEOUT:-600}" &&
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -q "MEMFILL VERIFY $1 OK"; then
		ok "$2: the guest verified every byte against its digest"
	else
		not_ok "$2: the guest verified every byte against its digest"
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep MEMFILL | sed 's/^/# /'
	fi
}

# Guest command tail: link up (60 s), "GUEST-UP", then eval each line from
# /dev/ttyS1 (guest_send) until the guest is told to exit.
# shellcheck disable=SC2034  # used in the caller's guest command
VMNAPD_GUEST_LOOP="for i in \$(seq 60); do vmnap-guest status 2>/dev/null | grep -q '^link=up' && break; sleep 1; done
echo GUEST-UP
exec 3</dev/ttyS1
while read -r cmd <&3; do eval \"\$cmd\"; done
"

trap vmnapd_cleanup EXIT
