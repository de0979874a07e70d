#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsock_doorbell.sh - a VM registered with vmnapd after its module loaded
# gets its guest link at once: registration rings the module's doorbell
# (guest port 1023) through vmnapd's own vhost-user-vsock device, under
# real QEMU with the real module (TAP).
#
# vmnapd starts with the VM's vsock device only (--vsock): nothing listens
# for the guest link yet, so the module's first connect is reset.  The
# module is loaded with a 10-minute reconnect delay: within this test only
# the doorbell can bring the link up.  Then the VM is registered (PUT
# /vms/NAME): the link must come up, vmnapd must count the ring answered
# and the module must count it rung.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
. tests/lib/guest.sh
VMNAPD_API_MAX_SEC=10
. tests/lib/vmnapd.sh

VMNAPD=$BUILD/vmnapd
VM=bell
CID=3
BOOT_WAIT=300
LINK_WAIT=60
# far beyond LINK_WAIT: a link that comes up did not come by backoff
RECONNECT_MS=600000
GUEST_TIMEOUT=400

TAP_NAME="vsock doorbell"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v curl >/dev/null || skip "curl not installed"
[ -x "$VMNAPD" ] || skip "build first: $VMNAPD missing (make all)"
[ -f vmnap.ko ] || skip "vmnap.ko not built (make module)"

W=$(mktemp -d /tmp/vmnap-vsock-doorbell.XXXXXX)
RUN=$W/run
trap 'vmnapd_cleanup "$W"' EXIT

vmnapd_start "$W/vmnapd.log" "$RUN/api.sock" "$W/vu.sock" -- -r "$RUN" -s "$W/store" -l debug \
	--vsock "$VM:$W/vu.sock:$CID:$W/v.sock"

guest_start $VM --vsock-user "$W/vu.sock" --timeout $GUEST_TIMEOUT -- "
ctr() { vmnap-guest status 2>/dev/null | sed -n \"s/^counter.\$1=//p\"; }
insmod /lib/modules/vmnap.ko reconnect_min_ms=$RECONNECT_MS reconnect_max_ms=$RECONNECT_MS || exit 1
for i in \$(seq $LINK_WAIT); do [ \"\$(ctr connect_fails)\" -ge 1 ] 2>/dev/null && break; sleep 1; done
echo REFUSED connect_fails=\$(ctr connect_fails)
for i in \$(seq $LINK_WAIT); do vmnap-guest status 2>/dev/null | grep -q '^link=up' && break; sleep 1; done
vmnap-guest status 2>/dev/null | grep -q '^link=up' && echo LINK-UP
echo RINGS doorbell_rings=\$(ctr doorbell_rings) doorbell_fails=\$(ctr doorbell_fails) connect_fails=\$(ctr connect_fails)
read line </dev/ttyS1
"
if guest_wait_console $VM '^REFUSED' $BOOT_WAIT; then
	ok "module loaded; its first connect is reset (nothing listens for the link)"
else
	not_ok "module loaded; its first connect is reset (nothing listens for the link)"
fi
check "guest says connect_fails=1 before registration" \
	grep -q '^REFUSED connect_fails=1' "$GUEST_DIR/$VM.log"

check "VM registered (coordinator and guest link), unmanaged" \
	eval 'api -X PUT "http://vmnapd/vms/$VM" -d "{\"managed\": false}" | grep -q "\"name\""'

if guest_wait_console $VM '^RINGS' $BOOT_WAIT; then :; fi
check "the link came up after registration, not by the 10-minute backoff" \
	grep -q '^LINK-UP' "$GUEST_DIR/$VM.log"
check "the module counted one doorbell ring and no listener failure" \
	grep -q '^RINGS doorbell_rings=1 doorbell_fails=0' "$GUEST_DIR/$VM.log"
check "vmnapd sees the link up (API link.state)" [ "$(link_state)" = up ]
check "vmnapd counted the ring answered (API link.doorbell)" \
	[ "$(vm_json | jget '["link"]["doorbell"]["answered"]')" = 1 ]
check "vmnapd logged the answer" grep -q "guest doorbell via .* answered" "$W/vmnapd.log"

guest_send $VM go
guest_wait $VM
check "guest exits cleanly (no kernel complaints)" [ $? -eq 0 ]
echo "1..$n"
[ "$failed" -eq 0 ]
