// SPDX-License-Identifier: GPL-2.0-only
/*
 * gen_corpus.c - write the seed corpora of the fuzz targets from valid
 * messages, so that fuzzing starts from the protocol rather than from noise.
 *
 *   gen_corpus DIR    writes DIR/fuzz_decode/ and DIR/fuzz_guest_link/
 *
 * Seeds follow the input formats described at the top of fuzz_decode.c and
 * fuzz_guest_link.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "uapi/vmnap.h"

#define PAGE		VMNAP_MIN_PAGE_SIZE
#define GIB		(1ULL << 30)
#define SEED_MAX	(1U << 18)
/* fuzz_decode control byte */
#define CTRL_HOST	0U		/* receive G2H, no RAM map */
#define CTRL_GUEST	1U		/* receive H2G */
#define CTRL_HOST_RAM	2U		/* receive G2H, RAM map */
/* fuzz_guest_link script opcodes */
#define OP_FEED		0U
#define OP_HANDOFF	4U
#define OP_RESUMED	5U
#define OP_ABORT	6U
#define OP_TRANSPORT	7U
#define OP_ARG(a)	((unsigned int)(a) << 3)

struct seed {
	unsigned char b[SEED_MAX];
	size_t len;
};

static struct seed s;
static const char *out_dir;
static uint32_t seq;

static void put(const void *p, size_t n)
{
	if (s.len + n > sizeof(s.b)) {
		fprintf(stderr, "gen_corpus: seed too big\n");
		exit(1);
	}
	memcpy(s.b + s.len, p, n);
	s.len += n;
}

static void put_u8(unsigned int v)
{
	unsigned char c = (unsigned char)v;

	put(&c, 1);
}

/* One whole message. */
static void put_msg(unsigned int type, const void *payload, uint32_t len)
{
	struct vmnap_hdr h;

	vmnap_hdr_init(&h, type, len, ++seq);
	put(&h, sizeof(h));
	put(payload, len);
}

/* fuzz_guest_link: a feed operation carrying one message. */
static void feed_msg(unsigned int type, const void *payload, uint32_t len)
{
	size_t at;

	put_u8(OP_FEED);
	at = s.len;
	put_u8(0);
	put_u8(0);
	put_msg(type, payload, len);
	s.b[at] = (unsigned char)((s.len - at - 2) & 0xff);
	s.b[at + 1] = (unsigned char)((s.len - at - 2) >> 8);
}

static void begin(void)
{
	s.len = 0;
	seq = 0;
}

static void save(const char *target, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s.b, 1, s.len, f) != s.len || fclose(f)) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void mkdir_p(const char *target)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	if (mkdir(out_dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "gen_corpus: %s: %s\n", out_dir, strerror(errno));
		exit(1);
	}
	if (mkdir(path, 0755) && errno != EEXIST) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* ---- valid payloads ---- */

static uint32_t hello(unsigned char *buf, unsigned int nr)
{
	struct vmnap_hello *h = (struct vmnap_hello *)buf;

	memset(h, 0, sizeof(*h) + nr * sizeof(h->ranges[0]));
	h->min_version = vmnap_cpu16(VMNAP_PROTO_MIN);
	h->max_version = vmnap_cpu16(VMNAP_PROTO_MAX);
	h->features = vmnap_cpu32(VMNAP_F_ALL);
	h->nr_cpus = vmnap_cpu32(2);
	h->page_size = vmnap_cpu32(PAGE);
	h->nr_ranges = vmnap_cpu32(nr);
	snprintf(h->module_version, sizeof(h->module_version), "0.1.0");
	for (unsigned int i = 0; i < nr; i++) {
		h->ranges[i].gpa = vmnap_cpu64((i & 1 ? 4 * GIB : 0) + i / 2 * PAGE);
		h->ranges[i].len = vmnap_cpu64(PAGE);
	}
	return (uint32_t)(sizeof(*h) + nr * sizeof(h->ranges[0]));
}

static struct vmnap_handoff_ack handoff_ack(uint64_t id, unsigned int verdict)
{
	struct vmnap_handoff_ack a;

	memset(&a, 0, sizeof(a));
	a.req_id = vmnap_cpu64(id);
	a.verdict = vmnap_cpu32(verdict);
	a.ev.window_ns = vmnap_cpu64(1000000);
	a.ev.next_timer_ns = vmnap_cpu64(2000000000ULL);
	a.ev.cpu_idle_permille = vmnap_cpu32(990);
	a.ev.busy_reasons = vmnap_cpu32(verdict == VMNAP_BUSY ? VMNAP_BUSY_IO : 0);
	a.ev.flags = vmnap_cpu32(VMNAP_EV_TIMER_KNOWN);
	return a;
}

static uint32_t free_report(unsigned char *buf, uint64_t batch, unsigned int nr)
{
	struct vmnap_free_report *f = (struct vmnap_free_report *)buf;

	memset(f, 0, sizeof(*f) + nr * sizeof(f->ranges[0]));
	f->batch_id = vmnap_cpu64(batch);
	f->nr_ranges = vmnap_cpu32(nr);
	for (unsigned int i = 0; i < nr; i++) {
		f->ranges[i].gpa = vmnap_cpu64(GIB + 2 * i * PAGE);
		f->ranges[i].len = vmnap_cpu64(PAGE);
	}
	return (uint32_t)(sizeof(*f) + nr * sizeof(f->ranges[0]));
}

static _Alignas(8) unsigned char pl[VMNAP_MAX_PAYLOAD];

static void decode_seeds(void)
{
	const char *t = "fuzz_decode";
	struct vmnap_resume_ack ra = { .req_id = vmnap_cpu64(1),
				       .unquiesce_ns = vmnap_cpu64(5000) };
	struct vmnap_ping ping = { .token = vmnap_cpu64(77) };
	struct vmnap_error err = { .code = vmnap_cpu32(VMNAP_ESTATE) };
	struct vmnap_hello_ack hack = { .version = vmnap_cpu16(1),
					.features = vmnap_cpu32(VMNAP_F_QUIESCE),
					.vm_id = vmnap_cpu64(3) };
	struct vmnap_handoff_req req = { .req_id = vmnap_cpu64(1),
					 .flags = vmnap_cpu32(VMNAP_HF_OFFLOAD),
					 .ack_deadline_ms = vmnap_cpu32(50) };
	struct vmnap_handoff_abort ab = { .req_id = vmnap_cpu64(1) };
	struct vmnap_resumed res = { .req_id = vmnap_cpu64(1),
				     .paused_ns = vmnap_cpu64(1000),
				     .reason = vmnap_cpu32(VMNAP_RESUME_TIMER) };
	struct vmnap_free_report_ack fack = { .batch_id = vmnap_cpu64(9) };
	struct vmnap_handoff_ack ack;

	mkdir_p(t);
	snprintf(err.text, sizeof(err.text), "unexpected");

	begin(); put_u8(CTRL_HOST_RAM); put_msg(VMNAP_HELLO, pl, hello(pl, 2)); save(t, "hello");
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_HELLO, pl, hello(pl, VMNAP_MAX_RAM_RANGES));
	save(t, "hello-max");
	ack = handoff_ack(1, VMNAP_READY);
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack)); save(t, "handoff-ack-ready");
	ack = handoff_ack(2, VMNAP_BUSY);
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack)); save(t, "handoff-ack-busy");
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_RESUME_ACK, &ra, sizeof(ra)); save(t, "resume-ack");
	begin(); put_u8(CTRL_HOST_RAM); put_msg(VMNAP_FREE_REPORT, pl, free_report(pl, 1, 4));
	save(t, "free-report");
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_PING, &ping, sizeof(ping)); save(t, "ping");
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_PONG, &ping, sizeof(ping)); save(t, "pong");
	begin(); put_u8(CTRL_HOST); put_msg(VMNAP_ERROR, &err, sizeof(err)); save(t, "error");
	begin(); put_u8(CTRL_GUEST); put_msg(VMNAP_HELLO_ACK, &hack, sizeof(hack)); save(t, "hello-ack");
	begin(); put_u8(CTRL_GUEST); put_msg(VMNAP_HANDOFF_REQ, &req, sizeof(req)); save(t, "handoff-req");
	begin(); put_u8(CTRL_GUEST); put_msg(VMNAP_HANDOFF_ABORT, &ab, sizeof(ab)); save(t, "handoff-abort");
	begin(); put_u8(CTRL_GUEST); put_msg(VMNAP_RESUMED, &res, sizeof(res)); save(t, "resumed");
	begin(); put_u8(CTRL_GUEST); put_msg(VMNAP_FREE_REPORT_ACK, &fack, sizeof(fack));
	save(t, "free-report-ack");

	/* a whole guest session in one stream */
	begin();
	put_u8(CTRL_HOST_RAM);
	put_msg(VMNAP_HELLO, pl, hello(pl, 2));
	ack = handoff_ack(1, VMNAP_READY);
	put_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack));
	put_msg(VMNAP_RESUME_ACK, &ra, sizeof(ra));
	put_msg(VMNAP_FREE_REPORT, pl, free_report(pl, 2, 2));
	put_msg(VMNAP_PING, &ping, sizeof(ping));
	put_msg(VMNAP_ERROR, &err, sizeof(err));
	save(t, "session");

	/* an unknown type to skip, then a valid message */
	begin();
	put_u8(CTRL_HOST);
	put_msg(VMNAP_TYPE_MAX + 1, pl, 3);
	put_msg(VMNAP_PING, &ping, sizeof(ping));
	save(t, "skip-then-ping");
}

static void link_seeds(void)
{
	const char *t = "fuzz_guest_link";
	struct vmnap_resume_ack ra = { .req_id = vmnap_cpu64(1),
				       .unquiesce_ns = vmnap_cpu64(5000) };
	struct vmnap_ping ping = { .token = vmnap_cpu64(77) };
	struct vmnap_error err = { .code = vmnap_cpu32(VMNAP_EINTERNAL) };
	struct vmnap_handoff_ack ack;

	mkdir_p(t);
	snprintf(err.text, sizeof(err.text), "guest trouble");

	begin();
	feed_msg(VMNAP_HELLO, pl, hello(pl, 2));
	save(t, "hello");

	/* handoff READY, resume, free report, ping, guest error */
	begin();
	feed_msg(VMNAP_HELLO, pl, hello(pl, 2));
	put_u8(OP_HANDOFF | OP_ARG(VMNAP_HF_OFFLOAD));
	ack = handoff_ack(1, VMNAP_READY);
	feed_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack));
	put_u8(OP_RESUMED | OP_ARG(VMNAP_RESUME_DATA_READY - 1));
	feed_msg(VMNAP_RESUME_ACK, &ra, sizeof(ra));
	feed_msg(VMNAP_FREE_REPORT, pl, free_report(pl, 1, 3));
	feed_msg(VMNAP_FREE_REPORT, pl, free_report(pl, 2, 1));
	feed_msg(VMNAP_FREE_REPORT, pl, free_report(pl, 3, 1));
	feed_msg(VMNAP_PING, &ping, sizeof(ping));
	feed_msg(VMNAP_ERROR, &err, sizeof(err));
	save(t, "session-ready");

	/* handoff BUSY, then a second handoff aborted, then a stale ack */
	begin();
	feed_msg(VMNAP_HELLO, pl, hello(pl, 1));
	put_u8(OP_HANDOFF);
	ack = handoff_ack(1, VMNAP_BUSY);
	feed_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack));
	put_u8(OP_HANDOFF);
	put_u8(OP_ABORT);
	ack = handoff_ack(2, VMNAP_READY);
	feed_msg(VMNAP_HANDOFF_ACK, &ack, sizeof(ack));
	save(t, "session-busy-abort-stale");

	/* a transport that takes half, then nothing, then everything */
	begin();
	put_u8(OP_TRANSPORT | OP_ARG(1));
	feed_msg(VMNAP_HELLO, pl, hello(pl, 2));
	put_u8(OP_TRANSPORT | OP_ARG(2));
	feed_msg(VMNAP_PING, &ping, sizeof(ping));
	put_u8(OP_TRANSPORT | OP_ARG(0));
	save(t, "partial-sends");

	/* the same session delivered one byte at a time */
	begin();
	{
		static struct seed whole;
		size_t n;

		put_msg(VMNAP_HELLO, pl, hello(pl, 1));
		put_msg(VMNAP_PING, &ping, sizeof(ping));
		whole = s;
		begin();
		for (n = 0; n < whole.len; n++) {
			put_u8(OP_FEED);
			put_u8(1);
			put_u8(0);
			put_u8(whole.b[n]);
		}
	}
	save(t, "byte-at-a-time");

	/* a message before HELLO, then garbage framing */
	begin();
	feed_msg(VMNAP_RESUME_ACK, &ra, sizeof(ra));
	put_u8(OP_FEED);
	put_u8(16);
	put_u8(0);
	put("XXXXXXXXXXXXXXXX", 16);
	save(t, "before-hello-then-garbage");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	out_dir = argv[1];
	decode_seeds();
	link_seeds();
	return 0;
}
