// SPDX-License-Identifier: GPL-2.0-only
/*
 * pressure_cgroup.c - host memory pressure offloads a paused VM before the
 * VMs' cgroup hits its limit (mock VMM, mockvmm.h; a real cgroup v1 memory
 * controller).  TAP.
 *
 * The test makes a memory cgroup M (a child of its own) and a freezer
 * cgroup F.  The mock VMM (64 MiB of guest RAM by default) starts in M and
 * is moved to F, which is its pause backend; M's limit is set so that the
 * VMM's usage is about 70 % of it.  vmnapd's side watches M
 * (pressure_watch, 20 ms interval), the VM is paused by hand (a cycle the
 * normal policy never offloads), then a second process in M - another VM
 * growing - takes 1 MiB at a time.  When M reaches the critical level the
 * watch offloads the paused VM: M's usage drops by most of the guest RAM
 * while memory.failcnt is still 0, and the "pressure" and
 * "pressure_offload" events carry the reading.  Without the watch the
 * grower reaches the limit first and the test fails.
 *
 *   pressure_cgroup [MiB]	(default 64)
 *
 * Skips without a cgroup v1 memory and freezer controller it can write.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "coord.h"
#include "events.h"
#include "mockvmm.h"
#include "pressure.h"
#include "pressure_watch.h"
#include "vm_control.h"

#define V1	"/sys/fs/cgroup"
#define STEP_MIB	1
#define POLL_NS		(5 * 1000000ull)
#define SAMPLES_WAIT_S	10	/* generous: the loop shares 2 busy cores */

static char mem_cg[PATH_MAX / 2], frz_cg[PATH_MAX / 2], mem_parent[PATH_MAX / 4];

static int write_str(const char *dir, const char *file, const char *val)
{
	char p[PATH_MAX];
	int fd, ret = 0;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

static int write_pid(const char *dir, pid_t pid)
{
	char b[32];

	snprintf(b, sizeof(b), "%d", (int)pid);
	return write_str(dir, "cgroup.procs", b);
}

static uint64_t read_u64_file(const char *dir, const char *file)
{
	char p[PATH_MAX], b[64] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	f = fopen(p, "re");
	if (!f || !fgets(b, sizeof(b), f)) {
		if (f)
			fclose(f);
		return UINT64_MAX;
	}
	fclose(f);
	return strtoull(b, NULL, 10);
}

/* This process's memory cgroup v1 directory, from /proc/self/cgroup. */
static int own_memory_cgroup(char *out, size_t n)
{
	char line[PATH_MAX];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *c = strstr(line, ":memory:");

		if (!c)
			continue;
		c += strlen(":memory:");
		c[strcspn(c, "\n")] = '\0';
		snprintf(out, n, V1 "/memory%s", strcmp(c, "/") ? c : "");
		ret = 0;
	}
	fclose(f);
	return ret;
}

static const char *setup_cgroups(void)
{
	static char why[PATH_MAX + 64];

	if (geteuid() != 0)
		return "needs root to make cgroups";
	if (access(V1 "/memory/memory.limit_in_bytes", F_OK))
		return "no cgroup v1 memory controller at " V1 "/memory";
	if (access(V1 "/freezer/freezer.state", F_OK) && access(V1 "/freezer", F_OK))
		return "no cgroup v1 freezer controller at " V1 "/freezer";
	if (own_memory_cgroup(mem_parent, sizeof(mem_parent)))
		return "cannot find this process's memory cgroup";
	snprintf(mem_cg, sizeof(mem_cg), "%s/vmnap-pressure.%d", mem_parent, (int)getpid());
	snprintf(frz_cg, sizeof(frz_cg), V1 "/freezer/vmnap-pressure.%d", (int)getpid());
	if (mkdir(mem_cg, 0700)) {
		snprintf(why, sizeof(why), "cannot make %s: %s", mem_cg, strerror(errno));
		return why;
	}
	if (mkdir(frz_cg, 0700)) {
		snprintf(why, sizeof(why), "cannot make %s: %s", frz_cg, strerror(errno));
		rmdir(mem_cg);
		return why;
	}
	return NULL;
}

static void remove_cgroups(void)
{
	for (int i = 0; i < 50; i++) {	/* exited tasks leave a moment later */
		if ((!rmdir(mem_cg) || errno == ENOENT) && (!rmdir(frz_cg) || errno == ENOENT))
			return;
		usleep(100000);
	}
	tap_diag("cannot remove %s or %s: %s", mem_cg, frz_cg, strerror(errno));
}

/* The grower: joins M, then takes STEP_MIB per byte read, answers a byte. */
static pid_t grower_spawn(int *to, int *from)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe(in) || pipe(out))
		return -1;
	pid = fork();
	if (pid == 0) {
		char c;

		close(in[1]);
		close(out[0]);
		if (write_pid(mem_cg, getpid()))
			_exit(2);
		while (read(in[0], &c, 1) == 1) {
			char *p = mmap(NULL, STEP_MIB << 20, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED)
				_exit(3);
			memset(p, 0x5a, STEP_MIB << 20);
			if (write(out[1], "k", 1) != 1)
				_exit(4);
		}
		_exit(0);
	}
	close(in[0]);
	close(out[1]);
	*to = in[1];
	*from = out[0];
	return pid;
}

struct attach_call {
	int ret;
	char err[256];
};

static void attach_cb(struct harness *h, void *arg)
{
	struct attach_call *a = arg;
	struct vm *vm = vm_find(&h->d, VM_NAME);
	struct vm_control_spec spec = {
		.has_pause = true,
		.pause = { .kind = PAUSE_FREEZER },
		.managed = true,
		.link_kind = VM_LINK_NONE,
	};
	struct pressure_config pc;

	snprintf(spec.pause.path, sizeof(spec.pause.path), "%s", frz_cg);
	if (!vm) {
		a->ret = -ENOENT;
		snprintf(a->err, sizeof(a->err), "no VM %s", VM_NAME);
		return;
	}
	a->ret = vm_control_attach(vm, &spec, a->err, sizeof(a->err));
	if (a->ret)
		return;
	pressure_config_default(&pc);
	pc.interval_ns = 20 * 1000000ull;
	a->ret = pressure_watch_start(&h->d, mem_cg, &pc);
	if (a->ret)
		snprintf(a->err, sizeof(a->err), "pressure watch: %s", strerror(-a->ret));
}

static void pause_cb(struct harness *h, void *arg)
{
	*(int *)arg = coord_manual_pause(vm_find(&h->d, VM_NAME)->coord);
}

struct look {
	enum coord_state state;
	uint64_t samples;
	char level[16];
};

static void look_cb(struct harness *h, void *arg)
{
	struct look *l = arg;
	json_t *o = pressure_watch_host_json(&h->d);
	json_t *p = json_object_get(o, "pressure");
	const char *lv = json_string_value(json_object_get(p, "level"));

	l->state = coord_state(vm_find(&h->d, VM_NAME)->coord);
	l->samples = (uint64_t)json_integer_value(json_object_get(p, "samples"));
	snprintf(l->level, sizeof(l->level), "%s", lv ? lv : "?");
	json_decref(o);
}

static void host_cb(struct harness *h, void *arg)
{
	*(json_t **)arg = pressure_watch_host_json(&h->d);
}

static void resume_cb(struct harness *h, void *arg)
{
	*(int *)arg = coord_manual_resume(vm_find(&h->d, VM_NAME)->coord);
}

static void stop_watch_cb(struct harness *h, void *arg)
{
	(void)arg;
	pressure_watch_stop(&h->d);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

/* Wait until the watch took two more samples (so it saw what is now). */
static struct look settle(struct harness *h)
{
	struct look l;
	uint64_t start, end = mono_ns() + SAMPLES_WAIT_S * 1000000000ull;

	on_loop(h, look_cb, &l);
	start = l.samples;
	while (l.samples < start + 2 && mono_ns() < end) {
		sleep_ns(POLL_NS);
		on_loop(h, look_cb, &l);
	}
	return l;
}

/* How many events of @type are in @path; the first whose @key is @val
 * (any, when @key is NULL) in *@first (new reference, or NULL). */
static unsigned int find_events(const char *path, const char *type, const char *key,
				const char *val, json_t **first)
{
	char line[EVENTS_LINE_MAX + 2];
	unsigned int n = 0;
	FILE *f = fopen(path, "re");

	*first = NULL;
	while (f && fgets(line, sizeof(line), f)) {
		json_t *o = json_loads(line, 0, NULL);

		if (o && !strcmp(json_string_value(json_object_get(o, "type")) ?: "", type)) {
			n++;
			if (!*first && (!key || !strcmp(json_string_value(json_object_get(o, key)) ?: "",
							val))) {
				*first = o;
				continue;
			}
		}
		json_decref(o);
	}
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	struct harness h = { 0 };
	uint64_t mib = mockvmm_arg(argc, argv, 1, 64);
	char ans[LINE_MAX_LEN], ev_path[PATH_MAX], buf[32];
	struct attach_call ac = { 0 };
	struct look l = { 0 };
	uint64_t u0, limit, usage_at = 0, after, grown = 0, fail_at = UINT64_MAX;
	const char *why;
	int to_g = -1, from_g = -1, ret;
	pid_t grower = -1;
	json_t *ev, *host = NULL;
	bool offloaded = false;

	if (mockvmm_init(argc, argv))
		return 0;
	why = setup_cgroups();
	if (why)
		return tap_skip_all("%s", why);
	snprintf(ev_path, sizeof(ev_path), "/tmp/vmnap-pressure-%d.jsonl", (int)getpid());
	unlink(ev_path);
	if (events_open(&h.d, ev_path) || harness_start(&h, NULL)) {
		tap_bail("harness setup failed");
		remove_cgroups();
		return 1;
	}
	/* the VMM starts (and fills its guest RAM) in M: we go there to fork it */
	if (write_pid(mem_cg, getpid()) || vmm_spawn(&h, argv[0], mib, 1) ||
	    write_pid(mem_parent, getpid())) {
		tap_bail("cannot start the mock VMM in %s: %s", mem_cg, strerror(errno));
		goto out;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready in %s (%s)", mem_cg, ans);
	tap(!write_pid(frz_cg, h.vmm), "mock VMM in freezer cgroup %s", frz_cg);
	u0 = read_u64_file(mem_cg, "memory.usage_in_bytes");
	limit = (u0 / 7 * 10 + 0xfffff) & ~0xfffffull;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)limit);
	tap(u0 >= (mib << 19) && !write_str(mem_cg, "memory.limit_in_bytes", buf),
	    "M holds the guest RAM: usage %llu MiB, limit set to %llu MiB",
	    (unsigned long long)(u0 >> 20), (unsigned long long)(limit >> 20));

	on_loop(&h, attach_cb, &ac);
	if (!tap(!ac.ret, "coordinator (freezer) and pressure watch attached (%s)", ac.err))
		goto out;
	l = settle(&h);
	tap(!strcmp(l.level, "normal"), "level at %llu %% of the limit: %s",
	    (unsigned long long)(u0 * 100 / limit), l.level);
	on_loop(&h, pause_cb, &ret);
	for (uint64_t end = mono_ns() + SAMPLES_WAIT_S * 1000000000ull;
	     l.state != COORD_PAUSED && mono_ns() < end; sleep_ns(POLL_NS))
		on_loop(&h, look_cb, &l);
	tap(!ret && l.state == COORD_PAUSED, "VM paused by hand (freezer): %s",
	    coord_state_name(l.state));
	l = settle(&h);
	tap(l.state == COORD_PAUSED, "the normal policy leaves a hand-paused VM in RAM (%s)",
	    coord_state_name(l.state));

	grower = grower_spawn(&to_g, &from_g);
	if (grower < 0) {
		tap_bail("cannot fork the grower: %s", strerror(errno));
		goto out;
	}
	/* grow until the watch offloads; never past 1 MiB short of the limit */
	while (read_u64_file(mem_cg, "memory.usage_in_bytes") + (2ull << 20) < limit) {
		char c;

		if (write(to_g, "g", 1) != 1 || read(from_g, &c, 1) != 1)
			break;
		grown += STEP_MIB;
		l = settle(&h);
		if (l.state == COORD_OFFLOADING || l.state == COORD_OFFLOADED) {
			usage_at = read_u64_file(mem_cg, "memory.usage_in_bytes");
			fail_at = read_u64_file(mem_cg, "memory.failcnt");
			offloaded = true;
			break;
		}
	}
	if (!tap(offloaded, "the paused VM was offloaded as M grew (%llu MiB grown, level %s)",
		 (unsigned long long)grown, l.level)) {
		char *dump;

		on_loop(&h, host_cb, &host);
		dump = json_dumps(host, JSON_COMPACT);
		tap_diag("usage %llu, GET /host: %s",
			 (unsigned long long)read_u64_file(mem_cg, "memory.usage_in_bytes"),
			 dump ? dump : "?");
		free(dump);
		json_decref(host);
		host = NULL;
	}
	tap(offloaded && usage_at < limit && fail_at == 0,
	    "... before the limit was hit: usage %llu of %llu MiB, failcnt %llu",
	    (unsigned long long)(usage_at >> 20), (unsigned long long)(limit >> 20),
	    (unsigned long long)fail_at);
	for (uint64_t end = mono_ns() + 60 * 1000000000ull;
	     offloaded && l.state == COORD_OFFLOADING && mono_ns() < end; sleep_ns(POLL_NS))
		on_loop(&h, look_cb, &l);
	after = read_u64_file(mem_cg, "memory.usage_in_bytes");
	tap(l.state == COORD_OFFLOADED && after + (mib << 19) < usage_at,
	    "offload done (%s): M's usage fell from %llu to %llu MiB", coord_state_name(l.state),
	    (unsigned long long)(usage_at >> 20), (unsigned long long)(after >> 20));

	find_events(ev_path, "pressure", "to", "critical", &ev);
	tap(ev &&
	    json_integer_value(json_object_get(json_object_get(ev, "reading"),
					       "usage_permille")) >= 900,
	    "a \"pressure\" event: to critical, with the reading's usage_permille");
	json_decref(ev);
	tap(find_events(ev_path, "pressure_offload", NULL, NULL, &ev) == 1 && ev &&
	    !strcmp(json_string_value(json_object_get(ev, "vm")) ?: "", VM_NAME) &&
	    json_integer_value(json_object_get(ev, "resident_bytes")) >= (json_int_t)(mib << 19) &&
	    json_object_get(json_object_get(ev, "reading"), "usage_bytes"),
	    "one \"pressure_offload\" event for %s with its resident bytes and the reading",
	    VM_NAME);
	json_decref(ev);

	on_loop(&h, host_cb, &host);
	{
		char *dump = json_dumps(host, JSON_COMPACT);

		tap_diag("GET /host: %s", dump ? dump : "?");
		free(dump);
	}
	{
		json_t *t = json_object_get(host, "totals"), *p = json_object_get(host, "pressure");

		tap(json_integer_value(json_object_get(t, "expected_return_bytes")) > 0 &&
		    json_integer_value(json_object_get(json_object_get(host, "host"), "mem_total_bytes")) > 0 &&
		    json_object_get(json_object_get(host, "admission"), "cgroup_headroom_bytes") &&
		    !strcmp(json_string_value(json_object_get(p, "cgroup_version")) ?: "", "v1"),
		    "GET /host: expected_return_bytes %lld, cgroup headroom %lld",
		    (long long)json_integer_value(json_object_get(t, "expected_return_bytes")),
		    (long long)json_integer_value(json_object_get(json_object_get(host, "admission"),
								   "cgroup_headroom_bytes")));
	}
	json_decref(host);
	on_loop(&h, resume_cb, &ret);
	for (uint64_t end = mono_ns() + SAMPLES_WAIT_S * 1000000000ull;
	     l.state != COORD_RUNNING && mono_ns() < end; sleep_ns(POLL_NS))
		on_loop(&h, look_cb, &l);
	tap(l.state == COORD_RUNNING, "resumed by hand (%s)", coord_state_name(l.state));
out:
	if (grower > 0) {
		kill(grower, SIGKILL);
		waitpid(grower, NULL, 0);
	}
	on_loop(&h, stop_watch_cb, NULL);
	write_str(frz_cg, "freezer.state", "THAWED");
	if (h.vmm > 0) {
		kill(h.vmm, SIGKILL);
		wait_vmm_exit(&h);
	}
	harness_stop(&h);
	events_close(&h.d);
	unlink(ev_path);
	remove_cgroups();
	return tap_done();
}
