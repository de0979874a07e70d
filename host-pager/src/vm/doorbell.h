/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * doorbell.h - tell the guest module that vmnapd listens for its link now.
 *
 * The module reconnects with a capped backoff (up to 5 s by default), and
 * it cannot know when vmnapd starts listening for the VM: a VM registered
 * after it booted, vmnapd restarted.  So the module also listens on guest
 * vsock port VMNAP_DOORBELL_PORT (uapi/vmnap.h) while it runs; a host
 * connection there makes it connect at once if its link is down.  vmnapd
 * rings when a VM's coordinator and guest link are attached: through the
 * VMM's hybrid vsock socket ("CONNECT <port>\n", answered "OK <port>\n":
 * Firecracker, Cloud Hypervisor, vmnap-vsockd and vmnapd's own device) or
 * with an AF_VSOCK connect to the guest's CID.  Nothing is sent or read on
 * the connection; its outcome is counted and logged (at info level where
 * the guest or its VMM is not up yet: a VM registered before it boots),
 * and a ring that cannot reach the guest costs nothing but the backoff it
 * was meant to save.
 *
 * One ring per VM at a time (a new one drops the one in flight), bounded
 * by GUEST_DOORBELL_TIMEOUT_MS; everything runs on the loop thread.
 */
#ifndef VMNAP_DOORBELL_H
#define VMNAP_DOORBELL_H

#include <stdint.h>

#include "vmnapd.h"

#define GUEST_DOORBELL_TIMEOUT_MS	5000U

struct guest_doorbell;

/* Per VM, since its first ring. */
struct guest_doorbell_stats {
	uint64_t rings;		/* rings started */
	uint64_t answered;	/* the guest accepted: its module connects now */
	uint64_t refused;	/* nobody listens in the guest (no module yet) */
	uint64_t failed;	/* the guest could not be reached (logged) */
	uint64_t timeouts;	/* no answer in GUEST_DOORBELL_TIMEOUT_MS */
	const char *last;	/* the last outcome's name, NULL: none yet */
};

/*
 * Ring through the hybrid vsock socket @uds (the VMM's "<uds>", not
 * "<uds>_<port>").  0 when the ring is under way, -errno when it could not
 * start (counted in failed and logged).
 */
int guest_doorbell_ring_hybrid(struct vm *vm, const char *uds);
/* Ring guest CID @cid over AF_VSOCK; as above. */
int guest_doorbell_ring_vsock(struct vm *vm, uint32_t cid);
/* Drop a ring in flight and the counters (vm_free). */
void guest_doorbell_vm_detach(struct vm *vm);
void guest_doorbell_get_stats(const struct vm *vm, struct guest_doorbell_stats *st);

#endif
