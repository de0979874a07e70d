// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_backends.c - the four pause backends (pause.h), TAP.
 *
 *   qmp          against a real QEMU (qemu-system-x86_64 -machine none, TCG,
 *                with a QMP socket): stop / cont, then query-status agrees.
 *   freezer v2   a real cgroup2 "cgroup.freeze" on a cgroup this test
 *                creates with a child process in it (skips if the machine
 *                does not allow it).
 *   freezer v1   a real v1 freezer cgroup if one is mounted and writable
 *                (skips otherwise), with the empty frozen cgroup the
 *                backend keeps at the hierarchy's root while it is open,
 *                and always a FAKE cgroupfs directory (a plain
 *                freezer.state file) - that one says so.  On the fake
 *                one, calls through pause_start() on a loop: one worker
 *                thread for all, and a release that resumes and ends it.
 *   firecracker  and cloud-hypervisor: RECORDED request/response exchanges
 *                served by a unix-socket server in this test (no KVM here,
 *                so no real Firecracker or Cloud Hypervisor): the test checks
 *                the exact request line and JSON body the backend sends and
 *                its handling of the recorded success and error replies.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pause.h"
#include "tap.h"

/* ---- recorded REST exchanges ---------------------------------------- */

struct exchange {
	const char *request_line;	/* "PATCH /vm HTTP/1.1" */
	const char *body_json;		/* expected JSON body, NULL: none */
	const char *response;		/* the recorded raw reply */
};

/* Firecracker v1.x API (swagger: PATCH /vm, VmState Paused|Resumed). */
static const struct exchange fc_exchanges[] = {
	{ "PATCH /vm HTTP/1.1", "{\"state\": \"Paused\"}",
	  "HTTP/1.1 204 No Content\r\nServer: Firecracker API\r\nConnection: keep-alive\r\n\r\n" },
	{ "PATCH /vm HTTP/1.1", "{\"state\": \"Resumed\"}",
	  "HTTP/1.1 204 No Content\r\nServer: Firecracker API\r\nConnection: keep-alive\r\n\r\n" },
	{ "PATCH /vm HTTP/1.1", "{\"state\": \"Paused\"}",
	  "HTTP/1.1 400 Bad Request\r\nServer: Firecracker API\r\nContent-Type: application/json\r\n"
	  "Content-Length: 71\r\n\r\n"
	  "{\"fault_message\":\"The requested operation is not supported: VM is paused\"}" },
};

/* Cloud Hypervisor REST API (PUT /api/v1/vm.pause, vm.resume; no body). */
static const struct exchange chv_exchanges[] = {
	{ "PUT /api/v1/vm.pause HTTP/1.1", NULL, "HTTP/1.1 204 \r\nServer: Cloud Hypervisor API\r\n"
	  "Connection: keep-alive\r\n\r\n" },
	{ "PUT /api/v1/vm.resume HTTP/1.1", NULL, "HTTP/1.1 204 \r\nServer: Cloud Hypervisor API\r\n"
	  "Connection: keep-alive\r\n\r\n" },
	{ "PUT /api/v1/vm.resume HTTP/1.1", NULL, "HTTP/1.1 500 \r\nServer: Cloud Hypervisor API\r\n"
	  "Content-Length: 58\r\n\r\nError from API: The VM could not be resumed: InvalidState" },
};

struct server {
	int lfd;
	const struct exchange *ex;
	unsigned int n;
	unsigned int matched;	/* requests equal to the recording */
	char last_error[256];
};

static size_t content_length(const char *hdrs)
{
	const char *p = strcasestr(hdrs, "\r\nContent-Length:");

	return p ? strtoul(p + strlen("\r\nContent-Length:"), NULL, 10) : 0;
}

static bool json_equal_str(const char *a, const char *b)
{
	json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
	bool eq = ja && jb && json_equal(ja, jb);

	json_decref(ja);
	json_decref(jb);
	return eq;
}

static void *serve(void *arg)
{
	struct server *s = arg;

	for (unsigned int i = 0; i < s->n; i++) {
		char buf[8192];
		size_t len = 0;
		char *end = NULL;
		int fd = accept(s->lfd, NULL, NULL);

		if (fd < 0)
			break;
		/* libcurl may reuse the connection: serve every request on it */
		for (;;) {
			ssize_t r;

			while (!(end = memmem(buf, len, "\r\n\r\n", 4)) && len < sizeof(buf) - 1) {
				r = read(fd, buf + len, sizeof(buf) - 1 - len);
				if (r <= 0)
					goto next_conn;
				len += (size_t)r;
			}
			buf[len] = '\0';
			{
				size_t hlen = (size_t)(end - buf) + 4, blen = content_length(buf);
				char line[128], body[1024] = "";

				while (len < hlen + blen) {
					r = read(fd, buf + len, sizeof(buf) - 1 - len);
					if (r <= 0)
						goto next_conn;
					len += (size_t)r;
				}
				snprintf(line, sizeof(line), "%.*s", (int)strcspn(buf, "\r"), buf);
				snprintf(body, sizeof(body), "%.*s", (int)blen, buf + hlen);
				if (strcmp(line, s->ex[i].request_line))
					snprintf(s->last_error, sizeof(s->last_error), "request %u: got '%.100s'", i, line);
				else if (s->ex[i].body_json ? !json_equal_str(body, s->ex[i].body_json) : blen != 0)
					snprintf(s->last_error, sizeof(s->last_error), "request %u: body '%.200s'", i, body);
				else
					s->matched++;
				if (write(fd, s->ex[i].response, strlen(s->ex[i].response)) < 0)
					break;
				memmove(buf, buf + hlen + blen, len - hlen - blen);
				len -= hlen + blen;
				if (++i == s->n)
					break;
			}
		}
next_conn:
		close(fd);
		if (i >= s->n)
			break;
		i--;	/* the for loop's ++: this exchange is still due */
	}
	return NULL;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0)
		return -1;
	return fd;
}

static void test_rest(const char *name, enum pause_kind kind, const struct exchange *ex,
		      unsigned int n, const char *dir)
{
	struct pause_spec spec = { .kind = kind, .timeout_ms = 3000 };
	struct server s = { .ex = ex, .n = n };
	struct pause_backend *pb;
	pthread_t th;
	int e1, e2, e3;

	if ((size_t)snprintf(spec.path, sizeof(spec.path), "%.60s/%.20s.sock", dir, name) >= 108)
		return;
	s.lfd = listen_at(spec.path);
	pthread_create(&th, NULL, serve, &s);
	pb = pause_new(&spec, name);
	tap(pb && pb->ops->probe(pb) == 0, "%s: probe the API socket (recorded exchange server)", name);
	uint64_t stopped, lo, hi;

	e1 = pause_vm(pb);
	e2 = pause_resume_vm(pb);
	stopped = pause_clock_stopped_ns(pb, UINT64_MAX);
	lo = pb->st.clock_restarted_ns - pb->st.clock_stopped_ns;
	hi = pb->st.resume_done_ns - pb->st.pause_cmd_sent_ns;
	/* the third recording is an error reply */
	e3 = kind == PAUSE_FIRECRACKER ? pause_vm(pb) : pause_resume_vm(pb);
	pthread_join(th, NULL);
	close(s.lfd);
	tap(e1 == 0, "%s: pause accepted by the recorded 204 reply (%d)", name, e1);
	tap(e2 == 0, "%s: resume accepted by the recorded 204 reply (%d)", name, e2);
	tap(e3 < 0, "%s: recorded error reply is an error (%d)", name, e3);
	tap(s.matched == n, "%s: requests equal the recorded ones (%u/%u) %s", name, s.matched, n,
	    s.last_error);
	tap(pb->st.pauses + pb->st.resumes == 2 && pb->st.errors == 1, "%s: counters", name);
	/*
	 * Guest time.  Firecracker's pause only parks the vCPU threads: the
	 * guest's kvm-clock keeps counting, nothing to make up.  Cloud
	 * Hypervisor saves kvm-clock on vm.pause and restores it on
	 * vm.resume: the guest's clock stood still from the pause request
	 * to the resume request, which is what RESUMED tells the guest.
	 */
	if (kind == PAUSE_FIRECRACKER)
		tap(!pb->ops->guest_clock_stops && stopped == UINT64_MAX,
		    "%s: guest clock runs while paused: no clock step sent", name);
	else
		tap(pb->ops->guest_clock_stops && lo <= stopped && stopped <= hi && hi > 0 &&
		    hi < 3000000000ull,
		    "%s: guest clock stops: stopped %llu ns, within %llu..%llu (pause reply .. "
		    "resume request; pause request .. resume reply)", name,
		    (unsigned long long)stopped, (unsigned long long)lo, (unsigned long long)hi);
	pause_free(pb);
}

/* ---- freezer ---------------------------------------------------------- */

static void test_freezer_fake(const char *dir)
{
	struct pause_spec spec = { .kind = PAUSE_FREEZER, .timeout_ms = 1000 };
	char state[PATH_MAX + 16], buf[32] = "";
	struct pause_backend *pb;
	FILE *f;
	int fd, e1, e2;

	snprintf(spec.path, sizeof(spec.path), "%s/fake-freezer", dir);
	mkdir(spec.path, 0700);
	snprintf(state, sizeof(state), "%s/freezer.state", spec.path);
	f = fopen(state, "w");
	fputs("THAWED\n", f);
	fclose(f);
	pb = pause_new(&spec, "fake-v1");
	e1 = pause_vm(pb);
	fd = open(state, O_RDONLY);
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	tap(e1 == 0 && !strncmp(buf, "FROZEN", 6),
	    "freezer v1 on a FAKE cgroupfs dir: FROZEN written and read back");
	e2 = pause_resume_vm(pb);
	tap(e2 == 0, "freezer v1 on a FAKE cgroupfs dir: THAWED");
	pause_free(pb);
}

/* Threads of this process. */
static int nr_threads(void)
{
	char buf[256] = "";
	int fd = open("/proc/self/stat", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p = n > 0 ? strrchr(buf, ')') : NULL;
	int nr = -1;

	if (fd >= 0)
		close(fd);
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice num_threads" */
	if (p)
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d",
		       &nr);
	return nr;
}

struct async_run {
	struct loop *loop;
	char state[PATH_MAX + 16];
	int calls, left, errors, wrong_state, threads_max;
};

static void async_done(struct pause_backend *pb, int err, void *arg)
{
	struct async_run *r = arg;
	char buf[32] = "";
	int fd = open(r->state, O_RDONLY);
	int t = nr_threads();

	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	if (fd >= 0)
		close(fd);
	r->calls++;
	r->errors += err != 0;
	r->wrong_state += strncmp(buf, pb->paused ? "FROZEN" : "THAWED", 6) != 0;
	if (t > r->threads_max)
		r->threads_max = t;
	/* end paused: the release below must resume */
	if (--r->left == 0 || pause_start(pb, r->loop, !pb->paused, async_done, r))
		loop_stop(r->loop);
}

/* pause_start(): every call on one worker, done on the loop, and a release
 * resumes a paused VM and ends the worker. */
static void test_async(const char *dir)
{
	struct pause_spec spec = { .kind = PAUSE_FREEZER, .timeout_ms = 1000 };
	struct async_run r = { .left = 21 };
	char buf[32] = "";
	struct pause_backend *pb;
	int before = nr_threads(), fd, err;
	unsigned int live;
	FILE *f;

	snprintf(spec.path, sizeof(spec.path), "%s/async-freezer", dir);
	mkdir(spec.path, 0700);
	snprintf(r.state, sizeof(r.state), "%s/freezer.state", spec.path);
	f = fopen(r.state, "w");
	fputs("THAWED\n", f);
	fclose(f);
	r.loop = loop_new();
	pb = pause_new(&spec, "async");
	err = pause_start(pb, r.loop, true, async_done, &r);
	tap(pause_start(pb, r.loop, false, async_done, &r) == -EBUSY,
	    "pause_start: a second call while one is in flight is refused (EBUSY)");
	if (!err)
		loop_run(r.loop);
	tap(!err && r.calls == 21 && !r.errors && !r.wrong_state,
	    "pause_start: 21 calls done on the loop, each with the state it asked "
	    "(%d done, %d errors, %d wrong)", r.calls, r.errors, r.wrong_state);
	tap(r.threads_max == before + 1 && pb->paused,
	    "pause_start: one worker thread for all of them (%d threads, %d before)",
	    r.threads_max, before);
	pause_release(pb, true);
	live = pause_released_wait(5000);
	/* the worker has freed the backend; let it exit (bounded, not timed) */
	for (int i = 0; i < 500 && nr_threads() != before; i++)
		usleep(10000);
	fd = open(r.state, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	if (fd >= 0)
		close(fd);
	tap(!live && !strncmp(buf, "THAWED", 6) && nr_threads() == before,
	    "pause_release(resume): the worker resumed the VM, freed the backend and "
	    "ended (%u left, %d threads)", live, nr_threads());
	loop_free(r.loop);

	/* paused by a blocking call, no worker yet: one is started to resume */
	pb = pause_new(&spec, "blocking");
	err = pause_vm(pb);
	pause_release(pb, true);
	live = pause_released_wait(5000);
	for (int i = 0; i < 500 && nr_threads() != before; i++)
		usleep(10000);
	fd = open(r.state, O_RDONLY);
	buf[0] = '\0';
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	if (fd >= 0)
		close(fd);
	tap(!err && !live && !strncmp(buf, "THAWED", 6) && nr_threads() == before,
	    "pause_release(resume) after a blocking pause: resumed off the caller, freed "
	    "(%u left, %d threads)", live, nr_threads());
}

/* Child in cgroup @cg (its procs file @procs); returns its pid or -1. */
static pid_t child_in(const char *procs)
{
	pid_t pid = fork();
	char s[32];
	int fd;

	if (pid == 0) {
		for (;;)
			pause();
	}
	fd = open(procs, O_WRONLY);
	snprintf(s, sizeof(s), "%d", pid);
	if (fd < 0 || write(fd, s, strlen(s)) < 0) {
		if (fd >= 0)
			close(fd);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	close(fd);
	return pid;
}

static void test_freezer_real(const char *root, const char *procs_name, const char *what)
{
	struct pause_spec spec = { .kind = PAUSE_FREEZER, .timeout_ms = 3000 };
	char procs[PATH_MAX + 32];
	struct pause_backend *pb;
	pid_t pid;
	int e1, e2;

	snprintf(spec.path, sizeof(spec.path), "%s/vmnap-test-%d", root, getpid());
	if (mkdir(spec.path, 0755) < 0) {
		tap_skip(what, "cannot create a cgroup here");
		return;
	}
	snprintf(procs, sizeof(procs), "%s/%s", spec.path, procs_name);
	pid = child_in(procs);
	if (pid < 0) {
		rmdir(spec.path);
		tap_skip(what, "cannot move a process into the test cgroup");
		return;
	}
	pb = pause_new(&spec, what);
	e1 = pb->ops->probe(pb) ? -1 : pause_vm(pb);
	if (e1 == -1) {
		tap_skip(what, "freezer not available in this cgroup");
	} else {
		tap(e1 == 0, "%s: a real process frozen (%d)", what, e1);
		e2 = pause_resume_vm(pb);
		tap(e2 == 0, "%s: and thawed (%d)", what, e2);
		tap(!pb->ops->guest_clock_stops && pause_clock_stopped_ns(pb, 7) == 7,
		    "%s: guest clock runs while frozen: no clock step sent", what);
	}
	pause_free(pb);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 100 && rmdir(spec.path) < 0; i++)
		usleep(10000);
}

/* Up to @n - 1 bytes of @dir/@file into @buf (terminated); bytes read, -1. */
static ssize_t read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char p[PATH_MAX + 32];
	ssize_t r;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	buf[r > 0 ? r : 0] = '\0';
	return r;
}

/* Does @dir/freezer.state read @want? */
static bool state_is(const char *dir, const char *want)
{
	char buf[32];

	return read_small(dir, "freezer.state", buf, sizeof(buf)) > 0 &&
	       !strncmp(buf, want, strlen(want));
}

/* Is the cgroup @dir without tasks? */
static bool no_tasks(const char *dir)
{
	char buf[2];

	return read_small(dir, "tasks", buf, sizeof(buf)) == 0;
}

/*
 * The v1 freezer backend keeps an empty cgroup of its own frozen at the
 * hierarchy's root while any backend is open (the kernel's freezer key
 * stays on), removes it when the last one closes, and removes one left by
 * a process that is gone.
 */
static void test_freezer_hold(const char *root)
{
	const char *what = "freezer v1 key hold";
	struct pause_spec spec = { .kind = PAUSE_FREEZER, .timeout_ms = 3000 };
	char stale[PATH_MAX], held[PATH_MAX];
	struct pause_backend *a, *b;
	pid_t dead = fork();

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(spec.path, sizeof(spec.path), "%s/vmnap-test-hold-%d", root, getpid());
	if (access(root, W_OK) < 0 || mkdir(spec.path, 0755) < 0) {
		tap_skip(what, "cannot create a v1 freezer cgroup here");
		return;
	}
	snprintf(stale, sizeof(stale), "%s/vmnap-hold.%d", root, (int)dead);
	snprintf(held, sizeof(held), "%s/vmnap-hold.%d", root, (int)getpid());
	mkdir(stale, 0755);
	a = pause_new(&spec, "hold-a");
	b = pause_new(&spec, "hold-b");
	tap(!a->ops->probe(a) && !b->ops->probe(b), "%s: two backends probed", what);
	tap(access(stale, F_OK) < 0 && errno == ENOENT,
	    "%s: the hold of a process that is gone is removed", what);
	tap(state_is(held, "FROZEN") && no_tasks(held),
	    "%s: %s exists, frozen, no task in it", what, held);
	tap(state_is(spec.path, "THAWED"), "%s: the VM's own cgroup is not frozen by it", what);
	pause_free(a);
	tap(state_is(held, "FROZEN"), "%s: kept while one backend is open", what);
	pause_free(b);
	tap(access(held, F_OK) < 0 && errno == ENOENT,
	    "%s: removed when the last backend closes", what);
	rmdir(stale);
	rmdir(spec.path);
}

/* ---- QMP against real QEMU -------------------------------------------- */

static bool qemu_status(const char *sock, const char *want)
{
	char cmd[PATH_MAX + 128], out[512] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "scripts/qmp.py --timeout 10 %s query-status 2>&1", sock);
	p = popen(cmd, "r");
	if (!p)
		return false;
	if (!fgets(out, sizeof(out), p))
		out[0] = '\0';
	pclose(p);
	return strstr(out, want) != NULL;
}

static void test_qmp(const char *dir)
{
	struct pause_spec spec = { .kind = PAUSE_QMP, .timeout_ms = 10000 };
	struct pause_backend *pb;
	char qmparg[PATH_MAX + 64];
	struct stat st;
	pid_t pid;
	int e1, e2;

	if (access("/usr/bin/qemu-system-x86_64", X_OK)) {
		tap_skip("qmp: real QEMU", "qemu-system-x86_64 not installed");
		return;
	}
	snprintf(spec.path, sizeof(spec.path), "%s/qmp.sock", dir);
	snprintf(qmparg, sizeof(qmparg), "unix:%s,server=on,wait=off", spec.path);
	pid = fork();
	if (pid == 0) {
		execl("/usr/bin/timeout", "timeout", "60", "/usr/bin/qemu-system-x86_64",
		      "-machine", "none", "-nodefaults", "-display", "none", "-qmp", qmparg,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && stat(spec.path, &st); i++)
		usleep(50000);
	pb = pause_new(&spec, "qmp");
	tap(pb->ops->probe(pb) == 0, "qmp: real QEMU's QMP socket is there");
	e1 = pause_vm(pb);
	tap(e1 == 0 && qemu_status(spec.path, "\"paused\""), "qmp: stop -> QEMU reports paused (%d)", e1);
	e2 = pause_resume_vm(pb);
	tap(e2 == 0 && qemu_status(spec.path, "\"running\""), "qmp: cont -> QEMU reports running (%d)", e2);
	tap(pb->ops->guest_clock_stops && pause_clock_stopped_ns(pb, 0) > 0,
	    "qmp: stop stops the guest clock: %llu ns from stop to cont",
	    (unsigned long long)pause_clock_stopped_ns(pb, 0));
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	e1 = pause_vm(pb);
	tap(e1 < 0, "qmp: QEMU gone -> error, no hang (%d)", e1);
	pause_free(pb);
}

int main(void)
{
	char dir[] = "/tmp/vmnap-pause.XXXXXX";
	char cmd[64];
	int rc;

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERR);
	if (!mkdtemp(dir))
		return tap_skip_all("cannot create a temporary directory");
	test_rest("firecracker", PAUSE_FIRECRACKER, fc_exchanges, 3, dir);
	test_rest("chv", PAUSE_CHV, chv_exchanges, 3, dir);
	test_freezer_fake(dir);
	test_async(dir);
	test_freezer_real("/sys/fs/cgroup/unified", "cgroup.procs", "freezer v2 (cgroup.freeze)");
	if (access("/sys/fs/cgroup/cgroup.freeze", F_OK) == 0 ||
	    access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
		test_freezer_real("/sys/fs/cgroup", "cgroup.procs", "freezer v2 (cgroup.freeze, root)");
	test_freezer_real("/sys/fs/cgroup/freezer", "cgroup.procs", "freezer v1 (real freezer.state)");
	test_freezer_hold("/sys/fs/cgroup/freezer");
	test_qmp(dir);
	rc = tap_done();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return rc;
}
