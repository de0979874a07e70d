/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * genl.h - generic netlink family "vmnap" (genl.c).
 */
#ifndef _VMNAP_GENL_H
#define _VMNAP_GENL_H

int vmnap_genl_init(void);
void vmnap_genl_exit(void);

#endif /* _VMNAP_GENL_H */
