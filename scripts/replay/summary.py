# SPDX-License-Identifier: GPL-2.0-only
"""A run's outputs: samples.csv, summary.json, validation.json and the plots.
"""
import json
import os
import statistics
import sys

from .common import ALT_COHORT, COHORTS, OPTIONAL_COHORTS, RESUME_PHASES, ROOT, SAMPLE_GAP_LIMIT_FACTOR, log, runs_accel
from .events import event_seq_gaps
from .plot import plot
from .schedtrace import FIELDS as SCHED_FIELDS


def validate(bench, checks, skipped, runs, max_gap):
    """validation.json's common part: the functional checks, the largest
    sampling gap against its limit, events lost (the run's and vmnapd's);
    measurement_integrity_passed when all hold and no run failed."""
    gap_limit = bench.args.sample_ms * SAMPLE_GAP_LIMIT_FACTOR
    lost = event_seq_gaps(os.path.join(bench.outdir, "events.jsonl"))
    functional = all(c["passed"] for c in checks) and bool(checks)
    return {
        "functional_checks": checks,
        "functional_checks_passed": functional,
        "checks_total": len(checks),
        "checks_failed": sum(not c["passed"] for c in checks),
        "sample_interval_ms": bench.args.sample_ms,
        "max_sampling_gap_ms": max_gap,
        "max_sampling_gap_limit_ms": gap_limit,
        "lost_events": lost,
        "lost_events_vmnapd": bench.vmnapd_lost,
        "skipped_cohorts": skipped,
        "measurement_integrity_passed": functional and max_gap <= gap_limit and lost == 0
        and bench.vmnapd_lost == 0 and all("error" not in r for r in runs),
    }


def paired_ratios(runs, cohort, peer="baseline"):
    """Each repetition's ratio of @cohort to @peer, in repetition order:
    a repetition's cohort runs follow one another (runner.plan) or, with
    --side-by-side, run at once, so its ratio is less moved by the
    machine's drift between repetitions than a ratio of medians
    (consecutive runs of one configuration on this host have differed by a
    quarter in command time)."""
    base = {r["rep"]: r for r in runs if r["cohort"] == peer and "error" not in r}
    out = {}
    for k in ("guest_ram_memxtime_gib_s", "completion_window_s"):
        out[k] = [round(r[k] / base[r["rep"]][k], 4)
                  for r in sorted(runs, key=lambda r: r["rep"])
                  if r["cohort"] == cohort and "error" not in r and r.get(k) is not None
                  and r["rep"] in base and base[r["rep"]].get(k)]
    return out


def write_outputs(bench, runs, checks, samples, skipped):
    """samples.csv, summary.json (cohort medians, ratios to baseline) and
    validation.json (functional checks, sampling gaps, lost events) of a run."""
    a = bench.args
    with open(os.path.join(bench.outdir, "samples.csv"), "w") as f:
        f.write("cohort,rep,t_s,vm,guest_ram_bytes,vmm_pss_bytes,cgroup_bytes,tick_gap_ms\n")
        for row in samples:
            f.write(",".join(str(x) for x in row) + "\n")
    cohorts = {}
    fields = ("guest_ram_memxtime_gib_s", "vmm_pss_memxtime_gib_s", "cgroup_memxtime_gib_s",
              "guest_ram_mean_mib", "guest_ram_peak_mib", "vmm_pss_mean_mib",
              "vmm_pss_peak_mib", "cgroup_mean_mib", "cgroup_peak_mib",
              "completion_window_s", "throughput_per_min", "delivery_p50_ms",
              "delivery_p95_ms", "delivery_p99_ms", "delivery_throttled",
              "delivery_unthrottled_p50_ms", "delivery_unthrottled_p99_ms",
              "delivery_offloaded_n", "delivery_offloaded_throttled",
              "delivery_offloaded_p50_ms", "delivery_offloaded_p99_ms",
              "delivery_paused_n", "delivery_paused_p99_ms",
              "delivery_running_n", "delivery_running_p99_ms",
              "major_faults", "offloaded_bytes",
              "store_written_bytes", "offloads", "resumes", "resumes_lazy",
              "resumes_probe",
              "resume_faults_p50", "resume_faults_p99", "data_delivery_faults_p50",
              "data_delivery_faults_p99", "data_delivery_fault_p50_ms",
              "data_delivery_fault_p99_ms", "command_faults",
              "command_faults_sequential", "command_fault_s", "command_fault_read_s",
              "command_fault_lock_s", "command_fault_in_flight_s", "command_fault_sequential_s",
              "command_vmm_user_s",
              "command_vmm_sys_s", "command_vmm_minflt", "command_vmm_majflt",
              "link_up_ms") + tuple(
                  f"resume_{p}_p{q}_ms" for p in RESUME_PHASES for q in (50, 99)) + SCHED_FIELDS
    for c in COHORTS:
        if c in OPTIONAL_COHORTS and c not in skipped and all(r["cohort"] != c for r in runs):
            continue    # not asked for
        rs = [r for r in runs if r["cohort"] == c and "error" not in r]
        if c in skipped or not rs:
            cohorts[c] = {"runs": 0, "skipped": skipped.get(c, "no completed run")}
            continue
        agg = {"runs": len(rs)}
        for k in fields:
            vals = [r[k] for r in rs if r.get(k) is not None]
            agg[k] = round(statistics.median(vals), 6) if vals else None
        gws = [r["gateway"] for r in rs if r.get("gateway")]
        for k in ("held", "hold_ms", "unmanaged"):
            vals = [g[k] for g in gws if g.get(k) is not None]
            if vals:  # --via gateway: responses held until the VM ran again
                agg[f"gateway_{k}"] = round(statistics.median(vals), 3)
        cohorts[c] = agg
    base = cohorts.get("baseline", {})
    for c, agg in cohorts.items():
        if c == "baseline" or not agg.get("runs") or not base.get("runs"):
            continue
        agg["ratio_to_baseline"] = {
            k: round(agg[k] / base[k], 4) for k in
            ("guest_ram_memxtime_gib_s", "vmm_pss_memxtime_gib_s", "cgroup_memxtime_gib_s",
             "completion_window_s", "throughput_per_min")
            if agg.get(k) is not None and base.get(k)}
        agg["ratio_to_baseline_by_rep"] = paired_ratios(runs, c)
    # Two builds side by side: this tree's offload against offload-alt's.
    if cohorts.get("offload", {}).get("runs") and cohorts.get(ALT_COHORT, {}).get("runs"):
        cohorts["offload"]["ratio_to_alt_by_rep"] = paired_ratios(runs, "offload", ALT_COHORT)
    validation = validate(bench, checks, skipped, runs,
                          max((r.get("max_sample_gap_ms") or 0 for r in runs), default=0))
    validation["vmm_pss_max_age_ms"] = max((r.get("vmm_pss_max_age_ms") or 0 for r in runs),
                                           default=0)
    summary = {
        "run_id": bench.run_id,
        "trajectory": os.path.relpath(a.trajectory, ROOT),
        "trajectory_steps": len(bench.steps),
        "trajectory_wait_s": round(sum(s["wait_ms"] for s in bench.steps) / 1000, 3),
        "vms": a.vms, "repeats": a.repeats, "mem_mib": a.mem, "cpu_quota": a.cpu_quota,
        "side_by_side": bool(getattr(a, "side_by_side", False)),
        "cpu_quota_rule": getattr(a, "cpu_quota_rule", "given"),
        "cpu_quota_total": round(a.cpu_quota * a.vms, 3) if a.cpu_quota else None,
        "transport": a.transport, "sample_ms": a.sample_ms,
        "via": getattr(a, "via", "direct"),
        "delivery_definition": (
            "the agent's first response byte through vmnap-gateway - (request sent + wait_ms)"
            if getattr(a, "via", "direct") == "gateway" else
            "data ready (the replayer's ready call) -> the exec agent's ack of the next command"),
        "gateway_calibration": getattr(bench, "gateway_calibration", None),
        "warmup": getattr(bench, "warmup", None),
        # what the launcher used, not whether /dev/kvm exists (it exists
        # here and cannot boot the guest kernel, so the guests run TCG)
        "host": {"accel": runs_accel(acc for r in runs for acc in (r.get("accel") or {}).values()),
                 "cpus": os.cpu_count(), "cgroups": bench.cgroups.describe(),
                 "kernel": os.uname().release},
        "command": " ".join(sys.argv),
        # the vmnapd and shim each cohort ran: "tree" (this checkout's
        # build/), "alt" (offload-alt's --alt-build)
        "builds": getattr(bench, "builds", None),
        "cohorts": cohorts,
        "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs],
        "measurement_integrity_passed": validation["measurement_integrity_passed"],
    }
    with open(os.path.join(bench.outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    with open(os.path.join(bench.outdir, "validation.json"), "w") as f:
        json.dump(validation, f, indent=1, sort_keys=True)
    plot(bench.outdir, samples, runs)
    log(f"outputs in {bench.outdir}")
    return summary, validation
