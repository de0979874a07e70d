// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_guest_link.c - libFuzzer target: a guest link fed by a hostile
 * guest, interleaved with the owner's requests and a flaky transport.
 *
 * Input: a script of operations, each one control byte then its bytes:
 *   op & 7 in 0..3  feed: le16 length, then that many stream bytes (cut to
 *                   what is left) into guest_link_rx() (reconnects first
 *                   when the session ended)
 *   4               guest_link_handoff(flags = op >> 3 & 1, 1000 ms)
 *   5               guest_link_resumed(last request, reason from op >> 3)
 *   6               guest_link_abort(last request)
 *   7               transport mode = op >> 3 & 3 (take all, take half,
 *                   EAGAIN, fail), then guest_link_tx_ready()
 * Oracle: everything the link sends must decode cleanly as host-to-guest
 * messages, callbacks must see only checked data; a breach aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest_link.h"
#include "log.h"

#define OP_KIND_MASK	7U
#define OP_HANDOFF	4U
#define OP_RESUMED	5U
#define OP_ABORT	6U
#define OP_TRANSPORT	7U
#define OP_ARG_SHIFT	3U
#define FUZZ_DEADLINE_MS	1000U
#define FUZZ_RATE_BURST	64U	/* small, so that floods are reached */
#define FUZZ_CONNECT_BURST	4U	/* and reconnect storms */
#define OUT_MAX		(2U * GUEST_LINK_TXQ_MAX)

enum send_mode { SEND_ALL, SEND_HALF, SEND_EAGAIN, SEND_FAIL };

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "contract broken: %s (%s:%d)\n",	\
				#cond, __FILE__, __LINE__);		\
			abort();					\
		}							\
	} while (0)

struct fuzz_ctx {
	struct guest_link *gl;
	enum send_mode mode;
	uint64_t last_req_id;
	_Alignas(8) unsigned char out[OUT_MAX];	/* host bytes not yet decoded */
	size_t out_len;
};

static struct loop *fuzz_loop;
static struct fuzz_ctx ctx;

static const struct vmnap_range ram_ranges[] = {
	{ .gpa = 0, .len = 1ULL << 31 },
	{ .gpa = 1ULL << 32, .len = 1ULL << 31 },
};
static const struct vmnap_ram ram = { .ranges = ram_ranges, .nr = 2,
				      .page_size = VMNAP_MIN_PAGE_SIZE };

/* Decode what the host sent so far; every message must be valid H2G. */
static void check_output(struct fuzz_ctx *c)
{
	size_t off = 0;

	for (;;) {
		const struct vmnap_hdr *h;
		const void *p;
		size_t skip;
		long r = vmnap_decode(c->out + off, c->out_len - off,
				      VMNAP_DIR_H2G, NULL, &h, &p, &skip);

		if (r == 0)
			break;
		CHECK(r > 0);
		off += (size_t)r;
		CHECK(off % 8 == 0);	/* host messages keep alignment */
	}
	memmove(c->out, c->out + off, c->out_len - off);
	c->out_len -= off;
}

static ssize_t fuzz_send(void *targ, const void *buf, size_t len)
{
	struct fuzz_ctx *c = targ;
	size_t n = len;

	CHECK(len > 0);
	switch (c->mode) {
	case SEND_EAGAIN:
		return -EAGAIN;
	case SEND_FAIL:
		return -EPIPE;
	case SEND_HALF:
		n = (len + 1) / 2;
		break;
	case SEND_ALL:
		break;
	}
	CHECK(c->out_len + n <= sizeof(c->out));
	memcpy(c->out + c->out_len, buf, n);
	c->out_len += n;
	check_output(c);
	return (ssize_t)n;
}

static void fuzz_close(void *targ, int err)
{
	struct fuzz_ctx *c = targ;

	CHECK(err < 0);
	c->out_len = 0;		/* a new session starts a new stream */
}

static const struct guest_link_transport fuzz_transport = {
	.send = fuzz_send,
	.close = fuzz_close,
};

static void on_hello(struct guest_link *gl, const struct guest_link_peer *p,
		     void *opaque)
{
	(void)opaque;
	CHECK(guest_link_state(gl) == GUEST_LINK_UP);
	CHECK(p->nr_ranges >= 1 && p->nr_ranges <= VMNAP_MAX_RAM_RANGES);
	CHECK(!(p->features & ~p->features_offered));
	CHECK(memchr(p->module_version, 0, sizeof(p->module_version)));
}

static void on_handoff_ack(struct guest_link *gl, uint64_t req_id,
			   enum vmnap_verdict verdict,
			   const struct guest_link_evidence *ev, void *opaque)
{
	struct fuzz_ctx *c = opaque;

	(void)gl;
	CHECK(req_id == c->last_req_id);
	CHECK(verdict == VMNAP_READY || verdict == VMNAP_BUSY);
	CHECK(ev->cpu_idle_permille <= 1000);
}

static void on_resume_ack(struct guest_link *gl, uint64_t req_id,
			  uint64_t unquiesce_ns, void *opaque)
{
	struct fuzz_ctx *c = opaque;

	(void)gl;
	(void)unquiesce_ns;
	CHECK(req_id && req_id <= c->last_req_id);
}

static int on_free_report(struct guest_link *gl, uint64_t batch_id,
			  const struct guest_link_range *r, unsigned int nr,
			  void *opaque)
{
	(void)gl;
	(void)opaque;
	CHECK(nr >= 1 && nr <= VMNAP_MAX_FREE_RANGES);
	for (unsigned int i = 0; i < nr; i++) {
		CHECK(r[i].len && !(r[i].gpa % VMNAP_MIN_PAGE_SIZE) &&
		      !(r[i].len % VMNAP_MIN_PAGE_SIZE));
		CHECK(r[i].gpa + r[i].len <= (1ULL << 31) ||
		      (r[i].gpa >= (1ULL << 32) &&
		       r[i].gpa + r[i].len <= (1ULL << 32) + (1ULL << 31)));
	}
	/* exercise both statuses and a bad one the link must correct */
	return (int)(batch_id % 3);
}

static void on_disconnect(struct guest_link *gl, int err, void *opaque)
{
	(void)opaque;
	CHECK(err < 0);
	CHECK(guest_link_state(gl) == GUEST_LINK_CLOSED);
}

static const struct guest_link_ops fuzz_ops = {
	.hello = on_hello,
	.handoff_ack = on_handoff_ack,
	.resume_ack = on_resume_ack,
	.free_report = on_free_report,
	.disconnect = on_disconnect,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERR);
	fuzz_loop = loop_new();
	CHECK(fuzz_loop);
	return 0;
}

/* The limits' clock stands still: an input gives the same run every time. */
static uint64_t fuzz_clock(void)
{
	return 1000000000ULL;
}

/* A session, unless the link's reconnect limit refuses one (then none). */
static bool connect_if_closed(struct fuzz_ctx *c)
{
	if (guest_link_state(c->gl) == GUEST_LINK_CLOSED) {
		int r;

		c->out_len = 0;
		r = guest_link_connect(c->gl, &fuzz_transport, c);
		CHECK(r == 0 || r == -EAGAIN);
		CHECK((r == 0) == (guest_link_state(c->gl) != GUEST_LINK_CLOSED));
		return r == 0;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct guest_link_config cfg = {
		.loop = fuzz_loop,
		.subject = "vm fuzz",
		.vm_id = 7,
		.features = VMNAP_F_ALL,
		.rate_burst = FUZZ_RATE_BURST,
		.connect_burst = FUZZ_CONNECT_BURST,
		.clock = fuzz_clock,
	};
	struct fuzz_ctx *c = &ctx;
	size_t i = 0;

	c->mode = SEND_ALL;
	c->last_req_id = 0;
	c->out_len = 0;
	c->gl = guest_link_new(&cfg, &fuzz_ops, c);
	CHECK(c->gl);
	CHECK(guest_link_set_ram(c->gl, &ram) == 0);
	CHECK(connect_if_closed(c));	/* a new link's buckets are full */

	while (i < size) {
		unsigned int op = data[i++];
		unsigned int arg = op >> OP_ARG_SHIFT;
		uint64_t id;
		size_t n;
		int err;

		switch (op & OP_KIND_MASK) {
		case OP_HANDOFF:
			err = guest_link_handoff(c->gl, arg & VMNAP_HF_ALL,
						 FUZZ_DEADLINE_MS, &id);
			if (!err) {
				CHECK(id > c->last_req_id);
				c->last_req_id = id;
			}
			break;
		case OP_RESUMED:
			guest_link_resumed(c->gl, c->last_req_id, 1,
					   (enum vmnap_resume_reason)
					   (1 + arg % VMNAP_RESUME_REASON_MAX),
					   arg & VMNAP_RF_ALL);
			break;
		case OP_ABORT:
			guest_link_abort(c->gl, c->last_req_id);
			break;
		case OP_TRANSPORT:
			c->mode = (enum send_mode)(arg & 3);
			guest_link_tx_ready(c->gl);
			break;
		default:	/* feed */
			if (size - i < 2) {
				i = size;
				break;
			}
			n = (size_t)data[i] | (size_t)data[i + 1] << 8;
			i += 2;
			if (n > size - i)
				n = size - i;
			if (connect_if_closed(c)) {
				err = guest_link_rx(c->gl, data + i, n);
				CHECK(err == 0 || err == -ECONNRESET);
			} else {
				CHECK(guest_link_rx(c->gl, data + i, n) == -ENOTCONN);
			}
			i += n;
			break;
		}
	}
	{
		struct guest_link_stats st;

		guest_link_get_stats(c->gl, &st);
		CHECK(st.disconnects <= st.connects);
	}
	guest_link_free(c->gl);
	c->gl = NULL;
	return 0;
}
