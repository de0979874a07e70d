#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_backends.sh - which guest-RAM backends the preload shim hands to
# vmnapd, with real QEMU 7.2 (-machine none: the memory backend objects are
# created and mapped, no guest boots) and a real vmnapd:
#   - memory-backend-memfd,hugetlb=on and memory-backend-file on a
#     hugetlbfs mount are refused before they are mapped, QEMU stops with
#     the shim's reason (hugetlbfs, 4 KiB pages), nothing reaches vmnapd;
#   - memory-backend-file on a file system that is not tmpfs is refused;
#   - memory-backend-file,mem-path=/dev/shm,share=on as Kata starts QEMU,
#     through examples/kata/qemu-vmnap (-name sandbox-ID): handed over,
#     GET /v1/vms/sandbox-ID shows its pager with all of its RAM;
#   - a memfd made with the raw memfd_create syscall, as Cloud Hypervisor
#     makes its "ch_ram" (a Python stand-in: Cloud Hypervisor is not in
#     Debian bookworm), found by its name and handed over.
# vmnapd refusing a hugetlbfs fd itself is tests/integration/pager_handshake.
# TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

RAM_MIB=64
QEMU_TIMEOUT=60

TAP_NAME="pager_backends"
. tests/lib/tap.sh
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
for p in "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so"; do
	[ -e "$p" ] || skip "$p not built"
done

tmp=$(mktemp -d /tmp/vmnap-hugetlb.XXXXXX)
RUN=$tmp/run
hugemnt=$tmp/huge
qpid=''
# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh
finish() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	mountpoint -q "$hugemnt" && umount "$hugemnt"
	vmnapd_stop
	rm -rf "$tmp"
}
trap finish EXIT

vmnapd_start "$tmp/vmnapd.log" "$RUN/mem.sock" "$RUN/api.sock" -- -r "$RUN" -s "$tmp/store"
check "vmnapd listens" test -S "$RUN/mem.sock" -a -S "$RUN/api.sock"

# qemu NAME BACKEND-OBJECT [VAR=VAL...]: QEMU with the shim, no machine
qemu() {
	local name=$1 obj=$2
	shift 2
	env LD_PRELOAD="$PWD/$BUILD/libvmnap-preload.so" VMNAP_SOCKET="$RUN/mem.sock" \
		VMNAP_VM="$name" "$@" timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -machine none \
		-nodefaults -display none -object "$obj" -qmp "unix:$tmp/$name.qmp,server=on,wait=off" \
		</dev/null >"$tmp/$name.err" 2>&1
}
accepted() { api http://localhost/v1/ | jget '["rejections"]["mem_handshake"]["accepted"]'; }

# refused NAME WHAT REGEX BACKEND-OBJECT [VAR=VAL...]
refused() {
	local name=$1 what=$2 re=$3 obj=$4 rc=0
	shift 4
	qemu "$name" "$obj" "$@" || rc=$?
	if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -Eq "$re" "$tmp/$name.err" &&
		grep -q 'unable to map backing store for guest RAM' "$tmp/$name.err"; then
		ok "$what: QEMU stops with the reason ($(grep -o 'guest RAM is [^(]*' "$tmp/$name.err" | head -n 1))"
	else
		not_ok "$what: QEMU stops with the reason (exit $rc)"
		sed 's/^/# /' "$tmp/$name.err"
	fi
}

refused h1 "memory-backend-memfd,hugetlb=on" 'vmnap-preload: ERROR: .*hugetlbfs.*4 KiB pages' \
	"memory-backend-memfd,id=mem,size=${RAM_MIB}M,share=on,hugetlb=on"

mkdir -p "$hugemnt"
if mount -t hugetlbfs none "$hugemnt" 2>"$tmp/mount.err"; then
	refused h2 "memory-backend-file on a hugetlbfs mount" \
		'vmnap-preload: ERROR: .*hugetlbfs.*4 KiB pages' \
		"memory-backend-file,id=mem,size=${RAM_MIB}M,share=on,mem-path=$hugemnt" \
		"VMNAP_MEM_PATH=$hugemnt"
	umount "$hugemnt"
else
	ok "memory-backend-file on a hugetlbfs mount # SKIP cannot mount hugetlbfs: $(cat "$tmp/mount.err")"
fi

if [ "$(stat -f -c %T "$tmp")" != tmpfs ]; then
	refused h3 "memory-backend-file on $(stat -f -c %T "$tmp")" \
		'vmnap-preload: ERROR: .*not a shmem file' \
		"memory-backend-file,id=mem,size=${RAM_MIB}M,share=on,mem-path=$tmp" \
		"VMNAP_MEM_PATH=$tmp"
else
	ok "memory-backend-file on a file system other than tmpfs # SKIP $tmp is tmpfs"
fi
check "nothing refused reached vmnapd (mem handshakes accepted: 0)" test "$(accepted)" = 0

# pager_of VM PID: wait until VM's pager shows up (or PID is gone); its RAM bytes
pager_of() {
	local ram='' i
	for ((i = 0; i < 100; i++)); do
		ram=$(api "http://localhost/v1/vms/$1" | jget '["pager"]["ram_bytes"]' 2>/dev/null) &&
			[ -n "$ram" ] && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "$ram"
}
evictable() { api "http://localhost/v1/vms/$1" | jget '["pager"]["evictable"]'; }

# Kata's set-up: mem-path=/dev/shm, share=on, QEMU run by the example
# wrapper as Kata runs it.  QEMU keeps running.
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	VMNAP_QEMU=$(command -v qemu-system-x86_64) VMNAP_PRELOAD=$PWD/$BUILD/libvmnap-preload.so \
		VMNAP_SOCKET=$RUN/mem.sock timeout "$QEMU_TIMEOUT" examples/kata/qemu-vmnap \
		-name "sandbox-0123abcd,debug-threads=on" -machine none -nodefaults -display none \
		-object "memory-backend-file,id=mem,size=${RAM_MIB}M,share=on,mem-path=/dev/shm" \
		</dev/null >"$tmp/kata.err" 2>&1 &
	qpid=$!
	ram=$(pager_of sandbox-0123abcd "$qpid")
	check "Kata's memory-backend-file on /dev/shm through qemu-vmnap: sandbox-0123abcd has a pager of $ram bytes" \
		test "$ram" = $((RAM_MIB << 20))
	check "... evictable" test "$(evictable sandbox-0123abcd)" = True
	kill "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
	qpid=''
else
	ok "memory-backend-file on /dev/shm handed over # SKIP /dev/shm is not tmpfs"
fi

# Cloud Hypervisor's guest RAM: memfd "ch_ram" from the raw syscall,
# mapped shared (--memory shared=on).
LD_PRELOAD=$PWD/$BUILD/libvmnap-preload.so VMNAP_SOCKET=$RUN/mem.sock VMNAP_VM=chv \
	VMNAP_MEMFD_NAME=ch_ram python3 - "$RAM_MIB" <<'PY' >"$tmp/chv.err" 2>&1 &
import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_memfd_create = 319  # x86_64
fd = libc.syscall(SYS_memfd_create, b"ch_ram", 1)  # MFD_CLOEXEC, not libc's wrapper
assert fd >= 0, os.strerror(ctypes.get_errno())
os.ftruncate(fd, int(sys.argv[1]) << 20)
m = mmap.mmap(fd, int(sys.argv[1]) << 20, mmap.MAP_SHARED)
time.sleep(60)
PY
qpid=$!
ram=$(pager_of chv "$qpid")
check "a raw-syscall memfd \"ch_ram\" (Cloud Hypervisor's) handed over: pager of $ram bytes" \
	test "$ram" = $((RAM_MIB << 20))
kill "$qpid" 2>/dev/null
wait "$qpid" 2>/dev/null
qpid=''
check "vmnapd logged no error" sh -c "! grep -E ' E ' '$tmp/vmnapd.log'"
tap_done
