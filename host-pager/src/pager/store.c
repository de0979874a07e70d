// SPDX-License-Identifier: GPL-2.0-only
/* store.c - the per-VM page store file; see store.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"

int store_open(struct store *s, const char *dir, const char *vm_name,
	       uint64_t size, bool direct)
{
	int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
	int n;

	s->fd = -1;
	n = snprintf(s->path, sizeof(s->path), "%s/%s.store", dir, vm_name);
	if (n < 0 || (size_t)n >= sizeof(s->path))
		return -ENAMETOOLONG;
	s->direct = false;
	if (direct) {
		s->fd = open(s->path, flags | O_DIRECT, 0600);
		if (s->fd >= 0)
			s->direct = true;
		else if (errno != EINVAL)
			return -errno;
	}
	if (s->fd < 0) {
		s->fd = open(s->path, flags, 0600);
		if (s->fd < 0)
			return -errno;
	}
	if (ftruncate(s->fd, (off_t)size) < 0) {
		int err = -errno;

		store_close(s);
		return err;
	}
	return 0;
}

void store_close(struct store *s)
{
	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	unlink(s->path);
}

int store_read(struct store *s, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(s->fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;	/* slot beyond the file: corrupt map */
		done += (size_t)r;
	}
	return 0;
}

int store_write(struct store *s, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pwrite(s->fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENOSPC;
		done += (size_t)r;
	}
	return 0;
}

void store_discard(struct store *s, uint64_t off, uint64_t len)
{
	/* Best effort: a slot that stays allocated only costs space. */
	(void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)off, (off_t)len);
}

uint64_t store_allocated_bytes(struct store *s)
{
	struct stat st;

	if (s->fd < 0 || fstat(s->fd, &st) < 0)
		return 0;
	return (uint64_t)st.st_blocks * 512u;
}

void *store_buf_alloc(size_t len)
{
	void *p = NULL;

	len = (len + STORE_ALIGN - 1) & ~(size_t)(STORE_ALIGN - 1);
	if (posix_memalign(&p, STORE_ALIGN, len))
		return NULL;
	return p;
}
