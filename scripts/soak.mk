# SPDX-License-Identifier: GPL-2.0-only
# make soak: SOAK_VMS VMs x SOAK_CYCLES pause/offload/resume cycles in one
# vmnapd built with ASan+LSan (build-asan, as `make asan`), mock VMMs from
# the plain build, a digest of every VM's RAM each cycle; writes
# $(BUILD)/bench/soak.json (scripts/soak.sh).  Fewer cycles while
# developing: make soak SOAK_CYCLES=10
SOAK_CYCLES	?= 100
SOAK_VMS	?= 4
SOAK_MIB	?= 8

.PHONY: soak
soak: $(BUILD)/tests/bench/soak $(BUILD)/libvmnap-preload.so | deps
	@$(MAKE) --no-print-directory asan
	@BUILD=$(BUILD) SOAK_CYCLES=$(SOAK_CYCLES) SOAK_VMS=$(SOAK_VMS) \
		SOAK_MIB=$(SOAK_MIB) scripts/soak.sh
