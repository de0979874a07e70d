#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# layers.sh - vmnapd's and vmnap.ko's layers point one way
# (host-pager/src/layers.mk, kmod/layers.mk), and
# the checker (scripts/layers.py) sees each kind of violation: it fails on a
# made-up tree with an upward include, an upward call and a declared cycle.
set -u
cd "$(dirname "$0")/../.."
TAP_NAME="layers"; . tests/lib/tap.sh
BUILD=${BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check "vmnapd: every include and symbol points down" \
	scripts/layers.py --tree host-pager/src --obj "$BUILD/host-pager/src"
# Kbuild builds the module's objects in place (make all builds the module).
if ls kmod/*.o >/dev/null 2>&1; then
	check "vmnap.ko: kmod/core uses nothing of the module above it" \
		scripts/layers.py --tree kmod --obj kmod
else
	not_ok "vmnap.ko: no objects in kmod/ (run make module first)"
fi

# A made-up tree: low may use nothing, high may use low.
mk() {
	mkdir -p "$tmp/$1/low" "$tmp/$1/high"
	printf 'T_LAYERS := low high\nLAYER_USES_high := low\n%s\n' "$2" >"$tmp/$1/layers.mk"
	printf 'int low_fn(void);\n' >"$tmp/$1/low/low.h"
	printf 'int high_fn(void);\n' >"$tmp/$1/high/high.h"
	printf '#include "low.h"\nint low_fn(void) { return %s; }\n' "$3" >"$tmp/$1/low/low.c"
	printf '#include "high.h"\n#include "low.h"\nint high_fn(void) { return low_fn(); }\n' \
		>"$tmp/$1/high/high.c"
	for l in low high; do
		cc -c -w "$tmp/$1/$l/$l.c" -I"$tmp/$1/low" -I"$tmp/$1/high" -o "$tmp/$1/$l/$l.o" || return 1
	done
}
fails() { scripts/layers.py "$@" >"$tmp/out" 2>&1; [ $? -eq 1 ] && grep -q "$want" "$tmp/out"; }

mk clean "" 0
check "a clean made-up tree passes" scripts/layers.py --tree "$tmp/clean" --obj "$tmp/clean"
mk up "" 0 && printf '#include "high.h"\n' >>"$tmp/up/low/low.c"
want="includes high.h of layer high"
check "an upward include fails" fails --tree "$tmp/up"
mk call "" "high_fn()" 2>/dev/null
want="uses high_fn of layer high"
check "an upward call fails" fails --tree "$tmp/call" --obj "$tmp/call"
mk loop "" "low_b()" && printf 'int low_fn(void);\nint low_b(void) { return low_fn(); }\n' >"$tmp/loop/low/b.c" &&
	cc -c -w "$tmp/loop/low/b.c" -o "$tmp/loop/low/b.o"
want="call cycle between files of one layer"
check "a call cycle inside a layer fails" fails --tree "$tmp/loop" --obj "$tmp/loop"
mk cycle "LAYER_USES_low := high" 0
want="cycle in the declared layers"
check "a declared cycle fails" fails --tree "$tmp/cycle"
echo "1..$n"
[ "$failed" -eq 0 ]
