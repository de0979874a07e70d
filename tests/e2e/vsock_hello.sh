#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# vsock_hello.sh - the guest module vmnap.ko reaches vmnapd's guest link
# through the vhost-user-vsock device (port 5151), under real QEMU (TAP).
#
# vmnapd starts with the VM's vsock device only (--vsock): nothing listens
# for the guest link yet, so the module's first connect is reset.  The
# module is loaded with a 10-minute reconnect delay, then the VM is
# registered (PUT /vms/NAME: coordinator + guest link), which rings the
# module's doorbell (guest port 1023): within this test only the doorbell
# can bring the link up.  The module says HELLO over virtio-vsock; both
# ends must report the link up and count the ring.  A guest process
# without privileges (source port >= 1024) is refused at port 5151 and the
# link stays up.  Then the guest unloads the module: the link closes on
# both sides, and a reload says HELLO again.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
. tests/lib/guest.sh
VMNAPD_API_MAX_SEC=10
. tests/lib/vmnapd.sh

VMNAPD=$BUILD/vmnapd
VM=hello
CID=3
BOOT_WAIT=300
LINK_WAIT=60
# far beyond LINK_WAIT: a link that comes up did not come by backoff
RECONNECT_MS=600000
GUEST_TIMEOUT=400

TAP_NAME="vsock hello"
. tests/lib/tap.sh

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v curl >/dev/null || skip "curl not installed"
[ -x "$VMNAPD" ] || skip "build first: $VMNAPD missing (make all)"
[ -f vmnap.ko ] || skip "vmnap.ko not built (make module)"

W=$(mktemp -d /tmp/vmnap-vsock-hello.XXXXXX)
RUN=$W/run
trap 'vmnapd_cleanup "$W"' EXIT

vmnapd_start "$W/vmnapd.log" "$RUN/api.sock" "$W/vu.sock" -- -r "$RUN" -s "$W/store" -l debug \
	--vsock "$VM:$W/vu.sock:$CID:$W/v.sock"

guest_start hello --vsock-user "$W/vu.sock" --timeout $GUEST_TIMEOUT -- "
ctr() { vmnap-guest status 2>/dev/null | sed -n \"s/^counter.\$1=//p\"; }
up() { for i in \$(seq $LINK_WAIT); do vmnap-guest status 2>/dev/null | grep -q '^link=up' && return 0; sleep 1; done; return 1; }
insmod /lib/modules/vmnap.ko reconnect_min_ms=$RECONNECT_MS reconnect_max_ms=$RECONNECT_MS || exit 1
for i in \$(seq $LINK_WAIT); do [ \"\$(ctr connect_fails)\" -ge 1 ] 2>/dev/null && break; sleep 1; done
echo REFUSED connect_fails=\$(ctr connect_fails)
up && echo LINK-UP-1
echo RINGS doorbell_rings=\$(ctr doorbell_rings) doorbell_fails=\$(ctr doorbell_fails)
echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd
if su -s /bin/sh nobody -c 'vsock_xfer client vsock:2:5151 echo:16 -t 30'; then
	echo UNPRIV-CONNECTED; else echo UNPRIV-REFUSED; fi
read line </dev/ttyS1
rmmod vmnap && echo MODULE-GONE
read line </dev/ttyS1
insmod /lib/modules/vmnap.ko && up && echo LINK-UP-2
read line </dev/ttyS1
"
if guest_wait_console hello '^REFUSED' $BOOT_WAIT; then
	ok "module loaded; its first connect is reset (nothing listens for the link)"
else
	not_ok "module loaded; its first connect is reset (nothing listens for the link)"
fi
check "guest says connect_fails=1 before registration" \
	grep -q '^REFUSED connect_fails=1' "$GUEST_DIR/hello.log"

check "VM registered through the API (coordinator and guest link), unmanaged" \
	eval 'api -X PUT "http://vmnapd/vms/$VM" -d "{\"managed\": false}" | grep -q "\"name\""'

guest_wait_console hello '^RINGS' $BOOT_WAIT || true
check "module HELLO through the device after registration, not by the 10-minute backoff" \
	grep -q '^LINK-UP-1' "$GUEST_DIR/hello.log"
check "the module counted one doorbell ring and no listener failure" \
	grep -q '^RINGS doorbell_rings=1 doorbell_fails=0' "$GUEST_DIR/hello.log"
check "vmnapd sees the link up (API link.state)" [ "$(link_state)" = up ]
check "vmnapd counted the ring answered (API link.doorbell)" \
	[ "$(vm_json | jget '["link"]["doorbell"]["answered"]')" = 1 ]
check "vmnapd logged the answer" grep -q "guest doorbell via .* answered" "$W/vmnapd.log"
check "vmnapd logged the module's HELLO" grep -q "guest HELLO: vmnap.ko" "$W/vmnapd.log"

# An unprivileged guest process (ephemeral source port >= 1024) is refused
# at port 5151: it cannot take over the module's session.
guest_wait_console hello '^UNPRIV-' $LINK_WAIT || true
check "unprivileged guest process refused at port 5151" \
	grep -q '^UNPRIV-REFUSED' "$GUEST_DIR/hello.log"
check "vmnapd logged the refusal (not a reserved port)" \
	grep -q "host port 5151 refused: not a reserved port" "$W/vmnapd.log"
check "the module's link is still up" [ "$(link_state)" = up ]

guest_send hello go
guest_wait_console hello '^MODULE-GONE' $LINK_WAIT || true
for _ in $(seq 20); do [ "$(link_state)" = closed ] && break; sleep 0.5; done
check "module unloaded: vmnapd sees the link closed" [ "$(link_state)" = closed ]

guest_send hello go
if guest_wait_console hello '^LINK-UP-2' $BOOT_WAIT; then
	ok "module reloaded: HELLO again over the device"
else
	not_ok "module reloaded: HELLO again over the device"
fi
check "vmnapd sees the link up again" [ "$(link_state)" = up ]
guest_send hello go
guest_wait hello
check "guest exits cleanly (no kernel complaints)" [ $? -eq 0 ]
echo "1..$n"
[ "$failed" -eq 0 ]
