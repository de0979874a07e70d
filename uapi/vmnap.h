/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * vmnap.h - wire protocol between the guest module vmnap.ko and vmnapd.
 *
 * Transport: a vsock stream; the guest connects to (host CID, port).
 * Framing: a 16-byte header (struct vmnap_hdr) then hdr.len payload bytes,
 * hdr.len <= VMNAP_MAX_PAYLOAD.  Every integer is little-endian and of fixed
 * width; no struct has padding holes; every size is pinned by a static
 * assert, so a layout change breaks the build on both sides.
 *
 * This header holds only types, constants and static inline codecs that
 * allocate nothing and compile both in the kernel and in userspace (C11).
 * Both peers treat everything they receive as hostile: a message is used
 * only after vmnap_hdr_check() and vmnap_msg_check() accepted it.  Those
 * return 0 or a negative VMNAP_E* code, which is also what an ERROR
 * message carries on the wire.
 */
#ifndef _UAPI_VMNAP_H
#define _UAPI_VMNAP_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/string.h>
#include <asm/byteorder.h>
#define vmnap_le16(x)	le16_to_cpu(x)
#define vmnap_le32(x)	le32_to_cpu(x)
#define vmnap_le64(x)	le64_to_cpu(x)
#define vmnap_cpu16(x)	cpu_to_le16(x)
#define vmnap_cpu32(x)	cpu_to_le32(x)
#define vmnap_cpu64(x)	cpu_to_le64(x)
#else
#include <linux/types.h>
#include <stddef.h>
#include <string.h>
/* Userspace: no feature macros needed (strict C11 hides <endian.h>). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define vmnap_le16(x)	((__u16)(x))
#define vmnap_le32(x)	((__u32)(x))
#define vmnap_le64(x)	((__u64)(x))
#else
#define vmnap_le16(x)	((__u16)__builtin_bswap16(x))
#define vmnap_le32(x)	((__u32)__builtin_bswap32(x))
#define vmnap_le64(x)	((__u64)__builtin_bswap64(x))
#endif
#define vmnap_cpu16(x)	vmnap_le16(x)
#define vmnap_cpu32(x)	vmnap_le32(x)
#define vmnap_cpu64(x)	vmnap_le64(x)
#endif

#define VMNAP_SIZE_ASSERT(type, size) \
	_Static_assert(sizeof(type) == (size), "wire size of " #type)

/* ---- constants ------------------------------------------------------ */

#define VMNAP_MAGIC		0x50414e56U	/* bytes "VNAP" read as le32 */
#define VMNAP_PROTO_VERSION	1		/* what this header speaks */
#define VMNAP_PROTO_MIN		1		/* oldest version accepted */
#define VMNAP_PROTO_MAX		1		/* newest version accepted */

#define VMNAP_DEFAULT_CID	2		/* VMADDR_CID_HOST */
#define VMNAP_DEFAULT_PORT	5151
/*
 * Guest port the module listens on while its link is down: a host
 * connection there (accepted and closed at once, nothing is read) makes it
 * connect now instead of at its next reconnect delay.  Reserved (below
 * 1024), so no guest process without CAP_NET_BIND_SERVICE can take it.
 */
#define VMNAP_DOORBELL_PORT	1023

#define VMNAP_MAX_PAYLOAD	65536U		/* hdr.len limit */
#define VMNAP_MAX_RAM_RANGES	64U		/* in HELLO */
#define VMNAP_MAX_FREE_RANGES	1024U		/* in one FREE_REPORT */
#define VMNAP_VERSION_LEN	32U		/* module version string */
#define VMNAP_ERROR_TEXT_LEN	56U		/* ERROR text, NUL-terminated */
#define VMNAP_MIN_PAGE_SIZE	4096U
#define VMNAP_MAX_PAGE_SIZE	(1U << 30)

/* "no timer armed, or the module cannot tell": never offload on it */
#define VMNAP_TIMER_UNKNOWN	(~(__u64)0)

/* Message types.  G = guest (vmnap.ko), H = host (vmnapd). */
enum vmnap_type {
	VMNAP_HELLO		= 1,	/* G->H */
	VMNAP_HELLO_ACK		= 2,	/* H->G */
	VMNAP_HANDOFF_REQ	= 3,	/* H->G */
	VMNAP_HANDOFF_ACK	= 4,	/* G->H */
	VMNAP_HANDOFF_ABORT	= 5,	/* H->G */
	VMNAP_RESUMED		= 6,	/* H->G */
	VMNAP_RESUME_ACK	= 7,	/* G->H */
	VMNAP_FREE_REPORT	= 8,	/* G->H */
	VMNAP_FREE_REPORT_ACK	= 9,	/* H->G */
	VMNAP_PING		= 10,	/* both */
	VMNAP_PONG		= 11,	/* both */
	VMNAP_ERROR		= 12,	/* both */
	VMNAP_TYPE_MAX		= VMNAP_ERROR,
};

/* Who may send a type; a receiver rejects a type its peer may not send. */
enum vmnap_dir {
	VMNAP_DIR_G2H	= 1 << 0,
	VMNAP_DIR_H2G	= 1 << 1,
};

/* Error codes: returned negated by the checks, carried positive in ERROR. */
enum vmnap_err {
	VMNAP_OK	= 0,
	VMNAP_EMAGIC	= 1,	/* bad magic */
	VMNAP_EVERSION	= 2,	/* version outside what we speak */
	VMNAP_ETOOBIG	= 3,	/* hdr.len over VMNAP_MAX_PAYLOAD */
	VMNAP_ETRUNC	= 4,	/* fewer bytes than the header or type needs */
	VMNAP_ETYPE	= 5,	/* unknown type, or wrong direction */
	VMNAP_ELEN	= 6,	/* payload length wrong for the type */
	VMNAP_ECOUNT	= 7,	/* element count does not match the length */
	VMNAP_EALIGN	= 8,	/* GPA or length not page aligned */
	VMNAP_EZERO	= 9,	/* zero-length range */
	VMNAP_EOVERFLOW	= 10,	/* gpa + len wraps */
	VMNAP_ERANGE	= 11,	/* range outside guest RAM */
	VMNAP_EFIELD	= 12,	/* a field holds a value not allowed */
	VMNAP_ESTATE	= 13,	/* valid message at the wrong time */
	VMNAP_ERATE	= 14,	/* peer exceeded a rate limit */
	VMNAP_EINTERNAL	= 15,	/* receiver failed for its own reasons */
	VMNAP_ERR_MAX	= VMNAP_EINTERNAL,
};

/* Features (HELLO, HELLO_ACK: the host answers with the subset it uses). */
#define VMNAP_F_QUIESCE		(1U << 0)	/* devices quiesced on handoff */
#define VMNAP_F_FREE_REPORT	(1U << 1)	/* FREE_REPORT is active */
#define VMNAP_F_TIMER_EVIDENCE	(1U << 2)	/* next_timer_ns is measured */
#define VMNAP_F_CLOCK_STEP	(1U << 3)	/* RESUMED may carry RF_CLOCK_STOPPED */
#define VMNAP_F_ALL		(VMNAP_F_QUIESCE | VMNAP_F_FREE_REPORT | \
				 VMNAP_F_TIMER_EVIDENCE | VMNAP_F_CLOCK_STEP)

/* HANDOFF_REQ.flags */
#define VMNAP_HF_OFFLOAD	(1U << 0)	/* host intends to evict RAM */
#define VMNAP_HF_ALL		VMNAP_HF_OFFLOAD

/* HANDOFF_ACK.verdict */
enum vmnap_verdict {
	VMNAP_READY	= 1,
	VMNAP_BUSY	= 2,
};

/* Busy reason bits (evidence.busy_reasons; set only with VMNAP_BUSY). */
#define VMNAP_BUSY_RUNNABLE	(1U << 0)	/* runnable tasks besides ours */
#define VMNAP_BUSY_CPU		(1U << 1)	/* a CPU was not idle enough */
#define VMNAP_BUSY_IO		(1U << 2)	/* block requests in flight */
#define VMNAP_BUSY_WRITEBACK	(1U << 3)	/* pages under writeback */
#define VMNAP_BUSY_TIMER	(1U << 4)	/* next timer too close */
#define VMNAP_BUSY_QUIESCE	(1U << 5)	/* a device would not quiesce */
#define VMNAP_BUSY_DISABLED	(1U << 6)	/* module parameter enabled=0 */
#define VMNAP_BUSY_STATE	(1U << 7)	/* handoff already under way */
#define VMNAP_BUSY_ALL		((1U << 8) - 1)

/* evidence.flags */
#define VMNAP_EV_TIMER_KNOWN	(1U << 0)	/* next_timer_ns is complete */
#define VMNAP_EV_ALL		VMNAP_EV_TIMER_KNOWN

/* RESUMED.reason */
enum vmnap_resume_reason {
	VMNAP_RESUME_DATA_READY	= 1,
	VMNAP_RESUME_TIMER	= 2,
	VMNAP_RESUME_EXTERNAL	= 3,
	VMNAP_RESUME_FAILSAFE	= 4,
	VMNAP_RESUME_MANUAL	= 5,
	VMNAP_RESUME_REASON_MAX	= VMNAP_RESUME_MANUAL,
};

/* RESUMED.flags */
#define VMNAP_RF_OFFLOADED	(1U << 0)	/* RAM was evicted while paused */
/*
 * The guest's clock stood still for paused_ns (the pause backend stops
 * it: QMP stop, Cloud Hypervisor): the guest steps CLOCK_REALTIME forward
 * by paused_ns.  Sent only to a guest that offered VMNAP_F_CLOCK_STEP.
 */
#define VMNAP_RF_CLOCK_STOPPED	(1U << 1)
#define VMNAP_RF_ALL		(VMNAP_RF_OFFLOADED | VMNAP_RF_CLOCK_STOPPED)

/* FREE_REPORT_ACK.status */
enum vmnap_free_status {
	VMNAP_FREE_OK		= 0,	/* host dropped the pages */
	VMNAP_FREE_IGNORED	= 1,	/* host kept them (valid, not used) */
};

/* ---- wire structs --------------------------------------------------- */

struct vmnap_hdr {
	__le32 magic;
	__le16 version;
	__le16 type;
	__le32 len;		/* payload bytes after this header */
	__le32 seq;		/* sender's message counter */
};
VMNAP_SIZE_ASSERT(struct vmnap_hdr, 16);

struct vmnap_range {
	__le64 gpa;
	__le64 len;
};
VMNAP_SIZE_ASSERT(struct vmnap_range, 16);

struct vmnap_hello {
	__le16 min_version;
	__le16 max_version;
	__le32 features;	/* VMNAP_F_* the guest offers */
	__le32 nr_cpus;
	__le32 page_size;
	__le32 nr_ranges;	/* guest RAM ranges that follow */
	__le32 reserved;	/* zero */
	char module_version[VMNAP_VERSION_LEN];	/* NUL-terminated */
	struct vmnap_range ranges[];
};
VMNAP_SIZE_ASSERT(struct vmnap_hello, 56);

struct vmnap_hello_ack {
	__le16 version;		/* chosen, within the guest's range */
	__le16 reserved;	/* zero */
	__le32 features;	/* subset of what the guest offered */
	__le64 vm_id;
};
VMNAP_SIZE_ASSERT(struct vmnap_hello_ack, 16);

struct vmnap_handoff_req {
	__le64 req_id;
	__le32 flags;		/* VMNAP_HF_* */
	__le32 ack_deadline_ms;	/* host gives up (aborts) after this */
};
VMNAP_SIZE_ASSERT(struct vmnap_handoff_req, 16);

/*
 * Idle evidence, measured by the guest kernel over window_ns before the ack.
 * next_timer_ns is the real-timer budget: ns from the ack until the guest's
 * earliest armed timer other than vmnap's own, VMNAP_TIMER_UNKNOWN when it
 * cannot be told (then VMNAP_EV_TIMER_KNOWN is clear).
 */
struct vmnap_evidence {
	__le64 window_ns;
	__le64 next_timer_ns;
	__le64 writeback_pages;	/* NR_WRITEBACK */
	__le64 dirty_pages;	/* NR_FILE_DIRTY */
	__le32 cpu_idle_permille;	/* minimum over online CPUs, 0..1000 */
	__le32 nr_runnable;	/* runnable tasks other than the module's */
	__le32 io_inflight;	/* block requests issued, not completed */
	__le32 busy_reasons;	/* VMNAP_BUSY_* */
	__le32 devices_quiesced;
	__le32 flags;		/* VMNAP_EV_* */
};
VMNAP_SIZE_ASSERT(struct vmnap_evidence, 56);

struct vmnap_handoff_ack {
	__le64 req_id;
	__le32 verdict;		/* enum vmnap_verdict */
	__le32 reserved;	/* zero */
	struct vmnap_evidence ev;
};
VMNAP_SIZE_ASSERT(struct vmnap_handoff_ack, 72);

struct vmnap_handoff_abort {
	__le64 req_id;
};
VMNAP_SIZE_ASSERT(struct vmnap_handoff_abort, 8);

struct vmnap_resumed {
	__le64 req_id;
	__le64 paused_ns;
	__le32 reason;		/* enum vmnap_resume_reason */
	__le32 flags;		/* VMNAP_RF_* */
};
VMNAP_SIZE_ASSERT(struct vmnap_resumed, 24);

struct vmnap_resume_ack {
	__le64 req_id;
	__le64 unquiesce_ns;	/* guest time spent unquiescing */
};
VMNAP_SIZE_ASSERT(struct vmnap_resume_ack, 16);

struct vmnap_free_report {
	__le64 batch_id;
	__le32 nr_ranges;
	__le32 reserved;	/* zero */
	struct vmnap_range ranges[];
};
VMNAP_SIZE_ASSERT(struct vmnap_free_report, 16);

struct vmnap_free_report_ack {
	__le64 batch_id;
	__le32 status;		/* enum vmnap_free_status */
	__le32 reserved;	/* zero */
};
VMNAP_SIZE_ASSERT(struct vmnap_free_report_ack, 16);

struct vmnap_ping {		/* PING and PONG: PONG echoes the token */
	__le64 token;
};
VMNAP_SIZE_ASSERT(struct vmnap_ping, 8);

struct vmnap_error {
	__le32 code;		/* enum vmnap_err */
	__le32 ref_seq;		/* seq of the message that caused it, or 0 */
	char text[VMNAP_ERROR_TEXT_LEN];	/* NUL-terminated */
};
VMNAP_SIZE_ASSERT(struct vmnap_error, 64);

/* Largest whole message (header + payload) a peer needs to buffer. */
#define VMNAP_MAX_MSG	(sizeof(struct vmnap_hdr) + VMNAP_MAX_PAYLOAD)

/* ---- codecs --------------------------------------------------------- */

/* Directions in which @type may travel, 0 for an unknown type. */
static inline unsigned int vmnap_type_dirs(unsigned int type)
{
	switch (type) {
	case VMNAP_HELLO:
	case VMNAP_HANDOFF_ACK:
	case VMNAP_RESUME_ACK:
	case VMNAP_FREE_REPORT:
		return VMNAP_DIR_G2H;
	case VMNAP_HELLO_ACK:
	case VMNAP_HANDOFF_REQ:
	case VMNAP_HANDOFF_ABORT:
	case VMNAP_RESUMED:
	case VMNAP_FREE_REPORT_ACK:
		return VMNAP_DIR_H2G;
	case VMNAP_PING:
	case VMNAP_PONG:
	case VMNAP_ERROR:
		return VMNAP_DIR_G2H | VMNAP_DIR_H2G;
	default:
		return 0;
	}
}

static inline const char *vmnap_type_name(unsigned int type)
{
	static const char *const names[VMNAP_TYPE_MAX + 1] = {
		[VMNAP_HELLO] = "HELLO",
		[VMNAP_HELLO_ACK] = "HELLO_ACK",
		[VMNAP_HANDOFF_REQ] = "HANDOFF_REQ",
		[VMNAP_HANDOFF_ACK] = "HANDOFF_ACK",
		[VMNAP_HANDOFF_ABORT] = "HANDOFF_ABORT",
		[VMNAP_RESUMED] = "RESUMED",
		[VMNAP_RESUME_ACK] = "RESUME_ACK",
		[VMNAP_FREE_REPORT] = "FREE_REPORT",
		[VMNAP_FREE_REPORT_ACK] = "FREE_REPORT_ACK",
		[VMNAP_PING] = "PING",
		[VMNAP_PONG] = "PONG",
		[VMNAP_ERROR] = "ERROR",
	};

	if (type > VMNAP_TYPE_MAX || !names[type])
		return "UNKNOWN";
	return names[type];
}

static inline const char *vmnap_err_name(unsigned int code)
{
	static const char *const names[VMNAP_ERR_MAX + 1] = {
		[VMNAP_OK] = "ok",
		[VMNAP_EMAGIC] = "bad magic",
		[VMNAP_EVERSION] = "unsupported version",
		[VMNAP_ETOOBIG] = "length over limit",
		[VMNAP_ETRUNC] = "truncated",
		[VMNAP_ETYPE] = "unknown type or wrong direction",
		[VMNAP_ELEN] = "wrong payload length",
		[VMNAP_ECOUNT] = "count does not match length",
		[VMNAP_EALIGN] = "range not page aligned",
		[VMNAP_EZERO] = "zero-length range",
		[VMNAP_EOVERFLOW] = "range overflows",
		[VMNAP_ERANGE] = "range outside guest RAM",
		[VMNAP_EFIELD] = "field value not allowed",
		[VMNAP_ESTATE] = "unexpected in this state",
		[VMNAP_ERATE] = "rate limit exceeded",
		[VMNAP_EINTERNAL] = "internal error",
	};

	if (code > VMNAP_ERR_MAX)
		return "unknown error";
	return names[code];
}

/* Fill @h for a message of @type with @len payload bytes. */
static inline void vmnap_hdr_init(struct vmnap_hdr *h, unsigned int type,
				  __u32 len, __u32 seq)
{
	h->magic = vmnap_cpu32(VMNAP_MAGIC);
	h->version = vmnap_cpu16(VMNAP_PROTO_VERSION);
	h->type = vmnap_cpu16((__u16)type);
	h->len = vmnap_cpu32(len);
	h->seq = vmnap_cpu32(seq);
}

/*
 * Check a received header.  @rx_dir is the direction the receiver accepts
 * (VMNAP_DIR_G2H on the host).  A bad magic or version, or an oversize
 * length, means the stream can no longer be framed: drop the connection.
 * VMNAP_ETYPE leaves framing intact: the payload can be skipped.
 */
static inline int vmnap_hdr_check(const struct vmnap_hdr *h,
				  unsigned int rx_dir)
{
	__u16 version = vmnap_le16(h->version);

	if (vmnap_le32(h->magic) != VMNAP_MAGIC)
		return -VMNAP_EMAGIC;
	if (version < VMNAP_PROTO_MIN || version > VMNAP_PROTO_MAX)
		return -VMNAP_EVERSION;
	if (vmnap_le32(h->len) > VMNAP_MAX_PAYLOAD)
		return -VMNAP_ETOOBIG;
	if (!(vmnap_type_dirs(vmnap_le16(h->type)) & rx_dir))
		return -VMNAP_ETYPE;
	return 0;
}

/* True when an error code from the checks means "drop the stream". */
static inline int vmnap_err_is_fatal(int err)
{
	return err == -VMNAP_EMAGIC || err == -VMNAP_EVERSION ||
	       err == -VMNAP_ETOOBIG || err == -VMNAP_ETRUNC;
}

/*
 * Guest RAM as the receiver knows it, for range checks.  The host fills
 * it from its own memory map (never from the guest's HELLO); a NULL
 * pointer or nr == 0 skips the containment check.
 */
struct vmnap_ram {
	const struct vmnap_range *ranges;	/* wire format, little-endian */
	unsigned int nr;
	__u32 page_size;
};

/* Check one range: aligned, non-empty, not wrapping, inside guest RAM. */
static inline int vmnap_range_check(const struct vmnap_range *r,
				    const struct vmnap_ram *ram,
				    __u32 page_size)
{
	__u64 gpa = vmnap_le64(r->gpa), len = vmnap_le64(r->len);
	unsigned int i;

	if (!len)
		return -VMNAP_EZERO;
	if ((gpa | len) & ((__u64)page_size - 1))
		return -VMNAP_EALIGN;
	if (gpa + len < gpa)
		return -VMNAP_EOVERFLOW;
	if (!ram || !ram->ranges || !ram->nr)
		return 0;
	for (i = 0; i < ram->nr; i++) {
		__u64 rg = vmnap_le64(ram->ranges[i].gpa);
		__u64 rl = vmnap_le64(ram->ranges[i].len);

		if (gpa >= rg && gpa + len <= rg + rl && rg + rl >= rg)
			return 0;
	}
	return -VMNAP_ERANGE;
}

/* A power of two in [VMNAP_MIN_PAGE_SIZE, VMNAP_MAX_PAGE_SIZE]. */
static inline int vmnap_page_size_ok(__u32 ps)
{
	return ps >= VMNAP_MIN_PAGE_SIZE && ps <= VMNAP_MAX_PAGE_SIZE &&
	       !(ps & (ps - 1));
}

/* The string field @s of @n bytes holds a NUL. */
static inline int vmnap_str_ok(const char *s, size_t n)
{
	return memchr(s, 0, n) != NULL;
}

/*
 * Check a whole received message whose header passed vmnap_hdr_check().
 * @payload holds exactly @len == hdr.len bytes.  @ram bounds GPA ranges
 * (FREE_REPORT) and gives the page size; for HELLO, which declares the
 * page size, ranges are checked against the declared size and, when @ram
 * is given, against it too.  Returns 0 or -VMNAP_E*.
 */
static inline int vmnap_msg_check(const struct vmnap_hdr *h,
				  const void *payload, __u32 len,
				  const struct vmnap_ram *ram)
{
	__u16 type = vmnap_le16(h->type);
	__u32 i, n, ps;
	int err;

	if (vmnap_le32(h->len) != len)
		return -VMNAP_ETRUNC;

	switch (type) {
	case VMNAP_HELLO: {
		const struct vmnap_hello *m = (const struct vmnap_hello *)payload;

		if (len < sizeof(*m))
			return -VMNAP_ELEN;
		n = vmnap_le32(m->nr_ranges);
		if (n == 0 || n > VMNAP_MAX_RAM_RANGES)
			return -VMNAP_ECOUNT;
		if (len != sizeof(*m) + (__u64)n * sizeof(m->ranges[0]))
			return -VMNAP_ECOUNT;
		ps = vmnap_le32(m->page_size);
		if (!vmnap_page_size_ok(ps) ||
		    vmnap_le16(m->min_version) > vmnap_le16(m->max_version) ||
		    vmnap_le16(m->min_version) == 0 ||
		    !vmnap_le32(m->nr_cpus) ||
		    (vmnap_le32(m->features) & ~VMNAP_F_ALL) ||
		    m->reserved ||
		    !vmnap_str_ok(m->module_version, VMNAP_VERSION_LEN))
			return -VMNAP_EFIELD;
		for (i = 0; i < n; i++) {
			err = vmnap_range_check(&m->ranges[i], ram, ps);
			if (err)
				return err;
		}
		return 0;
	}
	case VMNAP_HELLO_ACK: {
		const struct vmnap_hello_ack *m = (const struct vmnap_hello_ack *)payload;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		if (vmnap_le16(m->version) < VMNAP_PROTO_MIN ||
		    vmnap_le16(m->version) > VMNAP_PROTO_MAX ||
		    (vmnap_le32(m->features) & ~VMNAP_F_ALL) || m->reserved)
			return -VMNAP_EFIELD;
		return 0;
	}
	case VMNAP_HANDOFF_REQ: {
		const struct vmnap_handoff_req *m = (const struct vmnap_handoff_req *)payload;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		if ((vmnap_le32(m->flags) & ~VMNAP_HF_ALL) ||
		    !vmnap_le32(m->ack_deadline_ms))
			return -VMNAP_EFIELD;
		return 0;
	}
	case VMNAP_HANDOFF_ACK: {
		const struct vmnap_handoff_ack *m = (const struct vmnap_handoff_ack *)payload;
		__u32 verdict, busy;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		verdict = vmnap_le32(m->verdict);
		busy = vmnap_le32(m->ev.busy_reasons);
		if ((verdict != VMNAP_READY && verdict != VMNAP_BUSY) ||
		    m->reserved ||
		    (busy & ~VMNAP_BUSY_ALL) ||
		    (verdict == VMNAP_READY && busy) ||
		    (verdict == VMNAP_BUSY && !busy) ||
		    vmnap_le32(m->ev.cpu_idle_permille) > 1000 ||
		    (vmnap_le32(m->ev.flags) & ~VMNAP_EV_ALL))
			return -VMNAP_EFIELD;
		return 0;
	}
	case VMNAP_HANDOFF_ABORT:
		return len == sizeof(struct vmnap_handoff_abort) ? 0 : -VMNAP_ELEN;
	case VMNAP_RESUMED: {
		const struct vmnap_resumed *m = (const struct vmnap_resumed *)payload;
		__u32 reason;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		reason = vmnap_le32(m->reason);
		if (reason == 0 || reason > VMNAP_RESUME_REASON_MAX ||
		    (vmnap_le32(m->flags) & ~VMNAP_RF_ALL))
			return -VMNAP_EFIELD;
		return 0;
	}
	case VMNAP_RESUME_ACK:
		return len == sizeof(struct vmnap_resume_ack) ? 0 : -VMNAP_ELEN;
	case VMNAP_FREE_REPORT: {
		const struct vmnap_free_report *m = (const struct vmnap_free_report *)payload;

		if (len < sizeof(*m))
			return -VMNAP_ELEN;
		if (m->reserved)
			return -VMNAP_EFIELD;
		n = vmnap_le32(m->nr_ranges);
		if (n == 0 || n > VMNAP_MAX_FREE_RANGES)
			return -VMNAP_ECOUNT;
		if (len != sizeof(*m) + (__u64)n * sizeof(m->ranges[0]))
			return -VMNAP_ECOUNT;
		ps = ram && ram->page_size ? ram->page_size : VMNAP_MIN_PAGE_SIZE;
		for (i = 0; i < n; i++) {
			err = vmnap_range_check(&m->ranges[i], ram, ps);
			if (err)
				return err;
		}
		return 0;
	}
	case VMNAP_FREE_REPORT_ACK: {
		const struct vmnap_free_report_ack *m = (const struct vmnap_free_report_ack *)payload;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		if (vmnap_le32(m->status) > VMNAP_FREE_IGNORED || m->reserved)
			return -VMNAP_EFIELD;
		return 0;
	}
	case VMNAP_PING:
	case VMNAP_PONG:
		return len == sizeof(struct vmnap_ping) ? 0 : -VMNAP_ELEN;
	case VMNAP_ERROR: {
		const struct vmnap_error *m = (const struct vmnap_error *)payload;

		if (len != sizeof(*m))
			return -VMNAP_ELEN;
		if (vmnap_le32(m->code) == 0 || vmnap_le32(m->code) > VMNAP_ERR_MAX ||
		    !vmnap_str_ok(m->text, VMNAP_ERROR_TEXT_LEN))
			return -VMNAP_EFIELD;
		return 0;
	}
	default:
		return -VMNAP_ETYPE;
	}
}

/*
 * Decode one message from the front of a byte stream.
 * Returns the number of bytes the message occupies (> 0) when @buf holds a
 * whole valid message, 0 when more bytes are needed, or -VMNAP_E* when the
 * message is bad.  On a non-fatal error (see vmnap_err_is_fatal()) *@skip
 * is set to the bytes to drop to stay framed.  On success *@hdr and
 * *@payload point into @buf.
 *
 * The structs are read in place, so @buf must be 8-byte aligned (reading
 * a __le64 member at an unaligned address is undefined behaviour in C and
 * faults on strict-alignment machines).  Every valid message is a multiple
 * of 8 bytes long, so a valid stream stays aligned in a receive buffer;
 * after skipping a bad message of another length, move the rest of the
 * stream to an aligned start before decoding on.
 */
static inline long vmnap_decode(const void *buf, size_t avail,
				unsigned int rx_dir,
				const struct vmnap_ram *ram,
				const struct vmnap_hdr **hdr,
				const void **payload, size_t *skip)
{
	const struct vmnap_hdr *h = (const struct vmnap_hdr *)buf;
	__u32 len;
	int err;

	*skip = 0;
	if (avail < sizeof(*h))
		return 0;
	err = vmnap_hdr_check(h, rx_dir);
	if (err && err != -VMNAP_ETYPE)
		return err;
	len = vmnap_le32(h->len);
	if (avail < sizeof(*h) + len)
		return 0;
	if (!err)
		err = vmnap_msg_check(h, (const char *)buf + sizeof(*h), len, ram);
	if (err) {
		*skip = sizeof(*h) + len;
		return err;
	}
	*hdr = h;
	*payload = (const char *)buf + sizeof(*h);
	return (long)(sizeof(*h) + len);
}

#endif /* _UAPI_VMNAP_H */
