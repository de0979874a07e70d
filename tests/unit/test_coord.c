// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_coord.c - every transition of the wait coordinator (coord.c),
 * including the races, driven by a fake clock and fake actions.
 *
 * The fake world records every action; pause, resume and offload complete
 * only when the test says so (fw.sync makes them complete inside the call).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "coord.h"
#include "log.h"

#define MS	1000000ull
#define SEC	1000000000ull

struct fake {
	uint64_t now, deadline;
	bool link;		/* ops.handoff present */
	bool sync;		/* actions complete inside the call */
	int pause_err, resume_err, offload_err, handoff_err;
	struct coord *c;
	unsigned int handoffs, aborts, pauses, resumes, offloads, resumed_msgs;
	unsigned int cancels;
	int cancel_err;
	unsigned int delivered;
	unsigned int pre_resumes, resumes_before_pre_resume, resume_delivered;
	unsigned int data_windows;
	enum coord_state state_at_data_window;
	enum coord_state state_at_pre_resume;
	uint64_t next_req, last_req, last_abort;
	uint32_t last_flags;
	enum coord_resume_reason last_reason;
	bool last_offloaded;
	uint64_t last_paused_ns, last_latency;
	char trail[512];	/* "RUNNING>WAITING>..." */
	/* the pager's cost view, and what the coordinator decided */
	uint64_t to_write, last_written;
	unsigned int decisions, restores, breakdowns;
	struct coord_decision last_decision;
	enum coord_restore last_restore;
	unsigned int pre_resumes_at_restore;
	struct coord_resume_breakdown last_breakdown;
};

static uint64_t f_now(void *a) { return ((struct fake *)a)->now; }
static void f_arm(void *a, uint64_t t) { ((struct fake *)a)->deadline = t; }

static int f_handoff(void *a, uint32_t flags, uint32_t ms, uint64_t *req)
{
	struct fake *f = a;

	assert_true(ms > 0);
	if (f->handoff_err)
		return f->handoff_err;
	f->handoffs++;
	f->last_flags = flags;
	*req = f->last_req = ++f->next_req;
	return 0;
}

static void f_abort(void *a, uint64_t req) { ((struct fake *)a)->aborts++; ((struct fake *)a)->last_abort = req; }

static void f_resumed(void *a, uint64_t req, uint64_t paused, enum coord_resume_reason r, bool off)
{
	struct fake *f = a;

	f->resumed_msgs++;
	assert_int_equal(req, f->last_req);
	f->last_reason = r;
	f->last_offloaded = off;
	f->last_paused_ns = paused;
}

static int f_pause(void *a)
{
	struct fake *f = a;

	f->pauses++;
	if (f->pause_err)
		return f->pause_err;
	if (f->sync)
		coord_pause_done(f->c, 0);
	return 0;
}

static int f_resume(void *a)
{
	struct fake *f = a;

	f->resumes++;
	if (f->resume_err)
		return f->resume_err;
	if (f->sync)
		coord_resume_done(f->c, 0);
	return 0;
}

static int f_offload(void *a)
{
	struct fake *f = a;

	f->offloads++;
	if (f->offload_err)
		return f->offload_err;
	if (f->sync)
		coord_offload_done(f->c, 0);
	return 0;
}

static int f_offload_cancel(void *a)
{
	struct fake *f = a;

	f->cancels++;
	if (f->cancel_err)
		return f->cancel_err;
	if (f->sync)
		coord_offload_done(f->c, -ECANCELED);
	return 0;
}

static int f_pre_resume(void *a)
{
	struct fake *f = a;

	f->pre_resumes++;
	f->resumes_before_pre_resume = f->resumes;
	f->state_at_pre_resume = coord_state(f->c);
	return 0;
}

static void f_resume_delivered(void *a)
{
	((struct fake *)a)->resume_delivered++;
}

static void f_data_window(void *a)
{
	struct fake *f = a;

	f->data_windows++;
	f->state_at_data_window = coord_state(f->c);
}

static void f_transition(void *a, enum coord_state from, enum coord_state to, const char *why)
{
	struct fake *f = a;
	size_t n = strlen(f->trail);

	(void)from;
	(void)why;
	snprintf(f->trail + n, sizeof(f->trail) - n, "%s%s", n ? ">" : "", coord_state_name(to));
}

static void f_delivered(void *a, const char *id, uint64_t lat)
{
	(void)id;
	((struct fake *)a)->delivered++;
	((struct fake *)a)->last_latency = lat;
}

static int f_offload_bytes(void *a, struct coord_offload_bytes *b)
{
	struct fake *f = a;

	b->to_write = f->to_write;
	b->last_written = f->last_written;
	return 0;
}

static void f_decision(void *a, const struct coord_decision *d)
{
	struct fake *f = a;

	f->decisions++;
	f->last_decision = *d;
}

static void f_restore(void *a, enum coord_restore how)
{
	struct fake *f = a;

	f->restores++;
	f->last_restore = how;
	f->pre_resumes_at_restore = f->pre_resumes;
}

static void f_breakdown(void *a, const struct coord_resume_breakdown *b)
{
	struct fake *f = a;

	f->breakdowns++;
	f->last_breakdown = *b;
}

/* ops_link plus the pager's cost view: the cost profile prices offloads */
static const struct coord_ops ops_cost = {
	.now = f_now, .arm_timer = f_arm, .handoff = f_handoff, .handoff_abort = f_abort,
	.resumed = f_resumed, .pause = f_pause, .resume = f_resume, .offload = f_offload,
	.offload_cancel = f_offload_cancel, .transition = f_transition, .delivered = f_delivered,
	.pre_resume = f_pre_resume, .resume_delivered = f_resume_delivered,
	.offload_bytes = f_offload_bytes, .decision = f_decision, .restore = f_restore,
	.resume_breakdown = f_breakdown,
};

static const struct coord_ops ops_link = {
	.now = f_now, .arm_timer = f_arm, .handoff = f_handoff, .handoff_abort = f_abort,
	.resumed = f_resumed, .pause = f_pause, .resume = f_resume, .offload = f_offload,
	.offload_cancel = f_offload_cancel, .transition = f_transition, .delivered = f_delivered,
	.pre_resume = f_pre_resume, .resume_delivered = f_resume_delivered,
};

/* ops_link plus the window opened for data taken in running */
static const struct coord_ops ops_window = {
	.now = f_now, .arm_timer = f_arm, .handoff = f_handoff, .handoff_abort = f_abort,
	.resumed = f_resumed, .pause = f_pause, .resume = f_resume, .offload = f_offload,
	.offload_cancel = f_offload_cancel, .transition = f_transition, .delivered = f_delivered,
	.pre_resume = f_pre_resume, .resume_delivered = f_resume_delivered,
	.data_window = f_data_window,
};

static struct fake fw;

/* @cfg NULL: the defaults without the wake-path probe, which has tests of
 * its own (every other test would see its extra resume). */
static struct coord *mk_with(bool managed, const struct coord_ops *ops,
			     const struct coord_config *cfg)
{
	struct coord_config def;

	if (!cfg) {
		coord_config_default(&def);
		def.wake_probe = false;
		cfg = &def;
	}
	memset(&fw, 0, sizeof(fw));
	fw.now = 1000 * SEC;	/* far from zero: no accidental "due" */
	fw.deadline = COORD_NO_DEADLINE;
	fw.c = coord_new(cfg, ops, &fw, "vm test");
	assert_non_null(fw.c);
	coord_link_up(fw.c);
	coord_set_managed(fw.c, managed);
	return fw.c;
}

static struct coord *mk(bool managed)
{
	return mk_with(managed, &ops_link, NULL);
}

/* Move the fake clock forward by @ns, firing the timer at its deadlines. */
static void advance(struct coord *c, uint64_t ns)
{
	uint64_t end = fw.now + ns;

	while (fw.deadline != COORD_NO_DEADLINE && fw.deadline <= end) {
		if (fw.deadline > fw.now)
			fw.now = fw.deadline;
		coord_tick(c);
	}
	fw.now = end;
}

static struct coord_evidence ev_budget(uint64_t budget)
{
	return (struct coord_evidence){ .next_timer_ns = budget };
}

static void ack_ready(struct coord *c, uint64_t budget)
{
	struct coord_evidence ev = ev_budget(budget);

	coord_handoff_ack(c, fw.last_req, true, &ev);
}

static void ack_busy(struct coord *c, uint32_t reasons)
{
	struct coord_evidence ev = { .next_timer_ns = COORD_BUDGET_UNKNOWN, .busy_reasons = reasons };

	coord_handoff_ack(c, fw.last_req, false, &ev);
}

/* wait "r1" started, handoff at 20 ms, READY with @budget, paused. */
static struct coord *to_paused(uint64_t budget)
{
	struct coord *c = mk(true);

	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	ack_ready(c, budget);
	assert_int_equal(fw.pauses, 1);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	return c;
}

static void test_defaults(void **s)
{
	struct coord_config cfg;

	(void)s;
	coord_config_default(&cfg);
	assert_int_equal(cfg.handoff_delay_ns, 20 * MS);
	assert_int_equal(cfg.offload_after_ns, 50 * MS);
	assert_int_equal(cfg.offload_min_budget_ns, 1 * SEC);
	assert_int_equal(cfg.offload_cooldown_ns, 5 * SEC);
	assert_true(cfg.kind[COORD_WAIT_MODEL].may_offload);
	assert_false(cfg.kind[COORD_WAIT_NETWORK].may_offload);
	assert_false(cfg.kind[COORD_WAIT_FILE].may_offload);
	assert_true(cfg.kind[COORD_WAIT_FILE].may_pause);
	assert_int_equal(coord_hist_bucket(0), 0);
	assert_int_equal(coord_hist_bucket(1000), 1);
	assert_int_equal(coord_hist_bucket(3000), 2);
	assert_int_equal(coord_wait_kind_parse("network"), COORD_WAIT_NETWORK);
	assert_int_equal(coord_wait_kind_parse("bogus"), -1);
	assert_true(cfg.wake_probe);
}

static void test_unmanaged_never_pauses(void **s)
{
	struct coord *c = mk(false);

	(void)s;
	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	advance(c, 10 * SEC);
	assert_int_equal(fw.handoffs, 0);
	assert_int_equal(fw.pauses, 0);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.last_latency, 0);
	/* enabling with a wait outstanding starts the machine */
	assert_int_equal(coord_wait_start(c, "r2", COORD_WAIT_MODEL, 0), 0);
	coord_set_managed(c, true);
	assert_int_equal(coord_state(c), COORD_WAITING);
	advance(c, 20 * MS);
	assert_int_equal(fw.handoffs, 1);
	coord_free(c);
}

static void test_short_wait_costs_nothing(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 19 * MS);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	advance(c, 1 * SEC);
	assert_int_equal(fw.handoffs, 0);
	assert_int_equal(fw.delivered, 1);
	assert_string_equal(fw.trail, "WAITING>RUNNING");
	coord_free(c);
}

static void test_full_cycle_offload(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	assert_int_equal(fw.last_flags, COORD_HANDOFF_OFFLOAD);
	advance(c, 29 * MS);	/* 49 ms into the wait */
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1 * MS);	/* 50 ms */
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	advance(c, 2 * SEC);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	advance(c, 3 * MS);
	coord_resume_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	assert_int_equal(fw.resumed_msgs, 1);
	assert_int_equal(fw.last_reason, COORD_RESUME_DATA_READY);
	assert_true(fw.last_offloaded);
	assert_int_equal(fw.delivered, 0);	/* not until RESUME_ACK */
	advance(c, 2 * MS);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.last_latency, 5 * MS);
	assert_string_equal(fw.trail,
		"WAITING>HANDOFF>PAUSED>OFFLOADING>OFFLOADED>RESUMING>RUNNING");
	coord_get_stats(c, &st);
	assert_int_equal(st.pauses, 1);
	assert_int_equal(st.offloads, 1);
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_DATA_READY], 1);
	assert_int_equal(st.delivery_hist[coord_hist_bucket(5 * MS)], 1);
	assert_int_equal(fw.deadline, COORD_NO_DEADLINE);
	coord_free(c);
}

/* After an offload the resume-critical pages come back before the VMM
 * resumes; the critical window ends with the delivery (RESUME_ACK). */
static void test_pre_resume_before_vmm_resume(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	assert_int_equal(fw.pre_resumes, 0);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.pre_resumes, 1);
	assert_int_equal(fw.resumes, 1);
	assert_int_equal(fw.resumes_before_pre_resume, 0);	/* VMM still stopped */
	assert_int_equal(fw.state_at_pre_resume, COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.resume_delivered, 0);	/* the guest has not answered */
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.resume_delivered, 1);
	coord_free(c);
}

/*
 * A wait whose delivery the caller confirms (the in-guest agent took the
 * data): the critical window after an offloaded resume lasts until that
 * confirmation, not only until RESUME_ACK, so the pages the guest faults
 * on to take the data in are recorded too.  A confirmation that never
 * comes ends it at the next handoff.
 */
static void confirmed_wait_offloaded(struct coord *c, const char *id, uint64_t budget,
				     uint64_t offload_in)
{
	coord_wait_start(c, id, COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	advance(c, 20 * MS);
	ack_ready(c, budget);
	coord_pause_done(c, 0);
	advance(c, offload_in);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
}

static void test_critical_window_until_confirmed(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	confirmed_wait_offloaded(c, "r1", 10 * SEC, 30 * MS);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.pre_resumes, 1);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.resume_delivered, 0);	/* the agent has not taken it */
	assert_int_equal(fw.delivered, 0);
	advance(c, 4 * MS);
	assert_int_equal(coord_wait_delivered(c, "r1"), 0);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.resume_delivered, 1);

	/* never confirmed: the next handoff ends the window */
	confirmed_wait_offloaded(c, "r2", 30 * SEC, 6 * SEC);	/* past the cooldown */
	coord_wait_start(c, "r3", COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	assert_int_equal(coord_wait_ready(c, "r2"), 0);
	assert_int_equal(fw.pre_resumes, 2);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.resume_delivered, 1);
	advance(c, 20 * MS);	/* r3 outstanding: a new handoff */
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(fw.resume_delivered, 2);
	coord_free(c);
}

/*
 * Data for a confirmed wait that comes while the guest runs between two
 * handoffs of its wait (after an offload, resumed for its own timer): the
 * guest takes it in on the way a data resume takes, so a critical window
 * opens (no pre-resume: the vCPUs run) and ends at the confirmation, or
 * at the next handoff.  Not for a wait the caller does not confirm (the
 * data is delivered at once), not twice, and not while paused (the
 * resume's own window, after its pre-resume).
 */
static void test_data_window_while_running(void **s)
{
	struct coord *c = mk_with(true, &ops_window, NULL);

	(void)s;
	confirmed_wait_offloaded(c, "r1", 2 * SEC, 30 * MS);
	advance(c, 2 * SEC);	/* the guest's timer (less the margin) */
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.resume_delivered, 1);	/* the timer's window */
	assert_int_equal(coord_state(c), COORD_WAITING);
	assert_int_equal(fw.data_windows, 0);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.data_windows, 1);
	assert_int_equal(fw.state_at_data_window, COORD_WAITING);
	assert_int_equal(fw.pre_resumes, 1);	/* the timer's only */
	assert_int_equal(fw.resume_delivered, 1);	/* not taken in yet */
	assert_int_equal(coord_wait_delivered(c, "r1"), 0);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.resume_delivered, 2);

	/* during a handoff the guest has not acknowledged: aborted, opened */
	coord_wait_start(c, "r2", COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	coord_wait_start(c, "r3", COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(coord_wait_ready(c, "r2"), 0);
	assert_int_equal(fw.aborts, 1);
	assert_int_equal(fw.data_windows, 2);
	assert_int_equal(fw.state_at_data_window, COORD_HANDOFF);
	/* one window for both: the second ready wait opens none */
	assert_int_equal(coord_wait_ready(c, "r3"), 0);
	assert_int_equal(fw.data_windows, 2);
	assert_int_equal(coord_wait_delivered(c, "r2"), 0);
	assert_int_equal(fw.resume_delivered, 2);	/* r3 not taken in yet */
	assert_int_equal(coord_wait_delivered(c, "r3"), 0);
	assert_int_equal(fw.resume_delivered, 3);

	/* never confirmed: the next handoff ends it */
	coord_wait_start(c, "r4", COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	coord_wait_start(c, "r5", COORD_WAIT_MODEL, 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	assert_int_equal(coord_wait_ready(c, "r4"), 0);
	assert_int_equal(fw.data_windows, 3);
	advance(c, 20 * MS);	/* r5 outstanding: a new handoff */
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(fw.resume_delivered, 4);

	/* not confirmed: delivered at once, no window */
	ack_ready(c, 10 * SEC);
	coord_pause_done(c, 0);
	coord_wait_delivered(c, "r4");
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_wait_ready(c, "r5"), 0);	/* paused: a resume */
	assert_int_equal(fw.data_windows, 3);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 5);
	coord_wait_start(c, "r6", COORD_WAIT_MODEL, 0);
	assert_int_equal(coord_wait_ready(c, "r6"), 0);
	assert_int_equal(fw.data_windows, 3);
	assert_int_equal(fw.delivered, 6);
	coord_free(c);
}

/* A cancelled offload still left pages out: the restore runs too. */
static void test_pre_resume_after_cancelled_offload(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.cancels, 1);
	assert_int_equal(fw.pre_resumes, 0);
	coord_offload_done(c, -ECANCELED);
	assert_int_equal(fw.pre_resumes, 1);
	assert_int_equal(fw.resumes_before_pre_resume, 0);
	coord_free(c);
}

/* Paused without an offload: nothing to restore, no pre-resume step. */
static void test_no_pre_resume_without_offload(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 10 * MS);	/* 30 ms: before the offload policy */
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(fw.resumes, 1);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.offloads, 0);
	assert_int_equal(fw.pre_resumes, 0);
	assert_int_equal(fw.resume_delivered, 0);
	coord_free(c);
}

static void test_short_wait_pauses_without_offload(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 10 * MS);	/* 30 ms */
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.offloads, 0);
	assert_false(fw.last_offloaded);
	assert_int_equal(fw.delivered, 1);
	coord_free(c);
}

static void test_small_budget_no_offload_timer_resume(void **s)
{
	struct coord *c = to_paused(800 * MS);	/* < 1 s: no offload */
	struct coord_stats st;

	(void)s;
	advance(c, 700 * MS);
	assert_int_equal(fw.offloads, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 50 * MS);	/* 800 - 50 margin */
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	/* the request is still pending: a second handoff follows */
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_resume_ack(c, fw.last_req);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(fw.handoffs, 2);
	coord_get_stats(c, &st);
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_TIMER], 1);
	coord_free(c);
}

static void test_frozen_guest_clock_timer(void **s)
{
	struct coord *c = mk(true);
	struct coord_config cfg = *coord_config(c);

	(void)s;
	cfg.guest_clock_stops = true;	/* QEMU stop/cont */
	coord_set_config(c, &cfg);
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 800 * MS);
	coord_pause_done(c, 0);
	advance(c, 750 * MS);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	/* the guest's clock did not run while paused: it still needs its
	 * 800 ms of running time to reach the timer; no handoff before */
	advance(c, 800 * MS);
	assert_int_equal(fw.handoffs, 1);
	advance(c, 70 * MS);	/* + margin + handoff delay */
	assert_int_equal(fw.handoffs, 2);
	coord_free(c);
}

/*
 * The guest measures its timer budget after the request went out: the
 * resume deadline counts from the request, not from a late ack, for a
 * backend that keeps the guest clock running and for one that stops it
 * (the guest then steps its wall clock on RESUMED).
 */
static void timer_deadline_from_request(bool clock_stops)
{
	struct coord *c = mk(true);
	struct coord_config cfg = *coord_config(c);
	uint64_t t_req;

	cfg.guest_clock_stops = clock_stops;
	coord_set_config(c, &cfg);
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	t_req = fw.now;
	advance(c, 40 * MS);	/* the ack's round trip */
	ack_ready(c, 1 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	/* timer due at t_req + 1 s: resume 50 ms (the margin) before it */
	advance(c, t_req + 950 * MS - 1 - fw.now);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	assert_int_equal(fw.last_paused_ns, 950 * MS - 40 * MS);
	coord_free(c);
}

static void test_timer_deadline_from_request(void **s)
{
	(void)s;
	timer_deadline_from_request(false);
}

static void test_frozen_clock_timer_deadline_from_request(void **s)
{
	(void)s;
	timer_deadline_from_request(true);
}

/* An ack so late that the guest's timer is within the margin: BUSY(TIMER). */
static void test_late_ack_timer_within_margin(void **s)
{
	struct coord *c = mk(true);
	struct coord_stats st;

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	advance(c, 40 * MS);
	ack_ready(c, 80 * MS);	/* due 40 ms from now: inside the 50 ms margin */
	assert_int_equal(fw.pauses, 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_get_stats(c, &st);
	assert_int_equal(st.busy_by_reason[4], 1);	/* VMNAP_BUSY_TIMER */
	coord_free(c);
}

static void test_unknown_budget_failsafe(void **s)
{
	struct coord *c = to_paused(COORD_BUDGET_UNKNOWN);

	(void)s;
	advance(c, 59 * SEC);
	assert_int_equal(fw.offloads, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1 * SEC);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_FAILSAFE);
	coord_free(c);
}

static void test_timer_budget_expires_while_offloaded(void **s)
{
	struct coord *c = to_paused(3 * SEC);

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	advance(c, 2900 * MS);	/* 3 s budget from the ack at 20 ms, 50 ms margin */
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	assert_true(fw.last_offloaded);
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_free(c);
}

static void test_offload_cooldown(void **s)
{
	struct coord *c = to_paused(30 * SEC);

	(void)s;
	advance(c, 30 * MS);
	coord_offload_done(c, 0);
	assert_int_equal(fw.offloads, 1);
	coord_external_event(c);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(coord_state(c), COORD_WAITING);
	advance(c, 20 * MS);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	/* the last offload started ~70 ms ago: wait for the 5 s cooldown */
	advance(c, 4 * SEC);
	assert_int_equal(fw.offloads, 1);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1 * SEC);
	assert_int_equal(fw.offloads, 2);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_free(c);
}

static void test_busy_backoff(void **s)
{
	struct coord *c = mk(true);
	struct coord_stats st;

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_busy(c, 1U << 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	advance(c, 19 * MS);
	assert_int_equal(fw.handoffs, 1);
	advance(c, 1 * MS);	/* 20 ms backoff */
	assert_int_equal(fw.handoffs, 2);
	ack_busy(c, 1U << 2);
	advance(c, 39 * MS);
	assert_int_equal(fw.handoffs, 2);
	advance(c, 1 * MS);	/* 40 ms */
	assert_int_equal(fw.handoffs, 3);
	ack_ready(c, 10 * SEC);	/* READY resets the backoff */
	coord_pause_done(c, 0);
	coord_get_stats(c, &st);
	assert_int_equal(st.handoff_busy, 2);
	assert_int_equal(st.busy_by_reason[0], 1);
	assert_int_equal(st.busy_by_reason[2], 1);
	/* 80 ms into the wait, 10 s budget: offloads at once */
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_free(c);
}

static void test_ack_timeout_and_stale_ack(void **s)
{
	struct coord *c = mk(true);
	struct coord_stats st;
	uint64_t old;

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	old = fw.last_req;
	advance(c, 200 * MS);
	assert_int_equal(coord_state(c), COORD_WAITING);
	assert_int_equal(fw.aborts, 1);
	assert_int_equal(fw.last_abort, old);
	/* a late READY for the aborted request changes nothing */
	ack_ready(c, 10 * SEC);
	assert_int_equal(fw.pauses, 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_get_stats(c, &st);
	assert_int_equal(st.handoff_timeouts, 1);
	coord_free(c);
}

static void test_ready_during_handoff(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_RUNNING);
	assert_int_equal(fw.aborts, 1);
	assert_int_equal(fw.delivered, 1);
	ack_ready(c, 10 * SEC);	/* the guest raced us: ignored */
	assert_int_equal(fw.pauses, 0);
	coord_free(c);
}

static void test_ready_while_pause_in_flight(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 10 * SEC);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	coord_wait_ready(c, "r1");
	assert_int_equal(fw.resumes, 0);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.last_reason, COORD_RESUME_DATA_READY);
	assert_int_equal(fw.delivered, 1);
	assert_string_equal(fw.trail, "WAITING>HANDOFF>PAUSED>RESUMING>RUNNING");
	coord_free(c);
}

static void test_ready_during_offload(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_int_equal(fw.resumes, 0);
	advance(c, 5 * MS);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.last_latency, 5 * MS);
	assert_true(fw.last_offloaded);
	coord_free(c);
}

/* Data ready while OFFLOADING: the offload is cancelled, the VM resumes as
 * soon as the pager reports -ECANCELED (not an error). */
static void test_ready_during_offload_cancels(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_wait_ready(c, "r1");
	assert_int_equal(fw.cancels, 1);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);	/* until it reports */
	assert_int_equal(fw.resumes, 0);
	coord_external_event(c);	/* a second trigger: no second cancel */
	assert_int_equal(fw.cancels, 1);
	advance(c, 1 * MS);
	coord_offload_done(c, -ECANCELED);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(fw.resumes, 1);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_DATA_READY);
	assert_true(fw.last_offloaded);	/* some pages may be out */
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.last_latency, 1 * MS);
	coord_get_stats(c, &st);
	assert_int_equal(st.offload_cancels, 1);
	assert_int_equal(st.offload_errors, 0);
	assert_int_equal(st.offloads, 0);
	assert_string_equal(fw.trail, "WAITING>HANDOFF>PAUSED>OFFLOADING>OFFLOADED>RESUMING>RUNNING");
	coord_free(c);
}

/* Every other resume trigger cancels too; a completion that raced the
 * cancel (0) or a cancel that completes inside the call both resume. */
static void test_triggers_cancel_offload(void **s)
{
	struct coord *c;
	struct coord_stats st;

	(void)s;
	/* external event; the offload ended before the cancel landed */
	c = to_paused(10 * SEC);
	advance(c, 30 * MS);
	fw.cancel_err = -EALREADY;
	assert_int_equal(coord_external_event(c), 0);
	assert_int_equal(fw.cancels, 1);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_EXTERNAL);
	coord_free(c);

	/* manual resume, the cancel completing synchronously */
	c = to_paused(10 * SEC);
	advance(c, 30 * MS);
	fw.sync = true;
	assert_int_equal(coord_manual_resume(c), 0);
	assert_int_equal(fw.cancels, 1);
	assert_int_equal(coord_state(c), COORD_WAITING);	/* resumed, r1 waits */
	assert_int_equal(fw.last_reason, COORD_RESUME_MANUAL);
	coord_get_stats(c, &st);
	assert_int_equal(st.offload_cancels, 1);
	coord_free(c);

	/* fail-safe: guest link lost */
	c = to_paused(10 * SEC);
	advance(c, 30 * MS);
	coord_link_down(c);
	assert_int_equal(fw.cancels, 1);
	coord_offload_done(c, -ECANCELED);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_get_stats(c, &st);	/* no link to tell the reason to */
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_FAILSAFE], 1);
	coord_free(c);

	/* fail-safe: max pause reached while offloading */
	c = to_paused(100 * SEC);
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	advance(c, coord_config(c)->max_pause_ns);
	assert_int_equal(fw.cancels, 1);
	coord_offload_done(c, -ECANCELED);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_FAILSAFE);
	coord_free(c);
}

static void test_ready_during_resume(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	coord_wait_start(c, "r2", COORD_WAIT_MODEL, 0);
	coord_external_event(c);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_wait_ready(c, "r1");	/* while resuming */
	assert_int_equal(fw.resumes, 1);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_EXTERNAL);
	assert_int_equal(coord_state(c), COORD_WAITING);	/* r2 still waits */
	assert_int_equal(fw.delivered, 0);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 1);
	coord_free(c);
}

static void test_link_lost_while_paused(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	coord_link_down(c);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.resumed_msgs, 0);	/* no link to tell */
	assert_int_equal(coord_state(c), COORD_WAITING);
	/* no handoff without the link */
	advance(c, 1 * SEC);
	assert_int_equal(fw.handoffs, 1);
	coord_link_up(c);
	advance(c, 20 * MS);
	assert_int_equal(fw.handoffs, 2);
	coord_free(c);
}

static void test_link_lost_while_offloading(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	advance(c, 30 * MS);
	coord_link_down(c);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_get_stats(c, &st);
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_FAILSAFE], 1);
	coord_free(c);
}

static void test_link_lost_during_handoff(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	coord_link_down(c);
	assert_int_equal(coord_state(c), COORD_WAITING);
	assert_int_equal(fw.pauses, 0);
	coord_free(c);
}

static void test_kind_policy(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "n1", COORD_WAIT_NETWORK, 0);
	advance(c, 20 * MS);
	assert_int_equal(fw.last_flags, 0);	/* no offload intended */
	ack_ready(c, 10 * SEC);
	coord_pause_done(c, 0);
	advance(c, 2 * SEC);
	assert_int_equal(fw.offloads, 0);
	coord_free(c);

	/* a kind that may not even pause: no handoff at all */
	c = mk(true);
	{
		struct coord_config cfg = *coord_config(c);

		cfg.kind[COORD_WAIT_FILE].may_pause = false;
		coord_set_config(c, &cfg);
	}
	coord_wait_start(c, "f1", COORD_WAIT_FILE, 0);
	advance(c, 1 * SEC);
	assert_int_equal(fw.handoffs, 0);
	coord_free(c);
}

/* A network wait beside a model wait: the cycle may pause, never offload,
 * not even under memory pressure; once it ended, the next cycle may. */
static void test_network_wait_never_offloads(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "m1", COORD_WAIT_MODEL, 0);
	coord_wait_start(c, "n1", COORD_WAIT_NETWORK, 0);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(fw.last_flags, 0);	/* no offload intended */
	ack_ready(c, 10 * SEC);
	coord_pause_done(c, 0);
	advance(c, 2 * SEC);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(fw.offloads, 0);
	assert_int_equal(coord_pressure_offload(c), -EPERM);
	assert_int_equal(fw.offloads, 0);
	/* the network data flows: resume; the model wait alone may offload */
	assert_int_equal(coord_wait_ready(c, "n1"), 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	assert_int_equal(fw.last_flags, COORD_HANDOFF_OFFLOAD);
	coord_free(c);
}

static void test_manual_actions(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	assert_int_equal(coord_manual_resume(c), -EALREADY);
	assert_int_equal(coord_manual_offload(c), -EBUSY);
	assert_int_equal(coord_manual_pause(c), 0);
	assert_int_equal(fw.last_flags, 0);
	ack_ready(c, COORD_BUDGET_UNKNOWN);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1 * SEC);	/* stays paused: no wait, no policy offload */
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_manual_pause(c), -EALREADY);
	assert_int_equal(coord_manual_offload(c), 0);
	coord_offload_done(c, 0);
	assert_int_equal(coord_manual_resume(c), 0);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_MANUAL);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	coord_free(c);
}

static void test_manual_pause_without_link(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_link_down(c);
	fw.sync = true;
	assert_int_equal(coord_manual_pause(c), 0);
	assert_int_equal(fw.handoffs, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_manual_resume(c), 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	assert_int_equal(fw.resumed_msgs, 0);
	coord_free(c);
}

static void test_sync_actions(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	fw.sync = true;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 10 * SEC);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_RUNNING);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 1);
	coord_free(c);
}

static void test_pause_failure(void **s)
{
	struct coord *c = mk(true);
	struct coord_stats st;

	(void)s;
	fw.pause_err = -EIO;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 10 * SEC);
	assert_int_equal(coord_state(c), COORD_WAITING);
	assert_int_equal(fw.aborts, 1);	/* the guest unquiesces */
	coord_get_stats(c, &st);
	assert_int_equal(st.pause_errors, 1);
	coord_free(c);
}

static void test_offload_failure_resumes(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	advance(c, 30 * MS);
	coord_offload_done(c, -ENOSPC);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_FAILSAFE);
	coord_get_stats(c, &st);
	assert_int_equal(st.offload_errors, 1);
	coord_free(c);
}

static void test_resume_failure_retries(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	fw.resume_err = -EIO;
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_RESUMING);
	fw.resume_err = 0;
	advance(c, 20 * MS);
	assert_int_equal(fw.resumes, 2);
	coord_resume_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	coord_get_stats(c, &st);
	assert_int_equal(st.resume_errors, 1);
	coord_free(c);
}

static void test_pager_error_while_offloaded(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 30 * MS);
	coord_offload_done(c, 0);
	coord_pager_error(c, -EIO);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_FAILSAFE);
	coord_free(c);
}

/* A pager error (e.g. a fault the store cannot serve) while OFFLOADING:
 * counted, the offload cancelled, fail-safe resume; while running: counted
 * only. */
static void test_pager_error_while_offloading(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	struct coord_stats st;

	(void)s;
	advance(c, 30 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_pager_error(c, -EIO);
	assert_int_equal(fw.cancels, 1);
	coord_offload_done(c, -ECANCELED);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_FAILSAFE);
	coord_pager_error(c, -EIO);	/* running (waiting): nothing to resume */
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_get_stats(c, &st);
	assert_int_equal(st.pager_errors, 2);
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_FAILSAFE], 1);
	coord_free(c);
}

static void test_confirmed_delivery(void **s)
{
	struct coord *c = mk(true);

	(void)s;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, COORD_WAIT_CONFIRM);
	assert_int_equal(coord_wait_delivered(c, "r1"), -EBUSY);
	coord_wait_ready(c, "r1");
	assert_int_equal(fw.delivered, 0);
	advance(c, 7 * MS);
	assert_int_equal(coord_wait_delivered(c, "r1"), 0);
	assert_int_equal(fw.last_latency, 7 * MS);
	assert_int_equal(coord_wait_delivered(c, "r1"), -EALREADY);
	assert_int_equal(coord_wait_delivered(c, "never"), -ENOENT);
	coord_free(c);
}

/* Each wait's state and times, as GET /vms/V/waits[/ID] shows them: a
 * wait ready while paused stays "ready" until the guest has its data. */
static void test_wait_states_and_times(void **s)
{
	struct coord *c = to_paused(10 * SEC);
	uint64_t t0 = fw.now - 20 * MS;	/* to_paused() started r1 20 ms ago */
	struct coord_wait_info wi;
	char id[16];

	(void)s;
	assert_int_equal(coord_wait_get(c, "r1", &wi), 0);
	assert_int_equal(wi.state, COORD_WS_OUTSTANDING);
	assert_int_equal(wi.start_ns, t0);
	assert_int_equal(wi.ready_ns, 0);
	assert_int_equal(wi.end_ns, 0);
	advance(c, 5 * MS);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	assert_int_equal(coord_wait_get(c, "r1", &wi), 0);
	assert_int_equal(wi.state, COORD_WS_READY);
	assert_int_equal(wi.ready_ns, t0 + 25 * MS);
	coord_resume_done(c, 0);
	advance(c, 2 * MS);
	assert_int_equal(coord_wait_get(c, "r1", &wi), 0);
	assert_int_equal(wi.state, COORD_WS_READY);	/* no RESUME_ACK yet */
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(coord_wait_get(c, "r1", &wi), 0);
	assert_int_equal(wi.state, COORD_WS_DELIVERED);
	assert_string_equal(coord_wait_state_name(wi.state), "delivered");
	assert_int_equal(wi.start_ns, t0);
	assert_int_equal(wi.ready_ns, t0 + 25 * MS);
	assert_int_equal(wi.end_ns, t0 + 27 * MS);
	assert_int_equal(coord_nr_waits(c), 0);
	/* the id is free again; its new use is the one shown */
	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_NETWORK, 0), 0);
	assert_int_equal(coord_wait_get(c, "r1", &wi), 0);
	assert_int_equal(wi.state, COORD_WS_OUTSTANDING);
	assert_int_equal(wi.kind, COORD_WAIT_NETWORK);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	/* running: delivered at once; the ended ones are kept COORD_DONE_KEEP deep */
	for (int i = 0; i < COORD_DONE_KEEP; i++) {
		snprintf(id, sizeof(id), "d%d", i);
		assert_int_equal(coord_wait_start(c, id, COORD_WAIT_MODEL, 0), 0);
		assert_int_equal(coord_wait_ready(c, id), 0);
		assert_int_equal(coord_wait_get(c, id, &wi), 0);
		assert_int_equal(wi.state, COORD_WS_DELIVERED);
	}
	assert_int_equal(coord_wait_get(c, "r1", &wi), -ENOENT);	/* pushed out */
	assert_int_equal(coord_wait_get(c, "d0", &wi), 0);
	coord_free(c);
}

static void test_wait_errors(void **s)
{
	struct coord *c = mk(true);
	char id[16];

	(void)s;
	assert_int_equal(coord_wait_start(c, "", COORD_WAIT_MODEL, 0), -EINVAL);
	assert_int_equal(coord_wait_start(c, "x", (enum coord_wait_kind)7, 0), -EINVAL);
	assert_int_equal(coord_wait_start(c, "x", COORD_WAIT_MODEL, 0x80), -EINVAL);
	assert_int_equal(coord_wait_start(c, "x", COORD_WAIT_MODEL, 0), 0);
	assert_int_equal(coord_wait_start(c, "x", COORD_WAIT_MODEL, 0), -EEXIST);
	assert_int_equal(coord_wait_ready(c, "y"), -ENOENT);
	assert_int_equal(coord_wait_ready(c, "x"), 0);
	for (int i = 0; i < COORD_MAX_WAITS; i++) {
		snprintf(id, sizeof(id), "w%d", i);
		assert_int_equal(coord_wait_start(c, id, COORD_WAIT_MODEL, 0), 0);
	}
	assert_int_equal(coord_wait_start(c, "one-too-many", COORD_WAIT_MODEL, 0), -ENOSPC);
	assert_int_equal(coord_nr_waits(c), COORD_MAX_WAITS);
	coord_free(c);
}

static void test_unmanage_while_offloaded(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	advance(c, 30 * MS);
	coord_offload_done(c, 0);
	coord_set_managed(c, false);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	advance(c, 10 * SEC);
	assert_int_equal(fw.handoffs, 1);
	coord_free(c);
}

static void test_missing_resume_ack(void **s)
{
	struct coord *c = to_paused(10 * SEC);

	(void)s;
	coord_wait_ready(c, "r1");
	coord_resume_done(c, 0);
	assert_int_equal(fw.delivered, 0);
	advance(c, 200 * MS);
	assert_int_equal(fw.delivered, 1);	/* delivered anyway, logged */
	coord_free(c);
}

/* ---- the cost profile ---------------------------------------------- */

#define MIB	(1ull << 20)

/* Unmanaged, so nothing pauses: @n model waits of @ms each teach the
 * coordinator how long this VM's model waits last. */
static void learn_waits(struct coord *c, unsigned int n, uint64_t ms)
{
	for (unsigned int i = 0; i < n; i++) {
		char id[16];

		snprintf(id, sizeof(id), "h%u", i);
		assert_int_equal(coord_wait_start(c, id, COORD_WAIT_MODEL, 0), 0);
		advance(c, ms * MS);
		assert_int_equal(coord_wait_ready(c, id), 0);
	}
}

/*
 * A fresh cost-profile VM that has seen @hist_n waits of @hist_ms, with
 * @to_write bytes to offload (the store measured at @bps, 0: not yet), is
 * paused for a new wait with a guest timer @budget away: the decision.
 */
static struct coord_decision decide(unsigned int hist_n, uint64_t hist_ms, uint64_t to_write,
				    uint64_t bps, uint64_t budget)
{
	struct coord_config cfg;
	struct coord *c;
	struct coord_decision d;

	coord_config_default(&cfg);
	cfg.assumed_write_bps = 256 * MIB;	/* a slow store until measured */
	c = mk_with(false, &ops_cost, &cfg);
	learn_waits(c, hist_n, hist_ms);
	if (bps) {	/* one offload of 1 GiB took 1 GiB / bps */
		coord_set_managed(c, true);
		assert_int_equal(coord_manual_pause(c), 0);
		ack_ready(c, 30 * SEC);
		coord_pause_done(c, 0);
		assert_int_equal(coord_manual_offload(c), 0);
		advance(c, (1024 * MIB) * SEC / bps);
		fw.last_written = 1024 * MIB;
		coord_offload_done(c, 0);
		assert_int_equal(coord_manual_resume(c), 0);
		coord_resume_done(c, 0);
		coord_resume_ack(c, fw.last_req);
		coord_set_managed(c, false);
	}
	fw.to_write = to_write;
	fw.decisions = 0;
	coord_set_managed(c, true);
	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	advance(c, 20 * MS);
	ack_ready(c, budget);
	coord_pause_done(c, 0);
	assert_int_equal(fw.decisions, 1);
	d = fw.last_decision;
	assert_int_equal(d.profile, COORD_PROFILE_COST);
	assert_int_equal(coord_state(c) == COORD_OFFLOADING, d.offload);
	coord_free(c);
	return d;
}

static void test_cost_policy_dirty_bytes(void **s)
{
	struct coord_decision d;

	(void)s;
	/* waits last 10 s: 100 MiB at the assumed 256 MiB/s is ~0.4 s: go */
	d = decide(5, 10000, 100 * MIB, 0, 30 * SEC);
	assert_true(d.offload);
	assert_string_equal(d.reason, "cheap");
	assert_string_equal(d.expected_from, "history");
	assert_int_equal(d.samples, 5);
	assert_int_equal(d.expected_rest_ns, 10 * SEC - 20 * MS);
	assert_int_equal(d.write_bytes, 100 * MIB);
	assert_false(d.write_bps_measured);
	assert_int_equal(d.cost_ns, 5 * MS + 100 * MIB * SEC / (256 * MIB));
	/* 1 GiB is 4 s, x4 > 10 s: not yet */
	d = decide(5, 10000, 1024 * MIB, 0, 30 * SEC);
	assert_false(d.offload);
	assert_false(d.final);
	assert_string_equal(d.reason, "cost");
	/* nothing dirty: only the fixed cost */
	d = decide(5, 10000, 0, 0, 30 * SEC);
	assert_true(d.offload);
	assert_int_equal(d.cost_ns, 5 * MS);
}

/*
 * A cost-profile VM with 10 s waits and @to_write bytes to offload, whose
 * guest timer is due 40 ms after the handoff request: inside the 50 ms
 * resume margin, so only the timer slack lets it pause.
 */
static struct coord *slack_cycle(uint64_t slack_ns, uint64_t to_write)
{
	struct coord_config cfg;
	struct coord *c;

	coord_config_default(&cfg);
	cfg.timer_slack_ns = slack_ns;
	c = mk_with(false, &ops_cost, &cfg);
	learn_waits(c, 5, 10000);
	fw.to_write = to_write;
	coord_set_managed(c, true);
	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	ack_ready(c, 40 * MS);
	return c;
}

static void test_timer_slack(void **s)
{
	struct coord_stats st;
	struct coord *c;

	(void)s;
	/* no slack: the timer comes before the pause could, so BUSY(TIMER) */
	c = slack_cycle(0, 1 * MIB);
	assert_int_equal(fw.pauses, 0);
	assert_int_equal(coord_state(c), COORD_WAITING);
	coord_get_stats(c, &st);
	assert_int_equal(st.busy_by_reason[4], 1);
	coord_free(c);

	/* 100 ms of slack: paused, and 1 MiB fits in 40 + 100 - 50 ms */
	c = slack_cycle(100 * MS, 1 * MIB);
	assert_int_equal(fw.pauses, 1);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_true(fw.last_decision.offload);
	assert_int_equal(fw.last_decision.budget_ns, 90 * MS);
	/* the timer's own resume time passes: the offload runs on ... */
	advance(c, 60 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_int_equal(fw.cancels, 0);
	/* ... and once it is done the VM resumes for the timer at once */
	coord_offload_done(c, 0);
	advance(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	coord_resume_done(c, 0);
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	assert_true(fw.last_offloaded);
	coord_free(c);

	/* an offload still running when the slack is spent is cancelled */
	c = slack_cycle(100 * MS, 1 * MIB);
	coord_pause_done(c, 0);
	advance(c, 89 * MS);
	assert_int_equal(fw.cancels, 0);
	advance(c, 1 * MS);
	assert_int_equal(fw.cancels, 1);
	coord_free(c);

	/* too much to write even with the slack: no offload, resumed on time */
	c = slack_cycle(100 * MS, 512 * MIB);
	coord_pause_done(c, 0);
	assert_false(fw.last_decision.offload);
	assert_true(fw.last_decision.final);
	assert_string_equal(fw.last_decision.reason, "budget");
	advance(c, 0);
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(fw.offloads, 0);
	coord_free(c);
}

static void test_cost_policy_store_speed(void **s)
{
	struct coord_decision d;

	(void)s;
	/* 1 GiB to write: too slow at the assumed 256 MiB/s ... */
	d = decide(5, 10000, 1024 * MIB, 0, 30 * SEC);
	assert_false(d.offload);
	/* ... cheap once the store was measured at 2 GiB/s */
	d = decide(5, 10000, 1024 * MIB, 2048 * MIB, 30 * SEC);
	assert_true(d.write_bps_measured);
	assert_int_equal(d.write_bps, 2048 * MIB);
	assert_true(d.offload);
	/* and not when it was measured slower than assumed */
	d = decide(5, 10000, 300 * MIB, 64 * MIB, 30 * SEC);
	assert_false(d.offload);
	assert_string_equal(d.reason, "cost");
}

static void test_cost_policy_expected_wait(void **s)
{
	struct coord_decision d;

	(void)s;
	/* the same 100 MiB is not worth it when this VM's waits last 1 s */
	d = decide(5, 1000, 100 * MIB, 0, 30 * SEC);
	assert_false(d.offload);
	assert_string_equal(d.reason, "cost");
	assert_int_equal(d.expected_rest_ns, 1 * SEC - 20 * MS);
	/* no history: the prior (2 s) */
	d = decide(0, 0, 100 * MIB, 0, 30 * SEC);
	assert_true(d.offload);
	assert_string_equal(d.expected_from, "prior");
	assert_int_equal(d.expected_rest_ns, 2 * SEC - 20 * MS);
	/* every wait seen was shorter than this one is already: as long again */
	d = decide(3, 10, 1 * MIB, 0, 30 * SEC);
	assert_string_equal(d.expected_from, "age");
	assert_int_equal(d.expected_rest_ns, 20 * MS);
	assert_false(d.offload);	/* ~9 ms x 4 > 20 ms */
	/* the guest's timer comes before the offload could end: final no */
	d = decide(5, 10000, 1024 * MIB, 2048 * MIB, 400 * MS);
	assert_false(d.offload);
	assert_true(d.final);
	assert_string_equal(d.reason, "budget");
}

/* A managed cost-profile VM with @to_write bytes to offload is paused for
 * a new model wait with a guest timer @budget away: its first decision. */
static void pause_wait(struct coord *c, uint64_t to_write, uint64_t budget)
{
	fw.to_write = to_write;
	coord_set_managed(c, true);
	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	advance(c, 20 * MS);
	ack_ready(c, budget);
	coord_pause_done(c, 0);
}

/* "Not yet" is asked again as the wait ages: a long wait gets its offload. */
static void test_cost_policy_recheck(void **s)
{
	struct coord *c = mk_with(false, &ops_cost, NULL);

	(void)s;
	learn_waits(c, 3, 1000);
	learn_waits(c, 3, 30000);	/* 1 s or 30 s */
	fw.decisions = 0;
	/* ~0.3 s at 1 GiB/s: x4 > the median rest (1 s) */
	pause_wait(c, 300 * MIB, 50 * SEC);
	assert_string_equal(fw.last_decision.reason, "cost");
	assert_int_equal(coord_state(c), COORD_PAUSED);
	/* past 1 s only the 30 s waits are left: offload */
	advance(c, 1500 * MS);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_string_equal(fw.last_decision.reason, "cheap");
	assert_true(fw.decisions >= 3);
	coord_free(c);
}

/*
 * A pre-copy that ends while the VM is paused makes the offload cheap:
 * the put-off decision is asked again at once, not at twice the wait's
 * age; and a final "budget" refusal is asked again too.
 */
static void test_cost_policy_estimate_changed(void **s)
{
	struct coord *c = mk_with(false, &ops_cost, NULL);
	unsigned int n;

	(void)s;
	learn_waits(c, 3, 1000);
	learn_waits(c, 3, 30000);
	/* outside a pause: nothing to decide */
	coord_set_managed(c, true);
	fw.decisions = 0;
	coord_offload_estimate_changed(c);
	assert_int_equal(fw.decisions, 0);
	pause_wait(c, 300 * MIB, 50 * SEC);	/* x4 > the median rest: not yet */
	assert_string_equal(fw.last_decision.reason, "cost");
	assert_false(fw.last_decision.final);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	/* the estimate did not change: asked again, still not yet */
	n = fw.decisions;
	coord_offload_estimate_changed(c);
	assert_int_equal(fw.decisions, n + 1);
	assert_string_equal(fw.last_decision.reason, "cost");
	assert_int_equal(coord_state(c), COORD_PAUSED);
	/* the pre-copy wrote it: offload now, with no time gone by */
	fw.to_write = 1 * MIB;
	coord_offload_estimate_changed(c);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_string_equal(fw.last_decision.reason, "cheap");
	assert_true(fw.last_decision.offload);
	/* offloading already: no decision */
	n = fw.decisions;
	coord_offload_estimate_changed(c);
	assert_int_equal(fw.decisions, n);
	coord_free(c);

	/* "budget": the guest's timer (400 ms away) comes before 1 GiB is
	 * written; once the pre-copy wrote it, the offload fits */
	c = mk_with(false, &ops_cost, NULL);
	learn_waits(c, 3, 30000);
	pause_wait(c, 1024 * MIB, 400 * MS);
	assert_string_equal(fw.last_decision.reason, "budget");
	assert_true(fw.last_decision.final);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	fw.to_write = 0;
	coord_offload_estimate_changed(c);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_string_equal(fw.last_decision.reason, "cheap");
	coord_free(c);
}

/* The seed profile decides as the fixed rule did (test_full_cycle_offload,
 * test_offload_cooldown), whatever the pager's estimate. */
static void test_seed_profile(void **s)
{
	struct coord_config cfg;
	struct coord *c;

	(void)s;
	coord_config_default(&cfg);
	cfg.profile = COORD_PROFILE_SEED;
	c = mk_with(true, &ops_cost, &cfg);
	fw.to_write = 0;	/* the cost profile would offload at once */
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(fw.decisions, 1);
	assert_int_equal(fw.last_decision.profile, COORD_PROFILE_SEED);
	assert_true(fw.last_decision.offload);
	assert_int_equal(fw.last_decision.at_ns, fw.now + 30 * MS);
	advance(c, 29 * MS);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(c, 1 * MS);	/* 50 ms into the wait */
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	coord_external_event(c);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
	advance(c, 20 * MS);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	assert_string_equal(fw.last_decision.reason, "cooldown");
	advance(c, 4 * SEC);
	assert_int_equal(fw.offloads, 1);
	advance(c, 1 * SEC);
	assert_int_equal(fw.offloads, 2);
	coord_free(c);
	/* a 1 s budget is the seed's minimum */
	c = mk_with(true, &ops_cost, &cfg);
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 800 * MS);
	coord_pause_done(c, 0);
	assert_false(fw.last_decision.offload);
	assert_string_equal(fw.last_decision.reason, "budget");
	coord_free(c);
}

/*
 * A resume for the guest's timer restores lazily, but after an offload its
 * resume-critical pages come back before the VMM resumes as for any resume
 * (the guest's way to RESUME_ACK is the same), and its critical window ends
 * with the RESUME_ACK; the VM is paused and offloaded again right away (no
 * cooldown); the data resume restores by the VM's policy.
 */
static void test_timer_resume_lazy(void **s)
{
	struct coord_config cfg;
	struct coord *c;
	struct coord_stats st;

	(void)s;
	coord_config_default(&cfg);
	c = mk_with(true, &ops_cost, &cfg);
	fw.to_write = 64 * MIB;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 2 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
	advance(c, 2 * SEC);	/* the guest's timer (less the margin) */
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(fw.last_restore, COORD_RESTORE_LAZY);
	assert_int_equal(fw.pre_resumes, 1);
	assert_int_equal(fw.pre_resumes_at_restore, 0);	/* told lazy before */
	assert_int_equal(fw.resumes_before_pre_resume, 0);	/* VMM still stopped */
	coord_resume_done(c, 0);
	assert_int_equal(fw.resume_delivered, 0);	/* the guest has not answered */
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.resume_delivered, 1);
	assert_int_equal(fw.delivered, 0);	/* nothing to deliver: r1 waits on */
	assert_int_equal(fw.last_breakdown.reason, COORD_RESUME_TIMER);
	assert_int_equal(fw.last_breakdown.restore, COORD_RESTORE_LAZY);
	/* the timer dirtied 1 MiB: paused and offloaded again at once */
	fw.to_write = 1 * MIB;
	advance(c, 20 * MS);
	ack_ready(c, 2 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(fw.offloads, 2);
	assert_int_equal(fw.last_decision.write_bytes, 1 * MIB);
	coord_offload_done(c, 0);
	coord_wait_ready(c, "r1");
	assert_int_equal(fw.last_restore, COORD_RESTORE_POLICY);
	assert_int_equal(fw.pre_resumes, 2);
	assert_int_equal(fw.pre_resumes_at_restore, 1);	/* told before */
	coord_get_stats(c, &st);
	assert_int_equal(st.resumes_lazy, 1);
	coord_free(c);
}

/* Every resume, phase by phase. */
static void test_resume_breakdown(void **s)
{
	struct coord *c = mk_with(true, &ops_cost, NULL);

	(void)s;
	fw.to_write = 0;
	coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	coord_offload_done(c, 0);
	advance(c, 1 * SEC);
	coord_wait_ready(c, "r1");
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(fw.breakdowns, 0);
	advance(c, 3 * MS);
	coord_resume_done(c, 0);
	assert_int_equal(fw.breakdowns, 0);	/* until RESUME_ACK */
	advance(c, 7 * MS);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.breakdowns, 1);
	assert_true(fw.last_breakdown.acked);
	assert_true(fw.last_breakdown.offloaded);
	assert_true(fw.last_breakdown.resumed_sent);
	assert_int_equal(fw.last_breakdown.reason, COORD_RESUME_DATA_READY);
	assert_int_equal(fw.last_breakdown.restore, COORD_RESTORE_POLICY);
	assert_int_equal(fw.last_breakdown.pre_resume_ns, 0);
	assert_int_equal(fw.last_breakdown.vmm_ns, 3 * MS);
	assert_int_equal(fw.last_breakdown.resumed_ns, 0);
	assert_int_equal(fw.last_breakdown.ack_ns, 7 * MS);
	assert_int_equal(fw.last_breakdown.total_ns, 10 * MS);
	/* no RESUME_ACK: it ends at the ack timeout, not acknowledged */
	coord_wait_start(c, "r2", COORD_WAIT_MODEL, 0);
	advance(c, 20 * MS);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	coord_offload_done(c, 0);
	coord_wait_ready(c, "r2");
	coord_resume_done(c, 0);
	advance(c, 300 * MS);
	assert_int_equal(fw.breakdowns, 2);
	assert_false(fw.last_breakdown.acked);
	assert_int_equal(fw.last_breakdown.total_ns, 200 * MS);
	coord_free(c);
}

/* A waiting VM handed off after 20 ms, READY with a 30 s budget, paused,
 * and (the cost view: nothing to write) offloaded. */
static void handoff_offload(struct coord *c)
{
	advance(c, 20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	coord_offload_done(c, 0);
}

/* Wait @id, then handoff_offload(). */
static void offload_cycle(struct coord *c, const char *id)
{
	assert_int_equal(coord_wait_start(c, id, COORD_WAIT_MODEL, 0), 0);
	handoff_offload(c);
}

/* A new VM with @probe, the cost view, after its first offload cycle. */
static struct coord *first_offload(bool probe)
{
	struct coord_config cfg;
	struct coord *c;

	coord_config_default(&cfg);
	cfg.wake_probe = probe;
	c = mk_with(true, &ops_cost, &cfg);
	fw.to_write = 0;
	offload_cycle(c, "r1");
	return c;
}

/* The wait that ended delivered: resume from the offload and acknowledge. */
static void data_resume(struct coord *c, const char *id)
{
	coord_wait_ready(c, id);
	coord_resume_done(c, 0);
	coord_resume_ack(c, fw.last_req);
}

/*
 * The first offload of a VM whose wake path was never recorded resumes it
 * at once, as for a guest timer (lazy restore, pre-resume first), once;
 * the guest is paused and offloaded again by the usual handoff, and no
 * later offload probes again.
 */
static void test_wake_probe_once(void **s)
{
	struct coord *c = first_offload(true);
	struct coord_stats st;

	(void)s;
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(fw.last_restore, COORD_RESTORE_LAZY);
	assert_int_equal(fw.pre_resumes, 1);
	assert_int_equal(fw.resumes_before_pre_resume, 0);
	coord_resume_done(c, 0);
	assert_int_equal(coord_state(c), COORD_WAITING);	/* r1 still outstanding */
	assert_int_equal(fw.last_reason, COORD_RESUME_TIMER);
	assert_true(fw.last_offloaded);
	advance(c, 4 * MS);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.breakdowns, 1);
	assert_true(fw.last_breakdown.probe);
	assert_true(fw.last_breakdown.acked);
	assert_int_equal(fw.resume_delivered, 1);	/* the window was recorded */
	coord_get_stats(c, &st);
	assert_int_equal(st.wake_probes, 1);
	assert_int_equal(st.resumes_by_reason[COORD_RESUME_TIMER], 1);
	/* paused and offloaded again: this time it stays offloaded */
	handoff_offload(c);
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	data_resume(c, "r1");
	assert_false(fw.last_breakdown.probe);
	assert_int_equal(fw.last_breakdown.reason, COORD_RESUME_DATA_READY);
	assert_int_equal(fw.delivered, 1);
	/* a later wait's offload: no probe */
	offload_cycle(c, "r2");
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	coord_get_stats(c, &st);
	assert_int_equal(st.wake_probes, 1);
	assert_string_equal(fw.trail,
		"WAITING>HANDOFF>PAUSED>OFFLOADING>OFFLOADED>RESUMING>WAITING>"
		"HANDOFF>PAUSED>OFFLOADING>OFFLOADED>RESUMING>RUNNING>"
		"WAITING>HANDOFF>PAUSED>OFFLOADING>OFFLOADED");
	coord_free(c);
}

/* Data ready during the probe is delivered at its RESUME_ACK; a probe the
 * guest never acknowledged is not tried again. */
static void test_wake_probe_data_ready_and_no_retry(void **s)
{
	struct coord *c = first_offload(true);
	struct coord_stats st;

	(void)s;
	assert_int_equal(coord_state(c), COORD_RESUMING);
	assert_int_equal(coord_wait_ready(c, "r1"), 0);
	coord_resume_done(c, 0);
	assert_int_equal(coord_state(c), COORD_RUNNING);
	assert_int_equal(fw.delivered, 0);
	advance(c, 2 * MS);
	coord_resume_ack(c, fw.last_req);
	assert_int_equal(fw.delivered, 1);
	assert_int_equal(fw.last_latency, 2 * MS);
	coord_free(c);

	c = first_offload(true);
	coord_resume_done(c, 0);
	advance(c, 300 * MS);	/* no RESUME_ACK: delivered anyway, re-paused */
	assert_false(fw.last_breakdown.acked);
	assert_true(fw.last_breakdown.probe);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	coord_get_stats(c, &st);
	assert_int_equal(st.wake_probes, 1);
	coord_free(c);
}

/* No probe when it is off, or after a resume from an offload was
 * acknowledged (the pager has the wake path), or in a manual pause. */
static void test_wake_probe_not_needed(void **s)
{
	struct coord_config cfg;
	struct coord *c = first_offload(false);

	(void)s;
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	/* learned from the data resume the probe was switched off for */
	data_resume(c, "r1");
	cfg = *coord_config(c);
	cfg.wake_probe = true;
	coord_set_config(c, &cfg);
	offload_cycle(c, "r2");
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	coord_free(c);

	/* a manual pause and offload stays offloaded */
	c = mk_with(true, &ops_cost, &cfg);
	assert_int_equal(coord_manual_pause(c), 0);
	ack_ready(c, 30 * SEC);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_manual_offload(c), 0);
	coord_offload_done(c, 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADED);
	assert_int_equal(fw.resumes, 0);
	coord_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_unmanaged_never_pauses),
		cmocka_unit_test(test_short_wait_costs_nothing),
		cmocka_unit_test(test_full_cycle_offload),
		cmocka_unit_test(test_wake_probe_once),
		cmocka_unit_test(test_wake_probe_data_ready_and_no_retry),
		cmocka_unit_test(test_wake_probe_not_needed),
		cmocka_unit_test(test_pre_resume_before_vmm_resume),
		cmocka_unit_test(test_critical_window_until_confirmed),
		cmocka_unit_test(test_data_window_while_running),
		cmocka_unit_test(test_pre_resume_after_cancelled_offload),
		cmocka_unit_test(test_no_pre_resume_without_offload),
		cmocka_unit_test(test_short_wait_pauses_without_offload),
		cmocka_unit_test(test_small_budget_no_offload_timer_resume),
		cmocka_unit_test(test_frozen_guest_clock_timer),
		cmocka_unit_test(test_unknown_budget_failsafe),
		cmocka_unit_test(test_timer_budget_expires_while_offloaded),
		cmocka_unit_test(test_offload_cooldown),
		cmocka_unit_test(test_busy_backoff),
		cmocka_unit_test(test_ack_timeout_and_stale_ack),
		cmocka_unit_test(test_ready_during_handoff),
		cmocka_unit_test(test_ready_while_pause_in_flight),
		cmocka_unit_test(test_ready_during_offload),
		cmocka_unit_test(test_ready_during_offload_cancels),
		cmocka_unit_test(test_triggers_cancel_offload),
		cmocka_unit_test(test_ready_during_resume),
		cmocka_unit_test(test_link_lost_while_paused),
		cmocka_unit_test(test_link_lost_while_offloading),
		cmocka_unit_test(test_link_lost_during_handoff),
		cmocka_unit_test(test_kind_policy),
		cmocka_unit_test(test_manual_actions),
		cmocka_unit_test(test_manual_pause_without_link),
		cmocka_unit_test(test_sync_actions),
		cmocka_unit_test(test_pause_failure),
		cmocka_unit_test(test_offload_failure_resumes),
		cmocka_unit_test(test_resume_failure_retries),
		cmocka_unit_test(test_pager_error_while_offloaded),
		cmocka_unit_test(test_pager_error_while_offloading),
		cmocka_unit_test(test_confirmed_delivery),
		cmocka_unit_test(test_wait_errors),
		cmocka_unit_test(test_unmanage_while_offloaded),
		cmocka_unit_test(test_wait_states_and_times),
		cmocka_unit_test(test_network_wait_never_offloads),
		cmocka_unit_test(test_missing_resume_ack),
		cmocka_unit_test(test_timer_deadline_from_request),
		cmocka_unit_test(test_frozen_clock_timer_deadline_from_request),
		cmocka_unit_test(test_late_ack_timer_within_margin),
		cmocka_unit_test(test_cost_policy_dirty_bytes),
		cmocka_unit_test(test_cost_policy_store_speed),
		cmocka_unit_test(test_cost_policy_expected_wait),
		cmocka_unit_test(test_cost_policy_recheck),
		cmocka_unit_test(test_cost_policy_estimate_changed),
		cmocka_unit_test(test_timer_slack),
		cmocka_unit_test(test_seed_profile),
		cmocka_unit_test(test_timer_resume_lazy),
		cmocka_unit_test(test_resume_breakdown),
	};

	log_set_level(LOG_WARN);
	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
