# SPDX-License-Identifier: GPL-2.0-only
# make bench-pager: the pager against raw O_DIRECT I/O and Linux swap on the
# same file system; writes $(BUILD)/bench/pager.json (scripts/bench-pager.sh).
BENCH_TARGETS += bench-pager
.PHONY: bench-pager
bench-pager: $(BUILD)/tests/bench/pager_bench $(BUILD)/libvmnap-preload.so
	@BUILD=$(BUILD) scripts/bench-pager.sh
