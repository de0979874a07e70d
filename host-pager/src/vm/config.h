/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * config.h - vmnapd's settings file (JSON, read with jansson; see
 * host-pager/vmnapd.conf.example for every key and its default).
 *
 *   {
 *     "run_dir": "/run/vmnap", "store_dir": "/var/lib/vmnap",
 *     "events": "/var/log/vmnap/events.jsonl", "log_level": "info",
 *     "pause_timeout_ms": 5000, "fault_error_timeout_ms": 30000,
 *     "fault_around_pages": 16, "critical_resident": true, "tail_resident": "first",
 *     "follow_pages": 16, "delivery_io_class": "realtime",
 *     "api": { "max_body_bytes": 65536, "max_connections": 64,
 *              "connection_timeout_s": 10 },
 *     "coordinator": { "handoff_delay_ms": 20, "offload_after_ms": 50,
 *       "offload_min_budget_ms": 1000, "offload_cooldown_ms": 5000,
 *       "timer_margin_ms": 50, "timer_slack_ms": 100, "ack_timeout_ms": 200,
 *       "busy_backoff_ms": 20, "busy_backoff_max_ms": 1000,
 *       "max_pause_ms": 60000, "wake_probe": true,
 *       "kinds": { "model":   { "pause": true, "offload": true },
 *                  "network": { "pause": true, "offload": false },
 *                  "file":    { "pause": true, "offload": false } } },
 *     "pressure": { "cgroup": null, "enabled": true, "interval_ms": 200,
 *       "usage_elevated_permille": 800, "usage_critical_permille": 900,
 *       "usage_hysteresis_permille": 50, "psi_elevated_pct": 10,
 *       "psi_critical_pct": 30, "psi_hysteresis_pct": 5,
 *       "offload_after_ms": 0, "offload_min_budget_ms": 200,
 *       "offload_cooldown_ms": 0 }
 *   }
 *
 * Unknown keys and wrong types are errors (a typo must not silently keep
 * a default).  Command-line options win over the file.  The "coordinator"
 * object is also what the API accepts as a VM's "policy".
 */
#ifndef VMNAP_CONFIG_H
#define VMNAP_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "coord.h"
#include "pressure.h"

#define CONFIG_ERR_LEN			256
#define CONFIG_DEFAULT_API_BODY		65536
#define CONFIG_DEFAULT_API_CONNS	64
#define CONFIG_DEFAULT_API_TIMEOUT_S	10
#define CONFIG_DEFAULT_FOLLOW		16	/* fault-order prefetch pages */

struct vmnapd_settings {
	char *run_dir, *store_dir, *events_path, *log_level;	/* NULL: unset */
	uint32_t pause_timeout_ms;
	uint32_t fault_error_timeout_ms;	/* pager_config's; 0: never */
	uint32_t fault_around_pages;	/* pager_config's: the window's max */
	bool critical_resident;		/* pager_config's; true */
	int tail_resident;		/* pager_config's (enum pager_tail) */
	uint32_t follow_pages;		/* pager_config's; CONFIG_DEFAULT_FOLLOW */
	int delivery_io_class;		/* pager_config's; realtime */
	uint32_t api_max_body;
	uint32_t api_max_conns;
	uint32_t api_conn_timeout_s;
	struct coord_config coord;
	int restore;			/* enum pager_restore: a VM's default */
	/* memory pressure: on when a cgroup is given and enabled */
	char *pressure_cgroup;		/* NULL: none */
	bool pressure_enabled;		/* true */
	struct pressure_config pressure;
};

void config_default(struct vmnapd_settings *s);
/* Read @path into @s (defaults first).  -errno; @err says what and where. */
int config_load(const char *path, struct vmnapd_settings *s, char *err, size_t errlen);
void config_free(struct vmnapd_settings *s);

/* Apply a "coordinator" object onto @cfg; -EINVAL with @err. */
int config_coord_from_json(const json_t *obj, struct coord_config *cfg,
			   char *err, size_t errlen);
json_t *config_coord_to_json(const struct coord_config *cfg);
/* A "restore" value (enum pager_restore) into *@out; -EINVAL with @err. */
int config_restore_from_json(const json_t *v, int *out, char *err, size_t errlen);
/* Apply a "pressure" object onto @s; -EINVAL with @err. */
int config_pressure_from_json(const json_t *obj, struct vmnapd_settings *s,
			      char *err, size_t errlen);

#endif
