// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_decode.c - libFuzzer target: vmnap_decode() over a byte stream.
 *
 * Input: one control byte (bit 0: receive as guest instead of host; bit 1:
 * check ranges against a RAM map), then the stream.  The stream is decoded
 * message by message as a receiver would: a whole message is consumed, a
 * non-fatal error skips *skip bytes, a fatal error or "need more" stops.
 * Every answer is checked against the contract in uapi/vmnap.h; a breach
 * aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uapi/vmnap.h"

#define CTRL_RX_GUEST	(1U << 0)
#define CTRL_USE_RAM	(1U << 1)
#define STREAM_MAX	(1U << 20)
#define RX_ALIGN	8U

static const struct vmnap_range ram_ranges[] = {
	{ .gpa = 0, .len = 1ULL << 31 },
	{ .gpa = 1ULL << 32, .len = 1ULL << 31 },
};
static const struct vmnap_ram ram = { .ranges = ram_ranges, .nr = 2,
				      .page_size = VMNAP_MIN_PAGE_SIZE };

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "contract broken: %s (%s:%d)\n",	\
				#cond, __FILE__, __LINE__);		\
			abort();					\
		}							\
	} while (0)

/* Receive buffer: the wire structs are read in place, so keep it aligned. */
static _Alignas(RX_ALIGN) unsigned char stream[STREAM_MAX];

/* A message vmnap_decode() accepted must satisfy its own invariants. */
static void check_accepted(const unsigned char *buf, long r,
			   const struct vmnap_hdr *h, const void *payload,
			   unsigned int rx_dir, const struct vmnap_ram *map)
{
	unsigned int type = vmnap_le16(h->type);
	uint32_t len = vmnap_le32(h->len);

	CHECK((const unsigned char *)h == buf);
	CHECK((const unsigned char *)payload == buf + sizeof(*h));
	CHECK((size_t)r == sizeof(*h) + len);
	CHECK(len <= VMNAP_MAX_PAYLOAD);
	CHECK(vmnap_le32(h->magic) == VMNAP_MAGIC);
	CHECK(vmnap_type_dirs(type) & rx_dir);
	CHECK(vmnap_msg_check(h, payload, len, map) == 0);
	if (type == VMNAP_FREE_REPORT) {
		const struct vmnap_free_report *f = payload;
		uint32_t n = vmnap_le32(f->nr_ranges);

		CHECK(n >= 1 && n <= VMNAP_MAX_FREE_RANGES);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t gpa = vmnap_le64(f->ranges[i].gpa);
			uint64_t rl = vmnap_le64(f->ranges[i].len);

			CHECK(rl && gpa + rl > gpa);
			CHECK(!((gpa | rl) % VMNAP_MIN_PAGE_SIZE));
			if (map)
				CHECK(gpa + rl <= (1ULL << 31) ||
				      (gpa >= (1ULL << 32) &&
				       gpa + rl <= (1ULL << 32) + (1ULL << 31)));
		}
	}
	if (type == VMNAP_HANDOFF_ACK) {
		const struct vmnap_handoff_ack *a = payload;

		CHECK(vmnap_le32(a->ev.cpu_idle_permille) <= 1000);
		CHECK((vmnap_le32(a->verdict) == VMNAP_READY) ==
		      !vmnap_le32(a->ev.busy_reasons));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int rx_dir, ctrl;
	const struct vmnap_ram *map;
	size_t off = 0, avail;

	if (size < 1)
		return 0;
	ctrl = data[0];
	rx_dir = (ctrl & CTRL_RX_GUEST) ? VMNAP_DIR_H2G : VMNAP_DIR_G2H;
	map = (ctrl & CTRL_USE_RAM) ? &ram : NULL;
	avail = size - 1;
	if (avail > STREAM_MAX)
		avail = STREAM_MAX;
	memcpy(stream, data + 1, avail);

	while (off < avail) {
		const struct vmnap_hdr *h = NULL;
		const void *payload = NULL;
		size_t skip = ~(size_t)0;
		long r;

		if (off % RX_ALIGN) {	/* realign, as guest_link does */
			memmove(stream, stream + off, avail - off);
			avail -= off;
			off = 0;
		}
		r = vmnap_decode(stream + off, avail - off, rx_dir, map, &h,
				 &payload, &skip);
		if (r == 0) {
			CHECK(skip == 0);
			CHECK(avail - off < sizeof(struct vmnap_hdr) ||
			      avail - off < sizeof(struct vmnap_hdr) +
			      vmnap_le32(((const struct vmnap_hdr *)(stream + off))->len));
			break;
		}
		if (r > 0) {
			CHECK((size_t)r <= avail - off);
			check_accepted(stream + off, r, h, payload, rx_dir, map);
			off += (size_t)r;
			continue;
		}
		CHECK(-r >= 1 && -r <= VMNAP_ERR_MAX);
		if (vmnap_err_is_fatal((int)r)) {
			CHECK(skip == 0);
			break;
		}
		CHECK(skip >= sizeof(struct vmnap_hdr) && skip <= avail - off);
		off += skip;
	}
	return 0;
}
