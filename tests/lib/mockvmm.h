/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * mockvmm.h - the pager end to end on real kernel objects, with a mock VMM:
 * the harness shared by the pager_* integration tests and the pager
 * benchmark (tests/bench/pager_bench.c).
 *
 * The mock VMM is the test program itself re-executed with --vmm under
 * LD_PRELOAD=libvmnap-preload.so (mockvmm_init() runs it); it maps a memfd
 * named "memory-backend-memfd", so its guest RAM reaches the in-process
 * vmnapd side (memory handshake server, pager, event loop on its own
 * thread) through the real preload path.  userfaultfd, memfd and io_uring
 * are real; nothing is mocked but the VMM.  The harness talks to it in
 * lines (vmm_cmd(): fill, verify, peek, peekwait, punch, read, touch, zero,
 * lat, touchset, touchall, discard, peerunmap, remap, quit) and runs pager
 * calls on the loop thread (on_loop()).
 *
 *   verify ROUND THREADS [ZLO ZHI [FLAGS]]  every page's contents (VERIFY_*)
 *   read PAGE   the first word of PAGE ("value 0x..."), answered once
 *            its fault is served (peek: from a thread, with a time limit)
 *   discard LO HI remove|dontneed|qemu  give pages [LO, HI) back as a VMM
 *            does: MADV_REMOVE, MADV_DONTNEED, or QEMU's balloon discard
 *            (punch the memfd, then MADV_DONTNEED)
 *   touch LO HI [STRIDE]  read a word of every STRIDE-th page in [LO, HI)
 *   peerunmap   the second mapper munmaps its guest RAM (memory unplug)
 *   remap [squat]  move the guest RAM mapping elsewhere (mremap); squat:
 *            then map anonymous memory where it was
 *
 * Environment: PAGER_STORE_DIR (store directory; default a temp dir),
 * PAGER_DEBUG (debug log), BUILD (where libvmnap-preload.so is),
 * MOCKVMM_EXE (run this build of the test program as the mock VMM: an
 * uninstrumented one when the harness runs under ThreadSanitizer).
 */
#ifndef VMNAP_TESTS_MOCKVMM_H
#define VMNAP_TESTS_MOCKVMM_H

#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pager.h"
#include "tap.h"
#include "vmnapd.h"

#define PAGE		4096u
#define VM_NAME		"mock"
#define LINE_MAX_LEN	256
#define SIGNAL_STORM_US		100	/* eintr: SIGALRM period in the VMM */
/* critical: the set S the "guest" touches after a resume - a run and
 * scattered pages, data pages only (they are offloaded, not ZERO) */
#define CRIT_RUN_FIRST		100
#define CRIT_RUN_PAGES		40
#define CRIT_SCATTER_FIRST	1000
#define CRIT_SCATTER_STRIDE	13
#define CRIT_SCATTER_PAGES	60
#define CRIT_SET_MAX		(CRIT_RUN_PAGES + CRIT_SCATTER_PAGES)

/* ---------------------------------------------------------------- patterns */

enum page_kind { PK_DATA, PK_HOLE, PK_ZERO };

extern bool g_all_data;	/* bench: every page data */

enum page_kind page_kind(uint64_t i);
/* Page @i's contents in round @round (PAGE bytes into @w). */
void page_pattern(uint64_t i, unsigned int round, uint64_t *w);
/* critical: the pages of S (data pages only) into @pgs; returns how many */
unsigned int crit_set(uint64_t npages, uint64_t *pgs);
uint64_t mono_ns(void);

/* ---------------------------------------------------------------- mock VMM */

struct vmm {
	char *mem;
	uint64_t npages;
	int peer;		/* second mapper's control socket, or -1 */
	bool peer_unmapped;	/* the second mapper unmapped its guest RAM */
	int memfd;
};

/* verify flags (the command's last field) */
#define VERIFY_REVERSE		1	/* walk the pages backwards */
#define VERIFY_TOUCH_RANGE	2	/* pages [zlo, zhi) only read, any content */

void fill(struct vmm *v, unsigned int round);
/* Check every page from @nthreads threads; pages [zlo, zhi) expected zero
 * (with VERIFY_TOUCH_RANGE: only read); the first bad page or -1. */
int64_t verify(struct vmm *v, unsigned int round, unsigned int nthreads,
	       uint64_t zlo, uint64_t zhi, unsigned int flags);
/* Touch every page in order; the time it took in ns. */
uint64_t touch_all(struct vmm *v);
int read_line(int fd, char *buf, size_t len);

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
};

/* First thing in main(): as the mock VMM (--vmm ...) run it and exit; else
 * prepare the test.  1 when the test cannot run here (plan "1..0 # SKIP"
 * printed: main returns 0), else 0. */
int mockvmm_init(int argc, char **argv);
/* argv[i] as a number, @dflt when absent or 0. */
uint64_t mockvmm_arg(int argc, char **argv, int i, uint64_t dflt);

/* vmnapd's side in this process; @pcfg NULL: the default pager config. */
int harness_start(struct harness *h, const struct pager_config *pcfg);
void harness_stop(struct harness *h);
/* Run @fn on the loop thread (pager and registry calls belong there). */
void on_loop(struct harness *h, void (*fn)(struct harness *, void *), void *arg);
/* Start the mock VMM with @mib of guest RAM and @mappers (1 or 2) mappings;
 * it answers "ready" once its RAM is mapped and filled (round 1). */
int vmm_spawn(struct harness *h, const char *self, uint64_t mib, int mappers);
int vmm_spawn_opts(struct harness *h, const char *self, uint64_t mib,
		   int mappers, const char *sock_override, bool allow_unmanaged);
/* Send a command to the VMM; its answer in @ans (LINE_MAX_LEN). */
void vmm_cmd(struct harness *h, char *ans, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int wait_vmm_exit(struct harness *h);
/* Tell the mock VMM to quit; its exit status as wait_vmm_exit() gives it. */
int vmm_quit(struct harness *h);

/* Loop thread only: */
struct pager *the_pager(struct harness *h);
void resumed_cb(struct harness *h, void *arg);
struct offload_call {
	int err;
};
void offload_cb(struct harness *h, void *arg);	/* arg: struct offload_call */

/* From the test thread: */
struct pager_stats stats(struct harness *h, bool *have);
/*
 * The pager's stats once no fault waits any more (a fault retried against
 * a store that came back is served), polled every 20 ms for at most
 * @max_polls; the last stats read either way.
 */
struct pager_stats stats_until_unstuck(struct harness *h, int max_polls);
/* Offload and wait; returns the done callback's error. */
int offload(struct harness *h);

/* End a scenario: stop the harness, print the TAP plan; the exit status. */
static inline int harness_finish(struct harness *h)
{
	harness_stop(h);
	return tap_done();
}

#endif /* VMNAP_TESTS_MOCKVMM_H */
