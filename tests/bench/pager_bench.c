// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_bench.c - the pager's figures for scripts/bench-pager.sh, JSON on
 * stdout, with the mock VMM of the pager tests (tests/lib/mockvmm.h).
 *
 *   pager_bench bench [MiB]      (default 256) evict (zero-copy, and through
 *                                a pread copy), fault latency, restore by
 *                                faults and by prefetch, zero-page evict
 *   pager_bench writeloop [MiB [PASSES [CYCLES]]]  (256, 8, 2) a write-
 *                                heavy loop over RAM restored by faults,
 *                                each cycle's time and faults (below)
 *   pager_bench swap MiB CGROUP  the peer, Linux swap: fill anonymous memory
 *                                in memory cgroup (v1) directory CGROUP,
 *                                reclaim it to swap by lowering the
 *                                cgroup's limit, touch it back
 *   pager_bench contended realtime|inherit [MiB]  (default 64) random
 *                                single-page faults (fault-around 1) in a
 *                                delivery window while CONTEND_WRITERS
 *                                threads write O_DIRECT to a file beside
 *                                the store, the window's reads in the
 *                                I/O class given (pager_config.
 *                                delivery_io_class): the faults' p50/p99
 *                                and what the writers got
 *   pager_bench maptouch [MiB]   (default 256) the host's own cost of
 *                                mapping a page again, without the pager:
 *                                a memfd's pages unmapped, then touched
 *                                (a minor fault each), or mapped by the
 *                                kernel (MADV_POPULATE_WRITE) and then
 *                                touched; what each costs the toucher
 *
 * Environment: PAGER_STORE_DIR (store directory; default a temp dir).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mockvmm.h"
#include "pager.h"

#define PREFETCH_POLL_US	200
/* contended: the other I/O on the store's device, as a VM's disk or
 * another VM's eviction makes it: this many O_DIRECT writers, each
 * CONTEND_WRITE_BYTES at a time over its own CONTEND_FILE_BYTES share */
#define CONTEND_WRITERS		8
#define CONTEND_WRITE_BYTES	(64u << 10)
#define CONTEND_FILE_BYTES	(256ull << 20)
#define CONTEND_WARMUP_US	200000

struct fa_call {
	uint32_t pages;
};

static void fault_around_cb(struct harness *h, void *arg)
{
	pager_set_fault_around(the_pager(h), ((struct fa_call *)arg)->pages);
}

/* The VM runs again, everything offloaded streams back. */
static void eager_resume_cb(struct harness *h, void *arg)
{
	(void)arg;
	pager_resume_restore(the_pager(h), PAGER_RESTORE_EAGER);
	pager_resumed(the_pager(h));
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
	double evict, evict_copy, zero_evict, restore_fault, restore_prefetch, reoffload_clean;
	uint64_t reoffload_written;
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
	/* 4. restore in the background: everything streams back (eager) */
	if (offload(&h))
		return 1;
	t0 = mono_ns();
	on_loop(&h, eager_resume_cb, NULL);
	do {
		usleep(PREFETCH_POLL_US);
		st = stats(&h, NULL);
	} while (st.pages[PAGE_OFFLOADED] || st.pages[PAGE_IN_FLIGHT]);
	restore_prefetch = gib_s(bytes, mono_ns() - t0);
	vmm_cmd(&h, ans, "verify 1 2");
	if (strcmp(ans, "ok"))
		return 1;
	/* 4b. re-offload of restored, unwritten pages: CLEAN, dropped with
	 * no store write when dirty tracking is on */
	if (offload(&h))
		return 1;
	st = stats(&h, NULL);
	reoffload_clean = gib_s(bytes, st.last_offload_ns);
	reoffload_written = st.last_offload_written;
	fprintf(stderr, "bench: re-offload: dirty tracking %s, %llu clean pages punched, "
		"%llu bytes written\n", pager_dirty_tracking_name(st.dirty_tracking),
		(unsigned long long)st.clean_punched_pages, (unsigned long long)reoffload_written);
	vmm_cmd(&h, ans, "touchall");
	/* 5. evict zero pages (allocated, all zero) */
	vmm_cmd(&h, ans, "zero");
	if (offload(&h))
		return 1;
	st = stats(&h, NULL);
	zero_evict = gib_s(bytes, st.last_offload_ns);
	/* 6. eviction through a copy (pread into a buffer, the fallback) of
	 * the RAM filled again */
	vmm_cmd(&h, ans, "fill 1");
	setenv("VMNAPD_OFFLOAD_COPY", "1", 1);
	err = offload(&h);
	unsetenv("VMNAPD_OFFLOAD_COPY");
	st = stats(&h, NULL);
	if (err)
		return 1;
	evict_copy = gib_s(st.last_offload_written, st.last_offload_ns);
	vmm_quit(&h);
	harness_stop(&h);
	printf("{\"bytes\": %llu, \"nonzero_bytes\": %llu, \"evict_gib_s\": %.3f, "
	       "\"evict_zero_copy_gib_s\": %.3f, \"evict_copy_gib_s\": %.3f, "
	       "\"zero_evict_gib_s\": %.3f, \"fault_p50_us\": %.1f, \"fault_p99_us\": %.1f, "
	       "\"restore_fault_gib_s\": %.3f, \"restore_prefetch_gib_s\": %.3f, "
	       "\"reoffload_clean_gib_s\": %.3f, \"reoffload_written_bytes\": %llu}\n",
	       (unsigned long long)bytes, (unsigned long long)bytes, evict, evict,
	       evict_copy, zero_evict,
	       (double)p50 / 1000.0, (double)p99 / 1000.0, restore_fault, restore_prefetch,
	       reoffload_clean, (unsigned long long)reoffload_written);
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
	restore_ns = touch_all(&v, 1);
	bad = verify(&v, 1, 1, 0, 0, false);
	if (bad >= 0) {
		fprintf(stderr, "swap: page %lld wrong after swap-in\n", (long long)bad);
		return 1;
	}
	printf("{\"swap_evict_gib_s\": %.3f, \"swap_restore_gib_s\": %.3f}\n",
	       gib_s(v.npages * PAGE, evict_ns), gib_s(v.npages * PAGE, restore_ns));
	return 0;
}

/*
 * A write-heavy loop in the mock VMM over guest RAM restored by faults,
 * @cycles cycles (offload, every page read back, the loop).  With dirty
 * tracking (VMNAPD_DIRTY_TRACKING unset) the pages of the first ("cold":
 * never seen written since a restore) come back write-protected and the
 * first write of each takes a WP fault the kernel resolves; the next
 * offload sees them written, so in the next cycles (a VM writing the same
 * pages between waits) they come back writable (write-hot) until their
 * writable restores run out, and then protected once (a fault per page
 * again) for twice as many (PAGER_HOT_CYCLES in pager.h).  With
 * VMNAPD_DIRTY_TRACKING=none they come back writable in every cycle.
 * Prints each cycle's loop time and faults.
 */
static int mode_writeloop(const char *self, uint64_t mib, unsigned int passes,
			  unsigned int cycles)
{
	struct harness h = { 0 };
	struct pager_stats st;
	char ans[LINE_MAX_LEN];
	unsigned long long *ns;
	long *flt;

	if (cycles < 1 || cycles > 1024)
		return 2;
	ns = calloc(cycles, sizeof(*ns));
	flt = calloc(cycles, sizeof(*flt));
	if (!ns || !flt)
		return 1;
	g_all_data = true;
	setenv("PAGER_ALL_DATA", "1", 1);
	if (harness_start(&h, NULL) || vmm_spawn(&h, self, mib, 1))
		return 1;
	read_line(h.from_vmm, ans, sizeof(ans));
	if (strcmp(ans, "ready"))
		return 1;
	for (unsigned int c = 0; c < cycles; c++) {
		if (offload(&h))
			return 1;
		vmm_cmd(&h, ans, "touchall");
		vmm_cmd(&h, ans, "writeloop %u", passes);
		if (sscanf(ans, "ok %llu %ld", &ns[c], &flt[c]) != 2)
			return 1;
	}
	st = stats(&h, NULL);
	vmm_quit(&h);
	harness_stop(&h);
	printf("{\"mib\": %llu, \"writeloop_ns\": [", (unsigned long long)mib);
	for (unsigned int c = 0; c < cycles; c++)
		printf("%s%llu", c ? ", " : "", ns[c]);
	printf("], \"writeloop_faults\": [");
	for (unsigned int c = 0; c < cycles; c++)
		printf("%s%ld", c ? ", " : "", flt[c]);
	printf("], \"hot_pages\": %llu, \"hot_again_pages\": %llu, \"hot_samples\": %llu, "
	       "\"hot_vouch_renewed_pages\": %llu, \"dirty_tracking\": \"%s\"}\n",
	       (unsigned long long)st.dirty_hot_pages,
	       (unsigned long long)st.dirty_hot_again_pages,
	       (unsigned long long)st.dirty_hot_samples,
	       (unsigned long long)st.dirty_hot_vouch_renewed_pages,
	       pager_dirty_tracking_name(st.dirty_tracking));
	free(ns);
	free(flt);
	return 0;
}

#define MAPTOUCH_ROUNDS	3

static uint64_t user_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull;
}

/* Touch every page of @p (@n pages) once; wall and user ns per page. */
static void touch_pages(volatile char *p, uint64_t n, double *wall, double *user)
{
	uint64_t t0 = now_ns(), u0 = user_ns();

	for (uint64_t i = 0; i < n; i++)
		p[i * PAGE]++;
	*wall = (double)(now_ns() - t0) / (double)n;
	*user = (double)(user_ns() - u0) / (double)n;
}

struct contend {
	int fd;
	atomic_bool stop;
	atomic_uint_fast64_t written;
	atomic_int err;
};

struct contend_writer {
	struct contend *c;
	unsigned int idx;
};

static void *contend_main(void *arg)
{
	struct contend_writer *w = arg;
	uint64_t share = CONTEND_FILE_BYTES / CONTEND_WRITERS;
	uint64_t base = w->idx * share, off = 0;
	void *buf = NULL;

	if (posix_memalign(&buf, PAGE, CONTEND_WRITE_BYTES)) {
		atomic_store(&w->c->err, ENOMEM);
		return NULL;
	}
	memset(buf, 0x5a, CONTEND_WRITE_BYTES);
	while (!atomic_load(&w->c->stop)) {
		if (pwrite(w->c->fd, buf, CONTEND_WRITE_BYTES, (off_t)(base + off)) !=
		    (ssize_t)CONTEND_WRITE_BYTES) {
			atomic_store(&w->c->err, errno ? errno : EIO);
			break;
		}
		atomic_fetch_add(&w->c->written, CONTEND_WRITE_BYTES);
		off = (off + CONTEND_WRITE_BYTES) % share;
	}
	free(buf);
	return NULL;
}

/*
 * Fault latency while other I/O shares the store's device, from a resume
 * to its delivery: the I/O class of the fault thread's reads there
 * decides whether they queue behind it.  One class per process;
 * scripts/bench-pager.sh runs both in pairs.
 */
static int mode_contended(const char *self, const char *cls, uint64_t mib)
{
	struct contend_writer w[CONTEND_WRITERS];
	pthread_t t[CONTEND_WRITERS];
	struct contend c = { .fd = -1 };
	struct harness h = { 0 };
	struct pager_config pcfg;
	struct pager_stats st;
	enum pager_io_class want;
	char ans[LINE_MAX_LEN], path[PATH_MAX + 16];
	unsigned long long p50 = 0, p99 = 0;
	uint64_t t0, ns, bytes;
	unsigned int n = 0;
	struct fa_call fa = { .pages = 1 };
	bool ok = false;

	if (pager_io_class_parse(cls, &want)) {
		fprintf(stderr, "contended: unknown I/O class %s\n", cls);
		return 2;
	}
	g_all_data = true;
	setenv("PAGER_ALL_DATA", "1", 1);	/* the VMM child fills all pages */
	pager_config_default(&pcfg, "");
	pcfg.delivery_io_class = (int)want;
	if (harness_start(&h, &pcfg) || vmm_spawn(&h, self, mib, 1))
		return 1;
	read_line(h.from_vmm, ans, sizeof(ans));
	if (strcmp(ans, "ready") || offload(&h))
		return 1;
	on_loop(&h, fault_around_cb, &fa);
	snprintf(path, sizeof(path), "%s/contend", h.store_dir);
	c.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
	if (c.fd < 0 || ftruncate(c.fd, (off_t)CONTEND_FILE_BYTES) < 0) {
		fprintf(stderr, "contended: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (; n < CONTEND_WRITERS; n++) {
		w[n] = (struct contend_writer){ .c = &c, .idx = n };
		if (pthread_create(&t[n], NULL, contend_main, &w[n]))
			break;
	}
	usleep(CONTEND_WARMUP_US);	/* the writers' queue is full */
	bytes = atomic_load(&c.written);
	on_loop(&h, data_window_cb, NULL);
	t0 = mono_ns();
	vmm_cmd(&h, ans, "lat");
	ns = mono_ns() - t0;
	on_loop(&h, delivered_cb, NULL);
	bytes = atomic_load(&c.written) - bytes;
	ok = n == CONTEND_WRITERS && !atomic_load(&c.err) &&
	     sscanf(ans, "ok %llu %llu", &p50, &p99) == 2;
	atomic_store(&c.stop, true);
	while (n)
		pthread_join(t[--n], NULL);
	close(c.fd);
	unlink(path);
	st = stats(&h, NULL);
	vmm_quit(&h);
	harness_stop(&h);
	if (!ok) {
		fprintf(stderr, "contended: %s (writers: %s)\n", ans,
			strerror(atomic_load(&c.err)));
		return 1;
	}
	printf("{\"delivery_io_class\": \"%s\", \"delivery_io_class_wanted\": \"%s\", "
	       "\"delivery_io_reads\": %llu, \"faults\": %llu, "
	       "\"fault_p50_us\": %.1f, \"fault_p99_us\": %.1f, \"writers_mib_s\": %.1f}\n",
	       pager_io_class_name(st.delivery_io_class), cls,
	       (unsigned long long)st.delivery_io_reads, (unsigned long long)st.faults,
	       (double)p50 / 1000.0,
	       (double)p99 / 1000.0, ns ? (double)bytes / (1 << 20) / ((double)ns / 1e9) : 0.0);
	return 0;
}

/*
 * What a VMM pays to use a page again once its mapping is gone, whoever
 * brings the page back: in a nested guest with shadow paging (this
 * project's test host) the hypervisor's fill of a new mapping is invisible
 * to the kernel and shows as the toucher's user time, charged to a VM's
 * CPU quota.  Best of MAPTOUCH_ROUNDS, ns per page.
 */
static int mode_maptouch(uint64_t mib)
{
	uint64_t n = (mib << 20) / PAGE;
	double w, u, fault_w = 1e18, fault_u = 1e18, map_w = 1e18, map_u = 1e18, hot_w = 1e18;
	bool populate = true;
	volatile char *p;
	int fd;

	fd = memfd_create("vmnap-maptouch", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)(n * PAGE)) < 0) {
		perror("maptouch: memfd");
		return 1;
	}
	p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("maptouch: mmap");
		return 1;
	}
	touch_pages(p, n, &w, &u);	/* allocate */
	for (int r = 0; r < MAPTOUCH_ROUNDS; r++) {
		touch_pages(p, n, &w, &u);	/* mapped: no fault */
		hot_w = w < hot_w ? w : hot_w;
		madvise((void *)p, n * PAGE, MADV_DONTNEED);	/* pages stay in the memfd */
		touch_pages(p, n, &w, &u);	/* a minor fault each */
		fault_w = w < fault_w ? w : fault_w;
		fault_u = u < fault_u ? u : fault_u;
		madvise((void *)p, n * PAGE, MADV_DONTNEED);
		if (populate && madvise((void *)p, n * PAGE, MADV_POPULATE_WRITE) < 0) {
			fprintf(stderr, "maptouch: MADV_POPULATE_WRITE: %s\n", strerror(errno));
			populate = false;
		}
		if (populate) {
			touch_pages(p, n, &w, &u);	/* mapped by the kernel */
			map_w = w < map_w ? w : map_w;
			map_u = u < map_u ? u : map_u;
		}
	}
	munmap((void *)p, n * PAGE);
	close(fd);
	printf("{\"pages\": %llu, \"mapped_touch_us\": %.3f, \"minor_fault_us\": %.3f, "
	       "\"minor_fault_user_us\": %.3f, ",
	       (unsigned long long)n, hot_w / 1000.0, fault_w / 1000.0, fault_u / 1000.0);
	if (populate)
		printf("\"remap_touch_us\": %.3f, \"remap_touch_user_us\": %.3f}\n",
		       map_w / 1000.0, map_u / 1000.0);
	else
		printf("\"remap_touch_us\": null, \"remap_touch_user_us\": null}\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	if (argc >= 4 && !strcmp(argv[1], "swap"))
		return mode_swap(mockvmm_arg(argc, argv, 2, 0), argv[3]);
	if (argc >= 2 && !strcmp(argv[1], "bench"))
		return mode_bench(argv[0], mockvmm_arg(argc, argv, 2, 256));
	if (argc >= 2 && !strcmp(argv[1], "writeloop"))
		return mode_writeloop(argv[0], mockvmm_arg(argc, argv, 2, 256),
				      (unsigned int)mockvmm_arg(argc, argv, 3, 8),
				      (unsigned int)mockvmm_arg(argc, argv, 4, 2));
	if (argc >= 2 && !strcmp(argv[1], "maptouch"))
		return mode_maptouch(mockvmm_arg(argc, argv, 2, 256));
	if (argc >= 3 && !strcmp(argv[1], "contended"))
		return mode_contended(argv[0], argv[2], mockvmm_arg(argc, argv, 3, 64));
	fprintf(stderr, "usage: %s bench [MiB] | writeloop [MiB [PASSES [CYCLES]]] | swap MiB CGROUP | "
		"maptouch [MiB] | contended realtime|inherit [MiB]\n",
		argv[0]);
	return 2;
}
