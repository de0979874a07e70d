// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_dirty.c - the CLEAN page state and dirty tracking, with the mock
 * VMM (mockvmm.h) and two mappers: a re-offload of restored, unwritten
 * pages writes nothing; 8 writer threads in two mappers (and vmnapd's own
 * writes through make_resident) make pages dirty, and every page then
 * holds what was written last (a digest per page), also when the writers
 * run during the offload.  track: WP_ASYNC; sync: the shim leaves WP_ASYNC
 * out (VMNAP_UFFD_WP=sync), so the pager tracks by write faults; none: the
 * shim leaves every WP feature out, and where the kernel then refuses
 * write-protect the pager says so and falls back to writing every page,
 * losing none.  With WP_ASYNC a write never faults, so the pager stops
 * the mappers (SIGSTOP, as vmnapd's VMM is stopped during an offload)
 * from each batch's last scan to its punch, through the writer gate
 * (pager_set_writer_gate); the writers race everything else.  Pre-copy
 * (wp_async only): the writers' pages stored while they run, so the next
 * offload writes only what they wrote since, nothing when they stopped;
 * an offload started meanwhile stops it.  Write-hot pages checked by
 * sample (wp_async) with the writers between and during offloads.  TAP.
 *
 *   pager_dirty track|sync|none [MiB]	(default 16)
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

/* Rounds of writers racing an offload: each can lose a write. */
#define RACE_ROUNDS	4
/* A hang guard: stopped mappers seen within 10 s (polls 100 us apart). */
#define GATE_POLLS	100000

static uint64_t data_pages(uint64_t npages)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < npages; i++)
		n += page_kind(i) == PK_DATA;
	return n;
}

static void nap_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Every page in both mappers holds what was written to it last. */
static bool storm_check(struct harness *h, const char *what)
{
	char a1[LINE_MAX_LEN], a2[LINE_MAX_LEN];

	vmm_cmd(h, a1, "stormcheck");
	vmm_cmd(h, a2, "peer stormcheck");
	tap(!strcmp(a1, "ok") && !strcmp(a2, "ok"), "%s: every page as last written "
	    "(mapper 1: %s, mapper 2: %s)", what, a1, a2);
	return !strcmp(a1, "ok") && !strcmp(a2, "ok");
}

/* The writer gate: both mappers' processes, stopped with SIGSTOP. */
struct gate {
	pid_t pid[2];
	unsigned int stops;	/* times the pager closed it */
	bool refuse;		/* cannot stop the mappers: -EBUSY */
	int err;		/* setting it on the loop thread */
};

/* Every thread of @pid is stopped (state T in its stat). */
static bool all_stopped(pid_t pid)
{
	char path[64], line[512], *rp;
	struct dirent *e;
	bool ok = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (ok && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* the thread ended */
		rp = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		ok = rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't');
		fclose(f);
	}
	closedir(d);
	return ok;
}

static int writer_gate(bool stop, void *arg)
{
	struct gate *g = arg;
	int err = 0;

	if (stop && g->refuse)
		return -EBUSY;
	for (int i = 0; i < 2 && !err; i++)
		if (kill(g->pid[i], stop ? SIGSTOP : SIGCONT))
			err = -errno;
	if (!stop || err)
		return err;
	g->stops++;
	for (int polls = 0; polls < GATE_POLLS; polls++) {
		if (all_stopped(g->pid[0]) && all_stopped(g->pid[1]))
			return 0;
		usleep(100);
	}
	for (int i = 0; i < 2; i++)	/* the pager will not open it again */
		kill(g->pid[i], SIGCONT);
	return -ETIMEDOUT;
}

static void set_gate_cb(struct harness *h, void *arg)
{
	struct gate *g = arg;
	struct pager *p = the_pager(h);

	g->err = p ? 0 : -ENOENT;
	if (p)
		pager_set_writer_gate(p, writer_gate, g);
}

/* Give the pager the writer gate over both mappers. */
static bool gate_setup(struct harness *h, struct gate *g)
{
	char a1[LINE_MAX_LEN], a2[LINE_MAX_LEN];
	int p1 = 0, p2 = 0;

	vmm_cmd(h, a1, "pid");
	vmm_cmd(h, a2, "peer pid");
	if (sscanf(a1, "ok %d", &p1) != 1 || sscanf(a2, "ok %d", &p2) != 1 ||
	    p1 <= 0 || p2 <= 0 || p1 == p2)
		return false;
	*g = (struct gate){ .pid = { p1, p2 } };
	on_loop(h, set_gate_cb, g);
	return !g->err;
}

static void storm(struct harness *h, bool on)
{
	char a1[LINE_MAX_LEN], a2[LINE_MAX_LEN];

	if (on) {
		vmm_cmd(h, a1, "storm start 4 0 2");
		vmm_cmd(h, a2, "peer storm start 4 1 2");
		tap(!strcmp(a1, "ok") && !strcmp(a2, "ok"), "8 writer threads in 2 mappers "
		    "started (%s, %s)", a1, a2);
	} else {
		vmm_cmd(h, a1, "storm stop");
		vmm_cmd(h, a2, "peer storm stop");
		tap(!strncmp(a1, "ok ", 3) && !strncmp(a2, "ok ", 3) &&
		    strtoull(a1 + 3, NULL, 10) + strtoull(a2 + 3, NULL, 10) > 0,
		    "writers stopped (%s / %s writes)", a1 + 3, a2 + 3);
	}
}

struct own_write {
	uint64_t pg, n;
	unsigned int round;
	int err;
};

/* vmnapd's own write: make_resident, then a write through the memfd (as
 * the vsock device writes through its own mapping). */
static void own_write_cb(struct harness *h, void *arg)
{
	struct own_write *ow = arg;
	struct pager *p = the_pager(h);
	uint64_t w[PAGE / 8], off;
	int fd;

	ow->err = pager_make_resident(p, ow->pg * PAGE, ow->n * PAGE);
	if (!ow->err)
		ow->err = pager_gpa_to_memfd(p, ow->pg * PAGE, &fd, &off);
	for (uint64_t i = 0; !ow->err && i < ow->n; i++) {
		page_pattern(ow->pg + i, ow->round, w);
		if (pwrite(fd, w, PAGE, (off_t)(off + i * PAGE)) != PAGE)
			ow->err = -EIO;
	}
}

struct precopy_race {
	int precopy_err, offload_err;	/* the starts' */
	int stopped_err;		/* the pre-copy's done callback */
	int cancel_err;			/* pager_offload_cancel's */
	bool stopped;
};

static void precopy_stopped(struct pager *p, int err, void *arg)
{
	struct precopy_race *r = arg;

	(void)p;
	r->stopped_err = err;
	r->stopped = true;
}

/* On the loop: a pre-copy, and at once an offload (which stops it). */
static void precopy_then_offload_cb(struct harness *h, void *arg)
{
	struct precopy_race *r = arg;
	struct offload_call oc;

	r->precopy_err = precopy_start_retry(the_pager(h), precopy_stopped, r);
	offload_cb(h, &oc);
	r->offload_err = oc.err;
}

/* On the loop: a pre-copy, an offload queued behind it, and at once a
 * cancel (the resume came before the offload could start). */
static void precopy_offload_cancel_cb(struct harness *h, void *arg)
{
	struct precopy_race *r = arg;

	precopy_then_offload_cb(h, r);
	r->cancel_err = pager_offload_cancel(the_pager(h));
}

/* wp_async: pre-copy while the mappers write, and an offload cutting one
 * short; every page as last written throughout. */
static void precopy_checks(struct harness *h, uint64_t ndata)
{
	struct pager_stats st, st1;
	struct precopy_race race = { 0 };
	int err;

	storm(h, true);
	nap_ms(100);
	storm(h, false);
	st1 = stats(h, NULL);
	err = precopy(h);
	st = stats(h, NULL);
	tap(!err && st.precopies == st1.precopies + 1 &&
	    st.precopy_written_bytes > st1.precopy_written_bytes &&
	    st.store_written_bytes - st1.store_written_bytes ==
	    st.precopy_written_bytes - st1.precopy_written_bytes &&
	    st.pages[PAGE_OFFLOADED] == st1.pages[PAGE_OFFLOADED],
	    "pre-copy after writes: %llu bytes stored, nothing punched (%s)",
	    (unsigned long long)(st.precopy_written_bytes - st1.precopy_written_bytes),
	    strerror(-err));
	tap(st.pages[PAGE_CLEAN] == ndata, "every data page is CLEAN after it (%llu of %llu)",
	    (unsigned long long)st.pages[PAGE_CLEAN], (unsigned long long)ndata);
	err = offload(h);
	st = stats(h, NULL);
	tap(!err && st.last_offload_written == 0 && st.pages[PAGE_OFFLOADED] == ndata,
	    "the offload after it writes nothing (%llu bytes), punches every data page",
	    (unsigned long long)st.last_offload_written);
	storm_check(h, "after the pre-copy and the offload");

	/* writers during the pre-copy: what they write there stays dirty */
	storm(h, true);
	nap_ms(50);
	err = precopy(h);
	storm(h, false);
	st = stats(h, NULL);
	tap(!err, "pre-copy while 8 writers run: %s (%llu page(s) written meanwhile kept "
	    "dirty in all)", strerror(-err), (unsigned long long)st.dirty_kept_pages);
	st1 = st;
	err = offload(h);
	st = stats(h, NULL);
	tap(!err && st.last_offload_written > 0, "the offload after it writes what the "
	    "writers wrote since (%llu bytes)", (unsigned long long)st.last_offload_written);
	storm_check(h, "writers during the pre-copy, then an offload");
	err = offload(h);
	tap(!err, "one more cycle: %s", strerror(-err));
	storm_check(h, "and after one more cycle");

	/* an offload started while a pre-copy runs stops it first */
	storm(h, true);
	on_loop(h, precopy_then_offload_cb, &race);
	if (!race.offload_err)
		while (sem_wait(&h->offload_done) && errno == EINTR)
			;
	storm(h, false);
	tap(!race.precopy_err && race.stopped &&
	    (race.stopped_err == -ECANCELED || !race.stopped_err) &&
	    !race.offload_err && !h->offload_err,
	    "an offload started during a pre-copy stops it (its callback: %s) and runs (%s)",
	    strerror(-race.stopped_err), strerror(-h->offload_err));
	storm_check(h, "writers during the stopped pre-copy and the offload");
	err = offload(h);
	tap(!err, "one more cycle: %s", strerror(-err));
	storm_check(h, "and after one more cycle");

	/* an offload queued behind a pre-copy and cancelled never starts */
	storm(h, true);
	nap_ms(50);
	storm(h, false);
	st1 = stats(h, NULL);
	memset(&race, 0, sizeof(race));
	on_loop(h, precopy_offload_cancel_cb, &race);
	if (!race.offload_err)
		while (sem_wait(&h->offload_done) && errno == EINTR)
			;
	st = stats(h, NULL);
	tap(!race.precopy_err && !race.offload_err && !race.cancel_err &&
	    race.stopped && h->offload_err == -ECANCELED &&
	    st.offload_cancels == st1.offload_cancels + 1 && st.offloads == st1.offloads &&
	    st.last_offload_ns == st1.last_offload_ns &&
	    st.pages[PAGE_OFFLOADED] <= st1.pages[PAGE_OFFLOADED],
	    "an offload cancelled while it waits for the pre-copy: the pre-copy stops "
	    "(%s), the offload ends -ECANCELED (%s) without running, nothing punched "
	    "(%llu out, %llu before)",
	    strerror(-race.stopped_err), strerror(-h->offload_err),
	    (unsigned long long)st.pages[PAGE_OFFLOADED],
	    (unsigned long long)st1.pages[PAGE_OFFLOADED]);
	storm_check(h, "after the cancelled queued offload");
	err = offload(h);
	tap(!err, "and the next offload runs: %s", strerror(-err));
	storm_check(h, "and after it");
}

/*
 * Write-hot pages checked by sample (wp_async): the writers rewrite every
 * data page between offloads, and in every third round during the offload,
 * until the pages' writable restores run out and they come back checked by
 * sample - a block's sample protected, the rest writable - and on through
 * the checks; after each round every page holds what was written last.
 */
#define SAMPLE_ROUNDS	(3 * PAGER_HOT_CYCLES)

static void sampled_rounds(struct harness *h)
{
	struct pager_stats st0 = stats(h, NULL), st;
	bool ok = true;

	for (int round = 1; round <= SAMPLE_ROUNDS; round++) {
		char what[64];

		storm(h, true);
		nap_ms(50);
		if (!(round % 3))
			ok = !offload(h) && ok;
		storm(h, false);
		if (round % 3)
			ok = !offload(h) && ok;
		snprintf(what, sizeof(what), "write-hot round %d", round);
		ok = storm_check(h, what) && ok;
	}
	st = stats(h, NULL);
	tap(ok && st.dirty_hot_samples > st0.dirty_hot_samples &&
	    st.dirty_hot_vouched_pages > st0.dirty_hot_vouched_pages,
	    "%d rounds: every offload done; %llu sample(s) restored protected, %llu page(s) "
	    "writable on theirs (%llu renewed with them)", SAMPLE_ROUNDS,
	    (unsigned long long)(st.dirty_hot_samples - st0.dirty_hot_samples),
	    (unsigned long long)(st.dirty_hot_vouched_pages - st0.dirty_hot_vouched_pages),
	    (unsigned long long)(st.dirty_hot_vouch_renewed_pages -
				 st0.dirty_hot_vouch_renewed_pages));
}

static int mode_track(const char *self, uint64_t mib, enum pager_dirty_tracking want)
{
	struct harness h = { 0 };
	struct pager_stats st, st1;
	uint64_t npages = (mib << 20) / PAGE, ndata = data_pages(npages);
	char ans[LINE_MAX_LEN];
	struct own_write ow = { .pg = 8, .n = 2, .round = 77 };	/* data pages */
	struct gate gate = { 0 };
	int err;

	if (want == PAGER_DIRTY_WP_SYNC)
		setenv("VMNAP_UFFD_WP", "sync", 1);	/* the shim leaves WP_ASYNC out */
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM with 2 mappers (%s)", ans);
	tap(gate_setup(&h, &gate), "writer gate over both mappers' processes");
	vmm_cmd(&h, ans, "storm init 1");
	vmm_cmd(&h, ans, "peer storm init 1");
	st = stats(&h, NULL);
	tap(st.dirty_tracking == PAGER_DIRTY_UNKNOWN, "dirty tracking %s before the first "
	    "offload", pager_dirty_tracking_name(st.dirty_tracking));
	err = precopy(&h);
	tap(err == -EOPNOTSUPP, "no pre-copy before an offload registered the mappers (%s)",
	    strerror(-err));

	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.last_offload_written == ndata * PAGE, "offload 1 writes the %llu data "
	    "pages (%llu bytes)", (unsigned long long)ndata,
	    (unsigned long long)st.last_offload_written);
	if (st.dirty_tracking != want) {
		tap_skip("clean and dirty checks", "no %s dirty tracking here: %s (%s)",
			 pager_dirty_tracking_name(want),
			 pager_dirty_tracking_name(st.dirty_tracking),
			 st.dirty_tracking_reason ? st.dirty_tracking_reason : "?");
		vmm_quit(&h);
		return harness_finish(&h);
	}
	tap(1, "dirty tracking: %s", pager_dirty_tracking_name(st.dirty_tracking));
	storm_check(&h, "restored by faults in both mappers");
	st = stats(&h, NULL);
	tap(st.pages[PAGE_CLEAN] == ndata && st.registered, "restored pages are CLEAN "
	    "(%llu of %llu), ranges stay registered", (unsigned long long)st.pages[PAGE_CLEAN],
	    (unsigned long long)ndata);

	/* re-offload of restored, unwritten pages: no store write */
	st1 = st;
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.last_offload_written == 0 &&
	    st.store_written_bytes == st1.store_written_bytes &&
	    st.clean_punched_pages - st1.clean_punched_pages == ndata &&
	    st.pages[PAGE_OFFLOADED] == ndata,
	    "re-offload of unwritten pages: %llu bytes written, %llu clean pages punched "
	    "with no I/O", (unsigned long long)st.last_offload_written,
	    (unsigned long long)(st.clean_punched_pages - st1.clean_punched_pages));
	storm_check(&h, "restored again");

	/* vmnapd's own write, and writers between offloads */
	st1 = stats(&h, NULL);
	on_loop(&h, own_write_cb, &ow);
	snprintf(ans, sizeof(ans), "storm set %llu %llu %u", (unsigned long long)ow.pg,
		 (unsigned long long)(ow.pg + ow.n), ow.round);
	vmm_cmd(&h, ans, "%s", ans);
	tap(!ow.err && !strcmp(ans, "ok"), "vmnapd's own write to %llu pages: %s",
	    (unsigned long long)ow.n, strerror(-ow.err));
	st = stats(&h, NULL);
	tap(st.dirty_own_pages >= ow.n, "its pages marked dirty explicitly (%llu)",
	    (unsigned long long)st.dirty_own_pages);
	storm(&h, true);
	nap_ms(200);
	storm(&h, false);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.last_offload_written > 0 && st.last_offload_written <= ndata * PAGE &&
	    st.dirty_scanned_pages > st1.dirty_scanned_pages,
	    "offload after writes: %llu bytes written, %llu pages found written (scan or "
	    "write faults: %llu)",
	    (unsigned long long)st.last_offload_written,
	    (unsigned long long)(st.dirty_scanned_pages - st1.dirty_scanned_pages),
	    (unsigned long long)(st.dirty_wp_faults - st1.dirty_wp_faults));
	storm_check(&h, "after writes, offload, restore");

	/* writers racing restores and the offload itself; a write lost in
	 * the race shows after the next cycle (its page punched as CLEAN) */
	for (int round = 1; round <= RACE_ROUNDS; round++) {
		char what[64];

		storm(&h, true);
		err = offload(&h);
		tap(!err, "round %d: offload while 8 writers run: %s", round, strerror(-err));
		nap_ms(50);
		storm(&h, false);
		st = stats(&h, NULL);
		tap(1, "%llu page(s) written during offloads were kept resident, not punched",
		    (unsigned long long)st.dirty_kept_pages);
		snprintf(what, sizeof(what), "round %d: writers during the offload and the "
			 "restores", round);
		storm_check(&h, what);
		err = offload(&h);
		tap(!err, "round %d: offload after the race: %s", round, strerror(-err));
		snprintf(what, sizeof(what), "round %d: and after one more cycle", round);
		storm_check(&h, what);
	}
	if (want == PAGER_DIRTY_WP_ASYNC)
		tap(gate.stops > 0, "the mappers were stopped for punches %u time(s)",
		    gate.stops);
	else	/* write faults hold a write back: no need to stop anyone */
		tap(gate.stops == 0, "write faults: the mappers were never stopped (%u)",
		    gate.stops);
	if (want == PAGER_DIRTY_WP_ASYNC) {
		/* a gate that cannot stop the mappers: nothing is punched */
		storm(&h, true);
		gate.refuse = true;
		err = offload(&h);
		gate.refuse = false;
		storm(&h, false);
		st = stats(&h, NULL);
		tap(err == -EBUSY && !st.pages[PAGE_OFFLOADED], "the gate refused: the offload "
		    "stops with its error (%s), no page punched (%llu out)", strerror(-err),
		    (unsigned long long)st.pages[PAGE_OFFLOADED]);
		storm_check(&h, "writers during the refused offload");
		err = offload(&h);
		tap(!err, "offload with the gate working again: %s", strerror(-err));
		storm_check(&h, "and after one more cycle");
		sampled_rounds(&h);
		precopy_checks(&h, ndata);
	} else {
		err = precopy(&h);
		tap(err == -EOPNOTSUPP, "%s: no pre-copy (%s)",
		    pager_dirty_tracking_name(want), strerror(-err));
	}
	/* a readahead still being installed is in flight for a moment */
	st = stats_settled(&h);
	tap(!st.pages[PAGE_IN_FLIGHT] && st.dirty_fallbacks == 0, "no page in flight, no "
	    "fallback (%llu)", (unsigned long long)st.dirty_fallbacks);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

/* No tracking: the shim leaves every write-protect feature out, and (as
 * 6.18 registers shmem MODE_WP and tracks synchronously even so) vmnapd is
 * told not to track.  The fallback is said, counted and loses nothing. */
static int mode_fallback(const char *self, uint64_t mib, const char *how)
{
	struct harness h = { 0 };
	struct pager_stats st;
	uint64_t npages = (mib << 20) / PAGE, ndata = data_pages(npages);
	const char *want = "VMNAPD_DIRTY_TRACKING";
	char ans[LINE_MAX_LEN];
	int err;

	setenv("VMNAP_UFFD_WP", how, 1);	/* the mock VMM inherits it */
	setenv("VMNAPD_DIRTY_TRACKING", "none", 1);
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM with 2 mappers, VMNAP_UFFD_WP=%s (%s)", how, ans);
	vmm_cmd(&h, ans, "storm init 1");
	vmm_cmd(&h, ans, "peer storm init 1");
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.dirty_tracking == PAGER_DIRTY_NONE && st.dirty_fallbacks == 1 &&
	    st.dirty_tracking_reason && strstr(st.dirty_tracking_reason, want),
	    "offload: %s; dirty tracking %s (%s), %llu fallback", strerror(-err),
	    pager_dirty_tracking_name(st.dirty_tracking),
	    st.dirty_tracking_reason ? st.dirty_tracking_reason : "-",
	    (unsigned long long)st.dirty_fallbacks);
	storm_check(&h, "restored");
	st = stats(&h, NULL);
	tap(!st.pages[PAGE_CLEAN] && !st.registered, "no CLEAN page without tracking (%llu), "
	    "ranges unregistered once every page is back", (unsigned long long)st.pages[PAGE_CLEAN]);
	storm(&h, true);
	nap_ms(100);
	storm(&h, false);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.last_offload_written == ndata * PAGE, "re-offload writes every data "
	    "page again (%llu bytes)", (unsigned long long)st.last_offload_written);
	storm_check(&h, "after the writers and a re-offload");
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	uint64_t mib;

	if (mockvmm_init(argc, argv))
		return 0;
	mib = mockvmm_arg(argc, argv, 2, 16);
	if (argc > 1 && !strcmp(argv[1], "track"))
		return mode_track(argv[0], mib, PAGER_DIRTY_WP_ASYNC);
	if (argc > 1 && !strcmp(argv[1], "sync"))
		return mode_track(argv[0], mib, PAGER_DIRTY_WP_SYNC);
	if (argc > 1 && !strcmp(argv[1], "none"))
		return mode_fallback(argv[0], mib, argv[1]);
	fprintf(stderr, "usage: pager_dirty track|sync|none [MiB]\n");
	return 2;
}
