# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# vsock_pager.sh - the exercise tests/e2e/vsock_pager.sh and
# tests/e2e/pager_highmem.sh share: a real QEMU guest whose RAM the pager
# serves (the preload shim) with vmnapd's vhost-user-vsock device on the
# same VM; the device writes into RX buffers the pager has evicted.  Source
# it from the repository root after tests/lib/tap.sh, with VM, GUEST_MIB
# and FILL_PERCENT set.
#
#   vsock_pager_boot TMP_PREFIX
#       skip without QEMU, userfaultfd or the built binaries; start vmnapd
#       (pager debug endpoint, the vsock device for $VM at CID 3) in a temp
#       dir $W removed at exit; boot the guest with $GUEST_MIB MiB, a vsock
#       sink on port 1234 and memfill $FILL_PERCENT; one check that it got
#       ready (the test ends there if not).
#   vsock_pager_exercise
#       stop the guest, offload every page (RX buffers and rings included),
#       continue it without prefetch and send 8 MiB to the sink, so that the
#       device writes into buffers that are not resident: the data must
#       arrive intact, the RAM pattern must verify (a buffer written into a
#       punched page would turn the rest of that page into zeros), the
#       buffers must have come back through the pager's residency worker,
#       never by store reads on vmnapd's event loop, and the guest must
#       exit cleanly.
# shellcheck source=tests/lib/guest.sh
. tests/lib/guest.sh
# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh

VSOCK_PAGER_CID=3
VSOCK_PAGER_ANY=4294967295	# VMADDR_CID_ANY
VSOCK_PAGER_TIMEOUT=600		# boot, and every step after it
VSOCK_PAGER_SEND=$((8 << 20))

vsock_pager_boot() {
	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
	[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
	local f
	for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill" \
		"$BUILD/tests/selftests/vsock_xfer"; do
		[ -e "$f" ] || skip "$f not built (make all)"
	done

	W=$(mktemp -d "/tmp/$1.XXXXXX")
	RUN=$W/run
	trap 'vmnapd_cleanup "$W"' EXIT

	vmnapd_start "$W/vmnapd.log" "$RUN/pager-debug.sock" "$W/vu.sock" -- \
		-r "$RUN" -s "$W/store" --vsock "$VM:$W/vu.sock:$VSOCK_PAGER_CID:$W/v.sock"
	[ -S "$RUN/pager-debug.sock" ] || skip "this vmnapd has no pager debug endpoint"

	preload_opts
	guest_start "$VM" --mem "$GUEST_MIB" --timeout $((VSOCK_PAGER_TIMEOUT + 300)) \
		--vsock-user "$W/vu.sock" "${PRELOAD_OPTS[@]}" -- "
vsock_xfer serve vsock:$VSOCK_PAGER_ANY:1234 sink -n 1 -t $VSOCK_PAGER_TIMEOUT >/tmp/sink.log 2>&1 &
memfill $FILL_PERCENT </dev/ttyS1"
	if ! guest_wait_console "$VM" 'MEMFILL READY' $VSOCK_PAGER_TIMEOUT; then
		not_ok "guest boots with the preload shim and the vsock device"
		tail -20 "$GUEST_DIR/$VM.err" "$W/vmnapd.log" | sed 's/^/# /'
		echo "1..$n"
		exit 1
	fi
	ok "guest boots with $GUEST_MIB MiB, the preload shim and the vsock device, RAM filled"
}

vsock_pager_exercise() {
	local out offloaded asked

	guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
	out=$(pager_dbg offload "$VM")
	offloaded=$(echo "$out" | jget '["stats"]["pages"]["offloaded"]')
	check "offload while stopped ($offloaded pages out, RX buffers included)" \
		[ "$(echo "$out" | jget '["ok"]')" = True ]
	guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
	# no 'resumed': no prefetch, the RX buffers stay out until someone needs them
	check "8 MiB into evicted RX buffers arrive intact (guest sink checked every byte)" \
		"$BUILD/tests/selftests/vsock_xfer" client "hybrid:$W/v.sock:1234" \
		send:$VSOCK_PAGER_SEND -t $VSOCK_PAGER_TIMEOUT
	guest_send "$VM" verify
	if guest_wait_console "$VM" 'MEMFILL VERIFY 1 (OK|BAD)' $VSOCK_PAGER_TIMEOUT &&
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
}
