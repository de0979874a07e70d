#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# boot.sh - end-to-end: boot Debian's guest kernel in QEMU with the vmnap
# initramfs and check the launcher's contract (TAP):
#   - vmnap.ko loads with parameters, prints its version, shows them in
#     /sys/module/vmnap/parameters, unloads cleanly (1 and 2 vCPUs);
#   - the guest command's exit status is carried out;
#   - a kernel WARNING on the console fails the run;
#   - a hung guest is killed at --timeout (status 124);
#   - --rootfs switch_roots into an ext4 image;
#   - tests/lib/guest.sh: background guest, QMP, the /dev/ttyS1 channel.
# Builds what it needs (guest kernel, initramfs: cached, fast when
# unchanged); needs vmnap.ko built (make all).
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
RUN=scripts/run-guest.sh
WORK=$BUILD/e2e-boot
TIMEOUT_SEC=300		# per boot; generous for TCG on a loaded machine
HUNG_TIMEOUT_SEC=10	# the --timeout case: the guest never finishes
TEST_CID=7 TEST_PORT=6001	# module parameters, distinct from the defaults
ROOTFS_MIB=16

EXIT_KERNEL_COMPLAINT=123 EXIT_TIMEOUT=124	# scripts/run-guest.sh

skip_all() { echo "1..0 # SKIP $*"; echo "$*"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 missing: run 'make deps'"
# The module built for the selected guest kernel (VMNAP_KVER, default: the
# headers of linux-headers-amd64).
module=$(scripts/kmod-build.sh --path) || { echo "Bail out! no guest kernel release"; exit 1; }
[ -f "$module" ] || { echo "Bail out! $module not built: run 'make all'"; exit 1; }

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
	n=$((n + 1)) failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	[ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/# /'
}
check() {	# check DESCRIPTION COMMAND...: one TAP line from a command's status
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# near_host VALUE TO_KHZ PER: VALUE * TO_KHZ is $host_khz (the host's TSC
# rate) within 1/PER, both positive
near_host() {
	awk -v v="${1:-0}" -v k="$2" -v h="$host_khz" -v per="$3" \
		'BEGIN { d = v * k - h; if (d < 0) d = -d; exit !(v > 0 && h > 0 && d * per <= h) }'
}

mkdir -p "$WORK"
# Build (or reuse) the guest kernel and initramfs before the first boot so
# that a build error is reported as such.
# Every boot uses this image, so that a concurrent change of the tree
# cannot mix two images into one run.
if ! image=$(scripts/mkinitramfs.sh 2>"$WORK/mkinitramfs.err"); then
	echo "Bail out! cannot build the guest image: $(cat "$WORK/mkinitramfs.err")"
	exit 1
fi

version=$(modinfo -F version "$module")

# run_guest NAME [options] -- CMD: sets rc, out (stdout), err (stderr).
run_guest() {
	local name=$1
	shift
	rc=0
	"$RUN" --name "$name" --timeout "$TIMEOUT_SEC" --initrd "$image" "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
	out=$(cat "$WORK/$name.out") err=$(cat "$WORK/$name.err")
}

# The guest half of the module test: load with parameters, report what the
# kernel shows, unload.  Any failed step ends the command with its status.
module_cycle="
	insmod /lib/modules/vmnap.ko host_cid=$TEST_CID port=$TEST_PORT enabled=0 || exit 10
	dmesg | grep 'vmnap: ' | sed 's/^/dmesg-load: /'
	for p in host_cid port enabled; do
		echo \"param \$p=\$(cat /sys/module/vmnap/parameters/\$p)\"
	done
	echo \"cpus=\$(nproc)\"
	rmmod vmnap || exit 11
	dmesg | grep 'vmnap: ' | sed 's/^/dmesg-unload: /'
	[ -d /sys/module/vmnap ] && exit 12
	exit 0"

params_shown() {
	grep -qx "param host_cid=$TEST_CID" <<<"$1" && grep -qx "param port=$TEST_PORT" <<<"$1" &&
		grep -qx "param enabled=N" <<<"$1"
}

module_case() {	# module_case CPUS
	local cpus=$1 tag="$1 vCPU"
	run_guest "e2e-boot-cpu$cpus" --cpus "$cpus" -- "$module_cycle"
	if [ "$rc" -ne 0 ]; then
		not_ok "$tag: vmnap.ko loads and unloads (status $rc)" "$err" "$out"
		for d in "version line" parameters "unloaded line" "CPU count"; do
			not_ok "$tag: $d (not checked: the run failed)"
		done
		return
	fi
	ok "$tag: vmnap.ko loads and unloads, no kernel complaint on the console"
	check "$tag: dmesg has the version line (version $version)" \
		grep -Eq "^dmesg-load: .*vmnap: .*version $version\b" <<<"$out"
	check "$tag: /sys/module/vmnap/parameters show host_cid, port, enabled" \
		params_shown "$out"
	check "$tag: dmesg says unloaded" grep -Eq '^dmesg-unload: .*vmnap: unloaded' <<<"$out"
	check "$tag: guest has $cpus CPU(s)" grep -qx "cpus=$cpus" <<<"$out"
}

module_case 1
module_case 2

run_guest e2e-boot-exit -- 'echo before; exit 3'
check "the guest command's exit status is carried out (exit 3 -> 3)" test "$rc" -eq 3

# Under TCG the guest is told the host's TSC rate: its own calibration
# against the emulated PIT can be far off on a loaded host (the clock then
# runs that much fast).  The guest's clock rate must be the host's.
host_khz=$("$BUILD/tsc-khz" 2>/dev/null || true)
run_guest e2e-boot-tsc -- 'cat /proc/cmdline; grep -m1 "^cpu MHz" /proc/cpuinfo'
if ! grep -q '(tcg)$' <<<"$err"; then
	ok "# SKIP TSC rate: the guest ran under KVM (kvm-clock, no TCG calibration)"
elif [ -z "$host_khz" ]; then
	ok "# SKIP TSC rate: $BUILD/tsc-khz gives no host rate here (no constant, nonstop TSC)"
else
	# measured twice (here and by run-guest.sh): the two readings differ
	# in the last kHz or so
	cmd_khz=$(grep -Eo 'tsc_early_khz=[0-9]+' <<<"$out" | head -n1 | cut -d= -f2)
	check "TCG: the kernel command line carries tsc_early_khz=${cmd_khz:-none}, the host's $host_khz within 0.1% (status $rc)" \
		near_host "$cmd_khz" 1 1000
	guest_mhz=$(sed -n 's/^cpu MHz[[:space:]]*: *//p' <<<"$out")
	check "TCG: the guest's TSC rate ($guest_mhz MHz) is the host's ($host_khz kHz) within 1%" \
		near_host "$guest_mhz" 1000 100
fi

# A line in the kernel log format, as the kernel prints a real warning.
run_guest e2e-boot-warn -- 'echo "<4>WARNING: CPU: 0 PID: 1 at tests/e2e/boot.sh:1 fake+0x0/0x0" >/dev/kmsg; exit 0'
if [ "$rc" -eq "$EXIT_KERNEL_COMPLAINT" ] && grep -q 'WARNING: CPU: 0 PID: 1 at tests/e2e/boot.sh' <<<"$err"; then
	ok "a kernel WARNING on the console fails the run and is printed"
else
	not_ok "a kernel WARNING on the console fails the run and is printed (status $rc)" "$err"
fi
# The same text printed by a program (not the kernel) is not a complaint.
run_guest e2e-boot-nowarn -- 'echo "WARNING: this is program output"; exit 0'
check "program output saying WARNING: does not fail the run (status $rc)" test "$rc" -eq 0

rc=0
"$RUN" --name e2e-boot-hung --timeout "$HUNG_TIMEOUT_SEC" --initrd "$image" -- 'sleep 100000' \
	>/dev/null 2>"$WORK/e2e-boot-hung.err" || rc=$?
check "a guest overrunning --timeout is killed, status $EXIT_TIMEOUT (got $rc)" test "$rc" -eq "$EXIT_TIMEOUT"

# --rootfs: a tiny ext4 image (busybox as /bin/sh and a marker file).
rootdir=$WORK/rootfs
rm -rf "$rootdir" "$WORK/rootfs.img"
mkdir -p "$rootdir"/{bin,dev,proc,sys,run,etc}
cp /bin/busybox "$rootdir/bin/busybox"
ln -s busybox "$rootdir/bin/sh"
echo "vmnap-rootfs-marker" >"$rootdir/etc/marker"
if mke2fs -q -F -t ext4 -d "$rootdir" "$WORK/rootfs.img" "${ROOTFS_MIB}M" >/dev/null 2>&1; then
	run_guest e2e-boot-rootfs --rootfs "$WORK/rootfs.img" -- \
		'cat /etc/marker; grep " / ext4 " /proc/mounts >/dev/null && echo root-is-ext4; ls /run/vmnap/vmnap.ko'
	if [ "$rc" -eq 0 ] && grep -qx vmnap-rootfs-marker <<<"$out" && grep -qx root-is-ext4 <<<"$out" &&
		grep -qx /run/vmnap/vmnap.ko <<<"$out"; then
		ok "--rootfs: the command runs in the ext4 image after switch_root"
	else
		not_ok "--rootfs: the command runs in the ext4 image after switch_root (status $rc)" "$out" "$err"
	fi
	# VMNAP_DISK_CACHE=none: the image opened with O_DIRECT (the snapshot
	# overlay too); the guest reads it and writes through to the overlay.
	VMNAP_DISK_CACHE=none run_guest e2e-boot-rootfs-nocache --rootfs "$WORK/rootfs.img" -- \
		'cat /etc/marker; echo written >/etc/w; sync; echo 3 >/proc/sys/vm/drop_caches; cat /etc/w'
	if [ "$rc" -eq 0 ] && grep -qx vmnap-rootfs-marker <<<"$out" && grep -qx written <<<"$out"; then
		ok "VMNAP_DISK_CACHE=none: the rootfs reads and its snapshot takes writes"
	else
		not_ok "VMNAP_DISK_CACHE=none: the rootfs reads and its snapshot takes writes (status $rc)" \
			"$out" "$err"
	fi
	VMNAP_DISK_CACHE=bogus run_guest e2e-boot-rootfs-badcache --rootfs "$WORK/rootfs.img" -- true
	if [ "$rc" -eq 2 ] && grep -q 'VMNAP_DISK_CACHE must be' <<<"$err"; then
		ok "VMNAP_DISK_CACHE=bogus is a usage error (status 2), no guest"
	else
		not_ok "VMNAP_DISK_CACHE=bogus is a usage error (status 2), no guest (status $rc)" "$err"
	fi
else
	not_ok "--rootfs: cannot make the test image with mke2fs -d"
fi

# tests/lib/guest.sh: background guest, QMP, host<->guest line channel.
. tests/lib/guest.sh
guest_start e2e-boot-lib --timeout "$TIMEOUT_SEC" --initrd "$image" -- \
	'read -r line </dev/ttyS1; echo "echo:$line" >/dev/ttyS1; exit 0'
# The guest blocks in read until we send: QMP sees it running.
guest_wait_console e2e-boot-lib '^VMNAP-READY ' "$TIMEOUT_SEC"
status=$(guest_qmp e2e-boot-lib query-status 2>&1)
line="ping $$"
guest_send e2e-boot-lib "$line" &&
	guest_wait_ctl e2e-boot-lib "^echo:$line\$" "$TIMEOUT_SEC"
lib_rc=$?
guest_wait e2e-boot-lib
wait_rc=$?
check "guest.sh: a line sent to /dev/ttyS1 comes back over it" test "$lib_rc" -eq 0
if [ "$wait_rc" -eq 0 ] && grep -q '"running": true' <<<"$status"; then
	ok "guest.sh: QMP query-status answers, guest_wait returns the status"
else
	not_ok "guest.sh: QMP query-status answers, guest_wait returns the status ($wait_rc)" "$status"
fi

echo "1..$n"
exit $((failed > 0))
