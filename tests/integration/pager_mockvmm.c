// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_mockvmm.c - the pager end to end on real kernel objects: a mock
 * VMM (this program re-executed with --vmm under LD_PRELOAD=
 * libvmnap-preload.so) maps a memfd named "memory-backend-memfd", so its
 * guest RAM reaches the in-process vmnapd side (memory handshake server,
 * pager, event loop on its own thread) through the real preload path.
 * userfaultfd, memfd and io_uring are real; nothing is mocked but the VMM.
 *
 * Modes (TAP on stdout):
 *   basic   [MiB]  patterns with holes and zero pages, two mappers; evict,
 *                  verify every byte from several threads in both mappers;
 *                  second cycle with prefetch racing faults; make_resident,
 *                  drop_free; detach when the VMM exits
 *   eintr          the VMM takes a signal every SIGNAL_STORM_US (SA_RESTART,
 *                  as QEMU's threads do) while vmnapd is slow to answer its
 *                  handshake: the shim must retry on EINTR, not fail the boot
 *   cancel  [MiB]  cancel an offload mid-way: written-and-punched pages stay
 *                  OFFLOADED, the rest RESIDENT, done gets -ECANCELED; every
 *                  byte verified through faults; a full offload follows
 *   storeerr [MiB] the store fails under a fault: the faulting thread stays
 *                  blocked (never zeros), the error callback hears of it;
 *                  once the store is back the retried fault is served and
 *                  every byte is right
 *   enospc  [MiB]  store on a small tmpfs: offload aborts with ENOSPC, the
 *                  VM stays correct (skips if mounting is impossible)
 *   critical [MiB] resume-critical set: cycle 1 offload, resume, touch a
 *                  set S, delivered; cycle 2 offload, the pre-resume
 *                  restore puts S in the memfd before the mapper touches
 *                  it (SEEK_DATA), touching S takes no fault, every byte
 *                  verified; the set is bounded and recorded only until
 *                  delivery
 *   bench   [MiB]  figures for scripts/bench-pager.sh, JSON on stdout
 *   swap MiB CGROUP  the peer, Linux swap: fill anonymous memory in memory
 *                  cgroup (v1) directory CGROUP, reclaim it to swap by
 *                  lowering the cgroup's limit, touch it back; JSON
 *
 * Environment: PAGER_STORE_DIR (store directory; default a temp dir).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "mem_handshake.h"
#include "pager.h"
#include "vmnapd.h"

#define PAGE		4096u
#define VM_NAME		"mock"
#define LINE_MAX_LEN	256
#define ENOSPC_STORE_MIB	8
#define LAT_SAMPLES	4000
#define PREFETCH_POLL_US	200
#define SIGNAL_STORM_US		100	/* eintr: SIGALRM period in the VMM */
#define SLOW_ANSWER_US		300000	/* eintr: vmnapd busy this long */
#define CANCEL_BATCH_BYTES	(64u << 10)	/* cancel: small batches, */
#define CANCEL_QUEUE_DEPTH	1		/* one at a time */
#define CANCEL_POLL_US		50
#define PEEK_WAIT_MS		500	/* storeerr: "blocked" after this long */
#define ERROR_WAIT_S		5
#define RETRY_WAIT_POLLS	200	/* x 20 ms: served once the store is back */
/* critical: the set S the "guest" touches after a resume - a run and
 * scattered pages, data pages only (they are offloaded, not ZERO) */
#define CRIT_RUN_FIRST		100
#define CRIT_RUN_PAGES		40
#define CRIT_SCATTER_FIRST	1000
#define CRIT_SCATTER_STRIDE	13
#define CRIT_SCATTER_PAGES	60
#define CRIT_SET_MAX		(CRIT_RUN_PAGES + CRIT_SCATTER_PAGES)
#define CRIT_NO_BUDGET_NS	UINT64_MAX
#define CRIT_TINY_BUDGET_NS	1

/* ---------------------------------------------------------------- patterns */

enum page_kind { PK_DATA, PK_HOLE, PK_ZERO };

static bool g_all_data;	/* bench: every page data */

static enum page_kind page_kind(uint64_t i)
{
	if (g_all_data)
		return PK_DATA;
	return i % 7 == 3 ? PK_HOLE : i % 7 == 5 ? PK_ZERO : PK_DATA;
}

static void page_pattern(uint64_t i, unsigned int round, uint64_t *w)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (round + 1) * 0xC2B2AE3D27D4EB4Full;

	for (size_t k = 0; k < PAGE / 8; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[k] = x | 1;
	}
}

/* ---------------------------------------------------------------- mock VMM */

struct vmm {
	char *mem;
	uint64_t npages;
	int peer;		/* second mapper's control socket, or -1 */
};

struct verify_job {
	struct vmm *v;
	unsigned int round, tid, nthreads;
	uint64_t zlo, zhi;	/* pages [zlo, zhi) expected zero */
	bool reverse;
	int64_t bad;		/* first bad page or -1 */
};

static void fill(struct vmm *v, unsigned int round)
{
	for (uint64_t i = 0; i < v->npages; i++) {
		char *pg = v->mem + i * PAGE;

		switch (page_kind(i)) {
		case PK_DATA:
			page_pattern(i, round, (uint64_t *)(void *)pg);
			break;
		case PK_ZERO:
			memset(pg, 0, PAGE);	/* allocated, all zero */
			break;
		case PK_HOLE:
			break;
		}
	}
}

static void *verify_thread(void *arg)
{
	struct verify_job *j = arg;
	uint64_t want[PAGE / 8], zero[PAGE / 8] = { 0 };

	j->bad = -1;
	for (uint64_t k = j->tid; k < j->v->npages; k += j->nthreads) {
		uint64_t i = j->reverse ? j->v->npages - 1 - k : k;
		const void *exp = zero;

		if (page_kind(i) == PK_DATA && !(i >= j->zlo && i < j->zhi)) {
			page_pattern(i, j->round, want);
			exp = want;
		}
		if (memcmp(j->v->mem + i * PAGE, exp, PAGE)) {
			j->bad = (int64_t)i;
			break;
		}
	}
	return NULL;
}

static int64_t verify(struct vmm *v, unsigned int round, unsigned int nthreads,
		      uint64_t zlo, uint64_t zhi, bool reverse)
{
	pthread_t t[16];
	struct verify_job j[16];
	int64_t bad = -1;

	if (nthreads > 16)
		nthreads = 16;
	for (unsigned int i = 0; i < nthreads; i++) {
		j[i] = (struct verify_job){ v, round, i, nthreads, zlo, zhi, reverse, -1 };
		pthread_create(&t[i], NULL, verify_thread, &j[i]);
	}
	for (unsigned int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		if (j[i].bad >= 0 && bad < 0)
			bad = j[i].bad;
	}
	return bad;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* bench: touch LAT_SAMPLES random pages, one at a time; p50/p99 in ns */
static void touch_latency(struct vmm *v, uint64_t *p50, uint64_t *p99)
{
	static uint64_t lat[LAT_SAMPLES];
	uint64_t x = 88172645463325252ull, n = 0;
	volatile char sink;

	for (; n < LAT_SAMPLES && n < v->npages; n++) {
		uint64_t t0, i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = x % v->npages;
		t0 = mono_ns();
		sink = v->mem[i * PAGE];
		lat[n] = mono_ns() - t0;
	}
	(void)sink;
	qsort(lat, n, sizeof(lat[0]), cmp_u64);
	*p50 = lat[n / 2];
	*p99 = lat[n * 99 / 100];
}

/* critical: the pages of S (data pages only); returns how many */
static unsigned int crit_set(uint64_t npages, uint64_t *pgs)
{
	unsigned int n = 0;

	for (uint64_t i = CRIT_RUN_FIRST; i < CRIT_RUN_FIRST + CRIT_RUN_PAGES; i++)
		if (i < npages && page_kind(i) == PK_DATA)
			pgs[n++] = i;
	for (uint64_t k = 0; k < CRIT_SCATTER_PAGES; k++) {
		uint64_t i = CRIT_SCATTER_FIRST + k * CRIT_SCATTER_STRIDE;

		if (i < npages && page_kind(i) == PK_DATA)
			pgs[n++] = i;
	}
	return n;
}

/* Touch every page of S and check all its bytes; -1 or the bad page. */
static int64_t touch_set(struct vmm *v, unsigned int round)
{
	uint64_t pgs[CRIT_SET_MAX], want[PAGE / 8];
	unsigned int n = crit_set(v->npages, pgs);

	for (unsigned int k = 0; k < n; k++) {
		page_pattern(pgs[k], round, want);
		if (memcmp(v->mem + pgs[k] * PAGE, want, PAGE))
			return (int64_t)pgs[k];
	}
	return -1;
}

static uint64_t touch_all(struct vmm *v)
{
	volatile char sink;
	uint64_t t0 = mono_ns();

	for (uint64_t i = 0; i < v->npages; i++)
		sink = v->mem[i * PAGE];
	(void)sink;
	return mono_ns() - t0;
}

static void send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_line(int fd, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	buf[n++] = '\n';
	if (write(fd, buf, (size_t)n) != n)
		_exit(3);
}

static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n < len - 1) {
		ssize_t r = read(fd, buf + n, 1);

		if (r <= 0)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	return 0;
}

/* Serve commands on @in, answer on @out. */
struct peek {
	const volatile uint64_t *word;
	uint64_t value;
	sem_t done;
};

static void *peek_thread(void *arg)
{
	struct peek *pk = arg;

	pk->value = *pk->word;	/* may fault and wait for vmnapd */
	sem_post(&pk->done);
	return NULL;
}

/* Read the first word of page @i in a thread; "blocked" if it takes more
 * than PEEK_WAIT_MS (the thread keeps waiting and finishes later). */
static void peek(struct vmm *v, uint64_t i, int out)
{
	static struct peek pk;	/* outlives a blocked thread */
	struct timespec ts;
	pthread_t t;

	pk.word = (const volatile uint64_t *)(const void *)(v->mem + i * PAGE);
	sem_init(&pk.done, 0, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += PEEK_WAIT_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_create(&t, NULL, peek_thread, &pk);
	pthread_detach(t);
	if (sem_timedwait(&pk.done, &ts))
		send_line(out, "blocked");
	else
		send_line(out, "value %#llx", (unsigned long long)pk.value);
}

static int vmm_serve(struct vmm *v, int in, int out)
{
	char line[LINE_MAX_LEN];

	while (read_line(in, line, sizeof(line)) == 0) {
		unsigned int round, threads;
		unsigned long long zlo = 0, zhi = 0;
		int rev = 0;

		if (sscanf(line, "fill %u", &round) == 1) {
			fill(v, round);
			send_line(out, "ok");
		} else if (sscanf(line, "verify %u %u %llu %llu %d", &round, &threads,
				  &zlo, &zhi, &rev) >= 2) {
			int64_t bad, peer_bad = -1;
			char pl[LINE_MAX_LEN];

			if (v->peer >= 0)
				send_line(v->peer, "verify %u %u %llu %llu 1", round,
					  threads, zlo, zhi);
			bad = verify(v, round, threads, zlo, zhi, rev);
			if (v->peer >= 0) {
				if (read_line(v->peer, pl, sizeof(pl)) || strcmp(pl, "ok"))
					peer_bad = 1;
			}
			if (bad >= 0)
				send_line(out, "bad page %lld", (long long)bad);
			else if (peer_bad >= 0)
				send_line(out, "bad in second mapper");
			else
				send_line(out, "ok");
		} else if (sscanf(line, "peek %llu", &zlo) == 1) {
			peek(v, zlo, out);
		} else if (!strcmp(line, "zero")) {
			memset(v->mem, 0, v->npages * PAGE);
			send_line(out, "ok");
		} else if (!strcmp(line, "lat")) {
			uint64_t p50, p99;

			touch_latency(v, &p50, &p99);
			send_line(out, "ok %llu %llu", (unsigned long long)p50,
				  (unsigned long long)p99);
		} else if (sscanf(line, "touchset %u", &round) == 1) {
			int64_t bad = touch_set(v, round);

			if (bad >= 0)
				send_line(out, "bad page %lld", (long long)bad);
			else
				send_line(out, "ok");
		} else if (!strcmp(line, "touchall")) {
			send_line(out, "ok %llu", (unsigned long long)touch_all(v));
		} else if (!strcmp(line, "quit")) {
			if (v->peer >= 0)
				send_line(v->peer, "quit");
			send_line(out, "ok");
			return 0;
		} else {
			send_line(out, "unknown");
		}
	}
	return 0;
}

static void on_sigalrm(int sig)
{
	(void)sig;
}

/* eintr mode: a signal every SIGNAL_STORM_US while guest RAM is mapped. */
static void signal_storm(bool on)
{
	struct sigaction sa = { .sa_handler = on_sigalrm, .sa_flags = SA_RESTART };
	struct itimerval it = {
		.it_interval = { .tv_usec = on ? SIGNAL_STORM_US : 0 },
		.it_value = { .tv_usec = on ? SIGNAL_STORM_US : 0 },
	};

	if (on)
		sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static int vmm_main(uint64_t mib, int mappers, int in, int out)
{
	struct vmm v = { .npages = (mib << 20) / PAGE, .peer = -1 };
	size_t size = v.npages * PAGE;
	int memfd, sp[2];
	char line[LINE_MAX_LEN];

	memfd = memfd_create("memory-backend-memfd", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, (off_t)size) < 0)
		return 2;
	if (mappers == 2) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
			return 2;
		if (fork() == 0) {
			close(sp[0]);
			v.mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
			if (v.mem == MAP_FAILED)
				_exit(2);
			send_line(sp[1], "mapped");
			vmm_serve(&v, sp[1], sp[1]);
			_exit(0);
		}
		close(sp[1]);
		v.peer = sp[0];
		if (read_line(v.peer, line, sizeof(line)) || strcmp(line, "mapped"))
			return 2;
	}
	if (getenv("MOCKVMM_SIGNAL_STORM"))
		signal_storm(true);
	v.mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (getenv("MOCKVMM_SIGNAL_STORM"))
		signal_storm(false);
	if (v.mem == MAP_FAILED) {
		send_line(out, "mmap failed: %s", strerror(errno));
		return 2;
	}
	fill(&v, 1);
	send_line(out, "ready");
	vmm_serve(&v, in, out);
	if (v.peer >= 0)
		wait(NULL);
	return 0;
}

/* ---------------------------------------------------------------- harness */

struct harness {
	struct vmnapd d;
	pthread_t loop_thread;
	int call_fd;		/* eventfd: a call is queued */
	sem_t call_done;
	void (*call_fn)(struct harness *h, void *arg);
	void *call_arg;
	char dir[PATH_MAX / 2], run_dir[PATH_MAX], store_dir[PATH_MAX];
	pid_t vmm;
	int to_vmm, from_vmm;
	sem_t offload_done;
	int offload_err;
	bool mounted;
	bool signal_storm;	/* eintr mode */
	sem_t pager_error;	/* storeerr: the error callback ran */
	int pager_err;
	const char *pager_err_what;
	int tap;
	int failures;
};

static void tap(struct harness *h, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void tap(struct harness *h, bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", ++h->tap);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		h->failures++;
}

static void on_call(struct loop *l, int fd, uint32_t ev, void *arg)
{
	struct harness *h = arg;
	uint64_t v;

	(void)l;
	(void)ev;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	h->call_fn(h, h->call_arg);
	sem_post(&h->call_done);
}

/* Run @fn on the loop thread (pager and registry calls belong there). */
static void on_loop(struct harness *h, void (*fn)(struct harness *, void *), void *arg)
{
	uint64_t one = 1;

	h->call_fn = fn;
	h->call_arg = arg;
	if (write(h->call_fd, &one, sizeof(one)) != sizeof(one))
		abort();
	while (sem_wait(&h->call_done) && errno == EINTR)
		;
}

static void *loop_main(void *arg)
{
	struct harness *h = arg;

	loop_run(h->d.loop);
	return NULL;
}

static int harness_start(struct harness *h, const struct pager_config *pcfg_in)
{
	struct pager_config pcfg;
	const char *sd = getenv("PAGER_STORE_DIR");

	snprintf(h->dir, sizeof(h->dir), "/tmp/vmnap-pager-XXXXXX");
	if (!mkdtemp(h->dir))
		return -errno;
	snprintf(h->run_dir, sizeof(h->run_dir), "%s/run", h->dir);
	if (sd && *sd)
		snprintf(h->store_dir, sizeof(h->store_dir), "%s", sd);
	else
		snprintf(h->store_dir, sizeof(h->store_dir), "%s/store", h->dir);
	mkdir(h->run_dir, 0700);
	mkdir(h->store_dir, 0700);
	h->d.cfg.run_dir = h->run_dir;
	h->d.cfg.store_dir = h->store_dir;
	h->d.loop = loop_new();
	h->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sem_init(&h->call_done, 0, 0);
	sem_init(&h->offload_done, 0, 0);
	loop_add_fd(h->d.loop, h->call_fd, EPOLLIN, on_call, h);
	if (pcfg_in)
		pcfg = *pcfg_in;
	else
		pager_config_default(&pcfg, h->store_dir);
	pcfg.store_dir = h->store_dir;
	if (mem_handshake_start(&h->d, NULL, &pcfg))
		return -1;
	pthread_create(&h->loop_thread, NULL, loop_main, h);
	return 0;
}

static void stop_cb(struct harness *h, void *arg)
{
	(void)arg;
	while (h->d.vms)
		vm_free(h->d.vms);
	mem_handshake_stop(&h->d);
	loop_stop(h->d.loop);
}

static void harness_stop(struct harness *h)
{
	char cmd[PATH_MAX + 16];

	on_loop(h, stop_cb, NULL);
	pthread_join(h->loop_thread, NULL);
	loop_free(h->d.loop);
	if (h->mounted)
		umount2(h->store_dir, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", h->dir);
}

static int vmm_spawn_opts(struct harness *h, const char *self, uint64_t mib,
			  int mappers, const char *sock_override, bool allow_unmanaged);

static int vmm_spawn(struct harness *h, const char *self, uint64_t mib, int mappers)
{
	return vmm_spawn_opts(h, self, mib, mappers, NULL, false);
}

static int vmm_spawn_opts(struct harness *h, const char *self, uint64_t mib,
			  int mappers, const char *sock_override, bool allow_unmanaged)
{
	int in[2], out[2];
	char a_mib[32], a_map[8], a_in[16], a_out[16], sock[PATH_MAX + 16];

	if (pipe(in) || pipe(out))
		return -errno;
	snprintf(a_mib, sizeof(a_mib), "%llu", (unsigned long long)mib);
	snprintf(a_map, sizeof(a_map), "%d", mappers);
	snprintf(a_in, sizeof(a_in), "%d", in[0]);
	snprintf(a_out, sizeof(a_out), "%d", out[1]);
	snprintf(sock, sizeof(sock), "%s/mem.sock", h->run_dir);
	h->vmm = fork();
	if (h->vmm == 0) {
		char preload[PATH_MAX * 2], cwd[PATH_MAX];
		const char *b = getenv("BUILD");

		close(in[1]);
		close(out[0]);
		/* run from the repository root, as check.py does */
		if (!getcwd(cwd, sizeof(cwd)))
			_exit(127);
		if (!b || !*b)
			b = "build";
		snprintf(preload, sizeof(preload), "%s/%s/libvmnap-preload.so",
			 *b == '/' ? "" : cwd, b);
		setenv("LD_PRELOAD", preload, 1);
		setenv("VMNAP_SOCKET", sock_override ? sock_override : sock, 1);
		setenv("VMNAP_VM", VM_NAME, 1);
		/* the mock VMM's guest-physical layout is its memfd */
		setenv("VMNAP_GPA_LAYOUT", "linear", 1);
		if (allow_unmanaged)
			setenv("VMNAP_ALLOW_UNMANAGED", "1", 1);
		if (h->signal_storm)
			setenv("MOCKVMM_SIGNAL_STORM", "1", 1);
		execl(self, self, "--vmm", a_mib, a_map, a_in, a_out, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	h->to_vmm = in[1];
	h->from_vmm = out[0];
	return h->vmm > 0 ? 0 : -errno;
}

/* Send a command to the VMM; its answer in @ans. */
static void vmm_cmd(struct harness *h, char *ans, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void vmm_cmd(struct harness *h, char *ans, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	buf[n++] = '\n';
	if (write(h->to_vmm, buf, (size_t)n) != n || read_line(h->from_vmm, ans, LINE_MAX_LEN))
		snprintf(ans, LINE_MAX_LEN, "vmm gone");
}

static struct pager *the_pager(struct harness *h)
{
	struct vm *vm = vm_find(&h->d, VM_NAME);

	return vm ? vm->pager : NULL;
}

struct stats_call {
	struct pager_stats st;
	bool have;
};

static void stats_cb(struct harness *h, void *arg)
{
	struct stats_call *sc = arg;
	struct pager *p = the_pager(h);

	sc->have = p != NULL;
	if (p)
		pager_get_stats(p, &sc->st);
}

static struct pager_stats stats(struct harness *h, bool *have)
{
	struct stats_call sc = { 0 };

	on_loop(h, stats_cb, &sc);
	if (have)
		*have = sc.have;
	return sc.st;
}

static void offload_done(struct pager *p, int err, void *arg)
{
	struct harness *h = arg;

	(void)p;
	h->offload_err = err;
	sem_post(&h->offload_done);
}

struct offload_call {
	int err;
};

static void offload_cb(struct harness *h, void *arg)
{
	struct offload_call *oc = arg;
	struct pager *p = the_pager(h);

	oc->err = p ? pager_offload_start(p, offload_done, h) : -ENOENT;
}

/* Offload and wait; returns the done callback's error. */
static int offload(struct harness *h)
{
	struct offload_call oc;

	on_loop(h, offload_cb, &oc);
	if (oc.err)
		return oc.err;
	while (sem_wait(&h->offload_done) && errno == EINTR)
		;
	return h->offload_err;
}

static void resumed_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resumed(the_pager(h));
}

struct range_call {
	uint64_t gpa, len;
	int err;
	bool drop;
};

static void range_cb(struct harness *h, void *arg)
{
	struct range_call *rc = arg;
	struct pager *p = the_pager(h);

	rc->err = rc->drop ? pager_drop_free(p, rc->gpa, rc->len) :
			     pager_make_resident(p, rc->gpa, rc->len);
}

struct fa_call {
	uint32_t pages;
};

static void fault_around_cb(struct harness *h, void *arg)
{
	pager_set_fault_around(the_pager(h), ((struct fa_call *)arg)->pages);
}

/* Check a range of the memfd holds round @round's pattern (or zero). */
struct memfd_check {
	uint64_t pg, n;
	unsigned int round;
	bool ok;
};

static void memfd_check_cb(struct harness *h, void *arg)
{
	struct memfd_check *mc = arg;
	uint64_t want[PAGE / 8], got[PAGE / 8], zero[PAGE / 8] = { 0 }, off;
	int fd;

	mc->ok = !pager_gpa_to_memfd(the_pager(h), mc->pg * PAGE, &fd, &off);
	for (uint64_t i = mc->pg; mc->ok && i < mc->pg + mc->n; i++) {
		if (pread(fd, got, PAGE, (off_t)(off + (i - mc->pg) * PAGE)) != PAGE)
			mc->ok = false;
		page_pattern(i, mc->round, want);
		mc->ok = mc->ok && !memcmp(got, page_kind(i) == PK_DATA ? want : zero, PAGE);
	}
}

static int wait_vmm_exit(struct harness *h)
{
	int status = 0;

	waitpid(h->vmm, &status, 0);
	close(h->to_vmm);
	close(h->from_vmm);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Tell the mock VMM to quit; its exit status as wait_vmm_exit() gives it. */
static int vmm_quit(struct harness *h)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "quit");
	return wait_vmm_exit(h);
}

/* End a scenario: stop the harness, print the TAP plan; the exit status. */
static int harness_finish(struct harness *h)
{
	harness_stop(h);
	printf("1..%d\n", h->tap);
	return h->failures ? 1 : 0;
}

/* ------------------------------------------------------------------ modes */

static int mode_basic(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st0, st;
	struct mem_handshake_stats hs;
	uint64_t npages = (mib << 20) / PAGE;
	char ans[LINE_MAX_LEN];
	bool have;
	int err;

	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 2)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "mock VMM (2 mappers) handed its memfd through the preload shim (%s)", ans);
	st0 = stats(&h, &have);
	tap(&h, have && st0.mappers == 2 && st0.pages_total == npages,
	    "pager attached: %llu pages, %u mappers", (unsigned long long)st0.pages_total,
	    st0.mappers);
	tap(&h, !st0.registered, "range not registered while nothing is out");

	/* cycle 1: evict, then fault everything back from 4 threads per mapper */
	err = offload(&h);
	st = stats(&h, NULL);
	tap(&h, !err, "offload 1: %s", strerror(-err));
	tap(&h, st.resident_bytes * 10 < st0.resident_bytes,
	    "resident bytes %llu -> %llu (< 10%%)", (unsigned long long)st0.resident_bytes,
	    (unsigned long long)st.resident_bytes);
	tap(&h, st.pages[PAGE_OFFLOADED] == npages - 2 * (npages / 7) - (npages % 7 > 3) - (npages % 7 > 5) &&
	    st.pages[PAGE_ZERO] + st.pages[PAGE_OFFLOADED] == npages,
	    "data pages offloaded (%llu), holes and zero pages ZERO (%llu)",
	    (unsigned long long)st.pages[PAGE_OFFLOADED], (unsigned long long)st.pages[PAGE_ZERO]);
	tap(&h, st.last_offload_written == st.pages[PAGE_OFFLOADED] * PAGE,
	    "zero pages cost no I/O: %llu bytes written", (unsigned long long)st.last_offload_written);
	tap(&h, st.registered, "range registered while pages are out");
	vmm_cmd(&h, ans, "verify 1 4");
	tap(&h, !strcmp(ans, "ok"), "cycle 1: every byte verified by 4+4 threads in 2 mappers (%s)", ans);
	st = stats(&h, NULL);
	tap(&h, st.faults > 0 && st.pages[PAGE_OFFLOADED] == 0 && st.zero_faults > 0,
	    "faults served: %llu (%llu pages, %llu zero, %llu eexist)",
	    (unsigned long long)st.faults, (unsigned long long)st.fault_pages,
	    (unsigned long long)st.zero_faults, (unsigned long long)st.eexist);
	tap(&h, !st.registered, "range unregistered once every page is back");

	/* cycle 2: new contents, evict, prefetch races the faults */
	vmm_cmd(&h, ans, "fill 2");
	err = offload(&h);
	tap(&h, !err, "offload 2: %s", strerror(-err));
	on_loop(&h, resumed_cb, NULL);
	vmm_cmd(&h, ans, "verify 2 4 0 0 1");
	st = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok"), "cycle 2: verified while prefetch races faults (%s; %llu prefetched)",
	    ans, (unsigned long long)st.prefetch_pages);

	/* cycle 3: make_resident brings a range back without a fault */
	vmm_cmd(&h, ans, "fill 3");
	err = offload(&h);
	tap(&h, !err, "offload 3: %s", strerror(-err));
	{
		struct range_call rc = { .gpa = 64 * PAGE, .len = 64 * PAGE };
		struct memfd_check mc = { .pg = 64, .n = 64, .round = 3 };

		on_loop(&h, range_cb, &rc);
		on_loop(&h, memfd_check_cb, &mc);
		tap(&h, !rc.err && mc.ok, "make_resident: 64 pages back in the memfd, contents right");
		rc = (struct range_call){ .gpa = 256 * PAGE, .len = 128 * PAGE, .drop = true };
		on_loop(&h, range_cb, &rc);
		tap(&h, !rc.err, "drop_free of 128 pages: %s", strerror(-rc.err));
		rc = (struct range_call){ .gpa = npages * PAGE, .len = PAGE, .drop = true };
		on_loop(&h, range_cb, &rc);
		tap(&h, rc.err == -ERANGE, "drop_free outside guest RAM refused");
	}
	vmm_cmd(&h, ans, "verify 3 3 256 384");
	tap(&h, !strcmp(ans, "ok"), "cycle 3: verified, dropped range reads zero (%s)", ans);

	tap(&h, vmm_quit(&h) == 0, "mock VMM exited cleanly");
	for (int i = 0; i < 100 && have; i++) {
		stats(&h, &have);
		if (have)
			usleep(20000);
	}
	tap(&h, !have, "pager released when the last mapper went");
	mem_handshake_get_stats(&h.d, &hs);
	tap(&h, hs.accepted == 2, "handshakes accepted: %llu", (unsigned long long)hs.accepted);

	/* vmnapd unreachable: the shim fails the mapping loudly ... */
	vmm_spawn_opts(&h, self, 1, 1, "/nonexistent/mem.sock", false);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strncmp(ans, "mmap failed", 11) && wait_vmm_exit(&h) != 0,
	    "vmnapd unreachable: guest RAM mapping refused (%s)", ans);
	/* ... unless running unmanaged was asked for */
	vmm_spawn_opts(&h, self, 1, 1, "/nonexistent/mem.sock", true);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "VMNAP_ALLOW_UNMANAGED=1: runs unmanaged (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static void offload_async_cb(struct harness *h, void *arg)
{
	offload_cb(h, arg);
}

static void cancel_cb(struct harness *h, void *arg)
{
	*(int *)arg = pager_offload_cancel(the_pager(h));
}

static int mode_cancel(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	struct offload_call oc;
	uint64_t npages = (mib << 20) / PAGE;
	char ans[LINE_MAX_LEN];
	int cerr = -1, err;

	pager_config_default(&pcfg, "");
	pcfg.write_batch_bytes = CANCEL_BATCH_BYTES;
	pcfg.write_queue_depth = CANCEL_QUEUE_DEPTH;
	if (harness_start(&h, &pcfg) || vmm_spawn(&h, self, mib, 1)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	on_loop(&h, cancel_cb, &cerr);
	tap(&h, cerr == -EALREADY, "cancel without an offload: %s", strerror(-cerr));
	on_loop(&h, offload_async_cb, &oc);
	tap(&h, !oc.err, "offload started: %s", strerror(-oc.err));
	do {	/* cancel once the first batch is out */
		st = stats(&h, NULL);
		if (!st.pages[PAGE_OFFLOADED])
			usleep(CANCEL_POLL_US);
	} while (!st.pages[PAGE_OFFLOADED] && !st.offloads);
	on_loop(&h, cancel_cb, &cerr);
	while (sem_wait(&h.offload_done) && errno == EINTR)
		;
	err = h.offload_err;
	st = stats(&h, NULL);
	tap(&h, !cerr && err == -ECANCELED && st.offload_cancels == 1 && !st.offload_errors,
	    "cancelled mid-offload: done reports %s", strerror(-err));
	tap(&h, st.pages[PAGE_OFFLOADED] > 0 && st.pages[PAGE_RESIDENT] > 0 &&
	    !st.pages[PAGE_IN_FLIGHT] &&
	    st.pages[PAGE_OFFLOADED] + st.pages[PAGE_RESIDENT] + st.pages[PAGE_ZERO] == npages,
	    "punched pages OFFLOADED (%llu), unwritten RESIDENT (%llu), none in flight",
	    (unsigned long long)st.pages[PAGE_OFFLOADED],
	    (unsigned long long)st.pages[PAGE_RESIDENT]);
	tap(&h, st.registered, "range stays registered while pages are out");
	vmm_cmd(&h, ans, "verify 1 4");
	st = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok") && st.faults > 0,
	    "every byte verified by 4 threads after the cancel (%s; %llu faults)", ans,
	    (unsigned long long)st.faults);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(&h, !err && st.offloads == 1 && !st.pages[PAGE_RESIDENT],
	    "a full offload after the cancel: %s", strerror(-err));
	vmm_cmd(&h, ans, "verify 1 2");
	tap(&h, !strcmp(ans, "ok"), "every byte verified again (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static void pager_error_cb(struct pager *p, int err, const char *what, void *arg)
{
	struct harness *h = arg;

	(void)p;
	h->pager_err = err;
	h->pager_err_what = what;
	sem_post(&h->pager_error);
}

static void set_error_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_error_cb(the_pager(h), pager_error_cb, h);
}

static int mode_storeerr(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16];
	struct timespec ts;
	struct stat sb;
	char *saved = NULL;
	int fd, polls;

	sem_init(&h.pager_error, 0, 0);
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 1)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	on_loop(&h, set_error_cb, NULL);
	tap(&h, !offload(&h), "offloaded");

	/* the store loses its contents: every slot read fails (EIO) */
	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &sb))
		saved = malloc((size_t)sb.st_size);
	if (!saved || pread(fd, saved, (size_t)sb.st_size, 0) != sb.st_size ||
	    ftruncate(fd, 0)) {
		printf("Bail out! cannot take the store away: %s\n", strerror(errno));
		return 1;
	}
	vmm_cmd(&h, ans, "peek 0");
	tap(&h, !strcmp(ans, "blocked"),
	    "a fault the store cannot serve blocks the guest thread, no zeros (%s)", ans);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ERROR_WAIT_S;
	tap(&h, !sem_timedwait(&h.pager_error, &ts) && h.pager_err == -EIO &&
	    !strcmp(h.pager_err_what, "fault"),
	    "error callback on the loop: %s (%s)", strerror(-h.pager_err),
	    h.pager_err_what ? h.pager_err_what : "none");
	usleep(300000);	/* a few retries against the broken store */
	st = stats(&h, NULL);
	tap(&h, st.fault_errors == 1 && st.faults_stuck == 1 && st.fault_retries > 0 &&
	    st.pages[PAGE_OFFLOADED] > 0,
	    "counted once (%llu), fault waits (%u stuck, %llu retries), pages stay offloaded",
	    (unsigned long long)st.fault_errors, st.faults_stuck,
	    (unsigned long long)st.fault_retries);

	/* the store comes back: the retried fault is served */
	if (pwrite(fd, saved, (size_t)sb.st_size, 0) != sb.st_size) {
		printf("Bail out! cannot put the store back: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	free(saved);
	for (polls = 0; polls < RETRY_WAIT_POLLS; polls++) {
		st = stats(&h, NULL);
		if (!st.faults_stuck)
			break;
		usleep(20000);
	}
	tap(&h, !st.faults_stuck, "store back: the waiting fault was served on retry");
	vmm_cmd(&h, ans, "verify 1 2");
	tap(&h, !strcmp(ans, "ok"), "every byte right, the blocked page included (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static void slow_cb(struct harness *h, void *arg)
{
	(void)h;
	(void)arg;
	usleep(SLOW_ANSWER_US);	/* vmnapd busy: the handshake waits */
}

static int mode_eintr(const char *self)
{
	struct harness h = { .signal_storm = true };
	char ans[LINE_MAX_LEN];

	if (harness_start(&h, NULL) || vmm_spawn(&h, self, 1, 1)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	on_loop(&h, slow_cb, NULL);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"),
	    "handshake under a signal every %d us with a slow vmnapd: %s",
	    SIGNAL_STORM_US, ans);
	vmm_cmd(&h, ans, "verify 1 1");
	tap(&h, !strcmp(ans, "ok"), "guest RAM right (%s)", ans);
	tap(&h, vmm_quit(&h) == 0, "mock VMM exited cleanly");
	return harness_finish(&h);
}

static int mode_enospc(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN], opts[64];
	int err;

	if (harness_start(&h, NULL)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	snprintf(opts, sizeof(opts), "size=%dm,mode=0700", ENOSPC_STORE_MIB);
	if (mount("vmnap-store", h.store_dir, "tmpfs", 0, opts) < 0) {
		printf("1..0 # SKIP cannot mount a small tmpfs store: %s\n", strerror(errno));
		harness_stop(&h);
		return 0;
	}
	h.mounted = true;
	vmm_spawn(&h, self, mib, 1);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	err = offload(&h);
	st = stats(&h, NULL);
	tap(&h, err == -ENOSPC, "offload to an %d MiB store aborts with ENOSPC (%s)",
	    ENOSPC_STORE_MIB, strerror(-err));
	tap(&h, st.pages[PAGE_IN_FLIGHT] == 0 && st.pages[PAGE_RESIDENT] > 0 &&
	    st.offload_errors == 1,
	    "unwritten pages stay resident (%llu resident, %llu offloaded)",
	    (unsigned long long)st.pages[PAGE_RESIDENT],
	    (unsigned long long)st.pages[PAGE_OFFLOADED]);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(&h, !strcmp(ans, "ok"), "every byte still right after the aborted offload (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

static double gib_s(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)(1ull << 30) / ((double)ns / 1e9) : 0;
}

static int mode_bench(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_stats st;
	uint64_t bytes = mib << 20, p50 = 0, p99 = 0, ns, t0, before;
	double evict, zero_evict, restore_fault, restore_prefetch;
	char ans[LINE_MAX_LEN];
	unsigned long long a, b;
	struct fa_call fa;
	int err;

	g_all_data = true;
	setenv("PAGER_ALL_DATA", "1", 1);	/* the VMM child fills all pages */
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 1))
		return 1;
	read_line(h.from_vmm, ans, sizeof(ans));
	if (strcmp(ans, "ready"))
		return 1;
	/* 1. evict non-zero pages */
	err = offload(&h);
	st = stats(&h, NULL);
	if (err)
		return 1;
	evict = gib_s(st.last_offload_written, st.last_offload_ns);
	/* 2. fault latency: random single-page touches, no fault-around */
	fa.pages = 1;
	on_loop(&h, fault_around_cb, &fa);
	vmm_cmd(&h, ans, "lat");
	if (sscanf(ans, "ok %llu %llu", &a, &b) == 2) {
		p50 = a;
		p99 = b;
	}
	/* 3. restore by faults: evict again (the random touches above left
	 * resident pages scattered), then sequential touches */
	fa.pages = 16;
	on_loop(&h, fault_around_cb, &fa);
	vmm_cmd(&h, ans, "touchall");
	if (offload(&h))
		return 1;
	st = stats(&h, NULL);
	before = st.pages[PAGE_OFFLOADED];
	vmm_cmd(&h, ans, "touchall");
	ns = sscanf(ans, "ok %llu", &a) == 1 ? a : 0;
	restore_fault = gib_s(before * PAGE, ns);
	st = stats(&h, NULL);
	fprintf(stderr, "bench: sequential restore: %llu faults, %llu pages by faults, %llu by readahead/prefetch\n",
		(unsigned long long)st.faults, (unsigned long long)st.fault_pages,
		(unsigned long long)st.prefetch_pages);
	/* 4. restore by prefetch: the whole working set streams back */
	if (offload(&h))
		return 1;
	t0 = mono_ns();
	on_loop(&h, resumed_cb, NULL);
	do {
		usleep(PREFETCH_POLL_US);
		st = stats(&h, NULL);
	} while (st.pages[PAGE_OFFLOADED] || st.pages[PAGE_IN_FLIGHT]);
	restore_prefetch = gib_s(bytes, mono_ns() - t0);
	vmm_cmd(&h, ans, "verify 1 2");
	if (strcmp(ans, "ok"))
		return 1;
	/* 5. evict zero pages (allocated, all zero) */
	vmm_cmd(&h, ans, "zero");
	if (offload(&h))
		return 1;
	st = stats(&h, NULL);
	zero_evict = gib_s(bytes, st.last_offload_ns);
	vmm_quit(&h);
	harness_stop(&h);
	printf("{\"bytes\": %llu, \"nonzero_bytes\": %llu, \"evict_gib_s\": %.3f, "
	       "\"zero_evict_gib_s\": %.3f, \"fault_p50_us\": %.1f, \"fault_p99_us\": %.1f, "
	       "\"restore_fault_gib_s\": %.3f, \"restore_prefetch_gib_s\": %.3f}\n",
	       (unsigned long long)bytes, (unsigned long long)bytes, evict, zero_evict,
	       (double)p50 / 1000.0, (double)p99 / 1000.0, restore_fault, restore_prefetch);
	return 0;
}

static int write_file(const char *dir, const char *name, const char *val)
{
	char path[PATH_MAX];
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		err = -errno;
	close(fd);
	return err;
}

#define SWAP_RECLAIM_LIMIT	"16M"	/* memcg limit that forces reclaim */

/* Linux swap on the same memory: memcg reclaim out, touches back in. */
static int mode_swap(uint64_t mib, const char *cg)
{
	struct vmm v = { .npages = (mib << 20) / PAGE, .peer = -1 };
	uint64_t t0, evict_ns, restore_ns;
	char pid[32];
	int64_t bad;
	int err;

	g_all_data = true;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	err = write_file(cg, "cgroup.procs", pid);
	if (err) {
		fprintf(stderr, "swap: cannot join %s: %s\n", cg, strerror(-err));
		return 77;
	}
	v.mem = mmap(NULL, v.npages * PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (v.mem == MAP_FAILED)
		return 1;
	madvise(v.mem, v.npages * PAGE, MADV_NOHUGEPAGE);
	fill(&v, 1);
	t0 = mono_ns();
	err = write_file(cg, "memory.limit_in_bytes", SWAP_RECLAIM_LIMIT);
	evict_ns = mono_ns() - t0;
	if (err) {
		fprintf(stderr, "swap: reclaim to %s failed: %s\n", SWAP_RECLAIM_LIMIT,
			strerror(-err));
		return 1;
	}
	write_file(cg, "memory.limit_in_bytes", "-1");
	restore_ns = touch_all(&v);
	bad = verify(&v, 1, 1, 0, 0, false);
	if (bad >= 0) {
		fprintf(stderr, "swap: page %lld wrong after swap-in\n", (long long)bad);
		return 1;
	}
	printf("{\"swap_evict_gib_s\": %.3f, \"swap_restore_gib_s\": %.3f}\n",
	       gib_s(v.npages * PAGE, evict_ns), gib_s(v.npages * PAGE, restore_ns));
	return 0;
}

struct prepare_call {
	int ret;
};

static void prepare_cb(struct harness *h, void *arg)
{
	((struct prepare_call *)arg)->ret = pager_resume_prepare(the_pager(h));
}

static void budget_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_critical_budget(the_pager(h), CRIT_TINY_BUDGET_NS);
}

static void delivered_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_delivered(the_pager(h));
}

/* How many pages of S the memfd holds (allocated, not a hole), and are
 * their contents round @round's? */
struct set_resident_call {
	unsigned int round, resident, n;
	bool contents_ok;
};

static void set_resident_cb(struct harness *h, void *arg)
{
	struct set_resident_call *sc = arg;
	uint64_t pgs[CRIT_SET_MAX], want[PAGE / 8], got[PAGE / 8], off;
	struct pager_stats st;
	int fd;

	pager_get_stats(the_pager(h), &st);
	sc->n = crit_set(st.pages_total, pgs);
	sc->resident = 0;
	sc->contents_ok = !pager_gpa_to_memfd(the_pager(h), 0, &fd, &off);
	for (unsigned int k = 0; k < sc->n; k++) {
		off_t at = (off_t)(off + pgs[k] * PAGE);
		bool in = lseek(fd, at, SEEK_DATA) == at;

		sc->resident += in;
		page_pattern(pgs[k], sc->round, want);
		if (in && (pread(fd, got, PAGE, at) != PAGE || memcmp(got, want, PAGE)))
			sc->contents_ok = false;
	}
}

static int mode_critical(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st, st1;
	struct prepare_call pc;
	struct set_resident_call sc = { .round = 1 };
	char ans[LINE_MAX_LEN];
	int err;

	pager_config_default(&pcfg, "");
	pcfg.prefetch = false;	/* only the pre-resume restore brings pages back */
	/* the time bound is checked on its own below: no speed asserted here */
	pcfg.critical_budget_ns = CRIT_NO_BUDGET_NS;
	if (harness_start(&h, &pcfg) || vmm_spawn(&h, self, mib, 1)) {
		printf("Bail out! harness setup failed\n");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(&h, !strcmp(ans, "ready"), "mock VMM ready (%s)", ans);

	/* cycle 1: nothing recorded yet; record S between resume and delivery */
	err = offload(&h);
	tap(&h, !err, "offload 1: %s", strerror(-err));
	on_loop(&h, set_resident_cb, &sc);
	tap(&h, sc.n > 0 && sc.resident == 0, "S (%u pages) out of the memfd after the offload",
	    sc.n);
	on_loop(&h, prepare_cb, &pc);
	tap(&h, pc.ret == 0, "cycle 1: nothing to restore before the resume (%d)", pc.ret);
	vmm_cmd(&h, ans, "touchset 1");
	st = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok") && st.faults > 0 && st.critical_window_faults == st.faults,
	    "cycle 1: S verified through %llu fault(s) in the critical window (%s)",
	    (unsigned long long)st.faults, ans);
	tap(&h, st.critical_set_pages >= sc.n && st.critical_set_pages <= PAGER_CRITICAL_MAX_PAGES,
	    "critical set: %llu page(s) (S and its fault-around)",
	    (unsigned long long)st.critical_set_pages);
	on_loop(&h, delivered_cb, NULL);
	vmm_cmd(&h, ans, "verify 1 2");
	st1 = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok") && st1.faults > st.faults &&
	    st1.critical_set_pages == st.critical_set_pages &&
	    st1.critical_window_faults == st.critical_window_faults,
	    "after delivery: faults (%llu more) are not recorded (%s)",
	    (unsigned long long)(st1.faults - st.faults), ans);

	/* cycle 2: S is resident before the mapper runs, and takes no fault */
	vmm_cmd(&h, ans, "fill 2");
	err = offload(&h);
	sc = (struct set_resident_call){ .round = 2 };
	on_loop(&h, set_resident_cb, &sc);
	tap(&h, !err && sc.resident == 0, "offload 2: %s; S out of the memfd", strerror(-err));
	on_loop(&h, prepare_cb, &pc);
	st = stats(&h, NULL);
	on_loop(&h, set_resident_cb, &sc);
	tap(&h, pc.ret >= (int)sc.n && (uint64_t)pc.ret == st.critical_restored_pages,
	    "pre-resume restore: %d page(s) in %llu us", pc.ret,
	    (unsigned long long)(st.critical_last_restore_ns / 1000));
	tap(&h, sc.resident == sc.n && sc.contents_ok,
	    "S in the memfd before the mapper touches it: %u of %u pages, contents right",
	    sc.resident, sc.n);
	vmm_cmd(&h, ans, "touchset 2");
	st1 = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok") && st1.faults == st.faults &&
	    st1.critical_window_faults == st.critical_window_faults,
	    "touching S took no fault (%llu before, %llu after), every byte right (%s)",
	    (unsigned long long)st.faults, (unsigned long long)st1.faults, ans);

	/* still in cycle 2's window: a storm of faults fills the set to its bound */
	vmm_cmd(&h, ans, "verify 2 2");
	st = stats(&h, NULL);
	tap(&h, !strcmp(ans, "ok") && st.critical_set_pages == PAGER_CRITICAL_MAX_PAGES,
	    "every byte verified; the set stays bounded at %llu pages",
	    (unsigned long long)st.critical_set_pages);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 3: a full set is restored in the size bound, then all is right */
	vmm_cmd(&h, ans, "fill 3");
	err = offload(&h);
	on_loop(&h, prepare_cb, &pc);
	st = stats(&h, NULL);
	tap(&h, !err && pc.ret == PAGER_CRITICAL_MAX_PAGES && !st.critical_budget_stops,
	    "full set: %d page(s) restored in %llu us", pc.ret,
	    (unsigned long long)(st.critical_last_restore_ns / 1000));
	vmm_cmd(&h, ans, "verify 3 2");
	tap(&h, !strcmp(ans, "ok"), "cycle 3: every byte verified (%s)", ans);
	on_loop(&h, delivered_cb, NULL);

	/* cycle 4: the time bound stops the restore after its first run */
	vmm_cmd(&h, ans, "fill 4");
	err = offload(&h);
	on_loop(&h, budget_cb, NULL);
	on_loop(&h, prepare_cb, &pc);
	st = stats(&h, NULL);
	tap(&h, !err && pc.ret > 0 && pc.ret < PAGER_CRITICAL_MAX_PAGES &&
	    st.critical_budget_stops == 1,
	    "time bound reached: %d page(s) restored, the rest left to faults", pc.ret);
	vmm_cmd(&h, ans, "verify 4 2");
	tap(&h, !strcmp(ans, "ok"), "cycle 4: every byte verified (%s)", ans);
	vmm_quit(&h);
	return harness_finish(&h);
}

int main(int argc, char **argv)
{
	uint64_t mib;

	if (argc >= 6 && !strcmp(argv[1], "--vmm")) {
		g_all_data = getenv("PAGER_ALL_DATA") != NULL;
		return vmm_main(strtoull(argv[2], NULL, 0), atoi(argv[3]),
				atoi(argv[4]), atoi(argv[5]));
	}
	signal(SIGPIPE, SIG_IGN);
	log_set_level(getenv("PAGER_DEBUG") ? LOG_DEBUG : LOG_WARN);
	if (geteuid() != 0 && access("/dev/userfaultfd", R_OK | W_OK)) {
		printf("1..0 # SKIP needs root or access to /dev/userfaultfd\n");
		return 0;
	}
	mib = argc >= 3 ? strtoull(argv[2], NULL, 0) : 0;
	if (argc >= 2 && !strcmp(argv[1], "storeerr"))
		return mode_storeerr(argv[0], mib ? mib : 8);
	if (argc >= 2 && !strcmp(argv[1], "critical"))
		return mode_critical(argv[0], mib ? mib : 16);
	if (argc >= 2 && !strcmp(argv[1], "cancel"))
		return mode_cancel(argv[0], mib ? mib : 64);
	if (argc >= 2 && !strcmp(argv[1], "eintr"))
		return mode_eintr(argv[0]);
	if (argc >= 2 && !strcmp(argv[1], "enospc"))
		return mode_enospc(argv[0], mib ? mib : 32);
	if (argc >= 4 && !strcmp(argv[1], "swap"))
		return mode_swap(mib, argv[3]);
	if (argc >= 2 && !strcmp(argv[1], "bench"))
		return mode_bench(argv[0], mib ? mib : 256);
	return mode_basic(argv[0], mib ? mib : 32);
}
