// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_follow.c - the fault-order prefetch (mock VMM, mockvmm.h).  The
 * mapper reads an order O of scattered pages after every offload, each
 * read a fault of its own (fault-around off, pages far apart).
 *
 *   cycle 1 (data)  every page of O faults; nothing is queued yet
 *   cycle 2 (data)  a fault on O[i] queues the next FOLLOW pages of O, the
 *                   prefetcher puts them into the memfd, and reading them
 *                   takes no userfaultfd fault; the contents are checked
 *   offload         they were all mapped: hits, no misses
 *   cycle 3 (data)  only every group's first page is read: the pages
 *                   installed after them are misses at the next offload
 *   timer cycle     a resume that names its restore (a guest timer's)
 *                   neither records nor follows: reading O faults on every
 *                   page
 *   the end         every byte of round 2 (written after the prefetches)
 *
 * history: the newest order holding a page is followed however old, while
 * kept: O read once, then PAGER_FOLLOW_CYCLES - 1 data cycles that read
 * one other page each (an order each); reading O then takes only the
 * groups' first faults.  After PAGER_FOLLOW_CYCLES more such cycles
 * (O's order gone) it faults on every page and queues nothing.
 *
 * off: follow_pages 0, the library's default: cycle 2 faults on every page.
 *
 * arrive: data that reaches a VM running for a guest timer (no resume of
 * its own) makes the rest of the cycle a data cycle: after a timer's
 * resume a fault (on a page not in O) queues nothing, after
 * pager_data_arrived() reading O
 * takes only the groups' first faults; a second call, or one in a data
 * cycle, changes nothing.
 *
 *   pager_follow [MiB [off|history|arrive]]	(default 16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define FOLLOW		8
#define ORDER		40
#define INSTALL_POLLS	3000	/* x 10 ms: a hang guard, not a time limit */

/* O[k]: data pages (i % 7 == 0) far apart, in no rising run (no
 * sequential stream) */
static uint64_t order_page(unsigned int k)
{
	return 7 * (3 + 9 * (uint64_t)((k * 23) % ORDER));
}

static void timer_resume_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_restore(the_pager(h), PAGER_RESTORE_LAZY);
	pager_resumed(the_pager(h));
}

/* The pager's stats once follow_installed reached @want (or the guard ran
 * out: the caller's check then fails). */
static struct pager_stats wait_installed(struct harness *h, uint64_t want)
{
	struct pager_stats st = stats(h, NULL);

	for (int i = 0; i < INSTALL_POLLS && st.follow_installed < want; i++) {
		usleep(10000);
		st = stats(h, NULL);
	}
	return stats_settled(h);
}

/* A data page in no order O (history mode) */
#define OTHER_PAGE	14

/* Read page @pg (round @round's contents): true if the value is right. */
static bool read_pg(struct harness *h, uint64_t pg, unsigned int round)
{
	uint64_t want[PAGE / 8];
	unsigned long long v = 0;
	char ans[LINE_MAX_LEN];

	page_pattern(pg, round, want);
	vmm_cmd(h, ans, "read %llu", (unsigned long long)pg);
	return sscanf(ans, "value %llx", &v) == 1 && v == want[0];
}

/* Read O[k]. */
static bool read_page(struct harness *h, unsigned int k, unsigned int round)
{
	return read_pg(h, order_page(k), round);
}

/* Read all of O; the faults that took. */
static uint64_t read_order(struct harness *h, unsigned int round, bool *ok)
{
	struct pager_stats st = stats(h, NULL);

	*ok = true;
	for (unsigned int k = 0; k < ORDER; k++)
		*ok &= read_page(h, k, round);
	return stats(h, NULL).faults - st.faults;
}

static bool setup(struct harness *h, const char *self, uint64_t mib, uint32_t follow)
{
	struct pager_config pcfg;

	pager_config_default(&pcfg, "");
	pcfg.prefetch = false;		/* no working set: only follow */
	pcfg.fault_around_pages = 1;	/* a fault brings its page only */
	pcfg.critical_budget_ns = 0;	/* no pre-resume restore */
	pcfg.follow_pages = follow;
	return harness_up(h, &pcfg, self, mib);
}

/* A data cycle: offload, then a resume by the VM's policy.  The offload
 * starts once no page is in flight: the mapper has its page as soon as
 * UFFDIO_COPY wakes it, before the fault thread marks the page CLEAN, and
 * an offload that finds the page still in flight leaves it resident - the
 * next read of it would take no fault, and its cycle record no order. */
static int data_cycle(struct harness *h)
{
	int err;

	stats_settled(h);
	err = offload(h);

	on_loop(h, resumed_cb, NULL);
	return err;
}

/* Set up (follow FOLLOW), then cycle 1: every page of O faults, and
 * nothing is queued yet.  False if the harness did not come up. */
static bool first_cycle(struct harness *h, const char *self, uint64_t mib)
{
	struct pager_stats st;
	uint64_t faults;
	bool ok;
	int err;

	if (!setup(h, self, mib, FOLLOW))
		return false;
	err = data_cycle(h);
	faults = read_order(h, 1, &ok);
	st = stats_settled(h);
	tap(!err && ok && faults == ORDER && !st.follow_queued && st.follow_pages == FOLLOW,
	    "cycle 1: %llu faults for %u pages, nothing queued yet (%s)",
	    (unsigned long long)faults, ORDER, strerror(-err));
	return true;
}

/* Read O in groups: each group's first page, then (once the prefetcher
 * installed them) the FOLLOW pages after it.  *@groups counted, of them
 * *@clean whose followers took no fault; true if every value was right. */
static bool read_groups(struct harness *h, unsigned int *groups, unsigned int *clean)
{
	struct pager_stats st = stats(h, NULL), st1;
	uint64_t installed = st.follow_installed;
	bool ok = true;

	*groups = *clean = 0;
	for (unsigned int k = 0; k < ORDER; k += FOLLOW + 1) {
		unsigned int n = ORDER - k - 1 < FOLLOW ? ORDER - k - 1 : FOLLOW;

		(*groups)++;
		ok &= read_page(h, k, 1);
		st = wait_installed(h, installed + n);
		installed = st.follow_installed;
		for (unsigned int j = k + 1; j <= k + n; j++)
			ok &= read_page(h, j, 1);
		st1 = stats(h, NULL);
		if (st1.faults == st.faults)
			(*clean)++;
		else
			tap_diag("group at O[%u]: %llu fault(s) on %u installed page(s)", k,
				 (unsigned long long)(st1.faults - st.faults), n);
	}
	return ok;
}

/* @n data cycles that read OTHER_PAGE only: an order of one page each. */
static bool other_cycles(struct harness *h, unsigned int n)
{
	bool ok = true;

	for (unsigned int c = 0; c < n; c++)
		ok &= !data_cycle(h) && read_pg(h, OTHER_PAGE, 1);
	return ok;
}

static int mode_history(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	unsigned int groups, clean;
	uint64_t faults;
	bool ok, ok1;
	int err;

	if (!setup(&h, self, mib, FOLLOW))
		return 1;
	err = data_cycle(&h);
	faults = read_order(&h, 1, &ok);
	ok1 = other_cycles(&h, PAGER_FOLLOW_CYCLES - 1);
	tap(!err && ok && ok1 && faults == ORDER,
	    "O read (%llu faults), then %u cycles reading another page",
	    (unsigned long long)faults, PAGER_FOLLOW_CYCLES - 1);
	err = data_cycle(&h);
	ok = read_groups(&h, &groups, &clean);
	st = stats_settled(&h);
	tap(!err && ok && groups && clean == groups && st.follow_installed == ORDER - groups,
	    "O's order %u cycles old is followed: %u of %u groups took no fault after their "
	    "first, %llu page(s) installed", PAGER_FOLLOW_CYCLES, clean, groups,
	    (unsigned long long)st.follow_installed);
	ok1 = other_cycles(&h, PAGER_FOLLOW_CYCLES);
	err = data_cycle(&h);
	st = stats(&h, NULL);
	faults = read_order(&h, 1, &ok);
	st1 = stats_settled(&h);
	tap(!err && ok && ok1 && faults == ORDER && st1.follow_queued == st.follow_queued,
	    "%u cycles later O's order is gone: %llu faults for %u pages, nothing queued",
	    PAGER_FOLLOW_CYCLES, (unsigned long long)faults, ORDER);
	vmm_quit(&h);
	return harness_finish(&h);
}

static void data_arrived_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_data_arrived(the_pager(h));
}

static int mode_arrive(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	unsigned int groups, clean;
	bool ok;
	int err;

	if (!first_cycle(&h, self, mib))
		return 1;
	/* a guest timer's resume (first_cycle left no fault in flight), then
	 * data while the VM runs */
	err = offload(&h);
	on_loop(&h, timer_resume_cb, NULL);
	st = stats(&h, NULL);
	ok = read_pg(&h, OTHER_PAGE, 1);
	st1 = stats_settled(&h);
	tap(!err && ok && st1.faults - st.faults == 1 && st1.follow_queued == st.follow_queued &&
	    !st1.data_arrivals,
	    "timer cycle: %llu faults, nothing queued", (unsigned long long)(st1.faults - st.faults));
	on_loop(&h, data_arrived_cb, NULL);
	ok = read_groups(&h, &groups, &clean);
	st = stats_settled(&h);
	tap(ok && groups && clean == groups && st.data_arrivals == 1,
	    "data arrived: %u of %u groups took no fault after their first, %llu arrival(s)",
	    clean, groups, (unsigned long long)st.data_arrivals);
	on_loop(&h, data_arrived_cb, NULL);
	err = data_cycle(&h);
	on_loop(&h, data_arrived_cb, NULL);
	st = stats(&h, NULL);
	tap(!err && st.data_arrivals == 1,
	    "again, and in a data cycle: nothing changes (%llu arrival(s))",
	    (unsigned long long)st.data_arrivals);
	vmm_quit(&h);
	return harness_finish(&h);
}

static int mode_off(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	uint64_t faults[2];
	bool ok[2];
	int err;

	if (!setup(&h, self, mib, 0))
		return 1;
	for (int c = 0; c < 2; c++) {
		err = data_cycle(&h);
		faults[c] = read_order(&h, 1, &ok[c]);
		tap(!err && ok[c], "cycle %d: O read back (%s)", c + 1, strerror(-err));
	}
	tap(faults[0] == ORDER && faults[1] == ORDER && !stats(&h, NULL).follow_queued &&
	    !stats(&h, NULL).follow_pages,
	    "follow off: %llu and %llu faults for %u pages, nothing queued",
	    (unsigned long long)faults[0], (unsigned long long)faults[1], ORDER);
	vmm_quit(&h);
	return harness_finish(&h);
}

static int mode_follow(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	char ans[LINE_MAX_LEN];
	unsigned int groups, clean_groups, leaders = 0;
	uint64_t faults;
	bool ok;
	int err;

	if (!first_cycle(&h, self, mib))
		return 1;

	/* cycle 2: each group's first page faults, the rest were installed */
	err = data_cycle(&h);
	ok = read_groups(&h, &groups, &clean_groups);
	st = stats_settled(&h);
	tap(!err && ok && groups && clean_groups == groups,
	    "cycle 2: the %u pages after each group's first read from the memfd with no "
	    "fault, in %u of %u groups; contents right", FOLLOW, clean_groups, groups);
	tap(st.follow_installed == ORDER - groups && st.follow_late == 0,
	    "%llu page(s) installed (%u expected), %llu late",
	    (unsigned long long)st.follow_installed, ORDER - groups,
	    (unsigned long long)st.follow_late);

	/* the offload counts them: every one mapped */
	err = data_cycle(&h);
	st = stats(&h, NULL);
	tap(!err && st.follow_hits == ORDER - groups && st.follow_misses == 0,
	    "offload 3: %llu hit(s), %llu miss(es)", (unsigned long long)st.follow_hits,
	    (unsigned long long)st.follow_misses);

	/* cycle 3: only the leaders; what they queued is never mapped */
	ok = true;
	for (unsigned int k = 0; k < ORDER; k += FOLLOW + 1) {
		ok &= read_page(&h, k, 1);
		leaders++;
	}
	st = wait_installed(&h, st.follow_installed + ORDER - groups);
	err = data_cycle(&h);
	st1 = stats(&h, NULL);
	tap(!err && ok && st1.follow_misses == st.follow_installed - (ORDER - groups) &&
	    st1.follow_misses == ORDER - groups && st1.follow_hits == ORDER - groups,
	    "cycle 3: the %u leaders read; the %llu page(s) installed after them are "
	    "misses at the next offload", leaders, (unsigned long long)st1.follow_misses);

	/* a guest timer's cycle: no recording, no following */
	err = offload(&h);
	on_loop(&h, timer_resume_cb, NULL);
	st = stats(&h, NULL);
	faults = read_order(&h, 1, &ok);
	st1 = stats_settled(&h);
	tap(!err && ok && faults == ORDER && st1.follow_queued == st.follow_queued,
	    "timer cycle: %llu faults for %u pages, nothing queued",
	    (unsigned long long)faults, ORDER);

	/* writes after it all, then every byte */
	vmm_cmd(&h, ans, "fill 2");
	err = data_cycle(&h);
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!err && !strcmp(ans, "ok"), "every byte of round 2 verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	if (argc > 2 && !strcmp(argv[2], "off"))
		return mode_off(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "arrive"))
		return mode_arrive(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "history"))
		return mode_history(argv[0], mockvmm_arg(argc, argv, 1, 16));
	return mode_follow(argv[0], mockvmm_arg(argc, argv, 1, 16));
}
