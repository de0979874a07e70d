/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * metrics.h - GET /metrics: Prometheus text exposition format 0.0.4.
 *
 * Per VM (label vm="<name>"): coordinator state, waits by kind, handoffs,
 * BUSY verdicts by reason, pauses, offloads, resumes by reason, paused and
 * offloaded seconds, response delivery latency (histogram), pause backend
 * calls and their errors; from the pager: guest RAM, resident bytes (memfd allocation),
 * store bytes, page counts by state, faults and fault latency (histogram,
 * power-of-2 µs buckets, true sum), resident byte-seconds; refused guest input by reason, guest link
 * sessions, log lines and events over their budgets.  Daemon: build info
 * (version label), VMs, pagers still being detached (reapers), events
 * emitted and lost, memory handshakes accepted and refused by reason,
 * AF_VSOCK listener refusals.
 */
#ifndef VMNAP_METRICS_H
#define VMNAP_METRICS_H

#include <jansson.h>
#include <stddef.h>

#include "vmnapd.h"

/* The whole exposition, malloc'ed and NUL-terminated; NULL on ENOMEM. */
char *metrics_render(struct vmnapd *d, size_t *len);
/* The daemon-wide refusals for GET /: {"mem_handshake": {"accepted": N,
 * "refused": {reason: N}}, "vsock_listener": {reason: N}}. */
json_t *metrics_rejections_json(struct vmnapd *d);

#endif
