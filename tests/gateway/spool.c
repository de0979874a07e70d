// SPDX-License-Identifier: GPL-2.0-only
/*
 * spool.c - vmnap-gateway's response spool: bytes come out in the order
 * they went in across memory -> temp file -> memory, whatever the read and
 * write sizes; a failed file write takes nothing (the upstream offers the
 * same bytes again) and loses nothing already held.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gw.h"
#include "tap.h"

struct gw_config gw_cfg;	/* util.c's xfer_new reads it; unused here */

static unsigned int rnd = 12345;
static unsigned int next_rand(void)
{
	rnd = rnd * 1103515245u + 12345u;
	return rnd >> 8;
}

/* Push @total pattern bytes in random pieces, reading in random pieces;
 * true when every byte comes out in order. */
static bool roundtrip(size_t mem_limit, size_t total, size_t max_piece, uint64_t *spilled)
{
	struct spool s;
	size_t in = 0, out = 0;
	char buf[70000], got[70000];
	bool okay = true;

	spool_init(&s, mem_limit, "/tmp");
	while (out < total && okay) {
		if (in < total && (next_rand() % 3 || spool_pending(&s) == 0)) {
			size_t n = next_rand() % max_piece + 1;

			if (n > total - in)
				n = total - in;
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)((in + i) * 7 % 251);
			if (spool_append(&s, buf, n))
				okay = false;
			in += n;
		} else {
			ssize_t r = spool_read(&s, got, next_rand() % max_piece + 1);

			if (r < 0)
				okay = false;
			for (ssize_t i = 0; i < r && okay; i++)
				if (got[i] != (char)((out + (size_t)i) * 7 % 251))
					okay = false;
			out += r > 0 ? (size_t)r : 0;
		}
	}
	okay = okay && spool_pending(&s) == 0 && spool_read(&s, got, 1) == 0;
	*spilled = s.spilled;
	spool_free(&s);
	return okay;
}

int main(void)
{
	struct spool s;
	struct rlimit rl;
	char got[64];
	uint64_t spilled, pending;
	bool ok1;
	ssize_t r;
	int ret;

	ok1 = roundtrip(1 << 20, 300000, 20000, &spilled);
	tap(ok1 && spilled == 0, "within the memory limit: in order, nothing spilled");
	ok1 = roundtrip(4096, 3000000, 65536, &spilled);
	tap(ok1 && spilled > 0,
	    "4 KiB memory, 3 MB in random pieces: in order through the file (%llu spilled)",
	    (unsigned long long)spilled);
	ok1 = roundtrip(1, 200000, 100, &spilled);
	tap(ok1 && spilled > 0, "1-byte memory limit: every byte through the file, in order");

	/* a file write that fails takes nothing and keeps what was held */
	spool_init(&s, 8, "/tmp");
	tap(spool_append(&s, "abcdefgh", 8) == 0, "8 bytes fill memory");
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &rl);
	{
		struct rlimit small = { 4, rl.rlim_max };

		setrlimit(RLIMIT_FSIZE, &small);
	}
	ret = spool_append(&s, "0123456789", 10);
	pending = spool_pending(&s);
	setrlimit(RLIMIT_FSIZE, &rl);	/* before printing: stdout may be a file */
	tap(ret == -EFBIG, "a file write beyond RLIMIT_FSIZE fails (%d)", ret);
	tap(pending == 8, "and takes none of the bytes (pending %llu)", (unsigned long long)pending);
	tap(spool_append(&s, "0123456789", 10) == 0, "offered again once the file can grow: taken");
	r = spool_read(&s, got, sizeof(got));
	r += spool_read(&s, got + r, sizeof(got) - (size_t)r);
	tap(r == 18 && !memcmp(got, "abcdefgh0123456789", 18), "memory, then file, in order");
	spool_free(&s);

	spool_init(&s, 4, "/nonexistent-dir");
	spool_append(&s, "abcd", 4);
	ret = spool_append(&s, "ef", 2);
	tap(ret == -ENOENT && spool_pending(&s) == 4 && spool_read(&s, got, 64) == 4 &&
	    !memcmp(got, "abcd", 4), "no spool dir: the spill fails cleanly, held bytes intact");
	spool_free(&s);
	return tap_done();
}
