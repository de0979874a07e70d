#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# checkpatch.sh - kernel coding style of vmnap.ko (checkpatch.pl --no-tree)
# over kmod/*.[ch], kmod/core/*.[ch] and uapi/vmnap_genl.h.  checkpatch.pl comes from the
# linux-source-6.1 tree that run.sh extracted (or KUNIT_CHECKPATCH=path).
#
# Ignored: FUNCTION_ARGUMENTS, a false positive on parameters declared as
# pointers to arrays ("const u64 (*ranges)[2]"): they do have a name.
# In kmod/compat.h only: LINUX_VERSION_CODE and CONSTANT_COMPARISON, which
# is what an out-of-tree compatibility header is for (in-tree code would
# simply be written for its one version).
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
rc=0
perl "$cp" --no-tree --terse --show-types --ignore FUNCTION_ARGUMENTS \
	-f $(ls kmod/*.[ch] kmod/core/*.[ch] | grep -v '^kmod/compat.h$') uapi/vmnap_genl.h || rc=1
perl "$cp" --no-tree --terse --show-types \
	--ignore LINUX_VERSION_CODE,CONSTANT_COMPARISON -f kmod/compat.h || rc=1
exit $rc
