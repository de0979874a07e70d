// SPDX-License-Identifier: GPL-2.0-only
/* vm.c - the VM registry; see vmnapd.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vmnapd.h"
#include "vm_hooks.h"

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
	vm->id = ++d->next_vm_id;
	snprintf(vm->name, sizeof(vm->name), "%s", name);
	snprintf(vm->subject, sizeof(vm->subject), "vm %s", name);
	vm->next = d->vms;
	d->vms = vm;
	log_info(vm->subject, "registered (id %llu)", (unsigned long long)vm->id);
	return vm;
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
