// SPDX-License-Identifier: GPL-2.0-only
/*
 * loop_slow.c - the event loop names every callback that runs longer than
 * LOOP_SLOW_NS (TAP).  A timer callback and an fd callback that each sleep
 * twice that long must both be logged, with their names, and counted.
 * vmnapd's log goes to stderr: it is captured in a temporary file here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "tap.h"

static void sleep_slow(void)
{
	const struct timespec ts = { .tv_nsec = (long)(2 * LOOP_SLOW_NS) };

	nanosleep(&ts, NULL);
}

static void slow_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	uint64_t one = 1;

	(void)l;
	(void)t;
	sleep_slow();
	if (write(*(int *)arg, &one, sizeof(one)) != sizeof(one))
		tap_diag("eventfd write failed");
}

static void slow_fd(struct loop *l, int fd, uint32_t events, void *arg)
{
	uint64_t v;

	(void)events;
	(void)arg;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		tap_diag("eventfd read failed");
	sleep_slow();
	loop_stop(l);
}

static void give_up(struct loop *l, struct loop_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	tap_diag("the loop did not stop by itself");
	loop_stop(l);
}

int main(void)
{
	char path[] = "/tmp/vmnap-loop-slow.XXXXXX";
	struct loop_timer t, guard;
	struct loop *l = loop_new();
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int logfd = mkstemp(path), saved = dup(STDERR_FILENO);
	char buf[4096] = "";
	ssize_t n;

	if (!l || efd < 0 || logfd < 0 || saved < 0)
		tap_bail("set-up failed");
	unlink(path);
	loop_timer_init(&t, slow_timer, &efd);
	loop_timer_init(&guard, give_up, NULL);
	tap(loop_add_fd(l, efd, EPOLLIN, slow_fd, NULL) == 0, "eventfd watched");
	loop_timer_arm(l, &t, 0);
	loop_timer_arm(l, &guard, 10000 * 1000000ull);

	dup2(logfd, STDERR_FILENO);	/* vmnapd's log lines, captured */
	loop_run(l);
	dup2(saved, STDERR_FILENO);

	n = pread(logfd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		tap_diag("log: %s", line);
	n = pread(logfd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	tap(strstr(buf, "timer callback tests/integration/loop_slow.c:slow_timer ran") != NULL,
	    "a slow timer callback is logged with its name");
	tap(strstr(buf, "fd callback tests/integration/loop_slow.c:slow_fd ran") != NULL,
	    "a slow fd callback is logged with its name");
	tap(loop_slow_callbacks(l) >= 2, "both are counted (%llu)",
	    (unsigned long long)loop_slow_callbacks(l));
	loop_timer_cancel(l, &guard);
	loop_del_fd(l, efd);
	loop_free(l);
	close(efd);
	close(logfd);
	return tap_done();
}
