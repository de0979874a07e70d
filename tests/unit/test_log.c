// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_log.c - core/log.c: the sanitiser every outside string passes
 * through on its way into a log line or an event, and the rate limiter
 * that bounds log and event volume (fake clock).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "log.h"

#define MS	1000000ULL

static const char *san(const void *s, size_t n)
{
	static char buf[LOG_STR_MAX];

	return log_sanitize(buf, sizeof(buf), s, n);
}

static void test_plain(void **state)
{
	(void)state;
	assert_string_equal(san("0.1.0-unit", SIZE_MAX), "0.1.0-unit");
	assert_string_equal(san("", SIZE_MAX), "");
	assert_string_equal(san(NULL, 4), "(null)");
	/* well-formed UTF-8 stays */
	assert_string_equal(san("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", SIZE_MAX),
			    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* stops at @src_len without a NUL */
	assert_string_equal(san("abcdef", 3), "abc");
}

static void test_controls(void **state)
{
	(void)state;
	assert_string_equal(san("a\nb", SIZE_MAX), "a\\x0ab");
	assert_string_equal(san("x\r\t\x1b[31m\x7f", SIZE_MAX), "x\\x0d\\x09\\x1b[31m\\x7f");
	assert_string_equal(san("back\\slash", SIZE_MAX), "back\\\\slash");
	/* C1 control U+0085 (NEL), line separator, right-to-left override */
	assert_string_equal(san("\xc2\x85", SIZE_MAX), "\\xc2\\x85");
	assert_string_equal(san("\xe2\x80\xa8", SIZE_MAX), "\\xe2\\x80\\xa8");
	assert_string_equal(san("\xe2\x80\xae", SIZE_MAX), "\\xe2\\x80\\xae");
	/* a forged second line cannot start a line */
	assert_null(strchr(san("1.0\n[ 1.0] I vm other: up", SIZE_MAX), '\n'));
}

static void test_invalid_utf8(void **state)
{
	(void)state;
	assert_string_equal(san("\xff\xfe", SIZE_MAX), "\\xff\\xfe");
	assert_string_equal(san("\xc0\xaf", SIZE_MAX), "\\xc0\\xaf");		/* overlong */
	assert_string_equal(san("\xed\xa0\x80", SIZE_MAX), "\\xed\\xa0\\x80");	/* surrogate */
	assert_string_equal(san("\xf4\x90\x80\x80", SIZE_MAX),
			    "\\xf4\\x90\\x80\\x80");				/* > U+10FFFF */
	assert_string_equal(san("\xe2\x82", SIZE_MAX), "\\xe2\\x82");		/* truncated */
	assert_string_equal(san("\xe2\x82\xac", 2), "\\xe2\\x82");		/* cut by len */
	assert_string_equal(san("a\x80z", SIZE_MAX), "a\\x80z");
}

static void test_bounded(void **state)
{
	char big[4096], out[16];
	json_t *j;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(strlen(san(big, SIZE_MAX)), LOG_STR_MAX - 1);
	assert_string_equal(san(big, SIZE_MAX) + LOG_STR_MAX - 4, "...");
	/* exactly fits: no ellipsis */
	assert_string_equal(log_sanitize(out, sizeof(out), "0123456789abcde", SIZE_MAX),
			    "0123456789abcde");
	assert_string_equal(log_sanitize(out, sizeof(out), "0123456789abcdef", SIZE_MAX),
			    "0123456789ab...");
	/* an escape is never cut */
	assert_string_equal(log_sanitize(out, sizeof(out), "0123456789\n\n", SIZE_MAX),
			    "0123456789...");
	/* nor a character */
	assert_string_equal(log_sanitize(out, sizeof(out), "0123456789\xe2\x82\xac\xe2\x82\xac",
					 SIZE_MAX), "0123456789...");
	assert_string_equal(log_sanitize(out, 1, "abc", SIZE_MAX), "");
	assert_string_equal(log_sanitize(out, 3, "abc", SIZE_MAX), "ab");
	/* every byte value, in every position: valid UTF-8 that jansson takes */
	for (unsigned int b = 1; b < 256; b++) {
		char in[8] = { 'a', (char)b, (char)b, 'z', (char)b, 0 };

		j = json_string(san(in, SIZE_MAX));
		assert_non_null(j);
		json_decref(j);
		assert_null(strchr(san(in, SIZE_MAX), '\n'));
	}
	assert_string_equal(LOG_STR("a\nb"), "a\\x0ab");
	assert_string_equal(LOG_STRN("abc\n", 3), "abc");
}

/* Whatever the arguments hold, one log call writes one line. */
static void test_log_one_line(void **state)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	char buf[4096];
	size_t n;
	unsigned int lines = 0;
	json_t *j;

	(void)state;
	assert_non_null(tmp);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
	log_info("vm a\nb", "module %s up", "1.0\n[    1.000000] I vm other: forged\xff");
	log_warn(NULL, "trailing newline\n");
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, sizeof(buf) - 1, tmp);
	fclose(tmp);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	assert_int_equal(lines, 2);
	assert_non_null(strstr(buf, "I vm a\\x0ab: module 1.0\\x0a[    1.000000] I vm other: forged\\xff up\n"));
	assert_non_null(strstr(buf, "W vmnapd: trailing newline\n"));
	j = json_string(buf);	/* valid UTF-8 */
	assert_non_null(j);
	json_decref(j);
}

static void test_ratelimit(void **state)
{
	struct log_ratelimit rl;
	uint64_t t = 1000 * MS, sup = 99;

	(void)state;
	log_ratelimit_init(&rl, 100 * MS, 3, t);	/* burst 3, then 10/s */
	for (int i = 0; i < 3; i++) {
		assert_true(log_ratelimit(&rl, t, &sup));
		assert_int_equal(sup, 0);
	}
	for (int i = 0; i < 1000; i++)
		assert_false(log_ratelimit(&rl, t, &sup));
	assert_int_equal(log_ratelimit_wait_ns(&rl, t), 100 * MS);
	assert_int_equal(log_ratelimit_wait_ns(&rl, t + 40 * MS), 60 * MS);
	t += 99 * MS;
	assert_false(log_ratelimit(&rl, t, &sup));
	t += 1 * MS;
	assert_int_equal(log_ratelimit_wait_ns(&rl, t), 0);
	assert_true(log_ratelimit(&rl, t, &sup));
	assert_int_equal(sup, 1001);	/* the summary the next line carries */
	assert_int_equal(rl.suppressed_total, 1001);
	/* a long quiet time refills only up to the burst */
	t += 3600 * 1000 * MS;
	for (int i = 0; i < 3; i++)
		assert_true(log_ratelimit(&rl, t, &sup));
	assert_false(log_ratelimit(&rl, t, &sup));
	/* a clock that goes backwards gives nothing */
	assert_false(log_ratelimit(&rl, t - 1000 * MS, &sup));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_controls),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_log_one_line),
		cmocka_unit_test(test_ratelimit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
