// SPDX-License-Identifier: GPL-2.0-only
/*
 * doorbell.c - ring the guest module's doorbell; see doorbell.h.
 *
 * A ring is one non-blocking stream socket on the loop:
 *   hybrid  connect to "<uds>" (a unix connect completes at once or
 *           fails), send "CONNECT <port>\n", read the reply line: "OK ..."
 *           is answered, EOF before it is refused (the VMM got an RST:
 *           nothing listens on that guest port), anything else failed;
 *   vsock   connect to (CID, port), EINPROGRESS, wait for writable: no
 *           error is answered, ECONNRESET or ECONNREFUSED refused.
 * The reply is read a byte at a time into a bounded buffer, so a VMM that
 * sends garbage or never a newline costs at most that buffer.
 */
#include <errno.h>
#include <linux/vm_sockets.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "doorbell.h"
#include "log.h"
#include "loop.h"
#include "usock.h"
#include "uapi/vmnap.h"

#define NSEC_PER_MSEC		1000000ULL
#define DOORBELL_REPLY_MAX	32U

/* BELL_NO_VMM: failed, as the VMM's socket is not there (yet): no warning */
enum bell_outcome { BELL_ANSWERED, BELL_REFUSED, BELL_FAILED, BELL_NO_VMM, BELL_TIMEOUT };

static const char *const outcome_names[] = {
	[BELL_ANSWERED] = "answered",
	[BELL_REFUSED] = "refused",
	[BELL_FAILED] = "failed",
	[BELL_NO_VMM] = "failed",
	[BELL_TIMEOUT] = "timeout",
};

struct guest_doorbell {
	struct vm *vm;
	int fd;				/* the ring in flight, -1: none */
	bool hybrid;			/* else AF_VSOCK */
	char what[128];			/* "<uds>" or "vsock CID n", for logs */
	char reply[DOORBELL_REPLY_MAX];
	size_t reply_len;
	struct loop_timer timer;
	struct guest_doorbell_stats st;
};

static void bell_timeout(struct loop *l, struct loop_timer *t, void *arg);

static struct guest_doorbell *bell_get(struct vm *vm)
{
	struct guest_doorbell *b = vm->doorbell;

	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->vm = vm;
	b->fd = -1;
	loop_timer_init(&b->timer, bell_timeout, b);
	vm->doorbell = b;
	return b;
}

static void bell_close(struct guest_doorbell *b)
{
	if (b->fd < 0)
		return;
	loop_del_fd(b->vm->d->loop, b->fd);
	close(b->fd);
	b->fd = -1;
	loop_timer_cancel(b->vm->d->loop, &b->timer);
}

static void bell_done(struct guest_doorbell *b, enum bell_outcome o, const char *why)
{
	const char *subject = b->vm->subject;

	bell_close(b);
	b->st.last = outcome_names[o];
	switch (o) {
	case BELL_ANSWERED:
		b->st.answered++;
		log_info(subject, "guest doorbell via %s answered: the module connects now",
			 b->what);
		break;
	case BELL_REFUSED:
		b->st.refused++;
		log_info(subject, "guest doorbell via %s: nothing listens on guest port %u "
			 "(module not loaded yet, or without a doorbell); it connects when it "
			 "loads or at its next retry", b->what, VMNAP_DOORBELL_PORT);
		break;
	case BELL_FAILED:
		b->st.failed++;
		log_warn(subject, "guest doorbell via %s: %s; the module connects at its "
			 "next retry", b->what, why);
		break;
	case BELL_NO_VMM:
		b->st.failed++;
		log_info(subject, "guest doorbell via %s: %s (VMM not started yet?); the "
			 "module connects when it loads or at its next retry", b->what, why);
		break;
	case BELL_TIMEOUT:
		/* a guest still booting or paused: not an error */
		b->st.timeouts++;
		log_info(subject, "guest doorbell via %s: no answer in %u ms (guest not "
			 "running yet?); the module connects when it loads or at its next retry",
			 b->what, GUEST_DOORBELL_TIMEOUT_MS);
		break;
	}
}

static void bell_timeout(struct loop *l, struct loop_timer *t, void *arg)
{
	(void)l;
	(void)t;
	bell_done(arg, BELL_TIMEOUT, NULL);
}

/* @step failed with errno @err: outcome @o (FAILED or NO_VMM); -@err. */
static int bell_fail(struct guest_doorbell *b, enum bell_outcome o, const char *step, int err)
{
	char why[96];

	snprintf(why, sizeof(why), "%s: %s", step, strerror(err));
	bell_done(b, o, why);
	return -err;
}

/* A vsock connect ended with errno @err (0: connected); -errno if failed. */
static int vsock_connected(struct guest_doorbell *b, int err)
{
	if (err && err != ECONNRESET && err != ECONNREFUSED)
		return bell_fail(b, BELL_FAILED, "connect", err);
	bell_done(b, err ? BELL_REFUSED : BELL_ANSWERED, NULL);
	return 0;
}

/* The VMM's reply to our CONNECT line, one byte at a time. */
static void hybrid_readable(struct guest_doorbell *b)
{
	for (;;) {
		char ch;
		ssize_t n = recv(b->fd, &ch, 1, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0 && errno != ECONNRESET) {
			bell_fail(b, BELL_FAILED, "reading the reply", errno);
			return;
		}
		if (n <= 0) {
			/* closed before a reply line: the guest reset the stream */
			bell_done(b, b->reply_len ? BELL_FAILED : BELL_REFUSED,
				  "the reply ended without a newline");
			return;
		}
		if (ch != '\n') {
			if (b->reply_len + 1 >= sizeof(b->reply)) {
				bell_done(b, BELL_FAILED, "the reply line is too long");
				return;
			}
			b->reply[b->reply_len++] = ch;
			continue;
		}
		b->reply[b->reply_len] = '\0';
		if (!strncmp(b->reply, "OK ", 3))
			bell_done(b, BELL_ANSWERED, NULL);
		else
			bell_done(b, BELL_FAILED, "the reply is not \"OK <port>\"");
		return;
	}
}

static void vsock_writable(struct guest_doorbell *b)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	(void)vsock_connected(b, err);
}

static void on_bell_fd(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct guest_doorbell *b = arg;

	(void)l;
	(void)fd;
	if (b->hybrid)
		hybrid_readable(b);
	else if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
		vsock_writable(b);
}

/* Start watching the ring's socket (b->fd) for @events. */
static int bell_watch(struct guest_doorbell *b, uint32_t events)
{
	int err = loop_add_fd(b->vm->d->loop, b->fd, events, on_bell_fd, b);

	if (err)
		return bell_fail(b, BELL_FAILED, "cannot watch the socket", -err);
	loop_timer_arm(b->vm->d->loop, &b->timer, GUEST_DOORBELL_TIMEOUT_MS * NSEC_PER_MSEC);
	return 0;
}

/* A ring starts: drop the one in flight; NULL when out of memory. */
static struct guest_doorbell *bell_start(struct vm *vm, bool hybrid)
{
	struct guest_doorbell *b = bell_get(vm);

	if (!b) {
		log_warn(vm->subject, "guest doorbell: out of memory");
		return NULL;
	}
	bell_close(b);
	b->hybrid = hybrid;
	b->reply_len = 0;
	b->st.rings++;
	return b;
}

int guest_doorbell_ring_hybrid(struct vm *vm, const char *uds)
{
	struct guest_doorbell *b;
	char line[sizeof("CONNECT 4294967295\n")];
	int n, fd;
	ssize_t w;

	if (!uds || !uds[0])
		return -EINVAL;
	b = bell_start(vm, true);
	if (!b)
		return -ENOMEM;
	snprintf(b->what, sizeof(b->what), "%s", uds);
	fd = usock_connect(uds, true);
	if (fd < 0)	/* not there (yet), or refusing: the VMM is not running */
		return bell_fail(b, fd == -ENOENT || fd == -ECONNREFUSED ? BELL_NO_VMM :
				 BELL_FAILED, "connect", -fd);
	b->fd = fd;	/* from here on bell_done() closes it */
	n = snprintf(line, sizeof(line), "CONNECT %u\n", VMNAP_DOORBELL_PORT);
	/* a fresh unix stream's send buffer holds a line */
	w = send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w != n)
		return bell_fail(b, BELL_FAILED, "send the CONNECT line", w < 0 ? errno : EAGAIN);
	log_debug(vm->subject, "guest doorbell: ringing guest port %u via %s",
		  VMNAP_DOORBELL_PORT, uds);
	return bell_watch(b, EPOLLIN);
}

int guest_doorbell_ring_vsock(struct vm *vm, uint32_t cid)
{
	struct sockaddr_vm sa = {
		.svm_family = AF_VSOCK,
		.svm_cid = cid,
		.svm_port = VMNAP_DOORBELL_PORT,
	};
	struct guest_doorbell *b = bell_start(vm, false);
	int fd, err;

	if (!b)
		return -ENOMEM;
	snprintf(b->what, sizeof(b->what), "vsock CID %u", cid);
	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return bell_fail(b, BELL_FAILED, "AF_VSOCK socket", errno);
	b->fd = fd;	/* from here on bell_done() closes it */
	err = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
	if (err != EINPROGRESS)	/* settled at once: connected, reset or failed */
		return vsock_connected(b, err);
	log_debug(vm->subject, "guest doorbell: ringing guest port %u via %s",
		  VMNAP_DOORBELL_PORT, b->what);
	return bell_watch(b, EPOLLOUT);
}

void guest_doorbell_vm_detach(struct vm *vm)
{
	struct guest_doorbell *b = vm->doorbell;

	if (!b)
		return;
	bell_close(b);
	free(b);
	vm->doorbell = NULL;
}

void guest_doorbell_get_stats(const struct vm *vm, struct guest_doorbell_stats *st)
{
	if (vm->doorbell)
		*st = vm->doorbell->st;
	else
		memset(st, 0, sizeof(*st));
}
