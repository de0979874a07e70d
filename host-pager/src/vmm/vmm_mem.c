// SPDX-License-Identifier: GPL-2.0-only
/* vmm_mem.c - a VMM's PSS and cgroup memory from /proc; see vmm_mem.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
