/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vhost_vsock.h - vmnapd's built-in vhost-user-vsock device (one per VM)
 * for QEMU's `-device vhost-user-vsock-pci,chardev=...`: the guest's
 * virtio-vsock streams end in vmnapd.  vmnap-vsockd (api/vsockd.c) runs
 * the same device in a process of its own, which maps guest RAM itself
 * (ops->map_fd) and leaves port 5151 bridged; "vmnapd" below is whichever
 * process runs it.
 *
 * Routing, host CID 2, Firecracker's hybrid-vsock convention:
 *   guest -> host port VMNAP_DEFAULT_PORT  the VM's guest link (vm->link),
 *                                         when attached; else bridged
 *   guest -> host port P                  connect(2) to the unix socket
 *                                         "<uds>_P"; RST when nobody
 *                                         listens there
 *   host -> guest port P                  a client connects to "<uds>",
 *                                         writes "CONNECT P\n", and reads
 *                                         "OK <host port>\n" once the guest
 *                                         accepted; then the stream is raw.
 *                                         The connection is closed instead
 *                                         when the guest refuses (RST) or
 *                                         does not answer in time.
 *
 * The reply carries the host-side (local) port the device allocated for
 * the connection, as Firecracker does: clients written for Firecracker's
 * hybrid vsock parse it unchanged, and it is the one number that tells
 * apart two connections to the same guest port (it is what the guest sees
 * as the peer port of the accepted socket).  The guest port is known to
 * the client already: it asked for it.
 *
 * Stream semantics (virtio 1.2 §5.10): REQUEST, RESPONSE, RW, CREDIT_UPDATE,
 * CREDIT_REQUEST, SHUTDOWN, RST; credit both ways (buf_alloc / fwd_cnt).
 * Guest data the host side cannot take yet waits in vmnapd, bounded by the
 * credit vmnapd gave; TX (guest -> host) is never stalled by a full RX
 * queue: replies owed to the guest are flags on the connection (bounded by
 * the number of connections) plus a bounded queue of RSTs for strangers.
 *
 * Guest memory: while the VM is paused (vhost_vsock_set_paused) the device
 * neither reads nor writes the rings or buffers; host data waits in the
 * host sockets and vmnapd.  Before touching any guest range it asks its
 * owner to make it resident (ops->make_resident: the pager), which never
 * waits: a range that is out is read back by a pager thread and the
 * answer is "not yet" (-EAGAIN); the queue then stops where it is (the
 * chain stays in the ring, nothing is consumed) until the owner calls
 * vhost_vsock_memory_ready, and is processed again from there.  A range
 * that cannot be made resident is an error for that chain (counted in
 * residency_errors; the chain is returned unused).  A turn of the device
 * ends after VSOCK_TURN_NS (vhost_vsock.c) and the rest of the queues
 * waits for the next turn, after every other fd and timer.  Connections live
 * in vmnapd and survive QEMU's stop/cont (GET_VRING_BASE, rings set up
 * again); when the front-end disconnects (QEMU exited) every connection is
 * reset: the guest that owned them is gone.
 */
#ifndef VMNAP_VHOST_VSOCK_H
#define VMNAP_VHOST_VSOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_link.h"
#include "loop.h"
#include "vhost_user.h"

#define VSOCK_HOST_CID		2U		/* VMADDR_CID_HOST */
#define VSOCK_CONN_MAX		1024U		/* connections per VM */

struct vhost_vsock;

struct vhost_vsock_config {
	const char *vhost_user_path;	/* QEMU's chardev socket (we listen) */
	const char *uds_path;		/* hybrid vsock socket "<uds>" */
	uint64_t guest_cid;		/* >= 3 */
};

struct vhost_vsock_stats {
	/* traffic */
	uint64_t tx_packets, rx_packets;	/* TX: from guest, RX: to guest */
	uint64_t tx_bytes, rx_bytes;		/* stream payload */
	uint64_t conns_opened, conns_closed;
	uint64_t guest_connects, host_connects;
	uint64_t refused;			/* RST: nobody listening / refused */
	/* hostile or broken guest input */
	uint64_t bad_packets;		/* short header, bad len, bad op/type */
	uint64_t bad_cid;		/* src/dst CID not this VM / the host */
	uint64_t credit_violations;	/* sent beyond our credit: RST */
	uint64_t unknown_conn;		/* packet for no connection: RST */
	uint64_t conn_limit;		/* REQUEST beyond VSOCK_CONN_MAX */
	uint64_t unreserved_port;	/* guest link REQUEST from port >= 1024: RST */
	uint64_t rst_dropped;		/* stray RST queue full */
	uint64_t bad_connect_lines;	/* host client sent a bad CONNECT */
	uint64_t residency_errors;	/* pager could not make RAM resident */
	uint64_t residency_waits;	/* a queue waited for RAM to come back */
	uint64_t paused_deferrals;	/* work held back while paused */
	uint64_t turn_yields;		/* turns cut short by their time budget */
	uint64_t rx_ahead_calls;	/* owner told the next RX chains changed */
	uint64_t frontend_resets;	/* QEMU went away with connections */
	/* from the vhost-user layer (vhost_user.h, virtq.h), summed */
	uint64_t frontend_connections;	/* QEMU (re)connections accepted */
	uint64_t frontend_errors;	/* refused messages, bad fds/regions, framing */
	uint64_t bad_descriptors;	/* malformed chains, broken rings (RX+TX) */
	uint64_t ring_stops;		/* GET_VRING_BASE (QMP stop) answered */
};

/* What the device needs from its owner; every member may be NULL. */
struct vhost_vsock_ops {
	/*
	 * Make guest RAM [gpa, gpa + len) resident before the device touches
	 * it, without waiting: 0 (resident), -EAGAIN (being made resident:
	 * call vhost_vsock_memory_ready when done) or -errno (the access is
	 * then not made).  NULL: always resident.
	 */
	int (*make_resident)(void *opaque, uint64_t gpa, uint64_t len);
	/*
	 * The front-end's memory table: the true guest-physical layout of
	 * guest RAM (@fds[i] backs @r[i], valid during the call only).
	 */
	void (*mem_table)(void *opaque, const struct vhost_user_mem_region *r,
			  const int *fds, unsigned int n);
	/*
	 * The guest link that takes the guest's connections to host port
	 * VMNAP_DEFAULT_PORT, asked on each connection (so it may come and go
	 * independently of the device); NULL: none, the port is bridged.
	 */
	struct guest_link *(*guest_link)(void *opaque);
	/*
	 * Map guest RAM fd @fd from offset 0 for at least @len bytes (see
	 * vhost_user_ops.map_fd): the device then reaches guest RAM only
	 * through the owner's mappings.  NULL: the device maps each region.
	 */
	void *(*map_fd)(void *opaque, int fd, uint64_t len,
			const struct vhost_user_mem_region *t, unsigned int n);
	/* The front-end went away (its connections are reset already). */
	void (*disconnected)(void *opaque);
	/*
	 * The chains the guest posted next on the RX queue changed while the
	 * VM runs: the device filled some, or the guest kicked the queue
	 * after posting more.  The owner may take vhost_vsock_resume_ranges
	 * again and have what of them is out read back now, rather than when
	 * the next packet (the guest link's RESUMED after a resume) is to
	 * land there.  Called at the end of a turn of the device's work,
	 * never while paused.  NULL: nothing to do.
	 */
	void (*rx_ahead)(void *opaque);
};

/*
 * Create the device for one VM on @loop, logging as "<subject> vsock":
 * listen on both sockets.  0 and *@out, or -errno (logged).
 */
int vhost_vsock_new(struct loop *loop, const char *subject,
		    const struct vhost_vsock_config *cfg,
		    const struct vhost_vsock_ops *ops, void *opaque,
		    struct vhost_vsock **out);
/* Reset every connection, close both sockets, free.  NULL-safe. */
void vhost_vsock_free(struct vhost_vsock *vs);

/* Memory the device was told -EAGAIN for may be resident now: retry. */
void vhost_vsock_memory_ready(struct vhost_vsock *vs);
/* While paused, guest RAM is not touched; resuming catches up at once. */
void vhost_vsock_set_paused(struct vhost_vsock *vs, bool paused);
/*
 * The guest ranges the device touches first when the VM runs again: the
 * three rings of each queue and the buffers of the next
 * VHOST_VSOCK_RESUME_RX_CHAINS chains the guest posted on the RX queue
 * (where the guest link's next message lands), at most
 * VHOST_VSOCK_RESUME_RX_BYTES of those.  The pager keeps them resident
 * through an offload, so a resume does not wait for store reads before
 * the guest hears of it.  Up to @nr ranges into @gpa, @len; how many.
 * Guest-written (the buffers): the pager checks them.  NULL-safe.
 */
#define VHOST_VSOCK_RESUME_RX_CHAINS	4U
#define VHOST_VSOCK_RESUME_RX_BYTES	(64U * 1024U)
unsigned int vhost_vsock_resume_ranges(struct vhost_vsock *vs, uint64_t *gpa, uint64_t *len,
				       unsigned int nr);
bool vhost_vsock_front_end_connected(const struct vhost_vsock *vs);
/* The hybrid socket "<uds>" host programs connect to the guest through. */
const char *vhost_vsock_uds_path(const struct vhost_vsock *vs);
unsigned int vhost_vsock_nr_conns(const struct vhost_vsock *vs);
void vhost_vsock_get_stats(const struct vhost_vsock *vs, struct vhost_vsock_stats *st);

#endif
