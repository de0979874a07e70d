# SPDX-License-Identifier: GPL-2.0-only
# Guest image helpers (owner: guest launcher).  scripts/mkinitramfs.sh asks
# make which programs go into the initramfs: make -s print-guest-programs

.PHONY: print-guest-programs
print-guest-programs:
	@echo $(GUEST_PROGRAMS)

# The host's TSC rate in kHz, which scripts/run-guest.sh gives a TCG guest
# as tsc_early_khz= (see scripts/tsc-khz.c).
TSC_KHZ		:= $(BUILD)/tsc-khz
TEST_PROGRAMS	+= $(TSC_KHZ)
$(TSC_KHZ): $(BUILD)/scripts/tsc-khz.o
	$(CC) $(LDFLAGS) -o $@ $^
