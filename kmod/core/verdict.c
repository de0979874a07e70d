// SPDX-License-Identifier: GPL-2.0-only
/*
 * verdict.c - from measured idle evidence to busy reason bits.
 *
 * A guest is READY when no reason bit is set.  Each bit stands for one
 * measured fact, so the host (and the operator) can tell why a handoff was
 * refused.  An unknown timer budget is not a reason to refuse: the
 * verdict says whether the guest is idle, and the host needs the budget
 * only to decide whether to evict its memory; with TIMER_KNOWN clear it
 * pauses but does not offload (README.md, "Evidence", flags).
 */
#include <linux/kernel.h>

#include "verdict.h"

u32 vmnap_busy_reasons(const struct vmnap_sample *s,
		       const struct vmnap_thresholds *t)
{
	u32 busy = 0;

	if (s->nr_runnable)
		busy |= VMNAP_BUSY_RUNNABLE;
	if (s->cpu_idle_permille < t->min_idle_permille)
		busy |= VMNAP_BUSY_CPU;
	if (s->io_inflight || s->io_issued)
		busy |= VMNAP_BUSY_IO;
	if (s->writeback_pages || s->dirty_pages > t->max_dirty_pages)
		busy |= VMNAP_BUSY_WRITEBACK;
	if (s->timer_known && s->next_timer_ns < t->min_timer_ns)
		busy |= VMNAP_BUSY_TIMER;
	return busy;
}

/* Fill the wire evidence; an unknown budget is always sent as UNKNOWN. */
void vmnap_evidence_encode(struct vmnap_evidence *ev,
			   const struct vmnap_sample *s, u32 busy_reasons)
{
	memset(ev, 0, sizeof(*ev));
	ev->window_ns = cpu_to_le64(s->window_ns);
	ev->next_timer_ns = cpu_to_le64(s->timer_known ? s->next_timer_ns :
					VMNAP_TIMER_UNKNOWN);
	ev->writeback_pages = cpu_to_le64(s->writeback_pages);
	ev->dirty_pages = cpu_to_le64(s->dirty_pages);
	ev->cpu_idle_permille = cpu_to_le32(min_t(u32, s->cpu_idle_permille,
						  1000));
	ev->nr_runnable = cpu_to_le32(s->nr_runnable);
	ev->io_inflight = cpu_to_le32(s->io_inflight);
	ev->busy_reasons = cpu_to_le32(busy_reasons & VMNAP_BUSY_ALL);
	ev->devices_quiesced = cpu_to_le32(s->devices_quiesced);
	ev->flags = cpu_to_le32(s->timer_known ? VMNAP_EV_TIMER_KNOWN : 0);
}
