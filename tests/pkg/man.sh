#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# man.sh - the man pages say what the programs and the module take: every
# option in each program's --help is in its man page (build/man/*.8, made
# by help2man from that --help), and every module parameter of
# kmod/main.c (module_param*) is in vmnap(4); --version prints VERSION.
set -uo pipefail
TAP_NAME="pkg man"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
. tests/lib/tap.sh
BUILD=${BUILD:-build}
command -v help2man >/dev/null || skip "help2man missing: run 'make deps'"
make --no-print-directory -s man >/dev/null 2>&1 || { not_ok "make man"; echo "1..$n"; exit 1; }
VERSION=$(cat VERSION)

# The page as text, with roff's escaped hyphens plain.
page_text() { sed 's/\\-/-/g; s/\\f[BIRP]//g; s/\\(em/-/g' "$1"; }

for p in vmnapd vmnap-vsockd vmnapctl vmnap-gateway vmnap-guest; do
	bin=$BUILD/$p man=$BUILD/man/$p.8
	check "$p --version is VERSION ($VERSION)" test "$("$bin" --version)" = "$p $VERSION"
	opts=$("$bin" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
	missing=$(for o in $opts; do page_text "$man" | grep -q -- "$o" || echo "$o"; done)
	check "$p.8 has every option of --help${missing:+ (missing:$(echo $missing))}" test -z "$missing"
	check "$p.8 is newer than $p" test ! "$man" -ot "$bin"
done
params=$(sed -n 's/.*module_param\(_named\)\?(\s*\([a-z_0-9]*\).*/\2/p' kmod/main.c)
check "kmod/main.c has module parameters" test -n "$params"
missing=$(for q in $params; do page_text "$BUILD/man/vmnap.4" | grep -q "^$q " || echo "$q"; done)
check "vmnap.4 lists every module parameter${missing:+ (missing:$(echo $missing))}" test -z "$missing"
check "vmnap.4 names VERSION" grep -q "vmnap $VERSION" "$BUILD/man/vmnap.4"
check "debian/changelog's version is VERSION" grep -q "^vmnap ($VERSION)" debian/changelog
check "vmnap.ko's VMNAP_MODULE_VERSION is VERSION" \
	grep -q "define VMNAP_MODULE_VERSION[[:space:]]*\"$VERSION\"" kmod/vmnap_mod.h
# A parameter without MODULE_PARM_DESC must fail the generator.
printf 'module_param_named(x, y, uint, 0444);\n' >"$BUILD/man/.noparmdesc.c"
check "a parameter without a description fails man-module.py" \
	sh -c "! scripts/man-module.py '$BUILD/man/.noparmdesc.c' VERSION man/vmnap.4.in >/dev/null 2>&1"
rm -f "$BUILD/man/.noparmdesc.c"
echo "1..$n"
[ "$failed" -eq 0 ]
