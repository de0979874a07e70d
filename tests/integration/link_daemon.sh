#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# link_daemon.sh - the hybrid-socket guest link through a real vmnapd (TAP):
# a VM registered over the control API with a guest link socket
# "<uds>_5151" (what Firecracker / Cloud Hypervisor connect to for the
# guest's port 5151), and link_fake_guest playing vmnap.ko behind the VMM
# (no VMM here: Firecracker and Cloud Hypervisor need KVM).
#
#   1. the socket is there, mode 0600; HELLO gets HELLO_ACK with the VM's
#      id and the API shows the link up
#   2. a second connection replaces the first (newest wins)
#   3. hostile bytes: ERROR, the link drops, vmnapd lives and the next guest
#      connects
#   4. deleting the VM removes the socket file
#   5. a regular file at a link socket path: registration fails, the file
#      stays
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}

VM=lt
PORT=5151
START_WAIT=100		# tenths of a second for vmnapd's API socket
STATE_WAIT=100		# tenths of a second for a link state to show

TAP_NAME="link daemon test"
. tests/lib/tap.sh

GUEST=$BUILD/tests/integration/link_fake_guest
for f in "$BUILD/vmnapd" "$GUEST"; do
	[ -x "$f" ] || skip "$f not built (make userspace)"
done
command -v curl >/dev/null || skip "curl not installed"
command -v jq >/dev/null || skip "jq not installed"

T=$(mktemp -d /tmp/vmnap-linkd-XXXXXX)
RUN=$T/run
UDS=$T/fc.vsock
SOCK=${UDS}_$PORT
DPID= HPID=
cleanup() {
	[ -n "$HPID" ] && kill "$HPID" 2>/dev/null
	if [ -n "$DPID" ]; then
		kill "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	[ "$failed" -eq 0 ] || { echo "# vmnapd log:"; sed 's/^/# /' "$T/vmnapd.log"; }
	rm -rf "$T"
}
trap cleanup EXIT

api() {	# METHOD PATH [BODY]
	curl -s --max-time 10 --unix-socket "$RUN/api.sock" -X "$1" \
		${3:+-H 'Content-Type: application/json' -d "$3"} "http://vmnapd$2"
}
link_state() { api GET "/vms/$VM" | jq -r '.link.state // "none"'; }
wait_link() {	# STATE
	for _ in $(seq "$STATE_WAIT"); do
		[ "$(link_state)" = "$1" ] && return 0
		sleep 0.1
	done
	echo "# link state $(link_state), want $1"
	return 1
}

"$BUILD/vmnapd" -r "$RUN" -s "$T/store" -l info 2>"$T/vmnapd.log" &
DPID=$!
for _ in $(seq "$START_WAIT"); do
	[ -S "$RUN/api.sock" ] && break
	sleep 0.1
done
[ -S "$RUN/api.sock" ] || { failed=1; echo "not ok 1 - vmnapd API socket"; exit 1; }

ID=$(api PUT "/vms/$VM" "{\"link_socket\": \"$SOCK\"}" | jq -r '.id // empty')
check "VM registered with guest link socket $SOCK (id ${ID:-none})" test -n "$ID"
check "socket is there with mode 0600" \
	test -S "$SOCK" -a "$(stat -c %a "$SOCK" 2>/dev/null)" = 600

# 1. handshake, held open while the API is asked
mkfifo "$T/hold1"
"$GUEST" --hold --expect-id "${ID:-0}" "$SOCK" <"$T/hold1" >"$T/g1.out" 2>&1 &
HPID=$!
exec 5>"$T/hold1"
check "HELLO -> HELLO_ACK, link up in the API" wait_link up
check "HELLO_ACK carries the VM id" grep -q "^up vm_id=${ID:-x} " "$T/g1.out"

# 2. newest wins: a second guest takes over; the first sees its stream end
if "$GUEST" --expect-id "${ID:-0}" "$SOCK" >"$T/g2.out" 2>&1; then ok "second connection gets HELLO_ACK"
else not_ok "second connection gets HELLO_ACK: $(cat "$T/g2.out")"; fi
exec 5>&-
wait "$HPID"; rc=$?; HPID=
check "first connection was closed by the host" \
	sh -c "[ $rc -ne 0 ] && grep -q 'host closed the link' '$T/g1.out'"

# 3. hostile bytes
if "$GUEST" --junk "$SOCK" >"$T/g3.out" 2>&1; then ok "junk -> ERROR, then the stream ends"
else not_ok "junk -> ERROR, then the stream ends: $(cat "$T/g3.out")"; fi
check "the error is bad magic" grep -q "error code=.*(bad magic)" "$T/g3.out"
check "link down in the API" wait_link closed
check "vmnapd still runs" kill -0 "$DPID"
check "the listener still serves a guest" \
	sh -c "'$GUEST' --expect-id '${ID:-0}' '$SOCK' >/dev/null"

# 4. removal
api DELETE "/vms/$VM" >/dev/null
check "deleting the VM removes the socket file" test ! -e "$SOCK"

# 5. a file that is not a socket at the path is an error, never removed
echo precious >"$T/not-a-socket"
api PUT "/vms/${VM}2" "{\"link_socket\": \"$T/not-a-socket\"}" >"$T/put2.out"
check "a regular file at the link socket path is refused" \
	sh -c "! jq -e '.id' '$T/put2.out' >/dev/null 2>&1"
check "and left alone" grep -qx precious "$T/not-a-socket"

echo "1..$n"
[ "$failed" -eq 0 ]
