// SPDX-License-Identifier: GPL-2.0-only
/*
 * backoff_kunit.c - KUnit suite for the reconnect backoff.
 */
#include <kunit/test.h>

#include "backoff.h"

static void backoff_doubles_then_caps(struct kunit *test)
{
	struct vmnap_backoff b;

	vmnap_backoff_init(&b, 100, 1000);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 100U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 200U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 400U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 800U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 1000U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 1000U);
	KUNIT_EXPECT_EQ(test, b.attempts, 6U);
}

static void backoff_reset_restarts(struct kunit *test)
{
	struct vmnap_backoff b;

	vmnap_backoff_init(&b, 50, 400);
	vmnap_backoff_next(&b);
	vmnap_backoff_next(&b);
	vmnap_backoff_reset(&b);
	KUNIT_EXPECT_EQ(test, b.attempts, 0U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 50U);
}

static void backoff_never_overflows(struct kunit *test)
{
	struct vmnap_backoff b;
	int i;

	vmnap_backoff_init(&b, 1, U32_MAX);
	for (i = 0; i < 100; i++)
		KUNIT_EXPECT_GE(test, vmnap_backoff_next(&b), 1U);
	KUNIT_EXPECT_EQ(test, b.cur_ms, U32_MAX);
}

static void backoff_bad_limits_are_sane(struct kunit *test)
{
	struct vmnap_backoff b;

	vmnap_backoff_init(&b, 0, 0);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 1U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 1U);
	vmnap_backoff_init(&b, 500, 100);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 500U);
	KUNIT_EXPECT_EQ(test, vmnap_backoff_next(&b), 500U);
}

static struct kunit_case backoff_cases[] = {
	KUNIT_CASE(backoff_doubles_then_caps),
	KUNIT_CASE(backoff_reset_restarts),
	KUNIT_CASE(backoff_never_overflows),
	KUNIT_CASE(backoff_bad_limits_are_sane),
	{}
};

static struct kunit_suite backoff_suite = {
	.name = "vmnap_backoff",
	.test_cases = backoff_cases,
};
kunit_test_suite(backoff_suite);
