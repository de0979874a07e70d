// SPDX-License-Identifier: GPL-2.0-only
/*
 * genl.c - generic netlink family "vmnap" (uapi/vmnap_genl.h): status,
 * counters and last evidence for in-guest tools; test commands only with
 * test_hooks=1.  Every command needs CAP_NET_ADMIN.
 *
 * Holds no lock of its own: the status is a snapshot the handoff takes
 * under its lock (vmnap_handoff_status()), the test commands take the
 * locks they need in handoff.c and link.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <net/genetlink.h>
#include <net/netlink.h>

#include "vmnap_mod.h"
#include "freepage.h"
#include "genl.h"
#include "handoff.h"
#include "link.h"

static struct genl_family vmnap_genl_family;

static int vmnap_put_evidence(struct sk_buff *skb, const struct vmnap_sample *s,
			      u32 busy)
{
	struct nlattr *nest = nla_nest_start(skb, VMNAP_A_EVIDENCE);

	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u64_64bit(skb, VMNAP_EVA_WINDOW_NS, s->window_ns, VMNAP_EVA_PAD) ||
	    nla_put_u64_64bit(skb, VMNAP_EVA_NEXT_TIMER_NS,
			      s->timer_known ? s->next_timer_ns : VMNAP_TIMER_UNKNOWN,
			      VMNAP_EVA_PAD) ||
	    nla_put_u64_64bit(skb, VMNAP_EVA_WRITEBACK_PAGES, s->writeback_pages,
			      VMNAP_EVA_PAD) ||
	    nla_put_u64_64bit(skb, VMNAP_EVA_DIRTY_PAGES, s->dirty_pages,
			      VMNAP_EVA_PAD) ||
	    nla_put_u32(skb, VMNAP_EVA_CPU_IDLE_PERMILLE, s->cpu_idle_permille) ||
	    nla_put_u32(skb, VMNAP_EVA_NR_RUNNABLE, s->nr_runnable) ||
	    nla_put_u32(skb, VMNAP_EVA_IO_INFLIGHT, s->io_inflight) ||
	    nla_put_u32(skb, VMNAP_EVA_BUSY_REASONS, busy) ||
	    nla_put_u32(skb, VMNAP_EVA_DEVICES_QUIESCED, s->devices_quiesced) ||
	    nla_put_u8(skb, VMNAP_EVA_TIMER_KNOWN, s->timer_known)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* Fill a status message from a snapshot of the handoff state. */
static int vmnap_fill_status(struct sk_buff *skb, const struct vmnap_status *st)
{
	struct nlattr *nest;
	unsigned int i;

	if (nla_put_string(skb, VMNAP_A_VERSION, VMNAP_MODULE_VERSION) ||
	    nla_put_u32(skb, VMNAP_A_LINK, st->link) ||
	    nla_put_u32(skb, VMNAP_A_HANDOFF, st->handoff) ||
	    nla_put_u8(skb, VMNAP_A_ENABLED, READ_ONCE(vmnap_enabled)) ||
	    nla_put_u32(skb, VMNAP_A_FEATURES, st->offered) ||
	    nla_put_u32(skb, VMNAP_A_HOST_FEATURES, st->accepted) ||
	    nla_put_u64_64bit(skb, VMNAP_A_VM_ID, st->vm_id, VMNAP_A_PAD) ||
	    nla_put_u32(skb, VMNAP_A_HOST_CID, vmnap_host_cid) ||
	    nla_put_u32(skb, VMNAP_A_PORT, vmnap_port) ||
	    nla_put_u32(skb, VMNAP_A_QUIESCED_DEVS, st->quiesced_devs) ||
	    nla_put_u8(skb, VMNAP_A_FREE_REPORTING, vmnap_freepage_active()) ||
	    nla_put_u32(skb, VMNAP_A_VERDICT, st->verdict) ||
	    nla_put_u64_64bit(skb, VMNAP_A_REQ_ID, st->req_id, VMNAP_A_PAD))
		return -EMSGSIZE;
	nest = nla_nest_start(skb, VMNAP_A_COUNTERS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < VMNAP_CTR_MAX; i++)
		if (nla_put_u64_64bit(skb, i + 1,
				      vmnap_counter_read(i),
				      VMNAP_CTR_MAX + 1))
			return -EMSGSIZE;
	nla_nest_end(skb, nest);
	if (st->have_evidence)
		return vmnap_put_evidence(skb, &st->last, st->last_busy);
	return 0;
}

static int vmnap_reply_status(struct genl_info *info)
{
	struct vmnap_status st;
	struct sk_buff *skb;
	void *hdr;
	int ret;

	skb = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!skb)
		return -ENOMEM;
	hdr = genlmsg_put_reply(skb, info, &vmnap_genl_family, 0,
				info->genlhdr->cmd);
	if (!hdr) {
		nlmsg_free(skb);
		return -EMSGSIZE;
	}
	vmnap_handoff_status(&st);
	ret = vmnap_fill_status(skb, &st);
	if (ret) {
		nlmsg_free(skb);
		return ret;
	}
	genlmsg_end(skb, hdr);
	return genlmsg_reply(skb, info);
}

static int vmnap_cmd_status(struct sk_buff *skb, struct genl_info *info)
{
	return vmnap_reply_status(info);
}

static int vmnap_cmd_test(struct sk_buff *skb, struct genl_info *info)
{
	u32 verdict, busy;

	if (!vmnap_test_hooks) {
		GENL_SET_ERR_MSG(info, "test commands need test_hooks=1");
		return -EPERM;
	}
	switch (info->genlhdr->cmd) {
	case VMNAP_CMD_TEST_HANDOFF:
		vmnap_test_handoff(&verdict, &busy);
		break;
	case VMNAP_CMD_TEST_UNQUIESCE:
		vmnap_test_unquiesce();
		break;
	case VMNAP_CMD_TEST_DROP_LINK:
		vmnap_link_drop_sync();
		break;
	case VMNAP_CMD_TEST_EVIDENCE:
		vmnap_test_evidence();
		break;
	default:
		return -EOPNOTSUPP;
	}
	return vmnap_reply_status(info);
}

static const struct genl_small_ops vmnap_genl_ops[] = {
	{
		.cmd = VMNAP_CMD_GET_STATUS,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = vmnap_cmd_status,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = VMNAP_CMD_TEST_HANDOFF,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = vmnap_cmd_test,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = VMNAP_CMD_TEST_UNQUIESCE,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = vmnap_cmd_test,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = VMNAP_CMD_TEST_DROP_LINK,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = vmnap_cmd_test,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = VMNAP_CMD_TEST_EVIDENCE,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = vmnap_cmd_test,
		.flags = GENL_ADMIN_PERM,
	},
};

static struct genl_family vmnap_genl_family __ro_after_init = {
	.name = VMNAP_GENL_NAME,
	.version = VMNAP_GENL_VERSION,
	.maxattr = 0,		/* requests carry no attributes */
	.module = THIS_MODULE,
	.small_ops = vmnap_genl_ops,
	.n_small_ops = ARRAY_SIZE(vmnap_genl_ops),
	.resv_start_op = VMNAP_CMD_MAX + 1,
};

int vmnap_genl_init(void)
{
	return genl_register_family(&vmnap_genl_family);
}

void vmnap_genl_exit(void)
{
	genl_unregister_family(&vmnap_genl_family);
}
