#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_highmem.sh - guest RAM above the PCI hole: the pager's GPA map must
# come from the vhost-user memory table, not from memfd offsets (TAP).
#
# QEMU q35 with 3 GiB puts 2 GiB of RAM at gpa 0 and the last GiB at gpa
# 4 GiB, memfd offset 2 GiB.  The preload shim can only guess gpa = memfd
# offset; vmnapd must take the true layout from the built-in
# vhost-user-vsock device's SET_MEM_TABLE.  Then the same exercise as
# vsock_pager.sh: the guest fills RAM (the kernel prefers the high zone),
# the host stops it, offloads every page, continues it, and sends 8 MiB
# through the device into RX buffers that are not resident (they live
# above 4 GiB): each buffer is made resident by gpa, so a wrong map would
# refuse it or restore the wrong page.  Data and RAM pattern must verify.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
. tests/lib/guest.sh
. tests/lib/vmnapd.sh

VM=hm
CID=3
ANY=4294967295
GUEST_MIB=3072
FILL_PERCENT=25
HIGH_GPA=0x100000000
GUEST_TIMEOUT=900
READY_TIMEOUT=600
STEP_TIMEOUT=600
SEND_BYTES=$((8 << 20))

TAP_NAME="pager highmem"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill" \
	"$BUILD/tests/selftests/vsock_xfer"; do
	[ -e "$f" ] || skip "$f not built (make all)"
done

W=$(mktemp -d /tmp/vmnap-pager-highmem.XXXXXX)
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
ok "guest boots with $GUEST_MIB MiB, the preload shim and the vsock device, RAM filled"

st=$(pager_dbg stats "$VM")
check "the handshake's GPA map was only a guess: replaced by the memory table" \
	grep -q "GPA guess (memfd offset) was wrong" "$W/vmnapd.log"
check "GPA map from the vhost-user memory table ($(echo "$st" | jget '["stats"]["gpa_source"]'))" \
	[ "$(echo "$st" | jget '["stats"]["gpa_source"]')" = mem_table ]
check "RAM above the PCI hole: gpa $HIGH_GPA is guest RAM page 524288 (memfd offset 2 GiB)" \
	grep -q "gpa $HIGH_GPA+0x40000000 = guest RAM page 524288" "$W/vmnapd.log"

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
guest_send "$VM" quit
guest_wait "$VM"
check "guest exited cleanly, no kernel complaints" [ $? -eq 0 ]
check "vmnapd logged no residency error" eval '! grep -q "cannot make .* resident" "$W/vmnapd.log"'
check "no GPA operation was refused" eval '! grep -q "refused: the guest-physical map" "$W/vmnapd.log"'
echo "1..$n"
[ "$failed" -eq 0 ]
