/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tap.h - TAP output for the C tests, as scripts/check.py reads it (the C
 * counterpart of tap.sh).  Header only, so that in-guest programs link as
 * they are; the counters are per translation unit: one file of a program
 * prints its TAP.
 *
 *   tap(cond, "what %d", x);             "ok N - what" or "not ok N - what"
 *   tap_skip("what", "why %s", y);       "ok N - what # SKIP why"
 *   tap_diag("note %d", z);              "# note"
 *   tap_bail("why");                     "Bail out! why" (then exit non-zero)
 *   return tap_skip_all("why");          "1..0 # SKIP why": the whole test
 *                                        skipped; exit status 0
 *   return tap_done();                   the plan "1..N" last; 1 on failures
 *
 * check.py's protocol: a plan "1..0 # SKIP" with exit status 0 is one skip
 * (any other status adds a failure); a test that prints no TAP at all skips
 * by exiting TAP_SKIP with the reason on its last line.
 */
#ifndef VMNAP_TESTS_TAP_H
#define VMNAP_TESTS_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#define TAP_SKIP	77	/* exit status: skipped (no TAP printed) */

static struct {
	int n;		/* results printed */
	int failed;	/* of which "not ok" */
} tap_state __attribute__((unused));

static inline void tap_vline(const char *lead, const char *fmt, va_list ap)
{
	fputs(lead, stdout);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

static inline bool tap(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline bool tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", ++tap_state.n);
	va_start(ap, fmt);
	tap_vline("", fmt, ap);
	va_end(ap);
	tap_state.failed += !ok;
	return ok;
}

static inline void tap_skip(const char *what, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void tap_skip(const char *what, const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - %s # SKIP ", ++tap_state.n, what);
	va_start(ap, fmt);
	tap_vline("", fmt, ap);
	va_end(ap);
}

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline("# ", fmt, ap);
	va_end(ap);
}

static inline void tap_bail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_bail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline("Bail out! ", fmt, ap);
	va_end(ap);
}

static inline int tap_skip_all(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int tap_skip_all(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline("1..0 # SKIP ", fmt, ap);
	va_end(ap);
	return 0;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_state.n);
	fflush(stdout);
	return tap_state.failed ? 1 : 0;
}

#endif /* VMNAP_TESTS_TAP_H */
