// SPDX-License-Identifier: GPL-2.0-only
/*
 * engine.c - the thread that drives every upstream transfer and every
 * vmnapd control API call through one libcurl multi handle.
 *
 * Per forwarded request (struct xfer), in parallel:
 *   upstream:  the request goes out at once; its first body byte, or its
 *              end (complete, error, timeout), is "data ready".
 *   wait:      POST /vms/V/waits {"id", "kind": "model"} at once; on data
 *              ready (and once the start answered) POST …/waits/ID/ready.
 *              Its answer says the wait's state: "delivered" (the VM was
 *              running: the guest can have the data now) releases the
 *              response; "ready" (the VM is paused, handing off or
 *              resuming) holds it, polling GET /vms/V/waits/ID (1 ms,
 *              then every 4 ms, at most max_hold) until vmnapd reports
 *              the wait delivered (the guest acknowledged its resume, or
 *              the VMM's resume completed without a guest link).
 * A start refused or vmnapd unreachable: the request is forwarded
 * unmanaged (released at data ready), logged and counted.
 *
 * A network wait (x->network, from the proxy mode) has no upstream
 * transfer here: "network" is its kind, engine_net_ready() its data
 * ready, and nothing is held (the proxy forwards bytes as they come;
 * a paused guest just reads them later).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "gw.h"

enum wait_phase {
	W_STARTING,	/* POST …/waits in flight */
	W_STARTED,	/* 201: ready owed at data ready */
	W_READYING,	/* POST …/ready in flight */
	W_HOLD,		/* ready answered, VM not running yet: polling */
	W_POLLING,	/* GET /vms/V in flight */
	W_DONE,		/* nothing owed to vmnapd */
	W_UNMANAGED,	/* start refused or vmnapd unreachable */
};

enum api_kind { API_START, API_READY, API_POLL };

struct api_call {
	struct xfer *x;
	enum api_kind kind;
	struct curl_slist *hdrs;
	char body[256];
	char buf[8192];
	size_t len;
	bool overflow;
};

static CURLM *multi;
static pthread_t thread;
static atomic_bool stopping;
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
enum cmd_kind { CMD_SUBMIT, CMD_CANCEL, CMD_UNPAUSE, CMD_NET_READY };
struct cmd {
	enum cmd_kind kind;
	struct xfer *x;
	struct cmd *next;
};
static struct cmd *qhead, **qtail = &qhead;
static struct xfer *active;	/* engine's list */
static char wait_prefix[32];
static atomic_ullong wait_seq;

static void release(struct xfer *x, const char *why);

static void enqueue(enum cmd_kind kind, struct xfer *x)
{
	struct cmd *c = malloc(sizeof(*c));

	if (!c) {
		gw_err(x->l->vm, "out of memory queueing a command");
		return;
	}
	c->kind = kind;
	c->x = x;
	c->next = NULL;
	pthread_mutex_lock(&x->mu);
	x->refs++;
	pthread_mutex_unlock(&x->mu);
	pthread_mutex_lock(&qmu);
	*qtail = c;
	qtail = &c->next;
	pthread_mutex_unlock(&qmu);
	curl_multi_wakeup(multi);
}

void engine_submit(struct xfer *x)
{
	enqueue(CMD_SUBMIT, x);
}

void engine_cancel(struct xfer *x)
{
	enqueue(CMD_CANCEL, x);
}

void engine_unpause(struct xfer *x)
{
	enqueue(CMD_UNPAUSE, x);
}

void engine_net_start(struct xfer *x)
{
	enqueue(CMD_SUBMIT, x);
}

void engine_net_ready(struct xfer *x)
{
	enqueue(CMD_NET_READY, x);
}

/* ---- control API calls ------------------------------------------------ */

static size_t api_write(char *p, size_t sz, size_t nm, void *arg)
{
	struct api_call *a = arg;
	size_t n = sz * nm;

	if (a->len + n >= sizeof(a->buf)) {
		a->overflow = true;
		return n;
	}
	memcpy(a->buf + a->len, p, n);
	a->len += n;
	return n;
}

static void api_issue(struct xfer *x, enum api_kind kind)
{
	struct api_call *a = calloc(1, sizeof(*a));
	char url[256];
	CURL *e;

	if (!a || !(e = curl_easy_init())) {
		free(a);
		gw_err(x->l->vm, "out of memory for a control API call");
		x->wait = W_UNMANAGED;
		return;
	}
	a->x = x;
	a->kind = kind;
	switch (kind) {
	case API_START:
		snprintf(url, sizeof(url), "http://vmnapd/vms/%s/waits", x->l->vm);
		snprintf(a->body, sizeof(a->body), "{\"id\": \"%s\", \"kind\": \"%s\"}", x->wait_id,
			 x->network ? "network" : "model");
		break;
	case API_READY:
		snprintf(url, sizeof(url), "http://vmnapd/vms/%s/waits/%s/ready", x->l->vm, x->wait_id);
		break;
	case API_POLL:
		snprintf(url, sizeof(url), "http://vmnapd/vms/%s/waits/%s", x->l->vm, x->wait_id);
		break;
	}
	curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, gw_cfg.api_sock);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, a);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, api_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (kind != API_POLL) {
		a->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
		a->hdrs = curl_slist_append(a->hdrs, "Expect:");
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, a->hdrs);
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, a->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(a->body));
	}
	x->api = e;
	curl_multi_add_handle(multi, e);
}

/* A string field of an API answer; "" when absent. */
static void api_field(struct api_call *a, const char *key, char *out, size_t n)
{
	json_t *j, *s;

	out[0] = 0;
	if (a->overflow)
		return;
	j = json_loadb(a->buf, a->len, 0, NULL);
	s = j ? json_object_get(j, key) : NULL;
	if (json_is_string(s))
		snprintf(out, n, "%s", json_string_value(s));
	json_decref(j);
}

static void api_error(struct api_call *a, char *out, size_t n)
{
	json_t *j = a->overflow ? NULL : json_loadb(a->buf, a->len, 0, NULL);
	json_t *e = j ? json_object_get(j, "error") : NULL;

	snprintf(out, n, "%s", json_is_string(e) ? json_string_value(e) : "no error text");
	json_decref(j);
}

static void vmnapd_reachable(bool up, CURLcode rc)
{
	bool was_down = atomic_exchange(&gw_vmnapd_down, !up);

	if (!up && !was_down)
		gw_warn(NULL, "vmnapd unreachable at %s (%s): forwarding unmanaged",
			gw_cfg.api_sock, curl_easy_strerror(rc));
	else if (up && was_down)
		gw_info(NULL, "vmnapd reachable again at %s: waits managed", gw_cfg.api_sock);
}

/*
 * A resume from an offload takes 10-40 ms to its delivery; each poll is one
 * small request on vmnapd's API socket.  A poll interval that grew to tens
 * of ms would add up to that much to every held response (the delivery
 * seen one interval late), so it stays at a few ms: some ten polls per
 * held response.
 */
#define HOLD_POLL_FIRST_NS	1000000ull
#define HOLD_POLL_NS		4000000ull

static void hold_schedule(struct xfer *x, uint64_t now)
{
	x->poll_delay = x->poll_delay ? HOLD_POLL_NS : HOLD_POLL_FIRST_NS;
	x->next_poll = now + x->poll_delay;
	x->wait = W_HOLD;
}

static void send_ready(struct xfer *x)
{
	x->wait = W_READYING;
	api_issue(x, API_READY);
}

static void api_done(struct api_call *a, CURLcode rc)
{
	struct xfer *x = a->x;
	long code = 0;
	char st[32], err[160];
	uint64_t now = gw_now_ns();

	curl_easy_getinfo(x->api, CURLINFO_RESPONSE_CODE, &code);
	curl_multi_remove_handle(multi, x->api);
	curl_easy_cleanup(x->api);
	x->api = NULL;
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	    rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING)
		vmnapd_reachable(false, rc);
	else if (rc == CURLE_OK)
		vmnapd_reachable(true, rc);

	switch (a->kind) {
	case API_START:
		if (rc == CURLE_OK && code == 201) {
			x->wait = W_STARTED;
			pthread_mutex_lock(&x->mu);
			x->managed = true;
			pthread_mutex_unlock(&x->mu);
			atomic_fetch_add(&x->l->c.waits_started, 1);
			gw_debug(x->l->vm, "wait %s started (%s)", x->wait_id, x->log_path);
			if (x->data_ready)
				send_ready(x);
			break;
		}
		x->wait = W_UNMANAGED;
		if (rc != CURLE_OK) {
			atomic_fetch_add(&x->l->c.unmanaged[GW_UNM_VMNAPD_DOWN], 1);
			gw_debug(x->l->vm, "wait %s not started: %s: forwarding unmanaged",
				 x->wait_id, curl_easy_strerror(rc));
		} else {
			atomic_fetch_add(&x->l->c.unmanaged[GW_UNM_REFUSED], 1);
			api_error(a, err, sizeof(err));
			gw_warn(x->l->vm, "vmnapd refused wait %s (%ld: %s): forwarding unmanaged",
				x->wait_id, code, err);
		}
		if (x->data_ready)
			release(x, "unmanaged");
		break;
	case API_READY:
		if (rc == CURLE_OK && code == 200) {
			atomic_fetch_add(&x->l->c.waits_ready, 1);
			api_field(a, "wait_state", st, sizeof(st));
			if (x->cancel_seen || x->network || strcmp(st, "ready")) {
				/* "delivered", or the wait is gone: nothing to hold for */
				x->wait = W_DONE;
				release(x, "ready");
			} else {
				api_field(a, "state", st, sizeof(st));
				gw_debug(x->l->vm, "wait %s ready, VM %s: holding", x->wait_id, st);
				atomic_fetch_add(&x->l->c.held, 1);
				x->hold_deadline = now + gw_cfg.max_hold_ns;
				hold_schedule(x, now);
			}
			break;
		}
		api_error(a, err, sizeof(err));
		gw_warn(x->l->vm, "wait %s: ready failed (%s%s%ld %s): releasing", x->wait_id,
			rc == CURLE_OK ? "" : curl_easy_strerror(rc), rc == CURLE_OK ? "" : ", ",
			code, rc == CURLE_OK ? err : "");
		x->wait = W_DONE;
		release(x, "ready failed");
		break;
	case API_POLL:
		api_field(a, "state", st, sizeof(st));
		if (rc != CURLE_OK || code != 200 || strcmp(st, "ready") || x->cancel_seen) {
			/* delivered; dropped or gone (vmnapd restarted, VM removed) */
			x->wait = W_DONE;
			release(x, rc == CURLE_OK && code == 200 ? st :
				   rc == CURLE_OK && code == 404 ? "wait gone" : "poll failed");
		} else if (now >= x->hold_deadline) {
			atomic_fetch_add(&x->l->c.hold_timeouts, 1);
			gw_warn(x->l->vm, "wait %s: still not delivered after %llu ms: releasing",
				x->wait_id, (unsigned long long)(gw_cfg.max_hold_ns / 1000000));
			x->wait = W_DONE;
			release(x, "hold timeout");
		} else {
			hold_schedule(x, now);
		}
		break;
	}
	curl_slist_free_all(a->hdrs);
	free(a);
}

/* ---- upstream transfer ------------------------------------------------ */

static void data_ready(struct xfer *x)
{
	if (x->data_ready)
		return;
	x->data_ready = true;
	x->t_ready = gw_now_ns();
	switch (x->wait) {
	case W_STARTED:
		send_ready(x);
		break;
	case W_UNMANAGED:
		release(x, "unmanaged");
		break;
	default:	/* W_STARTING: sent when the start answers */
		break;
	}
}

static size_t up_write(char *p, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	size_t n = sz * nm;
	bool wake;
	int ret;

	pthread_mutex_lock(&x->mu);
	x->headers_done = true;
	if (spool_pending(&x->sp) && spool_pending(&x->sp) + n > gw_cfg.spool_max)
		ret = -ENOBUFS;	/* an empty spool takes any chunk: no deadlock */
	else
		ret = spool_append(&x->sp, p, n);
	if (ret) {
		if (!x->paused) {
			atomic_fetch_add(&x->l->c.backpressure, 1);
			gw_debug(x->l->vm, "%s: %s: upstream paused", x->log_path,
				 ret == -ENOBUFS ? "spool full" : strerror(-ret));
		}
		x->paused = true;
		x->unpause_asked = false;
	}
	wake = x->released;
	pthread_mutex_unlock(&x->mu);
	if (wake)
		xfer_wake(x);
	x->ready_pending = true;	/* no multi calls from inside a callback */
	return ret ? CURL_WRITEFUNC_PAUSE : n;
}

static bool hop_by_hop(const char *name, size_t len)
{
	static const char *const hop[] = {
		"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
		"te", "trailer", "trailers", "transfer-encoding", "upgrade", "content-length",
		NULL,
	};

	for (const char *const *h = hop; *h; h++)
		if (strlen(*h) == len && !strncasecmp(*h, name, len))
			return true;
	return false;
}

static char *trim_dup(const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
		n--;
	return strndup(p, n);
}

/* Forget the response headers received so far (under x->mu). */
static void free_headers(struct xfer *x)
{
	struct hdr *h, *next;

	for (h = x->resp_headers; h; h = next) {
		next = h->next;
		free(h->name);
		free(h->value);
		free(h);
	}
	x->resp_headers = NULL;
	x->resp_tail = &x->resp_headers;
	x->content_length = -1;
}

static size_t up_header(char *p, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	size_t n = sz * nm;
	const char *colon;

	pthread_mutex_lock(&x->mu);
	if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', n);

		free_headers(x);	/* an interim (1xx) answer's */
		x->status = sp && (size_t)(sp - p) + 4 <= n ? atoi(sp + 1) : 0;
	} else if (n && (p[0] == ' ' || p[0] == '\t') && *x->resp_tail == NULL &&
		   x->resp_headers) {
		/* obsolete line folding: join to the previous header's value */
		struct hdr *last = x->resp_headers;
		char *more = trim_dup(p, n), *v;

		while (last->next)
			last = last->next;
		if (more && asprintf(&v, "%s %s", last->value, more) > 0) {
			free(last->value);
			last->value = v;
		}
		free(more);
	} else if ((colon = memchr(p, ':', n)) && colon > p) {
		size_t nl = (size_t)(colon - p);

		if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
			char *v = trim_dup(colon + 1, n - nl - 1);
			char *end;
			long long cl = v ? strtoll(v, &end, 10) : -1;

			x->content_length = v && *v && !*end && cl >= 0 ? cl : -1;
			free(v);
		} else if (!hop_by_hop(p, nl)) {
			struct hdr *h = calloc(1, sizeof(*h));

			if (h) {
				h->name = strndup(p, nl);
				h->value = trim_dup(colon + 1, n - nl - 1);
				if (h->name && h->value) {
					*x->resp_tail = h;
					x->resp_tail = &h->next;
				} else {
					free(h->name);
					free(h->value);
					free(h);
				}
			}
		}
	}
	pthread_mutex_unlock(&x->mu);
	return n;
}

static enum gw_upfail upfail_kind(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY:
		return GW_UP_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return GW_UP_TIMEOUT;
	case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING: case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
		return GW_UP_RESET;
	case CURLE_SSL_CONNECT_ERROR: case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER: case CURLE_SSL_CACERT_BADFILE:
		return GW_UP_TLS;
	default:
		return GW_UP_OTHER;
	}
}

static const char *const upfail_names[] = { "connect", "timeout", "reset", "tls", "other" };

/*
 * The upstream exchange ended.  An error before the first body byte
 * (headers may have come) becomes a 502, or a 504 for a timeout, with a
 * JSON body; after it, the body is cut short.
 */
static void up_done(struct xfer *x, CURLcode rc)
{
	curl_multi_remove_handle(multi, x->up);
	curl_easy_cleanup(x->up);
	x->up = NULL;
	pthread_mutex_lock(&x->mu);
	if (rc != CURLE_OK) {
		enum gw_upfail k = upfail_kind(rc);

		atomic_fetch_add(&x->l->c.upstream_errors[k], 1);
		gw_warn(x->l->vm, "%s: upstream %s error: %s%s", x->log_path, upfail_names[k],
			curl_easy_strerror(rc),
			x->sp.total_in ? " (after the body began: cut short)" : "");
		if (!x->sp.total_in) {
			int status = k == GW_UP_TIMEOUT ? 504 : 502;
			char body[256];
			int n = snprintf(body, sizeof(body),
					 "{\"error\": \"vmnap-gateway: upstream %s error: %s\", \"status\": %d}\n",
					 upfail_names[k], curl_easy_strerror(rc), status);
			struct hdr *h = calloc(1, sizeof(*h));

			free_headers(x);
			x->status = status;
			x->content_length = n;
			if (h) {
				h->name = strdup("Content-Type");
				h->value = strdup("application/json");
				*x->resp_tail = h;
				x->resp_tail = &h->next;
			}
			spool_free(&x->sp);
			spool_append(&x->sp, body, (size_t)n);
		} else {
			x->up_error = true;
		}
	}
	x->headers_done = true;
	x->up_done = true;
	pthread_mutex_unlock(&x->mu);
	xfer_wake(x);
	data_ready(x);
}

static void up_issue(struct xfer *x)
{
	CURL *e = curl_easy_init();

	if (!e) {
		up_done(x, CURLE_OUT_OF_MEMORY);
		return;
	}
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	if (gw_cfg.upstream_unix)
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, gw_cfg.upstream_unix);
	if (gw_cfg.upstream_ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, gw_cfg.upstream_ca);
	curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->req_headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, up_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, up_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, gw_cfg.connect_timeout_ms);
	/* --upstream-timeout bounds the wait for the first byte: sweep() */
	/* the body goes through as is: no decoding, no redirects followed */
	curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(e, CURLOPT_HTTP_TRANSFER_DECODING, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);	/* no dot-segment squashing */
	curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	if (x->head) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (x->has_body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body ? x->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
	}
	if (strcmp(x->method, x->has_body ? "POST" : x->head ? "HEAD" : "GET"))
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
	x->up = e;
	curl_multi_add_handle(multi, e);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void release(struct xfer *x, const char *why)
{
	uint64_t now = gw_now_ns();
	bool was;

	pthread_mutex_lock(&x->mu);
	was = x->released;
	x->released = true;
	pthread_mutex_unlock(&x->mu);
	if (was)
		return;
	x->t_release = now;
	if (x->t_ready)
		atomic_fetch_add(&x->l->c.hold_ns_total, now - x->t_ready);
	gw_debug(x->l->vm, "%s: released (%s) %llu us after data ready", x->log_path, why,
		 (unsigned long long)(x->t_ready ? (now - x->t_ready) / 1000 : 0));
	xfer_wake(x);
}

static void on_submit(struct xfer *x)
{
	snprintf(x->wait_id, sizeof(x->wait_id), "%s.%llu", wait_prefix,
		 (unsigned long long)atomic_fetch_add(&wait_seq, 1));
	x->t_start = gw_now_ns();
	x->wait = W_STARTING;
	x->enext = active;
	active = x;
	x->in_list = true;
	pthread_mutex_lock(&x->mu);
	x->refs++;	/* the engine's, dropped when it is done with x */
	pthread_mutex_unlock(&x->mu);
	if (x->network)
		atomic_fetch_add(&x->l->c.net_waits, 1);
	else
		up_issue(x);
	api_issue(x, API_START);
}

static void on_cancel(struct xfer *x)
{
	if (!x->in_list || x->cancel_seen)
		return;
	x->cancel_seen = true;
	if (!x->network) {
		atomic_fetch_add(&x->l->c.client_gone, 1);
		gw_info(x->l->vm, "%s: client gone: wait %s ends", x->log_path, x->wait_id);
	}
	if (x->up) {
		curl_multi_remove_handle(multi, x->up);
		curl_easy_cleanup(x->up);
		x->up = NULL;
		pthread_mutex_lock(&x->mu);
		x->up_done = true;
		x->up_error = true;
		x->headers_done = true;
		pthread_mutex_unlock(&x->mu);
	}
	data_ready(x);
	if (x->wait == W_HOLD) {
		x->wait = W_DONE;
		release(x, "client gone");
	}
}

/* Data ready, due polls, unpauses; drop finished xfers.  Returns ms to sleep. */
static long sweep(void)
{
	uint64_t now = gw_now_ns(), next = UINT64_MAX;
	struct xfer **pp = &active;

	while (*pp) {
		struct xfer *x = *pp;
		bool done;

		if (x->ready_pending) {
			x->ready_pending = false;
			data_ready(x);
		}
		if (x->up && !x->data_ready && gw_cfg.upstream_timeout_ms) {
			uint64_t due = x->t_start + (uint64_t)gw_cfg.upstream_timeout_ms * 1000000ull;

			if (now >= due)
				up_done(x, CURLE_OPERATION_TIMEDOUT);
			else if (due < next)
				next = due;
		}
		if (x->wait == W_HOLD) {
			if (x->next_poll <= now) {
				x->wait = W_POLLING;
				api_issue(x, API_POLL);
			} else if (x->next_poll < next) {
				next = x->next_poll;
			}
		}
		pthread_mutex_lock(&x->mu);
		if (x->paused && x->up && spool_pending(&x->sp) <= gw_cfg.spool_max / 2) {
			x->paused = false;
			x->unpause_asked = false;
			pthread_mutex_unlock(&x->mu);
			curl_easy_pause(x->up, CURLPAUSE_CONT);
			pthread_mutex_lock(&x->mu);
		}
		done = !x->up && !x->api && x->released &&
		       (x->wait == W_DONE || x->wait == W_UNMANAGED);
		pthread_mutex_unlock(&x->mu);
		if (done) {
			*pp = x->enext;
			x->in_list = false;
			xfer_put(x);
			continue;
		}
		pp = &x->enext;
	}
	if (next == UINT64_MAX)
		return 1000;
	return (long)((next - now) / 1000000 + 1);
}

static void *engine_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&stopping) || active) {
		struct cmd *c, *q;
		CURLMsg *m;
		int running, left;
		long tmo;

		pthread_mutex_lock(&qmu);
		q = qhead;
		qhead = NULL;
		qtail = &qhead;
		pthread_mutex_unlock(&qmu);
		for (; q; q = c) {
			c = q->next;
			if (q->kind == CMD_SUBMIT && !atomic_load(&stopping))
				on_submit(q->x);
			else if (q->kind == CMD_SUBMIT)
				release(q->x, "shutting down");
			else if (q->kind == CMD_CANCEL)
				on_cancel(q->x);
			else if (q->kind == CMD_NET_READY && q->x->in_list)
				data_ready(q->x);
			/* CMD_UNPAUSE: sweep() looks at every paused transfer */
			xfer_put(q->x);
			free(q);
		}
		if (atomic_load(&stopping))
			for (struct xfer *x = active; x; x = x->enext)
				on_cancel(x);
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &left))) {
			struct api_call *a = NULL;
			struct xfer *x = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&a);
			if (a) {
				api_done(a, m->data.result);
				continue;
			}
			for (x = active; x && x->up != m->easy_handle; x = x->enext)
				;
			if (x)
				up_done(x, m->data.result);
		}
		tmo = sweep();
		curl_multi_poll(multi, NULL, 0, (int)(tmo > 1000 ? 1000 : tmo), NULL);
	}
	return NULL;
}

int engine_start(void)
{
	snprintf(wait_prefix, sizeof(wait_prefix), "gw-%x-%llx", (unsigned int)getpid(),
		 (unsigned long long)(gw_now_ns() / 1000000) & 0xffffffffull);
	multi = curl_multi_init();
	if (!multi)
		return -ENOMEM;
	if (pthread_create(&thread, NULL, engine_main, NULL)) {
		curl_multi_cleanup(multi);
		return -EAGAIN;
	}
	return 0;
}

void engine_stop(void)
{
	atomic_store(&stopping, true);
	curl_multi_wakeup(multi);
	pthread_join(thread, NULL);
	curl_multi_cleanup(multi);
}
