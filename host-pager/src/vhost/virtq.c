// SPDX-License-Identifier: GPL-2.0-only
/*
 * virtq.c - device side of a split virtqueue; see virtq.h.
 *
 * Ordering: the driver writes descriptors and avail ring entries before it
 * publishes avail->idx, so avail->idx is loaded with acquire semantics
 * before any entry is read.  The device writes used ring entries before it
 * publishes used->idx, so used->idx is stored with release semantics.
 * Every field the guest can change is read exactly once into a local
 * before it is checked and used (no double fetch).
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "virtq.h"

size_t virtq_desc_size(unsigned int num)
{
	return sizeof(struct vring_desc) * (size_t)num;
}

size_t virtq_avail_size(unsigned int num)
{
	/* flags, idx, ring[num] (used_event only with EVENT_IDX) */
	return sizeof(uint16_t) * (2 + (size_t)num);
}

size_t virtq_used_size(unsigned int num)
{
	/* flags, idx, ring[num] (avail_event only with EVENT_IDX) */
	return sizeof(uint16_t) * 2 + sizeof(struct vring_used_elem) * (size_t)num;
}

int virtq_setup(struct virtq *vq, unsigned int num, void *desc, void *avail,
		void *used, uint16_t base, const struct virtq_mem *mem)
{
	struct virtq_stats keep = vq->stats;

	if (!num || num > VIRTQ_NUM_MAX || (num & (num - 1)) || !desc ||
	    !avail || !used || !mem || !mem->map)
		return -EINVAL;
	memset(vq, 0, sizeof(*vq));
	vq->stats = keep;
	vq->num = (uint16_t)num;	/* 32768 fits */
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	/*
	 * The device never keeps a chain across calls, so everything before
	 * @base has also been used: the used index starts there too.
	 */
	vq->last_avail_idx = base;
	vq->used_idx = base;
	vq->mem = *mem;
	return 0;
}

void virtq_reset(struct virtq *vq)
{
	struct virtq_stats keep = vq->stats;

	memset(vq, 0, sizeof(*vq));
	vq->stats = keep;
}

static uint16_t avail_idx(const struct virtq *vq)
{
	return le16toh(__atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE));
}

unsigned int virtq_avail_count(struct virtq *vq)
{
	uint16_t n;

	if (!virtq_ready(vq))
		return 0;
	n = (uint16_t)(avail_idx(vq) - vq->last_avail_idx);
	if (n > vq->num) {
		vq->stats.bad_avail_idx++;
		vq->broken = true;
		return 0;
	}
	return n;
}

/*
 * Validate and translate descriptor @d into @ch; 0 or a counted -EINVAL.
 * A buffer not accessible yet sets *@again (the rest is still validated).
 */
static int chain_add(struct virtq *vq, struct virtq_chain *ch,
		     const struct vring_desc *d, bool *again)
{
	uint16_t flags = le16toh(d->flags);
	uint64_t gpa = le64toh(d->addr);
	uint32_t len = le32toh(d->len);
	struct virtq_seg *s;
	bool writable = flags & VRING_DESC_F_WRITE;
	int err;

	if (flags & VRING_DESC_F_INDIRECT) {
		vq->stats.indirect++;
		return -EINVAL;
	}
	if (!writable && ch->nin) {
		vq->stats.bad_order++;
		return -EINVAL;
	}
	if ((uint64_t)ch->out_len + ch->in_len + len > VIRTQ_CHAIN_BYTES_MAX) {
		vq->stats.oversize++;
		return -EINVAL;
	}
	if (!len)
		return 0;	/* legal, carries nothing */
	s = &ch->segs[ch->nout + ch->nin];
	err = vq->mem.map(vq->mem.ctx, gpa, len, &s->addr);
	if (err == -EAGAIN)
		*again = true;
	else if (err) {
		vq->stats.bad_addr++;
		return -EINVAL;
	}
	s->len = len;
	s->gpa = gpa;
	if (writable) {
		ch->nin++;
		ch->in_len += len;
	} else {
		ch->nout++;
		ch->out_len += len;
	}
	return 0;
}

static int chain_walk(struct virtq *vq, struct virtq_chain *ch, uint16_t head)
{
	unsigned int limit = vq->num < VIRTQ_CHAIN_MAX ? vq->num : VIRTQ_CHAIN_MAX;
	uint16_t i = head;
	bool again = false;

	if (head >= vq->num) {
		vq->stats.bad_head++;
		return -EINVAL;
	}
	for (unsigned int n = 0;; n++) {
		struct vring_desc d;
		int err;

		if (n >= limit) {
			vq->stats.loops++;
			return -EINVAL;
		}
		memcpy(&d, &vq->desc[i], sizeof(d));	/* one fetch */
		err = chain_add(vq, ch, &d, &again);
		if (err)
			return err;
		if (!(le16toh(d.flags) & VRING_DESC_F_NEXT))
			return again ? -EAGAIN : 0;
		i = le16toh(d.next);
		if (i >= vq->num) {
			vq->stats.bad_next++;
			return -EINVAL;
		}
	}
}

int virtq_pop(struct virtq *vq, struct virtq_chain *ch)
{
	uint16_t head;
	int err;

	if (!virtq_ready(vq))
		return vq->broken ? -EIO : 0;
	if (!virtq_avail_count(vq))
		return vq->broken ? -EIO : 0;
	head = le16toh(__atomic_load_n(&vq->avail->ring[vq->last_avail_idx % vq->num],
				       __ATOMIC_RELAXED));
	vq->last_avail_idx++;
	ch->head = head;
	ch->nout = ch->nin = 0;
	ch->out_len = ch->in_len = 0;
	err = chain_walk(vq, ch, head);
	if (err == -EAGAIN) {
		vq->last_avail_idx--;	/* valid: popped again later */
		return err;
	}
	if (err) {
		/* hand it back so the guest's ring keeps moving */
		if (head < vq->num)
			virtq_push(vq, head, 0);
		return err;
	}
	vq->stats.chains++;
	return 1;
}

unsigned int virtq_peek(struct virtq *vq, unsigned int chains, uint64_t *gpa, uint32_t *len,
			unsigned int nr)
{
	unsigned int limit = vq->num < VIRTQ_CHAIN_MAX ? vq->num : VIRTQ_CHAIN_MAX;
	unsigned int avail = virtq_avail_count(vq), n = 0;

	for (unsigned int c = 0; c < chains && c < avail && n < nr; c++) {
		uint16_t i = le16toh(__atomic_load_n(
			&vq->avail->ring[(uint16_t)(vq->last_avail_idx + c) % vq->num],
			__ATOMIC_RELAXED));

		for (unsigned int k = 0; i < vq->num && k < limit && n < nr; k++) {
			struct vring_desc d;

			memcpy(&d, &vq->desc[i], sizeof(d));	/* one fetch */
			if (le16toh(d.flags) & VRING_DESC_F_INDIRECT)
				return n;
			if (le32toh(d.len)) {
				gpa[n] = le64toh(d.addr);
				len[n++] = le32toh(d.len);
			}
			if (!(le16toh(d.flags) & VRING_DESC_F_NEXT))
				break;
			i = le16toh(d.next);
		}
		if (i >= vq->num)
			return n;	/* malformed: the walk ends */
	}
	return n;
}

void virtq_unpop(struct virtq *vq)
{
	vq->last_avail_idx--;
	vq->stats.chains--;
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t len)
{
	struct vring_used_elem *e = &vq->used->ring[vq->used_idx % vq->num];

	e->id = htole32(head);
	e->len = htole32(len);
	vq->used_idx++;
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
	vq->pushed = true;
}

bool virtq_should_notify(struct virtq *vq)
{
	uint16_t flags;

	if (!vq->pushed || !vq->num)
		return false;
	vq->pushed = false;
	/* the used->idx store must be visible before we read the flags */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	flags = le16toh(__atomic_load_n(&vq->avail->flags, __ATOMIC_RELAXED));
	return !(flags & VRING_AVAIL_F_NO_INTERRUPT);
}

unsigned int virtq_chain_iov(const struct virtq_chain *ch, bool writable,
			     size_t off, size_t len, struct iovec *iov)
{
	unsigned int i = writable ? ch->nout : 0;
	unsigned int end = writable ? ch->nout + ch->nin : ch->nout;
	unsigned int n = 0;

	for (; i < end && len; i++) {
		const struct virtq_seg *s = &ch->segs[i];
		size_t take;

		if (off >= s->len) {
			off -= s->len;
			continue;
		}
		take = s->len - off < len ? s->len - off : len;
		iov[n].iov_base = (char *)s->addr + off;
		iov[n++].iov_len = take;
		len -= take;
		off = 0;
	}
	return n;
}

size_t virtq_chain_read(const struct virtq_chain *ch, size_t off, void *buf,
			size_t len)
{
	struct iovec iov[VIRTQ_CHAIN_MAX];
	unsigned int n = virtq_chain_iov(ch, false, off, len, iov);
	size_t done = 0;

	for (unsigned int i = 0; i < n; i++) {
		memcpy((char *)buf + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	return done;
}

size_t virtq_chain_write(const struct virtq_chain *ch, size_t off,
			 const void *buf, size_t len)
{
	struct iovec iov[VIRTQ_CHAIN_MAX];
	unsigned int n = virtq_chain_iov(ch, true, off, len, iov);
	size_t done = 0;

	for (unsigned int i = 0; i < n; i++) {
		memcpy(iov[i].iov_base, (const char *)buf + done, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	return done;
}
