// SPDX-License-Identifier: GPL-2.0-only
/*
 * libvmnap-preload.so - LD_PRELOAD into a VMM (QEMU 7.2 with
 * -object memory-backend-memfd,share=on, or memory-backend-file with
 * mem-path on tmpfs and share=on) to hand its guest RAM to vmnapd.
 *
 * memfd_create() is interposed to remember guest-RAM memfds (by name); a
 * later shared mmap()/mmap64() of such a memfd of at least the size
 * threshold is guest RAM, as is one of a memfd of that name made with the
 * raw syscall (told by its /proc/self/fd link).  So is a shared mapping of
 * that size of a file
 * under VMNAP_MEM_PATH (QEMU's mem-path: a directory, where QEMU creates
 * and unlinks its file, or the file itself).  Guest RAM must be shmem (a
 * memfd or a tmpfs file): on hugetlbfs (memory-backend-memfd hugetlb=on,
 * a mem-path on a hugetlbfs mount) or any other file system the mapping is
 * refused before it is made, with the reason, because vmnapd serves and
 * evicts 4 KiB pages, which a huge-page mapping cannot take, and
 * userfaultfd serves shared file mappings only on shmem and hugetlbfs.
 * For guest RAM the shim creates a userfaultfd (the
 * userfaultfd syscall, else /dev/userfaultfd), does UFFDIO_API asking for
 * the REMOVE, UNMAP and REMAP events where offered, and sends
 * the region with the userfaultfd and the memfd to vmnapd's memory
 * handshake socket (see host-pager/src/vm/mem_handshake.h).  It does not
 * register the range: vmnapd registers it only while pages are out.  The
 * shim keeps its copy of the userfaultfd and the connection open for the
 * VMM's lifetime (vmnapd sees the mapper go when the connection ends).
 *
 * vmnapd may die or restart while the VMM runs.  The shim keeps the
 * userfaultfd, a copy of the memfd and the store id vmnapd answered, and a
 * thread of its own (all signals blocked) watches the connections: when
 * one ends it hands the same userfaultfd, memfd and region, with the store
 * id, to mem.sock again, retrying with backoff (RECONNECT_MIN_MS doubling
 * to RECONNECT_MAX_MS) until a vmnapd takes them.  Meanwhile a thread
 * touching an evicted page sleeps in the userfaultfd (its fault stays
 * queued there for the next reader): it never reads zeros.
 *
 * Environment:
 *   VMNAP_VM                 VM name (default "qemu-<pid>")
 *   VMNAP_SOCKET             handshake socket (default /run/vmnap/mem.sock)
 *   VMNAP_MEMFD_NAME         memfd name to manage (default
 *                            "memory-backend-memfd"; "*" for any)
 *   VMNAP_MEM_PATH           QEMU's mem-path (memory-backend-file): shared
 *                            mappings of files under it are guest RAM
 *   VMNAP_MIN_BYTES          smallest mapping to manage (default 1 MiB)
 *   VMNAP_GPA_BASE           guest-physical address of offset 0 (default 0)
 *   VMNAP_GPA_LAYOUT=linear  assert gpa = VMNAP_GPA_BASE + memfd offset for
 *                            every page (a VMM with a linear RAM layout)
 *   VMNAP_MEMFD_RECEIVED=1   also manage a memfd this process did not create
 *                            (received over a socket), told by its name
 *                            ("/memfd:NAME" in /proc/self/fd): for
 *                            vmnap-vsockd, which maps the VMM's guest RAM
 *   VMNAP_ALLOW_UNMANAGED=1  run on unmanaged if vmnapd cannot be reached
 *   VMNAP_PRELOAD_DEBUG=1    log every decision to stderr
 * Without VMNAP_ALLOW_UNMANAGED a failed handshake fails the mmap (the
 * VMM stops with its own error) after a loud message on stderr.
 *
 * The VMM's threads take signals (QEMU: timers, SIGCHLD, SIG_IPI) at any
 * time, so every blocking call of the handshake retries on EINTR, and the
 * reply is awaited with poll() against one deadline rather than a socket
 * timeout (a call with SO_RCVTIMEO is never restarted, even with
 * SA_RESTART).
 *
 * The shim cannot see QEMU's guest-physical layout: the gpa it sends is
 * VMNAP_GPA_BASE + memfd offset, which is wrong above QEMU x86's low-memory
 * split (RAM beyond it sits above the PCI hole, at 4 GiB).  So it says how
 * sure it is ("gpa_source"): "linear" with VMNAP_GPA_LAYOUT=linear, or for
 * qemu-system-x86_64/i386 with base 0 when the mapping ends below 2 GiB
 * (the smallest low-memory split of QEMU's pc and q35 machines), else
 * "guessed" and vmnapd waits for the vhost-user memory table.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET		"/run/vmnap/mem.sock"
#define DEFAULT_MEMFD_NAME	"memory-backend-memfd"
#define DEFAULT_MIN_BYTES	(1ull << 20)
#define MAX_MEMFDS		64
#define MEMFD_NAME_MAX		250
#define REPLY_TIMEOUT_MS	10000
#define NS_PER_MS		1000000ull
#define JSON_MAX		1024
/* QEMU pc/q35 keep RAM at gpa == offset up to the low-memory split, which
 * is at least 2 GiB (q35 with >= 2.75 GiB of RAM). */
#define X86_LINEAR_RAM_MAX	(2ull << 30)
#define MAX_MAPPINGS		16	/* guest RAM mappings handed over */
#define RECONNECT_MIN_MS	100
#define RECONNECT_MAX_MS	5000
#define STORE_ID_LEN		32	/* hex digits */
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW	_IO(0xAA, 0x00)
#endif

struct known_memfd {
	int fd;
	char name[MEMFD_NAME_MAX];
};

/* The shim has no daemon context: this table is its only state. */
static struct {
	pthread_mutex_t lock;
	struct known_memfd fds[MAX_MEMFDS];
	unsigned int n;
} shim = { .lock = PTHREAD_MUTEX_INITIALIZER };

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*memfd_create_fn)(const char *, unsigned int);

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One line on stderr, in one write(): never torn by the VMM's own output. */
static void say(const char *fmt, ...)
{
	static const char prefix[] = "vmnap-preload: ";
	char buf[512];
	size_t len = sizeof(prefix) - 1;
	va_list ap;
	int n;

	memcpy(buf, prefix, len);
	va_start(ap, fmt);
	n = vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	len += (size_t)n < sizeof(buf) - len - 2 ? (size_t)n : sizeof(buf) - len - 2;
	buf[len++] = '\n';
	(void)!write(STDERR_FILENO, buf, len);
}

static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "true"));
}

static bool debug(void)
{
	return env_true("VMNAP_PRELOAD_DEBUG");
}

static bool name_managed(const char *name)
{
	const char *want = getenv("VMNAP_MEMFD_NAME");

	if (!want || !*want)
		want = DEFAULT_MEMFD_NAME;
	return !strcmp(want, "*") || !strcmp(want, name);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoull(v, &end, 0);
	return errno || *end ? def : x;
}

int memfd_create(const char *name, unsigned int flags)
{
	static memfd_create_fn real;
	int fd;

	if (!real)
		real = (memfd_create_fn)dlsym(RTLD_NEXT, "memfd_create");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	fd = real(name, flags);
	if (fd < 0 || !name || !name_managed(name))
		return fd;
	pthread_mutex_lock(&shim.lock);
	for (unsigned int i = 0; i < shim.n; i++) {
		if (shim.fds[i].fd == fd) {	/* a closed fd's number reused */
			shim.fds[i] = shim.fds[--shim.n];
			break;
		}
	}
	if (shim.n < MAX_MEMFDS) {
		shim.fds[shim.n].fd = fd;
		snprintf(shim.fds[shim.n].name, MEMFD_NAME_MAX, "%s", name);
		shim.n++;
	}
	pthread_mutex_unlock(&shim.lock);
	if (debug())
		say("memfd_create(\"%s\") = %d: guest RAM candidate", name, fd);
	return fd;
}

/* A memfd received from another process, named as guest RAM is. */
static bool is_received_memfd(int fd)
{
	static const char prefix[] = "/memfd:", deleted[] = " (deleted)";
	char link[64], target[MEMFD_NAME_MAX + 32];
	ssize_t n;
	size_t dl = sizeof(deleted) - 1;

	if (!env_true("VMNAP_MEMFD_RECEIVED"))
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= (ssize_t)(sizeof(prefix) - 1) || strncmp(target, prefix, sizeof(prefix) - 1))
		return false;
	target[n] = 0;
	if ((size_t)n > dl && !strcmp(target + n - dl, deleted))
		target[n - dl] = 0;
	return name_managed(target + sizeof(prefix) - 1);
}

static bool is_known_memfd(int fd)
{
	bool found = false;

	pthread_mutex_lock(&shim.lock);
	for (unsigned int i = 0; i < shim.n; i++)
		found |= shim.fds[i].fd == fd;
	pthread_mutex_unlock(&shim.lock);
	return found || is_received_memfd(fd);
}

/*
 * The events vmnapd handles so that its page map follows the VMM: a range
 * the VMM discards (MADV_DONTNEED / MADV_REMOVE: QEMU's balloon and
 * virtio-mem) is zero, not restored from the store later; an unmapped
 * range (memory unplug) is no longer registered; a moved one (mremap) is
 * followed instead of silently unregistered by the kernel.  The VMM's
 * munmap/mremap/madvise of a range registered then waits until vmnapd
 * has read the event.
 */
#define WANTED_FEATURES	(UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | \
			 UFFD_FEATURE_EVENT_REMAP)

/*
 * Dirty tracking (vmnapd's pager_dirty.c): write-protect on the shmem
 * memfd (WP_HUGETLBFS_SHMEM), resolved by the kernel itself (WP_ASYNC,
 * Linux 6.7) so that a write never waits for vmnapd, and protection of
 * page table entries not populated yet (WP_UNPOPULATED).  Asked for only
 * as a whole: vmnapd checks what it got and falls back without.
 * VMNAP_UFFD_WP=sync leaves WP_ASYNC out, =none every WP feature (tests,
 * or a kernel whose WP is suspect).
 */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED	(1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC		(1 << 15)
#endif

static uint64_t wp_features(void)
{
	const char *e = getenv("VMNAP_UFFD_WP");

	if (e && !strcmp(e, "none"))
		return 0;
	if (e && !strcmp(e, "sync"))
		return UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED;
	return UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED |
	       UFFD_FEATURE_WP_ASYNC;
}

static int open_userfaultfd(void)
{
	int fd, dev;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0)
		return fd;
	do
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	while (dev < 0 && errno == EINTR);
	if (dev < 0)
		return -errno;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	close(dev);
	return fd < 0 ? -errno : fd;
}

/* UFFDIO_API asking for @features; the fd, or -errno. */
static int userfaultfd_with(uint64_t features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = open_userfaultfd();

	if (fd < 0)
		return fd;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * UFFDIO_API succeeds once per userfaultfd and fails whole when a feature
 * asked for is not offered, so: ask for the events; if refused, learn what
 * the kernel offers on a first fd (features 0 reports them) and ask for
 * the part of the events it offers on a second.
 */
static int new_userfaultfd(void)
{
	struct uffdio_api probe = { .api = UFFD_API };
	uint64_t wp = wp_features(), want;
	int fd = wp ? userfaultfd_with(WANTED_FEATURES | wp) : -EINVAL;

	if (fd >= 0)
		return fd;
	if (!wp)
		fd = userfaultfd_with(WANTED_FEATURES);
	if (fd != -EINVAL)	/* a descriptor, or an error asking less won't fix */
		return fd;
	fd = open_userfaultfd();
	if (fd < 0)
		return fd;
	if (ioctl(fd, UFFDIO_API, &probe) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	want = probe.features & WANTED_FEATURES;
	if ((probe.features & wp) == wp)
		want |= wp;
	if (debug())
		say("userfaultfd offers features %#llx; used: %#llx",
		    (unsigned long long)probe.features, (unsigned long long)want);
	return userfaultfd_with(want);
}

static bool qemu_x86_target(void)
{
	static const char *const targets[] = { "qemu-system-x86_64", "qemu-system-i386" };
	char exe[PATH_MAX];
	const char *base;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return false;
	exe[n] = 0;
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		if (!strcmp(base, targets[i]))
			return true;
	return false;
}

/* How sure the gpa of [off, off+len) is; see the top of the file. */
static const char *gpa_source(uint64_t base, off_t off, size_t len)
{
	const char *layout = getenv("VMNAP_GPA_LAYOUT");

	if (layout && !strcmp(layout, "linear"))
		return "linear";
	if (!base && (uint64_t)off + len <= X86_LINEAR_RAM_MAX && qemu_x86_target())
		return "linear";
	return "guessed";
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* connect(), retried on EINTR (an AF_UNIX connect interrupted while
 * waiting for backlog room made no connection; EISCONN: it did). */
static int connect_retry(int s, const struct sockaddr_un *sa)
{
	while (connect(s, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
		if (errno == EISCONN)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* sendmsg() of the whole message (fds ride on the first byte), retried on
 * EINTR and continued after a short send.  0 or -errno. */
static int send_all(int s, struct msghdr *mh, const char *buf, size_t len)
{
	size_t sent = 0;

	while (sent < len) {
		ssize_t r = sent ? send(s, buf + sent, len - sent, MSG_NOSIGNAL) :
				   sendmsg(s, mh, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r ? -errno : -EPIPE;
		sent += (size_t)r;
	}
	return 0;
}

/* recv() into @buf until a newline, EOF or @deadline_ns; retried on EINTR.
 * Bytes received, or -errno (-ETIMEDOUT, -ECONNRESET for EOF). */
static ssize_t recv_line(int s, char *buf, size_t max, uint64_t deadline_ns)
{
	size_t got = 0;

	while (got < max && !memchr(buf, '\n', got)) {
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		uint64_t now = mono_ns();
		ssize_t r;
		int n;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			continue;	/* the deadline check above ends it */
		r = recv(s, buf + got, max - got, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return -ECONNRESET;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Send the region; wait for vmnapd's one-line answer.  Returns the
 * connected socket (kept open) or -errno with @why filled. */
static int handshake(int uffd, int memfd, uint64_t addr, size_t len,
		     off_t off, char *store_id, char *why, size_t whylen)
{
	const char *path = getenv("VMNAP_SOCKET");
	const char *vm = getenv("VMNAP_VM");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char json[JSON_MAX], vmbuf[32], answer[512], idfield[STORE_ID_LEN + 16] = "";
	const char *id;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	int fds[2] = { uffd, memfd };
	struct iovec iov;
	struct msghdr mh = { 0 };
	struct cmsghdr *c;
	ssize_t got;
	uint64_t base = env_u64("VMNAP_GPA_BASE", 0);
	int s, n, err;

	if (!path || !*path)
		path = DEFAULT_SOCKET;
	if (!vm || !*vm) {
		snprintf(vmbuf, sizeof(vmbuf), "qemu-%d", (int)getpid());
		vm = vmbuf;
	}
	if (*store_id)	/* memory handed before: the store to adopt */
		snprintf(idfield, sizeof(idfield), ",\"store_id\":\"%s\"", store_id);
	n = snprintf(json, sizeof(json),
		     "{\"vm\":\"%s\",\"uffd\":0,\"regions\":[{\"base_host_virt_addr\":%llu,"
		     "\"size\":%llu,\"offset\":%llu,\"page_size\":%ld,\"gpa\":%llu,"
		     "\"memfd\":1}],\"gpa_source\":\"%s\"%s}",
		     vm, (unsigned long long)addr, (unsigned long long)len,
		     (unsigned long long)off, sysconf(_SC_PAGESIZE),
		     (unsigned long long)(base + (uint64_t)off), gpa_source(base, off, len),
		     idfield);
	if (n < 0 || (size_t)n >= sizeof(json) || strchr(vm, '"') || strchr(vm, '\\')) {
		snprintf(why, whylen, "bad VMNAP_VM");
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "socket path too long");
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	err = s < 0 ? -errno : connect_retry(s, &sa);
	if (err) {
		snprintf(why, whylen, "connect %s: %s", path, strerror(-err));
		if (s >= 0)
			close(s);
		return err;
	}
	iov.iov_base = json;
	iov.iov_len = (size_t)n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	err = send_all(s, &mh, json, (size_t)n);
	if (err) {
		snprintf(why, whylen, "send: %s", strerror(-err));
		close(s);
		return -EIO;
	}
	got = recv_line(s, answer, sizeof(answer) - 1,
			mono_ns() + REPLY_TIMEOUT_MS * NS_PER_MS);
	if (got < 0) {
		snprintf(why, whylen, "no answer from vmnapd: %s",
			 got == -ECONNRESET ? "connection closed" : strerror((int)-got));
		close(s);
		return -EIO;
	}
	answer[got] = 0;
	if (!strstr(answer, "\"ok\":true")) {
		snprintf(why, whylen, "vmnapd refused: %.300s", answer);
		close(s);
		return -EPERM;
	}
	id = strstr(answer, "\"store_id\":\"");
	if (id && strlen(id) > 12 + STORE_ID_LEN && id[12 + STORE_ID_LEN] == '"') {
		memcpy(store_id, id + 12, STORE_ID_LEN);
		store_id[STORE_ID_LEN] = 0;
	}
	return s;
}

/* ------------------------------------------------------------ reconnect */

/* A guest RAM mapping handed to vmnapd; the fds are the shim's own. */
struct mapping {
	int uffd, memfd, sock;	/* sock -1: not connected */
	uint64_t addr;
	size_t len;
	off_t off;
	char store_id[STORE_ID_LEN + 1];
	uint64_t next_try_ns;
	unsigned int backoff_ms;
	char last_why[400];
};

static struct {
	pthread_mutex_t lock;
	struct mapping m[MAX_MAPPINGS];
	unsigned int n;
	int wake[2];		/* pipe: a mapping was added */
	bool thread;
} maps = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 } };

/* The connection of @m ended: vmnapd is gone. */
static void mapping_lost(struct mapping *m)
{
	close(m->sock);
	m->sock = -1;
	m->backoff_ms = RECONNECT_MIN_MS;
	m->next_try_ns = mono_ns() + RECONNECT_MIN_MS * NS_PER_MS;
	m->last_why[0] = 0;
	say("lost vmnapd (guest RAM %#llx+%zu): threads touching evicted pages wait; "
	    "handing it over again when vmnapd is back", (unsigned long long)m->addr, m->len);
}

static void mapping_retry(struct mapping *m)
{
	char why[400];
	int s = handshake(m->uffd, m->memfd, m->addr, m->len, m->off, m->store_id,
			  why, sizeof(why));

	if (s >= 0) {
		m->sock = s;
		say("guest RAM %#llx+%zu handed to vmnapd again (store %s)",
		    (unsigned long long)m->addr, m->len, m->store_id[0] ? m->store_id : "new");
		return;
	}
	if (strcmp(why, m->last_why)) {	/* each new reason once */
		say("cannot hand guest RAM to vmnapd yet: %s; retrying", why);
		snprintf(m->last_why, sizeof(m->last_why), "%s", why);
	}
	m->next_try_ns = mono_ns() + m->backoff_ms * NS_PER_MS;
	m->backoff_ms = m->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS :
			m->backoff_ms * 2;
}

/*
 * Entries [0, maps.n) belong to this thread once added (mapping_add only
 * appends, under the lock), so it handshakes without holding the lock: a
 * VMM thread mapping more RAM meanwhile is not held up.
 */
static void *reconnect_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pfd[MAX_MAPPINGS + 1];
		unsigned int idx[MAX_MAPPINGS + 1], n = 0, nmaps;
		uint64_t now = mono_ns(), next = UINT64_MAX;
		int timeout;

		pthread_mutex_lock(&maps.lock);
		nmaps = maps.n;
		pthread_mutex_unlock(&maps.lock);
		pfd[n++] = (struct pollfd){ .fd = maps.wake[0], .events = POLLIN };
		for (unsigned int i = 0; i < nmaps; i++) {
			struct mapping *m = &maps.m[i];

			if (m->sock < 0 && m->next_try_ns <= now)
				mapping_retry(m);
			if (m->sock >= 0) {
				idx[n] = i;
				pfd[n++] = (struct pollfd){ .fd = m->sock,
							    .events = POLLIN | POLLRDHUP };
			} else if (m->next_try_ns < next) {
				next = m->next_try_ns;
			}
		}
		now = mono_ns();
		timeout = next == UINT64_MAX ? -1 : next <= now ? 0 :
			  (int)((next - now + NS_PER_MS - 1) / NS_PER_MS);
		if (poll(pfd, n, timeout) <= 0)
			continue;
		if (pfd[0].revents) {
			char sink[16];

			(void)!read(maps.wake[0], sink, sizeof(sink));
		}
		for (unsigned int k = 1; k < n; k++) {
			struct mapping *m = &maps.m[idx[k]];
			char sink[256];
			ssize_t r;

			if (!pfd[k].revents)
				continue;
			r = recv(m->sock, sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				mapping_lost(m);
		}
	}
	return NULL;
}

/* Remember a mapping handed over (dups of its fds) and watch it. */
static void mapping_add(int uffd, int memfd, int sock, uint64_t addr, size_t len,
			off_t off, const char *store_id)
{
	struct mapping *m;
	int mfd;

	pthread_mutex_lock(&maps.lock);
	if (maps.n == MAX_MAPPINGS) {
		pthread_mutex_unlock(&maps.lock);
		say("WARNING: more than %d guest RAM mappings: this one is not handed "
		    "over again if vmnapd restarts", MAX_MAPPINGS);
		return;
	}
	mfd = fcntl(memfd, F_DUPFD_CLOEXEC, 3);	/* the VMM may close its own */
	if (mfd < 0) {
		pthread_mutex_unlock(&maps.lock);
		say("WARNING: dup memfd: %s: not handed over again if vmnapd restarts",
		    strerror(errno));
		return;
	}
	m = &maps.m[maps.n++];
	*m = (struct mapping){ .uffd = uffd, .memfd = mfd, .sock = sock, .addr = addr,
			       .len = len, .off = off };
	snprintf(m->store_id, sizeof(m->store_id), "%s", store_id);
	if (!maps.thread) {
		sigset_t all, old;
		pthread_t t;

		if (maps.wake[0] < 0 && pipe2(maps.wake, O_CLOEXEC | O_NONBLOCK) < 0)
			say("WARNING: pipe: %s", strerror(errno));
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);	/* the VMM's signals */
		maps.thread = !pthread_create(&t, NULL, reconnect_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (maps.thread)
			pthread_detach(t);
		else
			say("WARNING: no reconnect thread: guest RAM is not handed over "
			    "again if vmnapd restarts");
	}
	pthread_mutex_unlock(&maps.lock);
	if (maps.wake[1] >= 0)
		(void)!write(maps.wake[1], "x", 1);
}

/*
 * Is @fd guest RAM by what /proc/self/fd says: a memfd of a managed name
 * (a VMM that creates it with the raw syscall, as Cloud Hypervisor does,
 * bypasses memfd_create() above), or a file under VMNAP_MEM_PATH (QEMU's
 * mem-path)?
 */
static bool guest_ram_link(int fd)
{
	const char *want = getenv("VMNAP_MEM_PATH"), *del = " (deleted)", *pfx = "/memfd:";
	char link[32], path[PATH_MAX];
	size_t wl, dl = strlen(del);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return false;
	path[n] = 0;
	if ((size_t)n > dl && !strcmp(path + n - dl, del))	/* unlinked: memfds, QEMU's */
		path[n - dl] = 0;
	if (!strncmp(path, pfx, strlen(pfx)))
		return name_managed(path + strlen(pfx));
	if (!want || !*want)
		return false;
	wl = strlen(want);
	while (wl > 1 && want[wl - 1] == '/')
		wl--;
	return !strncmp(path, want, wl) && (path[wl] == 0 || path[wl] == '/');
}

/* Guest RAM must be shmem; 0, or -errno with @why filled. */
static int ram_fs_check(int fd, char *why, size_t n)
{
	struct statfs sf;
	struct stat st;

	if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0) {
		snprintf(why, n, "fstatfs: %s", strerror(errno));
		return -errno;
	}
	if ((unsigned long)sf.f_type == HUGETLBFS_MAGIC) {
		snprintf(why, n, "guest RAM is on hugetlbfs (%ld KiB pages: hugetlb=on or a "
			 "hugetlbfs mem-path), which vmnapd does not support: it serves and "
			 "evicts 4 KiB pages; use memory-backend-memfd or a tmpfs mem-path "
			 "(/dev/shm) with share=on", (long)sf.f_bsize / 1024);
		return -EOPNOTSUPP;
	}
	if ((unsigned long)sf.f_type != TMPFS_MAGIC || !S_ISREG(st.st_mode)) {
		snprintf(why, n, "guest RAM is not a shmem file (file system magic %#lx): "
			 "userfaultfd cannot serve it; use memory-backend-memfd or a tmpfs "
			 "mem-path (/dev/shm) with share=on", (unsigned long)sf.f_type);
		return -EOPNOTSUPP;
	}
	return 0;
}

static void *managed_mmap(mmap_fn real, void *addr, size_t len, int prot,
			  int flags, int fd, off_t off)
{
	char why[400], store_id[STORE_ID_LEN + 1] = "";
	void *p = MAP_FAILED;
	bool unsupported;
	int uffd = -1, s;

	if (fd < 0 || !(flags & MAP_SHARED) ||
	    len < env_u64("VMNAP_MIN_BYTES", DEFAULT_MIN_BYTES) ||
	    (!is_known_memfd(fd) && !guest_ram_link(fd)))
		return real(addr, len, prot, flags, fd, off);
	/* before mapping: a huge-page mapping may not even be possible */
	s = ram_fs_check(fd, why, sizeof(why));
	unsupported = s != 0;
	if (unsupported)
		goto refused;
	p = real(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return p;
	uffd = new_userfaultfd();
	if (uffd < 0) {
		snprintf(why, sizeof(why), "userfaultfd: %s", strerror(-uffd));
		s = uffd;
	} else {
		s = handshake(uffd, fd, (uint64_t)(uintptr_t)p, len, off, store_id,
			      why, sizeof(why));
	}
	if (s >= 0) {
		/* keep uffd and s open: our copy, and the mapper's lifetime */
		if (debug())
			say("guest RAM %p+%zu (memfd %d) handed to vmnapd", p, len, fd);
		mapping_add(uffd, fd, s, (uint64_t)(uintptr_t)p, len, off, store_id);
		return p;
	}
	if (uffd >= 0)
		close(uffd);
refused:
	if (env_true("VMNAP_ALLOW_UNMANAGED")) {
		say("WARNING: %s; running UNMANAGED (VMNAP_ALLOW_UNMANAGED=1)", why);
		return p != MAP_FAILED ? p : real(addr, len, prot, flags, fd, off);
	}
	say("ERROR: cannot hand guest RAM to vmnapd: %s. %s, or set VMNAP_ALLOW_UNMANAGED=1 "
	    "to run without it.", why, unsupported ? "Change the VMM's memory backend" :
	    "Start vmnapd");
	if (p != MAP_FAILED)
		munmap(p, len);
	errno = unsupported ? EOPNOTSUPP : ECONNREFUSED;
	return MAP_FAILED;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static mmap_fn real;

	if (!real)
		real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
	return managed_mmap(real, addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static mmap_fn real;

	if (!real)
		real = (mmap_fn)dlsym(RTLD_NEXT, "mmap64");
	return managed_mmap(real, addr, len, prot, flags, fd, off);
}
