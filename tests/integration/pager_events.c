// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_events.c - the VMM changes its guest RAM mapping while pages are
 * out (mock VMM, mockvmm.h), and the pager follows through the userfaultfd
 * events the shim asks for: a discarded range (QEMU's balloon discard:
 * punch + MADV_DONTNEED, MADV_REMOVE, MADV_DONTNEED) reads zero, its
 * pages are ZERO and their store slots dropped, and no later offload or
 * prefetch brings the old contents back; guest RAM moved by mremap is
 * served at its new address; a second mapper that unmaps its guest RAM
 * (memory unplug) leaves the pager serving the first.  TAP.
 *
 * The same without an event (nothing registered when the VMM moved or
 * unmapped it) is found by the next offload from /proc/PID/maps.
 *
 *   pager_events discard|unplug|unregistered [MiB]	(default 16)
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mockvmm.h"
#include "pager.h"

static uint64_t data_pages(uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;

	for (uint64_t i = lo; i < hi; i++)
		n += page_kind(i) == PK_DATA;
	return n;
}

static int mode_discard(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st1, st2, st;
	uint64_t npages = (mib << 20) / PAGE;
	/* three neighbouring ranges, one per way of discarding */
	uint64_t a = npages / 8, b = a + 64, c = b + 64, d = c + 64;
	char ans[LINE_MAX_LEN];
	int err;

	if (!harness_up(&h, NULL, self, mib))
		return 1;
	err = offload(&h);
	st1 = stats(&h, NULL);
	tap(!err && st1.registered, "offload: %s", strerror(-err));
	vmm_cmd(&h, ans, "discard %llu %llu qemu", (unsigned long long)a, (unsigned long long)b);
	tap(!strcmp(ans, "ok"), "balloon discard (punch + MADV_DONTNEED) of offloaded pages (%s)", ans);
	vmm_cmd(&h, ans, "discard %llu %llu remove", (unsigned long long)b, (unsigned long long)c);
	tap(!strcmp(ans, "ok"), "MADV_REMOVE of offloaded pages (%s)", ans);
	vmm_cmd(&h, ans, "discard %llu %llu dontneed", (unsigned long long)c, (unsigned long long)d);
	tap(!strcmp(ans, "ok"), "MADV_DONTNEED of offloaded pages (%s)", ans);
	st2 = stats_until(&h, offsetof(struct pager_stats, vmm_removed_pages), d - a);
	tap(st2.vmm_removed_pages == d - a, "the pager heard of %llu discarded page(s) of %llu",
	    (unsigned long long)st2.vmm_removed_pages, (unsigned long long)(d - a));
	tap(st2.pages[PAGE_ZERO] - st1.pages[PAGE_ZERO] == data_pages(a, d) &&
	    st1.pages[PAGE_OFFLOADED] - st2.pages[PAGE_OFFLOADED] == data_pages(a, d),
	    "their offloaded pages are ZERO now (%llu -> %llu zero)",
	    (unsigned long long)st1.pages[PAGE_ZERO], (unsigned long long)st2.pages[PAGE_ZERO]);
	tap(st2.store_file_bytes < st1.store_file_bytes &&
	    st2.store_bytes == st1.store_bytes - data_pages(a, d) * PAGE,
	    "their store slots are dropped (store file %llu -> %llu bytes)",
	    (unsigned long long)st1.store_file_bytes, (unsigned long long)st2.store_file_bytes);
	vmm_cmd(&h, ans, "verify 1 4 %llu %llu 0", (unsigned long long)a, (unsigned long long)d);
	tap(!strcmp(ans, "ok"), "discarded pages read zero, every other byte right (%s)", ans);
	err = offload(&h);
	on_loop(&h, resumed_cb, NULL);
	vmm_cmd(&h, ans, "verify 1 4 %llu %llu 1", (unsigned long long)a, (unsigned long long)d);
	tap(!err && !strcmp(ans, "ok"), "after another offload and prefetch: still zero, "
	    "nothing restored over them (%s)", ans);

	err = offload(&h);
	vmm_cmd(&h, ans, "remap");
	tap(!err && !strcmp(ans, "ok"), "guest RAM moved with mremap while offloaded (%s)", ans);
	vmm_cmd(&h, ans, "verify 1 4 %llu %llu 0", (unsigned long long)a, (unsigned long long)d);
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && st.vmm_remaps == 1, "faults at the new address served, "
	    "every byte right (%s; %llu remap)", ans, (unsigned long long)st.vmm_remaps);
	err = offload(&h);
	vmm_cmd(&h, ans, "verify 1 4 %llu %llu 1", (unsigned long long)a, (unsigned long long)d);
	tap(!err && !strcmp(ans, "ok"), "registered and served at the new address in the next "
	    "cycle (%s; %s)", strerror(-err), ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static int mode_unplug(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	int err;

	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM with 2 mappers ready (%s)", ans);
	err = offload(&h);
	tap(!err, "offload: %s", strerror(-err));
	vmm_cmd(&h, ans, "peerunmap");
	st = stats_until(&h, offsetof(struct pager_stats, vmm_unmaps), 1);
	tap(!strcmp(ans, "ok") && st.vmm_unmaps == 1, "the second mapper unmapped its guest "
	    "RAM while offloaded (%s; %llu unmap)", ans, (unsigned long long)st.vmm_unmaps);
	vmm_cmd(&h, ans, "verify 1 4");
	tap(!strcmp(ans, "ok"), "the first mapper is still served: every byte right (%s)", ans);
	err = offload(&h);
	vmm_cmd(&h, ans, "verify 1 4 0 0 1");
	tap(!err && !strcmp(ans, "ok"), "next cycle registers only what is mapped: %s (%s)",
	    strerror(-err), ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

/*
 * The same changes while nothing is out: no range is registered, so the
 * kernel sends no event, and the next offload must find them itself.
 */
static int mode_unregistered(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	int err;

	/* with dirty tracking the ranges stay registered after an offload:
	 * "nothing registered" after one is a VM without it */
	setenv("VMNAPD_DIRTY_TRACKING", "none", 1);
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM with 2 mappers ready (%s)", ans);
	vmm_cmd(&h, ans, "remap squat");
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && !st.registered && !st.vmm_remaps, "guest RAM moved while "
	    "nothing is registered, other memory mapped at the old address (%s)", ans);
	err = offload(&h);
	vmm_cmd(&h, ans, "verify 1 4");
	tap(!err && !strcmp(ans, "ok"), "the offload registers the new address, not what sits "
	    "at the old one: every byte right (%s; %s)", strerror(-err), ans);
	vmm_cmd(&h, ans, "peerunmap");
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok") && !st.registered && !st.vmm_unmaps, "the second mapper "
	    "unmapped its guest RAM while nothing is registered (%s)", ans);
	err = offload(&h);
	vmm_cmd(&h, ans, "verify 1 4 0 0 1");
	tap(!err && !strcmp(ans, "ok"), "the next offload leaves it out and serves the first "
	    "(%s; %s)", strerror(-err), ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	uint64_t mib;

	if (mockvmm_init(argc, argv))
		return 0;
	mib = mockvmm_arg(argc, argv, 2, 16);
	if (argc > 1 && !strcmp(argv[1], "unplug"))
		return mode_unplug(argv[0], mib);
	if (argc > 1 && !strcmp(argv[1], "unregistered"))
		return mode_unregistered(argv[0], mib);
	return mode_discard(argv[0], mib);
}
