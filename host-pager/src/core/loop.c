// SPDX-License-Identifier: GPL-2.0-only
/*
 * loop.c - see loop.h.
 *
 * Timers are a singly linked list sorted by deadline: O(n) to arm, O(1) to
 * find the next.  vmnapd has a handful of timers per VM, fine for that.
 * fd registrations live in a table indexed by fd, so a callback can delete
 * any fd (its own included) and a stale epoll event for it is ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"

#define LOOP_MAX_EVENTS 64
#define LOOP_SLOW_LOG_NS	1000000000ull	/* slow-callback lines: window */
#define LOOP_SLOW_LOG_MAX	10		/* ... and lines per window */

struct loop_fd {
	loop_fd_cb cb;
	void *arg;
	const char *name;
	uint64_t gen;		/* changes on every add: detects stale events */
};

struct loop {
	int epfd;
	bool stop;
	struct loop_fd *fds;	/* indexed by fd */
	size_t nfds;
	uint64_t gen;
	struct loop_timer *timers;
	uint64_t slow, slow_window_ns, slow_suppressed;
	unsigned int slow_logged;	/* lines in the current window */
};

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l->fds);
	free(l);
}

static int loop_grow(struct loop *l, int fd)
{
	size_t n = l->nfds ? l->nfds : 64;
	struct loop_fd *p;

	while (n <= (size_t)fd)
		n *= 2;
	if (n == l->nfds)
		return 0;
	p = realloc(l->fds, n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p + l->nfds, 0, (n - l->nfds) * sizeof(*p));
	l->fds = p;
	l->nfds = n;
	return 0;
}

int loop_add_fd_named(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *arg,
		      const char *name)
{
	struct epoll_event ev = { .events = events };
	int err;

	if (fd < 0 || !cb)
		return -EINVAL;
	err = loop_grow(l, fd);
	if (err)
		return err;
	if (l->fds[fd].cb)
		return -EEXIST;
	ev.data.u64 = ((uint64_t)++l->gen << 32) | (uint32_t)fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	l->fds[fd] = (struct loop_fd){ .cb = cb, .arg = arg, .name = name, .gen = l->gen };
	return 0;
}

int loop_mod_fd(struct loop *l, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events };

	if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].cb)
		return -ENOENT;
	ev.data.u64 = (l->fds[fd].gen << 32) | (uint32_t)fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void loop_del_fd(struct loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].cb)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->fds[fd] = (struct loop_fd){ 0 };
}

void loop_timer_init_named(struct loop_timer *t, loop_timer_cb cb, void *arg, const char *name)
{
	memset(t, 0, sizeof(*t));
	t->cb = cb;
	t->arg = arg;
	t->name = name;
}

uint64_t loop_slow_callbacks(const struct loop *l)
{
	return l->slow;
}

/* A callback took @ns: count it and say so (at most LOOP_SLOW_LOG_MAX
 * lines a second; the rest are summed up in the next line). */
static void loop_slow(struct loop *l, const char *kind, const char *name, uint64_t ns,
		      uint64_t now)
{
	l->slow++;
	if (now - l->slow_window_ns >= LOOP_SLOW_LOG_NS) {
		l->slow_window_ns = now;
		l->slow_logged = 0;
	}
	if (l->slow_logged >= LOOP_SLOW_LOG_MAX) {
		l->slow_suppressed++;
		return;
	}
	l->slow_logged++;
	log_warn(NULL, "loop: %s callback %s ran %llu.%03llu ms (every other waited)%s",
		 kind, name ? name : "?", (unsigned long long)(ns / 1000000),
		 (unsigned long long)(ns / 1000 % 1000),
		 l->slow_suppressed ? "; more slow callbacks not logged before this" : "");
	l->slow_suppressed = 0;
}

void loop_timer_cancel(struct loop *l, struct loop_timer *t)
{
	struct loop_timer **pp;

	if (!t->armed)
		return;
	for (pp = &l->timers; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	t->next = NULL;
	t->armed = false;
}

void loop_timer_arm_at(struct loop *l, struct loop_timer *t, uint64_t deadline_ns)
{
	struct loop_timer **pp;

	loop_timer_cancel(l, t);
	t->deadline_ns = deadline_ns;
	for (pp = &l->timers; *pp && (*pp)->deadline_ns <= deadline_ns; pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	t->armed = true;
}

void loop_timer_arm(struct loop *l, struct loop_timer *t, uint64_t delay_ns)
{
	loop_timer_arm_at(l, t, now_ns() + delay_ns);
}

/* Fire every timer that is due; return ms until the next, -1 for none. */
static int loop_run_timers(struct loop *l)
{
	uint64_t now = now_ns();
	struct loop_timer *t;

	while ((t = l->timers) && t->deadline_ns <= now) {
		const char *name = t->name;	/* @t may be freed by its callback */
		uint64_t t0 = now_ns();

		l->timers = t->next;
		t->next = NULL;
		t->armed = false;
		t->cb(l, t, t->arg);
		now = now_ns();
		if (now - t0 > LOOP_SLOW_NS)
			loop_slow(l, "timer", name, now - t0, now);
	}
	if (!l->timers)
		return -1;
	/* round up so that a timer never fires early */
	return (int)((l->timers->deadline_ns - now + 999999) / 1000000);
}

int loop_run(struct loop *l)
{
	struct epoll_event evs[LOOP_MAX_EVENTS];

	l->stop = false;
	while (!l->stop) {
		int timeout = loop_run_timers(l);
		int n;

		if (l->stop)
			break;
		n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err(NULL, "epoll_wait: %s", strerror(errno));
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			int fd = (int)(uint32_t)evs[i].data.u64;
			uint64_t gen = evs[i].data.u64 >> 32;
			struct loop_fd *f;

			if ((size_t)fd >= l->nfds)
				continue;
			f = &l->fds[fd];
			if (!f->cb || (f->gen & 0xffffffffu) != gen)
				continue;	/* deleted (or replaced) meanwhile */
			{
				const char *name = f->name;
				uint64_t t0 = now_ns(), t1;

				f->cb(l, fd, evs[i].events, f->arg);	/* may grow l->fds */
				t1 = now_ns();
				if (t1 - t0 > LOOP_SLOW_NS)
					loop_slow(l, "fd", name, t1 - t0, t1);
			}
		}
	}
	return 0;
}

void loop_stop(struct loop *l)
{
	l->stop = true;
}
