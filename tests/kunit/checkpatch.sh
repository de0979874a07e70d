#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# checkpatch.sh - kernel coding style of vmnap.ko (checkpatch.pl --no-tree)
# over kmod/*.[ch] and uapi/vmnap_genl.h.  checkpatch.pl comes from the
# linux-source-6.1 tree that run.sh extracted (or KUNIT_CHECKPATCH=path).
#
# Ignored: FUNCTION_ARGUMENTS, a false positive on parameters declared as
# pointers to arrays ("const u64 (*ranges)[2]"): they do have a name.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${VMNAP_CACHE:-/var/cache/vmnap}/kunit
cp=${KUNIT_CHECKPATCH:-}
if [ -z "$cp" ]; then
	for f in "$cache"/*/linux/scripts/checkpatch.pl; do
		[ -f "$f" ] && cp=$f && break
	done
fi
if [ -z "$cp" ] || [ ! -f "$cp" ]; then
	echo "checkpatch.pl not found (run tests/kunit/run.sh first)"
	exit 77
fi
cd "$root"
perl "$cp" --no-tree --terse --show-types --ignore FUNCTION_ARGUMENTS \
	-f kmod/*.c kmod/*.h uapi/vmnap_genl.h
