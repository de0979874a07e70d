/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmnap_mod.h - what every file of vmnap.ko shares: the module parameters,
 * the counters, the module's workqueue and the unload flag, all defined in
 * main.c.  Each component keeps its own state in its own file, behind the
 * functions of its header; the pure logic is in core/.
 *
 * Calls go down this list by name, and up only through the callbacks a
 * lower file is given at init (struct vmnap_link_ops, struct
 * vmnap_free_ops, the fail-safe callback of quiesce.c):
 *
 *   main.c      module init/exit and parameters; wires the others
 *   genl.c      netlink family "vmnap": status and test commands
 *   freepage.c  free page reporting (a client of the protocol)
 *   handoff.c   protocol dispatch and the handoff state machine
 *   link.c      the vsock client         quiesce.c  devices, fail-safe
 *   evidence.c  idle evidence, guest RAM ranges
 *
 * Locking: each file that owns a lock documents it in its header comment
 * (handoff.c: the handoff lock, which serialises the protocol and handoff
 * state; link.c: the socket and its tx lock; freepage.c: the pending free
 * batch).  vmnap_wq is ordered: connect, receive and fail-safe work never
 * run concurrently.  Counters are atomic64 and read without locks.
 */
#ifndef _VMNAP_MOD_H
#define _VMNAP_MOD_H

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "uapi/vmnap.h"
#include "uapi/vmnap_genl.h"

#define VMNAP_MODULE_VERSION	"0.1.0"

/* module parameters (main.c) */
extern unsigned int vmnap_host_cid;
extern unsigned int vmnap_port;
extern bool vmnap_enabled;
extern bool vmnap_test_hooks;
extern unsigned int vmnap_failsafe_ms;
extern unsigned int vmnap_window_us;
extern unsigned int vmnap_min_idle_permille;
extern unsigned long vmnap_max_dirty_pages;
extern unsigned int vmnap_min_timer_us;
extern unsigned int vmnap_reconnect_min_ms;
extern unsigned int vmnap_reconnect_max_ms;
extern unsigned int vmnap_free_ack_ms;
extern bool vmnap_free_report;

/* module-wide state (main.c) */
extern struct workqueue_struct *vmnap_wq;	/* ordered */
extern bool vmnap_unloading;			/* set once, at unload */
extern atomic64_t vmnap_counters[VMNAP_CTR_MAX];

static inline bool vmnap_stopping(void)
{
	return READ_ONCE(vmnap_unloading);
}

static inline void vmnap_count(enum vmnap_counter c)
{
	atomic64_inc(&vmnap_counters[c]);
}

static inline void vmnap_count_add(enum vmnap_counter c, u64 n)
{
	atomic64_add(n, &vmnap_counters[c]);
}

static inline u64 vmnap_counter_read(unsigned int i)
{
	return atomic64_read(&vmnap_counters[i]);
}

#endif /* _VMNAP_MOD_H */
