// SPDX-License-Identifier: GPL-2.0-only
/* pause.c - pause backend dispatch: one thread per call; see pause.h. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
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
	pb->spec = *spec;
	snprintf(pb->subject, sizeof(pb->subject), "%s", subject ? subject : "pause");
	return pb;
}

void pause_free(struct pause_backend *pb)
{
	if (!pb)
		return;
	if (pb->busy)	/* bounded by the backend's timeout */
		pthread_join(pb->thread, NULL);
	if (pb->efd >= 0) {
		loop_del_fd(pb->loop, pb->efd);
		close(pb->efd);
	}
	free(pb);
}

static void *pause_thread(void *arg)
{
	struct pause_backend *pb = arg;
	uint64_t one = 1;

	pb->result = pb->op_pause ? pause_vm(pb) : pause_resume_vm(pb);
	if (write(pb->efd, &one, sizeof(one)) != sizeof(one))
		log_err(pb->subject, "pause: cannot signal completion: %s", strerror(errno));
	return NULL;
}

static void on_pause_done(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pause_backend *pb = arg;
	uint64_t v;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) != sizeof(v) || !pb->busy)
		return;
	pthread_join(pb->thread, NULL);
	pb->busy = false;
	pb->done(pb, pb->result, pb->done_arg);
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
	pb->op_pause = pause;
	pb->done = done;
	pb->done_arg = arg;
	pb->busy = true;
	err = pthread_create(&pb->thread, NULL, pause_thread, pb);
	if (err) {
		pb->busy = false;
		return -err;
	}
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
