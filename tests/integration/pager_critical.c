// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_critical.c - the resume-critical set (mock VMM, mockvmm.h): cycle 1
 * offload, resume, touch a set S, delivered; cycle 2 offload, the
 * pre-resume restore puts S in the memfd before the mapper touches it
 * (SEEK_DATA), mapped into the mapper: touching S takes no userfaultfd
 * fault and no host page fault, every byte verified; the set is
 * bounded and recorded only until delivery; a window that overfills it
 * keeps its first faults.  TAP.
 *
 * A store ring that takes none of a wave's reads (io_uring_submit failing,
 * interposed below) is dropped: the wave is read with pread, the rest is
 * left to faults, and the next resume restores through a new ring.
 *
 * deliver: the delivery follows each access at once, as a guest's
 * RESUME_ACK may; the fault that access took is counted in the window and
 * its page restored before the next resume, every round.
 *
 * resident (pager_config.critical_resident, vmnapd's default): the next
 * offload leaves S in the memfd and mapped, with its round's contents,
 * while every other data page goes out; the pre-resume restore reads
 * nothing and touching S takes no userfaultfd fault and no host page fault.
 * S, written before that offload, is not write-protected again: writing
 * it takes no fault either.  Once a storm's pages have replaced S in the
 * set, the next offload stores S's last contents and they come back; the
 * stale slots S had while kept kept their blocks for that write.
 * resident-sync: the same with wp_sync tracking (VMNAP_UFFD_WP=sync).
 *
 * data: data taken in while the VM runs after a timer's resume (its
 * window closed at RESUME_ACK): without pager_data_window() S's faults
 * are not recorded and the next offload takes S out; with it they are,
 * and the next offload keeps S.  Before any offload nothing is out and
 * no window opens.
 *
 * device: the ranges vmnapd's own device touches first on resume
 * (pager_set_device_pages) stay in the memfd through offloads, checked
 * against guest RAM; one out when named is read back; replaced by the
 * next call.
 *
 *   pager_critical [MiB [deliver|resident|resident-sync|data|device]]	(default 16)
 */
#include <dlfcn.h>
#include <math.h>
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define CRIT_NO_BUDGET_NS	UINT64_MAX
#define CRIT_TINY_BUDGET_NS	1

struct prepare_call {
	int ret;
};

/*
 * The pager's calls to io_uring_submit come here (this program's symbol
 * wins over liburing's): while fail_submits > 0, each call fails as an
 * exhausted kernel would, leaving its reads queued in the ring.
 */
static atomic_int fail_submits;

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);
	int left = atomic_load(&fail_submits);

	while (left > 0)
		if (atomic_compare_exchange_weak(&fail_submits, &left, left - 1))
			return -EAGAIN;
	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	return real ? real(ring) : -ENOSYS;
}

/*
 * The pager's true latency sum (what /metrics exports as _sum) against its
 * histogram: bucket i holds [2^i, 2^(i+1)) µs (bucket 0 also below 1 µs),
 * so the sum lies between the lower and the upper bounds.  Nonzero for
 * any fault: a fault takes at least some nanoseconds.
 */
static uint64_t lat_count(const struct pager_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < PAGER_LAT_BUCKETS; i++)
		n += st->fault_lat_us[i];
	return n;
}

static bool lat_sum_fits(const struct pager_stats *st)
{
	double lo = 0, hi = 0;
	uint64_t n = lat_count(st);

	for (int i = 0; i < PAGER_LAT_BUCKETS; i++) {
		lo += (double)st->fault_lat_us[i] * (i ? (double)(1ull << i) * 1000 : 0);
		hi += i == PAGER_LAT_BUCKETS - 1 && st->fault_lat_us[i] ? INFINITY :
		      (double)st->fault_lat_us[i] * (double)(1ull << (i + 1)) * 1000;
	}
	/* every fault here is on an offloaded page: part of its time is the
	 * store read; the lock and in-flight waits are other parts */
	return n == st->faults && n > 0 && st->fault_lat_ns_sum > 0 &&
	       (double)st->fault_lat_ns_sum >= lo && (double)st->fault_lat_ns_sum < hi &&
	       st->fault_read_ns_sum > 0 && st->fault_read_ns_sum < st->fault_lat_ns_sum &&
	       st->fault_read_ns_sum + st->fault_lock_ns_sum + st->fault_in_flight_ns_sum <
	       st->fault_lat_ns_sum &&
	       (st->fault_in_flight_faults > 0) == (st->fault_in_flight_ns_sum > 0) &&
	       st->fault_seq_ns_sum <= st->fault_lat_ns_sum;
}

static void prepare_cb(struct harness *h, void *arg)
{
	((struct prepare_call *)arg)->ret = pager_resume_prepare(the_pager(h));
}

static void budget_cb(struct harness *h, void *arg)
{
	pager_set_critical_budget(the_pager(h), *(const uint64_t *)arg);
}

/* Is page @pg in the memfd (allocated, not a hole)? */
struct page_resident_call {
	uint64_t pg;
	bool resident;
};

static void page_resident_cb(struct harness *h, void *arg)
{
	struct page_resident_call *rc = arg;
	uint64_t off;
	int fd;

	rc->resident = !pager_gpa_to_memfd(the_pager(h), 0, &fd, &off) &&
		       lseek(fd, (off_t)(off + rc->pg * PAGE), SEEK_DATA) ==
		       (off_t)(off + rc->pg * PAGE);
}

/* Next cycle: round @round's data, offload, the pre-resume restore (with
 * the time budget *@budget first, unless NULL).  The offload's -errno. */
static int cycle_start(struct harness *h, unsigned int round, const uint64_t *budget,
		       struct prepare_call *pc)
{
	char ans[LINE_MAX_LEN];
	int err;

	vmm_cmd(h, ans, "fill %u", round);
	err = offload(h);
	if (budget)
		on_loop(h, budget_cb, (void *)budget);
	on_loop(h, prepare_cb, pc);
	return err;
}

/* Every page read and verified (a storm of faults): does the set fill to
 * its bound? */
static bool storm_fills_set(struct harness *h, unsigned int round, struct pager_stats *st)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "verify %u 2", round);
	*st = stats(h, NULL);
	return !strcmp(ans, "ok") && st->critical_set_pages == PAGER_CRITICAL_MAX_PAGES;
}

/*
 * A harness and its mock VMM, ready: no prefetch (only the pre-resume
 * restore and faults bring pages back) and no time bound on the restore
 * (checked on its own in mode_critical: no speed asserted here); the set
 * kept resident through offloads if @resident.  False if it could not be
 * set up (bailed out).
 */
static bool setup(struct harness *h, const char *self, uint64_t mib, bool resident)
{
	struct pager_config pcfg;

	pager_config_default(&pcfg, "");
	pcfg.prefetch = false;
	pcfg.critical_budget_ns = CRIT_NO_BUDGET_NS;
	pcfg.critical_resident = resident;
	return harness_up(h, &pcfg, self, mib);
}

#define DELIVER_ROUNDS	16

/* Round @k's page: data pages (i % 7 == 0) far apart, so each read is a
 * fault of its own (no sequential stream, no readahead). */
static uint64_t deliver_page(unsigned int k)
{
	return 7 * (20 + 30 * (uint64_t)k);
}

static int mode_deliver(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	struct prepare_call pc;
	char ans[LINE_MAX_LEN];
	unsigned int rounds = 0, counted = 0, restored = 0;
	int err;

	if (!setup(&h, self, mib, false))
		return 1;
	err = offload(&h);
	on_loop(&h, prepare_cb, &pc);
	tap(!err && pc.ret == 0, "offload: %s; nothing to restore", strerror(-err));
	for (unsigned int k = 0; k < DELIVER_ROUNDS && deliver_page(k) < (mib << 20) / PAGE;
	     k++) {
		uint64_t pg = deliver_page(k), want[PAGE / 8];
		struct page_resident_call rc = { .pg = pg };
		unsigned long long v = 0;

		rounds++;
		st = stats(&h, NULL);
		vmm_cmd(&h, ans, "read %llu", (unsigned long long)pg);
		on_loop(&h, delivered_cb, NULL);	/* at once, as RESUME_ACK may */
		st1 = stats(&h, NULL);
		page_pattern(pg, 1, want);
		if (sscanf(ans, "value %llx", &v) == 1 && v == want[0] &&
		    st1.faults == st.faults + 1 &&
		    st1.critical_window_faults == st.critical_window_faults + 1)
			counted++;
		else
			tap_diag("round %u: page %llu: %s; faults %llu -> %llu, in the window "
				 "%llu -> %llu", k, (unsigned long long)pg, ans,
				 (unsigned long long)st.faults, (unsigned long long)st1.faults,
				 (unsigned long long)st.critical_window_faults,
				 (unsigned long long)st1.critical_window_faults);
		/* the offload may leave the page resident (a fault's run still in
		 * flight is not taken); either way it must be in the memfd */
		err = offload(&h);
		on_loop(&h, prepare_cb, &pc);
		on_loop(&h, page_resident_cb, &rc);
		if (!err && pc.ret >= 0 && rc.resident)
			restored++;
		else
			tap_diag("round %u: page %llu not restored (offload: %s, %d page(s) "
				 "restored)", k, (unsigned long long)pg, strerror(-err), pc.ret);
	}
	tap(rounds && counted == rounds,
	    "each read's fault counted in the window when it returned: %u of %u rounds",
	    counted, rounds);
	tap(rounds && restored == rounds,
	    "the page read just before each delivery restored before the next resume: "
	    "%u of %u rounds", restored, rounds);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static int mode_resident(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	struct prepare_call pc;
	struct set_resident_call sc = { .round = 1 };
	char ans[LINE_MAX_LEN];
	uint64_t kept, in, kept_dirty, slots_kept;
	long host_faults = -1;
	int err;

	if (!setup(&h, self, mib, true))
		return 1;

	/* cycle 1: no set yet, so S goes out with the rest; record it */
	err = offload(&h);
	on_loop(&h, set_resident_cb, &sc);
	st = stats(&h, NULL);
	tap(!err && sc.n > 0 && sc.resident == 0 && !st.critical_kept_pages,
	    "offload 1 (no set yet): S (%u pages) out of the memfd, nothing kept", sc.n);
	on_loop(&h, prepare_cb, &pc);
	vmm_cmd(&h, ans, "touchset 1");
	st = stats_settled(&h);
	tap(pc.ret == 0 && !strncmp(ans, "ok", 2) && st.critical_window_faults > 0 &&
	    st.critical_set_pages >= sc.n,
	    "cycle 1: S faulted in the window, %llu page(s) in the set (%s)",
	    (unsigned long long)st.critical_set_pages, ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 2: every data page rewritten; the offload keeps S only */
	vmm_cmd(&h, ans, "fill 2");
	st1 = stats(&h, NULL);
	err = offload(&h);
	st = stats(&h, NULL);
	sc = (struct set_resident_call){ .round = 2 };
	on_loop(&h, set_resident_cb, &sc);
	kept = st.critical_kept_pages - st1.critical_kept_pages;
	in = st.pages[PAGE_RESIDENT] + st.pages[PAGE_CLEAN];
	tap(!err && sc.resident == sc.n && sc.contents_ok,
	    "offload 2 left S in the memfd: %u of %u pages, round 2's contents", sc.resident,
	    sc.n);
	tap(st.kept_dirty_pages > 0 && st.kept_dirty_pages == st.pages[PAGE_RESIDENT],
	    "the set's written pages, %llu, counted as kept (the next offload will not "
	    "write them)", (unsigned long long)st.kept_dirty_pages);
	/* the worker's tidy after offload 2 (nothing resumes meanwhile):
	 * S's slots, stale since "fill 2", keep their blocks for S's next
	 * write to the store, which then overwrites them, not holes */
	kept_dirty = st.kept_dirty_pages;
	slots_kept = st1.stale_slots_kept;
	st = stats_until(&h, offsetof(struct pager_stats, stale_slots_kept),
			 slots_kept + kept_dirty);
	tap(st.stale_slots_kept - slots_kept >= kept_dirty,
	    "the tidy after offload 2 kept the blocks of S's stale slots (%llu page(s) kept, "
	    "%llu written in the set)", (unsigned long long)(st.stale_slots_kept - slots_kept),
	    (unsigned long long)kept_dirty);
	tap(kept >= sc.n && kept <= st.critical_set_pages && in == kept &&
	    st.pages[PAGE_OFFLOADED] > 0,
	    "only the set stayed: %llu page(s) kept of %llu in the set, %llu resident, "
	    "%llu offloaded", (unsigned long long)kept,
	    (unsigned long long)st.critical_set_pages, (unsigned long long)in,
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	on_loop(&h, prepare_cb, &pc);
	st = stats(&h, NULL);
	tap(pc.ret == 0 && !st.critical_restored_pages,
	    "pre-resume restore: nothing to read (%d page(s))", pc.ret);
	vmm_cmd(&h, ans, "touchset 2");
	st1 = stats(&h, NULL);
	if (sscanf(ans, "ok %ld", &host_faults) != 1)
		host_faults = -1;
	/* "fill 2" mapped S in the mapper, and nothing unmapped it since */
	tap(st1.faults == st.faults && st1.critical_window_faults == st.critical_window_faults &&
	    host_faults >= 0 && host_faults * 4 < (long)sc.n,
	    "touching S took no fault (%llu before, %llu after) and %ld host page fault(s) "
	    "for %u pages (%s)", (unsigned long long)st.faults,
	    (unsigned long long)st1.faults, host_faults, sc.n, ans);

	/* S was written ("fill 2") before offload 2 kept it: still writable */
	st = stats(&h, NULL);
	vmm_cmd(&h, ans, "writeset 2");
	st1 = stats(&h, NULL);
	if (sscanf(ans, "ok %ld", &host_faults) != 1)
		host_faults = -1;
	if (st.dirty_tracking == PAGER_DIRTY_WP_ASYNC || st.dirty_tracking == PAGER_DIRTY_WP_SYNC)
		tap(host_faults >= 0 && host_faults * 4 < (long)sc.n &&
		    st1.dirty_wp_faults == st.dirty_wp_faults && st1.faults == st.faults,
		    "%s: offload 2 left the written set unprotected: writing S again took "
		    "%ld host page fault(s) for %u pages, %llu write fault(s) (%s)",
		    pager_dirty_tracking_name(st.dirty_tracking), host_faults, sc.n,
		    (unsigned long long)(st1.dirty_wp_faults - st.dirty_wp_faults), ans);
	else
		tap_skip("the set left writable", "no dirty tracking here: %s",
			 pager_dirty_tracking_name(st.dirty_tracking));

	/* a storm in the window: its pages replace S in the set */
	vmm_cmd(&h, ans, "verify 2 2");
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && st.faults > st1.faults,
	    "every byte verified, the rest through %llu fault(s) (%s)",
	    (unsigned long long)(st.faults - st1.faults), ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 3: S, out of the set, was written since its restore: the
	 * offload stores its last contents (a slot taken as valid would bring
	 * back round 1's) */
	err = offload(&h);
	sc = (struct set_resident_call){ .round = 2 };
	on_loop(&h, set_resident_cb, &sc);
	tap(!err && sc.resident == 0, "offload 3: S left with the set (%u of %u pages in the "
	    "memfd)", sc.resident, sc.n);
	on_loop(&h, prepare_cb, &pc);
	vmm_cmd(&h, ans, "touchset 2");
	tap(!strncmp(ans, "ok", 2), "S back from the store as last written (%s)", ans);
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!strcmp(ans, "ok"), "cycle 3: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);
	vmm_quit(&h);
	return harness_finish(&h);
}

/* A timer's resume after an offload: its window opens and ends (RESUME_ACK)
 * before any data comes. */
static void timer_resume(struct harness *h)
{
	struct prepare_call pc;

	on_loop(h, prepare_cb, &pc);
	on_loop(h, delivered_cb, NULL);
}

static int mode_data(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct set_resident_call sc = { .round = 1 };
	struct pager_stats st, st1;
	char ans[LINE_MAX_LEN];
	int err;

	if (!setup(&h, self, mib, true))
		return 1;
	on_loop(&h, data_window_cb, NULL);
	st = stats(&h, NULL);
	tap(!st.critical_data_windows, "nothing out yet: no window opened (%llu)",
	    (unsigned long long)st.critical_data_windows);

	/* data taken in with no window: S faults back unrecorded and goes
	 * out with the rest at the next offload */
	err = offload(&h);
	timer_resume(&h);
	st = stats(&h, NULL);
	vmm_cmd(&h, ans, "touchset 1");
	st1 = stats_settled(&h);
	tap(!err && !strncmp(ans, "ok", 2) && st1.faults > st.faults &&
	    st1.critical_window_faults == st.critical_window_faults && !st1.critical_set_pages,
	    "without a window: S's %llu fault(s) not recorded, the set empty (%s)",
	    (unsigned long long)(st1.faults - st.faults), ans);
	err = offload(&h);
	on_loop(&h, set_resident_cb, &sc);
	tap(!err && sc.n > 0 && sc.resident == 0, "so the next offload took S out (%u of %u "
	    "pages in the memfd)", sc.resident, sc.n);

	/* the same with the window opened for the data */
	timer_resume(&h);
	on_loop(&h, data_window_cb, NULL);
	st = stats(&h, NULL);
	vmm_cmd(&h, ans, "touchset 1");
	st1 = stats_settled(&h);
	on_loop(&h, delivered_cb, NULL);
	tap(!strncmp(ans, "ok", 2) && st1.critical_data_windows == 1 &&
	    st1.critical_window_faults - st.critical_window_faults == st1.faults - st.faults &&
	    st1.faults > st.faults && st1.critical_set_pages >= sc.n,
	    "data window: S's %llu fault(s) recorded, %llu page(s) in the set (%s)",
	    (unsigned long long)(st1.faults - st.faults),
	    (unsigned long long)st1.critical_set_pages, ans);
	err = offload(&h);
	sc = (struct set_resident_call){ .round = 1 };
	on_loop(&h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok,
	    "the next offload kept S: %u of %u pages in the memfd, their contents", sc.resident,
	    sc.n);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

/* pager_set_device_pages from the loop thread, as vmnapd calls it. */
struct device_call {
	const uint64_t *gpa, *len;
	unsigned int n;
};

static void device_cb(struct harness *h, void *arg)
{
	struct device_call *dc = arg;

	pager_set_device_pages(the_pager(h), dc->gpa, dc->len, dc->n);
}

/* Are pages @pg .. @pg+@n-1 in the memfd, with round @round's contents? */
static bool pages_kept(struct harness *h, uint64_t pg, unsigned int n, unsigned int round)
{
	bool ok = true;
	uint64_t off;
	int fd;

	if (pager_gpa_to_memfd(the_pager(h), 0, &fd, &off))
		return false;
	for (uint64_t i = pg; i < pg + n && ok; i++)
		if (!page_in_memfd(fd, off, i, round, &ok))
			return false;
	return ok;
}

struct kept_call {
	uint64_t pg;
	unsigned int n, round;
	bool kept;
};

static void kept_cb(struct harness *h, void *arg)
{
	struct kept_call *kc = arg;

	kc->kept = pages_kept(h, kc->pg, kc->n, kc->round);
}

/*
 * device: the ranges vmnapd's own device will touch first on resume
 * (pager_set_device_pages) stay in the memfd through an offload, with
 * their contents, while the other data pages go out; byte ranges cover
 * whole pages; ranges outside guest RAM are left out and counted; a page
 * already out when named is read back at once (and counted); a new call
 * replaces the set, and what left it goes out with the next offload.
 */
#define DEV_PG		(7 * 100)	/* a data page (fill: i % 7 == 0) */
#define DEV_PG2		(7 * 200)
#define DEV_PG3		(7 * 300)

static int mode_device(const char *self, uint64_t mib)
{
	const uint64_t gpa[] = { DEV_PG * PAGE + 100, DEV_PG2 * PAGE, UINT64_MAX - 100,
				 (uint64_t)mib << 40 };
	const uint64_t len[] = { PAGE, 1, 200, PAGE };
	const uint64_t gpa3 = DEV_PG3 * PAGE, len3 = PAGE;
	struct device_call dc = { gpa, len, 4 };
	struct kept_call kc;
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	int err;

	if (!setup(&h, self, mib, true))
		return 1;
	vmm_cmd(&h, ans, "fill 1");
	on_loop(&h, device_cb, &dc);
	st = stats(&h, NULL);
	/* the first range straddles two pages; the second is one byte */
	tap(st.device_pages == 3 && st.device_ranges_refused == 2 && !st.device_read_back,
	    "device ranges: %llu page(s) taken, %llu range(s) outside guest RAM refused, "
	    "none read back", (unsigned long long)st.device_pages,
	    (unsigned long long)st.device_ranges_refused);
	err = offload(&h);
	st = stats(&h, NULL);
	kc = (struct kept_call){ .pg = DEV_PG, .n = 2, .round = 1 };
	on_loop(&h, kept_cb, &kc);
	tap(!err && kc.kept, "offload kept the device's pages %u, %u in the memfd, "
	    "round 1's contents", DEV_PG, DEV_PG + 1);
	kc = (struct kept_call){ .pg = DEV_PG2, .n = 1, .round = 1 };
	on_loop(&h, kept_cb, &kc);
	tap(kc.kept && st.pages[PAGE_OFFLOADED] > 0 &&
	    st.pages[PAGE_RESIDENT] + st.pages[PAGE_CLEAN] == 3,
	    "... and %u: only those 3 stayed (%llu offloaded)", DEV_PG2,
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	/* a page already out when named (a buffer posted since) is read back
	 * at once, while the VM is paused, not before its next resume */
	dc = (struct device_call){ &gpa3, &len3, 1 };
	on_loop(&h, device_cb, &dc);
	kc = (struct kept_call){ .pg = DEV_PG3, .n = 1, .round = 1 };
	for (int i = 0; i < 3000 && !kc.kept; i++) {
		usleep(1000);
		on_loop(&h, kept_cb, &kc);
	}
	st = stats(&h, NULL);
	tap(kc.kept && st.device_read_back == 1,
	    "page %u, out when named, read back into the memfd with round 1's "
	    "contents (device_read_back %llu)", DEV_PG3,
	    (unsigned long long)st.device_read_back);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte verified (%s)", ans);

	/* replaced by an empty set: the next offload takes them too */
	dc.n = 0;
	on_loop(&h, device_cb, &dc);
	vmm_cmd(&h, ans, "fill 2");
	err = offload(&h);
	st = stats(&h, NULL);
	kc = (struct kept_call){ .pg = DEV_PG, .n = 1, .round = 2 };
	on_loop(&h, kept_cb, &kc);
	tap(!err && !st.device_pages && !kc.kept && !st.pages[PAGE_RESIDENT] &&
	    !st.pages[PAGE_CLEAN], "set replaced by an empty one: offload 2 kept nothing");
	vmm_cmd(&h, ans, "verify 2 2");
	tap(!strcmp(ans, "ok"), "round 2: every byte verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static int mode_resident_sync(const char *self, uint64_t mib)
{
	setenv("VMNAP_UFFD_WP", "sync", 1);	/* the mock VMM inherits it */
	return mode_resident(self, mib);
}

static int mode_critical(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	struct prepare_call pc;
	struct set_resident_call sc = { .round = 1 };
	char ans[LINE_MAX_LEN];
	long host_faults = -1;
	bool full;
	int err, left;

	if (!setup(&h, self, mib, false))
		return 1;

	/* cycle 1: nothing recorded yet; record S between resume and delivery */
	err = offload(&h);
	tap(!err, "offload 1: %s", strerror(-err));
	on_loop(&h, set_resident_cb, &sc);
	tap(sc.n > 0 && sc.resident == 0, "S (%u pages) out of the memfd after the offload",
	    sc.n);
	on_loop(&h, prepare_cb, &pc);
	tap(pc.ret == 0, "cycle 1: nothing to restore before the resume (%d)", pc.ret);
	vmm_cmd(&h, ans, "touchset 1");
	/* the last fault's latency is counted after its faulter was woken */
	st = stats_settled(&h);
	tap(!strncmp(ans, "ok", 2) && st.faults > 0 && st.critical_window_faults == st.faults,
	    "cycle 1: S verified through %llu fault(s) in the critical window (%s)",
	    (unsigned long long)st.faults, ans);
	tap(st.critical_set_pages >= sc.n && st.critical_set_pages <= PAGER_CRITICAL_MAX_PAGES,
	    "critical set: %llu page(s) (S and its fault-around)",
	    (unsigned long long)st.critical_set_pages);
	tap(lat_sum_fits(&st), "fault latency sum: %llu ns over %llu fault(s) (%llu in the "
	    "histogram), inside the buckets' bounds; %llu ns of it store reads",
	    (unsigned long long)st.fault_lat_ns_sum, (unsigned long long)st.faults,
	    (unsigned long long)lat_count(&st), (unsigned long long)st.fault_read_ns_sum);
	on_loop(&h, delivered_cb, NULL);
	vmm_cmd(&h, ans, "verify 1 2");
	st1 = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && st1.faults > st.faults &&
	    st1.critical_set_pages == st.critical_set_pages &&
	    st1.critical_window_faults == st.critical_window_faults,
	    "after delivery: faults (%llu more) are not recorded (%s)",
	    (unsigned long long)(st1.faults - st.faults), ans);

	/* cycle 2: S is resident before the mapper runs, and takes no fault */
	vmm_cmd(&h, ans, "fill 2");
	err = offload(&h);
	sc = (struct set_resident_call){ .round = 2 };
	on_loop(&h, set_resident_cb, &sc);
	tap(!err && sc.resident == 0, "offload 2: %s; S out of the memfd", strerror(-err));
	on_loop(&h, prepare_cb, &pc);
	st = stats(&h, NULL);
	on_loop(&h, set_resident_cb, &sc);
	tap(pc.ret >= (int)sc.n && (uint64_t)pc.ret == st.critical_restored_pages,
	    "pre-resume restore: %d page(s) in %llu us", pc.ret,
	    (unsigned long long)(st.critical_last_restore_ns / 1000));
	tap(sc.resident == sc.n && sc.contents_ok,
	    "S in the memfd before the mapper touches it: %u of %u pages, contents right",
	    sc.resident, sc.n);
	vmm_cmd(&h, ans, "touchset 2");
	st1 = stats(&h, NULL);
	tap(!strncmp(ans, "ok", 2) && st1.faults == st.faults &&
	    st1.critical_window_faults == st.critical_window_faults,
	    "touching S took no fault (%llu before, %llu after), every byte right (%s)",
	    (unsigned long long)st.faults, (unsigned long long)st1.faults, ans);
	/* mapped into the mapper by the restore: reading S maps nothing
	 * (put into the memfd only, each page's first read would) */
	if (sscanf(ans, "ok %ld", &host_faults) != 1)
		host_faults = -1;
	tap(host_faults >= 0 && host_faults * 4 < (long)sc.n &&
	    st.critical_mapped_pages == st.critical_restored_pages,
	    "S mapped by the restore (%llu of %llu restored pages): reading it took %ld "
	    "host page fault(s) for %u pages", (unsigned long long)st.critical_mapped_pages,
	    (unsigned long long)st.critical_restored_pages, host_faults, sc.n);

	/* still in cycle 2's window: a storm of faults fills the set to its bound */
	full = storm_fills_set(&h, 2, &st);
	tap(full, "every byte verified; the set stays bounded at %llu pages",
	    (unsigned long long)st.critical_set_pages);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 3: a full set is restored in the size bound, then all is right */
	err = cycle_start(&h, 3, NULL, &pc);
	st = stats(&h, NULL);
	tap(!err && pc.ret == PAGER_CRITICAL_MAX_PAGES && !st.critical_budget_stops,
	    "full set: %d page(s) restored in %llu us", pc.ret,
	    (unsigned long long)(st.critical_last_restore_ns / 1000));
	vmm_cmd(&h, ans, "verify 3 2");
	tap(!strcmp(ans, "ok"), "cycle 3: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 4: the time bound stops the restore after its first run */
	err = cycle_start(&h, 4, &(uint64_t){ CRIT_TINY_BUDGET_NS }, &pc);
	st = stats(&h, NULL);
	tap(!err && pc.ret > 0 && pc.ret < PAGER_CRITICAL_MAX_PAGES &&
	    st.critical_budget_stops == 1,
	    "time bound reached: %d page(s) restored, the rest left to faults", pc.ret);
	vmm_cmd(&h, ans, "verify 4 2");
	tap(!strcmp(ans, "ok"), "cycle 4: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 5: nothing restored (budget 0), so S faults first, then a
	 * storm overfills the set in the same window: S, the window's first
	 * faults, stays in it */
	err = cycle_start(&h, 5, &(uint64_t){ 0 }, &pc);
	st1 = stats(&h, NULL);
	vmm_cmd(&h, ans, "touchset 5");
	st = stats(&h, NULL);
	tap(!err && pc.ret == 0 && !strncmp(ans, "ok", 2) && st.faults > st1.faults,
	    "cycle 5: S faulted first in the window (%s)", ans);
	full = storm_fills_set(&h, 5, &st);
	tap(full, "cycle 5: then a storm filled the set (%llu pages)",
	    (unsigned long long)st.critical_set_pages);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 6: S comes back before the resume */
	err = cycle_start(&h, 6, &(uint64_t){ CRIT_NO_BUDGET_NS }, &pc);
	sc = (struct set_resident_call){ .round = 6 };
	on_loop(&h, set_resident_cb, &sc);
	tap(!err && sc.resident == sc.n && sc.contents_ok,
	    "cycle 6: S, the last window's first faults, restored: %u of %u pages, "
	    "contents right", sc.resident, sc.n);
	vmm_cmd(&h, ans, "verify 6 2");
	tap(!strcmp(ans, "ok"), "cycle 6: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 7: the ring takes none of the first wave's reads */
	vmm_cmd(&h, ans, "fill 7");
	err = offload(&h);
	st1 = stats(&h, NULL);
	atomic_store(&fail_submits, 1);
	on_loop(&h, prepare_cb, &pc);
	left = atomic_exchange(&fail_submits, 0);
	st = stats(&h, NULL);
	tap(!err && !left && pc.ret > 0 && pc.ret < PAGER_CRITICAL_MAX_PAGES &&
	    st.critical_ring_resets == st1.critical_ring_resets + 1,
	    "cycle 7: a failed submit: the wave read with pread (%d page(s)), the ring "
	    "dropped (%llu reset(s)), the rest left to faults", pc.ret,
	    (unsigned long long)st.critical_ring_resets);
	vmm_cmd(&h, ans, "verify 7 2");
	tap(!strcmp(ans, "ok"), "cycle 7: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 8: a new ring; nothing of cycle 7's reads reaches this one */
	err = cycle_start(&h, 8, NULL, &pc);
	st1 = stats(&h, NULL);
	tap(!err && pc.ret == PAGER_CRITICAL_MAX_PAGES &&
	    st1.critical_ring_resets == st.critical_ring_resets,
	    "cycle 8: a new ring restored the full set (%d page(s))", pc.ret);
	vmm_cmd(&h, ans, "verify 8 2");
	tap(!strcmp(ans, "ok"), "cycle 8: every byte verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	if (argc > 2 && !strcmp(argv[2], "deliver"))
		return mode_deliver(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "resident"))
		return mode_resident(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "data"))
		return mode_data(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "device"))
		return mode_device(argv[0], mockvmm_arg(argc, argv, 1, 16));
	if (argc > 2 && !strcmp(argv[2], "resident-sync"))
		return mode_resident_sync(argv[0], mockvmm_arg(argc, argv, 1, 16));
	return mode_critical(argv[0], mockvmm_arg(argc, argv, 1, 16));
}
