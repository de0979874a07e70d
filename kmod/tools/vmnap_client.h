/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmnap_client.h - userspace side of vmnap.ko's generic netlink family
 * (libnl-genl-3) and module load/unload (libkmod), shared by vmnap-guest
 * and the in-guest selftests.  Header-only: each program includes it once.
 */
#ifndef _VMNAP_CLIENT_H
#define _VMNAP_CLIENT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libkmod.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "uapi/vmnap_genl.h"

#define VMNAP_MODULE_PATH	"/lib/modules/vmnap.ko"

static const char *const vmnap_counter_names[VMNAP_CTR_MAX] = {
	[VMNAP_CTR_CONNECTS] = "connects",
	[VMNAP_CTR_CONNECT_FAILS] = "connect_fails",
	[VMNAP_CTR_LINK_LOSSES] = "link_losses",
	[VMNAP_CTR_RX_MSGS] = "rx_msgs",
	[VMNAP_CTR_RX_BAD] = "rx_bad",
	[VMNAP_CTR_RX_STATE] = "rx_state",
	[VMNAP_CTR_RX_FATAL] = "rx_fatal",
	[VMNAP_CTR_TX_MSGS] = "tx_msgs",
	[VMNAP_CTR_TX_ERRORS] = "tx_errors",
	[VMNAP_CTR_HANDOFFS] = "handoffs",
	[VMNAP_CTR_READY] = "ready",
	[VMNAP_CTR_BUSY] = "busy",
	[VMNAP_CTR_QUIESCE_FAILS] = "quiesce_fails",
	[VMNAP_CTR_UNQ_RESUMED] = "unquiesce_resumed",
	[VMNAP_CTR_UNQ_ABORT] = "unquiesce_abort",
	[VMNAP_CTR_UNQ_LINK] = "unquiesce_link",
	[VMNAP_CTR_UNQ_FAILSAFE] = "unquiesce_failsafe",
	[VMNAP_CTR_UNQ_LOCAL] = "unquiesce_local",
	[VMNAP_CTR_STALE] = "stale",
	[VMNAP_CTR_FREE_REPORTS] = "free_reports",
	[VMNAP_CTR_FREE_PAGES] = "free_pages",
	[VMNAP_CTR_FREE_FAILS] = "free_fails",
	[VMNAP_CTR_PEER_ERRORS] = "peer_errors",
	[VMNAP_CTR_TIMER_RESYNCS] = "timer_resyncs",
	[VMNAP_CTR_TIMER_UNKNOWN] = "timer_unknown",
	[VMNAP_CTR_TIMER_WHEEL_BLIND] = "timer_wheel_blind",
	[VMNAP_CTR_NO_RESV_PORT] = "no_reserved_port",
	[VMNAP_CTR_CLOCK_STEPS] = "clock_steps",
	[VMNAP_CTR_CLOCK_STEP_MS] = "clock_step_ms",
	[VMNAP_CTR_CLOCK_STEP_FAILS] = "clock_step_fails",
	[VMNAP_CTR_FAILSAFE_FROZEN] = "failsafe_frozen",
	[VMNAP_CTR_FAILSAFE_GRACE] = "failsafe_grace",
	[VMNAP_CTR_DOORBELL_RINGS] = "doorbell_rings",
	[VMNAP_CTR_DOORBELL_FAILS] = "doorbell_fails",
};

struct vmnap_status {
	char version[32];
	uint32_t link, handoff, features, host_features, host_cid, port;
	uint32_t quiesced_devs, verdict;
	uint8_t enabled, free_reporting;
	uint64_t vm_id, req_id;
	uint64_t ctr[VMNAP_CTR_MAX];
	bool have_ev;
	uint64_t ev_window_ns, ev_next_timer_ns, ev_writeback, ev_dirty;
	uint32_t ev_idle_permille, ev_runnable, ev_io, ev_busy, ev_devices;
	uint8_t ev_timer_known;
};

static int vmnap_client_parse(struct nl_msg *msg, void *arg)
{
	struct vmnap_status *st = arg;
	struct nlattr *tb[VMNAP_A_MAX + 1];
	struct nlattr *ev[VMNAP_EVA_MAX + 1];
	struct nlattr *c;
	int rem;

	memset(st, 0, sizeof(*st));
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, VMNAP_A_MAX, NULL))
		return NL_SKIP;
	if (tb[VMNAP_A_VERSION])
		snprintf(st->version, sizeof(st->version), "%s",
			 nla_get_string(tb[VMNAP_A_VERSION]));
#define U32(a, f) do { if (tb[a]) st->f = nla_get_u32(tb[a]); } while (0)
#define U8(a, f) do { if (tb[a]) st->f = nla_get_u8(tb[a]); } while (0)
#define U64(a, f) do { if (tb[a]) st->f = nla_get_u64(tb[a]); } while (0)
	U32(VMNAP_A_LINK, link);
	U32(VMNAP_A_HANDOFF, handoff);
	U32(VMNAP_A_FEATURES, features);
	U32(VMNAP_A_HOST_FEATURES, host_features);
	U32(VMNAP_A_HOST_CID, host_cid);
	U32(VMNAP_A_PORT, port);
	U32(VMNAP_A_QUIESCED_DEVS, quiesced_devs);
	U32(VMNAP_A_VERDICT, verdict);
	U8(VMNAP_A_ENABLED, enabled);
	U8(VMNAP_A_FREE_REPORTING, free_reporting);
	U64(VMNAP_A_VM_ID, vm_id);
	U64(VMNAP_A_REQ_ID, req_id);
#undef U32
#undef U8
#undef U64
	if (tb[VMNAP_A_COUNTERS]) {
		nla_for_each_nested(c, tb[VMNAP_A_COUNTERS], rem) {
			int i = nla_type(c) - 1;

			if (i >= 0 && i < VMNAP_CTR_MAX)
				st->ctr[i] = nla_get_u64(c);
		}
	}
	if (tb[VMNAP_A_EVIDENCE] &&
	    !nla_parse_nested(ev, VMNAP_EVA_MAX, tb[VMNAP_A_EVIDENCE], NULL)) {
		st->have_ev = true;
#define E32(a, f) do { if (ev[a]) st->f = nla_get_u32(ev[a]); } while (0)
#define E64(a, f) do { if (ev[a]) st->f = nla_get_u64(ev[a]); } while (0)
		E64(VMNAP_EVA_WINDOW_NS, ev_window_ns);
		E64(VMNAP_EVA_NEXT_TIMER_NS, ev_next_timer_ns);
		E64(VMNAP_EVA_WRITEBACK_PAGES, ev_writeback);
		E64(VMNAP_EVA_DIRTY_PAGES, ev_dirty);
		E32(VMNAP_EVA_CPU_IDLE_PERMILLE, ev_idle_permille);
		E32(VMNAP_EVA_NR_RUNNABLE, ev_runnable);
		E32(VMNAP_EVA_IO_INFLIGHT, ev_io);
		E32(VMNAP_EVA_BUSY_REASONS, ev_busy);
		E32(VMNAP_EVA_DEVICES_QUIESCED, ev_devices);
#undef E32
#undef E64
		if (ev[VMNAP_EVA_TIMER_KNOWN])
			st->ev_timer_known = nla_get_u8(ev[VMNAP_EVA_TIMER_KNOWN]);
	}
	return NL_OK;
}

/*
 * Run one command of the "vmnap" family and parse the status it answers
 * with.  Returns 0 or a negative errno (-ENOENT: module not loaded,
 * -EPERM: test command without test_hooks=1).
 */
static int vmnap_client_cmd(int cmd, struct vmnap_status *st)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = NULL;
	int family, ret;

	if (!sk)
		return -ENOMEM;
	ret = genl_connect(sk);
	if (ret < 0) {
		ret = -ECONNREFUSED;
		goto out;
	}
	family = genl_ctrl_resolve(sk, VMNAP_GENL_NAME);
	if (family < 0) {
		ret = -ENOENT;
		goto out;
	}
	msg = nlmsg_alloc();
	if (!msg || !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0,
				 (uint8_t)cmd, VMNAP_GENL_VERSION)) {
		ret = -ENOMEM;
		goto out;
	}
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, vmnap_client_parse, st);
	ret = nl_send_auto(sk, msg);
	if (ret >= 0)
		ret = nl_recvmsgs_default(sk);
	if (ret < 0) {
		/* libnl maps errno to its own codes; keep the common ones */
		ret = ret == -NLE_PERM ? -EPERM :
		      ret == -NLE_OPNOTSUPP ? -EOPNOTSUPP :
		      ret == -NLE_NOACCESS ? -EACCES : -EIO;
	} else {
		ret = 0;
	}
out:
	nlmsg_free(msg);
	nl_socket_free(sk);
	return ret;
}

/* Load vmnap.ko from @path with @params ("host_cid=1 port=..."). */
static int vmnap_client_load(const char *path, const char *params)
{
	struct kmod_ctx *ctx = kmod_new(NULL, NULL);
	struct kmod_module *mod = NULL;
	int ret;

	if (!ctx)
		return -ENOMEM;
	ret = kmod_module_new_from_path(ctx, path, &mod);
	if (!ret)
		ret = kmod_module_insert_module(mod, 0, params);
	kmod_module_unref(mod);
	kmod_unref(ctx);
	return ret;
}

static int vmnap_client_unload(void)
{
	struct kmod_ctx *ctx = kmod_new(NULL, NULL);
	struct kmod_module *mod = NULL;
	int ret;

	if (!ctx)
		return -ENOMEM;
	ret = kmod_module_new_from_name(ctx, "vmnap", &mod);
	if (!ret)
		ret = kmod_module_remove_module(mod, 0);
	kmod_module_unref(mod);
	kmod_unref(ctx);
	return ret;
}

#endif /* _VMNAP_CLIENT_H */
