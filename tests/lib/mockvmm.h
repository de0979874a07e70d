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
 * lat, touchset, touchall, touchdown, discard, peerunmap, remap, pid, storm,
 * quit; "peer CMD" to the second mapper) and runs pager calls on the loop
 * thread (on_loop()).
 *
 *   verify ROUND THREADS [ZLO ZHI [FLAGS]]  every page's contents (VERIFY_*)
 *   read PAGE   the first word of PAGE ("value 0x..."), answered once
 *            its fault is served (peek: from a thread, with a time limit)
 *   discard LO HI remove|dontneed|qemu|memfd  give pages [LO, HI) back
 *            as a VMM does: MADV_REMOVE, MADV_DONTNEED, QEMU's balloon
 *            discard (punch the memfd, then MADV_DONTNEED), or its first
 *            half alone (the punch: no userfaultfd event tells the pager)
 *   touch LO HI [STRIDE]  read a word of every STRIDE-th page in [LO, HI)
 *   touchdown LO HI  read a word of every page in [LO, HI), from the top
 *   peerunmap   the second mapper munmaps its guest RAM (memory unplug)
 *   remap [squat]  move the guest RAM mapping elsewhere (mremap); squat:
 *            then map anonymous memory where it was
 *   pid      "ok PID" of the mapper's process
 *   touchset ROUND  read the set S (crit_set()) and check it is ROUND's:
 *            "ok N", N the host page faults the reads took
 *   writeset ROUND  write ROUND's contents over S: "ok N", N the host page
 *            faults the writes took
 *   writerange LO HI ROUND  write ROUND's contents over every data page in
 *            [LO, HI)
 *   touchall [K]  read a word of every page, upwards, in K interleaved
 *            streams (default 1) over K equal parts: "ok NS N", the time
 *            and the host page faults the reads took
 *
 * Environment: PAGER_STORE_DIR (store directory; default a temp dir),
 * PAGER_DEBUG (debug log), BUILD (where libvmnap-preload.so is),
 * MOCKVMM_EXE (run this build of the test program as the mock VMM: an
 * uninstrumented one when the harness runs under ThreadSanitizer).
 */
#ifndef VMNAP_TESTS_MOCKVMM_H
#define VMNAP_TESTS_MOCKVMM_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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
/* Touch every page upwards, in @streams interleaved streams over as many
 * equal parts; the time it took in ns. */
uint64_t touch_all(struct vmm *v, unsigned int streams);
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
	sem_t resident_done;	/* the pager's resident callback ran */
	bool mounted;
	bool signal_storm;	/* eintr mode */
	const char *vm_name;	/* the VM vmm_spawn() starts and the calls below
				 * act on; NULL: VM_NAME */
	sem_t pager_error;	/* storeerr: the error callback ran */
	int pager_err;
	const char *pager_err_what;
};

static inline const char *harness_vm(const struct harness *h)
{
	return h->vm_name ? h->vm_name : VM_NAME;
}

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
/* Several VMMs at once: keep the one vmm_spawn() just started (with
 * h->vm_name) and make a kept one the one vmm_cmd() and the calls below
 * talk to. */
struct vmm_proc {
	const char *vm_name;
	pid_t pid;
	int to, from;
};
static inline struct vmm_proc vmm_keep(const struct harness *h)
{
	return (struct vmm_proc){ h->vm_name, h->vmm, h->to_vmm, h->from_vmm };
}
static inline void vmm_use(struct harness *h, const struct vmm_proc *v)
{
	h->vm_name = v->vm_name;
	h->vmm = v->pid;
	h->to_vmm = v->to;
	h->from_vmm = v->from;
}
/* Tell the mock VMM to quit; its exit status as wait_vmm_exit() gives it. */
int vmm_quit(struct harness *h);

/* Loop thread only: */
struct pager *the_pager(struct harness *h);
void resumed_cb(struct harness *h, void *arg);
/* pager_data_window / pager_resume_delivered on the loop: a delivery
 * window opens (data taken in running) and ends (the guest has it). */
void data_window_cb(struct harness *h, void *arg);
void delivered_cb(struct harness *h, void *arg);
struct offload_call {
	int err;
};
void offload_cb(struct harness *h, void *arg);	/* arg: struct offload_call */
/* Is page @pg in the memfd @fd (guest RAM from @off), allocated, not a
 * hole?  If so, *@ok is cleared unless it holds round @round's contents. */
bool page_in_memfd(int fd, uint64_t off, uint64_t pg, unsigned int round, bool *ok);
/* How many pages of S (crit_set()) the memfd holds, and are their
 * contents round @round's? */
struct set_resident_call {
	unsigned int round, resident, n;
	bool contents_ok;
};
void set_resident_cb(struct harness *h, void *arg);	/* arg: struct set_resident_call */

/* From the test thread: */
struct pager_stats stats(struct harness *h, bool *have);
/*
 * The pager's stats once no fault waits any more (a fault retried against
 * a store that came back is served), polled every 20 ms for at most
 * @max_polls; the last stats read either way.
 */
struct pager_stats stats_until_unstuck(struct harness *h, int max_polls);
/*
 * The pager's stats once no page is in flight: a thread that moved pages
 * (the fault thread, the prefetcher) may wake or be overtaken by the
 * mapper before it retakes the pager's lock, and it updates the pages'
 * states and the counters that go with them (latency histogram, write-hot
 * pages) in that one critical section.  Polled every 10 ms, at most
 * STATS_SETTLED_POLLS times (a hang guard); the last stats read either way.
 */
#define STATS_SETTLED_POLLS	3000
struct pager_stats stats_settled(struct harness *h);
/*
 * The pager's stats once its counter at offset @field (a uint64_t of
 * struct pager_stats: offsetof) reached @want, for work the pager does
 * after the call that caused it returned (an event vmnapd read but has
 * not handled yet, the offload worker's tidy after an offload reported
 * done).  Polled every 20 ms, at most 500 times; the last stats read
 * either way.
 */
struct pager_stats stats_until(struct harness *h, size_t field, uint64_t want);
/* Loop thread (on_loop): the pager's errors go to the harness
 * (h->pager_err, h->pager_err_what, h->pager_error posted) ... */
void catch_pager_errors(struct harness *h, void *arg);
/* ... or to the VM layer, as in vmnapd (a lost VM: vm->lost_err, LOST). */
void vm_pager_errors(struct harness *h, void *arg);
/* A VM as the API shows it once lost (vm_control_json): */
struct lost_view {
	int lost_err;		/* vm->lost_err */
	bool pager;		/* it still has a pager (its VMM lives) */
	uint64_t vms_lost;	/* the daemon's count */
	char state[32], error[256];
};
/* Polls every 20 ms (at most @max_polls) until the VM is lost and its
 * pager gone (its VMM killed, its memory released); the last view. */
struct lost_view wait_lost(struct harness *h, int max_polls);
/* Polls every 20 ms (at most @max_polls) until the VM has no pager (its
 * VMM gone, its memory released); whether it came to that. */
bool wait_pager_gone(struct harness *h, int max_polls);
/* Open fds of process @pid, 0: this one (where vmnapd's side runs). */
int count_fds(pid_t pid);
/* Offload and wait; returns the done callback's error. */
int offload(struct harness *h);
/* Pre-copy (pager_precopy_start) and wait; the start's or the done
 * callback's error. */
int precopy(struct harness *h);
/*
 * pager_precopy_start(), tried again while it answers -EBUSY because the
 * last offload's thread still discards stale store slots (at most
 * PRECOPY_BUSY_TRIES times, 10 ms apart; the pager needs no loop callback
 * for that, so a caller on the loop may wait).
 */
#define PRECOPY_BUSY_TRIES	500
int precopy_start_retry(struct pager *p, void (*done)(struct pager *p, int err, void *arg),
			void *arg);
/*
 * pager_make_resident_async(gpa, len) on the loop thread: its answer; on
 * -EAGAIN, waits (at most RESIDENT_WAIT_S) for the pager's resident
 * callback, *@told says whether it came.
 */
#define RESIDENT_WAIT_S	30
struct resident_call {
	uint64_t gpa, len;
	int err;
};
int resident_async(struct harness *h, uint64_t gpa, uint64_t len, bool *told);

/* ---------------------------------------------------- a vmnapd process */
/*
 * Tests of vmnapd as a process (build/vmnapd, $BUILD) under the mock VMM:
 * the harness's dirs are set by the test, harness_start() is not called.
 */
#define POLL_US		20000
#define WAIT_POLLS	1500	/* x 20 ms: a (re)started vmnapd adopts the VM */

/* Find vmnapd and make h's dirs (/tmp/vmnap-@tag-XXXXXX, run/, store/):
 * 0, 1 not built (plan "1..0 # SKIP" printed), -1 (bailed out). */
int vmnapd_setup(struct harness *h, const char *tag);
/* Stop vmnapd (SIGTERM), remove h->dir unless @failed (tap_state.failed:
 * the test file's own) or KEEP is set. */
void vmnapd_finish(struct harness *h, bool failed);
/* Start it on h's run and store dirs (log: <dir>/vmnapd-@n.log); returns
 * once its pager-debug endpoint answers. */
void vmnapd_spawn(struct harness *h, int n);
/* Signal it and wait: its wait status, -1 if none ran. */
int vmnapd_kill(int sig);
pid_t vmnapd_pid(void);
/* One command to the pager-debug endpoint: its JSON answer or NULL. */
json_t *vmnapd_dbg(struct harness *h, const char *cmd);
/* @method /vms/mock on the control API: the HTTP status (0: no answer),
 * the JSON body in *@body (NULL: not wanted). */
int vmnapd_api_vm(struct harness *h, const char *method, json_t **body);
json_t *api_vm(struct harness *h);	/* GET /vms/mock: the body or NULL */
/* o[a][b][c] (b, c may be NULL) as an integer, 0 when absent. */
json_int_t jint(json_t *o, const char *a, const char *b, const char *c);
/* Until the VM's pager (re)appears with a mapper: its stats, or NULL. */
json_t *wait_vm(struct harness *h);

/* End a scenario: stop the harness, print the TAP plan; the exit status. */
/* harness_start(@pcfg) and vmm_spawn() with one mapping, then its "ready"
 * checked: a TAP line, so inline, in the test's own file (tap.h counts per
 * file).  False after a bail-out if either cannot start. */
static inline bool harness_up(struct harness *h, const struct pager_config *pcfg,
			      const char *self, uint64_t mib)
{
	char ans[LINE_MAX_LEN];

	if (harness_start(h, pcfg) || vmm_spawn(h, self, mib, 1)) {
		tap_bail("harness setup failed");
		return false;
	}
	read_line(h->from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready (%s)", ans);
	return true;
}

static inline int harness_finish(struct harness *h)
{
	harness_stop(h);
	return tap_done();
}

#endif /* VMNAP_TESTS_MOCKVMM_H */
