// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager.c - a VM's guest RAM: lifetime (starting and stopping the fault,
 * prefetch, residency and offload threads; teardown here or on a reaper
 * thread), mappers, the GPA map, and the entry points (make_resident and
 * its asynchronous form, drop_free, offload, stats).  See pager.h.
 * The page-state transitions those threads share are in pager_core.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pager_internal.h"

#define DEFAULT_WRITE_BATCH_BYTES	(2u << 20)
#define DEFAULT_WRITE_QUEUE_DEPTH	8
#define DEFAULT_PREFETCH_MIN_BYTES	(64u << 10)
#define DEFAULT_PREFETCH_MAX_BYTES	(4u << 20)

static const char *const page_state_names[PAGE_STATES] = {
	[PAGE_RESIDENT] = "resident",
	[PAGE_OFFLOADED] = "offloaded",
	[PAGE_ZERO] = "zero",
	[PAGE_IN_FLIGHT] = "in_flight",
	[PAGE_CLEAN] = "clean",
};

const char *pager_page_state_name(enum pager_page_state s)
{
	return s < PAGE_STATES ? page_state_names[s] : "?";
}

void pager_config_default(struct pager_config *cfg, const char *store_dir)
{
	*cfg = (struct pager_config){
		.store_dir = store_dir,
		.fault_around_pages = PAGER_DEFAULT_FAULT_AROUND,
		.write_batch_bytes = DEFAULT_WRITE_BATCH_BYTES,
		.write_queue_depth = DEFAULT_WRITE_QUEUE_DEPTH,
		.prefetch_min_bytes = DEFAULT_PREFETCH_MIN_BYTES,
		.prefetch_max_bytes = DEFAULT_PREFETCH_MAX_BYTES,
		.prefetch = true,
		.restore = PAGER_RESTORE_WORKING_SET,
		.delivery_io_class = PAGER_IO_REALTIME,
		.critical_budget_ns = PAGER_CRITICAL_BUDGET_NS,
		.tail_budget_pages = PAGER_TAIL_BUDGET_PAGES,
		.direct_io = true,
		.fault_error_timeout_ms = PAGER_FAULT_ERROR_TIMEOUT_MS,
	};
}

void *pager_owner(struct pager *p)
{
	return p->owner;
}

static int config_check(const struct pager_config *c)
{
	if (!c->store_dir || !c->fault_around_pages ||
	    c->fault_around_pages > PAGER_MAX_FAULT_AROUND || !c->write_queue_depth ||
	    c->write_batch_bytes < PAGER_PAGE_SIZE ||
	    c->write_batch_bytes % PAGER_PAGE_SIZE ||
	    c->prefetch_min_bytes < PAGER_PAGE_SIZE ||
	    c->prefetch_max_bytes < c->prefetch_min_bytes ||
	    c->follow_pages > PAGER_MAX_FOLLOW ||
	    (c->tail_resident && !c->tail_budget_pages) ||
	    (unsigned int)c->restore >= PAGER_RESTORES ||
	    (unsigned int)c->delivery_io_class >= PAGER_IO_CLASSES)
		return -EINVAL;
	return 0;
}

/* The offload worker's job (an offload or a pre-copy) ended: tell its owner. */
static void offload_job_finish(struct pager *p)
{
	int err;

	pthread_mutex_lock(&p->lock);
	if (!p->offloading) {	/* no job ran: a stray wakeup */
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->offloading = false;
	p->precopy = false;
	err = p->offload_err;
	pthread_mutex_unlock(&p->lock);
	pager_maybe_unregister(p);
	if (p->offload_done)
		p->offload_done(p, err, p->offload_arg);
}

static int offload_start_now(struct pager *p,
			     void (*done)(struct pager *p, int err, void *arg), void *arg);

/* The pre-copy an offload waited for has stopped: start that offload. */
static void offload_queued_start(struct pager *p)
{
	void (*done)(struct pager *p, int err, void *arg) = p->queued_done;
	void *arg = p->queued_arg;
	bool cancelled = p->queued_cancelled;
	int err;

	if (!p->offload_queued)
		return;
	p->offload_queued = false;
	p->queued_cancelled = false;
	if (cancelled) {
		pthread_mutex_lock(&p->lock);
		p->offload_cancels++;
		pthread_mutex_unlock(&p->lock);
		err = -ECANCELED;
	} else {
		err = offload_start_now(p, done, arg);
	}
	if (err)
		done(p, err, arg);	/* the start was asynchronous: so is its end */
}

/* Loop callback: the offload worker finished a job. */
static void offload_done_cb(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pager *p = arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	/* the worker may still tidy the store: the next job waits for it */
	offload_job_finish(p);
	offload_queued_start(p);
}

static const char *const gpa_source_names[PAGER_GPA_SOURCES] = {
	[PAGER_GPA_STATED] = "stated",
	[PAGER_GPA_GUESSED] = "guessed",
	[PAGER_GPA_LINEAR] = "linear",
	[PAGER_GPA_MEM_TABLE] = "mem_table",
};

const char *pager_gpa_source_name(enum pager_gpa_source s)
{
	return s < PAGER_GPA_SOURCES ? gpa_source_names[s] : "?";
}

static bool gpa_trusted(const struct pager *p)
{
	return p->gpa_source != PAGER_GPA_GUESSED;
}

/* Rebuild the wire-format RAM map from p->gpa_map; lock held (or attach). */
static void ram_ranges_publish(struct pager *p)
{
	p->nr_ram_ranges = gpa_trusted(p) ? p->nr_gpa : 0;
	for (unsigned int i = 0; i < p->nr_ram_ranges; i++) {
		p->ram_ranges[i].gpa = vmnap_cpu64(p->gpa_map[i].gpa);
		p->ram_ranges[i].len = vmnap_cpu64(p->gpa_map[i].size);
	}
}

/* Loop callback: hand pending errors to the owner. */
static void error_cb(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pager *p = arg;
	const char *what;
	uint64_t v;
	int err, lost;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	pthread_mutex_lock(&p->lock);
	err = p->pending_err;
	what = p->pending_what;
	p->pending_err = 0;
	lost = p->lost_err && !p->lost_told ? p->lost_err : 0;
	p->lost_told = p->lost_told || lost;
	pthread_mutex_unlock(&p->lock);
	if (err && p->error_cb)
		p->error_cb(p, err, what, p->error_arg);
	if (lost && p->error_cb)	/* never folded into another error */
		p->error_cb(p, lost, "lost", p->error_arg);
}

void pager_set_error_cb(struct pager *p,
			void (*cb)(struct pager *p, int err, const char *what, void *arg),
			void *arg)
{
	p->error_cb = cb;
	p->error_arg = arg;
}

static int regions_init(struct pager *p, const struct pager_region_desc *rd,
			unsigned int nr)
{
	uint64_t pg = 0;

	if (!nr || nr > PAGER_MAX_REGIONS)
		return -EINVAL;
	for (unsigned int i = 0; i < nr; i++) {
		struct pager_region *r = &p->regions[i];

		if (!rd[i].size || (rd[i].size | rd[i].gpa | rd[i].memfd_offset) %
		    PAGER_PAGE_SIZE)
			return -EINVAL;
		r->gpa = rd[i].gpa;
		r->size = rd[i].size;
		r->memfd_off = rd[i].memfd_offset;
		r->memfd = rd[i].memfd;
		r->first_page = pg;
		r->npages = rd[i].size / PAGER_PAGE_SIZE;
		pg += r->npages;
		p->gpa_map[i] = (struct pager_gpa_range){
			.gpa = r->gpa, .size = r->size, .first_page = r->first_page,
		};
		if (r->memfd < 0 && p->evictable) {
			p->evictable = false;
			p->not_evictable_reason =
				"anonymous guest memory (no memfd): cannot punch";
		}
	}
	p->nr_regions = nr;
	p->nr_gpa = nr;
	p->npages = pg;
	p->gpa_source = PAGER_GPA_STATED;
	ram_ranges_publish(p);
	return 0;
}

/*
 * Close and free all that pager_create() sets up (what it got so far, on
 * its way out of a failure), removing the store file if @remove.  The
 * threads are stopped and the eventfds out of the loop.
 */
static void release(struct pager *p, bool remove)
{
	int *fds[] = { &p->fault_wake_fd, &p->offload_done_fd, &p->error_fd,
		       &p->resident_fd };

	pager_critical_release(p);
	store_close(&p->store, remove);
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	free(p->state);
	free(p->hot);
	free(p->hot_streak);
	free(p->fa);
	free(p->ws_data_prev);
	free(p->tail);
	free(p->tail_scan);
	free(p->slot_data);
	pager_follow_free(p);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->reg_lock);
	pthread_cond_destroy(&p->state_cv);
	pthread_cond_destroy(&p->prefetch_cv);
	pthread_cond_destroy(&p->resident_cv);
	pthread_cond_destroy(&p->offload_cv);
	free(p->subject_own);
	free(p);
}

static int pager_create(struct loop *loop, const char *subject, const char *name,
			const struct pager_config *cfg, const struct pager_region_desc *rd,
			unsigned int nr, const char *store_id, void *owner,
			struct pager **out)
{
	struct store_region sr[PAGER_MAX_REGIONS];
	struct pager *p;
	int err;

	err = config_check(cfg);
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->owner = owner;
	/* a copy: a pager being reaped outlives its owner's subject */
	p->subject_own = strdup(subject);
	if (!p->subject_own) {
		free(p);
		return -ENOMEM;
	}
	p->subject = p->subject_own;
	p->cfg = *cfg;
	/* fault-around starts at one page, nothing known, and grows on
	 * evidence that the neighbours spare more than they cost
	 * (pager_ws_cycle_end) */
	p->fa_window = 1;
	p->restore = (enum pager_restore)cfg->restore;
	p->next_restore = PAGER_RESTORE_POLICY;
	p->last_restore = p->restore;
	p->cycle_data = true;	/* nothing overrode the policy yet */
	p->cycle_saw_data = true;
	p->store.fd = -1;
	p->fault_wake_fd = -1;
	atomic_init(&p->dlv_io_class, PAGER_IO_INHERIT);	/* until the thread ran */
	atomic_init(&p->dlv_io_reason, NULL);
	atomic_init(&p->dlv_io_reads, 0);
	p->offload_done_fd = -1;
	p->error_fd = -1;
	p->resident_fd = -1;
	p->evictable = true;
	pthread_mutex_init(&p->reg_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->state_cv, NULL);
	pthread_cond_init(&p->prefetch_cv, NULL);
	pthread_cond_init(&p->resident_cv, NULL);
	pthread_cond_init(&p->offload_cv, NULL);
	err = regions_init(p, rd, nr);
	if (err)
		goto fail;
	p->state = calloc(p->npages, 1);	/* all RESIDENT */
	p->hot = calloc(p->npages, 1);
	p->hot_streak = calloc(p->npages, 1);
	p->fa = calloc(p->npages, 1);
	p->ws_data_prev = calloc(p->npages, 1);
	p->slot_data = malloc(p->npages);
	if (p->cfg.tail_resident) {
		p->tail = calloc(p->npages, 1);
		p->tail_scan = malloc(p->npages);
	}
	if (!p->state || !p->hot || !p->hot_streak || !p->fa || !p->ws_data_prev ||
	    !p->slot_data || (p->cfg.tail_resident && (!p->tail || !p->tail_scan))) {
		err = -ENOMEM;
		goto fail;
	}
	memset(p->slot_data, SLOT_WRITTEN, p->npages);	/* the first tidy looks at every slot */
	err = pager_follow_init(p);
	if (err)
		goto fail;
	p->count[PAGE_RESIDENT] = p->npages;
	for (unsigned int i = 0; i < nr; i++)
		sr[i] = (struct store_region){
			.gpa = rd[i].gpa, .size = rd[i].size, .memfd_off = rd[i].memfd_offset,
		};
	err = store_open(&p->store, cfg->store_dir, name, p->npages, sr, nr,
			 cfg->direct_io, store_id);
	if (err) {
		log_err(p->subject, "cannot %s store %s/%s.store: %s", store_id ?
			"adopt the" : "create the", cfg->store_dir, name,
			err == -EBUSY ? "another process holds its lock" :
			err == -ESTALE ? "it belongs to another run of the VMM or other RAM" :
			err == -EBADMSG ? "its header is corrupt" : strerror(-err));
		goto fail;
	}
	if (store_id) {
		err = pager_recover(p);
		if (err)
			goto fail;
	}
	p->fault_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->offload_done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->error_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->resident_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->fault_wake_fd < 0 || p->offload_done_fd < 0 || p->error_fd < 0 ||
	    p->resident_fd < 0) {
		err = -errno;
		goto fail;
	}
	err = loop_add_fd(p->loop, p->offload_done_fd, EPOLLIN,
			  offload_done_cb, p);
	if (err)
		goto fail;
	err = loop_add_fd(p->loop, p->error_fd, EPOLLIN, error_cb, p);
	if (err) {
		loop_del_fd(p->loop, p->offload_done_fd);
		goto fail;
	}
	err = loop_add_fd(p->loop, p->resident_fd, EPOLLIN, pager_resident_done_cb, p);
	if (err) {
		loop_del_fd(p->loop, p->offload_done_fd);
		loop_del_fd(p->loop, p->error_fd);
		goto fail;
	}
	err = pager_fault_thread_start(p);
	if (!err)
		err = pager_prefetch_thread_start(p);
	if (!err)
		err = pager_resident_thread_start(p);
	if (err)
		goto fail_loop;
	*out = p;
	log_info(p->subject, "pager: %u region(s), %llu MiB, store %s%s",
		 nr, (unsigned long long)(p->npages * PAGER_PAGE_SIZE >> 20),
		 p->store.path, p->store.direct ? " (O_DIRECT)" : " (buffered)");
	return 0;

fail_loop:
	pager_prefetch_thread_stop(p);
	pager_fault_thread_stop(p);
	loop_del_fd(p->loop, p->offload_done_fd);
	loop_del_fd(p->loop, p->error_fd);
	loop_del_fd(p->loop, p->resident_fd);
fail:
	release(p, false);
	return err;
}

int pager_new(struct loop *loop, const char *subject, const char *name,
	      const struct pager_config *cfg, const struct pager_region_desc *rd,
	      unsigned int nr, void *owner, struct pager **out)
{
	return pager_create(loop, subject, name, cfg, rd, nr, NULL, owner, out);
}

int pager_new_from_store(struct loop *loop, const char *subject, const char *name,
			 const struct pager_config *cfg,
			 const struct pager_region_desc *rd, unsigned int nr,
			 const char *store_id, void *owner, struct pager **out)
{
	if (!store_id || !store_id_valid(store_id))
		return -EINVAL;
	return pager_create(loop, subject, name, cfg, rd, nr, store_id, owner, out);
}

const char *pager_store_id(struct pager *p)
{
	return p->store.id;
}

/* Bring every offloaded page back (detach while mappers still live). */
static void restore_all(struct pager *p)
{
	void *buf = store_buf_alloc(RESTORE_RUN_MAX_PAGES * PAGER_PAGE_SIZE);
	uint64_t failed = 0;

	if (!buf)
		return;
	for (uint64_t pg = 0; pg < p->npages;) {
		uint64_t n;

		pthread_mutex_lock(&p->lock);
		while (pg_state(p, pg) == PAGE_IN_FLIGHT)
			pthread_cond_wait(&p->state_cv, &p->lock);
		n = pager_claim_run_locked(p, pg, RESTORE_RUN_MAX_PAGES, 0);
		pthread_mutex_unlock(&p->lock);
		if (!n) {
			pg++;
			continue;
		}
		if (pager_restore_run(p, pg, n, buf))
			failed += n;
		pg += n;
	}
	free(buf);
	if (failed)
		log_err(p->subject, "detach: %llu page(s) could not be restored",
			(unsigned long long)failed);
}

/*
 * The loop thread's part of a detach: nothing of the pager is watched by
 * the loop or calls its owner any more.  The callbacks it would have run
 * (offload done, errors, residency) never run.
 */
static void detach_from_loop(struct pager *p)
{
	int lost;

	loop_del_fd(p->loop, p->offload_done_fd);
	loop_del_fd(p->loop, p->error_fd);
	loop_del_fd(p->loop, p->resident_fd);
	/* a lost VM's processes die before the loop may read error_fd (their
	 * exit detaches the pager): tell the owner now, it keeps the state */
	pthread_mutex_lock(&p->lock);
	lost = p->lost_told ? 0 : p->lost_err;
	p->lost_told = true;
	pthread_mutex_unlock(&p->lock);
	if (lost && p->error_cb)
		p->error_cb(p, lost, "lost", p->error_arg);
	p->error_cb = NULL;	/* detaching: nobody to tell */
	p->resident_cb = NULL;
}

/* Does a mapper (a VMM process) still map guest RAM?  Any thread. */
static bool live_mappers(struct pager *p)
{
	bool live = false;

	pthread_mutex_lock(&p->lock);
	for (struct pager_mapper *m = p->mappers; m; m = m->next)
		live |= !m->dead;
	pthread_mutex_unlock(&p->lock);
	return live;
}

/*
 * Everything else, on any thread, once detach_from_loop() ran: stop the
 * threads (bringing pages back while @live, the VMM still mapping guest
 * RAM), close every fd, remove the store file if @remove, free.
 */
static void teardown(struct pager *p, bool live, bool remove)
{
	bool restore;

	pager_resident_thread_stop(p);
	pager_prefetch_thread_stop(p);
	if (p->offloading)
		atomic_store(&p->offload_abort, true);
	pager_offload_worker_stop(p);
	p->offloading = false;
	p->precopy = false;
	p->offload_queued = false;	/* its owner is going: no callback */
	/* The fault thread keeps serving while pages come back. */
	pthread_mutex_lock(&p->lock);
	restore = live && p->count[PAGE_OFFLOADED];
	pthread_mutex_unlock(&p->lock);
	if (restore)
		restore_all(p);
	/* The store stays for the next vmnapd, its slots emptied if unused
	 * (the entries CLEAN pages kept go first: they would name them) */
	if (live && !p->count[PAGE_OFFLOADED]) {
		if (p->count[PAGE_CLEAN])
			store_slots_forget(&p->store, 0, p->npages, false);
		store_discard(&p->store, pg_store_off(0), p->npages * PAGER_PAGE_SIZE);
	}
	pthread_mutex_lock(&p->lock);
	p->detaching = true;	/* nobody serves the ranges any more */
	pthread_mutex_unlock(&p->lock);
	pager_maybe_unregister(p);
	pager_fault_thread_stop(p);
	while (p->mappers) {
		struct pager_mapper *m = p->mappers;

		p->mappers = m->next;
		pager_mapper_free(m);
	}
	for (unsigned int i = 0; i < p->nr_regions; i++) {
		bool dup = false;

		for (unsigned int j = 0; j < i; j++)
			dup |= p->regions[j].memfd == p->regions[i].memfd;
		if (p->regions[i].memfd >= 0 && !dup)
			close(p->regions[i].memfd);
	}
	log_info(p->subject, "pager detached");
	release(p, remove);
}

void pager_free(struct pager *p)
{
	bool live;

	if (!p)
		return;
	detach_from_loop(p);
	live = live_mappers(p);
	/* A live VMM may hand its memory to the next vmnapd: keep the store */
	teardown(p, live, !live);
}

/* Pagers being torn down by their reaper thread (pager_free_async). */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned int active;
} reapers = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

struct reap {
	struct pager *p;
	bool live;
};

static void *reaper_main(void *arg)
{
	struct reap *r = arg;

	/* the file, if it goes, went already: the name may be reused */
	teardown(r->p, r->live, false);
	free(r);
	pthread_mutex_lock(&reapers.lock);
	reapers.active--;
	pthread_cond_broadcast(&reapers.cv);
	pthread_mutex_unlock(&reapers.lock);
	return NULL;
}

void pager_free_async(struct pager *p)
{
	pthread_attr_t attr;
	struct reap *r;
	int err;

	if (!p)
		return;
	detach_from_loop(p);
	r = malloc(sizeof(*r));
	if (!r) {
		pager_free(p);	/* cannot hand it over: here, then */
		return;
	}
	r->p = p;
	r->live = live_mappers(p);
	/*
	 * Nothing needs the store any more unless a VMM still maps guest
	 * RAM: its name goes now, while the lock is held (a new pager of the
	 * same name creates a new file); its blocks go when the reaper closes
	 * it.
	 */
	if (!r->live && unlink(p->store.path) < 0 && errno != ENOENT)
		log_warn(p->subject, "cannot remove %s: %s", p->store.path, strerror(errno));
	pthread_mutex_lock(&reapers.lock);
	reapers.active++;
	pthread_mutex_unlock(&reapers.lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&(pthread_t){ 0 }, &attr, reaper_main, r);
	pthread_attr_destroy(&attr);
	if (err) {
		log_warn(p->subject, "no reaper thread (%s): detaching on the loop",
			 strerror(err));
		reaper_main(r);
	}
}

unsigned int pager_reapers_active(void)
{
	unsigned int n;

	pthread_mutex_lock(&reapers.lock);
	n = reapers.active;
	pthread_mutex_unlock(&reapers.lock);
	return n;
}

void pager_reapers_wait(void)
{
	pthread_mutex_lock(&reapers.lock);
	while (reapers.active)
		pthread_cond_wait(&reapers.cv, &reapers.lock);
	pthread_mutex_unlock(&reapers.lock);
}

void pager_set_not_evictable(struct pager *p, const char *reason)
{
	pthread_mutex_lock(&p->lock);
	p->evictable = false;
	p->not_evictable_reason = reason;
	pthread_mutex_unlock(&p->lock);
	log_info(p->subject, "not evictable: %s", reason);
}

int pager_add_mapper(struct pager *p, int uffd, const uint64_t *host_addr,
		     unsigned int nr, pid_t pid, struct pager_mapper **out)
{
	struct pager_mapper *m;
	unsigned int count = 0;
	bool registered, wp_only;
	int err = 0;

	if (nr != p->nr_regions)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->uffd = uffd;
	m->pid = pid;
	/* to SIGKILL it if the VM is lost (pager_lose); the caller's
	 * connection from @pid is open, so @pid is that process */
	m->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	memcpy(m->host_addr, host_addr, nr * sizeof(*host_addr));
	pager_dirty_mapper_init(p, m);
	for (unsigned int i = 0; i < nr; i++)
		m->map_hi[i] = host_addr[i] ? p->regions[i].size : 0;
	(void)fcntl(uffd, F_SETFL, fcntl(uffd, F_GETFL) | O_NONBLOCK);
	/* reg_lock: p->registered cannot change until the mapper is listed */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	if (p->nr_mappers >= PAGER_MAX_MAPPERS)
		err = -EMFILE;
	registered = p->registered;
	wp_only = p->reg_wp_only;
	pthread_mutex_unlock(&p->lock);
	if (!err && registered)
		err = pager_mapper_register(p, m);	/* not listed yet: ours */
	if (err && err != -EMFILE && wp_only) {
		/* nothing is out yet: the first offload registers it MISSING
		 * (its errors count then); only its writes go unscanned */
		registered = false;
		err = 0;
	}
	pthread_mutex_lock(&p->lock);
	if (!err) {
		m->registered = registered;
		m->next = p->mappers;
		p->mappers = m;
		count = ++p->nr_mappers;
		/* nothing of its mapping is protected yet: the next tick's
		 * scan would find every page it has touched written */
		p->tail_fresh |= registered;
	}
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->reg_lock);
	if (err) {
		m->uffd = -1;	/* the caller's still */
		pager_mapper_free(m);
		return err;
	}
	pager_fault_kick(p);
	if (p->recovered)
		pager_recover_wake(p, m);
	log_info(p->subject, "mapper pid %d added (%u mapper(s))", (int)pid, count);
	if (out)
		*out = m;
	return 0;
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	if (a < 0 || b < 0)
		return a == b;
	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int pager_regions_match(struct pager *p, const struct pager_region_desc *rd,
			unsigned int nr)
{
	if (nr != p->nr_regions)
		return -EINVAL;
	for (unsigned int i = 0; i < nr; i++) {
		const struct pager_region *r = &p->regions[i];

		if (rd[i].gpa != r->gpa || rd[i].size != r->size ||
		    rd[i].memfd_offset != r->memfd_off ||
		    !same_file(rd[i].memfd, r->memfd))
			return -EINVAL;
	}
	return 0;
}

void pager_remove_mapper(struct pager *p, struct pager_mapper *m)
{
	pid_t pid = m->pid;

	pthread_mutex_lock(&p->lock);
	p->nr_mappers--;
	m->dead = true;
	m->removed = true;	/* the fault thread closes and frees it */
	pthread_mutex_unlock(&p->lock);
	pager_fault_kick(p);
	log_info(p->subject, "mapper pid %d gone", (int)pid);
}

/*
 * May a GPA operation act on [gpa, gpa+len)?  Only with a trusted map and
 * only if every page of it is mapped, so a refusal changes nothing.
 * -EINVAL, -ENXIO (map guessed: counted; *log_now set the first time),
 * -ERANGE.  Lock held.
 */
static int gpa_range_check_locked(struct pager *p, uint64_t gpa, uint64_t len,
				  bool *log_now)
{
	uint64_t pg, n;

	if (!len || (gpa | len) % PAGER_PAGE_SIZE || gpa + len < gpa)
		return -EINVAL;
	if (!gpa_trusted(p)) {
		p->gpa_refused++;
		*log_now = !p->gpa_refused_logged;
		p->gpa_refused_logged = true;
		return -ENXIO;
	}
	while (len) {
		if (pager_gpa_chunk_locked(p, gpa, len, &pg, &n))
			return -ERANGE;
		gpa += n * PAGER_PAGE_SIZE;
		len -= n * PAGER_PAGE_SIZE;
	}
	return 0;
}

static void gpa_refused_log(struct pager *p, const char *what, uint64_t gpa,
			    uint64_t len)
{
	log_warn(p->subject, "%s %#llx+%#llx refused: the guest-physical map is only "
		 "guessed from memfd offsets (no vhost-user memory table, layout not "
		 "known linear); GPA operations are refused and counted until one "
		 "arrives (logged once)", what, (unsigned long long)gpa,
		 (unsigned long long)len);
}

/*
 * vmnapd is about to access [gpa, gpa+len) through its own mapping, which
 * no mapper's write-protect sees: its CLEAN pages count as written.  Lock
 * held; the range checked.
 */
static void mark_dirty_locked(struct pager *p, uint64_t gpa, uint64_t len)
{
	uint64_t pg, n;

	while (len && !pager_gpa_chunk_locked(p, gpa, len, &pg, &n) && n) {
		for (uint64_t i = pg; i < pg + n; i++) {
			p->dirty_own += pager_dirty_note_locked(p, i);
			p->state[i] |= PG_WS_CUR;	/* vmnapd touched it */
		}
		gpa += n * PAGER_PAGE_SIZE;
		len -= n * PAGER_PAGE_SIZE;
	}
}

/* Widen [*gpa, *gpa + *len) to whole pages: callers pass byte ranges. */
static void page_align(uint64_t *gpa, uint64_t *len)
{
	*len += *gpa % PAGER_PAGE_SIZE;
	*gpa -= *gpa % PAGER_PAGE_SIZE;
	*len = (*len + PAGER_PAGE_SIZE - 1) & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
}

int pager_make_resident(struct pager *p, uint64_t gpa, uint64_t len)
{
	bool log_now = false;
	void *buf;
	int err;

	page_align(&gpa, &len);
	pthread_mutex_lock(&p->lock);
	err = gpa_range_check_locked(p, gpa, len, &log_now);
	if (!err && !p->count[PAGE_OFFLOADED] && !p->count[PAGE_IN_FLIGHT]) {
		mark_dirty_locked(p, gpa, len);
		pthread_mutex_unlock(&p->lock);
		return 0;	/* fast path: nothing is out */
	}
	pthread_mutex_unlock(&p->lock);
	if (log_now)
		gpa_refused_log(p, "make_resident", gpa, len);
	if (err)
		return err;
	buf = store_buf_alloc(RESTORE_RUN_MAX_PAGES * PAGER_PAGE_SIZE);
	if (!buf)
		return -ENOMEM;
	err = pager_restore_gpa(p, gpa, len, buf);
	free(buf);
	pthread_mutex_lock(&p->lock);
	mark_dirty_locked(p, gpa, len);
	pthread_mutex_unlock(&p->lock);
	return err;
}

/* Is every page of the checked range [gpa, gpa+len) in the memfd (not
 * OFFLOADED, not being moved)?  Lock held. */
static bool range_resident_locked(struct pager *p, uint64_t gpa, uint64_t len)
{
	uint64_t pg, n;

	if (!p->count[PAGE_OFFLOADED] && !p->count[PAGE_IN_FLIGHT])
		return true;
	while (len && !pager_gpa_chunk_locked(p, gpa, len, &pg, &n) && n) {
		for (uint64_t i = pg; i < pg + n; i++) {
			enum pager_page_state s = pg_state(p, i);

			if (s == PAGE_OFFLOADED || s == PAGE_IN_FLIGHT)
				return false;
		}
		gpa += n * PAGER_PAGE_SIZE;
		len -= n * PAGER_PAGE_SIZE;
	}
	return true;
}

int pager_make_resident_async(struct pager *p, uint64_t gpa, uint64_t len)
{
	bool log_now = false, queued = false;
	int err;

	page_align(&gpa, &len);
	pthread_mutex_lock(&p->lock);
	err = gpa_range_check_locked(p, gpa, len, &log_now);
	if (!err && range_resident_locked(p, gpa, len))
		mark_dirty_locked(p, gpa, len);
	else if (!err)
		err = pager_resident_ask_locked(p, gpa, len, &queued);
	pthread_mutex_unlock(&p->lock);
	if (log_now)
		gpa_refused_log(p, "make_resident", gpa, len);
	if (queued)
		pthread_cond_signal(&p->resident_cv);
	return err;
}

void pager_set_device_pages(struct pager *p, const uint64_t *gpa, const uint64_t *len,
			    unsigned int nr)
{
	uint64_t log_gpa = 0, log_len = 0;
	bool queued = false, log_now = false;

	pthread_mutex_lock(&p->lock);
	p->dev_nr = 0;
	for (unsigned int i = 0; i < nr; i++) {
		uint64_t g = gpa[i], l = len[i], pg, n;
		bool first = false;

		page_align(&g, &l);
		if (g + l < g || gpa_range_check_locked(p, g, l, &first)) {
			p->dev_refused++;
			if (first) {	/* the map's one warning: say it below */
				log_now = true;
				log_gpa = g;
				log_len = l;
			}
			continue;
		}
		/* out already (posted since the last offload): read back now
		 * (the VM paused at an offload's start, or running), not on
		 * the way of the next resume */
		if (!range_resident_locked(p, g, l)) {
			bool asked = false;

			pager_resident_ask_locked(p, g, l, &asked);
			p->dev_read_back += asked;
			queued |= asked;
		}
		while (l && p->dev_nr < PAGER_DEVICE_MAX_PAGES &&
		       !pager_gpa_chunk_locked(p, g, l, &pg, &n) && n) {
			for (uint64_t k = 0; k < n && p->dev_nr < PAGER_DEVICE_MAX_PAGES; k++)
				p->dev_pg[p->dev_nr++] = pg + k;
			g += n * PAGER_PAGE_SIZE;
			l -= n * PAGER_PAGE_SIZE;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (queued)
		pthread_cond_signal(&p->resident_cv);
	if (log_now)
		gpa_refused_log(p, "device pages", log_gpa, log_len);
}

/*
 * The range is checked whole under the lock (a refusal changes nothing);
 * each chunk is then discarded with the lock taken only around the page
 * states (pager_discard_run: claimed, punched and their slots dropped
 * outside it).  The GPA map cannot change meanwhile: it is set on the loop
 * thread, which runs this.
 */
int pager_drop_free(struct pager *p, uint64_t gpa, uint64_t len)
{
	uint64_t g = gpa, left = len;
	bool log_now = false;
	int err, perr = 0;

	pthread_mutex_lock(&p->lock);
	err = gpa_range_check_locked(p, gpa, len, &log_now);
	pthread_mutex_unlock(&p->lock);
	while (!err && left) {
		uint64_t pg, n;
		int e;

		pthread_mutex_lock(&p->lock);
		err = pager_gpa_chunk_locked(p, g, left, &pg, &n);
		pthread_mutex_unlock(&p->lock);
		if (err)
			break;
		e = pager_discard_run(p, pg, n, &p->dropped_free_pages);
		if (e == -EOPNOTSUPP)
			err = e;
		else if (e && !perr)
			perr = e;
		g += n * PAGER_PAGE_SIZE;
		left -= n * PAGER_PAGE_SIZE;
	}
	if (!err)
		err = perr;
	if (!err)
		pager_maybe_unregister(p);
	if (log_now)
		gpa_refused_log(p, "FREE_REPORT", gpa, len);
	else if (err && err != -ERANGE && err != -EINVAL)
		log_warn(p->subject, "drop_free gpa %#llx+%#llx: %s",
			 (unsigned long long)gpa, (unsigned long long)len,
			 strerror(-err));
	return err;
}

void pager_set_gpa_source(struct pager *p, enum pager_gpa_source src)
{
	if (src >= PAGER_GPA_SOURCES)
		return;
	pthread_mutex_lock(&p->lock);
	p->gpa_source = src;
	ram_ranges_publish(p);
	pthread_mutex_unlock(&p->lock);
	if (src == PAGER_GPA_GUESSED)
		log_info(p->subject, "guest-physical map guessed from memfd offsets: "
			 "FREE_REPORT and GPA accesses refused until a vhost-user "
			 "memory table gives the true layout");
	else
		log_info(p->subject, "guest-physical map: %s", pager_gpa_source_name(src));
}

static bool same_inode(int fd, const struct stat *st)
{
	struct stat s2;

	return fd >= 0 && !fstat(fd, &s2) && s2.st_dev == st->st_dev &&
	       s2.st_ino == st->st_ino;
}

int pager_set_gpa_map(struct pager *p, const struct pager_mem_table_region *mt,
		      unsigned int nr)
{
	struct pager_gpa_range map[PAGER_MAX_GPA_RANGES];
	unsigned int n = 0;
	bool changed;

	for (unsigned int i = 0; i < nr; i++) {
		const struct pager_region *r = NULL;
		struct stat st;

		if (mt[i].fd < 0 || fstat(mt[i].fd, &st) < 0)
			continue;
		for (unsigned int j = 0; j < p->nr_regions && !r; j++)
			if (same_inode(p->regions[j].memfd, &st))
				r = &p->regions[j];
		if (!r) {
			log_debug(p->subject, "mem table region gpa %#llx: not guest RAM "
				  "of this pager, skipped", (unsigned long long)mt[i].gpa);
			continue;
		}
		/* the same memfd may back several pager regions */
		for (unsigned int j = 0; j < p->nr_regions; j++) {
			const struct pager_region *rj = &p->regions[j];

			if (same_inode(rj->memfd, &st) && mt[i].fd_offset >= rj->memfd_off &&
			    mt[i].fd_offset - rj->memfd_off < rj->size)
				r = rj;
		}
		if (!mt[i].size || (mt[i].gpa | mt[i].size | mt[i].fd_offset) % PAGER_PAGE_SIZE ||
		    mt[i].gpa + mt[i].size < mt[i].gpa || mt[i].fd_offset < r->memfd_off ||
		    mt[i].fd_offset - r->memfd_off > r->size ||
		    mt[i].size > r->size - (mt[i].fd_offset - r->memfd_off) ||
		    n == PAGER_MAX_GPA_RANGES) {
			log_warn(p->subject, "mem table region gpa %#llx+%#llx at memfd "
				 "offset %#llx: misaligned or outside guest RAM; map kept",
				 (unsigned long long)mt[i].gpa, (unsigned long long)mt[i].size,
				 (unsigned long long)mt[i].fd_offset);
			return -EINVAL;
		}
		map[n++] = (struct pager_gpa_range){
			.gpa = mt[i].gpa, .size = mt[i].size,
			.first_page = r->first_page +
				      (mt[i].fd_offset - r->memfd_off) / PAGER_PAGE_SIZE,
		};
	}
	if (!n) {
		log_warn(p->subject, "mem table names none of the pager's memfds: map kept");
		return -ENOENT;
	}
	pthread_mutex_lock(&p->lock);
	changed = p->gpa_source != PAGER_GPA_MEM_TABLE || n != p->nr_gpa ||
		  memcmp(map, p->gpa_map, n * sizeof(map[0]));
	if (changed && p->gpa_source == PAGER_GPA_GUESSED &&
	    (n != p->nr_gpa || memcmp(map, p->gpa_map, n * sizeof(map[0]))))
		log_warn(p->subject, "the handshake's GPA guess (memfd offset) was wrong: "
			 "replaced by the vhost-user memory table");
	memcpy(p->gpa_map, map, n * sizeof(map[0]));
	p->nr_gpa = n;
	p->gpa_source = PAGER_GPA_MEM_TABLE;
	ram_ranges_publish(p);
	pthread_mutex_unlock(&p->lock);
	/* QEMU sends the same table again on every cont: say it once */
	for (unsigned int i = 0; i < n; i++)
		log_msg(changed ? LOG_INFO : LOG_DEBUG, p->subject,
			"GPA map (vhost-user memory table): gpa %#llx+%#llx = guest RAM page %llu",
			(unsigned long long)map[i].gpa, (unsigned long long)map[i].size,
			(unsigned long long)map[i].first_page);
	return 0;
}

/* The offload worker's next job (@precopy: a pre-copy).  Lock held. */
static void offload_job_set_locked(struct pager *p, bool precopy,
				   void (*done)(struct pager *p, int err, void *arg), void *arg)
{
	p->offloading = true;
	p->precopy = precopy;
	p->offload_err = 0;
	p->offload_done = done;
	p->offload_arg = arg;
	atomic_store(&p->offload_abort, false);
}

static int offload_start_now(struct pager *p,
			     void (*done)(struct pager *p, int err, void *arg), void *arg)
{
	int err;

	if (!p->evictable) {	/* may have changed while it was queued */
		log_warn(p->subject, "offload refused: not evictable: %s",
			 p->not_evictable_reason);
		return -EPERM;
	}
	pager_prefetch_quiesce(p);
	/* reg_lock until p->offloading is set: nothing unregisters between */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	err = p->nr_mappers ? 0 : -ENOTCONN;
	pthread_mutex_unlock(&p->lock);
	if (err) {
		pthread_mutex_unlock(&p->reg_lock);
		log_warn(p->subject, "offload refused: no mapper has handed a userfaultfd");
		return err;
	}
	/* Register before the first punch: a touch must fault, not read zero
	 * (MISSING too, over a write-protect-alone registration). */
	pthread_mutex_lock(&p->lock);
	p->reg_wp_only = false;
	pthread_mutex_unlock(&p->lock);
	err = pager_register_all(p);
	if (err) {
		pthread_mutex_unlock(&p->reg_lock);
		return err;
	}
	pthread_mutex_lock(&p->lock);
	p->registered = true;
	p->crit_recording = false;	/* this cycle's delivery never came */
	offload_job_set_locked(p, false, done, arg);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->reg_lock);
	return pager_offload_worker_kick(p);
}

int pager_offload_start(struct pager *p,
			void (*done)(struct pager *p, int err, void *arg),
			void *arg)
{
	if (!p->evictable || !p->offloading)
		return offload_start_now(p, done, arg);	/* -EPERM, or it starts */
	if (!p->precopy || p->offload_queued)
		return -EBUSY;
	/*
	 * Stop the pre-copy at its next batch boundary and start when its
	 * thread has ended (offload_done_cb).  Waiting here for its batches
	 * in flight held the loop for 3-10 ms.
	 */
	atomic_store(&p->offload_abort, true);
	p->offload_queued = true;
	p->queued_cancelled = false;
	p->queued_done = done;
	p->queued_arg = arg;
	return 0;
}

int pager_precopy_start(struct pager *p,
			void (*done)(struct pager *p, int err, void *arg),
			void *arg)
{
	int err = 0;

	if (!p->evictable)
		return -EPERM;
	if (p->offloading)
		return -EBUSY;
	/* reg_lock: no mapper comes or goes until p->offloading is set */
	pthread_mutex_lock(&p->reg_lock);
	pthread_mutex_lock(&p->lock);
	if (!p->nr_mappers || !p->registered || p->track != PAGER_DIRTY_WP_ASYNC)
		err = -EOPNOTSUPP;
	if (!err)
		offload_job_set_locked(p, true, done, arg);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->reg_lock);
	return err ? err : pager_offload_worker_kick(p);
}

void pager_set_writer_gate(struct pager *p, int (*gate)(bool stop, void *arg), void *arg)
{
	p->writer_gate = gate;
	p->writer_gate_arg = arg;
}

int pager_offload_cancel(struct pager *p)
{
	atomic_store(&p->tidy_stop, true);	/* the VM is about to run */
	if (p->offload_queued) {
		if (!p->queued_cancelled)
			log_info(p->subject, "offload cancel requested before it started");
		p->queued_cancelled = true;
		return 0;
	}
	if (!p->offloading)
		return -EALREADY;
	if (!atomic_exchange(&p->offload_abort, true))
		log_info(p->subject, "offload cancel requested");
	return 0;
}

static void tail_track(struct pager *p, bool on, uint64_t until_ns)
{
	bool early;

	if (!p->cfg.tail_resident || !p->cfg.critical_resident || !p->tail)
		return;
	pthread_mutex_lock(&p->lock);
	early = on && !p->registered;
	pthread_mutex_unlock(&p->lock);
	/* before the first offload: write-protect alone, and the worker */
	if (early && (!pager_register_wp_early(p) || pager_offload_worker_start(p)))
		return;
	pager_tail_command(p, on, until_ns);
}

void pager_tail_track(struct pager *p, bool on)
{
	tail_track(p, on, 0);
}

void pager_tail_track_start(struct pager *p)
{
	tail_track(p, true, now_ns() + PAGER_TAIL_START_S * 1000000000ull);
}

static const char *const restore_names[PAGER_RESTORES] = {
	[PAGER_RESTORE_WORKING_SET] = "working-set",
	[PAGER_RESTORE_EAGER] = "eager",
	[PAGER_RESTORE_LAZY] = "lazy",
	[PAGER_RESTORE_RECURRING] = "recurring",
};

const char *pager_restore_name(enum pager_restore r)
{
	return pager_name_of(restore_names, PAGER_RESTORES, (unsigned int)r);
}

int pager_restore_parse(const char *s, enum pager_restore *out)
{
	int i = pager_name_index(restore_names, PAGER_RESTORES, s);

	if (i < 0)
		return i;
	*out = (enum pager_restore)i;
	return 0;
}

static const char *const io_class_names[PAGER_IO_CLASSES] = {
	[PAGER_IO_REALTIME] = "realtime",
	[PAGER_IO_INHERIT] = "inherit",
};

const char *pager_io_class_name(enum pager_io_class c)
{
	return pager_name_of(io_class_names, PAGER_IO_CLASSES, (unsigned int)c);
}

int pager_io_class_parse(const char *s, enum pager_io_class *out)
{
	int i = pager_name_index(io_class_names, PAGER_IO_CLASSES, s);

	if (i < 0)
		return i;
	*out = (enum pager_io_class)i;
	return 0;
}

void pager_set_restore(struct pager *p, enum pager_restore how)
{
	if ((unsigned int)how >= PAGER_RESTORES)
		return;
	pthread_mutex_lock(&p->lock);
	p->restore = how;
	pthread_mutex_unlock(&p->lock);
}

void pager_resume_restore(struct pager *p, enum pager_restore how)
{
	if ((unsigned int)how > PAGER_RESTORE_POLICY)
		how = PAGER_RESTORE_POLICY;
	pthread_mutex_lock(&p->lock);
	p->next_restore = how;
	pthread_mutex_unlock(&p->lock);
}

/* The cycle restores by @how from now on; @data: by the VM's policy (the
 * fault-order prefetch records and follows).  Lock held. */
static void cycle_restore_locked(struct pager *p, enum pager_restore how, bool data)
{
	p->cycle_override = how != p->restore;
	p->cycle_data = data;
	p->cycle_saw_data |= data;
	pager_follow_resumed_locked(p, data);
	p->last_restore = how;
	if (how != PAGER_RESTORE_LAZY && p->cfg.prefetch) {
		p->prefetch_requested = true;
		p->prefetch_mode = how;
		atomic_store(&p->prefetch_abort, false);
		pthread_cond_broadcast(&p->prefetch_cv);
	}
}

void pager_resumed(struct pager *p)
{
	enum pager_restore how;

	pthread_mutex_lock(&p->lock);
	how = p->next_restore == PAGER_RESTORE_POLICY ? p->restore : p->next_restore;
	cycle_restore_locked(p, how, p->next_restore == PAGER_RESTORE_POLICY);
	p->next_restore = PAGER_RESTORE_POLICY;
	pthread_mutex_unlock(&p->lock);
}

void pager_data_arrived(struct pager *p)
{
	pthread_mutex_lock(&p->lock);
	if (!p->cycle_data) {
		p->data_arrivals++;
		cycle_restore_locked(p, p->restore, true);
	}
	pthread_mutex_unlock(&p->lock);
}

static uint64_t memfd_allocated_bytes(struct pager *p)
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct stat st;
		bool dup = false;

		for (unsigned int j = 0; j < i; j++)
			dup |= p->regions[j].memfd == p->regions[i].memfd;
		if (p->regions[i].memfd < 0 || dup ||
		    fstat(p->regions[i].memfd, &st) < 0)
			continue;
		total += (uint64_t)st.st_blocks * 512u;
	}
	return total;
}

void pager_get_stats(struct pager *p, struct pager_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&p->lock);
	memcpy(st->pages, p->count, sizeof(st->pages));
	st->pages_total = p->npages;
	st->ram_bytes = p->npages * PAGER_PAGE_SIZE;
	st->store_bytes = p->count[PAGE_OFFLOADED] * PAGER_PAGE_SIZE;
	st->faults = p->faults;
	st->fault_pages = p->fault_pages;
	st->zero_faults = p->zero_faults;
	st->zero_ahead_pages = p->zero_ahead;
	st->eexist = p->eexist;
	st->prefetch_pages = p->prefetch_pages;
	st->fault_around_pages = p->fa_window;
	st->fault_around_max = p->cfg.fault_around_pages;
	st->fault_around_installed = p->fa_installed;
	st->fault_around_hits = p->fa_hits;
	st->fault_around_misses = p->fa_misses;
	pager_fa_costs_locked(p, &st->fault_around_fault_ns, &st->fault_around_page_ns);
	st->fault_sequential = p->seq_faults;
	st->follow_pages = p->fol_on ? p->cfg.follow_pages : 0;
	st->follow_queued = p->fol_queued;
	st->follow_installed = p->fol_installed;
	st->follow_hits = p->fol_hits;
	st->follow_misses = p->fol_misses;
	st->follow_late = p->fol_late;
	st->restore = p->restore;
	st->last_restore = p->last_restore;
	st->working_set_pages = p->ws_pages;
	st->eager_pages = p->eager_pages;
	st->data_arrivals = p->data_arrivals;
	st->readahead_mapped_pages = p->ra_mapped_pages;
	st->zero_copy_offloads = p->zero_copy_offloads;
	st->precopies = p->precopies;
	st->precopy_written_bytes = p->precopy_written;
	st->precopy_cleaned_pages = p->precopy_cleaned;
	st->dirty_hot_pages = p->dirty_hot;
	st->dirty_hot_again_pages = p->dirty_hot_again;
	st->dirty_hot_samples = p->hot_samples;
	st->dirty_hot_vouched_pages = p->hot_vouched;
	st->dirty_hot_vouch_renewed_pages = p->hot_vouch_renewed;
	st->dirty_hot_vouch_dropped_pages = p->hot_vouch_dropped;
	st->dirty_stream_pages = p->dirty_stream;
	st->dirty_write_fault_pages = p->dirty_wfault;
	st->offloads = p->offloads;
	st->offload_errors = p->offload_errors;
	st->offload_cancels = p->offload_cancels;
	st->stale_discards_deferred = p->stale_discards_deferred;
	st->stale_slots_kept = p->stale_slots_kept;
	st->fault_errors = p->fault_errors;
	st->restore_errors = p->restore_errors;
	st->resident_asked = p->resident_asked;
	st->resident_failed = p->resident_failed;
	st->fault_retries = p->fault_retries;
	st->faults_stuck = p->faults_stuck;
	st->last_offload_ns = p->last_offload_ns;
	st->last_offload_written = p->last_offload_written;
	st->dropped_free_pages = p->dropped_free_pages;
	st->vmm_removed_pages = p->vmm_removed_pages;
	st->vmm_unmaps = p->vmm_unmaps;
	st->vmm_remaps = p->vmm_remaps;
	st->gpa_refused = p->gpa_refused;
	st->gpa_source = p->gpa_source;
	st->mappers = p->nr_mappers;
	st->registered = p->registered;
	st->evictable = p->evictable;
	st->not_evictable_reason = p->not_evictable_reason;
	memcpy(st->fault_lat_us, p->fault_lat_us, sizeof(st->fault_lat_us));
	st->fault_lat_ns_sum = p->fault_lat_ns_sum;
	st->fault_read_ns_sum = p->fault_read_ns_sum;
	st->fault_lock_ns_sum = p->fault_lock_ns_sum;
	st->fault_in_flight_ns_sum = p->fault_in_flight_ns_sum;
	st->fault_in_flight_faults = p->fault_in_flight_faults;
	st->fault_seq_ns_sum = p->fault_seq_ns_sum;
	st->critical_set_pages = p->crit_nr;
	/* a page of the tail set and a device's (a ring the guest wrote)
	 * counts twice: at most every RESIDENT page */
	st->kept_dirty_pages = pager_kept_dirty_locked(p) + pager_tail_resident_locked(p);
	if (st->kept_dirty_pages > p->count[PAGE_RESIDENT])
		st->kept_dirty_pages = p->count[PAGE_RESIDENT];
	st->device_pages = p->dev_nr;
	st->device_ranges_refused = p->dev_refused;
	st->device_read_back = p->dev_read_back;
	st->critical_kept_pages = p->crit_kept_pages;
	st->tail_pages = p->tail_nr;
	st->tail_ticks = p->tail_ticks;
	st->tail_sets = p->tail_sets;
	st->tail_ticking = p->tail_ticking && !p->tail_spent;
	st->tail_tick_pages = p->tail_tick_pages;
	st->tail_budget_stops = p->tail_budget_stops;
	st->tail_backoffs = p->tail_backoffs;
	st->tail_idle_stops = p->tail_idle_stops;
	st->tail_installed = p->tail_installed_pages;
	st->tail_learned = p->tail_learned;
	st->critical_restored_pages = p->crit_restored_pages;
	st->critical_mapped_pages = p->crit_mapped_pages;
	st->critical_window_faults = p->crit_window_faults;
	st->critical_data_windows = p->crit_data_windows;
	st->critical_budget_stops = p->crit_budget_stops;
	st->critical_ring_resets = p->crit_ring_resets;
	st->critical_last_restore_ns = p->crit_last_restore_ns;
	st->recovered = p->recovered;
	st->recovered_store_pages = p->rec_store_pages;
	st->recovered_offloaded = p->rec_offloaded;
	st->recovered_resident = p->rec_resident;
	st->recovered_discarded = p->rec_discarded;
	st->store_bad_slots = __atomic_load_n(&p->store.bad_slots, __ATOMIC_RELAXED);
	st->store_id = p->store.id;
	st->lost_err = p->lost_err;
	st->mappers_killed = p->mappers_killed;
	st->delivery_io_class = (enum pager_io_class)atomic_load(&p->dlv_io_class);
	st->delivery_io_class_reason = atomic_load(&p->dlv_io_reason);
	st->delivery_io_reads = atomic_load(&p->dlv_io_reads);
	st->dirty_tracking = p->track;
	st->dirty_tracking_reason = p->track == PAGER_DIRTY_UNKNOWN ?
				    "not decided: no offload registered the mappers yet" :
				    p->track_reason;
	st->dirty_fallbacks = p->dirty_fallbacks;
	st->clean_punched_pages = p->clean_punched;
	st->dirty_scanned_pages = p->dirty_scanned;
	st->dirty_own_pages = p->dirty_own;
	st->dirty_kept_pages = p->dirty_kept;
	st->dirty_wp_faults = p->dirty_wp_faults;
	st->store_written_bytes = p->store_written;
	pthread_mutex_unlock(&p->lock);
	st->resident_bytes = memfd_allocated_bytes(p);
	st->store_file_bytes = store_allocated_bytes(&p->store);
}

void pager_set_fault_around(struct pager *p, uint32_t pages)
{
	if (pages < 1)
		pages = 1;
	if (pages > PAGER_MAX_FAULT_AROUND)
		pages = PAGER_MAX_FAULT_AROUND;
	pthread_mutex_lock(&p->lock);
	p->cfg.fault_around_pages = pages;
	p->fa_window = pages;
	p->fa_acc_hits = p->fa_acc_misses = 0;
	pthread_mutex_unlock(&p->lock);
}

void pager_get_ram(struct pager *p, struct vmnap_ram *ram)
{
	ram->ranges = p->ram_ranges;
	ram->nr = p->nr_ram_ranges;
	ram->page_size = PAGER_PAGE_SIZE;
}

int pager_gpa_to_memfd(struct pager *p, uint64_t gpa, int *memfd,
		       uint64_t *offset)
{
	struct pager_region *r;
	uint64_t pg, n;
	int err = -ENXIO;

	pthread_mutex_lock(&p->lock);
	if (gpa_trusted(p))
		err = pager_gpa_chunk_locked(p, gpa, PAGER_PAGE_SIZE, &pg, &n);
	pthread_mutex_unlock(&p->lock);
	if (err)
		return err;
	r = pg_region(p, pg);
	*memfd = r->memfd;
	*offset = pg_memfd_off(r, pg) + gpa % PAGER_PAGE_SIZE;
	return 0;
}

int pager_memfd_to_gpa(struct pager *p, int memfd, uint64_t offset,
		       uint64_t *gpa)
{
	int err = -ERANGE;

	pthread_mutex_lock(&p->lock);
	if (!gpa_trusted(p)) {
		pthread_mutex_unlock(&p->lock);
		return -ENXIO;
	}
	for (unsigned int i = 0; i < p->nr_regions && err; i++) {
		const struct pager_region *r = &p->regions[i];
		uint64_t pg;

		if (r->memfd != memfd || offset < r->memfd_off ||
		    offset - r->memfd_off >= r->size)
			continue;
		pg = r->first_page + (offset - r->memfd_off) / PAGER_PAGE_SIZE;
		for (unsigned int j = 0; j < p->nr_gpa && err; j++) {
			const struct pager_gpa_range *g = &p->gpa_map[j];

			if (pg >= g->first_page && pg - g->first_page < g->size / PAGER_PAGE_SIZE) {
				*gpa = g->gpa + (pg - g->first_page) * PAGER_PAGE_SIZE +
				       offset % PAGER_PAGE_SIZE;
				err = 0;
			}
		}
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}
