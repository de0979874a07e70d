// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_fault.c - userfaultfd fault service: one thread per VM polls every
 * mapper's userfaultfd, reads events in batches and resolves each MISSING
 * fault by the page's state:
 *
 *   OFFLOADED  claim the contiguous offloaded run around it (fault-around:
 *              the aligned block of fault_around_pages; a window that
 *              doubles while a mapper faults sequentially), read it from
 *              the store, UFFDIO_COPY (wakes the faulter)
 *   ZERO       UFFDIO_ZEROPAGE
 *   RESIDENT   the page is present (another mapper or the prefetcher put
 *              it there: EEXIST -> UFFDIO_WAKE) or a hole (UFFDIO_ZEROPAGE)
 *   IN_FLIGHT  wait until its owner is done, then as above
 *
 * A process that exited (ESRCH) is not an error: its mapper is dropped.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define FAULT_EVENTS_PER_READ	64	/* uffd_msg read per read() */
#define UFFD_EAGAIN_RETRIES	100	/* mm changing under UFFDIO_COPY */
/* A faulting vCPU waits for this thread: run it ahead of batch work. */
#define FAULT_THREAD_NICE	-10

struct fault_ctx {
	struct pager *p;
	void *buf;			/* PAGER_MAX_FAULT_AROUND pages, aligned */
	struct pollfd pfd[PAGER_MAX_MAPPERS + 1];
	struct pager_mapper *pm[PAGER_MAX_MAPPERS + 1];
};

void pager_fault_kick(struct pager *p)
{
	uint64_t one = 1;

	if (write(p->fault_wake_fd, &one, sizeof(one)) < 0)
		log_warn(p->subject, "fault thread kick: %s", strerror(errno));
}

static unsigned int lat_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned int b = 0;

	while (us > 1 && b < PAGER_LAT_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

static int uffd_wake(int uffd, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = { .start = addr, .len = len };

	return ioctl(uffd, UFFDIO_WAKE, &r) < 0 ? -errno : 0;
}

static int uffd_zeropage(struct pager *p, int uffd, uint64_t addr)
{
	struct uffdio_zeropage z = {
		.range = { .start = addr, .len = PAGER_PAGE_SIZE },
	};

	for (int i = 0; i < UFFD_EAGAIN_RETRIES; i++) {
		if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0)
			return 0;
		if (errno == EEXIST) {
			p->eexist++;
			return uffd_wake(uffd, addr, PAGER_PAGE_SIZE);
		}
		if (errno != EAGAIN)
			return -errno;
	}
	return -EAGAIN;
}

/*
 * UFFDIO_COPY @len bytes to @addr.  Pages that turn out present (EEXIST:
 * written through a path that needs no fault) are skipped; the faulting
 * page is woken in any case.
 */
static int uffd_copy(struct pager *p, int uffd, uint64_t addr, const char *src,
		     uint64_t len, uint64_t fault_addr)
{
	uint64_t done = 0;
	bool skipped = false;
	int tries = 0;

	while (done < len) {
		struct uffdio_copy c = {
			.dst = addr + done, .src = (uint64_t)(uintptr_t)(src + done),
			.len = len - done,
		};

		if (ioctl(uffd, UFFDIO_COPY, &c) == 0) {
			done = len;
			break;
		}
		if (c.copy > 0)
			done += (uint64_t)c.copy;
		if (errno == EEXIST) {
			p->eexist++;
			skipped = true;
			done += PAGER_PAGE_SIZE;	/* skip the present page */
			continue;
		}
		if (errno == EAGAIN && ++tries < UFFD_EAGAIN_RETRIES)
			continue;
		return -errno;
	}
	/* UFFDIO_COPY wakes what it copied; a skipped page may be the one
	 * that faulted. */
	if (skipped)
		(void)uffd_wake(uffd, fault_addr & ~(uint64_t)(PAGER_PAGE_SIZE - 1),
				PAGER_PAGE_SIZE);
	return 0;
}

/* Serve an OFFLOADED page: claim, read, copy.  Called with the lock held;
 * returns with it held. */
static int serve_offloaded(struct fault_ctx *fc, struct pager_mapper *m,
			   struct pager_region *r, unsigned int ri, uint64_t pg,
			   uint64_t fault_addr)
{
	struct pager *p = fc->p;
	uint64_t around = p->cfg.fault_around_pages, start, n, host;
	int err;

	/* Sequential: the fault lands after the last run, at most a window
	 * beyond where it (and its readahead) ended; resident pages in
	 * between are skipped by the mapper without faults. */
	if (m->seq_window && pg > m->seq_start && pg < m->seq_next + m->seq_window) {
		/* A sequential stream: bring in a window twice the last one
		 * (like readahead), up to PAGER_MAX_FAULT_AROUND. */
		uint64_t window = (uint64_t)m->seq_window * 2;

		if (window > PAGER_MAX_FAULT_AROUND)
			window = PAGER_MAX_FAULT_AROUND;
		start = pg;
		n = pager_claim_run_locked(p, pg, window, 0);
		m->seq_window = (uint32_t)window;
	} else {
		/* Window: the aligned block of fault_around pages holding @pg,
		 * in its region; claim the offloaded run through @pg in it. */
		uint64_t wstart = pg - (pg - r->first_page) % around;
		uint64_t wend = wstart + around;

		if (wend > r->first_page + r->npages)
			wend = r->first_page + r->npages;
		start = pg;
		while (start > wstart && pg_state(p, start - 1) == PAGE_OFFLOADED)
			start--;
		n = pager_claim_run_locked(p, start, wend - start, 0);
		m->seq_window = (uint32_t)around;
	}
	m->seq_start = start;
	m->seq_next = start + n;
	if (m->seq_window > around && n) {
		/* sequential: have the next window read while this one is used */
		pager_readahead_locked(p, start + n, m->seq_window);
		m->seq_next = start + n + m->seq_window;
	}
	pthread_mutex_unlock(&p->lock);
	host = m->host_addr[ri] + (start - r->first_page) * PAGER_PAGE_SIZE;
	err = store_read(&p->store, fc->buf, n * PAGER_PAGE_SIZE, pg_store_off(start));
	if (!err)
		err = uffd_copy(p, m->uffd, host, fc->buf, n * PAGER_PAGE_SIZE,
				fault_addr);
	pthread_mutex_lock(&p->lock);
	if (err) {
		pager_finish_run_locked(p, start, n, false);
		return err;
	}
	pager_finish_run_locked(p, start, n, true);
	p->fault_pages += n;
	return 0;
}

static void handle_fault(struct fault_ctx *fc, struct pager_mapper *m,
			 uint64_t addr)
{
	struct pager *p = fc->p;
	struct pager_region *r = NULL;
	unsigned int ri;
	uint64_t pg, t0 = now_ns(), page_addr;
	int err = 0;

	for (ri = 0; ri < p->nr_regions; ri++) {
		if (m->host_addr[ri] && addr >= m->host_addr[ri] &&
		    addr - m->host_addr[ri] < p->regions[ri].size) {
			r = &p->regions[ri];
			break;
		}
	}
	page_addr = addr & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	if (!r) {
		log_warn(p->subject, "mapper pid %d: fault at %#llx outside guest RAM",
			 (int)m->pid, (unsigned long long)addr);
		(void)uffd_wake(m->uffd, page_addr, PAGER_PAGE_SIZE);
		return;
	}
	pg = r->first_page + (addr - m->host_addr[ri]) / PAGER_PAGE_SIZE;
	pthread_mutex_lock(&p->lock);
	while (pg_state(p, pg) == PAGE_IN_FLIGHT)
		pthread_cond_wait(&p->state_cv, &p->lock);
	switch (pg_state(p, pg)) {
	case PAGE_OFFLOADED:
		err = serve_offloaded(fc, m, r, ri, pg, addr);
		break;
	case PAGE_ZERO:
	case PAGE_RESIDENT:
		err = uffd_zeropage(p, m->uffd, page_addr);
		if (!err) {
			if (pg_state(p, pg) == PAGE_ZERO)
				p->zero_faults++;
			pg_set(p, pg, PAGE_RESIDENT);
			p->state[pg] |= PG_WS_CUR;
		}
		break;
	default:
		break;
	}
	if (err == -ENOENT) {
		/* the range is no longer registered (every page came back) or
		 * the mapping went: wake the faulter, its retry needs no uffd */
		(void)uffd_wake(m->uffd, page_addr, PAGER_PAGE_SIZE);
		err = 0;
	} else if (err == -ESRCH) {
		err = 0;	/* the process exited: not an error */
	}
	p->faults++;
	p->fault_lat_us[lat_bucket(now_ns() - t0)]++;
	pager_maybe_unregister_locked(p);
	pthread_mutex_unlock(&p->lock);
	if (err)
		log_err(p->subject, "mapper pid %d: fault at %#llx (page %llu): %s",
			(int)m->pid, (unsigned long long)addr,
			(unsigned long long)pg, strerror(-err));
}

static void serve_uffd(struct fault_ctx *fc, struct pager_mapper *m)
{
	struct uffd_msg msgs[FAULT_EVENTS_PER_READ];
	ssize_t n;

	for (;;) {
		n = read(m->uffd, msgs, sizeof(msgs));
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn(fc->p->subject, "mapper pid %d: read uffd: %s",
					 (int)m->pid, strerror(errno));
			return;
		}
		if (n == 0)
			return;
		atomic_fetch_add(&fc->p->faults_active, 1);
		atomic_fetch_add(&fc->p->fault_seq, 1);
		for (size_t i = 0; i < (size_t)n / sizeof(msgs[0]); i++) {
			if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
				continue;	/* no other events requested */
			handle_fault(fc, m, msgs[i].arg.pagefault.address);
		}
		atomic_fetch_sub(&fc->p->faults_active, 1);
		if ((size_t)n < sizeof(msgs))
			return;
	}
}

/* Rebuild the poll set; close and free mappers their owner removed. */
static nfds_t poll_set(struct fault_ctx *fc)
{
	struct pager *p = fc->p;
	struct pager_mapper **pp;
	nfds_t n = 1;

	fc->pfd[0] = (struct pollfd){ .fd = p->fault_wake_fd, .events = POLLIN };
	pthread_mutex_lock(&p->lock);
	for (pp = &p->mappers; *pp;) {
		struct pager_mapper *m = *pp;

		if (m->removed) {
			*pp = m->next;
			close(m->uffd);
			free(m);
			continue;
		}
		/* a dead (exited) mapper's events are drained, not served */
		fc->pfd[n] = (struct pollfd){ .fd = m->uffd, .events = POLLIN };
		fc->pm[n++] = m;
		pp = &m->next;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

static void *fault_main(void *arg)
{
	struct fault_ctx fc = { .p = arg };
	struct pager *p = fc.p;
	nfds_t n;

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), FAULT_THREAD_NICE) < 0)
		log_debug(p->subject, "fault thread: nice %d: %s", FAULT_THREAD_NICE,
			  strerror(errno));
	fc.buf = store_buf_alloc(PAGER_MAX_FAULT_AROUND * PAGER_PAGE_SIZE);
	if (!fc.buf) {
		log_err(p->subject, "fault thread: out of memory");
		return NULL;
	}
	n = poll_set(&fc);
	while (!atomic_load(&p->stop)) {
		if (poll(fc.pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err(p->subject, "fault thread: poll: %s", strerror(errno));
			break;
		}
		if (fc.pfd[0].revents) {
			uint64_t v;

			if (read(p->fault_wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
			n = poll_set(&fc);
			continue;
		}
		for (nfds_t i = 1; i < n; i++) {
			if (fc.pfd[i].revents & POLLIN)
				serve_uffd(&fc, fc.pm[i]);
			if (fc.pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				fc.pfd[i].events = 0;	/* stop polling a broken uffd */
		}
	}
	free(fc.buf);
	return NULL;
}

int pager_fault_thread_start(struct pager *p)
{
	int err = pthread_create(&p->fault_thread, NULL, fault_main, p);

	if (err)
		return -err;
	p->fault_thread_started = true;
	return 0;
}

void pager_fault_thread_stop(struct pager *p)
{
	if (!p->fault_thread_started)
		return;
	atomic_store(&p->stop, true);
	pager_fault_kick(p);
	pthread_join(p->fault_thread, NULL);
	p->fault_thread_started = false;
}
