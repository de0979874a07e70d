#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_tail_register.sh - the command's last writes before a VM's first
# wait, through a real vmnapd, in both orders a VM comes to it:
#   - "early": registered (managed, a fake freezer, no guest link) before
#     its VMM hands in its memory, as Cloud Hypervisor's run-vm.sh and a
#     Kata hook register a VM that is starting;
#   - "late": memory first, registered once it runs (the replay's order).
# The VMM is a Python stand-in with the preload shim (a memfd it maps
# shared; no guest: the rules here are vmnapd's, not the guest's) that
# rewrites all of its 128 MiB, twice a command's scan budget (16384
# pages), between two scans, as a booting guest does.  Until the first
# wait the scans must be the boot's: no budget stop, backing off, still
# scanning; and the first wait must get a set.  Before this rule, "early"
# had its boot scanned as a command, which ran out the budget (so no set
# for the first wait), and "late" had the same once registered.
# Real: vmnapd, the preload shim, userfaultfd write-protect (asynchronous:
# skipped without it), PAGEMAP_SCAN, the coordinator.  TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD

RAM_MIB=128
BUDGET_PAGES=16384	# PAGER_TAIL_BUDGET_PAGES, vmnapd's default
SCAN_WAIT=60		# seconds for the scans to find more than the budget
SET_WAIT=10		# seconds for the first wait's set

TAP_NAME="pager_tail_register"
. tests/lib/tap.sh
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
for p in "$BUILD/vmnapd" "$BUILD/vmnapctl" "$BUILD/libvmnap-preload.so"; do
	[ -e "$p" ] || skip "$p not built"
done

tmp=$(mktemp -d /tmp/vmnap-tailreg.XXXXXX)
RUN=$tmp/run
writers=()
# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh
finish() {
	local w
	for w in "${writers[@]}"; do kill "$w" 2>/dev/null && wait "$w" 2>/dev/null; done
	vmnapd_stop
	if [ "$failed" -gt 0 ] || [ -n "${KEEP:-}" ]; then
		echo "# logs kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap finish EXIT

vmnapd_start "$tmp/vmnapd.log" "$RUN/mem.sock" "$RUN/api.sock" -- -r "$RUN" -s "$tmp/store"
check "vmnapd listens" test -S "$RUN/mem.sock" -a -S "$RUN/api.sock"
ctl() { "$BUILD/vmnapctl" -s "$RUN/api.sock" "$@"; }
wait_start() { ctl wait-start "$1" w1 >/dev/null; }

# pstat NAME KEY: pager.KEY of VM NAME from GET /vms/NAME ("" without one)
pstat() { VM=$1 vm_json | jget ".get('pager', {}).get('$2', '')" 2>/dev/null; }

# register NAME: managed, paused through a fake freezer directory
register() {
	mkdir -p "$tmp/cg-$1" && echo THAWED >"$tmp/cg-$1/freezer.state"
	api -X PUT "http://vmnapd/vms/$1" -d "{\"managed\": true, \"pause\": \
{\"backend\": \"freezer\", \"path\": \"$tmp/cg-$1\"}}" | grep -q '"managed":true'
}

# writer NAME: the VMM stand-in; rewrites every page until $tmp/NAME.calm
# exists, then only its first 64 pages (a guest come to rest)
writer() {
	LD_PRELOAD=$PWD/$BUILD/libvmnap-preload.so VMNAP_SOCKET=$RUN/mem.sock VMNAP_VM=$1 \
		VMNAP_MEMFD_NAME=guest-ram python3 - "$RAM_MIB" "$tmp/$1.calm" \
		<<'PY' >"$tmp/$1.err" 2>&1 &
import mmap, os, sys, time
size = int(sys.argv[1]) << 20
fd = os.memfd_create("guest-ram")
os.ftruncate(fd, size)
m = mmap.mmap(fd, size, mmap.MAP_SHARED)
n, round = size // 4096, 0
while True:
    round += 1
    for pg in range(64 if os.path.exists(sys.argv[2]) else n):
        m[pg * 4096] = round & 0xff
    time.sleep(0.02)
PY
	writers+=($!)
}

# wait_for NAME KEY MIN SECONDS: until pager.KEY >= MIN
wait_for() {
	local deadline=$((SECONDS + $4)) v
	while [ "$SECONDS" -lt "$deadline" ]; do
		v=$(pstat "$1" "$2")
		[ -n "$v" ] && [ "$v" -ge "$3" ] && return 0
		sleep 0.2
	done
	echo "# $1: pager.$2 is '$(pstat "$1" "$2")', wanted >= $3"
	return 1
}

# scanned NAME FROM: the scans found more than a budget's pages past FROM
# (or a budget stop ended them); then the boot's rules held
scanned() {
	local name=$1 from=$2
	local deadline=$((SECONDS + SCAN_WAIT)) v
	while [ "$SECONDS" -lt "$deadline" ]; do
		v=$(pstat "$name" tail_tick_pages)
		[ "${v:-0}" -gt $((from + BUDGET_PAGES)) ] && break
		[ "$(pstat "$name" tail_budget_stops)" != 0 ] && break
		sleep 0.2
	done
	check "$name: its scans found $(($(pstat "$name" tail_tick_pages) - from)) written page(s), more than a command's budget" \
		test "$(pstat "$name" tail_tick_pages)" -gt $((from + BUDGET_PAGES))
	check "$name: no budget stop before the first wait" test "$(pstat "$name" tail_budget_stops)" = 0
	check "$name: the scans backed off ($(pstat "$name" tail_backoffs) time(s))" \
		test "$(pstat "$name" tail_backoffs)" -ge 1
	check "$name: still scanning" test "$(pstat "$name" tail_ticking)" = True
}

# first_wait NAME: the guest comes to rest, the first wait begins: a set
first_wait() {
	touch "$tmp/$1.calm"
	sleep 0.5
	check "$1: the wait starts" wait_start "$1"
	check "$1: the first wait got a set of the last writes" wait_for "$1" tail_sets 1 "$SET_WAIT"
	ctl wait-ready "$1" w1 >/dev/null
}

# ---- early: registered, then its memory ----
check "early: registered, managed, before it has memory" register early
writer early
for ((i = 0; i < 100; i++)); do
	case $(pstat early dirty_tracking) in '' | undecided) sleep 0.2 ;; *) break ;; esac
done
case $(pstat early dirty_tracking) in
wp_async) ;;
'' | undecided) not_ok "early: its memory reached vmnapd"; sed 's/^/# /' "$tmp/early.err"; tap_done; exit 1 ;;
*) skip "the scans need asynchronous write-protect (pager.dirty_tracking: $(pstat early dirty_tracking))" ;;
esac
check "early: its memory reached vmnapd and is scanned" wait_for early tail_ticks 1 20
scanned early 0
first_wait early

# ---- late: its memory, then registered ----
writer late
check "late: its memory reached vmnapd, scanned before it is registered" \
	wait_for late tail_ticks 1 20
check "late: registered, managed" register late
scanned late "$(pstat late tail_tick_pages)"
first_wait late

check "vmnapd logged no error" sh -c "! grep -E ' E ' '$tmp/vmnapd.log'"
tap_done
