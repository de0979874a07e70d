// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_guest_link_listen.c - the guest link's socket backends
 * (guest_link_listen.c) on the real vmnapd loop: a fake guest connects to
 * the hybrid socket "<uds>_5151" as Firecracker / Cloud Hypervisor would,
 * speaks the vmnap protocol and misbehaves; socket files in the way are
 * handled without removing what is not ours.  AF_VSOCK: what this host can
 * do for real (socket creation, the error when there is no transport); the
 * CID registry's routing with a unix socketpair standing in for an accepted
 * connection; the end-to-end part only where a vsock transport exists.
 * The other direction: ringing the guest module's doorbell (doorbell.c)
 * through the VMM's hybrid socket "<uds>", with a fake VMM that reads the
 * CONNECT line and answers as Firecracker does (OK, a reset guest port,
 * garbage), a socket that is not there, a ring replaced by the next, a VM
 * freed with a ring in flight, and AF_VSOCK as far as this host goes.
 * Tests wait for events, never for durations.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "doorbell.h"
#include "guest_link.h"
#include "guest_link_listen.h"
#include "log.h"
#include "loop.h"
#include "usock.h"
#include "vmnapd.h"

#define PORT		VMNAP_DEFAULT_PORT
#define GIB		(1ULL << 30)
#define TEST_CID	42U
#define OTHER_CID	43U
/* vsock ports: per process, so concurrent runs do not collide */
#define VSOCK_TEST_PORT_BASE	0x10000U
#define VSOCK_TEST_PORT_SPAN	0x8000U
/* Hang guard for loop-driven tests: a bound, not a measurement. */
#define GUARD_NS	(20ULL * 1000000000ULL)
/* A guest read that gets no reply fails instead of blocking. */
#define GUEST_READ_TIMEOUT_S	10
/* How often the loop looks whether a doorbell ring has its outcome. */
#define POLL_NS		1000000ULL

struct fx {
	struct loop *loop;
	struct vmnapd d;
	struct vm *vm;
	char dir[64];
	char base[96];		/* "<dir>/fc.vsock": the VMM's <uds> */
	char path[128];		/* "<base>_5151" */
	unsigned int hello, disconnects;
	int disconnect_err;
	struct loop_timer guard;
	bool guard_fired;
	uint32_t guest_seq;
	uint32_t vport, vport_busy;	/* AF_VSOCK tests */
	int vmm_fd;			/* doorbell tests: the fake VMM's "<uds>" */
	struct loop_timer poll;		/* doorbell tests: outcome watch */
	uint64_t want;			/* doorbell outcomes to wait for */
};

/* ---- fixture ---- */

static void on_hello(struct guest_link *gl, const struct guest_link_peer *p,
		     void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	(void)p;
	f->hello++;
	loop_stop(f->loop);
}

static void on_disconnect(struct guest_link *gl, int err, void *opaque)
{
	struct fx *f = opaque;

	(void)gl;
	f->disconnects++;
	f->disconnect_err = err;
	loop_stop(f->loop);
}

static const struct guest_link_ops ops = {
	.hello = on_hello,
	.disconnect = on_disconnect,
};

static void on_guard(struct loop *l, struct loop_timer *t, void *arg)
{
	struct fx *f = arg;

	(void)t;
	f->guard_fired = true;
	loop_stop(l);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->loop = loop_new();
	assert_non_null(f->loop);
	f->d.loop = f->loop;
	f->d.cfg.run_dir = "/nonexistent";
	snprintf(f->dir, sizeof(f->dir), "/tmp/vmnap-listen-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->base, sizeof(f->base), "%s/fc.vsock", f->dir);
	snprintf(f->path, sizeof(f->path), "%s_%u", f->base, PORT);
	f->vm = vm_new(&f->d, "t1");
	assert_non_null(f->vm);
	assert_int_equal(vm_link_attach(f->vm, VMNAP_F_ALL, &ops, f), 0);
	loop_timer_init(&f->guard, on_guard, f);
	f->vmm_fd = -1;
	f->vport = VSOCK_TEST_PORT_BASE + 2 * ((uint32_t)getpid() % VSOCK_TEST_PORT_SPAN);
	f->vport_busy = f->vport + 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[160];

	while (f->d.vms)
		vm_free(f->d.vms);
	assert_null(f->d.link_vsock);	/* the last VM took the state along */
	if (f->vmm_fd >= 0)
		close(f->vmm_fd);
	loop_timer_cancel(f->loop, &f->guard);
	loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Run the loop until a callback stops it; a hang fails the test. */
static void run_until_event(struct fx *f)
{
	loop_timer_arm(f->loop, &f->guard, GUARD_NS);
	assert_int_equal(loop_run(f->loop), 0);
	loop_timer_cancel(f->loop, &f->guard);
	assert_false(f->guard_fired);
}

/* ---- the fake guest (what the VMM forwards from vmnap.ko) ---- */

static void set_read_timeout(int fd)
{
	const struct timeval tv = { .tv_sec = GUEST_READ_TIMEOUT_S };

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static int guest_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	set_read_timeout(fd);
	return fd;
}

static void guest_send(struct fx *f, int fd, unsigned int type,
		       const void *payload, uint32_t len)
{
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_hdr) + 256];
	struct vmnap_hdr h;

	assert_true(len <= sizeof(buf) - sizeof(h));
	vmnap_hdr_init(&h, type, len, ++f->guest_seq);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), payload, len);
	assert_int_equal(write(fd, buf, sizeof(h) + len), (ssize_t)(sizeof(h) + len));
}

static void guest_hello(struct fx *f, int fd)
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
	snprintf(m->module_version, sizeof(m->module_version), "fake-guest");
	m->ranges[0].gpa = vmnap_cpu64(0);
	m->ranges[0].len = vmnap_cpu64(GIB);
	guest_send(f, fd, VMNAP_HELLO, buf, sizeof(buf));
}

static void read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* One whole host message; returns its type. */
static unsigned int guest_read_msg(int fd, void *payload, size_t cap)
{
	struct vmnap_hdr h;
	uint32_t len;

	read_full(fd, &h, sizeof(h));
	assert_int_equal(vmnap_le32(h.magic), VMNAP_MAGIC);
	len = vmnap_le32(h.len);
	assert_true(len <= cap);
	read_full(fd, payload, len);
	return vmnap_le16(h.type);
}

/* The host closed the stream: end of file, nothing else. */
static void guest_expect_eof(int fd)
{
	char c;

	assert_int_equal(read(fd, &c, 1), 0);
}

/* HELLO -> HELLO_ACK with our VM's id, over @fd. */
static void guest_handshake(struct fx *f, int fd)
{
	_Alignas(8) struct vmnap_hello_ack ack;
	unsigned int hello = f->hello;

	guest_hello(f, fd);
	run_until_event(f);
	assert_int_equal(f->hello, hello + 1);
	assert_int_equal(guest_read_msg(fd, &ack, sizeof(ack)), VMNAP_HELLO_ACK);
	assert_int_equal(vmnap_le64(ack.vm_id), f->vm->id);
	assert_int_equal(guest_link_state(f->vm->link), GUEST_LINK_UP);
}

static struct guest_link_listen_stats listen_stats(struct fx *f)
{
	struct guest_link_listen_stats st;

	guest_link_listen_get_stats(f->vm, &st);
	return st;
}

static struct guest_link_stats link_stats(struct fx *f)
{
	struct guest_link_stats st;

	guest_link_get_stats(f->vm->link, &st);
	return st;
}

/* ---- hybrid unix socket ---- */

static void test_hybrid_hello(void **state)
{
	struct fx *f = *state;
	struct stat st;
	int fd;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	fd = guest_connect(f->path);
	guest_handshake(f, fd);
	assert_int_equal(listen_stats(f).hybrid_accepts, 1);
	assert_int_equal(listen_stats(f).sessions_replaced, 0);

	/* the guest goes away: the link notices, the listener stays */
	close(fd);
	run_until_event(f);
	assert_int_equal(f->disconnects, 1);
	assert_int_equal(f->disconnect_err, -ECONNRESET);
	fd = guest_connect(f->path);
	guest_handshake(f, fd);
	close(fd);

	/* one hybrid listener per VM */
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT + 1), -EEXIST);
}

/* Newest wins: a second connection ends the first session. */
static void test_hybrid_second_connection_replaces(void **state)
{
	struct fx *f = *state;
	int a, b;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	a = guest_connect(f->path);
	guest_handshake(f, a);

	b = guest_connect(f->path);
	run_until_event(f);			/* accepting b ends a's session */
	assert_int_equal(f->disconnects, 1);
	assert_int_equal(f->disconnect_err, -ECONNRESET);
	assert_int_equal(listen_stats(f).sessions_replaced, 1);
	guest_expect_eof(a);
	guest_handshake(f, b);
	assert_int_equal(link_stats(f).connects, 2);

	/* the old stream stays closed; the new one is the session */
	assert_int_equal(guest_link_ping(f->vm->link, 7), 0);
	{
		_Alignas(8) struct vmnap_ping ping;

		assert_int_equal(guest_read_msg(b, &ping, sizeof(ping)), VMNAP_PING);
		assert_int_equal(vmnap_le64(ping.token), 7);
	}
	close(a);
	close(b);
}

/* Hostile bytes: ERROR, disconnect counted; the listener keeps serving. */
static void test_hybrid_hostile_peer(void **state)
{
	struct fx *f = *state;
	_Alignas(8) struct vmnap_error e;
	static const char junk[] = "GET / HTTP/1.1\r\nHost: vmnapd\r\n\r\n";
	int fd;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	fd = guest_connect(f->path);
	assert_int_equal(write(fd, junk, sizeof(junk) - 1), (ssize_t)(sizeof(junk) - 1));
	run_until_event(f);
	assert_int_equal(f->disconnects, 1);
	assert_int_equal(f->disconnect_err, -EPROTO);
	assert_int_equal(guest_read_msg(fd, &e, sizeof(e)), VMNAP_ERROR);
	assert_int_equal(vmnap_le32(e.code), VMNAP_EMAGIC);
	guest_expect_eof(fd);
	close(fd);
	assert_int_equal(link_stats(f).rx_errors[VMNAP_EMAGIC], 1);
	assert_int_equal(link_stats(f).disconnects, 1);

	/* a peer that connects and hangs up at once */
	fd = guest_connect(f->path);
	close(fd);
	run_until_event(f);
	assert_int_equal(f->disconnects, 2);

	/* the listener survives and serves a well-behaved guest */
	fd = guest_connect(f->path);
	guest_handshake(f, fd);
	assert_int_equal(listen_stats(f).hybrid_accepts, 3);
	close(fd);
}

/* A socket file nobody listens on (vmnapd crashed) is reused. */
static void test_hybrid_stale_socket(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s, fd;

	strcpy(sa.sun_path, f->path);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);				/* the file stays behind */

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	fd = guest_connect(f->path);
	guest_handshake(f, fd);
	close(fd);
}

/* A live listener at the path (another vmnapd) is neither stolen nor removed. */
static void test_hybrid_live_socket_kept(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat before, after;
	int s, c;

	strcpy(sa.sun_path, f->path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 4), 0);
	assert_int_equal(lstat(f->path, &before), 0);

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), -EADDRINUSE);
	assert_int_equal(lstat(f->path, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	c = guest_connect(f->path);		/* still the other listener's */
	close(c);
	close(s);
}

/* Anything but a socket at the path is an error and stays untouched. */
static void test_hybrid_other_files_kept(void **state)
{
	struct fx *f = *state;
	static const char content[] = "precious\n";
	char link_target[160], buf[sizeof(content)];
	struct stat st;
	int fd;

	/* a regular file */
	fd = open(f->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, sizeof(content) - 1), (ssize_t)(sizeof(content) - 1));
	close(fd);
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), -EEXIST);
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), (ssize_t)(sizeof(content) - 1));
	close(fd);
	assert_memory_equal(buf, content, sizeof(content) - 1);
	assert_int_equal(unlink(f->path), 0);

	/* a directory */
	assert_int_equal(mkdir(f->path, 0700), 0);
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), -EEXIST);
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(rmdir(f->path), 0);

	/* a symlink (even one to a stale socket) is not followed or removed */
	snprintf(link_target, sizeof(link_target), "%s/elsewhere", f->dir);
	assert_int_equal(symlink(link_target, f->path), 0);
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), -EEXIST);
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(unlink(f->path), 0);

	/* nothing was set up by the failures */
	assert_int_equal(listen_stats(f).hybrid_accepts, 0);
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
}

/* Detach removes our socket file, but not a file that replaced it. */
static void test_hybrid_detach_removes_only_ours(void **state)
{
	struct fx *f = *state;
	struct stat st;
	int fd;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	guest_link_listen_vm_detach(f->vm);
	assert_int_equal(lstat(f->path, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_null(f->vm->link_listener);
	guest_link_listen_vm_detach(f->vm);	/* idempotent */

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	assert_int_equal(unlink(f->path), 0);	/* someone else's file appears */
	fd = open(f->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	guest_link_listen_vm_detach(f->vm);
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
}

/* A connection for a VM without a guest link is closed and counted. */
static void test_hybrid_no_link(void **state)
{
	struct fx *f = *state;
	int fd, fd2;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	vm_link_detach(f->vm);
	fd = guest_connect(f->path);
	/* no link callback to stop on: turn the loop until the count moves */
	while (!listen_stats(f).no_link) {
		loop_timer_arm(f->loop, &f->guard, 1000000);
		assert_int_equal(loop_run(f->loop), 0);
	}
	f->guard_fired = false;
	guest_expect_eof(fd);
	close(fd);

	/* a link attached later gets the next connection */
	assert_int_equal(vm_link_attach(f->vm, VMNAP_F_ALL, &ops, f), 0);
	fd2 = guest_connect(f->path);
	guest_handshake(f, fd2);
	close(fd2);
}

/*
 * accept(2) out of fds: the listener counts it, rests instead of spinning
 * on the pending connection, and takes it once fds are back.
 */
static void test_hybrid_accept_out_of_fds(void **state)
{
	struct fx *f = *state;
	struct rlimit saved, tight;
	int fd, next_fd;

	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, PORT), 0);
	fd = guest_connect(f->path);		/* queued, not yet accepted */
	next_fd = dup(0);			/* the lowest free fd */
	assert_true(next_fd >= 0);
	close(next_fd);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	tight = saved;
	tight.rlim_cur = (rlim_t)next_fd;	/* no new fd fits */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
	while (!listen_stats(f).accept_errors) {
		loop_timer_arm(f->loop, &f->guard, 1000000);
		assert_int_equal(loop_run(f->loop), 0);
	}
	f->guard_fired = false;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_int_equal(listen_stats(f).accept_errors, 1);	/* rested, no spin */
	assert_int_equal(listen_stats(f).hybrid_accepts, 0);

	guest_handshake(f, fd);			/* accepted after the rest */
	assert_int_equal(listen_stats(f).hybrid_accepts, 1);
	close(fd);
}

static void test_hybrid_bad_arguments(void **state)
{
	struct fx *f = *state;
	char longbase[200];

	memset(longbase, 'a', sizeof(longbase) - 1);
	longbase[0] = '/';
	longbase[sizeof(longbase) - 1] = '\0';
	assert_int_equal(guest_link_listen_hybrid(f->vm, longbase, PORT), -ENAMETOOLONG);
	assert_int_equal(guest_link_listen_hybrid(f->vm, f->base, 0), -EINVAL);
	assert_int_equal(guest_link_listen_hybrid(f->vm, "", PORT), -EINVAL);
	assert_int_equal(guest_link_listen_unix(f->vm, NULL), -EINVAL);
}

/* ---- AF_VSOCK ---- */

/* The CID registry: one VM per CID, guest CIDs only. */
static void test_vsock_cid_registry(void **state)
{
	struct fx *f = *state;
	struct vm *other = vm_new(&f->d, "t2");

	assert_non_null(other);
	assert_int_equal(guest_link_vsock_register_cid(f->vm, VMADDR_CID_HYPERVISOR), -EINVAL);
	assert_int_equal(guest_link_vsock_register_cid(f->vm, VMADDR_CID_LOCAL), -EINVAL);
	assert_int_equal(guest_link_vsock_register_cid(f->vm, VMADDR_CID_HOST), -EINVAL);
	assert_int_equal(guest_link_vsock_register_cid(f->vm, VMADDR_CID_ANY), -EINVAL);
	assert_null(f->d.link_vsock);		/* nothing left behind */

	assert_int_equal(guest_link_vsock_register_cid(f->vm, TEST_CID), 0);
	assert_int_equal(guest_link_vsock_register_cid(other, TEST_CID), -EEXIST);
	assert_int_equal(guest_link_vsock_register_cid(f->vm, OTHER_CID), -EEXIST);
	assert_ptr_equal(guest_link_vsock_find_cid(&f->d, TEST_CID), f->vm);
	assert_null(guest_link_vsock_find_cid(&f->d, OTHER_CID));
	assert_int_equal(guest_link_vsock_register_cid(other, OTHER_CID), 0);
	assert_ptr_equal(guest_link_vsock_find_cid(&f->d, OTHER_CID), other);

	/* removing a VM frees its CID */
	vm_free(other);
	assert_null(guest_link_vsock_find_cid(&f->d, OTHER_CID));
	assert_non_null(f->d.link_vsock);
	guest_link_vsock_unregister_cid(f->vm);
	assert_null(guest_link_vsock_find_cid(&f->d, TEST_CID));
	assert_null(f->d.link_vsock);		/* last one out */
}

/*
 * What the listener does with an accepted connection, by peer CID: the
 * registered VM's link gets it; an unknown CID is closed and counted.  A
 * unix socketpair stands in for the accepted AF_VSOCK connection (the
 * route does not look at the socket); the real accept is test_vsock_e2e.
 */
static void test_vsock_route_by_cid(void **state)
{
	struct fx *f = *state;
	struct guest_link_vsock_stats vst;
	int sv[2];

	assert_int_equal(guest_link_vsock_register_cid(f->vm, TEST_CID), 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	set_read_timeout(sv[1]);
	assert_int_equal(guest_link_vsock_route(&f->d, sv[0], OTHER_CID), -ENOENT);
	guest_expect_eof(sv[1]);		/* closed at once */
	close(sv[1]);
	guest_link_listen_vsock_get_stats(&f->d, &vst);
	assert_int_equal(vst.unknown_cid, 1);
	assert_int_equal(link_stats(f).connects, 0);	/* our VM untouched */

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	set_read_timeout(sv[1]);
	assert_int_equal(guest_link_vsock_route(&f->d, sv[0], TEST_CID), 0);
	guest_handshake(f, sv[1]);
	assert_int_equal(listen_stats(f).vsock_accepts, 1);
	close(sv[1]);
}

/* This host's AF_VSOCK as it is: create a socket, listen or say why not. */
static void test_vsock_listener(void **state)
{
	struct fx *f = *state;
	int s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int err;

	if (s < 0) {
		assert_int_equal(errno, EAFNOSUPPORT);
		assert_int_equal(guest_link_listen_vsock(f->vm, TEST_CID, f->vport),
				 -EAFNOSUPPORT);
		assert_null(f->d.link_vsock);
		print_message("# no AF_VSOCK in this kernel: listener error path only\n");
		return;
	}
	close(s);
	err = guest_link_listen_vsock(f->vm, TEST_CID, f->vport);
	if (!err) {
		/* a real error path: the port is taken by someone else */
		struct sockaddr_vm svm = {
			.svm_family = AF_VSOCK,
			.svm_cid = VMADDR_CID_ANY,
			.svm_port = f->vport_busy,
		};

		guest_link_listen_vm_detach(f->vm);
		s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(s >= 0);
		assert_int_equal(bind(s, (struct sockaddr *)&svm, sizeof(svm)), 0);
		assert_int_equal(listen(s, 1), 0);
		assert_int_equal(guest_link_listen_vsock(f->vm, TEST_CID, f->vport_busy),
				 -EADDRINUSE);
		assert_null(guest_link_vsock_find_cid(&f->d, TEST_CID));
		assert_null(f->d.link_vsock);
		close(s);
		err = guest_link_listen_vsock(f->vm, TEST_CID, f->vport);
		assert_int_equal(err, 0);
	}
	if (err) {
		/* e.g. -EADDRNOTAVAIL: AF_VSOCK without a transport (here) */
		assert_true(err == -EADDRNOTAVAIL || err == -ENODEV ||
			    err == -EADDRINUSE || err == -EACCES);
		assert_null(guest_link_vsock_find_cid(&f->d, TEST_CID));	/* rolled back */
		assert_null(f->d.link_vsock);
		assert_int_equal(guest_link_listen_vsock_start(&f->d, f->vport), err);
		assert_null(f->d.link_vsock);
		return;
	}
	assert_int_equal(guest_link_listen_vsock_port(&f->d), f->vport);
	assert_int_equal(guest_link_listen_vsock(f->vm, OTHER_CID, f->vport), -EEXIST);
	guest_link_listen_vm_detach(f->vm);	/* last VM: listener closes */
	assert_int_equal(guest_link_listen_vsock_port(&f->d), 0);
	assert_null(f->d.link_vsock);
	/* explicit start pins it beyond the VMs */
	assert_int_equal(guest_link_listen_vsock_start(&f->d, f->vport), 0);
	assert_int_equal(guest_link_listen_vsock_start(&f->d, f->vport_busy), -EBUSY);
	assert_int_equal(guest_link_listen_vsock(f->vm, TEST_CID, f->vport_busy), -EBUSY);
	guest_link_listen_vsock_stop(&f->d);
	assert_null(f->d.link_vsock);
}

/*
 * End to end over real AF_VSOCK: a listener, and a transport that carries
 * a connection to ourselves (vsock_loopback, CID 1).  The accepted peer is
 * then VMADDR_CID_LOCAL, which no guest can have: the real accept path
 * must close it and count it.  Skipped without such a transport (this
 * host has AF_VSOCK and the listener binds, but there is no vhost-vsock or
 * loopback transport: connect times out, binding CID 2 gives EADDRNOTAVAIL).
 */
static void test_vsock_e2e(void **state)
{
	struct fx *f = *state;
	struct sockaddr_vm svm = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_LOCAL,
		.svm_port = f->vport,
	};
	struct guest_link_vsock_stats vst;
	int err, fd;

	err = guest_link_listen_vsock_start(&f->d, f->vport);
	if (err) {
		print_message("# SKIP AF_VSOCK end to end: cannot listen on vsock port %u: %s "
			      "(no vsock transport on this host)\n", f->vport, strerror(-err));
		skip();
	}
	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	if (connect(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0) {
		err = errno;
		close(fd);
		guest_link_listen_vsock_stop(&f->d);
		print_message("# SKIP AF_VSOCK end to end: connect to CID %u: %s "
			      "(no vsock_loopback transport)\n", VMADDR_CID_LOCAL,
			      strerror(err));
		skip();
	}
	/* the host's own CID is no VM's: closed and counted */
	while (!(guest_link_listen_vsock_get_stats(&f->d, &vst), vst.unknown_cid)) {
		loop_timer_arm(f->loop, &f->guard, 1000000);
		assert_int_equal(loop_run(f->loop), 0);
	}
	f->guard_fired = false;
	set_read_timeout(fd);
	guest_expect_eof(fd);
	close(fd);
	guest_link_listen_vsock_stop(&f->d);
}

/* ---- the doorbell: vmnapd rings the guest through the VMM ---- */

static uint64_t outcomes(const struct guest_doorbell_stats *st)
{
	return st->answered + st->refused + st->failed + st->timeouts;
}

static struct guest_doorbell_stats stats(struct fx *f)
{
	struct guest_doorbell_stats st;

	guest_doorbell_get_stats(f->vm, &st);
	return st;
}

static void on_poll(struct loop *l, struct loop_timer *t, void *arg)
{
	struct fx *f = arg;
	struct guest_doorbell_stats st = stats(f);

	if (outcomes(&st) >= f->want)
		loop_stop(l);
	else
		loop_timer_arm(l, t, POLL_NS);
}

/* Run the loop until @want rings have their outcome; a hang fails the test. */
static void run_until_outcomes(struct fx *f, uint64_t want)
{
	f->want = want;
	loop_timer_init(&f->poll, on_poll, f);
	loop_timer_arm(f->loop, &f->poll, 0);
	run_until_event(f);
	loop_timer_cancel(f->loop, &f->poll);
}

/* The fake VMM listens on "<uds>" (Firecracker's hybrid vsock socket). */
static int bell_setup(void **state)
{
	struct fx *f;

	setup(state);
	f = *state;
	f->vmm_fd = usock_listen(f->base, 0600, 4, "test", NULL);
	assert_true(f->vmm_fd >= 0);
	return 0;
}

/* The fake VMM takes the ring's connection and checks its CONNECT line. */
static int vmm_accept_connect_line(struct fx *f)
{
	const struct timeval tv = { .tv_sec = GUEST_READ_TIMEOUT_S };
	char want[32], line[32];
	ssize_t n;
	int fd;

	fd = accept(f->vmm_fd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	snprintf(want, sizeof(want), "CONNECT %u\n", VMNAP_DOORBELL_PORT);
	n = recv(fd, line, sizeof(line) - 1, 0);
	assert_int_equal(n, (ssize_t)strlen(want));
	line[n] = '\0';
	assert_string_equal(line, want);
	return fd;
}

static void vmm_reply(int fd, const char *reply)
{
	assert_int_equal(write(fd, reply, strlen(reply)), (ssize_t)strlen(reply));
}

/* The guest accepted: the VMM says "OK <host port>". */
static void test_doorbell_answered(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int fd;
	char c;

	st = stats(f);
	assert_int_equal(st.rings, 0);
	assert_null(st.last);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
	fd = vmm_accept_connect_line(f);
	vmm_reply(fd, "OK 1073741824\n");
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.answered, 1);
	assert_string_equal(st.last, "answered");
	/* the ring hangs up: nothing else is sent */
	assert_int_equal(recv(fd, &c, 1, 0), 0);
	close(fd);
}

/* Nothing listens on the guest port: Firecracker closes the stream. */
static void test_doorbell_refused(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int fd;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
	fd = vmm_accept_connect_line(f);
	close(fd);
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.answered, 0);
	assert_string_equal(st.last, "refused");
}

/* A VMM that answers something else: failed, never answered. */
static void test_doorbell_bad_replies(void **state)
{
	static const char *const replies[] = {
		"NO\n",
		"OK",				/* then EOF: no newline */
		"OKAY 5\n",
		"0123456789012345678901234567890123456789\n",	/* too long */
	};
	struct fx *f = *state;
	struct guest_doorbell_stats st;

	for (unsigned int i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		int fd;

		assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
		fd = vmm_accept_connect_line(f);
		vmm_reply(fd, replies[i]);
		shutdown(fd, SHUT_WR);
		run_until_outcomes(f, i + 1);
		close(fd);
		st = stats(f);
		assert_int_equal(st.failed, i + 1);
		assert_string_equal(st.last, "failed");
	}
	assert_int_equal(st.answered, 0);
	assert_int_equal(st.rings, sizeof(replies) / sizeof(replies[0]));
}

/* No socket at the path (VMM gone): -ENOENT, counted, no ring in flight. */
static void test_doorbell_no_vmm_socket(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	char path[128];

	snprintf(path, sizeof(path), "%s/gone.vsock", f->dir);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, path), -ENOENT);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.failed, 1);
	assert_int_equal(outcomes(&st), st.rings);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, ""), -EINVAL);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, NULL), -EINVAL);
}

/* A new ring drops the one in flight: its VMM stream is closed. */
static void test_doorbell_ring_replaces(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int first, second;
	char c;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
	first = vmm_accept_connect_line(f);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
	second = vmm_accept_connect_line(f);
	assert_int_equal(recv(first, &c, 1, 0), 0);	/* dropped */
	vmm_reply(second, "OK 7\n");
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 2);
	assert_int_equal(st.answered, 1);
	assert_int_equal(outcomes(&st), 1);	/* the dropped one has none */
	close(first);
	close(second);
}

/* The VM goes away with a ring in flight: the stream closes, no leak. */
static void test_doorbell_vm_freed_mid_ring(void **state)
{
	struct fx *f = *state;
	int fd;
	char c;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->base), 0);
	fd = vmm_accept_connect_line(f);
	vm_free(f->vm);
	f->vm = NULL;
	assert_int_equal(recv(fd, &c, 1, 0), 0);
	close(fd);
}

/*
 * AF_VSOCK: this host has no guest with CID 3 (and may have no vsock
 * transport at all): the ring ends, not answered, whatever the reason.
 */
static void test_doorbell_vsock_unreachable(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int ret = guest_doorbell_ring_vsock(f->vm, 3);

	if (!ret)
		run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.answered, 0);
	assert_int_equal(outcomes(&st), 1);
	assert_non_null(st.last);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hybrid_hello, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_second_connection_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_hostile_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_stale_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_live_socket_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_other_files_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_detach_removes_only_ours, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_no_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_accept_out_of_fds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vsock_cid_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vsock_route_by_cid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vsock_listener, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vsock_e2e, setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_answered, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_refused, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_bad_replies, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_no_vmm_socket, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_ring_replaces, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_vm_freed_mid_ring, bell_setup, teardown),
		cmocka_unit_test_setup_teardown(test_doorbell_vsock_unreachable, bell_setup, teardown),
	};

	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
