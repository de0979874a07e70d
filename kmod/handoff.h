/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * handoff.h - protocol dispatch and the handoff state machine (handoff.c).
 */
#ifndef _VMNAP_HANDOFF_H
#define _VMNAP_HANDOFF_H

#include <linux/types.h>

#include "core/verdict.h"

/**
 * struct vmnap_free_ops - how the protocol reports to the free page
 * reporter above it; every call is made under the handoff lock
 * @available: the reporter is registered: HELLO offers VMNAP_F_FREE_REPORT
 * @on_accepted: a HELLO_ACK arrived (@accepted: with VMNAP_F_FREE_REPORT):
 *	a new session is up, so the host has ended every earlier one
 * @on_ack: FREE_REPORT_ACK for the pending batch, with its status
 * @on_abort: the link is lost: the pending batch, if any, is orphaned
 */
struct vmnap_free_ops {
	bool (*available)(void);
	void (*on_accepted)(bool accepted);
	void (*on_ack)(u32 status);
	void (*on_abort)(void);
};

/**
 * struct vmnap_status - a consistent snapshot for GET_STATUS
 * @link: enum vmnap_link_state
 * @handoff: enum vmnap_handoff_state
 * @offered: features in the last HELLO
 * @accepted: features the host accepted
 * @vm_id: from HELLO_ACK
 * @quiesced_devs: virtio devices held
 * @verdict: last verdict (VMNAP_READY / VMNAP_BUSY, 0 before any)
 * @req_id: request id of the last handoff
 * @have_evidence: @last and @last_busy are meaningful
 * @last: last evidence measured
 * @last_busy: busy reasons of @last
 */
struct vmnap_status {
	u32 link;
	u32 handoff;
	u32 offered;
	u32 accepted;
	u64 vm_id;
	u32 quiesced_devs;
	u32 verdict;
	u64 req_id;
	bool have_evidence;
	struct vmnap_sample last;
	u32 last_busy;
};

/* Given to vmnap_link_init(): link events for the protocol. */
extern const struct vmnap_link_ops vmnap_handoff_link_ops;

int vmnap_handoff_init(const struct vmnap_free_ops *free_ops);
void vmnap_handoff_stop(void);
void vmnap_handoff_exit(void);
void vmnap_handoff_failsafe_expired(void);
void vmnap_handoff_status(struct vmnap_status *st);

/* free page reporter (freepage.c) */
u64 vmnap_handoff_free_sent(u64 *gen);
void vmnap_handoff_free_done(void);

/* test hooks (genl.c, test_hooks=1) */
int vmnap_test_handoff(u32 *verdict, u32 *busy);
void vmnap_test_unquiesce(void);
void vmnap_test_evidence(void);

#endif /* _VMNAP_HANDOFF_H */
