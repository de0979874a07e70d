/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pager.h - a VM's guest RAM: page states, the per-VM store, userfaultfd
 * fault service and working-set prefetch.
 *
 * Guest RAM is one or more regions of shared memfds.  Each region is known
 * by its guest-physical address (gpa), its size, the memfd and the offset
 * in it.  Every process that maps a region is a "mapper" and hands vmnapd a
 * userfaultfd for its mapping (mem_handshake.c); the pager registers the
 * mappers' ranges MISSING only while pages are out - with dirty tracking
 * (enum pager_dirty_tracking) MISSING|WP from the first offload until the
 * pager is freed.
 *
 * Per 4 KiB page one state:
 *   RESIDENT   the memfd holds the page (or may: a hole reads as zero)
 *   OFFLOADED  the page is in the store at its slot, punched from the memfd
 *   ZERO       known zero or reported free: punched, nothing stored
 *   IN_FLIGHT  being written out or brought back by one thread
 *   CLEAN      resident and its slot in the store still valid (restored
 *              and not written since, as far as dirty tracking has seen):
 *              the next offload punches it without I/O
 *
 * Threads: every function here is called from the event-loop thread unless
 * it says otherwise; the pager runs its own fault-service, prefetch,
 * residency (make_resident_async) and offload threads (each one per pager,
 * named vmnap-*) and reports back to the loop (offload done, errors,
 * memory made resident) through eventfds;
 * pager_free_async leaves its teardown to a reaper thread.  The page-state
 * table is shared under one mutex.
 *
 * Store slots: the slot of a page is its index in guest RAM (region order),
 * so the store file is laid out like guest RAM, sparse, and contiguous
 * guest pages are contiguous on disk.  Persisting the slot map for crash
 * safety is then persisting the OFFLOADED bitmap before the punch.
 */
#ifndef VMNAP_PAGER_H
#define VMNAP_PAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "uapi/vmnap.h"
#include "loop.h"

#define PAGER_PAGE_SIZE		4096u
#define PAGER_MAX_REGIONS	64	/* per VM */
#define PAGER_MAX_MAPPERS	16	/* processes mapping one VM's RAM */
#define PAGER_LAT_BUCKETS	32	/* fault latency: power-of-2 µs buckets */
#define PAGER_MAX_FAULT_AROUND	256	/* pages (1 MiB) */
#define PAGER_DEFAULT_FAULT_AROUND	8	/* the adaptive window's max */
/* Sequential fault streams followed per mapper at once: a guest walking
 * one buffer interleaves its faults with others (its kernel's, other
 * tasks'), which would end a single stream at every stray fault. */
#define PAGER_STREAMS		4
/* Resume-critical set: at most this many pages (4 MiB) are recorded and
 * restored before a resume (or, with pager_config.critical_resident, never
 * evicted); by default the restore stops after this long
 * (pager_config.critical_budget_ns). */
#define PAGER_CRITICAL_MAX_PAGES	1024
/* Pages of vmnapd's own devices kept resident (pager_set_device_pages). */
#define PAGER_DEVICE_MAX_PAGES		64
#define PAGER_CRITICAL_BUDGET_NS	5000000ull	/* 5 ms */
/* The command's last writes (pager_config.tail_resident): scanned every
 * PAGER_TAIL_TICK_MS while a command runs (or less often where one scan
 * takes over 1/PAGER_TAIL_DUTY of that); at most PAGER_TAIL_MAX_PAGES,
 * of the last two ticks, kept resident through the wait. */
#define PAGER_TAIL_TICK_MS		100
#define PAGER_TAIL_START_S		120	/* pager_tail_track_start */
/* ... where, while each tick finds more written pages than a set holds,
 * the time to the next doubles, up to this */
#define PAGER_TAIL_START_GAP_MS		1600
#define PAGER_TAIL_DUTY			20	/* ... or 20 scans' time: at
						 * most 5 % of a CPU */
#define PAGER_TAIL_MAX_PAGES		512
/* ... and a command's ticks stop (its wait gets no set) once they have
 * found this many written pages, each a write-protect fault its writer
 * took (pager_config.tail_budget_pages by default): 64 MiB of writes,
 * about 10 ms of faults on a host with hardware paging, about a second
 * on a shadow-paging one, where a command that kept rewriting 150 MiB
 * took 219 thousand more faults and ran twice as long scanned. */
#define PAGER_TAIL_BUDGET_PAGES		16384
/* ... and no command is scanned once this many sets in a row were made
 * with no offload ended since (a VM whose waits are not offloaded would
 * pay for sets it never uses), until an offload ends */
#define PAGER_TAIL_IDLE_SETS		4
/* Fault-order prefetch (pager_config.follow_pages): the fault orders of
 * the last PAGER_FOLLOW_CYCLES data cycles are kept, at most
 * PAGER_FOLLOW_MAX_PAGES pages each; a fault queues at most
 * PAGER_MAX_FOLLOW pages that came after it in the newest that holds it. */
#define PAGER_FOLLOW_CYCLES		16
#define PAGER_FOLLOW_MAX_PAGES		8192
#define PAGER_MAX_FOLLOW		64

/* Tunables; pager_config_default() fills the defaults. */
struct pager_config {
	const char *store_dir;		/* 0700 directory; store file <vm>.store */
	uint32_t fault_around_pages;	/* max pages one fault brings in, 1 ..
					 * PAGER_MAX_FAULT_AROUND */
	uint32_t write_batch_bytes;	/* offload: bytes read+written per batch */
	uint32_t write_queue_depth;	/* offload: batches in flight (io_uring) */
	uint32_t prefetch_min_bytes;	/* prefetch transfer size after a fault */
	uint32_t prefetch_max_bytes;	/* ... grows x2 per quiet chunk up to this */
	bool prefetch;			/* working-set prefetch after resume */
	uint64_t critical_budget_ns;	/* pre-resume restore stops after this
					 * (0: no pre-resume restore) */
	bool critical_resident;		/* offloads leave the resume-critical
					 * set's pages resident and mapped, so
					 * a resume neither restores nor
					 * faults on them (at most 4 MiB held
					 * through each wait); default false */
	int tail_resident;		/* enum pager_tail, with
					 * critical_resident: offloads also
					 * leave the pages the command wrote
					 * last before its wait
					 * (pager_tail_track) resident, at
					 * most 2 MiB; default off */
	uint32_t tail_budget_pages;	/* a command's ticks stop once they
					 * found this many written pages
					 * (PAGER_TAIL_BUDGET_PAGES) */
	uint32_t follow_pages;		/* fault-order prefetch: after a fault
					 * on a page the last data cycles
					 * faulted, the pages that came after
					 * it there (0 .. PAGER_MAX_FOLLOW; 0:
					 * off, the default) */
	bool direct_io;			/* O_DIRECT on the store (falls back if
					 * the file system refuses it) */
	uint32_t fault_error_timeout_ms;	/* a fault the store keeps failing
					 * this long loses the VM ("lost" at
					 * pager_set_error_cb); 0: never */
	int restore;			/* enum pager_restore: after a resume */
	int delivery_io_class;		/* enum pager_io_class: the store
					 * reads a resume's delivery waits on */
};
/* pager_config.fault_error_timeout_ms by default */
#define PAGER_FAULT_ERROR_TIMEOUT_MS	30000u

void pager_config_default(struct pager_config *cfg, const char *store_dir);

/* One region of guest RAM as the handshake describes it. */
struct pager_region_desc {
	uint64_t gpa;
	uint64_t size;
	uint64_t memfd_offset;
	uint64_t host_addr;		/* in the mapper's address space */
	int memfd;			/* -1: anonymous memory (not evictable) */
};

/*
 * How offloaded pages come back after a resume (faults are always served
 * first; every mode keeps readahead for a sequential fault stream):
 *   working-set  the pages touched in the last resume cycle that are
 *                still offloaded stream back in the background
 *   eager        every offloaded page streams back in the background at
 *                store speed
 *   lazy         faults only, besides the resume-critical set read back
 *                before the VMM continues (pager_resume_prepare), as in
 *                every mode
 *   recurring    the pages touched in each of the last two data cycles
 *                (cycles in which data arrived: a resume by the policy, or
 *                pager_data_arrived) that are still offloaded stream back
 *                in the background, as working-set does with the last
 *                cycle's; a cycle with no data (a guest timer's) leaves
 *                the set as it was
 *
 * "Touched" in a cycle (resume to next offload) is: the page a userfaultfd
 * fault asked for (not its fault-around neighbours), a page dirty tracking
 * saw written (a PAGEMAP_SCAN or a wp_sync fault) or vmnapd itself asked
 * for (pager_make_resident), the window a sequential fault stream brings, and a page restored in the background that a
 * mapper's page table maps when the next offload starts (/proc/PID/pagemap
 * "present": restoring writes the memfd, which maps nothing, so only an
 * access maps it).  A page not touched in a cycle leaves the working set:
 * it shrinks.  A read-only fault-around neighbour is not seen (it was
 * mapped by the fault's UFFDIO_COPY): it drops out after one cycle and
 * comes back by fault-around again.
 */
enum pager_restore {
	PAGER_RESTORE_WORKING_SET = 0,
	PAGER_RESTORE_EAGER,
	PAGER_RESTORE_LAZY,
	PAGER_RESTORE_RECURRING,
	PAGER_RESTORES,
	PAGER_RESTORE_POLICY = PAGER_RESTORES,	/* pager_resume_restore: the VM's */
};
const char *pager_restore_name(enum pager_restore r);
/* "working-set", "eager", "lazy", "recurring" -> *@out; -EINVAL. */
int pager_restore_parse(const char *s, enum pager_restore *out);

/*
 * The block-layer I/O class of the store reads a resume's delivery waits
 * on (pager_config.delivery_io_class): from a resume to its delivery
 * (pager_resume_prepare or pager_data_window .. pager_resume_delivered)
 * the fault thread's reads, a fault's read-ahead and fault-order runs
 * (the prefetch thread's) and the device's make-resident reads.  Behind
 * other best-effort I/O on the store's device (evictions, the VMs' own
 * disks) a 4 KiB read takes several times its idle latency.  All of
 * them, or a fault would wait for a page behind its own realtime reads:
 * mq-deadline dispatches no best-effort request while a realtime one is
 * queued or in flight.  For that reason too, nothing else is raised:
 * outside the window, and for working-set or eager restore, the reads
 * stay in the class vmnapd runs with, as evictions do.  Realtime needs
 * CAP_SYS_ADMIN or CAP_SYS_NICE; refused, the window's reads stay as the
 * rest and the stats say why (pager_stats.delivery_io_class, _reason).
 */
enum pager_io_class {
	PAGER_IO_REALTIME = 0,	/* IOPRIO_CLASS_RT, level 4 (the default) */
	PAGER_IO_INHERIT,	/* as vmnapd runs */
	PAGER_IO_CLASSES,
};
const char *pager_io_class_name(enum pager_io_class c);
/* "realtime", "inherit" -> *@out; -EINVAL. */
int pager_io_class_parse(const char *s, enum pager_io_class *out);

/* When the command's last writes are kept (pager_config.tail_resident). */
enum pager_tail {
	PAGER_TAIL_OFF = 0,
	PAGER_TAIL_FIRST,	/* until the resume-critical set has pages */
	PAGER_TAIL_ALWAYS,	/* every wait */
	PAGER_TAILS,
};
const char *pager_tail_name(enum pager_tail t);
/* "off", "first", "always" -> *@out; -EINVAL. */
int pager_tail_parse(const char *s, enum pager_tail *out);

enum pager_page_state {
	PAGE_RESIDENT = 0,
	PAGE_OFFLOADED,
	PAGE_ZERO,
	PAGE_IN_FLIGHT,
	PAGE_CLEAN,
	PAGE_STATES
};

/*
 * How writes to restored pages are seen, chosen once per VM when its
 * mappers are first registered (pager_stats.dirty_tracking):
 *   wp_async  userfaultfd write-protect with UFFD_FEATURE_WP_ASYNC: the
 *             kernel resolves write faults itself; PAGEMAP_SCAN on each
 *             mapper's /proc/PID/pagemap reports (and re-protects) the
 *             pages written since the last scan
 *   wp_sync   userfaultfd write-protect without WP_ASYNC: each offload
 *             protects every mapper's ranges (UFFDIO_WRITEPROTECT), the
 *             first write to a protected page faults to vmnapd, which marks
 *             it dirty (after waiting for a move of it to end) and lets the
 *             write through; slower per write, but a write during an
 *             offload waits for the page instead of racing its punch
 *   none      no tracking: a restored page is RESIDENT (never CLEAN) and
 *             every offload writes every resident page
 *
 * With tracking, every first write to a restored page costs the writer a
 * fault (the kernel's, or vmnapd's for wp_sync).  So a page seen written
 * after its restore is "write-hot" for PAGER_HOT_CYCLES restores: a fault
 * run, or a read-ahead run for a live mapper's stream, made only of
 * write-hot pages is copied into that mapper writable and RESIDENT
 * (written again by the next offload, as if written); once the count runs
 * out they are restored protected again - then only a write seen once
 * more keeps them hot, and for twice as many restores as the last time
 * (up to PAGER_HOT_CYCLES << (PAGER_HOT_STREAK_MAX - 1)): a page written
 * after each of its protected restores costs one write-protect fault per
 * check, and the checks grow rarer.  A protected restore not written by
 * the next offload (punched CLEAN) starts the page over.  A check is made
 * by sample (wp_async): when every page of a run whose writable restores
 * ran out has been seen written again before, one of them per aligned
 * block of PAGER_HOT_SAMPLE_PAGES comes back protected (the block's
 * sample, a different one each offload; taken by the first such run of
 * the block restored since the last offload, so the block's later runs
 * need none) and the others writable (RESIDENT, as write-hot pages); the
 * next offload's scan renews the block's pages with their sample if it
 * was written, and starts them over with it if not (then their next
 * restore is protected, each page its own check).  The cost of a check
 * falls to one fault per block; the price is that a page gone cold in a
 * block whose sample is still written is written by the offloads as if
 * hot until it is a sample itself or a sample finds the block cold.  Two more
 * restores come back writable on evidence at hand: a write fault's page,
 * when copied alone (protected, the write would fault again at once; it
 * becomes write-hot too), and a sequential
 * stream's window and read-ahead when at least half of its last run (as
 * far as the stream went through it) is written already (a report-only
 * PAGEMAP_SCAN of it for wp_async, its states for wp_sync): a guest
 * filling or rewriting memory in order.  Only that run, restored from the
 * store (protected unless known written), is evidence - not the zero
 * pages filled writable in between.  Such a stream stays a write stream
 * while it lasts (its runs come back writable); at its end up to two
 * windows may come back writable unused, which the next offload writes.
 * A prefetched page stays CLEAN and protected: it is mapped by the access
 * itself, read-only in a write-protect-registered mapping, so unprotecting
 * it would save no fault.  While an offload runs every restore is
 * protected (its scans must see every write).
 */
#define PAGER_HOT_CYCLES	4
#define PAGER_HOT_STREAK_MAX	6	/* 4, 8, ... 128 writable restores */
/* pages checked by one sample (2 MiB, a huge page's worth): a check of a
 * 128 MiB guest's write-hot pages costs 64 write-protect faults */
#define PAGER_HOT_SAMPLE_PAGES	512
enum pager_dirty_tracking {
	PAGER_DIRTY_UNKNOWN = 0,	/* not decided yet (nothing registered) */
	PAGER_DIRTY_WP_ASYNC,
	PAGER_DIRTY_NONE,
	PAGER_DIRTY_WP_SYNC,
};
const char *pager_dirty_tracking_name(enum pager_dirty_tracking t);

/*
 * Where the pager's guest-physical map comes from.  Only a map the pager
 * can trust is used for GPA-based operations (drop_free, make_resident,
 * GPA<->memfd translation): acting on a guessed map would punch or
 * restore the wrong memfd pages, i.e. corrupt guest memory silently.
 */
enum pager_gpa_source {
	PAGER_GPA_STATED = 0,	/* the VMM stated each region's gpa itself */
	PAGER_GPA_GUESSED,	/* gpa = base + memfd offset, unverified: not
				 * used (QEMU q35/pc put RAM above 4 GiB at
				 * memfd offsets below it) */
	PAGER_GPA_LINEAR,	/* gpa = base + memfd offset, and the VMM side
				 * knows its layout is linear (e.g. QEMU x86
				 * with all RAM below the low-memory split) */
	PAGER_GPA_MEM_TABLE,	/* a vhost-user SET_MEM_TABLE (true layout) */
	PAGER_GPA_SOURCES
};

/* One region of a vhost-user memory table: guest-physical [gpa, gpa+size)
 * is @fd from @fd_offset on.  @fd is borrowed. */
struct pager_mem_table_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t fd_offset;
	int fd;
};

struct pager_stats {
	uint64_t pages[PAGE_STATES];	/* count per enum pager_page_state */
	uint64_t pages_total;
	uint64_t ram_bytes;		/* guest RAM size */
	uint64_t resident_bytes;	/* memfds' allocated blocks */
	uint64_t store_bytes;		/* bytes held in the store (offloaded) */
	uint64_t store_file_bytes;	/* the store file's allocated blocks */
	uint64_t faults;		/* userfaultfd MISSING events served */
	uint64_t fault_pages;		/* pages brought in by faults (+around) */
	uint64_t zero_faults;		/* served with UFFDIO_ZEROPAGE */
	uint64_t zero_ahead_pages;	/* ZERO pages filled with a fault's */
	uint64_t eexist;		/* EEXIST answered with UFFDIO_WAKE */
	uint64_t prefetch_pages;	/* pages brought in by prefetch */
	/* adaptive fault-around: the window now (1 .. fault_around_max);
	 * neighbours of random faults installed unmapped, and of them the
	 * ones a mapper mapped by the next offload (hits) or not (misses) */
	uint32_t fault_around_pages, fault_around_max;
	uint64_t fault_around_installed, fault_around_hits, fault_around_misses;
	/* what the window is chosen by: a random fault's mean service time
	 * (what a hit spares) and one neighbour's cost (its share of a
	 * larger store read and its memfd write), ns */
	uint64_t fault_around_fault_ns, fault_around_page_ns;
	uint64_t fault_sequential;	/* faults served as a sequential
					 * stream's (a doubling window) */
	/* fault-order prefetch: pages queued after a fault; of them, put
	 * into the memfd unmapped, then mapped by the next offload (hits) or
	 * not (misses); faulted before the prefetch got to them (late) */
	uint32_t follow_pages;
	uint64_t follow_queued, follow_installed, follow_hits, follow_misses, follow_late;
	uint64_t offloads;		/* completed offloads */
	uint64_t offload_errors;	/* aborted offloads (ENOSPC, EIO, ...) */
	uint64_t offload_cancels;	/* offloads stopped by pager_offload_cancel */
	uint64_t stale_discards_deferred; /* tidies of stale store slots left
					   * to the next offload: a resume began */
	uint64_t stale_slots_kept;	/* stale slots of RESIDENT pages whose
					 * blocks a tidy kept for their next
					 * write (not punched: no allocation) */
	uint64_t fault_errors;		/* faults that could not be served (yet) */
	uint64_t restore_errors;	/* store reads failed: prefetch, make_resident */
	uint64_t resident_asked;	/* make_resident_async ranges queued */
	uint64_t resident_failed;	/* ... that could not be made resident */
	uint64_t fault_retries;		/* unserved faults tried again */
	uint32_t faults_stuck;		/* faulting threads waiting for a retry */
	uint64_t last_offload_ns;	/* duration of the last offload */
	uint64_t last_offload_written;	/* bytes written by the last offload */
	uint64_t dropped_free_pages;	/* pages made ZERO by pager_drop_free */
	uint64_t vmm_removed_pages;	/* pages made ZERO: the VMM discarded them
					 * (userfaultfd REMOVE: MADV_DONTNEED/REMOVE) */
	uint64_t vmm_unmaps;		/* mapper ranges the VMM unmapped (UNMAP) */
	uint64_t vmm_remaps;		/* mapper ranges the VMM moved (REMAP) */
	uint64_t gpa_refused;		/* GPA operations refused: map untrusted */
	enum pager_gpa_source gpa_source;
	uint32_t mappers;
	bool registered;		/* mappers' ranges registered MISSING */
	bool evictable;
	const char *not_evictable_reason;	/* static string or NULL */
	/* bucket i: latency in [2^i, 2^(i+1)) µs; bucket 0 also < 1 µs.  A
	 * fault counts in faults as it arrives (before its faulter is woken),
	 * here once served (after): while its page is in flight the histogram
	 * holds one fault fewer */
	uint64_t fault_lat_us[PAGER_LAT_BUCKETS];
	uint64_t fault_lat_ns_sum;	/* true sum of the latencies above, ns */
	uint64_t fault_read_ns_sum;	/* of that, in store reads (OFFLOADED) */
	uint64_t fault_lock_ns_sum;	/* ... waiting for the pager's lock */
	uint64_t fault_in_flight_ns_sum; /* ... waiting for a page in flight
					 * (read back by the prefetch thread
					 * or written out by an offload) */
	uint64_t fault_in_flight_faults; /* faults that waited so */
	uint64_t fault_seq_ns_sum;	/* latencies of the faults served as
					 * a sequential stream's window */
	/* resume-critical set (pager_resume_prepare) */
	uint64_t critical_set_pages;		/* pages in the set now */
	uint64_t device_pages;			/* of vmnapd's devices, kept
						 * with it (pager_set_device_pages) */
	uint64_t device_ranges_refused;		/* device ranges outside guest RAM */
	uint64_t device_read_back;		/* device ranges out when named,
						 * asked back from the store */
	uint64_t kept_dirty_pages;		/* RESIDENT pages of the set and
						 * the devices': an offload keeps
						 * them, so it will not write them
						 * (critical_resident; else 0) */
	uint64_t critical_restored_pages;	/* restored before a resume */
	uint64_t critical_mapped_pages;		/* ... of them mapped into the
						 * VMM (UFFDIO_COPY), not only
						 * put into the memfd */
	uint64_t critical_kept_pages;		/* left resident by offloads
						 * (critical_resident) */
	uint64_t critical_window_faults;	/* faults between resume and
						 * delivery (what the set avoids) */
	uint64_t critical_data_windows;		/* windows opened for data taken
						 * in while running with pages
						 * out (pager_data_window) */
	uint64_t critical_budget_stops;		/* restores cut by the budget */
	uint64_t critical_ring_resets;		/* store rings dropped: a read the
						 * ring did not take or complete */
	uint64_t critical_last_restore_ns;	/* duration of the last restore */
	/* the command's last writes (tail_resident) */
	uint64_t tail_pages;			/* in the set now */
	uint64_t tail_ticks;			/* scans while commands ran */
	uint64_t tail_sets;			/* sets made (waits begun) */
	bool tail_ticking;			/* scanning: a command runs */
	uint64_t tail_tick_pages;		/* written pages the ticks found
						 * (a write-protect fault each) */
	uint64_t tail_budget_stops;		/* commands whose ticks stopped
						 * at tail_budget_pages: no set */
	uint64_t tail_idle_stops;		/* commands not scanned: the last
						 * PAGER_TAIL_IDLE_SETS sets had
						 * no offload */
	uint64_t tail_backoffs;			/* ticks before the first wait
						 * that put the next further off
						 * (PAGER_TAIL_START_GAP_MS) */
	uint64_t tail_installed;		/* of the sets' pages, stored
						 * and put back unmapped */
	uint64_t tail_learned;			/* ... of them, touched on the
						 * data's way: noted in the
						 * resume-critical set */
	/* recovery: created over a store a previous vmnapd left */
	bool recovered;
	uint64_t recovered_store_pages;	/* pages its slot map held */
	uint64_t recovered_offloaded;	/* ... out of the memfd: OFFLOADED */
	uint64_t recovered_resident;	/* ... in the memfd: RESIDENT */
	uint64_t recovered_discarded;	/* ... discarded by the VMM once back */
	uint64_t store_bad_slots;	/* store reads whose checksum mismatched */
	int lost_err;			/* -errno that lost the VM ("lost"), or 0 */
	uint32_t mappers_killed;	/* mapper processes sent SIGKILL for it */
	const char *store_id;		/* the pager's; valid while it lives */
	/* the I/O class of the store reads a delivery waits on, in effect
	 * (inherit until the fault thread ran), and the reads (a
	 * make-resident range counts once) made in the realtime class */
	enum pager_io_class delivery_io_class;
	const char *delivery_io_class_reason;	/* why not as configured; NULL */
	uint64_t delivery_io_reads;
	/* dirty tracking */
	enum pager_dirty_tracking dirty_tracking;
	const char *dirty_tracking_reason;	/* why "none"; static or NULL */
	uint64_t dirty_fallbacks;	/* tracking wanted but unavailable */
	uint64_t clean_punched_pages;	/* CLEAN pages offloaded with no I/O */
	uint64_t dirty_scanned_pages;	/* CLEAN pages a scan found written */
	uint64_t dirty_own_pages;	/* CLEAN pages vmnapd itself accessed */
	uint64_t dirty_kept_pages;	/* written during an offload: not punched */
	uint64_t dirty_wp_faults;	/* wp_sync: write faults served */
	uint64_t dirty_hot_pages;	/* restored writable: written lately */
	uint64_t dirty_hot_again_pages;	/* seen written again once their
					 * writable restores ran out */
	uint64_t dirty_hot_samples;	/* restored protected as their block's
					 * sample */
	uint64_t dirty_hot_vouched_pages;	/* restored writable on their
						 * block's sample */
	uint64_t dirty_hot_vouch_renewed_pages;	/* renewed: their sample was
						 * written */
	uint64_t dirty_hot_vouch_dropped_pages;	/* started over: their sample
						 * was not written */
	uint64_t dirty_stream_pages;	/* restored writable: a write stream's */
	uint64_t dirty_write_fault_pages;	/* restored writable: a write
						 * fault's page */
	uint64_t store_written_bytes;	/* slot bytes written by all offloads */
	/* restore after resume (enum pager_restore) */
	enum pager_restore restore;	/* the VM's policy */
	enum pager_restore last_restore;	/* how the last resume restored */
	uint64_t working_set_pages;	/* touched in the last cycle */
	uint64_t eager_pages;		/* pages brought in by eager restore */
	uint64_t data_arrivals;		/* timer cycles pager_data_arrived()
					 * made data cycles */
	uint64_t readahead_mapped_pages;	/* readahead of a sequential fault
						 * stream mapped into its mapper
						 * (in prefetch_pages) */
	uint64_t zero_copy_offloads;	/* offloads that wrote from a mapping */
	uint64_t precopies;		/* pre-copies run (pager_precopy_start) */
	uint64_t precopy_written_bytes;	/* ... bytes they wrote (in store_written_bytes) */
	uint64_t precopy_cleaned_pages;	/* ... pages they left CLEAN */
};

struct pager;
struct pager_mapper;

/*
 * Create a pager for guest RAM of @nr regions, serving on @loop, logging
 * as @subject (kept by reference: it must outlive the pager), its store
 * file named after @name in cfg->store_dir.  @owner is the caller's,
 * returned by pager_owner().  The pager takes ownership of the memfds in
 * @regions (closes them in pager_free).  0 and *@out, or -errno.
 */
int pager_new(struct loop *loop, const char *subject, const char *name,
	      const struct pager_config *cfg,
	      const struct pager_region_desc *regions, unsigned int nr,
	      void *owner, struct pager **out);
/*
 * The same over the store a previous vmnapd left for this VM (it ended
 * while the VMM lived on): the store file must carry @store_id (what
 * pager_store_id() said then) and the same regions; its slot map gives
 * the OFFLOADED pages (those the memfd lacks; a page the memfd holds is
 * RESIDENT), each mapper is registered at once and its ranges woken (the
 * faults the previous vmnapd never answered are served).  -EBUSY (the
 * store is locked), -ENOENT, -ESTALE (another store), -EBADMSG, -errno.
 */
int pager_new_from_store(struct loop *loop, const char *subject, const char *name,
			 const struct pager_config *cfg,
			 const struct pager_region_desc *rd, unsigned int nr,
			 const char *store_id, void *owner, struct pager **out);
/* The store's id (32 hex digits): a shim presents it to a restarted vmnapd. */
const char *pager_store_id(struct pager *p);
/*
 * Stop every pager thread (bringing offloaded pages back while mappers
 * live), close fds, free.  The store file is removed unless a mapper still
 * lives (the VMM may hand its memory to the next vmnapd).  NULL-safe.
 * Blocks for as long as that takes (joins, store reads): not for the loop.
 */
void pager_free(struct pager *p);
/*
 * pager_free for the loop thread: the pager leaves the loop at once (no
 * callback of it runs any more, @owner may go), the store file's name is
 * removed now unless a mapper lives (a new pager of the same name makes a
 * new file; with a live mapper the file stays, locked, and adopting or
 * recreating it is -EBUSY until the reaper is done: the memory handshake
 * waits for that), and a detached reaper thread does the rest as
 * pager_free does.  NULL-safe.
 */
void pager_free_async(struct pager *p);
/* Reapers still running; wait for all of them (daemon exit). */
unsigned int pager_reapers_active(void);
void pager_reapers_wait(void);

/*
 * Add a mapper: @uffd is a userfaultfd of the mapper's mm (UFFDIO_API
 * done), @host_addr[i] the address of region i in that mm (0: region not
 * mapped there).  Owns @uffd.  If pages are out, registers at once.  -errno.
 */
int pager_add_mapper(struct pager *p, int uffd, const uint64_t *host_addr,
		     unsigned int nr, pid_t pid, struct pager_mapper **out);
/*
 * A further mapper's region list must describe the same guest RAM: same
 * count, gpa, size, memfd offset and memfd inode.  0 or -EINVAL.
 */
int pager_regions_match(struct pager *p, const struct pager_region_desc *rd,
			unsigned int nr);
/* The mapper went away (its handshake connection closed). */
void pager_remove_mapper(struct pager *p, struct pager_mapper *m);
/* Mark the VM not evictable (e.g. anonymous memory), with a static reason. */
void pager_set_not_evictable(struct pager *p, const char *reason);

/*
 * How the handshake's gpa fields were obtained (default after attach:
 * PAGER_GPA_STATED).  A guessed map is not used for GPA operations.
 */
void pager_set_gpa_source(struct pager *p, enum pager_gpa_source src);
/*
 * The true guest-physical layout from a vhost-user memory table: each
 * region whose fd is one of the pager's memfds (same inode) and lies
 * inside a pager region becomes a GPA range; other regions (memory the
 * pager does not manage) are skipped.  Replaces the GPA map and makes it
 * trusted.  -EINVAL (misaligned, or an fd of guest RAM outside its
 * region: map unchanged), -ENOENT (no region of the pager's RAM).
 */
int pager_set_gpa_map(struct pager *p, const struct pager_mem_table_region *r,
		      unsigned int nr);
const char *pager_gpa_source_name(enum pager_gpa_source s);

/*
 * Errors the VM must know about: a fault that cannot be served (the
 * faulting thread stays blocked and is retried: never answered with
 * zeros), a failed read back (prefetch, make_resident), an offload I/O
 * error.  @cb runs on the loop thread with -errno and what failed
 * ("fault", "restore", "offload"); several errors before it runs are
 * reported once (every one is counted in pager_stats).  NULL: none.
 *
 * "lost" (once, never folded into another): a fault can never be served
 * - its store read failed for longer than fault_error_timeout_ms, or the
 * slot's crc32c mismatched (-EBADMSG).  The pager has sent SIGKILL to
 * every mapper process (the VMM): a vCPU blocked on that page is released
 * only by its process dying, never by zeros or wrong data.  Faults are no
 * longer served; pager_stats.lost_err keeps the error.
 */
void pager_set_error_cb(struct pager *p,
			void (*cb)(struct pager *p, int err, const char *what, void *arg),
			void *arg);

/*
 * Block until [gpa, gpa+len) is resident (OFFLOADED pages read back into
 * the memfd).  For vmnapd's own accesses to guest RAM, which may write it
 * through vmnapd's own mapping (vsock RX, used rings), where no dirty
 * tracking sees them: the range's CLEAN pages become RESIDENT (dirty), so
 * the next offload writes them.  Any thread. -errno.
 */
int pager_make_resident(struct pager *p, uint64_t gpa, uint64_t len);
/*
 * The same without waiting, for the loop thread: 0 when [gpa, gpa+len) is
 * resident now (its CLEAN pages made RESIDENT, as above); -EAGAIN when
 * pages of it are out: the pager's residency worker reads them back and
 * then the callback of pager_set_resident_cb runs on the loop thread (ask
 * again then); the error of an earlier request for the range that failed
 * (-EIO, -EBADMSG, told once); -ERANGE, -ENXIO, -EINVAL as above.
 */
int pager_make_resident_async(struct pager *p, uint64_t gpa, uint64_t len);
/* Memory asked for by pager_make_resident_async was restored (or failed).
 * @cb runs on the loop thread; NULL: none. */
void pager_set_resident_cb(struct pager *p, void (*cb)(struct pager *p, void *arg),
			   void *arg);

/*
 * Offload every resident page: zero pages punched, the rest written to the
 * store and then punched.  Only while the VM is paused and every mapper is
 * registered.  Asynchronous: @done runs on the loop thread with 0 or
 * -errno (-ENOSPC, -EIO: aborted, what was not written stays resident).
 * -EBUSY if an offload is running, -EPERM if not evictable.  While a
 * pre-copy runs the offload is queued: the pre-copy stops at its next
 * batch boundary, its @done comes first (-ECANCELED, or how it ended),
 * then the offload starts; a start that then fails (-ENOTCONN, a
 * registration error) or was cancelled meanwhile (-ECANCELED) is reported
 * through @done.  Offloads and pre-copies run one at a time on the
 * pager's offload worker; one asked for while the worker still discards
 * the last offload's stale store slots waits there, not on the loop.
 */
int pager_offload_start(struct pager *p,
			void (*done)(struct pager *p, int err, void *arg),
			void *arg);
/*
 * The guest ranges vmnapd's own devices touch first when the VM runs again
 * (a vsock device's rings and next RX buffers): with critical_resident,
 * offloads leave their resident pages resident, as they do the
 * resume-critical set, so the device need not wait for store reads before
 * the guest hears of a resume; a range already out is read back at once by
 * the residency worker (the VM is paused), not before the next resume.
 * Replaces the last call's set; at most PAGER_DEVICE_MAX_PAGES pages are
 * taken, in order.  The ranges may be guest-written: one outside guest RAM
 * (or any, while the guest-physical map is only guessed) is left out and
 * counted (device_ranges_refused).  Loop thread: before
 * pager_offload_start, and while the VM runs whenever the device's ranges
 * moved (its next RX buffers), which reads back early a buffer posted
 * since the last offload (device_read_back counts the ranges so asked).
 */
void pager_set_device_pages(struct pager *p, const uint64_t *gpa, const uint64_t *len,
			    unsigned int nr);
/*
 * Pre-copy: write the resident pages that have no valid store copy (dirty
 * and never-stored) to the store while the VM runs, punching nothing, so
 * that the next offload has little left to write.  A page written out and
 * not written again meanwhile (the dirty scan after its batch) becomes
 * CLEAN; one written meanwhile stays RESIDENT; zero pages stay as they
 * are.  Data is copied with pread, not mapped.  Only with asynchronous
 * dirty tracking (wp_async: a write never waits for us) and mappers
 * registered by an earlier offload: -EOPNOTSUPP otherwise; -EBUSY while
 * an offload or pre-copy runs; -EPERM if not evictable.  Asynchronous:
 * @done on the loop thread with 0 or -errno (a store error is counted
 * and logged as an offload's is; no page is affected).  An offload
 * started meanwhile stops it at its next batch boundary and waits for it
 * without holding the loop (pager_offload_start).  Loop thread.
 */
int pager_precopy_start(struct pager *p,
			void (*done)(struct pager *p, int err, void *arg),
			void *arg);
/*
 * An offload runs with the VM paused, so no mapper writes during it; the
 * pager's own checks cover a mapper that still does, except in one case:
 * with asynchronous write-protect (pager.dirty_tracking wp_async) a write
 * never faults, and one that lands between a batch's last dirty scan and
 * its punch would be punched.  Where mappers may write during an offload,
 * the owner gives a gate: @gate(true, @arg), on the offload thread before
 * that scan, returns once no mapper writes (0) or fails (-errno: the batch
 * stays RESIDENT and the offload stops with that error); @gate(false, @arg)
 * after the punch lets them go on.  Only wp_async offloads call it.  NULL:
 * none (vmnapd's case: the VMM is stopped).  Loop thread, not during an
 * offload.
 */
void pager_set_writer_gate(struct pager *p, int (*gate)(bool stop, void *arg), void *arg);
/*
 * The VM wants to run: stop a running offload at the next batch boundary
 * (a pre-copy too: its done callback gets -ECANCELED).
 * Pages already punched stay OFFLOADED (served by faults), every other
 * page stays RESIDENT, none is lost; the done callback follows with
 * -ECANCELED (or 0 / -errno if the offload ended first).  An offload
 * still queued behind a pre-copy never starts: its done callback gets
 * -ECANCELED once the pre-copy has stopped.  Loop thread.  The cancelled
 * offload's tidy is left to the next offload (see pager_resume_prepare).
 * 0, or -EALREADY if no offload is running.
 */
int pager_offload_cancel(struct pager *p);
/*
 * A resume after an offload is about to continue the VMM (vCPUs still
 * stopped): make the resume-critical set resident - the pages faulted in
 * while earlier resumes were being delivered, in large runs from the
 * store, mapped into the VMM (UFFDIO_COPY) where a mapper maps them - bounded
 * by PAGER_CRITICAL_MAX_PAGES and PAGER_CRITICAL_BUDGET_NS;
 * then record this resume's faults until pager_resume_delivered().  The
 * set keeps the restored pages and a window's faults replace the oldest
 * entries of earlier windows, so pages that no longer fault because they
 * were restored stay in it; a window that fills the set alone keeps its
 * first faults.  With cfg.critical_resident the offloads left the set's
 * pages in place, so only those of it that were out (a page new to the
 * set since, one the guest gave back) are read.  Loop thread.  Pages
 * restored, or -errno (-ENOMEM; a store error leaves the pages offloaded,
 * to be served by faults).  It also stops the offload worker's tidy (the
 * store slots of pages that came back, discarded after an offload): the
 * hole punches take the store file's lock that the resume's fault reads
 * need, so the rest is left to the next offload's tidy.
 */
int pager_resume_prepare(struct pager *p);
/*
 * A command runs (@on: the VM's coordinator entered RUNNING) or its wait
 * began (!@on: it left RUNNING).  With tail_resident (and
 * critical_resident, and asynchronous write-protect), the pager scans for
 * the pages the command writes every PAGER_TAIL_TICK_MS while it runs;
 * when the wait begins, the pages of the last two scans become a set the
 * wait's offloads leave resident, as the resume-critical set, since the
 * guest's way to the next data is mostly through them (the connection's
 * socket, the agent's buffers): the first stores them and puts them back
 * into the memfd unmapped, so that those the next resumes touch can be
 * told and learned by the resume-critical set at the delivery.  The next
 * command drops it.
 * With PAGER_TAIL_FIRST, a command that begins once the resume-critical
 * set has pages is not scanned (and its wait has no set).  A command
 * whose ticks have found cfg.tail_budget_pages written pages is scanned
 * no more, and its wait has no set (the scans before the first wait,
 * pager_tail_track_start, have their time limit instead).  Loop thread.
 */
void pager_tail_track(struct pager *p, bool on);
/*
 * The VM runs and nothing tells its commands yet (its boot, its agent
 * starting: no coordinator, or none that has seen a wait): scan as
 * pager_tail_track(p, true) does, for at most PAGER_TAIL_START_S from the
 * last call unless pager_tail_track() takes over, so that the first
 * wait's set holds the last writes before it.  No budget, but while the
 * guest writes more than a set holds between two scans, the next comes
 * twice as late (up to PAGER_TAIL_START_GAP_MS); each call scans at once
 * and starts that over from PAGER_TAIL_TICK_MS.  Loop thread.
 */
void pager_tail_track_start(struct pager *p);
/*
 * Data is taken in while the VM runs, with pages out since an offload
 * earlier in its wait (resumed for a guest timer, not for the data): the
 * guest's way to the data is the one a data resume takes, so its faults
 * are recorded into the set as after a resume, until
 * pager_resume_delivered().  Nothing out (no range registered): a no-op.
 * Loop thread.
 */
void pager_data_window(struct pager *p);
/* The guest has its data again (RESUME_ACK, or its confirmation): stop
 * recording the set. */
void pager_resume_delivered(struct pager *p);
/* Change the pre-resume restore's time budget (0: no restore).  Loop
 * thread. */
void pager_set_critical_budget(struct pager *p, uint64_t ns);
/* The VM's restore policy for resumes (default cfg.restore).  Loop thread. */
void pager_set_restore(struct pager *p, enum pager_restore how);
/*
 * How the next resume restores, overriding the VM's policy once: e.g. a
 * resume for a guest timer (the guest runs its timer and goes idle again)
 * passes PAGER_RESTORE_LAZY, so nothing but the resume-critical set and
 * its faults comes back.  Call before pager_resume_prepare();
 * pager_resumed() consumes it.  A cycle so overridden adds the
 * pages it touched to the working set instead of replacing it (a timer's
 * few pages do not make the data working set forgotten).
 * PAGER_RESTORE_POLICY: the VM's policy.  Loop thread.
 */
void pager_resume_restore(struct pager *p, enum pager_restore how);
/* The VM runs again: start the background restore (pager_resume_restore
 * or the VM's policy). */
void pager_resumed(struct pager *p);
/*
 * Data reached the guest while it runs in a cycle whose resume overrode
 * the policy (a guest timer's: the data came before the VM was paused
 * again, so no resume of its own): the agent's command runs now, and the
 * rest of the cycle is restored, recorded and followed as after a resume
 * by the VM's policy.  A no-op in a cycle that already is.  Loop thread.
 */
void pager_data_arrived(struct pager *p);
/*
 * FREE_REPORT: the range becomes ZERO (punched, store slot dropped; pages
 * being moved by another thread are waited for, then dropped too).
 * -ENXIO (counted in gpa_refused, logged once) while the GPA map is only
 * guessed, -ERANGE outside guest RAM.
 */
int pager_drop_free(struct pager *p, uint64_t gpa, uint64_t len);

void pager_get_stats(struct pager *p, struct pager_stats *st);
/* Change the fault-around max at run time (clamped to 1..MAX); the
 * adaptive window restarts there (a new pager's starts at 1). */
void pager_set_fault_around(struct pager *p, uint32_t pages);

/*
 * Guest RAM map for vmnap_range_check(): ranges (little-endian wire format)
 * owned by the pager, valid until the next pager_set_gpa_map or detach
 * (copy them).  Empty (nr 0) while the map is only guessed.
 */
void pager_get_ram(struct pager *p, struct vmnap_ram *ram);
/* GPA -> (memfd, offset); the fd stays owned by the pager. -ERANGE;
 * -ENXIO while the GPA map is only guessed. */
int pager_gpa_to_memfd(struct pager *p, uint64_t gpa, int *memfd,
		       uint64_t *offset);
/* (memfd, offset) -> GPA; -ERANGE; -ENXIO while the map is guessed. */
int pager_memfd_to_gpa(struct pager *p, int memfd, uint64_t offset,
		       uint64_t *gpa);

const char *pager_page_state_name(enum pager_page_state s);
/* The @owner given to pager_new(). */
void *pager_owner(struct pager *p);

#endif
