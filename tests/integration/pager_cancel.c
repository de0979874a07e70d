// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_cancel.c - cancel an offload mid-way (mock VMM, mockvmm.h):
 * written-and-punched pages stay OFFLOADED, the rest RESIDENT, done gets
 * -ECANCELED; every byte verified through faults; a full offload
 * follows, while the cancelled one's slots may still be tidied, on the
 * same worker thread (the pager's one "vmnap-offload", never a thread
 * per offload for the loop to join).  TAP.
 *
 *   pager_cancel [MiB]	(default 64)
 */
#include <dirent.h>
#include <semaphore.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define CANCEL_BATCH_BYTES	(64u << 10)	/* small batches, */
#define CANCEL_QUEUE_DEPTH	1		/* one at a time */
#define CANCEL_POLL_US		50

/* The threads of this process named @name: how many, the last one's id
 * in *@tid. */
static int threads_named(const char *name, long *tid)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	*tid = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* the thread has ended */
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		if (!strcmp(comm, name)) {
			n++;
			*tid = strtol(e->d_name, NULL, 10);
		}
	}
	closedir(d);
	return n;
}

static void offload_async_cb(struct harness *h, void *arg)
{
	offload_cb(h, arg);
}

static void cancel_cb(struct harness *h, void *arg)
{
	*(int *)arg = pager_offload_cancel(the_pager(h));
}

static int mode_cancel(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	struct offload_call oc;
	uint64_t npages = (mib << 20) / PAGE;
	char ans[LINE_MAX_LEN];
	int cerr = -1, err, nw;
	long worker, tid;

	pager_config_default(&pcfg, "");
	pcfg.write_batch_bytes = CANCEL_BATCH_BYTES;
	pcfg.write_queue_depth = CANCEL_QUEUE_DEPTH;
	if (!harness_up(&h, &pcfg, self, mib))
		return 1;
	on_loop(&h, cancel_cb, &cerr);
	tap(cerr == -EALREADY, "cancel without an offload: %s", strerror(-cerr));
	on_loop(&h, offload_async_cb, &oc);
	tap(!oc.err, "offload started: %s", strerror(-oc.err));
	do {	/* cancel once the first batch is out */
		st = stats(&h, NULL);
		if (!st.pages[PAGE_OFFLOADED])
			usleep(CANCEL_POLL_US);
	} while (!st.pages[PAGE_OFFLOADED] && !st.offloads);
	on_loop(&h, cancel_cb, &cerr);
	while (sem_wait(&h.offload_done) && errno == EINTR)
		;
	err = h.offload_err;
	st = stats(&h, NULL);
	tap(!cerr && err == -ECANCELED && st.offload_cancels == 1 && !st.offload_errors,
	    "cancelled mid-offload: done reports %s", strerror(-err));
	tap(st.pages[PAGE_OFFLOADED] > 0 && st.pages[PAGE_RESIDENT] > 0 &&
	    !st.pages[PAGE_IN_FLIGHT] &&
	    st.pages[PAGE_OFFLOADED] + st.pages[PAGE_RESIDENT] + st.pages[PAGE_ZERO] == npages,
	    "punched pages OFFLOADED (%llu), unwritten RESIDENT (%llu), none in flight",
	    (unsigned long long)st.pages[PAGE_OFFLOADED],
	    (unsigned long long)st.pages[PAGE_RESIDENT]);
	tap(st.registered, "range stays registered while pages are out");
	nw = threads_named("vmnap-offload", &worker);
	tap(nw == 1, "one offload worker after the cancelled offload (%d, tid %ld)", nw, worker);
	vmm_cmd(&h, ans, "verify 1 4");
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && st.faults > 0,
	    "every byte verified by 4 threads after the cancel (%s; %llu faults)", ans,
	    (unsigned long long)st.faults);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err && st.offloads == 1 && !st.pages[PAGE_RESIDENT],
	    "a full offload after the cancel: %s", strerror(-err));
	nw = threads_named("vmnap-offload", &tid);
	tap(nw == 1 && tid == worker, "the same worker ran it (%d, tid %ld)", nw, tid);
	/* the worker ran the cancelled offload's tidy before this one */
	tap(st.stale_discards_deferred == 1,
	    "the cancelled offload's tidy was left to this one (%llu deferred)",
	    (unsigned long long)st.stale_discards_deferred);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte verified again (%s)", ans);
	err = offload(&h);
	st = stats(&h, NULL);
	nw = threads_named("vmnap-offload", &tid);
	tap(!err && st.offloads == 2 && nw == 1 && tid == worker,
	    "a third offload on the same worker: %s (%d, tid %ld)", strerror(-err), nw, tid);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte verified after it (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_cancel(argv[0], mockvmm_arg(argc, argv, 1, 64));
}
