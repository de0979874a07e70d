// SPDX-License-Identifier: GPL-2.0-only
/*
 * util.c - vmnap-gateway's log, clock, response spool and struct xfer.
 *
 * The spool keeps a response's first bytes in memory up to mem_limit; once
 * more arrive before the client took them, they go to an unlinked temp
 * file (O_TMPFILE) in order, and reads drain memory first, then the file.
 * When the file is drained it is truncated and memory is used again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gw.h"
#include "log.h"

enum gw_log_level gw_log_level = GW_INFO;

uint64_t gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same priorities as vmnapd's lines, when stderr is the journal. */
static const char *journal_prefix(enum gw_log_level lvl)
{
	static const char *const prio[] = { "<3>", "<4>", "<6>", "<7>" };

	return log_to_journal() ? prio[lvl] : "";
}

void gw_log(enum gw_log_level lvl, const char *subject, const char *fmt, ...)
{
	static const char *const names[] = { "err", "warn", "info", "debug" };
	char line[1024], msg[1024];
	uint64_t t = gw_now_ns();
	va_list ap;
	int n;

	if (lvl > gw_log_level)
		return;
	n = snprintf(line, sizeof(line), "%s[%llu.%06llu] %s %s: ", journal_prefix(lvl),
		     (unsigned long long)(t / 1000000000ull),
		     (unsigned long long)(t % 1000000000ull / 1000), names[lvl],
		     subject ? subject : "gateway");
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a method or path is the client's: one line of valid UTF-8 whatever
	 * it holds, as vmnapd's log lines */
	log_sanitize(line + n, sizeof(line) - (size_t)n, msg, SIZE_MAX);
	fprintf(stderr, "%s\n", line);
}

bool gw_token_listed(const char *tokens, const char *name, size_t nl)
{
	for (const char *p = tokens; *p;) {
		size_t n;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		n = strcspn(p, " ,\t");
		if (n && n == nl && !strncasecmp(p, name, n))
			return true;
		p += n;
	}
	return false;
}

/* ---- growing text buffer ---- */

void gw_bprintf(struct gw_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		if (n >= 0) {
			char *p = realloc(b->p, b->cap * 2 + (size_t)n + 1);

			if (p) {
				b->p = p;
				b->cap = b->cap * 2 + (size_t)n + 1;
				continue;
			}
		}
		free(b->p);
		b->p = NULL;
		b->oom = true;
		return;
	}
}

/* ---- spool -------------------------------------------------------------- */

void spool_init(struct spool *s, size_t mem_limit, const char *dir)
{
	memset(s, 0, sizeof(*s));
	s->mem_limit = mem_limit;
	s->dir = dir;
	s->fd = -1;
}

static bool file_active(const struct spool *s)
{
	return s->fd >= 0 && s->f_wr > s->f_rd;
}

int spool_append(struct spool *s, const void *p, size_t len)
{
	if (!len)
		return 0;
	if (!file_active(s) && s->mem_len - s->mem_off + len <= s->mem_limit) {
		if (s->mem_off && s->mem_len + len > s->mem_cap) {
			memmove(s->mem, s->mem + s->mem_off, s->mem_len - s->mem_off);
			s->mem_len -= s->mem_off;
			s->mem_off = 0;
		}
		if (s->mem_len + len > s->mem_cap) {
			size_t cap = s->mem_cap ? s->mem_cap : 16384;
			char *m;

			while (cap < s->mem_len + len)
				cap *= 2;
			if (cap > s->mem_limit && s->mem_limit >= s->mem_len + len)
				cap = s->mem_limit;
			m = realloc(s->mem, cap);
			if (!m)
				return -ENOMEM;
			s->mem = m;
			s->mem_cap = cap;
		}
		memcpy(s->mem + s->mem_len, p, len);
		s->mem_len += len;
		s->total_in += len;
		return 0;
	}
	if (s->fd < 0) {
		s->fd = open(s->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (s->fd < 0)
			return -errno;
	}
	for (size_t done = 0; done < len;) {
		ssize_t w = pwrite(s->fd, (const char *)p + done, len - done, s->f_wr + (off_t)done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? -errno : -EIO;

			/* all or nothing: the caller offers these bytes again */
			if (ftruncate(s->fd, s->f_wr))
				return -EIO;
			return err;
		}
		done += (size_t)w;
	}
	s->f_wr += (off_t)len;
	s->total_in += len;
	s->spilled += len;
	return 0;
}

ssize_t spool_read(struct spool *s, void *buf, size_t max)
{
	if (s->mem_len > s->mem_off) {
		size_t n = s->mem_len - s->mem_off;

		if (n > max)
			n = max;
		memcpy(buf, s->mem + s->mem_off, n);
		s->mem_off += n;
		if (s->mem_off == s->mem_len)
			s->mem_off = s->mem_len = 0;
		return (ssize_t)n;
	}
	if (file_active(s)) {
		size_t n = (size_t)(s->f_wr - s->f_rd);
		ssize_t r;

		if (n > max)
			n = max;
		do
			r = pread(s->fd, buf, n, s->f_rd);
		while (r < 0 && errno == EINTR);
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		s->f_rd += r;
		if (s->f_rd == s->f_wr) {
			s->f_rd = s->f_wr = 0;
			if (ftruncate(s->fd, 0))
				return -EIO;
		}
		return r;
	}
	return 0;
}

uint64_t spool_pending(const struct spool *s)
{
	return (uint64_t)(s->mem_len - s->mem_off) + (uint64_t)(s->fd >= 0 ? s->f_wr - s->f_rd : 0);
}

void spool_free(struct spool *s)
{
	free(s->mem);
	if (s->fd >= 0)
		close(s->fd);
	spool_init(s, s->mem_limit, s->dir);
}

/* ---- xfer --------------------------------------------------------------- */

struct xfer *xfer_new(struct listener *l)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (x->efd < 0) {
		free(x);
		return NULL;
	}
	pthread_mutex_init(&x->mu, NULL);
	x->refs = 1;
	x->l = l;
	x->content_length = -1;
	x->resp_tail = &x->resp_headers;
	spool_init(&x->sp, gw_cfg.hold_mem, gw_cfg.spool_dir);
	return x;
}

void xfer_wake(struct xfer *x)
{
	uint64_t one = 1;

	if (write(x->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gw_warn(x->l->vm, "eventfd: %s", strerror(errno));
}

void xfer_put(struct xfer *x)
{
	struct hdr *h, *n;
	int left;

	pthread_mutex_lock(&x->mu);
	left = --x->refs;
	pthread_mutex_unlock(&x->mu);
	if (left)
		return;
	atomic_fetch_add(&x->l->c.spilled_bytes, (unsigned long long)x->sp.spilled);
	for (h = x->resp_headers; h; h = n) {
		n = h->next;
		free(h->name);
		free(h->value);
		free(h);
	}
	curl_slist_free_all(x->req_headers);
	spool_free(&x->sp);
	free(x->method);
	free(x->url);
	free(x->body);
	close(x->efd);
	pthread_mutex_destroy(&x->mu);
	free(x);
}
