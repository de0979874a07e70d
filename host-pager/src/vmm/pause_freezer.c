// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_freezer.c - freeze the VMM's cgroup (works for any VMM).
 *
 * cgroup v2: write "1" / "0" to <dir>/cgroup.freeze; frozen once
 * <dir>/cgroup.events says "frozen 1".  cgroup v1: write "FROZEN" /
 * "THAWED" to <dir>/freezer.state; frozen once it reads back "FROZEN"
 * (it says "FREEZING" meanwhile).  The version is chosen by which file the
 * directory has.  Completion is polled every FREEZER_POLL_US up to the
 * backend's timeout; a freeze that does not complete is undone and fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pause.h"

#define FREEZER_POLL_US		1000
#define NS_PER_MS		1000000ull
#define FREEZER_FILE_MAX	512

static int freezer_file(struct pause_backend *pb, const char *name, char *out, size_t n)
{
	if ((size_t)snprintf(out, n, "%s/%s", pb->spec.path, name) >= n)
		return -ENAMETOOLONG;
	return 0;
}

static bool is_v2(struct pause_backend *pb)
{
	char p[PATH_MAX + 32];

	return !freezer_file(pb, "cgroup.freeze", p, sizeof(p)) && access(p, F_OK) == 0;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t w;
	int err = 0;

	if (fd < 0)
		return -errno;
	w = write(fd, val, strlen(val));
	if (w < 0)
		err = -errno;
	else if ((size_t)w != strlen(val))
		err = -EIO;
	close(fd);
	return err;
}

static int read_file(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -errno;
	buf[r] = '\0';
	return 0;
}

/* Is the cgroup in the wanted state yet?  1 yes, 0 not yet, -errno. */
static int freezer_settled(struct pause_backend *pb, bool frozen)
{
	char p[PATH_MAX + 32], buf[FREEZER_FILE_MAX];
	int err;

	if (is_v2(pb)) {
		err = freezer_file(pb, "cgroup.events", p, sizeof(p));
		if (!err)
			err = read_file(p, buf, sizeof(buf));
		if (err)
			return err;
		return strstr(buf, frozen ? "frozen 1" : "frozen 0") != NULL;
	}
	err = freezer_file(pb, "freezer.state", p, sizeof(p));
	if (!err)
		err = read_file(p, buf, sizeof(buf));
	if (err)
		return err;
	return !strncmp(buf, frozen ? "FROZEN" : "THAWED", strlen("FROZEN"));
}

static int freezer_set(struct pause_backend *pb, bool frozen)
{
	char p[PATH_MAX + 32];
	bool v2 = is_v2(pb);
	uint64_t deadline = now_ns() + (uint64_t)pause_timeout_ms(pb) * NS_PER_MS;
	int err;

	err = freezer_file(pb, v2 ? "cgroup.freeze" : "freezer.state", p, sizeof(p));
	if (!err)
		err = write_file(p, v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED"));
	if (err)
		return err;
	for (;;) {
		struct timespec ts = { 0, FREEZER_POLL_US * 1000L };
		int r = freezer_settled(pb, frozen);

		if (r < 0)
			return r;
		if (r)
			return 0;
		if (now_ns() >= deadline)
			break;
		nanosleep(&ts, NULL);
	}
	if (frozen) {	/* do not leave it half frozen */
		log_warn(pb->subject, "freezer: %s did not freeze in time: thawing", pb->spec.path);
		write_file(p, v2 ? "0" : "THAWED");
	}
	return -ETIMEDOUT;
}

static int freezer_probe(struct pause_backend *pb)
{
	char p[PATH_MAX + 32];
	int err;

	if (is_v2(pb))
		return 0;
	err = freezer_file(pb, "freezer.state", p, sizeof(p));
	if (err)
		return err;
	return access(p, W_OK) == 0 ? 0 : -errno;
}

static int freezer_pause(struct pause_backend *pb)
{
	return freezer_set(pb, true);
}

static int freezer_resume(struct pause_backend *pb)
{
	return freezer_set(pb, false);
}

const struct pause_backend_ops pause_freezer_ops = {
	.name = "freezer",
	.guest_clock_stops = false,
	.probe = freezer_probe,
	.pause = freezer_pause,
	.resume = freezer_resume,
};
