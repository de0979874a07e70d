// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_qmp.c - QEMU: "stop" / "cont" over QMP.
 *
 * One connection per call: QEMU's QMP socket serves one client at a time
 * and tests use it too, so vmnapd does not hold it.  The conversation is
 * greeting -> qmp_capabilities -> command; asynchronous event lines
 * ({"event": ...}) are skipped; {"return": ...} is success and
 * {"error": {"class", "desc"}} failure.  Lines are parsed with jansson.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pause.h"

#define NS_PER_MS	1000000ull

struct qmp_conn {
	struct pause_backend *pb;
	int fd;
	uint64_t deadline_ns;
	char buf[PAUSE_REPLY_MAX];
	size_t len;
};

/* Next complete line from QEMU as JSON (caller decrefs); -errno. */
static int qmp_read_json(struct qmp_conn *q, json_t **out)
{
	for (;;) {
		char *nl = memchr(q->buf, '\n', q->len);

		if (nl) {
			size_t n = (size_t)(nl - q->buf) + 1;
			json_error_t jerr;
			json_t *j = json_loadb(q->buf, n, 0, &jerr);

			memmove(q->buf, q->buf + n, q->len - n);
			q->len -= n;
			if (!j || !json_is_object(j)) {
				log_warn(q->pb->subject, "qmp: unparsable line: %s", jerr.text);
				json_decref(j);
				return -EPROTO;
			}
			*out = j;
			return 0;
		}
		if (q->len == sizeof(q->buf))
			return -EMSGSIZE;
		{
			struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
			int ms = pause_ms_left(q->deadline_ns);
			ssize_t r;

			if (!ms || poll(&pfd, 1, ms) == 0)
				return -ETIMEDOUT;
			r = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r < 0)
				return -errno;
			if (r == 0)
				return -ECONNRESET;
			q->len += (size_t)r;
		}
	}
}

static int qmp_write(struct qmp_conn *q, const char *s)
{
	size_t off = 0, n = strlen(s);

	while (off < n) {
		struct pollfd pfd = { .fd = q->fd, .events = POLLOUT };
		int ms = pause_ms_left(q->deadline_ns);
		ssize_t w;

		if (!ms || poll(&pfd, 1, ms) == 0)
			return -ETIMEDOUT;
		w = write(q->fd, s + off, n - off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w < 0)
			return -errno;
		off += (size_t)w;
	}
	return 0;
}

/* Send @cmd and wait for its return, skipping events; -errno. */
static int qmp_execute(struct qmp_conn *q, const char *cmd)
{
	char line[128];
	int err;

	snprintf(line, sizeof(line), "{\"execute\": \"%s\"}\r\n", cmd);
	err = qmp_write(q, line);
	if (err)
		return err;
	for (;;) {
		json_t *j, *e;

		err = qmp_read_json(q, &j);
		if (err)
			return err;
		if (json_object_get(j, "return")) {
			json_decref(j);
			return 0;
		}
		e = json_object_get(j, "error");
		if (e) {
			const char *desc = json_string_value(json_object_get(e, "desc"));

			log_warn(q->pb->subject, "qmp %s: %.200s", cmd, desc ? desc : "error");
			json_decref(j);
			return -EINVAL;
		}
		json_decref(j);	/* an event: skip */
	}
}

static int qmp_run(struct pause_backend *pb, const char *cmd)
{
	struct qmp_conn *q = calloc(1, sizeof(*q));
	json_t *greeting = NULL;
	int err;

	if (!q)
		return -ENOMEM;
	q->pb = pb;
	q->deadline_ns = now_ns() + (uint64_t)pause_timeout_ms(pb) * NS_PER_MS;
	q->fd = pause_unix_connect(pb->spec.path, q->deadline_ns);
	if (q->fd < 0) {
		err = q->fd;
		free(q);
		return err;
	}
	{
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (!getsockopt(q->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) && cred.pid > 0)
			pb->peer_pid = cred.pid;	/* QEMU: for PSS and cgroup memory */
	}
	err = qmp_read_json(q, &greeting);
	if (!err && !json_object_get(greeting, "QMP"))
		err = -EPROTO;
	json_decref(greeting);
	if (!err)
		err = qmp_execute(q, "qmp_capabilities");
	if (!err) {
		pb->st.cmd_sent_ns = now_ns();	/* the clock changes after this */
		err = qmp_execute(q, cmd);
	}
	close(q->fd);
	free(q);
	return err;
}

static int qmp_probe(struct pause_backend *pb)
{
	struct stat st;

	if (stat(pb->spec.path, &st) < 0)
		return -errno;
	return S_ISSOCK(st.st_mode) ? 0 : -ENOTSOCK;
}

static int qmp_pause(struct pause_backend *pb)
{
	return qmp_run(pb, "stop");
}

static int qmp_resume(struct pause_backend *pb)
{
	return qmp_run(pb, "cont");
}

const struct pause_backend_ops pause_qmp_ops = {
	.name = "qmp",
	.guest_clock_stops = true,
	.probe = qmp_probe,
	.pause = qmp_pause,
	.resume = qmp_resume,
};
