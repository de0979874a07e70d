# SPDX-License-Identifier: GPL-2.0-only
# bench-replay: the trajectory replay benchmark (scripts/replay.py),
# small configuration: the full trajectory (41 steps, 205 s of waits), every
# cohort interleaved, REPLAY_REPEATS runs each, 1 VM and then REPLAY_VMS VMs
# from a common release with REPLAY_CPU_QUOTA CPUs each (auto: the host's
# CPUs shared by the VMs, at most 0.5 each: 0.125 for 16 VMs on 2 cores;
# summary.json states cpu_quota, its rule and the total).
#
# REPLAY_TRAJECTORY=tests/data/replay-heavy.jsonl: the memory-heavy agent (a
# process holding 192 MiB of non-zero data rewrites 20 MiB of it per step,
# a file written and synced per step; 30 steps, 120 s of waits).  Outputs go to
# build/bench/replay/<run-id>/, linked as latest-1vm, latest-<N>vm and latest
# (the last run).
#
# REPLAY_VIA=gateway: the replayer acts as the agent and sends each step's
# model request through the VM's vmnap-gateway listener to the gateway's fake
# model server (every cohort; unmanaged VMs in baseline and swap), instead of
# calling vmnapd's wait API itself (direct); the summary adds the gateway's
# own overhead, calibrated side by side in the same run.
#
# REPLAY_COHORTS=...,offload-ws,offload-eager adds the optional cohorts (the
# cost policy with working-set or eager restore; not run by default);
# offload-nofollow and offload-notrack run offload without the fault-order
# prefetch or without dirty tracking, offload-tail keeping the command's
# last writes through every wait and offload-notail through none (by
# default only until the resume-critical set has pages), to measure what
# each does.
#
# REPLAY_ALT=REV (a commit, tag or branch) with REPLAY_COHORTS=offload,offload-alt
# measures two builds side by side: offload-alt is offload with REV's vmnapd
# and preload shim (scripts/build-rev.sh builds them once into
# $(VMNAP_CACHE)/builds/<commit>/), the guest this tree's in both; the table
# adds offload's ratios to offload-alt, repetition by repetition.
#
# REPLAY_ARGS=--side-by-side runs a repetition's cohorts at once instead of
# one after another, so that each ratio to baseline compares runs that
# shared the machine's every moment; the VMs' quotas together must fit the
# host's CPUs with room for vmnapd (2 cohorts at 0.5 CPU on 2 cores).
#
# About 150 min on 2 cores (18 cohort runs of ~4 min, twice).  Bigger:
#   make bench-replay REPLAY_VMS=4 REPLAY_REPEATS=5

REPLAY_TRAJECTORY	?= tests/data/replay-full.jsonl
REPLAY_COHORTS		?= baseline,pause,offload,offload-seed,offload-lazy,swap
REPLAY_REPEATS		?= 3
REPLAY_VMS		?= 2
REPLAY_CPU_QUOTA	?= auto
REPLAY_MEM		?= 512
REPLAY_VIA		?= direct
REPLAY_ARGS		?=
REPLAY_ALT		?=

BENCH_TARGETS		+= bench-replay
.PHONY: bench-replay bench-replay-1vm bench-replay-nvm

REPLAY_RUN = python3 scripts/replay.py run --trajectory $(REPLAY_TRAJECTORY) \
	--cohorts $(REPLAY_COHORTS) --repeats $(REPLAY_REPEATS) \
	--cpu-quota $(REPLAY_CPU_QUOTA) --mem $(REPLAY_MEM) --via $(REPLAY_VIA) $(REPLAY_ARGS)

bench-replay: bench-replay-1vm bench-replay-nvm

# With REPLAY_ALT, the revision is built first (a failed build stops here).
REPLAY_ALT_BUILD = $(if $(REPLAY_ALT),alt=$$(scripts/build-rev.sh $(REPLAY_ALT)) && )
REPLAY_ALT_ARG = $(if $(REPLAY_ALT),--alt-build "$$alt")

bench-replay-1vm: all
	$(REPLAY_ALT_BUILD)$(REPLAY_RUN) --vms 1 --out $(BUILD)/bench/replay $(REPLAY_ALT_ARG)

# The 1-VM runs first when both are asked for (make -j); alone,
# make bench-replay-nvm runs only the N-VM configuration.
bench-replay-nvm: all $(if $(filter bench-replay bench,$(MAKECMDGOALS)),| bench-replay-1vm)
	$(REPLAY_ALT_BUILD)$(REPLAY_RUN) --vms $(REPLAY_VMS) --out $(BUILD)/bench/replay $(REPLAY_ALT_ARG)
