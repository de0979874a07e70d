// SPDX-License-Identifier: GPL-2.0-only
/* cgroup_pressure.c - memory pressure of a cgroup and the host; see
 * cgroup_pressure.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_pressure.h"

#define V1_NO_LIMIT	(1ull << 62)	/* PAGE_COUNTER_MAX pages, in bytes, is above */

struct cgroup_pressure {
	bool v2;
	int usage_fd, limit_fd, psi_fd;	/* psi_fd -1: no PSI */
	char *path;
};

static int open_at(const char *dir, const char *name)
{
	char p[4096];

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(p, O_RDONLY | O_CLOEXEC);
}

/* The whole (small) file at offset 0, NUL-terminated.  -errno. */
static int read_small(int fd, char *buf, size_t n)
{
	ssize_t r = pread(fd, buf, n - 1, 0);

	if (r < 0)
		return -errno;
	buf[r] = '\0';
	return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -EPROTO;
	*v = strtoull(s, &end, 10);
	if (errno || (*end && *end != '\n'))
		return -EPROTO;
	return 0;
}

static int read_u64(int fd, uint64_t *v)
{
	char buf[64];
	int ret = read_small(fd, buf, sizeof(buf));

	return ret ? ret : parse_u64(buf, v);
}

/* "some avg10=12.34 avg60=..." -> 1234.  -EPROTO. */
static int parse_psi_some_avg10(const char *s, uint32_t *centi)
{
	const char *p = strstr(s, "some avg10=");
	unsigned long whole = 0, frac = 0;
	int digits = 0;

	if (p != s && (!p || p[-1] != '\n'))
		return -EPROTO;
	p += strlen("some avg10=");
	if (*p < '0' || *p > '9')
		return -EPROTO;
	while (*p >= '0' && *p <= '9' && whole <= 100)
		whole = whole * 10 + (unsigned long)(*p++ - '0');
	if (whole > 100)
		return -EPROTO;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (digits < 2) {
				frac = frac * 10 + (unsigned long)(*p - '0');
				digits++;
			}
			p++;
		}
	}
	while (digits++ < 2)
		frac *= 10;
	if (*p != ' ' && *p != '\n' && *p)
		return -EPROTO;
	*centi = (uint32_t)(whole * 100 + frac);
	return 0;
}

int cgroup_pressure_open(const char *path, struct cgroup_pressure **out)
{
	struct cgroup_pressure *cp = calloc(1, sizeof(*cp));
	int err;

	if (!cp)
		return -ENOMEM;
	cp->usage_fd = cp->limit_fd = cp->psi_fd = -1;
	cp->path = strdup(path);
	if (!cp->path) {
		err = -ENOMEM;
		goto fail;
	}
	cp->usage_fd = open_at(path, "memory.current");
	if (cp->usage_fd >= 0) {
		cp->v2 = true;
		cp->limit_fd = open_at(path, "memory.max");
		cp->psi_fd = open_at(path, "memory.pressure");	/* absent without PSI */
	} else if (errno == ENOENT) {
		cp->usage_fd = open_at(path, "memory.usage_in_bytes");
		if (cp->usage_fd >= 0)
			cp->limit_fd = open_at(path, "memory.limit_in_bytes");
	}
	if (cp->usage_fd < 0 || cp->limit_fd < 0) {
		err = -errno;
		goto fail;
	}
	*out = cp;
	return 0;
fail:
	cgroup_pressure_close(cp);
	return err;
}

const char *cgroup_pressure_version(const struct cgroup_pressure *cp)
{
	return cp->v2 ? "v2" : "v1";
}

const char *cgroup_pressure_path(const struct cgroup_pressure *cp)
{
	return cp->path;
}

int cgroup_pressure_read(struct cgroup_pressure *cp, struct cgroup_pressure_reading *r)
{
	char buf[256];
	int ret;

	*r = (struct cgroup_pressure_reading){ 0 };
	ret = read_u64(cp->usage_fd, &r->usage_bytes);
	if (ret)
		return ret;
	ret = read_small(cp->limit_fd, buf, sizeof(buf));
	if (ret)
		return ret;
	if (cp->v2 && !strcmp(buf, "max\n")) {
		r->limit_bytes = 0;
	} else {
		ret = parse_u64(buf, &r->limit_bytes);
		if (ret)
			return ret;
		if (r->limit_bytes >= V1_NO_LIMIT)
			r->limit_bytes = 0;
	}
	r->has_usage = true;
	if (cp->psi_fd >= 0 && read_small(cp->psi_fd, buf, sizeof(buf)) == 0 &&
	    parse_psi_some_avg10(buf, &r->psi_some_avg10_centi) == 0)
		r->has_psi = true;
	return 0;
}

void cgroup_pressure_close(struct cgroup_pressure *cp)
{
	if (!cp)
		return;
	if (cp->usage_fd >= 0)
		close(cp->usage_fd);
	if (cp->limit_fd >= 0)
		close(cp->limit_fd);
	if (cp->psi_fd >= 0)
		close(cp->psi_fd);
	free(cp->path);
	free(cp);
}

int host_meminfo_read(struct host_meminfo *mi)
{
	char buf[8192], *line, *save = NULL;
	bool total = false, avail = false;
	int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = read_small(fd, buf, sizeof(buf));
	close(fd);
	if (ret)
		return ret;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long kb;

		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1 && kb < (UINT64_MAX >> 10)) {
			mi->total_bytes = (uint64_t)kb << 10;
			total = true;
		} else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 &&
			   kb < (UINT64_MAX >> 10)) {
			mi->available_bytes = (uint64_t)kb << 10;
			avail = true;
		}
	}
	return total && avail ? 0 : -EPROTO;
}
