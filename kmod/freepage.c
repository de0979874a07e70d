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
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/page_reporting.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "vmnap_mod.h"

/* page_reporting hands at most PAGE_REPORTING_CAPACITY (32) entries. */
#define VMNAP_FREE_BATCH	64

static u64 (*vmnap_free_ranges)[2];	/* [VMNAP_FREE_BATCH], reporter only */
static u8 *vmnap_free_msg;
static int vmnap_free_result;
static struct work_struct vmnap_free_kick;

static int vmnap_report_batch(unsigned int n)
{
	u64 batch, pages = 0;
	size_t len;
	unsigned int i;
	long left;
	int ret;

	mutex_lock(&vmnap.lock);
	if (READ_ONCE(vmnap.stopping) || !vmnap_link_is_up() ||
	    !(vmnap.fsm.accepted & VMNAP_F_FREE_REPORT)) {
		mutex_unlock(&vmnap.lock);
		return -ENOTCONN;
	}
	batch = ++vmnap.free_batch;
	reinit_completion(&vmnap.free_done);
	vmnap_free_result = -ETIMEDOUT;
	vmnap_fsm_free_sent(&vmnap.fsm, batch);
	mutex_unlock(&vmnap.lock);

	len = vmnap_build_free_report(vmnap_free_msg, VMNAP_FREE_REPORT_SIZE(n),
				      0, batch,
				      (const u64 (*)[2])vmnap_free_ranges, n);
	ret = vmnap_send(vmnap_free_msg, len);
	if (!ret) {
		left = wait_for_completion_timeout(&vmnap.free_done,
				msecs_to_jiffies(READ_ONCE(vmnap_free_ack_ms)));
		mutex_lock(&vmnap.lock);
		ret = left ? vmnap_free_result : -ETIMEDOUT;
		mutex_unlock(&vmnap.lock);
	}
	if (ret) {
		mutex_lock(&vmnap.lock);
		vmnap_fsm_free_done(&vmnap.fsm);
		mutex_unlock(&vmnap.lock);
		vmnap_count(VMNAP_CTR_FREE_FAILS);
		return ret;
	}
	for (i = 0; i < n; i++)
		pages += vmnap_free_ranges[i][1] >> PAGE_SHIFT;
	vmnap_count(VMNAP_CTR_FREE_REPORTS);
	atomic64_add(pages, &vmnap.counters[VMNAP_CTR_FREE_PAGES]);
	return 0;
}

static int vmnap_report(struct page_reporting_dev_info *prdev,
			struct scatterlist *sgl, unsigned int nents)
{
	struct scatterlist *sg;
	unsigned int i, n = 0;
	int ret;

	for_each_sg(sgl, sg, nents, i) {
		vmnap_free_ranges[n][0] = page_to_phys(sg_page(sg));
		vmnap_free_ranges[n][1] = sg->length;
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

/* FREE_REPORT_ACK for the pending batch (vmnap.lock held). */
void vmnap_freepage_ack(u32 status)
{
	/* VMNAP_FREE_IGNORED: the host kept the pages, which is fine too */
	vmnap_free_result = 0;
	complete(&vmnap.free_done);
}

/* Link lost or unloading: wake a reporter waiting for its ack. */
void vmnap_freepage_abort(void)
{
	vmnap_free_result = -ECONNRESET;
	complete(&vmnap.free_done);
}

/* Re-register: page_reporting then reports all free memory again. */
static void vmnap_free_kick_work(struct work_struct *work)
{
	int ret;

	if (!vmnap.free_registered || READ_ONCE(vmnap.stopping))
		return;
	page_reporting_unregister(&vmnap_prdev);
	ret = page_reporting_register(&vmnap_prdev);
	if (ret) {
		vmnap.free_registered = false;
		vmnap.free_off_reason = "lost the reporting slot";
		pr_warn("free page reporting re-register: %d, now off\n", ret);
	}
}

void vmnap_freepage_link_up(void)
{
	if (vmnap.free_registered && (vmnap.fsm.accepted & VMNAP_F_FREE_REPORT))
		schedule_work(&vmnap_free_kick);
}

void vmnap_freepage_init(void)
{
	int ret;

	init_completion(&vmnap.free_done);
	INIT_WORK(&vmnap_free_kick, vmnap_free_kick_work);
	if (!vmnap_free_report) {
		vmnap.free_off_reason = "off (free_report=0)";
		return;
	}
	if (page_poisoning_enabled()) {
		vmnap.free_off_reason = "off (page poisoning active)";
		return;
	}
	vmnap_free_ranges = kcalloc(VMNAP_FREE_BATCH, sizeof(*vmnap_free_ranges),
				    GFP_KERNEL);
	vmnap_free_msg = kmalloc(VMNAP_FREE_REPORT_SIZE(VMNAP_FREE_BATCH),
				 GFP_KERNEL);
	if (!vmnap_free_ranges || !vmnap_free_msg) {
		vmnap.free_off_reason = "off (no memory)";
		goto err;
	}
	ret = page_reporting_register(&vmnap_prdev);
	if (ret == -EBUSY) {
		vmnap.free_off_reason = "off (another reporter, e.g. virtio_balloon)";
		goto err;
	}
	if (ret) {
		vmnap.free_off_reason = "off (page_reporting_register failed)";
		pr_warn("page_reporting_register: %d\n", ret);
		goto err;
	}
	vmnap.free_registered = true;
	return;
err:
	kfree(vmnap_free_ranges);
	kfree(vmnap_free_msg);
	vmnap_free_ranges = NULL;
	vmnap_free_msg = NULL;
}

/* Unload: stop the kick, wake the reporter, unregister (waits for it). */
void vmnap_freepage_exit(void)
{
	cancel_work_sync(&vmnap_free_kick);
	if (vmnap.free_registered) {
		mutex_lock(&vmnap.lock);
		vmnap_freepage_abort();
		mutex_unlock(&vmnap.lock);
		page_reporting_unregister(&vmnap_prdev);
		vmnap.free_registered = false;
	}
	kfree(vmnap_free_ranges);
	kfree(vmnap_free_msg);
	vmnap_free_ranges = NULL;
	vmnap_free_msg = NULL;
}
