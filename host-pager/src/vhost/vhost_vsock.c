// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_vsock.c - the vsock device behind vhost-user; see vhost_vsock.h.
 *
 * Queues: 0 RX (device -> guest), 1 TX (guest -> device), 2 events
 * (unused: no transport reset is ever announced).
 *
 * One connection (struct vsock_conn) per stream, keyed by (host port,
 * guest port).  Its host end is a unix socket (bridged ports) or the VM's
 * guest link (port VMNAP_DEFAULT_PORT).  Everything owed to the guest is
 * state on the connection, not a queued packet: need_request/response/
 * credit_update/shutdown flags, plus "the host socket is readable" or
 * "link bytes are queued".  A connection with something owed sits on the
 * rx list; RX processing walks that list round-robin and writes one packet
 * per guest buffer.  So memory stays bounded by the number of connections
 * however long the guest keeps its RX queue full, and TX processing never
 * waits for RX.  RSTs need no connection: they go to a bounded queue and
 * the connection is freed at once.
 *
 * All work runs from one zero-delay timer (vsock_work), scheduled by
 * kicks, socket events and vhost_vsock_memory_ready, so callbacks never
 * re-enter the ring code.  While paused the timer does nothing;
 * set_paused(false) schedules it.  A queue whose next chain is not
 * resident yet stops there and is not rescheduled until memory_ready.
 * A turn that filled RX chains, or followed the guest's RX kick (more
 * buffers posted), ends by telling the owner (ops.rx_ahead), which can
 * have the next chains' buffers read back before a packet needs them.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/virtio_vsock.h>

#include "guest_link.h"
#include "log.h"
#include "usock.h"
#include "vhost_user.h"
#include "vhost_vsock.h"

#define VSOCK_RXQ		0U
#define VSOCK_TXQ		1U
#define VSOCK_EVQ		2U
#define VSOCK_NQUEUES		3U
#define VSOCK_CONFIG_SIZE	8U	/* struct virtio_vsock_config: le64 guest_cid */
#define VSOCK_HDR_SIZE		sizeof(struct virtio_vsock_hdr)

/* Credit vmnapd gives the guest per connection (guest data held here). */
#define VSOCK_CONN_BUF_ALLOC	(256U * 1024U)
/* Tell the guest about freed credit once its view of it drops below this. */
#define VSOCK_CREDIT_LOW	(VSOCK_CONN_BUF_ALLOC / 2U)
/* Largest payload of one packet to the guest (Linux's own bound). */
#define VSOCK_RX_PAYLOAD_MAX	(64U * 1024U)
/* Link bytes queued for the guest before the link is told to wait. */
#define VSOCK_LINKQ_MAX		(256U * 1024U)
/* RSTs for strangers waiting for an RX buffer. */
#define VSOCK_RSTQ_MAX		256U
/* Chains or packets handled per queue before other work gets a turn. */
#define VSOCK_BUDGET		256U
/*
 * ... and time: a turn of the device (copies between guest buffers and
 * host sockets) ends once it has run this long; the chain in hand is
 * finished first, and the rest waits for the next turn, after every other
 * fd and timer had theirs.  Store reads never happen in a turn: memory
 * that is out is read back by the pager's worker (make_resident).
 */
#define VSOCK_TURN_NS		(2ULL * 1000000ULL)
/* Host ports for host-initiated connections start here (as Firecracker). */
#define VSOCK_LOCAL_PORT_FIRST	(1U << 30)
#define VSOCK_CONN_HASH		256U
#define VSOCK_CONNECT_LINE_MAX	32U
/* A host client must send its CONNECT line / the guest answer within. */
#define VSOCK_CONNECT_LINE_TIMEOUT_NS	(5ULL * 1000000000ULL)
#define VSOCK_CONNECT_TIMEOUT_NS	(30ULL * 1000000000ULL)
#define VSOCK_LISTEN_BACKLOG	64

enum conn_kind { CONN_UNIX, CONN_LINK };

enum conn_state {
	CONN_CONNECT_LINE,	/* host client, waiting for "CONNECT P\n" */
	CONN_CONNECTING,	/* REQUEST owed or sent, no RESPONSE yet */
	CONN_ESTABLISHED,
};

/* A byte queue with a fixed capacity, allocated on first use. */
struct fifo {
	uint8_t *buf;
	size_t cap, head, len;
};

struct vsock_conn {
	struct vsock_conn *next, **pprev;	/* every connection of the VM */
	struct vsock_conn *hnext;	/* hash chain */
	struct vsock_conn *rx_next;	/* rx list */
	bool on_rx_list;
	struct vhost_vsock *vs;
	enum conn_kind kind;
	enum conn_state state;
	bool hashed;
	int fd;				/* CONN_UNIX */
	struct guest_link *link;	/* CONN_LINK while the session lasts */
	uint32_t local_port, peer_port;	/* host port, guest port */
	uint32_t events;		/* epoll mask the fd is watched for */
	struct loop_timer timer;	/* CONNECT line / connect timeout */
	char line[VSOCK_CONNECT_LINE_MAX];
	size_t line_len;

	/* owed to the guest */
	bool need_request, need_response, need_credit_update, need_shutdown;
	bool readable;			/* host socket may have data */
	bool host_eof;			/* no more host data (SHUTDOWN sent/owed) */
	bool close_when_flushed;	/* link closed: RST once linkq is sent */
	bool link_blocked;		/* the link waits for tx_ready */

	/* guest -> host */
	uint32_t rx_cnt;		/* bytes received from the guest */
	uint32_t fwd_cnt;		/* of those, delivered to the host end */
	uint32_t last_fwd_cnt_sent;
	struct fifo pending;		/* received, not yet written to fd */
	bool guest_shut_send, guest_shut_rcv;

	/* host -> guest */
	uint32_t tx_cnt;		/* bytes sent to the guest */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
	struct fifo linkq;		/* link bytes for the guest */
};

struct stray_rst {
	uint32_t local_port, peer_port;
};

struct vhost_vsock {
	struct vhost_vsock_ops ops;
	void *opaque;
	struct loop *loop;
	struct vhost_user *vu;
	struct vhost_user_ops vu_ops;	/* vsock_vu_ops, + map_fd if the owner maps */
	char subject[96];
	char *uds_path;
	uint64_t guest_cid;
	int listen_fd;
	bool paused;
	bool rx_ahead_due;	/* the next RX chains changed: tell the owner */
	struct loop_timer work;
	uint64_t turn_end_ns;		/* the current turn's time budget */

	struct vsock_conn *conns;	/* all, including unhashed ones */
	struct vsock_conn *hash[VSOCK_CONN_HASH];
	unsigned int nconns;
	struct vsock_conn *rx_head, *rx_tail;
	struct stray_rst rstq[VSOCK_RSTQ_MAX];
	unsigned int rstq_head, rstq_len;
	uint32_t next_local_port;

	struct virtq_chain chain;	/* scratch, too big for the stack */
	struct vhost_vsock_stats stats;
};

/* ---- byte queue ------------------------------------------------------ */

static size_t fifo_space(const struct fifo *f)
{
	return f->cap - f->len;
}

/* Append up to @len bytes; returns bytes taken (bounded by capacity). */
static size_t fifo_push(struct fifo *f, size_t cap, const void *data, size_t len)
{
	size_t done = 0;

	if (!f->buf) {
		f->buf = malloc(cap);
		if (!f->buf)
			return 0;
		f->cap = cap;
	}
	if (len > fifo_space(f))
		len = fifo_space(f);
	while (done < len) {
		size_t tail = (f->head + f->len) % f->cap;
		size_t n = f->cap - tail;

		if (n > len - done)
			n = len - done;
		memcpy(f->buf + tail, (const uint8_t *)data + done, n);
		f->len += n;
		done += n;
	}
	return done;
}

/* The first contiguous run of queued bytes. */
static size_t fifo_peek(const struct fifo *f, const uint8_t **p)
{
	size_t n = f->cap - f->head;

	*p = f->buf + f->head;
	return n < f->len ? n : f->len;
}

static void fifo_consume(struct fifo *f, size_t n)
{
	f->head = (f->head + n) % f->cap;
	f->len -= n;
	if (!f->len)
		f->head = 0;
}

static void fifo_free(struct fifo *f)
{
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

/* ---- scheduling and residency ----------------------------------------- */

static void vsock_work(struct loop *l, struct loop_timer *t, void *arg);

static void schedule(struct vhost_vsock *vs)
{
	if (!vs->work.armed)
		loop_timer_arm(vs->loop, &vs->work, 0);
}

/* The turn's time is up: leave the rest to the next turn. */
static bool turn_over(struct vhost_vsock *vs)
{
	if (now_ns() < vs->turn_end_ns)
		return false;
	vs->stats.turn_yields++;
	return true;
}

/*
 * 0: resident; -EAGAIN: being made resident (the queue waits for
 * vhost_vsock_memory_ready); else an error for the access (counted).
 */
static int make_resident(struct vhost_vsock *vs, uint64_t gpa, uint64_t len)
{
	int err;

	if (!vs->ops.make_resident || !len)
		return 0;
	err = vs->ops.make_resident(vs->opaque, gpa, len);
	if (err == -EAGAIN) {
		vs->stats.residency_waits++;
	} else if (err) {
		vs->stats.residency_errors++;
		log_warn(vs->subject, "cannot make %#" PRIx64 "+%#" PRIx64 " resident: %s",
			 gpa, len, strerror(-err));
	}
	return err;
}

/* The rings of @qidx, resident; the virtq or NULL. */
static struct virtq *queue_get(struct vhost_vsock *vs, unsigned int qidx)
{
	struct virtq *vq = vhost_user_queue(vs->vu, qidx);
	uint64_t gpa[3], len[3];

	if (!vq || vhost_user_queue_rings(vs->vu, qidx, gpa, len))
		return NULL;
	for (int i = 0; i < 3; i++)
		if (make_resident(vs, gpa[i], len[i]))
			return NULL;
	return vq;
}

/* ---- connections ------------------------------------------------------ */

static unsigned int conn_hash(uint32_t local_port, uint32_t peer_port)
{
	return (local_port * 2654435761U ^ peer_port) % VSOCK_CONN_HASH;
}

static struct vsock_conn *conn_find(struct vhost_vsock *vs, uint32_t local_port,
				    uint32_t peer_port)
{
	struct vsock_conn *c = vs->hash[conn_hash(local_port, peer_port)];

	for (; c; c = c->hnext)
		if (c->local_port == local_port && c->peer_port == peer_port)
			return c;
	return NULL;
}

static void conn_hash_add(struct vhost_vsock *vs, struct vsock_conn *c)
{
	unsigned int h = conn_hash(c->local_port, c->peer_port);

	c->hnext = vs->hash[h];
	vs->hash[h] = c;
	c->hashed = true;
}

static void conn_hash_del(struct vhost_vsock *vs, struct vsock_conn *c)
{
	struct vsock_conn **pp;

	if (!c->hashed)
		return;
	for (pp = &vs->hash[conn_hash(c->local_port, c->peer_port)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
	}
	c->hashed = false;
}

static void rx_list_add(struct vhost_vsock *vs, struct vsock_conn *c)
{
	if (c->on_rx_list)
		return;
	c->on_rx_list = true;
	c->rx_next = NULL;
	if (vs->rx_tail)
		vs->rx_tail->rx_next = c;
	else
		vs->rx_head = c;
	vs->rx_tail = c;
	schedule(vs);
}

static void rx_list_del(struct vhost_vsock *vs, struct vsock_conn *c)
{
	struct vsock_conn **pp, *prev = NULL;

	if (!c->on_rx_list)
		return;
	for (pp = &vs->rx_head; *pp; prev = *pp, pp = &(*pp)->rx_next) {
		if (*pp == c) {
			*pp = c->rx_next;
			if (vs->rx_tail == c)
				vs->rx_tail = prev;
			break;
		}
	}
	c->on_rx_list = false;
	c->rx_next = NULL;
}

static void queue_rst(struct vhost_vsock *vs, uint32_t local_port, uint32_t peer_port)
{
	struct stray_rst *r;

	if (vs->rstq_len == VSOCK_RSTQ_MAX) {
		vs->stats.rst_dropped++;
		return;
	}
	r = &vs->rstq[(vs->rstq_head + vs->rstq_len++) % VSOCK_RSTQ_MAX];
	r->local_port = local_port;
	r->peer_port = peer_port;
	schedule(vs);
}

static void on_conn_fd(struct loop *l, int fd, uint32_t events, void *arg);

/* Watch the host socket for what the connection can use now. */
static void conn_update_watch(struct vsock_conn *c)
{
	struct vhost_vsock *vs = c->vs;
	uint32_t want = 0;
	int err;

	if (c->kind != CONN_UNIX || c->fd < 0)
		return;
	if (c->state == CONN_CONNECT_LINE) {
		want = EPOLLIN;
	} else if (c->state == CONN_ESTABLISHED) {
		if (!c->readable && !c->host_eof && !c->guest_shut_rcv)
			want |= EPOLLIN;
		if (c->pending.len)
			want |= EPOLLOUT;
	}
	/*
	 * Not watched at all when nothing is wanted: a hung-up socket would
	 * otherwise report EPOLLHUP on every loop iteration.
	 */
	if (want == c->events)
		return;
	if (!want)
		loop_del_fd(vs->loop, c->fd);
	else if (!c->events)
		err = loop_add_fd(vs->loop, c->fd, want, on_conn_fd, c);
	else
		err = loop_mod_fd(vs->loop, c->fd, want);
	if (want && err < 0) {
		log_err(vs->subject, "port %u: cannot watch socket: %s", c->local_port,
			strerror(-err));
		want = 0;
	}
	c->events = want;
}

static void link_closed_by_guest(struct vsock_conn *c, int err)
{
	struct guest_link *gl = c->link;

	c->link = NULL;
	if (gl)
		guest_link_transport_closed(gl, err);
}

/* Forget @c; @rst: tell the guest with an RST. */
static void conn_free(struct vsock_conn *c, bool rst)
{
	struct vhost_vsock *vs = c->vs;

	if (rst && c->state != CONN_CONNECT_LINE)
		queue_rst(vs, c->local_port, c->peer_port);
	if (c->kind == CONN_LINK)
		link_closed_by_guest(c, -ECONNRESET);
	if (c->fd >= 0) {
		if (c->events)
			loop_del_fd(vs->loop, c->fd);
		close(c->fd);
	}
	loop_timer_cancel(vs->loop, &c->timer);
	rx_list_del(vs, c);
	conn_hash_del(vs, c);
	fifo_free(&c->pending);
	fifo_free(&c->linkq);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	vs->nconns--;
	vs->stats.conns_closed++;
	log_debug(vs->subject, "conn %u<->%u closed%s", c->local_port, c->peer_port,
		  rst ? " (rst)" : "");
	free(c);
}

static void on_conn_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	struct vsock_conn *c = arg;

	(void)l;
	(void)t;
	log_info(c->vs->subject, "host port %u: %s timed out", c->local_port,
		 c->state == CONN_CONNECT_LINE ? "CONNECT line" : "connect to guest");
	if (c->state == CONN_CONNECT_LINE)
		c->vs->stats.bad_connect_lines++;
	conn_free(c, true);
}

static struct vsock_conn *conn_new(struct vhost_vsock *vs, enum conn_kind kind, int fd)
{
	struct vsock_conn *c;

	if (vs->nconns >= VSOCK_CONN_MAX) {
		vs->stats.conn_limit++;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->vs = vs;
	c->kind = kind;
	c->fd = fd;
	loop_timer_init(&c->timer, on_conn_timer, c);
	c->next = vs->conns;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &vs->conns;
	vs->conns = c;
	vs->nconns++;
	vs->stats.conns_opened++;
	return c;
}

/* Credit the guest may still use towards us, as the guest last saw it. */
static bool credit_update_due(const struct vsock_conn *c)
{
	uint32_t peer_view_used = c->rx_cnt - c->last_fwd_cnt_sent;

	return c->fwd_cnt != c->last_fwd_cnt_sent &&
	       VSOCK_CONN_BUF_ALLOC - peer_view_used < VSOCK_CREDIT_LOW;
}

static void conn_forwarded(struct vsock_conn *c, uint32_t n)
{
	c->fwd_cnt += n;
	if (credit_update_due(c)) {
		c->need_credit_update = true;
		rx_list_add(c->vs, c);
	}
}

/* Bytes we may send the guest now. */
static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

/* After a half close from the guest: pass it on once flushed; true: freed. */
static bool conn_maybe_finish(struct vsock_conn *c)
{
	if (c->pending.len)
		return false;
	if (c->guest_shut_send && c->host_eof) {
		conn_free(c, true);	/* both directions done */
		return true;
	}
	if (c->guest_shut_send && c->fd >= 0)
		shutdown(c->fd, SHUT_WR);
	return false;
}

/* Write pending guest bytes to the host socket; 0 or -errno (freed). */
static int conn_flush_pending(struct vsock_conn *c)
{
	while (c->pending.len) {
		const uint8_t *p;
		size_t n = fifo_peek(&c->pending, &p);
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_free(c, true);
			return -EPIPE;
		}
		fifo_consume(&c->pending, (size_t)w);
		conn_forwarded(c, (uint32_t)w);
	}
	conn_update_watch(c);
	return conn_maybe_finish(c) ? -ECONNRESET : 0;
}

/* ---- host side: sockets ------------------------------------------------ */

static int conn_read_connect_line(struct vsock_conn *c);

static void on_conn_fd(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct vsock_conn *c = arg;

	(void)l;
	(void)fd;
	if (c->state == CONN_CONNECT_LINE) {
		conn_read_connect_line(c);
		return;
	}
	if ((events & EPOLLOUT) && conn_flush_pending(c))
		return;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (c->pending.len && (events & (EPOLLHUP | EPOLLERR)) && !(events & EPOLLIN)) {
			conn_free(c, true);
			return;
		}
		c->readable = true;
		rx_list_add(c->vs, c);
		conn_update_watch(c);
	}
}

static uint32_t alloc_local_port(struct vhost_vsock *vs)
{
	for (;;) {
		uint32_t p = vs->next_local_port++;
		bool used = false;

		if (vs->next_local_port == UINT32_MAX)
			vs->next_local_port = VSOCK_LOCAL_PORT_FIRST;
		/* O(conns): host-initiated connects are rare */
		for (unsigned int h = 0; h < VSOCK_CONN_HASH && !used; h++)
			for (struct vsock_conn *c = vs->hash[h]; c; c = c->hnext)
				if (c->local_port == p)
					used = true;
		if (!used)
			return p;
	}
}

/* Parse "CONNECT <port>\n"; the port, or -EINVAL. */
static int64_t parse_connect_line(const char *line)
{
	static const char prefix[] = "CONNECT ";
	char *end;
	unsigned long long v;

	if (strncmp(line, prefix, sizeof(prefix) - 1))
		return -EINVAL;
	line += sizeof(prefix) - 1;
	if (*line < '0' || *line > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(line, &end, 10);
	if (errno || *end || v >= UINT32_MAX)
		return -EINVAL;
	return (int64_t)v;
}

/*
 * Read the CONNECT line one byte at a time, so that nothing the client
 * sends after the newline is consumed here: it stays in the socket and
 * becomes the stream's first bytes.
 */
static int conn_read_connect_line(struct vsock_conn *c)
{
	struct vhost_vsock *vs = c->vs;

	for (;;) {
		char ch;
		ssize_t n = recv(c->fd, &ch, 1, MSG_DONTWAIT);
		int64_t port;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0) {
			conn_free(c, false);
			return -ECONNRESET;
		}
		if (ch != '\n') {
			if (c->line_len + 1 >= sizeof(c->line)) {
				vs->stats.bad_connect_lines++;
				conn_free(c, false);
				return -EINVAL;
			}
			c->line[c->line_len++] = ch;
			continue;
		}
		c->line[c->line_len] = '\0';
		port = parse_connect_line(c->line);
		if (port < 0) {
			vs->stats.bad_connect_lines++;
			log_info(vs->subject, "bad CONNECT line from host client");
			conn_free(c, false);
			return -EINVAL;
		}
		c->peer_port = (uint32_t)port;
		c->local_port = alloc_local_port(vs);
		c->state = CONN_CONNECTING;
		c->need_request = true;
		conn_hash_add(vs, c);
		conn_update_watch(c);
		loop_timer_arm(vs->loop, &c->timer, VSOCK_CONNECT_TIMEOUT_NS);
		vs->stats.host_connects++;
		rx_list_add(vs, c);
		log_debug(vs->subject, "host port %u connects to guest port %u",
			  c->local_port, c->peer_port);
		return 0;
	}
}

static void on_listen(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct vhost_vsock *vs = arg;
	struct vsock_conn *c;
	int cfd;

	(void)l;
	(void)events;
	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	c = conn_new(vs, CONN_UNIX, cfd);
	if (!c) {
		close(cfd);
		return;
	}
	c->state = CONN_CONNECT_LINE;
	conn_update_watch(c);
	loop_timer_arm(vs->loop, &c->timer, VSOCK_CONNECT_LINE_TIMEOUT_NS);
}

static int unix_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, VSOCK_LISTEN_BACKLOG) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * connect(2) to "<uds>_<port>" without blocking the loop: a unix stream
 * connect completes at once or fails (-EAGAIN: backlog full).  fd/-errno.
 */
static int unix_connect_port(struct vhost_vsock *vs, uint32_t port)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int n;

	n = snprintf(path, sizeof(path), "%s_%u", vs->uds_path, port);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	return usock_connect(path, true);
}

/* ---- the guest link as the host end of a connection ------------------- */

static ssize_t link_send(void *targ, const void *buf, size_t len)
{
	struct vsock_conn *c = targ;
	size_t n;

	if (!c->link || c->state != CONN_ESTABLISHED)
		return -ENOTCONN;
	n = fifo_push(&c->linkq, VSOCK_LINKQ_MAX, buf, len);
	if (n)
		rx_list_add(c->vs, c);
	if (n < len)
		c->link_blocked = true;
	return n ? (ssize_t)n : -EAGAIN;
}

static void link_close(void *targ, int err)
{
	struct vsock_conn *c = targ;

	(void)err;
	/* called from inside guest_link_*: free later, after the flush */
	c->link = NULL;
	c->close_when_flushed = true;
	rx_list_add(c->vs, c);
}

static const struct guest_link_transport vsock_link_transport = {
	.send = link_send,
	.close = link_close,
};

/* ---- TX: packets from the guest --------------------------------------- */

static void guest_request(struct vhost_vsock *vs, uint32_t local_port, uint32_t peer_port,
			  const struct virtio_vsock_hdr *h)
{
	struct guest_link *gl = vs->ops.guest_link ? vs->ops.guest_link(vs->opaque) : NULL;
	bool to_link = local_port == VMNAP_DEFAULT_PORT && gl;
	struct vsock_conn *c;
	int fd = -1;

	if (local_port == VMNAP_DEFAULT_PORT && peer_port >= GUEST_LINK_RESERVED_PORT_END) {
		vs->stats.unreserved_port++;
		if (guest_link_log_nth(vs->stats.unreserved_port))
			log_warn(vs->subject, "guest port %u -> host port %u refused: "
				 "not a reserved port (%" PRIu64 " so far)",
				 peer_port, local_port, vs->stats.unreserved_port);
		queue_rst(vs, local_port, peer_port);
		return;
	}
	if (!to_link) {
		fd = unix_connect_port(vs, local_port);
		if (fd < 0) {
			log_debug(vs->subject, "guest port %u -> host port %u refused: %s",
				  peer_port, local_port, strerror(-fd));
			vs->stats.refused++;
			queue_rst(vs, local_port, peer_port);
			return;
		}
	}
	c = conn_new(vs, to_link ? CONN_LINK : CONN_UNIX, fd);
	if (!c) {
		if (fd >= 0)
			close(fd);
		queue_rst(vs, local_port, peer_port);
		return;
	}
	c->local_port = local_port;
	c->peer_port = peer_port;
	c->peer_buf_alloc = le32toh(h->buf_alloc);
	c->peer_fwd_cnt = le32toh(h->fwd_cnt);
	c->state = CONN_ESTABLISHED;
	c->need_response = true;
	conn_hash_add(vs, c);
	vs->stats.guest_connects++;
	if (to_link) {
		int err;

		c->link = gl;
		err = guest_link_connect(gl, &vsock_link_transport, c);
		if (err) {
			c->link = NULL;
			/* the link counts and logs (bounded) its own refusals */
			if (err == -EAGAIN)
				log_debug(vs->subject, "guest link refused the stream: %s",
					  strerror(-err));
			else
				log_warn(vs->subject, "guest link refused the stream: %s",
					 strerror(-err));
			conn_free(c, true);
			return;
		}
	}
	conn_update_watch(c);
	rx_list_add(vs, c);
	log_debug(vs->subject, "guest port %u -> host port %u connected", peer_port, local_port);
}

/* RW payload from the guest to the host end; false: @c was freed. */
static bool guest_data(struct vhost_vsock *vs, struct vsock_conn *c,
		       const struct virtq_chain *ch, uint32_t len)
{
	struct iovec iov[VIRTQ_CHAIN_MAX];
	unsigned int n;
	ssize_t w = 0;

	if (c->rx_cnt - c->fwd_cnt + (uint64_t)len > VSOCK_CONN_BUF_ALLOC) {
		vs->stats.credit_violations++;
		log_warn(vs->subject, "port %u: guest sent beyond its credit", c->local_port);
		conn_free(c, true);
		return false;
	}
	c->rx_cnt += len;
	vs->stats.tx_bytes += len;
	/* the payload as iovecs over the chain's readable part */
	n = virtq_chain_iov(ch, false, VSOCK_HDR_SIZE, len, iov);
	if (c->kind == CONN_LINK) {
		for (unsigned int i = 0; i < n && c->link; i++)
			guest_link_rx(c->link, iov[i].iov_base, iov[i].iov_len);
		conn_forwarded(c, len);
		return true;
	}
	if (!c->pending.len) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n };

		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			conn_free(c, true);
			return false;
		}
		if (w < 0)
			w = 0;
		conn_forwarded(c, (uint32_t)w);
	}
	/* the rest waits here; the credit check above bounds it */
	for (unsigned int i = 0; i < n; i++) {
		size_t skip = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;

		w -= (ssize_t)skip;
		if (skip < iov[i].iov_len &&
		    fifo_push(&c->pending, VSOCK_CONN_BUF_ALLOC,
			      (uint8_t *)iov[i].iov_base + skip,
			      iov[i].iov_len - skip) != iov[i].iov_len - skip) {
			conn_free(c, true);	/* out of memory */
			return false;
		}
	}
	conn_update_watch(c);
	return true;
}

static void guest_shutdown(struct vsock_conn *c, uint32_t flags)
{
	if (flags & VIRTIO_VSOCK_SHUTDOWN_RCV)
		c->guest_shut_rcv = true;
	if (flags & VIRTIO_VSOCK_SHUTDOWN_SEND)
		c->guest_shut_send = true;
	if (c->kind == CONN_LINK) {
		/* the vmnap protocol has no half close */
		conn_free(c, true);
		return;
	}
	if (c->guest_shut_rcv && c->guest_shut_send) {
		/* close(2) in the guest: deliver what we hold, then RST */
		c->host_eof = true;
	}
	conn_update_watch(c);
	conn_maybe_finish(c);
}

static void handle_tx(struct vhost_vsock *vs, const struct virtq_chain *ch)
{
	struct virtio_vsock_hdr h;
	struct vsock_conn *c;
	uint32_t len, local_port, peer_port;
	uint16_t op;

	if (virtq_chain_read(ch, 0, &h, sizeof(h)) != sizeof(h)) {
		vs->stats.bad_packets++;
		return;
	}
	len = le32toh(h.len);
	op = le16toh(h.op);
	if (len > ch->out_len - VSOCK_HDR_SIZE || (op != VIRTIO_VSOCK_OP_RW && len)) {
		vs->stats.bad_packets++;
		return;
	}
	if (le64toh(h.src_cid) != vs->guest_cid || le64toh(h.dst_cid) != VSOCK_HOST_CID) {
		vs->stats.bad_cid++;
		return;
	}
	vs->stats.tx_packets++;
	local_port = le32toh(h.dst_port);
	peer_port = le32toh(h.src_port);
	if (le16toh(h.type) != VIRTIO_VSOCK_TYPE_STREAM) {
		vs->stats.bad_packets++;
		if (op != VIRTIO_VSOCK_OP_RST)
			queue_rst(vs, local_port, peer_port);
		return;
	}
	c = conn_find(vs, local_port, peer_port);
	if (!c) {
		if (op == VIRTIO_VSOCK_OP_REQUEST) {
			guest_request(vs, local_port, peer_port, &h);
		} else if (op != VIRTIO_VSOCK_OP_RST) {
			vs->stats.unknown_conn++;
			queue_rst(vs, local_port, peer_port);
		}
		return;
	}
	c->peer_buf_alloc = le32toh(h.buf_alloc);
	c->peer_fwd_cnt = le32toh(h.fwd_cnt);
	if ((c->readable || c->linkq.len) && peer_credit(c))
		rx_list_add(vs, c);

	switch (op) {
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->state != CONN_CONNECTING || c->need_request) {
			vs->stats.bad_packets++;
			conn_free(c, true);
			return;
		}
		{
			char ok[32];
			int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

			loop_timer_cancel(vs->loop, &c->timer);
			c->state = CONN_ESTABLISHED;
			if (send(c->fd, ok, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
				conn_free(c, true);
				return;
			}
			conn_update_watch(c);
		}
		break;
	case VIRTIO_VSOCK_OP_RW:
		if (c->state != CONN_ESTABLISHED || c->guest_shut_send) {
			vs->stats.bad_packets++;
			conn_free(c, true);
			return;
		}
		guest_data(vs, c, ch, len);
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->need_credit_update = true;
		rx_list_add(vs, c);
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		guest_shutdown(c, le32toh(h.flags));
		break;
	case VIRTIO_VSOCK_OP_RST:
		if (c->state == CONN_CONNECTING) {
			vs->stats.refused++;
			log_debug(vs->subject, "guest port %u refused host port %u",
				  c->peer_port, c->local_port);
		}
		conn_free(c, false);
		break;
	default:	/* REQUEST on a live connection, or unknown */
		vs->stats.bad_packets++;
		conn_free(c, true);
		break;
	}
}

static void process_tx(struct vhost_vsock *vs)
{
	struct virtq *vq = queue_get(vs, VSOCK_TXQ);
	unsigned int budget = VSOCK_BUDGET;
	bool waiting = false;
	int r;

	if (!vq)
		return;
	while (budget-- && (r = virtq_pop(vq, &vs->chain)) != 0) {
		if (r < 0) {
			waiting = r == -EAGAIN;	/* until memory_ready */
			if (r == -EIO || waiting)
				break;
			vs->stats.bad_packets++;
			continue;
		}
		handle_tx(vs, &vs->chain);
		virtq_push(vq, vs->chain.head, 0);
		if (turn_over(vs))
			break;
	}
	vhost_user_notify(vs->vu, VSOCK_TXQ);
	if (!waiting && virtq_avail_count(vq))
		schedule(vs);
}

/* ---- RX: packets to the guest ------------------------------------------ */

static void fill_hdr(struct vhost_vsock *vs, struct virtio_vsock_hdr *h, uint32_t local_port,
		     uint32_t peer_port, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = htole64(VSOCK_HOST_CID);
	h->dst_cid = htole64(vs->guest_cid);
	h->src_port = htole32(local_port);
	h->dst_port = htole32(peer_port);
	h->type = htole16(VIRTIO_VSOCK_TYPE_STREAM);
	h->op = htole16(op);
}

/* Host bytes into the chain after the header; bytes, 0 EOF, -EAGAIN. */
static ssize_t read_host_data(struct vsock_conn *c, const struct virtq_chain *ch,
			      uint32_t max)
{
	struct iovec iov[VIRTQ_CHAIN_MAX];
	unsigned int n;
	ssize_t r;

	if (c->kind == CONN_LINK) {
		size_t done = 0;

		while (done < max && c->linkq.len) {
			const uint8_t *p;
			size_t k = fifo_peek(&c->linkq, &p);

			if (k > max - done)
				k = max - done;
			virtq_chain_write(ch, VSOCK_HDR_SIZE + done, p, k);
			fifo_consume(&c->linkq, k);
			done += k;
		}
		return done ? (ssize_t)done : -EAGAIN;
	}
	n = virtq_chain_iov(ch, true, VSOCK_HDR_SIZE, max, iov);
	r = readv(c->fd, iov, (int)n);
	if (r < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	return r;
}

/*
 * Build the next packet @c owes into @ch.  Returns the bytes written
 * (header + payload), 0 when @c owes nothing now, -ECONNRESET when @c was
 * freed (its RST is queued).
 */
static ssize_t conn_rx_packet(struct vhost_vsock *vs, struct vsock_conn *c,
			      const struct virtq_chain *ch)
{
	struct virtio_vsock_hdr h;
	uint32_t room = ch->in_len - VSOCK_HDR_SIZE;
	uint16_t op = 0;
	uint32_t flags = 0, len = 0;

	if (c->need_request) {
		op = VIRTIO_VSOCK_OP_REQUEST;
		c->need_request = false;
	} else if (c->need_response) {
		op = VIRTIO_VSOCK_OP_RESPONSE;
		c->need_response = false;
	} else if (c->state == CONN_ESTABLISHED && (c->readable || c->linkq.len) &&
		   !c->guest_shut_rcv && peer_credit(c)) {
		uint32_t max = peer_credit(c);
		ssize_t r;

		if (max > room)
			max = room;
		if (max > VSOCK_RX_PAYLOAD_MAX)
			max = VSOCK_RX_PAYLOAD_MAX;
		r = read_host_data(c, ch, max);
		if (r > 0) {
			op = VIRTIO_VSOCK_OP_RW;
			len = (uint32_t)r;
			c->tx_cnt += len;
			vs->stats.rx_bytes += len;
		} else if (r == 0) {
			/* the host end will send no more */
			c->readable = false;
			c->host_eof = true;
			op = VIRTIO_VSOCK_OP_SHUTDOWN;
			flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		} else if (r == -EAGAIN) {
			c->readable = false;
		} else {
			conn_free(c, true);
			return -ECONNRESET;
		}
	}
	if (!op && c->need_shutdown) {
		op = VIRTIO_VSOCK_OP_SHUTDOWN;
		flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
		c->need_shutdown = false;
	}
	if (!op && c->need_credit_update)
		op = VIRTIO_VSOCK_OP_CREDIT_UPDATE;
	if (!op)
		return 0;
	fill_hdr(vs, &h, c->local_port, c->peer_port, op);
	h.len = htole32(len);
	h.flags = htole32(flags);
	h.buf_alloc = htole32(VSOCK_CONN_BUF_ALLOC);
	h.fwd_cnt = htole32(c->fwd_cnt);
	c->last_fwd_cnt_sent = c->fwd_cnt;
	c->need_credit_update = false;	/* every packet carries the credit */
	virtq_chain_write(ch, 0, &h, sizeof(h));
	return (ssize_t)(VSOCK_HDR_SIZE + len);
}

/* Does @c still owe the guest something it can send now? */
static bool conn_owes(const struct vsock_conn *c)
{
	return c->need_request || c->need_response || c->need_shutdown ||
	       c->need_credit_update || c->close_when_flushed ||
	       (c->state == CONN_ESTABLISHED && (c->readable || c->linkq.len) &&
		!c->guest_shut_rcv && peer_credit(c));
}

static void process_rx(struct vhost_vsock *vs)
{
	struct virtq *vq = queue_get(vs, VSOCK_RXQ);
	unsigned int budget = VSOCK_BUDGET;

	if (!vq)
		return;
	while (budget && (vs->rstq_len || vs->rx_head)) {
		struct virtq_chain *ch = &vs->chain;
		struct vsock_conn *c = NULL;
		ssize_t n;
		int r;

		/* a link that closed is finished once its bytes are out */
		if (!vs->rstq_len) {
			c = vs->rx_head;
			if (c->close_when_flushed && !c->linkq.len) {
				conn_free(c, true);
				continue;
			}
		}
		r = virtq_pop(vq, ch);
		if (r == 0 || r == -EIO || r == -EAGAIN)	/* EAGAIN: memory_ready */
			break;
		if (r < 0)
			continue;
		budget--;
		if (ch->in_len < VSOCK_HDR_SIZE || ch->nout) {
			vs->stats.bad_packets++;
			virtq_push(vq, ch->head, 0);
			vs->rx_ahead_due = true;
			continue;
		}
		if (!c) {
			struct stray_rst *rst = &vs->rstq[vs->rstq_head];
			struct virtio_vsock_hdr h;

			fill_hdr(vs, &h, rst->local_port, rst->peer_port, VIRTIO_VSOCK_OP_RST);
			virtq_chain_write(ch, 0, &h, sizeof(h));
			vs->rstq_head = (vs->rstq_head + 1) % VSOCK_RSTQ_MAX;
			vs->rstq_len--;
			virtq_push(vq, ch->head, VSOCK_HDR_SIZE);
			vs->rx_ahead_due = true;
			vs->stats.rx_packets++;
			continue;
		}
		rx_list_del(vs, c);
		n = conn_rx_packet(vs, c, ch);
		if (n <= 0) {
			virtq_unpop(vq);
			if (n == 0) {
				conn_update_watch(c);
				if (c->link_blocked && c->link) {
					c->link_blocked = false;
					guest_link_tx_ready(c->link);
				}
			}
			continue;
		}
		virtq_push(vq, ch->head, (uint32_t)n);
		vs->rx_ahead_due = true;
		vs->stats.rx_packets++;
		if (c->link_blocked && c->link && fifo_space(&c->linkq)) {
			c->link_blocked = false;
			guest_link_tx_ready(c->link);	/* may queue more */
		}
		if (c->host_eof && c->guest_shut_send && !c->pending.len) {
			conn_free(c, true);
			continue;
		}
		if (conn_owes(c))
			rx_list_add(vs, c);
		else
			conn_update_watch(c);
		if (turn_over(vs)) {
			budget = 0;	/* the rest in the next turn */
			break;
		}
	}
	vhost_user_notify(vs->vu, VSOCK_RXQ);
	if (!budget)
		schedule(vs);
}

static void vsock_work(struct loop *l, struct loop_timer *t, void *arg)
{
	struct vhost_vsock *vs = arg;

	(void)l;
	(void)t;
	if (vs->paused) {
		vs->stats.paused_deferrals++;
		return;
	}
	vs->turn_end_ns = now_ns() + VSOCK_TURN_NS;
	process_tx(vs);
	process_rx(vs);
	if (vs->rx_ahead_due && vs->ops.rx_ahead) {
		vs->rx_ahead_due = false;
		vs->stats.rx_ahead_calls++;
		vs->ops.rx_ahead(vs->opaque);
	}
}

/* ---- vhost-user device ops --------------------------------------------- */

static int vsock_get_config(void *opaque, uint32_t offset, void *buf, uint32_t len)
{
	struct vhost_vsock *vs = opaque;
	uint64_t cid = htole64(vs->guest_cid);

	if (offset > sizeof(cid) || len > sizeof(cid) - offset)
		return -EINVAL;
	memcpy(buf, (uint8_t *)&cid + offset, len);
	return 0;
}

/* The true guest-physical layout, for the owner's map of guest RAM. */
static void vsock_mem_table(void *opaque, const struct vhost_user_mem_region *r,
			    const int *fds, unsigned int n)
{
	struct vhost_vsock *vs = opaque;

	if (vs->ops.mem_table)
		vs->ops.mem_table(vs->opaque, r, fds, n);
}

static int vsock_access(void *opaque, uint64_t gpa, uint64_t len)
{
	return make_resident(opaque, gpa, len);
}

static void vsock_queue_kick(void *opaque, unsigned int qidx)
{
	struct vhost_vsock *vs = opaque;

	if (qidx == VSOCK_RXQ)	/* the guest posted buffers */
		vs->rx_ahead_due = true;
	if (qidx != VSOCK_EVQ)
		schedule(vs);
}

static void reset_all_conns(struct vhost_vsock *vs)
{
	while (vs->conns)
		conn_free(vs->conns, false);
}

static void vsock_disconnected(void *opaque)
{
	struct vhost_vsock *vs = opaque;

	/* the guest that owned the streams is gone: reset, do not RST */
	if (vs->nconns)
		vs->stats.frontend_resets++;
	for (unsigned int h = 0; h < VSOCK_CONN_HASH; h++)
		while (vs->hash[h])
			conn_free(vs->hash[h], false);
	vs->rstq_len = 0;
	if (vs->ops.disconnected)
		vs->ops.disconnected(vs->opaque);
}

static void *vsock_map_fd(void *opaque, int fd, uint64_t len,
			  const struct vhost_user_mem_region *t, unsigned int n)
{
	struct vhost_vsock *vs = opaque;

	return vs->ops.map_fd(vs->opaque, fd, len, t, n);
}

static const struct vhost_user_ops vsock_vu_ops = {
	.access = vsock_access,
	.mem_table = vsock_mem_table,
	.get_config = vsock_get_config,
	.queue_kick = vsock_queue_kick,
	.disconnected = vsock_disconnected,
};

/* ---- lifetime ----------------------------------------------------------- */

int vhost_vsock_new(struct loop *loop, const char *subject,
		    const struct vhost_vsock_config *cfg,
		    const struct vhost_vsock_ops *ops, void *opaque,
		    struct vhost_vsock **out)
{
	struct vhost_user_config vcfg = {
		.socket_path = cfg->vhost_user_path,
		.nqueues = VSOCK_NQUEUES,
		.config_size = VSOCK_CONFIG_SIZE,
	};
	struct vhost_vsock *vs;
	int err;

	if (!cfg->vhost_user_path || !cfg->uds_path || cfg->guest_cid <= VSOCK_HOST_CID ||
	    cfg->guest_cid >= UINT32_MAX)
		return -EINVAL;
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return -ENOMEM;
	if (ops)
		vs->ops = *ops;
	vs->opaque = opaque;
	vs->loop = loop;
	vs->guest_cid = cfg->guest_cid;
	vs->next_local_port = VSOCK_LOCAL_PORT_FIRST;
	vs->listen_fd = -1;
	snprintf(vs->subject, sizeof(vs->subject), "%s vsock", subject);
	loop_timer_init(&vs->work, vsock_work, vs);
	vs->uds_path = strdup(cfg->uds_path);
	if (!vs->uds_path) {
		err = -ENOMEM;
		goto fail;
	}
	vs->listen_fd = unix_listen(vs->uds_path);
	if (vs->listen_fd < 0) {
		err = vs->listen_fd;
		log_err(vs->subject, "cannot listen on %s: %s", vs->uds_path, strerror(-err));
		goto fail;
	}
	err = loop_add_fd(vs->loop, vs->listen_fd, EPOLLIN, on_listen, vs);
	if (err)
		goto fail;
	vcfg.subject = vs->subject;
	vs->vu_ops = vsock_vu_ops;
	if (vs->ops.map_fd)
		vs->vu_ops.map_fd = vsock_map_fd;
	vs->vu = vhost_user_new(vs->loop, &vcfg, &vs->vu_ops, vs);
	if (!vs->vu) {
		err = -errno;
		goto fail;
	}
	*out = vs;
	log_info(vs->subject, "guest cid %" PRIu64 ", hybrid socket %s", vs->guest_cid,
		 vs->uds_path);
	return 0;
fail:
	if (vs->listen_fd >= 0) {
		loop_del_fd(vs->loop, vs->listen_fd);
		close(vs->listen_fd);
		unlink(vs->uds_path);
	}
	free(vs->uds_path);
	free(vs);
	return err;
}

void vhost_vsock_free(struct vhost_vsock *vs)
{
	if (!vs)
		return;
	reset_all_conns(vs);
	vhost_user_free(vs->vu);
	loop_timer_cancel(vs->loop, &vs->work);
	loop_del_fd(vs->loop, vs->listen_fd);
	close(vs->listen_fd);
	unlink(vs->uds_path);
	free(vs->uds_path);
	free(vs);
}

void vhost_vsock_memory_ready(struct vhost_vsock *vs)
{
	if (vs)
		schedule(vs);
}

unsigned int vhost_vsock_resume_ranges(struct vhost_vsock *vs, uint64_t *gpa, uint64_t *len,
				       unsigned int nr)
{
	uint64_t bgpa[VHOST_VSOCK_RESUME_RX_CHAINS * 2];
	uint32_t blen[VHOST_VSOCK_RESUME_RX_CHAINS * 2];
	uint64_t room = VHOST_VSOCK_RESUME_RX_BYTES;
	unsigned int n = 0, nb;
	struct virtq *vq;

	if (!vs)
		return 0;
	for (unsigned int q = 0; q < VSOCK_NQUEUES; q++) {
		uint64_t g[3], l[3];

		if (vhost_user_queue_rings(vs->vu, q, g, l))
			continue;
		for (unsigned int i = 0; i < 3 && n < nr; i++)
			if (l[i]) {
				gpa[n] = g[i];
				len[n++] = l[i];
			}
	}
	/* the buffers only with the rings resident: reading them must not
	 * fault (queue_get asks for them otherwise, and they come back) */
	vq = queue_get(vs, VSOCK_RXQ);
	nb = vq ? virtq_peek(vq, VHOST_VSOCK_RESUME_RX_CHAINS, bgpa, blen,
			     VHOST_VSOCK_RESUME_RX_CHAINS * 2) : 0;
	for (unsigned int i = 0; i < nb && n < nr && room; i++) {
		uint64_t take = blen[i] < room ? blen[i] : room;

		gpa[n] = bgpa[i];
		len[n++] = take;
		room -= take;
	}
	return n;
}

void vhost_vsock_set_paused(struct vhost_vsock *vs, bool paused)
{
	if (!vs || vs->paused == paused)
		return;
	vs->paused = paused;
	log_debug(vs->subject, "%s", paused ? "paused" : "resumed");
	if (!paused)
		schedule(vs);
}

bool vhost_vsock_front_end_connected(const struct vhost_vsock *vs)
{
	return vs && vhost_user_connected(vs->vu);
}

const char *vhost_vsock_uds_path(const struct vhost_vsock *vs)
{
	return vs->uds_path;
}

unsigned int vhost_vsock_nr_conns(const struct vhost_vsock *vs)
{
	return vs ? vs->nconns : 0;
}

void vhost_vsock_get_stats(const struct vhost_vsock *vs, struct vhost_vsock_stats *st)
{
	struct vhost_user_stats us;

	*st = vs->stats;
	vhost_user_get_stats(vs->vu, &us);
	st->frontend_connections = us.connections;
	st->frontend_errors = us.bad_messages + us.bad_fds + us.bad_regions +
			      us.unknown_requests + us.stream_errors;
	st->ring_stops = us.ring_stops;
	for (unsigned int q = VSOCK_RXQ; q <= VSOCK_TXQ; q++) {
		struct virtq_stats vq;

		vhost_user_get_virtq_stats(vs->vu, q, &vq);
		st->bad_descriptors += vq.bad_head + vq.bad_next + vq.loops + vq.bad_addr +
				       vq.oversize + vq.bad_order + vq.indirect + vq.bad_avail_idx;
	}
}
