// SPDX-License-Identifier: GPL-2.0-only
/*
 * fsm.c - protocol state machine of the guest side.
 *
 * Input is a message that vmnap_decode() already accepted (framing, type,
 * direction and per-type fields are valid).  What remains to judge is
 * whether it is valid *now*: HELLO_ACK only once, handoff messages only
 * after it, ABORT/RESUMED only for the handoff we hold, FREE_REPORT_ACK
 * only for the batch we sent.  The caller serialises all calls (the link's
 * ordered workqueue plus the module mutex).
 */
#include <linux/kernel.h>
#include <linux/string.h>

#include "fsm.h"

void vmnap_fsm_init(struct vmnap_fsm *f)
{
	memset(f, 0, sizeof(*f));
	f->link = VMNAP_LINK_DOWN;
	f->handoff = VMNAP_HANDOFF_IDLE;
}

/* A connection is open and HELLO offering @offered went out. */
void vmnap_fsm_connected(struct vmnap_fsm *f, u32 offered)
{
	f->link = VMNAP_LINK_HELLO_SENT;
	f->offered = offered;
	f->accepted = 0;
	f->free_pending = false;
}

/* The connection is gone: the caller also releases any held handoff. */
void vmnap_fsm_link_lost(struct vmnap_fsm *f)
{
	f->link = VMNAP_LINK_DOWN;
	f->accepted = 0;
	f->free_pending = false;
	vmnap_fsm_release(f);
}

/* The request id of HANDOFF_REQ, HANDOFF_ABORT and RESUMED (first field). */
u64 vmnap_fsm_req_id(const void *payload)
{
	const __le64 *id = payload;

	return le64_to_cpu(*id);
}

static enum vmnap_action vmnap_fsm_reject(struct vmnap_fsm *f, u32 err)
{
	f->err = err;
	return VMNAP_ACT_REJECT;
}

static enum vmnap_action vmnap_fsm_hello_ack(struct vmnap_fsm *f,
					     const struct vmnap_hello_ack *m)
{
	u32 features = le32_to_cpu(m->features);

	if (f->link != VMNAP_LINK_HELLO_SENT)
		return vmnap_fsm_reject(f, VMNAP_ESTATE);
	if (features & ~f->offered) {
		/* the host claims a feature we never offered */
		f->err = VMNAP_EFIELD;
		return VMNAP_ACT_DROP;
	}
	f->accepted = features;
	f->vm_id = le64_to_cpu(m->vm_id);
	f->link = VMNAP_LINK_UP;
	return VMNAP_ACT_HELLO_DONE;
}

enum vmnap_action vmnap_fsm_rx(struct vmnap_fsm *f, const struct vmnap_hdr *h,
			       const void *payload)
{
	u16 type = le16_to_cpu(h->type);

	f->err = 0;
	if (f->link == VMNAP_LINK_DOWN)
		return vmnap_fsm_reject(f, VMNAP_ESTATE);

	switch (type) {
	case VMNAP_PING:
		return VMNAP_ACT_PONG;
	case VMNAP_PONG:
		return VMNAP_ACT_NONE;
	case VMNAP_ERROR:
		return VMNAP_ACT_PEER_ERROR;
	case VMNAP_HELLO_ACK:
		return vmnap_fsm_hello_ack(f, payload);
	default:
		break;
	}

	if (f->link != VMNAP_LINK_UP)
		return vmnap_fsm_reject(f, VMNAP_ESTATE);

	switch (type) {
	case VMNAP_HANDOFF_REQ:
		if (f->handoff == VMNAP_HANDOFF_QUIESCED)
			return VMNAP_ACT_BUSY_STATE;
		return VMNAP_ACT_HANDOFF;
	case VMNAP_HANDOFF_ABORT:
		if (f->handoff == VMNAP_HANDOFF_QUIESCED &&
		    vmnap_fsm_req_id(payload) == f->req_id)
			return VMNAP_ACT_UNQUIESCE;
		return VMNAP_ACT_STALE;
	case VMNAP_RESUMED:
		if (f->handoff == VMNAP_HANDOFF_QUIESCED &&
		    vmnap_fsm_req_id(payload) == f->req_id)
			return VMNAP_ACT_UNQUIESCE;
		if (f->last_req_valid &&
		    vmnap_fsm_req_id(payload) == f->last_req_id) {
			f->last_req_valid = false;
			return VMNAP_ACT_RESUME_ACK;
		}
		return vmnap_fsm_reject(f, VMNAP_ESTATE);
	case VMNAP_FREE_REPORT_ACK: {
		const struct vmnap_free_report_ack *m = payload;

		if (!f->free_pending ||
		    le64_to_cpu(m->batch_id) != f->free_batch)
			return vmnap_fsm_reject(f, VMNAP_ESTATE);
		f->free_status = le32_to_cpu(m->status);
		f->free_pending = false;
		return VMNAP_ACT_FREE_ACK;
	}
	default:
		/* vmnap_decode() lets only host-to-guest types through */
		return vmnap_fsm_reject(f, VMNAP_ETYPE);
	}
}

/* The handoff @req_id is acked READY: devices are held until released. */
void vmnap_fsm_quiesced(struct vmnap_fsm *f, u64 req_id)
{
	f->handoff = VMNAP_HANDOFF_QUIESCED;
	f->req_id = req_id;
	f->last_req_valid = false;
}

/*
 * Devices are released (RESUMED, ABORT, link loss, fail-safe).  Returns
 * true when a handoff was held.  A RESUMED arriving later for it is still
 * acknowledged (VMNAP_ACT_RESUME_ACK).
 */
bool vmnap_fsm_release(struct vmnap_fsm *f)
{
	if (f->handoff != VMNAP_HANDOFF_QUIESCED)
		return false;
	f->handoff = VMNAP_HANDOFF_IDLE;
	f->last_req_id = f->req_id;
	f->last_req_valid = true;
	return true;
}

void vmnap_fsm_free_sent(struct vmnap_fsm *f, u64 batch_id)
{
	f->free_batch = batch_id;
	f->free_pending = true;
}

void vmnap_fsm_free_done(struct vmnap_fsm *f)
{
	f->free_pending = false;
}
