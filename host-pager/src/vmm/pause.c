// SPDX-License-Identifier: GPL-2.0-only
/* pause.c - pause backend dispatch and shared helpers; see pause.h. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pause.h"
#include "usock.h"

#define NS_PER_MS	1000000ull

static const struct {
	const char *name;
	const struct pause_backend_ops *ops;
} kinds[PAUSE_NR_KINDS] = {
	[PAUSE_QMP] = { "qmp", &pause_qmp_ops },
	[PAUSE_FREEZER] = { "freezer", &pause_freezer_ops },
	[PAUSE_FIRECRACKER] = { "firecracker", &pause_firecracker_ops },
	[PAUSE_CHV] = { "chv", &pause_chv_ops },
};

int pause_kind_parse(const char *s)
{
	for (int k = 0; k < PAUSE_NR_KINDS; k++)
		if (!strcmp(s, kinds[k].name))
			return k;
	return -1;
}

const char *pause_kind_name(enum pause_kind k)
{
	return (unsigned int)k < PAUSE_NR_KINDS ? kinds[k].name : "unknown";
}

struct pause_backend *pause_new(const struct pause_spec *spec, const char *subject)
{
	struct pause_backend *pb;

	if ((unsigned int)spec->kind >= PAUSE_NR_KINDS || !spec->path[0]) {
		errno = EINVAL;
		return NULL;
	}
	pb = calloc(1, sizeof(*pb));
	if (!pb) {
		errno = ENOMEM;
		return NULL;
	}
	pb->ops = kinds[spec->kind].ops;
	pb->efd = -1;
	pb->spec = *spec;
	snprintf(pb->subject, sizeof(pb->subject), "%s", subject ? subject : "pause");
	return pb;
}

void pause_free(struct pause_backend *pb)
{
	if (!pb)
		return;
	if (pb->busy)	/* bounded by the backend's timeout */
		pthread_join(pb->thread, NULL);
	if (pb->efd >= 0) {
		loop_del_fd(pb->loop, pb->efd);
		close(pb->efd);
	}
	free(pb);
}

static void *pause_thread(void *arg)
{
	struct pause_backend *pb = arg;
	uint64_t one = 1;

	pb->result = pb->op_pause ? pause_vm(pb) : pause_resume_vm(pb);
	if (write(pb->efd, &one, sizeof(one)) != sizeof(one))
		log_err(pb->subject, "pause: cannot signal completion: %s", strerror(errno));
	return NULL;
}

static void on_pause_done(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pause_backend *pb = arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v) || !pb->busy)
		return;
	pthread_join(pb->thread, NULL);
	pb->busy = false;
	pb->done(pb, pb->result, pb->done_arg);
}

int pause_start(struct pause_backend *pb, struct loop *l, bool pause, pause_done_fn done,
		void *arg)
{
	int err;

	if (pb->busy)
		return -EBUSY;
	if (pb->efd < 0) {
		pb->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (pb->efd < 0)
			return -errno;
		err = loop_add_fd(l, pb->efd, EPOLLIN, on_pause_done, pb);
		if (err) {
			close(pb->efd);
			pb->efd = -1;
			return err;
		}
		pb->loop = l;
	}
	pb->op_pause = pause;
	pb->done = done;
	pb->done_arg = arg;
	pb->busy = true;
	err = pthread_create(&pb->thread, NULL, pause_thread, pb);
	if (err) {
		pb->busy = false;
		return -err;
	}
	return 0;
}

int pause_vm(struct pause_backend *pb)
{
	uint64_t t0 = now_ns();
	int err = pb->ops->pause(pb);

	pb->st.last_pause_ns = now_ns() - t0;
	if (err) {
		pb->st.errors++;
		log_err(pb->subject, "%s pause via %s failed: %s", pb->ops->name,
			pb->spec.path, strerror(-err));
		return err;
	}
	pb->st.pauses++;
	pb->paused = true;
	log_debug(pb->subject, "%s paused in %llu us", pb->ops->name,
		  (unsigned long long)(pb->st.last_pause_ns / 1000));
	return 0;
}

int pause_resume_vm(struct pause_backend *pb)
{
	uint64_t t0 = now_ns();
	int err = pb->ops->resume(pb);

	pb->st.last_resume_ns = now_ns() - t0;
	if (err) {
		pb->st.errors++;
		log_err(pb->subject, "%s resume via %s failed: %s", pb->ops->name,
			pb->spec.path, strerror(-err));
		return err;
	}
	pb->st.resumes++;
	pb->paused = false;
	log_debug(pb->subject, "%s resumed in %llu us", pb->ops->name,
		  (unsigned long long)(pb->st.last_resume_ns / 1000));
	return 0;
}

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

int pause_unix_connect(const char *path)
{
	/* a backend call runs on its own thread: the connect may block */
	int fd = usock_connect(path, false);

	if (fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
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
