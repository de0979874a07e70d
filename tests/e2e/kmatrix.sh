#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmatrix.sh SERIES FLAVOUR TEST [ARGS...] - run an e2e test against another
# Debian guest kernel: SERIES (6.12) of FLAVOUR (amd64) resolves to the
# newest linux-headers-<SERIES>*-<FLAVOUR> installed or cached, else the
# release apt's linux-headers-<SERIES>-<FLAVOUR> names (guest-kver.sh);
# vmnap.ko is built for it in build/kmod-<release>/ (kmod-build.sh,
# incremental; headers not installed are unpacked into the cache by
# guest-headers.sh), the guest kernel is fetched into the cache once, then
# TEST runs with VMNAP_KVER set to that release.  Skips when apt knows no
# such kernel.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 3 ] || { echo "usage: kmatrix.sh SERIES FLAVOUR TEST [ARGS...]" >&2; exit 2; }
series=$1 flavour=$2
shift 2

if ! ver=$(VMNAP_KVER=$series VMNAP_KFLAVOUR=$flavour scripts/guest-kver.sh 2>&1); then
	echo "1..0 # SKIP $ver"
	exit 77
fi
export VMNAP_KVER=$ver
unset VMNAP_KFLAVOUR
echo "# guest kernel $ver"
if ! out=$(scripts/kmod-build.sh 2>&1); then
	echo "Bail out! vmnap.ko does not build for $ver"
	printf '%s\n' "$out" | sed 's/^/# /'
	exit 1
fi
if ! out=$(scripts/guest-kernel.sh 2>&1); then
	echo "Bail out! guest kernel $ver unavailable"
	printf '%s\n' "$out" | sed 's/^/# /'
	exit 1
fi
exec "$@"
