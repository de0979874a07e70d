// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_follow.c - fault-order prefetch.  The pages a command faults back
 * after an offload lie scattered over guest RAM, so fault-around seldom
 * finds a used neighbour; but the next commands fault many of the same
 * pages again, in much the same order (the shell, its libraries, the
 * agent that runs them, the files they read), some of them only every
 * few commands.  So the pager keeps, for each of the last
 * PAGER_FOLLOW_CYCLES data cycles (from a resume by the VM's restore
 * policy to the next offload; a guest timer's resume names its restore,
 * and what runs after it is not recorded), the pages it brought back in
 * the order they were first asked for (at most PAGER_FOLLOW_MAX_PAGES;
 * 512 KiB per VM), and for every page where the newest of those orders
 * that holds it has it (4 bytes per guest page).  When a later data cycle
 * faults on such a page, the cfg.follow_pages pages that came after it
 * there and are still offloaded are queued for the prefetch thread, which
 * reads them before any working-set page, with several reads in flight,
 * and writes them into the memfd unmapped (CLEAN, as every background
 * restore): the guest's access then costs its mapper a minor fault
 * instead of a userfaultfd round trip and a store read.  The newest order
 * alone, not every order holding the page: on fault traces of the replay
 * benchmark's trajectories it left fewer faults for fewer unused pages
 * than following the last 3 orders each.
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
	ok &= !!(p->fol_last = calloc(p->npages, sizeof(uint32_t)));
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
	free(p->fol_last);
	p->fol_cur = NULL;
	p->fol_last = NULL;
	p->fol_on = false;
}

void pager_follow_resumed_locked(struct pager *p, bool data)
{
	/* a timer's resume before the offload that ends a data cycle stops
	 * the recording but keeps the cycle a data cycle (cycle_saw_data) */
	p->fol_rec = p->fol_on && data;
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

#define FOL_POS_BITS	16	/* p->fol_last: slot + 1 above the position */
_Static_assert(PAGER_FOLLOW_MAX_PAGES <= 1u << FOL_POS_BITS, "positions fit fol_last");

/* The slot of the newest kept order holding page @pg, and @pg's position
 * in it; -1 if none does (never held, or that order's slot was reused
 * since: what the slot holds now at that position is another page). */
static int newest(const struct pager *p, uint64_t pg, uint32_t *pos)
{
	uint32_t v = p->fol_last[pg];
	unsigned int slot = (v >> FOL_POS_BITS) - 1;

	*pos = v & ((1u << FOL_POS_BITS) - 1);
	if (!v || slot >= PAGER_FOLLOW_CYCLES || *pos >= p->fol_old_n[slot] ||
	    p->fol_old[slot][*pos] != pg)
		return -1;
	return (int)slot;
}

bool pager_follow_fault_locked(struct pager *p, uint64_t pg, uint64_t start, uint64_t n)
{
	bool queued = false;
	uint32_t pos;
	int k;

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
	k = newest(p, pg, &pos);
	for (uint32_t q = pos + 1; k >= 0 && q < p->fol_old_n[k] &&
	     q <= pos + p->cfg.follow_pages; q++)
		queued |= enqueue(p, p->fol_old[k][q]);
	return queued;
}

uint64_t pager_follow_next_locked(struct pager *p, uint64_t *pg, uint64_t max)
{
	while (p->fol_qn) {
		uint32_t f = p->fol_q[p->fol_qhead];
		uint64_t want = 1, n = 0;

		/* queued consecutive pages: one read */
		while (want < p->fol_qn && want < PAGER_MAX_FOLLOW && want < max &&
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

void pager_follow_cycle_end_locked(struct pager *p)
{
	uint32_t kept = 0, *old;
	unsigned int slot;

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
	if (!p->cycle_saw_data || !kept) {
		p->fol_cur_n = 0;
		return;
	}
	/* it takes the oldest one's slot (whose pages' fol_last go stale),
	 * and is the newest order of each of its pages */
	slot = p->fol_next;
	p->fol_next = (slot + 1) % PAGER_FOLLOW_CYCLES;
	old = p->fol_old[slot];
	p->fol_old[slot] = p->fol_cur;
	p->fol_old_n[slot] = kept;
	p->fol_cur = old;
	p->fol_cur_n = 0;
	for (uint32_t pos = 0; pos < kept; pos++)
		p->fol_last[p->fol_old[slot][pos]] = (slot + 1) << FOL_POS_BITS | pos;
}
