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
#include <fcntl.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
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

void pager_lose(struct pager *p, int err)
{
	struct victim { int pidfd; pid_t pid; } kill_list[PAGER_MAX_MAPPERS];
	unsigned int n = 0, killed = 0;
	uint64_t one = 1;

	/* the fault thread alone calls this: no second caller meanwhile */
	pthread_mutex_lock(&p->lock);
	if (p->lost_err) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	for (struct pager_mapper *m = p->mappers; m && n < PAGER_MAX_MAPPERS; m = m->next)
		if (!m->dead && !m->removed && m->pid != getpid())
			kill_list[n++] = (struct victim){ m->pidfd, m->pid };
	/* known before the kills: the VMM's exit detaches the pager, maybe
	 * before this thread runs again, and the detach reports a lost VM
	 * only if it knows */
	p->lost_err = err;
	p->mappers_killed = n;
	pthread_mutex_unlock(&p->lock);
	/* the fault thread closes a mapper's pidfd: called there, they stay
	 * open.  A pidfd cannot reach a recycled pid; without one (no
	 * pidfd_open) the handshake connection, open until the process
	 * exits, still pins it */
	for (unsigned int i = 0; i < n; i++) {
		int r = kill_list[i].pidfd >= 0 ?
			(int)syscall(SYS_pidfd_send_signal, kill_list[i].pidfd, SIGKILL, NULL, 0) :
			kill(kill_list[i].pid, SIGKILL);

		if (!r || errno == ESRCH)
			killed += !r;
		else
			log_err(p->subject, "cannot kill mapper pid %d: %s",
				(int)kill_list[i].pid, strerror(errno));
	}
	log_err(p->subject, "VM lost: a fault can never be served (%s); SIGKILL sent "
		"to %u mapper process(es) (a vCPU waiting for the page is never given "
		"zeros or wrong data)", strerror(-err), killed);
	pthread_mutex_lock(&p->lock);
	p->mappers_killed = killed;
	pthread_mutex_unlock(&p->lock);
	if (write(p->error_fd, &one, sizeof(one)) < 0)
		log_err(p->subject, "cannot signal a pager error: %s", strerror(errno));
}

/* The live ranges of @m, read under the lock for ioctls made without it. */
struct mapper_ranges {
	unsigned int n;
	struct uffdio_range r[PAGER_MAX_REGIONS];
};

static void mapper_ranges_locked(struct pager *p, struct pager_mapper *m,
				 struct mapper_ranges *mr)
{
	mr->n = 0;
	for (unsigned int i = 0; i < p->nr_regions; i++)
		if (m->host_addr[i] && m->map_hi[i] > m->map_lo[i])
			mr->r[mr->n++] = (struct uffdio_range){
				.start = m->host_addr[i] + m->map_lo[i],
				.len = m->map_hi[i] - m->map_lo[i],
			};
}

/* One file mapping of a mapper, from /proc/PID/maps. */
struct maps_vma {
	uint64_t start, end, off;
	dev_t dev;
	ino_t ino;
};

#define MAPS_MAX_VMAS	4096	/* file mappings of one mapper */

/* The mapper's file mappings into *@out (malloc'd); -ESRCH: gone. */
static int maps_read(pid_t pid, struct maps_vma **out, unsigned int *n)
{
	struct maps_vma *v = malloc(MAPS_MAX_VMAS * sizeof(*v));
	char path[64], *line = NULL;
	size_t cap = 0;
	int err = 0;
	FILE *f;

	if (!v)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f) {
		err = errno == ENOENT ? -ESRCH : -errno;
		free(v);
		return err;
	}
	*n = 0;
	while (getline(&line, &cap, f) > 0) {
		uint64_t st, en, off;
		unsigned int maj, min;
		unsigned long long ino;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %x:%x %llu",
			   &st, &en, &off, &maj, &min, &ino) != 6 || !ino)
			continue;
		if (*n == MAPS_MAX_VMAS) {
			err = -E2BIG;
			break;
		}
		v[(*n)++] = (struct maps_vma){ .start = st, .end = en, .off = off,
					       .dev = makedev(maj, min), .ino = (ino_t)ino };
	}
	free(line);
	fclose(f);
	if (err)
		free(v);
	else
		*out = v;
	return err;
}

static bool vma_of(const struct maps_vma *v, const struct stat *st)
{
	return v->dev == st->st_dev && v->ino == st->st_ino;
}

/* Do the mappings map [a, b) to the file @st at offset @fo, contiguously? */
static bool maps_cover(const struct maps_vma *v, unsigned int n, const struct stat *st,
		       uint64_t a, uint64_t b, uint64_t fo)
{
	while (a < b) {
		unsigned int i;

		for (i = 0; i < n; i++)
			if (vma_of(&v[i], st) && a >= v[i].start && a < v[i].end &&
			    v[i].off + (a - v[i].start) == fo)
				break;
		if (i == n)
			return false;
		fo += (v[i].end < b ? v[i].end : b) - a;
		a = v[i].end < b ? v[i].end : b;
	}
	return true;
}

/*
 * Check @m's ranges against what it maps now, before registering them.
 * The kernel tells about munmap and mremap only while a range is
 * registered (UNMAP, REMAP events); what the VMM did while everything was
 * resident is seen here: a region moved whole is followed to its new
 * address, one no longer mapped at all is dropped for this mapper, and
 * one mapped only in part (or ambiguously) refuses the registration
 * (-ESTALE), since a page out there could then read zero.  Registering
 * the stale address instead would fail, or hit whatever the VMM mapped
 * there since.  p->reg_lock held (the ranges cannot change), p->lock not.
 */
static int mapper_check_maps(struct pager *p, struct pager_mapper *m)
{
	uint64_t host[PAGER_MAX_REGIONS], lo[PAGER_MAX_REGIONS], hi[PAGER_MAX_REGIONS];
	struct maps_vma *v = NULL;
	unsigned int n = 0;
	int err;

	if (m->pid <= 0)
		return 0;
	err = maps_read(m->pid, &v, &n);
	if (err == -ESRCH || err == -ENOMEM)
		return err;
	if (err) {
		log_debug(p->subject, "mapper pid %d: /proc maps unreadable (%s): its "
			  "ranges are registered unchecked", (int)m->pid, strerror(-err));
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	memcpy(host, m->host_addr, sizeof(host));
	memcpy(lo, m->map_lo, sizeof(lo));
	memcpy(hi, m->map_hi, sizeof(hi));
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions && !err; i++) {
		const struct pager_region *r = &p->regions[i];
		uint64_t fo = r->memfd_off + lo[i], len = hi[i] - lo[i], to = 0;
		unsigned int found = 0;
		bool any = false;
		struct stat st;

		if (!host[i] || hi[i] <= lo[i] || r->memfd < 0 || fstat(r->memfd, &st) < 0 ||
		    maps_cover(v, n, &st, host[i] + lo[i], host[i] + hi[i], fo))
			continue;
		for (unsigned int k = 0; k < n; k++) {
			uint64_t a;

			if (!vma_of(&v[k], &st) || v[k].off >= fo + len ||
			    v[k].off + (v[k].end - v[k].start) <= fo)
				continue;
			any = true;
			if (fo < v[k].off)
				continue;
			a = v[k].start + (fo - v[k].off);
			if (maps_cover(v, n, &st, a, a + len, fo) && a != to) {
				to = a;
				found++;
			}
		}
		if (found == 1) {
			log_warn(p->subject, "mapper pid %d: region %u (gpa %#llx) moved while "
				 "not registered: %#llx -> %#llx", (int)m->pid, i,
				 (unsigned long long)r->gpa, (unsigned long long)(host[i] + lo[i]),
				 (unsigned long long)to);
			host[i] = to - lo[i];
		} else if (!any) {
			log_warn(p->subject, "mapper pid %d: region %u (gpa %#llx) unmapped "
				 "while not registered: no longer served in this mapper",
				 (int)m->pid, i, (unsigned long long)r->gpa);
			host[i] = lo[i] = hi[i] = 0;
		} else {
			log_err(p->subject, "mapper pid %d: region %u (gpa %#llx) is mapped only "
				"in part or more than once now: not registered", (int)m->pid, i,
				(unsigned long long)r->gpa);
			err = -ESTALE;
		}
	}
	free(v);
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	memcpy(m->host_addr, host, sizeof(host));
	memcpy(m->map_lo, lo, sizeof(lo));
	memcpy(m->map_hi, hi, sizeof(hi));
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* Register @m's ranges with @mode; -errno of the first failure. */
static int mapper_register_mode(struct pager *p, struct pager_mapper *m,
				const struct mapper_ranges *mr, uint64_t mode)
{
	for (unsigned int i = 0; i < mr->n; i++) {
		struct uffdio_register reg = { .range = mr->r[i], .mode = mode };

		if (ioctl(m->uffd, UFFDIO_REGISTER, &reg) < 0) {
			int err = -errno;

			if (err != -EINVAL || !(mode & UFFDIO_REGISTER_MODE_WP))
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
	return 0;
}

int pager_mapper_register(struct pager *p, struct pager_mapper *m)
{
	struct mapper_ranges mr;
	int err = mapper_check_maps(p, m);
	uint64_t mode;

	if (err)
		return err;
	mode = pager_dirty_reg_mode(p, m);
	pthread_mutex_lock(&p->lock);
	mapper_ranges_locked(p, m, &mr);
	if (p->reg_wp_only)
		mode &= ~(uint64_t)UFFDIO_REGISTER_MODE_MISSING;
	pthread_mutex_unlock(&p->lock);
	if (!mode)
		return -EOPNOTSUPP;	/* write-protect alone, untracked */
	err = mapper_register_mode(p, m, &mr, mode);
	if (err == -EINVAL && mode == UFFDIO_REGISTER_MODE_WP) {
		/* early, and no write-protect for shmem: nothing registered */
		(void)pager_dirty_registered(p, m, mode, err);
		return err;
	}
	if (err == -EINVAL && (mode & UFFDIO_REGISTER_MODE_WP)) {
		/* no write-protect for shmem on this userfaultfd: MISSING
		 * alone (ranges already registered WP too are harmless:
		 * nothing protects their pages) */
		(void)pager_dirty_registered(p, m, mode, err);
		mode = UFFDIO_REGISTER_MODE_MISSING;
		err = mapper_register_mode(p, m, &mr, mode);
	}
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	m->reg_missing = mode & UFFDIO_REGISTER_MODE_MISSING;
	pthread_mutex_unlock(&p->lock);
	return pager_dirty_registered(p, m, mode, 0);
}

/*
 * Unregister, then wake the whole range.  UFFDIO_UNREGISTER wakes the
 * faults pending in the range, but a fault taken under the per-VMA lock
 * can queue itself after that wake and before the VMA is write-locked
 * (seen on 6.18: a thread faulting on a hole hung for good once every page
 * was back).  Once UNREGISTER returned, every such fault is queued, so
 * this UFFDIO_WAKE reaches it; the retried fault needs no userfaultfd.
 * p->reg_lock held, p->lock not.
 */
static void mapper_unregister(struct pager *p, struct pager_mapper *m)
{
	struct mapper_ranges mr;

	pthread_mutex_lock(&p->lock);
	mapper_ranges_locked(p, m, &mr);
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < mr.n; i++) {
		(void)ioctl(m->uffd, UFFDIO_UNREGISTER, &mr.r[i]);
		(void)ioctl(m->uffd, UFFDIO_WAKE, &mr.r[i]);
	}
	pthread_mutex_lock(&p->lock);
	m->registered = false;
	pthread_mutex_unlock(&p->lock);
}

/* Unregister every live registered mapper.  p->reg_lock held, p->lock
 * not. */
static void unregister_all(struct pager *p)
{
	for (struct pager_mapper *m = p->mappers; m; m = m->next) {
		bool live;

		pthread_mutex_lock(&p->lock);
		live = m->registered && !m->dead;
		pthread_mutex_unlock(&p->lock);
		if (live)
			mapper_unregister(p, m);
	}
}

int pager_register_all(struct pager *p)
{
	for (struct pager_mapper *m = p->mappers; m; m = m->next) {
		bool skip;
		int err;

		/* registered as wanted now (write-protect alone registered
		 * MISSING again, when no longer p->reg_wp_only) */
		pthread_mutex_lock(&p->lock);
		skip = m->dead || (m->registered && (m->reg_missing || p->reg_wp_only));
		pthread_mutex_unlock(&p->lock);
		if (skip)
			continue;
		err = pager_mapper_register(p, m);
		pthread_mutex_lock(&p->lock);
		if (err == -ESRCH)	/* the process exited: not an error */
			m->dead = true;
		else if (!err)
			m->registered = true;
		pthread_mutex_unlock(&p->lock);
		if (err && err != -ESRCH)
			return err;
	}
	return 0;
}

bool pager_register_wp_early(struct pager *p)
{
	bool tracked;
	int err = 0;

	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	if (p->registered || p->track != PAGER_DIRTY_UNKNOWN || !p->nr_mappers) {
		tracked = p->track == PAGER_DIRTY_WP_ASYNC;
		pthread_mutex_unlock(&p->lock);
		pthread_mutex_unlock(&p->reg_lock);
		return tracked;
	}
	p->reg_wp_only = true;
	pthread_mutex_unlock(&p->lock);
	err = pager_register_all(p);
	pthread_mutex_lock(&p->lock);
	tracked = !err && p->track == PAGER_DIRTY_WP_ASYNC;
	p->registered = true;
	p->tail_fresh = true;
	pthread_mutex_unlock(&p->lock);
	if (!tracked) {
		/* no scans then: as before any offload, nothing registered */
		unregister_all(p);
		pthread_mutex_lock(&p->lock);
		p->registered = false;
		p->reg_wp_only = false;
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&p->reg_lock);
	if (err && err != -EOPNOTSUPP)	/* (tracking off: said where decided) */
		log_warn(p->subject, "write-protect before the first offload: %s; the "
			 "command's writes are scanned from the first offload on",
			 strerror(-err));
	return tracked;
}

/* Never unregister while a page is out: the next touch would read zeros.
 * Nor while dirty tracking is on (unregistering drops every protection),
 * unless the pager detaches. */
bool pager_unregister_due_locked(struct pager *p)
{
	return p->registered && !p->offloading && !p->count[PAGE_OFFLOADED] &&
	       !p->count[PAGE_IN_FLIGHT] && (!pager_tracking_locked(p) || p->detaching);
}

/*
 * Nothing can go out while this runs: only an offload makes pages
 * OFFLOADED, and pager_offload_start registers (and sets p->offloading)
 * under p->reg_lock, which is held here.
 */
void pager_maybe_unregister(struct pager *p)
{
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	if (!pager_unregister_due_locked(p)) {
		pthread_mutex_unlock(&p->lock);
		pthread_mutex_unlock(&p->reg_lock);
		return;
	}
	p->registered = false;
	pthread_mutex_unlock(&p->lock);
	unregister_all(p);
	pthread_mutex_unlock(&p->reg_lock);
	log_debug(p->subject, "every page resident: ranges unregistered");
}

int pager_slots_clear_durably(struct pager *p, uint64_t pg, uint64_t n)
{
	struct store_slot *saved;
	bool any = false;
	int err;

	for (uint64_t i = pg; i < pg + n && !any; i++)
		any = store_slot_stored(&p->store, i);
	if (!any)
		return 0;
	saved = malloc(n * sizeof(*saved));
	if (!saved)
		return -ENOMEM;
	memcpy(saved, &p->store.slots[pg], n * sizeof(*saved));
	for (uint64_t i = pg; i < pg + n; i++)
		store_slot_clear(&p->store, i);
	err = store_slots_commit(&p->store, pg, n);
	if (err) {
		memcpy(&p->store.slots[pg], saved, n * sizeof(*saved));
		log_err(p->subject, "store: slot map update failed: %s: pages kept",
			strerror(-err));
	}
	free(saved);
	return err;
}

int pager_discard_run(struct pager *p, uint64_t pg, uint64_t n,
		      uint64_t *counter)
{
	struct pager_region *r = pg_region(p, pg);
	int err = 0;

	if (!r || r->memfd < 0)
		return -EOPNOTSUPP;
	for (uint64_t i = pg; i < pg + n;) {
		uint64_t run = 0;
		bool stored;

		pthread_mutex_lock(&p->lock);
		/* A page in flight is being moved (offload write, restore,
		 * fault): its owner would install or store its old content
		 * after the punch, so wait for it. */
		while (pg_state(p, i) == PAGE_IN_FLIGHT)
			pthread_cond_wait(&p->state_cv, &p->lock);
		stored = pg_state(p, i) == PAGE_OFFLOADED;
		while (i + run < pg + n && pg_state(p, i + run) != PAGE_IN_FLIGHT &&
		       (pg_state(p, i + run) == PAGE_OFFLOADED) == stored) {
			pg_set(p, i + run, PAGE_IN_FLIGHT);
			run++;
		}
		pthread_mutex_unlock(&p->lock);
		if (pager_slots_clear_durably(p, i, run)) {
			/* the hole could later read as the stale slot: keep it */
			pthread_mutex_lock(&p->lock);
			for (uint64_t k = i; k < i + run; k++)
				pg_set(p, k, stored ? PAGE_OFFLOADED : PAGE_RESIDENT);
			pthread_cond_broadcast(&p->state_cv);
			pthread_mutex_unlock(&p->lock);
			if (!err)
				err = -EIO;
			i += run;
			continue;
		}
		if (fallocate(r->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)pg_memfd_off(r, i), (off_t)(run * PAGER_PAGE_SIZE)) < 0 &&
		    !err)
			err = -errno;
		if (stored)
			store_discard(&p->store, pg_store_off(i), run * PAGER_PAGE_SIZE);
		pthread_mutex_lock(&p->lock);
		for (uint64_t k = i; k < i + run; k++) {
			pg_set(p, k, PAGE_ZERO);
			p->state[k] &= (uint8_t)~(PG_WS_CUR | PG_WS_PREV | PG_BG);
			p->fa[k] = 0;
		}
		*counter += run;
		pthread_cond_broadcast(&p->state_cv);
		pthread_mutex_unlock(&p->lock);
		i += run;
	}
	return err;
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
	bool clean = ok && pager_tracking_locked(p);

	/* Back in the memfd: with dirty tracking the slots stay valid until
	 * the pages are written (CLEAN: their entries marked RESIDENT);
	 * without, they are stale at once.  Under the lock: an offload may
	 * claim the pages once it is dropped, and its entries go after. */
	if (ok)
		store_slots_forget(&p->store, pg, n, clean);
	for (uint64_t i = 0; i < n; i++) {
		if (!ok) {
			p->state[pg + i] &= (uint8_t)~PG_WRITTEN;
			pg_set(p, pg + i, PAGE_OFFLOADED);
		} else {
			pg_set(p, pg + i, clean ? pager_clean_state_locked(p, pg + i) :
			       PAGE_RESIDENT);
			p->state[pg + i] &= (uint8_t)~PG_WRITTEN;
		}
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
	/* in the memfd, mapped by no mapper: touched once one maps it */
	for (uint64_t i = 0; i < n && !err; i++)
		p->state[pg + i] |= PG_BG;
	pthread_mutex_unlock(&p->lock);
	if (err)
		pager_report_error(p, err, "restore");
	return err;
}

uint64_t pager_uffd_map(int uffd, uint64_t dst, const void *src, uint64_t len, bool wp)
{
	uint64_t done = 0;

	for (int tries = 0; done < len && tries < UFFD_MAP_TRIES;) {
		struct uffdio_copy c = {
			.dst = dst + done, .src = (uint64_t)(uintptr_t)src + done,
			.len = len - done, .mode = wp ? UFFDIO_COPY_MODE_WP : 0,
		};

		if (ioctl(uffd, UFFDIO_COPY, &c) == 0)
			return len;
		if (c.copy > 0)
			done += (uint64_t)c.copy;
		if (errno != EAGAIN)
			break;	/* EEXIST, the mapper gone */
		tries++;
	}
	return done & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
}

uint64_t pager_uffd_map_plan(int uffd, uint64_t dst, const void *src, uint64_t n,
			     const struct pager_wplan *w)
{
	uint64_t done = 0;

	for (uint64_t i = 0, j; i < n; i = j) {
		uint64_t len, got;

		j = pager_wplan_stretch(w, i, n);
		len = (j - i) * PAGER_PAGE_SIZE;
		got = pager_uffd_map(uffd, dst + done, (const char *)src + done, len,
				     pager_wplan_wp(w, i));
		done += got;
		if (got < len)
			break;
	}
	return done;
}

int pager_restore_run(struct pager *p, uint64_t pg, uint64_t n, void *buf)
{
	int err = store_read(&p->store, buf, n * PAGER_PAGE_SIZE, pg_store_off(pg));

	return pager_install_run(p, pg, n, buf, err);
}

/*
 * The pages behind the start of [gpa, gpa+len) that one GPA range holds
 * (never crossing a pager region); -ERANGE if @gpa is in none.  Lock held.
 */
int pager_gpa_chunk_locked(struct pager *p, uint64_t gpa, uint64_t len,
			   uint64_t *pg, uint64_t *n)
{
	for (unsigned int i = 0; i < p->nr_gpa; i++) {
		const struct pager_gpa_range *g = &p->gpa_map[i];

		if (gpa >= g->gpa && gpa - g->gpa < g->size) {
			uint64_t avail = g->size - (gpa - g->gpa);

			*pg = g->first_page + (gpa - g->gpa) / PAGER_PAGE_SIZE;
			*n = (len < avail ? len : avail) / PAGER_PAGE_SIZE;
			return 0;
		}
	}
	return -ERANGE;
}

int pager_ioprio_set(int ioprio)
{
	return (int)syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, (int)gettid(), ioprio);
}

void pager_ioprio_init(struct pager_ioprio *io)
{
	int base = (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, (int)gettid());

	io->base = io->now = base < 0 ? IOPRIO_PRIO_VALUE(IOPRIO_CLASS_NONE, 0) : base;
}

bool pager_ioprio_for(struct pager *p, struct pager_ioprio *io, bool urgent)
{
	bool rt = pager_ioprio_rt(p, urgent);
	int want = rt ? PAGER_IO_RT_PRIO : io->base;

	if (want != io->now && pager_ioprio_set(want)) {
		if (rt) {
			log_warn(p->subject, "realtime I/O refused (%s): a delivery's store "
				 "reads queue behind other I/O", strerror(errno));
			atomic_store(&p->dlv_io_reason, "realtime refused by the kernel");
			atomic_store(&p->dlv_io_class, PAGER_IO_INHERIT);
		} else {
			log_warn(p->subject, "I/O priority back to 0x%x refused (%s): this "
				 "thread's store reads stay realtime", (unsigned int)want,
				 strerror(errno));
			io->base = io->now;
		}
	} else {
		io->now = want;
	}
	if (io->now != PAGER_IO_RT_PRIO)
		return false;
	atomic_fetch_add(&p->dlv_io_reads, 1);
	return true;
}

const char *pager_name_of(const char *const *names, unsigned int n, unsigned int i)
{
	return i < n ? names[i] : "?";
}

int pager_name_index(const char *const *names, unsigned int n, const char *s)
{
	for (unsigned int i = 0; s && i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -EINVAL;
}

int pager_restore_gpa(struct pager *p, uint64_t gpa, uint64_t len, void *buf)
{
	int err = 0;

	while (len && !err) {
		uint64_t pg, n, end, run;

		pthread_mutex_lock(&p->lock);
		err = pager_gpa_chunk_locked(p, gpa, len, &pg, &n);
		pthread_mutex_unlock(&p->lock);
		if (err || !n)
			break;
		gpa += n * PAGER_PAGE_SIZE;
		len -= n * PAGER_PAGE_SIZE;
		for (end = pg + n; !err && pg < end;) {
			pthread_mutex_lock(&p->lock);
			while (pg_state(p, pg) == PAGE_IN_FLIGHT)
				pthread_cond_wait(&p->state_cv, &p->lock);
			run = pager_claim_run_locked(p, pg, end - pg < RESTORE_RUN_MAX_PAGES ?
						     end - pg : RESTORE_RUN_MAX_PAGES, 0);
			pthread_mutex_unlock(&p->lock);
			if (!run) {
				pg++;
				continue;
			}
			err = pager_restore_run(p, pg, run, buf);
			pg += run;
		}
	}
	return err;
}

int pager_thread_start(struct pager *p, pthread_t *t, bool *started,
		       void *(*fn)(void *), const char *name)
{
	int err = pthread_create(t, NULL, fn, p);

	if (err)
		return -err;
	pthread_setname_np(*t, name);	/* only a label: a failure is harmless */
	*started = true;
	return 0;
}

void pager_thread_stop(struct pager *p, pthread_t t, bool *started, bool *exit,
		       pthread_cond_t *cv)
{
	if (!*started)
		return;
	pthread_mutex_lock(&p->lock);
	*exit = true;
	pthread_cond_broadcast(cv);
	pthread_mutex_unlock(&p->lock);
	pthread_join(t, NULL);
	*started = false;
}
