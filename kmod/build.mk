# SPDX-License-Identifier: GPL-2.0-only
# vmnap-guest: the in-guest tool for vmnap.ko (the module itself is built
# by Kbuild: make module).  libnl-genl-3 for the netlink family, libkmod to
# load and unload the module.

VMNAP_GUEST_LIBS	:= $(shell pkg-config --libs libnl-genl-3.0 libkmod 2>/dev/null)
VMNAP_GUEST_CFLAGS	:= $(shell pkg-config --cflags libnl-genl-3.0 libkmod 2>/dev/null)

GUEST_PROGRAMS += $(BUILD)/vmnap-guest

$(BUILD)/kmod/tools/%.o: EXTRA_CFLAGS += $(VMNAP_GUEST_CFLAGS)

$(BUILD)/vmnap-guest: $(BUILD)/kmod/tools/vmnap-guest.o
	$(CC) $(LDFLAGS) -o $@ $^ $(VMNAP_GUEST_LIBS)
