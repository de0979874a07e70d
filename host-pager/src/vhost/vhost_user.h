/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vhost_user.h - the back-end side of the vhost-user protocol (QEMU
 * docs/interop/vhost-user.rst): one listening unix socket, at most one
 * front-end (QEMU) connected at a time, messages with their fds, the guest
 * memory table mapped from the front-end's memfds, and the vrings.
 *
 * The caller owns the event loop: the socket, the connection and every
 * kick fd are watched on the caller's struct loop.  Device behaviour comes
 * in through struct vhost_user_ops.  A malformed message (bad size, bad
 * index, wrong number of fds, a memory region the fd cannot back) is
 * counted, logged once and refused; a broken stream (short header,
 * oversize payload) drops the connection.  Neither affects anything but
 * this device.  When the front-end goes away (QEMU exits or restarts) the
 * rings stop, guest memory is unmapped, ops->disconnected() runs and the
 * socket accepts the next front-end.
 *
 * Ring life cycle (spec "Starting and stopping rings"): a ring starts when
 * it gets its kick fd (SET_VRING_KICK) and stops on GET_VRING_BASE; with
 * VHOST_USER_F_PROTOCOL_FEATURES negotiated it is processed only while
 * SET_VRING_ENABLE enabled it.  vhost_user_queue() returns the virtq only
 * when it is started, enabled and its rings are inside guest RAM.
 */
#ifndef VMNAP_VHOST_USER_H
#define VMNAP_VHOST_USER_H

#include <stdbool.h>
#include <stdint.h>

#include "loop.h"
#include "virtq.h"

#define VHOST_USER_MAX_QUEUES		8U
#define VHOST_USER_MAX_REGIONS		8U	/* without CONFIGURE_MEM_SLOTS */
#define VHOST_USER_MAX_CONFIG		256U	/* config space bytes */

/* Message types (front-end -> back-end) that this back-end knows. */
enum vhost_user_request {
	VHOST_USER_GET_FEATURES = 1,
	VHOST_USER_SET_FEATURES = 2,
	VHOST_USER_SET_OWNER = 3,
	VHOST_USER_RESET_OWNER = 4,
	VHOST_USER_SET_MEM_TABLE = 5,
	VHOST_USER_SET_LOG_BASE = 6,
	VHOST_USER_SET_LOG_FD = 7,
	VHOST_USER_SET_VRING_NUM = 8,
	VHOST_USER_SET_VRING_ADDR = 9,
	VHOST_USER_SET_VRING_BASE = 10,
	VHOST_USER_GET_VRING_BASE = 11,
	VHOST_USER_SET_VRING_KICK = 12,
	VHOST_USER_SET_VRING_CALL = 13,
	VHOST_USER_SET_VRING_ERR = 14,
	VHOST_USER_GET_PROTOCOL_FEATURES = 15,
	VHOST_USER_SET_PROTOCOL_FEATURES = 16,
	VHOST_USER_GET_QUEUE_NUM = 17,
	VHOST_USER_SET_VRING_ENABLE = 18,
	VHOST_USER_GET_CONFIG = 24,
	VHOST_USER_SET_CONFIG = 25,
	VHOST_USER_REQUEST_MAX = 64,	/* names table size */
};

/* Feature bits (virtio and vhost-user). */
#define VHOST_USER_F_PROTOCOL_FEATURES	30
#define VHOST_USER_VIRTIO_F_VERSION_1	32

/* Protocol feature bits this back-end can offer. */
#define VHOST_USER_PROTOCOL_F_REPLY_ACK	3
#define VHOST_USER_PROTOCOL_F_CONFIG	9

/* Header flags. */
#define VHOST_USER_VERSION		0x1U
#define VHOST_USER_VERSION_MASK		0x3U
#define VHOST_USER_REPLY_MASK		(1U << 2)
#define VHOST_USER_NEED_REPLY_MASK	(1U << 3)

/* SET_VRING_KICK/CALL/ERR payload: index in the low byte, no fd flag. */
#define VHOST_USER_VRING_IDX_MASK	0xffULL
#define VHOST_USER_VRING_NOFD_MASK	(1ULL << 8)

struct vhost_user_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;		/* payload bytes that follow */
} __attribute__((packed));

struct vhost_user_vring_state {
	uint32_t index;
	uint32_t num;
} __attribute__((packed));

struct vhost_user_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc_user_addr;
	uint64_t used_user_addr;
	uint64_t avail_user_addr;
	uint64_t log_guest_addr;
} __attribute__((packed));

struct vhost_user_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;
	uint64_t mmap_offset;
} __attribute__((packed));

struct vhost_user_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vhost_user_mem_region regions[VHOST_USER_MAX_REGIONS];
} __attribute__((packed));

struct vhost_user_config_msg {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t payload[VHOST_USER_MAX_CONFIG];
} __attribute__((packed));
#define VHOST_USER_CONFIG_HDR_SIZE	12U

/* Largest payload accepted; anything bigger breaks the stream. */
#define VHOST_USER_PAYLOAD_MAX		sizeof(struct vhost_user_config_msg)
#define VHOST_USER_MAX_FDS		VHOST_USER_MAX_REGIONS

struct vhost_user;

struct vhost_user_ops {
	/*
	 * Called before the device touches guest-physical [gpa, gpa+len)
	 * through a buffer of a chain (e.g. to make it resident); -EAGAIN
	 * leaves the chain in the ring for later (virtq_pop), another
	 * non-zero refuses the buffer.  NULL: always allowed.
	 */
	int (*access)(void *opaque, uint64_t gpa, uint64_t len);
	/*
	 * A new memory table was accepted: guest-physical layout and the fds
	 * backing it (borrowed, valid during the call).  NULL: not told.
	 */
	void (*mem_table)(void *opaque, const struct vhost_user_mem_region *r,
			  const int *fds, unsigned int n);
	/*
	 * Map memory fd @fd (backing a region of the front-end's table @t,
	 * @n regions, not yet accepted) shared and writable from file offset
	 * 0 for at least @len bytes; the owner keeps the mapping (it may hand
	 * out one mapping per file for every region in it) and unmaps it.
	 * NULL with errno: the table is refused.  NULL op: the back end maps
	 * each region itself.
	 */
	void *(*map_fd)(void *opaque, int fd, uint64_t len,
			const struct vhost_user_mem_region *t, unsigned int n);
	/* Config space read for GET_CONFIG; 0 or -errno. */
	int (*get_config)(void *opaque, uint32_t offset, void *buf, uint32_t len);
	/* Queue @qidx has new buffers, or just became usable. */
	void (*queue_kick)(void *opaque, unsigned int qidx);
	/* Queue @qidx stops (GET_VRING_BASE, disable, disconnect). */
	void (*queue_stop)(void *opaque, unsigned int qidx);
	/* The front-end went away; guest memory is already unmapped. */
	void (*disconnected)(void *opaque);
};

struct vhost_user_config {
	const char *socket_path;	/* created (old socket replaced) */
	const char *subject;		/* log prefix, e.g. "vm a vsock" */
	unsigned int nqueues;		/* <= VHOST_USER_MAX_QUEUES */
	uint64_t device_features;	/* virtio device feature bits offered */
	uint32_t config_size;		/* config space bytes */
};

/* Counters of what the front-end did wrong (and of what went right). */
struct vhost_user_stats {
	uint64_t connections;		/* front-ends accepted */
	uint64_t messages;		/* messages handled */
	uint64_t bad_messages;		/* refused: size, index, values */
	uint64_t bad_fds;		/* wrong fd count or kind */
	uint64_t bad_regions;		/* memory region not backed by its fd */
	uint64_t unknown_requests;
	uint64_t stream_errors;		/* connection dropped: framing */
	uint64_t ring_stops;		/* GET_VRING_BASE answered */
};

/* NULL with errno set on failure (logged). */
struct vhost_user *vhost_user_new(struct loop *l, const struct vhost_user_config *cfg,
				  const struct vhost_user_ops *ops, void *opaque);
/* Close the connection and the socket, unmap, unlink the socket path. */
void vhost_user_free(struct vhost_user *vu);

/* The queue if started, enabled and mapped; else NULL. */
struct virtq *vhost_user_queue(struct vhost_user *vu, unsigned int qidx);
/* Guest-physical ranges of a queue's rings, for residency checks. */
int vhost_user_queue_rings(struct vhost_user *vu, unsigned int qidx,
			   uint64_t gpa[3], uint64_t len[3]);
/* Interrupt the guest for @qidx if it asked for it. */
void vhost_user_notify(struct vhost_user *vu, unsigned int qidx);
/* Pointer to guest-physical [gpa, gpa+len) in one mapped region, or NULL. */
void *vhost_user_map_gpa(struct vhost_user *vu, uint64_t gpa, uint64_t len);
bool vhost_user_connected(const struct vhost_user *vu);
void vhost_user_get_stats(const struct vhost_user *vu, struct vhost_user_stats *st);
/* Per-queue virtq error counters (summed over the queue's lifetime). */
void vhost_user_get_virtq_stats(const struct vhost_user *vu, unsigned int qidx,
				struct virtq_stats *st);

/*
 * Handle one complete message (exposed for unit tests and fuzzing; the
 * socket path uses it too).  Takes ownership of @fds.  Writes the reply,
 * if any, into @reply (header + payload) and returns its total size, 0 for
 * no reply, or -errno when the connection must be dropped.
 */
int vhost_user_handle(struct vhost_user *vu, const struct vhost_user_hdr *hdr,
		      const void *payload, int *fds, unsigned int nfds,
		      void *reply, size_t reply_max);

#endif
