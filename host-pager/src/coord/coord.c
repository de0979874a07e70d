// SPDX-License-Identifier: GPL-2.0-only
/*
 * coord.c - the wait coordinator state machine; see coord.h.
 *
 * Every public entry point changes state, performs actions through ops,
 * and ends with coord_rearm(), which names the one deadline the current
 * state needs.  Actions may complete synchronously (re-entering through
 * coord_*_done), so the state is always updated before an action is
 * started, and completion handlers check that the state still expects
 * them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "log.h"

#define NS_PER_MS	1000000ull
#define NS_PER_US	1000ull
#define NS_PER_SEC	1000000000ull

struct coord_wait {
	bool used;
	bool ready;		/* data ready: no longer outstanding */
	uint32_t flags;		/* COORD_WAIT_* */
	enum coord_wait_kind kind;
	uint64_t start_ns, ready_ns;
	uint64_t end_ns;	/* done[]: delivered (or dropped) at */
	bool dropped;		/* done[]: never confirmed, given up */
	char id[COORD_WAIT_ID_MAX];
};

struct coord {
	struct coord_config cfg;
	const struct coord_ops *ops;
	void *arg;
	char subject[80];

	enum coord_state state;
	bool managed;
	bool link_up;
	struct coord_wait waits[COORD_MAX_WAITS];
	/* The last COORD_DONE_KEEP waits that ended, oldest overwritten first:
	 * the API shows a wait as delivered after it left waits[]. */
	struct coord_wait done[COORD_DONE_KEEP];
	unsigned int done_next;

	/* WAITING */
	uint64_t handoff_at_ns;
	uint64_t backoff_ns;		/* next BUSY backoff */
	/* HANDOFF */
	uint64_t req_id;		/* 0: none (paused without handoff) */
	uint32_t handoff_flags;
	uint64_t handoff_sent_ns;	/* the guest measured its timer budget after this */
	bool awaiting_ack;
	uint64_t ack_deadline_ns;
	bool pause_inflight;
	bool manual;			/* this pause cycle was asked for by hand */
	/* PAUSED .. RESUMING */
	uint64_t ack_ns;		/* when READY arrived */
	uint64_t budget_deadline_ns;	/* guest's next timer; NO_DEADLINE: unknown */
	uint64_t paused_at_ns;
	uint64_t offload_at_ns;		/* NO_DEADLINE: not eligible */
	bool offloaded;			/* RAM evicted in this cycle */
	bool critical_window;		/* pre_resume done, or data taken in
					 * running (->data_window); not
					 * delivered yet */
	uint64_t offloaded_at_ns;
	bool has_offloaded;
	uint64_t last_offload_ns;	/* start of this VM's last offload */
	enum coord_resume_reason resume_pending;	/* requested while busy */
	bool offload_cancel_sent;	/* this offload was asked to stop */
	enum coord_resume_reason resume_reason;
	uint64_t resume_retry_at_ns;
	/* after RESUMING: the guest's RESUME_ACK */
	bool awaiting_resume_ack;
	uint64_t resume_ack_req_id;
	uint64_t resume_ack_deadline_ns;
	/* the wake-path probe */
	bool probe_done;		/* started once, or not needed: a resume
					 * from an offload was acknowledged */
	bool probing;			/* the resume being started is the probe */

	/* offload policy */
	bool offload_recheck;		/* offload_at_ns asks the cost policy again */
	uint64_t write_bps;		/* measured store write speed; 0: none yet */
	uint64_t hist[COORD_NR_WAIT_KINDS][COORD_WAIT_HISTORY];	/* wait durations */
	unsigned int hist_n[COORD_NR_WAIT_KINDS], hist_next[COORD_NR_WAIT_KINDS];
	/* the resume in progress, phase by phase */
	bool rb_active;
	struct coord_resume_breakdown rb;
	uint64_t rb_running_ns;		/* clock: the VMM's vCPUs run */

	bool has_caps;			/* memory pressure caps the offload gates */
	struct coord_pressure_caps caps;
	uint64_t armed_ns;		/* last deadline given to arm_timer */
	struct coord_evidence last_ev;
	struct coord_stats st;
};

static const char *const state_names[COORD_NR_STATES] = {
	[COORD_RUNNING] = "RUNNING",
	[COORD_WAITING] = "WAITING",
	[COORD_HANDOFF] = "HANDOFF",
	[COORD_PAUSED] = "PAUSED",
	[COORD_OFFLOADING] = "OFFLOADING",
	[COORD_OFFLOADED] = "OFFLOADED",
	[COORD_RESUMING] = "RESUMING",
};

static const char *const kind_names[COORD_NR_WAIT_KINDS] = {
	[COORD_WAIT_MODEL] = "model",
	[COORD_WAIT_NETWORK] = "network",
	[COORD_WAIT_FILE] = "file",
};

static const char *const reason_names[COORD_NR_RESUME_REASONS] = {
	[COORD_RESUME_NONE] = "none",
	[COORD_RESUME_DATA_READY] = "data_ready",
	[COORD_RESUME_TIMER] = "timer",
	[COORD_RESUME_EXTERNAL] = "external",
	[COORD_RESUME_FAILSAFE] = "failsafe",
	[COORD_RESUME_MANUAL] = "manual",
};

static const char *const profile_names[COORD_NR_PROFILES] = {
	[COORD_PROFILE_COST] = "cost",
	[COORD_PROFILE_SEED] = "seed",
};

static const char *const restore_names[COORD_NR_RESTORES] = {
	[COORD_RESTORE_POLICY] = "policy",
	[COORD_RESTORE_LAZY] = "lazy",
};

const char *coord_profile_name(enum coord_profile p)
{
	return (unsigned int)p < COORD_NR_PROFILES ? profile_names[p] : "unknown";
}

const char *coord_restore_name(enum coord_restore r)
{
	return (unsigned int)r < COORD_NR_RESTORES ? restore_names[r] : "unknown";
}

static int name_parse(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

int coord_profile_parse(const char *s)
{
	return name_parse(profile_names, COORD_NR_PROFILES, s);
}

const char *coord_state_name(enum coord_state s)
{
	return (unsigned int)s < COORD_NR_STATES ? state_names[s] : "UNKNOWN";
}

const char *coord_wait_kind_name(enum coord_wait_kind k)
{
	return (unsigned int)k < COORD_NR_WAIT_KINDS ? kind_names[k] : "unknown";
}

int coord_wait_kind_parse(const char *s)
{
	return name_parse(kind_names, COORD_NR_WAIT_KINDS, s);
}

const char *coord_wait_state_name(enum coord_wait_state s)
{
	static const char *const names[] = {
		[COORD_WS_OUTSTANDING] = "outstanding",
		[COORD_WS_READY] = "ready",
		[COORD_WS_DELIVERED] = "delivered",
		[COORD_WS_DROPPED] = "dropped",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

const char *coord_resume_reason_name(enum coord_resume_reason r)
{
	return (unsigned int)r < COORD_NR_RESUME_REASONS ? reason_names[r] : "unknown";
}

/* Names of the VMNAP_BUSY_* bits, by bit number. */
static const char *const busy_names[COORD_BUSY_BITS] = {
	"runnable", "cpu", "io", "writeback", "timer", "quiesce", "disabled", "state",
};

const char *coord_busy_reason_name(unsigned int bit)
{
	return bit < COORD_BUSY_BITS ? busy_names[bit] : "unknown";
}

unsigned int coord_hist_bucket(uint64_t ns)
{
	uint64_t us = ns / NS_PER_US;
	unsigned int b = 0;

	while (us && b < COORD_HIST_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

void coord_config_default(struct coord_config *cfg)
{
	*cfg = (struct coord_config){
		.handoff_delay_ns = 20 * NS_PER_MS,
		.offload_after_ns = 50 * NS_PER_MS,
		.offload_min_budget_ns = 1 * NS_PER_SEC,
		.offload_cooldown_ns = 5 * NS_PER_SEC,
		.timer_margin_ns = 50 * NS_PER_MS,
		.timer_slack_ns = 100 * NS_PER_MS,
		.ack_timeout_ns = 200 * NS_PER_MS,
		.busy_backoff_ns = 20 * NS_PER_MS,
		.busy_backoff_max_ns = 1 * NS_PER_SEC,
		.max_pause_ns = 60 * NS_PER_SEC,
		.profile = COORD_PROFILE_COST,
		.cost_ratio = 4,
		.offload_fixed_ns = 5 * NS_PER_MS,
		.prior_wait_ns = 2 * NS_PER_SEC,
		.assumed_write_bps = 1024ull << 20,
		.wake_probe = true,
	};
	for (int k = 0; k < COORD_NR_WAIT_KINDS; k++)
		cfg->kind[k] = (struct coord_kind_policy){
			.may_pause = true,
			.may_offload = k == COORD_WAIT_MODEL,
		};
}

static uint64_t clock_now(struct coord *c)
{
	return c->ops->now(c->arg);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* a + b, saturating at COORD_NO_DEADLINE */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > COORD_NO_DEADLINE - b ? COORD_NO_DEADLINE : a + b;
}

/* ---- waits --------------------------------------------------------- */

static struct coord_wait *wait_find(struct coord *c, const char *id)
{
	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++)
		if (c->waits[i].used && !strcmp(c->waits[i].id, id))
			return &c->waits[i];
	return NULL;
}

static void wait_info(const struct coord_wait *w, bool ended, uint64_t now,
		      struct coord_wait_info *info)
{
	info->id = w->id;
	info->kind = w->kind;
	info->state = !ended ? (w->ready ? COORD_WS_READY : COORD_WS_OUTSTANDING) :
		      w->dropped ? COORD_WS_DROPPED : COORD_WS_DELIVERED;
	info->ready = w->ready;
	info->confirm = w->flags & COORD_WAIT_CONFIRM;
	info->start_ns = w->start_ns;
	info->ready_ns = w->ready ? w->ready_ns : 0;
	info->end_ns = ended ? w->end_ns : 0;
	info->age_ns = now > w->start_ns ? now - w->start_ns : 0;
}

void coord_waits_foreach(const struct coord *c,
			 void (*fn)(const struct coord_wait_info *w, void *arg), void *arg)
{
	uint64_t now = c->ops->now(c->arg);
	struct coord_wait_info info;

	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		if (!c->waits[i].used)
			continue;
		wait_info(&c->waits[i], false, now, &info);
		fn(&info, arg);
	}
	/* then the ended ones, oldest first */
	for (unsigned int k = 0; k < COORD_DONE_KEEP; k++) {
		const struct coord_wait *w = &c->done[(c->done_next + k) % COORD_DONE_KEEP];

		if (!w->used)
			continue;
		wait_info(w, true, now, &info);
		fn(&info, arg);
	}
}

int coord_wait_get(const struct coord *c, const char *id, struct coord_wait_info *info)
{
	uint64_t now = c->ops->now(c->arg);

	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		if (c->waits[i].used && !strcmp(c->waits[i].id, id)) {
			wait_info(&c->waits[i], false, now, info);
			return 0;
		}
	}
	/* newest first: an id reused after it ended names its last use */
	for (unsigned int k = 1; k <= COORD_DONE_KEEP; k++) {
		const struct coord_wait *w =
			&c->done[(c->done_next + COORD_DONE_KEEP - k) % COORD_DONE_KEEP];

		if (w->used && !strcmp(w->id, id)) {
			wait_info(w, true, now, info);
			return 0;
		}
	}
	return -ENOENT;
}

unsigned int coord_nr_waits(const struct coord *c)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++)
		if (c->waits[i].used && !c->waits[i].ready)
			n++;
	return n;
}

static uint64_t oldest_wait_start(const struct coord *c)
{
	uint64_t t = COORD_NO_DEADLINE;

	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++)
		if (c->waits[i].used && !c->waits[i].ready)
			t = min_u64(t, c->waits[i].start_ns);
	return t;
}

/* Do the outstanding waits allow pausing (offloading)?  False if none. */
static bool waits_allow(const struct coord *c, bool offload)
{
	bool any = false;

	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		const struct coord_wait *w = &c->waits[i];
		const struct coord_kind_policy *p;

		if (!w->used || w->ready)
			continue;
		p = &c->cfg.kind[w->kind];
		if (!(offload ? p->may_offload : p->may_pause))
			return false;
		any = true;
	}
	return any;
}

/* @w left waits[]: keep it in done[] for the API, free its slot. */
static void wait_retire(struct coord *c, struct coord_wait *w, uint64_t now, bool dropped)
{
	struct coord_wait *d = &c->done[c->done_next];

	*d = *w;
	d->end_ns = now;
	d->dropped = dropped;
	c->done_next = (c->done_next + 1) % COORD_DONE_KEEP;
	memset(w, 0, sizeof(*w));
}

static void wait_deliver(struct coord *c, struct coord_wait *w, uint64_t now)
{
	uint64_t lat = now - w->ready_ns;

	c->st.waits_delivered++;
	c->st.delivery_hist[coord_hist_bucket(lat)]++;
	c->st.delivery_ns_sum += lat;
	c->st.last_delivery_ns = lat;
	log_info(c->subject, "wait %s delivered %llu us after data ready", w->id,
		 (unsigned long long)(lat / NS_PER_US));
	if (c->ops->delivered)
		c->ops->delivered(c->arg, w->id, lat);
	wait_retire(c, w, now, false);
}

/* The critical window after a resume ends (ops->resume_delivered). */
static void critical_window_end(struct coord *c)
{
	if (!c->critical_window)
		return;
	c->critical_window = false;
	if (c->ops->resume_delivered)
		c->ops->resume_delivered(c->arg);
}

/* A ready wait whose delivery the caller confirms has not been confirmed. */
static bool confirm_pending(const struct coord *c)
{
	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		const struct coord_wait *w = &c->waits[i];

		if (w->used && w->ready && (w->flags & COORD_WAIT_CONFIRM))
			return true;
	}
	return false;
}

/*
 * The guest can have its data now: deliver every ready, unconfirmed wait.
 * The critical window ends once the guest has all of it: at RESUME_ACK,
 * or when a ready confirmed wait is, at its confirmation (the pages the
 * guest faults on to take the data in are the ones the next resume needs).
 */
static void deliver_pending(struct coord *c)
{
	uint64_t now;

	if ((c->state != COORD_RUNNING && c->state != COORD_WAITING) ||
	    c->awaiting_resume_ack)
		return;
	now = clock_now(c);
	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		struct coord_wait *w = &c->waits[i];

		if (w->used && w->ready && !(w->flags & COORD_WAIT_CONFIRM))
			wait_deliver(c, w, now);
	}
	if (!confirm_pending(c))
		critical_window_end(c);
}

/* ---- transitions --------------------------------------------------- */

static void breakdown_end(struct coord *c, bool acked);

static void set_state(struct coord *c, enum coord_state to, const char *why)
{
	enum coord_state from = c->state;

	c->state = to;
	c->st.transitions++;
	log_info(c->subject, "%s -> %s (%s)", coord_state_name(from),
		 coord_state_name(to), why);
	if (c->ops->transition)
		c->ops->transition(c->arg, from, to, why);
}

/*
 * Back to RUNNING, or to WAITING when waits are outstanding (a new
 * handoff after @delay_ns).
 */
static void settle(struct coord *c, uint64_t delay_ns, const char *why)
{
	if (c->managed && coord_nr_waits(c)) {
		c->handoff_at_ns = add_sat(clock_now(c), delay_ns);
		set_state(c, COORD_WAITING, why);
	} else {
		set_state(c, COORD_RUNNING, why);
	}
	deliver_pending(c);
}

/* Give up on the current handoff: tell the guest to unquiesce. */
static void abort_handoff(struct coord *c)
{
	if (c->req_id && c->link_up && c->ops->handoff_abort) {
		c->ops->handoff_abort(c->arg, c->req_id);
		c->st.aborts++;
	}
	c->awaiting_ack = false;
	c->req_id = 0;
}

static uint64_t next_backoff(struct coord *c)
{
	uint64_t b = c->backoff_ns;

	c->backoff_ns = min_u64(c->backoff_ns * 2, c->cfg.busy_backoff_max_ns);
	return b;
}

static bool offload_possible(const struct coord *c)
{
	return c->ops->offload && (!c->ops->can_offload || c->ops->can_offload(c->arg));
}

static void start_handoff(struct coord *c, bool manual, const char *why)
{
	bool offload = !manual && offload_possible(c) && waits_allow(c, true);
	uint64_t now = clock_now(c);
	uint64_t ms = c->cfg.ack_timeout_ns / NS_PER_MS;
	int err;

	c->manual = manual;
	c->handoff_flags = offload ? COORD_HANDOFF_OFFLOAD : 0;
	c->req_id = 0;
	c->resume_pending = COORD_RESUME_NONE;
	c->offloaded = false;
	c->offload_at_ns = COORD_NO_DEADLINE;
	c->budget_deadline_ns = COORD_NO_DEADLINE;
	c->last_ev = (struct coord_evidence){ .next_timer_ns = COORD_BUDGET_UNKNOWN };
	c->st.handoffs++;
	critical_window_end(c);	/* a confirmation that never came */
	set_state(c, COORD_HANDOFF, why);

	if (!c->link_up || !c->ops->handoff) {
		/* Only a manual pause goes ahead without the guest's consent. */
		c->awaiting_ack = false;
		c->pause_inflight = true;
		c->ack_ns = now;
		err = c->ops->pause(c->arg);
		if (err)
			coord_pause_done(c, err);
		return;
	}
	c->awaiting_ack = true;
	c->handoff_sent_ns = now;
	c->ack_deadline_ns = add_sat(now, c->cfg.ack_timeout_ns);
	err = c->ops->handoff(c->arg, c->handoff_flags,
			      ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms, &c->req_id);
	if (err) {
		log_warn(c->subject, "handoff request failed: %s", strerror(-err));
		c->awaiting_ack = false;
		c->req_id = 0;
		settle(c, next_backoff(c), "handoff_failed");
	}
}

static void start_resume(struct coord *c, enum coord_resume_reason reason,
			 const char *why)
{
	int err;

	switch (c->state) {
	case COORD_PAUSED:
	case COORD_OFFLOADED:
		break;
	case COORD_HANDOFF:
		/* an action is in flight: resume when it completes */
		if (!c->resume_pending)
			c->resume_pending = reason;
		return;
	case COORD_OFFLOADING:
		/* stop the offload at its next batch; resume when it reports */
		if (!c->resume_pending)
			c->resume_pending = reason;
		if (!c->offload_cancel_sent && c->ops->offload_cancel) {
			c->offload_cancel_sent = true;
			log_info(c->subject, "%s during offload: cancelling it", why);
			err = c->ops->offload_cancel(c->arg);
			if (err)	/* e.g. it just ended: its completion is on the way */
				log_debug(c->subject, "offload cancel: %s", strerror(-err));
		}
		return;
	default:
		return;
	}
	c->resume_reason = reason;
	c->resume_pending = COORD_RESUME_NONE;
	c->resume_retry_at_ns = COORD_NO_DEADLINE;
	c->offload_recheck = false;
	breakdown_end(c, false);	/* a previous resume never acknowledged */
	c->rb_active = true;
	c->rb = (struct coord_resume_breakdown){
		.reason = reason,
		/* the guest runs its timer and goes idle again: nothing comes
		 * back but what it touches */
		.restore = reason == COORD_RESUME_TIMER ? COORD_RESTORE_LAZY : COORD_RESTORE_POLICY,
		.offloaded = c->offloaded,
		.probe = c->probing,
		.requested_at_ns = clock_now(c),
	};
	c->probing = false;
	if (c->rb.restore == COORD_RESTORE_LAZY)
		c->st.resumes_lazy++;
	set_state(c, COORD_RESUMING, why);
	if (c->ops->restore)
		c->ops->restore(c->arg, c->rb.restore);
	/* every resume of an offloaded VM, a timer's too: the guest's way to
	 * RESUME_ACK is the same whatever woke it */
	if (c->offloaded && c->ops->pre_resume) {
		err = c->ops->pre_resume(c->arg);
		if (err < 0)	/* the faults will serve what is missing */
			log_warn(c->subject, "pre-resume restore: %s", strerror(-err));
		c->critical_window = true;
	}
	c->rb.pre_resume_ns = clock_now(c) - c->rb.requested_at_ns;
	err = c->ops->resume(c->arg);
	if (err)
		coord_resume_done(c, err);
}

/* An offload gate: the policy's value, capped under memory pressure. */
static uint64_t gate(const struct coord *c, uint64_t policy, uint64_t cap)
{
	return c->has_caps ? min_u64(policy, cap) : policy;
}

/* May this pause cycle offload at all?  NULL, or why not. */
static const char *offload_refusal(struct coord *c)
{
	if (c->manual)
		return "manual_pause";
	if (!offload_possible(c))
		return "no_pager";
	if (!(c->handoff_flags & COORD_HANDOFF_OFFLOAD) || !waits_allow(c, true))
		return "wait_kind";
	if (c->budget_deadline_ns == COORD_NO_DEADLINE)
		return "timer_unknown";
	return NULL;
}

/* The seed rule: when this cycle offloads, NO_DEADLINE: not at all. */
static uint64_t seed_offload_time(struct coord *c, const char **why)
{
	uint64_t t;

	*why = offload_refusal(c);
	if (*why)
		return COORD_NO_DEADLINE;
	t = max_u64(add_sat(oldest_wait_start(c), gate(c, c->cfg.offload_after_ns,
						       c->caps.offload_after_ns)), clock_now(c));
	*why = "offload_after";
	if (c->has_offloaded &&
	    add_sat(c->last_offload_ns, gate(c, c->cfg.offload_cooldown_ns,
					     c->caps.offload_cooldown_ns)) > t) {
		t = add_sat(c->last_offload_ns, gate(c, c->cfg.offload_cooldown_ns,
						     c->caps.offload_cooldown_ns));
		*why = "cooldown";
	}
	if (c->budget_deadline_ns < add_sat(t, gate(c, c->cfg.offload_min_budget_ns,
						    c->caps.offload_min_budget_ns))) {
		*why = "budget";
		return COORD_NO_DEADLINE;
	}
	return t;
}

bool coord_cost_may_offload(const struct coord *c)
{
	return c->cfg.profile == COORD_PROFILE_COST && c->ops->offload_bytes && !c->manual &&
	       offload_possible(c) && waits_allow(c, true);
}

/*
 * How late the guest's timer may run in this cycle so that an offload
 * fits: timer_slack_ns when the cycle may offload under the cost profile
 * (the seed rule, which also decides without the pager's estimate, keeps
 * its fixed budget), else 0.
 */
static uint64_t timer_slack(const struct coord *c)
{
	if (!coord_cost_may_offload(c) || !(c->handoff_flags & COORD_HANDOFF_OFFLOAD))
		return 0;
	return c->cfg.timer_slack_ns;
}

/*
 * The resume deadline for the guest's own timer; @late: allowing the
 * cycle's timer slack (an offload under way, or the budget it must fit in).
 */
static uint64_t timer_resume_time(const struct coord *c, bool late)
{
	uint64_t t;

	if (c->budget_deadline_ns == COORD_NO_DEADLINE)
		return COORD_NO_DEADLINE;
	t = late ? add_sat(c->budget_deadline_ns, timer_slack(c)) : c->budget_deadline_ns;
	return t > c->cfg.timer_margin_ns ? t - c->cfg.timer_margin_ns : 0;
}

static uint64_t max_pause_time(const struct coord *c)
{
	return add_sat(c->paused_at_ns, c->cfg.max_pause_ns);
}

static uint64_t next_deadline(const struct coord *c)
{
	uint64_t t = COORD_NO_DEADLINE;

	switch (c->state) {
	case COORD_RUNNING:
	case COORD_WAITING:
		if (c->awaiting_resume_ack)
			t = c->resume_ack_deadline_ns;
		else if (c->state == COORD_WAITING)
			t = c->handoff_at_ns;
		break;
	case COORD_HANDOFF:
		if (c->awaiting_ack)
			t = c->ack_deadline_ns;
		break;
	case COORD_PAUSED:
		t = c->offload_at_ns;
		/* fall through */
	case COORD_OFFLOADING:
	case COORD_OFFLOADED:
		if (c->state == COORD_OFFLOADING && c->resume_pending)
			break;
		t = min_u64(t, timer_resume_time(c, c->state == COORD_OFFLOADING));
		t = min_u64(t, max_pause_time(c));
		break;
	case COORD_RESUMING:
		t = c->resume_retry_at_ns;
		break;
	default:
		break;
	}
	return t;
}

static void coord_rearm(struct coord *c)
{
	uint64_t t = next_deadline(c);

	if (t == c->armed_ns)
		return;
	c->armed_ns = t;
	c->ops->arm_timer(c->arg, t);
}

/* ---- offload policy ------------------------------------------------ */

static void history_add(struct coord *c, enum coord_wait_kind k, uint64_t d)
{
	c->hist[k][c->hist_next[k]] = d;
	c->hist_next[k] = (c->hist_next[k] + 1) % COORD_WAIT_HISTORY;
	if (c->hist_n[k] < COORD_WAIT_HISTORY)
		c->hist_n[k]++;
}

/* The lower median of @v[0..n) (sorts it); n > 0. */
static uint64_t median(uint64_t *v, unsigned int n)
{
	for (unsigned int i = 1; i < n; i++)
		for (unsigned int j = i; j && v[j - 1] > v[j]; j--) {
			uint64_t t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[(n - 1) / 2];
}

/* How much longer a wait of kind @k, @age old, is expected to last. */
static uint64_t expected_rest(const struct coord *c, enum coord_wait_kind k, uint64_t age,
			      const char **from)
{
	uint64_t r[COORD_WAIT_HISTORY];
	unsigned int m = 0;

	if (!c->hist_n[k]) {
		*from = "prior";
		return max_u64(c->cfg.prior_wait_ns > age ? c->cfg.prior_wait_ns - age : 0, age);
	}
	for (unsigned int i = 0; i < c->hist_n[k]; i++)
		if (c->hist[k][i] > age)
			r[m++] = c->hist[k][i] - age;
	if (!m) {	/* longer than every wait seen: as long again */
		*from = "age";
		return age;
	}
	*from = "history";
	return median(r, m);
}

static void decided(struct coord *c, const struct coord_decision *d)
{
	if (d->offload)
		c->st.decisions_offload++;
	else
		c->st.decisions_not++;
	log_info(c->subject, "offload decision (%s): %s (%s)", coord_profile_name(d->profile),
		 d->offload ? "offload" : d->final ? "no" : "not yet", d->reason);
	if (c->ops->decision)
		c->ops->decision(c->arg, d);
}

/*
 * The cost profile at @now: fills @d; returns when to ask again
 * (NO_DEADLINE: not in this cycle; @d->offload: now).
 */
static uint64_t cost_decide(struct coord *c, uint64_t now, struct coord_decision *d)
{
	struct coord_offload_bytes b = { 0 };
	uint64_t timer = timer_resume_time(c, true), best = COORD_NO_DEADLINE;
	double cost;

	d->budget_ns = timer == COORD_NO_DEADLINE ? COORD_NO_DEADLINE :
		       timer > now ? timer - now : 0;
	d->reason = offload_refusal(c);
	if (d->reason) {
		d->final = true;
		return COORD_NO_DEADLINE;
	}
	if (c->ops->offload_bytes(c->arg, &b) < 0) {
		d->reason = "no_estimate";	/* cannot price it: the seed rule */
		return COORD_NO_DEADLINE;
	}
	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		const struct coord_wait *w = &c->waits[i];
		uint64_t age, rest;
		const char *from;

		if (!w->used || w->ready)
			continue;
		age = now > w->start_ns ? now - w->start_ns : 0;
		rest = expected_rest(c, w->kind, age, &from);
		if (rest < best) {
			best = rest;
			d->kind = w->kind;
			d->age_ns = age;
			d->expected_rest_ns = rest;
			d->expected_from = from;
			d->samples = c->hist_n[w->kind];
		}
	}
	d->write_bytes = b.to_write;
	d->write_bps_measured = c->write_bps != 0;
	d->write_bps = c->write_bps ? c->write_bps : max_u64(c->cfg.assumed_write_bps, 1);
	cost = (double)c->cfg.offload_fixed_ns +
	       (double)b.to_write * (double)NS_PER_SEC / (double)d->write_bps;
	d->cost_ns = cost >= (double)COORD_NO_DEADLINE ? COORD_NO_DEADLINE : (uint64_t)cost;
	if (d->cost_ns >= d->budget_ns) {
		d->reason = "budget";		/* the guest's timer comes first */
		d->final = true;
		return COORD_NO_DEADLINE;
	}
	if (c->has_caps) {
		d->reason = "pressure";		/* memory is short: whatever it costs */
		d->offload = true;
		return now;
	}
	if (cost * (double)c->cfg.cost_ratio > (double)d->expected_rest_ns) {
		d->reason = "cost";		/* not yet: ask again at twice the age */
		return add_sat(now, max_u64(d->age_ns, c->cfg.handoff_delay_ns));
	}
	d->reason = "cheap";
	d->offload = true;
	return now;
}

/*
 * PAUSED: decide whether and when this cycle offloads; sets offload_at_ns
 * (and offload_recheck) and reports the decision.  True: offload now.
 */
static bool offload_decide(struct coord *c)
{
	uint64_t now = clock_now(c);
	struct coord_decision d = {
		.profile = c->cfg.profile,
		.budget_ns = COORD_NO_DEADLINE,
		.at_ns = COORD_NO_DEADLINE,
	};
	uint64_t t = COORD_NO_DEADLINE;
	bool seed = c->cfg.profile == COORD_PROFILE_SEED || !c->ops->offload_bytes;

	c->offload_recheck = false;
	if (!seed) {
		t = cost_decide(c, now, &d);
		if (!d.offload && t != COORD_NO_DEADLINE)
			c->offload_recheck = true;
		/* no estimate from the pager: decided as the seed rule */
		seed = !d.offload && !d.final && !c->offload_recheck;
	}
	if (seed) {
		const char *why;

		d = (struct coord_decision){ .profile = COORD_PROFILE_SEED,
					     .budget_ns = COORD_NO_DEADLINE };
		t = seed_offload_time(c, &why);
		d.reason = why;
		d.offload = t != COORD_NO_DEADLINE;
		d.final = !d.offload;
		if (c->budget_deadline_ns != COORD_NO_DEADLINE)
			d.budget_ns = c->budget_deadline_ns > now ? c->budget_deadline_ns - now : 0;
	}
	d.at_ns = d.offload ? t : COORD_NO_DEADLINE;
	c->offload_at_ns = t;
	decided(c, &d);
	return d.offload && t <= now;
}

/* An offload ended well: learn the store's write speed from it. */
static void learn_write_speed(struct coord *c, uint64_t dur_ns)
{
	struct coord_offload_bytes b = { 0 };
	double bps;

	if (!c->ops->offload_bytes || c->ops->offload_bytes(c->arg, &b) < 0 ||
	    b.last_written < (1u << 20) || !dur_ns)
		return;		/* too little written to time the store */
	bps = (double)b.last_written * (double)NS_PER_SEC / (double)dur_ns;
	c->write_bps = c->write_bps ? (uint64_t)((3.0 * (double)c->write_bps + bps) / 4.0) :
		       (uint64_t)bps;
}

/* ---- resume breakdown ----------------------------------------------- */

static void breakdown_end(struct coord *c, bool acked)
{
	uint64_t now = clock_now(c);

	if (!c->rb_active)
		return;
	c->rb_active = false;
	c->rb.acked = acked;
	if (acked && c->rb.resumed_sent)
		c->rb.ack_ns = now - (c->rb_running_ns + c->rb.resumed_ns);
	c->rb.total_ns = now - c->rb.requested_at_ns;
	if (c->ops->resume_breakdown)
		c->ops->resume_breakdown(c->arg, &c->rb);
}

static void start_offload(struct coord *c, const char *why)
{
	uint64_t now = clock_now(c);
	int err;

	c->offload_at_ns = COORD_NO_DEADLINE;
	c->has_offloaded = true;
	c->last_offload_ns = now;
	c->offload_cancel_sent = false;
	set_state(c, COORD_OFFLOADING, why);
	err = c->ops->offload(c->arg);
	if (err)
		coord_offload_done(c, err);
}

/* ---- public -------------------------------------------------------- */

struct coord *coord_new(const struct coord_config *cfg, const struct coord_ops *ops,
			void *arg, const char *subject)
{
	struct coord *c;

	if (!ops || !ops->now || !ops->arm_timer || !ops->pause || !ops->resume) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (cfg)
		c->cfg = *cfg;
	else
		coord_config_default(&c->cfg);
	c->ops = ops;
	c->arg = arg;
	snprintf(c->subject, sizeof(c->subject), "%s", subject ? subject : "coord");
	c->state = COORD_RUNNING;
	c->backoff_ns = c->cfg.busy_backoff_ns;
	c->armed_ns = COORD_NO_DEADLINE;
	c->budget_deadline_ns = COORD_NO_DEADLINE;
	c->offload_at_ns = COORD_NO_DEADLINE;
	c->resume_retry_at_ns = COORD_NO_DEADLINE;
	c->last_ev.next_timer_ns = COORD_BUDGET_UNKNOWN;
	return c;
}

void coord_free(struct coord *c)
{
	free(c);
}

enum coord_state coord_state(const struct coord *c)
{
	return c->state;
}

bool coord_managed(const struct coord *c)
{
	return c->managed;
}

bool coord_moved(const struct coord *c)
{
	return c->st.transitions != 0;
}

void coord_get_stats(const struct coord *c, struct coord_stats *st)
{
	*st = c->st;
}

const struct coord_config *coord_config(const struct coord *c)
{
	return &c->cfg;
}

void coord_set_config(struct coord *c, const struct coord_config *cfg)
{
	c->cfg = *cfg;
	c->backoff_ns = c->cfg.busy_backoff_ns;
	coord_rearm(c);
}

void coord_get_learned(const struct coord *c, struct coord_learned *l)
{
	*l = (struct coord_learned){ .write_bps = c->write_bps };
	for (int k = 0; k < COORD_NR_WAIT_KINDS; k++) {
		uint64_t v[COORD_WAIT_HISTORY];

		l->samples[k] = c->hist_n[k];
		if (!c->hist_n[k])
			continue;
		memcpy(v, c->hist[k], c->hist_n[k] * sizeof(v[0]));
		l->median_wait_ns[k] = median(v, c->hist_n[k]);
	}
}

const struct coord_evidence *coord_last_evidence(const struct coord *c)
{
	return &c->last_ev;
}

void coord_set_managed(struct coord *c, bool managed)
{
	if (c->managed == managed)
		return;
	c->managed = managed;
	log_info(c->subject, "%s", managed ? "managed" : "unmanaged");
	if (managed) {
		if (c->state == COORD_RUNNING && coord_nr_waits(c))
			settle(c, c->cfg.handoff_delay_ns, "managed");
	} else {
		switch (c->state) {
		case COORD_WAITING:
			settle(c, 0, "unmanaged");
			break;
		case COORD_HANDOFF:
			if (c->awaiting_ack) {
				abort_handoff(c);
				settle(c, 0, "unmanaged");
			} else {
				start_resume(c, COORD_RESUME_MANUAL, "unmanaged");
			}
			break;
		case COORD_PAUSED:
		case COORD_OFFLOADING:
		case COORD_OFFLOADED:
			start_resume(c, COORD_RESUME_MANUAL, "unmanaged");
			break;
		default:
			break;
		}
	}
	coord_rearm(c);
}

void coord_tick(struct coord *c)
{
	uint64_t now = clock_now(c);

	c->armed_ns = 0;	/* the timer fired: always tell the caller again */
	switch (c->state) {
	case COORD_RUNNING:
	case COORD_WAITING:
		if (c->awaiting_resume_ack) {
			if (now < c->resume_ack_deadline_ns)
				break;
			log_warn(c->subject, "no RESUME_ACK for request %llu: delivering anyway",
				 (unsigned long long)c->resume_ack_req_id);
			c->awaiting_resume_ack = false;
			breakdown_end(c, false);
			deliver_pending(c);
		}
		if (c->state == COORD_WAITING && now >= c->handoff_at_ns) {
			if (c->link_up && waits_allow(c, false))
				start_handoff(c, false, "handoff_delay");
			else
				c->handoff_at_ns = COORD_NO_DEADLINE;	/* until the link is up */
		}
		break;
	case COORD_HANDOFF:
		if (c->awaiting_ack && now >= c->ack_deadline_ns) {
			log_warn(c->subject, "no HANDOFF_ACK for request %llu within %llu ms",
				 (unsigned long long)c->req_id,
				 (unsigned long long)(c->cfg.ack_timeout_ns / NS_PER_MS));
			c->st.handoff_timeouts++;
			abort_handoff(c);
			settle(c, next_backoff(c), "ack_timeout");
		}
		break;
	case COORD_PAUSED:
	case COORD_OFFLOADED:
		if (now >= max_pause_time(c))
			start_resume(c, COORD_RESUME_FAILSAFE, "max_pause");
		else if (now >= timer_resume_time(c, false))
			start_resume(c, COORD_RESUME_TIMER, "guest_timer");
		else if (c->state == COORD_PAUSED && now >= c->offload_at_ns &&
			 (!c->offload_recheck || offload_decide(c)))
			start_offload(c, "offload_policy");
		break;
	case COORD_OFFLOADING:
		if (now >= max_pause_time(c))
			start_resume(c, COORD_RESUME_FAILSAFE, "max_pause");
		else if (now >= timer_resume_time(c, true))
			start_resume(c, COORD_RESUME_TIMER, "guest_timer");
		break;
	case COORD_RESUMING:
		if (now >= c->resume_retry_at_ns) {
			int err;

			c->resume_retry_at_ns = COORD_NO_DEADLINE;
			err = c->ops->resume(c->arg);
			if (err)
				coord_resume_done(c, err);
		}
		break;
	default:
		break;
	}
	coord_rearm(c);
}

int coord_wait_start(struct coord *c, const char *id, enum coord_wait_kind kind,
		     uint32_t flags)
{
	struct coord_wait *w = NULL;
	size_t n = strnlen(id, COORD_WAIT_ID_MAX);

	if (!n || n >= COORD_WAIT_ID_MAX || (unsigned int)kind >= COORD_NR_WAIT_KINDS ||
	    (flags & ~COORD_WAIT_CONFIRM))
		return -EINVAL;
	if (wait_find(c, id))
		return -EEXIST;
	for (unsigned int i = 0; i < COORD_MAX_WAITS && !w; i++)
		if (!c->waits[i].used)
			w = &c->waits[i];
	if (!w) {
		/* Make room: the oldest ready wait still awaiting confirmation. */
		for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
			struct coord_wait *x = &c->waits[i];

			if (x->ready && (!w || x->ready_ns < w->ready_ns))
				w = x;
		}
		if (!w)
			return -ENOSPC;
		log_warn(c->subject, "wait %s never confirmed: dropped", w->id);
		c->st.waits_dropped++;
		wait_retire(c, w, clock_now(c), true);
	}
	w->used = true;
	w->kind = kind;
	w->flags = flags;
	w->start_ns = clock_now(c);
	snprintf(w->id, sizeof(w->id), "%s", id);
	c->st.waits_started++;
	c->st.waits_by_kind[kind]++;
	log_info(c->subject, "wait %s (%s) started", w->id, coord_wait_kind_name(kind));
	if (c->managed && c->state == COORD_RUNNING)
		settle(c, c->cfg.handoff_delay_ns, "wait_start");
	coord_rearm(c);
	return 0;
}

/*
 * @w's data is ready while the guest runs (WAITING, or a handoff it has
 * not acknowledged): it takes the data in now.  For a wait whose delivery
 * is confirmed, what it faults on until then is what a data resume would
 * need: a critical window (->data_window), one for several such waits.
 */
static void data_window_open(struct coord *c, const struct coord_wait *w)
{
	if (!(w->flags & COORD_WAIT_CONFIRM) || c->critical_window || !c->ops->data_window)
		return;
	c->ops->data_window(c->arg);
	c->critical_window = true;
}

int coord_wait_ready(struct coord *c, const char *id)
{
	struct coord_wait *w = wait_find(c, id);

	if (!w)
		return -ENOENT;
	if (w->ready)
		return -EALREADY;
	w->ready = true;
	w->ready_ns = clock_now(c);
	c->st.waits_ready++;
	history_add(c, w->kind, w->ready_ns - w->start_ns);
	log_info(c->subject, "wait %s data ready after %llu ms in %s", w->id,
		 (unsigned long long)((w->ready_ns - w->start_ns) / NS_PER_MS),
		 coord_state_name(c->state));

	switch (c->state) {
	case COORD_WAITING:
		data_window_open(c, w);
		if (!coord_nr_waits(c))
			settle(c, 0, "data_ready");
		else
			deliver_pending(c);
		break;
	case COORD_HANDOFF:
		if (c->awaiting_ack) {
			data_window_open(c, w);
			abort_handoff(c);
			settle(c, c->cfg.handoff_delay_ns, "data_ready");
		} else {
			start_resume(c, COORD_RESUME_DATA_READY, "data_ready");
		}
		break;
	case COORD_PAUSED:
	case COORD_OFFLOADING:
	case COORD_OFFLOADED:
		start_resume(c, COORD_RESUME_DATA_READY, "data_ready");
		break;
	default:	/* RUNNING, RESUMING: delivered when it can be */
		deliver_pending(c);
		break;
	}
	coord_rearm(c);
	return 0;
}

int coord_wait_delivered(struct coord *c, const char *id)
{
	struct coord_wait *w = wait_find(c, id);
	struct coord_wait_info info;

	if (!w)
		return coord_wait_get(c, id, &info) ? -ENOENT : -EALREADY;
	if (!w->ready)
		return -EBUSY;	/* data not ready yet */
	wait_deliver(c, w, clock_now(c));
	deliver_pending(c);	/* ends the critical window with the last one */
	coord_rearm(c);
	return 0;
}

int coord_external_event(struct coord *c)
{
	int ret = 0;

	switch (c->state) {
	case COORD_HANDOFF:
		if (c->awaiting_ack) {
			abort_handoff(c);
			settle(c, c->cfg.handoff_delay_ns, "external_event");
		} else {
			start_resume(c, COORD_RESUME_EXTERNAL, "external_event");
		}
		break;
	case COORD_PAUSED:
	case COORD_OFFLOADING:
	case COORD_OFFLOADED:
		start_resume(c, COORD_RESUME_EXTERNAL, "external_event");
		break;
	case COORD_WAITING:
		/* the guest has work: restart the handoff delay */
		c->handoff_at_ns = add_sat(clock_now(c), c->cfg.handoff_delay_ns);
		break;
	default:
		ret = -EALREADY;
		break;
	}
	coord_rearm(c);
	return ret;
}

int coord_manual_pause(struct coord *c)
{
	if (c->state != COORD_RUNNING && c->state != COORD_WAITING)
		return c->state == COORD_RESUMING ? -EBUSY : -EALREADY;
	if (c->awaiting_resume_ack)
		return -EBUSY;
	start_handoff(c, true, "manual_pause");
	coord_rearm(c);
	return 0;
}

int coord_manual_offload(struct coord *c)
{
	if (!offload_possible(c))
		return -EOPNOTSUPP;
	if (c->state == COORD_OFFLOADING || c->state == COORD_OFFLOADED)
		return -EALREADY;
	if (c->state != COORD_PAUSED)
		return -EBUSY;
	start_offload(c, "manual_offload");
	coord_rearm(c);
	return 0;
}

int coord_manual_resume(struct coord *c)
{
	switch (c->state) {
	case COORD_HANDOFF:
		if (c->awaiting_ack) {
			abort_handoff(c);
			settle(c, c->cfg.handoff_delay_ns, "manual_resume");
			break;
		}
		/* fall through */
	case COORD_PAUSED:
	case COORD_OFFLOADING:
	case COORD_OFFLOADED:
		start_resume(c, COORD_RESUME_MANUAL, "manual_resume");
		break;
	default:
		return -EALREADY;
	}
	coord_rearm(c);
	return 0;
}

void coord_link_up(struct coord *c)
{
	c->link_up = true;
	log_info(c->subject, "guest link up");
	if (c->state == COORD_WAITING && c->handoff_at_ns == COORD_NO_DEADLINE)
		c->handoff_at_ns = add_sat(clock_now(c), c->cfg.handoff_delay_ns);
	coord_rearm(c);
}

void coord_link_down(struct coord *c)
{
	c->link_up = false;
	log_warn(c->subject, "guest link lost in %s", coord_state_name(c->state));
	switch (c->state) {
	case COORD_HANDOFF:
		if (c->awaiting_ack) {
			c->awaiting_ack = false;
			c->req_id = 0;
			settle(c, c->cfg.handoff_delay_ns, "link_lost");
		} else {
			start_resume(c, COORD_RESUME_FAILSAFE, "link_lost");
		}
		break;
	case COORD_PAUSED:
	case COORD_OFFLOADING:
	case COORD_OFFLOADED:
		start_resume(c, COORD_RESUME_FAILSAFE, "link_lost");
		break;
	default:
		break;
	}
	if (c->awaiting_resume_ack) {
		c->awaiting_resume_ack = false;
		breakdown_end(c, false);
		deliver_pending(c);
	}
	coord_rearm(c);
}

void coord_handoff_ack(struct coord *c, uint64_t req_id, bool ready,
		       const struct coord_evidence *ev)
{
	uint64_t now = clock_now(c);

	if (c->state != COORD_HANDOFF || !c->awaiting_ack || req_id != c->req_id) {
		log_info(c->subject, "stale HANDOFF_ACK for request %llu ignored",
			 (unsigned long long)req_id);
		return;
	}
	c->awaiting_ack = false;
	if (ev)
		c->last_ev = *ev;
	/*
	 * The guest measured "next timer in N ns" somewhere between the
	 * request and this ack (an evidence window and a device quiesce
	 * later), so its timer is due no later than request + N on the
	 * host's clock: place the deadline there, not at ack + N, which would
	 * spend the resume margin on the handoff's round trip.  With a
	 * backend that keeps the guest clock running that is the timer's
	 * wall-clock time; with one that stops it, the guest steps
	 * CLOCK_REALTIME on RESUMED, so a wall-clock timer fires then, and a
	 * monotonic one runs late by the time paused whatever we do (the
	 * guest gets its remaining budget after the resume, below).
	 */
	if (ready && ev && ev->next_timer_ns != COORD_BUDGET_UNKNOWN &&
	    add_sat(add_sat(c->handoff_sent_ns, ev->next_timer_ns), timer_slack(c)) <=
	    add_sat(now, c->cfg.timer_margin_ns)) {
		/* the guest's timer is due before we could even pause (or offload) */
		ready = false;
		c->last_ev.busy_reasons |= 1U << 4;	/* VMNAP_BUSY_TIMER */
	}
	if (!ready) {
		uint32_t bits = c->last_ev.busy_reasons;

		c->st.handoff_busy++;
		for (unsigned int b = 0; b < COORD_BUSY_BITS; b++)
			if (bits & (1U << b))
				c->st.busy_by_reason[b]++;
		abort_handoff(c);
		if (c->manual)
			settle(c, c->cfg.handoff_delay_ns, "busy");
		else
			settle(c, next_backoff(c), "busy");
		coord_rearm(c);
		return;
	}
	c->st.handoff_ready++;
	c->backoff_ns = c->cfg.busy_backoff_ns;
	c->ack_ns = now;
	c->budget_deadline_ns = (!ev || ev->next_timer_ns == COORD_BUDGET_UNKNOWN) ?
		COORD_NO_DEADLINE : add_sat(c->handoff_sent_ns, ev->next_timer_ns);
	c->pause_inflight = true;
	{
		int err = c->ops->pause(c->arg);

		if (err)
			coord_pause_done(c, err);
	}
	coord_rearm(c);
}

void coord_resume_ack(struct coord *c, uint64_t req_id)
{
	if (!c->awaiting_resume_ack || req_id != c->resume_ack_req_id) {
		log_info(c->subject, "unexpected RESUME_ACK for request %llu ignored",
			 (unsigned long long)req_id);
		return;
	}
	c->awaiting_resume_ack = false;
	if (c->rb_active && c->rb.offloaded)
		c->probe_done = true;	/* the pager has the wake path */
	breakdown_end(c, true);
	deliver_pending(c);
	coord_rearm(c);
}

void coord_set_pressure_caps(struct coord *c, const struct coord_pressure_caps *caps)
{
	c->has_caps = caps != NULL;
	if (caps)
		c->caps = *caps;
}

int coord_pressure_offload(struct coord *c)
{
	bool any = false;

	if (!offload_possible(c))
		return -EOPNOTSUPP;
	if (c->state == COORD_OFFLOADING || c->state == COORD_OFFLOADED)
		return -EALREADY;
	if (c->state != COORD_PAUSED)
		return -EBUSY;
	for (unsigned int i = 0; i < COORD_MAX_WAITS; i++) {
		const struct coord_wait *w = &c->waits[i];

		if (!w->used || w->ready)
			continue;
		if (!c->cfg.kind[w->kind].may_offload)
			return -EPERM;
		any = true;
	}
	if (!any && !c->manual)
		return -EPERM;	/* resuming anyway: no wait is left */
	start_offload(c, "memory_pressure");
	coord_rearm(c);
	return 0;
}

uint64_t coord_expected_wait_ns(const struct coord *c)
{
	uint64_t now, t;

	if (c->state != COORD_PAUSED && c->state != COORD_OFFLOADED)
		return 0;
	now = c->ops->now(c->arg);
	t = min_u64(timer_resume_time(c, false), max_pause_time(c));
	return t > now ? t - now : 0;
}

void coord_pause_done(struct coord *c, int err)
{
	if (c->state != COORD_HANDOFF || !c->pause_inflight) {
		log_warn(c->subject, "pause completion in %s ignored", coord_state_name(c->state));
		return;
	}
	c->pause_inflight = false;
	if (err) {
		log_err(c->subject, "pause failed: %s", strerror(-err));
		c->st.pause_errors++;
		abort_handoff(c);
		c->resume_pending = COORD_RESUME_NONE;
		settle(c, next_backoff(c), "pause_failed");
		coord_rearm(c);
		return;
	}
	c->paused_at_ns = clock_now(c);
	c->st.pauses++;
	set_state(c, COORD_PAUSED, c->manual ? "paused_manual" : "paused");
	if (c->resume_pending) {
		start_resume(c, c->resume_pending, "resume_pending");
	} else if (!c->manual && !coord_nr_waits(c)) {
		start_resume(c, COORD_RESUME_DATA_READY, "no_waits");
	} else if (offload_decide(c)) {
		start_offload(c, "offload_policy");
	}
	coord_rearm(c);
}

/* Resume now to learn the wake path (see "Wake-path probe" in coord.h)? */
static bool probe_due(const struct coord *c)
{
	return c->cfg.wake_probe && !c->probe_done && !c->manual &&
	       c->link_up && c->ops->resumed && c->ops->pre_resume;
}

void coord_offload_done(struct coord *c, int err)
{
	if (c->state != COORD_OFFLOADING) {
		log_warn(c->subject, "offload completion in %s ignored", coord_state_name(c->state));
		return;
	}
	c->offloaded = true;	/* some pages may be out even after an error */
	c->offloaded_at_ns = clock_now(c);
	if (err == -ECANCELED) {
		c->st.offload_cancels++;
		set_state(c, COORD_OFFLOADED, "offload_cancelled");
		if (c->resume_pending)
			start_resume(c, c->resume_pending, "resume_pending");
		coord_rearm(c);
		return;
	}
	if (err) {
		log_err(c->subject, "offload failed: %s: resuming", strerror(-err));
		c->st.offload_errors++;
		set_state(c, COORD_OFFLOADED, "offload_failed");
		start_resume(c, COORD_RESUME_FAILSAFE, "pager_error");
		coord_rearm(c);
		return;
	}
	c->st.offloads++;
	learn_write_speed(c, c->offloaded_at_ns - c->last_offload_ns);
	set_state(c, COORD_OFFLOADED, "offloaded");
	if (c->resume_pending) {
		start_resume(c, c->resume_pending, "resume_pending");
	} else if (probe_due(c)) {
		c->probe_done = true;
		c->probing = true;
		c->st.wake_probes++;
		start_resume(c, COORD_RESUME_TIMER, "wake_probe");
	}
	coord_rearm(c);
}

void coord_offload_estimate_changed(struct coord *c)
{
	if (c->state != COORD_PAUSED || c->cfg.profile != COORD_PROFILE_COST ||
	    !c->ops->offload_bytes)
		return;
	if (offload_decide(c))
		start_offload(c, "offload_policy");
	coord_rearm(c);
}

void coord_resume_done(struct coord *c, int err)
{
	uint64_t now = clock_now(c);
	uint64_t paused_ns;
	uint64_t req_id = c->req_id;

	if (c->state != COORD_RESUMING) {
		log_warn(c->subject, "resume completion in %s ignored", coord_state_name(c->state));
		return;
	}
	if (err) {
		/* The VM stays stopped: retry; the fail-safe is to keep trying. */
		log_err(c->subject, "resume failed: %s: retrying", strerror(-err));
		c->st.resume_errors++;
		c->resume_retry_at_ns = add_sat(now, c->cfg.busy_backoff_ns);
		coord_rearm(c);
		return;
	}
	paused_ns = now - c->paused_at_ns;
	c->st.paused_ns_total += paused_ns;
	if (c->offloaded)
		c->st.offloaded_ns_total += now - c->offloaded_at_ns;
	c->st.resumes_by_reason[c->resume_reason]++;
	c->req_id = 0;
	c->rb_running_ns = now;
	c->rb.vmm_ns = now - c->rb.requested_at_ns - c->rb.pre_resume_ns;
	if (req_id && c->link_up && c->ops->resumed) {
		c->ops->resumed(c->arg, req_id, paused_ns, c->resume_reason, c->offloaded);
		c->rb.resumed_sent = true;
		c->rb.resumed_ns = clock_now(c) - now;
		c->awaiting_resume_ack = true;
		c->resume_ack_req_id = req_id;
		c->resume_ack_deadline_ns = add_sat(now, c->cfg.ack_timeout_ns);
	} else {
		breakdown_end(c, false);	/* no guest link: it ends here */
	}
	{
		uint64_t delay = c->cfg.handoff_delay_ns;

		/* Frozen guest clock: let the guest reach the timer we resumed for. */
		if (c->resume_reason == COORD_RESUME_TIMER && !c->rb.probe &&
		    c->cfg.guest_clock_stops &&
		    c->last_ev.next_timer_ns != COORD_BUDGET_UNKNOWN)
			delay = add_sat(add_sat(c->last_ev.next_timer_ns, c->cfg.timer_margin_ns),
					c->cfg.handoff_delay_ns);
		settle(c, delay, coord_resume_reason_name(c->resume_reason));
	}
	coord_rearm(c);
}

void coord_pager_error(struct coord *c, int err)
{
	c->st.pager_errors++;
	log_err(c->subject, "pager error in %s: %s%s", coord_state_name(c->state),
		strerror(-err), c->state == COORD_PAUSED || c->state == COORD_OFFLOADING ||
		c->state == COORD_OFFLOADED ? ": fail-safe resume" : "");
	start_resume(c, COORD_RESUME_FAILSAFE, "pager_error");
	coord_rearm(c);
}
