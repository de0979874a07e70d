// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_cgroup_pressure.c - the cgroup memory readings (vmm/cgroup_pressure.c)
 * over a directory of files shaped like cgroupfs: v2 with and without PSI
 * and a limit, v1 with the kernel's "no limit", and files that do not
 * parse.
 */
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

#include "cgroup_pressure.h"

static char dir[] = "/tmp/vmnap-cgp-XXXXXX";

static void put(const char *name, const char *text)
{
	char p[128];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!text) {
		unlink(p);
		return;
	}
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void clear(void)
{
	put("memory.current", NULL);
	put("memory.max", NULL);
	put("memory.pressure", NULL);
	put("memory.usage_in_bytes", NULL);
	put("memory.limit_in_bytes", NULL);
}

static int setup(void **s)
{
	(void)s;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s)
{
	(void)s;
	clear();
	return rmdir(dir);
}

static void test_v2(void **s)
{
	struct cgroup_pressure *cp;
	struct cgroup_pressure_reading r;

	(void)s;
	clear();
	put("memory.current", "1048576\n");
	put("memory.max", "max\n");
	put("memory.pressure", "some avg10=12.34 avg60=1.00 avg300=0.00 total=5\n"
			       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	assert_int_equal(cgroup_pressure_open(dir, &cp), 0);
	assert_string_equal(cgroup_pressure_version(cp), "v2");
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_true(r.has_usage);
	assert_int_equal(r.usage_bytes, 1048576);
	assert_int_equal(r.limit_bytes, 0);	/* "max" */
	assert_true(r.has_psi);
	assert_int_equal(r.psi_some_avg10_centi, 1234);
	/* files are read again on every call (pread at 0) */
	put("memory.max", "2097152\n");
	put("memory.pressure", "some avg10=100.00 avg60=0 avg300=0 total=0\n");
	cgroup_pressure_close(cp);
	assert_int_equal(cgroup_pressure_open(dir, &cp), 0);
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_int_equal(r.limit_bytes, 2097152);
	assert_int_equal(r.psi_some_avg10_centi, 10000);
	/* a PSI line that does not parse: no PSI, the usage still counts */
	put("memory.pressure", "some avg10=abc\n");
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_false(r.has_psi);
	assert_true(r.has_usage);
	put("memory.pressure", "some avg10=101.5 avg60=0\n");	/* over 100 % */
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_false(r.has_psi);
	put("memory.pressure", "some avg10=7.5\n");	/* one decimal */
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_true(r.has_psi);
	assert_int_equal(r.psi_some_avg10_centi, 750);
	/* a usage that does not parse is an error, not a zero */
	put("memory.current", "lots\n");
	assert_int_equal(cgroup_pressure_read(cp, &r), -EPROTO);
	put("memory.current", "");
	assert_int_equal(cgroup_pressure_read(cp, &r), -EPROTO);
	put("memory.current", "99999999999999999999999\n");	/* overflows u64 */
	assert_int_equal(cgroup_pressure_read(cp, &r), -EPROTO);
	cgroup_pressure_close(cp);
}

static void test_v2_without_psi(void **s)
{
	struct cgroup_pressure *cp;
	struct cgroup_pressure_reading r;

	(void)s;
	clear();
	put("memory.current", "4096\n");
	put("memory.max", "8192\n");
	assert_int_equal(cgroup_pressure_open(dir, &cp), 0);
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_false(r.has_psi);
	assert_int_equal(r.limit_bytes, 8192);
	cgroup_pressure_close(cp);
}

static void test_v1(void **s)
{
	struct cgroup_pressure *cp;
	struct cgroup_pressure_reading r;

	(void)s;
	clear();
	put("memory.usage_in_bytes", "7835193344\n");
	put("memory.limit_in_bytes", "9223372036854771712\n");	/* the kernel's "none" */
	assert_int_equal(cgroup_pressure_open(dir, &cp), 0);
	assert_string_equal(cgroup_pressure_version(cp), "v1");
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_int_equal(r.usage_bytes, 7835193344ull);
	assert_int_equal(r.limit_bytes, 0);
	assert_false(r.has_psi);
	put("memory.limit_in_bytes", "8589934592\n");
	assert_int_equal(cgroup_pressure_read(cp, &r), 0);
	assert_int_equal(r.limit_bytes, 8589934592ull);
	put("memory.limit_in_bytes", "max\n");	/* v2 spelling: not v1 */
	assert_int_equal(cgroup_pressure_read(cp, &r), -EPROTO);
	cgroup_pressure_close(cp);
}

static void test_not_a_memory_cgroup(void **s)
{
	struct cgroup_pressure *cp = NULL;
	struct host_meminfo mi;

	(void)s;
	clear();
	assert_int_equal(cgroup_pressure_open(dir, &cp), -ENOENT);
	assert_null(cp);
	put("memory.current", "1\n");	/* v2 without memory.max */
	assert_int_equal(cgroup_pressure_open(dir, &cp), -ENOENT);
	assert_int_equal(host_meminfo_read(&mi), 0);
	assert_true(mi.total_bytes > 0 && mi.available_bytes <= mi.total_bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v2_without_psi),
		cmocka_unit_test(test_v1),
		cmocka_unit_test(test_not_a_memory_cgroup),
	};

	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, setup, teardown);
}
