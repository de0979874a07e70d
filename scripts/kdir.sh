#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Print the kernel build directory for the guest module: the headers of
# Debian's linux-headers-amd64 metapackage (newest installed flavour).
set -e
ver=$(scripts/guest-kver.sh)
d=/usr/src/linux-headers-$ver
[ -d "$d" ] || { echo "kdir: $d missing; run 'make deps'" >&2; exit 1; }
echo "$d"
