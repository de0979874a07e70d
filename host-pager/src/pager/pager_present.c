// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_present.c - which guest pages a mapper maps now.  Writing the
 * memfd (a background restore, fault-around's neighbours) maps nothing;
 * a mapper's access maps the page (and, the kernel's own fault-around,
 * its neighbours already in the memfd).  So the present bits of each
 * mapper's /proc/PID/pagemap tell what was accessed since a page came
 * back: the working set's background pages, fault-around's hits, the
 * resume-critical set's window.
 */
#include <stdlib.h>
#include <unistd.h>

#include "pager_internal.h"

/* Pagemap entries read per pread (8 bytes each). */
#define PM_CHUNK	4096
#define PM_PRESENT	(1ull << 63)

/* One mapper's live range of a region, clipped: pagemap fd, first
 * address, pages. */
struct pm_range {
	int fd;
	uint64_t addr, pg, n;
};

struct present_arg {
	struct pager *p;
	const struct pm_range *rg;
	pager_present_fn fn;
	void *arg;
};

static void present_range(void *arg, uint64_t lo, uint64_t hi)
{
	struct present_arg *a = arg;

	pthread_mutex_lock(&a->p->lock);
	a->fn(a->p, a->rg->pg + (lo - a->rg->addr) / PAGER_PAGE_SIZE,
	      (hi - lo) / PAGER_PAGE_SIZE, a->arg);
	pthread_mutex_unlock(&a->p->lock);
}

/*
 * The present pages of @rg by PAGEMAP_SCAN: one range per run of present
 * pages instead of 8 bytes per page.  -errno where the kernel lacks it
 * (before 6.7: ENOTTY) or refuses the range.
 */
static int present_scan(struct present_arg *a, struct page_region *vec)
{
	return pager_pagemap_scan(a->rg->fd, a->rg->addr,
				  a->rg->addr + a->rg->n * PAGER_PAGE_SIZE, 0,
				  PAGE_IS_PRESENT, vec, present_range, a);
}

/* The same by reading @rg's pagemap entries (bit 63: present).  False if
 * they could not all be read. */
static bool present_read(struct present_arg *a, uint64_t *ent)
{
	const struct pm_range *rg = a->rg;

	for (uint64_t k = 0; k < rg->n;) {
		uint64_t want = rg->n - k < PM_CHUNK ? rg->n - k : PM_CHUNK;
		off_t at = (off_t)((rg->addr / PAGER_PAGE_SIZE + k) * sizeof(*ent));
		ssize_t got = pread(rg->fd, ent, want * sizeof(*ent), at);

		if (got <= 0)
			return false;
		want = (uint64_t)got / sizeof(*ent);
		pthread_mutex_lock(&a->p->lock);
		for (uint64_t j = 0; j < want; j++)
			if (ent[j] & PM_PRESENT)
				a->fn(a->p, rg->pg + k + j, 1, a->arg);
		pthread_mutex_unlock(&a->p->lock);
		k += want;
	}
	return true;
}

bool pager_for_each_present(struct pager *p, uint64_t lo, uint64_t hi, pager_present_fn fn,
			    void *arg)
{
	unsigned int nr = 0, max = PAGER_MAX_MAPPERS * PAGER_MAX_REGIONS;
	struct page_region *vec;
	struct pm_range *rg;
	uint64_t *ent;
	bool all = true;

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
			uint64_t a, b;

			if (!m->host_addr[i] || m->map_hi[i] <= m->map_lo[i])
				continue;
			/* the mapped pages of the region, clipped to [lo, hi) */
			a = r->first_page + m->map_lo[i] / PAGER_PAGE_SIZE;
			b = r->first_page + m->map_hi[i] / PAGER_PAGE_SIZE;
			a = a > lo ? a : lo;
			b = b < hi ? b : hi;
			if (a >= b)
				continue;
			rg[nr++] = (struct pm_range){
				.fd = m->pagemap_fd,
				.addr = m->host_addr[i] + (a - r->first_page) * PAGER_PAGE_SIZE,
				.pg = a,
				.n = b - a,
			};
		}
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned int i = 0; i < nr; i++) {
		struct present_arg a = { .p = p, .rg = &rg[i], .fn = fn, .arg = arg };

		if (present_scan(&a, vec) && !present_read(&a, ent))
			all = false;
	}
	pthread_mutex_unlock(&p->reg_lock);
out:
	free(rg);
	free(ent);
	free(vec);
	return all;
}
