// SPDX-License-Identifier: GPL-2.0-only
/* views.c - JSON views of the parts' statistics; see views.h. */
#include <jansson.h>
#include <string.h>

#include "pager.h"
#include "views.h"

json_t *pager_stats_json(struct pager *p)
{
	struct pager_stats st;
	json_t *pages, *lat, *o;

	pager_get_stats(p, &st);
	pages = json_object();
	for (int s = 0; s < PAGE_STATES; s++)
		json_object_set_new(pages, pager_page_state_name((enum pager_page_state)s),
				    json_integer((json_int_t)st.pages[s]));
	lat = json_array();
	for (int i = 0; i < PAGER_LAT_BUCKETS; i++)
		json_array_append_new(lat, json_integer((json_int_t)st.fault_lat_us[i]));
	o = json_pack("{s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:b,s:b}",
		      "pages", pages,
		      "pages_total", (json_int_t)st.pages_total,
		      "ram_bytes", (json_int_t)st.ram_bytes,
		      "resident_bytes", (json_int_t)st.resident_bytes,
		      "store_bytes", (json_int_t)st.store_bytes,
		      "store_file_bytes", (json_int_t)st.store_file_bytes,
		      "faults", (json_int_t)st.faults,
		      "fault_pages", (json_int_t)st.fault_pages,
		      "zero_faults", (json_int_t)st.zero_faults,
		      "eexist", (json_int_t)st.eexist,
		      "prefetch_pages", (json_int_t)st.prefetch_pages,
		      "offloads", (json_int_t)st.offloads,
		      "offload_errors", (json_int_t)st.offload_errors,
		      "last_offload_ns", (json_int_t)st.last_offload_ns,
		      "last_offload_written", (json_int_t)st.last_offload_written,
		      "mappers", (int)st.mappers,
		      "registered", st.registered,
		      "evictable", st.evictable);
	if (o) {
		json_object_set_new(o, "fault_latency_us_log2", lat);
		/* where the faults' service time went: read, lock and
		 * in_flight are parts of total; sequential, one kind's */
		json_object_set_new(o, "fault_time_ns", json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}",
			"total", (json_int_t)st.fault_lat_ns_sum,
			"read", (json_int_t)st.fault_read_ns_sum,
			"lock", (json_int_t)st.fault_lock_ns_sum,
			"in_flight", (json_int_t)st.fault_in_flight_ns_sum,
			"in_flight_faults", (json_int_t)st.fault_in_flight_faults,
			"sequential", (json_int_t)st.fault_seq_ns_sum));
		json_object_set_new(o, "fault_errors", json_integer((json_int_t)st.fault_errors));
		json_object_set_new(o, "restore_errors",
				    json_integer((json_int_t)st.restore_errors));
		json_object_set_new(o, "resident_async", json_pack("{s:I,s:I}",
			"asked", (json_int_t)st.resident_asked,
			"failed", (json_int_t)st.resident_failed));
		json_object_set_new(o, "fault_around", json_pack("{s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I}",
			"pages", (int)st.fault_around_pages,
			"max", (int)st.fault_around_max,
			"installed", (json_int_t)st.fault_around_installed,
			"hits", (json_int_t)st.fault_around_hits,
			"misses", (json_int_t)st.fault_around_misses,
			"fault_ns", (json_int_t)st.fault_around_fault_ns,
			"page_ns", (json_int_t)st.fault_around_page_ns,
			"sequential", (json_int_t)st.fault_sequential));
		json_object_set_new(o, "follow", json_pack("{s:i,s:I,s:I,s:I,s:I,s:I}",
			"pages", (int)st.follow_pages,
			"queued", (json_int_t)st.follow_queued,
			"installed", (json_int_t)st.follow_installed,
			"hits", (json_int_t)st.follow_hits,
			"misses", (json_int_t)st.follow_misses,
			"late", (json_int_t)st.follow_late));
		json_object_set_new(o, "zero_ahead_pages",
				    json_integer((json_int_t)st.zero_ahead_pages));
		json_object_set_new(o, "fault_retries", json_integer((json_int_t)st.fault_retries));
		json_object_set_new(o, "faults_stuck", json_integer((json_int_t)st.faults_stuck));
		json_object_set_new(o, "offload_cancels",
				    json_integer((json_int_t)st.offload_cancels));
		json_object_set_new(o, "stale_discards_deferred",
				    json_integer((json_int_t)st.stale_discards_deferred));
		json_object_set_new(o, "stale_slots_kept",
				    json_integer((json_int_t)st.stale_slots_kept));
		json_object_set_new(o, "critical_set_pages",
				    json_integer((json_int_t)st.critical_set_pages));
		json_object_set_new(o, "device_pages",
				    json_integer((json_int_t)st.device_pages));
		json_object_set_new(o, "device_ranges_refused",
				    json_integer((json_int_t)st.device_ranges_refused));
		json_object_set_new(o, "device_read_back",
				    json_integer((json_int_t)st.device_read_back));
		json_object_set_new(o, "kept_dirty_pages",
				    json_integer((json_int_t)st.kept_dirty_pages));
		json_object_set_new(o, "critical_restored_pages",
				    json_integer((json_int_t)st.critical_restored_pages));
		json_object_set_new(o, "critical_mapped_pages",
				    json_integer((json_int_t)st.critical_mapped_pages));
		json_object_set_new(o, "critical_kept_pages",
				    json_integer((json_int_t)st.critical_kept_pages));
		json_object_set_new(o, "tail_pages", json_integer((json_int_t)st.tail_pages));
		json_object_set_new(o, "tail_ticks", json_integer((json_int_t)st.tail_ticks));
		json_object_set_new(o, "tail_sets", json_integer((json_int_t)st.tail_sets));
		json_object_set_new(o, "tail_ticking", json_boolean(st.tail_ticking));
		json_object_set_new(o, "tail_tick_pages",
				    json_integer((json_int_t)st.tail_tick_pages));
		json_object_set_new(o, "tail_budget_stops",
				    json_integer((json_int_t)st.tail_budget_stops));
		json_object_set_new(o, "tail_idle_stops",
				    json_integer((json_int_t)st.tail_idle_stops));
		json_object_set_new(o, "tail_backoffs",
				    json_integer((json_int_t)st.tail_backoffs));
		json_object_set_new(o, "tail_installed_pages",
				    json_integer((json_int_t)st.tail_installed));
		json_object_set_new(o, "tail_learned_pages",
				    json_integer((json_int_t)st.tail_learned));
		json_object_set_new(o, "critical_window_faults",
				    json_integer((json_int_t)st.critical_window_faults));
		json_object_set_new(o, "critical_data_windows",
				    json_integer((json_int_t)st.critical_data_windows));
		json_object_set_new(o, "critical_budget_stops",
				    json_integer((json_int_t)st.critical_budget_stops));
		json_object_set_new(o, "critical_ring_resets",
				    json_integer((json_int_t)st.critical_ring_resets));
		json_object_set_new(o, "critical_last_restore_ns",
				    json_integer((json_int_t)st.critical_last_restore_ns));
		json_object_set_new(o, "dropped_free_pages",
				    json_integer((json_int_t)st.dropped_free_pages));
		json_object_set_new(o, "gpa_source",
				    json_string(pager_gpa_source_name(st.gpa_source)));
		json_object_set_new(o, "gpa_refused", json_integer((json_int_t)st.gpa_refused));
		json_object_set_new(o, "recovered", json_boolean(st.recovered));
		if (st.recovered)
			json_object_set_new(o, "recovery", json_pack("{s:I,s:I,s:I,s:I}",
				"store_pages", (json_int_t)st.recovered_store_pages,
				"offloaded", (json_int_t)st.recovered_offloaded,
				"resident", (json_int_t)st.recovered_resident,
				"discarded", (json_int_t)st.recovered_discarded));
		json_object_set_new(o, "store_id", json_string(st.store_id ? st.store_id : ""));
		json_object_set_new(o, "delivery_io", json_pack("{s:s,s:I,s:s*}",
			"class", pager_io_class_name(st.delivery_io_class),
			"reads", (json_int_t)st.delivery_io_reads,
			"reason", st.delivery_io_class_reason));
		json_object_set_new(o, "dirty_tracking",
				    json_string(pager_dirty_tracking_name(st.dirty_tracking)));
		if (st.dirty_tracking_reason)
			json_object_set_new(o, "dirty_tracking_reason",
					    json_string(st.dirty_tracking_reason));
		json_object_set_new(o, "dirty", json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			"wp_faults", (json_int_t)st.dirty_wp_faults,
			"hot_pages", (json_int_t)st.dirty_hot_pages,
			"hot_again_pages", (json_int_t)st.dirty_hot_again_pages,
			"hot_samples", (json_int_t)st.dirty_hot_samples,
			"hot_vouched_pages", (json_int_t)st.dirty_hot_vouched_pages,
			"hot_vouch_renewed_pages", (json_int_t)st.dirty_hot_vouch_renewed_pages,
			"hot_vouch_dropped_pages", (json_int_t)st.dirty_hot_vouch_dropped_pages,
			"write_stream_pages", (json_int_t)st.dirty_stream_pages,
			"write_fault_pages", (json_int_t)st.dirty_write_fault_pages,
			"fallbacks", (json_int_t)st.dirty_fallbacks,
			"clean_punched_pages", (json_int_t)st.clean_punched_pages,
			"scanned_written_pages", (json_int_t)st.dirty_scanned_pages,
			"own_write_pages", (json_int_t)st.dirty_own_pages,
			"kept_pages", (json_int_t)st.dirty_kept_pages,
			"store_written_bytes", (json_int_t)st.store_written_bytes,
			"precopies", (json_int_t)st.precopies,
			"precopy_written_bytes", (json_int_t)st.precopy_written_bytes,
			"precopy_cleaned_pages", (json_int_t)st.precopy_cleaned_pages));
		json_object_set_new(o, "restore", json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}",
			"policy", pager_restore_name(st.restore),
			"last", pager_restore_name(st.last_restore),
			"data_arrivals", (json_int_t)st.data_arrivals,
			"working_set_pages", (json_int_t)st.working_set_pages,
			"eager_pages", (json_int_t)st.eager_pages,
			"readahead_mapped_pages", (json_int_t)st.readahead_mapped_pages));
		json_object_set_new(o, "zero_copy_offloads",
				    json_integer((json_int_t)st.zero_copy_offloads));
		json_object_set_new(o, "store_bad_slots",
				    json_integer((json_int_t)st.store_bad_slots));
		if (st.lost_err)
			json_object_set_new(o, "lost", json_pack("{s:i,s:s,s:i}",
				"err", st.lost_err, "error", strerror(-st.lost_err),
				"mappers_killed", (int)st.mappers_killed));
		if (st.not_evictable_reason)
			json_object_set_new(o, "not_evictable_reason",
					    json_string(st.not_evictable_reason));
	} else {
		json_decref(lat);
	}
	return o;
}
