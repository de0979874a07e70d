// SPDX-License-Identifier: GPL-2.0-only
/*
 * memfill - in-guest helper for the pager end-to-end test: fill most of
 * the free RAM with a pseudo-random pattern, print its digest, then on each
 * "verify" line from stdin re-read everything and check it.
 *
 *   memfill [PERCENT_OF_MemAvailable (default 80)] < /dev/ttyS1
 *
 * Console lines: "MEMFILL READY mib=N digest=HEX", "MEMFILL VERIFY n OK"
 * or "MEMFILL VERIFY n BAD page=P", "MEMFILL BYE".  Exit 0, or 1 on a bad
 * verify.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE		4096u
#define SEED		0x5eed5eed12345678ull
#define DEFAULT_PERCENT	80

static uint64_t mem_available_kib(void)
{
	char line[256];
	unsigned long long kib = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Fill (or check, when @check) page @i; returns false on a mismatch. */
static int page_do(uint64_t *w, uint64_t i, int check, uint64_t *digest)
{
	uint64_t x = SEED ^ (i * 0x9E3779B97F4A7C15ull) ^ 1;

	for (size_t k = 0; k < PAGE / 8; k++) {
		uint64_t v = next(&x);

		if (check && w[k] != v)
			return 0;
		if (!check)
			w[k] = v;
		*digest = (*digest ^ v) * 0x100000001b3ull;
	}
	return 1;
}

int main(int argc, char **argv)
{
	unsigned int percent = argc > 1 ? (unsigned int)atoi(argv[1]) : DEFAULT_PERCENT;
	uint64_t bytes = mem_available_kib() * 1024 / 100 * percent;
	uint64_t npages = bytes / PAGE, digest = 0, d2;
	char line[64];
	unsigned int round = 0;
	uint64_t *mem;

	if (!npages || percent > 95) {
		printf("MEMFILL ERROR cannot size the fill\n");
		return 2;
	}
	mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		printf("MEMFILL ERROR mmap %llu MiB\n", (unsigned long long)(bytes >> 20));
		return 2;
	}
	for (uint64_t i = 0; i < npages; i++)
		page_do(mem + i * (PAGE / 8), i, 0, &digest);
	printf("MEMFILL READY mib=%llu digest=%016llx\n",
	       (unsigned long long)(npages * PAGE >> 20), (unsigned long long)digest);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "quit", 4))
			break;
		if (strncmp(line, "verify", 6))
			continue;
		round++;
		d2 = 0;
		for (uint64_t i = 0; i < npages; i++) {
			if (!page_do(mem + i * (PAGE / 8), i, 1, &d2)) {
				printf("MEMFILL VERIFY %u BAD page=%llu\n", round,
				       (unsigned long long)i);
				fflush(stdout);
				return 1;
			}
		}
		printf("MEMFILL VERIFY %u %s digest=%016llx\n", round,
		       d2 == digest ? "OK" : "BAD", (unsigned long long)d2);
		fflush(stdout);
		if (d2 != digest)
			return 1;
	}
	printf("MEMFILL BYE\n");
	return 0;
}
