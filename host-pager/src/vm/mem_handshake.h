/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * mem_handshake.h - the memory handshake socket <run_dir>/mem.sock (0600).
 *
 * A VMM side (libvmnap-preload.so, or a VMM that speaks it) connects and
 * sends one JSON document with file descriptors attached (SCM_RIGHTS):
 *
 *   {"vm": "name", "uffd": 0,
 *    "regions": [{"base_host_virt_addr": A, "size": S, "offset": O,
 *                 "page_size": 4096, "gpa": G, "memfd": 1}, ...],
 *    "gpa_source": "stated"}
 *
 * "gpa_source" says how the VMM side knows each gpa: "stated" (default: the
 * VMM knows its layout), "linear" (gpa = base + memfd offset, and the
 * layout is known linear), "guessed" (gpa = base + memfd offset,
 * unverified: vmnapd refuses GPA operations until a vhost-user memory
 * table gives the true layout; see enum pager_gpa_source).
 * "uffd" and "memfd" index the fds received.  The plain Firecracker form,
 * a bare array of GuestRegionUffdMapping with one userfaultfd and no memfd,
 * is accepted too (gpa defaults to offset, then "guessed"; the VM is named
 * "fc-<pid>") and marked not evictable.  vmnapd answers one line, {"ok":true,"vm":..,
 * "id":..,"evictable":..,"store_id":..} or {"ok":false,"error":"<reason>"},
 * and keeps the connection: its end is the end of that mapper.  The first
 * mapper of a VM creates the VM (vm_new) if no VM of that name is
 * registered.
 *
 * "store_id" (32 hex digits) in a request: this memory was handed to a
 * vmnapd before, which answered that id; that vmnapd ended while the VMM
 * lived on.  The VM's pager is then created over the store file it left
 * (pager_new_from_store: its offloaded pages are served, the VM shows
 * "recovered"), or the handshake is refused ("store") when the store is
 * missing, locked or another one: never a fresh store, whose holes would
 * read as zeros.
 *
 * A VM deleted while its VMM lived keeps its store locked until its pager
 * (torn down by a reaper thread, pager_free_async) let go.  A request for
 * that name meanwhile waits (retried every 50 ms, the connection's other
 * input ignored) and is answered at the latest after 8 s, below the shim's
 * 10 s: refused ("store", try again) if the store is still held.
 */
#ifndef VMNAP_MEM_HANDSHAKE_H
#define VMNAP_MEM_HANDSHAKE_H

#include <stdint.h>

#include "pager.h"
#include "vmnapd.h"

#define MEM_HANDSHAKE_SOCKET	"mem.sock"
#define MEM_HANDSHAKE_MAX_MSG	(64u << 10)	/* JSON bytes */
#define MEM_HANDSHAKE_MAX_FDS	(PAGER_MAX_REGIONS + 1)
#define MEM_HANDSHAKE_TIMEOUT_MS	5000	/* whole message must arrive */

enum mem_hs_refusal {
	HS_REFUSE_PEER = 0,	/* SO_PEERCRED: another user */
	HS_REFUSE_TRUNCATED,	/* peer closed mid-message */
	HS_REFUSE_TIMEOUT,
	HS_REFUSE_TOO_LARGE,
	HS_REFUSE_JSON,		/* not JSON */
	HS_REFUSE_FIELD,	/* missing or mistyped field */
	HS_REFUSE_FD,		/* wrong fd kind, count or index */
	HS_REFUSE_REGION,	/* alignment, size, overlap, count */
	HS_REFUSE_VM,		/* bad name, or RAM differs from the VM's */
	HS_REFUSE_INTERNAL,	/* out of memory, store, threads */
	HS_REFUSE_STORE,	/* "store_id": the store cannot be adopted; or
				 * still held by a pager being detached */
	HS_REFUSALS
};

struct mem_handshake_stats {
	uint64_t accepted;
	uint64_t refused[HS_REFUSALS];
	uint64_t mappers_gone;
};

/* Listen on @path (NULL: <run_dir>/mem.sock) with pager settings @cfg
 * (NULL: defaults with d->cfg.store_dir).  Stored in d->mem_handshake. */
int mem_handshake_start(struct vmnapd *d, const char *path,
			const struct pager_config *cfg);
void mem_handshake_stop(struct vmnapd *d);
void mem_handshake_get_stats(struct vmnapd *d, struct mem_handshake_stats *st);
const char *mem_hs_refusal_name(enum mem_hs_refusal r);

#endif
