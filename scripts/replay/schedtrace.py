# SPDX-License-Identifier: GPL-2.0-only
"""The host scheduler's view of each resume (`run --sched-trace`).

vmnapd's `resume` events time RESUMED -> RESUME_ACK and the faults and the
module's unquiesce inside it; what is left is the guest's way from its
thaw to the link and back, which no counter of vmnap's breaks down.  From
the outside it is what the VMM's threads did meanwhile: this records the
host's sched_switch and sched_wakeup events for the whole run (`perf
record -a`, CLOCK_MONOTONIC, the clock of vmnapd's events) and, for every
acknowledged resume of a managed VM, splits its RESUMED -> RESUME_ACK into
the vCPU thread's time running, runnable (waiting for a CPU: preempted, or
its cgroup's CPU quota spent) and asleep (blocked on a userfaultfd fault,
or the guest halted: "halt" is the sleep beyond the resume's faults'
service time), and the QEMU main thread's
time runnable: under TCG QEMU has no irqfd, so the main thread injects
the interrupt that tells the guest about RESUMED, and a main thread that
waits for a CPU leaves the guest asleep.  run-guest.sh names QEMU's
threads (-name debug-threads=on): the vCPU threads are "CPU n/TCG" or
"CPU n/KVM".
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

from .common import percentile

SLOW_ACK_MS = 5.0       # a RESUMED -> RESUME_ACK this long counts as slow
MARK_MS = 1.0           # ... and is put down to what took this long in it
PARTS = ("vcpu_run", "vcpu_runnable", "vcpu_sleep", "vcpu_halt", "main_runnable")
# breakdown()'s keys: per-run figures, cohort medians in summary.json
FIELDS = (("sched_ack_resumes", "sched_ack_slow")
          + tuple(f"sched_ack_{n}_p{q}_ms" for n in PARTS for q in (50, 99))
          + tuple(f"sched_ack_slow_{n}" for n in PARTS))

_LINE = re.compile(r"^\s*.+?\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(sched_\w+):\s+(.*)$")
_SWITCH = re.compile(r"prev_pid=(\d+) .*?prev_state=(\S+) ==> .*?next_pid=(\d+)")
_WAKEUP = re.compile(r"\bpid=(\d+)\b")


def missing():
    """Why --sched-trace cannot run here, or None."""
    if not shutil.which("perf"):
        return "perf not found (Debian package linux-perf: make deps)"
    if os.geteuid() != 0:
        return "perf record -a needs root"
    return None


class SchedTrace:
    """perf record of the host's context switches and wakeups, in @outdir."""

    def __init__(self, outdir):
        self.data = os.path.join(outdir, "sched.data")
        self.log_path = os.path.join(outdir, "sched-perf.log")
        self.proc = None

    def start(self):
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["perf", "record", "-a", "-q", "-k", "CLOCK_MONOTONIC",
             "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-o", self.data],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        for _ in range(50):     # perf writes its header once it records
            if self.proc.poll() is not None:
                raise RuntimeError(f"perf record exited {self.proc.returncode}: "
                                   f"see {self.log_path}")
            if os.path.exists(self.data) and os.path.getsize(self.data) > 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"perf record wrote nothing in 5 s: see {self.log_path}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def lines(self):
        """perf script's lines for the recording."""
        p = subprocess.Popen(["perf", "script", "-i", self.data,
                              "-F", "comm,pid,tid,cpu,time,event,trace"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        yield from p.stdout
        p.wait()


def thread_states(lines, tids):
    """For each of @tids, its state changes as (t_ns, state), state one of
    "run", "runnable", "sleep", from perf script's sched_switch and
    sched_wakeup lines."""
    out = {t: [] for t in tids}
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        t = int(round(float(m.group(4)) * 1e9))
        ev, rest = m.group(5), m.group(6)
        if ev == "sched_switch":
            s = _SWITCH.search(rest)
            if not s:
                continue
            prev, state, nxt = int(s.group(1)), s.group(2), int(s.group(3))
            if prev in out:
                out[prev].append((t, "runnable" if state.startswith("R") else "sleep"))
            if nxt in out:
                out[nxt].append((t, "run"))
        elif ev == "sched_wakeup":
            w = _WAKEUP.search(rest)
            if w and int(w.group(1)) in out:
                out[int(w.group(1))].append((t, "runnable"))
    return out


def occupancy(states, a, b):
    """ns in each state within [a, b] for one thread's state changes; the
    state before the first change in view is taken from the last one
    before @a (none known: not counted)."""
    out = {"run": 0, "runnable": 0, "sleep": 0}
    state, last = None, a
    for t, s in states:
        if t <= a:
            state = s
            continue
        if t >= b:
            break
        if state:
            out[state] += t - last
        state, last = s, t
    if state:
        out[state] += b - last
    return out


def resume_windows(events_path, vm):
    """(reason, RESUMED sent ns, RESUME_ACK ns, faults' service ns) of every
    acknowledged resume of VM @vm in vmnapd's events (a resume event is
    written when it ends; its faults are those from the request on)."""
    out = []
    with open(events_path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") != "resume" or not e.get("acked") or e.get("vm") != vm:
                continue
            start = e["t_ns"] - e["total_ns"]
            sent = start + e["pre_resume_ns"] + e["vmm_ns"] + e["resumed_ns"]
            out.append((e.get("reason"), sent, sent + e["ack_ns"], e.get("fault_ns") or 0))
    return out


def ack_rows(states, vcpus, main, windows):
    """Per resume window, in ms: (RESUMED -> RESUME_ACK, the vCPU threads'
    time running, runnable, asleep, asleep beyond the resume's faults'
    service time (the guest halted: waiting for an interrupt), the main
    thread's time runnable)."""
    rows = []
    for _, a, b, fault_ns in windows:
        v = {"run": 0, "runnable": 0, "sleep": 0}
        for tid in vcpus:
            o = occupancy(states.get(tid, []), a, b)
            for k in v:
                v[k] += o[k]
        m = occupancy(states.get(main, []), a, b)
        rows.append(((b - a) / 1e6, v["run"] / 1e6, v["runnable"] / 1e6, v["sleep"] / 1e6,
                     max(0, v["sleep"] - fault_ns) / 1e6, m["runnable"] / 1e6))
    return rows


def breakdown(rows):
    """summary.json's sched_ack_* figures of one run from its ack_rows:
    p50/p99 (ms) over its resumes of each of PARTS (ack_rows) within
    RESUMED -> RESUME_ACK; of the slow ones (>= SLOW_ACK_MS), how many had
    MARK_MS or more of each."""
    out = {"sched_ack_resumes": len(rows)}
    for i, name in enumerate(PARTS, 1):
        for q in (50, 99):
            v = percentile([r[i] for r in rows], q)
            out[f"sched_ack_{name}_p{q}_ms"] = None if v is None else round(v, 3)
    slow = [r for r in rows if r[0] >= SLOW_ACK_MS]
    out["sched_ack_slow"] = len(slow)
    for i, name in enumerate(PARTS, 1):
        out[f"sched_ack_slow_{name}"] = sum(1 for r in slow if r[i] >= MARK_MS)
    return out


def vm_threads(qemu_pid):
    """(vCPU thread ids, main thread id) of a running QEMU."""
    vcpus = []
    task = f"/proc/{qemu_pid}/task"
    for tid in os.listdir(task):
        try:
            with open(os.path.join(task, tid, "comm")) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith("CPU ") and "/" in comm:
            vcpus.append(int(tid))
    return sorted(vcpus), qemu_pid
