#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_qemu.sh - the pager end to end with real QEMU 7.2 (TCG here), the
# Debian guest kernel, libvmnap-preload.so and vmnapd.  The guest fills
# most of its free RAM with a pseudo-random pattern (memfill); twice in one
# boot the host does QMP stop, offloads through vmnapd's pager debug
# endpoint, checks that guest-RAM resident bytes (the memfd's allocated
# blocks) fell below 10% of before, QMP cont, and the guest verifies every
# byte against its digest.  run-guest.sh fails the run on BUG/WARNING/Oops.
# TAP on stdout.
#
# PAGER_MEM=shm: guest RAM is QEMU's memory-backend-file with
# mem-path=/dev/shm and share=on (what Kata Containers uses), found by the
# shim through VMNAP_MEM_PATH, in a 256 MiB guest; the control API's GET
# answers are then also checked against api/openapi.yaml with the pager
# attached.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

PAGER_MEM=${PAGER_MEM:-memfd}
VM=pg
GUEST_MIB=512
SHM_DIR=/dev/shm
MEM_OPTS=()
case $PAGER_MEM in
memfd) ;;
shm) VM=pg-shm GUEST_MIB=256
	MEM_OPTS=(--mem-path "$SHM_DIR" --env "VMNAP_MEM_PATH=$SHM_DIR") ;;
*) echo "PAGER_MEM=memfd|shm, not '$PAGER_MEM'" >&2; exit 2 ;;
esac
FILL_PERCENT=80
GUEST_TIMEOUT=900
READY_TIMEOUT=600
VERIFY_TIMEOUT=600
RESIDENT_MAX_PERCENT=10

TAP_NAME="test"
. tests/lib/tap.sh
# shellcheck source=tests/lib/guest.sh
. tests/lib/guest.sh
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
guest_require "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill"
[ "$PAGER_MEM" != shm ] || [ "$(stat -f -c %T "$SHM_DIR" 2>/dev/null)" = tmpfs ] ||
	skip "$SHM_DIR is not tmpfs"

tmp=$(mktemp -d /tmp/vmnap-pager-e2e.XXXXXX)
RUN=$tmp/run store=$tmp/store

# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh
finish() {
	guest_cleanup
	vmnapd_stop
	rm -rf "$tmp"
}
trap finish EXIT

vmnapd_start "$tmp/vmnapd.log" "$RUN/pager-debug.sock" -- -r "$RUN" -s "$store" -l info
check "vmnapd listens on mem.sock and pager-debug.sock" test -S "$RUN/mem.sock" -a -S "$RUN/pager-debug.sock"

preload_opts
guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" "${PRELOAD_OPTS[@]}" \
	${MEM_OPTS[@]+"${MEM_OPTS[@]}"} -- "memfill $FILL_PERCENT </dev/ttyS1"
if guest_wait_console "$VM" 'MEMFILL READY' "$READY_TIMEOUT"; then
	ok "guest filled its RAM: $(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -o 'MEMFILL READY.*')"
else
	not_ok "guest filled its RAM"
	sed 's/^/# /' "$GUEST_DIR/$VM.err" "$tmp/vmnapd.log" | tail -n 30
	echo "1..$n"
	exit 1
fi
stats=$(pager_dbg stats "$VM")
check "QEMU's guest RAM reached vmnapd through the preload shim" \
	test "$(echo "$stats" | jget '["stats"]["ram_bytes"]')" = $((GUEST_MIB << 20))

for round in 1 2; do
	guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
	before=$(pager_dbg stats "$VM" | jget '["stats"]["resident_bytes"]')
	out=$(pager_dbg offload "$VM")
	after=$(echo "$out" | jget '["stats"]["resident_bytes"]')
	offloaded=$(echo "$out" | jget '["stats"]["pages"]["offloaded"]')
	check "round $round: offload succeeded ($offloaded pages out)" \
		test "$(echo "$out" | jget '["ok"]')" = True
	check "round $round: resident bytes $before -> $after (< $RESIDENT_MAX_PERCENT%)" \
		test $((after * 100)) -lt $((before * RESIDENT_MAX_PERCENT))
	guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
	pager_dbg resumed "$VM" >/dev/null
	guest_send "$VM" verify
	if guest_wait_console "$VM" "MEMFILL VERIFY $round (OK|BAD)" "$VERIFY_TIMEOUT" &&
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -q "MEMFILL VERIFY $round OK"; then
		ok "round $round: the guest verified every byte after faults ($(pager_dbg stats "$VM" | jget '["stats"]["faults"]') faults so far)"
	else
		not_ok "round $round: the guest verified every byte"
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep MEMFILL | sed 's/^/# /'
	fi
done
out=$(pager_dbg stats "$VM")
echo "# pager: $out"
if [ "$PAGER_MEM" = shm ]; then
	check "QEMU's guest RAM was the file it made in $SHM_DIR (unlinked)" \
		grep -Eq " rw-s .* $SHM_DIR/qemu_back_mem\.mem\.[^ ]* \(deleted\)\$" \
		"/proc/$(cat "$GUEST_DIR/$VM.pid")/maps"
	if api_out=$(python3 tests/api/openapi.py --live "$RUN/api.sock" "$VM" 2>&1); then
		ok "GET answers with a pager attached match api/openapi.yaml"
	else
		not_ok "GET answers with a pager attached match api/openapi.yaml"
		echo "$api_out" | grep -v '^ok' | sed 's/^/# /'
	fi
fi
guest_send "$VM" quit
rc=0
guest_wait "$VM" || rc=$?
check "guest exited cleanly, no BUG/WARNING on the console (run-guest status $rc)" test "$rc" = 0
check "vmnapd logged no pager error" \
	sh -c "! grep -E ' E vm $VM' '$tmp/vmnapd.log'"
grep -E ' E ' "$tmp/vmnapd.log" | head -n 5 | sed 's/^/# /'
echo "1..$n"
[ "$failed" = 0 ]
