// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_offload.c - evict a paused VM's resident pages.
 *
 * Per region, the memfd's data extents are found with SEEK_DATA/SEEK_HOLE
 * (a hole is ZERO at no cost).  Each extent goes in batches of
 * write_batch_bytes, read zero-copy: the region's memfd range is mapped
 * read-only and shared for the offload, a batch's claimed pages populated
 * with MADV_POPULATE_READ (batch_read; pread into a buffer where the
 * mapping fails, or with VMNAPD_OFFLOAD_COPY set).  In a batch, all-zero
 * pages need no I/O and every run of non-zero pages becomes one O_DIRECT
 * write at its slot through io_uring straight from the mapping,
 * write_queue_depth batches in flight.  When every write of a
 * batch completed, the batch's pages are punched from the memfd (also
 * through io_uring: the punch runs in a kernel worker while this thread
 * reads the next batch) and then become OFFLOADED (or ZERO); with
 * asynchronous dirty tracking and a writer gate (pager_set_writer_gate)
 * the mappers are stopped from the batch's last dirty scan to the end of
 * its punch, which then runs on this thread.  The first
 * error (ENOSPC, EIO) stops the offload: batches not yet completed are not
 * punched, their pages stay RESIDENT.
 *
 * pager_offload_cancel() stops it the same way at the next batch boundary
 * (the VM wants to run): no new batch is read, batches whose writes
 * complete afterwards are not punched (their pages stay RESIDENT, the
 * store copies are dropped), batches already punched stay OFFLOADED and
 * are served by faults; the done callback gets -ECANCELED.
 *
 * With critical_resident the resume-critical set's pages (a snapshot taken
 * at the start) are never claimed: they stay resident and mapped through
 * the wait, so the resume that follows neither restores them nor faults.
 * Nor are they write-protected again (struct pager_keep): the guest's wake
 * path writes most of them at every wake, each write a fault if they were.
 *
 * Pre-copy (pager_precopy_start) is the same walk on a running VM with
 * asynchronous dirty tracking, minus every punch: each batch is copied
 * with pread (a hole read through a mapping would allocate), written and
 * committed, then scanned; its written pages that the scan did not find
 * written again become CLEAN (their slots valid), the rest stay RESIDENT.
 * No writer gate: a write after the scan leaves its page unprotected, so
 * the next scan (the next offload's first) makes it RESIDENT again.  The
 * working-set cycle does not end, holes are not marked ZERO (the guest may
 * be filling them) and no stale slot is discarded.
 *
 * Both run on the pager's one offload worker (offload_worker_main), a job
 * at a time: it signals the job's end, then discards the store slots of
 * pages that came back (an offload's stale slots) before it takes the next
 * job, which waits for it there.  That tidy stops at a resume or a cancel
 * (p->tidy_stop): each hole punch takes the store file's lock, which a
 * resuming VM's fault reads need; the next offload's tidy does the rest.
 *
 * Crash safety: each written page's crc32c is taken when the batch is read;
 * between "writes completed" and "punch" the batch's slot map entries
 * (written pages stored with their checksum, zero pages not stored) are
 * written and made durable with the slots (a linked map write and
 * fdatasync through the ring, batch_commit); a CLEAN page's entry only
 * loses its RESIDENT mark (written, no sync: its slot is durable).  A
 * batch whose commit fails is not punched (its pages stay RESIDENT), and
 * the entries of pages not punched are settled (batch_settle_entries).
 * So a vmnapd killed at any point leaves every page in the memfd or
 * durably in the store (see store.h, pager_recover.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define OFFLOAD_RING_ENTRIES	256

/* BP_CLEAN: its slot is valid, punched with no I/O; BP_KEEP: written
 * during the offload (dirty tracking saw it before the punch): stays */
enum batch_page { BP_SKIP = 0, BP_ZERO, BP_WRITE, BP_CLEAN, BP_KEEP };

struct batch;

enum req_op { REQ_WRITE, REQ_MAP, REQ_SYNC, REQ_PUNCH };

struct write_req {
	struct batch *b;
	enum req_op op;
	uint32_t buf_off;
	uint32_t len;
	uint64_t store_off;
};

struct batch {
	char *buf;		/* pread copy (no mapping of the memfd) */
	char *src;		/* the pages' data: in the mapping, or buf */
	struct pager_region *r;
	uint64_t pg;		/* first page */
	uint64_t n;		/* pages */
	uint8_t *kind;		/* enum batch_page per page */
	uint32_t *crc;		/* crc32c per BP_WRITE page */
	struct write_req *req;	/* one per run: writes, then punches */
	uint8_t *written;	/* dirty-tracking scan before the punch */
	unsigned int pending;
	int err;		/* a write failed: nothing is punched */
	bool cancelled;		/* offload cancelled before the punch */
	int punch_err;
	bool busy;
};

struct offload {
	struct pager *p;
	struct io_uring ring;
	char *map[PAGER_MAX_REGIONS];	/* read-only shared mapping of each
					 * region's memfd range, or NULL */
	struct batch *b;
	unsigned int nb;
	unsigned int busy;
	uint64_t batch_pages;
	uint64_t written;
	uint64_t clean, kept;	/* pages punched with no I/O; kept (written) */
	uint64_t cleaned;	/* pre-copy: pages it wrote and left CLEAN */
	bool zero_copy;		/* a batch was written from a mapping */
	bool precopy;		/* the VM runs: write and keep, punch nothing */
	bool track;		/* dirty tracking on at the start */
	bool sync;		/* ... by write faults (wp_sync) */
	int err;
	bool cancelled;		/* stopped early by pager_offload_cancel */
	/* critical_resident: the resume-critical set and the devices' pages
	 * (pager_set_device_pages) at the start, sorted (kept_set.pg = keep);
	 * their pages are not claimed (they stay resident and mapped) nor
	 * protected again by the dirty scans */
	uint64_t keep[PAGER_KEEP_MAX_PAGES];
	struct pager_keep kept_set;
	/* ... those of them written already (RESIDENT), which wp_sync leaves
	 * unprotected: a CLEAN one is protected again, as every page, so that
	 * a mapper's entry without the protection (one registered since it
	 * was) cannot write it unseen */
	uint64_t keep_written[PAGER_KEEP_MAX_PAGES];
	struct pager_keep kept_written;
	uint64_t crit_kept;	/* pages so left */
};

static bool page_is_zero(const char *page)
{
	const uint64_t *w = (const uint64_t *)(const void *)page;
	uint64_t acc = 0;

	if (w[0])
		return false;
	for (size_t i = 0; i < PAGER_PAGE_SIZE / sizeof(*w); i++)
		acc |= w[i];
	return !acc;
}

static void set_error(struct offload *o, int err)
{
	if (!o->err)
		o->err = err;
}

static struct io_uring_sqe *get_sqe(struct offload *o);

/*
 * The map entries of the batch's pages that stay in the memfd (not
 * punched: kept, or the batch failed or was cancelled): a CLEAN page's is
 * marked RESIDENT again, any other's cleared (its slot is stale).  So no
 * entry says "stored" alone over a page the memfd holds, which a discard
 * of the page by the VMM would turn into its old copy after a crash.
 * While the pages are still claimed.
 */
static void batch_settle_entries(struct offload *o, struct batch *b)
{
	struct store *st = &o->p->store;
	bool none_punched = b->err || b->cancelled || o->precopy, changed = false;
	int err;

	for (uint64_t i = 0; i < b->n; i++) {
		/* the slot holds what the memfd does: a CLEAN page's, or one
		 * pre-copy stored */
		bool valid = b->kind[i] == BP_CLEAN ||
			     (o->precopy && b->kind[i] == BP_WRITE && !b->err && !b->cancelled);

		if (b->kind[i] != BP_SKIP && (none_punched || b->kind[i] == BP_KEEP))
			changed |= store_slot_in_memfd(st, b->pg + i, valid);
	}
	err = changed ? store_slots_write(st, b->pg, b->n) : 0;
	if (err)
		log_warn(o->p->subject, "offload: slot map of kept pages: %s", strerror(-err));
}

/* Punched (or failed): the batch's pages take their final state. */
static void batch_finish(struct offload *o, struct batch *b)
{
	struct pager *p = o->p;

	batch_settle_entries(o, b);

	/*
	 * wp_sync: protect the punched pages again while they are still
	 * claimed.  The punch leaves a uffd-wp marker where a mapping had the
	 * page protected, but a mapper that touched the page during the punch
	 * (mapped it again between the kernel's unmap and its truncate) loses
	 * the marker: a copy put back through the memfd would then be mapped
	 * writable with no write fault while CLEAN.
	 */
	if (o->sync && !b->err && !b->cancelled &&
	    pager_dirty_protect(p, b->pg, b->n, &o->kept_written))
		o->sync = false;	/* fell back: no longer tracked */
	pthread_mutex_lock(&p->lock);
	for (uint64_t i = 0; i < b->n; i++) {
		if (b->kind[i] == BP_SKIP)
			continue;
		if (b->err || b->cancelled)	/* not punched */
			pg_set(p, b->pg + i, b->kind[i] == BP_CLEAN ?
			       pager_clean_state_locked(p, b->pg + i) : PAGE_RESIDENT);
		else if (o->precopy)	/* stored, still resident */
			pg_set(p, b->pg + i, b->kind[i] == BP_CLEAN || b->kind[i] == BP_WRITE ?
			       pager_clean_state_locked(p, b->pg + i) : PAGE_RESIDENT);
		else if (b->kind[i] == BP_KEEP)
			pg_set(p, b->pg + i, PAGE_RESIDENT);
		else
			pg_set(p, b->pg + i, b->kind[i] == BP_ZERO ? PAGE_ZERO :
			       PAGE_OFFLOADED);
		if (!b->err && !b->cancelled && b->kind[i] == BP_WRITE)
			o->written += PAGER_PAGE_SIZE;
		if (!b->err && !b->cancelled && o->precopy && b->kind[i] == BP_WRITE &&
		    pg_state(p, b->pg + i) == PAGE_CLEAN)
			o->cleaned++;
		if (!b->err && !b->cancelled && !o->precopy && b->kind[i] == BP_CLEAN) {
			o->clean++;
			p->hot_streak[b->pg + i] = 0;	/* not written: starts over */
		}
		if (!b->err && !b->cancelled && b->kind[i] == BP_KEEP)
			o->kept++;
	}
	pthread_cond_broadcast(&p->state_cv);
	pthread_mutex_unlock(&p->lock);
	if (b->err || b->punch_err) {
		int err = b->err ? b->err : b->punch_err;

		if (!o->err)	/* the first error; the rest follow from it */
			log_err(p->subject, "offload: batch at gpa %#llx: %s%s",
				(unsigned long long)(b->r->gpa + (b->pg - b->r->first_page) *
						     PAGER_PAGE_SIZE), b->err ? "" : "punch: ",
				strerror(-err));
		set_error(o, err);
	}
	b->busy = false;
	o->busy--;
}

/*
 * The batch's slots and map entries are durable (or failed): punch its
 * written and zero pages.
 */
static void batch_punch(struct offload *o, struct batch *b)
{
	struct pager *p = o->p;
	unsigned int nreq = 0;
	bool gated = false;

	if (b->err || b->cancelled) {
		batch_finish(o, b);
		return;
	}
	if (o->track && !o->sync && p->writer_gate && !o->precopy) {
		/* wp_async: a write after the scan below would not fault, so
		 * the mappers stop from the scan to the end of the punch */
		int err = p->writer_gate(true, p->writer_gate_arg);

		if (err) {
			b->err = err;
			batch_finish(o, b);
			return;
		}
		gated = true;
	}
	if (o->track) {
		/* A page written since the offload's first scan (a mapper
		 * still writing, the VM paused or not) is not punched: it
		 * stays resident, its store copy older than the memfd's. */
		uint64_t found = 0;

		memset(b->written, 0, b->n);
		if (pager_dirty_scan(p, b->pg, b->n, b->written, &o->kept_set))
			o->track = false;	/* fell back: this batch stays, the
						 * next ones are punched unscanned */
		pthread_mutex_lock(&p->lock);
		for (uint64_t i = 0; i < b->n; i++) {
			if (!b->written[i])
				continue;
			if (b->kind[i] != BP_SKIP)
				b->kind[i] = BP_KEEP;
			else	/* restored by a fault meanwhile, then written */
				found += pager_dirty_note_locked(p, b->pg + i);
		}
		p->dirty_scanned += found;
		pthread_mutex_unlock(&p->lock);
	}
	if (o->precopy) {	/* nothing is punched */
		batch_finish(o, b);
		return;
	}
	for (uint64_t i = 0; i < b->n;) {
		struct io_uring_sqe *sqe = NULL;
		struct write_req *w;
		uint64_t run = 0;

		if (b->kind[i] == BP_SKIP || b->kind[i] == BP_KEEP) {
			i++;
			continue;
		}
		while (i + run < b->n && b->kind[i + run] != BP_SKIP &&
		       b->kind[i + run] != BP_KEEP)
			run++;
		w = &b->req[nreq++];
		*w = (struct write_req){ .b = b, .op = REQ_PUNCH };
		if (!gated)	/* gated: done before the gate opens again */
			sqe = get_sqe(o);
		if (!sqe) {
			/* no SQE: punch synchronously */
			if (fallocate(b->r->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)pg_memfd_off(b->r, b->pg + i),
				      (off_t)(run * PAGER_PAGE_SIZE)) < 0 && !b->punch_err)
				b->punch_err = -errno;
		} else {
			io_uring_prep_fallocate(sqe, b->r->memfd,
						FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)pg_memfd_off(b->r, b->pg + i),
						(off_t)(run * PAGER_PAGE_SIZE));
			io_uring_sqe_set_data(sqe, w);
			b->pending++;
		}
		i += run;
	}
	if (gated)
		p->writer_gate(false, p->writer_gate_arg);
	if (!b->pending)
		batch_finish(o, b);
	else
		io_uring_submit(&o->ring);
}

/*
 * Every write of the batch completed: its map entries (written pages
 * stored with their checksum, zero pages not stored) are written and the
 * file fdatasync'ed - through the ring, linked, so other batches go on
 * meanwhile - before batch_punch.  A batch that changes no entry (zero
 * pages whose entries were clear already) needs neither.
 */
static void batch_commit(struct offload *o, struct batch *b)
{
	struct store *st = &o->p->store;
	struct io_uring_sqe *map, *sync;
	bool changed = false, flipped = false;

	if (!b->err && atomic_load(&o->p->offload_abort)) {
		b->cancelled = true;	/* the VM wants to run: keep it resident */
		o->cancelled = true;
	}
	if (b->err || b->cancelled) {
		batch_punch(o, b);
		return;
	}
	for (uint64_t i = 0; i < b->n; i++) {
		if (b->kind[i] == BP_WRITE) {	/* pre-copy: the memfd keeps it */
			store_slot_set(st, b->pg + i, b->crc[i], o->precopy);
			changed = true;
		} else if (b->kind[i] == BP_ZERO && store_slot_stored(st, b->pg + i)) {
			store_slot_clear(st, b->pg + i);
			changed = true;
		} else if (b->kind[i] == BP_CLEAN && !o->precopy &&
			   store_slot_resident(st, b->pg + i)) {
			/* to be punched: stored alone.  Its slot and checksum
			 * are durable already: written, not synced (store.h) */
			store_slot_set_resident(st, b->pg + i, false);
			flipped = true;
		}
	}
	if (!changed) {
		if (flipped)
			b->err = store_slots_write(st, b->pg, b->n);
		batch_punch(o, b);
		return;
	}
	map = get_sqe(o);
	sync = map ? get_sqe(o) : NULL;
	if (!sync) {
		if (map) {	/* give the lone SQE back as a no-op */
			io_uring_prep_nop(map);
			io_uring_sqe_set_data(map, NULL);
		}
		b->err = store_slots_commit(st, b->pg, b->n);
		batch_punch(o, b);
		return;
	}
	b->req[0] = (struct write_req){ .b = b, .op = REQ_MAP,
		.len = (uint32_t)(b->n * sizeof(struct store_slot)) };
	b->req[1] = (struct write_req){ .b = b, .op = REQ_SYNC };
	io_uring_prep_write(map, st->meta_fd, &st->slots[b->pg], b->req[0].len,
			    st->map_off + b->pg * sizeof(struct store_slot));
	io_uring_sqe_set_data(map, &b->req[0]);
	map->flags |= IOSQE_IO_LINK;
	io_uring_prep_fsync(sync, st->meta_fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sync, &b->req[1]);
	b->pending = 2;
	io_uring_submit(&o->ring);
}

static void reap_one(struct offload *o, struct io_uring_cqe *cqe)
{
	struct write_req *w = io_uring_cqe_get_data(cqe);
	struct batch *b;
	int res = cqe->res;

	if (!w)		/* a no-op */
		return;
	b = w->b;
	if (w->op == REQ_MAP || w->op == REQ_SYNC) {
		if (w->op == REQ_MAP && res >= 0 && (uint32_t)res != w->len)
			res = -EIO;
		if (res < 0 && !b->err)	/* a failed write cancels the sync */
			b->err = res == -ECANCELED ? -EIO : res;
		if (--b->pending == 0)
			batch_punch(o, b);
		return;
	}
	if (w->op == REQ_PUNCH) {
		if (res < 0 && !b->punch_err)
			b->punch_err = res;
		if (--b->pending == 0)
			batch_finish(o, b);
		return;
	}
	if (res >= 0 && (uint32_t)res < w->len) {
		/* short write: finish it synchronously to learn the errno */
		res = store_write(&o->p->store, b->src + w->buf_off + res,
				  w->len - (uint32_t)res, w->store_off + (uint64_t)res);
	} else if (res > 0) {
		res = 0;
	}
	if (res < 0 && !b->err)
		b->err = res;
	if (--b->pending == 0)
		batch_commit(o, b);
}

/* Reap completions; wait for one if @wait. */
static int reap(struct offload *o, bool wait)
{
	struct io_uring_cqe *cqe;
	int err;

	if (wait) {
		err = io_uring_wait_cqe(&o->ring, &cqe);
		if (err && err != -EINTR)
			return err;
	}
	while (io_uring_peek_cqe(&o->ring, &cqe) == 0) {
		reap_one(o, cqe);
		io_uring_cqe_seen(&o->ring, cqe);
	}
	return 0;
}

static struct batch *free_batch(struct offload *o)
{
	while (o->busy == o->nb) {
		int err = reap(o, true);

		if (err)
			return NULL;
	}
	for (unsigned int i = 0; i < o->nb; i++)
		if (!o->b[i].busy)
			return &o->b[i];
	return NULL;
}

static struct io_uring_sqe *get_sqe(struct offload *o)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&o->ring);

	if (!sqe) {
		io_uring_submit(&o->ring);
		sqe = io_uring_get_sqe(&o->ring);
	}
	return sqe;
}

/* Give claimed pages [from, b->n) of @b back unread (RESIDENT: the memfd
 * holds them, or a hole that reads as zero). */
static void batch_unclaim(struct pager *p, struct batch *b, uint64_t from)
{
	pthread_mutex_lock(&p->lock);
	for (uint64_t i = from; i < b->n; i++) {
		if (b->kind[i] == BP_SKIP)
			continue;
		pg_set(p, b->pg + i, b->kind[i] == BP_CLEAN ?
		       pager_clean_state_locked(p, b->pg + i) : PAGE_RESIDENT);
		b->kind[i] = BP_SKIP;
	}
	pthread_cond_broadcast(&p->state_cv);
	pthread_mutex_unlock(&p->lock);
}

/*
 * The batch's claimed pages, [off, off+len) of its region's memfd, for
 * classifying and writing: zero-copy, b->src points into the region's
 * read-only mapping, each run of claimed pages populated by one
 * MADV_POPULATE_READ (no fault per page); else a pread into b->buf.  Only
 * claimed pages are touched: populating a page the memfd lacks allocates
 * it, which for an OFFLOADED page (a hole) would hide its store copy from
 * the faults.  Bytes available, or -errno.
 */
static ssize_t batch_read(struct offload *o, struct batch *b, uint64_t off, uint64_t len)
{
	char *map = o->precopy ? NULL : o->map[b->r - o->p->regions];
	ssize_t got;

	b->src = map ? map + (off - b->r->memfd_off) : NULL;
	for (uint64_t i = 0, n = len / PAGER_PAGE_SIZE; b->src && i < n;) {
		uint64_t run = 0;

		if (b->kind[i] != BP_WRITE) {	/* a CLEAN page is not read */
			i++;
			continue;
		}
		while (i + run < n && b->kind[i + run] == BP_WRITE)
			run++;
		/* EINVAL (before 5.14): each page faults in when read instead;
		 * anything else: this batch is copied */
		if (madvise(b->src + i * PAGER_PAGE_SIZE, run * PAGER_PAGE_SIZE,
			    MADV_POPULATE_READ) < 0 && errno != EINVAL) {
			log_debug(o->p->subject, "offload: MADV_POPULATE_READ: %s: pread",
				  strerror(errno));
			b->src = NULL;
		}
		i += run;
	}
	if (b->src) {
		o->zero_copy = true;
		return (ssize_t)len;
	}
	b->src = b->buf;
	got = pread(b->r->memfd, b->buf, len, (off_t)off);
	return got < 0 ? -errno : got;
}

/*
 * Claim [off, off+len) of region @r, read it, classify its pages, queue
 * the writes.  The claim comes first: a page read before it could be
 * discarded (FREE_REPORT, the VMM's REMOVE) or restored in between, and
 * its stale copy would then be stored and come back later.
 */
static int batch_submit(struct offload *o, struct batch *b,
			struct pager_region *r, uint64_t off, uint64_t len)
{
	struct pager *p = o->p;
	unsigned int nreq = 0, k;
	uint64_t claimed = 0;
	ssize_t got;

	b->r = r;
	b->pg = r->first_page + (off - r->memfd_off) / PAGER_PAGE_SIZE;
	b->n = len / PAGER_PAGE_SIZE;
	b->err = 0;
	b->cancelled = false;
	b->punch_err = 0;
	b->pending = 0;
	k = pager_keep_first(&o->kept_set, b->pg);
	pthread_mutex_lock(&p->lock);
	for (uint64_t i = 0; i < b->n; i++) {
		enum pager_page_state st = pg_state(p, b->pg + i);

		/* IN_FLIGHT belongs to someone else; OFFLOADED is stored */
		if (st != PAGE_RESIDENT && st != PAGE_ZERO && st != PAGE_CLEAN) {
			b->kind[i] = BP_SKIP;
			continue;
		}
		while (k < o->kept_set.nr && o->keep[k] < b->pg + i)
			k++;
		if (k < o->kept_set.nr && o->keep[k] == b->pg + i) {
			b->kind[i] = BP_SKIP;	/* the set (and devices' pages) stay */
			o->crit_kept++;
			continue;
		}
		b->kind[i] = st == PAGE_CLEAN ? BP_CLEAN : BP_WRITE;
		pg_set(p, b->pg + i, PAGE_IN_FLIGHT);
		claimed++;
	}
	pthread_mutex_unlock(&p->lock);
	if (!claimed)
		return 0;
	/* wp_sync: a page written (and so unprotected) since the offload
	 * began is protected again now that it is claimed, so a write from
	 * here on waits in the fault thread until the page is out, and is
	 * then made to the page faulted back in: never lost by the punch */
	if (o->sync && pager_dirty_protect(p, b->pg, b->n, &o->kept_written))
		o->sync = false;	/* fell back: no longer tracked */
	got = batch_read(o, b, off, len);
	if (got < 0) {
		batch_unclaim(p, b, 0);
		return (int)got;
	}
	len = (uint64_t)got & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	batch_unclaim(p, b, len / PAGER_PAGE_SIZE);	/* beyond a short read */
	if (!len)
		return -EIO;
	b->n = len / PAGER_PAGE_SIZE;
	for (uint64_t i = 0; i < b->n; i++)
		if (b->kind[i] == BP_WRITE)
			b->kind[i] = page_is_zero(b->src + i * PAGER_PAGE_SIZE) ?
				     BP_ZERO : BP_WRITE;
	for (uint64_t i = 0; i < b->n; i++)
		if (b->kind[i] == BP_WRITE)
			b->crc[i] = store_crc32c(0, b->src + i * PAGER_PAGE_SIZE,
						 PAGER_PAGE_SIZE);
	b->busy = true;
	o->busy++;
	for (uint64_t i = 0; i < b->n;) {
		struct write_req *w;
		struct io_uring_sqe *sqe;
		uint64_t run = 0;

		if (b->kind[i] != BP_WRITE) {
			i++;
			continue;
		}
		while (i + run < b->n && b->kind[i + run] == BP_WRITE)
			run++;
		sqe = get_sqe(o);
		if (!sqe) {
			b->err = -EBUSY;
			break;
		}
		memset(&p->slot_data[b->pg + i], SLOT_WRITTEN, run);	/* for the tidy */
		w = &b->req[nreq++];
		*w = (struct write_req){
			.b = b, .op = REQ_WRITE, .buf_off = (uint32_t)(i * PAGER_PAGE_SIZE),
			.len = (uint32_t)(run * PAGER_PAGE_SIZE),
			.store_off = pg_store_off(b->pg + i),
		};
		io_uring_prep_write(sqe, p->store.fd, b->src + w->buf_off, w->len,
				    w->store_off);
		io_uring_sqe_set_data(sqe, w);
		b->pending++;
		i += run;
	}
	if (!b->pending) {
		batch_commit(o, b);	/* all zero: no slot I/O */
		return 0;
	}
	io_uring_submit(&o->ring);
	return 0;
}

/* Pages in [from, to) of the memfd are holes: RESIDENT/ZERO -> ZERO; a
 * CLEAN one too (the VMM punched its memfd behind the pager: its slot is
 * stale, and the tidy drops it with its map entry). */
static void mark_holes(struct pager *p, struct pager_region *r, uint64_t from,
		       uint64_t to)
{
	uint64_t pg = r->first_page + (from - r->memfd_off) / PAGER_PAGE_SIZE;
	uint64_t end = r->first_page + (to - r->memfd_off) / PAGER_PAGE_SIZE;

	pthread_mutex_lock(&p->lock);
	for (; pg < end; pg++)
		if (pg_state(p, pg) == PAGE_RESIDENT || pg_state(p, pg) == PAGE_CLEAN)
			pg_set(p, pg, PAGE_ZERO);
	pthread_mutex_unlock(&p->lock);
}

static int offload_region(struct offload *o, struct pager_region *r)
{
	struct pager *p = o->p;
	uint64_t off = r->memfd_off, end = r->memfd_off + r->size;
	uint64_t batch_bytes = o->batch_pages * PAGER_PAGE_SIZE;

	while (off < end && !o->err) {
		off_t data, hole;

		if (atomic_load(&p->offload_abort)) {
			o->cancelled = true;
			return 0;
		}
		data = lseek(r->memfd, (off_t)off, SEEK_DATA);
		if (data < 0 && errno != ENXIO)
			return -errno;
		if (data < 0 || (uint64_t)data > end)
			data = (off_t)end;
		data &= ~(off_t)(PAGER_PAGE_SIZE - 1);
		if (!o->precopy)
			mark_holes(p, r, off, (uint64_t)data);
		if ((uint64_t)data >= end)
			break;
		hole = lseek(r->memfd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		hole = (hole + PAGER_PAGE_SIZE - 1) & ~(off_t)(PAGER_PAGE_SIZE - 1);
		for (uint64_t c = (uint64_t)data; c < (uint64_t)hole && !o->err;) {
			uint64_t len = (uint64_t)hole - c < batch_bytes ?
				       (uint64_t)hole - c : batch_bytes;
			struct batch *b;
			int err;

			if (atomic_load(&p->offload_abort)) {	/* batch boundary */
				o->cancelled = true;
				return 0;
			}
			b = free_batch(o);
			if (!b)
				return -EIO;
			if (o->err)
				break;
			err = batch_submit(o, b, r, c, len);
			if (err)
				return err;
			c += len;
		}
		off = (uint64_t)hole;
	}
	return 0;
}

/*
 * Zero-copy: map each region's memfd range read-only and shared, for the
 * offload's length.  The VM is paused and only claimed pages inside data
 * extents are read (batch_read), so nothing is allocated through it; the
 * punches unmap the pages from it as from every mapping.  Only a memfd
 * sealed against shrinking (F_SEAL_SHRINK, as QEMU seals it): a VMM that
 * truncated an unsealed one under the offload would make a read of the
 * mapping a SIGBUS, where pread just comes back short.  A region that is
 * not sealed or cannot be mapped is copied with pread.
 */
static void offload_map(struct offload *o)
{
	struct pager *p = o->p;

	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct pager_region *r = &p->regions[i];
		void *m;
		int seals;

		if (r->memfd < 0 || getenv("VMNAPD_OFFLOAD_COPY"))
			continue;
		seals = fcntl(r->memfd, F_GET_SEALS);
		if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
			log_debug(p->subject, "offload: region %u: memfd not sealed against "
				  "shrinking: copied with pread", i);
			continue;
		}
		m = mmap(NULL, r->size, PROT_READ, MAP_SHARED | MAP_NORESERVE, r->memfd,
			 (off_t)r->memfd_off);
		if (m == MAP_FAILED) {
			log_warn(p->subject, "offload: cannot map region %u of the memfd (%s): "
				 "copied with pread", i, strerror(errno));
			continue;
		}
		o->map[i] = m;
	}
}

static int offload_init(struct offload *o, struct pager *p)
{
	int err;

	o->p = p;
	o->batch_pages = p->cfg.write_batch_bytes / PAGER_PAGE_SIZE;
	o->nb = p->cfg.write_queue_depth;
	if (!o->precopy)
		offload_map(o);
	err = io_uring_queue_init(OFFLOAD_RING_ENTRIES, &o->ring, 0);
	if (err)
		return err;
	o->b = calloc(o->nb, sizeof(*o->b));
	if (!o->b)
		return -ENOMEM;
	for (unsigned int i = 0; i < o->nb; i++) {
		struct batch *b = &o->b[i];

		b->buf = store_buf_alloc(p->cfg.write_batch_bytes);
		b->kind = calloc(o->batch_pages, 1);
		b->crc = calloc(o->batch_pages, sizeof(*b->crc));
		b->req = calloc((o->batch_pages + 1) / 2 + 1, sizeof(*b->req));
		b->written = calloc(o->batch_pages, 1);
		if (!b->buf || !b->kind || !b->crc || !b->req || !b->written)
			return -ENOMEM;
	}
	return 0;
}

static void offload_fini(struct offload *o)
{
	if (o->b) {
		for (unsigned int i = 0; i < o->nb; i++) {
			free(o->b[i].buf);
			free(o->b[i].kind);
			free(o->b[i].crc);
			free(o->b[i].req);
			free(o->b[i].written);
		}
		free(o->b);
	}
	if (o->ring.ring_fd > 0)
		io_uring_queue_exit(&o->ring);
	for (unsigned int i = 0; i < o->p->nr_regions; i++)
		if (o->map[i])
			munmap(o->map[i], o->p->regions[i].size);
}

/*
 * Slots of RESIDENT and ZERO pages hold stale copies (the page came back
 * and was written, or was dropped; a CLEAN page's slot is valid).  A ZERO
 * page's slot gives its blocks back.  A RESIDENT page's keeps them: the
 * next offload that finds the page written writes it to the same slot,
 * and an O_DIRECT write into blocks the file already has is data alone,
 * where one into a hole makes the file system allocate blocks and journal
 * the new extent, which the batch's fdatasync then commits with a cache
 * flush.  Fault reads queued behind such commits took tens of ms here
 * (4 KiB reads beside a writer that fills holes: 48 ms at the p99.99
 * against 2 ms beside one that overwrites).  So the store file keeps at
 * most guest RAM's worth of blocks, as a full offload needs anyway; the
 * entries a written CLEAN page kept are cleared all the same.
 *
 * Only slots written since the tidy last looked (p->slot_data: SLOT_WRITTEN,
 * and SLOT_KEPT where a RESIDENT page's stale slot was kept): the zero
 * pages and the kept set, punched at every offload before, made it some
 * 480 punches each time.  Runs after the offload reported done (it is
 * bookkeeping, not on the VM's path), so the VM may run meanwhile: the
 * lock is held only to find a run, never over the fallocate.  A RESIDENT
 * or ZERO page cannot become OFFLOADED meanwhile (only an offload does
 * that, and the next one runs on this worker after this); IN_FLIGHT pages
 * may be reading their slot and are skipped.  A page that changes between
 * the two after its run was found is tidied as found: a zero page the
 * guest wrote since loses its blocks (its copy was stale either way), a
 * RESIDENT page dropped since keeps them until a later tidy finds it ZERO.
 */
enum stale_slot { STALE_NONE, STALE_ZERO, STALE_RESIDENT };

static enum stale_slot stale_slot_locked(const struct pager *p, uint64_t pg)
{
	if (p->slot_data[pg] && pg_state(p, pg) == PAGE_ZERO)
		return STALE_ZERO;
	if (p->slot_data[pg] == SLOT_WRITTEN && pg_state(p, pg) == PAGE_RESIDENT)
		return STALE_RESIDENT;
	return STALE_NONE;
}

static void discard_stale_slots(struct pager *p)
{
	for (uint64_t pg = 0; pg < p->npages;) {
		enum stale_slot kind = STALE_NONE;
		uint64_t run = 0;
		bool zero;

		pthread_mutex_lock(&p->lock);
		while (pg < p->npages && (kind = stale_slot_locked(p, pg)) == STALE_NONE)
			pg++;
		while (kind != STALE_NONE && pg + run < p->npages &&
		       stale_slot_locked(p, pg + run) == kind)
			run++;
		zero = kind == STALE_ZERO;
		/* a resuming VM's fault reads wait for each punch (the store
		 * file's lock): the next offload's tidy does the rest */
		if (run && atomic_load(&p->tidy_stop)) {
			p->stale_discards_deferred++;
			pthread_mutex_unlock(&p->lock);
			log_debug(p->subject, "stale store slots: tidy left to the next offload "
				  "(the VM resumes)");
			return;
		}
		if (!zero)
			p->stale_slots_kept += run;
		pthread_mutex_unlock(&p->lock);
		if (run) {
			bool named = false;

			/* entries a written CLEAN page kept go first */
			for (uint64_t i = pg; i < pg + run && !named; i++)
				named = store_slot_stored(&p->store, i);
			if (named)
				store_slots_forget(&p->store, pg, run, false);
			if (zero)
				store_discard(&p->store, pg_store_off(pg), run * PAGER_PAGE_SIZE);
			memset(&p->slot_data[pg], zero ? SLOT_NONE : SLOT_KEPT, run);
		}
		pg += run;
	}
}

/*
 * Dirty tracking: the pages written since the last scan (every mapper)
 * lose their CLEAN state before anything is claimed; the scan protects
 * them again (but the kept set's), so what is written from now on shows in
 * batch_punch's scan.  A sample's verdict goes to its block (write-hot
 * checks by sample, pager_wmap_locked).
 */
static int offload_scan(struct offload *o)
{
	struct pager *p = o->p;
	uint8_t *written;
	uint64_t found = 0;

	bool sync;

	pthread_mutex_lock(&p->lock);
	o->track = pager_tracking_locked(p);
	sync = p->track == PAGER_DIRTY_WP_SYNC;
	pthread_mutex_unlock(&p->lock);
	if (!o->track)
		return 0;
	if (sync) {
		/* a new epoch: every page protected, each first write faults;
		 * what was written since the last one is RESIDENT already */
		if (pager_dirty_protect(p, 0, p->npages, &o->kept_written))
			o->track = false;
		else
			o->sync = true;
		return 0;
	}
	written = calloc(p->npages, 1);
	if (!written)
		return -ENOMEM;
	if (pager_dirty_scan(p, 0, p->npages, written, &o->kept_set))
		o->track = false;	/* fell back: every CLEAN page is RESIDENT */
	pthread_mutex_lock(&p->lock);
	pager_tail_merge_written_locked(p, written);	/* what ticks found */
	for (uint64_t pg = 0; pg < p->npages; pg++) {
		if (written[pg] && pager_dirty_seen_locked(p, pg))
			found++;
		pager_hot_scan_locked(p, pg, written[pg]);
	}
	pager_hot_scan_end_locked(p);
	p->dirty_scanned += found;
	pthread_mutex_unlock(&p->lock);
	free(written);
	log_debug(p->subject, "offload: %llu clean page(s) written since their restore",
		  (unsigned long long)found);
	return 0;
}

/* A pre-copy ended: count, say what it did. */
static void precopy_account(struct pager *p, const struct offload *o, int err, uint64_t ns)
{
	pthread_mutex_lock(&p->lock);
	p->offload_err = err;
	p->precopies++;
	p->precopy_written += o->written;
	p->precopy_cleaned += o->cleaned;
	p->store_written += o->written;
	p->dirty_kept += o->kept;
	if (err && err != -ECANCELED)
		p->offload_errors++;
	pthread_mutex_unlock(&p->lock);
	if (err && err != -ECANCELED) {
		log_err(p->subject, "pre-copy stopped after %llu MiB: %s (no page affected)",
			(unsigned long long)(o->written >> 20), strerror(-err));
		pager_report_error(p, err, "offload");
	} else {
		log_info(p->subject, "pre-copy%s: %llu MiB written in %llu ms while running, "
			 "%llu page(s) now clean, %llu written meanwhile",
			 err ? " stopped" : "",
			 (unsigned long long)(o->written >> 20),
			 (unsigned long long)(ns / 1000000), (unsigned long long)o->cleaned,
			 (unsigned long long)o->kept);
	}
}

/* An offload ended: count, learn, say what it did. */
static void offload_account(struct pager *p, const struct offload *o, int err, uint64_t ns)
{
	uint64_t out, zero;

	pthread_mutex_lock(&p->lock);
	p->offload_err = err;
	p->last_offload_ns = ns;
	p->last_offload_written = o->written;
	p->store_written += o->written;
	p->clean_punched += o->clean;
	p->zero_copy_offloads += o->zero_copy;
	p->dirty_kept += o->kept;
	p->crit_kept_pages += o->crit_kept;
	if (err == -ECANCELED)
		p->offload_cancels++;
	else if (err)
		p->offload_errors++;
	else {
		p->offloads++;
		p->tail_idle_sets = 0;	/* the sets serve again */
	}
	out = p->count[PAGE_OFFLOADED];
	zero = p->count[PAGE_ZERO];
	pthread_mutex_unlock(&p->lock);
	if (err == -ECANCELED) {
		log_info(p->subject, "offload cancelled after %llu MiB in %llu ms: %llu page(s) "
			 "out (served by faults), the rest stays resident",
			 (unsigned long long)(o->written >> 20),
			 (unsigned long long)(ns / 1000000), (unsigned long long)out);
	} else if (err) {
		log_err(p->subject, "offload aborted after %llu MiB: %s (unwritten pages stay resident)",
			(unsigned long long)(o->written >> 20), strerror(-err));
		pager_report_error(p, err, "offload");
	} else {
		log_info(p->subject, "offload: %llu MiB written in %llu ms, %llu page(s) out "
			 "(%llu clean: no I/O), %llu zero, %llu written meanwhile: kept, "
			 "%llu of the resume-critical set left resident",
			 (unsigned long long)(o->written >> 20),
			 (unsigned long long)(ns / 1000000),
			 (unsigned long long)out, (unsigned long long)o->clean,
			 (unsigned long long)zero, (unsigned long long)o->kept,
			 (unsigned long long)o->crit_kept);
	}
}

/* One job of the worker: the offload or pre-copy p->precopy names. */
static void offload_job_run(struct pager *p)
{
	struct offload o = { 0 };
	uint64_t one = 1, ns;
	int err;

	o.ring.ring_fd = -1;
	pthread_mutex_lock(&p->lock);
	o.precopy = p->precopy;
	p->offload_t0 = now_ns();	/* not while it waited for a tidy */
	if (!o.precopy)	/* its tidy runs after it, while the VM stays paused */
		atomic_store(&p->tidy_stop, false);
	/* the set as the offload starts (one that runs while a mapper faults
	 * may evict a page the set gains meanwhile: it faults back) */
	o.kept_set.pg = o.keep;
	if (p->cfg.critical_resident)
		o.kept_set.nr = pager_critical_snapshot_locked(p, o.keep);
	if (!o.precopy)	/* and the command's last writes (pager_tail.c), once
			 * the first offload after they were found stored them */
		o.kept_set.nr = pager_tail_keep_locked(p, o.keep, o.kept_set.nr);
	o.kept_written.pg = o.keep_written;
	for (unsigned int i = 0; i < o.kept_set.nr; i++)
		if (pg_state(p, o.keep[i]) == PAGE_RESIDENT)
			o.keep_written[o.kept_written.nr++] = o.keep[i];
	pthread_mutex_unlock(&p->lock);
	err = offload_init(&o, p);
	if (!err)
		err = offload_scan(&o);
	if (!err && !o.precopy)
		pager_ws_cycle_end(p);	/* after the scan: it saw the writes */
	for (unsigned int i = 0; i < p->nr_regions && !err && !o.err && !o.cancelled; i++)
		if (p->regions[i].memfd >= 0)
			err = offload_region(&o, &p->regions[i]);
	while (o.busy && !reap(&o, true))
		;
	if (!err)
		err = o.err;
	if (!err && o.cancelled)
		err = -ECANCELED;
	if (!o.precopy)	/* the command's last writes: back unmapped */
		pager_tail_install(p, &o.ring, !err);
	offload_fini(&o);
	ns = now_ns() - p->offload_t0;
	if (o.precopy)
		precopy_account(p, &o, err, ns);
	else
		offload_account(p, &o, err, ns);
	if (write(p->offload_done_fd, &one, sizeof(one)) < 0)
		log_err(p->subject, "%s: cannot signal completion: %s",
			o.precopy ? "pre-copy" : "offload", strerror(errno));
	if (!o.precopy)	/* a pre-copy's stale slots wait for the next offload */
		discard_stale_slots(p);	/* after done: the VM need not wait for it */
}

static void *offload_worker_main(void *arg)
{
	struct pager *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->offload_job && !p->offload_exit) {
			uint64_t wait_ns = 0;
			struct timespec ts;

			/* between jobs: the command's last writes */
			if (pager_tail_work_locked(p, &wait_ns))
				continue;
			if (!wait_ns) {
				pthread_cond_wait(&p->offload_cv, &p->lock);
				continue;
			}
			clock_gettime(CLOCK_REALTIME, &ts);	/* the cv's clock */
			wait_ns += (uint64_t)ts.tv_nsec;
			ts.tv_sec += (time_t)(wait_ns / 1000000000ull);
			ts.tv_nsec = (long)(wait_ns % 1000000000ull);
			pthread_cond_timedwait(&p->offload_cv, &p->lock, &ts);
		}
		if (p->offload_exit)
			break;
		if (p->tail_freeze) {	/* the wait's set before its offload */
			uint64_t wait_ns;

			pager_tail_work_locked(p, &wait_ns);
			continue;	/* the lock was dropped: look again */
		}
		p->offload_job = false;
		pthread_mutex_unlock(&p->lock);
		offload_job_run(p);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int pager_offload_worker_start(struct pager *p)
{
	if (p->offload_thread_started)
		return 0;
	return pager_thread_start(p, &p->offload_thread, &p->offload_thread_started,
				  offload_worker_main, "vmnap-offload");
}

int pager_offload_worker_kick(struct pager *p)
{
	int err = pager_offload_worker_start(p);

	pthread_mutex_lock(&p->lock);
	if (err) {
		p->offloading = false;
		p->precopy = false;
	} else {
		p->offload_job = true;
		pthread_cond_signal(&p->offload_cv);
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}

void pager_offload_worker_stop(struct pager *p)
{
	pager_thread_stop(p, p->offload_thread, &p->offload_thread_started,
			  &p->offload_exit, &p->offload_cv);
}
