// SPDX-License-Identifier: GPL-2.0-only
/*
 * tsc-khz - print the host's TSC frequency in kHz, measured against
 * CLOCK_MONOTONIC_RAW.
 *
 * Under TCG a guest's TSC counts at the host's TSC rate (QEMU reads the
 * host's TSC), and the guest kernel calibrates it at boot against the
 * emulated PIT and HPET.  On a loaded host that calibration can come out
 * wrong by an order of magnitude (seen: "PIT calibration deviates from
 * HPET: 68916 2100003", the PIT value used, the guest clock running 30x
 * fast), and a guest booted with tsc=reliable has no watchdog to catch it.
 * scripts/run-guest.sh passes this value as tsc_early_khz= instead.
 *
 * Each sample brackets one clock read between two TSC reads and keeps the
 * tightest bracket, so preemption between the reads costs accuracy only
 * when it hits every try.  Exit 1 (nothing printed) where the TSC is not
 * usable as a clock: not x86, or no constant_tsc/nonstop_tsc in
 * /proc/cpuinfo.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>

#define TRIES		64	/* bracketed reads per sample */
#define SPAN_NS		100000000ull	/* between the two samples */

struct sample {
	uint64_t tsc, ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct sample sample(void)
{
	struct sample best = { 0, 0 };
	uint64_t width = UINT64_MAX;

	for (int i = 0; i < TRIES; i++) {
		uint64_t a = __rdtsc(), ns = now_ns(), b = __rdtsc();

		if (b > a && b - a < width) {
			width = b - a;
			best = (struct sample){ a + (b - a) / 2, ns };
		}
	}
	return best;
}

static int tsc_is_a_clock(void)
{
	char line[4096];
	int constant = 0, nonstop = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5)) {
			constant = strstr(line, " constant_tsc") != NULL;
			nonstop = strstr(line, " nonstop_tsc") != NULL;
			break;
		}
	fclose(f);
	return constant && nonstop;
}

int main(void)
{
	struct sample s0, s1;
	struct timespec span = { 0, (long)SPAN_NS };

	if (!tsc_is_a_clock()) {
		fprintf(stderr, "tsc-khz: the TSC is not constant and nonstop here\n");
		return 1;
	}
	s0 = sample();
	nanosleep(&span, NULL);
	s1 = sample();
	if (!s0.ns || !s1.ns || s1.ns <= s0.ns || s1.tsc <= s0.tsc) {
		fprintf(stderr, "tsc-khz: no usable samples\n");
		return 1;
	}
	printf("%llu\n", (unsigned long long)((s1.tsc - s0.tsc) * 1000000ull / (s1.ns - s0.ns)));
	return 0;
}
#else
int main(void)
{
	fprintf(stderr, "tsc-khz: not an x86 host\n");
	return 1;
}
#endif
