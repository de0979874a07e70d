// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_fault.c - userfaultfd fault service: one thread per VM polls every
 * mapper's userfaultfd, reads events in batches and resolves each MISSING
 * fault by the page's state:
 *
 *   OFFLOADED  claim the contiguous offloaded run around it (fault-around:
 *              the aligned block of the adaptive window, see below; a
 *              window that doubles while a mapper faults sequentially),
 *              read it from the store, UFFDIO_COPY (wakes the faulter)
 *   ZERO       UFFDIO_ZEROPAGE
 *   RESIDENT   the page is present (another mapper or the prefetcher put
 *              it there: EEXIST -> UFFDIO_WAKE) or a hole (UFFDIO_ZEROPAGE)
 *   IN_FLIGHT  wait until its owner is done, then as above
 *
 * While writes are tracked a run comes back write-protected, but for a
 * write-hot run, a write stream's window and a write fault's page copied
 * alone (see PAGER_HOT_CYCLES in pager.h).
 *
 * Fault-around of a random (not sequential) fault maps only the faulting
 * page (UFFDIO_COPY); the other offloaded pages of its aligned block go
 * into the memfd unmapped (pwrite, as the prefetcher restores: CLEAN,
 * write-protected behind their punched entries' uffd-wp markers) and are
 * marked in p->fa.  A guest access to one is a minor fault the kernel
 * maps with no round trip here.  At each offload's cycle end
 * (pager_ws_cycle_end) the marked pages some mapper maps are hits, the
 * rest misses, and the window (p->fa_window, 1 .. fault_around_pages,
 * starting at 1) doubles or halves by what the hits spared (a fault's
 * service time each) against what the neighbours cost (their share of
 * the reads, measured here: pager_fa_cost_*_locked).  At window 1 nothing
 * is installed: a fault whose pair buddy page was touched earlier in the
 * cycle, or that continues a sequential stream, counts as a hit instead.
 * From a resume to its delivery (the resume-critical window), and in a
 * guest timer's cycle, a random fault reads its own page only and is not
 * counted: the guest's answer waits on it, and a timer's few scattered
 * faults say nothing of the commands'.
 *
 * From a resume to its delivery the store reads go in the delivery's I/O
 * class (enum pager_io_class; realtime by default), a fault's read-ahead
 * and fault-order runs on the prefetch thread too.
 *
 * A process that exited (ESRCH) is not an error: its mapper is dropped.
 * A fault that cannot be served (the store read or UFFDIO_COPY failed) is
 * never answered with zeros: the page stays OFFLOADED, the faulting thread
 * stays blocked, the error goes to the pager's error callback once, and
 * the fault is tried again every FAULT_RETRY_MS until it is served (the
 * store came back, or the page became resident another way) - for at most
 * pager_config.fault_error_timeout_ms.  A fault still failing then, or one
 * whose slot fails its checksum (-EBADMSG: retrying reads the same bytes),
 * loses the VM (pager_lose(): its processes are killed; nothing waits for
 * good).
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
#define FAULT_RETRY_MS		100	/* an unserved fault is tried again */
#define MAX_STUCK_FAULTS	256	/* unserved faults remembered */
/* UFFDIO_COPY/ZEROPAGE say EAGAIN while a VMM's munmap, mremap or
 * madvise is under way (its event not read yet): try again soon */
#define FAULT_EAGAIN_RETRY_MS	1

/* A fault that could not be served: its thread still waits. */
struct stuck_fault {
	struct pager_mapper *m;
	uint64_t addr;
	uint64_t since_ns;	/* when it first failed */
};

struct fault_ctx {
	struct pager *p;
	void *buf;			/* PAGER_MAX_FAULT_AROUND pages, aligned */
	struct pollfd pfd[PAGER_MAX_MAPPERS + 1];
	struct pager_mapper *pm[PAGER_MAX_MAPPERS + 1];
	struct stuck_fault stuck[MAX_STUCK_FAULTS];
	unsigned int nstuck;
	uint64_t retry_at_ns;
	bool random;			/* this fault was served as a random one */
	struct pager_ioprio io;		/* its store reads' I/O priority */
};

void pager_fault_kick(struct pager *p)
{
	uint64_t one = 1;

	if (write(p->fault_wake_fd, &one, sizeof(one)) < 0)
		log_warn(p->subject, "fault thread kick: %s", strerror(errno));
}

/*
 * At the thread's start: if cfg.delivery_io_class asks for the realtime
 * class for a delivery's reads, try it once (and put the thread back as
 * it ran) to learn whether the kernel permits it.  What is in effect,
 * and why it differs from what was asked, go to the stats; a refusal is
 * logged once per VM.
 */
static void delivery_io_init(struct fault_ctx *fc)
{
	struct pager *p = fc->p;
	const char *why;

	pager_ioprio_init(&fc->io);
	if (p->cfg.delivery_io_class != PAGER_IO_REALTIME)
		return;		/* p->dlv_io_class stays inherit */
	if (pager_ioprio_set(PAGER_IO_RT_PRIO)) {
		why = errno == EPERM ?
		      "realtime refused: vmnapd lacks CAP_SYS_ADMIN and CAP_SYS_NICE" :
		      "realtime refused by the kernel";
		log_warn(p->subject, "fault thread: %s (%s): a delivery's store reads queue "
			 "behind other I/O", why, strerror(errno));
		atomic_store(&p->dlv_io_reason, why);
		return;
	}
	fc->io.now = PAGER_IO_RT_PRIO;
	atomic_store(&p->dlv_io_class, PAGER_IO_REALTIME);
	pager_ioprio_for(p, &fc->io, false);	/* back as it ran */
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

/* Lock not held: an EEXIST is counted in *@eexist, added under the lock.
 * @exposed non-NULL: a page found present is write-protected in this
 * mapping before its faulter is woken (wp_sync, a CLEAN page: its first
 * write must fault even where the mapping's entry lost its uffd-wp
 * marker); *@exposed set if that failed. */
static int uffd_zeropage(int uffd, uint64_t addr, uint64_t *eexist, bool *exposed)
{
	struct uffdio_zeropage z = {
		.range = { .start = addr, .len = PAGER_PAGE_SIZE },
	};
	struct uffdio_writeprotect wp = {
		.range = z.range, .mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};

	for (int i = 0; i < UFFD_EAGAIN_RETRIES; i++) {
		if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0)
			return 0;
		if (errno == EEXIST) {
			(*eexist)++;
			if (exposed && ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
				*exposed = true;
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
 * page is woken in any case.  Lock not held: EEXISTs are counted in
 * *@eexist.
 */
static int uffd_copy(int uffd, uint64_t addr, const char *src, uint64_t len,
		     uint64_t fault_addr, uint64_t *eexist, bool wp)
{
	uint64_t done = 0;
	bool skipped = false;
	int tries = 0;

	while (done < len) {
		struct uffdio_copy c = {
			.dst = addr + done, .src = (uint64_t)(uintptr_t)(src + done),
			.len = len - done,
			/* tracked: the page comes back write-protected, so
			 * its first write shows in the next scan */
			.mode = wp ? UFFDIO_COPY_MODE_WP : 0,
		};

		if (ioctl(uffd, UFFDIO_COPY, &c) == 0) {
			done = len;
			break;
		}
		if (c.copy > 0)
			done += (uint64_t)c.copy;
		if (errno == EEXIST) {
			(*eexist)++;
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

/* UFFDIO_COPY the @n pages at @src to @addr as @w planned: each stretch
 * of pages alike writable or protected, in order (uffd_copy). */
static int uffd_copy_plan(int uffd, uint64_t addr, const char *src, uint64_t n,
			  uint64_t fault_addr, uint64_t *eexist, const struct pager_wplan *w)
{
	for (uint64_t i = 0, j; i < n; i = j) {
		uint64_t off = i * PAGER_PAGE_SIZE;
		int err;

		j = pager_wplan_stretch(w, i, n);
		err = uffd_copy(uffd, addr + off, src + off, (j - i) * PAGER_PAGE_SIZE,
				fault_addr, eexist, pager_wplan_wp(w, i));
		if (err)
			return err;
	}
	return 0;
}

/* pwrite the claimed run [start, start+n) read into @buf, but page @pg,
 * into @r's memfd.  Lock not held.  0 or -errno (what was written stays:
 * its UFFDIO_COPY finds it present). */
static int install_neighbours(const struct pager_region *r, uint64_t start,
			      uint64_t n, uint64_t pg, const void *buf)
{
	const struct { uint64_t at, len; } part[2] = {
		{ start, pg - start }, { pg + 1, start + n - pg - 1 },
	};

	for (int i = 0; i < 2; i++) {
		size_t len = part[i].len * PAGER_PAGE_SIZE;
		ssize_t w;

		if (!len)
			continue;
		w = pwrite(r->memfd, (const char *)buf + (part[i].at - start) * PAGER_PAGE_SIZE,
			   len, (off_t)pg_memfd_off(r, part[i].at));
		if (w < 0)
			return -errno;
		if ((size_t)w != len)
			return -EIO;
	}
	return 0;
}

/*
 * A fault on a ZERO page is the guest writing memory it has just taken
 * from its free lists.  A huge page is cleared whole, from its last
 * subpage down to the one it was faulted for, and a free block split into
 * small pages is handed out in ascending order; one page per fault would
 * make such a stream cost one userfaultfd round trip per page.  So a fault
 * just below or just above the mapper's last zero-filled run fills twice
 * that run (up to PAGER_MAX_FAULT_AROUND) of the ZERO pages next to it in
 * that direction, with one UFFDIO_ZEROPAGE, never outside the 2 MiB
 * block of the memfd holding @pg (the guest's huge page in QEMU's
 * layout; a stream that goes on into the next block starts there again
 * at one page).  A page filled and never used is a zero page again at the
 * next offload.  Lock held on entry and on return; 0 if @pg was served,
 * else 1: serve it alone.
 */
#define ZERO_BLOCK_PAGES	512	/* 2 MiB */

static int serve_zero_run(struct pager_mapper *m, struct pager *p,
			  const struct pager_region *r, unsigned int ri, uint64_t pg)
{
	uint64_t last = m->zhi - m->zlo, want, lo = pg, hi = pg + 1, blk, blk_lo, blk_hi;
	struct uffdio_zeropage z;
	uint64_t done;
	bool up, down;

	/* a stream that leaves its block starts again at one page */
	blk = pg_memfd_off(r, pg) / PAGER_PAGE_SIZE % ZERO_BLOCK_PAGES;
	up = last && pg == m->zhi && blk != 0;
	down = last && pg + 1 == m->zlo && blk != ZERO_BLOCK_PAGES - 1;
	if (!up && !down) {
		m->zlo = pg;	/* served alone: a run of one */
		m->zhi = pg + 1;
		return 1;
	}
	want = last * 2 > PAGER_MAX_FAULT_AROUND ? PAGER_MAX_FAULT_AROUND : last * 2;
	blk_lo = pg - blk > r->first_page ? pg - blk : r->first_page;
	blk_hi = pg - blk + ZERO_BLOCK_PAGES;
	if (blk_hi > r->first_page + r->npages)
		blk_hi = r->first_page + r->npages;
	while (up && hi < blk_hi && hi - lo < want && pg_state(p, hi) == PAGE_ZERO)
		hi++;
	while (down && lo > blk_lo && hi - lo < want && pg_state(p, lo - 1) == PAGE_ZERO)
		lo--;
	m->zlo = lo;
	m->zhi = hi;
	if (hi - lo == 1)
		return 1;
	for (uint64_t i = lo; i < hi; i++)
		pg_set(p, i, PAGE_IN_FLIGHT);
	pthread_mutex_unlock(&p->lock);
	z = (struct uffdio_zeropage){ .range = {
		.start = m->host_addr[ri] + (lo - r->first_page) * PAGER_PAGE_SIZE,
		.len = (hi - lo) * PAGER_PAGE_SIZE } };
	/* wakes what it filled; partly done (-EAGAIN, a page present):
	 * .zeropage says how much */
	if (ioctl(m->uffd, UFFDIO_ZEROPAGE, &z) == 0)
		done = hi - lo;
	else
		done = z.zeropage > 0 ? (uint64_t)z.zeropage / PAGER_PAGE_SIZE : 0;
	pthread_mutex_lock(&p->lock);
	for (uint64_t i = lo; i < hi; i++) {
		pg_set(p, i, i < lo + done ? PAGE_RESIDENT : PAGE_ZERO);
		if (i < lo + done)
			p->state[i] |= PG_WS_CUR;
	}
	pthread_cond_broadcast(&p->state_cv);
	if (pg >= lo + done) {
		p->zero_ahead += done;
		return 1;	/* the faulting page was not filled */
	}
	p->zero_faults++;
	p->zero_ahead += done - 1;
	return 0;
}

/* Serve an OFFLOADED page: claim, read, copy.  @write: the fault is a
 * write.  Called with the lock held; returns with it held. */
static int serve_offloaded(struct fault_ctx *fc, struct pager_mapper *m,
			   struct pager_region *r, unsigned int ri, uint64_t pg,
			   uint64_t fault_addr, bool write)
{
	struct pager *p = fc->p;
	uint64_t around, start, n, host, eexist = 0, t_read, t_inst = 0;
	bool wp = m->wp, seq = false, wstream = false, wpage, spread, fa_on, urgent;
	struct pager_wplan plan = { .how = PAGER_WMAP_PROTECTED };
	struct pager_stream cur = { 0 };
	unsigned int k;
	int err;

	/* Fault-around serves the agent's commands: from a resume to its
	 * delivery the guest's answer waits on every fault (the
	 * resume-critical set is what spares these faults next time), and a
	 * guest timer's cycle touches a few scattered pages.  There each
	 * fault reads its own page only, and is no evidence for the window. */
	fa_on = p->cycle_data && !p->crit_recording;
	around = fa_on ? p->fa_window : 1;
	/* Sequential: the fault lands after the last run of one of the
	 * streams, at most a window beyond where it (and its readahead)
	 * ended; resident pages in between are skipped by the mapper without
	 * faults. */
	for (k = 0; k < PAGER_STREAMS; k++)
		if (m->seq[k].window && pg > m->seq[k].start &&
		    pg < m->seq[k].next + m->seq[k].window)
			break;
	if (k < PAGER_STREAMS) {
		/* A sequential stream: bring in a window twice the last one
		 * (like readahead), up to PAGER_MAX_FAULT_AROUND. */
		uint64_t window = (uint64_t)m->seq[k].window * 2;

		if (window > PAGER_MAX_FAULT_AROUND)
			window = PAGER_MAX_FAULT_AROUND;
		start = pg;
		n = pager_claim_run_locked(p, pg, window, 0);
		cur.window = (uint32_t)window;
		seq = true;
		p->seq_faults++;
		if (fa_on && around == 1) {	/* neighbours used: a hit at window 1 */
			p->fa_w1_faults++;
			p->fa_w1_near++;
		}
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
		/* a new stream may start here: it takes the least recent's place */
		k = PAGER_STREAMS - 1;
		cur.window = (uint32_t)around;
		if (fa_on && around == 1) {
			uint64_t buddy = r->first_page + ((pg - r->first_page) ^ 1);

			p->fa_w1_faults++;
			if (buddy < r->first_page + r->npages &&
			    (p->state[buddy] & PG_WS_CUR))
				p->fa_w1_near++;
		}
	}
	cur.start = start;
	cur.next = start + n;
	/* recorded now, not once served: UFFDIO_COPY wakes the faulter, which
	 * may have the resume delivered before this thread retakes the lock */
	pager_critical_note_locked(p, start, n);
	if (pager_follow_fault_locked(p, pg, start, n))
		pthread_cond_broadcast(&p->prefetch_cv);
	/* a write stream: at least half of the stream's last run, as far as
	 * it went through it, is written already (the guest fills or
	 * rewrites memory in order), so its window and read-ahead come back
	 * writable, as a run of write-hot pages does.  Only that run is
	 * evidence: its pages came from the store, protected unless known
	 * written, where a zero page the stream crossed was filled writable
	 * by its own fault, written or not; nor are the pages of that run
	 * that came back writable on their block's sample (they show as
	 * written; the sample is their evidence).  A stream found writing
	 * stays one: its runs, writable, show no more. */
	if (seq && wp && !p->offloading) {
		const struct pager_stream *s = &m->seq[k];
		uint64_t went = (s->end < pg ? s->end : pg) - s->start;
		uint64_t vouched = went ? pager_hot_vouched_locked(p, s->start, went) : 0;
		uint64_t written = went > vouched ?
				   pager_dirty_written_locked(p, m, s->start, went) : 0;

		written = written > vouched ? written - vouched : 0;
		wstream = s->write || (went > vouched && 2 * written >= went - vouched);
	}
	cur.end = start + n;
	cur.write = wstream;
	/* writable: a run of write-hot pages (but for samples), or a write
	 * stream's */
	if (wp)
		pager_wmap_locked(p, start, n, wstream, &plan);
	if (plan.how != PAGER_WMAP_PROTECTED)
		wp = false;
	if (cur.window > around && n) {
		/* sequential: have the next window read while this one is used */
		pager_critical_note_readahead_locked(p, start + n, cur.window);
		pager_readahead_locked(p, m, start + n, cur.window, wstream);
		cur.next = start + n + cur.window;
	}
	/* the streams, most recent first */
	memmove(&m->seq[1], &m->seq[0], k * sizeof(m->seq[0]));
	m->seq[0] = cur;
	/* random: the neighbours go into the memfd unmapped (a write-hot run
	 * is mapped whole and writable: its pages are known used) */
	spread = !seq && n > 1 && r->memfd >= 0 && wp == m->wp;
	/* a write fault's page copied alone comes back writable: protected,
	 * the write would fault again at once */
	wpage = wp && !(write && !p->offloading && (spread || n == 1));
	urgent = p->crit_recording;
	pthread_mutex_unlock(&p->lock);
	host = m->host_addr[ri] + (start - r->first_page) * PAGER_PAGE_SIZE;
	pager_ioprio_for(p, &fc->io, urgent);
	t_read = now_ns();
	err = store_read(&p->store, fc->buf, n * PAGER_PAGE_SIZE, pg_store_off(start));
	t_read = now_ns() - t_read;
	if (!err && spread) {
		t_inst = now_ns();
		if (install_neighbours(r, start, n, pg, fc->buf))
			spread = false;	/* mapped whole below (EEXIST for those put in) */
		t_inst = now_ns() - t_inst;
	}
	if (!err && spread)
		err = uffd_copy(m->uffd, host + (pg - start) * PAGER_PAGE_SIZE,
				(const char *)fc->buf + (pg - start) * PAGER_PAGE_SIZE,
				PAGER_PAGE_SIZE, fault_addr, &eexist, wpage);
	else if (!err && plan.how == PAGER_WMAP_SAMPLED)
		err = uffd_copy_plan(m->uffd, host, fc->buf, n, fault_addr, &eexist, &plan);
	else if (!err)
		err = uffd_copy(m->uffd, host, fc->buf, n * PAGER_PAGE_SIZE,
				fault_addr, &eexist, n == 1 ? wpage : wp);
	pthread_mutex_lock(&p->lock);
	p->eexist += eexist;
	p->fault_read_ns_sum += t_read;
	if (!err)
		pager_fa_cost_read_locked(p, n, t_read + t_inst);
	fc->random = !seq;
	if (err) {
		pager_finish_run_locked(p, start, n, false);
		return err;
	}
	pager_finish_run_locked(p, start, n, true);
	if (plan.how != PAGER_WMAP_PROTECTED) {
		pager_wmap_done_locked(p, start, n, &plan);
	} else if (wp && !wpage) {	/* written now: and hot */
		pager_dirty_note_locked(p, pg);
		pager_hot_renew_locked(p, pg);
		p->dirty_wfault++;
	}
	/* touched: the page; its fault-around neighbours only came along
	 * (touched once a mapper maps them, like a background restore), but
	 * a sequential stream goes on through its whole window */
	for (uint64_t i = seq ? start : pg; i < (seq ? start + n : pg + 1); i++)
		p->state[i] |= PG_WS_CUR;
	for (uint64_t i = start; spread && i < start + n; i++)
		if (i != pg) {
			p->state[i] |= PG_BG;
			p->fa[i] = FA_AROUND;
		}
	if (spread)
		p->fa_installed += n - 1;
	p->fault_pages += n;
	return 0;
}

/* Does the memfd hold page @pg (not a hole)?  Lock not held; the page is
 * claimed.  An anonymous region cannot tell: true. */
static bool page_in_memfd(struct pager *p, uint64_t pg)
{
	const struct pager_region *r = pg_region(p, pg);
	off_t off;

	if (!r || r->memfd < 0)
		return true;
	off = (off_t)pg_memfd_off(r, pg);
	return lseek(r->memfd, off, SEEK_DATA) == off;
}

/*
 * A write to a write-protected page (dirty tracking wp_sync): the page is
 * dirty.  A page in flight is waited for first - an offload writing it out
 * must not punch it after this write.  Then the write goes through
 * (unprotect, which wakes the writer), with the page claimed meanwhile: an
 * offload that claimed it between the check and the unprotect would read
 * it, let the write through and punch it - the write lost.  A page punched
 * while the write waited (OFFLOADED or ZERO, a hole of the memfd) is left
 * protected: its entry in this mapper is a write-protect marker now, and
 * unprotecting would drop it, so that a copy put back through the memfd
 * (readahead, prefetch, make_resident) would be mapped writable with no
 * fault while CLEAN - its next write never seen, the page punched with a
 * stale slot.  Its writer is woken and faults it back in.  Protected pages
 * of an untracked VM (tracking fell back) are let through.
 */
static void handle_wp_fault(struct fault_ctx *fc, struct pager_mapper *m, uint64_t addr)
{
	struct pager *p = fc->p;
	uint64_t page_addr = addr & ~(uint64_t)(PAGER_PAGE_SIZE - 1), pg = 0;
	struct uffdio_writeprotect wp = {
		.range = { .start = page_addr, .len = PAGER_PAGE_SIZE },
	};
	enum pager_page_state was = PAGE_RESIDENT;
	bool found = false, claimed = false, unprotect = true, woken = false;

	for (unsigned int ri = 0; ri < p->nr_regions && !found; ri++)
		if (m->host_addr[ri] && addr >= m->host_addr[ri] + m->map_lo[ri] &&
		    addr < m->host_addr[ri] + m->map_hi[ri]) {
			pg = p->regions[ri].first_page + (addr - m->host_addr[ri]) / PAGER_PAGE_SIZE;
			found = true;
		}
	pthread_mutex_lock(&p->lock);
	if (found && p->track == PAGER_DIRTY_WP_SYNC) {
		while (pg_state(p, pg) == PAGE_IN_FLIGHT)
			pthread_cond_wait(&p->state_cv, &p->lock);
		if (pager_dirty_note_locked(p, pg)) {
			p->dirty_scanned++;
			pager_hot_renew_locked(p, pg);
		}
		was = pg_state(p, pg);	/* CLEAN no more */
		pg_set(p, pg, PAGE_IN_FLIGHT);
		claimed = true;
		p->state[pg] |= PG_WS_CUR;	/* written: touched */
		p->dirty_wp_faults++;
	}
	pthread_mutex_unlock(&p->lock);
	if (was == PAGE_OFFLOADED || was == PAGE_ZERO)
		unprotect = page_in_memfd(p, pg);	/* a hole: punched */
	for (int i = 0; unprotect && i < UFFD_EAGAIN_RETRIES; i++) {
		woken = ioctl(m->uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
		if (woken || errno != EAGAIN)
			break;
	}
	if (!woken)
		(void)uffd_wake(m->uffd, page_addr, PAGER_PAGE_SIZE);
	if (claimed) {
		pthread_mutex_lock(&p->lock);
		pg_set(p, pg, was);
		pthread_cond_broadcast(&p->state_cv);
		pthread_mutex_unlock(&p->lock);
	}
}

/*
 * Serve the fault at @addr (@write: a write fault); 0 when served (or
 * nothing to serve), else -errno and the faulting thread still waits.
 * @retry: a stuck fault tried again (not counted as a new fault, not
 * logged again).
 */
static int handle_fault(struct fault_ctx *fc, struct pager_mapper *m,
			uint64_t addr, bool write, bool retry)
{
	struct pager *p = fc->p;
	struct pager_region *r = NULL;
	enum pager_page_state was;
	unsigned int ri;
	uint64_t pg, t0 = now_ns(), t_locked, seq0, page_addr, eexist = 0;
	bool unregister, protect, exposed = false;
	int err = 0;

	/* the ranges change only on this thread (events): read unlocked */
	for (ri = 0; ri < p->nr_regions; ri++) {
		if (m->host_addr[ri] && addr >= m->host_addr[ri] + m->map_lo[ri] &&
		    addr < m->host_addr[ri] + m->map_hi[ri]) {
			r = &p->regions[ri];
			break;
		}
	}
	page_addr = addr & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	if (!r) {
		log_warn(p->subject, "mapper pid %d: fault at %#llx outside guest RAM",
			 (int)m->pid, (unsigned long long)addr);
		(void)uffd_wake(m->uffd, page_addr, PAGER_PAGE_SIZE);
		return 0;
	}
	pg = r->first_page + (addr - m->host_addr[ri]) / PAGER_PAGE_SIZE;
	pthread_mutex_lock(&p->lock);
	t_locked = now_ns();
	seq0 = p->seq_faults;
	fc->random = false;
	/* counted before the faulter is woken (UFFDIO_COPY, ZEROPAGE, WAKE):
	 * what it does next (a delivery, a stats read) sees this fault */
	if (!retry) {
		p->faults++;
		p->fault_lock_ns_sum += t_locked - t0;
		if (p->crit_recording)
			p->crit_window_faults++;
	} else {
		p->fault_retries++;
	}
	if (pg_state(p, pg) == PAGE_IN_FLIGHT) {
		/* being read back (readahead, prefetch): the guest needs it now */
		pager_critical_note_locked(p, pg, 1);
		while (pg_state(p, pg) == PAGE_IN_FLIGHT)
			pthread_cond_wait(&p->state_cv, &p->lock);
		if (!retry) {
			p->fault_in_flight_faults++;
			p->fault_in_flight_ns_sum += now_ns() - t_locked;
		}
	}
	switch (pg_state(p, pg)) {
	case PAGE_OFFLOADED:
		err = serve_offloaded(fc, m, r, ri, pg, addr, write);
		break;
	case PAGE_ZERO:
		if (!serve_zero_run(m, p, r, ri, pg))
			break;	/* else the page alone: */
		/* fall through */
	case PAGE_RESIDENT:
	case PAGE_CLEAN:	/* another mapper's fault brought it: EEXIST */
		/* a hole of the memfd: zero is its content (EEXIST: present);
		 * claimed while the ioctl runs, so nothing punches or stores
		 * the page meanwhile */
		was = pg_state(p, pg);
		protect = was == PAGE_CLEAN && m->wp && p->track == PAGER_DIRTY_WP_SYNC;
		pg_set(p, pg, PAGE_IN_FLIGHT);
		pthread_mutex_unlock(&p->lock);
		err = uffd_zeropage(m->uffd, page_addr, &eexist, protect ? &exposed : NULL);
		pthread_mutex_lock(&p->lock);
		p->eexist += eexist;
		if (!err) {
			if (was == PAGE_ZERO)
				p->zero_faults++;
			/* a CLEAN page found present stays CLEAN; one that
			 * was a hole (punched behind the pager) is zero now */
			pg_set(p, pg, was == PAGE_CLEAN && eexist && !exposed ? PAGE_CLEAN :
			       PAGE_RESIDENT);
			p->state[pg] |= PG_WS_CUR;
		} else {
			pg_set(p, pg, was);
		}
		pthread_cond_broadcast(&p->state_cv);
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
	if (!retry) {
		uint64_t lat = now_ns() - t0;

		p->fault_lat_us[lat_bucket(lat)]++;
		p->fault_lat_ns_sum += lat;
		if (p->seq_faults != seq0)
			p->fault_seq_ns_sum += lat;
		if (fc->random && !err)
			pager_fa_cost_fault_locked(p, lat);
	}
	unregister = pager_unregister_due_locked(p);
	pthread_mutex_unlock(&p->lock);
	if (unregister)
		pager_maybe_unregister(p);
	if (err == -EAGAIN)
		return err;	/* the VMM's mm is changing: retried, not an error */
	if (err && !retry) {
		log_err(p->subject, "mapper pid %d: fault at %#llx (page %llu) not served: %s; "
			"the faulting thread waits, retried every %d ms",
			(int)m->pid, (unsigned long long)addr, (unsigned long long)pg,
			strerror(-err), FAULT_RETRY_MS);
		pager_report_error(p, err, "fault");
	} else if (!err && retry) {
		log_info(p->subject, "mapper pid %d: fault at %#llx served on retry",
			 (int)m->pid, (unsigned long long)addr);
	}
	return err;
}

static void stuck_count(struct fault_ctx *fc)
{
	pthread_mutex_lock(&fc->p->lock);
	fc->p->faults_stuck = fc->nstuck;
	pthread_mutex_unlock(&fc->p->lock);
}

/* The VM cannot go on: a fault failed with @err since @since_ns. */
static bool fault_hopeless(struct fault_ctx *fc, int err, uint64_t since_ns)
{
	uint32_t limit = fc->p->cfg.fault_error_timeout_ms;

	if (err == -EAGAIN)
		return false;	/* the VMM's mm is changing: not a store error */
	if (err == -EBADMSG)
		return true;	/* the slot's bytes are wrong: a re-read is too */
	return limit && now_ns() - since_ns >= limit * 1000000ull;
}

/* Remember an unserved fault (handle_fault's -errno @err, failing since
 * @since_ns) for a retry; or lose the VM if there is no hope. */
static void stuck_add(struct fault_ctx *fc, struct pager_mapper *m, uint64_t addr,
		      int err, uint64_t since_ns)
{
	uint64_t soon = now_ns() + FAULT_EAGAIN_RETRY_MS * 1000000ull;

	if (fault_hopeless(fc, err, since_ns)) {
		log_err(fc->p->subject, "mapper pid %d: fault at %#llx: %s%s", (int)m->pid,
			(unsigned long long)addr, strerror(-err),
			err == -EBADMSG ? " (checksum mismatch)" :
			" for longer than fault_error_timeout_ms");
		pager_lose(fc->p, err);
	}
	for (unsigned int i = 0; i < fc->nstuck; i++)
		if (fc->stuck[i].m == m && fc->stuck[i].addr == addr)
			return;
	if (fc->nstuck == MAX_STUCK_FAULTS) {
		log_err(fc->p->subject, "more than %d unserved faults: fault at %#llx is "
			"retried only when it faults again", MAX_STUCK_FAULTS,
			(unsigned long long)addr);
		return;
	}
	if (!fc->nstuck)
		fc->retry_at_ns = now_ns() + FAULT_RETRY_MS * 1000000ull;
	if (err == -EAGAIN && fc->retry_at_ns > soon)
		fc->retry_at_ns = soon;
	fc->stuck[fc->nstuck++] = (struct stuck_fault){
		.m = m, .addr = addr, .since_ns = since_ns,
	};
	stuck_count(fc);
}

static bool pager_is_lost(struct pager *p)
{
	bool lost;

	pthread_mutex_lock(&p->lock);
	lost = p->lost_err != 0;
	pthread_mutex_unlock(&p->lock);
	return lost;
}

/* Try every stuck fault again once its time has come (not once the VM is
 * lost: its threads wait to be killed). */
static void stuck_retry(struct fault_ctx *fc)
{
	struct stuck_fault again[MAX_STUCK_FAULTS];
	unsigned int n = fc->nstuck;

	if (!n || now_ns() < fc->retry_at_ns)
		return;
	if (pager_is_lost(fc->p)) {
		fc->retry_at_ns = UINT64_MAX;
		return;
	}
	memcpy(again, fc->stuck, n * sizeof(again[0]));
	fc->nstuck = 0;
	for (unsigned int i = 0; i < n; i++) {
		/* as a read: protected if tracked, its write faults again */
		int err = handle_fault(fc, again[i].m, again[i].addr, false, true);

		if (err)
			stuck_add(fc, again[i].m, again[i].addr, err, again[i].since_ns);
	}
	stuck_count(fc);
}

/* Poll timeout: until the next retry of a stuck fault, or forever. */
static int poll_timeout_ms(const struct fault_ctx *fc)
{
	uint64_t now = now_ns();

	if (!fc->nstuck || fc->retry_at_ns == UINT64_MAX)
		return -1;
	if (fc->retry_at_ns <= now)
		return 0;
	return (int)((fc->retry_at_ns - now + 999999) / 1000000);
}

/* Region @i's live part in @m's address space: [*lo, *hi); false if none. */
static bool mapper_window(struct pager_mapper *m, unsigned int i, uint64_t *lo,
			  uint64_t *hi)
{
	if (!m->host_addr[i] || m->map_hi[i] <= m->map_lo[i])
		return false;
	*lo = m->host_addr[i] + m->map_lo[i];
	*hi = m->host_addr[i] + m->map_hi[i];
	return true;
}

/*
 * UFFD_EVENT_REMOVE: the VMM discarded [start, end) of its mapping
 * (MADV_DONTNEED or MADV_REMOVE; QEMU's balloon and virtio-mem discard by
 * punching the memfd and then MADV_DONTNEED).  Its pages become ZERO: what
 * the store holds for them is dropped and never restored over the range.
 */
static void event_remove(struct fault_ctx *fc, struct pager_mapper *m,
			 uint64_t start, uint64_t end)
{
	struct pager *p = fc->p;
	uint64_t removed = 0;

	start = (start + PAGER_PAGE_SIZE - 1) & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	end &= ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	for (unsigned int i = 0; i < p->nr_regions && start < end; i++) {
		const struct pager_region *r = &p->regions[i];
		uint64_t lo, hi, s, e;
		int err;

		if (!mapper_window(m, i, &lo, &hi))
			continue;
		s = start > lo ? start : lo;
		e = end < hi ? end : hi;
		if (s >= e)
			continue;
		err = pager_discard_run(p, r->first_page + (s - m->host_addr[i]) / PAGER_PAGE_SIZE,
					(e - s) / PAGER_PAGE_SIZE, &p->vmm_removed_pages);
		if (err)
			log_warn(p->subject, "mapper pid %d: discarding %#llx+%#llx: %s",
				 (int)m->pid, (unsigned long long)s,
				 (unsigned long long)(e - s), strerror(-err));
		removed += (e - s) / PAGER_PAGE_SIZE;
	}
	log_debug(p->subject, "mapper pid %d: VMM discarded %#llx..%#llx: %llu page(s) "
		  "of guest RAM now zero", (int)m->pid, (unsigned long long)start,
		  (unsigned long long)end, (unsigned long long)removed);
	pager_maybe_unregister(p);
}

/*
 * Cut [start, end) out of @m's ranges (UNMAP, or the source of a partial
 * REMAP).  A cut in the middle of a region keeps its larger side; the
 * smaller one is unregistered so that its faults do not come here (they
 * would belong to no range).  p->reg_lock held, p->lock not.
 */
static void mapper_cut(struct pager *p, struct pager_mapper *m, uint64_t start,
		       uint64_t end, const char *why)
{
	struct uffdio_range drop[PAGER_MAX_REGIONS];
	bool gone[PAGER_MAX_REGIONS] = { false };
	unsigned int ndrop = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions; i++) {
		uint64_t lo, hi, s, e, host = m->host_addr[i];

		if (!mapper_window(m, i, &lo, &hi))
			continue;
		s = start > lo ? start : lo;
		e = end < hi ? end : hi;
		if (s >= e)
			continue;
		if (s == lo && e == hi) {
			m->host_addr[i] = 0;
			m->map_lo[i] = m->map_hi[i] = 0;
			gone[i] = true;
		} else if (s == lo) {
			m->map_lo[i] = e - host;
		} else if (e == hi) {
			m->map_hi[i] = s - host;
		} else if (s - lo >= hi - e) {
			drop[ndrop++] = (struct uffdio_range){ .start = e, .len = hi - e };
			m->map_hi[i] = s - host;
		} else {
			drop[ndrop++] = (struct uffdio_range){ .start = lo, .len = s - lo };
			m->map_lo[i] = e - host;
		}
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions; i++)
		if (gone[i])
			log_info(p->subject, "mapper pid %d: region %u (gpa %#llx) %s: no "
				 "longer served in this mapper", (int)m->pid, i,
				 (unsigned long long)p->regions[i].gpa, why);
	for (unsigned int k = 0; k < ndrop; k++) {
		log_err(p->subject, "mapper pid %d: %s split guest RAM at %#llx+%#llx: "
			"%#llx+%#llx is no longer served in this mapper", (int)m->pid, why,
			(unsigned long long)start, (unsigned long long)(end - start),
			(unsigned long long)drop[k].start, (unsigned long long)drop[k].len);
		(void)ioctl(m->uffd, UFFDIO_UNREGISTER, &drop[k]);
		(void)ioctl(m->uffd, UFFDIO_WAKE, &drop[k]);
	}
}

/* UFFD_EVENT_UNMAP: [start, end) of @m's mapping is gone (memory unplug,
 * the VMM exiting); the pager keeps serving the rest and other mappers. */
static void event_unmap(struct fault_ctx *fc, struct pager_mapper *m,
			uint64_t start, uint64_t end)
{
	struct pager *p = fc->p;

	pthread_mutex_lock(&p->reg_lock);
	mapper_cut(p, m, start, end, "unmapped");
	pthread_mutex_lock(&p->lock);
	p->vmm_unmaps++;
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->reg_lock);
}

/*
 * UFFD_EVENT_REMAP: [from, from+len) of @m's mapping moved to @to (mremap;
 * the kernel keeps the moved range registered).  A region whose live part
 * moved whole follows it; a part of one that moved is cut from it (and
 * unregistered at its new place).
 */
static void event_remap(struct fault_ctx *fc, struct pager_mapper *m,
			uint64_t from, uint64_t to, uint64_t len)
{
	struct pager *p = fc->p;
	uint64_t moved_from[PAGER_MAX_REGIONS] = { 0 };
	bool partial = false;

	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions; i++) {
		uint64_t lo, hi;

		if (!mapper_window(m, i, &lo, &hi) || hi <= from || lo >= from + len)
			continue;
		if (lo >= from && hi <= from + len) {
			m->host_addr[i] = m->host_addr[i] - from + to;
			moved_from[i] = lo;
		} else {
			partial = true;
		}
	}
	p->vmm_remaps++;
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions; i++)
		if (moved_from[i])
			log_info(p->subject, "mapper pid %d: region %u (gpa %#llx) moved "
				 "%#llx -> %#llx", (int)m->pid, i,
				 (unsigned long long)p->regions[i].gpa,
				 (unsigned long long)moved_from[i],
				 (unsigned long long)(moved_from[i] - from + to));
	if (partial) {
		struct uffdio_range moved = { .start = to, .len = len };

		mapper_cut(p, m, from, from + len, "remapped in part");
		(void)ioctl(m->uffd, UFFDIO_UNREGISTER, &moved);
		(void)ioctl(m->uffd, UFFDIO_WAKE, &moved);
	}
	pthread_mutex_unlock(&p->reg_lock);
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
			const struct uffd_msg *msg = &msgs[i];
			int err;

			switch (msg->event) {
			case UFFD_EVENT_PAGEFAULT:
				if (msg->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
					handle_wp_fault(fc, m, msg->arg.pagefault.address);
					break;
				}
				if (pager_is_lost(fc->p))
					break;	/* its processes are being killed */
				err = handle_fault(fc, m, msg->arg.pagefault.address,
						   msg->arg.pagefault.flags &
						   UFFD_PAGEFAULT_FLAG_WRITE, false);
				if (err)
					stuck_add(fc, m, msg->arg.pagefault.address, err,
						  now_ns());
				break;
			case UFFD_EVENT_REMOVE:
				event_remove(fc, m, msg->arg.remove.start, msg->arg.remove.end);
				break;
			case UFFD_EVENT_UNMAP:
				event_unmap(fc, m, msg->arg.remove.start, msg->arg.remove.end);
				break;
			case UFFD_EVENT_REMAP:
				event_remap(fc, m, msg->arg.remap.from, msg->arg.remap.to,
					    msg->arg.remap.len);
				break;
			default:	/* not requested (FORK needs CAP_SYS_PTRACE) */
				log_warn(fc->p->subject, "mapper pid %d: userfaultfd event %u "
					 "ignored", (int)m->pid, msg->event);
				break;
			}
		}
		atomic_fetch_sub(&fc->p->faults_active, 1);
		if ((size_t)n < sizeof(msgs))
			return;
	}
}

void pager_mapper_free(struct pager_mapper *m)
{
	if (m->uffd >= 0)
		close(m->uffd);
	if (m->pagemap_fd >= 0)
		close(m->pagemap_fd);
	if (m->pidfd >= 0)
		close(m->pidfd);
	free(m);
}

/* Rebuild the poll set; close and free mappers their owner removed. */
static nfds_t poll_set(struct fault_ctx *fc)
{
	struct pager *p = fc->p;
	struct pager_mapper **pp, *gone = NULL;
	nfds_t n = 1;

	fc->pfd[0] = (struct pollfd){ .fd = p->fault_wake_fd, .events = POLLIN };
	/* the list changes with both locks held (see pager_internal.h) */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	for (pp = &p->mappers; *pp;) {
		struct pager_mapper *m = *pp;

		if (m->removed) {
			for (unsigned int i = 0; i < fc->nstuck;)	/* its faults went too */
				if (fc->stuck[i].m == m)
					fc->stuck[i] = fc->stuck[--fc->nstuck];
				else
					i++;
			p->faults_stuck = fc->nstuck;
			*pp = m->next;
			m->next = gone;
			gone = m;
			continue;
		}
		/* a dead (exited) mapper's events are drained, not served */
		fc->pfd[n] = (struct pollfd){ .fd = m->uffd, .events = POLLIN };
		fc->pm[n++] = m;
		pp = &m->next;
	}
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->reg_lock);
	while (gone) {	/* unlisted: nobody else can reach them */
		struct pager_mapper *m = gone;

		gone = m->next;
		pager_mapper_free(m);
	}
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
	delivery_io_init(&fc);
	fc.buf = store_buf_alloc(PAGER_MAX_FAULT_AROUND * PAGER_PAGE_SIZE);
	if (!fc.buf) {
		log_err(p->subject, "fault thread: out of memory");
		return NULL;
	}
	n = poll_set(&fc);
	while (!atomic_load(&p->stop)) {
		if (poll(fc.pfd, n, poll_timeout_ms(&fc)) < 0) {
			if (errno == EINTR)
				continue;
			log_err(p->subject, "fault thread: poll: %s", strerror(errno));
			break;
		}
		stuck_retry(&fc);
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
	return pager_thread_start(p, &p->fault_thread, &p->fault_thread_started,
				  fault_main, "vmnap-fault");
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
