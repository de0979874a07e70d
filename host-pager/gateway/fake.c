// SPDX-License-Identifier: GPL-2.0-only
/*
 * fake.c - vmnap-gateway --fake-upstream TRAJECTORY.jsonl: a model API for
 * tests and benchmarks.  Each request takes the trajectory's next step (or
 * the one X-Fake-Step names, 1-based) and is answered after the step's
 * wait_ms: a chat completion whose content is the step's command, or, when
 * the JSON body has "stream": true, the same as SSE events (headers at once,
 * the first event after wait_ms, "data: [DONE]" last).
 *
 * Test controls (request headers):
 *   X-Fake-Wait-Ms: N       wait N ms instead
 *   X-Fake-Size: N          the body is N bytes of a fixed pattern (SSE: in
 *                           "data:" events of up to 1000 bytes)
 *   X-Fake-Fault: status:NNN | reset (RST, no answer) | truncate (the body
 *                           stops half-way and the connection closes)
 *   X-Fake-Hold: PATH       wait for PATH to exist (at most 60 s) before
 *                           answering; streaming: after the first event
 * Every answer carries X-Fake-Request (method and target as received),
 * X-Fake-Body-Fnv (FNV-1a 64 of the request body, hex), X-Fake-Headers
 * (the request's header names, lower case, comma-separated), and
 * X-Fake-Authorization (the Authorization header received, for tests).
 * GET /__fake/count answers {"requests": N}.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "gw.h"

struct step {
	long wait_ms;
	char *cmd;
};

static struct step *steps;
static size_t nsteps;
static atomic_ullong served, next_step;

struct fq {
	char *raw_uri;
	char *body;
	size_t len, cap;
	/* the answer being streamed */
	char *out;
	size_t out_len, out_cap;
	size_t *ev_end;		/* end offsets of SSE events */
	size_t nev, ev, ev_cap;
	long wait_ms;
	bool started, waited, truncate;
	char hold[256];
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (ms > 0 && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int load(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;

	if (!f) {
		fprintf(stderr, "vmnap-gateway: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		json_t *j = json_loads(line, 0, NULL), *w, *c;
		struct step *s;

		w = j ? json_object_get(j, "wait_ms") : NULL;
		c = j ? json_object_get(j, "cmd") : NULL;
		if (!json_is_integer(w) || !json_is_integer(json_object_get(j, "step"))) {
			json_decref(j);
			continue;	/* the header line */
		}
		s = realloc(steps, (nsteps + 1) * sizeof(*steps));
		if (!s)
			break;
		steps = s;
		steps[nsteps].wait_ms = (long)json_integer_value(w);
		steps[nsteps].cmd = strdup(json_is_string(c) ? json_string_value(c) : "");
		nsteps++;
		json_decref(j);
	}
	free(line);
	fclose(f);
	if (!nsteps) {
		fprintf(stderr, "vmnap-gateway: %s: no steps\n", path);
		return -1;
	}
	return 0;
}

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct fq *q = calloc(1, sizeof(*q));

	(void)cls;
	(void)conn;
	if (q)
		q->raw_uri = strdup(uri ? uri : "");
	return q;
}

static void out_add(struct fq *q, const char *s, size_t n, bool event_end)
{
	size_t *e;

	if (q->out_len + n + 1 > q->out_cap) {
		size_t cap = (q->out_len + n + 1) * 2;
		char *o = realloc(q->out, cap);

		if (!o)
			return;
		q->out = o;
		q->out_cap = cap;
	}
	memcpy(q->out + q->out_len, s, n);
	q->out_len += n;
	if (event_end) {
		if (q->nev == q->ev_cap) {
			q->ev_cap = q->ev_cap ? q->ev_cap * 2 : 16;
			e = realloc(q->ev_end, q->ev_cap * sizeof(*e));
			if (!e)
				return;
			q->ev_end = e;
		}
		q->ev_end[q->nev++] = q->out_len;
	}
}

static void pattern(char *p, size_t n, size_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)('a' + (off + i) % 26);
}

static void render(struct fq *q, unsigned long step, const struct step *s, bool stream, long size)
{
	char *txt;

	if (size >= 0) {
		char chunk[1000];

		for (long off = 0; off < size || (stream && !off); off += (long)sizeof(chunk)) {
			size_t n = (size_t)(size - off < (long)sizeof(chunk) ? size - off : (long)sizeof(chunk));

			pattern(chunk, n, (size_t)off);
			if (stream) {
				out_add(q, "data: ", 6, false);
				out_add(q, chunk, n, false);
				out_add(q, "\n\n", 2, true);
			} else {
				out_add(q, chunk, n, false);
			}
			if (!n)
				break;
		}
		if (stream)
			out_add(q, "data: [DONE]\n\n", 14, true);
		return;
	}
	if (!stream) {
		json_t *j = json_pack("{s:s,s:s,s:s,s:[{s:i,s:{s:s,s:s},s:s}],s:i}",
				      "id", "fake-step",
				      "object", "chat.completion", "model", "vmnap-fake",
				      "choices", "index", 0, "message", "role", "assistant",
				      "content", s->cmd, "finish_reason", "stop",
				      "vmnap_step", (int)step);

		txt = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		if (txt) {
			out_add(q, txt, strlen(txt), false);
			out_add(q, "\n", 1, false);
		}
		free(txt);
		json_decref(j);
		return;
	}
	/* the command in four pieces, then [DONE] */
	{
		size_t len = strlen(s->cmd), per = len / 4 + 1;

		for (size_t off = 0; off < len || !off; off += per) {
			char piece[4096];
			size_t n = len - off < per ? len - off : per;
			json_t *j;

			if (n >= sizeof(piece))
				n = sizeof(piece) - 1;
			memcpy(piece, s->cmd + off, n);
			piece[n] = 0;
			j = json_pack("{s:s,s:s,s:[{s:i,s:{s:s}}],s:i}", "id", "fake-step",
				      "object", "chat.completion.chunk", "choices", "index", 0,
				      "delta", "content", piece, "vmnap_step", (int)step);
			txt = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
			if (txt) {
				out_add(q, "data: ", 6, false);
				out_add(q, txt, strlen(txt), false);
				out_add(q, "\n\n", 2, true);
			}
			free(txt);
			json_decref(j);
			if (!len)
				break;
		}
		out_add(q, "data: [DONE]\n\n", 14, true);
	}
}

static void wait_file(const char *path)
{
	struct stat st;

	for (int i = 0; i < 6000 && stat(path, &st); i++)
		sleep_ms(10);
}

struct names {
	char s[2048];
	size_t len;
};

static enum MHD_Result add_name(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	struct names *n = cls;
	int w;

	(void)kind;
	(void)value;
	w = snprintf(n->s + n->len, sizeof(n->s) - n->len, "%s%s", n->len ? "," : "", key);
	if (w > 0 && (size_t)w < sizeof(n->s) - n->len) {
		for (int i = 0; i < w; i++)
			n->s[n->len + (size_t)i] = (char)tolower((unsigned char)n->s[n->len + (size_t)i]);
		n->len += (size_t)w;
	}
	return MHD_YES;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fq *q = cls;
	size_t end, n;

	if (!q->waited) {
		sleep_ms(q->wait_ms);
		q->waited = true;
	}
	if (q->ev >= q->nev)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (q->ev == 1 && q->truncate)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (q->ev == 1 && q->hold[0])
		wait_file(q->hold);
	end = q->ev_end[q->ev];
	n = end - (size_t)pos;
	if (n > max)
		n = max;
	memcpy(buf, q->out + pos, n);
	if ((size_t)pos + n == end)
		q->ev++;
	return (ssize_t)n;
}

static ssize_t plain_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fq *q = cls;
	size_t n = q->out_len - (size_t)pos;

	if (q->truncate && pos >= q->out_len / 2)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (n > max)
		n = max;
	if (q->truncate && pos + n > q->out_len / 2)
		n = q->out_len / 2 - (size_t)pos;
	memcpy(buf, q->out + pos, n);
	return (ssize_t)n;
}

static const char *hval(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **req_cls)
{
	struct fq *q = *req_cls;
	struct MHD_Response *resp;
	const char *v, *auth;
	enum MHD_Result ret;
	unsigned long step;
	long size = -1;
	unsigned int status = 200;
	bool stream = false;
	uint64_t fnv = 0xcbf29ce484222325ull;
	char hex[32];
	json_t *j;

	(void)cls;
	(void)version;
	if (!q)
		return MHD_NO;
	if (!q->started) {
		q->started = true;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (q->len + n > (64u << 20))
			return MHD_NO;
		if (q->len + n > q->cap) {
			char *b = realloc(q->body, (q->len + n) * 2);

			if (!b)
				return MHD_NO;
			q->body = b;
			q->cap = (q->len + n) * 2;
		}
		memcpy(q->body + q->len, upload_data, n);
		q->len += n;
		return MHD_YES;
	}
	if (q->out || q->nev)
		return MHD_YES;
	if (!strcmp(url, "/__fake/count")) {
		char body[64];
		int n = snprintf(body, sizeof(body), "{\"requests\": %llu}\n",
				 (unsigned long long)atomic_load(&served));

		resp = MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
		ret = MHD_queue_response(conn, 200, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	atomic_fetch_add(&served, 1);
	for (size_t i = 0; i < q->len; i++)
		fnv = (fnv ^ (unsigned char)q->body[i]) * 0x100000001b3ull;
	j = q->len ? json_loadb(q->body, q->len, 0, NULL) : NULL;
	stream = json_is_true(json_object_get(j, "stream"));
	json_decref(j);
	v = hval(conn, "X-Fake-Step");
	step = v ? strtoul(v, NULL, 10) : 0;
	if (!step || step > nsteps)
		step = (unsigned long)(atomic_fetch_add(&next_step, 1) % nsteps) + 1;
	v = hval(conn, "X-Fake-Wait-Ms");
	q->wait_ms = v ? strtol(v, NULL, 10) : steps[step - 1].wait_ms;
	if (q->wait_ms < 0 || q->wait_ms > 3600000)
		q->wait_ms = 0;
	v = hval(conn, "X-Fake-Size");
	if (v)
		size = strtol(v, NULL, 10);
	if (size > (1l << 30))
		size = 1l << 30;
	v = hval(conn, "X-Fake-Hold");
	if (v)
		snprintf(q->hold, sizeof(q->hold), "%s", v);
	v = hval(conn, "X-Fake-Fault");
	if (v && !strncmp(v, "status:", 7))
		status = (unsigned int)strtoul(v + 7, NULL, 10);
	if (status < 200 || status > 599)
		status = 500;
	if (v && !strcmp(v, "truncate"))
		q->truncate = true;
	if (v && !strcmp(v, "reset")) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct linger lg = { 1, 0 };

		sleep_ms(q->wait_ms);
		if (ci)
			setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		return MHD_NO;
	}
	if (status != 200) {
		char body[128];
		int n = snprintf(body, sizeof(body), "{\"error\": {\"message\": \"fake %u\"}}\n", status);

		out_add(q, body, (size_t)n, false);
	} else {
		render(q, step, &steps[step - 1], stream, size);
	}
	if (stream && status == 200) {
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, stream_read, q, NULL);
		if (resp) {
			MHD_add_response_header(resp, "Content-Type", "text/event-stream");
			MHD_add_response_header(resp, "Cache-Control", "no-cache");
		}
	} else {
		if (q->hold[0])
			wait_file(q->hold);
		sleep_ms(q->wait_ms);
		q->waited = true;
		resp = MHD_create_response_from_callback(q->out_len, 65536, plain_read, q, NULL);
		if (resp)
			MHD_add_response_header(resp, "Content-Type",
						size >= 0 ? "application/octet-stream" : "application/json");
	}
	if (!resp)
		return MHD_NO;
	{
		char line[600];

		snprintf(line, sizeof(line), "%s %.500s", method, q->raw_uri);
		MHD_add_response_header(resp, "X-Fake-Request", line);
	}
	snprintf(hex, sizeof(hex), "%016" PRIx64, fnv);
	MHD_add_response_header(resp, "X-Fake-Body-Fnv", hex);
	{
		struct names n = { .len = 0 };

		MHD_get_connection_values(conn, MHD_HEADER_KIND, add_name, &n);
		MHD_add_response_header(resp, "X-Fake-Headers", n.s);
	}
	auth = hval(conn, "Authorization");
	if (auth)
		MHD_add_response_header(resp, "X-Fake-Authorization", auth);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct fq *q = *req_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!q)
		return;
	free(q->raw_uri);
	free(q->body);
	free(q->out);
	free(q->ev_end);
	free(q);
	*req_cls = NULL;
}

static volatile sig_atomic_t fake_stop;

static void on_sig(int sig)
{
	fake_stop = sig;
}

int fake_main(const char *trajectory, struct listener *ls)
{
	struct sigaction sa = { .sa_handler = on_sig };

	if (load(trajectory))
		return 1;
	for (struct listener *l = ls; l; l = l->next) {
		l->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_POLL, 0, NULL, NULL, on_request, NULL,
					  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd,
					  MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
					  MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
					  MHD_OPTION_CONNECTION_TIMEOUT, 120u,
					  MHD_OPTION_END);
		if (!l->mhd) {
			fprintf(stderr, "vmnap-gateway: fake upstream on %s: cannot start\n", l->spec);
			return 1;
		}
		gw_info("fake", "serving %zu steps on %s", nsteps, l->spec);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!fake_stop)
		pause();
	for (struct listener *l = ls; l; l = l->next)
		MHD_stop_daemon(l->mhd);
	return 0;
}
