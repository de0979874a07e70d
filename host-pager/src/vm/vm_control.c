// SPDX-License-Identifier: GPL-2.0-only
/* vm_control.c - a VM's coordinator wired to its parts; see vm_control.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "doorbell.h"
#include "events.h"
#include "guest_link.h"
#include "guest_link_listen.h"
#include "log.h"
#include "loop.h"
#include "pager.h"
#include "pressure_watch.h"
#include "views.h"
#include "vhost_vsock.h"
#include "vm_control.h"
#include "vmm_mem.h"

#define MEMXTIME_SAMPLE_NS	1000000000ull	/* resident bytes sampled every 1 s */
#define VMM_MEM_SAMPLE_NS	1000000000ull	/* VMM PSS, cgroup memory: every 1 s */
/* Pre-copy while a waiting VM runs only when it has this much to write. */
#define PRECOPY_MIN_BYTES	(1ull << 20)
/* The vsock device's rings (3 queues x 3) and its next RX buffers. */
#define VM_DEVICE_RANGES	(9U + 2U * VHOST_VSOCK_RESUME_RX_CHAINS)
#define NS_PER_SEC_F		1e9
#define GIB_F			1073741824.0
/*
 * "link" events a VM may emit: a burst, then one per interval.  A guest
 * that reconnects in a loop would otherwise write two events per session;
 * past the budget they are counted, and once it refills one event gives
 * the link's current state and how many were suppressed.
 */
#define LINK_EVENTS_BURST	32U
#define LINK_EVENTS_INTERVAL_NS	(5000ull * 1000000ull)

struct vm_control {
	struct vm *vm;
	struct loop_timer timer;
	char link_desc[160];		/* the socket backend, for logs and the API */
	pid_t vmm_pid;			/* given at registration, or 0 */
	struct vmm_mem_sampler *vmm_mem;	/* once a VMM pid is known */
	bool offload_running;
	bool precopy_running;
	uint64_t precopy_written0, precopy_cleaned0;	/* pager counters at its start */
	struct pager_stats resume_st0;	/* pager counters at the last resume's request */
	/* the last resume was for data ("resume"), or data was taken in
	 * running ("data_ready", ctl_data_window): its delivery's faults, from
	 * the resume's request or the data's arrival, go in the "delivered"
	 * event, "faults_from" saying which; NULL: neither */
	const char *faults_from;
	uint64_t handoff_req_ns;	/* when the last HANDOFF_REQ went out */
	uint64_t last_handoff_rtt_ns;
	uint64_t last_unquiesce_ns;	/* from the last RESUME_ACK */
	uint64_t free_reports, free_ranges_dropped;
	/* memory x time: resident bytes integrated over time (left Riemann sum
	 * over samples taken every MEMXTIME_SAMPLE_NS, on every transition and
	 * on every API read) */
	struct loop_timer sample_timer;
	uint64_t mt_last_ns, mt_last_bytes;
	double mt_byte_s;
	struct log_ratelimit link_ev_rl;	/* "link" events */
	struct loop_timer link_ev_timer;	/* the summary after suppression */
};

/* Account resident bytes since the last sample; take a new one. */
int vm_link_attach(struct vm *vm, uint32_t features,
		   const struct guest_link_ops *ops, void *opaque)
{
	const struct guest_link_config cfg = {
		.loop = vm->d->loop,
		.subject = vm->subject,
		.vm_id = vm->id,
		.features = features,
	};

	if (vm->link)
		return -EEXIST;
	vm->link = guest_link_new(&cfg, ops, opaque);
	return vm->link ? 0 : -errno;
}

void vm_link_detach(struct vm *vm)
{
	guest_link_free(vm->link);
	vm->link = NULL;
}

static void memxtime_sample(struct vm *vm)
{
	struct vm_control *ctl = vm->control;
	struct pager_stats st;
	uint64_t now = now_ns();

	if (!ctl || !vm->pager)
		return;
	pager_get_stats(vm->pager, &st);
	if (ctl->mt_last_ns)
		ctl->mt_byte_s += (double)ctl->mt_last_bytes * (double)(now - ctl->mt_last_ns) /
				  NS_PER_SEC_F;
	ctl->mt_last_ns = now;
	ctl->mt_last_bytes = st.resident_bytes;
}

static void on_sample_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	struct vmm_mem_sample smp;

	memxtime_sample(arg);
	vm_control_vmm_mem(arg, &smp);	/* follows a changed VMM pid */
	loop_timer_arm(l, t, MEMXTIME_SAMPLE_NS);
}

void vm_control_set_vmm_pid(struct vm *vm, pid_t pid)
{
	if (vm->control)
		vm->control->vmm_pid = pid;
}

pid_t vm_control_vmm_pid(struct vm *vm)
{
	if (vm->control && vm->control->vmm_pid)
		return vm->control->vmm_pid;
	return vm->pause ? vm->pause->peer_pid : 0;
}

bool vm_control_vmm_mem(struct vm *vm, struct vmm_mem_sample *out)
{
	struct vm_control *ctl = vm->control;
	pid_t pid = vm_control_vmm_pid(vm);

	if (!ctl || (!pid && !ctl->vmm_mem))
		return false;
	if (!ctl->vmm_mem) {
		ctl->vmm_mem = vmm_mem_sampler_new(VMM_MEM_SAMPLE_NS);
		if (!ctl->vmm_mem)
			return false;
	}
	vmm_mem_sampler_set_pid(ctl->vmm_mem, pid);
	return pid && vmm_mem_sampler_get(ctl->vmm_mem, out);
}

double vm_control_memxtime_gib_s(struct vm *vm)
{
	memxtime_sample(vm);
	return vm->control ? vm->control->mt_byte_s / GIB_F : 0.0;
}

/* ---- coordinator actions ------------------------------------------- */

static uint64_t ctl_now(void *arg)
{
	(void)arg;
	return now_ns();
}

static void ctl_arm(void *arg, uint64_t deadline)
{
	struct vm *vm = arg;

	if (deadline == COORD_NO_DEADLINE)
		loop_timer_cancel(vm->d->loop, &vm->control->timer);
	else
		loop_timer_arm_at(vm->d->loop, &vm->control->timer, deadline);
}

static void on_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	struct vm *vm = arg;

	(void)l;
	(void)t;
	coord_tick(vm->coord);
}

static int ctl_handoff(void *arg, uint32_t flags, uint32_t ms, uint64_t *req)
{
	struct vm *vm = arg;

	vm->control->handoff_req_ns = now_ns();
	return guest_link_handoff(vm->link, flags, ms, req);
}

static void ctl_abort(void *arg, uint64_t req)
{
	struct vm *vm = arg;

	guest_link_abort(vm->link, req);
}

static void ctl_resumed(void *arg, uint64_t req, uint64_t paused_ns,
			enum coord_resume_reason reason, bool offloaded)
{
	struct vm *vm = arg;
	const struct guest_link_peer *peer = guest_link_peer(vm->link);
	uint32_t flags = offloaded ? VMNAP_RF_OFFLOADED : 0;
	int err;

	/* The guest's clock stood still: tell it for how long, so it steps
	 * its wall clock (a module without the feature is left alone). */
	if (vm->pause && vm->pause->ops->guest_clock_stops && peer &&
	    (peer->features & VMNAP_F_CLOCK_STEP)) {
		flags |= VMNAP_RF_CLOCK_STOPPED;
		paused_ns = pause_clock_stopped_ns(vm->pause, paused_ns);
	}
	err = guest_link_resumed(vm->link, req, paused_ns, (enum vmnap_resume_reason)reason,
				 flags);
	if (err)
		log_warn(vm->subject, "RESUMED for request %llu not sent: %s",
			 (unsigned long long)req, strerror(-err));
}

static void pause_done(struct pause_backend *pb, int err, void *arg)
{
	struct vm *vm = arg;

	(void)pb;
	if (err && vm->vsock)
		vhost_vsock_set_paused(vm->vsock, false);
	coord_pause_done(vm->coord, err);
}

static int ctl_pause(void *arg)
{
	struct vm *vm = arg;
	int err;

	if (!vm->pause)
		return -EOPNOTSUPP;
	if (vm->vsock)	/* no guest RAM access from here on */
		vhost_vsock_set_paused(vm->vsock, true);
	/* the loop keeps running: QEMU's stop talks to our vsock device */
	err = pause_start(vm->pause, vm->d->loop, true, pause_done, vm);
	if (err && vm->vsock)
		vhost_vsock_set_paused(vm->vsock, false);
	return err;
}

static void resume_done(struct pause_backend *pb, int err, void *arg)
{
	struct vm *vm = arg;

	(void)pb;
	if (!err) {
		if (vm->vsock)
			vhost_vsock_set_paused(vm->vsock, false);
		/* the pager brings pages back as ctl_restore() said */
		if (vm->pager)
			pager_resumed(vm->pager);
	}
	coord_resume_done(vm->coord, err);
}

static int ctl_resume(void *arg)
{
	struct vm *vm = arg;

	if (!vm->pause)
		return -EOPNOTSUPP;
	return pause_start(vm->pause, vm->d->loop, false, resume_done, vm);
}

static void offload_done(struct pager *p, int err, void *arg)
{
	struct vm *vm = arg;

	(void)p;
	if (!vm->control)
		return;
	vm->control->offload_running = false;
	coord_offload_done(vm->coord, err);
}

void vm_device_pages_update(struct vm *vm)
{
	uint64_t gpa[VM_DEVICE_RANGES], len[VM_DEVICE_RANGES];
	unsigned int n;

	if (!vm->pager || !vm->vsock)
		return;
	n = vhost_vsock_resume_ranges(vm->vsock, gpa, len, VM_DEVICE_RANGES);
	pager_set_device_pages(vm->pager, gpa, len, n);
}

static int ctl_offload(void *arg)
{
	struct vm *vm = arg;
	int err;

	if (!vm->pager)
		return -ENODEV;
	vm->control->offload_running = true;
	vm_device_pages_update(vm);	/* what the device touches first on resume */
	err = pager_offload_start(vm->pager, offload_done, vm);
	if (err)
		vm->control->offload_running = false;
	return err;
}

/* The pager gave up on a fault (pager.h "lost"): it killed the VMM.  The
 * VM stays listed as LOST with the error until it is deleted or its VMM
 * hands its memory in again. */
static void vm_lost(struct vm *vm, int err)
{
	struct pager_stats st;

	pager_get_stats(vm->pager, &st);
	vm->lost_err = err;
	snprintf(vm->lost_error, sizeof(vm->lost_error),
		 "a fault could not be served: %s%s; the VMM was killed (%u process(es))",
		 strerror(-err), err == -EBADMSG ? " (store slot checksum mismatch)" :
		 " (store read failing past fault_error_timeout_ms)", st.mappers_killed);
	vm->d->vms_lost++;
	log_err(vm->subject, "LOST: %s", vm->lost_error);
	events_emit(vm->d, vm->name, "vm_lost",
		    json_pack("{s:i,s:s,s:s,s:i}", "err", err, "error", strerror(-err),
			      "reason", err == -EBADMSG ? "checksum" : "store_io",
			      "killed", (int)st.mappers_killed));
	if (vm->coord)	/* nothing left to pause: no more handoffs */
		coord_set_managed(vm->coord, false);
}

/* The pager hit an error the VM must not run into blind: fail-safe. */
static void pager_error(struct pager *p, int err, const char *what, void *arg)
{
	struct vm *vm = arg;

	(void)p;
	if (!strcmp(what, "lost")) {
		vm_lost(vm, err);
		return;
	}
	if (!vm->control)
		return;
	log_err(vm->subject, "pager error (%s): %s", what, strerror(-err));
	events_emit(vm->d, vm->name, "pager_error",
		    json_pack("{s:s,s:i,s:s}", "what", what, "err", err,
			      "error", strerror(-err)));
	if (vm->coord)
		coord_pager_error(vm->coord, err);
}

void vm_control_pager_attached(struct vm *vm)
{
	if (vm->pager)
		pager_set_error_cb(vm->pager, pager_error, vm);
}

/* Until a managed VM's first wait, its scans are the boot's
 * (pager_tail_track_start: a time limit, backing off while the guest
 * writes much), whether its coordinator came before its memory (Cloud
 * Hypervisor's or Kata's VM registered as it starts: the boot runs in
 * RUNNING, and a command's budget would run out on it, leaving the first
 * wait no set) or after (registered once the guest is up); from then on
 * each command has its budget (pager_tail_track). */
void vm_control_tail_sync(struct vm *vm)
{
	if (!vm->pager)
		return;
	if (!vm->coord)	/* it boots, likely, and is managed soon */
		pager_tail_track_start(vm->pager);
	else if (!coord_managed(vm->coord) || coord_state(vm->coord) != COORD_RUNNING)
		pager_tail_track(vm->pager, false);
	else if (!coord_moved(vm->coord))
		pager_tail_track_start(vm->pager);
	else
		pager_tail_track(vm->pager, true);
}

static int ctl_pre_resume(void *arg)
{
	struct vm *vm = arg;

	return vm->pager ? pager_resume_prepare(vm->pager) : 0;
}

static void ctl_resume_delivered(void *arg)
{
	struct vm *vm = arg;

	if (vm->pager)
		pager_resume_delivered(vm->pager);
}

/* Data taken in while the VM runs: its faults count as a data resume's,
 * in the set and in the "delivered" event (from now). */
static void ctl_data_window(void *arg)
{
	struct vm *vm = arg;

	if (!vm->pager)
		return;
	pager_data_window(vm->pager);
	pager_get_stats(vm->pager, &vm->control->resume_st0);
	vm->control->faults_from = "data_ready";
}

static int ctl_offload_cancel(void *arg)
{
	struct vm *vm = arg;

	if (!vm->pager)
		return -ENODEV;
	return pager_offload_cancel(vm->pager);
}

static bool ctl_can_offload(void *arg)
{
	struct vm *vm = arg;
	struct pager_stats st;

	if (!vm->pager)
		return false;
	pager_get_stats(vm->pager, &st);
	return st.evictable;
}

/* The guest's last busy/idle report, as GET /vms/NAME shows it. */
static json_t *evidence_json(const struct coord_evidence *ev)
{
	return json_pack("{s:o,s:i,s:i,s:i,s:i}",
			 "next_timer_ns", ev->next_timer_ns == COORD_BUDGET_UNKNOWN ? json_null() :
					  json_integer((json_int_t)ev->next_timer_ns),
			 "busy_reasons", (int)ev->busy_reasons,
			 "cpu_idle_permille", (int)ev->cpu_idle_permille,
			 "nr_runnable", (int)ev->nr_runnable,
			 "io_inflight", (int)ev->io_inflight);
}

/* ... with the reason bits by name ("busy"), for a "busy" transition event. */
static json_t *busy_evidence_json(const struct coord_evidence *ev)
{
	json_t *o = evidence_json(ev), *reasons = json_array();

	for (unsigned int b = 0; b < COORD_BUSY_BITS; b++)
		if (ev->busy_reasons & (1U << b))
			json_array_append_new(reasons, json_string(coord_busy_reason_name(b)));
	json_object_set_new(o, "busy", reasons);
	return o;
}

static int ctl_offload_bytes(void *arg, struct coord_offload_bytes *b);

static void precopy_done(struct pager *p, int err, void *arg)
{
	struct vm *vm = arg;
	struct pager_stats st;

	if (!vm->control)
		return;
	vm->control->precopy_running = false;
	pager_get_stats(p, &st);
	events_emit(vm->d, vm->name, "precopy", json_pack("{s:I,s:I,s:s}",
		"written_bytes", (json_int_t)(st.precopy_written_bytes - vm->control->precopy_written0),
		"cleaned_pages", (json_int_t)(st.precopy_cleaned_pages - vm->control->precopy_cleaned0),
		"result", err == -ECANCELED ? "stopped" : err ? strerror(-err) : "done"));
	/* it may finish while the VM is paused, a decision put off for what
	 * it had left to write: that is gone now */
	if (!err && vm->coord)
		coord_offload_estimate_changed(vm->coord);
}

/*
 * A waiting VM runs again (the guest was busy, or ran a timer) before the
 * wait could offload it: have the pager write what the last command
 * dirtied now, while it runs, so the offload the wait gets has little
 * left to write and fits in a short timer budget.  Not at the wait's
 * start: most short waits end before a handoff, and their writes would
 * be wasted.
 */
static void precopy_maybe(struct vm *vm)
{
	struct coord_offload_bytes b = { 0 };
	struct pager_stats st;
	int err;

	if (!vm->pager || !vm->control || vm->control->precopy_running ||
	    vm->control->offload_running || !vm->coord || !coord_cost_may_offload(vm->coord) ||
	    ctl_offload_bytes(vm, &b) || b.to_write < PRECOPY_MIN_BYTES)
		return;
	pager_get_stats(vm->pager, &st);
	vm->control->precopy_written0 = st.precopy_written_bytes;
	vm->control->precopy_cleaned0 = st.precopy_cleaned_pages;
	err = pager_precopy_start(vm->pager, precopy_done, vm);
	if (!err)
		vm->control->precopy_running = true;
	else if (err != -EOPNOTSUPP && err != -EBUSY)
		log_warn(vm->subject, "pre-copy not started: %s", strerror(-err));
}

static void ctl_transition(void *arg, enum coord_state from, enum coord_state to,
			   const char *why)
{
	struct vm *vm = arg;
	json_t *f;

	memxtime_sample(vm);
	if (from == COORD_RUNNING && to == COORD_WAITING)
		vm->control->faults_from = NULL;	/* a new wait: its delivery is not */
	f = json_pack("{s:s,s:s,s:s}", "from", coord_state_name(from),
			      "to", coord_state_name(to), "why", why);

	if (vm->pager && (to == COORD_PAUSED || to == COORD_OFFLOADED || to == COORD_RUNNING ||
			  to == COORD_WAITING)) {
		struct pager_stats st;

		pager_get_stats(vm->pager, &st);
		json_object_set_new(f, "resident_bytes", json_integer((json_int_t)st.resident_bytes));
		/* cumulative: the difference between two transitions is what
		 * the state in between cost in faults */
		json_object_set_new(f, "faults", json_integer((json_int_t)st.faults));
		json_object_set_new(f, "fault_ns", json_integer((json_int_t)st.fault_lat_ns_sum));
		json_object_set_new(f, "fault_read_ns",
				    json_integer((json_int_t)st.fault_read_ns_sum));
		json_object_set_new(f, "fault_lock_ns",
				    json_integer((json_int_t)st.fault_lock_ns_sum));
		json_object_set_new(f, "fault_in_flight_ns",
				    json_integer((json_int_t)st.fault_in_flight_ns_sum));
		json_object_set_new(f, "fault_sequential_ns",
				    json_integer((json_int_t)st.fault_seq_ns_sum));
		json_object_set_new(f, "faults_sequential",
				    json_integer((json_int_t)st.fault_sequential));
	}
	/* a command runs in RUNNING; leaving it, its wait begins */
	if (vm->pager && vm->coord && coord_managed(vm->coord) &&
	    (to == COORD_RUNNING) != (from == COORD_RUNNING))
		pager_tail_track(vm->pager, to == COORD_RUNNING);
	if (vm->coord && !strcmp(why, "busy"))
		json_object_set_new(f, "evidence", busy_evidence_json(coord_last_evidence(vm->coord)));
	events_emit(vm->d, vm->name, "transition", f);
	if (to == COORD_WAITING && from != COORD_RUNNING)
		precopy_maybe(vm);
	else if (to == COORD_RUNNING && vm->control && vm->control->precopy_running)
		pager_offload_cancel(vm->pager);	/* the wait is over: the command
							 * needs the disk and the CPU */
}

static void ctl_delivered(void *arg, const char *wait_id, uint64_t latency_ns)
{
	struct vm *vm = arg;
	const struct pager_stats *st0 = &vm->control->resume_st0;
	struct pager_stats st;
	json_t *f;

	/* data in a guest timer's cycle (no resume of its own): the command
	 * it starts is data work for the pager; else a no-op */
	if (vm->pager)
		pager_data_arrived(vm->pager);
	if (vm->control->faults_from && vm->pager) {
		/* what the data path faulted on, from the resume's request or
		 * the data's arrival */
		pager_get_stats(vm->pager, &st);
		f = json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "wait", wait_id,
			      "latency_ns", (json_int_t)latency_ns,
			      "faults_from", vm->control->faults_from,
			      "resume_faults", (json_int_t)(st.faults - st0->faults),
			      "resume_fault_pages", (json_int_t)(st.fault_pages - st0->fault_pages),
			      "resume_zero_faults", (json_int_t)(st.zero_faults - st0->zero_faults),
			      "resume_fault_ns",
			      (json_int_t)(st.fault_lat_ns_sum - st0->fault_lat_ns_sum),
			      /* of that: store reads, the pager's lock, pages in flight */
			      "resume_fault_read_ns",
			      (json_int_t)(st.fault_read_ns_sum - st0->fault_read_ns_sum),
			      "resume_fault_lock_ns",
			      (json_int_t)(st.fault_lock_ns_sum - st0->fault_lock_ns_sum),
			      "resume_fault_in_flight_ns",
			      (json_int_t)(st.fault_in_flight_ns_sum - st0->fault_in_flight_ns_sum));
		vm->control->faults_from = NULL;
	} else {
		f = json_pack("{s:s,s:I}", "wait", wait_id, "latency_ns", (json_int_t)latency_ns);
	}
	events_emit(vm->d, vm->name, "delivered", f);
}

/* What an offload now would write: the resident pages with no valid store
 * copy (RESIDENT, not CLEAN; holes and zero pages are not written, so the
 * memfd's allocated bytes less the CLEAN ones bound it too). */
static int ctl_offload_bytes(void *arg, struct coord_offload_bytes *b)
{
	struct vm *vm = arg;
	struct pager_stats st;
	uint64_t clean, dirty, kept;

	if (!vm->pager)
		return -ENODEV;
	pager_get_stats(vm->pager, &st);
	clean = st.pages[PAGE_CLEAN] * PAGER_PAGE_SIZE;
	dirty = st.resident_bytes > clean ? st.resident_bytes - clean : 0;
	b->to_write = dirty < st.pages[PAGE_RESIDENT] * PAGER_PAGE_SIZE ? dirty :
		      st.pages[PAGE_RESIDENT] * PAGER_PAGE_SIZE;
	/* what the offload keeps resident it does not write: counted, the
	 * wake path's pages (written at every wake) made each timer resume
	 * of an offloaded VM start a pre-copy that wrote next to nothing */
	kept = st.kept_dirty_pages * PAGER_PAGE_SIZE;
	b->to_write = b->to_write > kept ? b->to_write - kept : 0;
	b->last_written = st.last_offload_written;
	return 0;
}

static json_t *ns_or_null(uint64_t ns)
{
	return ns == COORD_NO_DEADLINE ? json_null() : json_integer((json_int_t)ns);
}

static void ctl_decision(void *arg, const struct coord_decision *d)
{
	struct vm *vm = arg;
	json_t *f = json_pack("{s:s,s:b,s:b,s:s,s:o}", "policy", coord_profile_name(d->profile),
			      "offload", d->offload, "final", d->final,
			      "reason", d->reason ? d->reason : "", "budget_ns",
			      ns_or_null(d->budget_ns));

	if (d->profile == COORD_PROFILE_COST) {
		json_object_set_new(f, "kind", json_string(coord_wait_kind_name(d->kind)));
		json_object_set_new(f, "age_ns", json_integer((json_int_t)d->age_ns));
		json_object_set_new(f, "expected_rest_ns",
				    json_integer((json_int_t)d->expected_rest_ns));
		if (d->expected_from)
			json_object_set_new(f, "expected_from", json_string(d->expected_from));
		json_object_set_new(f, "samples", json_integer(d->samples));
		json_object_set_new(f, "write_bytes", json_integer((json_int_t)d->write_bytes));
		json_object_set_new(f, "write_bps", json_integer((json_int_t)d->write_bps));
		json_object_set_new(f, "write_bps_measured", json_boolean(d->write_bps_measured));
		json_object_set_new(f, "cost_ns", ns_or_null(d->cost_ns));
	} else if (d->offload) {
		uint64_t now = now_ns();

		json_object_set_new(f, "in_ns", json_integer((json_int_t)(d->at_ns > now ?
									 d->at_ns - now : 0)));
	}
	events_emit(vm->d, vm->name, "offload_decision", f);
}

/*
 * Before a resume (and before its pre-resume restore): a timer resume
 * restores lazily, any other by the VM's restore policy (vm_restore()).
 */
static void ctl_restore(void *arg, enum coord_restore how)
{
	struct vm *vm = arg;
	struct pager_stats st = { 0 };

	if (vm->pager) {
		pager_resume_restore(vm->pager, how == COORD_RESTORE_LAZY ?
				     PAGER_RESTORE_LAZY : PAGER_RESTORE_POLICY);
		pager_get_stats(vm->pager, &st);
	}
	vm->control->resume_st0 = st;
	vm->control->faults_from = NULL;
}

static void ctl_resume_breakdown(void *arg, const struct coord_resume_breakdown *b)
{
	struct vm *vm = arg;
	struct pager_stats st = { 0 };
	json_t *f;

	if (vm->pager)
		pager_get_stats(vm->pager, &st);
	f = json_pack("{s:s,s:s,s:b,s:b,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
		      "reason", coord_resume_reason_name(b->reason),
		      "restore", b->restore == COORD_RESTORE_LAZY ? "lazy" :
				 pager_restore_name((enum pager_restore)vm_restore(vm)),
		      "offloaded", b->offloaded, "probe", b->probe, "acked", b->acked,
		      "pre_resume_ns", (json_int_t)b->pre_resume_ns,
		      "vmm_ns", (json_int_t)b->vmm_ns,
		      "resumed_ns", (json_int_t)b->resumed_ns,
		      "ack_ns", (json_int_t)b->ack_ns,
		      "total_ns", (json_int_t)b->total_ns,
		      "faults", (json_int_t)(st.faults - vm->control->resume_st0.faults),
		      "fault_pages",
		      (json_int_t)(st.fault_pages - vm->control->resume_st0.fault_pages));
	/* the faults' service time in it, and the guest's own unquiesce
	 * (this RESUME_ACK's): what of ack_ns was neither is the guest's
	 * way from its thaw to the link and back */
	json_object_set_new(f, "fault_ns", json_integer((json_int_t)
		(st.fault_lat_ns_sum - vm->control->resume_st0.fault_lat_ns_sum)));
	json_object_set_new(f, "fault_read_ns", json_integer((json_int_t)
		(st.fault_read_ns_sum - vm->control->resume_st0.fault_read_ns_sum)));
	json_object_set_new(f, "guest_unquiesce_ns", b->acked ?
			    json_integer((json_int_t)vm->control->last_unquiesce_ns) :
			    json_null());
	vm->control->faults_from = vm->pager && b->reason == COORD_RESUME_DATA_READY ?
				   "resume" : NULL;
	events_emit(vm->d, vm->name, "resume", f);
}

static const struct coord_ops ctl_coord_ops = {
	.now = ctl_now,
	.arm_timer = ctl_arm,
	.handoff = ctl_handoff,
	.handoff_abort = ctl_abort,
	.resumed = ctl_resumed,
	.pause = ctl_pause,
	.resume = ctl_resume,
	.offload = ctl_offload,
	.offload_cancel = ctl_offload_cancel,
	.pre_resume = ctl_pre_resume,
	.resume_delivered = ctl_resume_delivered,
	.data_window = ctl_data_window,
	.can_offload = ctl_can_offload,
	.transition = ctl_transition,
	.delivered = ctl_delivered,
	.offload_bytes = ctl_offload_bytes,
	.decision = ctl_decision,
	.restore = ctl_restore,
	.resume_breakdown = ctl_resume_breakdown,
};

/* ---- guest link callbacks ------------------------------------------ */

/* A "link" event within the VM's budget; @fields (may be NULL) consumed. */
static void link_event(struct vm *vm, json_t *fields)
{
	struct vm_control *ctl = vm->control;
	uint64_t now = now_ns(), suppressed = 0;

	if (!log_ratelimit(&ctl->link_ev_rl, now, &suppressed)) {
		json_decref(fields);
		if (!ctl->link_ev_timer.armed)
			loop_timer_arm(vm->d->loop, &ctl->link_ev_timer,
				       log_ratelimit_wait_ns(&ctl->link_ev_rl, now));
		return;
	}
	if (suppressed && fields)
		json_object_set_new(fields, "suppressed", json_integer((json_int_t)suppressed));
	events_emit(vm->d, vm->name, "link", fields);
}

/* Events were suppressed: say where the link is now, and how many.  Not
 * before the budget lets an event out: a link event that took the credit
 * first (it carried the count), or a timer that ran early, must not have
 * this summary counted as suppressed, as if the guest had sent it. */
static void on_link_ev_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	struct vm *vm = arg;
	bool up = vm->link && guest_link_state(vm->link) == GUEST_LINK_UP;
	uint64_t wait;

	if (!vm->control->link_ev_rl.suppressed)
		return;
	wait = log_ratelimit_wait_ns(&vm->control->link_ev_rl, now_ns());
	if (wait) {
		loop_timer_arm(l, t, wait);
		return;
	}
	link_event(vm, json_pack("{s:s}", "state", up ? "up" : "down"));
}

static void gl_hello(struct guest_link *gl, const struct guest_link_peer *peer, void *opaque)
{
	struct vm *vm = opaque;

	if (vm->pager) {
		struct vmnap_ram ram;

		pager_get_ram(vm->pager, &ram);
		guest_link_set_ram(gl, &ram);
	}
	/* the guest link logged the HELLO (within its log budget) */
	link_event(vm, json_pack("{s:s,s:s,s:i}", "state", "up", "module",
				 LOG_STRN(peer->module_version, sizeof(peer->module_version)),
				 "features", (int)peer->features));
	coord_link_up(vm->coord);
}

static void gl_handoff_ack(struct guest_link *gl, uint64_t req_id, enum vmnap_verdict verdict,
			   const struct guest_link_evidence *ev, void *opaque)
{
	struct vm *vm = opaque;
	struct coord_evidence cev = {
		.next_timer_ns = (ev->flags & VMNAP_EV_TIMER_KNOWN) &&
				 ev->next_timer_ns != VMNAP_TIMER_UNKNOWN ?
				 ev->next_timer_ns : COORD_BUDGET_UNKNOWN,
		.busy_reasons = ev->busy_reasons,
		.cpu_idle_permille = ev->cpu_idle_permille,
		.nr_runnable = ev->nr_runnable,
		.io_inflight = ev->io_inflight,
	};

	(void)gl;
	vm->control->last_handoff_rtt_ns = now_ns() - vm->control->handoff_req_ns;
	coord_handoff_ack(vm->coord, req_id, verdict == VMNAP_READY, &cev);
}

static void gl_resume_ack(struct guest_link *gl, uint64_t req_id, uint64_t unquiesce_ns,
			  void *opaque)
{
	struct vm *vm = opaque;

	(void)gl;
	vm->control->last_unquiesce_ns = unquiesce_ns;
	coord_resume_ack(vm->coord, req_id);
}

static int gl_free_report(struct guest_link *gl, uint64_t batch_id,
			  const struct guest_link_range *r, unsigned int nr, void *opaque)
{
	struct vm *vm = opaque;

	(void)gl;
	(void)batch_id;
	vm->control->free_reports++;
	if (!vm->pager)
		return VMNAP_FREE_IGNORED;
	for (unsigned int i = 0; i < nr; i++) {
		int err = pager_drop_free(vm->pager, r[i].gpa, r[i].len);

		if (err == -ENXIO)	/* GPA map not known: the pager counts and logs */
			return VMNAP_FREE_IGNORED;
		if (err) {
			log_warn(vm->subject, "free report range %#llx+%#llx: %s",
				 (unsigned long long)r[i].gpa, (unsigned long long)r[i].len,
				 strerror(-err));
			return VMNAP_FREE_IGNORED;
		}
		vm->control->free_ranges_dropped++;
	}
	return VMNAP_FREE_OK;
}

static void gl_disconnect(struct guest_link *gl, int err, void *opaque)
{
	struct vm *vm = opaque;

	(void)gl;
	link_event(vm, json_pack("{s:s,s:i}", "state", "down", "err", err));
	coord_link_down(vm->coord);
}

static const struct guest_link_ops ctl_link_ops = {
	.hello = gl_hello,
	.handoff_ack = gl_handoff_ack,
	.resume_ack = gl_resume_ack,
	.free_report = gl_free_report,
	.disconnect = gl_disconnect,
};

/* ---- attach / detach ------------------------------------------------ */

/* Where the guest module's connection comes in, besides a vsock device. */
static int link_backend_start(struct vm *vm, const struct vm_control_spec *spec,
			      char *err, size_t n)
{
	uint32_t port = spec->link_port ? spec->link_port : VMNAP_DEFAULT_PORT;
	char *desc = vm->control->link_desc;
	size_t dn = sizeof(vm->control->link_desc);
	int ret = 0;

	switch (spec->link_kind) {
	case VM_LINK_NONE:
		return 0;
	case VM_LINK_UNIX:
		ret = guest_link_listen_unix(vm, spec->link_path);
		snprintf(desc, dn, "unix %s", spec->link_path);
		break;
	case VM_LINK_HYBRID:
		ret = guest_link_listen_hybrid(vm, spec->link_path, port);
		snprintf(desc, dn, "hybrid %s_%u", spec->link_path, port);
		break;
	case VM_LINK_VSOCK:
		ret = guest_link_listen_vsock(vm, spec->link_cid, port);
		snprintf(desc, dn, "vsock cid %u port %u", spec->link_cid, port);
		break;
	}
	if (ret) {
		snprintf(err, n, "guest link %s: %s", desc, strerror(-ret));
		desc[0] = '\0';
	}
	return ret;
}

/*
 * The guest link listens now: ring the module's doorbell so that a module
 * waiting out its reconnect backoff connects at once.  Through whatever
 * reaches the guest: the hybrid socket of the link backend, the AF_VSOCK
 * CID, or the VM's own vsock device once QEMU is attached to it (before,
 * no guest runs to hear it: its module connects as it loads).  A plain
 * unix link (a test's fake guest, a VMM bridge of its own) has no way in.
 */
static void ring_doorbell(struct vm *vm, const struct vm_control_spec *spec)
{
	if (spec->link_kind == VM_LINK_HYBRID)
		guest_doorbell_ring_hybrid(vm, spec->link_path);
	else if (spec->link_kind == VM_LINK_VSOCK)
		guest_doorbell_ring_vsock(vm, spec->link_cid);
	else if (vhost_vsock_front_end_connected(vm->vsock))
		guest_doorbell_ring_hybrid(vm, vhost_vsock_uds_path(vm->vsock));
}

/* The coordinator must know whether pausing also stops the guest's clock. */
static void sync_guest_clock(struct vm *vm)
{
	struct coord_config cfg;

	if (!vm->coord)
		return;
	cfg = *coord_config(vm->coord);
	cfg.guest_clock_stops = vm->pause && vm->pause->ops->guest_clock_stops;
	coord_set_config(vm->coord, &cfg);
}

const char *vm_control_clock_refusal(const struct pause_backend *pb)
{
	if (!pb || !pb->ops->guest_clock_stops || pb->spec.allow_clock_stop)
		return NULL;
	return "stops the guest clock: CLOCK_REALTIME is stepped on resume but monotonic "
	       "timers run late by the time paused (use freezer, or allow_clock_stop)";
}

int vm_control_set_managed(struct vm *vm, bool managed, char *err, size_t n)
{
	const char *why = managed ? vm_control_clock_refusal(vm->pause) : NULL;

	if (!vm->coord) {
		snprintf(err, n, "VM has no coordinator");
		return -ENOENT;
	}
	if (why) {
		snprintf(err, n, "cannot manage: pause backend %s %s", vm->pause->ops->name, why);
		return -EPERM;
	}
	coord_set_managed(vm->coord, managed);
	vm_control_tail_sync(vm);
	return 0;
}

int vm_control_attach(struct vm *vm, const struct vm_control_spec *spec, char *err, size_t n)
{
	struct vm_control *ctl;
	const struct coord_config *cc;
	int ret;

	if (vm->control || vm->coord) {
		snprintf(err, n, "VM already has a coordinator");
		return -EEXIST;
	}
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->vm = vm;
	ctl->vmm_pid = spec->vmm_pid;
	loop_timer_init(&ctl->timer, on_timer, vm);
	loop_timer_init(&ctl->sample_timer, on_sample_timer, vm);
	loop_timer_init(&ctl->link_ev_timer, on_link_ev_timer, vm);
	log_ratelimit_init(&ctl->link_ev_rl, LINK_EVENTS_INTERVAL_NS, LINK_EVENTS_BURST,
			   now_ns());
	vm->control = ctl;
	loop_timer_arm(vm->d->loop, &ctl->sample_timer, MEMXTIME_SAMPLE_NS);

	if (spec->has_pause) {
		struct pause_spec ps = spec->pause;

		if (!ps.timeout_ms && vm->d->settings)
			ps.timeout_ms = vm->d->settings->pause_timeout_ms;
		vm->pause = pause_new(&ps, vm->subject);
		if (!vm->pause) {
			ret = -errno;
			snprintf(err, n, "pause backend: %s", strerror(-ret));
			goto fail;
		}
		ret = vm->pause->ops->probe(vm->pause);
		if (ret) {
			snprintf(err, n, "pause backend %s at %s: %s", vm->pause->ops->name,
				 ps.path, strerror(-ret));
			goto fail;
		}
	}
	cc = spec->has_policy ? &spec->policy :
	     vm->d->settings ? &vm->d->settings->coord : NULL;
	vm->coord = coord_new(cc, &ctl_coord_ops, vm, vm->subject);
	if (!vm->coord) {
		ret = -ENOMEM;
		snprintf(err, n, "out of memory");
		goto fail;
	}
	pressure_watch_vm_attached(vm);
	if (vm->link)
		vm_link_detach(vm);	/* ours must be the only owner */
	ret = vm_link_attach(vm, VMNAP_F_ALL, &ctl_link_ops, vm);
	if (ret) {
		snprintf(err, n, "guest link: %s", strerror(-ret));
		goto fail;
	}
	ret = link_backend_start(vm, spec, err, n);
	if (ret)
		goto fail;
	sync_guest_clock(vm);
	vm_control_pager_attached(vm);
	ret = vm_control_set_managed(vm, spec->managed, err, n);
	if (ret)
		goto fail;
	log_info(vm->subject, "coordinator attached (pause %s, guest link via %s, %s)",
		 vm->pause ? vm->pause->ops->name : "none",
		 ctl->link_desc[0] ? ctl->link_desc : vm->vsock ? "vsock device" : "nothing yet",
		 spec->managed ? "managed" : "unmanaged");
	ring_doorbell(vm, spec);
	return 0;
fail:
	vm_control_detach(vm);
	return ret;
}

int vm_control_set_pause(struct vm *vm, const struct pause_spec *ps, char *err, size_t n)
{
	struct pause_backend *pb;
	enum coord_state s = vm->coord ? coord_state(vm->coord) : COORD_RUNNING;
	int ret;

	if (s != COORD_RUNNING && s != COORD_WAITING) {
		snprintf(err, n, "cannot change the pause backend in state %s", coord_state_name(s));
		return -EBUSY;
	}
	pb = pause_new(ps, vm->subject);
	if (!pb) {
		ret = -errno;
		snprintf(err, n, "pause backend: %s", strerror(-ret));
		return ret;
	}
	ret = pb->ops->probe(pb);
	if (ret) {
		snprintf(err, n, "pause backend %s at %s: %s", pb->ops->name, ps->path, strerror(-ret));
		pause_free(pb);
		return ret;
	}
	if (vm->coord && coord_managed(vm->coord) && vm_control_clock_refusal(pb)) {
		snprintf(err, n, "managed VM: pause backend %s %s", pb->ops->name,
			 vm_control_clock_refusal(pb));
		pause_free(pb);
		return -EPERM;
	}
	pause_free(vm->pause);
	vm->pause = pb;
	sync_guest_clock(vm);
	log_info(vm->subject, "pause backend %s at %s (guest clock %s while paused)",
		 pb->ops->name, ps->path, pb->ops->guest_clock_stops ? "stops" : "runs");
	return 0;
}

void vm_control_detach(struct vm *vm)
{
	struct vm_control *ctl = vm->control;
	bool resume = false;

	if (!ctl)
		return;
	if (vm->coord) {
		enum coord_state s = coord_state(vm->coord);

		/* Never leave a VM stopped behind us, and never wait for its
		 * VMM here: the backend resumes it on its own thread, after
		 * any call still in flight (a wedged VMM) returns. */
		resume = s == COORD_PAUSED || s == COORD_OFFLOADED || s == COORD_RESUMING ||
			 s == COORD_HANDOFF;
		if (vm->pause && resume)
			log_warn(vm->subject, "detaching while %s: the VM is resumed off the loop",
				 coord_state_name(s));
		if (vm->vsock)
			vhost_vsock_set_paused(vm->vsock, false);
	}
	loop_timer_cancel(vm->d->loop, &ctl->timer);
	loop_timer_cancel(vm->d->loop, &ctl->sample_timer);
	guest_link_listen_vm_detach(vm);	/* no new guest connections */
	vm_link_detach(vm);	/* its callbacks point here */
	loop_timer_cancel(vm->d->loop, &ctl->link_ev_timer);
	coord_free(vm->coord);
	vm->coord = NULL;
	pause_release(vm->pause, resume);
	vm->pause = NULL;
	vmm_mem_sampler_free(ctl->vmm_mem);	/* a read in progress ends by itself */
	free(ctl);
	vm->control = NULL;
}

static json_t *stats_json(const struct coord_stats *st)
{
	json_t *busy = json_object(), *res = json_object(), *kinds = json_object();

	for (int b = 0; b < COORD_BUSY_BITS; b++)
		json_object_set_new(busy, coord_busy_reason_name(b),
				    json_integer((json_int_t)st->busy_by_reason[b]));
	for (int r = 1; r < COORD_NR_RESUME_REASONS; r++)
		json_object_set_new(res, coord_resume_reason_name((enum coord_resume_reason)r),
				    json_integer((json_int_t)st->resumes_by_reason[r]));
	for (int k = 0; k < COORD_NR_WAIT_KINDS; k++)
		json_object_set_new(kinds, coord_wait_kind_name((enum coord_wait_kind)k),
				    json_integer((json_int_t)st->waits_by_kind[k]));
	return json_pack("{s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,"
			 "s:o,s:I,s:I,s:I,s:I}",
			 "waits_started", (json_int_t)st->waits_started,
			 "waits_ready", (json_int_t)st->waits_ready,
			 "waits_delivered", (json_int_t)st->waits_delivered,
			 "waits_dropped", (json_int_t)st->waits_dropped,
			 "waits_by_kind", kinds,
			 "handoffs", (json_int_t)st->handoffs,
			 "handoff_ready", (json_int_t)st->handoff_ready,
			 "handoff_busy", (json_int_t)st->handoff_busy,
			 "handoff_timeouts", (json_int_t)st->handoff_timeouts,
			 "aborts", (json_int_t)st->aborts,
			 "busy_by_reason", busy,
			 "pauses", (json_int_t)st->pauses,
			 "pause_errors", (json_int_t)st->pause_errors,
			 "offloads", (json_int_t)st->offloads,
			 "offload_errors", (json_int_t)st->offload_errors,
			 "resume_errors", (json_int_t)st->resume_errors,
			 "resumes_by_reason", res,
			 "paused_ns_total", (json_int_t)st->paused_ns_total,
			 "offloaded_ns_total", (json_int_t)st->offloaded_ns_total,
			 "last_delivery_ns", (json_int_t)st->last_delivery_ns,
			 "transitions", (json_int_t)st->transitions);
}

/* Label values for the guest link's rx_errors[] (VMNAP_E*). */
static const char *const link_reject_names[VMNAP_ERR_MAX + 1] = {
	[VMNAP_EMAGIC] = "bad_magic",
	[VMNAP_EVERSION] = "bad_version",
	[VMNAP_ETOOBIG] = "too_big",
	[VMNAP_ETRUNC] = "truncated",
	[VMNAP_ETYPE] = "bad_type",
	[VMNAP_ELEN] = "bad_length",
	[VMNAP_ECOUNT] = "bad_count",
	[VMNAP_EALIGN] = "unaligned_range",
	[VMNAP_EZERO] = "zero_range",
	[VMNAP_EOVERFLOW] = "overflowing_range",
	[VMNAP_ERANGE] = "outside_ram",
	[VMNAP_EFIELD] = "bad_field",
	[VMNAP_ESTATE] = "bad_state",
	[VMNAP_ERATE] = "rate_limit",
	[VMNAP_EINTERNAL] = "internal",
};

void vm_rejections_foreach(struct vm *vm,
			   void (*fn)(const char *reason, uint64_t n, void *arg), void *arg)
{
	if (vm->link) {
		struct guest_link_stats st;
		struct guest_link_listen_stats ls;

		guest_link_get_stats(vm->link, &st);
		for (unsigned int e = 1; e <= VMNAP_ERR_MAX; e++)
			if (link_reject_names[e])
				fn(link_reject_names[e], st.rx_errors[e], arg);
		fn("connect_rate", st.connects_refused, arg);
		fn("not_reading", st.tx_overflows, arg);
		guest_link_listen_get_stats(vm, &ls);
		fn("no_link", ls.no_link, arg);
	}
	if (vm->vsock) {
		struct vhost_vsock_stats vs;

		vhost_vsock_get_stats(vm->vsock, &vs);
		fn("vsock_unreserved_port", vs.unreserved_port, arg);
		fn("vsock_bad_packet", vs.bad_packets, arg);
		fn("vsock_bad_cid", vs.bad_cid, arg);
		fn("vsock_credit", vs.credit_violations, arg);
		fn("vsock_conn_limit", vs.conn_limit, arg);
		fn("vsock_bad_descriptor", vs.bad_descriptors, arg);
	}
}

uint64_t vm_control_events_suppressed(struct vm *vm)
{
	return vm->control ? vm->control->link_ev_rl.suppressed_total : 0;
}

static void rejection_json(const char *reason, uint64_t n, void *arg)
{
	json_object_set_new(arg, reason, json_integer((json_int_t)n));
}

/* The VM's own policy, else vmnapd.conf's (lazy unless set there); with
 * no settings at all (a test harness embedding this layer), the pager
 * library's default. */
int vm_restore(const struct vm *vm)
{
	if (vm->restore >= 0)
		return vm->restore;
	return vm->d->settings ? vm->d->settings->restore : PAGER_RESTORE_WORKING_SET;
}

int vm_set_restore(struct vm *vm, int how)
{
	if (how < -1 || how >= PAGER_RESTORES)
		return -EINVAL;
	vm->restore = how;
	if (vm->pager)
		pager_set_restore(vm->pager, (enum pager_restore)vm_restore(vm));
	return 0;
}

/* What the cost policy learned: the store's write speed, the waits. */
static json_t *learned_json(const struct coord *c)
{
	struct coord_learned l;
	json_t *waits = json_object();

	coord_get_learned(c, &l);
	for (int k = 0; k < COORD_NR_WAIT_KINDS; k++)
		json_object_set_new(waits, coord_wait_kind_name((enum coord_wait_kind)k),
				    json_pack("{s:i,s:o}", "samples", (int)l.samples[k],
					      "median_ns", l.samples[k] ?
					      json_integer((json_int_t)l.median_wait_ns[k]) : json_null()));
	return json_pack("{s:o,s:o}", "write_bps",
			 l.write_bps ? json_integer((json_int_t)l.write_bps) : json_null(),
			 "waits", waits);
}

json_t *vm_control_json(struct vm *vm)
{
	json_t *o = json_pack("{s:s,s:I}", "name", vm->name, "id", (json_int_t)vm->id);
	struct vm_control *ctl = vm->control;

	if (vm->coord) {
		struct coord_stats st;
		const struct coord_evidence *ev = coord_last_evidence(vm->coord);

		coord_get_stats(vm->coord, &st);
		json_object_set_new(o, "state", json_string(coord_state_name(coord_state(vm->coord))));
		json_object_set_new(o, "managed", json_boolean(coord_managed(vm->coord)));
		json_object_set_new(o, "waits_outstanding", json_integer(coord_nr_waits(vm->coord)));
		json_object_set_new(o, "counters", stats_json(&st));
		json_object_set_new(json_object_get(o, "counters"), "offload_cancels",
				    json_integer((json_int_t)st.offload_cancels));
		json_object_set_new(json_object_get(o, "counters"), "pager_errors",
				    json_integer((json_int_t)st.pager_errors));
		json_object_set_new(o, "policy", config_coord_to_json(coord_config(vm->coord)));
		json_object_set_new(o, "learned", learned_json(vm->coord));
		json_object_set_new(json_object_get(o, "counters"), "decisions",
				    json_pack("{s:I,s:I}", "offload", (json_int_t)st.decisions_offload,
					      "not", (json_int_t)st.decisions_not));
		json_object_set_new(json_object_get(o, "counters"), "resumes_lazy",
				    json_integer((json_int_t)st.resumes_lazy));
		json_object_set_new(json_object_get(o, "counters"), "wake_probes",
				    json_integer((json_int_t)st.wake_probes));
		json_object_set_new(o, "evidence", evidence_json(ev));
	} else {
		json_object_set_new(o, "state", json_string("UNCONTROLLED"));
		json_object_set_new(o, "managed", json_false());
	}
	if (vm->lost_err) {
		json_object_set_new(o, "state", json_string("LOST"));
		json_object_set_new(o, "error", json_string(vm->lost_error));
	}
	json_object_set_new(o, "restore",
			    json_string(pager_restore_name((enum pager_restore)vm_restore(vm))));
	if (vm->pause) {
		const char *why = vm_control_clock_refusal(vm->pause);

		json_object_set_new(o, "pause", json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:s,s:b,s:b,s:s?}",
			"backend", vm->pause->ops->name, "path", vm->pause->spec.path,
			"paused", vm->pause->paused,
			"pauses", (json_int_t)vm->pause->st.pauses,
			"resumes", (json_int_t)vm->pause->st.resumes,
			"errors", (json_int_t)vm->pause->st.errors,
			"guest_clock", vm->pause->ops->guest_clock_stops ? "stops" : "runs",
			"allow_clock_stop", vm->pause->spec.allow_clock_stop,
			"may_manage", why == NULL,
			"refusal", why));
	}
	if (vm->link) {
		struct guest_link_stats st;
		struct guest_doorbell_stats db;

		guest_link_get_stats(vm->link, &st);
		guest_doorbell_get_stats(vm, &db);
		json_object_set_new(o, "link", json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:o}", "state",
			guest_link_state_name(guest_link_state(vm->link)),
			"connects", (json_int_t)st.connects,
			"connects_refused", (json_int_t)st.connects_refused,
			"rx_bytes", (json_int_t)st.rx_bytes,
			"late_handoff_acks", (json_int_t)st.late_acks,
			"log_lines_suppressed", (json_int_t)st.log_suppressed,
			"doorbell", json_pack("{s:I,s:I,s:I,s:I,s:I,s:s?}",
					      "rings", (json_int_t)db.rings,
					      "answered", (json_int_t)db.answered,
					      "refused", (json_int_t)db.refused,
					      "failed", (json_int_t)db.failed,
					      "timeouts", (json_int_t)db.timeouts,
					      "last", db.last)));
	}
	if (vm->link || vm->vsock) {
		json_t *rej = json_object();

		vm_rejections_foreach(vm, rejection_json, rej);
		json_object_set_new(o, "rejections", rej);
	}
	if (ctl && vm->link) {
		json_t *l = json_object_get(o, "link");

		json_object_set_new(l, "last_handoff_rtt_ns",
				    json_integer((json_int_t)ctl->last_handoff_rtt_ns));
		json_object_set_new(l, "last_unquiesce_ns",
				    json_integer((json_int_t)ctl->last_unquiesce_ns));
		json_object_set_new(l, "free_reports", json_integer((json_int_t)ctl->free_reports));
		json_object_set_new(l, "events_suppressed",
				    json_integer((json_int_t)ctl->link_ev_rl.suppressed_total));
		if (ctl->link_desc[0])
			json_object_set_new(l, "via", json_string(ctl->link_desc));
	}
	if (vm->pager) {
		json_t *pj = pager_stats_json(vm->pager);

		/* re-adopted from the store a previous vmnapd left */
		json_object_set_new(o, "recovered",
				    json_boolean(json_is_true(json_object_get(pj, "recovered"))));
		json_object_set_new(o, "pager", pj);
		if (ctl)
			json_object_set_new(o, "memxtime_gib_s", json_real(vm_control_memxtime_gib_s(vm)));
	}
	if (vm_control_vmm_pid(vm)) {
		struct vmm_mem_sample smp;
		json_t *m = json_pack("{s:i}", "pid", (int)vm_control_vmm_pid(vm));

		/* sampled off the loop: smaps_rollup waits on the VMM's mmap lock */
		if (vm_control_vmm_mem(vm, &smp)) {
			if (smp.has_pss)
				json_object_set_new(m, "pss_bytes", json_integer((json_int_t)smp.pss_bytes));
			if (smp.has_cgroup)
				json_object_set_new(m, "cgroup_memory_bytes",
						    json_integer((json_int_t)smp.cgroup_bytes));
			json_object_set_new(m, "sample_age_ms",
					    json_integer((json_int_t)((now_ns() - smp.at_ns) / 1000000)));
		}
		json_object_set_new(o, "vmm", m);
	}
	if (vm->vsock) {
		struct vhost_vsock_stats vs;

		vhost_vsock_get_stats(vm->vsock, &vs);
		json_object_set_new(o, "vsock", json_pack("{s:b,s:i,s:I,s:I}",
			"front_end_connected", vhost_vsock_front_end_connected(vm->vsock),
			"connections", (int)vhost_vsock_nr_conns(vm->vsock),
			"residency_waits", (json_int_t)vs.residency_waits,
			"rx_ahead", (json_int_t)vs.rx_ahead_calls));
	}
	return o;
}
