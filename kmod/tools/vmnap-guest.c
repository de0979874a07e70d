// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnap-guest - in-guest tool for vmnap.ko: status over generic netlink
 * (libnl-genl-3), load and unload through libkmod, and the test commands
 * of a module loaded with test_hooks=1.
 *
 *   vmnap-guest status
 *   vmnap-guest load [--path FILE] [PARAM=VALUE...]
 *   vmnap-guest unload
 *   vmnap-guest test-handoff | test-unquiesce | test-drop-link | test-evidence
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmod/tools/vmnap_client.h"

#ifndef VMNAP_VERSION
#define VMNAP_VERSION	"unknown"	/* the build passes VERSION's */
#endif

#define PARAMS_MAX	1024

static const char *const link_names[] = { "down", "hello-sent", "up" };

static void print_status(const struct vmnap_status *st)
{
	int i;

	printf("version=%s\n", st->version);
	printf("link=%s\n", st->link < 3 ? link_names[st->link] : "?");
	printf("handoff=%s\n", st->handoff ? "quiesced" : "idle");
	printf("enabled=%u\n", st->enabled);
	printf("host=%u:%u\n", st->host_cid, st->port);
	printf("features=0x%x\nhost_features=0x%x\n", st->features,
	       st->host_features);
	printf("vm_id=%llu\n", (unsigned long long)st->vm_id);
	printf("free_reporting=%u\n", st->free_reporting);
	printf("quiesced_devices=%u\n", st->quiesced_devs);
	printf("last_verdict=%s\n", st->verdict == 1 ? "ready" :
	       st->verdict == 2 ? "busy" : "none");
	printf("last_req_id=%llu\n", (unsigned long long)st->req_id);
	for (i = 0; i < VMNAP_CTR_MAX; i++)
		printf("counter.%s=%llu\n", vmnap_counter_names[i],
		       (unsigned long long)st->ctr[i]);
	if (!st->have_ev)
		return;
	printf("evidence.window_ns=%llu\n", (unsigned long long)st->ev_window_ns);
	if (st->ev_timer_known)
		printf("evidence.next_timer_ns=%llu\n",
		       (unsigned long long)st->ev_next_timer_ns);
	else
		printf("evidence.next_timer_ns=unknown\n");
	printf("evidence.cpu_idle_permille=%u\n", st->ev_idle_permille);
	printf("evidence.nr_runnable=%u\n", st->ev_runnable);
	printf("evidence.io_inflight=%u\n", st->ev_io);
	printf("evidence.writeback_pages=%llu\n", (unsigned long long)st->ev_writeback);
	printf("evidence.dirty_pages=%llu\n", (unsigned long long)st->ev_dirty);
	printf("evidence.devices_quiesced=%u\n", st->ev_devices);
	printf("evidence.busy_reasons=0x%x\n", st->ev_busy);
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: vmnap-guest status\n"
		"  or:  vmnap-guest load [--path FILE] [PARAM=VALUE...]\n"
		"  or:  vmnap-guest unload\n"
		"  or:  vmnap-guest test-handoff|test-unquiesce|test-drop-link|test-evidence\n"
		"Inspect and drive vmnap.ko from inside the guest (generic netlink).\n\n"
		"  status          link and handoff state, last evidence, counters\n"
		"  load            load vmnap.ko (default " VMNAP_MODULE_PATH ") with parameters\n"
		"  unload          unload vmnap.ko\n"
		"  test-*          netlink test commands (module loaded with test_hooks=1)\n"
		"  -h, --help      this text\n"
		"  -V, --version   print the version\n");
}

static int usage(void)
{
	help(stderr);
	return 2;
}

static int do_load(int argc, char **argv)
{
	const char *path = VMNAP_MODULE_PATH;
	char params[PARAMS_MAX] = "";
	size_t used = 0;
	int i, ret;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--path") && i + 1 < argc) {
			path = argv[++i];
			continue;
		}
		ret = snprintf(params + used, sizeof(params) - used, "%s%s",
			       used ? " " : "", argv[i]);
		if (ret < 0 || (size_t)ret >= sizeof(params) - used) {
			fprintf(stderr, "vmnap-guest: parameters too long\n");
			return 2;
		}
		used += ret;
	}
	ret = vmnap_client_load(path, params);
	if (ret) {
		fprintf(stderr, "vmnap-guest: load %s: %s\n", path, strerror(-ret));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int cmd; } cmds[] = {
		{ "status", VMNAP_CMD_GET_STATUS },
		{ "test-handoff", VMNAP_CMD_TEST_HANDOFF },
		{ "test-unquiesce", VMNAP_CMD_TEST_UNQUIESCE },
		{ "test-drop-link", VMNAP_CMD_TEST_DROP_LINK },
		{ "test-evidence", VMNAP_CMD_TEST_EVIDENCE },
	};
	struct vmnap_status st;
	unsigned int i;
	int ret;

	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		help(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("vmnap-guest %s\n", VMNAP_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "load"))
		return do_load(argc - 2, argv + 2);
	if (!strcmp(argv[1], "unload")) {
		ret = vmnap_client_unload();
		if (ret)
			fprintf(stderr, "vmnap-guest: unload: %s\n", strerror(-ret));
		return ret ? 1 : 0;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		ret = vmnap_client_cmd(cmds[i].cmd, &st);
		if (ret) {
			fprintf(stderr, "vmnap-guest: %s: %s\n", argv[1],
				ret == -ENOENT ? "vmnap.ko not loaded" : strerror(-ret));
			return 1;
		}
		print_status(&st);
		return 0;
	}
	return usage();
}
