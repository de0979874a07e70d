// SPDX-License-Identifier: GPL-2.0-only
/*
 * loop_detach.c - tearing a VM's pager down never stalls vmnapd's event
 * loop: a real vmnapd process (build/vmnapd) and the mock VMM of
 * mockvmm.h through the real shim, its guest RAM offloaded to the store.
 *
 *   DELETE      the VM is deleted while its VMM still maps guest RAM: the
 *               pager must bring every offloaded page back into the memfd
 *               before it lets go (store reads, joins).  The API answers
 *               204; a second VMM for a VM of the same name meanwhile gets
 *               its answer in time (its handshake waits while the old
 *               pager holds the store, at most 8 s: accepted, or refused
 *               "store" and accepted once the pager let go, depending on
 *               how long the reaper takes); the first VMM then reads every
 *               page right, and
 *               vmnapd's slow-callback log (loop.c: every callback over
 *               10 ms, by name) shows no stall (STALL_MS) from the DELETE
 *               until "pager detached" (but the second VMM's handshake's: creating a
 *               VM's pager, its store file included, is still done on the
 *               loop).
 *   VMM exit    the second VMM offloads and exits: its store file is
 *               removed, vmnapd's fds are back to what they were before
 *               any VMM came, no stall meanwhile.
 *   SIGTERM     vmnapd exits 0 (it waits for pagers being detached).
 *
 * TAP.  loop_detach [MiB]	(default 256: a large store)
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mockvmm.h"

#define SLOW_LINE	"loop: "	/* loop.c's slow-callback lines */
/*
 * loop.c logs every callback over 10 ms.  On a loaded 2-core machine a
 * callback that waits for nothing can pass 10 ms by being preempted, while
 * a teardown on the loop (store reads, thread joins) took 1.1 to 23 s
 * there: a callback over STALL_MS counts as a stall, shorter ones are
 * only reported.
 */
#define STALL_MS	500
/* x 20 ms: bringing 256 MiB back on a loaded machine takes a while */
#define DETACH_WAIT_POLLS	6000

static char g_log[PATH_MAX + 32];

/* Bytes in vmnapd's log so far: where a step starts. */
static long log_mark(void)
{
	struct stat sb;

	return stat(g_log, &sb) ? 0 : (long)sb.st_size;
}

/*
 * Read the log from @from: the slow-callback lines in *@slow (reported as
 * TAP diagnostics if @say), but those naming @ignore (NULL: none); returns
 * whether @until appeared.
 */
static bool log_scan_but(long from, const char *until, unsigned int *slow, bool say,
			 const char *ignore)
{
	char line[1024];
	bool seen = false;
	FILE *f = fopen(g_log, "r");

	*slow = 0;
	if (!f)
		return false;
	fseek(f, from, SEEK_SET);
	while (fgets(line, sizeof(line), f)) {
		const char *ran = strstr(line, " ran ");

		if (strstr(line, SLOW_LINE) && strstr(line, " callback ") && ran &&
		    !(ignore && strstr(line, ignore))) {
			if (atol(ran + 5) >= STALL_MS)
				(*slow)++;
			if (say)
				tap_diag("%s", strtok(line, "\n"));
		}
		if (strstr(line, until))
			seen = true;
	}
	fclose(f);
	return seen;
}

static bool log_scan(long from, const char *until, unsigned int *slow, bool say)
{
	return log_scan_but(from, until, slow, say, NULL);
}

/* Poll the log from @from until @until appears (bounded); then as
 * log_scan_but. */
static bool log_wait(long from, const char *until, unsigned int *slow, const char *ignore)
{
	for (int i = 0; i < DETACH_WAIT_POLLS; i++) {
		unsigned int n;

		if (log_scan(from, until, &n, false))
			break;
		usleep(POLL_US);
	}
	return log_scan_but(from, until, slow, true, ignore);
}

static bool offload_all(struct harness *h, json_int_t *offloaded)
{
	json_t *j = vmnapd_dbg(h, "offload " VM_NAME);
	bool ok = j && json_is_true(json_object_get(j, "ok"));

	*offloaded = j ? jint(j, "stats", "pages", "offloaded") : 0;
	json_decref(j);
	return ok;
}

int main(int argc, char **argv)
{
	struct harness h = { 0 };
	char ans[LINE_MAX_LEN], store[PATH_MAX + 32];
	struct harness first, second;
	unsigned int slow, waits;
	json_int_t out = 0;
	bool ok, accepted;
	struct stat sb;
	uint64_t mib;
	long mark;
	int fds, st;

	if (mockvmm_init(argc, argv))
		return 0;
	mib = mockvmm_arg(argc, argv, 1, 256);
	st = vmnapd_setup(&h, "detach");
	if (st)
		return st < 0;
	snprintf(store, sizeof(store), "%s/%s.store", h.store_dir, VM_NAME);
	snprintf(g_log, sizeof(g_log), "%s/vmnapd-0.log", h.dir);
	vmnapd_spawn(&h, 0);
	fds = count_fds(vmnapd_pid());

	/* 1. DELETE while the VMM maps guest RAM */
	if (vmm_spawn(&h, argv[0], mib, 1)) {
		tap_bail("cannot start the mock VMM");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready with %llu MiB (%s)",
	    (unsigned long long)mib, ans);
	json_decref(wait_vm(&h));
	ok = offload_all(&h, &out);
	tap(ok && out > 0, "offloaded: %lld page(s) in the store", (long long)out);
	mark = log_mark();
	tap(vmnapd_api_vm(&h, "DELETE", NULL) == 204, "DELETE /vms/" VM_NAME " answered 204");
	/* a VMM for a VM of the same name comes while the old pager lets go:
	 * it gets an answer in time (accepted, or refused: store still held) */
	first = h;
	if (vmm_spawn(&h, argv[0], mib, 1)) {
		tap_bail("cannot start the second mock VMM");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	second = h;
	accepted = !strcmp(ans, "ready");
	tap(accepted || log_scan(mark, "(store): store of vm '" VM_NAME "' still held",
				 &waits, false),
	    "a VMM of the same name meanwhile is answered in time: %s", accepted ?
	    "accepted" : "refused, the store is still held");
	if (log_scan(mark, "waits: its store is still held", &waits, false))
		tap_diag("its handshake waited for the store");
	/* the second VMM's handshake creates its VM's pager and store file on
	 * the loop (not a teardown): its callbacks are not counted here */
	tap(log_wait(mark, "pager detached", &slow, "mem_handshake.c:"),
	    "the deleted VM's pager detached");
	tap(slow == 0, "no loop callback over %d ms from the DELETE until the pager "
	    "detached (%u stalls)", STALL_MS, slow);
	h = first;
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "every page was back in the memfd before the pager let go (%s)",
	    ans);
	tap(vmm_quit(&h) == 0, "first mock VMM quit");
	h = second;
	if (!accepted) {
		wait_vmm_exit(&h);
		if (vmm_spawn(&h, argv[0], mib, 1)) {
			tap_bail("cannot start the mock VMM again");
			return 1;
		}
		read_line(h.from_vmm, ans, sizeof(ans));
		tap(!strcmp(ans, "ready"), "once the pager let go, it is accepted (%s)", ans);
	} else {
		tap_skip("once the pager let go, it is accepted", "it was accepted meanwhile");
	}

	/* 2. the VMM exits while its RAM is offloaded */
	json_decref(wait_vm(&h));
	ok = offload_all(&h, &out);
	tap(ok && out > 0, "second VMM offloaded: %lld page(s)", (long long)out);
	mark = log_mark();
	if (kill(h.vmm, SIGKILL) == 0)
		wait_vmm_exit(&h);
	tap(log_wait(mark, "pager detached", &slow, NULL), "VMM killed: the pager detached");
	tap(slow == 0, "no loop callback over %d ms meanwhile (%u stalls)", STALL_MS, slow);
	tap(stat(store, &sb) < 0 && errno == ENOENT, "its store file is removed");
	for (int i = 0; i < DETACH_WAIT_POLLS && count_fds(vmnapd_pid()) != fds; i++)
		usleep(POLL_US);	/* connections of the VMMs close meanwhile */
	tap(count_fds(vmnapd_pid()) == fds, "vmnapd holds as many fds as before any VMM (%d)",
	    fds);

	/* 3. a clean stop */
	st = vmnapd_kill(SIGTERM);
	tap(WIFEXITED(st) && WEXITSTATUS(st) == 0, "vmnapd exits 0 on SIGTERM");
	vmnapd_finish(&h, tap_state.failed);
	return tap_done();
}
