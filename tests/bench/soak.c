// SPDX-License-Identifier: GPL-2.0-only
/*
 * soak.c - many pause/offload/resume cycles of several VMs in one vmnapd
 * (mock VMMs, mockvmm.h; vmnapd's side runs in this process: built with
 * `make asan` its leaks are LeakSanitizer's to find at exit).  Each cycle,
 * for each VM: pause (SIGSTOP of its VMM), offload, resume (the pre-resume
 * restore, SIGCONT, prefetch), check every page of its RAM against the
 * round's pattern (the digest: every evicted page faulted back right),
 * then write a new round into every page.  Asserts: every digest right, no
 * offload error, vmnapd's fd count after the last cycle equal to after the
 * first and back to the start once the VMMs quit, its RSS flat: the least
 * RSS of the last quarter of the cycles within SOAK_RSS_SLACK_KIB of the
 * most of the first quarter (a sample moves by a few MiB with what is in
 * flight and in ASan's quarantine; a leak lifts the floor).  TAP; the
 * figures go to @json.  scripts/soak.sh runs it under ASan+LSan (`make soak`).
 *
 *   soak [CYCLES [VMS [MiB [JSON]]]]	(default 100 4 8, no JSON)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define SOAK_MAX_VMS		16
/* RSS may move a little (allocator caches, ASan's quarantine): a leak
 * per cycle of 4 VMs x N pages shows well above it */
#define SOAK_RSS_SLACK_KIB	8192
#define GONE_WAIT_POLLS		1500	/* x 20 ms: the VMMs' pagers released */

struct soak_vm {
	char name[16];
	struct vmm_proc p;
	unsigned int round;	/* the pattern its RAM holds */
	unsigned int bad;	/* cycles whose digest failed */
};

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void resume_cb(struct harness *h, void *arg)
{
	int *restored = arg;

	*restored = pager_resume_prepare(the_pager(h));
}

static void deliver_and_resume_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_delivered(the_pager(h));
	pager_resumed(the_pager(h));
}

int main(int argc, char **argv)
{
	struct harness h = { 0 };
	struct soak_vm vms[SOAK_MAX_VMS];
	unsigned int cycles, nvms, digests = 0, bad = 0, offload_errs = 0;
	uint64_t mib, offloads = 0, t0;
	int fds_start, fds_first = -1, fds_last = -1, fds_end;
	long rss_first = -1, rss_last = -1, rss_max = 0, rss_early_max = 0, rss_late_min = -1;
	const char *json;
	char ans[LINE_MAX_LEN];
	FILE *f;

	if (mockvmm_init(argc, argv))
		return 0;
	cycles = (unsigned int)mockvmm_arg(argc, argv, 1, 100);
	nvms = (unsigned int)mockvmm_arg(argc, argv, 2, 4);
	mib = mockvmm_arg(argc, argv, 3, 8);
	json = argc > 4 ? argv[4] : NULL;
	if (nvms > SOAK_MAX_VMS) {
		tap_bail("at most %d VMs", SOAK_MAX_VMS);
		return 1;
	}
	if (harness_start(&h, NULL)) {
		tap_bail("harness setup failed");
		return 1;
	}
	fds_start = count_fds(0);
	for (unsigned int i = 0; i < nvms; i++) {
		snprintf(vms[i].name, sizeof(vms[i].name), "soak%u", i);
		h.vm_name = vms[i].name;
		if (vmm_spawn(&h, argv[0], mib, 1)) {
			tap_bail("cannot start VMM %u", i);
			return 1;
		}
		vms[i].p = vmm_keep(&h);
		vms[i].round = 1;
		read_line(h.from_vmm, ans, sizeof(ans));
		if (strcmp(ans, "ready")) {
			tap_bail("VMM %u: %s", i, ans);
			return 1;
		}
	}
	tap_diag("%u VMs x %llu MiB, %u cycles", nvms, (unsigned long long)mib, cycles);
	t0 = mono_ns();
	for (unsigned int c = 1; c <= cycles; c++) {
		for (unsigned int i = 0; i < nvms; i++) {
			struct soak_vm *v = &vms[i];
			int err, restored = 0;

			vmm_use(&h, &v->p);
			kill(v->p.pid, SIGSTOP);		/* pause */
			err = offload(&h);
			offloads++;
			if (err) {
				offload_errs++;
				tap_diag("cycle %u %s: offload: %s", c, v->name, strerror(-err));
			}
			on_loop(&h, resume_cb, &restored);
			kill(v->p.pid, SIGCONT);		/* resume */
			on_loop(&h, deliver_and_resume_cb, NULL);
			vmm_cmd(&h, ans, "verify %u 2", v->round);
			digests++;
			if (strcmp(ans, "ok")) {
				bad++;
				v->bad++;
				tap_diag("cycle %u %s: digest: %s", c, v->name, ans);
			}
			v->round++;
			vmm_cmd(&h, ans, "fill %u", v->round);
		}
		if (c == 1 || c == cycles) {
			int fds = count_fds(0);
			long rss = rss_kib();

			if (c == 1) {
				fds_first = fds;
				rss_first = rss;
			}
			fds_last = fds;
			rss_last = rss;
		}
		{
			long rss = rss_kib();
			unsigned int quarter = (cycles + 3) / 4;

			if (rss > rss_max)
				rss_max = rss;
			if (c <= quarter && rss > rss_early_max)
				rss_early_max = rss;
			if (c > cycles - quarter && (rss_late_min < 0 || rss < rss_late_min))
				rss_late_min = rss;
		}
		if (c % 25 == 0)
			tap_diag("cycle %u: %d fds, RSS %ld KiB", c, count_fds(0), rss_kib());
	}
	for (unsigned int i = 0; i < nvms; i++) {
		vmm_use(&h, &vms[i].p);
		vmm_quit(&h);
	}
	/* each VMM's exit detaches its pager on the loop: wait for all */
	for (unsigned int i = 0; i < nvms; i++) {
		vmm_use(&h, &vms[i].p);
		wait_pager_gone(&h, GONE_WAIT_POLLS);
	}
	fds_end = count_fds(0);

	tap(!bad, "%u digests, %u wrong", digests, bad);
	tap(!offload_errs, "%llu offloads, %u failed", (unsigned long long)offloads, offload_errs);
	tap(fds_last == fds_first, "fds flat: %d after cycle 1, %d after cycle %u",
	    fds_first, fds_last, cycles);
	tap(fds_end == fds_start, "fds back once the VMMs quit: %d (%d before)", fds_end,
	    fds_start);
	tap(rss_late_min - rss_early_max <= SOAK_RSS_SLACK_KIB,
	    "RSS flat: %ld KiB after cycle 1, %ld KiB after cycle %u (first quarter "
	    "at most %ld, last quarter at least %ld, max %ld)", rss_first, rss_last,
	    cycles, rss_early_max, rss_late_min, rss_max);
	if (json && (f = fopen(json, "w"))) {
		fprintf(f, "{\"vms\": %u, \"cycles\": %u, \"guest_mib\": %llu, "
			"\"digests\": %u, \"digests_wrong\": %u, \"offloads\": %llu, "
			"\"offload_errors\": %u, \"fds_start\": %d, \"fds_first\": %d, "
			"\"fds_last\": %d, \"fds_end\": %d, \"rss_first_kib\": %ld, "
			"\"rss_last_kib\": %ld, \"rss_max_kib\": %ld, "
			"\"rss_first_quarter_max_kib\": %ld, \"rss_last_quarter_min_kib\": %ld, "
			"\"seconds\": %.1f}\n",
			nvms, cycles, (unsigned long long)mib, digests, bad,
			(unsigned long long)offloads, offload_errs, fds_start, fds_first,
			fds_last, fds_end, rss_first, rss_last, rss_max, rss_early_max,
			rss_late_min,
			(double)(mono_ns() - t0) / 1e9);
		fclose(f);
	}
	h.vm_name = NULL;
	return harness_finish(&h);
}
