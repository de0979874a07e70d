// SPDX-License-Identifier: GPL-2.0-only
/*
 * proto.c - framing of host input and building of guest messages.
 *
 * Every byte from the host goes through vmnap_decode() (uapi/vmnap.h)
 * before anything looks at it.  Builders return the message size, or 0
 * when @cap is too small or an argument is out of range (a bug in the
 * caller, never host input).
 */
#include <linux/kernel.h>
#include <linux/string.h>

#include "proto.h"

/*
 * Frame the next message in @rx.  Returns 1 with @m filled (accepted, or
 * rejected with m->err and m->size bytes to skip), 0 when more bytes are
 * needed, or -1 when the stream cannot be framed any more (m->fatal).
 */
int vmnap_rx_next(struct vmnap_rxbuf *rx, struct vmnap_rxmsg *m)
{
	size_t skip = 0;
	long n;

	memset(m, 0, sizeof(*m));
	n = vmnap_decode(rx->buf, rx->len, VMNAP_DIR_H2G, NULL, &m->hdr,
			 &m->payload, &skip);
	if (n > 0) {
		m->size = n;
		return 1;
	}
	if (n == 0)
		return 0;
	m->err = -n;
	m->hdr = NULL;
	m->payload = NULL;
	if (vmnap_err_is_fatal(n) || !skip) {
		m->fatal = true;
		return -1;
	}
	m->size = skip;
	return 1;
}

void vmnap_rx_consume(struct vmnap_rxbuf *rx, size_t n)
{
	if (n >= rx->len) {
		rx->len = 0;
		return;
	}
	memmove(rx->buf, rx->buf + n, rx->len - n);
	rx->len -= n;
}

static void *vmnap_msg_start(void *buf, size_t cap, size_t plen,
			     unsigned int type, u32 seq)
{
	if (cap < sizeof(struct vmnap_hdr) + plen)
		return NULL;
	memset(buf, 0, sizeof(struct vmnap_hdr) + plen);
	vmnap_hdr_init(buf, type, plen, seq);
	return (u8 *)buf + sizeof(struct vmnap_hdr);
}

static void vmnap_put_ranges(struct vmnap_range *dst, const u64 (*src)[2],
			     unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		dst[i].gpa = cpu_to_le64(src[i][0]);
		dst[i].len = cpu_to_le64(src[i][1]);
	}
}

size_t vmnap_build_hello(void *buf, size_t cap, u32 seq,
			 const struct vmnap_hello_info *info)
{
	size_t plen = sizeof(struct vmnap_hello) +
		      info->nr_ranges * sizeof(struct vmnap_range);
	struct vmnap_hello *m;

	if (!info->nr_ranges || info->nr_ranges > VMNAP_MAX_RAM_RANGES)
		return 0;
	m = vmnap_msg_start(buf, cap, plen, VMNAP_HELLO, seq);
	if (!m)
		return 0;
	m->min_version = cpu_to_le16(VMNAP_PROTO_MIN);
	m->max_version = cpu_to_le16(VMNAP_PROTO_MAX);
	m->features = cpu_to_le32(info->features & VMNAP_F_ALL);
	m->nr_cpus = cpu_to_le32(info->nr_cpus);
	m->page_size = cpu_to_le32(info->page_size);
	m->nr_ranges = cpu_to_le32(info->nr_ranges);
	strscpy(m->module_version, info->version, VMNAP_VERSION_LEN);
	vmnap_put_ranges(m->ranges, info->ranges, info->nr_ranges);
	return sizeof(struct vmnap_hdr) + plen;
}

size_t vmnap_build_handoff_ack(void *buf, size_t cap, u32 seq, u64 req_id,
			       u32 verdict, const struct vmnap_evidence *ev)
{
	struct vmnap_handoff_ack *m;

	m = vmnap_msg_start(buf, cap, sizeof(*m), VMNAP_HANDOFF_ACK, seq);
	if (!m)
		return 0;
	m->req_id = cpu_to_le64(req_id);
	m->verdict = cpu_to_le32(verdict);
	m->ev = *ev;
	return sizeof(struct vmnap_hdr) + sizeof(*m);
}

size_t vmnap_build_resume_ack(void *buf, size_t cap, u32 seq, u64 req_id,
			      u64 unquiesce_ns)
{
	struct vmnap_resume_ack *m;

	m = vmnap_msg_start(buf, cap, sizeof(*m), VMNAP_RESUME_ACK, seq);
	if (!m)
		return 0;
	m->req_id = cpu_to_le64(req_id);
	m->unquiesce_ns = cpu_to_le64(unquiesce_ns);
	return sizeof(struct vmnap_hdr) + sizeof(*m);
}

size_t vmnap_build_free_report(void *buf, size_t cap, u32 seq, u64 batch_id,
			       const u64 (*ranges)[2], unsigned int nr)
{
	size_t plen = sizeof(struct vmnap_free_report) +
		      nr * sizeof(struct vmnap_range);
	struct vmnap_free_report *m;

	if (!nr || nr > VMNAP_MAX_FREE_RANGES)
		return 0;
	m = vmnap_msg_start(buf, cap, plen, VMNAP_FREE_REPORT, seq);
	if (!m)
		return 0;
	m->batch_id = cpu_to_le64(batch_id);
	m->nr_ranges = cpu_to_le32(nr);
	vmnap_put_ranges(m->ranges, ranges, nr);
	return sizeof(struct vmnap_hdr) + plen;
}

/* PING or PONG (@type) carrying @token. */
size_t vmnap_build_ping(void *buf, size_t cap, u32 seq, u32 type, u64 token)
{
	struct vmnap_ping *m;

	if (type != VMNAP_PING && type != VMNAP_PONG)
		return 0;
	m = vmnap_msg_start(buf, cap, sizeof(*m), type, seq);
	if (!m)
		return 0;
	m->token = cpu_to_le64(token);
	return sizeof(struct vmnap_hdr) + sizeof(*m);
}

size_t vmnap_build_error(void *buf, size_t cap, u32 seq, u32 code,
			 u32 ref_seq, const char *text)
{
	struct vmnap_error *m;

	if (!code || code > VMNAP_ERR_MAX)
		return 0;
	m = vmnap_msg_start(buf, cap, sizeof(*m), VMNAP_ERROR, seq);
	if (!m)
		return 0;
	m->code = cpu_to_le32(code);
	m->ref_seq = cpu_to_le32(ref_seq);
	strscpy(m->text, text ? text : vmnap_err_name(code),
		VMNAP_ERROR_TEXT_LEN);
	return sizeof(struct vmnap_hdr) + sizeof(*m);
}
