/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * store.h - one VM's page store: a sparse file <store_dir>/<vm>.store laid
 * out like guest RAM (slot n at n * 4 KiB), written with O_DIRECT where the
 * file system allows it.  Later: slot checksums and a persisted slot map
 * (crash safety), compression, deduplication.
 */
#ifndef VMNAP_STORE_H
#define VMNAP_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ALIGN	4096u	/* O_DIRECT buffer and offset alignment */

struct store {
	int fd;
	bool direct;		/* opened with O_DIRECT */
	char path[PATH_MAX];
};

/* Create (truncate) the store for @vm_name in @dir, @size bytes sparse. */
int store_open(struct store *s, const char *dir, const char *vm_name,
	       uint64_t size, bool direct);
/* Close and unlink. */
void store_close(struct store *s);
/* Read @len bytes at @off into @buf (STORE_ALIGN-aligned). -errno. */
int store_read(struct store *s, void *buf, size_t len, uint64_t off);
/* Write synchronously (short-write completion path). -errno. */
int store_write(struct store *s, const void *buf, size_t len, uint64_t off);
/* Drop slots [off, off+len): their pages are no longer stored. */
void store_discard(struct store *s, uint64_t off, uint64_t len);
/* Allocated bytes of the store file. */
uint64_t store_allocated_bytes(struct store *s);
/* A buffer usable for O_DIRECT I/O; free with free(). */
void *store_buf_alloc(size_t len);

#endif
