/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vmm_mem.h - the memory a VMM process costs the host, from /proc:
 * its proportional set size (/proc/<pid>/smaps_rollup "Pss:") and the
 * memory charged to its cgroup (v2 memory.current, or v1
 * memory.usage_in_bytes of its memory controller cgroup).
 */
#ifndef VMNAP_VMM_MEM_H
#define VMNAP_VMM_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* PSS of @pid in bytes; -errno (-ESRCH when it is gone). */
int vmm_pss_bytes(pid_t pid, uint64_t *bytes);
/* Memory charged to @pid's cgroup in bytes; -errno (-ENOENT: no memory cgroup). */
int vmm_cgroup_memory_bytes(pid_t pid, uint64_t *bytes);

/*
 * Reading smaps_rollup takes the VMM's mmap lock and can wait on it for a
 * long time (a VMM busy mapping, faulting, or stuck).  The event loop
 * never reads it: a sampler thread does, every @period_ns, and the loop
 * takes its last sample.  A sampler is freed without waiting for a read in
 * progress (its thread frees it afterwards).
 */
struct vmm_mem_sample {
	pid_t pid;		/* whose: 0 when nothing sampled yet */
	bool has_pss, has_cgroup;
	uint64_t pss_bytes, cgroup_bytes;
	uint64_t at_ns;		/* CLOCK_MONOTONIC of the sample */
};

struct vmm_mem_sampler;

/* NULL with errno. */
struct vmm_mem_sampler *vmm_mem_sampler_new(uint64_t period_ns);
/* Sample @pid from now on (0: stop sampling); a new pid is sampled at once. */
void vmm_mem_sampler_set_pid(struct vmm_mem_sampler *s, pid_t pid);
/* The last sample of the current pid; false when there is none yet. */
bool vmm_mem_sampler_get(struct vmm_mem_sampler *s, struct vmm_mem_sample *out);
void vmm_mem_sampler_free(struct vmm_mem_sampler *s);

#endif
