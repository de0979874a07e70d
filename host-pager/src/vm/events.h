/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * events.h - the event log: one JSON object per line (JSONL), appended to
 * the file given by --events / "events" in the config.
 *
 * Every line has "seq" (per-daemon sequence number, from 1, no gaps: a
 * reader sees a lost line as a jump), "t_ns" (CLOCK_MONOTONIC ns, the same
 * clock as every other timestamp vmnapd reports), "type", and "vm" when
 * the event belongs to one VM.  Types: "transition" (from, to, why;
 * into a resting state: resident_bytes, and the pager's faults served,
 * their service time and the store-read part of it, fault_ns and
 * fault_read_ns, the parts spent waiting for the pager's lock and for a
 * page in flight, fault_lock_ns and fault_in_flight_ns, and the service
 * time of sequential streams' faults, fault_sequential_ns, all since the
 * VM was registered; on why "busy", the guest's
 * "evidence" as GET /vms/NAME shows it, plus "busy": the reason names),
 * "wait_start" (wait, kind), "wait_ready" (wait), "delivered" (wait,
 * latency_ns; after a data resume or a data window, faults_from and the
 * resume_fault* counters from then: vm_control.c), "vm_register",
 * "vm_delete", "external", "link" (state), "pressure" (from, to,
 * reading; no vm), "pressure_offload" (level,
 * resident_bytes, expected_wait_ns, reading), "precopy" (written_bytes,
 * cleaned_pages, result), "resume" (a resume's breakdown once it ends:
 * reason, restore, each phase in ns, the faults taken), "offload_decision"
 * (the coordinator's decision, its reason and inputs), "restore" and
 * "managed" (the VM's setting changed by the API), "pager_error" (what,
 * err, error) and "vm_lost" (err, error, reason, killed).
 * Each line is written with one write(2) on an O_APPEND fd.
 */
#ifndef VMNAP_EVENTS_H
#define VMNAP_EVENTS_H

#include <jansson.h>
#include <stdint.h>

#include "vmnapd.h"

#define EVENTS_LINE_MAX	4096	/* bytes per line, longer lines are cut */

/* Open @path for appending (NULL: events are numbered but not written). */
int events_open(struct vmnapd *d, const char *path);
void events_close(struct vmnapd *d);
/* Emit one event; @fields (object, may be NULL) is consumed.  Returns its seq. */
uint64_t events_emit(struct vmnapd *d, const char *vm, const char *type, json_t *fields);
/* Lines written and lines that could not be written. */
void events_get_counts(struct vmnapd *d, uint64_t *written, uint64_t *failed);

#endif
