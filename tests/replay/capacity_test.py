#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""capacity_test.py - the capacity benchmark's admission rule and cohort
figures, without guests or cgroups (TAP): what make bench-capacity decides
and reports from given readings.
"""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests/lib"))
import tap  # noqa: E402
from replay import trajectory  # noqa: E402
from replay.capacity import (admission_room, admit, cohort_figures,  # noqa: E402
                             count_events, footprint_figures, pressure_entered,
                             simultaneous_return, vm_reserve, vmnapd_evidence)

MIB = 1 << 20
GIB = 1 << 30


def host(vms):
    """A GET /host answer: per-VM (reclaimable, expected return) bytes."""
    return {"admission": {"cgroup_headroom_bytes": 0},
            "vms": [{"name": f"vm{i}", "reclaimable_bytes": rec, "expected_return_bytes": ret}
                    for i, (rec, ret) in enumerate(vms)]}


def main():
    # room: limit - usage + inactive file cache + reclaimable, every cohort
    tap.ok(admission_room(2 * GIB, 1 * GIB) == 1 * GIB, "room is limit - usage")
    h = admission_room(2 * GIB, 1 * GIB, inactive_file=100 * MIB, reclaimable=50 * MIB)
    tap.ok(h == GIB + 150 * MIB, "inactive file cache and reclaimable count as room", h)
    tap.ok(admission_room(None, GIB) is None and admission_room(GIB, -1) is None and
           admission_room(GIB, None) is None,
           "no limit or no usage reading: no room (never admit blind)")
    tap.ok(admission_room(GIB, GIB // 2, inactive_file=-5, reclaimable=-5) == GIB // 2,
           "negative readings add nothing")

    # offload's evidence: GET /host's per-VM reclaimable and expected return
    ev = vmnapd_evidence(host([(200 * MIB, 0), (0, 100 * MIB), (0, 300 * MIB), (0, 0)]))
    tap.ok(ev == (200 * MIB, [0, 100 * MIB, 300 * MIB, 0]),
           "GET /host: reclaimable summed, expected returns per VM", ev)
    bad = {"vms": [{"reclaimable_bytes": "lots", "expected_return_bytes": None}, 7,
                   {"reclaimable_bytes": -3}]}
    tap.ok(vmnapd_evidence(bad) == (0, []), "malformed per-VM figures are ignored",
           vmnapd_evidence(bad))
    tap.ok(vmnapd_evidence({"admission": {}}) is None and vmnapd_evidence(None) is None,
           "no per-VM list: no evidence")

    # returns: the return_vms largest
    rets = [100 * MIB, 50 * MIB, 200 * MIB, 0, "x"]
    tap.ok(simultaneous_return(rets, 1) == 200 * MIB, "one VM back at once: the largest")
    tap.ok(simultaneous_return(rets, 2) == 300 * MIB, "two: the two largest")
    tap.ok(simultaneous_return(rets, 0) == 0 and simultaneous_return(rets, 10) == 350 * MIB,
           "0: none; more than are away: all of them")

    # reserve: evidence once a VM finished
    tap.ok(vm_reserve([], 384 * MIB) == 384 * MIB, "no VM finished: the configured reserve")
    tap.ok(vm_reserve([180 * MIB, 230 * MIB, -1], 384 * MIB) == 230 * MIB,
           "then the largest peak seen, below the configured reserve too")

    # the rule: room - pending - returns >= reserve + margin
    tap.ok(admit(500 * MIB, 0, 0, 384 * MIB, 100 * MIB), "admits when it fits")
    tap.ok(not admit(500 * MIB, 100 * MIB, 0, 384 * MIB, 100 * MIB),
           "a booting VM's untaken reserve holds the next one back")
    tap.ok(not admit(500 * MIB, 0, 100 * MIB, 384 * MIB, 100 * MIB),
           "an offloaded VM's expected return holds the next one back")
    tap.ok(not admit(None, 0, 0, 1, 0), "no room reading: no admission")

    # one budget, the same VMs, the cohorts' evidence: 1 GiB, 5 % margin,
    # four paused VMs of 200 MiB each, one running at its peak of 230 MiB
    limit, margin, peak = GIB, GIB // 20, 230 * MIB
    usage = 4 * 200 * MIB + peak
    base = admission_room(limit, usage)
    tap.ok(not admit(base, 0, 0, peak, margin), "baseline: four paused VMs hold their memory")
    # offload: the four are offloaded down to 20 MiB each, 180 MiB in the store
    usage_off = 4 * 20 * MIB + peak
    ev = vmnapd_evidence(host([(0, 180 * MIB)] * 4))
    room = admission_room(limit, usage_off, 0, ev[0])
    back = simultaneous_return(ev[1], 1)
    tap.ok(admit(room, 0, back, peak, margin),
           "offload: paused+offloaded VMs at resident + the largest return: room for more")
    tap.ok(not admit(room, 0, simultaneous_return(ev[1], 4), peak, margin),
           "offload, every return reserved: no room (the old conservatism)")
    # offload: two paused, not yet offloaded (reclaimable by the pressure policy)
    ev = vmnapd_evidence(host([(180 * MIB, 0)] * 2 + [(0, 180 * MIB)] * 2))
    usage_mix = 2 * 200 * MIB + 2 * 20 * MIB + peak
    tap.ok(admit(admission_room(limit, usage_mix, 0, ev[0]), 0,
                 simultaneous_return(ev[1], 1), peak, margin),
           "offload: resident of paused VMs counts as room (the pressure policy's to take)")
    tap.ok(not admit(admission_room(limit, usage_mix, 0, 0), 0,
                     simultaneous_return(ev[1], 1), peak, margin),
           "without the reclaimable it would not")

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
    fps = [(0.0, GIB, 0, 0, 0, 0), (1.0, GIB, GIB, 0, 0, 0), (9.0, GIB, GIB, 2 * GIB, 0, 0)]
    fp = footprint_figures(fps, [{"admitted_s": 1.0, "done_s": 9.0}])
    tap.ok(fp == {"vmm_anon": 8.0, "guest_ram_shmem": 8.0, "page_cache": 8.0, "swap": 0.0,
                  "vmnapd": 0.0}, "footprint parts: memory x time inside the window", fp)

    # vmnapd's events: did the pressure policy act
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write('{"type": "pressure", "from": "normal", "to": "elevated"}\n'
                '{"type": "pressure", "from": "elevated", "to": "critical"}\n'
                'not json\n[1]\n{"type": "pressure", "to": 3}\n'
                '{"type": "pressure_offload", "vm": "vm0", "level": "critical"}\n'
                '{"type": "pressure", "from": "critical", "to": "normal"}\n')
    try:
        got = pressure_entered(f.name)
        tap.ok(got == {"elevated": 1, "critical": 1, "normal": 1},
               "pressure levels entered, bad lines skipped", got)
        tap.ok(count_events(f.name, "pressure_offload") == 1, "pressure offloads counted")
    finally:
        os.unlink(f.name)
    tap.ok(pressure_entered("/nonexistent/events.jsonl") == {}, "no events file: nothing entered")

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
    tap.ok(args.reserve_mib == args.mem + 128 and args.cohorts == ["baseline", "offload", "swap"]
           and args.return_vms == 1 and args.margin_pct == 5.0 and args.disk_cache == "none",
           "capacity defaults: reserve = guest RAM + 128 MiB until a peak is seen, one "
           "return at once, 5 % margin, the three cohorts, rootfs without host page cache")
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
