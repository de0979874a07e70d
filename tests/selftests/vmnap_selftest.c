// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnap_selftest - in-guest selftests of vmnap.ko (TAP, kselftest style).
 *
 * Runs inside the QEMU guest as root.  Loads the module through libkmod
 * with host_cid=1 (vsock loopback) and plays the host with a scripted peer
 * (vmnap_peer.h); reads the module's state over generic netlink.  Covers
 * HELLO, idle READY evidence, resume, abort, fail-safe, busy guests (CPU,
 * writeback, block I/O), quiesce holding block I/O without loss, link loss
 * mid-handoff, hostile host messages, free page reporting (reports held
 * while unanswered, across a link loss until a new session) and unloading
 * in each state.  Block tests need a virtio disk at /dev/vda that may be
 * overwritten (skipped without one).
 *
 *   vmnap_selftest                   the whole suite
 *   vmnap_selftest --serve SECONDS   only play an idle host for SECONDS
 *                                    (module loaded by the caller)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kmod/tools/vmnap_client.h"
#include "tap.h"
#include "vmnap_peer.h"

#define PORT		5151
#define DISK		"/dev/vda"
/*
 * TCG on a shared 2-core machine: a vCPU thread preempted on the host while
 * the guest runs counts as guest busy time, so an idle guest reads 600..990
 * per mille of a 10 ms window.  The threshold is KUnit-tested; here a CPU
 * hog (~0) must still read busy and an idle guest ready.
 */
#define MIN_IDLE_PERMILLE	500
#define PARAMS		"host_cid=1 port=5151 test_hooks=1 reconnect_min_ms=50 " \
			"reconnect_max_ms=400 min_idle_permille=500"
#define IO_CHUNK	(256 * 1024)
#define FILL_MIB	96

static struct peer peer;
static uint64_t next_req = 1;

static int status(struct vmnap_status *st)
{
	return vmnap_client_cmd(VMNAP_CMD_GET_STATUS, st);
}

/* Poll the module's status until @pred holds or @ms pass. */
static bool wait_status(bool (*pred)(const struct vmnap_status *), int ms,
			struct vmnap_status *st)
{
	long end = peer_now_ms() + ms;

	do {
		if (!status(st) && pred(st))
			return true;
		usleep(20000);
	} while (peer_now_ms() < end);
	return false;
}

static bool link_up(const struct vmnap_status *st) { return st->link == 2; }
static bool released(const struct vmnap_status *st) { return st->handoff == 0; }

static void set_param(const char *name, const char *val)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/vmnap/parameters/%s", name);
	f = fopen(path, "w");
	if (f) {
		fputs(val, f);
		fclose(f);
	}
}

static bool have_disk(void)
{
	struct stat s;

	return !stat(DISK, &s) && S_ISBLK(s.st_mode);
}

static unsigned int possible_cpus(void)
{
	unsigned int a, b, n = 0;
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	int c;

	if (!f)
		return 0;
	while (fscanf(f, "%u", &a) == 1) {
		b = a;
		c = fgetc(f);
		if (c == '-') {
			if (fscanf(f, "%u", &b) != 1)
				break;
			c = fgetc(f);
		}
		n += b - a + 1;
		if (c != ',')
			break;
	}
	fclose(f);
	return n;
}

/* Virtio block disks and net devices a quiesce should hold. */
static unsigned int virtio_devices(void)
{
	FILE *p = popen("ls -d /sys/bus/virtio/drivers/virtio_blk/virtio*/block/* "
			"/sys/bus/virtio/drivers/virtio_net/virtio*/net/* 2>/dev/null | wc -l",
			"r");
	unsigned int n = 0;

	if (p) {
		if (fscanf(p, "%u", &n) != 1)
			n = 0;
		pclose(p);
	}
	return n;
}

/* Every HELLO range lies inside a top-level "System RAM" of /proc/iomem. */
static bool ranges_in_iomem(void)
{
	unsigned int i;
	bool ok = true;

	for (i = 0; i < peer.nram && ok; i++) {
		uint64_t gpa = vmnap_le64(peer.ram[i].gpa);
		uint64_t end = gpa + vmnap_le64(peer.ram[i].len) - 1;
		unsigned long long s, e;
		char line[256];
		bool found = false;
		FILE *f = fopen("/proc/iomem", "r");

		if (!f)
			return false;
		while (fgets(line, sizeof(line), f)) {
			if (line[0] == ' ' || !strstr(line, "System RAM"))
				continue;
			if (sscanf(line, "%llx-%llx", &s, &e) == 2 &&
			    gpa >= s && end <= e)
				found = true;
		}
		fclose(f);
		ok = found;
	}
	return ok;
}

static pid_t spawn(void (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static void *aligned_buf(size_t len, int fill)
{
	void *b = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return NULL;
	memset(b, fill, len);
	return b;
}

/* ---- children ---------------------------------------------------------- */

static void cpu_hog(void *arg)
{
	volatile unsigned long x = 0;

	(void)arg;
	for (;;)
		x++;
}

static void direct_writer(void *arg)
{
	void *b = aligned_buf(IO_CHUNK, 0x5a);
	int fd = open(DISK, O_WRONLY | O_DIRECT);
	off_t off = (off_t)(uintptr_t)arg * IO_CHUNK * 16;

	if (fd < 0 || !b)
		_exit(1);
	for (;;)
		if (pwrite(fd, b, IO_CHUNK, off) < 0)
			_exit(1);
}

static void held_write(void *arg)
{
	void *b = aligned_buf(IO_CHUNK, 0xa5);
	int fd = open(DISK, O_WRONLY | O_DIRECT);

	(void)arg;
	if (fd < 0 || !b || pwrite(fd, b, IO_CHUNK, 1 << 20) != IO_CHUNK ||
	    fsync(fd))
		_exit(1);
	_exit(0);
}

static int fill_pipe[2];

/*
 * Write @arg MiB through the page cache and keep the device open: the last
 * close of a block device syncs it, which would clean the pages at once.
 */
static void buffered_fill(void *arg)
{
	size_t mib = (size_t)(uintptr_t)arg, i;
	char *b = malloc(1 << 20);
	int fd = open(DISK, O_WRONLY);

	if (fd < 0 || !b)
		_exit(1);
	memset(b, 0x3c, 1 << 20);
	for (i = 0; i < mib; i++)
		if (pwrite(fd, b, 1 << 20, (off_t)(8 + i) << 20) < 0)
			_exit(1);
	if (write(fill_pipe[1], "x", 1) != 1)
		_exit(1);
	pause();	/* no fsync, no close: leave it dirty */
	_exit(0);
}

/* Write @val to the sysctl file @path; the old value, or -1. */
static long sysctl_set(const char *path, long val)
{
	FILE *f = fopen(path, "r+");
	long old = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &old) != 1)
		old = -1;
	rewind(f);
	fprintf(f, "%ld\n", val);
	if (fclose(f))
		old = -1;
	return old;
}

static void touch_memory(void *arg)
{
	size_t len = (size_t)(uintptr_t)arg << 20, i;
	unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		_exit(1);
	for (i = 0; i < len; i += 4096)
		m[i] = (unsigned char)(i >> 12);
	for (i = 0; i < len; i += 4096)
		if (m[i] != (unsigned char)(i >> 12))
			_exit(2);
	_exit(0);
}

static int wait_exit(pid_t pid, int ms)
{
	long end = peer_now_ms() + ms;
	int st;

	do {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		usleep(20000);
	} while (peer_now_ms() < end);
	return -ETIMEDOUT;
}

/* ---- tests -------------------------------------------------------------- */

static bool handoff(uint64_t *id, struct vmnap_handoff_ack *ack)
{
	*id = next_req++;
	return !peer_handoff(&peer, *id, ack);
}

static void describe(const char *what, const struct vmnap_handoff_ack *a);

/*
 * A handoff the idle guest should accept.  Activity of the test itself
 * (console output under TCG, the previous step) can keep a CPU busy for a
 * moment, so a BUSY answer is retried a few times; each is logged.
 */
#define READY_ATTEMPTS	8
static bool ready_handoff(uint64_t *id, struct vmnap_handoff_ack *a)
{
	int i;

	for (i = 0; i < READY_ATTEMPTS; i++) {
		if (!handoff(id, a))
			return false;
		if (vmnap_le32(a->verdict) == VMNAP_READY)
			return true;
		describe("not ready yet", a);
		usleep(300000);
	}
	return false;
}

static void describe(const char *what, const struct vmnap_handoff_ack *a)
{
	tap_diag("%s: verdict %u busy 0x%x idle %u runnable %u io %u wb %llu dirty %llu timer %lld known %u devs %u",
	         what, vmnap_le32(a->verdict), vmnap_le32(a->ev.busy_reasons),
	         vmnap_le32(a->ev.cpu_idle_permille), vmnap_le32(a->ev.nr_runnable),
	         vmnap_le32(a->ev.io_inflight),
	         (unsigned long long)vmnap_le64(a->ev.writeback_pages),
	         (unsigned long long)vmnap_le64(a->ev.dirty_pages),
	         (long long)vmnap_le64(a->ev.next_timer_ns),
	         vmnap_le32(a->ev.flags), vmnap_le32(a->ev.devices_quiesced));
}

static void test_hello(void)
{
	struct vmnap_hello h;
	struct vmnap_status st;
	int ret = peer_handshake(&peer, 10000, &h, 42);
	bool ok;

	tap(!ret, "module connects and says HELLO%s%s", ret ? " # " : "",
	    ret ? strerror(-ret) : "");
	if (ret)
		return;
	ok = vmnap_le32(h.nr_cpus) == possible_cpus() &&
	     vmnap_le32(h.page_size) == 4096 && h.module_version[0] &&
	     (vmnap_le32(h.features) & VMNAP_F_QUIESCE) && peer.nram > 0;
	tap_diag("HELLO: cpus %u page %u version %s features 0x%x ranges %u",
	         vmnap_le32(h.nr_cpus), vmnap_le32(h.page_size), h.module_version,
	         vmnap_le32(h.features), peer.nram);
	tap(ok, "HELLO: cpus, page size, version, features");
	tap(ranges_in_iomem(), "HELLO: RAM ranges are System RAM of /proc/iomem");
	ok = wait_status(link_up, 3000, &st) && st.vm_id == 42 &&
	     st.host_features == peer.offered &&
	     !!(peer.offered & VMNAP_F_FREE_REPORT) == !!st.free_reporting;
	tap(ok, "HELLO_ACK accepted: link up, vm id, features");
}

static void test_idle_ready(void)
{
	struct vmnap_handoff_ack a;
	struct vmnap_status st;
	uint64_t id, t;
	bool ok;

	sync();
	usleep(300000);
	ok = ready_handoff(&id, &a);
	describe("idle", &a);
	t = vmnap_le64(a.ev.next_timer_ns);
	tap(ok && vmnap_le32(a.verdict) == VMNAP_READY, "idle guest: READY");
	tap(ok && (vmnap_le32(a.ev.flags) & VMNAP_EV_TIMER_KNOWN) &&
	    t != VMNAP_TIMER_UNKNOWN && t > 0,
	    "idle guest: finite, known next timer");
	tap(ok && vmnap_le32(a.ev.cpu_idle_permille) >= MIN_IDLE_PERMILLE &&
	    !vmnap_le32(a.ev.nr_runnable) && !vmnap_le32(a.ev.io_inflight) &&
	    vmnap_le64(a.ev.window_ns) > 0,
	    "idle guest: plausible evidence");
	tap(ok && vmnap_le32(a.ev.devices_quiesced) == virtio_devices(),
	    "every virtio disk and NIC quiesced");
	ok = !status(&st) && st.handoff == 1;
	tap(ok, "netlink: handoff held");
	tap_diag("samples %llu, sampling CPU's timer wheel unseen in %llu",
	         (unsigned long long)(st.ctr[VMNAP_CTR_HANDOFFS] + st.ctr[VMNAP_CTR_READY]),
	         (unsigned long long)st.ctr[VMNAP_CTR_TIMER_WHEEL_BLIND]);
	/* a known budget implies the sampling CPU's wheel was seen */
	tap(ok && st.ctr[VMNAP_CTR_TIMER_WHEEL_BLIND] <
		  st.ctr[VMNAP_CTR_HANDOFFS] + st.ctr[VMNAP_CTR_READY],
	    "the sampling CPU's timer wheel is seen");
	ok = !peer_resumed(&peer, id) && !status(&st) && st.handoff == 0 &&
	     st.ctr[VMNAP_CTR_UNQ_RESUMED] == 1 && st.quiesced_devs == 0;
	tap(ok, "RESUMED releases devices and is acked");
}

static void sleeper(void *arg)
{
	struct timespec ts = { .tv_sec = (time_t)(uintptr_t)arg };

	nanosleep(&ts, NULL);
}

/* A process sleeping for 2 s arms an hrtimer: the budget must see it. */
static void test_timer_budget(void)
{
	struct vmnap_handoff_ack a;
	const uint64_t limit = 2000000000ULL;
	uint64_t id, t = 0;
	pid_t pid = spawn(sleeper, (void *)(uintptr_t)2);
	bool ok;

	usleep(100000);
	ok = ready_handoff(&id, &a);
	if (ok) {
		t = vmnap_le64(a.ev.next_timer_ns);
		peer_resumed(&peer, id);
	}
	tap_diag("next timer with a 2 s sleeper: %llu ns", (unsigned long long)t);
	tap(ok && (vmnap_le32(a.ev.flags) & VMNAP_EV_TIMER_KNOWN) &&
	    t > 0 && t < limit, "next timer accounts for a sleeping process");
	reap(pid);
}

/*
 * recv() with SO_RCVTIMEO sleeps in schedule_timeout(): a timer-wheel
 * timer, not an hrtimer (nanosleep, poll and select timeouts are
 * hrtimers).  Re-armed in a loop, so one is always pending, due within
 * WHEEL_SLEEP_MS: shorter than what an idle guest's hrtimers alone give
 * (hundreds of ms to seconds), so a budget that missed the wheel shows.
 * On one vCPU it sits on the sampling CPU's wheel.
 */
#define WHEEL_SLEEP_MS		40
#define WHEEL_SLACK_MS		8	/* two jiffies at HZ=250 */
#define WHEEL_ATTEMPTS		4
static void wheel_sleeper(void *arg __attribute__((unused)))
{
	struct timeval tv = { .tv_usec = WHEEL_SLEEP_MS * 1000 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	char b;

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		_exit(1);
	for (;;)
		recv(fd, &b, 1, 0);
}

/* A budget that is known must not reach past a pending wheel timer. */
static void test_wheel_budget(void)
{
	struct vmnap_handoff_ack a;
	const uint64_t limit = (WHEEL_SLEEP_MS + WHEEL_SLACK_MS) * 1000000ULL;
	uint64_t id, t = VMNAP_TIMER_UNKNOWN;
	pid_t pid = spawn(wheel_sleeper, NULL);
	bool ok = false, known = false;
	int i;

	usleep(100000);
	/* known in every answer; retried only for an unknown one */
	for (i = 0; i < WHEEL_ATTEMPTS && !known; i++) {
		ok = handoff(&id, &a);
		if (!ok)
			break;
		t = vmnap_le64(a.ev.next_timer_ns);
		known = vmnap_le32(a.ev.flags) & VMNAP_EV_TIMER_KNOWN;
		if (vmnap_le32(a.verdict) == VMNAP_READY)
			peer_resumed(&peer, id);
		tap_diag("next timer with a %d ms timer-wheel sleeper: %llu ns, known %d",
		         WHEEL_SLEEP_MS, (unsigned long long)t, known);
		if (!known)
			usleep(300000);
	}
	tap(ok && known && t <= limit,
	    "next timer accounts for a timer-wheel sleeper");
	kill(pid, SIGKILL);
	reap(pid);
}

static void test_abort_and_state(void)
{
	struct vmnap_handoff_ack a, b;
	struct vmnap_handoff_abort ab;
	struct vmnap_status st;
	uint64_t id, id2;
	bool ok = ready_handoff(&id, &a);

	ok = ok && handoff(&id2, &b) && vmnap_le32(b.verdict) == VMNAP_BUSY &&
	     vmnap_le32(b.ev.busy_reasons) == VMNAP_BUSY_STATE;
	tap(ok, "second handoff while held: BUSY(STATE)");
	ab.req_id = vmnap_cpu64(id);
	peer_send(&peer, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	ok = wait_status(released, 3000, &st) && st.ctr[VMNAP_CTR_UNQ_ABORT] == 1;
	tap(ok, "HANDOFF_ABORT releases devices");
	peer_send(&peer, VMNAP_HANDOFF_ABORT, &ab, sizeof(ab));
	usleep(200000);
	ok = !status(&st) && st.ctr[VMNAP_CTR_STALE] == 1 && st.link == 2;
	tap(ok, "stale HANDOFF_ABORT counted, link kept");
}

static void test_failsafe(void)
{
	struct vmnap_handoff_ack a;
	struct vmnap_status st;
	uint64_t id;
	bool ok = ready_handoff(&id, &a);
	uint8_t junk[64];

	/* the host goes silent: no pause, no resume */
	peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 1500);
	ok = ok && !status(&st) && st.handoff == 0 &&
	     st.ctr[VMNAP_CTR_UNQ_FAILSAFE] == 1;
	tap(ok, "fail-safe releases devices when the host is silent");
	/* not at the first expiry: a RESUMED may have been on its way */
	tap(!status(&st) && st.ctr[VMNAP_CTR_FAILSAFE_GRACE] + st.ctr[VMNAP_CTR_FAILSAFE_FROZEN] >= 1,
	    "fail-safe waited for a RESUMED once before releasing");
	tap(!peer_resumed(&peer, id), "late RESUMED after fail-safe still acked");
}

static void test_quiesce_holds_io(void)
{
	struct vmnap_handoff_ack a;
	void *b;
	pid_t pid;
	uint64_t id;
	bool held, ok;
	int fd, rc;

	if (!have_disk()) {
		tap_skip("quiesce holds block I/O until resume", "no " DISK);
		tap_skip("data written during quiesce is intact", "no " DISK);
		return;
	}
	set_param("failsafe_ms", "5000");
	ok = ready_handoff(&id, &a);
	pid = spawn(held_write, NULL);
	rc = wait_exit(pid, 700);
	held = ok && rc == -ETIMEDOUT;
	ok = !peer_resumed(&peer, id);
	rc = wait_exit(pid, 10000);
	tap(held && ok && rc == 0, "quiesce holds block I/O until resume");
	if (rc == -ETIMEDOUT)
		reap(pid);
	set_param("failsafe_ms", "500");

	b = aligned_buf(IO_CHUNK, 0);
	fd = open(DISK, O_RDONLY | O_DIRECT);
	ok = b && fd >= 0 && pread(fd, b, IO_CHUNK, 1 << 20) == IO_CHUNK;
	if (ok) {
		unsigned char *c = b;
		size_t i;

		for (i = 0; i < IO_CHUNK && ok; i++)
			ok = c[i] == 0xa5;
	}
	if (fd >= 0)
		close(fd);
	tap(ok, "data written during quiesce is intact");
}

static void test_busy(void)
{
	struct vmnap_handoff_ack a;
	pid_t pids[4];
	uint64_t id;
	bool ok, io = false, all_busy = true;
	unsigned int i, busy;
	long bg_ratio, ratio;
	int fd;

	pids[0] = spawn(cpu_hog, NULL);
	usleep(200000);
	ok = handoff(&id, &a);
	describe("cpu hog", &a);
	reap(pids[0]);
	busy = vmnap_le32(a.ev.busy_reasons);
	tap(ok && vmnap_le32(a.verdict) == VMNAP_BUSY &&
	    (busy & VMNAP_BUSY_CPU) && (busy & VMNAP_BUSY_RUNNABLE),
	    "CPU hog: BUSY(CPU, RUNNABLE)");

	if (!have_disk()) {
		tap_skip("heavy writeback: BUSY(WRITEBACK)", "no " DISK);
		tap_skip("block I/O in flight: BUSY(IO)", "no " DISK);
		return;
	}
	/* The flusher must not write the fill back before the handoff looks:
	 * background writeback starts at 10% of free memory by default (about
	 * 20 MiB here) and clears 48 MiB in well under a second of a fast
	 * host disk.  Dirty pages then wait for their 30 s expiry. */
	bg_ratio = sysctl_set("/proc/sys/vm/dirty_background_ratio", 80);
	ratio = sysctl_set("/proc/sys/vm/dirty_ratio", 90);
	ok = !pipe(fill_pipe) && bg_ratio >= 0 && ratio >= 0;
	pids[0] = spawn(buffered_fill, (void *)(uintptr_t)48);
	{
		struct pollfd pf = { .fd = fill_pipe[0], .events = POLLIN };

		ok = ok && poll(&pf, 1, 60000) == 1;
	}
	ok = ok && handoff(&id, &a);
	reap(pids[0]);
	close(fill_pipe[0]);
	close(fill_pipe[1]);
	describe("writeback", &a);
	busy = vmnap_le32(a.ev.busy_reasons);
	tap(ok && vmnap_le32(a.verdict) == VMNAP_BUSY &&
	    (busy & VMNAP_BUSY_WRITEBACK), "heavy writeback: BUSY(WRITEBACK)");
	fd = open(DISK, O_WRONLY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	if (ratio >= 0)
		sysctl_set("/proc/sys/vm/dirty_ratio", ratio);
	if (bg_ratio >= 0)
		sysctl_set("/proc/sys/vm/dirty_background_ratio", bg_ratio);

	for (i = 0; i < 4; i++)
		pids[i] = spawn(direct_writer, (void *)(uintptr_t)i);
	usleep(300000);
	for (i = 0; i < 5 && !io; i++) {
		ok = handoff(&id, &a);
		describe("direct I/O", &a);
		if (!ok || vmnap_le32(a.verdict) != VMNAP_BUSY)
			all_busy = false;
		if (vmnap_le32(a.verdict) == VMNAP_READY)
			peer_resumed(&peer, id);
		io = ok && (vmnap_le32(a.ev.busy_reasons) & VMNAP_BUSY_IO);
	}
	for (i = 0; i < 4; i++)
		reap(pids[i]);
	tap(io && all_busy, "block I/O in flight: BUSY(IO)");
}

static void test_hostile(void)
{
	struct vmnap_status st0, st;
	struct vmnap_resumed r = { .reason = vmnap_cpu32(VMNAP_RESUME_TIMER) };
	struct vmnap_resume_ack ra = { 0 };
	struct vmnap_ping ping = { .token = vmnap_cpu64(99) }, pong;
	struct vmnap_handoff_req req = {
		.req_id = vmnap_cpu64(1000), .ack_deadline_ms = vmnap_cpu32(100),
	};
	uint8_t garbage[32];
	int code;
	bool ok;

	status(&st0);
	peer_send(&peer, VMNAP_HANDOFF_ABORT, &r, 4);
	code = peer_expect_error(&peer, 3000);
	tap(code == VMNAP_ELEN, "wrong payload length: ERROR(ELEN)");
	r.req_id = vmnap_cpu64(777777);
	peer_send(&peer, VMNAP_RESUMED, &r, sizeof(r));
	code = peer_expect_error(&peer, 3000);
	tap(code == VMNAP_ESTATE, "RESUMED for an unknown request: ERROR(ESTATE)");
	peer_send(&peer, VMNAP_RESUME_ACK, &ra, sizeof(ra));
	code = peer_expect_error(&peer, 3000);
	tap(code == VMNAP_ETYPE, "guest-only type from the host: ERROR(ETYPE)");
	r.req_id = 0;
	r.reason = vmnap_cpu32(99);
	peer_send(&peer, VMNAP_RESUMED, &r, sizeof(r));
	code = peer_expect_error(&peer, 3000);
	tap(code == VMNAP_EFIELD, "field out of range: ERROR(EFIELD)");
	peer_send(&peer, VMNAP_PING, &ping, sizeof(ping));
	ok = peer_recv(&peer, VMNAP_PONG, &pong, sizeof(pong), 3000) == sizeof(pong) &&
	     pong.token == ping.token && !status(&st) && st.link == 2 &&
	     st.ctr[VMNAP_CTR_RX_BAD] >= st0.ctr[VMNAP_CTR_RX_BAD] + 3;
	tap(ok, "link survives rejected messages (PING answered)");

	memset(garbage, 0xee, sizeof(garbage));
	peer_send_raw(&peer, garbage, sizeof(garbage));
	ok = peer_recv(&peer, VMNAP_PONG, &pong, sizeof(pong), 5000) == -ECONNRESET;
	ok = ok && !status(&st) && st.ctr[VMNAP_CTR_RX_FATAL] == st0.ctr[VMNAP_CTR_RX_FATAL] + 1;
	tap(ok, "bad magic: stream dropped");

	/* the module reconnects; a handoff before HELLO_ACK is refused */
	ok = !peer_accept(&peer, 10000);
	ok = ok && peer_recv(&peer, VMNAP_HELLO, peer.buf + sizeof(peer.buf) / 2,
			     0, 5000) > 0;
	peer_send(&peer, VMNAP_HANDOFF_REQ, &req, sizeof(req));
	code = peer_expect_error(&peer, 3000);
	tap(ok && code == VMNAP_ESTATE, "reconnects; HANDOFF_REQ before HELLO_ACK: ERROR(ESTATE)");
	{
		struct vmnap_hello_ack ack = {
			.version = vmnap_cpu16(1),
			.features = vmnap_cpu32(peer.offered),
			.vm_id = vmnap_cpu64(42),
		};

		peer_send(&peer, VMNAP_HELLO_ACK, &ack, sizeof(ack));
	}
	tap(wait_status(link_up, 3000, &st), "link up again after HELLO_ACK");
}

static void test_link_loss(void)
{
	struct vmnap_handoff_ack a;
	struct vmnap_status st0, st;
	uint64_t id;
	bool ok;

	status(&st0);
	ok = ready_handoff(&id, &a);
	peer_hangup(&peer);
	ok = ok && wait_status(released, 3000, &st) &&
	     st.ctr[VMNAP_CTR_UNQ_LINK] == st0.ctr[VMNAP_CTR_UNQ_LINK] + 1;
	tap(ok, "link dropped mid-handoff releases devices");
	ok = !peer_handshake(&peer, 10000, NULL, 42) && wait_status(link_up, 3000, &st);
	tap(ok, "module reconnects after link loss");

	vmnap_client_cmd(VMNAP_CMD_TEST_DROP_LINK, &st);
	ok = peer_recv(&peer, VMNAP_PONG, &a, sizeof(a), 5000) == -ECONNRESET &&
	     !peer_handshake(&peer, 10000, NULL, 42) && wait_status(link_up, 3000, &st);
	tap(ok, "transport reset: link dropped and re-established");
}

static void test_free_pages(void)
{
	struct vmnap_status st;
	uint8_t junk[64];
	pid_t pid;
	long end;

	if (!(peer.offered & VMNAP_F_FREE_REPORT)) {
		tap_skip("free pages reported", "free page reporting off");
		tap_skip("reported pages allocatable again", "free page reporting off");
		return;
	}
	pid = spawn(touch_memory, (void *)(uintptr_t)FILL_MIB);
	wait_exit(pid, 60000);
	end = peer_now_ms() + 15000;
	while (!peer.free_reports && peer_now_ms() < end)
		peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 500);
	/* let the reporter finish its pass */
	peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 1000);
	tap_diag("free reports %u (%llu MiB), bad ranges %u", peer.free_reports,
	         (unsigned long long)(peer.free_bytes >> 20), peer.free_bad);
	tap(peer.free_reports && !peer.free_bad && !status(&st) &&
	    st.ctr[VMNAP_CTR_FREE_REPORTS] >= 1,
	    "free pages reported, ranges inside guest RAM");
	pid = spawn(touch_memory, (void *)(uintptr_t)FILL_MIB);
	tap(wait_exit(pid, 60000) == 0, "reported pages allocatable again");
}

/* Take a reconnecting module's HELLO, but do not answer it yet. */
static int peer_take_hello(struct peer *p, int timeout_ms)
{
	uint8_t hb[sizeof(struct vmnap_hello) +
		   VMNAP_MAX_RAM_RANGES * sizeof(struct vmnap_range)];
	int ret = peer_accept(p, timeout_ms);

	if (!ret)
		ret = peer_recv(p, VMNAP_HELLO, hb, sizeof(hb), timeout_ms);
	if (ret < 0)
		return ret;
	p->offered = vmnap_le32(((const struct vmnap_hello *)hb)->features);
	return 0;
}

static int peer_hello_ack(struct peer *p, uint64_t vm_id)
{
	struct vmnap_hello_ack ack = {
		.version = vmnap_cpu16(VMNAP_PROTO_VERSION),
		.features = vmnap_cpu32(p->offered),
		.vm_id = vmnap_cpu64(vm_id),
	};

	return peer_send(p, VMNAP_HELLO_ACK, &ack, sizeof(ack));
}

static uint64_t free_fails0;
static bool free_failed(const struct vmnap_status *st)
{
	return st->ctr[VMNAP_CTR_FREE_FAILS] > free_fails0;
}

/*
 * A FREE_REPORT the host does not answer keeps its pages out of the
 * allocator: past free_ack_ms, and after a link loss until the HELLO_ACK
 * of a new session (the host could still act on the report until it ended
 * the old session); rmmod is refused meanwhile.
 */
static void test_free_held(void)
{
	static const char *const what[] = {
		"unanswered FREE_REPORT: held past 10 x free_ack_ms, not given up",
		"link lost: the batch stays held while the new session has no HELLO_ACK",
		"rmmod refused while a batch is orphaned",
		"new session's HELLO_ACK: the orphaned batch goes back unreported",
	};
	struct vmnap_status st0, st;
	unsigned int seen = peer.free_reports, i;
	uint8_t junk[64];
	pid_t pid;
	long end;
	bool ok;
	int ret;

	if (!(peer.offered & VMNAP_F_FREE_REPORT)) {
		for (i = 0; i < sizeof(what) / sizeof(what[0]); i++)
			tap_skip(what[i], "free page reporting off");
		return;
	}
	set_param("free_ack_ms", "100");
	status(&st0);
	peer.free_no_ack = true;
	pid = spawn(touch_memory, (void *)(uintptr_t)FILL_MIB);
	wait_exit(pid, 60000);
	end = peer_now_ms() + 15000;
	while (peer.free_reports == seen && peer_now_ms() < end)
		peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 500);
	peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 1000);
	ok = peer.free_reports > seen && !status(&st) &&
	     st.ctr[VMNAP_CTR_FREE_FAILS] == st0.ctr[VMNAP_CTR_FREE_FAILS] &&
	     st.ctr[VMNAP_CTR_FREE_REPORTS] == st0.ctr[VMNAP_CTR_FREE_REPORTS];
	tap(ok, "%s", what[0]);

	free_fails0 = st0.ctr[VMNAP_CTR_FREE_FAILS];
	peer_hangup(&peer);
	ret = peer_take_hello(&peer, 10000);
	peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 1000);
	ok = !ret && !status(&st) && !free_failed(&st);
	tap(ok, "%s", what[1]);
	ret = vmnap_client_unload();
	tap(ret == -EAGAIN || ret == -EBUSY, "%s%s", what[2],
	    !ret ? " (it unloaded)" : ret == -EAGAIN || ret == -EBUSY ? "" :
	    strerror(-ret));
	if (!ret) {	/* keep the rest of the suite going */
		vmnap_client_load(VMNAP_MODULE_PATH, PARAMS);
		peer_handshake(&peer, 10000, NULL, 42);
	}

	peer.free_no_ack = false;
	ok = !peer_hello_ack(&peer, 42) && wait_status(free_failed, 10000, &st);
	tap(ok, "%s", what[3]);
	set_param("free_ack_ms", "1000");
	wait_status(link_up, 3000, &st);
}

/*
 * Unload while connected: the reporter may be waiting for a
 * FREE_REPORT_ACK, which unload waits for, so answer the module meanwhile.
 */
static int unload_answering(void)
{
	uint8_t junk[64];
	pid_t pid = fork();

	if (pid == 0)
		_exit(-vmnap_client_unload() & 0xff);
	if (pid < 0)
		return -errno;
	for (;;) {
		int ret = wait_exit(pid, 100);

		if (ret != -ETIMEDOUT)
			return -ret;
		if (peer.fd >= 0 &&
		    peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk), 100) == -ECONNRESET)
			peer_hangup(&peer);
	}
}

static void test_unload_states(void)
{
	struct vmnap_handoff_ack a;
	struct vmnap_status st;
	uint64_t id;
	pid_t pid;
	bool ok;
	int ret;

	/* quiesced */
	ok = ready_handoff(&id, &a);
	ret = unload_answering();
	tap(ok && !ret, "unload while devices are held%s%s", ret ? " # " : "",
	    ret ? strerror(-ret) : "");
	if (have_disk()) {
		pid = spawn(held_write, NULL);
		tap(wait_exit(pid, 10000) == 0, "disk usable after unload while held");
	}
	peer_hangup(&peer);

	/* connected and idle */
	ret = vmnap_client_load(VMNAP_MODULE_PATH, PARAMS);
	ok = !ret && !peer_handshake(&peer, 10000, NULL, 43) &&
	     wait_status(link_up, 3000, &st);
	ret = unload_answering();
	tap(ok && !ret, "unload while connected and idle");
	peer_hangup(&peer);

	/* disconnected, retrying */
	close(peer.lfd);
	peer.lfd = -1;
	ret = vmnap_client_load(VMNAP_MODULE_PATH, PARAMS);
	usleep(500000);
	ok = !ret && !status(&st) && st.link == 0 && st.ctr[VMNAP_CTR_CONNECT_FAILS] > 0;
	ret = vmnap_client_unload();
	tap(ok && !ret, "unload while disconnected and retrying");

	/* free page reporting off: HELLO says so; no test commands */
	ret = peer_listen(&peer, PORT);
	ret = ret ? ret : vmnap_client_load(VMNAP_MODULE_PATH,
					    "host_cid=1 port=5151 free_report=0");
	ok = !ret && !peer_handshake(&peer, 10000, NULL, 44) &&
	     !(peer.offered & VMNAP_F_FREE_REPORT) &&
	     wait_status(link_up, 3000, &st) && !st.free_reporting;
	tap(ok, "free_report=0: HELLO does not offer FREE_REPORT");
	ok = !ret && vmnap_client_cmd(VMNAP_CMD_TEST_EVIDENCE, &st) == -EPERM &&
	     !vmnap_client_cmd(VMNAP_CMD_GET_STATUS, &st);
	tap(ok, "test commands refused without test_hooks");
	vmnap_client_unload();
	peer_hangup(&peer);
}

static int serve(int seconds)
{
	uint8_t junk[64];
	long end = peer_now_ms() + seconds * 1000L;
	int ret = peer_listen(&peer, PORT);

	if (!ret)
		ret = peer_handshake(&peer, 10000, NULL, 1);
	if (ret) {
		fprintf(stderr, "vmnap_selftest: serve: %s\n", strerror(-ret));
		return 1;
	}
	printf("serving\n");
	fflush(stdout);
	while (peer_now_ms() < end)
		if (peer_recv(&peer, VMNAP_PONG, junk, sizeof(junk),
			      (int)(end - peer_now_ms())) == -ECONNRESET)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	if (argc == 3 && !strcmp(argv[1], "--serve"))
		return serve(atoi(argv[2]));
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("TAP version 13\n");
	if (geteuid()) {
		tap_skip_all("needs root");
		return TAP_SKIP;
	}
	ret = peer_listen(&peer, PORT);
	if (ret) {
		tap_skip_all("no vsock loopback: %s", strerror(-ret));
		return TAP_SKIP;
	}
	ret = vmnap_client_load(VMNAP_MODULE_PATH, PARAMS);
	tap(!ret, "load vmnap.ko through libkmod%s%s", ret ? " # " : "",
	    ret ? strerror(-ret) : "");
	if (ret)
		return tap_done();
	tap_diag("%u CPUs, %u virtio devices, disk %s", possible_cpus(),
	         virtio_devices(), have_disk() ? "yes" : "no");
	test_hello();
	test_idle_ready();
	test_timer_budget();
	test_wheel_budget();
	test_abort_and_state();
	test_failsafe();
	test_quiesce_holds_io();
	test_busy();
	test_hostile();
	test_link_loss();
	test_free_pages();
	test_free_held();
	test_unload_states();
	return tap_done();
}
