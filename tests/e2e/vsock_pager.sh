#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsock_pager.sh - the vhost-user-vsock device is a mapper of guest RAM: it
# must make evicted pages resident before it writes a guest buffer (TAP).
#
# Real QEMU with the preload shim (vmnapd's pager serves its RAM) and the
# vsock device on the same VM.  The guest posts its RX buffers at boot and
# fills half its RAM with a pattern (memfill).  The host stops the VM,
# offloads every page (RX buffers and rings included), continues it without
# prefetch, and sends 8 MiB to a guest sink: the device writes into RX
# buffers that are not resident.  The data must arrive intact and the
# pattern must verify (a buffer written into a punched page would turn the
# rest of that page into zeros).  The buffers come back through the pager's
# residency worker, never by store reads on vmnapd's event loop (no vsock
# callback in the loop's slow-callback log).  The ordering itself (residency asked
# before the first byte is written) is asserted by the unit test
# test_vhost_vsock (test_buffers_made_resident_before_write).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
. tests/lib/guest.sh
. tests/lib/vmnapd.sh

VM=vp
CID=3
ANY=4294967295
GUEST_MIB=256
FILL_PERCENT=50
GUEST_TIMEOUT=900
READY_TIMEOUT=600
STEP_TIMEOUT=600
SEND_BYTES=$((8 << 20))

TAP_NAME="vsock pager"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill" \
	"$BUILD/tests/selftests/vsock_xfer"; do
	[ -e "$f" ] || skip "$f not built (make all)"
done

W=$(mktemp -d /tmp/vmnap-vsock-pager.XXXXXX)
RUN=$W/run
trap 'vmnapd_cleanup "$W"' EXIT

vmnapd_start "$W/vmnapd.log" "$RUN/pager-debug.sock" "$W/vu.sock" -- \
	-r "$RUN" -s "$W/store" --vsock "$VM:$W/vu.sock:$CID:$W/v.sock"
[ -S "$RUN/pager-debug.sock" ] || skip "this vmnapd has no pager debug endpoint"

preload_opts
guest_start "$VM" --mem $GUEST_MIB --timeout $GUEST_TIMEOUT --vsock-user "$W/vu.sock" \
	"${PRELOAD_OPTS[@]}" -- "
vsock_xfer serve vsock:$ANY:1234 sink -n 1 -t $STEP_TIMEOUT >/tmp/sink.log 2>&1 &
memfill $FILL_PERCENT </dev/ttyS1"
if ! guest_wait_console "$VM" 'MEMFILL READY' $READY_TIMEOUT; then
	not_ok "guest boots with the preload shim and the vsock device"
	tail -20 "$GUEST_DIR/$VM.err" "$W/vmnapd.log" | sed 's/^/# /'
	echo "1..$n"
	exit 1
fi
ok "guest boots with the preload shim and the vsock device, RAM filled"

guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
out=$(pager_dbg offload "$VM")
offloaded=$(echo "$out" | jget '["stats"]["pages"]["offloaded"]')
check "offload while stopped ($offloaded pages out, RX buffers included)" \
	[ "$(echo "$out" | jget '["ok"]')" = True ]
guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
# no 'resumed': no prefetch, the RX buffers stay out until someone needs them
check "8 MiB into evicted RX buffers arrive intact (guest sink checked every byte)" \
	"$BUILD/tests/selftests/vsock_xfer" client "hybrid:$W/v.sock:1234" send:$SEND_BYTES -t $STEP_TIMEOUT
guest_send "$VM" verify
if guest_wait_console "$VM" 'MEMFILL VERIFY 1 (OK|BAD)' $STEP_TIMEOUT &&
	tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -q 'MEMFILL VERIFY 1 OK'; then
	ok "guest RAM pattern intact after the device wrote into evicted pages"
else
	not_ok "guest RAM pattern intact after the device wrote into evicted pages"
fi
asked=$(pager_dbg stats "$VM" | jget '["stats"]["resident_async"]["asked"]')
check "the evicted buffers were read back by the pager's worker ($asked range(s) asked)" \
	[ "${asked:-0}" -gt 0 ]
guest_send "$VM" quit
guest_wait "$VM"
check "guest exited cleanly, no kernel complaints" [ $? -eq 0 ]
check "vmnapd logged no residency error" eval '! grep -q "cannot make .* resident" "$W/vmnapd.log"'
# loop.c logs every callback over 10 ms; on a loaded machine preemption
# alone can pass that, a store read on the loop took far longer: a stall
# is a vsock callback over 500 ms.
check "no vsock device callback stalled the event loop (over 500 ms)" \
	eval '! grep -E "loop: .* callback host-pager/src/vhost/.* ran ([5-9][0-9]{2}|[0-9]{4,})\." "$W/vmnapd.log"'
echo "1..$n"
[ "$failed" -eq 0 ]
