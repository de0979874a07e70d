// SPDX-License-Identifier: GPL-2.0-only
/*
 * backoff.c - capped exponential reconnect backoff.
 *
 * The link retries a lost connection after min_ms, then doubles the delay
 * up to max_ms.  Only a disconnected link has a timer pending: a connected,
 * idle link schedules nothing (no periodic wakeups).
 */
#include <linux/kernel.h>
#include <linux/minmax.h>

#include "backoff.h"

void vmnap_backoff_init(struct vmnap_backoff *b, u32 min_ms, u32 max_ms)
{
	b->min_ms = max(min_ms, 1U);
	b->max_ms = max(max_ms, b->min_ms);
	vmnap_backoff_reset(b);
}

/* Return the delay to wait now and grow the next one, capped at max_ms. */
u32 vmnap_backoff_next(struct vmnap_backoff *b)
{
	u32 delay = b->cur_ms;

	if (b->cur_ms > b->max_ms / 2)
		b->cur_ms = b->max_ms;
	else
		b->cur_ms *= 2;
	if (b->attempts < U32_MAX)
		b->attempts++;
	return delay;
}

void vmnap_backoff_reset(struct vmnap_backoff *b)
{
	b->cur_ms = b->min_ms;
	b->attempts = 0;
}
