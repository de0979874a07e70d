// SPDX-License-Identifier: GPL-2.0-only
/*
 * proto_kunit.c - KUnit suite for framing host input and building guest
 * messages: what the module sends passes the host's checks, and hostile
 * host input is rejected or drops the stream.
 */
#include <kunit/test.h>
#include <linux/slab.h>

#include "proto.h"

#define BUF_CAP	VMNAP_MAX_MSG

static struct vmnap_rxbuf *new_rx(struct kunit *test)
{
	struct vmnap_rxbuf *rx = kunit_kzalloc(test, sizeof(*rx), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, rx);
	rx->buf = kunit_kzalloc(test, BUF_CAP, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, rx->buf);
	rx->cap = BUF_CAP;
	return rx;
}

static void rx_put(struct vmnap_rxbuf *rx, const void *p, size_t n)
{
	memcpy(rx->buf + rx->len, p, n);
	rx->len += n;
}

/* Host message builder for the tests: header + payload. */
static size_t host_msg(u8 *out, unsigned int type, const void *p, u32 len)
{
	vmnap_hdr_init((struct vmnap_hdr *)out, type, len, 7);
	memcpy(out + sizeof(struct vmnap_hdr), p, len);
	return sizeof(struct vmnap_hdr) + len;
}

static void guest_msg_ok(struct kunit *test, const void *buf, size_t n)
{
	const struct vmnap_hdr *h = buf;

	KUNIT_ASSERT_GE(test, n, sizeof(*h));
	KUNIT_EXPECT_EQ(test, vmnap_hdr_check(h, VMNAP_DIR_G2H), 0);
	KUNIT_EXPECT_EQ(test, vmnap_msg_check(h, (const u8 *)buf + sizeof(*h),
					      n - sizeof(*h), NULL), 0);
}

static void proto_hello_is_valid(struct kunit *test)
{
	static const u64 ranges[2][2] = {
		{ 0x1000, 0x9f000 }, { 0x100000, 0x1ff00000 },
	};
	struct vmnap_hello_info info = {
		.features = VMNAP_F_QUIESCE | VMNAP_F_TIMER_EVIDENCE,
		.nr_cpus = 2, .page_size = 4096, .version = "0.1.0",
		.ranges = ranges, .nr_ranges = 2,
	};
	u8 *buf = kunit_kzalloc(test, BUF_CAP, GFP_KERNEL);
	const struct vmnap_hello *m;
	size_t n;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	n = vmnap_build_hello(buf, BUF_CAP, 1, &info);
	KUNIT_EXPECT_EQ(test, n, VMNAP_HELLO_SIZE(2));
	guest_msg_ok(test, buf, n);
	m = (const void *)(buf + sizeof(struct vmnap_hdr));
	KUNIT_EXPECT_EQ(test, le64_to_cpu(m->ranges[1].gpa), 0x100000ULL);
	KUNIT_EXPECT_STREQ(test, m->module_version, "0.1.0");
	/* too small a buffer, no ranges, too many ranges: nothing built */
	KUNIT_EXPECT_EQ(test, vmnap_build_hello(buf, n - 1, 1, &info), (size_t)0);
	info.nr_ranges = 0;
	KUNIT_EXPECT_EQ(test, vmnap_build_hello(buf, BUF_CAP, 1, &info), (size_t)0);
	info.nr_ranges = VMNAP_MAX_RAM_RANGES + 1;
	KUNIT_EXPECT_EQ(test, vmnap_build_hello(buf, BUF_CAP, 1, &info), (size_t)0);
}

static void proto_acks_are_valid(struct kunit *test)
{
	u8 buf[256];
	struct vmnap_evidence ev = {};
	static const u64 fr[1][2] = { { 0x200000, 0x200000 } };
	size_t n;

	ev.busy_reasons = cpu_to_le32(VMNAP_BUSY_IO);
	n = vmnap_build_handoff_ack(buf, sizeof(buf), 2, 9, VMNAP_BUSY, &ev);
	guest_msg_ok(test, buf, n);
	n = vmnap_build_resume_ack(buf, sizeof(buf), 3, 9, 12345);
	guest_msg_ok(test, buf, n);
	n = vmnap_build_free_report(buf, sizeof(buf), 4, 1, fr, 1);
	guest_msg_ok(test, buf, n);
	n = vmnap_build_ping(buf, sizeof(buf), 5, VMNAP_PONG, 77);
	guest_msg_ok(test, buf, n);
	n = vmnap_build_error(buf, sizeof(buf), 6, VMNAP_ESTATE, 5, NULL);
	guest_msg_ok(test, buf, n);
	KUNIT_EXPECT_EQ(test, vmnap_build_error(buf, sizeof(buf), 6, 0, 0, NULL),
			(size_t)0);
	KUNIT_EXPECT_EQ(test, vmnap_build_ping(buf, sizeof(buf), 6, VMNAP_HELLO, 0),
			(size_t)0);
}

static void proto_rx_frames_partial_input(struct kunit *test)
{
	struct vmnap_rxbuf *rx = new_rx(test);
	struct vmnap_handoff_req req = {
		.req_id = cpu_to_le64(42), .ack_deadline_ms = cpu_to_le32(100),
	};
	struct vmnap_rxmsg m;
	u8 msg[64];
	size_t n = host_msg(msg, VMNAP_HANDOFF_REQ, &req, sizeof(req));

	rx_put(rx, msg, 10);
	KUNIT_EXPECT_EQ(test, vmnap_rx_next(rx, &m), 0);
	rx_put(rx, msg + 10, n - 10);
	rx_put(rx, msg, n);			/* a second one behind it */
	KUNIT_ASSERT_EQ(test, vmnap_rx_next(rx, &m), 1);
	KUNIT_EXPECT_EQ(test, m.err, 0U);
	KUNIT_EXPECT_EQ(test, m.size, n);
	KUNIT_EXPECT_EQ(test, le16_to_cpu(m.hdr->type), VMNAP_HANDOFF_REQ);
	vmnap_rx_consume(rx, m.size);
	KUNIT_EXPECT_EQ(test, rx->len, n);
	KUNIT_ASSERT_EQ(test, vmnap_rx_next(rx, &m), 1);
	vmnap_rx_consume(rx, m.size);
	KUNIT_EXPECT_EQ(test, rx->len, (size_t)0);
}

static void proto_rx_rejects_hostile(struct kunit *test)
{
	struct vmnap_rxbuf *rx = new_rx(test);
	struct vmnap_handoff_req req = {
		.req_id = cpu_to_le64(1), .ack_deadline_ms = 0,	/* invalid */
	};
	struct vmnap_hello_ack ha = {};
	struct vmnap_rxmsg m;
	u8 msg[128];
	size_t n;

	/* a field out of range: skipped, stream stays framed */
	n = host_msg(msg, VMNAP_HANDOFF_REQ, &req, sizeof(req));
	rx_put(rx, msg, n);
	KUNIT_ASSERT_EQ(test, vmnap_rx_next(rx, &m), 1);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_EFIELD);
	KUNIT_EXPECT_FALSE(test, m.fatal);
	KUNIT_EXPECT_EQ(test, m.size, n);
	vmnap_rx_consume(rx, m.size);

	/* a guest-to-host type from the host: wrong direction, skipped */
	n = host_msg(msg, VMNAP_RESUME_ACK, &ha, sizeof(ha));
	rx_put(rx, msg, n);
	KUNIT_ASSERT_EQ(test, vmnap_rx_next(rx, &m), 1);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_ETYPE);
	vmnap_rx_consume(rx, m.size);

	/* wrong length for the type */
	n = host_msg(msg, VMNAP_HELLO_ACK, &ha, sizeof(ha) - 4);
	rx_put(rx, msg, n);
	KUNIT_ASSERT_EQ(test, vmnap_rx_next(rx, &m), 1);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_ELEN);
	vmnap_rx_consume(rx, m.size);

	/* bad magic: fatal */
	n = host_msg(msg, VMNAP_PING, &ha, 8);
	msg[0] ^= 0xff;
	rx_put(rx, msg, n);
	KUNIT_EXPECT_EQ(test, vmnap_rx_next(rx, &m), -1);
	KUNIT_EXPECT_TRUE(test, m.fatal);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_EMAGIC);
}

static void proto_rx_rejects_oversize(struct kunit *test)
{
	struct vmnap_rxbuf *rx = new_rx(test);
	struct vmnap_hdr h;
	struct vmnap_rxmsg m;

	vmnap_hdr_init(&h, VMNAP_PING, VMNAP_MAX_PAYLOAD + 1, 1);
	rx_put(rx, &h, sizeof(h));
	KUNIT_EXPECT_EQ(test, vmnap_rx_next(rx, &m), -1);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_ETOOBIG);
	rx->len = 0;
	vmnap_hdr_init(&h, VMNAP_PING, 8, 1);
	h.version = cpu_to_le16(99);
	rx_put(rx, &h, sizeof(h));
	KUNIT_EXPECT_EQ(test, vmnap_rx_next(rx, &m), -1);
	KUNIT_EXPECT_EQ(test, m.err, (u32)VMNAP_EVERSION);
}

static struct kunit_case proto_cases[] = {
	KUNIT_CASE(proto_hello_is_valid),
	KUNIT_CASE(proto_acks_are_valid),
	KUNIT_CASE(proto_rx_frames_partial_input),
	KUNIT_CASE(proto_rx_rejects_hostile),
	KUNIT_CASE(proto_rx_rejects_oversize),
	{}
};

static struct kunit_suite proto_suite = {
	.name = "vmnap_proto",
	.test_cases = proto_cases,
};
kunit_test_suite(proto_suite);
