/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pager_internal.h - the pager's shared state, for pager*.c and store.c
 * only.  See pager.h for the model.
 *
 * Locking.  Two mutexes, taken in this order: p->reg_lock, then p->lock.
 *
 * p->lock protects the page-state table and p->count, every statistic in
 * struct pager marked "under lock", the error, prefetch and offload
 * hand-over fields so marked, the flags of each mapper (registered, dead,
 * removed) and its ranges (host_addr, map_lo, map_hi; the fault thread,
 * their only writer after pager_add_mapper, also reads them unlocked), and
 * p->registered.  It is held for table walks and bookkeeping only: never
 * across a system call that can block or take long - no store or memfd
 * I/O (pread, pwrite, fallocate PUNCH_HOLE, io_uring submission), no
 * userfaultfd ioctl (REGISTER, UNREGISTER, COPY, ZEROPAGE, WAKE), no read
 * of a userfaultfd, no close of one, no logging.  A thread that makes such a call for
 * pages first claims them under the lock (sets them IN_FLIGHT; every other
 * thread leaves an IN_FLIGHT page alone or waits on p->state_cv until it
 * is not), drops the lock, makes the call, retakes the lock, sets the
 * pages' final state and broadcasts p->state_cv (pager_claim_run_locked /
 * pager_finish_run_locked; pager_discard_run; the fault path's ZEROPAGE).
 * Counters a thread bumps outside the lock are atomics (faults_active,
 * fault_seq) or are summed locally and added under the lock.
 *
 * p->reg_lock serialises changes of userfaultfd registration: it is held
 * across UFFDIO_REGISTER / UNREGISTER (pager_register_all,
 * pager_maybe_unregister, pager_add_mapper) and by the fault thread while
 * it rewrites a mapper's ranges (UNMAP and REMAP events) or frees a removed
 * mapper.  The mapper list changes only with both locks held, so either
 * one is enough to walk it.  No holder of reg_lock waits for the fault
 * thread (the kernel drops the mm's lock before a fault or an event
 * waits), so the fault thread may take it.
 */
#ifndef VMNAP_PAGER_INTERNAL_H
#define VMNAP_PAGER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <limits.h>
#include <liburing.h>

#include <linux/ioprio.h>

#include "pager.h"
#include "store.h"

/* The I/O priority of the reads a delivery waits on (enum
 * pager_io_class): the realtime class's middle level, leaving room above
 * it for more urgent host I/O. */
#define PAGER_IO_RT_PRIO	IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, IOPRIO_NORM)

/* PAGEMAP_SCAN on /proc/PID/pagemap: not in every libc's kernel headers
 * yet (Linux 6.7 uapi). */
#ifndef PAGEMAP_SCAN
#include <linux/types.h>
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGE_IS_PRESENT		(1 << 3)
struct page_region {
	__u64 start, end, categories;
};
#define PM_SCAN_WP_MATCHING	(1 << 0)
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)
struct pm_scan_arg {
	__u64 size, flags, start, end, walk_end, vec, vec_len, max_pages;
	__u64 category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN	_IOWR('f', 16, struct pm_scan_arg)
#endif

/* p->fa marks: a page fault-around installed unmapped, or one the
 * fault-order prefetch queued (pager_follow.c); cleared when counted. */
#define FA_AROUND	1u
#define FA_FOLLOW	2u
#define PAGER_FOLLOW_QUEUE	512	/* pages queued for the prefetcher */

/* Page-state byte: the state in the low bits, working-set flags above. */
#define PG_STATE_MASK	0x07u
#define PG_BG		0x08u	/* restored in the background this cycle (into
				 * the memfd, mapped by no one): touched once
				 * a mapper maps it */
#define PG_WS_CUR	0x10u	/* touched in this cycle (see enum pager_restore) */
#define PG_WS_PREV	0x20u	/* ... in the previous cycle: the working set */
#define PG_CRIT		0x40u	/* noted in the resume-critical set since the
				 * last pager_resume_prepare */
#define PG_WRITTEN	0x80u	/* seen written while IN_FLIGHT: not CLEAN */

/* What a page's store slot holds, for the offload worker's tidy of stale
 * slots (p->slot_data; pager_offload.c, discard_stale_slots). */
enum slot_data {
	SLOT_NONE = 0,		/* a hole: never written, or punched */
	SLOT_WRITTEN = 1,	/* written since the tidy last looked */
	SLOT_KEPT = 2,		/* a RESIDENT page's stale copy, its blocks kept
				 * for the page's next write to the store */
};

struct pager_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t memfd_off;
	int memfd;		/* -1: anonymous */
	uint64_t first_page;	/* index of its first page in p->state */
	uint64_t npages;
};

/* Guest-physical [gpa, gpa+size) is pages [first_page, +size/4K). */
struct pager_gpa_range {
	uint64_t gpa;
	uint64_t size;
	uint64_t first_page;
};

#define PAGER_MAX_GPA_RANGES	PAGER_MAX_REGIONS

struct pager_mapper {
	struct pager_mapper *next;
	int uffd;
	pid_t pid;
	uint64_t host_addr[PAGER_MAX_REGIONS];	/* 0: not mapped */
	/* the live part of region i in this mapping: host_addr[i] + map_lo[i]
	 * up to host_addr[i] + map_hi[i] (region offsets; shrunk by UNMAP) */
	uint64_t map_lo[PAGER_MAX_REGIONS], map_hi[PAGER_MAX_REGIONS];
	bool registered;
	bool reg_missing;	/* ... MODE_MISSING (not write-protect
				 * alone: pager_register_wp_early) */
	bool dead;		/* process gone or removed: not served */
	bool removed;		/* its owner let go: the fault thread frees it */
	/* sequential fault detection (fault thread only): the streams the
	 * last faults may continue, most recent first */
	struct pager_stream {
		uint64_t start;		/* first page of its last fault's run */
		uint64_t end;		/* page after that run */
		uint64_t next;		/* ... and after its readahead */
		uint32_t window;	/* its window (0: none); doubles while
					 * sequential */
		bool write;		/* a write stream: runs come back
					 * writable */
	} seq[PAGER_STREAMS];
	/* zero fills (fault thread only): the last run [zlo, zhi) */
	uint64_t zlo, zhi;
	/* dirty tracking */
	int pagemap_fd;		/* /proc/PID/pagemap, or -1 */
	bool wp;		/* its ranges registered with MODE_WP too */
	int pidfd;		/* the process (pidfd_open at add), or -1 */
};

/* Guest-physical [gpa, gpa+len), whole pages, for the residency worker. */
struct pager_gpa_req {
	uint64_t gpa, len;
	int err;		/* failed requests: why */
};

#define PAGER_RESIDENT_QMAX	64	/* queued and remembered failed requests */

struct pager {
	struct loop *loop;
	void *owner;		/* pager_new()'s caller's */
	const char *subject;	/* subject_own */
	char *subject_own;
	struct pager_config cfg;

	struct pager_region regions[PAGER_MAX_REGIONS];
	unsigned int nr_regions;
	uint64_t npages;
	/* guest-physical map (under lock); see enum pager_gpa_source */
	struct pager_gpa_range gpa_map[PAGER_MAX_GPA_RANGES];
	unsigned int nr_gpa;
	enum pager_gpa_source gpa_source;
	struct vmnap_range ram_ranges[PAGER_MAX_GPA_RANGES];	/* wire format */
	unsigned int nr_ram_ranges;	/* 0 while the map is untrusted */
	uint64_t gpa_refused;
	bool gpa_refused_logged;

	pthread_mutex_t reg_lock;	/* registration changes; see above */
	pthread_mutex_t lock;
	pthread_cond_t state_cv;	/* a page left IN_FLIGHT */
	uint8_t *state;			/* npages state bytes */
	uint8_t *hot;			/* npages: restores left writable
					 * (PAGER_HOT_CYCLES); under lock */
	uint8_t *hot_streak;		/* npages: protected restores in a row
					 * seen written (to PAGER_HOT_STREAK_MAX),
					 * and HOT_SAMPLE / HOT_VOUCHED */
	/* adaptive fault-around (under lock): the fault thread installs a
	 * random fault's neighbours unmapped and marks them here; the cycle
	 * end (pager_ws_cycle_end) counts which a mapper mapped and adapts
	 * fa_window between 1 and cfg.fault_around_pages */
	uint8_t *fa;			/* npages: FA_AROUND or FA_FOLLOW =
					 * installed (or queued), not counted */
	uint32_t fa_window;
	uint64_t fa_w1_faults, fa_w1_near;	/* this cycle, at window 1 */
	uint64_t fa_acc_hits, fa_acc_misses;	/* since the window was last
						 * decided */
	uint64_t fa_installed, fa_hits, fa_misses;	/* totals */
	/* what a hit saves and a neighbour costs, measured (halved past
	 * FA_COST_DECAY faults): the service time of random faults, and the
	 * fault thread's store reads of one page and of more (their pages
	 * beyond the first; with a random fault's memfd writes of its
	 * neighbours) */
	uint64_t fac_faults, fac_fault_ns;
	uint64_t fac_single, fac_single_ns;
	uint64_t fac_multi, fac_multi_ns, fac_multi_extra;
	uint64_t seq_faults;		/* served as a sequential stream's */
	/* fault-order prefetch (pager_follow.c; under lock): the pages the
	 * last data cycles brought back, in the order first asked for (a
	 * ring of orders, fol_next the slot the next one takes), this
	 * cycle's being recorded (fol_cur), and for every page where the
	 * newest order holding it has it; pages queued for the prefetcher */
	uint32_t *fol_old[PAGER_FOLLOW_CYCLES], fol_old_n[PAGER_FOLLOW_CYCLES];
	unsigned int fol_next;
	uint32_t *fol_cur, fol_cur_n;
	uint32_t *fol_last;		/* npages: (slot + 1) << 16 | position;
					 * 0 or stale (that slot reused): none */
	uint32_t fol_q[PAGER_FOLLOW_QUEUE];
	uint32_t fol_qhead, fol_qn;
	bool fol_on;			/* allocated: cfg.follow_pages set */
	bool fol_rec;			/* a data cycle runs now: record, follow */
	uint64_t fol_queued, fol_installed, fol_hits, fol_misses, fol_late;
	uint64_t count[PAGE_STATES];
	struct pager_mapper *mappers;
	unsigned int nr_mappers;
	bool registered;
	bool reg_wp_only;		/* registrations are write-protect
					 * alone (pager_register_wp_early),
					 * until the first offload clears it */
	bool tail_fresh;		/* pager_tail.c: the next tick's scan
					 * finds every page of a mapper just
					 * registered written: not counted */
	bool evictable;
	const char *not_evictable_reason;

	struct store store;

	/* fault service */
	pthread_t fault_thread;
	bool fault_thread_started;
	_Atomic int dlv_io_class;	/* enum pager_io_class in effect */
	const char *_Atomic dlv_io_reason;	/* static: why not as asked */
	atomic_uint_fast64_t dlv_io_reads;	/* reads made realtime */
	int fault_wake_fd;		/* eventfd: mappers changed or stop */
	atomic_bool stop;
	atomic_uint faults_active;	/* fault batches being served */
	atomic_uint_fast64_t fault_seq;	/* bumped on every fault */

	/* prefetch */
	pthread_t prefetch_thread;
	bool prefetch_thread_started;
	pthread_cond_t prefetch_cv;
	bool prefetch_requested;
	enum pager_restore prefetch_mode;	/* of the request: eager or
						 * working-set */
	bool prefetch_running;
	bool prefetch_exit;
	/* readahead for a sequential fault stream (fault thread -> prefetcher) */
	uint64_t ra_start, ra_len;	/* pages; ra_len 0: none asked */
	struct pager_mapper *ra_mapper;	/* whose fault stream asked (only
					 * compared to the live mappers) */
	bool ra_write;			/* that stream writes what it reads */
	atomic_bool prefetch_abort;

	/*
	 * offload: one worker per pager (pager_offload.c), started with the
	 * first job and stopped only by teardown.  It runs one job at a time
	 * (an offload or a pre-copy, set by offload_job_set_locked()), signals
	 * offload_done_fd, then tidies (an offload's stale store slots) before
	 * it takes the next: a job asked for meanwhile waits for the worker,
	 * the loop never waits for a thread.
	 */
	pthread_t offload_thread;
	bool offload_thread_started;	/* loop thread and teardown only */
	pthread_cond_t offload_cv;	/* with lock: a job, or exit */
	bool offload_job;		/* under lock: set, not taken yet */
	bool offload_exit;		/* under lock: teardown stops the worker */
	bool offloading;		/* an offload or a pre-copy runs */
	atomic_bool tidy_stop;		/* a resume began: the worker's tidy
					 * stops, the next job's does the rest */
	uint8_t *slot_data;		/* offload worker only, per page: what
					 * its store slot holds for the tidy
					 * (enum slot_data; all SLOT_WRITTEN
					 * at start: an adopted store's are
					 * unknown) */
	uint64_t stale_discards_deferred;	/* under lock */
	uint64_t stale_slots_kept;		/* under lock */
	bool precopy;			/* ... a pre-copy (pager_precopy_start) */
	atomic_bool offload_abort;
	int offload_done_fd;		/* eventfd watched by the loop */
	int offload_err;
	uint64_t offload_t0;
	void (*offload_done)(struct pager *p, int err, void *arg);
	void *offload_arg;
	/* an offload asked for while a pre-copy stops (loop thread only):
	 * started when the pre-copy's thread has ended (pager.c) */
	bool offload_queued;
	bool queued_cancelled;		/* pager_offload_cancel() came first */
	void (*queued_done)(struct pager *p, int err, void *arg);
	void *queued_arg;
	int (*writer_gate)(bool stop, void *arg);	/* pager_set_writer_gate */
	void *writer_gate_arg;

	/* residency worker (pager_resident.c; queue and failures under lock) */
	pthread_t resident_thread;
	bool resident_thread_started;
	pthread_cond_t resident_cv;
	bool resident_exit;
	struct pager_gpa_req rq[PAGER_RESIDENT_QMAX];	/* asked, oldest first */
	unsigned int rq_n;
	struct pager_gpa_req rfail[PAGER_RESIDENT_QMAX];	/* failed, not told yet */
	unsigned int rfail_n;
	int resident_fd;		/* eventfd watched by the loop */
	void (*resident_cb)(struct pager *p, void *arg);
	void *resident_arg;
	uint64_t resident_asked, resident_failed;	/* requests; failed ones */
	/* restore after resume (under lock) */
	enum pager_restore restore;	/* the VM's policy */
	enum pager_restore next_restore;	/* this resume's (POLICY: the VM's) */
	enum pager_restore last_restore;
	bool cycle_override;		/* this cycle's resume overrode the policy */
	bool cycle_data;		/* this cycle restores by the policy: its
					 * resume did, or data arrived since */
	bool cycle_saw_data;		/* ... at some point in this cycle (a
					 * later timer's resume from a pause
					 * clears cycle_data, not this): its
					 * fault order is kept, and it counts
					 * for the recurring set */
	uint8_t *ws_data_prev;		/* per page: touched in the last data
					 * cycle (the recurring set's history) */
	uint64_t data_arrivals;		/* cycles made data cycles by it */
	uint64_t ws_pages, eager_pages, zero_copy_offloads;
	uint64_t ra_mapped_pages;	/* readahead mapped into its mapper */
	uint64_t precopies, precopy_written, precopy_cleaned;

	/* errors for the loop thread (pager_report_error) */
	int error_fd;			/* eventfd watched by the loop */
	void (*error_cb)(struct pager *p, int err, const char *what, void *arg);
	void *error_arg;
	int pending_err;		/* under lock; 0: none */
	const char *pending_what;
	/* the VM is lost (pager_lose): a fault can never be served; under
	 * lock, set once */
	int lost_err;
	bool lost_told;			/* the error callback heard "lost" */
	uint32_t mappers_killed;

	/* statistics (under lock) */
	uint64_t faults, fault_pages, zero_faults, zero_ahead, eexist, prefetch_pages;
	uint64_t offloads, offload_errors, offload_cancels;
	uint64_t fault_errors, restore_errors, fault_retries;
	uint32_t faults_stuck;
	uint64_t last_offload_ns, last_offload_written;
	uint64_t dropped_free_pages;
	uint64_t vmm_removed_pages, vmm_unmaps, vmm_remaps;
	uint64_t fault_lat_us[PAGER_LAT_BUCKETS];
	uint64_t fault_lat_ns_sum;	/* sum of the latencies counted there */
	uint64_t fault_read_ns_sum;	/* of that, in store reads */
	uint64_t fault_lock_ns_sum, fault_in_flight_ns_sum, fault_in_flight_faults;
	uint64_t fault_seq_ns_sum;	/* (pager_stats) */

	/* resume-critical set (pager_critical.c; under lock): pages faulted
	 * in while a resume was being delivered, a ring in fault order */
	uint64_t crit_pg[PAGER_CRITICAL_MAX_PAGES];
	unsigned int crit_head, crit_nr;	/* oldest entry, entries */
	/* pager_set_device_pages (under lock): kept with the set */
	uint64_t dev_pg[PAGER_DEVICE_MAX_PAGES];
	unsigned int dev_nr;
	uint64_t dev_refused;		/* ranges left out: outside guest RAM */
	uint64_t dev_read_back;		/* ranges out when named: read back */
	unsigned int crit_window_nr;	/* of them noted in this window */
	bool crit_recording;		/* resume .. delivered */
	struct io_uring crit_ring;	/* loop thread only */
	bool crit_ring_up;
	uint64_t crit_restored_pages, crit_window_faults, crit_data_windows;
	uint64_t crit_mapped_pages;	/* of the restored: mapped in the VMM */
	uint64_t crit_last_restore_ns, crit_budget_stops, crit_ring_resets;
	uint64_t crit_kept_pages;	/* left resident by offloads */

	/* the command's last writes (pager_tail.c; under lock) */
	uint8_t *tail;			/* per page: TAIL_* (NULL: tail_resident off) */
	uint8_t *tail_scan;		/* offload worker: a tick's scan */
	uint64_t tail_pg[PAGER_TAIL_MAX_PAGES];	/* the set, sorted */
	unsigned int tail_nr;
	bool tail_installed;		/* the set was stored and put back
					 * unmapped (pager_tail_install) */
	uint64_t tail_installed_pages;	/* pages so put back */
	bool tail_ticking;		/* a command runs: tick */
	bool tail_freeze;		/* the wait began: the worker makes the set */
	uint64_t tail_next_ns;		/* the next tick (offload worker) */
	uint64_t tail_gap_ns;		/* ... after the last, at the least */
	uint64_t tail_ticks, tail_sets;
	uint64_t tail_run_ticks;	/* ticks since the command began */
	uint64_t tail_run_pages;	/* ... the written pages they found */
	bool tail_spent;		/* ... reached cfg.tail_budget_pages:
					 * no more ticks, no set */
	uint64_t tail_tick_pages, tail_budget_stops, tail_backoffs;
	unsigned int tail_idle_sets;	/* sets made since an offload ended */
	uint64_t tail_idle_stops;
	uint64_t tail_until_ns;		/* ticking stops then, unless told a
					 * command runs (0: no limit) */
	/* the set as the last resume began; at its delivery, the worker
	 * notes those of its pages mapped again since into the
	 * resume-critical set (the data path touched them; kept, they could
	 * not fault) */
	uint64_t tail_learn_pg[PAGER_TAIL_MAX_PAGES];
	unsigned int tail_learn_nr;
	bool tail_learn_due;
	uint64_t tail_learned;		/* pages so noted */

	/* recovery (pager_recover.c): created over a store a vmnapd that
	 * ended left behind; set before the threads start, read-only after */
	bool recovered;
	uint64_t rec_store_pages;	/* pages the store's map held */
	uint64_t rec_offloaded;		/* ... of them out of the memfd: OFFLOADED */
	uint64_t rec_resident;		/* ... of them in the memfd: RESIDENT
					 * (an interrupted offload or restore,
					 * or CLEAN) */
	uint64_t rec_discarded;		/* ... marked RESIDENT, a hole: the VMM
					 * discarded them (ZERO) */

	/* dirty tracking (pager_dirty.c; under lock, set with reg_lock too) */
	enum pager_dirty_tracking track;
	const char *track_reason;
	bool detaching;			/* pager_free: unregister regardless */
	uint64_t dirty_fallbacks, clean_punched, dirty_scanned, dirty_own;
	uint64_t dirty_kept, store_written, dirty_wp_faults, dirty_hot, dirty_hot_again;
	uint64_t dirty_stream, dirty_wfault;
	/* checks by sample (pager_wmap_locked): the rotation, whether any
	 * page is marked (a sampled plan since the last scan), the counts */
	uint32_t hot_turn;
	bool hot_marked;
	uint64_t hot_samples, hot_vouched, hot_vouch_renewed, hot_vouch_dropped;
};

/* Page state helpers; call with p->lock held. */
static inline enum pager_page_state pg_state(const struct pager *p, uint64_t pg)
{
	return (enum pager_page_state)(p->state[pg] & PG_STATE_MASK);
}

static inline void pg_set(struct pager *p, uint64_t pg, enum pager_page_state s)
{
	p->count[pg_state(p, pg)]--;
	p->state[pg] = (uint8_t)((p->state[pg] & ~PG_STATE_MASK) | s);
	p->count[s]++;
}

static inline uint64_t pg_store_off(uint64_t pg)
{
	return STORE_DATA_OFF + pg * PAGER_PAGE_SIZE;
}

/* The region holding page @pg. */
static inline struct pager_region *pg_region(struct pager *p, uint64_t pg)
{
	for (unsigned int i = 0; i < p->nr_regions; i++)
		if (pg >= p->regions[i].first_page &&
		    pg < p->regions[i].first_page + p->regions[i].npages)
			return &p->regions[i];
	return NULL;
}

static inline uint64_t pg_memfd_off(const struct pager_region *r, uint64_t pg)
{
	return r->memfd_off + (pg - r->first_page) * PAGER_PAGE_SIZE;
}

/* pager_core.c: the page-state core (calls nothing above it) */
/* Before guest RAM pages [pg, pg+n) are punched other than by an offload:
 * their slot map entries cleared and durable (else the hole could read as
 * a stale slot after a crash).  0, or -errno with the map unchanged.  Lock
 * not held: the pages are claimed (IN_FLIGHT) by the caller. */
int pager_slots_clear_durably(struct pager *p, uint64_t pg, uint64_t n);
/* Count an error of kind @what ("fault", "restore", "offload") and have the
 * loop thread tell pager_set_error_cb's callback.  Any thread, lock not
 * held. */
void pager_report_error(struct pager *p, int err, const char *what);
/* A fault can never be served (the store read keeps failing, or a slot's
 * checksum mismatches): SIGKILL every mapper process (a vCPU blocked in
 * the userfaultfd is released only so: its fault must not be answered
 * with zeros or stale data), mark the pager lost with @err, tell the
 * error callback ("lost").  Once only; the fault thread (it closes the
 * mappers' pidfds), lock not held. */
void pager_lose(struct pager *p, int err);
/* Register every live mapper's ranges as pager_mapper_register does (those
 * registered for write-protect alone again once p->reg_wp_only is clear);
 * p->reg_lock held, p->lock not.  The first error but -ESRCH (the process
 * exited: marked dead).  The caller sets p->registered. */
int pager_register_all(struct pager *p);
/* Register @m's ranges MISSING (WP too while writes are tracked), or WP
 * alone while p->reg_wp_only; p->reg_lock held, p->lock not.  -errno
 * (-ESRCH: the process exited). */
int pager_mapper_register(struct pager *p, struct pager_mapper *m);
/*
 * Before the first offload (nothing registered yet): register every
 * mapper for write-protect alone, so that PAGEMAP_SCAN can tell the
 * pages written since a scan (pager_tail.c) while nothing is out.  No
 * MISSING: a first touch of a hole must not fault to vmnapd; the first
 * offload registers MISSING|WP over it (pager_register_all).  Mappers
 * that come later register the same way (pager_add_mapper).  True if
 * writes are tracked (wp_async) now.  Takes reg_lock and lock.
 */
bool pager_register_wp_early(struct pager *p);
/* Would pager_maybe_unregister() unregister now?  Lock held. */
bool pager_unregister_due_locked(struct pager *p);
/* Unregister every range once no page is out or in flight and no offload
 * runs; takes p->reg_lock and p->lock (call with neither held). */
void pager_maybe_unregister(struct pager *p);
/* Make pages [pg, pg+n) of one region ZERO: wait for pages in flight,
 * claim, punch them from the memfd, drop their store slots; counted in
 * *@counter (a statistic under lock).  Lock not held.  -errno of a punch
 * (the pages are ZERO in any case). */
int pager_discard_run(struct pager *p, uint64_t pg, uint64_t n,
		      uint64_t *counter);
/* Read claimed pages [pg, pg+n) of one region back into its memfd. */
int pager_restore_run(struct pager *p, uint64_t pg, uint64_t n, void *buf);
/* Write claimed pages, read into @buf (or failed with @err), into the
 * memfd and finish the claim. */
int pager_install_run(struct pager *p, uint64_t pg, uint64_t n, const void *buf,
		      int err);
/* Map @len bytes from @src at @dst in a mapper's registered range with
 * UFFDIO_COPY (write-protected if @wp), retrying EAGAIN (the mapping
 * changing) a bounded number of times: the bytes mapped, whole pages from
 * @dst (the rest is for the caller to put into the memfd).  No lock
 * needed; the caller keeps the mapper alive (reg_lock). */
#define UFFD_MAP_TRIES	100
uint64_t pager_uffd_map(int uffd, uint64_t dst, const void *src, uint64_t len, bool wp);
/* The same for @n pages as @w planned (NULL: writable), each stretch of
 * pages alike in one copy, in order; stops at the first stretch short. */
struct pager_wplan;
uint64_t pager_uffd_map_plan(int uffd, uint64_t dst, const void *src, uint64_t n,
			     const struct pager_wplan *w);
/* Claim the run of OFFLOADED pages from @pg (with all @flags set, if any)
 * up to @max pages, not crossing a region; returns its length (0: none). */
uint64_t pager_claim_run_locked(struct pager *p, uint64_t pg, uint64_t max,
				uint8_t flags);
void pager_finish_run_locked(struct pager *p, uint64_t pg, uint64_t n,
			     bool ok);
/* The pages behind the start of guest-physical [gpa, gpa+len) that one GPA
 * range holds (never crossing a pager region); -ERANGE if @gpa is in none.
 * Lock held. */
int pager_gpa_chunk_locked(struct pager *p, uint64_t gpa, uint64_t len,
			   uint64_t *pg, uint64_t *n);
/* Read the OFFLOADED pages of guest-physical [gpa, gpa+len) (whole pages,
 * range checked) back into the memfds, waiting for pages in flight; @buf
 * holds RESTORE_RUN_MAX_PAGES pages (store_buf_alloc).  Neither lock held.
 * 0 or -errno of the first failed read. */
int pager_restore_gpa(struct pager *p, uint64_t gpa, uint64_t len, void *buf);

/* A name table indexed by an enum of @n values: the name of @i ("?" out
 * of range), and the index of name @s (-EINVAL if none). */
const char *pager_name_of(const char *const *names, unsigned int n, unsigned int i);
int pager_name_index(const char *const *names, unsigned int n, const char *s);

/*
 * A store-reading thread's I/O priority (enum pager_io_class): as it ran
 * (base), and now.  pager_ioprio_for() before each read: realtime when
 * @urgent (a resume's delivery waits on the read) and the VM's delivery
 * reads may be (p->dlv_io_class), else back as the thread ran; true (and
 * counted in p->dlv_io_reads) if the read goes realtime.  A refusal is logged once: realtime refused,
 * the VM's delivery reads go as the rest from then on; the way back
 * refused, the thread stays realtime.  pager_ioprio_set(): this thread's
 * I/O priority, -1 and errno if refused.
 */
struct pager_ioprio {
	int base, now;
};
/* Is a read @urgent (a delivery waits on it) one to make realtime? */
static inline bool pager_ioprio_rt(struct pager *p, bool urgent)
{
	return urgent && atomic_load(&p->dlv_io_class) == PAGER_IO_REALTIME;
}
void pager_ioprio_init(struct pager_ioprio *io);
int pager_ioprio_set(int ioprio);
bool pager_ioprio_for(struct pager *p, struct pager_ioprio *io, bool urgent);
#define RESTORE_RUN_MAX_PAGES	256
/* Start @fn(@p) as one of the pager's threads, named @name (what top -H
 * and perf show, at most 15 characters): *@started set.  -errno. */
int pager_thread_start(struct pager *p, pthread_t *t, bool *started,
		       void *(*fn)(void *), const char *name);
/* Stop that thread if *@started: *@exit set and @cv broadcast under the
 * lock, then joined; *@started cleared. */
void pager_thread_stop(struct pager *p, pthread_t t, bool *started, bool *exit,
		       pthread_cond_t *cv);

/* pager_fault.c */
/* Close an unlisted mapper's fds (its uffd once added: the pager's) and
 * free it. */
void pager_mapper_free(struct pager_mapper *m);
int pager_fault_thread_start(struct pager *p);
void pager_fault_thread_stop(struct pager *p);
void pager_fault_kick(struct pager *p);

/* pager_prefetch.c */
/* Ask the prefetcher to read [pg, pg+n) ahead of @m's sequential fault
 * stream (@write: a stream that writes what it reads, mapped writable);
 * call with p->lock held. */
void pager_readahead_locked(struct pager *p, struct pager_mapper *m, uint64_t pg,
			    uint64_t n, bool write);
int pager_prefetch_thread_start(struct pager *p);
void pager_prefetch_thread_stop(struct pager *p);
/* Abort a running prefetch and wait until it is idle. */
void pager_prefetch_quiesce(struct pager *p);
/* A cycle ends (an offload starts, its dirty scan done): pages restored in
 * the background that a mapper maps now count as touched, and this cycle's
 * touched pages become the working set.  Neither lock held. */
void pager_ws_cycle_end(struct pager *p);
/* Fault-around's costs, measured: a fault-thread store read of @n pages
 * taking @ns (with the memfd writes of a random fault's neighbours), the
 * service time @ns of a random fault.  Lock held. */
void pager_fa_cost_read_locked(struct pager *p, uint64_t n, uint64_t ns);
void pager_fa_cost_fault_locked(struct pager *p, uint64_t ns);
/* What fault-around weighs now: a random fault's mean service time and a
 * neighbour's cost, ns (the defaults until measured).  Lock held. */
void pager_fa_costs_locked(const struct pager *p, uint64_t *fault_ns, uint64_t *page_ns);


/* pager_follow.c */
/* Allocate the fault orders if cfg.follow_pages asks for them (else, or
 * for a guest too large for 32-bit page numbers, the prefetch is off). */
int pager_follow_init(struct pager *p);
void pager_follow_free(struct pager *p);
/* A resume: @data (by the VM's policy, not a guest timer's) records and
 * follows the faults until the next resume or the cycle's end.  Lock
 * held. */
void pager_follow_resumed_locked(struct pager *p, bool data);
/* A fault claimed [start, start+n) for page @pg: marks there are served;
 * in a data cycle @pg is recorded and the pages after it in the newest
 * kept order holding it queued (true: signal p->prefetch_cv).  Lock
 * held. */
bool pager_follow_fault_locked(struct pager *p, uint64_t pg, uint64_t start, uint64_t n);
/* The prefetcher's next queued run, claimed, at most @max pages (0: none
 * queued that is still offloaded).  Lock held. */
uint64_t pager_follow_next_locked(struct pager *p, uint64_t *pg, uint64_t max);
/* Pages read for the queue are in the memfd.  Lock held. */
void pager_follow_installed_locked(struct pager *p, uint64_t n);
/* A cycle ends (after the mapped pages were counted): queued pages never
 * mapped are misses, left out of this cycle's order, which becomes the
 * newest old one if it was a data cycle.  Lock held. */
void pager_follow_cycle_end_locked(struct pager *p);

/* pager_resident.c */
/* [gpa, gpa+len) (checked, not resident) is wanted: the error of an
 * earlier failed request overlapping it (told once), else -EAGAIN with the
 * range queued for the worker (*@queued: signal p->resident_cv after
 * unlocking).  Lock held. */
int pager_resident_ask_locked(struct pager *p, uint64_t gpa, uint64_t len,
			      bool *queued);
int pager_resident_thread_start(struct pager *p);
void pager_resident_thread_stop(struct pager *p);
/* Loop callback on p->resident_fd: tell the owner (pager_set_resident_cb). */
void pager_resident_done_cb(struct loop *l, int fd, uint32_t events, void *arg);

/* pager_critical.c */
/* Pages [pg, pg+n) were claimed for a fault: record them while a resume is
 * being delivered.  Lock held, before the faulter is woken. */
void pager_critical_note_locked(struct pager *p, uint64_t pg, uint64_t n);
/* Note page @pg in the set as the last window's, recording or not (the
 * command's last writes, pager_tail.c): true if it is new to the set.
 * Lock held. */
bool pager_critical_learn_locked(struct pager *p, uint64_t pg);
/* A fault asked for readahead of [pg, pg+n): record the run the prefetcher
 * will read (its first offloaded run).  Lock held. */
void pager_critical_note_readahead_locked(struct pager *p, uint64_t pg, uint64_t n);
/* Free what the pre-resume restore keeps between resumes (detach). */
void pager_critical_release(struct pager *p);
/* Read the OFFLOADED pages of the sorted @pgs back from the store
 * through @ring into the memfd alone: CLEAN, mapped by no mapper.  -errno
 * of the first failed run (its pages stay offloaded).  @ring may still
 * hold reads after a failure: the caller's next step is to drop it.
 * Neither lock held. */
int pager_restore_unmapped(struct pager *p, struct io_uring *ring, const uint64_t *pgs,
			   unsigned int nr);
/* RESIDENT pages the next offload keeps (the set's and the devices',
 * with critical_resident): it will not write them.  A page in both counts
 * twice (at most count[PAGE_RESIDENT] in all).  p->lock held. */
uint64_t pager_kept_dirty_locked(const struct pager *p);
/* The set's pages and the devices' (pager_set_device_pages), sorted,
 * without duplicates, into @pgs (room for PAGER_KEEP_MAX_PAGES); how
 * many.  p->lock held. */
#define PAGER_KEEP_MAX_PAGES	(PAGER_CRITICAL_MAX_PAGES + PAGER_DEVICE_MAX_PAGES + \
				 PAGER_TAIL_MAX_PAGES)
unsigned int pager_critical_snapshot_locked(struct pager *p, uint64_t *pgs);
/* Sort the @n pages of @pgs, drop duplicates; how many are left. */
unsigned int pager_pages_sort_unique(uint64_t *pgs, unsigned int n);

/* pager_tail.c */
/* p->tail bits: written in each of the last seven ticks (TAIL_AGE: the
 * current one TAIL_CUR, the one before TAIL_PREV, older ones below), and
 * since the last offload's scan (TAIL_SINCE: these writes no longer reach
 * it). */
#define TAIL_SINCE	0x01u
#define TAIL_AGE	0xfeu
#define TAIL_PREV	0x40u
#define TAIL_CUR	0x80u
/* The offload worker, between jobs: make the set if the wait began, or
 * tick if one is due (true: it did one of them, with the lock dropped
 * meanwhile); else *@wait_ns is how long until the next tick (0: none).
 * Lock held. */
bool pager_tail_work_locked(struct pager *p, uint64_t *wait_ns);
/* An offload's scan: add the pages ticks found written since the last
 * one to @written (npages entries), and forget them.  Lock held. */
void pager_tail_merge_written_locked(struct pager *p, uint8_t *written);
/* The offload's kept pages: @pgs holds @n sorted (room for
 * PAGER_KEEP_MAX_PAGES); add the set's (critical_resident and
 * tail_resident), sorted, without duplicates.  How many now.  Lock held. */
unsigned int pager_tail_keep_locked(const struct pager *p, uint64_t *pgs, unsigned int n);
/* RESIDENT pages of the set (written: the offloads keep them unwritten).
 * Lock held. */
uint64_t pager_tail_resident_locked(const struct pager *p);
/* The offload worker, after an offload (@done: it completed; on @ring,
 * idle now and dropped after this): the set's first offload stored it;
 * read its pages back into the memfd, mapped by no mapper, so that a
 * touch shows (tail_learn).  Stopped, the next offload of the wait tries
 * again.  Once put back, later offloads keep it. */
void pager_tail_install(struct pager *p, struct io_uring *ring, bool done);
/* pager_tail_track() once the mappers are registered and the worker runs:
 * start ticking (@on) or make the wait's set.  Lock not held. */
void pager_tail_command(struct pager *p, bool on, uint64_t until_ns);

/* pager_offload.c */
/* Hand the job offload_job_set_locked() set to the offload worker,
 * starting it at the first job.  -errno (the job is dropped: p->offloading
 * cleared) if the worker cannot start. */
int pager_offload_worker_kick(struct pager *p);
/* Start the worker without a job (its ticks, pager_tail.c), if it has not
 * started.  Loop thread.  -errno. */
int pager_offload_worker_start(struct pager *p);
/* Stop the worker (a job it has not taken never runs) and join it. */
void pager_offload_worker_stop(struct pager *p);

/* pager_dirty.c */
/* Is dirty tracking on (restored pages become CLEAN)?  Lock held. */
static inline bool pager_tracking_locked(const struct pager *p)
{
	return p->track == PAGER_DIRTY_WP_ASYNC || p->track == PAGER_DIRTY_WP_SYNC;
}
/* Where a restore can map the run [pg, pg+n) of one region into mapper @m
 * with UFFDIO_COPY (write-protected while writes are tracked): the run's
 * address in @m's address space, if @m is alive and registered, maps the
 * run whole, and - while writes are tracked - is registered for
 * write-protect too (else a write there would go unseen); 0 if not (the
 * restore then puts the run into the memfd).  Lock held. */
static inline uint64_t pg_mapper_addr_locked(struct pager *p, const struct pager_mapper *m,
					     uint64_t pg, uint64_t n)
{
	const struct pager_region *r = pg_region(p, pg);
	unsigned int ri = (unsigned int)(r - p->regions);
	uint64_t off = (pg - r->first_page) * PAGER_PAGE_SIZE;

	if (m->dead || !m->registered || !m->host_addr[ri] || off < m->map_lo[ri] ||
	    off + n * PAGER_PAGE_SIZE > m->map_hi[ri] ||
	    (!m->wp && pager_tracking_locked(p)))
		return 0;
	return m->host_addr[ri] + off;
}
/* The registration mode for @m, and after a successful registration with
 * it, whether tracking works for @m (else tracking falls back to none for
 * the VM, logged and counted).  p->reg_lock held, p->lock not. */
uint64_t pager_dirty_reg_mode(struct pager *p, struct pager_mapper *m);
int pager_dirty_registered(struct pager *p, struct pager_mapper *m,
			   uint64_t mode, int reg_err);
/* Tracking cannot continue (@why, static): every CLEAN page becomes
 * RESIDENT.  Lock not held. */
void pager_dirty_fallback(struct pager *p, const char *why);
/* A scan (or vmnapd's own access) saw page @pg written: a CLEAN page
 * becomes RESIDENT (true: counted), one in flight is marked so that it is
 * not made CLEAN when its move ends.  Lock held. */
static inline bool pager_dirty_note_locked(struct pager *p, uint64_t pg)
{
	if (pg_state(p, pg) == PAGE_CLEAN) {
		pg_set(p, pg, PAGE_RESIDENT);
		return true;
	}
	if (pg_state(p, pg) == PAGE_IN_FLIGHT)
		p->state[pg] |= PG_WRITTEN;
	return false;
}
/* How a restored run comes back into a write-protect-tracked mapper (see
 * PAGER_HOT_CYCLES in pager.h). */
enum pager_wmap {
	PAGER_WMAP_PROTECTED,	/* protected: its first write is seen */
	PAGER_WMAP_HOT,		/* writable: every page write-hot */
	PAGER_WMAP_STREAM,	/* writable: a write stream's */
	PAGER_WMAP_SAMPLED,	/* writable but for each block's sample */
};
/* The plan for one restored run: how, and for SAMPLED the pages (bit i:
 * the run's page i) that come back protected.  Runs of more than
 * PAGER_MAX_FAULT_AROUND pages are never SAMPLED. */
struct pager_wplan {
	enum pager_wmap how;
	uint64_t wp[PAGER_MAX_FAULT_AROUND / 64];
};
/* Does the run's page @i come back write-protected?  (@w NULL: no) */
static inline bool pager_wplan_wp(const struct pager_wplan *w, uint64_t i)
{
	if (!w)
		return false;
	if (w->how == PAGER_WMAP_SAMPLED)
		return w->wp[i / 64] >> (i % 64) & 1;
	return w->how == PAGER_WMAP_PROTECTED;
}
/* The end of the stretch of the run's pages from @i (below @n) that come
 * back alike, write-protected or not: one UFFDIO_COPY each. */
static inline uint64_t pager_wplan_stretch(const struct pager_wplan *w, uint64_t i, uint64_t n)
{
	bool wp = pager_wplan_wp(w, i);
	uint64_t j = i + 1;

	while (j < n && pager_wplan_wp(w, j) == wp)
		j++;
	return j;
}
/* Beside the streak (its low bits) hot_streak marks a sampled restore's
 * pages until the next offload's scan (pager_hot_scan_locked). */
#define HOT_STREAK_MASK	0x3f
#define HOT_SAMPLE	0x40	/* restored protected: its block's sample */
#define HOT_VOUCHED	0x80	/* restored writable on its block's sample */
/* Plan how run [pg, pg+n) comes back into *@w: writable when every page
 * is write-hot, or when @stream (a write stream's run); when only pages
 * seen written again before have run out (wp_async), writable but for
 * one sample of them per block that has none since the last offload's
 * scan (marked, with the others, in hot_streak);
 * protected while an offload runs (its scans must see every write), or
 * else.  Returns w->how.  Lock held. */
enum pager_wmap pager_wmap_locked(struct pager *p, uint64_t pg, uint64_t n, bool stream,
				  struct pager_wplan *w);
/* Page @pg was seen written after a protected restore (or by the write
 * fault that restores it; or its block's sample was, when it came back
 * writable on it): write-hot for its next restores, twice as many as the
 * last time (see PAGER_HOT_CYCLES in pager.h).  Lock held. */
static inline void pager_hot_extend_locked(struct pager *p, uint64_t pg)
{
	uint8_t s = p->hot_streak[pg] & HOT_STREAK_MASK;

	if (s < PAGER_HOT_STREAK_MAX)
		s++;
	p->hot_streak[pg] = (uint8_t)((p->hot_streak[pg] & ~HOT_STREAK_MASK) | s);
	p->hot[pg] = (uint8_t)(PAGER_HOT_CYCLES << (s - 1));
}
static inline void pager_hot_renew_locked(struct pager *p, uint64_t pg)
{
	if (p->hot_streak[pg] & HOT_STREAK_MASK)
		p->dirty_hot_again++;	/* written again: a check */
	pager_hot_extend_locked(p, pg);
}
/* A dirty scan (an offload's, or a tick's: pager_tail.c) found page @pg
 * written: note it; a CLEAN page (restored, then written) becomes
 * RESIDENT, joins this cycle's working set and stays write-hot longer
 * (true: counted in dirty_scanned by the caller).  Lock held. */
static inline bool pager_dirty_seen_locked(struct pager *p, uint64_t pg)
{
	if (!pager_dirty_note_locked(p, pg))
		return false;
	p->state[pg] |= PG_WS_CUR;
	pager_hot_renew_locked(p, pg);
	return true;
}
/* The pages of [pg, pg+n) restored writable on their block's sample
 * since the last offload's scan.  Lock held. */
static inline uint64_t pager_hot_vouched_locked(const struct pager *p, uint64_t pg, uint64_t n)
{
	uint64_t v = 0;

	for (uint64_t i = pg; p->hot_marked && i < pg + n; i++)
		v += (p->hot_streak[i] & HOT_VOUCHED) != 0;
	return v;
}
/* An offload's scan found page @pg written (@written) or not: a sample
 * renews its block's vouched pages or starts them over.  Called for each
 * page scanned, then pager_hot_scan_end_locked, which clears every mark.
 * Lock held. */
void pager_hot_scan_locked(struct pager *p, uint64_t pg, bool written);
void pager_hot_scan_end_locked(struct pager *p);
/* Run [pg, pg+n) was mapped as @w planned (not PROTECTED): no write to
 * its writable pages will be seen, so they are RESIDENT; a write-hot page
 * has one writable restore less.  Counted.  Lock held. */
void pager_wmap_done_locked(struct pager *p, uint64_t pg, uint64_t n,
			    const struct pager_wplan *w);
/* The state of a resident page whose slot is valid, as a move ends:
 * CLEAN if tracking and not seen written meanwhile.  Lock held. */
static inline enum pager_page_state pager_clean_state_locked(struct pager *p, uint64_t pg)
{
	bool written = p->state[pg] & PG_WRITTEN;

	p->state[pg] &= (uint8_t)~PG_WRITTEN;
	return pager_tracking_locked(p) && !written ? PAGE_CLEAN : PAGE_RESIDENT;
}
/*
 * Pages an offload leaves resident (the resume-critical set and the
 * devices' pages, with critical_resident), sorted: the scans report their writes but do not
 * protect them again, and wp_sync leaves those of them already written
 * unprotected (the offload passes only those to pager_dirty_protect; a
 * CLEAN page is protected again like any).  Such a page is written at
 * almost every wake (kernel stacks, timers, socket buffers); protecting it
 * again would cost a write fault per wake for a slot that matters only
 * once the page leaves the set, and then, written, it is RESIDENT and its
 * next offload writes it.
 */
struct pager_keep {
	const uint64_t *pg;
	unsigned int nr;
};
/* The first entry of @keep (NULL: none) at or above page @pg. */
unsigned int pager_keep_first(const struct pager_keep *keep, uint64_t pg);
/* Scan every tracked mapper for pages of [pg, pg+n) written since the last
 * scan (re-protecting them, but for @keep's; NULL: none); set
 * written[i - pg] for each.  0 or -errno (then tracking has fallen back:
 * treat every page as written).  Neither lock held. */
int pager_dirty_scan(struct pager *p, uint64_t pg, uint64_t n, uint8_t *written,
		     const struct pager_keep *keep);
/* Every page some tracked mapper maps now (PAGE_IS_PRESENT), into
 * @mapped (npages bytes); nothing protected.  The offload worker.  -errno
 * as pager_dirty_scan. */
int pager_mapped_peek(struct pager *p, uint8_t *mapped);
/* PAGEMAP_SCAN of [start, end) in pagemap @fd for the pages in @category
 * (PAGE_IS_*), with @flags (PM_SCAN_*), PAGER_SCAN_VEC ranges of @vec at a
 * time: @fn(@arg, lo, hi) for each range found.  0 or -errno. */
#define PAGER_SCAN_VEC	512
int pager_pagemap_scan(int fd, uint64_t start, uint64_t end, uint64_t flags,
		       uint64_t category, struct page_region *vec,
		       void (*fn)(void *arg, uint64_t lo, uint64_t hi), void *arg);
/* How many pages of [pg, pg+n) mapper @m wrote since they were last
 * protected: wp_async, its page table's entries without the uffd-wp bit
 * (a report: nothing is protected again); wp_sync, the pages its write
 * faults made RESIDENT.  0 without tracking, when @m does not map the run
 * whole, or when the scan fails.  Lock held (@m is the fault thread's, or
 * reg_lock is held). */
uint64_t pager_dirty_written_locked(struct pager *p, struct pager_mapper *m,
				    uint64_t pg, uint64_t n);
/* wp_sync: write-protect pages [pg, pg+n) but for @keep's (NULL: none) in
 * every tracked mapper (all of them at an offload's start; a batch's again
 * once claimed).  0 or -errno (then tracking has fallen back).  Neither
 * lock held. */
int pager_dirty_protect(struct pager *p, uint64_t pg, uint64_t n,
			const struct pager_keep *keep);
/* Open the mapper's pagemap for scans (at add). */
void pager_dirty_mapper_init(struct pager *p, struct pager_mapper *m);

/* pager_recover.c */
/* Page states from the adopted store's map and the memfds: a page the map
 * holds is OFFLOADED where the memfd has a hole, else RESIDENT.  Before
 * the threads start. */
int pager_recover(struct pager *p);
/* A mapper of a recovered pager was added (and registered): wake the
 * faults the previous vmnapd read but never answered. */
void pager_recover_wake(struct pager *p, struct pager_mapper *m);

#endif
