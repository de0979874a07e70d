// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_mockvmm.c - the pager end to end with the mock VMM (mockvmm.h):
 * guest RAM patterns with holes and zero pages, two mappers; evict, verify
 * every byte from several threads in both mappers; a second cycle with
 * prefetch racing faults; make_resident (and its asynchronous form: a
 * worker reads the range, the loop is told), drop_free; streams of faults
 * on ZERO pages filled ahead; detach when the VMM exits; the shim with
 * vmnapd unreachable, managed and unmanaged.  TAP.
 *
 *   pager_mockvmm [MiB]	(default 32)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem_handshake.h"
#include "mockvmm.h"
#include "pager.h"

struct range_call {
	uint64_t gpa, len;
	int err;
	bool drop;
};

static void range_cb(struct harness *h, void *arg)
{
	struct range_call *rc = arg;
	struct pager *p = the_pager(h);

	rc->err = rc->drop ? pager_drop_free(p, rc->gpa, rc->len) :
			     pager_make_resident(p, rc->gpa, rc->len);
}

/* Check a range of the memfd holds round @round's pattern (or zero). */
struct memfd_check {
	uint64_t pg, n;
	unsigned int round;
	bool ok;
};

static void memfd_check_cb(struct harness *h, void *arg)
{
	struct memfd_check *mc = arg;
	uint64_t want[PAGE / 8], got[PAGE / 8], zero[PAGE / 8] = { 0 }, off;
	int fd;

	mc->ok = !pager_gpa_to_memfd(the_pager(h), mc->pg * PAGE, &fd, &off);
	for (uint64_t i = mc->pg; mc->ok && i < mc->pg + mc->n; i++) {
		if (pread(fd, got, PAGE, (off_t)(off + (i - mc->pg) * PAGE)) != PAGE)
			mc->ok = false;
		page_pattern(i, mc->round, want);
		mc->ok = mc->ok && !memcmp(got, page_kind(i) == PK_DATA ? want : zero, PAGE);
	}
}

/*
 * Touch @n ZERO pages with @cmd: they read zero, take far fewer faults
 * than pages (each filled the next run ahead, doubling), and no page
 * outside them is filled: @out pages of the VM are not ZERO then.
 */
static void zero_stream(struct harness *h, struct pager_stats *st0, const char *cmd,
			const char *what, uint64_t n, uint64_t out)
{
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	uint64_t faults, ahead;

	vmm_cmd(h, ans, "%s", cmd);
	st = stats(h, NULL);
	faults = st.faults - st0->faults;
	ahead = st.zero_ahead_pages - st0->zero_ahead_pages;
	tap(!strcmp(ans, "ok 0") && faults + ahead == n && faults <= 16 &&
	    st.pages[PAGE_ZERO] == st.pages_total - out,
	    "%s: read zero (%s), %llu faults, %llu pages filled ahead, %llu still ZERO",
	    what, ans, (unsigned long long)faults, (unsigned long long)ahead,
	    (unsigned long long)st.pages[PAGE_ZERO]);
	*st0 = st;
}

static int mode_basic(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st0, st;
	struct mem_handshake_stats hs;
	uint64_t npages = (mib << 20) / PAGE;
	char ans[LINE_MAX_LEN];
	bool have;
	int err;

	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM (2 mappers) handed its memfd through the preload shim (%s)", ans);
	st0 = stats(&h, &have);
	tap(have && st0.mappers == 2 && st0.pages_total == npages,
	    "pager attached: %llu pages, %u mappers", (unsigned long long)st0.pages_total,
	    st0.mappers);
	tap(!st0.registered, "range not registered while nothing is out");

	/* cycle 1: evict, then fault everything back from 4 threads per mapper */
	err = offload(&h);
	st = stats(&h, NULL);
	tap(!err, "offload 1: %s", strerror(-err));
	tap(st.resident_bytes * 10 < st0.resident_bytes,
	    "resident bytes %llu -> %llu (< 10%%)", (unsigned long long)st0.resident_bytes,
	    (unsigned long long)st.resident_bytes);
	tap(st.pages[PAGE_OFFLOADED] == npages - 2 * (npages / 7) - (npages % 7 > 3) - (npages % 7 > 5) &&
	    st.pages[PAGE_ZERO] + st.pages[PAGE_OFFLOADED] == npages,
	    "data pages offloaded (%llu), holes and zero pages ZERO (%llu)",
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)st.pages[PAGE_ZERO]);
	tap(st.last_offload_written == st.pages[PAGE_OFFLOADED] * PAGE,
	    "zero pages cost no I/O: %llu bytes written", (unsigned long long)st.last_offload_written);
	tap(st.registered, "range registered while pages are out");
	vmm_cmd(&h, ans, "verify 1 4");
	tap(!strcmp(ans, "ok"), "cycle 1: every byte verified by 4+4 threads in 2 mappers (%s)", ans);
	st = stats(&h, NULL);
	tap(st.faults > 0 && st.pages[PAGE_OFFLOADED] == 0 && st.zero_faults > 0,
	    "faults served: %llu (%llu pages, %llu zero, %llu eexist)",
	    (unsigned long long)st.faults, (unsigned long long)st.fault_pages,
	    (unsigned long long)st.zero_faults, (unsigned long long)st.eexist);
	if (st.dirty_tracking == PAGER_DIRTY_WP_ASYNC)
		tap(st.registered && st.pages[PAGE_CLEAN] > 0,
		    "dirty tracking %s: the range stays registered (write-protect), %llu "
		    "restored page(s) CLEAN", pager_dirty_tracking_name(st.dirty_tracking),
		    (unsigned long long)st.pages[PAGE_CLEAN]);
	else
		tap(!st.registered, "range unregistered once every page is back "
		    "(dirty tracking %s: %s)", pager_dirty_tracking_name(st.dirty_tracking),
		    st.dirty_tracking_reason ? st.dirty_tracking_reason : "");

	/* cycle 2: new contents, evict, prefetch races the faults */
	vmm_cmd(&h, ans, "fill 2");
	err = offload(&h);
	tap(!err, "offload 2: %s", strerror(-err));
	on_loop(&h, resumed_cb, NULL);
	vmm_cmd(&h, ans, "verify 2 4 0 0 1");
	st = stats(&h, NULL);
	tap(!strcmp(ans, "ok"), "cycle 2: verified while prefetch races faults (%s; %llu prefetched)",
	    ans, (unsigned long long)st.prefetch_pages);

	/* cycle 3: make_resident brings a range back without a fault */
	vmm_cmd(&h, ans, "fill 3");
	err = offload(&h);
	tap(!err, "offload 3: %s", strerror(-err));
	{
		struct range_call rc = { .gpa = 64 * PAGE, .len = 64 * PAGE };
		struct memfd_check mc = { .pg = 64, .n = 64, .round = 3 };

		on_loop(&h, range_cb, &rc);
		on_loop(&h, memfd_check_cb, &mc);
		tap(!rc.err && mc.ok, "make_resident: 64 pages back in the memfd, contents right");
		{
			bool told, again;
			int first = resident_async(&h, 512 * PAGE + 100, 64 * PAGE, &told);

			mc = (struct memfd_check){ .pg = 512, .n = 65, .round = 3 };
			on_loop(&h, memfd_check_cb, &mc);
			err = resident_async(&h, 512 * PAGE + 100, 64 * PAGE, &again);
			tap(first == -EAGAIN && told && !err && mc.ok,
			    "make_resident_async: not yet (%s), the loop told when done, then "
			    "resident (%s): 65 pages in the memfd, contents right",
			    strerror(-first), strerror(-err));
		}
		rc = (struct range_call){ .gpa = 256 * PAGE, .len = 128 * PAGE, .drop = true };
		on_loop(&h, range_cb, &rc);
		tap(!rc.err, "drop_free of 128 pages: %s", strerror(-rc.err));
		rc = (struct range_call){ .gpa = npages * PAGE, .len = PAGE, .drop = true };
		on_loop(&h, range_cb, &rc);
		tap(rc.err == -ERANGE, "drop_free outside guest RAM refused");
	}
	vmm_cmd(&h, ans, "verify 3 3 256 384");
	tap(!strcmp(ans, "ok"), "cycle 3: verified, dropped range reads zero (%s)", ans);

	/* cycle 4: streams of faults on ZERO pages (memory the guest takes
	 * from its free lists) are filled ahead, within their 2 MiB block */
	vmm_cmd(&h, ans, "zero");
	err = offload(&h);
	st0 = stats(&h, NULL);
	tap(!err && st0.pages[PAGE_ZERO] == npages, "offload 4: every page ZERO (%llu)",
	    (unsigned long long)st0.pages[PAGE_ZERO]);
	zero_stream(&h, &st0, "touchdown 0 512", "512 pages from the top (a huge page "
		    "cleared)", 512, 512);
	zero_stream(&h, &st0, "touch 512 1024", "512 pages upwards (a split block)", 512,
		    1024);
	st = st0;
	vmm_cmd(&h, ans, "touch 1024 1100 2");
	st0 = stats(&h, NULL);
	tap(!strcmp(ans, "ok 0") && st0.faults - st.faults == 38 &&
	    st0.zero_ahead_pages == st.zero_ahead_pages && st0.pages[PAGE_ZERO] == npages - 1062,
	    "every other page: a fault each, none filled ahead (%s; %llu faults)", ans,
	    (unsigned long long)(st0.faults - st.faults));

	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	for (int i = 0; i < 100 && have; i++) {
		stats(&h, &have);
		if (have)
			usleep(20000);
	}
	tap(!have, "pager released when the last mapper went");
	mem_handshake_get_stats(&h.d, &hs);
	tap(hs.accepted == 2, "handshakes accepted: %llu", (unsigned long long)hs.accepted);

	/* vmnapd unreachable: the shim fails the mapping loudly ... */
	vmm_spawn_opts(&h, self, 1, 1, "/nonexistent/mem.sock", false);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strncmp(ans, "mmap failed", 11) && wait_vmm_exit(&h) != 0,
	    "vmnapd unreachable: guest RAM mapping refused (%s)", ans);
	/* ... unless running unmanaged was asked for */
	vmm_spawn_opts(&h, self, 1, 1, "/nonexistent/mem.sock", true);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "VMNAP_ALLOW_UNMANAGED=1: runs unmanaged (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_basic(argv[0], mockvmm_arg(argc, argv, 1, 32));
}
