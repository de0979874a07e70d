# SPDX-License-Identifier: GPL-2.0-only
# Test programs.  Every tests/unit/*.c, tests/integration/*.c and
# tests/bench/*.c is one program in $(BUILD)/tests/<layer>/<name>, linked
# with the daemon library (unit tests also with cmocka; the mock-VMM pager
# tests and the pager benchmark also with tests/lib/mockvmm.c).
# tests/selftests/*.c run inside the guest (GUEST_PROGRAMS, copied into the
# initramfs by scripts/mkinitramfs.sh).

UNIT_SRCS	:= $(wildcard tests/unit/*.c)
INTEG_SRCS	:= $(wildcard tests/integration/*.c)
SELFTEST_SRCS	:= $(wildcard tests/selftests/*.c)
BENCH_SRCS	:= $(wildcard tests/bench/*.c)

TEST_PROGRAMS	+= $(UNIT_SRCS:%.c=$(BUILD)/%) $(INTEG_SRCS:%.c=$(BUILD)/%) \
		   $(BENCH_SRCS:%.c=$(BUILD)/%)
GUEST_PROGRAMS	+= $(SELFTEST_SRCS:%.c=$(BUILD)/%)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(VMNAPD_LDLIBS)

# Objects first, then the library (extra objects are listed after it in $^).
$(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(VMNAPD_LIB) $(VMNAPD_LDLIBS)

MOCKVMM_OBJ	:= $(BUILD)/tests/lib/mockvmm.o
MOCKVMM_TESTS	:= pager_mockvmm pager_dirty pager_cancel pager_critical pager_follow pager_eintr pager_tail \
		   pager_enospc pager_storeerr pager_race pager_events pager_crc pager_ioprio \
		   pager_restart pager_restore pressure_cgroup pager_blockdev pager_vmmkill loop_detach
$(MOCKVMM_TESTS:%=$(BUILD)/tests/integration/%): $(MOCKVMM_OBJ)

$(BUILD)/tests/bench/%: $(BUILD)/tests/bench/%.o $(MOCKVMM_OBJ) $(VMNAPD_LIB)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(VMNAPD_LIB) $(VMNAPD_LDLIBS)

$(BUILD)/tests/selftests/%: $(BUILD)/tests/selftests/%.o
	$(CC) $(LDFLAGS) -o $@ $^ $(SELFTEST_LDLIBS)

# C tests share tests/lib/tap.h (#include "tap.h").
$(BUILD)/tests/%.o: EXTRA_CFLAGS += -I$(CURDIR)/tests/lib

SELFTEST_LDLIBS	?= $(shell pkg-config --libs libnl-genl-3.0 libkmod 2>/dev/null)
SELFTEST_CFLAGS	:= $(shell pkg-config --cflags libnl-genl-3.0 libkmod 2>/dev/null)
$(BUILD)/tests/selftests/%.o: EXTRA_CFLAGS += $(SELFTEST_CFLAGS)

# Keep intermediate objects (make would delete them otherwise).
.SECONDARY:
