/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pager_debug.h - the pager's debug endpoint <run_dir>/pager-debug.sock:
 * "list", "stats NAME", "offload NAME", "resumed NAME", one JSON line back.
 * See pager_debug.c.
 */
#ifndef VMNAP_PAGER_DEBUG_H
#define VMNAP_PAGER_DEBUG_H

#include <jansson.h>

#include "pager.h"
#include "vmnapd.h"

#define PAGER_DEBUG_SOCKET	"pager-debug.sock"

int pager_debug_start(struct vmnapd *d);
void pager_debug_stop(struct vmnapd *d);

#endif
