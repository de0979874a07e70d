/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pressure.h - the host memory pressure policy: pure logic, no I/O.
 *
 * A reading of the VMs' parent cgroup (PSI "some avg10" where cgroup v2 has
 * it, usage/limit on either version) gives a level:
 *
 *   NORMAL    the coordinator's own thresholds
 *   ELEVATED  the next handoffs offload sooner: the offload delay, the
 *             guest timer budget and the cooldown are capped
 *             (pressure_caps(), applied with coord_set_pressure_caps())
 *   CRITICAL  also: paused VMs not yet offloaded are offloaded now, one at a
 *             time, largest resident first, then the longest expected wait
 *             (pressure_order(), coord_pressure_offload())
 *
 * A level is entered when a signal reaches its threshold and left only
 * when every signal is a hysteresis below it, so a reading that hovers at
 * a threshold does not flip the policy on every sample.
 */
#ifndef VMNAP_PRESSURE_H
#define VMNAP_PRESSURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord.h"

enum pressure_level {
	PRESSURE_NORMAL = 0,
	PRESSURE_ELEVATED,
	PRESSURE_CRITICAL,
	PRESSURE_NR_LEVELS,
};

struct pressure_reading {
	bool has_psi;
	uint32_t psi_some_avg10_centi;	/* PSI "some avg10", % x 100 */
	bool has_usage;
	uint64_t usage_bytes;
	uint64_t limit_bytes;		/* 0: no limit (usage gives no level) */
};

struct pressure_config {
	uint64_t interval_ns;		/* sampling period (200 ms) */
	/* usage/limit, permille: ELEVATED at 800, CRITICAL at 900 */
	uint32_t usage_permille[PRESSURE_NR_LEVELS];
	uint32_t usage_hysteresis_permille;	/* 50 */
	/* PSI some avg10, % x 100: ELEVATED at 10 %, CRITICAL at 30 % */
	uint32_t psi_centi[PRESSURE_NR_LEVELS];
	uint32_t psi_hysteresis_centi;	/* 500 (5 %) */
	/* ELEVATED and CRITICAL: the coordinator's offload gates are capped */
	struct coord_pressure_caps caps;	/* 0 ms, 200 ms, 0 ms */
};

/* A VM that pressure could offload now (PAUSED, not offloaded). */
struct pressure_candidate {
	uint64_t resident_bytes;
	uint64_t expected_wait_ns;	/* coord_expected_wait_ns() */
	unsigned int index;		/* the caller's; also the last tie breaker */
};

void pressure_config_default(struct pressure_config *cfg);
const char *pressure_level_name(enum pressure_level l);
/* usage/limit in permille; false without a usage reading or a limit. */
bool pressure_usage_permille(const struct pressure_reading *r, uint32_t *permille);
/* The level after @r, coming from @cur. */
enum pressure_level pressure_next_level(const struct pressure_config *cfg,
					enum pressure_level cur,
					const struct pressure_reading *r);
/* The coordinator caps at @level: NULL at NORMAL. */
const struct coord_pressure_caps *pressure_caps(const struct pressure_config *cfg,
						enum pressure_level level);
/* Sort @v into offload order: resident bytes descending, then expected
 * wait descending, then index ascending. */
void pressure_order(struct pressure_candidate *v, size_t n);

#endif
