#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# run.sh - run the KUnit suites of vmnap.ko's pure logic on UML.
#
# The UML kernel is built from Debian's linux-source-6.1 tarball in
# $VMNAP_CACHE/kunit/<key>/, key = sha256 of (tarball hash, kunitconfig,
# Kconfig glue): what decides the configuration of the whole kernel.  The
# tested sources (the kmod/core/*.c named in Kbuild.vmnap, kmod/core/*.h,
# uapi/vmnap.h) are synced into lib/vmnap/ of that
# tree by content, so a change to them rebuilds only those objects; their
# own hash is printed and recorded with the result.  A cold build takes
# several minutes on 2 cores; later runs take seconds.
#
# Output: flat TAP (one line per KUnit case, "suite.case"), parsed from the
# kernel's KTAP by ktap2tap.py.  Exit 77 when the source tarball is absent.
#
# --build-only: extract, configure and build the UML kernel, run nothing
# (scripts/check.py starts this in the background on a cold cache, so the
# build overlaps the tests before this one; the lock below makes the test
# wait for it).  Output then goes to $cache/<key>/build-only.log.
set -eu

build_only=false
case "${1:-}" in
--build-only) build_only=true ;;
"") ;;
*) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tarball=${KUNIT_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
cache=${VMNAP_CACHE:-/var/cache/vmnap}/kunit
jobs=${KUNIT_JOBS:-2}

if [ ! -r "$tarball" ]; then
	echo "1..0 # SKIP $tarball missing (Debian package linux-source-6.1)"
	exit 77
fi
mkdir -p "$cache"

# Hash of the tarball, remembered per (size, mtime) to avoid rereading it.
stamp=$(stat -c '%s-%Y' "$tarball")
hfile="$cache/tarball.$stamp.sha256"
[ -s "$hfile" ] || sha256sum "$tarball" | cut -d' ' -f1 > "$hfile"
key=$( (cat "$hfile"; cat "$here/vmnap.kunitconfig" "$here/Kconfig.vmnap") |
	sha256sum | cut -c1-16)
kdir="$cache/$key"
objs=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$here/Kbuild.vmnap" |
	sed -n 's/^vmnap_kunit-y[^=]*=//p')
srcs="uapi/vmnap.h $(cd "$root" && ls kmod/core/*.h) $(for o in $objs; do echo "${o%.o}.c"; done)"
srckey=$(cd "$root" && cat $srcs | sha256sum | cut -c1-16)
echo "# kunit: tree $kdir, tested sources $srckey"

exec 9>"$cache/$key.lock"
flock 9

# A warm cache that last ran these very sources: nothing to build ahead.
if $build_only && [ -f "$kdir/linux/.kunit/vmlinux" ] &&
	[ "$(cat "$kdir/last.srckey" 2>/dev/null)" = "$srckey" ]; then
	exit 0
fi

tree="$kdir/linux"
if [ ! -f "$tree/.vmnap-ready" ]; then
	echo "# kunit: extracting $tarball (cold cache)"
	rm -rf "$kdir" && mkdir -p "$kdir"
	tar -xJf "$tarball" -C "$kdir"
	mv "$kdir"/linux-source-* "$tree"
	mkdir -p "$tree/lib/vmnap"
	echo 'source "lib/vmnap/Kconfig"' >> "$tree/lib/Kconfig.debug"
	echo 'obj-$(CONFIG_VMNAP_KUNIT) += vmnap/' >> "$tree/lib/Makefile"
	touch "$tree/.vmnap-ready"
fi

# Sync by content (cmp), so unchanged files keep their mtime.
sync_file() { # src dst
	mkdir -p "$(dirname "$2")"
	cmp -s "$1" "$2" || cp "$1" "$2"
}
sync_file "$here/Kconfig.vmnap" "$tree/lib/vmnap/Kconfig"
sync_file "$here/Kbuild.vmnap" "$tree/lib/vmnap/Makefile"
for f in $srcs; do sync_file "$root/$f" "$tree/lib/vmnap/$f"; done
sync_file "$here/vmnap.kunitconfig" "$tree/lib/vmnap/.kunitconfig"

# what "build" and "run" build: the same kernel
kbuild="--kunitconfig=lib/vmnap/.kunitconfig --build_dir=.kunit --jobs=$jobs"
if $build_only; then
	(cd "$tree" && python3 tools/testing/kunit/kunit.py build $kbuild) \
		> "$kdir/build-only.log" 2>&1
	exit
fi

out="$kdir/last.ktap"
log="$kdir/last.log"
rc=0
(cd "$tree" && nice python3 tools/testing/kunit/kunit.py run $kbuild \
	--timeout=300 --raw_output=kunit) > "$log" 2>&1 || rc=$?
grep -v '^\[' "$log" > "$out" || true
if ! grep -q '^KTAP version\|^TAP version' "$out"; then
	tail -n 40 "$log" | sed 's/^/# /'
	echo "not ok 1 - kunit build or boot failed (rc $rc, log $log)"
	exit 1
fi
echo "$srckey" > "$kdir/last.srckey"
python3 "$here/ktap2tap.py" < "$out"
