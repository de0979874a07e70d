// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_storeerr.c - the store fails under a fault (mock VMM, mockvmm.h).
 * For a while (transient EIO): the faulting thread stays blocked (never
 * zeros), the error callback hears of it; once the store is back the
 * retried fault is served and every byte is right.  For good (EIO past
 * fault_error_timeout_ms): the VM is lost - its VMM killed (SIGKILL), state
 * LOST with the error, counted, its store file gone.  The store is taken
 * away by truncating it (reads past the end: EIO); pager_blockdev does the
 * same on a failing block device.  TAP.
 *
 *   pager_storeerr [MiB]	(default 8)
 */
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <signal.h>
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
#define FAULT_ERROR_TIMEOUT_MS	3000	/* the store back well within it */
#define LOST_WAIT_POLLS		1500	/* x 20 ms */

static int mode_storeerr(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	struct lost_view lv;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16];
	struct timespec ts;
	struct stat sb;
	char *saved = NULL;
	int fd, status;

	sem_init(&h.pager_error, 0, 0);
	pager_config_default(&pcfg, "");
	pcfg.fault_error_timeout_ms = FAULT_ERROR_TIMEOUT_MS;
	if (!harness_up(&h, &pcfg, self, mib))
		return 1;
	on_loop(&h, catch_pager_errors, NULL);
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
	st = stats_until_unstuck(&h, RETRY_WAIT_POLLS);
	tap(!st.faults_stuck && !st.lost_err,
	    "store back: the waiting fault was served on retry, the VM lives");
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte right, the blocked page included (%s)", ans);

	/* the store fails for good: past fault_error_timeout_ms the VM is lost */
	on_loop(&h, vm_pager_errors, NULL);	/* as vmnapd: the VM layer hears it */
	tap(!offload(&h), "offloaded again");
	if (ftruncate(fd, 0)) {
		tap_bail("cannot take the store away: %s", strerror(errno));
		return 1;
	}
	close(fd);
	free(saved);
	vmm_cmd(&h, ans, "peek 0");
	tap(!strcmp(ans, "blocked"), "the fault blocks again, no zeros (%s)", ans);
	lv = wait_lost(&h, LOST_WAIT_POLLS);
	tap(lv.lost_err == -EIO && !lv.pager,
	    "EIO past %d ms: the VM is lost (%s), its memory released",
	    FAULT_ERROR_TIMEOUT_MS, strerror(-lv.lost_err));
	tap(!strcmp(lv.state, "LOST") && strstr(lv.error, "Input/output error") &&
	    strstr(lv.error, "killed (1 process"),
	    "API: state %s, error \"%s\"", lv.state, lv.error);
	tap(lv.vms_lost == 1, "counted (vms_lost %llu)", (unsigned long long)lv.vms_lost);
	status = wait_vmm_exit(&h);
	tap(status == 128 + SIGKILL, "the VMM was killed, its blocked thread never served "
	    "(exit %d)", status);
	tap(access(path, F_OK) < 0 && errno == ENOENT, "its store file is gone");
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_storeerr(argv[0], mockvmm_arg(argc, argv, 1, 8));
}
