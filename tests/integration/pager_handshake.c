// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_handshake.c - hostile peers on the memory handshake socket: wrong
 * fd kinds, unaligned, overlapping or oversized regions, garbage and
 * truncated JSON, huge counts, too many fds, a peer that disconnects
 * mid-message or sends nothing.  Each is refused with its reason and
 * counted, no fd leaks, and the server still serves a valid peer (full
 * form and Firecracker form).  Real userfaultfd and memfd.  TAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "mem_handshake.h"
#include "pager.h"
#include "vmnapd.h"
#include "tap.h"

#define RAM_BYTES	(1u << 20)
#define HUGE_BYTES	(2u << 20)	/* one x86 huge page */
#define TOO_MANY_FDS	(MEM_HANDSHAKE_MAX_FDS + 8)
#define REPLY_TIMEOUT_S	(MEM_HANDSHAKE_TIMEOUT_MS / 1000 + 5)

static struct vmnapd d;
static char dir[] = "/tmp/vmnap-hs-XXXXXX";
static char sock_path[100];
static int call_fd;
static sem_t call_done;
static void (*call_fn)(void *);
static void *call_arg;

static void on_call(struct loop *l, int fd, uint32_t ev, void *arg)
{
	uint64_t v;

	(void)l;
	(void)ev;
	(void)arg;
	if (read(fd, &v, sizeof(v)) == sizeof(v)) {
		call_fn(call_arg);
		sem_post(&call_done);
	}
}

static void on_loop(void (*fn)(void *), void *arg)
{
	uint64_t one = 1;

	call_fn = fn;
	call_arg = arg;
	if (write(call_fd, &one, sizeof(one)) != sizeof(one))
		abort();
	while (sem_wait(&call_done) && errno == EINTR)
		;
}

static void *loop_main(void *arg)
{
	(void)arg;
	loop_run(d.loop);
	return NULL;
}

static int count_fds(void)
{
	DIR *dp = opendir("/proc/self/fd");
	int n = 0;

	while (dp && readdir(dp))
		n++;
	if (dp)
		closedir(dp);
	return n;
}

static int new_uffd(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0)
		return -1;
	return fd;
}

/*
 * Connect, send @len bytes of @msg with @fds, optionally hang up at once
 * (@hangup) and return the reply line (empty if the server closed).
 */
static void exchange(const char *msg, size_t len, const int *fds, int nfds,
		     bool hangup, char *reply, size_t rlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	char cbuf[CMSG_SPACE(sizeof(int) * TOO_MANY_FDS)];
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t got = 0;
	int s;

	reply[0] = 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(reply, rlen, "connect: %s", strerror(errno));
		if (s >= 0)
			close(s);
		return;
	}
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (nfds) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	if (len && sendmsg(s, &mh, MSG_NOSIGNAL) < 0) {
		snprintf(reply, rlen, "send: %s", strerror(errno));
		close(s);
		return;
	}
	if (hangup)
		shutdown(s, SHUT_WR);
	while (got < rlen - 1) {
		ssize_t r = recv(s, reply + got, rlen - 1 - got, 0);

		if (r <= 0)
			break;
		got += (size_t)r;
		if (memchr(reply, '\n', got))
			break;
	}
	reply[got] = 0;
	reply[strcspn(reply, "\n")] = 0;
	close(s);
}

static bool refused_for(const char *reply, const char *reason)
{
	char want[64];

	snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
	return strstr(reply, "\"ok\":false") && strstr(reply, want);
}

static void region_json(char *buf, size_t len, const char *vm, void *addr,
			uint64_t size, uint64_t off, uint64_t gpa)
{
	snprintf(buf, len, "{\"vm\":\"%s\",\"uffd\":0,\"regions\":[{\"base_host_virt_addr\":%llu,"
		 "\"size\":%llu,\"offset\":%llu,\"page_size\":4096,\"gpa\":%llu,\"memfd\":1}]}",
		 vm, (unsigned long long)(uintptr_t)addr, (unsigned long long)size,
		 (unsigned long long)off, (unsigned long long)gpa);
}

struct vm_query {
	const char *name;
	bool exists, has_pager, evictable;
};

static void query_cb(void *arg)
{
	struct vm_query *q = arg;
	struct vm *vm = vm_find(&d, q->name);
	struct pager_stats st;

	q->exists = vm != NULL;
	q->has_pager = vm && vm->pager;
	if (q->has_pager) {
		pager_get_stats(vm->pager, &st);
		q->evictable = st.evictable;
	}
}

static void stop_cb(void *arg)
{
	(void)arg;
	while (d.vms)
		vm_free(d.vms);
	mem_handshake_stop(&d);
	loop_stop(d.loop);
}

int main(void)
{
	char run_dir[64], store_dir[64], msg[8192], reply[1024], cmd[400];
	struct mem_handshake_stats hs;
	pthread_t lt;
	int uffd, memfd, pipefd[2], filefd, hugefd, fds[TOO_MANY_FDS], fd_before;
	int fd_refusals = 6;
	void *ram, *anon;
	char *big;

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERR);
	uffd = new_uffd();
	if (uffd < 0)
		return tap_skip_all("no userfaultfd: %s", strerror(errno));
	if (!mkdtemp(dir))
		return 1;
	snprintf(run_dir, sizeof(run_dir), "%s/run", dir);
	snprintf(store_dir, sizeof(store_dir), "%s/store", dir);
	snprintf(sock_path, sizeof(sock_path), "%s/mem.sock", run_dir);
	mkdir(run_dir, 0700);
	mkdir(store_dir, 0700);
	d.cfg.run_dir = run_dir;
	d.cfg.store_dir = store_dir;
	d.loop = loop_new();
	call_fd = eventfd(0, EFD_CLOEXEC);
	sem_init(&call_done, 0, 0);
	loop_add_fd(d.loop, call_fd, EPOLLIN, on_call, NULL);
	if (mem_handshake_start(&d, NULL, NULL)) {
		tap_bail("cannot listen");
		return 1;
	}
	pthread_create(&lt, NULL, loop_main, NULL);
	{
		struct stat st;

		tap(!stat(sock_path, &st) && (st.st_mode & 0777) == 0600, "mem.sock is 0600");
	}

	memfd = memfd_create("memory-backend-memfd", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, RAM_BYTES) < 0 || pipe(pipefd) < 0)
		return 1;
	ram = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	snprintf(cmd, sizeof(cmd), "%s/plainfile", dir);
	filefd = open(cmd, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (ram == MAP_FAILED || filefd < 0 || ftruncate(filefd, RAM_BYTES) < 0)
		return 1;
	fd_before = count_fds();

	exchange("hello{", 6, NULL, 0, true, reply, sizeof(reply));
	tap(refused_for(reply, "json"), "garbage JSON refused: %s", reply);

	snprintf(msg, sizeof(msg), "{\"vm\":\"t\",\"regions\":[{\"size\":");
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, true, reply, sizeof(reply));
	tap(refused_for(reply, "truncated"), "peer hanging up mid-message (fds attached) refused: %s", reply);

	region_json(msg, sizeof(msg), "t", ram, RAM_BYTES, 0, 0);
	exchange(msg, strlen(msg), NULL, 0, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "no fds refused: %s", reply);

	exchange(msg, strlen(msg), (int[]){ pipefd[0], memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "a pipe as userfaultfd refused: %s", reply);

	exchange(msg, strlen(msg), (int[]){ uffd, filefd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "a regular file as memfd refused: %s", reply);

	exchange(msg, strlen(msg), (int[]){ uffd, uffd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "a userfaultfd as memfd refused: %s", reply);

	/* QEMU's hugetlb=on memfd (or a hugetlbfs mem-path): refused by name */
	hugefd = memfd_create("memory-backend-memfd", MFD_CLOEXEC | MFD_HUGETLB);
	if (hugefd >= 0 && ftruncate(hugefd, HUGE_BYTES) == 0) {
		region_json(msg, sizeof(msg), "huge", ram, RAM_BYTES, 0, 0);
		exchange(msg, strlen(msg), (int[]){ uffd, hugefd }, 2, false, reply, sizeof(reply));
		tap(refused_for(reply, "fd") && strstr(reply, "hugetlbfs"),
		    "a hugetlbfs memfd refused, saying why: %s", reply);
		fd_refusals++;
	} else {
		tap_skip("a hugetlbfs memfd refused", "no MFD_HUGETLB here: %s", strerror(errno));
	}
	if (hugefd >= 0)
		close(hugefd);

	exchange(msg, strlen(msg), (int[]){ uffd, memfd, pipefd[1] }, 3, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "an extra unreferenced fd refused: %s", reply);

	for (int i = 0; i < TOO_MANY_FDS; i++)
		fds[i] = i % 2 ? memfd : uffd;
	exchange(msg, strlen(msg), fds, TOO_MANY_FDS, false, reply, sizeof(reply));
	tap(refused_for(reply, "fd"), "%d fds refused: %s", TOO_MANY_FDS, reply);

	region_json(msg, sizeof(msg), "t", ram, RAM_BYTES - 100, 0, 0);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "unaligned size refused: %s", reply);

	region_json(msg, sizeof(msg), "t", (char *)ram + 1, RAM_BYTES, 0, 0);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "unaligned address refused: %s", reply);

	region_json(msg, sizeof(msg), "t", ram, 2 * RAM_BYTES, 0, 0);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "region beyond the memfd refused: %s", reply);

	region_json(msg, sizeof(msg), "t", ram, 1ull << 62, 0, 0);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "huge region refused: %s", reply);

	snprintf(msg, sizeof(msg),
		 "{\"vm\":\"t\",\"regions\":[{\"base_host_virt_addr\":%llu,\"size\":%u,\"offset\":0,"
		 "\"gpa\":0,\"memfd\":1},{\"base_host_virt_addr\":%llu,\"size\":%u,\"offset\":%u,"
		 "\"gpa\":4096,\"memfd\":1}]}",
		 (unsigned long long)(uintptr_t)ram, RAM_BYTES / 2,
		 (unsigned long long)(uintptr_t)ram + RAM_BYTES / 2, RAM_BYTES / 2, RAM_BYTES / 2);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "overlapping gpa ranges refused: %s", reply);

	/* one memfd under two fds (dup, and re-opened through /proc): its
	 * offsets overlap although the fd indexes differ */
	{
		int dupfd = dup(memfd), reopened;
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
		reopened = open(path, O_RDWR | O_CLOEXEC);
		snprintf(msg, sizeof(msg),
			 "{\"vm\":\"t\",\"uffd\":0,\"regions\":[{\"base_host_virt_addr\":%llu,"
			 "\"size\":%u,\"offset\":0,\"gpa\":0,\"memfd\":1},"
			 "{\"base_host_virt_addr\":%llu,\"size\":%u,\"offset\":%u,"
			 "\"gpa\":%llu,\"memfd\":2}]}",
			 (unsigned long long)(uintptr_t)ram, RAM_BYTES / 2,
			 (unsigned long long)(uintptr_t)ram + RAM_BYTES / 2, RAM_BYTES / 2,
			 RAM_BYTES / 4, 1ull << 30);
		exchange(msg, strlen(msg), (int[]){ uffd, memfd, dupfd }, 3, false, reply,
			 sizeof(reply));
		tap(refused_for(reply, "region") && strstr(reply, "same memfd"),
		    "overlapping offsets of one memfd under two dup'ed fds refused: %s", reply);
		tap(reopened >= 0, "memfd re-opened through /proc/self/fd");
		exchange(msg, strlen(msg), (int[]){ uffd, memfd, reopened }, 3, false, reply,
			 sizeof(reply));
		tap(refused_for(reply, "region") && strstr(reply, "same memfd"),
		    "overlapping offsets of one memfd under a re-opened fd refused: %s", reply);
		close(dupfd);
		if (reopened >= 0)
			close(reopened);
	}

	{
		size_t n = 0;

		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "{\"vm\":\"t\",\"regions\":[");
		for (int i = 0; i < 1000 && n < sizeof(msg) - 8; i++)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s{}", i ? "," : "");
		snprintf(msg + n, sizeof(msg) - n, "]}");
	}
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "region"), "a huge region count refused: %s", reply);

	big = malloc(MEM_HANDSHAKE_MAX_MSG + 16);
	memset(big, ' ', MEM_HANDSHAKE_MAX_MSG + 16);
	big[MEM_HANDSHAKE_MAX_MSG + 15] = '[';
	exchange(big, MEM_HANDSHAKE_MAX_MSG + 16, NULL, 0, false, reply, sizeof(reply));
	tap(refused_for(reply, "too_large"), "an oversized message refused: %s", reply);
	free(big);

	region_json(msg, sizeof(msg), "../etc", ram, RAM_BYTES, 0, 0);
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "vm"), "a bad VM name refused: %s", reply);

	snprintf(msg, sizeof(msg), "{\"vm\":\"t\",\"vm\":\"u\",\"regions\":[]}");
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "json"), "duplicate keys refused: %s", reply);

	snprintf(msg, sizeof(msg), "{\"vm\":\"t\",\"regions\":[{\"base_host_virt_addr\":-4096,"
		 "\"size\":4096,\"offset\":0,\"gpa\":0,\"memfd\":1}]}");
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "field"), "a negative address refused: %s", reply);

	exchange("", 0, NULL, 0, false, reply, sizeof(reply));
	tap(refused_for(reply, "timeout"), "a silent peer times out: %s", reply);

	/* A re-handshake must name a store that exists: never a fresh one */
	region_json(msg, sizeof(msg), "again", ram, RAM_BYTES, 0, 0);
	msg[strlen(msg) - 1] = 0;
	strcat(msg, ",\"store_id\":\"0123456789abcdef0123456789abcdef\"}");
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "store"), "a store id without its store refused: %s", reply);
	region_json(msg, sizeof(msg), "again", ram, RAM_BYTES, 0, 0);
	msg[strlen(msg) - 1] = 0;
	strcat(msg, ",\"store_id\":\"../../etc/passwd\"}");
	exchange(msg, strlen(msg), (int[]){ uffd, memfd }, 2, false, reply, sizeof(reply));
	tap(refused_for(reply, "field"), "a malformed store id refused: %s", reply);

	usleep(100000);
	tap(count_fds() == fd_before, "no fd leaked by refusals (%d -> %d)", fd_before, count_fds());

	/* A valid peer is still served after all that. */
	region_json(msg, sizeof(msg), "good", ram, RAM_BYTES, 0, 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		struct vm_query q = { .name = "good" };
		char cbuf[CMSG_SPACE(2 * sizeof(int))];
		struct iovec iov = { .iov_base = msg, .iov_len = strlen(msg) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ssize_t r;

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(c), (int[]){ uffd, memfd }, 2 * sizeof(int));
		connect(s, (struct sockaddr *)&sa, sizeof(sa));
		sendmsg(s, &mh, MSG_NOSIGNAL);
		r = recv(s, reply, sizeof(reply) - 1, 0);
		reply[r > 0 ? r : 0] = 0;
		reply[strcspn(reply, "\n")] = 0;
		tap(strstr(reply, "\"ok\":true") && strstr(reply, "\"evictable\":true"),
		    "a valid peer is accepted: %s", reply);
		on_loop(query_cb, &q);
		tap(q.exists && q.has_pager && q.evictable, "vm 'good' registered with a pager");

		{
			int memfd2 = memfd_create("memory-backend-memfd", MFD_CLOEXEC);

			ftruncate(memfd2, RAM_BYTES);
			exchange(msg, strlen(msg), (int[]){ uffd, memfd2 }, 2, false, reply, sizeof(reply));
			tap(refused_for(reply, "vm"), "another memfd for the same VM refused: %s", reply);
			close(memfd2);
		}
		close(s);	/* the mapper goes: the pager is released */
		for (int i = 0; i < 100; i++) {
			on_loop(query_cb, &q);
			if (!q.has_pager)
				break;
			usleep(10000);
		}
		tap(!q.has_pager, "pager released when the mapper's connection closed");
	}

	/* The plain Firecracker form: one userfaultfd, anonymous memory. */
	anon = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	snprintf(msg, sizeof(msg), "[{\"base_host_virt_addr\":%llu,\"size\":%u,\"offset\":0,"
		 "\"page_size\":4096}]", (unsigned long long)(uintptr_t)anon, RAM_BYTES);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		char cbuf[CMSG_SPACE(sizeof(int))], name[32];
		struct iovec iov = { .iov_base = msg, .iov_len = strlen(msg) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		struct vm_query q = { .name = name };
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ssize_t r;

		snprintf(name, sizeof(name), "fc-%d", (int)getpid());
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &uffd, sizeof(int));
		connect(s, (struct sockaddr *)&sa, sizeof(sa));
		sendmsg(s, &mh, MSG_NOSIGNAL);
		r = recv(s, reply, sizeof(reply) - 1, 0);
		reply[r > 0 ? r : 0] = 0;
		reply[strcspn(reply, "\n")] = 0;
		on_loop(query_cb, &q);
		tap(strstr(reply, "\"ok\":true") && strstr(reply, "\"evictable\":false") &&
		    q.has_pager && !q.evictable,
		    "Firecracker form accepted, marked not evictable: %s", reply);
		close(s);
	}

	/* QEMU's memory-backend-file on tmpfs (mem-path=/dev/shm, share=on) */
	{
		char shm[64];
		int shmfd;
		void *shmram;

		snprintf(shm, sizeof(shm), "/dev/shm/vmnap-hs-%d", (int)getpid());
		shmfd = open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		unlink(shm);
		shmram = shmfd < 0 || ftruncate(shmfd, RAM_BYTES) < 0 ? MAP_FAILED :
			 mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, shmfd, 0);
		if (shmram == MAP_FAILED) {
			tap_bail("a file in /dev/shm: %s", strerror(errno));
			return 1;
		}
		region_json(msg, sizeof(msg), "shm", shmram, RAM_BYTES, 0, 0);
		exchange(msg, strlen(msg), (int[]){ uffd, shmfd }, 2, false, reply, sizeof(reply));
		tap(strstr(reply, "\"ok\":true") && strstr(reply, "\"evictable\":true"),
		    "a tmpfs file (memory-backend-file on /dev/shm) is accepted: %s", reply);
		munmap(shmram, RAM_BYTES);
		close(shmfd);
	}

	mem_handshake_get_stats(&d, &hs);
	{
		uint64_t total = 0;

		for (int i = 0; i < HS_REFUSALS; i++)
			total += hs.refused[i];
		tap(hs.accepted == 3 && total == 18 + (uint64_t)fd_refusals &&
		    hs.refused[HS_REFUSE_FD] == (uint64_t)fd_refusals &&
		    hs.refused[HS_REFUSE_REGION] == 8 && hs.refused[HS_REFUSE_STORE] == 1,
		    "counters: %llu accepted, %llu refused (fd %llu, region %llu)",
		    (unsigned long long)hs.accepted, (unsigned long long)total,
		    (unsigned long long)hs.refused[HS_REFUSE_FD],
		    (unsigned long long)hs.refused[HS_REFUSE_REGION]);
	}
	on_loop(stop_cb, NULL);
	pthread_join(lt, NULL);
	pager_reapers_wait();	/* vm_free handed the pagers to reapers */
	loop_free(d.loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return tap_done();
}
