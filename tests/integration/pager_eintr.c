// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_eintr.c - the mock VMM (mockvmm.h) takes a signal every
 * SIGNAL_STORM_US (SA_RESTART, as QEMU's threads do) while vmnapd is slow
 * to answer its handshake: the shim must retry on EINTR, not fail the
 * boot.  TAP.
 *
 *   pager_eintr
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define SLOW_ANSWER_US		300000	/* vmnapd busy this long */

static void slow_cb(struct harness *h, void *arg)
{
	(void)h;
	(void)arg;
	usleep(SLOW_ANSWER_US);	/* vmnapd busy: the handshake waits */
}

static int mode_eintr(const char *self)
{
	struct harness h = { .signal_storm = true };
	char ans[LINE_MAX_LEN];

	if (harness_start(&h, NULL) || vmm_spawn(&h, self, 1, 1)) {
		tap_bail("harness setup failed");
		return 1;
	}
	on_loop(&h, slow_cb, NULL);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"),
	    "handshake under a signal every %d us with a slow vmnapd: %s",
	    SIGNAL_STORM_US, ans);
	vmm_cmd(&h, ans, "verify 1 1");
	tap(!strcmp(ans, "ok"), "guest RAM right (%s)", ans);
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_eintr(argv[0]);
}
