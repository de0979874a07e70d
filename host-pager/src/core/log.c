// SPDX-License-Identifier: GPL-2.0-only
/* log.c - see log.h.  Writes whole lines to stderr with one write(2). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static enum log_level log_level = LOG_INFO;	/* set once at start-up */

void log_set_level(enum log_level lvl) { log_level = lvl; }
enum log_level log_get_level(void) { return log_level; }

int log_level_parse(const char *s)
{
	static const char *const names[] = { "err", "warn", "info", "debug" };

	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -1;
}

void log_vmsg(enum log_level lvl, const char *subject, const char *fmt,
	      va_list ap)
{
	static const char tag[] = "EWID";
	struct timespec ts;
	char line[1024];
	int n, m;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(line, sizeof(line), "[%5lld.%06ld] %c %s: ",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, tag[lvl],
		     subject ? subject : "vmnapd");
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 2)
		n = sizeof(line) - 2;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}

void log_msg(enum log_level lvl, const char *subject, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(lvl, subject, fmt, ap);
	va_end(ap);
}
