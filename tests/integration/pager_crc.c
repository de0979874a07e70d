// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_crc.c - the store is durable and checked (mock VMM, mockvmm.h):
 * after an offload the store file carries a versioned header and a slot
 * map with each stored page's crc32c.  A second pager cannot open the
 * store while the first holds its lock.  A slot whose bytes change under
 * an offloaded page is never served: the VM is lost at once (a re-read
 * gives the same bytes) - the VMM is killed (SIGKILL; its thread touching
 * the page never got a value), the VM shows state LOST with the error, its
 * store file is gone.  Another VM of the same vmnapd, offloaded too, runs
 * on: every byte right.  TAP.
 *
 *   pager_crc [MiB]	(default 8)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"
#include "store.h"

#define LOST_WAIT_POLLS		1500	/* x 20 ms: the VMM killed, RAM released */
#define OTHER_VM		"other"
#define DATA_PAGE		0	/* page_kind(0) == PK_DATA */

/* A second opener of the same store (as a second vmnapd would be). */
static void second_open(struct harness *h, void *arg)
{
	struct store s;
	struct store_region r = { 0 };
	int *err = arg;

	*err = store_open(&s, h->store_dir, VM_NAME, 16, &r, 1, false,
			  pager_store_id(the_pager(h)));
	if (!*err)
		store_close(&s, false);
}

static int mode_crc(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct vmm_proc other;
	struct lost_view lv;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16], hdr[8], good, want_map_ok;
	struct store_slot slot;
	uint64_t npages = (mib << 20) / PAGE;
	int fd, err = 0;
	uint32_t crc;

	h.vm_name = OTHER_VM;
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 1)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	other = vmm_keep(&h);
	tap(!strcmp(ans, "ready") && !offload(&h), "another VM (%s) offloaded", OTHER_VM);
	h.vm_name = NULL;
	if (vmm_spawn(&h, self, mib, 1)) {
		tap_bail("harness setup failed");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	tap(!offload(&h), "offloaded");

	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	fd = open(path, O_RDWR | O_CLOEXEC);
	tap(fd >= 0 && pread(fd, hdr, sizeof(hdr), 0) == sizeof(hdr) &&
	    !memcmp(hdr, STORE_MAGIC, sizeof(hdr)), "store file %s.store has the header", VM_NAME);
	{
		uint64_t want[PAGE / 8];

		page_pattern(DATA_PAGE, 1, want);
		crc = store_crc32c(0, want, PAGE);
	}
	want_map_ok = fd >= 0 &&
		pread(fd, &slot, sizeof(slot), STORE_DATA_OFF + npages * PAGE +
		      DATA_PAGE * sizeof(slot)) == sizeof(slot) &&
		(slot.flags & STORE_SLOT_STORED) && slot.crc == crc;
	tap(want_map_ok, "slot map on disk: page %d stored, crc32c %08x (map %08x)",
	    DATA_PAGE, crc, slot.crc);
	tap(store_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value");
	on_loop(&h, second_open, &err);
	tap(err == -EBUSY, "a second opener finds the store locked (%s)", strerror(-err));

	/* one byte of the page's slot changes */
	if (pread(fd, &good, 1, STORE_DATA_OFF + DATA_PAGE * PAGE + 100) != 1) {
		tap_bail("cannot read the slot: %s", strerror(errno));
		return 1;
	}
	good ^= 0x5a;
	if (pwrite(fd, &good, 1, STORE_DATA_OFF + DATA_PAGE * PAGE + 100) != 1 ||
	    fdatasync(fd)) {
		tap_bail("cannot corrupt the slot: %s", strerror(errno));
		return 1;
	}
	close(fd);
	/* the slot is read through the page cache or O_DIRECT: either way
	 * the file now holds the bad byte */
	vmm_cmd(&h, ans, "peek %d", DATA_PAGE);
	tap(strncmp(ans, "value", 5) != 0,
	    "a slot whose checksum mismatches is never served (%s)", ans);
	lv = wait_lost(&h, LOST_WAIT_POLLS);
	tap(lv.lost_err == -EBADMSG && !lv.pager, "the VM is lost at once: %s, memory released",
	    strerror(-lv.lost_err));
	tap(!strcmp(lv.state, "LOST") && strstr(lv.error, "checksum mismatch") &&
	    strstr(lv.error, "killed (1 process"),
	    "API: state %s, error \"%s\"", lv.state, lv.error);
	tap(lv.vms_lost == 1, "counted (vms_lost %llu)", (unsigned long long)lv.vms_lost);
	err = wait_vmm_exit(&h);
	tap(err == 128 + SIGKILL, "the VMM was killed (exit %d)", err);
	tap(access(path, F_OK) < 0 && errno == ENOENT, "its store file is gone");
	vmm_use(&h, &other);
	lv = wait_lost(&h, 1);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok") && !lv.lost_err && lv.pager,
	    "the other VM is unaffected: every byte right (%s), not lost", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}
int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_crc(argv[0], mockvmm_arg(argc, argv, 1, 8));
}
