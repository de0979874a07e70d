// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_blockdev.c - the store on a real block device that fails (mock VMM,
 * mockvmm.h; root).  The store directory is an ext4 file system on a loop
 * device over a file; the store is opened O_DIRECT, so its reads and writes
 * reach the device.  The device fails by shrinking: LOOP_SET_STATUS64 with
 * a small lo_sizelimit makes every block past it fail with EIO in the
 * block layer ("attempt to access beyond end of device"), and lifting the
 * limit brings the same blocks back.  Device-mapper's error/flakey targets
 * would do the same but need CONFIG_BLK_DEV_DM; mode "dm" says whether
 * this kernel has it (and skips with the reason when not).
 *
 *   enospc      an 8 MiB file system, 32 MiB of guest RAM: the offload
 *               stops with ENOSPC, counted; unwritten pages stay resident;
 *               every byte right
 *   eio-offload the device fails before an offload: it stops with EIO,
 *               counted; no page is out; the VM runs on, every byte right;
 *               with the device back the next offload succeeds
 *   eio-fault   after an offload the device fails for a while: the fault
 *               blocks (never zeros) and is retried; the device comes back
 *               within fault_error_timeout_ms: served, every byte right
 *   eio-lost    after an offload the device fails for good: past
 *               fault_error_timeout_ms the VM is lost - the VMM killed
 *               (SIGKILL), state LOST with the error, counted; its store
 *               file gone
 *   dm          device-mapper present? (skips with the reason when not)
 *
 *   pager_blockdev MODE [MiB]	(default 16; enospc 32)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define FS_MIB			64	/* the file system for the eio modes */
#define ENOSPC_FS_MIB		8
#define FAILED_LIMIT		(1u << 20)	/* the device shrunk to 1 MiB */
#define FAULT_ERROR_TIMEOUT_MS	3000
#define RETRY_WAIT_POLLS	500	/* x 20 ms */
#define LOST_WAIT_POLLS		1500	/* x 20 ms */

struct blkdev {
	char img[PATH_MAX], dev[32];
	int fd;			/* the loop device, -1: none */
};

/* A loop device over a new @mib MiB file in @dir, with ext4 on it, mounted
 * on @mnt.  0, or a reason in @why. */
static int blk_make(struct blkdev *b, const char *dir, const char *mnt, unsigned int mib,
		    char *why, size_t n)
{
	struct loop_config lc = { 0 };
	char cmd[PATH_MAX + 64];
	int ctl, img, nr;

	b->fd = -1;
	snprintf(b->img, sizeof(b->img), "%s/disk.img", dir);
	img = open(b->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (img < 0 || ftruncate(img, (off_t)mib << 20)) {
		snprintf(why, n, "cannot create %s: %s", b->img, strerror(errno));
		return -1;
	}
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	nr = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
	if (nr < 0) {
		snprintf(why, n, "no loop device (/dev/loop-control): %s", strerror(errno));
		close(img);
		return -1;
	}
	close(ctl);
	snprintf(b->dev, sizeof(b->dev), "/dev/loop%d", nr);
	b->fd = open(b->dev, O_RDWR | O_CLOEXEC);
	lc.fd = (unsigned int)img;
	lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;	/* gone once unmounted and closed */
	if (b->fd < 0 || ioctl(b->fd, LOOP_CONFIGURE, &lc) < 0) {
		snprintf(why, n, "cannot set up %s: %s", b->dev, strerror(errno));
		close(img);
		return -1;
	}
	close(img);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F %s >/dev/null 2>&1", b->dev);
	if (system(cmd)) {
		snprintf(why, n, "mkfs.ext4 %s failed (e2fsprogs installed?)", b->dev);
		return -1;
	}
	if (mount(b->dev, mnt, "ext4", MS_NOATIME, NULL) < 0) {
		snprintf(why, n, "cannot mount ext4 from %s: %s", b->dev, strerror(errno));
		return -1;
	}
	chmod(mnt, 0700);
	return 0;
}

/* The device ends after @bytes (0: the whole file again). */
static int blk_limit(struct blkdev *b, uint64_t bytes)
{
	struct loop_info64 li;

	if (ioctl(b->fd, LOOP_GET_STATUS64, &li) < 0)
		return -errno;
	li.lo_sizelimit = bytes;
	return ioctl(b->fd, LOOP_SET_STATUS64, &li) < 0 ? -errno : 0;
}

static void blk_free(struct blkdev *b)
{
	if (b->fd >= 0)
		close(b->fd);	/* autoclear: freed once the mount is gone */
	b->fd = -1;
}

static int mode_dm(void)
{
	int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("1..0 # SKIP no device-mapper in this kernel (open /dev/mapper/control: "
		       "%s; CONFIG_BLK_DEV_DM unset): the loop device modes stand in for "
		       "dm-error/dm-flakey\n", strerror(errno));
		return 0;
	}
	close(fd);
	printf("1..0 # SKIP device-mapper present, but the dm-error/dm-flakey variant is "
	       "not written (no kernel here had it to test it on); the loop device modes "
	       "cover the same failures\n");
	return 0;
}

static int run(const char *self, const char *mode, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	struct blkdev b = { .fd = -1 };
	struct lost_view lv;
	char ans[LINE_MAX_LEN], why[PATH_MAX + 128], path[PATH_MAX + 16];
	bool enospc = !strcmp(mode, "enospc");
	int err;

	pager_config_default(&pcfg, "");
	pcfg.fault_error_timeout_ms = FAULT_ERROR_TIMEOUT_MS;
	pcfg.direct_io = true;
	if (harness_start(&h, &pcfg)) {
		tap_bail("harness setup failed");
		return 1;
	}
	if (blk_make(&b, h.dir, h.store_dir, enospc ? ENOSPC_FS_MIB : FS_MIB, why,
		     sizeof(why))) {
		printf("1..0 # SKIP %s\n", why);
		blk_free(&b);
		harness_stop(&h);
		return 0;
	}
	h.mounted = true;
	tap_diag("store on ext4 on %s (%u MiB)", b.dev, enospc ? ENOSPC_FS_MIB : FS_MIB);
	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	vmm_spawn(&h, self, mib, 1);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	on_loop(&h, vm_pager_errors, NULL);	/* as vmnapd */

	if (enospc) {
		err = offload(&h);
		st = stats(&h, NULL);
		tap(err == -ENOSPC && st.offload_errors == 1,
		    "offload of %llu MiB to an %d MiB file system stops with ENOSPC (%s), "
		    "counted", (unsigned long long)mib, ENOSPC_FS_MIB, strerror(-err));
		tap(st.pages[PAGE_IN_FLIGHT] == 0 && st.pages[PAGE_RESIDENT] > 0,
		    "unwritten pages stay resident (%llu resident, %llu offloaded)",
		    (unsigned long long)st.pages[PAGE_RESIDENT],
		    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	} else if (!strcmp(mode, "eio-offload")) {
		tap(!blk_limit(&b, FAILED_LIMIT), "the device fails past 1 MiB");
		err = offload(&h);
		st = stats(&h, NULL);
		tap(err == -EIO && st.offload_errors == 1,
		    "the offload stops with EIO (%s), counted", strerror(-err));
		tap(st.pages[PAGE_IN_FLIGHT] == 0 && st.pages[PAGE_OFFLOADED] == 0,
		    "no page is out (%llu resident)",
		    (unsigned long long)st.pages[PAGE_RESIDENT]);
		vmm_cmd(&h, ans, "verify 1 2");
		tap(!strcmp(ans, "ok"), "the VM runs on, every byte right (%s)", ans);
		tap(!blk_limit(&b, 0), "the device is back");
		err = offload(&h);
		tap(!err, "with the device back the next offload succeeds (%s)",
		    strerror(-err));
	} else if (!strcmp(mode, "eio-fault") || !strcmp(mode, "eio-lost")) {
		bool lost = !strcmp(mode, "eio-lost");

		err = offload(&h);
		st = stats(&h, NULL);
		tap(!err && st.pages[PAGE_OFFLOADED] > 0, "offloaded %llu pages (%s)",
		    (unsigned long long)st.pages[PAGE_OFFLOADED], strerror(-err));
		tap(!blk_limit(&b, FAILED_LIMIT), "the device fails past 1 MiB");
		vmm_cmd(&h, ans, "peek 0");
		tap(!strcmp(ans, "blocked"), "the fault blocks, no zeros (%s)", ans);
		if (!lost) {
			usleep(500000);	/* retried against the failing device */
			st = stats(&h, NULL);
			tap(st.fault_errors >= 1 && st.faults_stuck == 1 && st.fault_retries > 0 &&
			    !st.lost_err, "EIO counted (%llu), the fault waits, retried %llu times",
			    (unsigned long long)st.fault_errors,
			    (unsigned long long)st.fault_retries);
			tap(!blk_limit(&b, 0), "the device is back within %d ms",
			    FAULT_ERROR_TIMEOUT_MS);
			st = stats_until_unstuck(&h, RETRY_WAIT_POLLS);
			tap(!st.faults_stuck && !st.lost_err, "the waiting fault was served on retry");
			vmm_cmd(&h, ans, "verify 1 2");
			tap(!strcmp(ans, "ok"), "every byte right (%s)", ans);
		} else {
			lv = wait_lost(&h, LOST_WAIT_POLLS);
			tap(lv.lost_err == -EIO && !lv.pager,
			    "EIO past %d ms: the VM is lost (%s), its memory released",
			    FAULT_ERROR_TIMEOUT_MS, strerror(-lv.lost_err));
			tap(!strcmp(lv.state, "LOST") && strstr(lv.error, "Input/output error"),
			    "API: state %s, error \"%s\"", lv.state, lv.error);
			tap(lv.vms_lost == 1, "counted (vms_lost %llu)",
			    (unsigned long long)lv.vms_lost);
			err = wait_vmm_exit(&h);
			tap(err == 128 + SIGKILL, "the VMM was killed, its blocked thread never "
			    "served (exit %d)", err);
			tap(access(path, F_OK) < 0 && errno == ENOENT, "its store file is gone");
			blk_limit(&b, 0);
			harness_stop(&h);
			blk_free(&b);
			return tap_done();
		}
	} else {
		tap_bail("unknown mode %s", mode);
		return 1;
	}
	if (enospc) {
		vmm_cmd(&h, ans, "verify 1 2");
		tap(!strcmp(ans, "ok"), "every byte right after the aborted offload (%s)", ans);
	}
	vmm_quit(&h);
	blk_limit(&b, 0);
	harness_stop(&h);
	blk_free(&b);
	return tap_done();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (mockvmm_init(argc, argv))
		return 0;
	if (!strcmp(mode, "dm"))
		return mode_dm();
	return run(argv[0], mode, mockvmm_arg(argc, argv, 2,
					       !strcmp(mode, "enospc") ? 32 : 16));
}
