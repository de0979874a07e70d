// SPDX-License-Identifier: GPL-2.0-only
/*
 * link_fake_guest.c - plays vmnap.ko's side of the guest link over a unix
 * stream socket, as a Firecracker / Cloud Hypervisor VMM forwards it to
 * vmnapd's hybrid socket "<uds>_5151" (a test peer: no VM, no VMM).
 *
 *   link_fake_guest [--hold] [--expect-id N] PATH   HELLO, expect HELLO_ACK;
 *                                                   print "up vm_id=N ...";
 *                                                   --hold: then answer PING
 *                                                   and HANDOFF_REQ (BUSY)
 *                                                   until stdin reaches EOF
 *   link_fake_guest --junk PATH                     send bytes that are no
 *                                                   vmnap message; expect
 *                                                   ERROR, then end of stream
 *
 * Exit status: 0 as expected, 1 otherwise (reason on stderr), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "uapi/vmnap.h"

#define FAKE_GUEST_RAM		(1ULL << 30)
#define FAKE_GUEST_VERSION	"fake-guest"
/* A host that does not answer fails the run instead of hanging it. */
#define REPLY_TIMEOUT_S		10
#define JUNK			"GET / HTTP/1.1\r\nHost: vmnapd\r\n\r\n"

struct fake_guest {
	int fd;
	uint32_t seq;
	_Alignas(8) unsigned char msg[VMNAP_MAX_MSG];
	struct vmnap_hdr hdr;		/* of the last message read */
};

static int fail(const char *what)
{
	fprintf(stderr, "link_fake_guest: %s\n", what);
	return 1;
}

static int send_msg(struct fake_guest *g, unsigned int type, const void *payload,
		    uint32_t len)
{
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_hdr) + 256];
	struct vmnap_hdr h;

	if (len > sizeof(buf) - sizeof(h))
		return -EMSGSIZE;
	vmnap_hdr_init(&h, type, len, ++g->seq);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), payload, len);
	if (write(g->fd, buf, sizeof(h) + len) != (ssize_t)(sizeof(h) + len))
		return -errno;
	return 0;
}

/* 1: @len bytes read, 0: end of stream first, -errno. */
static int read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n == 0)
			return 0;
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

/* One host message into g->msg; its type, 0 at end of stream, -errno. */
static int read_msg(struct fake_guest *g)
{
	uint32_t len;
	int r = read_full(g->fd, &g->hdr, sizeof(g->hdr));

	if (r <= 0)
		return r;
	if (vmnap_le32(g->hdr.magic) != VMNAP_MAGIC)
		return -EPROTO;
	len = vmnap_le32(g->hdr.len);
	if (len > sizeof(g->msg))
		return -EMSGSIZE;
	r = read_full(g->fd, g->msg, len);
	if (r <= 0)
		return r ? r : -EPROTO;
	return vmnap_le16(g->hdr.type);
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int send_hello(struct fake_guest *g)
{
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_hello) +
				      sizeof(struct vmnap_range)];
	struct vmnap_hello *m = (struct vmnap_hello *)buf;

	memset(buf, 0, sizeof(buf));
	m->min_version = vmnap_cpu16(VMNAP_PROTO_MIN);
	m->max_version = vmnap_cpu16(VMNAP_PROTO_MAX);
	m->features = vmnap_cpu32(VMNAP_F_ALL);
	m->nr_cpus = vmnap_cpu32(1);
	m->page_size = vmnap_cpu32(VMNAP_MIN_PAGE_SIZE);
	m->nr_ranges = vmnap_cpu32(1);
	snprintf(m->module_version, sizeof(m->module_version), "%s", FAKE_GUEST_VERSION);
	m->ranges[0].gpa = vmnap_cpu64(0);
	m->ranges[0].len = vmnap_cpu64(FAKE_GUEST_RAM);
	return send_msg(g, VMNAP_HELLO, buf, sizeof(buf));
}

/* Answer the host until stdin reaches EOF (the test is done with us). */
static int serve(struct fake_guest *g)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = g->fd, .events = POLLIN },
		};
		char c;
		int type;

		if (poll(p, 2, -1) < 0)
			return errno == EINTR ? 0 : fail("poll");
		if (p[0].revents && read(STDIN_FILENO, &c, 1) <= 0)
			return 0;
		if (!p[1].revents)
			continue;
		type = read_msg(g);
		if (type == 0)
			return fail("the host closed the link");
		if (type < 0)
			return fail(strerror(-type));
		if (type == VMNAP_PING) {
			send_msg(g, VMNAP_PONG, g->msg, sizeof(struct vmnap_ping));
		} else if (type == VMNAP_HANDOFF_REQ) {
			const struct vmnap_handoff_req *req = (const void *)g->msg;
			struct vmnap_handoff_ack ack;

			memset(&ack, 0, sizeof(ack));
			ack.req_id = req->req_id;
			ack.verdict = vmnap_cpu32(VMNAP_BUSY);
			ack.ev.next_timer_ns = vmnap_cpu64(VMNAP_TIMER_UNKNOWN);
			ack.ev.busy_reasons = vmnap_cpu32(VMNAP_BUSY_DISABLED);
			send_msg(g, VMNAP_HANDOFF_ACK, &ack, sizeof(ack));
		}
	}
}

static int run_hello(struct fake_guest *g, bool hold, bool check_id, uint64_t want_id)
{
	const struct vmnap_hello_ack *ack = (const void *)g->msg;
	int type;

	if (send_hello(g) < 0)
		return fail("send HELLO");
	type = read_msg(g);
	if (type != VMNAP_HELLO_ACK) {
		fprintf(stderr, "link_fake_guest: want HELLO_ACK, got %s\n",
			type > 0 ? vmnap_type_name((unsigned int)type) :
			type == 0 ? "end of stream" : strerror(-type));
		return 1;
	}
	printf("up vm_id=%llu version=%u features=0x%x\n",
	       (unsigned long long)vmnap_le64(ack->vm_id), vmnap_le16(ack->version),
	       vmnap_le32(ack->features));
	fflush(stdout);
	if (check_id && vmnap_le64(ack->vm_id) != want_id) {
		fprintf(stderr, "link_fake_guest: vm_id %llu, want %llu\n",
			(unsigned long long)vmnap_le64(ack->vm_id),
			(unsigned long long)want_id);
		return 1;
	}
	return hold ? serve(g) : 0;
}

static int run_junk(struct fake_guest *g)
{
	const struct vmnap_error *e = (const void *)g->msg;
	int type;

	if (write(g->fd, JUNK, sizeof(JUNK) - 1) != (ssize_t)(sizeof(JUNK) - 1))
		return fail("send junk");
	type = read_msg(g);
	if (type != VMNAP_ERROR)
		return fail("want ERROR for junk");
	printf("error code=%u (%s)\n", vmnap_le32(e->code),
	       vmnap_err_name(vmnap_le32(e->code)));
	if (read_msg(g) != 0)
		return fail("want end of stream after ERROR");
	printf("closed\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "hold", no_argument, NULL, 'H' },
		{ "junk", no_argument, NULL, 'j' },
		{ "expect-id", required_argument, NULL, 'i' },
		{ 0 }
	};
	struct fake_guest *g;
	bool hold = false, junk = false, check_id = false;
	uint64_t want_id = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'H': hold = true; break;
		case 'j': junk = true; break;
		case 'i':
			check_id = true;
			want_id = strtoull(optarg, NULL, 10);
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: link_fake_guest [--hold] [--expect-id N] | "
			"[--junk] PATH\n");
		return 2;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return fail("out of memory");
	g->fd = connect_unix(argv[optind]);
	if (g->fd < 0) {
		fprintf(stderr, "link_fake_guest: connect %s: %s\n", argv[optind],
			strerror(-g->fd));
		free(g);
		return 1;
	}
	ret = junk ? run_junk(g) : run_hello(g, hold, check_id, want_id);
	close(g->fd);
	free(g);
	return ret;
}
