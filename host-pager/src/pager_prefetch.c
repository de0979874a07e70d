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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define PREFETCH_FAULT_BACKOFF_NS	50000	/* wait while faults are served */

static void backoff(void)
{
	struct timespec ts = { 0, PREFETCH_FAULT_BACKOFF_NS };

	nanosleep(&ts, NULL);
}

static bool should_stop(struct pager *p)
{
	return atomic_load(&p->prefetch_abort);
}

static void prefetch_run(struct pager *p, void *buf)
{
	uint64_t min_pages = p->cfg.prefetch_min_bytes / PAGER_PAGE_SIZE;
	uint64_t max_pages = p->cfg.prefetch_max_bytes / PAGER_PAGE_SIZE;
	uint64_t chunk = min_pages, done = 0, t0 = now_ns();
	uint_fast64_t seq = atomic_load(&p->fault_seq);

	for (uint64_t pg = 0; pg < p->npages && !should_stop(p);) {
		uint64_t n;

		while (atomic_load(&p->faults_active) && !should_stop(p))
			backoff();
		if (atomic_load(&p->fault_seq) != seq) {
			seq = atomic_load(&p->fault_seq);
			chunk = min_pages;
		}
		pthread_mutex_lock(&p->lock);
		while (pg < p->npages &&
		       !(pg_state(p, pg) == PAGE_OFFLOADED && (p->state[pg] & PG_WS_PREV)))
			pg++;
		n = pg < p->npages ? pager_claim_run_locked(p, pg, chunk, PG_WS_PREV) : 0;
		pthread_mutex_unlock(&p->lock);
		if (!n)
			break;
		if (pager_restore_run(p, pg, n, buf))
			break;	/* logged; the rest is served by faults */
		pthread_mutex_lock(&p->lock);
		p->prefetch_pages += n;
		pthread_mutex_unlock(&p->lock);
		done += n;
		pg += n;
		if (atomic_load(&p->fault_seq) == seq && chunk < max_pages)
			chunk = chunk * 2 < max_pages ? chunk * 2 : max_pages;
	}
	if (done)
		log_info(p->subject, "prefetch: %llu page(s) in %llu ms",
			 (unsigned long long)done,
			 (unsigned long long)((now_ns() - t0) / 1000000));
}

static void *prefetch_main(void *arg)
{
	struct pager *p = arg;
	void *buf = store_buf_alloc(p->cfg.prefetch_max_bytes);

	if (!buf) {
		log_err(p->subject, "prefetch thread: out of memory");
		return NULL;
	}
	pthread_mutex_lock(&p->lock);
	while (!p->prefetch_exit) {
		if (!p->prefetch_requested) {
			pthread_cond_wait(&p->prefetch_cv, &p->lock);
			continue;
		}
		p->prefetch_requested = false;
		p->prefetch_running = true;
		pthread_mutex_unlock(&p->lock);
		prefetch_run(p, buf);
		pthread_mutex_lock(&p->lock);
		p->prefetch_running = false;
		pager_maybe_unregister_locked(p);
		pthread_cond_broadcast(&p->prefetch_cv);
	}
	pthread_mutex_unlock(&p->lock);
	free(buf);
	return NULL;
}

int pager_prefetch_thread_start(struct pager *p)
{
	int err = pthread_create(&p->prefetch_thread, NULL, prefetch_main, p);

	if (err)
		return -err;
	p->prefetch_thread_started = true;
	return 0;
}

void pager_prefetch_quiesce(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	p->prefetch_requested = false;
	atomic_store(&p->prefetch_abort, true);
	while (p->prefetch_running)
		pthread_cond_wait(&p->prefetch_cv, &p->lock);
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
