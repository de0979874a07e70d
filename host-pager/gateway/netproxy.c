// SPDX-License-Identifier: GPL-2.0-only
/*
 * netproxy.c - vmnap-gateway's second mode: an HTTP proxy for a VM's
 * downloads (--proxy VM=unix:PATH|tcp:HOST:PORT), whose stalls become
 * "network" waits of that VM in vmnapd.
 *
 * One thread per client connection.  The request head (at most
 * NP_HEAD_MAX bytes, NP_MAX_HEADERS lines, within --client-timeout) is
 * parsed strictly:
 *   CONNECT host:port HTTP/1.x     -> a TCP tunnel: "200 Connection
 *                                     established", then bytes both ways
 *   METHOD http://host[:port]/path -> the request goes to host:port in
 *                                     origin form, hop-by-hop headers
 *                                     dropped, "Connection: close" added;
 *                                     then bytes both ways until it ends
 * Anything else is answered with a status and counted (rejected): 400
 * (bad request line, header or target; https:// without CONNECT), 408
 * (head not complete in time), 431 (head too large), 502/504 (target
 * unreachable / connect timed out, counted as upstream errors), 503
 * (--max-conns connections already).
 *
 * Waits: the client "spoke last" when its latest bytes came after the
 * upstream's latest: the upstream owes an answer.  When it stays silent
 * --net-stall ms longer, a network wait starts (engine_net_start); the
 * upstream's next byte, or the end of the connection, makes it ready.
 * A stall in the middle of a response (the upstream spoke last) is not
 * seen: an idle keep-alive connection looks the same.  Nothing is held:
 * bytes are forwarded as they come (a paused guest reads them later).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw.h"

#define NP_HEAD_MAX	16384
#define NP_MAX_HEADERS	100
#define NP_BUF		65536

struct pconn {
	struct listener *l;
	int cfd, ufd;
	char head[NP_HEAD_MAX + 1];
	size_t head_len, have;		/* head bytes; bytes read (head + more) */
	char host[256], port[8];
	char what[300];			/* "CONNECT host:port" / "GET host:port" for logs */
	struct pconn *next;
};

static pthread_mutex_t np_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pconn *np_conns;
static unsigned int np_count;
static atomic_bool np_stopping;
static int np_stop_pipe[2] = { -1, -1 };
struct np_acceptor {
	struct listener *l;
	pthread_t t;
	struct np_acceptor *next;
};
static struct np_acceptor *np_acceptors;

static void reject(struct pconn *pc, unsigned int status, const char *reason, const char *msg)
{
	char body[400], buf[700];
	int b, n;

	atomic_fetch_add(&pc->l->c.rejected, 1);
	gw_info(pc->l->vm, "proxy: %u %s: %s", status, reason, msg);
	b = snprintf(body, sizeof(body), "{\"error\": \"vmnap-gateway proxy: %s\", \"status\": %u}\n",
		     msg, status);
	if (b < 0 || (size_t)b >= sizeof(body))
		b = 0;
	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
		     "Content-Length: %d\r\n\r\n%.*s", status, reason, b, b, body);
	if (n > 0 && (size_t)n < sizeof(buf) &&
	    send(pc->cfd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		gw_debug(pc->l->vm, "proxy: reply %u not sent: %s", status, strerror(errno));
}

/* ---- the request head ------------------------------------------------- */

static bool tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* 1: whole head read; 0: the client left; -408/-431: refused. */
static int read_head(struct pconn *pc)
{
	uint64_t deadline = gw_now_ns() + (uint64_t)gw_cfg.client_timeout_s * 1000000000ull;

	for (;;) {
		char *end;
		struct pollfd p = { .fd = pc->cfd, .events = POLLIN };
		uint64_t now = gw_now_ns();
		ssize_t n;

		pc->head[pc->have] = 0;
		end = strstr(pc->head, "\r\n\r\n");
		if (end) {
			pc->head_len = (size_t)(end - pc->head) + 4;
			return 1;
		}
		if (memchr(pc->head, 0, pc->have))
			return -400;	/* a NUL in the head */
		if (pc->have >= NP_HEAD_MAX)
			return -431;
		if (now >= deadline)
			return -408;
		if (poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) < 0 && errno != EINTR)
			return 0;
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(pc->cfd, pc->head + pc->have, NP_HEAD_MAX - pc->have, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return 0;
		if (n > 0)
			pc->have += (size_t)n;
	}
}

/* host[:port] (or [v6][:port]) into pc->host and pc->port; false if malformed. */
static bool parse_authority(struct pconn *pc, const char *a, size_t len, const char *defport,
			    bool need_port)
{
	const char *colon = NULL, *h = a;
	size_t hl;

	if (len && a[0] == '[') {
		const char *rb = memchr(a, ']', len);

		if (!rb)
			return false;
		h = a + 1;
		hl = (size_t)(rb - h);
		if ((size_t)(rb - a) + 1 < len) {
			if (rb[1] != ':')
				return false;
			colon = rb + 1;
		}
		for (size_t i = 0; i < hl; i++)
			if (!strchr("0123456789abcdefABCDEF:.", h[i]))
				return false;
	} else {
		colon = memchr(a, ':', len);
		hl = colon ? (size_t)(colon - a) : len;
		for (size_t i = 0; i < hl; i++)
			if (!((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= 'A' && a[i] <= 'Z') ||
			      (a[i] >= '0' && a[i] <= '9') || a[i] == '-' || a[i] == '.' || a[i] == '_'))
				return false;
	}
	if (!hl || hl >= sizeof(pc->host) || (need_port && !colon))
		return false;
	memcpy(pc->host, h, hl);
	pc->host[hl] = 0;
	if (colon) {
		size_t pl = len - (size_t)(colon + 1 - a);
		unsigned long port = 0;

		if (!pl || pl > 5)
			return false;
		for (size_t i = 0; i < pl; i++) {
			if (colon[1 + i] < '0' || colon[1 + i] > '9')
				return false;
			port = port * 10 + (unsigned long)(colon[1 + i] - '0');
		}
		if (!port || port > 65535)
			return false;
		snprintf(pc->port, sizeof(pc->port), "%lu", port);
	} else {
		snprintf(pc->port, sizeof(pc->port), "%s", defport);
	}
	return true;
}

struct head {
	char method[17];
	const char *target;
	size_t target_len;
	bool connect;
	const char *path;		/* origin form (after a "/" when it starts '?') */
	size_t path_len;
	const char *authority;		/* as sent, for a Host header */
	size_t authority_len;
	const char *hname[NP_MAX_HEADERS], *hval[NP_MAX_HEADERS];
	size_t hname_len[NP_MAX_HEADERS], hval_len[NP_MAX_HEADERS];
	unsigned int nh;
};

/* 0, or an HTTP status to refuse with (*why says why). */
static unsigned int parse_head(struct pconn *pc, struct head *hd, const char **why)
{
	char *p = pc->head, *eol = strstr(p, "\r\n"), *sp1, *sp2;

	*why = "bad request line";
	sp1 = memchr(p, ' ', (size_t)(eol - p));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == p || (size_t)(sp1 - p) >= sizeof(hd->method) || sp2 == sp1 + 1)
		return 400;
	for (char *c = p; c < sp1; c++)
		if (!tchar(*c))
			return 400;
	memcpy(hd->method, p, (size_t)(sp1 - p));
	hd->method[sp1 - p] = 0;
	for (char *c = sp1 + 1; c < sp2; c++)
		if (*c <= ' ' || *c > '~')
			return 400;
	if ((size_t)(eol - sp2 - 1) != 8 || (strncmp(sp2 + 1, "HTTP/1.1", 8) && strncmp(sp2 + 1, "HTTP/1.0", 8))) {
		*why = "HTTP/1.0 or HTTP/1.1 only";
		return 400;
	}
	hd->target = sp1 + 1;
	hd->target_len = (size_t)(sp2 - sp1 - 1);
	hd->connect = !strcmp(hd->method, "CONNECT");

	/* headers */
	for (p = eol + 2; strncmp(p, "\r\n", 2); p = eol + 2) {
		char *colon, *v, *ve;

		eol = strstr(p, "\r\n");
		*why = "bad header line";
		if (*p == ' ' || *p == '\t')
			return 400;	/* obsolete line folding */
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return 400;
		for (char *c = p; c < colon; c++)
			if (!tchar(*c))
				return 400;
		for (char *c = colon + 1; c < eol; c++)
			if ((unsigned char)*c < ' ' && *c != '\t')
				return 400;
		if (hd->nh == NP_MAX_HEADERS) {
			*why = "too many header lines";
			return 431;
		}
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		hd->hname[hd->nh] = p;
		hd->hname_len[hd->nh] = (size_t)(colon - p);
		hd->hval[hd->nh] = v;
		hd->hval_len[hd->nh] = (size_t)(ve - v);
		hd->nh++;
	}

	/* target */
	if (hd->connect) {
		*why = "bad CONNECT target (want host:port)";
		if (!parse_authority(pc, hd->target, hd->target_len, NULL, true))
			return 400;
		snprintf(pc->what, sizeof(pc->what), "CONNECT %s:%s", pc->host, pc->port);
		return 0;
	}
	if (hd->target_len >= 8 && !strncasecmp(hd->target, "https://", 8)) {
		*why = "https:// through CONNECT only";
		return 400;
	}
	if (hd->target_len < 8 || strncasecmp(hd->target, "http://", 7)) {
		*why = "not a proxy request (want an http:// URI or CONNECT)";
		return 400;
	}
	{
		const char *a = hd->target + 7, *end = hd->target + hd->target_len;
		const char *slash = a;

		while (slash < end && *slash != '/' && *slash != '?' && *slash != '#')
			slash++;
		*why = "bad target host";
		if (memchr(a, '@', (size_t)(slash - a)) ||
		    !parse_authority(pc, a, (size_t)(slash - a), "80", false))
			return 400;
		if (slash < end && *slash == '#') {
			*why = "bad target path";
			return 400;
		}
		hd->authority = a;
		hd->authority_len = (size_t)(slash - a);
		hd->path = slash;
		hd->path_len = (size_t)(end - slash);
	}
	snprintf(pc->what, sizeof(pc->what), "%s %s:%s", hd->method, pc->host, pc->port);
	return 0;
}

/* ---- the upstream connection ---------------------------------------- */

/* A connected socket, or -1 with *timeout set when it timed out. */
static int dial(struct pconn *pc, bool *timeout, const char **err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, rc;

	*timeout = false;
	rc = getaddrinfo(pc->host, pc->port, &hints, &res);
	if (rc) {
		*err = gai_strerror(rc);
		return -1;
	}
	*err = "connection refused";
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		struct pollfd p = { .events = POLLOUT };
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
			*err = strerror(errno);
			close(fd);
			fd = -1;
			continue;
		}
		p.fd = fd;
		rc = poll(&p, 1, (int)gw_cfg.connect_timeout_ms);
		if (rc == 0) {
			*timeout = true;
			*err = "connect timed out";
		} else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
			*err = strerror(soerr ? soerr : errno);
		} else {
			break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (poll(&pf, 1, 10000) <= 0)
				return false;
		} else {
			return false;
		}
	}
	return true;
}

static bool hop_header(const struct head *hd, unsigned int i, const char *conn_tokens)
{
	static const char *const hop[] = {
		"connection", "proxy-connection", "keep-alive", "proxy-authorization",
		"proxy-authenticate", "te", "trailer", "upgrade", NULL,
	};

	for (const char *const *h = hop; *h; h++)
		if (strlen(*h) == hd->hname_len[i] && !strncasecmp(*h, hd->hname[i], hd->hname_len[i]))
			return true;
	return gw_token_listed(conn_tokens, hd->hname[i], hd->hname_len[i]);
}

/* The plain request in origin form, to the upstream. */
static bool send_request(struct pconn *pc, const struct head *hd)
{
	char conn_tokens[256] = "";
	bool has_host = false, ok;
	struct gw_buf o = { .p = malloc(pc->head_len + 1024), .cap = pc->head_len + 1024 };

	if (!o.p)
		return false;
	for (unsigned int i = 0; i < hd->nh; i++) {
		if (hd->hname_len[i] == 10 && !strncasecmp(hd->hname[i], "connection", 10))
			snprintf(conn_tokens, sizeof(conn_tokens), "%.*s", (int)hd->hval_len[i], hd->hval[i]);
		if (hd->hname_len[i] == 4 && !strncasecmp(hd->hname[i], "host", 4))
			has_host = true;
	}
	gw_bprintf(&o, "%s %s%.*s HTTP/1.1\r\n", hd->method,
		hd->path_len && hd->path[0] == '/' ? "" : "/", (int)hd->path_len, hd->path);
	if (!has_host)
		gw_bprintf(&o, "Host: %.*s\r\n", (int)hd->authority_len, hd->authority);
	for (unsigned int i = 0; i < hd->nh; i++)
		if (!hop_header(hd, i, conn_tokens))
			gw_bprintf(&o, "%.*s: %.*s\r\n", (int)hd->hname_len[i], hd->hname[i],
				(int)hd->hval_len[i], hd->hval[i]);
	gw_bprintf(&o, "Connection: close\r\n\r\n");
	ok = !o.oom && send_all(pc->ufd, o.p, o.len);
	free(o.p);
	return ok;
}

/* ---- the tunnel and its waits ----------------------------------------- */

struct pipe_buf {
	char b[NP_BUF];
	size_t off, len;
	bool eof;	/* the reading side ended */
	bool shut;	/* and the writing side was told */
};

static void wait_end(struct xfer **w)
{
	if (!*w)
		return;
	engine_net_ready(*w);
	xfer_put(*w);
	*w = NULL;
}

static void wait_begin(struct pconn *pc, struct xfer **w)
{
	struct xfer *x;

	if (atomic_load(&np_stopping))
		return;		/* the engine stops after us */
	x = xfer_new(pc->l);
	if (!x) {
		gw_warn(pc->l->vm, "proxy: out of memory for a network wait");
		return;
	}
	x->network = true;
	snprintf(x->log_path, sizeof(x->log_path), "%.95s", pc->what);
	gw_debug(pc->l->vm, "proxy: %s: upstream silent %llu ms: network wait", pc->what,
		 (unsigned long long)(gw_cfg.net_stall_ns / 1000000));
	engine_net_start(x);
	*w = x;		/* xfer_new()'s reference, ours until wait_end() */
}

/* Move bytes from @from into @pb, and from @pb to @to; false on an error. */
static bool pump_in(int from, struct pipe_buf *pb, bool *got)
{
	ssize_t n;

	*got = false;
	if (pb->eof || pb->len == sizeof(pb->b))
		return true;
	n = recv(from, pb->b + pb->len, sizeof(pb->b) - pb->len, MSG_DONTWAIT);
	if (n > 0) {
		pb->len += (size_t)n;
		*got = true;
	} else if (n == 0) {
		pb->eof = true;
	} else if (errno != EAGAIN && errno != EINTR) {
		return false;
	}
	return true;
}

static bool pump_out(int to, struct pipe_buf *pb, atomic_ullong *count)
{
	if (pb->len > pb->off) {
		ssize_t n = send(to, pb->b + pb->off, pb->len - pb->off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n > 0) {
			pb->off += (size_t)n;
			if (count)
				atomic_fetch_add(count, (unsigned long long)n);
		}
		if (pb->off == pb->len)
			pb->off = pb->len = 0;	/* all sent: room for a whole buffer again */
	}
	if (pb->eof && pb->off == pb->len && !pb->shut) {
		shutdown(to, SHUT_WR);
		pb->shut = true;
	}
	return true;
}

static void tunnel(struct pconn *pc, uint64_t client_spoke)
{
	struct pipe_buf *c2u = calloc(1, sizeof(*c2u)), *u2c = calloc(1, sizeof(*u2c));
	uint64_t last_c = client_spoke, last_u = 0;
	struct xfer *w = NULL;

	if (!c2u || !u2c)
		goto out;
	/* what the client sent after the head goes first */
	if (pc->have > pc->head_len) {
		memcpy(c2u->b, pc->head + pc->head_len, pc->have - pc->head_len);
		c2u->len = pc->have - pc->head_len;
		last_c = gw_now_ns();
	}
	/* until the upstream's side ended and reached the client */
	while (!u2c->shut && !atomic_load(&np_stopping)) {
		struct pollfd p[2] = {
			{ .fd = pc->cfd, .events = (short)((!c2u->eof && c2u->len < sizeof(c2u->b) ? POLLIN : 0) |
							   (u2c->len > u2c->off ? POLLOUT : 0)) },
			{ .fd = pc->ufd, .events = (short)((!u2c->eof && u2c->len < sizeof(u2c->b) ? POLLIN : 0) |
							   (c2u->len > c2u->off ? POLLOUT : 0)) },
		};
		uint64_t now = gw_now_ns();
		int tmo = -1;
		bool got;

		/* the upstream owes an answer: a wait once it is silent too long */
		if (last_c > last_u && !w) {
			uint64_t due = last_c + gw_cfg.net_stall_ns;

			if (now >= due)
				wait_begin(pc, &w);
			else
				tmo = (int)((due - now) / 1000000 + 1);
		}
		if (poll(p, 2, tmo) < 0 && errno != EINTR)
			break;
		if ((p[0].revents & POLLNVAL) || (p[1].revents & POLLNVAL))
			break;
		if (!pump_in(pc->cfd, c2u, &got))
			break;
		if (got)
			last_c = gw_now_ns();
		if (!pump_in(pc->ufd, u2c, &got))
			break;
		if (got) {
			last_u = gw_now_ns();
			wait_end(&w);
		}
		if (!pump_out(pc->ufd, c2u, NULL) || !pump_out(pc->cfd, u2c, &pc->l->c.bytes_out))
			break;
		if ((p[0].revents & POLLERR) || (p[1].revents & POLLERR))
			break;
	}
out:
	wait_end(&w);
	free(c2u);
	free(u2c);
}

/* ---- connections -------------------------------------------------------- */

static void *conn_main(void *arg)
{
	struct pconn *pc = arg, **pp;
	struct head *hd = calloc(1, sizeof(*hd));
	const char *why = NULL, *err = "";
	unsigned int status;
	bool timeout;
	int r;

	if (!hd)
		goto out;
	r = read_head(pc);
	if (r == 0)
		goto out;	/* left before a whole head: nothing to answer */
	atomic_fetch_add(&pc->l->c.requests, 1);
	if (r < 0) {
		if (r == -408)
			reject(pc, 408, "Request Timeout", "request head not complete in time");
		else if (r == -431)
			reject(pc, 431, "Request Header Fields Too Large", "request head too large");
		else if (r == -400)
			reject(pc, 400, "Bad Request", "NUL byte in the request head");
		goto out;
	}
	status = parse_head(pc, hd, &why);
	if (status) {
		reject(pc, status, status == 431 ? "Request Header Fields Too Large" : "Bad Request", why);
		goto out;
	}
	pc->ufd = dial(pc, &timeout, &err);
	if (pc->ufd < 0) {
		char msg[300];
		enum gw_upfail k = timeout ? GW_UP_TIMEOUT : GW_UP_CONNECT;

		atomic_fetch_add(&pc->l->c.upstream_errors[k], 1);
		snprintf(msg, sizeof(msg), "%.200s: %.90s", pc->what, err);
		reject(pc, timeout ? 504 : 502, timeout ? "Gateway Timeout" : "Bad Gateway", msg);
		atomic_fetch_sub(&pc->l->c.rejected, 1);	/* counted as an upstream error */
		goto out;
	}
	gw_info(pc->l->vm, "proxy: %s", pc->what);
	if (hd->connect) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		atomic_fetch_add(&pc->l->c.responses, 1);
		if (send_all(pc->cfd, ok, sizeof(ok) - 1))
			tunnel(pc, 0);
	} else {
		atomic_fetch_add(&pc->l->c.responses, 1);
		if (send_request(pc, hd))
			tunnel(pc, gw_now_ns());
	}
out:
	free(hd);
	pthread_mutex_lock(&np_mu);
	for (pp = &np_conns; *pp != pc; pp = &(*pp)->next)
		;
	*pp = pc->next;
	np_count--;
	pthread_mutex_unlock(&np_mu);
	if (pc->ufd >= 0)
		close(pc->ufd);
	close(pc->cfd);
	free(pc);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct listener *l = arg;

	while (!atomic_load(&np_stopping)) {
		struct pollfd p[2] = { { .fd = l->fd, .events = POLLIN },
				       { .fd = np_stop_pipe[0], .events = POLLIN } };
		struct pconn *pc;
		pthread_attr_t at;
		pthread_t t;
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pc = calloc(1, sizeof(*pc));
		if (!pc) {
			close(fd);
			continue;
		}
		pc->l = l;
		pc->cfd = fd;
		pc->ufd = -1;
		pthread_mutex_lock(&np_mu);
		if (np_count >= gw_cfg.max_conns) {
			pthread_mutex_unlock(&np_mu);
			atomic_fetch_add(&l->c.requests, 1);
			reject(pc, 503, "Service Unavailable", "too many connections (--max-conns)");
			close(fd);
			free(pc);
			continue;
		}
		pc->next = np_conns;
		np_conns = pc;
		np_count++;
		pthread_mutex_unlock(&np_mu);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 * 1024);
		if (pthread_create(&t, &at, conn_main, pc)) {
			pthread_mutex_lock(&np_mu);
			np_conns = pc->next;	/* still the head: only we add */
			np_count--;
			pthread_mutex_unlock(&np_mu);
			reject(pc, 503, "Service Unavailable", "cannot start a thread");
			close(fd);
			free(pc);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

int netproxy_start(struct listener *l)
{
	struct np_acceptor *a = calloc(1, sizeof(*a));

	if (!a)
		return -1;
	if (np_stop_pipe[0] < 0 && pipe2(np_stop_pipe, O_CLOEXEC)) {
		free(a);
		return -1;
	}
	a->l = l;
	if (pthread_create(&a->t, NULL, accept_main, l)) {
		free(a);
		return -1;
	}
	a->next = np_acceptors;
	np_acceptors = a;
	return 0;
}

void netproxy_stop(void)
{
	struct np_acceptor *a, *next;

	if (!np_acceptors)
		return;
	atomic_store(&np_stopping, true);
	if (write(np_stop_pipe[1], "x", 1) < 0)
		gw_warn(NULL, "proxy: stop pipe: %s", strerror(errno));
	for (a = np_acceptors; a; a = next) {
		next = a->next;
		pthread_join(a->t, NULL);
		free(a);
	}
	np_acceptors = NULL;
	/* wake every connection; each ends its wait and goes */
	for (int i = 0; i < 300; i++) {
		unsigned int left;

		pthread_mutex_lock(&np_mu);
		for (struct pconn *pc = np_conns; pc; pc = pc->next)
			shutdown(pc->cfd, SHUT_RDWR);
		left = np_count;
		pthread_mutex_unlock(&np_mu);
		if (!left)
			break;
		usleep(10000);
	}
}
