// SPDX-License-Identifier: GPL-2.0-only
/* metrics.c - Prometheus text exposition; see metrics.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "events.h"
#include "guest_link.h"
#include "guest_link_listen.h"
#include "mem_handshake.h"
#include "metrics.h"
#include "pager.h"
#include "pause.h"
#include "pressure_watch.h"
#include "version.h"
#include "vm_control.h"
#include "vmm_mem.h"

#define NS_PER_SEC	1e9
#define US_PER_SEC	1e6
#define BYTES_PER_GIB	1073741824.0

static void help(FILE *f, const char *name, const char *type, const char *text)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/*
 * Exported bucket bounds, as bits k of 2^k µs, from measured ranges (README
 * "Benchmarks"; TCG runs in make check): faults take 50..120 µs at p50..p99
 * on the host, ms under load, so 16 µs..1 s; deliveries take 3..70 ms at
 * p50 and up to ~200 ms at p99, seconds when a resume is slow, so 1 ms..17
 * s.  The internal power-of-2 buckets between two bounds are summed.
 */
#define BIT(k)		(1ull << (k))
#define FAULT_LE_MASK	(BIT(4) | BIT(5) | BIT(6) | BIT(7) | BIT(8) | BIT(9) | BIT(10) | \
			 BIT(12) | BIT(14) | BIT(16) | BIT(18) | BIT(20))
#define DELIVERY_LE_MASK (BIT(10) | BIT(11) | BIT(12) | BIT(13) | BIT(14) | BIT(15) | \
			  BIT(16) | BIT(17) | BIT(18) | BIT(19) | BIT(20) | BIT(22) | BIT(24))

/*
 * A histogram from power-of-2 µs buckets: counts[i] holds latencies below
 * 2^(i + @shift) µs (and at or above the previous bound); a bucket line is
 * written for the bounds in @le_mask only (cumulative counts stay exact).
 */
static void histogram(FILE *f, const char *name, const char *vm, const uint64_t *counts,
		      unsigned int n, int shift, uint64_t le_mask, double sum_s)
{
	uint64_t cum = 0;

	for (unsigned int i = 0; i < n; i++) {
		unsigned int k = i + (unsigned int)shift;

		cum += counts[i];
		if (k < 64 && (le_mask & BIT(k)))
			fprintf(f, "%s_bucket{vm=\"%s\",le=\"%g\"} %llu\n", name, vm,
				(double)(1ull << k) / US_PER_SEC, (unsigned long long)cum);
	}
	fprintf(f, "%s_bucket{vm=\"%s\",le=\"+Inf\"} %llu\n", name, vm, (unsigned long long)cum);
	fprintf(f, "%s_sum{vm=\"%s\"} %.9f\n", name, vm, sum_s);
	fprintf(f, "%s_count{vm=\"%s\"} %llu\n", name, vm, (unsigned long long)cum);
}

#define FOREACH_VM(d, vm) for (struct vm *vm = (d)->vms; vm; vm = vm->next)

static void coord_metrics(FILE *f, struct vmnapd *d)
{
	struct coord_stats st;

	help(f, "vmnap_vm_state", "gauge", "1 for the coordinator state the VM is in");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		for (int s = 0; s < COORD_NR_STATES; s++)
			fprintf(f, "vmnap_vm_state{vm=\"%s\",state=\"%s\"} %d\n", vm->name,
				coord_state_name((enum coord_state)s),
				coord_state(vm->coord) == (enum coord_state)s);
	}
	help(f, "vmnap_vm_managed", "gauge", "1 when the coordinator may pause the VM");
	FOREACH_VM(d, vm)
		if (vm->coord)
			fprintf(f, "vmnap_vm_managed{vm=\"%s\"} %d\n", vm->name, coord_managed(vm->coord));

#define COUNTER(metric, text, field)						\
	do {									\
		help(f, metric, "counter", text);					\
		FOREACH_VM(d, vm) {						\
			if (!vm->coord)						\
				continue;					\
			coord_get_stats(vm->coord, &st);			\
			fprintf(f, metric "{vm=\"%s\"} %llu\n", vm->name,		\
				(unsigned long long)st.field);			\
		}								\
	} while (0)
	COUNTER("vmnap_waits_ready_total", "waits whose data became ready", waits_ready);
	COUNTER("vmnap_waits_delivered_total", "waits delivered to the guest", waits_delivered);
	COUNTER("vmnap_handoffs_total", "HANDOFF_REQ sent (or pause without link)", handoffs);
	COUNTER("vmnap_handoff_timeouts_total", "handoffs without HANDOFF_ACK in time", handoff_timeouts);
	COUNTER("vmnap_pauses_total", "completed pauses", pauses);
	COUNTER("vmnap_pause_errors_total", "failed pauses", pause_errors);
	COUNTER("vmnap_offloads_total", "completed offloads", offloads);
	COUNTER("vmnap_offload_errors_total", "failed offloads", offload_errors);
	COUNTER("vmnap_offload_cancels_total", "offloads cut short by a resume trigger",
		offload_cancels);
	COUNTER("vmnap_coord_pager_errors_total",
		"pager errors that reached the coordinator (fail-safe resume)", pager_errors);
	COUNTER("vmnap_resume_errors_total", "failed resumes (retried)", resume_errors);
#undef COUNTER

	help(f, "vmnap_waits_started_total", "counter", "waits started, by kind");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		for (int k = 0; k < COORD_NR_WAIT_KINDS; k++)
			fprintf(f, "vmnap_waits_started_total{vm=\"%s\",kind=\"%s\"} %llu\n", vm->name,
				coord_wait_kind_name((enum coord_wait_kind)k),
				(unsigned long long)st.waits_by_kind[k]);
	}
	help(f, "vmnap_handoff_busy_total", "counter", "BUSY verdicts, by reason bit");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		for (int b = 0; b < COORD_BUSY_BITS; b++)
			fprintf(f, "vmnap_handoff_busy_total{vm=\"%s\",reason=\"%s\"} %llu\n", vm->name,
				coord_busy_reason_name(b), (unsigned long long)st.busy_by_reason[b]);
	}
	help(f, "vmnap_resumes_total", "counter", "resumes, by reason");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		for (int r = 1; r < COORD_NR_RESUME_REASONS; r++)
			fprintf(f, "vmnap_resumes_total{vm=\"%s\",reason=\"%s\"} %llu\n", vm->name,
				coord_resume_reason_name((enum coord_resume_reason)r),
				(unsigned long long)st.resumes_by_reason[r]);
	}
	help(f, "vmnap_paused_seconds_total", "counter", "time spent paused (completed pauses)");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		fprintf(f, "vmnap_paused_seconds_total{vm=\"%s\"} %.9f\n", vm->name,
			(double)st.paused_ns_total / NS_PER_SEC);
	}
	help(f, "vmnap_offloaded_seconds_total", "counter", "time spent offloaded (completed)");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		fprintf(f, "vmnap_offloaded_seconds_total{vm=\"%s\"} %.9f\n", vm->name,
			(double)st.offloaded_ns_total / NS_PER_SEC);
	}
	help(f, "vmnap_delivery_latency_seconds", "histogram",
	     "response delivery latency: data ready -> the guest has the data");
	FOREACH_VM(d, vm) {
		if (!vm->coord)
			continue;
		coord_get_stats(vm->coord, &st);
		histogram(f, "vmnap_delivery_latency_seconds", vm->name, st.delivery_hist,
			  COORD_HIST_BUCKETS, 0, DELIVERY_LE_MASK,
			  (double)st.delivery_ns_sum / NS_PER_SEC);
	}
}

static void pager_metrics(FILE *f, struct vmnapd *d)
{
	struct pager_stats st;

#define GAUGE(metric, type, text, expr)						\
	do {									\
		help(f, metric, type, text);					\
		FOREACH_VM(d, vm) {						\
			if (!vm->pager)						\
				continue;					\
			pager_get_stats(vm->pager, &st);			\
			fprintf(f, metric "{vm=\"%s\"} %llu\n", vm->name,		\
				(unsigned long long)(expr));			\
		}								\
	} while (0)
	GAUGE("vmnap_guest_ram_bytes", "gauge", "guest RAM size", st.ram_bytes);
	GAUGE("vmnap_guest_ram_resident_bytes", "gauge",
	      "guest RAM resident on the host (memfd allocated blocks)", st.resident_bytes);
	GAUGE("vmnap_store_bytes", "gauge", "bytes of guest RAM held in the store", st.store_bytes);
	GAUGE("vmnap_store_file_bytes", "gauge", "store file allocated blocks", st.store_file_bytes);
	GAUGE("vmnap_faults_total", "counter", "userfaultfd faults served", st.faults);
	GAUGE("vmnap_prefetch_pages_total", "counter", "pages brought back by prefetch",
	      st.prefetch_pages);
	GAUGE("vmnap_fault_around_pages", "gauge",
	      "fault-around window now (adapts by cost between 1 and its max)",
	      st.fault_around_pages);
	GAUGE("vmnap_fault_around_installed_pages_total", "counter",
	      "pages fault-around put into the memfd unmapped", st.fault_around_installed);
	GAUGE("vmnap_fault_around_hits_total", "counter",
	      "... of them mapped by the next offload", st.fault_around_hits);
	GAUGE("vmnap_fault_around_misses_total", "counter",
	      "... of them never mapped by the next offload", st.fault_around_misses);
	GAUGE("vmnap_follow_installed_pages_total", "counter",
	      "pages the fault-order prefetch put into the memfd unmapped",
	      st.follow_installed);
	GAUGE("vmnap_follow_hits_total", "counter",
	      "... of them mapped by the next offload", st.follow_hits);
	GAUGE("vmnap_follow_misses_total", "counter",
	      "... of them never mapped by the next offload", st.follow_misses);
	GAUGE("vmnap_follow_late_total", "counter",
	      "pages it queued that faulted before they were read", st.follow_late);
	GAUGE("vmnap_critical_restored_pages_total", "counter",
	      "resume-critical pages made resident before the VMM resumed",
	      st.critical_restored_pages);
	GAUGE("vmnap_critical_kept_pages_total", "counter",
	      "resume-critical pages offloads left resident (critical_resident)",
	      st.critical_kept_pages);
	GAUGE("vmnap_device_ranges_refused_total", "counter",
	      "ranges of vmnapd's own devices to keep resident left out: outside guest RAM",
	      st.device_ranges_refused);
	GAUGE("vmnap_device_read_back_total", "counter",
	      "ranges of vmnapd's own devices found out when named, read back from the store",
	      st.device_read_back);
	GAUGE("vmnap_critical_window_faults_total", "counter",
	      "faults between a resume and its delivery (what the critical set avoids)",
	      st.critical_window_faults);
	GAUGE("vmnap_critical_data_windows_total", "counter",
	      "data taken in while running with pages out, its faults recorded as a resume's",
	      st.critical_data_windows);
	GAUGE("vmnap_faults_stuck", "gauge",
	      "faulting threads waiting for a fault that could not be served yet", st.faults_stuck);
	GAUGE("vmnap_fault_retries_total", "counter", "unserved faults tried again",
	      st.fault_retries);
	GAUGE("vmnap_free_pages_dropped_total", "counter",
	      "guest pages reported free and punched", st.dropped_free_pages);
	GAUGE("vmnap_gpa_refused_total", "counter",
	      "GPA operations (FREE_REPORT, residency) refused: guest-physical map only guessed",
	      st.gpa_refused);
	GAUGE("vmnap_gpa_map_trusted", "gauge",
	      "1 when the guest-physical map is known (stated, linear or vhost-user memory table)",
	      st.gpa_source != PAGER_GPA_GUESSED);
#undef GAUGE
	help(f, "vmnap_guest_ram_resident_byte_seconds_total", "counter",
	     "guest RAM resident bytes integrated over time (memory x time), byte-seconds");
	FOREACH_VM(d, vm)
		if (vm->pager && vm->control)
			fprintf(f, "vmnap_guest_ram_resident_byte_seconds_total{vm=\"%s\"} %.0f\n",
				vm->name, vm_control_memxtime_gib_s(vm) * BYTES_PER_GIB);
	help(f, "vmnap_pages", "gauge", "guest pages by state");
	FOREACH_VM(d, vm) {
		if (!vm->pager)
			continue;
		pager_get_stats(vm->pager, &st);
		for (int s = 0; s < PAGE_STATES; s++)
			fprintf(f, "vmnap_pages{vm=\"%s\",state=\"%s\"} %llu\n", vm->name,
				pager_page_state_name((enum pager_page_state)s),
				(unsigned long long)st.pages[s]);
	}
	help(f, "vmnap_pager_errors_total", "counter",
	     "pager errors by kind: fault (not served, retried), restore (store read), offload");
	FOREACH_VM(d, vm) {
		if (!vm->pager)
			continue;
		pager_get_stats(vm->pager, &st);
		fprintf(f, "vmnap_pager_errors_total{vm=\"%s\",kind=\"fault\"} %llu\n", vm->name,
			(unsigned long long)st.fault_errors);
		fprintf(f, "vmnap_pager_errors_total{vm=\"%s\",kind=\"restore\"} %llu\n", vm->name,
			(unsigned long long)st.restore_errors);
		fprintf(f, "vmnap_pager_errors_total{vm=\"%s\",kind=\"offload\"} %llu\n", vm->name,
			(unsigned long long)st.offload_errors);
	}
	help(f, "vmnap_vm_lost", "gauge",
	     "1 when the VM was lost: a fault the store could not serve, its VMM killed");
	FOREACH_VM(d, vm)
		fprintf(f, "vmnap_vm_lost{vm=\"%s\"} %d\n", vm->name, vm->lost_err != 0);
	help(f, "vmnap_vms_lost_total", "counter",
	     "VMs lost to a fault the store could not serve (EIO past the bound, checksum)");
	fprintf(f, "vmnap_vms_lost_total %llu\n", (unsigned long long)d->vms_lost);
	help(f, "vmnap_fault_latency_seconds", "histogram", "userfaultfd fault service latency");
	FOREACH_VM(d, vm) {
		if (!vm->pager)
			continue;
		pager_get_stats(vm->pager, &st);
		histogram(f, "vmnap_fault_latency_seconds", vm->name, st.fault_lat_us,
			  PAGER_LAT_BUCKETS, 1, FAULT_LE_MASK,
			  (double)st.fault_lat_ns_sum / NS_PER_SEC);
	}
}

/* Sampled off the loop (vm_control_vmm_mem): at most a second old. */
static void vmm_metrics(FILE *f, struct vmnapd *d)
{
	struct vmm_mem_sample smp;

	help(f, "vmnap_vmm_pss_bytes", "gauge", "the VMM process's proportional set size");
	FOREACH_VM(d, vm)
		if (vm_control_vmm_mem(vm, &smp) && smp.has_pss)
			fprintf(f, "vmnap_vmm_pss_bytes{vm=\"%s\"} %llu\n", vm->name,
				(unsigned long long)smp.pss_bytes);
	help(f, "vmnap_vm_cgroup_memory_bytes", "gauge", "memory charged to the VMM's cgroup");
	FOREACH_VM(d, vm)
		if (vm_control_vmm_mem(vm, &smp) && smp.has_cgroup)
			fprintf(f, "vmnap_vm_cgroup_memory_bytes{vm=\"%s\"} %llu\n", vm->name,
				(unsigned long long)smp.cgroup_bytes);
}

static void pause_metrics(FILE *f, struct vmnapd *d)
{
	help(f, "vmnap_pause_backend_calls_total", "counter", "pause backend calls, by op");
	FOREACH_VM(d, vm) {
		if (!vm->pause)
			continue;
		fprintf(f, "vmnap_pause_backend_calls_total{vm=\"%s\",op=\"pause\"} %llu\n",
			vm->name, (unsigned long long)vm->pause->st.pauses);
		fprintf(f, "vmnap_pause_backend_calls_total{vm=\"%s\",op=\"resume\"} %llu\n",
			vm->name, (unsigned long long)vm->pause->st.resumes);
	}
	help(f, "vmnap_pause_backend_errors_total", "counter", "pause backend calls that failed");
	FOREACH_VM(d, vm)
		if (vm->pause)
			fprintf(f, "vmnap_pause_backend_errors_total{vm=\"%s\"} %llu\n",
				vm->name, (unsigned long long)vm->pause->st.errors);
}

struct rejection_line {
	FILE *f;
	const char *vm;
};

static void rejection_line(const char *reason, uint64_t n, void *arg)
{
	struct rejection_line *rl = arg;

	fprintf(rl->f, "vmnap_guest_rejected_total{vm=\"%s\",reason=\"%s\"} %llu\n", rl->vm,
		reason, (unsigned long long)n);
}

/* One guest link counter (at @off in struct guest_link_stats) per VM. */
static void link_counter(FILE *f, struct vmnapd *d, const char *name, const char *text,
			 size_t off)
{
	struct guest_link_stats st;
	uint64_t n;

	help(f, name, "counter", text);
	FOREACH_VM(d, vm) {
		if (!vm->link)
			continue;
		guest_link_get_stats(vm->link, &st);
		memcpy(&n, (const char *)&st + off, sizeof(n));
		fprintf(f, "%s{vm=\"%s\"} %llu\n", name, vm->name, (unsigned long long)n);
	}
}

/* What guests and local clients sent that vmnapd refused, by reason. */
static void rejection_metrics(FILE *f, struct vmnapd *d)
{
	struct mem_handshake_stats hs;
	struct guest_link_vsock_stats vs;

	help(f, "vmnap_guest_rejected_total", "counter",
	     "guest input refused, by reason (guest link messages, reconnects, vsock device)");
	FOREACH_VM(d, vm) {
		struct rejection_line rl = { f, vm->name };

		vm_rejections_foreach(vm, rejection_line, &rl);
	}
	link_counter(f, d, "vmnap_guest_link_connects_total", "guest link sessions begun",
		     offsetof(struct guest_link_stats, connects));
	link_counter(f, d, "vmnap_handoff_late_acks_total",
		     "HANDOFF_ACKs that came after the handoff was given up (ack timeout): not errors",
		     offsetof(struct guest_link_stats, late_acks));
	link_counter(f, d, "vmnap_log_lines_suppressed_total",
		     "guest link log lines over the VM's log budget (logged at debug level only)",
		     offsetof(struct guest_link_stats, log_suppressed));
	help(f, "vmnap_events_suppressed_total", "counter",
	     "guest link events over the VM's event budget");
	FOREACH_VM(d, vm)
		if (vm->control)
			fprintf(f, "vmnap_events_suppressed_total{vm=\"%s\"} %llu\n", vm->name,
				(unsigned long long)vm_control_events_suppressed(vm));

	mem_handshake_get_stats(d, &hs);
	help(f, "vmnap_handshake_accepted_total", "counter", "memory handshakes accepted");
	fprintf(f, "vmnap_handshake_accepted_total %llu\n", (unsigned long long)hs.accepted);
	help(f, "vmnap_mappers_gone_total", "counter",
	     "VMM processes whose memory connection closed (exited or killed)");
	fprintf(f, "vmnap_mappers_gone_total %llu\n", (unsigned long long)hs.mappers_gone);
	help(f, "vmnap_handshake_refused_total", "counter", "memory handshakes refused, by reason");
	for (int r = 0; r < HS_REFUSALS; r++)
		fprintf(f, "vmnap_handshake_refused_total{reason=\"%s\"} %llu\n",
			mem_hs_refusal_name((enum mem_hs_refusal)r),
			(unsigned long long)hs.refused[r]);
	guest_link_listen_vsock_get_stats(d, &vs);
	help(f, "vmnap_vsock_listener_refused_total", "counter",
	     "AF_VSOCK guest link connections closed, by reason");
	fprintf(f, "vmnap_vsock_listener_refused_total{reason=\"unknown_cid\"} %llu\n",
		(unsigned long long)vs.unknown_cid);
	fprintf(f, "vmnap_vsock_listener_refused_total{reason=\"unreserved_port\"} %llu\n",
		(unsigned long long)vs.unreserved_port);
	fprintf(f, "vmnap_vsock_listener_refused_total{reason=\"bad_peer\"} %llu\n",
		(unsigned long long)vs.bad_peer);
}

json_t *metrics_rejections_json(struct vmnapd *d)
{
	struct mem_handshake_stats hs;
	struct guest_link_vsock_stats vs;
	json_t *refused = json_object();

	mem_handshake_get_stats(d, &hs);
	for (int r = 0; r < HS_REFUSALS; r++)
		json_object_set_new(refused, mem_hs_refusal_name((enum mem_hs_refusal)r),
				    json_integer((json_int_t)hs.refused[r]));
	guest_link_listen_vsock_get_stats(d, &vs);
	return json_pack("{s:{s:I,s:I,s:o},s:{s:I,s:I,s:I}}",
			 "mem_handshake", "accepted", (json_int_t)hs.accepted,
			 "mappers_gone", (json_int_t)hs.mappers_gone,
			 "refused", refused,
			 "vsock_listener", "unknown_cid", (json_int_t)vs.unknown_cid,
			 "unreserved_port", (json_int_t)vs.unreserved_port,
			 "bad_peer", (json_int_t)vs.bad_peer);
}

/* Host memory pressure (pressure_watch.h): only when a cgroup is watched. */
static void pressure_metrics(FILE *f, struct vmnapd *d)
{
	struct pressure_watch_status st;

	if (!pressure_watch_status(d, &st))
		return;
	help(f, "vmnap_memory_pressure_level", "gauge",
	     "pressure cgroup's level: 0 normal, 1 elevated, 2 critical");
	fprintf(f, "vmnap_memory_pressure_level %u\n", st.level);
	if (st.has_reading) {
		help(f, "vmnap_pressure_cgroup_usage_bytes", "gauge", "pressure cgroup's memory usage");
		fprintf(f, "vmnap_pressure_cgroup_usage_bytes %llu\n",
			(unsigned long long)st.usage_bytes);
		if (st.limit_bytes) {
			help(f, "vmnap_pressure_cgroup_limit_bytes", "gauge",
			     "pressure cgroup's memory limit");
			fprintf(f, "vmnap_pressure_cgroup_limit_bytes %llu\n",
				(unsigned long long)st.limit_bytes);
		}
	}
	help(f, "vmnap_memory_pressure_level_changes_total", "counter", "level changes");
	fprintf(f, "vmnap_memory_pressure_level_changes_total %llu\n",
		(unsigned long long)st.level_changes);
	help(f, "vmnap_memory_pressure_offloads_total", "counter",
	     "paused VMs offloaded because of memory pressure");
	fprintf(f, "vmnap_memory_pressure_offloads_total %llu\n", (unsigned long long)st.offloads);
	help(f, "vmnap_memory_pressure_read_errors_total", "counter",
	     "pressure cgroup reads that failed");
	fprintf(f, "vmnap_memory_pressure_read_errors_total %llu\n",
		(unsigned long long)st.read_errors);
}

char *metrics_render(struct vmnapd *d, size_t *len)
{
	uint64_t written, failed;
	unsigned int nvms = 0;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	FOREACH_VM(d, vm)
		nvms++;
	help(f, "vmnap_build_info", "gauge", "always 1; the version is the label");
	fprintf(f, "vmnap_build_info{version=\"%s\"} 1\n", VMNAPD_VERSION);
	help(f, "vmnap_vms", "gauge", "registered VMs");
	fprintf(f, "vmnap_vms %u\n", nvms);
	help(f, "vmnap_pagers_detaching", "gauge",
	     "pagers of removed VMs or exited VMMs still being torn down by their reaper");
	fprintf(f, "vmnap_pagers_detaching %u\n", pager_reapers_active());
	events_get_counts(d, &written, &failed);
	help(f, "vmnap_events_total", "counter", "events emitted (last sequence number)");
	fprintf(f, "vmnap_events_total %llu\n", (unsigned long long)d->event_seq);
	help(f, "vmnap_event_write_errors_total", "counter", "event lines that could not be written");
	fprintf(f, "vmnap_event_write_errors_total %llu\n", (unsigned long long)failed);
	coord_metrics(f, d);
	pager_metrics(f, d);
	pause_metrics(f, d);
	vmm_metrics(f, d);
	rejection_metrics(f, d);
	pressure_metrics(f, d);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}
