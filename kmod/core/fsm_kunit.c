// SPDX-License-Identifier: GPL-2.0-only
/*
 * fsm_kunit.c - KUnit suite for the guest's protocol state machine.
 */
#include <kunit/test.h>

#include "fsm.h"

struct msg {
	struct vmnap_hdr h;
	union {
		struct vmnap_hello_ack hello_ack;
		struct vmnap_handoff_req req;
		struct vmnap_handoff_abort abort;
		struct vmnap_resumed resumed;
		struct vmnap_free_report_ack free_ack;
		struct vmnap_ping ping;
	} p;
};

static enum vmnap_action rx(struct vmnap_fsm *f, unsigned int type, u64 id)
{
	struct msg m = {};

	vmnap_hdr_init(&m.h, type, 0, 1);
	switch (type) {
	case VMNAP_HELLO_ACK:
		m.p.hello_ack.version = cpu_to_le16(1);
		m.p.hello_ack.features = cpu_to_le32((u32)id);
		break;
	case VMNAP_FREE_REPORT_ACK:
		m.p.free_ack.batch_id = cpu_to_le64(id);
		break;
	default:
		m.p.req.req_id = cpu_to_le64(id);	/* first field of all */
		break;
	}
	return vmnap_fsm_rx(f, &m.h, &m.p);
}

static void up(struct kunit *test, struct vmnap_fsm *f)
{
	vmnap_fsm_init(f);
	vmnap_fsm_connected(f, VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT);
	KUNIT_ASSERT_EQ(test, rx(f, VMNAP_HELLO_ACK, VMNAP_F_QUIESCE),
			VMNAP_ACT_HELLO_DONE);
}

static void fsm_hello_first(struct kunit *test)
{
	struct vmnap_fsm f;

	vmnap_fsm_init(&f);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_PING, 0), VMNAP_ACT_REJECT);
	vmnap_fsm_connected(&f, VMNAP_F_QUIESCE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_REQ, 1), VMNAP_ACT_REJECT);
	KUNIT_EXPECT_EQ(test, f.err, (u32)VMNAP_ESTATE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_PING, 0), VMNAP_ACT_PONG);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HELLO_ACK, VMNAP_F_QUIESCE),
			VMNAP_ACT_HELLO_DONE);
	KUNIT_EXPECT_EQ(test, f.accepted, VMNAP_F_QUIESCE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HELLO_ACK, 0), VMNAP_ACT_REJECT);
}

static void fsm_hello_ack_unoffered_feature_drops(struct kunit *test)
{
	struct vmnap_fsm f;

	vmnap_fsm_init(&f);
	vmnap_fsm_connected(&f, VMNAP_F_QUIESCE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HELLO_ACK, VMNAP_F_FREE_REPORT),
			VMNAP_ACT_DROP);
	KUNIT_EXPECT_EQ(test, f.err, (u32)VMNAP_EFIELD);
}

static void fsm_handoff_resume(struct kunit *test)
{
	struct vmnap_fsm f;

	up(test, &f);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_REQ, 5), VMNAP_ACT_HANDOFF);
	vmnap_fsm_quiesced(&f, 5);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_REQ, 6), VMNAP_ACT_BUSY_STATE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_RESUMED, 4), VMNAP_ACT_REJECT);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_RESUMED, 5), VMNAP_ACT_UNQUIESCE);
	KUNIT_EXPECT_TRUE(test, vmnap_fsm_release(&f));
	KUNIT_EXPECT_FALSE(test, vmnap_fsm_release(&f));	/* idempotent */
	KUNIT_EXPECT_EQ(test, f.handoff, VMNAP_HANDOFF_IDLE);
}

static void fsm_abort_and_stale(struct kunit *test)
{
	struct vmnap_fsm f;

	up(test, &f);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_ABORT, 9), VMNAP_ACT_STALE);
	vmnap_fsm_quiesced(&f, 9);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_ABORT, 8), VMNAP_ACT_STALE);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_HANDOFF_ABORT, 9), VMNAP_ACT_UNQUIESCE);
}

static void fsm_resumed_after_failsafe(struct kunit *test)
{
	struct vmnap_fsm f;

	up(test, &f);
	vmnap_fsm_quiesced(&f, 11);
	KUNIT_EXPECT_TRUE(test, vmnap_fsm_release(&f));	/* fail-safe */
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_RESUMED, 11), VMNAP_ACT_RESUME_ACK);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_RESUMED, 11), VMNAP_ACT_REJECT);
}

static void fsm_link_loss_releases(struct kunit *test)
{
	struct vmnap_fsm f;

	up(test, &f);
	vmnap_fsm_quiesced(&f, 3);
	vmnap_fsm_free_sent(&f, 1);
	vmnap_fsm_link_lost(&f);
	KUNIT_EXPECT_EQ(test, f.handoff, VMNAP_HANDOFF_IDLE);
	KUNIT_EXPECT_EQ(test, f.link, VMNAP_LINK_DOWN);
	KUNIT_EXPECT_FALSE(test, f.free_pending);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_RESUMED, 3), VMNAP_ACT_REJECT);
}

static void fsm_free_ack_matches_batch(struct kunit *test)
{
	struct vmnap_fsm f;

	up(test, &f);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_FREE_REPORT_ACK, 1), VMNAP_ACT_REJECT);
	vmnap_fsm_free_sent(&f, 2);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_FREE_REPORT_ACK, 1), VMNAP_ACT_REJECT);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_FREE_REPORT_ACK, 2), VMNAP_ACT_FREE_ACK);
	KUNIT_EXPECT_FALSE(test, f.free_pending);
	KUNIT_EXPECT_EQ(test, rx(&f, VMNAP_FREE_REPORT_ACK, 2), VMNAP_ACT_REJECT);
}

static struct kunit_case fsm_cases[] = {
	KUNIT_CASE(fsm_hello_first),
	KUNIT_CASE(fsm_hello_ack_unoffered_feature_drops),
	KUNIT_CASE(fsm_handoff_resume),
	KUNIT_CASE(fsm_abort_and_stale),
	KUNIT_CASE(fsm_resumed_after_failsafe),
	KUNIT_CASE(fsm_link_loss_releases),
	KUNIT_CASE(fsm_free_ack_matches_batch),
	{}
};

static struct kunit_suite fsm_suite = {
	.name = "vmnap_fsm",
	.test_cases = fsm_cases,
};
kunit_test_suite(fsm_suite);
