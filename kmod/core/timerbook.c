// SPDX-License-Identifier: GPL-2.0-only
/*
 * timerbook.c - armed hrtimers of one CPU, as told by the tracepoints.
 *
 * The caller serialises every operation on one book (evidence.c holds the
 * CPU's hrtimer base lock, which the tracepoints fire under too).  The
 * book is a small unordered array: a CPU of an idle guest has a handful of
 * armed hrtimers, so a linear scan (O(n), n <= VMNAP_TIMERBOOK_SLOTS) is
 * cheaper than a tree and allocates nothing in tracepoint context.
 */
#include <linux/kernel.h>
#include <linux/string.h>

#include "timerbook.h"

void vmnap_tb_reset(struct vmnap_timerbook *tb)
{
	tb->nr = 0;
	tb->overflow = false;
}

static int vmnap_tb_find(const struct vmnap_timerbook *tb, const void *timer)
{
	unsigned int i;

	for (i = 0; i < tb->nr; i++)
		if (tb->e[i].timer == timer)
			return i;
	return -1;
}

/* Record @timer as armed to @expires_ns (re-arming updates the entry). */
void vmnap_tb_arm(struct vmnap_timerbook *tb, const void *timer,
		  const void *fn, s64 expires_ns)
{
	int i = vmnap_tb_find(tb, timer);

	if (i < 0) {
		if (tb->nr == VMNAP_TIMERBOOK_SLOTS) {
			tb->overflow = true;
			return;
		}
		i = tb->nr++;
	}
	tb->e[i].timer = timer;
	tb->e[i].fn = fn;
	tb->e[i].expires_ns = expires_ns;
}

/* Forget @timer (cancelled or expired); false when it was not booked. */
bool vmnap_tb_disarm(struct vmnap_timerbook *tb, const void *timer)
{
	int i = vmnap_tb_find(tb, timer);

	if (i < 0)
		return false;
	tb->e[i] = tb->e[--tb->nr];
	return true;
}

/*
 * Earliest expiry among the booked timers whose classification has no bit
 * of @exclude.  Returns false when none qualifies.
 */
bool vmnap_tb_earliest(const struct vmnap_timerbook *tb,
		       vmnap_tb_classify_t classify, void *arg, u32 exclude,
		       s64 *expires_ns)
{
	bool found = false;
	unsigned int i;

	for (i = 0; i < tb->nr; i++) {
		const struct vmnap_timer_entry *e = &tb->e[i];

		if (exclude && classify && (classify(e, arg) & exclude))
			continue;
		if (!found || e->expires_ns < *expires_ns) {
			*expires_ns = e->expires_ns;
			found = true;
		}
	}
	return found;
}

/* ---- a CPU's timer wheel, as NOHZ told it --------------------------- */

void vmnap_tv_reset(struct vmnap_tickview *tv)
{
	tv->seen = false;
	tv->wheel_armed = false;
}

/* NOHZ stopped the tick at @expires_ns: the wheel as it was, folded in. */
void vmnap_tv_tick_armed(struct vmnap_tickview *tv, s64 expires_ns)
{
	tv->tick_ns = expires_ns;
	tv->seen = true;
	tv->wheel_armed = false;
}

/* A (non-deferrable) wheel timer was enqueued, due no earlier than this. */
void vmnap_tv_wheel_armed(struct vmnap_tickview *tv, s64 expires_ns)
{
	if (!tv->wheel_armed || expires_ns < tv->wheel_ns)
		tv->wheel_ns = expires_ns;
	tv->wheel_armed = true;
}

/* The CPU's next wheel event, no later than it; false when never seen. */
bool vmnap_tv_next(const struct vmnap_tickview *tv, s64 *next_ns)
{
	if (!tv->seen)
		return false;
	*next_ns = tv->tick_ns;
	if (tv->wheel_armed && tv->wheel_ns < *next_ns)
		*next_ns = tv->wheel_ns;
	return true;
}
