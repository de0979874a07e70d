// SPDX-License-Identifier: GPL-2.0-only
/* pressure.c - the host memory pressure policy; see pressure.h. */
#include <stdlib.h>

#include "pressure.h"

#define NS_PER_MS	1000000ull

static const char *const level_names[PRESSURE_NR_LEVELS] = {
	[PRESSURE_NORMAL] = "normal",
	[PRESSURE_ELEVATED] = "elevated",
	[PRESSURE_CRITICAL] = "critical",
};

void pressure_config_default(struct pressure_config *cfg)
{
	*cfg = (struct pressure_config){
		.interval_ns = 200 * NS_PER_MS,
		.usage_permille = { [PRESSURE_ELEVATED] = 800, [PRESSURE_CRITICAL] = 900 },
		.usage_hysteresis_permille = 50,
		.psi_centi = { [PRESSURE_ELEVATED] = 1000, [PRESSURE_CRITICAL] = 3000 },
		.psi_hysteresis_centi = 500,
		.caps = {
			.offload_after_ns = 0,
			.offload_min_budget_ns = 200 * NS_PER_MS,
			.offload_cooldown_ns = 0,
		},
	};
}

const char *pressure_level_name(enum pressure_level l)
{
	return (unsigned int)l < PRESSURE_NR_LEVELS ? level_names[l] : "?";
}

bool pressure_usage_permille(const struct pressure_reading *r, uint32_t *permille)
{
	unsigned __int128 v;

	if (!r->has_usage || !r->limit_bytes)
		return false;
	v = (unsigned __int128)r->usage_bytes * 1000 / r->limit_bytes;
	*permille = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	return true;
}

/*
 * The level one signal asks for: the highest level whose threshold it
 * reached, or, for a level at or below @cur, stayed above the threshold
 * minus the hysteresis.  A threshold of 0 disables that level.
 */
static enum pressure_level signal_level(const uint32_t *thr, uint32_t hyst,
					enum pressure_level cur, uint32_t v)
{
	for (int l = PRESSURE_NR_LEVELS - 1; l > PRESSURE_NORMAL; l--) {
		if (!thr[l])
			continue;
		if (v >= thr[l])
			return (enum pressure_level)l;
		if ((int)cur >= l && (uint64_t)v + hyst > thr[l])
			return (enum pressure_level)l;
	}
	return PRESSURE_NORMAL;
}

enum pressure_level pressure_next_level(const struct pressure_config *cfg,
					enum pressure_level cur,
					const struct pressure_reading *r)
{
	enum pressure_level l = PRESSURE_NORMAL, s;
	uint32_t pm;

	if (pressure_usage_permille(r, &pm)) {
		s = signal_level(cfg->usage_permille, cfg->usage_hysteresis_permille, cur, pm);
		if (s > l)
			l = s;
	}
	if (r->has_psi) {
		s = signal_level(cfg->psi_centi, cfg->psi_hysteresis_centi, cur,
				 r->psi_some_avg10_centi);
		if (s > l)
			l = s;
	}
	return l;
}

const struct coord_pressure_caps *pressure_caps(const struct pressure_config *cfg,
						enum pressure_level level)
{
	return level == PRESSURE_NORMAL ? NULL : &cfg->caps;
}

static int cmp_candidate(const void *pa, const void *pb)
{
	const struct pressure_candidate *a = pa, *b = pb;

	if (a->resident_bytes != b->resident_bytes)
		return a->resident_bytes > b->resident_bytes ? -1 : 1;
	if (a->expected_wait_ns != b->expected_wait_ns)
		return a->expected_wait_ns > b->expected_wait_ns ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

void pressure_order(struct pressure_candidate *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_candidate);
}
