# SPDX-License-Identifier: GPL-2.0-only
"""Cohort runs: one run boots the VMs of a cohort, releases them together and
replays the trajectory in each (CohortRun); the benchmark plans the runs
interleaved and repeated (Bench).
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time

from .common import (ALT_BINARIES, ALT_COHORT, BUILD, COHORT_ENV, COHORT_POLICY, COHORT_RESTORE,
                     COHORT_SETTINGS, DEFAULT_COHORTS, FINAL_DIFF_CMD, GIB,
                     MIB, NS, PAGE, RESUME_PHASES, ROOT, SWAPFILE_MARGIN_MIB, VMNAP_COHORTS,
                     VMNAP_LINK_PORT, WARMUP_TIMEOUT_S, log, now_ns, percentile, sha256_hex)
from .events import EventLog, event_seq_gaps
from .gateway import Gateway, ModelError, calibrate, model_request
from .guest import Guest, launcher_env
from .host import Cgroups, SwapFile, process_pageout, process_usage, vmstat
from .sampler import Sampler
from .summary import write_outputs
from .trajectory import load_trajectory
from .vmnapd import Vmnapd, vmnap_missing, vmnapd_bridges, vmnapd_event_figures
from . import schedtrace


def git_head():
    """This tree's commit and subject, with "+changes" when the working tree
    differs from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%H %s"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" +changes" if dirty else "")


def build_info(d, rev):
    """summary.json's record of one build: its revision and the SHA-256 of
    the vmnapd and preload shim a run used (copied into @d)."""
    out = {"rev": rev}
    for name in ALT_BINARIES:
        path = os.path.join(d, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[f"{name}_sha256"] = sha256_hex(f.read())
    return out


def resume_figures(fig):
    """A run's figures from vmnapd's events (vmnapd_event_figures): pauses,
    offloads, offloaded bytes, vmnapd's delivery p50/p99, the offload
    decisions by reason, p50/p99 of every resume phase (ms) and of the
    faults taken between the resume request and its end, of the faults
    (count, service ms) a data resume took up to the data's delivery, and
    the faults served while commands ran (count, service and store-read
    seconds, and how many continued a sequential stream; the seconds they
    waited for the pager's lock and for pages in flight, and the sequential
    ones' service seconds); the slowest VM's ms from registration to its
    guest link up (None: no link came up)."""
    out = {"pauses": fig["pauses"], "offloads": fig["offloads"],
           "offloaded_bytes": fig["offloaded_bytes"], "offload_decisions": fig["decisions"],
           "resumes": fig["resumes"], "resumes_lazy": fig["resumes_lazy"],
           "resumes_probe": fig["resumes_probe"],
           "command_faults": fig["command_faults"],
           "command_fault_s": round(fig["command_fault_s"], 3),
           "command_fault_read_s": round(fig["command_fault_read_s"], 3),
           "command_faults_sequential": fig["command_faults_sequential"],
           "link_up_ms": round(max(fig["link_up_ms"]), 3) if fig["link_up_ms"] else None}
    for k in ("command_fault_lock_s", "command_fault_in_flight_s", "command_fault_sequential_s"):
        out[k] = None if fig[k] is None else round(fig[k], 3)
    series = [("vmnapd_delivery", fig["delivered_ms"]),
              ("data_delivery_fault", fig["data_delivery_fault_ms"])]
    series += [(f"resume_{p}", fig["resume_ms"][p]) for p in RESUME_PHASES]
    for name, vals in series:
        for p in (50, 99):
            v = percentile(vals, p)
            out[f"{name}_p{p}_ms"] = None if v is None else round(v, 3)
    for name in ("resume_faults", "data_delivery_faults"):
        for p in (50, 99):
            v = percentile(fig[name], p)
            out[f"{name}_p{p}"] = None if v is None else round(v, 1)
    return out


DATA_FOUND = ("offloaded", "paused", "running")


def wait_id(stepno):
    """The id of step @stepno's wait in vmnapd (the replayer starts it)."""
    return f"s{stepno}"


def delivery_split(deliveries, data_found):
    """Deliveries by where their data found the VM (vmnapd_event_figures'
    "data_found"; @deliveries: (vm, step, ms, throttled) per step): for
    each of offloaded, paused and running, how many, how many of those met
    a throttled CPU cgroup, and the p50/p99 ms.  The delivery latency
    target after an offload (README, "Benchmarks") is the first: a
    running guest takes its data in as the baseline's does."""
    out = {}
    for cls in DATA_FOUND:
        got = [(ms, thr) for vm, step, ms, thr in deliveries
               if data_found.get((vm, wait_id(step))) == cls]
        out[f"delivery_{cls}_n"] = len(got)
        out[f"delivery_{cls}_throttled"] = sum(1 for _, thr in got if thr)
        for p in (50, 99):
            v = percentile([ms for ms, _ in got], p)
            out[f"delivery_{cls}_p{p}_ms"] = None if v is None else round(v, 3)
    return out


class CohortRun:
    def __init__(self, bench, cohort, rep):
        self.bench, self.cohort, self.rep = bench, cohort, rep
        self.key = f"{cohort}-r{rep}"
        self.guests = []
        self.checks = []
        self.delivery_ms = []
        # deliveries during which the VM's CPU cgroup was throttled (its
        # quota spent for the period: it could not run, whatever vmnap
        # did), and the others' latencies
        self.delivery_throttled = 0
        self.delivery_unthrottled_ms = []
        self.deliveries = []    # (vm, step, ms, throttled) for delivery_split
        # the VMMs' user, system CPU (s) and minor, major faults in commands
        self.command_usage = [0.0, 0.0, 0, 0]
        self.result = {"cohort": cohort, "rep": rep, "vms": bench.args.vms}
        self.reclaims = []
        self.reclaim_errors = 0
        self.swapped_out_bytes = 0
        self.vmnapd = None
        self.api = None
        self.vmnapd_lost = 0
        self.gateway = None
        self.via_gateway = bench.args.via == "gateway"

    def check(self, name, passed, **detail):
        c = {"run": self.key, "name": name, "passed": bool(passed)}
        c.update(detail)
        self.checks.append(c)
        if not passed:
            log(f"{self.key}: FAILED check {name}: {detail}")
        return passed

    # -- per-wait behaviour of each cohort --------------------------------
    def wait_begin(self, g, step):
        ev = self.bench.events
        if self.cohort == "swap":
            if any(t.is_alive() and t.name == g.name for t in self.reclaims):
                ev.emit("swap_out_skipped", run=self.key, vm=g.name, step=step["step"],
                        why="previous reclaim still running")
            else:
                t = threading.Thread(target=self.swap_out, args=(g, step["step"]),
                                     name=g.name, daemon=True)
                t.start()
                self.reclaims.append(t)
        elif self.cohort in VMNAP_COHORTS and not self.via_gateway:
            self.api.wait_start(g.name, wait_id(step["step"]))
        ev.emit("wait_start", run=self.key, vm=g.name, step=step["step"])

    def wait_end(self, g, step):
        ev = self.bench.events.emit("data_ready", run=self.key, vm=g.name, step=step["step"])
        if self.cohort in VMNAP_COHORTS:
            self.api.wait_ready(g.name, wait_id(step["step"]))
        return ev["t_ns"]

    def throttled(self, g):
        """The VM's CPU cgroup throttling so far, when it has a quota."""
        if not self.bench.args.cpu_quota or not g.cg_dirs:
            return None
        return self.bench.cgroups.cpu_throttled(g.cg_dirs)

    def delivered(self, g, step):
        if self.cohort in VMNAP_COHORTS and not self.via_gateway:
            self.api.wait_delivered(g.name, wait_id(step["step"]))

    def swap_out(self, g, stepno):
        t0 = now_ns()
        cg = self.bench.cgroups
        ram0 = g.ram_gauge.read(count_swap=True)
        try:
            if cg.usable() and g.cg_dirs:
                method = cg.reclaim(g.cg_dirs, self.bench.args.mem * MIB * 2)
            else:
                process_pageout(g.qemu_pid, *g.ram_map)
                method = "process_madvise"
        except OSError as e:
            self.reclaim_errors += 1
            method = f"error: {e}"
        # Guest RAM pushed out by this reclaim: the drop of its resident
        # bytes, as vmnap's offloaded bytes (resident at PAUSED - at OFFLOADED).
        out = max(0, ram0 - g.ram_gauge.read(count_swap=True))
        self.swapped_out_bytes += out
        self.bench.events.emit("swap_out", run=self.key, vm=g.name, step=stepno,
                               method=method, dur_ms=round((now_ns() - t0) / 1e6, 3),
                               guest_ram_out_bytes=out)

    def model_step(self, g, st):
        """--via gateway: the step's model request through the VM's gateway
        listener; the fake upstream answers after wait_ms.  Delivery latency
        is where the agent sees it: the answer's first byte, less the time
        the request was sent and wait_ms."""
        self.wait_begin(g, st)
        try:
            t_send, t_first, t_end, status, content = model_request(
                self.gateway.socks[g.name], st["step"], st["wait_ms"])
        except ModelError as e:
            self.check(f"{g.name}/step{st['step']}/model", False, error=str(e))
            raise
        deliv = (t_first - t_send) / 1e6 - st["wait_ms"]
        self.delivery_ms.append(deliv)
        self.check(f"{g.name}/step{st['step']}/model", status == 200 and content == st["cmd"],
                   status=status, content_ok=content == st["cmd"])
        self.bench.events.emit("model_response", run=self.key, vm=g.name, step=st["step"],
                               status=status, delivery_ms=round(deliv, 3),
                               response_ms=round((t_end - t_send) / 1e6, 3))
        return t_first

    # -- the replay of one VM -------------------------------------------------
    def replay_vm(self, g, release_evt, out):
        steps = self.bench.steps
        release_evt.wait()
        ev = self.bench.events
        try:
            for st in steps:
                if self.via_gateway:
                    t_first = self.model_step(g, st)
                    res, t_ack = g.exec_shell(st["cmd"])
                    self.check(f"{g.name}/step{st['step']}",
                               res["exit_code"] == st["exit_code"] and
                               res["stdout_sha256"] == st["stdout_sha256"],
                               exit_code=res["exit_code"], expected_exit_code=st["exit_code"],
                               digest_ok=res["stdout_sha256"] == st["stdout_sha256"])
                    ev.emit("step_done", run=self.key, vm=g.name, step=st["step"],
                            exit_code=res["exit_code"],
                            digest_ok=res["stdout_sha256"] == st["stdout_sha256"],
                            exec_ack_ms=None if t_ack is None else round((t_ack - t_first) / 1e6, 3),
                            exec_ms=round(res.get("duration_ns", 0) / 1e6, 3))
                    continue
                t_start = now_ns()
                self.wait_begin(g, st)
                target = t_start + int(st["wait_ms"] * 1e6)
                while True:
                    left = target - now_ns()
                    if left <= 0:
                        break
                    time.sleep(left / NS)
                thr = {"ready": self.throttled(g)}
                t_ready = self.wait_end(g, st)
                use0 = process_usage(g.qemu_pid)

                def on_ack(g=g, st=st, thr=thr):
                    thr["ack"] = self.throttled(g)
                    self.delivered(g, st)
                res, t_ack = g.exec_shell(st["cmd"], on_ack=on_ack)
                use1 = process_usage(g.qemu_pid)
                use = [b - a for a, b in zip(use0, use1)] if use0 and use1 else None
                if use:
                    self.command_usage = [t + d for t, d in zip(self.command_usage, use)]
                # throttled: a period throttled between ready and ack (its
                # time may not be accounted yet: the count decides)
                throttled = thr_ms = None
                if thr["ready"] and thr.get("ack"):
                    throttled = thr["ack"][0] > thr["ready"][0]
                    thr_ms = (thr["ack"][1] - thr["ready"][1]) / 1e3 if throttled else 0.0
                deliv = None if t_ack is None else (t_ack - t_ready) / 1e6
                if deliv is not None:
                    self.delivery_ms.append(deliv)
                    self.deliveries.append((g.name, st["step"], deliv, throttled))
                    if throttled:
                        self.delivery_throttled += 1
                    elif throttled is False:
                        self.delivery_unthrottled_ms.append(deliv)
                ok_rc = res["exit_code"] == st["exit_code"]
                ok_dig = res["stdout_sha256"] == st["stdout_sha256"]
                self.check(f"{g.name}/step{st['step']}", ok_rc and ok_dig,
                           exit_code=res["exit_code"], expected_exit_code=st["exit_code"],
                           digest_ok=ok_dig)
                ev.emit("step_done", run=self.key, vm=g.name, step=st["step"],
                        exit_code=res["exit_code"], digest_ok=ok_dig,
                        delivery_ms=None if deliv is None else round(deliv, 3),
                        delivery_throttled_ms=None if thr_ms is None else round(thr_ms, 3),
                        exec_ms=round(res.get("duration_ns", 0) / 1e6, 3),
                        vmm_user_ms=None if use is None else round(use[0] * 1e3),
                        vmm_sys_ms=None if use is None else round(use[1] * 1e3),
                        vmm_minflt=None if use is None else use[2],
                        vmm_majflt=None if use is None else use[3])
            res, _ = g.exec_shell(FINAL_DIFF_CMD)
            self.check(f"{g.name}/final-git-diff",
                       res["stdout_sha256"] == self.bench.header["final_diff_sha256"],
                       sha256=res["stdout_sha256"])
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.check(f"{g.name}/replay", False, error=str(e))
        out[g.name] = now_ns()
        ev.emit("vm_complete", run=self.key, vm=g.name)

    def run(self):
        b, a = self.bench, self.bench.args
        workroot = os.path.join(b.outdir, "vms", self.key)
        os.makedirs(workroot, exist_ok=True)
        swap_before = vmstat()
        if self.cohort == "swap":
            b.swapfile.on()
        b.events.emit("run_start", run=self.key, cohort=self.cohort, rep=self.rep)
        try:
            for i in range(a.vms):
                name = f"r{os.getpid()}-{self.key}-vm{i}"
                wd = os.path.join(workroot, f"vm{i}")
                os.makedirs(wd, exist_ok=True)
                cg = (b.cgroups.create(f"{b.run_id}/{self.key}-vm{i}", a.cpu_quota)
                      if b.cgroups.usable() else None)
                self.guests.append(Guest(b, name, self.cohort, wd,
                                         os.path.join(b.sockdir, self.key, f"vm{i}"), cg))
            if a.transport == "vsock" or self.cohort in VMNAP_COHORTS or self.via_gateway:
                for g in self.guests:
                    g.vmnapd_run_dir = os.path.join(b.sockdir, self.key, "vmnapd")
                extra = []
                if self.cohort in COHORT_SETTINGS:
                    conf = os.path.join(workroot, "vmnapd.conf")
                    with open(conf, "w") as f:
                        json.dump(COHORT_SETTINGS[self.cohort], f)
                    extra = ["-c", conf]
                self.vmnapd = Vmnapd(b.vmnapd_for(self.cohort), os.path.join(b.sockdir, self.key, "vmnapd"),
                                     os.path.join(a.store_dir, f"replay-{b.run_id}", self.key),
                                     workroot, [g.vsock_spec() for g in self.guests], extra,
                                     env=COHORT_ENV.get(self.cohort))
                self.vmnapd.wait_for([g.vhost_user for g in self.guests])
                self.api = self.vmnapd.api
            if self.via_gateway:
                # Every cohort's agent goes through the gateway; for baseline
                # and swap vmnapd knows the VM (its vsock device) unmanaged.
                self.gateway = Gateway(b.gateway_exe, a.trajectory,
                                       os.path.join(b.sockdir, self.key, "gw"), workroot,
                                       os.path.join(self.vmnapd.run_dir, "api.sock"),
                                       [g.name for g in self.guests])
            for g in self.guests:
                g.start()
            for g in self.guests:
                g.wait_ready()
                if self.cohort in VMNAP_COHORTS:
                    self.api.register(g.name, g.qmp, f"{g.vsock}_{VMNAP_LINK_PORT}",
                                      COHORT_POLICY[self.cohort],
                                      freezer=b.cgroups.freezer_dir(g.cg_dirs),
                                      restore=COHORT_RESTORE.get(self.cohort))
                    if b.sched:
                        vcpus, main = schedtrace.vm_threads(g.qemu_pid)
                        if vcpus:
                            b.sched_targets.append((self, g.name, vcpus, main,
                                                    self.vmnapd.events_path))
                        else:   # zeros for the vCPU would read as "no vCPU time"
                            log(f"sched trace: {g.name}: no thread of QEMU "
                                f"{g.qemu_pid} is named as a vCPU (CPU n/...): left out")
                elif self.via_gateway:
                    self.api.register_unmanaged(g.name)
            t0 = now_ns()
            sampler = Sampler(b, self.guests, a.sample_ms / 1000, t0,
                              count_swap=self.cohort == "swap")
            stat0 = {g.name: b.cgroups.memory_stat(g.cg_dirs) if g.cg_dirs else {}
                     for g in self.guests}
            sampler.start()
            release = threading.Event()
            done = {}
            threads = [threading.Thread(target=self.replay_vm, args=(g, release, done))
                       for g in self.guests]
            for t in threads:
                t.start()
            t_release = b.events.emit("release", run=self.key, vms=len(self.guests))["t_ns"]
            release.set()
            for t in threads:
                t.join()
            for t in self.reclaims:
                t.join()
            t_end = max(done.values())
            sampler.stop()
            stat1 = {g.name: b.cgroups.memory_stat(g.cg_dirs) if g.cg_dirs else {}
                     for g in self.guests}
            self.summarise(sampler, t0, t_release, t_end, swap_before, stat0, stat1)
        finally:
            if self.gateway:
                m = self.gateway.metrics()
                rcs = self.gateway.stop()
                self.result["gateway"] = {
                    k: m.get(f"vmnap_gateway_{k}_total") for k in
                    ("requests", "waits_started", "waits_ready", "held", "hold_timeouts",
                     "unmanaged", "client_gone")}
                self.result["gateway"]["hold_ms"] = (
                    None if m.get("vmnap_gateway_hold_ns_total") is None
                    else round(m["vmnap_gateway_hold_ns_total"] / 1e6, 3))
                want = len(self.bench.steps) * len(self.guests)
                self.check("gateway-waits", self.result["gateway"]["waits_started"] == want
                           and not self.result["gateway"]["unmanaged"],
                           waits_started=self.result["gateway"]["waits_started"],
                           unmanaged=self.result["gateway"]["unmanaged"], expected=want)
                self.check("gateway-exit", all(rc in (0, -signal.SIGTERM) for rc in rcs),
                           exit_status=rcs)
            for g in self.guests:
                g.stop()
                self.result.setdefault("accel", {})[g.name] = g.accel
                if g.cg_dirs:
                    b.cgroups.remove(g.cg_dirs)
            if self.vmnapd:
                rc = self.vmnapd.stop()
                self.check("vmnapd-exit", rc in (0, -signal.SIGTERM), exit_status=rc)
                self.vmnapd_lost = (event_seq_gaps(self.vmnapd.events_path)
                                    if os.path.exists(self.vmnapd.events_path) else 0)
                if self.cohort in VMNAP_COHORTS:
                    fig = vmnapd_event_figures(self.vmnapd.events_path)
                    self.result.update(resume_figures(fig))
                    if not self.via_gateway:    # the waits are the replayer's
                        self.result.update(delivery_split(self.deliveries,
                                                          fig["data_found"]))
                shutil.rmtree(os.path.join(a.store_dir, f"replay-{b.run_id}", self.key),
                              ignore_errors=True)
            if self.cohort == "swap":
                b.swapfile.off()
            b.events.emit("run_end", run=self.key)
        return self.result

    def summarise(self, sampler, t0, t_release, t_end, swap_before, stat0, stat1):
        rel_s, end_s = (t_release - t0) / NS, (t_end - t0) / NS
        window = end_s - rel_s
        series = {}  # vm -> list of (t, ram, pss, cg)
        for t, vm, ram, pss, cg, _gap in sampler.rows:
            series.setdefault(vm, []).append((t, ram, pss, cg))
        self.samples = [(self.cohort, self.rep) + r for r in sampler.rows]

        def integral(col):
            total = 0.0
            for pts in series.values():
                pts = [p for p in pts if rel_s <= p[0] <= end_s and p[col] >= 0]
                for p, q in zip(pts, pts[1:]):
                    total += (p[col] + q[col]) / 2 * (q[0] - p[0])
            return total / GIB

        def totals(col):
            ticks = {}
            for pts in series.values():
                for p in pts:
                    if rel_s <= p[0] <= end_s and p[col] >= 0:
                        ticks.setdefault(round(p[0], 3), 0)
                        ticks[round(p[0], 3)] += p[col]
            return list(ticks.values())

        r = self.result
        for col, name in ((1, "guest_ram"), (2, "vmm_pss"), (3, "cgroup")):
            r[f"{name}_memxtime_gib_s"] = round(integral(col), 6)
            tot = totals(col)
            r[f"{name}_mean_mib"] = round(statistics.mean(tot) / MIB, 3) if tot else None
            r[f"{name}_peak_mib"] = round(max(tot) / MIB, 3) if tot else None
        r["completion_window_s"] = round(window, 3)
        r["throughput_per_min"] = round(len(self.guests) / (window / 60), 4) if window > 0 else None
        for p in (50, 95, 99):
            v = percentile(self.delivery_ms, p)
            r[f"delivery_p{p}_ms"] = None if v is None else round(v, 3)
        r["delivery_samples"] = len(self.delivery_ms)
        if self.delivery_throttled or self.delivery_unthrottled_ms:
            r["delivery_throttled"] = self.delivery_throttled
            for p in (50, 99):
                v = percentile(self.delivery_unthrottled_ms, p)
                r[f"delivery_unthrottled_p{p}_ms"] = None if v is None else round(v, 3)
        if not self.via_gateway:    # data ready -> the command's result, every VM
            r["command_vmm_user_s"] = round(self.command_usage[0], 2)
            r["command_vmm_sys_s"] = round(self.command_usage[1], 2)
            r["command_vmm_minflt"], r["command_vmm_majflt"] = self.command_usage[2:]
        r["_delivery_ms"] = list(self.delivery_ms)  # for the plot, not the summary
        gaps = sampler.gaps_ms
        r["max_sample_gap_ms"] = round(max(gaps), 3) if gaps else None
        r["samples"] = len(sampler.rows)
        r["sample_read_max_ms"] = sampler.read_max_ms
        r["vmm_pss_max_age_ms"] = round(sampler.pss_age_max_ms, 3)
        r["sampler_priority"] = sampler.priority
        faults = sum(stat1[v].get("pgmajfault", 0) - stat0[v].get("pgmajfault", 0) for v in stat1)
        r["major_faults"] = faults
        if self.cohort == "swap":
            vs = vmstat()
            r["offloaded_bytes"] = self.swapped_out_bytes
            r["host_pswpout_bytes"] = (vs["pswpout"] - swap_before["pswpout"]) * PAGE
            r["host_pswpin_bytes"] = (vs["pswpin"] - swap_before["pswpin"]) * PAGE
            r["reclaim_errors"] = self.reclaim_errors
            r["store_written_bytes"] = r["host_pswpout_bytes"]  # written to the swap file
        elif self.cohort in VMNAP_COHORTS:
            vms = {}
            for g in self.guests:
                try:
                    vms[g.name] = self.api.vm(g.name)
                except (OSError, RuntimeError) as e:
                    vms[g.name] = {"error": str(e)}
            r["vmnapd_vms"] = vms
            r["major_faults"] = sum(v.get("pager", {}).get("faults", 0) for v in vms.values())
            r["store_written_bytes"] = sum(
                v.get("pager", {}).get("dirty", {}).get("store_written_bytes", 0)
                for v in vms.values())
        else:
            r["offloaded_bytes"] = 0
            r["store_written_bytes"] = 0



# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.header, self.steps = load_trajectory(args.trajectory)
        self.cgroups = Cgroups()
        self.rootfs = None
        self.run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
        self.outdir = os.path.join(ROOT, args.out, self.run_id)
        self.swapfile = SwapFile(os.path.join(args.store_dir, f"replay-swapfile-{self.run_id}"),
                                 args.vms * args.mem + SWAPFILE_MARGIN_MIB)
        # --sched-trace: the recording, and per managed VM (its run,
        # name, vCPU thread ids, main thread id, vmnapd's events file)
        self.sched = None
        self.sched_targets = []

    def build_rootfs(self):
        p = subprocess.run([os.path.join(ROOT, "scripts/guest-rootfs.sh")], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"guest-rootfs.sh failed: {p.stderr.strip()}")
        self.rootfs = self.pin(p.stdout.strip().splitlines()[-1], "rootfs.img")
        p = subprocess.run([os.path.join(ROOT, "scripts/mkinitramfs.sh")], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"mkinitramfs.sh failed: {p.stderr.strip()}")
        self.initrd = self.pin(os.path.join(ROOT, p.stdout.strip().splitlines()[-1]),
                               "initramfs.cpio.gz")
        # The daemon and the shim as built now: the tree is shared and
        # rebuilt under a long run.
        self.vmnapd_exe = self.preload = self.gateway_exe = None
        for name, attr in (("vmnapd", "vmnapd_exe"), ("libvmnap-preload.so", "preload"),
                           ("vmnap-gateway", "gateway_exe")):
            built = os.path.join(ROOT, BUILD, name)
            if os.path.exists(built):
                dst = os.path.join(self.outdir, name)
                shutil.copy2(built, dst)
                setattr(self, attr, dst)
        self.builds = {"tree": build_info(self.outdir, git_head())}
        self.take_alt_build()

    def take_alt_build(self):
        """offload-alt's binaries (--alt-build), copied into the run's
        directory as this tree's are, and recorded in self.builds."""
        self.alt = None
        if getattr(self.args, "alt_build", None):
            altdir = os.path.join(self.outdir, "alt")
            os.makedirs(altdir)
            for name in ALT_BINARIES:
                shutil.copy2(os.path.join(self.args.alt_build, name), os.path.join(altdir, name))
            rev = None
            if os.path.isfile(os.path.join(self.args.alt_build, "REV")):
                with open(os.path.join(self.args.alt_build, "REV")) as f:
                    rev = f.read().strip()
            self.alt = {name: os.path.join(altdir, name) for name in ALT_BINARIES}
            self.builds["alt"] = dict(build_info(altdir, rev), dir=self.args.alt_build)

    def vmnapd_for(self, cohort):
        """The vmnapd a cohort runs: offload-alt's from --alt-build."""
        return self.alt["vmnapd"] if cohort == ALT_COHORT else self.vmnapd_exe

    def preload_for(self, cohort):
        """The preload shim a cohort's VMM loads (offload-alt's from
        --alt-build: it speaks that vmnapd's protocol)."""
        return self.alt["libvmnap-preload.so"] if cohort == ALT_COHORT else self.preload

    def warm_shared_cache(self):
        """Boot one throwaway guest before the first cohort, outside every
        cohort's cgroup, and read the daemon and the shim.  The page cache
        of what all VMs share (QEMU's binary and libraries, its firmware,
        the guest kernel and initramfs: about 100 MiB here) is charged to
        the memory cgroup that first reads it and stays there; without
        this the first cohort's first VM carried it for the whole cohort
        (in the capacity benchmark, a baseline budget 100 MiB smaller than
        the others').  A failure is logged and recorded, not fatal."""
        a = self.args
        t0 = time.monotonic()
        wd = tempfile.mkdtemp(prefix="vmnap-warm.")
        cmd = [os.path.join(ROOT, "scripts/run-guest.sh"), "--name", f"warm{os.getpid()}",
               "--mem", str(a.mem), "--timeout", str(WARMUP_TIMEOUT_S),
               "--log", os.path.join(wd, "console.log"), "--qmp", os.path.join(wd, "qmp"),
               "--rootfs", self.rootfs, "--initrd", self.initrd,
               "--append", "no_timer_check", "--", "true"]
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=launcher_env(a), capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=WARMUP_TIMEOUT_S + 30)
            err = None if p.returncode == 0 else \
                f"warm-up guest exited {p.returncode}: {p.stderr.strip()[-300:]}"
        except subprocess.TimeoutExpired:
            err = "warm-up guest did not finish"
        finally:
            shutil.rmtree(wd, ignore_errors=True)
        for path in (self.vmnapd_exe, self.preload, self.gateway_exe,
                     *(self.alt.values() if self.alt else ())):
            if path:
                with open(path, "rb") as f:
                    while f.read(1 << 20):
                        pass
        self.warmup = {"ok": err is None, "s": round(time.monotonic() - t0, 3)}
        if err:
            self.warmup["error"] = err
            log(f"warm-up: {err}: the first cohort may be charged the shared page cache")
        else:
            log(f"warm-up: shared page cache read in {self.warmup['s']} s")

    def pin(self, image, name):
        """A hard link pins this run's image: a rebuild (the tree is shared)
        replaces the path, never the inode this run's guests boot from."""
        dst = os.path.join(self.outdir, name)
        if os.path.lexists(dst):
            os.unlink(dst)
        try:
            os.link(image, dst)
            return dst
        except OSError:
            shutil.copyfile(image, dst)
            return dst

    def plan(self):
        """Cohort runs in interleaved order: each repetition rotates the
        order.  Batches of runs started together: one run each, or with
        --side-by-side a repetition's runs all at once."""
        cohorts = list(self.args.cohorts)
        batches = []
        for rep in range(self.args.repeats):
            k = rep % len(cohorts)
            order = [(c, rep) for c in cohorts[k:] + cohorts[:k]]
            batches += [order] if self.args.side_by_side else [[r] for r in order]
        return batches

    def run_cohort(self, cohort, rep):
        """One cohort run and its result; a failure is recorded in it, the
        rest goes on."""
        log(f"run {cohort} rep {rep} ({self.args.vms} VM)")
        cr = CohortRun(self, cohort, rep)
        try:
            return cr, cr.run()
        except Exception as e:  # noqa: BLE001 - recorded, the rest goes on
            cr.check("run", False, error=str(e))
            return cr, dict(cr.result, error=str(e))

    def run_batch(self, batch):
        """A batch's runs, at once when it holds more than one (their VMs
        share the machine's moments: a ratio between them is not moved by
        the machine's drift), in plan order."""
        if len(batch) == 1:
            return [self.run_cohort(*batch[0])]
        done = [None] * len(batch)

        def one(i, cohort, rep):
            done[i] = self.run_cohort(cohort, rep)
        threads = [threading.Thread(target=one, args=(i, c, r), name=f"{c}-r{r}")
                   for i, (c, r) in enumerate(batch)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return done

    def sched_breakdown(self):
        """Each managed run's sched_ack_* figures from the recording (one
        pass over it for every VM's threads)."""
        tids = {t for _, _, vcpus, main, _ in self.sched_targets for t in vcpus + [main]}
        states = schedtrace.thread_states(self.sched.lines(), tids)
        rows = {}
        for cr, name, vcpus, main, events in self.sched_targets:
            if os.path.exists(events):
                rows.setdefault(cr, []).extend(schedtrace.ack_rows(
                    states, vcpus, main, schedtrace.resume_windows(events, name)))
        for cr, r in rows.items():
            cr.result.update(schedtrace.breakdown(r))
        log(f"sched trace: {sum(len(r) for r in rows.values())} resume(s) broken down "
            f"({self.sched.data})")

    def run(self):
        os.makedirs(self.outdir, exist_ok=True)
        for link in ("latest", f"latest-{self.args.vms}vm"):
            latest = os.path.join(os.path.dirname(self.outdir), link)
            if os.path.islink(latest) or os.path.exists(latest):
                os.unlink(latest)
            os.symlink(self.run_id, latest)
        self.events = EventLog(os.path.join(self.outdir, "events.jsonl"))
        self.build_rootfs()
        self.warm_shared_cache()
        cohorts = list(self.args.cohorts)
        skipped = {}
        why = vmnap_missing()
        if why:
            for c in VMNAP_COHORTS:
                if c in cohorts:
                    skipped[c] = why
        for c in DEFAULT_COHORTS:
            if c not in cohorts:
                skipped[c] = "not in --cohorts"
        if self.args.transport == "vsock" and not vmnapd_bridges():
            for c in cohorts:
                skipped.setdefault(c, f"the vsock transport needs vmnapd's bridge "
                                      f"({BUILD}/vmnapd --vsock), not built yet")
        self.args.cohorts = [c for c in cohorts if c not in skipped]
        self.sockdir = tempfile.mkdtemp(prefix="vmnap-replay.")
        runs, checks, samples = [], [], []
        self.vmnapd_lost = 0
        self.gateway_calibration = None
        try:
            if self.args.via == "gateway" and self.args.cohorts:
                try:
                    self.gateway_calibration = calibrate(
                        self.gateway_exe, self.vmnapd_exe, self.args.trajectory,
                        os.path.join(self.sockdir, "calib"), self.args.gw_calib)
                except (RuntimeError, OSError) as e:
                    checks.append({"run": "calibration", "name": "gateway-calibration",
                                   "passed": False, "error": str(e)})
                    log(f"gateway calibration FAILED: {e}")
            if getattr(self.args, "sched_trace", False):
                self.sched = schedtrace.SchedTrace(self.outdir)
                self.sched.start()
            for batch in self.plan():
                for cr, result in self.run_batch(batch):
                    runs.append(result)
                    checks += cr.checks
                    samples += getattr(cr, "samples", [])
                    self.vmnapd_lost += cr.vmnapd_lost
            if self.sched:
                self.sched.stop()
                try:
                    self.sched_breakdown()
                except (OSError, RuntimeError, ValueError, KeyError) as e:
                    log(f"sched trace: not broken down ({e}); the run's figures stand")
        finally:
            if self.sched:
                self.sched.stop()
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.swapfile.remove()
            self.cgroups.remove_run(self.run_id)
            shutil.rmtree(os.path.join(self.args.store_dir, f"replay-{self.run_id}"),
                          ignore_errors=True)
            self.events.close()
        return write_outputs(self, runs, checks, samples, skipped)
