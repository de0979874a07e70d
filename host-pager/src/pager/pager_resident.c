// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_resident.c - pager_make_resident_async: guest-physical ranges the
 * loop thread needs in the memfd (vmnapd's own accesses to guest RAM: the
 * vsock device's rings and buffers) are read back from the store by this
 * worker, never on the loop.
 *
 * The loop thread checks a range under the lock; when a page of it is out
 * (OFFLOADED, or IN_FLIGHT in someone's move) the range joins a bounded
 * queue (PAGER_RESIDENT_QMAX, duplicates merged) and the caller is told
 * -EAGAIN.  The worker restores each range as pager_make_resident would
 * (claim, read, install: the same page states the fault and prefetch
 * threads use) and then signals p->resident_fd; the loop runs the owner's
 * callback, which retries.  A full queue still answers -EAGAIN: the queue
 * is not empty, so a callback follows, and the retry asks again.  From a
 * resume to its delivery the worker's reads go in the delivery's I/O
 * class (enum pager_io_class): the data the guest waits for is behind
 * them.
 *
 * A range that cannot be restored (store read or checksum error, counted
 * in restore_errors by pager_install_run) is remembered; the next request
 * overlapping it gets that error once, so a retry does not loop on a
 * broken store, and a later one tries again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

static bool overlaps(const struct pager_gpa_req *r, uint64_t gpa, uint64_t len)
{
	return gpa < r->gpa + r->len && r->gpa < gpa + len;
}

static void req_remove(struct pager_gpa_req *q, unsigned int *n, unsigned int i)
{
	memmove(&q[i], &q[i + 1], (*n - i - 1) * sizeof(*q));
	(*n)--;
}

int pager_resident_ask_locked(struct pager *p, uint64_t gpa, uint64_t len,
			      bool *queued)
{
	for (unsigned int i = 0; i < p->rfail_n; i++) {
		if (overlaps(&p->rfail[i], gpa, len)) {
			int err = p->rfail[i].err;

			req_remove(p->rfail, &p->rfail_n, i);
			return err;
		}
	}
	for (unsigned int i = 0; i < p->rq_n; i++)
		if (p->rq[i].gpa <= gpa && gpa + len <= p->rq[i].gpa + p->rq[i].len)
			return -EAGAIN;		/* asked already */
	if (p->rq_n < PAGER_RESIDENT_QMAX) {
		p->rq[p->rq_n++] = (struct pager_gpa_req){ .gpa = gpa, .len = len };
		p->resident_asked++;
		*queued = true;
	}
	return -EAGAIN;
}

/* A failed request, for the next caller that asks for it; lock held. */
static void remember_failure(struct pager *p, const struct pager_gpa_req *r)
{
	if (p->rfail_n == PAGER_RESIDENT_QMAX)
		req_remove(p->rfail, &p->rfail_n, 0);	/* the oldest goes */
	p->rfail[p->rfail_n++] = *r;
	p->resident_failed++;
}

static void *resident_main(void *arg)
{
	struct pager *p = arg;
	void *buf = store_buf_alloc(RESTORE_RUN_MAX_PAGES * PAGER_PAGE_SIZE);
	struct pager_ioprio io;
	uint64_t one = 1;

	pager_ioprio_init(&io);
	pthread_mutex_lock(&p->lock);
	while (!p->resident_exit) {
		struct pager_gpa_req r;
		bool urgent;

		if (!p->rq_n) {
			pthread_cond_wait(&p->resident_cv, &p->lock);
			continue;
		}
		r = p->rq[0];
		urgent = p->crit_recording;	/* a resume's delivery waits */
		pthread_mutex_unlock(&p->lock);
		pager_ioprio_for(p, &io, urgent);
		r.err = buf ? pager_restore_gpa(p, r.gpa, r.len, buf) : -ENOMEM;
		if (r.err)
			log_warn(p->subject, "cannot make %#llx+%#llx resident: %s",
				 (unsigned long long)r.gpa, (unsigned long long)r.len,
				 strerror(-r.err));
		pthread_mutex_lock(&p->lock);
		/* dequeued only now: a request for it meanwhile was merged
		 * (unless stopping emptied the queue) */
		if (p->rq_n)
			req_remove(p->rq, &p->rq_n, 0);
		if (r.err)
			remember_failure(p, &r);
		pthread_mutex_unlock(&p->lock);
		if (write(p->resident_fd, &one, sizeof(one)) < 0)
			log_err(p->subject, "cannot signal restored memory: %s", strerror(errno));
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	free(buf);
	return NULL;
}

void pager_resident_done_cb(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pager *p = arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	if (p->resident_cb)
		p->resident_cb(p, p->resident_arg);
}

void pager_set_resident_cb(struct pager *p, void (*cb)(struct pager *p, void *arg),
			   void *arg)
{
	p->resident_cb = cb;
	p->resident_arg = arg;
}

int pager_resident_thread_start(struct pager *p)
{
	return pager_thread_start(p, &p->resident_thread, &p->resident_thread_started,
				  resident_main, "vmnap-resident");
}

void pager_resident_thread_stop(struct pager *p)
{
	if (!p->resident_thread_started)
		return;
	pthread_mutex_lock(&p->lock);
	p->rq_n = 0;	/* nothing queued is read any more */
	pthread_mutex_unlock(&p->lock);
	pager_thread_stop(p, p->resident_thread, &p->resident_thread_started,
			  &p->resident_exit, &p->resident_cv);
}
