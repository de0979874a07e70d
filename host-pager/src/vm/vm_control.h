/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vm_control.h - binds a VM's coordinator (coord.c) to the world: its
 * pause backend, guest link, pager, vsock device, event log and timers.
 *
 * vm_control_attach() creates vm->pause (optional), vm->link and
 * vm->coord.  The guest link reaches the guest through the VM's built-in
 * vhost-user-vsock device (port 5151 goes to vm->link) and/or a unix socket
 * vmnapd listens on (link_socket: Firecracker / Cloud Hypervisor hybrid
 * vsock "<uds>_5151", or a test peer).  Coordinator actions map to:
 *
 *   handoff / abort / resumed   guest_link_handoff / _abort / _resumed
 *   pause                       vhost_vsock_set_paused(true), pause_vm()
 *   resume                      pause_resume_vm(), vhost_vsock_set_paused
 *                               (false), pager_resumed()
 *   offload                     pager_offload_start() (when vm->pager is
 *                               attached and evictable)
 *
 * and guest link callbacks to coord_link_up/down, coord_handoff_ack,
 * coord_resume_ack; FREE_REPORT ranges go to pager_drop_free().
 */
#ifndef VMNAP_VM_CONTROL_H
#define VMNAP_VM_CONTROL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

#include "coord.h"
#include "pause.h"
#include "vmnapd.h"

enum vm_link_kind {
	VM_LINK_NONE = 0,	/* only the built-in vsock device, if any */
	VM_LINK_UNIX,		/* link_path: unix socket vmnapd listens on */
	VM_LINK_HYBRID,		/* link_path: hybrid vsock base "<uds>" */
	VM_LINK_VSOCK,		/* AF_VSOCK from link_cid */
};

struct vm_control_spec {
	bool has_pause;
	struct pause_spec pause;
	bool managed;
	enum vm_link_kind link_kind;
	char link_path[108];
	uint32_t link_cid;
	uint32_t link_port;		/* 0: VMNAP_DEFAULT_PORT */
	pid_t vmm_pid;			/* 0: learn it from the pause backend */
	bool has_policy;
	struct coord_config policy;	/* else the daemon's defaults */
};

/* -errno; @err (may be NULL) gets a reason for the API. */
int vm_control_attach(struct vm *vm, const struct vm_control_spec *spec,
		      char *err, size_t errlen);
/* Set or replace the pause backend (only while the VM runs).  -errno
 * (-EBUSY while paused or pausing); @err says why. */
int vm_control_set_pause(struct vm *vm, const struct pause_spec *ps, char *err, size_t errlen);
/*
 * Managed or not.  A managed VM needs a pause backend that keeps guest
 * time true (the guest's clock runs while paused), or the operator's
 * "allow_clock_stop" on the backend: -EPERM otherwise, @err says why.
 */
int vm_control_set_managed(struct vm *vm, bool managed, char *err, size_t errlen);
/* Why @pb cannot keep guest time true for a managed VM; NULL when it can. */
const char *vm_control_clock_refusal(const struct pause_backend *pb);
/* Undo vm_control_attach (resumes a paused VM first).  NULL-safe. */
void vm_control_detach(struct vm *vm);
/* vm->pager appeared (memory handshake): route its errors to the
 * coordinator (coord_pager_error, fail-safe resume; none without one) and
 * a lost VM (pager.h "lost") to vm->lost_err, a log line and a "vm_lost"
 * event, with or without a coordinator. */
void vm_control_pager_attached(struct vm *vm);
/* Tell the pager whether a command runs now (pager_tail_track: a managed
 * VM's coordinator in RUNNING; without a coordinator yet, or with one that
 * has not left RUNNING since it came, for a while: pager_tail_track_start),
 * where that can change outside a transition: a mapper handed in, the VM
 * managed or not any more. */
void vm_control_tail_sync(struct vm *vm);
/*
 * Tell the pager which guest RAM the vsock device touches first when the
 * VM runs again (vhost_vsock_resume_ranges): kept through offloads, and
 * what of it is out read back now.  At every offload's start, and
 * whenever the device's next RX chains changed while the VM runs (its
 * rx_ahead), so the buffer a RESUMED lands in after a pause that left
 * pages out is back before the resume, not read on its way.
 */
void vm_device_pages_update(struct vm *vm);
/* The VMM's pid for PSS and cgroup memory (0: from the pause backend). */
void vm_control_set_vmm_pid(struct vm *vm, pid_t pid);
pid_t vm_control_vmm_pid(struct vm *vm);
struct vmm_mem_sample;
/* The VMM's last memory sample, taken off the loop (vmm_mem.h); false
 * when there is no VMM pid or no sample of it yet. */
bool vm_control_vmm_mem(struct vm *vm, struct vmm_mem_sample *out);
/* Guest-RAM resident bytes integrated over time since attach, GiB*s. */
double vm_control_memxtime_gib_s(struct vm *vm);
/*
 * Guest input @vm refused, by reason (guest link: each rejected message by
 * its error, connections over the reconnect limit, a guest that does not
 * read, connections for a VM without a link; vsock device: hostile
 * packets, rings and connections): @fn once per reason, zeroes included.
 */
void vm_rejections_foreach(struct vm *vm,
			   void (*fn)(const char *reason, uint64_t n, void *arg), void *arg);
/* "link" events suppressed by the VM's event budget. */
uint64_t vm_control_events_suppressed(struct vm *vm);
/* Everything the API shows for a VM. */
json_t *vm_control_json(struct vm *vm);

/* The VM's restore policy (enum pager_restore): its own or the daemon's. */
int vm_restore(const struct vm *vm);
/* Set it (-1: the daemon's default), for its pager too.  -EINVAL. */
int vm_set_restore(struct vm *vm, int how);

#endif
