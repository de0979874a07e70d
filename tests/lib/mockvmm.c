// SPDX-License-Identifier: GPL-2.0-only
/*
 * mockvmm.c - the mock-VMM harness of the pager tests (mockvmm.h): the mock
 * VMM's side (guest RAM patterns, the command loop it serves) and the
 * harness's side (in-process vmnapd, pager calls on its loop thread).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
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
#include <sys/resource.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "mem_handshake.h"
#include "mockvmm.h"
#include "pager.h"
#include "vm_control.h"
#include "vmnapd.h"

#define LAT_SAMPLES	4000
#define PEEK_WAIT_MS	500	/* storeerr: "blocked" after this long */
#define PEEKWAIT_MS	30000	/* peekwait: a blocked peek's bound */

/* ---------------------------------------------------------------- patterns */

bool g_all_data;

enum page_kind page_kind(uint64_t i)
{
	if (g_all_data)
		return PK_DATA;
	return i % 7 == 3 ? PK_HOLE : i % 7 == 5 ? PK_ZERO : PK_DATA;
}

void page_pattern(uint64_t i, unsigned int round, uint64_t *w)
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

struct verify_job {
	struct vmm *v;
	unsigned int round, tid, nthreads;
	uint64_t zlo, zhi;	/* pages [zlo, zhi) expected zero */
	unsigned int flags;	/* VERIFY_* */
	int64_t bad;		/* first bad page or -1 */
};

void fill(struct vmm *v, unsigned int round)
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
		uint64_t i = (j->flags & VERIFY_REVERSE) ? j->v->npages - 1 - k : k;
		const void *exp = zero;

		if ((j->flags & VERIFY_TOUCH_RANGE) && i >= j->zlo && i < j->zhi) {
			(void)*(volatile char *)(j->v->mem + i * PAGE);
			continue;
		}
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

int64_t verify(struct vmm *v, unsigned int round, unsigned int nthreads,
	       uint64_t zlo, uint64_t zhi, unsigned int flags)
{
	pthread_t t[16];
	struct verify_job j[16];
	int64_t bad = -1;

	if (nthreads > 16)
		nthreads = 16;
	for (unsigned int i = 0; i < nthreads; i++) {
		j[i] = (struct verify_job){ v, round, i, nthreads, zlo, zhi, flags, -1 };
		pthread_create(&t[i], NULL, verify_thread, &j[i]);
	}
	for (unsigned int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		if (j[i].bad >= 0 && bad < 0)
			bad = j[i].bad;
	}
	return bad;
}

uint64_t mono_ns(void)
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
unsigned int crit_set(uint64_t npages, uint64_t *pgs)
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

/* Write round @round's contents over every page of S. */
static void write_set(struct vmm *v, unsigned int round)
{
	uint64_t pgs[CRIT_SET_MAX];
	unsigned int n = crit_set(v->npages, pgs);

	for (unsigned int k = 0; k < n; k++)
		page_pattern(pgs[k], round, (uint64_t *)(void *)(v->mem + pgs[k] * PAGE));
}

uint64_t touch_all(struct vmm *v, unsigned int streams)
{
	uint64_t t0 = mono_ns(), part = v->npages / streams;
	volatile char sink;

	for (uint64_t i = 0; i < part; i++)
		for (unsigned int s = 0; s < streams; s++)
			sink = v->mem[(s * part + i) * PAGE];
	for (uint64_t i = part * streams; i < v->npages; i++)
		sink = v->mem[i * PAGE];
	(void)sink;
	return mono_ns() - t0;
}

/* The page faults (minor and major) @who took since @ru0. */
static long faults_since(int who, const struct rusage *ru0)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (ru.ru_minflt - ru0->ru_minflt) + (ru.ru_majflt - ru0->ru_majflt);
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

int read_line(int fd, char *buf, size_t len)
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
static struct peek pk;	/* outlives a blocked thread */

/* The last peek, once it ends (bounded by PEEKWAIT_MS): its value. */
static void peek_wait(int out)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += PEEKWAIT_MS / 1000;
	if (sem_timedwait(&pk.done, &ts))
		send_line(out, "blocked");
	else
		send_line(out, "value %#llx", (unsigned long long)pk.value);
}

static void peek(struct vmm *v, uint64_t i, int out)
{
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

/* Give pages [lo, hi) back as a VMM does; "ok" or what failed. */
static const char *discard(struct vmm *v, uint64_t lo, uint64_t hi, const char *how)
{
	static char why[LINE_MAX_LEN];
	char *a = v->mem + lo * PAGE;
	size_t len = (hi - lo) * PAGE;
	int r;

	if (!strcmp(how, "remove")) {
		r = madvise(a, len, MADV_REMOVE);
	} else if (!strcmp(how, "dontneed")) {
		r = madvise(a, len, MADV_DONTNEED);
	} else if (!strcmp(how, "qemu") || !strcmp(how, "memfd")) {
		/* ram_block_discard_range(), or its punch alone: no event */
		r = fallocate(v->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)(lo * PAGE), (off_t)len);
		if (!r && !strcmp(how, "qemu"))
			r = madvise(a, len, MADV_DONTNEED);
	} else {
		return "unknown discard";
	}
	if (!r)
		return "ok";
	snprintf(why, sizeof(why), "discard %s: %s", how, strerror(errno));
	return why;
}

/* Move guest RAM to another address (mremap), as a VMM may; @squat: then
 * map other memory where it was. */
static const char *remap(struct vmm *v, bool squat)
{
	static char why[LINE_MAX_LEN];
	size_t len = v->npages * PAGE;
	/* a free spot: reserve it, then move onto it */
	void *to = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *got;

	if (to == MAP_FAILED)
		return "mmap: no room";
	got = mremap(v->mem, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (got == MAP_FAILED) {
		snprintf(why, sizeof(why), "mremap: %s", strerror(errno));
		munmap(to, len);
		return why;
	}
	if (squat && mmap(v->mem, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != v->mem)
		return "squat: no room";
	v->mem = got;
	return "ok";
}

/*
 * Racing writers (dirty tracking): threads that keep rewriting their share
 * of the data pages with new rounds, remembering each page's last round,
 * so that "stormcheck" can check every page against what was written last.
 */
#define STORM_MAX_THREADS	8

struct storm_thread {
	struct vmm *v;
	pthread_t t;
	unsigned int slot, slots;	/* pages i with i % slots == slot */
	uint64_t writes;
};

static struct {
	uint32_t *last;		/* per page: round written last (0: zero page) */
	bool *theirs;		/* the other mapper's writers own the page */
	struct storm_thread th[STORM_MAX_THREADS];
	unsigned int n;
	volatile bool stop;
} storm;

static void *storm_thread(void *arg)
{
	struct storm_thread *t = arg;
	uint64_t w[PAGE / 8];

	while (!storm.stop) {
		for (uint64_t i = t->slot; i < t->v->npages && !storm.stop; i += t->slots) {
			uint32_t k;

			if (page_kind(i) != PK_DATA)
				continue;
			k = storm.last[i] + 1000;
			page_pattern(i, k, w);
			memcpy(t->v->mem + i * PAGE, w, PAGE);
			__atomic_store_n(&storm.last[i], k, __ATOMIC_RELEASE);
			t->writes++;
		}
	}
	return NULL;
}

static const char *storm_cmd(struct vmm *v, const char *line)
{
	static char ans[LINE_MAX_LEN];
	unsigned int round, n, part, parts;

	if (sscanf(line, "storm init %u", &round) == 1) {
		free(storm.last);
		free(storm.theirs);
		storm.last = calloc(v->npages, sizeof(*storm.last));
		storm.theirs = calloc(v->npages, sizeof(*storm.theirs));
		if (!storm.last || !storm.theirs)
			return "no memory";
		for (uint64_t i = 0; i < v->npages; i++)
			storm.last[i] = page_kind(i) == PK_DATA ? round : 0;
		return "ok";
	}
	if (sscanf(line, "storm set %u %u %u", &n, &part, &round) == 3) {
		/* pages [n, part) were written with @round by someone else */
		if (!storm.last || n >= part || part > v->npages)
			return "bad storm";
		for (uint64_t i = n; i < part; i++)
			storm.last[i] = round;
		return "ok";
	}
	if (sscanf(line, "storm start %u %u %u", &n, &part, &parts) == 3) {
		if (!storm.last || storm.n || !n || n > STORM_MAX_THREADS || part >= parts)
			return "bad storm";
		storm.stop = false;
		for (uint64_t i = 0; i < v->npages; i++)	/* checked over there */
			storm.theirs[i] |= i % (n * parts) / n != part;
		for (unsigned int i = 0; i < n; i++) {
			storm.th[i] = (struct storm_thread){ .v = v, .slot = part * n + i,
							     .slots = n * parts };
			pthread_create(&storm.th[i].t, NULL, storm_thread, &storm.th[i]);
		}
		storm.n = n;
		return "ok";
	}
	if (!strcmp(line, "storm stop")) {
		uint64_t writes = 0;

		storm.stop = true;
		for (unsigned int i = 0; i < storm.n; i++) {
			pthread_join(storm.th[i].t, NULL);
			writes += storm.th[i].writes;
		}
		storm.n = 0;
		snprintf(ans, sizeof(ans), "ok %llu", (unsigned long long)writes);
		return ans;
	}
	if (!strcmp(line, "stormcheck")) {
		uint64_t w[PAGE / 8];

		if (!storm.last)
			return "no storm";
		for (uint64_t i = 0; i < v->npages; i++) {
			bool good;

			if (storm.theirs[i])
				continue;
			if (storm.last[i]) {
				page_pattern(i, storm.last[i], w);
				good = !memcmp(v->mem + i * PAGE, w, PAGE);
			} else {
				memset(w, 0, sizeof(w));
				good = !memcmp(v->mem + i * PAGE, w, PAGE);
			}
			if (!good) {
				snprintf(ans, sizeof(ans), "bad page %llu", (unsigned long long)i);
				return ans;
			}
		}
		return "ok";
	}
	return "unknown";
}

static int vmm_serve(struct vmm *v, int in, int out)
{
	char line[LINE_MAX_LEN];

	while (read_line(in, line, sizeof(line)) == 0) {
		unsigned int round, threads;
		unsigned long long zlo = 0, zhi = 0;
		char how[16];
		int rev = 0;

		if (!strncmp(line, "storm", 5)) {
			send_line(out, "%s", storm_cmd(v, line));
		} else if (!strncmp(line, "peer ", 5) && v->peer >= 0) {
			char pl[LINE_MAX_LEN];

			send_line(v->peer, "%s", line + 5);
			if (read_line(v->peer, pl, sizeof(pl)))
				snprintf(pl, sizeof(pl), "peer gone");
			send_line(out, "%s", pl);
		} else if (sscanf(line, "fill %u", &round) == 1) {
			fill(v, round);
			send_line(out, "ok");
		} else if (sscanf(line, "verify %u %u %llu %llu %d", &round, &threads,
				  &zlo, &zhi, &rev) >= 2) {
			int64_t bad, peer_bad = -1;
			char pl[LINE_MAX_LEN];

			bool peer = v->peer >= 0 && !v->peer_unmapped;

			if (peer)
				send_line(v->peer, "verify %u %u %llu %llu %d", round,
					  threads, zlo, zhi, rev ^ VERIFY_REVERSE);
			bad = verify(v, round, threads, zlo, zhi, (unsigned int)rev);
			if (peer) {
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
		} else if (sscanf(line, "punch %llu", &zlo) == 1) {
			/* the VMM discards a page itself (as a balloon does) */
			if (zlo < v->npages &&
			    !madvise(v->mem + zlo * PAGE, PAGE, MADV_REMOVE))
				send_line(out, "ok");
			else
				send_line(out, "punch: %s", strerror(errno));
		} else if (!strcmp(line, "peekwait")) {
			peek_wait(out);
		} else if (sscanf(line, "read %llu", &zlo) == 1 && zlo < v->npages) {
			/* here, not in a thread: the answer waits for the fault */
			send_line(out, "value %#llx", (unsigned long long)
				  *(const volatile uint64_t *)(const void *)(v->mem + zlo * PAGE));
		} else if (sscanf(line, "touch %llu %llu %u", &zlo, &zhi, &round) >= 2 &&
			   zlo < zhi && zhi <= v->npages) {
			/* read a word of every STRIDE-th page in [LO, HI) */
			uint64_t acc = 0, stride = sscanf(line, "touch %*u %*u %u", &round) == 1 &&
						   round ? round : 1;

			for (uint64_t i = zlo; i < zhi; i += stride)
				acc += *(const volatile uint64_t *)(const void *)(v->mem + i * PAGE);
			send_line(out, "ok %llu", (unsigned long long)acc);
		} else if (sscanf(line, "touchdown %llu %llu", &zlo, &zhi) == 2 &&
			   zlo < zhi && zhi <= v->npages) {
			/* read a word of every page in [LO, HI), from the top */
			uint64_t acc = 0;

			for (uint64_t i = zhi; i-- > zlo;)
				acc += *(const volatile uint64_t *)(const void *)(v->mem + i * PAGE);
			send_line(out, "ok %llu", (unsigned long long)acc);
		} else if (!strcmp(line, "zero")) {
			memset(v->mem, 0, v->npages * PAGE);
			send_line(out, "ok");
		} else if (!strcmp(line, "lat")) {
			uint64_t p50, p99;

			touch_latency(v, &p50, &p99);
			send_line(out, "ok %llu %llu", (unsigned long long)p50,
				  (unsigned long long)p99);
		} else if (sscanf(line, "touchset %u", &round) == 1) {
			/* answers the host page faults reading S took too */
			struct rusage ru0;
			int64_t bad;

			getrusage(RUSAGE_THREAD, &ru0);
			bad = touch_set(v, round);
			if (bad >= 0)
				send_line(out, "bad page %lld", (long long)bad);
			else
				send_line(out, "ok %ld", faults_since(RUSAGE_THREAD, &ru0));
		} else if (sscanf(line, "writeset %u", &round) == 1) {
			/* answers the host page faults the writes took */
			struct rusage ru0;

			getrusage(RUSAGE_THREAD, &ru0);
			write_set(v, round);
			send_line(out, "ok %ld", faults_since(RUSAGE_THREAD, &ru0));
		} else if (sscanf(line, "writerange %llu %llu %u", &zlo, &zhi, &round) == 3 &&
			   zlo < zhi && zhi <= v->npages) {
			for (uint64_t i = zlo; i < zhi; i++)
				if (page_kind(i) == PK_DATA)
					page_pattern(i, round,
						     (uint64_t *)(void *)(v->mem + i * PAGE));
			send_line(out, "ok");
		} else if (sscanf(line, "writeloop %u", &round) == 1) {
			/* a write-heavy loop: a word in every page, @round passes;
			 * answers its time and the page faults it took */
			uint64_t t0 = mono_ns();
			struct rusage ru0;

			getrusage(RUSAGE_SELF, &ru0);

			for (unsigned int k = 0; k < round; k++)
				for (uint64_t i = 0; i < v->npages; i++)
					((volatile uint64_t *)(void *)(v->mem + i * PAGE))[k % (PAGE / 8)] =
						i ^ k;
			t0 = mono_ns() - t0;
			send_line(out, "ok %llu %ld", (unsigned long long)t0,
				  faults_since(RUSAGE_SELF, &ru0));
		} else if (!strcmp(line, "touchall") ||
			   (sscanf(line, "touchall %u", &round) == 1 && round >= 1 &&
			    round <= v->npages)) {
			/* and the host page faults the reads took */
			struct rusage ru0;
			uint64_t ns;

			getrusage(RUSAGE_THREAD, &ru0);
			ns = touch_all(v, strcmp(line, "touchall") ? round : 1);
			send_line(out, "ok %llu %ld", (unsigned long long)ns,
				  faults_since(RUSAGE_THREAD, &ru0));
		} else if (sscanf(line, "discard %llu %llu %15s", &zlo, &zhi, how) == 3 &&
			   zlo < zhi && zhi <= v->npages) {
			send_line(out, "%s", discard(v, zlo, zhi, how));
		} else if (!strcmp(line, "peerunmap") && v->peer >= 0) {
			char pl[LINE_MAX_LEN];

			send_line(v->peer, "unmap");
			if (read_line(v->peer, pl, sizeof(pl)))
				snprintf(pl, sizeof(pl), "peer gone");
			v->peer_unmapped = !strcmp(pl, "ok");
			send_line(out, "%s", pl);
		} else if (!strcmp(line, "pid")) {
			send_line(out, "ok %d", (int)getpid());
		} else if (!strcmp(line, "unmap")) {
			int r = munmap(v->mem, v->npages * PAGE);

			v->mem = NULL;
			send_line(out, r ? "munmap: %s" : "ok", strerror(errno));
		} else if (!strcmp(line, "remap") || !strcmp(line, "remap squat")) {
			send_line(out, "%s", remap(v, line[5] == ' '));
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
	struct vmm v = { .npages = (mib << 20) / PAGE, .peer = -1, .memfd = -1 };
	size_t size = v.npages * PAGE;
	int memfd, sp[2];
	char line[LINE_MAX_LEN];

	/* sealed against resizing, as QEMU's memory-backend-memfd (seal=on) */
	memfd = memfd_create("memory-backend-memfd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0 || ftruncate(memfd, (off_t)size) < 0 ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK) < 0)
		return 2;
	v.memfd = memfd;
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
void on_loop(struct harness *h, void (*fn)(struct harness *, void *), void *arg)
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

int harness_start(struct harness *h, const struct pager_config *pcfg_in)
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
	sem_init(&h->resident_done, 0, 0);
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

void harness_stop(struct harness *h)
{
	char cmd[PATH_MAX + 16];

	on_loop(h, stop_cb, NULL);
	pthread_join(h->loop_thread, NULL);
	pager_reapers_wait();	/* vm_free handed the pagers to reapers */
	loop_free(h->d.loop);
	if (h->mounted)
		umount2(h->store_dir, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", h->dir);
}

int vmm_spawn(struct harness *h, const char *self, uint64_t mib, int mappers)
{
	return vmm_spawn_opts(h, self, mib, mappers, NULL, false);
}

int vmm_spawn_opts(struct harness *h, const char *self, uint64_t mib,
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
		setenv("VMNAP_VM", harness_vm(h), 1);
		/* the mock VMM's guest-physical layout is its memfd */
		setenv("VMNAP_GPA_LAYOUT", "linear", 1);
		if (allow_unmanaged)
			setenv("VMNAP_ALLOW_UNMANAGED", "1", 1);
		if (h->signal_storm)
			setenv("MOCKVMM_SIGNAL_STORM", "1", 1);
		/* MOCKVMM_EXE: another build of the program as the VMM (e.g. an
		 * uninstrumented one under a ThreadSanitizer harness) */
		if (getenv("MOCKVMM_EXE") && *getenv("MOCKVMM_EXE"))
			self = getenv("MOCKVMM_EXE");
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
void vmm_cmd(struct harness *h, char *ans, const char *fmt, ...)
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

struct pager *the_pager(struct harness *h)
{
	struct vm *vm = vm_find(&h->d, harness_vm(h));

	return vm ? vm->pager : NULL;
}

bool page_in_memfd(int fd, uint64_t off, uint64_t pg, unsigned int round, bool *ok)
{
	uint64_t want[PAGE / 8], got[PAGE / 8];
	off_t at = (off_t)(off + pg * PAGE);

	if (lseek(fd, at, SEEK_DATA) != at)
		return false;
	page_pattern(pg, round, want);
	if (pread(fd, got, PAGE, at) != PAGE || memcmp(got, want, PAGE))
		*ok = false;
	return true;
}

void set_resident_cb(struct harness *h, void *arg)
{
	struct set_resident_call *sc = arg;
	uint64_t pgs[CRIT_SET_MAX], off;
	struct pager_stats st;
	int fd;

	pager_get_stats(the_pager(h), &st);
	sc->n = crit_set(st.pages_total, pgs);
	sc->resident = 0;
	sc->contents_ok = !pager_gpa_to_memfd(the_pager(h), 0, &fd, &off);
	for (unsigned int k = 0; sc->contents_ok && k < sc->n; k++)
		sc->resident += page_in_memfd(fd, off, pgs[k], sc->round, &sc->contents_ok);
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

struct pager_stats stats(struct harness *h, bool *have)
{
	struct stats_call sc = { 0 };

	on_loop(h, stats_cb, &sc);
	if (have)
		*have = sc.have;
	return sc.st;
}

struct pager_stats stats_until_unstuck(struct harness *h, int max_polls)
{
	struct pager_stats st = stats(h, NULL);

	for (int polls = 1; st.faults_stuck && polls < max_polls; polls++) {
		usleep(20000);
		st = stats(h, NULL);
	}
	return st;
}

#define STATS_UNTIL_POLLS	500
#define STATS_UNTIL_US		20000

struct pager_stats stats_until(struct harness *h, size_t field, uint64_t want)
{
	struct pager_stats st = stats(h, NULL);

	for (int i = 0; i < STATS_UNTIL_POLLS; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&st + field, sizeof(v));
		if (v >= want)
			break;
		usleep(STATS_UNTIL_US);
		st = stats(h, NULL);
	}
	return st;
}

struct pager_stats stats_settled(struct harness *h)
{
	struct pager_stats st = stats(h, NULL);

	for (int polls = 1; st.pages[PAGE_IN_FLIGHT] && polls < STATS_SETTLED_POLLS; polls++) {
		usleep(10000);
		st = stats(h, NULL);
	}
	return st;
}

static void test_error_cb(struct pager *p, int err, const char *what, void *arg)
{
	struct harness *h = arg;

	(void)p;
	h->pager_err = err;
	h->pager_err_what = what;
	sem_post(&h->pager_error);
}

void catch_pager_errors(struct harness *h, void *arg)
{
	(void)arg;
	pager_set_error_cb(the_pager(h), test_error_cb, h);
}

void vm_pager_errors(struct harness *h, void *arg)
{
	struct vm *vm = vm_find(&h->d, harness_vm(h));

	(void)arg;
	if (vm)
		vm_control_pager_attached(vm);
}

static void lost_cb(struct harness *h, void *arg)
{
	struct lost_view *lv = arg;
	struct vm *vm = vm_find(&h->d, harness_vm(h));
	json_t *o;

	memset(lv, 0, sizeof(*lv));
	lv->vms_lost = h->d.vms_lost;
	if (!vm)
		return;
	lv->lost_err = vm->lost_err;
	lv->pager = vm->pager != NULL;
	o = vm_control_json(vm);
	snprintf(lv->state, sizeof(lv->state), "%s",
		 json_string_value(json_object_get(o, "state")) ?: "");
	snprintf(lv->error, sizeof(lv->error), "%s",
		 json_string_value(json_object_get(o, "error")) ?: "");
	json_decref(o);
}

struct lost_view wait_lost(struct harness *h, int max_polls)
{
	struct lost_view lv;

	on_loop(h, lost_cb, &lv);
	for (int polls = 1; (!lv.lost_err || lv.pager) && polls < max_polls; polls++) {
		usleep(20000);
		on_loop(h, lost_cb, &lv);
	}
	return lv;
}

bool wait_pager_gone(struct harness *h, int max_polls)
{
	bool have;

	(void)stats(h, &have);
	for (int polls = 1; have && polls < max_polls; polls++) {
		usleep(20000);
		(void)stats(h, &have);
	}
	if (!have)
		pager_reapers_wait();	/* its teardown (fds, store) finished */
	return !have;
}

int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return pid ? n : n - 1;	/* not the DIR's own */
}

static void offload_done(struct pager *p, int err, void *arg)
{
	struct harness *h = arg;

	(void)p;
	h->offload_err = err;
	sem_post(&h->offload_done);
}

void offload_cb(struct harness *h, void *arg)
{
	struct offload_call *oc = arg;
	struct pager *p = the_pager(h);

	oc->err = p ? pager_offload_start(p, offload_done, h) : -ENOENT;
}

int precopy_start_retry(struct pager *p, void (*done)(struct pager *p, int err, void *arg),
			void *arg)
{
	int err = -EBUSY;

	for (int i = 0; i < PRECOPY_BUSY_TRIES && err == -EBUSY; i++) {
		const struct timespec ts = { .tv_nsec = 10 * 1000000L };

		if (i)
			nanosleep(&ts, NULL);
		err = pager_precopy_start(p, done, arg);
	}
	return err;
}

static void precopy_cb(struct harness *h, void *arg)
{
	struct offload_call *oc = arg;
	struct pager *p = the_pager(h);

	oc->err = p ? precopy_start_retry(p, offload_done, h) : -ENOENT;
}

/* Start an offload or a pre-copy with @start on the loop, and wait for it. */
static int offload_wait(struct harness *h, void (*start)(struct harness *h, void *arg))
{
	struct offload_call oc;

	on_loop(h, start, &oc);
	if (oc.err)
		return oc.err;
	while (sem_wait(&h->offload_done) && errno == EINTR)
		;
	return h->offload_err;
}

int precopy(struct harness *h)
{
	return offload_wait(h, precopy_cb);
}

/* Offload and wait; returns the done callback's error. */
int offload(struct harness *h)
{
	return offload_wait(h, offload_cb);
}

static void resident_done(struct pager *p, void *arg)
{
	struct harness *h = arg;

	(void)p;
	sem_post(&h->resident_done);
}

static void resident_async_cb(struct harness *h, void *arg)
{
	struct resident_call *rc = arg;
	struct pager *p = the_pager(h);

	if (!p) {
		rc->err = -ENOENT;
		return;
	}
	pager_set_resident_cb(p, resident_done, h);
	rc->err = pager_make_resident_async(p, rc->gpa, rc->len);
}

int resident_async(struct harness *h, uint64_t gpa, uint64_t len, bool *told)
{
	struct resident_call rc = { .gpa = gpa, .len = len };
	struct timespec ts;

	while (!sem_trywait(&h->resident_done))
		;	/* callbacks of earlier requests */
	on_loop(h, resident_async_cb, &rc);
	*told = false;
	if (rc.err != -EAGAIN)
		return rc.err;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += RESIDENT_WAIT_S;
	while (sem_timedwait(&h->resident_done, &ts) && errno == EINTR)
		;
	*told = errno != ETIMEDOUT;
	return rc.err;
}

void resumed_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resumed(the_pager(h));
}

void data_window_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_data_window(the_pager(h));
}

void delivered_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_delivered(the_pager(h));
}

int wait_vmm_exit(struct harness *h)
{
	int status = 0;

	waitpid(h->vmm, &status, 0);
	close(h->to_vmm);
	close(h->from_vmm);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Tell the mock VMM to quit; its exit status as wait_vmm_exit() gives it. */
int vmm_quit(struct harness *h)
{
	char ans[LINE_MAX_LEN];

	vmm_cmd(h, ans, "quit");
	return wait_vmm_exit(h);
}

int mockvmm_init(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "--vmm")) {
		g_all_data = getenv("PAGER_ALL_DATA") != NULL;
		exit(vmm_main(strtoull(argv[2], NULL, 0), atoi(argv[3]),
			      atoi(argv[4]), atoi(argv[5])));
	}
	signal(SIGPIPE, SIG_IGN);
	log_set_level(getenv("PAGER_DEBUG") ? LOG_DEBUG : LOG_WARN);
	if (geteuid() != 0 && access("/dev/userfaultfd", R_OK | W_OK)) {
		tap_skip_all("needs root or access to /dev/userfaultfd");
		return 1;
	}
	return 0;
}

uint64_t mockvmm_arg(int argc, char **argv, int i, uint64_t dflt)
{
	uint64_t v = argc > i ? strtoull(argv[i], NULL, 0) : 0;

	return v ? v : dflt;
}

/* ---------------------------------------------------- a vmnapd process */

static char g_vmnapd[PATH_MAX];
static pid_t g_pid = -1;

int vmnapd_setup(struct harness *h, const char *tag)
{
	snprintf(g_vmnapd, sizeof(g_vmnapd), "%s/vmnapd",
		 getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build");
	if (access(g_vmnapd, X_OK)) {
		tap_skip_all("no %s (make all)", g_vmnapd);
		return 1;
	}
	snprintf(h->dir, sizeof(h->dir), "/tmp/vmnap-%s-XXXXXX", tag);
	if (!mkdtemp(h->dir)) {
		tap_bail("mkdtemp: %s", strerror(errno));
		return -1;
	}
	snprintf(h->run_dir, sizeof(h->run_dir), "%s/run", h->dir);
	snprintf(h->store_dir, sizeof(h->store_dir), "%s/store", h->dir);
	mkdir(h->run_dir, 0700);
	mkdir(h->store_dir, 0700);
	return 0;
}

void vmnapd_finish(struct harness *h, bool failed)
{
	char cmd[PATH_MAX + 16];

	vmnapd_kill(SIGTERM);
	if (!failed && !getenv("KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
		if (system(cmd))
			tap_diag("cannot remove %s", h->dir);
	} else {
		tap_diag("kept %s (vmnapd-N.log)", h->dir);
	}
}

pid_t vmnapd_pid(void)
{
	return g_pid;
}

/* One request on a unix socket; the whole answer (until EOF) in @out. */
static int usock_req(const char *path, const char *req, char *out, size_t max)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t got = 0;
	int s;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(s, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(s);
		return -1;
	}
	while (got < max - 1) {
		ssize_t r = read(s, out + got, max - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	out[got] = 0;
	close(s);
	return got ? 0 : -1;
}

/* The pager-debug endpoint: one line in, one JSON document out. */
json_t *vmnapd_dbg(struct harness *h, const char *cmd)
{
	char path[PATH_MAX + 32], req[128], buf[1 << 16];

	snprintf(path, sizeof(path), "%s/pager-debug.sock", h->run_dir);
	snprintf(req, sizeof(req), "%s\n", cmd);
	if (usock_req(path, req, buf, sizeof(buf)))
		return NULL;
	return json_loads(buf, 0, NULL);
}

/* @method /vms/mock on the control API: the HTTP status (0: no answer) and
 * the JSON body, if any, in *@body (NULL: not wanted). */
int vmnapd_api_vm(struct harness *h, const char *method, json_t **body)
{
	char path[PATH_MAX + 32], req[256], buf[1 << 16], *b;
	int status = 0;

	snprintf(path, sizeof(path), "%s/api.sock", h->run_dir);
	snprintf(req, sizeof(req), "%s /vms/" VM_NAME " HTTP/1.1\r\nHost: x\r\n"
		 "Connection: close\r\n\r\n", method);
	if (body)
		*body = NULL;
	if (usock_req(path, req, buf, sizeof(buf)) ||
	    sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return 0;
	b = strstr(buf, "\r\n\r\n");
	if (body && b)
		*body = json_loads(b + 4, 0, NULL);
	return status;
}

/* GET /vms/mock from the control API: the JSON body or NULL. */
json_t *api_vm(struct harness *h)
{
	json_t *j;

	vmnapd_api_vm(h, "GET", &j);
	return j;
}

json_int_t jint(json_t *o, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	if (c)
		v = json_object_get(v, c);
	return json_integer_value(v);
}

void vmnapd_spawn(struct harness *h, int n)
{
	char log[PATH_MAX + 32], sock[PATH_MAX + 32];

	snprintf(log, sizeof(log), "%s/vmnapd-%d.log", h->dir, n);
	g_pid = fork();
	if (g_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(g_vmnapd, g_vmnapd, "-r", h->run_dir, "-s", h->store_dir, "-l", "info",
		      (char *)NULL);
		_exit(127);
	}
	snprintf(sock, sizeof(sock), "%s/pager-debug.sock", h->run_dir);
	for (int i = 0; i < WAIT_POLLS; i++) {
		json_t *j = vmnapd_dbg(h, "list");

		if (j) {
			json_decref(j);
			return;
		}
		usleep(POLL_US);
	}
}

int vmnapd_kill(int sig)
{
	int st = -1;

	if (g_pid <= 0)
		return -1;
	kill(g_pid, sig);
	waitpid(g_pid, &st, 0);
	g_pid = -1;
	return st;
}

/* Wait until the VM's pager (re)appears with a mapper; its stats. */
json_t *wait_vm(struct harness *h)
{
	for (int i = 0; i < WAIT_POLLS; i++) {
		json_t *j = vmnapd_dbg(h, "stats " VM_NAME);

		if (j && json_is_true(json_object_get(j, "ok")) &&
		    jint(j, "stats", "mappers", NULL) > 0)
			return j;
		json_decref(j);
		usleep(POLL_US);
	}
	return NULL;
}
