/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmnapd.h - the daemon context and the per-VM record.
 *
 * One struct vmnapd holds all mutable daemon state (no other globals).
 * A struct vm is one managed VM; each subsystem keeps its own state behind
 * an opaque pointer in it and offers <subsystem>_vm_attach/_detach:
 *
 *   pager        guest RAM: page states, store, userfaultfd service  (pager.h)
 *   link         guest link: vmnap protocol with vmnap.ko       (guest_link.h)
 *   link_listener  guest link listeners: hybrid socket, vsock CID (guest_link_listen.h)
 *   vsock        built-in vhost-user-vsock device for QEMU     (vhost_vsock.h)
 *   pause        pause backend: QMP, freezer, Firecracker, CH        (pause.h)
 *   coord        the wait coordinator state machine                (coord.h)
 *
 * Lifetime: vm_new() registers; vm_free() detaches every subsystem in
 * reverse order, then frees.  Every VM has a short name used in logs
 * ("vm <name>") and a numeric id sent to the guest in HELLO_ACK.
 */
#ifndef VMNAP_VMNAPD_H
#define VMNAP_VMNAPD_H

#include <stdbool.h>
#include <stdint.h>

#include "loop.h"

#define VM_NAME_MAX	64

struct pager;
struct guest_link;
struct vhost_vsock;
struct guest_link_listener;
struct guest_link_vsock_listener;
struct guest_doorbell;
struct pause_backend;
struct coord;
struct vm_control;
struct vmnapd_settings;

struct vmnapd_config {
	const char *run_dir;	/* sockets: api.sock, mem.sock, ... (0700) */
	const char *store_dir;	/* one store file per VM (0700) */
	const char *events_path;	/* JSONL events, NULL: none */
	const char *config_path;	/* the config file read, or NULL */
};

struct vm {
	struct vm *next;
	struct vmnapd *d;
	uint64_t id;
	char name[VM_NAME_MAX];	/* [A-Za-z0-9_.-], validated on creation */
	char subject[VM_NAME_MAX + 4];	/* "vm <name>" for log lines */

	struct pager *pager;
	struct guest_link *link;
	struct guest_link_listener *link_listener;	/* guest_link_listen.h */
	struct guest_doorbell *doorbell;	/* doorbell.h */
	struct vhost_vsock *vsock;
	struct pause_backend *pause;
	struct coord *coord;
	struct vm_control *control;	/* coordinator glue (vm_control.c) */
	/* LOST: its pager could never serve a fault again (pager.h "lost")
	 * and killed the VMM; kept after the pager is gone.  0: not lost */
	int lost_err;
	char lost_error[160];	/* what the API says */
	int restore;		/* enum pager_restore; -1: the daemon's default */
};

struct vmnapd {
	struct loop *loop;
	struct vmnapd_config cfg;
	struct vm *vms;
	uint64_t next_vm_id;
	uint64_t event_seq;	/* per-daemon event sequence number */
	void *api;		/* control API server (api.c) */
	void *events;		/* event log (events.c) */
	struct vmnapd_settings *settings;	/* config file + defaults (config.c) */
	void *mem_handshake;	/* memory handshake server (mem_handshake.c) */
	void *pager_debug;	/* pager debug endpoint (pager_debug.c) */
	struct guest_link_vsock_listener *link_vsock;	/* AF_VSOCK guest links */
	void *pressure;		/* memory pressure watch (pressure_watch.c) */
	uint64_t vms_lost;	/* VMs lost to a fault the store cannot serve */
};

/* A name is 1..VM_NAME_MAX-1 of [A-Za-z0-9_.-] and not "." or "..". */
bool vm_name_valid(const char *name);
/* Create and register a VM; NULL with errno set (EEXIST, EINVAL, ENOMEM). */
struct vm *vm_new(struct vmnapd *d, const char *name);
struct vm *vm_find(struct vmnapd *d, const char *name);
struct vm *vm_find_id(struct vmnapd *d, uint64_t id);
/* Detach every subsystem, unregister, free. */
void vm_free(struct vm *vm);

/*
 * Each part of a VM, created for it (loop, log subject "vm <name>", id) and
 * wired to the others: -EEXIST when the VM has that part, else the part's
 * own errors.  A detach is a no-op when the part is not attached.
 */
struct guest_link_ops;
struct pager_config;
struct pager_region_desc;
struct vhost_vsock_config;
/* vm->pager: guest RAM of @nr regions; owns the memfds in @rd. */
int vm_pager_attach(struct vm *vm, const struct pager_config *cfg,
		    const struct pager_region_desc *rd, unsigned int nr);
/* The same over the store a previous vmnapd left (pager_new_from_store). */
int vm_pager_adopt(struct vm *vm, const struct pager_config *cfg,
		   const struct pager_region_desc *rd, unsigned int nr,
		   const char *store_id);
void vm_pager_detach(struct vm *vm);
/*
 * vm->link: the guest link; @features VMNAP_F_* the host supports.  In
 * vm_control.c: the coordinator's glue owns the link (its ops point there).
 */
int vm_link_attach(struct vm *vm, uint32_t features,
		   const struct guest_link_ops *ops, void *opaque);
void vm_link_detach(struct vm *vm);
/* vm->vsock: the vsock device, its guest link port served by vm->link. */
int vm_vsock_attach(struct vm *vm, const struct vhost_vsock_config *cfg);
void vm_vsock_detach(struct vm *vm);

#endif
