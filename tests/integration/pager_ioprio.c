// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_ioprio.c - the I/O priority of the store reads a stalled guest
 * waits on (mock VMM, mockvmm.h).  TAP.
 *
 *   realtime (the default, pager_config.fault_io_realtime): the fault
 *     thread and the make-resident worker run with the lowest real-time
 *     I/O class level (ioprio_get on each, found by name), the pager says
 *     "realtime", and an offload's pages come back by faults, every byte
 *     verified.
 *   off: fault_io_realtime false: neither thread has the real-time class
 *     and the pager says "off".
 *   refused: CAP_SYS_NICE and CAP_SYS_ADMIN dropped from the effective set
 *     before the pager's threads start (they inherit it): the kernel
 *     refuses the class with EPERM, the pager says "refused" with that
 *     error, and faults are served all the same, every byte verified.
 *
 *   pager_ioprio [MiB [realtime|off|refused]]	(default 8 realtime)
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

#define WANT_IOPRIO	IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, IOPRIO_NR_LEVELS - 1)

/* The I/O priority of this process's thread named @name, or -errno
 * (-ENOENT: no such thread). */
static int thread_ioprio(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int ret = -ENOENT;

	if (!d)
		return -errno;
	while (ret == -ENOENT && (e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		if (strcmp(comm, name))
			continue;
		ret = (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, atoi(e->d_name));
		if (ret < 0)
			ret = -errno;
	}
	closedir(d);
	return ret;
}

/* Drop @caps from this thread's effective set (threads it starts later
 * inherit it). */
static int drop_caps(const int *caps, unsigned int n)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	for (unsigned int i = 0; i < n; i++)
		data[CAP_TO_INDEX(caps[i])].effective &= ~CAP_TO_MASK(caps[i]);
	return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

/* Offload everything, then touch it all back: faults read every page. */
static void offload_and_fault(struct harness *h)
{
	char ans[LINE_MAX_LEN];
	struct pager_stats st;
	int err = offload(h);

	st = stats(h, NULL);
	tap(!err && st.pages[PAGE_OFFLOADED] > 0, "offload: %llu page(s) out (%d)",
	    (unsigned long long)st.pages[PAGE_OFFLOADED], err);
	vmm_cmd(h, ans, "verify 1 2");
	st = stats(h, NULL);
	tap(!strcmp(ans, "ok") && st.faults > 0,
	    "every byte back through %llu fault(s) (%s)", (unsigned long long)st.faults, ans);
}

static int run(const char *self, uint64_t mib, const char *mode)
{
	static const int caps[] = { CAP_SYS_NICE, CAP_SYS_ADMIN };
	struct pager_config cfg;
	struct harness h = { 0 };
	struct pager_stats st;
	int fault, resident;

	pager_config_default(&cfg, NULL);
	cfg.fault_io_realtime = strcmp(mode, "off") != 0;
	if (!strcmp(mode, "refused")) {
		int err = drop_caps(caps, sizeof(caps) / sizeof(caps[0]));

		tap(!err, "CAP_SYS_NICE and CAP_SYS_ADMIN dropped (%s)", strerror(-err));
	}
	if (!harness_up(&h, &cfg, self, mib))
		return 1;
	offload_and_fault(&h);
	st = stats(&h, NULL);
	fault = thread_ioprio("vmnap-fault");
	resident = thread_ioprio("vmnap-resident");
	if (!strcmp(mode, "realtime")) {
		tap(st.fault_io == PAGER_FAULT_IO_REALTIME && !st.fault_io_err,
		    "pager says %s", pager_fault_io_name(st.fault_io));
		tap(fault == WANT_IOPRIO, "fault thread: real-time class, level %d (ioprio %#x)",
		    IOPRIO_NR_LEVELS - 1, fault);
		tap(resident == WANT_IOPRIO, "make-resident worker: the same (ioprio %#x)",
		    resident);
	} else if (!strcmp(mode, "off")) {
		tap(st.fault_io == PAGER_FAULT_IO_OFF && !st.fault_io_err,
		    "pager says %s", pager_fault_io_name(st.fault_io));
		tap(fault >= 0 && IOPRIO_PRIO_CLASS(fault) != IOPRIO_CLASS_RT,
		    "fault thread: not real-time (ioprio %#x)", fault);
		tap(resident >= 0 && IOPRIO_PRIO_CLASS(resident) != IOPRIO_CLASS_RT,
		    "make-resident worker: not real-time (ioprio %#x)", resident);
	} else {
		tap(st.fault_io == PAGER_FAULT_IO_REFUSED && st.fault_io_err == -EPERM,
		    "pager says %s (%s)", pager_fault_io_name(st.fault_io),
		    strerror(-st.fault_io_err));
		tap(fault >= 0 && IOPRIO_PRIO_CLASS(fault) != IOPRIO_CLASS_RT,
		    "fault thread: left at its default (ioprio %#x)", fault);
	}
	tap(vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[2] : "realtime";

	if (mockvmm_init(argc, argv))
		return 0;
	if (strcmp(mode, "realtime") && strcmp(mode, "off") && strcmp(mode, "refused")) {
		fprintf(stderr, "usage: %s [MiB [realtime|off|refused]]\n", argv[0]);
		return 2;
	}
	return run(argv[0], mockvmm_arg(argc, argv, 1, 8), mode);
}
