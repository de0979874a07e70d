/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * evidence.h - idle evidence and guest RAM ranges (evidence.c).
 */
#ifndef _VMNAP_EVIDENCE_H
#define _VMNAP_EVIDENCE_H

#include <linux/types.h>

#include "core/verdict.h"

int vmnap_evidence_init(void);
void vmnap_evidence_exit(void);
void vmnap_evidence_collect(struct vmnap_sample *s, unsigned int window_us);
bool vmnap_timer_evidence_active(void);
int vmnap_ram_ranges(u64 (*ranges)[2], unsigned int max);

#endif /* _VMNAP_EVIDENCE_H */
