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
 *
 * The v1 freezer's static key.  Since Linux 6.1 the first v1 freezer
 * cgroup that starts freezing turns a kernel static key on
 * (freezer_active) and the last one to thaw turns it off; each switch
 * patches kernel text on every CPU.  With one VM frozen at a time, every
 * freeze and every thaw pays for it: 1.4-2 ms each on this project's
 * build machine (itself a VM, where the cross-CPU calls are dear),
 * against 0.1-0.3 ms with the key already on.  So while any v1 freezer
 * backend of this process is open, it keeps one empty cgroup of its own
 * frozen at the root of the freezer hierarchy, HOLD_PREFIX<pid>: the key
 * stays on and a VM's freeze and thaw only count.  The cgroup holds no
 * task; it is removed when the last backend closes, and one left behind
 * by a process that is gone (killed) is removed by the next one.  If it
 * cannot be made (no permission, the hierarchy not found) the backend
 * works as before and says so once.  The v2 freezer has no such key.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- the v1 freezer's static key (see the top of this file) ---------- */

#define HOLD_PREFIX	"vmnap-hold."

static struct {
	pthread_mutex_t lock;
	unsigned int refs;	/* backends holding it */
	bool made;		/* @path exists and is frozen */
	bool said;		/* why it could not be made was logged */
	char path[PATH_MAX];
} hold = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The mount point of the v1 cgroup hierarchy with the freezer controller
 * that holds @dir (the longest that is a prefix of it), into @root.
 */
static int freezer_root(const char *dir, char *root, size_t n)
{
	char line[4096], real[PATH_MAX];
	size_t best = 0;
	FILE *f;

	if (!realpath(dir, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64], opts[1024];
		const char *sep = strstr(line, " - ");
		size_t len;
		char *tok, *save;
		bool freezer = false;

		/* id parent major:minor root MOUNT-POINT ... - FSTYPE SOURCE OPTS */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", fstype, opts) != 2 ||
		    strcmp(fstype, "cgroup") || strchr(mnt, '\\'))
			continue;	/* not v1, or an escaped (odd) name */
		for (tok = strtok_r(opts, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			freezer |= !strcmp(tok, "freezer");
		len = strlen(mnt);
		if (!freezer || len <= best || strncmp(real, mnt, len) ||
		    (real[len] != '/' && real[len]))
			continue;
		if (len >= n)
			continue;
		memcpy(root, mnt, len + 1);
		best = len;
	}
	fclose(f);
	return best ? 0 : -ENOENT;
}

/* Remove the holds of processes that are gone (their cgroups are empty). */
static void hold_sweep(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end, p[PATH_MAX];
		long pid;

		if (strncmp(e->d_name, HOLD_PREFIX, strlen(HOLD_PREFIX)))
			continue;
		pid = strtol(e->d_name + strlen(HOLD_PREFIX), &end, 10);
		if (*end || pid <= 0 || pid == getpid() ||
		    !(kill((pid_t)pid, 0) < 0 && errno == ESRCH))
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", root, e->d_name) < sizeof(p) &&
		    !rmdir(p))
			log_info("pause", "freezer: removed %s, left by a process that is gone", p);
	}
	closedir(d);
}

static int hold_make_locked(struct pause_backend *pb)
{
	char root[PATH_MAX], state[PATH_MAX + 32];
	int err = freezer_root(pb->spec.path, root, sizeof(root));

	if (err)
		return err;
	hold_sweep(root);
	if ((size_t)snprintf(hold.path, sizeof(hold.path), "%s/" HOLD_PREFIX "%d", root,
			     (int)getpid()) >= sizeof(hold.path))
		return -ENAMETOOLONG;
	if (mkdir(hold.path, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(state, sizeof(state), "%s/freezer.state", hold.path);
	err = write_file(state, "FROZEN");
	if (err) {
		rmdir(hold.path);
		return err;
	}
	log_info(pb->subject, "freezer: %s kept frozen (empty) while v1 freezer backends are "
		 "open: the kernel's freezer key stays on, a freeze or thaw patches no code",
		 hold.path);
	return 0;
}

static void hold_get(struct pause_backend *pb)
{
	int err = 0;

	if (pb->key_held)
		return;
	pthread_mutex_lock(&hold.lock);
	if (!hold.made) {
		err = hold_make_locked(pb);
		hold.made = !err;
	}
	if (!err) {
		hold.refs++;
		pb->key_held = true;
	} else if (!hold.said) {
		hold.said = true;
		log_info(pb->subject, "freezer: no frozen cgroup of our own to keep the kernel's "
			 "freezer key on (%s): every freeze and thaw patches kernel code, "
			 "about 1.5 ms more each on a VM host", strerror(-err));
	}
	pthread_mutex_unlock(&hold.lock);
}

static void freezer_close(struct pause_backend *pb)
{
	if (!pb->key_held)
		return;
	pb->key_held = false;
	pthread_mutex_lock(&hold.lock);
	if (!--hold.refs && hold.made) {
		if (rmdir(hold.path) < 0)
			log_warn(pb->subject, "freezer: cannot remove %s: %s", hold.path,
				 strerror(errno));
		hold.made = false;
	}
	pthread_mutex_unlock(&hold.lock);
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
	if (access(p, W_OK) < 0)
		return -errno;
	hold_get(pb);
	return 0;
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
	.close = freezer_close,
};
