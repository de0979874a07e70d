// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_user.c - vhost-user back-end protocol; see vhost_user.h.
 *
 * Receiving is non-blocking and resumable: a message is assembled in
 * vu->rx (header, then payload) across as many wake-ups as the front-end
 * needs, so a front-end that stalls mid-message blocks nothing else.  fds
 * arrive with the header bytes (QEMU sends header, payload and fds in one
 * sendmsg); any that arrive later in the same message are kept too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "usock.h"
#include "vhost_user.h"

#define VHOST_USER_HDR_SIZE	sizeof(struct vhost_user_hdr)
#define VHOST_USER_BACKLOG	1
#define VHOST_USER_PROTOCOL_FEATURES_OFFERED \
	((1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK) | \
	 (1ULL << VHOST_USER_PROTOCOL_F_CONFIG))

struct vu_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uva;		/* front-end's virtual address */
	void *map;		/* mapping of the fd from file offset 0 */
	size_t map_size;
	bool owner_map;		/* ops->map_fd's: the owner unmaps it */
	uint8_t *host;		/* map + mmap_offset: guest byte at gpa */
};

struct vu_queue {
	struct virtq vq;
	unsigned int num;
	struct vhost_user_vring_addr addr;
	bool addr_set;
	uint16_t base;
	int kick_fd, call_fd, err_fd;
	bool started;		/* kick fd received, no GET_VRING_BASE since */
	bool enable;		/* SET_VRING_ENABLE */
	bool mapped;		/* vq set up over current memory table */
	uint64_t ring_gpa[3], ring_len[3];	/* desc, avail, used */
	unsigned int qidx;
	struct vhost_user *vu;
};

struct vhost_user {
	struct loop *loop;
	char *path;
	char *subject;
	struct vhost_user_config cfg;
	const struct vhost_user_ops *ops;
	void *opaque;
	int listen_fd;
	struct usock_id listen_id;	/* remove only the socket we bound */
	int conn_fd;

	uint64_t acked_features;
	uint64_t protocol_features;
	bool owner;

	struct vu_region regions[VHOST_USER_MAX_REGIONS];
	unsigned int nregions;
	struct vu_queue queues[VHOST_USER_MAX_QUEUES];

	/* message being received */
	union {
		struct {
			struct vhost_user_hdr hdr;
			uint8_t payload[VHOST_USER_PAYLOAD_MAX];
		} __attribute__((packed)) msg;
		uint8_t bytes[VHOST_USER_HDR_SIZE + VHOST_USER_PAYLOAD_MAX];
	} rx;
	size_t rx_len;
	int rx_fds[VHOST_USER_MAX_FDS];
	unsigned int rx_nfds;

	struct vhost_user_stats stats;
};

static const char *const request_names[VHOST_USER_REQUEST_MAX] = {
	[VHOST_USER_GET_FEATURES] = "GET_FEATURES",
	[VHOST_USER_SET_FEATURES] = "SET_FEATURES",
	[VHOST_USER_SET_OWNER] = "SET_OWNER",
	[VHOST_USER_RESET_OWNER] = "RESET_OWNER",
	[VHOST_USER_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VHOST_USER_SET_LOG_BASE] = "SET_LOG_BASE",
	[VHOST_USER_SET_LOG_FD] = "SET_LOG_FD",
	[VHOST_USER_SET_VRING_NUM] = "SET_VRING_NUM",
	[VHOST_USER_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VHOST_USER_SET_VRING_BASE] = "SET_VRING_BASE",
	[VHOST_USER_GET_VRING_BASE] = "GET_VRING_BASE",
	[VHOST_USER_SET_VRING_KICK] = "SET_VRING_KICK",
	[VHOST_USER_SET_VRING_CALL] = "SET_VRING_CALL",
	[VHOST_USER_SET_VRING_ERR] = "SET_VRING_ERR",
	[VHOST_USER_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VHOST_USER_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VHOST_USER_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VHOST_USER_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VHOST_USER_GET_CONFIG] = "GET_CONFIG",
	[VHOST_USER_SET_CONFIG] = "SET_CONFIG",
};

static const char *request_name(uint32_t req)
{
	if (req < VHOST_USER_REQUEST_MAX && request_names[req])
		return request_names[req];
	return "unknown";
}

static uint64_t features_offered(const struct vhost_user *vu)
{
	return vu->cfg.device_features | (1ULL << VHOST_USER_VIRTIO_F_VERSION_1) |
	       (1ULL << VHOST_USER_F_PROTOCOL_FEATURES);
}

static bool has_protocol_feature(const struct vhost_user *vu, unsigned int bit)
{
	return vu->protocol_features & (1ULL << bit);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- guest memory ---------------------------------------------------- */

static void *region_lookup(struct vhost_user *vu, bool by_uva, uint64_t addr,
			   uint64_t len, uint64_t *gpa)
{
	for (unsigned int i = 0; i < vu->nregions; i++) {
		const struct vu_region *r = &vu->regions[i];
		uint64_t start = by_uva ? r->uva : r->gpa;
		uint64_t off;

		if (addr < start)
			continue;
		off = addr - start;
		if (off >= r->size || len > r->size - off)
			continue;
		if (gpa)
			*gpa = r->gpa + off;
		return r->host + off;
	}
	return NULL;
}

void *vhost_user_map_gpa(struct vhost_user *vu, uint64_t gpa, uint64_t len)
{
	return region_lookup(vu, false, gpa, len, NULL);
}

static void unmap_region(struct vu_region *r)
{
	if (!r->owner_map)
		munmap(r->map, r->map_size);
}

static void unmap_regions(struct vhost_user *vu)
{
	for (unsigned int i = 0; i < vu->nregions; i++)
		unmap_region(&vu->regions[i]);
	vu->nregions = 0;
}

static int queue_mem_map(void *ctx, uint64_t gpa, uint64_t len, void **addr)
{
	struct vhost_user *vu = ctx;

	*addr = vhost_user_map_gpa(vu, gpa, len);
	if (!*addr)
		return -EFAULT;
	return vu->ops->access ? vu->ops->access(vu->opaque, gpa, len) : 0;
}

/* (Re-)build the virtq of a started queue over the current memory table. */
static void queue_map(struct vhost_user *vu, struct vu_queue *q)
{
	const struct virtq_mem mem = { .map = queue_mem_map, .ctx = vu };
	uint64_t uva[3] = { q->addr.desc_user_addr, q->addr.avail_user_addr,
			    q->addr.used_user_addr };
	void *ptr[3];
	uint16_t base = q->mapped ? q->vq.last_avail_idx : q->base;

	q->mapped = false;
	if (!q->started || !q->addr_set || !q->num)
		return;
	q->ring_len[0] = virtq_desc_size(q->num);
	q->ring_len[1] = virtq_avail_size(q->num);
	q->ring_len[2] = virtq_used_size(q->num);
	for (int i = 0; i < 3; i++) {
		ptr[i] = region_lookup(vu, true, uva[i], q->ring_len[i], &q->ring_gpa[i]);
		if (!ptr[i]) {
			vu->stats.bad_messages++;
			log_warn(vu->subject, "queue %u: ring %d at %#llx is outside guest RAM",
				 q->qidx, i, (unsigned long long)uva[i]);
			return;
		}
	}
	if (virtq_setup(&q->vq, q->num, ptr[0], ptr[1], ptr[2], base, &mem) < 0) {
		vu->stats.bad_messages++;
		return;
	}
	q->mapped = true;
}

static bool queue_enabled(const struct vhost_user *vu, const struct vu_queue *q)
{
	if (!(vu->acked_features & (1ULL << VHOST_USER_F_PROTOCOL_FEATURES)))
		return true;
	return q->enable;
}

struct virtq *vhost_user_queue(struct vhost_user *vu, unsigned int qidx)
{
	struct vu_queue *q;

	if (qidx >= vu->cfg.nqueues)
		return NULL;
	q = &vu->queues[qidx];
	if (!q->started || !q->mapped || !queue_enabled(vu, q) || !virtq_ready(&q->vq))
		return NULL;
	return &q->vq;
}

int vhost_user_queue_rings(struct vhost_user *vu, unsigned int qidx,
			   uint64_t gpa[3], uint64_t len[3])
{
	if (qidx >= vu->cfg.nqueues || !vu->queues[qidx].mapped)
		return -ENOENT;
	memcpy(gpa, vu->queues[qidx].ring_gpa, sizeof(vu->queues[qidx].ring_gpa));
	memcpy(len, vu->queues[qidx].ring_len, sizeof(vu->queues[qidx].ring_len));
	return 0;
}

void vhost_user_notify(struct vhost_user *vu, unsigned int qidx)
{
	struct vu_queue *q;
	uint64_t one = 1;

	if (qidx >= vu->cfg.nqueues)
		return;
	q = &vu->queues[qidx];
	if (!virtq_should_notify(&q->vq) || q->call_fd < 0)
		return;
	if (write(q->call_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn(vu->subject, "queue %u: call fd: %s", qidx, strerror(errno));
}

/* ---- queue start / stop ---------------------------------------------- */

static void on_kick(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct vu_queue *q = arg;
	struct vhost_user *vu = q->vu;
	uint64_t n;

	(void)l;
	(void)events;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
		log_warn(vu->subject, "queue %u: kick fd: %s", q->qidx, strerror(errno));
		loop_del_fd(vu->loop, fd);
		return;
	}
	if (vhost_user_queue(vu, q->qidx))
		vu->ops->queue_kick(vu->opaque, q->qidx);
}

static void queue_stop(struct vhost_user *vu, struct vu_queue *q)
{
	if (q->started && vu->ops->queue_stop)
		vu->ops->queue_stop(vu->opaque, q->qidx);
	if (q->mapped)
		q->base = q->vq.last_avail_idx;
	q->started = false;
	q->mapped = false;
	virtq_reset(&q->vq);
	if (q->kick_fd >= 0)
		loop_del_fd(vu->loop, q->kick_fd);
	close_fd(&q->kick_fd);
}

static void queue_reset(struct vhost_user *vu, struct vu_queue *q)
{
	struct virtq_stats keep = q->vq.stats;

	queue_stop(vu, q);
	close_fd(&q->call_fd);
	close_fd(&q->err_fd);
	memset(q, 0, sizeof(*q));
	q->vq.stats = keep;
	q->kick_fd = q->call_fd = q->err_fd = -1;
	q->qidx = (unsigned int)(q - vu->queues);
	q->vu = vu;
}

static void device_reset(struct vhost_user *vu)
{
	for (unsigned int i = 0; i < vu->cfg.nqueues; i++)
		queue_reset(vu, &vu->queues[i]);
	unmap_regions(vu);
	vu->acked_features = 0;
	vu->protocol_features = 0;
	vu->owner = false;
}

/* ---- message handlers ------------------------------------------------ */

/* An eventfd, as the spec requires for kick/call/err. */
static bool fd_is_eventfd(int fd)
{
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return !strcmp(target, "anon_inode:[eventfd]");
}

static int map_region(struct vhost_user *vu, const struct vhost_user_mem_table *t,
		      unsigned int idx, int fd, struct vu_region *r)
{
	const struct vhost_user_mem_region *m = &t->regions[idx];
	struct stat st;
	uint64_t end;
	int seals;

	if (!m->memory_size || m->mmap_offset % (uint64_t)sysconf(_SC_PAGESIZE) ||
	    __builtin_add_overflow(m->mmap_offset, m->memory_size, &end) ||
	    end > SIZE_MAX ||
	    m->guest_phys_addr + m->memory_size < m->guest_phys_addr ||
	    m->userspace_addr + m->memory_size < m->userspace_addr)
		return -EINVAL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EBADF;
	/* touching a mapping past the end of the file would SIGBUS us */
	if ((uint64_t)st.st_size < end)
		return -ERANGE;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		log_debug(vu->subject, "memory fd is not sealed against shrinking");
	r->owner_map = vu->ops->map_fd != NULL;
	if (r->owner_map) {
		errno = 0;
		r->map = vu->ops->map_fd(vu->opaque, fd, end, t->regions, t->nregions);
		if (!r->map)
			return errno ? -errno : -ENOMEM;
	} else {
		r->map = mmap(NULL, end, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (r->map == MAP_FAILED)
			return -errno;
	}
	r->map_size = end;
	r->gpa = m->guest_phys_addr;
	r->size = m->memory_size;
	r->uva = m->userspace_addr;
	r->host = (uint8_t *)r->map + m->mmap_offset;
	return 0;
}

static bool regions_overlap(const struct vu_region *r, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		for (unsigned int j = i + 1; j < n; j++)
			if (r[i].gpa < r[j].gpa + r[j].size && r[j].gpa < r[i].gpa + r[i].size)
				return true;
	return false;
}

static int set_mem_table(struct vhost_user *vu, const void *payload, uint32_t size,
			 int *fds, unsigned int nfds)
{
	struct vhost_user_mem_table t = { 0 };
	struct vu_region nr[VHOST_USER_MAX_REGIONS];
	unsigned int i;
	int err = 0;

	if (size < 8) {
		vu->stats.bad_messages++;
		return -EINVAL;
	}
	memcpy(&t, payload, size < sizeof(t) ? size : sizeof(t));
	if (!t.nregions || t.nregions > VHOST_USER_MAX_REGIONS ||
	    size != 8 + t.nregions * sizeof(struct vhost_user_mem_region)) {
		vu->stats.bad_messages++;
		return -EINVAL;
	}
	if (nfds != t.nregions) {
		vu->stats.bad_fds++;
		return -EINVAL;
	}
	for (i = 0; i < t.nregions; i++) {
		err = map_region(vu, &t, i, fds[i], &nr[i]);
		if (err)
			break;
	}
	if (!err && regions_overlap(nr, t.nregions))
		err = -EINVAL;
	if (err) {
		vu->stats.bad_regions++;
		log_warn(vu->subject, "SET_MEM_TABLE: region %u refused: %s", i,
			 strerror(-err));
		while (i-- > 0)
			unmap_region(&nr[i]);
		return err;
	}
	if (vu->ops->mem_table)
		vu->ops->mem_table(vu->opaque, t.regions, fds, t.nregions);
	/* the fds are not needed once mapped */
	for (i = 0; i < nfds; i++)
		close_fd(&fds[i]);
	unmap_regions(vu);
	memcpy(vu->regions, nr, sizeof(nr[0]) * t.nregions);
	vu->nregions = t.nregions;
	for (i = 0; i < vu->cfg.nqueues; i++)
		if (vu->queues[i].started)
			queue_map(vu, &vu->queues[i]);
	for (i = 0; i < vu->nregions; i++)
		log_debug(vu->subject, "region %u: gpa %#llx size %#llx", i,
			  (unsigned long long)vu->regions[i].gpa,
			  (unsigned long long)vu->regions[i].size);
	return 0;
}

/* Queue index from a u64 file message, or NULL (counted). */
static struct vu_queue *file_queue(struct vhost_user *vu, uint64_t v)
{
	uint64_t idx = v & VHOST_USER_VRING_IDX_MASK;

	if (v & ~(VHOST_USER_VRING_IDX_MASK | VHOST_USER_VRING_NOFD_MASK) ||
	    idx >= vu->cfg.nqueues) {
		vu->stats.bad_messages++;
		return NULL;
	}
	return &vu->queues[idx];
}

static int set_vring_fd(struct vhost_user *vu, uint32_t req, uint64_t v,
			int *fds, unsigned int nfds)
{
	struct vu_queue *q = file_queue(vu, v);
	bool nofd = v & VHOST_USER_VRING_NOFD_MASK;
	int fd, *slot;

	if (!q)
		return -EINVAL;
	if (nfds != (nofd ? 0U : 1U) || (!nofd && !fd_is_eventfd(fds[0]))) {
		vu->stats.bad_fds++;
		return -EINVAL;
	}
	fd = nofd ? -1 : fds[0];
	if (!nofd)
		fds[0] = -1;	/* consumed */
	switch (req) {
	case VHOST_USER_SET_VRING_KICK:
		if (q->kick_fd >= 0)
			loop_del_fd(vu->loop, q->kick_fd);
		close_fd(&q->kick_fd);
		q->kick_fd = fd;
		if (fd >= 0) {
			int err;

			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			err = loop_add_fd(vu->loop, fd, EPOLLIN, on_kick, q);
			if (err)
				log_err(vu->subject, "queue %u: watch kick fd: %s",
					q->qidx, strerror(-err));
		} else {
			log_warn(vu->subject, "queue %u: no kick fd (polling is not supported)",
				 q->qidx);
		}
		q->started = true;
		queue_map(vu, q);
		if (vhost_user_queue(vu, q->qidx))
			vu->ops->queue_kick(vu->opaque, q->qidx);
		return 0;
	case VHOST_USER_SET_VRING_CALL:
		slot = &q->call_fd;
		break;
	default:
		slot = &q->err_fd;
		break;
	}
	close_fd(slot);
	*slot = fd;
	return 0;
}

static struct vu_queue *state_queue(struct vhost_user *vu, const void *payload,
				    uint32_t size, struct vhost_user_vring_state *s)
{
	if (size != sizeof(*s)) {
		vu->stats.bad_messages++;
		return NULL;
	}
	memcpy(s, payload, sizeof(*s));
	if (s->index >= vu->cfg.nqueues) {
		vu->stats.bad_messages++;
		return NULL;
	}
	return &vu->queues[s->index];
}

static int get_config(struct vhost_user *vu, const void *payload, uint32_t size,
		      struct vhost_user_config_msg *out, uint32_t *out_size)
{
	struct vhost_user_config_msg in;

	*out_size = VHOST_USER_CONFIG_HDR_SIZE;
	if (size < VHOST_USER_CONFIG_HDR_SIZE || size > sizeof(in)) {
		vu->stats.bad_messages++;
		return -EINVAL;
	}
	memcpy(&in, payload, size);
	memcpy(out, &in, VHOST_USER_CONFIG_HDR_SIZE);
	if (in.size > VHOST_USER_MAX_CONFIG || size != VHOST_USER_CONFIG_HDR_SIZE + in.size ||
	    in.offset > vu->cfg.config_size || in.size > vu->cfg.config_size - in.offset ||
	    !vu->ops->get_config) {
		vu->stats.bad_messages++;
		out->size = 0;
		return -EINVAL;
	}
	if (vu->ops->get_config(vu->opaque, in.offset, out->payload, in.size) < 0) {
		out->size = 0;
		return -EIO;
	}
	*out_size = VHOST_USER_CONFIG_HDR_SIZE + in.size;
	return 0;
}

static bool request_has_reply(uint32_t req)
{
	switch (req) {
	case VHOST_USER_GET_FEATURES:
	case VHOST_USER_GET_PROTOCOL_FEATURES:
	case VHOST_USER_GET_VRING_BASE:
	case VHOST_USER_GET_QUEUE_NUM:
	case VHOST_USER_GET_CONFIG:
		return true;
	default:
		return false;
	}
}

/* Read a u64 payload; -EINVAL (counted) when the size is wrong. */
static int payload_u64(struct vhost_user *vu, const void *payload, uint32_t size,
		       uint64_t *v)
{
	if (size != sizeof(*v)) {
		vu->stats.bad_messages++;
		return -EINVAL;
	}
	memcpy(v, payload, sizeof(*v));
	return 0;
}

int vhost_user_handle(struct vhost_user *vu, const struct vhost_user_hdr *hdr,
		      const void *payload, int *fds, unsigned int nfds,
		      void *reply, size_t reply_max)
{
	struct vhost_user_hdr *rh = reply;
	uint8_t *rp = (uint8_t *)reply + VHOST_USER_HDR_SIZE;
	uint32_t req = hdr->request, size = hdr->size, rsize = 0;
	struct vhost_user_vring_state st;
	struct vhost_user_vring_addr va;
	struct vu_queue *q;
	uint64_t v = 0;
	int err = 0;

	if (reply_max < VHOST_USER_HDR_SIZE + VHOST_USER_PAYLOAD_MAX)
		return -EINVAL;
	vu->stats.messages++;
	log_debug(vu->subject, "%s (size %u, %u fds)", request_name(req), size, nfds);
	if (nfds && req != VHOST_USER_SET_MEM_TABLE && req != VHOST_USER_SET_VRING_KICK &&
	    req != VHOST_USER_SET_VRING_CALL && req != VHOST_USER_SET_VRING_ERR) {
		vu->stats.bad_fds++;
		err = -EINVAL;
		goto out;
	}

	switch (req) {
	case VHOST_USER_GET_FEATURES:
		v = features_offered(vu);
		memcpy(rp, &v, sizeof(v));
		rsize = sizeof(v);
		break;
	case VHOST_USER_SET_FEATURES:
		err = payload_u64(vu, payload, size, &v);
		if (err)
			break;
		if (v & ~features_offered(vu)) {
			vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		vu->acked_features = v;
		break;
	case VHOST_USER_GET_PROTOCOL_FEATURES:
		v = VHOST_USER_PROTOCOL_FEATURES_OFFERED;
		memcpy(rp, &v, sizeof(v));
		rsize = sizeof(v);
		break;
	case VHOST_USER_SET_PROTOCOL_FEATURES:
		err = payload_u64(vu, payload, size, &v);
		if (!err)
			vu->protocol_features = v & VHOST_USER_PROTOCOL_FEATURES_OFFERED;
		break;
	case VHOST_USER_SET_OWNER:
		vu->owner = true;
		break;
	case VHOST_USER_RESET_OWNER:
		device_reset(vu);
		break;
	case VHOST_USER_GET_QUEUE_NUM:
		v = vu->cfg.nqueues;
		memcpy(rp, &v, sizeof(v));
		rsize = sizeof(v);
		break;
	case VHOST_USER_SET_MEM_TABLE:
		err = set_mem_table(vu, payload, size, fds, nfds);
		break;
	case VHOST_USER_SET_VRING_NUM:
		q = state_queue(vu, payload, size, &st);
		if (!q || !st.num || st.num > VIRTQ_NUM_MAX || (st.num & (st.num - 1)) ||
		    q->started) {
			if (q)
				vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		q->num = st.num;
		break;
	case VHOST_USER_SET_VRING_BASE:
		q = state_queue(vu, payload, size, &st);
		if (!q || st.num > UINT16_MAX || q->started) {
			if (q)
				vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		q->base = (uint16_t)st.num;
		break;
	case VHOST_USER_GET_VRING_BASE:
		q = state_queue(vu, payload, size, &st);
		if (!q) {
			err = -EINVAL;
			memset(&st, 0, sizeof(st));
		} else {
			queue_stop(vu, q);
			st.num = q->base;
			vu->stats.ring_stops++;
		}
		memcpy(rp, &st, sizeof(st));
		rsize = sizeof(st);
		break;
	case VHOST_USER_SET_VRING_ADDR:
		if (size != sizeof(va)) {
			vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		memcpy(&va, payload, sizeof(va));
		if (va.index >= vu->cfg.nqueues) {
			vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		q = &vu->queues[va.index];
		q->addr = va;
		q->addr_set = true;
		if (q->started)
			queue_map(vu, q);
		break;
	case VHOST_USER_SET_VRING_KICK:
	case VHOST_USER_SET_VRING_CALL:
	case VHOST_USER_SET_VRING_ERR:
		err = payload_u64(vu, payload, size, &v);
		if (!err)
			err = set_vring_fd(vu, req, v, fds, nfds);
		break;
	case VHOST_USER_SET_VRING_ENABLE:
		q = state_queue(vu, payload, size, &st);
		if (!q || st.num > 1) {
			if (q)
				vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		q->enable = st.num;
		if (vhost_user_queue(vu, q->qidx))
			vu->ops->queue_kick(vu->opaque, q->qidx);
		break;
	case VHOST_USER_GET_CONFIG:
		if (!has_protocol_feature(vu, VHOST_USER_PROTOCOL_F_CONFIG)) {
			vu->stats.bad_messages++;
			err = -EINVAL;
			break;
		}
		err = get_config(vu, payload, size, (struct vhost_user_config_msg *)rp,
				 &rsize);
		break;
	case VHOST_USER_SET_CONFIG:
		/* the config space of our devices is read-only */
		vu->stats.bad_messages++;
		err = -EPERM;
		break;
	default:
		vu->stats.unknown_requests++;
		log_warn(vu->subject, "request %u (%s) not supported", req, request_name(req));
		err = -EOPNOTSUPP;
		break;
	}
out:
	for (unsigned int i = 0; i < nfds; i++)
		close_fd(&fds[i]);
	if (err && req != VHOST_USER_GET_VRING_BASE)
		log_warn(vu->subject, "%s refused: %s", request_name(req), strerror(-err));
	if (!rsize && !request_has_reply(req)) {
		if (!(hdr->flags & VHOST_USER_NEED_REPLY_MASK) ||
		    !has_protocol_feature(vu, VHOST_USER_PROTOCOL_F_REPLY_ACK))
			return 0;
		v = err ? 1 : 0;
		memcpy(rp, &v, sizeof(v));
		rsize = sizeof(v);
	}
	rh->request = req;
	rh->flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
	rh->size = rsize;
	return (int)(VHOST_USER_HDR_SIZE + rsize);
}

/* ---- connection ------------------------------------------------------ */

static void on_listen(struct loop *l, int fd, uint32_t events, void *arg);

static void rx_reset(struct vhost_user *vu)
{
	for (unsigned int i = 0; i < vu->rx_nfds; i++)
		close_fd(&vu->rx_fds[i]);
	vu->rx_nfds = 0;
	vu->rx_len = 0;
}

static void disconnect(struct vhost_user *vu, const char *why)
{
	int err;

	if (vu->conn_fd < 0)
		return;
	log_info(vu->subject, "front-end disconnected (%s)", why);
	loop_del_fd(vu->loop, vu->conn_fd);
	close_fd(&vu->conn_fd);
	rx_reset(vu);
	device_reset(vu);
	if (vu->ops->disconnected)
		vu->ops->disconnected(vu->opaque);
	err = loop_add_fd(vu->loop, vu->listen_fd, EPOLLIN, on_listen, vu);
	if (err)
		log_err(vu->subject, "cannot watch the socket again: %s", strerror(-err));
}

/* Receive more of the current message; 1 complete, 0 need more, -errno. */
static int rx_more(struct vhost_user *vu)
{
	size_t want;
	union {
		char buf[CMSG_SPACE(sizeof(int) * VHOST_USER_MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	ssize_t n;

	if (vu->rx_len < VHOST_USER_HDR_SIZE) {
		want = VHOST_USER_HDR_SIZE - vu->rx_len;
	} else {
		if (vu->rx.msg.hdr.size > VHOST_USER_PAYLOAD_MAX)
			return -EMSGSIZE;
		want = VHOST_USER_HDR_SIZE + vu->rx.msg.hdr.size - vu->rx_len;
		if (!want)
			return 1;
	}
	iov.iov_base = vu->rx.bytes + vu->rx_len;
	iov.iov_len = want;
	n = recvmsg(vu->conn_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		unsigned int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (unsigned int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (vu->rx_nfds < VHOST_USER_MAX_FDS) {
				vu->rx_fds[vu->rx_nfds++] = fd;
			} else {
				vu->stats.bad_fds++;
				close(fd);
			}
		}
	}
	if (mh.msg_flags & MSG_CTRUNC)
		vu->stats.bad_fds++;
	vu->rx_len += (size_t)n;
	if (vu->rx_len < VHOST_USER_HDR_SIZE)
		return 0;
	if ((vu->rx.msg.hdr.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION)
		return -EPROTO;
	if (vu->rx.msg.hdr.size > VHOST_USER_PAYLOAD_MAX)
		return -EMSGSIZE;
	return vu->rx_len == VHOST_USER_HDR_SIZE + vu->rx.msg.hdr.size;
}

static void on_conn(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct vhost_user *vu = arg;
	_Static_assert(sizeof(struct vhost_user_hdr) == 12, "vhost-user header");

	(void)l;
	(void)fd;
	(void)events;
	while (vu->conn_fd >= 0) {
		uint8_t reply[VHOST_USER_HDR_SIZE + VHOST_USER_PAYLOAD_MAX];
		struct vhost_user_hdr hdr;
		int r = rx_more(vu);
		unsigned int nfds;

		if (r == 0)
			return;
		if (r < 0) {
			if (r != -ECONNRESET) {
				vu->stats.stream_errors++;
				log_warn(vu->subject, "bad message stream: %s", strerror(-r));
			}
			disconnect(vu, r == -ECONNRESET ? "EOF" : strerror(-r));
			return;
		}
		hdr = vu->rx.msg.hdr;
		nfds = vu->rx_nfds;
		vu->rx_nfds = 0;	/* handle() owns them now */
		vu->rx_len = 0;
		r = vhost_user_handle(vu, &hdr, vu->rx.msg.payload, vu->rx_fds, nfds,
				      reply, sizeof(reply));
		if (r > 0 && vu->conn_fd >= 0 &&
		    send(vu->conn_fd, reply, (size_t)r, MSG_NOSIGNAL | MSG_DONTWAIT) != r) {
			vu->stats.stream_errors++;
			disconnect(vu, "reply not sent");
			return;
		}
	}
}

static void on_listen(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct vhost_user *vu = arg;
	int c, err;

	(void)events;
	c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c < 0) {
		if (errno != EAGAIN && errno != EINTR)
			log_warn(vu->subject, "accept: %s", strerror(errno));
		return;
	}
	err = loop_add_fd(l, c, EPOLLIN, on_conn, vu);
	if (err) {
		log_err(vu->subject, "cannot watch the front-end: %s", strerror(-err));
		close(c);
		return;
	}
	/* one front-end at a time: the next waits in the backlog */
	loop_del_fd(l, fd);
	vu->conn_fd = c;
	vu->stats.connections++;
	log_info(vu->subject, "front-end connected on %s", vu->path);
}

struct vhost_user *vhost_user_new(struct loop *l, const struct vhost_user_config *cfg,
				  const struct vhost_user_ops *ops, void *opaque)
{
	struct vhost_user *vu;
	int err;

	if (!cfg->socket_path || !cfg->nqueues || cfg->nqueues > VHOST_USER_MAX_QUEUES ||
	    cfg->config_size > VHOST_USER_MAX_CONFIG || !ops || !ops->queue_kick) {
		errno = EINVAL;
		return NULL;
	}
	vu = calloc(1, sizeof(*vu));
	if (!vu) {
		errno = ENOMEM;
		return NULL;
	}
	vu->loop = l;
	vu->cfg = *cfg;
	vu->ops = ops;
	vu->opaque = opaque;
	vu->conn_fd = -1;
	vu->path = strdup(cfg->socket_path);
	vu->subject = strdup(cfg->subject ? cfg->subject : "vhost-user");
	for (unsigned int i = 0; i < VHOST_USER_MAX_QUEUES; i++) {
		vu->queues[i].kick_fd = vu->queues[i].call_fd = vu->queues[i].err_fd = -1;
		vu->queues[i].qidx = i;
		vu->queues[i].vu = vu;
	}
	if (!vu->path || !vu->subject) {
		err = -ENOMEM;
		goto fail;
	}
	vu->cfg.socket_path = vu->path;
	vu->cfg.subject = vu->subject;
	vu->listen_fd = usock_listen(vu->path, 0600, VHOST_USER_BACKLOG, vu->subject,
				     &vu->listen_id);
	if (vu->listen_fd < 0) {
		err = vu->listen_fd;
		log_err(vu->subject, "cannot listen on %s: %s", vu->path,
			usock_listen_strerror(err));
		goto fail;
	}
	err = loop_add_fd(l, vu->listen_fd, EPOLLIN, on_listen, vu);
	if (err) {
		close(vu->listen_fd);
		usock_unlink(vu->path, &vu->listen_id);
		goto fail;
	}
	log_info(vu->subject, "vhost-user socket %s", vu->path);
	return vu;
fail:
	free(vu->path);
	free(vu->subject);
	free(vu);
	errno = -err;
	return NULL;
}

void vhost_user_free(struct vhost_user *vu)
{
	if (!vu)
		return;
	if (vu->conn_fd >= 0) {
		loop_del_fd(vu->loop, vu->conn_fd);
		close_fd(&vu->conn_fd);
	}
	rx_reset(vu);
	device_reset(vu);
	loop_del_fd(vu->loop, vu->listen_fd);
	close(vu->listen_fd);
	usock_unlink(vu->path, &vu->listen_id);
	free(vu->path);
	free(vu->subject);
	free(vu);
}

bool vhost_user_connected(const struct vhost_user *vu)
{
	return vu->conn_fd >= 0;
}

void vhost_user_get_stats(const struct vhost_user *vu, struct vhost_user_stats *st)
{
	*st = vu->stats;
}

void vhost_user_get_virtq_stats(const struct vhost_user *vu, unsigned int qidx,
				struct virtq_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (qidx < vu->cfg.nqueues)
		*st = vu->queues[qidx].vq.stats;
}
