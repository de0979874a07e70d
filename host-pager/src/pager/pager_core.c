// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_core.c - the page-state core the fault, prefetch, critical-set and
 * offload paths share: claiming runs of offloaded pages, installing them
 * back, userfaultfd registration of the mappers' ranges, and error
 * reporting to the loop.  It calls nothing of the pager's above it (only
 * the store), so the paths that use it form no cycle.  See
 * pager_internal.h for the lock rules.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "pager_internal.h"

/* The ioctls a registered range must offer for the fault path. */
#define UFFD_NEEDED_IOCTLS	((1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_ZEROPAGE) | \
				 (1ull << _UFFDIO_WAKE))

void pager_report_error(struct pager *p, int err, const char *what)
{
	uint64_t one = 1;

	pthread_mutex_lock(&p->lock);
	if (!strcmp(what, "fault"))
		p->fault_errors++;
	else if (!strcmp(what, "restore"))
		p->restore_errors++;
	if (!p->pending_err) {
		p->pending_err = err;
		p->pending_what = what;
	}
	pthread_mutex_unlock(&p->lock);
	if (write(p->error_fd, &one, sizeof(one)) < 0)
		log_err(p->subject, "cannot signal a pager error: %s", strerror(errno));
}

int pager_mapper_register(struct pager *p, struct pager_mapper *m)
{
	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct uffdio_register reg = {
			.range = { .start = m->host_addr[i], .len = p->regions[i].size },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		if (!m->host_addr[i])
			continue;
		if (ioctl(m->uffd, UFFDIO_REGISTER, &reg) < 0) {
			int err = -errno;

			log_err(p->subject, "mapper pid %d: UFFDIO_REGISTER %#llx+%#llx: %s",
				(int)m->pid, (unsigned long long)reg.range.start,
				(unsigned long long)reg.range.len, strerror(-err));
			return err;
		}
		if ((reg.ioctls & UFFD_NEEDED_IOCTLS) != UFFD_NEEDED_IOCTLS) {
			log_err(p->subject, "mapper pid %d: range lacks COPY/ZEROPAGE/WAKE",
				(int)m->pid);
			return -EOPNOTSUPP;
		}
	}
	m->registered = true;
	return 0;
}

/*
 * Unregister, then wake the whole range.  UFFDIO_UNREGISTER wakes the
 * faults pending in the range, but a fault taken under the per-VMA lock
 * can queue itself after that wake and before the VMA is write-locked
 * (seen on 6.18: a thread faulting on a hole hung for good once every page
 * was back).  Once UNREGISTER returned, every such fault is queued, so
 * this UFFDIO_WAKE reaches it; the retried fault needs no userfaultfd.
 */
static void mapper_unregister(struct pager *p, struct pager_mapper *m)
{
	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct uffdio_range r = { .start = m->host_addr[i], .len = p->regions[i].size };

		if (!m->host_addr[i])
			continue;
		(void)ioctl(m->uffd, UFFDIO_UNREGISTER, &r);
		(void)ioctl(m->uffd, UFFDIO_WAKE, &r);
	}
	m->registered = false;
}

int pager_register_all_locked(struct pager *p)
{
	for (struct pager_mapper *m = p->mappers; m; m = m->next) {
		int err;

		if (m->dead || m->registered)
			continue;
		err = pager_mapper_register(p, m);
		if (err == -ESRCH) {	/* the process exited: not an error */
			m->dead = true;
			continue;
		}
		if (err)
			return err;
	}
	p->registered = true;
	return 0;
}

/* Never unregister while a page is out: the next touch would read zeros. */
void pager_maybe_unregister_locked(struct pager *p)
{
	if (!p->registered || p->offloading || p->count[PAGE_OFFLOADED] ||
	    p->count[PAGE_IN_FLIGHT])
		return;
	for (struct pager_mapper *m = p->mappers; m; m = m->next)
		if (m->registered && !m->dead)
			mapper_unregister(p, m);
	p->registered = false;
	log_debug(p->subject, "every page resident: ranges unregistered");
}

uint64_t pager_claim_run_locked(struct pager *p, uint64_t pg, uint64_t max,
				uint8_t flags)
{
	struct pager_region *r = pg_region(p, pg);
	uint64_t end, n = 0;

	if (!r)
		return 0;
	end = r->first_page + r->npages;
	while (pg + n < end && n < max && pg_state(p, pg + n) == PAGE_OFFLOADED &&
	       (p->state[pg + n] & flags) == flags) {
		pg_set(p, pg + n, PAGE_IN_FLIGHT);
		n++;
	}
	return n;
}

void pager_finish_run_locked(struct pager *p, uint64_t pg, uint64_t n, bool ok)
{
	if (ok)	/* the memfd holds the pages now: their slots are stale */
		store_slots_forget(&p->store, pg, n);
	for (uint64_t i = 0; i < n; i++) {
		pg_set(p, pg + i, ok ? PAGE_RESIDENT : PAGE_OFFLOADED);
		if (ok)
			p->state[pg + i] |= PG_WS_CUR;
	}
	pthread_cond_broadcast(&p->state_cv);
}

/*
 * Read the claimed run back into the memfd with pwrite: no mapper needs a
 * userfaultfd for that, and a mapper faulting on a page meanwhile finds it
 * IN_FLIGHT and is woken once it is in.
 */
int pager_install_run(struct pager *p, uint64_t pg, uint64_t n, const void *buf,
		      int err)
{
	struct pager_region *r = pg_region(p, pg);
	size_t len = n * PAGER_PAGE_SIZE;

	if (!err) {
		ssize_t w = pwrite(r->memfd, buf, len, (off_t)pg_memfd_off(r, pg));

		err = w < 0 ? -errno : (size_t)w != len ? -EIO : 0;
	}
	if (err)
		log_err(p->subject, "restore of %llu page(s) at memfd offset %#llx: %s "
			"(pages stay offloaded)", (unsigned long long)n,
			(unsigned long long)pg_memfd_off(r, pg), strerror(-err));
	pthread_mutex_lock(&p->lock);
	pager_finish_run_locked(p, pg, n, !err);
	pthread_mutex_unlock(&p->lock);
	if (err)
		pager_report_error(p, err, "restore");
	return err;
}

int pager_restore_run(struct pager *p, uint64_t pg, uint64_t n, void *buf)
{
	int err = store_read(&p->store, buf, n * PAGER_PAGE_SIZE, pg_store_off(pg));

	return pager_install_run(p, pg, n, buf, err);
}
