// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_enospc.c - the store on a small tmpfs (mock VMM, mockvmm.h): offload
 * aborts with ENOSPC, the VM stays correct (skips if mounting is
 * impossible).  TAP.
 *
 *   pager_enospc [MiB]	(default 32)
 */
#include <sys/mount.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define ENOSPC_STORE_MIB	8

static int mode_enospc(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN], opts[64];
	int err;

	if (harness_start(&h, NULL)) {
		tap_bail("harness setup failed");
		return 1;
	}
	snprintf(opts, sizeof(opts), "size=%dm,mode=0700", ENOSPC_STORE_MIB);
	if (mount("vmnap-store", h.store_dir, "tmpfs", 0, opts) < 0) {
		printf("1..0 # SKIP cannot mount a small tmpfs store: %s\n", strerror(errno));
		harness_stop(&h);
		return 0;
	}
	h.mounted = true;
	vmm_spawn(&h, self, mib, 1);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(err == -ENOSPC, "offload to an %d MiB store aborts with ENOSPC (%s)",
	    ENOSPC_STORE_MIB, strerror(-err));
	tap(st.pages[PAGE_IN_FLIGHT] == 0 && st.pages[PAGE_RESIDENT] > 0 &&
	    st.offload_errors == 1,
	    "unwritten pages stay resident (%llu resident, %llu offloaded)",
	    (unsigned long long)st.pages[PAGE_RESIDENT],
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte still right after the aborted offload (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_enospc(argv[0], mockvmm_arg(argc, argv, 1, 32));
}
