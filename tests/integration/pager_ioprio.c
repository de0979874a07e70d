// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_ioprio.c - the I/O class of a delivery's store reads (mock VMM,
 * mockvmm.h; pager_config.delivery_io_class).  The fault thread's real
 * I/O priority is read back with ioprio_get(2) before the faults and
 * after each:
 *
 *   realtime  a fault from a resume to its delivery (pager_data_window ..
 *             pager_resume_delivered) reads in the realtime class and is
 *             counted, and so is a stream's read-ahead there; a fault
 *             after the delivery reads as the thread ran before, and is
 *             not counted
 *   inherit   no fault ever takes the realtime class
 *   noperm    this process without CAP_SYS_ADMIN and CAP_SYS_NICE (the
 *             mock VMM, exec'd as root, keeps them): realtime is refused,
 *             said so (class inherit, a reason), and the delivery's fault
 *             is served all the same
 *
 * Every case ends with every byte of guest RAM checked.  TAP.
 *
 *   pager_ioprio realtime|inherit|noperm [MiB]	(default 8)
 */
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/ioprio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define FAULT_THREAD	"vmnap-fault"
#define RT_PRIO		IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, IOPRIO_NORM)
#define STREAM_PAGES	256	/* touched in order: a stream with read-ahead */

static int ioprio_of(pid_t tid)
{
	return (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, (int)tid);
}

/* The pager's fault thread in this process, by its name; 0 if none. */
static pid_t fault_tid(void)
{
	char path[300], comm[32];
	struct dirent *d;
	pid_t tid = 0;
	DIR *dir = opendir("/proc/self/task");

	while (dir && !tid && (d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
		f = fopen(path, "re");
		if (f && fgets(comm, sizeof(comm), f) &&
		    !strncmp(comm, FAULT_THREAD, strlen(FAULT_THREAD)))
			tid = (pid_t)atoi(d->d_name);
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return tid;
}

/* Take CAP_SYS_ADMIN and CAP_SYS_NICE out of this thread's effective and
 * permitted sets: the threads it starts next inherit that. */
static int drop_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	for (int cap = 0; cap < 64; cap++) {
		if (cap != CAP_SYS_ADMIN && cap != CAP_SYS_NICE)
			continue;
		data[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
		data[CAP_TO_INDEX(cap)].permitted &= ~CAP_TO_MASK(cap);
	}
	return syscall(SYS_capset, &hdr, data) ? -errno : 0;
}

/* Read page @pg through the VMM (a fault when it is out): its word is
 * round 1's. */
static bool read_right(struct harness *h, uint64_t pg)
{
	uint64_t want[PAGE / 8];
	char ans[LINE_MAX_LEN], exp[LINE_MAX_LEN];

	page_pattern(pg, 1, want);
	vmm_cmd(h, ans, "read %llu", (unsigned long long)pg);
	snprintf(exp, sizeof(exp), "value %#llx", (unsigned long long)want[0]);
	return !strcmp(ans, exp);
}

static int run(const char *self, const char *mode, uint64_t mib)
{
	bool rt = !strcmp(mode, "realtime"), noperm = !strcmp(mode, "noperm");
	uint64_t npages = (mib << 20) / PAGE;
	/* far apart: the stream that follows in_win ends well before after */
	uint64_t in_win = npages / 4, after = 3 * npages / 4;
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	int base, prio;
	pid_t tid;

	if (!rt && !noperm && strcmp(mode, "inherit")) {
		fprintf(stderr, "usage: %s realtime|inherit|noperm [MiB]\n", self);
		return 2;
	}
	g_all_data = true;	/* every page has data: each read is a store read */
	setenv("PAGER_ALL_DATA", "1", 1);
	if (noperm) {
		int err = drop_caps();

		if (err) {
			tap_bail("cannot drop CAP_SYS_ADMIN and CAP_SYS_NICE: %s", strerror(-err));
			return 1;
		}
	}
	pager_config_default(&pcfg, "");
	pcfg.delivery_io_class = rt || noperm ? PAGER_IO_REALTIME : PAGER_IO_INHERIT;
	if (!harness_up(&h, &pcfg, self, mib))
		return 1;
	tap(!offload(&h), "offloaded");
	tid = fault_tid();
	tap(tid > 0, "the fault thread is %s (tid %d)", FAULT_THREAD, (int)tid);
	st = stats(&h, NULL);
	if (rt)
		tap(st.delivery_io_class == PAGER_IO_REALTIME && !st.delivery_io_class_reason,
		    "a delivery's reads may be realtime (%s)",
		    pager_io_class_name(st.delivery_io_class));
	else if (noperm)
		tap(st.delivery_io_class == PAGER_IO_INHERIT && st.delivery_io_class_reason &&
		    strstr(st.delivery_io_class_reason, "CAP_SYS_NICE"),
		    "without the capabilities realtime is refused and said so (%s: %s)",
		    pager_io_class_name(st.delivery_io_class),
		    st.delivery_io_class_reason ? st.delivery_io_class_reason : "no reason");
	else
		tap(st.delivery_io_class == PAGER_IO_INHERIT && !st.delivery_io_class_reason,
		    "configured to inherit (%s)", pager_io_class_name(st.delivery_io_class));
	base = ioprio_of(tid);
	tap(base >= 0 && base != RT_PRIO, "the thread runs as it was started (ioprio 0x%x)",
	    (unsigned int)base);

	/* a fault from a resume to its delivery */
	on_loop(&h, data_window_cb, NULL);
	tap(read_right(&h, in_win), "a fault in the delivery window is served, right bytes");
	prio = ioprio_of(tid);
	st = stats(&h, NULL);
	if (rt)
		tap(prio == RT_PRIO && st.delivery_io_reads == 1,
		    "its store read went in the realtime class (ioprio 0x%x, %llu read counted)",
		    (unsigned int)prio, (unsigned long long)st.delivery_io_reads);
	else
		tap(prio != RT_PRIO && st.delivery_io_reads == 0,
		    "its store read kept the thread's class (ioprio 0x%x, %llu reads counted)",
		    (unsigned int)prio, (unsigned long long)st.delivery_io_reads);
	/* a sequential stream in the window: the faults' read-ahead (the
	 * prefetch thread's reads) goes in the window's class too */
	{
		uint64_t lo = in_win + 16, hi = lo + STREAM_PAGES;
		struct pager_stats s2;

		vmm_cmd(&h, ans, "touch %llu %llu", (unsigned long long)lo,
			(unsigned long long)hi);
		s2 = stats_settled(&h);
		tap(!strncmp(ans, "ok", 2) && s2.readahead_mapped_pages > st.readahead_mapped_pages &&
		    (rt ? s2.delivery_io_reads > st.delivery_io_reads :
			  s2.delivery_io_reads == 0),
		    "a stream in the window: %llu faults, %llu pages read ahead, %llu realtime reads",
		    (unsigned long long)(s2.faults - st.faults),
		    (unsigned long long)(s2.readahead_mapped_pages - st.readahead_mapped_pages),
		    (unsigned long long)(s2.delivery_io_reads - st.delivery_io_reads));
		st = s2;
	}
	on_loop(&h, delivered_cb, NULL);

	/* a fault once the guest has its data: a command's */
	tap(read_right(&h, after), "a fault after the delivery is served, right bytes");
	prio = ioprio_of(tid);
	{
		struct pager_stats s3 = stats(&h, NULL);

		tap(prio == base && s3.faults > st.faults &&
		    s3.delivery_io_reads == st.delivery_io_reads,
		    "its store read went as the thread ran (ioprio 0x%x, as before 0x%x; "
		    "no more realtime reads: %llu)", (unsigned int)prio, (unsigned int)base,
		    (unsigned long long)s3.delivery_io_reads);
	}

	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every byte right (%s)", ans);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	if (argc < 2)
		return run(argv[0], "", 0);
	return run(argv[0], argv[1], mockvmm_arg(argc, argv, 2, 8));
}
