// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_time.c - the guest's clocks as the host sees them, for
 * tests/e2e/guest_time.sh.  Runs in the guest on a line channel (the
 * host's --ctl socket, the guest's /dev/ttyS1), set raw (no echo):
 *
 *   guest_time DEV
 *
 * Host -> guest lines:
 *   Q            answer "T <CLOCK_REALTIME ns> <CLOCK_MONOTONIC ns>"
 *   P <ms>       start a periodic CLOCK_MONOTONIC timer (timerfd) of <ms>;
 *                every expiry is answered "K <n> <overruns> <MONOTONIC ns>"
 *                at once (0: stop it)
 *   X            exit
 *
 * The host timestamps the answers: a query's round trip bounds the
 * wall-clock offset it measures, and the tick lines' arrival times show
 * how late the guest's timer fired on the host's clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_LEN	128

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int say(int fd, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -1;
	return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

static int set_period(int tfd, unsigned long ms)
{
	struct itimerspec its = { 0 };

	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	its.it_interval = its.it_value;
	return timerfd_settime(tfd, 0, &its, NULL);
}

int main(int argc, char **argv)
{
	char line[LINE_MAX_LEN];
	size_t len = 0;
	uint64_t ticks = 0;
	struct termios tio;
	int fd, tfd;

	if (argc != 2) {
		fprintf(stderr, "usage: guest_time DEV\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	if (tcgetattr(fd, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(fd, TCSANOW, &tio);
	}
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (tfd < 0) {
		perror("timerfd_create");
		return 1;
	}
	say(fd, "READY\n");
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = tfd, .events = POLLIN } };
		ssize_t r;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("poll");
			return 1;
		}
		if (p[1].revents & POLLIN) {
			uint64_t exp = 0;

			if (read(tfd, &exp, sizeof(exp)) == sizeof(exp) && exp) {
				ticks += exp;
				say(fd, "K %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", ticks, exp - 1,
				    clock_ns(CLOCK_MONOTONIC));
			}
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = read(fd, line + len, sizeof(line) - 1 - len);
		if (r <= 0) {
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return r < 0 ? 1 : 0;
		}
		len += (size_t)r;
		for (;;) {
			char *nl = memchr(line, '\n', len);
			size_t n;

			if (!nl) {
				if (len == sizeof(line) - 1)
					len = 0;	/* overlong: drop it */
				break;
			}
			*nl = '\0';
			n = (size_t)(nl - line) + 1;
			if (line[0] == 'Q') {
				uint64_t rt = clock_ns(CLOCK_REALTIME);

				say(fd, "T %" PRIu64 " %" PRIu64 "\n", rt, clock_ns(CLOCK_MONOTONIC));
			} else if (line[0] == 'P') {
				unsigned long ms = strtoul(line + 1, NULL, 10);

				ticks = 0;
				if (set_period(tfd, ms) < 0)
					say(fd, "E %d\n", errno);
				else
					say(fd, "OK\n");
			} else if (line[0] == 'X') {
				say(fd, "BYE\n");
				return 0;
			}
			memmove(line, line + n, len - n);
			len -= n;
		}
	}
}
