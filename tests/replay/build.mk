# SPDX-License-Identifier: GPL-2.0-only
# The replay benchmark's in-guest exec agent: a guest program, statically
# linked so that it runs unchanged in the Debian minbase root filesystem
# (scripts/guest-rootfs.sh copies it there) and in the busybox initramfs.

EXEC_AGENT	:= $(BUILD)/tests/replay/exec_agent
GUEST_PROGRAMS	+= $(EXEC_AGENT)

$(EXEC_AGENT): $(BUILD)/tests/replay/exec_agent.o
	$(CC) $(LDFLAGS) -static -o $@ $^ -ljansson -lnettle
