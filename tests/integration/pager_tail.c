// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_tail.c - the command's last writes (pager_config.tail_resident,
 * mock VMM, mockvmm.h).  With ticks on (pager_tail_track, as vmnapd's
 * coordinator does while a command runs), the mapper rewrites every data
 * page, then, ticks later, the set S: when the wait begins (tracking off)
 * S alone becomes the tail set; the next offload stores S with every
 * other data page but puts S back into the memfd, CLEAN and mapped by no
 * one, with its last contents: touching S takes no userfault, a host page
 * fault a page.  The next command drops the set: the offload after it
 * takes S out and brings back S's last contents.
 *
 * A CLEAN page written while ticks run is found by a tick (which protects
 * it again, so the offload's own scan no longer sees that write): the
 * next offload must still store its new contents, never punch it as
 * CLEAN (a stale slot would bring the old round back).
 *
 * With "first" (vmnapd's default) the same command and wait make a set
 * while the resume-critical set is empty; a data resume that faults on a
 * page and reads two of S's (no write) teaches the resume-critical set
 * those three, and the two leave the tail set; the next command is not
 * scanned and its wait keeps no set: the two stay as resume-critical, the
 * rest of S goes out.
 *
 * With "early" the VM runs before any offload (pager_tail_track_start,
 * then a command told), so nothing is registered yet: the pager
 * registers write-protect alone to scan it (no MISSING: nothing is out),
 * the same set is made and kept by the first offload, which registers
 * MISSING over it: every other page comes back from the store by its
 * fault.
 *
 * With "cancel" the wait's first offload is stopped after its first batch
 * (as a guest timer due or the data would stop it): the set is not lost,
 * the next offload stores it and puts it back.
 *
 * With "budget" (a budget of BUDGET_PAGES written pages a command) a
 * command that rewrites every data page runs its ticks out of budget:
 * they stop, its wait makes no set, and S goes out with the rest; the
 * next command, which writes S alone, is scanned again from nothing and
 * its wait's set is S.
 *
 * With "boot" (the same budget) the VM runs before a coordinator
 * (pager_tail_track_start) and rewrites every data page: those ticks have
 * no budget, so they go on, but the next is put further off (a tick that
 * finds more than a set holds); the coordinator's first command is
 * scanned from nothing, so its wait's set is S.
 *
 * With "ranked" a command writes S in four ticks and then a burst of more
 * data pages than a set holds, each once and most of them numbered below
 * S's: the set, full, holds S, the pages written in more ticks, before
 * the burst's, which are the lowest-numbered and the most recent.
 *
 * With "idle" ("first") PAGER_TAIL_IDLE_SETS commands in a row make sets
 * and no offload follows: the next command is not scanned, until an
 * offload ends.
 *
 * The ticks' progress is read from the pager's counters (tail_ticks,
 * tail_sets, tail_ticking), polled with a generous limit: nothing is
 * timed.  TAP.
 *
 *   pager_tail [MiB [first|early|cancel|budget|boot|ranked|idle]]	(default 16,
 *   "always")
 */
#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define CANCEL_BATCH_BYTES	(64u << 10)	/* "cancel": small batches, */
#define CANCEL_QUEUE_DEPTH	1		/* one at a time */
#define BUDGET_PAGES		1024	/* "budget": under the data pages */
#define TICK_POLL_US		10000
#define TICK_POLL_MAX	2000	/* 20 s: a loaded machine, not a speed (and a
				 * miss a "not ok", within the test's limit) */

static void track_cb(struct harness *h, void *arg)
{
	pager_tail_track(the_pager(h), *(const bool *)arg);
}

static void track_start_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_tail_track_start(the_pager(h));
}

static void track(struct harness *h, bool on)
{
	on_loop(h, track_cb, &on);
}

/* Wait for @n more ticks than @st0 counted (or one more set with @set):
 * false if they never came.  @st0 is read before what should cause them:
 * the worker may be quicker than the next stats(). */
static bool ticks_pass(struct harness *h, const struct pager_stats *st0, uint64_t n, bool set)
{
	struct pager_stats st = stats(h, NULL);

	for (int i = 0; i < TICK_POLL_MAX; i++) {
		if (set ? st.tail_sets > st0->tail_sets : st.tail_ticks >= st0->tail_ticks + n)
			return true;
		usleep(TICK_POLL_US);
		st = stats(h, NULL);
	}
	return false;
}

static void prepare_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_prepare(the_pager(h));
}

/* The host page faults a "touchset" answer counts ("ok N"). */
static unsigned long host_faults(const char *ans)
{
	unsigned long n = 0;

	return sscanf(ans, "ok %lu", &n) == 1 ? n : 0;
}

/* A data page of guest RAM outside S. */
static uint64_t page_off_set(uint64_t npages)
{
	uint64_t pgs[CRIT_SET_MAX];
	unsigned int n = crit_set(npages, pgs), k = 0;

	for (uint64_t pg = 0; pg < npages; pg++) {
		while (k < n && pgs[k] < pg)
			k++;
		if (page_kind(pg) == PK_DATA && (k == n || pgs[k] != pg))
			return pg;
	}
	return 0;
}

/* A command that rewrites every data page, @ticks ticks, then S written
 * with round @round's contents and the wait begun: true if a set was
 * made.  *@before: the stats as the wait began. */
static bool command_and_wait(struct harness *h, unsigned int round, uint64_t ticks,
			     struct pager_stats *before)
{
	char ans[LINE_MAX_LEN];
	bool ok;

	track(h, true);
	vmm_cmd(h, ans, "fill 2");
	*before = stats(h, NULL);
	ok = !strcmp(ans, "ok") && before->tail_ticking && ticks_pass(h, before, ticks, false);
	vmm_cmd(h, ans, "writeset %u", round);
	*before = stats(h, NULL);
	track(h, false);
	return ok && !strncmp(ans, "ok", 2) && ticks_pass(h, before, 0, true);
}

/* A command rewrites every data page, three ticks pass, it writes S
 * (round 3), its wait begins: the set must be S.  The stats after (and
 * in *@before as the wait began); S's pages in *@sc. */
static struct pager_stats set_is_s(struct harness *h, struct set_resident_call *sc,
				   struct pager_stats *before)
{
	struct pager_stats st;
	bool made = command_and_wait(h, 3, 3, before);

	st = stats(h, NULL);
	*sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, sc);
	tap(made && st.tail_pages == sc->n, "a command rewrote every data page, three ticks "
	    "passed, then it wrote S, and its wait began: the set is S, the last write: %llu "
	    "page(s), S has %u", (unsigned long long)st.tail_pages, sc->n);
	return st;
}

/* The data comes: touching S (round 3's) takes no userfault, tap'd with
 * @what; the answer in @ans, the stats after. */
static struct pager_stats touch_s(struct harness *h, const struct pager_stats *st,
				  char *ans, const char *what)
{
	struct pager_stats st1;

	vmm_cmd(h, ans, "touchset 3");
	st1 = stats(h, NULL);
	tap(!strncmp(ans, "ok", 2) && st1.faults == st->faults, "%s (%s)", what, ans);
	return st1;
}

/* S written with round 2's contents (every data page is round 2's then)
 * and every byte verified by two threads: "ok" in @ans. */
static void verify_all(struct harness *h, char *ans)
{
	vmm_cmd(h, ans, "writeset 2");
	vmm_cmd(h, ans, "verify 2 2");
}

/* "always": the set, its keeping, its dropping, and CLEAN pages. */
static void always(struct harness *h)
{
	struct pager_stats st, st1;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN];
	int err;

	st1 = set_is_s(h, &sc, &st);
	tap(st1.tail_ticks > st.tail_ticks, "the wait's own scan made it");

	err = offload(h);
	st = stats(h, NULL);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok && st.pages[PAGE_OFFLOADED] > 0 &&
	    st.pages[PAGE_RESIDENT] + st.pages[PAGE_CLEAN] == sc.n &&
	    st.tail_installed - st1.tail_installed == sc.n,
	    "offload 2 put S back into the memfd with its last contents (%u of %u pages), and "
	    "only S: %llu resident, %llu offloaded", sc.resident, sc.n,
	    (unsigned long long)(st.pages[PAGE_RESIDENT] + st.pages[PAGE_CLEAN]),
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	tap(st.pages[PAGE_CLEAN] == sc.n && !st.kept_dirty_pages,
	    "S stored: CLEAN %llu, kept dirty %llu", (unsigned long long)st.pages[PAGE_CLEAN],
	    (unsigned long long)st.kept_dirty_pages);
	touch_s(h, &st, ans, "the data comes: touching S took no userfault");
	tap(host_faults(ans) >= sc.n, "... and a host page fault a page: mapped by no one (%s)",
	    ans);

	/* the next command: the set is dropped, S goes out with the rest */
	track(h, true);
	st = stats(h, NULL);
	tap(st.tail_pages == 0, "the next command dropped the set");
	vmm_cmd(h, ans, "writeset 4");
	err = offload(h);
	sc = (struct set_resident_call){ .round = 4 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == 0, "offload 3: S went out (%u of %u pages in the memfd)",
	    sc.resident, sc.n);
	vmm_cmd(h, ans, "touchset 4");
	tap(!strncmp(ans, "ok", 2), "S back from the store as last written (%s)", ans);

	/* S CLEAN now (read back); written while ticks run, the tick that
	 * finds it protects it again: the offload must still store it */
	vmm_cmd(h, ans, "writeset 5");
	st = stats(h, NULL);
	tap(!strncmp(ans, "ok", 2) && ticks_pass(h, &st, 2, false),
	    "S, CLEAN, written while a command runs; two ticks passed (%s)", ans);
	err = offload(h);
	sc = (struct set_resident_call){ .round = 5 };
	on_loop(h, set_resident_cb, &sc);
	vmm_cmd(h, ans, "touchset 5");
	tap(!err && sc.resident == 0 && !strncmp(ans, "ok", 2),
	    "offload 4 stored S's new contents, not its stale slot (%s)", ans);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
	track(h, false);
}

/* The command writes S (round @round), its wait begins, an offload: its
 * error; the stats after in *@st, S in the memfd in *@sc. */
static int write_wait_offload(struct harness *h, unsigned int round, struct pager_stats *st,
			      struct set_resident_call *sc)
{
	char ans[LINE_MAX_LEN];
	int err;

	vmm_cmd(h, ans, "writeset %u", round);
	track(h, false);
	err = offload(h);
	*st = stats(h, NULL);
	*sc = (struct set_resident_call){ .round = round };
	on_loop(h, set_resident_cb, sc);
	return err;
}

/* The stats once the worker has noted the set's written pages (a
 * learn after @st0). */
static struct pager_stats learned(struct harness *h, const struct pager_stats *st0)
{
	struct pager_stats st = stats(h, NULL);

	for (int i = 0; i < TICK_POLL_MAX && st.tail_learned == st0->tail_learned; i++) {
		usleep(TICK_POLL_US);
		st = stats(h, NULL);
	}
	return st;
}

/* "first": a set while the resume-critical set is empty, none after;
 * the set's pages the data path touched join the resume-critical set. */
static void first(struct harness *h)
{
	struct pager_stats st, st1;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN], ans1[LINE_MAX_LEN], ans2[LINE_MAX_LEN];
	uint64_t pgs[CRIT_SET_MAX];
	unsigned int n;
	int err;

	/* (three ticks after the rewrite, as set_is_s: the set is S alone; with
	 * one, the rewrite's last pages could join it, the page read outside
	 * S among them, and be taught too) */
	tap(command_and_wait(h, 3, 3, &st), "the resume-critical set empty: a command scanned, "
	    "its wait made a set");
	err = offload(h);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok,
	    "offload 2 kept it: %u of %u pages of S in the memfd", sc.resident, sc.n);

	/* the data resume: a page outside S faults in its window, and the
	 * data's way reads two of S's (kept: they cannot fault) */
	on_loop(h, prepare_cb, NULL);
	st = stats(h, NULL);
	n = crit_set(st.pages_total, pgs);
	vmm_cmd(h, ans, "read %llu", (unsigned long long)page_off_set(st.pages_total));
	vmm_cmd(h, ans1, "read %llu", (unsigned long long)pgs[0]);
	vmm_cmd(h, ans2, "read %llu", (unsigned long long)pgs[n - 1]);
	on_loop(h, delivered_cb, NULL);
	st1 = learned(h, &st);
	tap(!strncmp(ans, "value", 5) && !strncmp(ans1, "value", 5) &&
	    !strncmp(ans2, "value", 5) && n > 2 && st1.tail_learned - st.tail_learned == 2 &&
	    st1.critical_set_pages == st.critical_set_pages + 3,
	    "a data resume taught the resume-critical set the page that faulted and the %llu "
	    "page(s) of S it read, not S's other %u: %llu in the set (%s)",
	    (unsigned long long)(st1.tail_learned - st.tail_learned), n - 2,
	    (unsigned long long)st1.critical_set_pages, ans);
	tap(st1.tail_pages == st.tail_pages - 2, "... and those two left the tail set, so a "
	    "later delivery of the wait does not teach them again: %llu of %llu page(s) left",
	    (unsigned long long)st1.tail_pages, (unsigned long long)st.tail_pages);

	track(h, true);
	st = stats(h, NULL);
	tap(!st.tail_ticking && !st.tail_pages, "so the next command is not scanned");
	err = write_wait_offload(h, 5, &st1, &sc);
	tap(!err && st1.tail_sets == st.tail_sets && st1.tail_ticks == st.tail_ticks &&
	    sc.resident == 2 && sc.contents_ok, "its wait made no set: offload 3 kept the two "
	    "as resume-critical (%u of %u pages of S in the memfd, their contents)",
	    sc.resident, sc.n);
	vmm_cmd(h, ans, "touchset 5");
	st = stats(h, NULL);
	tap(!strncmp(ans, "ok", 2) && st.faults > st1.faults,
	    "the rest of S came back from the store by %llu fault(s) (%s)",
	    (unsigned long long)(st.faults - st1.faults), ans);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* "early": the first command before the first offload. */
static void early(struct harness *h)
{
	struct pager_stats st, st1;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN];
	int err;

	st1 = set_is_s(h, &sc, &st);
	tap(!st1.offloads, "nothing offloaded yet");
	err = offload(h);
	st = stats(h, NULL);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok && st.pages[PAGE_OFFLOADED] > 0 &&
	    st.pages[PAGE_RESIDENT] + st.pages[PAGE_CLEAN] == sc.n &&
	    st.dirty_tracking == PAGER_DIRTY_WP_ASYNC,
	    "the first offload kept S (%u of %u pages, their contents), %llu page(s) out, "
	    "tracking %s", sc.resident, sc.n, (unsigned long long)st.pages[PAGE_OFFLOADED],
	    pager_dirty_tracking_name(st.dirty_tracking));
	st1 = touch_s(h, &st, ans, "touching S took no fault");
	verify_all(h, ans);
	st = stats(h, NULL);
	tap(!strcmp(ans, "ok") && st.faults > st1.faults,
	    "every byte verified, the rest back by %llu fault(s) (%s)",
	    (unsigned long long)(st.faults - st1.faults), ans);
}

static void cancel_cb(struct harness *h, void *arg)
{
	*(int *)arg = pager_offload_cancel(the_pager(h));
}

/* "cancel": the set's first offload stopped, the next one puts it back. */
static void cancel(struct harness *h)
{
	struct pager_stats st, st1;
	struct set_resident_call sc;
	struct offload_call oc;
	char ans[LINE_MAX_LEN];
	int cerr = -1, err;

	st1 = set_is_s(h, &sc, &st);
	on_loop(h, offload_cb, &oc);
	do {	/* stop it once its first batch is out */
		st = stats(h, NULL);
		if (!st.pages[PAGE_OFFLOADED])
			usleep(TICK_POLL_US / 100);
	} while (!oc.err && !st.pages[PAGE_OFFLOADED] && st.offloads == st1.offloads);
	on_loop(h, cancel_cb, &cerr);
	while (!oc.err && sem_wait(&h->offload_done) && errno == EINTR)
		;
	err = oc.err ? oc.err : h->offload_err;
	st = stats(h, NULL);
	tap(!cerr && err == -ECANCELED && st.tail_pages == sc.n &&
	    st.tail_installed == st1.tail_installed,
	    "offload 2 stopped after its first batch (%s): the set is still S (%llu page(s)), "
	    "not put back", strerror(-err), (unsigned long long)st.tail_pages);
	err = offload(h);
	st = stats(h, NULL);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok &&
	    st.tail_installed - st1.tail_installed == sc.n,
	    "offload 3 put S back into the memfd with its last contents (%u of %u pages)",
	    sc.resident, sc.n);
	touch_s(h, &st, ans, "touching S took no userfault");
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* A command told, scanned, that writes S alone (round @round), and its
 * wait: a set must be made (tap'd, @who the command).  The stats after;
 * S's pages in the memfd in *@sc. */
static struct pager_stats s_alone(struct harness *h, unsigned int round, const char *who,
				  struct set_resident_call *sc)
{
	struct pager_stats st0, st;
	char ans[LINE_MAX_LEN];

	track(h, true);
	st0 = stats(h, NULL);
	tap(st0.tail_ticking && ticks_pass(h, &st0, 1, false), "%s is scanned", who);
	vmm_cmd(h, ans, "writeset %u", round);
	st0 = stats(h, NULL);
	track(h, false);
	tap(!strncmp(ans, "ok", 2) && ticks_pass(h, &st0, 0, true), "it wrote S, its wait "
	    "began: a set was made");
	st = stats(h, NULL);
	*sc = (struct set_resident_call){ .round = round };
	on_loop(h, set_resident_cb, sc);
	return st;
}

/* "budget": a command's ticks stop at its budget; the next one's start
 * again from nothing. */
static void budget(struct harness *h)
{
	struct pager_stats st0, st1, st;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN];
	int err;

	track(h, true);
	st0 = stats(h, NULL);
	/* (the first tick after a registration is not counted: let it pass) */
	tap(st0.tail_ticking && ticks_pass(h, &st0, 1, false), "a command runs: scanned");
	vmm_cmd(h, ans, "fill 2");
	st1 = stats(h, NULL);
	for (int i = 0; i < TICK_POLL_MAX && st1.tail_budget_stops == st0.tail_budget_stops; i++) {
		usleep(TICK_POLL_US);
		st1 = stats(h, NULL);
	}
	tap(!strcmp(ans, "ok") && st1.tail_budget_stops == st0.tail_budget_stops + 1 &&
	    !st1.tail_ticking && st1.tail_tick_pages - st0.tail_tick_pages >= BUDGET_PAGES,
	    "it rewrote every data page: its ticks found %llu written page(s), the budget "
	    "is %u: they stopped", (unsigned long long)(st1.tail_tick_pages - st0.tail_tick_pages),
	    BUDGET_PAGES);

	err = write_wait_offload(h, 3, &st, &sc);
	tap(!err && st.tail_sets == st0.tail_sets && !st.tail_pages &&
	    st.tail_ticks == st1.tail_ticks && sc.resident == 0,
	    "no tick after, its wait made no set: offload 2 took S out with the rest "
	    "(%u of %u pages of S in the memfd)", sc.resident, sc.n);

	/* the next command writes S alone: within budget, a set again */
	st = s_alone(h, 4, "the next command", &sc);
	tap(st.tail_pages >= sc.n && st.tail_budget_stops == st1.tail_budget_stops,
	    "the set holds S, the last write: %llu page(s), S has %u (with the pages read "
	    "back beside S's); the budget was not reached", (unsigned long long)st.tail_pages,
	    sc.n);
	err = offload(h);
	sc = (struct set_resident_call){ .round = 4 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok,
	    "offload 3 put S back into the memfd with its last contents (%u of %u pages)",
	    sc.resident, sc.n);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* "boot": no budget before a coordinator, the next tick put off while
 * the guest writes much; the coordinator's command starts from nothing. */
static void boot(struct harness *h)
{
	struct pager_stats st0, st1, st;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN];
	int err;

	st0 = stats(h, NULL);
	tap(ticks_pass(h, &st0, 1, false), "a tick passed (the first after a registration "
	    "counts no page written)");
	st0 = stats(h, NULL);
	vmm_cmd(h, ans, "fill 2");
	st1 = stats(h, NULL);
	/* (the rewrite may span two ticks: both found) */
	for (int i = 0; i < TICK_POLL_MAX && (st1.tail_backoffs == st0.tail_backoffs ||
					      st1.tail_tick_pages - st0.tail_tick_pages <
					      BUDGET_PAGES); i++) {
		usleep(TICK_POLL_US);
		st1 = stats(h, NULL);
	}
	tap(!strcmp(ans, "ok") && st1.tail_backoffs > st0.tail_backoffs &&
	    st1.tail_tick_pages - st0.tail_tick_pages >= BUDGET_PAGES &&
	    st1.tail_ticking && st1.tail_budget_stops == 0,
	    "it rewrote every data page before a coordinator: its ticks found %llu written "
	    "page(s), over the budget of %u, and go on, the next put further off",
	    (unsigned long long)(st1.tail_tick_pages - st0.tail_tick_pages), BUDGET_PAGES);

	/* the coordinator's first command writes S alone: a set */
	st = s_alone(h, 3, "the coordinator's first command", &sc);
	tap(st.tail_pages >= sc.n && st.tail_budget_stops == 0,
	    "the set holds S, its budget not spent by the boot's pages: %llu page(s), S has %u "
	    "(with the pages read back beside S's)", (unsigned long long)st.tail_pages, sc.n);
	err = offload(h);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	st = stats(h, NULL);
	tap(!err && sc.resident == sc.n && sc.contents_ok && st.pages[PAGE_OFFLOADED] > 0,
	    "the first offload kept S (%u of %u pages, their contents), %llu page(s) out",
	    sc.resident, sc.n, (unsigned long long)st.pages[PAGE_OFFLOADED]);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* "ranked": a full set takes the pages written in more ticks first. */
static void ranked(struct harness *h)
{
	struct pager_stats st0, st;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN], ans1[LINE_MAX_LEN];
	bool ok = true;
	int err;

	track(h, true);
	vmm_cmd(h, ans, "fill 2");	/* every data page round 2's (verify_all) */
	st0 = stats(h, NULL);
	/* (two ticks: the fill may span them; its pages age out of the
	 * last two) */
	ok = !strcmp(ans, "ok") && ticks_pass(h, &st0, 2, false);
	for (int i = 0; i < 3 && ok; i++) {
		vmm_cmd(h, ans, "writeset 3");
		st0 = stats(h, NULL);
		ok = !strncmp(ans, "ok", 2) && ticks_pass(h, &st0, 1, false);
	}
	vmm_cmd(h, ans, "writeset 3");
	ok = ok && !strncmp(ans, "ok", 2);
	/* then the burst, after S's last write (in its tick or a later one:
	 * the most recent first would take the burst): every data page
	 * below S's scattered part but S's run, once (round 2's again: the
	 * contents stay what verify_all wants) */
	vmm_cmd(h, ans, "writerange 0 %u 2", CRIT_RUN_FIRST);
	vmm_cmd(h, ans1, "writerange %u %u 2", CRIT_RUN_FIRST + CRIT_RUN_PAGES,
		CRIT_SCATTER_FIRST);
	st0 = stats(h, NULL);
	track(h, false);
	ok = ok && !strcmp(ans, "ok") && !strcmp(ans1, "ok") && ticks_pass(h, &st0, 0, true);
	st = stats(h, NULL);
	tap(ok && st.tail_pages == PAGER_TAIL_MAX_PAGES, "a command wrote S in four ticks, "
	    "then more pages than a set holds once: the set is full (%llu page(s))",
	    (unsigned long long)st.tail_pages);
	err = offload(h);
	sc = (struct set_resident_call){ .round = 3 };
	on_loop(h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok, "it holds S, written in the most "
	    "ticks: the offload kept %u of S's %u pages, with their contents", sc.resident, sc.n);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* "idle": sets no offload followed stop the scans until one ends. */
static void idle(struct harness *h)
{
	struct pager_stats st0, st;
	struct set_resident_call sc;
	char ans[LINE_MAX_LEN], who[64];
	int err;

	vmm_cmd(h, ans, "fill 2");	/* every data page round 2's (verify_all) */
	st0 = stats(h, NULL);
	for (unsigned int i = 1; i <= PAGER_TAIL_IDLE_SETS; i++) {
		snprintf(who, sizeof(who), "command %u, no offload after it,", i);
		st = s_alone(h, 2 + i, who, &sc);
	}
	tap(st.tail_sets == st0.tail_sets + PAGER_TAIL_IDLE_SETS && st.offloads == st0.offloads,
	    "%u sets made, no offload", PAGER_TAIL_IDLE_SETS);
	track(h, true);
	st = stats(h, NULL);
	tap(!st.tail_ticking && st.tail_idle_stops == st0.tail_idle_stops + 1,
	    "so the next command is not scanned (the resume-critical set still empty)");
	vmm_cmd(h, ans, "writeset 9");
	track(h, false);
	err = offload(h);
	st0 = stats(h, NULL);
	tap(!strncmp(ans, "ok", 2) && !err && st0.tail_sets == st.tail_sets,
	    "its wait made no set; an offload ended (%s)", strerror(-err));
	track(h, true);
	st = stats(h, NULL);
	tap(st.tail_ticking && st.tail_idle_stops == st0.tail_idle_stops,
	    "the next command is scanned again");
	track(h, false);
	verify_all(h, ans);
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
}

/* The modes: what each runs, with which pager settings. */
static const struct tail_mode {
	const char *name;
	void (*run)(struct harness *h);
	enum pager_tail tail;
	uint32_t budget_pages;		/* 0: the default */
	bool small_batches;		/* CANCEL_BATCH_BYTES, CANCEL_QUEUE_DEPTH */
	bool before_offload;		/* pager_tail_track_start, no offload 1 */
} modes[] = {
	{ "always", always, PAGER_TAIL_ALWAYS, 0, false, false },
	{ "first", first, PAGER_TAIL_FIRST, 0, false, false },
	{ "early", early, PAGER_TAIL_ALWAYS, 0, false, true },
	{ "cancel", cancel, PAGER_TAIL_ALWAYS, 0, true, false },
	{ "budget", budget, PAGER_TAIL_ALWAYS, BUDGET_PAGES, false, false },
	{ "boot", boot, PAGER_TAIL_ALWAYS, BUDGET_PAGES, false, true },
	{ "ranked", ranked, PAGER_TAIL_ALWAYS, 0, false, false },
	{ "idle", idle, PAGER_TAIL_FIRST, 0, false, false },
};

int main(int argc, char **argv)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	const struct tail_mode *m = NULL;
	const char *mode;
	uint64_t mib;
	int err = 0;

	if (mockvmm_init(argc, argv))
		return 0;
	mib = mockvmm_arg(argc, argv, 1, 16);
	mode = argc > 2 ? argv[2] : "always";
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]) && !m; i++)
		if (!strcmp(mode, modes[i].name))
			m = &modes[i];
	if (!m) {
		fprintf(stderr, "pager_tail: unknown mode \"%s\"\n", mode);
		return 2;
	}
	pager_config_default(&pcfg, "");
	pcfg.prefetch = false;
	pcfg.critical_resident = true;
	pcfg.tail_resident = m->tail;
	if (m->budget_pages)
		pcfg.tail_budget_pages = m->budget_pages;
	if (m->small_batches) {
		pcfg.write_batch_bytes = CANCEL_BATCH_BYTES;
		pcfg.write_queue_depth = CANCEL_QUEUE_DEPTH;
	}
	if (!harness_up(&h, &pcfg, argv[0], mib))
		return 1;
	if (m->before_offload) {
		/* the VM runs, no command told yet (as vmnapd when a mapper
		 * comes before a coordinator): write-protect alone, ticks */
		on_loop(&h, track_start_cb, NULL);
		st = stats(&h, NULL);
		if (st.dirty_tracking == PAGER_DIRTY_WP_ASYNC)
			tap(st.tail_ticking && !st.offloads, "the VM runs before any offload: "
			    "registered for write-protect, scanned");
	} else {
		/* (the mapper registers, tracking is decided) */
		err = offload(&h);
		tap(!err, "offload 1: %s", strerror(-err));
		st = stats(&h, NULL);
	}
	if (st.dirty_tracking != PAGER_DIRTY_WP_ASYNC)
		tap_skip("the command's last writes", "they need asynchronous write-protect, "
			 "tracking here is %s", pager_dirty_tracking_name(st.dirty_tracking));
	else
		m->run(&h);
	vmm_quit(&h);
	return harness_finish(&h);
}
