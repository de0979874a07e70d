// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_vmmkill.c - the VMM is killed (SIGKILL) while its VM is offloaded
 * (mock VMM, mockvmm.h; vmnapd's side runs in this process, so
 * /proc/self/fd is vmnapd's): the VM's pager is released, its store file
 * deleted, every fd vmnapd held for it (userfaultfd, memfd, store, pidfd,
 * eventfds, io_uring) closed - the count is back where it was before the
 * VMM came; the departure is counted (mappers_gone); the VM is not LOST
 * (nothing failed: its VMM went); vmnapd serves the next VMM.  TAP.
 *
 *   pager_vmmkill [MiB]	(default 16)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem_handshake.h"
#include "mockvmm.h"
#include "pager.h"

#define GONE_WAIT_POLLS	1500	/* x 20 ms: the pager released */

static void hs_stats_cb(struct harness *h, void *arg)
{
	mem_handshake_get_stats(&h->d, arg);
}

static int mode_vmmkill(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct mem_handshake_stats hs;
	struct pager_stats st;
	struct lost_view lv;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16];
	int fds0, fds1, status;

	if (harness_start(&h, NULL)) {
		tap_bail("harness setup failed");
		return 1;
	}
	fds0 = count_fds(0);
	if (vmm_spawn(&h, self, mib, 1)) {
		tap_bail("cannot start the mock VMM");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	tap(!offload(&h), "offloaded");
	st = stats(&h, NULL);
	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	tap(st.pages[PAGE_OFFLOADED] > 0 && !access(path, F_OK),
	    "%llu pages out in %s.store; vmnapd holds %d more fds",
	    (unsigned long long)st.pages[PAGE_OFFLOADED], VM_NAME, count_fds(0) - fds0);

	kill(h.vmm, SIGKILL);
	status = wait_vmm_exit(&h);	/* closes the harness's pipes to it */
	tap(status == 128 + SIGKILL, "the VMM killed (exit %d)", status);
	tap(wait_pager_gone(&h, GONE_WAIT_POLLS), "its pager released");
	tap(access(path, F_OK) < 0 && errno == ENOENT, "its store file is deleted");
	fds1 = count_fds(0);
	tap(fds1 == fds0, "no fd left: %d open, %d before the VMM came", fds1, fds0);
	on_loop(&h, hs_stats_cb, &hs);
	tap(hs.accepted == 1 && hs.mappers_gone == 1, "counted: %llu handshake, %llu mapper gone",
	    (unsigned long long)hs.accepted, (unsigned long long)hs.mappers_gone);
	lv = wait_lost(&h, 1);
	tap(!lv.lost_err && lv.vms_lost == 0 && strcmp(lv.state, "LOST"),
	    "the VM is not LOST (state %s): nothing failed, its VMM went", lv.state);

	/* vmnapd stays healthy: a new VMM of the same name is served */
	vmm_spawn(&h, self, mib, 1);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "a new VMM is taken (%s)", ans);
	tap(!offload(&h), "and offloaded");
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte right (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_vmmkill(argv[0], mockvmm_arg(argc, argv, 1, 16));
}
