// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause.c - pause backend dispatch: one worker thread per backend; see
 * pause.h.
 *
 * The loop never waits for the worker: it queues a call under @lock and
 * reads the result when the worker's eventfd says it is done.  Released
 * (the VM deleted, vmnapd stopping, a wedged VMM), a backend is handed to
 * its worker, which finishes the call in hand, resumes the VM if asked and
 * frees the backend.  A backend that never had a worker (only blocking
 * calls) is finished by its owner, or, for a last resume, by a worker
 * started for it.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pause.h"
#include "usock.h"

#define NS_PER_MS	1000000ull
#define RELEASED_POLL_NS	(10 * NS_PER_MS)

/* Released backends whose thread has not finished yet. */
static atomic_uint released_live;

static const struct {
	const char *name;
	const struct pause_backend_ops *ops;
} kinds[PAUSE_NR_KINDS] = {
	[PAUSE_QMP] = { "qmp", &pause_qmp_ops },
	[PAUSE_FREEZER] = { "freezer", &pause_freezer_ops },
	[PAUSE_FIRECRACKER] = { "firecracker", &pause_firecracker_ops },
	[PAUSE_CHV] = { "chv", &pause_chv_ops },
};

int pause_kind_parse(const char *s)
{
	for (int k = 0; k < PAUSE_NR_KINDS; k++)
		if (!strcmp(s, kinds[k].name))
			return k;
	return -1;
}

const char *pause_kind_name(enum pause_kind k)
{
	return (unsigned int)k < PAUSE_NR_KINDS ? kinds[k].name : "unknown";
}

struct pause_backend *pause_new(const struct pause_spec *spec, const char *subject)
{
	struct pause_backend *pb;

	if ((unsigned int)spec->kind >= PAUSE_NR_KINDS || !spec->path[0]) {
		errno = EINVAL;
		return NULL;
	}
	pb = calloc(1, sizeof(*pb));
	if (!pb) {
		errno = ENOMEM;
		return NULL;
	}
	pb->ops = kinds[spec->kind].ops;
	pb->efd = -1;
	pthread_mutex_init(&pb->lock, NULL);
	pthread_cond_init(&pb->wake, NULL);
	pb->spec = *spec;
	snprintf(pb->subject, sizeof(pb->subject), "%s", subject ? subject : "pause");
	return pb;
}

static void pause_destroy(struct pause_backend *pb)
{
	if (pb->ops->close)
		pb->ops->close(pb);
	if (pb->efd >= 0)
		close(pb->efd);
	pthread_cond_destroy(&pb->wake);
	pthread_mutex_destroy(&pb->lock);
	free(pb);
}

/* The owner let go: resume if asked and still paused, then free. */
static void pause_orphan_finish(struct pause_backend *pb)
{
	if (pb->resume_on_release && pb->paused) {
		log_warn(pb->subject, "%s: resuming the VM its owner let go", pb->ops->name);
		pause_resume_vm(pb);
	}
	log_debug(pb->subject, "%s: released backend finished", pb->ops->name);
	pause_destroy(pb);
	atomic_fetch_sub(&released_live, 1);
}

unsigned int pause_released_wait(uint32_t ms)
{
	uint64_t deadline = now_ns() + (uint64_t)ms * NS_PER_MS;
	const struct timespec ts = { .tv_nsec = RELEASED_POLL_NS };

	while (atomic_load(&released_live) && now_ns() < deadline)
		nanosleep(&ts, NULL);
	return atomic_load(&released_live);
}

static void *pause_worker(void *arg);

/* Run @fn(@arg) on a detached thread; 0 or an errno. */
static int detached_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int err = pthread_attr_init(&attr);

	if (err)
		return err;
	err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!err)
		err = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return err;
}

void pause_release(struct pause_backend *pb, bool resume)
{
	bool in_flight;
	int err;

	if (!pb)
		return;
	atomic_fetch_add(&released_live, 1);	/* until pause_orphan_finish() */
	if (pb->efd >= 0 && pb->loop)
		loop_del_fd(pb->loop, pb->efd);	/* no completion reaches the owner */
	if (!pb->worker && resume && pb->paused) {
		/* paused by a blocking call: a worker resumes it, off the loop */
		err = detached_thread(pause_worker, pb);
		if (err)
			log_warn(pb->subject, "no thread for the last resume (%s): resuming here",
				 strerror(err));
		pb->worker = !err;
	}
	pthread_mutex_lock(&pb->lock);
	pb->resume_on_release = resume;
	if (pb->worker) {
		/* the worker finishes its call, then frees @pb: not ours after unlock */
		pb->orphaned = true;
		in_flight = pb->busy && !pb->call_done;
		pthread_cond_signal(&pb->wake);
		if (in_flight)
			log_info(pb->subject, "%s call still in flight: its worker finishes it",
				 pb->ops->name);
		pthread_mutex_unlock(&pb->lock);
		return;
	}
	pthread_mutex_unlock(&pb->lock);
	pause_orphan_finish(pb);
}

void pause_free(struct pause_backend *pb)
{
	pause_release(pb, false);
}

/*
 * The backend's worker: runs each call pause_start() queues, signals the
 * loop through @efd, and waits for the next.  Released, it finishes the
 * call in hand, then the backend.  Nobody joins it: a worker the scheduler
 * is slow to run again after its signal holds up no one.
 */
static void *pause_worker(void *arg)
{
	struct pause_backend *pb = arg;
	uint64_t one = 1;
	bool orphaned;
	int result;

	/* a label for top -H and perf; set here, as the thread is detached */
	pthread_setname_np(pthread_self(), "vmnap-pause");
	pthread_mutex_lock(&pb->lock);
	for (;;) {
		while (!pb->queued && !pb->orphaned)
			pthread_cond_wait(&pb->wake, &pb->lock);
		if (!pb->queued)
			break;		/* released with nothing asked */
		pb->queued = false;
		pthread_mutex_unlock(&pb->lock);
		result = pb->op_pause ? pause_vm(pb) : pause_resume_vm(pb);
		pthread_mutex_lock(&pb->lock);
		pb->result = result;
		pb->call_done = true;
		orphaned = pb->orphaned;
		pthread_mutex_unlock(&pb->lock);
		/* unlocked: the loop, woken, must not wait for us to run again;
		 * @efd is closed by this thread only (pause_destroy) */
		if (!orphaned && write(pb->efd, &one, sizeof(one)) != sizeof(one))
			log_err(pb->subject, "pause: cannot signal completion: %s",
				strerror(errno));
		pthread_mutex_lock(&pb->lock);
	}
	pthread_mutex_unlock(&pb->lock);
	pause_orphan_finish(pb);
	return NULL;
}

static void on_pause_done(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pause_backend *pb = arg;
	bool done;
	uint64_t v;
	int result;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v) || !pb->busy)
		return;
	pthread_mutex_lock(&pb->lock);	/* orders the worker's writes before ours */
	done = pb->call_done;
	result = pb->result;
	pthread_mutex_unlock(&pb->lock);
	if (!done)
		return;
	pb->busy = false;
	pb->done(pb, result, pb->done_arg);
}

int pause_start(struct pause_backend *pb, struct loop *l, bool pause, pause_done_fn done,
		void *arg)
{
	int err;

	if (pb->busy)
		return -EBUSY;
	if (pb->efd < 0) {
		pb->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (pb->efd < 0)
			return -errno;
		err = loop_add_fd(l, pb->efd, EPOLLIN, on_pause_done, pb);
		if (err) {
			close(pb->efd);
			pb->efd = -1;
			return err;
		}
		pb->loop = l;
	}
	if (!pb->worker) {
		err = detached_thread(pause_worker, pb);
		if (err)
			return -err;
		pb->worker = true;
	}
	pthread_mutex_lock(&pb->lock);
	pb->op_pause = pause;
	pb->done = done;
	pb->done_arg = arg;
	pb->call_done = false;
	pb->queued = true;
	pthread_cond_signal(&pb->wake);
	pthread_mutex_unlock(&pb->lock);
	pb->busy = true;
	return 0;
}

int pause_vm(struct pause_backend *pb)
{
	uint64_t t0 = now_ns();
	int err;

	pb->st.cmd_sent_ns = 0;
	err = pb->ops->pause(pb);

	pb->st.last_pause_ns = now_ns() - t0;
	if (err) {
		pb->st.errors++;
		log_err(pb->subject, "%s pause via %s failed: %s", pb->ops->name,
			pb->spec.path, strerror(-err));
		return err;
	}
	pb->st.pauses++;
	pb->st.pause_cmd_sent_ns = pb->st.cmd_sent_ns ? pb->st.cmd_sent_ns : t0;
	pb->st.clock_stopped_ns = t0 + pb->st.last_pause_ns;
	pb->st.clock_restarted_ns = 0;
	pb->paused = true;
	log_debug(pb->subject, "%s paused in %llu us", pb->ops->name,
		  (unsigned long long)(pb->st.last_pause_ns / 1000));
	return 0;
}

int pause_resume_vm(struct pause_backend *pb)
{
	uint64_t t0 = now_ns();
	int err;

	pb->st.cmd_sent_ns = 0;
	err = pb->ops->resume(pb);

	pb->st.last_resume_ns = now_ns() - t0;
	if (err) {
		pb->st.errors++;
		log_err(pb->subject, "%s resume via %s failed: %s", pb->ops->name,
			pb->spec.path, strerror(-err));
		return err;
	}
	pb->st.resumes++;
	pb->st.clock_restarted_ns = pb->st.cmd_sent_ns ? pb->st.cmd_sent_ns : t0;
	pb->st.resume_done_ns = t0 + pb->st.last_resume_ns;
	pb->paused = false;
	if (pb->ops->guest_clock_stops && pb->st.clock_stopped_ns)
		log_debug(pb->subject, "%s: guest clock stood still %llu..%llu us",
			  pb->ops->name,
			  (unsigned long long)((pb->st.clock_restarted_ns -
						pb->st.clock_stopped_ns) / 1000),
			  (unsigned long long)((pb->st.resume_done_ns -
						pb->st.pause_cmd_sent_ns) / 1000));
	log_debug(pb->subject, "%s resumed in %llu us", pb->ops->name,
		  (unsigned long long)(pb->st.last_resume_ns / 1000));
	return 0;
}

uint64_t pause_clock_stopped_ns(const struct pause_backend *pb, uint64_t fallback)
{
	uint64_t lo, hi;

	if (!pb->ops->guest_clock_stops || !pb->st.clock_stopped_ns ||
	    pb->st.clock_restarted_ns < pb->st.clock_stopped_ns ||
	    pb->st.resume_done_ns < pb->st.clock_restarted_ns)
		return fallback;
	lo = pb->st.clock_restarted_ns - pb->st.clock_stopped_ns;
	hi = pb->st.resume_done_ns - pb->st.pause_cmd_sent_ns;
	return lo + (hi - lo) / 2;
}
