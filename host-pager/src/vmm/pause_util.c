// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_util.c - helpers the pause backends share (deadlines, unix socket
 * connect, REST over a unix socket); see pause.h.  The dispatch in pause.c
 * calls the backends, the backends call these: no cycle.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pause.h"
#include "usock.h"

#define NS_PER_MS	1000000ull

uint32_t pause_timeout_ms(const struct pause_backend *pb)
{
	return pb->spec.timeout_ms ? pb->spec.timeout_ms : PAUSE_DEFAULT_TIMEOUT_MS;
}

int pause_ms_left(uint64_t deadline_ns)
{
	uint64_t now = now_ns();

	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS);
}

#define PAUSE_CONNECT_RETRY_NS	(5 * NS_PER_MS)	/* full backlog: try again */

int pause_unix_connect(const char *path, uint64_t deadline_ns)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (!path[0] || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		socklen_t len = sizeof(err);
		int ms;

		if (!connect(fd, (const struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		err = -errno;
		if (err == -EINTR)
			continue;
		if (err == -EAGAIN) {
			/* a unix socket's full backlog: no event to wait for */
			uint64_t left = deadline_ns > now_ns() ? deadline_ns - now_ns() : 0;
			struct timespec ts;

			if (!left)
				break;
			if (left > PAUSE_CONNECT_RETRY_NS)
				left = PAUSE_CONNECT_RETRY_NS;
			ts.tv_sec = 0;
			ts.tv_nsec = (long)left;
			nanosleep(&ts, NULL);
			continue;
		}
		if (err != -EINPROGRESS)
			goto fail;
		ms = pause_ms_left(deadline_ns);
		if (!ms || poll(&pfd, 1, ms) <= 0)
			break;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (!err)
			return fd;
		err = -err;
		goto fail;
	}
	err = -ETIMEDOUT;
fail:
	close(fd);
	return err;
}

struct http_reply {
	char *buf;
	size_t len, cap;
};

static size_t http_collect(char *data, size_t size, size_t n, void *arg)
{
	struct http_reply *r = arg;
	size_t bytes = size * n;
	size_t room = r->cap ? r->cap - 1 - r->len : 0;
	size_t take = bytes < room ? bytes : room;

	if (take) {
		memcpy(r->buf + r->len, data, take);
		r->len += take;
		r->buf[r->len] = '\0';
	}
	return bytes;	/* drop the excess, do not fail the transfer */
}

int pause_http(struct pause_backend *pb, const char *method, const char *url_path,
	       const char *body, long *status, char *reply, size_t reply_len)
{
	struct http_reply r = { .buf = reply, .cap = reply_len };
	struct curl_slist *hdrs = NULL;
	char url[256];
	CURL *curl;
	CURLcode rc;
	int err = 0;

	if (reply && reply_len)
		reply[0] = '\0';
	snprintf(url, sizeof(url), "http://localhost%s", url_path);
	curl = curl_easy_init();
	if (!curl)
		return -ENOMEM;
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, pb->spec.path);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)pause_timeout_ms(pb));
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, http_collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
	if (body) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (!strcmp(method, "PUT")) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	rc = curl_easy_perform(curl);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		err = -ETIMEDOUT;
	else if (rc == CURLE_COULDNT_CONNECT)
		err = -ECONNREFUSED;
	else if (rc != CURLE_OK)
		err = -EIO;
	if (err)
		log_warn(pb->subject, "%s %s on %s: %s", method, url_path, pb->spec.path,
			 curl_easy_strerror(rc));
	else
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	return err;
}
