// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_prefetch.c - the background restore after resume (enum
 * pager_restore) and the working set it uses.  Working-set mode: the pages
 * touched in the previous cycle (PG_WS_PREV) that are still offloaded
 * stream back in the background, in guest-RAM order, read from the store
 * and written into the memfd; recurring mode: the same, with PG_WS_PREV
 * the pages touched in each of the last two data cycles (those the next
 * command is likely to need again, the one-off pages of a single command
 * left out); eager mode: every offloaded page does.
 *
 * Faults first (as CRIU's lazy pages): while the fault thread serves a
 * batch the prefetcher waits; the transfer size starts at
 * prefetch_min_bytes, doubles after every chunk during which no fault came,
 * and falls back to the minimum on every fault.
 *
 * The same thread does readahead for the fault path: when a mapper faults
 * sequentially, the fault thread asks for the next window, which is read
 * here while the mapper consumes the window just served; so are the pages
 * the fault-order prefetch queues (pager_follow.c).  Both go before the
 * working set: a mapper is about to wait for them.
 */
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define PREFETCH_FAULT_BACKOFF_NS	50000	/* wait while faults are served */
#define PREFETCH_QUEUE_DEPTH		4	/* store reads in flight */

static void backoff(void)
{
	struct timespec ts = { 0, PREFETCH_FAULT_BACKOFF_NS };

	nanosleep(&ts, NULL);
}

static bool should_stop(struct pager *p)
{
	return atomic_load(&p->prefetch_abort);
}

struct pf_slot {
	void *buf;		/* prefetch_max_bytes, O_DIRECT-aligned */
	uint64_t pg, n;
	struct pager_mapper *ra;	/* readahead for this mapper's stream */
	bool ra_write;		/* ... which writes what it reads */
	bool busy;
	bool eager;		/* an eager restore's run (not readahead) */
	bool follow;		/* the fault-order prefetch's run */
};

struct pf {
	struct pager *p;
	struct io_uring ring;
	struct pf_slot slot[PREFETCH_QUEUE_DEPTH];
	unsigned int inflight;
	uint64_t done;
};

/*
 * Readahead for mapper @m's sequential stream, read into @buf: mapped into
 * @m with UFFDIO_COPY, as the stream's faults map their own windows, so
 * that the mapper reads it with no host page fault (put into the memfd
 * only, each page's first access would map it, one fault per page).
 * Write-protected while writes are tracked (a mapper of a tracked VM that
 * is not registered for write-protect gets nothing mapped), unless every
 * page is write-hot or the stream writes what it reads (@write; *@w,
 * pager_wmap_locked): then writable (but for samples), so that its writes
 * take no fault at all.  Only while @m lives and maps the run whole; else
 * (or for what the copy did not place) the caller writes the memfd.  Bytes
 * mapped.  Neither lock held; the run is claimed.
 */
static uint64_t ra_map(struct pager *p, struct pager_mapper *m, uint64_t pg,
		       uint64_t n, const char *buf, bool write, struct pager_wplan *w)
{
	struct pager_mapper *x = p->mappers;
	uint64_t done = 0, host = 0;
	bool track;

	w->how = PAGER_WMAP_PROTECTED;
	pthread_mutex_lock(&p->reg_lock);	/* @m is not freed meanwhile */
	pthread_mutex_lock(&p->lock);
	track = pager_tracking_locked(p);
	while (x && x != m)
		x = x->next;
	if (x)
		host = pg_mapper_addr_locked(p, m, pg, n);
	if (host && track)
		pager_wmap_locked(p, pg, n, write, w);
	pthread_mutex_unlock(&p->lock);
	if (host)
		done = pager_uffd_map_plan(m->uffd, host, buf, n, track ? w : NULL);
	pthread_mutex_unlock(&p->reg_lock);
	return done;
}

/* A read completed: put its pages into the memfd (or back to OFFLOADED). */
static void pf_complete(struct pf *f, struct io_uring_cqe *cqe)
{
	struct pf_slot *s = io_uring_cqe_get_data(cqe);
	struct pager *p = f->p;
	size_t len = s->n * PAGER_PAGE_SIZE;
	int err = cqe->res < 0 ? cqe->res : (size_t)cqe->res != len ? -EIO : 0;
	uint64_t mapped = 0;
	struct pager_wplan plan = { .how = PAGER_WMAP_PROTECTED };

	if (!err)
		err = store_verify(&p->store, s->buf, s->pg, s->n);
	if (!err && s->ra)
		mapped = ra_map(p, s->ra, s->pg, s->n, s->buf, s->ra_write,
				&plan) / PAGER_PAGE_SIZE;
	if (mapped) {
		/* in place: touched whole, as the stream's fault windows are;
		 * write-hot ones and a write stream's writable, so RESIDENT at
		 * once.  The rest (the copy stopped short) goes through the
		 * memfd. */
		pthread_mutex_lock(&p->lock);
		pager_finish_run_locked(p, s->pg, mapped, true);
		if (plan.how != PAGER_WMAP_PROTECTED)
			pager_wmap_done_locked(p, s->pg, mapped, &plan);
		for (uint64_t i = s->pg; i < s->pg + mapped; i++)
			p->state[i] |= PG_WS_CUR;
		p->ra_mapped_pages += mapped;
		p->prefetch_pages += mapped;
		pthread_mutex_unlock(&p->lock);
		f->done += mapped;
		s->pg += mapped;
		s->n -= mapped;
		memmove(s->buf, (char *)s->buf + mapped * PAGER_PAGE_SIZE,
			s->n * PAGER_PAGE_SIZE);
	}
	if (s->n && !pager_install_run(p, s->pg, s->n, s->buf, err)) {
		pthread_mutex_lock(&f->p->lock);
		f->p->prefetch_pages += s->n;
		if (s->eager)
			f->p->eager_pages += s->n;
		if (s->follow)
			pager_follow_installed_locked(f->p, s->n);
		pthread_mutex_unlock(&f->p->lock);
		f->done += s->n;
	}
	s->busy = false;
	f->inflight--;
}

static void pf_reap(struct pf *f, bool wait)
{
	struct io_uring_cqe *cqe;

	if (wait && f->inflight && io_uring_wait_cqe(&f->ring, &cqe))
		return;
	while (io_uring_peek_cqe(&f->ring, &cqe) == 0) {
		pf_complete(f, cqe);
		io_uring_cqe_seen(&f->ring, cqe);
	}
}

/*
 * Stream the previous cycle's working set back: claim runs in guest-RAM
 * order, read them from the store with up to PREFETCH_QUEUE_DEPTH reads in
 * flight, write each into the memfd as it completes.  No new read while a
 * fault batch is being served.
 */
void pager_readahead_locked(struct pager *p, struct pager_mapper *m, uint64_t pg,
			    uint64_t n, bool write)
{
	p->ra_start = pg;
	p->ra_len = n;
	p->ra_mapper = m;
	p->ra_write = write;
	pthread_cond_broadcast(&p->prefetch_cv);
}

/* Claim the next run to read, at most @max pages (a slot's buffer):
 * readahead first (for mapper *@ra_m's stream; *@ra_write: one that
 * writes), then the fault-order prefetch's (*@follow), then the
 * offloaded pages with @flags (PG_WS_PREV: the working set; 0: every one)
 * from *@ws_pg, @chunk pages (0 when they are done or not asked for). */
static uint64_t next_run(struct pager *p, bool ws, uint8_t flags, uint64_t *ws_pg,
			 uint64_t chunk, uint64_t max, uint64_t *pg_out, bool *ws_done,
			 struct pager_mapper **ra_m, bool *ra_write, bool *follow)
{
	uint64_t n = 0, pg;

	pthread_mutex_lock(&p->lock);
	if (p->ra_len) {
		uint64_t end = p->ra_start + p->ra_len;

		/* the first offloaded run in the window */
		for (pg = p->ra_start; pg < end && pg < p->npages &&
		     pg_state(p, pg) != PAGE_OFFLOADED; pg++)
			;
		n = pg < end && pg < p->npages ?
		    pager_claim_run_locked(p, pg, end - pg < max ? end - pg : max, 0) : 0;
		p->ra_len = 0;
		if (n) {
			/* noted when asked for; again (a no-op unless the run
			 * moved) before the pages reach the memfd */
			pager_critical_note_locked(p, pg, n);
			*pg_out = pg;
			*ra_m = p->ra_mapper;
			*ra_write = p->ra_write;
			pthread_mutex_unlock(&p->lock);
			return n;
		}
	}
	if (p->fol_qn && (n = pager_follow_next_locked(p, &pg, max))) {
		*pg_out = pg;
		*follow = true;
		pthread_mutex_unlock(&p->lock);
		return n;
	}
	if (ws && !*ws_done && !atomic_load(&p->faults_active)) {
		pg = *ws_pg;
		while (pg < p->npages &&
		       !(pg_state(p, pg) == PAGE_OFFLOADED && (p->state[pg] & flags) == flags))
			pg++;
		n = pg < p->npages ? pager_claim_run_locked(p, pg, chunk, flags) : 0;
		if (!n)
			*ws_done = true;
		*ws_pg = pg + n;
		*pg_out = pg;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

/*
 * Readahead and the previous cycle's working set: claim runs (the working
 * set in guest-RAM order), read them from the store with up to
 * PREFETCH_QUEUE_DEPTH reads in flight, write each into the memfd as it
 * completes.  No new working-set read while a fault batch is served.
 */
static void prefetch_run(struct pf *f, bool ws, enum pager_restore mode)
{
	bool eager = mode == PAGER_RESTORE_EAGER;
	uint8_t flags = eager ? 0 : PG_WS_PREV;
	struct pager *p = f->p;
	uint64_t min_pages = p->cfg.prefetch_min_bytes / PAGER_PAGE_SIZE;
	uint64_t max_pages = p->cfg.prefetch_max_bytes / PAGER_PAGE_SIZE;
	uint64_t chunk = min_pages, ws_pg = 0, t0 = now_ns(), ws_pages = 0;
	uint_fast64_t seq = atomic_load(&p->fault_seq);
	bool ws_done = !ws;

	f->done = 0;
	for (;;) {
		struct io_uring_sqe *sqe;
		struct pf_slot *s = NULL;
		struct pager_mapper *ra_m = NULL;
		uint64_t n, pg = 0;
		bool ra_pending, ra_write = false, follow = false, urgent, window;

		if (should_stop(p))
			ws_done = true;
		pthread_mutex_lock(&p->lock);
		/* readahead and the fault-order prefetch: a mapper waits */
		ra_pending = (p->ra_len || p->fol_qn) && !should_stop(p);
		if (should_stop(p))
			p->ra_len = p->fol_qn = 0;
		window = p->crit_recording;	/* a resume's delivery waits */
		pthread_mutex_unlock(&p->lock);
		if (f->inflight == PREFETCH_QUEUE_DEPTH ||
		    (!ra_pending && (ws_done || atomic_load(&p->faults_active)))) {
			if (f->inflight)
				pf_reap(f, true);
			else if (ws_done)
				break;
			else
				backoff();
			continue;
		}
		if (atomic_load(&p->fault_seq) != seq) {
			seq = atomic_load(&p->fault_seq);
			chunk = min_pages;
		}
		for (unsigned int i = 0; i < PREFETCH_QUEUE_DEPTH && !s; i++)
			if (!f->slot[i].busy)
				s = &f->slot[i];
		n = next_run(p, ws, flags, &ws_pg, chunk, max_pages, &pg, &ws_done, &ra_m,
			     &ra_write, &follow);
		if (!n)
			continue;
		urgent = ra_m || follow;	/* else a working-set or eager run */
		if (!urgent)
			ws_pages += n;
		s->pg = pg;
		s->n = n;
		s->busy = true;
		s->eager = eager && !urgent;
		s->follow = follow;
		s->ra = ra_m;
		s->ra_write = ra_write;
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_read(sqe, p->store.fd, s->buf, (unsigned int)(n * PAGER_PAGE_SIZE),
				   pg_store_off(pg));
		/* a fault's read-ahead or fault-order run before a delivery:
		 * in the fault thread's class (enum pager_io_class), or the
		 * fault that waits for it would wait behind its own reads */
		if (pager_ioprio_rt(p, urgent && window)) {
			sqe->ioprio = PAGER_IO_RT_PRIO;
			atomic_fetch_add(&p->dlv_io_reads, 1);
		}
		io_uring_sqe_set_data(sqe, s);
		io_uring_submit(&f->ring);
		f->inflight++;
		pf_reap(f, false);
		if (!urgent && atomic_load(&p->fault_seq) == seq && chunk < max_pages)
			chunk = chunk * 2 < max_pages ? chunk * 2 : max_pages;
	}
	if (ws_pages)
		log_info(p->subject, "prefetch: %llu %s page(s) in %llu ms",
			 (unsigned long long)ws_pages, eager ? "offloaded (eager)" :
			 mode == PAGER_RESTORE_RECURRING ? "recurring" : "working-set",
			 (unsigned long long)((now_ns() - t0) / 1000000));
}

static void *prefetch_main(void *arg)
{
	struct pager *p = arg;
	struct pf f = { .p = p };
	int err = 0;

	for (unsigned int i = 0; i < PREFETCH_QUEUE_DEPTH && !err; i++)
		if (!(f.slot[i].buf = store_buf_alloc(p->cfg.prefetch_max_bytes)))
			err = -ENOMEM;
	if (!err)
		err = io_uring_queue_init(PREFETCH_QUEUE_DEPTH * 2, &f.ring, 0);
	if (err) {
		log_err(p->subject, "prefetch thread: %s: prefetch off", strerror(-err));
		goto out;
	}
	pthread_mutex_lock(&p->lock);
	while (!p->prefetch_exit) {
		enum pager_restore mode;
		bool ws;

		if (!p->prefetch_requested && !p->ra_len && !p->fol_qn) {
			pthread_cond_wait(&p->prefetch_cv, &p->lock);
			continue;
		}
		ws = p->prefetch_requested;
		mode = p->prefetch_mode;
		p->prefetch_requested = false;
		p->prefetch_running = true;
		pthread_mutex_unlock(&p->lock);
		prefetch_run(&f, ws, mode);
		pager_maybe_unregister(p);
		pthread_mutex_lock(&p->lock);
		p->prefetch_running = false;
		pthread_cond_broadcast(&p->prefetch_cv);
	}
	pthread_mutex_unlock(&p->lock);
	io_uring_queue_exit(&f.ring);
out:
	for (unsigned int i = 0; i < PREFETCH_QUEUE_DEPTH; i++)
		free(f.slot[i].buf);
	return NULL;
}

int pager_prefetch_thread_start(struct pager *p)
{
	return pager_thread_start(p, &p->prefetch_thread, &p->prefetch_thread_started,
				  prefetch_main, "vmnap-prefetch");
}

void pager_prefetch_quiesce(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	p->prefetch_requested = false;
	p->ra_len = p->fol_qn = 0;
	atomic_store(&p->prefetch_abort, true);
	while (p->prefetch_running)
		pthread_cond_wait(&p->prefetch_cv, &p->lock);
	atomic_store(&p->prefetch_abort, false);	/* idle now: later requests run */
	pthread_mutex_unlock(&p->lock);
}

void pager_prefetch_thread_stop(struct pager *p)
{
	if (!p->prefetch_thread_started)
		return;
	pager_prefetch_quiesce(p);
	pager_thread_stop(p, p->prefetch_thread, &p->prefetch_thread_started,
			  &p->prefetch_exit, &p->prefetch_cv);
}

/* Pagemap entries read per pread (8 bytes each). */
#define PM_CHUNK	4096
#define PM_PRESENT	(1ull << 63)

/* One mapper's live range of a region: pagemap fd, first address, pages. */
struct pm_range {
	int fd;
	uint64_t addr, pg, n;
};

/*
 * Page @pg is mapped: restored in the background, it was touched; installed
 * by fault-around, it is a hit (counted in @hits, unmarked); so is one the
 * fault-order prefetch installed (its own count).  Lock held.
 */
static void note_mapped_locked(struct pager *p, uint64_t pg, uint64_t *hits)
{
	if (p->state[pg] & PG_BG)
		p->state[pg] |= PG_WS_CUR;
	if (p->fa[pg] == FA_AROUND) {
		p->fa[pg] = 0;
		p->fa_hits++;
		(*hits)++;
	} else if (p->fa[pg] == FA_FOLLOW && pg_state(p, pg) != PAGE_OFFLOADED) {
		p->fa[pg] = 0;
		p->fol_hits++;
	}
}

struct present_arg {
	struct pager *p;
	const struct pm_range *rg;
	uint64_t *hits;
};

static void note_present_range(void *arg, uint64_t lo, uint64_t hi)
{
	struct present_arg *a = arg;

	pthread_mutex_lock(&a->p->lock);
	for (uint64_t ad = lo; ad < hi; ad += PAGER_PAGE_SIZE)
		note_mapped_locked(a->p, a->rg->pg + (ad - a->rg->addr) / PAGER_PAGE_SIZE,
				   a->hits);
	pthread_mutex_unlock(&a->p->lock);
}

/*
 * The present pages of @rg by PAGEMAP_SCAN: one range per run of present
 * pages instead of 8 bytes per page.  -errno where the kernel lacks it
 * (before 6.7: ENOTTY) or refuses the range.
 */
static int present_scan(struct pager *p, const struct pm_range *rg, struct page_region *vec,
			uint64_t *hits)
{
	struct present_arg a = { .p = p, .rg = rg, .hits = hits };

	return pager_pagemap_scan(rg->fd, rg->addr, rg->addr + rg->n * PAGER_PAGE_SIZE, 0,
				  PAGE_IS_PRESENT, vec, note_present_range, &a);
}

/* The same by reading @rg's pagemap entries (bit 63: present).  False if
 * they could not all be read. */
static bool present_read(struct pager *p, const struct pm_range *rg, uint64_t *ent,
			 uint64_t *hits)
{
	for (uint64_t k = 0; k < rg->n;) {
		uint64_t want = rg->n - k < PM_CHUNK ? rg->n - k : PM_CHUNK;
		off_t at = (off_t)((rg->addr / PAGER_PAGE_SIZE + k) * sizeof(*ent));
		ssize_t got = pread(rg->fd, ent, want * sizeof(*ent), at);

		if (got <= 0)
			return false;
		want = (uint64_t)got / sizeof(*ent);
		pthread_mutex_lock(&p->lock);
		for (uint64_t j = 0; j < want; j++)
			if (ent[j] & PM_PRESENT)
				note_mapped_locked(p, rg->pg + k + j, hits);
		pthread_mutex_unlock(&p->lock);
		k += want;
	}
	return true;
}

/*
 * Pages restored in the background (PG_BG) that some mapper maps now were
 * accessed after the restore (writing the memfd maps nothing): touched.
 * Pages fault-around installed (p->fa) that some mapper maps are its hits
 * (counted in @hits, unmarked).  Read from each mapper's /proc/PID/pagemap:
 * its present ranges by PAGEMAP_SCAN, else its entries (bit 63: present);
 * a mapper whose pagemap cannot be read just shows nothing (its accesses
 * then count only as faults and writes).  Nothing to read when no page was
 * restored in the background or installed by fault-around.  False if some
 * live mapper's pagemap could not be read (the hits are not known).
 */
static bool note_present(struct pager *p, uint64_t *hits)
{
	bool all = true;
	struct pm_range *rg;
	unsigned int nr = 0, max = PAGER_MAX_MAPPERS * PAGER_MAX_REGIONS;
	struct page_region *vec;
	uint64_t *ent;
	bool any = false;

	pthread_mutex_lock(&p->lock);
	for (uint64_t pg = 0; pg < p->npages && !any; pg++)
		any = (p->state[pg] & PG_BG) || p->fa[pg];
	pthread_mutex_unlock(&p->lock);
	if (!any)
		return true;
	rg = malloc(max * sizeof(*rg));
	ent = malloc(PM_CHUNK * sizeof(*ent));
	vec = malloc(PAGER_SCAN_VEC * sizeof(*vec));
	if (!rg || !ent || !vec) {
		all = false;
		goto out;
	}
	/* reg_lock: no mapper is freed (its pagemap fd closed) meanwhile */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	for (struct pager_mapper *m = p->mappers; m && nr < max; m = m->next) {
		if (m->dead)
			continue;
		if (m->pagemap_fd < 0) {
			all = false;
			continue;
		}
		for (unsigned int i = 0; i < p->nr_regions && nr < max; i++) {
			const struct pager_region *r = &p->regions[i];

			if (!m->host_addr[i] || m->map_hi[i] <= m->map_lo[i])
				continue;
			rg[nr++] = (struct pm_range){
				.fd = m->pagemap_fd,
				.addr = m->host_addr[i] + m->map_lo[i],
				.pg = r->first_page + m->map_lo[i] / PAGER_PAGE_SIZE,
				.n = (m->map_hi[i] - m->map_lo[i]) / PAGER_PAGE_SIZE,
			};
		}
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < nr; i++)
		if (present_scan(p, &rg[i], vec, hits) && !present_read(p, &rg[i], ent, hits))
			all = false;
	pthread_mutex_unlock(&p->reg_lock);
out:
	free(rg);
	free(ent);
	free(vec);
	return all;
}

/* The measured sums are halved past this many random faults: recent
 * costs weigh more. */
#define FA_COST_DECAY		65536
/* Until both kinds of read have been seen: what a neighbour costs (its
 * share of a larger store read and its memfd write; some 5 us on this
 * project's build machine) and what a random fault costs. */
#define FA_PAGE_NS_DEFAULT	5000
#define FA_FAULT_NS_DEFAULT	100000
/* The window is decided on this many samples (neighbours, or stand-ins
 * at window 1) at least, gathered over as many cycles as it takes: a
 * short command faults only a few pages. */
#define FA_MIN_SAMPLES		64

void pager_fa_cost_read_locked(struct pager *p, uint64_t n, uint64_t ns)
{
	if (n == 1) {
		p->fac_single++;
		p->fac_single_ns += ns;
	} else if (n > 1) {
		p->fac_multi++;
		p->fac_multi_ns += ns;
		p->fac_multi_extra += n - 1;
	}
}

void pager_fa_cost_fault_locked(struct pager *p, uint64_t ns)
{
	p->fac_faults++;
	p->fac_fault_ns += ns;
	if (p->fac_faults >= FA_COST_DECAY) {
		uint64_t *sum[] = { &p->fac_faults, &p->fac_fault_ns, &p->fac_single,
				    &p->fac_single_ns, &p->fac_multi, &p->fac_multi_ns,
				    &p->fac_multi_extra };

		for (size_t i = 0; i < sizeof(sum) / sizeof(sum[0]); i++)
			*sum[i] /= 2;
	}
}

/* What one neighbour costs, ns: the time a read of more pages takes over
 * one of a single page, per page beyond the first. */
static uint64_t fa_page_ns(const struct pager *p)
{
	uint64_t single;

	if (!p->fac_single || !p->fac_multi || !p->fac_multi_extra)
		return FA_PAGE_NS_DEFAULT;
	single = p->fac_single_ns / p->fac_single;
	if (p->fac_multi_ns <= p->fac_multi * single)
		return 1;	/* no dearer than one page: next to free */
	return (p->fac_multi_ns - p->fac_multi * single) / p->fac_multi_extra;
}

void pager_fa_costs_locked(const struct pager *p, uint64_t *fault_ns, uint64_t *page_ns)
{
	*fault_ns = p->fac_faults ? p->fac_fault_ns / p->fac_faults : FA_FAULT_NS_DEFAULT;
	*page_ns = fa_page_ns(p);
}

/*
 * The fault-around window for the next cycle, by cost, from the @hits of
 * @hits + @misses neighbours installed in this cycle and in those before
 * it since the window was last decided (FA_MIN_SAMPLES at least): a hit
 * spared a random fault's service time, every neighbour cost its share of
 * a larger store read and its memfd write.  The window doubles while what
 * the hits spared is at least twice what the neighbours cost, halves once
 * it is less than they cost, between 1 and cfg.fault_around_pages (the
 * bound on memory brought in unused).  At window 1 nothing is installed:
 * the stand-ins count, each fault a neighbour that window 2 would have
 * installed.  A neighbour costs a few us where a fault costs a store read
 * and a userfaultfd round trip, so a window pays even when most of what
 * it installs goes unused.  Lock held.
 */
static void fa_adapt_locked(struct pager *p, uint64_t hits, uint64_t misses)
{
	uint32_t w = p->fa_window, max = p->cfg.fault_around_pages;
	uint64_t fault_ns, page_ns, saved, cost;

	if (w == 1) {	/* nothing installed: the window-1 stand-ins */
		hits = p->fa_w1_near;
		misses = p->fa_w1_faults - p->fa_w1_near;
	}
	p->fa_acc_hits += hits;
	p->fa_acc_misses += misses;
	if (p->fa_acc_hits + p->fa_acc_misses < FA_MIN_SAMPLES)
		return;
	hits = p->fa_acc_hits;
	misses = p->fa_acc_misses;
	p->fa_acc_hits = p->fa_acc_misses = 0;
	pager_fa_costs_locked(p, &fault_ns, &page_ns);
	saved = hits * fault_ns;
	cost = (hits + misses) * page_ns;
	if (saved >= 2 * cost)
		w = w * 2 > max ? max : w * 2;
	else if (saved < cost)
		w = w / 2 ? w / 2 : 1;
	p->fa_window = w;
}

void pager_ws_cycle_end(struct pager *p)
{
	uint64_t ws = 0, hits = 0, misses = 0, fault_ns, page_ns;
	uint32_t fa0, fa1;
	bool keep, known, data, recurring;

	known = note_present(p, &hits);
	pthread_mutex_lock(&p->lock);
	/* a cycle whose resume overrode the policy (a guest timer's) adds
	 * what it touched; a normal one replaces the working set */
	keep = p->cycle_override;
	p->cycle_override = false;
	/* the recurring set: what this data cycle and the last one both
	 * touched; a cycle without data leaves it */
	data = p->cycle_saw_data;
	recurring = p->restore == PAGER_RESTORE_RECURRING;
	pager_follow_cycle_end_locked(p);	/* before the marks go */
	p->cycle_saw_data = false;
	for (uint64_t pg = 0; pg < p->npages; pg++) {
		uint8_t s = p->state[pg];
		bool cur = s & PG_WS_CUR, in;

		if (recurring)
			in = data ? cur && p->ws_data_prev[pg] : (s & PG_WS_PREV);
		else
			in = cur || (keep && (s & PG_WS_PREV));
		if (data)
			p->ws_data_prev[pg] = cur;
		p->state[pg] = (uint8_t)((s & ~(PG_WS_CUR | PG_WS_PREV | PG_BG)) |
					 (in ? PG_WS_PREV : 0));
		ws += in;
		/* installed, still unmapped */
		if (p->fa[pg] == FA_AROUND)
			misses++;
		else if (p->fa[pg] == FA_FOLLOW && pg_state(p, pg) != PAGE_OFFLOADED)
			p->fol_misses++;
		p->fa[pg] = 0;
	}
	p->ws_pages = ws;
	p->fa_misses += misses;
	fa0 = p->fa_window;
	if (known)
		fa_adapt_locked(p, hits, misses);
	p->fa_w1_faults = p->fa_w1_near = 0;
	fa1 = p->fa_window;
	pager_fa_costs_locked(p, &fault_ns, &page_ns);
	pthread_mutex_unlock(&p->lock);
	log_debug(p->subject, "working set: %llu page(s) %s%s; "
		  "fault-around %llu of %llu page(s) used (a fault %llu us, a "
		  "neighbour %.1f us), window %u -> %u%s",
		  (unsigned long long)ws,
		  recurring ? "touched in each of the last two data cycles" :
			      "touched in the last cycle",
		  recurring ? (data ? "" : " (kept: no data this cycle)") :
			      keep ? " (added: an overridden resume)" : "",
		  (unsigned long long)hits, (unsigned long long)(hits + misses),
		  (unsigned long long)(fault_ns / 1000), page_ns / 1000.0, fa0,
		  fa1, known ? "" : " (a mapper's pagemap unreadable: kept)");
}
