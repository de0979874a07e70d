// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_storeerr.c - the store fails under a fault (mock VMM, mockvmm.h): the
 * faulting thread stays blocked (never zeros), the error callback hears of
 * it; once the store is back the retried fault is served and every byte is
 * right.  TAP.
 *
 *   pager_storeerr [MiB]	(default 8)
 */
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <time.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define ERROR_WAIT_S		5
#define RETRY_WAIT_POLLS	200	/* x 20 ms: served once the store is back */

static void pager_error_cb(struct pager *p, int err, const char *what, void *arg)
{
	struct harness *h = arg;

	(void)p;
	h->pager_err = err;
	h->pager_err_what = what;
	sem_post(&h->pager_error);
}

static void set_error_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_error_cb(the_pager(h), pager_error_cb, h);
}

static int mode_storeerr(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16];
	struct timespec ts;
	struct stat sb;
	char *saved = NULL;
	int fd;

	sem_init(&h.pager_error, 0, 0);
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 1)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	on_loop(&h, set_error_cb, NULL);
	tap(!offload(&h), "offloaded");

	/* the store loses its contents: every slot read fails (EIO) */
	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &sb))
		saved = malloc((size_t)sb.st_size);
	if (!saved || pread(fd, saved, (size_t)sb.st_size, 0) != sb.st_size ||
	    ftruncate(fd, 0)) {
		tap_bail("cannot take the store away: %s", strerror(errno));
		return 1;
	}
	vmm_cmd(&h, ans, "peek 0");
	tap(!strcmp(ans, "blocked"),
	    "a fault the store cannot serve blocks the guest thread, no zeros (%s)", ans);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ERROR_WAIT_S;
	tap(!sem_timedwait(&h.pager_error, &ts) && h.pager_err == -EIO &&
	    !strcmp(h.pager_err_what, "fault"),
	    "error callback on the loop: %s (%s)", strerror(-h.pager_err),
	    h.pager_err_what ? h.pager_err_what : "none");
	usleep(300000);	/* a few retries against the broken store */
	st = stats(&h, NULL);
	tap(st.fault_errors == 1 && st.faults_stuck == 1 && st.fault_retries > 0 &&
	    st.pages[PAGE_OFFLOADED] > 0,
	    "counted once (%llu), fault waits (%u stuck, %llu retries), pages stay offloaded",
	    (unsigned long long)st.fault_errors, st.faults_stuck,
	    (unsigned long long)st.fault_retries);

	/* a range the store cannot give back: an error for that request, once */
	{
		bool told;
		int first = resident_async(&h, 64 * PAGE, 16 * PAGE, &told);
		int second = resident_async(&h, 64 * PAGE, 16 * PAGE, &told);
		int third = resident_async(&h, 64 * PAGE, 16 * PAGE, &told);

		st = stats(&h, NULL);
		tap(first == -EAGAIN && second == -EIO && third == -EAGAIN &&
		    st.resident_failed >= 1,
		    "make_resident_async on the broken store: not yet, then %s for that "
		    "request (%llu failed), then tried again", strerror(-second),
		    (unsigned long long)st.resident_failed);
	}

	/* the store comes back: the retried fault is served */
	if (pwrite(fd, saved, (size_t)sb.st_size, 0) != sb.st_size) {
		tap_bail("cannot put the store back: %s", strerror(errno));
		return 1;
	}
	close(fd);
	free(saved);
	st = stats_until_unstuck(&h, RETRY_WAIT_POLLS);
	tap(!st.faults_stuck, "store back: the waiting fault was served on retry");
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte right, the blocked page included (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_storeerr(argv[0], mockvmm_arg(argc, argv, 1, 8));
}
