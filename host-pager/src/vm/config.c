// SPDX-License-Identifier: GPL-2.0-only
/* config.c - the settings file; see config.h. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pager.h"
#include "pause.h"

#define NS_PER_MS	1000000ull
#define MAX_MS		(24ull * 3600 * 1000)	/* a day: larger is a typo */

static const struct {
	const char *key;
	size_t off;
} coord_ms_keys[] = {
	{ "handoff_delay_ms", offsetof(struct coord_config, handoff_delay_ns) },
	{ "offload_after_ms", offsetof(struct coord_config, offload_after_ns) },
	{ "offload_min_budget_ms", offsetof(struct coord_config, offload_min_budget_ns) },
	{ "offload_cooldown_ms", offsetof(struct coord_config, offload_cooldown_ns) },
	{ "timer_margin_ms", offsetof(struct coord_config, timer_margin_ns) },
	{ "timer_slack_ms", offsetof(struct coord_config, timer_slack_ns) },
	{ "ack_timeout_ms", offsetof(struct coord_config, ack_timeout_ns) },
	{ "busy_backoff_ms", offsetof(struct coord_config, busy_backoff_ns) },
	{ "busy_backoff_max_ms", offsetof(struct coord_config, busy_backoff_max_ns) },
	{ "max_pause_ms", offsetof(struct coord_config, max_pause_ns) },
	{ "offload_fixed_ms", offsetof(struct coord_config, offload_fixed_ns) },
	{ "prior_wait_ms", offsetof(struct coord_config, prior_wait_ns) },
};
#define MAX_COST_RATIO		1000u
#define MAX_WRITE_MIB_S		(1u << 20)	/* 1 TiB/s */
#define NR_COORD_MS_KEYS (sizeof(coord_ms_keys) / sizeof(coord_ms_keys[0]))

void config_default(struct vmnapd_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->pause_timeout_ms = PAUSE_DEFAULT_TIMEOUT_MS;
	s->fault_error_timeout_ms = PAGER_FAULT_ERROR_TIMEOUT_MS;
	s->fault_around_pages = PAGER_DEFAULT_FAULT_AROUND;
	s->critical_resident = true;
	s->tail_resident = PAGER_TAIL_FIRST;
	s->follow_pages = CONFIG_DEFAULT_FOLLOW;
	s->delivery_io_class = PAGER_IO_REALTIME;
	s->api_max_body = CONFIG_DEFAULT_API_BODY;
	s->api_max_conns = CONFIG_DEFAULT_API_CONNS;
	s->api_conn_timeout_s = CONFIG_DEFAULT_API_TIMEOUT_S;
	coord_config_default(&s->coord);
	s->pressure_enabled = true;
	pressure_config_default(&s->pressure);
	s->restore = PAGER_RESTORE_LAZY;
}

void config_free(struct vmnapd_settings *s)
{
	free(s->run_dir);
	free(s->store_dir);
	free(s->events_path);
	free(s->log_level);
	free(s->pressure_cgroup);
	memset(s, 0, sizeof(*s));
}

static int get_ms(const char *where, const char *key, const json_t *v, uint64_t *out,
		  char *err, size_t n)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > MAX_MS) {
		snprintf(err, n, "%s.%s: want an integer number of ms, 0..%llu", where, key,
			 (unsigned long long)MAX_MS);
		return -EINVAL;
	}
	*out = (uint64_t)json_integer_value(v) * NS_PER_MS;
	return 0;
}

static int get_u32(const char *where, const char *key, const json_t *v, uint32_t min,
		   uint32_t *out, char *err, size_t n)
{
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    json_integer_value(v) > (json_int_t)UINT32_MAX) {
		snprintf(err, n, "%s.%s: want an integer >= %u", where, key, min);
		return -EINVAL;
	}
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

/* @name: the key's full name, for the error */
static int get_bool(const char *name, const json_t *v, bool *out, char *err, size_t n)
{
	if (!json_is_boolean(v)) {
		snprintf(err, n, "%s: want true or false", name);
		return -EINVAL;
	}
	*out = json_is_true(v);
	return 0;
}

static int get_str(const char *key, const json_t *v, char **out, char *err, size_t n)
{
	if (!json_is_string(v) || !json_string_length(v)) {
		snprintf(err, n, "%s: want a non-empty string", key);
		return -EINVAL;
	}
	free(*out);
	*out = strdup(json_string_value(v));
	return *out ? 0 : -ENOMEM;
}

static int kinds_from_json(const json_t *obj, struct coord_config *cfg, char *err, size_t n)
{
	const char *kname, *key;
	json_t *kv, *v;

	if (!json_is_object(obj)) {
		snprintf(err, n, "coordinator.kinds: want an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)obj, kname, kv) {
		int k = coord_wait_kind_parse(kname);

		if (k < 0 || !json_is_object(kv)) {
			snprintf(err, n, "coordinator.kinds.%s: unknown kind (model, network, file)"
				 " or not an object", kname);
			return -EINVAL;
		}
		json_object_foreach(kv, key, v) {
			bool *dst;

			if (!strcmp(key, "pause"))
				dst = &cfg->kind[k].may_pause;
			else if (!strcmp(key, "offload"))
				dst = &cfg->kind[k].may_offload;
			else {
				snprintf(err, n, "coordinator.kinds.%s.%s: unknown key", kname, key);
				return -EINVAL;
			}
			if (!json_is_boolean(v)) {
				snprintf(err, n, "coordinator.kinds.%s.%s: want true or false", kname, key);
				return -EINVAL;
			}
			*dst = json_is_true(v);
		}
	}
	return 0;
}

/* "offload_policy": a name out of @parse's list. */
static int get_name(const char *key, const json_t *v, int (*parse)(const char *),
		    const char *want, int *out, char *err, size_t n)
{
	int x = json_is_string(v) ? parse(json_string_value(v)) : -1;

	if (x < 0) {
		snprintf(err, n, "coordinator.%s: want one of %s", key, want);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static int get_uint(const char *key, const json_t *v, uint32_t max, uint32_t *out,
		    char *err, size_t n)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > (json_int_t)max) {
		snprintf(err, n, "coordinator.%s: want an integer, 1..%u", key, max);
		return -EINVAL;
	}
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

/* The offload policy's keys that are not durations; 1: not one of them. */
static int policy_key_from_json(const char *key, const json_t *v, struct coord_config *c,
				char *err, size_t n)
{
	int x, ret;
	uint32_t u;

	if (!strcmp(key, "offload_policy")) {
		ret = get_name(key, v, coord_profile_parse, "\"cost\", \"seed\"", &x, err, n);
		if (!ret)
			c->profile = (enum coord_profile)x;
	} else if (!strcmp(key, "cost_ratio")) {
		ret = get_uint(key, v, MAX_COST_RATIO, &c->cost_ratio, err, n);
	} else if (!strcmp(key, "assumed_write_mib_s")) {
		ret = get_uint(key, v, MAX_WRITE_MIB_S, &u, err, n);
		if (!ret)
			c->assumed_write_bps = (uint64_t)u << 20;
	} else if (!strcmp(key, "wake_probe")) {
		ret = get_bool("coordinator.wake_probe", v, &c->wake_probe, err, n);
	} else {
		return 1;
	}
	return ret;
}

int config_coord_from_json(const json_t *obj, struct coord_config *cfg, char *err, size_t n)
{
	struct coord_config c = *cfg;
	const char *key;
	json_t *v;
	int ret;

	if (!json_is_object(obj)) {
		snprintf(err, n, "coordinator: want an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)obj, key, v) {
		size_t i;

		if (key[0] == '_')
			continue;	/* "_comment" */
		if (!strcmp(key, "kinds")) {
			ret = kinds_from_json(v, &c, err, n);
			if (ret)
				return ret;
			continue;
		}
		ret = policy_key_from_json(key, v, &c, err, n);
		if (ret <= 0) {
			if (ret)
				return ret;
			continue;
		}
		for (i = 0; i < NR_COORD_MS_KEYS; i++)
			if (!strcmp(key, coord_ms_keys[i].key))
				break;
		if (i == NR_COORD_MS_KEYS) {
			snprintf(err, n, "coordinator.%s: unknown key", key);
			return -EINVAL;
		}
		ret = get_ms("coordinator", key, v,
			     (uint64_t *)((char *)&c + coord_ms_keys[i].off), err, n);
		if (ret)
			return ret;
	}
	if (!c.ack_timeout_ns || !c.busy_backoff_ns || c.busy_backoff_max_ns < c.busy_backoff_ns ||
	    !c.max_pause_ns) {
		snprintf(err, n, "coordinator: ack_timeout_ms, busy_backoff_ms, max_pause_ms must be"
			 " > 0 and busy_backoff_max_ms >= busy_backoff_ms");
		return -EINVAL;
	}
	*cfg = c;
	return 0;
}

json_t *config_coord_to_json(const struct coord_config *cfg)
{
	json_t *o = json_object(), *kinds = json_object();

	for (size_t i = 0; i < NR_COORD_MS_KEYS; i++) {
		uint64_t ns = *(const uint64_t *)((const char *)cfg + coord_ms_keys[i].off);

		json_object_set_new(o, coord_ms_keys[i].key, json_integer((json_int_t)(ns / NS_PER_MS)));
	}
	for (int k = 0; k < COORD_NR_WAIT_KINDS; k++)
		json_object_set_new(kinds, coord_wait_kind_name((enum coord_wait_kind)k),
				    json_pack("{s:b,s:b}", "pause", cfg->kind[k].may_pause,
					      "offload", cfg->kind[k].may_offload));
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(o, "offload_policy", json_string(coord_profile_name(cfg->profile)));
	json_object_set_new(o, "cost_ratio", json_integer(cfg->cost_ratio));
	json_object_set_new(o, "assumed_write_mib_s",
			    json_integer((json_int_t)(cfg->assumed_write_bps >> 20)));
	json_object_set_new(o, "wake_probe", json_boolean(cfg->wake_probe));
	return o;
}

static int api_from_json(const json_t *obj, struct vmnapd_settings *s, char *err, size_t n)
{
	const char *key;
	json_t *v;
	int ret;

	if (!json_is_object(obj)) {
		snprintf(err, n, "api: want an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)obj, key, v) {
		if (key[0] == '_')
			ret = 0;	/* "_comment" */
		else if (!strcmp(key, "max_body_bytes"))
			ret = get_u32("api", key, v, 1024, &s->api_max_body, err, n);
		else if (!strcmp(key, "max_connections"))
			ret = get_u32("api", key, v, 1, &s->api_max_conns, err, n);
		else if (!strcmp(key, "connection_timeout_s"))
			ret = get_u32("api", key, v, 1, &s->api_conn_timeout_s, err, n);
		else {
			snprintf(err, n, "api.%s: unknown key", key);
			ret = -EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* A percentage 0..100 (integer or real) as % x 100. */
static int get_pct(const char *key, const json_t *v, uint32_t *centi, char *err, size_t n)
{
	double d = json_is_number(v) ? json_number_value(v) : -1;

	if (!(d >= 0 && d <= 100)) {
		snprintf(err, n, "pressure.%s: want a number 0..100 (percent)", key);
		return -EINVAL;
	}
	*centi = (uint32_t)(d * 100 + 0.5);
	return 0;
}

int config_pressure_from_json(const json_t *obj, struct vmnapd_settings *s, char *err, size_t n)
{
	struct pressure_config p = s->pressure;
	char *cgroup = NULL;
	bool enabled = s->pressure_enabled, has_cgroup = false;
	const char *key;
	json_t *v;
	int ret = 0;

	if (!json_is_object(obj)) {
		snprintf(err, n, "pressure: want an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)obj, key, v) {
		if (key[0] == '_')
			continue;
		if (!strcmp(key, "cgroup")) {
			has_cgroup = true;
			if (!json_is_null(v))
				ret = get_str("pressure.cgroup", v, &cgroup, err, n);
		} else if (!strcmp(key, "enabled")) {
			ret = get_bool("pressure.enabled", v, &enabled, err, n);
		} else if (!strcmp(key, "interval_ms")) {
			ret = get_ms("pressure", key, v, &p.interval_ns, err, n);
			if (!ret && p.interval_ns < 10 * NS_PER_MS) {
				snprintf(err, n, "pressure.interval_ms: want at least 10");
				ret = -EINVAL;
			}
		} else if (!strcmp(key, "usage_elevated_permille")) {
			ret = get_u32("pressure", key, v, 0, &p.usage_permille[PRESSURE_ELEVATED], err, n);
		} else if (!strcmp(key, "usage_critical_permille")) {
			ret = get_u32("pressure", key, v, 0, &p.usage_permille[PRESSURE_CRITICAL], err, n);
		} else if (!strcmp(key, "usage_hysteresis_permille")) {
			ret = get_u32("pressure", key, v, 0, &p.usage_hysteresis_permille, err, n);
		} else if (!strcmp(key, "psi_elevated_pct")) {
			ret = get_pct(key, v, &p.psi_centi[PRESSURE_ELEVATED], err, n);
		} else if (!strcmp(key, "psi_critical_pct")) {
			ret = get_pct(key, v, &p.psi_centi[PRESSURE_CRITICAL], err, n);
		} else if (!strcmp(key, "psi_hysteresis_pct")) {
			ret = get_pct(key, v, &p.psi_hysteresis_centi, err, n);
		} else if (!strcmp(key, "offload_after_ms")) {
			ret = get_ms("pressure", key, v, &p.caps.offload_after_ns, err, n);
		} else if (!strcmp(key, "offload_min_budget_ms")) {
			ret = get_ms("pressure", key, v, &p.caps.offload_min_budget_ns, err, n);
		} else if (!strcmp(key, "offload_cooldown_ms")) {
			ret = get_ms("pressure", key, v, &p.caps.offload_cooldown_ns, err, n);
		} else {
			snprintf(err, n, "pressure.%s: unknown key", key);
			ret = -EINVAL;
		}
		if (ret)
			goto out;
	}
	if ((p.usage_permille[PRESSURE_ELEVATED] && p.usage_permille[PRESSURE_CRITICAL] &&
	     p.usage_permille[PRESSURE_CRITICAL] < p.usage_permille[PRESSURE_ELEVATED]) ||
	    (p.psi_centi[PRESSURE_ELEVATED] && p.psi_centi[PRESSURE_CRITICAL] &&
	     p.psi_centi[PRESSURE_CRITICAL] < p.psi_centi[PRESSURE_ELEVATED])) {
		snprintf(err, n, "pressure: a critical threshold is below its elevated one");
		ret = -EINVAL;
		goto out;
	}
	s->pressure = p;
	s->pressure_enabled = enabled;
	if (has_cgroup) {
		free(s->pressure_cgroup);
		s->pressure_cgroup = cgroup;
		cgroup = NULL;
	}
out:
	free(cgroup);
	return ret;
}

/* "tail_resident": "off", "first" or "always" (enum pager_tail). */
static int config_tail_from_json(const json_t *v, int *out, char *err, size_t n)
{
	enum pager_tail how;

	if (!json_is_string(v) || pager_tail_parse(json_string_value(v), &how)) {
		snprintf(err, n, "tail_resident: want \"off\", \"first\" or \"always\"");
		return -EINVAL;
	}
	*out = (int)how;
	return 0;
}

/* "delivery_io_class": "realtime" or "inherit". */
static int config_io_class_from_json(const json_t *v, int *out, char *err, size_t n)
{
	enum pager_io_class c;

	if (!json_is_string(v) || pager_io_class_parse(json_string_value(v), &c)) {
		snprintf(err, n, "delivery_io_class: want \"realtime\" or \"inherit\"");
		return -EINVAL;
	}
	*out = (int)c;
	return 0;
}

int config_restore_from_json(const json_t *v, int *out, char *err, size_t n)
{
	enum pager_restore how;

	if (!json_is_string(v) || pager_restore_parse(json_string_value(v), &how)) {
		snprintf(err, n, "restore: want \"eager\", \"working-set\", \"lazy\" or \"recurring\"");
		return -EINVAL;
	}
	*out = how;
	return 0;
}

int config_load(const char *path, struct vmnapd_settings *s, char *err, size_t n)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	int ret = 0;

	config_default(s);
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, n, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, n, "%s: want a JSON object", path);
		json_decref(root);
		return -EINVAL;
	}
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "run_dir"))
			ret = get_str(key, v, &s->run_dir, err, n);
		else if (!strcmp(key, "store_dir"))
			ret = get_str(key, v, &s->store_dir, err, n);
		else if (!strcmp(key, "events"))
			ret = get_str(key, v, &s->events_path, err, n);
		else if (!strcmp(key, "log_level"))
			ret = get_str(key, v, &s->log_level, err, n);
		else if (!strcmp(key, "pause_timeout_ms"))
			ret = get_u32("", key, v, 1, &s->pause_timeout_ms, err, n);
		else if (!strcmp(key, "fault_error_timeout_ms"))
			ret = get_u32("", key, v, 0, &s->fault_error_timeout_ms, err, n);
		else if (!strcmp(key, "fault_around_pages")) {
			ret = get_u32("", key, v, 1, &s->fault_around_pages, err, n);
			if (!ret && s->fault_around_pages > PAGER_MAX_FAULT_AROUND) {
				snprintf(err, n, "%s: want 1 .. %u", key, PAGER_MAX_FAULT_AROUND);
				ret = -EINVAL;
			}
		} else if (!strcmp(key, "follow_pages")) {
			ret = get_u32("", key, v, 0, &s->follow_pages, err, n);
			if (!ret && s->follow_pages > PAGER_MAX_FOLLOW) {
				snprintf(err, n, "%s: want 0 .. %u", key, PAGER_MAX_FOLLOW);
				ret = -EINVAL;
			}
		} else if (!strcmp(key, "critical_resident")) {
			ret = get_bool(key, v, &s->critical_resident, err, n);
		} else if (!strcmp(key, "tail_resident")) {
			ret = config_tail_from_json(v, &s->tail_resident, err, n);
		} else if (!strcmp(key, "delivery_io_class")) {
			ret = config_io_class_from_json(v, &s->delivery_io_class, err, n);
		} else if (!strcmp(key, "api"))
			ret = api_from_json(v, s, err, n);
		else if (!strcmp(key, "coordinator"))
			ret = config_coord_from_json(v, &s->coord, err, n);
		else if (!strcmp(key, "pressure"))
			ret = config_pressure_from_json(v, s, err, n);
		else if (!strcmp(key, "restore"))
			ret = config_restore_from_json(v, &s->restore, err, n);
		else if (key[0] == '_')
			ret = 0;	/* "_comment" and friends */
		else {
			snprintf(err, n, "%s: unknown key", key);
			ret = -EINVAL;
		}
		if (ret)
			break;
	}
	json_decref(root);
	if (ret) {
		char tmp[CONFIG_ERR_LEN];

		snprintf(tmp, sizeof(tmp), "%s: %s", path, err);
		snprintf(err, n, "%s", tmp);
		config_free(s);
	}
	return ret;
}
