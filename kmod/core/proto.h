/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * proto.h - framing of the byte stream from the host and builders of the
 * guest's messages (pure logic, KUnit tested).  The wire format itself is
 * uapi/vmnap.h.
 */
#ifndef _VMNAP_PROTO_H
#define _VMNAP_PROTO_H

#include <linux/types.h>

#include "uapi/vmnap.h"

/**
 * struct vmnap_rxbuf - bytes received and not yet consumed
 * @buf: storage of @cap bytes (at least VMNAP_MAX_MSG)
 * @len: bytes held, from @buf[0]
 * @cap: size of @buf
 */
struct vmnap_rxbuf {
	u8 *buf;
	size_t len;
	size_t cap;
};

/**
 * struct vmnap_rxmsg - one framed message, or why there is none
 * @hdr: header, points into the rx buffer (valid until consumed)
 * @payload: hdr->len bytes after the header
 * @size: bytes the message occupies (header + payload); consume them
 * @err: VMNAP_E* code of a rejected message (0 when accepted)
 * @fatal: framing is lost: the stream must be dropped
 */
struct vmnap_rxmsg {
	const struct vmnap_hdr *hdr;
	const void *payload;
	size_t size;
	u32 err;
	bool fatal;
};

int vmnap_rx_next(struct vmnap_rxbuf *rx, struct vmnap_rxmsg *m);
void vmnap_rx_consume(struct vmnap_rxbuf *rx, size_t n);

/**
 * struct vmnap_hello_info - content of HELLO
 * @features: VMNAP_F_* offered
 * @nr_cpus: possible CPUs
 * @page_size: guest page size
 * @version: module version string
 * @ranges: guest RAM, host byte order, pairs of (gpa, len)
 * @nr_ranges: pairs in @ranges (1..VMNAP_MAX_RAM_RANGES)
 */
struct vmnap_hello_info {
	u32 features;
	u32 nr_cpus;
	u32 page_size;
	const char *version;
	const u64 (*ranges)[2];
	unsigned int nr_ranges;
};

/* Bytes of HELLO with @nr ranges, and of FREE_REPORT with @nr ranges. */
#define VMNAP_HELLO_SIZE(nr)	(sizeof(struct vmnap_hdr) + \
				 sizeof(struct vmnap_hello) + \
				 (nr) * sizeof(struct vmnap_range))
#define VMNAP_FREE_REPORT_SIZE(nr) (sizeof(struct vmnap_hdr) + \
				 sizeof(struct vmnap_free_report) + \
				 (nr) * sizeof(struct vmnap_range))

size_t vmnap_build_hello(void *buf, size_t cap, u32 seq,
			 const struct vmnap_hello_info *info);
size_t vmnap_build_handoff_ack(void *buf, size_t cap, u32 seq, u64 req_id,
			       u32 verdict, const struct vmnap_evidence *ev);
size_t vmnap_build_resume_ack(void *buf, size_t cap, u32 seq, u64 req_id,
			      u64 unquiesce_ns);
size_t vmnap_build_free_report(void *buf, size_t cap, u32 seq, u64 batch_id,
			       const u64 (*ranges)[2], unsigned int nr);
size_t vmnap_build_ping(void *buf, size_t cap, u32 seq, u32 type, u64 token);
size_t vmnap_build_error(void *buf, size_t cap, u32 seq, u32 code,
			 u32 ref_seq, const char *text);

#endif /* _VMNAP_PROTO_H */
