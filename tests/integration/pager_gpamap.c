// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_gpamap.c - the pager's guest-physical map on real kernel objects
 * (memfd, userfaultfd, io_uring): QEMU q35 with more RAM than its
 * low-memory split puts RAM above the PCI hole, so memfd offset != GPA.
 *
 * Guest RAM: a sparse 6 GiB memfd handed over as the preload shim does
 * (one region, gpa = memfd offset, "guessed").  Then a vhost-user memory
 * table like QEMU's for q35 with 6 GiB: gpa [0, 2 GiB) at offset 0 and
 * gpa [4 GiB, 8 GiB) at offset 2 GiB, plus a region of another fd (a ROM:
 * not the pager's RAM).  Checks: with the guessed map, a FREE_REPORT of
 * gpa 4 GiB+X is refused and touches nothing (the old behaviour punched
 * offset 4 GiB+X: another guest page); with the table, it punches memfd
 * offset 2 GiB+X and nothing else; make_resident of gpa 4 GiB+Y restores
 * offset 2 GiB+Y, not offset 4 GiB+Y; translations both ways.  TAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager.h"
#include "vmnapd.h"
#include "tap.h"

#define PAGE		4096ull
#define GIB		(1ull << 30)
#define RAM_BYTES	(6 * GIB)
#define LOWMEM		(2 * GIB)	/* q35's split with >= 2.75 GiB of RAM */
#define HIGH_GPA	(4 * GIB)	/* RAM above the PCI hole */
#define X		(0x123 * PAGE)	/* a page offset used in every part */

/* The memfd pages the test watches, each with its own pattern byte. */
static const uint64_t watched[] = {
	X, LOWMEM + X - PAGE, LOWMEM + X, LOWMEM + X + PAGE, HIGH_GPA + X,
	LOWMEM + X + 2 * PAGE,
};
#define NWATCHED	(sizeof(watched) / sizeof(watched[0]))

static uint8_t pattern(unsigned int i)
{
	return (uint8_t)(0xa0 + i);
}

/* Does memfd page @off hold @byte everywhere (0: a zero page)? */
static bool page_is(int fd, uint64_t off, uint8_t byte)
{
	static uint8_t buf[PAGE];

	if (pread(fd, buf, PAGE, (off_t)off) != (ssize_t)PAGE)
		return false;
	for (size_t i = 0; i < PAGE; i++)
		if (buf[i] != byte)
			return false;
	return true;
}

/* Every watched page holds its pattern, except @zero_off (UINT64_MAX: none)
 * and @zero_off2 which read zero. */
static bool watched_ok(int fd, uint64_t zero_off, uint64_t zero_off2)
{
	for (unsigned int i = 0; i < NWATCHED; i++) {
		bool z = watched[i] == zero_off || watched[i] == zero_off2;

		if (!page_is(fd, watched[i], z ? 0 : pattern(i))) {
			fprintf(stderr, "# memfd offset %#llx: wrong contents\n",
				(unsigned long long)watched[i]);
			return false;
		}
	}
	return true;
}

static int new_uffd(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev < 0)
			return -1;
		fd = ioctl(dev, _IO(0xAA, 0x00), O_CLOEXEC | O_NONBLOCK);
		close(dev);
	}
	if (fd >= 0 && ioctl(fd, UFFDIO_API, &api) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int offload_err = 1;

static void offload_done(struct pager *p, int err, void *arg)
{
	(void)p;
	offload_err = err;
	loop_stop(arg);
}

int main(void)
{
	char dir[] = "/tmp/vmnap-gpamap-XXXXXX", cmd[64];
	struct vmnapd d = { 0 };
	struct pager_region_desc rd;
	struct pager_stats st;
	struct vmnap_ram ram;
	struct vm *vm;
	struct pager *p;
	uint64_t host, off, gpa;
	int memfd, rom, fd, uffd, err;
	void *map;

	log_set_level(LOG_WARN);
	if (!mkdtemp(dir)) {
		return tap_skip_all("no temporary directory: %s", strerror(errno));
	}
	memfd = memfd_create("memory-backend-memfd", MFD_CLOEXEC);
	rom = memfd_create("pc.rom", MFD_CLOEXEC);
	if (memfd < 0 || rom < 0 || ftruncate(memfd, (off_t)RAM_BYTES) ||
	    ftruncate(rom, (off_t)(128 * 1024))) {
		return tap_skip_all("memfd: %s", strerror(errno));
	}
	for (unsigned int i = 0; i < NWATCHED; i++) {
		static uint8_t buf[PAGE];

		memset(buf, pattern(i), sizeof(buf));
		if (pwrite(memfd, buf, PAGE, (off_t)watched[i]) != (ssize_t)PAGE)
			return 1;
	}
	d.loop = loop_new();
	d.cfg.store_dir = dir;
	vm = vm_new(&d, "gpamap");
	rd = (struct pager_region_desc){
		.gpa = 0, .size = RAM_BYTES, .memfd_offset = 0, .memfd = dup(memfd),
	};
	{
		struct pager_config cfg;

		pager_config_default(&cfg, dir);
		err = vm_pager_attach(vm, &cfg, &rd, 1);
	}
	tap(!err, "pager attached to a 6 GiB memfd: %s", strerror(-err));
	if (err)
		return 1;
	p = vm->pager;
	/* as the preload shim hands over a q35 VM with 6 GiB */
	pager_set_gpa_source(p, PAGER_GPA_GUESSED);

	/* 1. guessed map: GPA operations refused, nothing touched */
	err = pager_drop_free(p, HIGH_GPA + X, PAGE);
	pager_get_stats(p, &st);
	tap(err == -ENXIO && st.gpa_refused == 1 && st.dropped_free_pages == 0,
	    "guessed map: FREE_REPORT of gpa 4 GiB+X refused (%s), counted (%llu)",
	    strerror(-err), (unsigned long long)st.gpa_refused);
	tap(watched_ok(memfd, UINT64_MAX, UINT64_MAX),
	    "guessed map: memfd offset 4 GiB+X (another guest page) not punched");
	err = pager_make_resident(p, HIGH_GPA + X, PAGE);
	tap(err == -ENXIO, "guessed map: make_resident refused (%s)", strerror(-err));
	tap(pager_gpa_to_memfd(p, X, &fd, &off) == -ENXIO,
	    "guessed map: no GPA -> memfd translation");
	pager_get_ram(p, &ram);
	tap(ram.nr == 0, "guessed map: no RAM ranges published for range checks");

	/* 2. the vhost-user memory table gives the true layout */
	{
		struct pager_mem_table_region mt[] = {
			{ .gpa = 0, .size = 0xa0000, .fd_offset = 0, .fd = dup(memfd) },
			{ .gpa = 0xc0000, .size = 0x20000, .fd_offset = 0, .fd = rom },
			{ .gpa = 0x100000, .size = LOWMEM - 0x100000, .fd_offset = 0x100000,
			  .fd = dup(memfd) },
			{ .gpa = HIGH_GPA, .size = RAM_BYTES - LOWMEM, .fd_offset = LOWMEM,
			  .fd = dup(memfd) },
		};
		struct pager_mem_table_region bad = {
			.gpa = 8 * GIB, .size = GIB, .fd_offset = RAM_BYTES - PAGE, .fd = mt[0].fd,
		};

		err = pager_set_gpa_map(p, &bad, 1);
		pager_get_stats(p, &st);
		tap(err == -EINVAL && st.gpa_source == PAGER_GPA_GUESSED,
		    "a table region beyond the memfd is refused, map kept (%s)", strerror(-err));
		err = pager_set_gpa_map(p, mt, 4);
		pager_get_stats(p, &st);
		tap(!err && st.gpa_source == PAGER_GPA_MEM_TABLE,
		    "memory table accepted (%s), map source %s", strerror(-err),
		    pager_gpa_source_name(st.gpa_source));
		for (unsigned int i = 0; i < 4; i++)
			if (mt[i].fd != rom)
				close(mt[i].fd);
	}
	pager_get_ram(p, &ram);
	tap(ram.nr == 3 && vmnap_le64(ram.ranges[2].gpa) == HIGH_GPA &&
	    vmnap_le64(ram.ranges[2].len) == RAM_BYTES - LOWMEM,
	    "RAM ranges: 3 (the ROM fd skipped), high RAM at 4 GiB");

	err = pager_gpa_to_memfd(p, HIGH_GPA + X + 8, &fd, &off);
	tap(!err && off == LOWMEM + X + 8, "gpa 4 GiB+X+8 -> memfd offset %#llx (2 GiB+X+8)",
	    (unsigned long long)off);
	err = pager_memfd_to_gpa(p, fd, LOWMEM + X, &gpa);
	tap(!err && gpa == HIGH_GPA + X, "memfd offset 2 GiB+X -> gpa %#llx (4 GiB+X)",
	    (unsigned long long)gpa);
	err = pager_memfd_to_gpa(p, fd, 0xa0000, &gpa);
	tap(err == -ERANGE, "memfd offset in the VGA hole has no gpa (%s)", strerror(-err));

	/* 3. FREE_REPORT of gpa 4 GiB+X punches offset 2 GiB+X only */
	err = pager_drop_free(p, HIGH_GPA + X, PAGE);
	tap(!err, "drop_free gpa 4 GiB+X: %s", strerror(-err));
	tap(watched_ok(memfd, LOWMEM + X, UINT64_MAX),
	    "memfd offset 2 GiB+X punched; its neighbours, X and 4 GiB+X intact");
	err = pager_drop_free(p, LOWMEM + X, PAGE);
	tap(err == -ERANGE, "drop_free in the PCI hole (gpa 2 GiB+X) refused (%s)",
	    strerror(-err));
	err = pager_drop_free(p, LOWMEM - PAGE, 2 * PAGE);
	tap(err == -ERANGE && watched_ok(memfd, LOWMEM + X, UINT64_MAX),
	    "a range running into the hole is refused whole, nothing punched");

	/* 4. make_resident of gpa 4 GiB+Y restores offset 2 GiB+Y */
	uffd = new_uffd();
	map = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		   memfd, 0);
	if (uffd < 0 || map == MAP_FAILED) {
		tap_diag("SKIP make_resident part: userfaultfd or mmap: %s", strerror(errno));
	} else {
		host = (uint64_t)(uintptr_t)map;
		err = pager_add_mapper(p, uffd, &host, 1, getpid(), NULL);
		if (!err)
			err = pager_offload_start(p, offload_done, d.loop);
		if (!err) {
			loop_run(d.loop);
			err = offload_err;
		}
		tap(!err && page_is(memfd, X, 0) && page_is(memfd, HIGH_GPA + X, 0),
		    "offloaded: data pages punched from the memfd (%s)", strerror(-err));
		err = pager_make_resident(p, HIGH_GPA + X + PAGE, PAGE);
		tap(!err && page_is(memfd, LOWMEM + X + PAGE, pattern(3)) &&
		    page_is(memfd, HIGH_GPA + X, 0) && page_is(memfd, X, 0),
		    "make_resident gpa 4 GiB+X+4K restored memfd offset 2 GiB+X+4K only (%s)",
		    strerror(-err));
	}

	/* detach brings every page back while the mapper lives (its reaper) */
	vm_pager_detach(vm);
	pager_reapers_wait();
	tap(watched_ok(memfd, LOWMEM + X, UINT64_MAX),
	    "after detach every page is back, the dropped one reads zero");
	if (map != MAP_FAILED)
		munmap(map, RAM_BYTES);
	vm_free(vm);
	loop_free(d.loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "# cannot remove %s\n", dir);
	return tap_done();
}
