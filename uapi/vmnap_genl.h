/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * vmnap_genl.h - generic netlink family "vmnap" of the guest module: status
 * of vmnap.ko for in-guest tools (vmnap-guest) and the selftests.
 *
 * VMNAP_CMD_GET_STATUS (no attributes; every command needs CAP_NET_ADMIN)
 * answers with the link state, protocol state, features, vm id, every
 * counter (nested VMNAP_A_COUNTERS: attribute type = enum vmnap_counter + 1,
 * u64) and the last evidence (nested VMNAP_A_EVIDENCE, VMNAP_EVA_*).
 *
 * Test commands are refused with -EPERM unless the module was loaded with
 * test_hooks=1:
 *  VMNAP_CMD_TEST_HANDOFF   decide as for a HANDOFF_REQ (evidence, quiesce
 *                           on READY), without a host; reply like STATUS
 *  VMNAP_CMD_TEST_UNQUIESCE release devices (as a RESUMED would)
 *  VMNAP_CMD_TEST_DROP_LINK drop the connection (as a transport reset)
 *  VMNAP_CMD_TEST_EVIDENCE  sample evidence now without deciding
 */
#ifndef _UAPI_VMNAP_GENL_H
#define _UAPI_VMNAP_GENL_H

#define VMNAP_GENL_NAME		"vmnap"
#define VMNAP_GENL_VERSION	1

enum vmnap_genl_cmd {
	VMNAP_CMD_UNSPEC,
	VMNAP_CMD_GET_STATUS,
	VMNAP_CMD_TEST_HANDOFF,
	VMNAP_CMD_TEST_UNQUIESCE,
	VMNAP_CMD_TEST_DROP_LINK,
	VMNAP_CMD_TEST_EVIDENCE,
	__VMNAP_CMD_MAX,
};
#define VMNAP_CMD_MAX (__VMNAP_CMD_MAX - 1)

enum vmnap_genl_attr {
	VMNAP_A_UNSPEC,
	VMNAP_A_VERSION,	/* string: module version */
	VMNAP_A_LINK,		/* u32: 0 down, 1 hello sent, 2 up */
	VMNAP_A_HANDOFF,	/* u32: 0 idle, 1 quiesced */
	VMNAP_A_ENABLED,	/* u8 */
	VMNAP_A_FEATURES,	/* u32: VMNAP_F_* offered in HELLO */
	VMNAP_A_HOST_FEATURES,	/* u32: VMNAP_F_* the host accepted */
	VMNAP_A_VM_ID,		/* u64 */
	VMNAP_A_HOST_CID,	/* u32 */
	VMNAP_A_PORT,		/* u32 */
	VMNAP_A_QUIESCED_DEVS,	/* u32: devices held now */
	VMNAP_A_FREE_REPORTING,	/* u8: page reporting registered */
	VMNAP_A_COUNTERS,	/* nested: type = counter + 1, u64 */
	VMNAP_A_EVIDENCE,	/* nested VMNAP_EVA_* (absent before any) */
	VMNAP_A_VERDICT,	/* u32: last verdict (VMNAP_READY/BUSY) */
	VMNAP_A_REQ_ID,		/* u64: last handoff request id */
	VMNAP_A_PAD,
	__VMNAP_A_MAX,
};
#define VMNAP_A_MAX (__VMNAP_A_MAX - 1)

enum vmnap_genl_evidence_attr {
	VMNAP_EVA_UNSPEC,
	VMNAP_EVA_WINDOW_NS,		/* u64 */
	VMNAP_EVA_NEXT_TIMER_NS,	/* u64, ~0 unknown */
	VMNAP_EVA_WRITEBACK_PAGES,	/* u64 */
	VMNAP_EVA_DIRTY_PAGES,		/* u64 */
	VMNAP_EVA_CPU_IDLE_PERMILLE,	/* u32 */
	VMNAP_EVA_NR_RUNNABLE,		/* u32 */
	VMNAP_EVA_IO_INFLIGHT,		/* u32 */
	VMNAP_EVA_BUSY_REASONS,		/* u32 */
	VMNAP_EVA_DEVICES_QUIESCED,	/* u32 */
	VMNAP_EVA_TIMER_KNOWN,		/* u8 */
	VMNAP_EVA_PAD,
	__VMNAP_EVA_MAX,
};
#define VMNAP_EVA_MAX (__VMNAP_EVA_MAX - 1)

/* Counters, in VMNAP_A_COUNTERS as attribute type (counter + 1). */
enum vmnap_counter {
	VMNAP_CTR_CONNECTS,		/* connections opened */
	VMNAP_CTR_CONNECT_FAILS,	/* connect attempts that failed */
	VMNAP_CTR_LINK_LOSSES,		/* connections lost or dropped */
	VMNAP_CTR_RX_MSGS,		/* host messages accepted */
	VMNAP_CTR_RX_BAD,		/* host messages rejected by the checks */
	VMNAP_CTR_RX_STATE,		/* valid messages at the wrong time */
	VMNAP_CTR_RX_FATAL,		/* streams dropped for lost framing */
	VMNAP_CTR_TX_MSGS,		/* messages sent */
	VMNAP_CTR_TX_ERRORS,		/* sends that failed */
	VMNAP_CTR_HANDOFFS,		/* HANDOFF_REQ handled */
	VMNAP_CTR_READY,		/* READY verdicts */
	VMNAP_CTR_BUSY,			/* BUSY verdicts */
	VMNAP_CTR_QUIESCE_FAILS,	/* devices that would not quiesce */
	VMNAP_CTR_UNQ_RESUMED,		/* unquiesced on RESUMED */
	VMNAP_CTR_UNQ_ABORT,		/* unquiesced on HANDOFF_ABORT */
	VMNAP_CTR_UNQ_LINK,		/* unquiesced on link loss */
	VMNAP_CTR_UNQ_FAILSAFE,		/* unquiesced by the fail-safe timer */
	VMNAP_CTR_UNQ_LOCAL,		/* unquiesced by a test command/unload */
	VMNAP_CTR_STALE,		/* ABORT for a handoff not held */
	VMNAP_CTR_FREE_REPORTS,		/* FREE_REPORT batches acked */
	VMNAP_CTR_FREE_PAGES,		/* base pages in acked batches */
	VMNAP_CTR_FREE_FAILS,		/* batches not sent, not acked */
	VMNAP_CTR_PEER_ERRORS,		/* ERROR messages from the host */
	VMNAP_CTR_TIMER_RESYNCS,	/* timer book rebuilt from the queues */
	VMNAP_CTR_TIMER_UNKNOWN,	/* evidence with an unknown timer */
	VMNAP_CTR_TIMER_WHEEL_BLIND,	/* sampling CPU's timer wheel unseen */
	VMNAP_CTR_NO_RESV_PORT,		/* connects with no reserved port free */
	VMNAP_CTR_CLOCK_STEPS,		/* CLOCK_REALTIME stepped on RESUMED */
	VMNAP_CTR_CLOCK_STEP_MS,	/* total ms it was stepped forward */
	VMNAP_CTR_CLOCK_STEP_FAILS,	/* steps not taken (see handoff.c) */
	VMNAP_CTR_FAILSAFE_FROZEN,	/* fail-safe deferred: the guest was frozen */
	VMNAP_CTR_FAILSAFE_GRACE,	/* fail-safe on time: a short wait for RESUMED */
	VMNAP_CTR_DOORBELL_RINGS,	/* host connections to the doorbell port */
	VMNAP_CTR_DOORBELL_FAILS,	/* doorbell listener could not be set up */
	VMNAP_CTR_MAX,
};

#endif /* _UAPI_VMNAP_GENL_H */
