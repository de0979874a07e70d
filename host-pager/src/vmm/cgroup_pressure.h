/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cgroup_pressure.h - the memory pressure of a cgroup (the VMs' parent)
 * and of the host, read from cgroupfs and /proc.
 *
 *   cgroup v2   memory.current, memory.max ("max": no limit) and
 *               memory.pressure ("some avg10=P.PP ...") where PSI is on
 *   cgroup v1   memory.usage_in_bytes, memory.limit_in_bytes (a limit of
 *               2^62 or more is the kernel's "no limit")
 *   host        /proc/meminfo MemTotal, MemAvailable
 *
 * The files are opened once and read with pread(): cgroupfs and procfs
 * answer from kernel counters without waiting on any process, so a read
 * on the event loop is short (unlike smaps_rollup, see vmm_mem.h).
 */
#ifndef VMNAP_CGROUP_PRESSURE_H
#define VMNAP_CGROUP_PRESSURE_H

#include <stdbool.h>
#include <stdint.h>

struct cgroup_pressure_reading {
	bool has_psi;
	uint32_t psi_some_avg10_centi;	/* % x 100 */
	bool has_usage;
	uint64_t usage_bytes;
	uint64_t limit_bytes;		/* 0: no limit */
};

struct host_meminfo {
	uint64_t total_bytes;
	uint64_t available_bytes;
};

struct cgroup_pressure;

/*
 * Watch the memory controller cgroup directory @path (v2, or v1 such as
 * /sys/fs/cgroup/memory/vms).  -ENOENT when it has neither v2 nor v1 memory
 * files, else -errno of the open.
 */
int cgroup_pressure_open(const char *path, struct cgroup_pressure **out);
/* "v1" or "v2". */
const char *cgroup_pressure_version(const struct cgroup_pressure *cp);
const char *cgroup_pressure_path(const struct cgroup_pressure *cp);
/* -errno (-EPROTO: a file did not parse). */
int cgroup_pressure_read(struct cgroup_pressure *cp, struct cgroup_pressure_reading *r);
void cgroup_pressure_close(struct cgroup_pressure *cp);

/* -errno (-EPROTO: /proc/meminfo lacks MemTotal or MemAvailable). */
int host_meminfo_read(struct host_meminfo *mi);

#endif
