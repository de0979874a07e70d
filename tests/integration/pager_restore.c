// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_restore.c - what comes back after a resume (enum pager_restore),
 * with the mock VMM (mockvmm.h), every page data but in seq-zero:
 *
 *   eager  every offloaded page streams back with no touch and no fault,
 *          twice (two cycles), contents exact
 *   lazy   nothing comes back unprompted but the resume-critical set
 *          before the resume (the pages faulted while the last resume was
 *          delivered): no background restore; the rest only by faults
 *   ws     the working set is the pages touched in the last cycle: pages
 *          prefetched back but not touched leave it (it shrinks to 0); a
 *          resume overridden to lazy (a guest timer's, pager_resume_restore)
 *          prefetches nothing and adds what it touched to the working set
 *   recurring  the set is the pages touched in each of the last two data
 *          cycles: after two data cycles that touched A+B and A+C, with a
 *          guest timer's resume from a pause in the second, it is A; a
 *          cycle with no data (a timer's, touching other pages) leaves it;
 *          the next data resume brings A back with no fault, B and C not
 *   hot    pages written after their restore come back writable (write-
 *          hot): the second cycle's writes take no fault, the next offload
 *          writes those pages, and the writes are kept; after
 *          PAGER_HOT_CYCLES writable restores they are checked by sample
 *          (a fault per block's sample, the rest writable), then hot for
 *          twice as many; a cycle that only reads them starts them over
 *          (the pages that came back writable on their sample are written
 *          by its offload), and the next one protects every page
 *   seq    sequential streams of faults (lazy; one, then PAGER_STREAMS - 1
 *          interleaved): each is followed, its windows doubling; its
 *          read-ahead windows are mapped into the mapper, so reading every
 *          page takes no host page fault the pager did not serve; the
 *          windows count as used, and stay CLEAN (the next offload writes
 *          nothing)
 *   faround adaptive fault-around (lazy, max window 16): touching single
 *          pages far apart halves the window each offload down to 1, and
 *          then only the touched pages come back; touching whole blocks
 *          doubles it back to 16; touching one neighbour of each block
 *          moves it as the hits' spared faults against the neighbours'
 *          cost say (both measured, shown in GET /vms/NAME); neighbours
 *          installed unmapped and then written are written by the next
 *          offload (none punched stale); from a resume to its delivery,
 *          and in a guest timer's cycle until data arrives, a fault
 *          brings its own page only; contents exact; faround-sync:
 *          the same with wp_sync tracking
 *          (VMNAP_UFFD_WP=sync: the shim leaves WP_ASYNC out)
 *
 * Other modes touch every 4th page with fault-around 1, so no fault is
 * taken for sequential and each touched page is one fault (or, once
 * restored in the background, one mapping).  TAP.
 *
 *   seq-zero one sequential read through the mock's mixed layout (holes and
 *          zero pages among the data, the one mode here not all data):
 *          the zero-filled pages come back writable but are no sign of a
 *          write stream, so every data page stays CLEAN and the next
 *          offload writes nothing; seq-zero-sync: with wp_sync tracking
 *
 *   wstream every page rewritten in order straight after an offload: the
 *          first page comes back writable for its write fault, the rest
 *          as a write stream's (its last run found written), so
 *          none is seen written behind a protection; the next offload
 *          writes them all and they come back as written; wstream-sync:
 *          the same with wp_sync tracking
 *
 *   pager_restore eager|lazy|ws|recurring|hot|seq|seq-small|faround|faround-sync|
 *	seq-zero|seq-zero-sync|wstream|wstream-sync [MiB]
 *	(default 16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "mockvmm.h"
#include "pager.h"
#include "views.h"

#define STRIDE		4
#define RESTORE_WAIT_POLLS	3000	/* 10 ms each: a hang guard, not a speed limit */
#define LAZY_WATCH_MS	300	/* how long nothing must come back */

static void nap_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

struct restore_call {
	enum pager_restore how;
	int prepared;
};

static void set_restore_cb(struct harness *h, void *arg)
{
	pager_set_restore(the_pager(h), ((struct restore_call *)arg)->how);
	pager_set_fault_around(the_pager(h), 1);
}

/* A resume as the coordinator does it: how, critical set, VM runs. */
static void resume_cb(struct harness *h, void *arg)
{
	struct restore_call *c = arg;

	pager_resume_restore(the_pager(h), c->how);
	c->prepared = pager_resume_prepare(the_pager(h));
	pager_resumed(the_pager(h));
}

/* No time bound on the pre-resume restore: what it restores is asserted,
 * not how fast (a loaded machine hits the 5 ms bound). */
static void no_budget_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_critical_budget(the_pager(h), UINT64_MAX);
}

static void data_arrived_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_data_arrived(the_pager(h));
}

/* A resume delivered at once (no fault recorded in the critical set). */
static void resume(struct harness *h, enum pager_restore how)
{
	struct restore_call c = { .how = how };

	on_loop(h, resume_cb, &c);
	on_loop(h, delivered_cb, NULL);
}

/* Stats once at most @left pages are offloaded (the background restore -
 * prefetch, or the pre-resume restore of the critical set - brought the
 * rest) and nothing is in flight. */
static struct pager_stats wait_restored(struct harness *h, uint64_t left)
{
	struct pager_stats st = stats(h, NULL);

	for (int i = 0; i < RESTORE_WAIT_POLLS && (st.pages[PAGE_OFFLOADED] > left ||
					   st.pages[PAGE_IN_FLIGHT]); i++) {
		nap_ms(10);
		st = stats(h, NULL);
	}
	return st;
}

static bool touch_stride(struct harness *h, uint64_t lo, uint64_t hi, unsigned int stride)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "touch %llu %llu %u", (unsigned long long)lo,
		(unsigned long long)hi, stride);
	return !strncmp(ans, "ok", 2);
}

static bool touch(struct harness *h, uint64_t lo, uint64_t hi)
{
	return touch_stride(h, lo, hi, STRIDE);
}

static bool verify_all(struct harness *h, const char *what)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "%s: every page as filled (%s)", what, ans);
	return !strcmp(ans, "ok");
}

/* The prefetch thread's buffers, when not the library's default (0). */
static uint32_t g_prefetch_bytes;
/* The mock's mixed layout (holes, zero pages and data) instead of all data. */
static bool g_mixed;

static int start(struct harness *h, const char *self, uint64_t mib, enum pager_restore how)
{
	struct restore_call c = { .how = how };
	struct pager_config pcfg;
	char ans[LINE_MAX_LEN];

	pager_config_default(&pcfg, "");
	if (g_prefetch_bytes)
		pcfg.prefetch_min_bytes = pcfg.prefetch_max_bytes = g_prefetch_bytes;
	g_all_data = !g_mixed;
	if (g_all_data)
		setenv("PAGER_ALL_DATA", "1", 1);	/* the VMM child fills all pages */
	if (harness_start(h, &pcfg) || vmm_spawn(h, self, mib, 1)) {
		tap_bail("harness setup failed");
		return -1;
	}
	read_line(h->from_vmm, ans, sizeof(ans));
	if (strcmp(ans, "ready")) {
		tap_bail("mock VMM not ready (%s)", ans);
		return -1;
	}
	tap(1, "mock VMM ready");
	on_loop(h, set_restore_cb, &c);
	tap(stats(h, NULL).restore == how, "restore policy %s", pager_restore_name(how));
	return 0;
}

static int mode_eager(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE;
	struct pager_stats st, st0;

	if (start(&h, self, mib, PAGER_RESTORE_EAGER))
		return 1;
	for (int cycle = 1; cycle <= 2; cycle++) {
		int err = offload(&h);

		st0 = stats(&h, NULL);
		tap(!err && st0.pages[PAGE_OFFLOADED] == npages, "cycle %d: offload: %llu of "
		    "%llu pages out", cycle, (unsigned long long)st0.pages[PAGE_OFFLOADED],
		    (unsigned long long)npages);
		resume(&h, PAGER_RESTORE_POLICY);
		st = wait_restored(&h, 0);
		tap(st.pages[PAGE_OFFLOADED] == 0 && st.faults == st0.faults &&
		    st.eager_pages - st0.eager_pages == npages &&
		    st.last_restore == PAGER_RESTORE_EAGER,
		    "cycle %d: eager restore brought all %llu pages back with no fault "
		    "(%llu offloaded, %llu faults, %llu eager pages)", cycle,
		    (unsigned long long)npages, (unsigned long long)st.pages[PAGE_OFFLOADED],
		    (unsigned long long)(st.faults - st0.faults),
		    (unsigned long long)(st.eager_pages - st0.eager_pages));
		verify_all(&h, "after the eager restore");
	}
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_lazy(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE, touched = npages / 4 / STRIDE;
	struct restore_call c = { .how = PAGER_RESTORE_POLICY };
	struct pager_stats st, st0;
	int err;

	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	on_loop(&h, no_budget_cb, NULL);
	err = offload(&h);
	on_loop(&h, resume_cb, &c);
	/* faults while the resume is delivered: the resume-critical set */
	tap(!err && touch(&h, 0, npages / 4), "offload, resume, %llu pages touched",
	    (unsigned long long)touched);
	on_loop(&h, delivered_cb, NULL);
	st = stats(&h, NULL);
	tap(st.pages[PAGE_OFFLOADED] == npages - touched && st.prefetch_pages == 0,
	    "only the touched pages came back (%llu offloaded, %llu prefetched)",
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)st.prefetch_pages);
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == touched && st0.critical_set_pages > 0,
	    "offload: working set %llu pages, critical set %llu pages",
	    (unsigned long long)st0.working_set_pages,
	    (unsigned long long)st0.critical_set_pages);
	on_loop(&h, resume_cb, &c);
	nap_ms(LAZY_WATCH_MS);
	st = stats(&h, NULL);
	/* the set is the touched pages (fault-around 1, far apart) */
	tap(c.prepared == (int)touched &&
	    st.critical_restored_pages - st0.critical_restored_pages == touched &&
	    st.prefetch_pages == st0.prefetch_pages &&
	    st.pages[PAGE_OFFLOADED] == npages - touched &&
	    st.last_restore == PAGER_RESTORE_LAZY,
	    "lazy resume: the resume-critical set restored, nothing else (%d critical, "
	    "%llu prefetched, %llu of %llu offloaded)", c.prepared,
	    (unsigned long long)(st.prefetch_pages - st0.prefetch_pages),
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)npages);
	on_loop(&h, delivered_cb, NULL);
	verify_all(&h, "by faults");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_ws(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE;
	uint64_t a = npages / 2 / STRIDE, b = npages / 4 / STRIDE, t = 16;
	struct pager_stats st, st0;
	int err;

	if (start(&h, self, mib, PAGER_RESTORE_WORKING_SET))
		return 1;
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.working_set_pages == 0, "offload 1: working set %llu pages (nothing "
	    "touched since an offload yet)", (unsigned long long)st.working_set_pages);
	resume(&h, PAGER_RESTORE_POLICY);
	tap(touch(&h, 0, npages / 2), "%llu pages touched by faults", (unsigned long long)a);
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == a, "offload 2: working set %llu pages (want %llu)",
	    (unsigned long long)st0.working_set_pages, (unsigned long long)a);

	resume(&h, PAGER_RESTORE_POLICY);
	st = wait_restored(&h, npages - a);
	tap(st.pages[PAGE_OFFLOADED] == npages - a, "the working set came back (%llu pages "
	    "offloaded)", (unsigned long long)st.pages[PAGE_OFFLOADED]);
	tap(touch(&h, 0, npages / 4), "%llu of them touched again", (unsigned long long)b);
	st = stats(&h, NULL);
	tap(st.faults == st0.faults, "... with no fault (%llu)",
	    (unsigned long long)(st.faults - st0.faults));
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == b, "offload 3: the working set shrank to the "
	    "%llu pages touched (%llu)", (unsigned long long)b,
	    (unsigned long long)st0.working_set_pages);

	/* a guest timer's resume: lazy, and it adds to the working set */
	resume(&h, PAGER_RESTORE_LAZY);
	nap_ms(LAZY_WATCH_MS);
	st = stats(&h, NULL);
	tap(st.prefetch_pages == st0.prefetch_pages && st.last_restore == PAGER_RESTORE_LAZY,
	    "timer resume (lazy): nothing prefetched (%llu)",
	    (unsigned long long)(st.prefetch_pages - st0.prefetch_pages));
	tap(touch(&h, npages / 2, npages / 2 + t * STRIDE), "the timer touches %llu pages",
	    (unsigned long long)t);
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == b + t, "offload 4: working set %llu pages "
	    "(the data set %llu + the timer's %llu)", (unsigned long long)st0.working_set_pages,
	    (unsigned long long)b, (unsigned long long)t);

	resume(&h, PAGER_RESTORE_POLICY);
	st = wait_restored(&h, npages - b - t);
	tap(st.pages[PAGE_OFFLOADED] == npages - b - t && st.last_restore ==
	    PAGER_RESTORE_WORKING_SET, "data resume: the %llu pages came back (%llu "
	    "offloaded), none touched", (unsigned long long)(b + t),
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.working_set_pages == 0, "offload 5: working set %llu pages: "
	    "prefetched but untouched pages do not count", (unsigned long long)st.working_set_pages);
	resume(&h, PAGER_RESTORE_POLICY);
	verify_all(&h, "after five cycles");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_recurring(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE, q = npages / 4, a = q / STRIDE;
	struct pager_stats st, st0;
	int err;

	if (start(&h, self, mib, PAGER_RESTORE_RECURRING))
		return 1;
	err = offload(&h);
	resume(&h, PAGER_RESTORE_POLICY);
	tap(!err && touch(&h, 0, 2 * q), "data cycle 1 touches A and B (%llu pages each)",
	    (unsigned long long)a);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.working_set_pages == 0, "offload 2: recurring set %llu pages (one "
	    "data cycle seen)", (unsigned long long)st.working_set_pages);

	resume(&h, PAGER_RESTORE_POLICY);
	nap_ms(LAZY_WATCH_MS);
	st0 = stats(&h, NULL);
	tap(st0.prefetch_pages == st.prefetch_pages, "empty set: nothing prefetched (%llu)",
	    (unsigned long long)(st0.prefetch_pages - st.prefetch_pages));
	tap(touch(&h, 0, q) && touch(&h, 2 * q, 3 * q), "data cycle 2 touches A and C");
	/* a guest timer's resume from a pause, in the same cycle: still data */
	resume(&h, PAGER_RESTORE_LAZY);
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == a, "offload 3: recurring set %llu pages: A "
	    "(%llu), though a timer's resume came last", (unsigned long long)st0.working_set_pages,
	    (unsigned long long)a);

	/* a cycle with no data: it touches D, the set stays A */
	resume(&h, PAGER_RESTORE_LAZY);
	tap(touch(&h, 3 * q, 3 * q + 16 * STRIDE), "a timer's cycle touches 16 other pages");
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.working_set_pages == a, "offload 4: recurring set %llu pages (kept)",
	    (unsigned long long)st0.working_set_pages);

	resume(&h, PAGER_RESTORE_POLICY);
	st = wait_restored(&h, npages - a);
	tap(st.pages[PAGE_OFFLOADED] == npages - a && st.last_restore == PAGER_RESTORE_RECURRING &&
	    st.prefetch_pages - st0.prefetch_pages == a,
	    "data resume: A came back in the background (%llu prefetched, %llu of %llu "
	    "offloaded)", (unsigned long long)(st.prefetch_pages - st0.prefetch_pages),
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)npages);
	tap(touch(&h, 0, q), "A touched again");
	st = stats(&h, NULL);
	tap(st.faults == st0.faults, "... with no fault (%llu)",
	    (unsigned long long)(st.faults - st0.faults));
	verify_all(&h, "after five cycles");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

/* The page faults an answer "ok NS FAULTS" states; -1 for another. */
static long answer_faults(const char *ans)
{
	unsigned long long ns;
	long flt = -1;

	return sscanf(ans, "ok %llu %ld", &ns, &flt) == 2 ? flt : -1;
}

/* Read every page upwards in @streams interleaved sequential streams: the
 * host page faults it took. */
static long touchall(struct harness *h, unsigned int streams)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "touchall %u", streams);
	return answer_faults(ans);
}

static int mode_seq(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE;
	struct pager_stats st, st0;
	long flt;
	int err;

	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	for (int cycle = 1; cycle <= 2; cycle++) {
		unsigned int streams = cycle == 1 ? 1 : PAGER_STREAMS - 1;

		err = offload(&h);
		resume(&h, PAGER_RESTORE_POLICY);
		st0 = stats(&h, NULL);
		flt = touchall(&h, streams);
		/* the last window's counts come after its mapper moved on */
		st = stats_settled(&h);
		tap(!err && flt >= 0 && (uint64_t)flt <= st.faults - st0.faults + npages / 64 &&
		    st.readahead_mapped_pages - st0.readahead_mapped_pages >= npages / 4,
		    "cycle %d: a read of %llu pages in %u sequential stream(s) took %ld host "
		    "page fault(s), %llu of them served by the pager; %llu pages came by "
		    "readahead, mapped", cycle, (unsigned long long)npages, streams, flt,
		    (unsigned long long)(st.faults - st0.faults),
		    (unsigned long long)(st.readahead_mapped_pages -
					 st0.readahead_mapped_pages));
		/* one page per fault (fault-around 1) were they not followed */
		tap(st.faults - st0.faults < npages / 32 &&
		    st.fault_sequential - st0.fault_sequential >= (st.faults - st0.faults) / 2 &&
		    st.fault_seq_ns_sum > st0.fault_seq_ns_sum &&
		    st.fault_seq_ns_sum - st0.fault_seq_ns_sum <=
		    st.fault_lat_ns_sum - st0.fault_lat_ns_sum,
		    "cycle %d: each stream followed: %llu fault(s), %llu of them sequential "
		    "(%llu of %llu µs)", cycle, (unsigned long long)(st.faults - st0.faults),
		    (unsigned long long)(st.fault_sequential - st0.fault_sequential),
		    (unsigned long long)(st.fault_seq_ns_sum - st0.fault_seq_ns_sum) / 1000,
		    (unsigned long long)(st.fault_lat_ns_sum - st0.fault_lat_ns_sum) / 1000);
		verify_all(&h, "read back by a sequential stream");
		err = offload(&h);
		st = stats(&h, NULL);
		/* mapped write-protected: not written, so CLEAN; and used */
		tap(!err && st.working_set_pages == npages &&
		    (st.dirty_tracking == PAGER_DIRTY_NONE || st.last_offload_written == 0),
		    "cycle %d: the next offload: working set %llu of %llu pages, %llu bytes "
		    "written (dirty tracking %s)", cycle, (unsigned long long)st.working_set_pages,
		    (unsigned long long)npages, (unsigned long long)st.last_offload_written,
		    pager_dirty_tracking_name(st.dirty_tracking));
		resume(&h, PAGER_RESTORE_POLICY);
	}
	verify_all(&h, "after two cycles");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

/* The write loop's faults (one word written per page). */
static long writeloop(struct harness *h)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "writeloop 1");
	return answer_faults(ans);
}

/*
 * The next @n cycles of mode_hot (*@cycle: the last one done, advanced):
 * every page read back by faults, written once (or not: !@write),
 * offloaded; each cycle's writes must take @want faults, and an unwritten
 * cycle's offloads write only the pages that came back writable on their
 * block's sample (PAGER_HOT_SAMPLE_PAGES), which then start over with it.
 *
 * Each read is followed by stats_settled() (here and in hot_check):
 * readahead copies a window into the mapping and only then takes the
 * pages out of IN_FLIGHT and counts them, so a mapper may read and write
 * them before that, or an offload begin.  A page written while IN_FLIGHT
 * is taken for dirty (safe, but not counted as a write-hot restore), and
 * one IN_FLIGHT at an offload stays resident through it; on a loaded
 * machine the prefetch thread may lag behind the mapper by a whole cycle.
 */
static void hot_cycles(struct harness *h, int *cycle, int n, uint64_t want, bool write)
{
	char ans[LINE_MAX_LEN];
	long flt = 0, bad = 0;
	uint64_t written = 0;
	struct pager_stats st0 = stats(h, NULL), st;
	int err = 0, first = *cycle + 1;

	for (int c = 0; c < n; c++) {
		vmm_cmd(h, ans, "touchall");
		if (strncmp(ans, "ok", 2))
			err = -1;
		(void)stats_settled(h);
		flt = write ? writeloop(h) : 0;
		if (flt != (long)want)
			bad++;
		err = err ? err : offload(h);
		written += stats(h, NULL).last_offload_written;
	}
	st = stats(h, NULL);
	*cycle += n;
	if (n > 1)
		snprintf(ans, sizeof(ans), "cycles %d-%d", first, *cycle);
	else
		snprintf(ans, sizeof(ans), "cycle %d", first);
	if (write) {
		tap(!err && !bad, "%s: %llu write fault(s) each (%ld cycle(s) otherwise; the "
		    "last %ld)", ans, (unsigned long long)want, bad, flt);
	} else {
		uint64_t vouched = st.dirty_hot_vouched_pages - st0.dirty_hot_vouched_pages;
		uint64_t dropped = st.dirty_hot_vouch_dropped_pages -
				   st0.dirty_hot_vouch_dropped_pages;

		tap(!err && written == vouched * PAGE && dropped == vouched, "%s: read only, "
		    "then the offload writes %llu bytes: the %llu page(s) that came back "
		    "writable on their block's sample, which start over with it (%llu)", ans,
		    (unsigned long long)written, (unsigned long long)vouched,
		    (unsigned long long)dropped);
	}
}

/*
 * The next cycle of mode_hot, whose pages' writable restores ran out,
 * every one of them seen written again before: checked by sample, a fault
 * for each block's sample (one per block of PAGER_HOT_SAMPLE_PAGES, taken
 * by the first of the block's runs restored), the other pages writable and
 * renewed with their sample.
 */
static void hot_check(struct harness *h, int *cycle, uint64_t npages)
{
	uint64_t blocks = (npages + PAGER_HOT_SAMPLE_PAGES - 1) / PAGER_HOT_SAMPLE_PAGES;
	struct pager_stats st0 = stats(h, NULL), st;
	char ans[LINE_MAX_LEN];
	uint64_t again, renewed, samples;
	long flt;
	int err;

	vmm_cmd(h, ans, "touchall");
	(void)stats_settled(h);
	flt = writeloop(h);
	err = strncmp(ans, "ok", 2) || offload(h);
	st = stats(h, NULL);
	again = st.dirty_hot_again_pages - st0.dirty_hot_again_pages;
	renewed = st.dirty_hot_vouch_renewed_pages - st0.dirty_hot_vouch_renewed_pages;
	samples = st.dirty_hot_samples - st0.dirty_hot_samples;
	++*cycle;
	tap(!err && flt >= 0 && (uint64_t)flt == again && again + renewed == npages &&
	    samples == blocks && again == samples,
	    "cycle %d: checked by sample: %ld write fault(s) for %llu pages in %llu blocks "
	    "(%llu seen written again, %llu of them samples; %llu renewed with theirs)",
	    *cycle, flt, (unsigned long long)npages, (unsigned long long)blocks,
	    (unsigned long long)again, (unsigned long long)samples,
	    (unsigned long long)renewed);
}

static int mode_hot(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE;
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	long flt;
	int err, cycle = 2;	/* the two cycles checked first */

	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	err = offload(&h);
	st = stats(&h, NULL);
	if (st.dirty_tracking != PAGER_DIRTY_WP_ASYNC) {
		tap_skip("write-hot checks", "no wp_async dirty tracking here: %s",
			 pager_dirty_tracking_name(st.dirty_tracking));
		vmm_quit(&h);
		return harness_finish(&h);
	}
	vmm_cmd(&h, ans, "touchall");
	tap(!err && !strncmp(ans, "ok", 2), "offload, every page read back by faults");
	flt = writeloop(&h);
	tap(flt == (long)npages, "cycle 1: each page's first write faults (%ld faults)", flt);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.dirty_scanned_pages >= npages, "offload: %llu pages seen written",
	    (unsigned long long)st.dirty_scanned_pages);
	vmm_cmd(&h, ans, "touchall");
	tap(!strncmp(ans, "ok", 2), "every page read back");
	flt = writeloop(&h);
	/* readahead copies a window into the mapping and counts it after:
	 * the mapper may have used it (and written it) by then */
	st = stats_settled(&h);
	tap(flt == 0 && st.dirty_hot_pages == npages, "cycle 2: written again with no fault "
	    "(%ld faults; %llu pages came back write-hot)", flt,
	    (unsigned long long)st.dirty_hot_pages);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.last_offload_written == npages * PAGE, "the next offload writes them "
	    "all (%llu bytes)", (unsigned long long)st.last_offload_written);
	vmm_cmd(&h, ans, "read %llu", (unsigned long long)(npages - 1));
	tap(strtoull(ans + 6, NULL, 16) == npages - 1, "the last write came back (%s)", ans);
	vmm_cmd(&h, ans, "read 5");
	tap(!strcmp(ans, "value 0x5"), "... for page 5 too (%s)", ans);
	/* cycle 2 took the first of PAGER_HOT_CYCLES writable restores */
	hot_cycles(&h, &cycle, PAGER_HOT_CYCLES - 1, 0, true);
	hot_check(&h, &cycle, npages);	/* run out */
	/* twice as many writable restores, then checked by sample once more:
	 * a sample not written starts its block over, and a protected restore
	 * not written the page */
	hot_cycles(&h, &cycle, PAGER_HOT_CYCLES * 2, 0, true);
	hot_cycles(&h, &cycle, 1, 0, false);
	hot_cycles(&h, &cycle, 1, npages, true);
	hot_cycles(&h, &cycle, PAGER_HOT_CYCLES, 0, true);
	hot_check(&h, &cycle, npages);
	st = stats(&h, NULL);
	tap(st.dirty_hot_again_pages + st.dirty_hot_vouch_renewed_pages == 2 * npages,
	    "after the restart, back to %d writable restores: %llu page(s) seen written "
	    "again in all, %llu renewed with their sample", PAGER_HOT_CYCLES,
	    (unsigned long long)st.dirty_hot_again_pages,
	    (unsigned long long)st.dirty_hot_vouch_renewed_pages);
	vmm_cmd(&h, ans, "read %llu", (unsigned long long)(npages - 1));
	tap(strtoull(ans + 6, NULL, 16) == npages - 1, "after %d cycles, the last write came "
	    "back (%s)", cycle, ans);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

/* One offload (*@err its result, *@st the stats after it): true when
 * writes are tracked (wp_async or wp_sync); else the write-stream checks
 * are skipped, saying why, and the mock VMM quits. */
static bool offload_tracked(struct harness *h, struct pager_stats *st, int *err)
{
	*err = offload(h);
	*st = stats(h, NULL);
	if (st->dirty_tracking == PAGER_DIRTY_WP_ASYNC ||
	    st->dirty_tracking == PAGER_DIRTY_WP_SYNC)
		return true;
	tap_skip("write-stream checks", "no dirty tracking here: %s",
		 pager_dirty_tracking_name(st->dirty_tracking));
	vmm_quit(h);
	return false;
}

/* Every page rewritten in order straight after an offload, each page's
 * first access a write (fault-around 1): the first page comes back
 * writable for its write fault, the rest as a write stream's (its window
 * and read-ahead), so no write faults behind a protection; the next
 * offload writes them all, and they come back as written. */
static int mode_wstream(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE, writable;
	struct pager_stats st, st0, st1;
	char ans[LINE_MAX_LEN];
	int err;

	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	if (!offload_tracked(&h, &st0, &err))
		return harness_finish(&h);
	tap(!err && st0.pages[PAGE_OFFLOADED] == npages, "offload: %llu of %llu pages out "
	    "(dirty tracking %s)", (unsigned long long)st0.pages[PAGE_OFFLOADED],
	    (unsigned long long)npages, pager_dirty_tracking_name(st0.dirty_tracking));
	resume(&h, PAGER_RESTORE_POLICY);
	st0 = stats(&h, NULL);
	vmm_cmd(&h, ans, "fill 2");
	st = stats_settled(&h);
	writable = st.dirty_stream_pages - st0.dirty_stream_pages;
	tap(!strcmp(ans, "ok") && st.dirty_write_fault_pages - st0.dirty_write_fault_pages == 1 &&
	    writable == npages - 1, "every page rewritten in order came back writable: "
	    "%llu for its write fault, %llu as a write stream's (%llu faults)",
	    (unsigned long long)(st.dirty_write_fault_pages - st0.dirty_write_fault_pages),
	    (unsigned long long)writable, (unsigned long long)(st.faults - st0.faults));
	err = offload(&h);
	st1 = stats(&h, NULL);
	tap(!err && st1.dirty_scanned_pages == st.dirty_scanned_pages &&
	    st1.last_offload_written == npages * PAGE, "the next offload writes every page "
	    "(%llu bytes), none of them seen written behind a protection (%llu)",
	    (unsigned long long)st1.last_offload_written,
	    (unsigned long long)(st1.dirty_scanned_pages - st.dirty_scanned_pages));
	resume(&h, PAGER_RESTORE_POLICY);
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!strcmp(ans, "ok"), "every page as rewritten (%s)", ans);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_wstream_sync(const char *self, uint64_t mib)
{
	setenv("VMNAP_UFFD_WP", "sync", 1);	/* the mock VMM inherits it */
	return mode_wstream(self, mib);
}

/* One sequential read through data pages with holes and zero pages among
 * them (fault-around 1): each zero page is filled writable on its own
 * fault, between the stream's runs of data pages, which came from the
 * store protected and were only read - not a write stream.  Every data
 * page stays CLEAN: none came back writable, the next offload writes
 * nothing. */
static int mode_seq_zero(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE;
	struct pager_stats st, st0, st1;
	long flt;
	int err;

	g_mixed = true;
	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	if (!offload_tracked(&h, &st0, &err))
		return harness_finish(&h);
	tap(!err && st0.pages[PAGE_OFFLOADED] && st0.pages[PAGE_ZERO],
	    "offload: %llu data pages out, %llu zero (dirty tracking %s)",
	    (unsigned long long)st0.pages[PAGE_OFFLOADED],
	    (unsigned long long)st0.pages[PAGE_ZERO],
	    pager_dirty_tracking_name(st0.dirty_tracking));
	resume(&h, PAGER_RESTORE_POLICY);
	flt = touchall(&h, 1);
	st = stats_settled(&h);
	/* followed as one stream: of the data runs (2 in every 7 pages) the
	 * stream faults about every other, the read-ahead brings the rest */
	tap(flt >= 0 && st.fault_sequential - st0.fault_sequential >= npages / 16 &&
	    st.zero_faults > st0.zero_faults &&
	    st.dirty_stream_pages == st0.dirty_stream_pages &&
	    st.pages[PAGE_CLEAN] == st0.pages[PAGE_OFFLOADED],
	    "a read in order: %llu sequential faults, %llu zero fills; %llu pages came back "
	    "as a write stream's, %llu of %llu data pages CLEAN",
	    (unsigned long long)(st.fault_sequential - st0.fault_sequential),
	    (unsigned long long)(st.zero_faults - st0.zero_faults),
	    (unsigned long long)(st.dirty_stream_pages - st0.dirty_stream_pages),
	    (unsigned long long)st.pages[PAGE_CLEAN],
	    (unsigned long long)st0.pages[PAGE_OFFLOADED]);
	err = offload(&h);
	st1 = stats(&h, NULL);
	tap(!err && st1.last_offload_written == 0, "the next offload writes nothing (%llu bytes)",
	    (unsigned long long)st1.last_offload_written);
	resume(&h, PAGER_RESTORE_POLICY);
	verify_all(&h, "after the read and one more cycle");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_seq_zero_sync(const char *self, uint64_t mib)
{
	setenv("VMNAP_UFFD_WP", "sync", 1);	/* the mock VMM inherits it */
	return mode_seq_zero(self, mib);
}

#define FA_MAX		16	/* the window's max here */
#define FA_APART	64	/* pages between touches: never sequential */

static void set_fa_max_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_fault_around(the_pager(h), FA_MAX);
}

/* Offload, resume (lazy), touch the first @span pages of every FA_APART;
 * the stats after the touch and the window the offload before it chose. */
static struct pager_stats fa_cycle(struct harness *h, uint64_t npages, uint64_t span,
				   uint32_t *window)
{
	bool ok = !offload(h);

	*window = stats(h, NULL).fault_around_pages;
	resume(h, PAGER_RESTORE_POLICY);
	for (uint64_t pg = 0; ok && pg < npages; pg += FA_APART)
		ok = touch_stride(h, pg, pg + span, 1);
	if (!ok)
		tap_bail("offload or touch failed");
	return stats_settled(h);
}

/* The pager block's "fault_around" object as GET /vms/NAME shows it. */
struct fa_view {
	json_int_t pages, max, installed, hits, misses, fault_ns, page_ns;
};

static void fa_view_cb(struct harness *h, void *arg)
{
	struct fa_view *v = arg;
	json_t *o = pager_stats_json(the_pager(h));

	if (json_unpack(json_object_get(o, "fault_around"), "{s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			"pages", &v->pages, "max", &v->max, "installed", &v->installed,
			"hits", &v->hits, "misses", &v->misses, "fault_ns", &v->fault_ns,
			"page_ns", &v->page_ns))
		v->pages = -1;
	json_decref(o);
}

/* Resumed into a cycle where fault-around is off (@off): touching page
 * @at brings that page alone; once @on_cb has run on the loop (@on), a
 * fault at @at + FA_APART installs the window's neighbours.  Stats from
 * after the pre-resume restore (the resume-critical set's pages). */
static void fa_off_then_on(struct harness *h, uint64_t at, const char *off,
			   void (*on_cb)(struct harness *, void *), const char *on)
{
	struct pager_stats st0 = stats_settled(h), st;
	uint32_t w = st0.fault_around_pages;

	tap(touch_stride(h, at, at + 1, 1), "page %llu touched %s", (unsigned long long)at, off);
	st = stats_settled(h);
	tap(w > 1 && st.fault_around_installed == st0.fault_around_installed &&
	    st0.pages[PAGE_OFFLOADED] - st.pages[PAGE_OFFLOADED] == 1,
	    "%s: window %u, %llu neighbours installed, %llu page(s) brought in "
	    "(want 0 and 1)", off, w,
	    (unsigned long long)(st.fault_around_installed - st0.fault_around_installed),
	    (unsigned long long)(st0.pages[PAGE_OFFLOADED] - st.pages[PAGE_OFFLOADED]));
	on_loop(h, on_cb, NULL);
	st0 = st;
	tap(touch_stride(h, at + FA_APART, at + FA_APART + 1, 1), "page %llu touched %s",
	    (unsigned long long)(at + FA_APART), on);
	st = stats_settled(h);
	tap(st.fault_around_installed - st0.fault_around_installed == w - 1,
	    "%s: %llu neighbours installed (want %u)", on,
	    (unsigned long long)(st.fault_around_installed - st0.fault_around_installed), w - 1);
}

static int mode_faround(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t npages = (mib << 20) / PAGE, singles = npages / FA_APART;
	struct pager_stats st, st0;
	uint32_t w, want;
	char ans[LINE_MAX_LEN];

	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	on_loop(&h, set_fa_max_cb, NULL);
	st0 = stats(&h, NULL);
	tap(st0.fault_around_pages == FA_MAX && st0.fault_around_max == FA_MAX,
	    "fault-around window %u, max %u", st0.fault_around_pages, st0.fault_around_max);

	/* single pages far apart: each fault's neighbours are never used */
	st = fa_cycle(&h, npages, 1, &w);
	tap(w == FA_MAX && st.fault_around_installed - st0.fault_around_installed ==
	    singles * (FA_MAX - 1) && npages - st.pages[PAGE_OFFLOADED] == singles * FA_MAX,
	    "window %u: %llu single pages touched brought %llu in (%llu installed unmapped)",
	    w, (unsigned long long)singles,
	    (unsigned long long)(npages - st.pages[PAGE_OFFLOADED]),
	    (unsigned long long)(st.fault_around_installed - st0.fault_around_installed));
	for (want = FA_MAX / 2; want >= 1; want /= 2) {
		st0 = st;
		st = fa_cycle(&h, npages, 1, &w);
		tap(w == want && st.fault_around_misses > st0.fault_around_misses &&
		    st.fault_around_hits == 0, "singles: the offload halved the window to %u "
		    "(want %u; %llu hits, %llu misses)", w, want,
		    (unsigned long long)st.fault_around_hits,
		    (unsigned long long)st.fault_around_misses);
	}
	st0 = st;
	st = fa_cycle(&h, npages, 1, &w);
	tap(w == 1 && npages - st.pages[PAGE_OFFLOADED] == singles &&
	    st.fault_pages - st0.fault_pages == singles,
	    "window %u stays: resident = the %llu pages touched (%llu resident, %llu "
	    "brought by faults)", w, (unsigned long long)singles,
	    (unsigned long long)(npages - st.pages[PAGE_OFFLOADED]),
	    (unsigned long long)(st.fault_pages - st0.fault_pages));

	{
		struct fa_view v = { 0 };

		on_loop(&h, fa_view_cb, &v);
		tap(v.pages == 1 && v.max == FA_MAX && v.installed ==
		    (json_int_t)st.fault_around_installed && v.hits == 0 &&
		    v.misses == (json_int_t)st.fault_around_misses,
		    "GET /vms/NAME pager.fault_around: pages %lld, max %lld, installed %lld, "
		    "hits %lld, misses %lld", (long long)v.pages, (long long)v.max,
		    (long long)v.installed, (long long)v.hits, (long long)v.misses);
	}

	/* whole blocks: the neighbours are used, the window grows back */
	st = fa_cycle(&h, npages, FA_MAX, &w);
	for (want = 2; want <= FA_MAX; want *= 2) {
		st0 = st;
		st = fa_cycle(&h, npages, FA_MAX, &w);
		tap(w == want, "blocks: the offload doubled the window to %u (want %u; "
		    "%llu hits, %llu misses)", w, want,
		    (unsigned long long)st.fault_around_hits,
		    (unsigned long long)st.fault_around_misses);
	}
	tap(st.fault_around_hits > st0.fault_around_hits, "blocks: installed pages hit "
	    "(%llu in the last cycle)",
	    (unsigned long long)(st.fault_around_hits - st0.fault_around_hits));

	/* sparse: one neighbour of each block used, the rest not.  The
	 * window follows what the hits spared (a fault each) against what
	 * the neighbours cost, as measured and shown; a share of hits alone
	 * would halve it. */
	st = fa_cycle(&h, npages, 2, &w);
	{
		struct fa_view v = { 0 };
		json_int_t hits, misses, saved, cost, want_w;

		tap(!offload(&h), "offload after the sparse cycle");
		on_loop(&h, fa_view_cb, &v);
		hits = v.hits - (json_int_t)st.fault_around_hits;
		misses = v.misses - (json_int_t)st.fault_around_misses;
		saved = hits * v.fault_ns;
		cost = (hits + misses) * v.page_ns;
		/* at its max the window cannot double: it holds or halves */
		want_w = saved < cost ? w / 2 : w;
		tap(w == FA_MAX && hits == (json_int_t)singles &&
		    misses == (json_int_t)(singles * (FA_MAX - 2)),
		    "sparse: at window %u, %lld hits and %lld misses (want %llu and %llu)",
		    w, (long long)hits, (long long)misses, (unsigned long long)singles,
		    (unsigned long long)(singles * (FA_MAX - 2)));
		tap(v.fault_ns > 0 && v.page_ns > 0 && v.pages == want_w,
		    "sparse: a fault %lld ns, a neighbour %lld ns: %lld ns spared against "
		    "%lld ns spent, window %lld (want %lld)", (long long)v.fault_ns,
		    (long long)v.page_ns, (long long)saved, (long long)cost,
		    (long long)v.pages, (long long)want_w);
		resume(&h, PAGER_RESTORE_POLICY);
	}
	verify_all(&h, "after the fault-around cycles");

	/* neighbours installed unmapped, then written: never punched stale */
	tap(!offload(&h), "offload");
	resume(&h, PAGER_RESTORE_POLICY);
	st0 = stats(&h, NULL);
	w = st0.fault_around_pages;	/* the sparse cycle chose it */
	tap(touch_stride(&h, 0, 1, 1), "page 0 touched");
	st = stats_settled(&h);
	tap(w > 1 && st.fault_around_installed - st0.fault_around_installed == w - 1,
	    "its %u neighbours installed unmapped", w - 1);
	vmm_cmd(&h, ans, "fill 2");
	tap(!strcmp(ans, "ok"), "every page written (round 2)");
	tap(!offload(&h), "offload");
	st = stats(&h, NULL);
	tap(st.last_offload_written == npages * PAGE, "the offload wrote every page "
	    "(%llu of %llu bytes): the installed ones too",
	    (unsigned long long)st.last_offload_written, (unsigned long long)(npages * PAGE));
	resume(&h, PAGER_RESTORE_POLICY);
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!strcmp(ans, "ok"), "every page as written in round 2 (%s)", ans);

	/* from a resume to its delivery the guest's answer waits on every
	 * fault: each reads its own page only; after it, fault-around again */
	tap(!offload(&h), "offload");
	{
		struct restore_call c = { .how = PAGER_RESTORE_POLICY };

		on_loop(&h, resume_cb, &c);
		fa_off_then_on(&h, npages / 2 - (npages / 2) % FA_APART, "before the delivery",
			       delivered_cb, "after the delivery");
	}
	/* a guest timer's cycle (its resume names the restore): faults bring
	 * their own page only, until data arrives in it */
	tap(!offload(&h), "offload");
	{
		struct restore_call c = { .how = PAGER_RESTORE_LAZY };

		on_loop(&h, resume_cb, &c);
		on_loop(&h, delivered_cb, NULL);
		fa_off_then_on(&h, npages / 2 - (npages / 2) % FA_APART + 2 * FA_APART,
			       "in a timer's cycle", data_arrived_cb, "once data arrived");
	}
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!strcmp(ans, "ok"), "every page as written in round 2 (%s)", ans);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

/* seq with 16 KiB prefetch buffers: read-ahead windows (up to 1 MiB) and
 * what the prefetch thread reads for them never run past its buffer */
static int mode_seq_small(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	int err;

	g_prefetch_bytes = 16 << 10;
	if (start(&h, self, mib, PAGER_RESTORE_LAZY))
		return 1;
	for (int cycle = 1; cycle <= 2; cycle++) {
		err = offload(&h);
		resume(&h, PAGER_RESTORE_POLICY);
		tap(!err && touchall(&h, cycle == 1 ? 1 : PAGER_STREAMS - 1) >= 0,
		    "cycle %d: sequential streams read back through 16 KiB prefetch buffers", cycle);
		verify_all(&h, "read back through small prefetch buffers");
	}
	tap(stats_settled(&h).restore_errors == 0, "no background read failed (%llu)",
	    (unsigned long long)stats(&h, NULL).restore_errors);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_faround_sync(const char *self, uint64_t mib)
{
	setenv("VMNAP_UFFD_WP", "sync", 1);	/* the mock VMM inherits it */
	return mode_faround(self, mib);
}

static const struct {
	const char *name;
	int (*run)(const char *self, uint64_t mib);
} modes[] = {
	{ "eager", mode_eager },
	{ "lazy", mode_lazy },
	{ "ws", mode_ws },
	{ "recurring", mode_recurring },
	{ "hot", mode_hot },
	{ "seq", mode_seq },
	{ "seq-small", mode_seq_small },
	{ "faround", mode_faround },
	{ "faround-sync", mode_faround_sync },
	{ "seq-zero", mode_seq_zero },
	{ "seq-zero-sync", mode_seq_zero_sync },
	{ "wstream", mode_wstream },
	{ "wstream-sync", mode_wstream_sync },
};

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	for (size_t i = 0; argc > 1 && i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(argv[1], modes[i].name))
			return modes[i].run(argv[0], mockvmm_arg(argc, argv, 2, 16));
	fprintf(stderr, "usage: pager_restore eager|lazy|ws|recurring|hot|seq|seq-small|faround|"
		"faround-sync|seq-zero|seq-zero-sync|wstream|wstream-sync [MiB]\n");
	return 2;
}
