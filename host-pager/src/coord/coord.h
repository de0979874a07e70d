/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * coord.h - the wait coordinator: one state machine per VM.
 *
 *   RUNNING ─wait_start─▶ WAITING ─handoff_delay─▶ HANDOFF ─ack READY,
 *   paused─▶ PAUSED ─offload policy─▶ OFFLOADING ─done─▶ OFFLOADED
 *   PAUSED/OFFLOADED ─resume trigger─▶ RESUMING ─resumed─▶ RUNNING|WAITING
 *
 * HANDOFF ─BUSY or ack timeout─▶ WAITING (retry after backoff).
 * A resume trigger during OFFLOADING cancels the offload (ops->offload_cancel)
 * and the VM resumes as soon as the offload reports back.
 * A wait that ends before the handoff costs nothing; a wait that ends
 * while paused resumes at once; a timer, external event or fail-safe
 * resume leaves the remaining waits pending, so a new handoff follows
 * (several handoffs per request).
 *
 * Pure logic: no I/O, no clock, no event loop.  Everything the coordinator
 * does to the world goes through struct coord_ops; the caller arms one
 * timer at the deadline coord_ops.arm_timer names and calls coord_tick()
 * when it fires.  Asynchronous actions (pause, resume, offload) report back
 * through coord_pause_done(), coord_resume_done(), coord_offload_done(),
 * which may also be called from inside the action itself.  The guest link
 * reports through coord_link_up/down(), coord_handoff_ack() and
 * coord_resume_ack().  Unit tests drive it with a fake clock.
 *
 * Offload policy (coord_config.profile):
 *   cost  (default) offload a paused VM when what the offload costs is small
 *         against what it saves: the bytes it must write (ops->offload_bytes:
 *         dirty and never-stored pages) at the store's write speed (measured
 *         from this VM's offloads: bytes written / duration, an EWMA; until
 *         the first measurement assumed_write_bps), plus offload_fixed_ns,
 *         times cost_ratio must not exceed the expected rest of the wait,
 *         and the guest's timer budget must cover the offload.  The expected
 *         rest is learned per VM and wait kind: the median of (d - age) over
 *         the last COORD_WAIT_HISTORY waits of that kind that lasted d > age
 *         (none yet: the larger of prior_wait_ns - age and age; all
 *         shorter: age).  With several
 *         waits, the shortest expectation counts (any ready wait resumes).
 *         A "not yet" (cost against expectation) is asked again when the
 *         wait's age doubles; a "no" for the budget is final for the cycle.
 *         Timer slack: a cycle that may offload lets the guest's timer run
 *         up to timer_slack_ns late so the offload fits: the guest is
 *         paused even when its timer is due before the pause could take
 *         effect, the budget the offload must fit in ends timer_slack_ns
 *         after the timer, and an offload under way is not cancelled for
 *         the timer until then.  Paused or offloaded, the VM still resumes
 *         for the timer on time (at once, when the offload used the
 *         slack), so a timer runs late only while an offload finishes.
 *         No cooldown and no fixed delay: re-offloading a VM whose guest
 *         timer dirtied little costs little.  Without ops->offload_bytes
 *         the cost profile decides as the seed rule does.
 *   seed  the fixed rule: offload offload_after_ns into the wait, when the
 *         timer budget is at least offload_min_budget_ns and
 *         offload_cooldown_ns have passed since this VM's last offload.
 * Every decision, yes or no, goes to ops->decision with its inputs.
 *
 * Restore (ops->restore): before each resume the coordinator says how
 * pages come back.  A resume for the guest's own timer is
 * COORD_RESTORE_LAZY (faults only): the guest runs its timer and goes
 * idle, and is paused and offloaded again; every other resume is
 * COORD_RESTORE_POLICY, the VM's own restore policy (eager, working-set or
 * lazy), which is the pager's, set outside the coordinator.  Every resume
 * of a VM offloaded in its cycle, whatever its reason and restore, first
 * has ops->pre_resume bring back the pages its wake path faults on.
 *
 * Wake-path probe (cfg.wake_probe): the pager learns the pages a guest
 * faults on between a resume and its RESUME_ACK (the resume-critical set,
 * ops->pre_resume) only from a resume of an offloaded VM.  Until one has
 * been acknowledged the set is empty, and the first such resume - often
 * the first data resume, when the VM's first offload came late in a wait
 * - faults its whole wake path page by page.  So once in a VM's life, when
 * an offload ends with nothing pending, no such resume was acknowledged
 * yet and the guest link is up, the coordinator resumes the VM at once as
 * for a guest timer (lazy restore; the guest is told "timer", runs what is
 * due and goes idle), the pager records the wake path, and the usual
 * handoff pauses the VM again; with dirty tracking the next offload writes
 * only what that resume dirtied.
 *
 * Resume breakdown: every resume is timed from the request (resume
 * trigger) through the pre-resume restore and the VMM's resume (vCPUs
 * running) to RESUMED sent and the guest's RESUME_ACK, and given to
 * ops->resume_breakdown once it ends (acknowledged, timed out, or without
 * a guest link at once).
 *
 * A VM is unmanaged until coord_set_managed(c, true): waits are counted
 * (and delivered at once) but nothing is handed off, paused or offloaded.
 *
 * Response delivery latency is "data ready -> the guest has the data".
 * vmnapd learns that the guest can have it as follows: if the VM was not
 * paused or handing off when the wait became ready, at once (latency 0);
 * otherwise when the guest answers RESUMED with RESUME_ACK (its devices
 * are unquiesced and it runs: a response sent to it now is received), or
 * when the VMM's resume completed if the VM has no guest link.  A wait
 * started with COORD_WAIT_CONFIRM is delivered only when the caller says
 * so (coord_wait_delivered(), API .../delivered), e.g. after the in-guest
 * agent acknowledged the response: that is the end-to-end figure.
 */
#ifndef VMNAP_COORD_H
#define VMNAP_COORD_H

#include <stdbool.h>
#include <stdint.h>

enum coord_state {
	COORD_RUNNING = 0,
	COORD_WAITING,
	COORD_HANDOFF,
	COORD_PAUSED,
	COORD_OFFLOADING,
	COORD_OFFLOADED,
	COORD_RESUMING,
	COORD_NR_STATES,
};

enum coord_wait_kind {
	COORD_WAIT_MODEL = 0,	/* a model request */
	COORD_WAIT_NETWORK,	/* other network I/O */
	COORD_WAIT_FILE,	/* a file read */
	COORD_NR_WAIT_KINDS,
};

/* Why the VM resumed; numbering matches enum vmnap_resume_reason. */
enum coord_resume_reason {
	COORD_RESUME_NONE = 0,
	COORD_RESUME_DATA_READY = 1,
	COORD_RESUME_TIMER = 2,
	COORD_RESUME_EXTERNAL = 3,
	COORD_RESUME_FAILSAFE = 4,
	COORD_RESUME_MANUAL = 5,
	COORD_NR_RESUME_REASONS,
};

/* Handoff flags: match VMNAP_HF_* */
#define COORD_HANDOFF_OFFLOAD	(1U << 0)
/* coord_wait_start() flags */
#define COORD_WAIT_CONFIRM	(1U << 0)	/* delivery confirmed by caller */

#define COORD_WAIT_ID_MAX	64	/* bytes, including the NUL */
#define COORD_MAX_WAITS		32	/* outstanding + undelivered per VM */
#define COORD_DONE_KEEP		32	/* ended waits the API still shows */
#define COORD_BUSY_BITS		8	/* VMNAP_BUSY_* bits counted */
#define COORD_HIST_BUCKETS	32	/* power-of-2 µs: [2^(i-1), 2^i) µs */
#define COORD_NO_DEADLINE	UINT64_MAX
#define COORD_BUDGET_UNKNOWN	UINT64_MAX	/* VMNAP_TIMER_UNKNOWN */

enum coord_profile {
	COORD_PROFILE_COST = 0,		/* offload when cheap against the wait */
	COORD_PROFILE_SEED,		/* fixed delay, budget and cooldown */
	COORD_NR_PROFILES,
};

/* How pages come back after a resume (ops->restore). */
enum coord_restore {
	COORD_RESTORE_POLICY = 0,	/* the VM's restore policy */
	COORD_RESTORE_LAZY,		/* faults only (a timer resume) */
	COORD_NR_RESTORES,
};

#define COORD_WAIT_HISTORY	32	/* waits remembered per kind */

struct coord_kind_policy {
	bool may_pause;
	bool may_offload;
};

/* Every default of the coordinator; coord_config_default() fills it. */
struct coord_config {
	uint64_t handoff_delay_ns;	/* waiting this long: hand off (20 ms) */
	uint64_t offload_after_ns;	/* waiting this long: may offload (50 ms) */
	uint64_t offload_min_budget_ns;	/* guest timer budget needed (1 s) */
	uint64_t offload_cooldown_ns;	/* since this VM's last offload (5 s) */
	uint64_t timer_margin_ns;	/* resume this much before the guest timer (50 ms) */
	uint64_t timer_slack_ns;	/* cost: a guest timer may run this late (100 ms) */
	uint64_t ack_timeout_ns;	/* HANDOFF_ACK deadline (200 ms) */
	uint64_t busy_backoff_ns;	/* first retry after BUSY (20 ms) */
	uint64_t busy_backoff_max_ns;	/* backoff doubles up to this (1 s) */
	uint64_t max_pause_ns;		/* fail-safe: resume after (60 s) */
	enum coord_profile profile;	/* offload policy (cost) */
	uint32_t cost_ratio;		/* cost x this <= expected rest (4) */
	uint64_t offload_fixed_ns;	/* cost of an offload writing nothing (5 ms) */
	uint64_t prior_wait_ns;		/* expected wait with no history (2 s) */
	uint64_t assumed_write_bps;	/* store write speed until measured (1 GiB/s) */
	/*
	 * The pause backend stops the guest's clock too (QEMU stop/cont,
	 * Cloud Hypervisor: the guest's monotonic time does not advance
	 * while paused), so a guest timer is late by the time paused and its
	 * budget does not drain.  After a timer resume the guest then gets
	 * its whole budget of running time (plus the margin) before the next
	 * handoff, instead of being paused again and again short of it.
	 * Set from the backend, not from the config file.
	 */
	bool guest_clock_stops;
	bool wake_probe;		/* probe the wake path once (true) */
	struct coord_kind_policy kind[COORD_NR_WAIT_KINDS];
};

/*
 * Host memory pressure (pressure.h) caps the offload gates that exist only
 * to save I/O: a cycle paused while the caps are set offloads after
 * min(offload_after, cap), with a timer budget of min(min_budget, cap) and
 * min(cooldown, cap) since the last offload.  The VM's own policy is kept
 * (coord_config() still shows it).
 */
struct coord_pressure_caps {
	uint64_t offload_after_ns;	/* 0 ms */
	uint64_t offload_min_budget_ns;	/* 200 ms */
	uint64_t offload_cooldown_ns;	/* 0 ms */
};

struct coord;

/* What an offload writes, as the pager sees it (ops->offload_bytes). */
struct coord_offload_bytes {
	uint64_t to_write;	/* an offload now would write about this much */
	uint64_t last_written;	/* the offload that ended last wrote this */
};

/* One offload decision (ops->decision). */
struct coord_decision {
	enum coord_profile profile;
	bool offload;		/* offload now */
	bool final;		/* no: not asked again in this pause */
	const char *reason;	/* why, one word */
	enum coord_wait_kind kind;	/* of the wait with the shortest expectation */
	uint64_t age_ns;	/* of that wait */
	uint64_t expected_rest_ns;	/* of that wait (cost); 0 (seed) */
	const char *expected_from;	/* "history", "prior", "age" (cost); NULL */
	unsigned int samples;	/* waits of that kind remembered */
	uint64_t budget_ns;	/* until the timer resume; COORD_NO_DEADLINE: unknown */
	uint64_t write_bytes;	/* estimate (cost); 0 unknown */
	uint64_t write_bps;	/* store write speed used (cost) */
	bool write_bps_measured;
	uint64_t cost_ns;	/* offload_fixed + write_bytes / write_bps (cost) */
	uint64_t at_ns;		/* seed: when it offloads (clock) */
};

/* One resume, phase by phase (ops->resume_breakdown); ns. */
struct coord_resume_breakdown {
	enum coord_resume_reason reason;
	enum coord_restore restore;
	bool offloaded;
	bool probe;			/* the wake-path probe (reason: timer) */
	bool acked;			/* RESUME_ACK came (else timed out, or no link) */
	bool resumed_sent;		/* a RESUMED went to the guest */
	uint64_t requested_at_ns;	/* clock */
	uint64_t pre_resume_ns;		/* requested -> pre-resume restore done */
	uint64_t vmm_ns;		/* -> the VMM's vCPUs run */
	uint64_t resumed_ns;		/* -> RESUMED sent */
	uint64_t ack_ns;		/* -> RESUME_ACK (0 without one) */
	uint64_t total_ns;		/* requested -> the end */
};

/*
 * The world, as the coordinator sees it.  Actions return 0 when started
 * (completion is reported later, or from inside the call) or -errno.
 */
struct coord_ops {
	uint64_t (*now)(void *arg);			/* monotonic ns */
	void (*arm_timer)(void *arg, uint64_t deadline_ns);	/* NO_DEADLINE: cancel */
	/* Guest link; NULL handoff means "no link" (pause without handoff). */
	int (*handoff)(void *arg, uint32_t flags, uint32_t deadline_ms, uint64_t *req_id);
	void (*handoff_abort)(void *arg, uint64_t req_id);
	void (*resumed)(void *arg, uint64_t req_id, uint64_t paused_ns,
			enum coord_resume_reason reason, bool offloaded);
	/* VMM: stop and continue the vCPUs. */
	int (*pause)(void *arg);
	int (*resume)(void *arg);
	/* Pager: evict guest RAM (only while paused); NULL: no pager. */
	int (*offload)(void *arg);
	/*
	 * Stop a running offload early: a resume trigger arrived while
	 * OFFLOADING.  coord_offload_done() follows with -ECANCELED (or with
	 * the offload's own result if it ended first).  NULL: the offload
	 * runs to its end before the resume.
	 */
	int (*offload_cancel)(void *arg);
	/*
	 * A resume of a VM whose RAM was offloaded in this cycle is about
	 * to call ->resume (vCPUs still stopped): bring the resume-critical
	 * pages back first.  Synchronous and bounded (a few ms); its result
	 * does not stop the resume.  NULL: none.
	 */
	int (*pre_resume)(void *arg);
	/* ... and the guest has its data again (RESUME_ACK, or delivered
	 * without it, and every ready wait started with COORD_WAIT_CONFIRM
	 * confirmed; at the latest the next handoff): the critical window
	 * after that resume ends. */
	void (*resume_delivered)(void *arg);
	/*
	 * Data became ready for a wait started with COORD_WAIT_CONFIRM while
	 * the guest runs (WAITING, or a handoff not yet acknowledged): it
	 * takes the data in now, on the way a data resume takes, possibly
	 * faulting on what an offload earlier in the wait took out.  A
	 * critical window opens as after a resume from an offload (without
	 * ->pre_resume: the vCPUs run) and ends as ->resume_delivered says.
	 * NULL: none.
	 */
	void (*data_window)(void *arg);
	/* Can this VM be offloaded right now (pager attached, evictable)?
	 * NULL: whenever offload is set. */
	bool (*can_offload)(void *arg);
	/* Every transition, after it happened (events, logs, metrics). */
	void (*transition)(void *arg, enum coord_state from, enum coord_state to,
			   const char *why);
	/* A wait was delivered (ready -> the guest has the data). */
	void (*delivered)(void *arg, const char *wait_id, uint64_t latency_ns);
	/* The pager's view of what offloading costs; -errno when unknown.
	 * NULL: the cost profile decides as the seed rule does. */
	int (*offload_bytes)(void *arg, struct coord_offload_bytes *b);
	/* Every offload decision (events). */
	void (*decision)(void *arg, const struct coord_decision *d);
	/* How pages come back after the resume about to start (called
	 * before ->pre_resume and ->resume).  NULL: the caller's default. */
	void (*restore)(void *arg, enum coord_restore how);
	/* A resume ended (see struct coord_resume_breakdown). */
	void (*resume_breakdown)(void *arg, const struct coord_resume_breakdown *b);
};

struct coord_stats {
	uint64_t waits_started, waits_ready, waits_delivered, waits_dropped;
	uint64_t waits_by_kind[COORD_NR_WAIT_KINDS];
	uint64_t handoffs, handoff_ready, handoff_busy, handoff_timeouts, aborts;
	uint64_t busy_by_reason[COORD_BUSY_BITS];
	uint64_t pauses, pause_errors, offloads, offload_errors, resume_errors;
	uint64_t offload_cancels;	/* offloads cut short by a resume trigger */
	uint64_t pager_errors;		/* coord_pager_error() calls */
	uint64_t resumes_by_reason[COORD_NR_RESUME_REASONS];
	uint64_t paused_ns_total, offloaded_ns_total;
	uint64_t delivery_hist[COORD_HIST_BUCKETS];	/* power-of-2 µs */
	uint64_t delivery_ns_sum;
	uint64_t last_delivery_ns;
	uint64_t transitions;
	uint64_t decisions_offload, decisions_not;	/* offload decisions */
	uint64_t resumes_lazy;		/* resumes told to restore by faults only */
	uint64_t wake_probes;		/* wake-path probe resumes started */
};

/* What the cost profile has learned (for the API). */
struct coord_learned {
	uint64_t write_bps;		/* 0: not measured yet */
	unsigned int samples[COORD_NR_WAIT_KINDS];
	uint64_t median_wait_ns[COORD_NR_WAIT_KINDS];	/* 0: no sample */
};

/* What the last HANDOFF_ACK said (for the API). */
struct coord_evidence {
	uint64_t next_timer_ns;		/* COORD_BUDGET_UNKNOWN if unknown */
	uint32_t busy_reasons;
	uint32_t cpu_idle_permille;
	uint32_t nr_runnable;
	uint32_t io_inflight;
};

void coord_config_default(struct coord_config *cfg);
const char *coord_state_name(enum coord_state s);
const char *coord_wait_kind_name(enum coord_wait_kind k);
/* -1 when unknown. */
int coord_wait_kind_parse(const char *s);
const char *coord_resume_reason_name(enum coord_resume_reason r);
/*
 * The cost profile may offload this VM in its current waits: a pager
 * estimate (ops->offload_bytes) and offload are there, every outstanding
 * wait's kind may offload, no manual pause.  (Whether a cycle does is the
 * policy's decision when the VM is paused.)
 */
bool coord_cost_may_offload(const struct coord *c);
/* The name of VMNAP_BUSY_* bit number @bit ("unknown" past COORD_BUSY_BITS). */
const char *coord_busy_reason_name(unsigned int bit);
const char *coord_profile_name(enum coord_profile p);
int coord_profile_parse(const char *s);			/* -1: unknown */
const char *coord_restore_name(enum coord_restore r);
/* Histogram bucket of a latency: 0 for < 1 µs, i for [2^(i-1), 2^i) µs. */
unsigned int coord_hist_bucket(uint64_t ns);

struct coord *coord_new(const struct coord_config *cfg, const struct coord_ops *ops,
			void *arg, const char *subject);
void coord_free(struct coord *c);

enum coord_state coord_state(const struct coord *c);
bool coord_managed(const struct coord *c);
/* Whether the state has changed since the coordinator came: false while
 * the VM has been RUNNING all along (its boot, its agent starting, the
 * way to its first wait). */
bool coord_moved(const struct coord *c);
void coord_set_managed(struct coord *c, bool managed);
void coord_get_stats(const struct coord *c, struct coord_stats *st);
const struct coord_config *coord_config(const struct coord *c);
void coord_set_config(struct coord *c, const struct coord_config *cfg);
const struct coord_evidence *coord_last_evidence(const struct coord *c);
unsigned int coord_nr_waits(const struct coord *c);	/* outstanding */
void coord_get_learned(const struct coord *c, struct coord_learned *l);

/* The caller's clock reached the armed deadline. */
void coord_tick(struct coord *c);

/* Waits (API).  -EEXIST (id in use), -ENOSPC, -EINVAL, -ENOENT;
 * delivered: -EBUSY (not ready yet), -EALREADY (delivered or dropped). */
int coord_wait_start(struct coord *c, const char *id, enum coord_wait_kind kind,
		     uint32_t flags);
int coord_wait_ready(struct coord *c, const char *id);
int coord_wait_delivered(struct coord *c, const char *id);

enum coord_wait_state {
	COORD_WS_OUTSTANDING,	/* started, data not ready */
	COORD_WS_READY,		/* data ready, the guest does not have it yet */
	COORD_WS_DELIVERED,	/* the guest has it (or can have it: running) */
	COORD_WS_DROPPED,	/* a confirm wait never confirmed, given up */
};

/* One wait as the API lists it (id valid during the callback only). */
struct coord_wait_info {
	const char *id;
	enum coord_wait_kind kind;
	enum coord_wait_state state;
	bool ready;		/* data ready (state READY or later) */
	bool confirm;		/* COORD_WAIT_CONFIRM */
	uint64_t start_ns;	/* ops->now() at coord_wait_start() */
	uint64_t ready_ns;	/* ... at data ready; 0: not yet */
	uint64_t end_ns;	/* ... delivered or dropped; 0: not yet */
	uint64_t age_ns;	/* since coord_wait_start() */
};
/*
 * Every wait still held (outstanding, or ready and not yet delivered),
 * then the last COORD_DONE_KEEP that ended (delivered or dropped), oldest
 * first.
 */
void coord_waits_foreach(const struct coord *c,
			 void (*fn)(const struct coord_wait_info *w, void *arg), void *arg);
/* One wait by id, held or among the last ended (its newest use); -ENOENT. */
int coord_wait_get(const struct coord *c, const char *id, struct coord_wait_info *info);
const char *coord_wait_state_name(enum coord_wait_state s);
/* An external event: resume a paused VM; waits stay outstanding. */
int coord_external_event(struct coord *c);
/* Manual actions; -EBUSY/-EALREADY when the state does not allow it. */
int coord_manual_pause(struct coord *c);
int coord_manual_offload(struct coord *c);
int coord_manual_resume(struct coord *c);

/* Guest link. */
void coord_link_up(struct coord *c);
void coord_link_down(struct coord *c);
void coord_handoff_ack(struct coord *c, uint64_t req_id, bool ready,
		       const struct coord_evidence *ev);
void coord_resume_ack(struct coord *c, uint64_t req_id);

/* Completions of the asynchronous actions; err is 0 or -errno
 * (offload: -ECANCELED after ops->offload_cancel, not an error). */
void coord_pause_done(struct coord *c, int err);
void coord_resume_done(struct coord *c, int err);
void coord_offload_done(struct coord *c, int err);

/*
 * What an offload would write shrank outside the coordinator's view (a
 * pre-copy finished): a PAUSED VM under the cost profile is decided
 * again now, instead of when a put-off decision would have been asked
 * again (at twice the wait's age) or, after a final "budget" refusal,
 * never in this pause.  Elsewhere a no-op: the next pause decides with
 * the new estimate anyway.
 */
void coord_offload_estimate_changed(struct coord *c);

/* Memory pressure: cap the offload gates of the next pause cycles
 * (NULL: none). */
void coord_set_pressure_caps(struct coord *c, const struct coord_pressure_caps *caps);
/*
 * Memory pressure: offload a PAUSED VM now, whatever its offload delay,
 * timer budget, cooldown or handoff flags say; its waits' kinds must still
 * allow offloading (a cycle paused by hand has none and may).  -EOPNOTSUPP
 * (no pager, not evictable), -EALREADY (offloading or offloaded), -EBUSY
 * (not paused), -EPERM (a wait's kind forbids it).
 */
int coord_pressure_offload(struct coord *c);
/* PAUSED or OFFLOADED: how long until its next resume deadline (guest
 * timer or fail-safe) from now; 0 in other states. */
uint64_t coord_expected_wait_ns(const struct coord *c);
/* The pager cannot serve this VM any more: fail-safe resume. */
void coord_pager_error(struct coord *c, int err);

#endif
