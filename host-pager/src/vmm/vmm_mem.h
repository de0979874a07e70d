/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmm_mem.h - the memory a VMM process costs the host, from /proc:
 * its proportional set size (/proc/<pid>/smaps_rollup "Pss:") and the
 * memory charged to its cgroup (v2 memory.current, or v1
 * memory.usage_in_bytes of its memory controller cgroup).
 */
#ifndef VMNAP_VMM_MEM_H
#define VMNAP_VMM_MEM_H

#include <stdint.h>
#include <sys/types.h>

/* PSS of @pid in bytes; -errno (-ESRCH when it is gone). */
int vmm_pss_bytes(pid_t pid, uint64_t *bytes);
/* Memory charged to @pid's cgroup in bytes; -errno (-ENOENT: no memory cgroup). */
int vmm_cgroup_memory_bytes(pid_t pid, uint64_t *bytes);

#endif
