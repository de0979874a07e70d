#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Print the guest kernel release (e.g. 6.1.0-57-amd64).
#
#   VMNAP_KVER unset          the release Debian's linux-headers-amd64
#                             metapackage depends on (the default kernel)
#   VMNAP_KVER=<release>      that release as is (6.12.117+deb12-amd64)
#   VMNAP_KVER=<major.minor>  the newest release of that series whose
#                             headers are installed, of flavour
#                             VMNAP_KFLAVOUR (default amd64; cloud-amd64...)
set -e
flavour=${VMNAP_KFLAVOUR:-amd64}
case $flavour in
*[!a-z0-9-]*|'') echo "guest-kver: bad flavour '$flavour'" >&2; exit 1 ;;
esac
case ${VMNAP_KVER:-} in
'') ;;
*[!0-9.]*) echo "$VMNAP_KVER"; exit 0 ;;
*.*)
	# Debian spells a release <version>-<abi>-<flavour> (6.1.0-57-amd64)
	# or <version>+deb<N>-<flavour> (6.12.117+deb12-amd64).
	# installed headers or ones unpacked into the cache (guest-headers.sh)
	series=$(printf '%s' "$VMNAP_KVER" | sed 's/\./\\./g')
	rel=$( { ls /usr/src; ls "${VMNAP_CACHE:-/var/cache/vmnap}/headers"; } 2>/dev/null |
		sed 's/^linux-headers-//' |
		grep -E "^$series\.[0-9.]*(-[0-9]+|\+deb[0-9]+)-$flavour\$" | sort -V | tail -n1)
	# else the release apt's metapackage for the series depends on
	[ -n "$rel" ] || rel=$(apt-cache show "linux-headers-$VMNAP_KVER-$flavour" 2>/dev/null |
		sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
		sed -n "s/^ *linux-headers-\([^ ]*-$flavour\)\( .*\)\{0,1\}\$/\1/p" | head -n1)
	[ -n "$rel" ] || {
		echo "guest-kver: no linux-headers-$VMNAP_KVER*-$flavour installed, cached or known to apt" >&2
		exit 1
	}
	echo "$rel"
	exit 0 ;;
*) echo "guest-kver: bad VMNAP_KVER '$VMNAP_KVER' (a release or major.minor)" >&2; exit 1 ;;
esac
dep=$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null |
	tr ',' '\n' | sed -n 's/^ *linux-headers-\([^ ]*-amd64\).*/\1/p' | head -n1)
[ -n "$dep" ] || { echo "guest-kver: linux-headers-amd64 is not installed; run 'make deps'" >&2; exit 1; }
echo "$dep"
