# SPDX-License-Identifier: GPL-2.0-only
# vmnapd, vmnapctl and libvmnap-preload.so.
#
# host-pager/src/<layer>/*.c is the daemon, one folder per layer (listed in
# host-pager/src/layers.mk).  A layer's objects are compiled with include
# paths for that layer and the layers it uses only, so a lower layer cannot
# even see a higher one's headers.  All but api/main.c and api/vsockd.c (vmnap-vsockd) also form
# $(BUILD)/libvmnapd.a, which the tests link against (tests, tools and fuzz
# targets see every layer: VMNAPD_INC).

include host-pager/src/layers.mk

VMNAPD_SRC_DIR	:= host-pager/src
VMNAPD_INC	:= $(VMNAPD_LAYERS:%=-I$(CURDIR)/$(VMNAPD_SRC_DIR)/%)
LAYER_INC	= $(VMNAPD_INC)
$(foreach l,$(VMNAPD_LAYERS),$(eval \
  $(BUILD)/$(VMNAPD_SRC_DIR)/$(l)/%.o: LAYER_INC = \
	$(foreach u,$(l) $(LAYER_USES_$(l)),-I$(CURDIR)/$(VMNAPD_SRC_DIR)/$(u))))

VMNAPD_SRCS	:= $(foreach l,$(VMNAPD_LAYERS),$(wildcard $(VMNAPD_SRC_DIR)/$(l)/*.c))
VMNAPD_MAINS	:= $(VMNAPD_SRC_DIR)/api/main.c $(VMNAPD_SRC_DIR)/api/vsockd.c
VMNAPD_LIB_SRCS	:= $(filter-out $(VMNAPD_MAINS),$(VMNAPD_SRCS))
VMNAPD_LIB	:= $(BUILD)/libvmnapd.a
VMNAPD_LDLIBS	:= -luring -lmicrohttpd -ljansson -lsystemd -lcurl -lpthread

$(VMNAPD_LIB): $(VMNAPD_LIB_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

PROGRAMS += $(BUILD)/vmnapd
$(BUILD)/vmnapd: $(BUILD)/$(VMNAPD_SRC_DIR)/api/main.o $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(VMNAPD_LDLIBS)

# vmnap-vsockd: one VM's vsock device in its own process (api/vsockd.c).
PROGRAMS += $(BUILD)/vmnap-vsockd
$(BUILD)/vmnap-vsockd: $(BUILD)/$(VMNAPD_SRC_DIR)/api/vsockd.o $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(VMNAPD_LDLIBS)

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
