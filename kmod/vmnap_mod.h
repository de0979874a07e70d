/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmnap_mod.h - state shared by the files of vmnap.ko.
 *
 * One instance (struct vmnap, in main.c) per guest.  Locking:
 *  - vmnap.wq is ordered: connect, receive and fail-safe work never run
 *    concurrently, so the link and handoff state change in one place.
 *  - vmnap.lock (mutex) serialises that work with netlink commands and
 *    with module unload; it protects fsm, quiesce state and last evidence.
 *  - vmnap.tx_lock (mutex) serialises writers of the socket (the receive
 *    work and the free page reporter) and guards vmnap.sock for them.
 *  - counters are atomic64 and read without locks.
 */
#ifndef _VMNAP_MOD_H
#define _VMNAP_MOD_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/hrtimer.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/workqueue.h>

#include "uapi/vmnap.h"
#include "uapi/vmnap_genl.h"
#include "core/backoff.h"
#include "core/fsm.h"
#include "core/proto.h"
#include "core/verdict.h"

#define VMNAP_MODULE_VERSION	"0.1.0"

/* Quiesce bookkeeping: at most this many virtio devices are held. */
#define VMNAP_MAX_QUIESCE_DEVS	32

struct vmnap_qdev;

struct vmnap {
	struct mutex lock;
	struct workqueue_struct *wq;
	bool stopping;

	/* link (link.c) */
	struct mutex tx_lock;
	struct socket *sock;
	u32 tx_seq;
	struct vmnap_rxbuf rx;
	struct delayed_work connect_work;
	struct work_struct rx_work;
	struct vmnap_backoff backoff;
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);
	u8 *txbuf;			/* VMNAP_MAX_MSG bytes, under tx_lock */

	/* protocol (fsm.c) */
	struct vmnap_fsm fsm;
	u32 offered;			/* features in the last HELLO */

	/* quiesce (quiesce.c) */
	struct vmnap_qdev *qdevs;
	unsigned int nr_qdevs;
	struct hrtimer failsafe;
	struct work_struct failsafe_work;
	ktime_t quiesced_at;

	/* free page reporting (freepage.c) */
	bool free_registered;
	const char *free_off_reason;
	struct completion free_done;
	u64 free_batch;

	/* evidence (evidence.c) */
	bool have_evidence;
	struct vmnap_sample last;
	u32 last_busy;
	u32 last_verdict;
	u64 last_req_id;

	atomic64_t counters[VMNAP_CTR_MAX];
};

extern struct vmnap vmnap;

/* module parameters (main.c) */
extern unsigned int vmnap_host_cid;
extern unsigned int vmnap_port;
extern bool vmnap_enabled;
extern bool vmnap_test_hooks;
extern unsigned int vmnap_failsafe_ms;
extern unsigned int vmnap_window_us;
extern unsigned int vmnap_reconnect_min_ms;
extern unsigned int vmnap_reconnect_max_ms;
extern unsigned int vmnap_free_ack_ms;
extern bool vmnap_free_report;
extern struct vmnap_thresholds vmnap_thr;

static inline void vmnap_count(enum vmnap_counter c)
{
	atomic64_inc(&vmnap.counters[c]);
}

/* main.c: protocol dispatch, called by the receive work under vmnap.lock */
int vmnap_handle_msg(const struct vmnap_hdr *h, const void *payload);
void vmnap_link_up(void);
void vmnap_link_down(void);
int vmnap_test_handoff(u32 *verdict, u32 *busy);
void vmnap_test_unquiesce(void);
void vmnap_failsafe_expired(void);

/* link.c */
int vmnap_link_init(void);
void vmnap_link_start(void);
void vmnap_link_stop(void);
void vmnap_link_exit(void);
int vmnap_send(const void *buf, size_t len);
int vmnap_send_error(u32 code, u32 ref_seq, const char *text);
void vmnap_link_drop(void);
bool vmnap_link_is_up(void);

/* evidence.c */
int vmnap_evidence_init(void);
void vmnap_evidence_exit(void);
void vmnap_evidence_collect(struct vmnap_sample *s, unsigned int window_us);
bool vmnap_timer_evidence_active(void);
int vmnap_ram_ranges(u64 (*ranges)[2], unsigned int max);

/* quiesce.c */
int vmnap_quiesce_init(void);
void vmnap_quiesce_exit(void);
int vmnap_quiesce(unsigned int timeout_ms);
unsigned int vmnap_unquiesce(void);
unsigned int vmnap_quiesced_devices(void);
void vmnap_failsafe_arm(void);
void vmnap_failsafe_cancel(void);
bool vmnap_is_own_timer(const struct hrtimer *t);

/* freepage.c */
void vmnap_freepage_init(void);
void vmnap_freepage_exit(void);
void vmnap_freepage_ack(u32 status);
void vmnap_freepage_abort(void);
void vmnap_freepage_link_up(void);

/* genl.c */
int vmnap_genl_init(void);
void vmnap_genl_exit(void);

#endif /* _VMNAP_MOD_H */
