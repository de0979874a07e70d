# SPDX-License-Identifier: GPL-2.0-only
#
# vmnap top-level Makefile.
#
#   make            build vmnap.ko, vmnapd, vmnapctl, the preload shim, tests
#   make demo       set-up, then the main job (see README)
#   make check      set-up, build, every test; last line "check: N passed, ..."
#   make fuzz       run every libFuzzer target for FUZZ_SECONDS each
#   make asan       userspace built with ASan+UBSan into build-asan/
#   make bench      every benchmark (bench-pager, bench-vsock, bench-replay,
#                   bench-gateway, bench-capacity)
#   make install    DESTDIR=, PREFIX= (/usr/local); make deb: build/deb/*.deb
#                   (scripts/pkg.mk)
#
# Userspace objects go to $(BUILD); the module is built by Kbuild in place
# (kmod/*.o and kmod/core/*.o, ignored by git).  Expensive artefacts (guest
# kernel, images, the UML build for KUnit) are cached in $(VMNAP_CACHE),
# keyed by inputs.

BUILD		?= build
VMNAP_CACHE	?= /var/cache/vmnap
export VMNAP_CACHE

CC		?= gcc
CFLAGS_BASE	:= -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
		   -fno-strict-aliasing -I$(CURDIR)
CFLAGS		?=
# Sanitizer flags have their own variables: a command-line EXTRA_CFLAGS or
# LDFLAGS would replace the fragments' target-specific "+=" additions (the
# guest tool's libnl include path, a test's --wrap) instead of adding to them.
SAN_CFLAGS	?=
SAN_LDFLAGS	?=
ALL_CFLAGS	= $(CFLAGS_BASE) $(LAYER_INC) $(EXTRA_CFLAGS) $(CFLAGS) $(SAN_CFLAGS)
LDFLAGS		?=
LDFLAGS		+= $(SAN_LDFLAGS)

# Kernel headers: Debian's linux-headers-<ver>-amd64 that matches the guest
# kernel scripts/guest-kernel.sh fetches.  KDIR= overrides.
KDIR		?= $(shell scripts/kdir.sh 2>/dev/null)

.PHONY: all userspace module deps demo check fuzz fuzz-smoke asan bench \
	clean distclean guest-kernel initramfs

all: userspace module

deps:
	@scripts/deps.sh

# Each component's fragment adds its programs to these lists and its rules.
PROGRAMS	:=	# host executables -> $(BUILD)/<name>
TEST_PROGRAMS	:=	# test executables -> $(BUILD)/tests/<name>
GUEST_PROGRAMS	:=	# programs copied into the guest initramfs
LIBS		:=	# shared objects -> $(BUILD)/<name>.so

include $(sort $(wildcard */build.mk */*/build.mk))
# The replay benchmark's exec agent is linked -static, which the sanitizers
# cannot be: it stays a plain build under `make asan`.
$(EXEC_AGENT) $(EXEC_AGENT).o: override SAN_CFLAGS :=
$(EXEC_AGENT): override SAN_LDFLAGS :=
# Benchmarks: scripts/bench-<name>.mk adds its target to BENCH_TARGETS.
BENCH_TARGETS	:=
include $(sort $(wildcard scripts/*.mk))

userspace: $(PROGRAMS) $(LIBS) $(TEST_PROGRAMS) $(GUEST_PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# (not build/deb: a package build's tree, whose modules-load.d and sysctl.d
# are directories)
-include $(shell find $(BUILD) -path $(BUILD)/deb -prune -o -name '*.d' -type f -print 2>/dev/null)

# VMNAP_KVER=<release or series> builds for that guest kernel into
# $(BUILD)/kmod-<release>/ instead (scripts/kmod-build.sh), never in place.
module:
ifneq ($(VMNAP_KVER),)
	@scripts/kmod-build.sh
else
	@test -n "$(KDIR)" || { echo "no kernel headers: run 'make deps' or set KDIR=" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules
endif

asan:
	$(MAKE) BUILD=build-asan \
		SAN_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -O1" \
		SAN_LDFLAGS="-fsanitize=address,undefined" userspace

guest-kernel: deps
	@scripts/guest-kernel.sh

initramfs: all guest-kernel
	@scripts/mkinitramfs.sh

check: deps
	@$(MAKE) --no-print-directory all
	@scripts/check.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

bench: $(BENCH_TARGETS)

clean:
	rm -rf $(BUILD) build-asan
	@if [ -n "$(KDIR)" ]; then $(MAKE) -C $(KDIR) M=$(CURDIR) clean >/dev/null; fi

distclean: clean
	@echo "cache left in $(VMNAP_CACHE); remove it by hand if wanted"
