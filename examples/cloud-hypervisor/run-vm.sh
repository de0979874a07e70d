#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# run-vm.sh - one Cloud Hypervisor VM with its guest RAM served by vmnapd.
#
#   run-vm.sh NAME KERNEL DISK [MEM_MIB] [CID]
#
# Guest RAM is a shared memfd ("--memory shared=on"; Cloud Hypervisor names
# it "ch_ram" and creates it with the raw memfd_create syscall, which the
# shim recognises by its /proc/self/fd link).  hugepages=on is refused:
# vmnap serves and evicts 4 KiB pages.  The shim needs a dynamically
# linked cloud-hypervisor (the project's static release binary ignores
# LD_PRELOAD).  Sockets live under /run (vmnapd's unit cannot reach /tmp).
# Then the VM is registered: pause backend "chv" (the API socket; Cloud
# Hypervisor stops the guest's clock while paused, hence
# --allow-clock-stop), guest link over the hybrid vsock socket.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 NAME KERNEL DISK [MEM_MIB] [CID]" >&2; exit 2; }
name=$1 kernel=$2 disk=$3 mem=${4:-1024} cid=${5:-3}
run=/run/vmnap-ch/$name
mkdir -p "$run"
rm -f "$run/api.sock" "$run/vsock.sock"

LD_PRELOAD=/usr/lib/vmnap/libvmnap-preload.so \
VMNAP_SOCKET=/run/vmnap/mem.sock VMNAP_VM=$name VMNAP_MEMFD_NAME=ch_ram \
	cloud-hypervisor \
	--api-socket "path=$run/api.sock" \
	--kernel "$kernel" --cmdline "console=ttyS0 root=/dev/vda1 rw tsc=reliable" \
	--disk "path=$disk" \
	--cpus boot=2 \
	--memory "size=${mem}M,shared=on" \
	--vsock "cid=$cid,socket=$run/vsock.sock" \
	--serial tty --console off &
vmm=$!

for _ in $(seq 50); do [ -S "$run/api.sock" ] && break; sleep 0.1; done
vmnapctl register "$name" --pause "chv:$run/api.sock" --allow-clock-stop \
	--link "hybrid:$run/vsock.sock" --managed
wait "$vmm"
vmnapctl delete "$name" || true
