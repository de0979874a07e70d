// SPDX-License-Identifier: GPL-2.0-only
/*
 * timerbook_kunit.c - KUnit suite for the hrtimer bookkeeping and the
 * sampling CPU's timer-wheel view.
 */
#include <kunit/test.h>
#include <linux/slab.h>

#include "timerbook.h"

static int t[VMNAP_TIMERBOOK_SLOTS + 1];	/* timer identities */
static int own_fn, tick_fn, other_fn;

static u32 classify(const struct vmnap_timer_entry *e, void *arg)
{
	if (e->fn == &own_fn)
		return VMNAP_TB_OWN;
	if (e->fn == &tick_fn)
		return VMNAP_TB_TICK;
	return 0;
}

static struct vmnap_timerbook *new_book(struct kunit *test)
{
	struct vmnap_timerbook *tb = kunit_kzalloc(test, sizeof(*tb), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, tb);
	vmnap_tb_reset(tb);
	return tb;
}

static void tb_earliest_of_armed(struct kunit *test)
{
	struct vmnap_timerbook *tb = new_book(test);
	s64 ex = 0;

	KUNIT_EXPECT_FALSE(test, vmnap_tb_earliest(tb, classify, NULL, 0, &ex));
	vmnap_tb_arm(tb, &t[0], &other_fn, 300);
	vmnap_tb_arm(tb, &t[1], &other_fn, 100);
	vmnap_tb_arm(tb, &t[2], &other_fn, 200);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_earliest(tb, classify, NULL, 0, &ex));
	KUNIT_EXPECT_EQ(test, ex, 100LL);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_disarm(tb, &t[1]));
	KUNIT_EXPECT_TRUE(test, vmnap_tb_earliest(tb, classify, NULL, 0, &ex));
	KUNIT_EXPECT_EQ(test, ex, 200LL);
}

static void tb_rearm_updates(struct kunit *test)
{
	struct vmnap_timerbook *tb = new_book(test);
	s64 ex = 0;

	vmnap_tb_arm(tb, &t[0], &other_fn, 100);
	vmnap_tb_arm(tb, &t[0], &other_fn, 900);
	KUNIT_EXPECT_EQ(test, tb->nr, 1U);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_earliest(tb, classify, NULL, 0, &ex));
	KUNIT_EXPECT_EQ(test, ex, 900LL);
}

static void tb_disarm_unknown(struct kunit *test)
{
	struct vmnap_timerbook *tb = new_book(test);

	KUNIT_EXPECT_FALSE(test, vmnap_tb_disarm(tb, &t[0]));
	vmnap_tb_arm(tb, &t[0], &other_fn, 1);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_disarm(tb, &t[0]));
	KUNIT_EXPECT_FALSE(test, vmnap_tb_disarm(tb, &t[0]));
	KUNIT_EXPECT_EQ(test, tb->nr, 0U);
}

static void tb_excludes_own_and_tick(struct kunit *test)
{
	struct vmnap_timerbook *tb = new_book(test);
	s64 ex = 0;

	vmnap_tb_arm(tb, &t[0], &own_fn, 10);
	vmnap_tb_arm(tb, &t[1], &tick_fn, 20);
	vmnap_tb_arm(tb, &t[2], &other_fn, 30);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_earliest(tb, classify, NULL,
						  VMNAP_TB_OWN, &ex));
	KUNIT_EXPECT_EQ(test, ex, 20LL);
	KUNIT_EXPECT_TRUE(test, vmnap_tb_earliest(tb, classify, NULL,
						  VMNAP_TB_OWN | VMNAP_TB_TICK,
						  &ex));
	KUNIT_EXPECT_EQ(test, ex, 30LL);
	vmnap_tb_disarm(tb, &t[2]);
	KUNIT_EXPECT_FALSE(test, vmnap_tb_earliest(tb, classify, NULL,
						   VMNAP_TB_OWN | VMNAP_TB_TICK,
						   &ex));
}

static void tb_overflow_is_flagged(struct kunit *test)
{
	struct vmnap_timerbook *tb = new_book(test);
	int i;

	for (i = 0; i < VMNAP_TIMERBOOK_SLOTS; i++)
		vmnap_tb_arm(tb, &t[i], &other_fn, i);
	KUNIT_EXPECT_FALSE(test, tb->overflow);
	vmnap_tb_arm(tb, &t[VMNAP_TIMERBOOK_SLOTS], &other_fn, -5);
	KUNIT_EXPECT_TRUE(test, tb->overflow);
	KUNIT_EXPECT_EQ(test, tb->nr, (unsigned int)VMNAP_TIMERBOOK_SLOTS);
	/* re-arming a booked timer still works when full */
	vmnap_tb_arm(tb, &t[3], &other_fn, 1000);
	vmnap_tb_reset(tb);
	KUNIT_EXPECT_FALSE(test, tb->overflow);
	KUNIT_EXPECT_EQ(test, tb->nr, 0U);
}

static void tv_blind_until_tick_armed(struct kunit *test)
{
	struct vmnap_tickview tv;
	s64 n = 0;

	vmnap_tv_reset(&tv);
	vmnap_tv_wheel_armed(&tv, 500);
	KUNIT_EXPECT_FALSE(test, vmnap_tv_next(&tv, &n));
	vmnap_tv_tick_armed(&tv, 9000);
	KUNIT_EXPECT_TRUE(test, vmnap_tv_next(&tv, &n));
	KUNIT_EXPECT_EQ(test, n, 9000);
}

static void tv_wheel_after_stop_counts(struct kunit *test)
{
	struct vmnap_tickview tv;
	s64 n = 0;

	vmnap_tv_reset(&tv);
	vmnap_tv_tick_armed(&tv, 9000);
	vmnap_tv_wheel_armed(&tv, 7000);
	vmnap_tv_wheel_armed(&tv, 8000);
	KUNIT_EXPECT_TRUE(test, vmnap_tv_next(&tv, &n));
	KUNIT_EXPECT_EQ(test, n, 7000);
	/* a later stop folds the wheel in: its expiry is the answer */
	vmnap_tv_tick_armed(&tv, 7500);
	KUNIT_EXPECT_TRUE(test, vmnap_tv_next(&tv, &n));
	KUNIT_EXPECT_EQ(test, n, 7500);
}

static void tv_wheel_before_stop_counts(struct kunit *test)
{
	struct vmnap_tickview tv;
	s64 n = 0;

	/* enqueues tracked before any stop do not make the view known */
	vmnap_tv_reset(&tv);
	vmnap_tv_wheel_armed(&tv, 100);
	KUNIT_EXPECT_FALSE(test, vmnap_tv_next(&tv, &n));
	vmnap_tv_tick_armed(&tv, 9000);
	vmnap_tv_wheel_armed(&tv, 12000);
	KUNIT_EXPECT_TRUE(test, vmnap_tv_next(&tv, &n));
	KUNIT_EXPECT_EQ(test, n, 9000);
	vmnap_tv_reset(&tv);
	KUNIT_EXPECT_FALSE(test, vmnap_tv_next(&tv, &n));
}

static struct kunit_case timerbook_cases[] = {
	KUNIT_CASE(tv_blind_until_tick_armed),
	KUNIT_CASE(tv_wheel_after_stop_counts),
	KUNIT_CASE(tv_wheel_before_stop_counts),
	KUNIT_CASE(tb_earliest_of_armed),
	KUNIT_CASE(tb_rearm_updates),
	KUNIT_CASE(tb_disarm_unknown),
	KUNIT_CASE(tb_excludes_own_and_tick),
	KUNIT_CASE(tb_overflow_is_flagged),
	{}
};

static struct kunit_suite timerbook_suite = {
	.name = "vmnap_timerbook",
	.test_cases = timerbook_cases,
};
kunit_test_suite(timerbook_suite);
