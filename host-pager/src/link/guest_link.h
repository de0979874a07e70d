/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * guest_link.h - host side of the vmnap protocol (uapi/vmnap.h) with the
 * guest module vmnap.ko, one link per VM.
 *
 * Transport-agnostic.  A transport (the built-in vhost-user-vsock device, an
 * AF_VSOCK or hybrid unix socket accepted by vmnapd) begins a session with
 * guest_link_connect(), pushes the guest's stream bytes in with
 * guest_link_rx() in chunks of any size, and receives the host's bytes
 * through its ->send callback.  guest_link_attach_fd() is a ready-made
 * transport for a connected stream socket watched by the vmnapd loop.
 *
 * The owner (the VM's coordinator) asks for handoffs, aborts and resumes
 * and hears about the guest through struct guest_link_ops.
 *
 * Everything the guest sends is hostile.  Each message is checked with
 * vmnap_decode() (GPA ranges against the RAM map the owner supplies) and
 * counted.  A message that breaks framing (bad magic, version, oversize
 * length) is answered with ERROR and the link disconnects; any other bad
 * message is answered with ERROR and skipped.  A message flood beyond a
 * token bucket (GUEST_LINK_RATE_*) gets ERROR VMNAP_ERATE and a disconnect.
 *
 * Limits belong to the link (one per VM), not to a session: the message
 * bucket is not refilled by reconnecting; connections beyond a second
 * bucket (GUEST_LINK_CONNECT_*) are refused (-EAGAIN: the transport drops
 * the stream; the session in place, if any, stays) and counted; the lines
 * the link logs about sessions and guest input go through a third
 * (GUEST_LINK_LOG_*): past it they are logged at debug level only and
 * counted, and the next line that passes says how many were suppressed.
 * Guest strings are logged through log_sanitize().
 * Valid messages at the wrong time (before HELLO, stale or unexpected acks)
 * get ERROR VMNAP_ESTATE and are otherwise ignored.
 *
 * Threading: everything runs on the loop thread.  Owner callbacks may call
 * any guest_link_* function except guest_link_free(); transport callbacks
 * (->send, ->close) must not call into the link.
 */
#ifndef VMNAP_GUEST_LINK_H
#define VMNAP_GUEST_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"
#include "uapi/vmnap.h"

/* Default token bucket: sustained guest messages per second, and burst. */
#define GUEST_LINK_RATE_PER_SEC	1000U
#define GUEST_LINK_RATE_BURST	4000U
/*
 * Default connection bucket: sessions per second, and burst.  The module
 * reconnects after 100 ms at the earliest, doubling up to 5 s.
 */
#define GUEST_LINK_CONNECT_PER_SEC	1U
#define GUEST_LINK_CONNECT_BURST	10U
/* Default log budget of a link: a burst of lines, then one per interval. */
#define GUEST_LINK_LOG_BURST		32U
#define GUEST_LINK_LOG_INTERVAL_MS	5000U
/* Bytes of host messages queued while the transport cannot take them. */
#define GUEST_LINK_TXQ_MAX	(64U * 1024U)

/*
 * The guest module connects from a reserved vsock port (below this), which
 * only the guest kernel or a guest process with CAP_NET_BIND_SERVICE can
 * bind.  Where the transport tells the guest's port (vmnapd's vsock device,
 * the AF_VSOCK listener) a guest link connection from any other port is
 * refused, counted and logged, so an unprivileged guest process cannot take
 * over its VM's session.  The hybrid unix socket does not carry the guest's
 * port: there the VMM's own checks are all there is.
 */
#define GUEST_LINK_RESERVED_PORT_END	1024U

/* Log a refusal on the 1st, 2nd, 4th, 8th... one: a flood stays quiet. */
static inline bool guest_link_log_nth(uint64_t n)
{
	return n && !(n & (n - 1));
}

struct guest_link;

/* A GPA range in host byte order. */
struct guest_link_range {
	uint64_t gpa;
	uint64_t len;
};

/* What the guest said in HELLO (host byte order), valid while connected. */
struct guest_link_peer {
	uint16_t version;		/* chosen by the host */
	uint32_t features_offered;	/* VMNAP_F_* from HELLO */
	uint32_t features;		/* subset the host acked and uses */
	uint32_t nr_cpus;
	uint32_t page_size;
	char module_version[VMNAP_VERSION_LEN];	/* NUL-terminated */
	unsigned int nr_ranges;
	struct guest_link_range ranges[VMNAP_MAX_RAM_RANGES];	/* as declared */
};

/* struct vmnap_evidence in host byte order. */
struct guest_link_evidence {
	uint64_t window_ns;
	uint64_t next_timer_ns;		/* VMNAP_TIMER_UNKNOWN: not known */
	uint64_t writeback_pages;
	uint64_t dirty_pages;
	uint32_t cpu_idle_permille;
	uint32_t nr_runnable;
	uint32_t io_inflight;
	uint32_t busy_reasons;		/* VMNAP_BUSY_* */
	uint32_t devices_quiesced;
	uint32_t flags;			/* VMNAP_EV_* */
};

/* Events for the link's owner.  Every member may be NULL. */
struct guest_link_ops {
	/* HELLO accepted and HELLO_ACK sent. */
	void (*hello)(struct guest_link *gl, const struct guest_link_peer *peer,
		      void *opaque);
	/* HANDOFF_ACK for the outstanding request.  READY: the guest has
	 * quiesced and waits for guest_link_resumed() or guest_link_abort(). */
	void (*handoff_ack)(struct guest_link *gl, uint64_t req_id,
			    enum vmnap_verdict verdict,
			    const struct guest_link_evidence *ev, void *opaque);
	/* No HANDOFF_ACK within the deadline: the link already sent
	 * HANDOFF_ABORT; the request is over. */
	void (*handoff_expired)(struct guest_link *gl, uint64_t req_id,
				void *opaque);
	/* RESUME_ACK for the last RESUMED. */
	void (*resume_ack)(struct guest_link *gl, uint64_t req_id,
			   uint64_t unquiesce_ns, void *opaque);
	/* FREE_REPORT (only when VMNAP_F_FREE_REPORT was acked); ranges are
	 * checked against the RAM map.  Return the FREE_REPORT_ACK status,
	 * VMNAP_FREE_OK or VMNAP_FREE_IGNORED.  NULL: IGNORED. */
	int (*free_report)(struct guest_link *gl, uint64_t batch_id,
			   const struct guest_link_range *ranges,
			   unsigned int nr, void *opaque);
	/* The session ended (peer closed, transport error, fatal protocol
	 * error, rate limit, guest_link_disconnect()); @err is -errno.  Any
	 * handoff in progress is over: the guest unquiesces on link loss. */
	void (*disconnect)(struct guest_link *gl, int err, void *opaque);
};

/* How bytes reach the guest; set per session by guest_link_connect(). */
struct guest_link_transport {
	/* Write up to @len bytes; return how many were taken (0..len, or
	 * -EAGAIN for none), or another -errno to end the session.  After a
	 * short write, call guest_link_tx_ready() when writable again. */
	ssize_t (*send)(void *targ, const void *buf, size_t len);
	/* The link ends the session (after flushing what it could): drop the
	 * stream.  Not called when the transport ended it. */
	void (*close)(void *targ, int err);
};

struct guest_link_config {
	struct loop *loop;		/* required: timers, attached fds */
	const char *subject;		/* log prefix, e.g. "vm web1"; copied */
	uint64_t vm_id;			/* sent in HELLO_ACK */
	uint32_t features;		/* VMNAP_F_* the host supports */
	uint32_t rate_per_sec;		/* 0: GUEST_LINK_RATE_PER_SEC */
	uint32_t rate_burst;		/* 0: GUEST_LINK_RATE_BURST */
	uint32_t connect_per_sec;	/* 0: GUEST_LINK_CONNECT_PER_SEC */
	uint32_t connect_burst;		/* 0: GUEST_LINK_CONNECT_BURST */
	uint32_t log_interval_ms;	/* 0: GUEST_LINK_LOG_INTERVAL_MS */
	uint32_t log_burst;		/* 0: GUEST_LINK_LOG_BURST */
	/* The limits' clock (monotonic ns); NULL: now_ns().  Tests fake it. */
	uint64_t (*clock)(void);
};

/* Counters since guest_link_new(). */
struct guest_link_stats {
	uint64_t rx_bytes, tx_bytes;
	uint64_t rx_msgs[VMNAP_TYPE_MAX + 1];	/* accepted, by type */
	uint64_t tx_msgs[VMNAP_TYPE_MAX + 1];	/* queued, by type */
	uint64_t rx_errors[VMNAP_ERR_MAX + 1];	/* guest input rejected */
	uint64_t peer_errors[VMNAP_ERR_MAX + 1];	/* ERROR from guest */
	uint64_t connects, disconnects;
	uint64_t handoffs, handoff_ready, handoff_busy, handoff_expired;
	uint64_t aborts, resumes, resume_acks;
	uint64_t stale_acks;		/* also in rx_errors[VMNAP_ESTATE] */
	uint64_t late_acks;		/* HANDOFF_ACK of the handoff given up
					 * (deadline, abort): not an error */
	uint64_t free_reports, free_ranges;
	uint64_t tx_overflows;		/* session ended: queue over bound */
	uint64_t connects_refused;	/* over the connection bucket */
	uint64_t log_suppressed;	/* lines over the log budget */
};

enum guest_link_state {
	GUEST_LINK_CLOSED,	/* no session */
	GUEST_LINK_AWAIT_HELLO,	/* session started, no HELLO yet */
	GUEST_LINK_UP,		/* HELLO done */
};

/* NULL with errno set (EINVAL, ENOMEM). */
struct guest_link *guest_link_new(const struct guest_link_config *cfg,
				  const struct guest_link_ops *ops,
				  void *opaque);
/*
 * Ends a session silently (no disconnect callback; the transport's ->close
 * is called, so it drops its pointer to the link) and frees.
 */
void guest_link_free(struct guest_link *gl);
/* Replace the owner's callbacks (NULL: none), e.g. when the owner goes. */
void guest_link_set_ops(struct guest_link *gl, const struct guest_link_ops *ops,
			void *opaque);

/*
 * The host's own map of guest RAM (the pager's), copied; NULL or nr == 0
 * clears it, and then ranges are only checked for alignment, size and
 * overflow.  ram->page_size (0: VMNAP_MIN_PAGE_SIZE) sets the alignment of
 * FREE_REPORT ranges.  -EINVAL when more than VMNAP_MAX_RAM_RANGES.
 */
int guest_link_set_ram(struct guest_link *gl, const struct vmnap_ram *ram);

/* ---- transport side ---- */

/*
 * Begin a session; an existing one ends first (disconnect -ECONNRESET).
 * -EAGAIN: over the connection bucket, refused (counted; nothing changed).
 */
int guest_link_connect(struct guest_link *gl,
		       const struct guest_link_transport *t, void *targ);
/*
 * Bytes from the guest, any chunking.  They are copied before they are
 * looked at, so @buf may be guest memory the guest keeps changing.
 * Returns 0 when consumed, -ENOTCONN without a session, -ECONNRESET when
 * this input ended the session (the transport's ->close was called; the
 * remaining bytes were dropped).
 */
int guest_link_rx(struct guest_link *gl, const void *buf, size_t len);
/* The transport can take bytes again: flush the queue. */
void guest_link_tx_ready(struct guest_link *gl);
/* The transport lost the stream (@err -errno, e.g. -ECONNRESET on EOF). */
void guest_link_transport_closed(struct guest_link *gl, int err);
/*
 * Use the connected stream socket @fd (AF_VSOCK, AF_UNIX) as transport,
 * watched on cfg->loop.  Takes ownership of @fd (made non-blocking, closed
 * when the session ends) even on error.  -errno; -EAGAIN as
 * guest_link_connect().
 */
int guest_link_attach_fd(struct guest_link *gl, int fd);

/* ---- owner side ---- */

/* End the session from the host side (e.g. VM removed); @err -errno. */
void guest_link_disconnect(struct guest_link *gl, int err);

/*
 * Send HANDOFF_REQ (@flags VMNAP_HF_*) with a new, increasing *@req_id.
 * If no HANDOFF_ACK arrives within @deadline_ms (> 0), the link sends
 * HANDOFF_ABORT and calls ->handoff_expired.  -ENOTCONN before HELLO,
 * -EBUSY while another handoff is pending or the guest is quiesced,
 * -EINVAL for bad arguments, -ENOBUFS when the queue is full.
 */
int guest_link_handoff(struct guest_link *gl, uint32_t flags,
		       uint32_t deadline_ms, uint64_t *req_id);
/* Send HANDOFF_ABORT for a pending or READY handoff.  -ENOENT otherwise. */
int guest_link_abort(struct guest_link *gl, uint64_t req_id);
/*
 * Send RESUMED for a handoff the guest answered READY (@reason
 * VMNAP_RESUME_*, @flags VMNAP_RF_*); its RESUME_ACK goes to
 * ->resume_ack.  -ENOENT when @req_id is not the quiesced handoff.
 */
int guest_link_resumed(struct guest_link *gl, uint64_t req_id,
		       uint64_t paused_ns, enum vmnap_resume_reason reason,
		       uint32_t flags);
/* Send PING; the guest's PONG is counted in rx_msgs[VMNAP_PONG]. */
int guest_link_ping(struct guest_link *gl, uint64_t token);

enum guest_link_state guest_link_state(const struct guest_link *gl);
/* The HELLO data, NULL unless GUEST_LINK_UP. */
const struct guest_link_peer *guest_link_peer(const struct guest_link *gl);
void guest_link_get_stats(const struct guest_link *gl,
			  struct guest_link_stats *st);
const char *guest_link_state_name(enum guest_link_state s);

#endif
