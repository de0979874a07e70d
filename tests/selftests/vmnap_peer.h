/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmnap_peer.h - a scripted host-side peer for vmnap.ko, run inside the
 * guest over the vsock loopback transport (module parameter host_cid=1).
 * It speaks uapi/vmnap.h and checks everything the module sends with the
 * same helpers vmnapd uses.  FREE_REPORT and PING are answered as they
 * come (unless told not to), so a test waits only for what it asked.
 */
#ifndef _VMNAP_PEER_H
#define _VMNAP_PEER_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "uapi/vmnap.h"

struct peer {
	int lfd;			/* listening socket */
	int fd;				/* connection with the module */
	uint32_t seq;
	uint8_t buf[VMNAP_MAX_MSG];
	size_t len;
	struct vmnap_range ram[VMNAP_MAX_RAM_RANGES];	/* from HELLO */
	unsigned int nram;
	uint32_t offered;
	bool free_no_ack;		/* leave FREE_REPORT unanswered */
	unsigned int free_reports, free_bad;
	uint64_t free_bytes;
	uint32_t last_error;		/* code of the last ERROR received */
	unsigned int errors;
};

static inline long peer_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline int peer_listen(struct peer *p, unsigned int port)
{
	struct sockaddr_vm addr = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_ANY,
		.svm_port = port,
	};

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->lfd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0)
		return -errno;
	if (bind(p->lfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(p->lfd, 4)) {
		int err = -errno;

		close(p->lfd);
		p->lfd = -1;
		return err;
	}
	return 0;
}

static inline void peer_hangup(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->len = 0;
}

static inline int peer_accept(struct peer *p, int timeout_ms)
{
	struct pollfd pfd = { .fd = p->lfd, .events = POLLIN };
	int ret;

	peer_hangup(p);
	ret = poll(&pfd, 1, timeout_ms);
	if (ret <= 0)
		return ret ? -errno : -ETIMEDOUT;
	p->fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	return p->fd < 0 ? -errno : 0;
}

static inline int peer_send_raw(struct peer *p, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = send(p->fd, b, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static inline int peer_send(struct peer *p, unsigned int type,
			    const void *payload, uint32_t len)
{
	uint8_t msg[sizeof(struct vmnap_hdr) + 256];

	if (len > sizeof(msg) - sizeof(struct vmnap_hdr))
		return -EINVAL;
	vmnap_hdr_init((struct vmnap_hdr *)msg, type, len, ++p->seq);
	memcpy(msg + sizeof(struct vmnap_hdr), payload, len);
	return peer_send_raw(p, msg, sizeof(struct vmnap_hdr) + len);
}

static inline void peer_on_free_report(struct peer *p, const struct vmnap_hdr *h,
				       const void *payload)
{
	const struct vmnap_free_report *m = payload;
	struct vmnap_free_report_ack ack = { .batch_id = m->batch_id };
	struct vmnap_ram ram = { p->ram, p->nram, 4096 };
	uint32_t i, n = vmnap_le32(m->nr_ranges);

	/* vmnap_decode() checked alignment; check containment in HELLO's RAM */
	for (i = 0; i < n; i++) {
		if (vmnap_range_check(&m->ranges[i], &ram, 4096))
			p->free_bad++;
		p->free_bytes += vmnap_le64(m->ranges[i].len);
	}
	p->free_reports++;
	(void)h;
	if (!p->free_no_ack)
		peer_send(p, VMNAP_FREE_REPORT_ACK, &ack, sizeof(ack));
}

/*
 * Wait for a message of type @want (0: any) for up to @timeout_ms.
 * FREE_REPORT, PING and ERROR are handled on the way unless wanted.
 * Returns the payload length with the payload copied to @out, -ETIMEDOUT,
 * -ECONNRESET on EOF, or -EPROTO when the module sent something invalid
 * (or another type than @want).
 */
static inline int peer_recv(struct peer *p, unsigned int want, void *out,
			    size_t outlen, int timeout_ms)
{
	long deadline = peer_now_ms() + timeout_ms;

	for (;;) {
		const struct vmnap_hdr *h;
		const void *payload;
		size_t skip;
		long n = vmnap_decode(p->buf, p->len, VMNAP_DIR_G2H, NULL, &h,
				      &payload, &skip);

		if (n < 0)
			return -EPROTO;
		if (n > 0) {
			unsigned int type = vmnap_le16(h->type);
			uint32_t plen = vmnap_le32(h->len);
			int ret = (int)plen;

			if (type == want || !want) {
				memcpy(out, payload, plen < outlen ? plen : outlen);
			} else if (type == VMNAP_FREE_REPORT) {
				peer_on_free_report(p, h, payload);
				ret = -EAGAIN;
			} else if (type == VMNAP_PING) {
				peer_send(p, VMNAP_PONG, payload, plen);
				ret = -EAGAIN;
			} else if (type == VMNAP_ERROR) {
				const struct vmnap_error *e = payload;

				p->last_error = vmnap_le32(e->code);
				p->errors++;
				ret = -EAGAIN;
			} else {
				ret = -EPROTO;
			}
			memmove(p->buf, p->buf + n, p->len - (size_t)n);
			p->len -= (size_t)n;
			if (ret != -EAGAIN)
				return ret;
			continue;
		}
		{
			struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
			long left = deadline - peer_now_ms();
			ssize_t r;

			if (left <= 0)
				return -ETIMEDOUT;
			if (poll(&pfd, 1, (int)left) <= 0)
				continue;
			r = recv(p->fd, p->buf + p->len, sizeof(p->buf) - p->len, 0);
			if (r == 0)
				return -ECONNRESET;
			if (r < 0) {
				if (errno == EINTR || errno == EAGAIN)
					continue;
				return -ECONNRESET;
			}
			p->len += (size_t)r;
		}
	}
}

/* Wait for ERROR specifically; returns its code or a negative errno. */
static inline int peer_expect_error(struct peer *p, int timeout_ms)
{
	struct vmnap_error e;
	int ret = peer_recv(p, VMNAP_ERROR, &e, sizeof(e), timeout_ms);

	return ret < 0 ? ret : (int)vmnap_le32(e.code);
}

/* Accept the module's connection, take its HELLO, answer HELLO_ACK. */
static inline int peer_handshake(struct peer *p, int timeout_ms,
				 struct vmnap_hello *hello_out, uint64_t vm_id)
{
	uint8_t hb[sizeof(struct vmnap_hello) +
		   VMNAP_MAX_RAM_RANGES * sizeof(struct vmnap_range)];
	const struct vmnap_hello *h = (const void *)hb;
	struct vmnap_hello_ack ack = { 0 };
	int ret = peer_accept(p, timeout_ms);

	if (ret)
		return ret;
	ret = peer_recv(p, VMNAP_HELLO, hb, sizeof(hb), timeout_ms);
	if (ret < 0)
		return ret;
	p->nram = vmnap_le32(h->nr_ranges);
	memcpy(p->ram, h->ranges, p->nram * sizeof(p->ram[0]));
	p->offered = vmnap_le32(h->features);
	if (hello_out)
		memcpy(hello_out, hb, sizeof(*hello_out));
	ack.version = vmnap_cpu16(VMNAP_PROTO_VERSION);
	ack.features = vmnap_cpu32(p->offered);
	ack.vm_id = vmnap_cpu64(vm_id);
	return peer_send(p, VMNAP_HELLO_ACK, &ack, sizeof(ack));
}

static inline int peer_handoff(struct peer *p, uint64_t req_id,
			       struct vmnap_handoff_ack *ack)
{
	struct vmnap_handoff_req req = {
		.req_id = vmnap_cpu64(req_id),
		.ack_deadline_ms = vmnap_cpu32(4000),
	};
	int ret = peer_send(p, VMNAP_HANDOFF_REQ, &req, sizeof(req));

	if (ret)
		return ret;
	ret = peer_recv(p, VMNAP_HANDOFF_ACK, ack, sizeof(*ack), 10000);
	if (ret < 0)
		return ret;
	return vmnap_le64(ack->req_id) == req_id ? 0 : -EPROTO;
}

static inline int peer_resumed(struct peer *p, uint64_t req_id)
{
	struct vmnap_resumed m = {
		.req_id = vmnap_cpu64(req_id),
		.paused_ns = vmnap_cpu64(1000000000ULL),
		.reason = vmnap_cpu32(VMNAP_RESUME_DATA_READY),
	};
	struct vmnap_resume_ack ack;
	int ret = peer_send(p, VMNAP_RESUMED, &m, sizeof(m));

	if (ret)
		return ret;
	ret = peer_recv(p, VMNAP_RESUME_ACK, &ack, sizeof(ack), 5000);
	if (ret < 0)
		return ret;
	return vmnap_le64(ack.req_id) == req_id ? 0 : -EPROTO;
}

#endif /* _VMNAP_PEER_H */
