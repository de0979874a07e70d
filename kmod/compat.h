/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * compat.h - every kernel-version difference vmnap.ko cares about, in one
 * place.  The module is built and tested (make check, QEMU) against
 * Debian bookworm's 6.1 and 6.12 kernels (tests/e2e/kmatrix.list); the
 * 6.13+ branches follow the kernel changelogs and are compile-untested.
 *
 *  - hrtimer_start tracepoint: gained "bool was_armed" (Debian's 6.1.x
 *    has it too).  Kbuild test-compiles a probe against the headers and
 *    defines VMNAP_HRTIMER_START_WAS_ARMED when the new shape fits.
 *  - timer_start tracepoint: (timer, expires, flags) up to 6.5, (timer,
 *    bucket_expiry) since the timer wheel rework ("tracing/timers:
 *    Enhance timer_start tracepoint", by 6.8; 6.12 has it).  Kbuild
 *    defines VMNAP_TIMER_START_BUCKET for the new shape.  The probe reads
 *    expiry and flags from the timer itself either way; only the
 *    prototype differs.
 *  - the tick's hrtimer callback, found by name: tick_sched_timer() up
 *    to 6.7; the 6.8/6.9 tick/sched cleanups renamed it
 *    tick_nohz_highres_handler() and then, with the low resolution mode
 *    on the same hrtimer, tick_nohz_handler() (6.12's /proc/kallsyms).
 *    Every name is accepted: a kernel has one of them as the callback.
 *  - timer migration pull model ("timers: Implement the hierarchical
 *    pull model", 6.9): the tmigr_cpu_idle / tmigr_cpu_new_timer_idle /
 *    tmigr_cpu_active tracepoints, found by name at load (absent before:
 *    nothing to follow there).  struct tmigr_cpu is private to the
 *    kernel; the probes only take its pointer.
 *  - hrtimer_init() gave way to hrtimer_setup() (6.13), which sets the
 *    callback too.
 *  - blk_mq_unfreeze_queue() takes the memalloc flags returned by
 *    blk_mq_freeze_queue() since 6.14; a queue frozen with
 *    blk_freeze_queue_start() is released with the _nomemrestore variant.
 */
#ifndef _VMNAP_COMPAT_H
#define _VMNAP_COMPAT_H

#include <linux/blk-mq.h>
#include <linux/hrtimer.h>
#include <linux/string.h>
#include <linux/timer.h>
#include <linux/version.h>

#ifdef VMNAP_HRTIMER_START_WAS_ARMED
#define VMNAP_HRTIMER_START_PROBE_ARGS \
	void *data, struct hrtimer *t, enum hrtimer_mode mode, bool was_armed
#else
#define VMNAP_HRTIMER_START_PROBE_ARGS \
	void *data, struct hrtimer *t, enum hrtimer_mode mode
#endif

#ifdef VMNAP_TIMER_START_BUCKET
#define VMNAP_TIMER_START_PROBE_ARGS \
	void *data, struct timer_list *timer, unsigned long bucket_expiry
#else
#define VMNAP_TIMER_START_PROBE_ARGS \
	void *data, struct timer_list *timer, unsigned long expires, \
	unsigned int flags
#endif

struct tmigr_cpu;
#define VMNAP_TMIGR_IDLE_PROBE_ARGS \
	void *data, struct tmigr_cpu *tmc, u64 nextevt
#define VMNAP_TMIGR_CPU_PROBE_ARGS \
	void *data, struct tmigr_cpu *tmc

static inline bool vmnap_is_tick_fn_name(const char *name)
{
	return !strcmp(name, "tick_nohz_handler") ||
	       !strcmp(name, "tick_nohz_highres_handler") ||
	       !strcmp(name, "tick_sched_timer");
}

static inline void vmnap_hrtimer_setup(struct hrtimer *t,
				       enum hrtimer_restart (*fn)(struct hrtimer *),
				       clockid_t clock, enum hrtimer_mode mode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	hrtimer_setup(t, fn, clock, mode);
#else
	hrtimer_init(t, clock, mode);
	t->function = fn;
#endif
}

static inline void vmnap_hrtimer_setup_on_stack(struct hrtimer *t,
						enum hrtimer_restart (*fn)(struct hrtimer *),
						clockid_t clock,
						enum hrtimer_mode mode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	hrtimer_setup_on_stack(t, fn, clock, mode);
#else
	hrtimer_init_on_stack(t, clock, mode);
	t->function = fn;
#endif
}

/* Release a queue frozen with blk_freeze_queue_start(). */
static inline void vmnap_blk_unfreeze(struct request_queue *q)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 14, 0)
	blk_mq_unfreeze_queue_nomemrestore(q);
#else
	blk_mq_unfreeze_queue(q);
#endif
}

#endif /* _VMNAP_COMPAT_H */
