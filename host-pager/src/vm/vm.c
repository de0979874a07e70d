// SPDX-License-Identifier: GPL-2.0-only
/*
 * vm.c - the VM registry and each VM's parts, attached and detached in one
 * order; see vmnapd.h.  The parts below know nothing of struct vm: each is
 * created with its loop, the VM's log subject, its config and the
 * callbacks it needs (ops), and this file wires them to each other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doorbell.h"
#include "guest_link.h"
#include "guest_link_listen.h"
#include "log.h"
#include "pager.h"
#include "vhost_vsock.h"
#include "vm_control.h"
#include "vmnapd.h"

bool vm_name_valid(const char *name)
{
	size_t n = strnlen(name, VM_NAME_MAX);

	if (n == 0 || n >= VM_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

struct vm *vm_find(struct vmnapd *d, const char *name)
{
	for (struct vm *vm = d->vms; vm; vm = vm->next)
		if (!strcmp(vm->name, name))
			return vm;
	return NULL;
}

struct vm *vm_find_id(struct vmnapd *d, uint64_t id)
{
	for (struct vm *vm = d->vms; vm; vm = vm->next)
		if (vm->id == id)
			return vm;
	return NULL;
}

struct vm *vm_new(struct vmnapd *d, const char *name)
{
	struct vm *vm;

	if (!vm_name_valid(name)) {
		errno = EINVAL;
		return NULL;
	}
	if (vm_find(d, name)) {
		errno = EEXIST;
		return NULL;
	}
	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		errno = ENOMEM;
		return NULL;
	}
	vm->d = d;
	vm->restore = -1;
	vm->id = ++d->next_vm_id;
	snprintf(vm->name, sizeof(vm->name), "%s", name);
	snprintf(vm->subject, sizeof(vm->subject), "vm %s", name);
	vm->next = d->vms;
	d->vms = vm;
	log_info(vm->subject, "registered (id %llu)", (unsigned long long)vm->id);
	return vm;
}

/* Memory the vsock device waited for was read back: it carries on. */
static void pager_resident(struct pager *p, void *arg)
{
	struct vm *vm = arg;

	(void)p;
	vhost_vsock_memory_ready(vm->vsock);
}

static int pager_attached(struct vm *vm, int err)
{
	if (!err)
		pager_set_resident_cb(vm->pager, pager_resident, vm);
	return err;
}

int vm_pager_attach(struct vm *vm, const struct pager_config *cfg,
		    const struct pager_region_desc *rd, unsigned int nr)
{
	struct pager_config c = *cfg;

	if (vm->pager)
		return -EEXIST;
	c.restore = vm_restore(vm);
	return pager_attached(vm, pager_new(vm->d->loop, vm->subject, vm->name, &c, rd,
					    nr, vm, &vm->pager));
}

int vm_pager_adopt(struct vm *vm, const struct pager_config *cfg,
		   const struct pager_region_desc *rd, unsigned int nr,
		   const char *store_id)
{
	struct pager_config c = *cfg;

	if (vm->pager)
		return -EEXIST;
	c.restore = vm_restore(vm);
	return pager_attached(vm, pager_new_from_store(vm->d->loop, vm->subject, vm->name,
						       &c, rd, nr, store_id, vm,
						       &vm->pager));
}

/* The pager's threads are stopped and its store closed by a reaper thread
 * (pager_free_async): the loop only lets go. */
void vm_pager_detach(struct vm *vm)
{
	pager_free_async(vm->pager);
	vm->pager = NULL;
}

/* The vsock device reaches guest RAM and the guest link through these. */
static int vsock_make_resident(void *opaque, uint64_t gpa, uint64_t len)
{
	struct vm *vm = opaque;

	return vm->pager ? pager_make_resident_async(vm->pager, gpa, len) : 0;
}

static void vsock_mem_table(void *opaque, const struct vhost_user_mem_region *r,
			    const int *fds, unsigned int n)
{
	struct vm *vm = opaque;
	struct pager_mem_table_region mt[VHOST_USER_MAX_REGIONS];

	if (!vm->pager || n > VHOST_USER_MAX_REGIONS)
		return;
	for (unsigned int i = 0; i < n; i++)
		mt[i] = (struct pager_mem_table_region){
			.gpa = r[i].guest_phys_addr, .size = r[i].memory_size,
			.fd_offset = r[i].mmap_offset, .fd = fds[i],
		};
	(void)pager_set_gpa_map(vm->pager, mt, n);
}

static struct guest_link *vsock_guest_link(void *opaque)
{
	struct vm *vm = opaque;

	return vm->link;
}

static void vsock_rx_ahead(void *opaque)
{
	vm_device_pages_update(opaque);
}

static const struct vhost_vsock_ops vm_vsock_ops = {
	.make_resident = vsock_make_resident,
	.mem_table = vsock_mem_table,
	.guest_link = vsock_guest_link,
	.rx_ahead = vsock_rx_ahead,
};

int vm_vsock_attach(struct vm *vm, const struct vhost_vsock_config *cfg)
{
	if (vm->vsock)
		return -EEXIST;
	return vhost_vsock_new(vm->d->loop, vm->subject, cfg, &vm_vsock_ops, vm,
			       &vm->vsock);
}

void vm_vsock_detach(struct vm *vm)
{
	vhost_vsock_free(vm->vsock);
	vm->vsock = NULL;
}

/*
 * Detach every part, in reverse order of dependency: the coordinator first
 * (it drives the others), then no new guest connections (nor a doorbell
 * ring in flight), the guest link (closing its transport session first),
 * the vsock device (before the pager: it maps guest RAM), the pager last
 * (it must serve every page until nothing maps guest RAM any more).  A part not attached is skipped.
 */
static void vm_detach_all(struct vm *vm)
{
	vm_control_detach(vm);
	guest_link_listen_vm_detach(vm);
	guest_doorbell_vm_detach(vm);
	vm_link_detach(vm);
	vm_vsock_detach(vm);
	vm_pager_detach(vm);
}

void vm_free(struct vm *vm)
{
	struct vmnapd *d = vm->d;
	struct vm **pp;

	vm_detach_all(vm);
	for (pp = &d->vms; *pp; pp = &(*pp)->next) {
		if (*pp == vm) {
			*pp = vm->next;
			break;
		}
	}
	log_info(vm->subject, "removed");
	free(vm);
}
