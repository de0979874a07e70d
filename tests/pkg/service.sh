#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# service.sh - vmnapd under systemd's protocols, without systemd: a
# datagram socket stands in for NOTIFY_SOCKET, WATCHDOG_USEC/WATCHDOG_PID
# enable the watchdog, JOURNAL_STREAM names stderr's file as the journal.
# Checks READY=1 then repeated WATCHDOG=1 pings from the event loop, "<N>"
# syslog priorities on each line only when stderr is the journal (vmnapd
# and vmnap-gateway), and
# that the units' systemd-analyze security exposure stays at most 5.
set -uo pipefail
TAP_NAME="pkg service"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/lib/tap.sh"
BUILD=${BUILD:-build}
VMNAPD=$ROOT/$BUILD/vmnapd
[ -x "$VMNAPD" ] || skip "$VMNAPD not built"

T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# shellcheck source=tests/lib/sd_notify.sh
. tests/lib/sd_notify.sh
sd_notify_listen "$T/notify.sock" "$T/notify.log"
PIDS+=("$SD_NOTIFY_PID")

# journald's stream: stderr is $T/journal, JOURNAL_STREAM its dev:ino.
: >"$T/journal"
JS=$(stat -c '%d:%i' "$T/journal")
# sd_watchdog_enabled() wants WATCHDOG_PID to be vmnapd's own pid: exec.
NOTIFY_SOCKET=$T/notify.sock JOURNAL_STREAM=$JS WATCHDOG_USEC=200000 \
	sh -c 'export WATCHDOG_PID=$$; exec "$0" -r "$1/run" -s "$1/store" -l debug' \
	"$VMNAPD" "$T" 2>>"$T/journal" &
PIDS+=($!)
for ((i = 0; i < 200; i++)); do
	[ "$(grep -c '^WATCHDOG=1$' "$T/notify.log")" -ge 3 ] && break
	sleep 0.05
done
check "READY=1 before the first WATCHDOG=1" \
	sh -c "grep -xn -e READY=1 -e WATCHDOG=1 '$T/notify.log' | head -n1 | grep -q READY"
check "WATCHDOG=1 repeats (WATCHDOG_USEC=200000)" \
	test "$(grep -c '^WATCHDOG=1$' "$T/notify.log")" -ge 3
check "journal lines carry <6> for info" grep -q '^<6>\[.*\] I vmnapd: vmnapd .* ready' "$T/journal"
check "every journal line has a priority" sh -c "! grep -v '^<[3467]>\[' '$T/journal'"
kill "${PIDS[1]}"; wait "${PIDS[1]}" 2>/dev/null

# An error line (bad store dir) is <3>; without JOURNAL_STREAM no prefix.
: >"$T/journal2"
JS=$(stat -c '%d:%i' "$T/journal2")
JOURNAL_STREAM=$JS "$VMNAPD" -r "$T/run2" -s /proc/nonexistent/x 2>>"$T/journal2"
check "an error is <3>" grep -q '^<3>\[.*\] E vmnapd: cannot use' "$T/journal2"
JOURNAL_STREAM=1:1 "$VMNAPD" -r "$T/run3" -s /proc/nonexistent/x 2>"$T/plain"
check "stderr that is not the journal: no prefix" grep -q '^\[.*\] E vmnapd: cannot use' "$T/plain"

# vmnap-gateway's lines too (its own logger).
GW=$ROOT/$BUILD/vmnap-gateway
if [ -x "$GW" ]; then
	: >"$T/gwjournal"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$T/gwjournal") "$GW" --api "$T/none.sock" \
		--upstream http://127.0.0.1:9 --listen x=unix:"$T/gw.sock" 2>>"$T/gwjournal" &
	gwpid=$!
	for ((i = 0; i < 100; i++)); do [ -S "$T/gw.sock" ] && break; sleep 0.05; done
	kill "$gwpid"; wait "$gwpid" 2>/dev/null
	check "vmnap-gateway: info lines carry <6>" grep -q '^<6>\[.*\] info x: listening' "$T/gwjournal"
	check "vmnap-gateway: every journal line has a priority" sh -c "! grep -v '^<[3467]>\[' '$T/gwjournal'"
fi

# systemd-analyze security of the units as installed (offline).
if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
	for u in vmnapd vmnap-gateway; do
		sed 's|/usr/local/sbin/|/usr/sbin/|' "$ROOT/host-pager/systemd/$u.service" >"$T/$u.service"
		exp=$(systemd-analyze security --offline=yes --no-pager "$T/$u.service" 2>&1 |
			sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
		echo "# $u.service exposure $exp"
		check "$u.service exposure ≤ 5 ($exp)" \
			awk -v e="${exp:-99}" 'BEGIN { exit !(e <= 5.0) }'
	done
else
	echo "# systemd-analyze has no --offline: exposure not checked"
fi
echo "1..$n"
[ "$failed" -eq 0 ]
