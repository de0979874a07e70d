# SPDX-License-Identifier: GPL-2.0-only
# vmnap-gateway: the agent's model API base URL; each request is a wait in
# vmnapd (control API over its unix socket).  A program of its own: of
# vmnapd it sees only core/ (log.c: the journal priorities and the
# sanitiser for what clients send), which knows nothing of VMs.

GATEWAY_SRCS	:= $(wildcard host-pager/gateway/*.c)
PROGRAMS	+= $(BUILD)/vmnap-gateway

GATEWAY_CORE	:= $(BUILD)/host-pager/src/core/log.o
$(GATEWAY_SRCS:%.c=$(BUILD)/%.o): LAYER_INC = -I$(CURDIR)/host-pager/gateway \
	-I$(CURDIR)/host-pager/src/core

$(BUILD)/vmnap-gateway: $(GATEWAY_SRCS:%.c=$(BUILD)/%.o) $(GATEWAY_CORE)
	$(CC) $(LDFLAGS) -o $@ $^ -lmicrohttpd -lcurl -ljansson -lpthread

# The spool's unit test (tests/gateway/spool.c) links util.c (and its log.c) only.
TEST_PROGRAMS	+= $(BUILD)/tests/gateway/spool
$(BUILD)/tests/gateway/spool.o: LAYER_INC = -I$(CURDIR)/host-pager/gateway -I$(CURDIR)/tests/lib
$(BUILD)/tests/gateway/spool: $(BUILD)/tests/gateway/spool.o $(BUILD)/host-pager/gateway/util.o \
		$(GATEWAY_CORE)
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl -lpthread
