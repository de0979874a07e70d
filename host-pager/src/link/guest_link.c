// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_link.c - host side of the vmnap protocol; see guest_link.h.
 *
 * Receive path: bytes are appended to a reassembly buffer that holds one
 * whole message of the largest size (VMNAP_MAX_MSG), so every complete
 * message fits and the buffer always makes progress.  Messages are decoded
 * in place; the wire structs are read through typed pointers, so a message
 * is always decoded from an 8-byte aligned offset (after a skipped message
 * of odd length the rest is moved to the front).
 *
 * Send path: host messages are encoded into a bounded queue and handed to
 * the transport; what it does not take stays queued until
 * guest_link_tx_ready().  A guest that never reads fills the queue and is
 * disconnected.
 *
 * Sessions: every guest_link_connect() starts a new session number; code
 * that calls out (callbacks, the transport) re-checks the number after the
 * call, because the session may have ended (or restarted) in between.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest_link.h"
#include "log.h"

#define NSEC_PER_SEC		1000000000ULL
#define NSEC_PER_MSEC		1000000ULL
#define GUEST_LINK_SUBJECT_MAX	96
#define GUEST_LINK_DEFAULT_SUBJECT	"guest link"
/* Align decoding offsets to the largest member alignment of the structs. */
#define GUEST_LINK_RX_ALIGN	8U
/* Attached fd: bytes read per read(2), and reads per wakeup (fairness). */
#define GUEST_LINK_FD_READ_CHUNK	(16U * 1024U)
#define GUEST_LINK_FD_READS_PER_WAKEUP	8U

enum handoff_state {
	HANDOFF_NONE,		/* no request outstanding */
	HANDOFF_PENDING,	/* HANDOFF_REQ sent, deadline timer armed */
	HANDOFF_QUIESCED,	/* READY received: guest waits for RESUMED/ABORT */
};

struct guest_link {
	struct guest_link_config cfg;
	struct guest_link_ops ops;
	void *opaque;
	char subject[GUEST_LINK_SUBJECT_MAX];

	enum guest_link_state state;
	uint64_t session;		/* changes on every connect and end */
	struct guest_link_transport t;
	void *targ;
	bool ending;			/* end_session() in progress */
	int fd;				/* attached fd transport, or -1 */
	bool fd_want_out;		/* EPOLLOUT registered */

	unsigned char *rx;		/* VMNAP_MAX_MSG bytes */
	size_t rx_len;
	unsigned char *tx;		/* GUEST_LINK_TXQ_MAX bytes */
	size_t tx_head, tx_tail;
	uint32_t tx_seq;

	struct vmnap_range ram_ranges[VMNAP_MAX_RAM_RANGES];	/* wire order */
	struct vmnap_ram ram;
	bool have_ram;

	/* token buckets in ns of credit, kept across sessions: one message
	 * costs rate.cost_ns, one session conn.cost_ns */
	struct bucket {
		uint64_t cost_ns, cap_ns, credit_ns, last_ns;
	} rate, conn;
	struct log_ratelimit log_rl;	/* lines about sessions, guest input */

	enum handoff_state hs;
	uint64_t hs_req_id;		/* the request hs refers to */
	uint64_t resume_req_id;		/* RESUMED sent, no ack yet; 0: none */
	uint64_t late_req_id;		/* given up unanswered (deadline, abort):
					 * its ack may still come; 0: none */
	uint64_t last_req_id;
	struct loop_timer deadline;

	struct guest_link_peer peer;
	struct guest_link_range free_ranges[VMNAP_MAX_FREE_RANGES];
	struct guest_link_stats st;
};

static void end_session(struct guest_link *gl, int err, bool close_transport);
static void fd_detach(struct guest_link *gl);
static void fd_update_watch(struct guest_link *gl);

const char *guest_link_state_name(enum guest_link_state s)
{
	switch (s) {
	case GUEST_LINK_CLOSED:
		return "closed";
	case GUEST_LINK_AWAIT_HELLO:
		return "await-hello";
	case GUEST_LINK_UP:
		return "up";
	}
	return "unknown";
}

static uint64_t link_now(const struct guest_link *gl)
{
	return gl->cfg.clock ? gl->cfg.clock() : now_ns();
}

static void bucket_init(struct bucket *b, uint32_t per_sec, uint32_t burst, uint64_t now)
{
	b->cost_ns = NSEC_PER_SEC / per_sec;
	if (!b->cost_ns)
		b->cost_ns = 1;
	b->cap_ns = b->cost_ns * burst;
	b->credit_ns = b->cap_ns;	/* starts full, never refilled but by time */
	b->last_ns = now;
}

/* Take one token; false when empty. */
static bool bucket_take(struct bucket *b, uint64_t now)
{
	if (now > b->last_ns) {
		uint64_t d = now - b->last_ns;

		b->credit_ns = d >= b->cap_ns - b->credit_ns ? b->cap_ns : b->credit_ns + d;
	}
	b->last_ns = now;
	if (b->credit_ns < b->cost_ns)
		return false;
	b->credit_ns -= b->cost_ns;
	return true;
}

/*
 * A line about a session or guest input: at @lvl while the link's log
 * budget lasts (the first one after a gap says how many were suppressed),
 * else at debug level only.
 */
static void link_log(struct guest_link *gl, enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void link_log(struct guest_link *gl, enum log_level lvl, const char *fmt, ...)
{
	uint64_t suppressed = 0;
	char line[512];
	va_list ap;

	if (lvl > log_get_level())
		return;
	if (!log_ratelimit(&gl->log_rl, link_now(gl), &suppressed)) {
		gl->st.log_suppressed++;
		lvl = LOG_DEBUG;
		if (log_get_level() < LOG_DEBUG)
			return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (suppressed)
		log_msg(lvl, gl->subject, "%s (%llu similar lines suppressed)", line,
			(unsigned long long)suppressed);
	else
		log_msg(lvl, gl->subject, "%s", line);
}

/* ---- send path ---- */

/* Hand queued bytes to the transport.  0, or -errno if the session ended. */
static int tx_flush(struct guest_link *gl)
{
	uint64_t session = gl->session;

	while (gl->state != GUEST_LINK_CLOSED && gl->tx_head < gl->tx_tail) {
		ssize_t r = gl->t.send(gl->targ, gl->tx + gl->tx_head,
				       gl->tx_tail - gl->tx_head);

		if (gl->session != session)
			return -ECONNRESET;
		if (r == -EAGAIN || r == 0)
			break;
		if (r < 0) {
			link_log(gl, LOG_WARN, "send to guest: %s", strerror((int)-r));
			if (!gl->ending)
				end_session(gl, (int)r, true);
			return (int)r;
		}
		if ((size_t)r > gl->tx_tail - gl->tx_head)
			r = (ssize_t)(gl->tx_tail - gl->tx_head);	/* transport bug */
		gl->tx_head += (size_t)r;
		gl->st.tx_bytes += (uint64_t)r;
	}
	if (gl->tx_head == gl->tx_tail)
		gl->tx_head = gl->tx_tail = 0;
	if (gl->fd >= 0)
		fd_update_watch(gl);
	return 0;
}

/* Encode one host message into the queue and try to send it.  -errno. */
static int tx_msg(struct guest_link *gl, unsigned int type, const void *payload,
		  uint32_t len)
{
	struct vmnap_hdr h;
	size_t total = sizeof(h) + len;

	if (gl->state == GUEST_LINK_CLOSED)
		return -ENOTCONN;
	if (gl->tx_tail + total > GUEST_LINK_TXQ_MAX && gl->tx_head) {
		memmove(gl->tx, gl->tx + gl->tx_head, gl->tx_tail - gl->tx_head);
		gl->tx_tail -= gl->tx_head;
		gl->tx_head = 0;
	}
	if (gl->tx_tail + total > GUEST_LINK_TXQ_MAX) {
		gl->st.tx_overflows++;
		link_log(gl, LOG_WARN, "guest does not read: %zu bytes queued",
			 gl->tx_tail - gl->tx_head);
		if (!gl->ending)
			end_session(gl, -ENOBUFS, true);
		return -ENOBUFS;
	}
	vmnap_hdr_init(&h, type, len, ++gl->tx_seq);
	memcpy(gl->tx + gl->tx_tail, &h, sizeof(h));
	if (len)
		memcpy(gl->tx + gl->tx_tail + sizeof(h), payload, len);
	gl->tx_tail += total;
	gl->st.tx_msgs[type]++;
	log_debug(gl->subject, "-> %s seq %u len %u", vmnap_type_name(type),
		  gl->tx_seq, len);
	return gl->ending ? 0 : tx_flush(gl);
}

static int tx_error(struct guest_link *gl, unsigned int code, uint32_t ref_seq)
{
	struct vmnap_error e;

	memset(&e, 0, sizeof(e));
	e.code = vmnap_cpu32(code);
	e.ref_seq = vmnap_cpu32(ref_seq);
	snprintf(e.text, sizeof(e.text), "%s", vmnap_err_name(code));
	return tx_msg(gl, VMNAP_ERROR, &e, sizeof(e));
}

/* ---- sessions ---- */

static void reset_session_state(struct guest_link *gl)
{
	loop_timer_cancel(gl->cfg.loop, &gl->deadline);
	gl->hs = HANDOFF_NONE;
	gl->hs_req_id = 0;
	gl->resume_req_id = 0;
	gl->late_req_id = 0;
	gl->rx_len = 0;
	gl->tx_head = gl->tx_tail = 0;
	gl->tx_seq = 0;
	memset(&gl->peer, 0, sizeof(gl->peer));
	/* the message bucket is the link's: a new session does not refill it */
}

/*
 * End the session: flush what the transport takes now, tell it to drop
 * the stream (unless it ended it), then tell the owner.
 */
static void end_session(struct guest_link *gl, int err, bool close_transport)
{
	struct guest_link_transport t = gl->t;
	void *targ = gl->targ;

	if (gl->state == GUEST_LINK_CLOSED || gl->ending)
		return;
	gl->ending = true;
	if (close_transport)
		tx_flush(gl);
	gl->state = GUEST_LINK_CLOSED;
	gl->session++;
	reset_session_state(gl);
	gl->st.disconnects++;
	memset(&gl->t, 0, sizeof(gl->t));
	gl->targ = NULL;
	if (close_transport && t.close)
		t.close(targ, err);
	gl->ending = false;
	link_log(gl, LOG_INFO, "guest link down: %s", strerror(-err));
	if (gl->ops.disconnect)
		gl->ops.disconnect(gl, err, gl->opaque);
}

/* One token of the connection bucket; -EAGAIN (counted, logged) if none. */
static int connect_allowed(struct guest_link *gl)
{
	if (bucket_take(&gl->conn, link_now(gl)))
		return 0;
	gl->st.connects_refused++;
	link_log(gl, LOG_WARN, "guest reconnects faster than %u/s (burst %u): "
		 "connection refused (%llu so far)", gl->cfg.connect_per_sec,
		 gl->cfg.connect_burst, (unsigned long long)gl->st.connects_refused);
	return -EAGAIN;
}

static int connect_session(struct guest_link *gl,
			   const struct guest_link_transport *t, void *targ)
{
	if (gl->state != GUEST_LINK_CLOSED)
		end_session(gl, -ECONNRESET, true);
	gl->t = *t;
	gl->targ = targ;
	gl->session++;
	reset_session_state(gl);
	gl->state = GUEST_LINK_AWAIT_HELLO;
	gl->st.connects++;
	link_log(gl, LOG_INFO, "guest link connected, waiting for HELLO");
	return 0;
}

int guest_link_connect(struct guest_link *gl,
		       const struct guest_link_transport *t, void *targ)
{
	int err;

	if (!t || !t->send)
		return -EINVAL;
	err = connect_allowed(gl);
	return err ? err : connect_session(gl, t, targ);
}

void guest_link_transport_closed(struct guest_link *gl, int err)
{
	end_session(gl, err < 0 ? err : -ECONNRESET, false);
}

void guest_link_disconnect(struct guest_link *gl, int err)
{
	end_session(gl, err < 0 ? err : -ECONNABORTED, true);
}

void guest_link_tx_ready(struct guest_link *gl)
{
	if (gl->state != GUEST_LINK_CLOSED)
		tx_flush(gl);
}

/* ---- receive path ---- */

/* Reject a guest message: count, log, answer ERROR. */
static void reject(struct guest_link *gl, unsigned int code, unsigned int type,
		   uint32_t seq)
{
	if (code > VMNAP_ERR_MAX)
		code = VMNAP_EINTERNAL;
	gl->st.rx_errors[code]++;
	link_log(gl, LOG_WARN, "rejected guest message type %u (%s) seq %u: %s",
		 type, vmnap_type_name(type), seq, vmnap_err_name(code));
	tx_error(gl, code, seq);
}

/* Reject and end the session: the stream cannot be trusted any more. */
static void reject_fatal(struct guest_link *gl, unsigned int code,
			 unsigned int type, uint32_t seq)
{
	reject(gl, code, type, seq);
	end_session(gl, -EPROTO, true);
}

/* Take one message's worth of credit; false when the guest floods. */
static bool rate_take(struct guest_link *gl)
{
	return bucket_take(&gl->rate, link_now(gl));
}

static void on_hello(struct guest_link *gl, const struct vmnap_hdr *h,
		     const struct vmnap_hello *m)
{
	struct guest_link_peer *p = &gl->peer;
	uint16_t lo = vmnap_le16(m->min_version), hi = vmnap_le16(m->max_version);
	struct vmnap_hello_ack ack;
	uint64_t session = gl->session;

	if (lo < VMNAP_PROTO_MIN)
		lo = VMNAP_PROTO_MIN;
	if (hi > VMNAP_PROTO_MAX)
		hi = VMNAP_PROTO_MAX;
	if (lo > hi) {
		link_log(gl, LOG_WARN, "guest speaks versions %u..%u, host %u..%u",
			 vmnap_le16(m->min_version), vmnap_le16(m->max_version),
			 VMNAP_PROTO_MIN, VMNAP_PROTO_MAX);
		reject_fatal(gl, VMNAP_EVERSION, VMNAP_HELLO, vmnap_le32(h->seq));
		return;
	}
	memset(p, 0, sizeof(*p));
	p->version = hi;
	p->features_offered = vmnap_le32(m->features);
	p->features = p->features_offered & gl->cfg.features;
	p->nr_cpus = vmnap_le32(m->nr_cpus);
	p->page_size = vmnap_le32(m->page_size);
	memcpy(p->module_version, m->module_version, VMNAP_VERSION_LEN);
	p->nr_ranges = vmnap_le32(m->nr_ranges);
	for (unsigned int i = 0; i < p->nr_ranges; i++) {
		p->ranges[i].gpa = vmnap_le64(m->ranges[i].gpa);
		p->ranges[i].len = vmnap_le64(m->ranges[i].len);
	}

	memset(&ack, 0, sizeof(ack));
	ack.version = vmnap_cpu16(p->version);
	ack.features = vmnap_cpu32(p->features);
	ack.vm_id = vmnap_cpu64(gl->cfg.vm_id);
	if (tx_msg(gl, VMNAP_HELLO_ACK, &ack, sizeof(ack)) < 0 ||
	    gl->session != session)
		return;
	gl->state = GUEST_LINK_UP;
	link_log(gl, LOG_INFO, "guest HELLO: vmnap.ko %s, protocol %u, %u cpus, "
		 "page %u, %u RAM ranges, features 0x%x (using 0x%x)",
		 LOG_STRN(p->module_version, VMNAP_VERSION_LEN),
		 p->version, p->nr_cpus, p->page_size, p->nr_ranges,
		 p->features_offered, p->features);
	if (gl->ops.hello)
		gl->ops.hello(gl, p, gl->opaque);
}

static void evidence_from_wire(struct guest_link_evidence *ev,
			       const struct vmnap_evidence *w)
{
	ev->window_ns = vmnap_le64(w->window_ns);
	ev->next_timer_ns = vmnap_le64(w->next_timer_ns);
	ev->writeback_pages = vmnap_le64(w->writeback_pages);
	ev->dirty_pages = vmnap_le64(w->dirty_pages);
	ev->cpu_idle_permille = vmnap_le32(w->cpu_idle_permille);
	ev->nr_runnable = vmnap_le32(w->nr_runnable);
	ev->io_inflight = vmnap_le32(w->io_inflight);
	ev->busy_reasons = vmnap_le32(w->busy_reasons);
	ev->devices_quiesced = vmnap_le32(w->devices_quiesced);
	ev->flags = vmnap_le32(w->flags);
}

static void stale_ack(struct guest_link *gl, const struct vmnap_hdr *h,
		      uint64_t req_id)
{
	gl->st.stale_acks++;
	log_debug(gl->subject, "%s for request %llu, which is not outstanding",
		  vmnap_type_name(vmnap_le16(h->type)), (unsigned long long)req_id);
	reject(gl, VMNAP_ESTATE, vmnap_le16(h->type), vmnap_le32(h->seq));
}

/*
 * The ack of the handoff the host gave up on unanswered (its deadline
 * passed, or it was aborted): the guest was slower than the deadline, which
 * is no protocol error on either side.  Counted, not answered with an
 * ERROR.  A READY guest holds its devices for a handoff that is no longer
 * wanted; the ABORT sent when it was given up may have reached the guest
 * before it was quiesced (and been stale there), so it is sent again: a
 * guest that already released them ignores it.
 */
static void late_ack(struct guest_link *gl, uint64_t req_id, enum vmnap_verdict verdict)
{
	struct vmnap_handoff_abort ab;

	gl->late_req_id = 0;
	gl->st.late_acks++;
	link_log(gl, LOG_INFO, "handoff %llu: %s ack came after the host gave up on it%s",
		 (unsigned long long)req_id, verdict == VMNAP_READY ? "READY" : "BUSY",
		 verdict == VMNAP_READY ? ": abort sent again" : "");
	if (verdict != VMNAP_READY)
		return;
	ab.req_id = vmnap_cpu64(req_id);
	tx_msg(gl, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
}

static void on_handoff_ack(struct guest_link *gl, const struct vmnap_hdr *h,
			   const struct vmnap_handoff_ack *m)
{
	uint64_t req_id = vmnap_le64(m->req_id);
	enum vmnap_verdict verdict = (enum vmnap_verdict)vmnap_le32(m->verdict);
	struct guest_link_evidence ev;

	if (gl->hs != HANDOFF_PENDING || req_id != gl->hs_req_id) {
		if (req_id && req_id == gl->late_req_id)
			late_ack(gl, req_id, verdict);
		else
			stale_ack(gl, h, req_id);
		return;
	}
	loop_timer_cancel(gl->cfg.loop, &gl->deadline);
	evidence_from_wire(&ev, &m->ev);
	if (verdict == VMNAP_READY) {
		gl->hs = HANDOFF_QUIESCED;
		gl->st.handoff_ready++;
	} else {
		gl->hs = HANDOFF_NONE;
		gl->st.handoff_busy++;
	}
	log_debug(gl->subject, "handoff %llu: %s (busy 0x%x, idle %u permille, timer %llu ns)",
		  (unsigned long long)req_id,
		  verdict == VMNAP_READY ? "READY" : "BUSY", ev.busy_reasons,
		  ev.cpu_idle_permille, (unsigned long long)ev.next_timer_ns);
	if (gl->ops.handoff_ack)
		gl->ops.handoff_ack(gl, req_id, verdict, &ev, gl->opaque);
}

static void on_resume_ack(struct guest_link *gl, const struct vmnap_hdr *h,
			  const struct vmnap_resume_ack *m)
{
	uint64_t req_id = vmnap_le64(m->req_id);

	if (!gl->resume_req_id || req_id != gl->resume_req_id) {
		stale_ack(gl, h, req_id);
		return;
	}
	gl->resume_req_id = 0;
	gl->st.resume_acks++;
	if (gl->ops.resume_ack)
		gl->ops.resume_ack(gl, req_id, vmnap_le64(m->unquiesce_ns),
				   gl->opaque);
}

/*
 * FREE_REPORT: the guest holds the ranges (isolated, out of its allocator)
 * until it gets the ack, or until this session is over on both sides and a
 * new one is up.  So the ranges are dropped here, synchronously, only in
 * the session that carried the report and only when its ack can be queued
 * behind it; a session that has ended processes nothing more (rx_process
 * stops at a session change), and a new connection ends the old session
 * before its HELLO is read.  A guest that does not read (no room for the
 * ack) loses the session without the drop.
 */
static void on_free_report(struct guest_link *gl, const struct vmnap_hdr *h,
			   const struct vmnap_free_report *m)
{
	uint32_t n = vmnap_le32(m->nr_ranges);
	struct vmnap_free_report_ack ack;
	uint64_t session = gl->session;
	int status = VMNAP_FREE_IGNORED;

	if (!(gl->peer.features & VMNAP_F_FREE_REPORT)) {
		reject(gl, VMNAP_ESTATE, VMNAP_FREE_REPORT, vmnap_le32(h->seq));
		return;
	}
	if (gl->state != GUEST_LINK_UP || gl->ending)
		return;
	if (GUEST_LINK_TXQ_MAX - (gl->tx_tail - gl->tx_head) <
	    sizeof(struct vmnap_hdr) + sizeof(ack)) {
		gl->st.tx_overflows++;
		link_log(gl, LOG_WARN, "guest does not read: %zu bytes queued, "
			 "FREE_REPORT not acted on", gl->tx_tail - gl->tx_head);
		end_session(gl, -ENOBUFS, true);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		gl->free_ranges[i].gpa = vmnap_le64(m->ranges[i].gpa);
		gl->free_ranges[i].len = vmnap_le64(m->ranges[i].len);
	}
	gl->st.free_reports++;
	gl->st.free_ranges += n;
	if (gl->ops.free_report)
		status = gl->ops.free_report(gl, vmnap_le64(m->batch_id),
					     gl->free_ranges, n, gl->opaque);
	if (gl->session != session)
		return;
	if (status != VMNAP_FREE_OK && status != VMNAP_FREE_IGNORED) {
		log_warn(gl->subject, "free report handler returned %d: ignored",
			 status);
		status = VMNAP_FREE_IGNORED;
	}
	memset(&ack, 0, sizeof(ack));
	ack.batch_id = m->batch_id;
	ack.status = vmnap_cpu32((uint32_t)status);
	tx_msg(gl, VMNAP_FREE_REPORT_ACK, &ack, sizeof(ack));
}

static void on_guest_error(struct guest_link *gl, const struct vmnap_error *m)
{
	uint32_t code = vmnap_le32(m->code);

	gl->st.peer_errors[code]++;
	link_log(gl, LOG_WARN, "guest reports error %u (%s) for host seq %u: %s",
		 code, vmnap_err_name(code), vmnap_le32(m->ref_seq),
		 LOG_STRN(m->text, VMNAP_ERROR_TEXT_LEN));
}

/* Act on one message that vmnap_decode() accepted. */
static void dispatch(struct guest_link *gl, const struct vmnap_hdr *h,
		     const void *payload)
{
	unsigned int type = vmnap_le16(h->type);
	uint32_t seq = vmnap_le32(h->seq);

	gl->st.rx_msgs[type]++;
	log_debug(gl->subject, "<- %s seq %u len %u", vmnap_type_name(type), seq,
		  vmnap_le32(h->len));
	if (gl->state == GUEST_LINK_AWAIT_HELLO && type != VMNAP_HELLO &&
	    type != VMNAP_PING && type != VMNAP_ERROR) {
		reject(gl, VMNAP_ESTATE, type, seq);
		return;
	}
	switch (type) {
	case VMNAP_HELLO:
		if (gl->state == GUEST_LINK_UP)
			reject(gl, VMNAP_ESTATE, type, seq);
		else
			on_hello(gl, h, payload);
		break;
	case VMNAP_HANDOFF_ACK:
		on_handoff_ack(gl, h, payload);
		break;
	case VMNAP_RESUME_ACK:
		on_resume_ack(gl, h, payload);
		break;
	case VMNAP_FREE_REPORT:
		on_free_report(gl, h, payload);
		break;
	case VMNAP_PING:
		tx_msg(gl, VMNAP_PONG, payload, sizeof(struct vmnap_ping));
		break;
	case VMNAP_PONG:
		break;
	case VMNAP_ERROR:
		on_guest_error(gl, payload);
		break;
	default:
		/* vmnap_decode() only accepts G2H types; keep the guard */
		reject(gl, VMNAP_ETYPE, type, seq);
		break;
	}
}

/*
 * Decode and act on every whole message in the reassembly buffer.
 * 0, or -ECONNRESET when the session ended meanwhile.
 */
static int rx_process(struct guest_link *gl)
{
	uint64_t session = gl->session;
	const struct vmnap_ram *ram = gl->have_ram ? &gl->ram : NULL;
	size_t off = 0;

	while (off < gl->rx_len) {
		const struct vmnap_hdr *h = NULL;
		const void *payload = NULL;
		struct vmnap_hdr raw;
		size_t skip;
		long r;

		if (off % GUEST_LINK_RX_ALIGN) {
			memmove(gl->rx, gl->rx + off, gl->rx_len - off);
			gl->rx_len -= off;
			off = 0;
		}
		r = vmnap_decode(gl->rx + off, gl->rx_len - off, VMNAP_DIR_G2H,
				 ram, &h, &payload, &skip);
		if (r == 0)
			break;
		memcpy(&raw, gl->rx + off, sizeof(raw));
		if (!rate_take(gl)) {
			link_log(gl, LOG_WARN, "guest exceeds %u messages/s (burst %u)",
				 gl->cfg.rate_per_sec, gl->cfg.rate_burst);
			reject_fatal(gl, VMNAP_ERATE, vmnap_le16(raw.type),
				     vmnap_le32(raw.seq));
			return -ECONNRESET;
		}
		if (r < 0) {
			if (vmnap_err_is_fatal((int)r)) {
				reject_fatal(gl, (unsigned int)-r,
					     vmnap_le16(raw.type), vmnap_le32(raw.seq));
				return -ECONNRESET;
			}
			reject(gl, (unsigned int)-r, vmnap_le16(raw.type),
			       vmnap_le32(raw.seq));
			off += skip;
		} else {
			dispatch(gl, h, payload);
			off += (size_t)r;
		}
		if (gl->session != session)
			return -ECONNRESET;
	}
	if (off) {
		memmove(gl->rx, gl->rx + off, gl->rx_len - off);
		gl->rx_len -= off;
	}
	return 0;
}

int guest_link_rx(struct guest_link *gl, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (gl->state == GUEST_LINK_CLOSED)
		return -ENOTCONN;
	gl->st.rx_bytes += len;
	while (len) {
		size_t room = VMNAP_MAX_MSG - gl->rx_len;
		size_t n = len < room ? len : room;

		memcpy(gl->rx + gl->rx_len, p, n);
		gl->rx_len += n;
		p += n;
		len -= n;
		if (rx_process(gl) < 0)
			return -ECONNRESET;
	}
	return 0;
}

/* ---- requests from the owner ---- */

static void on_deadline(struct loop *l, struct loop_timer *t, void *arg)
{
	struct guest_link *gl = arg;
	struct vmnap_handoff_abort ab;
	uint64_t req_id = gl->hs_req_id;
	uint64_t session = gl->session;

	(void)l;
	(void)t;
	if (gl->state != GUEST_LINK_UP || gl->hs != HANDOFF_PENDING)
		return;
	gl->hs = HANDOFF_NONE;
	gl->late_req_id = req_id;
	gl->st.handoff_expired++;
	link_log(gl, LOG_WARN, "handoff %llu: no ack within the deadline, aborting",
		 (unsigned long long)req_id);
	ab.req_id = vmnap_cpu64(req_id);
	tx_msg(gl, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	if (gl->session != session)
		return;
	if (gl->ops.handoff_expired)
		gl->ops.handoff_expired(gl, req_id, gl->opaque);
}

int guest_link_handoff(struct guest_link *gl, uint32_t flags,
		       uint32_t deadline_ms, uint64_t *req_id)
{
	struct vmnap_handoff_req m;
	uint64_t id;
	int err;

	if (gl->state != GUEST_LINK_UP)
		return -ENOTCONN;
	if ((flags & ~VMNAP_HF_ALL) || !deadline_ms || !req_id)
		return -EINVAL;
	if (gl->hs != HANDOFF_NONE)
		return -EBUSY;
	id = ++gl->last_req_id;
	m.req_id = vmnap_cpu64(id);
	m.flags = vmnap_cpu32(flags);
	m.ack_deadline_ms = vmnap_cpu32(deadline_ms);
	err = tx_msg(gl, VMNAP_HANDOFF_REQ, &m, sizeof(m));
	if (err)
		return err;
	gl->hs = HANDOFF_PENDING;
	gl->hs_req_id = id;
	gl->st.handoffs++;
	loop_timer_arm(gl->cfg.loop, &gl->deadline,
		       (uint64_t)deadline_ms * NSEC_PER_MSEC);
	*req_id = id;
	return 0;
}

int guest_link_abort(struct guest_link *gl, uint64_t req_id)
{
	struct vmnap_handoff_abort m;

	if (gl->state != GUEST_LINK_UP)
		return -ENOTCONN;
	if (gl->hs == HANDOFF_NONE || req_id != gl->hs_req_id)
		return -ENOENT;
	loop_timer_cancel(gl->cfg.loop, &gl->deadline);
	if (gl->hs == HANDOFF_PENDING)	/* unanswered: its ack may still come */
		gl->late_req_id = req_id;
	gl->hs = HANDOFF_NONE;
	gl->st.aborts++;
	m.req_id = vmnap_cpu64(req_id);
	return tx_msg(gl, VMNAP_HANDOFF_ABORT, &m, sizeof(m));
}

int guest_link_resumed(struct guest_link *gl, uint64_t req_id,
		       uint64_t paused_ns, enum vmnap_resume_reason reason,
		       uint32_t flags)
{
	struct vmnap_resumed m;

	if (gl->state != GUEST_LINK_UP)
		return -ENOTCONN;
	if ((unsigned int)reason == 0 || reason > VMNAP_RESUME_REASON_MAX ||
	    (flags & ~VMNAP_RF_ALL))
		return -EINVAL;
	if (gl->hs != HANDOFF_QUIESCED || req_id != gl->hs_req_id)
		return -ENOENT;
	gl->hs = HANDOFF_NONE;
	gl->resume_req_id = req_id;
	gl->st.resumes++;
	m.req_id = vmnap_cpu64(req_id);
	m.paused_ns = vmnap_cpu64(paused_ns);
	m.reason = vmnap_cpu32((uint32_t)reason);
	m.flags = vmnap_cpu32(flags);
	return tx_msg(gl, VMNAP_RESUMED, &m, sizeof(m));
}

int guest_link_ping(struct guest_link *gl, uint64_t token)
{
	struct vmnap_ping m = { .token = vmnap_cpu64(token) };

	if (gl->state == GUEST_LINK_CLOSED)
		return -ENOTCONN;
	return tx_msg(gl, VMNAP_PING, &m, sizeof(m));
}

/* ---- attached fd transport ---- */

static ssize_t fd_send(void *targ, const void *buf, size_t len)
{
	struct guest_link *gl = targ;
	ssize_t r = send(gl->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (r < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return r;
}

static void fd_close(void *targ, int err)
{
	(void)err;
	fd_detach(targ);
}

static const struct guest_link_transport fd_transport = {
	.send = fd_send,
	.close = fd_close,
};

static void fd_detach(struct guest_link *gl)
{
	if (gl->fd < 0)
		return;
	loop_del_fd(gl->cfg.loop, gl->fd);
	close(gl->fd);
	gl->fd = -1;
	gl->fd_want_out = false;
}

static void fd_update_watch(struct guest_link *gl)
{
	bool want_out = gl->tx_head < gl->tx_tail;

	if (want_out == gl->fd_want_out)
		return;
	if (loop_mod_fd(gl->cfg.loop, gl->fd,
			EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0)) == 0)
		gl->fd_want_out = want_out;
}

static void fd_event(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct guest_link *gl = arg;
	unsigned char buf[GUEST_LINK_FD_READ_CHUNK];

	(void)l;
	if (events & EPOLLOUT)
		guest_link_tx_ready(gl);
	if (gl->fd != fd)
		return;
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
		return;
	for (unsigned int i = 0; i < GUEST_LINK_FD_READS_PER_WAKEUP; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));
		int err;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			err = n ? -errno : -ECONNRESET;
			if (n)
				link_log(gl, LOG_WARN, "read from guest: %s",
					 strerror(-err));
			fd_detach(gl);
			guest_link_transport_closed(gl, err);
			return;
		}
		if (guest_link_rx(gl, buf, (size_t)n) < 0)
			return;		/* session ended; the fd is closed */
	}
}

int guest_link_attach_fd(struct guest_link *gl, int fd)
{
	int flags, err;

	if (fd < 0)
		return -EBADF;
	err = connect_allowed(gl);
	if (err) {
		close(fd);
		return err;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (gl->state != GUEST_LINK_CLOSED)
		end_session(gl, -ECONNRESET, true);
	err = loop_add_fd(gl->cfg.loop, fd, EPOLLIN | EPOLLRDHUP, fd_event, gl);
	if (err) {
		log_err(gl->subject, "watch guest socket: %s", strerror(-err));
		close(fd);
		return err;
	}
	gl->fd = fd;
	gl->fd_want_out = false;
	return connect_session(gl, &fd_transport, gl);
}

/* ---- life cycle and queries ---- */

struct guest_link *guest_link_new(const struct guest_link_config *cfg,
				  const struct guest_link_ops *ops, void *opaque)
{
	struct guest_link *gl;

	if (!cfg || !cfg->loop || (cfg->features & ~VMNAP_F_ALL)) {
		errno = EINVAL;
		return NULL;
	}
	gl = calloc(1, sizeof(*gl));
	if (!gl)
		goto nomem;
	gl->rx = malloc(VMNAP_MAX_MSG);
	gl->tx = malloc(GUEST_LINK_TXQ_MAX);
	if (!gl->rx || !gl->tx)
		goto nomem;
	gl->cfg = *cfg;
	gl->cfg.subject = gl->subject;
	snprintf(gl->subject, sizeof(gl->subject), "%s",
		 cfg->subject ? cfg->subject : GUEST_LINK_DEFAULT_SUBJECT);
	if (!gl->cfg.rate_per_sec)
		gl->cfg.rate_per_sec = GUEST_LINK_RATE_PER_SEC;
	if (!gl->cfg.rate_burst)
		gl->cfg.rate_burst = GUEST_LINK_RATE_BURST;
	if (!gl->cfg.connect_per_sec)
		gl->cfg.connect_per_sec = GUEST_LINK_CONNECT_PER_SEC;
	if (!gl->cfg.connect_burst)
		gl->cfg.connect_burst = GUEST_LINK_CONNECT_BURST;
	if (!gl->cfg.log_interval_ms)
		gl->cfg.log_interval_ms = GUEST_LINK_LOG_INTERVAL_MS;
	if (!gl->cfg.log_burst)
		gl->cfg.log_burst = GUEST_LINK_LOG_BURST;
	bucket_init(&gl->rate, gl->cfg.rate_per_sec, gl->cfg.rate_burst, link_now(gl));
	bucket_init(&gl->conn, gl->cfg.connect_per_sec, gl->cfg.connect_burst,
		    link_now(gl));
	log_ratelimit_init(&gl->log_rl, (uint64_t)gl->cfg.log_interval_ms * NSEC_PER_MSEC,
			   gl->cfg.log_burst, link_now(gl));
	if (ops)
		gl->ops = *ops;
	gl->opaque = opaque;
	gl->fd = -1;
	gl->state = GUEST_LINK_CLOSED;
	loop_timer_init(&gl->deadline, on_deadline, gl);
	return gl;
nomem:
	if (gl) {
		free(gl->rx);
		free(gl->tx);
		free(gl);
	}
	errno = ENOMEM;
	return NULL;
}

void guest_link_free(struct guest_link *gl)
{
	if (!gl)
		return;
	gl->ops.disconnect = NULL;	/* silently */
	end_session(gl, -ECONNABORTED, true);
	fd_detach(gl);
	loop_timer_cancel(gl->cfg.loop, &gl->deadline);
	free(gl->rx);
	free(gl->tx);
	free(gl);
}

void guest_link_set_ops(struct guest_link *gl, const struct guest_link_ops *ops,
			void *opaque)
{
	if (ops)
		gl->ops = *ops;
	else
		memset(&gl->ops, 0, sizeof(gl->ops));
	gl->opaque = opaque;
}

int guest_link_set_ram(struct guest_link *gl, const struct vmnap_ram *ram)
{
	if (!ram || !ram->ranges || !ram->nr) {
		gl->have_ram = false;
		memset(&gl->ram, 0, sizeof(gl->ram));
		if (ram && ram->page_size)
			gl->ram.page_size = ram->page_size;
		gl->have_ram = gl->ram.page_size != 0;
		return 0;
	}
	if (ram->nr > VMNAP_MAX_RAM_RANGES)
		return -EINVAL;
	if (ram->page_size && !vmnap_page_size_ok(ram->page_size))
		return -EINVAL;
	memcpy(gl->ram_ranges, ram->ranges, ram->nr * sizeof(ram->ranges[0]));
	gl->ram.ranges = gl->ram_ranges;
	gl->ram.nr = ram->nr;
	gl->ram.page_size = ram->page_size;
	gl->have_ram = true;
	return 0;
}

enum guest_link_state guest_link_state(const struct guest_link *gl)
{
	return gl->state;
}

const struct guest_link_peer *guest_link_peer(const struct guest_link *gl)
{
	return gl->state == GUEST_LINK_UP ? &gl->peer : NULL;
}

void guest_link_get_stats(const struct guest_link *gl,
			  struct guest_link_stats *st)
{
	*st = gl->st;
}
