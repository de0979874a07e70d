# SPDX-License-Identifier: GPL-2.0-only
# libFuzzer targets (clang, ASan + UBSan) and their seed corpora.
#
#   make fuzz         run every target for FUZZ_SECONDS (default 60) each
#   make fuzz-smoke   a short, fixed run of each (make check runs the same
#                     through tests/fuzz/fuzz.list)
#
# tests/fuzz/fuzz_<name>.c -> $(BUILD)/fuzz/fuzz_<name>.  The daemon sources a
# target exercises are compiled again with coverage and sanitizers into
# $(BUILD)/fuzz/obj/.  tests/fuzz/run.sh writes the seeds (gen_corpus: valid
# messages) to $(BUILD)/fuzz/seeds/, what fuzzing finds to corpus/, crashes
# to artifacts/.

FUZZ_CC		?= clang
FUZZ_SECONDS	?= 60
FUZZ_SMOKE_RUNS	?= 300000
FUZZ_DIR	:= $(BUILD)/fuzz
FUZZ_SANITIZE	:= -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS	:= -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g \
		   -fno-omit-frame-pointer -fno-strict-aliasing $(FUZZ_SANITIZE) \
		   -fsanitize=fuzzer-no-link -I$(CURDIR) $(VMNAPD_INC)
FUZZ_NAMES	:= $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS	:= $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
FUZZ_GEN	:= $(FUZZ_DIR)/gen_corpus
# Daemon sources under test, per target.
FUZZ_DEPS_fuzz_decode		:=
FUZZ_DEPS_fuzz_guest_link	:= host-pager/src/link/guest_link.c \
				   host-pager/src/core/loop.c host-pager/src/core/log.c

TEST_PROGRAMS	+= $(FUZZ_TARGETS) $(FUZZ_GEN)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

define FUZZ_TARGET_RULE
$(FUZZ_DIR)/$(1): $(FUZZ_DIR)/obj/tests/fuzz/$(1).o \
		$(addprefix $(FUZZ_DIR)/obj/,$(FUZZ_DEPS_$(1):.c=.o))
	$$(FUZZ_CC) $$(FUZZ_SANITIZE) -fsanitize=fuzzer -o $$@ $$^
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_TARGET_RULE,$(n))))

$(FUZZ_GEN): tests/fuzz/gen_corpus.c uapi/vmnap.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $<

fuzz: $(FUZZ_TARGETS) $(FUZZ_GEN)
	@BUILD=$(BUILD) tests/fuzz/run.sh --seconds $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-smoke: $(FUZZ_TARGETS) $(FUZZ_GEN)
	@BUILD=$(BUILD) tests/fuzz/run.sh --runs $(FUZZ_SMOKE_RUNS) $(FUZZ_NAMES)
