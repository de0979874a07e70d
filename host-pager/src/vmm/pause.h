/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pause.h - pause backends: stop and continue a VM's vCPUs through its VMM.
 *
 *   qmp          QEMU QMP "stop" / "cont" on the VM's QMP unix socket
 *   freezer      cgroup freezer of the VMM's cgroup: v2 cgroup.freeze,
 *                v1 freezer.state (chosen by which file the directory has)
 *   firecracker  Firecracker API socket: PATCH /vm {"state":"Paused"|"Resumed"}
 *   chv          Cloud Hypervisor API socket: PUT /api/v1/vm.pause|vm.resume
 *
 * The backends' calls are blocking and bounded by the backend's timeout
 * (default PAUSE_DEFAULT_TIMEOUT_MS).  vmnapd uses them through
 * pause_start(), which runs the call on the backend's worker thread (one
 * per backend, started at the first call, idle between calls) and reports
 * back on the loop: the loop must keep running while QEMU stops, because
 * QEMU's "stop" waits for vmnapd's own vhost-user device to answer
 * GET_VRING_BASE (a synchronous call would deadlock until the timeout).
 * A VMM that does not answer in time is an error (-ETIMEDOUT), reported
 * once with context here.  Everything the VMM answers is parsed with
 * jansson and checked.
 *
 * Guest time: the freezer and Firecracker only stop the vCPU threads, the
 * guest's clock source (TSC, kvm-clock; QEMU's virtual clock under TCG)
 * keeps counting, so the guest's clocks and timers jump to the right time
 * on resume.  QEMU "stop" stops its virtual clock and, under KVM, saves
 * and restores kvm-clock; Cloud Hypervisor's pause saves and restores
 * kvm-clock likewise: the guest's clocks stand still while paused
 * (guest_clock_stops).  vm_control tells the guest module how long, so it
 * steps CLOCK_REALTIME; CLOCK_MONOTONIC timers still fire late by the
 * time paused, so such a backend is refused for a managed VM unless the
 * operator accepts it (allow_clock_stop).
 */
#ifndef VMNAP_PAUSE_H
#define VMNAP_PAUSE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <pthread.h>

#include "loop.h"

#define PAUSE_DEFAULT_TIMEOUT_MS	5000
#define PAUSE_REPLY_MAX			65536	/* bytes of one VMM reply */

enum pause_kind {
	PAUSE_QMP = 0,
	PAUSE_FREEZER,
	PAUSE_FIRECRACKER,
	PAUSE_CHV,
	PAUSE_NR_KINDS,
};

struct pause_spec {
	enum pause_kind kind;
	char path[PATH_MAX];	/* socket, or cgroup directory */
	uint32_t timeout_ms;	/* 0: PAUSE_DEFAULT_TIMEOUT_MS */
	/* The operator accepts a backend that stops the guest's clock for a
	 * managed VM (its guest timers run late by the time paused). */
	bool allow_clock_stop;
};

struct pause_stats {
	uint64_t pauses, resumes, errors;
	uint64_t last_pause_ns, last_resume_ns;	/* duration of the last call */
	/*
	 * When the guest's clock stood still, bounded from the calls
	 * (monotonic ns): it stopped after the pause command was sent
	 * (pause_cmd_sent_ns: the call's start, or cmd_sent_ns when the
	 * backend set it, e.g. QMP after its greeting and capabilities
	 * exchange) and before the pause call returned (clock_stopped_ns); it
	 * restarted after the resume command was sent (clock_restarted_ns)
	 * and before the resume call returned (resume_done_ns).  The estimate
	 * is the middle of the two bounds: on this host under TCG the lower
	 * bound undershot by about 0.7 ms per pause and the calls' starts
	 * overshot by about 1 ms (QEMU works between reading "stop" and
	 * stopping the clock, and between restarting it and answering "cont":
	 * parking vCPUs, the vhost-user round trips), errors that add up over
	 * many pauses.
	 */
	uint64_t cmd_sent_ns;		/* set by a backend during a call; 0: not */
	uint64_t pause_cmd_sent_ns, clock_stopped_ns;
	uint64_t clock_restarted_ns, resume_done_ns;
};

struct pause_backend;

struct pause_backend_ops {
	const char *name;
	/* The guest's clocks stand still while paused (see above, coord.h). */
	bool guest_clock_stops;
	/* Check the target exists and has the right kind; -errno. */
	int (*probe)(struct pause_backend *pb);
	int (*pause)(struct pause_backend *pb);
	int (*resume)(struct pause_backend *pb);
	/* Optional: undo what probe set up, when the backend is freed. */
	void (*close)(struct pause_backend *pb);
};

typedef void (*pause_done_fn)(struct pause_backend *pb, int err, void *arg);

struct pause_backend {
	const struct pause_backend_ops *ops;
	struct pause_spec spec;
	char subject[96];		/* the caller's log subject, truncated */
	bool paused;
	bool key_held;		/* freezer v1: holds the kernel's static key (pause_freezer.c) */
	pid_t peer_pid;		/* the VMM, when the socket told (SO_PEERCRED), else 0 */
	struct pause_stats st;	/* written by the worker while busy */
	/* pause_start(): one call in flight at a time, on the backend's worker */
	struct loop *loop;
	int efd;		/* eventfd: the call is done; -1 until first use */
	bool worker;		/* the worker thread was started (pause.c) */
	bool busy;		/* a call was queued, its completion not yet read */
	/* shared with the worker: under @lock */
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* a call is queued, or the backend released */
	bool queued;		/* a call waits for the worker */
	bool op_pause;
	bool call_done;		/* the queued call returned; @result is its */
	bool orphaned;		/* released: the worker frees the backend */
	bool resume_on_release;
	int result;
	pause_done_fn done;
	void *done_arg;
};

extern const struct pause_backend_ops pause_qmp_ops;
extern const struct pause_backend_ops pause_freezer_ops;
extern const struct pause_backend_ops pause_firecracker_ops;
extern const struct pause_backend_ops pause_chv_ops;

/* "qmp", "freezer", "firecracker", "chv"; -1 when unknown. */
int pause_kind_parse(const char *s);
const char *pause_kind_name(enum pause_kind k);

/* A backend for @spec; NULL with errno (EINVAL, ENOMEM). */
struct pause_backend *pause_new(const struct pause_spec *spec, const char *subject);
/*
 * Let go of @pb without waiting: a call in flight finishes on its own
 * thread, which then frees @pb; its done callback is not called.  With
 * @resume, a VM left paused (by that call or before) is resumed first, off
 * the loop.  pause_free() is pause_release(pb, false).
 */
void pause_release(struct pause_backend *pb, bool resume);
void pause_free(struct pause_backend *pb);
/* Wait up to @ms for released backends' threads (at exit); how many are
 * still running. */
unsigned int pause_released_wait(uint32_t ms);
/*
 * How long the guest's clock stood still in the last pause/resume cycle
 * (the middle of the bounds above); @fallback when the backend's clock
 * runs or the calls were not both timed.
 */
uint64_t pause_clock_stopped_ns(const struct pause_backend *pb, uint64_t fallback);
/* Stop / continue the vCPUs, blocking; -errno, reported once with context. */
int pause_vm(struct pause_backend *pb);
int pause_resume_vm(struct pause_backend *pb);
/*
 * The same without blocking @l: @done(pb, err, arg) runs on the loop when
 * the call finished.  -EBUSY while a call is in flight, -errno if the
 * thread cannot start (then @done is not called).
 */
int pause_start(struct pause_backend *pb, struct loop *l, bool pause, pause_done_fn done,
		void *arg);

/* ---- helpers shared by the backends (pause_util.c) ---- */

/* Connect to unix socket @path by @deadline_ns (CLOCK_MONOTONIC) without
 * ever blocking past it (a full backlog is retried until then); the fd is
 * non-blocking.  -ETIMEDOUT, -errno. */
int pause_unix_connect(const char *path, uint64_t deadline_ns);
/* Milliseconds left until @deadline_ns, 0 if passed. */
int pause_ms_left(uint64_t deadline_ns);
uint32_t pause_timeout_ms(const struct pause_backend *pb);
/* REST over a unix socket with libcurl: @method @url_path with JSON @body
 * (NULL: none); *@status gets the HTTP status, @reply (may be NULL) the
 * body, NUL-terminated, truncated to @reply_len - 1.  -errno on transport
 * failure. */
int pause_http(struct pause_backend *pb, const char *method, const char *url_path,
	       const char *body, long *status, char *reply, size_t reply_len);

#endif
