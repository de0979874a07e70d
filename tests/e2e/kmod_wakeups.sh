#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod_wakeups.sh - vmnap.ko adds no periodic wakeups to an idle guest.
#
# In a 2-vCPU guest, count local timer interrupts (LOC in /proc/interrupts,
# summed over CPUs) over 10 s of idleness without the module, then over
# 10 s with the module loaded, connected to a host peer and idle (the
# in-guest loopback peer: vmnap_selftest --serve).  /proc/timer_list must
# show no hrtimer of the module armed while idle.
#
# Tolerance: an idle guest still wakes for kernel housekeeping (deferred
# work, writeback, RCU): here about 100 times per 10 s over 2 vCPUs, and
# two idle windows differ by up to ~20%.  The check allows max(10, 30% of
# the baseline) more interrupts with the module, so it catches a periodic
# timer of roughly 3 Hz or faster (polling at HZ would add thousands); the
# /proc/timer_list check catches an armed hrtimer of the module at any
# rate.  Two window pairs are measured and one must pass: a burst of
# housekeeping can land in one window, a periodic timer spoils both.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}

[ -f vmnap.ko ] || { echo "vmnap.ko not built (make module)"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 missing"; exit 77; }

guest_cmd='
loc() { awk "/LOC:/ { s = 0; for (i = 2; i <= NF; i++) if (\$i ~ /^[0-9]+\$/) s += \$i; print s }" /proc/interrupts; }
window() { a=$(loc); sleep 10; b=$(loc); echo $((b - a)); }
sync; sleep 3
base1=$(window)
vmnap_selftest --serve 60 > /tmp/serve.log 2>&1 &
vmnap-guest load host_cid=1 port=5151 || exit 1
i=0; until vmnap-guest status | grep -q "^link=up"; do i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done
sleep 2
mod1=$(window)
armed=$(grep -c vmnap /proc/timer_list || true)
mod2=$(window)
vmnap-guest unload
sleep 2
base2=$(window)
echo "wakeups: base $base1 $base2 module $mod1 $mod2 vmnap_timers $armed"
'
out=$(scripts/run-guest.sh --cpus 2 --timeout 300 --name kmod-wakeups -- "$guest_cmd") || {
	echo "$out" | tail -20
	echo "guest failed"
	exit 1
}
line=$(echo "$out" | grep '^wakeups:' | tail -1)
echo "$line"
read -r _ _ b1 b2 _ m1 m2 _ armed <<<"$line"
[ -n "${armed:-}" ] || { echo "no measurement"; exit 1; }
ok() { # base module
	local base=$1 mod=$2 tol
	tol=$((base * 3 / 10))
	[ "$tol" -ge 10 ] || tol=10
	[ "$mod" -le $((base + tol)) ]
}
if [ "$armed" -ne 0 ]; then
	echo "vmnap hrtimer armed on an idle guest"
	exit 1
fi
if ok "$b1" "$m1" || ok "$b2" "$m2"; then
	echo "no extra wakeups with the module (base $b1/$b2, module $m1/$m2)"
	exit 0
fi
echo "the module adds wakeups (base $b1/$b2, module $m1/$m2)"
exit 1
