// SPDX-License-Identifier: GPL-2.0-only
/*
 * verdict_kunit.c - KUnit suite for the verdict taken from idle evidence.
 */
#include <kunit/test.h>

#include "verdict.h"

static const struct vmnap_thresholds thr = {
	.min_idle_permille = 900,
	.max_dirty_pages = 256,
	.min_timer_ns = 2000000,
};

static struct vmnap_sample idle_sample(void)
{
	struct vmnap_sample s = {
		.window_ns = 10000000,
		.next_timer_ns = 5000000000ULL,
		.cpu_idle_permille = 990,
		.timer_known = true,
	};
	return s;
}

static void verdict_idle_is_ready(struct kunit *test)
{
	struct vmnap_sample s = idle_sample();

	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), 0U);
}

static void verdict_each_reason(struct kunit *test)
{
	struct vmnap_sample s;

	s = idle_sample();
	s.nr_runnable = 1;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_RUNNABLE);
	s = idle_sample();
	s.cpu_idle_permille = 899;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_CPU);
	s = idle_sample();
	s.io_inflight = 3;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_IO);
	s = idle_sample();
	s.io_issued = 1;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_IO);
	s = idle_sample();
	s.writeback_pages = 1;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_WRITEBACK);
	s = idle_sample();
	s.dirty_pages = 257;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_WRITEBACK);
	s = idle_sample();
	s.next_timer_ns = 1999999;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), VMNAP_BUSY_TIMER);
}

static void verdict_boundaries(struct kunit *test)
{
	struct vmnap_sample s = idle_sample();

	s.cpu_idle_permille = 900;
	s.dirty_pages = 256;
	s.next_timer_ns = 2000000;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), 0U);
}

static void verdict_unknown_timer_is_not_busy(struct kunit *test)
{
	struct vmnap_sample s = idle_sample();
	struct vmnap_evidence ev;

	s.timer_known = false;
	s.next_timer_ns = 0;
	KUNIT_EXPECT_EQ(test, vmnap_busy_reasons(&s, &thr), 0U);
	vmnap_evidence_encode(&ev, &s, 0);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(ev.next_timer_ns), VMNAP_TIMER_UNKNOWN);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.flags), 0U);
}

static void verdict_encode_fields(struct kunit *test)
{
	struct vmnap_sample s = idle_sample();
	struct vmnap_evidence ev;

	s.cpu_idle_permille = 1500;	/* clamped on the wire */
	s.nr_runnable = 2;
	s.io_inflight = 4;
	s.devices_quiesced = 3;
	s.dirty_pages = 7;
	s.writeback_pages = 8;
	vmnap_evidence_encode(&ev, &s, VMNAP_BUSY_RUNNABLE | (1U << 31));
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.cpu_idle_permille), 1000U);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.busy_reasons), VMNAP_BUSY_RUNNABLE);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.nr_runnable), 2U);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.io_inflight), 4U);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.devices_quiesced), 3U);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(ev.dirty_pages), 7ULL);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(ev.writeback_pages), 8ULL);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(ev.next_timer_ns), 5000000000ULL);
	KUNIT_EXPECT_EQ(test, le32_to_cpu(ev.flags), VMNAP_EV_TIMER_KNOWN);
}

static struct kunit_case verdict_cases[] = {
	KUNIT_CASE(verdict_idle_is_ready),
	KUNIT_CASE(verdict_each_reason),
	KUNIT_CASE(verdict_boundaries),
	KUNIT_CASE(verdict_unknown_timer_is_not_busy),
	KUNIT_CASE(verdict_encode_fields),
	{}
};

static struct kunit_suite verdict_suite = {
	.name = "vmnap_verdict",
	.test_cases = verdict_cases,
};
kunit_test_suite(verdict_suite);
