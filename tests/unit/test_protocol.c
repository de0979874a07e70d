// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_protocol.c - the wire codecs of uapi/vmnap.h: every message type
 * encoded with the structs and vmnap_hdr_init(), decoded back through
 * vmnap_decode(), and every rejection the decoder must make, with the
 * error code, fatality and skip length it must report.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "uapi/vmnap.h"

#define HDR_LEN		sizeof(struct vmnap_hdr)
#define PAGE		4096ULL
#define GIB		(1ULL << 30)
#define TEST_SEQ	0x01020304U

/* The host's RAM map used by the range tests: [0, 2 GiB) and [4, 6 GiB). */
static const struct vmnap_range ram_ranges[] = {
	{ .gpa = 0, .len = 2 * GIB },
	{ .gpa = 4 * GIB, .len = 2 * GIB },
};
static const struct vmnap_ram test_ram = {
	.ranges = ram_ranges,
	.nr = 2,
	.page_size = PAGE,
};

/* One message: header + payload, aligned as a receive buffer would be. */
struct msg {
	_Alignas(8) unsigned char buf[VMNAP_MAX_MSG + 64];
	unsigned int type;
	uint32_t len;		/* payload bytes */
};

static struct msg m;	/* one message per test: too big for the stack */

static void *payload(void)
{
	return m.buf + HDR_LEN;
}

static struct vmnap_hdr *hdr(void)
{
	return (struct vmnap_hdr *)m.buf;
}

static size_t total(void)
{
	return HDR_LEN + m.len;
}

/* Set the header for @type with @len payload bytes. */
static void finish(unsigned int type, uint32_t len)
{
	m.type = type;
	m.len = len;
	vmnap_hdr_init(hdr(), type, len, TEST_SEQ);
}

/* ---- valid messages of every type ---- */

static struct vmnap_hello *make_hello(unsigned int nr_ranges)
{
	struct vmnap_hello *h = payload();

	memset(m.buf, 0, sizeof(m.buf));
	h->min_version = vmnap_cpu16(VMNAP_PROTO_MIN);
	h->max_version = vmnap_cpu16(VMNAP_PROTO_MAX);
	h->features = vmnap_cpu32(VMNAP_F_ALL);
	h->nr_cpus = vmnap_cpu32(2);
	h->page_size = vmnap_cpu32(PAGE);
	h->nr_ranges = vmnap_cpu32(nr_ranges);
	strcpy(h->module_version, "0.1.0-test");
	for (unsigned int i = 0; i < nr_ranges; i++) {
		/* alternate between the two RAM ranges, one page each */
		uint64_t base = (i & 1) ? 4 * GIB : 0;

		h->ranges[i].gpa = vmnap_cpu64(base + (i / 2) * PAGE);
		h->ranges[i].len = vmnap_cpu64(PAGE);
	}
	finish(VMNAP_HELLO, sizeof(*h) + nr_ranges * sizeof(h->ranges[0]));
	return h;
}

static struct vmnap_hello_ack *make_hello_ack(void)
{
	struct vmnap_hello_ack *a = payload();

	memset(m.buf, 0, sizeof(m.buf));
	a->version = vmnap_cpu16(VMNAP_PROTO_VERSION);
	a->features = vmnap_cpu32(VMNAP_F_QUIESCE);
	a->vm_id = vmnap_cpu64(0x1122334455667788ULL);
	finish(VMNAP_HELLO_ACK, sizeof(*a));
	return a;
}

static struct vmnap_handoff_req *make_handoff_req(void)
{
	struct vmnap_handoff_req *r = payload();

	memset(m.buf, 0, sizeof(m.buf));
	r->req_id = vmnap_cpu64(42);
	r->flags = vmnap_cpu32(VMNAP_HF_OFFLOAD);
	r->ack_deadline_ms = vmnap_cpu32(100);
	finish(VMNAP_HANDOFF_REQ, sizeof(*r));
	return r;
}

static struct vmnap_handoff_ack *make_handoff_ack(unsigned int verdict)
{
	struct vmnap_handoff_ack *a = payload();

	memset(m.buf, 0, sizeof(m.buf));
	a->req_id = vmnap_cpu64(42);
	a->verdict = vmnap_cpu32(verdict);
	a->ev.window_ns = vmnap_cpu64(5000000);
	a->ev.next_timer_ns = vmnap_cpu64(3000000000ULL);
	a->ev.writeback_pages = vmnap_cpu64(0);
	a->ev.dirty_pages = vmnap_cpu64(12);
	a->ev.cpu_idle_permille = vmnap_cpu32(1000);
	a->ev.nr_runnable = vmnap_cpu32(verdict == VMNAP_BUSY ? 3 : 0);
	a->ev.io_inflight = vmnap_cpu32(0);
	a->ev.busy_reasons = vmnap_cpu32(verdict == VMNAP_BUSY ?
					  VMNAP_BUSY_RUNNABLE : 0);
	a->ev.devices_quiesced = vmnap_cpu32(verdict == VMNAP_READY ? 2 : 0);
	a->ev.flags = vmnap_cpu32(VMNAP_EV_TIMER_KNOWN);
	finish(VMNAP_HANDOFF_ACK, sizeof(*a));
	return a;
}

static struct vmnap_handoff_abort *make_handoff_abort(void)
{
	struct vmnap_handoff_abort *a = payload();

	memset(m.buf, 0, sizeof(m.buf));
	a->req_id = vmnap_cpu64(42);
	finish(VMNAP_HANDOFF_ABORT, sizeof(*a));
	return a;
}

static struct vmnap_resumed *make_resumed(void)
{
	struct vmnap_resumed *r = payload();

	memset(m.buf, 0, sizeof(m.buf));
	r->req_id = vmnap_cpu64(42);
	r->paused_ns = vmnap_cpu64(1500000000ULL);
	r->reason = vmnap_cpu32(VMNAP_RESUME_DATA_READY);
	r->flags = vmnap_cpu32(VMNAP_RF_OFFLOADED);
	finish(VMNAP_RESUMED, sizeof(*r));
	return r;
}

static struct vmnap_resume_ack *make_resume_ack(void)
{
	struct vmnap_resume_ack *a = payload();

	memset(m.buf, 0, sizeof(m.buf));
	a->req_id = vmnap_cpu64(42);
	a->unquiesce_ns = vmnap_cpu64(250000);
	finish(VMNAP_RESUME_ACK, sizeof(*a));
	return a;
}

static struct vmnap_free_report *make_free_report(unsigned int nr_ranges)
{
	struct vmnap_free_report *f = payload();

	memset(m.buf, 0, sizeof(m.buf));
	f->batch_id = vmnap_cpu64(7);
	f->nr_ranges = vmnap_cpu32(nr_ranges);
	for (unsigned int i = 0; i < nr_ranges; i++) {
		f->ranges[i].gpa = vmnap_cpu64(GIB + i * 2 * PAGE);
		f->ranges[i].len = vmnap_cpu64(PAGE);
	}
	finish(VMNAP_FREE_REPORT, sizeof(*f) + nr_ranges * sizeof(f->ranges[0]));
	return f;
}

static struct vmnap_free_report_ack *make_free_report_ack(void)
{
	struct vmnap_free_report_ack *a = payload();

	memset(m.buf, 0, sizeof(m.buf));
	a->batch_id = vmnap_cpu64(7);
	a->status = vmnap_cpu32(VMNAP_FREE_IGNORED);
	finish(VMNAP_FREE_REPORT_ACK, sizeof(*a));
	return a;
}

static struct vmnap_ping *make_ping(unsigned int type)
{
	struct vmnap_ping *p = payload();

	memset(m.buf, 0, sizeof(m.buf));
	p->token = vmnap_cpu64(0xdeadbeefcafef00dULL);
	finish(type, sizeof(*p));
	return p;
}

static struct vmnap_error *make_error(void)
{
	struct vmnap_error *e = payload();

	memset(m.buf, 0, sizeof(m.buf));
	e->code = vmnap_cpu32(VMNAP_ERANGE);
	e->ref_seq = vmnap_cpu32(99);
	strcpy(e->text, "range outside guest RAM");
	finish(VMNAP_ERROR, sizeof(*e));
	return e;
}

/* Build a valid message of @type in m. */
static void make_valid(unsigned int type)
{
	switch (type) {
	case VMNAP_HELLO: make_hello(2); break;
	case VMNAP_HELLO_ACK: make_hello_ack(); break;
	case VMNAP_HANDOFF_REQ: make_handoff_req(); break;
	case VMNAP_HANDOFF_ACK: make_handoff_ack(VMNAP_READY); break;
	case VMNAP_HANDOFF_ABORT: make_handoff_abort(); break;
	case VMNAP_RESUMED: make_resumed(); break;
	case VMNAP_RESUME_ACK: make_resume_ack(); break;
	case VMNAP_FREE_REPORT: make_free_report(3); break;
	case VMNAP_FREE_REPORT_ACK: make_free_report_ack(); break;
	case VMNAP_PING: make_ping(VMNAP_PING); break;
	case VMNAP_PONG: make_ping(VMNAP_PONG); break;
	case VMNAP_ERROR: make_error(); break;
	default: fail_msg("no builder for type %u", type);
	}
}

/* The direction in which a receiver accepts @type (host side for "both"). */
static unsigned int rx_dir_of(unsigned int type)
{
	unsigned int dirs = vmnap_type_dirs(type);

	return (dirs & VMNAP_DIR_G2H) ? VMNAP_DIR_G2H : VMNAP_DIR_H2G;
}

/* ---- decode helpers ---- */

static long decode(unsigned int rx_dir, const struct vmnap_ram *ram,
		   size_t avail, size_t *skip)
{
	const struct vmnap_hdr *h = NULL;
	const void *p = NULL;

	return vmnap_decode(m.buf, avail, rx_dir, ram, &h, &p, skip);
}

/* m must decode whole in @rx_dir, with header and payload in place. */
static void expect_ok(unsigned int rx_dir, const struct vmnap_ram *ram)
{
	const struct vmnap_hdr *h = NULL;
	const void *p = NULL;
	size_t skip = 123;
	long r = vmnap_decode(m.buf, total(), rx_dir, ram, &h, &p, &skip);

	assert_int_equal(r, (long)total());
	assert_int_equal(skip, 0);
	assert_ptr_equal(h, m.buf);
	assert_ptr_equal(p, m.buf + HDR_LEN);
	assert_int_equal(vmnap_le32(h->magic), VMNAP_MAGIC);
	assert_int_equal(vmnap_le16(h->version), VMNAP_PROTO_VERSION);
	assert_int_equal(vmnap_le16(h->type), m.type);
	assert_int_equal(vmnap_le32(h->len), m.len);
	assert_int_equal(vmnap_le32(h->seq), TEST_SEQ);
}

/* m must be rejected with @code; fatal codes skip nothing, others all. */
static void expect_reject(unsigned int rx_dir, const struct vmnap_ram *ram,
			  unsigned int code)
{
	size_t skip = 123;
	long r = decode(rx_dir, ram, total(), &skip);

	assert_int_equal(r, -(long)code);
	if (vmnap_err_is_fatal(-(int)code))
		assert_int_equal(skip, 0);
	else
		assert_int_equal(skip, total());
}

/* ---- round trips ---- */

static void test_layout(void **state)
{
	(void)state;
	/* the bytes on the wire, not just the struct sizes */
	make_ping(VMNAP_PING);
	assert_memory_equal(m.buf, "VNAP", 4);
	assert_int_equal(m.buf[4], VMNAP_PROTO_VERSION);
	assert_int_equal(m.buf[5], 0);
	assert_int_equal(m.buf[6], VMNAP_PING);
	assert_int_equal(m.buf[8], sizeof(struct vmnap_ping));
	assert_int_equal(m.buf[12], 0x04);	/* seq, little-endian */
	assert_int_equal(m.buf[15], 0x01);
	assert_int_equal(m.buf[HDR_LEN], 0x0d);	/* token low byte first */
	assert_int_equal(offsetof(struct vmnap_hello, ranges), 56);
	assert_int_equal(offsetof(struct vmnap_handoff_ack, ev), 16);
	assert_int_equal(offsetof(struct vmnap_free_report, ranges), 16);
	assert_int_equal(VMNAP_MAX_MSG, HDR_LEN + VMNAP_MAX_PAYLOAD);
	/* every message is a multiple of 8 bytes: streams stay aligned */
	assert_int_equal(HDR_LEN % 8, 0);
	assert_int_equal(sizeof(struct vmnap_range) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_hello) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_hello_ack) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_handoff_req) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_handoff_ack) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_handoff_abort) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_resumed) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_resume_ack) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_free_report) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_free_report_ack) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_ping) % 8, 0);
	assert_int_equal(sizeof(struct vmnap_error) % 8, 0);
}

static void test_roundtrip_hello(void **state)
{
	struct vmnap_hello *h;

	(void)state;
	h = make_hello(VMNAP_MAX_RAM_RANGES);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
	expect_ok(VMNAP_DIR_G2H, NULL);
	assert_int_equal(vmnap_le32(h->nr_ranges), VMNAP_MAX_RAM_RANGES);
	assert_int_equal(vmnap_le64(h->ranges[1].gpa), 4 * GIB);
	assert_string_equal(h->module_version, "0.1.0-test");
	h = make_hello(1);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
	assert_int_equal(m.len, sizeof(*h) + sizeof(h->ranges[0]));
}

static void test_roundtrip_hello_ack(void **state)
{
	struct vmnap_hello_ack *a;

	(void)state;
	a = make_hello_ack();
	expect_ok(VMNAP_DIR_H2G, NULL);
	assert_int_equal(vmnap_le64(a->vm_id), 0x1122334455667788ULL);
	assert_int_equal(vmnap_le32(a->features), VMNAP_F_QUIESCE);
}

static void test_roundtrip_handoff_req(void **state)
{
	struct vmnap_handoff_req *r;

	(void)state;
	r = make_handoff_req();
	expect_ok(VMNAP_DIR_H2G, NULL);
	assert_int_equal(vmnap_le64(r->req_id), 42);
	assert_int_equal(vmnap_le32(r->ack_deadline_ms), 100);
	r->flags = 0;		/* pause without offload */
	expect_ok(VMNAP_DIR_H2G, NULL);
}

static void test_roundtrip_handoff_ack(void **state)
{
	struct vmnap_handoff_ack *a;

	(void)state;
	a = make_handoff_ack(VMNAP_READY);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
	assert_int_equal(vmnap_le64(a->ev.next_timer_ns), 3000000000ULL);
	assert_int_equal(vmnap_le32(a->ev.devices_quiesced), 2);
	a = make_handoff_ack(VMNAP_BUSY);
	a->ev.busy_reasons = vmnap_cpu32(VMNAP_BUSY_ALL);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
	/* an unknown timer budget is legal */
	a->ev.next_timer_ns = vmnap_cpu64(VMNAP_TIMER_UNKNOWN);
	a->ev.flags = 0;
	a->ev.cpu_idle_permille = 0;
	expect_ok(VMNAP_DIR_G2H, &test_ram);
}

static void test_roundtrip_handoff_abort(void **state)
{
	(void)state;
	assert_int_equal(vmnap_le64(make_handoff_abort()->req_id), 42);
	expect_ok(VMNAP_DIR_H2G, NULL);
}

static void test_roundtrip_resumed(void **state)
{
	struct vmnap_resumed *r;

	(void)state;
	r = make_resumed();
	for (unsigned int reason = 1; reason <= VMNAP_RESUME_REASON_MAX; reason++) {
		r->reason = vmnap_cpu32(reason);
		expect_ok(VMNAP_DIR_H2G, NULL);
	}
	assert_int_equal(vmnap_le64(r->paused_ns), 1500000000ULL);
}

static void test_roundtrip_resume_ack(void **state)
{
	(void)state;
	assert_int_equal(vmnap_le64(make_resume_ack()->unquiesce_ns), 250000);
	expect_ok(VMNAP_DIR_G2H, NULL);
}

static void test_roundtrip_free_report(void **state)
{
	struct vmnap_free_report *f;

	(void)state;
	f = make_free_report(VMNAP_MAX_FREE_RANGES);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
	expect_ok(VMNAP_DIR_G2H, NULL);
	assert_int_equal(vmnap_le64(f->batch_id), 7);
	assert_int_equal(vmnap_le64(f->ranges[VMNAP_MAX_FREE_RANGES - 1].gpa),
			 GIB + (VMNAP_MAX_FREE_RANGES - 1) * 2 * PAGE);
	/* a range ending exactly at the end of a RAM range is inside */
	f = make_free_report(1);
	f->ranges[0].gpa = vmnap_cpu64(6 * GIB - 4 * PAGE);
	f->ranges[0].len = vmnap_cpu64(4 * PAGE);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
}

static void test_roundtrip_free_report_ack(void **state)
{
	struct vmnap_free_report_ack *a;

	(void)state;
	a = make_free_report_ack();
	expect_ok(VMNAP_DIR_H2G, NULL);
	a->status = vmnap_cpu32(VMNAP_FREE_OK);
	expect_ok(VMNAP_DIR_H2G, NULL);
	assert_int_equal(vmnap_le64(a->batch_id), 7);
}

static void test_roundtrip_ping_pong(void **state)
{
	(void)state;
	for (unsigned int t = VMNAP_PING; t <= VMNAP_PONG; t++) {
		make_ping(t);
		expect_ok(VMNAP_DIR_G2H, NULL);
		expect_ok(VMNAP_DIR_H2G, NULL);
		assert_int_equal(vmnap_le64(((struct vmnap_ping *)payload())->token),
				 0xdeadbeefcafef00dULL);
	}
}

static void test_roundtrip_error(void **state)
{
	struct vmnap_error *e;

	(void)state;
	e = make_error();
	expect_ok(VMNAP_DIR_G2H, NULL);
	expect_ok(VMNAP_DIR_H2G, NULL);
	for (unsigned int c = 1; c <= VMNAP_ERR_MAX; c++) {
		e->code = vmnap_cpu32(c);
		expect_ok(VMNAP_DIR_G2H, NULL);
	}
	/* exactly full text, NUL in the last byte */
	memset(e->text, 'x', sizeof(e->text) - 1);
	e->text[sizeof(e->text) - 1] = '\0';
	expect_ok(VMNAP_DIR_G2H, NULL);
}

/* Two messages back to back decode one after the other. */
static void test_stream_of_two(void **state)
{
	_Alignas(8) static unsigned char stream[2 * 128];
	const struct vmnap_hdr *h;
	const void *p;
	size_t first, skip;
	long r;

	(void)state;
	make_resume_ack();
	first = total();
	memcpy(stream, m.buf, first);
	make_ping(VMNAP_PING);
	memcpy(stream + first, m.buf, total());
	r = vmnap_decode(stream, first + total(), VMNAP_DIR_G2H, NULL, &h, &p, &skip);
	assert_int_equal(r, first);
	assert_int_equal(vmnap_le16(h->type), VMNAP_RESUME_ACK);
	r = vmnap_decode(stream + r, total(), VMNAP_DIR_G2H, NULL, &h, &p, &skip);
	assert_int_equal(r, total());
	assert_int_equal(vmnap_le16(h->type), VMNAP_PING);
}

static void test_names(void **state)
{
	(void)state;
	for (unsigned int t = 1; t <= VMNAP_TYPE_MAX; t++) {
		assert_string_not_equal(vmnap_type_name(t), "UNKNOWN");
		assert_int_not_equal(vmnap_type_dirs(t), 0);
	}
	assert_string_equal(vmnap_type_name(0), "UNKNOWN");
	assert_string_equal(vmnap_type_name(VMNAP_TYPE_MAX + 1), "UNKNOWN");
	assert_string_equal(vmnap_type_name(0xffff), "UNKNOWN");
	assert_int_equal(vmnap_type_dirs(0), 0);
	assert_int_equal(vmnap_type_dirs(VMNAP_TYPE_MAX + 1), 0);
	for (unsigned int c = 0; c <= VMNAP_ERR_MAX; c++)
		assert_non_null(vmnap_err_name(c));
	assert_string_equal(vmnap_err_name(VMNAP_ERR_MAX + 1), "unknown error");
}

/* ---- framing rejections (fatal) ---- */

static void test_reject_bad_magic(void **state)
{
	(void)state;
	make_ping(VMNAP_PING);
	hdr()->magic = vmnap_cpu32(0x50414e57);	/* "WNAP" */
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EMAGIC);
	assert_true(vmnap_err_is_fatal(-VMNAP_EMAGIC));
	/* known as soon as the header is there, even with no payload */
	{
		size_t skip;

		assert_int_equal(decode(VMNAP_DIR_G2H, NULL, HDR_LEN, &skip),
				 -VMNAP_EMAGIC);
	}
}

static void test_reject_version(void **state)
{
	(void)state;
	make_ping(VMNAP_PING);
	hdr()->version = vmnap_cpu16(VMNAP_PROTO_MAX + 1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EVERSION);
	hdr()->version = vmnap_cpu16(0);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EVERSION);
	hdr()->version = vmnap_cpu16(0xffff);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EVERSION);
	assert_true(vmnap_err_is_fatal(-VMNAP_EVERSION));
}

static void test_reject_too_big(void **state)
{
	size_t skip = 1;

	(void)state;
	make_ping(VMNAP_PING);
	hdr()->len = vmnap_cpu32(VMNAP_MAX_PAYLOAD + 1);
	/* rejected from the header alone: no waiting for 64 KiB */
	assert_int_equal(decode(VMNAP_DIR_G2H, NULL, HDR_LEN, &skip),
			 -VMNAP_ETOOBIG);
	assert_int_equal(skip, 0);
	hdr()->len = vmnap_cpu32(0xffffffffU);
	assert_int_equal(decode(VMNAP_DIR_G2H, NULL, HDR_LEN, &skip),
			 -VMNAP_ETOOBIG);
	assert_true(vmnap_err_is_fatal(-VMNAP_ETOOBIG));
	/* exactly the limit is framed (then rejected by the type's check) */
	hdr()->len = vmnap_cpu32(VMNAP_MAX_PAYLOAD);
	assert_int_equal(decode(VMNAP_DIR_G2H, NULL, HDR_LEN, &skip), 0);
	m.len = VMNAP_MAX_PAYLOAD;
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ELEN);
}

/* Every prefix of every valid message means "need more bytes". */
static void test_truncated_needs_more(void **state)
{
	(void)state;
	for (unsigned int t = 1; t <= VMNAP_TYPE_MAX; t++) {
		make_valid(t);
		for (size_t avail = 0; avail < total(); avail++) {
			size_t skip = 1;

			assert_int_equal(decode(rx_dir_of(t), &test_ram, avail, &skip), 0);
			assert_int_equal(skip, 0);
		}
		expect_ok(rx_dir_of(t), &test_ram);
	}
}

/* vmnap_msg_check() on a payload shorter than the header says. */
static void test_reject_truncated_payload(void **state)
{
	(void)state;
	make_resume_ack();
	assert_int_equal(vmnap_msg_check(hdr(), payload(), m.len - 1, NULL),
			 -VMNAP_ETRUNC);
	assert_int_equal(vmnap_msg_check(hdr(), payload(), m.len, NULL), 0);
	assert_true(vmnap_err_is_fatal(-VMNAP_ETRUNC));
}

/* ---- type rejections (non-fatal: skip the message) ---- */

static void test_reject_unknown_type(void **state)
{
	static const unsigned int bad[] = { 0, VMNAP_TYPE_MAX + 1, 0x100, 0xffff };

	(void)state;
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t skip;

		make_ping(VMNAP_PING);
		hdr()->type = vmnap_cpu16(bad[i]);
		expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ETYPE);
		expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_ETYPE);
		/* the skip needs the whole payload first */
		assert_int_equal(decode(VMNAP_DIR_G2H, NULL, total() - 1, &skip), 0);
		/* an unknown type with a payload of the maximum size */
		m.len = VMNAP_MAX_PAYLOAD;
		hdr()->len = vmnap_cpu32(m.len);
		expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ETYPE);
		m.len = 0;
		hdr()->len = 0;
		expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ETYPE);
	}
	assert_false(vmnap_err_is_fatal(-VMNAP_ETYPE));
	/* vmnap_msg_check() itself refuses an unknown type */
	make_ping(VMNAP_PING);
	hdr()->type = vmnap_cpu16(VMNAP_TYPE_MAX + 1);
	assert_int_equal(vmnap_msg_check(hdr(), payload(), m.len, NULL),
			 -VMNAP_ETYPE);
}

static void test_reject_wrong_direction(void **state)
{
	(void)state;
	for (unsigned int t = 1; t <= VMNAP_TYPE_MAX; t++) {
		unsigned int dirs = vmnap_type_dirs(t);

		make_valid(t);
		if (!(dirs & VMNAP_DIR_G2H))
			expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ETYPE);
		else if (!(dirs & VMNAP_DIR_H2G))
			expect_reject(VMNAP_DIR_H2G, &test_ram, VMNAP_ETYPE);
		else
			expect_ok(VMNAP_DIR_H2G, NULL);
	}
}

/* Each fixed-size type refuses a payload one byte short, long, or empty. */
static void test_reject_length(void **state)
{
	(void)state;
	for (unsigned int t = 1; t <= VMNAP_TYPE_MAX; t++) {
		uint32_t good;

		make_valid(t);
		good = m.len;
		if (t == VMNAP_HELLO || t == VMNAP_FREE_REPORT) {
			/* variable: shorter than the fixed part */
			finish(t, (t == VMNAP_HELLO ? sizeof(struct vmnap_hello) :
				   sizeof(struct vmnap_free_report)) - 1);
			expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
			finish(t, 0);
			expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
			continue;
		}
		finish(t, good - 1);
		expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
		finish(t, good + 1);
		expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
		finish(t, good + 8);
		expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
		finish(t, 0);
		expect_reject(rx_dir_of(t), &test_ram, VMNAP_ELEN);
	}
	assert_false(vmnap_err_is_fatal(-VMNAP_ELEN));
}

static void test_reject_count_hello(void **state)
{
	struct vmnap_hello *h;

	(void)state;
	h = make_hello(2);
	h->nr_ranges = vmnap_cpu32(3);		/* says 3, carries 2 */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	h->nr_ranges = vmnap_cpu32(1);		/* says 1, carries 2 */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	h = make_hello(2);
	finish(VMNAP_HELLO, m.len + 8);		/* half a range extra */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	h = make_hello(0);			/* no RAM at all */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	h = make_hello(VMNAP_MAX_RAM_RANGES + 1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ECOUNT);
	h = make_hello(1);
	h->nr_ranges = vmnap_cpu32(0x10000001U);	/* n * 16 wraps in 32 bits */
	finish(VMNAP_HELLO, sizeof(*h) + 16);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ECOUNT);
	assert_false(vmnap_err_is_fatal(-VMNAP_ECOUNT));
}

static void test_reject_count_free_report(void **state)
{
	struct vmnap_free_report *f;

	(void)state;
	f = make_free_report(3);
	f->nr_ranges = vmnap_cpu32(4);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	f->nr_ranges = vmnap_cpu32(2);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	f = make_free_report(3);
	finish(VMNAP_FREE_REPORT, m.len - 1);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	make_free_report(0);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_ECOUNT);
	make_free_report(VMNAP_MAX_FREE_RANGES + 1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ECOUNT);
	f = make_free_report(1);
	f->nr_ranges = vmnap_cpu32(0x10000001U);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_ECOUNT);
}

/* ---- GPA ranges ---- */

/* Set range 0 of a FREE_REPORT and of a HELLO and expect @code for both. */
static void expect_range(uint64_t gpa, uint64_t len, const struct vmnap_ram *ram,
			 unsigned int code)
{
	struct vmnap_free_report *f = make_free_report(2);

	f->ranges[1].gpa = vmnap_cpu64(gpa);
	f->ranges[1].len = vmnap_cpu64(len);
	if (code)
		expect_reject(VMNAP_DIR_G2H, ram, code);
	else
		expect_ok(VMNAP_DIR_G2H, ram);

	struct vmnap_hello *h = make_hello(2);

	h->ranges[1].gpa = vmnap_cpu64(gpa);
	h->ranges[1].len = vmnap_cpu64(len);
	if (code)
		expect_reject(VMNAP_DIR_G2H, ram, code);
	else
		expect_ok(VMNAP_DIR_G2H, ram);
}

static void test_reject_range_unaligned(void **state)
{
	(void)state;
	expect_range(GIB + 1, PAGE, &test_ram, VMNAP_EALIGN);
	expect_range(GIB + PAGE / 2, PAGE, NULL, VMNAP_EALIGN);
	expect_range(GIB, PAGE + 1, &test_ram, VMNAP_EALIGN);
	expect_range(GIB, PAGE - 1, NULL, VMNAP_EALIGN);
	assert_false(vmnap_err_is_fatal(-VMNAP_EALIGN));
}

static void test_reject_range_zero(void **state)
{
	(void)state;
	expect_range(GIB, 0, &test_ram, VMNAP_EZERO);
	expect_range(0, 0, NULL, VMNAP_EZERO);
}

static void test_reject_range_overflow(void **state)
{
	(void)state;
	expect_range(~0ULL & ~(PAGE - 1), 2 * PAGE, NULL, VMNAP_EOVERFLOW);
	expect_range(~0ULL & ~(PAGE - 1), PAGE, NULL, VMNAP_EOVERFLOW);
	expect_range(PAGE, ~0ULL & ~(PAGE - 1), &test_ram, VMNAP_EOVERFLOW);
	/* the last page below 2^64 without wrapping is fine without a map */
	expect_range((~0ULL & ~(PAGE - 1)) - PAGE, PAGE, NULL, 0);
}

static void test_reject_range_outside_ram(void **state)
{
	(void)state;
	expect_range(2 * GIB, PAGE, &test_ram, VMNAP_ERANGE);	/* in the hole */
	expect_range(2 * GIB - PAGE, 2 * PAGE, &test_ram, VMNAP_ERANGE);	/* straddles */
	expect_range(4 * GIB - PAGE, 2 * PAGE, &test_ram, VMNAP_ERANGE);
	expect_range(6 * GIB, PAGE, &test_ram, VMNAP_ERANGE);	/* past the end */
	expect_range(GIB, 4 * GIB, &test_ram, VMNAP_ERANGE);	/* spans both */
	expect_range(1ULL << 60, PAGE, &test_ram, VMNAP_ERANGE);
	/* the same ranges pass the alignment-only check without a map */
	expect_range(2 * GIB, PAGE, NULL, 0);
	expect_range(GIB, 4 * GIB, NULL, 0);
	assert_false(vmnap_err_is_fatal(-VMNAP_ERANGE));
}

/* A RAM map entry that wraps contains nothing. */
static void test_range_ram_map_wrapping(void **state)
{
	static const struct vmnap_range wrap[] = {
		{ .gpa = ~0ULL & ~(PAGE - 1), .len = 4 * PAGE },
	};
	const struct vmnap_ram ram = { .ranges = wrap, .nr = 1, .page_size = PAGE };
	const struct vmnap_range r = { .gpa = 0, .len = PAGE };

	(void)state;
	assert_int_equal(vmnap_range_check(&r, &ram, PAGE), -VMNAP_ERANGE);
}

/* Alignment follows the page size: declared in HELLO, the host's for FREE_REPORT. */
static void test_range_page_size(void **state)
{
	const uint64_t huge = 2ULL << 20;
	const struct vmnap_ram ram2m = { .ranges = ram_ranges, .nr = 2,
					 .page_size = (uint32_t)huge };
	struct vmnap_free_report *f;
	struct vmnap_hello *h;

	(void)state;
	f = make_free_report(1);
	expect_reject(VMNAP_DIR_G2H, &ram2m, VMNAP_EALIGN);	/* 4 KiB range */
	f->ranges[0].gpa = vmnap_cpu64(GIB + huge);
	f->ranges[0].len = vmnap_cpu64(huge);
	expect_ok(VMNAP_DIR_G2H, &ram2m);
	h = make_hello(1);
	h->page_size = vmnap_cpu32((uint32_t)huge);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EALIGN);
	h->ranges[0].len = vmnap_cpu64(huge);
	expect_ok(VMNAP_DIR_G2H, &test_ram);
}

/* ---- field values ---- */

static void test_reject_fields_hello(void **state)
{
	struct vmnap_hello *h;

	(void)state;
	h = make_hello(1);
	h->reserved = vmnap_cpu32(1);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	h = make_hello(1);
	h->features = vmnap_cpu32(VMNAP_F_ALL + 1);	/* unknown bit */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	h = make_hello(1);
	h->features = vmnap_cpu32(1U << 31);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	h = make_hello(1);
	h->nr_cpus = 0;
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	h = make_hello(1);
	h->min_version = vmnap_cpu16(2);
	h->max_version = vmnap_cpu16(1);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	h = make_hello(1);
	h->min_version = 0;
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	/* a range the host does not speak is the host's choice, not EFIELD */
	h = make_hello(1);
	h->max_version = vmnap_cpu16(9);
	expect_ok(VMNAP_DIR_G2H, &test_ram);

	static const uint32_t bad_pages[] = { 0, 1, 2048, 4095, 4097, 12288,
					      2U << 30, 0x80000000U, 0xffffffffU };
	for (unsigned int i = 0; i < sizeof(bad_pages) / sizeof(bad_pages[0]); i++) {
		h = make_hello(1);
		h->page_size = vmnap_cpu32(bad_pages[i]);
		expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	}
	h = make_hello(1);
	h->page_size = vmnap_cpu32(VMNAP_MAX_PAGE_SIZE);
	h->ranges[0].len = vmnap_cpu64(VMNAP_MAX_PAGE_SIZE);
	expect_ok(VMNAP_DIR_G2H, &test_ram);

	h = make_hello(1);
	memset(h->module_version, 'v', sizeof(h->module_version));	/* no NUL */
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	assert_false(vmnap_err_is_fatal(-VMNAP_EFIELD));
}

static void test_reject_fields_hello_ack(void **state)
{
	struct vmnap_hello_ack *a;

	(void)state;
	a = make_hello_ack();
	a->version = 0;
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	a->version = vmnap_cpu16(VMNAP_PROTO_MAX + 1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	a = make_hello_ack();
	a->features = vmnap_cpu32(~VMNAP_F_ALL);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	a = make_hello_ack();
	a->reserved = vmnap_cpu16(1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
}

static void test_reject_fields_handoff_req(void **state)
{
	struct vmnap_handoff_req *r;

	(void)state;
	r = make_handoff_req();
	r->flags = vmnap_cpu32(VMNAP_HF_ALL << 1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	r = make_handoff_req();
	r->ack_deadline_ms = 0;
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
}

static void test_reject_fields_handoff_ack(void **state)
{
	struct vmnap_handoff_ack *a;

	(void)state;
	a = make_handoff_ack(VMNAP_READY);
	a->verdict = 0;
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a->verdict = vmnap_cpu32(3);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_READY);
	a->reserved = vmnap_cpu32(1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_READY);
	a->ev.busy_reasons = vmnap_cpu32(VMNAP_BUSY_IO);	/* READY with busy bits */
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_BUSY);
	a->ev.busy_reasons = 0;				/* BUSY without a reason */
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_BUSY);
	a->ev.busy_reasons = vmnap_cpu32(VMNAP_BUSY_ALL + 1);	/* unknown bit */
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_READY);
	a->ev.cpu_idle_permille = vmnap_cpu32(1001);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a->ev.cpu_idle_permille = vmnap_cpu32(0xffffffffU);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	a = make_handoff_ack(VMNAP_READY);
	a->ev.flags = vmnap_cpu32(VMNAP_EV_ALL << 1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
}

static void test_reject_fields_resumed(void **state)
{
	struct vmnap_resumed *r;

	(void)state;
	r = make_resumed();
	r->reason = 0;
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	r->reason = vmnap_cpu32(VMNAP_RESUME_REASON_MAX + 1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	r = make_resumed();
	r->flags = vmnap_cpu32(VMNAP_RF_ALL << 1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
}

static void test_reject_fields_free_report(void **state)
{
	struct vmnap_free_report *f;
	struct vmnap_free_report_ack *a;

	(void)state;
	f = make_free_report(1);
	f->reserved = vmnap_cpu32(1);
	expect_reject(VMNAP_DIR_G2H, &test_ram, VMNAP_EFIELD);
	a = make_free_report_ack();
	a->status = vmnap_cpu32(VMNAP_FREE_IGNORED + 1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
	a = make_free_report_ack();
	a->reserved = vmnap_cpu32(1);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
}

static void test_reject_fields_error(void **state)
{
	struct vmnap_error *e;

	(void)state;
	e = make_error();
	e->code = 0;
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	e->code = vmnap_cpu32(VMNAP_ERR_MAX + 1);
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	e = make_error();
	memset(e->text, 'e', sizeof(e->text));	/* no NUL */
	expect_reject(VMNAP_DIR_G2H, NULL, VMNAP_EFIELD);
	expect_reject(VMNAP_DIR_H2G, NULL, VMNAP_EFIELD);
}

/* A bad non-fatal message followed by a good one: skip, then decode. */
static void test_skip_then_next(void **state)
{
	_Alignas(8) static unsigned char stream[512];
	const struct vmnap_hdr *h;
	const void *p;
	size_t first, skip;
	long r;

	(void)state;
	make_handoff_ack(VMNAP_READY)->ev.cpu_idle_permille = vmnap_cpu32(2000);
	first = total();
	memcpy(stream, m.buf, first);
	make_ping(VMNAP_PING);
	memcpy(stream + first, m.buf, total());
	r = vmnap_decode(stream, first + total(), VMNAP_DIR_G2H, NULL, &h, &p, &skip);
	assert_int_equal(r, -VMNAP_EFIELD);
	assert_int_equal(skip, first);
	r = vmnap_decode(stream + skip, total(), VMNAP_DIR_G2H, NULL, &h, &p, &skip);
	assert_int_equal(r, total());
	assert_int_equal(vmnap_le16(h->type), VMNAP_PING);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_roundtrip_hello),
		cmocka_unit_test(test_roundtrip_hello_ack),
		cmocka_unit_test(test_roundtrip_handoff_req),
		cmocka_unit_test(test_roundtrip_handoff_ack),
		cmocka_unit_test(test_roundtrip_handoff_abort),
		cmocka_unit_test(test_roundtrip_resumed),
		cmocka_unit_test(test_roundtrip_resume_ack),
		cmocka_unit_test(test_roundtrip_free_report),
		cmocka_unit_test(test_roundtrip_free_report_ack),
		cmocka_unit_test(test_roundtrip_ping_pong),
		cmocka_unit_test(test_roundtrip_error),
		cmocka_unit_test(test_stream_of_two),
		cmocka_unit_test(test_reject_bad_magic),
		cmocka_unit_test(test_reject_version),
		cmocka_unit_test(test_reject_too_big),
		cmocka_unit_test(test_truncated_needs_more),
		cmocka_unit_test(test_reject_truncated_payload),
		cmocka_unit_test(test_reject_unknown_type),
		cmocka_unit_test(test_reject_wrong_direction),
		cmocka_unit_test(test_reject_length),
		cmocka_unit_test(test_reject_count_hello),
		cmocka_unit_test(test_reject_count_free_report),
		cmocka_unit_test(test_reject_range_unaligned),
		cmocka_unit_test(test_reject_range_zero),
		cmocka_unit_test(test_reject_range_overflow),
		cmocka_unit_test(test_reject_range_outside_ram),
		cmocka_unit_test(test_range_ram_map_wrapping),
		cmocka_unit_test(test_range_page_size),
		cmocka_unit_test(test_reject_fields_hello),
		cmocka_unit_test(test_reject_fields_hello_ack),
		cmocka_unit_test(test_reject_fields_handoff_req),
		cmocka_unit_test(test_reject_fields_handoff_ack),
		cmocka_unit_test(test_reject_fields_resumed),
		cmocka_unit_test(test_reject_fields_free_report),
		cmocka_unit_test(test_reject_fields_error),
		cmocka_unit_test(test_skip_then_next),
	};

	return cmocka_run_group_tests_name("protocol", tests, NULL, NULL);
}
