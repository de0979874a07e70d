# SPDX-License-Identifier: GPL-2.0-only
# vmnap-gateway: the agent's model API base URL; each request is a wait in
# vmnapd (control API over its unix socket).  A program of its own: it sees
# none of vmnapd's headers (its objects get only this folder's include path).

GATEWAY_SRCS	:= $(wildcard host-pager/gateway/*.c)
PROGRAMS	+= $(BUILD)/vmnap-gateway

$(GATEWAY_SRCS:%.c=$(BUILD)/%.o): LAYER_INC = -I$(CURDIR)/host-pager/gateway

$(BUILD)/vmnap-gateway: $(GATEWAY_SRCS:%.c=$(BUILD)/%.o)
	$(CC) $(LDFLAGS) -o $@ $^ -lmicrohttpd -lcurl -ljansson -lpthread

# The spool's unit test (tests/gateway/spool.c) links util.c only.
TEST_PROGRAMS	+= $(BUILD)/tests/gateway/spool
$(BUILD)/tests/gateway/spool.o: LAYER_INC = -I$(CURDIR)/host-pager/gateway -I$(CURDIR)/tests/lib
$(BUILD)/tests/gateway/spool: $(BUILD)/tests/gateway/spool.o $(BUILD)/host-pager/gateway/util.o
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl -lpthread
