// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_follow.c - fault-order prefetch.  The pages a command faults back
 * after an offload lie scattered over guest RAM, so fault-around seldom
 * finds a used neighbour; but the next commands fault many of the same
 * pages again, in much the same order (the shell, its libraries, the
 * agent that runs them, the files they read).  So the pager keeps, for
 * each of the last PAGER_FOLLOW_CYCLES data cycles (from a resume by the
 * VM's restore policy to the next offload; a guest timer's resume names
 * its restore, and what runs after it is not recorded), the pages it
 * brought back in the order they were first asked for (at most
 * PAGER_FOLLOW_MAX_PAGES; about 320 KiB per VM in all, with the index).
 * When a later data cycle faults on a page such an order holds, the
 * cfg.follow_pages pages that came after it there and are still offloaded
 * are queued for the prefetch thread, which reads them before any
 * working-set page, with several reads in flight, and writes them into
 * the memfd unmapped (CLEAN, as every background restore): the guest's
 * access then costs its mapper a minor fault instead of a userfaultfd
 * round trip and a store read.
 *
 * Like fault-around's neighbours, queued pages are marked (p->fa =
 * FA_FOLLOW) and counted when the cycle ends: mapped by some mapper, a
 * hit; in the memfd but never mapped, a miss (the next offload punches it
 * with no write: its slot is still valid).  A page faulted while queued
 * is late.  A page used without a fault leaves no fault to record, so a
 * cycle's order records queued pages in their place, and drops them at
 * the cycle end unless they were hits.
 */
#include <errno.h>
#include <stdlib.h>

#include "log.h"
#include "pager_internal.h"

#define FOL_DEDUP	0x80u	/* p->fa: already kept in this cycle's order */

int pager_follow_init(struct pager *p)
{
	bool ok = true;

	if (!p->cfg.follow_pages)
		return 0;
	if (p->npages > UINT32_MAX) {
		log_warn(p->subject, "fault-order prefetch off: %llu pages do not fit "
			 "its 32-bit page numbers", (unsigned long long)p->npages);
		return 0;
	}
	for (unsigned int k = 0; k < PAGER_FOLLOW_CYCLES; k++)
		ok &= !!(p->fol_old[k] = malloc(PAGER_FOLLOW_MAX_PAGES * sizeof(uint32_t)));
	ok &= !!(p->fol_cur = malloc(PAGER_FOLLOW_MAX_PAGES * sizeof(uint32_t)));
	ok &= !!(p->fol_idx = malloc(PAGER_FOLLOW_CYCLES * PAGER_FOLLOW_MAX_PAGES *
				     sizeof(uint64_t)));
	if (!ok) {
		pager_follow_free(p);
		return -ENOMEM;
	}
	p->fol_on = true;
	return 0;
}

void pager_follow_free(struct pager *p)
{
	for (unsigned int k = 0; k < PAGER_FOLLOW_CYCLES; k++) {
		free(p->fol_old[k]);
		p->fol_old[k] = NULL;
	}
	free(p->fol_cur);
	free(p->fol_idx);
	p->fol_cur = NULL;
	p->fol_idx = NULL;
	p->fol_on = false;
}

void pager_follow_resumed_locked(struct pager *p, bool data)
{
	/* a timer's resume before the offload that ends a data cycle stops
	 * the recording but keeps the cycle a data cycle */
	p->fol_rec = p->fol_on && data;
	p->fol_data |= p->fol_rec;
}

static void record(struct pager *p, uint64_t pg)
{
	if (p->fol_cur_n < PAGER_FOLLOW_MAX_PAGES)
		p->fol_cur[p->fol_cur_n++] = (uint32_t)pg;
}

/* Queue @pg if it is offloaded, in a memfd (the prefetcher writes it
 * there) and not marked yet. */
static bool enqueue(struct pager *p, uint64_t pg)
{
	const struct pager_region *r;

	if (pg >= p->npages || p->fa[pg] || pg_state(p, pg) != PAGE_OFFLOADED ||
	    p->fol_qn == PAGER_FOLLOW_QUEUE)
		return false;
	r = pg_region(p, pg);
	if (!r || r->memfd < 0)
		return false;
	p->fa[pg] = FA_FOLLOW;
	p->fol_q[(p->fol_qhead + p->fol_qn++) % PAGER_FOLLOW_QUEUE] = (uint32_t)pg;
	p->fol_queued++;
	record(p, pg);
	return true;
}

/* The first index entry of page @pg (or where it would be). */
static uint32_t idx_find(const struct pager *p, uint64_t pg)
{
	uint32_t lo = 0, hi = p->fol_idx_n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (p->fol_idx[mid] >> 32 < pg)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool pager_follow_fault_locked(struct pager *p, uint64_t pg, uint64_t start, uint64_t n)
{
	bool queued = false;

	if (!p->fol_on)
		return false;
	for (uint64_t i = start; i < start + n; i++)
		if (p->fa[i] == FA_FOLLOW) {	/* the fault serves it now */
			p->fa[i] = 0;
			p->fol_late += i == pg;
		}
	if (!p->fol_rec)
		return false;
	record(p, pg);
	for (uint32_t j = idx_find(p, pg); j < p->fol_idx_n && p->fol_idx[j] >> 32 == pg; j++) {
		unsigned int k = (unsigned int)(p->fol_idx[j] >> 24) & 0xff;
		uint32_t pos = (uint32_t)p->fol_idx[j] & 0xffffff;

		for (uint32_t q = pos + 1; q < p->fol_old_n[k] && q <= pos + p->cfg.follow_pages; q++)
			queued |= enqueue(p, p->fol_old[k][q]);
	}
	return queued;
}

uint64_t pager_follow_next_locked(struct pager *p, uint64_t *pg)
{
	while (p->fol_qn) {
		uint32_t f = p->fol_q[p->fol_qhead];
		uint64_t want = 1, n = 0;

		/* queued consecutive pages: one read */
		while (want < p->fol_qn && want < PAGER_MAX_FOLLOW &&
		       p->fol_q[(p->fol_qhead + want) % PAGER_FOLLOW_QUEUE] == f + want)
			want++;
		if (p->fa[f] == FA_FOLLOW) {	/* else a fault took it meanwhile */
			n = pager_claim_run_locked(p, f, want, 0);
			if (!n)		/* resident by another way: not ours */
				p->fa[f] = 0;
		}
		want = n ? n : 1;
		p->fol_qhead = (uint32_t)((p->fol_qhead + want) % PAGER_FOLLOW_QUEUE);
		p->fol_qn -= (uint32_t)want;
		if (n) {
			*pg = f;
			return n;
		}
	}
	return 0;
}

void pager_follow_installed_locked(struct pager *p, uint64_t n)
{
	p->fol_installed += n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void pager_follow_cycle_end_locked(struct pager *p)
{
	uint32_t kept = 0, *old;

	p->fol_qn = 0;
	p->fol_qhead = 0;
	if (!p->fol_on)
		return;
	/* this cycle's order: what was asked for, once, without misses
	 * (queued pages still marked were never mapped) */
	for (uint32_t i = 0; i < p->fol_cur_n; i++) {
		uint32_t pg = p->fol_cur[i];

		if (p->fa[pg] & (FA_FOLLOW | FOL_DEDUP))
			continue;
		p->fa[pg] |= FOL_DEDUP;
		p->fol_cur[kept++] = pg;
	}
	for (uint32_t i = 0; i < kept; i++)
		p->fa[p->fol_cur[i]] &= (uint8_t)~FOL_DEDUP;
	p->fol_cur_n = kept;
	p->fol_rec = false;
	if (!p->fol_data || !kept) {
		p->fol_cur_n = 0;
		p->fol_data = false;
		return;
	}
	/* it becomes the newest old one, the oldest is reused */
	old = p->fol_old[PAGER_FOLLOW_CYCLES - 1];
	for (unsigned int k = PAGER_FOLLOW_CYCLES - 1; k > 0; k--) {
		p->fol_old[k] = p->fol_old[k - 1];
		p->fol_old_n[k] = p->fol_old_n[k - 1];
	}
	p->fol_old[0] = p->fol_cur;
	p->fol_old_n[0] = kept;
	p->fol_cur = old;
	p->fol_cur_n = 0;
	p->fol_data = false;
	p->fol_idx_n = 0;
	for (unsigned int k = 0; k < PAGER_FOLLOW_CYCLES; k++)
		for (uint32_t pos = 0; pos < p->fol_old_n[k]; pos++)
			p->fol_idx[p->fol_idx_n++] = (uint64_t)p->fol_old[k][pos] << 32 |
						     (uint64_t)k << 24 | pos;
	qsort(p->fol_idx, p->fol_idx_n, sizeof(*p->fol_idx), cmp_u64);
}
