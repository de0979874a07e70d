#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# deb.sh - the packages as an administrator gets them: make deb (lintian
# must pass), then dpkg -i of vmnapd, vmnap-dkms and vmnap-guest into a
# clean bookworm chroot (base cached by scripts/pkg-chroot.sh), and check
# the files, the DKMS registration, the enabled units, systemd-analyze
# verify, every --version, vmnapd starting from the shipped config, the
# DKMS tree building vmnap.ko against this host's 6.1 headers, and a purge
# leaving nothing behind.
set -uo pipefail
TAP_NAME="pkg deb"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
. tests/lib/tap.sh
BUILD=${BUILD:-build}
VERSION=$(cat VERSION)

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot)"
for c in dpkg-buildpackage dh dh_dkms lintian help2man debootstrap zstd; do
	command -v "$c" >/dev/null || skip "$c missing: run 'make deps'"
done

# Outside $BUILD: the Makefile includes every *.d file under it.
T=$(mktemp -d "${TMPDIR:-/tmp}/vmnap-pkg-test.XXXXXX")
R=$T/root
cleanup() {
	if mountpoint -q "$R/proc" && ! umount "$R/proc"; then
		echo "# $R/proc still mounted: $T left in place" >&2
		return
	fi
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT

# ---- build ----
if make --no-print-directory BUILD="$BUILD" deb >"$T/deb.log" 2>&1; then
	ok "make deb (dpkg-buildpackage, lintian --fail-on error,warning)"
else
	not_ok "make deb"; sed 's/^/# /' "$T/deb.log" | tail -n 30
	echo "1..$n"; exit 1
fi
D=$BUILD/deb
DEBS=("$D/vmnapd_${VERSION}_amd64.deb" "$D/vmnap-dkms_${VERSION}_all.deb" "$D/vmnap-guest_${VERSION}_amd64.deb")
check "three packages named with VERSION" sh -c 'for f; do [ -f "$f" ] || exit 1; done' _ "${DEBS[@]}"

# ---- a clean chroot ----
base=$(scripts/pkg-chroot.sh "${DEBS[@]}" 2>"$T/chroot.log") ||
	{ sed 's/^/# /' "$T/chroot.log"; skip "no base chroot (debootstrap failed: network?)"; }
mkdir -p "$R"
zstd -q -d -c "$base" | tar -C "$R" -xf - || { not_ok "unpack $base"; echo "1..$n"; exit 1; }
mount -t proc proc "$R/proc"
cp "${DEBS[@]}" "$R/tmp/"
in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }
if in_root dpkg -i "${DEBS[@]/#$D\//\/tmp\/}" >"$T/dpkg.log" 2>&1; then
	ok "dpkg -i vmnapd vmnap-dkms vmnap-guest into a clean chroot"
else
	not_ok "dpkg -i"; sed 's/^/# /' "$T/dpkg.log" | tail -n 20
fi
for p in vmnapd vmnap-dkms vmnap-guest; do
	check "$p is installed" sh -c "chroot '$R' dpkg-query -W -f='\${db:Status-Status}' $p | grep -qx installed"
done

# ---- files where they belong ----
files="/usr/sbin/vmnapd /usr/sbin/vmnap-vsockd /usr/sbin/vmnapctl /usr/sbin/vmnap-gateway
/usr/sbin/vmnap-guest
/usr/lib/vmnap/libvmnap-preload.so /lib/systemd/system/vmnapd.service
/lib/systemd/system/vmnap-gateway.service /etc/vmnap/vmnapd.conf
/usr/share/doc/vmnapd/vmnapd.conf.example /usr/share/doc/vmnapd/gateway.env.example
/usr/share/doc/vmnapd/openapi.yaml /usr/share/doc/vmnapd/examples/kata/qemu-vmnap
/usr/share/doc/vmnapd/examples/kata/configuration-qemu-vmnap.toml
/usr/share/doc/vmnapd/examples/cloud-hypervisor/run-vm.sh
/usr/share/doc/vmnapd/examples/kubernetes/vmnapd-daemonset.yaml
/usr/share/man/man8/vmnapd.8.gz /usr/share/man/man8/vmnap-vsockd.8.gz /usr/share/man/man8/vmnapctl.8.gz
/usr/share/man/man8/vmnap-gateway.8.gz /usr/share/man/man8/vmnap-guest.8.gz
/usr/share/man/man4/vmnap.4.gz /usr/src/vmnap-$VERSION/dkms.conf /usr/src/vmnap-$VERSION/Kbuild
/usr/lib/modules-load.d/vmnap.conf /usr/lib/sysctl.d/60-vmnap.conf
/usr/share/doc/vmnap-guest/kernel-cmdline.txt"
missing=$(for f in $files; do [ -e "$R$f" ] || echo "$f"; done)
check "every file in place${missing:+ (missing: $(echo $missing))}" test -z "$missing"
check "vmnapd.conf is a conffile" sh -c "chroot '$R' dpkg-query -W -f='\${Conffiles}' vmnapd | grep -q /etc/vmnap/vmnapd.conf"
check "the units run /usr/sbin programs" sh -c "grep -h '^ExecStart=' '$R'/lib/systemd/system/vmnap*.service | grep -v /usr/local | wc -l | grep -qx 2"
check "modules-load.d loads vmnap" grep -qx vmnap "$R/usr/lib/modules-load.d/vmnap.conf"
check "sysctl.d sets vm.compaction_proactiveness = 0" \
	grep -qx 'vm.compaction_proactiveness = 0' "$R/usr/lib/sysctl.d/60-vmnap.conf"
check "kernel-cmdline.txt names tsc=reliable" grep -q 'tsc=reliable' "$R/usr/share/doc/vmnap-guest/kernel-cmdline.txt"
check "dkms.conf has PACKAGE_VERSION=$VERSION" grep -qx "PACKAGE_VERSION=\"$VERSION\"" "$R/usr/src/vmnap-$VERSION/dkms.conf"
check "dkms knows vmnap/$VERSION (postinst ran dkms add)" sh -c "chroot '$R' dkms status vmnap 2>/dev/null | grep -q 'vmnap/$VERSION'"

# ---- units ----
check "vmnapd.service enabled" test -L "$R/etc/systemd/system/multi-user.target.wants/vmnapd.service"
check "vmnap-gateway.service not enabled (needs gateway.env)" \
	test ! -e "$R/etc/systemd/system/multi-user.target.wants/vmnap-gateway.service"
for u in vmnapd vmnap-gateway; do
	# --man=no: the chroot has no man(1); the pages' presence is checked above
	out=$(in_root systemd-analyze verify --man=no /lib/systemd/system/$u.service 2>&1)
	check "systemd-analyze verify $u.service${out:+ ($(echo $out))}" test -z "$out"
done

# ---- programs ----
for p in vmnapd vmnap-vsockd vmnapctl vmnap-gateway vmnap-guest; do
	check "$p --version is '$p $VERSION'" test "$(in_root $p --version 2>&1)" = "$p $VERSION"
done
in_root timeout -s TERM 5 vmnapd -c /etc/vmnap/vmnapd.conf -r /tmp/run -s /tmp/store -e /tmp/ev.jsonl \
	>"$T/vmnapd.log" 2>&1
check "vmnapd starts with the shipped /etc/vmnap/vmnapd.conf" grep -q ' ready (run dir /tmp/run' "$T/vmnapd.log"

# ---- the DKMS tree builds the module (what dkms build runs) ----
KDIR=$(scripts/kdir.sh 2>/dev/null)
if [ -n "$KDIR" ] && [ -d "$KDIR" ]; then
	cp -r "$R/usr/src/vmnap-$VERSION" "$T/dkms"
	if make -C "$KDIR" M="$T/dkms" modules >"$T/kbuild.log" 2>&1; then
		ok "the DKMS tree builds vmnap.ko against $KDIR"
		got=$(modinfo -F parm "$T/dkms/vmnap.ko" | cut -d: -f1 | sort | paste -sd' ')
		want=$(sed -n 's/.*module_param\(_named\)\?(\s*\([a-z_0-9]*\).*/\2/p' kmod/main.c | sort | paste -sd' ')
		check "its parameters are kmod/main.c's" test "$got" = "$want"
	else
		not_ok "the DKMS tree builds vmnap.ko"; sed 's/^/# /' "$T/kbuild.log" | tail -n 15
	fi
else
	echo "# no kernel headers: the DKMS tree was not built"
fi

# ---- purge ----
if in_root dpkg --purge vmnap-guest vmnap-dkms vmnapd >"$T/purge.log" 2>&1; then
	ok "dpkg --purge"
else
	not_ok "dpkg --purge"; sed 's/^/# /' "$T/purge.log" | tail -n 10
fi
left=$(for f in $files /etc/vmnap; do [ -e "$R$f" ] && echo "$f"; done)
check "nothing left after purge${left:+ ($(echo $left))}" test -z "$left"
check "dkms forgot vmnap" sh -c "! chroot '$R' dkms status vmnap 2>/dev/null | grep -q vmnap"
echo "1..$n"
[ "$failed" -eq 0 ]
