/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * link.h - the vsock client (link.c).
 */
#ifndef _VMNAP_LINK_H
#define _VMNAP_LINK_H

#include <linux/types.h>

#include "uapi/vmnap.h"

/**
 * struct vmnap_link_ops - how the link reports to the protocol above it
 * @on_up: connected; say HELLO (connect work, on vmnap_wq)
 * @on_down: the connection is gone (vmnap_wq, or link stop at unload)
 * @on_msg: a framed, validated host message (receive work, on vmnap_wq);
 *	nonzero drops the link
 *
 * Called without any lock of link.c held: each takes what it needs.
 */
struct vmnap_link_ops {
	void (*on_up)(void);
	void (*on_down)(void);
	int (*on_msg)(const struct vmnap_hdr *h, const void *payload);
};

int vmnap_link_init(const struct vmnap_link_ops *ops);
void vmnap_link_start(void);
void vmnap_link_stop(void);
void vmnap_link_exit(void);
int vmnap_send(const void *buf, size_t len);
int vmnap_send_gen(u64 gen, const void *buf, size_t len);
u64 vmnap_link_gen(void);
int vmnap_send_error(u32 code, u32 ref_seq, const char *text);
void vmnap_link_drop(void);
void vmnap_link_drop_sync(void);
void vmnap_link_reset_backoff(void);

#endif /* _VMNAP_LINK_H */
