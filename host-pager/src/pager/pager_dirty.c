// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_dirty.c - which restored pages were written since they came back
 * from the store (a CLEAN page's slot is still valid: the next offload
 * punches it with no I/O).
 *
 * Mechanism: userfaultfd write-protect in asynchronous mode
 * (UFFD_FEATURE_WP_ASYNC, with UFFD_FEATURE_WP_HUGETLBFS_SHMEM for the
 * shmem memfd; the shim asks for both).  Each mapper's ranges are
 * registered MISSING|WP; the kernel resolves a write to a protected page
 * itself by clearing the page table entry's uffd-wp bit, and PAGEMAP_SCAN
 * with PM_SCAN_WP_MATCHING on /proc/PID/pagemap reports the entries
 * without it (PAGE_IS_WRITTEN) and protects them again, atomically per
 * entry.  A page is never reported clean after a write: a write needs a
 * writable entry, which has no uffd-wp bit.  Reports are conservative
 * (an entry made by a read through an unprotected path also counts as
 * written), which costs a write, never a page.  Restored pages come back
 * protected: UFFDIO_COPY with UFFDIO_COPY_MODE_WP, or a pwrite into the
 * memfd behind the punched entry's uffd-wp marker.
 *
 * An offload's scans leave alone (report, never protect again) the pages
 * it keeps resident, the resume-critical set (struct pager_keep): they are
 * RESIDENT once written, so a write to them needs no fault to be seen.
 *
 * Because UFFDIO_REGISTER only adds modes and UNREGISTER drops every
 * protection, a tracked VM's ranges stay registered once its first offload
 * registered them (a never-touched page is then served by
 * UFFDIO_ZEROPAGE, as while pages are out).
 *
 * vmnapd's own writes to guest RAM go through its own mapping (vhost-user
 * SET_MEM_TABLE), which no mapper's page table shows: pager_make_resident
 * marks the pages it is asked for dirty.
 *
 * Tracking is chosen when the mappers are first registered: the WP
 * registration must succeed and PAGEMAP_SCAN must accept the range
 * (PM_SCAN_CHECK_WPASYNC).  Otherwise, or when a later mapper or a scan
 * fails, the VM falls back to "none" (logged once, counted): every CLEAN
 * page becomes RESIDENT and offloads write every resident page.  Whatever
 * the VMM states about its userfaultfd is not trusted: only the kernel's
 * answers count.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "pager_internal.h"

static const char *const track_names[] = {
	[PAGER_DIRTY_UNKNOWN] = "undecided",	/* nothing registered yet */
	[PAGER_DIRTY_WP_ASYNC] = "wp_async",
	[PAGER_DIRTY_NONE] = "none",
	[PAGER_DIRTY_WP_SYNC] = "wp_sync",
};

const char *pager_dirty_tracking_name(enum pager_dirty_tracking t)
{
	return (unsigned int)t < sizeof(track_names) / sizeof(track_names[0]) ?
	       track_names[t] : "?";
}

void pager_dirty_mapper_init(struct pager *p, struct pager_mapper *m)
{
	char path[64];

	(void)p;
	m->pagemap_fd = -1;
	if (m->pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)m->pid);
	m->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (m->pagemap_fd < 0)
		log_debug(p->subject, "mapper pid %d: %s: %s", (int)m->pid, path,
			  strerror(errno));
}

void pager_dirty_fallback(struct pager *p, const char *why)
{
	uint64_t was_clean;
	bool first;

	pthread_mutex_lock(&p->lock);
	first = p->track != PAGER_DIRTY_NONE;
	if (first) {
		p->track = PAGER_DIRTY_NONE;
		p->track_reason = why;
		p->dirty_fallbacks++;
	}
	was_clean = p->count[PAGE_CLEAN];
	for (uint64_t pg = 0; pg < p->npages && p->count[PAGE_CLEAN]; pg++)
		if (pg_state(p, pg) == PAGE_CLEAN)
			pg_set(p, pg, PAGE_RESIDENT);
	pthread_mutex_unlock(&p->lock);
	if (first)
		log_warn(p->subject, "dirty tracking: none (%s): every offload writes every "
			 "resident page; %llu clean page(s) now count as written", why,
			 (unsigned long long)was_clean);
}

uint64_t pager_dirty_reg_mode(struct pager *p, struct pager_mapper *m)
{
	bool want;

	if (getenv("VMNAPD_DIRTY_TRACKING") && !strcmp(getenv("VMNAPD_DIRTY_TRACKING"), "none")) {
		pthread_mutex_lock(&p->lock);
		want = p->track == PAGER_DIRTY_UNKNOWN;
		pthread_mutex_unlock(&p->lock);
		if (want)
			pager_dirty_fallback(p, "VMNAPD_DIRTY_TRACKING=none");
		return UFFDIO_REGISTER_MODE_MISSING;
	}
	pthread_mutex_lock(&p->lock);
	want = p->track != PAGER_DIRTY_NONE;
	pthread_mutex_unlock(&p->lock);
	if (want && m->pagemap_fd < 0) {
		pager_dirty_fallback(p, "a mapper's /proc/PID/pagemap cannot be opened");
		want = false;
	}
	return UFFDIO_REGISTER_MODE_MISSING | (want ? UFFDIO_REGISTER_MODE_WP : 0);
}

/* Does PAGEMAP_SCAN accept write-protect scans (WP_ASYNC) at @addr? */
static int scan_probe(struct pager_mapper *m, uint64_t addr)
{
	struct page_region v[1];
	struct pm_scan_arg a = {
		.size = sizeof(a), .flags = PM_SCAN_CHECK_WPASYNC,
		.start = addr, .end = addr + PAGER_PAGE_SIZE,
		.vec = (uint64_t)(uintptr_t)v, .vec_len = 1,
		.category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN,
	};

	return ioctl(m->pagemap_fd, PAGEMAP_SCAN, &a) < 0 ? -errno : 0;
}

int pager_dirty_registered(struct pager *p, struct pager_mapper *m,
			   uint64_t mode, int reg_err)
{
	enum pager_dirty_tracking want;
	bool decided, mixed;
	uint64_t addr = 0;
	int err;

	if (!(mode & UFFDIO_REGISTER_MODE_WP))
		return reg_err;
	if (reg_err) {
		/* EINVAL: the userfaultfd lacks WP for shmem; the caller
		 * registers MISSING alone */
		pager_dirty_fallback(p, "the userfaultfd offers no write-protect for shmem "
				     "(UFFD_FEATURE_WP_HUGETLBFS_SHMEM)");
		return reg_err;
	}
	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; i < p->nr_regions && !addr; i++)
		if (m->host_addr[i] && m->map_hi[i] > m->map_lo[i])
			addr = m->host_addr[i] + m->map_lo[i];
	pthread_mutex_unlock(&p->lock);
	err = addr ? scan_probe(m, addr) : 0;
	if (err && err != -EPERM) {
		pager_dirty_fallback(p, "PAGEMAP_SCAN refused the mapper's range");
		return 0;
	}
	/* -EPERM: registered WP, but without WP_ASYNC: synchronous */
	want = err ? PAGER_DIRTY_WP_SYNC : PAGER_DIRTY_WP_ASYNC;
	pthread_mutex_lock(&p->lock);
	decided = p->track == PAGER_DIRTY_UNKNOWN;
	if (decided)
		p->track = want;
	mixed = p->track != want && p->track != PAGER_DIRTY_NONE;
	m->wp = p->track == want;
	pthread_mutex_unlock(&p->lock);
	if (mixed)
		pager_dirty_fallback(p, "the mappers' userfaultfds differ in WP_ASYNC");
	else if (decided && want == PAGER_DIRTY_WP_ASYNC)
		log_info(p->subject, "dirty tracking: wp_async (userfaultfd WP_ASYNC + "
			 "PAGEMAP_SCAN): a re-offload writes only pages written since "
			 "their restore");
	else if (decided)
		log_info(p->subject, "dirty tracking: wp_sync (no UFFD_FEATURE_WP_ASYNC: "
			 "the first write to a restored page faults to vmnapd)");
	return 0;
}

/* The @n-th live range of the tracked mappers within pages [pg, pg+np):
 * its uffd and range.  Lock held.  false: no such range. */
static bool nth_range_locked(struct pager *p, unsigned int n, uint64_t pg, uint64_t np,
			     int *fd, struct uffdio_range *rg)
{
	for (struct pager_mapper *m = p->mappers; m; m = m->next) {
		if (m->dead || !m->wp || !m->registered)
			continue;
		for (unsigned int i = 0; i < p->nr_regions; i++) {
			const struct pager_region *r = &p->regions[i];
			uint64_t lo = r->first_page + m->map_lo[i] / PAGER_PAGE_SIZE;
			uint64_t hi = r->first_page + m->map_hi[i] / PAGER_PAGE_SIZE;

			if (lo < pg)
				lo = pg;
			if (hi > pg + np)
				hi = pg + np;
			if (!m->host_addr[i] || hi <= lo || n--)
				continue;
			*fd = m->uffd;
			*rg = (struct uffdio_range){
				.start = m->host_addr[i] + (lo - r->first_page) * PAGER_PAGE_SIZE,
				.len = (hi - lo) * PAGER_PAGE_SIZE,
			};
			return true;
		}
	}
	return false;
}

/*
 * UFFDIO_WRITEPROTECT says EAGAIN while the VMM changes its mappings and
 * the fault thread has not read the event yet; reading UNMAP and REMAP
 * events takes p->reg_lock, so it is dropped between tries (and the range
 * looked up again: the mapper may have changed or gone).
 */
#define PROTECT_TRIES		1000
#define PROTECT_RETRY_US	1000

unsigned int pager_keep_first(const struct pager_keep *keep, uint64_t pg)
{
	unsigned int lo = 0, hi = keep ? keep->nr : 0;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (keep->pg[mid] < pg)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The segment of [lo, end) that starts at @lo: pages all in @keep (*kept)
 * or none of them.  Its end; *k is an index into @keep at or before the
 * segment's first entry (pager_keep_first), and is advanced.
 */
static uint64_t keep_segment(const struct pager_keep *keep, unsigned int *k,
			     uint64_t lo, uint64_t end, bool *kept)
{
	uint64_t hi = lo;

	*kept = false;
	if (!keep)
		return end;
	while (*k < keep->nr && keep->pg[*k] < lo)
		(*k)++;
	if (*k < keep->nr && keep->pg[*k] == lo) {
		while (hi < end && *k < keep->nr && keep->pg[*k] == hi) {
			(*k)++;
			hi++;
		}
		*kept = true;
		return hi;
	}
	return *k < keep->nr && keep->pg[*k] < end ? keep->pg[*k] : end;
}

static int protect_range(struct pager *p, uint64_t pg, uint64_t np)
{
	unsigned int n = 0, tries = 0;
	int err = 0;

	for (;;) {
		struct uffdio_writeprotect wp = { .mode = UFFDIO_WRITEPROTECT_MODE_WP };
		int fd = -1, r, e = 0;
		bool have;

		pthread_mutex_lock(&p->reg_lock);	/* no uffd closed meanwhile */
		pthread_mutex_lock(&p->lock);
		have = nth_range_locked(p, n, pg, np, &fd, &wp.range);
		pthread_mutex_unlock(&p->lock);
		r = have ? ioctl(fd, UFFDIO_WRITEPROTECT, &wp) : 0;
		if (r < 0)
			e = errno;
		pthread_mutex_unlock(&p->reg_lock);
		if (!have)
			break;
		if (!r || e == ENOENT) {	/* ENOENT: the mapping went */
			n++;
			tries = 0;
			continue;
		}
		if ((e == EAGAIN || e == EINTR) && ++tries < PROTECT_TRIES) {
			usleep(PROTECT_RETRY_US);
			continue;
		}
		err = -e;
		break;
	}
	if (err) {
		log_err(p->subject, "dirty tracking: UFFDIO_WRITEPROTECT: %s", strerror(-err));
		pager_dirty_fallback(p, "UFFDIO_WRITEPROTECT failed");
	}
	return err;
}

int pager_dirty_protect(struct pager *p, uint64_t pg, uint64_t np,
			const struct pager_keep *keep)
{
	unsigned int k = pager_keep_first(keep, pg);
	int err = 0;

	for (uint64_t lo = pg, hi; lo < pg + np && !err; lo = hi) {
		bool kept;

		hi = keep_segment(keep, &k, lo, pg + np, &kept);
		if (!kept)
			err = protect_range(p, lo, hi - lo);
	}
	return err;
}

/* One mapper's live range of region @ri, clipped to pages [pg, pg+n). */
struct scan_range {
	int fd;
	uint64_t start, end;	/* addresses */
	uint64_t first_pg;	/* page at start */
};

int pager_pagemap_scan(int fd, uint64_t start, uint64_t end, uint64_t flags,
		       uint64_t category, struct page_region *vec,
		       void (*fn)(void *arg, uint64_t lo, uint64_t hi), void *arg)
{
	uint64_t at = start;

	while (at < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a), .flags = flags, .start = at, .end = end,
			.vec = (uint64_t)(uintptr_t)vec, .vec_len = PAGER_SCAN_VEC,
			.category_mask = category, .return_mask = category,
		};
		long n = ioctl(fd, PAGEMAP_SCAN, &a);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		for (long i = 0; i < n; i++)
			fn(arg, vec[i].start, vec[i].end);
		if (a.walk_end <= at)
			break;
		at = a.walk_end;
	}
	return 0;
}

struct written_arg {
	const struct scan_range *sr;
	uint64_t pg;
	uint8_t *written;
};

static void note_written(void *arg, uint64_t lo, uint64_t hi)
{
	struct written_arg *w = arg;

	for (uint64_t ad = lo; ad < hi; ad += PAGER_PAGE_SIZE)
		w->written[w->sr->first_pg + (ad - w->sr->start) / PAGER_PAGE_SIZE - w->pg] = 1;
}

/* @sr's pages in @category (PAGE_IS_WRITTEN: written, protected again with
 * @wp but for those in @keep, reported only: they stay writable). */
static int scan_one(const struct scan_range *sr, uint64_t pg, uint8_t *written,
		    struct page_region *vec, const struct pager_keep *keep, bool wp,
		    uint64_t category)
{
	struct written_arg w = { .sr = sr, .pg = pg, .written = written };
	uint64_t end = sr->first_pg + (sr->end - sr->start) / PAGER_PAGE_SIZE;
	unsigned int k = pager_keep_first(keep, sr->first_pg);
	int err = 0;

	for (uint64_t lo = sr->first_pg, hi; lo < end && !err; lo = hi) {
		bool kept;

		hi = keep_segment(keep, &k, lo, end, &kept);
		err = pager_pagemap_scan(sr->fd,
					 sr->start + (lo - sr->first_pg) * PAGER_PAGE_SIZE,
					 sr->start + (hi - sr->first_pg) * PAGER_PAGE_SIZE,
					 (kept || !wp ? 0 : PM_SCAN_WP_MATCHING) |
					 PM_SCAN_CHECK_WPASYNC,
					 category, vec, note_written, &w);
	}
	return err;
}

static int dirty_scan(struct pager *p, uint64_t pg, uint64_t n, uint8_t *written,
		      const struct pager_keep *keep, bool wp, uint64_t category)
{
	struct scan_range *sr;
	struct page_region *vec;
	unsigned int nr = 0, max = PAGER_MAX_MAPPERS * PAGER_MAX_REGIONS;
	int err = 0;

	sr = malloc(max * sizeof(*sr));
	vec = malloc(PAGER_SCAN_VEC * sizeof(*vec));
	if (!sr || !vec) {
		free(sr);
		free(vec);
		return -ENOMEM;
	}
	/* reg_lock: no mapper is freed (its pagemap fd closed) meanwhile */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	for (struct pager_mapper *m = p->mappers; m && nr < max; m = m->next) {
		if (m->dead || !m->wp || !m->registered)
			continue;
		for (unsigned int i = 0; i < p->nr_regions; i++) {
			const struct pager_region *r = &p->regions[i];
			uint64_t lo = r->first_page + m->map_lo[i] / PAGER_PAGE_SIZE;
			uint64_t hi = r->first_page + m->map_hi[i] / PAGER_PAGE_SIZE;

			if (!m->host_addr[i] || hi <= lo)
				continue;
			if (lo < pg)
				lo = pg;
			if (hi > pg + n)
				hi = pg + n;
			if (hi <= lo)
				continue;
			sr[nr++] = (struct scan_range){
				.fd = m->pagemap_fd,
				.start = m->host_addr[i] + (lo - r->first_page) * PAGER_PAGE_SIZE,
				.end = m->host_addr[i] + (hi - r->first_page) * PAGER_PAGE_SIZE,
				.first_pg = lo,
			};
		}
	}
	if (p->track == PAGER_DIRTY_WP_SYNC)
		nr = 0;		/* write faults told us already: nothing to scan */
	else if (p->track != PAGER_DIRTY_WP_ASYNC)
		err = -EOPNOTSUPP;
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < nr && !err; i++)
		err = scan_one(&sr[i], pg, written, vec, keep, wp, category);
	pthread_mutex_unlock(&p->reg_lock);
	free(sr);
	free(vec);
	if (err == -ESRCH)	/* a mapper exited: its writes no longer matter */
		err = 0;
	if (err && err != -EOPNOTSUPP) {
		log_err(p->subject, "dirty tracking: PAGEMAP_SCAN: %s", strerror(-err));
		pager_dirty_fallback(p, "PAGEMAP_SCAN failed");
	}
	if (err)
		memset(written, 1, n);
	return err;
}

int pager_dirty_scan(struct pager *p, uint64_t pg, uint64_t n, uint8_t *written,
		     const struct pager_keep *keep)
{
	return dirty_scan(p, pg, n, written, keep, true, PAGE_IS_WRITTEN);
}

int pager_mapped_peek(struct pager *p, uint8_t *mapped)
{
	return dirty_scan(p, 0, p->npages, mapped, NULL, false, PAGE_IS_PRESENT);
}

/* The aligned sample block of page @pg: [*@lo, returned end), clipped to
 * guest RAM. */
static uint64_t hot_block(const struct pager *p, uint64_t pg, uint64_t *lo)
{
	*lo = pg - pg % PAGER_HOT_SAMPLE_PAGES;
	return *lo + PAGER_HOT_SAMPLE_PAGES < p->npages ? *lo + PAGER_HOT_SAMPLE_PAGES
							: p->npages;
}

/* Has the aligned block of page @b its sample since the last offload's
 * scan (restored in an earlier run)? */
static bool hot_block_sampled(const struct pager *p, uint64_t b)
{
	uint64_t lo, hi = hot_block(p, b, &lo);

	for (uint64_t i = lo; p->hot_marked && i < hi; i++)
		if (p->hot_streak[i] & HOT_SAMPLE)
			return true;
	return false;
}

/* The sample of each aligned block in run [pg, pg+n) that has none yet:
 * one of the block's pages in the run whose writable restores ran out, a
 * different one at each offload (hot_turn); marked, and the others of
 * them HOT_VOUCHED - as are those of a block sampled by an earlier run. */
static void hot_sample_plan(struct pager *p, uint64_t pg, uint64_t n, struct pager_wplan *w)
{
	for (uint64_t b = pg, end; b < pg + n; b = end) {
		uint64_t out = 0, pick = UINT64_MAX, k = 0;

		end = (b / PAGER_HOT_SAMPLE_PAGES + 1) * PAGER_HOT_SAMPLE_PAGES;
		if (end > pg + n)
			end = pg + n;
		for (uint64_t i = b; i < end; i++)
			out += !p->hot[i];
		if (!out)
			continue;
		if (!hot_block_sampled(p, b))
			pick = (p->hot_turn + b / PAGER_HOT_SAMPLE_PAGES) % out;
		for (uint64_t i = b; i < end; i++) {
			if (p->hot[i])
				continue;
			if (k++ == pick) {
				p->hot_streak[i] |= HOT_SAMPLE;
				w->wp[(i - pg) / 64] |= 1ull << ((i - pg) % 64);
			} else {
				p->hot_streak[i] |= HOT_VOUCHED;
			}
		}
	}
}

enum pager_wmap pager_wmap_locked(struct pager *p, uint64_t pg, uint64_t n, bool stream,
				  struct pager_wplan *w)
{
	uint64_t out = 0, again = 0;

	memset(w, 0, sizeof(*w));
	w->how = PAGER_WMAP_PROTECTED;
	if (p->offloading || !n)
		return w->how;
	for (uint64_t i = pg; i < pg + n; i++)
		if (!p->hot[i]) {
			out++;
			again += (p->hot_streak[i] & HOT_STREAK_MASK) != 0;
		}
	if (!out)
		w->how = PAGER_WMAP_HOT;
	else if (stream)
		w->how = PAGER_WMAP_STREAM;
	else if (again == out && p->track == PAGER_DIRTY_WP_ASYNC &&
		 n <= PAGER_MAX_FAULT_AROUND) {
		/* never more faults than protecting them all, and a sample
		 * taken now serves the block's later runs too */
		w->how = PAGER_WMAP_SAMPLED;
		hot_sample_plan(p, pg, n, w);
		p->hot_marked = true;
	}
	return w->how;
}

void pager_wmap_done_locked(struct pager *p, uint64_t pg, uint64_t n,
			    const struct pager_wplan *w)
{
	for (uint64_t i = 0; i < n; i++) {
		if (pager_wplan_wp(w, i)) {	/* a sample: CLEAN until written */
			p->hot_samples++;
			continue;
		}
		if (w->how == PAGER_WMAP_STREAM) {
			p->dirty_stream++;
		} else if (p->hot[pg + i]) {
			p->hot[pg + i]--;
			p->dirty_hot++;
		} else {
			p->hot_vouched++;
		}
		pager_dirty_note_locked(p, pg + i);
	}
}

void pager_hot_scan_locked(struct pager *p, uint64_t pg, bool written)
{
	uint64_t b, end;

	if (!p->hot_marked || !(p->hot_streak[pg] & HOT_SAMPLE))
		return;
	end = hot_block(p, pg, &b);
	for (uint64_t i = b; i < end; i++) {
		if (!(p->hot_streak[i] & HOT_VOUCHED))
			continue;
		p->hot_streak[i] &= (uint8_t)~HOT_VOUCHED;
		if (written) {	/* as its sample: hot for twice as long */
			pager_hot_extend_locked(p, i);
			p->hot_vouch_renewed++;
		} else {	/* as its sample: starts over, its own check next */
			p->hot_streak[i] &= (uint8_t)~HOT_STREAK_MASK;
			p->hot_vouch_dropped++;
		}
	}
}

void pager_hot_scan_end_locked(struct pager *p)
{
	for (uint64_t i = 0; p->hot_marked && i < p->npages; i++)
		p->hot_streak[i] &= HOT_STREAK_MASK;
	p->hot_marked = false;
	p->hot_turn++;
}

static void count_written(void *arg, uint64_t lo, uint64_t hi)
{
	*(uint64_t *)arg += (hi - lo) / PAGER_PAGE_SIZE;
}

uint64_t pager_dirty_written_locked(struct pager *p, struct pager_mapper *m,
				    uint64_t pg, uint64_t n)
{
	struct page_region vec[PAGER_SCAN_VEC];
	uint64_t host, written = 0;

	if (p->track == PAGER_DIRTY_WP_SYNC) {
		for (uint64_t i = pg; i < pg + n; i++)
			written += pg_state(p, i) == PAGE_RESIDENT;
		return written;
	}
	if (p->track != PAGER_DIRTY_WP_ASYNC || m->pagemap_fd < 0 ||
	    !(host = pg_mapper_addr_locked(p, m, pg, n)))
		return 0;
	/* report only: the entries keep their uffd-wp bits for the next
	 * offload's scan.  An error (the process exiting) counts nothing. */
	if (pager_pagemap_scan(m->pagemap_fd, host, host + n * PAGER_PAGE_SIZE, 0,
			       PAGE_IS_WRITTEN, vec, count_written, &written))
		return 0;
	return written;
}
