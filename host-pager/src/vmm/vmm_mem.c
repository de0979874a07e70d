// SPDX-License-Identifier: GPL-2.0-only
/* vmm_mem.c - a VMM's PSS and cgroup memory from /proc; see vmm_mem.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop.h"
#include "vmm_mem.h"

#define KIB		1024ull
#define LINE_MAX_LEN	512
#define CGROUP_ROOT	"/sys/fs/cgroup"

int vmm_pss_bytes(pid_t pid, uint64_t *bytes)
{
	char path[64], line[LINE_MAX_LEN];
	unsigned long long kib;
	FILE *f;
	int ret = -ENODATA;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Pss: %llu kB", &kib) == 1) {
			*bytes = kib * KIB;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

static int read_u64(const char *path, uint64_t *v)
{
	char buf[64];
	FILE *f = fopen(path, "re");
	int ret = -EINVAL;

	if (!f)
		return -errno;
	if (fgets(buf, sizeof(buf), f)) {
		char *end;
		unsigned long long x = strtoull(buf, &end, 10);

		if (end != buf) {
			*v = x;
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

int vmm_cgroup_memory_bytes(pid_t pid, uint64_t *bytes)
{
	char path[PATH_MAX], line[LINE_MAX_LEN];
	char v2[LINE_MAX_LEN] = "", v1[LINE_MAX_LEN] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	/* "0::/path" (v2) or "N:memory:/path" (v1 memory controller) */
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n'), *p;

		if (nl)
			*nl = '\0';
		if (!strncmp(line, "0::", 3))
			snprintf(v2, sizeof(v2), "%s", line + 3);
		else if ((p = strstr(line, ":memory:")))
			snprintf(v1, sizeof(v1), "%s", p + strlen(":memory:"));
	}
	fclose(f);
	if (v1[0]) {
		snprintf(path, sizeof(path), CGROUP_ROOT "/memory%s/memory.usage_in_bytes", v1);
		if (!read_u64(path, bytes))
			return 0;
	}
	if (v2[0]) {
		snprintf(path, sizeof(path), CGROUP_ROOT "%s/memory.current", v2);
		if (!read_u64(path, bytes))
			return 0;
		snprintf(path, sizeof(path), CGROUP_ROOT "/unified%s/memory.current", v2);
		if (!read_u64(path, bytes))
			return 0;
	}
	return -ENOENT;
}

/* ---- the sampler ------------------------------------------------------ */

struct vmm_mem_sampler {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* CLOCK_MONOTONIC */
	uint64_t period_ns;
	pid_t pid;		/* to sample; under @lock */
	bool stop;
	bool kick;		/* sample now (a new pid) */
	struct vmm_mem_sample last;
	atomic_int refs;	/* the owner and the thread */
};

static void sampler_put(struct vmm_mem_sampler *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void *sampler_thread(void *arg)
{
	struct vmm_mem_sampler *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		struct vmm_mem_sample smp = { .pid = s->pid };
		struct timespec until;
		uint64_t next;

		s->kick = false;
		if (smp.pid) {
			pthread_mutex_unlock(&s->lock);
			/* may wait on the VMM's mmap lock: nobody waits for us */
			smp.has_pss = !vmm_pss_bytes(smp.pid, &smp.pss_bytes);
			smp.has_cgroup = !vmm_cgroup_memory_bytes(smp.pid, &smp.cgroup_bytes);
			smp.at_ns = now_ns();
			pthread_mutex_lock(&s->lock);
			if (s->pid == smp.pid)
				s->last = smp;
		}
		if (s->stop || s->kick)
			continue;
		next = now_ns() + s->period_ns;
		until.tv_sec = (time_t)(next / 1000000000ull);
		until.tv_nsec = (long)(next % 1000000000ull);
		while (!s->stop && !s->kick &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&s->lock);
	sampler_put(s);
	return NULL;
}

struct vmm_mem_sampler *vmm_mem_sampler_new(uint64_t period_ns)
{
	struct vmm_mem_sampler *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	int err;

	if (!s)
		return NULL;
	s->period_ns = period_ns;
	atomic_init(&s->refs, 2);
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &ta, sampler_thread, s);
	pthread_attr_destroy(&ta);
	if (err) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		errno = err;
		return NULL;
	}
	return s;
}

void vmm_mem_sampler_set_pid(struct vmm_mem_sampler *s, pid_t pid)
{
	pthread_mutex_lock(&s->lock);
	if (s->pid != pid) {
		s->pid = pid;
		s->last = (struct vmm_mem_sample){ 0 };
		s->kick = true;
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

bool vmm_mem_sampler_get(struct vmm_mem_sampler *s, struct vmm_mem_sample *out)
{
	bool have;

	pthread_mutex_lock(&s->lock);
	*out = s->last;
	have = s->last.pid && s->last.pid == s->pid;
	pthread_mutex_unlock(&s->lock);
	return have;
}

void vmm_mem_sampler_free(struct vmm_mem_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	sampler_put(s);
}
