#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# run-guest.sh - boot the vmnap guest (Debian's kernel + busybox initramfs)
# in QEMU, run one shell command in it and exit with that command's status.
# See usage() or --help.
# QEMU options are comma-separated key=value lists, not array mistakes:
# shellcheck disable=SC2054
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BUILD=${BUILD:-build}

# Exit statuses of the launcher itself (a guest command's own status is
# passed through unchanged).
EXIT_USAGE=2
EXIT_KERNEL_COMPLAINT=123	# console shows BUG/WARNING/Oops/Call Trace/panic
EXIT_TIMEOUT=124		# --timeout expired, QEMU killed
EXIT_NO_STATUS=125		# QEMU failed or the guest died without a status line

KILL_GRACE_SEC=5		# SIGTERM -> SIGKILL for a QEMU that overran
GUEST_CID=3			# vsock CID of the guest (vhost-user-vsock)
ROOTFS_SERIAL=vmnap-root	# guest-init finds the --rootfs disk by it
# Kernel log lines (after the printk timestamp) that fail a run.
KERNEL_COMPLAINT_RE='\[ *[0-9]+\.[0-9]+\] *(BUG:|kernel BUG at|WARNING:|Oops|Call Trace:|Kernel panic|general protection fault)'

usage() {
	cat <<EOF
usage: scripts/run-guest.sh [options] [-- guest shell command]

Boot the vmnap guest in QEMU (q35, guest RAM from a shared memfd as the NUMA
node memdev), run the command as root under /bin/sh after the virtio and
vsock modules are loaded, power off.  vmnap.ko is at /lib/modules/vmnap.ko
(not loaded).  The command's console output is printed on stdout; the whole
console is in the log file.

options:
  --mem MIB           guest RAM (default 512)
  --mem-path DIR      guest RAM from memory-backend-file,mem-path=DIR,share=on
                      (QEMU creates and unlinks a file in DIR; what Kata
                      Containers uses with DIR=/dev/shm) instead of a memfd
  --cpus N            vCPUs (default 1)
  --timeout SEC       hard limit; QEMU is killed, exit 124 (default 120)
  --name NAME         guest name, used for default paths (default guest);
                      guests running at the same time need different names
  --log FILE          serial console log (default $BUILD/guest/NAME.log)
  --qmp PATH          QMP unix socket (default $BUILD/guest/NAME.qmp)
  --ctl PATH          unix socket (QEMU listens) wired to the guest's /dev/ttyS1;
                      what the guest writes there is also logged to PATH.log
  --disk FILE         virtio-blk disk, guest /dev/vda (raw; qcow2 by extension)
  --vsock-user PATH   vhost-user-vsock device served on unix socket PATH
                      (guest CID $GUEST_CID)
  --env VAR=VAL       put VAR into QEMU's environment (e.g. LD_PRELOAD=...)
  --qemu-arg ARG      extra raw QEMU argument (repeatable)
  --initrd FILE       use this initramfs instead of building/using
                      $BUILD/guest/initramfs.cpio.gz
  --net               user-mode virtio-net NIC (guest eth0 10.0.2.15/24)
  --rootfs IMAGE      ext4 image: the guest mounts it, switch_roots into it
                      and runs the command there (writes go to a throw-away
                      snapshot; busybox, vmnap.ko in /run/vmnap)
  --append ARGS       extra kernel command line
  --kernel VER        guest kernel: a release (6.12.117+deb12-amd64) or a
                      series (6.12: newest installed headers of --flavour);
                      same as VMNAP_KVER (default: linux-headers-amd64's)
  --flavour F         Debian kernel flavour for a series (default amd64;
                      cloud-amd64); same as VMNAP_KFLAVOUR
  --noisy-timers      keep the stock guest's periodic timers (default: boot
                      with tsc=reliable and vm.compaction_proactiveness=0
                      so an idle guest has a timer budget worth offloading)
  --verbose           copy the console to stderr while the guest runs
  -h, --help          this text

exit status: the guest command's; $EXIT_TIMEOUT timeout; $EXIT_NO_STATUS no status from the
guest (QEMU error, kernel panic); $EXIT_KERNEL_COMPLAINT kernel BUG/WARNING/Oops/Call Trace/
panic on the console (the lines are printed); $EXIT_USAGE usage error.
Environment: VMNAP_ACCEL=kvm|tcg forces the accelerator (default: KVM when
/dev/kvm is usable, else TCG); VMNAP_CACHE (guest kernel cache); VMNAP_TCG_TB_MIB
(TCG's translation cache size in MiB; QEMU's default is 1 GiB, most of which
a busy guest ends up touching: a smaller one keeps a VMM's own memory small);
VMNAP_TCG_THREAD (single: all vCPUs on one TCG thread, interleaved; multi,
QEMU's default for SMP guests: one thread per vCPU);
VMNAP_DISK_CACHE (QEMU's cache mode for --disk and --rootfs: none, directsync,
writethrough, writeback or unsafe; none opens the images with O_DIRECT so the
host's page cache does not hold a second copy of what the guest caches);
under TCG the kernel command line gets tsc_early_khz= from $BUILD/tsc-khz
(the host's TSC rate, which a TCG guest's TSC counts at).
EOF
}

die() { echo "run-guest: $*" >&2; exit "$EXIT_NO_STATUS"; }
usage_error() { echo "run-guest: $*" >&2; echo "try --help" >&2; exit "$EXIT_USAGE"; }

mem=512 cpus=1 timeout=120 name=guest log='' qmp='' ctl='' disk='' vsock_user='' initrd=''
mem_path=''
net=0 rootfs='' append='' verbose=0 quiet=1
envs=() qemu_extra=()
need_arg() { [ $# -ge 2 ] || usage_error "$1 needs an argument"; }
while [ $# -gt 0 ]; do
	case $1 in
	--mem) need_arg "$@"; mem=$2; shift 2 ;;
	--mem-path) need_arg "$@"; mem_path=$2; shift 2 ;;
	--cpus) need_arg "$@"; cpus=$2; shift 2 ;;
	--timeout) need_arg "$@"; timeout=$2; shift 2 ;;
	--name) need_arg "$@"; name=$2; shift 2 ;;
	--log) need_arg "$@"; log=$2; shift 2 ;;
	--qmp) need_arg "$@"; qmp=$2; shift 2 ;;
	--ctl) need_arg "$@"; ctl=$2; shift 2 ;;
	--disk) need_arg "$@"; disk=$2; shift 2 ;;
	--vsock-user) need_arg "$@"; vsock_user=$2; shift 2 ;;
	--env) need_arg "$@"; envs+=("$2"); shift 2 ;;
	--qemu-arg) need_arg "$@"; qemu_extra+=("$2"); shift 2 ;;
	--initrd) need_arg "$@"; initrd=$2; shift 2 ;;
	--net) net=1; shift ;;
	--rootfs) need_arg "$@"; rootfs=$2; shift 2 ;;
	--append) need_arg "$@"; append=$2; shift 2 ;;
	--kernel) need_arg "$@"; export VMNAP_KVER=$2; shift 2 ;;
	--flavour) need_arg "$@"; export VMNAP_KFLAVOUR=$2; shift 2 ;;
	--noisy-timers) quiet=0; shift ;;
	--verbose) verbose=1; shift ;;
	-h|--help) usage; exit 0 ;;
	--) shift; break ;;
	*) usage_error "unknown option '$1'" ;;
	esac
done
command=${*:-true}

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
is_uint "$mem" || usage_error "--mem wants MiB > 0, got '$mem'"
is_uint "$cpus" || usage_error "--cpus wants N > 0, got '$cpus'"
is_uint "$timeout" || usage_error "--timeout wants seconds > 0, got '$timeout'"
[[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || usage_error "--name wants [A-Za-z0-9_.-]+, got '$name'"
for e in ${envs[@]+"${envs[@]}"}; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "--env wants VAR=VAL, got '$e'"
done
[ -z "$disk" ] || [ -f "$disk" ] || [ -b "$disk" ] || usage_error "--disk $disk: no such file"
[ -z "$rootfs" ] || [ -f "$rootfs" ] || usage_error "--rootfs $rootfs: no such file"
[ -z "$initrd" ] || [ -f "$initrd" ] || usage_error "--initrd $initrd: no such file"
[ -z "$mem_path" ] || [ -d "$mem_path" ] || usage_error "--mem-path $mem_path: no such directory"
[[ $mem_path != *,* ]] || usage_error "--mem-path $mem_path: no commas (QEMU option syntax)"
disk_cache=''
case ${VMNAP_DISK_CACHE:-} in
'') ;;
none | directsync | writethrough | writeback | unsafe) disk_cache=",cache=$VMNAP_DISK_CACHE" ;;
*) usage_error "VMNAP_DISK_CACHE must be none, directsync, writethrough, writeback or unsafe, got '$VMNAP_DISK_CACHE'" ;;
esac

# Paths the caller gave are relative to the caller's directory.
abspath() { case $1 in ''|/*) printf '%s' "$1" ;; *) printf '%s' "$PWD/$1" ;; esac; }
log=$(abspath "$log") qmp=$(abspath "$qmp") ctl=$(abspath "$ctl") disk=$(abspath "$disk")
vsock_user=$(abspath "$vsock_user") initrd=$(abspath "$initrd") rootfs=$(abspath "$rootfs")

cd "$root"
out_dir=$BUILD/guest
mkdir -p "$out_dir"
log=${log:-$out_dir/$name.log}
qmp=${qmp:-$out_dir/$name.qmp}
qemu_log=$out_dir/$name.qemu.log
cmd_file=$out_dir/$name.cmd

kdir=$("$here/guest-kernel.sh") || die "guest kernel unavailable (see above)"
# The uncompressed PVH kernel boots seconds faster under TCG than the bzImage.
kernel=$kdir/vmlinuz
[ -f "$kdir/vmlinux" ] && kernel=$kdir/vmlinux
# KVM only where it really runs a guest kernel: QEMU starting a vCPU is not
# enough (a nested or paravirtualised /dev/kvm, PVM here, starts one, and a
# stock kernel then hangs right after decompression).  So boot the guest
# kernel itself with no root file system and wait up to 10 s for its first
# console line; the verdict is cached per host boot, kernel and QEMU.
kvm_usable() {
	local key verdict out pid
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	key=$(printf '%s %s %s' "$(cat /proc/sys/kernel/random/boot_id)" \
		"$(stat -c '%n %s %Y' "$kernel")" "$(qemu-system-x86_64 --version | head -1)" |
		md5sum | cut -c1-16)
	verdict=${VMNAP_CACHE:-/var/cache/vmnap}/accel/$key
	if [ ! -f "$verdict" ]; then
		mkdir -p "${verdict%/*}"
		out=$(mktemp)
		qemu-system-x86_64 -machine q35 -accel kvm -cpu host -m 256 -nodefaults \
			-display none -no-reboot -kernel "$kernel" \
			-append "console=ttyS0 earlyprintk=ttyS0 panic=-1" \
			-serial "file:$out" </dev/null >/dev/null 2>&1 &
		pid=$!
		for _ in $(seq 50); do
			grep -qa 'Linux version' "$out" && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if grep -qa 'Linux version' "$out"; then echo kvm; else echo tcg; fi >"$verdict.$$"
		kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
		rm -f "$out"
		mv "$verdict.$$" "$verdict"
	fi
	[ "$(cat "$verdict")" = kvm ]
}
accel=${VMNAP_ACCEL:-}
if [ -z "$accel" ]; then
	if kvm_usable; then accel=kvm; else accel=tcg; fi
fi
if [ -z "$initrd" ]; then
	initrd=$("$here/mkinitramfs.sh") || die "initramfs unavailable (see above)"
fi

case $accel in
kvm) cpu_model=host ;;
tcg) cpu_model=max ;;
*) usage_error "VMNAP_ACCEL must be kvm or tcg, got '$accel'" ;;
esac

nonce=$(tr -d '-' </proc/sys/kernel/random/uuid)
printf '%s' "$command" >"$cmd_file"
cmdline="console=ttyS0 panic=-1 vmnap_nonce=$nonce vmnap_name=$name"
[ "$net" = 1 ] && cmdline+=" vmnap_net=1"
[ -n "$rootfs" ] && cmdline+=" vmnap_rootfs=1"
[ "$quiet" = 1 ] && cmdline+=" tsc=reliable vmnap_quiet=1"
# TCG on a busy host can miss the IO-APIC timer check at boot and panic
# ("IO-APIC + timer doesn't work"): the emulated timer is sound, skip it.
[ "$accel" = tcg ] && cmdline+=" no_timer_check"
# Under TCG the guest's TSC counts at the host's rate, and its boot-time
# calibration against the emulated PIT can be off by an order of magnitude
# on a loaded host (the guest clock then runs that much fast; tsc=reliable
# leaves no watchdog to notice): the guest is told the rate instead.
if [ "$accel" = tcg ]; then
	if tsc_khz=$("$BUILD/tsc-khz" 2>/dev/null) && [ -n "$tsc_khz" ]; then
		cmdline+=" tsc_early_khz=$tsc_khz"
	else
		echo "run-guest: no host TSC rate ($BUILD/tsc-khz: run 'make all'): the guest calibrates its TSC itself" >&2
	fi
fi
[ -n "$append" ] && cmdline+=" $append"

if [ -n "$mem_path" ]; then
	ram_backend="memory-backend-file,id=mem,size=${mem}M,mem-path=$mem_path,share=on"
else
	ram_backend="memory-backend-memfd,id=mem,size=${mem}M,share=on"
fi

disk_format() { case $1 in *.qcow2) echo qcow2 ;; *) echo raw ;; esac; }

accel_opt=$accel
if [ "$accel" = tcg ] && [ -n "${VMNAP_TCG_TB_MIB:-}" ]; then
	case $VMNAP_TCG_TB_MIB in
	'' | *[!0-9]*) usage_error "VMNAP_TCG_TB_MIB must be a number of MiB, got '$VMNAP_TCG_TB_MIB'" ;;
	esac
	accel_opt+=",tb-size=$VMNAP_TCG_TB_MIB"
fi
if [ "$accel" = tcg ] && [ -n "${VMNAP_TCG_THREAD:-}" ]; then
	case $VMNAP_TCG_THREAD in
	single | multi) accel_opt+=",thread=$VMNAP_TCG_THREAD" ;;
	*) usage_error "VMNAP_TCG_THREAD must be single or multi, got '$VMNAP_TCG_THREAD'" ;;
	esac
fi

args=(
	-name "guest=$name,debug-threads=on" -machine q35 -accel "$accel_opt" -cpu "$cpu_model"
	-smp "$cpus" -m "${mem}M"
	-object "$ram_backend"
	-numa "node,memdev=mem"
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline"
	-fw_cfg "name=opt/vmnap/cmd,file=$cmd_file"
	-nodefaults -no-user-config -display none -no-reboot
	-chardev "file,id=console,path=$log" -serial chardev:console
	-qmp "unix:$qmp,server=on,wait=off" -pidfile "$out_dir/$name.pid"
)
if [ -n "$ctl" ]; then
	rm -f "$ctl"
	args+=(-chardev "socket,id=ctl,path=$ctl,server=on,wait=off,logfile=$ctl.log"
		-serial chardev:ctl)
else
	args+=(-serial null)
fi
if [ -n "$disk" ]; then
	args+=(-drive "file=$disk,if=none,id=disk0,format=$(disk_format "$disk")$disk_cache"
		-device virtio-blk-pci,drive=disk0)
fi
if [ -n "$rootfs" ]; then
	args+=(-drive "file=$rootfs,if=none,id=rootfs,format=$(disk_format "$rootfs"),snapshot=on$disk_cache"
		-device "virtio-blk-pci,drive=rootfs,serial=$ROOTFS_SERIAL")
fi
if [ -n "$vsock_user" ]; then
	args+=(-chardev "socket,id=vsock,path=$vsock_user"
		-device vhost-user-vsock-pci,chardev=vsock)
fi
if [ "$net" = 1 ]; then
	args+=(-netdev user,id=net0 -device virtio-net-pci,netdev=net0)
fi
args+=(${qemu_extra[@]+"${qemu_extra[@]}"})

rm -f "$log" "$qmp"
: >"$log"
echo "run-guest: $name: $accel, $cpus vCPU, ${mem} MiB, timeout ${timeout}s, console $log" >&2

qemu_pid='' tail_pid=''
cleanup() {
	[ -n "$qemu_pid" ] && kill -TERM "$qemu_pid" 2>/dev/null && wait "$qemu_pid" 2>/dev/null
	[ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# timeout(1) forwards our SIGTERM to QEMU and SIGKILLs it after the grace.
env ${envs[@]+"${envs[@]}"} timeout -k "$KILL_GRACE_SEC" "$timeout" \
	qemu-system-x86_64 "${args[@]}" </dev/null >"$qemu_log" 2>&1 &
qemu_pid=$!
if [ "$verbose" = 1 ]; then
	tail -n +1 -f --pid="$qemu_pid" "$log" >&2 &
	tail_pid=$!
fi
rc=0
wait "$qemu_pid" || rc=$?
qemu_pid=
[ -n "$tail_pid" ] && { sleep 0.2; kill "$tail_pid" 2>/dev/null || true; tail_pid=; }

console=$(tr -d '\r' <"$log")
# The command's output: the console between our two status lines.
printf '%s\n' "$console" | awk -v n="$nonce" '
	index($0, "VMNAP-READY " n) { on = 1; next }
	index($0, "VMNAP-EXIT " n) { exit }
	on { print }'
ready=$(printf '%s\n' "$console" | sed -n "s/.*VMNAP-READY $nonce \([0-9.]*\).*/\1/p")
status=$(printf '%s\n' "$console" | sed -n "s/.*VMNAP-EXIT $nonce \([0-9]*\).*/\1/p")
[ -n "$ready" ] && echo "run-guest: $name: command started ${ready}s after kernel start ($accel)" >&2

complaints=$(printf '%s\n' "$console" | grep -E "$KERNEL_COMPLAINT_RE" || true)
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	echo "run-guest: $name: timed out after ${timeout}s; QEMU killed (console: $log)" >&2
	[ -n "$complaints" ] && printf 'run-guest: kernel: %s\n' "$complaints" >&2
	exit "$EXIT_TIMEOUT"
fi
if [ -n "$complaints" ]; then
	echo "run-guest: $name: the kernel complained on the console ($log):" >&2
	printf '%s\n' "$complaints" | head -n 20 | sed 's/^/run-guest:   /' >&2
	echo "run-guest: $name: guest command status ${status:-none}" >&2
	exit "$EXIT_KERNEL_COMPLAINT"
fi
if [ -z "$status" ]; then
	echo "run-guest: $name: no status line from the guest (QEMU exit $rc)" >&2
	sed 's/^/run-guest: qemu: /' "$qemu_log" >&2
	tail -n 15 "$log" | tr -d '\r' | sed 's/^/run-guest: console: /' >&2
	exit "$EXIT_NO_STATUS"
fi
if [ "$rc" -ne 0 ]; then
	echo "run-guest: $name: QEMU exited with $rc after the guest finished" >&2
	sed 's/^/run-guest: qemu: /' "$qemu_log" >&2
fi
exit "$status"
