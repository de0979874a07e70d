// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_tail.c - the command's last writes.  When the agent's data comes
 * back, the guest's way from the vsock socket to the agent faults on pages
 * the command before wrote: the connection's socket and its slab pages,
 * the agent's buffers.  The same pages are written at the command's start
 * and again at its end, and their last write is what tells them apart from
 * the tens of thousands of others the command wrote: measured on the heavy
 * replay trajectory, a third of the data path's faults fell on pages
 * written in the last 100 ms before the wait began, a few hundred pages.
 *
 * So while the VM runs a command (the coordinator's RUNNING, told by
 * pager_tail_track; before the VM has a coordinator, for a while:
 * pager_tail_track_start), the offload worker scans every tracked mapper for
 * written pages every PAGER_TAIL_TICK_MS (less often where a scan would
 * take more than 1/PAGER_TAIL_DUTY of that), write-protecting them again as
 * an offload's scan does (each later write costs the writer one
 * asynchronous write-protect fault, resolved by the kernel), and keeps a
 * bit a page for each of the last seven ticks: written in it or not.
 * When the wait begins, a last scan closes the current tick and the pages
 * written in it or the one before (at most PAGER_TAIL_MAX_PAGES: those
 * written in more of the seven first; none of the resume-critical set's)
 * become the tail set, which the wait's
 * offloads leave resident like the resume-critical set (pager_offload.c,
 * with critical_resident and tail_resident).  A tick
 * applies what it finds as an offload's scan would (a written CLEAN page
 * becomes RESIDENT), and remembers it (TAIL_SINCE) for the next offload's
 * scan, which would not see those writes again: the write-hot checks
 * (pager_hot_scan_locked) count them.
 *
 * Kept resident, the set's pages cannot fault in the data resume, so the
 * resume-critical set cannot learn them from faults.  So the wait's first
 * offload takes the set out with the rest (stored, punched: no mapper maps
 * its pages any more) and then reads it back into the memfd alone
 * (pager_tail_install), CLEAN and mapped by no one (an offload that is
 * stopped, a guest timer due or the data come, leaves that to the next);
 * the later offloads of the wait keep it.  A mapper that touches such a
 * page, read or write, maps it (a host page fault the kernel serves from
 * the memfd; with userfaultfd write-protect registered, no fault-around
 * maps its neighbours), so at the delivery the set's pages some mapper
 * maps are the ones the resumes touched (the data's way: the socket's
 * buffers, the agent's; a timer's wake path): tail_learn notes them in
 * the resume-critical set (a PAGEMAP_SCAN for present pages that protects
 * nothing) and drops them from the set.  Before the first offload
 * nothing is registered: the pager registers write-protect alone to scan
 * (pager_register_wp_early).
 *
 * Only with asynchronous write-protect (wp_async): with wp_sync every such
 * write would be a round trip through vmnapd.  A page a command keeps
 * writing takes a fault after every tick, which on the heavy replay
 * trajectory cost the commands more time than the set spared the
 * deliveries once the resume-critical set had learned the data path.  So
 * PAGER_TAIL_FIRST ticks only until that set has pages: the first data
 * resumes, which nothing learned before, are the ones the set spares most.
 * And a command's ticks stop once they have found cfg.tail_budget_pages
 * written pages (tail_spend_locked): a command that keeps rewriting its
 * memory would take a fault a page every tick (on the heavy trajectory,
 * on a shadow-paging host, one such command ran twice as long scanned).
 * No command is scanned once PAGER_TAIL_IDLE_SETS sets in a row were made
 * with no offload ended since (a VM whose waits are not offloaded: no set
 * of it would serve), until one ends.
 * The scans before the VM's first wait (pager_tail_track_start: its
 * boot, its agent starting) have a time limit instead (the first wait may
 * begin as soon as a coordinator comes, and its set is theirs),
 * and while each finds more written pages than a set holds, the next
 * comes twice as late, up to PAGER_TAIL_START_GAP_MS (tail_gap_locked).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

static const char *const tail_names[PAGER_TAILS] = {
	[PAGER_TAIL_OFF] = "off",
	[PAGER_TAIL_FIRST] = "first",
	[PAGER_TAIL_ALWAYS] = "always",
};

const char *pager_tail_name(enum pager_tail t)
{
	return pager_name_of(tail_names, PAGER_TAILS, (unsigned int)t);
}

int pager_tail_parse(const char *s, enum pager_tail *out)
{
	int i = pager_name_index(tail_names, PAGER_TAILS, s);

	if (i < 0)
		return i;
	*out = (enum pager_tail)i;
	return 0;
}

void pager_tail_command(struct pager *p, bool on, uint64_t until_ns)
{
	pthread_mutex_lock(&p->lock);
	/* a command runs: no limit; a limit only where none runs.  The
	 * ticks before it (the VM's boot, its agent starting) have their
	 * time limit, not a budget: the command's starts from nothing */
	if (on && (!until_ns || !p->tail_ticking || p->tail_until_ns)) {
		if (p->tail_until_ns && p->tail_ticking) {
			/* ... and ticks at once, then every PAGER_TAIL_TICK_MS
			 * (backing off again if the guest still writes much):
			 * so also when the limit is renewed (a coordinator
			 * came, a mapper): the first wait may be near */
			p->tail_run_pages = 0;
			p->tail_gap_ns = 0;
			p->tail_next_ns = 0;
			pthread_cond_signal(&p->offload_cv);
		}
		p->tail_until_ns = until_ns;
	}
	if (p->track != PAGER_DIRTY_WP_ASYNC || (on && p->tail_ticking)) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (on) {
		/* a command runs: the last wait's set has served; with "first",
		 * once the resume-critical set knows the data path, no more */
		p->tail_nr = 0;
		p->tail_installed = false;
		p->tail_ticking = p->cfg.tail_resident == PAGER_TAIL_ALWAYS || !p->crit_nr;
		if (p->tail_ticking && p->tail_idle_sets >= PAGER_TAIL_IDLE_SETS) {
			/* the last sets served no offload: nor would this */
			p->tail_ticking = false;
			p->tail_idle_stops++;
		}
		p->tail_run_ticks = 0;
		p->tail_run_pages = 0;
		p->tail_gap_ns = 0;
		p->tail_spent = false;
	} else if (p->tail_ticking) {
		/* a command whose ticks ran out of budget gets no set */
		p->tail_ticking = false;
		p->tail_freeze = !p->tail_spent;
		p->tail_spent = false;
	}
	pthread_cond_signal(&p->offload_cv);	/* the worker ticks */
	pthread_mutex_unlock(&p->lock);
}

/* The command's ticks have found cfg.tail_budget_pages written pages,
 * each a write-protect fault its writer took, and would go on costing it
 * one a page it rewrites every tick: no more ticks, and its wait makes no
 * set (a command that writes that much has more than a set's worth in its
 * last ticks too).  Its writes stay noted for the next offload
 * (TAIL_SINCE).  Lock held. */
static void tail_spend_locked(struct pager *p)
{
	p->tail_spent = true;
	p->tail_budget_stops++;
	for (uint64_t pg = 0; pg < p->npages; pg++)
		p->tail[pg] &= TAIL_SINCE;
	log_info(p->subject, "the command's last writes: its scans found %llu written page(s) "
		 "in %llu tick(s), over the budget of %u: not scanned any more, no set for its "
		 "wait", (unsigned long long)p->tail_run_pages,
		 (unsigned long long)p->tail_run_ticks, p->cfg.tail_budget_pages);
}

/* Scan for the pages written since the last scan (protecting them again,
 * but for the resume-critical set's, which the offloads keep writable:
 * snapshot into @keep_pg, room for PAGER_KEEP_MAX_PAGES), and move the
 * tick on.  How many pages the snapshot holds; the written pages found in
 * *@written_out.  Ticks run only with critical_resident
 * (pager_tail_track).  Offload worker. */
static unsigned int tail_tick(struct pager *p, uint64_t *keep_pg, uint64_t *written_out)
{
	struct pager_keep keep = { .pg = keep_pg };
	uint64_t found = 0, written = 0;
	bool fresh;

	*written_out = 0;
	pthread_mutex_lock(&p->lock);
	keep.nr = pager_critical_snapshot_locked(p, keep_pg);
	fresh = p->tail_fresh;
	p->tail_fresh = false;
	pthread_mutex_unlock(&p->lock);
	memset(p->tail_scan, 0, p->npages);
	if (pager_dirty_scan(p, 0, p->npages, p->tail_scan, &keep)) {
		/* tracking fell back (said and counted there): no ticks */
		pthread_mutex_lock(&p->lock);
		p->tail_ticking = false;
		pthread_mutex_unlock(&p->lock);
		return keep.nr;
	}
	pthread_mutex_lock(&p->lock);
	for (uint64_t pg = 0; pg < p->npages; pg++) {
		/* the ticks move on: the oldest falls off */
		uint8_t b = (uint8_t)((p->tail[pg] & TAIL_SINCE) |
				      (((p->tail[pg] & TAIL_AGE) >> 1) & TAIL_AGE));

		if (p->tail_scan[pg]) {
			/* (a mapper's first scan finds every page it touched:
			 * not a last write, but written all the same) */
			b |= (fresh ? 0 : TAIL_CUR) | TAIL_SINCE;
			/* a fault only where the page was there to write: an
			 * empty entry with no write-protect marker reads as
			 * written too (one tick right after an offload found
			 * 3511 of a 4096-page mock's pages "written", before
			 * any write) */
			written += !fresh && (pg_state(p, pg) == PAGE_RESIDENT ||
					      pg_state(p, pg) == PAGE_CLEAN);
			found += pager_dirty_seen_locked(p, pg);	/* as an offload's scan */
		}
		p->tail[pg] = b;
	}
	p->dirty_scanned += found;
	p->tail_ticks++;
	p->tail_run_ticks++;
	p->tail_tick_pages += written;
	p->tail_run_pages += written;
	if (!p->tail_spent && !p->tail_until_ns && p->tail_run_pages >= p->cfg.tail_budget_pages)
		tail_spend_locked(p);
	pthread_mutex_unlock(&p->lock);
	*written_out = written;
	return keep.nr;
}

/* A page's rank for the set: how many of the last seven ticks wrote it,
 * then by the age byte's value (the more recent writes first).
 * TAIL_RANKS of them. */
#define TAIL_RANKS	(8u << 7)
static unsigned int tail_rank(uint8_t b)
{
	return (unsigned int)__builtin_popcount(b & TAIL_AGE) << 7 | (b & TAIL_AGE) >> 1;
}

/* Page @pg's rank + 1 if it may join the set (written in the last two
 * ticks, in the memfd, not the resume-critical set's in @keep), else 0.
 * Lock held. */
static unsigned int tail_candidate(const struct pager *p, const struct pager_keep *keep,
				   uint64_t pg)
{
	enum pager_page_state s = pg_state(p, pg);
	unsigned int k;

	if (!(p->tail[pg] & (TAIL_CUR | TAIL_PREV)) || (s != PAGE_RESIDENT && s != PAGE_CLEAN))
		return 0;
	k = pager_keep_first(keep, pg);
	if (k < keep->nr && keep->pg[k] == pg)
		return 0;	/* the resume-critical set's */
	return tail_rank(p->tail[pg]) + 1;
}

/* The wait began: the last two ticks' pages become the set; if they are
 * more than it holds, those written in more of the last seven ticks
 * first, then the more recent.  Of a guest at rest, scanned 1.6 s apart
 * (tail_gap_locked), the last two scans find 750-2650 pages: most are
 * written once (files, fresh allocations), and those the first data
 * resume touched were mostly written in every tick (measured on both
 * replay trajectories: of the touched pages among them, 65-85 of 86-102
 * in a set ranked so, 36-72 in one of the lowest-numbered, the current
 * tick's first).  Offload worker. */
static void tail_freeze(struct pager *p)
{
	uint64_t written, keep_pg[PAGER_KEEP_MAX_PAGES];
	struct pager_keep keep = { .pg = keep_pg };
	unsigned int n = 0, cut = 0, at_cut = PAGER_TAIL_MAX_PAGES;
	uint32_t ranked[TAIL_RANKS] = { 0 };

	pthread_mutex_lock(&p->lock);
	if (!p->tail_run_ticks || p->tail_spent) {
		/* no tick while the command ran (the worker had not started):
		 * a scan now would find everything written since the last
		 * offload, not the command's last writes; or its ticks ran
		 * out of budget after its wait began */
		p->tail_spent = false;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	pthread_mutex_unlock(&p->lock);
	keep.nr = tail_tick(p, keep_pg, &written);
	pthread_mutex_lock(&p->lock);
	if (p->tail_spent) {	/* the last scan ran it out */
		p->tail_spent = false;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	for (uint64_t pg = 0; pg < p->npages; pg++) {
		unsigned int c = tail_candidate(p, &keep, pg);

		if (c)
			ranked[c - 1]++;
	}
	/* the rank where the set fills (taking at_cut of that rank's pages,
	 * the lowest-numbered), or none: every candidate fits */
	for (unsigned int r = TAIL_RANKS, taken = 0; r-- > 0;) {
		if (taken + ranked[r] >= PAGER_TAIL_MAX_PAGES) {
			cut = r;
			at_cut = PAGER_TAIL_MAX_PAGES - taken;
			break;
		}
		taken += ranked[r];
	}
	for (uint64_t pg = 0; pg < p->npages && n < PAGER_TAIL_MAX_PAGES; pg++) {
		unsigned int c = tail_candidate(p, &keep, pg);

		if (!c || c - 1 < cut || (c - 1 == cut && !at_cut))
			continue;
		at_cut -= c - 1 == cut;
		p->tail_pg[n++] = pg;
	}
	p->tail_nr = n;	/* in page order */
	p->tail_installed = false;	/* the first offload stores it */
	p->tail_sets++;
	p->tail_idle_sets++;
	for (uint64_t pg = 0; pg < p->npages; pg++)
		p->tail[pg] &= TAIL_SINCE;
	pthread_mutex_unlock(&p->lock);
	log_debug(p->subject, "the command's last writes: %u page(s) kept through the wait", n);
}

/* The data came: the set's pages some mapper maps again were touched on
 * its way (a socket's buffers, the agent's) or a timer's: into the
 * resume-critical set, which could not see them fault.  Such a page
 * leaves the set: mapped, it stays mapped through the wait, so each later
 * delivery would teach it again, as if touched then, and push out what
 * those resumes did fault on (a set taught every resume of a long first
 * wait: 770-1720 pages for sets of 300-360, on the main replay
 * trajectory).  From then on the resume-critical set keeps it or, once it
 * has aged out of it, the next offload takes it out.  Offload worker. */
static void tail_learn(struct pager *p)
{
	uint64_t learned = 0;
	unsigned int n = 0;
	int err;

	memset(p->tail_scan, 0, p->npages);
	err = pager_mapped_peek(p, p->tail_scan);
	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; !err && i < p->tail_learn_nr; i++)
		if (p->tail_scan[p->tail_learn_pg[i]])
			learned += pager_critical_learn_locked(p, p->tail_learn_pg[i]);
	/* the set may be another by now (a command dropped it, a wait made
	 * one): whatever it is, what is mapped and resume-critical leaves */
	for (unsigned int i = 0; !err && i < p->tail_nr; i++) {
		uint64_t pg = p->tail_pg[i];

		if (!p->tail_scan[pg] || !(p->state[pg] & PG_CRIT))
			p->tail_pg[n++] = pg;
	}
	if (!err)
		p->tail_nr = n;
	p->tail_learned += learned;
	p->tail_learn_nr = 0;
	pthread_mutex_unlock(&p->lock);
	log_debug(p->subject, "the command's last writes: %llu page(s) touched on the way to "
		  "the delivery, now resume-critical", (unsigned long long)learned);
}

/* The time from this tick to the next: PAGER_TAIL_TICK_MS, but before the
 * first wait (the guest boots, its agent starts: no budget there, a
 * time limit) twice the last, up to PAGER_TAIL_START_GAP_MS, while each
 * tick finds more written pages than a set holds (@written, this
 * one's).  The guest is busy
 * then, not at rest before a wait, and every tick costs it a fault for
 * each page it keeps rewriting: scanned every 100 ms, a boot of the heavy
 * replay trajectory took 88-90 thousand, seconds on a shadow-paging
 * host.  Once a tick finds fewer, every PAGER_TAIL_TICK_MS again, so that
 * the set is the last writes of a guest come to rest.  One at rest may
 * still write more than a set holds in the longest gap (before the heavy
 * trajectory's first wait, 1200-2500 pages in 1.6 s): it stays scanned
 * that far apart, and its set is the PAGER_TAIL_MAX_PAGES of the last
 * scans' pages written in the most ticks (tail_freeze), not the last
 * 200 ms's.  That is the backoff's price; it took a heavy boot's faults
 * from 88-90 thousand to 54.  Lock held. */
static uint64_t tail_gap_locked(struct pager *p, uint64_t written)
{
	const uint64_t tick = PAGER_TAIL_TICK_MS * 1000000ull;
	const uint64_t most = PAGER_TAIL_START_GAP_MS * 1000000ull;
	uint64_t gap;

	if (!p->tail_until_ns || written <= PAGER_TAIL_MAX_PAGES)
		return tick;
	gap = p->tail_gap_ns < tick ? 2 * tick : 2 * p->tail_gap_ns;
	if (gap > most)
		gap = most;
	p->tail_backoffs += gap > p->tail_gap_ns;
	return gap;
}

bool pager_tail_work_locked(struct pager *p, uint64_t *wait_ns)
{
	uint64_t t0, spent, written, keep_pg[PAGER_KEEP_MAX_PAGES];

	if (p->tail_learn_due) {
		p->tail_learn_due = false;
		pthread_mutex_unlock(&p->lock);
		tail_learn(p);
		pthread_mutex_lock(&p->lock);
		return true;
	}
	if (p->tail_freeze) {
		p->tail_freeze = false;
		pthread_mutex_unlock(&p->lock);
		tail_freeze(p);
		pthread_mutex_lock(&p->lock);
		return true;
	}
	if (!p->tail_ticking)
		return false;
	if (p->tail_until_ns && now_ns() >= p->tail_until_ns) {
		/* no command was told while the limit ran: no set either */
		p->tail_ticking = false;
		p->tail_until_ns = 0;
		p->tail_spent = false;
		return false;
	}
	if (p->tail_spent)
		return false;
	if (now_ns() < p->tail_next_ns) {
		*wait_ns = p->tail_next_ns - now_ns();
		return false;
	}
	t0 = now_ns();
	pthread_mutex_unlock(&p->lock);
	tail_tick(p, keep_pg, &written);
	pthread_mutex_lock(&p->lock);
	/* the next one after the gap, or later for a VM so large that its
	 * scans would take more than 1/PAGER_TAIL_DUTY of a CPU */
	spent = now_ns() - t0;
	p->tail_gap_ns = tail_gap_locked(p, written);
	p->tail_next_ns = t0 + (spent * PAGER_TAIL_DUTY > p->tail_gap_ns ?
				spent * PAGER_TAIL_DUTY : p->tail_gap_ns);
	return true;
}

void pager_tail_merge_written_locked(struct pager *p, uint8_t *written)
{
	for (uint64_t pg = 0; p->tail && pg < p->npages; pg++) {
		if (p->tail[pg] & TAIL_SINCE)
			written[pg] = 1;
		p->tail[pg] &= (uint8_t)~TAIL_SINCE;
	}
}

unsigned int pager_tail_keep_locked(const struct pager *p, uint64_t *pgs, unsigned int n)
{
	/* a set exists only with tail_resident and critical_resident; the
	 * first offload after it was made stores it (pager_tail_install) */
	if (!p->tail_nr || !p->tail_installed)
		return n;
	memcpy(pgs + n, p->tail_pg, p->tail_nr * sizeof(*pgs));
	return pager_pages_sort_unique(pgs, n + p->tail_nr);
}

uint64_t pager_tail_resident_locked(const struct pager *p)
{
	uint64_t n = 0;

	for (unsigned int i = 0; p->tail_installed && i < p->tail_nr; i++)
		n += pg_state(p, p->tail_pg[i]) == PAGE_RESIDENT;
	return n;
}

void pager_tail_install(struct pager *p, struct io_uring *ring, bool done)
{
	uint64_t pgs[PAGER_TAIL_MAX_PAGES];
	unsigned int nr = 0, n = 0;
	int err = 0;

	pthread_mutex_lock(&p->lock);
	/* no set, or put back already; or the offload stopped (a guest
	 * timer is due, the data came, an error): the wait's next offload
	 * stores the set again and puts it back, until then its pages out
	 * fault back */
	if (!p->tail_nr || p->tail_installed || !done) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->tail_installed = true;
	/* stored and punched; not a zero page (a hole: its first touch
	 * faults), nor one written meanwhile (left resident and mapped) */
	for (unsigned int i = 0; i < p->tail_nr; i++)
		if (pg_state(p, p->tail_pg[i]) == PAGE_OFFLOADED)
			pgs[nr++] = p->tail_pg[i];
	pthread_mutex_unlock(&p->lock);
	if (nr)
		err = pager_restore_unmapped(p, ring, pgs, nr);
	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; i < nr; i++) {
		enum pager_page_state s = pg_state(p, pgs[i]);

		if (s == PAGE_CLEAN || s == PAGE_RESIDENT)
			pgs[n++] = pgs[i];
	}
	/* unless a command began meanwhile (dropped it) or a wait made a
	 * new one: the set is what came back */
	if (p->tail_installed) {
		memcpy(p->tail_pg, pgs, n * sizeof(*pgs));
		p->tail_nr = n;
	}
	p->tail_installed_pages += n;
	pthread_mutex_unlock(&p->lock);
	if (err)	/* said there; those pages fault back */
		log_warn(p->subject, "the command's last writes: %u of %u page(s) back in the "
			 "memfd: %s", n, nr, strerror(-err));
	else
		log_debug(p->subject, "the command's last writes: %u page(s) stored and back in "
			  "the memfd, mapped by no one", n);
}
