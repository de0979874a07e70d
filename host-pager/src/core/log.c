// SPDX-License-Identifier: GPL-2.0-only
/* log.c - see log.h.  Writes whole lines to stderr with one write(2). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static char *sanitize(char *dst, size_t dst_len, const void *src, size_t src_len,
		      bool backslash);

/*
 * stderr is journald's stream when $JOURNAL_STREAM names its device and
 * inode (systemd sets it for StandardError=journal): each line then starts
 * with "<N>", its syslog priority (sd-daemon(3)), so journalctl -p works.
 * Decided once, at the first line.
 */
bool log_to_journal(void)
{
	static int journal = -1;
	unsigned long long dev, ino;
	const char *e;
	struct stat st;

	if (journal < 0) {
		e = getenv("JOURNAL_STREAM");
		journal = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 &&
			  !fstat(STDERR_FILENO, &st) &&
			  (unsigned long long)st.st_dev == dev &&
			  (unsigned long long)st.st_ino == ino;
	}
	return journal;
}

/*
 * Whatever a caller formats, a log call writes one line of valid UTF-8:
 * the message is passed through the sanitiser (backslashes left alone, so
 * what log_sanitize() escaped is not escaped twice).
 */
void log_vmsg(enum log_level lvl, const char *subject, const char *fmt,
	      va_list ap)
{
	static const char tag[] = "EWID";
	static const char prio[] = "3467";	/* LOG_ERR, WARNING, INFO, DEBUG */
	struct timespec ts;
	char msg[1024], subj[128], line[1024], pfx[4] = "";
	int n, m;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (m < 0)
		m = 0;
	if ((size_t)m >= sizeof(msg))
		m = sizeof(msg) - 1;
	while (m && msg[m - 1] == '\n')	/* libmicrohttpd ends its lines */
		m--;
	msg[m] = '\0';
	sanitize(subj, sizeof(subj), subject ? subject : "vmnapd", SIZE_MAX, false);
	if (log_to_journal()) {
		pfx[0] = '<';
		pfx[1] = prio[lvl];
		pfx[2] = '>';
	}
	n = snprintf(line, sizeof(line), "%s[%5lld.%06ld] %c %s: ", pfx,
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, tag[lvl], subj);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 2)
		n = sizeof(line) - 2;
	sanitize(line + n, sizeof(line) - (size_t)n - 1, msg, (size_t)m, false);
	n += (int)strlen(line + n);
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

/*
 * Length of the well-formed UTF-8 sequence at @s (at most @n bytes), 0 when
 * it is not one (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
 * *@cp gets the code point.
 */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Code points that must not reach a log line as they are. */
static bool cp_unsafe(uint32_t c)
{
	return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) ||
	       c == 0x2028 || c == 0x2029 ||		/* line, paragraph separator */
	       (c >= 0x202a && c <= 0x202e) ||		/* bidi embeddings, overrides */
	       (c >= 0x2066 && c <= 0x2069);		/* bidi isolates */
}

/*
 * The escaped form of the character at @s[0] (NUL-free, @rest readable
 * bytes, 1..4) into @esc (16 bytes); its length.  *@used: bytes of @s taken.
 */
static size_t escape_one(const unsigned char *s, size_t rest, char *esc, size_t *used,
			 bool backslash)
{
	static const char hex[] = "0123456789abcdef";
	size_t seq, n = 0;
	uint32_t cp = 0;

	if (s[0] == '\\' && backslash) {
		*used = 1;
		memcpy(esc, "\\\\", 2);
		return 2;
	}
	seq = utf8_seq(s, rest, &cp);
	if (seq && !cp_unsafe(cp)) {
		*used = seq;
		memcpy(esc, s, seq);
		return seq;
	}
	if (!seq)
		seq = 1;
	for (size_t k = 0; k < seq; k++) {	/* one escape per byte */
		esc[n++] = '\\';
		esc[n++] = 'x';
		esc[n++] = hex[s[k] >> 4];
		esc[n++] = hex[s[k] & 0xf];
	}
	*used = seq;
	return n;
}

/* Readable bytes at @s[@i], at most 4: up to @len or the first NUL. */
static size_t avail(const unsigned char *s, size_t i, size_t len)
{
	size_t r = 0;

	while (r < 4 && i + r < len && s[i + r])
		r++;
	return r;
}

static char *sanitize(char *dst, size_t dst_len, const void *src, size_t src_len,
		      bool backslash)
{
	static const char ellipsis[] = "...";
	const unsigned char *s = src;
	size_t o = 0, i, total = 0, limit;
	char esc[16];
	bool cut;

	if (!dst || !dst_len)
		return dst;
	if (!s) {
		s = (const unsigned char *)"(null)";
		src_len = SIZE_MAX;
	}
	/* does it all fit? */
	for (i = 0; total < dst_len && i < src_len && s[i]; ) {
		size_t used;

		total += escape_one(s + i, avail(s, i, src_len), esc, &used, backslash);
		i += used;
	}
	cut = total >= dst_len;
	limit = dst_len - 1;
	if (cut && limit >= sizeof(ellipsis) - 1)
		limit -= sizeof(ellipsis) - 1;
	for (i = 0; i < src_len && s[i]; ) {
		size_t used, n = escape_one(s + i, avail(s, i, src_len), esc, &used, backslash);

		if (o + n > limit)
			break;
		memcpy(dst + o, esc, n);
		o += n;
		i += used;
	}
	if (cut && o + sizeof(ellipsis) <= dst_len) {
		memcpy(dst + o, ellipsis, sizeof(ellipsis) - 1);
		o += sizeof(ellipsis) - 1;
	}
	dst[o] = '\0';
	return dst;
}

char *log_sanitize(char *dst, size_t dst_len, const void *src, size_t src_len)
{
	return sanitize(dst, dst_len, src, src_len, true);
}

void log_ratelimit_init(struct log_ratelimit *rl, uint64_t interval_ns,
			unsigned int burst, uint64_t now)
{
	memset(rl, 0, sizeof(*rl));
	rl->interval_ns = interval_ns ? interval_ns : 1;
	rl->cap_ns = rl->interval_ns * (burst ? burst : 1);
	rl->credit_ns = rl->cap_ns;
	rl->last_ns = now;
}

static void ratelimit_refill(struct log_ratelimit *rl, uint64_t now)
{
	if (now > rl->last_ns) {
		uint64_t d = now - rl->last_ns;

		rl->credit_ns = d >= rl->cap_ns - rl->credit_ns ? rl->cap_ns :
				rl->credit_ns + d;
	}
	rl->last_ns = now;
}

bool log_ratelimit(struct log_ratelimit *rl, uint64_t now, uint64_t *suppressed)
{
	ratelimit_refill(rl, now);
	if (rl->credit_ns < rl->interval_ns) {
		rl->suppressed++;
		rl->suppressed_total++;
		return false;
	}
	rl->credit_ns -= rl->interval_ns;
	if (suppressed)
		*suppressed = rl->suppressed;
	rl->suppressed = 0;
	return true;
}

uint64_t log_ratelimit_wait_ns(const struct log_ratelimit *rl, uint64_t now)
{
	uint64_t credit = rl->credit_ns;

	if (now > rl->last_ns)
		credit += now - rl->last_ns;
	return credit >= rl->interval_ns ? 0 : rl->interval_ns - credit;
}
