/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * store.h - one VM's page store: the file <store_dir>/<vm>.store, which
 * outlives vmnapd so that a restarted vmnapd finds the VM's pages.
 *
 * Layout (every part 4 KiB aligned, the file sparse):
 *
 *   0                header (struct store_header): magic, version, page
 *                    size, pages, the guest RAM regions it was made for, a
 *                    random 128-bit store id, a crc32c of the header
 *   STORE_DATA_OFF   slot n (the n-th page of guest RAM) at
 *                    STORE_DATA_OFF + n * 4 KiB, written with O_DIRECT
 *                    where the file system allows it
 *   map_off          the slot map: per page 8 bytes, the crc32c of the
 *                    stored page and its flags (STORE_SLOT_STORED,
 *                    STORE_SLOT_RESIDENT)
 *
 * The durability rule the pager keeps: a page's memfd copy is punched only
 * after its slot and its map entry (STORED with the checksum) reached
 * stable storage (store_slots_commit: pwrite + fdatasync) and the entry
 * is not marked RESIDENT, and every other punch of guest RAM by the pager
 * clears the page's map entry durably first.  A page back in the memfd
 * has its entry cleared, or, while its slot stays valid (a CLEAN page of
 * dirty tracking), marked RESIDENT; the VMM may discard such a page
 * itself (a balloon) at any time, and a hole under a RESIDENT entry is
 * that discard.  So after a crash, for every page, either the memfd
 * holds it (resident: it wins over any entry) or the memfd has a hole and
 * the map says whether the store holds it (STORED alone, with its
 * checksum) or it is zero (no entry, or RESIDENT).  One window stays: a
 * discard in the few microseconds from a page's install to its entry's
 * write, with vmnapd dying in them too, brings the old copy back (the
 * entry cannot go first: a crash between would read the page as zero).
 *
 * Entries are written without fdatasync where no page's only copy rests
 * on the write reaching the device: marking RESIDENT, clearing the
 * entries of pages back in the memfd, and taking RESIDENT off a CLEAN
 * page's entry before its punch (its slot and checksum were made durable,
 * and any write error seen, when it was written).  What those writes
 * guard against is a vmnapd that dies, and the page cache outlives it; a
 * host crash ends the memfd and its VMM too, and a store is adopted only
 * under the VMM that made it.
 *
 * The file is locked (flock, exclusive) while open: one vmnapd at a time.
 * The store id ties the file to one run of one VMM: the shim learns it in
 * the handshake answer and presents it when it hands the same memory to a
 * restarted vmnapd; only then is the file adopted (store_open with
 * @adopt_id), else it is started afresh.
 *
 * Checksums: crc32c (Castagnoli).  Debian bookworm packages no maintained C
 * library for it (only python3-crc32c), so store.c carries the usual
 * slicing table, and the SSE4.2 instruction where the CPU has it.
 */
#ifndef VMNAP_STORE_H
#define VMNAP_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_ALIGN	4096u	/* O_DIRECT buffer and offset alignment */
#define STORE_PAGE	4096u
#define STORE_DATA_OFF	4096u	/* after the header */
#define STORE_MAGIC	"VMNAPST\n"
#define STORE_VERSION	1u
#define STORE_MAX_REGIONS	64
#define STORE_ID_HEX	33	/* 32 hex digits and a NUL */

#define STORE_SLOT_STORED	0x1u	/* the slot holds the page */
#define STORE_SLOT_RESIDENT	0x2u	/* ... and so does the memfd (the slot
					 * stays valid until the page is written);
					 * older vmnapd ignore it */

/* One map entry as on disk (little endian). */
struct store_slot {
	uint32_t crc;
	uint32_t flags;
};

/* A region of guest RAM the store was made for (checked on adoption). */
struct store_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t memfd_off;
};

struct store {
	int fd;			/* data (O_DIRECT when possible); holds the lock */
	int meta_fd;		/* header and map, buffered */
	bool direct;		/* fd opened with O_DIRECT */
	bool adopted;		/* opened over an existing store */
	uint64_t npages;
	uint64_t map_off;
	struct store_slot *slots;	/* npages entries, the map in memory */
	uint64_t stored;	/* entries with STORE_SLOT_STORED at open */
	uint64_t bad_slots;	/* checksum mismatches seen */
	uint64_t bad_logged_pg;	/* last mismatching page logged + 1 */
	char id[STORE_ID_HEX];
	char path[PATH_MAX];
};

/*
 * Open the store of @vm_name in @dir for @npages pages of guest RAM laid
 * out as @r[0..nr).  @adopt_id NULL: start afresh (new id, empty map).
 * Else adopt the existing file with that id and load its map.  -EBUSY
 * (another process holds it), -ENOENT (no store to adopt), -ESTALE (its
 * id or layout differ), -EBADMSG (header unreadable or corrupt), -errno.
 */
int store_open(struct store *s, const char *dir, const char *vm_name,
	       uint64_t npages, const struct store_region *r, unsigned int nr,
	       bool direct, const char *adopt_id);
/* Close; remove the file if @remove (nothing in it is needed any more). */
void store_close(struct store *s, bool remove);
/* Read @len bytes at @off (a slot offset) into @buf (STORE_ALIGN-aligned)
 * and check each page's checksum.  -errno; -EBADMSG on a mismatch. */
int store_read(struct store *s, void *buf, size_t len, uint64_t off);
/* Check pages [pg, pg+n) read into @buf against the map.  0 or -EBADMSG
 * (logged once per page). */
int store_verify(struct store *s, const void *buf, uint64_t pg, uint64_t n);
/* Write synchronously (short-write completion path). -errno. */
int store_write(struct store *s, const void *buf, size_t len, uint64_t off);
/* Drop slots [off, off+len) from the file (space only; see the map). */
void store_discard(struct store *s, uint64_t off, uint64_t len);
/* Map entries in memory: page @pg stored with checksum @crc (and held by
 * the memfd too if @resident), or not; RESIDENT set or taken off a
 * stored entry. */
void store_slot_set(struct store *s, uint64_t pg, uint32_t crc, bool resident);
void store_slot_clear(struct store *s, uint64_t pg);
bool store_slot_stored(const struct store *s, uint64_t pg);
bool store_slot_resident(const struct store *s, uint64_t pg);
void store_slot_set_resident(struct store *s, uint64_t pg, bool resident);
/* Page @pg is in the memfd: its stored entry cleared, or marked RESIDENT
 * if @keep (in memory only).  True if the entry changed. */
bool store_slot_in_memfd(struct store *s, uint64_t pg, bool keep);
/* Write map entries [pg, pg+n) as they are in memory, without fdatasync
 * (see above for when that is enough).  -errno. */
int store_slots_write(struct store *s, uint64_t pg, uint64_t n);
/*
 * Pages [pg, pg+n) are back in the memfd: clear their map entries, or
 * with @keep mark the stored ones RESIDENT (their slots stay valid), and
 * write them without fdatasync, so that a later discard of a page by the
 * VMM never makes its old copy look stored to a vmnapd that died before
 * it saw the discard.  Only after the pages are in the memfd.  Errors are
 * logged: the memfd wins.
 */
void store_slots_forget(struct store *s, uint64_t pg, uint64_t n, bool keep);
/* Write map entries [pg, pg+n) and make them and every slot written so far
 * durable (fdatasync).  -errno. */
int store_slots_commit(struct store *s, uint64_t pg, uint64_t n);
/* Allocated bytes of the store file. */
uint64_t store_allocated_bytes(struct store *s);
/* A buffer usable for O_DIRECT I/O; free with free(). */
void *store_buf_alloc(size_t len);
/* crc32c of @len bytes, continuing from @crc (0 to start). */
uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len);
/* An id is 32 lower-case hex digits. */
bool store_id_valid(const char *id);

#endif
