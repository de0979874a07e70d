# SPDX-License-Identifier: GPL-2.0-only
"""The capacity benchmark (replay.py capacity): how many agent VMs a fixed
memory budget runs, cohort by cohort.

Each cohort gets a parent memory cgroup with a hard limit (the budget);
every VM's cgroup (the launcher and QEMU) and vmnapd (the vsock bridge and,
in offload, the pager) live under it, so the limit covers the VMMs, not only
guest RAM.  Up to N VMs, each replaying the trajectory on its own copy of
the rootfs, are admitted one at a time while the admission rule allows,
and each leaves once done, so the budget's room goes to the next.

Admission rule, the same for every cohort, checked every second (one VM
per check):

  room - pending - returns >= reserve + margin     admit the next VM

  room      limit - usage of the budget (its own counters, read then)
            + its inactive file cache (memory.stat; the kernel drops it
            first) + reclaimable: what the cohort's safety net takes back
            from paused VMs without the VM's help (offload: GET /host's
            reclaimable_bytes, the resident of paused VMs the pressure
            policy offloads as the budget fills; baseline, swap: 0)
  reserve   one VM's footprint: the largest memory peak (v1
            memory.max_usage_in_bytes, v2 memory.peak) of the cohort's VMs
            that finished; --reserve-mib until one has
  pending   for each admitted VM booting or running a step (not in a model
            wait): reserve - its cgroup's usage, what it may still take
  returns   the --return-vms largest expected returns of VMs in a model
            wait: what that many take back when they resume at once
            (offload: GET /host's expected_return_bytes, the store bytes of
            an offloaded VM; swap: the VM cgroup's swapped bytes; baseline:
            0, its paused VMs keep everything)
  margin    --margin-pct of the budget (5 %)

So a paused VM counts at its resident size (in usage) plus, for the
largest ones, what it brings back; when more come back at once than the
rule assumed, the cohort's safety net (offload: the pressure policy; swap:
the kernel's swap-out) is what keeps the budget from an OOM kill.
A cohort with nothing running and no room for one VM for 10 checks stops
there (budget too small).  OOM kills are read from the budget's memory cgroups (v2
memory.events, v1 memory.oom_control of every VM cgroup) and must be 0.
"""
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

from .common import (BUILD, COHORT_POLICY, COHORT_RESTORE, GIB, MIB, NS, ROOT,
                     VMNAP_COHORTS, VMNAP_LINK_PORT, log, now_ns, runs_accel)
from .events import EventLog, event_seq_gaps
from .guest import Guest
from .plot import gnuplot_lines
from .runner import Bench, CohortRun
from .summary import validate
from .vmnapd import Vmnapd, vmnap_missing, vmnapd_bridges, vmnapd_event_figures

CAPACITY_COHORTS = ("baseline", "offload", "swap")
ADMIT_INTERVAL_S = 1.0
IDLE_CHECKS = 10   # checks with nothing running and no room: budget too small


# --------------------------------------------------------------------------
# The admission rule and the summary figures (pure: tests/replay/capacity_test.py)
# --------------------------------------------------------------------------

def admission_room(limit, usage, inactive_file=0, reclaimable=0):
    """What the budget can still give: limit - usage + the budget's inactive
    file cache + memory the pressure policy can take back from paused VMs;
    None without a limit or a usage reading (never admit blind)."""
    if limit is None or usage is None or usage < 0:
        return None
    return limit - usage + max(0, inactive_file or 0) + max(0, reclaimable or 0)


def simultaneous_return(returns, return_vms):
    """The return_vms largest expected returns: what that many paused VMs
    take back when they resume at once."""
    ok = sorted((r for r in returns if isinstance(r, int) and r > 0), reverse=True)
    return sum(ok[:max(0, return_vms)])


def vmnapd_evidence(host):
    """(reclaimable, [expected return per VM]) from GET /host, or None when
    the answer has no per-VM list.  Malformed per-VM figures count as 0."""
    vms = (host or {}).get("vms")
    if not isinstance(vms, list):
        return None
    rec = [v.get("reclaimable_bytes") for v in vms if isinstance(v, dict)]
    ret = [v.get("expected_return_bytes") for v in vms if isinstance(v, dict)]
    return (sum(r for r in rec if isinstance(r, int) and r > 0),
            [r for r in ret if isinstance(r, int)])


def vm_reserve(peaks, configured):
    """One VM's reserve: the largest memory peak of the cohort's VMs that
    finished (evidence), else the configured one."""
    peaks = [p for p in peaks if isinstance(p, int) and p > 0]
    return max(peaks) if peaks else configured


def admit(room, pending, returns, reserve, margin):
    """True when the next VM fits: room - pending - returns >= reserve + margin."""
    return room is not None and room - pending - returns >= reserve + margin


FOOTPRINT_PARTS = ("vmm_anon", "guest_ram_shmem", "page_cache", "swap", "vmnapd")


def footprint_figures(footprints, vms):
    """Memory x time (GiB·s) of each part of the budget over the cohort's
    window, from samples (t_s, anon, shmem, page_cache, swap, vmnapd):
    vmm_anon the VMMs' (and vmnapd's) private memory, QEMU's TCG
    translation cache included; guest_ram_shmem the guests' memfd RAM;
    page_cache file pages (disk images, overlays, stores); swap what is
    in swap (outside the limit); vmnapd its cgroup's whole usage."""
    finished = [v["done_s"] for v in vms if v.get("done_s") is not None]
    start = min((v["admitted_s"] for v in vms), default=0.0)
    end = max(finished, default=start)
    inside = [f for f in footprints if start <= f[0] <= end]
    return {k: round(trapezoid([(f[0], f[i + 1]) for f in inside]) / GIB, 6)
            for i, k in enumerate(FOOTPRINT_PARTS)}


def trapezoid(points):
    """Integral of [(t_s, value)] over t (value × seconds)."""
    return sum((a[1] + b[1]) / 2 * (b[0] - a[0]) for a, b in zip(points, points[1:]))


def cohort_figures(samples, vms, oom_kills, checks_ok):
    """A cohort's figures from its samples [(t_s, running, cgroup_bytes,
    guest_ram_bytes)] and VM records [{admitted_s, done_s (None: did not
    finish), ok}].  The window runs from the first admission to the last
    VM's end; concurrency counts VMs admitted and not yet gone."""
    finished = [v for v in vms if v.get("done_s") is not None]
    start = min((v["admitted_s"] for v in vms), default=0.0)
    end = max((v["done_s"] for v in finished), default=start)
    window = end - start
    inside = [s for s in samples if start <= s[0] <= end]
    running = [s[1] for s in inside]
    fig = {
        "vms_admitted": len(vms),
        "vms_completed": len(finished),
        "vms_peak": max(running, default=0),
        "vms_mean": round(trapezoid([(s[0], s[1]) for s in inside]) / window, 3)
        if window > 0 and len(inside) > 1 else None,
        "oom_kills": oom_kills,
        "completion_window_s": round(window, 3),
        "agents_per_min": round(len(finished) / (window / 60), 4) if window > 0 else None,
        "functional_ok": bool(checks_ok) and len(finished) == len(vms) and bool(vms),
        "cgroup_memxtime_gib_s": round(trapezoid([(s[0], s[2]) for s in inside if s[2] >= 0])
                                       / GIB, 6),
        "guest_ram_memxtime_gib_s": round(trapezoid([(s[0], s[3]) for s in inside]) / GIB, 6),
        "cgroup_peak_mib": round(max((s[2] for s in inside), default=0) / MIB, 3),
    }
    return fig


# --------------------------------------------------------------------------
# One cohort under the budget
# --------------------------------------------------------------------------

class CapacityRun(CohortRun):
    """The VMs of one cohort, admitted into the budget one by one; the
    per-wait behaviour and the replay of one VM are the replay's."""

    def __init__(self, bench, cohort):
        super().__init__(bench, cohort, 0)
        self.key = cohort
        self.lock = threading.Lock()
        self.live = {}          # name -> Guest, admitted and not yet stopped
        self.ready = set()      # names whose guest RAM can be read
        self.waiting = set()    # names in a model wait
        self.vmrec = {}         # name -> record for the figures
        self.oom_kills = 0
        self.limit_hits = 0
        self.samples = []
        self.gaps_ms = []
        self.admissions = []
        self.peaks = []         # memory peaks of the VMs that finished
        self.footprints = []    # (t_s, anon, shmem, page_cache, swap, vmnapd) of the budget

    # -- a VM's life --------------------------------------------------------
    def vm_life(self, g, t0):
        b, rec = self.bench, self.vmrec[g.name]
        done = {}
        try:
            g.start()
            g.wait_ready()
            rec["ready_s"] = round((now_ns() - t0) / NS, 3)
            if self.cohort in VMNAP_COHORTS:
                self.api.register(g.name, g.qmp, f"{g.vsock}_{VMNAP_LINK_PORT}",
                                  COHORT_POLICY[self.cohort],
                                  freezer=b.cgroups.freezer_dir(g.cg_dirs),
                                  restore=COHORT_RESTORE.get(self.cohort))
            with self.lock:
                self.ready.add(g.name)
            go = threading.Event()
            go.set()
            self.replay_vm(g, go, done)
        except Exception as e:  # noqa: BLE001 - a failed check, the rest goes on
            self.check(f"{g.name}/boot", False, error=str(e))
        finally:
            ok = g.name in done and all(c["passed"] for c in self.checks
                                        if c["name"].startswith(g.name + "/"))
            with self.lock:
                self.ready.discard(g.name)
            for t in [t for t in self.reclaims if t.name == g.name]:
                t.join()
            g.stop()
            with self.lock:
                self.live.pop(g.name, None)
            if self.cohort in VMNAP_COHORTS:
                try:
                    self.api.delete(g.name)
                except (OSError, RuntimeError):
                    pass
            if g.name in done:
                peak = b.cgroups.peak_bytes(g.cg_dirs)
                rec["peak_bytes"] = peak
                with self.lock:
                    self.peaks.append(peak)
            kills, _ = b.cgroups.oom_events(g.cg_dirs["mem"])
            if not b.cgroups.v2:
                self.oom_kills += kills or 0
            b.cgroups.remove(g.cg_dirs)
            rec["done_s"] = round((now_ns() - t0) / NS, 3) if g.name in done else None
            rec["ok"] = ok
            b.events.emit("vm_gone", run=self.key, vm=g.name, completed=g.name in done, ok=ok)

    def wait_begin(self, g, step):
        with self.lock:
            self.waiting.add(g.name)
        super().wait_begin(g, step)

    def wait_end(self, g, step):
        with self.lock:
            self.waiting.discard(g.name)
        return super().wait_end(g, step)

    def pending_bytes(self, reserve):
        """Reserve not yet taken by the admitted VMs that are booting or
        running a step (not in a model wait): each may grow to it."""
        p = 0
        with self.lock:
            active = [g for n, g in self.live.items() if n not in self.waiting]
        for g in active:
            used = self.bench.cgroups.memory_bytes(g.cg_dirs)
            p += max(0, reserve - max(0, used))
        return p

    def evidence(self):
        """(reclaimable, [expected return per paused VM]) by the cohort's
        own evidence, or None without it: offload GET /host (resident of
        paused VMs the pressure policy can offload; the store bytes of
        offloaded ones); swap each waiting VM's swapped bytes; baseline
        nothing to reclaim and nothing away."""
        if self.cohort in VMNAP_COHORTS:
            try:
                return vmnapd_evidence(self.api.host())
            except (OSError, RuntimeError, ValueError) as e:
                log(f"{self.key}: GET /host failed: {e}")
                return None
        if self.cohort == "swap":
            with self.lock:
                paused = [g for n, g in self.live.items() if n in self.waiting]
            return 0, [self.bench.cgroups.swap_bytes(g.cg_dirs) for g in paused]
        return 0, []

    # -- sampling ------------------------------------------------------------
    def sampler(self, stop, t0, budget_dir, vmnapd_dir):
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        except OSError:
            pass
        interval = self.bench.args.sample_ms / 1000
        next_t, last = time.monotonic(), None
        while not stop.is_set():
            t = now_ns()
            if last is not None:
                self.gaps_ms.append((t - last) / 1e6)
            last = t
            with self.lock:
                running = len(self.live)
                ram = 0
                for n in self.ready:
                    g = self.live.get(n)
                    if g and g.ram_gauge:
                        ram += max(0, g.ram_gauge.read(self.cohort == "swap"))
            usage = self.bench.cgroups.memory_bytes({"mem": budget_dir})
            self.samples.append(((t - t0) / NS, running, usage, ram))
            fp = self.bench.cgroups.footprint({"mem": budget_dir})
            self.footprints.append(((t - t0) / NS, fp["anon"], fp["shmem"], fp["page_cache"],
                                    fp["swap"], max(0, self.bench.cgroups.memory_bytes(
                                        {"mem": vmnapd_dir}))))
            next_t += interval
            delay = next_t - time.monotonic()
            if delay < 0:
                next_t, delay = time.monotonic(), 0
            stop.wait(delay)

    # -- the cohort run ------------------------------------------------------
    def run(self):
        b, a = self.bench, self.bench.args
        cg = b.cgroups
        workroot = os.path.join(b.outdir, "vms", self.key)
        os.makedirs(workroot, exist_ok=True)
        parent = f"{b.run_id}/{self.key}"
        budget = cg.create(parent, None)
        budget_dir = budget["mem"]
        cg.set_limit(budget_dir, a.budget_mib * MIB)
        reserve, margin = a.reserve_mib * MIB, int(a.budget_mib * MIB * a.margin_pct / 100)
        self.result.update(budget_bytes=a.budget_mib * MIB, reserve_bytes=reserve,
                           margin_bytes=margin)
        for i in range(a.vms):
            name = f"c{os.getpid()}-{self.key}-vm{i}"
            wd = os.path.join(workroot, f"vm{i}")
            os.makedirs(wd, exist_ok=True)
            self.guests.append(Guest(b, name, self.cohort, wd,
                                     os.path.join(b.sockdir, self.key, f"vm{i}"),
                                     cg.create(f"{parent}/vm{i}", a.cpu_quota)))
        if self.cohort == "swap":
            b.swapfile.on()
        b.events.emit("run_start", run=self.key, cohort=self.cohort,
                      budget_bytes=a.budget_mib * MIB)
        vmnapd_cg = cg.create(f"{parent}/vmnapd", None)
        stop_sampling = threading.Event()
        sampler = None
        threads = []
        try:
            for g in self.guests:
                g.vmnapd_run_dir = os.path.join(b.sockdir, self.key, "vmnapd")
            extra = ["--pressure-cgroup", budget_dir] if self.cohort in VMNAP_COHORTS else []
            self.vmnapd = Vmnapd(b.vmnapd_exe, os.path.join(b.sockdir, self.key, "vmnapd"),
                                 os.path.join(a.store_dir, f"capacity-{b.run_id}", self.key),
                                 workroot, [g.vsock_spec() for g in self.guests],
                                 extra_args=extra, cgroup_procs=cg.procs_files(vmnapd_cg))
            self.vmnapd.wait_for([g.vhost_user for g in self.guests])
            self.api = self.vmnapd.api
            t0 = now_ns()
            sampler = threading.Thread(target=self.sampler, daemon=True,
                                       args=(stop_sampling, t0, budget_dir,
                                             vmnapd_cg["mem"]))
            sampler.start()
            queue = list(self.guests)
            idle = 0
            while queue or any(t.is_alive() for t in threads):
                if queue:
                    limit, usage = cg.limit_bytes(budget_dir), cg.memory_bytes({"mem": budget_dir})
                    st = cg.memory_stat({"mem": budget_dir})
                    cache = st.get("inactive_file" if cg.v2 else "total_inactive_file", 0)
                    ev = self.evidence()
                    with self.lock:
                        vm_res = vm_reserve(self.peaks, reserve)
                    head = admission_room(limit, usage, cache, ev[0]) if ev else None
                    back = simultaneous_return(ev[1], a.return_vms) if ev else 0
                    pend = self.pending_bytes(vm_res)
                    with self.lock:
                        nlive = len(self.live)
                    admitted = admit(head, pend, back, vm_res, margin)
                    if admitted:
                        g = queue.pop(0)
                        t_s = round((now_ns() - t0) / NS, 3)
                        self.vmrec[g.name] = {"admitted_s": t_s, "done_s": None, "ok": False}
                        self.admissions.append({"vm": g.name, "t_s": t_s, "room": head,
                                                "pending": pend, "returns": back,
                                                "reserve": vm_res, "usage": usage,
                                                "running": nlive})
                        b.events.emit("admit", run=self.key, vm=g.name, room_bytes=head,
                                      pending_bytes=pend, returns_bytes=back,
                                      reserve_bytes=vm_res, usage_bytes=usage, running=nlive)
                        with self.lock:
                            self.live[g.name] = g
                        t = threading.Thread(target=self.vm_life, args=(g, t0), name=g.name)
                        t.start()
                        threads.append(t)
                    idle = idle + 1 if nlive == 0 and not admitted else 0
                    if not admitted and idle >= IDLE_CHECKS:
                        self.check("budget-fits-one-vm", False, room_bytes=head,
                                   needed_bytes=vm_res + margin + back)
                        break
                time.sleep(ADMIT_INTERVAL_S)
            for t in threads:
                t.join()
            # What the budget still holds with every VM gone (page cache
            # charged to it, vmnapd): the same for every cohort, or one of
            # them ran with less room than the others.
            self.result["budget_left_mib"] = round(cg.memory_bytes({"mem": budget_dir}) / MIB, 1)
        finally:
            stop_sampling.set()
            if sampler:
                sampler.join()
            for g in self.guests:
                if g.proc is not None and g.name in self.live:
                    g.stop()
                    cg.remove(g.cg_dirs)
            if self.vmnapd:
                rc = self.vmnapd.stop()
                self.check("vmnapd-exit", rc in (0, -signal.SIGTERM), exit_status=rc)
                self.vmnapd_lost = (event_seq_gaps(self.vmnapd.events_path)
                                    if os.path.exists(self.vmnapd.events_path) else 0)
                fig = vmnapd_event_figures(self.vmnapd.events_path)
                self.result.update(pauses=fig["pauses"], offloads=fig["offloads"],
                                   offloaded_bytes=fig["offloaded_bytes"],
                                   pressure_offloads=count_events(self.vmnapd.events_path,
                                                                  "pressure_offload"),
                                   pressure_entered=pressure_entered(self.vmnapd.events_path))
                shutil.rmtree(os.path.join(a.store_dir, f"capacity-{b.run_id}", self.key),
                              ignore_errors=True)
            kills, hits = cg.oom_events(budget_dir)
            vk, _ = cg.oom_events(vmnapd_cg["mem"])
            # v2: the parent's memory.events counts the subtree; v1: each
            # cgroup its own (the VMs' were added as they went)
            self.oom_kills = (kills or 0) if cg.v2 else self.oom_kills + (kills or 0) + (vk or 0)
            self.limit_hits = hits
            cg.remove(vmnapd_cg)
            cg.remove(budget)
            if self.cohort == "swap":
                b.swapfile.off()
            b.events.emit("run_end", run=self.key)
        self.result.update(cohort_figures(self.samples, list(self.vmrec.values()),
                                          self.oom_kills,
                                          all(c["passed"] for c in self.checks)))
        self.result.update(footprint_memxtime_gib_s=footprint_figures(
            self.footprints, list(self.vmrec.values())),
                           vm_peak_mib=[round(p / MIB, 1) for p in self.peaks],
                           limit_hits=self.limit_hits, admissions=self.admissions,
                           boot_s_median=round(statistics.median(
                               [r["ready_s"] - r["admitted_s"] for r in self.vmrec.values()
                                if "ready_s" in r]), 3)
                           if any("ready_s" in r for r in self.vmrec.values()) else None,
                           max_sample_gap_ms=round(max(self.gaps_ms), 3) if self.gaps_ms else None,
                           accel=runs_accel(g.accel for g in self.guests))
        return self.result


def vmnapd_events(path):
    """vmnapd's events (dicts) from its JSON-lines file; bad lines skipped."""
    try:
        with open(path) as f:
            for ln in f:
                try:
                    e = json.loads(ln)
                except ValueError:
                    continue
                if isinstance(e, dict):
                    yield e
    except OSError:
        return


def count_events(path, kind):
    return sum(e.get("type") == kind for e in vmnapd_events(path))


def pressure_entered(path):
    """{level: times entered} from vmnapd's "pressure" events: whether the
    budget got near enough its limit for the pressure policy to act."""
    n = {}
    for e in vmnapd_events(path):
        if e.get("type") == "pressure" and isinstance(e.get("to"), str):
            n[e["to"]] = n.get(e["to"], 0) + 1
    return n


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

class CapacityBench(Bench):
    RULE = ("admit the next VM when room - pending - returns >= reserve + margin (one per "
            "second); room: limit - usage + inactive file cache of the budget cgroup + "
            "reclaimable (offload: GET /host reclaimable_bytes; others 0); reserve: largest "
            "memory peak of the cohort's finished VMs (--reserve-mib before one); pending: "
            "reserve - usage of each admitted VM booting or running a step; returns: the "
            "return_vms largest expected returns of VMs in a model wait (offload: GET /host "
            "expected_return_bytes; swap: swapped bytes; baseline: 0)")

    def run(self):
        a = self.args
        os.makedirs(self.outdir, exist_ok=True)
        latest = os.path.join(os.path.dirname(self.outdir), "latest")
        if os.path.lexists(latest):
            os.unlink(latest)
        os.symlink(self.run_id, latest)
        self.events = EventLog(os.path.join(self.outdir, "events.jsonl"))
        self.build_rootfs()
        self.warm_shared_cache()
        skipped = {}
        why = vmnap_missing()
        for c in a.cohorts:
            if c in VMNAP_COHORTS and why:
                skipped[c] = why
            elif not vmnapd_bridges():
                skipped[c] = f"the exec agent needs vmnapd's vsock bridge ({BUILD}/vmnapd --vsock)"
            elif not self.cgroups.usable():
                skipped[c] = "no usable memory+cpu cgroup (the budget is one)"
        for c in CAPACITY_COHORTS:
            if c not in a.cohorts:
                skipped[c] = "not in --cohorts"
        self.sockdir = tempfile.mkdtemp(prefix="vmnap-capacity.")
        self.vmnapd_lost = 0
        load0 = loadavg()
        runs, checks = {}, []
        try:
            for c in [c for c in a.cohorts if c not in skipped]:
                log(f"capacity: {c}: budget {a.budget_mib} MiB, up to {a.vms} VMs")
                cr = CapacityRun(self, c)
                try:
                    runs[c] = cr.run()
                except Exception as e:  # noqa: BLE001 - recorded, the rest goes on
                    cr.check("run", False, error=str(e))
                    runs[c] = dict(cr.result, error=str(e))
                checks += cr.checks
                self.vmnapd_lost += cr.vmnapd_lost
                runs[c]["_samples"] = cr.samples
                runs[c]["_gaps"] = cr.gaps_ms
        finally:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.swapfile.remove()
            self.cgroups.remove_run(self.run_id)
            shutil.rmtree(os.path.join(a.store_dir, f"capacity-{self.run_id}"),
                          ignore_errors=True)
            self.events.close()
        return self.write(runs, checks, skipped, load0)

    def write(self, runs, checks, skipped, load0):
        a = self.args
        with open(os.path.join(self.outdir, "samples.csv"), "w") as f:
            f.write("cohort,t_s,vms_running,cgroup_bytes,guest_ram_bytes\n")
            for c, r in runs.items():
                for s in r.get("_samples", []):
                    f.write(f"{c},{s[0]:.3f},{s[1]},{s[2]},{s[3]}\n")
        cohorts = {}
        for c in CAPACITY_COHORTS:
            if c in skipped:
                cohorts[c] = {"skipped": skipped[c]}
            elif c in runs:
                cohorts[c] = {k: v for k, v in runs[c].items() if not k.startswith("_")}
        base = cohorts.get("baseline", {})
        for c, r in cohorts.items():
            if c != "baseline" and base.get("vms_peak") and r.get("vms_peak") is not None:
                r["ratio_to_baseline"] = {
                    k: round(r[k] / base[k], 4) for k in
                    ("vms_peak", "vms_mean", "agents_per_min", "completion_window_s")
                    if r.get(k) is not None and base.get(k)}
        gaps = [g for r in runs.values() for g in r.get("_gaps", [])]
        validation = validate(self, checks, skipped, list(runs.values()),
                              round(max(gaps), 3) if gaps else 0)
        validation["oom_kills"] = ooms = sum(r.get("oom_kills") or 0 for r in runs.values())
        validation["measurement_integrity_passed"] &= ooms == 0 and bool(runs)
        summary = {
            "run_id": self.run_id,
            "trajectory": os.path.relpath(a.trajectory, ROOT),
            "trajectory_steps": len(self.steps),
            "trajectory_wait_s": round(sum(s["wait_ms"] for s in self.steps) / 1000, 3),
            "budget_bytes": a.budget_mib * MIB,
            "vms": a.vms, "mem_mib": a.mem, "cpu_quota": a.cpu_quota,
            "cpu_quota_rule": getattr(a, "cpu_quota_rule", "given"),
            "reserve_bytes": a.reserve_mib * MIB, "margin_pct": a.margin_pct,
            "return_vms": a.return_vms, "admission_rule": self.RULE,
            "tcg_tb_mib": a.tcg_tb_mib or None, "disk_cache": a.disk_cache,
            "warmup": getattr(self, "warmup", None),
            "budget_covers": "every VM's launcher and QEMU, and vmnapd (bridge, pager)",
            "sample_ms": a.sample_ms, "transport": a.transport,
            "host": {"accel": runs_accel(r.get("accel") for r in runs.values()),
                     "cpus": os.cpu_count(), "cgroups": self.cgroups.describe(),
                     "kernel": os.uname().release,
                     "loadavg_start": load0, "loadavg_end": loadavg()},
            "command": " ".join(sys.argv),
            "cohorts": cohorts,
            "measurement_integrity_passed": validation["measurement_integrity_passed"],
        }
        with open(os.path.join(self.outdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
        with open(os.path.join(self.outdir, "validation.json"), "w") as f:
            json.dump(validation, f, indent=1, sort_keys=True)
        for name, col, title, ylabel, scale in (
                ("vms-over-time", 1, "VMs running under the budget", "VMs", 1),
                ("budget-usage", 2, "Budget cgroup memory (all VMs + vmnapd)", "MiB", MIB)):
            gnuplot_lines(self.outdir, name, title, ylabel,
                          [(c, [(s[0], s[col] / scale) for s in r.get("_samples", [])
                                if s[col] >= 0]) for c, r in runs.items()])
        log(f"outputs in {self.outdir}")
        return summary, validation


def cmd_capacity(args):
    if not os.path.exists(os.path.join(ROOT, "scripts/run-guest.sh")):
        print("capacity: SKIP: scripts/run-guest.sh (guest launcher) is missing")
        return 77
    args.via = "direct"
    bench = CapacityBench(args)
    summary, validation = bench.run()
    print(json.dumps({c: {k: v for k, v in r.items() if k in
                          ("skipped", "vms_peak", "vms_mean", "vms_completed", "oom_kills",
                           "completion_window_s", "agents_per_min", "functional_ok",
                           "guest_ram_memxtime_gib_s", "cgroup_memxtime_gib_s")}
                      for c, r in summary["cohorts"].items()}, indent=1))
    print(f"measurement_integrity_passed: {validation['measurement_integrity_passed']}")
    if not any("vms_admitted" in r for r in summary["cohorts"].values()):
        print("capacity: SKIP: no cohort could run here: " +
              "; ".join(f"{c}: {w}" for c, w in validation["skipped_cohorts"].items()))
        return 77
    return 0 if validation["functional_checks_passed"] and validation["oom_kills"] == 0 else 1


def capacity_table(s, v):
    """replay.py table for a capacity run: a Markdown table of its cohorts."""
    cols = [("vms_peak", "VMs peak", "{}"), ("vms_mean", "VMs mean", "{:.2f}"),
            ("vms_completed", "completed", "{}"), ("oom_kills", "OOM kills", "{}"),
            ("completion_window_s", "window s", "{:.1f}"),
            ("agents_per_min", "agents/min", "{:.2f}"),
            ("functional_ok", "functional", "{}"),
            ("guest_ram_memxtime_gib_s", "guest RAM GiB·s", "{:.2f}"),
            ("cgroup_memxtime_gib_s", "cgroup GiB·s", "{:.2f}"),
            ("pressure_offloads", "pressure offloads", "{}")]
    print(f"budget {s['budget_bytes'] // MIB} MiB, up to {s['vms']} VMs of {s['mem_mib']} MiB "
          f"({s['cpu_quota']} CPU each, TCG tb {s.get('tcg_tb_mib')} MiB, disk cache "
          f"{s.get('disk_cache', 'default')}), trajectory "
          f"{s['trajectory']} ({s['trajectory_steps']} steps, {s['trajectory_wait_s']} s of "
          f"waits); run {s['run_id']}; load average {s['host'].get('loadavg_start')} -> "
          f"{s['host'].get('loadavg_end')}; measurement_integrity_passed: "
          f"{v['measurement_integrity_passed']} (max sampling gap {v['max_sampling_gap_ms']} ms, "
          f"checks {v['checks_total'] - v['checks_failed']}/{v['checks_total']})\n")
    print("| cohort | " + " | ".join(c[1] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for c, r in s["cohorts"].items():
        if "skipped" in r:
            print(f"| {c} | skipped: {r['skipped']} |")
            continue
        cells = ["-" if r.get(k) is None else fmt.format(r[k]) for k, _t, fmt in cols]
        print(f"| {c} | " + " | ".join(cells) + " |")
    parts = [(c, r["footprint_memxtime_gib_s"]) for c, r in s["cohorts"].items()
             if isinstance(r.get("footprint_memxtime_gib_s"), dict)]
    if parts:
        print("\nWhere the budget went (memory x time, GiB·s):\n")
        print("| cohort | " + " | ".join(FOOTPRINT_PARTS) + " |")
        print("|---" * (len(FOOTPRINT_PARTS) + 1) + "|")
        for c, fp in parts:
            print(f"| {c} | " + " | ".join(f"{fp.get(k, 0):.2f}" for k in FOOTPRINT_PARTS) + " |")
    return 0
