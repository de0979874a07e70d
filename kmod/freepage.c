// SPDX-License-Identifier: GPL-2.0-only
/*
 * freepage.c - free page reporting to the host.
 *
 * A page_reporting device (page_reporting_register(), exported in 6.1)
 * hands us batches of isolated free pages of at least pageblock order.
 * The report callback, run by page_reporting's own work item, sends them
 * as one FREE_REPORT and sleeps until the matching FREE_REPORT_ACK (or
 * free_ack_ms, or link loss): while it sleeps the pages stay isolated,
 * so the host may drop them safely.  Returning an error hands the pages
 * back unreported; they are offered again on a later pass.
 *
 * Off when: free_report=0; page poisoning is active (a dropped page reads
 * back as zeros, not as the poison pattern: virtio_balloon makes the same
 * choice); another reporter holds the one slot (-EBUSY, e.g.
 * virtio_balloon with free page reporting).  HELLO then does not offer
 * VMNAP_F_FREE_REPORT.  After a HELLO_ACK that accepts the feature the
 * device is re-registered, which makes page_reporting start a full pass
 * over free memory reported while the link was down.
 *
 * This file is a client of the protocol: it sends through link.c, takes a
 * batch id from handoff.c (vmnap_handoff_free_sent(), which marks the
 * batch pending in the fsm under the handoff lock), and hears back through
 * vmnap_freepage_ops, which handoff.c calls under the handoff lock.
 *
 * Locking: fp.lock (spinlock) guards fp.result and the reinit of fp.done.
 * The ops take it inside the handoff lock; the reporter takes it alone and
 * never holds it while taking the handoff lock.  The reporter re-arms
 * fp.done before its batch becomes pending, so an ack or abort for the
 * batch always finds it armed.  fp.ranges and fp.msg belong to the
 * reporter (page_reporting runs one report at a time).  fp.registered and
 * fp.off_reason change only at init, exit and in the re-register work.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/page_reporting.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "vmnap_mod.h"
#include "core/proto.h"
#include "freepage.h"
#include "handoff.h"
#include "link.h"

/* page_reporting hands at most PAGE_REPORTING_CAPACITY (32) entries. */
#define VMNAP_FREE_BATCH	64

/**
 * struct vmnap_freepage - the reporter (see the locking rules above)
 * @lock: guards @result and the reinit of @done
 * @done: completed by the ack or an abort
 * @result: outcome of the pending batch
 * @ranges: [VMNAP_FREE_BATCH] (GPA, length), the reporter's
 * @msg: the FREE_REPORT being sent, the reporter's
 * @kick: re-registers after HELLO_ACK
 * @registered: page_reporting_register() succeeded
 * @off_reason: why not, when not
 */
static struct vmnap_freepage {
	spinlock_t lock;
	struct completion done;
	int result;
	u64 (*ranges)[2];
	u8 *msg;
	struct work_struct kick;
	bool registered;
	const char *off_reason;
} fp;

static int vmnap_report_batch(unsigned int n)
{
	u64 batch, pages = 0;
	size_t len;
	unsigned int i;
	long left;
	int ret;

	/* armed before the batch is pending: its ack cannot come earlier */
	spin_lock(&fp.lock);
	reinit_completion(&fp.done);
	fp.result = -ETIMEDOUT;
	spin_unlock(&fp.lock);
	batch = vmnap_handoff_free_sent();
	if (!batch)
		return -ENOTCONN;

	len = vmnap_build_free_report(fp.msg, VMNAP_FREE_REPORT_SIZE(n),
				      0, batch, (const u64 (*)[2])fp.ranges, n);
	ret = vmnap_send(fp.msg, len);
	if (!ret) {
		left = wait_for_completion_timeout(&fp.done,
				msecs_to_jiffies(READ_ONCE(vmnap_free_ack_ms)));
		spin_lock(&fp.lock);
		ret = left ? fp.result : -ETIMEDOUT;
		spin_unlock(&fp.lock);
	}
	if (ret) {
		vmnap_handoff_free_done();
		vmnap_count(VMNAP_CTR_FREE_FAILS);
		return ret;
	}
	for (i = 0; i < n; i++)
		pages += fp.ranges[i][1] >> PAGE_SHIFT;
	vmnap_count(VMNAP_CTR_FREE_REPORTS);
	vmnap_count_add(VMNAP_CTR_FREE_PAGES, pages);
	return 0;
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
	fp.result = 0;
	complete(&fp.done);
	spin_unlock(&fp.lock);
}

/* Link lost or unloading: wake a reporter waiting for its ack. */
static void vmnap_freepage_abort(void)
{
	spin_lock(&fp.lock);
	fp.result = -ECONNRESET;
	complete(&fp.done);
	spin_unlock(&fp.lock);
}

/* Re-register: page_reporting then reports all free memory again. */
static void vmnap_free_kick_work(struct work_struct *work)
{
	int ret;

	if (!fp.registered || vmnap_stopping())
		return;
	page_reporting_unregister(&vmnap_prdev);
	ret = page_reporting_register(&vmnap_prdev);
	if (ret) {
		fp.registered = false;
		fp.off_reason = "lost the reporting slot";
		pr_warn("free page reporting re-register: %d, now off\n", ret);
	}
}

/* HELLO_ACK accepted the feature (handoff lock held). */
static void vmnap_freepage_accepted(void)
{
	if (fp.registered)
		schedule_work(&fp.kick);
}

static bool vmnap_freepage_available(void)
{
	return fp.registered;
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
	init_completion(&fp.done);
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
	if (!fp.ranges || !fp.msg) {
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
	kfree(fp.ranges);
	kfree(fp.msg);
	fp.ranges = NULL;
	fp.msg = NULL;
}

/* Unload: stop the kick, wake the reporter, unregister (waits for it). */
void vmnap_freepage_exit(void)
{
	cancel_work_sync(&fp.kick);
	if (fp.registered) {
		vmnap_freepage_abort();
		page_reporting_unregister(&vmnap_prdev);
		fp.registered = false;
	}
	kfree(fp.ranges);
	kfree(fp.msg);
	fp.ranges = NULL;
	fp.msg = NULL;
}
