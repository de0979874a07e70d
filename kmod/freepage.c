// SPDX-License-Identifier: GPL-2.0-only
/*
 * freepage.c - free page reporting to the host.
 *
 * A page_reporting device (page_reporting_register(), exported in 6.1)
 * hands us batches of isolated free pages of at least pageblock order.
 * The report callback, run by page_reporting's own work item, sends them
 * as one FREE_REPORT and sleeps until the batch is settled; until then the
 * pages stay isolated (out of the allocator).  Returning 0 marks them
 * reported; an error hands them back unreported, to be offered again on a
 * later pass.
 *
 * Protocol guarantee: a range is punched only while the guest still holds
 * it (before the ack), and the guest never reuses it before the ack or
 * before the session that carried it is dead on both sides.  The host
 * (vmnapd's guest link) acts on a FREE_REPORT only in the session that
 * carried it, synchronously, before it queues the FREE_REPORT_ACK; once a
 * session has ended it processes none of its bytes, and it ends the old
 * session before it accepts a new connection of the same VM.  So the
 * reporter settles a batch only on:
 *  - its FREE_REPORT_ACK (any status): reported, or kept by the host;
 *  - nothing of it sent (the connection it was meant for is gone);
 *  - the HELLO_ACK of a later session, when the link was lost (by either
 *    side) after the report may have gone out: the host answered the new
 *    session, so it has ended the one that carried the report and will
 *    never act on it.  The pages then go back unreported.
 * There is no timeout: while the link is up, a slow or stopped host keeps
 * the pages isolated (as virtio_balloon does); free_ack_ms only warns.  A
 * link lost with a batch in flight keeps it isolated until the module
 * reconnects, and holds a reference on the module meanwhile, so rmmod is
 * refused ("in use") instead of waiting for a host that may never return.
 * A report in flight when unload starts is still settled by its ack or by
 * a reconnect (main.c stops reconnecting only after vmnap_freepage_exit()).
 *
 * Off when: free_report=0; page poisoning is active (a dropped page reads
 * back as zeros, not as the poison pattern: virtio_balloon makes the same
 * choice); another reporter holds the one slot (-EBUSY, e.g.
 * virtio_balloon with free page reporting).  HELLO then does not offer
 * VMNAP_F_FREE_REPORT.  After a HELLO_ACK that accepts the feature the
 * device is re-registered by the kick work, which makes page_reporting
 * start a full pass over free memory reported while the link was down.
 * The kick runs on fp.wq, never on the ordered vmnap_wq: re-registering
 * waits for a report in flight, whose ack the receive work on vmnap_wq
 * delivers.
 *
 * This file is a client of the protocol: it sends through link.c on the
 * connection handoff.c names, takes a batch id from handoff.c
 * (vmnap_handoff_free_sent(), which marks the batch pending in the fsm
 * under the handoff lock), and hears back through vmnap_freepage_ops,
 * which handoff.c calls under the handoff lock.
 *
 * Locking: fp.lock (spinlock) guards fp.state, fp.result, fp.module_held
 * and fp.stopping.  The ops take it inside the handoff lock; the reporter
 * takes it alone and never holds it while taking the handoff lock.  The
 * reporter sets FP_WAITING before its batch becomes pending, so an ack, a
 * link loss or a HELLO_ACK for the batch always finds it.  fp.ranges and
 * fp.msg belong to the reporter (page_reporting runs one report at a
 * time).  fp.registered and fp.off_reason change only at init, exit and
 * in the kick work; no kick is queued once fp.stopping is set.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/module.h>
#include <linux/page_reporting.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "vmnap_mod.h"
#include "core/proto.h"
#include "freepage.h"
#include "handoff.h"
#include "link.h"

/* page_reporting hands at most PAGE_REPORTING_CAPACITY (32) entries. */
#define VMNAP_FREE_BATCH	64

/* Where the batch in flight stands (fp.state). */
enum vmnap_fp_state {
	FP_IDLE,	/* no batch in flight */
	FP_WAITING,	/* sent (or about to be) on a live link */
	FP_ORPHANED,	/* link lost since: wait for a later HELLO_ACK */
	FP_SETTLED,	/* fp.result says how; the reporter may go on */
};

/**
 * struct vmnap_freepage - the reporter (see the locking rules above)
 * @lock: guards @state, @result, @module_held, @stopping
 * @wq_head: the reporter sleeps here until @state is FP_SETTLED
 * @state: enum vmnap_fp_state
 * @result: 0 (acked) or -errno (handed back unreported), when settled
 * @module_held: a module reference is held for an orphaned batch
 * @stopping: unload started: no new batch, no new kick
 * @ranges: [VMNAP_FREE_BATCH] (GPA, length), the reporter's
 * @msg: the FREE_REPORT being sent, the reporter's
 * @wq: runs @kick
 * @kick: re-registers after HELLO_ACK
 * @registered: page_reporting_register() succeeded
 * @off_reason: why not, when not
 */
static struct vmnap_freepage {
	spinlock_t lock;
	wait_queue_head_t wq_head;
	enum vmnap_fp_state state;
	int result;
	bool module_held;
	bool stopping;
	u64 (*ranges)[2];
	u8 *msg;
	struct workqueue_struct *wq;
	struct work_struct kick;
	bool registered;
	const char *off_reason;
} fp;

/* Settle the batch in flight with @result (fp.lock held). */
static void vmnap_fp_settle_locked(int result)
{
	fp.result = result;
	fp.state = FP_SETTLED;
	if (fp.module_held) {
		fp.module_held = false;
		module_put(THIS_MODULE);
	}
	wake_up(&fp.wq_head);
}

static bool vmnap_fp_settled(void)
{
	return READ_ONCE(fp.state) == FP_SETTLED;
}

/* The batch is over, whatever its state: back to idle; its result. */
static int vmnap_fp_finish(int result_if_unsettled)
{
	int ret;

	spin_lock(&fp.lock);
	if (fp.state != FP_SETTLED)
		vmnap_fp_settle_locked(result_if_unsettled);
	ret = fp.result;
	fp.state = FP_IDLE;
	spin_unlock(&fp.lock);
	return ret;
}

/* Sleep (not counted as load or as a hung task) until settled. */
static void vmnap_fp_wait(u64 batch)
{
	unsigned int ms = READ_ONCE(vmnap_free_ack_ms);

	if (ms && wait_event_idle_timeout(fp.wq_head, vmnap_fp_settled(),
					  msecs_to_jiffies(ms)))
		return;
	if (ms)
		pr_warn_ratelimited("free report %llu: no FREE_REPORT_ACK after %u ms; its pages stay isolated until the host answers or a new session starts\n",
				    batch, ms);
	wait_event_idle(fp.wq_head, vmnap_fp_settled());
}

static int vmnap_report_batch(unsigned int n)
{
	u64 batch, gen = 0, pages = 0;
	size_t len;
	unsigned int i;
	int ret;

	/* waiting before the batch is pending: its ack cannot come earlier */
	spin_lock(&fp.lock);
	if (fp.stopping) {
		spin_unlock(&fp.lock);
		return -ESHUTDOWN;
	}
	fp.state = FP_WAITING;
	spin_unlock(&fp.lock);
	batch = vmnap_handoff_free_sent(&gen);
	if (!batch) {
		ret = vmnap_fp_finish(-ENOTCONN);
		goto failed;
	}

	len = vmnap_build_free_report(fp.msg, VMNAP_FREE_REPORT_SIZE(n),
				      0, batch, (const u64 (*)[2])fp.ranges, n);
	ret = vmnap_send_gen(gen, fp.msg, len);
	if (ret == -ENOTCONN) {
		/* nothing of it went out: the host cannot act on it */
		vmnap_handoff_free_done();
		ret = vmnap_fp_finish(-ENOTCONN);
		goto failed;
	}
	/*
	 * Sent, or maybe partly sent (then link.c drops the link): either way
	 * the host may act on it, so wait for the ack or a later session.
	 */
	vmnap_fp_wait(batch);
	ret = vmnap_fp_finish(-ECONNRESET);
	if (ret) {
		vmnap_handoff_free_done();
		goto failed;
	}
	for (i = 0; i < n; i++)
		pages += fp.ranges[i][1] >> PAGE_SHIFT;
	vmnap_count(VMNAP_CTR_FREE_REPORTS);
	vmnap_count_add(VMNAP_CTR_FREE_PAGES, pages);
	return 0;
failed:
	vmnap_count(VMNAP_CTR_FREE_FAILS);
	return ret;
}

static int vmnap_report(struct page_reporting_dev_info *prdev,
			struct scatterlist *sgl, unsigned int nents)
{
	struct scatterlist *sg;
	unsigned int i, n = 0;
	int ret;

	for_each_sg(sgl, sg, nents, i) {
		fp.ranges[n][0] = page_to_phys(sg_page(sg));
		fp.ranges[n][1] = sg->length;
		if (++n == VMNAP_FREE_BATCH) {
			ret = vmnap_report_batch(n);
			if (ret)
				return ret;
			n = 0;
		}
	}
	return n ? vmnap_report_batch(n) : 0;
}

static struct page_reporting_dev_info vmnap_prdev = {
	.report = vmnap_report,
};

/* FREE_REPORT_ACK for the pending batch (handoff lock held). */
static void vmnap_freepage_ack(u32 status)
{
	/* VMNAP_FREE_IGNORED: the host kept the pages, which is fine too */
	spin_lock(&fp.lock);
	if (fp.state == FP_WAITING)
		vmnap_fp_settle_locked(0);
	spin_unlock(&fp.lock);
}

/*
 * The link is lost (handoff lock held).  A batch in flight may still be in
 * the host's queue and be acted on: it stays isolated until a later
 * session's HELLO_ACK, and holds the module until then.
 */
static void vmnap_freepage_abort(void)
{
	spin_lock(&fp.lock);
	if (fp.state == FP_WAITING) {
		fp.state = FP_ORPHANED;
		if (!fp.module_held) {
			__module_get(THIS_MODULE);
			fp.module_held = true;
		}
	}
	spin_unlock(&fp.lock);
}

/* Re-register: page_reporting then reports all free memory again. */
static void vmnap_free_kick_work(struct work_struct *work)
{
	int ret;

	if (!fp.registered || READ_ONCE(fp.stopping))
		return;
	/* waits for a report in flight (settled by the receive work) */
	page_reporting_unregister(&vmnap_prdev);
	ret = page_reporting_register(&vmnap_prdev);
	if (ret) {
		fp.registered = false;
		fp.off_reason = "lost the reporting slot";
		pr_warn("free page reporting re-register: %d, now off\n", ret);
	}
}

/*
 * HELLO_ACK of a new session (handoff lock held): the host ended every
 * earlier session before it took this one, so an orphaned batch can go
 * back unreported.  With the feature accepted, report everything again.
 */
static void vmnap_freepage_accepted(bool accepted)
{
	spin_lock(&fp.lock);
	if (fp.state == FP_ORPHANED)
		vmnap_fp_settle_locked(-ECONNRESET);
	if (accepted && fp.registered && !fp.stopping)
		queue_work(fp.wq, &fp.kick);
	spin_unlock(&fp.lock);
}

static bool vmnap_freepage_available(void)
{
	return fp.registered && !READ_ONCE(fp.stopping);
}

const struct vmnap_free_ops vmnap_freepage_ops = {
	.available = vmnap_freepage_available,
	.on_accepted = vmnap_freepage_accepted,
	.on_ack = vmnap_freepage_ack,
	.on_abort = vmnap_freepage_abort,
};

bool vmnap_freepage_active(void)
{
	return fp.registered;
}

const char *vmnap_freepage_off_reason(void)
{
	return fp.off_reason;
}

void vmnap_freepage_init(void)
{
	int ret;

	spin_lock_init(&fp.lock);
	init_waitqueue_head(&fp.wq_head);
	INIT_WORK(&fp.kick, vmnap_free_kick_work);
	if (!vmnap_free_report) {
		fp.off_reason = "off (free_report=0)";
		return;
	}
	if (page_poisoning_enabled()) {
		fp.off_reason = "off (page poisoning active)";
		return;
	}
	fp.ranges = kcalloc(VMNAP_FREE_BATCH, sizeof(*fp.ranges), GFP_KERNEL);
	fp.msg = kmalloc(VMNAP_FREE_REPORT_SIZE(VMNAP_FREE_BATCH), GFP_KERNEL);
	fp.wq = alloc_workqueue("vmnap_free", WQ_UNBOUND, 1);
	if (!fp.ranges || !fp.msg || !fp.wq) {
		fp.off_reason = "off (no memory)";
		goto err;
	}
	ret = page_reporting_register(&vmnap_prdev);
	if (ret == -EBUSY) {
		fp.off_reason = "off (another reporter, e.g. virtio_balloon)";
		goto err;
	}
	if (ret) {
		fp.off_reason = "off (page_reporting_register failed)";
		pr_warn("page_reporting_register: %d\n", ret);
		goto err;
	}
	fp.registered = true;
	return;
err:
	if (fp.wq)
		destroy_workqueue(fp.wq);
	fp.wq = NULL;
	kfree(fp.ranges);
	kfree(fp.msg);
	fp.ranges = NULL;
	fp.msg = NULL;
}

/*
 * Unload, before the link stops reconnecting: no new batch and no new
 * kick, the kick finished, then unregister, which waits for a report in
 * flight to be settled (its ack, or a reconnect's HELLO_ACK).
 */
void vmnap_freepage_exit(void)
{
	spin_lock(&fp.lock);
	fp.stopping = true;
	spin_unlock(&fp.lock);
	if (fp.wq) {
		cancel_work_sync(&fp.kick);
		destroy_workqueue(fp.wq);
		fp.wq = NULL;
	}
	if (fp.registered) {
		page_reporting_unregister(&vmnap_prdev);
		fp.registered = false;
	}
	kfree(fp.ranges);
	kfree(fp.msg);
	fp.ranges = NULL;
	fp.msg = NULL;
}
