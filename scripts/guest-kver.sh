#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Print the guest kernel release (e.g. 6.1.0-57-amd64): the one whose
# headers Debian's linux-headers-amd64 metapackage depends on.
set -e
if [ -n "$VMNAP_KVER" ]; then echo "$VMNAP_KVER"; exit 0; fi
dep=$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null |
	tr ',' '\n' | sed -n 's/^ *linux-headers-\([^ ]*-amd64\).*/\1/p' | head -n1)
[ -n "$dep" ] || { echo "guest-kver: linux-headers-amd64 is not installed; run 'make deps'" >&2; exit 1; }
echo "$dep"
