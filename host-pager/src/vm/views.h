/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * views.h - JSON views of the parts' statistics, shared by the control
 * API, the pager debug endpoint and the VM's status.  Each returns a new
 * reference.
 */
#ifndef VMNAP_VIEWS_H
#define VMNAP_VIEWS_H

#include <jansson.h>

#include "pager.h"

/* A pager's statistics: page-state counts, bytes, faults, latencies. */
json_t *pager_stats_json(struct pager *p);

#endif
