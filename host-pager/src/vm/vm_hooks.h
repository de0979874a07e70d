/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vm_hooks.h - detach every subsystem of a VM, in reverse order of
 * dependency: the coordinator first (it drives the others), then the pause
 * backend, the vsock device and guest link, the pager last (it must serve
 * every page until nothing maps guest RAM any more).
 *
 * Each subsystem adds its detach call here when it lands; a NULL pointer
 * means "not attached" and is skipped by the detach function itself.
 */
#ifndef VMNAP_VM_HOOKS_H
#define VMNAP_VM_HOOKS_H

#include "vmnapd.h"
#include "guest_link.h"
#include "guest_link_listen.h"
#include "pager.h"
#include "vhost_vsock.h"
#include "vm_control.h"

static inline void vm_detach_all(struct vm *vm)
{
	vm_control_detach(vm);	/* coordinator first: it drives the others */
	guest_link_listen_vm_detach(vm);	/* no new guest connections */
	guest_link_vm_detach(vm);	/* closes its transport session first */
	vhost_vsock_vm_detach(vm);	/* before the pager: it maps guest RAM */
	pager_vm_detach(vm);	/* last: serves pages until nothing maps RAM */
}

#endif
