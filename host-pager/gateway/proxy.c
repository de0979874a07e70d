// SPDX-License-Identifier: GPL-2.0-only
/*
 * proxy.c - the agent-facing side: one libmicrohttpd daemon per VM
 * listener, one thread per client connection (so handlers may block).
 *
 * A request is read whole (at most max_body), handed to the engine with its
 * method, raw target (path and query as sent), body and end-to-end headers,
 * and the thread then sleeps on the xfer's eventfd and on the client socket
 * (POLLRDHUP: a client that goes away ends its wait) until the engine
 * releases the response.  The body is read from the spool as it arrives:
 * after the first bytes, SSE events flow through at once.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "gw.h"

struct creq {
	char *raw_uri;
	char *body;
	size_t len, cap;
	bool too_big, started;
	struct xfer *x;
	int fd;
};

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct creq *r = calloc(1, sizeof(*r));

	(void)cls;
	(void)conn;
	if (r)
		r->raw_uri = strdup(uri ? uri : "");
	return r;
}

/* Wait for @x to change or the client to go: false when the client went. */
static bool wait_event(struct xfer *x, int client_fd)
{
	struct pollfd p[2] = {
		{ .fd = x->efd, .events = POLLIN },
		{ .fd = client_fd, .events = POLLRDHUP },
	};
	uint64_t v;

	if (poll(p, client_fd >= 0 ? 2 : 1, 1000) < 0 && errno != EINTR)
		return false;
	if (p[0].revents & POLLIN) {
		if (read(x->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return false;
	}
	if (client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
		return false;
	return true;
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct creq *r = cls;
	struct xfer *x = r->x;

	(void)pos;
	for (;;) {
		ssize_t n;
		bool ask = false;

		pthread_mutex_lock(&x->mu);
		n = spool_read(&x->sp, buf, max);
		if (n > 0 && x->paused && !x->unpause_asked &&
		    spool_pending(&x->sp) <= gw_cfg.spool_max / 2) {
			x->unpause_asked = true;
			ask = true;
		}
		if (n == 0 && x->up_done) {
			bool err = x->up_error;

			pthread_mutex_unlock(&x->mu);
			return err ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		}
		pthread_mutex_unlock(&x->mu);
		if (ask)
			engine_unpause(x);
		if (n > 0) {
			atomic_fetch_add(&x->l->c.bytes_out, (unsigned long long)n);
			return n;
		}
		if (n < 0) {
			gw_err(x->l->vm, "%s: spool read: %s", x->log_path, strerror((int)-n));
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (!wait_event(x, r->fd))
			return MHD_CONTENT_READER_END_WITH_ERROR;	/* completed() cancels */
	}
}

struct hdr_ctx {
	struct curl_slist *list;
	bool has_accept, has_ctype, has_body, oom;
	char conn_tokens[256];		/* names the Connection header lists */
};

static enum MHD_Result collect_conn(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	struct hdr_ctx *h = cls;

	(void)kind;
	if (!strcasecmp(key, "connection") && value)
		snprintf(h->conn_tokens, sizeof(h->conn_tokens), "%s", value);
	if ((!strcasecmp(key, "content-length") || !strcasecmp(key, "transfer-encoding")))
		h->has_body = true;
	return MHD_YES;
}

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *value)
{
	static const char *const skip[] = {
		"connection", "keep-alive", "proxy-connection", "proxy-authorization",
		"te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
		"expect", NULL,
	};
	struct hdr_ctx *h = cls;
	char *line;

	(void)kind;
	for (const char *const *s = skip; *s; s++)
		if (!strcasecmp(key, *s))
			return MHD_YES;
	if (gw_token_listed(h->conn_tokens, key, strlen(key)))
		return MHD_YES;
	if (!strcasecmp(key, "accept"))
		h->has_accept = true;
	if (!strcasecmp(key, "content-type"))
		h->has_ctype = true;
	/* curl sends "Name;" as an empty header, "Name:" would remove it */
	if (!value || !*value)
		line = asprintf(&line, "%s;", key) < 0 ? NULL : line;
	else
		line = asprintf(&line, "%s: %s", key, value) < 0 ? NULL : line;
	if (!line) {
		h->oom = true;
		return MHD_NO;
	}
	h->list = curl_slist_append(h->list, line);
	free(line);
	if (!h->list)
		h->oom = true;
	return h->oom ? MHD_NO : MHD_YES;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status, const char *msg)
{
	char body[256];
	int n = snprintf(body, sizeof(body), "{\"error\": \"vmnap-gateway: %s\", \"status\": %u}\n",
			 msg, status);
	struct MHD_Response *resp = MHD_create_response_from_buffer((size_t)n, body,
								    MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "application/json");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static struct xfer *build_xfer(struct listener *l, struct MHD_Connection *conn, struct creq *r,
			       const char *method)
{
	struct hdr_ctx h = { 0 };
	struct xfer *x;
	size_t pl;

	MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_conn, &h);
	MHD_get_connection_values(conn, MHD_HEADER_KIND, collect, &h);
	if (!h.has_accept)
		h.list = curl_slist_append(h.list, "Accept:");	/* curl would add one */
	if (!h.has_ctype)
		h.list = curl_slist_append(h.list, "Content-Type:");
	h.list = curl_slist_append(h.list, "Expect:");
	x = xfer_new(l);
	if (!x || h.oom || !h.list) {
		curl_slist_free_all(h.list);
		if (x)
			xfer_put(x);
		return NULL;
	}
	x->req_headers = h.list;
	x->method = strdup(method);
	if (asprintf(&x->url, "%s%s", gw_cfg.upstream, r->raw_uri) < 0)
		x->url = NULL;
	x->head = !strcmp(method, "HEAD");
	x->has_body = !x->head && (h.has_body || r->len || !strcmp(method, "POST") ||
				   !strcmp(method, "PUT") || !strcmp(method, "PATCH"));
	x->body = r->body;
	x->body_len = r->len;
	r->body = NULL;
	pl = strcspn(r->raw_uri, "?#");
	snprintf(x->log_path, sizeof(x->log_path), "%s %.*s", method, (int)(pl > 64 ? 64 : pl),
		 r->raw_uri);
	if (!x->method || !x->url) {
		xfer_put(x);
		return NULL;
	}
	return x;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **req_cls)
{
	struct listener *l = cls;
	struct creq *r = *req_cls;
	const union MHD_ConnectionInfo *ci;
	struct MHD_Response *resp;
	struct xfer *x;
	enum MHD_Result ret;
	struct hdr *hd;

	(void)url;
	(void)version;
	if (!r)
		return MHD_NO;
	if (!r->started) {	/* headers only: the body (if any) follows */
		r->started = true;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (r->too_big || r->len + n > gw_cfg.max_body) {
			r->too_big = true;
			return MHD_YES;
		}
		if (r->len + n > r->cap) {
			size_t cap = r->cap ? r->cap : 65536;
			char *b;

			while (cap < r->len + n)
				cap *= 2;
			b = realloc(r->body, cap);
			if (!b)
				return MHD_NO;
			r->body = b;
			r->cap = cap;
		}
		memcpy(r->body + r->len, upload_data, n);
		r->len += n;
		return MHD_YES;
	}
	if (r->x)	/* called again after a response was queued */
		return MHD_YES;
	if (!r->raw_uri)
		return MHD_NO;
	atomic_fetch_add(&l->c.requests, 1);
	if (r->too_big) {
		atomic_fetch_add(&l->c.rejected, 1);
		return reply_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large");
	}
	if (r->raw_uri[0] != '/') {
		atomic_fetch_add(&l->c.rejected, 1);
		return reply_text(conn, MHD_HTTP_BAD_REQUEST, "request target must be a path");
	}
	x = build_xfer(l, conn, r, method);
	if (!x)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	r->x = x;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	r->fd = ci ? ci->connect_fd : -1;
	engine_submit(x);

	for (;;) {
		bool released;

		pthread_mutex_lock(&x->mu);
		released = x->released && x->headers_done;
		pthread_mutex_unlock(&x->mu);
		if (released)
			break;
		if (!wait_event(x, r->fd))
			return MHD_NO;	/* completed() cancels */
	}

	pthread_mutex_lock(&x->mu);
	/* 1xx never gets here; 204 and 304 have no body whatever they say */
	if (x->status == 204 || x->status == 304)
		x->content_length = 0;
	resp = MHD_create_response_from_callback(
		x->content_length >= 0 ? (uint64_t)x->content_length : MHD_SIZE_UNKNOWN,
		16384, read_body, r, NULL);
	for (hd = resp ? x->resp_headers : NULL; hd; hd = hd->next)
		if (MHD_add_response_header(resp, hd->name, hd->value) != MHD_YES)
			gw_debug(l->vm, "%s: response header %s not passed", x->log_path, hd->name);
	ret = resp ? MHD_queue_response(conn, (unsigned int)(x->status >= 200 && x->status <= 999 ?
					x->status : 502), resp) : MHD_NO;
	gw_info(l->vm, "%s -> %d (%s %s)", x->log_path, x->status,
		x->managed ? "wait" : "unmanaged", x->wait_id);
	pthread_mutex_unlock(&x->mu);
	if (resp)
		MHD_destroy_response(resp);
	atomic_fetch_add(&l->c.responses, 1);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct creq *r = *req_cls;

	(void)cls;
	(void)conn;
	if (!r)
		return;
	if (r->x) {
		/*
		 * Completed: the client has the whole response (the engine may not
		 * have seen the upstream's end yet; it finishes on its own).
		 * Anything else: the client left or broke the exchange.
		 */
		if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
			engine_cancel(r->x);
		xfer_put(r->x);
	}
	free(r->raw_uri);
	free(r->body);
	free(r);
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct listener *l = cls;
	char msg[256];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = 0;
	gw_debug(l->vm, "http: %s", msg);
}

int proxy_start(struct listener *l)
{
	l->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
				  MHD_USE_POLL | MHD_USE_ERROR_LOG,
				  0, NULL, NULL, on_request, l,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, l,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd,
				  MHD_OPTION_URI_LOG_CALLBACK, uri_log, l,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
				  MHD_OPTION_CONNECTION_LIMIT, gw_cfg.max_conns,
				  MHD_OPTION_CONNECTION_TIMEOUT, gw_cfg.client_timeout_s,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
				  MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
				  MHD_OPTION_END);
	return l->mhd ? 0 : -1;
}

void proxy_stop(struct listener *l)
{
	if (l->mhd)
		MHD_stop_daemon(l->mhd);
	l->mhd = NULL;
}
