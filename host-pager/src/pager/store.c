// SPDX-License-Identifier: GPL-2.0-only
/* store.c - the per-VM page store file; see store.h. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store.h"

/* The header as on disk, little endian, in the first STORE_DATA_OFF bytes. */
struct store_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes;
	uint32_t page_size;
	uint32_t nr_regions;
	uint64_t npages;
	uint64_t data_off;
	uint64_t map_off;
	uint8_t id[16];
	struct store_region regions[STORE_MAX_REGIONS];
	uint32_t crc;		/* crc32c of every byte before it */
	uint32_t pad;
};

_Static_assert(sizeof(struct store_header) <= STORE_DATA_OFF, "header too large");
_Static_assert(sizeof(struct store_slot) == 8, "slot map entry is 8 bytes");

/* ---------------------------------------------------------------- crc32c */

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32c_sw(uint32_t c, const unsigned char *p, size_t len)
{
	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64 = c;

	while (len && ((uintptr_t)p & 7)) {
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
		len--;
	}
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
	}
	while (len--)
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
	return (uint32_t)c64;
}
#endif

uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len)
{
	static int mode;	/* 0 unknown, 1 table, 2 SSE4.2 */
	int m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);

	if (!m) {
		crc_table_init();
		m = 1;
#if defined(__x86_64__)
		__builtin_cpu_init();
		if (__builtin_cpu_supports("sse4.2"))
			m = 2;
#endif
		__atomic_store_n(&mode, m, __ATOMIC_RELEASE);
	}
#if defined(__x86_64__)
	if (m == 2)
		return ~crc32c_hw(~crc, buf, len);
#endif
	return ~crc32c_sw(~crc, buf, len);
}

/* ---------------------------------------------------------------- file */

bool store_id_valid(const char *id)
{
	size_t n = strnlen(id, STORE_ID_HEX);

	if (n != STORE_ID_HEX - 1)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

static void id_to_hex(const uint8_t *id, char *hex)
{
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENOSPC;
		done += (size_t)r;
	}
	return 0;
}

static uint64_t map_bytes(uint64_t npages)
{
	return (npages * sizeof(struct store_slot) + STORE_PAGE - 1) & ~(uint64_t)(STORE_PAGE - 1);
}

static void header_fill(struct store_header *h, const struct store *s,
			const uint8_t *id, const struct store_region *r,
			unsigned int nr)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, STORE_MAGIC, sizeof(h->magic));
	h->version = htole32(STORE_VERSION);
	h->header_bytes = htole32(STORE_DATA_OFF);
	h->page_size = htole32(STORE_PAGE);
	h->nr_regions = htole32(nr);
	h->npages = htole64(s->npages);
	h->data_off = htole64(STORE_DATA_OFF);
	h->map_off = htole64(s->map_off);
	memcpy(h->id, id, sizeof(h->id));
	for (unsigned int i = 0; i < nr; i++) {
		h->regions[i].gpa = htole64(r[i].gpa);
		h->regions[i].size = htole64(r[i].size);
		h->regions[i].memfd_off = htole64(r[i].memfd_off);
	}
	h->crc = htole32(store_crc32c(0, h, offsetof(struct store_header, crc)));
}

/* The directory entry of a new store must survive a crash too. */
static void sync_dir(const char *path)
{
	char dir[PATH_MAX];
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

static int store_create(struct store *s, const struct store_region *r,
			unsigned int nr)
{
	struct store_header h;
	uint8_t id[16];
	size_t got = 0;
	int err;

	while (got < sizeof(id)) {
		ssize_t n = getrandom(id + got, sizeof(id) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	id_to_hex(id, s->id);
	/* the old contents (another run of the VMM) are of no use now */
	if (ftruncate(s->meta_fd, 0) < 0 ||
	    ftruncate(s->meta_fd, (off_t)(s->map_off + map_bytes(s->npages))) < 0)
		return -errno;
	header_fill(&h, s, id, r, nr);
	err = pwrite_all(s->meta_fd, &h, sizeof(h), 0);
	if (!err && fdatasync(s->meta_fd) < 0)
		err = -errno;
	if (!err)
		sync_dir(s->path);
	return err;
}

static int store_adopt(struct store *s, const struct store_region *r,
		       unsigned int nr, const char *adopt_id)
{
	struct store_header h, want;
	char hex[STORE_ID_HEX];
	int err;

	err = pread_all(s->meta_fd, &h, sizeof(h), 0);
	if (err)
		return err == -EIO ? -EBADMSG : err;
	if (memcmp(h.magic, STORE_MAGIC, sizeof(h.magic)) ||
	    le32toh(h.crc) != store_crc32c(0, &h, offsetof(struct store_header, crc)))
		return -EBADMSG;
	if (le32toh(h.version) != STORE_VERSION)
		return -EPROTO;
	id_to_hex(h.id, hex);
	if (strcmp(hex, adopt_id))
		return -ESTALE;
	header_fill(&want, s, h.id, r, nr);
	if (memcmp(&want, &h, sizeof(h)))
		return -ESTALE;	/* made for other guest RAM */
	snprintf(s->id, sizeof(s->id), "%s", hex);
	err = pread_all(s->meta_fd, s->slots, s->npages * sizeof(*s->slots), s->map_off);
	if (err)
		return err == -EIO ? -EBADMSG : err;
	for (uint64_t pg = 0; pg < s->npages; pg++)
		s->stored += store_slot_stored(s, pg);
	s->adopted = true;
	return 0;
}

int store_open(struct store *s, const char *dir, const char *vm_name,
	       uint64_t npages, const struct store_region *r, unsigned int nr,
	       bool direct, const char *adopt_id)
{
	int flags = O_RDWR | O_CLOEXEC | (adopt_id ? 0 : O_CREAT);
	int n, err;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->meta_fd = -1;
	if (!npages || nr > STORE_MAX_REGIONS || (adopt_id && !store_id_valid(adopt_id)))
		return -EINVAL;
	n = snprintf(s->path, sizeof(s->path), "%s/%s.store", dir, vm_name);
	if (n < 0 || (size_t)n >= sizeof(s->path))
		return -ENAMETOOLONG;
	s->npages = npages;
	s->map_off = STORE_DATA_OFF + npages * STORE_PAGE;
	s->slots = calloc(npages, sizeof(*s->slots));
	if (!s->slots)
		return -ENOMEM;
	if (direct) {
		s->fd = open(s->path, flags | O_DIRECT, 0600);
		if (s->fd >= 0)
			s->direct = true;
		else if (errno != EINVAL)
			goto fail_errno;
	}
	if (s->fd < 0) {
		s->fd = open(s->path, flags, 0600);
		if (s->fd < 0)
			goto fail_errno;
	}
	if (flock(s->fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	s->meta_fd = open(s->path, O_RDWR | O_CLOEXEC);
	if (s->meta_fd < 0)
		goto fail_errno;
	err = adopt_id ? store_adopt(s, r, nr, adopt_id) : store_create(s, r, nr);
	if (err)
		goto fail;
	return 0;

fail_errno:
	err = -errno;
fail:
	store_close(s, false);
	return err;
}

void store_close(struct store *s, bool remove)
{
	if (s->fd >= 0 && remove)
		unlink(s->path);	/* while the lock is held */
	if (s->meta_fd >= 0)
		close(s->meta_fd);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->meta_fd = -1;
	free(s->slots);
	s->slots = NULL;
}

void store_slot_set(struct store *s, uint64_t pg, uint32_t crc, bool resident)
{
	s->slots[pg].crc = htole32(crc);
	s->slots[pg].flags = htole32(STORE_SLOT_STORED | (resident ? STORE_SLOT_RESIDENT : 0));
}

void store_slot_clear(struct store *s, uint64_t pg)
{
	s->slots[pg].crc = 0;
	s->slots[pg].flags = 0;
}

bool store_slot_stored(const struct store *s, uint64_t pg)
{
	return pg < s->npages && (le32toh(s->slots[pg].flags) & STORE_SLOT_STORED);
}

bool store_slot_resident(const struct store *s, uint64_t pg)
{
	return pg < s->npages && (le32toh(s->slots[pg].flags) & STORE_SLOT_RESIDENT);
}

void store_slot_set_resident(struct store *s, uint64_t pg, bool resident)
{
	uint32_t f = le32toh(s->slots[pg].flags);

	if (f & STORE_SLOT_STORED)
		s->slots[pg].flags = htole32(resident ? f | STORE_SLOT_RESIDENT :
					     f & ~STORE_SLOT_RESIDENT);
}

int store_slots_write(struct store *s, uint64_t pg, uint64_t n)
{
	if (pg > s->npages || n > s->npages - pg)
		return -ERANGE;
	return pwrite_all(s->meta_fd, &s->slots[pg], n * sizeof(*s->slots),
			  s->map_off + pg * sizeof(*s->slots));
}

bool store_slot_in_memfd(struct store *s, uint64_t pg, bool keep)
{
	if (!store_slot_stored(s, pg) || (keep && store_slot_resident(s, pg)))
		return false;
	if (keep)
		store_slot_set_resident(s, pg, true);
	else
		store_slot_clear(s, pg);
	return true;
}

void store_slots_forget(struct store *s, uint64_t pg, uint64_t n, bool keep)
{
	bool changed = false;
	int err;

	if (pg > s->npages || n > s->npages - pg)
		return;
	for (uint64_t i = pg; i < pg + n; i++)
		changed |= store_slot_in_memfd(s, i, keep);
	err = changed ? store_slots_write(s, pg, n) : 0;
	if (err)
		log_warn(NULL, "store %s: slot map: %s", s->path, strerror(-err));
}

int store_slots_commit(struct store *s, uint64_t pg, uint64_t n)
{
	int err;

	err = store_slots_write(s, pg, n);
	if (!err && fdatasync(s->meta_fd) < 0)
		err = -errno;
	return err;
}

int store_verify(struct store *s, const void *buf, uint64_t pg, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		const char *page = (const char *)buf + i * STORE_PAGE;
		uint32_t got = store_crc32c(0, page, STORE_PAGE);

		if (store_slot_stored(s, pg + i) && le32toh(s->slots[pg + i].crc) == got)
			continue;
		__atomic_add_fetch(&s->bad_slots, 1, __ATOMIC_RELAXED);
		if (__atomic_exchange_n(&s->bad_logged_pg, pg + i + 1, __ATOMIC_RELAXED) !=
		    pg + i + 1)
			log_err(NULL, "store %s: page %llu: %s (map %08x, read %08x): "
				"not served, the thread touching it stays stopped",
				s->path, (unsigned long long)(pg + i),
				store_slot_stored(s, pg + i) ? "checksum mismatch" :
				"not in the slot map", le32toh(s->slots[pg + i].crc), got);
		return -EBADMSG;
	}
	return 0;
}

int store_read(struct store *s, void *buf, size_t len, uint64_t off)
{
	int err = pread_all(s->fd, buf, len, off);

	if (err)
		return err;	/* -EIO past the end: corrupt map */
	if (off < STORE_DATA_OFF || (off - STORE_DATA_OFF) % STORE_PAGE || len % STORE_PAGE)
		return -EINVAL;
	return store_verify(s, buf, (off - STORE_DATA_OFF) / STORE_PAGE, len / STORE_PAGE);
}

int store_write(struct store *s, const void *buf, size_t len, uint64_t off)
{
	return pwrite_all(s->fd, buf, len, off);
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
