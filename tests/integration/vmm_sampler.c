// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmm_sampler.c - the VMM memory sampler (vmm_mem.h) that keeps
 * smaps_rollup reads off the event loop (TAP).  On this process:
 *   - a new pid is sampled at once (PSS of a live process is > 0)
 *   - pid 0 stops sampling: no sample, the thread idles (does not spin on
 *     its lock: the next set_pid returns, little CPU is burnt)
 *   - a pid set again is sampled again; free does not wait
 * Bounds are generous (seconds): nothing here is a timing assertion.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "tap.h"
#include "vmm_mem.h"

#define WAIT_NS		(5ULL * 1000000000ULL)

struct setter {
	struct vmm_mem_sampler *s;
	pid_t pid;
};

static void *set_pid_thread(void *arg)
{
	struct setter *st = arg;

	vmm_mem_sampler_set_pid(st->s, st->pid);
	return NULL;
}

/* set_pid from another thread, given WAIT_NS to return. */
static bool set_pid_returns(struct vmm_mem_sampler *s, pid_t pid)
{
	struct setter st = { s, pid };
	struct timespec until;
	pthread_t t;

	if (pthread_create(&t, NULL, set_pid_thread, &st))
		return false;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(WAIT_NS / 1000000000ULL);
	if (pthread_timedjoin_np(t, NULL, &until)) {
		pthread_detach(t);
		return false;
	}
	return true;
}

static bool wait_sample(struct vmm_mem_sampler *s, struct vmm_mem_sample *smp)
{
	uint64_t end = now_ns() + WAIT_NS;
	const struct timespec ts = { .tv_nsec = 10000000 };

	while (now_ns() < end) {
		if (vmm_mem_sampler_get(s, smp))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	struct vmm_mem_sampler *s = vmm_mem_sampler_new(100000000ULL);	/* 100 ms */
	struct vmm_mem_sample smp;
	const struct timespec second = { .tv_sec = 1 };
	double c0;
	bool have;

	if (!s)
		tap_bail("sampler: no thread");
	tap(!vmm_mem_sampler_get(s, &smp), "no sample before a pid");
	tap(set_pid_returns(s, getpid()), "set_pid(self) returns");
	have = wait_sample(s, &smp);
	tap(have && smp.pid == getpid() && smp.has_pss && smp.pss_bytes > 0,
	    "a new pid is sampled: PSS %llu bytes", (unsigned long long)smp.pss_bytes);
	tap(set_pid_returns(s, 0), "set_pid(0) returns");
	tap(!vmm_mem_sampler_get(s, &smp), "pid 0: no sample");
	c0 = cpu_s();
	nanosleep(&second, NULL);
	tap(cpu_s() - c0 < 0.5, "pid 0: the sampler idles (%.3f s of CPU in 1 s)", cpu_s() - c0);
	tap(set_pid_returns(s, getpid()), "set_pid(self) returns again");
	tap(wait_sample(s, &smp) && smp.pid == getpid(), "sampled again");
	vmm_mem_sampler_free(s);
	tap(true, "free returns");
	return tap_done();
}
