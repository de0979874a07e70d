/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * virtq.h - the device side of a split virtqueue (virtio 1.x, 2.7).
 *
 * The driver (guest) owns the descriptor table and the avail ring; the
 * device (vmnapd) reads them and writes the used ring.  Everything the
 * guest wrote is hostile: a head index out of range, a chain that loops,
 * is longer than the ring, points outside guest RAM, puts a readable
 * descriptor after a writable one or adds up to an oversize length is
 * rejected here, counted, and the chain is handed back to the guest as
 * used with length 0 so that the ring keeps moving.  An avail index that
 * runs more than the ring size ahead of the device marks the queue broken
 * (nothing more is read from it until it is set up again).
 *
 * Guest addresses become pointers through virtq_mem.map, which the owner
 * implements (bounds against the memory table, residency through the
 * pager, which may answer "not yet").  This file never touches guest RAM except through those pointers
 * and the three ring pointers given to virtq_setup().
 *
 * Single-threaded: the caller serialises every call on one queue.
 * Negotiated features: neither VIRTIO_RING_F_EVENT_IDX nor
 * VIRTIO_RING_F_INDIRECT_DESC (an indirect descriptor is rejected).
 */
#ifndef VMNAP_VIRTQ_H
#define VMNAP_VIRTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/virtio_ring.h>

#define VIRTQ_NUM_MAX		32768U	/* virtio: queue size is <= 32768 */
#define VIRTQ_CHAIN_MAX		64U	/* descriptors in one chain we accept */
#define VIRTQ_CHAIN_BYTES_MAX	(4U << 20)	/* total length of one chain */

/*
 * Translate guest-physical [gpa, gpa+len) into *@addr: 0, -EAGAIN (valid
 * but not accessible yet: the chain is left in the ring, to be popped
 * again later), or another -errno (outside guest RAM or never accessible:
 * the chain is malformed).
 */
struct virtq_mem {
	int (*map)(void *ctx, uint64_t gpa, uint64_t len, void **addr);
	void *ctx;
};

/* One buffer of a chain, already translated. */
struct virtq_seg {
	void *addr;
	uint32_t len;
	uint64_t gpa;
};

/*
 * A popped descriptor chain: segs[0 .. nout-1] are device-readable
 * ("out", driver to device), segs[nout .. nout+nin-1] device-writable.
 */
struct virtq_chain {
	uint16_t head;
	unsigned int nout, nin;
	uint32_t out_len, in_len;
	struct virtq_seg segs[VIRTQ_CHAIN_MAX];
};

/* Errors found in guest-written ring state, per kind. */
struct virtq_stats {
	uint64_t chains;		/* chains popped and valid */
	uint64_t bad_head;		/* head index >= num */
	uint64_t bad_next;		/* next index >= num */
	uint64_t loops;			/* chain longer than num / CHAIN_MAX */
	uint64_t bad_addr;		/* buffer outside guest RAM */
	uint64_t oversize;		/* chain length > VIRTQ_CHAIN_BYTES_MAX */
	uint64_t bad_order;		/* readable after writable */
	uint64_t indirect;		/* indirect descriptor (not negotiated) */
	uint64_t bad_avail_idx;		/* avail idx ran ahead by > num */
};

struct virtq {
	uint16_t num;			/* 0: not set up */
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t last_avail_idx;	/* next avail entry the device reads */
	uint16_t used_idx;		/* next used entry the device writes */
	bool broken;
	bool pushed;			/* used entries added since last notify */
	struct virtq_mem mem;
	struct virtq_stats stats;
};

/* Bytes of each ring part for a queue of @num entries (no event idx). */
size_t virtq_desc_size(unsigned int num);
size_t virtq_avail_size(unsigned int num);
size_t virtq_used_size(unsigned int num);

/* @num must be a power of two <= VIRTQ_NUM_MAX; -EINVAL otherwise. */
int virtq_setup(struct virtq *vq, unsigned int num, void *desc, void *avail,
		void *used, uint16_t base, const struct virtq_mem *mem);
void virtq_reset(struct virtq *vq);
static inline bool virtq_ready(const struct virtq *vq)
{
	return vq->num && !vq->broken;
}

/* Chains available to pop (0 when broken or not set up). */
unsigned int virtq_avail_count(struct virtq *vq);
/*
 * Pop the next chain: 1 popped, 0 ring empty, -EINVAL the chain was
 * malformed (already counted and returned to the guest as used, length 0;
 * call again), -EIO the queue is broken, -EAGAIN a buffer of an otherwise
 * valid chain is not accessible yet (virtq_mem.map): the chain stays in
 * the ring, nothing counted; call again once it is.
 */
int virtq_pop(struct virtq *vq, struct virtq_chain *ch);
/*
 * Where the next @chains chains' buffers are, without popping or touching
 * them: (@gpa[i], @len[i]) for up to @nr buffers; how many.  A hint (what
 * the device will touch next), so nothing is checked beyond the ring's
 * bounds and nothing is counted: a malformed chain ends the walk, and
 * the ranges are guest-written (check them before use).
 */
unsigned int virtq_peek(struct virtq *vq, unsigned int chains, uint64_t *gpa, uint32_t *len,
			unsigned int nr);
/* Give back the chain popped last, unused (it is popped again next). */
void virtq_unpop(struct virtq *vq);
/* Mark chain @head used with @len bytes written into its writable part. */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t len);
/*
 * True when the guest should be interrupted for the entries pushed since
 * the last call (it did not set VRING_AVAIL_F_NO_INTERRUPT); clears the
 * pushed mark.
 */
bool virtq_should_notify(struct virtq *vq);

/*
 * iovecs over up to @len bytes of the chain's device-readable part
 * (@writable false) or device-writable part, starting @off bytes into it.
 * Fills at most VIRTQ_CHAIN_MAX entries of @iov; returns how many.
 */
unsigned int virtq_chain_iov(const struct virtq_chain *ch, bool writable,
			     size_t off, size_t len, struct iovec *iov);
/* Copy up to @len bytes starting @off bytes into the readable part. */
size_t virtq_chain_read(const struct virtq_chain *ch, size_t off, void *buf,
			size_t len);
/* Copy @len bytes to @off bytes into the writable part; bytes copied. */
size_t virtq_chain_write(const struct virtq_chain *ch, size_t off,
			 const void *buf, size_t len);

#endif
