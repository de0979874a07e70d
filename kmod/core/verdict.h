/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * verdict.h - idle evidence as measured, and the READY/BUSY verdict taken
 * from it (pure logic, KUnit tested).
 */
#ifndef _VMNAP_VERDICT_H
#define _VMNAP_VERDICT_H

#include <linux/types.h>

#include "uapi/vmnap.h"

/**
 * struct vmnap_sample - idle evidence in host byte order
 * @window_ns: length of the observation window
 * @next_timer_ns: ns until the earliest armed timer other than vmnap's own;
 *	VMNAP_TIMER_UNKNOWN unless @timer_known
 * @writeback_pages: NR_WRITEBACK at the end of the window
 * @dirty_pages: NR_FILE_DIRTY at the end of the window
 * @cpu_idle_permille: idle share of the window, minimum over online CPUs
 * @nr_runnable: runnable tasks other than the module's own worker
 * @io_inflight: block requests issued and not completed at the end
 * @io_issued: block requests issued during the window (not on the wire:
 *	activity too short-lived to be caught in flight still counts)
 * @devices_quiesced: virtio devices held by the module at sampling time
 * @timer_known: @next_timer_ns accounts for every armed timer it covers
 */
struct vmnap_sample {
	u64 window_ns;
	u64 next_timer_ns;
	u64 writeback_pages;
	u64 dirty_pages;
	u32 cpu_idle_permille;
	u32 nr_runnable;
	u32 io_inflight;
	u32 io_issued;
	u32 devices_quiesced;
	bool timer_known;
};

/**
 * struct vmnap_thresholds - what counts as busy (module parameters)
 * @min_idle_permille: a CPU idler than this over the window is idle
 * @max_dirty_pages: more dirty page cache than this is pending writeback
 * @min_timer_ns: a known timer closer than this makes a pause pointless
 */
struct vmnap_thresholds {
	u32 min_idle_permille;
	u64 max_dirty_pages;
	u64 min_timer_ns;
};

u32 vmnap_busy_reasons(const struct vmnap_sample *s,
		       const struct vmnap_thresholds *t);
void vmnap_evidence_encode(struct vmnap_evidence *ev,
			   const struct vmnap_sample *s, u32 busy_reasons);

#endif /* _VMNAP_VERDICT_H */
