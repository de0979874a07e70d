// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_prefetch.c - working-set prefetch after resume.  The pages faulted
 * (or prefetched) in the previous cycle (PG_WS_PREV) that are still
 * offloaded stream back in the background, in guest-RAM order, read from
 * the store and written into the memfd.
 *
 * Faults first (as CRIU's lazy pages): while the fault thread serves a
 * batch the prefetcher waits; the transfer size starts at
 * prefetch_min_bytes, doubles after every chunk during which no fault came,
 * and falls back to the minimum on every fault.
 *
 * The same thread does readahead for the fault path: when a mapper faults
 * sequentially, the fault thread asks for the next window, which is read
 * here while the mapper consumes the window just served.  Readahead goes
 * before the working set: a mapper is about to wait for it.
 */
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	bool busy;
};

struct pf {
	struct pager *p;
	struct io_uring ring;
	struct pf_slot slot[PREFETCH_QUEUE_DEPTH];
	unsigned int inflight;
	uint64_t done;
};

/* A read completed: put its pages into the memfd (or back to OFFLOADED). */
static void pf_complete(struct pf *f, struct io_uring_cqe *cqe)
{
	struct pf_slot *s = io_uring_cqe_get_data(cqe);
	size_t len = s->n * PAGER_PAGE_SIZE;
	int err = cqe->res < 0 ? cqe->res : (size_t)cqe->res != len ? -EIO : 0;

	if (!err)
		err = store_verify(&f->p->store, s->buf, s->pg, s->n);
	if (!pager_install_run(f->p, s->pg, s->n, s->buf, err)) {
		pthread_mutex_lock(&f->p->lock);
		f->p->prefetch_pages += s->n;
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
void pager_readahead_locked(struct pager *p, uint64_t pg, uint64_t n)
{
	p->ra_start = pg;
	p->ra_len = n;
	pthread_cond_broadcast(&p->prefetch_cv);
}

/* Claim the next run to read: readahead first, then the working set from
 * *@ws_pg (0 when the working set is done or not asked for). */
static uint64_t next_run(struct pager *p, bool ws, uint64_t *ws_pg, uint64_t chunk,
			 uint64_t *pg_out, bool *ws_done)
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
		    pager_claim_run_locked(p, pg, end - pg, 0) : 0;
		p->ra_len = 0;
		if (n) {
			/* noted when asked for; again (a no-op unless the run
			 * moved) before the pages reach the memfd */
			pager_critical_note_locked(p, pg, n);
			*pg_out = pg;
			pthread_mutex_unlock(&p->lock);
			return n;
		}
	}
	if (ws && !*ws_done && !atomic_load(&p->faults_active)) {
		pg = *ws_pg;
		while (pg < p->npages &&
		       !(pg_state(p, pg) == PAGE_OFFLOADED && (p->state[pg] & PG_WS_PREV)))
			pg++;
		n = pg < p->npages ? pager_claim_run_locked(p, pg, chunk, PG_WS_PREV) : 0;
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
static void prefetch_run(struct pf *f, bool ws)
{
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
		uint64_t n, pg = 0;
		bool ra_pending;

		if (should_stop(p))
			ws_done = true;
		pthread_mutex_lock(&p->lock);
		ra_pending = p->ra_len && !should_stop(p);
		if (should_stop(p))
			p->ra_len = 0;
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
		n = next_run(p, ws, &ws_pg, chunk, &pg, &ws_done);
		if (!n)
			continue;
		if (!ra_pending)
			ws_pages += n;
		s->pg = pg;
		s->n = n;
		s->busy = true;
		sqe = io_uring_get_sqe(&f->ring);
		io_uring_prep_read(sqe, p->store.fd, s->buf, (unsigned int)(n * PAGER_PAGE_SIZE),
				   pg_store_off(pg));
		io_uring_sqe_set_data(sqe, s);
		io_uring_submit(&f->ring);
		f->inflight++;
		pf_reap(f, false);
		if (!ra_pending && atomic_load(&p->fault_seq) == seq && chunk < max_pages)
			chunk = chunk * 2 < max_pages ? chunk * 2 : max_pages;
	}
	if (ws_pages)
		log_info(p->subject, "prefetch: %llu working-set page(s) in %llu ms",
			 (unsigned long long)ws_pages,
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
		bool ws;

		if (!p->prefetch_requested && !p->ra_len) {
			pthread_cond_wait(&p->prefetch_cv, &p->lock);
			continue;
		}
		ws = p->prefetch_requested;
		p->prefetch_requested = false;
		p->prefetch_running = true;
		pthread_mutex_unlock(&p->lock);
		prefetch_run(&f, ws);
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
	return pager_thread_start(p, &p->prefetch_thread, &p->prefetch_thread_started, prefetch_main);
}

void pager_prefetch_quiesce(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	p->prefetch_requested = false;
	p->ra_len = 0;
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
	pthread_mutex_lock(&p->lock);
	p->prefetch_exit = true;
	pthread_cond_broadcast(&p->prefetch_cv);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->prefetch_thread, NULL);
	p->prefetch_thread_started = false;
}
