/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * quiesce.h - holding the virtio devices, and the fail-safe (quiesce.c).
 */
#ifndef _VMNAP_QUIESCE_H
#define _VMNAP_QUIESCE_H

#include <linux/hrtimer.h>
#include <linux/types.h>

/* Quiesce bookkeeping: at most this many virtio devices are held. */
#define VMNAP_MAX_QUIESCE_DEVS	32

int vmnap_quiesce_init(void (*failsafe_expired)(void));
void vmnap_quiesce_exit(void);
int vmnap_quiesce(unsigned int timeout_ms);
unsigned int vmnap_unquiesce(void);
unsigned int vmnap_quiesced_devices(void);
void vmnap_failsafe_arm(void);
void vmnap_failsafe_arm_ms(unsigned int ms);
void vmnap_failsafe_cancel(void);
bool vmnap_is_own_timer(const struct hrtimer *t);

#endif /* _VMNAP_QUIESCE_H */
