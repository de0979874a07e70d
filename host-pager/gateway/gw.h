/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * gw.h - vmnap-gateway: a per-VM HTTP reverse proxy in front of the model
 * API.  Each forwarded request is a wait on its VM in vmnapd (control API
 * over its unix socket); the upstream's first response byte marks it ready
 * and the response is held until vmnapd reports the VM running again.
 *
 * Threads: libmicrohttpd runs one thread per client connection (proxy.c);
 * they may block.  One engine thread (engine.c) drives every upstream
 * transfer and every control API call through one libcurl multi handle.
 * They share struct xfer under its mutex; the engine wakes a connection
 * thread through the xfer's eventfd, a connection thread wakes the engine
 * with curl_multi_wakeup().
 */
#ifndef VMNAP_GW_H
#define VMNAP_GW_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

#define GW_NAME_MAX	64	/* VM name, as vmnapd allows (with the NUL) */
#define GW_WAIT_ID_MAX	64	/* vmnapd's wait id limit (with the NUL) */

/* ---- logging: never header values, never query strings -------------- */

enum gw_log_level { GW_ERR, GW_WARN, GW_INFO, GW_DEBUG };
extern enum gw_log_level gw_log_level;
void gw_log(enum gw_log_level lvl, const char *subject, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define gw_err(s, ...)	gw_log(GW_ERR, s, __VA_ARGS__)
#define gw_warn(s, ...)	gw_log(GW_WARN, s, __VA_ARGS__)
#define gw_info(s, ...)	gw_log(GW_INFO, s, __VA_ARGS__)
#define gw_debug(s, ...)					\
	do {							\
		if (gw_log_level >= GW_DEBUG)			\
			gw_log(GW_DEBUG, s, __VA_ARGS__);	\
	} while (0)

uint64_t gw_now_ns(void);
/* Is @name (@nl bytes) one of the comma/space separated @tokens (a
 * Connection header's value)?  Case-insensitive. */
bool gw_token_listed(const char *tokens, const char *name, size_t nl);

/* ---- text that grows as it is printed (p: malloc'd, NUL-terminated) -- */

struct gw_buf {
	char *p;
	size_t len, cap;
	bool oom;	/* allocation failed: p freed, NULL; later prints do nothing */
};
void gw_bprintf(struct gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- spool: response bytes, memory up to a limit, then a temp file --- */

struct spool {
	char *mem;
	size_t mem_len, mem_off, mem_cap;
	size_t mem_limit;	/* bytes kept in memory before spilling */
	const char *dir;	/* where the temp file goes */
	int fd;			/* -1 until the first spill */
	off_t f_wr, f_rd;
	uint64_t total_in, spilled;
};

void spool_init(struct spool *s, size_t mem_limit, const char *dir);
/* Append all of @len bytes or none: 0, or -errno (the file write failed). */
int spool_append(struct spool *s, const void *p, size_t len);
/* Up to @max bytes in order; 0 when empty; -errno when the file fails. */
ssize_t spool_read(struct spool *s, void *buf, size_t max);
uint64_t spool_pending(const struct spool *s);
void spool_free(struct spool *s);

/* ---- configuration and counters -------------------------------------- */

enum gw_unmanaged { GW_UNM_VMNAPD_DOWN, GW_UNM_REFUSED, GW_NR_UNM };
enum gw_upfail { GW_UP_CONNECT, GW_UP_TIMEOUT, GW_UP_RESET, GW_UP_TLS, GW_UP_OTHER, GW_NR_UPFAIL };

struct gw_counters {
	atomic_ullong requests, responses, waits_started, waits_ready, unmanaged[GW_NR_UNM];
	atomic_ullong upstream_errors[GW_NR_UPFAIL], client_gone, held, hold_timeouts;
	atomic_ullong hold_ns_total, spilled_bytes, bytes_out, rejected, backpressure;
	atomic_ullong net_waits;	/* proxy mode: network waits raised */
};

struct listener {
	char vm[GW_NAME_MAX];
	bool proxy;		/* the HTTP proxy for the VM's downloads (netproxy.c) */
	char spec[256];		/* unix:PATH or tcp:HOST:PORT */
	int fd;
	char unix_path[108];	/* to unlink at exit; "" for tcp */
	void *mhd;		/* struct MHD_Daemon */
	struct gw_counters c;
	struct listener *next;
};

struct gw_config {
	const char *api_sock;		/* vmnapd's control API */
	const char *upstream;		/* base URL, no trailing '/' */
	const char *upstream_unix;	/* reach the upstream through this socket */
	const char *upstream_ca;	/* CA bundle for an HTTPS upstream (libcurl's default) */
	const char *spool_dir;
	size_t hold_mem;		/* per response, in memory */
	uint64_t spool_max;		/* per response, memory + file; beyond: backpressure */
	size_t max_body;		/* request body limit */
	unsigned int max_conns;		/* per listener */
	unsigned int client_timeout_s;	/* idle client connection */
	long connect_timeout_ms, upstream_timeout_ms;
	uint64_t max_hold_ns;		/* hold after ready at most this long */
	uint64_t net_stall_ns;		/* proxy: upstream silent this long -> network wait */
	struct listener *listeners;
};

extern struct gw_config gw_cfg;
extern struct gw_counters gw_total;	/* not per VM: vmnapd reachability */
extern atomic_bool gw_vmnapd_down;

#define CNT_INC(l, field)	do { atomic_fetch_add(&(l)->c.field, 1); } while (0)

/* ---- one forwarded request ------------------------------------------- */

struct hdr {
	char *name, *value;
	struct hdr *next;
};

struct xfer {
	pthread_mutex_t mu;
	int refs;			/* connection thread + engine */
	int efd;			/* engine -> connection thread */
	struct listener *l;
	char wait_id[GW_WAIT_ID_MAX];
	char log_path[96];		/* method and path without the query, for logs */
	uint64_t t_start, t_ready, t_release;

	/* request: set by the connection thread before submit, then read-only */
	char *method, *url;
	struct curl_slist *req_headers;
	char *body;
	size_t body_len;
	bool has_body, head;

	/* engine only */
	CURL *up, *api;
	char errbuf[CURL_ERROR_SIZE];
	int wait;			/* enum wait_phase (engine.c) */
	bool data_ready, ready_pending, cancel_seen, in_list;
	uint64_t next_poll, poll_delay, hold_deadline;
	struct xfer *enext;

	/* shared, under mu */
	int status;
	struct hdr *resp_headers, **resp_tail;
	int64_t content_length;		/* -1: unknown */
	bool headers_done, up_done, up_error, released, cancelled;
	bool paused, unpause_asked;
	bool managed;			/* vmnapd accepted the wait */
	bool network;			/* a proxy's network wait: no upstream transfer,
					 * nothing held; ready at engine_net_ready() */
	struct spool sp;
};

struct xfer *xfer_new(struct listener *l);
void xfer_put(struct xfer *x);
void xfer_wake(struct xfer *x);	/* kick the connection thread */

/* engine.c */
int engine_start(void);
void engine_stop(void);		/* ends outstanding waits (ready) first */
void engine_submit(struct xfer *x);
void engine_cancel(struct xfer *x);
void engine_unpause(struct xfer *x);
/* Network waits (netproxy.c): x from xfer_new() with x->network set. */
void engine_net_start(struct xfer *x);
void engine_net_ready(struct xfer *x);

/* proxy.c */
int proxy_start(struct listener *l);
void proxy_stop(struct listener *l);

/* netproxy.c */
int netproxy_start(struct listener *l);
void netproxy_stop(void);	/* every proxy listener and connection */

/* main.c: listen on "unix:PATH" or "tcp:HOST:PORT"; -1 and a message */
int gw_listen(const char *spec, char *unix_path, size_t n);
char *gw_metrics_text(size_t *len);

/* fake.c: the fake model API */
int fake_main(const char *trajectory, struct listener *ls);

#endif
