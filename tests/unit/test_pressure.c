// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_pressure.c - host memory pressure drives the coordinators: readings
 * through the pure policy (pressure.c) into several coordinators (coord.c)
 * on one fake clock, the way vm/pressure_watch.c wires them.
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
#include "pressure.h"

#define MS	1000000ull
#define SEC	1000000000ull
#define MiB	(1024ull * 1024)
#define NVM	4

struct fvm {
	struct coord *c;
	uint64_t deadline;
	uint64_t resident;
	uint64_t req;
	unsigned int offloads;
};

static struct {
	uint64_t now;
	struct fvm vm[NVM];
	char order[64];		/* VM indexes in the order they offloaded */
	enum pressure_level level;
	struct pressure_config cfg;
} w;

static uint64_t f_now(void *a) { (void)a; return w.now; }
static void f_arm(void *a, uint64_t t) { ((struct fvm *)a)->deadline = t; }

static int f_handoff(void *a, uint32_t flags, uint32_t ms, uint64_t *req)
{
	(void)flags;
	(void)ms;
	*req = ++((struct fvm *)a)->req;
	return 0;
}

static void f_abort(void *a, uint64_t req) { (void)a; (void)req; }
static void f_resumed(void *a, uint64_t req, uint64_t p, enum coord_resume_reason r, bool o)
{
	(void)a; (void)req; (void)p; (void)r; (void)o;
}
static int f_pause(void *a) { (void)a; return 0; }
static int f_resume(void *a) { (void)a; return 0; }

static int f_offload(void *a)
{
	struct fvm *v = a;
	size_t n = strlen(w.order);

	v->offloads++;
	snprintf(w.order + n, sizeof(w.order) - n, "%d", (int)(v - w.vm));
	return 0;	/* completes when the test says so */
}

static const struct coord_ops ops = {
	.now = f_now, .arm_timer = f_arm, .handoff = f_handoff, .handoff_abort = f_abort,
	.resumed = f_resumed, .pause = f_pause, .resume = f_resume, .offload = f_offload,
};

static void setup_world(void)
{
	memset(&w, 0, sizeof(w));
	w.now = 1000 * SEC;
	pressure_config_default(&w.cfg);
	for (int i = 0; i < NVM; i++) {
		w.vm[i].deadline = COORD_NO_DEADLINE;
		w.vm[i].c = coord_new(NULL, &ops, &w.vm[i], "vm test");
		assert_non_null(w.vm[i].c);
		coord_link_up(w.vm[i].c);
		coord_set_managed(w.vm[i].c, true);
	}
}

static void free_world(void)
{
	for (int i = 0; i < NVM; i++)
		coord_free(w.vm[i].c);
}

static void advance(uint64_t ns)
{
	uint64_t end = w.now + ns;

	for (;;) {
		uint64_t t = COORD_NO_DEADLINE;
		int first = -1;

		for (int i = 0; i < NVM; i++)
			if (w.vm[i].deadline < t) {
				t = w.vm[i].deadline;
				first = i;
			}
		if (first < 0 || t > end)
			break;
		if (t > w.now)
			w.now = t;
		coord_tick(w.vm[first].c);
	}
	w.now = end;
}

/* VM @i: a model wait, handed off after 20 ms, READY with @budget, paused. */
static void pause_vm(int i, uint64_t budget)
{
	struct coord *c = w.vm[i].c;
	struct coord_evidence ev = { .next_timer_ns = budget };

	assert_int_equal(coord_wait_start(c, "r1", COORD_WAIT_MODEL, 0), 0);
	advance(20 * MS);
	assert_int_equal(coord_state(c), COORD_HANDOFF);
	coord_handoff_ack(c, w.vm[i].req, true, &ev);
	coord_pause_done(c, 0);
}

/* One sample, as vm/pressure_watch.c takes it every interval. */
static void sample(uint64_t usage_mib, uint64_t limit_mib)
{
	struct pressure_reading r = {
		.has_usage = true,
		.usage_bytes = usage_mib * MiB,
		.limit_bytes = limit_mib * MiB,
	};
	struct pressure_candidate cand[NVM];
	size_t n = 0;

	w.level = pressure_next_level(&w.cfg, w.level, &r);
	for (int i = 0; i < NVM; i++)
		coord_set_pressure_caps(w.vm[i].c, pressure_caps(&w.cfg, w.level));
	if (w.level < PRESSURE_CRITICAL)
		return;
	for (int i = 0; i < NVM; i++) {
		if (coord_state(w.vm[i].c) == COORD_OFFLOADING)
			return;	/* one at a time */
		if (coord_state(w.vm[i].c) == COORD_PAUSED)
			cand[n++] = (struct pressure_candidate){
				.resident_bytes = w.vm[i].resident,
				.expected_wait_ns = coord_expected_wait_ns(w.vm[i].c),
				.index = (unsigned int)i,
			};
	}
	pressure_order(cand, n);
	for (size_t k = 0; k < n; k++)
		if (coord_pressure_offload(w.vm[cand[k].index].c) == 0)
			return;
}

static void test_levels_and_hysteresis(void **s)
{
	struct pressure_config cfg;
	struct pressure_reading r = { .has_usage = true, .limit_bytes = 1000 };
	enum pressure_level l = PRESSURE_NORMAL;
	static const struct {
		uint64_t usage;
		enum pressure_level want;
	} steps[] = {
		{ 700, PRESSURE_NORMAL },
		{ 799, PRESSURE_NORMAL },
		{ 800, PRESSURE_ELEVATED },
		{ 899, PRESSURE_ELEVATED },
		{ 900, PRESSURE_CRITICAL },
		{ 870, PRESSURE_CRITICAL },	/* within the hysteresis */
		{ 851, PRESSURE_CRITICAL },
		{ 850, PRESSURE_ELEVATED },	/* 50 below: leaves CRITICAL */
		{ 880, PRESSURE_ELEVATED },	/* does not re-enter below 900 */
		{ 760, PRESSURE_ELEVATED },
		{ 750, PRESSURE_NORMAL },
		{ 790, PRESSURE_NORMAL },
		{ 950, PRESSURE_CRITICAL },	/* a jump skips a level */
		{ 100, PRESSURE_NORMAL },
	};

	(void)s;
	pressure_config_default(&cfg);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		r.usage_bytes = steps[i].usage;
		l = pressure_next_level(&cfg, l, &r);
		if (l != steps[i].want)
			fail_msg("step %zu: usage %llu: %s, want %s", i,
				 (unsigned long long)steps[i].usage, pressure_level_name(l),
				 pressure_level_name(steps[i].want));
	}
	/* no limit: usage says nothing; PSI alone can raise the level */
	r = (struct pressure_reading){ .has_usage = true, .usage_bytes = 1ull << 40 };
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_NORMAL, &r), PRESSURE_NORMAL);
	r.has_psi = true;
	r.psi_some_avg10_centi = 1000;
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_NORMAL, &r), PRESSURE_ELEVATED);
	r.psi_some_avg10_centi = 3000;
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_NORMAL, &r), PRESSURE_CRITICAL);
	r.psi_some_avg10_centi = 2600;	/* within 5 % of 30 % */
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_CRITICAL, &r), PRESSURE_CRITICAL);
	r.psi_some_avg10_centi = 2500;
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_CRITICAL, &r), PRESSURE_ELEVATED);
	/* the higher of the two signals wins */
	r.limit_bytes = 1ull << 40;
	r.usage_bytes = r.limit_bytes / 100 * 95;
	r.psi_some_avg10_centi = 0;
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_NORMAL, &r), PRESSURE_CRITICAL);
	/* a huge usage over a tiny limit does not overflow */
	r = (struct pressure_reading){ .has_usage = true, .usage_bytes = UINT64_MAX, .limit_bytes = 1 };
	assert_int_equal(pressure_next_level(&cfg, PRESSURE_NORMAL, &r), PRESSURE_CRITICAL);
	assert_null(pressure_caps(&cfg, PRESSURE_NORMAL));
	assert_non_null(pressure_caps(&cfg, PRESSURE_ELEVATED));
	assert_int_equal(cfg.caps.offload_after_ns, 0);
	assert_int_equal(cfg.caps.offload_min_budget_ns, 200 * MS);
}

static void test_order(void **s)
{
	struct pressure_candidate v[] = {
		{ .resident_bytes = 100, .expected_wait_ns = 5, .index = 0 },
		{ .resident_bytes = 300, .expected_wait_ns = 1, .index = 1 },
		{ .resident_bytes = 100, .expected_wait_ns = 9, .index = 2 },
		{ .resident_bytes = 300, .expected_wait_ns = 1, .index = 3 },
		{ .resident_bytes = 200, .expected_wait_ns = 0, .index = 4 },
	};
	static const unsigned int want[] = { 1, 3, 4, 2, 0 };

	(void)s;
	pressure_order(v, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(v[i].index, want[i]);
	pressure_order(v, 0);
}

/*
 * Rising pressure offloads the paused VMs that the normal policy kept in
 * RAM (small timer budgets), largest first, then the longest expected
 * wait, one at a time; ELEVATED alone does not.
 */
static void test_rising_offloads_in_order(void **s)
{
	(void)s;
	setup_world();
	w.vm[0].resident = 100 * MiB;
	w.vm[1].resident = 400 * MiB;
	w.vm[2].resident = 100 * MiB;
	w.vm[3].resident = 400 * MiB;
	pause_vm(0, 800 * MS);	/* budget < 1 s: no offload planned */
	pause_vm(1, 600 * MS);
	pause_vm(2, 900 * MS);
	pause_vm(3, 700 * MS);
	advance(100 * MS);
	for (int i = 0; i < NVM; i++) {
		assert_int_equal(coord_state(w.vm[i].c), COORD_PAUSED);
		assert_int_equal(w.vm[i].offloads, 0);
	}
	sample(700, 1000);
	sample(850, 1000);
	assert_int_equal(w.level, PRESSURE_ELEVATED);
	assert_string_equal(w.order, "");	/* nothing offloaded yet */
	sample(920, 1000);
	assert_int_equal(w.level, PRESSURE_CRITICAL);
	/* 1 and 3 hold 400 MiB; 3 waits longer (700 ms budget vs 600 ms) */
	assert_string_equal(w.order, "3");
	sample(930, 1000);
	assert_string_equal(w.order, "3");	/* 3 is still offloading */
	coord_offload_done(w.vm[3].c, 0);
	assert_int_equal(coord_state(w.vm[3].c), COORD_OFFLOADED);
	sample(930, 1000);
	assert_string_equal(w.order, "31");
	coord_offload_done(w.vm[1].c, 0);
	sample(880, 1000);	/* within the hysteresis: still CRITICAL */
	assert_string_equal(w.order, "312");
	coord_offload_done(w.vm[2].c, 0);
	sample(850, 1000);	/* falls to ELEVATED: VM 0 stays in RAM */
	assert_int_equal(w.level, PRESSURE_ELEVATED);
	assert_string_equal(w.order, "312");
	assert_int_equal(coord_state(w.vm[0].c), COORD_PAUSED);
	free_world();
}

/*
 * Under pressure the next handoffs offload at once with a 200 ms budget and
 * no cooldown; back at NORMAL the 50 ms / 1 s / 5 s gates return.
 */
static void test_thresholds_follow_pressure(void **s)
{
	struct coord *c;

	(void)s;
	setup_world();
	c = w.vm[0].c;
	sample(850, 1000);
	assert_int_equal(w.level, PRESSURE_ELEVATED);
	pause_vm(0, 500 * MS);	/* below 1 s, above 200 ms */
	assert_int_equal(coord_state(c), COORD_OFFLOADING);	/* no 50 ms delay */
	coord_offload_done(c, 0);
	assert_int_equal(coord_external_event(c), 0);
	coord_resume_done(c, 0);
	coord_resume_ack(c, w.vm[0].req);
	/* the wait is still outstanding: a new cycle, no 5 s cooldown */
	advance(20 * MS);
	{
		struct coord_evidence ev = { .next_timer_ns = 500 * MS };

		coord_handoff_ack(c, w.vm[0].req, true, &ev);
		coord_pause_done(c, 0);
	}
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_int_equal(w.vm[0].offloads, 2);
	coord_offload_done(c, 0);
	coord_external_event(c);
	coord_resume_done(c, 0);
	coord_resume_ack(c, w.vm[0].req);

	/* pressure falls: the normal gates are back for the next cycle */
	sample(760, 1000);
	assert_int_equal(w.level, PRESSURE_ELEVATED);	/* hysteresis */
	sample(700, 1000);
	assert_int_equal(w.level, PRESSURE_NORMAL);
	advance(20 * MS);
	{
		struct coord_evidence ev = { .next_timer_ns = 30 * SEC };

		coord_handoff_ack(c, w.vm[0].req, true, &ev);
		coord_pause_done(c, 0);
	}
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(4 * SEC);	/* cooldown: 5 s since the last offload */
	assert_int_equal(coord_state(c), COORD_PAUSED);
	advance(1 * SEC);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_int_equal(w.vm[0].offloads, 3);
	/* the policy a VM shows is its own, not the caps */
	assert_int_equal(coord_config(c)->offload_min_budget_ns, 1 * SEC);
	free_world();
}

static void test_pressure_offload_rules(void **s)
{
	struct coord *c;
	struct coord_evidence ev = { .next_timer_ns = 30 * SEC };

	(void)s;
	setup_world();
	c = w.vm[0].c;
	assert_int_equal(coord_pressure_offload(c), -EBUSY);	/* running */
	assert_int_equal(coord_expected_wait_ns(c), 0);
	/* a network wait may pause but not offload: pressure keeps that */
	coord_wait_start(c, "n1", COORD_WAIT_NETWORK, 0);
	advance(20 * MS);
	coord_handoff_ack(c, w.vm[0].req, true, &ev);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_pressure_offload(c), -EPERM);
	/* expected wait: the guest timer, less the 50 ms margin */
	assert_int_equal(coord_expected_wait_ns(c), 30 * SEC - 50 * MS);
	coord_wait_ready(c, "n1");
	coord_resume_done(c, 0);

	/* a VM paused by hand may be offloaded; twice is -EALREADY */
	c = w.vm[1].c;
	assert_int_equal(coord_manual_pause(c), 0);
	coord_handoff_ack(c, w.vm[1].req, true, &ev);
	coord_pause_done(c, 0);
	assert_int_equal(coord_state(c), COORD_PAUSED);
	assert_int_equal(coord_pressure_offload(c), 0);
	assert_int_equal(coord_state(c), COORD_OFFLOADING);
	assert_int_equal(coord_pressure_offload(c), -EALREADY);
	free_world();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_levels_and_hysteresis),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_rising_offloads_in_order),
		cmocka_unit_test(test_thresholds_follow_pressure),
		cmocka_unit_test(test_pressure_offload_rules),
	};

	log_set_level(LOG_WARN);
	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
