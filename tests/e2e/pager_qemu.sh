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
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=pg
GUEST_MIB=512
FILL_PERCENT=80
GUEST_TIMEOUT=900
READY_TIMEOUT=600
VERIFY_TIMEOUT=600
RESIDENT_MAX_PERCENT=10

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }

[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip_all "no userfaultfd access"
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 not installed"
for f in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill"; do
	[ -x "$f" ] || [ -f "$f" ] || skip_all "$f not built (make all)"
done
scripts/guest-kernel.sh >/dev/null 2>&1 || skip_all "guest kernel unavailable (scripts/guest-kernel.sh)"

tmp=$(mktemp -d /tmp/vmnap-pager-e2e.XXXXXX)
run=$tmp/run store=$tmp/store
vmnapd_pid=

# shellcheck source=tests/lib/guest.sh
. tests/lib/guest.sh
finish() {
	guest_cleanup
	if [ -n "$vmnapd_pid" ]; then
		kill -TERM "$vmnapd_pid" 2>/dev/null
		wait "$vmnapd_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap finish EXIT

# One command to the pager debug endpoint; prints its JSON answer.
dbg() {
	python3 - "$run/pager-debug.sock" "$*" <<'EOF'
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
EOF
}
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }

"$BUILD/vmnapd" -r "$run" -s "$store" -l info 2>"$tmp/vmnapd.log" &
vmnapd_pid=$!
for _ in $(seq 50); do [ -S "$run/pager-debug.sock" ] && break; sleep 0.1; done
check "vmnapd listens on mem.sock and pager-debug.sock" test -S "$run/mem.sock" -a -S "$run/pager-debug.sock"

guest_start "$VM" --mem "$GUEST_MIB" --timeout "$GUEST_TIMEOUT" \
	--env "LD_PRELOAD=$PWD/$BUILD/libvmnap-preload.so" \
	--env "VMNAP_SOCKET=$run/mem.sock" --env "VMNAP_VM=$VM" \
	-- "memfill $FILL_PERCENT </dev/ttyS1"
if guest_wait_console "$VM" 'MEMFILL READY' "$READY_TIMEOUT"; then
	ok "guest filled its RAM: $(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -o 'MEMFILL READY.*')"
else
	not_ok "guest filled its RAM"
	sed 's/^/# /' "$GUEST_DIR/$VM.err" "$tmp/vmnapd.log" | tail -n 30
	echo "1..$n"
	exit 1
fi
stats=$(dbg stats "$VM")
check "QEMU's guest RAM reached vmnapd through the preload shim" \
	test "$(echo "$stats" | jget '["stats"]["ram_bytes"]')" = $((GUEST_MIB << 20))

for round in 1 2; do
	guest_qmp "$VM" '{"execute":"stop"}' >/dev/null
	before=$(dbg stats "$VM" | jget '["stats"]["resident_bytes"]')
	out=$(dbg offload "$VM")
	after=$(echo "$out" | jget '["stats"]["resident_bytes"]')
	offloaded=$(echo "$out" | jget '["stats"]["pages"]["offloaded"]')
	check "round $round: offload succeeded ($offloaded pages out)" \
		test "$(echo "$out" | jget '["ok"]')" = True
	check "round $round: resident bytes $before -> $after (< $RESIDENT_MAX_PERCENT%)" \
		test $((after * 100)) -lt $((before * RESIDENT_MAX_PERCENT))
	guest_qmp "$VM" '{"execute":"cont"}' >/dev/null
	dbg resumed "$VM" >/dev/null
	guest_send "$VM" verify
	if guest_wait_console "$VM" "MEMFILL VERIFY $round (OK|BAD)" "$VERIFY_TIMEOUT" &&
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -q "MEMFILL VERIFY $round OK"; then
		ok "round $round: the guest verified every byte after faults ($(dbg stats "$VM" | jget '["stats"]["faults"]') faults so far)"
	else
		not_ok "round $round: the guest verified every byte"
		tr -d '\r' <"$GUEST_DIR/$VM.log" | grep MEMFILL | sed 's/^/# /'
	fi
done
out=$(dbg stats "$VM")
echo "# pager: $out"
guest_send "$VM" quit
rc=0
guest_wait "$VM" || rc=$?
check "guest exited cleanly, no BUG/WARNING on the console (run-guest status $rc)" test "$rc" = 0
check "vmnapd logged no pager error" \
	sh -c "! grep -E ' E vm $VM' '$tmp/vmnapd.log'"
grep -E ' E ' "$tmp/vmnapd.log" | head -n 5 | sed 's/^/# /'
echo "1..$n"
[ "$failed" = 0 ]
