// SPDX-License-Identifier: GPL-2.0-only
/* test_config.c - the settings file (config.c): example, defaults, errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "pager.h"

#define MS 1000000ull

static char path[] = "/tmp/vmnap-config-XXXXXX";

static int load_text(const char *text, struct vmnapd_settings *s, char *err)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
	return config_load(path, s, err, CONFIG_ERR_LEN);
}

static void test_example_is_the_defaults(void **st)
{
	struct vmnapd_settings s, d;
	char err[CONFIG_ERR_LEN] = "";

	(void)st;
	config_default(&d);
	assert_int_equal(config_load("host-pager/vmnapd.conf.example", &s, err, sizeof(err)), 0);
	assert_memory_equal(&s.coord, &d.coord, sizeof(d.coord));
	assert_memory_equal(&s.pressure, &d.pressure, sizeof(d.pressure));
	assert_true(s.pressure_enabled);
	assert_null(s.pressure_cgroup);
	assert_int_equal(s.pause_timeout_ms, d.pause_timeout_ms);
	assert_int_equal(s.fault_error_timeout_ms, d.fault_error_timeout_ms);
	assert_int_equal(s.fault_around_pages, d.fault_around_pages);
	assert_int_equal(s.fault_around_pages, PAGER_DEFAULT_FAULT_AROUND);
	assert_true(s.critical_resident);
	assert_true(d.critical_resident);
	assert_int_equal(s.tail_resident, PAGER_TAIL_FIRST);
	assert_int_equal(d.tail_resident, PAGER_TAIL_FIRST);
	assert_int_equal(s.follow_pages, d.follow_pages);
	assert_int_equal(s.follow_pages, CONFIG_DEFAULT_FOLLOW);
	assert_int_equal(s.delivery_io_class, d.delivery_io_class);
	assert_int_equal(s.delivery_io_class, PAGER_IO_REALTIME);
	assert_int_equal(s.api_max_body, d.api_max_body);
	assert_int_equal(s.restore, d.restore);
	assert_int_equal(s.restore, PAGER_RESTORE_LAZY);
	assert_string_equal(s.run_dir, "/run/vmnap");
	config_free(&s);
}

static void test_overrides(void **st)
{
	struct vmnapd_settings s;
	char err[CONFIG_ERR_LEN] = "";

	(void)st;
	assert_int_equal(load_text("{\"coordinator\": {\"handoff_delay_ms\": 5, \"kinds\": "
				   "{\"network\": {\"offload\": true}}}}", &s, err), 0);
	assert_int_equal(s.coord.handoff_delay_ns, 5 * MS);
	assert_int_equal(s.coord.offload_after_ns, 50 * MS);
	assert_true(s.coord.kind[COORD_WAIT_NETWORK].may_offload);
	assert_false(s.coord.kind[COORD_WAIT_FILE].may_offload);
	assert_int_equal(s.coord.profile, COORD_PROFILE_COST);
	config_free(&s);
	assert_int_equal(load_text("{\"coordinator\": {\"offload_policy\": \"seed\", "
				   "\"cost_ratio\": 8, \"assumed_write_mib_s\": 100, "
				   "\"prior_wait_ms\": 700, \"wake_probe\": false}}", &s, err), 0);
	assert_int_equal(s.coord.profile, COORD_PROFILE_SEED);
	assert_false(s.coord.wake_probe);
	assert_int_equal(s.coord.cost_ratio, 8);
	assert_int_equal(s.coord.assumed_write_bps, 100ull << 20);
	assert_int_equal(s.coord.prior_wait_ns, 700 * MS);
	config_free(&s);
	assert_int_equal(load_text("{\"fault_error_timeout_ms\": 0}", &s, err), 0);
	assert_int_equal(s.fault_error_timeout_ms, 0);	/* 0: retry for ever */
	assert_int_equal(load_text("{\"fault_around_pages\": 4}", &s, err), 0);
	assert_int_equal(s.fault_around_pages, 4);
	assert_int_equal(load_text("{\"critical_resident\": false}", &s, err), 0);
	assert_false(s.critical_resident);
	assert_int_equal(load_text("{\"tail_resident\": \"always\"}", &s, err), 0);
	assert_int_equal(s.tail_resident, PAGER_TAIL_ALWAYS);
	assert_int_equal(load_text("{\"tail_resident\": \"off\"}", &s, err), 0);
	assert_int_equal(s.tail_resident, PAGER_TAIL_OFF);
	assert_int_equal(load_text("{\"follow_pages\": 0}", &s, err), 0);
	assert_int_equal(s.follow_pages, 0);
	assert_int_equal(load_text("{\"follow_pages\": 64}", &s, err), 0);
	assert_int_equal(s.follow_pages, PAGER_MAX_FOLLOW);
	assert_int_equal(load_text("{\"delivery_io_class\": \"inherit\"}", &s, err), 0);
	assert_int_equal(s.delivery_io_class, PAGER_IO_INHERIT);
	assert_int_equal(load_text("{\"delivery_io_class\": \"realtime\"}", &s, err), 0);
	assert_int_equal(s.delivery_io_class, PAGER_IO_REALTIME);
	assert_int_equal(load_text("{\"restore\": \"eager\"}", &s, err), 0);
	assert_int_equal(s.restore, PAGER_RESTORE_EAGER);
	assert_int_equal(load_text("{\"restore\": \"recurring\"}", &s, err), 0);
	assert_int_equal(s.restore, PAGER_RESTORE_RECURRING);
	config_free(&s);
}

static void test_pressure_keys(void **st)
{
	struct vmnapd_settings s;
	char err[CONFIG_ERR_LEN] = "";

	(void)st;
	assert_int_equal(load_text("{\"pressure\": {\"cgroup\": \"/sys/fs/cgroup/memory/vms\", "
				   "\"psi_critical_pct\": 12.5, \"usage_critical_permille\": 950, "
				   "\"offload_min_budget_ms\": 100, \"enabled\": false}}", &s, err), 0);
	assert_string_equal(s.pressure_cgroup, "/sys/fs/cgroup/memory/vms");
	assert_false(s.pressure_enabled);
	assert_int_equal(s.pressure.psi_centi[PRESSURE_CRITICAL], 1250);
	assert_int_equal(s.pressure.usage_permille[PRESSURE_CRITICAL], 950);
	assert_int_equal(s.pressure.usage_permille[PRESSURE_ELEVATED], 800);
	assert_int_equal(s.pressure.caps.offload_min_budget_ns, 100 * MS);
	config_free(&s);
}

static void test_errors(void **st)
{
	static const char *const bad[] = {
		"{\"coordinator\": {\"handoff_delay\": 5}}",		/* unknown key */
		"{\"coordinator\": {\"handoff_delay_ms\": \"5\"}}",	/* type */
		"{\"coordinator\": {\"handoff_delay_ms\": -1}}",		/* range */
		"{\"coordinator\": {\"kinds\": {\"disk\": {}}}}",	/* kind */
		"{\"coordinator\": {\"kinds\": {\"model\": {\"offload\": 1}}}}",
		"{\"coordinator\": {\"busy_backoff_ms\": 10, \"busy_backoff_max_ms\": 5}}",
		"{\"coordinator\": {\"offload_policy\": \"fast\"}}",	/* profile */
		"{\"coordinator\": {\"offload_policy\": 1}}",
		"{\"coordinator\": {\"restore\": \"all\"}}",
		"{\"coordinator\": {\"cost_ratio\": 0}}",
		"{\"coordinator\": {\"assumed_write_mib_s\": 1.5}}",
		"{\"coordinator\": {\"wake_probe\": 1}}",
		"{\"api\": {\"max_body_bytes\": 10}}",
		"{\"pressure\": {\"cgroup\": 5}}",
		"{\"pressure\": {\"psi_critical_pct\": 101}}",
		"{\"pressure\": {\"usage_elevated_permille\": 950}}",	/* above critical */
		"{\"pressure\": {\"interval_ms\": 1}}",
		"{\"pressure\": {\"bogus\": 1}}",
		"{\"run_dir\": 7}",
		"{\"restore\": \"sometimes\"}",
		"{\"restore\": 1}",
		"{\"fault_around_pages\": 0}",
		"{\"fault_around_pages\": 257}",
		"{\"critical_resident\": 1}",
		"{\"tail_resident\": \"yes\"}",
		"{\"tail_resident\": true}",
		"{\"follow_pages\": 65}",
		"{\"follow_pages\": -1}",
		"{\"follow_pages\": \"16\"}",
		"{\"delivery_io_class\": \"best-effort\"}",
		"{\"delivery_io_class\": \"idle\"}",
		"{\"delivery_io_class\": 1}",
		"{\"bogus\": true}",
		"[1]",
		"{\"a\": 1, \"a\": 2}",
		"{",
	};
	struct vmnapd_settings s;

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[CONFIG_ERR_LEN] = "";

		assert_int_equal(load_text(bad[i], &s, err), -EINVAL);
		assert_true(strlen(err) > 0);
	}
	assert_int_not_equal(config_load("/nonexistent/vmnapd.conf", &s, (char[CONFIG_ERR_LEN]){0},
					 CONFIG_ERR_LEN), 0);
}

static void test_roundtrip(void **st)
{
	struct coord_config a, b;
	char err[CONFIG_ERR_LEN];
	json_t *j;

	(void)st;
	coord_config_default(&a);
	a.max_pause_ns = 1234 * MS;
	a.kind[COORD_WAIT_FILE].may_pause = false;
	a.profile = COORD_PROFILE_SEED;
	a.cost_ratio = 3;
	a.prior_wait_ns = 900 * MS;
	a.wake_probe = false;
	j = config_coord_to_json(&a);
	coord_config_default(&b);
	assert_int_equal(config_coord_from_json(j, &b, err, sizeof(err)), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_example_is_the_defaults),
		cmocka_unit_test(test_pressure_keys),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_roundtrip),
	};
	int fd = mkstemp(path), ret;

	if (fd < 0)
		return 1;
	close(fd);
	cmocka_set_message_output(CM_OUTPUT_TAP);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	return ret;
}
