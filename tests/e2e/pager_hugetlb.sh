#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pager_hugetlb.sh - which QEMU guest-RAM backends the preload shim hands to
# vmnapd, with real QEMU 7.2 (-machine none: the memory backend objects are
# created and mapped, no guest boots) and a real vmnapd:
#   - memory-backend-memfd,hugetlb=on and memory-backend-file on a
#     hugetlbfs mount are refused before they are mapped, QEMU stops with
#     the shim's reason (hugetlbfs, 4 KiB pages), nothing reaches vmnapd;
#   - memory-backend-file on a file system that is not tmpfs is refused;
#   - memory-backend-file,mem-path=/dev/shm,share=on (Kata's) is handed
#     over: GET /v1/vms/NAME shows its pager with all of its RAM.
# vmnapd refusing a hugetlbfs fd itself is tests/integration/pager_handshake.
# TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD

RAM_MIB=64
QEMU_TIMEOUT=60

TAP_NAME="pager_hugetlb"
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

# Kata's set-up: mem-path=/dev/shm, share=on.  QEMU keeps running.
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	qemu shm "memory-backend-file,id=mem,size=${RAM_MIB}M,share=on,mem-path=/dev/shm" \
		VMNAP_MEM_PATH=/dev/shm &
	qpid=$!
	ram=''
	for ((i = 0; i < 100; i++)); do
		ram=$(api http://localhost/v1/vms/shm | jget '["pager"]["ram_bytes"]' 2>/dev/null) &&
			[ -n "$ram" ] && break
		kill -0 "$qpid" 2>/dev/null || break
		sleep 0.1
	done
	check "memory-backend-file on /dev/shm handed over: pager of $ram bytes" \
		test "$ram" = $((RAM_MIB << 20))
	check "... evictable" test "$(api http://localhost/v1/vms/shm | jget '["pager"]["evictable"]')" = True
	kill "$qpid" 2>/dev/null
	wait "$qpid" 2>/dev/null
	qpid=''
else
	ok "memory-backend-file on /dev/shm handed over # SKIP /dev/shm is not tmpfs"
fi
check "vmnapd logged no error" sh -c "! grep -E ' E ' '$tmp/vmnapd.log'"
tap_done
