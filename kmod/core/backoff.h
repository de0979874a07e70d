/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * backoff.h - capped exponential reconnect backoff (pure logic, KUnit tested).
 */
#ifndef _VMNAP_BACKOFF_H
#define _VMNAP_BACKOFF_H

#include <linux/types.h>

/**
 * struct vmnap_backoff - delay before the next reconnect attempt
 * @min_ms: first delay after a loss (and after a successful connection)
 * @max_ms: cap; the delay never grows past it
 * @cur_ms: delay the next call to vmnap_backoff_next() returns
 * @attempts: attempts since the last reset, saturating
 */
struct vmnap_backoff {
	u32 min_ms;
	u32 max_ms;
	u32 cur_ms;
	u32 attempts;
};

void vmnap_backoff_init(struct vmnap_backoff *b, u32 min_ms, u32 max_ms);
u32 vmnap_backoff_next(struct vmnap_backoff *b);
void vmnap_backoff_reset(struct vmnap_backoff *b);

#endif /* _VMNAP_BACKOFF_H */
