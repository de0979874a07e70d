// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_restart.c - vmnapd is killed (SIGKILL) and restarted under a live
 * VMM: a real vmnapd process (build/vmnapd), the mock VMM of mockvmm.h
 * going through the real shim.  Each kill is followed by a restart on the
 * same run and store directories:
 *
 *   offloaded     a thread of the VMM touching an evicted page blocks
 *                 (never zeros) while no vmnapd runs; the shim hands the
 *                 memory to the new vmnapd, which adopts the store
 *                 (the API shows "recovered": true with the pages found);
 *                 the blocked thread continues with the right value
 *   discarded     the VMM discards a page that came back from the store
 *                 (as a balloon does) and vmnapd is killed at once, before
 *                 it may have read the discard: after the restart the page
 *                 reads zero, not its old stored copy
 *   mid-restore   the VMM reads all of its RAM back by faults
 *   clean         every page came back unwritten and is offloaded again
 *                 (with dirty tracking: punched with no write): the
 *                 restarted vmnapd finds every one of them out
 *   mid-offload   an offload is running
 *   punched       the VMM punches a page that came back out of its memfd
 *                 (no userfaultfd event: vmnapd never learns of it): after
 *                 the restart it reads zero
 *   stopped       SIGTERM while offloaded: vmnapd brings every page back;
 *                 the next vmnapd adopts the store it kept, empty
 *
 * After each restart every page of guest RAM is checked against its
 * pattern ("verify": the memory digest).  Then the VMM quits and the store
 * file is gone.  Where in an offload or restore a kill lands is up to the
 * scheduler; each step says what it found, and the checks hold wherever
 * it lands.  TAP.
 *
 *   pager_restart [MiB]	(default 64)
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mockvmm.h"

static json_int_t stat_now(struct harness *h, const char *k1, const char *k2)
{
	json_t *j = vmnapd_dbg(h, "stats " VM_NAME);
	json_int_t v = j ? jint(j, "stats", k1, k2) : 0;

	json_decref(j);
	return v;
}

/* Poll the VM's stats until @k1 (.@k2) exceeds @base. */
static void wait_above(struct harness *h, const char *k1, const char *k2, json_int_t base)
{
	for (int i = 0; i < WAIT_POLLS; i++) {
		json_t *j = vmnapd_dbg(h, "stats " VM_NAME);
		bool yes = j && jint(j, "stats", k1, k2) > base;

		json_decref(j);
		if (yes)
			return;
		usleep(1000);
	}
}

static void check_recovered(struct harness *h, const char *what, bool want_offloaded)
{
	json_t *st = wait_vm(h), *vm;

	tap(st != NULL, "%s: the shim handed the memory to the restarted vmnapd", what);
	vm = api_vm(h);
	tap(vm && json_is_true(json_object_get(vm, "recovered")) &&
	    (!want_offloaded || jint(vm, "pager", "recovery", "offloaded") > 0),
	    "%s: API: recovered, store map held %lld page(s): %lld offloaded, %lld resident",
	    what, (long long)jint(vm, "pager", "recovery", "store_pages"),
	    (long long)jint(vm, "pager", "recovery", "offloaded"),
	    (long long)jint(vm, "pager", "recovery", "resident"));
	json_decref(vm);
	json_decref(st);
}

static int mode_restart(const char *self, uint64_t mib)
{
	struct harness h = { 0 };
	char ans[LINE_MAX_LEN], want[64], path[PATH_MAX + 32];
	uint64_t w0[PAGE / 8];
	struct stat sb;
	json_int_t base;
	json_t *j;
	int n = 0, err;

	err = vmnapd_setup(&h, "restart");
	if (err)
		return err < 0;
	snprintf(path, sizeof(path), "%s/%s.store", h.store_dir, VM_NAME);
	page_pattern(0, 1, w0);
	snprintf(want, sizeof(want), "value %#llx", (unsigned long long)w0[0]);

	vmnapd_spawn(&h, n++);
	if (vmm_spawn(&h, self, mib, 1)) {
		tap_bail("cannot start the mock VMM");
		return 1;
	}
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ready"), "mock VMM ready with %llu MiB (%s)",
	    (unsigned long long)mib, ans);
	j = wait_vm(&h);
	json_decref(j);

	/* 1. killed while offloaded */
	j = vmnapd_dbg(&h, "offload " VM_NAME);
	tap(j && json_is_true(json_object_get(j, "ok")), "offloaded");
	json_decref(j);
	vmnapd_kill(SIGKILL);
	vmm_cmd(&h, ans, "peek 0");
	tap(!strcmp(ans, "blocked"),
	    "offloaded, vmnapd killed: a thread touching an evicted page waits (%s)", ans);
	vmnapd_spawn(&h, n++);
	check_recovered(&h, "killed offloaded", true);
	vmm_cmd(&h, ans, "peekwait");
	tap(!strcmp(ans, want), "the blocked thread continued with the page's value (%s)", ans);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "killed offloaded: every page of guest RAM intact (%s)", ans);

	/* 1b. a page back from the store, then discarded by the VMM */
	vmm_cmd(&h, ans, "punch 0");
	tap(!strcmp(ans, "ok"), "the VMM discarded page 0 itself (%s)", ans);
	vmnapd_kill(SIGKILL);
	vmnapd_spawn(&h, n++);
	j = wait_vm(&h);
	json_decref(j);
	vmm_cmd(&h, ans, "peek 0");
	tap(!strcmp(ans, "value 0"), "after a restart the discarded page reads zero, "
	    "not its old stored copy (%s)", ans);
	vmm_cmd(&h, ans, "fill 1");

	/* 2. killed while the VMM reads its RAM back by faults */
	j = vmnapd_dbg(&h, "offload " VM_NAME);
	tap(j && json_is_true(json_object_get(j, "ok")), "offloaded again by the new vmnapd");
	json_decref(j);
	base = stat_now(&h, "faults", NULL);
	if (write(h.to_vmm, "verify 1 1\n", 11) != 11) {
		tap_bail("mock VMM gone");
		return 1;
	}
	wait_above(&h, "faults", NULL, base);
	j = vmnapd_dbg(&h, "stats " VM_NAME);
	tap_diag("killed mid-restore after %lld fault(s), %lld page(s) still offloaded",
		 (long long)jint(j, "stats", "faults", NULL),
		 (long long)jint(j, "stats", "pages", "offloaded"));
	json_decref(j);
	vmnapd_kill(SIGKILL);
	vmnapd_spawn(&h, n++);
	check_recovered(&h, "killed mid-restore", false);
	read_line(h.from_vmm, ans, sizeof(ans));
	tap(!strcmp(ans, "ok"), "killed mid-restore: the VMM's read of all its RAM "
	    "finished, every byte right (%s)", ans);

	/* 2b. killed after an offload of pages that came back unwritten */
	j = vmnapd_dbg(&h, "offload " VM_NAME);
	tap(j && json_is_true(json_object_get(j, "ok")), "offloaded the restored pages");
	json_decref(j);
	base = stat_now(&h, "pages", "offloaded");
	j = api_vm(&h);
	if (j && strcmp(json_string_value(json_object_get(json_object_get(j, "pager"),
							   "dirty_tracking")) ?: "", "none"))
		tap(jint(j, "pager", "dirty", "clean_punched_pages") > 0,
		    "with dirty tracking: %lld of the %lld offloaded page(s) clean, "
		    "punched with no write", (long long)jint(j, "pager", "dirty",
							      "clean_punched_pages"),
		    (long long)base);
	else
		tap_diag("no dirty tracking: every page written (%s)",
			 j ? "dirty_tracking none" : "no API answer");
	json_decref(j);
	vmnapd_kill(SIGKILL);
	vmnapd_spawn(&h, n++);
	check_recovered(&h, "killed after a clean offload", true);
	j = api_vm(&h);
	tap(j && jint(j, "pager", "recovery", "offloaded") == base,
	    "killed after a clean offload: all %lld offloaded page(s) found out "
	    "(%lld)", (long long)base, (long long)jint(j, "pager", "recovery", "offloaded"));
	json_decref(j);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "killed after a clean offload: every page of guest RAM "
	    "intact (%s)", ans);

	/* 3. killed while an offload runs */
	{
		char dpath[PATH_MAX + 32];
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		snprintf(dpath, sizeof(dpath), "%s/pager-debug.sock", h.run_dir);
		if (strlen(dpath) >= sizeof(sa.sun_path)) {
			tap_bail("socket path too long");
			return 1;
		}
		memcpy(sa.sun_path, dpath, strlen(dpath) + 1);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    write(s, "offload " VM_NAME "\n", 13) != 13) {
			tap_bail("cannot start an offload");
			return 1;
		}
		wait_above(&h, "pages", "offloaded", 0);
		j = vmnapd_dbg(&h, "stats " VM_NAME);
		tap_diag("killed mid-offload with %lld page(s) offloaded, %lld in flight",
			 (long long)jint(j, "stats", "pages", "offloaded"),
			 (long long)jint(j, "stats", "pages", "in_flight"));
		json_decref(j);
		vmnapd_kill(SIGKILL);
		close(s);
	}
	vmnapd_spawn(&h, n++);
	check_recovered(&h, "killed mid-offload", false);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "killed mid-offload: every page of guest RAM intact (%s)", ans);
	j = vmnapd_dbg(&h, "offload " VM_NAME);
	tap(j && json_is_true(json_object_get(j, "ok")), "the adopted VM offloads again");
	json_decref(j);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "and reads back right (%s)", ans);

	/* 3b. page 0, back from the store, punched in the memfd behind
	 * vmnapd (no event) */
	vmm_cmd(&h, ans, "discard 0 1 memfd");
	tap(!strcmp(ans, "ok"), "the VMM punched page 0 out of its memfd, telling no "
	    "one (%s)", ans);
	vmnapd_kill(SIGKILL);
	vmnapd_spawn(&h, n++);
	j = wait_vm(&h);
	json_decref(j);
	j = api_vm(&h);
	tap_diag("punched: store map held %lld page(s): %lld offloaded, %lld resident, "
		 "%lld discarded", (long long)jint(j, "pager", "recovery", "store_pages"),
		 (long long)jint(j, "pager", "recovery", "offloaded"),
		 (long long)jint(j, "pager", "recovery", "resident"),
		 (long long)jint(j, "pager", "recovery", "discarded"));
	json_decref(j);
	vmm_cmd(&h, ans, "peek 0");
	tap(!strcmp(ans, "value 0"), "after a restart the page punched behind vmnapd "
	    "reads zero, not its old stored copy (%s)", ans);
	vmm_cmd(&h, ans, "fill 1");

	/* 4. a clean stop (SIGTERM) while offloaded: pages back, store kept */
	j = vmnapd_dbg(&h, "offload " VM_NAME);
	json_decref(j);
	vmnapd_kill(SIGTERM);
	vmm_cmd(&h, ans, "verify 1 2");
	tap(!strcmp(ans, "ok"), "vmnapd stopped cleanly: every page back in the memfd (%s)", ans);
	vmnapd_spawn(&h, n++);
	j = wait_vm(&h);
	tap(j && json_is_true(json_object_get(json_object_get(j, "stats"), "recovered")) &&
	    jint(j, "stats", "recovery", "store_pages") == 0 &&
	    jint(j, "stats", "store_file_bytes", NULL) < (json_int_t)(mib << 20) / 4,
	    "the next vmnapd adopts the kept store: no page in it, its slots freed "
	    "(%lld bytes)", (long long)jint(j, "stats", "store_file_bytes", NULL));
	json_decref(j);

	tap(vmm_quit(&h) == 0, "mock VMM quit");
	for (int i = 0; i < WAIT_POLLS && !stat(path, &sb); i++)
		usleep(POLL_US);
	tap(stat(path, &sb) < 0, "the VMM gone, its store file is removed");
	vmnapd_finish(&h, tap_state.failed);
	return tap_done();
}

int main(int argc, char **argv)
{
	if (mockvmm_init(argc, argv))
		return 0;
	return mode_restart(argv[0], mockvmm_arg(argc, argv, 1, 64));
}
