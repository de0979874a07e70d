// SPDX-License-Identifier: GPL-2.0-only
/* pressure_watch.c - host memory pressure drives the coordinators; see
 * pressure_watch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup_pressure.h"
#include "coord.h"
#include "events.h"
#include "log.h"
#include "loop.h"
#include "pager.h"
#include "pressure.h"
#include "pressure_watch.h"

#define MAX_CANDIDATES	1024

struct pressure_watch {
	struct vmnapd *d;
	struct cgroup_pressure *cg;
	struct pressure_config cfg;
	struct loop_timer timer;
	enum pressure_level level;
	bool has_reading;
	struct pressure_reading last;
	uint64_t last_ns;
	int last_err;
	uint64_t samples, read_errors, level_changes, offloads;
};

static json_t *reading_json(const struct pressure_reading *r)
{
	json_t *o = json_object();
	uint32_t pm;

	if (r->has_usage) {
		json_object_set_new(o, "usage_bytes", json_integer((json_int_t)r->usage_bytes));
		json_object_set_new(o, "limit_bytes", r->limit_bytes ?
				    json_integer((json_int_t)r->limit_bytes) : json_null());
		if (pressure_usage_permille(r, &pm))
			json_object_set_new(o, "usage_permille", json_integer(pm));
	}
	if (r->has_psi)
		json_object_set_new(o, "psi_some_avg10_pct",
				    json_real(r->psi_some_avg10_centi / 100.0));
	return o;
}

static void apply_caps(struct pressure_watch *pw, struct vm *vm)
{
	if (vm->coord)
		coord_set_pressure_caps(vm->coord, pressure_caps(&pw->cfg, pw->level));
}

static uint64_t vm_resident(struct vm *vm)
{
	struct pager_stats st;

	if (!vm->pager)
		return 0;
	pager_get_stats(vm->pager, &st);
	return st.resident_bytes;
}

/* CRITICAL: offload the first paused VM in order, one at a time. */
static void offload_step(struct pressure_watch *pw)
{
	struct pressure_candidate cand[MAX_CANDIDATES];
	struct vm *vms[MAX_CANDIDATES];
	size_t n = 0;
	struct vm *vm;

	for (vm = pw->d->vms; vm; vm = vm->next) {
		if (!vm->coord)
			continue;
		if (coord_state(vm->coord) == COORD_OFFLOADING)
			return;
		if (coord_state(vm->coord) != COORD_PAUSED || !vm->pager || n == MAX_CANDIDATES)
			continue;
		vms[n] = vm;
		cand[n] = (struct pressure_candidate){
			.resident_bytes = vm_resident(vm),
			.expected_wait_ns = coord_expected_wait_ns(vm->coord),
			.index = (unsigned int)n,
		};
		n++;
	}
	pressure_order(cand, n);
	for (size_t k = 0; k < n; k++) {
		vm = vms[cand[k].index];
		int ret = coord_pressure_offload(vm->coord);

		if (ret) {
			log_debug(vm->subject, "no offload under memory pressure: %s", strerror(-ret));
			continue;
		}
		pw->offloads++;
		log_info(vm->subject, "memory pressure %s: offloading %llu resident bytes",
			 pressure_level_name(pw->level), (unsigned long long)cand[k].resident_bytes);
		events_emit(pw->d, vm->name, "pressure_offload",
			    json_pack("{s:s,s:I,s:I,s:o}", "level", pressure_level_name(pw->level),
				      "resident_bytes", (json_int_t)cand[k].resident_bytes,
				      "expected_wait_ns", (json_int_t)cand[k].expected_wait_ns,
				      "reading", reading_json(&pw->last)));
		return;
	}
}

static void on_tick(struct loop *l, struct loop_timer *t, void *arg)
{
	struct pressure_watch *pw = arg;
	struct cgroup_pressure_reading cr;
	struct pressure_reading r;
	enum pressure_level next;
	int ret;

	(void)t;
	loop_timer_arm(l, &pw->timer, pw->cfg.interval_ns);
	ret = cgroup_pressure_read(pw->cg, &cr);
	if (ret) {
		pw->read_errors++;
		if (ret != pw->last_err)
			log_warn(NULL, "memory pressure: cannot read %s: %s (the level stays %s)",
				 cgroup_pressure_path(pw->cg), strerror(-ret),
				 pressure_level_name(pw->level));
		pw->last_err = ret;
		return;
	}
	if (pw->last_err)
		log_info(NULL, "memory pressure: %s readable again", cgroup_pressure_path(pw->cg));
	pw->last_err = 0;
	pw->samples++;
	r = (struct pressure_reading){
		.has_psi = cr.has_psi,
		.psi_some_avg10_centi = cr.psi_some_avg10_centi,
		.has_usage = cr.has_usage,
		.usage_bytes = cr.usage_bytes,
		.limit_bytes = cr.limit_bytes,
	};
	pw->last = r;
	pw->has_reading = true;
	pw->last_ns = now_ns();
	next = pressure_next_level(&pw->cfg, pw->level, &r);
	if (next != pw->level) {
		log_info(NULL, "memory pressure: %s -> %s", pressure_level_name(pw->level),
			 pressure_level_name(next));
		events_emit(pw->d, NULL, "pressure",
			    json_pack("{s:s,s:s,s:o}", "from", pressure_level_name(pw->level),
				      "to", pressure_level_name(next), "reading", reading_json(&r)));
		pw->level = next;
		pw->level_changes++;
		for (struct vm *vm = pw->d->vms; vm; vm = vm->next)
			apply_caps(pw, vm);
	}
	if (pw->level == PRESSURE_CRITICAL)
		offload_step(pw);
}

int pressure_watch_start(struct vmnapd *d, const char *cgroup, const struct pressure_config *cfg)
{
	struct pressure_watch *pw;
	int ret;

	if (d->pressure)
		return -EEXIST;
	pw = calloc(1, sizeof(*pw));
	if (!pw)
		return -ENOMEM;
	ret = cgroup_pressure_open(cgroup, &pw->cg);
	if (ret) {
		free(pw);
		return ret;
	}
	pw->d = d;
	pw->cfg = *cfg;
	loop_timer_init(&pw->timer, on_tick, pw);
	d->pressure = pw;
	log_info(NULL, "memory pressure: watching %s (cgroup %s) every %llu ms", cgroup,
		 cgroup_pressure_version(pw->cg),
		 (unsigned long long)(cfg->interval_ns / 1000000));
	loop_timer_arm(d->loop, &pw->timer, 0);
	return 0;
}

void pressure_watch_stop(struct vmnapd *d)
{
	struct pressure_watch *pw = d->pressure;

	if (!pw)
		return;
	loop_timer_cancel(d->loop, &pw->timer);
	cgroup_pressure_close(pw->cg);
	free(pw);
	d->pressure = NULL;
}

void pressure_watch_vm_attached(struct vm *vm)
{
	if (vm->d->pressure)
		apply_caps(vm->d->pressure, vm);
}

bool pressure_watch_status(struct vmnapd *d, struct pressure_watch_status *st)
{
	struct pressure_watch *pw = d->pressure;

	if (!pw)
		return false;
	*st = (struct pressure_watch_status){
		.level = pw->level,
		.has_reading = pw->has_reading && pw->last.has_usage,
		.usage_bytes = pw->last.usage_bytes,
		.limit_bytes = pw->last.limit_bytes,
		.samples = pw->samples,
		.read_errors = pw->read_errors,
		.level_changes = pw->level_changes,
		.offloads = pw->offloads,
	};
	return true;
}

static json_t *pressure_json(struct pressure_watch *pw)
{
	json_t *o;

	if (!pw)
		return json_pack("{s:b}", "enabled", false);
	o = json_pack("{s:b,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "enabled", true,
		      "cgroup", cgroup_pressure_path(pw->cg),
		      "cgroup_version", cgroup_pressure_version(pw->cg),
		      "level", pressure_level_name(pw->level),
		      "samples", (json_int_t)pw->samples,
		      "read_errors", (json_int_t)pw->read_errors,
		      "level_changes", (json_int_t)pw->level_changes,
		      "offloads", (json_int_t)pw->offloads);
	if (pw->has_reading) {
		json_object_set_new(o, "reading", reading_json(&pw->last));
		json_object_set_new(o, "sample_age_ms",
				    json_integer((json_int_t)((now_ns() - pw->last_ns) / 1000000)));
	}
	if (pw->last_err)
		json_object_set_new(o, "error", json_string(strerror(-pw->last_err)));
	return o;
}

json_t *pressure_watch_host_json(struct vmnapd *d)
{
	struct pressure_watch *pw = d->pressure;
	uint64_t resident = 0, reclaimable = 0, expected = 0;
	json_t *o = json_object(), *vms = json_array(), *adm;
	struct host_meminfo mi;
	int ret = host_meminfo_read(&mi);

	for (struct vm *vm = d->vms; vm; vm = vm->next) {
		struct pager_stats st = { 0 };
		enum coord_state s = vm->coord ? coord_state(vm->coord) : COORD_RUNNING;
		uint64_t rec = 0, ret_b = 0;

		if (vm->pager)
			pager_get_stats(vm->pager, &st);
		if (vm->pager && st.evictable && (s == COORD_PAUSED || s == COORD_OFFLOADING))
			rec = st.resident_bytes;
		if (s == COORD_OFFLOADING || s == COORD_OFFLOADED)
			ret_b = st.store_bytes;
		resident += st.resident_bytes;
		reclaimable += rec;
		expected += ret_b;
		json_array_append_new(vms, json_pack("{s:s,s:s,s:I,s:I,s:I}", "name", vm->name,
			"state", vm->coord ? coord_state_name(s) : "UNMANAGED",
			"resident_bytes", (json_int_t)st.resident_bytes,
			"reclaimable_bytes", (json_int_t)rec,
			"expected_return_bytes", (json_int_t)ret_b));
	}
	json_object_set_new(o, "vms", vms);
	json_object_set_new(o, "totals", json_pack("{s:I,s:I,s:I}",
			    "resident_bytes", (json_int_t)resident,
			    "reclaimable_bytes", (json_int_t)reclaimable,
			    "expected_return_bytes", (json_int_t)expected));
	adm = json_object();
	if (ret == 0) {
		json_object_set_new(o, "host", json_pack("{s:I,s:I}",
				    "mem_total_bytes", (json_int_t)mi.total_bytes,
				    "mem_available_bytes", (json_int_t)mi.available_bytes));
		json_object_set_new(adm, "host_headroom_bytes",
				    json_integer((json_int_t)mi.available_bytes +
						 (json_int_t)reclaimable - (json_int_t)expected));
	} else {
		json_object_set_new(o, "host", json_pack("{s:s}", "error", strerror(-ret)));
	}
	if (pw && pw->has_reading && pw->last.has_usage && pw->last.limit_bytes)
		json_object_set_new(adm, "cgroup_headroom_bytes",
				    json_integer((json_int_t)pw->last.limit_bytes -
						 (json_int_t)pw->last.usage_bytes +
						 (json_int_t)reclaimable - (json_int_t)expected));
	json_object_set_new(o, "admission", adm);
	json_object_set_new(o, "pressure", pressure_json(pw));
	return o;
}
