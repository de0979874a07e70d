// SPDX-License-Identifier: GPL-2.0-only
/* usock.c - see usock.h. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "usock.h"

static int usock_addr(const char *path, struct sockaddr_un *sa)
{
	size_t n;

	if (!path || !path[0])
		return -EINVAL;
	n = strlen(path);
	if (n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

/*
 * Make @sa's path free for bind(2): absent, or a stale socket, which is
 * removed.  A live socket (the probe connects; a listener sees it as a
 * connection that closes at once) or any other file is left alone.
 */
static int usock_clear_stale(const struct sockaddr_un *sa, const char *subject)
{
	struct stat st;
	int fd, err;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	err = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ? errno : 0;
	close(fd);
	if (err == 0 || err == EAGAIN || err == EINPROGRESS)
		return -EADDRINUSE;
	if (err == ENOENT)
		return 0;		/* removed meanwhile */
	if (err != ECONNREFUSED)
		return -err;
	log_info(subject, "removing stale socket %s", sa->sun_path);
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int usock_listen(const char *path, mode_t mode, int backlog,
		 const char *subject, struct usock_id *id)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, err;

	err = usock_addr(path, &sa);
	if (!err)
		err = usock_clear_stale(&sa, subject);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	/* connect(2) is refused until listen(2): nobody gets in before chmod */
	if (chmod(path, mode) < 0 || lstat(path, &st) < 0 ||
	    listen(fd, backlog) < 0) {
		err = -errno;
		close(fd);
		unlink(path);
		return err;
	}
	if (id) {
		id->dev = st.st_dev;
		id->ino = st.st_ino;
		id->ctime = st.st_ctim;
	}
	return fd;
}

const char *usock_listen_strerror(int err)
{
	switch (err) {
	case -EEXIST:
		return "the path exists and is not a socket (left alone)";
	case -EADDRINUSE:
		return "another process listens there";
	default:
		return strerror(-err);
	}
}

int usock_unlink(const char *path, const struct usock_id *id)
{
	struct stat st;

	if (!path || !path[0] || lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode) ||
	    (id && (st.st_dev != id->dev || st.st_ino != id->ino ||
		    st.st_ctim.tv_sec != id->ctime.tv_sec ||
		    st.st_ctim.tv_nsec != id->ctime.tv_nsec)))
		return -ESTALE;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int usock_connect(const char *path, bool nonblock)
{
	struct sockaddr_un sa;
	int fd, err;

	err = usock_addr(path, &sa);
	if (err)
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}
