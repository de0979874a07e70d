# SPDX-License-Identifier: GPL-2.0-only
# vmnap.ko's layers (read by scripts/layers.py; Kbuild lists the objects).
#   core  pure logic: protocol codecs, handoff state machine, verdict,
#         timer book, backoff; with its KUnit suites, it includes only
#         uapi/ and its own headers
#   .     the module: init/exit and parameters (main.c), handoff, link,
#         evidence, quiesce, free page reporting, generic netlink
KMOD_LAYERS	:= core .

LAYER_USES_core	:=
LAYER_USES_.	:= core
