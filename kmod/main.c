// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnap.ko - guest half of vmnap: idle evidence, device quiesce and free
 * page reporting for a host that pauses and evicts this VM while its agent
 * waits.  See README.md and uapi/vmnap.h.
 *
 * main.c: module init/exit and parameters.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>

#include "uapi/vmnap.h"

#define VMNAP_MODULE_VERSION "0.1.0"

static unsigned int host_cid = VMNAP_DEFAULT_CID;
module_param(host_cid, uint, 0444);
MODULE_PARM_DESC(host_cid, "vsock CID of the host running vmnapd (default 2)");

static unsigned int port = VMNAP_DEFAULT_PORT;
module_param(port, uint, 0444);
MODULE_PARM_DESC(port, "vsock port vmnapd listens on (default 5151)");

static bool enabled = true;
module_param(enabled, bool, 0644);
MODULE_PARM_DESC(enabled, "answer handoffs (0: always BUSY/disabled)");

static int __init vmnap_init(void)
{
	pr_info("version %s, protocol %u, host cid %u port %u, %s\n",
		VMNAP_MODULE_VERSION, VMNAP_PROTO_VERSION, host_cid, port,
		enabled ? "enabled" : "disabled");
	return 0;
}

static void __exit vmnap_exit(void)
{
	pr_info("unloaded\n");
}

module_init(vmnap_init);
module_exit(vmnap_exit);

MODULE_DESCRIPTION("vmnap guest agent: idle evidence, quiesce, free page reporting");
MODULE_AUTHOR("vmnap developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(VMNAP_MODULE_VERSION);
