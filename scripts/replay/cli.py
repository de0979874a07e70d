# SPDX-License-Identifier: GPL-2.0-only
"""replay.py - the vmnap trajectory replay benchmark.

Replays a recorded agent trajectory (tests/data/*.jsonl: fixed model waits,
tool commands, expected exit codes and output digests) in real QEMU guests
and measures what each wait costs in memory, cohort by cohort:

  baseline  the VM stays as it is while the agent waits
  pause     vmnapd pauses the VM during waits (offload disabled)
  offload   vmnapd pauses and offloads guest RAM to its store (the daemon's
            defaults: the cost offload policy, lazy restore)
  offload-seed  the same with the seed's fixed offload rule (50 ms into a
            wait, 1 s of guest timer budget, 5 s between offloads)
  offload-lazy  the cost policy, pages back by faults only after a resume
            (vmnapd's default restore, asked for explicitly), and nothing
            held through a wait (critical_resident false: the resume-
            critical set goes out too and is read back before each resume)
  offload-ws  optional: the cost policy, working-set restore (the last
            cycle's working set streams back after a data resume)
  offload-eager  optional: the cost policy, eager restore (every offloaded
            page streams back after a data resume)
  offload-recurring  optional: the cost policy, recurring restore (the
            pages touched in each of the last two data cycles stream back
            after a data resume)
  offload-nofollow  optional: offload without the fault-order prefetch
            (vmnapd's follow_pages 0), to measure what it does
  offload-notrack  optional: offload without dirty tracking
            (VMNAPD_DIRTY_TRACKING=none: no write-protect faults, every
            offload writes every resident page), to measure its cost
  offload-tail  optional: offload keeping the command's last writes
            through every wait (vmnapd's tail_resident "always"; by
            default "first": only until the resume-critical set has
            pages), to measure what they spare and cost
  offload-notail  optional: offload keeping them through no wait
            (tail_resident "off")
  offload-alt  optional: offload with another build's vmnapd and preload
            shim (--alt-build DIR; scripts/build-rev.sh REV makes DIR of a
            git revision), to measure two builds side by side; the guest
            is this tree's in both
  swap      kernel swap, the peer a user would pick: at each wait start the
            VM cgroup's memory is reclaimed to a swap file on the same
            filesystem (memory.reclaim, v1 memory.force_empty, or
            process_madvise(MADV_PAGEOUT)); the guest faults it back

Cohort runs are interleaved and repeated; every run boots N VMs (each in its
own cgroup with a CPU quota), releases them together, and replays the
trajectory in each.  Commands reach the in-guest exec agent
(tests/replay/exec_agent.c) over vsock: a host-initiated "CONNECT <port>\\n"
on the VM's vsock unix socket (vmnapd's vhost-user-vsock bridge).  Without
the bridge, the agent is reached over the launcher's control line
(--transport tty), which serves baseline and swap.

Subcommands:
  run     replay cohorts; outputs under OUT/<run-id>/ and OUT/latest
  record  run a trajectory once in a baseline guest and write its expected
          exit codes and digests (how tests/data/*.jsonl got them)
  probe   print what this host offers (cgroups, swap, vmnapd API, bridge)
  table   print a run's cohorts as a Markdown table (README figures)
  capacity  how many agent VMs a fixed memory budget runs, per cohort
          (baseline, offload, swap; see replay/capacity.py); outputs under
          OUT/<run-id>/ and OUT/latest

--via gateway: the replayer is the agent; each step's model request goes
to its VM's vmnap-gateway listener (one gateway per cohort run, the
gateway's fake model server behind it answering after the step's wait_ms),
and vmnapd hears of the wait from the gateway alone, in every cohort (the
baseline and swap VMs registered unmanaged: same proxy path, no pause).
Delivery latency is then taken where the agent sees it: the first SSE event
at the agent less (request sent + wait_ms).  A calibration before the runs
(--gw-calib N requests each, interleaved, straight to the fake server and
through the gateway for an unmanaged VM) gives the gateway's own overhead.

Exit status of run: 0 when every functional check passed, 1 when one
failed, 77 when nothing could run here (reason on the last line).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from .common import (ALT_BINARIES, ALT_COHORT, BUILD, COHORTS, DEFAULT_COHORTS, FINAL_DIFF_CMD,
                     OPTIONAL_COHORTS, MIB, ROOT, log)
from .capacity import CAPACITY_COHORTS, capacity_table, cmd_capacity
from .guest import Guest
from .host import Cgroups
from .runner import Bench
from . import schedtrace
from .trajectory import load_trajectory
from .vmnapd import Vmnapd, vmnap_missing, vmnapd_bridges


# --------------------------------------------------------------------------
# record: fill in a trajectory's expectations from one guest run
# --------------------------------------------------------------------------

def cmd_record(args):
    header, steps = load_trajectory(args.trajectory, need_expectations=False)
    args.vms, args.cpu_quota = 1, None
    bench = Bench.__new__(Bench)
    bench.args = args
    bench.cgroups = Cgroups()
    bench.header, bench.steps = header, steps
    wd = os.path.join(ROOT, BUILD, "replay", "record")
    os.makedirs(wd, exist_ok=True)
    bench.outdir = wd
    bench.build_rootfs()
    bench.sockdir = tempfile.mkdtemp(prefix="vmnap-replay.")
    g = Guest(bench, "replay-record", "baseline", wd, os.path.join(bench.sockdir, "vm"), None)
    vmnapd = None
    if args.transport == "vsock":
        vmnapd = Vmnapd(bench.vmnapd_exe, os.path.join(bench.sockdir, "vmnapd"),
                        os.path.join(args.store_dir, "replay-record"), wd, [g.vsock_spec()])
        vmnapd.wait_for([g.vhost_user])
    g.start()
    try:
        g.wait_ready()
        for st in steps:
            res, _ = g.exec_shell(st["cmd"])
            st["exit_code"] = res["exit_code"]
            st["stdout_sha256"] = res["stdout_sha256"]
            log(f"step {st['step']}: exit {res['exit_code']} "
                f"{res['stdout_total']} bytes {res['stdout_sha256'][:12]}")
            if args.verbose:
                sys.stderr.write(res["stdout"].decode(errors="replace"))
                sys.stderr.write(res["stderr"].decode(errors="replace"))
        res, _ = g.exec_shell(FINAL_DIFF_CMD)
        header["final_diff_sha256"] = res["stdout_sha256"]
        header["recorded"] = {"how": "scripts/replay.py record (one baseline guest, "
                              "transport " + args.transport + ")",
                              "date": time.strftime("%Y-%m-%d", time.gmtime())}
        if args.verbose:
            sys.stderr.write(res["stdout"].decode(errors="replace"))
    finally:
        g.stop()
        if vmnapd:
            vmnapd.stop()
        shutil.rmtree(bench.sockdir, ignore_errors=True)
    with open(args.trajectory, "w") as f:
        f.write(json.dumps(header) + "\n")
        for st in steps:
            f.write(json.dumps(st) + "\n")
    log(f"recorded {len(steps)} steps into {args.trajectory}")
    return 0


def short_rev(build):
    """A build of summary.json's "builds" in a few characters: its commit,
    and "+changes" where the working tree differed from it."""
    rev = (build or {}).get("rev")
    if not rev:
        return "revision unknown"
    return rev.split(" ", 1)[0][:12] + (" +changes" if rev.endswith(" +changes") else "")


def ratio_line(by, window_digits=3):
    """paired_ratios' repetitions as the table prints them: memory × time
    ratios; window ratios (two builds differ by less than a baseline)."""
    return (", ".join(f"{m:.3f}x" for m in by["guest_ram_memxtime_gib_s"]) + "; " +
            ", ".join(f"{w:.{window_digits}f}x" for w in by["completion_window_s"]))


def cmd_table(args):
    """A Markdown table of a run's cohorts (for the README)."""
    if not os.path.isfile(os.path.join(args.run_dir, "summary.json")):
        print(f"replay: {args.run_dir} has no summary.json: the run is not "
              "finished, or it failed (see its log)", file=sys.stderr)
        return 1
    with open(os.path.join(args.run_dir, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(args.run_dir, "validation.json")) as f:
        v = json.load(f)
    if "budget_bytes" in s:
        return capacity_table(s, v)
    cols = [("runs", "runs", "{}"), ("guest_ram_memxtime_gib_s", "guest RAM GiB·s", "{:.2f}"),
            ("vmm_pss_memxtime_gib_s", "VMM PSS GiB·s", "{:.2f}"),
            ("cgroup_memxtime_gib_s", "cgroup GiB·s", "{:.2f}"),
            ("guest_ram_mean_mib", "guest RAM mean MiB", "{:.0f}"),
            ("completion_window_s", "window s", "{:.1f}"),
            ("throughput_per_min", "VMs/min", "{:.3f}"),
            ("delivery_p50_ms", "deliv. p50 ms", "{:.1f}"),
            ("delivery_p99_ms", "deliv. p99 ms", "{:.1f}"),
            ("delivery_throttled", "deliv. throttled", "{:.0f}"),
            ("delivery_unthrottled_p99_ms", "unthrottled deliv. p99 ms", "{:.1f}"),
            ("delivery_offloaded_n", "deliv. after offload", "{:.0f}"),
            ("delivery_offloaded_p99_ms", "deliv. p99 after offload ms", "{:.1f}"),
            ("delivery_paused_n", "deliv. after pause", "{:.0f}"),
            ("delivery_paused_p99_ms", "deliv. p99 after pause ms", "{:.1f}"),
            ("offloaded_bytes", "offloaded MiB", "{:.0f}"),
            ("store_written_bytes", "store written MiB", "{:.0f}"),
            ("resume_vmm_p99_ms", "resume VMM p99 ms", "{:.1f}"),
            ("resume_ack_p99_ms", "RESUMED→ACK p99 ms", "{:.1f}"),
            ("resume_total_p99_ms", "resume p99 ms", "{:.1f}")]
    print(f"{s['vms']} VM(s), {s['repeats']} runs per cohort"
          f"{' (each repetition side by side)' if s.get('side_by_side') else ''}, trajectory "
          f"{s['trajectory']} ({s['trajectory_steps']} steps, {s['trajectory_wait_s']} s of waits), "
          f"medians; run {s['run_id']}, measurement_integrity_passed: "
          f"{v['measurement_integrity_passed']} (max sampling gap {v['max_sampling_gap_ms']} ms, "
          f"lost events {v['lost_events']} + vmnapd {v['lost_events_vmnapd']}, "
          f"checks {v['checks_total'] - v['checks_failed']}/{v['checks_total']})\n")
    cal = s.get("gateway_calibration")
    if s.get("via") == "gateway":
        cols += [("gateway_held", "gw held", "{:.0f}"), ("gateway_hold_ms", "gw hold ms", "{:.0f}")]
    if cal:
        print(f"Via vmnap-gateway; its overhead ({cal['requests_each']} requests each, "
              f"side by side, unmanaged VM): first byte p50 {cal['direct_first_byte_p50_ms']:.2f} "
              f"→ {cal['gateway_first_byte_p50_ms']:.2f} ms ({cal['added_first_byte_p50_ms']:+.2f}), "
              f"p99 {cal['direct_first_byte_p99_ms']:.2f} → {cal['gateway_first_byte_p99_ms']:.2f} ms "
              f"({cal['added_first_byte_p99_ms']:+.2f}); delivery = the agent's first byte "
              f"- (request sent + wait_ms)\n")
    print("| cohort | " + " | ".join(c[1] for c in cols) + " | guest RAM vs baseline |")
    print("|---" * (len(cols) + 2) + "|")
    for c, agg in s["cohorts"].items():
        if not agg.get("runs"):
            print(f"| {c} | skipped: {agg.get('skipped', '')} |")
            continue
        cells = []
        for key, _title, fmt in cols:
            val = agg.get(key)
            if key in ("offloaded_bytes", "store_written_bytes") and val is not None:
                val = val / MIB
            cells.append("-" if val is None else fmt.format(val))
        ratio = agg.get("ratio_to_baseline", {}).get("guest_ram_memxtime_gib_s")
        print(f"| {c} | " + " | ".join(cells) + f" | {'-' if ratio is None else f'{ratio:.2f}x'} |")
    paired = [(c, agg["ratio_to_baseline_by_rep"]) for c, agg in s["cohorts"].items()
              if agg.get("ratio_to_baseline_by_rep")]
    if paired:
        print("\nEach repetition against the baseline run of the same repetition "
              "(guest RAM memory×time; completion window):")
        for c, by in paired:
            print(f"- {c}: {ratio_line(by)}")
    sched = [(c, agg) for c, agg in s["cohorts"].items() if agg.get("sched_ack_resumes")]
    if sched:
        print("\nRESUMED→RESUME_ACK by the host scheduler (--sched-trace; ms p50 / p99; "
              f"slow: ≥ {schedtrace.SLOW_ACK_MS:g} ms, and of those how many had "
              f"≥ {schedtrace.MARK_MS:g} ms of each):")
        for c, agg in sched:
            parts = ", ".join(
                f"{n.replace('_', ' ')} {agg[f'sched_ack_{n}_p50_ms']:.2f} / "
                f"{agg[f'sched_ack_{n}_p99_ms']:.2f} ({agg[f'sched_ack_slow_{n}']:g})"
                for n in schedtrace.PARTS)
            print(f"- {c}: {agg['sched_ack_resumes']:g} resumes, {agg['sched_ack_slow']:g} slow; "
                  f"{parts}")
    by = s["cohorts"].get("offload", {}).get("ratio_to_alt_by_rep")
    if by:
        builds = s.get("builds") or {}
        print(f"\noffload (this tree, {short_rev(builds.get('tree'))}) against {ALT_COHORT} "
              f"({short_rev(builds.get('alt'))}), each repetition "
              f"(guest RAM memory×time; completion window):")
        print(f"- {ratio_line(by, window_digits=4)}")
    return 0


def cmd_probe(_args):
    cg = Cgroups()
    print(f"cgroups: {cg.describe()}")
    print(f"swap: {'swapon' if shutil.which('swapon') else 'no swapon'}")
    print(f"vmnap cohorts: {vmnap_missing() or 'available'}")
    print(f"launcher: {'present' if os.path.exists(os.path.join(ROOT, 'scripts/run-guest.sh')) else 'missing'}")
    return 0


def cpu_quota(text):
    """--cpu-quota: CPUs per VM, or "auto" (resolved once --vms is known)."""
    if text == "auto":
        return text
    v = float(text)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0 or auto")
    return v


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--trajectory", default=os.path.join(ROOT, "tests/data/replay-full.jsonl"))
        p.add_argument("--mem", type=int, default=512, help="guest RAM in MiB")
        p.add_argument("--transport", choices=("auto", "vsock", "tty"), default="auto",
                       help="vsock: vmnapd's bridge; tty: the launcher's control line "
                            "(before the bridge exists); auto: vsock when vmnapd has it")
        p.add_argument("--guest-timeout", type=int, default=1800)
        p.add_argument("--store-dir", default=os.environ.get("VMNAP_STORE_DIR", "/var/lib/vmnap"))
        p.add_argument("-v", "--verbose", action="store_true")

    r = sub.add_parser("run", help="replay cohorts")
    common(r)
    r.add_argument("--cohorts", default=",".join(DEFAULT_COHORTS),
                   help=f"comma-separated, from {', '.join(COHORTS)} (default: all but the "
                        f"optional {', '.join(OPTIONAL_COHORTS)})")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--vms", type=int, default=1)
    r.add_argument("--cpu-quota", type=cpu_quota, default=0.5,
                   help="CPUs per VM (cgroup cpu.max / cfs_quota_us); 0: none; "
                        "auto: the host's CPUs shared by the VMs, at most 0.5 each")
    r.add_argument("--sample-ms", type=int, default=100)
    r.add_argument("--side-by-side", action="store_true",
                   help="run a repetition's cohorts at once, not one after another: "
                        "each ratio to baseline is then taken between runs that shared "
                        "the machine's every moment (needs the CPUs for all of them)")
    r.add_argument("--out", default=os.path.join(BUILD, "bench/replay"))
    r.add_argument("--sched-trace", action="store_true",
                   help="record the host's context switches (perf) and break every "
                        "resume's RESUMED->RESUME_ACK down by what QEMU's vCPU and main "
                        "threads did (summary.json sched_ack_*)")
    r.add_argument("--alt-build", metavar="DIR",
                   help="the offload-alt cohort's vmnapd and libvmnap-preload.so "
                        "(scripts/build-rev.sh REV makes DIR from a git revision)")
    r.add_argument("--tap", action="store_true", help="TAP lines per cohort (make check)")
    r.add_argument("--via", choices=("direct", "gateway"), default="direct",
                   help="direct: the replayer calls vmnapd's wait API and sleeps wait_ms; "
                        "gateway: it sends each model request through the VM's "
                        "vmnap-gateway listener to the fake model server")
    r.add_argument("--gw-calib", type=int, default=200, metavar="N",
                   help="--via gateway: N requests each straight to the fake model server "
                        "and through the gateway (unmanaged VM) for its overhead")
    cp = sub.add_parser("capacity", help="VMs a fixed memory budget runs, per cohort")
    common(cp)
    cp.set_defaults(trajectory=os.path.join(ROOT, "tests/data/replay-capacity.jsonl"), mem=256)
    cp.add_argument("--cohorts", default=",".join(CAPACITY_COHORTS))
    cp.add_argument("--vms", type=int, default=10, help="VMs to run through the budget (N)")
    cp.add_argument("--budget-mib", type=int, default=2048,
                    help="memory limit of the cgroup holding every VM and vmnapd")
    cp.add_argument("--reserve-mib", type=int, default=None,
                    help="one VM's share in the admission rule (default: --mem + 128)")
    cp.add_argument("--margin-pct", type=float, default=5.0,
                    help="admission margin, percent of the budget")
    cp.add_argument("--return-vms", type=int, default=1,
                    help="paused VMs assumed to take their memory back at once")
    cp.add_argument("--cpu-quota", type=cpu_quota, default=0.25,
                    help="CPUs per VM; auto: the host's CPUs shared by --vms, at most 0.5")
    cp.add_argument("--tcg-tb-mib", type=int, default=64,
                    help="TCG translation cache per VM (MiB; QEMU's default 1 GiB); 0: default")
    cp.add_argument("--disk-cache", default="none",
                    choices=("none", "directsync", "writethrough", "writeback", "unsafe"),
                    help="QEMU's cache mode for the rootfs (none: O_DIRECT, no host page "
                         "cache beside the guest's own)")
    cp.add_argument("--sample-ms", type=int, default=200)
    cp.add_argument("--out", default=os.path.join(BUILD, "bench/capacity"))
    rec = sub.add_parser("record", help="write a trajectory's expected results")
    common(rec)
    sub.add_parser("probe", help="what this host offers")
    tb = sub.add_parser("table", help="Markdown table of a run (README figures)")
    tb.add_argument("run_dir")
    args = ap.parse_args(argv)
    if getattr(args, "transport", None) == "auto":
        args.transport = "vsock" if vmnapd_bridges() else "tty"
    if args.cmd in ("run", "capacity"):
        if args.cpu_quota == "auto":
            args.cpu_quota = round(min(0.5, (os.cpu_count() or 1) / args.vms), 4)
            args.cpu_quota_rule = "auto: min(0.5, host CPUs / VMs)"
        else:
            args.cpu_quota_rule = "given"
    if args.cmd == "capacity":
        args.cohorts = [c for c in args.cohorts.split(",") if c]
        bad = [c for c in args.cohorts if c not in CAPACITY_COHORTS]
        if bad:
            ap.error(f"unknown cohort(s) {bad} (capacity has {', '.join(CAPACITY_COHORTS)})")
        if args.vms < 1 or args.budget_mib < 1 or args.sample_ms < 1 or args.return_vms < 0:
            ap.error("--vms, --budget-mib and --sample-ms must be positive")
        if args.reserve_mib is None:
            args.reserve_mib = args.mem + 128
    if args.cmd == "run":
        args.cohorts = [c for c in args.cohorts.split(",") if c]
        bad = [c for c in args.cohorts if c not in COHORTS]
        if bad:
            ap.error(f"unknown cohort(s) {bad}")
        if args.vms < 1 or args.repeats < 1 or args.sample_ms < 1:
            ap.error("--vms, --repeats and --sample-ms must be positive")
        if (ALT_COHORT in args.cohorts) != bool(args.alt_build):
            ap.error(f"--alt-build DIR and the {ALT_COHORT} cohort go together")
        if args.alt_build:
            missing = [n for n in ALT_BINARIES
                       if not os.path.isfile(os.path.join(args.alt_build, n))]
            if missing:
                ap.error(f"--alt-build {args.alt_build} has no {', '.join(missing)} "
                         f"(scripts/build-rev.sh REV builds them)")
            args.alt_build = os.path.abspath(args.alt_build)
        if args.via == "gateway" and args.gw_calib < 1:
            ap.error("--gw-calib must be positive")
        why = schedtrace.missing() if args.sched_trace else None
        if why:
            ap.error(f"--sched-trace: {why}")
    return args


def cmd_run(args):
    if not os.path.exists(os.path.join(ROOT, "scripts/run-guest.sh")):
        print("replay: SKIP: scripts/run-guest.sh (guest launcher) is not in the tree yet")
        return 77
    requested = list(args.cohorts)
    if args.via == "gateway":
        gw = os.path.join(ROOT, BUILD, "vmnap-gateway")
        if not os.access(gw, os.X_OK):
            print(f"replay: SKIP: --via gateway needs {gw} (make)")
            return 77
        if args.transport != "vsock":
            print("replay: SKIP: --via gateway needs vmnapd's vsock bridge "
                  "(the VMs it knows unmanaged in baseline and swap)")
            return 77
    bench = Bench(args)
    summary, validation = bench.run()
    if args.tap:
        print(f"1..{len(requested)}")
        for i, c in enumerate(requested, 1):
            agg = summary["cohorts"][c]
            if c in validation["skipped_cohorts"]:
                print(f"ok {i} - replay {c} # SKIP {validation['skipped_cohorts'][c]}")
                continue
            fails = [x for x in validation["functional_checks"]
                     if x["run"].rsplit("-r", 1)[0] == c and not x["passed"]]
            print(f"{'not ok' if fails or not agg['runs'] else 'ok'} {i} - replay {c}: "
                  f"{agg['runs']} run(s), "
                  f"{len(fails)} failed check(s)")
    print(json.dumps({c: {k: v for k, v in s.items() if k in
                          ("runs", "skipped", "guest_ram_memxtime_gib_s",
                           "completion_window_s", "delivery_p99_ms")}
                      for c, s in summary["cohorts"].items()}, indent=1))
    print(f"measurement_integrity_passed: {validation['measurement_integrity_passed']}")
    if not any(s.get("runs") for s in summary["cohorts"].values()):
        print("replay: SKIP: no cohort could run here: " +
              "; ".join(f"{c}: {w}" for c, w in validation["skipped_cohorts"].items()))
        return 77
    return 0 if validation["functional_checks_passed"] else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        print("replay: SKIP: needs root (cgroups, swap, QEMU)")
        return 77
    return {"run": cmd_run, "record": cmd_record, "probe": cmd_probe,
            "table": cmd_table, "capacity": cmd_capacity}[args.cmd](args)

