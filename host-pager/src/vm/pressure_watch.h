/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pressure_watch.h - host memory pressure drives every VM's coordinator.
 *
 * Every interval (200 ms) a loop timer reads the configured cgroup
 * (vmm/cgroup_pressure.h: short reads of kernel counters), turns the
 * reading into a level (coord/pressure.h) and:
 *
 *   on a level change   emits a "pressure" event (from, to, the reading)
 *                       and sets or clears the coordinators' offload caps
 *   at CRITICAL         when no VM is offloading, offloads the first paused
 *                       VM in pressure_order() (coord_pressure_offload())
 *                       and emits a "pressure_offload" event for it
 *
 * GET /host shows the admission figures (pressure_watch_host_json()).
 */
#ifndef VMNAP_PRESSURE_WATCH_H
#define VMNAP_PRESSURE_WATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmnapd.h"

struct pressure_config;

/* Watch @cgroup with @cfg (copied).  -errno (the cgroup's files). */
int pressure_watch_start(struct vmnapd *d, const char *cgroup,
			 const struct pressure_config *cfg);
void pressure_watch_stop(struct vmnapd *d);
/* A coordinator was attached to @vm: give it the current caps. */
void pressure_watch_vm_attached(struct vm *vm);
/* What /metrics shows; false when no cgroup is watched. */
struct pressure_watch_status {
	unsigned int level;		/* enum pressure_level */
	bool has_reading;
	uint64_t usage_bytes, limit_bytes;	/* limit 0: none */
	uint64_t samples, read_errors, level_changes, offloads;
};
bool pressure_watch_status(struct vmnapd *d, struct pressure_watch_status *st);
/*
 * The host's memory, the pressure cgroup, and per VM: resident,
 * reclaimable (resident of a paused VM that can be offloaded) and
 * expected-to-return (store bytes of an offloaded VM) bytes.
 */
json_t *pressure_watch_host_json(struct vmnapd *d);

#endif
