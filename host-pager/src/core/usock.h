/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * usock.h - unix stream sockets for vmnapd's listeners and clients.
 *
 * Every socket vmnapd listens on (api.sock, mem.sock, pager-debug.sock,
 * the vhost-user socket, hybrid <uds>_<port>) is made the same way:
 *   - an existing file at the path is removed only when it is a stale
 *     socket (a probe connect is refused); a live socket gives
 *     -EADDRINUSE (another vmnapd, or another VM's listener) and any other
 *     kind of file -EEXIST: neither is touched;
 *   - the socket gets its mode (0600) before listen(2), and connect(2) is
 *     refused until listen(2), so nobody gets in with a wider mode;
 *   - on shutdown it is unlinked only if the path still names the socket
 *     we bound (not a file that replaced it meanwhile).
 */
#ifndef VMNAP_USOCK_H
#define VMNAP_USOCK_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

/*
 * Identity of a bound socket file, for usock_unlink().  An inode number
 * is reused as soon as its file is removed, so the change time (set by
 * our own chmod) is part of it.
 */
struct usock_id {
	dev_t dev;
	ino_t ino;
	struct timespec ctime;
};

/*
 * Listen on @path (non-blocking, close-on-exec) with file mode @mode.
 * @subject names the owner in the log line about a removed stale socket.
 * Returns the fd, or -ENAMETOOLONG, -EEXIST, -EADDRINUSE, -errno.
 * @id (may be NULL) receives the bound file's identity.
 */
int usock_listen(const char *path, mode_t mode, int backlog,
		 const char *subject, struct usock_id *id);

/* A phrase for a usock_listen() error, for the caller's log line. */
const char *usock_listen_strerror(int err);

/*
 * Unlink @path if it is still the socket @id describes (any socket when
 * @id is NULL).  0 when removed or absent, -ESTALE when another file took
 * its place (left alone), -errno when unlink(2) failed.
 */
int usock_unlink(const char *path, const struct usock_id *id);

/*
 * Connect to @path; @nonblock sets O_NONBLOCK on the connected fd (a unix
 * stream connect completes at once or fails, -EAGAIN when the backlog is
 * full).  Returns the fd or -errno (-ENAMETOOLONG, -ENOENT, -ECONNREFUSED).
 */
int usock_connect(const char *path, bool nonblock);

#endif
