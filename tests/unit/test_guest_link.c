// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_guest_link.c - the host side of the vmnap protocol (guest_link.c),
 * driven as a hostile guest would drive it: through guest_link_rx() with a
 * recording transport, and through a real socketpair on the vmnapd loop.
 * Timers are real (loop.c); tests wait for events, never for durations.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "guest_link.h"
#include "log.h"
#include "loop.h"
#include "vmnapd.h"

#define PAGE		4096ULL
#define GIB		(1ULL << 30)
#define TEST_VM_ID	0xabcdef01ULL
#define OUT_MAX		(1U << 20)
#define IN_MAX		(1U << 20)
/* Hang guard for loop-driven tests: a bound, not a measurement. */
#define GUARD_NS	(20ULL * 1000000000ULL)

enum send_mode { SEND_ALL, SEND_EAGAIN, SEND_ONE_BYTE, SEND_FAIL };

struct event_log {
	unsigned int hello, handoff_acks, expired, resume_acks, free_reports,
		     disconnects;
	struct guest_link_peer peer;
	uint64_t req_id;
	enum vmnap_verdict verdict;
	struct guest_link_evidence ev;
	uint64_t unquiesce_ns;
	uint64_t batch_id;
	struct guest_link_range ranges[4];
	unsigned int nr_ranges;
	int free_status;	/* what the free_report callback returns */
	int disconnect_err;
	bool stop_on_event;	/* loop_stop() from every callback */
};

struct fx {
	struct loop *loop;
	struct guest_link *gl;
	struct guest_link_config cfg;
	struct event_log ev;
	/* recording transport */
	enum send_mode mode;
	_Alignas(8) unsigned char out[OUT_MAX];
	size_t out_len, out_off;
	unsigned int closes;
	int close_err;
	/* socketpair: sv[0] attached to the link, sv[1] is the guest */
	int guest_fd;
	struct loop_timer guard;
	bool guard_fired;
	/* guest-side encoder */
	_Alignas(8) unsigned char in[IN_MAX];
	size_t in_len;
	uint32_t guest_seq;
};

static const struct vmnap_range ram_ranges[] = {
	{ .gpa = 0, .len = 2 * GIB },
	{ .gpa = 4 * GIB, .len = 2 * GIB },
};
static const struct vmnap_ram test_ram = { .ranges = ram_ranges, .nr = 2,
					   .page_size = PAGE };

/* ---- recording transport ---- */

static ssize_t rec_send(void *targ, const void *buf, size_t len)
{
	struct fx *f = targ;
	size_t n = len;

	switch (f->mode) {
	case SEND_EAGAIN:
		return -EAGAIN;
	case SEND_FAIL:
		return -EPIPE;
	case SEND_ONE_BYTE:
		n = 1;
		break;
	case SEND_ALL:
		break;
	}
	assert_true(f->out_len + n <= sizeof(f->out));
	memcpy(f->out + f->out_len, buf, n);
	f->out_len += n;
	return (ssize_t)n;
}

static void rec_close(void *targ, int err)
{
	struct fx *f = targ;

	f->closes++;
	f->close_err = err;
}

static const struct guest_link_transport rec_transport = {
	.send = rec_send,
	.close = rec_close,
};

/* ---- owner callbacks ---- */

static void on_hello(struct guest_link *gl, const struct guest_link_peer *p,
		     void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->ev.hello++;
	f->ev.peer = *p;
	if (f->ev.stop_on_event)
		loop_stop(f->loop);
}

static void on_handoff_ack(struct guest_link *gl, uint64_t req_id,
			   enum vmnap_verdict verdict,
			   const struct guest_link_evidence *ev, void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->ev.handoff_acks++;
	f->ev.req_id = req_id;
	f->ev.verdict = verdict;
	f->ev.ev = *ev;
	if (f->ev.stop_on_event)
		loop_stop(f->loop);
}

static void on_expired(struct guest_link *gl, uint64_t req_id, void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->ev.expired++;
	f->ev.req_id = req_id;
	if (f->ev.stop_on_event)
		loop_stop(f->loop);
}

static void on_resume_ack(struct guest_link *gl, uint64_t req_id,
			  uint64_t unquiesce_ns, void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->ev.resume_acks++;
	f->ev.req_id = req_id;
	f->ev.unquiesce_ns = unquiesce_ns;
}

static int on_free_report(struct guest_link *gl, uint64_t batch_id,
			  const struct guest_link_range *r, unsigned int nr,
			  void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->ev.free_reports++;
	f->ev.batch_id = batch_id;
	f->ev.nr_ranges = nr;
	memcpy(f->ev.ranges, r, (nr < 4 ? nr : 4) * sizeof(*r));
	return f->ev.free_status;
}

static void on_disconnect(struct guest_link *gl, int err, void *opaque)
{
	struct fx *f = opaque;

	assert_int_equal(guest_link_state(gl), GUEST_LINK_CLOSED);
	f->ev.disconnects++;
	f->ev.disconnect_err = err;
	if (f->ev.stop_on_event)
		loop_stop(f->loop);
}

static const struct guest_link_ops test_ops = {
	.hello = on_hello,
	.handoff_ack = on_handoff_ack,
	.handoff_expired = on_expired,
	.resume_ack = on_resume_ack,
	.free_report = on_free_report,
	.disconnect = on_disconnect,
};

/* ---- fixture ---- */

static void on_guard(struct loop *l, struct loop_timer *t, void *arg)
{
	struct fx *f = arg;

	(void)t;
	f->guard_fired = true;
	loop_stop(l);
}

/* The limits' fake clock (tests that set fx_limits.clock). */
static uint64_t fake_ns = 1000000000ULL;

static uint64_t fake_clock(void)
{
	return fake_ns;
}

/* Extra limits for the next fx_new() (connect, log, clock); zeroed after. */
static struct guest_link_config fx_limits;

static struct fx *fx_new(uint32_t rate_per_sec, uint32_t rate_burst)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->loop = loop_new();
	assert_non_null(f->loop);
	f->cfg = (struct guest_link_config){
		.loop = f->loop,
		.subject = "vm test",
		.vm_id = TEST_VM_ID,
		.features = VMNAP_F_ALL,
		.rate_per_sec = rate_per_sec,
		.rate_burst = rate_burst,
		.connect_per_sec = fx_limits.connect_per_sec,
		.connect_burst = fx_limits.connect_burst,
		.log_interval_ms = fx_limits.log_interval_ms,
		.log_burst = fx_limits.log_burst,
		.clock = fx_limits.clock,
	};
	memset(&fx_limits, 0, sizeof(fx_limits));
	f->gl = guest_link_new(&f->cfg, &test_ops, f);
	assert_non_null(f->gl);
	f->guest_fd = -1;
	f->ev.free_status = VMNAP_FREE_OK;
	loop_timer_init(&f->guard, on_guard, f);
	return f;
}

static int setup_direct(void **state)
{
	struct fx *f = fx_new(0, 0);

	assert_int_equal(guest_link_set_ram(f->gl, &test_ram), 0);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	guest_link_free(f->gl);
	loop_timer_cancel(f->loop, &f->guard);
	if (f->guest_fd >= 0)
		close(f->guest_fd);
	loop_free(f->loop);
	free(f);
	return 0;
}

/* Run the loop until a callback stops it; fail on the hang guard. */
static void run_until_event(struct fx *f)
{
	f->ev.stop_on_event = true;
	loop_timer_arm(f->loop, &f->guard, GUARD_NS);
	assert_int_equal(loop_run(f->loop), 0);
	loop_timer_cancel(f->loop, &f->guard);
	f->ev.stop_on_event = false;
	assert_false(f->guard_fired);
}

/* ---- guest-side encoding ---- */

static void guest_put(struct fx *f, unsigned int type, const void *payload,
		      uint32_t len)
{
	struct vmnap_hdr h;

	assert_true(f->in_len + sizeof(h) + len <= sizeof(f->in));
	vmnap_hdr_init(&h, type, len, ++f->guest_seq);
	memcpy(f->in + f->in_len, &h, sizeof(h));
	memcpy(f->in + f->in_len + sizeof(h), payload, len);
	f->in_len += sizeof(h) + len;
}

/* Deliver what guest_put() queued, in one chunk. */
static int guest_flush(struct fx *f)
{
	int r = guest_link_rx(f->gl, f->in, f->in_len);

	f->in_len = 0;
	return r;
}

static int guest_send(struct fx *f, unsigned int type, const void *payload,
		      uint32_t len)
{
	guest_put(f, type, payload, len);
	return guest_flush(f);
}

static uint32_t hello_payload(void *buf, uint16_t min, uint16_t max,
			      uint32_t features)
{
	struct vmnap_hello *h = buf;

	memset(h, 0, sizeof(*h) + 2 * sizeof(h->ranges[0]));
	h->min_version = vmnap_cpu16(min);
	h->max_version = vmnap_cpu16(max);
	h->features = vmnap_cpu32(features);
	h->nr_cpus = vmnap_cpu32(4);
	h->page_size = vmnap_cpu32(PAGE);
	h->nr_ranges = vmnap_cpu32(2);
	strcpy(h->module_version, "0.1.0-unit");
	h->ranges[0].gpa = vmnap_cpu64(0);
	h->ranges[0].len = vmnap_cpu64(2 * GIB);
	h->ranges[1].gpa = vmnap_cpu64(4 * GIB);
	h->ranges[1].len = vmnap_cpu64(GIB);
	return sizeof(*h) + 2 * sizeof(h->ranges[0]);
}

static void send_hello(struct fx *f)
{
	_Alignas(8) unsigned char buf[256];
	uint32_t len = hello_payload(buf, VMNAP_PROTO_MIN, VMNAP_PROTO_MAX,
				     VMNAP_F_ALL);

	assert_int_equal(guest_send(f, VMNAP_HELLO, buf, len), 0);
}

static struct vmnap_handoff_ack make_ack(uint64_t req_id, unsigned int verdict,
					 uint32_t busy)
{
	struct vmnap_handoff_ack a;

	memset(&a, 0, sizeof(a));
	a.req_id = vmnap_cpu64(req_id);
	a.verdict = vmnap_cpu32(verdict);
	a.ev.window_ns = vmnap_cpu64(2000000);
	a.ev.next_timer_ns = vmnap_cpu64(5000000000ULL);
	a.ev.dirty_pages = vmnap_cpu64(17);
	a.ev.cpu_idle_permille = vmnap_cpu32(997);
	a.ev.busy_reasons = vmnap_cpu32(busy);
	a.ev.devices_quiesced = vmnap_cpu32(verdict == VMNAP_READY ? 3 : 0);
	a.ev.flags = vmnap_cpu32(VMNAP_EV_TIMER_KNOWN);
	return a;
}

/* ---- host-side decoding of what the link sent ---- */

/* Next host message from the recording transport; its type, or 0 if none. */
static unsigned int host_next(struct fx *f, void *payload, size_t cap)
{
	const struct vmnap_hdr *h = NULL;
	const void *p = NULL;
	size_t skip;
	long r;

	r = vmnap_decode(f->out + f->out_off, f->out_len - f->out_off,
			 VMNAP_DIR_H2G, NULL, &h, &p, &skip);
	if (r == 0)
		return 0;
	assert_true(r > 0);	/* the host sends only valid messages */
	assert_true(vmnap_le32(h->len) <= cap);
	memcpy(payload, p, vmnap_le32(h->len));
	f->out_off += (size_t)r;
	return vmnap_le16(h->type);
}

/* The next host message must be @type. */
static void expect_host(struct fx *f, unsigned int type, void *payload, size_t cap)
{
	_Alignas(8) unsigned char scratch[128];

	if (!payload) {
		payload = scratch;
		cap = sizeof(scratch);
	}
	assert_string_equal(vmnap_type_name(host_next(f, payload, cap)),
			    vmnap_type_name(type));
}

static void expect_host_error(struct fx *f, unsigned int code)
{
	struct vmnap_error e;

	expect_host(f, VMNAP_ERROR, &e, sizeof(e));
	assert_string_equal(vmnap_err_name(vmnap_le32(e.code)), vmnap_err_name(code));
	assert_non_null(memchr(e.text, 0, sizeof(e.text)));
}

static void expect_host_quiet(struct fx *f)
{
	assert_int_equal(f->out_len, f->out_off);
}

static void handshake(struct fx *f)
{
	send_hello(f);
	expect_host(f, VMNAP_HELLO_ACK, NULL, 0);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
}

static uint64_t handoff(struct fx *f, uint32_t flags, uint32_t deadline_ms)
{
	struct vmnap_handoff_req r;
	uint64_t id = 0;

	assert_int_equal(guest_link_handoff(f->gl, flags, deadline_ms, &id), 0);
	expect_host(f, VMNAP_HANDOFF_REQ, &r, sizeof(r));
	assert_int_equal(vmnap_le64(r.req_id), id);
	assert_int_equal(vmnap_le32(r.flags), flags);
	assert_int_equal(vmnap_le32(r.ack_deadline_ms), deadline_ms);
	return id;
}

static struct guest_link_stats stats(struct fx *f)
{
	struct guest_link_stats st;

	guest_link_get_stats(f->gl, &st);
	return st;
}

/* ---- tests: handshake ---- */

static void test_hello(void **state)
{
	struct fx *f = *state;
	struct vmnap_hello_ack a;
	const struct guest_link_peer *p;
	_Alignas(8) unsigned char buf[256];

	assert_null(guest_link_peer(f->gl));
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_AWAIT_HELLO);
	guest_send(f, VMNAP_HELLO, buf,
		   hello_payload(buf, 1, 7, VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT));
	expect_host(f, VMNAP_HELLO_ACK, &a, sizeof(a));
	assert_int_equal(vmnap_le16(a.version), VMNAP_PROTO_VERSION);
	assert_int_equal(vmnap_le32(a.features), VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT);
	assert_int_equal(vmnap_le64(a.vm_id), TEST_VM_ID);
	assert_int_equal(f->ev.hello, 1);
	p = guest_link_peer(f->gl);
	assert_non_null(p);
	assert_int_equal(p->nr_cpus, 4);
	assert_int_equal(p->page_size, PAGE);
	assert_int_equal(p->nr_ranges, 2);
	assert_int_equal(p->ranges[1].gpa, 4 * GIB);
	assert_int_equal(p->ranges[1].len, GIB);
	assert_string_equal(p->module_version, "0.1.0-unit");
	assert_int_equal(stats(f).rx_msgs[VMNAP_HELLO], 1);
	assert_int_equal(stats(f).tx_msgs[VMNAP_HELLO_ACK], 1);
	/* a second HELLO in the same session is out of place */
	send_hello(f);
	expect_host_error(f, VMNAP_ESTATE);
	assert_int_equal(f->ev.hello, 1);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
}

static void test_hello_features_subset(void **state)
{
	struct fx *f = fx_new(0, 0);
	struct vmnap_hello_ack a;
	_Alignas(8) unsigned char buf[256];

	*state = f;
	guest_link_free(f->gl);
	f->cfg.features = VMNAP_F_QUIESCE | VMNAP_F_TIMER_EVIDENCE;	/* no free reports */
	f->gl = guest_link_new(&f->cfg, &test_ops, f);
	assert_non_null(f->gl);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	guest_send(f, VMNAP_HELLO, buf,
		   hello_payload(buf, 1, 1, VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT));
	expect_host(f, VMNAP_HELLO_ACK, &a, sizeof(a));
	assert_int_equal(vmnap_le32(a.features), VMNAP_F_QUIESCE);
	assert_int_equal(guest_link_peer(f->gl)->features_offered,
			 VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT);
}

static void test_hello_no_common_version(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];

	guest_send(f, VMNAP_HELLO, buf,
		   hello_payload(buf, VMNAP_PROTO_MAX + 1, VMNAP_PROTO_MAX + 3, 0));
	expect_host_error(f, VMNAP_EVERSION);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -EPROTO);
	assert_int_equal(f->closes, 1);
	assert_int_equal(stats(f).rx_errors[VMNAP_EVERSION], 1);
	assert_int_equal(f->ev.hello, 0);
}

static void test_hello_outside_ram(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];
	struct vmnap_hello *h = (struct vmnap_hello *)buf;
	uint32_t len = hello_payload(buf, 1, 1, VMNAP_F_ALL);

	h->ranges[1].len = vmnap_cpu64(3 * GIB);	/* past the host's map */
	guest_send(f, VMNAP_HELLO, buf, len);
	expect_host_error(f, VMNAP_ERANGE);
	assert_int_equal(f->ev.hello, 0);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_AWAIT_HELLO);
	assert_int_equal(f->ev.disconnects, 0);
	/* without a map only alignment and overflow are checked */
	assert_int_equal(guest_link_set_ram(f->gl, NULL), 0);
	guest_send(f, VMNAP_HELLO, buf, len);
	expect_host(f, VMNAP_HELLO_ACK, NULL, 0);
}

static void test_before_hello(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a = make_ack(1, VMNAP_READY, 0);
	struct vmnap_ping ping = { .token = vmnap_cpu64(5) }, pong;
	struct vmnap_error e = { .code = vmnap_cpu32(VMNAP_EINTERNAL) };
	uint64_t id;

	assert_int_equal(guest_link_handoff(f->gl, 0, 100, &id), -ENOTCONN);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	expect_host_error(f, VMNAP_ESTATE);
	guest_send(f, VMNAP_PING, &ping, sizeof(ping));		/* allowed */
	expect_host(f, VMNAP_PONG, &pong, sizeof(pong));
	assert_int_equal(vmnap_le64(pong.token), 5);
	guest_send(f, VMNAP_ERROR, &e, sizeof(e));		/* allowed */
	expect_host_quiet(f);
	assert_int_equal(stats(f).peer_errors[VMNAP_EINTERNAL], 1);
	guest_send(f, VMNAP_PONG, &ping, sizeof(ping));		/* not yet */
	expect_host_error(f, VMNAP_ESTATE);
	assert_int_equal(stats(f).rx_errors[VMNAP_ESTATE], 2);
	assert_int_equal(stats(f).stale_acks, 0);	/* refused for the state */
	assert_int_equal(f->ev.handoff_acks, 0);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_AWAIT_HELLO);
}

/* ---- tests: handoff ---- */

static void test_handoff_ready_resume(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a;
	struct vmnap_resume_ack ra;
	struct vmnap_resumed r;
	uint64_t id, id2;

	handshake(f);
	id = handoff(f, VMNAP_HF_OFFLOAD, 500);
	assert_int_equal(id, 1);
	assert_int_equal(guest_link_handoff(f->gl, 0, 500, &id2), -EBUSY);
	a = make_ack(id, VMNAP_READY, 0);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	assert_int_equal(f->ev.handoff_acks, 1);
	assert_int_equal(f->ev.req_id, id);
	assert_int_equal(f->ev.verdict, VMNAP_READY);
	assert_int_equal(f->ev.ev.next_timer_ns, 5000000000ULL);
	assert_int_equal(f->ev.ev.cpu_idle_permille, 997);
	assert_int_equal(f->ev.ev.dirty_pages, 17);
	assert_int_equal(f->ev.ev.devices_quiesced, 3);
	assert_int_equal(f->ev.ev.flags, VMNAP_EV_TIMER_KNOWN);
	expect_host_quiet(f);
	/* quiesced: no new handoff until resumed */
	assert_int_equal(guest_link_handoff(f->gl, 0, 500, &id2), -EBUSY);
	assert_int_equal(guest_link_resumed(f->gl, id + 1, 1, VMNAP_RESUME_TIMER, 0),
			 -ENOENT);
	assert_int_equal(guest_link_resumed(f->gl, id, 1, 0, 0), -EINVAL);
	assert_int_equal(guest_link_resumed(f->gl, id, 123456789, VMNAP_RESUME_DATA_READY,
					    VMNAP_RF_OFFLOADED), 0);
	expect_host(f, VMNAP_RESUMED, &r, sizeof(r));
	assert_int_equal(vmnap_le64(r.req_id), id);
	assert_int_equal(vmnap_le64(r.paused_ns), 123456789);
	assert_int_equal(vmnap_le32(r.reason), VMNAP_RESUME_DATA_READY);
	assert_int_equal(vmnap_le32(r.flags), VMNAP_RF_OFFLOADED);
	ra.req_id = vmnap_cpu64(id);
	ra.unquiesce_ns = vmnap_cpu64(4242);
	guest_send(f, VMNAP_RESUME_ACK, &ra, sizeof(ra));
	assert_int_equal(f->ev.resume_acks, 1);
	assert_int_equal(f->ev.unquiesce_ns, 4242);
	expect_host_quiet(f);
	/* request ids keep increasing */
	id2 = handoff(f, 0, 500);
	assert_true(id2 > id);
	assert_int_equal(stats(f).handoffs, 2);
	assert_int_equal(stats(f).handoff_ready, 1);
	assert_int_equal(stats(f).resumes, 1);
	assert_int_equal(stats(f).resume_acks, 1);
}

static void test_handoff_busy(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a;
	uint64_t id;

	handshake(f);
	id = handoff(f, 0, 500);
	a = make_ack(id, VMNAP_BUSY, VMNAP_BUSY_RUNNABLE | VMNAP_BUSY_IO);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	assert_int_equal(f->ev.verdict, VMNAP_BUSY);
	assert_int_equal(f->ev.ev.busy_reasons, VMNAP_BUSY_RUNNABLE | VMNAP_BUSY_IO);
	assert_int_equal(stats(f).handoff_busy, 1);
	/* BUSY ends the request: nothing to resume, a new one may start */
	assert_int_equal(guest_link_resumed(f->gl, id, 1, VMNAP_RESUME_MANUAL, 0),
			 -ENOENT);
	assert_int_equal(handoff(f, 0, 500), id + 1);
}

static void test_handoff_api_errors(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_abort ab;
	uint64_t id;

	handshake(f);
	assert_int_equal(guest_link_handoff(f->gl, VMNAP_HF_ALL << 1, 500, &id), -EINVAL);
	assert_int_equal(guest_link_handoff(f->gl, 0, 0, &id), -EINVAL);
	assert_int_equal(guest_link_abort(f->gl, 1), -ENOENT);
	expect_host_quiet(f);
	id = handoff(f, 0, 500);
	assert_int_equal(guest_link_abort(f->gl, id + 5), -ENOENT);
	assert_int_equal(guest_link_abort(f->gl, id), 0);
	expect_host(f, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	assert_int_equal(vmnap_le64(ab.req_id), id);
	assert_int_equal(guest_link_abort(f->gl, id), -ENOENT);
	assert_int_equal(stats(f).aborts, 1);
	/* a BUSY ack after the abort is late: counted, not answered */
	{
		struct vmnap_handoff_ack a = make_ack(id, VMNAP_BUSY, VMNAP_BUSY_CPU);

		guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
		expect_host_quiet(f);
		assert_int_equal(f->ev.handoff_acks, 0);
		assert_int_equal(stats(f).late_acks, 1);
		assert_int_equal(stats(f).rx_errors[VMNAP_ESTATE], 0);
		/* the same ack again is stale */
		guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
		expect_host_error(f, VMNAP_ESTATE);
		assert_int_equal(stats(f).late_acks, 1);
		assert_int_equal(stats(f).stale_acks, 1);
	}
}

static void test_abort_after_ready(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a;
	uint64_t id;

	handshake(f);
	id = handoff(f, VMNAP_HF_OFFLOAD, 500);
	a = make_ack(id, VMNAP_READY, 0);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	assert_int_equal(guest_link_abort(f->gl, id), 0);	/* host will not pause */
	expect_host(f, VMNAP_HANDOFF_ABORT, NULL, 0);
	assert_int_equal(guest_link_resumed(f->gl, id, 1, VMNAP_RESUME_MANUAL, 0),
			 -ENOENT);
}

static void test_deadline_expiry(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_abort ab;
	struct vmnap_handoff_ack a;
	uint64_t id;

	handshake(f);
	id = handoff(f, VMNAP_HF_OFFLOAD, 1);
	run_until_event(f);
	assert_int_equal(f->ev.expired, 1);
	assert_int_equal(f->ev.req_id, id);
	expect_host(f, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	assert_int_equal(vmnap_le64(ab.req_id), id);
	assert_int_equal(stats(f).handoff_expired, 1);
	/* the late READY ack: counted as late, no ERROR; the guest holds its
	 * devices for a handoff given up, so the abort goes out again */
	a = make_ack(id, VMNAP_READY, 0);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	expect_host(f, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	assert_int_equal(vmnap_le64(ab.req_id), id);
	expect_host_quiet(f);
	assert_int_equal(f->ev.handoff_acks, 0);
	assert_int_equal(stats(f).late_acks, 1);
	assert_int_equal(stats(f).stale_acks, 0);
	assert_int_equal(stats(f).rx_errors[VMNAP_ESTATE], 0);
	assert_int_equal(f->ev.disconnects, 0);
	/* a new handoff is possible */
	assert_int_equal(handoff(f, 0, 500), id + 1);
}

static void on_turn(struct loop *l, struct loop_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	loop_stop(l);
}

/* An ack within the deadline: no expiry, even once the deadline passed. */
static void test_ack_in_time_cancels_deadline(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a;
	struct loop_timer later;
	uint64_t id;

	handshake(f);
	id = handoff(f, 0, 1);
	a = make_ack(id, VMNAP_READY, 0);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	/* timers fire in deadline order: a later one stops the loop only
	 * after the handoff deadline would have fired */
	loop_timer_init(&later, on_turn, NULL);
	loop_timer_arm(f->loop, &later, 20 * 1000000ULL);
	assert_int_equal(loop_run(f->loop), 0);
	assert_int_equal(f->ev.expired, 0);
	assert_int_equal(stats(f).handoff_expired, 0);
	expect_host_quiet(f);
	assert_int_equal(guest_link_resumed(f->gl, id, 1, VMNAP_RESUME_TIMER, 0), 0);
}

static void test_stale_acks(void **state)
{
	struct fx *f = *state;
	struct vmnap_handoff_ack a = make_ack(77, VMNAP_READY, 0);
	struct vmnap_resume_ack ra = { .req_id = vmnap_cpu64(1) };
	struct vmnap_error e;
	uint64_t id;

	handshake(f);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));	/* nothing pending */
	expect_host(f, VMNAP_ERROR, &e, sizeof(e));
	assert_int_equal(vmnap_le32(e.code), VMNAP_ESTATE);
	assert_int_equal(vmnap_le32(e.ref_seq), f->guest_seq);
	id = handoff(f, 0, 500);
	a = make_ack(id + 1, VMNAP_READY, 0);			/* wrong id */
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	expect_host_error(f, VMNAP_ESTATE);
	guest_send(f, VMNAP_RESUME_ACK, &ra, sizeof(ra));	/* nothing resumed */
	expect_host_error(f, VMNAP_ESTATE);
	assert_int_equal(stats(f).stale_acks, 3);
	assert_int_equal(stats(f).rx_errors[VMNAP_ESTATE], 3);
	assert_int_equal(f->ev.handoff_acks, 0);
	assert_int_equal(f->ev.resume_acks, 0);
	assert_int_equal(f->ev.disconnects, 0);
	/* the pending request is still answerable */
	a = make_ack(id, VMNAP_READY, 0);
	guest_send(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	assert_int_equal(f->ev.handoff_acks, 1);
}

/* ---- tests: free reports, ping, guest errors ---- */

static void test_free_report(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_free_report) +
				     2 * sizeof(struct vmnap_range)];
	struct vmnap_free_report *fr = (struct vmnap_free_report *)buf;
	struct vmnap_free_report_ack ack;

	handshake(f);
	memset(buf, 0, sizeof(buf));
	fr->batch_id = vmnap_cpu64(31);
	fr->nr_ranges = vmnap_cpu32(2);
	fr->ranges[0].gpa = vmnap_cpu64(GIB);
	fr->ranges[0].len = vmnap_cpu64(8 * PAGE);
	fr->ranges[1].gpa = vmnap_cpu64(5 * GIB);
	fr->ranges[1].len = vmnap_cpu64(PAGE);
	guest_send(f, VMNAP_FREE_REPORT, buf, sizeof(buf));
	assert_int_equal(f->ev.free_reports, 1);
	assert_int_equal(f->ev.batch_id, 31);
	assert_int_equal(f->ev.nr_ranges, 2);
	assert_int_equal(f->ev.ranges[0].gpa, GIB);
	assert_int_equal(f->ev.ranges[0].len, 8 * PAGE);
	assert_int_equal(f->ev.ranges[1].gpa, 5 * GIB);
	expect_host(f, VMNAP_FREE_REPORT_ACK, &ack, sizeof(ack));
	assert_int_equal(vmnap_le64(ack.batch_id), 31);
	assert_int_equal(vmnap_le32(ack.status), VMNAP_FREE_OK);
	/* the owner keeps the pages */
	f->ev.free_status = VMNAP_FREE_IGNORED;
	guest_send(f, VMNAP_FREE_REPORT, buf, sizeof(buf));
	expect_host(f, VMNAP_FREE_REPORT_ACK, &ack, sizeof(ack));
	assert_int_equal(vmnap_le32(ack.status), VMNAP_FREE_IGNORED);
	/* a handler returning nonsense does not reach the wire */
	f->ev.free_status = -5;
	guest_send(f, VMNAP_FREE_REPORT, buf, sizeof(buf));
	expect_host(f, VMNAP_FREE_REPORT_ACK, &ack, sizeof(ack));
	assert_int_equal(vmnap_le32(ack.status), VMNAP_FREE_IGNORED);
	/* a range in the hole between RAM ranges: rejected, no callback */
	fr->ranges[1].gpa = vmnap_cpu64(3 * GIB);
	guest_send(f, VMNAP_FREE_REPORT, buf, sizeof(buf));
	expect_host_error(f, VMNAP_ERANGE);
	assert_int_equal(f->ev.free_reports, 3);
	assert_int_equal(stats(f).free_reports, 3);
	assert_int_equal(stats(f).free_ranges, 6);
	assert_int_equal(stats(f).rx_errors[VMNAP_ERANGE], 1);
}

static void test_free_report_not_negotiated(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];
	_Alignas(8) unsigned char fr_buf[sizeof(struct vmnap_free_report) +
					sizeof(struct vmnap_range)];
	struct vmnap_free_report *fr = (struct vmnap_free_report *)fr_buf;

	guest_send(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_QUIESCE));
	expect_host(f, VMNAP_HELLO_ACK, NULL, 0);
	memset(fr_buf, 0, sizeof(fr_buf));
	fr->batch_id = vmnap_cpu64(1);
	fr->nr_ranges = vmnap_cpu32(1);
	fr->ranges[0].gpa = vmnap_cpu64(GIB);
	fr->ranges[0].len = vmnap_cpu64(PAGE);
	guest_send(f, VMNAP_FREE_REPORT, fr_buf, sizeof(fr_buf));
	expect_host_error(f, VMNAP_ESTATE);
	assert_int_equal(f->ev.free_reports, 0);
}

static void test_ping_and_guest_error(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(0x1234567890ULL) }, pong;
	struct vmnap_error e;

	handshake(f);
	guest_send(f, VMNAP_PING, &ping, sizeof(ping));
	expect_host(f, VMNAP_PONG, &pong, sizeof(pong));
	assert_int_equal(vmnap_le64(pong.token), 0x1234567890ULL);
	/* the host's own PING, answered */
	assert_int_equal(guest_link_ping(f->gl, 9), 0);
	expect_host(f, VMNAP_PING, &pong, sizeof(pong));
	guest_send(f, VMNAP_PONG, &pong, sizeof(pong));
	expect_host_quiet(f);
	assert_int_equal(stats(f).rx_msgs[VMNAP_PONG], 1);
	/* an ERROR from the guest is logged and counted, never answered */
	memset(&e, 0, sizeof(e));
	e.code = vmnap_cpu32(VMNAP_ERANGE);
	e.ref_seq = vmnap_cpu32(3);
	strcpy(e.text, "bad \x01\x7f text");
	guest_send(f, VMNAP_ERROR, &e, sizeof(e));
	guest_send(f, VMNAP_ERROR, &e, sizeof(e));
	expect_host_quiet(f);
	assert_int_equal(stats(f).peer_errors[VMNAP_ERANGE], 2);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
}

/* ---- tests: delivery ---- */

/* A whole session, delivered one byte at a time, behaves the same. */
static void test_byte_at_a_time(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];
	struct vmnap_ping ping = { .token = vmnap_cpu64(3) };
	struct vmnap_handoff_ack a;
	size_t n;
	uint64_t id;

	guest_put(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_ALL));
	guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	n = f->in_len;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(guest_link_rx(f->gl, f->in + i, 1), 0);
		if (i + 1 < n - sizeof(ping) - sizeof(struct vmnap_hdr))
			assert_int_equal(f->ev.hello, 0);
	}
	f->in_len = 0;
	assert_int_equal(f->ev.hello, 1);
	expect_host(f, VMNAP_HELLO_ACK, NULL, 0);
	expect_host(f, VMNAP_PONG, NULL, 0);
	id = handoff(f, 0, 500);
	a = make_ack(id, VMNAP_READY, 0);
	guest_put(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	for (size_t i = 0; i < f->in_len; i++)
		assert_int_equal(guest_link_rx(f->gl, f->in + i, 1), 0);
	f->in_len = 0;
	assert_int_equal(f->ev.handoff_acks, 1);
	assert_int_equal(stats(f).rx_errors[VMNAP_ETRUNC], 0);
}

/* More bytes in one call than the reassembly buffer holds. */
static void test_large_stream(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(1) };
	const unsigned int count = 3000;	/* 72 KB > VMNAP_MAX_MSG */

	handshake(f);
	for (unsigned int i = 0; i < count; i++)
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	assert_true(f->in_len > VMNAP_MAX_MSG);
	assert_int_equal(guest_flush(f), 0);
	for (unsigned int i = 0; i < count; i++)
		expect_host(f, VMNAP_PONG, NULL, 0);
	expect_host_quiet(f);
	assert_int_equal(stats(f).rx_msgs[VMNAP_PING], count);
}

/* A maximal message split over calls, preceded by a skipped one. */
static void test_max_size_message(void **state)
{
	struct fx *f = *state;
	static _Alignas(8) unsigned char big[VMNAP_MAX_PAYLOAD];
	struct vmnap_ping ping = { .token = vmnap_cpu64(8) };

	handshake(f);
	memset(big, 0xa5, sizeof(big));
	guest_put(f, VMNAP_TYPE_MAX + 7, big, 5);	/* odd length: realign */
	guest_put(f, VMNAP_TYPE_MAX + 7, big, sizeof(big));
	guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	assert_int_equal(guest_link_rx(f->gl, f->in, 1000), 0);
	assert_int_equal(guest_link_rx(f->gl, f->in + 1000, f->in_len - 1000), 0);
	f->in_len = 0;
	expect_host_error(f, VMNAP_ETYPE);
	expect_host_error(f, VMNAP_ETYPE);
	expect_host(f, VMNAP_PONG, NULL, 0);
	assert_int_equal(f->ev.disconnects, 0);
}

static void test_partial_sends_queue(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(2) };

	handshake(f);
	f->mode = SEND_EAGAIN;
	for (int i = 0; i < 10; i++)
		guest_send(f, VMNAP_PING, &ping, sizeof(ping));
	expect_host_quiet(f);
	f->mode = SEND_ONE_BYTE;
	guest_link_tx_ready(f->gl);	/* one byte per call until EAGAIN... */
	f->mode = SEND_ALL;
	guest_link_tx_ready(f->gl);
	for (int i = 0; i < 10; i++)
		expect_host(f, VMNAP_PONG, NULL, 0);
	expect_host_quiet(f);
	assert_int_equal(f->ev.disconnects, 0);
}

static void test_send_queue_overflow(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(2) };
	const unsigned int count = GUEST_LINK_TXQ_MAX / 24 + 10;

	handshake(f);
	f->mode = SEND_EAGAIN;	/* the guest never reads */
	for (unsigned int i = 0; i < count; i++)
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	assert_int_equal(guest_flush(f), -ECONNRESET);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -ENOBUFS);
	assert_int_equal(stats(f).tx_overflows, 1);
	assert_int_equal(f->closes, 1);
}

/* No room for the ack: the report is not acted on, the session ends. */
static void test_free_report_no_room_for_ack(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(3) };
	const size_t pong = sizeof(struct vmnap_hdr) + sizeof(ping);
	const size_t ack = sizeof(struct vmnap_hdr) +
			   sizeof(struct vmnap_free_report_ack);
	/* PONGs that leave less room than one ack, without overflowing */
	const unsigned int count = (unsigned int)((GUEST_LINK_TXQ_MAX - ack) / pong + 1);
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_free_report) +
				     sizeof(struct vmnap_range)];
	struct vmnap_free_report *fr = (struct vmnap_free_report *)buf;

	assert_true(count * pong <= GUEST_LINK_TXQ_MAX);
	handshake(f);
	f->mode = SEND_EAGAIN;	/* the guest does not read */
	for (unsigned int i = 0; i < count; i++)
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	assert_int_equal(guest_flush(f), 0);
	assert_int_equal(f->ev.disconnects, 0);
	memset(buf, 0, sizeof(buf));
	fr->batch_id = vmnap_cpu64(7);
	fr->nr_ranges = vmnap_cpu32(1);
	fr->ranges[0].gpa = vmnap_cpu64(GIB);
	fr->ranges[0].len = vmnap_cpu64(PAGE);
	assert_int_equal(guest_send(f, VMNAP_FREE_REPORT, buf, sizeof(buf)),
			 -ECONNRESET);
	assert_int_equal(f->ev.free_reports, 0);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -ENOBUFS);
	assert_int_equal(stats(f).tx_overflows, 1);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_CLOSED);
}

static void test_send_failure(void **state)
{
	struct fx *f = *state;
	uint64_t id;

	handshake(f);
	f->mode = SEND_FAIL;
	assert_int_equal(guest_link_handoff(f->gl, 0, 100, &id), -EPIPE);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -EPIPE);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_CLOSED);
	assert_int_equal(guest_link_rx(f->gl, "x", 1), -ENOTCONN);
}

/* ---- tests: hostile input ---- */

struct hostile_case {
	const char *what;
	unsigned int code;
	bool fatal;
};

/* Apply hostile case @i to a message in f->in; return its description. */
static const struct hostile_case *make_hostile(struct fx *f, unsigned int i)
{
	static const struct hostile_case cases[] = {
		{ "bad magic", VMNAP_EMAGIC, true },
		{ "version", VMNAP_EVERSION, true },
		{ "length over limit", VMNAP_ETOOBIG, true },
		{ "unknown type", VMNAP_ETYPE, false },
		{ "host-only type", VMNAP_ETYPE, false },
		{ "wrong length", VMNAP_ELEN, false },
		{ "count mismatch", VMNAP_ECOUNT, false },
		{ "unaligned range", VMNAP_EALIGN, false },
		{ "zero-length range", VMNAP_EZERO, false },
		{ "overflowing range", VMNAP_EOVERFLOW, false },
		{ "range outside RAM", VMNAP_ERANGE, false },
		{ "READY with busy bits", VMNAP_EFIELD, false },
		{ "cpu idle over 1000", VMNAP_EFIELD, false },
		{ "ERROR text without NUL", VMNAP_EFIELD, false },
	};
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_free_report) +
				     2 * sizeof(struct vmnap_range)];
	struct vmnap_free_report *fr = (struct vmnap_free_report *)buf;
	struct vmnap_ping ping = { .token = 0 };
	struct vmnap_handoff_ack a = make_ack(1, VMNAP_READY, 0);
	struct vmnap_hello_ack ha = { .version = vmnap_cpu16(1) };
	struct vmnap_error e = { .code = vmnap_cpu32(1) };
	struct vmnap_hdr *h = (struct vmnap_hdr *)f->in;

	if (i >= sizeof(cases) / sizeof(cases[0]))
		return NULL;
	memset(buf, 0, sizeof(buf));
	fr->batch_id = vmnap_cpu64(1);
	fr->nr_ranges = vmnap_cpu32(1);
	fr->ranges[0].gpa = vmnap_cpu64(GIB);
	fr->ranges[0].len = vmnap_cpu64(PAGE);
	f->in_len = 0;
	switch (i) {
	case 0:
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
		h->magic = vmnap_cpu32(0xdeadbeef);
		break;
	case 1:
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
		h->version = vmnap_cpu16(VMNAP_PROTO_MAX + 1);
		break;
	case 2:
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
		h->len = vmnap_cpu32(VMNAP_MAX_PAYLOAD + 1);
		break;
	case 3:
		guest_put(f, 0x4242, &ping, sizeof(ping));
		break;
	case 4:
		guest_put(f, VMNAP_HELLO_ACK, &ha, sizeof(ha));
		break;
	case 5:
		guest_put(f, VMNAP_PING, &ping, sizeof(ping) - 1);
		break;
	case 6:
		guest_put(f, VMNAP_FREE_REPORT, buf, sizeof(buf));	/* 1 range + 16 bytes */
		break;
	case 7:
		fr->ranges[0].gpa = vmnap_cpu64(GIB + 512);
		guest_put(f, VMNAP_FREE_REPORT, buf, sizeof(buf) - sizeof(fr->ranges[0]));
		break;
	case 8:
		fr->ranges[0].len = 0;
		guest_put(f, VMNAP_FREE_REPORT, buf, sizeof(buf) - sizeof(fr->ranges[0]));
		break;
	case 9:
		fr->ranges[0].gpa = vmnap_cpu64(~0ULL & ~(PAGE - 1));
		fr->ranges[0].len = vmnap_cpu64(2 * PAGE);
		guest_put(f, VMNAP_FREE_REPORT, buf, sizeof(buf) - sizeof(fr->ranges[0]));
		break;
	case 10:
		fr->ranges[0].gpa = vmnap_cpu64(7 * GIB);
		guest_put(f, VMNAP_FREE_REPORT, buf, sizeof(buf) - sizeof(fr->ranges[0]));
		break;
	case 11:
		a.ev.busy_reasons = vmnap_cpu32(VMNAP_BUSY_CPU);
		guest_put(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
		break;
	case 12:
		a.ev.cpu_idle_permille = vmnap_cpu32(1001);
		guest_put(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
		break;
	case 13:
		memset(e.text, 'z', sizeof(e.text));
		guest_put(f, VMNAP_ERROR, &e, sizeof(e));
		break;
	}
	return &cases[i];
}

/* Every hostile message: ERROR with its code, the counter, and either a
 * disconnect (framing lost) or a skip that leaves the link usable. */
static void test_hostile_messages(void **state)
{
	const struct hostile_case *c;

	(void)state;
	for (unsigned int i = 0; ; i++) {
		struct fx *f = fx_new(0, 0);
		struct vmnap_ping ping = { .token = vmnap_cpu64(99) };
		struct guest_link_stats st;
		int r;

		assert_int_equal(guest_link_set_ram(f->gl, &test_ram), 0);
		assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
		handshake(f);
		c = make_hostile(f, i);
		if (!c) {
			guest_link_free(f->gl);
			loop_free(f->loop);
			free(f);
			break;
		}
		print_message("# hostile: %s\n", c->what);
		/* a valid PING after it, in the same chunk */
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
		r = guest_flush(f);
		expect_host_error(f, c->code);
		st = stats(f);
		assert_int_equal(st.rx_errors[c->code], 1);
		if (c->fatal) {
			assert_int_equal(r, -ECONNRESET);
			assert_int_equal(f->ev.disconnects, 1);
			assert_int_equal(f->ev.disconnect_err, -EPROTO);
			assert_int_equal(f->closes, 1);
			assert_int_equal(st.rx_msgs[VMNAP_PING], 0);
			expect_host_quiet(f);
		} else {
			assert_int_equal(r, 0);
			assert_int_equal(f->ev.disconnects, 0);
			expect_host(f, VMNAP_PONG, NULL, 0);
			assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
		}
		assert_int_equal(f->ev.free_reports, 0);
		assert_int_equal(f->ev.handoff_acks, 0);
		guest_link_free(f->gl);
		loop_free(f->loop);
		free(f);
	}
}

static void test_rate_limit(void **state)
{
	struct fx *f = fx_new(1, 8);	/* 1 message/s, burst 8 */
	struct vmnap_ping ping = { .token = vmnap_cpu64(4) };
	_Alignas(8) unsigned char buf[256];
	unsigned int pongs = 0, t;

	*state = f;
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	guest_put(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_ALL));
	for (int i = 0; i < 40; i++)
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	assert_int_equal(guest_flush(f), -ECONNRESET);
	expect_host(f, VMNAP_HELLO_ACK, NULL, 0);
	while ((t = host_next(f, buf, sizeof(buf))) == VMNAP_PONG)
		pongs++;
	/* the burst went through (plus at most what refilled meanwhile) */
	assert_true(pongs >= 7 && pongs < 39);
	assert_int_equal(t, VMNAP_ERROR);
	assert_int_equal(vmnap_le32(((struct vmnap_error *)buf)->code), VMNAP_ERATE);
	assert_int_equal(stats(f).rx_errors[VMNAP_ERATE], 1);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -EPROTO);
}

/* Garbage larger than any message: dropped at the first header. */
static void test_oversized_stream(void **state)
{
	struct fx *f = *state;
	static unsigned char junk[3 * VMNAP_MAX_MSG];
	uint64_t before;

	handshake(f);
	before = stats(f).rx_bytes;
	memset(junk, 0xff, sizeof(junk));
	assert_int_equal(guest_link_rx(f->gl, junk, sizeof(junk)), -ECONNRESET);
	expect_host_error(f, VMNAP_EMAGIC);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(stats(f).rx_bytes - before, sizeof(junk));
	/* a stream that declares the maximum plus one, header only */
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	f->out_len = f->out_off = 0;
	{
		struct vmnap_hdr h;

		vmnap_hdr_init(&h, VMNAP_HELLO, VMNAP_MAX_PAYLOAD + 1, 1);
		assert_int_equal(guest_link_rx(f->gl, &h, sizeof(h)), -ECONNRESET);
	}
	expect_host_error(f, VMNAP_ETOOBIG);
	assert_int_equal(stats(f).connects, 2);
	assert_int_equal(stats(f).disconnects, 2);
}

static void test_reconnect_resets_session(void **state)
{
	struct fx *f = *state;
	uint64_t id, id2;

	handshake(f);
	id = handoff(f, 0, 500);
	/* the transport starts a new stream: the old session ends */
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -ECONNRESET);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_AWAIT_HELLO);
	assert_null(guest_link_peer(f->gl));
	f->out_len = f->out_off = 0;
	handshake(f);
	id2 = handoff(f, 0, 500);
	assert_true(id2 > id);	/* ids never repeat on a link */
	guest_link_transport_closed(f->gl, -ECONNRESET);
	assert_int_equal(f->ev.disconnects, 2);
	assert_int_equal(f->closes, 1);	/* the transport closed itself */
	guest_link_disconnect(f->gl, -ECONNABORTED);	/* no session: no-op */
	assert_int_equal(f->ev.disconnects, 2);
}

/*
 * The message bucket is the link's, not the session's: a guest that
 * reconnects after spending it gets no new credit (it used to be refilled
 * on every connect, 3.45M messages/s against 1,000/s).
 */
static void test_reconnect_keeps_rate_bucket(void **state)
{
	struct fx *f;
	struct vmnap_ping ping = { .token = vmnap_cpu64(5) };
	_Alignas(8) unsigned char buf[256];
	uint32_t len;

	fx_limits.clock = fake_clock;	/* frozen: nothing refills by itself */
	f = fx_new(1, 8);		/* 1 message/s, burst 8 */
	*state = f;
	assert_int_equal(guest_link_set_ram(f->gl, &test_ram), 0);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	handshake(f);
	for (int i = 0; i < 7; i++) {
		assert_int_equal(guest_send(f, VMNAP_PING, &ping, sizeof(ping)), 0);
		expect_host(f, VMNAP_PONG, NULL, 0);
	}
	/* the bucket is empty: reconnecting does not refill it */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
		f->out_len = f->out_off = 0;
		len = hello_payload(buf, VMNAP_PROTO_MIN, VMNAP_PROTO_MAX, VMNAP_F_ALL);
		assert_int_equal(guest_send(f, VMNAP_HELLO, buf, len), -ECONNRESET);
		expect_host_error(f, VMNAP_ERATE);
		assert_int_equal(f->ev.hello, 1);
	}
	assert_int_equal(stats(f).rx_errors[VMNAP_ERATE], 3);
	/* time refills it: one second, one message */
	fake_ns += 1000000000ULL;
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	f->out_len = f->out_off = 0;
	handshake(f);
	assert_int_equal(guest_send(f, VMNAP_PING, &ping, sizeof(ping)), -ECONNRESET);
	expect_host_error(f, VMNAP_ERATE);
}

/* Connections beyond the link's connection bucket are refused and counted;
 * the session in place stays. */
static void test_reconnect_storm(void **state)
{
	struct fx *f;
	struct vmnap_ping ping = { .token = vmnap_cpu64(6) };
	struct guest_link_stats st;
	unsigned int ok = 0, refused = 0;

	fx_limits.clock = fake_clock;
	fx_limits.connect_per_sec = 2;
	fx_limits.connect_burst = 4;
	f = fx_new(0, 0);
	*state = f;
	assert_int_equal(guest_link_set_ram(f->gl, &test_ram), 0);
	for (int i = 0; i < 1000; i++) {
		int r = guest_link_connect(f->gl, &rec_transport, f);

		if (r == 0)
			ok++;
		else if (r == -EAGAIN)
			refused++;
		else
			fail_msg("connect: %d", r);
	}
	assert_int_equal(ok, 4);
	assert_int_equal(refused, 996);
	st = stats(f);
	assert_int_equal(st.connects, 4);
	assert_int_equal(st.connects_refused, 996);
	assert_int_equal(f->ev.disconnects, 3);	/* each accepted one replaced the last */
	/* the last accepted session is untouched by the refusals */
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_AWAIT_HELLO);
	f->out_len = f->out_off = 0;
	handshake(f);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), -EAGAIN);
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
	assert_int_equal(guest_send(f, VMNAP_PING, &ping, sizeof(ping)), 0);
	expect_host(f, VMNAP_PONG, NULL, 0);
	/* an attached fd over the limit is closed, the session stays */
	{
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(guest_link_attach_fd(f->gl, sv[0]), -EAGAIN);
		assert_int_equal(read(sv[1], &ping, 1), 0);	/* EOF: closed */
		close(sv[1]);
	}
	assert_int_equal(guest_link_state(f->gl), GUEST_LINK_UP);
	assert_int_equal(stats(f).connects_refused, 998);
	/* the bucket refills with time: 2 per second */
	fake_ns += 1000000000ULL;
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), -EAGAIN);
}

/* Run @fn with stderr captured; the number of lines written. */
static unsigned int count_log_lines(void (*fn)(struct fx *), struct fx *f, char *out,
				    size_t cap)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	unsigned int lines = 0;
	size_t n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
	fn(f);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, cap - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	for (size_t i = 0; i < n; i++)
		lines += out[i] == '\n';
	return lines;
}

/* Reconnect 500 times, each session sending garbage: the storm's refusals
 * and the sessions it gets through, with their rejected messages. */
static void storm(struct fx *f)
{
	_Alignas(8) unsigned char junk[64];

	memset(junk, 0xee, sizeof(junk));
	for (int i = 0; i < 500; i++) {
		if (guest_link_connect(f->gl, &rec_transport, f) == 0)
			guest_link_rx(f->gl, junk, sizeof(junk));
		fake_ns += 10000000ULL;		/* 100 connects per second */
	}
}

static void one_more_reject(struct fx *f)
{
	_Alignas(8) unsigned char junk[64];

	memset(junk, 0xee, sizeof(junk));
	fake_ns += 60ULL * 1000000000ULL;
	assert_int_equal(guest_link_connect(f->gl, &rec_transport, f), 0);
	guest_link_rx(f->gl, junk, sizeof(junk));
}

/* What a reconnecting, misbehaving guest makes the link log is bounded:
 * a burst, then one line per interval, and the next line says how many
 * were suppressed. */
static void test_log_volume(void **state)
{
	static char out[1 << 16];
	enum log_level lvl = log_get_level();
	struct fx *f;
	unsigned int lines;

	fx_limits.clock = fake_clock;
	fx_limits.connect_per_sec = 1000;	/* let the storm through */
	fx_limits.connect_burst = 1000;
	fx_limits.log_burst = 10;
	fx_limits.log_interval_ms = 1000;
	f = fx_new(0, 0);
	*state = f;
	log_set_level(LOG_INFO);
	lines = count_log_lines(storm, f, out, sizeof(out));
	/* 500 sessions x 3 lines (connected, rejected, down) without the limit;
	 * 10 + one per second of the 5 s storm with it */
	print_message("# %u lines, %llu suppressed\n", lines,
		      (unsigned long long)stats(f).log_suppressed);
	assert_true(lines >= 10 && lines <= 16);
	assert_int_equal(stats(f).connects, 500);
	assert_int_equal(stats(f).rx_errors[VMNAP_EMAGIC], 500);
	assert_int_equal(stats(f).log_suppressed + lines, 1500);
	/* after a quiet minute the next line carries the summary */
	lines = count_log_lines(one_more_reject, f, out, sizeof(out));
	assert_true(lines >= 1);
	assert_non_null(strstr(out, "similar lines suppressed)"));
	log_set_level(lvl);
}

/* The daemon's wiring: one link per VM, named and numbered after it. */
static void test_vm_attach_detach(void **state)
{
	struct fx *f = fx_new(0, 0);
	struct vmnapd d = { .loop = f->loop };
	struct vm vm = { .d = &d, .id = 42 };
	struct vmnap_hello_ack ha;
	_Alignas(8) unsigned char buf[256];

	*state = f;
	snprintf(vm.name, sizeof(vm.name), "web1");
	snprintf(vm.subject, sizeof(vm.subject), "vm web1");
	assert_int_equal(vm_link_attach(&vm, VMNAP_F_QUIESCE, &test_ops, f), 0);
	assert_non_null(vm.link);
	assert_int_equal(vm_link_attach(&vm, VMNAP_F_QUIESCE, &test_ops, f), -EEXIST);
	assert_int_equal(guest_link_connect(vm.link, &rec_transport, f), 0);
	assert_int_equal(guest_link_rx(vm.link, buf, 0), 0);
	{
		struct guest_link *keep = f->gl;

		f->gl = vm.link;
		guest_send(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_ALL));
		f->gl = keep;
	}
	expect_host(f, VMNAP_HELLO_ACK, &ha, sizeof(ha));
	assert_int_equal(vmnap_le64(ha.vm_id), 42);
	assert_int_equal(vmnap_le32(ha.features), VMNAP_F_QUIESCE);
	assert_int_equal(f->ev.hello, 1);
	/* an owner that goes away first: no more callbacks */
	guest_link_set_ops(vm.link, NULL, NULL);
	guest_link_transport_closed(vm.link, -ECONNRESET);
	assert_int_equal(f->ev.disconnects, 0);
	assert_int_equal(guest_link_connect(vm.link, &rec_transport, f), 0);
	/* detach ends the session through the transport, silently */
	vm_link_detach(&vm);
	assert_null(vm.link);
	assert_int_equal(f->closes, 1);
	vm_link_detach(&vm);	/* no link: no-op */
}

/* ---- tests: socketpair through the vmnapd loop ---- */

static const struct timeval guest_read_timeout = { .tv_sec = 10 };

static int setup_socket(void **state)
{
	struct fx *f = fx_new(0, 0);
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* a missing reply fails the test instead of blocking it */
	assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &guest_read_timeout,
				    sizeof(guest_read_timeout)), 0);
	assert_int_equal(guest_link_set_ram(f->gl, &test_ram), 0);
	assert_int_equal(guest_link_attach_fd(f->gl, sv[0]), 0);
	f->guest_fd = sv[1];
	*state = f;
	return 0;
}

static void sock_write(struct fx *f)
{
	assert_int_equal(write(f->guest_fd, f->in, f->in_len), (ssize_t)f->in_len);
	f->in_len = 0;
}

static void read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* Read one whole host message from the guest end of the socketpair. */
static unsigned int sock_read_msg(struct fx *f, void *payload, size_t cap)
{
	struct vmnap_hdr h;
	uint32_t len;

	read_full(f->guest_fd, &h, sizeof(h));
	assert_int_equal(vmnap_le32(h.magic), VMNAP_MAGIC);
	len = vmnap_le32(h.len);
	assert_true(len <= cap);
	read_full(f->guest_fd, payload, len);
	return vmnap_le16(h.type);
}

static void test_socket_session(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];
	struct vmnap_hello_ack ha;
	struct vmnap_handoff_req req;
	struct vmnap_handoff_ack a;
	uint64_t id;

	guest_put(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_ALL));
	sock_write(f);
	run_until_event(f);
	assert_int_equal(f->ev.hello, 1);
	assert_int_equal(sock_read_msg(f, &ha, sizeof(ha)), VMNAP_HELLO_ACK);
	assert_int_equal(vmnap_le64(ha.vm_id), TEST_VM_ID);

	assert_int_equal(guest_link_handoff(f->gl, VMNAP_HF_OFFLOAD, 5000, &id), 0);
	assert_int_equal(sock_read_msg(f, &req, sizeof(req)), VMNAP_HANDOFF_REQ);
	assert_int_equal(vmnap_le64(req.req_id), id);
	a = make_ack(id, VMNAP_READY, 0);
	guest_put(f, VMNAP_HANDOFF_ACK, &a, sizeof(a));
	sock_write(f);
	run_until_event(f);
	assert_int_equal(f->ev.handoff_acks, 1);
	assert_int_equal(f->ev.verdict, VMNAP_READY);

	/* the guest goes away: the link notices on the loop */
	close(f->guest_fd);
	f->guest_fd = -1;
	run_until_event(f);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -ECONNRESET);
	assert_int_equal(guest_link_resumed(f->gl, id, 1, VMNAP_RESUME_FAILSAFE, 0),
			 -ENOTCONN);
}

static void test_socket_deadline(void **state)
{
	struct fx *f = *state;
	_Alignas(8) unsigned char buf[256];
	uint64_t id;

	guest_put(f, VMNAP_HELLO, buf, hello_payload(buf, 1, 1, VMNAP_F_ALL));
	sock_write(f);
	run_until_event(f);
	assert_int_equal(sock_read_msg(f, buf, sizeof(buf)), VMNAP_HELLO_ACK);
	assert_int_equal(guest_link_handoff(f->gl, 0, 3, &id), 0);
	run_until_event(f);		/* the guest never answers */
	assert_int_equal(f->ev.expired, 1);
	assert_int_equal(f->ev.req_id, id);
	assert_int_equal(sock_read_msg(f, buf, sizeof(buf)), VMNAP_HANDOFF_REQ);
	assert_int_equal(sock_read_msg(f, buf, sizeof(buf)), VMNAP_HANDOFF_ABORT);
	assert_int_equal(vmnap_le64(((struct vmnap_handoff_abort *)buf)->req_id), id);
}

static void test_socket_hostile(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = 1 };
	struct vmnap_error e;
	char c;

	guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	((struct vmnap_hdr *)f->in)->magic = vmnap_cpu32(0x11111111);
	sock_write(f);
	run_until_event(f);
	assert_int_equal(f->ev.disconnects, 1);
	assert_int_equal(f->ev.disconnect_err, -EPROTO);
	/* the guest reads the ERROR, then end of stream: the fd was closed */
	assert_int_equal(sock_read_msg(f, &e, sizeof(e)), VMNAP_ERROR);
	assert_int_equal(vmnap_le32(e.code), VMNAP_EMAGIC);
	assert_int_equal(read(f->guest_fd, &c, 1), 0);
	assert_int_equal(stats(f).rx_errors[VMNAP_EMAGIC], 1);
}

/* The guest does not read: replies queue (EPOLLOUT) and drain later. */
static void test_socket_backpressure(void **state)
{
	struct fx *f = *state;
	struct vmnap_ping ping = { .token = vmnap_cpu64(6) };
	_Alignas(8) unsigned char buf[64];
	const int sndbuf = 4096;
	const unsigned int count = 1500;	/* 36 KB of PONGs */
	unsigned int got = 0;
	int pending = 0;

	setsockopt(f->guest_fd, SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf));
	for (unsigned int i = 0; i < count; i++)
		guest_put(f, VMNAP_PING, &ping, sizeof(ping));
	sock_write(f);
	/* run the loop until the link read everything; the callback-free
	 * path has no event, so poll its counter between loop turns */
	while (stats(f).rx_msgs[VMNAP_PING] < count) {
		loop_timer_arm(f->loop, &f->guard, 1000000);	/* one turn */
		f->guard_fired = false;
		assert_int_equal(loop_run(f->loop), 0);
	}
	/* the socket holds less than all replies: the rest is queued */
	assert_int_equal(ioctl(f->guest_fd, FIONREAD, &pending), 0);
	assert_true((size_t)pending < count * (sizeof(struct vmnap_hdr) + sizeof(ping)));
	/* now read; each read lets the loop push more */
	while (got < count) {
		struct timeval tv = { .tv_sec = 0, .tv_usec = 0 };
		fd_set rd;

		FD_ZERO(&rd);
		FD_SET(f->guest_fd, &rd);
		if (select(f->guest_fd + 1, &rd, NULL, NULL, &tv) > 0) {
			assert_int_equal(sock_read_msg(f, buf, sizeof(buf)), VMNAP_PONG);
			got++;
			continue;
		}
		loop_timer_arm(f->loop, &f->guard, 1000000);
		assert_int_equal(loop_run(f->loop), 0);
	}
	assert_int_equal(f->ev.disconnects, 0);
	assert_int_equal(stats(f).tx_msgs[VMNAP_PONG], count);
	f->guard_fired = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hello, setup_direct, teardown),
		cmocka_unit_test_teardown(test_hello_features_subset, teardown),
		cmocka_unit_test_setup_teardown(test_hello_no_common_version, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_hello_outside_ram, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_before_hello, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_handoff_ready_resume, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_handoff_busy, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_handoff_api_errors, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_abort_after_ready, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_expiry, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_ack_in_time_cancels_deadline, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_stale_acks, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_free_report, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_free_report_not_negotiated, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_free_report_no_room_for_ack, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_ping_and_guest_error, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_byte_at_a_time, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_large_stream, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_max_size_message, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_partial_sends_queue, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_send_queue_overflow, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_send_failure, setup_direct, teardown),
		cmocka_unit_test(test_hostile_messages),
		cmocka_unit_test_teardown(test_rate_limit, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_stream, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_resets_session, setup_direct, teardown),
		cmocka_unit_test_teardown(test_reconnect_keeps_rate_bucket, teardown),
		cmocka_unit_test_teardown(test_reconnect_storm, teardown),
		cmocka_unit_test_teardown(test_log_volume, teardown),
		cmocka_unit_test_teardown(test_vm_attach_detach, teardown),
		cmocka_unit_test_setup_teardown(test_socket_session, setup_socket, teardown),
		cmocka_unit_test_setup_teardown(test_socket_deadline, setup_socket, teardown),
		cmocka_unit_test_setup_teardown(test_socket_hostile, setup_socket, teardown),
		cmocka_unit_test_setup_teardown(test_socket_backpressure, setup_socket, teardown),
	};

	log_set_level(LOG_ERR);
	return cmocka_run_group_tests_name("guest_link", tests, NULL, NULL);
}
