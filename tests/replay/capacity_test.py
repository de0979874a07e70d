#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""capacity_test.py - the capacity benchmark's admission rule and cohort
figures, without guests or cgroups (TAP): what make bench-capacity decides
and reports from given readings.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests/lib"))
import tap  # noqa: E402
from replay import trajectory  # noqa: E402
from replay.capacity import admission_headroom, admit, cohort_figures  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30


def host(headroom, returns):
    """A GET /host answer: the admission headroom and per-VM expected returns."""
    return {"admission": {"cgroup_headroom_bytes": headroom},
            "vms": [{"name": f"vm{i}", "expected_return_bytes": r} for i, r in enumerate(returns)]}


def main():
    # baseline and swap: limit - usage, plus the inactive file cache
    h = admission_headroom("baseline", 2 * GIB, 1 * GIB)
    tap.ok(h == 1 * GIB, "baseline headroom is limit - usage", h)
    h = admission_headroom("swap", 2 * GIB, 1 * GIB, inactive_file=100 * MIB)
    tap.ok(h == GIB + 100 * MIB, "inactive file cache counts as room", h)
    tap.ok(admission_headroom("baseline", None, GIB) is None and
           admission_headroom("baseline", GIB, -1) is None,
           "no limit or no usage reading: no headroom (never admit blind)")

    # offload: GET /host's headroom + expected returns beyond the largest return_vms
    hh = host(300 * MIB, [100 * MIB, 50 * MIB, 200 * MIB, 0])
    h = admission_headroom("offload", 2 * GIB, 1 * GIB, hh, return_vms=2)
    tap.ok(h == 350 * MIB, "offload: the two largest returns stay reserved, the rest is room", h)
    h = admission_headroom("offload", 2 * GIB, 1 * GIB, hh, return_vms=0)
    tap.ok(h == 650 * MIB, "return_vms 0: every offloaded byte counts as room", h)
    h = admission_headroom("offload", 2 * GIB, 1 * GIB, hh, return_vms=10)
    tap.ok(h == 300 * MIB, "return_vms >= offloaded VMs: GET /host's headroom as is", h)
    tap.ok(admission_headroom("offload", 2 * GIB, 0, {"admission": {}}) is None and
           admission_headroom("offload", 2 * GIB, 0, None) is None,
           "offload without cgroup_headroom_bytes (no pressure reading): no headroom")
    bad = {"admission": {"cgroup_headroom_bytes": 10 * MIB},
           "vms": [{"expected_return_bytes": "lots"}, {}]}
    tap.ok(admission_headroom("offload", GIB, 0, bad, return_vms=0) == 10 * MIB,
           "malformed per-VM figures are ignored")

    # the rule: headroom - pending >= reserve + margin
    tap.ok(admit(500 * MIB, 0, 384 * MIB, 100 * MIB), "admits when it fits")
    tap.ok(not admit(500 * MIB, 100 * MIB, 384 * MIB, 100 * MIB),
           "a booting VM's untaken reserve holds the next one back")
    tap.ok(not admit(None, 0, 1, 0), "no headroom reading: no admission")

    # figures: samples (t_s, running, cgroup_bytes, guest_ram_bytes)
    samples = [(0.0, 0, GIB, 0), (1.0, 1, GIB, GIB), (3.0, 2, GIB, GIB),
               (5.0, 2, GIB, 0), (7.0, 1, -1, 0), (9.0, 0, GIB, 0)]
    vms = [{"admitted_s": 1.0, "done_s": 7.0, "ok": True},
           {"admitted_s": 3.0, "done_s": 9.0, "ok": True}]
    f = cohort_figures(samples, vms, 0, True)
    tap.ok(f["vms_peak"] == 2 and f["vms_completed"] == 2 and f["completion_window_s"] == 8.0,
           "peak, completed, window from the first admission to the last end", f)
    # running: 1@1, 2@3, 2@5, 1@7, 0@9 -> 3 + 4 + 3 + 1 = 11 VM-seconds over 8 s
    tap.ok(f["vms_mean"] == round(11 / 8, 3), "mean concurrency is the time average", f)
    tap.ok(f["agents_per_min"] == round(2 / (8 / 60), 4), "agents per minute", f)
    tap.ok(f["cgroup_memxtime_gib_s"] == 8.0 and f["guest_ram_memxtime_gib_s"] == 3.0,
           "memory x time: trapezoid inside the window, missing readings skipped", f)
    tap.ok(f["functional_ok"] and f["oom_kills"] == 0, "all done, all checks: functional_ok")
    vms[1]["done_s"] = None
    f = cohort_figures(samples, vms, 1, True)
    tap.ok(not f["functional_ok"] and f["vms_completed"] == 1 and f["oom_kills"] == 1,
           "a VM that did not finish fails functional_ok", f)
    tap.ok(not cohort_figures(samples, [], 0, True)["functional_ok"],
           "no VM at all is not a pass")

    # the benchmark's trajectory: the tiny one's recorded steps, longer waits
    hc, sc = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-capacity.jsonl"))
    ht, st = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-tiny.jsonl"))
    same = [(s["cmd"], s["exit_code"], s["stdout_sha256"]) for s in sc] == \
        [(s["cmd"], s["exit_code"], s["stdout_sha256"]) for s in st]
    tap.ok(same and hc["final_diff_sha256"] == ht["final_diff_sha256"] and
           sum(s["wait_ms"] for s in sc) >= 30000,
           "replay-capacity.jsonl: replay-tiny's commands and results, waits of seconds")
    # --cpu-quota auto: the host's CPUs shared by the VMs, at most 0.5 each
    from replay.cli import parse_args
    ncpu = os.cpu_count() or 1
    for vms in (1, 16):
        args = parse_args(["run", "--vms", str(vms), "--cpu-quota", "auto", "--transport", "tty"])
        want = round(min(0.5, ncpu / vms), 4)
        tap.ok(args.cpu_quota == want and args.cpu_quota_rule.startswith("auto"),
               f"--cpu-quota auto with {vms} VM(s) on {ncpu} CPUs is {want}", args.cpu_quota)
    args = parse_args(["capacity", "--transport", "tty"])
    tap.ok(args.reserve_mib == args.mem + 128 and args.cohorts == ["baseline", "offload", "swap"],
           "capacity defaults: reserve = guest RAM + 128 MiB, the three cohorts")
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
