#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsock.sh - vmnapd's vhost-user-vsock device under real QEMU 7.2 (TCG) with
# Debian's guest kernel and its virtio-vsock driver (TAP).
#
# One vmnapd (--vsock), one guest with vsock_xfer servers, then a second
# QEMU on the same socket after the first one is killed:
#   - host CONNECT reaches the guest echo server; OK carries a host port
#   - a host listener (<uds>_P) is reached from the guest; closed port: RST
#   - 64 MiB each way (both directions of connection set-up), every byte
#     checked against a deterministic stream
#   - 32 concurrent connections
#   - a stream stays open across QMP stop/cont; host data sent while the VM
#     is stopped reaches the guest only after cont
#   - QEMU killed with connections open: the host ends see them close,
#     vmnapd lives on, a restarted QEMU reconnects and streams work again
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
. tests/lib/guest.sh
. tests/lib/vmnapd.sh

XFER=$BUILD/tests/selftests/vsock_xfer
VMNAPD=$BUILD/vmnapd
CID=3				# run-guest.sh's guest CID
ANY=4294967295			# VMADDR_CID_ANY
BIG=$((64 << 20))		# bytes per bulk transfer
GUEST_TIMEOUT=900
STEP_TIMEOUT=600		# bound of any one vsock_xfer run
BOOT_WAIT=300
PAUSE_SEC=3			# how long the VM stays stopped
LOCAL_PORT_FIRST=1073741824	# host ports of host-initiated streams

TAP_NAME="vsock e2e"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
[ -x "$VMNAPD" ] && [ -x "$XFER" ] || skip "build first: $VMNAPD, $XFER missing (make all)"

W=$(mktemp -d /tmp/vmnap-vsock.XXXXXX)
VU=$W/vu.sock UDS=$W/v.sock
pids=()
cleanup() {
	guest_cleanup
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	vmnapd_cleanup "$W"
}
trap cleanup EXIT

vmnapd_start "$W/vmnapd.log" "$VU" -- -r "$W/run" -s "$W/store" --vsock "vsk:$VU:$CID:$UDS"
[ -S "$VU" ] || { cat "$W/vmnapd.log"; echo "not ok 1 - vmnapd serves $VU"; exit 1; }

# Host servers the guest connects to (<uds>_<port>).
"$XFER" serve "unix:${UDS}_7000" sink -n 1 -t $STEP_TIMEOUT >"$W/h7000.log" 2>&1 &
h_sink=$!
"$XFER" serve "unix:${UDS}_7001" "source:$BIG" -n 1 -t $STEP_TIMEOUT >"$W/h7001.log" 2>&1 &
h_source=$!
"$XFER" serve "unix:${UDS}_7002" echo -n 1 -t $STEP_TIMEOUT >"$W/h7002.log" 2>&1 &
h_echo=$!
pids+=("$h_sink" "$h_source" "$h_echo")

guest_cmd="
X=vsock_xfer
\$X serve vsock:$ANY:1234 echo -n 0 -t $GUEST_TIMEOUT >/tmp/echo.log 2>&1 &
\$X serve vsock:$ANY:1235 sink -n 1 -t $STEP_TIMEOUT >/tmp/sink.log 2>&1 & s1=\$!
\$X serve vsock:$ANY:1236 source:$BIG -n 1 -t $STEP_TIMEOUT >/tmp/source.log 2>&1 & s2=\$!
sleep 1
echo VSOCK-READY
\$X client vsock:2:7002 echo:65536 -t $STEP_TIMEOUT; echo RESULT listener \$?
\$X client vsock:2:7000 send:$BIG -t $STEP_TIMEOUT; echo RESULT send \$?
\$X client vsock:2:7001 recv:$BIG -t $STEP_TIMEOUT; echo RESULT recv \$?
\$X client vsock:2:7999 echo:16 -t 60 2>/dev/null; echo RESULT closed \$?
wait \$s1; echo RESULT sink \$?
wait \$s2; echo RESULT source \$?
echo VSOCK-GUEST-DONE
sleep $GUEST_TIMEOUT
"
guest_start vsock1 --vsock-user "$VU" --timeout $GUEST_TIMEOUT --mem 256 -- "$guest_cmd"
if ! guest_wait_console vsock1 '^VSOCK-READY' $BOOT_WAIT; then
	not_ok "guest boots with vhost-user-vsock-pci served by vmnapd"
	tail -20 "$GUEST_DIR/vsock1.err" "$GUEST_DIR/vsock1.log" "$W/vmnapd.log" | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi
ok "guest boots with vhost-user-vsock-pci served by vmnapd"

# The reply to CONNECT names the host-side port of the new stream.
connect_reply() {
	python3 - "$UDS" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"CONNECT 1234\n")
line = b""
while not line.endswith(b"\n"):
    b = s.recv(1)
    if not b:
        break
    line += b
print(line.decode().strip())
EOF
}
reply=$(connect_reply)
check "CONNECT is answered 'OK <host port>' ($reply)" \
	eval '[[ $reply =~ ^OK\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge $LOCAL_PORT_FIRST ]'

check "host CONNECT reaches the guest echo server (1 MiB echoed)" \
	"$XFER" client "hybrid:$UDS:1234" echo:$((1 << 20)) -t $STEP_TIMEOUT
check "32 concurrent connections (256 KiB echoed each)" \
	"$XFER" client "hybrid:$UDS:1234" echo:$((256 << 10)) -p 32 -t $STEP_TIMEOUT
check "64 MiB host -> guest, checked by the guest" \
	"$XFER" client "hybrid:$UDS:1235" send:$BIG -t $STEP_TIMEOUT
check "64 MiB guest -> host on a host-initiated stream, checked by the host" \
	"$XFER" client "hybrid:$UDS:1236" recv:$BIG -t $STEP_TIMEOUT
check "CONNECT to a guest port nobody listens on is refused" \
	eval '! "$XFER" client "hybrid:$UDS:1299" echo:16 -t 60 2>/dev/null'

guest_wait_console vsock1 '^VSOCK-GUEST-DONE' $STEP_TIMEOUT || true
result() { tr -d '\r' <"$GUEST_DIR/vsock1.log" | sed -n "s/^RESULT $1 //p" | head -1; }
check "guest reaches a host listener <uds>_7002" [ "$(result listener)" = 0 ]
check "64 MiB guest -> host listener, checked by the host" [ "$(result send)" = 0 ]
check "64 MiB host listener -> guest, checked by the guest" [ "$(result recv)" = 0 ]
check "guest connect to a closed host port fails (RST)" \
	eval '[ -n "$(result closed)" ] && [ "$(result closed)" != 0 ]'
check "guest sink and source servers passed" \
	eval '[ "$(result sink)" = 0 ] && [ "$(result source)" = 0 ]'
check "host servers passed" wait "$h_sink" "$h_source" "$h_echo"

# A stream open across stop/cont, and data sent while stopped.
"$XFER" client "hybrid:$UDS:1234" echo:$((32 << 20)) -t $STEP_TIMEOUT >"$W/across.log" 2>&1 &
across=$!
sleep 1
guest_qmp vsock1 '{"execute":"stop"}' >/dev/null
"$XFER" client "hybrid:$UDS:1234" echo:$((1 << 20)) -t $STEP_TIMEOUT >"$W/paused.log" 2>&1 &
paused=$!
sleep $PAUSE_SEC
check "host data sent to a stopped VM waits (no echo while stopped)" kill -0 "$paused"
guest_qmp vsock1 '{"execute":"cont"}' >/dev/null
check "after cont the waiting data is delivered and echoed intact" wait "$paused"
check "a stream open across QMP stop/cont completes intact" wait "$across"

# QEMU dies with streams open.
"$XFER" client "hybrid:$UDS:1234" echo:$((1 << 30)) -t 120 >"$W/killed.log" 2>&1 &
killed=$!
sleep 2
guest_kill vsock1
t0=$SECONDS
wait "$killed"
rc=$?
check "streams open when QEMU died are closed on the host side (rc $rc, $((SECONDS - t0))s)" \
	eval '[ "$rc" -ne 0 ] && [ $((SECONDS - t0)) -lt 60 ]'
check "vmnapd survives QEMU's death" kill -0 "$vmnapd_pid"

guest_start vsock2 --vsock-user "$VU" --timeout $GUEST_TIMEOUT --mem 256 -- "
vsock_xfer serve vsock:$ANY:1234 echo -n 1 -t $STEP_TIMEOUT & s=\$!
sleep 1; echo VSOCK-READY; wait \$s; echo RESULT restart \$?"
if guest_wait_console vsock2 '^VSOCK-READY' $BOOT_WAIT; then
	check "a restarted QEMU reconnects and a new stream works" \
		"$XFER" client "hybrid:$UDS:1234" echo:$((1 << 20)) -t $STEP_TIMEOUT
	guest_wait vsock2
	check "restarted guest exits cleanly" [ $? -eq 0 ]
else
	not_ok "a restarted QEMU reconnects and a new stream works"
fi

check "no vhost-user protocol errors logged" \
	eval '! grep -E "refused|bad message|outside guest RAM" "$W/vmnapd.log"'
kill "$vmnapd_pid"
wait "$vmnapd_pid"
check "vmnapd exits cleanly on SIGTERM" [ $? -eq 0 ]
vmnapd_pid=
echo "1..$n"
[ "$failed" -eq 0 ]
