# SPDX-License-Identifier: GPL-2.0-only
# Guest image helpers (owner: guest launcher).  scripts/mkinitramfs.sh asks
# make which programs go into the initramfs: make -s print-guest-programs

.PHONY: print-guest-programs
print-guest-programs:
	@echo $(GUEST_PROGRAMS)
