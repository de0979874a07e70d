// SPDX-License-Identifier: GPL-2.0-only
/*
 * handoff.c - the protocol and the handoff state machine: what the guest
 * does with each host message (core/fsm.c decides, this file acts), HELLO
 * on connect, the handoff verdict (evidence.c) with the device quiesce
 * (quiesce.c), the release of held devices on RESUMED, HANDOFF_ABORT, link
 * loss, fail-safe or unload, the guest clock's catch-up on RESUMED, and the
 * free page reporter's batch state.
 *
 * Locking: the handoff lock (ho.lock, a mutex) serialises every entry
 * point of this file - the link events (connect and receive work on
 * vmnap_wq, link stop at unload), the fail-safe work, netlink commands,
 * the free page reporter and unload - and protects the fsm, the last
 * verdict and evidence and the HELLO buffer.  What this file calls runs
 * under it and relies on it: evidence collection (its per-CPU scratch),
 * the device quiesce state (quiesce.c) and the free ops (freepage.c,
 * which nest their own lock inside).  Lock order: the handoff lock, then
 * link.c's tx lock (vmnap_send()) or freepage.c's lock; nobody takes the
 * handoff lock while holding either.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/time64.h>
#include <linux/timekeeping.h>

#include "vmnap_mod.h"
#include "core/fsm.h"
#include "core/proto.h"
#include "core/verdict.h"
#include "evidence.h"
#include "handoff.h"
#include "link.h"
#include "quiesce.h"

/* Longest a handoff may spend quiescing devices, whatever the deadline. */
#define VMNAP_MAX_QUIESCE_MS	1000U
/* Request id of a handoff started by the test hook (never from a host). */
#define VMNAP_LOCAL_REQ_ID	0
/*
 * A fail-safe that runs this much later than it was due was frozen, not
 * forgotten: a backend that keeps the guest clock running (the cgroup
 * freezer, Firecracker) thawed us after more than failsafe_ms and RESUMED
 * is on its way.
 */
#define VMNAP_FAILSAFE_FROZEN_LATE_MS	50
/*
 * A fail-safe on time (late by less than the above) is either a host gone
 * silent or a freeze that ended just after it was due, whose RESUMED is
 * already on its way: the guest cannot tell them apart, so it gives a
 * RESUMED this long before releasing.
 */
#define VMNAP_FAILSAFE_GRACE_MS		250U
/* Largest clock step taken from one RESUMED (the host's pause cap is far lower). */
#define VMNAP_MAX_CLOCK_STEP_NS	(7ULL * 24 * 3600 * NSEC_PER_SEC)

/**
 * struct vmnap_handoff - protocol and handoff state, under @lock
 * @lock: the handoff lock (see the top of this file)
 * @fsm: link and handoff state (core/fsm.c)
 * @offered: features in the last HELLO
 * @free_batch: id of the last FREE_REPORT batch
 * @quiesced_at: when the devices were last held
 * @failsafe_deferred: the fail-safe of this hold was deferred once (frozen
 *	or on time, see vmnap_handoff_failsafe_expired())
 * @have_evidence: @last, @last_busy are meaningful
 * @last: last evidence measured
 * @last_busy: busy reasons of @last
 * @last_verdict: last verdict
 * @last_req_id: request id of the last handoff
 * @thr: thresholds, loaded from the parameters at each handoff
 * @hello: VMNAP_MAX_MSG bytes for HELLO
 * @ranges: guest RAM ranges for HELLO
 * @free_ops: events for the free page reporter
 */
static struct vmnap_handoff {
	struct mutex lock;
	struct vmnap_fsm fsm;
	u32 offered;
	u64 free_batch;
	ktime_t quiesced_at;
	bool failsafe_deferred;
	bool have_evidence;
	struct vmnap_sample last;
	u32 last_busy;
	u32 last_verdict;
	u64 last_req_id;
	struct vmnap_thresholds thr;
	u8 *hello;
	u64 ranges[VMNAP_MAX_RAM_RANGES][2];
	const struct vmnap_free_ops *free_ops;
} ho;

static void vmnap_load_thresholds(void)
{
	ho.thr.min_idle_permille = min(READ_ONCE(vmnap_min_idle_permille), 1000U);
	ho.thr.max_dirty_pages = READ_ONCE(vmnap_max_dirty_pages);
	ho.thr.min_timer_ns = (u64)READ_ONCE(vmnap_min_timer_us) * NSEC_PER_USEC;
}

/* ---- link events (link.c calls them through vmnap_handoff_link_ops) --- */

static void vmnap_link_up_locked(void)
{
	struct vmnap_hello_info info = {
		.nr_cpus = num_possible_cpus(),
		.page_size = PAGE_SIZE,
		.version = VMNAP_MODULE_VERSION,
		.ranges = (const u64 (*)[2])ho.ranges,
	};
	size_t len;
	int n;

	info.features = VMNAP_F_QUIESCE | VMNAP_F_CLOCK_STEP;
	if (ho.free_ops->available())
		info.features |= VMNAP_F_FREE_REPORT;
	if (vmnap_timer_evidence_active())
		info.features |= VMNAP_F_TIMER_EVIDENCE;
	n = vmnap_ram_ranges(ho.ranges, VMNAP_MAX_RAM_RANGES);
	if (n <= 0) {
		pr_err("no guest RAM ranges (%d): HELLO not sent\n", n);
		vmnap_link_drop();
		return;
	}
	info.nr_ranges = n;
	ho.offered = info.features;
	vmnap_fsm_connected(&ho.fsm, info.features);

	len = vmnap_build_hello(ho.hello, VMNAP_MAX_MSG, 0, &info);
	if (vmnap_send(ho.hello, len))
		vmnap_link_drop();
}

static void vmnap_link_up(void)
{
	mutex_lock(&ho.lock);
	vmnap_link_up_locked();
	mutex_unlock(&ho.lock);
}

static void vmnap_release(enum vmnap_counter why)
{
	if (!vmnap_fsm_release(&ho.fsm))
		return;
	vmnap_failsafe_cancel();
	vmnap_unquiesce();
	vmnap_count(why);
	pr_info("devices released (%s)\n",
		why == VMNAP_CTR_UNQ_RESUMED ? "resumed" :
		why == VMNAP_CTR_UNQ_ABORT ? "abort" :
		why == VMNAP_CTR_UNQ_LINK ? "link loss" :
		why == VMNAP_CTR_UNQ_FAILSAFE ? "fail-safe" : "local");
}

static void vmnap_link_down(void)
{
	mutex_lock(&ho.lock);
	if (ho.fsm.handoff == VMNAP_HANDOFF_QUIESCED)
		vmnap_release(VMNAP_CTR_UNQ_LINK);
	vmnap_fsm_link_lost(&ho.fsm);
	ho.free_ops->on_abort();
	mutex_unlock(&ho.lock);
}

/* ---- handoff ---------------------------------------------------------- */

/*
 * Decide on a handoff: sample, and when nothing is busy quiesce the
 * devices and sample again.  Returns the verdict; on READY the devices are
 * held and the caller marks the handoff held.  Handoff lock held.
 */
static u32 vmnap_decide(u32 deadline_ms, bool quiesce, struct vmnap_sample *s,
			u32 *busy)
{
	unsigned int window = READ_ONCE(vmnap_window_us);
	int ret;

	vmnap_load_thresholds();
	*busy = READ_ONCE(vmnap_enabled) ? 0 : VMNAP_BUSY_DISABLED;
	vmnap_evidence_collect(s, window);
	*busy |= vmnap_busy_reasons(s, &ho.thr);
	if (!*busy && quiesce) {
		ret = vmnap_quiesce(min(deadline_ms / 2, VMNAP_MAX_QUIESCE_MS));
		if (ret) {
			vmnap_count(VMNAP_CTR_QUIESCE_FAILS);
			*busy |= VMNAP_BUSY_QUIESCE;
		} else {
			/* what the quiesce drained must stay drained */
			vmnap_evidence_collect(s, window);
			*busy |= vmnap_busy_reasons(s, &ho.thr);
		}
		if (*busy)
			vmnap_unquiesce();
	}
	s->devices_quiesced = vmnap_quiesced_devices();

	ho.last = *s;
	ho.last_busy = *busy;
	ho.have_evidence = true;
	ho.last_verdict = *busy ? VMNAP_BUSY : VMNAP_READY;
	vmnap_count(*busy ? VMNAP_CTR_BUSY : VMNAP_CTR_READY);
	return ho.last_verdict;
}

static void vmnap_send_handoff_ack(u64 req_id, u32 verdict,
				   const struct vmnap_sample *s, u32 busy)
{
	u8 buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_handoff_ack)];
	struct vmnap_evidence ev;

	vmnap_evidence_encode(&ev, s, busy);
	vmnap_send(buf, vmnap_build_handoff_ack(buf, sizeof(buf), 0, req_id,
						verdict, &ev));
}

static void vmnap_handoff(const struct vmnap_handoff_req *m)
{
	u64 req_id = le64_to_cpu(m->req_id);
	struct vmnap_sample s;
	u32 verdict, busy;

	unsigned int noio;

	vmnap_count(VMNAP_CTR_HANDOFFS);
	ho.last_req_id = req_id;
	/* from the quiesce to the ack, no allocation may wait on a disk */
	noio = memalloc_noio_save();
	verdict = vmnap_decide(le32_to_cpu(m->ack_deadline_ms),
			       ho.fsm.accepted & VMNAP_F_QUIESCE, &s, &busy);
	if (verdict == VMNAP_READY) {
		vmnap_fsm_quiesced(&ho.fsm, req_id);
		ho.quiesced_at = ktime_get();
		ho.failsafe_deferred = false;
		vmnap_failsafe_arm();
	}
	vmnap_send_handoff_ack(req_id, verdict, &s, busy);
	memalloc_noio_restore(noio);
}

/* A second handoff while devices are held: refuse without sampling. */
static void vmnap_handoff_busy_state(const struct vmnap_handoff_req *m)
{
	struct vmnap_sample s = ho.last;

	vmnap_count(VMNAP_CTR_HANDOFFS);
	vmnap_count(VMNAP_CTR_BUSY);
	vmnap_send_handoff_ack(le64_to_cpu(m->req_id), VMNAP_BUSY, &s,
			       VMNAP_BUSY_STATE);
}

static void vmnap_resume_ack(const struct vmnap_resumed *m, u64 ns)
{
	u8 buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_resume_ack)];

	vmnap_send(buf, vmnap_build_resume_ack(buf, sizeof(buf), 0,
					       le64_to_cpu(m->req_id), ns));
}

/*
 * RESUMED says the guest's clock stood still while paused (QMP stop,
 * Cloud Hypervisor): step CLOCK_REALTIME forward by the time paused, so
 * the wall clock is the host's again.  CLOCK_MONOTONIC and CLOCK_BOOTTIME
 * are left alone: Linux cannot step them, they keep meaning "time this
 * guest ran" (as across a suspend without a persistent clock), and the
 * timer budget in the evidence is measured on MONOTONIC, so a wall-clock
 * step (ours, NTP's, settimeofday's) never changes it.  The step wakes
 * absolute CLOCK_REALTIME timers (clock_was_set) and resets the NTP
 * state, as any settimeofday() does; an NTP daemon sees a step it did not
 * make and measures again.  Handoff lock held.
 */
static void vmnap_clock_catch_up(const struct vmnap_resumed *m)
{
	u64 ns = le64_to_cpu(m->paused_ns);
	struct timespec64 ts;
	s64 ran;
	int ret;

	if (!(le32_to_cpu(m->flags) & VMNAP_RF_CLOCK_STOPPED) ||
	    !(ho.fsm.accepted & VMNAP_F_CLOCK_STEP) || !ns)
		return;
	if (ns > VMNAP_MAX_CLOCK_STEP_NS) {
		vmnap_count(VMNAP_CTR_CLOCK_STEP_FAILS);
		pr_warn_ratelimited("clock step of %llu ns refused: too large\n", ns);
		return;
	}
	/*
	 * Our clock ran at least as long as the host says we were paused
	 * since the handoff: it did not stand still (a VMM that advances
	 * kvm-clock on resume after all), and a step would count the pause
	 * twice.  A pause shorter than the handoff's own round trips looks
	 * the same and is left alone too (a few ms at most).
	 */
	ran = ktime_to_ns(ktime_sub(ktime_get(), ho.quiesced_at));
	if (ran >= 0 && (u64)ran >= ns) {
		vmnap_count(VMNAP_CTR_CLOCK_STEP_FAILS);
		pr_debug("no clock step: %lld ns of guest time since the handoff, paused %llu ns\n",
			 ran, ns);
		return;
	}
	ktime_get_real_ts64(&ts);
	ts = timespec64_add(ts, ns_to_timespec64(ns));
	ret = do_settimeofday64(&ts);
	if (ret) {
		vmnap_count(VMNAP_CTR_CLOCK_STEP_FAILS);
		pr_warn_ratelimited("clock step of %llu ns failed: %d\n", ns, ret);
		return;
	}
	vmnap_count(VMNAP_CTR_CLOCK_STEPS);
	vmnap_count_add(VMNAP_CTR_CLOCK_STEP_MS, div_u64(ns + NSEC_PER_MSEC / 2, NSEC_PER_MSEC));
	pr_debug("CLOCK_REALTIME stepped forward %llu ns (guest clock stopped while paused)\n",
		 ns);
}

/* Dispatch a validated host message; nonzero return drops the link. */
static int vmnap_handle_msg_locked(const struct vmnap_hdr *h,
				   const void *payload)
{
	u16 type = le16_to_cpu(h->type);
	const struct vmnap_error *err;
	ktime_t t0;
	u8 buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_ping)];

	switch (vmnap_fsm_rx(&ho.fsm, h, payload)) {
	case VMNAP_ACT_NONE:
		break;
	case VMNAP_ACT_HELLO_DONE:
		pr_info("host accepted: vm id %llu, features 0x%x\n",
			ho.fsm.vm_id, ho.fsm.accepted);
		vmnap_link_reset_backoff();
		ho.free_ops->on_accepted(ho.fsm.accepted & VMNAP_F_FREE_REPORT);
		break;
	case VMNAP_ACT_HANDOFF:
		vmnap_handoff(payload);
		break;
	case VMNAP_ACT_BUSY_STATE:
		vmnap_handoff_busy_state(payload);
		break;
	case VMNAP_ACT_UNQUIESCE:
		if (type == VMNAP_RESUMED)
			vmnap_clock_catch_up(payload);
		t0 = ktime_get();
		vmnap_release(type == VMNAP_RESUMED ? VMNAP_CTR_UNQ_RESUMED :
			      VMNAP_CTR_UNQ_ABORT);
		if (type == VMNAP_RESUMED)
			vmnap_resume_ack(payload, ktime_to_ns(ktime_sub(ktime_get(), t0)));
		break;
	case VMNAP_ACT_RESUME_ACK:
		/* released already by the fail-safe: the clock still stood */
		vmnap_clock_catch_up(payload);
		vmnap_resume_ack(payload, 0);
		break;
	case VMNAP_ACT_STALE:
		vmnap_count(VMNAP_CTR_STALE);
		break;
	case VMNAP_ACT_FREE_ACK:
		ho.free_ops->on_ack(ho.fsm.free_status);
		break;
	case VMNAP_ACT_PONG:
		vmnap_send(buf, vmnap_build_ping(buf, sizeof(buf), 0, VMNAP_PONG,
						 le64_to_cpu(((const struct vmnap_ping *)payload)->token)));
		break;
	case VMNAP_ACT_PEER_ERROR:
		err = payload;
		vmnap_count(VMNAP_CTR_PEER_ERRORS);
		pr_warn_ratelimited("host error %u (%s): %.*s\n",
				    le32_to_cpu(err->code),
				    vmnap_err_name(le32_to_cpu(err->code)),
				    (int)VMNAP_ERROR_TEXT_LEN, err->text);
		break;
	case VMNAP_ACT_REJECT:
		vmnap_count(VMNAP_CTR_RX_STATE);
		pr_warn_ratelimited("host %s rejected: %s\n", vmnap_type_name(type),
				    vmnap_err_name(ho.fsm.err));
		vmnap_send_error(ho.fsm.err, le32_to_cpu(h->seq), NULL);
		break;
	case VMNAP_ACT_DROP:
		vmnap_count(VMNAP_CTR_RX_STATE);
		pr_warn("host %s unacceptable: %s, dropping link\n",
			vmnap_type_name(type), vmnap_err_name(ho.fsm.err));
		vmnap_send_error(ho.fsm.err, le32_to_cpu(h->seq), NULL);
		return -EPROTO;
	}
	return 0;
}

static int vmnap_handle_msg(const struct vmnap_hdr *h, const void *payload)
{
	int ret;

	mutex_lock(&ho.lock);
	ret = vmnap_handle_msg_locked(h, payload);
	mutex_unlock(&ho.lock);
	return ret;
}

const struct vmnap_link_ops vmnap_handoff_link_ops = {
	.on_up = vmnap_link_up,
	.on_down = vmnap_link_down,
	.on_msg = vmnap_handle_msg,
};

/*
 * The fail-safe fired: no pause and no resume within failsafe_ms of guest
 * time.  A backend that stops the guest clock (QMP stop) leaves it due
 * while paused; one that keeps it running (the freezer) makes it due at
 * thaw, just before the RESUMED the host sends after every resume.  Far
 * later than armed, the guest was frozen: give that RESUMED one more
 * failsafe_ms.  On time, it may have been frozen until just after it was
 * due: give a RESUMED VMNAP_FAILSAFE_GRACE_MS.  Only then release the
 * devices as if the host had gone silent.
 */
void vmnap_handoff_failsafe_expired(void)
{
	s64 held_ms, late_ms;

	mutex_lock(&ho.lock);
	held_ms = ktime_ms_delta(ktime_get(), ho.quiesced_at);
	late_ms = held_ms - (s64)READ_ONCE(vmnap_failsafe_ms);
	if (ho.fsm.handoff != VMNAP_HANDOFF_QUIESCED || ho.failsafe_deferred) {
		pr_info("fail-safe: no pause or resume in %lld ms of holding the devices\n",
			held_ms);
		vmnap_release(VMNAP_CTR_UNQ_FAILSAFE);
	} else if (late_ms > VMNAP_FAILSAFE_FROZEN_LATE_MS) {
		ho.failsafe_deferred = true;
		vmnap_count(VMNAP_CTR_FAILSAFE_FROZEN);
		pr_debug("fail-safe %lld ms late: the guest was frozen, waiting for RESUMED\n",
			 late_ms);
		vmnap_failsafe_arm();
	} else {
		ho.failsafe_deferred = true;
		vmnap_count(VMNAP_CTR_FAILSAFE_GRACE);
		pr_info("fail-safe: no pause or resume within %u ms, waiting %u ms for RESUMED\n",
			READ_ONCE(vmnap_failsafe_ms), VMNAP_FAILSAFE_GRACE_MS);
		vmnap_failsafe_arm_ms(VMNAP_FAILSAFE_GRACE_MS);
	}
	mutex_unlock(&ho.lock);
}

/* ---- free page reporter (freepage.c) ---------------------------------- */

/*
 * A FREE_REPORT is about to go out: returns its batch id, now pending in
 * the fsm, and in *@gen the connection it must go out on (the one whose
 * HELLO_ACK accepted the feature), or 0 when none may be sent (unloading,
 * link not up, feature not accepted).
 */
u64 vmnap_handoff_free_sent(u64 *gen)
{
	u64 batch = 0;

	mutex_lock(&ho.lock);
	if (!vmnap_stopping() && READ_ONCE(ho.fsm.link) == VMNAP_LINK_UP &&
	    (ho.fsm.accepted & VMNAP_F_FREE_REPORT)) {
		batch = ++ho.free_batch;
		vmnap_fsm_free_sent(&ho.fsm, batch);
		*gen = vmnap_link_gen();
	}
	mutex_unlock(&ho.lock);
	return batch;
}

/* The pending FREE_REPORT failed (send error, timeout, link loss). */
void vmnap_handoff_free_done(void)
{
	mutex_lock(&ho.lock);
	vmnap_fsm_free_done(&ho.fsm);
	mutex_unlock(&ho.lock);
}

/* ---- status and test hooks (genl.c) ----------------------------------- */

void vmnap_handoff_status(struct vmnap_status *st)
{
	mutex_lock(&ho.lock);
	st->link = ho.fsm.link;
	st->handoff = ho.fsm.handoff;
	st->offered = ho.offered;
	st->accepted = ho.fsm.accepted;
	st->vm_id = ho.fsm.vm_id;
	st->quiesced_devs = vmnap_quiesced_devices();
	st->verdict = ho.last_verdict;
	st->req_id = ho.last_req_id;
	st->have_evidence = ho.have_evidence;
	st->last = ho.last;
	st->last_busy = ho.last_busy;
	mutex_unlock(&ho.lock);
}

int vmnap_test_handoff(u32 *verdict, u32 *busy)
{
	struct vmnap_sample s;

	mutex_lock(&ho.lock);
	if (ho.fsm.handoff == VMNAP_HANDOFF_QUIESCED) {
		*verdict = VMNAP_BUSY;
		*busy = VMNAP_BUSY_STATE;
		mutex_unlock(&ho.lock);
		return 0;
	}
	vmnap_count(VMNAP_CTR_HANDOFFS);
	*verdict = vmnap_decide(VMNAP_MAX_QUIESCE_MS * 2, true, &s, busy);
	if (*verdict == VMNAP_READY) {
		vmnap_fsm_quiesced(&ho.fsm, VMNAP_LOCAL_REQ_ID);
		ho.quiesced_at = ktime_get();
		ho.failsafe_deferred = false;
		vmnap_failsafe_arm();
	}
	mutex_unlock(&ho.lock);
	return 0;
}

void vmnap_test_unquiesce(void)
{
	mutex_lock(&ho.lock);
	vmnap_release(VMNAP_CTR_UNQ_LOCAL);
	mutex_unlock(&ho.lock);
}

/* Measure evidence without a handoff, with the thresholds last loaded. */
void vmnap_test_evidence(void)
{
	mutex_lock(&ho.lock);
	vmnap_evidence_collect(&ho.last, READ_ONCE(vmnap_window_us));
	ho.last_busy = vmnap_busy_reasons(&ho.last, &ho.thr);
	ho.have_evidence = true;
	mutex_unlock(&ho.lock);
}

/* ---- init / exit ------------------------------------------------------ */

int vmnap_handoff_init(const struct vmnap_free_ops *free_ops)
{
	mutex_init(&ho.lock);
	vmnap_fsm_init(&ho.fsm);
	vmnap_load_thresholds();
	ho.free_ops = free_ops;
	ho.hello = kvmalloc(VMNAP_MAX_MSG, GFP_KERNEL);
	return ho.hello ? 0 : -ENOMEM;
}

/* Unload, after the link is stopped: release the devices if still held. */
void vmnap_handoff_stop(void)
{
	mutex_lock(&ho.lock);
	vmnap_release(VMNAP_CTR_UNQ_LOCAL);
	mutex_unlock(&ho.lock);
}

void vmnap_handoff_exit(void)
{
	kvfree(ho.hello);
	ho.hello = NULL;
}
