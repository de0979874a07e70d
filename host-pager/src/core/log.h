/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * log.h - vmnapd logging.  One line per event, prefixed with a monotonic
 * timestamp, the level and a subject (usually "vm <name>") so that a
 * reader can follow one VM through the log with grep.
 */
#ifndef VMNAP_LOG_H
#define VMNAP_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above this level are dropped (default LOG_INFO). */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Parse "err", "warn", "info", "debug"; -1 when unknown. */
int log_level_parse(const char *s);

void log_msg(enum log_level lvl, const char *subject, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_vmsg(enum log_level lvl, const char *subject, const char *fmt,
	      va_list ap) __attribute__((format(printf, 3, 0)));

#define log_err(subj, ...)	log_msg(LOG_ERR, subj, __VA_ARGS__)
#define log_warn(subj, ...)	log_msg(LOG_WARN, subj, __VA_ARGS__)
#define log_info(subj, ...)	log_msg(LOG_INFO, subj, __VA_ARGS__)
#define log_debug(subj, ...)					\
	do {							\
		if (log_get_level() >= LOG_DEBUG)		\
			log_msg(LOG_DEBUG, subj, __VA_ARGS__);	\
	} while (0)

#endif
