// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_usock.c - vmnapd's unix socket helper (usock.c): what is at a
 * listener's path before and after it, with real sockets and files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"
#include "usock.h"

#define BACKLOG	4

static char dir[] = "/tmp/vmnap-usock-XXXXXX";
static char path[64];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "%s/s", dir);
	unlink(path);
	rmdir(path);
	return 0;
}

/* A socket file nobody listens on: bind, then close. */
static void make_stale_socket(const char *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

static void test_listen_mode_and_connect(void **state)
{
	struct usock_id id;
	struct stat st;
	int lfd, cfd, afd;

	(void)state;
	lfd = usock_listen(path, 0600, BACKLOG, NULL, &id);
	assert_true(lfd >= 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(st.st_ino == id.ino && st.st_dev == id.dev);
	assert_true(fcntl(lfd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
	cfd = usock_connect(path, true);
	assert_true(cfd >= 0);
	assert_true(fcntl(cfd, F_GETFL) & O_NONBLOCK);
	afd = accept(lfd, NULL, NULL);
	assert_true(afd >= 0);
	close(afd);
	close(cfd);
	close(lfd);
	assert_int_equal(usock_unlink(path, &id), 0);
	assert_int_equal(lstat(path, &st), -1);
}

static void test_stale_socket_replaced(void **state)
{
	int lfd;

	(void)state;
	make_stale_socket(path);
	assert_int_equal(usock_connect(path, false), -ECONNREFUSED);
	lfd = usock_listen(path, 0600, BACKLOG, NULL, NULL);
	assert_true(lfd >= 0);
	close(lfd);
	assert_int_equal(usock_unlink(path, NULL), 0);
}

/* A second daemon on the same run dir must not steal a live socket. */
static void test_live_socket_refused_and_kept(void **state)
{
	struct usock_id id;
	int lfd, cfd, afd;

	(void)state;
	lfd = usock_listen(path, 0600, BACKLOG, NULL, &id);
	assert_true(lfd >= 0);
	assert_int_equal(usock_listen(path, 0600, BACKLOG, NULL, NULL), -EADDRINUSE);
	/* the probe connection of the refused attempt: accept and drop it */
	afd = accept(lfd, NULL, NULL);
	if (afd >= 0)
		close(afd);
	cfd = usock_connect(path, false);
	assert_true(cfd >= 0);		/* the first listener still serves */
	afd = accept(lfd, NULL, NULL);
	assert_true(afd >= 0);
	close(afd);
	close(cfd);
	close(lfd);
	assert_int_equal(usock_unlink(path, &id), 0);
}

static void test_other_files_left_alone(void **state)
{
	char buf[16] = { 0 };
	struct stat st;
	int fd;

	(void)state;
	/* a regular file: refused, content intact */
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	assert_int_equal(usock_listen(path, 0600, BACKLOG, NULL, NULL), -EEXIST);
	assert_int_equal(usock_unlink(path, NULL), -ESTALE);
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	assert_string_equal(buf, "keep");
	unlink(path);
	/* a directory and a symlink: refused, still there */
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(usock_listen(path, 0600, BACKLOG, NULL, NULL), -EEXIST);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	rmdir(path);
	assert_int_equal(symlink("/nonexistent", path), 0);
	assert_int_equal(usock_listen(path, 0600, BACKLOG, NULL, NULL), -EEXIST);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	unlink(path);
}

/* Shutdown removes only the socket it bound, not one that replaced it. */
static void test_unlink_only_own_socket(void **state)
{
	struct usock_id id;
	int lfd, lfd2;

	(void)state;
	lfd = usock_listen(path, 0600, BACKLOG, NULL, &id);
	assert_true(lfd >= 0);
	close(lfd);
	unlink(path);
	lfd2 = usock_listen(path, 0600, BACKLOG, NULL, NULL);
	assert_true(lfd2 >= 0);
	assert_int_equal(usock_unlink(path, &id), -ESTALE);
	assert_true(usock_connect(path, false) >= 0);
	close(lfd2);
	assert_int_equal(usock_unlink(path, NULL), 0);
}

static void test_bad_paths(void **state)
{
	char longp[200];

	(void)state;
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	assert_int_equal(usock_listen(longp, 0600, BACKLOG, NULL, NULL), -ENAMETOOLONG);
	assert_int_equal(usock_connect(longp, false), -ENAMETOOLONG);
	assert_int_equal(usock_listen("", 0600, BACKLOG, NULL, NULL), -EINVAL);
	assert_int_equal(usock_connect(path, false), -ENOENT);
	assert_string_equal(usock_listen_strerror(-EADDRINUSE), "another process listens there");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_listen_mode_and_connect, setup),
		cmocka_unit_test_setup(test_stale_socket_replaced, setup),
		cmocka_unit_test_setup(test_live_socket_refused_and_kept, setup),
		cmocka_unit_test_setup(test_other_files_left_alone, setup),
		cmocka_unit_test_setup(test_unlink_only_own_socket, setup),
		cmocka_unit_test_setup(test_bad_paths, setup),
	};
	int rc;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	log_set_level(LOG_WARN);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
