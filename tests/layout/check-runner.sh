#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# check-runner.sh - scripts/check.py's warmers ("@warm <test> <command>"),
# on made-up test lists: a selected test's warmer starts before the first
# test and runs beside it at SCHED_IDLE, the test it serves waits for it
# on their lock, an unselected test's warmer never starts, the runner
# waits for a warmer still running at its end, and a warmer that names no
# test is an error.
set -u
cd "$(dirname "$0")/../.."
TAP_NAME="check-runner"; . tests/lib/tap.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tests/a" "$tmp/tests/b"

# a-first waits (up to a minute) for the warmer of b-served to have run:
# it could not unless that warmer started before it and ran beside it.
cat > "$tmp/tests/a/a.list" <<LIST
a-first 120 for i in \$(seq 600); do [ -f $tmp/warm-started ] && exit 0; sleep 0.1; done; exit 1
LIST
cat > "$tmp/tests/b/b.list" <<LIST
b-served 120 exec 9>$tmp/lock; flock 9; [ -f $tmp/warm-done ] && grep -qx 5 $tmp/warm-policy
@warm b-served exec 9>$tmp/lock; flock 9; python3 -c 'import os; print(os.sched_getscheduler(0))' > $tmp/warm-policy; touch $tmp/warm-started; sleep 0.5; touch $tmp/warm-done
b-other 120 true
@warm b-other touch $tmp/other-warmed
LIST
out=$(CHECK_TESTS=$tmp/tests BUILD=$tmp/build CHECK_FILTER='^a-first$|^b-served$' \
	python3 scripts/check.py 2>&1)
rc=$?
check "both tests pass: the warmer ran beside the first, at SCHED_IDLE (policy 5), before the one it serves" \
	[ $rc -eq 0 ]
echo "$out" | sed 's/^/# /'
check "the summary counts the tests, not the warmer" \
	grep -qx 'check: 2 passed, 0 failed, 0 skipped' <<<"$out"
check "the warmer's output goes to its own log" \
	[ -f "$tmp/build/check/warm-b-served.log" ]
check "an unselected test's warmer never starts" [ ! -e "$tmp/other-warmed" ]

# The warmer goes on after the test it serves has run (as one does that
# lost the race for the lock): the runner waits for it before it returns.
rm -f "$tmp"/warm-*
cat > "$tmp/tests/b/b.list" <<LIST
b-served 120 touch $tmp/test-ran
@warm b-served for i in \$(seq 600); do [ -f $tmp/test-ran ] && break; sleep 0.1; done; sleep 1; touch $tmp/warm-done
LIST
CHECK_TESTS=$tmp/tests BUILD=$tmp/build CHECK_FILTER='^b-served$' \
	python3 scripts/check.py >/dev/null 2>&1
check "a warmer still running when the tests end is waited for" [ -f "$tmp/warm-done" ]

echo "@warm nosuch true" >> "$tmp/tests/b/b.list"
out=$(CHECK_TESTS=$tmp/tests BUILD=$tmp/build python3 scripts/check.py 2>&1)
rc=$?
refused() { [ "$rc" -ne 0 ] && grep -q '@warm for no test: nosuch' <<<"$out"; }
check "a warmer that names no test is an error" refused
tap_done
