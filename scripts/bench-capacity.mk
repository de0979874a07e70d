# SPDX-License-Identifier: GPL-2.0-only
# bench-capacity: how many agent VMs a fixed memory budget runs
# (scripts/replay.py capacity, the replay's guests and replayer).  Per
# cohort (baseline, offload, swap) a parent memory cgroup limited to
# CAPACITY_BUDGET_MIB holds every VM (launcher + QEMU) and vmnapd; up to
# CAPACITY_VMS VMs, each replaying CAPACITY_TRAJECTORY, are admitted while
# the budget allows (one rule, each cohort's own evidence: the budget's
# usage, and offload vmnapd's GET /host, swap the VMs' swapped bytes; the
# rule is in scripts/replay/capacity.py).  Outputs in
# build/bench/capacity/<run-id>/, linked as build/bench/capacity/latest.
#
# About 20 min on 2 cores with the defaults (ten VMs: baseline runs four
# at a time in 1 GiB, so fewer could not show 2.5x as many).  Bigger:
#   make bench-capacity CAPACITY_BUDGET_MIB=2048 CAPACITY_VMS=16

CAPACITY_TRAJECTORY	?= tests/data/replay-capacity.jsonl
CAPACITY_COHORTS	?= baseline,offload,swap
CAPACITY_BUDGET_MIB	?= 1024
CAPACITY_VMS		?= 10
CAPACITY_MEM		?= 256
CAPACITY_CPU_QUOTA	?= 0.25
CAPACITY_ARGS		?=

BENCH_TARGETS		+= bench-capacity
.PHONY: bench-capacity

bench-capacity: all
	python3 scripts/replay.py capacity --trajectory $(CAPACITY_TRAJECTORY) \
		--cohorts $(CAPACITY_COHORTS) --budget-mib $(CAPACITY_BUDGET_MIB) \
		--vms $(CAPACITY_VMS) --mem $(CAPACITY_MEM) --cpu-quota $(CAPACITY_CPU_QUOTA) \
		--out $(BUILD)/bench/capacity $(CAPACITY_ARGS)
