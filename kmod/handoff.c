// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnap.ko - guest half of vmnap: idle evidence, device quiesce and free
 * page reporting for a host that pauses and evicts this VM while its agent
 * waits.  See README.md and uapi/vmnap.h.
 *
 * main.c: module init/exit, parameters, and the handoff state machine that
 * ties the link (link.c), the evidence (evidence.c), the device quiesce
 * (quiesce.c) and free page reporting (freepage.c) together.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched/mm.h>

#include "vmnap_mod.h"

/* Longest a handoff may spend quiescing devices, whatever the deadline. */
#define VMNAP_MAX_QUIESCE_MS	1000U
/* Request id of a handoff started by the test hook (never from a host). */
#define VMNAP_LOCAL_REQ_ID	0

struct vmnap vmnap;

unsigned int vmnap_host_cid = VMNAP_DEFAULT_CID;
module_param_named(host_cid, vmnap_host_cid, uint, 0444);
MODULE_PARM_DESC(host_cid, "vsock CID of the host running vmnapd (default 2; 1 = loopback)");

unsigned int vmnap_port = VMNAP_DEFAULT_PORT;
module_param_named(port, vmnap_port, uint, 0444);
MODULE_PARM_DESC(port, "vsock port vmnapd listens on (default 5151)");

bool vmnap_enabled = true;
module_param_named(enabled, vmnap_enabled, bool, 0644);
MODULE_PARM_DESC(enabled, "answer handoffs (0: always BUSY with reason DISABLED)");

bool vmnap_test_hooks;
module_param_named(test_hooks, vmnap_test_hooks, bool, 0444);
MODULE_PARM_DESC(test_hooks, "allow the netlink test commands (default 0)");

unsigned int vmnap_failsafe_ms = 500;
module_param_named(failsafe_ms, vmnap_failsafe_ms, uint, 0644);
MODULE_PARM_DESC(failsafe_ms, "release devices after this much guest time without pause or resume (default 500)");

unsigned int vmnap_window_us = 10000;
module_param_named(window_us, vmnap_window_us, uint, 0644);
MODULE_PARM_DESC(window_us, "evidence observation window in microseconds (default 10000)");

static unsigned int min_idle_permille = 900;
module_param(min_idle_permille, uint, 0644);
MODULE_PARM_DESC(min_idle_permille, "a CPU idle less than this over the window is busy (default 900)");

static unsigned long max_dirty_pages = 2048;
module_param(max_dirty_pages, ulong, 0644);
MODULE_PARM_DESC(max_dirty_pages, "more dirty page cache than this is busy (default 2048)");

static unsigned int min_timer_us = 2000;
module_param(min_timer_us, uint, 0644);
MODULE_PARM_DESC(min_timer_us, "a known timer closer than this is busy (default 2000)");

unsigned int vmnap_reconnect_min_ms = 100;
module_param_named(reconnect_min_ms, vmnap_reconnect_min_ms, uint, 0444);
MODULE_PARM_DESC(reconnect_min_ms, "first reconnect delay (default 100)");

unsigned int vmnap_reconnect_max_ms = 5000;
module_param_named(reconnect_max_ms, vmnap_reconnect_max_ms, uint, 0444);
MODULE_PARM_DESC(reconnect_max_ms, "reconnect delay cap (default 5000)");

bool vmnap_free_report = true;
module_param_named(free_report, vmnap_free_report, bool, 0444);
MODULE_PARM_DESC(free_report, "register for free page reporting (default 1)");

unsigned int vmnap_free_ack_ms = 1000;
module_param_named(free_ack_ms, vmnap_free_ack_ms, uint, 0644);
MODULE_PARM_DESC(free_ack_ms, "wait this long for FREE_REPORT_ACK (default 1000)");

struct vmnap_thresholds vmnap_thr;

static void vmnap_load_thresholds(void)
{
	vmnap_thr.min_idle_permille = min(READ_ONCE(min_idle_permille), 1000U);
	vmnap_thr.max_dirty_pages = READ_ONCE(max_dirty_pages);
	vmnap_thr.min_timer_ns = (u64)READ_ONCE(min_timer_us) * NSEC_PER_USEC;
}

/* ---- link events (vmnap.lock held) ----------------------------------- */

void vmnap_link_up(void)
{
	static u64 ranges[VMNAP_MAX_RAM_RANGES][2];	/* under vmnap.lock */
	struct vmnap_hello_info info = {
		.nr_cpus = num_possible_cpus(),
		.page_size = PAGE_SIZE,
		.version = VMNAP_MODULE_VERSION,
		.ranges = (const u64 (*)[2])ranges,
	};
	size_t len;
	int n;

	info.features = VMNAP_F_QUIESCE;
	if (vmnap.free_registered)
		info.features |= VMNAP_F_FREE_REPORT;
	if (vmnap_timer_evidence_active())
		info.features |= VMNAP_F_TIMER_EVIDENCE;
	n = vmnap_ram_ranges(ranges, VMNAP_MAX_RAM_RANGES);
	if (n <= 0) {
		pr_err("no guest RAM ranges (%d): HELLO not sent\n", n);
		vmnap_link_drop();
		return;
	}
	info.nr_ranges = n;
	vmnap.offered = info.features;
	vmnap_fsm_connected(&vmnap.fsm, info.features);

	mutex_lock(&vmnap.tx_lock);
	len = vmnap_build_hello(vmnap.txbuf, VMNAP_MAX_MSG, 0, &info);
	mutex_unlock(&vmnap.tx_lock);
	/* txbuf is only written under vmnap.lock + tx_lock: stable here */
	if (vmnap_send(vmnap.txbuf, len))
		vmnap_link_drop();
}

static void vmnap_release(enum vmnap_counter why)
{
	if (!vmnap_fsm_release(&vmnap.fsm))
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

void vmnap_link_down(void)
{
	if (vmnap.fsm.handoff == VMNAP_HANDOFF_QUIESCED)
		vmnap_release(VMNAP_CTR_UNQ_LINK);
	vmnap_fsm_link_lost(&vmnap.fsm);
	vmnap_freepage_abort();
}

/* ---- handoff ---------------------------------------------------------- */

/*
 * Decide on a handoff: sample, and when nothing is busy quiesce the
 * devices and sample again.  Returns the verdict; on READY the devices are
 * held and the caller marks the handoff held.  vmnap.lock held.
 */
static u32 vmnap_decide(u32 deadline_ms, bool quiesce, struct vmnap_sample *s,
			u32 *busy)
{
	unsigned int window = READ_ONCE(vmnap_window_us);
	int ret;

	vmnap_load_thresholds();
	*busy = READ_ONCE(vmnap_enabled) ? 0 : VMNAP_BUSY_DISABLED;
	vmnap_evidence_collect(s, window);
	*busy |= vmnap_busy_reasons(s, &vmnap_thr);
	if (!*busy && quiesce) {
		ret = vmnap_quiesce(min(deadline_ms / 2, VMNAP_MAX_QUIESCE_MS));
		if (ret) {
			vmnap_count(VMNAP_CTR_QUIESCE_FAILS);
			*busy |= VMNAP_BUSY_QUIESCE;
		} else {
			/* what the quiesce drained must stay drained */
			vmnap_evidence_collect(s, window);
			*busy |= vmnap_busy_reasons(s, &vmnap_thr);
		}
		if (*busy)
			vmnap_unquiesce();
	}
	s->devices_quiesced = vmnap_quiesced_devices();

	vmnap.last = *s;
	vmnap.last_busy = *busy;
	vmnap.have_evidence = true;
	vmnap.last_verdict = *busy ? VMNAP_BUSY : VMNAP_READY;
	vmnap_count(*busy ? VMNAP_CTR_BUSY : VMNAP_CTR_READY);
	return vmnap.last_verdict;
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
	vmnap.last_req_id = req_id;
	/* from the quiesce to the ack, no allocation may wait on a disk */
	noio = memalloc_noio_save();
	verdict = vmnap_decide(le32_to_cpu(m->ack_deadline_ms),
			       vmnap.fsm.accepted & VMNAP_F_QUIESCE, &s, &busy);
	if (verdict == VMNAP_READY) {
		vmnap_fsm_quiesced(&vmnap.fsm, req_id);
		vmnap.quiesced_at = ktime_get();
		vmnap_failsafe_arm();
	}
	vmnap_send_handoff_ack(req_id, verdict, &s, busy);
	memalloc_noio_restore(noio);
}

/* A second handoff while devices are held: refuse without sampling. */
static void vmnap_handoff_busy_state(const struct vmnap_handoff_req *m)
{
	struct vmnap_sample s = vmnap.last;

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

/* Dispatch a validated host message; nonzero return drops the link. */
int vmnap_handle_msg(const struct vmnap_hdr *h, const void *payload)
{
	u16 type = le16_to_cpu(h->type);
	const struct vmnap_error *err;
	ktime_t t0;
	u8 buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_ping)];

	switch (vmnap_fsm_rx(&vmnap.fsm, h, payload)) {
	case VMNAP_ACT_NONE:
		break;
	case VMNAP_ACT_HELLO_DONE:
		pr_info("host accepted: vm id %llu, features 0x%x\n",
			vmnap.fsm.vm_id, vmnap.fsm.accepted);
		vmnap_backoff_reset(&vmnap.backoff);
		vmnap_freepage_link_up();
		break;
	case VMNAP_ACT_HANDOFF:
		vmnap_handoff(payload);
		break;
	case VMNAP_ACT_BUSY_STATE:
		vmnap_handoff_busy_state(payload);
		break;
	case VMNAP_ACT_UNQUIESCE:
		t0 = ktime_get();
		vmnap_release(type == VMNAP_RESUMED ? VMNAP_CTR_UNQ_RESUMED :
			      VMNAP_CTR_UNQ_ABORT);
		if (type == VMNAP_RESUMED)
			vmnap_resume_ack(payload, ktime_to_ns(ktime_sub(ktime_get(), t0)));
		break;
	case VMNAP_ACT_RESUME_ACK:
		vmnap_resume_ack(payload, 0);
		break;
	case VMNAP_ACT_STALE:
		vmnap_count(VMNAP_CTR_STALE);
		break;
	case VMNAP_ACT_FREE_ACK:
		vmnap_freepage_ack(vmnap.fsm.free_status);
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
				    vmnap_err_name(vmnap.fsm.err));
		vmnap_send_error(vmnap.fsm.err, le32_to_cpu(h->seq), NULL);
		break;
	case VMNAP_ACT_DROP:
		vmnap_count(VMNAP_CTR_RX_STATE);
		pr_warn("host %s unacceptable: %s, dropping link\n",
			vmnap_type_name(type), vmnap_err_name(vmnap.fsm.err));
		vmnap_send_error(vmnap.fsm.err, le32_to_cpu(h->seq), NULL);
		return -EPROTO;
	}
	return 0;
}

/* The fail-safe fired: no pause and no resume within failsafe_ms. */
void vmnap_failsafe_expired(void)
{
	mutex_lock(&vmnap.lock);
	vmnap_release(VMNAP_CTR_UNQ_FAILSAFE);
	mutex_unlock(&vmnap.lock);
}

/* ---- test hooks (genl.c, test_hooks=1) -------------------------------- */

int vmnap_test_handoff(u32 *verdict, u32 *busy)
{
	struct vmnap_sample s;

	mutex_lock(&vmnap.lock);
	if (vmnap.fsm.handoff == VMNAP_HANDOFF_QUIESCED) {
		*verdict = VMNAP_BUSY;
		*busy = VMNAP_BUSY_STATE;
		mutex_unlock(&vmnap.lock);
		return 0;
	}
	vmnap_count(VMNAP_CTR_HANDOFFS);
	*verdict = vmnap_decide(VMNAP_MAX_QUIESCE_MS * 2, true, &s, busy);
	if (*verdict == VMNAP_READY) {
		vmnap_fsm_quiesced(&vmnap.fsm, VMNAP_LOCAL_REQ_ID);
		vmnap.quiesced_at = ktime_get();
		vmnap_failsafe_arm();
	}
	mutex_unlock(&vmnap.lock);
	return 0;
}

void vmnap_test_unquiesce(void)
{
	mutex_lock(&vmnap.lock);
	vmnap_release(VMNAP_CTR_UNQ_LOCAL);
	mutex_unlock(&vmnap.lock);
}

/* ---- init / exit ------------------------------------------------------ */

static int __init vmnap_init(void)
{
	int ret;

	mutex_init(&vmnap.lock);
	vmnap_fsm_init(&vmnap.fsm);
	vmnap_load_thresholds();
	vmnap.wq = alloc_ordered_workqueue("vmnap", WQ_MEM_RECLAIM);
	if (!vmnap.wq)
		return -ENOMEM;
	ret = vmnap_link_init();
	if (ret)
		goto err_wq;
	ret = vmnap_quiesce_init();
	if (ret)
		goto err_link;
	ret = vmnap_evidence_init();
	if (ret)
		goto err_quiesce;
	vmnap_freepage_init();
	ret = vmnap_genl_init();
	if (ret)
		goto err_free;
	vmnap_link_start();
	pr_info("version %s, protocol %u, host cid %u port %u, %s, free page reporting %s\n",
		VMNAP_MODULE_VERSION, VMNAP_PROTO_VERSION, vmnap_host_cid,
		vmnap_port, vmnap_enabled ? "enabled" : "disabled",
		vmnap.free_registered ? "on" : vmnap.free_off_reason);
	return 0;

err_free:
	vmnap_freepage_exit();
	vmnap_evidence_exit();
err_quiesce:
	vmnap_quiesce_exit();
err_link:
	vmnap_link_exit();
err_wq:
	destroy_workqueue(vmnap.wq);
	return ret;
}

/*
 * Unload in any state: no more netlink commands, no more free page
 * reports (the reporter is woken if it waits for an ack), the link closed
 * (which releases held devices), then the fail-safe and the tracepoints.
 */
static void __exit vmnap_exit(void)
{
	vmnap_genl_exit();
	WRITE_ONCE(vmnap.stopping, true);
	vmnap_freepage_exit();
	vmnap_link_stop();
	mutex_lock(&vmnap.lock);
	vmnap_release(VMNAP_CTR_UNQ_LOCAL);
	mutex_unlock(&vmnap.lock);
	vmnap_quiesce_exit();
	vmnap_evidence_exit();
	vmnap_link_exit();
	destroy_workqueue(vmnap.wq);
	pr_info("unloaded\n");
}

module_init(vmnap_init);
module_exit(vmnap_exit);

MODULE_DESCRIPTION("vmnap guest agent: idle evidence, quiesce, free page reporting");
MODULE_AUTHOR("vmnap developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(VMNAP_MODULE_VERSION);
