#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# kmod_balloon.sh - vmnap.ko when another driver holds free page reporting
# (TAP).  QEMU gets -device virtio-balloon-pci,free-page-reporting=on, the
# guest loads virtio_balloon first (it registers the one page_reporting
# slot), then vmnap.ko against the selftest's loopback peer: the module's
# page_reporting_register() gets -EBUSY, so its HELLO does not offer
# VMNAP_F_FREE_REPORT and netlink says free reporting is off.  Unloading
# vmnap.ko leaves the balloon's registration alone.  The launcher fails the
# run on BUG/WARNING/Oops/Call Trace on the console.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

VM=kmod-balloon
GUEST_TIMEOUT=240
BOOT_WAIT=180
FREE_REPORT_BIT=2	# VMNAP_F_FREE_REPORT
PEER_SECONDS=30

TAP_NAME="kmod balloon"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
[ -f vmnap.ko ] || skip "vmnap.ko not built (make module)"

. tests/lib/guest.sh
trap guest_cleanup EXIT

guest_start "$VM" --cpus 1 --timeout "$GUEST_TIMEOUT" \
	--qemu-arg -device --qemu-arg virtio-balloon-pci,free-page-reporting=on -- "
modprobe virtio_balloon && echo BALLOON-LOADED
vmnap_selftest --serve $PEER_SECONDS >/tmp/peer.log 2>&1 &
sleep 1
insmod /lib/modules/vmnap.ko host_cid=1
for i in \$(seq 30); do vmnap-guest status 2>/dev/null | grep -q '^link=up' && break; sleep 0.5; done
vmnap-guest status | sed 's/^/ST:/'
dmesg | grep -i 'free page reporting' | sed 's/^/DMESG:/'
rmmod vmnap && echo VMNAP-UNLOADED
rmmod virtio_balloon && echo BALLOON-UNLOADED
kill %1 2>/dev/null
echo BALLOON-TEST-DONE
"
check "guest ran the test" guest_wait_console "$VM" '^BALLOON-TEST-DONE' "$BOOT_WAIT"
rc=0
guest_wait "$VM" || rc=$?
log=$(tr -d '\r' <"$GUEST_DIR/$VM.log")
val() { printf '%s\n' "$log" | sed -n "s/^ST:$1=//p" | tail -n 1; }
check "virtio_balloon loaded and holds free page reporting" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^BALLOON-LOADED' && printf '%s\n' \"\$0\" | grep -q 'Free page reporting enabled'" "$log"
check "module linked to the loopback peer (HELLO sent)" test "$(val link)" = up
features=$(val features)
check "HELLO does not offer VMNAP_F_FREE_REPORT (features ${features:-?})" \
	sh -c "[ -n '$features' ] && [ \$(($features & $FREE_REPORT_BIT)) -eq 0 ]"
check "netlink: free reporting off" test "$(val free_reporting)" = 0
check "the module says why (another reporter)" \
	sh -c "printf '%s\n' \"\$0\" | grep -q 'free page reporting off (another reporter'" "$log"
check "unload vmnap.ko, then virtio_balloon: both clean" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^VMNAP-UNLOADED' && printf '%s\n' \"\$0\" | grep -q '^BALLOON-UNLOADED'" "$log"
check "no BUG/WARNING/Oops on the console (launcher)" test "$rc" -eq 0
echo "1..$n"
[ "$failed" = 0 ]
