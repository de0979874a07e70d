/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * log.h - vmnapd logging.  One line per event, prefixed with a monotonic
 * timestamp, the level and a subject (usually "vm <name>") so that a
 * reader can follow one VM through the log with grep.
 */
#ifndef VMNAP_LOG_H
#define VMNAP_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/*
 * Strings from outside (the guest, a VMM, an API client) go into log lines
 * and events only through log_sanitize().  It copies at most @src_len bytes
 * of @src (less when a NUL comes first) into @dst: printable ASCII and
 * well-formed UTF-8 stay as they are; control characters (C0, DEL, C1),
 * the Unicode line and paragraph separators and the bidirectional
 * overrides, and every byte that is not part of well-formed UTF-8
 * (overlong forms, surrogates, beyond U+10FFFF, truncated sequences) are
 * written as \xNN, and a backslash as \\.  The result is always
 * NUL-terminated valid UTF-8 of at most @dst_len - 1 bytes, one line; when
 * it does not fit it ends with "..." (an escape or a character is never
 * cut).  Returns @dst (NULL @src: "(null)").
 */
#define LOG_STR_MAX	256	/* bytes of LOG_STR()'s buffer, with the NUL */
char *log_sanitize(char *dst, size_t dst_len, const void *src, size_t src_len);
/*
 * Whether stderr is journald's stream ($JOURNAL_STREAM names its device
 * and inode): lines then start with "<N>", their syslog priority.
 * Decided once.
 */
bool log_to_journal(void);
/* A sanitised copy of NUL-terminated @s for one printf argument; the buffer
 * lives until the end of the enclosing block. */
#define LOG_STR(s)	log_sanitize((char[LOG_STR_MAX]){ 0 }, LOG_STR_MAX, (s), SIZE_MAX)
/* The same for a fixed-size field that need not be NUL-terminated. */
#define LOG_STRN(s, n)	log_sanitize((char[LOG_STR_MAX]){ 0 }, LOG_STR_MAX, (s), (n))

/*
 * A token bucket for log lines and events of one source (e.g. one VM's
 * guest link): @burst lines at once, then one every @interval_ns.  What
 * does not pass is counted, so the next line that passes can say how many
 * were suppressed.  Times are the caller's clock (ns, monotonic).
 */
struct log_ratelimit {
	uint64_t interval_ns, cap_ns, credit_ns, last_ns;
	uint64_t suppressed;		/* since the last line that passed */
	uint64_t suppressed_total;
};

void log_ratelimit_init(struct log_ratelimit *rl, uint64_t interval_ns,
			unsigned int burst, uint64_t now);
/*
 * true: emit the line; *@suppressed (may be NULL) then gets the number of
 * lines suppressed since the last one that passed, and the count restarts.
 * false: suppress it (counted).
 */
bool log_ratelimit(struct log_ratelimit *rl, uint64_t now, uint64_t *suppressed);
/* ns from @now until a line would pass (0: now). */
uint64_t log_ratelimit_wait_ns(const struct log_ratelimit *rl, uint64_t now);

#endif
