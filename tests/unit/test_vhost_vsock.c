// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_vhost_vsock - the vhost-user-vsock device driven by a fake front-end
 * (this test plays QEMU and the guest driver): a real unix socket, a real
 * memfd as guest RAM, real eventfds, vmnapd's own event loop.
 *
 * Covers what QEMU and a well-behaved guest never do: malformed vhost-user
 * messages, descriptors outside guest RAM, a guest exceeding its credit;
 * and the rules that are hard to observe from outside: no guest RAM is
 * written while the device is paused, every guest buffer is made
 * resident through the pager before it is written, and the pager is told
 * the next RX buffers whenever they change while the VM runs
 * (pager_make_resident_async and pager_set_device_pages are wrapped at link
 * time, -Wl,--wrap, see scripts/vsock-tests.mk).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/virtio_vsock.h>

#include "guest_link_listen.h"
#include "log.h"
#include "loop.h"
#include "pager.h"
#include "vhost_user.h"
#include "vhost_vsock.h"
#include "vmnapd.h"

#define RAM_SIZE	(4U << 20)
#define QSZ		16U
#define RXQ		0U
#define TXQ		1U
#define RING_OFF(q)	((q) * 0x4000U)		/* desc; avail +0x1000; used +0x2000 */
#define RX_BUF_OFF	0x10000U		/* RX buffers, RX_BUF_SIZE each */
#define RX_BUF_SIZE	(sizeof(struct virtio_vsock_hdr) + 4096U)
#define TX_BUF_OFF	0x40000U		/* TX packets, TX_SLOT each */
#define TX_SLOT		0x10000U
#define GUEST_CID	3U
#define GUEST_PORT	50000U
#define HOST_PORT	7000U
#define PATTERN		0xaa
#define PUMP_MS		20

/* ---- pager_make_resident_async, wrapped ---- */

struct resident_call {
	uint64_t gpa, len;
	bool pristine;		/* RX buffer memory untouched at call time */
};

static struct {
	struct resident_call calls[4096];
	unsigned int n;
	int fail;		/* returned instead of 0 when set */
	uint64_t again_from;	/* non-zero: -EAGAIN for ranges from here on */
	uint8_t *ram;
} wrap;

int __wrap_pager_make_resident_async(struct pager *p, uint64_t gpa, uint64_t len);
int __wrap_pager_make_resident_async(struct pager *p, uint64_t gpa, uint64_t len)
{
	(void)p;
	if (wrap.n < sizeof(wrap.calls) / sizeof(wrap.calls[0])) {
		struct resident_call *c = &wrap.calls[wrap.n++];

		c->gpa = gpa;
		c->len = len;
		c->pristine = gpa < RAM_SIZE && wrap.ram[gpa] == PATTERN;
	}
	if (wrap.again_from && gpa >= wrap.again_from)
		return -EAGAIN;
	return wrap.fail;
}

/* ---- pager_set_device_pages, wrapped ---- */

static struct {
	unsigned int calls;
	uint64_t gpa[64], len[64];	/* the last call's ranges */
	unsigned int n;
} dev;

void __wrap_pager_set_device_pages(struct pager *p, const uint64_t *gpa, const uint64_t *len,
				   unsigned int nr);
void __wrap_pager_set_device_pages(struct pager *p, const uint64_t *gpa, const uint64_t *len,
				   unsigned int nr)
{
	(void)p;
	dev.calls++;
	dev.n = nr < 64 ? nr : 64;
	memcpy(dev.gpa, gpa, dev.n * sizeof(*gpa));
	memcpy(dev.len, len, dev.n * sizeof(*len));
}

/* Did the last pager_set_device_pages name RX buffer @b whole? */
static bool dev_named_rx_buf(unsigned int b)
{
	for (unsigned int i = 0; i < dev.n; i++)
		if (dev.gpa[i] == RX_BUF_OFF + b * RX_BUF_SIZE && dev.len[i] == RX_BUF_SIZE)
			return true;
	return false;
}

/* ---- the fake front-end and guest ---- */

struct fe {
	struct vmnapd d;
	struct vm *vm;
	char dir[32], vu_path[64], uds_path[64];
	int sock;
	int memfd;
	uint8_t *ram;
	int kick[2], call[2];
	uint16_t avail_idx[2], used_seen[2];
	unsigned int next_rx_buf;
	struct loop_timer stop;
};

static void on_stop(struct loop *l, struct loop_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	loop_stop(l);
}

static void pump(struct fe *f)
{
	loop_timer_arm(f->d.loop, &f->stop, (uint64_t)PUMP_MS * 1000000ULL);
	loop_run(f->d.loop);
}

static void send_msg(struct fe *f, uint32_t req, uint32_t flags, const void *payload,
		     uint32_t size, const int *fds, unsigned int nfds)
{
	struct vhost_user_hdr h = { .request = req, .flags = VHOST_USER_VERSION | flags,
				    .size = size };
	uint8_t buf[sizeof(h) + 512];
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(h) + size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	assert_true(size <= 512);
	memcpy(buf, &h, sizeof(h));
	if (size)
		memcpy(buf + sizeof(h), payload, size);
	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	assert_int_equal(sendmsg(f->sock, &mh, 0), (ssize_t)iov.iov_len);
	pump(f);
}

/* Read a reply: its payload size, or -1 when none is waiting. */
static int recv_reply(struct fe *f, uint32_t req, void *payload, size_t max)
{
	struct vhost_user_hdr h;
	ssize_t n = recv(f->sock, &h, sizeof(h), MSG_DONTWAIT);

	if (n < 0)
		return -1;
	assert_int_equal(n, sizeof(h));
	assert_int_equal(h.request, req);
	assert_true(h.flags & VHOST_USER_REPLY_MASK);
	assert_true(h.size <= max);
	if (h.size)
		assert_int_equal(recv(f->sock, payload, h.size, 0), (ssize_t)h.size);
	return (int)h.size;
}

static void send_u64(struct fe *f, uint32_t req, uint64_t v, const int *fds, unsigned int nfds)
{
	send_msg(f, req, 0, &v, sizeof(v), fds, nfds);
}

static void send_state(struct fe *f, uint32_t req, uint32_t index, uint32_t num)
{
	struct vhost_user_vring_state s = { index, num };

	send_msg(f, req, 0, &s, sizeof(s), NULL, 0);
}

static uint64_t uva(struct fe *f, uint64_t off)
{
	return (uint64_t)(uintptr_t)f->ram + off;
}

static void setup_queue(struct fe *f, unsigned int q)
{
	struct vhost_user_vring_addr a = {
		.index = q,
		.desc_user_addr = uva(f, RING_OFF(q)),
		.avail_user_addr = uva(f, RING_OFF(q) + 0x1000),
		.used_user_addr = uva(f, RING_OFF(q) + 0x2000),
	};

	send_state(f, VHOST_USER_SET_VRING_NUM, q, QSZ);
	send_msg(f, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
	send_state(f, VHOST_USER_SET_VRING_BASE, q, 0);
	send_u64(f, VHOST_USER_SET_VRING_CALL, q, &f->call[q], 1);
	send_u64(f, VHOST_USER_SET_VRING_KICK, q, &f->kick[q], 1);
	send_state(f, VHOST_USER_SET_VRING_ENABLE, q, 1);
}

static void connect_front_end(struct fe *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vhost_user_mem_table mt = { .nregions = 1 };
	uint64_t feat;

	f->sock = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->vu_path);
	assert_int_equal(connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	pump(f);
	send_msg(f, VHOST_USER_GET_FEATURES, 0, NULL, 0, NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_GET_FEATURES, &feat, sizeof(feat)), 8);
	assert_true(feat & (1ULL << VHOST_USER_F_PROTOCOL_FEATURES));
	send_u64(f, VHOST_USER_SET_FEATURES, feat, NULL, 0);
	send_u64(f, VHOST_USER_SET_PROTOCOL_FEATURES,
		 (1ULL << VHOST_USER_PROTOCOL_F_REPLY_ACK) | (1ULL << VHOST_USER_PROTOCOL_F_CONFIG),
		 NULL, 0);
	send_msg(f, VHOST_USER_SET_OWNER, 0, NULL, 0, NULL, 0);
	mt.regions[0] = (struct vhost_user_mem_region){
		.guest_phys_addr = 0, .memory_size = RAM_SIZE, .userspace_addr = uva(f, 0),
	};
	send_msg(f, VHOST_USER_SET_MEM_TABLE, 0, &mt, 8 + sizeof(mt.regions[0]), &f->memfd, 1);
	memset(f->avail_idx, 0, sizeof(f->avail_idx));
	memset(f->used_seen, 0, sizeof(f->used_seen));
	setup_queue(f, RXQ);
	setup_queue(f, TXQ);
}

static int setup(void **state)
{
	struct fe *f = calloc(1, sizeof(*f));
	struct vhost_vsock_config cfg = { .guest_cid = GUEST_CID };

	snprintf(f->dir, sizeof(f->dir), "/tmp/vsock-unit.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->vu_path, sizeof(f->vu_path), "%s/vu.sock", f->dir);
	snprintf(f->uds_path, sizeof(f->uds_path), "%s/v.sock", f->dir);
	f->d.loop = loop_new();
	loop_timer_init(&f->stop, on_stop, NULL);
	f->vm = vm_new(&f->d, "unit");
	assert_non_null(f->vm);
	cfg.vhost_user_path = f->vu_path;
	cfg.uds_path = f->uds_path;
	assert_int_equal(vm_vsock_attach(f->vm, &cfg), 0);
	f->memfd = memfd_create("guest-ram", MFD_CLOEXEC);
	assert_int_equal(ftruncate(f->memfd, RAM_SIZE), 0);
	f->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
	assert_true(f->ram != MAP_FAILED);
	memset(f->ram + RX_BUF_OFF, PATTERN, TX_BUF_OFF - RX_BUF_OFF);
	wrap.ram = f->ram;
	memset(&dev, 0, sizeof(dev));
	wrap.n = 0;
	wrap.fail = 0;
	wrap.again_from = 0;
	for (int q = 0; q < 2; q++) {
		f->kick[q] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		f->call[q] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
	connect_front_end(f);
	*state = f;
	return 0;
}

/*
 * The device as vmnap-vsockd makes it: the owner maps guest RAM (map_fd)
 * and is told when the front-end goes.  The owner's mapping is the test's
 * own view of the memfd, so the device demonstrably works through it.
 */
static struct {
	unsigned int map_calls, disconnects;
	uint64_t len;
	unsigned int nregions;
	int fail;		/* errno to refuse with, 0: map */
	void *map;
} owner;

static void *owner_map_fd(void *opaque, int fd, uint64_t len,
			  const struct vhost_user_mem_region *t, unsigned int n)
{
	struct stat st;

	(void)opaque;
	owner.map_calls++;
	owner.len = len;
	owner.nregions = n;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true((uint64_t)st.st_size >= len);
	assert_int_equal(t[0].memory_size, RAM_SIZE);
	if (owner.fail) {
		errno = owner.fail;
		return NULL;
	}
	return owner.map;
}

static void owner_disconnected(void *opaque)
{
	(void)opaque;
	owner.disconnects++;
}

static int setup_owner_map(void **state)
{
	static const struct vhost_vsock_ops ops = {
		.map_fd = owner_map_fd, .disconnected = owner_disconnected,
	};
	struct fe *f;
	struct vhost_vsock_config cfg = { .guest_cid = GUEST_CID };

	setup(state);
	f = *state;
	close(f->sock);
	vm_vsock_detach(f->vm);
	memset(&owner, 0, sizeof(owner));
	owner.map = f->ram;
	cfg.vhost_user_path = f->vu_path;
	cfg.uds_path = f->uds_path;
	assert_int_equal(vhost_vsock_new(f->d.loop, "unit", &cfg, &ops, NULL, &f->vm->vsock), 0);
	connect_front_end(f);
	return 0;
}

static int teardown(void **state)
{
	struct fe *f = *state;
	char cmd[128];

	f->vm->pager = NULL;	/* the wrapped pager is not real */
	close(f->sock);
	vm_free(f->vm);
	loop_free(f->d.loop);
	munmap(f->ram, RAM_SIZE);
	close(f->memfd);
	for (int q = 0; q < 2; q++) {
		close(f->kick[q]);
		close(f->call[q]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* ---- guest driver side ---- */

static struct vring_desc *desc(struct fe *f, unsigned int q, unsigned int i)
{
	return (struct vring_desc *)(f->ram + RING_OFF(q)) + i;
}

static struct vring_avail *avail(struct fe *f, unsigned int q)
{
	return (struct vring_avail *)(f->ram + RING_OFF(q) + 0x1000);
}

static struct vring_used *used(struct fe *f, unsigned int q)
{
	return (struct vring_used *)(f->ram + RING_OFF(q) + 0x2000);
}

static void kick(struct fe *f, unsigned int q)
{
	uint64_t one = 1;

	assert_int_equal(write(f->kick[q], &one, sizeof(one)), sizeof(one));
	pump(f);
}

static void offer(struct fe *f, unsigned int q, uint16_t head)
{
	avail(f, q)->ring[f->avail_idx[q] % QSZ] = head;
	f->avail_idx[q]++;
	__atomic_store_n(&avail(f, q)->idx, f->avail_idx[q], __ATOMIC_RELEASE);
}

/* Post @n RX buffers (one writable descriptor each). */
static void rx_post(struct fe *f, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		unsigned int b = f->next_rx_buf++ % QSZ;

		*desc(f, RXQ, b) = (struct vring_desc){
			.addr = RX_BUF_OFF + b * RX_BUF_SIZE, .len = RX_BUF_SIZE,
			.flags = VRING_DESC_F_WRITE,
		};
		offer(f, RXQ, (uint16_t)b);
	}
	kick(f, RXQ);
}

static void fill_hdr(struct virtio_vsock_hdr *h, uint16_t op, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = GUEST_CID;
	h->dst_cid = VSOCK_HOST_CID;
	h->src_port = GUEST_PORT;
	h->dst_port = HOST_PORT;
	h->type = VIRTIO_VSOCK_TYPE_STREAM;
	h->op = op;
	h->len = len;
	h->buf_alloc = 256 * 1024;
}

/* Guest sends one packet from @src to host port @dst. */
static void tx_send_ports(struct fe *f, uint16_t op, const void *data, uint32_t len,
			  uint64_t gpa_override, uint32_t flags, uint32_t src, uint32_t dst)
{
	static unsigned int slot;
	unsigned int d = slot++ % QSZ;
	uint64_t off = TX_BUF_OFF + (uint64_t)d * TX_SLOT;
	struct virtio_vsock_hdr h;

	fill_hdr(&h, op, len);
	h.flags = flags;
	h.src_port = src;
	h.dst_port = dst;
	memcpy(f->ram + off, &h, sizeof(h));
	if (len && data)
		memcpy(f->ram + off + sizeof(h), data, len);
	*desc(f, TXQ, d) = (struct vring_desc){
		.addr = gpa_override ? gpa_override : off, .len = (uint32_t)sizeof(h) + len,
	};
	offer(f, TXQ, (uint16_t)d);
	kick(f, TXQ);
}

/* Guest sends one packet; @gpa_override != 0 points the descriptor there. */
static void tx_send(struct fe *f, uint16_t op, const void *data, uint32_t len,
		    uint64_t gpa_override, uint32_t flags)
{
	tx_send_ports(f, op, data, len, gpa_override, flags, GUEST_PORT, HOST_PORT);
}

/* Next packet the device put in RX: false when none. */
static bool rx_get(struct fe *f, struct virtio_vsock_hdr *h, uint8_t *data)
{
	struct vring_used *u = used(f, RXQ);
	struct vring_used_elem e;

	if (__atomic_load_n(&u->idx, __ATOMIC_ACQUIRE) == f->used_seen[RXQ])
		return false;
	e = u->ring[f->used_seen[RXQ]++ % QSZ];
	memcpy(h, f->ram + desc(f, RXQ, e.id)->addr, sizeof(*h));
	assert_int_equal(e.len, sizeof(*h) + h->len);
	if (data)
		memcpy(data, f->ram + desc(f, RXQ, e.id)->addr + sizeof(*h), h->len);
	return true;
}

static int host_listen(struct fe *f, uint32_t port)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", f->uds_path, port);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* Guest connects to HOST_PORT (listener @lfd): the accepted host fd. */
static int guest_connect(struct fe *f, int lfd)
{
	struct virtio_vsock_hdr h;
	int cfd;

	rx_post(f, 8);
	tx_send(f, VIRTIO_VSOCK_OP_REQUEST, NULL, 0, 0, 0);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(h.dst_port, GUEST_PORT);
	assert_int_equal(h.src_port, HOST_PORT);
	assert_int_equal(h.dst_cid, GUEST_CID);
	cfd = accept(lfd, NULL, NULL);
	assert_true(cfd >= 0);
	return cfd;
}

/* ---- tests ---- */

static void test_config_space_is_guest_cid(void **state)
{
	struct fe *f = *state;
	struct vhost_user_config_msg c = { .offset = 0, .size = 8 };
	uint64_t cid = 0;

	send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, VHOST_USER_CONFIG_HDR_SIZE + 8, NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_GET_CONFIG, &c, sizeof(c)),
			 VHOST_USER_CONFIG_HDR_SIZE + 8);
	memcpy(&cid, c.payload, sizeof(cid));
	assert_int_equal(cid, GUEST_CID);
	assert_true(vhost_vsock_front_end_connected(f->vm->vsock));
}

static void test_malformed_messages_are_refused(void **state)
{
	struct fe *f = *state;
	struct vhost_user_vring_state s = { .index = 9, .num = QSZ };
	struct vhost_user_mem_table mt = { .nregions = 1 };
	uint64_t ack = 0, feat;

	/* bad queue index, with REPLY_ACK: a failure ack */
	send_msg(f, VHOST_USER_SET_VRING_NUM, VHOST_USER_NEED_REPLY_MASK, &s, sizeof(s), NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_VRING_NUM, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	/* queue size not a power of two; wrong payload size */
	s.index = 0;
	s.num = 3;
	send_msg(f, VHOST_USER_SET_VRING_NUM, VHOST_USER_NEED_REPLY_MASK, &s, sizeof(s), NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_VRING_NUM, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	send_msg(f, VHOST_USER_SET_FEATURES, VHOST_USER_NEED_REPLY_MASK, &s, 3, NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_FEATURES, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	/* a memory table without its fd; a region bigger than its file */
	mt.regions[0] = (struct vhost_user_mem_region){ .memory_size = RAM_SIZE,
							.userspace_addr = uva(f, 0) };
	send_msg(f, VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &mt,
		 8 + sizeof(mt.regions[0]), NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_MEM_TABLE, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	mt.regions[0].memory_size = 2 * RAM_SIZE;
	send_msg(f, VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &mt,
		 8 + sizeof(mt.regions[0]), &f->memfd, 1);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_MEM_TABLE, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	/* a kick "eventfd" that is not one */
	send_msg(f, VHOST_USER_SET_VRING_KICK, VHOST_USER_NEED_REPLY_MASK, &(uint64_t){ 0 },
		 8, &f->memfd, 1);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_VRING_KICK, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	/* config beyond the 8 bytes of config space */
	{
		struct vhost_user_config_msg c = { .offset = 4, .size = 8 };

		send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, VHOST_USER_CONFIG_HDR_SIZE + 8, NULL, 0);
		assert_int_equal(recv_reply(f, VHOST_USER_GET_CONFIG, &c, sizeof(c)),
				 VHOST_USER_CONFIG_HDR_SIZE);
	}
	/* the connection survived all of that, and it was all counted */
	send_msg(f, VHOST_USER_GET_FEATURES, 0, NULL, 0, NULL, 0);
	assert_int_equal(recv_reply(f, VHOST_USER_GET_FEATURES, &feat, sizeof(feat)), 8);
	assert_true(vhost_vsock_front_end_connected(f->vm->vsock));
	{
		struct vhost_vsock_stats st;

		vhost_vsock_get_stats(f->vm->vsock, &st);
		assert_int_equal(st.frontend_errors, 7);
		assert_int_equal(st.frontend_connections, 1);
	}
}

static void test_oversize_message_drops_front_end(void **state)
{
	struct fe *f = *state;
	struct vhost_user_hdr h = { .request = VHOST_USER_SET_FEATURES,
				    .flags = VHOST_USER_VERSION, .size = 1U << 20 };

	assert_int_equal(send(f->sock, &h, sizeof(h), 0), sizeof(h));
	pump(f);
	assert_false(vhost_vsock_front_end_connected(f->vm->vsock));
	/* the next front-end is served */
	close(f->sock);
	connect_front_end(f);
	assert_true(vhost_vsock_front_end_connected(f->vm->vsock));
}

static void test_stream_both_ways(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t data[64];
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);

	tx_send(f, VIRTIO_VSOCK_OP_RW, "ping", 4, 0, 0);
	assert_int_equal(recv(cfd, data, sizeof(data), MSG_DONTWAIT), 4);
	assert_memory_equal(data, "ping", 4);
	assert_int_equal(send(cfd, "pong!", 5, 0), 5);
	pump(f);
	assert_true(rx_get(f, &h, data));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(h.len, 5);
	assert_memory_equal(data, "pong!", 5);
	/* host closes: the guest hears SHUTDOWN(SEND) */
	close(cfd);
	pump(f);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	assert_true(h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND);
	/* guest closes: RST completes it */
	tx_send(f, VIRTIO_VSOCK_OP_SHUTDOWN, NULL, 0, 0,
		VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	assert_int_equal(vhost_vsock_nr_conns(f->vm->vsock), 0);
	close(lfd);
}

/* Guest RAM through the owner's mapping: mapped once, never unmapped. */
static void test_owner_maps_guest_ram(void **state)
{
	struct fe *f = *state;
	struct vhost_user_mem_table mt = { .nregions = 1 };
	uint8_t data[16], vec;
	uint64_t ack;
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);

	assert_int_equal(owner.map_calls, 1);
	assert_int_equal(owner.len, RAM_SIZE);
	assert_int_equal(owner.nregions, 1);
	tx_send(f, VIRTIO_VSOCK_OP_RW, "ping", 4, 0, 0);
	assert_int_equal(recv(cfd, data, sizeof(data), MSG_DONTWAIT), 4);
	assert_memory_equal(data, "ping", 4);
	/* a refused mapping refuses the table; the old one stays in use */
	owner.fail = ENOMEM;
	mt.regions[0] = (struct vhost_user_mem_region){
		.guest_phys_addr = 0, .memory_size = RAM_SIZE, .userspace_addr = uva(f, 0),
	};
	send_msg(f, VHOST_USER_SET_MEM_TABLE, VHOST_USER_NEED_REPLY_MASK, &mt,
		 8 + sizeof(mt.regions[0]), &f->memfd, 1);
	assert_int_equal(recv_reply(f, VHOST_USER_SET_MEM_TABLE, &ack, sizeof(ack)), 8);
	assert_int_not_equal(ack, 0);
	assert_int_equal(owner.map_calls, 2);
	tx_send(f, VIRTIO_VSOCK_OP_RW, "pong", 4, 0, 0);
	assert_int_equal(recv(cfd, data, sizeof(data), MSG_DONTWAIT), 4);
	assert_memory_equal(data, "pong", 4);
	/* the front-end goes: the owner is told, its mapping is left alone */
	close(f->sock);
	f->sock = -1;
	pump(f);
	assert_int_equal(owner.disconnects, 1);
	assert_false(vhost_vsock_front_end_connected(f->vm->vsock));
	assert_int_equal(mincore(f->ram, 4096, &vec), 0);
	close(cfd);
	close(lfd);
}

static void test_refused_port_gets_rst(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;

	rx_post(f, 4);
	tx_send(f, VIRTIO_VSOCK_OP_REQUEST, NULL, 0, 0, 0);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.refused, 1);
	/* data for a connection that does not exist: RST, counted */
	tx_send(f, VIRTIO_VSOCK_OP_RW, "x", 1, 0, 0);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.unknown_conn, 1);
}

/*
 * The guest link port takes connections from reserved guest ports only
 * (what the guest kernel's module uses); any other port is a guest process
 * that could bind it unprivileged: RST, counted.  (No vm->link here: the
 * port is bridged to "<uds>_5151", which shows the REQUEST was accepted.)
 */
static void test_link_port_needs_reserved_source_port(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	int lfd = host_listen(f, VMNAP_DEFAULT_PORT), cfd;
	enum log_level lvl = log_get_level();

	log_set_level(LOG_ERR);		/* the refusals warn */
	rx_post(f, 8);
	tx_send_ports(f, VIRTIO_VSOCK_OP_REQUEST, NULL, 0, 0, 0,
		      GUEST_LINK_RESERVED_PORT_END, VMNAP_DEFAULT_PORT);
	tx_send_ports(f, VIRTIO_VSOCK_OP_REQUEST, NULL, 0, 0, 0, GUEST_PORT, VMNAP_DEFAULT_PORT);
	for (unsigned int i = 0; i < 2; i++) {
		assert_true(rx_get(f, &h, NULL));
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
		assert_int_equal(h.src_port, VMNAP_DEFAULT_PORT);
		assert_int_equal(h.dst_port, i ? GUEST_PORT : GUEST_LINK_RESERVED_PORT_END);
	}
	log_set_level(lvl);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.unreserved_port, 2);
	assert_int_equal(st.guest_connects, 0);
	assert_int_equal(vhost_vsock_nr_conns(f->vm->vsock), 0);
	assert_int_equal(fcntl(lfd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(accept(lfd, NULL, NULL), -1);	/* nothing reached the host */
	assert_int_equal(fcntl(lfd, F_SETFL, 0), 0);
	/* the highest reserved port is accepted */
	tx_send_ports(f, VIRTIO_VSOCK_OP_REQUEST, NULL, 0, 0, 0,
		      GUEST_LINK_RESERVED_PORT_END - 1, VMNAP_DEFAULT_PORT);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(h.dst_port, GUEST_LINK_RESERVED_PORT_END - 1);
	cfd = accept(lfd, NULL, NULL);
	assert_true(cfd >= 0);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.unreserved_port, 2);
	assert_int_equal(st.guest_connects, 1);
	/* other ports take any source port (test_stream_both_ways) */
	close(cfd);
	close(lfd);
}

static void test_paused_device_does_not_touch_guest_ram(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	uint8_t data[64];
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);
	uint16_t used_before = used(f, RXQ)->idx;
	uint8_t *snapshot = malloc(RAM_SIZE);

	vhost_vsock_set_paused(f->vm->vsock, true);
	memcpy(snapshot, f->ram, RAM_SIZE);
	assert_int_equal(send(cfd, "late", 4, 0), 4);
	rx_post(f, 4);		/* even with buffers offered and a kick */
	pump(f);
	/* rx_post wrote the avail ring itself: compare the rest */
	memcpy(snapshot + RING_OFF(RXQ), f->ram + RING_OFF(RXQ), 0x2000);
	assert_memory_equal(snapshot, f->ram, RAM_SIZE);
	assert_int_equal(used(f, RXQ)->idx, used_before);
	vhost_vsock_set_paused(f->vm->vsock, false);
	pump(f);
	assert_true(rx_get(f, &h, data));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(data, "late", 4);
	free(snapshot);
	close(cfd);
	close(lfd);
}

static void test_buffers_made_resident_before_write(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);
	uint8_t *snapshot = malloc(RAM_SIZE);
	uint16_t used_before;
	uint64_t buf_gpa;
	bool seen = false;

	f->vm->pager = (struct pager *)&wrap;	/* any non-NULL: calls are wrapped */
	wrap.n = 0;
	assert_int_equal(send(cfd, "data", 4, 0), 4);
	pump(f);
	/* the buffer the device filled */
	buf_gpa = desc(f, RXQ, used(f, RXQ)->ring[f->used_seen[RXQ] % QSZ].id)->addr;
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	for (unsigned int i = 0; i < wrap.n; i++)
		if (wrap.calls[i].gpa == buf_gpa && wrap.calls[i].len == RX_BUF_SIZE) {
			assert_true(wrap.calls[i].pristine);	/* before the write */
			seen = true;
		}
	assert_true(seen);
	/* the pager cannot bring pages back: the device must not write */
	wrap.fail = -EIO;
	used_before = used(f, RXQ)->idx;
	memcpy(snapshot, f->ram, RAM_SIZE);
	assert_int_equal(send(cfd, "more", 4, 0), 4);
	pump(f);
	assert_int_equal(used(f, RXQ)->idx, used_before);
	assert_memory_equal(snapshot, f->ram, RAM_SIZE);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_true(st.residency_errors > 0);
	free(snapshot);
	wrap.fail = 0;
	f->vm->pager = NULL;
	close(cfd);
	close(lfd);
}

/*
 * Buffers the pager is still bringing back (-EAGAIN): the device neither
 * writes nor consumes them, counts no error, does not spin, and carries on
 * from the same chains once told the memory is ready.
 */
static void test_not_yet_resident_buffers_wait(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	uint8_t data[64], got[64];
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);
	uint8_t *snapshot = malloc(RAM_SIZE);
	uint16_t rx_used, tx_used;
	uint64_t errors;
	unsigned int calls;

	f->vm->pager = (struct pager *)&wrap;	/* any non-NULL: calls are wrapped */
	vhost_vsock_get_stats(f->vm->vsock, &st);
	errors = st.residency_errors;
	rx_used = used(f, RXQ)->idx;
	tx_used = used(f, TXQ)->idx;
	wrap.again_from = RX_BUF_OFF;	/* rings resident, buffers not yet */
	memcpy(snapshot, f->ram, RAM_SIZE);
	assert_int_equal(send(cfd, "host", 4, 0), 4);		/* into an RX buffer */
	tx_send(f, VIRTIO_VSOCK_OP_RW, "guest", 5, 0, 0);	/* from a TX buffer */
	/* the guest's own writes (TX slot, descriptor, avail ring) aside */
	memcpy(snapshot + TX_BUF_OFF, f->ram + TX_BUF_OFF, RAM_SIZE - TX_BUF_OFF);
	memcpy(snapshot + RING_OFF(TXQ), f->ram + RING_OFF(TXQ), 0x2000);
	assert_int_equal(used(f, RXQ)->idx, rx_used);
	assert_int_equal(used(f, TXQ)->idx, tx_used);
	assert_memory_equal(snapshot, f->ram, RAM_SIZE);
	assert_int_equal(recv(cfd, got, sizeof(got), MSG_DONTWAIT), -1);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.residency_errors, errors);
	assert_true(st.residency_waits > 0);
	/* nothing retried until the pager says so (no busy loop) */
	calls = wrap.n;
	pump(f);
	assert_true(wrap.n - calls <= 4);
	assert_int_equal(used(f, RXQ)->idx, rx_used);
	/* the memory is back: the same chains are used, in order */
	wrap.again_from = 0;
	vhost_vsock_memory_ready(f->vm->vsock);
	pump(f);
	assert_int_equal(used(f, TXQ)->idx, (uint16_t)(tx_used + 1));
	assert_int_equal(recv(cfd, got, sizeof(got), MSG_DONTWAIT), 5);
	assert_memory_equal(got, "guest", 5);
	assert_true(rx_get(f, &h, data));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(h.len, 4);
	assert_memory_equal(data, "host", 4);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.residency_errors, errors);
	free(snapshot);
	f->vm->pager = NULL;
	close(cfd);
	close(lfd);
}

/*
 * The buffers the next packets land in follow the ring while the VM runs:
 * once the device filled one, and once the guest posted more, the pager
 * hears the next RX chains (so one posted since the last offload is read
 * back before a resume needs it, not on its way); never while paused, and
 * not without a pager.
 */
static void test_next_rx_buffers_told_to_pager(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);
	unsigned int calls, first;

	/* no pager: nothing to tell */
	assert_int_equal(send(cfd, "a", 1, 0), 1);
	pump(f);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(dev.calls, 0);

	f->vm->pager = (struct pager *)&wrap;	/* any non-NULL: calls are wrapped */
	first = f->used_seen[RXQ];	/* the chain the next packet takes */
	assert_int_equal(send(cfd, "b", 1, 0), 1);
	pump(f);
	assert_true(rx_get(f, &h, NULL));
	assert_true(dev.calls > 0);
	/* the chains after the one just filled, not that one */
	assert_false(dev_named_rx_buf(first % QSZ));
	assert_true(dev_named_rx_buf((first + 1) % QSZ));
	assert_true(dev.n <= 9 + 2 * VHOST_VSOCK_RESUME_RX_CHAINS);

	/* paused: neither a filled chain nor the guest's kick is told ... */
	vhost_vsock_set_paused(f->vm->vsock, true);
	calls = dev.calls;
	rx_post(f, 2);
	assert_int_equal(send(cfd, "c", 1, 0), 1);
	pump(f);
	assert_int_equal(dev.calls, calls);
	/* ... until it runs again */
	vhost_vsock_set_paused(f->vm->vsock, false);
	pump(f);
	assert_true(dev.calls > calls);
	assert_true(rx_get(f, &h, NULL));

	/* the guest posting buffers alone is told too */
	calls = dev.calls;
	rx_post(f, 1);
	pump(f);
	assert_true(dev.calls > calls);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	/* the device counts what it told its owner: also without a pager */
	assert_true(st.rx_ahead_calls > dev.calls);

	/* nothing changed: nothing told */
	calls = dev.calls;
	pump(f);
	assert_int_equal(dev.calls, calls);
	f->vm->pager = NULL;
	close(cfd);
	close(lfd);
}

static void test_hostile_descriptors_and_credit(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);

	/* a TX descriptor outside guest RAM: counted, returned, no crash */
	tx_send(f, VIRTIO_VSOCK_OP_RW, NULL, 0, RAM_SIZE + 0x1000, 0);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.bad_packets, 1);
	assert_int_equal(st.bad_descriptors, 1);
	/* a header shorter than a header */
	*desc(f, TXQ, 0) = (struct vring_desc){ .addr = TX_BUF_OFF, .len = 10 };
	offer(f, TXQ, 0);
	kick(f, TXQ);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.bad_packets, 2);
	/* a spoofed source CID */
	fill_hdr(&h, VIRTIO_VSOCK_OP_RW, 0);
	h.src_cid = 77;
	memcpy(f->ram + TX_BUF_OFF, &h, sizeof(h));
	*desc(f, TXQ, 0) = (struct vring_desc){ .addr = TX_BUF_OFF, .len = sizeof(h) };
	offer(f, TXQ, 0);
	kick(f, TXQ);
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.bad_cid, 1);
	/* more than the credit vmnapd gave, the host end not reading */
	for (int i = 0; i < 20 && !st.credit_violations; i++) {
		tx_send(f, VIRTIO_VSOCK_OP_RW, NULL, 60000, 0, 0);
		vhost_vsock_get_stats(f->vm->vsock, &st);
	}
	assert_int_equal(st.credit_violations, 1);
	rx_post(f, 8);
	assert_true(rx_get(f, &h, NULL));
	while (h.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE && rx_get(f, &h, NULL))
		;
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RST);
	assert_int_equal(vhost_vsock_nr_conns(f->vm->vsock), 0);
	close(cfd);
	close(lfd);
}

static void test_tx_not_stalled_by_full_rx(void **state)
{
	struct fe *f = *state;
	struct virtio_vsock_hdr h;
	struct vhost_vsock_stats st;
	int lfd = host_listen(f, HOST_PORT), cfd = guest_connect(f, lfd);
	uint8_t sink[65536];
	size_t got = 0;
	uint32_t chunk = 4000, sent = 0;
	uint16_t rx_used;

	/* use up every RX buffer the guest posted: RX is now full */
	while (used(f, RXQ)->idx != f->avail_idx[RXQ]) {
		assert_int_equal(send(cfd, "x", 1, 0), 1);
		pump(f);
	}
	while (rx_get(f, &h, NULL))
		;
	rx_used = used(f, RXQ)->idx;
	/* the guest keeps sending within its credit; the host end reads */
	for (int i = 0; i < 64; i++) {
		ssize_t n;

		tx_send(f, VIRTIO_VSOCK_OP_RW, NULL, chunk, 0, 0);
		sent += chunk;
		while ((n = recv(cfd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			got += (size_t)n;
		pump(f);	/* vmnapd flushes what it held */
		while ((n = recv(cfd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			got += (size_t)n;
	}
	assert_int_equal(got, sent);		/* every TX packet went through */
	assert_int_equal(used(f, TXQ)->idx, f->avail_idx[TXQ]);
	assert_int_equal(used(f, RXQ)->idx, rx_used);	/* nothing to RX meanwhile */
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.credit_violations, 0);
	/* the owed credit update goes out as soon as RX has room */
	rx_post(f, 2);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	assert_int_equal(h.fwd_cnt, sent);
	close(cfd);
	close(lfd);
}

static void test_host_connect_line(void **state)
{
	struct fe *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct virtio_vsock_hdr h;
	char line[32] = { 0 };
	int c = socket(AF_UNIX, SOCK_STREAM, 0);

	rx_post(f, 4);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->uds_path);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(c, "CONNECT 1234\nhello", 18, 0), 18);
	pump(f);
	assert_true(rx_get(f, &h, NULL));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 1234);
	assert_true(h.src_port >= (1U << 30));
	/* the guest accepts */
	{
		struct virtio_vsock_hdr r;

		fill_hdr(&r, VIRTIO_VSOCK_OP_RESPONSE, 0);
		r.src_port = 1234;
		r.dst_port = h.src_port;
		memcpy(f->ram + TX_BUF_OFF, &r, sizeof(r));
		*desc(f, TXQ, 0) = (struct vring_desc){ .addr = TX_BUF_OFF, .len = sizeof(r) };
		offer(f, TXQ, 0);
		kick(f, TXQ);
	}
	assert_true(recv(c, line, sizeof(line) - 1, MSG_DONTWAIT) > 0);
	{
		char want[32];

		snprintf(want, sizeof(want), "OK %u\n", h.src_port);
		assert_string_equal(line, want);
	}
	/* bytes after the CONNECT line are the stream's first bytes */
	pump(f);
	assert_true(rx_get(f, &h, (uint8_t *)line));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(line, "hello", 5);
	close(c);
}

static void test_bad_connect_line(void **state)
{
	struct fe *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vhost_vsock_stats st;
	char b;
	int c = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->uds_path);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(c, "CONNECT 99999999999\n", 20, 0), 20);
	pump(f);
	assert_int_equal(recv(c, &b, 1, MSG_DONTWAIT), 0);	/* closed */
	vhost_vsock_get_stats(f->vm->vsock, &st);
	assert_int_equal(st.bad_connect_lines, 1);
	close(c);
}

/* ---- random messages straight into the vhost-user handler ---- */

static void dummy_kick(void *opaque, unsigned int qidx)
{
	(void)opaque;
	(void)qidx;
}

static unsigned int open_fds(void)
{
	unsigned int n = 0;

	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static void test_random_messages(void **state)
{
	static const struct vhost_user_ops ops = { .queue_kick = dummy_kick };
	struct fe *f = *state;
	struct vhost_user_config cfg = { .nqueues = 2, .config_size = 8, .subject = "fuzz" };
	char path[96];
	struct vhost_user *vu;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	uint8_t payload[VHOST_USER_PAYLOAD_MAX], reply[sizeof(struct vhost_user_hdr) +
							VHOST_USER_PAYLOAD_MAX];
	unsigned int fds_before;
	enum log_level lvl = log_get_level();

	snprintf(path, sizeof(path), "%s/fuzz.sock", f->dir);
	cfg.socket_path = path;
	fds_before = open_fds();
	vu = vhost_user_new(f->d.loop, &cfg, &ops, NULL);
	assert_non_null(vu);
	log_set_level(LOG_ERR);		/* refusals are expected by the thousand */
	for (int i = 0; i < 50000; i++) {
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
		struct vhost_user_hdr h = {
			.request = (uint32_t)(RND() % 30),
			.flags = VHOST_USER_VERSION | (uint32_t)(RND() & VHOST_USER_NEED_REPLY_MASK),
			.size = (uint32_t)(RND() & 1 ? RND() % 48 : RND() % sizeof(payload)),
		};
		int fds[2];
		unsigned int nfds = (unsigned int)(RND() % 3);
		int r;

		for (size_t k = 0; k < h.size; k++)
			payload[k] = (uint8_t)(RND() & 3 ? RND() % 4 : RND());
		if (h.size >= 4 && (RND() & 1))	/* plausible queue index / count */
			payload[0] = (uint8_t)(RND() % 3);
		if (h.request == VHOST_USER_SET_MEM_TABLE && h.size >= 40 && (RND() & 1)) {
			struct vhost_user_mem_table mt = { .nregions = 1 };

			mt.regions[0].memory_size = RND() & 1 ? RAM_SIZE : RND() % (2 * RAM_SIZE);
			mt.regions[0].userspace_addr = RND() & 1 ? uva(f, 0) : RND();
			mt.regions[0].mmap_offset = RND() & 1 ? 0 : RND();
			h.size = 8 + sizeof(mt.regions[0]);
			memcpy(payload, &mt, h.size);
		}
		for (unsigned int k = 0; k < nfds; k++)
			fds[k] = RND() & 1 ? eventfd(0, EFD_CLOEXEC) : dup(f->memfd);
#undef RND
		r = vhost_user_handle(vu, &h, payload, fds, nfds, reply, sizeof(reply));
		assert_true(r == 0 || (r >= (int)sizeof(h) && r <= (int)sizeof(reply)));
	}
	vhost_user_free(vu);
	log_set_level(lvl);
	/* every fd handed over was either kept and closed with the device, or closed */
	assert_int_equal(open_fds(), fds_before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_config_space_is_guest_cid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_messages_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversize_message_drops_front_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_maps_guest_ram, setup_owner_map,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_port_gets_rst, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_port_needs_reserved_source_port,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_device_does_not_touch_guest_ram, setup, teardown),
		cmocka_unit_test_setup_teardown(test_buffers_made_resident_before_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_yet_resident_buffers_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_next_rx_buffers_told_to_pager, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_descriptors_and_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tx_not_stalled_by_full_rx, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_connect_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_messages, setup, teardown),
	};

	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
