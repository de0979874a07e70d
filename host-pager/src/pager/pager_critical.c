// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_critical.c - the resume-critical set.  After an offload, the pages
 * the guest needs to answer again (kernel stacks, vsock rings and socket
 * buffers, the module's work items) come back one userfaultfd round trip
 * each, and the working-set prefetch only starts after the resume.  So the
 * pager records the pages faulted in between a resume and its delivery
 * (RESUME_ACK) and, before the next resume from an offload continues the
 * VMM - whatever the restore policy and the resume's reason: the guest's
 * wake path up to RESUME_ACK is the same for all - reads exactly those
 * back: runs of consecutive pages, a wave of store reads in flight at once
 * through io_uring, each mapped straight into the VMM with UFFDIO_COPY
 * (else written into the memfd by pager_install_run, as every other
 * restore does); bounded in pages and time (checked between waves).
 *
 * Cheaper still is not to evict the set at all: with critical_resident an
 * offload skips its pages (pager_offload.c), so they stay in the memfd and
 * mapped in the VMM through the wait - at most PAGER_CRITICAL_MAX_PAGES
 * held against a read wave plus the VMM's page faults on every resume.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define CRITICAL_RUN_MAX_PAGES	PAGER_MAX_FAULT_AROUND	/* one store read */
#define CRITICAL_QUEUE_DEPTH	64	/* store reads in flight per wave; the
					 * time budget is checked between waves */

/*
 * The set is noted when pages are claimed for a fault (or a fault asks for
 * readahead), with the lock held, before the faulting thread is woken or
 * the pages reach the memfd: once a mapper's access has returned, every
 * page brought in for it is in the set, so a delivery right after it
 * cannot come between the access and the recording.  Noted that early, a
 * page can come up twice in one window (asked for readahead, then faulted
 * before the prefetcher got to it): PG_CRIT keeps it to one entry.
 *
 * Full, a fault replaces the oldest entry of an earlier window; once the
 * whole set is this window's, later faults are not noted: the first ones
 * are what the guest's wake waited on first (the way to RESUME_ACK), the
 * later ones what it did after.
 *
 * A set kept resident (critical_resident) never faults again, so only
 * pages new to it are noted in later windows; it becomes the union of
 * the wake paths (timer and data resumes) as far as its size allows.
 */
/* Note page @i in the set as this window's: false once the window has
 * filled the set. */
static bool note_one_locked(struct pager *p, uint64_t i)
{
	unsigned int at = (p->crit_head + p->crit_nr) % PAGER_CRITICAL_MAX_PAGES;

	if (p->state[i] & PG_CRIT)
		return true;
	if (p->crit_window_nr >= PAGER_CRITICAL_MAX_PAGES)
		return false;
	p->crit_window_nr++;
	if (p->crit_nr < PAGER_CRITICAL_MAX_PAGES) {
		p->crit_nr++;
	} else {	/* full: replace the oldest entry (an earlier window's) */
		p->state[p->crit_pg[at]] &= (uint8_t)~PG_CRIT;
		p->crit_head = (p->crit_head + 1) % PAGER_CRITICAL_MAX_PAGES;
	}
	p->crit_pg[at] = i;
	p->state[i] |= PG_CRIT;
	return true;
}

void pager_critical_note_locked(struct pager *p, uint64_t pg, uint64_t n)
{
	for (uint64_t i = pg; p->crit_recording && i < pg + n; i++)
		if (!note_one_locked(p, i))
			return;
}

bool pager_critical_learn_locked(struct pager *p, uint64_t pg)
{
	bool in = p->state[pg] & PG_CRIT;

	return note_one_locked(p, pg) && !in;
}

void pager_critical_note_readahead_locked(struct pager *p, uint64_t pg, uint64_t n)
{
	const struct pager_region *r;
	uint64_t end = pg + n, run = 0;

	if (!p->crit_recording)
		return;
	/* what the prefetcher claims of it: the first offloaded run */
	while (pg < end && pg < p->npages && pg_state(p, pg) != PAGE_OFFLOADED)
		pg++;
	r = pg < end && pg < p->npages ? pg_region(p, pg) : NULL;
	if (!r)
		return;
	if (end > r->first_page + r->npages)
		end = r->first_page + r->npages;
	while (pg + run < end && pg_state(p, pg + run) == PAGE_OFFLOADED)
		run++;
	pager_critical_note_locked(p, pg, run);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Entry @i of the pages kept with the set: the set's, oldest first, then
 * the devices' (pager_set_device_pages).  Lock held. */
static uint64_t kept_pg(const struct pager *p, unsigned int i)
{
	return i < p->crit_nr ? p->crit_pg[(p->crit_head + i) % PAGER_CRITICAL_MAX_PAGES] :
				p->dev_pg[i - p->crit_nr];
}

/* Sorted, without duplicates: the set's pages and the devices' (they
 * are kept and read back alike) in guest-RAM order. */
unsigned int pager_pages_sort_unique(uint64_t *pgs, unsigned int n)
{
	unsigned int out = 0;

	qsort(pgs, n, sizeof(*pgs), cmp_u64);
	for (unsigned int i = 0; i < n; i++)
		if (!out || pgs[out - 1] != pgs[i])
			pgs[out++] = pgs[i];
	return out;
}

unsigned int pager_critical_snapshot_locked(struct pager *p, uint64_t *pgs)
{
	unsigned int all = p->crit_nr + p->dev_nr;

	for (unsigned int i = 0; i < all; i++)
		pgs[i] = kept_pg(p, i);
	return pager_pages_sort_unique(pgs, all);
}

/* A new window: a page refaulted in it gets a new (newest) entry.  Lock
 * held. */
static void window_open_locked(struct pager *p)
{
	for (unsigned int k = 0; k < p->crit_nr; k++)
		p->state[p->crit_pg[(p->crit_head + k) % PAGER_CRITICAL_MAX_PAGES]] &=
			(uint8_t)~PG_CRIT;
	p->crit_window_nr = 0;
	p->crit_recording = true;
}

/* One wave of store reads in flight at once. */
struct crit_run {
	uint64_t pg, n;
	char *buf;
};

/* Claim the runs of the sorted set from *@i on, up to CRITICAL_QUEUE_DEPTH
 * runs; their buffers are consecutive in @buf (room for the whole set). */
static unsigned int claim_wave(struct pager *p, const uint64_t *pgs, unsigned int nr,
			       unsigned int *i, char *buf, struct crit_run *runs)
{
	unsigned int nruns = 0;
	uint64_t used = 0;

	pthread_mutex_lock(&p->lock);
	while (*i < nr && nruns < CRITICAL_QUEUE_DEPTH) {
		uint64_t want = 1, n;

		/* the run of consecutive set pages from pgs[*i] */
		while (*i + want < nr && want < CRITICAL_RUN_MAX_PAGES &&
		       pgs[*i + want] == pgs[*i] + want)
			want++;
		n = pager_claim_run_locked(p, pgs[*i], want, 0);
		if (!n) {	/* not offloaded (or being restored): skip it */
			(*i)++;
			continue;
		}
		runs[nruns++] = (struct crit_run){ pgs[*i], n, buf + used * PAGER_PAGE_SIZE };
		used += n;
		*i += (unsigned int)n;
	}
	pthread_mutex_unlock(&p->lock);
	return nruns;
}

/*
 * Map the claimed run [pg, pg+n), read into @buf, straight into the VMM's
 * address space with UFFDIO_COPY: the first mapper that maps the whole run
 * (registered; write-protected, as a fault maps a page, while writes are
 * tracked - a tracked VM whose mapper is not registered for write-protect
 * gets none).  Put into the memfd only, each page would cost the guest's
 * first access a host page fault on its way to RESUME_ACK.  Bytes mapped
 * (a prefix of the run; the rest goes through the memfd).  Neither lock
 * held.
 */
static uint64_t map_run(struct pager *p, uint64_t pg, uint64_t n, const char *buf)
{
	uint64_t done = 0, host = 0;
	struct pager_mapper *m;
	bool wp;

	pthread_mutex_lock(&p->reg_lock);	/* the mapper is not freed meanwhile */
	pthread_mutex_lock(&p->lock);
	for (m = p->mappers; m; m = m->next)
		if ((host = pg_mapper_addr_locked(p, m, pg, n)))
			break;
	wp = pager_tracking_locked(p);
	pthread_mutex_unlock(&p->lock);
	if (host)
		done = pager_uffd_map(m->uffd, host, buf, n * PAGER_PAGE_SIZE, wp);
	pthread_mutex_unlock(&p->reg_lock);
	return done;
}

/* Restore the claimed run read into @buf (@err: the read's): mapped into
 * the VMM where it can be (@map), the rest written into the memfd. */
static int install(struct pager *p, uint64_t pg, uint64_t n, const char *buf, int err,
		   bool map)
{
	uint64_t mapped = err || !map ? 0 : map_run(p, pg, n, buf) / PAGER_PAGE_SIZE;

	if (mapped) {
		/* mapped: not PG_BG - a read takes no fault, so only a
		 * fault or a seen write counts it touched */
		pthread_mutex_lock(&p->lock);
		pager_finish_run_locked(p, pg, mapped, true);
		p->crit_mapped_pages += mapped;
		pthread_mutex_unlock(&p->lock);
	}
	if (mapped == n)
		return 0;
	return pager_install_run(p, pg + mapped, n - mapped, buf + mapped * PAGER_PAGE_SIZE,
				 err);
}

/*
 * Read a wave of claimed runs from the store at once, then install each
 * (install() finishes every claim).  -errno of
 * the first failed run; every run is finished either way: a run whose
 * read did not complete through the ring is read with pread.
 *
 * A completion names its run by index, never by a pointer into this
 * frame.  If the ring did not take every read, or a completion could not
 * be waited for, *@ring_broken is set: the ring may still hold reads of
 * this wave, so the caller drops it instead of reusing it, and when
 * @buf_busy is set too some of them may still write into the wave's
 * buffers, which must then not be freed.
 */
static int restore_wave(struct pager *p, struct io_uring *ring, struct crit_run *runs,
			unsigned int nruns, bool map, uint64_t *restored, bool *ring_broken,
			bool *buf_busy)
{
	int res[CRITICAL_QUEUE_DEPTH], err = 0;
	unsigned int queued = 0, submitted = 0, done = 0;

	for (unsigned int k = 0; k < nruns; k++)
		res[k] = -EIO;
	for (; queued < nruns; queued++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

		if (!sqe)
			break;
		io_uring_prep_read(sqe, p->store.fd, runs[queued].buf,
				   (unsigned int)(runs[queued].n * PAGER_PAGE_SIZE),
				   pg_store_off(runs[queued].pg));
		io_uring_sqe_set_data64(sqe, queued);
	}
	while (submitted < queued) {
		int r = io_uring_submit(ring);

		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		submitted += (unsigned int)r;
	}
	while (done < submitted) {
		struct io_uring_cqe *cqe;
		int r = io_uring_wait_cqe(ring, &cqe);
		uint64_t k;

		if (r == -EINTR)
			continue;
		if (r < 0)
			break;
		k = io_uring_cqe_get_data64(cqe);
		if (k < nruns)
			res[k] = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		done++;
	}
	if (queued < nruns || submitted < queued || done < submitted) {
		*ring_broken = true;
		*buf_busy = done < submitted;
		log_warn(p->subject, "resume-critical set: store ring took %u of %u read(s), "
			 "%u completed; the rest read with pread", submitted, nruns, done);
	}
	for (unsigned int k = 0; k < nruns; k++) {
		size_t len = runs[k].n * PAGER_PAGE_SIZE;
		int rerr = res[k] < 0 ? res[k] : (size_t)res[k] != len ? -EIO : 0;
		char *buf = runs[k].buf, *own = NULL;

		if (*buf_busy) {	/* its read may still land there: read elsewhere */
			buf = own = store_buf_alloc(len);
			rerr = own ? store_read(&p->store, buf, len, pg_store_off(runs[k].pg)) :
				     -ENOMEM;
		} else if (rerr) {	/* a short or failed read: the pread path */
			rerr = store_read(&p->store, buf, len, pg_store_off(runs[k].pg));
		} else {
			rerr = store_verify(&p->store, buf, runs[k].pg, runs[k].n);
		}
		rerr = install(p, runs[k].pg, runs[k].n, buf, rerr, map);
		free(own);
		if (!rerr)
			*restored += runs[k].n;
		else if (!err)
			err = rerr;
	}
	return err;
}

/* How many pages of the set and the devices' are in state @s (a page in
 * both counts twice); with @first, 1 at the first one found.  Lock held. */
static uint64_t kept_in_state_locked(const struct pager *p, enum pager_page_state s,
				     bool first)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < p->crit_nr + p->dev_nr && !(first && n); i++)
		n += pg_state(p, kept_pg(p, i)) == s;
	return n;
}

uint64_t pager_kept_dirty_locked(const struct pager *p)
{
	uint64_t n;

	if (!p->cfg.critical_resident)
		return 0;
	n = kept_in_state_locked(p, PAGE_RESIDENT, false);
	return n < p->count[PAGE_RESIDENT] ? n : p->count[PAGE_RESIDENT];
}

/* Is a page of the set (or the devices') out?  Kept resident
 * (critical_resident), none usually is: then there is nothing to sort,
 * allocate or read.  Lock held. */
static bool set_out_locked(const struct pager *p)
{
	return kept_in_state_locked(p, PAGE_OFFLOADED, true);
}

struct restore_run {
	uint64_t restored;	/* pages */
	bool budget_hit;	/* stopped by the time budget */
	bool ring_broken;	/* the ring is to be replaced (restore_wave) */
};

/*
 * Read the OFFLOADED pages of the sorted @pgs back from the store through
 * @ring, a wave of runs at a time, each run mapped into the VMM (@map) or
 * written into the memfd alone; with @budget_ns, no wave starts once that
 * long has passed since @t0 (the first always does: a budget below one
 * read still helps).  -errno of the first failed run.
 */
static int restore_set(struct pager *p, struct io_uring *ring, const uint64_t *pgs,
		       unsigned int nr, bool map, uint64_t t0, uint64_t budget_ns,
		       struct restore_run *rr)
{
	struct crit_run runs[CRITICAL_QUEUE_DEPTH];
	bool buf_busy = false;
	unsigned int i = 0;
	char *buf;
	int err = 0;

	buf = store_buf_alloc((size_t)nr * PAGER_PAGE_SIZE);
	if (!buf)
		return -ENOMEM;
	while (!err && i < nr) {
		unsigned int nruns;

		if (budget_ns && rr->restored && now_ns() - t0 >= budget_ns) {
			rr->budget_hit = true;
			break;
		}
		nruns = claim_wave(p, pgs, nr, &i, buf, runs);
		if (nruns)
			err = restore_wave(p, ring, runs, nruns, map, &rr->restored,
					   &rr->ring_broken, &buf_busy);
		if (rr->ring_broken)	/* the caller sets up a new one */
			break;
	}
	if (!buf_busy)	/* else a read may still land in it: never freed */
		free(buf);
	return err;
}

int pager_resume_prepare(struct pager *p)
{
	uint64_t pgs[PAGER_KEEP_MAX_PAGES], t0 = now_ns();
	struct restore_run rr = { 0 };
	unsigned int nr;
	int err = 0;

	atomic_store(&p->tidy_stop, true);	/* no punch under its fault reads */
	pthread_mutex_lock(&p->lock);
	/* whatever the restore policy: every resume, a lazy one (a guest
	 * timer's) too, runs the same wake path up to RESUME_ACK */
	nr = p->count[PAGE_OFFLOADED] && p->cfg.critical_budget_ns && set_out_locked(p) ?
	     pager_critical_snapshot_locked(p, pgs) : 0;
	pthread_mutex_unlock(&p->lock);
	if (nr) {
		/* the ring lives with the pager: setting one up and tearing it
		 * down costs milliseconds, more than the reads */
		if (!p->crit_ring_up)
			err = io_uring_queue_init(CRITICAL_QUEUE_DEPTH, &p->crit_ring, 0);
		p->crit_ring_up = !err;
		if (!err)
			err = restore_set(p, &p->crit_ring, pgs, nr, true, t0,
					  p->cfg.critical_budget_ns, &rr);
	}
	if (rr.ring_broken) {
		io_uring_queue_exit(&p->crit_ring);
		p->crit_ring_up = false;
	}
	pthread_mutex_lock(&p->lock);
	p->crit_restored_pages += rr.restored;
	p->crit_last_restore_ns = now_ns() - t0;
	p->crit_budget_stops += rr.budget_hit;
	p->crit_ring_resets += rr.ring_broken;
	window_open_locked(p);
	/* the command's last writes kept through the wait are resident: the
	 * window cannot see them fault; at its delivery, those mapped again
	 * since were touched and are noted (pager_tail.c); a set no offload
	 * put back unmapped is still mapped: nothing to tell */
	p->tail_learn_nr = p->tail_installed ? p->tail_nr : 0;
	memcpy(p->tail_learn_pg, p->tail_pg, p->tail_learn_nr * sizeof(*p->tail_pg));
	pthread_mutex_unlock(&p->lock);
	if (nr)
		log_info(p->subject, "resume-critical set: %llu of %u page(s) restored in "
			 "%llu us%s", (unsigned long long)rr.restored, nr,
			 (unsigned long long)((now_ns() - t0) / 1000),
			 rr.budget_hit ? " (time budget reached)" : "");
	return err ? err : (int)rr.restored;
}

int pager_restore_unmapped(struct pager *p, struct io_uring *ring, const uint64_t *pgs,
			   unsigned int nr)
{
	struct restore_run rr = { 0 };

	return restore_set(p, ring, pgs, nr, false, now_ns(), 0, &rr);
}

void pager_data_window(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	if (p->registered) {	/* else nothing is out: nothing would fault */
		window_open_locked(p);
		p->crit_data_windows++;
	}
	pthread_mutex_unlock(&p->lock);
}

void pager_resume_delivered(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	p->crit_recording = false;
	if (p->tail_learn_nr) {
		p->tail_learn_due = true;
		pthread_cond_signal(&p->offload_cv);	/* the worker peeks */
	}
	pthread_mutex_unlock(&p->lock);
}

void pager_set_critical_budget(struct pager *p, uint64_t ns)
{
	p->cfg.critical_budget_ns = ns;
}

void pager_critical_release(struct pager *p)
{
	if (p->crit_ring_up)
		io_uring_queue_exit(&p->crit_ring);
	p->crit_ring_up = false;
}
