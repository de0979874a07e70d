// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_race.c - faults, working-set prefetch, offload and FREE_REPORT
 * (pager_drop_free) on one VM's RAM at the same time (mock VMM,
 * mockvmm.h).  Each cycle the mock VMM reads every page from several
 * threads (data pages checked against their pattern, the range being
 * freed only read) while the loop thread frees the next part of that
 * range, starts an offload and, while it runs, a prefetch.  Afterwards
 * every page is checked: freed pages read zero (none left behind or
 * brought back stale from the store), every other page holds its pattern
 * (none lost), no page is left in flight, and the freed count is exact;
 * then once more after a full offload, so that a stale store slot would
 * show.  The offloads write zero-copy, from a read-only mapping of the
 * memfd while the readers run: every page read back matches the checksum
 * taken from that mapping.  TAP.
 *
 *   pager_race [MiB] [cycles]	(default 32, 6)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define RACE_THREADS	4	/* reader threads in the mock VMM */
#define RACE_PASSES	4	/* reads of all guest RAM per cycle */
#define DROP_PAGES	1	/* pages per FREE_REPORT: many, to overlap */

struct reader {
	struct harness *h;
	uint64_t flo, fhi;	/* the range being freed: only read */
	char ans[LINE_MAX_LEN];
	bool ok;
};

/* The "guest": read all of RAM RACE_PASSES times, both directions. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->ok = true;
	for (unsigned int k = 0; k < RACE_PASSES && r->ok; k++) {
		vmm_cmd(r->h, r->ans, "verify 1 %u %llu %llu %u", RACE_THREADS,
			(unsigned long long)r->flo, (unsigned long long)r->fhi,
			VERIFY_TOUCH_RANGE | (k & 1 ? VERIFY_REVERSE : 0));
		r->ok = !strcmp(r->ans, "ok");
	}
	return NULL;
}

struct drop_call {
	uint64_t gpa, len;
	int err;
};

static void drop_cb(struct harness *h, void *arg)
{
	struct drop_call *dc = arg;
	struct pager *p = the_pager(h);

	dc->err = p ? pager_drop_free(p, dc->gpa, dc->len) : -ENOENT;
}

/* Free pages [lo, hi) in FREE_REPORT-sized pieces; the first error. */
static int drop_range(struct harness *h, uint64_t lo, uint64_t hi)
{
	int err = 0;

	for (uint64_t pg = lo; pg < hi; pg += DROP_PAGES) {
		struct drop_call dc = {
			.gpa = pg * PAGE,
			.len = (hi - pg < DROP_PAGES ? hi - pg : DROP_PAGES) * PAGE,
		};

		on_loop(h, drop_cb, &dc);
		if (dc.err && !err)
			err = dc.err;
	}
	return err;
}

static int mode_race(const char *self, uint64_t mib, unsigned int cycles)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	uint64_t npages = (mib << 20) / PAGE, flo, fhi, per, freed = 0;
	char ans[LINE_MAX_LEN];
	int err, drop_err = 0, off_err = 0;
	bool readers_ok = true;

	pager_config_default(&pcfg, "");
	pcfg.write_batch_bytes = 256u << 10;	/* many batches in flight */
	if (!harness_up(&h, &pcfg, self, mib))
		return 1;
	/* the middle half of guest RAM is freed, a part per cycle */
	flo = npages / 4;
	fhi = flo + npages / 2;
	per = (fhi - flo + cycles - 1) / cycles;
	err = offload(&h);
	tap(!err, "first offload: %s", strerror(-err));
	for (unsigned int c = 0; c < cycles; c++) {
		struct reader r = { .h = &h, .flo = flo, .fhi = fhi };
		uint64_t lo = flo + c * per, hi = lo + per < fhi ? lo + per : fhi;
		uint64_t mid = lo + (hi - lo) / 2;
		struct offload_call oc;
		pthread_t t;
		int e;

		pthread_create(&t, NULL, reader_main, &r);
		e = drop_range(&h, lo, mid);		/* against faults */
		on_loop(&h, offload_cb, &oc);		/* an offload ... */
		on_loop(&h, resumed_cb, NULL);		/* ... and prefetch with it */
		e = e ? e : drop_range(&h, mid, hi);	/* against all three */
		if (!oc.err) {
			while (sem_wait(&h.offload_done) && errno == EINTR)
				;
			oc.err = h.offload_err;
		}
		pthread_join(t, NULL);
		freed += hi - lo;
		if (e && !drop_err)
			drop_err = e;
		if (oc.err && !off_err)
			off_err = oc.err;
		if (!r.ok && readers_ok) {
			readers_ok = false;
			tap_diag("cycle %u: %s", c, r.ans);
		}
	}
	tap(readers_ok, "%u cycles: every data page read right while faults, prefetch, "
	    "offload and FREE_REPORT raced", cycles);
	tap(!drop_err, "every FREE_REPORT accepted: %s", strerror(-drop_err));
	tap(!off_err, "every offload completed: %s", strerror(-off_err));
	st = stats(&h, NULL);
	tap(!st.pages[PAGE_IN_FLIGHT] && st.pages[PAGE_RESIDENT] + st.pages[PAGE_OFFLOADED] +
	    st.pages[PAGE_ZERO] + st.pages[PAGE_CLEAN] == npages, "no page left in flight "
	    "(%llu resident, %llu clean, %llu offloaded, %llu zero)",
	    (unsigned long long)st.pages[PAGE_RESIDENT], (unsigned long long)st.pages[PAGE_CLEAN],
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)st.pages[PAGE_ZERO]);
	tap(st.dropped_free_pages == freed, "every freed page made ZERO, none skipped: %llu of %llu",
	    (unsigned long long)st.dropped_free_pages, (unsigned long long)freed);
	vmm_cmd(&h, ans, "verify 1 %u %llu %llu 0", RACE_THREADS, (unsigned long long)flo,
		(unsigned long long)fhi);
	tap(!strcmp(ans, "ok"), "after the race: freed pages read zero, the others their "
	    "pattern (%s)", ans);
	err = offload(&h);
	vmm_cmd(&h, ans, "verify 1 %u %llu %llu 1", RACE_THREADS, (unsigned long long)flo,
		(unsigned long long)fhi);
	tap(!err && !strcmp(ans, "ok"), "after one more offload: the same, no stale store "
	    "slot came back (%s; %s)", strerror(-err), ans);
	st = stats(&h, NULL);
	tap(st.zero_copy_offloads == st.offloads && st.offloads >= cycles &&
	    st.store_bad_slots == 0, "every offload wrote straight from the memfd mapping "
	    "(%llu of %llu zero-copy), every page read back matched the checksum taken "
	    "there (%llu bad)", (unsigned long long)st.zero_copy_offloads,
	    (unsigned long long)st.offloads, (unsigned long long)st.store_bad_slots);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_race(argv[0], mockvmm_arg(argc, argv, 1, 32),
			 (unsigned int)mockvmm_arg(argc, argv, 2, 6));
}
