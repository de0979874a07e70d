/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * timerbook.h - bookkeeping of the armed hrtimers of one CPU, fed by the
 * hrtimer tracepoints (pure logic, KUnit tested).
 */
#ifndef _VMNAP_TIMERBOOK_H
#define _VMNAP_TIMERBOOK_H

#include <linux/types.h>

/* Timers one CPU may have armed at once before the book gives up. */
#define VMNAP_TIMERBOOK_SLOTS	64

/* Entry flags: timers the reported budget leaves out. */
#define VMNAP_TB_OWN	(1U << 0)	/* vmnap's own timer (fail-safe) */
#define VMNAP_TB_TICK	(1U << 1)	/* the scheduler tick */

/**
 * struct vmnap_timer_entry - one armed timer
 * @timer: the hrtimer (identity only, never dereferenced by the book)
 * @fn: its callback (identity only)
 * @expires_ns: hard expiry on CLOCK_MONOTONIC
 */
struct vmnap_timer_entry {
	const void *timer;
	const void *fn;
	s64 expires_ns;
};

/**
 * struct vmnap_timerbook - the armed timers of one CPU
 * @e: entries, unordered, @nr in use
 * @nr: entries in use
 * @overflow: a timer was dropped for lack of room: the book is incomplete
 *	until it is rebuilt from the timer queues (vmnap_tb_reset())
 */
struct vmnap_timerbook {
	struct vmnap_timer_entry e[VMNAP_TIMERBOOK_SLOTS];
	unsigned int nr;
	bool overflow;
};

/* Classify a timer for exclusion: returns VMNAP_TB_* bits. */
typedef u32 (*vmnap_tb_classify_t)(const struct vmnap_timer_entry *e,
				   void *arg);

/**
 * struct vmnap_tickview - the timer wheel of one CPU, as its tick told it
 * (pure logic, KUnit tested)
 * @tick_ns: expiry NOHZ gave the tick hrtimer when it last stopped the
 *	tick (idle entry); with high resolution timers that is the CPU's
 *	next timer-wheel event (bounded by RCU and timekeeping), hrtimers
 *	left out, so every wheel timer pending then expires no earlier
 * @wheel_ns: earliest wheel timer enqueued on the CPU since then
 * @seen: a stop was recorded
 * @wheel_armed: @wheel_ns is valid
 *
 * The wheel only changes by enqueues (tracked) and by timers leaving it
 * (which only makes the bound conservative), so min(@tick_ns, @wheel_ns)
 * bounds the CPU's next wheel event however long ago the stop was.  The
 * caller records stops only: a restart or periodic re-arm of the tick
 * (due within a tick) says nothing about the wheel and is not recorded.
 */
struct vmnap_tickview {
	s64 tick_ns;
	s64 wheel_ns;
	bool seen;
	bool wheel_armed;
};

void vmnap_tv_reset(struct vmnap_tickview *tv);
void vmnap_tv_tick_armed(struct vmnap_tickview *tv, s64 expires_ns);
void vmnap_tv_wheel_armed(struct vmnap_tickview *tv, s64 expires_ns);
bool vmnap_tv_next(const struct vmnap_tickview *tv, s64 *next_ns);

void vmnap_tb_reset(struct vmnap_timerbook *tb);
void vmnap_tb_arm(struct vmnap_timerbook *tb, const void *timer,
		  const void *fn, s64 expires_ns);
bool vmnap_tb_disarm(struct vmnap_timerbook *tb, const void *timer);
bool vmnap_tb_earliest(const struct vmnap_timerbook *tb,
		       vmnap_tb_classify_t classify, void *arg, u32 exclude,
		       s64 *expires_ns);

#endif /* _VMNAP_TIMERBOOK_H */
