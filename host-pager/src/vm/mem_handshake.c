// SPDX-License-Identifier: GPL-2.0-only
/*
 * mem_handshake.c - the memory handshake server; see mem_handshake.h.
 *
 * Everything a peer sends is hostile until checked: its credentials
 * (SO_PEERCRED), the size and syntax of its message, every fd's kind
 * (userfaultfd by its anon-inode name; guest RAM a regular file on shmem
 * -- a memfd, or a tmpfs file such as QEMU's memory-backend-file on
 * /dev/shm -- that answers F_GET_SEALS, without write seals, large enough;
 * hugetlbfs is refused by name: the pager serves and evicts 4 KiB pages)
 * and every region (alignment, size, count, overlap: of GPAs, of
 * host addresses, and of offsets in one memfd, told by its device and inode
 * whichever fds name it).  A refusal is logged with its reason (the
 * peer's bytes sanitised), counted, answered, and closes the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "usock.h"
#include "loop.h"
#include "config.h"
#include "mem_handshake.h"
#include "vm_control.h"
#include "pager.h"
#include "store.h"

#define HS_MAX_RAM_BYTES	(1ull << 40)	/* per VM */
#define HS_MAX_ADDR		(1ull << 57)	/* user address space bound */
#define HS_UFFD_LINK		"anon_inode:[userfaultfd]"
#define HS_CMSG_SPACE		CMSG_SPACE(sizeof(int) * MEM_HANDSHAKE_MAX_FDS)
#define HS_STORE_RETRY_MS	50	/* a store a reaper still holds: ask again */
#define HS_STORE_WAIT_MS	8000	/* ... this long (the shim waits 10 s) */

struct hs_conn {
	struct hs_conn *next;
	struct mem_handshake *hs;
	int fd;
	pid_t pid;
	uid_t uid;
	bool attached;
	char *buf;
	size_t len;
	int fds[MEM_HANDSHAKE_MAX_FDS];
	unsigned int nfds;
	struct loop_timer timer;
	/* a complete request whose store a detaching pager still holds: tried
	 * again every HS_STORE_RETRY_MS while a reaper runs */
	struct hs_req *waiting;
	uint64_t wait_until_ns;		/* 0: not waited yet */
	struct loop_timer retry;
	/* attached: the mapper this connection stands for */
	uint64_t vm_id;
	struct pager *pager;
	struct pager_mapper *mapper;
};

struct mem_handshake {
	struct vmnapd *d;
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct usock_id id;		/* the socket file we bound */
	struct pager_config cfg;
	struct hs_conn *conns;
	struct mem_handshake_stats st;
	struct log_ratelimit log_rl;	/* refusal lines */
};

/* Refusals logged at warning level: a burst, then one per interval. */
#define HS_LOG_BURST		32U
#define HS_LOG_INTERVAL_NS	(1000ull * 1000000ull)

static const char *const refusal_names[HS_REFUSALS] = {
	[HS_REFUSE_PEER] = "peer",
	[HS_REFUSE_TRUNCATED] = "truncated",
	[HS_REFUSE_TIMEOUT] = "timeout",
	[HS_REFUSE_TOO_LARGE] = "too_large",
	[HS_REFUSE_JSON] = "json",
	[HS_REFUSE_FIELD] = "field",
	[HS_REFUSE_FD] = "fd",
	[HS_REFUSE_REGION] = "region",
	[HS_REFUSE_VM] = "vm",
	[HS_REFUSE_INTERNAL] = "internal",
	[HS_REFUSE_STORE] = "store",
};

const char *mem_hs_refusal_name(enum mem_hs_refusal r)
{
	return r < HS_REFUSALS ? refusal_names[r] : "?";
}

static void conn_close_fds(struct hs_conn *c)
{
	for (unsigned int i = 0; i < c->nfds; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	c->nfds = 0;
}

static void conn_free(struct hs_conn *c)
{
	struct mem_handshake *hs = c->hs;
	struct hs_conn **pp;

	for (pp = &hs->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	loop_timer_cancel(hs->d->loop, &c->timer);
	loop_timer_cancel(hs->d->loop, &c->retry);
	loop_del_fd(hs->d->loop, c->fd);
	close(c->fd);
	conn_close_fds(c);
	free(c->waiting);
	free(c->buf);
	free(c);
}

static void reply(struct hs_conn *c, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);

	if (s) {
		size_t n = strlen(s);

		s[n] = '\n';	/* one line; the NUL is not sent */
		(void)send(c->fd, s, n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		free(s);
	}
	json_decref(j);
}

static void refuse(struct hs_conn *c, enum mem_hs_refusal why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct hs_conn *c, enum mem_hs_refusal why, const char *fmt, ...)
{
	char raw[256], msg[256];
	uint64_t suppressed = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* jansson's errors quote the peer's bytes: one line, valid UTF-8 */
	log_sanitize(msg, sizeof(msg), raw, sizeof(raw));
	c->hs->st.refused[why]++;
	if (!log_ratelimit(&c->hs->log_rl, now_ns(), &suppressed))
		log_debug("mem.sock", "refused pid %d (%s): %s", (int)c->pid,
			  mem_hs_refusal_name(why), msg);
	else if (suppressed)
		log_warn("mem.sock", "refused pid %d (%s): %s (%llu similar lines suppressed)",
			 (int)c->pid, mem_hs_refusal_name(why), msg,
			 (unsigned long long)suppressed);
	else
		log_warn("mem.sock", "refused pid %d (%s): %s", (int)c->pid,
			 mem_hs_refusal_name(why), msg);
	reply(c, json_pack("{s:b,s:s,s:s}", "ok", 0, "reason",
			   mem_hs_refusal_name(why), "error", msg));
	conn_free(c);
}

static bool fd_link_is(int fd, const char *want)
{
	char path[64], link[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = 0;
	return !strcmp(link, want);
}

/* An integer field >= 0; @def if absent and @def >= 0.  -1 on error. */
static int get_u64(json_t *o, const char *key, int64_t def, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!v) {
		if (def < 0)
			return -1;
		*out = (uint64_t)def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

struct hs_req {
	char name[VM_NAME_MAX];
	char store_id[STORE_ID_HEX];	/* "": a fresh store */
	bool firecracker;
	enum pager_gpa_source gpa_source;
	int uffd_idx;
	unsigned int nr;
	struct pager_region_desc rd[PAGER_MAX_REGIONS];
	int memfd_idx[PAGER_MAX_REGIONS];
	dev_t dev[PAGER_MAX_REGIONS];		/* the memfd's identity */
	ino_t ino[PAGER_MAX_REGIONS];
};

/* Parse and check the regions; fills @rq.  Refuses (and frees @c) on error. */
static int parse_regions(struct hs_conn *c, json_t *arr, struct hs_req *rq)
{
	size_t n = json_array_size(arr);
	uint64_t total = 0;

	if (!json_is_array(arr) || n == 0) {
		refuse(c, HS_REFUSE_FIELD, "\"regions\" must be a non-empty array");
		return -1;
	}
	if (n > PAGER_MAX_REGIONS) {
		refuse(c, HS_REFUSE_REGION, "%zu regions (at most %d)", n, PAGER_MAX_REGIONS);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *r = json_array_get(arr, i);
		uint64_t ps, memfd_idx, host, size, off, gpa;

		if (rq->firecracker && json_is_object(r) && !json_object_get(r, "gpa"))
			rq->gpa_source = PAGER_GPA_GUESSED;	/* from the offset */
		if (!json_is_object(r) ||
		    get_u64(r, "base_host_virt_addr", -1, &host) ||
		    get_u64(r, "size", -1, &size) || get_u64(r, "offset", -1, &off) ||
		    get_u64(r, "page_size", PAGER_PAGE_SIZE, &ps) ||
		    get_u64(r, "gpa", rq->firecracker ? (int64_t)off : -1, &gpa) ||
		    get_u64(r, "memfd", rq->firecracker ? 0 : -1, &memfd_idx)) {
			refuse(c, HS_REFUSE_FIELD, "region %zu: missing or invalid field", i);
			return -1;
		}
		if (ps != PAGER_PAGE_SIZE) {
			refuse(c, HS_REFUSE_REGION, "region %zu: page_size %llu (only %u)",
			       i, (unsigned long long)ps, PAGER_PAGE_SIZE);
			return -1;
		}
		if (!size || !host || (host | size | off | gpa) % PAGER_PAGE_SIZE) {
			refuse(c, HS_REFUSE_REGION, "region %zu: empty or not %u-aligned",
			       i, PAGER_PAGE_SIZE);
			return -1;
		}
		if (size > HS_MAX_RAM_BYTES || host >= HS_MAX_ADDR || gpa >= HS_MAX_ADDR ||
		    off >= HS_MAX_ADDR || host + size > HS_MAX_ADDR ||
		    (total += size) > HS_MAX_RAM_BYTES) {
			refuse(c, HS_REFUSE_REGION, "region %zu: too large", i);
			return -1;
		}
		for (size_t j = 0; j < i; j++) {
			const struct pager_region_desc *o = &rq->rd[j];

			/* the memfd ranges: check_fds(), by file identity */
			if (ranges_overlap(gpa, size, o->gpa, o->size) ||
			    ranges_overlap(host, size, o->host_addr, o->size)) {
				refuse(c, HS_REFUSE_REGION, "region %zu overlaps region %zu", i, j);
				return -1;
			}
		}
		if (!rq->firecracker && (memfd_idx >= c->nfds || (int)memfd_idx == rq->uffd_idx)) {
			refuse(c, HS_REFUSE_FD, "region %zu: memfd index %llu not a received fd",
			       i, (unsigned long long)memfd_idx);
			return -1;
		}
		rq->rd[i] = (struct pager_region_desc){
			.gpa = gpa, .size = size, .memfd_offset = off, .host_addr = host,
			.memfd = -1,
		};
		rq->memfd_idx[i] = rq->firecracker ? -1 : (int)memfd_idx;
	}
	rq->nr = (unsigned int)n;
	return 0;
}

/* Check every fd's kind; @c refused on error. */
static int check_fds(struct hs_conn *c, struct hs_req *rq)
{
	bool used[MEM_HANDSHAKE_MAX_FDS] = { false };

	if (rq->uffd_idx < 0 || (unsigned int)rq->uffd_idx >= c->nfds) {
		refuse(c, HS_REFUSE_FD, "no userfaultfd received (%u fd(s))", c->nfds);
		return -1;
	}
	if (!fd_link_is(c->fds[rq->uffd_idx], HS_UFFD_LINK)) {
		refuse(c, HS_REFUSE_FD, "fd %d is not a userfaultfd", rq->uffd_idx);
		return -1;
	}
	used[rq->uffd_idx] = true;
	for (unsigned int i = 0; i < rq->nr; i++) {
		int idx = rq->memfd_idx[i], fd, seals;
		struct statfs sf;
		struct stat st;

		if (idx < 0)
			continue;
		fd = c->fds[idx];
		used[idx] = true;
		seals = fcntl(fd, F_GET_SEALS);
		if (fstatfs(fd, &sf) == 0 && (unsigned long)sf.f_type == HUGETLBFS_MAGIC) {
			refuse(c, HS_REFUSE_FD, "region %u: guest RAM on hugetlbfs (%ld KiB pages) "
			       "is not supported: the pager serves and evicts 4 KiB pages; use "
			       "a memfd or a tmpfs file", i, (long)sf.f_bsize / 1024);
			return -1;
		}
		if (fstatfs(fd, &sf) < 0 || (unsigned long)sf.f_type != TMPFS_MAGIC ||
		    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0) {
			refuse(c, HS_REFUSE_FD, "region %u: fd %d is not a memfd or tmpfs file",
			       i, idx);
			return -1;
		}
		if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
			refuse(c, HS_REFUSE_FD, "region %u: memfd is write-sealed", i);
			return -1;
		}
		if ((uint64_t)st.st_size < rq->rd[i].memfd_offset + rq->rd[i].size) {
			refuse(c, HS_REFUSE_REGION, "region %u: beyond the memfd's %lld bytes",
			       i, (long long)st.st_size);
			return -1;
		}
		/* two regions on one file (however many fds name it) must not
		 * share pages: an offload of one would punch the other */
		rq->dev[i] = st.st_dev;
		rq->ino[i] = st.st_ino;
		for (unsigned int j = 0; j < i; j++) {
			if (rq->memfd_idx[j] >= 0 && rq->dev[j] == st.st_dev &&
			    rq->ino[j] == st.st_ino &&
			    ranges_overlap(rq->rd[i].memfd_offset, rq->rd[i].size,
					   rq->rd[j].memfd_offset, rq->rd[j].size)) {
				refuse(c, HS_REFUSE_REGION,
				       "region %u overlaps region %u in the same memfd", i, j);
				return -1;
			}
		}
		rq->rd[i].memfd = fd;
	}
	for (unsigned int i = 0; i < c->nfds; i++) {
		if (!used[i]) {
			refuse(c, HS_REFUSE_FD, "fd %u received but not referenced", i);
			return -1;
		}
	}
	return 0;
}

/*
 * Hand the checked request to the VM's pager: attach its mapper, or
 * refuse it (@c is freed then).  True when @rq is kept in c->waiting to be
 * tried again; else the caller frees it.
 */
static bool attach(struct hs_conn *c, struct hs_req *rq)
{
	struct mem_handshake *hs = c->hs;
	uint64_t host[PAGER_MAX_REGIONS];
	bool created = false;
	struct vm *vm;
	int err, uffd = c->fds[rq->uffd_idx];

	vm = vm_find(hs->d, rq->name);
	if (!vm) {
		vm = vm_new(hs->d, rq->name);
		if (!vm) {
			refuse(c, errno == ENOMEM ? HS_REFUSE_INTERNAL : HS_REFUSE_VM,
			       "cannot register vm '%s': %s", rq->name, strerror(errno));
			return false;
		}
		created = true;
	}
	for (unsigned int i = 0; i < rq->nr; i++)
		host[i] = rq->rd[i].host_addr;
	if (!vm->pager) {
		err = rq->store_id[0] ?
		      vm_pager_adopt(vm, &hs->cfg, rq->rd, rq->nr, rq->store_id) :
		      vm_pager_attach(vm, &hs->cfg, rq->rd, rq->nr);
		if (err == -EBUSY && pager_reapers_active() &&
		    (!c->wait_until_ns || now_ns() < c->wait_until_ns)) {
			/* the VM's previous pager may still be letting go of
			 * the store (pager_free_async): ask again soon, and
			 * answer before the shim stops waiting */
			if (!c->wait_until_ns) {
				c->wait_until_ns = now_ns() +
						   (uint64_t)HS_STORE_WAIT_MS * 1000000ull;
				log_info(vm->subject, "mem handshake from pid %d waits: its store "
					 "is still held by a pager being detached", (int)c->pid);
			}
			if (created)
				vm_free(vm);
			c->waiting = rq;
			loop_timer_cancel(hs->d->loop, &c->timer);
			loop_timer_arm(hs->d->loop, &c->retry,
				       (uint64_t)HS_STORE_RETRY_MS * 1000000ull);
			return true;
		}
		if (err == -EBUSY && pager_reapers_active()) {	/* waited long enough */
			if (created)
				vm_free(vm);
			refuse(c, HS_REFUSE_STORE, "store of vm '%s' still held by its previous "
			       "pager, being detached (%d ms): try again", rq->name,
			       HS_STORE_WAIT_MS);
			return false;
		}
		if (err && rq->store_id[0]) {
			if (created)
				vm_free(vm);
			refuse(c, HS_REFUSE_STORE, "store %s of vm '%s' cannot be adopted: %s; "
			       "its offloaded pages are out of reach (threads touching them "
			       "wait)", rq->store_id, rq->name,
			       err == -EBUSY ? "locked by another process" :
			       err == -ESTALE ? "another store (other id or RAM)" :
			       err == -EBADMSG ? "corrupt header or map" : strerror(-err));
			return false;
		}
		if (err) {
			if (created)
				vm_free(vm);
			refuse(c, HS_REFUSE_INTERNAL, "pager: %s", strerror(-err));
			return false;
		}
		/* the pager owns the memfds now */
		for (unsigned int i = 0; i < rq->nr; i++)
			if (rq->memfd_idx[i] >= 0)
				c->fds[rq->memfd_idx[i]] = -1;
		if (rq->firecracker)
			pager_set_not_evictable(vm->pager,
				"Firecracker form: anonymous memory, no memfd to punch");
		if (rq->gpa_source != PAGER_GPA_STATED)
			pager_set_gpa_source(vm->pager, rq->gpa_source);
		vm->lost_err = 0;	/* a VMM handed its memory in: the VM lives */
		vm->lost_error[0] = '\0';
		vm_control_pager_attached(vm);	/* pager errors -> coordinator */
	} else if (pager_regions_match(vm->pager, rq->rd, rq->nr)) {
		refuse(c, HS_REFUSE_VM, "vm '%s' already has different guest RAM", rq->name);
		return false;
	}
	err = pager_add_mapper(vm->pager, uffd, host, rq->nr, c->pid, &c->mapper);
	if (err) {
		if (created)
			vm_free(vm);
		refuse(c, HS_REFUSE_INTERNAL, "mapper: %s", strerror(-err));
		return false;
	}
	c->fds[rq->uffd_idx] = -1;	/* the mapper owns it */
	conn_close_fds(c);
	vm_control_tail_sync(vm);	/* a command may run already */
	c->attached = true;
	c->vm_id = vm->id;
	c->pager = vm->pager;
	free(c->buf);
	c->buf = NULL;
	loop_timer_cancel(hs->d->loop, &c->timer);
	hs->st.accepted++;
	log_info(vm->subject, "mem handshake from pid %d: %u region(s)%s", (int)c->pid,
		 rq->nr, rq->firecracker ? " (Firecracker form)" : "");
	reply(c, json_pack("{s:b,s:s,s:I,s:b,s:s}", "ok", 1, "vm", vm->name,
			   "id", (json_int_t)vm->id, "evictable", !rq->firecracker,
			   "store_id", pager_store_id(vm->pager)));
	return false;
}

/* Optional "gpa_source": how the VMM side knows the regions' gpa. */
static int parse_gpa_source(json_t *v, enum pager_gpa_source *out)
{
	static const enum pager_gpa_source allowed[] = {
		PAGER_GPA_STATED, PAGER_GPA_GUESSED, PAGER_GPA_LINEAR,
	};

	*out = PAGER_GPA_STATED;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return -1;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		if (!strcmp(json_string_value(v), pager_gpa_source_name(allowed[i]))) {
			*out = allowed[i];
			return 0;
		}
	}
	return -1;
}

static void handle_message(struct hs_conn *c, json_t *doc)
{
	struct hs_req *rq = calloc(1, sizeof(*rq));
	json_t *regions;

	if (!rq) {
		refuse(c, HS_REFUSE_INTERNAL, "out of memory");
		return;
	}
	if (json_is_array(doc)) {
		rq->firecracker = true;
		rq->uffd_idx = 0;
		snprintf(rq->name, sizeof(rq->name), "fc-%d", (int)c->pid);
		regions = doc;
	} else if (json_is_object(doc)) {
		json_t *name = json_object_get(doc, "vm");
		uint64_t idx;

		if (!json_is_string(name) || !vm_name_valid(json_string_value(name))) {
			refuse(c, HS_REFUSE_VM, "\"vm\" must be a valid VM name");
			goto out;
		}
		snprintf(rq->name, sizeof(rq->name), "%s", json_string_value(name));
		if (get_u64(doc, "uffd", 0, &idx) || idx >= MEM_HANDSHAKE_MAX_FDS) {
			refuse(c, HS_REFUSE_FIELD, "\"uffd\" must be an fd index");
			goto out;
		}
		rq->uffd_idx = (int)idx;
		if (parse_gpa_source(json_object_get(doc, "gpa_source"), &rq->gpa_source)) {
			refuse(c, HS_REFUSE_FIELD,
			       "\"gpa_source\" must be \"stated\", \"guessed\" or \"linear\"");
			goto out;
		}
		regions = json_object_get(doc, "regions");
		name = json_object_get(doc, "store_id");
		if (name && (!json_is_string(name) ||
			     !store_id_valid(json_string_value(name)))) {
			refuse(c, HS_REFUSE_FIELD, "\"store_id\" must be 32 hex digits");
			goto out;
		}
		if (name)
			snprintf(rq->store_id, sizeof(rq->store_id), "%s",
				 json_string_value(name));
	} else {
		refuse(c, HS_REFUSE_FIELD, "expected an object or an array");
		goto out;
	}
	if (parse_regions(c, regions, rq) || check_fds(c, rq))
		goto out;
	if (attach(c, rq))
		return;	/* kept for the retry */
out:
	free(rq);
}

static void conn_retry(struct loop *l, struct loop_timer *t, void *arg)
{
	struct hs_conn *c = arg;
	struct hs_req *rq = c->waiting;

	(void)l;
	(void)t;
	c->waiting = NULL;
	if (!attach(c, rq))	/* attached, or refused (c is freed) */
		free(rq);
}

/* The peer of an attached connection hung up: its mapper is gone. */
static void conn_detach(struct hs_conn *c)
{
	struct mem_handshake *hs = c->hs;
	struct vm *vm = vm_find_id(hs->d, c->vm_id);

	hs->st.mappers_gone++;
	if (vm && vm->pager && vm->pager == c->pager) {
		struct pager_stats st;

		pager_remove_mapper(vm->pager, c->mapper);
		pager_get_stats(vm->pager, &st);
		if (!st.mappers) {
			log_info(vm->subject, "last mapper gone: releasing guest RAM");
			vm_pager_detach(vm);
		}
	}
	conn_free(c);
}

static void conn_readable(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct hs_conn *c = arg;
	char cbuf[HS_CMSG_SPACE];
	struct iovec iov;
	struct msghdr mh = { 0 };
	json_error_t jerr;
	json_t *doc;
	ssize_t n;

	(void)l;
	(void)events;
	if (c->attached || c->waiting) {
		char sink[256];

		n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			if (c->attached)
				conn_detach(c);
			else
				refuse(c, HS_REFUSE_TRUNCATED, "peer closed while its store "
				       "was still held");
		}
		return;	/* nothing more is expected: ignore */
	}
	iov.iov_base = c->buf + c->len;
	iov.iov_len = MEM_HANDSHAKE_MAX_MSG - c->len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		refuse(c, HS_REFUSE_TRUNCATED, "recvmsg: %s", strerror(errno));
		return;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int rfd;

			memcpy(&rfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c->nfds < MEM_HANDSHAKE_MAX_FDS)
				c->fds[c->nfds++] = rfd;
			else
				close(rfd);
		}
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		refuse(c, HS_REFUSE_FD, "more than %d fds", MEM_HANDSHAKE_MAX_FDS);
		return;
	}
	if (n == 0) {
		refuse(c, HS_REFUSE_TRUNCATED, "peer closed after %zu byte(s)", c->len);
		return;
	}
	c->len += (size_t)n;
	doc = json_loadb(c->buf, c->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc) {
		if (json_error_code(&jerr) != json_error_premature_end_of_input) {
			refuse(c, HS_REFUSE_JSON, "bad JSON at %d:%d: %s", jerr.line,
			       jerr.column, jerr.text);
		} else if (c->len >= MEM_HANDSHAKE_MAX_MSG) {
			refuse(c, HS_REFUSE_TOO_LARGE, "message over %u bytes",
			       MEM_HANDSHAKE_MAX_MSG);
		}
		return;	/* wait for more */
	}
	handle_message(c, doc);
	json_decref(doc);
}

static void conn_timeout(struct loop *l, struct loop_timer *t, void *arg)
{
	struct hs_conn *c = arg;

	(void)l;
	(void)t;
	refuse(c, HS_REFUSE_TIMEOUT, "no complete message within %d ms",
	       MEM_HANDSHAKE_TIMEOUT_MS);
}

static void on_accept(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct mem_handshake *hs = arg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct hs_conn *c;
	int cfd;

	(void)events;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->buf = malloc(MEM_HANDSHAKE_MAX_MSG))) {
		free(c);
		close(cfd);
		hs->st.refused[HS_REFUSE_INTERNAL]++;
		return;
	}
	c->hs = hs;
	c->fd = cfd;
	c->pid = -1;
	loop_timer_init(&c->timer, conn_timeout, c);
	loop_timer_init(&c->retry, conn_retry, c);
	c->next = hs->conns;
	hs->conns = c;
	if (loop_add_fd(l, cfd, EPOLLIN, conn_readable, c) < 0) {
		hs->st.refused[HS_REFUSE_INTERNAL]++;
		conn_free(c);
		return;
	}
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		refuse(c, HS_REFUSE_PEER, "SO_PEERCRED: %s", strerror(errno));
		return;
	}
	c->pid = cred.pid;
	c->uid = cred.uid;
	if (cred.uid != 0 && cred.uid != geteuid()) {
		refuse(c, HS_REFUSE_PEER, "uid %u may not hand over guest RAM",
		       (unsigned int)cred.uid);
		return;
	}
	loop_timer_arm(l, &c->timer, (uint64_t)MEM_HANDSHAKE_TIMEOUT_MS * 1000000ull);
}

int mem_handshake_start(struct vmnapd *d, const char *path,
			const struct pager_config *cfg)
{
	struct mem_handshake *hs;
	int n, err;

	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	hs->d = d;
	log_ratelimit_init(&hs->log_rl, HS_LOG_INTERVAL_NS, HS_LOG_BURST, now_ns());
	if (cfg)
		hs->cfg = *cfg;
	else {
		pager_config_default(&hs->cfg, d->cfg.store_dir);
		if (d->settings) {
			hs->cfg.fault_error_timeout_ms = d->settings->fault_error_timeout_ms;
			hs->cfg.fault_around_pages = d->settings->fault_around_pages;
			hs->cfg.critical_resident = d->settings->critical_resident;
			hs->cfg.tail_resident = d->settings->tail_resident;
			hs->cfg.follow_pages = d->settings->follow_pages;
			hs->cfg.delivery_io_class = d->settings->delivery_io_class;
		}
	}
	if (path)
		n = snprintf(hs->path, sizeof(hs->path), "%s", path);
	else
		n = snprintf(hs->path, sizeof(hs->path), "%s/%s", d->cfg.run_dir,
			     MEM_HANDSHAKE_SOCKET);
	if (n < 0 || (size_t)n >= sizeof(hs->path)) {
		free(hs);
		return -ENAMETOOLONG;
	}
	hs->fd = usock_listen(hs->path, 0600, SOMAXCONN, NULL, &hs->id);
	if (hs->fd < 0) {
		err = hs->fd;
		log_err(NULL, "memory handshake socket %s: %s", hs->path,
			usock_listen_strerror(err));
		free(hs);
		return err;
	}
	err = loop_add_fd(d->loop, hs->fd, EPOLLIN, on_accept, hs);
	if (err) {
		close(hs->fd);
		usock_unlink(hs->path, &hs->id);
		free(hs);
		return err;
	}
	d->mem_handshake = hs;
	log_info(NULL, "memory handshake on %s", hs->path);
	return 0;
}

void mem_handshake_stop(struct vmnapd *d)
{
	struct mem_handshake *hs = d->mem_handshake;

	if (!hs)
		return;
	while (hs->conns)
		conn_free(hs->conns);
	loop_del_fd(d->loop, hs->fd);
	close(hs->fd);
	usock_unlink(hs->path, &hs->id);
	free(hs);
	d->mem_handshake = NULL;
}

void mem_handshake_get_stats(struct vmnapd *d, struct mem_handshake_stats *st)
{
	struct mem_handshake *hs = d->mem_handshake;

	if (hs)
		*st = hs->st;
	else
		memset(st, 0, sizeof(*st));
}
