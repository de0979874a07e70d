/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * freepage.h - free page reporting (freepage.c).
 */
#ifndef _VMNAP_FREEPAGE_H
#define _VMNAP_FREEPAGE_H

#include <linux/types.h>

#include "handoff.h"

/* Given to vmnap_handoff_init(): the protocol's events for the reporter. */
extern const struct vmnap_free_ops vmnap_freepage_ops;

void vmnap_freepage_init(void);
void vmnap_freepage_exit(void);
bool vmnap_freepage_active(void);
const char *vmnap_freepage_off_reason(void);

#endif /* _VMNAP_FREEPAGE_H */
