# SPDX-License-Identifier: GPL-2.0-only
# vmnapd, vmnapctl and libvmnap-preload.so.
#
# Every host-pager/src/*.c is part of the daemon.  All but main.c also form
# $(BUILD)/libvmnapd.a, which the tests link against.

VMNAPD_SRCS	:= $(wildcard host-pager/src/*.c)
VMNAPD_LIB_SRCS	:= $(filter-out host-pager/src/main.c,$(VMNAPD_SRCS))
VMNAPD_LIB	:= $(BUILD)/libvmnapd.a
VMNAPD_LDLIBS	:= -luring -lmicrohttpd -ljansson -lsystemd -lcurl -lpthread

$(VMNAPD_LIB): $(VMNAPD_LIB_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

ifneq ($(wildcard host-pager/src/main.c),)
PROGRAMS += $(BUILD)/vmnapd
$(BUILD)/vmnapd: $(BUILD)/host-pager/src/main.o $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(VMNAPD_LDLIBS)
endif

# vmnapctl: one program per file in tools/, linked with the daemon library
# for shared helpers.
VMNAPCTL_SRCS	:= $(wildcard host-pager/tools/*.c)
ifneq ($(VMNAPCTL_SRCS),)
PROGRAMS += $(BUILD)/vmnapctl
$(BUILD)/vmnapctl: $(VMNAPCTL_SRCS:%.c=$(BUILD)/%.o) $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(VMNAPD_LDLIBS) -lcurl
endif

# The preload shim: position-independent, no daemon library.
PRELOAD_SRCS	:= $(wildcard host-pager/preload/*.c)
ifneq ($(PRELOAD_SRCS),)
LIBS += $(BUILD)/libvmnap-preload.so
$(BUILD)/preload/%.o: host-pager/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@
$(BUILD)/libvmnap-preload.so: $(PRELOAD_SRCS:host-pager/preload/%.c=$(BUILD)/preload/%.o)
	$(CC) $(LDFLAGS) -shared -o $@ $^ -ldl
endif
