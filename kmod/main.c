// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnap.ko - guest half of vmnap: idle evidence, device quiesce and free
 * page reporting for a host that pauses and evicts this VM while its agent
 * waits.  See README.md and uapi/vmnap.h.
 *
 * main.c: module init/exit and the module parameters, the counters, the
 * workqueue and the unload flag every file shares (vmnap_mod.h).  It wires
 * the components together: the link (link.c) reports to the protocol and
 * handoff state machine (handoff.c), which tells the free page reporter
 * (freepage.c); the fail-safe of the device quiesce (quiesce.c) reports
 * to the handoff.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>

#include "vmnap_mod.h"
#include "evidence.h"
#include "freepage.h"
#include "genl.h"
#include "handoff.h"
#include "link.h"
#include "quiesce.h"

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
MODULE_PARM_DESC(failsafe_ms, "release devices after this much guest time without pause or resume, and one wait for a RESUMED that may be on its way (default 500)");

unsigned int vmnap_window_us = 10000;
module_param_named(window_us, vmnap_window_us, uint, 0644);
MODULE_PARM_DESC(window_us, "evidence observation window in microseconds (default 10000)");

unsigned int vmnap_min_idle_permille = 900;
module_param_named(min_idle_permille, vmnap_min_idle_permille, uint, 0644);
MODULE_PARM_DESC(min_idle_permille, "a CPU idle less than this over the window is busy (default 900)");

unsigned long vmnap_max_dirty_pages = 2048;
module_param_named(max_dirty_pages, vmnap_max_dirty_pages, ulong, 0644);
MODULE_PARM_DESC(max_dirty_pages, "more dirty page cache than this is busy (default 2048)");

unsigned int vmnap_min_timer_us = 2000;
module_param_named(min_timer_us, vmnap_min_timer_us, uint, 0644);
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
MODULE_PARM_DESC(free_ack_ms, "warn when FREE_REPORT_ACK takes longer than this (0: never); the pages stay isolated until it comes (default 1000)");

struct workqueue_struct *vmnap_wq;
bool vmnap_unloading;
atomic64_t vmnap_counters[VMNAP_CTR_MAX];

static int __init vmnap_init(void)
{
	int ret;

	/*
	 * High priority: the link's work is short and a paused VM's resume
	 * waits for it.  At normal priority, a RESUMED that arrives with the
	 * agent's data queued behind the processes that data wakes: its
	 * RESUME_ACK took 5-6 ms (median) instead of 2.3.
	 */
	vmnap_wq = alloc_ordered_workqueue("vmnap", WQ_HIGHPRI | WQ_MEM_RECLAIM);
	if (!vmnap_wq)
		return -ENOMEM;
	ret = vmnap_handoff_init(&vmnap_freepage_ops);
	if (ret)
		goto err_wq;
	ret = vmnap_link_init(&vmnap_handoff_link_ops);
	if (ret)
		goto err_handoff;
	ret = vmnap_quiesce_init(vmnap_handoff_failsafe_expired);
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
		vmnap_freepage_active() ? "on" : vmnap_freepage_off_reason());
	return 0;

err_free:
	vmnap_freepage_exit();
	vmnap_evidence_exit();
err_quiesce:
	vmnap_quiesce_exit();
err_link:
	vmnap_link_exit();
err_handoff:
	vmnap_handoff_exit();
err_wq:
	destroy_workqueue(vmnap_wq);
	return ret;
}

/*
 * Unload in any state: no more netlink commands, no more free page
 * reports (a report in flight is settled first: by its ack, or, if the
 * link drops meanwhile, by the HELLO_ACK of a reconnect, so the link keeps
 * reconnecting until then), the link closed (which releases held
 * devices), then the fail-safe and the tracepoints.
 */
static void __exit vmnap_exit(void)
{
	vmnap_genl_exit();
	vmnap_freepage_exit();
	WRITE_ONCE(vmnap_unloading, true);
	vmnap_link_stop();
	vmnap_handoff_stop();
	vmnap_quiesce_exit();
	vmnap_evidence_exit();
	vmnap_link_exit();
	vmnap_handoff_exit();
	destroy_workqueue(vmnap_wq);
	pr_info("unloaded\n");
}

module_init(vmnap_init);
module_exit(vmnap_exit);

MODULE_DESCRIPTION("vmnap guest agent: idle evidence, quiesce, free page reporting");
MODULE_AUTHOR("vmnap developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(VMNAP_MODULE_VERSION);
