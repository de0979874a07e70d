/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * fsm.h - what the guest does with each validated host message, given the
 * link and handoff state (pure logic, KUnit tested).
 */
#ifndef _VMNAP_FSM_H
#define _VMNAP_FSM_H

#include <linux/types.h>

#include "uapi/vmnap.h"

enum vmnap_link_state {
	VMNAP_LINK_DOWN,	/* no connection */
	VMNAP_LINK_HELLO_SENT,	/* connected, waiting for HELLO_ACK */
	VMNAP_LINK_UP,		/* HELLO_ACK accepted */
};

enum vmnap_handoff_state {
	VMNAP_HANDOFF_IDLE,	/* devices run */
	VMNAP_HANDOFF_QUIESCED,	/* READY acked, devices held */
};

/* What the caller must do after vmnap_fsm_rx(). */
enum vmnap_action {
	VMNAP_ACT_NONE,		/* nothing (PONG) */
	VMNAP_ACT_HELLO_DONE,	/* link is up: record vm id, features */
	VMNAP_ACT_HANDOFF,	/* decide, quiesce, ack (vmnap_fsm_quiesced()) */
	VMNAP_ACT_BUSY_STATE,	/* ack BUSY(STATE): a handoff holds devices */
	VMNAP_ACT_UNQUIESCE,	/* ABORT or RESUMED for the held handoff */
	VMNAP_ACT_RESUME_ACK,	/* RESUMED after a local unquiesce: ack only */
	VMNAP_ACT_STALE,	/* ABORT for a handoff not held: count only */
	VMNAP_ACT_FREE_ACK,	/* wake the free page reporter */
	VMNAP_ACT_PONG,		/* answer a PING */
	VMNAP_ACT_PEER_ERROR,	/* host sent ERROR: log and count */
	VMNAP_ACT_REJECT,	/* send ERROR(ESTATE or EFIELD); see fsm.err */
	VMNAP_ACT_DROP,		/* protocol broken: send ERROR, drop link */
};

/**
 * struct vmnap_fsm - protocol state of the guest side
 * @link: connection state
 * @handoff: handoff state
 * @offered: features sent in HELLO
 * @accepted: features the host chose in HELLO_ACK
 * @vm_id: host's id for this VM (HELLO_ACK)
 * @req_id: handoff currently held (VMNAP_HANDOFF_QUIESCED)
 * @last_req_id: last handoff released without a RESUMED (fail-safe, link)
 * @last_req_valid: @last_req_id is meaningful
 * @free_batch: FREE_REPORT waiting for its ack
 * @free_pending: @free_batch is meaningful
 * @free_status: status of the last matching FREE_REPORT_ACK
 * @err: VMNAP_E* code for REJECT and DROP
 */
struct vmnap_fsm {
	enum vmnap_link_state link;
	enum vmnap_handoff_state handoff;
	u32 offered;
	u32 accepted;
	u64 vm_id;
	u64 req_id;
	u64 last_req_id;
	bool last_req_valid;
	u64 free_batch;
	bool free_pending;
	u32 free_status;
	u32 err;
};

void vmnap_fsm_init(struct vmnap_fsm *f);
void vmnap_fsm_connected(struct vmnap_fsm *f, u32 offered);
void vmnap_fsm_link_lost(struct vmnap_fsm *f);
enum vmnap_action vmnap_fsm_rx(struct vmnap_fsm *f, const struct vmnap_hdr *h,
			       const void *payload);
void vmnap_fsm_quiesced(struct vmnap_fsm *f, u64 req_id);
bool vmnap_fsm_release(struct vmnap_fsm *f);
u64 vmnap_fsm_req_id(const void *payload);
void vmnap_fsm_free_sent(struct vmnap_fsm *f, u64 batch_id);
void vmnap_fsm_free_done(struct vmnap_fsm *f);

#endif /* _VMNAP_FSM_H */
