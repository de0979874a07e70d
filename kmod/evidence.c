// SPDX-License-Identifier: GPL-2.0-only
/*
 * evidence.c - idle evidence, measured by the kernel over a short window.
 *
 *  runnable  per CPU, an IPI looks at what the CPU runs: the idle task with
 *            no pending reschedule (0), or a task (1, not counting our own
 *            worker) plus 1 when single_task_running() says more wait.
 *  cpu idle  get_cpu_idle_time_us() (NOHZ idle accounting, or kcpustat
 *            when NOHZ is inactive) before the window and at its end, both
 *            read in the window timer's callback, so the sampler's own
 *            wake-up after the window (the completion, the tick restarted,
 *            the switch back: hundreds of microseconds under emulation) is
 *            not counted as the guest's work; minimum over online CPUs,
 *            per mille of the window.
 *  block I/O block_rq_issue minus block_rq_complete (full completions) and
 *            block_rq_requeue, summed over per-CPU counters: in flight at
 *            the end of the window; requests issued during the window are
 *            counted too (io_issued): on a fast disk a busy writer's
 *            requests are rarely caught in flight at one instant.
 *  writeback global NR_WRITEBACK and NR_FILE_DIRTY pages.
 *  timers    hrtimer_start / hrtimer_cancel / hrtimer_expire_entry keep a
 *            book of each CPU's armed hrtimers (timerbook.c).  At sampling
 *            time the book is checked, under the CPU's hrtimer base lock,
 *            against the queues the clock event device is programmed from
 *            (and against cpu_base->expires_next, its programmed event); a
 *            book that disagrees (timers armed before we attached, a timer
 *            that migrated between CPUs, an overflow) is rebuilt from the
 *            queues and counted.  The budget is the earliest expiry over
 *            all CPUs, leaving out vmnap's own fail-safe and the periodic
 *            tick of the CPU doing the sampling (it stops when that CPU goes
 *            idle).  On NOHZ-idle CPUs the stopped tick's hrtimer carries
 *            the next timer-wheel event, so it is counted.  The sampling
 *            CPU's own timer wheel is seen through its stops: whenever a
 *            CPU goes idle, NOHZ stops its tick at the next timer-wheel
 *            event (with high resolution timers that expiry leaves
 *            hrtimers out), which the hrtimer_start probe records per CPU
 *            (an arm due more than a tick ahead: restarts and periodic
 *            re-arms are due within one).  Wheel timers enqueued on that
 *            CPU afterwards (timer_start; deferrable ones left out, as
 *            NOHZ does) are folded in (struct vmnap_tickview), so the
 *            last stop bounds the wheel even after the CPU woke for the
 *            HANDOFF_REQ.  The sampler (pinned with migrate_disable())
 *            also waits for the window's end on a completion, the window
 *            timed by an hrtimer of ours (on another CPU if there is one,
 *            else on this one), so its CPU idles and records a fresh
 *            stop.  A CPU with no stop recorded since the module loaded
 *            (low resolution mode, never idle, the tick not found) leaves
 *            the budget unknown, counted as timer_wheel_blind: the host
 *            then pauses but does not offload.  Known limit: a timer
 *            enqueued from another CPU onto this one between NOHZ reading
 *            the wheel and arming the tick, due within a tick, is missed
 *            (NOHZ re-stops the tick on the wakeup IPI, but a stop due
 *            within a tick is not recorded).
 *
 * Kernels with the timer migration pull model (6.9+: SMP with NOHZ) no
 * longer stop an idle CPU's tick at its own global (non-pinned) wheel
 * timers unless it is the last CPU to go idle: it hands its first global
 * expiry to the hierarchy (tmigr_cpu_idle) and the active CPU, maybe the
 * sampling one whose tick is left out, expires it remotely.  There the
 * expiry each CPU handed over when it last went idle (tmigr_cpu_idle,
 * tmigr_cpu_new_timer_idle) is counted: for the sampling CPU always, for
 * another CPU while it stays idle (tmigr_cpu_active ends that; an active
 * CPU's tick runs and is counted).  A handed-over expiry already past
 * (expired remotely since) counts as due now.  A sampling CPU not seen
 * going idle since the module loaded leaves the budget unknown.  Known
 * limit: a global timer queued before the module loaded on another CPU
 * that has stayed idle since is not seen until that CPU idles again.
 * The kernel has the pull model when these tracepoints exist and more
 * than one CPU is possible.
 *
 * The tracepoints are found by name (for_each_kernel_tracepoint()): they
 * are not exported to modules.  hrtimer_start gained a was_armed argument
 * within 6.1.x; Kbuild test-compiles a probe against the headers and sets
 * VMNAP_HRTIMER_START_WAS_ARMED (compat.h).  No probe schedules anything: the module
 * adds no wakeups.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/ioport.h>
#include <linux/kallsyms.h>
#include <linux/kernel_stat.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/sched/stat.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/tick.h>
#include <linux/timer.h>
#include <linux/timerqueue.h>
#include <linux/tracepoint.h>
#include <linux/vmstat.h>

#include "compat.h"
#include "vmnap_mod.h"
#include "core/timerbook.h"
#include "core/verdict.h"
#include "evidence.h"
#include "quiesce.h"

/**
 * struct vmnap_cpu_timers - hrtimer view of one CPU
 * @lock: serialises @tb (nests inside the CPU's hrtimer base lock)
 * @tb: armed timers as told by the tracepoints
 * @base: the CPU's hrtimer_cpu_base (from hrtimer_init() run on it)
 * @tv: the CPU's timer wheel as its tick told it during the window
 * @gnext: pull model: first global wheel expiry the CPU handed to the
 *	timer migration hierarchy when it last went idle (ns, KTIME_MAX: none)
 * @gseen: pull model: @gnext was recorded since the module loaded
 * @gidle: pull model: the CPU is idle as far as the hierarchy knows
 */
struct vmnap_cpu_timers {
	raw_spinlock_t lock;
	struct vmnap_timerbook tb;
	struct hrtimer_cpu_base *base;
	struct vmnap_tickview tv;
	s64 gnext;
	bool gseen;
	bool gidle;
};

static struct vmnap_cpu_timers *vmnap_timers;	/* [nr_cpu_ids] */
/*
 * Idle time at the start of the window, per CPU.  Allocated once: the
 * second sampling runs with the disks frozen, where an allocation that
 * entered reclaim could wait on them.  Serialised by the handoff lock
 * (handoff.c), which every caller of vmnap_evidence_collect() holds.
 */
static u64 *vmnap_idle0;
static u64 *vmnap_idle1;	/* ... and at its end (the window timer's callback) */
static DEFINE_PER_CPU(long, vmnap_io_inflight);
static DEFINE_PER_CPU(unsigned long, vmnap_io_issued);
static const void *vmnap_tick_fn;		/* resolved lazily */
static bool vmnap_timers_attached;
static bool vmnap_pull_model;	/* the tmigr tracepoints are attached */

/* ---- tracepoint probes ------------------------------------------------ */

static struct vmnap_cpu_timers *vmnap_timer_cpu(struct hrtimer *t)
{
	struct hrtimer_clock_base *b = READ_ONCE(t->base);
	unsigned int cpu;

	if (!b || !b->cpu_base)
		return NULL;
	cpu = b->cpu_base->cpu;
	return cpu < nr_cpu_ids ? &vmnap_timers[cpu] : NULL;
}

static void vmnap_book_arm(struct hrtimer *t)
{
	struct vmnap_cpu_timers *ct = vmnap_timer_cpu(t);
	unsigned long flags;

	if (!ct)
		return;
	raw_spin_lock_irqsave(&ct->lock, flags);
	vmnap_tb_arm(&ct->tb, t, t->function,
		     ktime_sub(hrtimer_get_expires(t), t->base->offset));
	/*
	 * NOHZ stopping the tick of an idle CPU at its next wheel event; a
	 * restart on idle exit or a periodic re-arm is due within a tick.
	 */
	if (t->function == READ_ONCE(vmnap_tick_fn)) {
		s64 v = ktime_sub(hrtimer_get_expires(t), t->base->offset);

		if (v - (s64)ktime_get_mono_fast_ns() > (s64)TICK_NSEC)
			vmnap_tv_tick_armed(&ct->tv, v);
	}
	raw_spin_unlock_irqrestore(&ct->lock, flags);
}

static void vmnap_book_disarm(struct hrtimer *t)
{
	struct vmnap_cpu_timers *ct = vmnap_timer_cpu(t);
	unsigned long flags;

	if (!ct)
		return;
	raw_spin_lock_irqsave(&ct->lock, flags);
	/*
	 * A cancelled or expired tick leaves the CPU's tick view as it was:
	 * the wheel it bounds only lost timers since.
	 */
	vmnap_tb_disarm(&ct->tb, t);
	raw_spin_unlock_irqrestore(&ct->lock, flags);
}

static void vmnap_tp_hrtimer_start(VMNAP_HRTIMER_START_PROBE_ARGS)
{
	vmnap_book_arm(t);
}

static void vmnap_tp_hrtimer_cancel(void *data, struct hrtimer *t)
{
	vmnap_book_disarm(t);
}

static void vmnap_tp_hrtimer_expire_entry(void *data, struct hrtimer *t,
					  ktime_t *now)
{
	vmnap_book_disarm(t);
}

/*
 * A timer-wheel timer enqueued on some CPU's base (under that base's
 * lock).  Deferrable timers do not wake an idle CPU (NOHZ ignores them
 * too).  The expiry in jiffies becomes a monotonic lower bound: the
 * current jiffy may have started up to a tick ago.
 */
static void vmnap_tp_timer_start(VMNAP_TIMER_START_PROBE_ARGS)
{
	unsigned int tflags = READ_ONCE(timer->flags);
	unsigned int cpu = tflags & TIMER_CPUMASK;
	long ticks = (long)(READ_ONCE(timer->expires) - jiffies) - 1;
	s64 v = ktime_get_mono_fast_ns();
	struct vmnap_cpu_timers *ct;
	unsigned long irqflags;

	if ((tflags & TIMER_DEFERRABLE) || cpu >= nr_cpu_ids)
		return;
	if (ticks > 0)
		v += (s64)ticks * TICK_NSEC;
	ct = &vmnap_timers[cpu];
	raw_spin_lock_irqsave(&ct->lock, irqflags);
	vmnap_tv_wheel_armed(&ct->tv, v);
	raw_spin_unlock_irqrestore(&ct->lock, irqflags);
}

/*
 * Pull model: this CPU goes idle (or, idle, gets a new first global timer)
 * and hands @nextevt, its first global wheel expiry (CLOCK_MONOTONIC ns,
 * KTIME_MAX for none), to the hierarchy.  Runs on that CPU.
 */
static void vmnap_tmigr_idle(u64 nextevt)
{
	struct vmnap_cpu_timers *ct = &vmnap_timers[raw_smp_processor_id()];
	unsigned long flags;

	raw_spin_lock_irqsave(&ct->lock, flags);
	ct->gnext = nextevt > (u64)KTIME_MAX ? KTIME_MAX : (s64)nextevt;
	ct->gseen = true;
	ct->gidle = true;
	raw_spin_unlock_irqrestore(&ct->lock, flags);
}

static void vmnap_tp_tmigr_cpu_idle(VMNAP_TMIGR_IDLE_PROBE_ARGS)
{
	vmnap_tmigr_idle(nextevt);
}

static void vmnap_tp_tmigr_cpu_new_timer_idle(VMNAP_TMIGR_IDLE_PROBE_ARGS)
{
	vmnap_tmigr_idle(nextevt);
}

/* Pull model: this CPU is active again and expires its own timers. */
static void vmnap_tp_tmigr_cpu_active(VMNAP_TMIGR_CPU_PROBE_ARGS)
{
	struct vmnap_cpu_timers *ct = &vmnap_timers[raw_smp_processor_id()];
	unsigned long flags;

	raw_spin_lock_irqsave(&ct->lock, flags);
	ct->gidle = false;
	raw_spin_unlock_irqrestore(&ct->lock, flags);
}

static void vmnap_tp_rq_issue(void *data, struct request *rq)
{
	this_cpu_inc(vmnap_io_inflight);
	this_cpu_inc(vmnap_io_issued);
}

static void vmnap_tp_rq_complete(void *data, struct request *rq,
				 blk_status_t error, unsigned int nr_bytes)
{
	/* a partial completion leaves the request in flight */
	if (nr_bytes >= blk_rq_bytes(rq))
		this_cpu_dec(vmnap_io_inflight);
}

static void vmnap_tp_rq_requeue(void *data, struct request *rq)
{
	this_cpu_dec(vmnap_io_inflight);
}

struct vmnap_tp {
	const char *name;
	void *probe;
	bool timer;		/* part of the timer evidence */
	bool pull;		/* pull model only: absent before 6.9 */
	struct tracepoint *tp;
};

static struct vmnap_tp vmnap_tps[] = {
	{ "hrtimer_start", vmnap_tp_hrtimer_start, true },
	{ "hrtimer_cancel", vmnap_tp_hrtimer_cancel, true },
	{ "hrtimer_expire_entry", vmnap_tp_hrtimer_expire_entry, true },
	{ "timer_start", vmnap_tp_timer_start, true },
	{ "tmigr_cpu_idle", vmnap_tp_tmigr_cpu_idle, true, true },
	{ "tmigr_cpu_new_timer_idle", vmnap_tp_tmigr_cpu_new_timer_idle, true, true },
	{ "tmigr_cpu_active", vmnap_tp_tmigr_cpu_active, true, true },
	{ "block_rq_issue", vmnap_tp_rq_issue, false },
	{ "block_rq_complete", vmnap_tp_rq_complete, false },
	{ "block_rq_requeue", vmnap_tp_rq_requeue, false },
};

static void vmnap_find_tp(struct tracepoint *tp, void *priv)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(vmnap_tps); i++)
		if (!strcmp(tp->name, vmnap_tps[i].name))
			vmnap_tps[i].tp = tp;
}

/* ---- timers ------------------------------------------------------------ */

static enum hrtimer_restart vmnap_never_fn(struct hrtimer *t)
{
	return HRTIMER_NORESTART;
}

static void vmnap_get_cpu_base(void *arg)
{
	struct hrtimer_cpu_base **base = arg;
	struct hrtimer t;

	/* setting a timer up binds it to this CPU's bases: nothing armed */
	vmnap_hrtimer_setup_on_stack(&t, vmnap_never_fn, CLOCK_MONOTONIC,
				     HRTIMER_MODE_REL);
	*base = t.base->cpu_base;
	destroy_hrtimer_on_stack(&t);
}

struct vmnap_classify_ctx {
	bool this_cpu;
};

static enum hrtimer_restart vmnap_window_fn(struct hrtimer *t);
static void vmnap_idle_snapshot(u64 *idle);

static u32 vmnap_classify(const struct vmnap_timer_entry *e, void *arg)
{
	struct vmnap_classify_ctx *ctx = arg;
	char name[KSYM_SYMBOL_LEN];

	if (vmnap_is_own_timer(e->timer) || e->fn == vmnap_window_fn)
		return VMNAP_TB_OWN;
	if (!ctx->this_cpu)
		return 0;
	if (!vmnap_tick_fn && e->fn) {
		sprint_symbol_no_offset(name, (unsigned long)e->fn);
		if (vmnap_is_tick_fn_name(name))
			WRITE_ONCE(vmnap_tick_fn, e->fn);
	}
	return e->fn && e->fn == vmnap_tick_fn ? VMNAP_TB_TICK : 0;
}

#define VMNAP_EXCLUDE	(VMNAP_TB_OWN | VMNAP_TB_TICK)

/*
 * Earliest armed timer of one base on the live queue, skipping excluded
 * ones.  Base lock held.  Returns false when none qualifies.
 */
static bool vmnap_live_earliest(struct hrtimer_clock_base *b,
				struct vmnap_classify_ctx *ctx, s64 *ex)
{
	struct timerqueue_node *n = timerqueue_getnext(&b->active);
	bool found = false;

	for (; n; n = timerqueue_iterate_next(n)) {
		struct hrtimer *t = container_of(n, struct hrtimer, node);
		struct vmnap_timer_entry e = { t, t->function, 0 };
		s64 v = ktime_sub(n->expires, b->offset);

		if (vmnap_classify(&e, ctx) & VMNAP_EXCLUDE)
			continue;
		if (!found || v < *ex)
			*ex = v;
		found = true;
		break;	/* the queue is ordered: the first kept is earliest */
	}
	return found;
}

/* Rebuild the book from the live queues.  Base lock and book lock held. */
static void vmnap_book_resync(struct vmnap_cpu_timers *ct)
{
	struct hrtimer_cpu_base *cb = ct->base;
	unsigned int i;

	vmnap_tb_reset(&ct->tb);
	for (i = 0; i < HRTIMER_MAX_CLOCK_BASES; i++) {
		struct hrtimer_clock_base *b = &cb->clock_base[i];
		struct timerqueue_node *n;

		if (!(cb->active_bases & BIT(i)))
			continue;
		for (n = timerqueue_getnext(&b->active); n && !ct->tb.overflow;
		     n = timerqueue_iterate_next(n)) {
			struct hrtimer *t = container_of(n, struct hrtimer, node);

			vmnap_tb_arm(&ct->tb, t, t->function,
				     ktime_sub(n->expires, b->offset));
		}
	}
}

/*
 * Earliest relevant timer of one CPU (absolute CLOCK_MONOTONIC ns), or
 * KTIME_MAX.  Returns false when the CPU's view cannot be trusted.
 */
static bool vmnap_cpu_next_timer(unsigned int cpu, bool this_cpu, s64 *next)
{
	struct vmnap_cpu_timers *ct = &vmnap_timers[cpu];
	struct vmnap_classify_ctx ctx = { .this_cpu = this_cpu };
	struct hrtimer_cpu_base *cb = ct->base;
	s64 live = KTIME_MAX, hard = KTIME_MAX, book = KTIME_MAX, v;
	unsigned long flags;
	bool ok = true;
	unsigned int i;

	raw_spin_lock_irqsave(&cb->lock, flags);
	raw_spin_lock(&ct->lock);
	for (i = 0; i < HRTIMER_MAX_CLOCK_BASES; i++) {
		struct hrtimer_clock_base *b = &cb->clock_base[i];
		struct timerqueue_node *n;

		if (!(cb->active_bases & BIT(i)))
			continue;
		if (vmnap_live_earliest(b, &ctx, &v))
			live = min(live, v);
		n = timerqueue_getnext(&b->active);
		if (n && i < HRTIMER_BASE_MONOTONIC_SOFT)
			hard = min(hard, ktime_sub(n->expires, b->offset));
	}
	if (ct->tb.overflow ||
	    !vmnap_tb_earliest(&ct->tb, vmnap_classify, &ctx, VMNAP_EXCLUDE,
			       &book))
		book = KTIME_MAX;
	if (ct->tb.overflow || book != live) {
		vmnap_count(VMNAP_CTR_TIMER_RESYNCS);
		vmnap_book_resync(ct);
	}
	/*
	 * The clock event device is programmed to expires_next; an armed
	 * hard timer due before it would be missed: a state we do not
	 * understand (outside hrtimer_interrupt, which we never run inside).
	 */
	if (cb->hres_active && !cb->in_hrtirq && hard != KTIME_MAX &&
	    cb->expires_next > hard + (s64)TICK_NSEC)
		ok = false;
	/*
	 * Pull model: global wheel timers handed to the hierarchy, which
	 * this CPU's (left out) tick may expire.  Past: expired remotely
	 * since, or due now; either way no budget.
	 */
	if (vmnap_pull_model && (this_cpu || ct->gidle)) {
		if (!ct->gseen)
			ok = false;
		else if (ct->gnext != KTIME_MAX)
			live = min(live, max(ct->gnext, ktime_get()));
	}
	/* our CPU: its timer wheel as NOHZ saw it when it last idled */
	if (this_cpu && vmnap_tv_next(&ct->tv, &v)) {
		live = min(live, v);
	} else if (this_cpu) {
		vmnap_count(VMNAP_CTR_TIMER_WHEEL_BLIND);
		/*
		 * Without a stop to bound this CPU's timer wheel the budget
		 * could be too long: say it is unknown rather than report a
		 * timer budget that may miss a timer (README.md, "Evidence").
		 */
		ok = false;
	}
	raw_spin_unlock(&ct->lock);
	raw_spin_unlock_irqrestore(&cb->lock, flags);
	*next = live;
	return ok;
}

/* ns from now to the earliest relevant timer on any online CPU. */
static bool vmnap_next_timer(u64 *ns)
{
	s64 next = KTIME_MAX, v, now;
	unsigned int cpu, self;
	bool ok = vmnap_timers_attached;

	for_each_online_cpu(cpu) {
		if (!vmnap_timers[cpu].base)
			smp_call_function_single(cpu, vmnap_get_cpu_base,
						 &vmnap_timers[cpu].base, 1);
	}
	self = get_cpu();
	for_each_online_cpu(cpu) {
		if (!vmnap_timers[cpu].base) {
			ok = false;
			continue;
		}
		if (!vmnap_cpu_next_timer(cpu, cpu == self, &v))
			ok = false;
		next = min(next, v);
	}
	now = ktime_get();
	put_cpu();
	if (next == KTIME_MAX)
		*ns = VMNAP_TIMER_UNKNOWN - 1;	/* nothing armed at all */
	else
		*ns = next > now ? next - now : 0;
	return ok;
}

bool vmnap_timer_evidence_active(void)
{
	return vmnap_timers_attached;
}

/* ---- the observation window ------------------------------------------ */

struct vmnap_window {
	struct hrtimer timer;
	struct completion done;
	u64 ns;
	ktime_t end;	/* when the callback read vmnap_idle1 */
};

/* The window's end: every online CPU's idle time now, then wake the sampler. */
static enum hrtimer_restart vmnap_window_fn(struct hrtimer *t)
{
	struct vmnap_window *w = container_of(t, struct vmnap_window, timer);

	vmnap_idle_snapshot(vmnap_idle1);
	w->end = ktime_get();
	complete(&w->done);
	return HRTIMER_NORESTART;
}

static void vmnap_window_arm(void *arg)
{
	struct vmnap_window *w = arg;

	hrtimer_start(&w->timer, ns_to_ktime(w->ns), HRTIMER_MODE_REL_PINNED_HARD);
}

/* Find the tick's hrtimer function among this CPU's armed timers. */
static void vmnap_find_tick_fn(unsigned int cpu)
{
	struct vmnap_cpu_timers *ct = &vmnap_timers[cpu];
	struct vmnap_classify_ctx ctx = { .this_cpu = true };
	struct hrtimer_cpu_base *cb = ct->base;
	unsigned long flags;
	unsigned int i;

	if (READ_ONCE(vmnap_tick_fn) || !cb)
		return;
	raw_spin_lock_irqsave(&cb->lock, flags);
	for (i = 0; i < HRTIMER_MAX_CLOCK_BASES && !vmnap_tick_fn; i++) {
		struct timerqueue_node *n;

		if (!(cb->active_bases & BIT(i)))
			continue;
		for (n = timerqueue_getnext(&cb->clock_base[i].active);
		     n && !vmnap_tick_fn; n = timerqueue_iterate_next(n)) {
			struct hrtimer *t = container_of(n, struct hrtimer, node);
			struct vmnap_timer_entry e = { t, t->function, 0 };

			vmnap_classify(&e, &ctx);
		}
	}
	raw_spin_unlock_irqrestore(&cb->lock, flags);
}

/*
 * Let @window_us pass.  The wait is timed by an hrtimer of ours, pinned to
 * another CPU when one is online (else to this one), while this task
 * waits on a completion without a timer, so NOHZ shows this CPU's next
 * wheel event when it idles.  The caller keeps this task on its CPU
 * (migrate_disable()).
 */
/*
 * Wait out the window.  The end time, vmnap_idle1 holding every online
 * CPU's idle time then; 0 when the window was slept without our timer
 * (the caller reads both itself).
 */
static ktime_t vmnap_window_wait(unsigned int self, unsigned int window_us)
{
	struct vmnap_window w = { .ns = (u64)window_us * NSEC_PER_USEC };
	unsigned int other = cpumask_any_but(cpu_online_mask, self);

	if (!window_us)
		return 0;
	if (!vmnap_timers_attached) {
		usleep_range(window_us, window_us + window_us / 8);
		return 0;
	}
	vmnap_find_tick_fn(self);
	vmnap_hrtimer_setup_on_stack(&w.timer, vmnap_window_fn, CLOCK_MONOTONIC,
				     HRTIMER_MODE_REL_HARD);
	init_completion(&w.done);
	/*
	 * Do not wait for the IPI: waiting spins this CPU until the other
	 * one (maybe halted, slow to wake under emulation) ran it, which
	 * would count as busy time.  @w outlives it: we wait for its expiry.
	 * Without another CPU (or when it went offline) arm it here.
	 */
	if (other >= nr_cpu_ids ||
	    smp_call_function_single(other, vmnap_window_arm, &w, 0))
		vmnap_window_arm(&w);
	wait_for_completion(&w.done);
	hrtimer_cancel(&w.timer);	/* the callback has returned */
	destroy_hrtimer_on_stack(&w.timer);
	return w.end;
}

/* ---- runnable tasks and CPU idle -------------------------------------- */

struct vmnap_runnable_probe {
	struct task_struct *self;
	atomic_t runnable;
};

static void vmnap_runnable_ipi(void *arg)
{
	struct vmnap_runnable_probe *p = arg;
	int n;

	if (is_idle_task(current)) {
		n = need_resched() ? 1 : 0;
	} else {
		n = current == p->self ? 0 : 1;
		if (!single_task_running())
			n++;	/* at least one more waits on this CPU */
	}
	atomic_add(n, &p->runnable);
}

static u64 vmnap_cpu_idle_us(unsigned int cpu)
{
	u64 us = get_cpu_idle_time_us(cpu, NULL);

	if (us != (u64)-1)
		return us;
	return div_u64(kcpustat_cpu(cpu).cpustat[CPUTIME_IDLE], NSEC_PER_USEC);
}

/* Every online CPU's idle time now, into @idle[cpu]. */
static void vmnap_idle_snapshot(u64 *idle)
{
	unsigned int cpu;

	for_each_online_cpu(cpu)
		idle[cpu] = vmnap_cpu_idle_us(cpu);
}

/* ---- block I/O --------------------------------------------------------- */

static unsigned long vmnap_io_issued_sum(void)
{
	unsigned long sum = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(vmnap_io_issued, cpu);
	return sum;
}

static u32 vmnap_io_inflight_sum(void)
{
	long sum = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(vmnap_io_inflight, cpu);
	return sum > 0 ? (u32)min_t(long, sum, U32_MAX) : 0;
}

/* ---- collection -------------------------------------------------------- */

/*
 * Measure the evidence over @window_us (may sleep).  Called with the
 * handoff lock held, from the workqueue or a netlink command.
 */
void vmnap_evidence_collect(struct vmnap_sample *s, unsigned int window_us)
{
	struct vmnap_runnable_probe rp = { .self = current };
	unsigned long issued0;
	u64 *idle0 = vmnap_idle0;
	ktime_t t0, tend;
	u64 wall_us, idle, permille, min_permille = 1000;
	unsigned int cpu;

	memset(s, 0, sizeof(*s));
	/* one CPU for the whole sampling: the window watches this CPU */
	migrate_disable();
	t0 = ktime_get();
	issued0 = vmnap_io_issued_sum();
	vmnap_idle_snapshot(idle0);
	tend = vmnap_window_wait(raw_smp_processor_id(), window_us);
	if (!tend) {	/* no window timer: the end is now */
		tend = ktime_get();
		vmnap_idle_snapshot(vmnap_idle1);
	}
	wall_us = max_t(u64, ktime_us_delta(tend, t0), 1);
	s->window_ns = ktime_to_ns(ktime_sub(tend, t0));
	for_each_online_cpu(cpu) {
		idle = vmnap_idle1[cpu] - idle0[cpu];
		permille = min_t(u64, div64_u64(idle * 1000, wall_us), 1000);
		min_permille = min(min_permille, permille);
	}
	s->cpu_idle_permille = min_permille;

	atomic_set(&rp.runnable, 0);
	for_each_online_cpu(cpu)
		smp_call_function_single(cpu, vmnap_runnable_ipi, &rp, 1);
	s->nr_runnable = atomic_read(&rp.runnable);

	s->io_inflight = vmnap_io_inflight_sum();
	s->io_issued = min_t(unsigned long, vmnap_io_issued_sum() - issued0,
			     U32_MAX);
	s->writeback_pages = global_node_page_state(NR_WRITEBACK);
	s->dirty_pages = global_node_page_state(NR_FILE_DIRTY);
	s->timer_known = vmnap_next_timer(&s->next_timer_ns);
	if (!s->timer_known) {
		s->next_timer_ns = VMNAP_TIMER_UNKNOWN;
		vmnap_count(VMNAP_CTR_TIMER_UNKNOWN);
	}
	s->devices_quiesced = vmnap_quiesced_devices();
	migrate_enable();
}

/* ---- guest RAM --------------------------------------------------------- */

struct vmnap_ram_ctx {
	u64 (*r)[2];
	unsigned int n, max;
	bool truncated;
};

static int vmnap_ram_res(struct resource *res, void *arg)
{
	struct vmnap_ram_ctx *c = arg;
	u64 start = PAGE_ALIGN(res->start);
	u64 end = (res->end + 1) & PAGE_MASK;

	if (end <= start)
		return 0;
	if (c->n && c->r[c->n - 1][0] + c->r[c->n - 1][1] == start) {
		c->r[c->n - 1][1] += end - start;	/* adjacent: merge */
		return 0;
	}
	if (c->n == c->max) {
		c->truncated = true;
		return 0;
	}
	c->r[c->n][0] = start;
	c->r[c->n][1] = end - start;
	c->n++;
	return 0;
}

/* Guest RAM as (GPA, length) pairs from the System RAM resources. */
int vmnap_ram_ranges(u64 (*ranges)[2], unsigned int max)
{
	struct vmnap_ram_ctx c = { .r = ranges, .max = max };

	walk_iomem_res_desc(IORES_DESC_NONE,
			    IORESOURCE_SYSTEM_RAM | IORESOURCE_BUSY, 0, U64_MAX,
			    &c, vmnap_ram_res);
	if (c.truncated)
		pr_warn("more than %u RAM ranges: HELLO lists the first %u\n",
			max, max);
	return c.n;
}

/* ---- init / exit -------------------------------------------------------- */

static void vmnap_tp_unregister_all(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(vmnap_tps); i++)
		if (vmnap_tps[i].tp)
			tracepoint_probe_unregister(vmnap_tps[i].tp,
						    vmnap_tps[i].probe, NULL);
	tracepoint_synchronize_unregister();
}

int vmnap_evidence_init(void)
{
	unsigned int i, cpu;
	int ret;

	vmnap_timers = kcalloc(nr_cpu_ids, sizeof(*vmnap_timers), GFP_KERNEL);
	vmnap_idle0 = kcalloc(nr_cpu_ids, sizeof(*vmnap_idle0), GFP_KERNEL);
	vmnap_idle1 = kcalloc(nr_cpu_ids, sizeof(*vmnap_idle1), GFP_KERNEL);
	if (!vmnap_timers || !vmnap_idle0 || !vmnap_idle1) {
		kfree(vmnap_timers);
		kfree(vmnap_idle0);
		kfree(vmnap_idle1);
		return -ENOMEM;
	}
	for_each_possible_cpu(cpu) {
		raw_spin_lock_init(&vmnap_timers[cpu].lock);
		vmnap_tb_reset(&vmnap_timers[cpu].tb);
		vmnap_tv_reset(&vmnap_timers[cpu].tv);
		vmnap_timers[cpu].gnext = KTIME_MAX;
	}
	for_each_kernel_tracepoint(vmnap_find_tp, NULL);
	vmnap_timers_attached = true;
	for (i = 0; i < ARRAY_SIZE(vmnap_tps); i++) {
		struct vmnap_tp *t = &vmnap_tps[i];

		/*
		 * No timer migration: nothing to follow (the kernel sets
		 * it up only with more than one possible CPU).
		 */
		if (t->pull && (!t->tp || num_possible_cpus() == 1)) {
			t->tp = NULL;
			continue;
		}
		ret = t->tp ? tracepoint_probe_register(t->tp, t->probe, NULL) :
			      -ENOENT;
		if (!ret && t->pull)
			vmnap_pull_model = true;
		if (ret) {
			pr_warn("tracepoint %s: %d; %s evidence incomplete\n",
				t->name, ret, t->timer ? "timer" : "block I/O");
			t->tp = NULL;
			if (t->timer)
				vmnap_timers_attached = false;
		}
	}
	/* bootstrap: the first sampling rebuilds each book from the queues */
	for_each_online_cpu(cpu) {
		vmnap_timers[cpu].tb.overflow = true;
		smp_call_function_single(cpu, vmnap_get_cpu_base,
					 &vmnap_timers[cpu].base, 1);
	}
	/* this CPU runs, so its tick is armed: learn the tick's function */
	cpu = get_cpu();
	vmnap_find_tick_fn(cpu);
	put_cpu();
	return 0;
}

void vmnap_evidence_exit(void)
{
	vmnap_tp_unregister_all();
	kfree(vmnap_timers);
	kfree(vmnap_idle0);
	kfree(vmnap_idle1);
	vmnap_timers = NULL;
	vmnap_idle0 = NULL;
	vmnap_idle1 = NULL;
}
